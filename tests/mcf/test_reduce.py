"""Tests of ``hypermc.mcf.reduce``: sum, mean, dot, sumsq, norm, amax, amin.

Oracles: exact ``fractions.Fraction`` sums (sum, dot) and mpmath (mean, norm) through
``tests/oracle.py``. Errors are measured in units of ``u**nc``.

Bounds (the kernels' docstrings state the same; ``h = ceil(log2 n)``, ``S`` the exact
result, ``A = sum |x_i|`` or ``sum |x_i y_i|``)::

    sum:  |got - S| <= u^nc |S| + (nc+1)! (u (h+1))^(nc+1) A      (tested with 2 u^nc |S|)
    dot:  same with h + 3 in place of h + 1
    mean: sum bound / n + 8 u^nc |S / n|                          (tested <= 10 u^nc)
    norm: relative <= 8 u^nc + (u^nc + tail) / 2                  (tested <= 9 u^nc)

They are not in the shared ``BOUNDS`` table because they are not a single number of
units: the constant in front of ``u^nc A`` is ``1 + (nc+1)! (h+1)^(nc+1) u``, i.e. at most
2 for float64 and for float32 with nc <= 2 (``SUM_ABS_UNITS`` below). The shared table is
pinned by ``tests/test_oracle.py``; adding "sum"/"dot" entries there is left to its owner.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hypermc.mcf import arith, eft, reduce
from tests.oracle import (
    UNIT_ROUNDOFF_BITS,
    abs_err_units,
    assert_within,
    components_to_fraction,
    components_to_mpf,
    expansions,
    float_format,
    rel_err_units,
    working_prec,
)

DTYPES = [torch.float32, torch.float64]
NCS = [1, 2, 3, 4]
SIZES = [1, 2, 3, 1000, 4097]

#: |got - S| / (u^nc sum|x_i|): proven for float64 and float32 nc <= 2 (n <= 2^30); for
#: float32 nc >= 3 and the half formats (n <= 4097) it is the measured constant (<= 1).
SUM_ABS_UNITS = 2
#: relative error bound of the recovered remainder in the cancellation tests.
CANCEL_REL_UNITS = 8
#: norm: 8 (sqrt) + half the relative error of the sum of squares (<= 1 here).
NORM_REL_UNITS = 9
#: mean of data without cancellation: 1 (sum rounding) + tail (<= 1 here) + 8 (division).
MEAN_REL_UNITS = 10


# ---------------------------------------------------------------------------- helpers


def _levels(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


def _tail_units(n: int, dtype: torch.dtype, nc: int, extra_levels: int = 1) -> float:
    """The second bound term ``(nc+1)! (u (h+extra))^(nc+1)`` in units of ``u^nc``."""
    u = 2.0 ** -UNIT_ROUNDOFF_BITS[dtype]
    return math.factorial(nc + 1) * (_levels(n) + extra_levels) ** (nc + 1) * u


def random_mc(shape, dtype, nc, gen, lo=-8, hi=8) -> torch.Tensor:
    """Normalised random expansions ``(*shape, nc)``: leading exponent in [lo, hi], random signs.

    Built without hypermc: component k+1 is uniform in ``(-ulp(c_k)/2, ulp(c_k)/2)``.
    """
    p = UNIT_ROUNDOFF_BITS[dtype]
    e = torch.randint(lo, hi + 1, shape, generator=gen).double()
    c = ((2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) * torch.exp2(e)).to(dtype)
    comps = [c]
    for _ in range(1, nc):
        prev = comps[-1].double()
        ulp = torch.exp2((torch.frexp(prev)[1] - p).double())
        nxt = (torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5) * ulp
        comps.append(torch.where(prev == 0, 0.0, nxt).to(dtype))
    return torch.stack(comps, dim=-1)


def exact_sum(x: torch.Tensor, dims=None, keepdim=False):
    """Exact Fraction sums over logical dims, and the sums of magnitudes."""
    f = components_to_fraction(x)
    axis = tuple(range(f.ndim)) if dims is None else dims
    s = np.sum(f, axis=axis, keepdims=keepdim)
    a = np.sum(np.abs(f), axis=axis, keepdims=keepdim)
    return np.asarray(s, dtype=object), np.asarray(a, dtype=object)


def check_sum_bound(got, exact, mag, dtype, nc, n, extra_levels=1, msg=""):
    """``|got - S| <= 2 u^nc |S| + tail * u^nc * A`` elementwise; returns worst error / (u^nc A)."""
    assert got.dtype == dtype and got.shape[-1] == nc
    scale = np.where(np.vectorize(lambda a: a == 0)(mag), 1, mag)
    err = abs_err_units(got, exact, dtype, nc, scale=scale)
    ratio = np.vectorize(lambda s, a: float(abs(s) / a) if a else 0.0)(exact, mag)
    bound = 2 * ratio + _tail_units(n, dtype, nc, extra_levels)
    assert np.all(err <= bound), f"{msg}: error {err.max()} u^nc A exceeds {bound.max()}"
    return float(err.max()) if err.size else 0.0


# ------------------------------------------------------------------------------- sum


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("n", SIZES)
def test_sum_bound(dtype, nc, n, rng):
    x = random_mc((n,), dtype, nc, rng)
    got = reduce.sum(x)
    s, a = exact_sum(x)
    assert got.shape == (nc,) and got.dtype == dtype
    worst = check_sum_bound(got, s, a, dtype, nc, n, msg=f"n={n}")
    # proven for float64 and float32 nc <= 2; the measured constant for float32 nc >= 3
    assert worst <= SUM_ABS_UNITS


@pytest.mark.parametrize(
    "dtype, nc",
    [(torch.float16, 1), (torch.float16, 2), (torch.bfloat16, 1), (torch.bfloat16, 2), (torch.bfloat16, 3), (torch.bfloat16, 4)],
    ids=str,
)
@pytest.mark.parametrize("n", SIZES)
def test_sum_bound_half_formats(dtype, nc, n, rng):
    """Half formats: the proven tail term is loose (u h is not small), the measured one is not."""
    x = random_mc((2, n), dtype, nc, rng, lo=-3, hi=1)
    got = reduce.sum(x, -1)
    s, a = exact_sum(x, (1,))
    worst = check_sum_bound(got, s, a, dtype, nc, n, msg=f"n={n}")
    assert worst <= SUM_ABS_UNITS


@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2), (2, 0), (-1, -3), None, ()])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("nc", [1, 2, 3])
def test_sum_dims_and_keepdim(dim, keepdim, nc, rng):
    dtype = torch.float64
    x = random_mc((5, 4, 7), dtype, nc, rng)
    got = reduce.sum(x, dim, keepdim)
    ref_dims = None if dim in (None, ()) else dim
    expect_shape = torch.zeros(5, 4, 7).sum(dim=ref_dims, keepdim=keepdim).shape
    assert got.shape == (*expect_shape, nc)
    axes = None if ref_dims is None else tuple(d % 3 for d in np.atleast_1d(ref_dims))
    s, a = exact_sum(x, axes, keepdim)
    check_sum_bound(got, s, a, dtype, nc, 35)


def test_sum_of_non_contiguous_and_interleaved_inputs(rng):
    x = random_mc((6, 9), torch.float64, 2, rng)
    planar = eft.pack(eft.unpack(x))  # (*shape, nc) view of a planar buffer
    for t in (x, planar, x.transpose(0, 1), x[::2]):
        s, a = exact_sum(t, (0,))
        check_sum_bound(reduce.sum(t, 0), s, a, torch.float64, 2, t.shape[0])


def test_sum_of_logical_scalar_and_empty():
    x = torch.tensor([3.0, 2.0**-60], dtype=torch.float64)
    assert torch.equal(reduce.sum(x), x)
    empty = torch.zeros(0, 3, 2)
    assert torch.equal(reduce.sum(empty, 0), torch.zeros(3, 2))
    assert torch.equal(reduce.sum(empty), torch.zeros(2))
    assert reduce.sum(empty, 1).shape == (0, 2)
    assert torch.isnan(reduce.mean(empty, 0)[..., 0]).all()


@pytest.mark.parametrize(
    "dtype, nc, values, expect",
    [
        (torch.float64, 2, [1e20, 1.0, -1e20], Fraction(1)),
        (torch.float64, 2, [1.0, 1e100, 1.0, -1e100], Fraction(2)),
        (torch.float32, 2, [2.0**40, 1.0, -(2.0**40)], Fraction(1)),
        (torch.float64, 3, [2.0**200, 2.0**-200, -(2.0**200), 1.0], 1 + Fraction(2) ** -200),
        (torch.float64, 4, [1e300, 1e-300, -1e300, 1.0, -1.0], Fraction(1e-300)),
    ],
)
def test_sum_recovers_remainder_exactly(dtype, nc, values, expect):
    x = arith.from_float(torch.tensor(values, dtype=dtype), nc)
    got = reduce.sum(x)
    assert got.dtype == dtype
    assert components_to_fraction(got)[()] == expect


def test_sum_plain_float_cancellation_is_exact_too():
    # nc = 1 is a compensated sum: the remainder survives where torch.sum loses it
    x = torch.tensor([1e20, 1.0, -1e20], dtype=torch.float64)
    assert reduce.sum(x.unsqueeze(-1)).item() == 1.0


def _cancelling(dtype, nc, n, rel, gen):
    """``v``, ``-v`` and a remainder of size ``rel * max|v|``, shuffled; returns x and cond."""
    v = random_mc((n,), dtype, nc, gen, lo=-4, hi=4)
    r = random_mc((1,), dtype, nc, gen, lo=0, hi=0) * rel
    x = torch.cat([v, -v, r])[torch.randperm(2 * n + 1, generator=gen)]
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_sum_with_cancellation_is_relatively_accurate(dtype, nc, rng):
    """x and -x with a small remainder: the remainder comes back to <= 8 u^nc relative.

    The remainder's size is chosen so that the condition number A/|S| is as large as
    the bound allows for a relative error of 8 u^nc (up to 1e12 in float64).
    """
    n = 2048
    tail = _tail_units(2 * n + 1, dtype, nc)
    cond = min(1e12, (CANCEL_REL_UNITS - 2) / tail)
    x = _cancelling(dtype, nc, n, 2.0 ** -math.floor(math.log2(cond / (2 * n))), rng)
    got = reduce.sum(x)
    s, a = exact_sum(x)
    assert s[()] != 0 and a[()] / abs(s[()]) > min(cond, 1e12) / 16
    assert_within(got, s[()], dtype, nc, CANCEL_REL_UNITS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_sum_with_extreme_cancellation_keeps_absolute_bound(dtype, nc, rng):
    x = _cancelling(dtype, nc, 1024, 2.0**-60, rng)
    s, a = exact_sum(x)
    check_sum_bound(reduce.sum(x), s, a, dtype, nc, x.shape[0])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sum_nc1_at_least_as_accurate_as_torch(dtype, rng):
    rows = 24
    x = random_mc((rows, 1000), dtype, 1, rng, lo=-6, hi=6)
    x = torch.cat([x, -x[:, :500] * (1 + 2.0**-10)], dim=1)  # some cancellation
    ours = reduce.sum(x, 1)
    theirs = torch.sum(x[..., 0], 1).unsqueeze(-1)
    s, a = exact_sum(x, (1,))
    err_ours = rel_err_units(ours, s, dtype, 1)
    err_torch = rel_err_units(theirs, s, dtype, 1)
    assert err_ours.max() <= err_torch.max()
    assert err_ours.sum() <= err_torch.sum()
    check_sum_bound(ours, s, a, dtype, 1, x.shape[1])


@settings(deadline=None)
@given(data=st.data())
@example(data=None)
def test_sum_property_expansions(data):
    """Expansions from the oracle's strategy (all exponents of a safe range, ties, gaps)."""
    if data is None:  # pinned: alternating huge and tiny values in float64
        dtype, nc = torch.float64, 2
        x = torch.tensor([[2.0**500, 2.0**440], [-(2.0**500), 2.0**-600], [2.0**-500, 0.0]] * 5, dtype=dtype)
    else:
        dtype = data.draw(st.sampled_from(DTYPES))
        nc = data.draw(st.sampled_from(NCS))
        p, emin, emax = float_format(dtype)
        lo = emin + nc * p + 8
        hi = emax - 10
        a = data.draw(st.integers(lo, hi))
        b = data.draw(st.integers(a, min(hi, a + data.draw(st.sampled_from([4, 30, 2 * p, 300])))))
        n = data.draw(st.sampled_from([1, 5, 64]))
        x = data.draw(expansions(dtype, nc, min_exp=a, max_exp=b, shape=(n,), allow_zero=True))
    got = reduce.sum(x)
    s, mag = exact_sum(x)
    check_sum_bound(got, s, mag, dtype, nc, x.shape[0])


