"""geoopt's test properties on hypermc's models: the gyrovector laws (left cancellation,
gyrocommutativity, gyroassociativity, gyration identities, coaddition), Möbius scalar
multiplication, expmap/logmap inverses, parallel transport, distances, geodesics,
midpoints and gyroplanes — plain float64 and MC (nc = 2), with the MC residuals
``u^2``-small. Values (distances) are checked against mpmath in test_stereographic.py;
here each law is checked as an identity between two computed sides."""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall, ProductManifold, Scaled, Sphere, SphereProjection, Stereographic

F64 = torch.float64

MODELS = [PoincareBall(), PoincareBall(c=0.5), Stereographic(k=-1.5), Stereographic(k=0.0), Stereographic(k=0.8), SphereProjection(k=2.0)]
#: the residual allowed in each law: plain float64 and nc = 2 (points at radius <~ 3)
TOL = {None: 1e-12, 2: 1e-27}


def _pts(M, n, nc, seed, std=0.7):
    g = torch.Generator().manual_seed(seed)
    x = M.random(n, 3, std=std, dtype=F64, generator=g)
    return x if nc is None else hm.mc(x, nc=nc)


def _err(a, b):
    d = a - b
    return float((d.approx() if isinstance(d, hm.MCTensor) else d).abs().max())


def _close(a, b, nc, scale=1.0):
    assert _err(a, b) < TOL[nc] * scale, _err(a, b)


@pytest.fixture(params=[None, 2], ids=["float64", "nc2"])
def nc(request):
    return request.param


@pytest.fixture(params=MODELS, ids=repr)
def M(request):
    return request.param


def test_left_cancellation_and_inverse(M, nc):
    x, y = _pts(M, 5, nc, 1), _pts(M, 5, nc, 2)
    _close(M.mobius_add(-x, M.mobius_add(x, y)), y, nc)  # (-x) ⊕ (x ⊕ y) = y
    _close(M.mobius_add(-x, x), 0 * x, nc)
    _close(M.mobius_sub(x, x), 0 * x, nc)
    _close(M.mobius_add(x, 0 * x), x, nc)
    _close(M.mobius_add(0 * x, x), x, nc)


def test_gyration_laws(M, nc):
    x, y, z = _pts(M, 5, nc, 3), _pts(M, 5, nc, 4), _pts(M, 5, nc, 5)
    _close(M.mobius_add(x, y), M.gyration(x, y, M.mobius_add(y, x)), nc)  # gyrocommutative
    _close(M.mobius_add(x, M.mobius_add(y, z)), M.mobius_add(M.mobius_add(x, y), M.gyration(x, y, z)), nc, 10)  # left gyroassociative
    _close(M.mobius_add(M.mobius_add(x, y), z), M.mobius_add(x, M.mobius_add(y, M.gyration(y, x, z))), nc, 10)  # right
    _close(M.gyration(x, y, M.gyration(y, x, z)), z, nc)  # gyr[x, y] gyr[y, x] = id
    _close(M.gyration(x, y, z).norm(dim=-1) if nc is None else hm.mc(0.0, nc=2), z.norm(dim=-1) if nc is None else hm.mc(0.0, nc=2), nc)
    n1 = (M.gyration(x, y, z) * M.gyration(x, y, z)).sum(-1)
    _close(n1, (z * z).sum(-1), nc)  # an isometry of R^n
    # the gyration as geoopt defines it: ⊖(x ⊕ y) ⊕ (x ⊕ (y ⊕ z))
    _close(M.gyration(x, y, z), M.mobius_add(-M.mobius_add(x, y), M.mobius_add(x, M.mobius_add(y, z))), nc, 10)


def test_coaddition_laws(M, nc):
    x, y = _pts(M, 5, nc, 6, std=0.4), _pts(M, 5, nc, 7, std=0.4)
    _close(M.mobius_coadd(x, y), M.mobius_coadd(y, x), nc)  # commutative
    _close(M.mobius_coadd(x, y), M.mobius_add(x, M.gyration(x, -y, y)), nc, 10)  # x ⊞ y = x ⊕ gyr[x, -y] y
    _close(M.mobius_add(M.mobius_cosub(x, y), y), x, nc, 10)  # (x ⊟ y) ⊕ y = x


