"""Tests of :class:`hypermc.MCTensor`: construction, shape ops, in-place ops, autograd,
serialisation, optimizers, nc=1 bitwise equality, robustness and error messages.

Every value is checked against the exact oracle of ``tests/oracle.py`` (Fractions and
high-precision mpmath), never against the MCTensor's own arithmetic.
"""

from __future__ import annotations

import copy
import io
import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch import nn

import hypermc as hm
from tests.oracle import (
    BOUNDS,
    assert_within,
    components_to_fraction,
    components_to_mpf,
    expansions,
    float_format,
    floats_of,
    working_prec,
)

f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
DTYPES = [f16, bf16, f32, f64]
#: (dtype, nc) pairs covering every kernel path: wide engine (f16/bf16/f32 nc=2), the
#: double-word algorithms (f64 nc=2) and the expansion algorithms (nc=3).
CONFIGS = [(f64, 2), (f64, 3), (f32, 2), (f32, 3), (f16, 2), (bf16, 3)]
_INT_OF = {f16: torch.int16, bf16: torch.int16, f32: torch.int32, f64: torch.int64}

# Hypothesis: deadline off (first calls compile kernels / import modules); examples are
# capped per test so the file stays well under a minute in the ci profile.
FAST = settings(deadline=None, max_examples=30)
SLOW = settings(deadline=None, max_examples=10)


# --------------------------------------------------------------------------- helpers


def mcv(values, nc: int, dtype: torch.dtype, **kw) -> hm.MCTensor:
    """MCTensor of exact Python float values (each must fit ``nc`` components of dtype)."""
    return hm.mc(torch.tensor(values, dtype=f64), nc=nc, dtype=dtype, **kw)


def exact(x) -> np.ndarray:
    """Exact values of an MCTensor (Fractions) from its components, via the oracle."""
    return components_to_fraction(x.components)


def ulp(x: Fraction, dtype: torch.dtype) -> Fraction:
    p, emin, _ = float_format(dtype)
    e = math.frexp(float(x))[1] - 1 if x != 0 else emin
    return Fraction(2) ** (max(e, emin) - p + 1)


def assert_normalised(x: hm.MCTensor) -> None:
    """The invariant of every public op: non-overlapping, decreasing, zeros at the tail."""
    c64 = x.components.detach().to(f64).reshape(-1, x.nc).tolist()
    for row in c64:
        if not math.isfinite(row[0]):
            assert all(c == 0 for c in row[1:]), f"non-finite leading component with a tail: {row}"
            continue
        for a, b in zip(row, row[1:]):
            if a == 0:
                assert b == 0, f"zero followed by a nonzero component: {row}"
            else:
                assert abs(Fraction(b)) <= ulp(Fraction(a), x.dtype) / 2, f"overlapping components: {row}"


def to_fraction(v: mpmath.mpf) -> Fraction:
    """Exact Fraction of a finite mpf."""
    sign, man, exp, _ = mpmath.mpf(v)._mpf_
    return (-1) ** sign * Fraction(man) * Fraction(2) ** exp


def round_to(value: Fraction, dtype: torch.dtype) -> float:
    """``value`` rounded to nearest-even in ``dtype`` (normal range)."""
    if dtype == f64:
        return float(value)  # Fraction.__float__ is correctly rounded
    p = float_format(dtype)[0]
    with mpmath.workprec(4200):
        v = mpmath.mpf(value.numerator) / value.denominator
    with mpmath.workprec(p):
        return float(+v)


