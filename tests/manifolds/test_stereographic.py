"""The kappa-stereographic model against mpmath: distances for every sign of k (plain and
MC), the sphere up to the antipode, the MC arctangent, and gradients with respect to a
learnable curvature (through k = 0)."""

from __future__ import annotations

import io

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import LearnablePoincareBall, ManifoldParameter, PoincareBall, SphereProjection, Stereographic
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


# ------------------------------------------------ PoincareBall(..., learnable=True)


@pytest.mark.parametrize(("c0", "nc", "tol"), [(1.0, None, 1e-12), (0.3, None, 1e-12), (1.0, 2, 1e-27), (2.5, 2, 1e-27)])
def test_learnable_ball_distance_and_curvature_gradient_against_mpmath(c0, nc, tol):
    """geoopt's parametrisation: c = softplus(isp_c); the gradient reaches isp_c."""
    x, y = torch.tensor([0.5, 0.1], dtype=F64) / c0**0.5, torch.tensor([-0.3, 0.6], dtype=F64) / c0**0.5
    c = torch.tensor(c0, dtype=F64) if nc is None else hm.mc(c0, nc=nc, dtype=F64)
    if nc:
        x, y = hm.mc(x, nc=nc), hm.mc(y, nc=nc)
    M = PoincareBall(c=c, learnable=True)
    assert isinstance(M, LearnablePoincareBall) and [n for n, _ in M.named_parameters()] == ["isp_c"]
    assert abs(M.curvature + c0) < 4e-16 * c0 and isinstance(M.isp_c, hm.MCTensor) == bool(nc)
    d = M.dist(x, y)
    d.backward()
    with mpmath.workdps(80):
        (s,) = _mp(M.isp_c.detach().reshape(1))
        (c_stored,) = _mp(M.c.detach().reshape(1))
        assert _rel(d.detach(), _exact_dist(x, y, -c_stored)) < tol
        assert abs(c_stored - mpmath.log1p(mpmath.exp(s))) < tol * c_stored  # c is softplus(isp_c)
        exact = mpmath.diff(lambda ss: _exact_dist(x, y, -mpmath.log1p(mpmath.exp(ss))), s)
    assert _rel(M.isp_c.grad, exact) < tol
    assert (isinstance(M.isp_c.grad, hm.MCTensor) and M.isp_c.grad.nc == 2) if nc else not isinstance(M.isp_c.grad, hm.MCTensor)


def test_learnable_ball_is_the_fixed_ball_at_its_current_curvature(rng):
    """Every map agrees with PoincareBall of the same curvature, also after the curvature moved,
    and near the boundary at nc = 2 (radius ~47)."""
    L = PoincareBall(c=torch.tensor(0.5, dtype=F64), learnable=True)
    with torch.no_grad():
        L.isp_c.copy_(torch.log(torch.expm1(torch.tensor(2.0, dtype=F64))))
    F = PoincareBall(c=float(L.c.detach()))
    x, y = F.random(5, 3, dtype=F64, generator=rng), F.random(5, 3, dtype=F64, generator=rng)
    u = 0.4 * torch.randn(5, 3, dtype=F64, generator=rng)
    with torch.no_grad():
        for name, args in [("dist", (x, y)), ("expmap", (x, u)), ("logmap", (x, y)), ("expmap0", (u,)), ("logmap0", (y,))]:
            torch.testing.assert_close(getattr(L, name)(*args), getattr(F, name)(*args), rtol=1e-13, atol=1e-14, msg=name)
        torch.testing.assert_close(L.transp(x, y, u), F.transp(x, y, u), rtol=1e-13, atol=1e-14)
        torch.testing.assert_close(L.egrad2rgrad(x, u), F.egrad2rgrad(x, u), rtol=1e-14, atol=0.0)
        L1 = PoincareBall(c=1.0, learnable=True)
        xb = hm.mc([1.0, 0.0], nc=2, dtype=F64) - hm.mc([1e-20, 0.0], nc=2, dtype=F64)
        yb = xb + hm.mc([0.0, 1e-21], nc=2, dtype=F64)
        assert float((L1.dist(xb, yb) - PoincareBall().dist(xb, yb)).approx().abs()) < 1e-28
        assert L1.check_point(hm.mc([1.0, 0.0], nc=2, dtype=F64))[0] is False


