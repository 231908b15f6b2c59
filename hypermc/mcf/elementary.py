"""Elementary functions on component tensors: exp, log, their hyperbolic relatives, sin, cos, tan.

A *component tensor* ``x`` has shape ``(*shape, nc)``; element ``i`` is the exact sum of
its ``nc`` non-overlapping components (leading first). ``u = 2**-p`` is the unit
roundoff of the component dtype. Every function here is pure, elementwise and
vectorised, and picks one of three paths, always in this order:

1. ``nc == 1``: the plain function, bitwise: torch's (``torch.expm1`` …), except
   ``exp``, ``log`` and ``tanh`` on the CPU, which are :mod:`.portable`'s (torch's go
   through MKL, whose rounding depends on the CPU model; ``sin``, ``cos`` and ``tan``
   still do).
2. *Wide engine* (:func:`arith.engine_dtype`, e.g. float32 ``nc = 2`` in float64): the
   torch function of the wide dtype, whose error (about one engine ulp) is far below
   ``u^nc``. Where the function cancels (log near 1, log1p near -1, acosh near 1,
   atanh near ±1) the engine never sees the rounded ``x`` alone: log uses the exact
   two-term engine value ``log(hi) + lo/hi``, acosh and atanh form ``x - 1`` and
   ``1 - |x|`` from the components (``c0 - 1`` is exact in the engine).
3. *Generic*: range reduction plus a series or Newton's iteration in MC arithmetic.
   float64 runs it directly. float16, bfloat16 and float32 with more components than
   the engine holds (float32 ``nc = 3, 4``) first form the cancelling differences
   (``x - 1``, ``1 + x``, ``1 - |x|``) exactly in their own dtype with :mod:`arith`,
   then run the generic algorithm on the float64 expansion with
   ``ceil((nc p + 4) / 53)`` components (a double-word for float32 ``nc <= 4``) and
   round back; float64 double-word arithmetic is far cheaper than float32 three- or
   four-component arithmetic and at least as accurate. Two components use the
   double-word algorithms of Joldes–Muller–Popescu inline on component lists (the
   same algorithms as :mod:`arith`, without its per-op packing and non-finite
   bookkeeping: they are the inner loop of every series); three or more call
   :mod:`arith`. Large CPU inputs are processed in blocks of ``2^15`` elements.
   float64 functions with ``nc = 2, 3, 4`` run this algorithm as one fused loop where a
   backend registered one in :mod:`registry` (:func:`native.exp`, :func:`native.log`,
   ...: the same roundings, so the same bits; the elements they flag take the torch
   code; this module never imports the backend). So do float32 ``nc = 3, 4`` exp, expm1,
   sinh, cosh, tanh, sin, cos and tan, the conversions to and from float64 included
   (one kernel per call), float32 asinh on its double-word, and float32 log, log1p,
   acosh and atanh on the double-words of their arguments prepared in float32 (the
   kernels of ``_log1p_masked_generic``, ``_acosh_generic`` and ``_atanh_generic``).

Generic algorithms (Tang's table-driven exp, Newton's iteration on it for log):

* ``exp``: ``x = (256 k + j) ln2/256 + r`` with ``n = round(256 x / ln2)``,
  ``|j| <= 128``; ``r`` is formed in MC arithmetic with ``ln2/256`` split Cody–Waite
  style (two pieces whose products with ``n`` are exact, plus an MC remainder), so
  ``|r| <= ln2/512``. ``expm1(r)`` is a Taylor series in Horner form whose inner terms
  are evaluated with as few components as their weight allows (plain floats for terms
  below ``2^-p`` of the result). Then ``E = expm1(x - k ln2) = D_j + T_j expm1(r)``
  with the tables ``T_j = 2^(j/256)``, ``D_j = T_j - 1`` (MC constants), and
  ``exp(x) = 2^k (1 + E)``, the power of two applied exactly in two steps.
* ``expm1``: ``2^k ((1 - 2^-k) + E)`` with ``1 - 2^-k`` exact, so nothing cancels
  beyond a factor 1.5 (and ``expm1 = E`` for ``|x| <= ln2/2``).
* ``log1p`` / ``log``: ``w = 2^e m`` with ``m`` in ``[1/√2, √2)`` (``m = 1 + x`` itself
  for small ``x``), ``t = m - 1`` exact in MC, and ``y = log1p(t)`` by Newton's
  iteration ``y <- y - (expm1(y) - t) / (1 + expm1(y))`` from the plain ``log1p`` of
  the leading component, one step per component count ``2, 3, …, nc`` (each step
  doubles the correct bits); the result is ``e ln2 + y``.
* ``sin``, ``cos``, ``tan``: ``x = n pi/2 + r`` with the exact products of ``n`` and the
  pieces of a ~1,600-bit ``pi/2`` (a cheaper fixed-network path where fewer than ``p - 8``
  bits cancel), ``r = j/128 + t``, Taylor series of ``sin t`` and ``cos t - 1``, the
  tables ``sin(j/128)``, ``cos(j/128)`` and the quadrant ``n mod 4`` (:func:`sin`). They
  run on the *exact* float64 expansion of a narrower dtype (a large argument's reduction
  needs its absolute precision), and on the engine only where it holds ``x`` exactly.
* ``sinh``, ``cosh``, ``tanh``: from ``(k, E)`` of ``|x|`` (or ``2|x|``) and
  ``R = 1 / (1 + E)``; ``asinh``, ``acosh``, ``atanh``: the ``log1p`` forms of the
  function docstrings, with the cancelling differences formed in MC arithmetic.

All constants (``ln2``, Cody–Waite pieces, tables, ``1/k!``) are computed with mpmath at
``nc p + 64`` bits on first use and cached per ``(dtype, nc, device)``; nothing runs at
import.

Bounds (units of ``u^nc``, the ``"transcendental"`` entry of the tests' bound table,
checked in ``tests/mcf/test_elementary.py`` against mpmath): relative error ``<= 64``
for results in the normal range of the dtype whose ``nc`` components are normal too.
The functions with a zero at 0 (expm1, log1p, sinh, tanh, asinh, atanh) and log, acosh
(zero at 1, with ``x - 1`` formed exactly) are *relatively* accurate up to their zero as
well. Results whose tail components would be subnormal (``|f| < 2^(emin + (nc-1) p)``,
e.g. ``exp(x)`` near underflow, or float32 ``nc = 4`` values below ``2^-54``) cannot hold
``nc p`` bits; their absolute error is at most ``nc`` smallest subnormals.
Inf and NaN propagate like torch's functions (the domain errors ``log(-1)``,
``acosh(0.5)``, ``atanh(2)`` give NaN; ``log(0) = -inf``, ``atanh(±1) = ±inf``);
overflow gives inf, never NaN.

References:
    P. T. P. Tang, "Table-driven implementation of the exponential function in IEEE
    floating-point arithmetic", ACM TOMS 15(2), 1989; W. J. Cody and W. Waite, *Software
    Manual for the Elementary Functions*, 1980 (argument reduction); J.-M. Muller,
    *Elementary Functions: Algorithms and Implementation*, 3rd ed., 2016 (chapters 6
    and 11); D. H. Bailey, Y. Hida, X. S. Li, "QD: a double-double / quad-double
    package" (Newton's iteration for log on an accurate exp).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import mpmath
import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import arith, fixed, portable, registry
from .arith import add_float, engine_dtype, from_float
from .eft import (
    all_true,
    fast_two_sum,
    float_format,
    fused_addcmul,
    has_fused_addcmul,
    pack,
    renormalize,
    renormalize_finite,
    select,
    sqrt_rn,
    two_prod,
    two_sum,
    unpack,
)

__all__ = ["exp", "expm1", "log", "log1p", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sin", "cos", "tan", "sigmoid", "erf"]

# Bits carried beyond nc * p by the series, the tables and the float64 detour.
_GUARD_BITS = 4
# exp's table reduction: 2**_TABLE_BITS steps per ln2, |j| <= _TABLE_HALF (tables of
# 257 MC constants; 8 bits save two double-word Horner steps over Tang's 5 bits).
_TABLE_BITS = 8
_TABLE_STEPS = 1 << _TABLE_BITS
_TABLE_HALF = _TABLE_STEPS // 2
# log1p evaluates its Newton core on x itself for x in this range, which lies inside
# [1/sqrt(2) - 1, sqrt(2) - 1] (where the core's starting value and tables are valid).
_LOG1P_CORE_LO = -0.29
_LOG1P_CORE_HI = 0.41
_SQRT_HALF = math.sqrt(0.5)
# Elements per block of the generic path on CPU (its ~300 temporaries then stay in cache).
_CPU_BLOCK = 1 << 15
# Significand bits of float64, the dtype of the generic path.
_P64 = 53

# Integer view of each dtype's bits: (integer dtype, stored significand bits, bias).
_BIT_LAYOUT = {
    torch.float64: (torch.int64, 52, 1023),
    torch.float32: (torch.int32, 23, 127),
    torch.float16: (torch.int16, 10, 15),
    torch.bfloat16: (torch.int16, 7, 127),
}


# ------------------------------------------------------------------------- small tools


def _exponent_range(dtype: torch.dtype) -> tuple[int, int]:
    """``(emin, emax)``: exponents of the smallest and largest normal powers of two."""
    fi = torch.finfo(dtype)
    return math.frexp(fi.tiny)[1] - 1, math.frexp(fi.max)[1] - 1


def _pow2(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Exact ``2**k`` for integer-valued ``k`` (a float or an integer tensor) in ``[emin,
    emax]``, built from bits."""
    itype, shift, bias = _BIT_LAYOUT[dtype]
    return torch.bitwise_left_shift(k.to(itype) + bias, shift).view(dtype)


