"""Tests of ``hypermc.mcf.elementary`` against mpmath.

Bound: ``BOUNDS["transcendental"]`` (64 units of ``u**nc``), relative, for every result
whose ``nc`` components can all be normal numbers (``|f| >= 2**(emin + (nc-1) p)``);
below that the tail components are subnormal and the test allows an absolute error of
``nc`` smallest subnormals instead. The functions with a zero (expm1, log1p, sinh, tanh,
asinh, atanh at 0; log, acosh at 1) are checked *relatively* up to it, with inputs such as
``±1e-30`` and ``1 + 2**-80`` formed exactly as expansions.

The reference is mpmath at ``working_prec(dtype, nc)`` (``max(200, nc p + 60)`` bits) on
the exact sum of the input components.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermc.mcf import elementary as el
from hypermc.mcf import native, portable
from tests.oracle import BOUNDS, components_to_mpf, expansions, float_format, working_prec

FUNCS = ["exp", "expm1", "log", "log1p", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"]
MPMATH = {
    "exp": mpmath.exp,
    "expm1": mpmath.expm1,
    "log": mpmath.log,
    "log1p": mpmath.log1p,
    "sinh": mpmath.sinh,
    "cosh": mpmath.cosh,
    "tanh": mpmath.tanh,
    "asinh": mpmath.asinh,
    "acosh": mpmath.acosh,
    "atanh": mpmath.atanh,
}
CASES = [(dtype, nc) for dtype in (torch.float32, torch.float64) for nc in (2, 3, 4)]
CASE_IDS = [f"{str(d).split('.')[-1]}-nc{nc}" for d, nc in CASES]
BOUND = BOUNDS["transcendental"]
N_RANDOM = 240  # values per (function, dtype, nc); mpmath is the slow part


# --------------------------------------------------------------------------- helpers


def _p(dtype: torch.dtype) -> int:
    return float_format(dtype)[0]


def _ulp64(c: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """ulp of each value of ``dtype`` (held exactly in float64); ulp(0) = smallest subnormal."""
    p, emin, _ = float_format(dtype)
    e = torch.frexp(c)[1].to(torch.float64) - 1
    e = torch.where(c == 0, torch.full_like(e, emin), e).clamp(min=emin)
    return torch.exp2(e - (p - 1))


def _expansion(lead: torch.Tensor, dtype: torch.dtype, nc: int, gen: torch.Generator) -> torch.Tensor:
    """Random normalised ``nc``-component expansions of ``dtype`` led by ``lead`` (rounded).

    Each next component is uniform in ``(-ulp(prev)/2, ulp(prev)/2)``, in one case out of
    five scaled down by ``2**-g`` (a gap), in one out of twenty zero (then the rest is
    zero); components that would fall below the subnormal range are zero.
    """
    p, emin, _ = float_format(dtype)
    c = lead.to(dtype).to(torch.float64)
    comps = [c]
    tiny = math.ldexp(1.0, emin - p + 1)
    for _ in range(1, nc):
        half_ulp = _ulp64(c, dtype) / 2
        v = (torch.rand(c.shape, generator=gen, dtype=torch.float64) * 2 - 1) * half_ulp
        gap = torch.randint(1, 3 * p, c.shape, generator=gen).to(torch.float64)
        v = torch.where(torch.rand(c.shape, generator=gen) < 0.2, v * torch.exp2(-gap), v)
        v = v.to(dtype).to(torch.float64)
        dead = (c == 0) | (torch.rand(c.shape, generator=gen) < 0.05) | (v.abs() < tiny)
        v = torch.where(dead | (v.abs() > half_ulp), torch.zeros_like(v), v)
        comps.append(v)
        c = v
    return torch.stack(comps, dim=-1).to(dtype)


def _near(
    center: float, dtype: torch.dtype, nc: int, gen: torch.Generator, n: int, min_exp: int, max_exp: int, sign: float
) -> torch.Tensor:
    """Exact expansions ``center + sign * d`` with ``d`` log-uniform in ``[2^min_exp, 2^max_exp)``.

    ``d`` is a random ``(nc-1)``-component expansion below ``ulp(center)/2``, so
    ``(center, sign*d...)`` is itself a valid expansion (e.g. ``1 + 2**-80``).
    """
    e = torch.randint(min_exp, max_exp, (n,), generator=gen).to(torch.float64)
    d = torch.exp2(e) * (1 + torch.rand(n, generator=gen, dtype=torch.float64))
    tail = _expansion(d, dtype, nc - 1, gen).to(torch.float64) * sign
    head = torch.full((n, 1), center, dtype=torch.float64)
    return torch.cat([head, tail], dim=-1).to(dtype)


def _uniform(lo: float, hi: float, n: int, gen: torch.Generator) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)


def _loguniform(lo_exp: float, hi_exp: float, n: int, gen: torch.Generator, signed: bool = True) -> torch.Tensor:
    mag = torch.exp2(_uniform(lo_exp, hi_exp, n, gen))
    if not signed:
        return mag
    return torch.where(torch.rand(n, generator=gen) < 0.5, -mag, mag)


def _inputs(fn: str, dtype: torch.dtype, nc: int, gen: torch.Generator, n: int) -> torch.Tensor:
    """Random in-domain inputs of ``fn``: a bulk range, the zero of the function, extremes."""
    p, emin, emax = float_format(dtype)
    ln2 = math.log(2.0)
    # exp results stay in the range where all nc components are normal numbers
    exp_lo = (emin + (nc - 1) * p + 2) * ln2
    exp_hi = (emax + 0.99) * ln2
    m = n // 4
    tiny = _loguniform(-100, -20, m, gen)  # |x| ~ 1e-30 .. 1e-6

    def lead(*parts: torch.Tensor) -> torch.Tensor:
        return _expansion(torch.cat(parts), dtype, nc, gen)

    if fn in ("exp", "expm1"):
        return lead(_uniform(exp_lo, exp_hi, 2 * m, gen), _uniform(-2, 2, m, gen), tiny)
    if fn in ("sinh", "cosh"):
        big = (emax + 0.95) * ln2
        return lead(_uniform(-big, big, 2 * m, gen), _uniform(-2, 2, m, gen), tiny)
    if fn == "tanh":
        return lead(_uniform(-60, 60, m, gen), _uniform(-3, 3, 2 * m, gen), tiny)
    if fn == "asinh":
        return lead(_loguniform(-30, emax - 1, 2 * m, gen), _uniform(-3, 3, m, gen), tiny)
    if fn == "atanh":
        return torch.cat(
            [
                lead(_uniform(-1, 1, 2 * m, gen), tiny),
                _near(1.0, dtype, nc, gen, m // 2, -3 * p, -p - 1, -1.0),
                -_near(1.0, dtype, nc, gen, m - m // 2, -3 * p, -p - 1, -1.0),
            ]
        )
    if fn == "log":
        return torch.cat(
            [
                lead(_loguniform(emin + 1, emax - 1, 2 * m, gen, signed=False), _uniform(0.5, 2, m, gen)),
                _near(1.0, dtype, nc, gen, m // 2, -3 * p, -p - 1, 1.0),
                _near(1.0, dtype, nc, gen, m - m // 2, -3 * p, -p - 2, -1.0),
            ]
        )
    if fn == "log1p":
        return torch.cat(
            [
                lead(_uniform(-0.99, 3, 2 * m, gen), tiny, _loguniform(0, emax - 1, m // 2, gen, signed=False)),
                _near(-1.0, dtype, nc, gen, m - m // 2, -3 * p, -p - 2, 1.0),
            ]
        )
    if fn == "acosh":
        return torch.cat(
            [
                lead(1 + _uniform(0, 5, m, gen), _loguniform(1, emax - 1, m, gen, signed=False)),
                _near(1.0, dtype, nc, gen, 2 * m, -3 * p, -p - 1, 1.0),
            ]
        )
    raise AssertionError(fn)


def _reference(fn: str, x: mpmath.mpf, wp: int) -> mpmath.mpf:
    """``fn(x)`` to ``wp`` bits, with extra precision for the cancellation near a zero or pole.

    ``x`` is exact; the distances ``x``, ``x - 1``, ``1 + x``, ``1 - |x|`` are formed
    exactly, and the working precision grows by the number of leading bits they cancel,
    so mpmath's own formulas (e.g. ``acosh = log(x + sqrt(x^2 - 1))``) stay accurate.
    """
    one = mpmath.mpf(1)
    dists = [x, mpmath.fsub(x, one, exact=True), mpmath.fadd(x, one, exact=True), mpmath.fsub(one, abs(x), exact=True)]
    extra = max([0] + [-int(mpmath.mag(d)) for d in dists if d != 0 and mpmath.isfinite(d)])
    with mpmath.workprec(wp + extra + 16):
        ref = MPMATH[fn](x)
    return +ref  # rounded to wp bits


def _assert_normalised(y: torch.Tensor) -> None:
    """Components non-overlapping (``|c[i+1]| <= ulp(c[i]) / 2``), zeros only at the tail."""
    dtype = y.dtype
    c = y.detach().to(torch.float64)
    finite = torch.isfinite(c[..., 0])
    for i in range(c.shape[-1] - 1):
        hi, lo = c[..., i], c[..., i + 1]
        ok = (lo.abs() <= _ulp64(hi, dtype) / 2) & ((hi != 0) | (lo == 0))
        bad = finite & ~ok
        assert not bool(bad.any()), f"components {c[bad][:3].tolist()} are not normalised"
    assert bool((c[~finite][..., 1:] == 0).all()), "a non-finite element has a nonzero tail"


def _assert_accurate(fn: str, x: torch.Tensor, y: torch.Tensor, msg: str = "", reference=None) -> float:
    """Check ``y = fn(x)`` against mpmath; return the worst relative error in units of u^nc.
    ``reference(fn, x, wp)``: the exact value (default :func:`_reference`)."""
    reference = reference or _reference
    dtype, nc = x.dtype, x.shape[-1]
    assert y.dtype == dtype and y.shape == x.shape
    _assert_normalised(y)
    p, emin, _ = float_format(dtype)
    xm = components_to_mpf(x).reshape(-1)
    ym = components_to_mpf(y).reshape(-1)
    worst = 0.0
    fmax = mpmath.mpf(float(torch.finfo(dtype).max))
    wp = working_prec(dtype, nc)
    with mpmath.workprec(wp):
        unit = mpmath.ldexp(1, -p * nc)
        normal_min = mpmath.ldexp(1, emin + (nc - 1) * p)
        floor = mpmath.ldexp(1, emin - p + 1)
        for i, (xi, yi) in enumerate(zip(xm, ym)):
            ref = reference(fn, xi, wp)
            where = (
                f"{msg} {fn}({mpmath.nstr(xi, 25)}) for {dtype} nc={nc}: got {mpmath.nstr(yi, 25)}, "
                f"exact {mpmath.nstr(ref, 25)}; components {y.reshape(-1, nc)[i].tolist()}"
            )
            if abs(ref) > fmax * (1 + mpmath.ldexp(1, -p)):
                assert yi == mpmath.inf * mpmath.sign(ref), where
                continue
            assert mpmath.isfinite(yi), where
            err = abs(yi - ref)
            if abs(ref) >= normal_min:
                units = float(err / abs(ref) / unit)
                worst = max(worst, units)
                assert units <= BOUND, f"relative error {units:.3g} u^nc > {BOUND}: {where}"
            else:
                assert err <= nc * floor, f"absolute error {float(err / floor):.3g} subnormals: {where}"
    return worst


def _mc(values, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Expansions from a list of component lists (padded with zeros)."""
    rows = [list(v) + [0.0] * (nc - len(v)) for v in values]
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


