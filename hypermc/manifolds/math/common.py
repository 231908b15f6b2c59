"""Helpers shared by the manifold formulas (pure functions on Tensors and MCTensors).

Every function takes plain ``torch.Tensor`` s or :class:`~hypermc.MCTensor` s and uses
torch ops only (plus one custom autograd function, :func:`deficit`), so that autograd
produces MC gradients through them. A plain tensor behaves as ``nc = 1``.

Three kinds of helpers live here:

* vector algebra along the last dim (:func:`sqnorm`, :func:`norm`, :func:`dot`,
  :func:`normalize`);
* *removable singularities*: ``tanh(z)/z``, ``sinh(z)/z``, ``z/sinh(z)``, ``z/tanh(z)``,
  ``asinh(z)/z`` and ``(1 - exp(-z))/z`` evaluated without ``0/0`` (forward *and*
  backward) — below :func:`series_threshold` a short Taylor series is used, and the
  unselected branch of every ``torch.where`` only ever sees a harmless argument, so no
  NaN leaks into gradients;
* :func:`deficit`, ``1 - c |x|^2`` formed from the components at ``nc + 1`` components
  before one final rounding, so that it keeps its relative accuracy when ``|x|`` is
  ``u^nc``-close to the ball's boundary (the quantity that dies in float64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import torch

from ...mcf import portable, reduce
from ...mcf.eft import all_true, float_format, float_pieces, piece_count
from ...mcf.tensor import MCTensor, from_mpmath, implements, mc
from . import _plain

__all__ = [
    "nc_of",
    "lead",
    "unit_roundoff",
    "c_power",
    "scale_c",
    "tensor_c_power",
    "lift",
    "curvature_operand",
    "sqnorm",
    "norm",
    "dot",
    "normalize",
    "row_blocked",
    "row_blocks_apply",
    "safe_sqrt",
    "nowhere",
    "clamped_sqrt",
    "series_threshold",
    "tanhc",
    "sinhc",
    "x_over_sinh",
    "x_over_tanh",
    "asinhc",
    "expm1c",
    "deficit",
    "conformal_transp",
    "safe_reciprocal",
    "pow2_like",
    "exponent",
    "ldexp",
    "scaled_sqnorm",
    "pow2",
    "scaled_to_unit",
    "series_pieces",
]

#: Taylor coefficients (of z^0, z^1, ..., z^5) of the removable-singularity helpers,
#: exact (:func:`_horner` rounds them to the operand's precision). Six terms: the first
#: omitted one is ``O(z^6)``, below ``u^nc`` under :func:`series_threshold`.
_SERIES: dict[str, tuple[Fraction, ...]] = {
    name: tuple(Fraction(c) for c in coeffs)
    for name, coeffs in {
        "tanhc": ("1", "0", "-1/3", "0", "2/15", "0"),
        "sinhc": ("1", "0", "1/6", "0", "1/120", "0"),
        "x_over_sinh": ("1", "0", "-1/6", "0", "7/360", "0"),
        "x_over_tanh": ("1", "0", "1/3", "0", "-1/45", "0"),
        "asinhc": ("1", "0", "-1/6", "0", "3/40", "0"),
        "expm1c": ("1", "-1/2", "1/6", "-1/24", "1/120", "-1/720"),
    }.items()
}


def nc_of(x: torch.Tensor) -> int:
    """Number of components (1 for a plain tensor).

    Example:
        >>> nc_of(hm.mc([1.0, 2.0], nc=3)), nc_of(torch.ones(2))
        (3, 1)
    """
    return x.nc if isinstance(x, MCTensor) else 1


def lead(x: torch.Tensor) -> torch.Tensor:
    """The leading component as a plain, detached tensor (for masks and scales only).

    While ``torch.compile`` traces, an MCTensor's components are not reachable from
    Python for tensors made inside the graph, so the op ``hypermc::lead`` is used.

    Example:
        >>> x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float64) / 3
        >>> lead(x)
        tensor([0.3333, 0.6667], dtype=torch.float64)
        >>> torch.equal(lead(x), x.components[..., 0]), lead(torch.ones(2, requires_grad=True)).requires_grad
        (True, False)
    """
    if isinstance(x, MCTensor):
        if torch.compiler.is_compiling():
            return torch.ops.hypermc.lead(x)
        return x.components[..., 0]
    return x.detach()


@torch.library.custom_op("hypermc::lead", mutates_args=())
def _lead_op(x: torch.Tensor) -> torch.Tensor:
    """The leading component of ``x`` (a plain tensor is its own), as a new tensor."""
    return x.detach().clone()


@_lead_op.register_fake
def _lead_op_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _lead_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.mark_non_differentiable(output)


def _lead_backward(ctx: Any, grad: torch.Tensor) -> None:
    return None  # the output is marked non-differentiable: only masks and scales read it


# A learnable curvature reaches ``lead`` with grad (its float value scales a formula):
# the read is detached, as in eager mode.
_lead_op.register_autograd(_lead_backward, setup_context=_lead_setup)


@implements(torch.ops.hypermc.lead.default)
def _lead_mc(func: torch._ops.OpOverload, x: MCTensor) -> torch.Tensor:
    return x.components[..., 0].clone()


def unit_roundoff(x: torch.Tensor) -> float:
    """``u^nc`` of ``x`` (``u = 2^-p`` of its component dtype) as a Python float.

    Example:
        >>> unit_roundoff(torch.ones(1, dtype=torch.float32)) == 2.0**-24
        True
        >>> unit_roundoff(hm.mc([1.0], nc=2, dtype=torch.float64)) == 2.0**-106
        True
    """
    return math.ldexp(1.0, -float_format(x.dtype).p * nc_of(x))


@functools.lru_cache(maxsize=256)
def _mc_power(c: float, power: float, dtype: torch.dtype, nc: int, device: str) -> torch.Tensor:
    with mpmath.workprec(nc * 64 + 64):
        value = mpmath.power(mpmath.mpf(c), mpmath.mpf(power))
        return from_mpmath([value], nc=nc, dtype=dtype, device=device)[0]


def c_power(*, c: float | torch.Tensor, power: float, like: torch.Tensor) -> float | torch.Tensor:
    """``c**power`` as an operand for ``like`` (``c`` the curvature magnitude).

    A Python float when ``like`` is plain or the value is exact in the component dtype
    (``c = 1``, ``c = 4`` and ``power = 0.5``, ...); otherwise a 0-d MCTensor of
    ``like``'s ``nc`` computed with mpmath, so ``sqrt(c)`` keeps ``nc p`` bits. A 0-d
    tensor ``c`` (a learnable curvature: it carries gradients) gives
    :func:`tensor_c_power`.

    Example:
        >>> c_power(c=4.0, power=0.5, like=torch.ones(1)), c_power(c=2.0, power=0.5, like=torch.ones(1))
        (2.0, 1.4142135623730951)
        >>> r = c_power(c=2.0, power=0.5, like=hm.mc([1.0], nc=2, dtype=torch.float64))  # sqrt 2 to 106 bits
        >>> type(r).__name__, r.nc, abs(float(r * r - 2)) < 1e-30
        ('MCTensor', 2, True)
    """
    if isinstance(c, torch.Tensor):
        return tensor_c_power(c, power, like)
    with mpmath.workprec(256):
        value = mpmath.power(mpmath.mpf(c), mpmath.mpf(power))
    f = float(value)
    if not isinstance(like, MCTensor):
        return f
    if mpmath.mpf(f) == value and float(torch.tensor(f, dtype=like.dtype)) == f:
        return f
    return _mc_power(float(c), float(power), like.dtype, like.nc, str(like.device))


#: The powers of a tensor curvature that :func:`tensor_c_power` forms (by one operation each).
_TENSOR_POWERS = {1.0: lambda c: c, -1.0: torch.reciprocal, 0.5: torch.sqrt, -0.5: lambda c: torch.reciprocal(torch.sqrt(c))}


def tensor_c_power(c: torch.Tensor, power: float, like: torch.Tensor) -> torch.Tensor:
    """``c**power`` of a 0-d tensor curvature magnitude ``c`` (a learnable one), as an
    operand for ``like``: by torch operations, so gradients reach ``c``; in MC arithmetic
    if ``c`` is an MCTensor, and in ``like``'s dtype if ``c`` is a plain tensor of another
    dtype (a float32 parameter for float64 points, as in geoopt).

    Raises:
        TypeError: ``c`` is an MCTensor of another dtype or ``nc`` than an MC ``like``,
            or ``like`` is plain (no implicit precision change).
        ValueError: a power other than 1, -1, 1/2, -1/2.

    Example:
        >>> c = torch.tensor(4.0, requires_grad=True)
        >>> r = tensor_c_power(c, -0.5, torch.ones(1, dtype=torch.float64))
        >>> r, torch.autograd.grad(r, c)[0]
        (tensor(0.5000, dtype=torch.float64, grad_fn=<ReciprocalBackward0>), tensor(-0.0625))
    """
    fn = _TENSOR_POWERS.get(float(power))
    if fn is None:
        raise ValueError(f"tensor_c_power: power must be one of {sorted(_TENSOR_POWERS)}; got {power!r}")
    return fn(curvature_operand(c, like))


def curvature_operand(c: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A tensor curvature (a learnable one) as an operand for points ``like``: a plain
    ``c`` by :func:`lift`; an MC ``c`` as it is, for MC points of its dtype and ``nc``
    only (plain points or another format would turn the results into another format
    without a word: refused).

    Example:
        >>> k = hm.mc(torch.tensor(-0.5, dtype=torch.float64), nc=2)
        >>> curvature_operand(k, hm.mc([0.1], nc=2, dtype=torch.float64)) is k
        True
        >>> curvature_operand(k, torch.ones(1, dtype=torch.float64))
        Traceback (most recent call last):
            ...
        TypeError: curvature: an MC curvature (nc=2, torch.float64) needs MC points of the same dtype and nc; got plain torch.float64 ...
    """
    if isinstance(c, MCTensor):
        if not isinstance(like, MCTensor) or (c.dtype, c.nc) != (like.dtype, like.nc):
            seen = f"MCTensor nc={like.nc} {like.dtype}" if isinstance(like, MCTensor) else f"plain {like.dtype}"
            raise TypeError(
                f"curvature: an MC curvature (nc={c.nc}, {c.dtype}) needs MC points of the same dtype and nc; got {seen} "
                f"(make the points with hm.mc(..., nc={c.nc}) or pass nc={c.nc}, dtype={c.dtype} to origin / random)"
            )
        return c
    return lift(c, like)


