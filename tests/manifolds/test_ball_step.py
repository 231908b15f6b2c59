"""The ball's optimizer step and MC distance gradient, against mpmath and the formulas.

* :func:`hypermc.manifolds.math.ball.expmap_egrad` (the Riemannian SGD step with the
  deficit formed once): the hyperbolic distance from the mpmath step of the stored
  points, ``expmap(x, t D^2 g / 4)`` in exact arithmetic, within ``64 u^nc`` (points at
  radius 40 too, where plain float64 has no digit of ``D`` left), and the optimizer
  taking it;
* the MC distance's closed-form gradient (``_MCDist``): the formula's own values bit for
  bit, gradients equal to autograd through the formula within ``64 u^nc`` (relative, per
  vector), broadcasting, ``x = y``, second derivatives.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.manifolds.math import ball as B
from hypermc.optim import RiemannianSGD
from tests.conftest import BOUNDS
from tests.manifolds import points as P

F64 = torch.float64


def _exact_step(x, g, t, c=1):
    """``expmap_x(t D^2 g / 4)`` in mpmath (the Möbius form of geoopt's docs)."""
    with mpmath.workprec(P.PREC):
        t, c = mpmath.mpf(t), mpmath.mpf(c)
        d = 1 - c * sum(a * a for a in x)
        u = [t * d * d / 4 * a for a in g]
        nu = mpmath.sqrt(sum(a * a for a in u))
        if nu == 0:
            return list(x)
        v = [mpmath.tanh(mpmath.sqrt(c) * nu / d) * a / (mpmath.sqrt(c) * nu) for a in u]
        xv, vv, xx = sum(a * b for a, b in zip(x, v)), sum(a * a for a in v), sum(a * a for a in x)
        den = 1 + 2 * c * xv + c * c * xx * vv
        return [((1 + 2 * c * xv + c * vv) * a + (1 - c * xx) * b) / den for a, b in zip(x, v)]


def _rows(radii, n, seed):
    return [P.ball_point(r, P.unit(n, seed + i)) for i, r in enumerate(radii)]


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("t", [-1e-3, -0.5, 2.0])
def test_expmap_egrad_against_mpmath(nc, t):
    """Radii 0.5 to 40, steps from tiny to several units: within ``64 u^nc e^r`` in
    distance (a coordinate is stored to ``u^nc``, a hyperbolic length ``~u^nc e^r / 4``
    at radius ``r``: the resolution of :mod:`hypermc.manifolds.math.ball`)."""
    radii = [0.5, 3.0, 12.0, 40.0]
    xs = P.to_mc(_rows(radii, 4, 3), nc)
    gen = torch.Generator().manual_seed(5)
    gs = hm.mc(torch.randn(len(radii), 4, dtype=F64, generator=gen), nc=nc)
    got = B.expmap_egrad(xs, gs, t)
    ex, eg = P.exact(xs), P.exact(gs)
    for i in range(len(radii)):
        ref = _exact_step(ex[i], eg[i], t)
        err = float(P.dist_ball(got[i].to_mpmath().tolist(), ref))
        assert err <= BOUNDS["grad"] * 2.0 ** (-53 * nc) * math.exp(radii[i]), (radii[i], err / 2.0 ** (-53 * nc))


@pytest.mark.parametrize("nc", [None, 1, 2, 3])
def test_expmap_egrad_is_the_two_calls(nc):
    """The same point as ``expmap(x, t * egrad2rgrad(x, g))`` to u^nc (plain: to float64)."""
    M = PoincareBall()
    xs = P.to_mc(_rows([0.1, 2.0, 9.0], 3, 11), nc)
    gen = torch.Generator().manual_seed(2)
    g = torch.randn(3, 3, dtype=F64, generator=gen)
    g = g if nc is None else hm.mc(g, nc=nc)
    got, ref = M.expmap_egrad(xs, g, -0.2), M.expmap(xs, M.egrad2rgrad(xs, g) * -0.2)
    d = M.dist(got, ref)
    d = d if nc is None else d.approx()
    assert (d <= 64 * 2.0 ** (-53 * (nc or 1)) * 1e3).all(), d


def test_expmap_egrad_zero_gradient_and_huge_step():
    """``g = 0`` leaves the point where it is (to its resolution); a step whose cosh
    overflows lands on the MC edge (projx), not NaN."""
    M = PoincareBall()
    x = P.to_mc(_rows([1.0, 30.0], 3, 4), 2)
    assert (M.dist(M.expmap_egrad(x, x * 0, -1.0), x).approx() <= 64 * 2.0**-106 * math.exp(30)).all()
    far = M.expmap_egrad(x, hm.mc(torch.full((2, 3), 1e25, dtype=F64), nc=2), 10.0)  # z ~ 1e12, 1e25
    assert torch.isfinite(far.components).all()
    assert (M.dist0(far).approx() > 60).all()


def test_expmap_egrad_checks_its_arguments():
    M = PoincareBall()
    with pytest.raises(ValueError, match=r"expmap_egrad: the point dimensions \(last\) differ"):
        M.expmap_egrad(torch.zeros(2, 3, dtype=F64), torch.zeros(2, 4, dtype=F64), -0.1)
    with pytest.raises(TypeError, match="expmap_egrad: g must be a Tensor or MCTensor"):
        M.expmap_egrad(torch.zeros(2, 3, dtype=F64), [0.0, 1.0, 2.0], -0.1)
    for manifold in (M, Lorentz()):
        x = manifold.origin(2, 3, nc=None, dtype=F64)
        with pytest.raises(ValueError, match=r"expmap_egrad: t must be a finite number; got nan"):
            manifold.expmap_egrad(x, torch.zeros_like(x), float("nan"))
        with pytest.raises(TypeError, match=r"expmap_egrad: t must be a finite number; got str"):
            manifold.expmap_egrad(x, torch.zeros_like(x), "0.1")


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_step_is_expmap_egrad(momentum):
    """Without momentum RiemannianSGD moves by ``expmap_egrad`` (bit for bit); with it, by
    ``expmap`` of the buffer (the first step: of the Riemannian gradient)."""
    M = PoincareBall()
    x0 = P.to_mc(_rows([0.5, 5.0, 20.0], 3, 8), 2)
    gen = torch.Generator().manual_seed(9)
    g = hm.mc(torch.randn(3, 3, dtype=F64, generator=gen), nc=2)
    p = hm.ManifoldParameter(x0.clone(), manifold=M)
    p.grad = g.clone()
    RiemannianSGD([p], lr=0.05, momentum=momentum).step()
    ref = M.expmap_egrad(x0, g, -0.05) if momentum == 0 else M.expmap(x0, M.egrad2rgrad(x0, g) * -0.05, check=False)
    assert torch.equal(p.detach().components, ref.components)


# --------------------------------------------------------------- the MC distance's gradient


def _pair(nc, shape_x, shape_y, seed):
    gen = torch.Generator().manual_seed(seed)

    def pts(shape):
        v = torch.randn(*shape, dtype=F64, generator=gen)
        r = torch.rand(*shape[:-1], 1, dtype=F64, generator=gen) * 0.95
        return hm.mc(v / torch.linalg.vector_norm(v, dim=-1, keepdim=True) * r, nc=nc)

    return pts(shape_x), pts(shape_y)


def _vec_err(got, ref):
    """Max over vectors (last dim) of |got - ref| / |ref|, in float64 from the MC difference."""
    diff = torch.linalg.vector_norm((got - ref).approx(), dim=-1)
    return float((diff / torch.linalg.vector_norm(ref.approx(), dim=-1).clamp_min(1e-300)).max())


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("shapes", [((6, 4), (6, 4)), ((3, 1, 4), (1, 5, 4)), ((2, 3, 4), (4,))])
def test_mc_distance_gradient_is_the_formula(nc, shapes):
    x, y = _pair(nc, *shapes, seed=nc)
    assert B._MCDist.applies(x, y)
    xa, ya = x.clone().requires_grad_(), y.clone().requires_grad_()
    xb, yb = x.clone().requires_grad_(), y.clone().requires_grad_()
    d = B.dist(xa, ya)
    ref = B._measured(xb, yb, c=1.0)[0]
    assert torch.equal(d.components, ref.components)  # the same values, bit for bit
    w = hm.mc(torch.linspace(0.5, 2.0, d.numel(), dtype=F64).reshape(d.shape), nc=nc)
    (d * w).sum().backward()
    (ref * w).sum().backward()
    assert xa.grad.shape == x.shape and ya.grad.shape == y.shape
    for got, want in ((xa.grad, xb.grad), (ya.grad, yb.grad)):
        assert _vec_err(got, want) <= BOUNDS["grad"] * 2.0 ** (-53 * nc)


@pytest.mark.parametrize("c", [1.0, 0.25, 4.0])
def test_mc_distance_gradient_with_curvature(c):
    M = PoincareBall(c=c)
    x, y = _pair(2, (5, 3), (5, 3), seed=4)
    x, y = x / c**0.5, y / c**0.5
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    M.dist(xa, y).sum().backward()
    B._measured(xb, y, c=c)[0].sum().backward()
    assert _vec_err(xa.grad, xb.grad) <= BOUNDS["grad"] * 2.0**-106


def test_mc_distance_gradient_at_equal_points_is_zero():
    x, _ = _pair(2, (3, 4), (3, 4), seed=1)
    xa = x.clone().requires_grad_()
    B.dist(xa, x.clone()).sum().backward()
    assert torch.equal(xa.grad.components, torch.zeros_like(xa.grad.components))


def test_mc_distance_gradient_with_some_equal_points():
    """Rows with ``x = y`` among others: the equal rows' distance and gradient are 0 (the
    ``where`` path of the closed form and of ``safe_sqrt``), the others are the formula's
    (the shortcut without ``where`` is taken only where no row is equal)."""
    x, y = _pair(2, (4, 3), (4, 3), seed=7)
    y = torch.cat([y[:1], x[1:2], y[2:]])  # row 1: coincident
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    d = B.dist(xa, y)
    ref = B._measured(xb, y, c=1.0)[0]
    assert torch.equal(d.components, ref.components) and float(d.detach()[1]) == 0.0
    d.sum().backward()
    ref.sum().backward()
    assert torch.equal(xa.grad.components[1], torch.zeros_like(xa.grad.components[1]))
    rows = [0, 2, 3]
    assert _vec_err(xa.grad[rows], xb.grad[rows]) <= BOUNDS["grad"] * 2.0**-106


def test_mc_distance_second_derivative_is_the_formulas():
    """``create_graph=True``: the gradient differentiates the formula's graph (no
    shortcut without a graph)."""
    x, y = _pair(2, (4, 3), (4, 3), seed=6)
    grads = []
    for fn in (lambda a: B.dist(a, y), lambda a: B._measured(a, y, c=1.0)[0]):
        a = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(fn(a).sum(), a, create_graph=True)
        (h,) = torch.autograd.grad((g * g).sum(), a)
        grads.append((g.detach(), h))
    assert _vec_err(grads[0][0], grads[1][0]) <= BOUNDS["grad"] * 2.0**-106
    assert torch.equal(grads[0][1].components, grads[1][1].components)


def test_mc_distance_takes_the_formula_where_the_shortcut_does_not_apply():
    x, y = _pair(2, (3, 4), (3, 4), seed=2)
    plain = y.approx().requires_grad_()
    assert not B._MCDist.applies(x, plain)  # a plain operand with a gradient of its own
    assert not B._MCDist.applies(x.approx(), y.approx())  # plain points: the plain path
    assert not B._MCDist.applies(x, hm.mc(y.approx(), nc=3))  # different nc: refused by the ops
    assert B._MCDist.applies(x, y.approx())  # a plain target without gradient
