"""Poincaré upper halfspace model, as pure functions (Tensor or MCTensor).

Points are ``x = (x_1, ..., x_{n-1}, x_n)`` with height ``t = x_n > 0`` (last
coordinate); curvature ``K = -c < 0``; metric ``ds^2 = |dx|^2 / (c t^2)``. Tangent
vectors are Euclidean vectors ``u`` at ``x`` (every vector is tangent). The geodesics
(vertical lines and half circles orthogonal to the boundary) and hence ``expmap``,
``logmap``, ``transp`` do not depend on ``c``; distances and norms scale with
``1 / sqrt(c)``.

Why this model is the precise one in MC arithmetic: its coordinates are as large as a
point's Euclidean position, not ``e^r``, so heights from ``1e-200`` to ``1e200``
(float64) are ordinary floats; the only resolution limit is horizontal: a coordinate
``x_i`` is stored to ``u^nc |x_i|``, a hyperbolic length of ``u^nc |x_i| / t``.

Notation in the formulas: ``t = x_n``, ``s = y_n``, ``delta = y - x``, ``rho =
|delta|``, ``rho* = |x - y*|`` with ``y* = (y_bar, -s)`` the mirror image of ``y``
(``rho*^2 = rho^2 + 4 t s``; no cancellation).
"""

from __future__ import annotations

import torch

from ...mcf import portable
from ...mcf.eft import sqrt_rn
from ...mcf.tensor import MCTensor
from . import common

__all__ = [
    "dist",
    "expmap",
    "logmap",
    "transp",
    "retr",
    "inner",
    "norm",
    "egrad2rgrad",
    "projx",
]


def _split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x[..., :-1], x[..., -1:]


