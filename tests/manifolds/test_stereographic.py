"""The kappa-stereographic model against mpmath: distances for every sign of k (plain and
MC), the sphere up to the antipode, the MC arctangent, and gradients with respect to a
learnable curvature (through k = 0)."""

from __future__ import annotations

import io

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import ManifoldParameter, PoincareBall, SphereProjection, Stereographic
from hypermc.manifolds.math import stereographic as S
from hypermc.optim import MCAdam

F64 = torch.float64
KS = [-2.0, -1.0, -0.3, 0.0, 0.7, 2.0]


def _mp(t):
    """Exact values of a plain float64 tensor or an MCTensor (numpy object array of mpf)."""
    return t.to_mpmath() if isinstance(t, hm.MCTensor) else [mpmath.mpf(float(v)) for v in t.reshape(-1)]


def _exact_dist(x, y, k):
    """``2 arsin_k(|x - y| / sqrt(D_x D_y))`` in mpmath (the chordal form, any sign of k)."""
    k = mpmath.mpf(k)
    xs, ys = list(_mp(x)), list(_mp(y))
    rho = mpmath.sqrt(sum((a - b) ** 2 for a, b in zip(xs, ys)))
    dx, dy = 1 + k * sum(a * a for a in xs), 1 + k * sum(b * b for b in ys)
    z = rho / mpmath.sqrt(dx * dy)
    if k == 0:
        return 2 * z
    if k < 0:
        return 2 * mpmath.asinh(mpmath.sqrt(-k) * z) / mpmath.sqrt(-k)
    return 2 * mpmath.asin(mpmath.sqrt(k) * z) / mpmath.sqrt(k)


def _rel(got, exact):
    g = got.to_mpmath().reshape(-1)[0] if isinstance(got, hm.MCTensor) else mpmath.mpf(float(got))
    return abs(g - exact) / abs(exact)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize(("nc", "tol"), [(None, 1e-14), (2, 1e-29)])
def test_dist_matches_mpmath_for_every_sign_of_k(k, nc, tol, rng):
    M = Stereographic(k=k)
    with mpmath.workdps(60):
        for _ in range(5):
            x = M.random(3, std=0.8, dtype=F64, generator=rng)
            y = M.random(3, std=0.8, dtype=F64, generator=rng)
            if nc:
                x, y = hm.mc(x, nc=nc), hm.mc(y, nc=nc)
            exact = _exact_dist(x, y, k)
            assert _rel(M.dist(x, y), exact) < tol
            assert _rel(M.dist0(x), _exact_dist(x, torch.zeros(3, dtype=F64), k)) < tol


def test_ball_case_keeps_the_precision_near_the_boundary():
    """Radius ~46.7, two points 1e-21 apart: as PoincareBall, nc = 2 resolves them."""
    M = Stereographic(k=-1.0)
    x = hm.mc([1.0, 0.0], nc=2, dtype=F64) - hm.mc([1e-20, 0.0], nc=2, dtype=F64)
    y = x + hm.mc([0.0, 1e-21], nc=2, dtype=F64)
    with mpmath.workdps(80):
        assert _rel(M.dist(x, y), _exact_dist(x, y, -1.0)) < 1e-25
        assert _rel(M.dist0(x), _exact_dist(x, hm.mc([0.0, 0.0], nc=2, dtype=F64), -1.0)) < 1e-25
    assert float((M.dist(x, y) - PoincareBall().dist(x, y)).approx().abs()) < 1e-28
    u = M.logmap(x, y)
    assert float((M.expmap(x, u) - y).approx().abs().max()) < 1e-31  # coordinates resolve u^2 ~ 1e-32
    assert float((M.expmap(x, u) - PoincareBall().expmap(x, u)).approx().abs().max()) < 1e-31


@pytest.mark.parametrize("nc", [None, 2])
def test_sphere_projection_up_to_the_antipode(nc):
    M = SphereProjection(k=0.5)
    x = torch.tensor([0.5, -0.25], dtype=F64)
    if nc:
        x = hm.mc(x, nc=nc)
    a = M.antipode(x)
    with mpmath.workdps(60):
        half_circumference = mpmath.pi / mpmath.sqrt(mpmath.mpf(0.5))
        assert _rel(M.dist(x, a), half_circumference) < (1e-15 if nc is None else 1e-30)
        near = a * 0.999
        assert _rel(M.dist(x, near), _exact_dist(x, near, 0.5)) < (1e-12 if nc is None else 1e-27)


