"""Tests of :mod:`hypermc.mcf.matmul` against exact rational products.

Every accuracy test compares with the exact product of the exact operand values
(``fractions.Fraction`` sums of the components, products and sums in exact arithmetic) and
asserts the elementwise bound ``|C - A B| <= BOUNDS["matmul"] * u^nc * (|A| |B|)`` through
``tests.oracle.assert_within``. Inputs are built component by component here (random
significands and exponents, each component below half an ulp of the previous one), never
with the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermc.mcf import matmul as mcmm
from tests.conftest import BOUNDS
from tests.oracle import assert_within, components_to_fraction, expansions

P = {torch.float32: 24, torch.float64: 53}
# (dtype, nc) pairs with a tested bound: float32 nc 1-4, float64 nc 1-3.
CONFIGS = [(torch.float32, nc) for nc in (1, 2, 3, 4)] + [(torch.float64, nc) for nc in (1, 2, 3)]
KINDS = ["mc@plain", "plain@mc", "mc@mc"]


def _id(config) -> str:
    dtype, nc = config
    return f"{str(dtype).removeprefix('torch.')}-nc{nc}"


# ------------------------------------------------------------------------------- inputs


def random_mc(shape, nc, dtype, gen, lo=-3, hi=3, zero_frac=0.05, tail_zero_frac=0.1):
    """Normalised random expansions ``(*shape, nc)``: exponents of the leading components
    uniform in ``[lo, hi]``, each next component strictly below half an ulp of the
    previous one (random gap of 0-2 extra binades, sometimes many), random signs."""
    p = P[dtype]
    n = math.prod(shape)
    e = torch.randint(lo, hi + 1, (n,), generator=gen)
    alive = torch.rand(n, generator=gen) >= zero_frac
    comps = []
    for _ in range(nc):
        m = torch.randint(1 << (p - 1), 1 << p, (n,), generator=gen, dtype=torch.int64)
        sign = torch.randint(0, 2, (n,), generator=gen) * 2 - 1
        v = torch.ldexp(m.to(torch.float64), e - p + 1) * sign
        comps.append(torch.where(alive, v, 0.0).to(dtype))  # float32 tails may go subnormal
        gap = torch.where(
            torch.rand(n, generator=gen) < 0.9, torch.randint(0, 3, (n,), generator=gen), torch.randint(3, 2 * p, (n,), generator=gen)
        )
        e = e - p - 1 - gap
        alive = alive & (torch.rand(n, generator=gen) >= tail_zero_frac)
    return torch.stack(comps, -1).reshape(*shape, nc)


def operands(kind, m, k, n, nc, dtype, gen, **kw):
    nca = 1 if kind == "plain@mc" else nc
    ncb = 1 if kind == "mc@plain" else nc
    return random_mc((m, k), nca, dtype, gen, **kw), random_mc((k, n), ncb, dtype, gen, **kw)


def exact_product(a: torch.Tensor, b: torch.Tensor):
    """Exact ``A B`` and ``|A| |B|`` (object arrays of Fractions) of 2-D component tensors.

    Entries are scaled to Python integers by a common power of two per operand, so the
    dot products are exact integer arithmetic (fast even for k in the hundreds).
    """
    fa, fb = components_to_fraction(a), components_to_fraction(b)
    ia, sa = _to_int(fa)
    ib, sb = _to_int(fb)
    c = ia.dot(ib)
    g = np.abs(ia).dot(np.abs(ib))
    scale = Fraction(2) ** (sa + sb)
    to_frac = np.vectorize(lambda x: Fraction(x) * scale, otypes=[object])
    return to_frac(c), to_frac(g)


def _to_int(f: np.ndarray):
    dens = [x.denominator for x in f.flat]
    shift = max(d.bit_length() - 1 for d in dens) if dens else 0
    ints = np.empty(f.shape, dtype=object)
    for idx, x in np.ndenumerate(f):
        ints[idx] = x.numerator << (shift - (x.denominator.bit_length() - 1))
    return ints, -shift


def check_bound(c, a, b, dtype, nc, msg=""):
    exact, g = exact_product(a, b)
    assert c.shape == (a.shape[0], b.shape[1], nc)
    assert c.dtype == dtype
    assert_normalised(c)
    return assert_within(c, exact, dtype, nc, "matmul", relative=False, scale=g, msg=msg)


def assert_normalised(c: torch.Tensor):
    """Components non-overlapping (|c[i+1]| <= ulp(c[i]) / 2), zeros only at the tail."""
    p = P[c.dtype]
    tiny = torch.finfo(c.dtype).tiny
    for row in c.detach().double().reshape(-1, c.shape[-1]).tolist():
        if not math.isfinite(row[0]):
            assert all(x == 0 for x in row[1:]), row
            continue
        for x, y in zip(row, row[1:]):
            if x == 0:
                assert y == 0, row
                continue
            ulp = math.ldexp(1.0, math.frexp(max(abs(x), tiny))[1] - p)
            assert abs(y) <= ulp / 2, row


@pytest.fixture
def gen(seed):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("kind", KINDS)
def test_random_within_bound(config, kind, gen):
    dtype, nc = config
    a, b = operands(kind, 9, 37, 7, nc, dtype, gen)
    check_bound(mcmm.matmul(a, b, nc), a, b, dtype, nc, msg=kind)


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("kind", KINDS)
def test_wide_exponent_range_within_bound(config, kind, gen):
    """Entries whose exponents span 2**-60 .. 2**60 inside every row and column."""
    dtype, nc = config
    a, b = operands(kind, 8, 24, 6, nc, dtype, gen, lo=-60, hi=60)
    check_bound(mcmm.matmul(a, b, nc), a, b, dtype, nc, msg=kind)


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("kind", KINDS)
def test_hidden_small_terms_within_bound(config, kind, gen):
    """Rows whose 2**60 entries meet exact zeros: the result comes from entries 2**120
    below the row and column scales, so a plan based on the scales alone would lose it."""
    dtype, nc = config
    a, b = operands(kind, 6, 16, 5, nc, dtype, gen, zero_frac=0.0)
    a[:, 0] = 0
    a[:, 0, 0] = 2.0**60
    b[0, :] = 0
    b[1, :] = 0
    b[1, :, 0] = 2.0**60
    a[:, 1] = 0  # column 1 of A meets the big row 1 of B: zero
    a[:, 2:] *= 2.0**-60
    b[2:] *= 2.0**-60
    if dtype == torch.float32:  # keep the result's tail above the float32 subnormals
        a *= 2.0**40
        b *= 2.0**40
    c = mcmm.matmul(a, b, nc)
    check_bound(c, a, b, dtype, nc, msg=kind)
    plan = mcmm.matmul_plan(a, b, nc)
    assert plan.path == "wide" or plan.gemms > 10  # the hidden terms need deep slices


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("kind", KINDS)
def test_cancelling_dot_products_within_bound(config, kind, gen):
    """Diagonal entries of C cancel to far below |A||B| (one column of B solves A x ~ 0)."""
    dtype, nc = config
    m = k = 12
    a, b = operands(kind, m, k, m, nc, dtype, gen, zero_frac=0.0)
    exact_a = components_to_fraction(a)
    for j in range(m):
        exact_b = components_to_fraction(b)
        rest = sum(exact_a[j, q] * exact_b[q, j] for q in range(k) if q != j)
        target = -rest / exact_a[j, j]  # makes C[j, j] vanish up to the rounding below
        b[j, j] = _round_expansion(target, b.shape[-1], dtype)
    c = mcmm.matmul(a, b, nc)
    exact, _ = exact_product(a, b)
    diag = [abs(exact[j, j]) for j in range(m)]
    g = exact_product(a, b)[1]
    assert max(float(diag[j] / g[j, j]) for j in range(m)) < 2.0 ** (-P[dtype] * b.shape[-1] + 4)
    check_bound(c, a, b, dtype, nc, msg=kind)


def _round_expansion(x: Fraction, nc: int, dtype) -> torch.Tensor:
    """Nearest ``nc``-component expansion of ``x`` (successive roundings of the remainder)."""
    comps = []
    rest = x
    for _ in range(nc):
        c = _nearest(rest, dtype)
        comps.append(c)
        rest -= Fraction(c)
    return torch.tensor(comps, dtype=torch.float64).to(dtype)


def _nearest(x: Fraction, dtype) -> float:
    """The value of ``dtype`` nearest to ``x`` (ties to even), computed exactly."""
    if x == 0:
        return 0.0
    p = P[dtype]
    e = math.floor(math.log2(abs(x.numerator))) - math.floor(math.log2(x.denominator))
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    q = Fraction(2) ** (e - p + 1)
    return float(round(x / q) * q)


@pytest.mark.parametrize("config", [(torch.float32, 2), (torch.float32, 3), (torch.float64, 2)], ids=_id)
@settings(max_examples=25)
@given(data=st.data())
def test_property_bound_on_bit_pattern_inputs(config, data):
    """Hypothesis: bit-pattern expansions (all exponents in a range, ties, gaps, zeros)."""
    dtype, nc = config
    a = data.draw(expansions(dtype, nc, min_exp=-30, max_exp=30, shape=(3, 50), allow_zero=True))
    b = data.draw(expansions(dtype, 1, min_exp=-30, max_exp=30, shape=(50, 2), allow_zero=True))
    assert a.dtype == dtype and b.dtype == dtype
    check_bound(mcmm.matmul(a, b, nc), a, b, dtype, nc)
    check_bound(mcmm.matmul(b.transpose(0, 1), a.transpose(0, 1), nc), b.transpose(0, 1), a.transpose(0, 1), dtype, nc)


def test_k300_exact_integer_reference(gen):
    """A long contraction (k = 300) against the exact integer-arithmetic reference."""
    for dtype, nc in [(torch.float32, 2), (torch.float64, 2), (torch.float32, 4)]:
        a, b = operands("mc@plain", 5, 300, 4, nc, dtype, gen, lo=-20, hi=20)
        check_bound(mcmm.matmul(a, b, nc), a, b, dtype, nc)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nc1_at_least_as_accurate_as_native(dtype, gen):
    """MC @ Tensor with nc = 1: every entry at least as close to the exact product as
    torch.matmul in the same dtype (up to a 2**-20 ulp slack for near ties)."""
    for lo, hi in [(-3, 3), (-30, 30)]:
        a, b = operands("mc@plain", 10, 200, 8, 1, dtype, gen, lo=lo, hi=hi)
        ours = mcmm.matmul(a, b)
        native = torch.matmul(a[..., 0], b[..., 0])
        exact, g = exact_product(a, b)
        worst_ours = worst_native = 0.0
        for idx in np.ndindex(*exact.shape):
            e_ours = abs(Fraction(ours[idx][0].item()) - exact[idx])
            e_native = abs(Fraction(native[idx].item()) - exact[idx])
            ulp = math.ldexp(1.0, math.frexp(native[idx].item())[1] - P[dtype])
            assert e_ours <= e_native + Fraction(ulp) * Fraction(1, 1 << 20), idx
            worst_ours = max(worst_ours, float(e_ours / g[idx]))
            worst_native = max(worst_native, float(e_native / g[idx]))
        assert worst_ours <= worst_native


def test_float32_engine_within_bound(gen):
    """The float32 engine (consumer GPUs) gives the same bound, with more slices."""
    for dtype, nc, kind in [(torch.float32, 2, "mc@plain"), (torch.float64, 2, "mc@mc"), (torch.float32, 1, "plain@mc")]:
        a, b = operands(kind, 6, 40, 5, nc, dtype, gen)
        c = mcmm.matmul(a, b, nc, engine=torch.float32)
        check_bound(c, a, b, dtype, nc, msg=f"{dtype} {kind}")
        plan = mcmm.matmul_plan(a, b, nc, engine=torch.float32)
        assert plan.engine == torch.float32 and plan.path == "sliced"


def test_wide_engine_path_only_where_proven(gen):
    """float32 nc=1 and nc=2 with k < 48 use one float64 GEMM; nc=2 at k=64 slices."""
    a, b = operands("mc@plain", 5, 300, 4, 1, torch.float32, gen)
    assert mcmm.matmul_plan(a, b).path == "wide"
    check_bound(mcmm.matmul(a, b), a, b, torch.float32, 1)
    a, b = operands("mc@mc", 5, 40, 4, 2, torch.float32, gen, lo=-40, hi=40)
    assert mcmm.matmul_plan(a, b).path == "wide"
    check_bound(mcmm.matmul(a, b), a, b, torch.float32, 2)
    a, b = operands("mc@mc", 5, 64, 4, 2, torch.float32, gen)
    assert mcmm.matmul_plan(a, b).path == "sliced"
    a, b = operands("mc@mc", 5, 8, 4, 1, torch.float64, gen)
    assert mcmm.matmul_plan(a, b).path == "sliced"  # no wider engine for float64


def test_slice_gemms_are_exact():
    """A float64 (float32) GEMM of integer matrices with k * max|d_a| * max|d_b| <= 2**53
    (2**24) is exact whatever the BLAS does: extreme digits, both signs, many shapes."""
    gen = torch.Generator().manual_seed(1)
    for engine, p_e in [(torch.float64, 53), (torch.float32, 24)]:
        for k in [1, 7, 200, 1024, 5000]:
            budget = p_e - (k - 1).bit_length()
            if budget < 2:
                continue
            ba = budget // 2
            bb = budget - ba
            da = torch.randint(-(1 << ba), (1 << ba) + 1, (33, k), generator=gen)
            db = torch.randint(-(1 << bb), (1 << bb) + 1, (k, 17), generator=gen)
            da[0] = 1 << ba  # a row and a column of maximal digits: the worst sum
            db[:, 0] = 1 << bb
            got = torch.matmul(da.to(engine), db.to(engine))
            exact = da.to(torch.int64) @ db.to(torch.int64)
            assert torch.equal(got.to(torch.int64), exact), (engine, k)
            assert exact.abs().max() <= 1 << p_e


# --------------------------------------------------------------------------- semantics


SHAPES = [
    ((7,), (7,)),
    ((5, 7), (7,)),
    ((7,), (7, 4)),
    ((7,), (3, 7, 4)),
    ((3, 5, 7), (7,)),
    ((3, 5, 7), (7, 4)),
    ((5, 7), (3, 7, 4)),
    ((3, 5, 7), (3, 7, 4)),
    ((2, 1, 5, 7), (3, 7, 4)),
    ((2, 1, 5, 7), (1, 3, 7, 4)),
]


@pytest.mark.parametrize("shape_a, shape_b", SHAPES)
def test_shapes_follow_torch_matmul(shape_a, shape_b, gen):
    nc = 2
    a = random_mc(shape_a, nc, torch.float64, gen)
    b = random_mc(shape_b, 1, torch.float64, gen)
    c = mcmm.matmul(a, b)
    ref = torch.matmul(a[..., 0], b[..., 0])
    assert c.shape == (*ref.shape, nc)
    # every output entry is the bounded product of its own row and column
    a_mat = a if a.dim() > 2 else a.unsqueeze(0)  # 1-D operands as torch.matmul promotes them
    b_mat = b if b.dim() > 2 else b.unsqueeze(1)
    batch = torch.broadcast_shapes(a_mat.shape[:-3], b_mat.shape[:-3])
    a_mat = a_mat.expand(*batch, *a_mat.shape[-3:])
    b_mat = b_mat.expand(*batch, *b_mat.shape[-3:])
    c_mat = c.reshape(*batch, a_mat.shape[-3], b_mat.shape[-2], nc)
    for idx in np.ndindex(*batch):
        check_bound(c_mat[idx], a_mat[idx], b_mat[idx], torch.float64, nc)


def test_functional_forms(gen):
    a = random_mc((6, 9), 2, torch.float32, gen)
    b = random_mc((9, 5), 1, torch.float32, gen)
    v = random_mc((9,), 1, torch.float32, gen)
    w = random_mc((9,), 2, torch.float32, gen)
    assert torch.equal(mcmm.mm(a, b), mcmm.matmul(a, b))
    assert torch.equal(mcmm.mv(a, v), mcmm.matmul(a, v))
    assert mcmm.dot(w, v).shape == (2,)
    check_bound(mcmm.dot(w, v).reshape(1, 1, 2), w.unsqueeze(0), v.unsqueeze(1), torch.float32, 2)
    ab = random_mc((3, 6, 9), 2, torch.float32, gen)
    bb = random_mc((3, 9, 5), 2, torch.float32, gen)
    assert torch.equal(mcmm.bmm(ab, bb), mcmm.matmul(ab, bb))
    with pytest.raises(ValueError, match="bmm: batch sizes differ"):
        mcmm.bmm(ab, bb[:2])
    with pytest.raises(ValueError, match="mm: expected logical dims 2 and 2"):
        mcmm.mm(a, v)
    with pytest.raises(ValueError, match="dot: expected logical dims 1 and 1"):
        mcmm.dot(a, v)
    with pytest.raises(ValueError, match="mv: expected logical dims 2 and 1"):
        mcmm.mv(v, v)


def test_nc_argument_and_mixed_operands(gen):
    a = random_mc((6, 30), 3, torch.float64, gen)
    b = random_mc((30, 4), 1, torch.float64, gen)
    assert mcmm.matmul(a, b).shape[-1] == 3  # default: the larger nc
    c1 = mcmm.matmul(a, b, 1)
    check_bound(c1, a, b, torch.float64, 1)
    c2 = mcmm.matmul(b.transpose(0, 1), a.transpose(0, 1), 2)  # strided operands
    check_bound(c2, b.transpose(0, 1), a.transpose(0, 1), torch.float64, 2)


@pytest.mark.parametrize(
    "shape_a, shape_b, out",
    [
        ((0, 5), (5, 3), (0, 3)),
        ((4, 0), (0, 3), (4, 3)),
        ((4, 5), (5, 0), (4, 0)),
        ((0,), (0,), ()),
        ((2, 0, 4, 5), (5, 3), (2, 0, 4, 3)),
    ],
)
def test_zero_size(shape_a, shape_b, out):
    a = torch.ones(*shape_a, 2)
    b = torch.ones(*shape_b, 1)
    c = mcmm.matmul(a, b)
    assert c.shape == (*out, 2)
    assert torch.equal(c, torch.zeros_like(c))
    assert c.shape[:-1] == torch.matmul(a[..., 0], b[..., 0]).shape


@pytest.mark.parametrize("config", [(torch.float32, 2), (torch.float64, 2), (torch.float64, 1)], ids=_id)
def test_zero_rows_and_columns(config, gen):
    """All-zero rows of A / columns of B give exact zeros and do not disturb the rest."""
    dtype, nc = config
    a, b = operands("mc@mc", 7, 60, 5, nc, dtype, gen)
    a[2] = 0
    b[:, 4] = 0
    c = mcmm.matmul(a, b)
    assert (c[2] == 0).all() and (c[:, 4] == 0).all()
    check_bound(c, a, b, dtype, nc)
    zero = mcmm.matmul(torch.zeros_like(a), b)
    assert mcmm.matmul_plan(torch.zeros_like(a), b).path == "zero"
    assert (zero == 0).all() and zero.shape == c.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("nc", [1, 2])
def test_nonfinite_propagate_like_torch(dtype, nc, gen):
    a = random_mc((6, 70), nc, dtype, gen)
    b = random_mc((70, 5), nc, dtype, gen)
    a[1, 3] = torch.tensor([math.nan] + [0.0] * (nc - 1))
    a[4, 0] = torch.tensor([math.inf] + [0.0] * (nc - 1))
    b[2, 2] = torch.tensor([-math.inf] + [0.0] * (nc - 1))
    c = mcmm.matmul(a, b)
    ref = torch.matmul(a[..., 0], b[..., 0])
    lead = c[..., 0]
    assert torch.equal(torch.isnan(lead), torch.isnan(ref))
    assert torch.equal(torch.isinf(lead), torch.isinf(ref))
    assert torch.equal(lead[torch.isinf(ref)], ref[torch.isinf(ref)])
    assert torch.isnan(lead[1]).all()  # a NaN in row 1 of A poisons row 1 of C
    if nc > 1:
        assert (c[..., 1:][~torch.isfinite(lead)] == 0).all()
    good_rows, good_cols = [0, 2, 3, 5], [0, 1, 3, 4]
    sub = c[good_rows][:, good_cols]
    check_bound(sub, a[good_rows], b[:, good_cols], dtype, nc)


def test_overflow_gives_inf_with_zero_tail():
    a = torch.full((2, 3, 2), 0.0)
    a[..., 0] = 2.0**100
    b = torch.full((3, 2, 1), 2.0**30)
    c = mcmm.matmul(a, b)
    assert torch.isinf(c[..., 0]).all() and (c[..., 1] == 0).all()


# ------------------------------------------------------------------------ addmm, linear


@pytest.mark.parametrize("config", [(torch.float32, 2), (torch.float64, 2), (torch.float32, 3)], ids=_id)
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2), (0.3, 1.7)])
def test_addmm_within_bound(config, beta, alpha, gen):
    dtype, nc = config
    a = random_mc((7, 50), nc, dtype, gen)
    b = random_mc((50, 6), 1, dtype, gen)
    c = random_mc((7, 6), nc, dtype, gen, lo=2, hi=6)
    r = mcmm.addmm(c, a, b, beta=beta, alpha=alpha)
    beta_d = Fraction(torch.tensor(float(beta), dtype=dtype).item())
    alpha_d = Fraction(torch.tensor(float(alpha), dtype=dtype).item())
    ab, g = exact_product(a, b)
    fc = components_to_fraction(c)
    exact = beta_d * fc + alpha_d * ab
    scale = abs(beta_d) * np.abs(fc) + abs(alpha_d) * g
    assert r.shape == (7, 6, nc)
    assert_within(r, exact, dtype, nc, "matmul", relative=False, scale=scale)


def test_addmm_broadcast_and_beta_zero(gen):
    a = random_mc((4, 30), 2, torch.float64, gen)
    b = random_mc((30, 3), 2, torch.float64, gen)
    bias = random_mc((3,), 2, torch.float64, gen)
    r = mcmm.addmm(bias, a, b)
    ab, g = exact_product(a, b)
    fb = components_to_fraction(bias)
    assert_within(r, ab + fb, torch.float64, 2, "matmul", relative=False, scale=g + np.abs(fb))
    nan = torch.full((4, 3, 2), math.nan, dtype=torch.float64)
    r0 = mcmm.addmm(nan, a, b, beta=0)
    assert torch.isfinite(r0).all()
    with pytest.raises(ValueError, match="does not broadcast"):
        mcmm.addmm(random_mc((5,), 2, torch.float64, gen), a, b)


def test_linear_within_bound(gen):
    x = random_mc((2, 3, 40), 2, torch.float32, gen)
    w = random_mc((5, 40), 1, torch.float32, gen)
    bias = random_mc((5,), 1, torch.float32, gen)
    y = mcmm.linear(x, w, bias)
    assert y.shape == (2, 3, 5, 2)
    fb = components_to_fraction(bias)
    for i in range(2):
        ab, g = exact_product(x[i], w.transpose(0, 1))
        assert_within(y[i], ab + fb, torch.float32, 2, "matmul", relative=False, scale=g + np.abs(fb))
    assert mcmm.linear(x[0, 0], w).shape == (5, 2)


# ------------------------------------------------------------------- plan and plumbing


def test_plain_operand_needs_fewer_slices(gen):
    """A plain float32 matrix is exact in two slices; the plan uses no more."""
    a = random_mc((4, 1024), 2, torch.float32, gen, zero_frac=0.0)
    b = random_mc((1024, 4), 1, torch.float32, gen, zero_frac=0.0, lo=-2, hi=2)
    plan = mcmm.matmul_plan(a, b)
    assert plan.path == "sliced" and plan.slices_b <= 2 and plan.gemms <= 6
    b2 = random_mc((1024, 4), 2, torch.float32, gen, zero_frac=0.0)
    assert mcmm.matmul_plan(a, b2).gemms <= 2 * plan.gemms


def test_bound_table_matches_kernel():
    assert BOUNDS["matmul"] == mcmm.MATMUL_BOUND


def test_full_precision_gemm_restores_settings():
    before = (torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)
    with mcmm.full_precision_gemm():
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"
    assert (torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision) == before
    with pytest.raises(RuntimeError, match="boom"), mcmm.full_precision_gemm():
        raise RuntimeError("boom")
    assert torch.backends.cuda.matmul.fp32_precision == before[0]


def test_workspace_reuse_does_not_alias(gen):
    a = random_mc((50, 80), 2, torch.float64, gen)
    b = random_mc((80, 40), 1, torch.float64, gen)
    c1 = mcmm.matmul(a, b)
    c1_copy = c1.clone()
    c2 = mcmm.matmul(b.transpose(0, 1), a.transpose(0, 1))
    assert torch.equal(c1, c1_copy)  # the second call did not write into the first result
    assert c1.data_ptr() != c2.data_ptr()
    mcmm.clear_workspace()
    assert torch.equal(mcmm.matmul(a, b), c1)


def test_pool_recycles_only_whole_buffers_once():
    """``_Pool.give`` keeps a buffer once, and never a block of a larger buffer (a view, or
    an alias without ``_base``): listed, it would be handed out while its buffer is live."""
    pool = mcmm._Pool(torch.device("cpu"))
    buf = torch.empty(10, 10, dtype=torch.float64)
    pool.give(buf, buf)
    big = torch.empty(400, dtype=torch.float64)
    alias = torch.empty(0, dtype=torch.float64).set_(big.untyped_storage(), 100, (10, 10), (10, 1))
    assert alias._base is None
    pool.give(big[:100].view(10, 10), alias, torch.empty(10, 20, dtype=torch.float64)[:, :10])
    assert [t.data_ptr() for t in pool.free[((10, 10), torch.float64, torch.device("cpu"))]] == [buf.data_ptr()]
    assert pool.take((10, 10), torch.float64, torch.device("cpu")) is buf
    assert pool.take((10, 10), torch.float64, torch.device("cpu")) is not buf
    pool.close()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_workspace_kept_between_products_does_not_corrupt_gradients(dtype):
    """A two-layer MC network at batch 410: its products' work buffers (410 x 20 float64,
    >= 64 KiB) are kept between calls; the gradients still equal the float64 reference
    (before the fix blocks of kept buffers were recycled under their own shape and every
    gradient but the last bias was 100 % off)."""
    from hypermc.nn import MCLinear, MCSequential, MCToTensor

    torch.manual_seed(0)
    net = MCSequential(MCLinear(30, 20, nc=2, dtype=dtype), MCToTensor(), torch.nn.ReLU(), MCLinear(20, 1, nc=2, dtype=dtype))
    x = torch.randn(410, 30).to(dtype)
    ref = torch.nn.Sequential(torch.nn.Linear(30, 20, dtype=torch.float64), torch.nn.ReLU(), torch.nn.Linear(20, 1, dtype=torch.float64))
    u = torch.finfo(dtype).eps / 2
    for _ in range(2):  # the second pass starts with the first pass's kept buffers
        net.zero_grad()
        ref.zero_grad()
        out = net(x)
        (out * out).sum().backward()
        with torch.no_grad():
            for q, p in zip(ref.parameters(), net.parameters()):
                q.copy_(p.components.double().sum(-1))
        o = ref(x.double())
        (o * o).sum().backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            err = float((p.grad.components.double().sum(-1) - q.grad).norm() / q.grad.norm())
            assert err < 64 * u  # float32: the plain activations between the layers round
    mcmm.clear_workspace()


def test_validation_messages(gen):
    a = random_mc((3, 4), 2, torch.float32, gen)
    b = random_mc((4, 2), 1, torch.float32, gen)
    with pytest.raises(TypeError, match="different dtypes"):
        mcmm.matmul(a, b.double())
    with pytest.raises(TypeError, match="must be a component tensor"):
        mcmm.matmul(a, [[1.0]])
    with pytest.raises(ValueError, match="contracted sizes differ"):
        mcmm.matmul(a, random_mc((5, 2), 1, torch.float32, gen))
    with pytest.raises(ValueError, match="at least one logical dim"):
        mcmm.matmul(torch.ones(2), b)
    with pytest.raises(ValueError, match=r"^matmul: nc must be an int >= 1; got 0$"):
        mcmm.matmul(a, b, 0)
    with pytest.raises(TypeError, match=r"^matmul: nc must be an int >= 1; got float 2\.0$"):
        mcmm.matmul(a, b, 2.0)
    with pytest.raises(ValueError, match="batch shapes"):
        mcmm.matmul(torch.ones(2, 3, 4, 1), torch.ones(3, 4, 2, 1))
    with pytest.raises(TypeError, match=r"^matmul: engine must be one of float64, float32; got torch\.float16$"):
        mcmm.matmul(a, b, engine=torch.float16)
    with pytest.raises(TypeError, match="component dtype must be"):
        mcmm.matmul(a.to(torch.int32), b.to(torch.int32))


@pytest.mark.cuda
def test_cuda_matches_bound():
    gen = torch.Generator().manual_seed(3)
    for dtype, nc in [(torch.float32, 2), (torch.float64, 2), (torch.float32, 1)]:
        a, b = operands("mc@plain", 9, 64, 7, nc, dtype, gen, lo=-30, hi=30)
        c = mcmm.matmul(a.cuda(), b.cuda(), nc)
        assert c.is_cuda
        check_bound(c.cpu(), a, b, dtype, nc)
        c32 = mcmm.matmul(a.cuda(), b.cuda(), nc, engine=torch.float32)
        check_bound(c32.cpu(), a, b, dtype, nc)