# ----------------------------------------------------------------------------- nc = 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("fn", FUNCS)
def test_nc1_is_the_plain_function(fn, dtype, rng):
    """nc = 1 is the plain function: torch's, or for exp, log and tanh on the CPU the one
    of :mod:`hypermc.mcf.portable` (torch's CPU versions round by the CPU model)."""
    x = torch.cat(
        [
            torch.randn(200, generator=rng, dtype=torch.float64) * 4,
            torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan]),
        ]
    )
    x = x.to(dtype).unsqueeze(-1)
    got = getattr(el, fn)(x)
    assert got.dtype == dtype and got.shape == x.shape
    plain = getattr(portable, fn) if fn in portable.__all__ else getattr(torch, fn)
    torch.testing.assert_close(got, plain(x), rtol=0, atol=0, equal_nan=True)
    # and portable's functions are torch's to a few ulps (2.5 for tanh)
    torch.testing.assert_close(got, getattr(torch, fn)(x), rtol=3 * torch.finfo(dtype).eps, atol=0, equal_nan=True)


# ------------------------------------------------------------------ random, vs mpmath


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("fn", FUNCS)
def test_random_against_mpmath(fn, dtype, nc, seed):
    gen = torch.Generator().manual_seed(seed + 1000 * FUNCS.index(fn) + 10 * nc + _p(dtype))
    x = _inputs(fn, dtype, nc, gen, N_RANDOM)
    assert x.dtype == dtype and x.shape == (N_RANDOM, nc)
    y = getattr(el, fn)(x)
    _assert_accurate(fn, x, y)


