"""Isometries between the three hyperbolic models, in MC arithmetic.

All maps take points of one model with curvature ``K = -c`` (keyword ``curvature``,
default ``-1``, the same meaning as in :mod:`hypermc.manifolds.base`) and return the
corresponding points of the other model with the same curvature; distances are
preserved. Conventions: the halfspace's height is its *last* coordinate, the Lorentz
time coordinate is the *first*; the halfspace point ``(0, ..., 0, 1)``, the ball's
origin ``0`` and the hyperboloid's ``(1/sqrt c, 0, ..., 0)`` correspond. Dimensions: a
halfspace / ball point in ``R^n`` corresponds to a Lorentz point in ``R^(n+1)``.

Formulas for ``c = 1`` (general ``c``: the ball and hyperboloid are scaled by
``1/sqrt c``, the halfspace's points are unchanged; ``e = (0, ..., 0, 1)``,
``D_b = 1 - |b|^2`` formed at ``nc + 1`` components)::

    halfspace -> ball      b = (2 x_bar, |x|^2 - 1) / |x + e|^2,    D_b = 4 x_n / |x + e|^2
    ball -> halfspace      x = (2 b_bar, D_b) / |b - e|^2
    ball -> Lorentz        X = (2 / D_b - 1, 2 b / D_b)
    Lorentz -> ball        b = X_bar / (1 + X_0)
    halfspace -> Lorentz   X = ((|x|^2 + 1) / (2 x_n), x_bar / x_n, (|x|^2 - 1) / (2 x_n))
    Lorentz -> halfspace   x = (X_bar', 1) / (X_0 - X_n)   (X_bar' = X_1..X_{n-1});
                           X_0 - X_n = (1 + |X_bar'|^2) / (X_0 + X_n) when X_n > 0

Every denominator is a sum of non-negative terms or uses the constraint to avoid a
cancelling difference, so each map is accurate to a few ``u^nc`` relative to the
coordinates it produces. Laws (tested): the round trips are the identity, and
``dist`` agrees across the models.
"""

from __future__ import annotations

import torch

from .._checks import check_instance
from .base import curvature_to_c
from .math import common

__all__ = [
    "halfspace_to_ball",
    "ball_to_halfspace",
    "ball_to_lorentz",
    "lorentz_to_ball",
    "halfspace_to_lorentz",
    "lorentz_to_halfspace",
]


