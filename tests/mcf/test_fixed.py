"""Tests of the fixed nc = 3, 4 networks of :mod:`hypermc.mcf.fixed` and their dispatch.

The op-level accuracy of add/sub/mul/div/sqrt (which now run on these networks for
float32/float64 nc = 3, 4) is proven by ``tests/mcf/test_arith.py`` against the bound
table. Here the networks are checked *by themselves*, without the fallback:

* the renormalisation is exact but for its last rounding, and the fast-path check
  (:func:`fixed.normalised`) only accepts strictly normalised expansions;
* on the elements the check accepts, the fast add and mul meet the tighter bounds stated
  in the module docstring (2.1 resp. 1.1 ``u^nc``), against ``fractions.Fraction``, also
  under cancellation and at huge/tiny exponents;
* the elements the check rejects (exact cancellation, ±0, subnormal results, inf/NaN,
  overflow, half-ulp ties) get exactly what the general kernels give, also when mixed
  with regular elements and with broadcast operands.
"""

from __future__ import annotations

import math
import unittest.mock
from fractions import Fraction

import mpmath
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from hypermc.mcf import arith, fixed
from tests.mcf.test_arith import (
    _cap,
    _lowest,
    _to_expansion,
    bulk_rel_err_units,
    operand_range,
    random_expansions,
)
from tests.mcf.test_eft import assert_normalised
from tests.oracle import (
    assert_within,
    components_to_fraction,
    components_to_mpf,
    edge_values,
    expansions,
    float_format,
    working_prec,
)

DTYPES = [torch.float32, torch.float64]
NCS = [3, 4]
# bounds of the fast paths alone (module docstring of hypermc.mcf.fixed), units of u^nc
FAST_ADD_BOUND = 2.1
FAST_MUL_BOUND = 1.1


def _fast_add(x, y):
    xs, ys = x.unbind(-1), y.unbind(-1)
    nc = x.shape[-1]
    out = fixed.renorm_levels(fixed.add_levels(list(xs), list(ys), nc), nc)
    return out, fixed.normalised(out, torch.maximum(xs[0].abs(), ys[0].abs()))


def _fast_mul(x, y):
    nc = x.shape[-1]
    out = fixed.renorm_levels(arith._product_levels(list(x.unbind(-1)), list(y.unbind(-1)), nc), nc)
    return out, fixed.normalised(out)


# ====================================================================== renormalisation


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_renorm_levels_is_exact_but_the_last_rounding(dtype, nc, rng):
    """sum(out) - sum(levels) is exactly the rounding of the last component (<= half an
    ulp of it), for levels of products and of sums, whether or not the check passes."""
    lo, hi = operand_range("mul", dtype, nc)
    x = random_expansions(2000, dtype, nc, lo, hi, rng)
    y = random_expansions(2000, dtype, nc, lo, hi, rng)
    for levels in (
        arith._product_levels(list(x.unbind(-1)), list(y.unbind(-1)), nc),
        fixed.add_levels(list(x.unbind(-1)), list(y.unbind(-1)), nc),
    ):
        out = fixed.renorm_levels(levels, nc)
        got = components_to_fraction(out)
        want = components_to_fraction(torch.stack(levels, -1))
        last = out[..., -1].double().abs()
        ulp_last = torch.where(
            last > 0, torch.ldexp(torch.ones_like(last), torch.frexp(last).exponent - float_format(dtype)[0]), torch.zeros_like(last)
        )
        for g, w, q in zip(got.tolist(), want.tolist(), ulp_last.tolist()):
            # the exact rest at the last component is within half an ulp of it
            assert abs(g - w) <= Fraction(q) / 2, (g, w, q)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_check_accepts_only_normalised_expansions(dtype, nc, rng):
    """Every element the check accepts is strictly normalised (|c[k+1]| <= ulp(c[k])/2,
    no zero before a non-zero); ties, zero gaps, zeros and NaN/inf are rejected."""
    lo, hi = operand_range("mul", dtype, nc)
    x = random_expansions(5000, dtype, nc, lo, hi, rng)
    y = random_expansions(5000, dtype, nc, lo, hi, rng)
    out, ok = _fast_mul(x, y)
    assert bool(ok.float().mean() > 0.99)  # the fast path is the common case
    assert_normalised(out[ok], "accepted by the check")
    p = float_format(dtype)[0]
    half_ulp = math.ldexp(1.0, -p)  # half an ulp of 1
    bad = torch.tensor(
        [
            [1.0, 3 * half_ulp] + [0.0] * (nc - 2),  # overlapping
            [1.0 + 2 * half_ulp, half_ulp] + [0.0] * (nc - 2),  # a tie that rounds away from c0
            [1.0, 0.0, half_ulp * half_ulp] + [0.0] * (nc - 3),  # a zero gap
            [0.0] * nc,  # a zero value (the general kernels own the sign of zero)
            [-0.0] * nc,
            [math.inf] + [0.0] * (nc - 1),
            [math.nan] + [0.0] * (nc - 1),
            [1.0, math.nan] + [0.0] * (nc - 2),
        ],
        dtype=torch.float64,
    ).to(dtype)
    assert not bool(fixed.normalised(bad).any())
    good = torch.tensor([[1.0, half_ulp] + [0.0] * (nc - 2)], dtype=torch.float64).to(dtype)
    assert bool(fixed.normalised(good).all())  # 1 + u ties to the even 1