# ------------------------------------------------------------- zeros of the functions


ODD_AT_ZERO = ["expm1", "log1p", "sinh", "tanh", "asinh", "atanh"]


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("fn", ODD_AT_ZERO)
def test_relative_near_zero(fn, dtype, nc):
    p = _p(dtype)
    vals = [
        [1e-30],
        [-1e-30],
        [3e-20, 1e-28],
        [2.0 ** -(nc * p // 2)],
        [-(2.0 ** -(nc * p // 2 + 3))],
        [2.0 ** -(nc * p)],
        [1e-10],
        [-1e-5],
        [0.3],
        [-0.3],
    ]
    x = _mc(vals, dtype, nc)
    x = _expansion(x[..., 0].to(torch.float64), dtype, nc, torch.Generator().manual_seed(nc))
    _assert_accurate(fn, x, getattr(el, fn)(x))


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("fn", ["log", "acosh"])
def test_relative_near_one(fn, dtype, nc):
    p = _p(dtype)
    deltas = [2.0 ** -(p + 1), 2.0 ** -(p + 5), 2.0**-80, 2.0 ** -(nc * p - 3), 3 * 2.0 ** -(nc * p - 2)]
    vals = [[1.0, d] for d in deltas]
    if fn == "log":
        vals += [[1.0, -d] for d in deltas] + [[1.0 - 2.0**-p, -(2.0**-70)]]
    x = _mc(vals, dtype, nc)
    assert x[0, 1].item() != 0  # the tail really holds the distance to 1
    _assert_accurate(fn, x, getattr(el, fn)(x))


def test_log_of_one_plus_2_to_minus_80_fp64_nc2():
    x = _mc([[1.0, 2.0**-80]], torch.float64, 2)
    y = el.log(x)
    with mpmath.workprec(300):
        exact = mpmath.log1p(mpmath.ldexp(1, -80))
        got = components_to_mpf(y)[0]
        assert abs(got - exact) / exact < 64 * mpmath.ldexp(1, -106)
    assert y[0, 0].item() == 2.0**-80  # and not 0, as float64 log(1.0) would give


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_log1p_and_atanh_near_their_poles(dtype, nc):
    p = _p(dtype)
    for d in (2.0 ** -(p + 1), 2.0**-80, 2.0 ** -(nc * p - 3)):
        x = _mc([[-1.0, d]], dtype, nc)
        _assert_accurate("log1p", x, el.log1p(x))
        for s in (1.0, -1.0):
            x = _mc([[s, -s * d]], dtype, nc)
            _assert_accurate("atanh", x, el.atanh(x))


# ------------------------------------------------------------------- large arguments


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_large_arguments(dtype, nc):
    _, _, emax = float_format(dtype)
    ln2 = math.log(2.0)
    top = (emax + 1) * ln2  # exp overflows just above this
    cases = {
        "exp": [top - 0.01, top - 1e-4, -top + 30],
        "expm1": [top - 0.01, -50.0, -200.0],
        "sinh": [top + ln2 - 0.01, -(top + ln2 - 0.01)],
        "cosh": [top + ln2 - 0.01, -(top + ln2 - 0.01)],
        "tanh": [25.0, -40.0, 300.0],
        "asinh": [1e300 if dtype == torch.float64 else 1e37, -3e30, 2.0 ** (emax - 1)],
        "acosh": [1e300 if dtype == torch.float64 else 1e37, 3e30, 2.0**emax],
        "log": [float(torch.finfo(dtype).max), float(torch.finfo(dtype).tiny), 2.0 ** -(emax - 1)],
        "log1p": [float(torch.finfo(dtype).max), 1e30],
    }
    for fn, vals in cases.items():
        x = _mc([[v] for v in vals], dtype, nc)
        _assert_accurate(fn, x, getattr(el, fn)(x), msg="large")


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_overflow_gives_inf(dtype, nc):
    _, _, emax = float_format(dtype)
    top = (emax + 1) * math.log(2.0)
    big = 1e300 if dtype == torch.float64 else 1e38
    x = _mc([[top + 0.01], [top + 1], [big], [top + 0.8]], dtype, nc)
    for fn in ("exp", "expm1", "cosh", "sinh"):
        y = getattr(el, fn)(x)
        # cosh and sinh overflow ln2 later than exp
        expected_inf = [fn in ("exp", "expm1"), True, True, True]
        assert torch.isinf(y[:, 0]).tolist() == expected_inf, (fn, y)
        assert bool((y[:, 0][torch.isinf(y[:, 0])] > 0).all())
        assert bool((y[:, 1:][torch.isinf(y[:, 0])] == 0).all())
    y = el.sinh(-x)
    assert bool((y[1:, 0] == -math.inf).all())


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_exp_underflow_is_gradual(dtype, nc):
    p, emin, _ = float_format(dtype)
    ln2 = math.log(2.0)
    gen = torch.Generator().manual_seed(7 + nc)
    lead = _uniform((emin - p - 1) * ln2, (emin + (nc - 1) * p + 2) * ln2, 120, gen)
    x = _expansion(lead, dtype, nc, gen)
    _assert_accurate("exp", x, el.exp(x), msg="underflow")
    deep = _mc([[(emin - p - 2) * ln2], [-1e4], [-1e30]], dtype, nc)
    y = el.exp(deep)
    assert bool((y == 0).all()) and not bool(torch.signbit(y).any())


# -------------------------------------------------------------------- special values


INF, NAN = math.inf, math.nan
SPECIALS = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN)],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0), (NAN, NAN)],
    "log": [(0.0, -INF), (-0.0, -INF), (1.0, 0.0), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN)],
    "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN)],
    "sinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN)],
    "cosh": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, INF), (NAN, NAN)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (1e30, 1.0), (-1e30, -1.0), (NAN, NAN)],
    "asinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN)],
    "acosh": [(1.0, 0.0), (0.5, NAN), (0.0, NAN), (-1.0, NAN), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN)],
    "atanh": [(0.0, 0.0), (-0.0, -0.0), (1.0, INF), (-1.0, -INF), (2.0, NAN), (-1.5, NAN), (INF, NAN), (NAN, NAN)],
}


