"""The isometries of hypermc.manifolds.convert: round trips and equal distances."""

from __future__ import annotations

import pytest
import torch

from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from hypermc.manifolds import convert as C
from tests.manifolds import points as P

F64 = torch.float64
NC = 2
TOL = 1e-6


def _ball_points(radii, seed, c=1):
    return P.to_mc([P.ball_point(r, P.unit(3, seed + i), c) for i, r in enumerate(radii)], NC)


@pytest.mark.parametrize("curvature", [-1.0, -0.5, -3.0])
def test_same_distance_in_all_models(curvature):
    """d is the same through all three models (radii up to the Lorentz range)."""
    c = -curvature
    radii = [0.1 / c**0.5, 5.0, 12.0, 20.0]
    B, H, L = PoincareBall(curvature=curvature), PoincareHalfspace(curvature=curvature), Lorentz(curvature=curvature)
    b1, b2 = _ball_points(radii, 0, c), _ball_points(radii[::-1], 10, c)
    h1, h2 = C.ball_to_halfspace(b1, curvature=curvature), C.ball_to_halfspace(b2, curvature=curvature)
    l1, l2 = C.ball_to_lorentz(b1, curvature=curvature), C.ball_to_lorentz(b2, curvature=curvature)
    assert H.check_point(h1)[0] and L.check_point(l1)[0] and L.check_point(l2)[0]
    db = B.dist(b1, b2)
    for d in (H.dist(h1, h2), L.dist(l1, l2)):
        assert ((d - db).abs() <= 1e-12 * db).all(), (d - db).approx()
    # the halfspace <-> Lorentz maps directly
    l3 = C.halfspace_to_lorentz(h1, curvature=curvature)
    assert ((L.dist(l3, l2) - db).abs() <= 1e-12 * db).all()


@pytest.mark.parametrize("radius", [0.0, 1.0, 20.0, 55.0])
def test_round_trips(radius):
    """ball -> halfspace -> ball, ball -> Lorentz -> ball, halfspace <-> Lorentz are the
    identity to a hyperbolic 1e-6 (Lorentz only inside its range)."""
    B, H, L = PoincareBall(), PoincareHalfspace(), Lorentz()
    b = _ball_points([radius, radius / 2], 3)
    h = C.ball_to_halfspace(b)
    assert (B.dist(C.halfspace_to_ball(h), b).approx() <= TOL).all()
    if radius <= 25:
        lo = C.ball_to_lorentz(b)
        assert (B.dist(C.lorentz_to_ball(lo), b).approx() <= TOL).all()
        assert (H.dist(C.lorentz_to_halfspace(lo), h).approx() <= TOL).all()
        assert (L.dist(C.halfspace_to_lorentz(h), lo).approx() <= TOL).all()


def test_origins_correspond():
    B, H, L = PoincareBall(), PoincareHalfspace(), Lorentz()
    o = B.origin(3, nc=2, dtype=F64)
    assert torch.equal(C.ball_to_halfspace(o).components, H.origin(3, nc=2, dtype=F64).components)
    assert torch.equal(C.ball_to_lorentz(o).components, L.origin(4, nc=2, dtype=F64).components)
    assert torch.equal(C.lorentz_to_halfspace(L.origin(4, nc=2, dtype=F64)).components, H.origin(3, nc=2, dtype=F64).components)


def test_exact_far_point_in_the_halfspace():
    """A ball point at radius 100 (nc=3) maps to a halfspace point whose distance to the
    origin stays accurate (the deficit enters the height as a factor)."""
    b = P.to_mc([P.ball_point(100, P.unit(2, 5))], 3)
    h = C.ball_to_halfspace(b)
    ref = P.dist_ball(P.exact(b)[0], [0, 0])
    assert P.rel(PoincareHalfspace().dist0(h).to_mpmath()[0], ref) < 1e-20


def test_bad_input():
    with pytest.raises(TypeError, match="ball_to_lorentz: b must be a Tensor or MCTensor of points; got list"):
        C.ball_to_lorentz([[0.1, 0.2]])
    with pytest.raises(TypeError, match="lorentz_to_ball: x must have a floating dtype; got torch.int64"):
        C.lorentz_to_ball(torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"lorentz_to_ball: x must have a last \(point\) dimension of size >= 2"):
        C.lorentz_to_ball(torch.ones(3, 1, dtype=F64))
    with pytest.raises(ValueError, match=r"ball_to_halfspace: curvature must be a finite number < 0.0; got 1.0\. Use Euclidean"):
        C.ball_to_halfspace(torch.zeros(2, dtype=F64), curvature=1.0)
    with pytest.raises(TypeError, match="curvature must be passed by keyword"):
        PoincareBall(-1.0)
