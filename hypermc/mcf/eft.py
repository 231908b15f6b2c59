"""Error-free transformations (EFTs) on plain tensors.

Every function here takes ordinary tensors of one floating dtype and returns tensors of
the same dtype such that the mathematical identity stated in its docstring holds
*exactly* (no rounding error), under the stated preconditions. They are the only place
where hypermc relies on the details of IEEE-754 rounding; everything in ``arith.py``,
``elementary.py``, ``reduce.py`` and ``matmul.py`` is built from them.

Precision of the component dtypes (``p`` = significand bits, ``u = 2**-p``):

========  ==  =========  ===========================  ============================
dtype     p   u          split constant ``2**s + 1``  split rescales above
========  ==  =========  ===========================  ============================
float16   11  2**-11     2**6 + 1                     2**9   (65504 / 65 ≈ 1008)
bfloat16  8   2**-8      2**4 + 1                     2**120
float32   24  2**-24     2**12 + 1                    2**114
float64   53  2**-53     2**27 + 1                    2**996
========  ==  =========  ===========================  ============================

References:
    Knuth, TAOCP vol. 2 (TwoSum); Dekker 1971 (FastTwoSum, TwoProd); Veltkamp (split);
    Priest 1991 and Joldes, Muller, Popescu, "Tight and rigorous error bounds for basic
    building blocks of double-word arithmetic", ACM TOMS 2017; Boldo, Joldes, Muller,
    Popescu, "Formal verification of a floating-point expansion renormalization
    algorithm", ITP 2017 (renormalize).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import NamedTuple, cast

import numpy as np
import torch
from torch._guards import TracingContext, detect_fake_mode
from torch._subclasses.fake_tensor import is_fake
from torch.utils._python_dispatch import _disable_current_modes

__all__ = [
    "FloatFormat",
    "float_format",
    "max_nc",
    "two_sum",
    "fast_two_sum",
    "split",
    "two_prod",
    "two_prod_dekker",
    "has_fused_addcmul",
    "fused_addcmul",
    "fused_addcmul_",
    "sqrt_rn",
    "float_pieces",
    "piece_count",
    "pow2",
    "renormalize",
    "renormalize_finite",
    "pack",
    "unpack",
    "select",
    "planes",
    "take",
]


class FloatFormat(NamedTuple):
    """Constants of one component dtype used by the EFTs.

    Attributes:
        p: significand bits including the hidden bit; ``u = 2**-p``.
        split_shift: ``s`` of the Veltkamp split constant ``2**s + 1``, ``s = ceil(p/2)``,
            so both halves of a split fit in ``p - s`` and ``s`` bits and every product of
            halves is exact.
        split_threshold: above this magnitude ``(2**s + 1) * x`` could overflow, so
            :func:`split` scales the input down by ``2**-(s+1)`` first (exact) and back
            up afterwards.
        wider: a dtype whose significand holds the exact product of two values of this
            dtype (``2p`` bits) and whose exponent range covers it, or ``None``.

    Example:
        >>> fmt = float_format(torch.float32)
        >>> fmt.p, fmt.split_shift, fmt.split_threshold == 2.0**114, fmt.wider
        (24, 12, True, torch.float64)
    """

    p: int
    split_shift: int
    split_threshold: float
    wider: torch.dtype | None


_FORMATS = {
    torch.float16: FloatFormat(11, 6, 2.0**9, torch.float32),
    torch.bfloat16: FloatFormat(8, 4, 2.0**120, torch.float32),
    torch.float32: FloatFormat(24, 12, 2.0**114, torch.float64),
    torch.float64: FloatFormat(53, 27, 2.0**996, None),
}


def float_format(dtype: torch.dtype) -> FloatFormat:
    """Return the :class:`FloatFormat` of a component dtype.

    Raises:
        TypeError: if ``dtype`` is not float16, bfloat16, float32 or float64.

    Example:
        >>> float_format(torch.float64)
        FloatFormat(p=53, split_shift=27, split_threshold=6.69...e+299, wider=None)
    """
    try:
        return _FORMATS[dtype]
    except KeyError:
        raise TypeError(f"component dtype must be one of float16, bfloat16, float32, float64; got {dtype}") from None


def max_nc(dtype: torch.dtype) -> int:
    """The most components a normalised expansion of ``dtype`` can hold non-zero.

    Each component's leading bit lies at least ``p`` bits below the previous one's
    (``|c_{i+1}| <= ulp(c_i) / 2``), the first at most at the exponent of the largest
    finite value ``2^emax``, and a non-zero component is at least the smallest subnormal
    ``2^emin_sub``; so ``nc <= floor((emax - emin_sub) / p) + 1``: float16 4, bfloat16 33,
    float32 12, float64 40. Beyond it the extra components can only be zero. (Most
    values have fewer usable components: near 1, ``floor(-emin_sub / p) + 1``, i.e.
    float16 3, float32 7, float64 21.)

    Raises:
        TypeError: if ``dtype`` is not float16, bfloat16, float32 or float64.

    Example:
        >>> [max_nc(d) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)]
        [4, 33, 12, 40]
    """
    p = float_format(dtype).p
    info = torch.finfo(dtype)
    emax = math.frexp(info.max)[1] - 1  # info.max = (2 - 2^(1-p)) 2^emax
    emin_sub = math.frexp(info.smallest_normal * info.eps)[1] - 1  # the smallest subnormal is 2^emin_sub
    return (emax - emin_sub) // p + 1


def two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and ``e`` with ``s + e == a + b`` exactly.

    Six flops, no branch, no precondition on the order of magnitudes. Exact in
    round-to-nearest including gradual underflow; if ``a + b`` overflows, ``s`` is inf
    and ``e`` is NaN.

    Precondition:
        ``a``, ``b`` finite and the intermediate ``s - a`` finite, which holds when
        ``|a|, |b| < 2^emax`` (below the top binade). With ``b`` in the top binade
        ``s - a`` can round to ±inf and ``e`` is NaN although ``a + b`` is finite
        (float16 ``two_sum(17200, -65504)``; ``two_sum(b, a)`` is exact): tested in
        ``test_two_sum_with_max_operand_is_outside_the_precondition``.

    Args:
        a, b: tensors of one floating dtype (broadcastable).

    Returns:
        ``(s, e)`` with ``|e| <= ulp(s) / 2``.

    Example:
        >>> s, e = two_sum(torch.tensor(0.1, dtype=torch.float64), torch.tensor(0.2, dtype=torch.float64))
        >>> s.item(), e.item()  # 0.1 + 0.2 rounds up; e is what was lost
        (0.30000000000000004, -2.7755575615628914e-17)
    """
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fast_two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dekker's FastTwoSum: ``s = fl(a + b)``, ``e = (a + b) - s`` exactly.

    Precondition:
        ``exponent(a) >= exponent(b)`` (implied by ``|a| >= |b|``) or ``a == 0``.
        If it is broken the result is silently inexact — callers must guarantee it.

    Returns:
        ``(s, e)`` with ``s + e == a + b`` and ``|e| <= ulp(s) / 2``.

    Example:
        >>> s, e = fast_two_sum(torch.tensor(1.0, dtype=torch.float64), torch.tensor(1e-20, dtype=torch.float64))
        >>> s.item(), e.item()
        (1.0, 1e-20)
    """
    s = a + b
    e = b - (s - a)
    return s, e


def split(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Veltkamp's split: ``a == hi + lo`` exactly, each half fits in about ``p/2`` bits.

    ``hi`` has at most ``p - s`` significant bits and ``lo`` at most ``s`` bits (with the
    sign trick), so products of halves of two numbers are exact in the same dtype.
    Inputs above the dtype's ``split_threshold`` are scaled down by a power of two
    before splitting (exact) so ``(2**s + 1) * a`` cannot overflow.

    Precondition:
        ``a`` finite and ``|a| < (2 - 2^-(p-s)) 2^emax``: in the last ``2^(p-s)`` values
        below the overflow threshold (``finfo.max`` included) ``hi`` rounds up to
        ``2^(emax+1)`` = ±inf (tested in ``test_split_near_overflow_holds_up_to_the_documented_threshold``). Subnormal
        inputs split exactly.

    Returns:
        ``(hi, lo)`` with ``hi + lo == a``.

    Example:
        >>> a = torch.tensor(0.1, dtype=torch.float64)
        >>> hi, lo = split(a)
        >>> hi.item().hex(), lo.item().hex(), bool(hi + lo == a)  # 26 and 25 significant bits
        ('0x1.9999998000000p-4', '0x1.99999a0000000p-32', True)
    """
    fmt = float_format(a.dtype)
    factor = float(2**fmt.split_shift + 1)
    big = a.abs() > fmt.split_threshold
    down = 2.0 ** -(fmt.split_shift + 1)
    scaled = torch.where(big, a * down, a)
    c = scaled * factor
    hi = c - (c - scaled)
    lo = scaled - hi
    up = 2.0 ** (fmt.split_shift + 1)
    hi = torch.where(big, hi * up, hi)
    lo = torch.where(big, lo * up, lo)
    return hi, lo