@pytest.mark.parametrize("nc", [1, 2, 3])
def test_sum_nonfinite(nc):
    inf, nan = math.inf, math.nan
    rows = [[1.0, inf, 2.0], [inf, -inf, 0.0], [1.0, nan, 3.0], [-inf, 1.0, 1.0], [1e308, 1e308, 0.0]]
    x = arith.from_float(torch.tensor(rows, dtype=torch.float64), nc)
    got = reduce.sum(x, 1)
    lead = got[..., 0]
    assert lead[0] == inf and torch.isnan(lead[1]) and torch.isnan(lead[2]) and lead[3] == -inf
    assert lead[4] == inf  # overflow of a partial sum, like plain summation
    assert (got[..., 1:] == 0).all()


def test_inputs_are_not_modified(rng):
    x = random_mc((3, 101), torch.float64, 2, rng)
    y = random_mc((3, 101), torch.float64, 2, rng)
    x0, y0 = x.clone(), y.clone()
    reduce.sum(x, 1), reduce.dot(x, y), reduce.norm(x), reduce.mean(x), reduce.amax(x, 0)
    reduce.sum(x[:, :1], 1)  # a single element: the root slots are views of x
    assert torch.equal(x, x0) and torch.equal(y, y0)


def test_two_sum_helper_is_bitwise_eft_two_sum(rng):
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        a = (torch.randn(4096, generator=rng, dtype=torch.float64) * 1e3).to(dtype)
        b = (torch.randn(4096, generator=rng, dtype=torch.float64) * 1e-3).to(dtype)
        for got, ref in zip(reduce._two_sum(a, b), eft.two_sum(a, b)):
            assert torch.equal(got.view(torch.int8), ref.view(torch.int8))