def same_values(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Bitwise equality, except that any two NaNs are equal (their sign bit may differ)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    both_nan = torch.isnan(got) & torch.isnan(want)
    same_bits = got.view(_INT_OF[got.dtype]) == want.view(_INT_OF[want.dtype])
    return bool((both_nan | same_bits).all())


# --------------------------------------------------------------------- construction


@FAST
@given(data=st.data())
@example(data=None)
def test_mc_float64_tensor_into_three_float32_components_is_exact(data):
    # floor(log2|x|) >= -126 + 72 keeps the third component out of the subnormal range
    if data is None:
        values = [1.0, -1.0 / 3.0, math.pi, 2.0**-54, 1e-16, 3.4e38, -(2.0**-50) * 3]
    else:
        values = data.draw(st.lists(floats_of(f64, min_exp=-50, max_exp=127), min_size=1, max_size=16))
        # the float32 range under round-to-nearest: from the midpoint between the largest
        # float32 and 2^128 up, the leading component rounds to inf (next test)
        values = [v for v in values if abs(v) < F32_OVERFLOW] or [1.0]
    t = torch.tensor(values, dtype=f64)
    x = hm.mc(t, nc=3, dtype=f32)
    assert x.dtype == f32 and x.components.dtype == f32 and x.nc == 3
    assert list(exact(x)) == [Fraction(v) for v in values]
    assert_normalised(x)


#: (2 - 2^-24) 2^127: the smallest value that float32 rounding (to nearest, ties to even) sends to inf
F32_OVERFLOW = (2 - 2.0**-24) * 2.0**127


def test_mc_into_float32_components_overflows_like_ieee_rounding():
    """A float64 value at or beyond the float32 overflow midpoint becomes (±inf, 0, 0), as
    ``torch.tensor(v).float()`` gives ±inf (found by hypothesis: 3.4028235677973366e38)."""
    below = math.nextafter(F32_OVERFLOW, 0.0)
    t = torch.tensor([F32_OVERFLOW, -F32_OVERFLOW, below], dtype=f64)
    x = hm.mc(t, nc=3, dtype=f32)
    assert t.float().tolist()[:2] == [math.inf, -math.inf]
    assert x.components[:2].tolist() == [[math.inf, 0.0, 0.0], [-math.inf, 0.0, 0.0]]
    assert exact(x[2:]).tolist() == [Fraction(below)]


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_mc_rounds_to_nearest_nc_components_when_the_input_does_not_fit(dtype, nc):
    t = torch.tensor([0.1, -1.0 / 3.0, math.pi, 2.0 / 7.0], dtype=f64)
    x = hm.mc(t, nc=nc, dtype=dtype)
    assert x.dtype == dtype and x.nc == nc
    assert_within(x, [Fraction(v) for v in t.tolist()], dtype, nc, 1)
    assert_normalised(x)


def test_mc_from_python_numbers_lists_and_numpy():
    default = torch.get_default_dtype()
    x = hm.mc(2.5)
    assert x.nc == 2 and x.dtype == default and x.shape == () and exact(x).item() == Fraction(5, 2)
    x = hm.mc([[1, 2], [3, 4.5]], nc=3)
    assert x.shape == (2, 2) and x.nc == 3 and x.dtype == default
    assert exact(x).tolist() == [[1, 2], [3, Fraction(9, 2)]]
    x = hm.mc((0.5, -0.25), nc=2, dtype=f64)
    assert x.dtype == f64 and exact(x).tolist() == [Fraction(1, 2), Fraction(-1, 4)]
    # numpy keeps its float dtype unless dtype= is given
    x = hm.mc(np.array([1.0, 2.0**-60]), nc=2)
    assert x.dtype == f64 and exact(x).tolist() == [1, Fraction(1, 2**60)]
    x = hm.mc(np.array([1.5, 3.0], dtype=np.float32), nc=2)
    assert x.dtype == f32 and exact(x).tolist() == [Fraction(3, 2), 3]
    x = hm.mc(np.array([1.0 + 2.0**-40]), nc=2, dtype=f32)
    assert x.dtype == f32 and exact(x).tolist() == [1 + Fraction(1, 2**40)]
    # a Python float that is not a float32 is still exact at nc=3 float32
    x = hm.mc(0.1, nc=3, dtype=f32)
    assert exact(x).item() == Fraction(0.1)
    # integer and bool tensors convert exactly
    x = hm.mc(torch.tensor([3, -(2**40)]), nc=2, dtype=f32)
    assert exact(x).tolist() == [3, -(2**40)]
    assert exact(hm.mc(torch.tensor([True, False]), nc=2)).tolist() == [1, 0]


def test_mc_keeps_the_dtype_of_a_float_tensor_and_takes_device_and_requires_grad():
    for dtype in DTYPES:
        x = hm.mc(torch.ones(3, dtype=dtype), nc=2)
        assert x.dtype == dtype and x.components.dtype == dtype
    x = hm.mc(torch.ones(2, dtype=f64), nc=2, device="cpu", requires_grad=True)
    assert x.device == torch.device("cpu") and x.requires_grad and x.is_leaf


def test_mc_from_strings_fractions_and_mpmath_values():
    with mpmath.workprec(400):
        tenth, third = mpmath.mpf(1) / 10, mpmath.mpf(1) / 3
        x = hm.mc("0.1", nc=3, dtype=f64)
        assert_within(x, tenth, f64, 3, 1)
        x = hm.mc(["0.1", "1e-30", "-7"], nc=2, dtype=f64)
        assert_within(x, [tenth, mpmath.mpf("1e-30"), -7], f64, 2, 1)
        x = hm.mc(Fraction(1, 3), nc=3, dtype=f32)
        assert x.dtype == f32 and x.nc == 3
        assert_within(x, third, f32, 3, 1)
        x = hm.mc([mpmath.mpf(1) / 3, mpmath.mpf(2)], nc=2, dtype=f64)
        assert_within(x, [third, 2], f64, 2, 1)
        x = hm.mc(np.array([Fraction(1, 10), Fraction(3)], dtype=object), nc=2, dtype=f64)
        assert_within(x, [tenth, 3], f64, 2, 1)


@pytest.mark.parametrize("nc_in, nc_out", [(2, 3), (3, 2), (3, 1), (2, 2)])
def test_mc_of_an_mctensor_changes_nc_and_dtype(nc_in, nc_out):
    values = ["0.1", "-3.3333333333333333333333333333333333", "1e-20"]
    x = hm.from_mpmath(values, nc=nc_in, dtype=f64)
    y = hm.mc(x, nc=nc_out)
    assert isinstance(y, hm.MCTensor) and y.nc == nc_out and y.dtype == f64
    if nc_out >= nc_in:
        assert (exact(y) == exact(x)).all()  # padding is exact
    else:
        assert_within(y, exact(x), f64, nc_out, 1)
    # the result is a new tensor: writing to it leaves the source alone
    before = exact(x)
    y.components.zero_()
    assert (exact(x) == before).all()
    z = hm.mc(x, dtype=f32, nc=3)
    assert z.dtype == f32 and z.nc == 3
    assert_within(z, exact(x), f32, 3, 1)


@FAST
@given(data=st.data())
def test_from_components_renormalises_any_order_and_overlap(data):
    dtype = data.draw(st.sampled_from([f32, f64]), label="dtype")
    nc = data.draw(st.integers(1, 4), label="nc")
    m = data.draw(st.integers(1, 6), label="terms")
    rows = data.draw(st.lists(st.lists(floats_of(dtype, min_exp=-20, max_exp=20), min_size=m, max_size=m), min_size=1, max_size=8))
    c = torch.tensor(rows, dtype=f64).to(dtype)
    x = hm.MCTensor.from_components(c)
    assert isinstance(x, hm.MCTensor) and x.nc == m and x.shape == (len(rows),) and x.dtype == dtype
    sums = [sum((Fraction(v) for v in row), Fraction(0)) for row in c.to(f64).tolist()]
    # m terms always fit in m non-overlapping components: exact
    assert list(exact(x)) == sums
    assert_normalised(x)
    # the same terms in reverse order give the same value
    assert list(exact(hm.MCTensor.from_components(c.flip(-1)))) == sums
    # rounding to fewer components
    if nc < m:
        z = hm.mc(x, nc=nc)
        assert_within(z, sums, dtype, nc, 2)
        assert_normalised(z)


def test_from_components_accepts_any_order():
    c = torch.tensor([[1e-20, 1.0, -3.0, 2.0**-60], [0.0, 0.0, 5.0, 0.0]], dtype=f64)
    x = hm.MCTensor.from_components(c)
    assert x.nc == 4 and x.shape == (2,)
    assert exact(x).tolist() == [Fraction(1e-20) - 2 + Fraction(1, 2**60), 5]
    assert abs(x.components[0, 0].item()) >= abs(x.components[0, 1].item())
    assert_normalised(x)
    # the caller's tensor is neither modified nor aliased
    assert c[0, 0].item() == 1e-20
    x.components.zero_()
    assert c[1, 2].item() == 5.0


def test_from_components_requires_grad_makes_a_leaf():
    x = hm.MCTensor.from_components(torch.ones(3, 2, dtype=f64), requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None


def test_accessors():
    c = torch.tensor([[[1.0, 2.0**-60], [-3.0, 0.0], [0.5, 2.0**-70]]] * 2, dtype=f64)
    x = hm.MCTensor.from_components(c)
    assert isinstance(x, torch.Tensor) and isinstance(x, hm.MCTensor)
    assert x.components.shape == (2, 3, 2) and x.nc == 2
    assert x.shape == (2, 3) and x.dim() == 2 and x.numel() == 6 and len(x) == 2
    assert x.dtype == f64 and x.device == torch.device("cpu")
    assert torch.equal(x.components[..., 0], c[..., 0])  # leading component first
    assert exact(x)[0, 0] == 1 + Fraction(1, 2**60)


def _approx_cases() -> list[tuple[list[float], torch.dtype]]:
    h = 2.0**-53
    return [
        ([1.0, h, 2.0**-110], f64),  # halfway + positive rest: rounds up, fl(c0 + c1) would not
        ([1.0, h, -(2.0**-110)], f64),
        ([1.0, -h / 2, -(2.0**-110)], f64),  # halfway below a power of two
        ([1.0 + 2 * h, h, 2.0**-110], f64),  # halfway from an odd significand
        ([1.0, 2.0**-24, 2.0**-60], f32),
        ([1.0, -(2.0**-25), -(2.0**-60)], f32),
        ([3.0, 2.0**-10, 2.0**-22], f16),
    ]


@pytest.mark.parametrize("comps, dtype", _approx_cases())
def test_approx_is_nearest_at_ties(comps, dtype):
    x = hm.MCTensor.from_components(torch.tensor([comps], dtype=f64).to(dtype))
    want = round_to(exact(x)[0], dtype)
    assert x.approx().dtype == dtype and type(x.approx()) is torch.Tensor
    assert x.approx().item() == want


@FAST
@given(data=st.data())
def test_approx_is_the_nearest_plain_value(data):
    dtype, nc = data.draw(st.sampled_from(CONFIGS), label="config")
    p, emin, emax = float_format(dtype)
    c = data.draw(expansions(dtype, nc, min_exp=emin + nc * p + 2, max_exp=emax - 1, shape=(16,)))
    x = hm.MCTensor.from_components(c)
    want = [round_to(v, dtype) for v in exact(x)]
    got = x.approx().tolist()
    assert got == want


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_to_mpmath_is_exact(dtype, nc):
    p, emin, emax = float_format(dtype)
    gen = torch.Generator().manual_seed(1)
    c = torch.randn(3, 4, nc, generator=gen, dtype=f64) * torch.tensor([2.0 ** (-p * k) for k in range(nc)], dtype=f64)
    x = hm.MCTensor.from_components(c.to(dtype))
    got = x.to_mpmath()
    assert isinstance(got, np.ndarray) and got.dtype == object and got.shape == (3, 4)
    assert all(isinstance(v, mpmath.mpf) for v in got.flat)
    assert (got == components_to_mpf(x.components)).all()


def test_to_mpmath_keeps_nan_and_inf():
    x = hm.mc(torch.tensor([math.nan, math.inf, -math.inf, 0.0]), nc=2)
    got = x.to_mpmath()
    assert mpmath.isnan(got[0]) and got[1] == mpmath.inf and got[2] == -mpmath.inf and got[3] == 0


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_from_mpmath_is_nearest_and_normalised(dtype, nc):
    p, emin, emax = float_format(dtype)
    with mpmath.workprec(600):
        values = [mpmath.mpf(1) / 3, -mpmath.pi * 1000, mpmath.e / 7, mpmath.sqrt(2) * 2 ** (emin + nc * p + 4)]
    x = hm.mcf.from_mpmath(values, nc=nc, dtype=dtype)
    assert hm.mcf.from_mpmath is hm.from_mpmath
    assert isinstance(x, hm.MCTensor) and x.nc == nc and x.dtype == dtype and x.shape == (4,)
    assert_normalised(x)
    # greedy nearest rounding of each remainder: error at most half an ulp of the last
    # component, i.e. well inside u**nc relative
    assert_within(x, values, dtype, nc, 1)
    # the leading component is the nearest plain value
    assert x.components[..., 0].tolist() == [round_to(to_fraction(v), dtype) for v in values]


def test_from_mpmath_shapes_and_inputs():
    x = hm.from_mpmath([["0.5", Fraction(1, 3)], [mpmath.mpf(2), 7]], nc=2, dtype=f64)
    assert x.shape == (2, 2)
    assert exact(x)[0, 0] == Fraction(1, 2) and exact(x)[1, 1] == 7
    x = hm.from_mpmath("1e-40", nc=3, dtype=f64)
    assert x.shape == () and x.nc == 3
    x = hm.from_mpmath(["inf", "-inf", "nan"], nc=2, dtype=f32)
    got = x.to_mpmath()
    assert got[0] == mpmath.inf and got[1] == -mpmath.inf and mpmath.isnan(got[2])
    assert (x.components[..., 1] == 0).all()


def test_repr_shows_the_value_to_full_precision():
    x = hm.mc(1.0, nc=3, dtype=f64) + 1e-40
    r = repr(x)
    assert r.startswith("MCTensor(") and "nc=3" in r and "float64" in r
    assert "1.0000000000000000000000000000000000000001" in r
    assert str(x) == r
    assert "requires_grad=True" in repr(hm.mc([1.0, 2.0], nc=2, requires_grad=True))
    assert "approx=" in repr(hm.mc(torch.ones(100), nc=2))  # large tensors summarise
    assert "nan" in repr(hm.mc(torch.tensor([math.nan, 1.0]), nc=2))


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_repr_digits_identify_the_value(dtype, nc):
    with mpmath.workprec(600):
        values = [mpmath.mpf(1) / 3, -mpmath.pi, mpmath.mpf(10) ** 4 / 7]
    x = hm.from_mpmath(values, nc=nc, dtype=dtype)
    numbers = re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", repr(x).split("nc=")[0])
    assert len(numbers) == 3
    with mpmath.workprec(600):
        parsed = [mpmath.mpf(s) for s in numbers]
        for got, want in zip(parsed, components_to_mpf(x.components)):
            assert abs(got - want) <= abs(want) * mpmath.mpf(2) ** (-nc * float_format(dtype)[0] - 2)


def test_item_float_bool_tolist_and_numpy():
    x = hm.MCTensor.from_components(torch.tensor([1.0, 2.0**-53, 2.0**-110], dtype=f64))
    assert x.item() == 1.0 + 2.0**-52  # the nearest double of the exact value
    assert float(x) == 1.0 + 2.0**-52
    assert float(hm.mc(0.1, nc=3, dtype=f32)) == 0.1
    assert bool(hm.mc(2.0**-100, nc=2, dtype=f64)) and not bool(hm.mc(0.0, nc=2))
    y = hm.mc([[1.0, 2.0]], nc=2, dtype=f64) + 1e-20
    assert y.tolist() == [[1.0, 2.0]]
    with pytest.raises(TypeError, match=r"approx\(\)\.numpy\(\)"):
        y.numpy()


def test_isnan_isinf_isfinite_are_plain_bool_tensors():
    x = hm.mc(torch.tensor([math.nan, math.inf, -math.inf, 1.0]), nc=2)
    assert torch.isnan(x).tolist() == [True, False, False, False]
    assert torch.isinf(x).tolist() == [False, True, True, False]
    assert torch.isfinite(x).tolist() == [False, False, False, True]
    assert type(torch.isnan(x)) is torch.Tensor


def test_factories_like_give_mctensors_of_the_same_nc():
    x = mcv([1.0, 2.0], 3, f32)
    for y, v in (
        (torch.zeros_like(x), 0),
        (torch.ones_like(x), 1),
        (torch.full_like(x, 0.1), Fraction(0.1)),
        (x.new_zeros(4), 0),
        (x.new_ones((2, 2)), 1),
        (x.new_full((3,), 0.1), Fraction(0.1)),
    ):
        assert isinstance(y, hm.MCTensor) and y.nc == 3 and y.dtype == f32
        assert (exact(y) == v).all()


# ---------------------------------------------------------------------- shape ops


def _base_mc(nc: int = 3, dtype: torch.dtype = f64) -> hm.MCTensor:
    """A (2, 3, 4) MCTensor whose elements all differ in every component."""
    p = float_format(dtype)[0]
    lead = torch.arange(1, 25, dtype=f64).reshape(2, 3, 4)
    comps = [lead] + [lead * 2.0 ** (-(p + 3) * k) * (-1) ** k for k in range(1, nc)]
    return hm.MCTensor.from_components(torch.stack(comps, -1).to(dtype))


MASK = torch.arange(24).reshape(2, 3, 4) % 3 == 0
GATHER_INDEX = torch.tensor([[[0, 2, 1, 0], [2, 2, 0, 1]], [[1, 1, 1, 1], [0, 0, 2, 2]]])

SHAPE_OPS = {
    "view": lambda x: x.view(4, 6),
    "view_-1": lambda x: x.view(-1),
    "view_as": lambda x: x.view_as(torch.empty(6, 4)),
    "reshape": lambda x: x.reshape(3, 8),
    "reshape_noncontiguous": lambda x: x.transpose(0, 2).reshape(4, 6),
    "flatten": lambda x: x.flatten(1),
    "permute": lambda x: x.permute(2, 0, 1),
    "movedim": lambda x: x.movedim(0, -1),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_neg": lambda x: x.transpose(-1, -2),
    "t": lambda x: x[0].t(),
    "unsqueeze_0": lambda x: x.unsqueeze(0),
    "unsqueeze_-1": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x[:, :1].squeeze(),
    "squeeze_dim": lambda x: x[:, :1].squeeze(1),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "cat_0": lambda x: torch.cat([x, x[:1]], 0),
    "cat_-1": lambda x: torch.cat([x, x.flip(0)], -1),
    "stack_0": lambda x: torch.stack([x, x.flip(1)], 0),
    "stack_-1": lambda x: torch.stack([x[0], x[1]], -1),
    "int": lambda x: x[1],
    "int_int": lambda x: x[1, -1],
    "slice": lambda x: x[:, 1:3],
    "slice_step": lambda x: x[..., ::2],
    "none": lambda x: x[None, :, 0],
    "bool_mask_dim0": lambda x: x[torch.tensor([True, False])],
    "bool_mask_full": lambda x: x[MASK],
    "index_tensor": lambda x: x[torch.tensor([1, 0, 1])],
    "index_tensors": lambda x: x[torch.tensor([1, 0, 1]), :, torch.tensor([3, 3, 0])],
    "index_select": lambda x: x.index_select(2, torch.tensor([3, 0, 3])),
    "gather": lambda x: x.gather(1, GATHER_INDEX),
    "clone": lambda x: x.clone(),
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "flip": lambda x: x.flip(0, 2),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "unbind": lambda x: x.unbind(1)[2],
    "split": lambda x: x.split(3, dim=2)[1],
    "chunk": lambda x: x.chunk(2, 2)[0],
    "diagonal": lambda x: x.diagonal(0, 1, 2),
    "roll": lambda x: x.roll(1, 2),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_op_moves_components_like_plain_tensors(name):
    op = SHAPE_OPS[name]
    x = _base_mc()
    y = op(x)
    assert isinstance(y, hm.MCTensor) and y.nc == x.nc and y.dtype == x.dtype
    for k in range(x.nc):
        want = op(x.components[..., k])
        assert y.shape == want.shape
        assert torch.equal(y.components[..., k], want), f"component {k}"
    assert_normalised(y)


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_op_in_place_write_reaches_the_base_exactly_when_plain_views_do(name):
    if name == "expand":
        pytest.skip("in-place writes into an expanded view are refused by torch too")
    op = SHAPE_OPS[name]
    x = _base_mc()
    plain = [x.components[..., k].clone() for k in range(x.nc)]
    version = x._version
    y = op(x)
    y.mul_(2.0)  # exact: every component doubles
    for k, pk in enumerate(plain):
        op(pk).mul_(2.0)
        assert torch.equal(x.components[..., k], pk), f"component {k}"
    views_base = op(plain[0])._base is plain[0] or op(plain[0]).data_ptr() == plain[0].data_ptr()
    if views_base:
        assert x._version > version
        assert y.components.untyped_storage().data_ptr() == x.components.untyped_storage().data_ptr()


def test_detach_shares_storage_and_drops_grad():
    x = _base_mc().requires_grad_()
    d = x.detach()
    assert isinstance(d, hm.MCTensor) and not d.requires_grad and d.nc == x.nc
    d[0, 0, 0] = 0.5
    assert exact(x)[0, 0, 0] == Fraction(1, 2)


def test_setitem_with_mc_plain_and_scalar_values():
    x = mcv([0.0] * 5, 2, f64)
    x[0] = hm.mc(5.0, nc=2, dtype=f64) + 1e-20
    x[torch.tensor([1, 3])] = 7.0
    x[torch.tensor([False, False, True, False, False])] = 0.1
    x[4:] = torch.tensor([0.25], dtype=f64)
    assert exact(x).tolist() == [5 + Fraction(1e-20), 7, Fraction(0.1), 7, Fraction(1, 4)]


def test_setitem_rows_in_place_rounds_wider_values_and_writes_through_views():
    """Row writes go straight into the components: other rows, aliases and views see the
    change; values with more components are rounded to the target's nc."""
    x = mcv([1.0, 2.0, 3.0, 4.0], 2, f64)
    alias = x.detach()
    view = x[1:]
    comps = x.components
    wide = hm.mc(1.0, nc=3, dtype=f64) + 2.0**-60 + 2.0**-120  # the last term is below nc=2
    x[torch.tensor([0, 2])] = wide
    assert x.components.data_ptr() == comps.data_ptr()
    assert exact(x).tolist() == [1 + Fraction(2) ** -60, 2, 1 + Fraction(2) ** -60, 4]
    assert exact(alias).tolist() == exact(x).tolist()
    assert exact(view).tolist() == exact(x)[1:].tolist()
    view[torch.tensor([2])] = hm.mc(0.5, nc=2, dtype=f64)  # through a view into x[3]
    assert exact(x)[3] == Fraction(1, 2)
    assert_normalised(x)


def test_to_device_and_dtype():
    x = _base_mc(nc=3, dtype=f32)
    assert x.to("cpu") is x or (exact(x.to("cpu")) == exact(x)).all()
    assert x.to(torch.device("cpu")).device == torch.device("cpu")
    w = x.to(f64)  # widening is exact
    assert isinstance(w, hm.MCTensor) and w.dtype == f64 and w.nc == 3
    assert (exact(w) == exact(x)).all()
    assert_normalised(w)
    assert (exact(x.double()) == exact(x)).all()
    # narrowing rounds to nc components of the new dtype
    y = hm.from_mpmath(["0.1", "-1e10", "3.3333333333333333333333333333333"], nc=2, dtype=f64)
    n = y.to(f32)
    assert n.dtype == f32 and n.nc == 2
    assert_within(n, exact(y), f32, 2, 2)
    assert_normalised(n)
    with pytest.raises(TypeError, match="int64"):
        y.to(torch.int64)


# ----------------------------------------------------------------- in-place ops


def _inplace_cases():
    one = 1.0
    return {
        "add_mc": (lambda x: x.add_(mcv([1e-20, 2.0, 3.0], 2, f64)), lambda v: v + [Fraction(1e-20), 2, 3]),
        "add_alpha": (lambda x: x.add_(mcv([1.0, 1.0, 1.0], 2, f64), alpha=0.1), lambda v: v + Fraction(0.1)),
        "add_plain": (lambda x: x.add_(torch.full((3,), 1e-20, dtype=f64)), lambda v: v + Fraction(1e-20)),
        "add_scalar": (lambda x: x.add_(1e-20), lambda v: v + Fraction(1e-20)),
        "sub_mc": (lambda x: x.sub_(mcv([one, one, one], 2, f64) + 1e-22), lambda v: v - 1 - Fraction(1e-22)),
        "sub_scalar": (lambda x: x.sub_(0.1), lambda v: v - Fraction(0.1)),
        "mul_mc": (lambda x: x.mul_(mcv([3.0, 3.0, 3.0], 2, f64) + 1e-20), lambda v: v * (3 + Fraction(1e-20))),
        "mul_scalar": (lambda x: x.mul_(0.1), lambda v: v * Fraction(0.1)),
        "div_mc": (lambda x: x.div_(mcv([3.0, 7.0, -1.5], 2, f64)), lambda v: v / [3, 7, Fraction(-3, 2)]),
        "div_scalar": (lambda x: x.div_(3), lambda v: v / 3),
        "copy_mc": (lambda x: x.copy_(hm.from_mpmath(["0.1", "0.2", "0.3"], nc=2, dtype=f64)), None),
        "copy_plain": (
            lambda x: x.copy_(torch.tensor([0.5, 0.25, 2.0], dtype=f64)),
            lambda v: np.array([Fraction(1, 2), Fraction(1, 4), 2], dtype=object),
        ),
        "zero_": (lambda x: x.zero_(), lambda v: v * 0),
        "fill_": (lambda x: x.fill_(0.1), lambda v: v * 0 + Fraction(0.1)),
        "fill_mc": (lambda x: x.fill_(hm.mc(1.0, nc=2, dtype=f64) + 1e-25), lambda v: v * 0 + 1 + Fraction(1e-25)),
    }


@pytest.mark.parametrize("name", sorted(_inplace_cases()))
def test_in_place_op_updates_the_same_object_and_its_views(name):
    op, reference = _inplace_cases()[name]
    x = hm.mc(torch.tensor([1.0, -2.0, 0.5], dtype=f64), nc=2) + 1e-18
    before = exact(x)
    comps = x.components
    ptr = comps.data_ptr()
    view = x[1:]
    version = x._version
    out = op(x)
    assert out is x
    assert x.components is comps and x.components.data_ptr() == ptr
    assert x._version > version
    assert x.nc == 2 and x.dtype == f64
    assert_normalised(x)
    assert (exact(view) == exact(x)[1:]).all()
    if reference is None:
        want = exact(hm.from_mpmath(["0.1", "0.2", "0.3"], nc=2, dtype=f64))
    else:
        want = reference(before)
    assert_within(x, want, f64, 2, BOUNDS["mul"])


def test_in_place_op_on_a_view_changes_the_base():
    x = hm.mc(torch.arange(6, dtype=f64).reshape(2, 3), nc=2)
    x[0].add_(1e-20)
    x.t()[2].mul_(2.0)
    x.view(6)[4:5].copy_(hm.mc(torch.tensor([0.1], dtype=f64), nc=2))
    want = [[Fraction(1e-20), 1 + Fraction(1e-20), 2 * (2 + Fraction(1e-20))], [3, Fraction(0.1), 10]]
    assert exact(x).tolist() == want


def test_in_place_keeps_the_target_nc_and_rejects_other_dtypes():
    x = mcv([1.0, 2.0], 2, f64)
    y = hm.from_mpmath(["1e-20", "1e-40"], nc=3, dtype=f64)
    x.add_(y)
    assert x.nc == 2
    assert_within(x, [1, 2] + exact(y), f64, 2, BOUNDS["add"])
    with pytest.raises(TypeError, match=r"float64.*float32|float32.*float64"):
        x.add_(mcv([1.0, 1.0], 2, f32))
    with pytest.raises(TypeError, match=r"float32"):
        x.copy_(mcv([1.0, 1.0], 2, f32))


def test_in_place_change_of_a_saved_tensor_is_detected_by_autograd():
    x = mcv([1.0, 2.0], 2, f64, requires_grad=True)
    y = x * x
    with torch.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(y, x, torch.ones_like(y))


# ------------------------------------------------------------------------ autograd


def _points(dtype: torch.dtype, nc: int, lo: float = 0.3, hi: float = 1.8, n: int = 5) -> hm.MCTensor:
    """``n`` points in [lo, hi] with a nonzero tail in every component."""
    with mpmath.workprec(600):
        values = [mpmath.mpf(lo) + (hi - lo) * mpmath.mpf(k) / (n - 1) + mpmath.mpf(1) / (7 * 10**14 * (k + 3)) for k in range(n)]
    return hm.from_mpmath(values, nc=nc, dtype=dtype)


def _mp_min(a, b):
    return a if a <= b else b


def _mp_max(a, b):
    return a if a >= b else b


_M = mpmath
#: name: (torch function on MCTensors, the same function on mpf, shift of the points)
GRAD_OPS = {
    "add": (lambda x: x + x * x, lambda x: x + x * x),
    "add_scalar": (lambda x: x + 0.1, lambda x: x + _M.mpf(0.1)),
    "sub": (lambda x: x - 0.1 * x * x, lambda x: x - _M.mpf(0.1) * x * x),
    "rsub": (lambda x: 1.0 - x * x, lambda x: 1 - x * x),
    "mul": (lambda x: x * x * x, lambda x: x**3),
    "mul_plain": (lambda x: x * torch.full(x.shape, 3.25, dtype=x.dtype), lambda x: x * _M.mpf(3.25)),
    "div": (lambda x: x / (1.0 + x * x), lambda x: x / (1 + x * x)),
    "rdiv": (lambda x: 2.5 / x, lambda x: _M.mpf(2.5) / x),
    "neg": (lambda x: -(x * x), lambda x: -(x * x)),
    "abs": (lambda x: (x - 1.0).abs(), lambda x: abs(x - 1)),
    "sqrt": (torch.sqrt, _M.sqrt),
    "rsqrt": (torch.rsqrt, lambda x: 1 / _M.sqrt(x)),
    "reciprocal": (torch.reciprocal, lambda x: 1 / x),
    "square": (torch.square, lambda x: x * x),
    "pow_3": (lambda x: x**3, lambda x: x**3),
    "pow_-2": (lambda x: x**-2, lambda x: x**-2),
    "pow_0.5": (lambda x: x**0.5, _M.sqrt),
    "pow_1.5": (lambda x: x**1.5, lambda x: x ** _M.mpf(1.5)),
    "clamp": (lambda x: x.clamp(0.5, 1.5), lambda x: _mp_min(_mp_max(x, 0.5), 1.5)),
    "clamp_min": (lambda x: torch.clamp_min(x, 1.0), lambda x: _mp_max(x, 1)),
    "maximum": (lambda x: torch.maximum(x, 2.0 - x), lambda x: _mp_max(x, 2 - x)),
    "minimum": (lambda x: torch.minimum(x * x, x), lambda x: _mp_min(x * x, x)),
    "where": (lambda x: torch.where(x > 1.0, x * x, 3.0 * x), lambda x: x * x if x > 1 else 3 * x),
    "relu": (lambda x: torch.relu(x - 1.0), lambda x: _mp_max(x - 1, 0)),
    "exp": (torch.exp, _M.exp),
    "expm1": (torch.expm1, _M.expm1),
    "log": (torch.log, _M.log),
    "log1p": (torch.log1p, _M.log1p),
    "sinh": (torch.sinh, _M.sinh),
    "cosh": (torch.cosh, _M.cosh),
    "tanh": (torch.tanh, _M.tanh),
    "sigmoid": (torch.sigmoid, lambda x: 1 / (1 + _M.exp(-x))),
    "asinh": (torch.asinh, _M.asinh),
    "acosh": (lambda x: torch.acosh(x + 1.0), lambda x: _M.acosh(x + 1)),
    "atanh": (lambda x: torch.atanh(x * 0.5), lambda x: _M.atanh(x / 2)),
    "sin": (lambda x: torch.sin(x * 2.0), lambda x: _M.sin(x * 2)),
    "cos": (lambda x: torch.cos(x * 2.0), lambda x: _M.cos(x * 2)),  # 2x: the points stay away from k pi
    "tan": (torch.tan, _M.tan),
}


@pytest.mark.parametrize("dtype, nc", [(f64, 2), (f64, 3), (f32, 2)])
@pytest.mark.parametrize("name", list(GRAD_OPS))
def test_elementwise_gradient_matches_mpmath_derivative(name, dtype, nc):
    fn, fn_mp = GRAD_OPS[name]
    x = _points(dtype, nc).requires_grad_()
    y = fn(x)
    assert isinstance(y, hm.MCTensor) and y.nc == nc and y.dtype == dtype
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert isinstance(g, hm.MCTensor) and g.nc == nc and g.dtype == dtype
    prec = working_prec(dtype, nc) + 100
    with mpmath.workprec(prec):
        want = [mpmath.diff(fn_mp, v) for v in components_to_mpf(x.components)]
    assert_within(g, want, dtype, nc, "grad", msg=f"d/dx {name}")


def test_gradient_of_a_scalar_loss_is_an_mctensor_leaf_grad():
    x = mcv([0.5, 1.5, 2.5], 2, f64, requires_grad=True)
    loss = (x * x).sum()
    assert isinstance(loss, hm.MCTensor) and loss.shape == ()
    loss.backward()
    assert isinstance(x.grad, hm.MCTensor) and x.grad.nc == 2
    assert exact(x.grad).tolist() == [1, 3, 5]
    # a second backward accumulates into the MC grad
    (x * 1e-20).sum().backward()
    assert isinstance(x.grad, hm.MCTensor)
    assert_within(x.grad, [k + Fraction(1e-20) for k in (1, 3, 5)], f64, 2, BOUNDS["add"])


def test_reduction_gradients():
    x = _points(f64, 2, n=6).reshape(2, 3).requires_grad_()
    xs = components_to_mpf(x.components)
    with mpmath.workprec(300):
        (g,) = torch.autograd.grad(x.sum(), x)
        assert isinstance(g, hm.MCTensor) and exact(g).tolist() == [[1] * 3] * 2
        (g,) = torch.autograd.grad(x.mean(), x)
        assert_within(g, mpmath.mpf(1) / 6, f64, 2, "grad")
        (g,) = torch.autograd.grad(x.mean(1).sum(), x)
        assert_within(g, mpmath.mpf(1) / 3, f64, 2, "grad")
        (g,) = torch.autograd.grad(x.norm(), x)
        nrm = mpmath.sqrt(sum(v * v for v in xs.flat))
        assert_within(g, xs / nrm, f64, 2, "grad")
        (g,) = torch.autograd.grad(torch.linalg.vector_norm(x, dim=1).sum(), x)
        rows = [mpmath.sqrt(sum(v * v for v in row)) for row in xs]
        assert_within(g, np.array([[v / rows[i] for v in row] for i, row in enumerate(xs)], dtype=object), f64, 2, "grad")


def test_matmul_gradients():
    a = _points(f64, 2, n=6).reshape(2, 3).requires_grad_()
    b = _points(f64, 2, lo=-1.0, hi=1.0, n=12).reshape(3, 4).requires_grad_()
    w = _points(f64, 2, lo=0.5, hi=2.0, n=8).reshape(2, 4)
    ga, gb = torch.autograd.grad((a @ b) * w, (a, b), torch.ones(2, 4, dtype=f64))
    assert isinstance(ga, hm.MCTensor) and isinstance(gb, hm.MCTensor)
    A, B, W = exact(a), exact(b), exact(w)
    assert_within(ga, W.dot(B.T), f64, 2, "grad")
    assert_within(gb, A.T.dot(W), f64, 2, "grad")


def _tiny_weights(shape) -> hm.MCTensor:
    """Weights ``k + k * 2**-70`` with small integers k: every sum of a few is exact in nc=2."""
    k = (torch.arange(math.prod(shape), dtype=f64).reshape(shape) % 5) + 1
    return hm.MCTensor.from_components(torch.stack([k, k * 2.0**-70], -1))


@pytest.mark.parametrize("name", sorted(set(SHAPE_OPS) - {"clone", "contiguous"}) + ["clone", "contiguous"])
def test_shape_op_gradient_is_the_exact_adjoint(name):
    op = SHAPE_OPS[name]
    x = _base_mc(nc=2).requires_grad_()
    y = op(x)
    w = _tiny_weights(y.shape)
    (g,) = torch.autograd.grad(y, x, w)
    assert isinstance(g, hm.MCTensor) and g.shape == x.shape and g.nc == 2
    # the adjoint is linear: apply it to each component of w in plain float64 (exact here)
    want = np.zeros(tuple(x.shape), dtype=object)
    for k in range(2):
        xp = x.components[..., 0].detach().clone().requires_grad_()
        (gk,) = torch.autograd.grad(op(xp), xp, w.components[..., k].contiguous())
        want = want + np.vectorize(Fraction, otypes=[object])(gk.numpy())
    assert (exact(g) == want).all()


def test_index_gradients_accumulate_duplicates_in_mc():
    x = mcv([1.0, 2.0, 3.0], 2, f64, requires_grad=True)
    idx = torch.tensor([0, 2, 0, 0])
    w = mcv([1.0, 5.0, 1e-20, -1e-21], 2, f64)
    for y in (x[idx], x.index_select(0, idx), x.gather(0, idx)):
        (g,) = torch.autograd.grad(y, x, w)
        # plain float64 would lose the 1e-20: 1 + 1e-20 - 1e-21 == 1.0
        assert_within(g, [1 + Fraction(1e-20) - Fraction(1e-21), 0, 5], f64, 2, BOUNDS["add"])


@pytest.mark.parametrize("nc", [2, 3])
def test_gradient_of_squared_difference_over_y_far_below_precision(nc):
    # f(x, y) = (x - y)^2 / y with x - y = 1e-25: far below the precision of x
    x = (hm.mc(1.0, nc=nc, dtype=f64) + 1e-25).requires_grad_()
    y = hm.mc(1.0, nc=nc, dtype=f64).requires_grad_()
    f = (x - y) ** 2 / y
    gx, gy = torch.autograd.grad(f, (x, y))
    assert isinstance(gx, hm.MCTensor) and isinstance(gy, hm.MCTensor)
    with mpmath.workprec(3 * 53 + 100):
        X, Y = x.to_mpmath().item(), y.to_mpmath().item()
        d = X - Y
        assert_within(gx, 2 * d / Y, f64, nc, "grad")
        assert_within(gy, -2 * d / Y - d * d / (Y * Y), f64, nc, "grad")
    # a leading-component-only (plain float64) gradient is exactly zero here
    xp = torch.tensor(1.0 + 1e-25, dtype=f64, requires_grad=True)
    (gp,) = torch.autograd.grad((xp - 1.0) ** 2, xp)
    assert gp.item() == 0.0 and gx.approx().item() != 0.0


@pytest.mark.parametrize("nc", [2, 3])
def test_gradient_of_halfspace_distance_far_below_precision(nc):
    # acosh(1 + (x - y)^2 / (2 a b)) with x - y = 1e-25 and a = b = 1e-25: argument 1.5
    x = (hm.mc(1.0, nc=nc, dtype=f64) + 1e-25).requires_grad_()
    y = hm.mc(1.0, nc=nc, dtype=f64)
    a = hm.mc(1e-25, nc=nc, dtype=f64)
    b = hm.mc(1e-25, nc=nc, dtype=f64)
    dist = torch.acosh(1.0 + (x - y) ** 2 / (2.0 * a * b))
    (gx,) = torch.autograd.grad(dist, x)
    assert isinstance(gx, hm.MCTensor)
    with mpmath.workprec(3 * 53 + 100):
        X, Y, A, B = (t.to_mpmath().item() for t in (x, y, a, b))
        z = 1 + (X - Y) ** 2 / (2 * A * B)
        assert abs(z - 1.5) < mpmath.mpf(0.1)  # well away from 1
        want = ((X - Y) / (A * B)) / mpmath.sqrt(z * z - 1)
        assert_within(gx, want, f64, nc, "grad")


# -------------------------------------------------- modules, serialisation, optimizers


class _Tiny(nn.Module):
    def __init__(self, nc: int = 2):
        super().__init__()
        self.weight = nn.Parameter(hm.mc(torch.tensor([1.0, -2.0, 0.5], dtype=f64), nc=nc))
        self.register_buffer("offset", hm.mc(torch.tensor([0.25, 0.5, 0.75], dtype=f64), nc=nc))

    def forward(self, x):
        return self.weight * x + self.offset


def test_parameter_of_an_mctensor():
    p = nn.Parameter(hm.mc(torch.ones(3, dtype=f64), nc=3))
    assert isinstance(p, hm.MCTensor) and p.requires_grad and p.is_leaf and p.nc == 3
    m = _Tiny()
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    out = m(torch.ones(3, dtype=f64)).sum()
    out.backward()
    assert isinstance(m.weight.grad, hm.MCTensor) and exact(m.weight.grad).tolist() == [1, 1, 1]


def test_state_dict_round_trip_keeps_the_tail():
    m = _Tiny()
    with torch.no_grad():
        m.weight.add_(1e-25)
    sd = m.state_dict()
    assert set(sd) == {"weight", "offset"} and all(isinstance(v, hm.MCTensor) for v in sd.values())
    m2 = _Tiny()
    weight = m2.weight
    m2.load_state_dict(sd)
    assert m2.weight is weight and isinstance(m2.weight, hm.MCTensor)  # loaded in place
    assert (exact(m2.weight) == exact(m.weight)).all()
    assert exact(m2.weight)[0] == 1 + Fraction(1e-25)
    # a plain float64 state dict loads exactly into MC parameters too
    m2.load_state_dict({"weight": torch.tensor([3.0, 4.0, 5.0], dtype=f64), "offset": torch.zeros(3, dtype=f64)})
    assert exact(m2.weight).tolist() == [3, 4, 5]


@pytest.mark.parametrize("weights_only", [True, False])
def test_torch_save_and_load(weights_only):
    m = _Tiny(nc=3)
    with torch.no_grad():
        m.weight.add_(1e-40)
    x = hm.mc(torch.ones(2, 2, dtype=f32), nc=2, requires_grad=True)
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "x": x, "param": m.weight}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=weights_only)
    w = loaded["model"]["weight"]
    assert isinstance(w, hm.MCTensor) and w.nc == 3 and w.dtype == f64
    assert (exact(w) == exact(m.weight)).all()
    assert isinstance(loaded["x"], hm.MCTensor) and loaded["x"].requires_grad and loaded["x"].dtype == f32
    assert isinstance(loaded["param"], hm.MCTensor) and loaded["param"].requires_grad
    m2 = _Tiny(nc=3)
    m2.load_state_dict(loaded["model"])
    assert (exact(m2.weight) == exact(m.weight)).all()


def test_save_whole_module_and_deepcopy():
    m = _Tiny()
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    m2 = torch.load(buf, weights_only=False)
    assert isinstance(m2.weight, hm.MCTensor) and (exact(m2.weight) == exact(m.weight)).all()
    m3 = copy.deepcopy(m)
    assert isinstance(m3.weight, hm.MCTensor) and m3.weight.requires_grad
    with torch.no_grad():
        m3.weight.add_(1.0)
    assert exact(m.weight).tolist() == [1, -2, Fraction(1, 2)]


def _simulate_sgd(p0, grads, *, lr, momentum, dampening, weight_decay, nesterov, steps):
    """torch.optim.SGD's update rule (foreach=False) in mpmath; hyperparameters are floats.

    Each hyperparameter enters as the double torch passes on (``1 - dampening`` is
    computed in Python floats, like torch does), then everything is exact.
    """
    one_minus_dampening = mpmath.mpf(1 - dampening)
    lr, momentum, weight_decay = mpmath.mpf(lr), mpmath.mpf(momentum), mpmath.mpf(weight_decay)
    p = list(p0)
    buf = None
    for _ in range(steps):
        d = [g + weight_decay * pi for g, pi in zip(grads, p)] if weight_decay else list(grads)
        if momentum:
            buf = list(d) if buf is None else [momentum * b + one_minus_dampening * di for b, di in zip(buf, d)]
            d = [di + momentum * b for di, b in zip(d, buf)] if nesterov else list(buf)
        p = [pi - lr * di for pi, di in zip(p, d)]
    return p


@pytest.mark.parametrize("foreach", [False, None])
@pytest.mark.parametrize(
    "momentum, dampening, weight_decay, nesterov",
    [(0.0, 0.0, 0.0, False), (0.9, 0.0, 0.0, False), (0.9, 0.1, 1e-3, False), (0.9, 0.0, 1e-3, True)],
)
def test_sgd_update_is_computed_in_mc_arithmetic(foreach, momentum, dampening, weight_decay, nesterov):
    lr, steps = 0.1, 3
    p = nn.Parameter(hm.mc(torch.tensor([1.0, -2.0, 3.0], dtype=f64), nc=2))
    grad_values = [1e-19, 3e-19, -2e-19]  # lr * grad ~ 1e-20: invisible in float64
    g = hm.mc(torch.tensor(grad_values, dtype=f64), nc=2)
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, foreach=foreach)
    buffers = []
    for _ in range(steps):
        opt.zero_grad()
        (p * g).sum().backward()
        assert isinstance(p.grad, hm.MCTensor)
        opt.step()
        if momentum:
            buffers.append(opt.state[p]["momentum_buffer"])
    assert isinstance(p, hm.MCTensor) and p.nc == 2
    if momentum:
        assert all(b is buffers[0] for b in buffers) and isinstance(buffers[0], hm.MCTensor)
    with mpmath.workprec(400):
        want = _simulate_sgd(
            [mpmath.mpf(v) for v in (1.0, -2.0, 3.0)],
            [mpmath.mpf(v) for v in grad_values],
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            steps=steps,
        )
    assert_within(p, want, f64, 2, 16)
    if not weight_decay:
        # the leading components did not move; the update lives in the tail
        assert p.components[..., 0].tolist() == [1.0, -2.0, 3.0]
        assert (p.components[..., 1] != 0).all()
        assert_normalised(p)