def test_learnable_ball_trains_points_and_curvature_together():
    """A ManifoldParameter on the learnable ball (RiemannianAdam) and its curvature (Adam):
    fit d(x, y) = 3 with y fixed; both move, x stays on the ball of the current curvature."""
    from hypermc.optim import RiemannianAdam

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ball = PoincareBall(c=torch.tensor(1.0, dtype=F64), learnable=True)
            self.x = ManifoldParameter(torch.tensor([0.1, 0.2], dtype=F64), manifold=self.ball)

    model = Model()
    assert sorted(n for n, _ in model.named_parameters()) == ["ball.isp_c", "x"]
    y = torch.tensor([-0.3, 0.4], dtype=F64)
    opt_x, opt_k = RiemannianAdam([model.x], lr=0.02), torch.optim.Adam([model.ball.isp_c], lr=0.01)
    k0, x0 = model.ball.curvature, model.x.detach().clone()
    for _ in range(300):
        opt_x.zero_grad(), opt_k.zero_grad()
        ((model.ball.dist(model.x, y) - 3.0) ** 2).backward()
        opt_x.step(), opt_k.step()
    assert abs(float(model.ball.dist(model.x, y).detach()) - 3.0) < 1e-4
    assert model.ball.curvature != k0 and not torch.equal(model.x.detach(), x0)
    assert model.ball.check_point(model.x.detach()) == (True, None)


def test_learnable_ball_agrees_with_geoopt():
    geoopt = pytest.importorskip("geoopt")
    G = geoopt.PoincareBall(c=torch.tensor(0.7, dtype=F64), learnable=True)
    H = PoincareBall(c=torch.tensor(0.7, dtype=F64), learnable=True)
    x, y = torch.tensor([0.5, 0.1], dtype=F64), torch.tensor([-0.3, 0.6], dtype=F64)
    dg, dh = G.dist(x, y), H.dist(x, y)
    dg.backward(), dh.backward()
    torch.testing.assert_close(dh, dg, rtol=1e-14, atol=0.0)
    # the same parametrisation; hypermc forms softplus^-1(c) with expm1 (geoopt: exp(c) - 1)
    torch.testing.assert_close(H.isp_c, G.isp_c, rtol=1e-13, atol=0.0)
    torch.testing.assert_close(H.c, G.c, rtol=4e-16, atol=0.0)
    torch.testing.assert_close(H.isp_c.grad, G.isp_c.grad, rtol=1e-12, atol=0.0)
    H.load_state_dict(G.state_dict())  # geoopt's state_dict loads


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: PoincareBall(c=-1.0, learnable=True), ValueError, r"PoincareBall: c must be a finite number > 0; got -1\.0"),
        (lambda: PoincareBall(c=torch.tensor(0.0), learnable=True), ValueError, r"PoincareBall: c must be a finite number > 0; got 0\.0"),
        (
            lambda: PoincareBall(curvature=0.5, learnable=True),
            ValueError,
            r"PoincareBall: curvature must be a finite number < 0; got 0\.5",
        ),
        (lambda: PoincareBall(c=float("nan"), learnable=True), ValueError, r"PoincareBall: c must be a finite number; got nan"),
        (lambda: PoincareBall(c=1.0, curvature=-1.0, learnable=True), TypeError, r"PoincareBall: pass either curvature="),
        (lambda: PoincareBall(c=torch.ones(2), learnable=True), TypeError, r"PoincareBall: c must be a float or a 0-d floating tensor"),
        (lambda: PoincareBall(c=1.0, learnable="yes"), TypeError, r"PoincareBall: learnable must be True or False; got str 'yes'"),
        (lambda: LearnablePoincareBall(learnable=False), TypeError, r"LearnablePoincareBall has learnable=True"),
    ],
)
def test_learnable_ball_refuses_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_learnable_ball_is_refused_by_subclasses():
    class Small(PoincareBall):
        name = "small_ball_for_test"

    with pytest.raises(
        TypeError, match=r"Small: learnable=True is not supported by this class; PoincareBall\(c=\.\.\., learnable=True\), Lorentz"
    ):
        Small(learnable=True)


@pytest.mark.parametrize("c", [1.0, torch.tensor(0.7, dtype=F64)], ids=["float32-param", "float64-param"])
def test_learnable_ball_plain_parameter_on_mc_points(c):
    """A plain parameter with MC points: the formulas run on the exact MC lift of the
    curvature, and the MC gradient passes the softplus back to isp_c (as for an MC parameter)."""
    x = hm.mc([[0.1, 0.2], [-0.4, 0.3]], nc=2, dtype=F64)
    M = PoincareBall(c=c, learnable=True)
    d = M.dist(x[0], x[1])
    d.backward()
    k = -float(M.c.detach())
    with mpmath.workdps(60):
        (s,) = _mp(M.isp_c.detach().to(F64).reshape(1))
        assert _rel(d.detach(), _exact_dist(x[0], x[1], k)) < 1e-29
        exact = mpmath.diff(lambda ss: _exact_dist(x[0], x[1], -mpmath.log1p(mpmath.exp(ss))), s)
    g = M.isp_c.grad
    got = g.to_mpmath().reshape(-1)[0] if isinstance(g, hm.MCTensor) else mpmath.mpf(float(g))
    assert abs(got - exact) < (1e-6 if M.isp_c.dtype == torch.float32 else 1e-14) * abs(exact)