@pytest.mark.parametrize("dtype, nc", [(torch.float32, 1)] + CASES, ids=["float32-nc1"] + CASE_IDS)
@pytest.mark.parametrize("fn", FUNCS)
def test_special_values(fn, dtype, nc):
    check_special_values(fn, SPECIALS[fn], dtype, nc)


def check_special_values(fn: str, cases: list[tuple[float, float]], dtype: torch.dtype, nc: int) -> None:
    """``el.<fn>`` of ``(input, expected)`` pairs: the leading values (NaN where expected),
    the sign of a zero result, and a zero tail."""
    inputs, expected = zip(*cases)
    x = _mc([[v] for v in inputs], dtype, nc)
    y = getattr(el, fn)(x)
    want = torch.tensor(expected, dtype=dtype)
    torch.testing.assert_close(y[:, 0], want, rtol=0, atol=0, equal_nan=True)
    zero_sign = want == 0
    assert torch.signbit(y[:, 0])[zero_sign].tolist() == torch.signbit(want)[zero_sign].tolist()
    if nc > 1:
        assert bool((y[:, 1:] == 0).all()), f"{fn}: special results must have a zero tail, got {y}"


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_domain_errors_just_outside(dtype, nc):
    p = _p(dtype)
    d = 2.0 ** -(nc * p - 4)
    below_one = _mc([[1.0, -d], [1.0, -(2.0**-80)]], dtype, nc)
    assert bool(torch.isnan(el.acosh(below_one)[:, 0]).all())
    above_one = _mc([[1.0, d], [-1.0, -d]], dtype, nc)
    assert bool(torch.isnan(el.atanh(above_one)[:, 0]).all())
    below_m1 = _mc([[-1.0, -d]], dtype, nc)
    assert bool(torch.isnan(el.log1p(below_m1)[:, 0]).all())
    negative_tiny = _mc([[-1e-30]], dtype, nc)
    assert bool(torch.isnan(el.log(negative_tiny)[:, 0]).all())