def test_sgd_optimizer_state_dict_round_trip():
    p = nn.Parameter(mcv([1.0, 2.0], 2, f64))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False)
    (p * 1e-19).sum().backward()
    opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)  # weights_only=True
    mom = sd["state"][0]["momentum_buffer"]
    assert isinstance(mom, hm.MCTensor) and exact(mom).tolist() == [Fraction(1e-19)] * 2
    opt2 = torch.optim.SGD([nn.Parameter(mcv([1.0, 2.0], 2, f64))], lr=0.1, momentum=0.9, foreach=False)
    opt2.load_state_dict(sd)
    assert isinstance(next(iter(opt2.state.values()))["momentum_buffer"], hm.MCTensor)


# --------------------------------------------------------------- nc=1 is plain torch


@FAST
@given(data=st.data())
def test_nc1_equals_plain_torch_bitwise(data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    n = data.draw(st.integers(1, 16), label="n")
    a = torch.tensor(data.draw(st.lists(floats_of(dtype), min_size=n, max_size=n)), dtype=f64).to(dtype)
    b = torch.tensor(data.draw(st.lists(floats_of(dtype), min_size=n, max_size=n)), dtype=f64).to(dtype)
    s = data.draw(st.one_of(st.sampled_from([0.1, 2.0, -3.0, 1e-3, 1 / 3]), st.floats(-1e4, 1e4)), label="scalar")
    A, B = hm.mc(a, nc=1), hm.mc(b, nc=1)
    assert A.nc == 1 and A.dtype == dtype
    with np.errstate(invalid="ignore"):  # IEEE sqrt (torch's CPU sqrt is not): float64's, rounded once
        ieee_sqrt = torch.from_numpy(np.sqrt(a.double().numpy())).to(dtype)
    cases = {
        "mc+mc": (A + B, a + b),
        "mc-mc": (A - B, a - b),
        "mc*mc": (A * B, a * b),
        "mc/mc": (A / B, a / b),
        "sqrt": (torch.sqrt(A), ieee_sqrt),
        "mc+plain": (A + b, a + b),
        "plain-mc": (a - B, a - b),
        "mc*plain": (A * b, a * b),
        "plain/mc": (a / B, a / b),
        "mc/plain": (A / b, a / b),
        "mc+s": (A + s, a + s),
        "s-mc": (s - A, s - a),
        "mc*s": (A * s, a * s),
        "mc/s": (A / s, a / s),
        "s/mc": (s / A, s / a),
        "torch.sub": (torch.sub(A, B), torch.sub(a, b)),
    }
    for name, (got, want) in cases.items():
        assert isinstance(got, hm.MCTensor) and got.nc == 1, name
        assert same_values(got.components[..., 0], want), f"{name}: {got.components[..., 0]} != {want}"


# ---------------------------------------------------------------------- robustness


def _special_cases(dtype):
    big = torch.finfo(dtype).max
    inf, nan = math.inf, math.nan
    return {
        "nan+1": (lambda x, y: x + y, nan, 1.0),
        "inf+1": (lambda x, y: x + y, inf, 1.0),
        "-inf+1": (lambda x, y: x + y, -inf, 1.0),
        "inf-inf": (lambda x, y: x - y, inf, inf),
        "big+big": (lambda x, y: x + y, big, big),
        "nan*2": (lambda x, y: x * y, nan, 2.0),
        "inf*2": (lambda x, y: x * y, inf, 2.0),
        "inf*0": (lambda x, y: x * y, inf, 0.0),
        "big*big": (lambda x, y: x * y, big, big),
        "big*2_scalar": (lambda x, y: x * 2.0, big, 2.0),
        "1/0": (lambda x, y: x / y, 1.0, 0.0),
        "0/0": (lambda x, y: x / y, 0.0, 0.0),
        "1/inf": (lambda x, y: x / y, 1.0, inf),
        "big/0.5": (lambda x, y: x / 0.5, big, 0.5),
        "sqrt(-1)": (lambda x, y: torch.sqrt(x), -1.0, 0.0),
        "sqrt(inf)": (lambda x, y: torch.sqrt(x), inf, 0.0),
        "sqrt(nan)": (lambda x, y: torch.sqrt(x), nan, 0.0),
        "-inf": (lambda x, y: -x, inf, 0.0),
        "abs(-inf)": (lambda x, y: x.abs(), -inf, 0.0),
    }


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_nan_and_inf_propagate_and_overflow_gives_inf(dtype, nc):
    failures = []
    for name, (fn, a, b) in _special_cases(dtype).items():
        want = fn(torch.tensor([a], dtype=dtype), torch.tensor([b], dtype=dtype))
        got = fn(hm.mc(torch.tensor([a], dtype=dtype), nc=nc), hm.mc(torch.tensor([b], dtype=dtype), nc=nc))
        lead, tail = got.components[..., 0], got.components[..., 1:]
        finite_ok = bool(torch.isfinite(want).all()) or bool((tail == 0).all())
        if not (same_values(lead, want) or (torch.isnan(lead).all() and torch.isnan(want).all())) or not finite_ok:
            failures.append(f"{name}: got {got.components.tolist()}, want {want.tolist()}")
    assert not failures, "; ".join(failures)


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_sqrt_of_largest_float_is_finite_and_accurate(dtype, nc):
    # sqrt(max) lies within u^2 of a rounding midpoint in float64, so only the value (not
    # the leading component) is compared; the point is that the Newton steps don't overflow.
    big = torch.finfo(dtype).max
    got = torch.sqrt(hm.mc(torch.tensor([big], dtype=dtype), nc=nc))
    assert bool(torch.isfinite(got.components).all())
    with mpmath.workprec(nc * 53 + 80):
        exact = mpmath.sqrt(mpmath.mpf(big))
        err = abs(got.to_mpmath()[0] - exact) / exact
    assert err <= 8 * mpmath.mpf(2) ** (-nc * {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}[dtype])


def test_nan_is_never_clamped_away():
    x = hm.mc(torch.tensor([math.nan, 1.0]), nc=2)
    for y in (
        x.clamp(0.0, 2.0),
        torch.maximum(x, mcv([0.0, 0.0], 2, f32)),
        torch.minimum(x, mcv([5.0, 5.0], 2, f32)),
        torch.relu(x),
        x.abs(),
        x * 1.0,
        x.clamp_min(3.0),
        x.clamp_max(-3.0),
    ):
        assert torch.isnan(y.components[0, 0])
    assert torch.isnan(x.sum().components[..., 0])


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: b + a,
        lambda a, b: a - b,
        lambda a, b: b - a,
        lambda a, b: a * b,
        lambda a, b: b * a,
        lambda a, b: a / b,
        lambda a, b: b / a,
        lambda a, b: torch.add(a, b),
        lambda a, b: torch.where(torch.tensor([True]), a, b),
        lambda a, b: a < b,
        lambda a, b: a == b,
        lambda a, b: torch.maximum(a, b),
        lambda a, b: torch.cat([a, b]),
    ],
    ids=["add", "radd", "sub", "rsub", "mul", "rmul", "div", "rdiv", "torch.add", "where", "lt", "eq", "maximum", "cat"],
)
def test_mctensors_of_different_dtypes_raise_type_error_naming_both(op):
    a, b = mcv([1.0], 2, f64), mcv([1.0], 2, f32)
    with pytest.raises(TypeError, match=r"torch\.float64.*torch\.float32|torch\.float32.*torch\.float64"):
        op(a, b)


