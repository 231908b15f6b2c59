"""Matrix products of component tensors at BLAS speed: exact slicing on native GEMMs.

A *component tensor* has shape ``(*shape, nc)``: element ``i`` is the exact sum of its
``nc`` non-overlapping components, leading component first. A plain tensor ``t`` enters
as the one-component tensor ``t.unsqueeze(-1)``. ``u = 2**-p`` is the unit roundoff of the
component dtype (``p`` = 24 for float32, 53 for float64). Shapes follow
:func:`torch.matmul` on the *logical* shapes (the shapes without the component dim):
1-D @ 1-D is a dot product, 2-D @ 1-D a matrix-vector product, batch dims broadcast.
``addmm`` and ``linear`` add a component-tensor term before the single final rounding.

Algorithm (exact slicing in the spirit of the Ozaki scheme: Ozaki, Ogita, Oishi, Rump,
"Error-free transformations of matrix multiplication by using fast routines of matrix
multiplication and its applications", Numer. Algorithms 59, 2012):

1. *Scale.* Row ``i`` of ``A`` is scaled by ``2**-E_i``, where ``2**E_i`` is the smallest
   power of two above the row's largest leading component, column ``j`` of ``B`` by
   ``2**-F_j``; every scaled value lies in ``(-1, 1)``. Exact (powers of two, float64).
2. *Slice.* Each scaled component is cut into signed *digits* of ``beta`` bits: digit
   ``s`` is the component's residue rounded to the grid ``2**(-beta s)`` with the exact
   trick ``(r + sigma) - sigma``, and ``r -= digit`` is exact. The digits of all
   components on one grid are added (exactly): slice ``s`` of an operand is ``2**(-beta s)``
   times an integer matrix with entries ``|d| <= 2**beta`` (``2**beta (1 + 2**(2-p))``
   when ``beta > p - 2``). ``A`` and ``B`` may use different widths ``beta_a``, ``beta_b``.
3. *Multiply.* Native GEMMs in the *engine* dtype (float64 on CPU and on GPUs with
   full-rate float64, float32 elsewhere). With ``k * max|d_a| * max|d_b| <= 2**p_engine``
   every product and every partial sum is an integer (times a common power of two) of at
   most ``p_engine`` bits, so each pair product is exact whatever the summation order,
   blocking or FMA use of the BLAS (Strassen-like algorithms excepted; tested with
   extreme digits). The slices of the more-sliced operand are stacked in one buffer, so
   all kept pairs that share a slice of the other operand are one GEMM (same flops,
   fewer and larger calls). GEMMs run under :func:`full_precision_gemm` (no TF32 / bf16).
4. *Keep the pairs that matter.* Digit ``s`` is at most ``2**(-beta (s-1))`` times the row
   scale, so pair ``(s, t)`` contributes at most ``k 2**(E_i + F_j) 2**-(beta_a (s-1) +
   beta_b (t-1))`` to ``C[i, j]``. One extra GEMM computes ``G = |A| |B|`` (scaled leading
   components, float32; float64 if that has a zero) and the plan (cached) keeps the
   smallest set of pairs whose dropped weight, summed over all dropped pairs and all
   digits beyond the last slice, is below ``u^nc / 2 * min_ij G_ij 2**-(E_i+F_j) / k``
   (with ``G`` halved for safety). A one-component operand whose values are exact in
   fewer slices (a float32 matrix needs ``24 +`` its row/column exponent range bits)
   contributes only those. ``beta_a`` is chosen (``beta_b`` the widest exact width) to
   minimise the number of pairs. This is the one data-dependent step: one host sync.
5. *Accumulate.* The pair products are exact. The small ones (the *tail*, whose float64
   rounding is provably below ``u^nc G / 4``) are summed in float64; the large ones and
   the tail sum are added by a cascade of TwoSums into a few float64 levels, compressed
   (VecSum) to ``R`` float64 components, scaled back by ``2**(E_i + F_j)`` and rounded once
   to ``nc`` components of the component dtype.

*Wide engine path.* When the engine is wider than the component dtype and the
worst-case error of one engine GEMM on the components summed in the engine dtype,
``~(k + nca + ncb) 2**-p_engine |A||B|``, is at most ``1.5 u^nc |A||B|``, the product is
one engine GEMM rounded to ``nc`` components (proof in :func:`_wide_engine_ok`). That
covers float32 ``nc = 1`` (``k`` up to ``1.5 * 2**29``), float32 ``nc = 2`` only for
``k < 48``, float16 / bfloat16 for small ``nc``; never float64 on a float64 engine.

Bound (``MATMUL_BOUND``, the ``"matmul"`` entry of the tests' bound table): elementwise
``|C - A B| <= 4 u^nc (|A| |B|)`` for finite inputs. The error budget is truncation
``0.5``, tail rounding ``0.25``, cascade ``2**-5``, final rounding ``(1 + 2**-4) u^nc |C|``,
about ``1.9 u^nc |A||B|`` in all. It holds with cancellation, near-zero results and rows
whose entries span many binades, within the limits below. ``nc = 1`` is essentially the
correctly rounded product, never less accurate than the native matmul. Tested in
``tests/mcf/test_matmul.py`` against exact rational products for float32 ``nc`` 1-4 and
float64 ``nc`` 1-3.

Limits: the number of slices grows with the exponent range inside a row of ``A`` /
column of ``B`` that matters for some output, ``L_ij = log2(k 2**(E_i+F_j) / G_ij)``;
beyond ``MAX_RANGE_BITS`` the plan stops adding slices and the error is bounded by
``k 2**(E_i+F_j) u^nc 2**-MAX_RANGE_BITS`` instead. Float64 values below ``2**-1022``
times their row (column) maximum underflow in the scaled operand, and results whose
tail components fall below the smallest normal number keep only the subnormal precision
(float32 ``nc = 4`` results below ``~2**-54``). Inf / NaN follow :func:`torch.matmul`
of the leading components: an output whose row of ``A`` or column of ``B`` holds an inf or
NaN is the native product of the leading components (zero tail); a finite result that
overflows is inf with a zero tail. Accumulation needs float64 (MPS is not supported).

Cost: ``1 + #pairs`` engine GEMMs (``#pairs`` about 5 for float32 nc=2 @ float32, 15-18
for float64 nc=2 @ float64), ``O(#slices)`` elementwise passes over the operands and
``O(#pairs)`` over the output; no ``m x k x n`` intermediate. On CPU the work buffers are
kept per thread between calls (at most ``WORKSPACE_LIMIT_BYTES``; :func:`clear_workspace`
frees them) because fresh large allocations cost page faults. Measured by
``benchmarks/bench_matmul.py``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Iterator
from typing import NamedTuple

import torch

from .._checks import check_dtype, check_instance, check_nc
from . import arith
from .eft import float_format, is_traced, pow2, unpack

__all__ = [
    "MATMUL_BOUND",
    "MAX_RANGE_BITS",
    "MatmulPlan",
    "default_engine",
    "full_precision_gemm",
    "matmul",
    "matmul_plan",
    "dot",
    "mv",
    "mm",
    "bmm",
    "addmm",
    "linear",
    "clear_workspace",
    "WORKSPACE_LIMIT_BYTES",
]

#: Elementwise bound of every product here, in units of ``u^nc * (|A| @ |B|)``.
MATMUL_BOUND = 4.0

#: How many bits below ``u^nc * 2**(E_i + F_j)`` (row and column scales) the plan will
#: resolve before it stops adding slices: covers rows whose relevant entries span
#: ``2**+-120`` with room to spare while bounding the GEMM count (~200 at float64 nc=3).
MAX_RANGE_BITS = 256

# Shares of the bound u^nc * |A||B| given to each error source (see the module docstring);
# their sum with the final rounding (~1.07) stays well below MATMUL_BOUND.
_TRUNCATION_SHARE = 0.5  # slice pairs and digits that are not computed
_TAIL_SHARE = 0.25  # float64 rounding of the summed small pair products
# G is computed from the leading components with a float32 (or float64) GEMM: the exact
# |A||B| is at least half of it (leading-component and GEMM rounding are far below 2x).
_G_LOWER = 0.5
# Guard bits of the float64 expansion that accumulates the large pair products.
_ACCUMULATION_GUARD_BITS = 4
# The wide engine path is taken when its worst-case GEMM error is at most this many
# u^nc * |A||B| (the final rounding adds ~1 more, the total stays below MATMUL_BOUND).
_WIDE_SHARE = 1.5
# Scaling of float64 data (exact powers of two: :func:`.eft.pow2`): the exponent range
# within which two successive broadcast multiplications cannot underflow.
_SAFE_BROADCAST_EXPONENT = 300
# GPUs whose float64 GEMM runs at full rate (compute capability): P100, V100, A100,
# H100/H200, B200. Others (and MPS) get the float32 engine.
_FULL_RATE_FP64 = {(6, 0), (7, 0), (8, 0), (9, 0), (10, 0)}
_ENGINE_P = {torch.float64: 53, torch.float32: 24}
_ACC = torch.float64  # accumulation dtype of the sliced path
_P_ACC = 53


class MatmulPlan(NamedTuple):
    """How :func:`matmul` computes one product (returned by :func:`matmul_plan`).

    Attributes:
        path: ``"wide"`` (one engine GEMM), ``"sliced"`` or ``"zero"`` (an empty product
            or ``|A||B| = 0`` everywhere).
        engine: dtype of the GEMMs.
        beta_a, beta_b: digit widths (bits) of the slices of ``A`` and ``B``.
        pairs: kept slice pairs ``(s, t)`` (1-based), largest weight first.
        n_head: the first ``n_head`` pairs are accumulated error-free, the rest in float64.
        slices_a, slices_b: number of slices of ``A`` and ``B`` that are extracted.
        levels: float64 accumulators of the error-free cascade for the large pairs.
        gemms: GEMMs of the product's size: one per kept pair (pairs sharing a slice run
            as one larger call) plus the one for ``|A||B|``.

    Example:
        >>> a = torch.ones(4, 3, 1)  # float32, nc = 1: exact in one float64 GEMM
        >>> matmul_plan(a, a.transpose(0, 1))
        MatmulPlan(path='wide', engine=torch.float64, beta_a=0, beta_b=0, pairs=(), n_head=0, slices_a=0, slices_b=0, levels=0)
        >>> matmul_plan(a, a.transpose(0, 1)).gemms
        1
    """

    path: str
    engine: torch.dtype
    beta_a: int = 0
    beta_b: int = 0
    pairs: tuple[tuple[int, int], ...] = ()
    n_head: int = 0
    slices_a: int = 0
    slices_b: int = 0
    levels: int = 0

    @property
    def gemms(self) -> int:
        if self.path == "wide":
            return 1
        return len(self.pairs) + 1 if self.path == "sliced" else 0


# ----------------------------------------------------------------------------- engine


def default_engine(device: torch.device | str) -> torch.dtype:
    """GEMM dtype used for ``device``: float64 on CPU and full-rate-float64 GPUs, else float32.

    float64 GEMMs give ``beta`` of about ``(53 - log2 k) / 2`` bits per slice (five GEMMs
    for a float32 nc=2 @ float32 product); a float32 engine gives about ``(24 - log2 k) / 2``
    and several times more GEMMs, which only pays where float64 runs at 1/32 rate or less.

    Example:
        >>> default_engine("cpu")
        torch.float64
    """
    device = torch.device(device)
    if device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        return torch.float64 if capability in _FULL_RATE_FP64 else torch.float32
    if device.type == "mps":
        return torch.float32
    return torch.float64


@contextlib.contextmanager
def full_precision_gemm() -> Iterator[None]:
    """Force IEEE float32 GEMMs (no TF32, no bf16 passes) in the block; restore after.

    Uses the per-backend ``fp32_precision`` settings of recent PyTorch (CUDA and oneDNN
    matmul set to ``"ieee"``), falling back to ``torch.set_float32_matmul_precision``
    and ``torch.backends.cuda.matmul.allow_tf32`` on older versions. The previous values
    are restored even if the block raises. float64 GEMMs are never reduced; the guard
    matters for the float32 engine.

    Example:
        >>> a = torch.tensor([[1 + 2**-20]]).unsqueeze(-1)  # float32, nc = 1
        >>> with full_precision_gemm():
        ...     c = mm(a, a, nc=2)
        >>> c.double().sum().item() == (1 + 2**-20) ** 2  # the exact square, in two float32 components
        True
    """
    backends = [torch.backends.cuda.matmul]
    mkldnn = getattr(torch.backends, "mkldnn", None)
    if mkldnn is not None and hasattr(mkldnn, "matmul"):
        backends.append(mkldnn.matmul)
    try:
        old = [b.fp32_precision for b in backends]
    except AttributeError:
        old = None
    if old is not None:
        try:
            for b in backends:
                b.fp32_precision = "ieee"
            yield
        finally:
            for b, value in zip(backends, old):
                b.fp32_precision = value
        return
    old_precision = torch.get_float32_matmul_precision()
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = False
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
        torch.set_float32_matmul_precision(old_precision)


# -------------------------------------------------------------------------- public API


def matmul(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> torch.Tensor:
    """Matrix product of two component tensors with :func:`torch.matmul` semantics.

    Args:
        a: component tensor ``(*batch_a, m, k, nca)`` or ``(k, nca)``; a plain tensor
            ``t`` is passed as ``t.unsqueeze(-1)`` (``nca = 1``).
        b: component tensor ``(*batch_b, k, n, ncb)`` or ``(k, ncb)``, same dtype and
            device as ``a``.
        nc: components of the result; default ``max(nca, ncb)``.
        engine: GEMM dtype (float64 or float32); default :func:`default_engine`.

    Returns:
        Component tensor ``(*broadcast(batch_a, batch_b), m, n, nc)`` with the 1-D
        dimensions removed as :func:`torch.matmul` does (1-D @ 1-D gives ``(nc,)``).

    Bound:
        ``|C - A B| <= 4 u^nc (|A| |B|)`` elementwise (``u`` of the component dtype), for
        finite inputs within the range limits of the module docstring. ``nc = 1`` is at
        least as accurate as the native matmul of the dtype (essentially correctly
        rounded where ``|C|`` is not far below ``|A||B|``).

    Precondition:
        components normalised (non-overlapping, decreasing), as every kernel returns
        them. Otherwise slice digits can exceed their bound and GEMMs may round.

    Raises:
        TypeError: different or unsupported dtypes (or engine), non-tensor arguments, a non-int ``nc``.
        ValueError: a 0-d logical operand, mismatched contracted sizes, batch shapes
            that do not broadcast, different devices, ``nc < 1``.

    Example:
        >>> a = arith.from_float(torch.randn(4, 3, dtype=torch.float64), 2)  # 4x3, nc=2
        >>> b = torch.randn(3, 5, dtype=torch.float64).unsqueeze(-1)  # plain 3x5 matrix
        >>> matmul(a, b).shape
        torch.Size([4, 5, 2])
    """
    a, b, nc, engine = _validate(a, b, nc, engine, "matmul")
    return _matmul(a, b, nc, engine)


def matmul_plan(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> MatmulPlan:
    """The :class:`MatmulPlan` that :func:`matmul` would use for these operands.

    Runs the data-dependent analysis (scales, ``|A||B|``, exponent ranges) but not the
    slice GEMMs. For benchmarks, tests and tuning.

    Example:
        >>> a = arith.from_float(torch.linspace(0.1, 1.0, 12, dtype=torch.float64).reshape(4, 3), 2)
        >>> plan = matmul_plan(a, a.transpose(0, 1))
        >>> plan.path, plan.engine
        ('sliced', torch.float64)
    """
    a, b, nc, engine = _validate(a, b, nc, engine, "matmul_plan")
    a2, b2, _, _ = _as_matrices(a, b)
    pool = _Pool(a.device)
    with full_precision_gemm():
        plan, stats = _analyse(a2, b2, nc, engine, pool)
    if stats.terms_a is not None:
        pool.give(*stats.terms_a, *stats.terms_b)
    pool.close()
    return plan


def dot(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> torch.Tensor:
    """Dot product of two 1-D component tensors ``(k, nca)``, ``(k, ncb)`` -> ``(nc,)``.

    Same algorithm and bound as :func:`matmul`. Raises ``ValueError`` unless both are 1-D.

    Example:
        >>> x = torch.tensor([1e16, 1.0, -1e16], dtype=torch.float64).unsqueeze(-1)
        >>> dot(x, torch.ones(3, 1, dtype=torch.float64), nc=2)
        tensor([1., 0.], dtype=torch.float64)
    """
    _check_logical_dims("dot", a, b, (1,), (1,))
    return matmul(a, b, nc, engine=engine)


def mv(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> torch.Tensor:
    """Matrix-vector product ``(m, k, nca) @ (k, ncb) -> (m, nc)`` (bound as :func:`matmul`).

    Example:
        >>> A = torch.tensor([[1e16, 1.0, -1e16], [1.0, 2.0, 3.0]], dtype=torch.float64).unsqueeze(-1)  # nc = 1
        >>> mv(A, torch.ones(3, 1, dtype=torch.float64), nc=2).tolist()
        [[1.0, 0.0], [6.0, 0.0]]
    """
    _check_logical_dims("mv", a, b, (2,), (1,))
    return matmul(a, b, nc, engine=engine)


def mm(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> torch.Tensor:
    """Matrix product ``(m, k, nca) @ (k, n, ncb) -> (m, n, nc)`` (bound as :func:`matmul`).

    Example:
        >>> A = torch.tensor([[1e16, 1.0, -1e16], [1.0, 2.0, 3.0]], dtype=torch.float64).unsqueeze(-1)  # nc = 1
        >>> B = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]], dtype=torch.float64).unsqueeze(-1)
        >>> mm(A, B, nc=2)[..., 0]  # leading components
        tensor([[1., 1.],
                [6., 2.]], dtype=torch.float64)
    """
    _check_logical_dims("mm", a, b, (2,), (2,))
    return matmul(a, b, nc, engine=engine)


def bmm(a: torch.Tensor, b: torch.Tensor, nc: int | None = None, *, engine: torch.dtype | None = None) -> torch.Tensor:
    """Batched product ``(B, m, k, nca) @ (B, k, n, ncb) -> (B, m, n, nc)``, no broadcasting.

    Example:
        >>> a = torch.ones(5, 2, 3, 1, dtype=torch.float64)
        >>> b = torch.ones(5, 3, 4, 2, dtype=torch.float64) * torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> c = bmm(a, b)
        >>> c.shape, c[0, 0, 0].tolist()
        (torch.Size([5, 2, 4, 2]), [3.0, 0.0])
    """
    _check_logical_dims("bmm", a, b, (3,), (3,))
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: batch sizes differ: a has {a.shape[0]}, b has {b.shape[0]}; use matmul for broadcasting")
    return matmul(a, b, nc, engine=engine)


def addmm(
    c: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    nc: int | None = None,
    *,
    beta: float = 1,
    alpha: float = 1,
    engine: torch.dtype | None = None,
) -> torch.Tensor:
    """``beta * c + alpha * (a @ b)`` with one final rounding, :func:`torch.addmm` semantics.

    Args:
        c: component tensor whose logical shape broadcasts to ``(m, n)``.
        a, b: ``(m, k, nca)`` and ``(k, n, ncb)`` component tensors.
        nc: components of the result; default ``max(ncc, nca, ncb)``.
        beta, alpha: Python numbers (rounded to the component dtype). ``beta = 0``
            ignores ``c`` (its NaN/inf do not propagate), like torch.

    Bound:
        ``|R - (beta c + alpha A B)| <= 4 u^nc (|beta c| + |alpha| |A| |B|)``: ``alpha``
        scales ``b`` and ``beta`` scales ``c`` with one extra component each (error
        ``8 u^(nc+1)``), the product's float64 expansion and ``beta c`` are renormalised
        together before the single rounding to ``nc`` components.

    Example:
        >>> c = torch.tensor([[-1e16]], dtype=torch.float64).unsqueeze(-1)
        >>> a = torch.tensor([[1e16, 1.0]], dtype=torch.float64).unsqueeze(-1)
        >>> addmm(c, a, torch.ones(2, 1, 1, dtype=torch.float64), nc=2)  # -1e16 + (1e16 + 1)
        tensor([[[1., 0.]]], dtype=torch.float64)
    """
    _check_logical_dims("addmm", a, b, (2,), (2,))
    _check_component_tensor("addmm", "c", c)
    if c.dim() - 1 > 2:
        raise ValueError(f"addmm: c must have at most 2 logical dims, got shape {tuple(c.shape[:-1])}")
    a, b, nc, engine = _validate(a, b, nc, engine, "addmm", extra_nc=c.shape[-1] if beta != 0 else 1)
    if c.dtype != a.dtype:
        raise TypeError(f"addmm: c has dtype {c.dtype}, a and b have {a.dtype}")
    if c.device != a.device:
        raise ValueError(f"addmm: c is on {c.device}, a and b on {a.device}")
    b = _scale_operand(b, alpha, nc)
    addend = _scale_operand(c, beta, nc) if beta != 0 else None
    out_shape = (a.shape[0], b.shape[1])
    if addend is not None:
        try:
            torch.broadcast_shapes(tuple(addend.shape[:-1]), out_shape)
        except RuntimeError:
            raise ValueError(f"addmm: c of shape {tuple(c.shape[:-1])} does not broadcast to the product's shape {out_shape}") from None
    return _matmul(a, b, nc, engine, addend=addend)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    nc: int | None = None,
    *,
    engine: torch.dtype | None = None,
) -> torch.Tensor:
    """``x @ weight.T + bias`` (:func:`torch.nn.functional.linear` semantics).

    Args:
        x: component tensor ``(*batch, in, ncx)`` (or ``(in, ncx)``).
        weight: ``(out, in, ncw)``.
        bias: ``(out, ncb)`` or ``None``.
        nc: components of the result; default the largest of the operands'.

    Bound:
        as :func:`addmm` with ``alpha = beta = 1``: ``4 u^nc (|bias| + |x| |W^T|)``.

    Example:
        >>> x = torch.tensor([[0.1, 0.2]], dtype=torch.float64).unsqueeze(-1)
        >>> weight = torch.ones(1, 2, 1, dtype=torch.float64)
        >>> y = linear(x, weight, torch.tensor([[-0.3]], dtype=torch.float64), nc=2)
        >>> y[0, 0, 0].item() == 2**-55  # the exact 0.1 + 0.2 - 0.3 of the float64 inputs
        True
    """
    _check_component_tensor("linear", "x", x)
    _check_component_tensor("linear", "weight", weight)
    if weight.dim() != 3:
        raise ValueError(f"linear: weight must be a 2-D component tensor (out, in, nc), got shape {tuple(weight.shape)}")
    wt = weight.transpose(0, 1)
    extra = 1
    if bias is not None:
        _check_component_tensor("linear", "bias", bias)
        if bias.dim() != 2 or bias.shape[0] != weight.shape[0]:
            raise ValueError(f"linear: bias must be a component tensor (out={weight.shape[0]}, nc), got shape {tuple(bias.shape)}")
        if bias.dtype != x.dtype:
            raise TypeError(f"linear: bias has dtype {bias.dtype}, x has {x.dtype}")
        extra = bias.shape[-1]
    x, wt, nc, engine = _validate(x, wt, nc, engine, "linear", extra_nc=extra)
    return _matmul(x, wt, nc, engine, addend=bias)


# ------------------------------------------------------------------------- validation


def _check_component_tensor(name: str, arg: str, x: object) -> None:
    t: torch.Tensor = check_instance(name, arg, x, torch.Tensor, "a component tensor (torch.Tensor of shape (*shape, nc))")
    if t.dim() < 1:
        raise ValueError(f"{name}: {arg} must have a trailing component dim, got a 0-d tensor; pass a plain tensor t as t.unsqueeze(-1)")


def _check_logical_dims(name: str, a: torch.Tensor, b: torch.Tensor, dims_a: tuple[int, ...], dims_b: tuple[int, ...]) -> None:
    _check_component_tensor(name, "a", a)
    _check_component_tensor(name, "b", b)
    if a.dim() - 1 not in dims_a or b.dim() - 1 not in dims_b:
        raise ValueError(
            f"{name}: expected logical dims {dims_a[0]} and {dims_b[0]}, got shapes "
            f"{tuple(a.shape[:-1])} and {tuple(b.shape[:-1])} (the last dim holds the "
            "components); use matmul for other shapes"
        )


def _validate(a, b, nc, engine, name, extra_nc: int = 1):
    _check_component_tensor(name, "a", a)
    _check_component_tensor(name, "b", b)
    if a.dtype != b.dtype:
        raise TypeError(
            f"{name}: operands have different dtypes {a.dtype} and {b.dtype}; convert one explicitly (no implicit precision change)"
        )
    float_format(a.dtype)  # TypeError for non-float dtypes
    if a.device != b.device:
        raise ValueError(f"{name}: operands are on different devices {a.device} and {b.device}")
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError(f"{name}: both operands need at least one logical dim, got shapes {tuple(a.shape[:-1])} and {tuple(b.shape[:-1])}")
    if nc is None:
        nc = max(a.shape[-1], b.shape[-1], extra_nc)
    nc = check_nc(name, nc)
    if a.shape[-1] < 1 or b.shape[-1] < 1:
        raise ValueError(f"{name}: operands need at least one component")
    if engine is None:
        engine = default_engine(a.device)
    check_dtype(name, engine, tuple(_ENGINE_P), name="engine")
    if a.device.type == "mps":
        raise ValueError(f"{name}: the sliced product accumulates in float64, which MPS lacks")
    ka = a.shape[-2]
    kb = b.shape[-3] if b.dim() >= 3 else b.shape[-2]
    if ka != kb:
        raise ValueError(
            f"{name}: contracted sizes differ: a has {ka} columns, b has {kb} rows "
            f"(logical shapes {tuple(a.shape[:-1])} and {tuple(b.shape[:-1])})"
        )
    if a.dim() > 3 or b.dim() > 3:
        ba = a.shape[:-3] if a.dim() > 3 else ()
        bb = b.shape[:-3] if b.dim() > 3 else ()
        try:
            torch.broadcast_shapes(ba, bb)
        except RuntimeError:
            raise ValueError(f"{name}: batch shapes {tuple(ba)} and {tuple(bb)} do not broadcast") from None
    return a, b, nc, engine


def _scale_operand(x: torch.Tensor, factor: float, nc: int) -> torch.Tensor:
    """``factor * x`` for addmm: exact for powers of two, else with one extra component."""
    factor = float(factor)
    if factor == 1:
        return x
    mant, _ = math.frexp(factor)
    if factor != 0 and abs(mant) == 0.5 and torch.tensor(factor, dtype=x.dtype).item() == factor:
        return x * factor  # power of two: exact (barring over/underflow)
    wide = arith.pad(x, max(nc, x.shape[-1]) + 1)
    scalar = torch.full(x.shape[:-1], factor, dtype=x.dtype, device=x.device)
    return arith.mul_float(wide, scalar)


# --------------------------------------------------------------------------- the kernel


def _as_matrices(a: torch.Tensor, b: torch.Tensor):
    """Promote 1-D logical operands to matrices like torch.matmul; return squeeze flags."""
    squeeze_m = a.dim() == 2
    squeeze_n = b.dim() == 2
    if squeeze_m:
        a = a.unsqueeze(-3)  # (k, nc) -> (1, k, nc)
    if squeeze_n:
        b = b.unsqueeze(-2)  # (k, nc) -> (k, 1, nc)
    return a, b, squeeze_m, squeeze_n


def _matmul(a, b, nc, engine, addend=None):
    a, b, squeeze_m, squeeze_n = _as_matrices(a, b)
    if is_traced(a) or is_traced(b):
        # Shapes only: torch.compile runs MC ops as opaque ops (hypermc.mcf.compile) whose
        # fake implementation needs the result's metadata; the plan needs the data.
        out = a.new_empty((*_out_shape(a, b), nc))
        if addend is not None:
            out = out + addend[..., :1]
    else:
        out = _matmul_planned(a, b, nc, engine, addend)
    if squeeze_n:
        out = out.squeeze(-2)
    if squeeze_m:
        out = out.squeeze(-2 if squeeze_n else -3)
    return out


def _matmul_planned(a, b, nc, engine, addend):
    pool = _Pool(a.device)
    with full_precision_gemm():
        plan, stats = _analyse(a, b, nc, engine, pool)
        if plan.path == "wide":
            out = _wide_product(a, b, nc, engine, addend, pool)
        elif plan.path == "zero":
            zero = pool.take(stats.out_shape, _ACC, a.device).zero_()
            out = _finish([zero], a.dtype, nc, addend, stats, pool)
        else:
            out = _sliced_product(plan, stats, a.dtype, nc, addend, pool)
    pool.close()
    if stats.any_bad:
        out = _patch_nonfinite(out, a, b, stats, nc, addend)
    return out


# Work buffers kept between calls on CPU, per thread (see clear_workspace). Fresh large
# allocations cost page faults: ~10 ms per 8 MB on the project's VM, as much as ten
# elementwise passes over the same memory. CUDA has its own caching allocator.
_workspace = threading.local()
#: Most bytes of work buffers that :func:`matmul` keeps per thread between calls on CPU.
WORKSPACE_LIMIT_BYTES = 256 << 20
_WORKSPACE_MIN_BYTES = 1 << 16  # smaller buffers are cheap to allocate


def clear_workspace() -> None:
    """Free the CPU work buffers that the products here keep between calls (this thread).

    Example:
        >>> clear_workspace()  # e.g. after a large product, to return its memory
    """
    _workspace.free = {}


class _Pool:
    """Work buffers of one product, recycled within the call and (on CPU) across calls."""

    def __init__(self, device: torch.device) -> None:
        self.keep = device.type == "cpu"
        self.free: dict[tuple, list[torch.Tensor]] = {}
        if self.keep:
            self.free = getattr(_workspace, "free", None) or {}
            _workspace.free = {}  # owned by this call until close()

    def take(self, shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        free = self.free.get((tuple(shape), dtype, device))
        return free.pop() if free else torch.empty(shape, dtype=dtype, device=device)

    def like(self, t: torch.Tensor) -> torch.Tensor:
        return self.take(t.shape, t.dtype, t.device)

    def give(self, *ts: torch.Tensor | None) -> None:
        """Return buffers for reuse. Only a tensor that is its whole storage is recycled: a
        block of a larger buffer (a view, or an alias whose ``_base`` is not set) would be
        handed out again while the rest of its buffer is in use or recycled under its own
        shape. A buffer given twice is listed once (listed twice, two later ``take`` calls
        would hand out the same memory for two live temporaries)."""
        for t in ts:
            if t is None or t._base is not None or not t.is_contiguous() or t.storage_offset() != 0:
                continue
            if t.untyped_storage().nbytes() != t.numel() * t.element_size():
                continue
            bufs = self.free.setdefault((tuple(t.shape), t.dtype, t.device), [])
            if all(b.data_ptr() != t.data_ptr() for b in bufs):
                bufs.append(t)

    def close(self) -> None:
        if not self.keep:
            return
        kept: dict[tuple, list[torch.Tensor]] = {}
        total = 0
        for key, bufs in self.free.items():
            for t in bufs:
                size = t.nbytes
                if size >= _WORKSPACE_MIN_BYTES and total + size <= WORKSPACE_LIMIT_BYTES:
                    kept.setdefault(key, []).append(t)
                    total += size
        _workspace.free = kept
        self.free = {}


def _two_sum_(a: torch.Tensor, b: torch.Tensor, pool: _Pool) -> tuple[torch.Tensor, torch.Tensor]:
    """Knuth's TwoSum into recycled buffers: returns ``(s, e)``, consumes ``a`` and ``b``.

    Same six operations as :func:`eft.two_sum` (``s = a + b``, ``z = s - a``,
    ``e = (a - (s - z)) + (b - z)``), so ``s + e == a + b`` exactly.
    """
    s = torch.add(a, b, out=pool.like(a))
    z = torch.sub(s, a, out=pool.like(a))
    b.sub_(z)
    torch.sub(s, z, out=z)
    a.sub_(z).add_(b)
    pool.give(b, z)
    return s, a


class _Stats(NamedTuple):
    """Data-dependent quantities of one product (everything after the single host sync)."""

    out_shape: tuple[int, ...]
    terms_a: list[torch.Tensor] | None = None  # scaled float64 components of A (row scale)
    terms_b: list[torch.Tensor] | None = None
    exp_a: torch.Tensor | None = None  # E_i, shape (*batch_a, m, 1), int32
    exp_b: torch.Tensor | None = None  # F_j, shape (*batch_b, 1, n)
    bad_a: torch.Tensor | None = None  # rows of A with an inf/NaN, (*batch_a, m, 1)
    bad_b: torch.Tensor | None = None
    any_bad: bool = False
    exp_extreme: int = 0  # max |E_i|, |F_j| (0 when known to be moderate)
    k: int = 0
    scale_a: list[torch.Tensor] | None = None  # powers of two whose product is 2**-E_i
    scale_b: list[torch.Tensor] | None = None


def _broadcast(s1, s2) -> tuple[int, ...]:
    """Broadcast two shapes (both known to be compatible)."""
    n = max(len(s1), len(s2))
    s1 = (1,) * (n - len(s1)) + tuple(s1)
    s2 = (1,) * (n - len(s2)) + tuple(s2)
    return tuple(x if y == 1 else y for x, y in zip(s1, s2))


def _out_shape(a: torch.Tensor, b: torch.Tensor) -> tuple[int, ...]:
    return (*_broadcast(a.shape[:-3], b.shape[:-3]), a.shape[-3], b.shape[-2])


# Sentinel for "this operand has more bits than any plan resolves" (multi-component operands:
# their exact length is not measured, it is rarely short).
_UNMEASURED_BITS = 1 << 12


def _analyse(a: torch.Tensor, b: torch.Tensor, nc: int, engine: torch.dtype, pool: _Pool):
    """Scales, |A||B| and exponent ranges (one host sync), then the cached plan."""
    out_shape = _out_shape(a, b)
    k = a.shape[-2]
    dtype = a.dtype
    p = float_format(dtype).p
    if math.prod(out_shape) == 0 or k == 0:
        return MatmulPlan("zero", engine), _Stats(out_shape, k=k)
    if _wide_engine_ok(k, _ENGINE_P[engine], p, a.shape[-1], b.shape[-1], nc):
        return MatmulPlan("wide", engine), _Stats(out_shape, k=k)

    exp_a, bad_a, zero_a = _scales(a.select(-1, 0), dim=-1)
    exp_b, bad_b, zero_b = _scales(b.select(-1, 0), dim=-2)
    bits = [_exact_bits(x, e, dim, p, pool) for x, e, dim in ((a, exp_a, -1), (b, exp_b, -2))]
    terms_a, scale_a = _scaled_terms(a, exp_a, pool)
    terms_b, scale_b = _scaled_terms(b, exp_b, pool)
    zeros = (zero_a, zero_b)  # their products are exact zeros: no accuracy requirement
    abs_min = _abs_product_min(terms_a[0], terms_b[0], k, pool, zeros)
    flags = [abs_min.to(_ACC), (bad_a.any() | bad_b.any()).to(_ACC)]
    flags += [x.to(_ACC) for x in bits if x is not None]
    if dtype == torch.float64:  # float32 and narrower exponents are always moderate
        flags += [exp_a.abs().amax().to(_ACC), exp_b.abs().amax().to(_ACC)]
    summary = torch.stack(flags).tolist()  # the one host sync of the sliced path
    g_min, any_bad = summary[0], summary[1] > 0
    rest = iter(summary[2:])
    bits_a, bits_b = (_UNMEASURED_BITS if x is None else next(rest) for x in bits)
    extreme = int(max(rest, default=0.0))
    if g_min == 0:  # a float32 |A||B| cannot tell underflow from exact zeros
        g_min = _abs_product_min(terms_a[0], terms_b[0], k, pool, zeros, exact_zeros=True).item()
    stats = _Stats(out_shape, terms_a, terms_b, exp_a, exp_b, bad_a, bad_b, any_bad, extreme, k, scale_a, scale_b)
    if not math.isfinite(g_min):
        pool.give(*terms_a, *terms_b)
        return MatmulPlan("zero", engine), stats
    # theta: allowed dropped weight per unit of k (module docstring, step 4), floored to a
    # power of two so that the plan cache sees few distinct keys.
    log2_g = max(math.frexp(g_min)[1] - 1, -MAX_RANGE_BITS)
    log2_theta = log2_g + math.floor(math.log2(_TRUNCATION_SHARE * _G_LOWER)) - nc * p - (k - 1).bit_length()
    ratio = round(math.log2(max(terms_a[0].numel(), 1) / max(terms_b[0].numel(), 1)))
    plan = _make_plan(
        k, engine, p, nc, a.shape[-1], b.shape[-1], max(p, int(bits_a)), max(p, int(bits_b)), log2_theta, max(-8, min(8, ratio))
    )
    return plan, stats


def _scales(lead: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exponent ``E`` with ``|x| < 2**E`` for every element along ``dim``, non-finite flags
    and all-zero flags (of the rows of ``A`` or the columns of ``B``)."""
    big = torch.maximum(lead.amax(dim=dim, keepdim=True), lead.amin(dim=dim, keepdim=True).neg_())
    return torch.frexp(big).exponent, ~torch.isfinite(big), big == 0


