"""Accuracy and semantics tests of the multi-component kernels in :mod:`hypermc.mcf.arith`.

Accuracy: the relative error of every op, against the exact result of the op on the
exact inputs, is at most ``BOUNDS[op]`` units of ``u**nc`` (the one bound table,
``tests/conftest.py``), for float32 and float64 with nc = 1..4, over wide exponent ranges
and in cancellation cases. It is measured two ways:

* against the oracle (``tests.oracle``): ``fractions.Fraction`` for + - x /, mpmath at
  ``working_prec(dtype, nc)`` (>= nc p + 60 bits) for sqrt, on hypothesis-built
  normalised expansions (``tests.oracle.expansions``);
* on 20 000 random expansions per case with the exact integer engine of
  ``tests/mcf/test_eft.py``, through identities that make the error a polynomial in the
  components: ``add: z - (x + y)``, ``mul: z - x y``, ``div: |q - x/y| / |x/y| =
  |q y - x| / |x|`` (exact), ``sqrt: (s - sqrt x) / sqrt x = (s^2 - x) / (x (2 + d))``
  with ``d`` the relative error itself (so ``|s^2 - x| / (2x)`` is accurate to a
  relative ``d/2`` — negligible here).

Exponent ranges: results are kept where all nc components can be normal numbers,
``|result| >= 2**(emin + nc p)``, and far from overflow; float16/bfloat16 are tested in
the ranges where their components hold full precision (NUMERICS.md, "fp16 reality").

Semantics: nc=1 equals the plain torch op bitwise (all four dtypes; sqrt: IEEE's), results are
normalised, mixed nc gives the larger nc, leading dimensions broadcast, inf and NaN
propagate with a zero tail, comparisons/min/max/clamp/where are exact.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import arith
from tests.conftest import BOUNDS
from tests.mcf.test_eft import _LAYOUT, assert_normalised, exact_sums, random_floats, ulp
from tests.oracle import (
    assert_within,
    components_to_fraction,
    components_to_mpf,
    expansions,
    float_format,
    working_prec,
)

DTYPES = [torch.float32, torch.float64]
ALL_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NCS = [1, 2, 3, 4]
N_BULK = 20_000
# invariant checked on every result: |c[i+1]| <= OVERLAP * ulp(c[i]) (1/2 by convention)
OVERLAP = 0.5


def _cap(n: int) -> settings:
    """At most ``n`` hypothesis examples (fewer if the active profile asks for fewer):
    each example is a batch of expansions checked element by element with Fractions."""
    return settings(max_examples=min(settings.default.max_examples, n))


def _p(dtype: torch.dtype) -> int:
    return float_format(dtype)[0]


# =========================================================================== inputs


def _lowest(dtype: torch.dtype, nc: int) -> int:
    """Smallest result exponent where all nc components can be normal: emin + nc p
    (the last component is then >= 2^(emin + p) > 2^emin, with margin)."""
    p, emin, _ = float_format(dtype)
    return emin + nc * p


def operand_range(op: str, dtype: torch.dtype, nc: int) -> tuple[int, int]:
    """Exponent range [lo, hi] of the operands' leading components for ``op`` such that
    the result stays in ``[2^_lowest, 2^(emax-2)]``."""
    _, _, emax = float_format(dtype)
    low = _lowest(dtype, nc)
    if op in ("mul", "div", "square", "mul_float", "div_float", "rdiv_float", "reciprocal"):
        r = min((emax - 4) // 2, -low // 2 - 1)
        return -r, r
    if op == "sqrt":
        return low + 2, emax - 2
    # add/sub: operands themselves in range; cancellation is tested separately
    return low + 2, emax - 3


def random_expansions(n: int, dtype: torch.dtype, nc: int, lo: int, hi: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` normalised expansions of ``dtype`` (shape ``(n, nc)``), vectorised.

    Leading exponent uniform in [lo, hi], random significands and signs; each next
    component has exponent ``e_prev - p - 1 - gap`` (so it is below half an ulp of the
    previous one; gap 0 in 70%, up to p in 20%, up to 3p in 10%), is exactly half an ulp
    (a tie) in 5%, zero in 10% (then the rest is zero), and zero where it would not be a
    normal number.
    """
    p, emin, _ = float_format(dtype)
    bias = 1 - emin
    e = torch.randint(lo, hi + 1, (n,), generator=gen)
    comps = [random_floats(e + bias, dtype, gen)]
    alive = torch.ones(n, dtype=torch.bool)
    for _ in range(1, nc):
        r = torch.rand(n, generator=gen)
        gap = torch.where(
            r < 0.7, 0, torch.where(r < 0.9, torch.randint(0, p + 1, (n,), generator=gen), torch.randint(0, 3 * p + 1, (n,), generator=gen))
        )
        e_new = e - p - 1 - gap
        c = random_floats((e_new + bias).clamp(min=1), dtype, gen)
        tie = torch.rand(n, generator=gen) < 0.05
        half_ulp = torch.ldexp(torch.ones(n, dtype=torch.float64), e - p).to(dtype)
        half_ulp = torch.where(torch.rand(n, generator=gen) < 0.5, -half_ulp, half_ulp)
        c = torch.where(tie, half_ulp, c)
        e_new = torch.where(tie, e - p, e_new)
        alive = alive & (e_new >= emin) & (torch.rand(n, generator=gen) >= 0.1)
        c = torch.where(alive, c, torch.zeros_like(c))
        comps.append(c)
        e = e_new
    x = torch.stack(comps, -1)
    assert_normalised(x, "random_expansions")
    return x