def lift(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A plain tensor ``t`` in ``like``'s format: converted to its dtype, and for an MC
    ``like`` made an MCTensor of its ``nc`` exactly (``0 + t`` in MC arithmetic), with
    gradients to ``t``; an MCTensor ``t`` as it is. For a learnable curvature (a plain
    parameter) on MC points: every formula then runs in MC arithmetic.

    Example:
        >>> k = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
        >>> m = lift(k, hm.mc([1.0], nc=2, dtype=torch.float64))
        >>> type(m).__name__, m.nc, float(m.detach()) == 0.1, m.requires_grad
        ('MCTensor', 2, True, True)
    """
    if isinstance(t, MCTensor):
        return t
    if t.dtype != like.dtype:
        t = t.to(like.dtype)
    if isinstance(like, MCTensor):
        return mc(0.0, nc=like.nc, dtype=like.dtype, device=like.device) + t
    return t


def scale_c(z: torch.Tensor, *, c: float | torch.Tensor, power: float = 1.0) -> torch.Tensor:
    """``z * c**power`` (nothing to do for ``c = 1``), the constant at MC precision; a 0-d
    tensor ``c`` (learnable) by :func:`tensor_c_power`.

    Example:
        >>> scale_c(torch.tensor([3.0]), c=4.0, power=0.5), scale_c(torch.tensor([3.0]), c=4.0, power=-1.0)
        (tensor([6.]), tensor([0.7500]))
    """
    if isinstance(c, torch.Tensor):
        return z * tensor_c_power(c, power, z)
    return z if c == 1.0 else z * c_power(c=c, power=power, like=z)


def exponent(m: torch.Tensor) -> torch.Tensor:
    """Integer ``k`` with ``m 2^-k`` in ``[1/2, 1)`` for a plain ``m > 0``; 0 for 0, inf, NaN.

    Example:
        >>> exponent(torch.tensor([1.0, 0.75, 8.0, 0.0, float("inf")]))
        tensor([1, 0, 4, 0, 0], dtype=torch.int32)
    """
    if torch.compiler.is_compiling():
        return torch.ops.hypermc.exponent(m)
    return _exponent(m)


def _exponent(m: torch.Tensor) -> torch.Tensor:
    _, e = torch.frexp(m)
    return torch.where(torch.isfinite(m) & (m != 0), e, torch.zeros_like(e))


# torch.frexp as an opaque op while torch.compile traces: Inductor's vectorised CPU code
# for frexp's int32 exponents does not compile (torch 2.13: no at::vec::convert from
# VectorizedN<int32_t, 2>), so the exponent helpers are not traced into it.
@torch.library.custom_op("hypermc::exponent", mutates_args=())
def _exponent_op(m: torch.Tensor) -> torch.Tensor:
    return _exponent(m)


@_exponent_op.register_fake
def _exponent_op_fake(m: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(m, dtype=torch.int32)


@torch.library.custom_op("hypermc::pow2_like", mutates_args=())
def _pow2_like_op(x0: torch.Tensor) -> torch.Tensor:
    return _pow2_like(x0)


@_pow2_like_op.register_fake
def _pow2_like_op_fake(x0: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x0)


def _pow2_like(x0: torch.Tensor) -> torch.Tensor:
    _, e = torch.frexp(x0)
    return torch.ldexp(torch.ones_like(x0), -e)


# torch.ldexp of plain tensors as an opaque op while torch.compile traces: Inductor's CPU
# code computes it element by element through std::ldexp (not vectorised), which made the
# few per-row scalings of a compiled ball distance (25,000 rows) cost ~0.8 ms of its 5 ms
@torch.library.custom_op("hypermc::ldexp", mutates_args=())
def _ldexp_op(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.ldexp(x, k)


@_ldexp_op.register_fake
def _ldexp_op_fake(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return x.new_empty(torch.broadcast_shapes(x.shape, k.shape))


def pow2(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``2^k`` of an integer tensor ``k`` as a plain tensor of ``dtype`` (``torch.ldexp``;
    while ``torch.compile`` traces, one opaque op: see ``hypermc::ldexp``).

    Example:
        >>> pow2(torch.tensor([-2, 0, 3]), torch.float64)
        tensor([0.2500, 1.0000, 8.0000], dtype=torch.float64)
    """
    one = torch.ones(k.shape, dtype=dtype, device=k.device)
    if torch.compiler.is_compiling():
        return torch.ops.hypermc.ldexp(one, k)
    return torch.ldexp(one, k)


def ldexp(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``x * 2^k`` for an integer tensor ``k`` (broadcast; exact unless the result
    over- or underflows): on the CPU one product where every ``2^k`` is a float of
    ``x``'s dtype, else two halves so that each factor stays in range (on a GPU and while
    ``torch.compile`` traces always the halves: no host sync, no data-dependent branch).

    Example:
        >>> ldexp(torch.tensor([1.0, 3.0]), torch.tensor([-2, 1]))
        tensor([0.2500, 6.0000])
        >>> y = ldexp(torch.tensor([1e-300], dtype=torch.float64), torch.tensor([1100]))  # 2^1100 overflows
        >>> f"{float(y):.4e}"
        '1.3583e+31'
    """
    if k.device.type == "cpu" and k.numel() and not torch.compiler.is_compiling():  # (a GPU would wait for the test)
        lo, hi = torch.aminmax(k)
        least, most = _pow2_exponents(x.dtype)
        if int(lo) >= least and int(hi) <= most:  # every 2^k a float: one exact product, not two
            return x * pow2(k, x.dtype)
    h = torch.div(k, 2, rounding_mode="floor")
    return x * pow2(h, x.dtype) * pow2(k - h, x.dtype)


@functools.cache
def _pow2_exponents(dtype: torch.dtype) -> tuple[int, int]:
    """The ``k`` whose ``2^k`` is a float of ``dtype`` (subnormal or normal): ``[lo, hi]``."""
    fi = torch.finfo(dtype)
    return math.frexp(fi.tiny)[1] - float_format(dtype).p, math.frexp(fi.max)[1] - 1


def scaled_sqnorm(v: torch.Tensor, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s, k)`` with ``s = |v 2^-k|^2`` and ``k`` the exponent of ``max_i |v_i|``, so
    ``|v| = sqrt(s) 2^k`` with ``s`` in ``[1/4, n)`` (or 0): a norm without overflow or
    underflow whose square root can be merged into a later one. ``k`` is ``(*, 1)``.

    Example:
        >>> v = torch.tensor([3e200, 4e200], dtype=torch.float64)
        >>> sqnorm(v)  # overflows
        tensor(inf, dtype=torch.float64)
        >>> s, k = scaled_sqnorm(v)
        >>> f"{float(torch.sqrt(s)) * 2.0 ** int(k):.6e}"
        '5.000000e+200'
    """
    e, k = scaled_to_unit(v)
    return sqnorm(e, keepdim=keepdim), (k if keepdim else k[..., 0])


def scaled_to_unit(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(v 2^-k, k)`` with ``k`` ``(*, 1)`` the exponent of ``max_i |v_i|`` (exact
    scaling: the largest entry in ``[1/2, 1)``); :func:`scaled_sqnorm` squares it.

    Example:
        >>> e, k = scaled_to_unit(torch.tensor([3e200, 4e200], dtype=torch.float64))
        >>> int(k), bool((e.abs().max() >= 0.5) & (e.abs().max() < 1))
        (667, True)
    """
    k = exponent(lead(v).abs().amax(dim=-1, keepdim=True))
    return ldexp(v, -k), k


def pow2_like(x: torch.Tensor) -> torch.Tensor:
    """A plain tensor of powers of two ``2^-e`` with ``x * 2^-e`` in ``[1/2, 1)``.

    Built from the leading component (``frexp``), so multiplying an MCTensor by it is
    exact. Zero, inf and NaN give 1. Used to scale homogeneous formulas into range.

    Example:
        >>> pow2_like(torch.tensor([3.0, 1e-3, 0.0]))
        tensor([2.5000e-01, 5.1200e+02, 1.0000e+00])
    """
    x0 = lead(x)
    if torch.compiler.is_compiling():
        return torch.ops.hypermc.pow2_like(x0)
    return _pow2_like(x0)


# ----------------------------------------------------------------- vector algebra


def sqnorm(x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """``|x|^2`` along the last dim (MC: each square and the sum to ``u^nc``).

    Example:
        >>> sqnorm(torch.tensor([[3.0, 4.0]])), sqnorm(torch.tensor([[3.0, 4.0]]), keepdim=True)
        (tensor([25.]), tensor([[25.]]))
        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) + hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64)
        >>> float(sqnorm(x) - 1)  # 2e-20 + 1e-40; float64 would give 0
        2e-20

    MCTensors of float32/float64 with ``nc <= 3`` take :func:`reduce.sumsq` (the squares
    and their pairwise sum at ``nc + 1`` components, rounded once: one fused call per
    tensor where a backend has the row kernel); other MCTensors and plain tensors
    ``sum(x * x)``. The gradient is ``2 x``.
    """
    if isinstance(x, MCTensor) and x.dtype in (torch.float32, torch.float64) and x.nc <= reduce.PAIRWISE_MAX_NC and x.dim() > 0:
        s = torch.ops.hypermc.sqnorm(x) if torch.compiler.is_compiling() else _SqNorm.apply(x)
        return s.unsqueeze(-1) if keepdim else s
    return torch.sum(x * x, dim=-1, keepdim=keepdim)


def norm(x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """Euclidean norm along the last dim (``torch.linalg.vector_norm``).

    For MCTensors the norm is scaled, safe from overflow and underflow; for plain tensors
    it is torch's own, whose squares over- or underflow (float64: beyond ``~1e154`` and
    below ``~1e-154``): formulas that meet such coordinates use :func:`scaled_sqnorm`.

    Example:
        >>> norm(torch.tensor([[3.0, 4.0]])), norm(torch.tensor([[3.0, 4.0]]), keepdim=True)
        (tensor([5.]), tensor([[5.]]))
        >>> f"{float(norm(hm.mc([3e300, 4e300], nc=2, dtype=torch.float64))):.6e}"
        '5.000000e+300'
        >>> norm(torch.tensor([3e300, 4e300], dtype=torch.float64))
        tensor(inf, dtype=torch.float64)
    """
    return torch.linalg.vector_norm(x, dim=-1, keepdim=keepdim)


def dot(x: torch.Tensor, y: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """``<x, y>`` along the last dim.

    Example:
        >>> dot(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]))
        tensor(11.)
    """
    return torch.sum(x * y, dim=-1, keepdim=keepdim)


def _where(cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(cond, a, b)


def nowhere(cond: torch.Tensor, like: torch.Tensor) -> bool:
    """Whether ``cond`` is false everywhere, asked only where the answer is cheap and a
    ``where`` on ``like`` is not: an MCTensor on the CPU in eager mode (one host read of
    a bool instead of a ``where`` and a constant, several MC kernel calls each). False
    elsewhere (plain tensors, CUDA, ``torch.compile`` traces, ``torch.func``
    transforms), so callers keep their ``where`` path there; both paths give the same
    values and gradients.

    Example:
        >>> x = hm.mc([2.0, 3.0], nc=2, dtype=torch.float64)
        >>> nowhere(lead(x) == 0, x), nowhere(lead(x) == 2, x), nowhere(lead(x).new_zeros(2) != 0, x.approx())
        (True, False, False)
    """
    return isinstance(like, MCTensor) and like.device.type == "cpu" and all_true(~cond)


#: Bytes of the input rows of one block of :func:`row_blocked`.
ROW_BLOCK_BYTES = 1 << 21
#: Elements of the first input below which :func:`row_blocked` makes one call.
ROW_BLOCK_MIN = 1 << 21
#: Rows per block are a multiple of this: torch's vectorised elementwise loops take
#: ``2 x`` the vector width (at most 64 values) per step and round the remainder at the
#: end of a tensor with the scalar function (``std::cosh`` instead of the vectorised
#: one, which can differ in the last bit). With aligned blocks every block but the last
#: is whole steps, and the last ends on the same remainder as the whole tensor.
ROW_BLOCK_ALIGN = 64


def row_blocks_apply(*xs: torch.Tensor) -> bool:
    """Whether :func:`row_blocked` evaluates ``xs`` block by block: plain CPU tensors of
    one shape with at least two dims and :data:`ROW_BLOCK_MIN` elements, no autograd
    graph to record, outside ``torch.compile`` tracing.

    Example:
        >>> big = torch.zeros(ROW_BLOCK_MIN // 4, 4, dtype=torch.float64)
        >>> row_blocks_apply(big, big), row_blocks_apply(big[:10], big[:10]), row_blocks_apply(big, big[:1])
        (True, False, False)
    """
    x0 = xs[0]
    if torch.compiler.is_compiling():  # first: no guards on the shapes below
        return False
    if isinstance(x0, MCTensor) or x0.device.type != "cpu" or x0.dim() < 2 or x0.numel() < ROW_BLOCK_MIN:
        return False
    if any(isinstance(x, MCTensor) or x.shape != x0.shape or x.device != x0.device for x in xs):
        return False
    return not (torch.is_grad_enabled() and any(x.requires_grad for x in xs))


def row_blocked(fn: Callable[..., Any], *xs: torch.Tensor) -> Any:
    """``fn(*xs)`` for a row-wise ``fn`` (each output row depends on the same row of
    each input only), evaluated over blocks of rows where :func:`row_blocks_apply`
    holds, else in one call. ``fn`` returns a tensor or a tuple of tensors whose leading
    dims are the rows of ``xs``.

    Why: on the CPU a pass over a large tensor writes each temporary (``x - y``, its
    squares, ...) into fresh pages, and the page faults cost more than the arithmetic
    (1M 17-D float64 pairs: 95 ms for ``x - y`` alone). A block's temporaries
    (:data:`ROW_BLOCK_BYTES` of input rows) are reused by the allocator block after
    block, and stay in cache between the steps of ``fn``. Torch's row-wise kernels
    (elementwise ops, reductions over the last dim) compute each row the same way
    whatever the number of rows, given blocks of :data:`ROW_BLOCK_ALIGN` rows, so on one
    thread both evaluations give the same bits (tested). On several threads torch itself
    splits a large elementwise op at thread boundaries, each part ending on scalar
    forms, so its transcendental functions' last bits depend on the thread count, blocked
    or not.

    Example:
        >>> x = torch.rand(ROW_BLOCK_MIN // 8 + 3, 8, dtype=torch.float64)
        >>> torch.equal(row_blocked(lambda a: (a * a).sum(-1), x), (x * x).sum(-1))
        True
    """
    if not row_blocks_apply(*xs):
        return fn(*xs)
    rows, n = xs[0].shape[:-1], xs[0].shape[-1]
    flat = [x.reshape(-1, n) for x in xs]
    step = max(ROW_BLOCK_ALIGN, ROW_BLOCK_BYTES // max(1, n * xs[0].element_size()) // ROW_BLOCK_ALIGN * ROW_BLOCK_ALIGN)
    parts = [fn(*(f[s : s + step] for f in flat)) for s in range(0, flat[0].shape[0], step)]
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(list(p)).reshape(*rows, *p[0].shape[1:]) for p in zip(*parts, strict=True))
    return torch.cat(parts).reshape(*rows, *parts[0].shape[1:])


def normalize(v: torch.Tensor) -> torch.Tensor:
    """``v / |v|`` along the last dim; zero vectors give zero (forward and backward).

    Example:
        >>> normalize(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
        tensor([[0.6000, 0.8000],
                [0.0000, 0.0000]])
    """
    n = norm(v, keepdim=True)
    zero = lead(n) == 0
    safe = _where(zero, torch.ones_like(n), n)
    return _where(zero, torch.zeros_like(v), v / safe)


def safe_sqrt(a: torch.Tensor) -> torch.Tensor:
    """``sqrt(a)`` with a zero (not NaN) gradient at ``a = 0``; negative ``a`` gives NaN
    (for quantities that are ``>= 0`` for valid input, e.g. the ball distance of points
    outside the ball is NaN, of points on its boundary inf).

    Example:
        >>> a = torch.tensor([0.0, 4.0], requires_grad=True)
        >>> safe_sqrt(a).sum().backward()
        >>> a.grad  # torch.sqrt would give inf at 0
        tensor([0.0000, 0.2500])
    """
    zero = lead(a) == 0
    if nowhere(zero, a):
        return torch.sqrt(a)
    s = torch.sqrt(_where(zero, torch.ones_like(a), a))
    return _where(zero, torch.zeros_like(a), s)


def clamped_sqrt(a: torch.Tensor) -> torch.Tensor:
    """``sqrt(max(a, 0))`` with a zero gradient where ``a <= 0``: for quantities that
    are ``>= 0`` mathematically but may round slightly negative (the Minkowski square of
    the difference of two nearly equal points).

    Example:
        >>> clamped_sqrt(torch.tensor([-1e-20, 4.0]))
        tensor([0., 2.])
    """
    pos = lead(a) > 0
    s = portable.sqrt(_where(pos, a, torch.ones_like(a)))
    return _where(pos, s, torch.zeros_like(a))


# --------------------------------------------------------- removable singularities


def series_threshold(x: torch.Tensor) -> float:
    """``u^(nc/6)``: below it the six-term Taylor series are accurate to ``u^nc``.

    Example:
        >>> f"{series_threshold(torch.ones(1, dtype=torch.float64)):.4e}"  # 2^(-53/6)
        '2.1923e-03'
        >>> f"{series_threshold(hm.mc([1.0], nc=2, dtype=torch.float64)):.4e}"  # 2^(-106/6)
        '4.8062e-06'
    """
    return unit_roundoff(x) ** (1.0 / 6.0)


def _horner(z: torch.Tensor, coeffs: Sequence[tuple[float, ...]]) -> torch.Tensor:
    """``sum_k c_k z^k`` by Horner's rule for coefficients given as their
    :func:`hypermc.mcf.eft.float_pieces`: each added piece by piece, as many pieces as
    ``z``'s components hold (``-1/3`` to ``u^nc``, not to float64's ``u``)."""
    keep = piece_count(z.dtype, nc_of(z))
    out: torch.Tensor | None = None
    for c in reversed(coeffs):
        pieces = c[:keep]
        if out is None:
            out = torch.full_like(z, pieces[0]) if pieces[0] != 0 else torch.zeros_like(z)
        else:
            out = out * z
            if pieces[0] == 0:
                continue
            out = out + pieces[0]
        for p in pieces[1:]:
            out = out + p
    return out  # type: ignore[return-value]  # coeffs is never empty


def series_pieces(coeffs: Sequence[Fraction]) -> tuple[tuple[float, ...], ...]:
    """Exact coefficients as the :func:`hypermc.mcf.eft.float_pieces` :func:`_horner` takes.

    Example:
        >>> series_pieces([Fraction(1), Fraction(-1, 2)])
        ((1.0,), (-0.5,))
    """
    return tuple(float_pieces(c) for c in coeffs)


def _regular(name: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    coeffs = series_pieces(_SERIES[name])
    # an even function with value 1 at 0 (all but expm1c): where every small argument is an
    # exact zero (the rows an optimizer step leaves alone), the series is its constant term
    even_one = _SERIES[name][0] == 1 and all(c == 0 for c in _SERIES[name][1::2])

    def helper(z: torch.Tensor) -> torch.Tensor:
        small = lead(z).abs() < series_threshold(z)
        if all_true(~small):  # False while tracing: the general path, no data branch
            return fn(z)
        z_big = _where(small, torch.ones_like(z), z)
        if even_one and all_true(~small | (lead(z) == 0)):
            return _where(small, torch.ones_like(z), fn(z_big))  # the series' value (1) and derivative (0) at 0
        z_small = _where(small, z, torch.zeros_like(z))
        return _where(small, _horner(z_small, coeffs), fn(z_big))

    helper.__name__ = name
    return helper


tanhc = _regular("tanhc", lambda z: portable.tanh(z) / z)
tanhc.__doc__ = """``tanh(z) / z`` (1 at 0), forward and backward free of ``0/0``.

Example:
    >>> z = torch.tensor([0.0, 2.0], dtype=torch.float64, requires_grad=True)
    >>> y = tanhc(z)
    >>> [round(v, 6) for v in y.tolist()]
    [1.0, 0.482014]
    >>> y.sum().backward()
    >>> z.grad[0].item()  # the derivative at 0, not NaN
    0.0
"""
sinhc = _regular("sinhc", lambda z: torch.sinh(z) / z)
sinhc.__doc__ = """``sinh(z) / z`` (1 at 0), forward and backward free of ``0/0``.

Example:
    >>> [round(v, 6) for v in sinhc(torch.tensor([0.0, 1e-9, 2.0], dtype=torch.float64)).tolist()]
    [1.0, 1.0, 1.81343]
"""
x_over_sinh = _regular("x_over_sinh", lambda z: z / torch.sinh(z))
x_over_sinh.__doc__ = """``z / sinh(z)`` (1 at 0; 0 where ``sinh`` overflows).

Example:
    >>> x_over_sinh(torch.tensor([0.0, 1000.0], dtype=torch.float64))
    tensor([1., 0.], dtype=torch.float64)
"""
x_over_tanh = _regular("x_over_tanh", lambda z: z / torch.tanh(z))
x_over_tanh.__doc__ = """``z / tanh(z)`` (1 at 0), forward and backward free of ``0/0``.

Example:
    >>> [round(v, 6) for v in x_over_tanh(torch.tensor([0.0, 2.0], dtype=torch.float64)).tolist()]
    [1.0, 2.074629]
"""
asinhc = _regular("asinhc", lambda z: torch.asinh(z) / z)
asinhc.__doc__ = """``asinh(z) / z`` (1 at 0), forward and backward free of ``0/0``.

Example:
    >>> z = hm.mc([0.0, 1e-3], nc=2, dtype=torch.float64)
    >>> y = asinhc(z)  # 1 - z^2/6 + 3 z^4/40 - ...
    >>> float(y[0]), f"{float(1 - y[1]):.12e}"
    (1.0, '1.666665916667e-07')
"""
expm1c = _regular("expm1c", lambda z: -torch.expm1(-z) / z)
expm1c.__doc__ = """``(1 - exp(-z)) / z`` (1 at 0), forward and backward free of ``0/0``.

Example:
    >>> [round(v, 6) for v in expm1c(torch.tensor([0.0, 1.0], dtype=torch.float64)).tolist()]
    [1.0, 0.632121]
"""


# ------------------------------------------------------------------- the deficit


def _deficit_components(x: torch.Tensor, c: float) -> torch.Tensor:
    """``1 - c |x|^2`` of a component tensor ``(*, n, nc)`` -> ``(*, nc)``:
    :func:`reduce.one_minus_sumsq` (formed at ``nc + 1`` components, rounded once; its
    bound), and for plain points (``nc = 1``) the compensated row pass of :mod:`._plain`.
    """
    nc = x.shape[-1]
    if nc == 1:  # plain points: the compensated row pass of ._plain (same accuracy, one pass)
        return _plain.deficit(x[..., 0], c).unsqueeze(-1)
    return reduce.one_minus_sumsq(x, c)


class _Deficit(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, c: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.c = c
        if isinstance(x, MCTensor):
            return MCTensor(_deficit_components(x.components.detach(), c))
        return _deficit_components(x.detach().unsqueeze(-1), c)[..., 0]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        return x * (grad.unsqueeze(-1) * (-2.0 * ctx.c)), None


@torch.library.custom_op("hypermc::deficit", mutates_args=())
def _deficit_op(x: torch.Tensor, c: float) -> torch.Tensor:
    """``1 - c |x|^2`` as one op (used while ``torch.compile`` traces, where the
    autograd.Function ``_Deficit`` cannot reach the components of graph-made
    MCTensors). Plain tensors here; MCTensors through their dispatch table."""
    return _deficit_components(x.detach().unsqueeze(-1), c)[..., 0].contiguous()


@_deficit_op.register_fake
def _deficit_op_fake(x: torch.Tensor, c: float) -> torch.Tensor:
    return x.new_empty(x.shape[:-1])


def _deficit_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, c = inputs
    ctx.save_for_backward(x)
    ctx.c = c


def _deficit_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    (x,) = ctx.saved_tensors
    return x * (grad.unsqueeze(-1) * (-2.0 * ctx.c)), None


_deficit_op.register_autograd(_deficit_backward, setup_context=_deficit_setup)


@implements(torch.ops.hypermc.deficit.default)
def _deficit_mc(func: torch._ops.OpOverload, x: MCTensor, c: float) -> MCTensor:
    return MCTensor(_deficit_components(x.components, c))


@torch.library.custom_op("hypermc::deficit_at", mutates_args=())
def _deficit_at_op(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``1 - c |x|^2`` for a 0-d plain tensor ``c`` (a learnable curvature's leading
    component) while ``torch.compile`` traces: the value of ``c`` is read here, at run
    time, so the graph neither breaks nor specialises on it. The same bits as
    ``hypermc::deficit`` at ``float(c)``; no gradient reaches ``c`` (the caller adds the
    curvature's term)."""
    return _deficit_op(x, float(c))


@_deficit_at_op.register_fake
def _deficit_at_op_fake(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1])


def _deficit_at_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, c = inputs
    ctx.save_for_backward(x, c)


def _deficit_at_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    x, c = ctx.saved_tensors
    return x * (grad.unsqueeze(-1) * (-2.0 * c)), None


_deficit_at_op.register_autograd(_deficit_at_backward, setup_context=_deficit_at_setup)


@implements(torch.ops.hypermc.deficit_at.default)
def _deficit_at_mc(func: torch._ops.OpOverload, x: MCTensor, c: torch.Tensor) -> MCTensor:
    return MCTensor(_deficit_components(x.components, float(c)))


class _SqNorm(torch.autograd.Function):
    """:func:`sqnorm` of an MCTensor by :func:`reduce.sumsq` (eager)."""

    @staticmethod
    def forward(ctx: Any, x: MCTensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return MCTensor(reduce.sumsq(x.components.detach(), dim=-1))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return x * (grad.unsqueeze(-1) * 2.0)


@torch.library.custom_op("hypermc::sqnorm", mutates_args=())
def _sqnorm_op(x: torch.Tensor) -> torch.Tensor:
    """:func:`sqnorm` as one op while ``torch.compile`` traces (MCTensors through their
    dispatch table, like ``hypermc::deficit``; a plain tensor's is ``sum(x * x)``)."""
    return torch.sum(x.detach() * x.detach(), dim=-1)


@_sqnorm_op.register_fake
def _sqnorm_op_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1])