_INT_OF = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def _exact_bits(x: torch.Tensor, exp: torch.Tensor, dim: int, p: int, pool: _Pool) -> torch.Tensor | None:
    """Bits below the row (column) scale ``2**exp`` that hold a one-component operand exactly.

    For each row: ``p - (e_min - E)`` where ``2**(e_min-1)`` is at most the smallest
    non-zero magnitude (its last bit is at ``2**(e_min - p)``). The smallest non-zero
    magnitude comes from the sign-cleared bit patterns (monotone in the magnitude) minus
    one, wrapped so that zeros become the largest value. Multi-component operands are not
    measured (``None``, meaning ``_UNMEASURED_BITS``): pass plain data as one component.
    """
    if x.shape[-1] != 1:
        return None
    lead = x.select(-1, 0)
    int_dtype = _INT_OF[x.dtype]
    mask = torch.iinfo(int_dtype).max
    bits = pool.take(lead.shape, int_dtype, lead.device)
    torch.bitwise_and(lead.view(int_dtype), mask, out=bits)
    low = bits.sub_(1).bitwise_and_(mask).amin(dim=dim, keepdim=True)
    pool.give(bits)
    smallest = (low + 1).view(x.dtype)  # all-zero rows wrap to -0.0: exponent 0, harmless
    e_min = torch.frexp(smallest).exponent
    return (p - (e_min - exp)).amax()


