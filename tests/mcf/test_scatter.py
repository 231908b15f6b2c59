"""Scatter and segment reductions, leaky_relu and softmax on MCTensors (the ops of graph
layers) against exact references: sums and means against ``fractions.Fraction``, maxima
and minima exactly, softmax against mpmath; gradients against float64 autograd."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import reduce
from tests.oracle import BOUNDS, assert_within, components_to_fraction, expansions

f32, f64 = torch.float32, torch.float64
REDUCTIONS = ("sum", "mean", "prod", "amax", "amin")
# exponent ranges of the hypothesis data: sums and products stay finite and normal
EXPONENTS = {f64: (-60, 60), f32: (-8, 8)}


def _exact_reduce(values: list[Fraction], how: str) -> Fraction:
    if how in ("sum", "mean"):
        s = sum(values, Fraction(0))
        return s / len(values) if how == "mean" else s
    if how == "prod":
        return math.prod(values, start=Fraction(1))
    return max(values) if how == "amax" else min(values)


@settings(max_examples=40)
@given(
    data=st.data(),
    dtype=st.sampled_from([f64, f32]),
    nc=st.sampled_from([1, 2, 3]),
    how=st.sampled_from(REDUCTIONS),
    include_self=st.booleans(),
)
def test_scatter_reduce_against_fractions(data, dtype, nc, how, include_self):
    lo, hi = EXPONENTS[dtype]
    if how == "prod":  # at most 6 factors per slot below
        lo, hi = -4, 4
    m = data.draw(st.integers(0, 24), label="entries")
    n = data.draw(st.integers(1, 6), label="slots")
    src = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(m,), allow_zero=True), label="src") if m else None
    base = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(n,), allow_zero=True), label="self")
    index = torch.tensor(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m), label="index"), dtype=torch.int64)
    if how == "prod":  # keep the products small: at most 5 entries per slot
        index = index[torch.bincount(index, minlength=n)[index] <= 5] if m else index
        src = src[: len(index)] if m else src
        m = len(index)
    src_c = src if m else torch.zeros(0, nc, dtype=dtype)
    got = hm.MCTensor(base).scatter_reduce(0, index, hm.MCTensor(src_c), how, include_self=include_self)
    b, s = components_to_fraction(base), components_to_fraction(src_c)
    exact, scale, count = [], [], []
    for t in range(n):
        vals = [s[i] for i in range(m) if index[i] == t]
        if not vals:  # untouched slots keep self, exactly
            exact.append(b[t])
            scale.append(abs(b[t]))
            count.append(1)
            continue
        vals = [b[t], *vals] if include_self else vals
        exact.append(_exact_reduce(vals, how))
        scale.append(sum(abs(v) for v in vals) / (len(vals) if how == "mean" else 1))
        count.append(len(vals))
    assert got.components.dtype == dtype and got.nc == nc
    if how in ("amax", "amin"):
        assert list(components_to_fraction(got.components)) == exact
    elif how == "prod":
        assert_within(got.components, np.array(exact, dtype=object), dtype, nc, BOUNDS["mul"] * max(max(count) - 1, 1))
    else:  # sum's bound: 2 u^nc sum |x_i| (mean: over the mean of |x_i|, plus the division)
        bound = 2 + (BOUNDS["div"] if how == "mean" else 0)
        assert_within(got.components, np.array(exact, dtype=object), dtype, nc, bound, scale=np.array(scale, dtype=object))


def test_scatter_sum_is_accurate_where_float64_cancels():
    src = torch.tensor([1e20, 1.0, -1e20, 3.0, 2.0**-60], dtype=f64)
    index = torch.tensor([0, 0, 0, 1, 1])
    got = hm.mc(torch.zeros(2, dtype=f64), nc=2).scatter_reduce(0, index, hm.mc(src, nc=2), "sum")
    assert [list(c) for c in components_to_fraction(got.components).reshape(-1, 1)] == [[Fraction(1)], [3 + Fraction(2) ** -60]]
    plain = torch.zeros(2, dtype=f64).scatter_reduce(0, index, src, "sum")
    assert plain[0] != 1.0  # what MC arithmetic keeps


def test_scatter_amax_decided_by_the_tail():
    src = hm.MCTensor.from_components(torch.tensor([[1.0, 2.0**-60], [1.0, 2.0**-61], [1.0, -(2.0**-70)]], dtype=f64))
    got = hm.mc(torch.zeros(1, dtype=f64), nc=2).scatter_reduce(0, torch.zeros(3, dtype=torch.int64), src, "amax", include_self=False)
    assert got.components.tolist() == [[1.0, 2.0**-60]]
    got = hm.mc(torch.zeros(1, dtype=f64), nc=2).scatter_reduce(0, torch.zeros(3, dtype=torch.int64), src, "amin", include_self=False)
    assert got.components.tolist() == [[1.0, -(2.0**-70)]]


@pytest.mark.parametrize("how", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch_on_exact_data(how, include_self, rng):
    """Integer data (exact sums): any dim, 2-d index, the torch semantics of each case
    (untouched slots, include_self, mean's count); MC rounded to float64 equals torch."""
    a = torch.randint(-4, 5, (3, 5), generator=rng).to(f64)
    src = torch.randint(-4, 5, (4, 6), generator=rng).to(f64)
    index = torch.randint(0, 5, (3, 4), generator=rng)
    want = a.scatter_reduce(1, index, src, how, include_self=include_self)
    got = hm.mc(a, nc=2).scatter_reduce(1, index, hm.mc(src, nc=2), how, include_self=include_self)
    assert torch.equal(got.approx(), want)
    # the in-place form, a plain source and NaN (propagated by every reduction)
    src[0, 0] = math.nan
    want = a.clone().scatter_reduce_(1, index, src, how, include_self=include_self)
    got = hm.mc(a, nc=2)
    got.scatter_reduce_(1, index, src, how, include_self=include_self)
    torch.testing.assert_close(got.approx(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("how", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_match_float64(how, include_self, rng):
    a64 = (torch.rand(4, 3, generator=rng, dtype=f64) + 0.5).requires_grad_()
    s64 = (torch.rand(7, 3, generator=rng, dtype=f64) + 0.5).requires_grad_()  # distinct values: no ties
    index = torch.tensor([0, 1, 1, 3, 3, 3, 1]).unsqueeze(1).expand(7, 3)
    w = torch.randn(4, 3, generator=rng, dtype=f64)
    (a64.scatter_reduce(0, index, s64, how, include_self=include_self) * w).sum().backward()
    a = hm.mc(a64.detach(), nc=2).requires_grad_()
    s = hm.mc(s64.detach(), nc=2).requires_grad_()
    (a.scatter_reduce(0, index, s, how, include_self=include_self) * w).sum().backward()
    for got, want in ((a.grad, a64.grad), (s.grad, s64.grad)):
        assert isinstance(got, hm.MCTensor)
        torch.testing.assert_close(got.approx(), want, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("how", REDUCTIONS)
def test_scatter_reduce_with_an_expanded_index_reduces_whole_rows(how, rng):
    """An index expanded along the other dims (PyG's form) takes the row path; it agrees
    with torch on exact data, along a middle dim, with a larger source and mixed nc."""
    a = torch.randint(-4, 5, (2, 4, 3), generator=rng).to(f64)
    src = torch.randint(-4, 5, (2, 7, 5), generator=rng).to(f64)
    index = torch.randint(0, 4, (6,), generator=rng).reshape(1, 6, 1).expand(2, 6, 3)
    for include_self in (True, False):
        want = a.scatter_reduce(1, index, src, how, include_self=include_self)
        got = hm.mc(a, nc=3).scatter_reduce(1, index, hm.mc(src, nc=2), how, include_self=include_self)
        assert got.nc == 3 and torch.equal(got.approx(), want)


def test_index_add_along_a_middle_dim_with_mixed_nc(rng):
    a = torch.randint(-4, 5, (2, 3, 4), generator=rng).to(f64)
    src = torch.randint(-4, 5, (2, 5, 4), generator=rng).to(f64)
    index = torch.tensor([2, 0, 2, 1, 2])
    got = hm.mc(a, nc=1).index_add(1, index, hm.mc(src, nc=2), alpha=3)
    assert got.nc == 2 and torch.equal(got.approx(), a.index_add(1, index, src, alpha=3))


def test_scatter_add_index_add_and_scatter_value(rng):
    x = hm.mc(torch.tensor([1e20, 1.0, -1e20, 5.0], dtype=f64), nc=2)
    zeros = hm.mc(torch.zeros(2, dtype=f64), nc=2)
    assert zeros.index_add(0, torch.tensor([0, 0, 0, 1]), x).approx().tolist() == [1.0, 5.0]
    assert zeros.scatter_add(0, torch.tensor([0, 0, 0, 1]), x).approx().tolist() == [1.0, 5.0]
    assert zeros.scatter(0, torch.tensor([1]), 7.0).approx().tolist() == [0.0, 7.0]
    assert zeros.scatter(0, torch.tensor([1, 0]), x[:2]).approx().tolist() == [1.0, 1e20]


def test_scatter_reduce_refuses_bad_arguments():
    z = hm.mc(torch.zeros(2, dtype=f64), nc=2)
    with pytest.raises(RuntimeError, match=r"reduce must be one of .*'sum'.*; got 'max'"):
        z.scatter_reduce(0, torch.tensor([0]), z[:1], "max")
    with pytest.raises(TypeError, match=r"float32.*module\.to\(dtype\), e\.g\. model\.double\(\)"):
        z.scatter_reduce(0, torch.tensor([0]), torch.ones(1), "sum")
    with pytest.raises(ValueError, match=r"scatter: reduce must be one of .*; got 'max'"):
        reduce.scatter(torch.zeros(2, 2, dtype=f64), torch.tensor([0]), torch.zeros(1, 2, dtype=f64), "max")


# ------------------------------------------------------------------------ segment_reduce

SEGMENT_REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "prod")


@pytest.mark.parametrize("how", SEGMENT_REDUCTIONS)
@pytest.mark.parametrize("initial", [None, 0.5])
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_matches_torch(how, initial, by, rng):
    x = torch.rand(6, 3, generator=rng, dtype=f64) + 0.5  # distinct values: no ties
    seg = {"lengths": torch.tensor([2, 0, 3, 1])} if by == "lengths" else {"offsets": torch.tensor([0, 2, 2, 5, 6])}
    x64 = x.clone().requires_grad_()
    want = torch._segment_reduce(x64, how, initial=initial, **seg)
    xm = hm.mc(x, nc=2).requires_grad_()
    got = torch._segment_reduce(xm, how, initial=initial, **seg)
    torch.testing.assert_close(got.approx(), want.detach(), rtol=1e-15, atol=0, equal_nan=True)
    w = torch.randn(4, 3, generator=rng, dtype=f64)
    keep = torch.isfinite(want.detach())  # empty segments: -inf / inf / NaN, no gradient
    (torch.where(keep, want, 0.0) * w).sum().backward()
    (torch.where(keep, got, 0.0) * w).sum().backward()
    torch.testing.assert_close(xm.grad.approx(), x64.grad, rtol=1e-14, atol=1e-15)


def test_segment_sum_accurate_and_max_ties_share_the_gradient():
    x = hm.mc(torch.tensor([1e20, 1.0, -1e20, 2.0, 2.0, 1.0], dtype=f64), nc=2).requires_grad_()
    s = torch._segment_reduce(x, "sum", lengths=torch.tensor([3, 3]))
    assert s.approx().tolist() == [1.0, 5.0]
    m = torch._segment_reduce(x, "max", lengths=torch.tensor([3, 3]))
    m.sum().backward()  # the 2.0 tie of the second segment: half each (torch's documented rule for scatter_reduce)
    assert x.grad.approx().tolist() == [1.0, 0.0, 0.0, 0.5, 0.5, 0.0]


@pytest.mark.parametrize("initial", [None, 0.5, 0.0])
@pytest.mark.parametrize(
    "data", [[2.0, 0.0, 3.0, 4.0, 5.0], [0.0, 0.0, 3.0, 4.0, 5.0], [1.0, 2.0, 0.0, 4.0, 5.0], [1.5, 2.0, 3.0, -4.0, 0.25]]
)
def test_segment_prod_gradient_with_zeros_matches_torch(data, initial):
    """The gradient of a segment's product is the product of the other elements (and
    initial): zero where two factors are zero, the nonzero product at a single zero."""
    lengths = torch.tensor([2, 0, 3])
    x64 = torch.tensor(data, dtype=f64, requires_grad=True)
    torch._segment_reduce(x64, "prod", lengths=lengths, initial=initial).sum().backward()
    x = hm.mc(torch.tensor(data, dtype=f64), nc=2).requires_grad_()
    torch._segment_reduce(x, "prod", lengths=lengths, initial=initial).sum().backward()
    assert x.grad.approx().tolist() == x64.grad.tolist()


def test_segment_reduce_refuses_bad_arguments():
    x = hm.mc(torch.ones(3, dtype=f64), nc=2)
    with pytest.raises(RuntimeError, match="give exactly one of lengths and offsets"):
        torch._segment_reduce(x, "sum", lengths=torch.tensor([3]), offsets=torch.tensor([0, 3]))
    with pytest.raises(RuntimeError, match="the lengths sum to 2, not to data's size 3 at axis 0"):
        torch._segment_reduce(x, "sum", lengths=torch.tensor([2]))


# -------------------------------------------------------------------- leaky_relu, softmax


@pytest.mark.parametrize("nc", [1, 2, 3])
def test_leaky_relu_exact_and_gradient(nc, rng):
    x64 = torch.randn(50, generator=rng, dtype=f64) * 10.0 ** torch.randint(-5, 5, (50,), generator=rng)
    x64[:3] = torch.tensor([0.0, -0.0, -(2.0**-1074)])
    x = hm.MCTensor.from_components(torch.stack([x64, x64 * 2.0**-60 * (nc > 1), x64 * 2.0**-120 * (nc > 2)], -1)[..., :nc])
    x.requires_grad_()
    y = torch.nn.functional.leaky_relu(x, 0.2)
    fx = components_to_fraction(x.detach().components)
    want = np.array([v if v > 0 else Fraction(0.2) * v for v in fx], dtype=object)
    assert_within(y.detach().components, want, f64, nc, "mul")
    # nc = 1 is torch's float64 leaky_relu bit for bit
    if nc == 1:
        assert torch.equal(y.detach().components[..., 0], torch.nn.functional.leaky_relu(x64, 0.2))
    y.backward(hm.mc(torch.ones(50, dtype=f64), nc=nc))
    assert x.grad.approx().tolist() == [1.0 if v > 0 else 0.2 for v in fx]
    z = x.detach().clone()
    torch.nn.functional.leaky_relu_(z, 0.2)
    assert torch.equal(z.components, y.detach().components)


def _mp_softmax(row: list[Fraction], log: bool) -> tuple[list[mpmath.mpf], list[mpmath.mpf]]:
    """(log_)softmax of a row, and what the absolute error of each log_softmax entry scales
    with: ``|x - m| + log(S) + 1``, ``S = sum exp(x - m) >= 1`` (``S``'s own rounding,
    ``u^nc S``, is an absolute error of ``u^nc`` in ``log(S)``)."""
    v = [mpmath.mpf(r.numerator) / r.denominator for r in row]
    m = max(v)
    lse_shifted = mpmath.log(mpmath.fsum(mpmath.exp(t - m) for t in v))
    out = [t - m - lse_shifted if log else mpmath.exp(t - m - lse_shifted) for t in v]
    return out, [abs(t - m) + lse_shifted + 1 for t in v]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("nc", [2, 3])
def test_softmax_against_mpmath(log, nc, rng):
    x64 = torch.randn(4, 7, generator=rng, dtype=f64) * 30
    x64[0] = torch.tensor([1000.0, 1000.0, 0.0, -1000.0, 999.0, 1e-300, -5.0], dtype=f64)  # large logits do not overflow
    x = hm.MCTensor.from_components(torch.stack([x64, x64 * 2.0**-70] + [x64 * 0.0] * (nc - 2), -1))
    got = torch.log_softmax(x, dim=1) if log else torch.softmax(x, dim=1)
    with mpmath.workprec(400):
        pairs = [_mp_softmax(list(r), log) for r in components_to_fraction(x.components)]
        want = np.array([p[0] for p in pairs], dtype=object)
        scale = np.array([p[1] for p in pairs], dtype=object)
    # exp, an accurate sum and a division (log: a log and a subtraction)
    if log:
        assert_within(got.components, want, f64, nc, 2 * BOUNDS["transcendental"], scale=scale)
    else:  # relative; entries below 2^-900 (exp(-1000) = 2^-1443) underflow, as in float64
        floor = mpmath.ldexp(1, -900)
        size = np.array([[max(abs(v), floor) for v in row] for row in want], dtype=object)
        assert_within(got.components, want, f64, nc, 2 * BOUNDS["transcendental"], scale=size)
    assert torch.equal((torch.log_softmax(x, -1) if log else torch.softmax(x, -1)).components, got.components)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradients_match_float64(log, rng):
    x64 = (torch.randn(3, 5, generator=rng, dtype=f64) * 3).requires_grad_()
    w = torch.randn(3, 5, generator=rng, dtype=f64)
    f = torch.log_softmax if log else torch.softmax
    (f(x64, dim=1) * w).sum().backward()
    x = hm.mc(x64.detach(), nc=2).requires_grad_()
    (f(x, dim=1) * w).sum().backward()
    torch.testing.assert_close(x.grad.approx(), x64.grad, rtol=1e-13, atol=1e-15)


def test_softmax_refuses_half_to_float():
    x = hm.mc(torch.zeros(2, 2, dtype=f64), nc=2)
    with pytest.raises(TypeError, match=r"half_to_float=True would change the component dtype torch\.float64"):
        torch.ops.aten._softmax.default(x, 1, True)


@pytest.mark.cuda
def test_scatter_segment_softmax_on_cuda_agree_with_cpu(rng):
    """The kernels are device-agnostic torch code: on a GPU the results agree with the CPU's
    to the accuracy bounds (maxima and minima exactly)."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA not available")
    x = hm.mc(torch.randn(40, 3, generator=rng, dtype=f64), nc=2) + 2.0**-60
    index = torch.randint(0, 6, (40, 3), generator=rng)
    base = hm.mc(torch.zeros(6, 3, dtype=f64), nc=2)
    tol = 40 * 4 * 2.0**-106  # 40 values of size < 4 per slot, 2 u^2 of their sum on each side

    def agree(gpu, cpu, atol, rtol=0.0):
        diff = (gpu.cpu() - cpu).abs().approx()
        assert bool((diff <= atol + rtol * cpu.abs().approx()).all()), float(diff.max())

    for how in REDUCTIONS:
        cpu = base.scatter_reduce(0, index, x, how, include_self=False)
        gpu = base.cuda().scatter_reduce(0, index.cuda(), x.cuda(), how, include_self=False)
        if how == "prod":  # relative: 8 u^2 per product on each side, at most 40 factors
            agree(gpu, cpu, 0.0, 2 * 8 * 40 * 2.0**-106)
        else:
            agree(gpu, cpu, 0.0 if how in ("amax", "amin") else tol)
    lengths = torch.tensor([10, 0, 25, 5])
    agree(torch._segment_reduce(x.cuda(), "sum", lengths=lengths.cuda()), torch._segment_reduce(x, "sum", lengths=lengths), tol)
    agree(torch.softmax(x.cuda(), 0), torch.softmax(x, 0), 2.0**-100)


def test_index_backward_wraps_negative_indices():
    x = hm.mc(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), nc=2).requires_grad_()
    x[torch.tensor([-1, 2, 0])].sum().backward()
    assert x.grad.approx().tolist() == [1.0, 0.0, 2.0]


@pytest.mark.parametrize("narrow, wide", [(1, 2), (2, 3)])
def test_a_narrower_source_gains_zero_components(narrow, wide):
    base = hm.mc(torch.zeros(3, dtype=torch.float64), nc=wide)
    src = hm.mc(torch.tensor([1.0, 2.0], dtype=torch.float64), nc=narrow)
    idx = torch.tensor([0, 2])
    for got in (base.index_add(0, idx, src), base.scatter_add(0, idx, src)):
        assert got.nc == wide
        assert got.components.tolist() == [[1.0] + [0.0] * (wide - 1), [0.0] * wide, [2.0] + [0.0] * (wide - 1)]


def test_out_of_range_indices_are_refused_as_torch_does():
    base = hm.mc(torch.zeros(3, dtype=torch.float64), nc=2)
    src = hm.mc(torch.tensor([1.0, 2.0], dtype=torch.float64), nc=2)
    for idx in (torch.tensor([-1, 2]), torch.tensor([0, 3])):
        with pytest.raises(IndexError, match="index out of range in self"):
            base.index_add(0, idx, src)
    rows = hm.mc(torch.zeros(3, 2, dtype=torch.float64), nc=2)
    ones = hm.mc(torch.ones(2, 2, dtype=torch.float64), nc=2)
    for bad in (-1, 3):
        idx = torch.tensor([bad, 2]).reshape(2, 1).expand(2, 2)
        with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 0 with size 3"):
            rows.scatter_reduce(0, idx, ones, "sum")
