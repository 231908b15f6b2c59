"""Exact oracle, error measures, bound table and input strategies for the test-suite.

Every numeric test compares a multi-component result against an exact or
high-precision reference through this module:

* :func:`components_to_fraction` / :func:`components_to_mpf` turn a component tensor
  of shape ``(*shape, nc)`` (leading component first) into the *exact* sum of its
  components, element by element.
* :func:`rel_err_units` / :func:`abs_err_units` measure the error of a result in units
  of ``u**nc`` where ``u = 2**-p`` is the unit roundoff of the component dtype.
* :func:`assert_within` compares against a bound, given as a number or as a key of
  :data:`BOUNDS` (the one bound table of the suite, re-exported by ``tests/conftest.py``).
* :func:`floats_of`, :func:`expansions` and :func:`edge_values` build inputs.

Nothing here imports ``hypermc``: the oracle must not share code with what it checks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import torch
from hypothesis import strategies as st

__all__ = [
    "BOUNDS",
    "UNIT_ROUNDOFF_BITS",
    "abs_err_units",
    "assert_within",
    "components_to_fraction",
    "components_to_mpf",
    "edge_values",
    "expansions",
    "float_format",
    "floats_of",
    "rel_err_units",
    "u",
    "working_prec",
]

#: Significand bits p (implicit bit included) of each component dtype; u = 2**-p.
UNIT_ROUNDOFF_BITS: dict[torch.dtype, int] = {
    torch.float16: 11,
    torch.bfloat16: 8,
    torch.float32: 24,
    torch.float64: 53,
}

#: THE bound table of the test-suite, in units of u**nc (u of the component dtype).
#: Kernel docstrings quote the same numbers; change both together.
#:
#: * add, sub, mul, div, sqrt: relative error of one MC op.
#: * transcendental: relative error of exp, log, log1p, expm1, sinh, cosh, tanh,
#:   asinh, acosh, atanh (away from their cancellation points, where tests state
#:   their own absolute bound).
#: * matmul: absolute error of each entry divided by (|A| @ |B|) of that entry, i.e.
#:   ``assert_within(..., relative=False, scale=abs(A) @ abs(B))``.
#: * grad: relative error of a gradient computed by autograd through MC ops.
BOUNDS: dict[str, float] = {
    "add": 8,
    "sub": 8,
    "mul": 8,
    "div": 8,
    "sqrt": 8,
    "transcendental": 64,
    "matmul": 4,
    "grad": 64,
}

#: Precision for the exact conversions: enough bits for any sum of fp64 components
#: (exponents from -1074 to 1023 span about 2100 bits).
_EXACT_PREC = 4200


def _check_dtype(dtype: torch.dtype) -> int:
    if dtype not in UNIT_ROUNDOFF_BITS:
        raise TypeError(f"dtype must be one of {sorted(map(str, UNIT_ROUNDOFF_BITS))}, got {dtype}")
    return UNIT_ROUNDOFF_BITS[dtype]


def u(dtype: torch.dtype) -> mpmath.mpf:
    """Unit roundoff ``2**-p`` of ``dtype`` as an exact mpmath number."""
    return mpmath.ldexp(mpmath.mpf(1), -_check_dtype(dtype))


def working_prec(dtype: torch.dtype, nc: int) -> int:
    """mpmath precision (bits) for a reference of an nc-component result: nc*p + 60, at least 200."""
    return max(200, nc * _check_dtype(dtype) + 60)


def float_format(dtype: torch.dtype) -> tuple[int, int, int]:
    """``(p, emin, emax)`` of ``dtype``: significand bits and the exponent range of normal numbers.

    A normal number is ``m * 2**(e - p + 1)`` with ``2**(p-1) <= m < 2**p`` and
    ``emin <= e <= emax``; the smallest subnormal is ``2**(emin - p + 1)``.
    """
    p = _check_dtype(dtype)
    fi = torch.finfo(dtype)
    emin = math.frexp(fi.tiny)[1] - 1  # tiny is the smallest normal, a power of two
    emax = math.frexp(fi.max)[1] - 1
    return p, emin, emax


# --------------------------------------------------------------------------- exact sums


def _components_f64(c: Any) -> torch.Tensor:
    """The component tensor of ``c`` (a Tensor or an MCTensor) as CPU float64, exactly."""
    comps = getattr(c, "components", None)
    if isinstance(comps, torch.Tensor) and type(c) is not torch.Tensor:
        c = comps  # an MCTensor: compare its components, never its own ops
    if not isinstance(c, torch.Tensor):
        raise TypeError(f"expected a component tensor of shape (*shape, nc), got {type(c).__name__}")
    if c.dim() == 0:
        raise ValueError("a component tensor needs a last dimension of components, got a 0-d tensor")
    _check_dtype(c.dtype)
    return c.detach().to(device="cpu", dtype=torch.float64)  # exact for all four dtypes


def _element_lists(c: Any) -> tuple[tuple[int, ...], list[list[float]]]:
    c64 = _components_f64(c)
    shape = tuple(c64.shape[:-1])
    return shape, c64.reshape(-1, c64.shape[-1]).tolist()


def _object_array(shape: tuple[int, ...], values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _fraction_to_mpf(x: Fraction) -> mpmath.mpf:
    """Exact mpf of a dyadic rational (any sum of floats is one)."""
    num, den = x.numerator, x.denominator
    k = den.bit_length() - 1
    if den != 1 << k:
        raise ValueError(f"{x} is not a dyadic rational; it has no exact binary value")
    with mpmath.workprec(max(num.bit_length(), 1) + 8):
        return mpmath.ldexp(mpmath.mpf(num), -k)


def _nonfinite_sum(xs: list[float]) -> float:
    """IEEE sum of components of which at least one is inf or nan (the exact sum is undefined)."""
    total = 0.0
    for x in xs:
        total += x
    return total


def components_to_fraction(c: Any) -> np.ndarray:
    """Exact sum of the components of each element as ``fractions.Fraction``.

    Args:
        c: Tensor of shape ``(*shape, nc)``, leading component first (or an MCTensor).

    Returns:
        numpy object array of shape ``shape`` holding Fractions.

    Raises:
        ValueError: if any component is inf or nan (use :func:`components_to_mpf`).
    """
    shape, rows = _element_lists(c)
    values = []
    for row in rows:
        if not all(math.isfinite(x) for x in row):
            raise ValueError(f"components {row} are not all finite; a Fraction cannot hold them")
        values.append(sum((Fraction(x) for x in row), Fraction(0)))
    return _object_array(shape, values)


def components_to_mpf(c: Any) -> np.ndarray:
    """Exact sum of the components of each element as ``mpmath.mpf``.

    The sum is formed exactly (Fractions) and converted without rounding, so the mpf
    carries as many bits as the sum needs. Elements with an inf or nan component map
    to the IEEE sum of their components (``mpf('inf')``, ``mpf('-inf')`` or ``mpf('nan')``).

    Args:
        c: Tensor of shape ``(*shape, nc)``, leading component first (or an MCTensor).

    Returns:
        numpy object array of shape ``shape`` holding mpf values.
    """
    shape, rows = _element_lists(c)
    values = []
    for row in rows:
        if all(math.isfinite(x) for x in row):
            values.append(_fraction_to_mpf(sum((Fraction(x) for x in row), Fraction(0))))
        else:
            values.append(mpmath.mpf(_nonfinite_sum(row)))
    return _object_array(shape, values)


def _as_mpf(x: Any) -> mpmath.mpf:
    if isinstance(x, mpmath.mpf):
        return x
    if isinstance(x, Fraction):
        if x.denominator & (x.denominator - 1) == 0:
            return _fraction_to_mpf(x)
        return mpmath.mpf(x.numerator) / x.denominator  # rounded at the current precision
    if isinstance(x, (int, float, str, np.floating, np.integer)):
        return mpmath.mpf(x.item() if isinstance(x, np.generic) else x)
    raise TypeError(f"exact values must be mpf, Fraction, int, float or str, got {type(x).__name__}")


# --------------------------------------------------------------------------- error measures


def _error_units(
    got: Any, exact: Any, dtype: torch.dtype, nc: int, *, relative: bool, scale: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Errors in units of u**nc plus the got and exact mpf arrays (for messages)."""
    p = _check_dtype(dtype)
    c64 = _components_f64(got)
    comps = got.components if type(got) is not torch.Tensor and hasattr(got, "components") else got
    if comps.dtype != dtype:
        raise TypeError(f"result components have dtype {comps.dtype}, but the bound is for {dtype}")
    if c64.shape[-1] != nc:
        raise ValueError(f"result has {c64.shape[-1]} components, but the bound is for nc={nc}")
    got_mpf = components_to_mpf(c64)
    shape = got_mpf.shape
    exact_arr = np.broadcast_to(np.asarray(exact, dtype=object), shape)
    scale_arr = None if scale is None else np.broadcast_to(_scale_array(scale), shape)
    errs = np.empty(shape, dtype=np.float64)
    unit = mpmath.ldexp(mpmath.mpf(1), -p * nc)
    with mpmath.workprec(working_prec(dtype, nc)):
        for idx in np.ndindex(*shape):
            g, e = got_mpf[idx], _as_mpf(exact_arr[idx])
            if mpmath.isnan(e) or mpmath.isinf(e):
                same = (mpmath.isnan(e) and mpmath.isnan(g)) or g == e
                errs[idx] = 0.0 if same else math.inf
                continue
            if mpmath.isnan(g) or mpmath.isinf(g):
                errs[idx] = math.inf
                continue
            err = abs(g - e)
            if scale_arr is not None:
                s = _as_mpf(scale_arr[idx])
                err = err / s if s != 0 else (mpmath.mpf(0) if err == 0 else mpmath.inf)
            elif relative and e != 0:
                err = err / abs(e)
            errs[idx] = float(err / unit)
    return errs, got_mpf, exact_arr