# ------------------------------------------------------------------ shapes and paths


@pytest.mark.parametrize(
    "dtype, nc", [(torch.float32, 2), (torch.float32, 3), (torch.float64, 2)], ids=["engine", "via-float64", "generic"]
)
def test_shapes_broadcast_and_empty(dtype, nc):
    x = _mc([[0.5], [1.5], [2.5], [3.5], [0.25], [0.75]], dtype, nc).reshape(2, 3, nc)
    for fn in FUNCS:
        xin = x / 4 if fn == "atanh" else (x + 1 if fn == "acosh" else x)
        y = getattr(el, fn)(xin)
        assert y.shape == (2, 3, nc) and y.dtype == dtype
        flat = getattr(el, fn)(xin.reshape(6, nc))
        assert torch.equal(y.reshape(6, nc), flat)
        assert getattr(el, fn)(xin[:0]).shape == (0, 3, nc)


@pytest.mark.parametrize(
    "dtype, nc",
    [(torch.float16, 2), (torch.bfloat16, 3), (torch.float16, 5), (torch.bfloat16, 7)],
    ids=["f16-2", "bf16-3", "f16-5", "bf16-7"],
)
@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "acosh", "atanh", "log1p"])
def test_half_precision_paths(fn, dtype, nc, seed):
    # float16 nc=5 and bfloat16 nc=7 are beyond the wide engine: they run the generic
    # algorithm on the float64 expansion. float16 tails are subnormal for |x| < 2^8, where
    # the absolute floor of _assert_accurate applies.
    gen = torch.Generator().manual_seed(seed + nc)
    if fn == "exp":
        lead = _uniform(-8.0, 11.0, 60, gen)
    elif fn in ("log", "log1p"):
        lead = _uniform(0.1, 1000.0, 60, gen)
    elif fn == "acosh":
        lead = _uniform(1.0, 1000.0, 60, gen)
    else:
        lead = _uniform(-0.99, 0.99, 60, gen)
    x = _expansion(lead, dtype, nc, gen)
    _assert_accurate(fn, x, getattr(el, fn)(x))