def _check(x: torch.Tensor, where: str, min_dim: int = 1, arg: str = "x") -> None:
    check_instance(where, arg, x, torch.Tensor, "a Tensor or MCTensor of points")
    if not x.is_floating_point():
        raise TypeError(f"{where}: {arg} must have a floating dtype; got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] < min_dim:
        raise ValueError(f"{where}: {arg} must have a last (point) dimension of size >= {min_dim}; got shape {tuple(x.shape)}")


def _scale(x: torch.Tensor, c: float, power: float) -> torch.Tensor:
    return common.scale_c(x, c=c, power=power)


def _ball_to_halfspace_unit(b: torch.Tensor, c: float) -> torch.Tensor:
    # D_b of the unit-ball point sqrt(c) b equals 1 - c|b|^2
    d = common.deficit(b, c=c, keepdim=True)
    bu = _scale(b, c, 0.5)
    bb, bn = bu[..., :-1], bu[..., -1:]
    one_minus = 1 - bn
    den = common.sqnorm(bb, keepdim=True) + one_minus * one_minus
    return torch.cat([2 * bb, d], dim=-1) / den


def _halfspace_to_ball_unit(x: torch.Tensor) -> torch.Tensor:
    xb, t = x[..., :-1], x[..., -1:]
    r = common.norm(x, keepdim=True)
    den = common.sqnorm(xb, keepdim=True) + (t + 1) * (t + 1)
    return torch.cat([2 * xb, (r - 1) * (r + 1)], dim=-1) / den


def halfspace_to_ball(x: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Halfspace point ``(*, n)`` -> ball point ``(*, n)`` (an isometry).

    .. math:: b = \frac{(2\bar x,\ |x|^2 - 1)}{\sqrt c\,(|\bar x|^2 + (x_n + 1)^2)}

    Example:
        >>> halfspace_to_ball(torch.tensor([0.0, 1.0]))  # the origins correspond
        tensor([0., 0.])

        A point at height ``1e-20`` (hyperbolic radius ``20 ln 10``) lies ``2e-20`` inside
        the ball's boundary: float64 rounds it onto the boundary, ``nc = 2`` keeps it.

        >>> from hypermc.manifolds import PoincareBall, PoincareHalfspace
        >>> x = hm.mc([0.0, 1e-20], nc=2, dtype=torch.float64)
        >>> b = halfspace_to_ball(x)
        >>> round(float(PoincareHalfspace().dist0(x)), 6), round(float(PoincareBall().dist0(b)), 6)
        (46.051702, 46.051702)
        >>> halfspace_to_ball(x.approx())
        tensor([ 0., -1.], dtype=torch.float64)
    """
    _check(x, "halfspace_to_ball")
    c = curvature_to_c(curvature, "halfspace_to_ball")
    return _scale(_halfspace_to_ball_unit(x), c, -0.5)


def ball_to_halfspace(b: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Ball point ``(*, n)`` -> halfspace point ``(*, n)`` (an isometry).

    .. math:: x = \frac{(2\sqrt c\,\bar b,\ 1 - c|b|^2)}{c|\bar b|^2 + (1 - \sqrt c\, b_n)^2}

    Example:
        >>> ball_to_halfspace(torch.zeros(2, dtype=torch.float64))
        tensor([0., 1.], dtype=torch.float64)
        >>> ball_to_halfspace(torch.tensor([0.0, -0.25], dtype=torch.float64), curvature=-4.0)  # radius 1/2
        tensor([0.0000, 0.3333], dtype=torch.float64)

        The round trip through the ball, for a point ``1e-20`` high:

        >>> from hypermc.manifolds import PoincareHalfspace
        >>> x = hm.mc([0.5, 1e-20], nc=2, dtype=torch.float64)
        >>> y = ball_to_halfspace(halfspace_to_ball(x))
        >>> f"{float(y[-1]):.12e}", round(float(PoincareHalfspace().dist(x, y)), 6)
        ('1.000000000000e-20', 0.0)
    """
    _check(b, "ball_to_halfspace", arg="b")
    c = curvature_to_c(curvature, "ball_to_halfspace")
    return _ball_to_halfspace_unit(b, c)


def ball_to_lorentz(b: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Ball point ``(*, n)`` -> hyperboloid point ``(*, n + 1)`` (an isometry).

    .. math:: X = \left(\frac{2/D_b - 1}{\sqrt c},\ \frac{2 b}{D_b}\right),\quad D_b = 1 - c|b|^2

    Example:
        >>> ball_to_lorentz(torch.tensor([0.5, 0.0], dtype=torch.float64))  # D_b = 3/4
        tensor([1.6667, 1.3333, 0.0000], dtype=torch.float64)
        >>> from hypermc.manifolds import Lorentz, PoincareBall
        >>> b = PoincareBall().random(4, 2, nc=2, dtype=torch.float64)
        >>> d_ball = PoincareBall().dist(b[:2], b[2:])
        >>> d_lorentz = Lorentz().dist(ball_to_lorentz(b[:2]), ball_to_lorentz(b[2:]))
        >>> bool(((d_ball - d_lorentz).abs() < 1e-12).all())
        True
    """
    _check(b, "ball_to_lorentz", arg="b")
    c = curvature_to_c(curvature, "ball_to_lorentz")
    d = common.deficit(b, c=c, keepdim=True)
    x0 = _scale(2 / d - 1, c, -0.5)
    return torch.cat([x0, 2 * b / d], dim=-1)


def lorentz_to_ball(x: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Hyperboloid point ``(*, n + 1)`` -> ball point ``(*, n)`` (an isometry).

    .. math:: b = \frac{\bar X}{1 + \sqrt c\,X_0}

    Example:
        >>> lorentz_to_ball(torch.tensor([5 / 3, 4 / 3, 0.0], dtype=torch.float64))
        tensor([0.5000, 0.0000], dtype=torch.float64)
        >>> lorentz_to_ball(torch.tensor([0.5, 0.0]), curvature=-4.0)  # the origin (1/sqrt c, 0)
        tensor([0.])
        >>> from hypermc.manifolds import Lorentz, PoincareBall
        >>> X = Lorentz().expmap0(hm.mc([0.0, 50.0], nc=2, dtype=torch.float64))  # radius 50
        >>> round(float(PoincareBall().dist0(lorentz_to_ball(X))), 6)
        50.0
    """
    _check(x, "lorentz_to_ball", 2)
    c = curvature_to_c(curvature, "lorentz_to_ball")
    return x[..., 1:] / (1 + _scale(x[..., :1], c, 0.5))


def halfspace_to_lorentz(x: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Halfspace point ``(*, n)`` -> hyperboloid point ``(*, n + 1)`` (an isometry).

    .. math:: X = \frac{1}{\sqrt c}\left(\frac{|x|^2 + 1}{2x_n},\ \frac{\bar x}{x_n},\
              \frac{|x|^2 - 1}{2x_n}\right)

    Example:
        >>> halfspace_to_lorentz(torch.tensor([0.0, 1.0], dtype=torch.float64))
        tensor([1., 0., 0.], dtype=torch.float64)
        >>> from hypermc.manifolds import Lorentz, PoincareHalfspace
        >>> x = hm.mc([0.0, 1e-6], nc=2, dtype=torch.float64)  # d_{-1} = 6 ln 10 below the origin; K = -4 halves it
        >>> X = halfspace_to_lorentz(x, curvature=-4.0)
        >>> Lorentz(curvature=-4.0).check_point(X)
        (True, None)
        >>> round(float(Lorentz(curvature=-4.0).dist0(X)), 6), round(float(PoincareHalfspace(curvature=-4.0).dist0(x)), 6)
        (6.907755, 6.907755)
    """
    _check(x, "halfspace_to_lorentz")
    c = curvature_to_c(curvature, "halfspace_to_lorentz")
    t = x[..., -1:]
    r = common.norm(x, keepdim=True)
    sq = r * r
    out = torch.cat([(sq + 1) / (2 * t), x[..., :-1] / t, (r - 1) * (r + 1) / (2 * t)], dim=-1)
    return _scale(out, c, -0.5)


def lorentz_to_halfspace(x: torch.Tensor, *, curvature: float | torch.Tensor = -1.0) -> torch.Tensor:
    r"""Hyperboloid point ``(*, n + 1)`` -> halfspace point ``(*, n)`` (an isometry).

    .. math:: x = \frac{(\bar X', 1/\sqrt c)}{X_0 - X_n}

    with ``X_0 - X_n = (1/c + |X_bar'|^2) / (X_0 + X_n)`` where ``X_n > 0`` (no
    cancellation for points high up in the halfspace).

    Example:
        >>> lorentz_to_halfspace(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
        tensor([0., 1.], dtype=torch.float64)

        A point ``1e15`` high, where ``X_0 - X_n`` is the difference of two numbers ``~5e14``
        that differ by ``1e-15`` (formed with the constraint instead):

        >>> x = hm.mc([3.0, 1e15], nc=2, dtype=torch.float64)
        >>> y = lorentz_to_halfspace(halfspace_to_lorentz(x))
        >>> [f"{v:.12e}" for v in y.approx().tolist()]
        ['3.000000000000e+00', '1.000000000000e+15']
    """
    _check(x, "lorentz_to_halfspace", 2)
    c = curvature_to_c(curvature, "lorentz_to_halfspace")
    xu = _scale(x, c, 0.5)  # unit hyperboloid
    x0, mid, xn = xu[..., :1], xu[..., 1:-1], xu[..., -1:]
    up = common.lead(xn) > 0
    plus = x0 + xn
    safe_plus = torch.where(up, plus, torch.ones_like(plus))
    diff = torch.where(up, (1 + common.sqnorm(mid, keepdim=True)) / safe_plus, x0 - xn)
    return torch.cat([mid, torch.ones_like(diff)], dim=-1) / diff