def _plain(x: torch.Tensor) -> torch.Tensor:
    """Random plain operand with the exponents of x's leading component (for *_float ops)."""
    return x[..., 0]


# =========================================================================== exact errors


def _terms(x: torch.Tensor, coef: int = 1) -> list:
    return [(coef, (c,)) for c in x.unbind(-1)]


def _products(x: torch.Tensor, y: torch.Tensor, coef: int = 1) -> list:
    return [(coef, (a, b)) for a in x.unbind(-1) for b in y.unbind(-1)]


def error_polys(op: str, x: torch.Tensor, y: torch.Tensor | None, z: torch.Tensor):
    """(numerator, denominator, scale) polynomials with rel. error = scale * |num| / |den|."""
    if op in ("add", "sub", "add_float"):
        sgn = -1 if op == "sub" else 1
        yy = y if y.dim() == x.dim() else y.unsqueeze(-1)
        ref = _terms(x) + _terms(yy, sgn)
        return _terms(z) + _terms(x, -1) + _terms(yy, -sgn), ref, 1.0
    if op in ("mul", "mul_float", "square"):
        yy = x if op == "square" else (y if y.dim() == x.dim() else y.unsqueeze(-1))
        return _terms(z) + _products(x, yy, -1), _products(x, yy), 1.0
    if op in ("div", "div_float"):  # |q - x/y| / |x/y| = |q y - x| / |x|
        yy = y if y.dim() == x.dim() else y.unsqueeze(-1)
        return _products(z, yy) + _terms(x, -1), _terms(x), 1.0
    if op in ("rdiv_float", "reciprocal"):  # q = b / x: |q x - b| / |b|
        b = y.unsqueeze(-1)
        return _products(z, x) + _terms(b, -1), _terms(b), 1.0
    if op == "sqrt":  # (s^2 - x) / (2 x)
        return _products(z, z) + _terms(x, -1), _terms(x), 0.5
    raise ValueError(op)


def bulk_rel_err_units(op, x, y, z, dtype, nc) -> torch.Tensor:
    """Exact relative error of each result in units of u^nc (float64, ~1e-13 accurate)."""
    num, den, scale = error_polys(op, x, y, z)
    err, ref = exact_sums([num, den], magnitude=True)
    assert not bool(ref["zero"].any()), "zero reference value in a relative-error test"
    units = torch.exp2(err["log2"] - ref["log2"] + nc * _p(dtype)) * scale
    return torch.where(err["zero"], 0.0, units)


# =========================================================================== ops table

OPS = {
    "add": lambda x, y: arith.add(x, y),
    "sub": lambda x, y: arith.sub(x, y),
    "mul": lambda x, y: arith.mul(x, y),
    "div": lambda x, y: arith.div(x, y),
    "add_float": lambda x, b: arith.add_float(x, b),
    "mul_float": lambda x, b: arith.mul_float(x, b),
    "div_float": lambda x, b: arith.div_float(x, b),
    "rdiv_float": lambda x, b: arith.rdiv_float(b, x),
    "square": lambda x, _: arith.square(x),
    "reciprocal": lambda x, _: arith.reciprocal(x),
    "sqrt": lambda x, _: arith.sqrt(x),
}
BOUND_OF = {
    "add": "add",
    "sub": "sub",
    "add_float": "add",
    "mul": "mul",
    "mul_float": "mul",
    "square": "mul",
    "div": "div",
    "div_float": "div",
    "rdiv_float": "div",
    "reciprocal": "div",
    "sqrt": "sqrt",
}
FLOAT_OPS = {"add_float", "mul_float", "div_float", "rdiv_float"}
UNARY = {"square", "reciprocal", "sqrt"}


def _operands(op, dtype, nc, n, gen):
    lo, hi = operand_range(op, dtype, nc)
    x = random_expansions(n, dtype, nc, lo, hi, gen)
    if op == "sqrt":
        x = torch.where(x[..., :1] < 0, -x, x)
    y = None
    if op in FLOAT_OPS:
        y = random_expansions(n, dtype, 1, lo, hi, gen)[..., 0]
    elif op not in UNARY:
        y = random_expansions(n, dtype, nc, lo, hi, gen)
    if op == "reciprocal":
        y = torch.ones_like(x[..., 0])
    return x, y


def _exact_result(op, xf, yf):
    """Exact result (object array of Fractions) of op on exact inputs."""
    table = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "add_float": operator.add,
        "mul_float": operator.mul,
        "div_float": operator.truediv,
        "rdiv_float": lambda x, b: b / x,
        "square": lambda x, _: x * x,
        "reciprocal": lambda x, _: 1 / x,
    }
    return table[op](xf, yf)