def test_scalar_multiplication_laws(M, nc):
    x = _pts(M, 5, nc, 8, std=0.5)
    _close(M.mobius_scalar_mul(1.0, x), x, nc)
    _close(M.mobius_scalar_mul(2.0, x), M.mobius_add(x, x), nc)  # n-addition
    # scalars exact in binary, so that r s and r + s are the exact product and sum
    _close(M.mobius_scalar_mul(0.5, M.mobius_scalar_mul(1.5, x)), M.mobius_scalar_mul(0.75, x), nc)  # associative
    _close(M.mobius_scalar_mul(0.25 + 0.5, x), M.mobius_add(M.mobius_scalar_mul(0.25, x), M.mobius_scalar_mul(0.5, x)), nc)  # distributive
    _close(M.mobius_scalar_mul(-1.0, x), -x, nc)
    _close(M.dist0(M.mobius_scalar_mul(0.75, x)), 0.75 * M.dist0(x), nc)  # scales the distance from 0
    w = torch.tensor([0.5, 2.0, 1.5], dtype=F64)
    _close(M.mobius_pointwise_mul(0 * w + 2.0, x), M.mobius_scalar_mul(2.0, x), nc)
    eye = torch.eye(3, dtype=F64)
    a, b = torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, -0.3], [0.2, 0.0, 0.8]], dtype=F64), torch.diag(w)
    if nc is not None:
        eye, a, b = hm.mc(eye, nc=nc), hm.mc(a, nc=nc), hm.mc(b, nc=nc)
    _close(M.mobius_matvec(eye, x), x, nc)
    # (AB) ⊗ x = A ⊗ (B ⊗ x) while no image wraps around the sphere (angles below pi)
    xs = M.mobius_scalar_mul(0.25, x)
    _close(M.mobius_matvec(a @ b, xs), M.mobius_matvec(a, M.mobius_matvec(b, xs)), nc, 10)


def test_maps_are_inverse(M, nc):
    x, y = _pts(M, 5, nc, 9), _pts(M, 5, nc, 10)
    _close(M.expmap(x, M.logmap(x, y)), y, nc, 10)
    u = M.logmap(x, y)
    _close(M.logmap(x, M.expmap(x, u)), u, nc, 10)
    _close(M.expmap0(M.logmap0(y)), y, nc)
    _close(M.norm(x, M.logmap(x, y)), M.dist(x, y), nc)  # |log_x y|_x = d(x, y)
    _close(M.mobius_fn_apply(lambda v: v, x), x, nc)
    _close(M.mobius_fn_apply_chain(x, torch.neg, torch.neg), x, nc)


def test_transport_preserves_inner_products(M, nc):
    x, y = _pts(M, 5, nc, 11), _pts(M, 5, nc, 12)
    u, v = M.logmap(x, _pts(M, 5, nc, 13)), M.logmap(x, _pts(M, 5, nc, 14))
    pu, pv = M.transp(x, y, u), M.transp(x, y, v)
    _close(M.inner(y, pu, pv), M.inner(x, u, v), nc, 10)
    _close(M.transp(x, y, M.logmap(x, y)), -M.logmap(y, x), nc, 10)
    _close(M.transp(y, x, pu), u, nc, 10)
    _close(M.transp0back(y, M.transp0(y, u)), u, nc)
    _close(M.transp0(y, u), M.transp(M.origin(5, 3, dtype=F64) if nc is None else M.origin(5, 3, nc=nc, dtype=F64), y, u), nc)
    # geoopt's form: P_{x -> y} v = gyr[y, -x] v lambda_x / lambda_y
    _close(pu, M.gyration(y, -x, u) * (M.lambda_x(x, keepdim=True) / M.lambda_x(y, keepdim=True)), nc, 10)
    y2, w = M.expmap_transp(x, u, v)
    _close(M.inner(y2, w, w), M.inner(x, v, v), nc, 10)


def test_distance_laws(M, nc):
    x, y, z = _pts(M, 5, nc, 15), _pts(M, 5, nc, 16), _pts(M, 5, nc, 17)
    _close(M.dist(x, y), M.dist(y, x), nc)
    _close(M.dist(x, x), 0 * M.dist(x, x), nc)
    slack = M.dist(x, y) + M.dist(y, z) - M.dist(x, z)
    assert float((slack.approx() if nc else slack).min()) > -TOL[nc]  # triangle inequality
    _close(M.dist2(x, y), M.dist(x, y) ** 2, nc)
    # the distance is invariant under left gyro-translation: d(a ⊕ x, a ⊕ y) = d(x, y)
    a = _pts(M, 5, nc, 18, std=0.3)
    _close(M.dist(M.mobius_add(a, x), M.mobius_add(a, y)), M.dist(x, y), nc, 10)


def test_geodesics_midpoints_and_gyroplanes(M, nc):
    x, y = _pts(M, 5, nc, 19), _pts(M, 5, nc, 20)
    d = M.dist(x, y)
    for t in (0.0, 0.25, 1.0):
        _close(M.dist(x, M.geodesic(t, x, y)), t * d, nc, 10)
    _close(M.geodesic(1.0, x, y), y, nc, 10)
    u = M.logmap(x, y)
    _close(M.geodesic_unit(d.unsqueeze(-1), x, u), y, nc, 10)
    two = torch.stack([x, y]) if nc is None else hm.mc(torch.stack([x.approx(), y.approx()]), nc=nc)
    m = M.weighted_midpoint(two, reducedim=[0])
    xs, ys = (x, y) if nc is None else (two[0], two[1])
    _close(M.dist(m, xs), M.dist(m, ys), nc, 10)  # the midpoint of two points: equidistant
    _close(M.dist(m, xs), M.dist(xs, ys) / 2, nc, 10)  # ... and on the geodesic
    # gyroplane through p with normal a: p itself is on it, and the distance is a true distance
    p, a = _pts(M, 5, nc, 21, std=0.3), _pts(M, 5, nc, 22)
    _close(M.dist2plane(p, p, a), 0 * M.dist2plane(p, p, a), nc)
    s = M.dist2plane(x, p, a, signed=True)
    _close(M.dist2plane(x, p, -a, signed=True), -s, nc)