def _cat(bar: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.cat([bar, t], dim=-1)


def dist(x: torch.Tensor, y: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Geodesic distance.

    .. math:: d(x, y) = \frac{2}{\sqrt c}\,
              \operatorname{asinh}\frac{\lVert x - y\rVert}{2\sqrt{x_n}\sqrt{y_n}}

    (equal to ``acosh(1 + |x-y|^2 / (2 x_n y_n)) / sqrt(c)`` but without the
    cancellation of ``acosh(1 + small)`` for close points, and without overflow of
    ``x_n y_n``).

    Laws: ``d(x, x) = 0``, ``d(x, y) = d(y, x)``, triangle inequality.

    Accuracy: relative ``<= 64 u^nc`` (the transcendental bound) plus ``8 u^nc`` per
    arithmetic op, for the stored points, at any height in the normal range, e.g.
    ``x = (1, 1e-25)``, ``y = (1 + 1e-30, 1e-25)`` in float64 ``nc = 3`` (plain float64
    gives 0). Tested against mpmath.

    Example:
        >>> x, y = torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([0.0, 2.0], dtype=torch.float64)
        >>> round(float(dist(x, y)), 6), round(float(dist(x, y, c=4.0)), 6)  # ln 2, ln 2 / 2
        (0.693147, 0.346574)
        >>> x = hm.mc([1.0, 1e-25], nc=3, dtype=torch.float64)
        >>> y = x + hm.mc([1e-30, 0.0], nc=3, dtype=torch.float64)
        >>> f"{float(dist(x, y)):.9e}", float(dist(x.approx(), y.approx()))
        ('1.000000000e-05', 0.0)
    """
    s, k = common.scaled_sqnorm(x - y)
    t, ht = _even_scaled(x[..., -1])
    u, hu = _even_scaled(y[..., -1])
    a = common.ldexp(common.safe_sqrt(s / (4 * t * u)), k - ht - hu)
    d = 2 * torch.asinh(a)
    return common.scale_c(d, c=c, power=-0.5)


def _even_scaled(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(t 4^-h, h)`` with ``t 4^-h`` in ``[1/4, 1)`` (exact): ``sqrt(t) = sqrt(.) 2^h``."""
    h = torch.div(common.exponent(common.lead(t)) + 1, 2, rounding_mode="floor")
    return common.ldexp(t, -2 * h), h


def expmap(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""Exponential map (independent of the curvature).

    With ``tau = |u| / t`` (the hyperbolic length for ``c = 1``), ``w = u_n`` and
    ``beta = 1 - w / |u|`` (formed as ``|u_bar|^2 / (|u| (|u| + w))`` when ``w > 0``, so
    it keeps its relative accuracy for steps that go almost straight up):

    .. math::
        E = e^{-2\tau} + \frac{\beta\,(1 - e^{-2\tau})}{2},\quad
        y_n = \frac{t\,e^{-\tau}}{E},\quad
        \bar y = \bar x + \bar u\,\frac{1 - e^{-2\tau}}{2\tau\,E}.

    (The geodesic ``gamma(tau) = (x_bar + t a sinh(tau) / D, t / D)``, ``D = cosh(tau) -
    b sinh(tau)`` for the Euclidean unit direction ``(a, b)``, rewritten with
    ``e^{-2 tau}`` so that nothing overflows or cancels.) Finite for ``tau`` up to about
    350 in float64.

    Laws: ``expmap(x, 0) = x``, ``d(x, expmap(x, u)) = norm(x, u)``,
    ``expmap(x, logmap(x, y)) = y``.

    Example:
        >>> x = torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> expmap(x, torch.tensor([0.0, 1.0], dtype=torch.float64))  # straight up by 1: height e
        tensor([0.0000, 2.7183], dtype=torch.float64)
        >>> u = torch.tensor([3.0, -4.0], dtype=torch.float64)
        >>> round(float(dist(x, expmap(x, u))), 9), round(float(norm(x, u)), 9)
        (5.0, 5.0)
    """
    ub, w = _split(u)
    t = x[..., -1:]
    un = common.norm(u, keepdim=True)
    ubn = common.norm(ub, keepdim=True)
    up = common.lead(w) > 0
    den = torch.where(up, un + w, torch.ones_like(un))
    p = torch.where(up, ubn * (ubn / den), un - w)  # beta |u|, no cancellation
    tau = un / t
    g = common.expm1c(2 * tau)  # (1 - e^{-2 tau}) / (2 tau)
    q = portable.exp(-tau)
    e = q * q + (p / t) * g
    return _cat(x[..., :-1] + ub * (g / e), t * (q / e))


def _scaled(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x, y`` times a power of two that brings ``x_n`` to ``[1/2, 1)`` (exact)."""
    s = common.pow2_like(x[..., -1:])
    return x * s, y * s, s


def _sqrt(a: torch.Tensor) -> torch.Tensor:
    """``sqrt(a)``, correctly rounded for a plain tensor (:func:`~hypermc.mcf.eft.sqrt_rn`:
    torch's CPU ``sqrt`` is not, compiled code's is, so the two would differ, e.g. for
    the origin's height ``1/2``); MC values take their own square root."""
    return torch.sqrt(a) if isinstance(a, MCTensor) else sqrt_rn(a)


def _log_parts(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(vec, coef): ``logmap = coef * vec``, for x, y scaled into range."""
    t, s = x[..., -1:], y[..., -1:]
    delta = y - x
    db = delta[..., :-1]
    rho = common.norm(delta, keepdim=True)
    rho_star = common.norm(torch.cat([db, t + s], dim=-1), keepdim=True)
    st, ss = _sqrt(t), _sqrt(s)
    a = rho / (2 * st * ss)
    vec = torch.cat([2 * t * db, common.sqnorm(db, keepdim=True) + (s - t) * (s + t)], dim=-1)
    coef = common.asinhc(a) / (st * ss) * (t / rho_star)
    return vec, coef


def logmap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Logarithmic map (independent of the curvature): the tangent vector at ``x`` of
    the geodesic to ``y``, with ``norm(x, logmap(x, y)) = d(x, y)``.

    .. math::
        \log_x y = \frac{\tau}{\rho}\,\frac{t}{\rho^*}
        \left(2t\,(\bar y - \bar x),\; \lVert\bar y - \bar x\rVert^2 + (s - t)(s + t)\right),
        \qquad \tau = 2\operatorname{asinh}\frac{\rho}{2\sqrt{ts}}

    (``tau / rho`` is formed as ``asinh(a)/a / sqrt(t s)``, finite at ``y = x``; the
    points are first scaled by a power of two so that ``t`` is near 1, exact).

    Laws: ``logmap(x, x) = 0``, ``expmap(x, logmap(x, y)) = y``,
    ``norm(x, logmap(x, y)) = dist(x, y)``.

    Example:
        >>> x = torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> logmap(x, torch.tensor([0.0, 2.0], dtype=torch.float64))  # straight up, length ln 2
        tensor([0.0000, 0.6931], dtype=torch.float64)
        >>> y = torch.tensor([1e10, 1e-30], dtype=torch.float64)  # far away: d = 115.13
        >>> u = logmap(x, y)
        >>> abs(float(norm(x, u) - dist(x, y))) < 1e-9, bool(torch.allclose(expmap(x, u), y, rtol=1e-9, atol=0))
        (True, True)
    """
    xs, ys, s = _scaled(x, y)
    vec, coef = _log_parts(xs, ys)
    return coef * vec / s


def transp(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Parallel transport of ``v`` from ``x`` to ``y`` along the geodesic.

    .. math:: P_{x\to y} v = \frac{y_n}{x_n} R v

    with ``R`` the rotation taking the Euclidean unit tangent of the geodesic at ``x``
    to the one at ``y`` (see :func:`common.conformal_transp`).

    Laws: ``inner(y, P u, P v) = inner(x, u, v)``; ``P_{x->y} logmap(x, y) =
    -logmap(y, x)``; ``P_{x->x} = id``.

    Example:
        >>> x, y = torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([0.0, 2.0], dtype=torch.float64)
        >>> transp(x, y, torch.tensor([1.0, 0.0], dtype=torch.float64))  # up the vertical geodesic: scaled by y_n / x_n
        tensor([2., 0.], dtype=torch.float64)
        >>> y = torch.tensor([3.0, 0.5], dtype=torch.float64)
        >>> bool(torch.allclose(transp(x, y, logmap(x, y)), -logmap(y, x)))
        True
    """
    xs, ys, _ = _scaled(x, y)
    t, s = xs[..., -1:], ys[..., -1:]
    delta = ys - xs
    db = delta[..., :-1]
    rho = common.norm(delta, keepdim=True)
    rho_star = common.norm(torch.cat([db, t + s], dim=-1), keepdim=True)
    inv = common.safe_reciprocal(rho)
    vec = torch.cat([2 * t * db, common.sqnorm(db, keepdim=True) + (s - t) * (s + t)], dim=-1)
    # |vec| = rho rho*: e_x = vec / (rho rho*), d = delta / rho
    return common.conformal_transp(delta * inv, vec * (inv / rho_star), v, s / t)


def retr(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""First-order retraction that never leaves the halfspace:
    ``(x_bar + u_bar, t exp(u_n / t))``.

    Example:
        >>> retr(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([0.5, -1.0], dtype=torch.float64))  # height e^-1
        tensor([0.5000, 0.3679], dtype=torch.float64)
    """
    t = x[..., -1:]
    return _cat(x[..., :-1] + u[..., :-1], t * portable.exp(u[..., -1:] / t))


def inner(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, *, c: float = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""Riemannian inner product ``<u, v>_x = <u, v> / (c x_n^2)``.

    Example:
        >>> x, u = torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> inner(x, u, u), inner(x, u, u, c=4.0)
        (tensor(4., dtype=torch.float64), tensor(1., dtype=torch.float64))
        >>> x, u = torch.tensor([0.0, 1e-200], dtype=torch.float64), torch.tensor([3e-200, 4e-200], dtype=torch.float64)
        >>> inner(x, u, u)  # <u, u> and x_n^2 both underflow; their quotient does not
        tensor(25., dtype=torch.float64)
    """
    t = x[..., -1:]  # u / x_n and v / x_n first: x_n^2 and <u, v> underflow together near the boundary (0 / 0)
    out = common.dot(u / t, v / t, keepdim=keepdim)
    return common.scale_c(out, c=c, power=-1.0)


def norm(x: torch.Tensor, u: torch.Tensor, *, c: float = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""Riemannian norm ``|u|_x = |u| / (sqrt(c) x_n)``.

    Example:
        >>> norm(torch.tensor([[0.0, 0.5]], dtype=torch.float64), torch.tensor([[3.0, 4.0]], dtype=torch.float64), keepdim=True)
        tensor([[10.]], dtype=torch.float64)
    """
    t = x[..., -1:] if keepdim else x[..., -1]
    out = common.norm(u, keepdim=keepdim) / t
    return common.scale_c(out, c=c, power=-0.5)


def egrad2rgrad(x: torch.Tensor, g: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Riemannian gradient ``c x_n^2 g`` of a Euclidean gradient ``g``.

    Example:
        >>> egrad2rgrad(torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64))
        tensor([0.2500, 0.2500], dtype=torch.float64)
    """
    t = x[..., -1:]
    out = g * (t * t)
    return common.scale_c(out, c=c, power=1.0)


def projx(x: torch.Tensor) -> torch.Tensor:
    r"""Heights below the smallest positive normal number of the dtype are raised to it;
    everything else is unchanged (idempotent). NaN stays NaN.

    Example:
        >>> projx(torch.tensor([[0.3, 0.0], [0.3, 2.0]], dtype=torch.float64))[:, -1].tolist()
        [2.2250738585072014e-308, 2.0]
    """
    tiny = float(torch.finfo(x.dtype).tiny)
    return _cat(x[..., :-1], torch.clamp_min(x[..., -1:], tiny))