def _sqnorm_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)


def _sqnorm_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    return x * (grad.unsqueeze(-1) * 2.0)


_sqnorm_op.register_autograd(_sqnorm_backward, setup_context=_sqnorm_setup)


@implements(torch.ops.hypermc.sqnorm.default)
def _sqnorm_mc(func: torch._ops.OpOverload, x: MCTensor) -> MCTensor:
    return MCTensor(reduce.sumsq(x.components, dim=-1))


def deficit(x: torch.Tensor, *, c: float | torch.Tensor = 1.0, keepdim: bool = False) -> torch.Tensor:
    """``1 - c |x|^2`` along the last dim, formed from the components at ``nc + 1``.

    .. math:: D_c(x) = 1 - c\\,\\lVert x\\rVert^2

    Rounded once to ``nc`` components at the end, so the relative error is about
    ``u^nc + 3 u^(nc+1) / D`` — for a point of the Poincaré ball at hyperbolic radius
    ``r`` (``D ~ 4 e^-r``) this stays below ``u^nc`` far beyond the radius where the
    plain ``1 - c * sum(x * x)`` (error ``u^nc / D``) has lost every digit. The gradient
    is ``-2 c x`` (in MC arithmetic).

    Args:
        x: points ``(*, n)``, Tensor or MCTensor.
        c: ``-K > 0``: a Python float, or (while ``torch.compile`` traces a learnable
            curvature) a detached 0-d plain tensor, read when the graph runs; no gradient
            reaches a tensor ``c``.
        keepdim: keep the reduced dim.

    Example:
        A ball point ``1e-20`` inside the boundary (hyperbolic radius 46.7): float64
        rounds it onto the boundary, the MC deficit is ``2e-20 - 1e-40``:

        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) - hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64)
        >>> float(deficit(x)), deficit(x.approx())
        (2e-20, tensor(0., dtype=torch.float64))
        >>> deficit(torch.tensor([[0.25, 0.0]]), c=4.0, keepdim=True)
        tensor([[0.7500]])
    """
    if isinstance(c, torch.Tensor):  # traced with a curvature tensor: read at run time
        d = torch.ops.hypermc.deficit_at(x, c)
    elif torch.compiler.is_compiling():
        d = torch.ops.hypermc.deficit(x, float(c))
    elif not isinstance(x, MCTensor) and not (x.requires_grad and torch.is_grad_enabled()):
        d = _plain.deficit(x, float(c))  # nothing to differentiate: no autograd.Function
    else:
        d = _Deficit.apply(x, float(c))
    return d.unsqueeze(-1) if keepdim else d


