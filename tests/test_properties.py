"""Property-based tests (hypothesis) for MC construction, arithmetic with broadcasting and
manifold membership, across exponent ranges and the pinned special values of
``tests/oracle.py`` (±0, subnormals, huge and tiny exponents)."""

from __future__ import annotations

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
from tests.oracle import assert_within, components_to_mpf, expansions, floats_of

F64 = torch.float64


@settings(max_examples=200, deadline=None)
@given(v=st.integers(min_value=-(2**170), max_value=2**170), nc=st.integers(1, 4))
def test_mc_int_is_exact_or_refused(v, nc):
    """A Python int becomes exactly its value in nc components, or a ValueError."""
    try:
        x = hm.mc(v, nc=nc, dtype=F64)
    except ValueError as exc:
        assert f"int {v} does not fit exactly in nc={nc}" in str(exc)
        assert abs(v) > 2**53  # anything a double holds always fits
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
    assert_within(s.components, exact_add, F64, 2, "add", relative=False, scale=np.vectorize(
        lambda p, q: abs(p) + abs(q), otypes=[object])(xa, yb))
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