def _scale_array(scale: Any) -> np.ndarray:
    if isinstance(scale, torch.Tensor):
        if type(scale) is not torch.Tensor and hasattr(scale, "components"):
            return components_to_mpf(scale)
        return _object_array(tuple(scale.shape), [Fraction(x) for x in scale.detach().cpu().double().reshape(-1).tolist()])
    return np.asarray(scale, dtype=object)


def rel_err_units(got_components: Any, exact: Any, dtype: torch.dtype, nc: int) -> np.ndarray:
    """Relative error ``|got - exact| / |exact| / u**nc`` of each element.

    Where ``exact == 0`` the absolute error ``|got - exact| / u**nc`` is reported
    instead (so an exact zero scores 0 and any nonzero result scores its magnitude in
    units of u**nc). Non-finite values: 0 when got equals exact (inf with the same
    sign, or both nan), inf otherwise.

    Args:
        got_components: result components, shape ``(*shape, nc)``, dtype ``dtype``.
        exact: reference values broadcastable to ``shape`` (mpf, Fraction, int, float, str).
        dtype: component dtype the bound refers to (checked against the result).
        nc: number of components the bound refers to (checked against the result).

    Returns:
        float64 numpy array of shape ``shape``.
    """
    return _error_units(got_components, exact, dtype, nc, relative=True)[0]


