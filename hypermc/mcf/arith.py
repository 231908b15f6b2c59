"""Multi-component arithmetic on component tensors.

A *component tensor* ``x`` has shape ``(*shape, nc)``: element ``i`` represents the exact
sum ``x[i, 0] + x[i, 1] + ... + x[i, nc-1]`` of non-overlapping components of decreasing
magnitude (zeros only at the tail). ``u = 2**-p`` is the unit roundoff of the component
dtype. Leading dimensions broadcast like torch's elementwise ops. Operands with
different ``nc`` give the larger ``nc``.

Every kernel picks one of these paths, in this order:

1. ``nc == 1``: the plain torch op, bitwise identical to it.
2. ``nc == 2`` mul and ``mul_float`` in float32/float64 where ``addcmul`` is a fused
   multiply-add (:func:`eft.has_fused_addcmul`): the double-word FMA algorithms, nine
   resp. six elementwise kernels.
3. *Wide engine* (``engine_dtype``): when the whole ``nc * p``-bit value fits in a wider
   native dtype with at least 2 guard bits (float16/bfloat16 ``nc = 2`` in float32;
   float32 ``nc = 2``, float16 ``nc <= 4``, bfloat16 ``nc <= 5`` in float64), operations
   *without cancellation* (mul, div, sqrt and the transcendental functions) are computed
   once in the engine dtype and split back into components. Their relative error is at
   most a few engine ulps, i.e. below ``u^nc``. Additions never take this path: a wide
   sum of operands that cancel has no relative bound.
4. Expansion algorithms built on the error-free transformations of :mod:`eft`:
   double-word algorithms for ``nc == 2`` (Joldes, Muller, Popescu, ACM TOMS 2017) and
   merge-and-renormalise algorithms for any ``nc`` (for ``nc == 3`` products the terms
   are pre-summed by order so that only four, already ordered, are renormalised).

Eager cost model (measured on CPU): every elementwise kernel is about one memory pass,
so the kernels keep their count low, reuse temporaries with in-place / ``out=`` ops,
write results straight into the planar output buffer, and test for inf/NaN with one
reduction (``isfinite`` and ``where`` are slow elementwise kernels on CPU) before taking
a special-value path.

The paper's operator names map here as follows: Grow-ExpN (MC + T) is :func:`add_float`,
ScalingN (MC × T) is :func:`mul_float`, DivN (T / MC) is :func:`rdiv_float`, Add-MCN,
Mul-MCN, Div-MCN and Square-MCN are :func:`add`, :func:`mul`, :func:`div` and
:func:`square`. The implementations are the accurate algorithms, not the paper's.

Bounds (relative to the exact result of the op on the exact inputs, units of ``u^nc``;
checked in ``tests/mcf/test_arith.py``): add/sub <= 8, mul/div/sqrt <= 8, ``nc == 1``
bitwise equal to torch. Inf and NaN propagate: a non-finite leading component has a zero
tail.
"""

from __future__ import annotations

import math

import torch

from . import fixed, registry
from .eft import (
    all_finite,
    all_true,
    fast_two_sum,
    float_format,
    fused_addcmul,
    fused_addcmul_,
    has_fused_addcmul,
    is_traced,
    merge_by_magnitude,
    pack,
    renormalize,
    renormalize_finite,
    select,
    sqrt_rn,
    two_prod,
    two_sum,
    unpack,
)

__all__ = [
    "engine_dtype",
    "to_engine",
    "from_engine",
    "from_float",
    "from_value",
    "to_dtype",
    "nearest_float",
    "pad",
    "round_to",
    "add",
    "sub",
    "neg",
    "add_float",
    "mul",
    "mul_float",
    "square",
    "div",
    "div_float",
    "rdiv_float",
    "reciprocal",
    "sqrt",
    "abs",
    "sign",
    "pow_int",
    "compare",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "maximum",
    "minimum",
    "where",
    "clamp",
]

# Guard bits the wide engine must have beyond the nc * p bits of the value.
_ENGINE_GUARD_BITS = 2
_ENGINES = (torch.float32, torch.float64)


def engine_dtype(dtype: torch.dtype, nc: int) -> torch.dtype | None:
    """Narrowest native dtype holding an ``nc``-component value of ``dtype`` + guard bits.

    Returns ``None`` when no native dtype is wide enough (float32 ``nc >= 3``, float64
    ``nc >= 2``) or when ``nc == 1`` (plain arithmetic needs no engine). The engine's
    exponent range covers the component dtype's, so no new overflow or underflow occurs.

    Example:
        >>> engine_dtype(torch.float32, 2), engine_dtype(torch.float16, 4), engine_dtype(torch.bfloat16, 2)
        (torch.float64, torch.float64, torch.float32)
        >>> engine_dtype(torch.float64, 2) is None  # 106 bits: no native dtype holds them
        True
    """
    if nc == 1:
        return None
    need = nc * float_format(dtype).p + _ENGINE_GUARD_BITS
    for engine in _ENGINES:
        if float_format(engine).p >= need and engine.itemsize > dtype.itemsize:
            return engine
    return None


def to_engine(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    """Sum the components of ``x`` into the engine dtype, smallest first.

    Bound: relative error <= ``nc * 2^-p_engine`` (no cancellation in a normalised
    expansion). The sign of a zero value is kept (its leading component's sign).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-30])  # 1 + 2^-30 as two float32 components
        >>> to_engine(x, torch.float64).item() == 1 + 2**-30
        True
    """
    comps = unpack(x)
    if len(comps) == 1:
        return comps[0].to(engine)
    total = _engine_sum(comps, engine)
    # A zero value: lead + tail loses the sign of a -0 lead; copy the lead's sign (for a
    # nonzero value the sum already has it, |tail| < |lead|).
    return total.copysign_(comps[0])


def _engine_sum(comps: list[torch.Tensor], engine: torch.dtype) -> torch.Tensor:
    """``sum(comps)`` in the engine dtype, smallest first, in one fresh buffer (no sign fix)."""
    total = comps[-1].to(engine, copy=True)
    for c in reversed(comps[:-1]):
        total.add_(c.to(engine))
    return total


def from_engine(z: torch.Tensor, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Split a wide value into ``nc`` components of ``dtype`` (nearest rounding each).

    Each remainder ``z - c_0 - ... - c_k`` is exact in the engine dtype, so the result is
    the expansion of ``z`` truncated after ``nc`` roundings: error <= ``u^nc |z|`` (plus
    gradual underflow of the tail components of small float16 values). Non-finite
    leading components (also from overflow of the conversion) get a zero tail.

    Example:
        >>> from_engine(torch.tensor(1 + 2**-30, dtype=torch.float64), torch.float32, 2).tolist()
        [1.0, 9.313225746154785e-10]
    """
    return _split_engine(z, dtype, nc, scratch=False)


def _split_engine(z: torch.Tensor, dtype: torch.dtype, nc: int, *, scratch: bool, sign: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`from_engine` into a planar buffer; ``scratch=True`` lets it overwrite ``z``.

    ``sign``: a tensor whose sign the leading component takes (``copysign``), for
    kernels whose engine value may have lost the sign of a zero.
    """
    buf = torch.empty((nc, *z.shape), dtype=dtype, device=z.device)
    buf[0].copy_(z)
    if sign is not None:
        torch.copysign(buf[0], sign, out=buf[0])
    if nc > 1:
        back = torch.empty_like(z)
        rest = z if scratch else None
        for k in range(1, nc):
            back.copy_(buf[k - 1])
            rest = torch.sub(z, back) if rest is None else rest.sub_(back)
            buf[k].copy_(rest)
        if not _all_finite(buf[0]):
            buf[1:] = torch.where(torch.isfinite(buf[0]), buf[1:], 0.0)
    return buf.movedim(0, -1)


def _in_place(op, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``op(a, b)`` written over ``a`` (a temporary of the caller) when the shapes allow."""
    if a.shape == torch.broadcast_shapes(a.shape, b.shape):
        return op(a, b, out=a)
    return op(a, b)


_all_finite = all_finite


def from_float(b: torch.Tensor, nc: int) -> torch.Tensor:
    """Exact component tensor of a plain tensor: ``(b, 0, ..., 0)``.

    Example:
        >>> from_float(torch.tensor([0.5, -3.0]), 3).tolist()
        [[0.5, 0.0, 0.0], [-3.0, 0.0, 0.0]]
    """
    zero = torch.zeros_like(b)
    return pack([b] + [zero] * (nc - 1))


def pad(x: torch.Tensor, nc: int) -> torch.Tensor:
    """Append zero components so ``x`` has ``nc`` components (exact).

    Example:
        >>> pad(torch.tensor([[1.0, 2.0**-30]]), 3).tolist()
        [[1.0, 9.313225746154785e-10, 0.0]]
    """
    have = x.shape[-1]
    if have >= nc:
        return x
    zero = torch.zeros_like(x[..., 0])
    return pack(unpack(x) + [zero] * (nc - have))


def round_to(x: torch.Tensor, nc: int) -> torch.Tensor:
    """A normalised component tensor of more than ``nc`` components rounded to ``nc``.

    One renormalisation sweep (:func:`fixed.renorm_levels`: exact but for the final
    truncation) where its output is normalised and non-zero; the general
    :func:`renormalize` for the other elements (zero, non-finite, rare ties), for
    ``nc = 1`` and for float16/bfloat16. Relative error about ``u^nc``. ``x`` with at most ``nc``
    components is returned as it is.

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-60, 2.0**-120]], dtype=torch.float64)
        >>> round_to(x, 2).tolist()  # 2^-120 is below half an ulp of 2^-60
        [[1.0, 8.673617379884035e-19]]
    """
    if x.shape[-1] <= nc:
        return x
    if nc == 1 or x.dtype not in (torch.float32, torch.float64):
        return renormalize(x, nc)
    out = fixed.renorm_levels(unpack(x), nc)
    return fixed.patch(out, fixed.normalised(out), lambda a: renormalize(a, nc), x)


def from_value(t: torch.Tensor, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Components in ``dtype`` of a plain tensor ``t`` of any dtype: exact when ``t`` fits
    in ``nc`` components (a float64 tensor in 3-component float32), otherwise each
    component is the remainder rounded to nearest.

    Integer and bool tensors are read as float64 (exact up to ``2**53``).

    Raises:
        ValueError: an integer value above ``2**53``.

    Example:
        >>> from_value(torch.tensor([1 + 2**-30], dtype=torch.float64), torch.float32, 2).tolist()  # exact
        [[1.0, 9.313225746154785e-10]]
    """
    t = t.detach()
    if t.dtype == torch.bool or not t.is_floating_point():
        t = t.to(torch.float64)
        if t.abs().max().item() > 2**53 if t.numel() else False:
            raise ValueError("integer values above 2**53 cannot be converted exactly")
    if t.dtype == dtype:
        return from_float(t, nc)
    if float_format(t.dtype).p <= float_format(dtype).p:
        return from_float(t.to(dtype), nc)
    # Narrowing: peel off components; every remainder is exact in the source dtype.
    return from_engine(t, dtype, nc)