# =========================================================================== accuracy


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", list(OPS))
def test_accuracy_bulk(op, dtype, nc, rng):
    """20 000 random expansions per case, exact error (integer engine) <= BOUNDS[op]."""
    x, y = _operands(op, dtype, nc, N_BULK, rng)
    z = OPS[op](x, y)
    assert z.dtype == dtype and z.shape == x.shape
    assert bool(torch.isfinite(z).all())
    assert_normalised(z, f"{op} {dtype} nc={nc}", overlap=OVERLAP)
    units = bulk_rel_err_units(op, x, y, z, dtype, nc)
    worst = float(units.max())
    bound = BOUNDS[BOUND_OF[op]]
    if worst > bound:
        k = int(units.argmax())
        yk = None if y is None else y[k].tolist()
        raise AssertionError(f"{op} {dtype} nc={nc}: error {worst:.3g} u^nc > {bound}; x={x[k].tolist()} y={yk} -> {z[k].tolist()}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "add_float", "mul_float", "div_float", "rdiv_float", "square", "reciprocal"])
@_cap(8)
@given(data=st.data())
def test_accuracy_against_fractions(op, dtype, nc, data):
    """Hypothesis expansions (all exponents in range, ties, gaps), Fraction oracle."""
    lo, hi = operand_range(op, dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(16,)))
    if op in FLOAT_OPS:
        y = data.draw(expansions(dtype, 1, min_exp=lo, max_exp=hi, shape=(16,)))[..., 0]
        yf = components_to_fraction(y.unsqueeze(-1))
    elif op in UNARY:
        y, yf = None, None
    else:
        y = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(16,)))
        yf = components_to_fraction(y)
    z = OPS[op](x, y)
    assert z.dtype == dtype and z.shape == x.shape
    exact = _exact_result(op, components_to_fraction(x), yf)
    assert_within(z, exact, dtype, nc, BOUND_OF[op], msg=op)
    assert_normalised(z, op, overlap=OVERLAP)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(15)
@given(data=st.data())
def test_sqrt_against_mpmath(dtype, nc, data):
    lo, hi = operand_range("sqrt", dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=hi, shape=(24,)))
    x = torch.where(x[..., :1] < 0, -x, x)
    z = arith.sqrt(x)
    assert z.dtype == dtype and z.shape == x.shape
    with mpmath.workprec(working_prec(dtype, nc)):
        exact = np.array([mpmath.sqrt(v) for v in components_to_mpf(x).tolist()], dtype=object)
    assert_within(z, exact, dtype, nc, "sqrt", msg="sqrt")
    assert_normalised(z, "sqrt", overlap=OVERLAP)


def _round(v: Fraction, dtype: torch.dtype) -> Fraction:
    """Nearest value of ``dtype`` (ties to even) of an exact rational, exactly; no overflow
    check (callers stay in range)."""
    if v == 0:
        return Fraction(0)
    p, emin, _ = float_format(dtype)
    a, b = abs(v.numerator), v.denominator
    e = a.bit_length() - b.bit_length()  # floor(log2|v|) is e or e - 1
    if Fraction(a, b) < Fraction(2) ** e:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - p + 1)  # quantum of the binade (subnormals: fixed)
    return round(v / q) * q  # round() on a Fraction rounds half to even


