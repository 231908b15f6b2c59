"""geoopt's conventions on hypermc's manifolds: constructors, ``dim=``, factories, checks,
``ManifoldTensor``, and the optimizers on a ``geoopt.ManifoldParameter``.

The comparisons with geoopt itself (``pytest.importorskip("geoopt")``) run where the
optional extra ``compat`` is installed (``.ci/run`` installs it)."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import (
    Euclidean,
    Lorentz,
    ManifoldParameter,
    ManifoldTensor,
    PoincareBall,
    PoincareHalfspace,
    ProductManifold,
    Scaled,
    Sphere,
    SphereProjection,
    Stereographic,
    manifold_of,
)
from hypermc.manifolds.geoopt_compat import from_geoopt, is_geoopt_manifold
from hypermc.optim import RiemannianAdam, RiemannianSGD

F64 = torch.float64


def _x(*v):
    return torch.tensor(v, dtype=F64)


# ------------------------------------------------------------------ constructors


def test_geoopt_curvature_arguments_map_to_the_hypermc_curvature():
    assert PoincareBall(c=2.0) == PoincareBall(curvature=-2.0)
    assert PoincareBall(c=torch.tensor(0.5)).curvature == -0.5
    assert PoincareBall(c=2.0).k == -2.0 and PoincareBall(c=2.0).c == 2.0
    assert Lorentz(k=4.0) == Lorentz(curvature=-0.25)
    assert Lorentz(k=4.0).k == 4.0
    # geoopt's Lorentz(k): <x, x>_L = -k, origin (sqrt k, 0, ...)
    o = Lorentz(k=4.0).origin(3, dtype=F64)
    assert o.tolist() == [2.0, 0.0, 0.0]
    assert float(Lorentz(k=4.0).inner(o, o, o)) == -4.0
    # the same distances as the ball of curvature -1/k (the ball's expmap0 travels 2|u|)
    x = Lorentz(k=4.0).expmap0(_x(0.0, 1.0, 0.5))
    b = PoincareBall(curvature=-0.25).expmap0(_x(0.5, 0.25))
    assert abs(float(PoincareBall(curvature=-0.25).dist0(b)) - float(Lorentz(k=4.0).dist0(x))) < 1e-12
    assert abs(float(Lorentz(k=4.0).dist0(x)) - math.hypot(1.0, 0.5)) < 1e-12
    assert Stereographic(k=-2.0).curvature == -2.0 and SphereProjection(k=3.0).curvature == 3.0
    assert PoincareBall() == PoincareBall(curvature=-1.0) and Lorentz().k == 1.0


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: PoincareBall(c=1.0, curvature=-1.0),
            TypeError,
            r"PoincareBall: pass either curvature= \(hypermc's K < 0\) or c= \(geoopt's\), not both",
        ),
        (lambda: PoincareBall(c=-1.0), ValueError, r"PoincareBall: c must be .*> 0.*; got -1\.0"),
        (lambda: PoincareBall(c=0.0), ValueError, r"PoincareBall: c must be"),
        (lambda: Lorentz(k=float("nan")), ValueError, r"Lorentz: k must be"),
        (
            lambda: type("SubLorentz", (Lorentz,), {"name": "sub_lorentz_for_test"})(k=1.0, learnable=True),
            TypeError,
            r"SubLorentz: learnable=True is not supported by this class; PoincareBall\(c=\.\.\., learnable=True\), Lorentz",
        ),
        (lambda: Lorentz(k=torch.tensor(1.0, requires_grad=True)), TypeError, r"Lorentz: k must be a float or a 0-d plain tensor"),
        (lambda: PoincareBall(1.0), TypeError, r"or PoincareBall\(c=\.\.\.\) \(geoopt's meaning\)"),
        (lambda: SphereProjection(k=-1.0), ValueError, r"SphereProjection: k must be > 0"),
        (lambda: Stereographic(k=torch.ones(2)), TypeError, r"Stereographic: k must be a float or a 0-d floating tensor"),
        (lambda: Scaled(Sphere(), 0.0), ValueError, r"Scaled: scale must be"),
    ],
)
def test_bad_geoopt_arguments_are_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ------------------------------------------------------------------ dim= and keepdim


@pytest.mark.parametrize("nc", [None, 2])
@pytest.mark.parametrize("M", [PoincareBall(), Lorentz(), Stereographic(k=0.5), Sphere()], ids=repr)
def test_dim_keyword_moves_the_point_dimension(M, nc, rng):
    n = 3
    x0 = M.random(4, 5, n, dtype=F64, generator=rng, std=0.5)
    y0 = M.random(4, 5, n, dtype=F64, generator=rng, std=0.5)
    if nc is not None:
        x0, y0 = M.projx(hm.mc(x0, nc=nc)), M.projx(hm.mc(y0, nc=nc))
    u0 = M.proju(x0, M.logmap(x0, y0) * 0.3)
    # the same points with the point dimension first / in the middle
    for dim in (0, 1, -3, -2):
        x, y, u = (t.movedim(-1, dim) for t in (x0, y0, u0))
        d = M.dist(x, y, dim=dim)
        assert d.shape == (4, 5)
        torch.testing.assert_close(_plain(d), _plain(M.dist(x0, y0)))
        assert M.dist(x, y, dim=dim, keepdim=True).shape == x.shape[: dim % 3] + (1,) + x.shape[dim % 3 + 1 :]
        torch.testing.assert_close(_plain(M.expmap(x, u, dim=dim)), _plain(M.expmap(x0, u0).movedim(-1, dim)))
        torch.testing.assert_close(_plain(M.logmap(x, y, dim=dim)), _plain(M.logmap(x0, y0).movedim(-1, dim)))
        torch.testing.assert_close(_plain(M.inner(x, u, dim=dim, keepdim=True)), _plain(M.inner(x0, u0, keepdim=True).movedim(-1, dim)))
        y1, v1 = M.expmap_transp(x, u, u, dim=dim)
        torch.testing.assert_close(_plain(v1), _plain(M.transp(x0, M.expmap(x0, u0), u0).movedim(-1, dim)))


def _plain(t):
    return t.approx() if isinstance(t, hm.MCTensor) else t


def test_dim_keyword_errors():
    M = PoincareBall()
    with pytest.raises(ValueError, match=r"PoincareBall\.dist: dim=3 is out of range for x of shape \(2, 3\)"):
        M.dist(torch.zeros(2, 3), torch.zeros(2, 3), dim=3)
    with pytest.raises(TypeError, match=r"PoincareBall\.dist: dim must be an int; got float"):
        M.dist(torch.zeros(2, 3), torch.zeros(2, 3), dim=1.0)


@pytest.mark.parametrize("M", [PoincareBall(), Stereographic(k=0.5), Lorentz()], ids=repr)
def test_geoopt_project_true_is_accepted_and_false_refused(M):
    """geoopt's ``project=True`` (its default) changes nothing: every point hypermc returns
    goes through projx. ``project=False`` would ask for the raw formula: refused."""
    from hypermc.manifolds.base import PROJECT_ARGS

    x, y = M.random(3, M.point_size(2), dtype=F64, std=0.5), M.random(3, M.point_size(2), dtype=F64, std=0.5)
    u = M.proju(x, M.logmap(x, y))
    assert torch.equal(M.expmap(x, u, project=True), M.expmap(x, u))
    assert torch.equal(M.expmap0(M.logmap0(y), project=True, dim=-1), M.expmap0(M.logmap0(y)))
    if hasattr(M, "mobius_add"):
        assert torch.equal(M.mobius_add(x, y, project=True), M.mobius_add(x, y))
        assert torch.equal(M.mobius_matvec(torch.eye(2, dtype=F64), x, project=True), M.mobius_matvec(torch.eye(2, dtype=F64), x))
    name = type(M).__name__
    with pytest.raises(ValueError, match=rf"{name}\.expmap: project=False is not available: hypermc returns every point through projx"):
        M.expmap(x, u, project=False)
    with pytest.raises(TypeError, match=rf"{name}\.expmap0: project must be a bool; got int"):
        M.expmap0(u, project=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'project'"):
        M.dist(x, y, project=True)  # geoopt's dist has no project either
    assert {"expmap", "expmap0", "mobius_add"} <= PROJECT_ARGS


def test_dim_is_accepted_by_the_gyrovector_methods():
    M = PoincareBall()
    x, y = _x(0.3, -0.2, 0.1)[:, None], _x(-0.1, 0.5, 0.2)[:, None]  # points along dim 0
    torch.testing.assert_close(M.mobius_add(x, y, dim=0)[:, 0], M.mobius_add(x[:, 0], y[:, 0]))
    torch.testing.assert_close(M.lambda_x(x, dim=0), M.lambda_x(x[:, 0]).reshape(1))
    torch.testing.assert_close(M.mobius_scalar_mul(2.0, x, dim=0)[:, 0], M.mobius_scalar_mul(2.0, x[:, 0]))


# ------------------------------------------------------------------ factories


@pytest.mark.parametrize("M", [PoincareBall(), PoincareHalfspace(), Lorentz(), Euclidean(), Stereographic(k=1.0), Sphere()], ids=repr)
def test_random_and_origin_return_plain_tensors_of_the_default_dtype(M):
    for x in (M.random(3, 2), M.origin(3, 2), M.random_normal(3, 2)):
        assert type(x) is torch.Tensor and x.dtype == torch.get_default_dtype() == torch.float32
    x = M.random(3, 2, nc=2, dtype=F64)
    assert isinstance(x, hm.MCTensor) and x.nc == 2 and x.dtype == F64
    assert M.origin(3, 2, dtype=F64).dtype == F64 and type(M.origin(3, 2, dtype=F64)) is torch.Tensor


def test_wrapped_normal_is_centred_on_its_mean(rng):
    M = PoincareBall()
    m = _x(0.9, 0.0)
    x = M.wrapped_normal(4000, 2, mean=m, std=0.1, generator=rng)
    assert x.dtype == F64 and M.check_point(x) == (True, None)
    # Riemannian coordinates N(0, 0.1^2) at the mean: E d^2 = 2 * 0.01
    d2 = M.dist(x, m) ** 2
    assert abs(float(d2.mean()) - 0.02) < 0.002
    xm = M.wrapped_normal(10, 2, mean=hm.mc(m, nc=2), std=0.1, generator=rng)
    assert isinstance(xm, hm.MCTensor) and xm.nc == 2
    # geoopt's dtype= / device=: the mean's, or a clear error
    same = M.wrapped_normal(10, 2, mean=m, std=0.1, dtype=F64, device="cpu", generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(same, M.wrapped_normal(10, 2, mean=m, std=0.1, generator=torch.Generator().manual_seed(1)), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"PoincareBall\.wrapped_normal: dtype torch\.float32 differs from mean's torch\.float64"):
        M.wrapped_normal(10, 2, mean=m, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"PoincareBall\.wrapped_normal: device meta differs from mean's cpu"):
        M.wrapped_normal(10, 2, mean=m, device="meta")


# ------------------------------------------------------------------ checks


def test_check_point_on_manifold_and_vector_on_tangent_follow_geoopt():
    M = PoincareBall()
    assert M.check_point_on_manifold(_x(0.5, 0.0)) is True
    ok, reason = M.check_point_on_manifold(_x(2.0, 0.0), explain=True)
    assert ok is False and "outside the ball" in reason
    with pytest.raises(ValueError, match=r"PoincareBall: x is not a point of PoincareBall\(curvature=-1\): norm >= 1/sqrt\(c\)"):
        M.assert_check_point_on_manifold(_x(2.0, 0.0))
    L = Lorentz()
    o = L.origin(3, dtype=F64)
    assert L.check_vector_on_tangent(o, _x(0.0, 1.0, 2.0)) is True
    ok, reason = L.check_vector_on_tangent(o, _x(1.0, 1.0, 2.0), explain=True)
    assert not ok and "not tangent" in reason
    with pytest.raises(ValueError, match=r"Lorentz: u is not tangent at x: \|<x, u>_L\|"):
        L.assert_check_vector_on_tangent(o, _x(1.0, 1.0, 2.0))
    assert Sphere().check_vector_on_tangent(_x(1.0, 0.0), _x(0.5, 1.0), explain=True)[0] is False
    assert M.check_vector_on_tangent(_x(0.5, 0.0), _x(float("nan"), 0.0), explain=True)[1].startswith("contains inf or NaN")


# ------------------------------------------------------------------ Lorentz extras


def test_lorentz_inner0_norm_of_one_argument_and_transp0():
    L = Lorentz(k=4.0)
    v = _x(3.0, 1.0, 2.0)
    assert float(L.inner0(v)) == -6.0
    assert float(L.norm(_x(0.0, 3.0, 4.0))) == 5.0
    y = L.expmap0(_x(0.0, 1.0, -2.0))
    u = _x(0.0, 0.5, 0.25)
    w = L.transp0(y, u)
    assert abs(float(L.inner(y, y, w))) < 1e-12  # tangent at y
    torch.testing.assert_close(L.transp0back(y, w), u)
    assert abs(float(L.norm(y, L.logmap0back(y))) - float(L.dist0(y))) < 1e-12


# ------------------------------------------------------------------ ManifoldTensor


def test_manifold_tensor_methods():
    M = PoincareBall()
    t = ManifoldTensor(_x(0.5, 0.0), manifold=M)
    assert t.manifold is M and type(t + 1) is torch.Tensor
    u = _x(0.0, 0.3)
    torch.testing.assert_close(t.expmap(u), M.expmap(_x(0.5, 0.0), u))
    torch.testing.assert_close(t.dist(_x(-0.3, 0.6)), M.dist(_x(0.5, 0.0), _x(-0.3, 0.6)))
    assert float(t.dist(_x(0.5, 1.0), p=1)) == 1.0  # torch's Tensor.dist for p != 2
    s = ManifoldTensor(_x(3.0, 4.0), manifold=Sphere())
    assert s.proj_() is s and torch.allclose(s, _x(0.6, 0.8))
    p = ManifoldParameter(_x(0.5, 0.0), manifold=M)
    torch.testing.assert_close(p.retr(u), M.retr(_x(0.5, 0.0), u))
    assert torch.load(_roundtrip(t), weights_only=True).manifold == M


def _roundtrip(t):
    import io

    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    return buf


# ------------------------------------------------------------------ optimizers and foreign parameters


def test_optimizers_refuse_a_parameter_with_an_unknown_manifold():
    p = torch.nn.Parameter(_x(0.5, 0.0))
    p.manifold = "ball"
    p.sum().backward()
    with pytest.raises(TypeError, match=r"has a manifold attribute of type str, which is not a hypermc manifold"):
        RiemannianSGD([p], lr=0.1).step()
    with pytest.raises(TypeError, match=r"from_geoopt: expected a geoopt manifold; got int"):
        from_geoopt(3)
    assert manifold_of(torch.nn.Parameter(torch.zeros(2))) is None and not is_geoopt_manifold(PoincareBall())


# ------------------------------------------------------------------ against geoopt (optional extra)


def test_riemannian_sgd_takes_a_riemannian_step_on_a_geoopt_parameter():
    geoopt = pytest.importorskip("geoopt")
    gp = geoopt.ManifoldParameter(_x(0.9, 0.0), manifold=geoopt.PoincareBall())
    ref = geoopt.ManifoldParameter(_x(0.9, 0.0), manifold=geoopt.PoincareBall(c=torch.tensor(1.0, dtype=F64)))
    for p in (gp, ref):
        p[0].backward()
    RiemannianSGD([gp], lr=0.18).step()
    geoopt.optim.RiemannianSGD([ref], lr=0.18).step()
    # a Euclidean step would give (0.72, 0); the Riemannian one travels lr / lambda along the axis
    with mpmath.workdps(40):
        lam = 2 / (1 - mpmath.mpf("0.9") ** 2)
        exact = mpmath.tanh(mpmath.atanh(mpmath.mpf("0.9")) - mpmath.mpf("0.18") / (2 * lam))
    assert float(gp.detach()[1]) == 0.0 and abs(float(gp.detach()[0]) - float(exact)) < 1e-15
    # geoopt's own step is 1.3e-5 off here (its float32 softplus curvature and clamps)
    assert abs(float(gp.detach()[0]) - float(ref.detach()[0])) < 1e-4
    assert round(float(gp.detach()[0]), 4) == 0.8984


@pytest.mark.parametrize("opt", [RiemannianSGD, RiemannianAdam])
def test_geoopt_parameters_step_like_hypermc_parameters(opt):
    geoopt = pytest.importorskip("geoopt")
    cases = [
        (geoopt.PoincareBall(c=2.0), PoincareBall(c=2.0), _x(0.3, -0.2)),
        (geoopt.Stereographic(k=0.75), Stereographic(k=0.75), _x(0.3, -0.2)),
        (geoopt.SphereProjection(k=0.75), SphereProjection(k=0.75), _x(0.3, -0.2)),
        (geoopt.Lorentz(k=2.0), Lorentz(k=2.0), Lorentz(k=2.0).expmap0(_x(0.0, 0.3, -0.2))),
        (geoopt.Sphere(), Sphere(), _x(0.6, 0.8)),
        (geoopt.Euclidean(ndim=1), Euclidean(), _x(0.3, -0.2)),
        (geoopt.Scaled(geoopt.PoincareBall(), 2.0), Scaled(PoincareBall(), 2.0), _x(0.3, -0.2)),
    ]
    for gm, hmm, x in cases:
        conv = from_geoopt(gm)  # geoopt keeps k (or softplus^-1 of it) in float32
        assert type(conv) is type(hmm) and abs(conv.curvature - hmm.curvature) < 1e-6, (conv, hmm)
        gp = geoopt.ManifoldParameter(x.clone(), manifold=gm)
        hp = ManifoldParameter(x.clone(), manifold=conv)
        ref = geoopt.ManifoldParameter(x.clone(), manifold=gm)
        for p in (gp, hp, ref):
            (p * torch.arange(1.0, 1.0 + x.numel(), dtype=F64)).sum().backward()
        opt([gp], lr=0.05).step()
        opt([hp], lr=0.05).step()
        torch.testing.assert_close(gp.data, hp.data, rtol=0, atol=1e-15, msg=repr(gm))
        assert not torch.equal(gp.data, x)
        if opt is RiemannianSGD:  # geoopt's step is a retraction: the same with retraction=True
            again = geoopt.ManifoldParameter(x.clone(), manifold=gm)
            (again * torch.arange(1.0, 1.0 + x.numel(), dtype=F64)).sum().backward()
            RiemannianSGD([again], lr=0.05, retraction=not isinstance(hmm, Lorentz)).step()  # geoopt: Lorentz.retr = expmap
            geoopt.optim.RiemannianSGD([ref], lr=0.05).step()
            torch.testing.assert_close(again.data, ref.data, rtol=0, atol=1e-6, msg=repr(gm))


def test_learnable_geoopt_curvature_is_read_when_stepping():
    geoopt = pytest.importorskip("geoopt")
    gm = geoopt.Stereographic(k=-1.0, learnable=True)
    with torch.no_grad():
        gm.k.fill_(-0.5)
    assert from_geoopt(gm) == Stereographic(k=-0.5)


def test_refuses_geoopt_manifolds_without_a_counterpart():
    geoopt = pytest.importorskip("geoopt")
    p = geoopt.ManifoldParameter(torch.eye(3, 2, dtype=F64), manifold=geoopt.Stiefel())
    p.sum().backward()
    with pytest.raises(TypeError, match=r"geoopt\.CanonicalStiefel has no hypermc counterpart"):
        RiemannianSGD([p], lr=0.1).step()
    torus = from_geoopt(geoopt.ProductManifold((geoopt.Sphere(), 2), (geoopt.Sphere(), 2)))
    assert torus == ProductManifold((Sphere(), 2), (Sphere(), 2))
    with pytest.raises(TypeError, match=r"geoopt\.Sphere with an intersection or complement subspace"):
        from_geoopt(geoopt.Sphere(intersection=torch.eye(3, 2)))


@pytest.mark.parametrize("k", [-1.0, -0.3, 0.0, 0.7])
def test_values_agree_with_geoopt_inside_its_accurate_range(k, rng):
    """Where float64 suffices (points well inside the ball), hypermc and geoopt agree."""
    geoopt = pytest.importorskip("geoopt")
    G, H = geoopt.Stereographic(k=torch.tensor(k, dtype=F64)), Stereographic(k=k)  # geoopt computes with its k's dtype
    x, y = H.random(6, 3, dtype=F64, generator=rng), H.random(6, 3, dtype=F64, generator=rng)
    z, u = 0.3 * torch.randn(6, 3, dtype=F64, generator=rng), 0.3 * torch.randn(6, 3, dtype=F64, generator=rng)
    pairs = [
        (H.mobius_add(x, y), G.mobius_add(x, y)),
        (H.mobius_sub(x, y), G.mobius_sub(x, y)),
        (H.mobius_coadd(x, y), G.mobius_coadd(x, y)),
        (H.mobius_cosub(x, y), G.mobius_cosub(x, y)),
        (H.gyration(x, y, z), G.gyration(x, y, z)),
        (H.mobius_scalar_mul(-1.7, x), G.mobius_scalar_mul(torch.tensor(-1.7, dtype=F64), x)),
        (H.mobius_pointwise_mul(z, x), G.mobius_pointwise_mul(z, x)),
        (H.dist(x, y), G.dist(x, y)),
        (H.dist2(x, y), G.dist2(x, y)),
        (H.dist0(x), G.dist0(x)),
        (H.lambda_x(x), G.lambda_x(x)),
        (H.expmap(x, u), G.expmap(x, u)),
        (H.logmap(x, y), G.logmap(x, y)),
        (H.expmap0(u), G.expmap0(u)),
        (H.logmap0(x), G.logmap0(x)),
        (H.transp(x, y, u), G.transp(x, y, u)),
        (H.transp0(y, u), G.transp0(y, u)),
        (H.transp0back(y, u), G.transp0back(y, u)),
        (H.geodesic(0.3, x, y), G.geodesic(torch.tensor(0.3, dtype=F64), x, y)),
        (H.geodesic_unit(0.8, x, u), G.geodesic_unit(torch.tensor(0.8, dtype=F64), x, u)),
        (H.dist2plane(x, y, z, signed=True), G.dist2plane(x, y, z, signed=True)),
        (H.dist2plane(x, y, z, scaled=True, keepdim=True), G.dist2plane(x, y, z, scaled=True, keepdim=True)),
        (H.weighted_midpoint(x), G.weighted_midpoint(x)),
        (
            H.weighted_midpoint(x, torch.arange(1.0, 7.0, dtype=F64), lincomb=True),
            G.weighted_midpoint(x, torch.arange(1.0, 7.0, dtype=F64), lincomb=True),
        ),
        (H.mobius_fn_apply(torch.tanh, x), G.mobius_fn_apply(torch.tanh, x)),
        (H.mobius_fn_apply_chain(x, torch.tanh, torch.neg), G.mobius_fn_apply_chain(x, torch.tanh, torch.neg)),
        (H.antipode(x), G.antipode(x)),
    ]
    if k < 0:  # the ball with geoopt's c gives the same values
        B = PoincareBall(c=-k)  # geoopt.PoincareBall(c) keeps c through a float32 softplus: compare with G
        pairs += [
            (B.mobius_coadd(x, y), G.mobius_coadd(x, y)),
            (B.gyration(x, y, z), G.gyration(x, y, z)),
            (B.weighted_midpoint(x), G.weighted_midpoint(x)),
            (B.dist2plane(x, y, z), G.dist2plane(x, y, z)),
            (B.dist(x, y), G.dist(x, y)),
        ]
    for i, (a, b) in enumerate(pairs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=f"pair {i}")


def test_lorentz_agrees_with_geoopt():
    geoopt = pytest.importorskip("geoopt")
    G, H = geoopt.Lorentz(k=2.0), Lorentz(k=2.0)
    x = H.expmap0(_x(0.0, 0.4, -0.3))
    v = _x(1.0, 0.5, 0.25)
    torch.testing.assert_close(H.inner0(v), G.inner0(v))
    torch.testing.assert_close(H.dist0(x), G.dist0(x))
    u = H.proju(x, v)
    torch.testing.assert_close(H.transp0back(x, u), G.transp0back(x, u))
    torch.testing.assert_close(H.transp0(x, H.proju(H.origin(3, dtype=F64), v)), G.transp0(x, H.proju(H.origin(3, dtype=F64), v)))
    torch.testing.assert_close(H.norm(u), G.norm(u))


def test_hypermc_is_accurate_where_geoopt_is_not():
    """Close points at 1 - |x| = 1e-6 (geoopt's Möbius form cancels; mpmath decides)."""
    geoopt = pytest.importorskip("geoopt")
    x, y = _x(1 - 1e-6, 0.0), _x(1 - 2e-6, 0.0)
    with mpmath.workdps(50):
        X, Y = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(float(v)) for v in y]
        num = sum((a - b) ** 2 for a, b in zip(X, Y))
        exact = float(mpmath.acosh(1 + 2 * num / ((1 - sum(a * a for a in X)) * (1 - sum(b * b for b in Y)))))
    ours = float(PoincareBall(c=1.0).dist(x, y))
    theirs = float(geoopt.PoincareBall(c=torch.tensor(1.0, dtype=F64)).dist(x, y))
    assert abs(ours - exact) / exact < 1e-15
    assert abs(theirs - exact) / exact > 1e-5  # 2.8e-5 with geoopt 0.5.1