@pytest.mark.parametrize(
    "op",
    [lambda a, b: a + b, lambda a, b: b + a, lambda a, b: a * b, lambda a, b: b / a, lambda a, b: torch.mul(a, b), lambda a, b: a > b],
    ids=["add", "radd", "mul", "rdiv", "torch.mul", "gt"],
)
def test_plain_float_tensor_of_another_dtype_raises_type_error(op):
    a, b = mcv([1.0, 2.0], 2, f64), torch.ones(2, dtype=f32)
    with pytest.raises(TypeError, match=r"plain tensor of dtype torch\.float32"):
        op(a, b)


def test_matmul_of_different_dtypes_raises_type_error():
    a, b = hm.mc(torch.ones(2, 2, dtype=f64), nc=2), hm.mc(torch.ones(2, 2, dtype=f32), nc=2)
    with pytest.raises(TypeError, match=r"torch\.float64.*torch\.float32"):
        a @ b
    with pytest.raises(TypeError, match=r"torch\.float32"):
        a @ torch.ones(2, 2, dtype=f32)


def test_python_scalars_integer_tensors_and_unrelated_types():
    x = mcv([1.0, 2.0], 2, f32)
    assert exact(x + 1).tolist() == [2, 3]
    assert exact(x * torch.tensor([2, 3])).tolist() == [2, 6]  # integer tensors convert exactly
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "1"
    assert (x == None) is False  # noqa: E711 - torch semantics: not a tensor comparison
    assert x != None  # noqa: E711
    assert len({x, x}) == 1  # still hashable


