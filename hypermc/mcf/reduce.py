"""Reductions of component tensors: sum, mean, dot, norm, amax, amin.

A component tensor ``x`` has shape ``(*shape, nc)``; ``dim`` always refers to the
logical ``shape`` (never to the trailing component dimension), negative dims count from
the end of ``shape``. ``u = 2**-p`` is the unit roundoff of the component dtype.
Arguments are validated by the callers (``MCTensor``); these kernels assume valid input.

Summation algorithm (:func:`sum`, :func:`dot`): a vectorised pairwise
tree with ``K = nc + 1`` error-free *slots* per node, i.e. a pairwise form of the
K-fold cascaded summation SumK (Ogita, Rump, Oishi, "Accurate sum and dot product",
SIAM J. Sci. Comput. 26(6), 2005). Slot ``j`` holds terms of order ``u^j`` relative to
the data. Merging two nodes adds slot by slot with TwoSum; every rounding error of slot
``j`` is carried into slot ``j + 1`` (exactly), and only the last slot is added with
plain rounding. So the whole tree is error-free except for the last slot, and the
``K`` root slots are renormalised to ``nc`` components at the end. One tree level
works on whole halves of the reduced axis (a loop over ``ceil(log2 n)`` levels, never
over elements); the total work is about one merge over ``n`` elements. Where a backend
registers the ``tree_sum`` kernel (the C++ kernels on the CPU, float32/float64 with
nc = 2, 3, 4) the whole tree and its final renormalisation are one call, generated from
:func:`_absorb` and ``eft.renormalize``'s finite path, with the same bits.
Merge cost in flops: ``6 K (K - 1) / 2 + K`` (nc = 1: 8, nc = 2: 21, nc = 3: 40,
nc = 4: 65).

Bound (first order in ``u``; ``S`` exact sum, ``h = ceil(log2 n)``)::

    |computed - S| <= u^nc |S| + (nc + 1)! (u (h + 1))^(nc + 1) sum_i |x_i|

The first term is the final rounding to ``nc`` components, the second comes from the
last slot; it is ``(nc+1)! (h+1)^(nc+1) u`` times ``u^nc sum |x_i|`` (6e-12 for float64
nc = 2 and n = 2^20, 3e-3 for float32 nc = 2), so the result is accurate to ``~ u^nc``
*relative to the exact sum* unless the data cancel by more than the inverse of that
factor — e.g. ``[1e20, 1, -1e20]`` in float64 with nc = 2 sums to exactly 1. For
nc = 1 this is a pairwise compensated sum (Sum2-like, ``<= u |S| + 2 (u (h+1))^2
sum |x_i|``): nearly correctly rounded, and tested to be at least as accurate as
``torch.sum``. Tested in ``tests/mcf/test_reduce.py``.

Sums of squares (:func:`sumsq`, :func:`sumsq_wide`, :func:`norm`) cannot cancel, so for
float32/float64 with ``nc <= 3`` they take a cheaper form that runs on :mod:`arith`'s fused
kernels: the squares at ``nc + 1`` components, summed pairwise by :func:`arith.add` at
``nc + 1``, relative error ``<= 8 (h + 1) u^(nc+1)`` before the rounding to ``nc``.

Non-finite values: an inf or NaN anywhere gives the IEEE result of summing the leading
components (inf, -inf or NaN) with a zero tail. A partial sum beyond the largest finite
value overflows to inf like plain summation does. Error terms that fall below the
subnormal range (products of tiny numbers in :func:`dot`) are lost, an absolute error
of at most a few times the smallest subnormal per product.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence

import torch

from . import arith, registry
from .eft import all_finite, float_format, pow2, renormalize, take, two_prod, unpack

__all__ = [
    "sum",
    "mean",
    "dot",
    "sumsq",
    "sumsq_wide",
    "one_minus_sumsq",
    "norm",
    "amax",
    "amin",
    "scatter",
    "scatter_add",
    "div_counts",
    "SCATTER_REDUCTIONS",
]

Dim = int | Sequence[int] | None


# ------------------------------------------------------------------------ layout helpers


def _reduce_dims(ndim: int, dim: Dim) -> tuple[int, ...]:
    """Normalised, sorted logical dims to reduce (``None`` or ``()`` means all)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    if len(dim) == 0:
        return tuple(range(ndim))
    return tuple(sorted({d % ndim for d in dim}))


def _to_layout(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, int, int, list[int]]:
    """Bring the reduced dims of ``x`` together into one axis of length ``n``.

    Returns ``(t, axis, n, kept_shape)`` where ``t`` has shape ``(n, *kept, nc)``
    (``axis = 0``) or ``(*kept, n, nc)`` (``axis = len(kept)``). A trailing run of
    reduced dims is reshaped in place (a view when possible); otherwise the reduced dims
    are permuted to the front, so the halves of every tree level are contiguous blocks.
    """
    ndim = x.dim() - 1
    shape = list(x.shape[:-1])
    nc = x.shape[-1]
    kept = [d for d in range(ndim) if d not in dims]
    kept_shape = [shape[d] for d in kept]
    n = math.prod(shape[d] for d in dims)
    if dims == tuple(range(ndim - len(dims), ndim)):
        return x.reshape(*kept_shape, n, nc), len(kept_shape), n, kept_shape
    t = x.permute(*dims, *kept, ndim).reshape(n, *kept_shape, nc)
    return t, 0, n, kept_shape


