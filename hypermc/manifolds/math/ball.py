"""Poincaré ball model, as pure functions (Tensor or MCTensor).

Points ``|x| < 1 / sqrt(c)``, curvature ``K = -c < 0``, conformal factor
``lambda_x = 2 / D_x`` with the *deficit* ``D_x = 1 - c |x|^2``. Tangent vectors are
Euclidean vectors. Every formula is written so that the deficits enter as factors,
never as a difference of rounded quantities: ``D_x`` itself is formed from the
components at ``nc + 1`` (:func:`common.deficit`), the Möbius denominator is the sum of
non-negative terms ``D_x D_y + c |x + y|^2``, and distances use ``asinh`` of a ratio.

Resolution: a coordinate is stored to ``u^nc``, a hyperbolic length of about
``u^nc / D_x ~ u^nc e^r / 4`` at hyperbolic radius ``r``; ``D_x`` stays relatively
accurate until ``D_x ~ u^(nc+1)``. So points and maps are resolved to ``~ u^nc e^r``
and distances between the stored points are accurate to far beyond that.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, cast

import torch

from ...mcf.eft import all_true, tracing
from ...mcf.tensor import MCTensor, implements
from . import common

__all__ = [
    "deficit",
    "dist",
    "dist_and_deficits",
    "dist_from_deficits",
    "dist0",
    "mobius_add",
    "mobius_scalar_mul",
    "mobius_matvec",
    "expmap",
    "expmap_egrad",
    "expmap0",
    "logmap",
    "logmap0",
    "transp",
    "inner",
    "norm",
    "egrad2rgrad",
    "projx",
]


def deficit(x: torch.Tensor, *, c: float | torch.Tensor = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""``D_x = 1 - c |x|^2`` formed at ``nc + 1`` components (see :func:`common.deficit`).

    Example:
        >>> deficit(torch.tensor([0.6, 0.0], dtype=torch.float64)), deficit(torch.tensor([0.25, 0.0], dtype=torch.float64), c=4.0)
        (tensor(0.6400, dtype=torch.float64), tensor(0.7500, dtype=torch.float64))
    """
    return common.deficit(x, c=c, keepdim=keepdim)


def _scale_sqrt_c(z: torch.Tensor, c: float) -> torch.Tensor:
    return common.scale_c(z, c=c, power=0.5)


def _scale_inv_sqrt_c(z: torch.Tensor, c: float | torch.Tensor) -> torch.Tensor:
    return common.scale_c(z, c=c, power=-0.5)


def _scale_c(z: torch.Tensor, c: float) -> torch.Tensor:
    return common.scale_c(z, c=c, power=1.0)


def dist(x: torch.Tensor, y: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Geodesic distance.

    .. math:: d(x, y) = \frac{2}{\sqrt c}\operatorname{asinh}
              \frac{\sqrt c\,\lVert x - y\rVert}{\sqrt{D_x}\sqrt{D_y}}

    (the same as ``acosh(1 + 2c|x-y|^2 / (D_x D_y)) / sqrt(c)`` without the cancellation
    for close points). Laws: ``d(x, x) = 0``, symmetry, triangle inequality.

    Accuracy: relative ``~ 64 u^nc`` plus ``u^(nc+1) / D`` from the deficits; e.g.
    float64 ``nc = 2`` at hyperbolic radius 60 and ``nc = 3`` at radius 100 within
    ``1e-6`` relative of mpmath for the stored points (tested), where plain float64
    returns inf.

    Example:
        >>> o, x = torch.zeros(2, dtype=torch.float64), torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> round(float(dist(o, x)), 6), round(float(dist(o, x / 2, c=4.0)), 6)  # ln 3; c = 4: half as far
        (1.098612, 0.549306)

        Two points ``1e-20`` inside the boundary and ``1e-21`` apart (radius ~46.7):
        ``2 asinh(1e-21 / 2e-20) = 2 asinh(0.05)``; float64 rounds both onto the boundary.

        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) - hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64)
        >>> y = x + hm.mc([0.0, 1e-21], nc=2, dtype=torch.float64)
        >>> round(float(dist(x, y)), 9), float(dist(x.approx(), y.approx()))
        (0.09995838, nan)
    """
    return dist_and_deficits(x, y, c=c)[0]


def dist_and_deficits(x: torch.Tensor, y: torch.Tensor, *, c: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dist(x, y), deficit(x), deficit(y))`` (a caller that checks the points by their
    deficits gets them with the distance).

    MCTensors (outside ``torch.compile`` and ``torch.func`` transforms) take an autograd
    function with the closed-form gradient (:class:`_MCDist`): the same values, a
    gradient of ~20 row operations instead of the ~30 backward steps of the formula's
    recorded graph. Plain tensors are evaluated over blocks of rows
    (:func:`common.row_blocked`).

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
        >>> d, dx, dy = dist_and_deficits(x, y)
        >>> round(float(d), 9), float(dx), float(dy)
        (1.680699772, 0.75, 0.75)
    """
    if _MCDist.applies(x, y):
        return _MCDist.apply(x, y, float(c))
    return common.row_blocked(functools.partial(_measured, c=c), x, y)