@pytest.mark.parametrize("dtype, nc", [(torch.float64, 2), (torch.float32, 3)], ids=["generic", "via-float64"])
@pytest.mark.parametrize("fn", ["exp", "log", "atanh"])
def test_cpu_blocks_give_the_same_result(fn, dtype, nc, monkeypatch):
    gen = torch.Generator().manual_seed(3)
    x = _expansion(_uniform(-0.9, 0.9, 50, gen), dtype, nc, gen).reshape(5, 10, nc)
    x = x.abs() * 3 if fn == "log" else x
    whole = getattr(el, fn)(x)
    monkeypatch.setattr(el, "_CPU_BLOCK", 7)  # 8 blocks, the last one short
    blocked = getattr(el, fn)(x)
    assert blocked.shape == (5, 10, nc) and torch.equal(blocked, whole)


def test_constants_are_built_lazily_and_cached(monkeypatch):
    # the torch path's constants (the fused kernels of hypermc.mcf.native have them compiled in)
    monkeypatch.setattr(native._bypass, "on", True, raising=False)
    el._constants.cache_clear()
    x = _mc([[0.5]], torch.float64, 2)
    el.exp(x)
    assert el._constants.cache_info().currsize == 1
    el.exp(x)
    assert el._constants.cache_info().hits >= 1


def test_series_plan_reaches_the_target_precision():
    for p, nc in [(53, 2), (53, 3), (53, 4), (24, 3)]:
        plan = el._series_plan(p, nc)
        assert plan[1] == nc and min(plan[1:]) >= 1 and list(plan[1:]) == sorted(plan[1:], reverse=True)
        n = len(plan) - 1
        # the first omitted term is below 2^-(nc p + guard) of r
        r = math.log(2.0) / (2 * 2**el._TABLE_BITS)
        assert r**n / math.factorial(n + 1) < 2.0 ** -(nc * p + el._GUARD_BITS)


