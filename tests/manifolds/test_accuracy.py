"""Acceptance accuracy of the distances far from the origin, against mpmath.

Each reference is the textbook ``acosh`` formula evaluated in mpmath (``points.PREC``
bits) on the exact values of the *stored* MC points. 'plain' is the same method on the
float64 rounding of the points (``nc = 1``).
"""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from tests.conftest import BOUNDS
from tests.manifolds import points as P
from tests.oracle import assert_within

F64 = torch.float64


def _u(nc: int) -> float:
    return 2.0 ** (-53 * nc)


# ----------------------------------------------------------------------- halfspace


def test_halfspace_close_points_near_the_boundary():
    """x = (1, 1e-25), y = (1 + 1e-30, 1e-25): nc=3 within 64 u^3; plain float64 gives 0."""
    M = PoincareHalfspace()
    with mpmath.workprec(P.PREC):
        rows = [[mpmath.mpf(1), mpmath.mpf("1e-25")], [1 + mpmath.mpf("1e-30"), mpmath.mpf("1e-25")]]
    pts = P.to_mc(rows, 3)
    x, y = pts[:1], pts[1:]
    assert x.dtype == F64 and x.nc == 3
    ex, ey = P.exact(x)[0], P.exact(y)[0]
    d = M.dist(x, y)
    assert_within(d, [P.dist_halfspace(ex, ey)], F64, 3, BOUNDS["transcendental"], msg="halfspace dist")
    assert float(d) == pytest.approx(1e-5, rel=1e-9)
    plain = M.dist(x.approx(), y.approx())
    assert plain.dtype == F64 and float(plain) == 0.0


@pytest.mark.parametrize("height", [1e-200, 1e-100, 1e-20, 1.0, 1e20, 1e100, 1e200])
def test_halfspace_extreme_heights(height):
    """Heights from 1e-200 to 1e200 (both points, and against a point at height 1e-3)."""
    M = PoincareHalfspace()
    rows = [[0.5, height], [0.25, 1e-3], [0.5 + height * 0.75, height * 2]]
    pts = P.to_mc(rows, 2)
    x = pts[[0, 0]]
    y = pts[[1, 2]]
    d = M.dist(x, y)
    assert torch.isfinite(d.approx()).all()
    ex, ey = P.exact(x), P.exact(y)
    refs = [P.dist_halfspace(a, b) for a, b in zip(ex, ey)]
    assert_within(d, refs, F64, 2, BOUNDS["transcendental"], msg=f"height {height:g}")


# ----------------------------------------------------------------------------- ball


@pytest.mark.parametrize("nc, radius", [(2, 60), (3, 100)])
def test_ball_far_from_origin(nc, radius):
    """dist(origin, x) and dist(x, y) at hyperbolic radius 60 (nc=2) / 100 (nc=3) within
    1e-6 relative (measured: below 1e-30); plain float64 rounds onto the boundary (refused; inf or NaN unchecked)."""
    M = PoincareBall()
    rows = [P.ball_point(radius, P.unit(3, 0)), P.ball_point(radius, P.unit(3, 1)), [0, 0, 0]]
    pts = P.to_mc(rows, nc)
    x, y, o = pts[0:1], pts[1:2], pts[2:3]
    ex, ey, eo = P.exact(x)[0], P.exact(y)[0], P.exact(o)[0]
    d0, d = M.dist(o, x), M.dist(x, y)
    r0, r = P.dist_ball(eo, ex), P.dist_ball(ex, ey)
    assert P.rel(d0.to_mpmath()[0], r0) < 1e-6
    assert P.rel(d.to_mpmath()[0], r) < 1e-6
    assert P.rel(M.dist0(x).to_mpmath()[0], r0) < 1e-6
    # the stored point itself is only resolved to ~u^nc e^r / 2 (7e-7 at r = 60, nc = 2)
    assert float(r0) == pytest.approx(radius, abs=1e-5)
    # rounded to one float64 the point lands on the boundary: refused, inf/NaN unchecked
    with pytest.raises(ValueError, match=r"dist: y is not a point .*outside the ball"):
        M.dist(o.approx(), x.approx())
    plain = [M.dist(o.approx(), x.approx(), check=False), M.dist(x.approx(), y.approx(), check=False)]
    assert all(not torch.isfinite(t).all() for t in plain), plain


# -------------------------------------------------------------------------- Lorentz


def test_lorentz_far_from_origin():
    """nc=2 at radius 25: dist(origin, x), dist(x, y) within 1e-6 relative of mpmath."""
    M = Lorentz()
    rows = [P.lorentz_point(25, P.unit(3, 0)), P.lorentz_point(25, P.unit(3, 1)), [1, 0, 0, 0]]
    pts = P.to_mc(rows, 2)
    x, y, o = pts[0:1], pts[1:2], pts[2:3]
    ex, ey, eo = P.exact(x)[0], P.exact(y)[0], P.exact(o)[0]
    assert P.rel(M.dist(o, x).to_mpmath()[0], P.dist_lorentz(eo, ex)) < 1e-6
    assert P.rel(M.dist(x, y).to_mpmath()[0], P.dist_lorentz(ex, ey)) < 1e-6
    assert P.rel(M.dist0(x).to_mpmath()[0], P.dist_lorentz(eo, ex)) < 1e-6


def test_lorentz_close_points_far_out():
    """Two points at radius 25, 1e-3 apart: MC within 1e-6 of their exact distance, plain
    float64 off by 6e-4 (its stored points violate the constraint by ~1e5).

    The reference is the distance of the exact (unrounded) points: the stored nc=2 points
    satisfy the constraint only to ~u^2 x_0^2 ~ 1e-11, which moves acosh(-<x, y>_L) of
    the stored values by 1e-5 relative at this separation, while the ``|x - y|_L`` form
    (which only sees the differences) stays at the exact points' distance."""
    M = Lorentz()
    v = P.unit(2, 3)
    with mpmath.workprec(P.PREC):
        x = P.lorentz_point(25, v)
        # move along the geodesic circle of radius 25 by an angle giving distance ~1e-3
        w = [-v[1], v[0]]
        a = mpmath.mpf("1e-3") / mpmath.sinh(25)
        v2 = [mpmath.cos(a) * p + mpmath.sin(a) * q for p, q in zip(v, w)]
        y = P.lorentz_point(25, v2)
    pts = P.to_mc([x, y], 2)
    ref = P.dist_lorentz(x, y)
    assert P.rel(M.dist(pts[:1], pts[1:]).to_mpmath()[0], ref) < 1e-6
    plain = M.dist(pts[:1].approx(), pts[1:].approx())
    assert P.rel(float(plain), ref) > 1e-5  # measured 6e-4


def test_ranges_documented():
    """The MC range statements in the docstrings match u^nc: the ball resolves points to
    ~u^nc e^r / 2, below 1e-6 up to r = nc p ln2 - 13.1 (60 for float64 nc=2)."""
    r2 = 2 * 53 * math.log(2) + math.log(2e-6)
    assert round(r2) == 60
    assert _u(2) * math.exp(60) / 2 < 1e-6
    for cls in (PoincareBall, Lorentz, PoincareHalfspace):
        assert "MC range" in cls.__doc__