# ---------------------------------------------------- transport in conformal models


def safe_reciprocal(a: torch.Tensor) -> torch.Tensor:
    """``1 / a`` where ``a != 0`` and 0 where ``a == 0`` (forward and backward).

    Example:
        >>> safe_reciprocal(torch.tensor([0.0, 4.0]))
        tensor([0.0000, 0.2500])
    """
    zero = lead(a) == 0
    r = 1 / _where(zero, torch.ones_like(a), a)
    return _where(zero, torch.zeros_like(a), r)


def conformal_transp(d: torch.Tensor, e_x: torch.Tensor, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    r"""Parallel transport in a conformal model (Poincaré ball or halfspace).

    Geodesics there are circular arcs (or lines); the Euclidean unit tangents ``e_x``
    at the start and ``e_y`` at the end make equal angles with the chord ``y - x``, so
    ``e_y = 2 <d, e_x> d - e_x`` with ``d = (y - x) / |y - x|``. Parallel transport
    keeps hyperbolic angles with the geodesic and hyperbolic lengths, and fixes the
    directions normal to the geodesic's totally geodesic 2-plane (reflection symmetry),
    so

    .. math:: P v = \frac{\lambda_x}{\lambda_y} R v,\qquad
              R v = v - 2\langle d, v\rangle d + 2\langle e_x, v\rangle e_y,

    ``R`` the rotation in ``span(e_x, e_y)`` taking ``e_x`` to ``e_y`` (written as two
    reflections; no ``1 + <e_x, e_y>`` denominator, so nothing blows up when the
    tangent turns by almost ``pi``). ``d = e_x = 0`` (``x = y``) gives ``R = id``.

    Args:
        d: unit chord direction ``(y - x) / |y - x|`` (or 0), ``(*, n)``.
        e_x: unit initial direction of the geodesic from x to y (or 0), ``(*, n)``.
        v: tangent vectors at x ``(*, n)``.
        scale: ``lambda_x / lambda_y`` ``(*, 1)``.

    Example:
        A geodesic that leaves ``x`` straight up (``e_x = (0, 0, 1)``) along the chord
        ``d = (1, 0, 0)`` arrives going straight down (``e_y = -e_x``): ``R`` turns the
        plane ``span(d, e_x)`` by ``pi`` and keeps the normal ``(0, 1, 0)``:

        >>> d, e_x = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 1.0])
        >>> conformal_transp(d, e_x, torch.eye(3), torch.tensor([1.0]))
        tensor([[-1.,  0.,  0.],
                [ 0.,  1.,  0.],
                [ 0.,  0., -1.]])
    """
    dv = dot(d, v, keepdim=True)
    ev = dot(e_x, v, keepdim=True)
    de = dot(d, e_x, keepdim=True)
    rv = v - 2 * dv * d + 2 * ev * (2 * de * d - e_x)
    return rv * scale
