"""Tests of the HGCN-compatible adapter (hypermc.nn.hgcn): HGCN's signatures forward to
the native manifolds, the curvature convention matches HGCN's, and HGCN-style layer code
runs unchanged on MC points."""

from __future__ import annotations

import math

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall
from hypermc.nn import HypLinear, hgcn
from hypermc.nn import hyperbolic as H

f32, f64 = torch.float32, torch.float64

CS = [1.0, torch.tensor([0.5]), 2]  # HGCN passes c as a one-element tensor


def _c(c) -> float:
    return float(c.item()) if isinstance(c, torch.Tensor) else float(c)


def _same(a, b) -> bool:
    """Bitwise equal values (components for MCTensors)."""
    if isinstance(a, hm.MCTensor) or isinstance(b, hm.MCTensor):
        return isinstance(a, hm.MCTensor) and isinstance(b, hm.MCTensor) and torch.equal(a.components, b.components)
    return torch.equal(a, b)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _case(adapter, c, nc, seed):
    """Native manifold, two point sets, tangent vectors at the first and at the origin."""
    M = adapter.manifold(c)
    x = M.random(5, 4, nc=nc, dtype=f64, generator=_gen(seed))
    y = M.random(5, 4, nc=nc, dtype=f64, generator=_gen(seed + 1))
    raw = torch.randn(5, 4, dtype=f64, generator=_gen(seed + 2))
    raw = raw if nc is None else hm.mc(raw, nc=nc)
    return M, x, y, M.proju(x, raw), H.proju0(M, raw)


@pytest.mark.parametrize("adapter", [hgcn.PoincareBall(), hgcn.Hyperboloid()], ids=["ball", "hyperboloid"])
@pytest.mark.parametrize("c", CS, ids=["1.0", "tensor0.5", "2"])
@pytest.mark.parametrize("nc", [None, 2])
def test_adapter_matches_native_api(adapter, c, nc, seed):
    M, x, y, u, u0 = _case(adapter, c, nc, seed)
    assert M.curvature == -_c(c)
    w = torch.randn(3, 4, dtype=f64, generator=_gen(seed + 3))
    assert _same(adapter.sqdist(x, y, c), M.dist(x, y) ** 2)
    assert _same(adapter.egrad2rgrad(x, u, c), M.egrad2rgrad(x, u))
    assert _same(adapter.proj(x, c), M.projx(x))
    assert _same(adapter.proj_tan(u, x, c), M.proju(x, u))
    assert _same(adapter.proj_tan0(u, c), H.proju0(M, u))
    assert _same(adapter.expmap(u, x, c), M.expmap(x, u))
    assert _same(adapter.logmap(x, y, c), M.logmap(x, y))
    assert _same(adapter.expmap0(u0, c), M.expmap0(u0))
    assert _same(adapter.logmap0(y, c), M.logmap0(y))
    assert _same(adapter.inner(x, c, u), M.inner(x, u))
    assert _same(adapter.inner(x, c, u, u0, keepdim=True), M.inner(x, u, u0, keepdim=True))
    assert _same(adapter.ptransp(x, y, u, c), M.transp(x, y, u))
    assert _same(adapter.ptransp0(x, u0, c), H.transp0(M, x, u0))
    # Möbius operations: the ball's closed forms, the generic ones on the hyperboloid (equal on the ball)
    add, mv = adapter.mobius_add(x, y, c), adapter.mobius_matvec(w, x, c)
    assert _max(add - H.mobius_add(M, x, y)) < 1e-13 * (1 if nc is None else 1e-15)
    assert _max(mv - H.mobius_matvec(M, w, x)) < 1e-13 * (1 if nc is None else 1e-15)
    assert M.check_point(add) == (True, None) and M.check_point(mv) == (True, None)


def _max(t) -> float:
    t = t.approx() if isinstance(t, hm.MCTensor) else t
    return float(t.abs().max())