@pytest.mark.parametrize("nc", [0, -1])
def test_nc_below_one_raises_value_error(nc):
    with pytest.raises(ValueError, match=rf"^mc: nc must be an int >= 1; got {nc}$"):
        hm.mc(1.0, nc=nc)
    with pytest.raises(ValueError, match=rf"^from_mpmath: nc must be an int >= 1; got {nc}$"):
        hm.from_mpmath(["0.1"], nc=nc)
    with pytest.raises(ValueError, match=rf"^mc: nc must be an int >= 1; got {nc}$"):
        hm.mc(mcv([1.0], 2, f64), nc=nc)


def test_nc_of_wrong_type_raises_type_error():
    with pytest.raises(TypeError, match=r"^mc: nc must be an int >= 1; got float 2\.0$"):
        hm.mc(1.0, nc=2.0)
    with pytest.raises(TypeError, match=r"^mc: nc must be an int >= 1; got bool True$"):
        hm.mc(1.0, nc=True)
    with pytest.raises(TypeError, match=r"^from_mpmath: nc must be an int >= 1; got str '2'$"):
        hm.from_mpmath(["0.1"], nc="2")


def test_bad_components_tensors_raise():
    with pytest.raises(ValueError, match=r"trailing component dimension.*got shape \(\)"):
        hm.MCTensor.from_components(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"trailing component dimension.*got shape \(3, 0\)"):
        hm.MCTensor.from_components(torch.ones(3, 0))
    for bad in (torch.tensor([1, 2]), torch.tensor([True]), torch.ones(2, dtype=torch.complex64)):
        with pytest.raises(TypeError, match=rf"component dtype must be one of float16, bfloat16, float32, float64; got {bad.dtype}"):
            hm.MCTensor.from_components(bad)
    with pytest.raises(TypeError, match=r"plain torch\.Tensor of shape \(\*shape, nc\); got MCTensor"):
        hm.MCTensor.from_components(mcv([1.0], 2, f64))
    with pytest.raises(TypeError, match=r"plain torch\.Tensor.*got list"):
        hm.MCTensor.from_components([1.0, 2.0])
    with pytest.raises(TypeError, match=r"component dtype must be one of.*got torch\.int32"):
        hm.mc([1.0], dtype=torch.int32)