def two_prod_dekker(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dekker's TwoProduct with Veltkamp splitting (17 flops).

    Returns:
        ``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly.

    Precondition:
        the error term does not underflow: ``exponent(a) + exponent(b) >= emin + p - 1``
        (for float16: ``e_a + e_b >= -4``); otherwise ``e`` is rounded. ``a * b`` finite,
        ``a`` and ``b`` within :func:`split`'s range, and the product of the high halves
        ``ah * bh`` finite: otherwise ``e`` is NaN or ±inf although ``a * b`` is finite (top-binade
        operands; float64 ``a = b = (2 - 2^-52) 2^511``): tested in
        ``test_two_prod_dekker_near_overflow_is_outside_the_precondition``.

    Example:
        >>> a = torch.tensor(1 + 2**-30, dtype=torch.float64)  # a * a = 1 + 2^-29 + 2^-60
        >>> p, e = two_prod_dekker(a, a)
        >>> p.item() == 1 + 2**-29, e.item() == 2**-60
        (True, True)
    """
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


# c + value a b (value = +-1) with one rounding on CUDA: jiterator (NVRTC) with the
# explicit round-to-nearest FMA intrinsic, which the compiler cannot split or reorder.
_CUDA_ADDCMUL = r"""
__device__ inline float hypermc_fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ inline double hypermc_fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
template <typename T> __device__ T hypermc_addcmul(T c, T a, T b, double value) { return hypermc_fma_rn(value < 0 ? -a : a, b, c); }
"""


def _cuda_fma(*ts: torch.Tensor) -> bool:
    """Whether :func:`fused_addcmul` takes its jiterator kernel for these tensors."""
    t = ts[0]
    if t.device.type != "cuda" or t.dtype not in (torch.float32, torch.float64) or t.numel() == 0 or is_traced(t):
        return False
    if not hasattr(torch._C, "_cuda_jiterator_compile_and_launch_kernel"):
        return False
    if torch.is_grad_enabled() and any(x.requires_grad for x in ts):
        raise RuntimeError(
            "fused_addcmul: the CUDA fused multiply-add has no autograd formula; the MC kernels run on "
            "component tensors that do not require grad (MCTensor autograd runs above them)"
        )
    return True


def fused_addcmul(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, value: float = 1.0) -> torch.Tensor:
    """``c + value * a * b`` for ``value = ±1``, rounded once where :func:`has_fused_addcmul`.

    ``torch.addcmul``, except on CUDA float32/float64, whose ``addcmul`` kernel rounds the
    product (measured: not fused on an H200 with torch 2.11); there a jiterator kernel
    computes ``__fma_rn(±a, b, c)`` (compiled once per process by NVRTC).

    Example:
        >>> a = torch.tensor([1 + 2**-30], dtype=torch.float64)
        >>> fused_addcmul(-(a * a), a, a).item() == 2**-60  # the exact error of a * a
        True
    """
    if value not in (1.0, -1.0):
        raise ValueError(f"fused_addcmul: value must be 1 or -1; got {value!r}")
    if _cuda_fma(c, a, b):
        out = torch._C._cuda_jiterator_compile_and_launch_kernel(
            _CUDA_ADDCMUL, "hypermc_addcmul", False, 1, (c, a, b), {"value": float(value)}
        )
        return out[0] if isinstance(out, (tuple, list)) else out
    return torch.addcmul(c, a, b, value=value)


def fused_addcmul_(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, value: float = 1.0) -> torch.Tensor:
    """In-place :func:`fused_addcmul` (``c.addcmul_(a, b, value=value)``); returns ``c``.

    Example:
        >>> c = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> fused_addcmul_(c, c, c, value=-1).tolist()  # c - c * c
        [0.0, -2.0]
    """
    if _cuda_fma(c, a, b):
        return c.copy_(fused_addcmul(c, a, b, value=value))
    return c.addcmul_(a, b, value=value)


def has_fused_addcmul(device_type: str, dtype: torch.dtype) -> bool:
    """Probe once per (device type, dtype) whether :func:`fused_addcmul` is a fused
    multiply-add (on the CPU: whether ``torch.addcmul(c, a, b)`` is; on CUDA: the
    jiterator kernel, where the torch build has jiterator).

    The probe runs on real tensors even when called while ``torch.compile`` traces an
    MC op (all dispatch modes, fake-tensor mode included, are suspended for it), so the
    answer never depends on tracing and no graph break or data-dependent guard occurs.
    CPU float32/float64 are probed at import of this module.

    A fused multiply-add computes ``c + a * b`` with one rounding; then
    ``addcmul(-p, a, b)`` is the exact error of ``p = fl(a * b)``. PyTorch does not
    promise fusion (it comes from compiler contraction in the build), so it is measured:
    a batch of products whose error terms are known exactly (via Dekker) must be
    reproduced bit for bit by every form the kernels use: ``addcmul(-p, a, b)``,
    ``addcmul(p, a, b, value=-1)`` (the negated error) and the in-place ``addcmul_``, on
    a length with a scalar tail after the vectorised part, on strided operands and with
    a broadcast operand.

    While ``torch.compile`` traces (see :func:`tracing`) the answer is ``False``:
    compilers lower ``addcmul`` to a separate multiply and add (Inductor's C++ code is
    built with ``-ffp-contract=off``), so the error term would be rounded. The kernels
    then use Dekker's product or the wider-dtype product, in which every product is
    exact, so they stay error-free whether or not a backend contracts ``a * b + c``.

    Example:
        >>> isinstance(has_fused_addcmul("cpu", torch.float64), bool)  # the value depends on the build
        True
    """
    if tracing():
        return False
    return _probe_fused_addcmul(device_type, dtype)


@functools.cache
def _probe_fused_addcmul(device_type: str, dtype: torch.dtype) -> bool:
    with _disable_current_modes(), torch._C._DisableTorchDispatch():
        return _measure_fused_addcmul(device_type, dtype)


def _measure_fused_addcmul(device_type: str, dtype: torch.dtype) -> bool:
    gen = torch.Generator().manual_seed(20261121)
    n = 4096 + 7  # a vectorised body and a scalar tail
    a = torch.rand(n, generator=gen, dtype=torch.float64) + 0.5
    b = torch.rand(n, generator=gen, dtype=torch.float64) + 0.5
    a = a.to(dtype=dtype, device=device_type)
    b = b.to(dtype=dtype, device=device_type)
    p = a * b
    _, e_ref = two_prod_dekker(a, b)
    if not bool((e_ref != 0).any()):
        return False
    wide = torch.stack([a, b], -1)  # strided views of the same values
    forms = [
        fused_addcmul(-p, a, b),
        -fused_addcmul(p, a, b, value=-1),
        fused_addcmul_(-p, a, b),
        fused_addcmul(-p, wide[..., 0], wide[..., 1]),
    ]
    ok = all(bool(torch.equal(e, e_ref)) for e in forms)
    # a broadcast operand (one column against many rows)
    p0 = a[:1] * b
    _, e0 = two_prod_dekker(a[:1].expand(n), b)
    return ok and bool(torch.equal(fused_addcmul(p0, a[:1], b, value=-1), -e0))


def two_prod(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TwoProduct: ``p = fl(a * b)`` and ``e`` with ``p + e == a * b`` exactly.

    Path chosen per device and dtype:

    * float16 / bfloat16 / float32: the exact product is formed in the wider dtype
      (``2p`` bits fit: 22 and 16 bits in float32, 48 bits in float64), ``e = wide - p``
      is exact there and is representable in the component dtype.
    * float64: ``torch.addcmul(-p, a, b)`` when :func:`has_fused_addcmul` measured a
      true FMA on this device, Dekker's algorithm otherwise.

    Precondition:
        ``a * b`` finite and its error term not below the subnormal range of the
        dtype; otherwise ``e`` is rounded. On the Dekker path (float64 without a measured
        FMA) also the overflow conditions of :func:`two_prod_dekker` (``e`` can be NaN
        for finite products of top-binade operands); the wide-dtype and FMA paths give a
        NaN ``e`` only when ``p`` overflows.

    Example:
        >>> a = torch.tensor([1 + 2**-30, 3.0], dtype=torch.float64)
        >>> p, e = two_prod(a, a)
        >>> p.tolist() == [1 + 2**-29, 9.0], e.tolist() == [2**-60, 0.0]
        (True, True)
    """
    fmt = float_format(a.dtype)
    if fmt.wider is not None:
        wide = a.to(fmt.wider) * b.to(fmt.wider)
        p = wide.to(a.dtype)
        e = (wide - p.to(fmt.wider)).to(a.dtype)
        return p, e
    if has_fused_addcmul(a.device.type, a.dtype):
        p = a * b
        return p, fused_addcmul(-p, a, b)
    return two_prod_dekker(a, b)


def pack(components: list[torch.Tensor]) -> torch.Tensor:
    """Stack a list of ``nc`` equally shaped tensors into a component tensor.

    The result has shape ``(*shape, nc)`` and is a view of a *planar* buffer
    ``(nc, *shape)``, so ``unpack`` hands contiguous per-component tensors to the next
    kernel (elementwise kernels on strided slices are measurably slower).

    Example:
        >>> x = pack([torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([1e-20, 0.0], dtype=torch.float64)])
        >>> x.shape, x.tolist()
        (torch.Size([2, 2]), [[1.0, 1e-20], [2.0, 0.0]])
    """
    return torch.stack(components, dim=0).movedim(0, -1)


def unpack(x: torch.Tensor) -> list[torch.Tensor]:
    """Split a component tensor ``(*shape, nc)`` into its ``nc`` components.

    Example:
        >>> [c.tolist() for c in unpack(torch.tensor([[1.0, 0.5], [2.0, 0.25]]))]
        [[1.0, 2.0], [0.5, 0.25]]
    """
    return list(x.unbind(-1))


@functools.cache
def _sorting_network(m: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd-even merge sort network for ``m`` wires (pairs ``(i, j)``, ``i < j``)."""
    pairs = []
    n = 1
    while n < m:
        n *= 2
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    a, b = i + j, i + j + k
                    if a // (2 * p) == b // (2 * p) and b < m:
                        pairs.append((a, b))
            k //= 2
        p *= 2
    return tuple(pairs)


def sort_by_magnitude(t: list[torch.Tensor]) -> list[torch.Tensor]:
    """Sort terms elementwise by non-increasing magnitude with a sorting network.

    Branch-free (compare-exchange with ``torch.where``), ``O(m log^2 m)`` elementwise
    ops; much faster than ``torch.sort`` along a short last dimension. NaNs compare as
    not smaller, so they stay where they are relative to the others.
    """
    t = list(t)
    mag = [x.abs() for x in t]
    for i, j in _sorting_network(len(t)):
        swap = mag[i] < mag[j]
        t[i], t[j] = torch.where(swap, t[j], t[i]), torch.where(swap, t[i], t[j])
        mag[i], mag[j] = torch.where(swap, mag[j], mag[i]), torch.where(swap, mag[i], mag[j])
    return t


@functools.cache
def _merge_network(h: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd-even merge of wires ``[0, h)`` and ``[h, 2h)`` (``h`` a power of 2),
    each already sorted: the last stage of :func:`_sorting_network` for ``2h`` wires."""
    pairs = []
    k = h
    while k >= 1:
        for j in range(k % h, 2 * h - k, 2 * k):
            for i in range(min(k, 2 * h - j - k)):
                a, b = i + j, i + j + k
                if a // (2 * h) == b // (2 * h):
                    pairs.append((a, b))
        k //= 2
    return tuple(pairs)


def merge_by_magnitude(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """Merge two lists of finite terms, each ordered by non-increasing magnitude, into one.

    Batcher's odd-even merge network with arithmetic selects (as
    :func:`_sort_by_magnitude_finite`): lists shorter than a power of two are padded with
    absent wires that compare below everything, so their compare-exchanges are resolved
    when the network is built and cost nothing. ``O(n log n)`` compare-exchanges instead of
    the ``O(n log^2 n)`` of a sort. Zero terms may lose their sign. Precondition: ``a`` and ``b`` ordered by magnitude (a
    normalised expansion is), all terms of one shape; terms whose selects overflow
    (``|b - a|`` not finite) may turn to NaN, which callers detect.
    """
    h = 1
    while h < max(len(a), len(b)):
        h *= 2
    wires: list[torch.Tensor | None] = list(a) + [None] * (h - len(a)) + list(b) + [None] * (h - len(b))
    mag: list[torch.Tensor | None] = [None if t is None else t.abs() for t in wires]
    for i, j in _merge_network(h):
        wi, wj = wires[i], wires[j]
        if wj is None:
            continue
        if wi is None:  # absent compares below everything: a fixed swap
            wires[i], wires[j], mag[i], mag[j] = wj, None, mag[j], None
            continue
        # mag[k] is None exactly where wires[k] is
        mi, mj = cast(torch.Tensor, mag[i]), cast(torch.Tensor, mag[j])
        swap = _mask(torch.lt, mi, mj, wi)
        wires[i], wires[j] = torch.lerp(wi, wj, swap), torch.lerp(wj, wi, swap)
        mag[i], mag[j] = torch.maximum(mi, mj), torch.minimum(mi, mj)
    return [t for t in wires if t is not None]


def _mask(op, a: torch.Tensor, b, like: torch.Tensor) -> torch.Tensor:
    """``op(a, b)`` (a comparison) as 0.0 / 1.0 in the floating dtype of ``like``."""
    if a.shape == like.shape:
        out = torch.empty_like(like)
    else:
        out = torch.empty(torch.broadcast_shapes(a.shape, like.shape), dtype=like.dtype, device=like.device)
    return op(a, b, out=out)


def _sort_by_magnitude_finite(t: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`sort_by_magnitude` for finite terms, with arithmetic selects.

    ``torch.lerp(a, b, w)`` with ``w`` in {0, 1} returns ``a`` or ``b`` exactly when
    ``b - a`` is finite, and a float comparison mask costs one pass: an order of
    magnitude cheaper than ``torch.where`` on CPU. Same result as the ``where`` network
    for finite terms (the sign of zero terms aside); non-finite terms may turn to NaN.
    """
    t = list(torch.broadcast_tensors(*t))
    mag = [x.abs() for x in t]
    for i, j in _sorting_network(len(t)):
        swap = _mask(torch.lt, mag[i], mag[j], t[i])
        t[i], t[j] = torch.lerp(t[i], t[j], swap), torch.lerp(t[j], t[i], swap)
        mag[i], mag[j] = torch.maximum(mag[i], mag[j]), torch.minimum(mag[i], mag[j])
    return t


def renormalize(terms: torch.Tensor | list[torch.Tensor], nc: int, *, presorted: bool = False) -> torch.Tensor:
    """Turn ``m`` floating terms into a normalised ``nc``-component expansion.

    Algorithm (after Boldo–Joldes–Muller–Popescu 2017, vectorised, made branch-free and
    order-independent): a bottom-up VecSum (TwoSums, exact) followed by a top-down pass
    of TwoSums that emits a component each time the running error is non-zero, which
    compacts zeros to the tail. The pair of passes runs twice: the first pass keeps one
    guard component so that only the second one truncates. Per-element branches are
    masks, so the cost is ``O(m * nc)`` elementwise ops.

    Precondition:
        none: the terms are first sorted by magnitude (a sorting network) unless the
        caller says ``presorted=True``, in which case they must already be ordered by
        non-increasing magnitude (up to overlap of adjacent terms). Terms must be finite
        for the tail to be meaningful; a non-finite leading component keeps its value
        (inf/NaN propagate) and its tail is set to zero.

    Bound:
        the result ``r`` is decreasing, zeros only at the tail, and
        ``|sum(r) - sum(terms)| <= u^nc |sum(terms)|`` (truncation), checked in
        ``tests/mcf/test_eft.py``. Components satisfy ``|r[i+1]| <= ulp(r[i])``; the
        stronger non-overlap ``|r[i+1]| <= ulp(r[i]) / 2`` holds for almost all inputs
        but not all (bfloat16 ~1e-5 of random inputs; tested in
        ``test_renormalize_output_overlaps_by_at_most_one_ulp``). The result is not
        always the nearest ``nc``-expansion: a sum that ``nc`` components represent
        exactly can come back with an error up to ``u^nc |sum|`` (double rounding onto a
        tie; tested in ``test_renormalize_of_a_representable_sum_is_within_the_documented_bound``).

    Args:
        terms: tensor of shape ``(*shape, m)`` or a list of ``m`` tensors of one shape.
        nc: number of output components.

    Returns:
        tensor of shape ``(*shape, nc)``.

    Example:
        >>> renormalize(torch.tensor([1.0, 1e-20, 1.0], dtype=torch.float64), 2).tolist()
        [2.0, 1e-20]
        >>> renormalize([torch.tensor([1e-20, 1.0], dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64)], 3)
        tensor([[1.0000e+00, 1.0000e-20, 0.0000e+00],
                [3.0000e+00, 0.0000e+00, 0.0000e+00]], dtype=torch.float64)
    """
    t = unpack(terms) if isinstance(terms, torch.Tensor) else list(terms)
    if len(t) == 1:
        zero = torch.zeros_like(t[0])
        return pack([t[0]] + [zero] * (nc - 1))
    # Fast path: arithmetic selects, valid when every term and result is finite (checked
    # by one reduction; otherwise the where-based path below handles inf and NaN).
    fast = _sort_by_magnitude_finite(t) if not presorted else list(torch.broadcast_tensors(*t))
    comps, total = renormalize_finite(fast, nc)
    out = pack(comps)
    if all_finite(out) and all_finite(total):
        return out
    if nc == 1:
        total = t[-1]
        for term in reversed(t[:-1]):
            total = term + total
        return pack([total])
    if not presorted:
        t = sort_by_magnitude(t)
    first = _distill(t, min(nc + 1, len(t)))
    out = pack(_distill(first, nc))
    # Non-finite sums: the TwoSum errors are NaN; keep the plain sum instead.
    naive = first[0]
    if all_finite(out[..., 0]) and all_finite(naive):
        return out
    plain = t[0]
    for term in t[1:]:
        plain = plain + term
    lead = torch.where(torch.isfinite(plain), out[..., 0], plain)
    return _clean_nonfinite(pack([lead] + unpack(out)[1:]))


def broadcast_shapes(*shapes: Sequence[int]) -> torch.Size:
    """:func:`torch.broadcast_shapes` of concrete shapes, for the eager kernel calls.

    torch's own checks for fake tensors and symbolic sizes on every call (about 25 us,
    more than a small fused kernel runs); here equal shapes return at once and others go
    through torch's C++ size inference. Not for shapes of a ``torch.compile`` trace.

    Example:
        >>> broadcast_shapes((3, 1), (4,)), broadcast_shapes((2, 5), (2, 5))
        (torch.Size([3, 4]), torch.Size([2, 5]))
    """
    first = shapes[0]
    if all(s == first for s in shapes[1:]):
        return torch.Size(first)
    out = torch.Size(first)
    for s in shapes[1:]:
        out = torch._C._infer_size(out, torch.Size(s))
    return torch.Size(out)


#: Set inside :func:`real_tensors_only` (per thread).
_real_only = threading.local()


@contextlib.contextmanager
def real_tensors_only() -> Iterator[None]:
    """Inside the block :func:`tracing` is False and :func:`is_traced` is False for every
    tensor, even while ``torch.compile`` traces: for code that runs on real tensors
    outside every dispatch mode though a trace is active around it (building and
    self-checking the fused kernels on their first use, :func:`hypermc.mcf.registry.load`),
    which must make the choices eager mode makes (the fused multiply-add probe's answer,
    the checked fast paths), not a trace's.

    Example:
        >>> with real_tensors_only():
        ...     tracing()
        False
    """
    old = getattr(_real_only, "on", False)
    _real_only.on = True
    try:
        yield
    finally:
        _real_only.on = old


def tracing() -> bool:
    """Whether a ``torch.compile``/export trace is running (Dynamo or AOT dispatch tracing)
    around code that sees its tensors (never inside :func:`real_tensors_only`)."""
    if getattr(_real_only, "on", False):
        return False
    if torch.compiler.is_compiling():
        return True
    if torch._C._len_torch_dispatch_stack() == 0 and TracingContext.try_get() is None:
        return False  # no mode that could be a fake one, no trace: detect_fake_mode's answer (5 us)
    return detect_fake_mode() is not None


def is_traced(t: torch.Tensor) -> bool:
    """Whether ``t`` is a symbolic tensor of a ``torch.compile``/export trace.

    Kernels take a fast path after a data-dependent check (``all_finite``) in eager
    mode; a trace cannot branch on data, so there they take the general ``where``-based
    path, which gives the same values (it is the path eager takes for non-finite data).
    """
    if not isinstance(t, torch.Tensor):  # a symbolic element of a kernel generator's trace
        return bool(getattr(t, "symbolic", False))
    if getattr(_real_only, "on", False):
        return False
    if torch.compiler.is_compiling():
        return True
    return is_fake(t)


#: The integer dtype of each floating dtype's bits (:func:`select`).
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
#: Elements below which :func:`select` leaves the choice to ``torch.where`` (a few kernel
#: launches more cost more than the select itself).
SELECT_MIN = 4096


def select(cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``torch.where(cond, x, y)`` for floating tensors of one dtype, by bit masks on the CPU.

    ATen's CPU ``where`` is not vectorised: 3.4 ns per element for float64 (1.1 ms for
    2 x 160,000 values, one thread), 18 times an addition. Here ``y ^ ((x ^ y) & -cond)``
    on the bits (integer ops, vectorised) takes 0.19 ms. The result is the bits of ``x``
    or of ``y``, as ``where``'s (signed zeros and NaN payloads included), broadcast the
    same way. ``torch.where`` itself runs on other devices, for mixed dtypes, under
    autograd, in traces (``torch.compile`` fuses it) and below :data:`SELECT_MIN` elements.

    Example:
        >>> x = torch.tensor([1.5, -0.0, float("nan")], dtype=torch.float64)
        >>> y = torch.zeros(3, dtype=torch.float64)
        >>> select(torch.tensor([True, True, False]), x, y).tolist()
        [1.5, -0.0, 0.0]
    """
    ints = _BITS.get(x.dtype)
    if (
        ints is None
        or x.dtype != y.dtype
        or x.device.type != "cpu"
        or y.device.type != "cpu"
        or x.requires_grad
        or y.requires_grad
        or is_traced(x)
        or torch._C._are_functorch_transforms_active()
        or max(x.numel(), y.numel(), cond.numel()) < SELECT_MIN
    ):
        return torch.where(cond, x, y)
    xb, yb = x.view(ints), y.view(ints)
    out = torch.bitwise_xor(xb, yb) & cond.to(ints).neg_()  # the shape of the three broadcast
    return out.bitwise_xor_(yb).view(x.dtype)


def planes(c: torch.Tensor) -> torch.Tensor | None:
    """The component planes ``(nc, *shape)`` of a component tensor ``(*shape, nc)`` whose
    components are planar (the component stride is the largest: what :func:`pack` and the
    kernels make), as a view; None for other layouts.

    Example:
        >>> c = pack([torch.zeros(4, 3), torch.ones(4, 3)])
        >>> planes(c).shape, planes(c.contiguous()) is None
        (torch.Size([2, 4, 3]), True)
    """
    if c.dim() < 2 or c.shape[-1] < 2:
        return None
    strides = c.stride()
    return c.movedim(-1, 0) if strides[-1] > 1 and strides[-1] >= max(strides[:-1]) else None


def take(c: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``c.index_select(dim, index)`` of a component tensor (``dim`` not the component
    axis), plane by plane where ``c`` is planar: ATen gathers the elements of a row one by
    one when the component stride is the largest (10^5 rows of 16 float64 pairs: 7.4 ms,
    by planes 0.8 ms). The result is planar there.

    Example:
        >>> c = pack([torch.arange(4.0), torch.arange(4.0) / 8])
        >>> take(c, 0, torch.tensor([3, 0])).tolist()
        [[3.0, 0.375], [0.0, 0.0]]
    """
    p = planes(c)
    if p is None:
        return c.index_select(dim, index)
    return p.index_select(dim % (c.dim() - 1) + 1, index).movedim(0, -1)


def all_true(mask: torch.Tensor) -> bool:
    """``bool(mask.all())`` in eager mode; ``False`` while tracing (see :func:`is_traced`)."""
    return not is_traced(mask) and bool(mask.all())


def all_finite(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` is finite, by one read-only reduction (a sum that
    overflows falls back to the elementwise test); ``False`` while tracing, so callers
    take their general path (see :func:`is_traced`)."""
    if is_traced(t):
        return False
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


def _vecsum(t: list[torch.Tensor]) -> list[torch.Tensor]:
    """VecSum (bottom-up chain of TwoSums): ``e[0]`` is the rounded running sum, ``e[1:]``
    the exact errors; ``sum(e) == sum(t)`` exactly for finite terms."""
    m = len(t)
    s = t[m - 1]
    e: list[torch.Tensor] = [s] * m
    for i in range(m - 2, -1, -1):
        s, e[i + 1] = two_sum(t[i], s)
    e[0] = s
    return e


def _distill_finite(t: list[torch.Tensor], nc: int) -> list[torch.Tensor]:
    """:func:`_distill` with arithmetic selects (finite terms; same roundings).

    Every output slot is written at most once (the emission index only grows), so the
    masked writes are exact additions to zero: ``out[k] + r * [emit and j == k]``; the
    carried sum is ``eps_new + (1 - emit) * r`` (``eps_new == 0`` where nothing is
    emitted).
    """
    e = _vecsum(t)
    m, s = len(e), e[0]
    out: list[torch.Tensor | None] = [None] * nc
    j = torch.zeros_like(s)
    eps = e[0]
    for i in range(1, m):
        r, eps_new = two_sum(eps, e[i])
        emit = _mask(torch.ne, eps_new, 0.0, eps_new)
        for k in range(min(i, nc)):
            write = _mask(torch.eq, j, float(k), j).mul_(emit)
            o = out[k]
            out[k] = r * write if o is None else o.addcmul_(r, write)
        j = j + emit
        eps = torch.addcmul(eps_new, emit.neg_().add_(1.0), r)
    final: list[torch.Tensor] = []
    for k in range(nc):
        write = _mask(torch.eq, j, float(k), j)
        o = out[k]
        final.append(eps * write if o is None else o.addcmul_(eps, write))
    return final


def renormalize_finite(t: list[torch.Tensor], nc: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """:func:`renormalize`'s arithmetic-select path for terms ordered by magnitude: the
    ``nc`` components and the first pass's rounded sum of the terms.

    Exact (the value :func:`renormalize` returns) where the terms, the components and the
    sum are finite, which the caller checks; elsewhere the components are meaningless and
    :func:`renormalize` takes its ``where``-based path. The kernel generator traces this
    function for the general kernels of :mod:`hypermc.mcf.native`.

    Example:
        >>> t = [torch.tensor(v, dtype=torch.float64) for v in (1.0, 2.0**-60, 2.0**-60)]
        >>> comps, total = renormalize_finite(t, 2)
        >>> [c.item() for c in comps], total.item()
        ([1.0, 1.734723475976807e-18], 1.0)
    """
    first = _distill_finite(t, min(nc + 1, len(t)))
    return _distill_finite(first, nc), first[0]


def _distill(t: list[torch.Tensor], nc: int) -> list[torch.Tensor]:
    """One VecSum + top-down compaction pass; returns ``nc`` components (see renormalize)."""
    e = _vecsum(t)
    m, s = len(e), e[0]
    zero = torch.zeros_like(s)
    out = [zero] * nc
    j = torch.zeros(s.shape, dtype=torch.int8, device=s.device)
    eps = e[0]
    for i in range(1, m):
        r, eps_new = two_sum(eps, e[i])
        emit = eps_new != 0
        for k in range(min(i, nc)):
            out[k] = torch.where(emit & (j == k), r, out[k])
        j = j + emit.to(torch.int8)
        eps = torch.where(emit, eps_new, r)
    for k in range(nc):
        out[k] = torch.where(j == k, eps, out[k])
    return out


def _clean_nonfinite(c: torch.Tensor) -> torch.Tensor:
    """Zero the tail of elements whose leading component is inf or NaN."""
    if c.shape[-1] == 1:
        return c
    comps = unpack(c)
    finite = torch.isfinite(comps[0])
    return pack([comps[0]] + [torch.where(finite, ci, 0.0) for ci in comps[1:]])


# Resolve the CPU probes now, outside any tracing (see :func:`has_fused_addcmul`).
for _dtype in (torch.float32, torch.float64):
    has_fused_addcmul("cpu", _dtype)
del _dtype


#: float64's exponent bias and stored significand bits (the bit layout :func:`pow2` builds).
F64_BIAS, F64_MANTISSA_BITS = 1023, 52


def float_pieces(c: Fraction | float | int) -> tuple[float, ...]:
    """The exact number ``c`` as non-overlapping float64 numbers, largest first (at most
    eight, ``8 * 53`` bits; fewer where their sum is exact). An MC operand of ``nc``
    components adds or multiplies the first :func:`piece_count` of them one by one, so
    the constant keeps the operand's ``nc p`` bits; computed once (at import, say), they
    are Python floats, the same under ``torch.compile``.

    Example:
        >>> float_pieces(Fraction(1, 2)), float_pieces(Fraction(1, 3))[:2]
        ((0.5,), (0.3333333333333333, 1.850371707708594e-17))
    """
    rest, out = Fraction(c), list[float]()
    while rest and len(out) < 8:
        out.append(float(rest))
        rest -= Fraction(out[-1])
    return tuple(out) or (0.0,)


def piece_count(dtype: torch.dtype, nc: int) -> int:
    """How many :func:`float_pieces` an operand of ``nc`` components of ``dtype`` holds:
    ``ceil(nc p / 53)`` (1 for a plain tensor, ``nc = 1``).

    Example:
        >>> piece_count(torch.float64, 3), piece_count(torch.float32, 3), piece_count(torch.float32, 1)
        (3, 2, 1)
    """
    return min(8, -(-nc * float_format(dtype).p // 53))


def pow2(k: torch.Tensor) -> torch.Tensor:
    """Exact float64 ``2**k`` for an integer-valued tensor ``k`` in ``[-1022, 1023]``
    (the normal range), built from its bit pattern: no rounding, no ``pow``.

    Example:
        >>> pow2(torch.tensor([-1022, 0, 3])).tolist() == [2.0**-1022, 1.0, 8.0]
        True
    """
    return ((k.to(torch.int64) + F64_BIAS) << F64_MANTISSA_BITS).view(torch.float64)


def sqrt_rn(t: torch.Tensor) -> torch.Tensor:
    """The correctly rounded square root of a plain tensor (IEEE ``sqrt``).

    torch's CPU ``sqrt`` is not correctly rounded: its vectorised kernels stay within about
    0.51 ulp (measured with torch 2.13 on one x86-64 VM: 1.4 % of random float64 and 20 %
    of float32 arguments in [0.5, 4.5) differ from the IEEE result, e.g. float32
    ``sqrt(1 - 2^-24)`` gave 1.0; on another, with AVX-512, 0.8 % and 0.7 %, and that
    value was right: the error depends on the CPU). The MC square roots start from this value, so with
    torch's value the torch networks and the fused kernels (``std::sqrt``) would take
    different, equally accurate, paths. On the CPU, float64 goes through numpy's ``sqrt``
    (the hardware instruction) and the narrower dtypes through float64 (correct: a
    double rounding of a square root is innocuous when ``53 >= 2p + 2``); CUDA's ``sqrt``
    is already IEEE, and traced or grad-requiring tensors keep ``torch.sqrt``.

    Example:
        >>> x = torch.tensor([1 - 2**-24], dtype=torch.float32)
        >>> sqrt_rn(x).item() == 1 - 2**-24  # IEEE; torch.sqrt gave 1.0 on some CPUs
        True
    """
    if t.device.type != "cpu" or t.requires_grad or is_traced(t):
        return torch.sqrt(t)
    if t.dtype == torch.float64:
        with np.errstate(invalid="ignore"):  # sqrt(-1) = NaN without a warning, as in torch
            a = t.detach().resolve_conj().resolve_neg().numpy()
            return torch.from_numpy(np.sqrt(a, out=np.empty_like(a)))  # out=: an array also for 0-d
    return sqrt_rn(t.double()).to(t.dtype)  # IEEE float64 (numpy), rounded once