def _restore(out: torch.Tensor, shape: Sequence[int], dims: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    """Give a reduced result of shape ``(*kept, nc)`` the shape torch would (``keepdim``)."""
    if not keepdim:
        return out
    full = [1 if d in dims else s for d, s in enumerate(shape)]
    return out.reshape(*full, out.shape[-1])


# ------------------------------------------------------------------------- the sum tree


def _two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`eft.two_sum`, bitwise identical, with three allocations instead of six.

    The same six operations in the same order, but intermediate results are written
    into buffers that are already allocated. On CPU the allocations dominate for large tensors
    (measured ~2x faster at 5e5 float32 elements), and the tree spends all its time here.
    """
    s = a + b
    bb = s - a
    e = s - bb
    torch.sub(a, e, out=e)
    torch.sub(b, bb, out=bb)
    return s, e.add_(bb)


def _absorb(slots: list[list[torch.Tensor]]) -> list[torch.Tensor | None]:
    """Add the terms of every slot; carry each TwoSum error into the next slot.

    Slot ``j`` (of ``K``) receives its own terms plus the errors carried from slot
    ``j - 1``; they are added with a chain of TwoSums whose errors go to slot ``j + 1``.
    The last slot is added with plain rounding (its errors are of order ``u^K``), in
    place into a carried error (a fresh tensor) when there is one.
    Returns one tensor per slot, or ``None`` for a slot that received nothing.
    """
    last = len(slots) - 1
    out: list[torch.Tensor | None] = []
    carry: list[torch.Tensor] = []
    for j, planes in enumerate(slots):
        if j == last:
            if carry:  # fresh tensors: add in place
                s = carry[0]
                for t in carry[1:] + list(planes):
                    s.add_(t)
            elif planes:
                s = planes[0]
                for t in planes[1:]:
                    s = s + t
            else:
                s = None
            out.append(s)
            break
        terms = list(planes) + carry
        carry = []
        if not terms:
            out.append(None)
            continue
        s = terms[0]
        for t in terms[1:]:
            s, e = _two_sum(s, t)
            carry.append(e)
        out.append(s)
    return out


def _cat_level(m: torch.Tensor | None, r: torch.Tensor | None, ref: torch.Tensor, axis: int) -> torch.Tensor:
    """Append an odd element's slot ``r`` to a merged slot ``m`` (``None`` means zeros)."""
    m = torch.zeros_like(ref) if m is None else m
    r = torch.zeros_like(ref.narrow(axis, 0, 1)) if r is None else r
    return torch.cat([m, r], dim=axis)


def _fill(planes: list[torch.Tensor | None], like: torch.Tensor) -> list[torch.Tensor]:
    return [torch.zeros_like(like) if p is None else p for p in planes]


def _tree(slots: list[list[torch.Tensor]], axis: int, n: int, nc: int) -> torch.Tensor:
    """Pairwise tree over ``axis`` (length ``n``) of slotted terms -> ``(*kept, nc)``.

    ``slots[j]`` lists the terms of order ``u^j`` (tensors of one shape). Level by level
    the first half of the axis is merged with the second half; an odd last element is
    carried to the next level. The root's slots are renormalised to ``nc`` components.
    """
    like = slots[0][0]
    if n == 0:
        shape = list(like.shape)
        del shape[axis]
        return torch.zeros(*shape, nc, dtype=like.dtype, device=like.device)
    while n > 1:
        h = n // 2
        pairs = [[p.narrow(axis, 0, h) for p in s] + [p.narrow(axis, h, h) for p in s] for s in slots]
        merged = _absorb(pairs)
        if n % 2:
            rest = _absorb([[p.narrow(axis, 2 * h, 1) for p in s] for s in slots])
            ref = merged[0]
            assert ref is not None  # slot 0 (the leading terms) is never empty
            merged = [_cat_level(m, r, ref, axis) for m, r in zip(merged, rest)]
        slots = [[m] if m is not None else [] for m in merged]
        n = h + n % 2
    return _finish([p.squeeze(axis) if p is not None else None for p in _absorb(slots)], nc)


def _finish(root: list[torch.Tensor | None], nc: int) -> torch.Tensor:
    """Root slots of a sum tree renormalised to ``nc`` components (inf / NaN: the IEEE
    sum of the leading terms, in slot 0, with a zero tail; the slots below are NaN)."""
    lead = root[0]
    assert lead is not None  # slot 0 (the leading terms) is never empty
    total = renormalize(_fill(root, lead), nc)
    if nc == 1:
        return torch.where(torch.isfinite(lead), total[..., 0], lead).unsqueeze(-1)
    return torch.where(torch.isfinite(lead).unsqueeze(-1), total, arith.from_float(lead, nc))


def _component_slots(t: torch.Tensor) -> list[list[torch.Tensor]]:
    """Slots of a component tensor: component ``j`` in slot ``j``, one empty guard slot."""
    return [[c] for c in unpack(t)] + [[]]


# ------------------------------------------------------------------------------ kernels


def sum(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:  # noqa: A001
    """Accurate sum of a component tensor over ``dim``.

    Args:
        x: component tensor ``(*shape, nc)``.
        dim: logical dim or dims to reduce; ``None`` (or ``()``) reduces all.
        keepdim: keep reduced dims with size 1.

    Returns:
        component tensor ``(*out_shape, nc)``; the sum over an empty dim is 0.

    Precondition:
        components normalised (non-overlapping, decreasing). Other inputs are still
        summed, but the second term of the bound assumes ``|x_i[j]| <= u^j |x_i|``.

    Bound:
        ``|computed - S| <= u^nc |S| + (nc+1)! (u (h+1))^(nc+1) sum_i |x_i|``,
        ``h = ceil(log2 n)`` (module docstring); so ``<= 2 u^nc sum_i |x_i|`` for every
        float64 case and for float32 with nc <= 2 (n <= 2^30). The second term is a
        worst-case estimate; for float32 nc >= 3 and the half formats it exceeds
        ``u^nc sum_i |x_i|`` while the measured errors stay below ``1 u^nc sum_i |x_i|``.
        Tested against ``2 u^nc sum_i |x_i|`` for all formats (n <= 4097).

    Reference:
        pairwise form of SumK, Ogita–Rump–Oishi 2005 (module docstring).

    Example:
        >>> x = torch.tensor([[1e20, 0.0], [1.0, 0.0], [-1e20, 0.0]], dtype=torch.float64)
        >>> sum(x)
        tensor([1., 0.], dtype=torch.float64)
    """
    ndim = x.dim() - 1
    if ndim == 0:
        return x.clone()
    dims = _reduce_dims(ndim, dim)
    t, axis, n, _ = _to_layout(x, dims)
    nc = x.shape[-1]
    fused = registry.call("tree_sum", t, axis, n)  # the same tree (and finish) in one call
    if fused is None:
        out = _tree(_component_slots(t), axis, n, nc)
    else:
        out = _finish(fused.root, nc) if fused.finished is None else fused.finished
    return _restore(out, x.shape[:-1], dims, keepdim)


def mean(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:
    """Mean over ``dim``: :func:`sum` divided by the exact element count.

    The count is a plain float of the dtype when it is exactly representable (then
    :func:`arith.div_float`; for nc = 1 this is ``sum / n`` in plain arithmetic).
    Otherwise (float16/bfloat16 with large counts) the count is scaled by a power of two
    into range, split into ``nc`` components and divided with :func:`arith.div`.

    Bound:
        relative to the exact mean, the :func:`sum` bound divided by ``|S|`` plus 8 u^nc
        (division; exact count). Mean over an empty dim is NaN (0 / 0).

    Example:
        >>> x = torch.tensor([[1e20, 0.0], [1.0, 0.0], [-1e20, 0.0], [2.0, 0.0]], dtype=torch.float64)
        >>> mean(x)  # (1e20 + 1 - 1e20 + 2) / 4; plain float64 gives 0.5
        tensor([0.7500, 0.0000], dtype=torch.float64)
    """
    ndim = x.dim() - 1
    if ndim == 0:
        return x.clone()
    dims = _reduce_dims(ndim, dim)
    count = math.prod(x.shape[d] for d in dims)
    s = sum(x, dims, keepdim)
    return _div_count(s, count)


def _div_count(s: torch.Tensor, count: int) -> torch.Tensor:
    """``s / count`` with the integer ``count`` represented exactly where possible."""
    dtype, nc = s.dtype, s.shape[-1]
    fmt = float_format(dtype)
    if count < 2**fmt.p and count <= torch.finfo(dtype).max:
        return arith.div_float(s, torch.full_like(s[..., 0], float(count)))
    # shift the count below the largest power of two of the dtype, split it into
    # components (exact when count fits nc * p bits), divide, undo the shift
    max_exp = math.frexp(torch.finfo(dtype).max)[1] - 1
    k = builtins.max(0, count.bit_length() - max_exp)
    scaled = torch.tensor(math.ldexp(float(count), -k), dtype=torch.float64, device=s.device)
    c = arith.from_engine(scaled.expand(s.shape[:-1]), dtype, nc)
    q = arith.div(s, c)
    return q * _pow2(torch.full_like(s[..., 0], -k, dtype=torch.int32), dtype).unsqueeze(-1)


def _product_slots(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int, symmetric: bool = False) -> list[list[torch.Tensor]]:
    """Slots (``K = nc + 1``) holding ``x * y`` elementwise, exact up to order ``u^nc``.

    Products ``x_a y_b`` with ``a + b < nc`` are split exactly with TwoProd (product in
    slot ``a + b``, error in slot ``a + b + 1``); those with ``a + b == nc`` are plain
    products in the last slot; higher orders (``<= u^(nc+1)`` relative) are dropped.
    ``symmetric=True`` (``x is y``) forms ``x_a x_b + x_b x_a`` as one doubled product.
    """
    slots: list[list[torch.Tensor]] = [[] for _ in range(nc + 1)]
    for a in range(nc):
        for b in range(nc):
            order = a + b
            if order > nc or (symmetric and b < a):
                continue
            xa, yb = xs[a], ys[b]
            if symmetric and a != b:
                yb = 2 * yb  # exact (power of two) unless it overflows
            if order < nc:
                p, e = two_prod(xa, yb)
                slots[order].append(p)
                slots[order + 1].append(e)
            else:
                slots[nc].append(xa * yb)
    return slots


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Accurate dot product along the last logical dim (leading dims broadcast).

    Every product ``x_i y_i`` is expanded exactly up to order ``u^nc`` (TwoProd of the
    component products, see ``_product_slots``) and the expansions are summed by the
    slotted pairwise tree. Operands with different ``nc`` give the larger ``nc``.

    Args:
        x, y: component tensors ``(*bx, n, ncx)`` and ``(*by, n, ncy)``.

    Returns:
        component tensor ``(*broadcast(bx, by), nc)``.

    Bound (first order, ``D`` exact dot product, ``h = ceil(log2 n)``):
        ``|computed - D| <= u^nc |D| + (nc+1)! (u (h+3))^(nc+1) sum_i |x_i y_i|``
        (each product's expansion counts as two more tree levels), plus the error terms
        lost to underflow. Tested.

    Example:
        >>> x = torch.tensor([[1e16, 0.0], [1.0, 0.0], [-1e16, 0.0]], dtype=torch.float64)
        >>> y = torch.ones(3, 1, dtype=torch.float64)  # nc = 1: padded to x's nc = 2
        >>> dot(x, y)
        tensor([1., 0.], dtype=torch.float64)
    """
    nc = builtins.max(x.shape[-1], y.shape[-1])
    comps = torch.broadcast_tensors(*unpack(arith.pad(x, nc)), *unpack(arith.pad(y, nc)))
    xs, ys = list(comps[:nc]), list(comps[nc:])
    return _tree(_product_slots(xs, ys, nc), xs[0].dim() - 1, xs[0].shape[-1], nc)


#: The widest component count whose squares :func:`sumsq` forms by :mod:`arith` (at
#: ``nc + 1 <= 4`` components, what arith's fused kernels cover); wider expansions and
#: other dtypes take the slotted tree. Chosen by dtype and nc only, so every backend
#: computes the same algorithm.
PAIRWISE_MAX_NC = 3


def _pairwise(x: torch.Tensor) -> bool:
    return x.dtype in (torch.float32, torch.float64) and x.shape[-1] <= PAIRWISE_MAX_NC


def sumsq(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:
    """Accurate sum of squares over ``dim`` (no scaling: may overflow or underflow).

    float32/float64 with ``nc <= 3`` (:data:`PAIRWISE_MAX_NC`): :func:`sumsq_wide` (the
    squares and their pairwise sum at ``nc + 1`` components) rounded once to ``nc``
    (:func:`arith.round_to`), relative error ``<= u^nc + 8 (h + 1) u^(nc+1)``. Otherwise
    the slotted tree: squares expanded exactly up to order ``u^nc`` like in :func:`dot`
    (the symmetric cross terms doubled), relative error ``<= u^nc + (nc+1)! (u (h+3))^(nc+1)``
    (first order). ``h = ceil(log2 n)``; nothing cancels. Non-finite values give the IEEE
    sum of the squares of the leading components with a zero tail.

    Example:
        >>> x = torch.tensor([[1 + 2**-30, 0.0]], dtype=torch.float64)
        >>> sumsq(x).tolist() == [1 + 2**-29, 2**-60]  # (1 + 2^-30)^2, exactly
        True
    """
    if _pairwise(x):
        nc = x.shape[-1]
        if x.dim() > 1 and _reduce_dims(x.dim() - 1, dim) == (x.dim() - 2,):  # the last dim: one call
            res = registry.call("rowsumsq", x, "rounded")
            if res is not None:
                out = _patch_rows(res, x, lambda rows: arith.round_to(sumsq_wide(rows, dim=-1), nc))
                return out.unsqueeze(-2) if keepdim else out
        return arith.round_to(sumsq_wide(x, dim, keepdim), nc)
    return _sumsq_tree(x, dim, keepdim)


def _sumsq_tree(x: torch.Tensor, dim: Dim, keepdim: bool) -> torch.Tensor:
    """:func:`sumsq` by the slotted tree."""
    ndim = x.dim() - 1
    if ndim == 0:
        return arith.square(x)
    dims = _reduce_dims(ndim, dim)
    t, axis, n, _ = _to_layout(x, dims)
    nc = x.shape[-1]
    comps = unpack(t)
    out = _tree(_product_slots(comps, comps, nc, symmetric=True), axis, n, nc)
    return _restore(out, x.shape[:-1], dims, keepdim)


def sumsq_wide(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:
    """The sum of squares over ``dim`` at ``nc + 1`` components, not rounded to ``nc``.

    The squares of the coordinates padded to ``nc + 1`` components (:func:`arith.mul`),
    summed pairwise by :func:`arith.add`: the first half of the reduced axis plus the
    second half, level by level (an odd last element carried to the next level), so
    ``h = ceil(log2 n)`` additions per element. Each of those operations is accurate to
    ``8 u^(nc+1)`` (their tested bound) and nothing cancels, so the relative error is at
    most ``8 (h + 1) u^(nc+1)``. Being :mod:`arith` calls, it runs on their fused kernels
    where a backend has them (CPU and CUDA: the same bits as the torch networks). For
    formulas that subtract the sum from something of its size, e.g. the Poincaré ball's
    ``1 - |x|^2``, which need the extra component.

    Other dtypes and ``nc > 3`` (beyond arith's fused kernels at ``nc + 1``): the slotted
    tree of :func:`sumsq` on the coordinates padded to ``nc + 1`` components.

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-60], [3.0, 0.0]], dtype=torch.float64)
        >>> sumsq_wide(x).tolist()  # 10 + 2^-59 + 2^-120, exactly
        [10.0, 1.734723475976807e-18, 7.52316384526264e-37]
    """
    nc = x.shape[-1]
    if not _pairwise(x):
        return _sumsq_tree(arith.pad(x, nc + 1), dim, keepdim)
    if x.dim() == 1:
        w = arith.pad(x, nc + 1)
        return arith.mul(w, w)
    dims = _reduce_dims(x.dim() - 1, dim)
    if dims == (x.dim() - 2,):  # the last dim: one fused kernel call where a backend has it
        res = registry.call("rowsumsq", x, "wide")
        if res is not None:
            out = _patch_rows(res, x, lambda rows: _restore(_sumsq_wide_levels(rows, (1,)), rows.shape[:-1], (1,), False))
            return out.unsqueeze(-2) if keepdim else out
    return _restore(_sumsq_wide_levels(x, dims), x.shape[:-1], dims, keepdim)


def _patch_rows(res: object, x: torch.Tensor, general: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """A row kernel's ``out`` ``(*, m)`` with the rows it rejects (``ok`` false)
    recomputed by ``general`` on those rows of ``x`` ``(*, n, nc)``."""
    out, ok, bad = res.out, res.ok, res.bad  # type: ignore[attr-defined]
    if bad:
        rejected = ~ok
        out[rejected] = general(x[rejected])
    return out


def _sumsq_wide_levels(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """:func:`sumsq_wide` over ``dims`` by :mod:`arith` calls, one per level; the reduced
    dims removed."""
    nc = x.shape[-1]
    t, axis, n, _ = _to_layout(x, dims)
    # planar (component planes of shape (n, *kept)), the reduced axis first: the halves of
    # every level are then blocks of each plane, which the fused kernels read in place
    planes = t.movedim(-1, 0).movedim(axis + 1, 1)
    buf = planes.new_empty((nc + 1, *planes.shape[1:]))
    buf[:nc] = planes
    buf[nc] = 0
    t = buf.movedim(0, -1)
    if n == 0:
        out = t.new_zeros(*t.shape[1:-1], nc + 1)
    else:
        t = arith.mul(t, t)
        while n > 1:
            h = n // 2
            s = arith.add(t[:h], t[h : 2 * h])
            if n % 2:  # the odd last element joins the next level (planar again)
                s = torch.cat([s.movedim(-1, 0), t[2 * h :].movedim(-1, 0)], dim=1).movedim(0, -1)
            t, n = s, h + n % 2
        out = t[0]
    return out


def one_minus_sumsq(x: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """``1 - c |x|^2`` over the last logical dim, formed at ``nc + 1`` components and
    rounded once to ``nc``: ``(*, n, nc) -> (*, nc)``.

    The sum of squares :func:`sumsq_wide`, the product with ``c`` (where ``c != 1``) and
    the subtraction from 1 by :mod:`arith` at ``nc + 1`` components, then
    :func:`arith.round_to`. Each step is accurate to ``8 u^(nc+1)``, so before the
    rounding the absolute error is at most ``8 (ceil(log2 n) + 3) u^(nc+1) max(1,
    c |x|^2)``: the result is relatively accurate to ``u^nc`` as long as it exceeds about
    ``8 (ceil(log2 n) + 3) u c |x|^2`` (the Poincaré ball's deficit, where ``1 - |x|^2``
    of float64 coordinates would keep no digit near the boundary). For float32/float64
    with ``nc = 2, 3`` the whole row is one fused kernel call where a backend has it
    (the same operations in the same order, so the same bits).

    Example:
        >>> x = torch.tensor([[1.0 - 2.0**-40, 0.0], [0.0, 0.0]], dtype=torch.float64)  # one row, nc = 2
        >>> one_minus_sumsq(x).tolist() == [2.0**-39 - 2.0**-80, 0.0]  # 1 - (1 - 2^-40)^2, exactly
        True
    """
    if _pairwise(x):
        res = registry.call("rowsumsq", x, "one_minus", float(c))
        if res is not None:
            return _patch_rows(res, x, lambda rows: _one_minus_sumsq(rows, c))
    return _one_minus_sumsq(x, c)


def _one_minus_sumsq(x: torch.Tensor, c: float) -> torch.Tensor:
    nc = x.shape[-1]
    s = sumsq_wide(x, dim=-1)
    if c != 1.0:
        s = arith.mul(s, arith.from_engine(torch.tensor(c, dtype=torch.float64, device=x.device).expand(s.shape[:-1]), x.dtype, nc + 1))
    one = arith.from_float(torch.ones_like(s[..., 0]), nc + 1)
    return arith.round_to(arith.sub(one, s), nc)


def _pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Exact ``2**e`` in ``dtype`` for an integer tensor ``e`` in the normal range."""
    return pow2(e).to(dtype)


def _scale(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``x * 2**e`` (``e`` broadcast over the components) in two exact half steps.

    Two steps so that ``2**e`` itself never overflows or underflows (``|e|`` can reach
    ``emax - emin``); each product is exact unless the result is subnormal or overflows.
    """
    half = torch.div(e, 2, rounding_mode="floor")
    x = x * _pow2(half, x.dtype).unsqueeze(-1)
    return x * _pow2(e - half, x.dtype).unsqueeze(-1)


def norm(x: torch.Tensor, dim: Dim = -1, keepdim: bool = False) -> torch.Tensor:
    """Euclidean norm over ``dim``, safe from overflow and underflow.

    Algorithm: ``e`` = binary exponent of ``max |x_0|`` over ``dim``; the data are
    scaled by ``2**-e`` (exact), so the largest entry lies in ``[1/2, 1)``; then
    ``sqrt(sumsq(x 2**-e)) * 2**e`` with :func:`sumsq` and :func:`arith.sqrt`. Entries
    of size 1e200 or 1e-200 in float64 neither overflow nor underflow; the norm of
    zeros is 0; inf gives inf and NaN gives NaN. Over the last dim, where a backend has
    the row kernel, the exponent, the scaling and the sum of squares are one call.

    Bound:
        relative error ``<= u^nc / 2 + 8 u^nc`` (sum of squares + sqrt), plus the
        contributions of entries below ``2**(emin - 1)`` times the largest one, which
        scaling flushes (their squares are far below ``u^nc`` of the result).

    Example:
        >>> x = torch.tensor([[3 * 2.0**600, 0.0], [4 * 2.0**600, 0.0]], dtype=torch.float64)
        >>> norm(x).tolist() == [5 * 2.0**600, 0.0]  # the squares would overflow float64
        True
    """
    ndim = x.dim() - 1
    if ndim == 0:
        return arith.abs(x)
    dims = _reduce_dims(ndim, dim)
    if math.prod(x.shape[d] for d in dims) == 0:
        return sumsq(x, dims, keepdim)
    res = registry.call("rowsumsq", x, "scaled") if x.dim() > 1 and dims == (ndim - 1,) and _pairwise(x) else None
    if res is not None:  # the scaling and the sum of squares of each row in one call
        e = res.exponent.unsqueeze(-1)
        ss = res.out
        if res.bad:
            rejected = ~res.ok
            ss[rejected] = sumsq(_scale(x[rejected], -e[rejected]), -1)
        ss = ss.unsqueeze(-2)
    else:
        big = torch.amax(x[..., 0].abs(), dim=dims, keepdim=True)
        e = torch.frexp(big)[1]  # 0 for zero, inf and NaN: no scaling
        ss = sumsq(_scale(x, -e), dims, keepdim=True)
    r = _scale(arith.sqrt(ss), e)
    # a norm that overflows gets a zero tail (on the CPU one finiteness test skips the where)
    if x.shape[-1] > 1 and not (r.device.type == "cpu" and all_finite(r[..., 0])):
        r = torch.where(torch.isfinite(r[..., :1]), r, arith.from_float(r[..., 0], x.shape[-1]))
    if not keepdim:
        r = r.reshape(*[s for d, s in enumerate(x.shape[:-1]) if d not in dims], x.shape[-1])
    return r


# ----------------------------------------------------------------------------- amax / amin


def _extreme(x: torch.Tensor, dim: Dim, keepdim: bool, largest: bool) -> torch.Tensor:
    ndim = x.dim() - 1
    if ndim == 0:
        return x.clone()
    dims = _reduce_dims(ndim, dim)
    nc = x.shape[-1]
    if nc == 1:
        op = torch.amax if largest else torch.amin
        return op(x[..., 0], dim=dims, keepdim=keepdim).unsqueeze(-1)
    t, axis, n, _ = _to_layout(x, dims)
    if n == 0:
        raise ValueError(
            f"amax/amin of an empty dimension is undefined: reduced dims {dims} of shape {tuple(x.shape[:-1])} have no elements"
        )
    pick = arith.maximum if largest else arith.minimum
    nan = torch.isnan(t[..., 0]).any(dim=axis)
    while n > 1:
        h = n // 2
        merged = pick(t.narrow(axis, 0, h), t.narrow(axis, h, h))
        if n % 2:
            merged = torch.cat([merged, t.narrow(axis, 2 * h, 1)], dim=axis)
        t = merged
        n = h + n % 2
    # NaN propagates whatever the comparison does with unordered operands
    nan_value = arith.from_float(torch.full_like(nan, math.nan, dtype=x.dtype), nc)
    out = torch.where(nan.unsqueeze(-1), nan_value, t.squeeze(axis))
    return _restore(out, x.shape[:-1], dims, keepdim)


def amax(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:
    """Largest value over ``dim`` (exact; values only). NaN if any element is NaN.

    nc = 1 is ``torch.amax``; otherwise a pairwise tree of exact
    :func:`arith.maximum` comparisons. Raises ``ValueError`` for an empty dim.

    Example:
        >>> x = torch.tensor([[1.0, 2**-60], [1.0, 2**-61], [-2.0, 0.0]], dtype=torch.float64)
        >>> amax(x).tolist() == [1.0, 2**-60]  # decided by the second component
        True
    """
    return _extreme(x, dim, keepdim, largest=True)


def amin(x: torch.Tensor, dim: Dim = None, keepdim: bool = False) -> torch.Tensor:
    """Smallest value over ``dim`` (exact; values only). NaN if any element is NaN.

    nc = 1 is ``torch.amin``; otherwise a pairwise tree of exact
    :func:`arith.minimum` comparisons. Raises ``ValueError`` for an empty dim.

    Example:
        >>> x = torch.tensor([[1.0, 2**-60], [1.0, -2**-61], [3.0, 0.0]], dtype=torch.float64)
        >>> amin(x).tolist() == [1.0, -2**-61]  # decided by the second component
        True
    """
    return _extreme(x, dim, keepdim, largest=False)


# ------------------------------------------------------------------- grouped reductions
#
# Reductions of entries into slots (scatter, index_add, segment reductions). The entries
# are sorted by target slot; every slot's run is then reduced by a pairwise tree that
# merges the entries of rank 2k and 2k + 1 within the run, level by level, over all runs
# at once (ceil(log2 m) levels, m = the largest run). For sums the tree is the slotted
# tree of :func:`sum`, so a slot's sum has :func:`sum`'s bound over its own entries.

SCATTER_REDUCTIONS = ("sum", "mean", "prod", "amax", "amin")


def _ranks(target: torch.Tensor) -> torch.Tensor:
    """Position of every entry within its run of a sorted ``target``."""
    m = len(target)
    pos = torch.arange(m, device=target.device)
    starts = torch.ones_like(target, dtype=torch.bool)
    starts[1:] = target[1:] != target[:-1]
    return pos - torch.cummax(torch.where(starts, pos, 0), 0).values


def _pairs(target: torch.Tensor, rank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tree level: the entries of even rank, their successors (clamped to the last
    entry) and whether the successor is in the same run."""
    left = (rank % 2 == 0).nonzero().squeeze(-1)
    right = (left + 1).clamp(max=len(target) - 1)
    return left, right, (left + 1 < len(target)) & (target[right] == target[left])


def _run_sums(vals: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Accurate sum of every run of a sorted ``target``: ``(runs, nc)``, in run order.

    A missing partner is a zero (exact in TwoSum). Bound: :func:`sum`'s, per run.
    """
    nc = vals.shape[-1]
    slots = _component_slots(vals)
    rank = _ranks(target)
    while bool((rank > 0).any()):
        left, right, paired = _pairs(target, rank)
        pair = paired.reshape(-1, *[1] * (vals.dim() - 2))  # broadcast over the rows' other dims
        halves = [[p[left] for p in s] + [torch.where(pair, p[right], 0) for p in s] for s in slots]
        slots = [[m] if m is not None else [] for m in _absorb(halves)]
        target, rank = target[left], rank[left] // 2
    return _finish(_absorb(slots), nc)


def _run_combine(
    vals: torch.Tensor,
    target: torch.Tensor,
    combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    identity: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Every run of a sorted ``target`` reduced by a pairwise tree of ``combine``;
    a missing partner is ``identity(left)``. ``(runs, nc)`` in run order."""
    rank = _ranks(target)
    while bool((rank > 0).any()):
        left, right, paired = _pairs(target, rank)
        a = vals[left]
        b = torch.where(paired.reshape(-1, *[1] * (vals.dim() - 1)), vals[right], identity(a))
        vals, target, rank = combine(a, b), target[left], rank[left] // 2
    return vals


def div_counts(s: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``s / counts`` elementwise, the integer counts (``(*shape,)``, >= 1) taken exactly.

    A plain float division where every count is a float of the dtype; otherwise each
    count is shifted below the dtype's largest power of two, split into components
    (exact while it fits ``nc`` components) and divided in MC arithmetic.

    Example:
        >>> s = torch.tensor([[1.0, 0.0], [6.0, 0.0]], dtype=torch.float64)
        >>> div_counts(s, torch.tensor([3, 2])).tolist()  # 1/3 to about 106 bits
        [[0.3333333333333333, 1.850371707708594e-17], [3.0, 0.0]]
    """
    dtype, nc = s.dtype, s.shape[-1]
    fmt = float_format(dtype)
    top = int(counts.max()) if counts.numel() else 0
    if top < 2**fmt.p and top <= torch.finfo(dtype).max:
        return arith.div_float(s, counts.to(dtype))
    max_exp = math.frexp(torch.finfo(dtype).max)[1] - 1
    c64 = counts.to(torch.float64)
    k = (torch.frexp(c64)[1] - max_exp).clamp(min=0)
    scaled = torch.ldexp(c64, -k.to(torch.float64))
    q = arith.div(s, arith.from_engine(scaled, dtype, nc))
    return q * _pow2(-k, dtype).unsqueeze(-1)


def scatter(base: torch.Tensor, target: torch.Tensor, vals: torch.Tensor, reduce: str, include_self: bool = True) -> torch.Tensor:
    """Reduce entries into the slots of ``base`` (a new tensor): ``scatter_reduce``'s kernel.

    Slot ``t`` of the result is the reduction of the entries ``vals[i]`` with
    ``target[i] == t``, together with ``base[t]`` when ``include_self``; slots no entry
    targets keep ``base``'s value (whatever ``include_self``). A slot is an element, or a
    row of elements that are reduced alike (elementwise): ``vals`` of shape
    ``(m, *row, nc)`` reduce into the slots of ``base`` viewed as ``(-1, *row, nc)``.

    Args:
        base: component tensor ``(*shape, *row, nc)``.
        target: int64 tensor ``(m,)`` of flat (row-major) slot numbers of ``shape``.
        vals: component tensor ``(m, *row, nc')`` (``row`` may be empty); the result has
            the larger of ``nc`` and ``nc'``.
        reduce: ``"sum"``, ``"mean"`` (divided by the number of reduced values),
            ``"prod"``, ``"amax"`` or ``"amin"``.
        include_self: whether ``base``'s values of the targeted slots take part.

    Returns:
        component tensor of ``base``'s shape (with the larger ``nc``).

    Bound:
        sum: :func:`sum`'s over each slot's values; mean: that plus the division (8 u^nc,
        exact count); amax / amin: exact (NaN if any value is NaN); prod: a tree of
        :func:`arith.mul` whose ``k - 1`` products' relative errors add up (first order;
        ``k`` values in the slot).

    Example:
        >>> base = torch.zeros(2, 2, dtype=torch.float64)  # two MC zeros, nc = 2
        >>> vals = torch.tensor([[1e20, 0.0], [1.0, 0.0], [-1e20, 0.0], [5.0, 0.0]], dtype=torch.float64)
        >>> scatter(base, torch.tensor([0, 0, 0, 1]), vals, "sum").tolist()  # float64: 0 in slot 0
        [[1.0, 0.0], [5.0, 0.0]]
    """
    nc = builtins.max(base.shape[-1], vals.shape[-1])
    base, vals = arith.pad(base, nc), arith.pad(vals, nc)
    row = vals.shape[1:-1]
    flat = base.reshape(math.prod(base.shape[: base.dim() - 1 - len(row)]), *row, nc)  # -1 is ambiguous for empty rows
    out = flat.clone()
    if target.numel() == 0:
        return out.reshape(base.shape)
    fused = registry.call("grouped_sums", vals, target, flat if include_self else None) if reduce in ("sum", "mean") else None
    if fused is not None:  # the sums below in one kernel call, reading the values in place
        slots, counts = fused.slots, fused.counts
        red = fused.finished if fused.finished is not None else _finish(list(fused.root), nc)
    else:
        slots = torch.unique(target)  # sorted: the order of the runs below
        if include_self:
            target = torch.cat([slots, target])
            vals = torch.cat([flat[slots], vals])
        order = torch.argsort(target, stable=True)
        # by rows (planes where planar): several times faster than advanced indexing
        target, vals = target[order], take(vals, 0, order)
        if reduce in ("sum", "mean"):
            red = _run_sums(vals, target)
            counts = torch.unique_consecutive(target, return_counts=True)[1]
        elif reduce == "amax":
            red = _run_combine(vals, target, arith.maximum, lambda a: a)
        elif reduce == "amin":
            red = _run_combine(vals, target, arith.minimum, lambda a: a)
        elif reduce == "prod":
            red = _run_combine(vals, target, arith.mul, lambda a: arith.from_float(torch.ones_like(a[..., 0]), nc))
        else:
            raise ValueError(f"scatter: reduce must be one of {SCATTER_REDUCTIONS}; got {reduce!r}")
    if reduce == "mean":
        red = div_counts(red, counts.reshape(-1, *[1] * (red.dim() - 2)).expand(red.shape[:-1]))
    out[slots] = red
    return out.reshape(base.shape)


def scatter_add(base: torch.Tensor, indices: list, vals: torch.Tensor) -> torch.Tensor:
    """``base[indices] += vals`` (a new tensor) with duplicate indices summed accurately.

    ``indices`` is an aten index list over the logical dims of ``base`` (``None`` for a
    full slice); ``vals`` broadcasts to the indexed shape. Every slot is the accurate sum
    (:func:`scatter`, :func:`sum`'s bound) of its base value and the values indexed to it
    (the backward of ``index_select``, ``gather`` and ``embedding``).

    Example:
        >>> base = torch.zeros(2, 2, dtype=torch.float64)  # two MC zeros, nc = 2
        >>> vals = torch.tensor([[1.0, 0.0], [2.0**-60, 0.0], [5.0, 0.0]], dtype=torch.float64)
        >>> scatter_add(base, [torch.tensor([0, 0, 1])], vals).tolist() == [[1.0, 2.0**-60], [5.0, 0.0]]
        True
    """
    shape = base.shape[:-1]
    nc = base.shape[-1]
    if len(indices) == 1 and isinstance(indices[0], torch.Tensor) and indices[0].dim() == 1 and indices[0].dtype == torch.int64:
        # rows of the first dim (index_add, embedding backward): one slot per row
        index = torch.where(indices[0] < 0, indices[0] + shape[0], indices[0])  # aten indexing wraps negative ids
        vals = arith.pad(vals, nc)  # a narrower operand gains zero components, never copies
        return scatter(base, index, vals.expand(len(index), *base.shape[1:]), "sum")
    flat_ids = torch.arange(math.prod(shape), device=base.device).reshape(shape)
    # aten's None in an index list means a full slice (Python's None would add a dim)
    target = flat_ids[tuple(slice(None) if i is None else i for i in indices)]
    vals = arith.pad(vals, nc).expand(*target.shape, nc).reshape(-1, nc)
    return scatter(base, target.reshape(-1), vals, "sum")