# ------------------------------------------------------------------------------ mean


def _mean_check(x, dims, dtype, nc, keepdim=False):
    got = reduce.mean(x, dims, keepdim)
    fr = components_to_fraction(x)
    axis = tuple(range(fr.ndim)) if dims is None else dims
    count = math.prod(fr.shape[d] for d in np.atleast_1d(axis)) if axis != () else fr.size
    s = np.sum(fr, axis=axis, keepdims=keepdim)
    exact = np.vectorize(lambda v: v / count, otypes=[object])(s)
    with mpmath.workprec(working_prec(dtype, nc)):
        exact_mpf = np.vectorize(lambda v: mpmath.mpf(v.numerator) / v.denominator, otypes=[object])(exact)
    assert got.dtype == dtype
    return assert_within(got, exact_mpf, dtype, nc, MEAN_REL_UNITS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_mean(dtype, nc, rng):
    x = arith.abs(random_mc((3, 1001), dtype, nc, rng))  # no cancellation: relative bound
    _mean_check(x, (1,), dtype, nc)
    _mean_check(x, None, dtype, nc)
    assert reduce.mean(x, 0, keepdim=True).shape == (1, 1001, nc)


@pytest.mark.parametrize(
    "dtype, nc, n", [(torch.float16, 2, 5000), (torch.float16, 2, 40000), (torch.bfloat16, 2, 1001), (torch.bfloat16, 3, 3001)]
)
def test_mean_count_not_exact_in_dtype(dtype, nc, n, rng):
    """Counts beyond 2^p (and beyond the float16 range) are split into components."""
    x = arith.abs(random_mc((n,), dtype, nc, rng, lo=-2, hi=-1))
    _mean_check(x, None, dtype, nc)


def test_mean_nc1_is_plain_sum_over_count(rng):
    x = random_mc((7, 100), torch.float32, 1, rng)
    got = reduce.mean(x, 1)
    assert torch.equal(got, reduce.sum(x, 1) / 100)


# ------------------------------------------------------------------------------- dot


def _exact_dot(x, y):
    fx, fy = components_to_fraction(x), components_to_fraction(y)
    prod = fx * fy
    return (np.asarray(np.sum(prod, axis=-1), dtype=object), np.asarray(np.sum(np.abs(prod), axis=-1), dtype=object))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("n", SIZES)
def test_dot_bound(dtype, nc, n, rng):
    x = random_mc((n,), dtype, nc, rng, lo=-4, hi=4)
    y = random_mc((n,), dtype, nc, rng, lo=-4, hi=4)
    got = reduce.dot(x, y)
    s, a = _exact_dot(x, y)
    assert got.shape == (nc,)
    worst = check_sum_bound(got, s, a, dtype, nc, n, extra_levels=3)
    if dtype == torch.float64 or nc <= 2:
        assert worst <= SUM_ABS_UNITS


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_dot_with_cancellation(dtype, nc, rng):
    """x . y where the products cancel pairwise up to a small remainder r.

    r is as small as the bound allows for a relative error of 8 u^nc (condition number
    sum|x_i y_i| / |r| up to 1e12).
    """
    n = 512
    x = random_mc((n,), dtype, nc, rng, lo=-2, hi=2)
    y = random_mc((n,), dtype, nc, rng, lo=-2, hi=2)
    mag = 2 * float((x[..., 0].double() * y[..., 0].double()).abs().sum())
    cond = min(1e12, (CANCEL_REL_UNITS - 2) / _tail_units(2 * n + 1, dtype, nc, extra_levels=3))
    r = 2.0 ** math.ceil(math.log2(mag / cond))
    xx = torch.cat([x, x, arith.from_float(torch.ones(1, dtype=dtype), nc)])
    yy = torch.cat([y, -y, arith.from_float(torch.tensor([r], dtype=dtype), nc)])
    got = reduce.dot(xx, yy)
    s, a = _exact_dot(xx, yy)
    assert s[()] == Fraction(r) and a[()] / s[()] > cond / 4
    check_sum_bound(got, s, a, dtype, nc, 2 * n + 1, extra_levels=3)
    assert_within(got, s[()], dtype, nc, CANCEL_REL_UNITS)


def test_dot_broadcast_and_mixed_nc(rng):
    x = random_mc((3, 1, 50), torch.float64, 2, rng)
    y = random_mc((4, 50), torch.float64, 1, rng)
    got = reduce.dot(x, y)
    assert got.shape == (3, 4, 2)
    s, a = _exact_dot(x, arith.pad(y, 2))
    check_sum_bound(got, s, a, torch.float64, 2, 50, extra_levels=3)


def test_dot_nonfinite():
    x = arith.from_float(torch.tensor([[1.0, math.inf], [math.inf, 1.0], [1.0, math.nan]]), 2)
    y = arith.from_float(torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0]]), 2)
    got = reduce.dot(x, y)
    assert got[0, 0] == math.inf and torch.isnan(got[1, 0]) and torch.isnan(got[2, 0])
    assert (got[:, 1] == 0).all()