def _ldexp_factors(k: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two powers of two with product ``2**k`` for integer-valued ``|k| <= 2 emax``
    (clamped beyond), in integer arithmetic: ``k1 = trunc(k / 2)``, ``k2 = k - k1``."""
    emin, emax = _exponent_range(dtype)
    ki = k.to(_BIT_LAYOUT[dtype][0])
    k1 = torch.div(ki, 2, rounding_mode="trunc").clamp(emin, emax)
    k2 = (ki - k1).clamp(emin, emax)
    return _pow2(k1, dtype), _pow2(k2, dtype)


def _ldexp_plain(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Plain ``2**k`` (0 or inf outside the range) for integer-valued ``k``."""
    f1, f2 = _ldexp_factors(k, dtype)
    return f1 * f2


def _special(result: torch.Tensor, x0: torch.Tensor, fn: Callable) -> torch.Tensor:
    """Use the plain function of the leading component where it is inf or NaN (on the
    CPU in eager mode ``fn`` runs only when some element is; elsewhere the test would
    cost a host sync)."""
    finite = torch.isfinite(x0)
    if x0.device.type == "cpu" and all_true(finite):
        return result
    return torch.where(finite.unsqueeze(-1), result, from_float(fn(x0), result.shape[-1]))


def _tiny_odd_threshold(p: int, nc: int) -> float:
    """Below this ``|x|``, ``f(x) = x (1 + O(x^2))`` rounds to ``x`` within ``u^nc / 8``."""
    return 2.0 ** -((nc * p + _GUARD_BITS) // 2 + 1)


def _tiny_threshold(p: int, nc: int) -> float:
    """Below this ``|x|``, ``f(x) = x (1 + O(x))`` rounds to ``x`` within ``u^nc / 8``."""
    return 2.0 ** -(nc * p + _GUARD_BITS)


# -------------------------------------------------------------------------- constants


class _Constants(NamedTuple):
    """MC constants of one ``(dtype, nc, device)`` (see :func:`_constants`)."""

    ln2: torch.Tensor  # (nc,)
    inv_step: float  # 64 / ln2, nearest float
    cw0: float  # Cody-Waite pieces of ln2/64: n * cw_i is exact for |n| < 2**n_bits
    cw1: float
    cw_rest: torch.Tensor  # (nc,): ln2/64 - cw0 - cw1
    bound: float  # exp(±bound) over/underflows completely
    d_table: torch.Tensor  # (nc, 65): 2**(j/64) - 1, j = -32..32, planar
    t_table: torch.Tensor  # (nc, 65): 2**(j/64)
    coeffs: tuple[torch.Tensor, ...]  # coeffs[k] = 1/k!, (nc,) each
    coeff_lead: tuple[float, ...]  # leading component of coeffs[k]
    coeff_is_float: tuple[bool, ...]  # coeffs[k] is one float (1, 1/2)
    plan: tuple[int, ...]  # plan[k]: components used at Horner step k (plan[0] unused)


def _split_mpf(value, p: int, nc: int) -> list[float]:
    """Components of an mpf: each the remainder rounded to nearest ``p``-bit float."""
    out = []
    rest = value
    for _ in range(nc):
        with mpmath.workprec(p):
            c = +rest  # unary plus rounds to the working precision (nearest, ties even)
        out.append(float(c))
        rest = rest - c  # exact: the outer precision holds every remainder
    return out


def _planar_constants(values, p: int, nc: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """mpf ``values`` as ``nc``-component constants of ``dtype``, planar ``(nc, len(values))``."""
    rows = [_split_mpf(v, p, nc) for v in values]
    return torch.tensor(rows, dtype=torch.float64).to(dtype=dtype, device=device).T.contiguous()


def _series_plan(p: int, nc: int) -> tuple[int, ...]:
    """Horner plan of ``expm1(r)/r = sum r^(k-1)/k!`` for ``|r| <= ln2/128``.

    Term ``k`` weighs at most ``2^-c(k)`` of the result, ``c(k) = (k-1) b + log2 k!``
    with ``2^-b >= ln2/128``. The series stops before the first term below
    ``2^-(nc p + guard)``; Horner step ``k`` carries ``ceil((nc p + 2 guard - c(k)) / p)``
    components, so each step's rounding weighs below ``u^nc / 32``.
    """
    target = nc * p + _GUARD_BITS
    b = -math.log2(math.log(2.0) / (2 * _TABLE_STEPS) * (1 + 2.0**-20))

    def weight_bits(k: int) -> float:
        return (k - 1) * b + math.lgamma(k + 1) / math.log(2.0)

    n = 1
    while weight_bits(n + 1) < target:
        n += 1
    levels = [0] + [min(nc, max(1, math.ceil((target + _GUARD_BITS - weight_bits(k)) / p))) for k in range(1, n + 1)]
    return tuple(levels)


@functools.cache
def _constants(dtype: torch.dtype, nc: int, device: torch.device) -> _Constants:
    """Build the MC constants of ``(dtype, nc, device)`` with mpmath (once, cached).

    Built with every dispatch mode suspended: a first call while ``torch.compile``
    traces (fake tensors) must still cache real tensors."""
    with _disable_current_modes(), torch._C._DisableTorchDispatch():
        return _build_constants(dtype, nc, device)


def _build_constants(dtype: torch.dtype, nc: int, device: torch.device) -> _Constants:
    p = float_format(dtype).p
    emin, emax = _exponent_range(dtype)
    # exp(bound) overflows, exp(-bound) is below half the smallest subnormal.
    bound = float((emax + p + 3) * math.log(2.0))
    n_bits = math.ceil(math.log2(_TABLE_STEPS * (emax + p + 4)))
    plan = _series_plan(p, nc)

    def mc(values) -> torch.Tensor:
        return _planar_constants(values, p, nc, dtype, device)

    with mpmath.workprec(nc * p + 64):
        ln2 = mpmath.log(2)
        step = ln2 / _TABLE_STEPS
        with mpmath.workprec(p - n_bits):
            cw0 = +step
        with mpmath.workprec(p - n_bits):
            cw1 = +(step - cw0)
        cw_rest = step - cw0 - cw1
        js = range(-_TABLE_HALF, _TABLE_HALF + 1)
        t_vals = [mpmath.power(2, mpmath.mpf(j) / _TABLE_STEPS) for j in js]
        d_vals = [mpmath.powm1(2, mpmath.mpf(j) / _TABLE_STEPS) for j in js]
        coeffs = [_split_mpf(1 / mpmath.factorial(k), p, nc) for k in range(len(plan))]
        return _Constants(
            ln2=mc([ln2])[:, 0].contiguous(),
            inv_step=float(_TABLE_STEPS / ln2),
            cw0=float(cw0),
            cw1=float(cw1),
            cw_rest=mc([cw_rest])[:, 0].contiguous(),
            bound=bound,
            d_table=mc(d_vals),
            t_table=mc(t_vals),
            coeffs=tuple(torch.tensor(c, dtype=dtype, device=device) for c in coeffs),
            coeff_lead=tuple(c[0] for c in coeffs),
            coeff_is_float=tuple(all(ci == 0 for ci in c[1:]) for c in coeffs),
            plan=plan,
        )


# ---------------------------------------------------------------------------- dispatch


def _dispatch(
    x: torch.Tensor,
    plain: Callable[[torch.Tensor], torch.Tensor],
    engine_fn: Callable[[torch.Tensor, torch.dtype], torch.Tensor],
    generic: Callable[..., list[torch.Tensor]],
    *,
    prepare: Callable[[torch.Tensor], tuple[torch.Tensor, ...]] | None = None,
    odd: bool = False,
    fused: str | None = None,
    exact64: Callable[[torch.dtype, int], int] | None = None,
) -> torch.Tensor:
    """Pick the path: plain torch (nc = 1), wide engine, or the generic MC algorithm.

    ``prepare`` forms the cancelling differences (``x - 1``, ``1 + x``, ``1 - |x|``)
    exactly in the input's own dtype before the generic path may convert to float64;
    it returns component tensors and boolean masks, which ``generic`` receives as
    component lists and masks. On the generic path non-finite inputs take the plain
    function's value of the leading component and ``odd`` functions return ``±0`` for
    ``±0`` (the engine kernels do both themselves). Large CPU inputs run the generic path
    in blocks of ``_CPU_BLOCK`` elements, so its many temporaries stay in cache.

    ``fused`` (``"exp"``, ``"log"``, ...) names the :mod:`registry` kernel that runs this
    whole function as one fused loop where a backend has one (:func:`native.exp`: same
    bits; for float32 nc = 3, 4 with the conversions to and from float64 inside); the
    elements it flags take this function's torch path.

    ``exact64(dtype, nc)`` (sin, cos, tan): a narrower input enters the generic path as its
    exact float64 expansion (all ``nc`` components: the argument reduction needs the
    absolute precision of a large ``x``, which the rounded :func:`_to_float64` would lose),
    and ``generic`` receives ``width=exact64(dtype, nc)``, the components its result needs.
    """
    if x.dim() == 0:
        raise ValueError("x: expected a component tensor of shape (*shape, nc); got a 0-d tensor (an MCTensor's components have nc last)")
    nc = x.shape[-1]
    if nc == 1:
        return plain(x)
    engine = engine_dtype(x.dtype, nc)
    if engine is not None:
        return engine_fn(x, engine)
    res = registry.call(fused, x) if fused is not None else None
    if res is not None:
        return res.patched(lambda rows: _dispatch(rows, plain, engine_fn, generic, prepare=prepare, odd=odd, exact64=exact64), x)
    if exact64 is not None:
        generic = functools.partial(generic, width=exact64(x.dtype, nc))
    n = x[..., 0].numel()
    if x.device.type != "cpu" or n <= _CPU_BLOCK:
        return _generic_path(x, plain, generic, prepare, odd, fused, exact64 is not None)
    flat = x.reshape(n, nc)
    out = torch.empty((nc, n), dtype=x.dtype, device=x.device)
    for start in range(0, n, _CPU_BLOCK):
        block = _generic_path(flat[start : start + _CPU_BLOCK], plain, generic, prepare, odd, fused, exact64 is not None)
        out[:, start : start + _CPU_BLOCK] = block.movedim(-1, 0)
    return out.movedim(0, -1).reshape(x.shape)


def _generic_path(x, plain, generic, prepare, odd, fused=None, exact64=False) -> torch.Tensor:
    """The generic branch of :func:`_dispatch` on one block.

    Inputs of a narrower dtype run on their float64 expansion. Where the function has a
    ``fused`` float64 kernel that takes ``x`` alone (``exp``), the expansion goes through
    that kernel where it applies (a double-word: float32 asinh, float16 and bfloat16): the
    same roundings as ``generic`` on it (the kernel's contract; the elements it flags take
    ``generic``), so the same bits, without the per-op torch kernels. log, log1p, acosh
    and atanh form their differences in the input's dtype first; their prepared operands
    go through the kernel of the generic function itself (:data:`_PREPARED_KERNELS`,
    where they are double-words: float32 nc = 3, 4 and the narrower dtypes up to about
    ``106 / p`` components).
    """
    nc = x.shape[-1]
    args = prepare(x) if prepare is not None else (x,)
    if x.dtype == torch.float64 or exact64:
        y = _finish(generic(*[a if a.dtype == torch.bool else unpack(a.to(torch.float64)) for a in args]))
        y = y if x.dtype == torch.float64 else _from_float64(y, x.dtype, nc)
    else:
        args64 = [a if a.dtype == torch.bool else _to_float64(a) for a in args]
        prepared = _PREPARED_KERNELS.get(generic)
        if prepared is not None:  # log, log1p, acosh, atanh: operands prepared in x's dtype, then the kernel
            operands: tuple = tuple(a.unsqueeze(-1) if isinstance(a, torch.Tensor) else pack(a) for a in args64)
            res = registry.call(prepared, *operands)
        else:
            x64 = pack(args64[0])
            res = registry.call(fused, x64) if fused is not None and prepare is None else None
            operands = (x64,)
        if res is not None:
            y64 = res.patched(lambda *rows: _finish(generic(*(r[..., 0] if r.dtype == torch.bool else unpack(r) for r in rows))), *operands)
        else:
            y64 = _finish(generic(*args64))
        y = _from_float64(y64, x.dtype, nc)
    y = _special(y, x[..., 0], plain)
    if odd:
        y = torch.where(x[..., :1] == 0, x, y)
    return y


def _to_float64(x: torch.Tensor) -> list[torch.Tensor]:
    """The float64 expansion of ``x`` with ``ceil((nc p + guard) / 53)`` components.

    Relative error at most ``2^-guard u^nc`` of ``x``; non-finite elements become 0
    (their result is replaced by :func:`_dispatch`). Differences that cancel must be
    formed *before* this conversion (see ``prepare`` in :func:`_dispatch`).

    A double-word (float32 ``nc <= 4``, float16/bfloat16 up to ``(106 - guard) / p``
    components) comes from a fixed network instead of :func:`renormalize`: a bottom-up
    VecSum of the ``m`` components (TwoSums, exact: ``x = s + sum(e_k)``), the errors
    summed plainly into ``lo`` (off by at most ``(m - 2) 2^-53 sum|e_k| <= m^2 2^-106 |x|``,
    below ``2^-guard u^nc |x|``), and ``FastTwoSum(s, lo)`` (``|lo| <= m 2^-53 |s|``).
    """
    nc = x.shape[-1]
    p = float_format(x.dtype).p
    return _expansion64(unpack(x), max(2, math.ceil((nc * p + _GUARD_BITS) / _P64)))


def _expansion64(comps: list[torch.Tensor], nc64: int) -> list[torch.Tensor]:
    """:func:`_to_float64` on the component list (the float64 kernels of float32
    results trace it: :func:`hypermc.mcf.native.source.elementary_kernels`)."""
    finite = torch.isfinite(comps[0])
    terms = [torch.where(finite, c, 0.0).to(torch.float64) for c in comps]
    if nc64 > 2:
        return unpack(renormalize(terms, nc64, presorted=True))
    s, errors = terms[-1], []
    for t in reversed(terms[:-1]):
        s, e = two_sum(t, s)
        errors.append(e)
    if not errors:  # one component
        return [s, torch.zeros_like(s)]
    lo = errors[-1]
    for e in reversed(errors[:-1]):
        lo = lo + e
    return list(fast_two_sum(s, lo))


def _from_float64(z: torch.Tensor, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Round a float64 expansion into ``nc`` components of ``dtype`` (nearest each)."""
    return _rounded_to(unpack(z), dtype, nc)


def _rounded_to(rest: list[torch.Tensor], dtype: torch.dtype, nc: int) -> torch.Tensor:
    """:func:`_from_float64` on the component list (traced by the float64 kernels of
    float32 results, like :func:`_expansion64`)."""
    comps = []
    for i in range(nc):
        c = rest[0].to(dtype)
        comps.append(c)
        if i + 1 == nc:
            break
        d = rest[0] - c.to(torch.float64)  # exact
        if len(rest) == 1:
            rest = [d]
        elif len(rest) == 2:
            rest = list(two_sum(d, rest[1]))
        else:
            rest = unpack(renormalize([d] + rest[1:], len(rest)))
    return _finish(comps)


def _engine_in(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    """Sum of the components in the engine dtype, smallest first (as :func:`arith.to_engine`).

    Accumulates in place (one pass per component). Relative error at most
    ``(nc - 1) 2^-p_engine``, far below ``u^nc``.
    """
    comps = unpack(x)
    z = comps[-1].to(engine)
    for c in reversed(comps[:-1]):
        z.add_(c)
    return z


def _engine_out(z: torch.Tensor, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Split an engine value into ``nc`` nearest-rounded components (as :func:`arith.from_engine`).

    Written straight into a planar buffer (no stacking pass); each remainder is exact in
    the engine dtype. Tails behind a non-finite leading component become 0 (and a
    leading component that overflows the component dtype is ±inf).
    """
    out = torch.empty((nc,) + tuple(z.shape), dtype=dtype, device=z.device)
    rest = z
    for k in range(nc):
        out[k].copy_(rest)
        if k + 1 < nc:
            rest = rest - out[k]
    if nc > 1:
        out[1:].nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    return out.movedim(0, -1)


def _engine_pair(x: torch.Tensor, engine: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` in the engine dtype, ``hi = fl(x)``, ``hi + lo = x`` to ``2^-2p_engine``."""
    comps = unpack(x)
    if len(comps) == 2:  # |c0| >= |c1|: FastTwoSum
        c0, c1 = comps[0].to(engine), comps[1].to(engine)
        hi = c0 + c1
        return hi, c1.sub_(hi - c0)
    hi = comps[-1].to(engine)
    lo = None
    for c in reversed(comps[:-1]):
        hi, e = two_sum(c.to(engine), hi)
        lo = e if lo is None else lo + e
    return hi, lo  # type: ignore[return-value]  # nc >= 2 here: the loop sets lo


def _engine_log_pair(hi: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """``log(hi + lo)`` for ``|lo| <= ulp(hi)``: ``log(hi) + lo/hi`` (0, inf, NaN like ``log``)."""
    corr = (lo / hi).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)  # hi = 0 or inf
    return torch.log(hi).add_(corr)


# ------------------------------------------------------- internal MC ops on component lists
#
# The generic path works on lists of component tensors (leading first) of *finite*
# values. One component is plain float arithmetic; two components use the double-word
# algorithms of Joldes, Muller and Popescu (ACM TOMS 2017) inline — the same algorithms
# as :mod:`arith`, without its packing and non-finite bookkeeping, because they are the
# inner loop of every series here; three or more components call :mod:`arith`.


def _lpad(a: list[torch.Tensor], n: int) -> list[torch.Tensor]:
    if len(a) >= n:
        return a
    zero = torch.zeros_like(a[0])
    return a + [zero] * (n - len(a))


def _lneg(a: list[torch.Tensor]) -> list[torch.Tensor]:
    return [-c for c in a]


def _pack_b(a: list[torch.Tensor]) -> torch.Tensor:
    """A component tensor of the list (broadcast). A list that :func:`unpack` made of a
    planar kernel output is viewed again without a copy (the kernels never write to
    their operands)."""
    a = list(torch.broadcast_tensors(*a))
    view = _planar_view(a)
    return pack(a) if view is None else view


def _planar_view(a: list[torch.Tensor]) -> torch.Tensor | None:
    """``pack(a)`` as a view when the components lie at equal distances in one buffer."""
    t0 = a[0]
    if len(a) < 2 or t0.numel() < 2:
        return None
    step = a[1].data_ptr() - t0.data_ptr()
    item = t0.element_size()
    if step <= 0 or step % item:
        return None
    for k, t in enumerate(a):
        if (
            t.data_ptr() != t0.data_ptr() + k * step
            or t.stride() != t0.stride()
            or t.dtype != t0.dtype
            or t.untyped_storage().data_ptr() != t0.untyped_storage().data_ptr()
        ):
            return None
    return t0.as_strided((*t0.shape, len(a)), (*t0.stride(), step // item))


def _add(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """Accurate ``a + b``: relative bound also under cancellation (AccurateDWPlusDW)."""
    n = max(len(a), len(b))
    a, b = _lpad(a, n), _lpad(b, n)
    if n == 1:
        return [a[0] + b[0]]
    if n == 2:
        sh, sl = two_sum(a[0], b[0])
        th, tl = two_sum(a[1], b[1])
        vh, vl = fast_two_sum(sh, sl + th)
        return list(fast_two_sum(vh, tl + vl))
    return unpack(arith.add(_pack_b(a), _pack_b(b)))


def _add_nc(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """``a + b`` when nothing cancels (``|a + b| >= max(|a|, |b|) / 2``): SloppyDWPlusDW."""
    n = max(len(a), len(b))
    if n != 2:
        return _add(a, b)
    a, b = _lpad(a, 2), _lpad(b, 2)
    sh, sl = two_sum(a[0], b[0])
    return list(fast_two_sum(sh, sl + (a[1] + b[1])))


def _add_f(a: list[torch.Tensor], b) -> list[torch.Tensor]:
    """``a + b`` for a plain tensor or Python float ``b`` (DWPlusFP, accurate)."""
    n = len(a)
    if n == 1:
        return [a[0] + b]
    if n == 2:
        sh, sl = two_sum(a[0], b)
        return list(fast_two_sum(sh, a[1] + sl))
    if not isinstance(b, torch.Tensor):
        b = torch.tensor(b, dtype=a[0].dtype, device=a[0].device)
    return unpack(arith.add_float(_pack_b(a), b))


def _mul(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """``a * b`` (DWTimesDW3 with a fused multiply-add, DWTimesDW1 without)."""
    n = max(len(a), len(b))
    a, b = _lpad(a, n), _lpad(b, n)
    if n == 1:
        return [a[0] * b[0]]
    if n == 2:
        ch, cl1 = two_prod(a[0], b[0])
        if has_fused_addcmul(ch.device.type, ch.dtype):
            cl2 = fused_addcmul(fused_addcmul(a[1] * b[1], a[0], b[1]), a[1], b[0])
        else:
            cl2 = a[0] * b[1] + a[1] * b[0]
        return list(fast_two_sum(ch, cl1 + cl2))
    return unpack(arith.mul(_pack_b(a), _pack_b(b)))


def _mul_f(a: list[torch.Tensor], b: torch.Tensor) -> list[torch.Tensor]:
    """``a * b`` for a plain tensor ``b`` (DWTimesFP1)."""
    n = len(a)
    if n == 1:
        return [a[0] * b]
    if n == 2:
        ch, cl1 = two_prod(a[0], b)
        return list(fast_two_sum(ch, cl1 + a[1] * b))
    return unpack(arith.mul_float(_pack_b(a), b))


def _mul_f_zero(a: list[torch.Tensor], b: torch.Tensor) -> list[torch.Tensor]:
    """``_mul_f(a, b)`` where ``b`` may be 0: at three or more components the fixed
    network rejects a zero product and arith's general kernel gives ``a_0 b`` (a signed
    zero) and ``+0`` tails, so the fixed network's check matters only where ``b != 0``."""
    if len(a) < 3:
        return _mul_f(a, b)
    nonzero = b != 0
    with fixed.checks_only_where(nonzero):
        prod = _mul_f(a, b)
    return _general_zeros(prod, nonzero, a[0], b)


def _general_zeros(prod: list[torch.Tensor], nonzero: torch.Tensor, a0: torch.Tensor, b0: torch.Tensor) -> list[torch.Tensor]:
    """``prod`` with the general kernel's zero product (``a0 b0``, ``+0`` tails) where not
    ``nonzero``. On tensors :func:`hypermc.mcf.fixed.patch` has computed those elements
    by the general kernel already; a generated kernel, whose checks
    :func:`~hypermc.mcf.fixed.checks_only_where` gated there, selects them itself."""
    if not getattr(nonzero, "symbolic", False):
        return prod
    return [torch.where(nonzero, prod[0], a0 * b0)] + [torch.where(nonzero, c, 0.0) for c in prod[1:]]


def _mul_zero(a: list[torch.Tensor], b: list[torch.Tensor], nonzero: torch.Tensor) -> list[torch.Tensor]:
    """``_mul(a, b)`` where a factor is zero unless ``nonzero``: at three or more
    components the fixed network rejects a zero product and arith's general kernel gives
    ``a_0 b_0`` (a signed zero) and ``+0`` tails, so its check matters only where
    ``nonzero``."""
    if max(len(a), len(b)) < 3:
        return _mul(a, b)
    with fixed.checks_only_where(nonzero):
        prod = _mul(a, b)
    return _general_zeros(prod, nonzero, a[0], b[0])


def _div(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    """``a / b`` (DWDivDW2: one quotient digit corrected by the double-word residual)."""
    n = max(len(a), len(b))
    a, b = _lpad(a, n), _lpad(b, n)
    if n == 1:
        return [a[0] / b[0]]
    if n == 2:
        th = a[0] / b[0]
        rh, rl = _mul_f(b, th)
        delta = (a[0] - rh) + (a[1] - rl)  # a[0] - rh is exact (Sterbenz)
        return list(fast_two_sum(th, delta / b[0]))
    return unpack(arith.div(_pack_b(a), _pack_b(b)))


def _sqrt(a: list[torch.Tensor]) -> list[torch.Tensor]:
    """``sqrt(a)`` for ``a >= 0`` (one Karp–Markstein correction for two components)."""
    n = len(a)
    if n == 1:
        return [sqrt_rn(a[0])]
    if n == 2:
        sh = sqrt_rn(a[0])  # IEEE (torch's CPU sqrt is not; the fused kernels use std::sqrt)
        ph, pl = two_prod(sh, sh)
        rho = ((a[0] - ph) - pl) + a[1]  # a[0] - ph is exact
        sl = torch.where(sh > 0, rho / (2 * sh), torch.zeros_like(sh))
        return list(fast_two_sum(sh, sl))
    return unpack(arith.sqrt(_pack_b(a)))


def _lwhere(cond: torch.Tensor, a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    n = max(len(a), len(b))
    return [select(cond, ai, bi) for ai, bi in zip(_lpad(a, n), _lpad(b, n))]


def _lscale(a: list[torch.Tensor], k: torch.Tensor) -> list[torch.Tensor]:
    """``a * 2**k`` for a component list, exact unless it over- or underflows.

    Precondition: ``|a[0]|`` is neither tiny nor huge (here it lies in ``[2^-220, 2^220]``
    or scaling goes up), so the first of the two power-of-two factors never rounds and
    the result is rounded once. The caller cleans a non-finite result (:func:`_finish`).
    """
    f1, f2 = _ldexp_factors(k, a[0].dtype)
    return [c * f1 * f2 for c in a]


def _lconst(t: torch.Tensor) -> list[torch.Tensor]:
    """An ``(nc,)`` constant as a list of 0-d component tensors."""
    return list(t.unbind(0))


def _finish(a: list[torch.Tensor]) -> torch.Tensor:
    """Pack a result list, zeroing the tail behind a non-finite leading component."""
    if len(a) == 1:
        return pack(a)
    finite = torch.isfinite(a[0])
    return pack([a[0]] + [torch.where(finite, c, 0.0) for c in a[1:]])


# ---------------------------------------------------------------------- exp machinery


def _expm1_series(r: list[torch.Tensor], cst: _Constants) -> list[torch.Tensor]:
    """``expm1(r)`` for ``|r| <= ln2/128``: ``r q`` with ``q`` from :func:`_expm1_poly`."""
    q = _expm1_poly(r, cst)
    with fixed.short_operand_steps():  # r of a short y has zero components
        return _mul_f(r, q[0]) if len(q) == 1 else _mul(r, q)


def _expm1_poly(r: list[torch.Tensor], cst: _Constants) -> list[torch.Tensor]:
    """``q`` with ``expm1(r) = r q`` by Horner's rule with the plan of ``cst`` (one
    component where the plan keeps every step plain).

    ``q_k = 1/k! + r q_(k+1)``: the product is below ``2^-7.5 / (k+1)`` of the
    coefficient, so the sums never cancel. The kernel generator traces this function.
    """
    plan, lead = cst.plan, cst.coeff_lead
    n = len(plan) - 1
    r0 = r[0]
    q = torch.full_like(r0, lead[n])
    q_list: list[torch.Tensor] | None = None
    for k in range(n - 1, 0, -1):
        level = plan[k]
        if q_list is None and level == 1:
            q = r0 * q + lead[k]
            continue
        rl = r[:level]
        prod = _mul_f(rl, q) if q_list is None else _mul(rl, q_list)
        if cst.coeff_is_float[k]:  # 1 and 1/2
            q_list = _add_f(prod, lead[k])
        else:
            q_list = _add_nc(prod, _lconst(cst.coeffs[k])[:level])
    return [q] if q_list is None else q_list


def _exp_parts(x: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(k, E)`` with ``exp(x) = 2^k (1 + E)``, ``E = expm1(x - k ln2)``, ``|E| <= 0.42``.

    Precondition: ``x`` finite (callers sanitise). ``|x| > bound`` is reduced as
    ``±bound``, whose exp over/underflows like the true one.
    """
    k, r, d, t = _exp_reduce(x)
    er = _expm1_series(r, _constants(x[0].dtype, len(x), x[0].device))
    prod = _mul(t, er)
    with fixed.short_operand_steps():
        return k, _add(d, prod)


def _exp_reduce(x: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Tang's reduction of :func:`_exp_parts`: ``(k, r, d, t)`` with ``x = (64 k + j)
    ln2 / 64 + r`` and the table entries ``d = 2^(j/64) - 1``, ``t = 2^(j/64)``."""
    x0 = x[0]
    cst = _constants(x0.dtype, len(x), x0.device)
    big = x0.abs() > cst.bound
    x = _lwhere(big, [torch.copysign(torch.full_like(x0, cst.bound), x0)], x)
    x0 = x[0]
    n = torch.round(x0 * cst.inv_step)
    k = torch.round(n * (1.0 / _TABLE_STEPS))
    j = n - _TABLE_STEPS * k
    r = _add_f(x, -n * cst.cw0)  # n * cw0 and n * cw1 are exact products
    r = _add_f(r, -n * cst.cw1)
    r = _add(r, _mul_f_zero(_lconst(cst.cw_rest), -n))
    idx = (j + _TABLE_HALF).to(torch.long).clamp(0, 2 * _TABLE_HALF)  # in range even for NaN
    d = [row[idx] for row in cst.d_table]
    t = [row[idx] for row in cst.t_table]
    return k, r, d, t


def _expm1_from_parts(k: torch.Tensor, e: list[torch.Tensor]) -> list[torch.Tensor]:
    """``2^k (1 + E) - 1`` as ``2^k ((1 - 2^-k) + E)`` with the bracket's constant exact."""
    nc = len(e)
    dtype = e[0].dtype
    p = float_format(dtype).p
    # below this, 2^k (1 + E) is under u^nc / 128 of the result -1
    kk = k.clamp(min=-(nc * p + 8))
    pk = _ldexp_plain(-kk, dtype)
    exact = kk.abs() <= p - 1
    one = torch.ones_like(pk)
    a1 = torch.where(exact, one - pk, one)
    a2 = torch.where(exact, torch.zeros_like(pk), -pk)
    v = _add_f(_add_f(e, a1), a2)
    return _lscale(v, kk)


# ----------------------------------------------------------------------- log machinery


def _log1p_core(t: list[torch.Tensor], start: torch.Tensor | None = None) -> list[torch.Tensor]:
    """``log1p(t)`` for ``|t| <= 0.42`` (``t`` exact) by Newton's iteration on expm1.

    ``y <- y - (expm1(y) - t) / (1 + expm1(y))`` from ``y = log1p(t_0)`` (``start``: that
    value computed by the caller; a fused kernel takes torch's), at ``2, 3, …, nc``
    components: each step doubles the correct bits; the correction only needs
    double-word accuracy. The kernel generator traces this function.
    """
    nc = len(t)
    y = [torch.log1p(t[0]) if start is None else start]
    for level in range(2, nc + 1):
        y = _lpad(y, level)
        _, e = _exp_parts(y)  # |y| <= ln2/2, so k = 0 and e = expm1(y)
        d = _residual(e, t[:level])
        c = _div(d[:2], _add_f(e[:2], 1.0))
        y = _add_nc(y, _lneg(c))
    return y


def _residual(e: list[torch.Tensor], t: list[torch.Tensor]) -> list[torch.Tensor]:
    """``e - t`` where ``e ~ t`` (a Newton residual): accurate in *absolute* terms.

    Three and four components: the fixed network of :func:`fixed.add_levels` and
    :func:`fixed.renorm_levels` without the fast-path check (fused where
    :mod:`native` applies, same bits), absolute error ``<= 66 u^(n+1) max(|e|, |t|)``
    whatever the cancellation (``fixed.add_levels``), which is all a correction term
    needs, where the output is a normalised expansion (:func:`fixed.normalised` without
    the cancellation bound); the other elements take the accurate :func:`arith.sub`. The
    accurate kernel alone would send every element, all of them cancelling by design,
    to its slow general path. Inputs are finite (sanitised).
    """
    n = len(t)
    if n < 3 or not fixed.applies(t[0].dtype, n):
        return _add(e, _lneg(t))
    x, y = _pack_b(_lpad(e, n)), _pack_b(t)
    res = registry.call("add", x, y, True)
    if res is not None:
        out = res.out
    else:
        out = fixed.renorm_levels(fixed.add_levels(unpack(x), [-c for c in unpack(y)], n), n)
    # Under cancellation the VecSum's top need not dominate (the expansion is right, its
    # leading components are not): the caller truncates, so such elements (and zeros)
    # take the accurate kernel's general path (arith.sub's fixed branch, whose check adds
    # the cancellation bound to this one, rejects them too). A generated kernel computes
    # it inline: every residual cancels by design, flagging would send many elements back.
    return unpack(fixed.patch(out, fixed.normalised(out), _sub_general, x, y, inline=True))


def _sub_general(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x - y`` by arith's general kernel (merge by magnitude, renormalise)."""
    return arith._add_general(x, y, True)


def _log_reduce(
    s: list[torch.Tensor],
    plus_one: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_log_impl` up to its Newton core: ``(t, e, regular, w0)`` with ``log(w) +
    shift ln2 = e ln2 + log1p(t)`` where ``regular`` (``w_0`` positive and finite). The
    kernel generator traces this function (the first fused call of log and its family)."""
    s0 = s[0]
    one = torch.ones_like(s0)
    if plus_one is None:
        w = s
        small = torch.zeros_like(s0, dtype=torch.bool)
    else:
        with fixed.checks_only_where(plus_one):
            w = _lwhere(plus_one, _add_f(s, one), s)
        small = plus_one & (s0 >= _LOG1P_CORE_LO) & (s0 <= _LOG1P_CORE_HI)
    w0 = w[0]
    regular = (w0 > 0) & torch.isfinite(w0)
    mant, ex = torch.frexp(torch.where(regular, w0, one))
    e = ex.to(w0.dtype) - (mant < _SQRT_HALF).to(w0.dtype)
    e = torch.where(small, torch.zeros_like(e), e)
    m = _lscale(_lwhere(regular, w, [one]), -e)
    with fixed.checks_only_where(~small):
        t = _lwhere(small, s, _add_f(m, -1.0))  # m - 1 is exact: m in [1/sqrt(2), sqrt(2))
    if shift is not None:
        e = e + shift
    return t, e, regular, w0


def _log_sum(e: torch.Tensor, y: list[torch.Tensor]) -> list[torch.Tensor]:
    """``e ln2 + y`` (``y = log1p(t)``): never cancels (the terms have the same sign or
    the first is at least twice the second)."""
    return _add_nc(_mul_f_zero(_lconst(_constants(y[0].dtype, len(y), y[0].device).ln2), e), y)


def _log_impl(
    s: list[torch.Tensor],
    plus_one: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """``log(w) + shift ln2`` with ``w = 1 + s`` where ``plus_one`` and ``w = s`` elsewhere.

    ``w = 2^e m``, ``m`` in ``[1/√2, √2)``, ``t = m - 1`` (exact); elements with
    ``plus_one`` and ``s`` in ``[-0.29, 0.41]`` use ``t = s`` and ``e = 0`` so that
    ``log1p`` stays relatively accurate at 0 (:func:`_log_reduce`); then ``e ln2 +
    log1p(t)`` (:func:`_log1p_core`, :func:`_log_sum`). Non-positive, infinite and NaN
    ``w`` give the plain ``log`` of its leading component.
    """
    t, e, regular, w0 = _log_reduce(s, plus_one, shift)
    return _lwhere(regular, _log_sum(e, _log1p_core(t)), [torch.log(w0)])


# --------------------------------------------------------------------- generic kernels
#
# Each takes component lists (and masks) prepared by :func:`_dispatch` and returns a
# component list; non-finite inputs are replaced by 0 here and their results by the
# plain function's value in :func:`_dispatch`.


def _sanitize(x: list[torch.Tensor]) -> list[torch.Tensor]:
    finite = torch.isfinite(x[0])
    return [torch.where(finite, c, 0.0) for c in x]


def _abs_sign(x: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``(|x|, sign bit)`` with non-finite elements replaced by 0."""
    neg = torch.signbit(x[0])
    return [torch.where(neg, -c, c) for c in _sanitize(x)], neg


def _apply_sign(y: list[torch.Tensor], neg: torch.Tensor) -> list[torch.Tensor]:
    return [torch.where(neg, -c, c) for c in y]


def _keep_tiny(x: list[torch.Tensor], y: list[torch.Tensor], threshold: float) -> list[torch.Tensor]:
    """``f(x) = x`` where ``|x| < threshold`` (keeps subnormal inputs exact)."""
    return _lwhere(x[0].abs() < threshold, x, y)


def _precision(x: list[torch.Tensor]) -> tuple[int, int]:
    return float_format(x[0].dtype).p, len(x)


def _collapse_subnormal(x: list[torch.Tensor]) -> list[torch.Tensor]:
    """Sum the components into the leading one where it is subnormal (zero tail).

    Scaling an expansion into the subnormal range rounds each component separately;
    all of them are then multiples of the smallest subnormal, so their sum is exact
    and one float holds it, restoring the non-overlapping invariant.
    """
    total = x[-1]
    for c in reversed(x[:-1]):
        total = c + total
    sub_mask = x[0].abs() < torch.finfo(x[0].dtype).tiny
    return _lwhere(sub_mask, [total], x)


def _exp_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    k, e = _exp_parts(_sanitize(x))
    return _collapse_subnormal(_lscale(_add_f(e, 1.0), k))


def _expm1_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    k, e = _exp_parts(_sanitize(x))
    return _keep_tiny(x, _expm1_from_parts(k, e), _tiny_threshold(*_precision(x)))


def _log1p_masked_generic(s: list[torch.Tensor], plus_one: torch.Tensor) -> list[torch.Tensor]:
    """``log1p(s)`` where ``plus_one``, ``log(s)`` elsewhere (see :func:`_prepare_log`)."""
    y = _log_impl(s, plus_one=plus_one)
    return _lwhere(_log1p_tiny(s, plus_one), s, y)


def _log1p_tiny(s: list[torch.Tensor], plus_one: torch.Tensor) -> torch.Tensor:
    """Where ``log1p(s) = s`` to the precision (``plus_one`` and ``|s| < 2^-(nc p + 4)``)."""
    return plus_one & (s[0].abs() < _tiny_threshold(*_precision(s)))


def _sinh_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    a, neg = _abs_sign(x)
    k, e = _exp_parts(a)
    m = _add_f(e, 1.0)
    rcp = _div([torch.ones_like(k)], m)
    # k = 0: M - R = E (1 + R) without cancellation; k >= 1: M - 2^-2k R, ratio <= 2.
    k0 = k == 0
    with fixed.checks_only_where(k0):
        small = _mul(e, _add_f(rcp, 1.0))
    with fixed.checks_only_where(~k0):
        large = _add(m, _lneg(_lscale(_lscale(rcp, -k), -k)))
    y = _apply_sign(_lscale(_lwhere(k0, small, large), k - 1), neg)
    return _keep_tiny(x, y, _tiny_odd_threshold(*_precision(x)))


def _cosh_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    a, _ = _abs_sign(x)
    k, e = _exp_parts(a)
    m = _add_f(e, 1.0)
    v = _add_nc(m, _lscale(_lscale(_div([torch.ones_like(k)], m), -k), -k))
    return _lscale(v, k - 1)


def _sinh_cosh_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    """``sinh x`` then ``cosh x`` (``2 nc`` components): what the fused kernel computes,
    the exp reduction once for both (a traced step repeated is one statement)."""
    return _sinh_generic(x) + _cosh_generic(x)


def _tanh_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    a, neg = _abs_sign(x)
    p, nc = _precision(x)
    # beyond this 1 - tanh|x| < 2 e^-2|x| < 2^-(nc p + guard + 1)
    saturated = a[0] > (nc * p + _GUARD_BITS + 2) * math.log(2.0) / 2
    with fixed.checks_only_where(~saturated):  # the result is 1 where saturated
        k, e = _exp_parts([c * 2.0 for c in a])
        q = _expm1_from_parts(k, e)
        d = _div(q, _add_f(q, 2.0))
    y = _lwhere(saturated, [torch.ones_like(k)], d)
    return _keep_tiny(x, _apply_sign(y, neg), _tiny_odd_threshold(p, nc))


def _big_threshold(p: int, nc: int) -> float:
    """Above it ``asinh x`` and ``acosh x`` equal ``log 2x`` within ``2^-(nc p + guard)``."""
    return 2.0 ** ((nc * p + _GUARD_BITS) // 2 + 1)


def _asinh_arg(a: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """``(s, plus_one, shift)`` of :func:`_log_impl` for ``asinh a``, ``a = |x|`` finite:
    ``log1p(a + a^2 / (1 + sqrt(1 + a^2)))`` (all terms positive, no cancellation), or
    beyond :func:`_big_threshold` ``log(a) + ln2`` (no overflow of ``a^2``)."""
    p, nc = _precision(a)
    big = a[0] > _big_threshold(p, nc)
    a_mod = _lwhere(big, [torch.zeros_like(a[0])], a)
    with fixed.checks_only_where(~big):
        a2 = _mul(a_mod, a_mod)
        # sqrt(1 + a^2) - 1 = a^2 / (1 + sqrt(1 + a^2))
        w = _add_nc(a_mod, _div(a2, _add_f(_sqrt(_add_f(a2, 1.0)), 1.0)))
    return _lwhere(big, a, w), ~big, big.to(a[0].dtype)


def _asinh_generic(x: list[torch.Tensor]) -> list[torch.Tensor]:
    a, neg = _abs_sign(x)
    y = _log_impl(*_asinh_arg(a))
    return _keep_tiny(x, _apply_sign(y, neg), _tiny_odd_threshold(*_precision(x)))


def _acosh_arg(t: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """``(s, plus_one, shift)`` of :func:`_log_impl` for ``acosh(1 + t)``, ``t >= 0``
    finite: ``log1p(t + sqrt(t (t + 2)))``, or beyond :func:`_big_threshold` ``log(1 +
    t) + ln2``."""
    p, nc = _precision(t)
    big = t[0] > _big_threshold(p, nc)
    t_mod = _lwhere(big, [torch.zeros_like(t[0])], t)
    with fixed.checks_only_where(~big):
        w = _add_nc(t_mod, _sqrt(_mul(t_mod, _add_f(t_mod, 2.0))))
    return _lwhere(big, t, w), torch.ones_like(big), big.to(t[0].dtype)


def _acosh_generic(t: list[torch.Tensor]) -> list[torch.Tensor]:
    """``acosh(1 + t)`` for the exact ``t = x - 1`` (see :func:`_prepare_acosh`)."""
    t = _sanitize(t)
    y = _log_impl(*_acosh_arg(t))
    return _lwhere(t[0] < 0, [torch.full_like(t[0], math.nan)], y)  # x < 1, also 1 - tiny


def _atanh_arg(a: list[torch.Tensor], den: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``(s, plus_one)`` of :func:`_log_impl` for ``2 atanh a``: ``log1p(2 a / (1 - a))``
    from ``a = |x|`` and the exact ``den = 1 - a`` (finite; the pole ``den = 0`` divides
    by 1 instead)."""
    pole = den[0] == 0
    w = _div([c * 2.0 for c in a], _lwhere(pole, [torch.ones_like(a[0])], den))
    return w, torch.ones_like(pole)


def _atanh_generic(a: list[torch.Tensor], den: list[torch.Tensor], neg: torch.Tensor) -> list[torch.Tensor]:
    """``atanh`` from ``a = |x|`` and the exact ``den = 1 - |x|`` (see :func:`_prepare_atanh`)."""
    a, den = _sanitize(a), _sanitize(den)
    return _atanh_finish(_log_impl(*_atanh_arg(a, den)), a, den, neg)


def _atanh_finish(y: list[torch.Tensor], a: list[torch.Tensor], den: list[torch.Tensor], neg: torch.Tensor) -> list[torch.Tensor]:
    """:func:`_atanh_generic` after its logarithm ``y = log1p(2a / (1 - a))``: the factor
    1/2, the pole, the sign and the tiny arguments (a kernel of the logarithm ends here too)."""
    p, nc = _precision(a)
    y = _lwhere(den[0] == 0, [torch.full_like(a[0], math.inf)], [c * 0.5 for c in y])  # atanh(±1) = ±inf
    y = _apply_sign(y, neg)
    return _keep_tiny(_apply_sign(a, neg), y, _tiny_odd_threshold(p, nc))


#: The :mod:`registry` kernels of generic functions whose operands a narrower dtype
#: prepares in its own dtype (the cancelling differences) and converts to float64
#: double-words: the kernel computes the generic function on them (same bits).
_PREPARED_KERNELS: dict[Callable, str] = {_log1p_masked_generic: "log_masked", _acosh_generic: "acosh_t", _atanh_generic: "atanh_ad"}


# ------------------------------------------------------------------- prepare (own dtype)


# ------------------------------------------------------------------ sin/cos machinery

# Table of sin(j/128), cos(j/128) for |j| <= _TRIG_HALF: covers |r| <= pi/4 (1 + 2^-30).
_TRIG_STEPS = 128
_TRIG_HALF = 101
# Extra bits of pi/2 beyond what a result needs: arguments as close as 2^-(W p + _TRIG_CANCEL)
# to a nonzero multiple of pi/2 still get a relatively accurate reduced argument.
_TRIG_CANCEL = 64
# Pieces of pi/2 with exponents below this are stored scaled up (see _TrigConstants.pieces).
_TRIG_PIECE_FLOOR = -900


class _TrigConstants(NamedTuple):
    """Constants of :func:`sin`/:func:`cos` for one ``(dtype, nc, device)`` (float64 or
    the generic path's own dtype; ``nc`` = the component lists' length)."""

    two_over_pi: float
    pio2: torch.Tensor  # (nc + 2,): pi/2 for the fast reduction
    # pi/2 = sum(c * 2^-s for c, s in pieces): non-overlapping, each c the nearest float
    # of the remainder scaled so that c >= 2^_TRIG_PIECE_FLOOR (pieces below the normal
    # range are kept as c * 2^-s with s > 0, multiplied by n * 2^-s, exact for n >= 1)
    pieces: tuple[tuple[float, int], ...]
    sin_table: torch.Tensor  # (nc, 2 _TRIG_HALF + 1), planar: sin(j/128)
    cos_table: torch.Tensor  # cos(j/128)
    sin_coeffs: tuple[torch.Tensor, ...]  # (-1)^k / (2k+1)!, (nc,) each
    cos_coeffs: tuple[torch.Tensor, ...]  # (-1)^(k+1) / (2k+2)!: cos t - 1 = u sum_k c_k u^k
    sin_leads: tuple[float, ...]  # leading components of the coefficients
    cos_leads: tuple[float, ...]
    sin_plan: tuple[int, ...]  # components of u = t^2 used at Horner step k
    cos_plan: tuple[int, ...]


def _trig_plan(p: int, nc: int, odd: bool) -> tuple[int, ...]:
    """Horner plan of ``sum_k c_k u^k`` with ``u = t^2``, ``|t| <= 1/256``, ``|c_k| =
    1/(2k+1)!`` (``odd``) or ``1/(2k+2)!``: term ``k`` weighs at most ``2^-w(k)`` of the
    sum's first term, ``w(k) = 16 k + log2((2k+1+o)! / (1+o)!)``; the series stops before the first term
    below ``2^-(nc p + guard)``, step ``k`` carries ``ceil((nc p + 2 guard - w(k)) / p)``
    components (as :func:`_series_plan`)."""
    target = nc * p + _GUARD_BITS
    o = 0 if odd else 1

    def weight_bits(k: int) -> float:
        return 16 * k + (math.lgamma(2 * k + 2 + o) - math.lgamma(2 + o)) / math.log(2.0)

    n = 0
    while weight_bits(n + 1) < target:
        n += 1
    return tuple(min(nc, max(1, math.ceil((target + _GUARD_BITS - weight_bits(k)) / p))) for k in range(n + 1))


@functools.cache
def _trig_constants(dtype: torch.dtype, nc: int, device: torch.device) -> _TrigConstants:
    """Build the constants of ``(dtype, nc, device)`` with mpmath (once, cached; every
    dispatch mode suspended, as :func:`_constants`)."""
    with _disable_current_modes(), torch._C._DisableTorchDispatch():
        fmt = float_format(dtype)
        p = fmt.p
        emin, emax = _exponent_range(dtype)
        # bits of pi/2 the largest argument needs: its exponent, the result's nc p bits twice
        # (a cancellation of up to nc p + _TRIG_CANCEL bits) and the guard bits
        bits = emax + 2 * (nc * p + _GUARD_BITS) + _TRIG_CANCEL + 2 * p
        sin_plan, cos_plan = _trig_plan(p, nc, True), _trig_plan(p, nc, False)

        def mc(values) -> torch.Tensor:
            return _planar_constants(values, p, nc, dtype, device)

        with mpmath.workprec(bits + 64):
            rest = mpmath.pi / 2
            pieces = []
            while mpmath.mag(rest) > -bits:
                e = int(mpmath.mag(rest))
                s = max(0, _TRIG_PIECE_FLOOR - e + p)
                with mpmath.workprec(p):
                    c = +mpmath.ldexp(rest, s)
                pieces.append((float(c), s))
                rest = rest - mpmath.ldexp(c, -s)
            js = range(-_TRIG_HALF, _TRIG_HALF + 1)
            sin_c = [_split_mpf((-1) ** k / mpmath.factorial(2 * k + 1), p, nc) for k in range(len(sin_plan))]
            cos_c = [_split_mpf((-1) ** (k + 1) / mpmath.factorial(2 * k + 2), p, nc) for k in range(len(cos_plan))]
            return _TrigConstants(
                two_over_pi=float(2 / mpmath.pi),
                pio2=torch.tensor(_split_mpf(mpmath.pi / 2, p, nc + 2), dtype=dtype, device=device),
                pieces=tuple(pieces),
                sin_table=mc([mpmath.sin(mpmath.mpf(j) / _TRIG_STEPS) for j in js]),
                cos_table=mc([mpmath.cos(mpmath.mpf(j) / _TRIG_STEPS) for j in js]),
                sin_coeffs=tuple(torch.tensor(c, dtype=dtype, device=device) for c in sin_c),
                cos_coeffs=tuple(torch.tensor(c, dtype=dtype, device=device) for c in cos_c),
                sin_leads=tuple(c[0] for c in sin_c),
                cos_leads=tuple(c[0] for c in cos_c),
                sin_plan=sin_plan,
                cos_plan=cos_plan,
            )


def _at_width(x: list[torch.Tensor], nc: int) -> list[torch.Tensor]:
    """A normalised component list at ``nc`` components: padded with zeros, or rounded."""
    if len(x) <= nc:
        return _lpad(x, nc)
    if getattr(x[0], "symbolic", False):
        # a kernel generator: renormalize's arithmetic-select path, the element flagged
        # where it does not hold (a sum that is not finite; renormalize takes another path)
        comps, total = renormalize_finite(x, nc)
        return unpack(fixed.patch(pack(comps), torch.isfinite(total) & torch.isfinite(comps[0]), renormalize))
    return unpack(renormalize(x, nc, presorted=True))


def _trig_reduce(x: list[torch.Tensor], nc: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(q, r)`` with ``x = (4 m + q) pi/2 + r``, ``q`` in ``{0, 1, 2, 3}`` (float),
    ``|r| <= pi/4 (1 + 2^-30)`` at ``nc`` components, for finite ``x`` (callers sanitise;
    ``x`` may have more components: a narrower dtype's exact expansion).

    Fast path, every element: ``n = round(x_0 2/pi)``, ``P = pi/2`` at ``w + 1``
    components, ``(h, l) = TwoProduct(n, P_0)`` and ``r = (((x_0 - h) + (x_1 + ...)) - l) -
    n (P_1 + ... + P_w)``. ``x_0 - h`` is exact: Sterbenz for ``|n| >= 2``; for ``n = ±1``
    (``h/x_0`` up to 2 and a rounding) the difference is a multiple of ``ulp(x_0)`` below 1.
    The other three are MC operations at ``w`` components (the fixed networks) whose
    operands are ``|r|`` or ``~u |x|``, so their errors are a few ``u^w (|r| + u |x|)``.
    ``w = nc``, or ``nc + 1`` where ``x`` has more components than ``nc + 1`` (a narrower
    dtype's exact expansion, e.g. float32 ``nc = 4`` on 2 float64 components): its tail
    ``x_1 + ...`` is then held at ``nc + 1`` components, a truncation of ``u^(nc+1) |x_1|``
    instead of ``u^nc |x_1|``, which the test below does not cover. The result is kept
    where its error is below ``u^nc 2^-guard |r|`` up to a few units: ``|r_0| >= 2^(8-p)
    |x_0|`` (fewer than ``p - 8`` bits cancel, and ``|x_0| < 2^(p-8)``) and ``|r_0| <=
    pi/4 (1 + 2^-30)``. The other elements (cancellation near a
    multiple of ``pi/2``, huge arguments, a tail that pushes ``r`` past ``pi/4``) are
    recomputed by :func:`_trig_reduce_exact`.
    """
    cst = _trig_constants(x[0].dtype, nc, x[0].device)
    n = torch.round(x[0] * cst.two_over_pi)
    if not bool((n != 0).any()):
        return torch.zeros_like(n), _at_width(x, nc)
    q, r, good = _trig_reduce_fast(x, nc, n)
    q = q.contiguous()  # written below through view(-1)
    r = [c.clone(memory_format=torch.contiguous_format) for c in r]
    bad = torch.nonzero(~good.reshape(-1)).squeeze(1)
    if bad.numel():  # rows of the flattened lists (views of the fresh q and r)
        qb, rb = _trig_reduce_exact([c.reshape(-1)[bad] for c in x], nc)
        q.view(-1)[bad] = qb
        for c, cb in zip(r, rb):
            c.view(-1)[bad] = cb
    return q, r


def _trig_reduce_fast(
    x: list[torch.Tensor], nc: int, n: torch.Tensor | None = None
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """:func:`_trig_reduce`'s fast path on every element, ``n = round(x_0 2/pi)`` (given or
    computed): ``(q, r, good)``, ``good`` false where the exact reduction must replace
    ``(q, r)``. Where ``n = 0``, ``r`` is ``x`` itself at ``nc`` components (and the checks
    of the fixed networks, which reject its zero products, do not matter). The kernel
    generator traces this function."""
    cst = _trig_constants(x[0].dtype, nc, x[0].device)
    p = float_format(x[0].dtype).p
    x0 = x[0]
    if n is None:
        n = torch.round(x0 * cst.two_over_pi)
    w = nc if len(x) <= nc + 1 else nc + 1
    pio2 = _lconst(cst.pio2)[: w + 1]
    n_zero = n == 0
    with fixed.checks_only_where(~n_zero):
        h, lo = two_prod(n, pio2[0].expand_as(n))
        t = _add_f(_at_width(x[1:], w), x0 - h)  # x0 - h exact
        t = _add_f(t, -lo)
        r = _at_width(_add(t, _lneg(_mul_f(pio2[1:], n))), nc)
    r = _lwhere(n_zero, _at_width(x, nc), r)
    a0, r0 = x0.abs(), r[0].abs()
    # (the first condition also bounds |x_0| by 2^(p-8): larger arguments take the exact path)
    good = (r0 >= a0 * 2.0 ** (8 - p)) & (r0 <= math.pi / 4 * (1 + 2.0**-30))
    q = n - 4.0 * torch.round(n * 0.25)  # n mod 4 in [-2, 2], exact
    return torch.where(q < 0, q + 4.0, q), r, good


def _trig_reduce_exact(x: list[torch.Tensor], nc: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """:func:`_trig_reduce` for any finite argument.

    Each round takes ``n = round(r_0 2/pi)`` (an integer float) and subtracts ``n pi/2``
    exactly: the products of ``n`` with the pieces of ``pi/2`` are TwoProducts, and the
    sum of ``r``'s components and all product terms is renormalised at once (error
    ``u^w`` of the *result*, whatever cancels). Pieces are used down to ``2^-(2 nc p +
    _TRIG_CANCEL + guard)`` of the result's scale, so the dropped part of ``n pi/2`` is
    below ``u^nc 2^-guard |r|`` wherever ``|r| >= 2^-(nc p + _TRIG_CANCEL)``. A float64
    argument below ``2^(p-3)`` takes one round (or two where its tail, at most half an
    ulp of ``x_0``, pushes the reduced value past ``pi/4``, which cancels nothing); ``r``
    is carried at ``nc + 1`` components, relative to itself. A larger argument takes one
    round per ``p - 2`` bits of its exponent, and a round's ``n`` can be off by one,
    leaving ``r ~ pi/2`` for the next round to cancel; a narrower dtype's expansion
    (more components than ``nc``) has a tail up to ``2^-p'`` of ``x_0`` (``p'`` its own
    precision), which the first round (``n`` from ``x_0`` alone) leaves in ``r`` for the
    next to cancel. In both cases ``r`` is carried to the same absolute ``2^floor`` as the
    pieces, ``ceil((e - floor) / p) + 2`` components (``2^e`` the largest ``|x|``).
    """
    cst = _trig_constants(x[0].dtype, nc, x[0].device)
    p = float_format(x[0].dtype).p
    big = float(x[0].abs().max()) if x[0].numel() else 0.0
    e = math.frexp(big)[1]
    floor = -(2 * (nc * p + _GUARD_BITS) + _TRIG_CANCEL)
    relative = e <= p - 3 and len(x) <= nc
    width = max(nc + 1 if relative else math.ceil((max(e, 1) - floor) / p) + 2, len(x))
    q = torch.zeros_like(x[0])
    r = x
    while True:
        # a finite x_0 with a non-finite tail (not an expansion) makes r NaN: n = 0 there,
        # so the loop ends and the NaN propagates (the loop would not end otherwise)
        n = torch.nan_to_num(torch.round(r[0] * cst.two_over_pi), nan=0.0, posinf=0.0, neginf=0.0)
        n_max = float(n.abs().max()) if n.numel() else 0.0
        if n_max == 0:
            break
        e_n = math.frexp(n_max)[1]
        terms = list(r)
        for c, s in cst.pieces:
            if e_n + math.frexp(c)[1] - s < floor - 1:
                break
            h, lo = two_prod(n * 2.0**-s if s else n, torch.full_like(n, c))
            terms += [-h, -lo]
        r = unpack(renormalize(terms, width))
        q4 = torch.fmod(n, 4.0)  # exact
        q = torch.fmod(q + torch.where(q4 < 0, q4 + 4.0, q4), 4.0)
    return q, _at_width(r, nc)


def _trig_horner(
    u: list[torch.Tensor], coeffs: tuple[torch.Tensor, ...], lead: tuple[float, ...], plan: tuple[int, ...]
) -> list[torch.Tensor]:
    """``sum_k coeffs[k] u^k`` by Horner's rule, step ``k`` at ``plan[k]`` components
    (``lead``: the coefficients' leading components; the terms alternate and shrink by
    ``2^-16`` or more per step: nothing cancels). The kernel generator traces this function."""
    n = len(plan) - 1
    q = torch.full_like(u[0], lead[n])
    q_list: list[torch.Tensor] | None = None
    for k in range(n - 1, -1, -1):
        level = plan[k]
        if q_list is None and level == 1:
            q = u[0] * q + lead[k]
            continue
        ul = u[:level]
        prod = _mul_f(ul, q) if q_list is None else _mul(ul, q_list)
        q_list = _add_nc(prod, _lconst(coeffs[k])[:level])
    return [q] if q_list is None else q_list


def _sin_cos_reduced(r: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(sin r, cos r)`` for ``|r| <= pi/4 (1 + 2^-30)``: ``r = j/128 + t`` (``|t| <=
    1/256``, ``t`` by one accurate addition), ``sin t`` and ``cos t - 1`` by their Taylor
    series in ``u = t^2``, and ``sin r = S_j + (S_j (cos t - 1) + C_j sin t)``, ``cos r =
    C_j + (C_j (cos t - 1) - S_j sin t)`` with the tables ``S_j = sin(j/128)``, ``C_j =
    cos(j/128)``. For ``j != 0`` the bracket is at most about half of ``|S_j|`` (sin) and
    ``2^-7`` of ``C_j`` (cos), so nothing cancels; for ``j = 0`` the results are the
    series themselves."""
    cst = _trig_constants(r[0].dtype, len(r), r[0].device)
    j = torch.round(r[0] * _TRIG_STEPS)
    t = _add_f(r, -j / _TRIG_STEPS)
    u = _mul(t, t)
    sin_t = _mul(t, _trig_horner(u, cst.sin_coeffs, cst.sin_leads, cst.sin_plan))
    cm1 = _mul(u, _trig_horner(u, cst.cos_coeffs, cst.cos_leads, cst.cos_plan))
    idx = (j + _TRIG_HALF).to(torch.long).clamp(0, 2 * _TRIG_HALF)
    s_j = [row[idx] for row in cst.sin_table]
    c_j = [row[idx] for row in cst.cos_table]
    j_nonzero = j != 0  # S_0 = sin(0) = 0: zero products
    sin_r = _add(s_j, _add(_mul_zero(s_j, cm1, j_nonzero), _mul(c_j, sin_t)))
    cos_r = _add(c_j, _add(_mul(c_j, cm1), _lneg(_mul_zero(s_j, sin_t, j_nonzero))))
    return sin_r, cos_r


def _trig_width(dtype: torch.dtype, nc: int) -> int:
    """Components of the float64 expansion that sin/cos/tan of ``nc`` components of
    ``dtype`` compute with (``nc`` itself for float64, as :func:`_to_float64` otherwise)."""
    if dtype == torch.float64:
        return nc
    return math.ceil((nc * float_format(dtype).p + _GUARD_BITS) / float_format(torch.float64).p)


def _sin_cos_generic(x: list[torch.Tensor], width: int | None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(sin x, cos x)`` of the finite ``x`` (non-finite elements computed as 0) at
    ``width`` components (default ``len(x)``): the quadrant ``q`` applied to ``(sin r,
    cos r)``."""
    q, r = _trig_reduce(_sanitize(x), width or len(x))
    return _quadrant(q, *_sin_cos_reduced(r))


def _quadrant(q: torch.Tensor, s: list[torch.Tensor], c: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(sin x, cos x)`` from ``(sin r, cos r)`` of ``x = (4 m + q) pi/2 + r``."""
    # sin: q = 0: sin r, 1: cos r, 2: -sin r, 3: -cos r; cos x = sin(x + pi/2): q + 1
    # (tiny x: r = x, u = x^2 underflows or is negligible, and the series give x itself)
    odd_q = (q == 1) | (q == 3)
    sin_x = _apply_sign(_lwhere(odd_q, c, s), q >= 2)
    cos_x = _apply_sign(_lwhere(odd_q, s, c), (q == 1) | (q == 2))
    return sin_x, cos_x


def _sin_cos_fast(x: list[torch.Tensor], width: int) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """:func:`_sin_cos_generic` on the fast reduction alone: ``(sin x, cos x, good)``,
    ``good`` false where the exact reduction is needed (:func:`_trig_reduce_fast`). What
    the fused kernel computes; the kernel generator traces this function."""
    q, r, good = _trig_reduce_fast(_sanitize(x), width)
    return (*_quadrant(q, *_sin_cos_reduced(r)), good)


def _tan_fast(x: list[torch.Tensor], width: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """:func:`_tan_generic` on the fast reduction alone: ``(tan x, good)``."""
    s, c, good = _sin_cos_fast(x, width)
    return _div(s, c), good


def _sin_generic(x: list[torch.Tensor], width: int | None = None) -> list[torch.Tensor]:
    return _sin_cos_generic(x, width)[0]


def _cos_generic(x: list[torch.Tensor], width: int | None = None) -> list[torch.Tensor]:
    return _sin_cos_generic(x, width)[1]


def _tan_generic(x: list[torch.Tensor], width: int | None = None) -> list[torch.Tensor]:
    return _div(*_sin_cos_generic(x, width))


def _prepare_log(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s, plus_one)``: ``s = x - 1`` (exact) for ``x`` in ``[1/2, 2]``, ``s = x`` elsewhere."""
    x0 = x[..., 0]
    near = (x0 >= 0.5) & (x0 <= 2.0)
    with fixed.checks_only_where(near):
        t = add_float(x, -torch.ones_like(x0))
    return torch.where(near.unsqueeze(-1), t, x), near


def _prepare_log1p(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s, plus_one)``: ``s = 1 + x`` (exact) for ``x <= -1/2``, ``s = x`` elsewhere."""
    x0 = x[..., 0]
    low = x0 <= -0.5
    with fixed.checks_only_where(low):
        w = add_float(x, torch.ones_like(x0))
    return torch.where(low.unsqueeze(-1), w, x), ~low


def _prepare_acosh(x: torch.Tensor) -> tuple[torch.Tensor]:
    """``t = x - 1``, exact for ``x`` in ``[1/2, 2]``."""
    return (add_float(x, -torch.ones_like(x[..., 0])),)


def _prepare_atanh(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(|x|, 1 - |x|, sign bit)``; ``1 - |x|`` is exact for ``|x| >= 1/2``."""
    neg = torch.signbit(x[..., 0])
    a = torch.where(neg.unsqueeze(-1), -x, x)
    return a, add_float(-a, torch.ones_like(a[..., 0])), neg


# ---------------------------------------------------------------------- engine kernels
#
# The engine dtype holds the whole value plus guard bits, so one call of the torch
# function of that dtype (about one engine ulp) is far below u^nc. Odd functions copy
# the sign of the leading component so that ±0 maps to ±0.


def _engine_unary(name: str, odd: bool = False):
    def impl(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
        z = getattr(_engine_in(x, engine), name + "_")()
        if odd:
            z.copysign_(x[..., 0])
        return _engine_out(z, x.dtype, x.shape[-1])

    return impl


def _engine_trig(name: str, generic: Callable[..., list[torch.Tensor]]):
    """The engine's ``sin``/``cos``/``tan`` (torch's reduce any argument exactly) where the
    engine holds ``x`` exactly; ``±0`` keeps its sign for the odd ``sin`` and ``tan`` (the
    engine sum of ``(-0, 0)`` is +0). An expansion with a gap wider than the engine's
    precision (float32 ``(2^28, 2^-30)``) is not one engine number, and its reduction
    needs every bit: those elements take the generic path on the exact float64 expansion."""

    def impl(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
        comps = unpack(x)
        z = comps[0].to(engine)
        exact = torch.ones_like(comps[0], dtype=torch.bool)
        for c in comps[1:]:
            z, e = two_sum(z, c.to(engine))
            exact &= e == 0  # NaN for non-finite sums: those go to the generic path too
        z = getattr(torch, name)(z)
        if name != "cos":
            z = torch.where(comps[0] == 0, comps[0].to(engine), z)
        nc = x.shape[-1]

        def rows(a: torch.Tensor) -> torch.Tensor:
            width = _trig_width(a.dtype, nc)
            return _generic_path(a, getattr(torch, name), functools.partial(generic, width=width), None, name != "cos", None, True)

        return fixed.patch(_engine_out(z, x.dtype, nc), exact, rows, x)

    return impl


def _engine_minus_one(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    """``x - 1`` in the engine dtype: ``c0 - 1`` is exact there, then the tail (one rounding)."""
    comps = unpack(x)
    z = comps[-1].to(engine)
    for c in reversed(comps[1:-1]):
        z.add_(c)
    return z.add_(comps[0].to(engine) - 1.0)


def _log_engine(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    # log(hi) + lo/hi: x = 1 + 2^-40 + 2^-75 keeps its 2^-75 (float64 alone would not)
    hi, lo = _engine_pair(x, engine)
    return _engine_out(_engine_log_pair(hi, lo), x.dtype, x.shape[-1])


def _log1p_engine(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    # log of the pair 1 + x, renormalised so that x = -1 + tiny keeps the tiny part
    hi, lo = _engine_pair(x, engine)
    whi, e = two_sum(torch.ones_like(hi), hi)
    whi, wlo = two_sum(whi, e + lo)
    res = _engine_log_pair(whi, wlo).copysign_(x[..., 0])
    return _special(_engine_out(res, x.dtype, x.shape[-1]), x[..., 0], torch.log1p)


def _acosh_engine(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    t = _engine_minus_one(x, engine)  # relative to x - 1, so exact enough near 1
    w = torch.sqrt(t).mul_(torch.sqrt(t + 2)).add_(t)  # t + sqrt(t (t + 2)), no overflow
    return _engine_out(w.log1p_(), x.dtype, x.shape[-1])


def _atanh_engine(x: torch.Tensor, engine: torch.dtype) -> torch.Tensor:
    comps = unpack(x)
    neg = torch.signbit(comps[0])
    a = _engine_in(x, engine).abs_()
    den = 1.0 - comps[0].abs().to(engine)  # exact in the engine dtype
    for c in comps[1:]:
        den.sub_(torch.where(neg, -c, c))  # 1 - |x|: one rounding, relative to 1 - |x|
    y = (2 * a).div_(den).log1p_().mul_(0.5)
    return _engine_out(torch.where(neg, -y, y), x.dtype, x.shape[-1])


# --------------------------------------------------------------------------- public API


_ARGS_DOC = """
    Args:
        x: component tensor ``(*shape, nc)`` of float16, bfloat16, float32 or float64,
            normalised (leading component first); any values, inf and NaN included.

    Returns:
        component tensor ``(*shape, nc)`` of the same dtype, normalised.

    Shape:
        elementwise; leading dimensions are kept, ``nc`` is unchanged.
"""


def exp(x: torch.Tensor) -> torch.Tensor:
    """Exponential of a component tensor.

    Algorithm: ``nc == 1`` :func:`.portable.exp`; wide engine ``exp``; generic: Tang's
    table-driven reduction ``x = k ln2 + j ln2/256 + r`` (Cody–Waite ``ln2/256``, exact
    products with ``n = 256 k + j``), Taylor series of ``expm1(r)``, ``|r| <= ln2/512``,
    in mixed-component Horner form, ``exp(x) = 2^k (1 + D_j + T_j expm1(r))`` with
    ``T_j = 2^(j/256)``, ``D_j = T_j - 1`` and ``2^k`` applied exactly in two steps.

    Precondition: none (inf and NaN allowed).

    Bound: relative error ``<= 64 u^nc`` (measured ``<= 2.1``) while ``exp(x)`` and its
    ``nc`` components are normal, ``exp(x) >= 2^(emin + (nc-1) p)``; below, absolute
    error ``<= nc`` smallest subnormals (gradual underflow, never a spurious 0).
    ``exp(x) = inf`` on overflow, ``exp(-inf) = 0``, NaN propagates.

    Reference: Tang, ACM TOMS 15(2) 1989; Muller, *Elementary Functions*, ch. 11.
    {args}

    Example:
        >>> exp(torch.tensor([[1.0, 0.0]], dtype=torch.float64))  # e to 106 bits
        tensor([[2.7183e+00, 1.4456e-16]], dtype=torch.float64)
        >>> x = torch.tensor([[-745.0, 0.0], [1000.0, 0.0], [-float("inf"), 0.0]], dtype=torch.float64)
        >>> exp(x).tolist()  # gradual underflow to the smallest subnormal (not 0), overflow to inf
        [[5e-324, 0.0], [inf, 0.0], [0.0, 0.0]]
    """
    return _dispatch(x, portable.exp, _engine_unary("exp"), _exp_generic, fused="exp")


def expm1(x: torch.Tensor) -> torch.Tensor:
    """``exp(x) - 1`` without cancellation near 0.

    Algorithm: engine ``expm1``; generic: the reduction of :func:`exp`, then
    ``2^k ((1 - 2^-k) + E)`` with the bracket's constant exact, so nothing cancels beyond
    a factor 1.5 and for ``|x| <= ln2/2`` the result is the table/series value ``E``;
    ``|x| < 2^-(nc p + 4)`` returns ``x``.

    Bound: **relative** error ``<= 64 u^nc`` everywhere including near 0 (measured
    ``<= 2.4``); ``expm1(±0) = ±0``, ``expm1(-inf) = -1``, overflow gives inf.
    {args}

    Example:
        >>> x = torch.tensor([[1e-20, 0.0]], dtype=torch.float64)
        >>> y = expm1(x)
        >>> y  # the tail holds x^2/2
        tensor([[1.0000e-20, 5.0000e-41]], dtype=torch.float64)
        >>> torch.exp(x[..., 0]) - 1  # plain float64 exp(x) - 1 loses everything
        tensor([0.], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.expm1(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, torch.expm1, _engine_unary("expm1", odd=True), _expm1_generic, odd=True, fused="expm1")


def log(x: torch.Tensor) -> torch.Tensor:
    """Natural logarithm of a component tensor.

    Algorithm: engine ``log(hi) + lo / hi`` with ``(hi, lo)`` the exact two-term engine
    value of ``x`` (so ``x = 1 + tiny`` is not rounded to 1); generic: ``t = x - 1``
    formed exactly for ``x`` in ``[1/2, 2]``, otherwise ``x = 2^e m`` with
    ``m`` in ``[1/√2, √2)`` and ``t = m - 1`` exact; ``y = log1p(t)`` by Newton's
    iteration ``y <- y - (expm1(y) - t) / (1 + expm1(y))`` from ``log1p`` of the leading
    component (one step per component count ``2 … nc``); result ``e ln2 + y``.

    Precondition: none. ``log(±0) = -inf``, negative or NaN input gives NaN,
    ``log(inf) = inf``.

    Bound: relative error ``<= 64 u^nc`` (measured ``<= 2.1``), **relative also near
    x = 1** (``log(1 + 2^-80)`` at float64 ``nc = 2`` is ``2^-80 (1 - 2^-81)`` to 106
    bits); subnormal inputs are fine.

    Reference: Bailey–Hida–Li (QD library) Newton-on-exp log; Muller ch. 6.
    {args}

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-80]], dtype=torch.float64)  # 1 + 2^-80
        >>> y = log(x)
        >>> y  # 2^-80 - 2^-161
        tensor([[ 8.2718e-25, -3.4211e-49]], dtype=torch.float64)
        >>> torch.log(x[..., 0])  # the leading component alone is 1
        tensor([0.], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.log(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, portable.log, _log_engine, _log1p_masked_generic, prepare=_prepare_log, fused="log")


def log1p(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + x)`` without cancellation near 0 or near -1.

    Algorithm: engine ``log(whi) + wlo/whi`` for the exact two-term engine value of
    ``1 + x``; generic: :func:`log`'s Newton core on ``t = x`` for ``x`` in
    ``[-0.29, 0.41]``, on ``w = 1 + x`` formed in MC otherwise (exact for ``x <= -1/2``,
    so ``log1p(-1 + 2^-80)`` keeps the ``2^-80``); ``|x| < 2^-(nc p + 4)`` returns ``x``.

    Bound: **relative** error ``<= 64 u^nc`` including near 0 and near -1 (measured
    ``<= 2.2``); ``log1p(±0) = ±0``, ``log1p(-1) = -inf``, ``x < -1`` gives NaN.
    {args}

    Example:
        >>> x = torch.tensor([[1e-30, 0.0], [-1.0, 2.0**-80]], dtype=torch.float64)  # 1e-30, -1 + 2^-80
        >>> y = log1p(x)
        >>> y  # x - x^2/2; log(2^-80) = -80 ln2
        tensor([[ 1.0000e-30, -5.0000e-61],
                [-5.5452e+01, -7.8881e-17]], dtype=torch.float64)
        >>> torch.log1p(x[..., 0])  # the leading components alone: -1 gives -inf
        tensor([1.0000e-30,       -inf], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.log1p(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True, True]
    """
    return _dispatch(x, torch.log1p, _log1p_engine, _log1p_masked_generic, prepare=_prepare_log1p, odd=True, fused="log1p")


def sinh(x: torch.Tensor) -> torch.Tensor:
    """Hyperbolic sine.

    Algorithm: engine ``sinh``; generic: from ``exp(|x|) = 2^k M``, ``M = 1 + E``,
    ``R = 1/M``: ``sinh|x| = E (1 + R) / 2`` for ``k = 0`` (no cancellation near 0) and
    ``2^(k-1) (M - 2^-2k R)`` otherwise (cancellation at most a factor 2, no overflow
    before the true one); odd extension; ``|x| < 2^-(nc p/2 + 3)`` returns ``x``.

    Bound: **relative** error ``<= 64 u^nc`` including near 0 (measured ``<= 3.1``);
    overflow gives ±inf.
    {args}

    Example:
        >>> x = torch.tensor([[1e-10, 0.0], [700.0, 0.0]], dtype=torch.float64)
        >>> y = sinh(x)
        >>> y  # x + x^3/6 near 0
        tensor([[ 1.0000e-10,  1.6667e-31],
                [5.0712e+303, 8.3333e+286]], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.sinh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True, True]
    """
    return _dispatch(x, torch.sinh, _engine_unary("sinh", odd=True), _sinh_generic, odd=True, fused="sinh")


def cosh(x: torch.Tensor) -> torch.Tensor:
    """Hyperbolic cosine: ``2^(k-1) (M + 2^-2k / M)`` with ``exp(|x|) = 2^k M``.

    Bound: relative error ``<= 64 u^nc`` (nothing cancels; measured ``<= 2.2``);
    overflow gives inf (not before the true overflow, ``ln2`` beyond exp's).
    {args}

    Example:
        >>> x = torch.tensor([[1e-8, 0.0]], dtype=torch.float64)
        >>> y = cosh(x)
        >>> y  # 1 + x^2/2; plain float64 rounds it to 1
        tensor([[1.0000e+00, 5.0000e-17]], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.cosh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, torch.cosh, _engine_unary("cosh"), _cosh_generic, fused="cosh")


def tanh(x: torch.Tensor) -> torch.Tensor:
    """Hyperbolic tangent: ``Q / (Q + 2)`` with ``Q = expm1(2|x|)``, odd extension.

    ``|x|`` beyond ``(nc p + 6) ln2 / 2`` gives ±1 exactly (relative error below
    ``u^nc / 16``), so large arguments saturate with no inf/inf NaN;
    ``|x| < 2^-(nc p/2 + 3)`` returns ``x``.

    Bound: **relative** error ``<= 64 u^nc`` including near 0 (measured ``<= 6.1``).
    {args}

    Example:
        >>> x = torch.tensor([[20.0, 0.0]], dtype=torch.float64)
        >>> y = tanh(x)
        >>> y  # 1 - 2 e^-40; plain float64 rounds it to 1
        tensor([[ 1.0000e+00, -8.4967e-18]], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.tanh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, portable.tanh, _engine_unary("tanh", odd=True), _tanh_generic, odd=True, fused="tanh")


def asinh(x: torch.Tensor) -> torch.Tensor:
    """Inverse hyperbolic sine.

    Algorithm: engine ``asinh`` (well conditioned everywhere); generic:
    ``sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))`` (all terms positive, relative near
    0); ``|x| > 2^(nc p/2 + 3)``: ``log|x| + ln2`` (no overflow of ``x^2``).

    Bound: **relative** error ``<= 64 u^nc`` including near 0 (measured ``<= 2.7``).
    {args}

    Example:
        >>> x = torch.tensor([[1e-10, 0.0], [1e200, 0.0]], dtype=torch.float64)  # x^2 overflows at 1e200
        >>> y = asinh(x)
        >>> y  # x - x^3/6 near 0; log(2x) for large x
        tensor([[ 1.0000e-10, -1.6667e-31],
                [ 4.6121e+02, -2.3993e-14]], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.asinh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True, True]
    """
    return _dispatch(x, torch.asinh, _engine_unary("asinh", odd=True), _asinh_generic, odd=True, fused="asinh")


def acosh(x: torch.Tensor) -> torch.Tensor:
    """Inverse hyperbolic cosine.

    Algorithm: ``t = x - 1`` formed exactly (MC in the input dtype; ``c0 - 1`` in the
    engine), ``log1p(t + sqrt(t (t + 2)))`` (in the engine ``sqrt(t) sqrt(t + 2)``, no
    overflow); ``x > 2^(nc p/2 + 3)``: ``log1p(t) + ln2``.

    Precondition: none; ``x < 1`` (including ``1 - tiny`` held in the tail) gives NaN,
    ``acosh(1) = 0``, ``acosh(inf) = inf``.

    Bound: **relative** error ``<= 64 u^nc`` including near ``x = 1``, where
    ``acosh(1 + d) ≈ sqrt(2 d)`` (measured ``<= 2.3``).
    {args}

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-80]], dtype=torch.float64)  # 1 + 2^-80
        >>> y = acosh(x)
        >>> y  # about sqrt(2 * 2^-80)
        tensor([[ 1.2862e-12, -8.7924e-29]], dtype=torch.float64)
        >>> torch.acosh(x[..., 0])  # the leading component alone is 1
        tensor([0.], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.acosh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, torch.acosh, _acosh_engine, _acosh_generic, prepare=_prepare_acosh, fused="acosh")


def atanh(x: torch.Tensor) -> torch.Tensor:
    """Inverse hyperbolic tangent: ``sign(x) log1p(2|x| / (1 - |x|)) / 2``.

    ``1 - |x|`` is formed exactly (MC for ``|x| >= 1/2``; ``1 - |c0|`` in the engine), so
    inputs like ``1 - 2^-80`` keep their distance to the pole.

    Precondition: none; ``|x| > 1`` (also ``1 + tiny``) gives NaN, ``atanh(±1) = ±inf``.

    Bound: **relative** error ``<= 64 u^nc`` including near 0 and near ±1 (measured
    ``<= 2.9``).
    {args}

    Example:
        >>> x = torch.tensor([[1.0, -2.0**-80]], dtype=torch.float64)  # 1 - 2^-80
        >>> y = atanh(x)
        >>> y  # (81 ln2 - 2^-81) / 2 to 106 bits
        tensor([[ 2.8072e+01, -8.9265e-16]], dtype=torch.float64)
        >>> torch.atanh(x[..., 0])  # the leading component alone is 1: a pole
        tensor([inf], dtype=torch.float64)
        >>> from hypermc.mcf.exact import to_mpmath
        >>> with mpmath.workprec(256):  # relative error against mpmath in units of u^nc = 2^-106
        ...     err = [abs(a / mpmath.atanh(b) - 1) * 2**106 for a, b in zip(to_mpmath(y), to_mpmath(x))]
        >>> [e < 64 for e in err]  # the bound above
        [True]
    """
    return _dispatch(x, torch.atanh, _atanh_engine, _atanh_generic, prepare=_prepare_atanh, odd=True, fused="atanh")


for _fn in (exp, expm1, log, log1p, sinh, cosh, tanh, asinh, acosh, atanh):
    _fn.__doc__ = _fn.__doc__ and _fn.__doc__.replace("    {args}", _ARGS_DOC.rstrip("\n"))  # None under python -OO
del _fn


_TRIG_DOC = """
    Algorithm: ``nc == 1`` the torch function; wide engine (the torch function of the
    engine dtype, which reduces any argument exactly) where the engine holds ``x``
    exactly (an expansion with wide gaps takes the generic path); generic, on the exact
    float64 expansion of a narrower dtype: ``x = n pi/2 + r`` with
    ``|r| <= pi/4`` by exact products of ``n`` with the pieces of a ~1,600-bit ``pi/2``,
    renormalised together with ``x`` (:func:`_trig_reduce`: rounds of ``p - 2`` bits of
    ``n`` for huge arguments; a cheaper fast path where fewer than ``p - 8`` bits
    cancel); ``r = j/128 + t``, Taylor series of ``sin t`` and ``cos t - 1`` in ``t^2``
    (``|t| <= 1/256``), the tables ``sin(j/128)``, ``cos(j/128)``, and the quadrant ``n
    mod 4``.

    Precondition: none (inf and NaN allowed).

    Bound: relative error ``<= 64 u^nc`` (tested against mpmath) wherever ``x`` is not
    within ``2^-(nc p + 64)`` of a nonzero multiple of ``pi/2`` (e.g. ``x`` = the
    ``nc``-component ``pi`` is fine: it is ``~2^-(nc p)`` away) and the result and its
    components are normal; closer than that, the reduced argument is within ``2^-(2 nc p
    + 64)`` (absolute), and so are sin and cos (tan near a pole: its relative error is
    the reduced argument's). ``f(±inf) = NaN``, NaN propagates. Elements where more than
    ``p - 8`` bits cancel or ``|x| >= 2^(p-8)`` take the exact reduction, whose cost grows
    with their largest ``|x|`` (more pieces of ``pi/2`` and, beyond ``2^(p-2)``, more
    rounds).

    Reference: Cody and Waite (1980) and Muller, *Elementary Functions*, ch. 11 (argument
    reduction with a multi-piece ``pi/2``); Tang's table-driven method for the reduced
    argument.
"""


def sin(x: torch.Tensor) -> torch.Tensor:
    """Sine of a component tensor (``sin(±0) = ±0``).
    {trig}{args}

    Example:
        >>> import mpmath
        >>> pi = torch.tensor([[3.141592653589793, 1.2246467991473532e-16]], dtype=torch.float64)
        >>> s = sin(pi)  # = pi - (the double-word pi) to 106 bits, though it is ~2^-108 pi
        >>> s.tolist()
        [[-2.9947698097183397e-33, 1.1124542208633653e-49]]
        >>> with mpmath.workprec(400):  # relative error in units of u^2 = 2^-106
        ...     exact = mpmath.pi - mpmath.mpf(pi[0, 0].item()) - mpmath.mpf(pi[0, 1].item())
        ...     print(mpmath.nstr(abs((mpmath.mpf(s[0, 0].item()) + s[0, 1].item()) / exact - 1) * 2**106, 2))
        0.15
    """
    return _dispatch(x, torch.sin, _engine_trig("sin", _sin_generic), _sin_generic, fused="sin", odd=True, exact64=_trig_width)


def cos(x: torch.Tensor) -> torch.Tensor:
    """Cosine of a component tensor.
    {trig}{args}

    Example:
        >>> cos(torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64))  # cos 1 to 106 bits
        tensor([[ 5.4030e-01, -4.7610e-17],
                [ 1.0000e+00,  0.0000e+00]], dtype=torch.float64)
    """
    return _dispatch(x, torch.cos, _engine_trig("cos", _cos_generic), _cos_generic, fused="cos", exact64=_trig_width)


def tan(x: torch.Tensor) -> torch.Tensor:
    """Tangent of a component tensor: ``sin r / cos r`` (even quadrant) or ``-cos r / sin
    r`` (odd) of the reduction of :func:`sin`, one MC division (``tan(±0) = ±0``).
    {trig}{args}

    Example:
        >>> tan(torch.tensor([[0.5, 0.0]], dtype=torch.float64))[0, 0].item() == math.tan(0.5)
        True
    """
    return _dispatch(x, torch.tan, _engine_trig("tan", _tan_generic), _tan_generic, fused="tan", odd=True, exact64=_trig_width)


for _fn in (sin, cos, tan):  # None under python -OO
    _fn.__doc__ = _fn.__doc__ and _fn.__doc__.replace("    {trig}{args}", _TRIG_DOC.rstrip("\n") + _ARGS_DOC.rstrip("\n"))
del _fn


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """Logistic function ``1 / (1 + exp(-x))``: one :func:`exp`, one MC×float add and one
    float÷MC division (:func:`arith.rdiv_float`).

    Bound (first order, not a separate entry of the tests' bound table): the sum of the
    three steps' bounds, ``64 + 8 + 8 u^nc`` relative.

    Example:
        >>> sigmoid(torch.zeros(1, 2, dtype=torch.float64)).tolist()
        [[0.5, 0.0]]
    """
    e = exp(-x)
    return arith.rdiv_float(torch.ones_like(e[..., 0]), arith.add_float(e, torch.ones_like(e[..., 0])))


# erf has no MC kernel: it is evaluated once in float64 and split, the wide-engine path of
# ``arith``, where float64 holds the nc*p-bit value plus guard bits for erf's own error
# (float64 erf is within a few ulps).
_ERF_ENGINE = torch.float64
_ERF_GUARD_BITS = 4


def erf(x: torch.Tensor) -> torch.Tensor:
    """Error function, evaluated in float64 on the value (:func:`arith.to_engine`) and split
    back into ``nc`` components; ``nc == 1`` is ``torch.erf``.

    Precondition: ``nc p + 4 <= 53`` (float32 up to 2 components, float16 up to 4,
    bfloat16 up to 6); otherwise ``NotImplementedError``.

    Bound: float64 ``erf``'s error (a few ulps of float64, i.e. below ``u^nc / 4``) plus
    the final rounding to ``nc`` components.

    Example:
        >>> erf(torch.zeros(1, 2, dtype=torch.float32)).tolist()
        [[0.0, 0.0]]
    """
    nc = x.shape[-1]
    if nc == 1:
        return torch.erf(x[..., 0]).unsqueeze(-1)
    if nc * float_format(x.dtype).p + _ERF_GUARD_BITS > float_format(_ERF_ENGINE).p:
        raise NotImplementedError(
            f"MCTensor erf is evaluated in float64 and supports at most "
            f"{(float_format(_ERF_ENGINE).p - _ERF_GUARD_BITS) // float_format(x.dtype).p} components of "
            f"{x.dtype}; got nc={nc} (for GELU use approximate='tanh')"
        )
    z = torch.erf(arith.to_engine(x, _ERF_ENGINE))
    return arith.from_engine(z, x.dtype, nc)