# -------------------------------------------------------------------------- hypothesis


def _domain(fn: str, x: torch.Tensor) -> torch.Tensor:
    """Map random expansions into ``fn``'s domain exactly (negation is exact)."""
    if fn in ("log", "acosh"):
        x = torch.where(x[..., :1] < 0, -x, x)
    if fn == "acosh":  # 1 - tiny is below the domain: flip the tail's sign (still normalised)
        x = torch.where(x[..., :1] == 1, torch.cat([x[..., :1], x[..., 1:].abs()], dim=-1), x)
    return x  # log1p and atanh are drawn with |x| < 1


EXPONENTS = {  # (min_exp, max_exp) of the leading component, per dtype
    "exp": {torch.float32: (-40, 6), torch.float64: (-60, 9)},
    "expm1": {torch.float32: (-40, 6), torch.float64: (-60, 9)},
    "sinh": {torch.float32: (-40, 6), torch.float64: (-60, 9)},
    "cosh": {torch.float32: (-40, 6), torch.float64: (-60, 9)},
    "tanh": {torch.float32: (-40, 6), torch.float64: (-60, 9)},
    "asinh": {torch.float32: (-40, 120), torch.float64: (-60, 1000)},
    "log": {torch.float32: (-100, 120), torch.float64: (-1000, 1000)},
    "log1p": {torch.float32: (-60, -1), torch.float64: (-200, -1)},
    "acosh": {torch.float32: (0, 120), torch.float64: (0, 1000)},
    "atanh": {torch.float32: (-60, -1), torch.float64: (-200, -1)},
}


@settings(max_examples=40)
@given(data=st.data())
def test_hypothesis_against_mpmath(data):
    fn = data.draw(st.sampled_from(FUNCS), label="fn")
    dtype, nc = data.draw(st.sampled_from(CASES), label="case")
    lo, hi = EXPONENTS[fn][dtype]
    x = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(12,)), label="x")
    x = _domain(fn, x)
    assert x.dtype == dtype
    _assert_accurate(fn, x, getattr(el, fn)(x), msg="hypothesis")


def test_accuracy_helper_measures_units_of_u_nc():
    # a result off by exactly 2 u^nc (relative) scores 2; one off by 100 fails
    x = _mc([[0.0]], torch.float64, 2)
    y = el.exp(x).clone()
    y[0, 1] = 2.0 * 2.0**-106
    assert _assert_accurate("exp", x, y) == pytest.approx(2.0)
    y[0, 1] = 100.0 * 2.0**-106
    with pytest.raises(AssertionError, match="relative error 100"):
        _assert_accurate("exp", x, y)


@pytest.mark.parametrize(
    "dtype, nc", [(torch.float32, 2), (torch.float32, 3), (torch.float32, 4), (torch.float16, 4), (torch.bfloat16, 8)], ids=str
)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_float64_double_word_of_a_narrow_expansion(dtype, nc, data):
    """``_to_float64`` of an expansion that a double-word holds (the fixed VecSum network):
    within ``2^-guard u^nc`` of the exact value (Fractions), a normalised pair, over every
    exponent, with zeros, gaps between components and non-finite leading parts (-> 0)."""
    from fractions import Fraction

    from tests.oracle import components_to_fraction

    x = data.draw(expansions(dtype, nc, shape=(64,), allow_zero=True))
    x[:3, 0] = torch.tensor([math.inf, -math.inf, math.nan]).to(dtype)
    hi, lo = el._to_float64(x)
    assert hi.dtype == lo.dtype == torch.float64
    assert bool((hi[:3] == 0).all() and (lo[:3] == 0).all())
    p = float_format(dtype)[0]
    bound = Fraction(1, 2 ** (el._GUARD_BITS + nc * p))
    exact = components_to_fraction(x[3:])
    for h, low, want in zip(hi[3:].tolist(), lo[3:].tolist(), exact):
        assert h + low == h, (h, low)  # normalised: |lo| <= ulp(hi) / 2
        assert abs(Fraction(h) + Fraction(low) - want) <= bound * abs(want), (h, low, want)