def _scaled_terms(x: torch.Tensor, exp: torch.Tensor, pool: _Pool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Components of ``x`` as float64 tensors times ``2**-exp`` (exact), so ``|term_0| < 1``.

    Also returns the normal powers of two whose product is ``2**-exp``: one for float32
    and narrower data (``|exp| <= 150``), two half steps for float64, where ``2**-exp``
    itself may leave the normal range (half steps never underflow early).
    """
    comps = unpack(x)
    out = [pool.take(c.shape, _ACC, c.device).copy_(c) for c in comps]
    if x.dtype != torch.float64:
        factors = [pow2(-exp)]
    else:
        half = torch.div(-exp, 2, rounding_mode="floor")
        factors = [pow2(half), pow2(-exp - half)]
    for t in out:
        for f in factors:
            t.mul_(f)
    return out, factors


# |A||B| in float32 suffices (only a factor 2 matters) while k * 2**-24 is small.
_G32_MAX_K = 1 << 20


def _abs_product_min(
    ta: torch.Tensor, tb: torch.Tensor, k: int, pool: _Pool, zeros: tuple[torch.Tensor, torch.Tensor], exact_zeros: bool = False
) -> torch.Tensor:
    """Smallest entry of ``|A| |B|`` (scaled leading components) as a 0-d tensor.

    Entries in all-zero rows of ``A`` / columns of ``B`` (``zeros``) and those with an
    inf or NaN (patched later) do not count. float32 first: its rounding (``2**-24`` per
    entry, ``k 2**-24`` in the sum) is covered by ``_G_LOWER``; underflow only lowers the
    minimum (conservative) but can turn a tiny positive entry into 0, so a zero minimum
    is recomputed in float64 with ``exact_zeros``: then the minimum over the positive
    entries is returned (``inf`` if there is none).
    """
    dtype = torch.float32 if not exact_zeros and k <= _G32_MAX_K else _ACC
    xa = pool.take(ta.shape, dtype, ta.device).copy_(ta).abs_()
    xb = pool.take(tb.shape, dtype, tb.device).copy_(tb).abs_()
    out_shape = _broadcast(xa.shape[:-2], xb.shape[:-2]) + (xa.shape[-2], xb.shape[-1])
    g = torch.matmul(xa, xb, out=pool.take(out_shape, dtype, ta.device))
    pool.give(xa, xb)
    g.masked_fill_(zeros[0], math.inf).masked_fill_(zeros[1], math.inf)
    if dtype == torch.float32:
        low = g.nan_to_num_(nan=math.inf, posinf=math.inf).amin()
        pool.give(g)
        return low
    bits = g.view(torch.int64).sub_(1).bitwise_and_(torch.iinfo(torch.int64).max).amin()
    pool.give(g)
    return torch.where(bits == torch.iinfo(torch.int64).max, math.inf, (bits + 1).view(_ACC))


def _wide_engine_ok(k: int, p_engine: int, p: int, nca: int, ncb: int, nc: int) -> bool:
    """Whether one engine GEMM on components summed in the engine dtype meets the bound.

    Proof: summing ``nca`` normalised components in the engine dtype gives ``a^`` with
    ``|a^ - a| <= gamma_(nca-1) (1 + 2**(1-p)) |a|`` (no cancellation), likewise ``b^``;
    any GEMM (any order, blocking, FMA) returns ``C^`` with
    ``|C^ - A^ B^| <= gamma_k |A^| |B^|`` (``gamma_n = n u_E / (1 - n u_E)``). So
    ``|C^ - C| <= e_w |A| |B|`` with ``e_w`` computed below; rounding ``C^`` to ``nc``
    components adds ``u^nc |C^| <= u^nc (1 + e_w) |A||B|``. With
    ``e_w <= 1.5 u^nc`` the total is below ``2.6 u^nc |A||B|``.
    """
    if p_engine <= p:
        return False
    u_e = 2.0**-p_engine

    def gamma(n: int) -> float:
        return n * u_e / (1 - n * u_e) if n * u_e < 0.5 else math.inf

    slack = 1 + 2.0 ** (2 - p)
    da = gamma(nca - 1) * slack
    db = gamma(ncb - 1) * slack
    e_w = (gamma(k) * (1 + da) * (1 + db) + da + db + da * db) * slack
    return e_w <= _WIDE_SHARE * 2.0 ** (-nc * p)


def _wide_product(a, b, nc, engine, addend, pool):
    """One engine GEMM on the components summed in the engine dtype (see _wide_engine_ok)."""
    wide = torch.matmul(arith.to_engine(a, engine), arith.to_engine(b, engine))
    if addend is None:
        return arith.from_engine(wide, a.dtype, nc)
    stats = _Stats(tuple(wide.shape), k=a.shape[-2])
    return _finish([wide.to(_ACC)], a.dtype, nc, addend, stats, pool)


# ------------------------------------------------------------------------------ planning


def _digit_bound(beta: int, n_terms: int, p: int) -> int:
    """Largest |digit| (an integer) of a slice of width ``beta`` of ``n_terms`` components.

    One component: its residue before band ``s`` is at most half a unit of band ``s - 1``
    (below 1 for the first band), so digits are at most ``2**beta``. Several
    components: at most two of them reach a band when ``beta <= p - 2``; otherwise the
    further ones add at most ``2**(beta + 2 - p)``.
    """
    if n_terms == 1 or beta <= p - 2:
        return 1 << beta
    return (1 << beta) + ((1 << beta) >> (p - 2)) + 1


def _dropped_weight(cut: int, ba: int, bb: int, sa: int, sb: int) -> float:
    """Sum of ``2**-(ba (s-1) + bb (t-1))`` over ``s <= sa``, ``t <= sb`` beyond ``cut``."""
    ra, rb = 2.0**-ba, 2.0**-bb
    full_b = (1 - rb**sb) / (1 - rb)
    total = 0.0
    for s in range(1, sa + 1):
        ea = ba * (s - 1)
        if ea > cut:
            total += ra ** (s - 1) * (1 - ra ** (sa - s + 1)) / (1 - ra) * full_b
            break
        kept_t = (cut - ea) // bb + 1
        if kept_t < sb:
            total += ra ** (s - 1) * rb**kept_t * (1 - rb ** (sb - kept_t)) / (1 - rb)
    return total


def _kept_pairs(cut: int, ba: int, bb: int, sa: int, sb: int) -> list[tuple[int, int]]:
    pairs = []
    for s in range(1, sa + 1):
        ea = ba * (s - 1)
        if ea > cut:
            break
        for t in range(1, min(sb, (cut - ea) // bb + 1) + 1):
            pairs.append((s, t))
    return pairs


# Bound on the sum of |pair products| relative to |A||B|: a component's digits add up to
# at most ~3.03 times its magnitude (first digit <= 2|x|, the rest a geometric series),
# so all pair products together are below 3.03**2 |A||B| < 10 |A||B|.
_PARTIAL_SUM_FACTOR = 10.0
# Share of the bound left to the float64 cascade that accumulates the large pair products.
_CASCADE_SHARE = 2.0**-5


def _term_bands(n_slices: int, beta: int, n_terms: int, p: int) -> int:
    """Component-bands extracted for ``n_slices`` slices (each costs ~3 elementwise passes)."""
    return sum(max(0, n_slices - max(1, (c * p - 1) // beta + 1) + 1) for c in range(n_terms))


@functools.lru_cache(maxsize=4096)
def _make_plan(
    k: int, engine: torch.dtype, p: int, nc: int, nca: int, ncb: int, bits_a: int, bits_b: int, log2_theta: int, size_log2_ratio: int = 0
) -> MatmulPlan:
    """Choose digit widths and slice pairs (module docstring, steps 2-5).

    ``bits_a``: bits below the row scale after which every scaled component of ``A`` is
    exactly represented (so slices beyond ``ceil(bits_a / beta_a)`` are zero).
    ``2**log2_theta``: allowed sum of dropped pair weights (digit bounds, scaled units)
    per unit of ``k``. ``size_log2_ratio``: ``log2(size(A) / size(B))``, rounded, to
    break ties between plans with as many GEMMs by their slicing work.
    """
    p_e = _ENGINE_P[engine]
    theta = 2.0**log2_theta * (1 - 2.0**-40)  # margin for the float sums below
    best = None
    for ba in range(1, p_e):
        ma = _digit_bound(ba, nca, p)
        if k * ma > 1 << p_e:
            break
        bb = 0
        while k * ma * _digit_bound(bb + 1, ncb, p) <= 1 << p_e:
            bb += 1
        if bb == 0:
            continue
        mb = _digit_bound(bb, ncb, p)
        fa, fb = ma / 2.0**ba, mb / 2.0**bb
        sa = max(1, -(-bits_a // ba))
        sb = max(1, -(-bits_b // bb))
        # smallest cut (an exponent) whose dropped weight is within theta; beyond
        # -log2(theta) + 64 bits the weight (at most sa * sb terms) is surely small enough
        lo, hi = 0, min(ba * (sa - 1) + bb * (sb - 1), -log2_theta + 64 + ba + bb)
        while lo < hi:
            mid = (lo + hi) // 2
            if fa * fb * _dropped_weight(mid, ba, bb, sa, sb) <= theta:
                hi = mid
            else:
                lo = mid + 1
        pairs = _kept_pairs(lo, ba, bb, sa, sb)
        used_a = max(s for s, _ in pairs)
        used_b = max(t for _, t in pairs)
        # ties: fewest elementwise passes (component-bands, weighted by operand size)
        passes = _term_bands(used_a, ba, nca, p) * 2.0**size_log2_ratio + _term_bands(used_b, bb, ncb, p)
        key = (len(pairs), passes, abs(ba - bb))
        if best is None or key < best[0]:
            best = (key, ba, bb, pairs, fa * fb, used_a, used_b)
    if best is None:
        raise ValueError(f"matmul: k = {k} is too large for exact slices in {engine}")
    _, ba, bb, pairs, f, used_a, used_b = best
    pairs.sort(key=lambda st: (ba * (st[0] - 1) + bb * (st[1] - 1), st[0]))
    # tail: the smallest pairs whose float64 summation error stays within its share
    u_acc = 2.0**-_P_ACC
    tail_weight, n_tail = 0.0, 0
    for s, t in reversed(pairs[1:]):
        w = f * 2.0 ** -(ba * (s - 1) + bb * (t - 1))
        n = n_tail + 1
        gamma = (n - 1) * u_acc / (1 - (n - 1) * u_acc)
        if gamma * (tail_weight + w) > theta * _TAIL_SHARE / _TRUNCATION_SHARE:
            break
        tail_weight, n_tail = tail_weight + w, n
    n_head = len(pairs) - n_tail
    n_terms = n_head + (1 if n_tail else 0)
    n_out = _accumulator_components(p, nc)
    # one rounded float64 addition of two terms is the final rounding when one float64
    # component carries the result; otherwise TwoSum levels until the cascade is exact enough
    levels = n_out if n_terms <= 2 and n_out == 1 else max(n_out, 2)
    while n_terms > 2 and (n_terms * u_acc) ** levels * _PARTIAL_SUM_FACTOR > _CASCADE_SHARE * 2.0 ** (-nc * p):
        levels += 1
    return MatmulPlan("sliced", engine, ba, bb, tuple(pairs), n_head, used_a, used_b, levels)


def _accumulator_components(p: int, nc: int) -> int:
    """float64 components that carry an ``nc``-component result of precision ``p``."""
    if p == _P_ACC:
        return nc  # the float64 components are the result
    return max(1, -(-(nc * p + _ACCUMULATION_GUARD_BITS) // _P_ACC))


# ------------------------------------------------------------------------------- slicing


class _Digits:
    """Extracts the slices of one operand in order (module docstring, step 2).

    Slice ``s`` is the sum over components of ``round(residue, 2**(-beta s))``, computed
    with the exact float64 trick ``(r + sigma) - sigma``, ``sigma = 1.5 * 2**(52 - beta s)``
    (valid as ``|r| < 2**(51 - beta s)``), after which ``r -= digit`` is exact. Component
    ``c`` is below ``2**(-c p)`` (normalised, scaled), so its digits start at band
    ``floor((c p - 1) / beta) + 1``. Slices are in scaled units for the float64 engine and
    integers (times ``2**(beta s)``) for the float32 engine, whose range is too small.
    """

    def __init__(self, terms: list[torch.Tensor], beta: int, p: int, engine: torch.dtype, pool: _Pool) -> None:
        self.terms = terms  # residues, updated in place
        self.beta = beta
        self.first = [max(1, (c * p - 1) // beta + 1) for c in range(len(terms))]
        self.engine = engine
        self.pool = pool

    def slice(self, s: int, last: bool, out: torch.Tensor) -> None:
        """Write slice ``s`` (1-based) into ``out``; ``last``: leave the residues as they are."""
        sigma = 1.5 * 2.0 ** (_P_ACC - 1 - self.beta * s)
        target = out if self.engine == _ACC else self.pool.like(self.terms[0])
        for c, r in enumerate(self.terms):
            if self.first[c] > s:
                break
            d = target if c == 0 else self.pool.like(r)
            torch.add(r, sigma, out=d).sub_(sigma)
            if not last:
                r.sub_(d)
            if c > 0:
                target.add_(d)
                self.pool.give(d)
        if self.engine != _ACC:
            out.copy_(target.mul_(2.0 ** (self.beta * s)))
            self.pool.give(target)


def _sliced_product(plan: MatmulPlan, stats: _Stats, dtype: torch.dtype, nc: int, addend, pool: _Pool) -> torch.Tensor:
    """Slice both operands, one GEMM per slice of the less-sliced operand, accumulate.

    The slices of the more-sliced operand are stacked (``A``: along rows, ``B``: along
    columns) in one buffer, so the kept pairs ``(s, t)`` with a common ``t`` (``s``) are one
    GEMM whose output blocks are the pair products: no extra flops, fewer and larger GEMMs.
    """
    p = float_format(dtype).p
    ba, bb = plan.beta_a, plan.beta_b
    ta, tb = stats.terms_a, stats.terms_b
    assert ta is not None and tb is not None  # the sliced path's stats are complete (_analyse)
    da = _Digits(ta, ba, p, plan.engine, pool)
    db = _Digits(tb, bb, p, plan.engine, pool)
    device = ta[0].device
    by_b = plan.slices_b <= plan.slices_a  # iterate over the slices of B, stack those of A
    m, k, n = ta[0].shape[-2], ta[0].shape[-1], tb[0].shape[-1]
    if by_b:
        stack = pool.take((*ta[0].shape[:-2], plan.slices_a * m, k), plan.engine, device)
        for i in range(plan.slices_a):
            da.slice(i + 1, i + 1 == plan.slices_a, stack.narrow(-2, i * m, m))
        single = pool.take(tb[0].shape, plan.engine, device)
    else:
        stack = pool.take((*tb[0].shape[:-2], k, plan.slices_b * n), plan.engine, device)
        for i in range(plan.slices_b):
            db.slice(i + 1, i + 1 == plan.slices_b, stack.narrow(-1, i * n, n))
        single = pool.take(ta[0].shape, plan.engine, device)
    pool.give(*(ta if by_b else tb))  # residues of the stacked operand are done
    groups: dict[int, int] = {}  # slice of the iterated operand -> stacked slices needed
    for s, t in plan.pairs:
        j, i = (t, s) if by_b else (s, t)
        groups[j] = max(groups.get(j, 0), i)
    head_pairs = set(plan.pairs[: plan.n_head])
    kept = set(plan.pairs)
    head: dict[tuple[int, int], torch.Tensor] = {}
    tail = None
    products = []
    for j in range(1, (plan.slices_b if by_b else plan.slices_a) + 1):
        (db if by_b else da).slice(j, j == max(groups), single)
        if j not in groups:
            continue
        rows = groups[j]
        if by_b:
            x, y = stack.narrow(-2, 0, rows * m), single
            shape = (*stats.out_shape[:-2], rows * m, n)
        else:
            x, y = single, stack.narrow(-1, 0, rows * n)
            shape = (*stats.out_shape[:-2], m, rows * n)
        prod = torch.matmul(x, y, out=pool.take(shape, plan.engine, device))
        if plan.engine != _ACC:
            wide = pool.take(shape, _ACC, device).copy_(prod)
            pool.give(prod)
            prod = wide
        products.append(prod)
        for i in range(1, rows + 1):
            s, t = (i, j) if by_b else (j, i)
            if (s, t) not in kept:
                continue
            block = prod.narrow(-2, (i - 1) * m, m) if by_b else prod.narrow(-1, (i - 1) * n, n)
            if plan.engine != _ACC:
                block.mul_(2.0 ** -(ba * s + bb * t))
            if (s, t) in head_pairs:
                head[(s, t)] = block
            elif tail is None:
                tail = block  # accumulate in place in the first tail block
            else:
                tail.add_(block)
        if j == max(groups):
            break
    pool.give(stack, single, *(tb if by_b else ta))
    # the blocks are views into ``products``: they are updated in place and the products
    # are recycled only after the result has been rounded
    terms = ([tail] if tail is not None else []) + [head[st] for st in reversed(plan.pairs[: plan.n_head])]
    comps = _compress(_cascade(terms, plan.levels, pool), _accumulator_components(p, nc), pool)
    comps = _unscale(comps, stats)
    out = _finish(comps, dtype, nc, addend, stats, pool)
    pool.give(*products)
    return out


def _cascade(terms: list[torch.Tensor], levels: int, pool: _Pool) -> list[torch.Tensor]:
    """Add ``terms`` into ``levels`` float64 accumulators; only the last level rounds.

    Each new term is TwoSum-added into level 0, its error into level 1, and so on; the
    error of the last level is added with rounding. With ``n`` terms whose partial sums
    are at most ``B`` in magnitude, level ``i`` stays below ``(n u)^i B`` and the
    result's error is at most ``(n u)^levels B`` (``u = 2**-53``).
    """
    acc: list[torch.Tensor | None] = [None] * levels
    for x in terms:
        for i in range(levels):
            a = acc[i]
            if a is None:
                acc[i] = x
                break
            if i == levels - 1:
                a.add_(x)
                pool.give(x)
                break
            acc[i], x = _two_sum_(a, x, pool)
    return [a for a in acc if a is not None]


def _compress(x: list[torch.Tensor], n_out: int, pool: _Pool) -> list[torch.Tensor]:
    """At most ``n_out`` float64 components, largest first, summing to ``sum(x)``.

    ``x`` is ordered by decreasing magnitude class (as :func:`_cascade` returns it).
    VecSum (a bottom-up TwoSum chain, exact) leaves the rounded sum on top and the errors
    below; the errors are compressed recursively to ``n_out - 1`` components and folded
    under the top by a top-down TwoSum pass. Only the innermost plain sum rounds: the
    error is at most ``u^n_out`` of the sum plus ``u^(n_out+1)`` of the inputs.
    """
    if len(x) == 1:
        return x
    if n_out == 1:
        total = x[-1]
        for t in reversed(x[:-1]):
            total = t.add_(total)
        return [total]
    s = x[-1]
    errors = []
    for t in reversed(x[:-1]):
        s, e = _two_sum_(t, s, pool)
        errors.append(e)
    errors.reverse()
    out = [s]
    for r in _compress(errors, n_out - 1, pool):
        out[-1], r = _two_sum_(out[-1], r, pool)
        out.append(r)
    return out


def _unscale(comps: list[torch.Tensor], stats: _Stats) -> list[torch.Tensor]:
    """Multiply float64 components in place by ``2**(E_i + F_j)`` (row and column exponents).

    Division by the scaling factors (normal powers of two) when the exponents are
    moderate: no intermediate underflow or overflow is possible for the scaled values,
    which lie between ``2**-700`` and ``k``. Otherwise three equal steps of the summed
    exponent, each a normal power of two and all of one sign, so only the final value can
    round.
    """
    # the sliced path's stats are complete (_analyse)
    assert stats.scale_a is not None and stats.scale_b is not None
    assert stats.exp_a is not None and stats.exp_b is not None
    if stats.exp_extreme <= _SAFE_BROADCAST_EXPONENT:
        for c in comps:
            for f in stats.scale_a + stats.scale_b:
                c.div_(f)
        return comps
    total = stats.exp_a + stats.exp_b
    e1 = torch.div(total, 3, rounding_mode="floor")
    e2 = torch.div(total - e1, 2, rounding_mode="floor")
    s1, s2, s3 = pow2(e1), pow2(e2), pow2(total - e1 - e2)
    return [c.mul_(s1).mul_(s2).mul_(s3) for c in comps]


def _finish(comps: list[torch.Tensor], dtype: torch.dtype, nc: int, addend, stats: _Stats, pool: _Pool) -> torch.Tensor:
    """Round a float64 expansion (plus an optional component-tensor addend) to ``nc`` components.

    ``comps`` are owned float64 buffers of the output shape, largest first, nearly
    non-overlapping. float64 results take them as they are (padded with zeros);
    narrower dtypes peel off ``fl(r_0)`` components, keeping the remainder exact.
    """
    p = float_format(dtype).p
    shape = stats.out_shape
    n_acc = _accumulator_components(p, nc)
    if addend is not None:
        extra = []
        for x in unpack(addend):
            buf = pool.take(shape, _ACC, x.device)
            extra.append(buf.copy_(x.expand(shape)))
        levels = max(n_acc, 2)
        n_terms = len(comps) + len(extra)
        while (n_terms * 2.0**-_P_ACC) ** levels * 2 > _CASCADE_SHARE * 2.0 ** (-nc * p):
            levels += 1
        comps = _compress(_cascade(list(comps) + extra, levels, pool), n_acc, pool)
    overflow_possible = stats.exp_extreme * 2 + stats.k.bit_length() + 2 >= math.frexp(torch.finfo(dtype).max)[1]
    out = torch.empty((nc, *shape), dtype=dtype, device=comps[0].device)
    if dtype == _ACC:
        for i in range(nc):
            if i < len(comps):
                out[i].copy_(comps[i])
            else:
                out[i].zero_()
        if nc > 1 and overflow_possible:  # behind an inf leading component the tail is zero
            out[1:].masked_fill_(~torch.isfinite(out[0]), 0.0)
        pool.give(*comps)
        return out.movedim(0, -1)
    r = list(comps)
    for i in range(nc):
        out[i].copy_(r[0])  # nearest rounding
        if i + 1 == nc:
            break
        r[0].sub_(out[i])  # exact
        for j in range(len(r) - 1):  # fold the remainder back on top
            r[j], r[j + 1] = _two_sum_(r[j], r[j + 1], pool)
    pool.give(*r)
    if nc > 1:  # behind an inf/NaN leading component the tail is zero
        out[1:].nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    return out.movedim(0, -1)


def _patch_nonfinite(out, a, b, stats: _Stats, nc: int, addend) -> torch.Tensor:
    """Outputs whose row of A or column of B holds inf/NaN: native product of leading parts."""
    assert stats.bad_a is not None and stats.bad_b is not None  # any_bad: the stats are complete (_analyse)
    bad = stats.bad_a | stats.bad_b  # (*batch, m, n) by broadcasting
    native = torch.matmul(a[..., 0], b[..., 0])
    if addend is not None:
        native = native + addend[..., 0]
    return torch.where(bad.unsqueeze(-1), arith.from_float(native, nc), out)
