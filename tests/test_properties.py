"""Property-based tests (hypothesis) for MC construction, arithmetic with broadcasting and
manifold membership, across exponent ranges and the pinned special values of
``tests/oracle.py`` (±0, subnormals, huge and tiny exponents)."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from tests.oracle import assert_within, components_to_fraction, components_to_mpf, expansions, floats_of

F64 = torch.float64


@settings(max_examples=200, deadline=None)
@given(v=st.integers(min_value=-(2**170), max_value=2**170), nc=st.integers(1, 4))
def test_mc_int_is_exact_or_refused(v, nc):
    """A Python int becomes exactly its value in nc components, or a ValueError."""
    try:
        x = hm.mc(v, nc=nc, dtype=F64)
    except ValueError as exc:
        assert f"int {v} does not fit exactly in nc={nc}" in str(exc)
        # refused only if the significant bits span more than nc doubles hold (anything
        # within 53 * nc bits fits: split it into 53-bit pieces)
        span = abs(v).bit_length() - (abs(v) & -abs(v)).bit_length() + 1
        assert span > 53 * nc, f"{v} spans {span} bits and fits in nc={nc} components"
        return
    assert sum(Fraction(c) for c in x.components.tolist()) == v


@settings(max_examples=200, deadline=None)
@given(v=floats_of(F64), nc=st.integers(1, 3))
def test_mc_float_is_exact(v, nc):
    """A double (subnormals, ±0, the largest finite value) is held exactly, sign of zero kept."""
    x = hm.mc(v, nc=nc, dtype=F64)
    c = x.components.tolist()
    assert c[0] == v and all(ci == 0 for ci in c[1:])
    assert np.signbit(c[0]) == np.signbit(v)


@settings(max_examples=60, deadline=None)
@given(
    a=expansions(F64, 2, min_exp=-300, max_exp=300, shape=(4, 1)),
    b=expansions(F64, 2, min_exp=-300, max_exp=300, shape=(3,)),
)
def test_add_mul_broadcast_against_oracle(a, b):
    """``(4, 1) op (3,)`` broadcasts to ``(4, 3)`` and each entry meets its bound."""
    x, y = hm.MCTensor(a), hm.MCTensor(b)
    xa, yb = components_to_mpf(a), components_to_mpf(b)
    with mpmath.workprec(4200):
        exact_add = np.vectorize(lambda p, q: p + q, otypes=[object])(xa, yb)
        exact_mul = np.vectorize(lambda p, q: p * q, otypes=[object])(xa, yb)
    s, m = x + y, x * y
    assert tuple(s.shape) == (4, 3) and tuple(m.shape) == (4, 3)
    assert_within(
        s.components, exact_add, F64, 2, "add", relative=False, scale=np.vectorize(lambda p, q: abs(p) + abs(q), otypes=[object])(xa, yb)
    )
    assert_within(m.components, exact_mul, F64, 2, "mul")


MODELS = [PoincareBall(curvature=-0.5), PoincareHalfspace(), Lorentz(curvature=-2.0)]


@pytest.mark.parametrize("M", MODELS, ids=repr)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 5), nc=st.integers(1, 3))
def test_random_points_are_members_and_pickle(M, seed, n, nc):
    """Random points pass check_point, survive pickling as a parameter, and a broken
    constraint (negated last/time coordinate or a scaled-out ball point) fails it."""
    gen = torch.Generator().manual_seed(seed)
    x = M.random(6, n, nc=nc, dtype=F64, generator=gen)
    assert M.check_point(x) == (True, None)
    p = pickle.loads(pickle.dumps(hm.ManifoldParameter(x, manifold=M)))
    assert p.manifold == M and torch.equal(p.components, x.components)
    bad = x.approx().clone()
    if isinstance(M, PoincareBall):
        bad[0] = bad[0] / bad[0].norm() * 2 / M.c**0.5
    elif isinstance(M, PoincareHalfspace):
        bad[0, -1] = -bad[0, -1]
    else:
        bad[0, 0] = -bad[0, 0]
    ok, reason = M.check_point(bad)
    assert not ok and "first at index (0,)" in reason


# ----------------------------------------------- division at the ends of the exponent range

_MAX = Fraction(torch.finfo(F64).max)

#: (x exponents, y exponents) of the leading components: quotients next to the overflow
#: threshold (some overflow), huge / huge and tiny / tiny (moderate quotients whose
#: remainder products overflowed or underflowed before the operands were scaled), and
#: quotients below the normal range.
_DIV_REGIMES = {
    "top-binade": ((1023, 1023), (-3, 30)),
    "near-overflow": ((1000, 1023), (-3, 30)),
    "huge-by-huge": ((1015, 1023), (1015, 1023)),
    "tiny-by-tiny": ((-1022, -950), (-1022, -950)),
    "underflowing": ((-1000, -700), (300, 400)),
}


def _check_quotient(q, x, y, nc, what):
    """Each entry of ``q`` (components) is within the div bound of the exact quotient of
    the stored operands; ±inf with a zero tail where that quotient exceeds the largest
    double; below the normal range (tail subnormal) within the bound plus one subnormal
    rounding per component (the rules of :func:`hypermc.mcf.arith.div`)."""
    exact = (components_to_fraction(x) / components_to_fraction(y)).reshape(-1)
    comps = (q.components if isinstance(q, hm.MCTensor) else q).reshape(-1, nc)
    over = np.array([abs(e) > _MAX for e in exact], dtype=bool)
    inf = ~torch.isfinite(comps[:, 0]).numpy()
    for i in np.flatnonzero(over & inf):  # overflow: ±inf, zero tail
        assert float(comps[i, 0]) == (float("inf") if exact[i] > 0 else float("-inf")), what
        assert comps[i, 1:].eq(0).all(), f"{what}: tail of an overflowed quotient {comps[i].tolist()}"
    # below the normal range the tail cannot hold u^nc: one rounding to the subnormal
    # spacing per component is allowed on top of the bound (arith.div's rule)
    low = np.array([abs(e) < Fraction(2) ** (-1022 + 53 * nc) for e in exact], dtype=bool)
    floor = nc * Fraction(2) ** -1075
    for i in np.flatnonzero(low):
        got = sum(Fraction(float(c)) for c in comps[i].tolist())
        assert abs(got - exact[i]) <= 8 * Fraction(2) ** (-53 * nc) * abs(exact[i]) + floor, (what, i)
    keep = torch.from_numpy(~(over & inf) & ~low)
    with mpmath.workprec(4200):
        refs = [mpmath.mpf(e.numerator) / e.denominator for e in exact[keep.numpy()]]
    if refs:
        assert_within(comps[keep], refs, F64, nc, "div", msg=what)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), nc=st.sampled_from([2, 3]), regime=st.sampled_from(list(_DIV_REGIMES)))
def test_div_at_the_ends_of_the_range(data, nc, regime):
    """Before: ``mc(finfo.max) / 3`` was NaN (the split inside the remainder product
    overflowed) and tiny / tiny lost the tail to underflow; now within 8 u^nc."""
    (xlo, xhi), (ylo, yhi) = _DIV_REGIMES[regime]
    x = data.draw(expansions(F64, nc, min_exp=xlo, max_exp=xhi, shape=(32,)))
    y = data.draw(expansions(F64, nc, min_exp=ylo, max_exp=yhi, shape=(32,)))
    _check_quotient(hm.MCTensor(x) / hm.MCTensor(y), x, y, nc, f"{regime} div")
    # the float-operand paths (div_float, rdiv_float) share the long division
    b = y[..., :1].clone()
    _check_quotient(hm.MCTensor(x) / b[..., 0], x, torch.nn.functional.pad(b, (0, nc - 1)), nc, "div_float")
    b = x[..., :1].clone()
    _check_quotient(b[..., 0] / hm.MCTensor(y), torch.nn.functional.pad(b, (0, nc - 1)), y, nc, "rdiv_float")


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize(
    "num, den",
    [
        (float(_MAX), 3.0),
        (-float(_MAX), 3.0),
        (float(_MAX), float(_MAX) / 3),
        (float(_MAX), 1.5),
        (float(_MAX), -0.75),
        (2.0**-1000, 3.0 * 2.0**-1000),
        (float(_MAX), 2.0**-60),
        (7 * 2.0**-1074, 3.0 * 2.0**-1074),
        (1.0, float(_MAX)),
    ],
    ids=["max/3", "-max/3", "max/(max/3)", "max/1.5", "max/-0.75", "tiny/tiny", "overflow", "subnormal/subnormal", "1/max"],
)
def test_div_pinned_extremes(num, den, nc):
    """Pinned: the issue's ``mc(finfo.max) / 3`` and its neighbours; ``max / 2^-60``
    overflows to inf with a zero tail."""
    x = hm.mc(torch.tensor([num], dtype=F64), nc=nc)
    y = hm.mc(torch.tensor([den], dtype=F64), nc=nc)
    _check_quotient(x / y, x.components, y.components, nc, f"{num!r} / {den!r}")
    assert bool(torch.isfinite((x / y).components[..., 0]).all()) == math.isfinite(num / den)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), nc=st.sampled_from([2, 3]))
def test_mul_and_sqrt_next_to_the_overflow_threshold(data, nc):
    """mul and sqrt keep their bounds with operands in the top binades (checked together
    with the division fix; they needed no change)."""
    x = data.draw(expansions(F64, nc, min_exp=1000, max_exp=1023, shape=(32,)))
    y = data.draw(expansions(F64, nc, min_exp=-24, max_exp=-1, shape=(32,)))
    xa, yb = components_to_mpf(x), components_to_mpf(y)
    with mpmath.workprec(4200):
        exact_mul = [p * q for p, q in zip(xa, yb)]
        exact_sqrt = [mpmath.sqrt(abs(p)) for p in xa]
    assert_within(hm.MCTensor(x) * hm.MCTensor(y), exact_mul, F64, nc, "mul")
    assert_within(hm.MCTensor(x).abs().sqrt(), exact_sqrt, F64, nc, "sqrt")