@pytest.mark.parametrize(
    "fn, op_name",
    [
        (lambda x: torch.fft.fft(x), "aten._fft_r2c"),
        (lambda x: torch.cumsum(x, 0), "aten.cumsum"),
        (lambda x: torch.cumprod(x, 0), "aten.cumprod"),
        (lambda x: torch.sort(x), "aten.sort"),
    ],
    ids=["fft", "cumsum", "cumprod", "sort"],
)
def test_unsupported_op_raises_not_implemented_error_naming_it(fn, op_name):
    x = mcv([1.0, 2.0, 3.0, 4.0], 2, f64)
    with pytest.raises(NotImplementedError, match=rf"{re.escape(op_name)}.*no silent fallback"):
        fn(x)


def test_factory_with_another_dtype_raises_type_error():
    x = mcv([1.0], 2, f64)
    with pytest.raises(TypeError, match=r"dtype=torch\.float32 differs from the MCTensor's component dtype torch\.float64"):
        torch.ones_like(x, dtype=f32)
    with pytest.raises(TypeError, match=r"would change the component dtype torch\.float64"):
        torch.sum(x, dtype=f32)


# -------------------------------------------------------------------- mixed nc, scalars


@pytest.mark.parametrize("dtype", [f64, f32])
def test_mixed_nc_gives_the_larger_nc(dtype):
    a = hm.from_mpmath(["0.1", "-1.7", "3"], nc=2, dtype=dtype)
    b = hm.from_mpmath(["1e-12", "0.3", "-0.3333333333333333333333333333"], nc=3, dtype=dtype)
    A, B = exact(a), exact(b)
    for got, want, bound in (
        (a + b, A + B, "add"),
        (b + a, A + B, "add"),
        (a - b, A - B, "sub"),
        (b - a, B - A, "sub"),
        (a * b, A * B, "mul"),
        (b * a, A * B, "mul"),
        (a / b, A / B, "div"),
        (b / a, B / A, "div"),
    ):
        assert isinstance(got, hm.MCTensor) and got.nc == 3
        assert_within(got, want, dtype, 3, bound)
    assert torch.cat([a, b]).nc == 3 and (exact(torch.cat([a, b])) == np.concatenate([A, B])).all()
    assert torch.stack([b, a]).nc == 3
    assert torch.where(torch.tensor([True, False, True]), a, b).nc == 3
    assert (a < b).tolist() == [a_ < b_ for a_, b_ in zip(A, B)]