def test_sphere_projection_antipode_where_geoopt_fails():
    geoopt = pytest.importorskip("geoopt")
    x = _x(0.5, -0.25)
    H, G = SphereProjection(k=0.5), geoopt.SphereProjection(k=torch.tensor(0.5, dtype=F64))
    a = H.antipode(x)
    exact = math.pi / math.sqrt(0.5)
    assert abs(float(H.dist(x, a)) - exact) < 1e-15 * exact
    assert abs(float(G.dist(x, a)) - exact) > 0.5 * exact  # 0.955 with geoopt 0.5.1 (docs/geoopt.md)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_weighted_midpoint_any_point_dim_matches_geoopt(dim):
    geoopt = pytest.importorskip("geoopt")
    g = torch.Generator().manual_seed(3)
    xs = (torch.rand(2, 3, 2, generator=g, dtype=torch.float64) - 0.5) * 0.8
    # geoopt's own projection uses the input's dim after the reduction (an IndexError for
    # dim >= 1 here), so it is asked with the point dim last
    want = geoopt.PoincareBall(c=1.0).weighted_midpoint(xs, dim=-1)
    got = PoincareBall(c=1.0).weighted_midpoint(xs.movedim(-1, dim), dim=dim)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)  # geoopt rounds more (float64 throughout)


def test_weighted_midpoint_lower_rank_weights_broadcast_from_the_right():
    g = torch.Generator().manual_seed(4)
    xs = (torch.rand(2, 3, 2, generator=g, dtype=torch.float64) - 0.5) * 0.8
    w = torch.rand(3, generator=g, dtype=torch.float64)
    M = PoincareBall()
    got = M.weighted_midpoint(xs, w, reducedim=[1])
    want = torch.stack([M.weighted_midpoint(xs[i], w) for i in range(2)])
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    moved = M.weighted_midpoint(xs.permute(0, 2, 1), w, reducedim=[2], dim=1)
    torch.testing.assert_close(moved, want, rtol=1e-14, atol=1e-14)