def to_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` with components of ``dtype`` and the same ``nc``: each component converted
    with :func:`from_value` (exactly, in as many ``dtype`` components as it needs) and
    the whole renormalised once to ``nc`` components.

    Example:
        >>> to_dtype(torch.tensor([[1.0, 2.0**-30]], dtype=torch.float64), torch.float32).tolist()
        [[1.0, 9.313225746154785e-10]]
    """
    nc = x.shape[-1]
    parts = [from_value(xi, dtype, _parts_needed(x.dtype, dtype)) for xi in unpack(x)]
    return renormalize([p for part in parts for p in unpack(part)], nc)


def _parts_needed(src: torch.dtype, dst: torch.dtype) -> int:
    return max(1, -(-float_format(src).p // float_format(dst).p) + 1)


def nearest_float(x: torch.Tensor) -> torch.Tensor:
    """The plain tensor nearest to the values of ``x`` (ties to even; a new tensor).

    ``c0 + c1`` rounded once, except where it is exactly halfway between two floats:
    there the sign of the rest of the tail decides (``fl(c0 + c1)`` alone would round
    ``1 + 2**-53 + 2**-110`` down to 1).

    Example:
        >>> nearest_float(torch.tensor([[1.0, 2.0**-53, 2.0**-110]], dtype=torch.float64)).item() == 1 + 2**-52
        True
    """
    c = unpack(x)
    if len(c) == 1:
        return c[0].clone()
    s, e = two_sum(c[0], c[1])
    if len(c) == 2:
        return s
    tail = c[-1]
    for ci in reversed(c[2:-1]):
        tail = ci + tail  # non-overlapping: the rounded sum has the sign of the exact one
    neighbour = torch.nextafter(s, torch.where(e > 0, math.inf, -math.inf).to(s.dtype))
    tie = (e != 0) & (e == (neighbour - s) * 0.5)
    away = tie & (torch.sign(tail) == torch.sign(e))
    return torch.where(away & torch.isfinite(s), neighbour, s)


def _common(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    nc = max(x.shape[-1], y.shape[-1])
    return pad(x, nc), pad(y, nc), nc


# --------------------------------------------------------------------------- addition


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Add-MCN: ``x + y`` for two component tensors.

    ``nc == 2``: AccurateDWPlusDW (20 flops), proven bound ``3u^2 + 13u^3``.
    ``nc >= 3``: merge the two ordered component lists by magnitude
    (:func:`eft.merge_by_magnitude`, a merge network, not a sort) and renormalise; the
    exact sum is kept until one final truncation, bound ``u^nc`` (+ the rare second
    rounding), tested <= 8.

    Relative bound holds with cancellation (``x + (-x + tiny)``) too. The sign of a zero
    result follows IEEE addition of the values (``-0 + -0 = -0``, ``x + (-x) = +0``) at
    every nc (``test_signed_zeros``, ``test_signed_zeros_nc3``).

    Example:
        >>> one = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> tiny = torch.tensor([1e-30, 0.0], dtype=torch.float64)
        >>> s = add(one, tiny)
        >>> s.tolist()  # the tail keeps what float64 rounds away
        [1.0, 1e-30]
        >>> sub(s, one).tolist(), (torch.tensor(1.0, dtype=torch.float64) + 1e-30 - 1).item()
        ([1e-30, 0.0], 0.0)
        >>> from fractions import Fraction
        >>> s = add(torch.tensor([0.1, 0.0], dtype=torch.float64), torch.tensor([0.2, 0.0], dtype=torch.float64))
        >>> s.tolist(), sum(map(Fraction, s.tolist())) == Fraction(0.1) + Fraction(0.2)  # exact, like TwoSum
        ([0.30000000000000004, -2.7755575615628914e-17], True)
    """
    return _add_sub(x, y, subtract=False)


def _add_sub(x: torch.Tensor, y: torch.Tensor, *, subtract: bool) -> torch.Tensor:
    x, y, nc = _common(x, y)
    if nc == 1:
        return x - y if subtract else x + y
    if nc == 2:
        res = registry.call("add", x, y, subtract)
        if res is not None:  # the same algorithm fused (same bits)
            return res.patched(lambda a, b: _add2(*unpack(a), *unpack(b), subtract=subtract), x, y)
        xh, xl = unpack(x)
        yh, yl = unpack(y)
        return _add2(xh, xl, yh, yl, subtract=subtract)
    if fixed.applies(x.dtype, nc):
        return _add_fixed(x, y, subtract)
    return _add_general(x, y, subtract)


def _add_fixed(x: torch.Tensor, y: torch.Tensor, subtract: bool) -> torch.Tensor:
    """``x ± y`` for nc = 3, 4 by the fixed network of :mod:`fixed` (checked; the
    elements that fail the check go through :func:`_add_general`)."""
    res = registry.call("add", x, y, subtract)
    if res is not None:
        return res.patched(lambda a, b: _add_general(a, b, subtract), x, y)
    xs, ys = unpack(x), unpack(y)
    if subtract:
        ys = [-t for t in ys]
    out, ok = _add_fixed_network(xs, ys, len(xs))
    return fixed.patch(out, ok, lambda a, b: _add_general(a, b, subtract), x, y)


def _add_fixed_network(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x + y`` by the fixed network (``ys``: ``nc`` terms, or one for ``add_float``):
    the renormalised levels (planar buffer view) and the fast-path check
    (:func:`fixed.normalised` with the operands' magnitude as the cancellation bound)."""
    out = fixed.renorm_levels(fixed.add_levels(xs, ys, nc), nc)
    return out, fixed.normalised(out, torch.maximum(xs[0].abs(), ys[0].abs()))


def _mul_fixed_network(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x * y`` by the fixed network with FMAs (``ys``: ``nc`` terms, or one for
    ``mul_float``): the renormalised product levels and the fast-path check."""
    out = fixed.renorm_levels(_product_levels(xs, ys, nc), nc)
    return out, fixed.normalised(out)


def _add_general(x: torch.Tensor, y: torch.Tensor, subtract: bool) -> torch.Tensor:
    """``x ± y`` for nc >= 3: merge by magnitude and renormalise (any input)."""
    nc = x.shape[-1]
    if subtract:
        y = -y
    xs, ys = unpack(x), unpack(y)
    wide = _broadcast_lists(xs, ys)
    comps, total, naive = _add_general_finite(*wide)
    if getattr(naive, "symbolic", False):  # a kernel generator: the finite path, flagged elsewhere
        return fixed.patch(pack(comps), _finite_all([*comps, total, naive]), lambda a, b: _add_general(a, b, subtract), x, y, inline=False)
    if _all_finite_list([*comps, total, naive]):
        return pack(comps)
    out = renormalize(merge_by_magnitude(*wide), nc, presorted=True)
    if not _all_finite(out[..., 0]):
        # overflowing selects or non-finite terms: the order-independent path
        out = renormalize(_merge(xs, ys), nc)
    return _guard(out, x[..., 0] + y[..., 0])


def _add_general_finite(xs: list[torch.Tensor], ys: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """:func:`_add_general`'s path for finite expansions (component lists of one shape):
    the merged terms renormalised (:func:`_renormalized`); returns the components, the
    renormalisation's rounded sum and the plain sum ``x_0 + y_0``, which the caller checks
    for finiteness (elsewhere it takes the non-finite path). The kernel generator traces
    this function for the general addition kernels."""
    naive = xs[0] + ys[0]
    comps, total = _renormalized(merge_by_magnitude(xs, ys), naive, len(xs))
    return comps, total, naive


def _renormalized(terms: list[torch.Tensor], naive: torch.Tensor, nc: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The general kernels' renormalisation of finite terms ordered by magnitude:
    :func:`eft.renormalize_finite`, then a zero result signed as ``naive`` (the plain op
    on the leading components) where that is zero too, as :func:`_guard` signs it.
    Returns the ``nc`` components and the rounded sum of the terms."""
    comps, total = renormalize_finite(list(torch.broadcast_tensors(*terms)), nc)
    return [_signed_lead(comps[0], naive), *comps[1:]], total


def _finite_all(ts: list[torch.Tensor]) -> torch.Tensor:
    """Elementwise: every one of ``ts`` finite."""
    ok = torch.isfinite(ts[0])
    for t in ts[1:]:
        ok = ok & torch.isfinite(t)
    return ok


def _all_finite_list(ts: list[torch.Tensor]) -> bool:
    return all(_all_finite(t) for t in ts)


def _broadcast_lists(a: list[torch.Tensor], b: list[torch.Tensor]):
    shape = torch.broadcast_shapes(a[0].shape, b[0].shape)
    return [t.expand(shape) for t in a], [t.expand(shape) for t in b]


def _negated_two_sum(a: torch.Tensor, b: torch.Tensor, subtract: bool = False):
    """TwoSum of ``a + b`` (``a - b`` with ``subtract``) returning ``(s, -e)``.

    The same six roundings as :func:`eft.two_sum`, each negated where that lets it run
    in place on a temporary (``fl(-v) = -fl(v)`` exactly): three fresh buffers instead
    of six. A zero error is ``+0``, which keeps the sign of zero sums downstream.
    """
    s = torch.sub(a, b) if subtract else torch.add(a, b)
    bb = s - a  # ~ b
    ne = s - bb  # ~ a
    ne.sub_(a)
    if subtract:
        bb.add_(b)
    else:
        bb.sub_(b)
    ne.add_(bb)  # (a' - a) + (b' - b) = -e
    return s, ne, bb


def _add2(xh, xl, yh, yl, *, subtract: bool = False) -> torch.Tensor:
    """AccurateDWPlusDW (Joldes, Muller, Popescu 2017, Algorithm 6) in place.

    ``(sh, sl) = TwoSum(xh, yh)``, ``(th, tl) = TwoSum(xl, yl)``, ``c = sl + th``,
    ``(vh, vl) = FastTwoSum(sh, c)``, ``w = tl + vl``, ``(zh, zl) = FastTwoSum(vh, w)``:
    20 roundings, all of them those of the published algorithm up to exact negations
    (error terms are carried negated so that every step can overwrite a temporary). Five
    temporaries and the planar output buffer; ``y`` enters negated with ``subtract``.
    """
    return _finish2(_add2_network(xh, xl, yh, yl, subtract=subtract), lambda: xh - yh if subtract else xh + yh)


def _add2_network(xh, xl, yh, yl, *, subtract: bool = False) -> torch.Tensor:
    """:func:`_add2`'s roundings, into a planar ``(2, *shape)`` buffer (no finiteness
    repair: that is :func:`_finish2`'s)."""
    sh, n_sl, scratch = _negated_two_sum(xh, yh, subtract)
    th = torch.sub(xl, yl) if subtract else torch.add(xl, yl)
    torch.sub(th, xl, out=scratch)
    n_tl = th - scratch
    n_tl.sub_(xl)
    if subtract:
        scratch.add_(yl)
    else:
        scratch.sub_(yl)
    n_tl.add_(scratch)  # -tl
    n_c = n_sl.sub_(th)  # -(sl + th)
    vh = torch.sub(sh, n_c, out=th)  # sh + c
    torch.sub(vh, sh, out=scratch)  # exact
    n_vl = n_c.add_(scratch)  # -(c - (vh - sh))
    n_w = n_tl.add_(n_vl)  # -(tl + vl)
    buf = torch.empty((2, *sh.shape), dtype=sh.dtype, device=sh.device)
    zh = torch.sub(vh, n_w, out=buf[0])
    torch.sub(vh, zh, out=scratch)
    torch.sub(scratch, n_w, out=buf[1])  # w - (zh - vh)
    return buf


def _merge(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """The union of two term lists, broadcast to one shape (``renormalize`` sorts it)."""
    a, b = torch.broadcast_tensors(*a), torch.broadcast_tensors(*b)
    shape = torch.broadcast_shapes(a[0].shape, b[0].shape)
    return [t.expand(shape) for t in list(a) + list(b)]


def _finish2(buf: torch.Tensor, naive) -> torch.Tensor:
    """Return a double-word result from its planar buffer ``(2, *shape)``.

    The all-finite case costs one read-only reduction. Otherwise (overflow, inf or NaN
    operands: the error terms are NaN) the leading component is replaced by the plain
    result ``naive()`` of the op on the leading components where that is not finite, and
    non-finite leading components get a zero tail, as :func:`_guard` does.
    """
    hi, lo = buf[0], buf[1]
    if getattr(hi, "symbolic", False):
        # a kernel generator traces this network: the kernel flags a non-finite result
        torch.isfinite(hi).flag()  # type: ignore[attr-defined]
        return buf.movedim(0, -1)
    if _all_finite(hi):
        return buf.movedim(0, -1)
    naive = naive()
    hi = torch.where(torch.isfinite(naive), hi, naive)
    return pack([hi, torch.where(torch.isfinite(hi), lo, 0.0)])


def _guard(result: torch.Tensor, naive: torch.Tensor) -> torch.Tensor:
    """Make inf, NaN and signed zeros come out like the plain op.

    ``naive`` is the plain-float result of the op on the leading components. Where it is
    not finite (overflow, inf or NaN operands) the result is ``(naive, 0, ...)``; where the
    MC result itself overflowed, its tail is zeroed. A zero result takes its sign from
    ``naive`` when ``naive`` is zero too: for ``+``, ``x0 + y0`` is ``-0`` exactly when
    both leading components are ``-0`` (an exact zero sum of non-zero terms is ``+0``
    under round-to-nearest, as the merged result already is); for ``*``, ``x0 * y0`` is
    the IEEE-signed zero of a zero or underflowed product. The merge-and-renormalise
    kernels rebuild every zero as ``+0``, so without this ``-0 * 1`` and ``-0 + -0``
    gave ``+0`` for nc >= 3. The all-finite, zero-free case costs two reductions and no
    extra elementwise pass.
    """
    lead = result[..., 0]
    if _all_finite(lead) and _all_finite(naive):
        return _signed_zero(result, naive)
    naive = naive.expand(lead.shape)
    fallback = from_float(naive, result.shape[-1])
    out = torch.where(torch.isfinite(naive).unsqueeze(-1), result, fallback)
    return _signed_zero(_zero_tail_of_nonfinite(out), naive)


def _signed_zero(result: torch.Tensor, naive: torch.Tensor) -> torch.Tensor:
    """``result`` with a zero leading component replaced by ``naive`` where that is zero."""
    lead = result[..., 0]
    signed = _signed_lead(lead, naive)
    if signed is lead:
        return result
    return torch.cat([signed.unsqueeze(-1), result[..., 1:]], dim=-1)


def _signed_lead(lead: torch.Tensor, naive: torch.Tensor) -> torch.Tensor:
    """``lead`` (a result's leading component) replaced by ``naive`` where both are zero
    (``lead`` itself where no element is zero)."""
    zero = lead == 0
    if not is_traced(lead) and not bool(zero.any()):
        return lead
    return torch.where(zero & (naive == 0), naive.expand(lead.shape), lead)


def _zero_tail_of_nonfinite(c: torch.Tensor) -> torch.Tensor:
    comps = unpack(c)
    finite = torch.isfinite(comps[0])
    return pack([comps[0]] + [torch.where(finite, ci, 0.0) for ci in comps[1:]])


def neg(x: torch.Tensor) -> torch.Tensor:
    """``-x`` (exact).

    Example:
        >>> neg(torch.tensor([1.0, 2.0**-60], dtype=torch.float64)).tolist()
        [-1.0, -8.673617379884035e-19]
    """
    return -x


def sub(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x - y``; same algorithm and bound as :func:`add` (``y`` enters negated).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)  # 1 + 2^-60
        >>> sub(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()  # no cancellation loss
        [8.673617379884035e-19, 0.0]
    """
    return _add_sub(x, y, subtract=True)


def add_float(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Grow-ExpN: ``x + b`` for a component tensor and a plain tensor of its dtype.

    ``nc == 2``: DWPlusFP (10 flops), proven bound ``2u^2``. Otherwise merge
    ``b`` into the components and renormalise (bound as :func:`add`).

    Example:
        >>> one = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> add_float(one, torch.tensor(1e-30, dtype=torch.float64)).tolist()
        [1.0, 1e-30]
    """
    nc = x.shape[-1]
    if nc == 1:
        return x + b.unsqueeze(-1)
    if nc == 2:
        res = registry.call("add", x, b.unsqueeze(-1), False)
        if res is not None:  # the same algorithm fused (same bits)
            return res.patched(lambda a, c: _add_float2(a, c[..., 0]), x, b.unsqueeze(-1))
        return _add_float2(x, b)
    if fixed.applies(x.dtype, nc):
        res = registry.call("add", x, b.unsqueeze(-1), False)
        if res is not None:
            return res.patched(_add_float_general, x, b.unsqueeze(-1))
        out, ok = _add_fixed_network(unpack(x), [b], nc)
        return fixed.patch(out, ok, _add_float_general, x, b.unsqueeze(-1))
    return _add_float_general(x, b.unsqueeze(-1))


def _add_float2(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """DWPlusFP (JMP 2017, Algorithm 4): ``(sh, sl) = TwoSum(xh, b)``, ``v = xl + sl``,
    ``(zh, zl) = FastTwoSum(sh, v)``; errors carried negated as in :func:`_add2`."""
    xh, xl = unpack(x)
    return _finish2(_add_float2_network(xh, xl, b), lambda: xh + b)


def _add_float2_network(xh, xl, b) -> torch.Tensor:
    """:func:`_add_float2`'s roundings, into a planar ``(2, *shape)`` buffer."""
    sh, n_v, scratch = _negated_two_sum(xh, b)
    n_v.sub_(xl)  # -(sl + xl)
    buf = torch.empty((2, *sh.shape), dtype=sh.dtype, device=sh.device)
    zh = torch.sub(sh, n_v, out=buf[0])
    torch.sub(sh, zh, out=scratch)
    torch.sub(scratch, n_v, out=buf[1])
    return buf


def _add_float_general(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Grow-ExpN for nc >= 3 (``b`` of shape ``(*shape, 1)``): merge and renormalise."""
    b = b[..., 0]
    return _guard(renormalize(_merge(unpack(x), [b]), x.shape[-1]), x[..., 0] + b)


# --------------------------------------------------------------------- multiplication


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mul-MCN: ``x * y`` for two component tensors.

    ``nc == 2`` with a fused multiply-add (float32/float64 where :func:`has_fused_addcmul`
    measured one): DWTimesDW3 (Joldes-Muller-Popescu 2017, Algorithm 12, bound ``4u^2``).
    Otherwise the wide engine where available (bound ~``2^-(p_engine - 2)``, far below
    ``u^nc``); ``nc == 2`` without either: DWTimesDW1 (Algorithm 10, bound ``7u^2``).
    ``nc >= 3`` with a fused multiply-add: the products summed order by order
    (:func:`_product_levels`, ``nc + 1`` ordered terms) and renormalised without a sort;
    otherwise all exact products ``x_i y_j`` with ``i + j < nc`` (TwoProd) and the plain
    products of order ``nc``, sorted and renormalised. Bound ``u^nc`` (truncation) plus
    ``O(nc^2 u^(nc+1))``, tested <= 8 ``u^nc`` (bulk random, Fractions, and products
    whose orders cancel). A zero product keeps its IEEE sign (``-0 * 1 = -0``, an
    underflow of opposite signs ``-0``) at every nc (``test_signed_zeros_nc3``).

    Example:
        >>> x = torch.tensor([1 + 2**-30, 0.0], dtype=torch.float64)
        >>> p = mul(x, x)  # (1 + 2^-30)^2 = 1 + 2^-29 + 2^-60, exactly
        >>> p[0].item() == 1 + 2**-29, p[1].item() == 2**-60
        (True, True)
        >>> (1 + 2**-30) ** 2 == 1 + 2**-29  # float64 alone loses the 2^-60
        True
    """
    x, y, nc = _common(x, y)
    if nc == 1:
        return x * y
    if nc == 2 and _dw_fma(x):
        res = registry.call("mul", x, y)
        if res is not None:  # the same algorithm fused (same bits)
            return res.patched(lambda a, b: _mul2_fma(*unpack(a), *unpack(b)), x, y)
    xs, ys = unpack(x), unpack(y)
    if nc == 2 and _dw_fma(x):
        return _mul2_fma(*xs, *ys)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        z = _in_place(torch.mul, _engine_sum(xs, engine), _engine_sum(ys, engine))
        return _split_engine(z, x.dtype, nc, scratch=True, sign=xs[0] * ys[0])
    if nc == 2:
        # DWTimesDW1
        ch, cl1 = two_prod(xs[0], ys[0])
        cl2 = xs[0] * ys[1] + xs[1] * ys[0]
        zh, zl = fast_two_sum(ch, cl1 + cl2)
        return _finish2(torch.stack([zh, zl]), lambda: ch)
    if _dw_fma(x):
        if fixed.applies(x.dtype, nc):
            res = registry.call("mul", x, y)
            if res is not None:
                return res.patched(_mul_general, x, y)
            out, ok = _mul_fixed_network(xs, ys, nc)
            return fixed.patch(out, ok, _mul_general, x, y)
        return _mul_general(x, y)
    return _guard(renormalize(_product_terms(xs, ys, nc), nc), xs[0] * ys[0])


def _mul_general(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mul-MCN for nc >= 3 with FMAs: product levels renormalised by the general kernel
    (``y`` may have fewer components than ``x``)."""
    xs, ys = unpack(x), unpack(y)
    nc = len(xs)
    levels = _product_levels(xs, ys, nc)
    naive = xs[0] * ys[0]
    comps, total = _renormalized(levels, naive, nc)
    if getattr(naive, "symbolic", False):  # a kernel generator: the finite path, flagged elsewhere
        return fixed.patch(pack(comps), _finite_all([*comps, total, naive]), _mul_general, x, y, inline=False)
    if _all_finite_list([*comps, total, naive]):
        return pack(comps)
    return _guard(renormalize(levels, nc, presorted=True), naive)


def _product_levels(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int) -> list[torch.Tensor]:
    """Product of two ``nc``-word expansions as ``nc + 1`` terms, one per order, with FMAs.

    Every product ``x_i y_j`` of order ``k = i + j < nc`` is split exactly by an FMA
    (``p``, ``e`` with ``p + e = x_i y_j``; ``e`` is of order ``k + 1``). Level ``k``
    (``1 <= k < nc``) collects the products of order ``k``, the product errors of order
    ``k - 1`` and the TwoSum errors of level ``k - 1``, and is summed by a TwoSum chain
    whose errors move to level ``k + 1``; level ``nc`` (the products of order ``nc`` and the
    errors reaching it) is summed plainly, its rounding being of order ``nc + 1``. Dropped:
    products of order ``> nc`` and the errors of order-``nc`` products (order ``nc + 1``).
    So ``sum(levels)`` differs from ``x y`` by ``O(nc^2 u^(nc+1)) |x y|``; a product
    has no cancellation between orders, so the levels are ordered as
    :func:`renormalize` with ``presorted`` needs (adjacent levels may overlap). Errors are
    carried negated (``addcmul(p, a, b, value=-1) = -e`` exactly) so that the TwoSums run
    in place. Bound with the final truncation: ``u^nc`` plus a few ``u^(nc+1)``, tested
    <= ``BOUNDS['mul']`` ``u^nc`` (``tests/mcf/test_arith.py``).
    """
    # levels[k]: (tensor, negated) pairs of order k
    levels: list[list[tuple[torch.Tensor, bool]]] = [[] for _ in range(nc + 1)]
    for k in range(nc):
        for i in range(k + 1):
            j = k - i
            if i < len(xs) and j < len(ys):
                p = xs[i] * ys[j]
                levels[k].append((p, False))
                levels[k + 1].append((fused_addcmul(p, xs[i], ys[j], value=-1), True))
    last = None
    for i in range(1, nc):
        j = nc - i
        if i < len(xs) and j < len(ys):
            last = xs[i] * ys[j] if last is None else fused_addcmul_(last, xs[i], ys[j])
    out = [levels[0][0][0]]
    for k in range(1, nc):
        # start the chain from a product (not negated): errors of order k - 1 come first
        terms = sorted(levels[k], key=lambda term: term[1])
        if not terms:  # short operand lists (digit products of div/sqrt)
            out.append(torch.zeros_like(out[0]))
            continue
        s = -terms[0][0] if terms[0][1] else terms[0][0]
        for t, negated in terms[1:]:
            s, ne, _ = _negated_two_sum(s, t, subtract=negated)
            levels[k + 1].append((ne, True))
        out.append(s)
    for t, negated in levels[nc]:
        if last is None:
            last = -t if negated else t.clone()
        elif negated:
            last.sub_(t)
        else:
            last.add_(t)
    out.append(last if last is not None else torch.zeros_like(out[0]))
    return out


def _dw_fma(x: torch.Tensor) -> bool:
    """Whether the double-word FMA kernels apply: float32/float64 with a fused addcmul."""
    return x.dtype in (torch.float32, torch.float64) and has_fused_addcmul(x.device.type, x.dtype)


def _mul2_fma(xh, xl, yh, yl) -> torch.Tensor:
    """DWTimesDW3 with FMAs (``addcmul``): nine roundings, the error terms carried negated.

    ``ch = xh yh``, ``-cl1 = fma(-xh, yh, ch)`` (exact), ``cl2 = fma(xl, yh, fma(xh, yl,
    xl yl))``, ``zh = ch - (-cl1 - cl2)``, ``zl`` by FastTwoSum. For an exact zero
    product ``-cl1`` is ``+0``, so ``zh`` keeps the sign of ``ch`` (``-0 * 1 = -0``).
    """
    return _finish2(_mul2_fma_network(xh, xl, yh, yl), lambda: xh * yh)


def _mul2_fma_network(xh, xl, yh, yl) -> torch.Tensor:
    """:func:`_mul2_fma`'s roundings, into a planar ``(2, *shape)`` buffer."""
    cl2 = xl * yl
    fused_addcmul_(cl2, xh, yl)
    fused_addcmul_(cl2, xl, yh)
    ch = xh * yh
    n_cl3 = fused_addcmul(ch, xh, yh, value=-1)  # -cl1, exact
    n_cl3.sub_(cl2)  # -(cl1 + cl2)
    buf = torch.empty((2, *ch.shape), dtype=ch.dtype, device=ch.device)
    zh = torch.sub(ch, n_cl3, out=buf[0])
    torch.sub(ch, zh, out=ch)  # -(zh - ch), exact
    torch.sub(ch, n_cl3, out=buf[1])
    return buf


def _product_terms(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int) -> list[torch.Tensor]:
    """Terms of the product expansion, ordered by order ``i + j``, all exact below nc."""
    terms: list[torch.Tensor] = []
    tail: torch.Tensor | None = None
    for order in range(nc + 1):
        for i in range(order + 1):
            j = order - i
            if i >= len(xs) or j >= len(ys):
                continue
            if order < nc:
                p, e = two_prod(xs[i], ys[j])
                terms.append(p)
                # the error is of order + 1: exact term unless that is beyond nc
                if order + 1 < nc:
                    terms.append(e)
                else:
                    tail = e if tail is None else tail + e
            else:
                prod = xs[i] * ys[j]
                tail = prod if tail is None else tail + prod
    if tail is not None:
        terms.append(tail)
    return terms


def mul_float(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ScalingN: ``x * b`` for a component tensor and a plain tensor of its dtype.

    ``nc == 2`` with a fused multiply-add: DWTimesFP3 (bound ``2u^2``); otherwise the
    wide engine where available, ``nc == 2``: DWTimesFP1 (bound ``1.5u^2 + 4u^3``);
    ``nc >= 3`` with a fused multiply-add: :func:`_product_levels` of ``x`` and ``(b)``
    renormalised without a sort, otherwise exact products sorted and renormalised (bound
    as :func:`mul`).

    Example:
        >>> x = torch.tensor([0.1, 0.0], dtype=torch.float64)  # the double nearest 0.1
        >>> mul_float(x, torch.tensor(10.0, dtype=torch.float64)).tolist()  # exactly 1 + 2^-54
        [1.0, 5.551115123125783e-17]
        >>> 0.1 * 10 == 1.0  # float64 alone rounds the product to 1
        True
    """
    nc = x.shape[-1]
    if nc == 1:
        return x * b.unsqueeze(-1)
    xs = unpack(x)
    if nc == 2 and _dw_fma(x):
        res = registry.call("mul", x, b.unsqueeze(-1))
        if res is not None:  # the same algorithm fused (same bits)
            return res.patched(lambda a, c: _mul_float2_fma(a, c[..., 0]), x, b.unsqueeze(-1))
        return _mul_float2_fma(x, b)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        z = _in_place(torch.mul, _engine_sum(xs, engine), b)
        return _split_engine(z, x.dtype, nc, scratch=True, sign=xs[0] * b)
    if nc == 2:
        ch, cl1 = two_prod(xs[0], b)
        zh, zl = fast_two_sum(ch, cl1 + xs[1] * b)
        return _finish2(torch.stack([zh, zl]), lambda: ch)
    if _dw_fma(x):
        # the product levels of x and the one-component expansion (b)
        if fixed.applies(x.dtype, nc):
            res = registry.call("mul", x, b.unsqueeze(-1))
            if res is not None:
                return res.patched(_mul_general, x, b.unsqueeze(-1))
            out, ok = _mul_fixed_network(xs, [b], nc)
            return fixed.patch(out, ok, _mul_general, x, b.unsqueeze(-1))
        return _mul_general(x, b.unsqueeze(-1))
    terms: list[torch.Tensor] = []
    for xi in xs[:-1]:
        p, e = two_prod(xi, b)
        terms += [p, e]
    terms.append(xs[-1] * b)
    return _guard(renormalize(terms, nc), xs[0] * b)


def _mul_float2_fma(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """DWTimesFP3 (JMP 2017, Algorithm 9): ``ch = xh b``, ``cl3 = fma(xl, b, fma(xh, b, -ch))``,
    ``(zh, zl) = FastTwoSum(ch, cl3)``; ``cl3`` carried negated."""
    xh, xl = unpack(x)
    return _finish2(_mul_float2_fma_network(xh, xl, b), lambda: xh * b)


def _mul_float2_fma_network(xh, xl, b) -> torch.Tensor:
    """:func:`_mul_float2_fma`'s roundings, into a planar ``(2, *shape)`` buffer."""
    ch = xh * b
    n_cl3 = fused_addcmul(ch, xh, b, value=-1)
    fused_addcmul_(n_cl3, xl, b, value=-1)
    buf = torch.empty((2, *ch.shape), dtype=ch.dtype, device=ch.device)
    zh = torch.sub(ch, n_cl3, out=buf[0])
    torch.sub(ch, zh, out=ch)
    torch.sub(ch, n_cl3, out=buf[1])
    return buf


def square(x: torch.Tensor) -> torch.Tensor:
    """Square-MCN: ``x * x`` (bound as :func:`mul`).

    Example:
        >>> square(torch.tensor([1 + 2**-30, 0.0], dtype=torch.float64)).tolist()  # 1 + 2^-29, 2^-60
        [1.0000000018626451, 8.673617379884035e-19]
    """
    return mul(x, x)


# --------------------------------------------------------------------------- division


def div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Div-MCN: ``x / y`` for two component tensors.

    Wide engine where available. Otherwise long division carried at ``nc + 1``
    components: ``q_k = r_k[0] / y[0]``, ``r_{k+1} = r_k - q_k y`` for ``nc + 1`` digits,
    then the digits are renormalised, on operands scaled by powers of two to leading
    exponent 0 (:func:`_long_division`), so no remainder overflows or underflows.
    Bound: <= 8 ``u^nc`` (tested, also next to the overflow threshold and for tiny
    operands) wherever the quotient's components are normal numbers; a quotient beyond
    the largest float is ±inf (zero tail); one below the normal range is rounded once
    per component to the subnormal spacing. Precondition: ``nc p < -emin`` (float64:
    nc <= 19). Division by zero gives ±inf or NaN like torch.

    Example:
        >>> from fractions import Fraction
        >>> one = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> q = div(one, torch.tensor([3.0, 0.0], dtype=torch.float64))
        >>> q.tolist()
        [0.3333333333333333, 1.850371707708594e-17]
        >>> err = sum(map(Fraction, q.tolist())) * 3 - 1  # relative error of q
        >>> -Fraction(1, 2**104) < err < Fraction(1, 2**104)  # within 4 u^2, u = 2^-53
        True
    """
    x, y, nc = _common(x, y)
    if nc == 1:
        return x / y
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        xs, ys = unpack(x), unpack(y)
        z = _in_place(torch.div, _engine_sum(xs, engine), _engine_sum(ys, engine))
        return _split_engine(z, x.dtype, nc, scratch=True, sign=xs[0] / ys[0])
    return _long_division(x, y, nc)


def _long_division(x: torch.Tensor, y: torch.Tensor, nc: int, *, use_native: bool = True) -> torch.Tensor:
    """``x / y`` by long division on operands scaled to leading exponent 0.

    ``x`` and ``y`` are multiplied by powers of two that bring their leading components
    into ``[0.5, 1)`` (exact), divided there (:func:`_div2`, :func:`_long_division_scaled`)
    and the quotient is scaled back once. Unscaled, the remainder products ``q_k y``
    overflow for operands near the top of the range (``mc(finfo.max) / 3`` gave NaN:
    the Veltkamp split of ``q_k`` overflows) and the digits underflow for tiny ones.
    Precondition: ``nc p`` below the exponent range (``nc p < -emin``: the last digit
    ``~ u^nc`` of the scaled quotient stays normal). Bound: as :func:`div` wherever the
    quotient's components are normal; a quotient below the normal range loses its low
    bits to the subnormal spacing (one rounding per component), one above it is
    ``±inf`` with a zero tail. The fused kernels of :mod:`native` compute the same
    network (scaling included) in one pass where they apply; their failing elements come
    back here with ``use_native=False``.
    """
    if use_native and (nc == 2 or fixed.applies(x.dtype, nc)) and _dw_fma(x):
        res = registry.call("div", x, y)
        if res is not None:
            return res.patched(lambda a, b: _long_division(a, b, nc, use_native=False), x, y)
    x, y = torch.broadcast_tensors(x, y)
    ex = torch.frexp(x[..., 0]).exponent  # 0 for 0, inf and NaN: those stay as they are
    ey = torch.frexp(y[..., 0]).exponent
    xs, ys = _scale2(x, -ex), _scale2(y, -ey)
    q = _div2(xs, ys) if nc == 2 else _long_division_scaled(xs, ys, nc)
    return _zero_tail_of_nonfinite(_scale2(q, ex - ey))


def _scale2(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``x * 2^k`` per point (``k`` int, shape of ``x[..., 0]``) in three steps of at
    most ``2^(emax - 1)`` each, so ``k`` may span the whole exponent range. The largest
    step comes last: a result that ends below the normal range is rounded once."""
    bound = math.frexp(torch.finfo(x.dtype).max)[1] - 2
    last = k.clamp(-bound, bound)
    mid = (k - last).clamp(-bound, bound)
    for step in (k - last - mid, mid, last):
        x = torch.ldexp(x, step.unsqueeze(-1))
    return x


def _long_division_scaled(x: torch.Tensor, y: torch.Tensor, nc: int) -> torch.Tensor:
    """``x / y`` for nc >= 3 on operands scaled by :func:`_long_division`: the fixed
    networks (:func:`_div_fixed`) where they apply, else the general long division."""
    if fixed.applies(x.dtype, nc) and _dw_fma(x):
        return _div_fixed(x, y, nc)
    return _long_division_general(x, y, nc)


def _remainder_step(
    r: list[torch.Tensor], ys: list[torch.Tensor], q: torch.Tensor, nc: int, *, renormalise: bool = True, width: int | None = None
):
    """``r - q y`` by the fixed networks, without the fast-path check.

    The product levels of ``y`` and ``-q`` (:func:`_product_levels`) are added to the
    components of ``r`` level by level (:func:`fixed.add_levels`; the product's level
    ``nc`` joins the plain last level) and renormalised by :func:`fixed.renorm_levels`.
    The leading sum ``r_0 - fl(q y_0)`` is exact without a TwoSum: the digit ``q`` is
    ``r_0 / y_0`` to within ``1 +- u``, so ``fl(q y_0)`` is within ``1 +- 3u`` of ``r_0``
    (Sterbenz's lemma; a difference in the subnormal range is exact too). All of it is
    exact except the plain sums of the last levels and the dropped products
    of order ``> nc``: absolute error ``O(u^(nc+1)) (|r| + |q y|)`` whatever the
    cancellation, which is what a remainder needs (its relative error is irrelevant; the
    next digit corrects it). Without ``renormalise`` only the leading value
    ``fl(sum of the levels)`` is returned (enough for a last digit).

    ``width`` (``w <= nc``; division and square root narrow it step by step): the same with ``w + 1`` levels and ``w``
    components, for a remainder that need only be exact to ``O(u^(w+1)) |r|``. Level
    ``w`` is summed plainly and also takes the order-``w`` product ``fl(y_w (-q))`` and
    the component ``r_w`` (each off by ``O(u^(w+1)) |r|``); ``y_j``, ``r_j`` for ``j > w``
    are of order ``> w`` and dropped.
    """
    w = nc if width is None else width
    levels = fixed.add_levels(r[:w], _product_levels(ys[:w], [-q], w), w, exact_first=True)
    if len(ys) > w:
        levels[w] = levels[w] + ys[w] * -q
    if len(r) > w:
        levels[w] = levels[w] + r[w]
    if not renormalise:
        lead = levels[-1]
        for t in reversed(levels[:-1]):
            lead = t + lead
        return lead
    return unpack(fixed.renorm_levels(levels, w))


def _div_fixed(x: torch.Tensor, y: torch.Tensor, nc: int) -> torch.Tensor:
    """``x / y`` for nc = 3, 4 by long division on the fixed networks (checked).

    Digits ``q_k = r_k[0] / y_0`` with ``r_0 = x``, ``r_(k+1) = r_k - q_k y``
    (:func:`_remainder_step`), ``nc + 1`` digits renormalised by
    :func:`fixed.renorm_levels`; each digit is good to about ``u`` relative and the next
    one corrects it, so the quotient is off by the truncation ``u^nc`` plus the
    remainders' absolute errors divided by ``y``. With both operands scaled to leading
    exponent 0 (the caller), ``|r_k| <~ (3u)^k |x|``, and ``r_(k+1)`` is needed only to
    ``O(u^(nc+1)) |x|``: it is computed at width ``nc - k`` (``nc - k + 1`` levels,
    ``nc - k`` components; the last one, ``k = nc - 1``, only as its leading value), each
    step off by ``O(3^k u^(nc+1)) |x|`` absolute. So the quotient is off by ``u^nc`` plus
    ``O(u^(nc+1))``; tested <= 8 ``u^nc``. (Carrying every remainder at the full width
    ``nc``, as before, gives no better bound and costs 29 % (nc = 3) and 40 % (nc = 4) more
    roundings.) Elements whose result fails :func:`fixed.normalised` (zero or non-finite
    quotients, division by zero, inf/NaN, rare half-ulp ties) are recomputed by
    :func:`_long_division_general`.
    """
    xb, yb = torch.broadcast_tensors(x, y)
    out = _div_digits(unpack(xb), unpack(yb), nc)
    return fixed.patch(out, fixed.normalised(out), lambda a, b: _long_division_general(a, b, nc), x, y)


def _div_digits(r: list[torch.Tensor], ys: list[torch.Tensor], nc: int) -> torch.Tensor:
    """:func:`_div_fixed`'s network: the ``nc + 1`` digits of ``r / y`` renormalised
    (planar buffer view, no check)."""
    y0 = ys[0]
    digits = []
    for k in range(nc):
        q = r[0] / y0
        digits.append(q)
        if k < nc - 1:
            r = _remainder_step(r, ys, q, nc, width=nc - k)
    lead = _remainder_step(r, ys, q, nc, renormalise=False, width=1)  # the last remainder's leading value
    digits.append(lead / y0)
    return fixed.renorm_levels(digits, nc)


def _long_division_general(x: torch.Tensor, y: torch.Tensor, nc: int) -> torch.Tensor:
    # Long division with nc + 1 quotient digits; the remainders need only nc components:
    # each is formed by an accurate subtraction, relative error u^nc of |r_k| <= |x|.
    r = x
    y0 = y[..., 0]
    digits = []
    for k in range(nc + 1):
        q = r[..., 0] / y0
        digits.append(q)
        if k < nc:
            r = sub(r, mul_float(y, q))
    quotient = renormalize(digits, nc, presorted=True)
    # Division by zero and inf/NaN operands: the plain quotient of the leading parts.
    x0 = x[..., 0]
    q0 = digits[0]
    if _all_finite(quotient) and _all_finite(q0):
        return quotient
    regular = torch.isfinite(x0) & torch.isfinite(y0) & (y0 != 0) & torch.isfinite(q0)
    return torch.where(regular.unsqueeze(-1), quotient, from_float(x0 / y0, nc).expand_as(quotient))


def _div2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Double-word division by three quotient digits (QD library's accurate division).

    ``q1 = x_h / y_h``, ``r = x - q1 y``, ``q2 = r_h / y_h``, ``r -= q2 y``,
    ``q3 = r_h / y_h``; the remainders are formed with the accurate double-word kernels
    (:func:`mul_float`, :func:`sub`), so each digit corrects the previous one to about
    ``u`` relative and the sum ``q1 + q2 + q3`` is renormalised once. Tested <= 8 ``u^2``.
    """
    x, y = torch.broadcast_tensors(x, y)
    yh = y[..., 0]
    q1 = x[..., 0] / yh
    r = sub(x, mul_float(y, q1))
    q2 = r[..., 0] / yh
    r = sub(r, mul_float(y, q2))
    q3 = r[..., 0] / yh
    qh, ql = fast_two_sum(q1, q2)
    out = add_float(pack([qh, ql]), q3)
    # Division by zero, inf/NaN operands and overflow all make q1 or the result non-finite
    # (an infinite y gives q1 = 0 but a NaN remainder): then the plain quotient q1.
    if _all_finite(out[..., 0]) and _all_finite(q1):
        return out
    regular = torch.isfinite(q1) & torch.isfinite(x[..., 0]) & (yh != 0) & torch.isfinite(yh)
    return torch.where(regular.unsqueeze(-1), out, from_float(q1, 2))


def div_float(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x / b`` for a component tensor and a plain tensor (bound as :func:`div`).

    Example:
        >>> from fractions import Fraction
        >>> q = div_float(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor(10.0, dtype=torch.float64))
        >>> q.tolist()
        [0.1, -5.551115123125783e-18]
        >>> err = sum(map(Fraction, q.tolist())) * 10 - 1
        >>> -Fraction(1, 2**104) < err < Fraction(1, 2**104)
        True
    """
    nc = x.shape[-1]
    if nc == 1:
        return x / b.unsqueeze(-1)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        xs = unpack(x)
        z = _in_place(torch.div, _engine_sum(xs, engine), b)
        return _split_engine(z, x.dtype, nc, scratch=True, sign=xs[0] / b)
    return _long_division(x, from_float(b, nc), nc)


def rdiv_float(b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """DivN: ``b / x`` for a plain tensor and a component tensor (bound as :func:`div`).

    Example:
        >>> rdiv_float(torch.tensor(1.0, dtype=torch.float64), torch.tensor([3.0, 0.0], dtype=torch.float64)).tolist()
        [0.3333333333333333, 1.850371707708594e-17]
    """
    nc = x.shape[-1]
    if nc == 1:
        return b.unsqueeze(-1) / x
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        xs = unpack(x)
        z = b.to(engine) / _engine_sum(xs, engine)
        return _split_engine(z, x.dtype, nc, scratch=True, sign=b / xs[0])
    return _long_division(from_float(b, nc), x, nc)


def reciprocal(x: torch.Tensor) -> torch.Tensor:
    """``1 / x`` (bound as :func:`div`).

    Example:
        >>> from fractions import Fraction
        >>> r = reciprocal(torch.tensor([3.0, 0.0]))  # float32 components: 1/3 to about 48 bits
        >>> r.tolist()
        [0.3333333432674408, -9.934107758624577e-09]
        >>> err = sum(map(Fraction, r.tolist())) * 3 - 1
        >>> -Fraction(1, 2**46) < err < Fraction(1, 2**46)  # within 4 u^2, u = 2^-24
        True
    """
    return rdiv_float(torch.ones_like(x[..., 0]), x)


# ------------------------------------------------------------------------- square root


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """Square root of a component tensor.

    Wide engine where available. Otherwise Newton's iteration in the Karp–Markstein
    form: ``s <- s + (x - s^2) * r`` with the plain ``r = 1 / (2 sqrt(x[0]))``, carried at
    ``nc + 1`` components. Since ``r`` is only ``p``-bit accurate each step gains about
    ``p - 1`` bits, so ``nc + 1`` steps reach ``nc * p`` bits; the residual is formed in MC
    arithmetic so nothing cancels. Tested <= 8 ``u^nc``. Negative input gives NaN,
    ``sqrt(±0) = ±0``, ``sqrt(inf) = inf``. ``nc = 1``: the IEEE square root
    (:func:`~hypermc.mcf.eft.sqrt_rn`; torch's CPU ``sqrt`` is not correctly rounded).

    Example:
        >>> import mpmath
        >>> s = sqrt(torch.tensor([2.0, 0.0], dtype=torch.float64))
        >>> s.tolist()
        [1.4142135623730951, -9.667293313452912e-17]
        >>> with mpmath.workprec(300):  # relative error against mpmath, in units of u^2 = 2^-106
        ...     err = (mpmath.mpf(s[0].item()) + s[1].item()) / mpmath.sqrt(2) - 1
        ...     print(mpmath.nstr(err * 2**106, 3))
        0.47
    """
    nc = x.shape[-1]
    if nc == 1:
        return sqrt_rn(x)  # IEEE (torch's CPU sqrt rounds by the CPU model)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        xs = unpack(x)
        z = _engine_sum(xs, engine).sqrt_()
        return _split_engine(z, x.dtype, nc, scratch=True, sign=xs[0])
    if nc == 2:
        if _dw_fma(x) and (bounds := _sqrt_range(x.dtype, 2)) is not None:
            res = registry.call("sqrt", x, *bounds)  # _sqrt2_network where bounds[0] <= x_0 <= bounds[1]
            if res is not None:
                return res.patched(_sqrt2_scaled, x)  # the elements out of range
        return _sqrt2(x)
    if fixed.applies(x.dtype, nc) and _dw_fma(x) and (bounds := _sqrt_range(x.dtype, nc)) is not None:
        res = registry.call("sqrt", x, *bounds)
        if res is not None:
            return res.patched(lambda a: _sqrt_rescaled(a, nc), x)  # the elements out of range
    return _sqrt_torch(x, nc)


def _sqrt_torch(x: torch.Tensor, nc: int) -> torch.Tensor:
    """Square root for nc >= 3 by the torch kernels: the fixed networks where every
    element is in range (:func:`_no_scaling_needed`), else the fixed networks on the
    elements rescaled into range (:func:`_sqrt_rescaled`); the general kernel while
    traced and where the fixed networks do not apply."""
    if fixed.applies(x.dtype, nc) and _dw_fma(x):
        if _no_scaling_needed(x[..., 0], nc):
            return _sqrt_fixed(x, nc)
        if not is_traced(x):
            return _sqrt_rescaled(x, nc)
    return _sqrt_general(x, nc)


def _sqrt_rescaled(x: torch.Tensor, nc: int) -> torch.Tensor:
    """:func:`_sqrt_fixed` for leading components outside :func:`_sqrt_range`.

    ``x = 4^k x'`` with ``x'_0`` in ``[1, 4)`` (inside the range wherever the range holds
    4, e.g. float32 ``nc = 4``'s ``[0.25, 2^124]``), ``sqrt(x) = 2^k sqrt(x')``. Both
    scalings are products by powers of two, so every element whose scaled components
    and scaled-back result are exact (no component under- or overflows: checked by
    scaling back) gets the fixed networks' accuracy, and an element already in range
    gets the same bits as unscaled (every rounding of the networks commutes with
    ``4^k``). Elements that are not positive normal numbers, and those whose scalings
    are inexact, take :func:`_sqrt_general`. The fused float32 ``nc = 4`` kernel runs
    this frame itself below its range (``native.source.sqrt_rescales``), which avoids
    the ~20 torch ops here: about 40x the kernel's time (1M elements, one thread).
    """
    bounds = _sqrt_range(x.dtype, nc)
    if bounds is None or bounds[0] > 1 or bounds[1] < 4:
        return _sqrt_general(x, nc)
    fi = torch.finfo(x.dtype)
    x0 = x[..., 0]
    regular = (x0 >= fi.tiny) & (x0 <= fi.max)  # positive, normal and finite (NaN fails)
    e = torch.frexp(torch.where(regular, x0, 1.0)).exponent  # x0 in [2^(e-1), 2^e)
    # 4^-k x0 in [1, 4); k = 0 where x0 is in range already, so those elements get the
    # unscaled networks' bits whatever else the batch holds (a scaled one differs where a
    # component of the result is near the subnormal range)
    k = torch.where((x0 >= bounds[0]) & (x0 <= bounds[1]), 0, torch.div(e - 1, 2, rounding_mode="floor"))
    down = torch.ldexp(torch.ones_like(x0), -k).unsqueeze(-1)  # 2^-k, a normal number
    up = torch.ldexp(torch.ones_like(x0), k).unsqueeze(-1)
    xs = x * down * down
    exact = regular & (xs * up * up == x).all(-1)
    xs = torch.where(exact.unsqueeze(-1), xs, torch.ones_like(xs))  # 1: in range, result unused
    res = registry.call("sqrt", xs, *bounds)
    s = _sqrt_fixed(xs, nc) if res is None else res.patched(lambda a: _sqrt_fixed(a, nc), xs)
    out = (s.movedim(-1, 0) * up.movedim(-1, 0)).movedim(0, -1)  # planar, as fixed.patch writes it
    exact &= (out * down == s).all(-1)
    return fixed.patch(out, exact, lambda a: _sqrt_general(a, nc), x)


def _sqrt_fixed(x: torch.Tensor, nc: int) -> torch.Tensor:
    """Square root for nc = 3, 4 by digit-wise Newton (Karp–Markstein) on the fixed networks.

    ``s_0 = sqrt(x_0)``, ``h = 1 / (2 s_0)``; with ``S_k = s_0 + d_1 + ... + d_k`` the
    residual ``R_(k+1) = x - S_k^2`` is carried as ``R_(k+1) = R_k - d_k (2 S_(k-1) + d_k)``
    (``R_1 = x - s_0^2``) by :func:`_remainder_step` (exact up to ``O(u^(nc+1)) |x|``) and
    the next digit is ``d_(k+1) = R_(k+1)[0] h``: each digit is good to about ``2u``
    relative and the next one corrects it. ``|R_k| <~ (3u)^k |x|`` and ``R_(k+1)`` is
    needed only to ``O(u^(nc+1)) |x|``, so after the first step it is carried at width
    ``nc - k`` (as in :func:`_div_fixed`). ``nc + 1`` digits renormalised by
    :func:`fixed.renorm_levels`; bound ``u^nc + O(u^(nc+1))``, tested <= 8 ``u^nc``.
    Precondition (checked by the caller with :func:`_no_scaling_needed`): every leading
    component positive and far from both ends of the range. Elements failing
    :func:`fixed.normalised` go through :func:`_sqrt_general`.
    """
    out = _sqrt_digits(unpack(x), nc)
    return fixed.patch(out, fixed.normalised(out), lambda a: _sqrt_general(a, nc), x)


def _sqrt_digits(xs: list[torch.Tensor], nc: int) -> torch.Tensor:
    """:func:`_sqrt_fixed`'s network: the ``nc + 1`` digits of ``sqrt(x)`` renormalised
    (planar buffer view, no check)."""
    s0 = sqrt_rn(xs[0])
    h = torch.reciprocal(s0).mul_(0.5)
    twice = [s0 * 2]  # 2 S_(k-1) digit by digit (exact doubling)
    digits = [s0]
    r = _remainder_step(xs, [s0], s0, nc)
    for k in range(1, nc + 1):
        d = (r[0] if k < nc else r) * h
        digits.append(d)
        if k < nc:
            r = _remainder_step(r, twice + [d], d, nc, renormalise=k < nc - 1, width=nc - k)
            twice.append(d * 2)
    return fixed.renorm_levels(digits, nc)


def _sqrt_general(x: torch.Tensor, nc: int) -> torch.Tensor:
    """Square root for nc >= 3 by Newton on the general kernels (any input)."""
    x0 = x[..., 0]
    if _no_scaling_needed(x0, nc):
        s = from_float(sqrt_rn(x0), nc)
        r = 0.5 / s[..., 0]
        for _ in range(nc):
            s = add_float(s, sub(x, square(s))[..., 0] * r)
        return s
    regular = (x0 > 0) & torch.isfinite(x0)
    # Scale by an even power of two 2^(-2k) (exactly, in two steps of 2^-k) so that the
    # squares of the iteration neither overflow nor underflow; sqrt scales by 2^k.
    k = torch.where(regular, torch.frexp(x0).exponent // 2, 0).to(x.dtype)
    down = torch.pow(2.0, -k).unsqueeze(-1)
    xs = x * down * down
    s0 = sqrt_rn(xs[..., 0])
    r = torch.where(regular, 0.5 / s0, 0.0)
    wide = nc + 1
    xw = pad(xs, wide)
    s = from_float(torch.where(regular, s0, 0.0), wide)
    for _ in range(nc + 1):
        resid = sub(xw, square(s))
        s = add_float(s, resid[..., 0] * r)
    out = renormalize(unpack(s), nc, presorted=True) * (1.0 / down)
    return torch.where(regular.unsqueeze(-1), out, from_float(sqrt_rn(x0), nc))


def _no_scaling_needed(x0: torch.Tensor, nc: int) -> bool:
    """Whether every leading component is positive, finite and so far from both ends of
    the exponent range that the squares in the square-root iterations cannot overflow
    and the error terms that matter (down to ``u^(nc+1) |x|``) are normal numbers. Costs
    one reduction; otherwise the caller scales by an even power of two."""
    if x0.numel() == 0 or is_traced(x0):
        return False
    bounds = _sqrt_range(x0.dtype, nc)
    if bounds is None:
        return False  # no magnitude is far enough from the bottom: always scale
    lo, hi = torch.aminmax(x0)
    return float(lo) >= bounds[0] and float(hi) <= bounds[1]


def _sqrt_range(dtype: torch.dtype, nc: int) -> tuple[float, float] | None:
    """The leading components ``[lo, hi]`` that :func:`_no_scaling_needed` accepts (None
    if none: ``tiny * 2^((nc+1)p+4)`` overflows, from nc = 19 in float64)."""
    fi = torch.finfo(dtype)
    try:
        return math.ldexp(fi.tiny, (nc + 1) * float_format(dtype).p + 4), fi.max / 16
    except OverflowError:
        return None


def _sqrt2(x: torch.Tensor) -> torch.Tensor:
    """Double-word square root by one Karp–Markstein correction.

    ``s = sqrt(x_h)``, residual ``r = (x_h - s^2) + x_l`` with ``s^2`` from TwoProd (so
    ``x_h - p`` is exact by Sterbenz), result ``s + r / (2 s)`` by FastTwoSum. The
    correction is relative-``u`` accurate and itself ``u`` times smaller than ``s``, so the
    result is good to a few ``u^2``; tested <= 8. Squares that would overflow or
    underflow are avoided by scaling ``x`` with an even power of two first (exact).
    """
    xh, xl = unpack(x)
    if _no_scaling_needed(xh, 2):
        return _sqrt2_network(xh, xl)
    return _sqrt2_scaled(x)


def _sqrt2_scaled(x: torch.Tensor) -> torch.Tensor:
    """:func:`_sqrt2` with every element scaled by an even power of two (exact) into the
    range of :func:`_sqrt2_network`; elements already in range get its bits. Non-positive
    and non-finite elements get the leading component's IEEE square root."""
    xh, xl = unpack(x)
    regular = (xh > 0) & torch.isfinite(xh)
    k = torch.where(regular, torch.frexp(xh).exponent // 2, 0).to(x.dtype)
    down = torch.pow(2.0, -k)
    xh, xl = xh * down * down, xl * down * down
    s = sqrt_rn(xh)
    p, e = two_prod(s, s)
    r = ((xh - p) - e) + xl
    c = r / (2 * s)
    zh, zl = fast_two_sum(s, c)
    up = 1.0 / down
    out = pack([zh * up, zl * up])
    if all_true(regular):
        return out
    return torch.where(regular.unsqueeze(-1), out, from_float(sqrt_rn(x[..., 0]), 2))


def _sqrt2_network(xh: torch.Tensor, xl: torch.Tensor) -> torch.Tensor:
    """:func:`_sqrt2` where no scaling is needed (every leading component in
    :func:`_sqrt_range`: ``s^2`` and its error term are normal numbers); the network of the
    fused nc = 2 square root. Planar buffer view, no check."""
    s = sqrt_rn(xh)
    p, e = two_prod(s, s)
    r = ((xh - p) - e) + xl
    c = r.div_(s).mul_(0.5)  # r / (2 s), both steps exact scalings but the division
    zh, zl = fast_two_sum(s, c)
    return pack([zh, zl])


# --------------------------------------------------------------- sign, abs, comparisons


def sign(x: torch.Tensor) -> torch.Tensor:
    """Sign of the value as a plain tensor (-1, 0, +1; NaN for NaN). Exact.

    Example:
        >>> sign(torch.tensor([[-1.0, 2.0**-60], [0.0, 0.0], [2.0**-900, 0.0]], dtype=torch.float64))
        tensor([-1.,  0.,  1.], dtype=torch.float64)
    """
    x0 = x[..., 0]
    return torch.where(torch.isnan(x0), x0, torch.sign(x0))


def abs(x: torch.Tensor) -> torch.Tensor:  # noqa: A001 - mirrors torch.abs
    """``|x|`` (exact): the components are negated where the leading one is negative.

    Example:
        >>> abs(torch.tensor([-1.0, 2.0**-60], dtype=torch.float64)).tolist()  # |-1 + 2^-60| = 1 - 2^-60
        [1.0, -8.673617379884035e-19]
    """
    if x.shape[-1] == 1:
        return torch.abs(x)
    return torch.where(torch.signbit(x[..., :1]), -x, x)


def compare(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Exact three-way comparison: ``sign(x - y)`` as a plain tensor (NaN if unordered).

    Exact because the accurate subtraction has a relative error bound: its leading
    component is zero iff ``x == y`` and otherwise has the sign of ``x - y``.
    Infinite operands compare by their leading components.

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)  # 1 + 2^-60
        >>> y = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> compare(x, y).item(), compare(y, x).item(), compare(x, x).item()
        (1.0, -1.0, 0.0)
    """
    x, y, _ = _common(x, y)
    d = sub(x, y)[..., 0]
    x0, y0 = x[..., 0], y[..., 0]
    lead = x0 - y0
    res = torch.sign(torch.where(torch.isfinite(lead), d, lead))
    same_inf = torch.isinf(x0) & (x0 == y0)
    res = torch.where(same_inf, 0.0, res)
    # torch.sign(nan) is 0: unordered pairs must stay NaN.
    return torch.where(torch.isnan(x0) | torch.isnan(y0), torch.nan, res)


def eq(x, y):
    """``x == y`` exactly (bool tensor).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)  # 1 + 2^-60
        >>> y = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> eq(x, y).item(), eq(x, x).item(), 1 + 2**-60 == 1.0  # float64 alone: equal
        (False, True, True)
    """
    return compare(x, y) == 0


def ne(x, y):
    """``x != y`` exactly (True for NaN, like torch).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)
        >>> ne(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).item()
        True
    """
    return ~eq(x, y)


def lt(x, y):
    """``x < y`` exactly.

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)
        >>> lt(torch.tensor([1.0, 0.0], dtype=torch.float64), x).item(), lt(x, x).item()
        (True, False)
    """
    return compare(x, y) < 0


def le(x, y):
    """``x <= y`` exactly.

    Example:
        >>> x = torch.tensor([1.0, -(2.0**-60)], dtype=torch.float64)  # 1 - 2^-60
        >>> le(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).item(), le(x, x).item()
        (True, True)
    """
    return compare(x, y) <= 0


def gt(x, y):
    """``x > y`` exactly.

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)
        >>> gt(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).item()
        True
    """
    return compare(x, y) > 0


def ge(x, y):
    """``x >= y`` exactly.

    Example:
        >>> x = torch.tensor([1.0, -(2.0**-60)], dtype=torch.float64)  # 1 - 2^-60
        >>> ge(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).item(), ge(x, x).item()
        (False, True)
    """
    return compare(x, y) >= 0


def where(cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise select between two component tensors (exact).

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-60], [2.0, 0.0]], dtype=torch.float64)
        >>> where(torch.tensor([True, False]), x, torch.zeros(2, 2, dtype=torch.float64)).tolist()
        [[1.0, 8.673617379884035e-19], [0.0, 0.0]]
    """
    x, y, _ = _common(x, y)
    return select(cond.unsqueeze(-1), x, y)


def _nan_if_either(r: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    nan = torch.isnan(x[..., 0]) | torch.isnan(y[..., 0])
    return torch.where(nan.unsqueeze(-1), from_float(torch.full_like(r[..., 0], torch.nan), r.shape[-1]), r)


def maximum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise max, exact; NaN if either is NaN (like ``torch.maximum``).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)
        >>> maximum(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()
        [1.0, 8.673617379884035e-19]
    """
    x, y, _ = _common(x, y)
    pick = ge(x, y) | torch.isnan(x[..., 0])
    return _nan_if_either(where(pick, x, y), x, y)


def minimum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise min, exact; NaN if either is NaN (like ``torch.minimum``).

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64)
        >>> minimum(x, torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()
        [1.0, 0.0]
    """
    x, y, _ = _common(x, y)
    pick = le(x, y) | torch.isnan(x[..., 0])
    return _nan_if_either(where(pick, x, y), x, y)


def clamp(x: torch.Tensor, lo: torch.Tensor | None = None, hi: torch.Tensor | None = None) -> torch.Tensor:
    """Clamp to ``[lo, hi]`` (component tensors or ``None``), exact; NaN stays NaN.

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-60], [0.5, 0.0]], dtype=torch.float64)
        >>> clamp(x, hi=torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()  # 1 + 2^-60 -> 1
        [[1.0, 0.0], [0.5, 0.0]]
    """
    if lo is not None:
        x, lo, _ = _common(x, lo)
        x = where(lt(x, lo), lo, x)
    if hi is not None:
        x, hi, _ = _common(x, hi)
        x = where(gt(x, hi), hi, x)
    return x


# -------------------------------------------------------------------------------- pow


def pow_int(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x ** n`` for a Python int ``n`` by binary powering in MC arithmetic.

    Each step is one :func:`mul` (or :func:`square`), each within 8 ``u^nc``; a squaring
    doubles the relative error already present, so the bound is
    ``(|n| - 1 + [n < 0]) * 8 u^nc`` (tested), not ``2 log2 |n|`` steps' worth.
    Negative ``n`` takes the reciprocal at the end; ``x ** 0 == 1`` (also for NaN, like
    torch).

    Example:
        >>> from fractions import Fraction
        >>> p = pow_int(torch.tensor([3.0, 0.0], dtype=torch.float64), 40)
        >>> p.tolist(), sum(map(Fraction, p.tolist())) == 3**40  # 64 bits: exact in two components
        ([1.2157665459056929e+19, 33.0], True)
        >>> 3.0**40 == 3**40  # float64 alone rounds it
        False
    """
    if n == 0:
        return from_float(torch.ones_like(x[..., 0]), x.shape[-1])
    if n < 0:
        return reciprocal(pow_int(x, -n))
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else mul(result, base)
        n >>= 1
        if n:
            base = square(base)
    assert result is not None  # n > 0 has a set bit
    return result
