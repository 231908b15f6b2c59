"""Multi-component arithmetic on component tensors.

A *component tensor* ``x`` has shape ``(*shape, nc)``: element ``i`` represents the exact
sum ``x[i, 0] + x[i, 1] + ... + x[i, nc-1]`` of non-overlapping components of decreasing
magnitude (zeros only at the tail). ``u = 2**-p`` is the unit roundoff of the component
dtype. Leading dimensions broadcast like torch's elementwise ops. Operands with
different ``nc`` give the larger ``nc``.

Every kernel picks one of three paths, always in this order:

1. ``nc == 1``: the plain torch op, bitwise identical to it.
2. *Wide engine* (``engine_dtype``): when the whole ``nc * p``-bit value fits in a wider
   native dtype with at least 2 guard bits (float16/bfloat16 ``nc = 2`` in float32;
   float32 ``nc = 2``, float16 ``nc <= 4``, bfloat16 ``nc <= 5`` in float64), operations
   *without cancellation* (mul, div, sqrt and the transcendental functions) are computed
   once in the engine dtype and split back into components. Their relative error is at
   most a few engine ulps, i.e. below ``u^nc``. Additions never take this path: a wide
   sum of operands that cancel has no relative bound.
3. Expansion algorithms built on the error-free transformations of :mod:`eft`:
   double-word algorithms for ``nc == 2`` (Joldes, Muller, Popescu, ACM TOMS 2017) and
   merge-and-renormalise algorithms for any ``nc``.

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

import torch

from .eft import (
    fast_two_sum,
    float_format,
    has_fused_addcmul,
    pack,
    renormalize,
    sort_by_magnitude,
    two_prod,
    two_sum,
    unpack,
)

__all__ = [
    "engine_dtype",
    "to_engine",
    "from_engine",
    "from_float",
    "pad",
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
    expansion).
    """
    comps = unpack(x)
    if len(comps) == 1:
        return comps[0].to(engine)
    total = comps[-1].to(engine)
    for c in reversed(comps[1:-1]):
        total = total + c.to(engine)
    lead = comps[0].to(engine)
    # lead == 0 means the whole value is a (signed) zero: keep its sign.
    return torch.where(lead == 0, lead, lead + total)


