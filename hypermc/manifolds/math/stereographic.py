r"""The kappa-stereographic model, as pure functions (Tensor or MCTensor).

Points of ``R^n`` (with ``|x| < 1/sqrt(-k)`` when ``k < 0``), sectional curvature ``k``
of any sign: ``k < 0`` is the Poincaré ball of curvature ``K = k``, ``k > 0`` the
stereographic projection of the sphere of radius ``1/sqrt(k)``, ``k = 0`` Euclidean
space with the metric ``4 |dx|^2``. Conformal factor ``lambda_x = 2 / D_x`` with
``D_x = 1 + k |x|^2`` (the ball's *deficit* for ``k < 0``).

The curvature ``k`` is a Python float or a 0-d Tensor / MCTensor (a learnable
parameter: every function is differentiable in ``k``, through ``k = 0``). Rules that
keep the precision of :mod:`.ball` near the boundary of the ball:

* ``D_x`` is formed from the components at ``nc + 1`` (:func:`deficit`); for a tensor
  ``k`` the value at ``k_0 = float(k)`` is formed that way and ``(k - k_0)|x|^2`` (zero
  for a plain ``k``, its tail for an MC one) adds the dependence on ``k``;
* the curvature enters only through ``s = k z^2`` in the even functions
  ``tan_k(z)/z``, ``artan_k(z)/z``, ``arsin_k(z)/z``, ``cos_k(z)`` (:func:`tan_k`, ...),
  evaluated by a short series for small ``|s|`` and by ``tan``/``tanh``, ... of
  ``sqrt(|s|)`` otherwise — smooth in ``k`` with finite gradients at ``k = 0``;
* for ``k <= 0`` distances and logarithms use ``arsin_k`` of ``|x - y| / sqrt(D_x D_y)``
  (no ``atanh`` of a number near 1); for ``k > 0`` ``artan_k`` of ``|(-x) ⊕ y|``, finite
  up to the antipode.

Functions whose form depends on the sign of ``k`` read it once (a host sync for a
tensor ``k``, and under ``torch.compile`` a graph break), unless the caller passes
``sign=`` (a model whose curvature keeps its sign, as the learnable ball's); both forms
agree at ``k = 0``. MCTensors have no ``atan`` op: for
``k > 0`` it is computed by Newton steps on ``tan`` (:func:`atan`).

Reference: Bachmann, Bécigneul, Ganea, "Constant Curvature Graph Convolutional
Networks" (2020); Ungar, "Analytic Hyperbolic Geometry" (2005) for the gyrovector laws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import torch

from ...mcf.tensor import MCTensor, from_mpmath, mc
from . import ball as B
from . import common

__all__ = [
    "Curvature",
    "sign_of",
    "deficit",
    "atan",
    "tan_k",
    "artan_k",
    "arsin_k",
    "lambda_x",
    "inner",
    "norm",
    "egrad2rgrad",
    "projx",
    "mobius_add",
    "mobius_sub",
    "mobius_coadd",
    "mobius_cosub",
    "mobius_scalar_mul",
    "mobius_pointwise_mul",
    "mobius_matvec",
    "gyration",
    "dist",
    "dist0",
    "expmap",
    "expmap0",
    "logmap",
    "logmap0",
    "transp",
    "transp0",
    "transp0back",
    "geodesic",
    "dist2plane",
    "weighted_midpoint",
    "antipode",
    "mobius_fn_apply",
    "mobius_fn_apply_chain",
]

#: The curvature: a Python float or a 0-d Tensor / MCTensor.
Curvature = float | torch.Tensor

#: Taylor coefficients in ``s = k z^2`` (of s^0 ... s^4) of the even helpers.
#: Exact (``common._horner`` rounds them to the operand's precision).
_SERIES: dict[str, tuple[Fraction, ...]] = {
    name: tuple(Fraction(c) for c in coeffs)
    for name, coeffs in {
        "tan": ("1", "1/3", "2/15", "17/315", "62/2835"),
        "artan": ("1", "-1/3", "1/5", "-1/7", "1/9"),
        "arsin": ("1", "1/6", "3/40", "5/112", "35/1152"),
        "cos": ("1", "-1/2", "1/24", "-1/720", "1/40320"),
        "sin": ("1", "-1/6", "1/120", "-1/5040", "1/362880"),
    }.items()
}
#: Where the helper's argument stays harmless in the branch ``torch.where`` does not select.
_HARMLESS = 0.5


def sign_of(k: Curvature) -> int:
    """-1, 0 or 1: the sign of ``k`` (a host sync for a tensor).

    Example:
        >>> sign_of(-1.0), sign_of(torch.tensor(0.0)), sign_of(hm.mc(2.0, nc=2))
        (-1, 0, 1)
    """
    v = float(common.lead(k)) if isinstance(k, torch.Tensor) else float(k)
    return (v > 0) - (v < 0)


def _sign(k: Curvature, sign: int | None) -> int:
    """``sign`` where the caller knows the sign of ``k`` (a model whose curvature cannot
    change sign, e.g. the learnable ball's ``k = -softplus(.)``), else :func:`sign_of`.
    Passing it saves the host sync of a tensor ``k``; under ``torch.compile`` it saves a
    graph break, as the formulas need the sign to choose their branch. A wrong ``sign``
    gives the formulas of the other sign: the caller vouches for it."""
    if sign is None:
        return sign_of(k)
    if sign not in (-1, 0, 1):
        raise ValueError(f"stereographic: sign must be -1, 0, 1 or None (read from k); got {sign!r}")
    return sign


def _pi(like: torch.Tensor) -> float | torch.Tensor:
    """pi as an operand for ``like`` (MC-precise for an MCTensor)."""
    if isinstance(like, MCTensor):
        import mpmath

        with mpmath.workprec(64 * like.nc + 64):
            return from_mpmath([mpmath.pi], nc=like.nc, dtype=like.dtype, device=like.device)[0]
    return math.pi


def atan(z: torch.Tensor) -> torch.Tensor:
    """``atan(z)``; for an MCTensor by Newton steps ``w <- w - (sin w - z cos w) cos w``
    from the plain ``atan`` of the leading component (one step per doubling of the
    precision, plus one so that the gradient ``cos^2 w`` is MC-precise too).

    Example:
        >>> z = hm.mc([1.0, 3.0], nc=2, dtype=torch.float64)
        >>> w = atan(z)
        >>> float(4 * w[0] - _pi(w)), abs(float(torch.tan(w[1]) - 3)) < 1e-30
        (0.0, True)
    """
    if not isinstance(z, MCTensor):
        return torch.atan(z)
    w = mc(torch.atan(common.lead(z)), nc=z.nc)
    for _ in range(max(1, math.ceil(math.log2(z.nc))) + 1):
        cw = torch.cos(w)
        w = w - (torch.sin(w) - z * cw) * cw
    return w


def _asin(z: torch.Tensor) -> torch.Tensor:
    """``asin(z)`` for ``0 <= z < 1`` (MC through :func:`atan`)."""
    if not isinstance(z, MCTensor):
        return torch.asin(z)
    return atan(z / torch.sqrt((1 - z) * (1 + z)))


def _atanh(z: torch.Tensor) -> torch.Tensor:
    return torch.atanh(z)


def _even(name: str, neg: Callable[[torch.Tensor], torch.Tensor], pos: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    coeffs = common.series_pieces(_SERIES[name])

    def helper(s: torch.Tensor) -> torch.Tensor:
        lead = common.lead(s)
        small = lead.abs() < common.unit_roundoff(s) ** 0.2  # |s|^5 below u^nc
        is_neg = (lead < 0) & ~small
        is_pos = (lead > 0) & ~small
        series = common._horner(torch.where(small, s, torch.zeros_like(s)), coeffs)
        out = series
        tracing = torch.compiler.is_compiling()  # no data-dependent branch in a traced graph
        if tracing or bool(is_neg.any()):
            w = torch.sqrt(torch.where(is_neg, -s, torch.full_like(s, _HARMLESS)))
            out = torch.where(is_neg, neg(w), out)
        if tracing or bool(is_pos.any()):
            w = torch.sqrt(torch.where(is_pos, s, torch.full_like(s, _HARMLESS)))
            out = torch.where(is_pos, pos(w), out)
        return out

    helper.__name__ = f"{name}_ratio"
    return helper


#: ``tan_k(z) / z`` as a function of ``s = k z^2``.
tan_ratio = _even("tan", lambda w: torch.tanh(w) / w, lambda w: torch.tan(w) / w)
#: ``artan_k(z) / z`` as a function of ``s = k z^2`` (``s < 1`` for ``s > 0``).
artan_ratio = _even("artan", lambda w: _atanh(w) / w, lambda w: atan(w) / w)
#: ``arsin_k(z) / z`` as a function of ``s = k z^2`` (``s <= 1`` for ``s > 0``).
arsin_ratio = _even("arsin", lambda w: torch.asinh(w) / w, lambda w: _asin(w) / w)
#: ``cos_k(z)`` (``cosh`` / ``cos`` of ``sqrt(|k|) z``) as a function of ``s = k z^2``.
cos_ratio = _even("cos", torch.cosh, torch.cos)
#: ``sin_k(z) / z`` as a function of ``s = k z^2``.
sin_ratio = _even("sin", lambda w: torch.sinh(w) / w, lambda w: torch.sin(w) / w)


def tan_k(z: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``tan_k(z) = tan(sqrt(k) z) / sqrt(k)`` (``tanh`` for ``k < 0``, ``z`` for ``k = 0``).

    Example:
        >>> z = torch.tensor([0.5], dtype=torch.float64)
        >>> [round(float(tan_k(z, k)), 9) for k in (-1.0, 0.0, 1.0)]
        [0.462117157, 0.5, 0.54630249]
    """
    return z * tan_ratio(k * z * z)


def artan_k(z: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``artan_k(z) = atan(sqrt(k) z) / sqrt(k)`` (``atanh`` for ``k < 0``).

    Example:
        >>> z = torch.tensor([0.5], dtype=torch.float64)
        >>> [round(float(artan_k(z, k)), 9) for k in (-1.0, 0.0, 1.0)]
        [0.549306144, 0.5, 0.463647609]
    """
    return z * artan_ratio(k * z * z)


def arsin_k(z: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``arsin_k(z) = asin(sqrt(k) z) / sqrt(k)`` (``asinh`` for ``k < 0``).

    Example:
        >>> z = torch.tensor([0.5], dtype=torch.float64)
        >>> [round(float(arsin_k(z, k)), 9) for k in (-1.0, 0.0, 1.0)]
        [0.481211825, 0.5, 0.523598776]
    """
    return z * arsin_ratio(k * z * z)


def deficit(x: torch.Tensor, k: Curvature, *, keepdim: bool = True) -> torch.Tensor:
    r"""``D_x = 1 + k |x|^2`` (the ball's deficit for ``k < 0``), formed at ``nc + 1``
    components (:func:`common.deficit`); differentiable in ``x`` and in a tensor ``k``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> deficit(x, -1.0), deficit(x, torch.tensor(2.0, dtype=torch.float64), keepdim=False)
        (tensor([0.7500], dtype=torch.float64), tensor(1.5000, dtype=torch.float64))
    """
    if not isinstance(k, torch.Tensor):
        return common.deficit(x, c=-float(k), keepdim=keepdim)
    # the leading component as a float in eager mode; traced, a 0-d tensor read when the
    # graph runs (a float would break the graph and reach MC ops as a symbol)
    k0: float | torch.Tensor = common.lead(k) if torch.compiler.is_compiling() else float(common.lead(k))
    d = common.deficit(x, c=-k0, keepdim=keepdim)
    if not k.requires_grad and not isinstance(k, MCTensor):
        return d
    return d + (k - k0) * common.sqnorm(x, keepdim=keepdim)


def lambda_x(x: torch.Tensor, k: Curvature, *, keepdim: bool = False) -> torch.Tensor:
    r"""Conformal factor ``lambda_x = 2 / (1 + k |x|^2)``.

    Example:
        >>> lambda_x(torch.tensor([0.5, 0.0], dtype=torch.float64), -1.0)  # 2 / 0.75
        tensor(2.6667, dtype=torch.float64)
    """
    return 2 / deficit(x, k, keepdim=keepdim)


def inner(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, k: Curvature, *, keepdim: bool = False) -> torch.Tensor:
    r"""``<u, v>_x = lambda_x^2 <u, v>``.

    Example:
        >>> inner(torch.zeros(2), torch.tensor([1.0, 2.0]), torch.tensor([3.0, 0.0]), 1.0)
        tensor(12.)
    """
    d = deficit(x, k, keepdim=keepdim)
    return 4 * common.dot(u, v, keepdim=keepdim) / (d * d)


def norm(x: torch.Tensor, u: torch.Tensor, k: Curvature, *, keepdim: bool = False) -> torch.Tensor:
    r"""``|u|_x = lambda_x |u|``.

    Example:
        >>> norm(torch.tensor([0.5, 0.0]), torch.tensor([0.0, 3.0]), -1.0)
        tensor(8.)
    """
    return 2 * common.norm(u, keepdim=keepdim) / deficit(x, k, keepdim=keepdim)


def egrad2rgrad(x: torch.Tensor, g: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Riemannian gradient ``g / lambda_x^2``.

    Example:
        >>> egrad2rgrad(torch.zeros(2), torch.tensor([4.0, 8.0]), 1.0)
        tensor([1., 2.])
    """
    d = deficit(x, k)
    return g * (d * d / 4)


def projx(x: torch.Tensor, k: Curvature, *, margin_bits: int = 8, sign: int | None = None) -> torch.Tensor:
    r"""For ``k < 0`` the ball's :func:`.ball.projx` (points beyond the MC range pulled
    back to its edge; of a tensor ``k`` the leading component is taken, without a gradient,
    and under ``torch.compile`` read when the graph runs); the identity otherwise.

    Example:
        >>> projx(torch.tensor([3.0, 4.0], dtype=torch.float64), -1.0)
        tensor([0.6000, 0.8000], dtype=torch.float64)
        >>> projx(torch.tensor([3.0, 4.0], dtype=torch.float64), 1.0)
        tensor([3., 4.], dtype=torch.float64)
    """
    if _sign(k, sign) >= 0:
        return x
    # a tensor k (a learnable curvature): its leading component as a detached 0-d tensor,
    # which a compiled graph reads when it runs (a float would be a constant of the graph
    # and recompile it whenever the curvature moves); the same operations in eager mode
    c = -common.lead(k).detach() if isinstance(k, torch.Tensor) else -float(k)
    return B.projx(x, c=c, margin_bits=margin_bits)


def _mobius_add(x: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor, k: Curvature) -> tuple[torch.Tensor, torch.Tensor]:
    """``x ⊕ y`` and its ``D``, for known ``D_x, D_y`` ``(*, 1)``."""
    s = x + y
    q = k * common.sqnorm(s, keepdim=True)
    den = dx * dy - q
    return (dx * s - q * x) / den, dx * dy / den


def mobius_add(x: torch.Tensor, y: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Möbius addition.

    .. math:: x \oplus_k y = \frac{(1 - 2k\langle x,y\rangle - k|y|^2)\,x + (1 + k|x|^2)\,y}
              {1 - 2k\langle x,y\rangle + k^2|x|^2|y|^2}
              = \frac{D_x (x + y) - k|x+y|^2\,x}{D_x D_y - k|x + y|^2}

    The second form is used: for ``k < 0`` its factors are sums of non-negative terms.
    Laws: ``0 ⊕ x = x ⊕ 0 = x``, ``(-x) ⊕ x = 0``, ``(-x) ⊕ (x ⊕ y) = y``,
    ``x ⊕ y = gyr[x, y](y ⊕ x)``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> mobius_add(x, x, -1.0), mobius_add(x, x, 0.0)
        (tensor([0.8000, 0.0000], dtype=torch.float64), tensor([1., 0.], dtype=torch.float64))
    """
    return _mobius_add(x, y, deficit(x, k), deficit(y, k), k)[0]


def mobius_sub(x: torch.Tensor, y: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``x ⊖ y = x ⊕ (-y)``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> mobius_sub(x, x, -1.0)
        tensor([0., 0.], dtype=torch.float64)
    """
    return mobius_add(x, -y, k)


def mobius_coadd(x: torch.Tensor, y: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Möbius coaddition (commutative): ``x ⊞ y = x ⊕ gyr[x, -y] y``.

    .. math:: x \boxplus_k y = \frac{D_y\,x + D_x\,y}{1 - k^2|x|^2|y|^2}
              = \frac{D_y\,x + D_x\,y}{D_x + D_y - D_x D_y}

    (the second denominator is a sum of non-negative terms for ``k < 0``). For
    ``k > 0`` it vanishes where ``k|x||y| = 1``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_coadd(x, y, -1.0), mobius_coadd(y, x, -1.0)))
        True
    """
    dx, dy = deficit(x, k), deficit(y, k)
    return (dy * x + dx * y) / (dx + dy - dx * dy)


def mobius_cosub(x: torch.Tensor, y: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``x ⊟ y = x ⊞ (-y)``; ``(x ⊟ y) ⊕ y = x`` (right cancellation).

    Example:
        >>> x, y = torch.tensor([0.5, 0.1], dtype=torch.float64), torch.tensor([-0.2, 0.4], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_add(mobius_cosub(x, y, -1.0), y, -1.0), x))
        True
    """
    return mobius_coadd(x, -y, k)


def gyration(u: torch.Tensor, v: torch.Tensor, w: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Gyration ``gyr[u, v] w = ⊖(u ⊕ v) ⊕ (u ⊕ (v ⊕ w))`` in closed form.

    .. math:: \operatorname{gyr}[u, v]w = w + 2\frac{a u + b v}{d},\quad
              a = -k^2\langle u,w\rangle|v|^2 - k\langle v,w\rangle + 2k^2\langle u,v\rangle\langle v,w\rangle,\quad
              b = -k^2\langle v,w\rangle|u|^2 + k\langle u,w\rangle

    with ``d = 1 - 2k<u, v> + k^2|u|^2|v|^2 = D_u D_v - k|u + v|^2``. An isometry of
    ``R^n`` (``|gyr[u, v] w| = |w|``); laws: ``u ⊕ v = gyr[u, v](v ⊕ u)``,
    ``u ⊕ (v ⊕ w) = (u ⊕ v) ⊕ gyr[u, v] w``, ``gyr[u, v] gyr[v, u] = id``.

    Example:
        >>> u, v = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_add(u, v, -1.0), gyration(u, v, mobius_add(v, u, -1.0), -1.0)))
        True
    """
    uu, vv = common.sqnorm(u, keepdim=True), common.sqnorm(v, keepdim=True)
    uv, uw, vw = common.dot(u, v, keepdim=True), common.dot(u, w, keepdim=True), common.dot(v, w, keepdim=True)
    # k multiplies MC values one factor at a time (a rounded k * k would cost MC precision)
    a = k * (k * (2 * uv * vw - uw * vv) - vw)
    b = k * (uw - k * (vw * uu))
    d = deficit(u, k) * deficit(v, k) - k * common.sqnorm(u + v, keepdim=True)
    return w + 2 * (a * u + b * v) / d


def _theta_ratio(x: torch.Tensor, k: Curvature, sign: int) -> torch.Tensor:
    """``artan_k(|x|) / |x|`` ``(*, 1)``, finite at ``x = 0`` and up to the ball's
    boundary (``k < 0``: ``arsin_k(|x| / sqrt(D_x)) / |x|``) or infinity (``k > 0``)."""
    if sign <= 0:
        d = deficit(x, k)
        return arsin_ratio(k * common.sqnorm(x, keepdim=True) / d) / torch.sqrt(d)
    n = common.norm(x, keepdim=True)
    t = k * n * n
    inside = common.lead(t) <= 1
    near = artan_ratio(torch.where(inside, t, torch.zeros_like(t)))
    if bool(inside.all()):
        return near
    sk_n = torch.sqrt(torch.where(inside, torch.ones_like(t), t))  # sqrt(k) |x| > 1
    far = (_pi(x) / 2 - atan(1 / sk_n)) / sk_n
    return torch.where(inside, near, far)


def _scaled_image(mx: torch.Tensor, ratio: torch.Tensor, k: Curvature) -> torch.Tensor:
    """``tan_k(|mx| ratio) mx / |mx|`` (0 for ``mx = 0``)."""
    rt = common.norm(mx, keepdim=True) * ratio
    return mx * (ratio * tan_ratio(k * rt * rt))


def mobius_scalar_mul(r: float | torch.Tensor, x: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""Möbius scalar multiplication ``r ⊗ x = tan_k(r artan_k(|x|)) x / |x|``.

    Laws: ``1 ⊗ x = x``, ``(r + s) ⊗ x = (r ⊗ x) ⊕ (s ⊗ x)``, ``(rs) ⊗ x = r ⊗ (s ⊗ x)``,
    ``d(0, r ⊗ x) = |r| d(0, x)``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> mobius_scalar_mul(2.0, x, -1.0), mobius_scalar_mul(2.0, x, 0.0)
        (tensor([0.8000, 0.0000], dtype=torch.float64), tensor([1., 0.], dtype=torch.float64))
    """
    return _scaled_image(x * r, _theta_ratio(x, k, _sign(k, sign)), k)  # tan_k / z is even: any sign of r


def mobius_pointwise_mul(w: torch.Tensor, x: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""``w ⊙ x = tan_k(|w x| / |x| artan_k(|x|)) (w x) / |w x|`` (``w x`` elementwise).

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> mobius_pointwise_mul(torch.tensor([2.0, 2.0], dtype=torch.float64), x, -1.0)  # = 2 ⊗ x
        tensor([0.8000, 0.0000], dtype=torch.float64)
    """
    return _scaled_image(w * x, _theta_ratio(x, k, _sign(k, sign)), k)


def mobius_matvec(m: torch.Tensor, x: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""``M ⊗ x = tan_k(|Mx| / |x| artan_k(|x|)) Mx / |Mx|`` (``Mx = x @ m^T``).

    Example:
        >>> x = torch.tensor([[0.5, 0.0]], dtype=torch.float64)
        >>> mobius_matvec(2 * torch.eye(2, dtype=torch.float64), x, -1.0)
        tensor([[0.8000, 0.0000]], dtype=torch.float64)
    """
    return _scaled_image(torch.matmul(x, m.transpose(-1, -2)), _theta_ratio(x, k, _sign(k, sign)), k)


def _sqrt_k(k: Curvature, like: torch.Tensor) -> float | torch.Tensor:
    """``sqrt(k)`` for ``k > 0`` at the precision of ``like`` (MC for an MCTensor)."""
    if isinstance(k, torch.Tensor):
        return torch.sqrt(k)
    return common.c_power(c=float(k), power=0.5, like=like)


def _artan_of(num: torch.Tensor, den: torch.Tensor, k: Curvature) -> torch.Tensor:
    """``artan_k(num / den)`` for ``k > 0``, ``num >= 0``, ``den >= 0``: ``z artan_ratio(k z^2)``
    for ``sqrt(k) z <= 1`` (smooth in ``k``), else ``(pi/2 - atan(den / (sqrt(k) num))) / sqrt(k)``
    (``den = 0``, the antipode: ``pi / (2 sqrt k)``)."""
    near = common.lead(k * num * num) <= common.lead(den * den)
    z = torch.where(near, num, torch.zeros_like(num)) / torch.where(near, den, torch.ones_like(den))
    out = z * artan_ratio(k * z * z)
    if bool(near.all()):
        return out
    num_far = torch.where(near, torch.ones_like(num), num)
    sk_num = _sqrt_k(k, num) * num_far  # > den >= 0
    far = (_pi(num) / 2 - atan(torch.where(near, torch.zeros_like(den), den) / sk_num)) * (num_far / sk_num)
    return torch.where(near, out, far)


def dist(x: torch.Tensor, y: torch.Tensor, k: Curvature, *, keepdim: bool = False, sign: int | None = None) -> torch.Tensor:
    r"""Geodesic distance ``d(x, y) = 2 artan_k(|(-x) ⊕ y|)``.

    For ``k <= 0`` computed as ``2 arsin_k(|x - y| / sqrt(D_x D_y))`` (the ball's form: no
    cancellation near the boundary); for ``k > 0`` as ``2 artan_k(|x - y| / C)`` with
    ``C = sqrt(D_x D_y - k|x - y|^2) = |k|y|^2 x + y| / |y|`` (a norm: accurate up to the
    antipode, where ``C = 0``).
    Laws: ``d(x, x) = 0``, symmetry, triangle inequality; ``k = 0``: ``2|x - y|``.

    Example:
        >>> o, x = torch.zeros(2, dtype=torch.float64), torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> [round(float(dist(o, x, k)), 9) for k in (-1.0, 0.0, 1.0)]  # 2 atanh, 2 x, 2 atan of 0.5
        [1.098612289, 1.0, 0.927295218]
    """
    dx, dy = deficit(x, k), deficit(y, k)
    delta = y - x
    if _sign(k, sign) <= 0:
        z = common.norm(delta, keepdim=True) / torch.sqrt(dx * dy)
        out = 2 * arsin_k(z, k)
    else:
        out = 2 * _artan_of(common.norm(delta, keepdim=True), _cos_factor(x, y, k), k)
    return out if keepdim else out[..., 0]


def _cos_factor(x: torch.Tensor, y: torch.Tensor, k: Curvature) -> torch.Tensor:
    """``sqrt(D_x D_y - k|y - x|^2) = |k|y|^2 x + y| / |y|`` (for ``k > 0``; with ``x, y``
    swapped where ``|x| > |y|``; 1 for ``x = y = 0``): the cosine of half the distance
    times ``sqrt(D_x D_y)``, as a norm, so that it keeps its accuracy at the antipode."""
    nx, ny = common.sqnorm(x, keepdim=True), common.sqnorm(y, keepdim=True)
    swap = common.lead(nx) > common.lead(ny)
    a, b = torch.where(swap, y, x), torch.where(swap, x, y)
    nb = torch.where(swap, nx, ny)
    zero = common.lead(nb) == 0
    nb_safe = torch.where(zero, torch.ones_like(nb), nb)
    f = common.norm(k * nb * a + b, keepdim=True) / torch.sqrt(nb_safe)
    return torch.where(zero, torch.ones_like(f), f)


def dist0(x: torch.Tensor, k: Curvature, *, keepdim: bool = False, sign: int | None = None) -> torch.Tensor:
    r"""``d(0, x) = 2 artan_k(|x|)`` (``k <= 0``: ``2 arsin_k(|x| / sqrt(D_x))``).

    Example:
        >>> round(float(dist0(torch.tensor([0.5, 0.0], dtype=torch.float64), -1.0)), 9)  # ln 3
        1.098612289
    """
    out = 2 * common.norm(x, keepdim=True) * _theta_ratio(x, k, _sign(k, sign))
    return out if keepdim else out[..., 0]


def expmap0(u: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""``exp_0(u) = tan_k(|u|) u / |u|`` (``lambda_0 = 2``: travels ``2|u|``).

    Example:
        >>> expmap0(torch.tensor([1.0, 0.0], dtype=torch.float64), -1.0)  # tanh(1)
        tensor([0.7616, 0.0000], dtype=torch.float64)
    """
    return u * tan_ratio(k * common.sqnorm(u, keepdim=True))


def logmap0(y: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""``log_0(y) = artan_k(|y|) y / |y|``.

    Example:
        >>> logmap0(torch.tensor([0.5, 0.0], dtype=torch.float64), -1.0)  # atanh(1/2)
        tensor([0.5493, 0.0000], dtype=torch.float64)
    """
    return y * _theta_ratio(y, k, _sign(k, sign))


def expmap(x: torch.Tensor, u: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Exponential map ``exp_x(u) = x ⊕ tan_k(lambda_x |u| / 2) u / |u|``.

    With ``z = |u| / D_x`` the step is ``v = u tan_k(z) / (z D_x)`` and its ``D_v =
    1 / cos_k(z)^2`` is taken from ``z`` (not from ``v``'s rounded coordinates), as in
    :func:`.ball.expmap`. Laws: ``exp_x(0) = x``, ``d(x, exp_x(u)) = |u|_x`` (below the
    sphere's half circumference), ``exp_x(log_x(y)) = y``.

    Example:
        >>> x, u = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
        >>> round(float(dist(x, expmap(x, u, 1.0), 1.0)), 9), round(float(norm(x, u, 1.0)), 9)
        (0.48, 0.48)
    """
    dx = deficit(x, k)
    r = 1 / dx
    n = common.norm(u, keepdim=True) * r
    s2 = k * n * n
    v = u * (tan_ratio(s2) * r)
    cz = cos_ratio(s2)
    dv = 1 / (cz * cz)
    s = x + v
    q = k * common.sqnorm(s, keepdim=True)
    return (dx * s - q * x) / (dx * dv - q)


def logmap(x: torch.Tensor, y: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""Logarithmic map ``log_x(y) = (2 / lambda_x) artan_k(|w|) w / |w|``, ``w = (-x) ⊕ y``.

    ``w = (D_x (y - x) + k|y - x|^2 x) / (D_x D_y - k|y - x|^2)``; for ``k <= 0`` the
    length ``h = artan_k(|w|) = arsin_k(|y - x| / sqrt(D_x D_y))`` (half the distance) and
    ``log_x(y) = D_x w h / tan_k(h)``, as :func:`.ball.logmap`. Laws: ``log_x(x) = 0``,
    ``|log_x(y)|_x = d(x, y)``, ``exp_x(log_x(y)) = y``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> bool(torch.allclose(expmap(x, logmap(x, y, 1.0), 1.0), y))
        True
    """
    dx, dy = deficit(x, k), deficit(y, k)
    delta = y - x
    rho2 = common.sqnorm(delta, keepdim=True)
    den = dx * dy - k * rho2
    w = (dx * delta + k * rho2 * x) / den
    if _sign(k, sign) <= 0:
        z = torch.sqrt(rho2) / torch.sqrt(dx * dy)
        h = arsin_k(z, k)
        return w * (dx / tan_ratio(k * h * h))
    return w * (dx * _theta_ratio(w, k, 1))


def transp(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Parallel transport ``P_{x->y} v = (lambda_x / lambda_y) gyr[y, -x] v``, computed as
    the rotation of :func:`common.conformal_transp` (geodesics are circular arcs in every
    conformal model of constant curvature) without the gyration's cancellation.

    Laws: ``<P u, P v>_y = <u, v>_x``, ``P_{x->y} log_x(y) = -log_y(x)``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> v = torch.tensor([0.2, 0.1], dtype=torch.float64)
        >>> bool(torch.allclose(transp(x, y, v, 1.0), gyration(y, -x, v, 1.0) * deficit(y, 1.0) / deficit(x, 1.0)))
        True
    """
    dx, dy = deficit(x, k), deficit(y, k)
    delta = y - x
    rho = common.norm(delta, keepdim=True)
    w = dx * delta + k * (rho * rho) * x  # a positive multiple of (-x) ⊕ y
    return common.conformal_transp(delta * common.safe_reciprocal(rho), common.normalize(w), v, dy / dx)


def transp0(y: torch.Tensor, u: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Transport from the origin: ``P_{0->y} u = (lambda_0 / lambda_y) u = D_y u``.

    Example:
        >>> transp0(torch.tensor([0.5, 0.0]), torch.tensor([1.0, 1.0]), -1.0)
        tensor([0.7500, 0.7500])
    """
    return u * deficit(y, k)


def transp0back(y: torch.Tensor, u: torch.Tensor, k: Curvature) -> torch.Tensor:
    r"""Transport to the origin: ``P_{y->0} u = u / D_y``.

    Example:
        >>> transp0back(torch.tensor([0.5, 0.0]), torch.tensor([0.75, 0.75]), -1.0)
        tensor([1., 1.])
    """
    return u / deficit(y, k)


def geodesic(t: float | torch.Tensor, x: torch.Tensor, y: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""The geodesic through ``x`` (``t = 0``) and ``y`` (``t = 1``):
    ``gamma(t) = x ⊕ (t ⊗ ((-x) ⊕ y)) = exp_x(t log_x(y))`` (the second form is used).

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> m = geodesic(0.5, x, y, -1.0)
        >>> round(float(dist(x, m, -1.0) - dist(m, y, -1.0)), 12)
        0.0
    """
    return expmap(x, t * logmap(x, y, k, sign=sign), k)


def dist2plane(
    x: torch.Tensor,
    p: torch.Tensor,
    a: torch.Tensor,
    k: Curvature,
    *,
    keepdim: bool = False,
    signed: bool = False,
    scaled: bool = False,
) -> torch.Tensor:
    r"""Distance from ``x`` to the gyroplane through ``p`` with normal ``a`` (Ganea et al. 2018).

    .. math:: d(x, H_{a,p}) = \operatorname{arsin}_k
              \frac{2 \langle w, a\rangle}{D_w |a|},\qquad w = (-p) \oplus x

    with ``D_w = D_p D_x / (D_p D_x - k|x - p|^2)`` from the deficits (no ``1 - c|w|^2``).
    ``signed``: keep the sign of ``<w, a>``; ``scaled``: multiply by ``|a|``.

    Example:
        >>> x, a = torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> p = torch.zeros(2, dtype=torch.float64)
        >>> round(float(dist2plane(x, p, a, -1.0)), 9)  # the plane through 0 normal to e_2: d = d(0, x)
        1.098612289
    """
    dp, dx = deficit(p, k), deficit(x, k)
    w, dw = _mobius_add(-p, x, dp, dx, k)
    an = common.norm(a, keepdim=True)
    num = 2 * common.dot(w, a, keepdim=True)
    if not signed:
        num = torch.abs(num)
    out = arsin_k(num / (dw * an), k)
    if scaled:
        out = out * an
    return out if keepdim else out[..., 0]


def antipode(x: torch.Tensor, k: Curvature, *, sign: int | None = None) -> torch.Tensor:
    r"""The antipode: ``-x / (k |x|^2)`` on the sphere (``k > 0``); ``-x`` otherwise (geoopt's convention).

    Example:
        >>> antipode(torch.tensor([0.5, 0.0]), 1.0), antipode(torch.tensor([0.5, 0.0]), -1.0)
        (tensor([-2., -0.]), tensor([-0.5000, -0.0000]))
    """
    if _sign(k, sign) <= 0:
        return -x
    return -x / (k * common.sqnorm(x, keepdim=True))


def weighted_midpoint(
    xs: torch.Tensor,
    k: Curvature,
    weights: torch.Tensor | None = None,
    *,
    reducedim: Sequence[int] | None = None,
    dim: int = -1,
    keepdim: bool = False,
    lincomb: bool = False,
    posweight: bool = False,
    sign: int | None = None,
) -> torch.Tensor:
    r"""Weighted gyromidpoint (Ungar 2010), geoopt's conventions.

    .. math:: m = \frac12 \otimes_k \frac{\sum_i \alpha_i \lambda_{x_i} x_i}
              {\sum_i \alpha_i (\lambda_{x_i} - 1)}

    with ``lambda_x - 1 = (1 - k|x|^2) / D_x`` (a sum of positive terms for ``k < 0``).

    Args:
        xs: points; ``dim`` is their point dimension.
        weights: broadcastable to ``xs`` without its point dimension (default: all 1).
        reducedim: dimensions reduced (default: all but ``dim``).
        keepdim: keep the reduced dimensions (size 1).
        lincomb: return ``(sum of weights) ⊗ m`` (the gyro linear combination).
        posweight: replace points of negative weight by their antipodes (``k > 0``).

    Example:
        >>> xs = torch.tensor([[0.5, 0.0], [-0.5, 0.0]], dtype=torch.float64)
        >>> weighted_midpoint(xs, -1.0)
        tensor([0., 0.], dtype=torch.float64)
    """
    nd = xs.dim()
    dim = dim % nd
    if reducedim is None:
        reducedim = [d for d in range(nd) if d != dim]
    else:
        reducedim = [d % nd for d in reducedim]
    red = list(reducedim)
    xl = xs.movedim(dim, -1)
    red_l = [d if d < dim else d - 1 for d in red]
    if weights is None:
        w = torch.ones_like(xl[..., :1])
    else:
        # weights broadcast against xs without its point dim (a lower rank from the right), or
        # carry that dim (size 1) at ``dim``
        w = weights.unsqueeze(-1) if weights.dim() < nd else weights.movedim(dim, -1)
    if posweight and bool((common.lead(w) < 0).any()):
        xl = torch.where(common.lead(w) < 0, antipode(xl, k, sign=sign), xl)
        w = torch.abs(w)
    dxs = deficit(xl, k)
    gamma = 2 / dxs
    gm1 = (1 - k * common.sqnorm(xl, keepdim=True)) / dxs
    num = torch.sum(w * gamma * xl, dim=red_l, keepdim=True)
    den = torch.sum((w * gm1).expand(gamma.shape), dim=red_l, keepdim=True)
    mid = mobius_scalar_mul(0.5, num / den, k, sign=sign)
    if _sign(k, sign) > 0:
        anti = antipode(mid, k, sign=1)
        a_d = torch.sum(dist(mid, xl, k, keepdim=True, sign=1), dim=red_l, keepdim=True)
        b_d = torch.sum(dist(anti, xl, k, keepdim=True, sign=1), dim=red_l, keepdim=True)
        mid = torch.where(common.lead(b_d) < common.lead(a_d), anti, mid)
    if lincomb:
        alpha = torch.sum(w.expand(gamma.shape), dim=red_l, keepdim=True)
        mid = mobius_scalar_mul(alpha, mid, k, sign=sign)
    mid = mid.movedim(-1, dim)
    if not keepdim:
        for d in sorted(red, reverse=True):
            mid = mid.squeeze(d)
    return mid


def mobius_fn_apply(fn: Callable[..., torch.Tensor], x: torch.Tensor, *args: Any, k: Curvature, **kwargs: Any) -> torch.Tensor:
    r"""``f^⊗(x) = exp_0(f(log_0(x), *args, **kwargs))``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_fn_apply(lambda u: 2 * u, x, k=-1.0), mobius_scalar_mul(2.0, x, -1.0)))
        True
    """
    return mobius_fn_apply_chain(x, lambda u: fn(u, *args, **kwargs), k=k)


def mobius_fn_apply_chain(
    x: torch.Tensor, *fns: Callable[[torch.Tensor], torch.Tensor], k: Curvature, sign: int | None = None
) -> torch.Tensor:
    r"""``(f_n ∘ ... ∘ f_1)^⊗(x)``: one ``log_0``, the functions in order, one ``exp_0``.

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_fn_apply_chain(x, lambda u: 2 * u, lambda u: 1.5 * u, k=-1.0), mobius_scalar_mul(3.0, x, -1.0)))
        True
    """
    u = logmap0(x, k, sign=sign)
    for fn in fns:
        u = fn(u)
    return expmap0(u, k)
