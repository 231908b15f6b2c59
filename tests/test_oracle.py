"""Tests of the oracle itself: exact sums, error units, strategies, edge values."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import BOUNDS as CONFTEST_BOUNDS
from tests.oracle import (
    BOUNDS,
    UNIT_ROUNDOFF_BITS,
    abs_err_units,
    assert_within,
    components_to_fraction,
    components_to_mpf,
    edge_values,
    expansions,
    float_format,
    floats_of,
    rel_err_units,
    u,
    working_prec,
)

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _ulp(x: float, dtype: torch.dtype) -> Fraction:
    """ulp of a finite value of ``dtype`` (ulp(0) = smallest subnormal), exactly."""
    p, emin, _ = float_format(dtype)
    e = math.frexp(x)[1] - 1 if x != 0 else emin
    return Fraction(2) ** (max(e, emin) - p + 1)


def test_bound_table_is_shared_and_complete():
    assert CONFTEST_BOUNDS is BOUNDS
    assert BOUNDS == {"add": 8, "sub": 8, "mul": 8, "div": 8, "sqrt": 8, "transcendental": 64, "matmul": 4, "grad": 64}


@pytest.mark.parametrize("dtype, p", [(torch.float16, 11), (torch.bfloat16, 8), (torch.float32, 24), (torch.float64, 53)])
def test_unit_roundoff_matches_machine_epsilon(dtype, p):
    assert UNIT_ROUNDOFF_BITS[dtype] == p
    assert u(dtype) == mpmath.mpf(torch.finfo(dtype).eps) / 2
    assert working_prec(dtype, 3) == max(200, 3 * p + 60)


def test_float_format_of_float16():
    assert float_format(torch.float16) == (11, -14, 15)
    assert float_format(torch.float64) == (53, -1022, 1023)


def test_exact_sum_keeps_bits_beyond_float64():
    c = torch.tensor([[1.0, 2.0**-60], [2.0**1000, -(2.0**-1000)]], dtype=torch.float64)
    got = components_to_mpf(c)
    assert got.shape == (2,)
    with mpmath.workprec(3000):
        assert got[0] == 1 + mpmath.ldexp(1, -60)
        assert got[1] == mpmath.ldexp(1, 1000) - mpmath.ldexp(1, -1000)
    # the mpf keeps its bits outside the precision context (an inexact sum would not)
    assert got[0] != 1 and got[0] - 1 == mpmath.ldexp(1, -60)
    assert components_to_fraction(c)[1] == Fraction(2) ** 1000 - Fraction(2) ** -1000


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_exact_sum_of_subnormal_components(dtype):
    p, emin, _ = float_format(dtype)
    tiny = math.ldexp(1.0, emin - p + 1)
    c = torch.tensor([1.0, tiny], dtype=dtype)
    assert c[1].item() == tiny  # the dtype really holds the subnormal
    assert components_to_fraction(c)[()] == 1 + Fraction(tiny)
    assert components_to_mpf(c)[()] == _fraction_mpf(1 + Fraction(tiny))


def _fraction_mpf(x: Fraction) -> mpmath.mpf:
    with mpmath.workprec(4200):
        return mpmath.mpf(x.numerator) / x.denominator


def test_nonfinite_components():
    inf = math.inf
    c = torch.tensor([[inf, 1.0], [inf, -inf], [math.nan, 0.0], [-inf, 0.0]])
    got = components_to_mpf(c)
    assert got[0] == mpmath.inf and mpmath.isnan(got[1]) and mpmath.isnan(got[2])
    assert got[3] == -mpmath.inf
    with pytest.raises(ValueError, match="not all finite"):
        components_to_fraction(c)


def test_rel_err_units_on_known_errors():
    # float64, nc=2: u^2 = 2^-106. got = 1, exact = 1 + 3*2^-106 -> 3/(1+3*2^-106) units
    c = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0**-110]], dtype=torch.float64)
    with mpmath.workprec(400):
        exact = np.array([1 + 3 * mpmath.ldexp(1, -106), mpmath.mpf(0), mpmath.mpf(0)], dtype=object)
    errs = rel_err_units(c, exact, torch.float64, 2)
    assert errs.dtype == np.float64 and errs.shape == (3,)
    assert errs[0] == pytest.approx(3.0, rel=1e-15)
    assert errs[1] == 0.0
    assert errs[2] == 2.0**-4  # exact == 0: absolute error in units of u^2
    assert abs_err_units(c[:1], exact[:1], torch.float64, 2)[0] == pytest.approx(3.0, rel=1e-15)
    assert abs_err_units(c[:1], exact[:1], torch.float64, 2, scale=4.0)[0] == pytest.approx(0.75)


def test_rel_err_units_fp16_units_are_u_to_the_nc():
    # fp16 nc=2: u^2 = 2^-22; 1 + 2^-20 versus exact 1 is 4 units
    c = torch.tensor([1.0, 2.0**-20], dtype=torch.float16)
    assert c[1].item() == 2.0**-20
    assert rel_err_units(c, 1, torch.float16, 2)[()] == 4.0


def test_error_of_nonfinite_results():
    c = torch.tensor([[math.nan], [math.inf], [1.0], [math.inf]], dtype=torch.float32)
    errs = rel_err_units(c, [1.0, mpmath.inf, mpmath.inf, -mpmath.inf], torch.float32, 1)
    assert errs.tolist() == [math.inf, 0.0, math.inf, math.inf]


def test_assert_within_reports_worst_element():
    # 2 + 2^-100 against 2: relative error 2^-101 = 32 units of u^2 = 2^-106
    c = torch.tensor([[1.0, 0.0], [2.0, 2.0**-100]], dtype=torch.float64)
    exact = [1, 2]
    assert assert_within(c, exact, torch.float64, 2, 32) == 32.0
    assert assert_within(c[:1], exact[:1], torch.float64, 2, "add") == 0.0
    with pytest.raises(
        AssertionError,
        match=r"demo: relative error 32 u\^2 exceeds bound 8 \(add\).*"
        r"1 of 2 elements; worst at index \(1,\)",
    ):
        assert_within(c, exact, torch.float64, 2, "add", msg="demo")


def test_assert_within_checks_dtype_and_nc():
    c = torch.zeros(3, 2, dtype=torch.float32)
    with pytest.raises(TypeError, match="dtype torch.float32, but the bound is for torch.float64"):
        assert_within(c, 0, torch.float64, 2, 8)
    with pytest.raises(ValueError, match="2 components, but the bound is for nc=3"):
        assert_within(c, 0, torch.float32, 3, 8)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_edge_values_are_exact_in_dtype(dtype):
    values = edge_values(dtype)
    t = torch.tensor(values, dtype=torch.float64).to(dtype)
    assert t.dtype == dtype
    assert t.double().tolist() == values  # every value survives the round trip
    fi = torch.finfo(dtype)
    assert float(fi.max) in values and fi.tiny in values and -float(fi.max) in values
    zeros = t[t == 0]
    assert zeros.numel() == 2 and set(torch.copysign(torch.ones(2, dtype=dtype), zeros).tolist()) == {1.0, -1.0}
    p, emin, _ = float_format(dtype)
    assert math.ldexp(1.0, emin - p + 1) in values


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(data=st.data())
def test_floats_of_are_exact_and_in_exponent_range(dtype, data):
    p, emin, emax = float_format(dtype)
    lo = data.draw(st.integers(emin - p + 1, emax))
    hi = data.draw(st.integers(lo, emax))
    xs = data.draw(st.lists(floats_of(dtype, min_exp=lo, max_exp=hi, allow_zero=False), min_size=1))
    t = torch.tensor(xs, dtype=torch.float64).to(dtype)
    assert t.double().tolist() == xs
    for x in xs:
        assert x != 0 and lo <= math.frexp(x)[1] - 1 <= hi


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(data=st.data())
def test_floats_of_without_subnormals(dtype, data):
    _, emin, _ = float_format(dtype)
    x = data.draw(floats_of(dtype, allow_subnormal=False))
    assert x == 0 or abs(x) >= math.ldexp(1.0, emin)


def _check_normalised(c: torch.Tensor, dtype: torch.dtype) -> None:
    rows = c.reshape(-1, c.shape[-1]).double().tolist()
    for row in rows:
        for i in range(len(row) - 1):
            if row[i] == 0:
                assert row[i + 1] == 0, f"zero before a nonzero component in {row}"
            else:
                assert Fraction(abs(row[i + 1])) <= _ulp(row[i], dtype) / 2, f"overlap in {row}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [1, 2, 3, 4])
@given(data=st.data())
def test_expansions_are_normalised(dtype, nc, data):
    p, emin, emax = float_format(dtype)
    lo = data.draw(st.integers(emin - p + 1, emax))  # subnormal leading components too
    hi = data.draw(st.integers(lo, emax))
    c = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(4, 8)))
    assert c.dtype == dtype and c.shape == (4, 8, nc)
    assert torch.isfinite(c).all()
    lead = c[..., 0].double()
    assert (lead != 0).all()
    exps = torch.frexp(lead)[1] - 1
    assert ((exps >= lo) & (exps <= hi)).all()
    _check_normalised(c, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_expansions_reach_ties_gaps_zeros_and_underflow(dtype):
    """The generator really produces the cases it promises (over a fixed batch)."""
    p, emin, _ = float_format(dtype)
    strat = expansions(dtype, 3, min_exp=emin, max_exp=emin + 2 * p, shape=(4096,), allow_zero=True)
    c = _draw_fixed(strat)
    _check_normalised(c, dtype)
    rows = c.double().tolist()
    ties = sum(1 for r in rows if r[0] != 0 and r[1] != 0 and Fraction(abs(r[1])) == _ulp(r[0], dtype) / 2)
    gaps = sum(1 for r in rows if r[1] != 0 and Fraction(abs(r[1])) < _ulp(r[0], dtype) / 2 ** (p + 2))
    tail_zero = sum(1 for r in rows if r[0] != 0 and r[1] == 0)
    all_zero = sum(1 for r in rows if r[0] == 0)
    subnormal = sum(1 for r in rows for x in r[1:] if 0 < abs(x) < math.ldexp(1.0, emin))
    assert min(ties, gaps, tail_zero, all_zero, subnormal) > 0, (ties, gaps, tail_zero, all_zero, subnormal)


def _draw_fixed(strategy):
    """One value of a strategy, drawn inside a minimal @given run."""
    out = []

    @given(strategy)
    def grab(v):
        out.append(v)

    grab()
    return out[-1]


def test_rng_fixture_is_seeded_with_seed_fixture(rng, seed):
    assert seed == 0
    assert torch.equal(torch.rand(4, generator=rng), torch.rand(4, generator=torch.Generator().manual_seed(0)))


@pytest.mark.cuda
def test_cuda_marker_runs_only_with_a_device():
    assert torch.cuda.is_available()  # the conftest hook skips this test on CPU-only machines