def from_engine(z: torch.Tensor, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Split a wide value into ``nc`` components of ``dtype`` (nearest rounding each).

    Each remainder ``z - c_0 - ... - c_k`` is exact in the engine dtype, so the result is
    the expansion of ``z`` truncated after ``nc`` roundings: error <= ``u^nc |z|`` (plus
    gradual underflow of the tail components of small float16 values).
    """
    comps = []
    rest = z
    for k in range(nc):
        c = rest.to(dtype)
        comps.append(c)
        if k + 1 < nc:
            rest = rest - c.to(z.dtype)
    if nc > 1:
        finite = torch.isfinite(comps[0])
        comps[1:] = [torch.where(finite, c, 0.0) for c in comps[1:]]
    return pack(comps)


def from_float(b: torch.Tensor, nc: int) -> torch.Tensor:
    """Exact component tensor of a plain tensor: ``(b, 0, ..., 0)``."""
    zero = torch.zeros_like(b)
    return pack([b] + [zero] * (nc - 1))


def pad(x: torch.Tensor, nc: int) -> torch.Tensor:
    """Append zero components so ``x`` has ``nc`` components (exact)."""
    have = x.shape[-1]
    if have >= nc:
        return x
    zero = torch.zeros_like(x[..., 0])
    return pack(unpack(x) + [zero] * (nc - have))


def _common(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    nc = max(x.shape[-1], y.shape[-1])
    return pad(x, nc), pad(y, nc), nc


# --------------------------------------------------------------------------- addition


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Add-MCN: ``x + y`` for two component tensors.

    ``nc == 2``: AccurateDWPlusDW (20 flops), proven bound ``3u^2 + 13u^3``.
    ``nc >= 3``: merge the ``2 nc`` components by magnitude and renormalise; the exact
    sum is kept until one final truncation, bound ``u^nc`` (+ the rare
    second rounding), tested <= 8.

    Relative bound holds with cancellation (``x + (-x + tiny)``) too.
    """
    x, y, nc = _common(x, y)
    if nc == 1:
        return x + y
    if nc == 2:
        xh, xl = unpack(x)
        yh, yl = unpack(y)
        sh, sl = two_sum(xh, yh)
        th, tl = two_sum(xl, yl)
        vh, vl = fast_two_sum(sh, sl + th)
        zh, zl = fast_two_sum(vh, tl + vl)
        return _finish2(zh, zl, sh)
    return _guard(renormalize(_merge(unpack(x), unpack(y)), nc, presorted=True), x[..., 0] + y[..., 0])


def _merge(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """Merge two magnitude-sorted term lists into one (sorting network on the union)."""
    a, b = torch.broadcast_tensors(*a), torch.broadcast_tensors(*b)
    shape = torch.broadcast_shapes(a[0].shape, b[0].shape)
    terms = [t.expand(shape) for t in list(a) + list(b)]
    return sort_by_magnitude(terms)


def _finish2(hi: torch.Tensor, lo: torch.Tensor, naive: torch.Tensor) -> torch.Tensor:
    """Pack a double-word result; see :func:`_guard` for the non-finite cases."""
    # One read-only reduction: a finite sum means every element is finite (an inf or
    # NaN anywhere makes the sum non-finite; an overflowing sum just takes the slow path).
    if bool(torch.isfinite(hi.sum())) or bool(torch.isfinite(hi).all()):
        return pack([hi, lo])
    hi = torch.where(torch.isfinite(naive), hi, naive)
    return pack([hi, torch.where(torch.isfinite(hi), lo, 0.0)])


def _guard(result: torch.Tensor, naive: torch.Tensor) -> torch.Tensor:
    """Make inf and NaN propagate like the plain op.

    ``naive`` is the plain-float result of the op on the leading components. Where it is
    not finite (overflow, inf or NaN operands) the result is ``(naive, 0, ...)``; where the
    MC result itself overflowed, its tail is zeroed. The all-finite case costs one
    reduction and no extra elementwise pass.
    """
    lead = result[..., 0]
    if bool(torch.isfinite(lead).all()) and bool(torch.isfinite(naive).all()):
        return result
    naive = naive.expand(lead.shape)
    fallback = from_float(naive, result.shape[-1])
    out = torch.where(torch.isfinite(naive).unsqueeze(-1), result, fallback)
    return _zero_tail_of_nonfinite(out)


def _zero_tail_of_nonfinite(c: torch.Tensor) -> torch.Tensor:
    comps = unpack(c)
    finite = torch.isfinite(comps[0])
    return pack([comps[0]] + [torch.where(finite, ci, 0.0) for ci in comps[1:]])


def neg(x: torch.Tensor) -> torch.Tensor:
    """``-x`` (exact)."""
    return -x


def sub(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x - y``; same algorithm and bound as :func:`add`."""
    return add(x, -y)


def add_float(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Grow-ExpN: ``x + b`` for a component tensor and a plain tensor of its dtype.

    ``nc == 2``: DWPlusFP (10 flops), proven bound ``2u^2``. Otherwise merge
    ``b`` into the components and renormalise (bound as :func:`add`).
    """
    nc = x.shape[-1]
    if nc == 1:
        return x + b.unsqueeze(-1)
    if nc == 2:
        xh, xl = unpack(x)
        sh, sl = two_sum(xh, b)
        zh, zl = fast_two_sum(sh, xl + sl)
        return _finish2(zh, zl, sh)
    return _guard(renormalize(_merge(unpack(x), [b]), nc, presorted=True), x[..., 0] + b)


# --------------------------------------------------------------------- multiplication


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mul-MCN: ``x * y`` for two component tensors.

    Wide engine where available (bound ~``2^-(p_engine - 2)``, far below ``u^nc``).
    ``nc == 2`` otherwise (float64): DWTimesDW3 with a fused multiply-add where the
    device has one, DWTimesDW1 otherwise (Joldes–Muller–Popescu 2017, Algorithms 12 and
    10; published bounds below ``7u^2``).
    ``nc >= 3``: all exact products ``x_i y_j`` with ``i + j < nc`` (TwoProd), the
    plain products of order ``nc``, renormalised: tested <= 8 ``u^nc``.
    """
    x, y, nc = _common(x, y)
    if nc == 1:
        return x * y
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(to_engine(x, engine) * to_engine(y, engine), x.dtype, nc)
    xs, ys = unpack(x), unpack(y)
    if nc == 2:
        ch, cl1 = two_prod(xs[0], ys[0])
        if has_fused_addcmul(x.device.type, x.dtype):
            # DWTimesDW3: cl2 = fma(xl, yh, fma(xh, yl, xl * yl))
            cl2 = torch.addcmul(torch.addcmul(xs[1] * ys[1], xs[0], ys[1]), xs[1], ys[0])
        else:
            # DWTimesDW1
            cl2 = xs[0] * ys[1] + xs[1] * ys[0]
        zh, zl = fast_two_sum(ch, cl1 + cl2)
        return _finish2(zh, zl, ch)
    return _guard(renormalize(_product_terms(xs, ys, nc), nc), xs[0] * ys[0])


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

    Wide engine where available; ``nc == 2``: DWTimesFP3 (FMA) / DWTimesFP1, bounds
    ``2u^2`` / ``1.5u^2 + 4u^3``; ``nc >= 3``: exact products renormalised.
    """
    nc = x.shape[-1]
    if nc == 1:
        return x * b.unsqueeze(-1)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(to_engine(x, engine) * b.to(engine), x.dtype, nc)
    xs = unpack(x)
    if nc == 2:
        ch, cl1 = two_prod(xs[0], b)
        zh, zl = fast_two_sum(ch, cl1 + xs[1] * b)
        return _finish2(zh, zl, ch)
    terms: list[torch.Tensor] = []
    for i, xi in enumerate(xs[:-1]):
        p, e = two_prod(xi, b)
        terms += [p, e]
    terms.append(xs[-1] * b)
    return _guard(renormalize(terms, nc), xs[0] * b)


def square(x: torch.Tensor) -> torch.Tensor:
    """Square-MCN: ``x * x`` (bound as :func:`mul`)."""
    return mul(x, x)


# --------------------------------------------------------------------------- division


def div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Div-MCN: ``x / y`` for two component tensors.

    Wide engine where available. Otherwise long division carried at ``nc + 1``
    components: ``q_k = r_k[0] / y[0]``, ``r_{k+1} = r_k - q_k y`` for ``nc + 1`` digits,
    then the digits are renormalised. Tested <= 8 ``u^nc``. Division by zero gives
    ±inf or NaN like torch.
    """
    x, y, nc = _common(x, y)
    if nc == 1:
        return x / y
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(to_engine(x, engine) / to_engine(y, engine), x.dtype, nc)
    return _long_division(x, y, nc)


def _long_division(x: torch.Tensor, y: torch.Tensor, nc: int) -> torch.Tensor:
    if nc == 2:
        return _div2(x, y)
    wide = nc + 1
    r, yw = pad(x, wide), pad(y, wide)
    y0 = yw[..., 0]
    digits = []
    for k in range(wide):
        q = r[..., 0] / y0
        digits.append(q)
        if k + 1 < wide:
            r = sub(r, mul_float(yw, q))
    digits = torch.broadcast_tensors(*digits)
    quotient = renormalize(list(digits), nc, presorted=True)
    # Division by zero and inf/NaN operands: the plain quotient of the leading parts.
    x0 = x[..., 0]
    q0 = digits[0]
    regular = torch.isfinite(x0) & torch.isfinite(y0) & (y0 != 0) & torch.isfinite(q0)
    if bool(regular.all()):
        return quotient
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
    regular = torch.isfinite(q1) & torch.isfinite(x[..., 0]) & (yh != 0) & torch.isfinite(yh)
    if bool(regular.all()):
        return out
    return torch.where(regular.unsqueeze(-1), out, from_float(q1, 2))


def div_float(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x / b`` for a component tensor and a plain tensor (bound as :func:`div`)."""
    nc = x.shape[-1]
    if nc == 1:
        return x / b.unsqueeze(-1)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(to_engine(x, engine) / b.to(engine), x.dtype, nc)
    return _long_division(x, from_float(b, nc), nc)


def rdiv_float(b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """DivN: ``b / x`` for a plain tensor and a component tensor (bound as :func:`div`)."""
    nc = x.shape[-1]
    if nc == 1:
        return b.unsqueeze(-1) / x
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(b.to(engine) / to_engine(x, engine), x.dtype, nc)
    return _long_division(from_float(b, nc), x, nc)


def reciprocal(x: torch.Tensor) -> torch.Tensor:
    """``1 / x`` (bound as :func:`div`)."""
    return rdiv_float(torch.ones_like(x[..., 0]), x)


# ------------------------------------------------------------------------- square root


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """Square root of a component tensor.

    Wide engine where available. Otherwise Newton's iteration in the Karp–Markstein
    form: ``s <- s + (x - s^2) * r`` with the plain ``r = 1 / (2 sqrt(x[0]))``, carried at
    ``nc + 1`` components. Since ``r`` is only ``p``-bit accurate each step gains about
    ``p - 1`` bits, so ``nc + 1`` steps reach ``nc * p`` bits; the residual is formed in MC
    arithmetic so nothing cancels. Tested <= 8 ``u^nc``. Negative input gives NaN,
    ``sqrt(±0) = ±0``, ``sqrt(inf) = inf``.
    """
    nc = x.shape[-1]
    if nc == 1:
        return torch.sqrt(x)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return from_engine(torch.sqrt(to_engine(x, engine)), x.dtype, nc)
    if nc == 2:
        return _sqrt2(x)
    x0 = x[..., 0]
    regular = (x0 > 0) & torch.isfinite(x0)
    # Scale by an even power of two 2^(-2k) (exactly, in two steps of 2^-k) so that the
    # squares of the iteration neither overflow nor underflow; sqrt scales by 2^k.
    k = torch.where(regular, torch.frexp(x0).exponent // 2, 0).to(x.dtype)
    down = torch.pow(2.0, -k).unsqueeze(-1)
    xs = x * down * down
    s0 = torch.sqrt(xs[..., 0])
    r = torch.where(regular, 0.5 / s0, 0.0)
    wide = nc + 1
    xw = pad(xs, wide)
    s = from_float(torch.where(regular, s0, 0.0), wide)
    for _ in range(nc + 1):
        resid = sub(xw, square(s))
        s = add_float(s, resid[..., 0] * r)
    out = renormalize(unpack(s), nc, presorted=True) * (1.0 / down)
    return torch.where(regular.unsqueeze(-1), out, from_float(torch.sqrt(x0), nc))


def _sqrt2(x: torch.Tensor) -> torch.Tensor:
    """Double-word square root by one Karp–Markstein correction.

    ``s = sqrt(x_h)``, residual ``r = (x_h - s^2) + x_l`` with ``s^2`` from TwoProd (so
    ``x_h - p`` is exact by Sterbenz), result ``s + r / (2 s)`` by FastTwoSum. The
    correction is relative-``u`` accurate and itself ``u`` times smaller than ``s``, so the
    result is good to a few ``u^2``; tested <= 8. Squares that would overflow or
    underflow are avoided by scaling ``x`` with an even power of two first (exact).
    """
    xh, xl = unpack(x)
    regular = (xh > 0) & torch.isfinite(xh)
    k = torch.where(regular, torch.frexp(xh).exponent // 2, 0).to(x.dtype)
    down = torch.pow(2.0, -k)
    xh, xl = xh * down * down, xl * down * down
    s = torch.sqrt(xh)
    p, e = two_prod(s, s)
    r = ((xh - p) - e) + xl
    c = r / (2 * s)
    zh, zl = fast_two_sum(s, c)
    up = 1.0 / down
    out = pack([zh * up, zl * up])
    if bool(regular.all()):
        return out
    return torch.where(regular.unsqueeze(-1), out, from_float(torch.sqrt(x[..., 0]), 2))


# --------------------------------------------------------------- sign, abs, comparisons


def sign(x: torch.Tensor) -> torch.Tensor:
    """Sign of the value as a plain tensor (-1, 0, +1; NaN for NaN). Exact."""
    x0 = x[..., 0]
    return torch.where(torch.isnan(x0), x0, torch.sign(x0))


def abs(x: torch.Tensor) -> torch.Tensor:  # noqa: A001 - mirrors torch.abs
    """``|x|`` (exact): the components are negated where the leading one is negative."""
    if x.shape[-1] == 1:
        return torch.abs(x)
    return torch.where(torch.signbit(x[..., :1]), -x, x)


def compare(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Exact three-way comparison: ``sign(x - y)`` as a plain tensor (NaN if unordered).

    Exact because the accurate subtraction has a relative error bound: its leading
    component is zero iff ``x == y`` and otherwise has the sign of ``x - y``.
    Infinite operands compare by their leading components.
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
    """``x == y`` exactly (bool tensor)."""
    return compare(x, y) == 0


def ne(x, y):
    """``x != y`` exactly (True for NaN, like torch)."""
    return ~eq(x, y)


def lt(x, y):
    """``x < y`` exactly."""
    return compare(x, y) < 0


def le(x, y):
    """``x <= y`` exactly."""
    return compare(x, y) <= 0


def gt(x, y):
    """``x > y`` exactly."""
    return compare(x, y) > 0


def ge(x, y):
    """``x >= y`` exactly."""
    return compare(x, y) >= 0


def where(cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise select between two component tensors (exact)."""
    x, y, _ = _common(x, y)
    return torch.where(cond.unsqueeze(-1), x, y)


def _nan_if_either(r: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    nan = torch.isnan(x[..., 0]) | torch.isnan(y[..., 0])
    return torch.where(nan.unsqueeze(-1), from_float(torch.full_like(r[..., 0], torch.nan), r.shape[-1]), r)


def maximum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise max, exact; NaN if either is NaN (like ``torch.maximum``)."""
    x, y, _ = _common(x, y)
    pick = ge(x, y) | torch.isnan(x[..., 0])
    return _nan_if_either(where(pick, x, y), x, y)


def minimum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise min, exact; NaN if either is NaN (like ``torch.minimum``)."""
    x, y, _ = _common(x, y)
    pick = le(x, y) | torch.isnan(x[..., 0])
    return _nan_if_either(where(pick, x, y), x, y)


def clamp(
    x: torch.Tensor, lo: torch.Tensor | None = None, hi: torch.Tensor | None = None
) -> torch.Tensor:
    """Clamp to ``[lo, hi]`` (component tensors or ``None``), exact; NaN stays NaN."""
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

    Each step is one :func:`mul` (or :func:`square`); the error grows like
    ``(2 log2 |n|) * 8 u^nc``. Negative ``n`` takes the reciprocal at the end;
    ``x ** 0 == 1`` (also for NaN, like torch).
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
    return result
