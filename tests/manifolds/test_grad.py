"""MC gradients of the distances against mpmath derivatives, and a NaN sweep.

The reference gradient is ``mpmath.diff`` of the textbook ``acosh`` distance formula at
the exact stored points. Ball and halfspace: the Euclidean gradient, within the
``"grad"`` bound (64 u^nc, relative, 2-norm of the vector). Lorentz: the two formulas
are different extensions off the hyperboloid, so the *Riemannian* gradients are
compared; the projection cancels ``~x_0^2``, so the bound is ``64 u^nc x_0^2``.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from tests.conftest import BOUNDS
from tests.manifolds import points as P

F64 = torch.float64


def _rel_vec(got, ref) -> float:
    with mpmath.workprec(P.PREC):
        num = mpmath.sqrt(sum((mpmath.mpf(a) - b) ** 2 for a, b in zip(got, ref)))
        den = mpmath.sqrt(sum(b * b for b in ref))
        return float(num / den)


def _grad_of_dist(M, pts):
    x = pts[:1].clone().requires_grad_()
    M.dist(x, pts[1:]).sum().backward()
    assert isinstance(x.grad, hm.MCTensor) and x.grad.nc == pts.nc
    return x


def _ball_pairs():
    with mpmath.workprec(P.PREC):
        x = P.ball_point(40, P.unit(3, 0))
        near = [a + mpmath.mpf("1e-20") * b for a, b in zip(x, P.unit(3, 2))]
        return {"far": (x, P.ball_point(40, P.unit(3, 1))), "near": (x, near), "origin": ([0, 0, 0], P.ball_point(30, P.unit(3, 3)))}


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("case", ["far", "near", "origin"])
def test_ball_gradient(nc, case):
    """Radius 40 (and 1e-20 apart there) within 64 u^nc; the plain float64 gradient is
    NaN or 0."""
    x, y = _ball_pairs()[case]
    pts = P.to_mc([x, y], nc)
    xg = _grad_of_dist(PoincareBall(), pts)
    ex, ey = P.exact(pts)
    ref = P.grad_ref(lambda z: P.dist_ball(z, ey), ex)
    err = _rel_vec(xg.grad.to_mpmath()[0], ref)
    assert err <= BOUNDS["grad"] * 2.0 ** (-53 * nc), err / 2.0 ** (-53 * nc)
    if case != "origin":
        xp = pts[:1].approx().requires_grad_()
        with pytest.raises(ValueError, match="outside the ball"):  # rounded onto the boundary
            PoincareBall().dist(xp, pts[1:].approx())
        dp = PoincareBall().dist(xp, pts[1:].approx(), check=False)
        dp.sum().backward()
        # plain float64: NaN (far), or both points round to one boundary point (near)
        assert not torch.isfinite(xp.grad).all() or (xp.grad == 0).all()


@pytest.mark.parametrize("nc", [2, 3])
def test_halfspace_gradient(nc):
    with mpmath.workprec(P.PREC):
        rows = [
            [mpmath.mpf(1), mpmath.mpf("1e-25")],
            [1 + mpmath.mpf("1e-30"), mpmath.mpf("1e-25")],
            [mpmath.mpf("0.5"), mpmath.mpf("1e-100")],
            [mpmath.mpf(7), mpmath.mpf("1e100")],
        ]
    M = PoincareHalfspace()
    for pair in (rows[:2], rows[2:]):
        pts = P.to_mc(pair, nc)
        xg = _grad_of_dist(M, pts)
        ex, ey = P.exact(pts)
        ref = P.grad_ref(lambda z: P.dist_halfspace(z, ey), ex)  # noqa: B023 - called here
        err = _rel_vec(xg.grad.to_mpmath()[0], ref)
        assert err <= BOUNDS["grad"] * 2.0 ** (-53 * nc), err / 2.0 ** (-53 * nc)


@pytest.mark.parametrize("radii", [(20, 20), (10, 3)])
def test_lorentz_riemannian_gradient(radii):
    nc = 2
    M = Lorentz()
    pts = P.to_mc([P.lorentz_point(radii[0], P.unit(2, 0)), P.lorentz_point(radii[1], P.unit(2, 1))], nc)
    xg = _grad_of_dist(M, pts)
    rgrad = M.egrad2rgrad(xg.detach(), xg.grad)
    ex, ey = P.exact(pts)
    ref = P.grad_ref(lambda z: P.dist_lorentz(z, ey), ex)
    with mpmath.workprec(P.PREC):  # Riemannian gradient of the reference: proju(x, J g)
        jg = [-ref[0]] + ref[1:]
        inner = -ex[0] * jg[0] + sum(a * b for a, b in zip(ex[1:], jg[1:]))
        ref_r = [a + inner * b for a, b in zip(jg, ex)]
    err = _rel_vec(rgrad.to_mpmath()[0], ref_r)
    x0 = float(ex[0])
    assert err <= BOUNDS["grad"] * 2.0 ** (-53 * nc) * x0**2, err


@pytest.mark.parametrize("name", ["ball", "halfspace", "lorentz"])
def test_no_nan_in_gradients(name):
    """Log-spaced sweep of radii (1e-3 .. the MC range) and separations (0, 1e-30 ..
    10): dist, its gradients in both arguments, and those of expmap / logmap are finite."""
    M = {"ball": PoincareBall(), "halfspace": PoincareHalfspace(), "lorentz": Lorentz()}[name]
    top = {"ball": 60.0, "halfspace": 60.0, "lorentz": 25.0}[name]
    radii = [1e-3, 0.1, 3.0, top / 2, top]
    seps = [0.0, 1e-30, 1e-12, 1e-3, 1.0, 10.0]
    x = P.to_mc([P.point(name, r, P.unit(2, i)) for i, r in enumerate(radii)], 2)
    x = x.unsqueeze(1).expand(len(radii), len(seps), x.shape[-1]).contiguous()
    e = hm.mc(torch.randn(x.shape, dtype=F64, generator=torch.Generator().manual_seed(0)), nc=2)
    u = M.proju(x, e)
    length = torch.tensor(seps, dtype=F64).reshape(1, -1, 1)
    u = u * (length / M.norm(x, u, keepdim=True))
    y = M.expmap(x, u)
    xr = x.clone().requires_grad_()
    yr = y.clone().requires_grad_()
    ur = u.clone().requires_grad_()
    d = M.dist(xr, yr)
    assert torch.isfinite(d.approx()).all()
    (d.sum() + M.logmap(xr, yr).sum() + M.expmap(xr, ur).sum()).backward()
    for t in (xr, yr, ur):
        comps = t.grad.components
        assert torch.isfinite(comps).all(), f"inf or NaN in gradient of {name}"
    assert math.isfinite(float(d.detach().sum()))