def test_learnable_ball_is_a_poincare_ball_for_isinstance_and_the_constructions():
    from hypermc.manifolds.registry import check_ball_model

    M = PoincareBall(c=2.0, learnable=True)
    assert isinstance(M, PoincareBall) and M.converts_to_ball
    x = torch.tensor([[0.3, 0.1]], dtype=F64)
    assert M.to_ball(x) is x and M.from_ball(x) is x
    assert check_ball_model(M) is M  # accepted: a model with a map to the ball
    torch.testing.assert_close(M.to_halfspace(x), PoincareBall(c=2.0).to_halfspace(x), rtol=1e-15, atol=0.0)


def test_bad_learnable_ball_values_are_refused_or_held():
    assert abs(float(PoincareBall(c=100.0, learnable=True).c.detach()) - 100.0) < 1e-4  # no overflow of expm1
    with pytest.raises(ValueError, match=r"PoincareBall: c = 1e-50 is outside what a torch\.float32 parameter holds"):
        PoincareBall(c=1e-50, learnable=True)
    with pytest.raises(ValueError, match=r"PoincareBall: c must be a finite number; got inf"):
        PoincareBall(c=torch.tensor(float("inf")), learnable=True)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Stereographic(k=hm.mc(-0.5, nc=2, dtype=torch.float64), learnable=True),
        lambda: PoincareBall(c=hm.mc(0.5, nc=2, dtype=torch.float64), learnable=True),
    ],
    ids=["stereographic", "ball"],
)
def test_an_mc_curvature_takes_mc_points_of_its_format_only(make):
    """An MC curvature with plain points (or MC points of another nc) would turn the
    results into MC numbers without a word: refused, as the learnable hyperboloid does;
    MC points of its format run in MC arithmetic."""
    M = make()
    x = torch.tensor([[0.1, 0.2], [-0.3, 0.05]], dtype=torch.float64)
    match = r"curvature: an MC curvature \(nc=2, torch\.float64\) needs MC points of the same dtype and nc; got {}"
    with pytest.raises(TypeError, match=match.format(r"plain torch\.float64")):
        M.dist(x, x.flip(0))
    with pytest.raises(TypeError, match=match.format(r"MCTensor nc=3 torch\.float64")):
        M.dist0(hm.mc(x, nc=3))
    d = M.dist(hm.mc(x, nc=2), hm.mc(x.flip(0), nc=2))
    assert isinstance(d, hm.MCTensor) and d.nc == 2 and bool((d.approx() > 0).all())


def test_a_fixed_mc_curvature_takes_mc_points_of_its_format_only():
    """The rule holds for a fixed ``Stereographic`` with an MC ``k`` too."""
    M = Stereographic(k=hm.mc(-0.5, nc=2, dtype=torch.float64))
    x = torch.tensor([[0.1, 0.2], [-0.3, 0.05]], dtype=torch.float64)
    with pytest.raises(TypeError, match=r"needs MC points of the same dtype and nc; got plain torch\.float64"):
        M.dist(x, x.flip(0))
    with pytest.raises(TypeError, match=r"needs MC points of the same dtype and nc; got MCTensor nc=3"):
        M.dist0(hm.mc(x, nc=3))
    assert M.dist0(hm.mc(x, nc=2)).nc == 2


def test_a_known_sign_is_used_and_checked():
    """``sign=``: the caller's sign of ``k`` replaces reading it (the learnable ball's is
    always -1: no host sync, no graph break), with the same results as reading it; a
    value other than -1, 0, 1 or None is refused."""
    x = torch.tensor([[0.5, 0.1], [-0.2, 0.3]], dtype=torch.float64)
    y = torch.tensor([[0.1, -0.4], [0.3, 0.3]], dtype=torch.float64)
    for k in (torch.tensor(-0.7, dtype=torch.float64), torch.tensor(0.6, dtype=torch.float64)):
        s = S.sign_of(k)
        for f in (S.dist, S.logmap, lambda a, b, k, sign=None: S.mobius_scalar_mul(1.7, a, k, sign=sign)):
            assert torch.equal(f(x, y, k, sign=s), f(x, y, k))
        assert torch.equal(S.logmap0(x, k, sign=s), S.logmap0(x, k))
        assert torch.equal(S.weighted_midpoint(x, k, sign=s), S.weighted_midpoint(x, k))
    with pytest.raises(ValueError, match=r"sign must be -1, 0, 1 or None \(read from k\); got 2"):
        S.dist(x, y, -1.0, sign=2)
    M = PoincareBall(c=torch.tensor(0.7, dtype=torch.float64), learnable=True)
    assert M._kappa_sign() == -1 and Stereographic(k=-0.7)._kappa_sign() is None