def test_curvature_convention_is_hgcns(seed):
    """Textbook formulas with HGCN's c: ball |x|^2 < 1/c, hyperboloid <x, x>_L = -1/c."""
    c = 2.0
    B, L = hgcn.PoincareBall(), hgcn.Hyperboloid()
    x = B.expmap0(torch.randn(6, 3, dtype=f64, generator=_gen(seed)) * 0.3, c)
    y = B.expmap0(torch.randn(6, 3, dtype=f64, generator=_gen(seed + 1)) * 0.3, c)
    assert float((x * x).sum(-1).max()) < 1 / c
    # ball: d = 2/sqrt(c) atanh(sqrt(c) |-x (+) y|), gyro-addition written out for curvature -c
    mx = -x
    xy, x2, y2 = (mx * y).sum(-1, keepdim=True), (mx * mx).sum(-1, keepdim=True), (y * y).sum(-1, keepdim=True)
    w = ((1 + 2 * c * xy + c * y2) * mx + (1 - c * x2) * y) / (1 + 2 * c * xy + c * c * x2 * y2)
    ref = (2 / math.sqrt(c) * torch.atanh(math.sqrt(c) * w.norm(dim=-1))) ** 2
    assert torch.allclose(B.sqdist(x, y, c), ref, rtol=1e-10)
    p = L.expmap0(L.proj_tan0(torch.randn(6, 4, dtype=f64, generator=_gen(seed)), c), c)
    q = L.expmap0(L.proj_tan0(torch.randn(6, 4, dtype=f64, generator=_gen(seed + 1)), c), c)
    assert torch.allclose(L.minkowski_dot(p, p), torch.full((6, 1), -1 / c, dtype=f64), rtol=1e-12)
    ref = torch.acosh(-c * L.minkowski_dot(p, q, keepdim=False)) ** 2 / c
    assert torch.allclose(L.sqdist(p, q, c), ref, rtol=1e-8)
    # the two adapters describe the same space
    assert torch.allclose(L.sqdist(B.to_hyperboloid(x, c), B.to_hyperboloid(y, c), c), B.sqdist(x, y, c), rtol=1e-10)
    assert torch.allclose(L.to_poincare(B.to_hyperboloid(x, c), c), x, atol=1e-15)


def test_one_native_manifold_per_curvature():
    B = hgcn.PoincareBall()
    assert B.manifold(1.0) is B.manifold(torch.tensor([1.0])) is B.manifold(1)
    assert B.manifold(2.0) is not B.manifold(1.0)
    assert isinstance(B.manifold(2.0), PoincareBall) and B.manifold(2.0).curvature == -2.0
    assert isinstance(hgcn.Hyperboloid().manifold(0.5), Lorentz)
    assert isinstance(hgcn.Euclidean().manifold(torch.tensor([3.0])), Euclidean)


def test_hgcn_attributes():
    assert (hgcn.PoincareBall().name, hgcn.Hyperboloid().name, hgcn.Euclidean().name) == ("PoincareBall", "Hyperboloid", "Euclidean")
    assert hgcn.PoincareBall().eps[f32] == 4e-3 and hgcn.Hyperboloid().eps[f64] == 1e-15
    assert hgcn.Hyperboloid().min_norm == 1e-15 and hgcn.Hyperboloid().max_norm == 1e6


def test_no_silent_clamps_and_no_in_place_updates():
    B = hgcn.PoincareBall()
    # HGCN's proj would move this float64 point to norm 1 - 1e-5; here it is a point of the ball
    x = torch.tensor([[1 - 1e-9, 0.0]], dtype=f64)
    assert torch.equal(B.proj(x, 1.0), x)
    dp = torch.ones(1, 2, dtype=f64)
    B.egrad2rgrad(x, dp, 1.0)
    assert torch.equal(dp, torch.ones(1, 2, dtype=f64))
    # HGCN's hyperboloid clamps sqdist at 50
    L = hgcn.Hyperboloid()
    far = L.expmap0(torch.tensor([[0.0, 6.0, 0.0]], dtype=f64), 1.0)
    assert float(L.sqdist(far, L.expmap0(torch.zeros(1, 3, dtype=f64), 1.0), 1.0)) == pytest.approx(36.0)
    nan = torch.tensor([[float("nan"), 0.0]], dtype=f64)
    assert torch.isnan(B.expmap0(nan, 1.0)).any()