def _to_expansion(values: list[Fraction], dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Greedy nearest-rounded expansion of exact values (c_k = nearest float of the rest):
    normalised by construction; its exact value is re-read by the caller."""
    rows = []
    for v in values:
        row, rest = [], v
        for _ in range(nc):
            c = _round(rest, dtype)
            row.append(float(c))
            rest -= c
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "sub"])
@_cap(15)
@given(data=st.data())
def test_cancellation(op, dtype, nc, data):
    """x + (-x + tiny) and x - (x + tiny): massive cancellation, the relative bound holds
    with respect to the tiny exact result."""
    p, _, emax = float_format(dtype)
    low = _lowest(dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=low + 3 * p + 8, max_exp=emax - 3, shape=(16,)))
    xf = components_to_fraction(x).tolist()
    tinies = []
    for v in xf:
        e = math.floor(math.log2(abs(v)))
        k = data.draw(st.integers(1, nc * p + 2 * p))
        te = max(e - k, low + 2)
        mant = data.draw(st.integers(1, 2**p - 1))
        tinies.append(Fraction(mant, 2**p) * Fraction(2) ** te * data.draw(st.sampled_from([1, -1])))
    if op == "add":
        y = _to_expansion([-v + t for v, t in zip(xf, tinies)], dtype, nc)
    else:
        y = _to_expansion([v + t for v, t in zip(xf, tinies)], dtype, nc)
    assert_normalised(y, "cancellation input")
    z = OPS[op](x, y)
    exact = _exact_result(op, components_to_fraction(x), components_to_fraction(y))
    assert_within(z, exact, dtype, nc, op, msg=f"cancellation {op}")
    assert_normalised(z, "cancellation", overlap=OVERLAP)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("nc", [3, 4])
def test_mul_with_cancelling_orders(dtype, nc, rng):
    """Products whose order-k partial sums cancel: ``y = (x0, -x1, +-x2, +-x3)`` makes
    ``x0 y1 + x1 y0 = 0`` exactly and the higher orders cancel partly, so the per-order
    levels of the product kernel are far from decreasing; the bound still holds."""
    lo, hi = operand_range("mul", dtype, nc)
    x = random_expansions(N_BULK, dtype, nc, lo, hi, rng)
    signs = torch.where(torch.rand((N_BULK, nc), generator=rng) < 0.5, -1.0, 1.0).to(dtype)
    signs[:, 0], signs[:, 1] = 1.0, -1.0
    y = x * signs
    # and half of them with y1 off by one ulp of x1 (near, not exact, cancellation)
    half = torch.arange(N_BULK) % 2 == 0
    y[:, 1] = torch.where(half, torch.nextafter(y[:, 1], torch.zeros_like(y[:, 1])), y[:, 1])
    z = arith.mul(x, y)
    assert_normalised(z, f"mul cancelling orders {dtype} nc={nc}", overlap=OVERLAP)
    units = bulk_rel_err_units("mul", x, y, z, dtype, nc)
    assert float(units.max()) <= BOUNDS["mul"], f"{float(units.max()):.3g} u^{nc}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_exact_cancellation_gives_zero(dtype, nc, rng):
    lo, hi = operand_range("add", dtype, nc)
    x = random_expansions(1000, dtype, nc, lo, hi, rng)
    assert bool((arith.sub(x, x) == 0).all())
    assert bool((arith.add(x, -x) == 0).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [2, 3, 5, 8, -1, -3])
@_cap(6)
@given(data=st.data())
def test_pow_int(dtype, nc, n, data):
    """Binary powering: |n| - 1 multiplications/squarings (+ a reciprocal for n < 0), each
    within BOUNDS['mul']; squaring doubles an earlier relative error, so the bound used is
    (|n| - 1 + [n < 0]) * 8 u^nc (the docstring's 2 log2|n| * 8 holds for small n only)."""
    lo, hi = operand_range("mul", dtype, nc)
    r = max(1, min(-lo, hi) // max(2, abs(n)))
    x = data.draw(expansions(dtype, nc, min_exp=-r, max_exp=r, shape=(16,)))
    z = arith.pow_int(x, n)
    assert z.dtype == dtype and z.shape == x.shape
    exact = [v**n for v in components_to_fraction(x).tolist()]
    steps = abs(n) - 1 + (n < 0)
    assert_within(z, exact, dtype, nc, max(1, steps) * BOUNDS["mul"], msg=f"x**{n}")
    assert_normalised(z, "pow_int", overlap=OVERLAP)


@pytest.mark.parametrize("nc", [1, 2, 3])
def test_pow_int_zero_and_one(nc):
    x = torch.tensor([[1.5] + [0.0] * (nc - 1), [math.nan] + [0.0] * (nc - 1)], dtype=torch.float64)
    one = arith.pow_int(x, 0)
    assert one.tolist() == [[1.0] + [0.0] * (nc - 1)] * 2  # like torch: nan ** 0 == 1
    assert torch.equal(arith.pow_int(x[:1], 1), x[:1])


# =========================================================================== nc = 1 bitwise


def _bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    ity = _LAYOUT[a.dtype][2]
    nan = torch.isnan(a)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and bool(torch.equal(nan, torch.isnan(b)))
        and bool(torch.equal(a[~nan].view(ity), b[~nan].view(ity)))
    )


def _all_patterns(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random bit patterns over every exponent (subnormals, near overflow) plus specials."""
    ebits = _LAYOUT[dtype][0]
    x = random_floats(torch.randint(0, (1 << ebits) - 1, (n,), generator=gen), dtype, gen)
    fi = torch.finfo(dtype)
    specials = torch.tensor(
        [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, fi.max, -fi.max, fi.tiny, fi.smallest_normal / 2], dtype=torch.float64
    ).to(dtype)
    return torch.cat([specials, x])


def _ieee_sqrt(a: torch.Tensor) -> torch.Tensor:
    """IEEE sqrt: the hardware instruction in float64 (numpy), rounded once to a narrower
    dtype (innocuous: 53 >= 2p + 2)."""
    with np.errstate(invalid="ignore"):
        return torch.from_numpy(np.sqrt(a.double().numpy())).to(a.dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_nc1_is_plain_torch_bitwise(dtype, rng):
    """nc = 1 is the plain op: torch's, and for sqrt (not correctly rounded on the CPU) IEEE's."""
    n = 50_000
    a = _all_patterns(n, dtype, rng)
    b = _all_patterns(n, dtype, rng)[torch.randperm(n + 11, generator=rng)]
    b = torch.cat([b[:5000], a[5000:10000] * 1.0009765625, b[10000:]])  # near-cancellation
    x, y = a.unsqueeze(-1), b.unsqueeze(-1)
    assert x.dtype == dtype
    cases = {
        "add": (arith.add(x, y), a + b),
        "sub": (arith.sub(x, y), a - b),
        "mul": (arith.mul(x, y), a * b),
        "div": (arith.div(x, y), a / b),
        "sqrt": (arith.sqrt(x), _ieee_sqrt(a)),  # torch's CPU sqrt is not IEEE
        "add_float": (arith.add_float(x, b), a + b),
        "mul_float": (arith.mul_float(x, b), a * b),
        "div_float": (arith.div_float(x, b), a / b),
        "rdiv_float": (arith.rdiv_float(b, x), b / a),
        "reciprocal": (arith.reciprocal(x), 1 / a),
        "square": (arith.square(x), a * a),
    }
    for name, (got, ref) in cases.items():
        assert got.shape == (n + 11, 1), name
        assert _bit_equal(got[..., 0], ref), f"nc=1 {name} differs from torch for {dtype}"


# =========================================================================== float16 / bfloat16


def _half_range_case(op, dtype, nc, x_range, y_range, n, gen):
    x = random_expansions(n, dtype, nc, *x_range, gen)
    if op == "sqrt":
        return torch.where(x[..., :1] < 0, -x, x), None
    y = random_expansions(n, dtype, nc, *y_range, gen)
    if op in ("add", "sub"):  # same sign for add, opposite for sub: no cancellation
        s = torch.sign(x[..., :1]) * torch.sign(y[..., :1])
        y = y * (s if op == "add" else -s)
    return x, y


# (dtype, nc, op) -> operand exponent range keeping operands and result where the
# components hold full precision: float16 nc=2 needs 2^-3 <= |value| <= 65504.
_HALF_CASES = {
    (torch.float16, 2, "add"): ((-2, 13), (-2, 13)),
    (torch.float16, 2, "sub"): ((-2, 13), (-2, 13)),
    (torch.float16, 2, "mul"): ((-1, 6), (-1, 6)),
    (torch.float16, 2, "div"): ((2, 8), (-1, 2)),
    (torch.float16, 2, "sqrt"): ((-3, 15), None),
}
for _nc in (2, 3):
    _HALF_CASES.update(
        {
            (torch.bfloat16, _nc, "add"): ((-90, 120), (-90, 120)),
            (torch.bfloat16, _nc, "sub"): ((-90, 120), (-90, 120)),
            (torch.bfloat16, _nc, "mul"): ((-50, 60), (-50, 60)),
            (torch.bfloat16, _nc, "div"): ((-50, 50), (-50, 50)),
            (torch.bfloat16, _nc, "sqrt"): ((-90, 120), None),
        }
    )


@pytest.mark.parametrize("dtype, nc, op", list(_HALF_CASES), ids=[f"{str(d).split('.')[-1]}-nc{nc}-{op}" for d, nc, op in _HALF_CASES])
def test_half_precision_where_it_holds(dtype, nc, op, rng):
    """float16 nc=2 in [2^-3, 65504] and bfloat16 nc=2, 3 over most of its range keep
    the u^nc bound (u = 2^-11 resp. 2^-8)."""
    x, y = _half_range_case(op, dtype, nc, *_HALF_CASES[(dtype, nc, op)], N_BULK, rng)
    z = OPS[op](x, y)
    assert z.dtype == dtype
    assert bool(torch.isfinite(z).all())
    assert_normalised(z, f"{op} {dtype} nc={nc}", overlap=OVERLAP)
    units = bulk_rel_err_units(op, x, y, z, dtype, nc)
    assert float(units.max()) <= BOUNDS[op], f"{float(units.max()):.3g} u^{nc}"


@pytest.mark.parametrize("op", ["mul", "div", "sqrt"])
def test_float16_tail_underflows_below_two_to_the_minus_3(op, rng):
    """Documents NUMERICS.md 'fp16 reality': for |result| < 2^-3 the second float16
    component is subnormal or zero, so the relative u^2 bound is lost; the error is then
    about half the subnormal quantum, 2^-25, absolutely."""
    dtype, nc = torch.float16, 2
    ranges = {"mul": ((-7, -5), (-7, -5)), "div": ((-9, -7), (0, 2)), "sqrt": ((-14, -12), None)}
    x, y = _half_range_case(op, dtype, nc, *ranges[op], N_BULK, rng)
    z = OPS[op](x, y)
    units = bulk_rel_err_units(op, x, y, z, dtype, nc)
    assert float(units.max()) > BOUNDS[op]  # the bound does not hold down here
    # ... but the absolute error stays at the subnormal quantum
    num, _, scale = error_polys(op, x, y, z)
    err = exact_sums([num], magnitude=True)[0]
    if op == "sqrt":  # |s - sqrt(x)| = |s^2 - x| / (s + sqrt x) ~ |s^2 - x| / (2 s)
        abs_err = torch.exp2(err["log2"]) / (2 * z[..., 0].double().abs())
    elif op == "div":  # |q - x/y| = |q y - x| / |y|; y's two components add exactly in float64
        abs_err = torch.exp2(err["log2"]) / y.double().sum(-1).abs()
    else:
        abs_err = torch.exp2(err["log2"])
    # half the subnormal quantum, plus the rounding of the float32 engine (2^-24 relative)
    assert bool((abs_err <= 2.0**-25 + 2.0**-23 * z[..., 0].double().abs()).all())
    z0 = z[..., 1].double().abs()
    assert bool((z0 < 2.0**-14).all())  # every tail is subnormal or zero


# =========================================================================== mixed nc, broadcasting


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("ncs", [(2, 3), (3, 2), (1, 4), (4, 2)])
def test_mixed_nc_gives_the_larger(op, ncs, dtype, rng):
    nx, ny = ncs
    nc = max(ncs)
    lo, hi = operand_range(op, dtype, nc)
    x = random_expansions(2000, dtype, nx, lo, hi, rng)
    y = random_expansions(2000, dtype, ny, lo, hi, rng)
    z = OPS[op](x, y)
    assert z.shape == (2000, nc) and z.dtype == dtype
    assert torch.equal(z, OPS[op](arith.pad(x, nc), arith.pad(y, nc)))
    units = bulk_rel_err_units(op, arith.pad(x, nc), arith.pad(y, nc), z, dtype, nc)
    assert float(units.max()) <= BOUNDS[op]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "compare"])
def test_leading_dims_broadcast(op, nc, dtype, rng):
    lo, hi = operand_range(op if op in OPS else "add", dtype, nc)
    x = random_expansions(12, dtype, nc, lo, hi, rng).reshape(3, 1, 4, nc)
    y = random_expansions(10, dtype, nc, lo, hi, rng).reshape(2, 1, 5, 1, nc)
    f = OPS[op] if op in OPS else getattr(arith, op)
    z = f(x, y)
    xe, ye = torch.broadcast_tensors(x, y)
    ref = f(xe.contiguous().reshape(-1, nc), ye.contiguous().reshape(-1, nc))
    lead = (2, 3, 5, 4)
    assert z.shape == (lead if op == "compare" else lead + (nc,))
    assert torch.equal(z.reshape(ref.shape), ref)


@pytest.mark.parametrize("op", ["add_float", "mul_float", "div_float", "rdiv_float"])
@pytest.mark.parametrize("nc", NCS)
def test_float_ops_broadcast(op, nc, rng):
    dtype = torch.float64
    lo, hi = operand_range(op, dtype, nc)
    x = random_expansions(6, dtype, nc, lo, hi, rng).reshape(2, 3, nc)
    b = random_expansions(4, dtype, 1, lo, hi, rng).reshape(4, 1, 1)
    z = OPS[op](x, b)
    assert z.shape == (4, 2, 3, nc)
    xe, be = torch.broadcast_tensors(x, b.unsqueeze(-1).expand(4, 2, 3, nc))
    ref = OPS[op](xe.contiguous(), be[..., 0].contiguous())
    assert torch.equal(z, ref)


# =========================================================================== inf / nan


def _mc(vals, dtype, nc):
    return arith.from_float(torch.tensor(vals, dtype=torch.float64).to(dtype), nc)


def _assert_special(z, expected, msg):
    lead = z[..., 0].double().tolist()
    for got, want in zip(lead, expected):
        if math.isnan(want):
            assert math.isnan(got), f"{msg}: {lead} != {expected}"
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), f"{msg}: {lead} != {expected}"
    nonfinite = ~torch.isfinite(z[..., 0])
    assert bool((z[..., 1:][nonfinite] == 0).all()), f"{msg}: non-finite value with a nonzero tail {z.tolist()}"


INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("dtype", DTYPES + [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_inf_nan_propagation(dtype, nc):
    big = float(torch.finfo(dtype).max)
    mc = lambda v: _mc(v, dtype, nc)  # noqa: E731
    x = mc([INF, -INF, INF, INF, NAN, 1.0, big, -big])
    y = mc([1.0, 1.0, INF, -INF, 1.0, NAN, big, -big])
    _assert_special(arith.add(x, y), [INF, -INF, INF, NAN, NAN, NAN, INF, -INF], "add")
    _assert_special(arith.sub(x, y), [INF, -INF, NAN, INF, NAN, NAN, 0.0, 0.0], "sub")
    x = mc([INF, INF, big, -big, 0.0, NAN, 2.0])
    y = mc([2.0, 0.0, 2.0, 2.0, INF, 1.0, -INF])
    _assert_special(arith.mul(x, y), [INF, NAN, INF, -INF, NAN, NAN, -INF], "mul")
    x = mc([1.0, -1.0, 0.0, 1.0, INF, INF, NAN, big])
    y = mc([0.0, 0.0, 0.0, INF, INF, 2.0, 1.0, 0.5])
    _assert_special(arith.div(x, y), [INF, -INF, NAN, 0.0, NAN, INF, NAN, INF], "div")
    _assert_special(arith.reciprocal(mc([0.0, INF, -INF, NAN])), [INF, 0.0, -0.0, NAN], "reciprocal")
    b = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64).to(dtype)
    _assert_special(arith.rdiv_float(b, mc([0.0, 0.0, INF])), [INF, -INF, 0.0], "rdiv_float")
    _assert_special(arith.add_float(mc([INF, 1.0, big]), torch.tensor([1.0, INF, big]).to(dtype)), [INF, INF, INF], "add_float")
    _assert_special(arith.mul_float(mc([INF, big, 0.0]), torch.tensor([2.0, 2.0, INF]).to(dtype)), [INF, INF, NAN], "mul_float")
    _assert_special(arith.sqrt(mc([-1.0, 0.0, INF, -INF, NAN])), [NAN, 0.0, INF, NAN, NAN], "sqrt")


def _check_signed_zeros(dtype, nc):
    mz, one = _mc([-0.0], dtype, nc), _mc([1.0], dtype, nc)
    _assert_special(arith.reciprocal(mz), [-INF], "reciprocal(-0)")
    _assert_special(arith.div(one, mz), [-INF], "1 / -0")
    _assert_special(arith.sqrt(mz), [-0.0], "sqrt(-0)")
    _assert_special(arith.mul(mz, one), [-0.0], "-0 * 1")
    _assert_special(arith.mul_float(mz, torch.ones(1, dtype=dtype)), [-0.0], "-0 * 1.0")
    _assert_special(arith.add(mz, mz), [-0.0], "-0 + -0")
    _assert_special(arith.sub(mz, -mz), [-0.0], "-0 - +0")
    _assert_special(arith.add(mz, -mz), [0.0], "-0 + +0")
    _assert_special(arith.add_float(mz, -torch.zeros(1, dtype=dtype)), [-0.0], "-0 + -0.0")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_signed_zeros(dtype):
    """nc = 2: zero results carry the IEEE sign (the double-word kernels carry their
    error terms negated so that zero errors are +0; the wide engine copies the sign of
    the plain op on the leading components)."""
    _check_signed_zeros(dtype, 2)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("nc", [3, 4, 5])
def test_signed_zeros_nc3(dtype, nc):
    """nc >= 3: the merge-and-renormalise kernels rebuild zeros as +0; ``_guard`` gives a
    zero result the sign of the plain op on the leading components (``-0 * 1 = -0``,
    ``-0 + -0 = -0``, an exact zero sum of non-zero terms ``+0``)."""
    _check_signed_zeros(dtype, nc)


@pytest.mark.parametrize("nc", [3, 4])
def test_signed_zero_of_cancelling_tails(nc):
    """A zero sum whose leading components do not cancel (the tails do) is +0, and an
    underflowing product of opposite signs is -0, as in IEEE arithmetic."""
    f64 = torch.float64
    # 1 + 2^-53 written both ways (a tie: each tail is half an ulp of its lead), so the
    # leading components do not cancel (-1 + (1 + 2^-52) = 2^-52) but the values do
    x = torch.tensor([[1.0, 2.0**-53] + [0.0] * (nc - 2)], dtype=f64)
    y = torch.tensor([[-(1.0 + 2.0**-52), 2.0**-53] + [0.0] * (nc - 2)], dtype=f64)
    for z in (arith.add(x, y), arith.add(y, x), arith.sub(x, -y)):
        assert (z == 0).all() and not torch.signbit(z[0, 0]), z
    tiny = torch.tensor([[2.0**-600] + [0.0] * (nc - 1)], dtype=f64)
    p = arith.mul(tiny, -tiny)
    assert p[0, 0].item() == 0 and torch.signbit(p[0, 0]), p


# =========================================================================== exact ops


def _compare_pairs(dtype, nc, gen, n=3000):
    """Pairs of expansions that are equal, equal with another representation (ties),
    one ulp of the last component apart, or unrelated; plus ±0, ±inf."""
    lo, hi = operand_range("add", dtype, nc)
    x = random_expansions(n, dtype, nc, lo, hi, gen)
    y = random_expansions(n, dtype, nc, lo, hi, gen)
    kind = torch.randint(0, 4, (n,), generator=gen)
    # move the last nonzero component one ulp (of itself) toward zero: exact, still
    # normalised, and the value changes by a tiny amount
    last = (x != 0).sum(-1).clamp(min=1) - 1
    near = x.clone()
    idx = torch.arange(n)
    c = near[idx, last]
    near[idx, last] = c - ulp(c).to(dtype) * torch.sign(c)
    same = x.clone()
    y = torch.where((kind == 0).unsqueeze(-1), same, torch.where((kind == 1).unsqueeze(-1), near, y))
    y = torch.where((kind == 3).unsqueeze(-1), -x, y)
    return x, y


def _tie_pair(dtype, nc):
    """[1, u] and [1 + 2u, -u]: the same value 1 + u with two normalised representations."""
    p = _p(dtype)
    u = 2.0**-p
    a = [1.0, u] + [0.0] * (nc - 2)
    b = [1.0 + 2 * u, -u] + [0.0] * (nc - 2)
    return (torch.tensor([a], dtype=torch.float64).to(dtype), torch.tensor([b], dtype=torch.float64).to(dtype))


def _fraction_sign(d: Fraction) -> float:
    return float((d > 0) - (d < 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_comparisons_are_exact(dtype, nc, rng):
    x, y = _compare_pairs(dtype, nc, rng)
    if nc >= 2:
        a, b = _tie_pair(dtype, nc)
        x, y = torch.cat([x, a, b]), torch.cat([y, b, a])
    xf, yf = components_to_fraction(x).tolist(), components_to_fraction(y).tolist()
    want = torch.tensor([_fraction_sign(p - q) for p, q in zip(xf, yf)], dtype=dtype)
    got = arith.compare(x, y)
    assert got.dtype == dtype and torch.equal(got, want)
    assert bool((want == 0).any()) and bool((want != 0).any())
    for name, rel in [
        ("eq", operator.eq),
        ("ne", operator.ne),
        ("lt", operator.lt),
        ("le", operator.le),
        ("gt", operator.gt),
        ("ge", operator.ge),
    ]:
        res = getattr(arith, name)(x, y)
        assert res.dtype == torch.bool
        assert res.tolist() == [rel(p, q) for p, q in zip(xf, yf)], name


@pytest.mark.parametrize("nc", NCS)
def test_comparisons_with_specials(nc):
    dtype = torch.float64
    x = _mc([0.0, INF, INF, -INF, NAN, 1.0, NAN], dtype, nc)
    y = _mc([-0.0, INF, 1.0, INF, 1.0, NAN, NAN], dtype, nc)
    got = arith.compare(x, y).tolist()
    assert got[:4] == [0.0, 0.0, 1.0, -1.0]
    assert all(math.isnan(v) for v in got[4:])
    assert arith.eq(x, y).tolist() == [True, True, False, False, False, False, False]
    assert arith.ne(x, y).tolist() == [False, False, True, True, True, True, True]
    for name in ("lt", "le", "gt", "ge"):
        assert getattr(arith, name)(x, y).tolist()[4:] == [False] * 3, name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_minimum_maximum_clamp_where(dtype, nc, rng):
    x, y = _compare_pairs(dtype, nc, rng, n=2000)
    xf, yf = components_to_fraction(x).tolist(), components_to_fraction(y).tolist()
    mx, mn = arith.maximum(x, y), arith.minimum(x, y)
    assert mx.dtype == dtype and mx.shape == x.shape
    assert components_to_fraction(mx).tolist() == [max(p, q) for p, q in zip(xf, yf)]
    assert components_to_fraction(mn).tolist() == [min(p, q) for p, q in zip(xf, yf)]
    # the result is one of the operands, bit for bit
    assert bool(((mx == x).all(-1) | (mx == y).all(-1)).all())
    assert bool(((mn == x).all(-1) | (mn == y).all(-1)).all())
    # clamp to [lo, hi] with lo <= hi, and with one side only
    lo, hi = arith.minimum(x, y), arith.maximum(x, y)
    v, _ = _compare_pairs(dtype, nc, rng, n=2000)
    vf = components_to_fraction(v).tolist()
    lof, hif = components_to_fraction(lo).tolist(), components_to_fraction(hi).tolist()
    got = components_to_fraction(arith.clamp(v, lo, hi)).tolist()
    assert got == [min(max(a, b), c) for a, b, c in zip(vf, lof, hif)]
    assert components_to_fraction(arith.clamp(v, lo=lo)).tolist() == [max(a, b) for a, b in zip(vf, lof)]
    assert components_to_fraction(arith.clamp(v, hi=hi)).tolist() == [min(a, c) for a, c in zip(vf, hif)]
    assert torch.equal(arith.clamp(v), v)
    # where selects whole elements
    cond = torch.rand(2000, generator=rng) < 0.5
    w = arith.where(cond, x, y)
    assert torch.equal(w, torch.where(cond.unsqueeze(-1), x, y))


@pytest.mark.parametrize("nc", NCS)
def test_minimum_maximum_nan(nc):
    x = _mc([NAN, 1.0, NAN], torch.float64, nc)
    y = _mc([1.0, NAN, NAN], torch.float64, nc)
    for f in (arith.maximum, arith.minimum):
        r = f(x, y)
        assert bool(torch.isnan(r[..., 0]).all()), f.__name__


def test_where_and_clamp_mix_nc():
    x = _mc([1.0, 2.0], torch.float64, 2)
    y = _mc([3.0, 4.0], torch.float64, 3)
    w = arith.where(torch.tensor([True, False]), x, y)
    assert w.shape == (2, 3) and w[:, 0].tolist() == [1.0, 4.0]
    c = arith.clamp(x, lo=y)
    assert c.shape == (2, 3) and c[:, 0].tolist() == [3.0, 4.0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_abs_sign_neg_are_exact(dtype, nc, rng):
    lo, hi = operand_range("add", dtype, nc)
    x = random_expansions(2000, dtype, nc, lo, hi, rng)
    x = torch.cat([x, torch.zeros(2, nc, dtype=dtype)])
    x[-1, 0] = -0.0
    xf = components_to_fraction(x).tolist()
    a = arith.abs(x)
    assert a.dtype == dtype and components_to_fraction(a).tolist() == [abs(v) for v in xf]
    assert_normalised(a, "abs")
    s = arith.sign(x)
    assert s.dtype == dtype and s.tolist() == [_fraction_sign(v) for v in xf]
    n = arith.neg(x)
    assert components_to_fraction(n).tolist() == [-v for v in xf]
    assert math.isnan(arith.sign(_mc([NAN], dtype, nc)).item())


@pytest.mark.parametrize("nc", [3, 4])
def test_add_near_overflow_with_opposite_signs(nc, rng):
    """Operands near the top of the range with opposite signs: ``y0 - x0`` overflows, so
    the merge network's arithmetic selects fail and the kernel must take its exact
    fallback; the sum is finite and within the bound."""
    dtype = torch.float64
    _, _, emax = float_format(dtype)
    x = random_expansions(2000, dtype, nc, emax - 2, emax - 1, rng).abs()
    y = -random_expansions(2000, dtype, nc, emax - 2, emax - 1, rng).abs()
    z = arith.add(x, y)
    assert bool(torch.isfinite(z).all())
    assert_normalised(z, "near-overflow add", overlap=OVERLAP)
    nonzero = (components_to_fraction(x) + components_to_fraction(y)) != 0
    assert bool(nonzero.all())
    units = bulk_rel_err_units("add", x, y, z, dtype, nc)
    assert float(units.max()) <= BOUNDS["add"], f"{float(units.max()):.3g} u^{nc}"


def test_sqrt_with_many_components():
    """nc = 19 float64 (the range check's margin 2^((nc+1)p+4) no longer fits a float):
    sqrt runs and is accurate to the precision the exponent range leaves."""
    x = hm.mc(torch.tensor([2.0, 3.0, 0.7], dtype=torch.float64), nc=19)
    r = torch.sqrt(x)
    assert r.nc == 19
    with mpmath.workprec(1300):
        for got, want in zip(r.to_mpmath().tolist(), x.to_mpmath().tolist()):
            # the tail stops at the subnormal range: ~2^-1074 relative to |x| ~ 1
            assert abs(got - mpmath.sqrt(want)) / mpmath.sqrt(want) < mpmath.mpf(2) ** -1000
