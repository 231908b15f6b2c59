"""``Lorentz(..., learnable=True)``: geoopt's learnable hyperboloid (``k`` a parameter,
``<x, x>_L = -k``), with gradients with respect to ``k`` checked against mpmath (plain
and MC) and geoopt, and the fixed hyperboloid's values at the current ``k``."""

from __future__ import annotations

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import LearnableLorentz, Lorentz, PoincareBall
from hypermc.manifolds.math import common

F64 = torch.float64
U = [[0.0, 1.0, 0.0], [0.0, 0.3, -2.0]]


def _exact(u, k):
    """d(expmap0(u[0]), expmap0(u[1])) on the hyperboloid <x, x>_L = -k, in mpmath."""
    k = mpmath.mpf(k)
    sk = mpmath.sqrt(k)

    def point(v):
        n = mpmath.sqrt(sum(mpmath.mpf(a) ** 2 for a in v[1:]))
        return [sk * mpmath.cosh(n / sk)] + [sk * mpmath.sinh(n / sk) * mpmath.mpf(a) / n for a in v[1:]]

    x, y = point(u[0]), point(u[1])
    inner = -x[0] * y[0] + sum(a * b for a, b in zip(x[1:], y[1:]))
    return sk * mpmath.acosh(-inner / k)


def _mp(t):
    t = t.detach().reshape(1)
    return t.to_mpmath()[0] if isinstance(t, hm.MCTensor) else mpmath.mpf(float(t))


@pytest.mark.parametrize(("k0", "nc", "tol"), [(1.0, None, 1e-12), (2.5, None, 1e-12), (0.3, None, 1e-12), (2.5, 2, 1e-27)])
def test_distance_of_points_made_from_k_and_its_gradient_against_mpmath(k0, nc, tol):
    k = torch.tensor(k0, dtype=F64) if nc is None else hm.mc(k0, nc=nc, dtype=F64)
    M = Lorentz(k=k, learnable=True)
    assert isinstance(M, LearnableLorentz) and [n for n, _ in M.named_parameters()] == ["k"]
    assert M.curvature == -1.0 / k0 and isinstance(M.k, hm.MCTensor) == bool(nc)
    u = torch.tensor(U, dtype=F64)
    x = M.expmap0(hm.mc(u, nc=nc) if nc else u)
    d = M.dist(x[0], x[1])
    d.backward()
    with mpmath.workdps(80):
        assert abs(_mp(d) - _exact(U, k0)) < tol * _exact(U, k0)
        exact = mpmath.diff(lambda kk: _exact(U, kk), mpmath.mpf(k0))
        assert abs(_mp(M.k.grad) - exact) < tol * abs(exact)
    assert (isinstance(M.k.grad, hm.MCTensor) and M.k.grad.nc == 2) if nc else not isinstance(M.k.grad, hm.MCTensor)


def test_values_are_the_fixed_hyperboloids_at_the_current_k(rng):
    L = Lorentz(k=torch.tensor(0.5, dtype=F64), learnable=True)
    with torch.no_grad():
        L.k.fill_(3.0)
    F = Lorentz(k=3.0)
    assert L.curvature == F.curvature
    u = F.proju(F.origin(6, 3, dtype=F64), torch.randn(6, 3, dtype=F64, generator=rng))
    v = 0.3 * torch.randn(6, 3, dtype=F64, generator=rng)
    with torch.no_grad():
        x, y = F.expmap0(u), F.expmap0(u.flip(0))
        torch.testing.assert_close(L.expmap0(u), x, rtol=1e-14, atol=1e-14)
        torch.testing.assert_close(L.origin(6, 3, dtype=F64), F.origin(6, 3, dtype=F64), rtol=0, atol=0)
        for name, args in [("dist", (x, y)), ("dist0", (x,)), ("logmap", (x, y)), ("logmap0", (y,)), ("projx", (x + 0.01,))]:
            torch.testing.assert_close(getattr(L, name)(*args), getattr(F, name)(*args), rtol=1e-13, atol=1e-13, msg=name)
        w = F.proju(x, v)
        for name, args in [("expmap", (x, w)), ("proju", (x, v)), ("egrad2rgrad", (x, v)), ("transp", (x, y, w))]:
            torch.testing.assert_close(getattr(L, name)(*args), getattr(F, name)(*args), rtol=1e-13, atol=1e-13, msg=name)
        assert L.check_point(x) == (True, None) and L.check_point(2 * x)[0] is False