def test_euclidean_adapter():
    E = hgcn.Euclidean()
    p = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=f64)
    u = torch.ones(3, 2, dtype=f64)
    assert torch.equal(E.expmap(u, p, 1.0), p + u)
    assert torch.equal(E.logmap(p, u, 1.0), u - p)
    assert torch.equal(E.sqdist(p, u, 1.0), ((p - u) ** 2).sum(-1))
    assert torch.equal(E.ptransp0(p, u, 1.0), u)  # HGCN returns p + u here
    assert torch.equal(E.mobius_add(p, u, 1.0), p + u)
    assert torch.allclose(E.normalize(p), torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], dtype=f64))
    assert torch.equal(p[0], torch.tensor([3.0, 4.0], dtype=f64))  # not modified in place


def test_init_weights_in_place_on_the_manifold():
    torch.manual_seed(0)
    L = hgcn.Hyperboloid()
    w = torch.nn.Parameter(torch.empty(4, 3, dtype=f64))
    assert L.init_weights(w, 1.0, irange=0.5) is w
    assert L.manifold(1.0).check_point(w.detach()) == (True, None)
    assert float(w.detach()[:, 1:].abs().max()) <= 0.5
    v = hm.mc(torch.zeros(3, 2, dtype=f64), nc=2)
    hgcn.PoincareBall().init_weights(v, 1.0)
    assert float(v.approx().abs().max()) <= 1e-5 and float(v.approx().abs().max()) > 0


def test_hyperboloid_extras():
    L = hgcn.Hyperboloid()
    u = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0]], dtype=f64)
    assert torch.equal(L.minkowski_dot(u, u), torch.tensor([[3.0], [-3.0]], dtype=f64))
    assert torch.equal(L.minkowski_norm(u, keepdim=False), torch.tensor([math.sqrt(3.0), 0.0], dtype=f64))


def test_bad_arguments_name_them():
    B = hgcn.PoincareBall()
    x = torch.zeros(2, 3, dtype=f64)
    with pytest.raises(TypeError, match=r"PoincareBall: c requires grad, but this method takes a fixed curvature"):
        B.to_hyperboloid(x, torch.nn.Parameter(torch.tensor([1.0])))
    with pytest.raises(ValueError, match=r"c must be a finite number > 0 \(the curvature is -c\); got -1.0"):
        B.logmap0(x, -1.0)
    with pytest.raises(ValueError, match="c must be a finite number > 0"):
        B.proj(x, float("nan"))
    with pytest.raises(TypeError, match="c must be a positive real number; got str"):
        B.proj(x, "1")
    with pytest.raises(TypeError, match="c must be a positive number or a plain one-element tensor"):
        B.proj(x, torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="dim must be -1"):
        B.mobius_add(x, x, 1.0, dim=0)
    with pytest.raises(TypeError, match="u must be a Tensor or MCTensor"):
        B.expmap([0.0, 0.0, 0.0], x, 1.0)
    with pytest.raises(TypeError, match="has dtype torch.float64 but u has torch.float32"):
        B.expmap(x.float(), x, 1.0)


# ------------------------------------------------------- HGCN code switches with one import


class _HGCNStyleLinear(torch.nn.Module):
    """A hyperbolic linear layer written against HGCN's manifold interface (matvec, proj,
    tangent bias at the origin mapped with expmap0, Möbius addition, proj)."""

    def __init__(self, manifold, weight, bias, c):
        super().__init__()
        self.manifold, self.weight, self.bias, self.c = manifold, weight, bias, c

    def forward(self, x):
        m = self.manifold
        res = m.proj(m.mobius_matvec(self.weight, x, self.c), self.c)
        hyp_bias = m.proj(m.expmap0(m.proj_tan0(self.bias.view(1, -1), self.c), self.c), self.c)
        return m.proj(m.mobius_add(res, hyp_bias, c=self.c), self.c)


