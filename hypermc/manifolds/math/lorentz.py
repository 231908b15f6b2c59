"""Lorentz (hyperboloid) model, as pure functions (Tensor or MCTensor).

Points ``x = (x_0, x_bar)`` (time coordinate first) with
``<x, x>_L = -x_0^2 + |x_bar|^2 = -1/c`` and ``x_0 > 0``; curvature ``K = -c < 0``.
Tangent vectors at ``x`` satisfy ``<x, u>_L = 0``.

Precision: coordinates grow like ``e^r / (2 sqrt c)`` at hyperbolic radius ``r``, and the
constraint holds for the stored coordinates only to ``~ u^nc x_0^2``; quantities that
cancel by a factor ``x_0^2`` (the Minkowski square of the difference of two close far
points) are therefore resolved to ``~ u^nc e^(2r)``: the MC range of this model is about
half of the ball's at the same ``nc``. Formulas avoid ``-<x, y>_L - 1/c`` (which cancels
for close points at any radius): distances use ``|x - y|_L`` and the logarithm
``y - x - (c |y-x|_L^2 / 2) x``. ``expmap`` and ``projx`` recompute ``x_0`` from the
spatial part, so points stay on the hyperboloid to rounding.

``c`` is a Python float (its powers formed at MC precision by
:func:`.common.c_power`) or a 0-d tensor (a learnable curvature: its powers are torch
operations with gradients, :func:`.common.tensor_c_power`).
"""

from __future__ import annotations

import functools

import mpmath
import torch

from ...mcf import portable
from ...mcf.tensor import MCTensor
from . import common

__all__ = [
    "minkowski",
    "sqdist_l",
    "dist",
    "dist0",
    "expmap",
    "expmap0",
    "logmap",
    "logmap0",
    "transp",
    "inner",
    "inner0",
    "norm",
    "proju",
    "egrad2rgrad",
    "projx",
    "origin_time",
]


def _mul_c(z: torch.Tensor, c: float | torch.Tensor, power: float = 1.0) -> torch.Tensor:
    """``z * c**power`` with the constant at MC precision (nothing for c = 1)."""
    return common.scale_c(z, c=c, power=power)