@pytest.mark.parametrize("nc", [None, 2])
def test_lorentz_sphere_and_scaled_laws(nc):
    g = torch.Generator().manual_seed(23)
    for M in (Lorentz(k=2.0), Sphere(), Scaled(PoincareBall(), 3.0), Scaled(Sphere(), 0.5)):
        x, y, z = (M.random(5, 4, std=0.7, dtype=F64, generator=g) for _ in range(3))
        if nc is not None:
            x, y, z = (M.projx(hm.mc(t, nc=nc)) for t in (x, y, z))
        _close(M.expmap(x, M.logmap(x, y)), y, nc, 100)
        _close(M.dist(x, y), M.dist(y, x), nc, 10)
        u, v = M.logmap(x, z), M.logmap(x, y)
        pu, pv = M.transp(x, y, u), M.transp(x, y, v)
        _close(M.inner(y, pu, pv), M.inner(x, u, v), nc, 100)
        _close(pv, -M.logmap(y, x), nc, 100)
        u0 = M.logmap0(z)  # tangent at the origin
        _close(M.transp0back(y, M.transp0(y, u0)), u0, nc, 100)
        assert M.check_vector_on_tangent(y, pu) is True


def test_scaled_distances_scale():
    x, y = torch.tensor([0.5, 0.1], dtype=F64), torch.tensor([-0.3, 0.6], dtype=F64)
    B, S3 = PoincareBall(), Scaled(PoincareBall(), 3.0)
    assert abs(float(S3.dist(x, y) - 3 * B.dist(x, y))) < 1e-14
    assert abs(float(S3.dist0(x) - 3 * B.dist0(x))) < 1e-14
    assert S3.curvature == -1.0 / 9.0
    L = Scaled(Sphere(), torch.tensor(2.0), learnable=True)
    L.dist(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])).backward()
    assert abs(float(L.log_scale.grad) - 2 * torch.pi / 2) < 1e-6  # d(s d0)/d log s = s d0 = pi


@pytest.mark.parametrize("nc", [None, 2])
def test_product_manifold_laws(nc):
    M = ProductManifold((PoincareBall(), 2), (Sphere(), 3), (Lorentz(), 3), (Stereographic(k=0.5), 2))
    g = torch.Generator().manual_seed(24)
    x, y, z = (M.random(5, 10, std=0.6, dtype=F64, generator=g) for _ in range(3))
    if nc is not None:
        x, y, z = (M.projx(hm.mc(t, nc=nc)) for t in (x, y, z))
    assert M.check_point(x) == (True, None)
    parts = [m.dist(a, b) for m, a, b in zip(M.manifolds, M.split(x), M.split(y))]
    _close(M.dist(x, y) ** 2, sum(p * p for p in parts), nc, 10)
    _close(M.expmap(x, M.logmap(x, y)), y, nc, 100)
    u, v = M.logmap(x, z), M.logmap(x, y)
    _close(M.inner(y, M.transp(x, y, u), M.transp(x, y, v)), M.inner(x, u, v), nc, 100)
    _close(M.norm(x, v), M.dist(x, y), nc, 10)
    assert M.check_vector_on_tangent(x, u) is True
    with pytest.raises(ValueError, match=r"ProductManifold: the last dimension must be 10 \(sizes \[2, 3, 3, 2\]\); got shape \(5, 11\)"):
        M.split(torch.zeros(5, 11))
    bad = M.origin(10, dtype=F64)
    bad[2] = 3.0  # off the sphere factor
    ok, reason = M.check_point(bad)
    assert not ok and reason.startswith("factor 1 (Sphere()):")


def test_product_and_scaled_parameters_refuse_pickling():
    import io

    for M in (ProductManifold((Sphere(), 2), (Sphere(), 2)), Scaled(PoincareBall(), 2.0)):
        p = hm.ManifoldParameter(M.origin(M.min_dim if isinstance(M, ProductManifold) else 2), manifold=M)
        with pytest.raises(
            TypeError, match=r"cannot be pickled \(only Euclidean, LearnableLorentz, LearnablePoincareBall, Lorentz, PoincareBall"
        ):
            torch.save(p, io.BytesIO())