# ================================================================== the fast paths alone


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_fast_path_bulk_bound(op, dtype, nc, rng):
    """Bulk random operands (wide exponent ranges, ties, short tails): where the check
    accepts, the fast network alone is within its documented bound."""
    lo, hi = operand_range(op, dtype, nc)
    x = random_expansions(20_000, dtype, nc, lo, hi, rng)
    y = random_expansions(20_000, dtype, nc, lo, hi, rng)
    out, ok = (_fast_add if op == "add" else _fast_mul)(x, y)
    assert bool(ok.float().mean() > 0.9)
    units = bulk_rel_err_units(op, x[ok], y[ok], out[ok], dtype, nc)
    bound = FAST_ADD_BOUND if op == "add" else FAST_MUL_BOUND
    assert float(units.max()) <= bound, f"{float(units.max()):.3g} u^{nc}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(20)
@given(data=st.data())
def test_fast_add_under_cancellation(dtype, nc, data):
    """x + (-x + t) for t from 2^-1 to 2^-(nc+2)p relative: the check rejects what the
    network cannot do (cancellation by more than 64 u), and what it accepts is within
    2.1 u^nc of the exact (small) sum; the dispatched add is within the table bound."""
    p, _, emax = float_format(dtype)
    low = _lowest(dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=low + 3 * p + 8, max_exp=emax - 3, shape=(16,)))
    xf = components_to_fraction(x).tolist()
    tinies = []
    for v in xf:
        e = math.floor(math.log2(abs(v)))
        k = data.draw(st.integers(1, (nc + 2) * p))
        mant = data.draw(st.integers(1, 2**p - 1))
        sign = data.draw(st.sampled_from([1, -1]))
        tinies.append(Fraction(mant, 2**p) * Fraction(2) ** max(e - k, low + 2) * sign)
    y = _to_expansion([-v + t for v, t in zip(xf, tinies)], dtype, nc)
    exact = components_to_fraction(x) + components_to_fraction(y)
    out, ok = _fast_add(x, y)
    if bool(ok.any()):
        assert_within(out[ok], exact[ok.numpy()], dtype, nc, FAST_ADD_BOUND, msg="fast add")
    z = arith.add(x, y)
    assert_within(z, exact, dtype, nc, "add", msg="dispatched add")
    assert_normalised(z, "dispatched add")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(20)
