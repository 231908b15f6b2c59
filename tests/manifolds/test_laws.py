"""Geometric laws of each model at radii up to its MC range (float64, nc = 2).

Tolerances are hyperbolic lengths (or relative values) of 1e-6 — the MC range is
defined as the radius up to which stored points resolve 1e-6 (docs/manifolds.md table) — and the
radii below are chosen inside it: ball and halfspace up to 55, Lorentz up to 25.
Tangent vectors have random directions and hyperbolic lengths <= 1 ("local" laws).

Far pairs: ``expmap(x, logmap(x, y)) = y`` over a geodesic of length ``d`` amplifies the
error of the initial direction by ``sinh(d)`` (geodesics diverge exponentially — a
property of the geometry, not of the arithmetic); the direction is accurate to about
``u^nc e^r`` (ball, halfspace) or ``u^nc e^(2r)`` (Lorentz), so far pairs are tested
where ``u^nc e^(r + d)`` (resp. ``e^(2r + d)``) stays below 1e-6: points at radius 20
and 10 (ball, halfspace) and 12 and 6 (Lorentz).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from tests.manifolds import points as P

F64 = torch.float64
NC = 2
TOL = 1e-6

MODELS = {  # (class, radii of x, radii of the far points)
    "halfspace": (PoincareHalfspace, [0.5, 10.0, 30.0, 55.0], [1.0, 20.0, 10.0, 20.0]),
    "ball": (PoincareBall, [0.5, 10.0, 30.0, 55.0], [1.0, 20.0, 10.0, 20.0]),
    "lorentz": (Lorentz, [0.5, 5.0, 15.0, 25.0], [1.0, 12.0, 6.0, 12.0]),
}


def _points(name, radii, seed, n=2):
    return P.to_mc([P.point(name, r, P.unit(n, seed + i)) for i, r in enumerate(radii)], NC)


def _tangent(M, x, seed, length):
    """Random tangent vectors at x of hyperbolic length ``length`` (tensor or float)."""
    e = hm.mc(torch.randn(x.shape, dtype=F64, generator=torch.Generator().manual_seed(seed)), nc=NC)
    u = M.proju(x, e)
    return u * (length / M.norm(x, u, keepdim=True))


@pytest.fixture(params=sorted(MODELS), scope="module")
def setup(request):
    name = request.param
    cls, radii, far_radii = MODELS[name]
    M = cls()
    x = _points(name, radii, 0)
    assert isinstance(x, hm.MCTensor) and x.dtype == F64 and x.nc == NC
    lengths = torch.tensor([[0.3], [1.0], [0.01], [0.7]], dtype=F64)
    y = M.expmap(x, _tangent(M, x, 100, lengths))  # near pairs
    far = _points(name, far_radii, 50)  # far points
    return name, M, x, y, far


def test_check_points(setup):
    _, M, x, y, far = setup
    for pts in (x, y, far):
        assert M.check_point(pts) == (True, None)


def test_dist_to_itself_is_zero(setup):
    _, M, x, _, _ = setup
    d = M.dist(x, x)
    assert (d.components == 0).all()


def test_symmetry(setup):
    _, M, x, y, far = setup
    for a, b in ((x, y), (x, far)):
        d1, d2 = M.dist(a, b), M.dist(b, a)
        assert ((d1 - d2).abs() <= 1e-28 * d1.abs()).all()


def test_triangle_inequality(setup):
    _, M, x, y, far = setup
    dxy, dyz, dxz = M.dist(x, y), M.dist(y, far), M.dist(x, far)
    assert (dxz <= dxy + dyz + TOL).all()
    assert (dxy <= dxz + dyz + TOL).all()


@pytest.mark.parametrize("pair", ["near", "far"])
def test_expmap_of_logmap(setup, pair):
    name, M, x, y, far = setup
    if pair == "far":  # both points inside the far radii (see the module docstring)
        x = _points(name, MODELS[name][2][::-1], 70)
    z = y if pair == "near" else far
    back = M.expmap(x, M.logmap(x, z))
    err = M.dist(back, z).approx()
    assert (err <= TOL).all(), err


def test_logmap_norm_is_dist(setup):
    _, M, x, y, far = setup
    for z in (y, far):
        d = M.dist(x, z)
        assert ((M.norm(x, M.logmap(x, z)) - d).abs() <= TOL * (1 + d)).all()


def test_dist_of_expmap_is_norm(setup):
    _, M, x, _, _ = setup
    u = _tangent(M, x, 7, torch.tensor([[0.5], [1.0], [1e-8], [0.25]], dtype=F64))
    n = M.norm(x, u)
    err = (M.dist(x, M.expmap(x, u)) - n).abs().approx()
    assert (err <= TOL * n.approx()).all(), err


def test_transp_preserves_inner(setup):
    _, M, x, y, far = setup
    u, v = _tangent(M, x, 11, 1.0), _tangent(M, x, 12, 1.0)
    for z in (y, far):
        pu, pv = M.transp(x, z, u), M.transp(x, z, v)
        err = (M.inner(z, pu, pv) - M.inner(x, u, v)).abs().approx()
        assert (err <= TOL).all(), err
        assert ((M.norm(z, pu) - 1).abs() <= TOL).all()


def test_transp_of_logmap(setup):
    """P_{x->y} log_x y = -log_y x (the geodesic's velocity is parallel)."""
    _, M, x, y, _ = setup
    pu = M.transp(x, y, M.logmap(x, y))
    diff = pu + M.logmap(y, x)
    assert (M.norm(y, diff) <= TOL).all()


def test_projx_idempotent(setup):
    _, M, x, y, _ = setup
    p = M.projx(torch.cat([x, y]))
    pp = M.projx(p)
    assert torch.equal(p.components, pp.components)
    assert (M.dist(p, torch.cat([x, y])).approx() <= TOL).all()


def test_origin_maps(setup):
    _, M, x, _, _ = setup
    o = M.origin(x.shape[-1], nc=2, dtype=F64)
    assert M.check_point(o) == (True, None)
    d0 = M.dist(o, x)
    assert ((M.dist0(x) - d0).abs() <= TOL * (1 + d0)).all()
    back = M.expmap0(M.logmap0(x))
    assert (M.dist(back, x).approx() <= TOL).all()
    assert ((M.norm(o, M.logmap0(x)) - d0).abs() <= TOL * (1 + d0)).all()


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), radius=st.floats(0.0, 55.0), length=st.floats(0.0, 1.0))
@example(seed=0, radius=0.0, length=0.0)
@example(seed=1, radius=55.0, length=1.0)
def test_ball_halfspace_laws_hypothesis(seed, radius, length):
    """Random near pairs in the ball and the halfspace: d(x, x) = 0, symmetry,
    d(x, exp_x u) = |u|_x, exp(log) = id."""
    for name, M in (("ball", PoincareBall()), ("halfspace", PoincareHalfspace())):
        x = P.to_mc([P.point(name, radius, P.unit(3, seed))], NC)
        u = _tangent(M, x, seed, length)
        y = M.expmap(x, u)
        assert (M.dist(x, x).components == 0).all()
        d = M.dist(x, y)
        assert ((d - M.dist(y, x)).abs() <= 1e-28 * (1 + d)).all()
        assert ((d - length).abs() <= TOL).all()
        assert (M.dist(M.expmap(x, M.logmap(x, y)), y).approx() <= TOL).all()


def test_leading_dimensions_broadcast(setup):
    """A single base point against a batch (shape (1, n) with (4, n)) gives the same
    values as the explicitly expanded call, for every two-argument map."""
    _, M, x, y, far = setup
    x1 = x[1:2]
    xe = torch.cat([x1] * x.shape[0], dim=0)
    u = M.proju(xe, _tangent(M, xe, 21, 0.5))
    cases = {
        "expmap": (lambda a: M.expmap(a, u)),
        "retr": (lambda a: M.retr(a, u)),
        "logmap": (lambda a: M.logmap(a, far)),
        "dist": (lambda a: M.dist(a, far)),
        "transp": (lambda a: M.transp(a, far, u)),
    }
    for name, f in cases.items():
        got, want = f(x1), f(xe)
        assert got.shape == want.shape, name
        assert torch.equal(got.components, want.components), name