def _measured(x: torch.Tensor, y: torch.Tensor, *, c: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dy = deficit(x, c=c), deficit(y, c=c)
    return dist_from_deficits(x, y, dx, dy, c=c), dx, dy


class _MCDist(torch.autograd.Function):
    r"""The distance of MC points with its closed-form gradient.

    With ``n = |x - y|`` and ``R = sqrt(D_x D_y + c n^2)`` (``= sqrt(D_x D_y) cosh(d sqrt(c) / 2)``):

    .. math:: \frac{\partial d}{\partial x} = \frac{2}{nR}(x - y) + \frac{2cn}{D_x R} x,
              \qquad
              \frac{\partial d}{\partial y} = -\frac{2}{nR}(x - y) + \frac{2cn}{D_y R} y,

    evaluated on the scaled difference ``e = (x - y) 2^-k`` of the forward pass
    (``|e| = r = sqrt(s)`` in ``[1/2, sqrt(dim))``, so nothing over- or underflows):
    ``2 / (nR) (x - y) = (2 / (rR)) e``. Zero where ``x = y`` (as the formula's
    ``safe_sqrt``). A second derivative (``create_graph=True``) differentiates the
    formula's own graph instead.
    """

    @staticmethod
    def applies(x: torch.Tensor, y: torch.Tensor) -> bool:
        """MC operands (one may be plain and not require grad), eager or traced by Dynamo
        (``torch.compile``: the compiled gradient is then this closed form too, with eager
        mode's bits), not under torch.func or another trace."""
        mc = [isinstance(t, MCTensor) for t in (x, y)]
        compiling = torch.compiler.is_compiling()  # Dynamo traces the function's own backward
        if not any(mc) or (tracing() and not compiling):
            return False
        for t, is_mc in zip((x, y), mc):
            if (not compiling and torch._C._functorch.is_functorch_wrapped_tensor(t)) or (not is_mc and t.requires_grad):
                return False
        return not (all(mc) and cast(MCTensor, x).nc != cast(MCTensor, y).nc)

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: D102
        # while torch.compile traces: one opaque op computing the same (traced, its dozen
        # ops and their guards cost ~1.5x eager mode's time)
        parts = torch.ops.hypermc.ball_dist_parts if torch.compiler.is_compiling() else _dist_parts
        d, dx, dy, e, s, k = parts(x, y, c)
        ctx.save_for_backward(x, y, dx, dy, e, s, k)
        ctx.c = c
        ctx.mark_non_differentiable(dx, dy)
        return d, dx, dy

    @staticmethod
    def backward(ctx: Any, gd: torch.Tensor, *_: Any) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:  # noqa: D102
        x, y, dx, dy, e, s, k = ctx.saved_tensors
        c = ctx.c
        need_x, need_y = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if torch.is_grad_enabled():  # create_graph: differentiate the formula's graph, recorded on the inputs
            d = _measured(x, y, c=c)[0]
            wrt = [t for t, need in ((x, need_x), (y, need_y)) if need]
            got = iter(torch.autograd.grad(d, wrt, gd, create_graph=True))
            return (next(got) if need_x else None), (next(got) if need_y else None), None
        if torch.compiler.is_compiling():  # one opaque op, as the forward
            gx, gy = torch.ops.hypermc.ball_dist_grads(gd, [x, y, dx, dy, e, s, k], c, need_x, need_y)
            return (_unbroadcast(gx, x) if need_x else None), (_unbroadcast(gy, y) if need_y else None), None
        gx, gy = _dist_grads(gd, (x, y, dx, dy, e, s, k), c, need_x, need_y)
        return _unbroadcast(gx, x), _unbroadcast(gy, y), None


def _dist_parts(x: torch.Tensor, y: torch.Tensor, c: float) -> tuple[torch.Tensor, ...]:
    """:class:`_MCDist`'s forward: the distance, the deficits, the scaled difference
    ``e = (x - y) 2^-k``, ``s = |e|^2`` and ``k``."""
    dx, dy = deficit(x, c=c), deficit(y, c=c)
    e, k = common.scaled_to_unit(x - y)
    s, k = common.sqnorm(e), k[..., 0]
    return _dist_from_scaled(s, k, dx, dy, c), dx, dy, e, s, k


@torch.library.custom_op("hypermc::ball_dist_parts", mutates_args=())
def _dist_parts_op(
    x: torch.Tensor, y: torch.Tensor, c: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_dist_parts` as one op (MC operands through their dispatch table: one
    ``hypermc::mc_op`` in a compiled graph)."""
    return tuple(t.detach().clone() for t in _dist_parts(x.detach(), y.detach(), c))  # type: ignore[return-value]


@_dist_parts_op.register_fake
def _dist_parts_fake(x: torch.Tensor, y: torch.Tensor, c: float) -> tuple[torch.Tensor, ...]:
    shape = torch.broadcast_shapes(x.shape, y.shape)
    rows = shape[:-1]
    return (
        x.new_empty(rows),
        x.new_empty(x.shape[:-1]),
        y.new_empty(y.shape[:-1]),
        x.new_empty(shape),
        x.new_empty(rows),
        x.new_empty(rows, dtype=torch.int32),
    )


@implements(torch.ops.hypermc.ball_dist_parts.default)
def _dist_parts_mc(func: torch._ops.OpOverload, x: torch.Tensor, y: torch.Tensor, c: float) -> tuple[torch.Tensor, ...]:
    return _dist_parts(x, y, c)


def _dist_grads(
    gd: torch.Tensor, saved: Sequence[torch.Tensor], c: float, need_x: bool = True, need_y: bool = True
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """:class:`_MCDist`'s closed-form gradients (not summed over broadcast dims) from its
    saved tensors ``x, y, dx, dy, e, s, k``."""
    x, y, dx, dy, e, s, k = saved
    zero = common.lead(s) == 0
    none = common.nowhere(zero, s)  # the common case: no where (the same values)
    r = torch.sqrt(s if none else torch.where(zero, torch.ones_like(s), s))
    n = common.ldexp(r, k)
    root = torch.sqrt(dx * dy + _scale_c(n * n, c))
    alpha = gd * 2 / (r * root)  # times e
    if not none:
        alpha = torch.where(zero, torch.zeros_like(gd), alpha)
    cn = _scale_c(n, c) * alpha * r  # 2 c n gd / R; the row's factor of x (y) is cn / D_x (cn / D_y)
    ae = e * alpha.unsqueeze(-1)
    gx = ae + x * (cn / dx).unsqueeze(-1) if need_x else None
    gy = y * (cn / dy).unsqueeze(-1) - ae if need_y else None
    return gx, gy


@torch.library.custom_op("hypermc::ball_dist_grads", mutates_args=())
def _dist_grads_op(gd: torch.Tensor, saved: list[torch.Tensor], c: float, need_x: bool, need_y: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_dist_grads` as one op (MC operands through their dispatch table); a
    gradient not needed is a 0-d zero."""
    gx, gy = _dist_grads(gd.detach(), [t.detach() for t in saved], c, need_x, need_y)
    return _or_zero(gx, saved[0]).clone(), _or_zero(gy, saved[1]).clone()  # outputs of a custom op alias no input


def _or_zero(g: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``g``, or a 0-d zero of ``like``'s component dtype and device (a gradient not needed)."""
    return torch.zeros((), dtype=like.dtype, device=like.device) if g is None else g


@_dist_grads_op.register_fake
def _dist_grads_fake(
    gd: torch.Tensor, saved: list[torch.Tensor], c: float, need_x: bool, need_y: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = saved[0], saved[1]
    shape = torch.broadcast_shapes(x.shape, y.shape)
    return x.new_empty(shape if need_x else ()), y.new_empty(shape if need_y else ())


@implements(torch.ops.hypermc.ball_dist_grads.default)
def _dist_grads_mc(
    func: torch._ops.OpOverload, gd: torch.Tensor, saved: list[torch.Tensor], c: float, need_x: bool, need_y: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    gx, gy = _dist_grads(gd, saved, c, need_x, need_y)
    return _or_zero(gx, saved[0]), _or_zero(gy, saved[1])


def _unbroadcast(g: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """``g`` summed over the dims ``like`` was broadcast along (autograd's rule)."""
    if g is None or g.shape == like.shape:
        return g
    lead_dims = g.dim() - like.dim()
    dims = tuple(range(lead_dims)) + tuple(lead_dims + i for i, n in enumerate(like.shape) if n == 1 and g.shape[lead_dims + i] != 1)
    g = g.sum(dim=dims, keepdim=True) if dims else g
    return g.reshape(like.shape)


def dist_from_deficits(x: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    """:func:`dist` with the deficits ``dx = deficit(x, c=c)``, ``dy = deficit(y, c=c)``
    already formed (a caller that checked the points by their deficits reuses them).

    Example:
        >>> o, x = torch.zeros(2, dtype=torch.float64), torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> round(float(dist_from_deficits(o, x, deficit(o), deficit(x))), 6)  # ln 3
        1.098612
    """
    s, k = common.scaled_sqnorm(x - y)
    return _dist_from_scaled(s, k, dx, dy, c)


def _dist_from_scaled(s: torch.Tensor, k: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor, c: float) -> torch.Tensor:
    """The distance from ``|x - y|^2 = s 4^k`` (:func:`common.scaled_sqnorm`) and the deficits."""
    a = common.ldexp(common.safe_sqrt(_scale_c(s, c) / (dx * dy)), k)
    return _scale_inv_sqrt_c(2 * torch.asinh(a), c)


def dist0(x: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Distance from the origin: ``(2 / sqrt c) asinh(sqrt(c) |x| / sqrt(D_x))``
    (= ``2 atanh(sqrt(c)|x|) / sqrt(c)`` without forming ``1 - sqrt(c)|x|``).

    Example:
        >>> round(float(dist0(torch.tensor([0.5, 0.0], dtype=torch.float64))), 6)  # 2 atanh(1/2) = ln 3
        1.098612
        >>> x = hm.mc([1.0, 0.0], nc=3, dtype=torch.float64) - hm.mc([1e-40, 0.0], nc=3, dtype=torch.float64)
        >>> round(float(dist0(x)), 6)  # ln(2e40)
        92.796551
    """
    s, k = common.scaled_sqnorm(x)
    a = common.ldexp(common.safe_sqrt(_scale_c(s, c) / deficit(x, c=c)), k)
    return _scale_inv_sqrt_c(2 * torch.asinh(a), c)


def _mobius_add(x: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``x ⊕ y`` and its deficit, for known deficits ``dx, dy`` ``(*, 1)``."""
    s = x + y
    q = _scale_c(common.sqnorm(s, keepdim=True), c)
    den = dx * dy + q
    return (dx * s + q * x) / den, dx * dy / den


def mobius_add(x: torch.Tensor, y: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Möbius addition.

    .. math:: x \oplus y = \frac{(1 + 2c\langle x,y\rangle + c|y|^2)\,x + D_x\,y}
              {1 + 2c\langle x,y\rangle + c^2|x|^2|y|^2}
              = \frac{D_x (x + y) + c|x+y|^2\,x}{D_x D_y + c|x + y|^2}

    The second form (used) has no cancellation: numerator factor and denominator are
    sums of non-negative terms. Also ``D_{x⊕y} = D_x D_y / (D_x D_y + c|x+y|^2)``.

    Laws: ``0 ⊕ x = x ⊕ 0 = x``, ``(-x) ⊕ x = 0``, ``(-x) ⊕ (x ⊕ y) = y`` (left
    cancellation), ``|x ⊕ y| < 1/sqrt(c)``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.1, -0.6], dtype=torch.float64)
        >>> mobius_add(x, x)  # in one dimension: relativistic velocity addition
        tensor([0.8000, 0.0000], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_add(-x, mobius_add(x, y)), y)), mobius_add(-x, x)
        (True, tensor([0., 0.], dtype=torch.float64))
    """
    return common.row_blocked(lambda a, b: _mobius_add(a, b, deficit(a, c=c, keepdim=True), deficit(b, c=c, keepdim=True), c)[0], x, y)


def mobius_scalar_mul(r: float | torch.Tensor, x: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Möbius scalar multiplication.

    .. math:: r \otimes x = \frac{\tanh(r \operatorname{atanh}(\sqrt c |x|))}{\sqrt c|x|}\,x

    with ``atanh(sqrt(c)|x|) = asinh(sqrt(c)|x| / sqrt(D_x))`` (no ``1 - sqrt(c)|x|``).
    Laws: ``1 ⊗ x = x``, ``(r + s) ⊗ x = (r ⊗ x) ⊕ (s ⊗ x)``, ``r ⊗ (s ⊗ x) = (rs) ⊗ x``.

    Args:
        r: scalar (number or tensor broadcastable to ``x.shape[:-1] + (1,)``).

    Example:
        >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> mobius_scalar_mul(2.0, x), mobius_scalar_mul(1.0, x)  # 2 ⊗ x = x ⊕ x
        (tensor([0.8000, 0.0000], dtype=torch.float64), tensor([0.5000, 0.0000], dtype=torch.float64))
    """
    sd = torch.sqrt(deficit(x, c=c, keepdim=True))
    a = _scale_sqrt_c(common.norm(x, keepdim=True), c) / sd
    theta = torch.asinh(a)
    return x * (r * common.tanhc(r * theta) * common.asinhc(a) / sd)


def mobius_matvec(m: torch.Tensor, x: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Möbius matrix-vector product (HGCN's hyperbolic linear map).

    .. math:: M \otimes x = \frac{\tanh\!\left(\frac{|Mx|}{|x|}\operatorname{atanh}(\sqrt c|x|)\right)}
              {\sqrt c\,|Mx|}\,Mx

    computed as ``tanhc(r theta) * asinhc(a) / sqrt(D_x) * Mx`` (``theta = atanh(sqrt c|x|)``,
    ``r = |Mx|/|x|``), which is 0 for ``Mx = 0`` and finite at ``x = 0``.

    Args:
        m: matrix ``(out, n)`` (Tensor or MCTensor); ``Mx`` is ``x @ m^T``.
        x: points ``(*, n)``.

    Example:
        >>> x = torch.tensor([[0.5, 0.0]], dtype=torch.float64)
        >>> mobius_matvec(2 * torch.eye(2, dtype=torch.float64), x)  # 2I ⊗ x = 2 ⊗ x
        tensor([[0.8000, 0.0000]], dtype=torch.float64)
        >>> mobius_matvec(torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]], dtype=torch.float64), x)  # 2 -> 3 dims
        tensor([[0.5000, 0.0000, 0.0000]], dtype=torch.float64)
    """
    mx = torch.matmul(x, m.transpose(-1, -2))
    sd = torch.sqrt(deficit(x, c=c, keepdim=True))
    a = _scale_sqrt_c(common.norm(x, keepdim=True), c) / sd
    ratio = common.asinhc(a) / sd  # theta / (sqrt(c) |x|)
    rtheta = _scale_sqrt_c(common.norm(mx, keepdim=True), c) * ratio
    return mx * (common.tanhc(rtheta) * ratio)


def expmap(x: torch.Tensor, u: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Exponential map.

    .. math:: \exp_x(u) = x \oplus \left(\tanh\!\left(\frac{\sqrt c\,\lambda_x |u|}{2}\right)
              \frac{u}{\sqrt c |u|}\right)

    with ``z = sqrt(c)|u| / D_x``, the step ``v = u tanh(z)/z / D_x`` and its deficit
    ``D_v = 1 / cosh(z)^2`` taken from ``z`` (not from ``v``'s rounded coordinates):
    ``exp_x(u) = (D_x s + c|s|^2 x) / (D_x D_v + c|s|^2)``, ``s = x + v``.

    Laws: ``expmap(x, 0) = x``, ``d(x, expmap(x, u)) = norm(x, u)``,
    ``expmap(x, logmap(x, y)) = y``.

    Example:
        >>> x, u = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
        >>> round(float(dist(x, expmap(x, u))), 9), round(float(norm(x, u)), 9)  # 2 |u| / D_x
        (0.8, 0.8)
    """
    return common.row_blocked(functools.partial(_expmap, c=c), x, u)


def _expmap(x: torch.Tensor, u: torch.Tensor, *, c: float) -> torch.Tensor:
    """:func:`expmap` in one call (:func:`expmap` runs it on blocks of rows of large plain tensors)."""
    dx = deficit(x, c=c, keepdim=True)
    r = 1 / dx
    z = _scale_sqrt_c(common.norm(u, keepdim=True), c) * r
    return _step(x, u * (common.tanhc(z) * r), dx, z, c)


def _step(x: torch.Tensor, v: torch.Tensor, dx: torch.Tensor, z: torch.Tensor, c: float) -> torch.Tensor:
    """``x ⊕ v`` for the step ``v`` of :func:`expmap` with ``D_v = 1 / cosh(z)^2`` taken from ``z``."""
    sech2 = 1 / torch.cosh(z) ** 2  # D_v; 0 (not NaN) where cosh overflows
    s = x + v
    q = _scale_c(common.sqnorm(s, keepdim=True), c)
    return (dx * s + q * x) / (dx * sech2 + q)


def expmap_egrad(x: torch.Tensor, g: torch.Tensor, t: float, *, c: float = 1.0) -> torch.Tensor:
    r"""``expmap(x, t * egrad2rgrad(x, g))``, the Riemannian gradient step of an optimizer,
    with the deficit ``D = D_x`` formed once.

    With ``u = t D^2 g / 4``: ``z = sqrt(c)|u| / D = |w| sqrt(c) |g|`` and the step
    ``v = u tanh(z)/z / D = w tanh(z)/z g`` for ``w = t D / 4``; the rest is
    :func:`expmap`'s formula. The same quantities as the two calls to ``u^nc`` (not the
    same roundings: fewer of them).

    Example:
        >>> x, g = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([1.0, -2.0], dtype=torch.float64)
        >>> y = expmap_egrad(x, g, -0.1)
        >>> bool(torch.allclose(y, expmap(x, -0.1 * egrad2rgrad(x, g)), rtol=0, atol=1e-15))
        True
    """
    return common.row_blocked(functools.partial(_expmap_egrad, t=float(t), c=c), x, g)


def _expmap_egrad(x: torch.Tensor, g: torch.Tensor, *, t: float, c: float) -> torch.Tensor:
    """:func:`expmap_egrad` in one call (blocks of rows of large plain tensors)."""
    dx = deficit(x, c=c, keepdim=True)
    w = dx * (t / 4)
    z = _scale_sqrt_c(common.norm(g, keepdim=True), c) * (dx * (abs(t) / 4))
    return _step(x, g * (w * common.tanhc(z)), dx, z, c)


def expmap0(u: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""``expmap(0, u) = tanh(sqrt(c)|u|) u / (sqrt(c)|u|)``.

    Example:
        >>> expmap0(torch.tensor([1.0, 0.0], dtype=torch.float64))  # tanh(1)
        tensor([0.7616, 0.0000], dtype=torch.float64)
        >>> x = expmap0(hm.mc([20.0, 0.0], nc=2, dtype=torch.float64))  # radius 40: 1 - |x| = 8.5e-18
        >>> f"{float(1 - x[0]):.6e}", x.approx()
        ('8.496709e-18', tensor([1., 0.], dtype=torch.float64))
    """
    return u * common.tanhc(_scale_sqrt_c(common.norm(u, keepdim=True), c))


def _log_parts(x: torch.Tensor, y: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(delta, w, theta): ``w = (-x) ⊕ y`` and ``theta = sqrt(c) d(x, y) / 2``."""
    dx, dy = deficit(x, c=c, keepdim=True), deficit(y, c=c, keepdim=True)
    delta = y - x
    rho = common.norm(delta, keepdim=True)
    q = _scale_c(rho * rho, c)
    w = (dx * delta - q * x) / (dx * dy + q)
    theta = torch.asinh(_scale_sqrt_c(rho, c) / (torch.sqrt(dx) * torch.sqrt(dy)))
    return delta, w, theta, dx, dy


def logmap(x: torch.Tensor, y: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Logarithmic map.

    .. math:: \log_x y = \frac{2}{\sqrt c\,\lambda_x}\operatorname{atanh}(\sqrt c|w|)
              \frac{w}{|w|} = D_x\,\frac{\theta}{\tanh\theta}\,w,\qquad
              w = (-x)\oplus y = \frac{D_x (y - x) - c|y - x|^2 x}{D_x D_y + c|y - x|^2}

    with ``theta = asinh(sqrt(c)|y - x| / sqrt(D_x D_y)) = sqrt(c) d(x, y) / 2`` (so no
    ``atanh`` of a number near 1). Laws: ``logmap(x, x) = 0``,
    ``norm(x, logmap(x, y)) = d(x, y)``, ``expmap(x, logmap(x, y)) = y``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> u = logmap(x, y)
        >>> bool(torch.allclose(expmap(x, u), y)), abs(float(norm(x, u) - dist(x, y))) < 1e-12
        (True, True)
    """
    return common.row_blocked(functools.partial(_logmap, c=c), x, y)


def _logmap(x: torch.Tensor, y: torch.Tensor, *, c: float) -> torch.Tensor:
    """:func:`logmap` in one call (:func:`logmap` runs it on blocks of rows of large plain tensors)."""
    _, w, theta, dx, _ = _log_parts(x, y, c)
    return w * (dx * common.x_over_tanh(theta))


def logmap0(y: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""``logmap(0, y) = atanh(sqrt(c)|y|) y / (sqrt(c)|y|)`` with ``atanh`` as ``asinh`` of
    ``sqrt(c)|y| / sqrt(D_y)``.

    Example:
        >>> logmap0(torch.tensor([0.5, 0.0], dtype=torch.float64))  # atanh(1/2)
        tensor([0.5493, 0.0000], dtype=torch.float64)
        >>> u = hm.mc([20.0, 0.0], nc=2, dtype=torch.float64)
        >>> round(float(logmap0(expmap0(u))[0]), 9)  # the point at radius 40 round-trips
        20.0
    """
    sd = torch.sqrt(deficit(y, c=c, keepdim=True))
    a = _scale_sqrt_c(common.norm(y, keepdim=True), c) / sd
    return y * (common.asinhc(a) / sd)


def transp(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Parallel transport along the geodesic from ``x`` to ``y``.

    .. math:: P_{x\to y} v = \frac{\lambda_x}{\lambda_y} R v = \frac{D_y}{D_x} R v

    with ``R`` the rotation taking the Euclidean unit tangent of the geodesic at ``x``
    (the direction of ``(-x) ⊕ y``) to the one at ``y`` (see
    :func:`common.conformal_transp`). Equal to geoopt's gyration form
    ``gyr[y, -x] v lambda_x / lambda_y`` but without its cancellation near the boundary.

    Laws: ``inner(y, P u, P v) = inner(x, u, v)``, ``P_{x->y} logmap(x, y) =
    -logmap(y, x)``, ``P_{x->x} = id``.

    Example:
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> v = torch.tensor([0.2, 0.1], dtype=torch.float64)
        >>> round(float(inner(y, transp(x, y, v), transp(x, y, v))), 9), round(float(inner(x, v, v)), 9)
        (0.355555556, 0.355555556)
        >>> bool(torch.allclose(transp(x, y, logmap(x, y)), -logmap(y, x)))
        True
    """
    dx, dy = deficit(x, c=c, keepdim=True), deficit(y, c=c, keepdim=True)
    delta = y - x
    # The unit chord d from delta scaled by a power of two to about 1 (exact): for a tiny
    # step (|y - x| = 1e-306) the tails of |delta| would be subnormal and d would keep
    # only ~58 bits.
    up, down = _power_of_two_scale(delta)
    scaled = delta * up
    rho_up = common.norm(scaled, keepdim=True)
    d = scaled * common.safe_reciprocal(rho_up)
    # ((-x) ⊕ y) / |y - x| up to a positive factor, formed from d: formed from delta,
    # D_x delta underflowed into the subnormals for tiny steps near the boundary
    # (1e-306 * 2e-12) and the direction lost ~30 bits.
    w = dx * d - _scale_c(rho_up * down, c) * x
    return common.conformal_transp(d, common.normalize(w), v, dy / dx)


def _power_of_two_scale(delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Powers of two ``(up, down = 1 / up)`` ``(*, 1)`` bringing ``max |delta_i|`` to
    ``[0.5, 1)`` (not above the reciprocal of the smallest normal, so ``up`` is finite)."""
    lead = common.lead(delta).abs().amax(dim=-1, keepdim=True)
    lowest = math.frexp(torch.finfo(lead.dtype).smallest_normal)[1]
    exponent = torch.frexp(lead).exponent.clamp_min(lowest)
    return common.pow2(-exponent, lead.dtype), common.pow2(exponent, lead.dtype)


def inner(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, *, c: float = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""``<u, v>_x = lambda_x^2 <u, v> = 4 <u, v> / D_x^2``.

    Example:
        >>> x, u = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
        >>> inner(x, u, u), inner(x[None], u[None], u[None], keepdim=True)  # 4 * 0.09 / 0.75^2
        (tensor(0.6400, dtype=torch.float64), tensor([[0.6400]], dtype=torch.float64))
    """
    dx = deficit(x, c=c, keepdim=keepdim)
    return 4 * common.dot(u, v, keepdim=keepdim) / (dx * dx)


def norm(x: torch.Tensor, u: torch.Tensor, *, c: float = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""``|u|_x = lambda_x |u| = 2 |u| / D_x``.

    Example:
        >>> norm(torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64))
        tensor(0.8000, dtype=torch.float64)
    """
    return 2 * common.norm(u, keepdim=keepdim) / deficit(x, c=c, keepdim=keepdim)


def egrad2rgrad(x: torch.Tensor, g: torch.Tensor, *, c: float = 1.0) -> torch.Tensor:
    r"""Riemannian gradient ``g / lambda_x^2 = g D_x^2 / 4``.

    Example:
        >>> egrad2rgrad(torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64))  # 0.75^2 / 4
        tensor([0.1406, 0.0000], dtype=torch.float64)
    """
    dx = deficit(x, c=c, keepdim=True)
    return g * (dx * dx / 4)


def edge_deficit(x: torch.Tensor, margin_bits: int) -> float:
    """The smallest deficit :func:`projx` keeps: ``2^margin_bits max(u^nc, s)``.

    ``s`` is the dtype's smallest subnormal, the last bit a coordinate below 1 can hold
    whatever ``nc`` (``1 - 2^8 u^nc`` rounds to 1 once ``u^nc`` is far below it:
    float16 ``nc >= 3``, float32 ``nc >= 7``, float64 ``nc >= 21``).

    Example:
        >>> edge_deficit(torch.zeros(2, dtype=torch.float64), 8) == 2.0**-45
        True
        >>> edge_deficit(hm.mc([0.0], nc=3, dtype=torch.float16), 8) == 2.0**-16  # 2^8 * 2^-24, not 2^8 * 2^-33
        True
    """
    tiny = torch.finfo(x.dtype)
    return 2.0**margin_bits * max(common.unit_roundoff(x), tiny.smallest_normal * tiny.eps)


def projx(x: torch.Tensor, *, c: float | torch.Tensor = 1.0, margin_bits: int = 8) -> torch.Tensor:
    r"""Pull points whose deficit is below half the edge value ``eps`` (:func:`edge_deficit`)
    (beyond the MC range, or outside the ball) back to the radius where ``D = eps``;
    others are unchanged, so ``projx`` is idempotent. NaN stays NaN.

    Example:
        >>> p = projx(torch.tensor([1.0, 0.0], dtype=torch.float64))  # on the boundary: pulled in to D = 2^8 u
        >>> round(float(deficit(p)) / 2.0**-45, 9), torch.equal(projx(p), p)
        (1.0, True)
        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) - hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64)
        >>> torch.equal(projx(x).components, x.components)  # inside the MC range: unchanged
        True
    """
    eps = edge_deficit(x, margin_bits)
    dx = deficit(x, c=c, keepdim=True)
    bad = common.lead(dx) < eps / 2
    if all_true(~bad):  # False while tracing: the general path, no data branch
        return x
    n = common.norm(x, keepdim=True)
    safe_n = torch.where(bad, n, torch.ones_like(n))
    target = _scale_inv_sqrt_c(torch.sqrt(torch.ones_like(n) - eps), c)
    # the unit direction first: its coordinates are at most 1, so their components keep
    # the bits the deficit needs (target / |x| of a far point is small, and in float16 or
    # at a high nc its tail fell into the subnormals: the point landed outside the ball)
    return torch.where(bad, (x / safe_n) * target, x)