@given(data=st.data())
def test_fast_paths_at_huge_and_tiny_exponents(dtype, nc, data):
    """Products and sums at both ends of the exponent range where all components are
    normal, against Fractions; dispatched ops within the table bound."""
    lo, hi = operand_range("mul", dtype, nc)
    end = data.draw(st.sampled_from([(lo, lo + 4), (hi - 4, hi)]))
    x = data.draw(expansions(dtype, nc, min_exp=end[0], max_exp=end[1], shape=(32,)))
    y = data.draw(expansions(dtype, nc, min_exp=-2, max_exp=2, shape=(32,)))
    fx, fy = components_to_fraction(x), components_to_fraction(y)
    out, ok = _fast_mul(x, y)
    if bool(ok.any()):
        assert_within(out[ok], (fx * fy)[ok.numpy()], dtype, nc, FAST_MUL_BOUND, msg="fast mul")
    assert_within(arith.mul(x, y), fx * fy, dtype, nc, "mul", msg="mul")
    assert_within(arith.div(x, y), fx / fy, dtype, nc, "div", msg="div")
    lo_a, hi_a = operand_range("add", dtype, nc)
    end = data.draw(st.sampled_from([(lo_a, lo_a + 4), (hi_a - 4, hi_a)]))
    a = data.draw(expansions(dtype, nc, min_exp=end[0], max_exp=end[1], shape=(32,)))
    b = data.draw(expansions(dtype, nc, min_exp=end[0], max_exp=end[1], shape=(32,)))
    assert_within(arith.add(a, b), components_to_fraction(a) + components_to_fraction(b), dtype, nc, "add", msg="add")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(20)
@given(data=st.data())
def test_remainder_steps_leading_sum_is_exact(dtype, nc, data):
    """The division and square-root remainders add ``r_0 - fl(q y_0)`` without a TwoSum
    (``add_levels(exact_first=True)``, Sterbenz's lemma): with the TwoSum put back, the
    torch networks give the same values (its error term is exactly zero; only the sign of
    a zero may differ), over the whole operand range, at the subnormal end included."""
    lo, hi = operand_range("div", dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(64,)))
    y = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(64,)))
    s_lo, s_hi = operand_range("sqrt", dtype, nc)
    r = data.draw(expansions(dtype, nc, min_exp=s_lo, max_exp=s_hi, shape=(64,))).abs()  # still normalised

    def nets():
        return arith._long_division(x, y, nc, use_native=False), arith._sqrt_fixed(r, nc)

    got = nets()
    real = fixed.add_levels
    with unittest.mock.patch.object(fixed, "add_levels", lambda xs, ys, n, exact_first=False: real(xs, ys, n)):
        want = nets()
    for g, w in zip(got, want):
        same = (g == w) | (torch.isnan(g) & torch.isnan(w))
        assert bool(same.all()), (g[~same.all(-1)][:3], w[~same.all(-1)][:3])


# ============================================================ rejected elements and dispatch