# ------------------------------------------------------------------------------ norm


def _exact_norm(x, dims, keepdim=False):
    fr = components_to_fraction(x)
    sq = np.sum(fr * fr, axis=dims, keepdims=keepdim)
    return np.asarray(sq, dtype=object)


def _check_norm(got, x, dims, dtype, nc, keepdim=False):
    sq = _exact_norm(x, dims, keepdim)
    with mpmath.workprec(working_prec(dtype, nc) + 60):
        exact = np.vectorize(lambda v: mpmath.sqrt(mpmath.mpf(v.numerator) / v.denominator), otypes=[object])(sq)
    return assert_within(got, exact, dtype, nc, NORM_REL_UNITS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("dim, keepdim", [(-1, False), (0, True), ((0, 1), False), (None, True)])
def test_norm(dtype, nc, dim, keepdim, rng):
    x = random_mc((6, 257), dtype, nc, rng)
    got = reduce.norm(x, dim, keepdim)
    ref_dims = tuple(range(2)) if dim is None else tuple(d % 2 for d in np.atleast_1d(dim))
    assert got.shape == (*torch.zeros(6, 257).norm(dim=ref_dims, keepdim=keepdim).shape, nc)
    _check_norm(got, x, ref_dims, dtype, nc, keepdim)


@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e300, 1e-300])
def test_norm_no_overflow_or_underflow(nc, scale, rng):
    """float64 entries near the ends of the range: the norm is finite and accurate.

    Near 1e-300 the tail components of the result are subnormal, so the format itself
    only holds the norm to an absolute ``2**-1074`` per component: that is added.
    """
    dtype = torch.float64
    x = random_mc((4, 100), dtype, nc, rng, lo=-2, hi=2) * scale
    assert torch.isfinite(x).all()
    got = reduce.norm(x, -1)
    assert torch.isfinite(got).all() and (got[..., 0] > 0).all()
    sq = _exact_norm(x, (1,))
    unit = mpmath.ldexp(1, -53 * nc)
    with mpmath.workprec(working_prec(dtype, nc) + 60):
        for g, v in zip(components_to_mpf(got).tolist(), sq.tolist()):
            exact = mpmath.sqrt(mpmath.mpf(v.numerator) / v.denominator)
            assert abs(g - exact) <= NORM_REL_UNITS * unit * exact + nc * mpmath.ldexp(1, -1074)