def abs_err_units(got_components: Any, exact: Any, dtype: torch.dtype, nc: int, *, scale: Any = None) -> np.ndarray:
    """Absolute error ``|got - exact| / scale / u**nc`` of each element.

    ``scale`` (default 1) is broadcastable to ``shape``; for matmul pass ``|A| @ |B|``
    (a Tensor, an MCTensor or an array of exact values). A zero scale gives 0 where the
    result is exact and inf otherwise. Non-finite values as in :func:`rel_err_units`.
    """
    return _error_units(got_components, exact, dtype, nc, relative=False, scale=scale)[0]


def assert_within(
    got_components: Any,
    exact: Any,
    dtype: torch.dtype,
    nc: int,
    bound_units: float | str,
    *,
    relative: bool = True,
    scale: Any = None,
    msg: str = "",
) -> float:
    """Assert that every element's error is at most ``bound_units`` units of u**nc.

    Args:
        got_components: result components ``(*shape, nc)`` (or an MCTensor).
        exact: reference values broadcastable to ``shape``.
        dtype, nc: component dtype and count the bound refers to (both checked).
        bound_units: a number, or a key of :data:`BOUNDS` such as ``"add"``.
        relative: relative error (default); False for absolute error, divided by ``scale``.
        scale: see :func:`abs_err_units`; implies ``relative=False``.
        msg: prefix of the failure message.

    Returns:
        The largest error seen, in units of u**nc.

    Raises:
        AssertionError: naming the largest error, how many elements exceed the bound,
            and the worst element's index, components, exact sum and reference.
    """
    bound = BOUNDS[bound_units] if isinstance(bound_units, str) else float(bound_units)
    kind = "relative" if relative and scale is None else "absolute"
    errs, got_mpf, exact_arr = _error_units(got_components, exact, dtype, nc, relative=relative and scale is None, scale=scale)
    if errs.size == 0:
        return 0.0
    worst = float(np.max(errs))
    if worst <= bound:
        return worst
    idx = np.unravel_index(int(np.argmax(errs)), errs.shape)
    c64 = _components_f64(got_components)
    digits = int(nc * _check_dtype(dtype) * 0.302) + 5
    with mpmath.workprec(working_prec(dtype, nc)):
        exact_str = mpmath.nstr(_as_mpf(exact_arr[idx]), digits)
    n_bad = int(np.count_nonzero(errs > bound))
    name = f" ({bound_units})" if isinstance(bound_units, str) else ""
    raise AssertionError(
        f"{msg + ': ' if msg else ''}{kind} error {worst:.4g} u^{nc} exceeds bound {bound:g}{name} "
        f"for {dtype}, nc={nc} in {n_bad} of {errs.size} elements; worst at index {tuple(map(int, idx))}: "
        f"components {c64[idx].tolist()} sum {mpmath.nstr(got_mpf[idx], digits)}, exact {exact_str}"
    )