def _specials(dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Pinned operands: the edge values of the dtype (±0, subnormals, tiny/huge normals,
    max), ±inf and NaN, each as an expansion with a zero tail."""
    vals = edge_values(dtype) + [math.inf, -math.inf, math.nan]
    return torch.tensor([[v] + [0.0] * (nc - 1) for v in vals], dtype=torch.float64).to(dtype)


def _div_without_fixed(a, b, monkeypatch):
    """``arith.div`` with the fixed networks switched off: the same operand scaling
    (:func:`arith._long_division`), then the general long division."""
    with monkeypatch.context() as m:
        m.setattr(arith.fixed, "applies", lambda *args: False)
        return arith.div(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_rejected_elements_match_the_general_kernels(op, dtype, nc, rng, monkeypatch):
    """All pairs of pinned special operands, mixed into a batch of regular elements, one
    operand broadcast: every element equals the general kernel's result bitwise (special
    ones: inf/NaN propagate with a zero tail, overflow, zeros, subnormal results) and
    regular ones are those of the fast network."""
    s = _specials(dtype, nc)
    m = s.shape[0]
    lo, hi = operand_range("mul", dtype, nc)
    reg = random_expansions(64, dtype, nc, lo, hi, rng)
    x = torch.cat([s.repeat_interleave(m, 0), reg])
    y = torch.cat([s.repeat(m, 1), random_expansions(64, dtype, nc, lo, hi, rng)])
    general = {
        "add": lambda a, b: arith._add_general(a, b, False),
        "sub": lambda a, b: arith._add_general(a, b, True),
        "mul": arith._mul_general,
        "div": lambda a, b: _div_without_fixed(a, b, monkeypatch),
    }[op]
    got = getattr(arith, op)(x, y)
    want = general(x, y)
    special = slice(0, m * m)
    torch.testing.assert_close(got[special], want[special], rtol=0, atol=0, equal_nan=True)
    finite = torch.isfinite(got[..., 0])
    assert bool((got[~finite][..., 1:] == 0).all()), "non-finite results have a zero tail"
    # broadcast: one row against the batch gives the rows of the full computation
    row = reg[3:4]
    torch.testing.assert_close(getattr(arith, op)(row, y), getattr(arith, op)(row.expand_as(y), y), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@given(v=st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.25, 3.0, math.inf, math.nan, -1.0, 1e-30]))
@example(v=0.0)
@example(v=math.inf)
@example(v=-1.0)
def test_sqrt_special_elements(dtype, nc, v):
    """sqrt of a batch of regular values with one pinned special element (±0, inf, NaN,
    negative, tiny): the regular elements are the fast network's, the special one the
    plain sqrt of its leading component with a zero tail (or the general kernel's)."""
    gen = torch.Generator().manual_seed(1)
    x = random_expansions(32, dtype, nc, -8, 8, gen)
    x = torch.where(x[..., :1] < 0, -x, x)  # positive values (the whole expansion negated)
    x[5] = torch.tensor([v] + [0.0] * (nc - 1), dtype=dtype)
    got = arith.sqrt(x)
    if v > 0 and math.isfinite(v):  # a regular element: rescaled onto the networks if out of range
        torch.testing.assert_close(got[5], arith._sqrt_rescaled(x[5:6], nc)[0], rtol=0, atol=0)
        keep = list(range(32))
    else:
        torch.testing.assert_close(got[5], arith._sqrt_general(x, nc)[5], rtol=0, atol=0, equal_nan=True)
        keep = [i for i in range(32) if i != 5]
    with mpmath.workprec(working_prec(dtype, nc)):
        ref = [mpmath.sqrt(v) for v in components_to_mpf(x[keep]).tolist()]
    assert_within(got[keep], ref, dtype, nc, "sqrt", msg="sqrt regular elements")
    assert_normalised(got[keep], "sqrt")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_sqrt_rescales_leads_outside_the_range_onto_the_networks(dtype, nc, monkeypatch):
    """Leading components over the whole normal range (float32 ``nc = 4``'s range is
    ``[0.25, 2^124]``): the elements whose scalings by ``4^-k`` and ``2^k`` are exact take
    the fixed networks (the general kernel sees only the others), are within the fast
    bound of mpmath and normalised, and those already in range keep the unscaled bits.
    Huge leads with tails that the scaling would push below the normal range, and tiny
    values whose result tails are subnormal, take the general kernel."""
    p, emin, emax = float_format(dtype)
    gen = torch.Generator().manual_seed(3)
    lo, hi = arith._sqrt_range(dtype, nc)
    bottom, lo_e, hi_e = emin + (nc - 1) * (p + 1), math.frexp(lo)[1], math.frexp(hi)[1] - 2
    spans = [(200, bottom, lo_e), (100, hi_e, emax - 1), (100, bottom, emax - 1)]
    x = torch.cat([random_expansions(n, dtype, nc, a, b, gen) for n, a, b in spans])
    x = torch.where(x[..., :1] < 0, -x, x)
    fi = torch.finfo(dtype)
    huge = torch.zeros(2, nc, dtype=dtype)
    huge[:, 0] = fi.max / 4
    huge[0, 1] = fi.tiny  # non-overlapping, but 4^-k pushes it below the normal range
    huge[1, 1] = fi.max / 4 * 2.0 ** (-3 * p)  # stays normal: exact
    tiny = torch.zeros(1, nc, dtype=dtype)
    tiny[0, 0] = 3 * fi.tiny * 64  # its square root's last component is subnormal in float32 nc = 4 only
    subnormal_tail = math.sqrt(3 * fi.tiny * 64) * 2.0 ** (-(nc - 1) * p) < fi.tiny
    assert subnormal_tail == (dtype == torch.float32 and nc == 4)
    x = torch.cat([x, huge, tiny])
    seen = []
    general = arith._sqrt_general
    monkeypatch.setattr(arith, "_sqrt_general", lambda a, n: seen.append(a.clone()) or general(a, n))
    got = arith.sqrt(x)
    inexact = torch.cat(seen) if seen else x[:0]
    assert any(torch.equal(r, huge[0]) for r in inexact) and not any(torch.equal(r, huge[1]) for r in inexact)
    assert any(torch.equal(r, tiny[0]) for r in inexact) == subnormal_tail
    assert len(inexact) <= 2 + int((x[:, -1] != 0).sum() // 20), f"{len(inexact)} of {len(x)} elements took the general kernel"
    regular = torch.tensor([not any(torch.equal(r, row) for r in inexact) for row in x])
    inside = (x[:, 0] >= lo) & (x[:, 0] <= hi)
    assert (regular & ~inside).sum() >= 250  # the test exercises the rescaling
    torch.testing.assert_close(got[inside], arith._sqrt_fixed(x[inside], nc), rtol=0, atol=0)
    with mpmath.workprec(working_prec(dtype, nc)):
        ref = [mpmath.sqrt(v) for v in components_to_mpf(x[regular]).tolist()]
    assert_within(got[regular], ref, dtype, nc, FAST_MUL_BOUND, msg="rescaled sqrt")
    assert_normalised(got[regular], "rescaled sqrt")
    with mpmath.workprec(working_prec(dtype, nc)):
        ref = [mpmath.sqrt(v) for v in components_to_mpf(x[~regular]).tolist()]
    n = len(ref) - int(subnormal_tail)  # the tiny one is last: its tail cannot hold nc p bits
    assert_within(got[~regular][:n], ref[:n], dtype, nc, "sqrt", msg="general sqrt")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_dtypes_keep_the_general_kernels(dtype):
    """float16/bfloat16 nc = 3, 4 are not dispatched to the fixed networks (their exponent
    range is too short for the tails); say so in a test that fails if that changes."""
    assert not fixed.applies(dtype, 3) and not fixed.applies(dtype, 4)
    assert fixed.applies(torch.float64, 3) and not fixed.applies(torch.float64, 2)


# The general kernels' merge network is an lru_cache'd function of eft.py; Dynamo warns
# that it traces through the cache, which does not change the values checked here.
@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "sub"])
def test_traced_dispatch_is_graph_break_free_and_exact(op, nc, rng):
    """Traced (``torch.compile(..., fullgraph=True)``, the ``aot_eager`` backend, which
    runs the traced aten ops as they are): the check-and-patch becomes one ``where`` over
    the general kernel, no graph break, and the values equal eager mode's bitwise, with
    special elements mixed in. (mul/div/sqrt need an FMA for their fixed path; while
    tracing :func:`hypermc.mcf.eft.has_fused_addcmul` is False, so traces take the
    general Dekker-product kernels and never reach :func:`fixed.patch`.)"""
    dtype = torch.float64
    lo, hi = operand_range("mul", dtype, nc)
    s = _specials(dtype, nc)
    x = torch.cat([random_expansions(40, dtype, nc, lo, hi, rng), s])
    y = torch.cat([random_expansions(40, dtype, nc, lo, hi, rng), s.flip(0)])
    fn = getattr(arith, op)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    got = compiled(x, y)
    want = fn(x, y)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