def test_norm_subnormal_entries():
    x = arith.from_float(torch.tensor([[3 * 2.0**-1074, 4 * 2.0**-1074, 0.0]], dtype=torch.float64), 2)
    got = reduce.norm(x, -1)
    assert torch.equal(got, torch.tensor([[5 * 2.0**-1074, 0.0]], dtype=torch.float64))


def test_norm_classic_and_mixed_scales():
    big, small = 2.0**600, 2.0**-600
    x = torch.tensor([[3 * big, 4 * big], [3 * small, 4 * small], [1e200, 1e-200]], dtype=torch.float64)
    got = reduce.norm(arith.from_float(x, 2), -1)
    assert got[0].tolist() == [5 * big, 0.0] and got[1].tolist() == [5 * small, 0.0]
    assert got[2, 0] == 1e200
    _check_norm(got, x.unsqueeze(-1), (1,), torch.float64, 2)
    f32 = arith.from_float(torch.tensor([3e30, 4e30, 1e-30], dtype=torch.float32), 2)
    _check_norm(reduce.norm(f32, -1), f32, (0,), torch.float32, 2)


def test_norm_zeros_and_nonfinite():
    zeros = torch.zeros(3, 5, 2, dtype=torch.float64)
    got = reduce.norm(zeros, -1)
    assert torch.equal(got, torch.zeros(3, 2, dtype=torch.float64))
    x = arith.from_float(torch.tensor([[1.0, math.inf], [-math.inf, 2.0], [math.nan, 1.0]]), 2)
    got = reduce.norm(x, -1)
    assert got[0, 0] == math.inf and got[1, 0] == math.inf and torch.isnan(got[2, 0])
    assert (got[:, 1] == 0).all()
    assert torch.equal(reduce.norm(torch.zeros(0, 2), -1), torch.zeros(2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("shape,dim", [((5, 300), 1), ((7, 5), -1), ((4, 6, 3), (0, 2)), ((3, 33), None), ((1000,), 0)])
def test_sumsq_and_its_wide_form(dtype, nc, shape, dim, rng):
    """sumsq_wide: relative error <= 8 (h + 1) u^(nc+1) (squares and pairwise sums at
    nc + 1, nothing cancels); sumsq, the same rounded to nc: <= u^nc + that, tested <= 2 u^nc."""
    x = random_mc(shape, dtype, nc, rng)
    dims = tuple(range(len(shape))) if dim is None else tuple(d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim))
    h = math.ceil(math.log2(math.prod(shape[d] for d in dims)))
    sq = _exact_norm(x, dims)
    wide = reduce.sumsq_wide(x, dim)
    assert wide.shape == (*sq.shape, nc + 1)
    assert_within(wide, sq, dtype, nc + 1, 8 * (h + 1))
    assert_within(reduce.sumsq(x, dim), sq, dtype, nc, 2)
    kept = reduce.sumsq(x, dim, keepdim=True)
    assert kept.shape == tuple(1 if d in dims else s for d, s in enumerate(shape)) + (nc,)


def test_sumsq_of_non_finite_and_empty_rows() -> None:
    inf, nan = math.inf, math.nan
    x = torch.tensor([[[inf, 0.0], [1.0, 0.0]], [[nan, 0.0], [1.0, 0.0]], [[1e200, 0.0], [1e200, 0.0]]], dtype=torch.float64)
    got = reduce.sumsq(x, -1)
    assert got[0].tolist() == [inf, 0.0] and got[2].tolist() == [inf, 0.0]
    assert math.isnan(got[1, 0]) and got[1, 1] == 0
    assert torch.equal(reduce.sumsq(torch.zeros(3, 0, 2, dtype=torch.float64), 1), torch.zeros(3, 2, dtype=torch.float64))
    assert torch.equal(reduce.sumsq_wide(torch.zeros(3, 0, 2), 1), torch.zeros(3, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", [1, 2, 3])
def test_round_to(dtype, nc, rng):
    """arith.round_to: a normalised nc + 1 (or nc + 2) expansion rounded to nc, relative
    error <= u^nc (one truncation of exact sweeps; tested <= 1.01); fewer components pass through."""
    for extra in (1, 2):
        x = random_mc((2000,), dtype, nc + extra, rng)
        x[:3] = 0  # zeros take the general renormalisation
        got = arith.round_to(x, nc)
        assert got.shape == (2000, nc)
        assert_within(got, components_to_fraction(x), dtype, nc, 1.01)
    assert arith.round_to(x, nc + 5) is x


# ------------------------------------------------------------------------ amax / amin


def _exact_extreme(x, dims, largest):
    fr = components_to_fraction(x)
    return np.asarray((np.max if largest else np.min)(fr, axis=dims), dtype=object)


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("dim", [0, 1, (0, 1), None])
def test_amax_amin_exact(nc, dim, rng):
    x = random_mc((9, 33), torch.float64, nc, rng, lo=0, hi=0)
    # ties in the leading component decided by the tails
    x[..., 0] = torch.round(x[..., 0] * 4) / 4
    dims = (0, 1) if dim is None else dim
    for largest, op in ((True, reduce.amax), (False, reduce.amin)):
        got = op(x, dim)
        assert np.array_equal(components_to_fraction(got), _exact_extreme(x, dims, largest))


def test_amax_ties_not_lexicographic():
    # (1 + ulp, -ulp/2 - tiny) < (1, ulp/2 - tiny') although its leading component is larger
    ulp = 2.0**-52
    x = torch.tensor([[1.0 + ulp, -ulp / 2, -(2.0**-120)], [1.0, ulp / 2, -(2.0**-121)], [1.0, ulp / 4, 0.0]], dtype=torch.float64)
    assert components_to_fraction(reduce.amax(x))[()] == components_to_fraction(x[1])[()]
    assert torch.equal(reduce.amin(x), x[2])


def test_amax_nc1_is_torch_amax_and_nan_propagates(rng):
    x = random_mc((10, 7), torch.float32, 1, rng)
    assert torch.equal(reduce.amax(x, 0, keepdim=True), x[..., 0].amax(0, keepdim=True)[..., None])
    assert torch.equal(reduce.amin(x, 1), x[..., 0].amin(1)[..., None])
    y = arith.from_float(torch.tensor([[1.0, math.nan, 3.0], [1.0, 2.0, 0.5]]), 2)
    assert torch.isnan(reduce.amax(y, 1)[0, 0]) and reduce.amax(y, 1)[1, 0] == 2.0
    assert torch.isnan(reduce.amin(y, 1)[0, 0]) and reduce.amin(y, 1)[1, 0] == 0.5
    with pytest.raises(ValueError, match="empty dimension"):
        reduce.amax(torch.zeros(0, 2), 0)