@pytest.mark.parametrize("dtype, nc", CONFIGS)
def test_python_scalar_not_representable_is_used_at_mc_precision(dtype, nc):
    p = float_format(dtype)[0]
    one = hm.mc(1.0, nc=nc, dtype=dtype)
    tenth = Fraction(0.1)  # the double 0.1, exactly
    # the constant carries the double to u**nc (exactly when nc * p >= 53), then one op
    bound = (1 + BOUNDS["mul"]) * Fraction(2) ** (-nc * p)
    for got, want in (
        (one * 0.1, tenth),
        (0.1 * one, tenth),
        (one + 0.1, 1 + tenth),
        (one - 0.1, 1 - tenth),
        (0.1 - one, tenth - 1),
        (one / 0.1, 1 / tenth),
        (0.1 / one, tenth),
    ):
        assert got.nc == nc and got.dtype == dtype
        err = abs(exact(got).item() - want) / abs(want)
        assert err <= bound, (got, float(err / bound))


def test_python_scalar_times_float32_nc2_is_the_double_to_2_pow_minus_48():
    got = hm.mc(1.0, nc=2, dtype=f32) * 0.1
    assert got.dtype == f32 and got.nc == 2
    assert abs(exact(got).item() - Fraction(0.1)) <= Fraction(0.1) * Fraction(1, 2**48)
    # not the float32 rounding of 0.1
    assert exact(got).item() != Fraction(torch.tensor(0.1, dtype=f32).item())
    # integers beyond 2**24 are exact too
    assert exact(hm.mc(1.0, nc=2, dtype=f32) * 16777217).item() == 16777217


# --------------------------------------------------------------------- comparisons


@FAST
@given(data=st.data())
def test_comparisons_are_exact(data):
    dtype, nc = data.draw(st.sampled_from(CONFIGS), label="config")
    p, emin, emax = float_format(dtype)
    c = data.draw(expansions(dtype, nc, min_exp=emin + nc * p, max_exp=min(emax - 2, 20), shape=(12,), allow_zero=True))
    a = hm.MCTensor.from_components(c)
    # b: equal, or differing only in the last component, or a random other value
    kind = data.draw(st.sampled_from(["equal", "last", "flip"]), label="kind")
    cb = c.clone()
    if kind == "last":
        cb[..., -1] = torch.nextafter(c[..., -1], torch.full_like(c[..., -1], math.inf))
    elif kind == "flip":
        cb = -cb.flip(0)
    b = hm.MCTensor.from_components(cb)
    A, B = exact(a), exact(b)
    for got, want in (
        (a < b, A < B),
        (a <= b, A <= B),
        (a > b, A > B),
        (a >= b, A >= B),
        (a == b, A == B),
        (a != b, A != B),
        (torch.lt(a, b), A < B),
        (torch.eq(a, b), A == B),
    ):
        assert type(got) is torch.Tensor and got.dtype == torch.bool and got.shape == a.shape
        assert got.tolist() == want.tolist()