# --------------------------------------------------------------------------- input values


def edge_values(dtype: torch.dtype) -> list[float]:
    """Pinned values of ``dtype`` (as exact Python floats), both signs.

    0, smallest and largest subnormal, smallest normal, 1, the neighbours of 1,
    ``2**(emax-10)``, ``2**-(emax-10)``, max/2 and the largest finite value; the list
    holds each of them with both signs (``0.0`` and ``-0.0`` included).
    """
    p, emin, emax = float_format(dtype)
    fi = torch.finfo(dtype)
    tiny_sub = math.ldexp(1.0, emin - p + 1)
    positives = [
        0.0,
        tiny_sub,
        math.ldexp(1.0, emin) - tiny_sub,  # largest subnormal
        math.ldexp(1.0, emin),  # smallest normal
        1.0,
        1.0 + math.ldexp(1.0, 1 - p),  # 1 + ulp(1)
        1.0 - math.ldexp(1.0, -p),  # predecessor of 1
        math.ldexp(1.0, emax - 10),
        math.ldexp(1.0, -(emax - 10)),
        float(fi.max) / 2,
        float(fi.max),
    ]
    return positives + [-x for x in positives]


def _exponent_range(dtype: torch.dtype, min_exp: int | None, max_exp: int | None, lowest: int) -> tuple[int, int]:
    p, emin, emax = float_format(dtype)
    lo = lowest if min_exp is None else min_exp
    hi = emax if max_exp is None else max_exp
    if not emin - p + 1 <= lo <= hi <= emax:
        raise ValueError(
            f"exponent range [{lo}, {hi}] is not within [{emin - p + 1}, {emax}] for {dtype}; "
            "exponents are floor(log2|x|) of the values drawn"
        )
    return lo, hi


def floats_of(
    dtype: torch.dtype, *, min_exp: int | None = None, max_exp: int | None = None, allow_subnormal: bool = True, allow_zero: bool = True
) -> st.SearchStrategy[float]:
    """Python floats exactly representable in ``dtype``, uniform over binary exponents.

    Each value is ``±m * 2**q`` built from random integers, so every exponent in
    ``[min_exp, max_exp]`` (``floor(log2|x|)``; default: the whole range of the dtype,
    subnormals included) is equally likely and all significand bits are random. The
    in-range :func:`edge_values` and, if allowed, ±0 are mixed in.
    """
    p, emin, _ = float_format(dtype)
    lo, hi = _exponent_range(dtype, min_exp, max_exp, emin - p + 1)
    if not allow_subnormal:
        lo = max(lo, emin)
        if lo > hi:
            raise ValueError(f"no normal {dtype} values with exponents up to {hi}")

    @st.composite
    def _draw(draw: st.DrawFn) -> float:
        e = draw(st.integers(lo, hi))
        q = max(e - p + 1, emin - p + 1)  # quantum: ulp of numbers with exponent e
        k = e - q
        m = (1 << k) | draw(st.integers(0, (1 << k) - 1))
        return math.ldexp(float(m), q) * draw(st.sampled_from([1.0, -1.0]))

    def in_range(x: float) -> bool:
        if x == 0:
            return allow_zero
        e = math.frexp(x)[1] - 1
        return lo <= e <= hi

    pinned = [x for x in edge_values(dtype) if in_range(x)]
    parts = [_draw()]
    if pinned:
        parts.append(st.sampled_from(pinned))
    return st.one_of(*parts)


def _pow2(q: torch.Tensor) -> torch.Tensor:
    """Exact float64 ``2**q`` for an int64 tensor q in [-1074, 1023], built from bit patterns."""
    normal = torch.bitwise_left_shift(q.clamp(min=-1022) + 1023, 52)
    subnormal = torch.bitwise_left_shift(torch.ones_like(q), (q + 1074).clamp(0, 52))
    return torch.where(q >= -1022, normal, subnormal).view(torch.float64)


