"""Edges of the manifolds: points near the ball's boundary, lifted points, transport.

The ball's ``projx`` keeps the deficit ``1 - |x|^2`` at least ``2^8 max(u^nc, s)``
(``s`` the dtype's smallest subnormal): with ``2^8 u^nc`` alone, ``1 - 2^8 u^nc``
rounded to 1 for float16 ``nc >= 3``, float32 ``nc >= 7``, float64 ``nc >= 21`` and the
point stayed on the boundary. Checked with the exact deficit of the stored components
(Fractions).
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.manifolds.math.ball import edge_deficit
from tests.oracle import components_to_fraction

f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
#: (dtype, nc): both sides of the nc where u^nc falls below the smallest subnormal
CASES = [(f16, 2), (f16, 3), (f16, 4), (bf16, 3), (f32, 6), (f32, 7), (f64, 2), (f64, 21)]
#: the large-nc kernels take ~40-120 s per call on one core
SLOW = [pytest.param(dt, nc, marks=pytest.mark.slow) for dt, nc in [(bf16, 17), (f32, 12), (f64, 24)]]


def exact_deficit(x: hm.MCTensor) -> Fraction:
    """``1 - |x|^2`` of the stored point, exactly."""
    return 1 - sum(v * v for v in components_to_fraction(x.components).tolist())


@pytest.mark.parametrize(("dtype", "nc"), CASES + SLOW)
def test_projx_of_a_boundary_point_lands_inside_and_is_idempotent(dtype, nc):
    M = PoincareBall()
    # on the boundary, just outside, and far outside (|x| = 1000: the scale 1 / |x| alone
    # would lose its tail to the subnormals in float16 and at a high nc)
    rows = [[1.0, 0.0], [0.6, 0.8], [3.0, 4.0], [955.3, 295.5], [1000.0, 0.0], [1e4, -3e3]]
    x = hm.mc(torch.tensor(rows, dtype=f64), nc=nc, dtype=dtype)
    p = M.projx(x)
    eps = Fraction(edge_deficit(x, 8))
    assert eps > 0
    for row in range(len(rows)):
        d = exact_deficit(p[row])
        assert eps / 2 <= d <= 2 * eps, (row, float(d), float(eps))
    assert M.check_point(p) == (True, None)
    assert torch.equal(M.projx(p).components, p.components)


@pytest.mark.parametrize(("dtype", "nc"), [(f16, 3), (f16, 4), (f32, 7), pytest.param(f64, 21, marks=pytest.mark.slow)])
def test_expmap0_of_a_long_tangent_vector_lands_inside(dtype, nc):
    M = PoincareBall()
    u = hm.mc(torch.tensor([[500.0, 0.0], [0.0, -30.0]], dtype=f64), nc=nc, dtype=dtype)
    e = M.expmap0(u)
    assert M.check_point(e) == (True, None)
    assert all(exact_deficit(e[row]) > 0 for row in range(2))


# ------------------------------------- Lorentz: a float64 point lifted to MC components


def test_lorentz_float64_point_lifted_to_mc_is_a_point():
    """``hm.mc(p64, nc=2)`` holds the constraint to float64's u (its tails are zero): it is
    checked at that precision, not refused until ``projx`` runs on the MC value."""
    L = Lorentz()
    p64 = L.projx(L.random(4, 3, nc=None, dtype=f64, generator=torch.Generator().manual_seed(0)))
    lifted = hm.mc(p64, nc=2)
    d = L.dist0(lifted)
    assert L.check_point(lifted) == (True, None)
    with mpmath.workdps(50):
        # dist0 of the stored coordinates: asinh(|x_bar|) and acosh(x_0) agree to ~u (the point is float64-accurate)
        want = [float(mpmath.acosh(mpmath.mpf(float(v)))) for v in p64[:, 0].tolist()]
    assert [float(v) for v in d.to_mpmath()] == pytest.approx(want, rel=2**-50)


def test_lorentz_check_uses_the_components_a_point_carries():
    L = Lorentz()
    off = torch.tensor([1.0 + 2**-40, 0.0, 0.0], dtype=f64)  # off by ~2^-39: more than float64's tolerance
    with pytest.raises(ValueError, match=r"Lorentz\.dist0: x is not a point of .*more than 2\.84e-14 x_0\^2 \(off the hyperboloid\)"):
        L.dist0(hm.mc(off, nc=2))
    tail = hm.mc(torch.tensor([1.0, 0.0, 0.0], dtype=f64), nc=2) + hm.mc(torch.tensor([1e-20, 0.0, 0.0], dtype=f64), nc=2)
    with pytest.raises(ValueError, match=r"more than 3\.16e-30 x_0\^2 \(off the hyperboloid\)"):  # a tail: checked at u^2
        L.dist0(tail)


# ------------------------------------- ball transport along tiny steps near the boundary


def _mobius_add(a: list, b: list) -> list:
    ab = mpmath.fsum(p * q for p, q in zip(a, b))
    aa, bb = mpmath.fsum(p * p for p in a), mpmath.fsum(q * q for q in b)
    den = 1 + 2 * ab + aa * bb
    return [((1 + 2 * ab + bb) * p + (1 - aa) * q) / den for p, q in zip(a, b)]


def _transp_oracle(x: hm.MCTensor, y: hm.MCTensor, v: hm.MCTensor) -> list:
    """``(D_y / D_x) gyr[y, -x] v`` (c = 1) of the stored values, at 700 digits (the
    points differ by 1e-305 relative to 1)."""
    with mpmath.workdps(700):
        X, Y, V = ([mpmath.mpf(t) for t in a.to_mpmath()] for a in (x, y, v))
        mx = [-t for t in X]
        rotated = _mobius_add([-t for t in _mobius_add(Y, mx)], _mobius_add(Y, _mobius_add(mx, V)))
        scale = (1 - mpmath.fsum(t * t for t in Y)) / (1 - mpmath.fsum(t * t for t in X))
        return [scale * t for t in rotated]


R = 1 - 1e-12


@pytest.mark.parametrize(
    ("xs", "vs"),
    [([R / 2**0.5, R / 2**0.5], [0.1, -0.1]), ([0.6 * R, 0.8 * R], [0.3, -0.7]), ([R, 0.0], [0.0, 0.1])],
)
@pytest.mark.parametrize("step", [1e-305, 1e-200, 1e-20, 1e-3])
def test_ball_transp_along_a_tiny_step_near_the_boundary_matches_mpmath(xs, vs, step):
    """1 - |x| = 1e-12, y = x + step v, nc = 2: within 2^-100 of the exact transport
    (was 0.0999999832 for 0.1 at step 1e-305: D_x (y - x) underflowed)."""
    M = PoincareBall()
    x = hm.mc(torch.tensor(xs, dtype=f64), nc=2)
    v = hm.mc(torch.tensor(vs, dtype=f64), nc=2)
    y = x + step * v
    assert not torch.equal(y.components, x.components)
    got = M.transp(x, y, v).to_mpmath()
    want = _transp_oracle(x, y, v)
    err = max(abs(g - w) for g, w in zip(got, want)) / max(abs(w) for w in want)
    assert err <= mpmath.mpf(2) ** -100, float(err)