def test_mc_arctangent_against_mpmath():
    z = hm.mc([0.0, 1e-300, 0.3, 1.0, 7.0, 1e10, -2.5], nc=3, dtype=F64)
    w = S.atan(z)
    with mpmath.workdps(80):
        for got, ref in zip(w.to_mpmath(), z.to_mpmath()):
            exact = mpmath.atan(ref)
            assert abs(got - exact) <= 1e-45 * max(abs(exact), mpmath.mpf("1e-300"))


@pytest.mark.parametrize("k0", [-1.0, -0.2, 0.0, 0.4])
def test_gradient_with_respect_to_a_learnable_curvature(k0):
    x, y = torch.tensor([0.5, 0.1], dtype=F64), torch.tensor([-0.3, 0.6], dtype=F64)
    M = Stereographic(k=torch.tensor(k0, dtype=F64), learnable=True)
    M.dist(x, y).backward()
    with mpmath.workdps(50):
        exact = mpmath.diff(lambda kk: _exact_dist(x, y, kk) if kk != 0 else _exact_dist(x, y, 0), mpmath.mpf(k0))
        if k0 == 0:  # the two-sided derivative through k = 0 (the formula switches branch there)
            h = mpmath.mpf("1e-20")
            exact = (_exact_dist(x, y, h) - _exact_dist(x, y, -h)) / (2 * h)
    assert abs(float(M.k.grad) - float(exact)) < 1e-12 * abs(float(exact))


def test_mc_learnable_curvature_gets_an_mc_gradient():
    x, y = hm.mc([0.5, 0.1], nc=2, dtype=F64), hm.mc([-0.3, 0.6], nc=2, dtype=F64)
    M = Stereographic(k=hm.mc(-1.0, nc=2, dtype=F64), learnable=True)
    assert [n for n, _ in M.named_parameters()] == ["k"] and isinstance(M.k, hm.MCTensor)
    M.dist(x, y).backward()
    assert isinstance(M.k.grad, hm.MCTensor) and M.k.grad.nc == 2
    with mpmath.workdps(60):
        exact = mpmath.diff(lambda kk: _exact_dist(x, y, kk), mpmath.mpf(-1))
    assert abs(M.k.grad.to_mpmath().reshape(-1)[0] - exact) < 1e-27 * abs(exact)


def test_curvature_is_learned_by_a_stock_optimizer():
    """Fit k so that the distance of two fixed points is 3 (exact answer from mpmath)."""
    x, y = torch.tensor([0.5, 0.1], dtype=F64), torch.tensor([-0.3, 0.6], dtype=F64)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.manifold = Stereographic(k=torch.tensor(-0.5, dtype=F64), learnable=True)

    model = Model()
    assert [n for n, _ in model.named_parameters()] == ["manifold.k"]
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(400):
        opt.zero_grad()
        ((model.manifold.dist(x, y) - 3.0) ** 2).backward()
        opt.step()
    with mpmath.workdps(30):
        k_exact = mpmath.findroot(lambda kk: _exact_dist(x, y, kk) - 3, -1.0)
    assert abs(float(model.manifold.k.detach()) - float(k_exact)) < 1e-6
    # MCAdam on an MC curvature
    Mm = Stereographic(k=hm.mc(-0.5, nc=2, dtype=F64), learnable=True)
    xm, ym = hm.mc(x, nc=2), hm.mc(y, nc=2)
    opt2 = MCAdam([Mm.k], lr=0.05)
    for _ in range(400):
        opt2.zero_grad()
        ((Mm.dist(xm, ym) - 3.0) ** 2).backward()
        opt2.step()
    assert abs(float(Mm.k.detach()) - float(k_exact)) < 1e-6


def test_stereographic_parameters_pickle_and_compare():
    M = Stereographic(k=0.5)
    p = ManifoldParameter(torch.tensor([[0.1, 0.2]], dtype=F64), manifold=M)
    buf = io.BytesIO()
    torch.save(p, buf)
    buf.seek(0)
    q = torch.load(buf, weights_only=True)
    assert q.manifold == M and torch.equal(q.data, p.data)
    a, b = Stereographic(k=-1.0, learnable=True), Stereographic(k=-1.0, learnable=True)
    assert a != b and a == a and len({a, b}) == 2  # learnable: identity (distinct parameters)
    assert Stereographic(k=-1.0) == Stereographic(k=-1.0) and repr(a) == "Stereographic(k=-1, learnable=True)"


def test_ball_case_points_are_checked():
    M = Stereographic(k=-1.0)
    with pytest.raises(ValueError, match=r"Stereographic\.dist: x is not a point of Stereographic\(k=-1\): norm >= 1/sqrt\(-k\) = 1"):
        M.dist(torch.tensor([2.0, 0.0]), torch.zeros(2))
    assert Stereographic(k=1.0).check_point(torch.tensor([1e10, 0.0])) == (True, None)