def minkowski(u: torch.Tensor, v: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    r"""Minkowski product ``<u, v>_L = -u_0 v_0 + <u_bar, v_bar>``.

    Example:
        >>> x = torch.tensor([3.0, 2.0, 2.0])  # on the hyperboloid -x_0^2 + |x_bar|^2 = -1
        >>> minkowski(x, x), minkowski(x, x, keepdim=True)
        (tensor(-1.), tensor([-1.]))
    """
    out = common.dot(u[..., 1:], v[..., 1:], keepdim=True) - u[..., :1] * v[..., :1]
    return out if keepdim else out[..., 0]


def sqdist_l(delta: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    r"""``|delta|_L = sqrt(<delta, delta>_L)`` of a space-like difference of points
    (scaled by a power of two first: no overflow or underflow), 0 if it rounds
    negative.

    Example:
        >>> sqdist_l(torch.tensor([1.0, 2.0, 2.0]))  # sqrt(-1 + 4 + 4) = sqrt 7
        tensor(2.6458)
        >>> sqdist_l(torch.tensor([0.0, 3e200, 4e200], dtype=torch.float64))  # squares overflow
        tensor(5.0000e+200, dtype=torch.float64)
        >>> sqdist_l(torch.tensor([1.0, 0.0, 0.0]))  # time-like (<delta, delta>_L < 0): 0
        tensor(0.)
    """
    out = _sqdist_l_unscaled(delta) if _plain_eager(delta) else None
    if out is None:
        out = _sqdist_l_scaled(delta)
    return out if keepdim else out[..., 0]


def _plain_eager(t: torch.Tensor) -> bool:
    return not isinstance(t, MCTensor) and not torch.compiler.is_compiling()


def _sqdist_l_scaled(delta: torch.Tensor) -> torch.Tensor:
    """:func:`sqdist_l` (kept dim) with each row scaled by the power of two of its largest
    coordinate: no square over- or underflows."""
    k = common.exponent(common.lead(delta).abs().amax(dim=-1, keepdim=True))
    d = common.ldexp(delta, -k)
    q = common.sqnorm(d[..., 1:], keepdim=True) - d[..., :1] * d[..., :1]
    return common.ldexp(common.clamped_sqrt(q), k)


def _sqdist_l_unscaled(delta: torch.Tensor) -> torch.Tensor | None:
    """:func:`sqdist_l` (kept dim) of a plain tensor without the scaling, or None where a
    row needs it. Scaling by a power of two changes no rounding unless a square over- or
    underflows, so both give the same bits where the sum of the squares ``S`` of every
    row lies in ``[sqrt(tiny), sqrt(max)]``: then no square overflows, and a square that
    underflows is below ``2^-p`` of ``S`` by hundreds of binades (float64: ``S >= 2^-511``).
    The check costs no pass over the coordinates; outside it (equal points, tiny or huge
    differences) the scaled form runs. Half the time of the scaled form."""
    s = common.sqnorm(delta[..., 1:], keepdim=True)
    t = delta[..., :1] * delta[..., :1]
    fmt = torch.finfo(delta.dtype)
    total = (s + t).detach()
    if not bool(((total >= fmt.tiny**0.5) & (total <= fmt.max**0.5)).all()):
        return None
    return common.clamped_sqrt(s - t)


def dist(x: torch.Tensor, y: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Geodesic distance.

    .. math:: d(x, y) = \frac{1}{\sqrt c}\operatorname{acosh}(-c\langle x, y\rangle_L)
              = \frac{2}{\sqrt c}\operatorname{asinh}\frac{\sqrt c\,\lVert x - y\rVert_L}{2}

    The second form (used) does not cancel for close points. Laws: ``d(x, x) = 0``,
    symmetry, triangle inequality. Accuracy: relative ``~ 64 u^nc`` plus
    ``~ u^nc x_0 y_0 / |x - y|_L^2`` from the constraint; e.g. float64 ``nc = 2`` at
    radius 25 within ``1e-6`` of mpmath (tested).

    Example:
        >>> o = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> x = expmap0(torch.tensor([0.0, 1.5], dtype=torch.float64))
        >>> round(float(dist(o, x)), 9), round(float(dist(x, x)), 9)
        (1.5, 0.0)
    """
    return common.row_blocked(functools.partial(_dist, c=c), x, y)


def _dist(x: torch.Tensor, y: torch.Tensor, *, c: float | torch.Tensor) -> torch.Tensor:
    """:func:`dist` in one call (:func:`dist` runs it on blocks of rows of large plain tensors)."""
    n = _mul_c(sqdist_l(x - y), c, 0.5)
    return _mul_c(2 * torch.asinh(n / 2), c, -0.5)


def dist0(x: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Distance from the origin ``asinh(sqrt(c) |x_bar|) / sqrt(c)`` (spatial part only).

    Example:
        >>> dist0(expmap0(torch.tensor([0.0, 2.5], dtype=torch.float64)))
        tensor(2.5000, dtype=torch.float64)
        >>> x = expmap0(hm.mc([0.0, 60.0], nc=2, dtype=torch.float64), c=4.0)  # coordinates ~ e^120
        >>> round(float(dist0(x, c=4.0)), 9)
        60.0
    """
    return _mul_c(torch.asinh(_mul_c(common.norm(x[..., 1:]), c, 0.5)), c, -0.5)


def projx(x: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Recompute the time coordinate: ``(sqrt(1/c + |x_bar|^2), x_bar)``.

    Idempotent up to rounding; maps every finite ``x`` onto the upper sheet.

    Example:
        >>> projx(torch.tensor([-7.0, 3.0, 4.0], dtype=torch.float64))  # sqrt(26)
        tensor([5.0990, 3.0000, 4.0000], dtype=torch.float64)
        >>> projx(torch.tensor([0.0, 0.0], dtype=torch.float64), c=4.0)  # the origin (1/sqrt c, 0)
        tensor([0.5000, 0.0000], dtype=torch.float64)
    """
    xb = x[..., 1:]
    s = common.sqnorm(xb, keepdim=True)
    one_c = _mul_c(torch.ones_like(s), c, -1.0)
    return torch.cat([portable.sqrt(one_c + s), xb], dim=-1)


def origin_time(*, c: float = 1.0) -> mpmath.mpf:
    """``1 / sqrt(c)``, the time coordinate of the origin (an mpmath number at mpmath's
    working precision).

    Example:
        >>> origin_time(c=4.0), origin_time(c=1.0)
        (mpf('0.5'), mpf('1.0'))
    """
    return 1 / mpmath.sqrt(c)


def proju(x: torch.Tensor, u: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Minkowski-orthogonal projection onto the tangent space:
    ``u + c <x, u>_L x``. Idempotent; ``<x, proju(x, u)>_L = 0``.

    Example:
        >>> o = torch.tensor([1.0, 0.0, 0.0])
        >>> proju(o, torch.tensor([1.0, 2.0, 3.0]))  # at the origin: drop the time part
        tensor([0., 2., 3.])
        >>> x = torch.tensor([3.0, 2.0, 2.0])
        >>> minkowski(x, proju(x, torch.tensor([1.0, 2.0, 3.0])))
        tensor(0.)
    """
    return u + _mul_c(minkowski(x, u, keepdim=True), c) * x


def egrad2rgrad(x: torch.Tensor, g: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Riemannian gradient: ``proju(x, J g)``, ``J = diag(-1, 1, ..., 1)``.

    Example:
        >>> egrad2rgrad(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 2.0]))
        tensor([0., 2.])
    """
    jg = torch.cat([-g[..., :1], g[..., 1:]], dim=-1)
    return proju(x, jg, c=c)


def inner0(v: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""``<o, v>_L = -v_0 / sqrt(c)`` with the origin ``o = (1/sqrt c, 0, ..., 0)``.

    Example:
        >>> inner0(torch.tensor([3.0, 1.0, 2.0]), c=0.25)
        tensor(-6.)
    """
    return -_mul_c(v[..., 0], c, -0.5)


def inner(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, *, c: float | torch.Tensor = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""``<u, v>_x = <u, v>_L`` (``x`` only fixes the broadcast shape).

    Example:
        >>> o, u = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 3.0, 4.0])
        >>> inner(o, u, u), inner(o, u, torch.tensor([0.0, 1.0, 0.0]))
        (tensor(25.), tensor(3.))
    """
    return minkowski(u, v, keepdim=keepdim)


def norm(x: torch.Tensor, u: torch.Tensor, *, c: float | torch.Tensor = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""``|u|_x = sqrt(<u, u>_L)`` (0 where it rounds negative).

    Example:
        >>> norm(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 3.0, 4.0]))
        tensor(5.)
    """
    return common.clamped_sqrt(minkowski(u, u, keepdim=keepdim))


def expmap(x: torch.Tensor, u: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Exponential map.

    .. math:: \exp_x u = \cosh(\theta)\,x + \frac{\sinh\theta}{\theta}\,u,
              \qquad \theta = \sqrt c\,\lVert u\rVert_L

    formed as ``x_bar + 2 sinh(theta/2)^2 x_bar + sinh(theta)/theta u_bar`` (small steps
    far from the origin keep their precision), then the time coordinate is recomputed
    from the spatial part (:func:`projx`), so the result is on the hyperboloid.

    Laws: ``expmap(x, 0) = x``, ``d(x, expmap(x, u)) = norm(x, u)``,
    ``expmap(x, logmap(x, y)) = y``.

    Example:
        >>> x = expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
        >>> u = proju(x, torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64))
        >>> y = expmap(x, u)
        >>> round(float(dist(x, y)), 9), round(float(norm(x, u)), 9), round(float(minkowski(y, y)), 9)
        (2.0, 2.0, -1.0)
    """
    theta = _mul_c(norm(x, u, keepdim=True), c, 0.5)
    half = common.sinhc(theta / 2)
    cm1 = theta * theta * half * half / 2  # cosh(theta) - 1
    yb = x[..., 1:] + cm1 * x[..., 1:] + common.sinhc(theta) * u[..., 1:]
    return projx(torch.cat([yb[..., :1], yb], dim=-1), c=c)  # time slot: recomputed by projx


def expmap0(u: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""``expmap(o, u)`` at the origin ``o = (1/sqrt c, 0)``: spatial part
    ``sinh(theta)/theta u_bar`` with ``theta = sqrt(c) |u_bar|`` (``u_0`` is ignored: it
    is 0 for tangent vectors at ``o``).

    Example:
        >>> expmap0(torch.tensor([0.0, 1.0], dtype=torch.float64))  # (cosh 1, sinh 1)
        tensor([1.5431, 1.1752], dtype=torch.float64)
    """
    theta = _mul_c(common.norm(u[..., 1:], keepdim=True), c, 0.5)
    yb = common.sinhc(theta) * u[..., 1:]
    return projx(torch.cat([u[..., :1], yb], dim=-1), c=c)


def _log_parts(x: torch.Tensor, y: torch.Tensor, c: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    delta = y - x
    n = sqdist_l(delta, keepdim=True)  # |y - x|_L
    nc_ = _mul_c(n, c, 0.5)
    theta = 2 * torch.asinh(nc_ / 2)  # sqrt(c) d
    v = delta - (nc_ * nc_ / 2) * x  # y + c<x,y>_L x, |v|_L = sinh(theta) / sqrt(c)
    return delta, n, theta, v


def logmap(x: torch.Tensor, y: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Logarithmic map.

    .. math:: \log_x y = \frac{\theta}{\sinh\theta}\left(y - x
              - \frac{c\,\lVert y - x\rVert_L^2}{2}\,x\right),
              \qquad \theta = \sqrt c\, d(x, y)

    (``y - x - (c|y-x|_L^2/2) x`` equals ``y + c <x, y>_L x`` without its cancellation).
    Laws: ``logmap(x, x) = 0``, ``norm(x, logmap(x, y)) = d(x, y)``,
    ``expmap(x, logmap(x, y)) = y``.

    Example:
        >>> x = expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
        >>> y = expmap0(torch.tensor([0.0, -0.5, 2.0], dtype=torch.float64))
        >>> u = logmap(x, y)
        >>> abs(float(norm(x, u) - dist(x, y))) < 1e-12, bool(torch.allclose(expmap(x, u), y))
        (True, True)
        >>> logmap(x, x)
        tensor([0., 0., 0.], dtype=torch.float64)
    """
    _, _, theta, v = _log_parts(x, y, c)
    return common.x_over_sinh(theta) * v


def logmap0(y: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""``logmap(o, y) = (0, asinh(sqrt(c)|y_bar|) / (sqrt(c)|y_bar|) y_bar)``.

    Example:
        >>> logmap0(torch.tensor([1.5430806348, 1.1752011936], dtype=torch.float64))  # (cosh 1, sinh 1)
        tensor([0.0000, 1.0000], dtype=torch.float64)
        >>> u = hm.mc([0.0, 40.0], nc=2, dtype=torch.float64)
        >>> round(float(logmap0(expmap0(u))[1]), 9)  # a point at radius 40 round-trips
        40.0
    """
    yb = y[..., 1:]
    a = _mul_c(common.norm(yb, keepdim=True), c, 0.5)
    return torch.cat([torch.zeros_like(y[..., :1]), common.asinhc(a) * yb], dim=-1)


def transp(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, *, c: float | torch.Tensor = 1.0) -> torch.Tensor:
    r"""Parallel transport along the geodesic.

    .. math:: P_{x\to y} v = v + \frac{\langle y - x, v\rangle_L}
              {2/c + \lVert y - x\rVert_L^2 / 2}\,(x + y)

    (``= v + <y, v>_L / (1/c - <x, y>_L) (x + y)`` for ``v`` tangent at ``x``, with the
    denominator formed without cancellation). Laws: ``inner(y, P u, P v) =
    inner(x, u, v)``, ``P_{x->y} logmap(x, y) = -logmap(y, x)``.

    Example:
        >>> x = expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
        >>> y = expmap0(torch.tensor([0.0, -0.5, 2.0], dtype=torch.float64))
        >>> v = proju(x, torch.tensor([0.0, 0.3, 0.4], dtype=torch.float64))
        >>> pv = transp(x, y, v)
        >>> abs(float(inner(y, pv, pv) - inner(x, v, v))) < 1e-12, abs(float(minkowski(y, pv))) < 1e-12
        (True, True)
        >>> bool(torch.allclose(transp(x, y, logmap(x, y)), -logmap(y, x)))
        True
    """
    delta = y - x
    n = sqdist_l(delta, keepdim=True)
    two_c = _mul_c(2 * torch.ones_like(n), c, -1.0)
    den = two_c + n * n / 2
    return v + (minkowski(delta, v, keepdim=True) / den) * (x + y)