@pytest.mark.parametrize("name", ["PoincareBall", "Hyperboloid"])
def test_hgcn_style_layer_equals_hyplinear(name, seed):
    manifolds = hgcn  # HGCN: `import manifolds`; here `from hypermc.nn import hgcn as manifolds`
    adapter = getattr(manifolds, name)()
    c = torch.tensor([1.5])
    M = adapter.manifold(c)
    torch.manual_seed(seed)
    ours = HypLinear(M, 4, 3, nc=2, dtype=f64)
    with torch.no_grad():
        ours.bias.copy_(torch.randn(3, dtype=f64, generator=_gen(seed)))
    theirs = _HGCNStyleLinear(adapter, ours.weight, ours.bias, c)
    x = M.random(6, 4, nc=2, dtype=f64, generator=_gen(seed + 1))
    a, b = ours(x), theirs(x)
    assert isinstance(b, hm.MCTensor) and M.check_point(b) == (True, None)
    assert _max(a - b) < 1e-28
    (M.dist0(b).sum()).backward()
    assert isinstance(ours.weight.grad, hm.MCTensor) and torch.isfinite(ours.weight.grad.components).all()


@pytest.mark.parametrize(("nc", "dtype", "tol"), [(None, f64, 1e-12), (2, f64, 1e-12), (None, torch.float32, 1e-6)])
def test_trainable_c_gets_its_gradient(nc, dtype, tol):
    """HGCN's trainable curvature (c an nn.Parameter of shape [1]; HGCN makes it float32,
    whose gradient sums float32 roundings of each use's part): sqdist's gradient with
    respect to c, against mpmath, on the ball (fixed points) and on the hyperboloid
    (points made from c by expmap0, as HGCN's encoder does)."""
    import mpmath

    c0 = 0.75
    B, L = hgcn.PoincareBall(), hgcn.Hyperboloid()
    xb = torch.tensor([[0.5, 0.1], [-0.3, 0.6]], dtype=f64)
    u = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.3, -2.0]], dtype=f64)
    lift = (lambda t: hm.mc(t, nc=nc)) if nc else (lambda t: t)
    cb = torch.nn.Parameter(torch.tensor([c0], dtype=dtype))
    B.sqdist(lift(xb[:1]), lift(xb[1:]), cb).sum().backward()
    cl = torch.nn.Parameter(torch.tensor([c0], dtype=dtype))
    p = L.expmap0(lift(u), cl)
    L.sqdist(p[:1], p[1:], cl).sum().backward()

    def ball_sq(c):
        x, y = [mpmath.mpf(float(v)) for v in xb[0]], [mpmath.mpf(float(v)) for v in xb[1]]
        rho2 = sum((a - b) ** 2 for a, b in zip(x, y))
        dx, dy = 1 - c * sum(a * a for a in x), 1 - c * sum(b * b for b in y)
        return (2 * mpmath.asinh(mpmath.sqrt(c * rho2 / (dx * dy))) / mpmath.sqrt(c)) ** 2

    def hyp_sq(c):
        def point(v):
            n = mpmath.sqrt(sum(mpmath.mpf(float(a)) ** 2 for a in v[1:]))
            s = mpmath.sqrt(c)
            return [mpmath.cosh(s * n) / s] + [mpmath.sinh(s * n) / (s * n) * mpmath.mpf(float(a)) for a in v[1:]]

        x, y = point(u[0]), point(u[1])
        inner = -x[0] * y[0] + sum(a * b for a, b in zip(x[1:], y[1:]))
        return (mpmath.acosh(-c * inner) / mpmath.sqrt(c)) ** 2

    with mpmath.workdps(50):
        for grad, f in [(cb.grad, ball_sq), (cl.grad, hyp_sq)]:
            exact = mpmath.diff(f, mpmath.mpf(c0))
            assert grad.dtype == dtype and abs(float(grad) - float(exact)) <= tol * abs(float(exact)), (grad, exact)