def test_curvature_of_expmap0_features_is_learned():
    """Fit k so that the two feature points are 2.5 apart (root of the mpmath distance)."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.manifold = Lorentz(k=torch.tensor(1.0, dtype=F64), learnable=True)

    model = Model()
    assert [n for n, _ in model.named_parameters()] == ["manifold.k"]
    u = torch.tensor(U, dtype=F64)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(400):
        opt.zero_grad()
        x = model.manifold.expmap0(u)
        ((model.manifold.dist(x[0], x[1]) - 2.5) ** 2).backward()
        opt.step()
    with mpmath.workdps(30):
        k_exact = mpmath.findroot(lambda kk: _exact(U, kk) - 2.5, (0.3, 10.0), solver="anderson")
    assert abs(float(model.manifold.k.detach()) - float(k_exact)) < 1e-6


def test_agrees_with_geoopt():
    geoopt = pytest.importorskip("geoopt")
    G = geoopt.Lorentz(k=torch.tensor(2.0, dtype=F64), learnable=True)
    H = Lorentz(k=torch.tensor(2.0, dtype=F64), learnable=True)
    u = torch.tensor(U, dtype=F64)
    xg, xh = G.expmap0(u), H.expmap0(u)
    dg, dh = G.dist(xg[0], xg[1]), H.dist(xh[0], xh[1])
    dg.backward(), dh.backward()
    torch.testing.assert_close(dh, dg, rtol=1e-14, atol=0.0)
    torch.testing.assert_close(H.k.grad, G.k.grad, rtol=1e-12, atol=0.0)
    H.load_state_dict(G.state_dict())  # geoopt's state_dict (key k) loads


def test_tensor_c_power_forms_each_power_by_torch_ops():
    c = torch.tensor(4.0, dtype=F64, requires_grad=True)
    like = torch.ones(1, dtype=F64)
    got = {p: common.tensor_c_power(c, p, like) for p in (1.0, -1.0, 0.5, -0.5)}
    assert {p: float(v.detach()) for p, v in got.items()} == {1.0: 4.0, -1.0: 0.25, 0.5: 2.0, -0.5: 0.5}
    assert float(torch.autograd.grad(got[-0.5], c)[0]) == -0.0625  # d/dc c^(-1/2) = -c^(-3/2)/2
    cm = hm.mc(4.0, nc=2, dtype=F64)
    assert isinstance(common.tensor_c_power(cm, 0.5, hm.mc([1.0], nc=2, dtype=F64)), hm.MCTensor)
    assert common.tensor_c_power(torch.tensor(4.0), 1.0, like).dtype == F64  # a float32 parameter for float64 points


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Lorentz(k=-1.0, learnable=True), ValueError, r"Lorentz: k must be a finite number > 0; got -1\.0"),
        (lambda: Lorentz(k=torch.tensor(float("inf")), learnable=True), ValueError, r"Lorentz: k must be a finite number; got inf"),
        (lambda: Lorentz(curvature=1.0, learnable=True), ValueError, r"Lorentz: curvature must be a finite number < 0; got 1\.0"),
        (lambda: Lorentz(k=1.0, curvature=-1.0, learnable=True), TypeError, r"Lorentz: pass either curvature="),
        (lambda: Lorentz(k=torch.ones(2), learnable=True), TypeError, r"Lorentz: k must be a float or a 0-d floating tensor"),
        (lambda: LearnableLorentz(learnable=False), TypeError, r"LearnableLorentz has learnable=True"),
        (lambda: Lorentz(k=1e-50, learnable=True), ValueError, r"Lorentz: k = 1e-50 is outside what a torch\.float32 parameter holds"),
        (
            lambda: Lorentz(k=hm.mc(1.0, nc=2, dtype=F64), learnable=True).expmap0(torch.zeros(3, dtype=F64)),
            TypeError,
            r"curvature: an MC curvature \(nc=2, torch\.float64\) needs MC points of the same dtype and nc; got plain torch\.float64",
        ),
        (lambda: common.tensor_c_power(torch.tensor(2.0), 2.0, torch.ones(1)), ValueError, r"tensor_c_power: power must be one of"),
    ],
)
def test_bad_arguments_are_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_identity_equality_and_repr():
    a, b = Lorentz(k=2.0, learnable=True), Lorentz(k=2.0, learnable=True)
    assert a != b and a == a and len({a, b}) == 2 and repr(a) == "Lorentz(k=2, learnable=True)"
    assert Lorentz(learnable=False) == Lorentz()


class _Model(torch.nn.Module):
    """A model owning a manifold and points on it (module level: pickled whole)."""

    def __init__(self, manifold, points):
        from hypermc.manifolds import ManifoldParameter

        super().__init__()
        self.manifold = manifold
        self.x = ManifoldParameter(points, manifold=manifold)


def _model_with_points(manifold, points):
    return _Model(manifold, points)


@pytest.mark.parametrize(
    "make", [lambda: Lorentz(k=2.0, learnable=True), lambda: PoincareBall(c=0.5, learnable=True)], ids=["lorentz", "ball"]
)
def test_copies_and_whole_model_pickles_keep_points_on_the_models_curvature(make, tmp_path):
    """deepcopy(model) and torch.save(model) / torch.load(weights_only=False): the copy's
    points follow the copy's curvature parameter (one object); a point pickled alone on a
    learnable model needs weights_only=False (loudly), and state_dict round trips."""
    import copy
    import pickle

    m = make()
    model = _model_with_points(m, m.origin(2, 3 if m.extra_coordinates else 2, dtype=F64))
    d = copy.deepcopy(model)
    assert d.x.manifold is d.manifold and d.manifold is not model.manifold
    torch.save(model, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=False)
    assert loaded.x.manifold is loaded.manifold and torch.equal(loaded.x.data, model.x.data)
    torch.save(model.x, tmp_path / "x.pt")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(tmp_path / "x.pt", weights_only=True)
    fresh = _model_with_points(make(), model.x.detach().clone())
    with torch.no_grad():
        next(model.manifold.parameters()).mul_(1.5)
    fresh.load_state_dict(model.state_dict())
    assert fresh.manifold.curvature == model.manifold.curvature


def test_product_registers_learnable_factors_and_trains_them():
    from hypermc.manifolds import PoincareBall, ProductManifold, Sphere

    M = ProductManifold((PoincareBall(c=1.0, learnable=True), 2), (Lorentz(k=1.0, learnable=True), 3), (Sphere(), 3))
    model = _model_with_points(M, M.random(4, 8, dtype=torch.float32, generator=torch.Generator().manual_seed(0)))
    assert sorted(n for n, _ in model.named_parameters()) == ["manifold.factor0.isp_c", "manifold.factor1.k", "x"]
    assert sorted(model.state_dict()) == ["manifold.factor0.isp_c", "manifold.factor1.k", "x"]
    before = [p.detach().clone() for p in M.parameters()]
    opt = torch.optim.SGD(M.parameters(), lr=0.1)
    M.dist(model.x[:2].detach(), model.x[2:].detach()).sum().backward()
    opt.step()
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, M.parameters()))


@pytest.mark.parametrize(
    "make", [lambda: Lorentz(k=2.0, learnable=True), lambda: PoincareBall(c=0.5, learnable=True)], ids=["lorentz", "ball"]
)
def test_factories_make_leaves(make):
    m = make()
    n = 3 if m.extra_coordinates else 2
    for t in (m.origin(4, n), m.random(4, n), m.random_normal(4, n)):
        assert t.grad_fn is None and not t.requires_grad


def test_plain_parameter_on_mc_points_keeps_mc_precision():
    """A plain float64 k with MC points: the formulas run on the exact MC lift of k."""
    M = Lorentz(k=torch.tensor(0.7, dtype=F64), learnable=True)
    u = [[0.0, 1.0, 0.5], [0.0, -0.3, 2.0]]
    x = M.expmap0(hm.mc(torch.tensor(u, dtype=F64), nc=2))
    with mpmath.workdps(60):
        exact = _exact(u, mpmath.mpf(0.7))  # 0.7 as stored: the float64 nearest 0.7
        assert abs(_mp(M.dist(x[0], x[1])) - exact) < 1e-29 * exact
    d = M.dist(x[0], x[1])
    d.backward()
    with mpmath.workdps(60):
        g = mpmath.diff(lambda kk: _exact(u, kk), mpmath.mpf(0.7))
        assert abs(_mp(M.k.grad) - g) < 1e-28 * abs(g)


def test_learnable_lorentz_batched_distances_evaluate_at_the_current_curvature():
    from hypermc.manifolds.math.batch import components_of

    L, F = Lorentz(k=torch.tensor(2.0, dtype=F64), learnable=True), Lorentz(k=2.0)
    table = F.random(5, 3, nc=2, dtype=F64, generator=torch.Generator().manual_seed(0))
    rows, ia, ib = components_of(table), torch.tensor([0, 1]), torch.tensor([2, 3])
    assert torch.equal(L.dist_batch(rows, ia, ib), F.dist_batch(rows, ia, ib))
    with pytest.raises(TypeError, match=r"Lorentz\.dist_batch: gradients with a learnable curvature are not available here"):
        L.dist_batch(rows, ia, ib, leaf=rows[..., 0].clone().requires_grad_(True))