def _random_values(e: torch.Tensor, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Positive float64 values exact in ``dtype`` with floor(log2 x) == e, random significand."""
    p, emin, _ = float_format(dtype)
    q = torch.clamp(e - p + 1, min=emin - p + 1)
    k = e - q
    bits = torch.randint(0, 1 << 62, e.shape, generator=gen, dtype=torch.int64)
    top = torch.bitwise_left_shift(torch.ones_like(k), k)
    m = top | (bits & (top - 1))
    return m.to(torch.float64) * _pow2(q)


def _exponent_of(x: torch.Tensor) -> torch.Tensor:
    """floor(log2|x|) of nonzero float64 values, exactly."""
    return torch.frexp(x)[1].to(torch.int64) - 1


def expansions(
    dtype: torch.dtype,
    nc: int,
    *,
    min_exp: int | None = None,
    max_exp: int | None = None,
    shape: tuple[int, ...] = (64,),
    allow_zero: bool = False,
) -> st.SearchStrategy[torch.Tensor]:
    """Normalised nc-component expansions as a tensor of shape ``(*shape, nc)`` of ``dtype``.

    The leading component of each element has an exponent uniform in
    ``[min_exp, max_exp]`` (default: the normal range of the dtype); each next
    component is nonzero with ``|c[i+1]| <= ulp(c[i]) / 2`` (strictly below half an ulp
    with random significand, sometimes exactly half an ulp, sometimes a gap of extra
    exponents) or zero, and components after a zero are zero. So components are
    non-overlapping and decreasing, with zeros only at the tail; a tail that would
    underflow the dtype is zero. Signs are random per component.

    Hypothesis draws a seed and a few leading values (from :func:`floats_of`, so edge
    values appear); the rest of the batch is built with a seeded torch generator, so
    one example checks many values. With ``allow_zero`` some elements are all zero.
    """
    p, emin, _ = float_format(dtype)
    lo, hi = _exponent_range(dtype, min_exp, max_exp, emin)
    if nc < 1:
        raise ValueError(f"nc must be >= 1, got {nc}")
    n = math.prod(shape)
    tiny_exp = emin - p + 1  # exponent of the smallest subnormal

    @st.composite
    def _draw(draw: st.DrawFn) -> torch.Tensor:
        seed = draw(st.integers(0, 2**32 - 1))
        leaders = draw(st.lists(floats_of(dtype, min_exp=lo, max_exp=hi, allow_zero=allow_zero), max_size=min(4, n)))
        gen = torch.Generator().manual_seed(seed)
        e = torch.randint(lo, hi + 1, (n,), generator=gen, dtype=torch.int64)
        x = _random_values(e, dtype, gen)
        x = torch.where(torch.rand(n, generator=gen) < 0.5, -x, x)
        if allow_zero:
            x = torch.where(torch.rand(n, generator=gen) < 0.05, torch.zeros_like(x), x)
        if leaders:
            x[: len(leaders)] = torch.tensor(leaders, dtype=torch.float64)
        comps = [x]
        prev = x
        for _ in range(1, nc):
            alive = prev != 0
            e_prev = _exponent_of(torch.where(alive, prev, torch.ones_like(prev)))
            e_ulp = torch.clamp(e_prev, min=emin) - p + 1  # ulp(prev) = 2**e_ulp
            r = torch.rand(n, generator=gen)
            gap = torch.where(
                r < 0.7,
                0,
                torch.where(r < 0.9, torch.randint(1, p + 1, (n,), generator=gen), torch.randint(1, 3 * p + 1, (n,), generator=gen)),
            )
            e_c = e_ulp - 2 - gap  # 2**e_c <= |c| < 2**(e_c + 1) <= ulp(prev) / 2
            fits = e_c >= tiny_exp
            c = _random_values(torch.where(fits, e_c, torch.zeros_like(e_c)), dtype, gen)
            half_ulp = _pow2(torch.clamp(e_ulp - 1, min=-1074))
            tie = (torch.rand(n, generator=gen) < 0.05) & (e_ulp - 1 >= tiny_exp)
            c = torch.where(tie, half_ulp, torch.where(fits, c, torch.zeros_like(c)))
            c = torch.where(torch.rand(n, generator=gen) < 0.5, -c, c)
            zero = ~alive | (torch.rand(n, generator=gen) < 0.1)
            c = torch.where(zero, torch.zeros_like(c), c)
            comps.append(c)
            prev = c
        out = torch.stack(comps, dim=-1)
        return out.to(dtype).reshape(*shape, nc)

    return _draw()