def test_comparisons_with_scalars_plain_tensors_and_tails():
    x = mcv([1.0, 2.0, 3.0], 2, f64) + 1e-20
    y = mcv([1.0, 2.0, 3.0], 2, f64)
    assert (x > y).all() and not (x == y).any() and (x != y).all() and not (x <= y).any()
    assert (x > 1.0).tolist() == [True, True, True]
    assert (x >= 2.0).tolist() == [False, True, True]
    assert (x < torch.tensor([2.0, 2.0, 2.0], dtype=f64)).tolist() == [True, False, False]
    assert (torch.tensor([2.0, 2.0, 2.0], dtype=f64) < x).tolist() == [False, True, True]
    assert (hm.mc(0.1, nc=3, dtype=f32) == 0.1).item()  # the scalar at MC precision


def test_where_clamp_maximum_minimum_are_exact():
    x = mcv([1.0, 2.0, 3.0], 2, f64) + 1e-20
    y = mcv([1.0, 2.5, 3.0], 2, f64)
    X, Y = exact(x), exact(y)
    w = torch.where(x > 2.0, x, y)
    assert isinstance(w, hm.MCTensor) and exact(w).tolist() == [Y[0], X[1], X[2]]
    assert exact(torch.where(x > 2.0, x, 0.5)).tolist() == [Fraction(1, 2), X[1], X[2]]
    assert exact(torch.where(x > 2.0, torch.zeros(3, dtype=f64), x)).tolist() == [X[0], 0, 0]
    assert exact(x.clamp(min=1.5, max=2.5)).tolist() == [Fraction(3, 2), X[1], Fraction(5, 2)]
    assert exact(x.clamp(max=y)).tolist() == [Y[0], X[1], Y[2]]
    assert exact(torch.clamp(x, min=y)).tolist() == [X[0], Y[1], X[2]]
    assert exact(x.clamp_min(2.0)).tolist() == [2, X[1], X[2]]
    assert exact(x.clamp_max(2.0)).tolist() == [X[0], 2, 2]
    assert exact(torch.maximum(x, y)).tolist() == [X[0], Y[1], X[2]]
    assert exact(torch.minimum(x, y)).tolist() == [Y[0], X[1], Y[2]]
    assert exact(torch.maximum(torch.full((3,), 2.0, dtype=f64), x)).tolist() == [2, X[1], X[2]]
    z = x.clone()
    z.clamp_(max=2.0)
    assert exact(z).tolist() == [X[0], 2, 2]


@pytest.mark.parametrize("dtype, nc", [(f64, 2), (f32, 3)])
def test_nan_compares_unordered_and_propagates_through_maximum_minimum(dtype, nc):
    nan = hm.mc(torch.tensor([math.nan, 1.0], dtype=dtype), nc=nc)
    zero = hm.mc(torch.zeros(2, dtype=dtype), nc=nc)
    # like plain torch: every comparison with NaN is False except !=
    for got, want in (
        (nan == nan, [False, True]),
        (nan != nan, [True, False]),
        (nan < 1.0, [False, False]),
        (nan <= 1.0, [False, True]),
        (nan >= zero, [False, True]),
        (nan > zero, [False, True]),
        (zero == nan, [False, False]),
    ):
        assert got.tolist() == want
    for got in (torch.maximum(nan, zero), torch.maximum(zero, nan), torch.minimum(nan, zero), torch.minimum(zero, nan)):
        assert torch.isnan(got.components[..., 0]).tolist() == [True, False]


def test_linear_algebra_gradients():
    gen = torch.Generator().manual_seed(3)
    a = hm.mc(torch.randn(2, 3, 4, generator=gen, dtype=f64), nc=2) + 1e-20
    b = hm.mc(torch.randn(2, 4, 3, generator=gen, dtype=f64), nc=2)
    v = hm.mc(torch.randn(4, generator=gen, dtype=f64), nc=2) - 1e-21
    c = hm.mc(torch.randn(3, 3, generator=gen, dtype=f64), nc=2)
    a.requires_grad_(), b.requires_grad_(), v.requires_grad_(), c.requires_grad_()
    A, B, V = exact(a), exact(b), exact(v)
    ones = np.ones((3,), dtype=object)
    # dot: d(v . v)/dv = 2 v
    (g,) = torch.autograd.grad(torch.dot(v, v), v)
    assert isinstance(g, hm.MCTensor)
    assert_within(g, 2 * V, f64, 2, "grad")
    # mv: d(sum(A0 v))/dv = sum over rows of A0, d/dA0 = outer(1, v)
    ga, gv = torch.autograd.grad(torch.mv(a[0], v), (a, v), torch.ones(3, dtype=f64))
    assert_within(gv, ones.dot(A[0]), f64, 2, "grad")
    assert_within(ga[0], np.outer(ones, V), f64, 2, "grad")
    # bmm with an MC grad_output W: dA = W B^T, dB = A^T W
    w = hm.mc(torch.randn(2, 3, 3, generator=gen, dtype=f64), nc=2)
    W = exact(w)
    ga, gb = torch.autograd.grad(torch.bmm(a, b), (a, b), w)
    assert_within(ga, np.stack([W[i].dot(B[i].T) for i in range(2)]), f64, 2, "grad")
    assert_within(gb, np.stack([A[i].T.dot(W[i]) for i in range(2)]), f64, 2, "grad")
    # F.linear(x, weight, bias) = x weight^T + bias
    x, weight = a[0], b[0].t()
    gx, gw, gc = torch.autograd.grad(nn.functional.linear(x, weight, c[0]), (a, b, c), w[0])
    assert_within(gx[0], W[0].dot(B[0].T), f64, 2, "grad")
    assert_within(gw[0], A[0].T.dot(W[0]), f64, 2, "grad")
    assert_within(gc[0], W[0].sum(0), f64, 2, "grad")
    # addmm(c, a0, b0, beta, alpha)
    gc, ga = torch.autograd.grad(torch.addmm(c, a[0], b[0], beta=0.5, alpha=2.0), (c, a), w[0])
    assert_within(gc, W[0] * Fraction(1, 2), f64, 2, "grad")
    assert_within(ga[0], 2 * W[0].dot(B[0].T), f64, 2, "grad")


@pytest.mark.cuda
def test_to_cuda_and_back_is_exact_and_ops_run_there():
    x = hm.from_mpmath(["0.1", "-3.3333333333333333333333333", "1e-30"], nc=3, dtype=f64)
    y = x.to("cuda")
    assert isinstance(y, hm.MCTensor) and y.device.type == "cuda" and y.components.device.type == "cuda"
    assert y.nc == 3 and (exact(y.to("cpu")) == exact(x)).all()
    assert "device='cuda" in repr(y)
    z = (y * y + 1.0).to("cpu")
    assert_within(z, exact(x) * exact(x) + 1, f64, 3, BOUNDS["mul"] + BOUNDS["add"])
    assert (y > 0).device.type == "cuda"


def test_from_components_keeps_inf_and_nan():
    c = torch.tensor([[math.inf, 1.0, 0.0], [-math.inf, 0.0, 0.0], [math.nan, 1.0, 2.0], [1.0, math.inf, 0.0]])
    x = hm.MCTensor.from_components(c)
    got = x.to_mpmath()
    assert got[0] == mpmath.inf and got[1] == -mpmath.inf and mpmath.isnan(got[2]) and got[3] == mpmath.inf
    assert (x.components[..., 1:] == 0).all()


def test_indexing_planar_components_gives_the_same_components():
    """``x[idx]``, ``index_select``, ``gather`` and ``embedding`` of an MCTensor whose
    components are planar (as every MC kernel writes them) index plane by plane: the
    same components as indexing the component-last copy, for one integer index (N-D,
    negative, empty), several adjacent or separated indices, a bool mask and slices."""
    torch.manual_seed(3)
    x = hm.mc(torch.randn(50, 4, 3, dtype=torch.float64), nc=3) * 1.0
    assert x._components.stride()[-1] == max(x._components.stride())  # planar
    ref = x._components.contiguous()
    i = torch.randint(0, 50, (7, 2))
    cases = [
        (i,),
        (torch.tensor([-1, 2, 0]),),
        (torch.tensor([], dtype=torch.long),),
        (slice(None), torch.tensor([0, 3])),
        (slice(None), torch.tensor([1, 2]), torch.tensor([0, 2])),
        (torch.tensor([1, 2]), slice(None), torch.tensor([0, 2])),  # separated: result dims first
        (torch.rand(50) > 0.5,),
        (i, slice(1, 3)),
    ]
    for ind in cases:
        assert torch.equal(x[ind]._components, ref[(*ind, slice(None))]), ind
    idx = torch.randint(0, 4, (9,))
    assert torch.equal(x.index_select(1, idx)._components, ref.index_select(1, idx))
    assert torch.equal(x.index_select(-1, idx[:2] % 3)._components, ref.index_select(2, idx[:2] % 3))
    g = torch.randint(0, 4, (50, 2, 3))
    assert torch.equal(torch.gather(x, 1, g)._components, ref.gather(1, g.unsqueeze(-1).expand(50, 2, 3, 3)))
    w = x.reshape(50, 12)
    assert torch.equal(torch.nn.functional.embedding(i, w)._components, w._components.contiguous()[i])
