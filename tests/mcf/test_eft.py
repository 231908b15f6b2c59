"""Exactness tests of the error-free transformations in :mod:`hypermc.mcf.eft`.

The EFTs are checked for *exactness*, never against a tolerance: ``s + e == a + b``,
``p + e == a * b``, ``hi + lo == a`` and ``sum(renormalize(t)) == sum(t)`` must hold as
identities of real numbers.

How exactness is checked on 10^6 inputs (per dtype and per EFT) in a few seconds
--------------------------------------------------------------------------------
Python ``Fraction``s cost microseconds per element, so the bulk checks use an exact
*integer* engine written with vectorised int64 tensor ops (:func:`exact_sums`):

1. Every finite value of the four component dtypes converts to float64 exactly, and
   ``torch.frexp`` then gives ``x = M * 2**q`` with an integer ``|M| < 2**53`` (exact:
   the float64 mantissa times ``2**53`` is an integer below ``2**53``).
2. ``|M|`` is written in three 24-bit limbs; a product term ``x * y`` multiplies limbs
   schoolbook-style (partial products ``< 2**48``) and propagates carries, so it is the
   exact integer ``|Mx * My|`` with exponent ``qx + qy``.
3. All terms of an identity are brought to the smallest exponent ``q0`` of the element:
   a term with shift ``q - q0 = 24 k + r`` adds its limbs, each shifted left by
   ``r < 24`` bits (``< 2**48``), to the limb columns ``k, k+1, ...``. Column sums stay
   far below ``2**63``. A final pass with floor-carries (``>> 24`` and ``& (2**24-1)``
   are floor division and remainder for two's-complement int64) yields the unique
   representation with all but the top limb in ``[0, 2**24)``; the sum is zero iff all
   limbs are zero. The number of columns is chosen per chunk from the largest shift,
   so any exponent range of any dtype (float64: 2098 bits) is covered; nothing is
   approximated or sampled.
4. Terms that trivially cancel (``v_i == -v_j``, e.g. ``s == a`` and ``e == b`` when the
   operands are far apart) are removed first; this only saves limbs.

The engine is itself tested against ``fractions.Fraction`` (with a 1-ulp perturbation
it must detect), and every EFT also gets a ``Fraction`` check of pinned edge cases and
of hypothesis-drawn bit-pattern floats (``tests.oracle.floats_of``).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hypermc.mcf import eft
from tests.oracle import UNIT_ROUNDOFF_BITS, components_to_fraction, edge_values, expansions, float_format, floats_of

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
WIDE_DTYPES = [torch.float16, torch.bfloat16, torch.float32]  # two_prod via a wider dtype
N_BULK = 10**6  # random inputs per dtype and EFT (the requirement)

# (exponent-field bits, stored significand bits, int dtype of the same width)
_LAYOUT = {
    torch.float16: (5, 10, torch.int16),
    torch.bfloat16: (8, 7, torch.int16),
    torch.float32: (8, 23, torch.int32),
    torch.float64: (11, 52, torch.int64),
}


# =========================================================================== exact engine

_LIMB = 24
_MASK = (1 << _LIMB) - 1
_BUDGET = 1 << 23  # elements x limb columns per chunk (64 MiB of int64)
_DEAD = 1 << 40  # exponent given to cancelled / zero terms so they never set q0


def _mantissa_limbs(x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """``x = sign * (l0 + l1 2^24 + l2 2^48) * 2^q`` exactly (finite x of any of the dtypes)."""
    m, e = torch.frexp(x.to(torch.float64))
    mant = (m * 2.0**53).to(torch.int64)  # exact integer, |mant| < 2^53
    mag = mant.abs()
    limbs = [mag & _MASK, (mag >> _LIMB) & _MASK, mag >> (2 * _LIMB)]
    return torch.sign(mant), limbs, e.to(torch.int64) - 53


def _carry(limbs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Floor-carry so that every limb but the last lies in ``[0, 2^24)`` (value unchanged)."""
    limbs = list(limbs)
    for i in range(len(limbs) - 1):
        limbs[i + 1] = limbs[i + 1] + (limbs[i] >> _LIMB)
        limbs[i] = limbs[i] & _MASK
    return limbs


def _term(coef: int, factors: tuple[torch.Tensor, ...], shape) -> tuple:
    """(sign, nonnegative normalised limbs, exponent) of ``coef * prod(factors)``."""
    sign, limbs, q = _mantissa_limbs(factors[0].expand(shape).reshape(-1))
    for f in factors[1:]:
        s2, l2, q2 = _mantissa_limbs(f.expand(shape).reshape(-1))
        prod = [torch.zeros_like(limbs[0]) for _ in range(len(limbs) + len(l2))]
        for i, a in enumerate(limbs):
            for j, b in enumerate(l2):
                prod[i + j] = prod[i + j] + a * b
        sign, limbs, q = sign * s2, _carry(prod), q + q2
    return sign * coef, limbs, q


def exact_sums(polys: list[list[tuple[int, tuple[torch.Tensor, ...]]]], *, magnitude: bool = False) -> list[dict]:
    """Exact value of each polynomial ``sum_i coef_i * prod(factors_i)``, elementwise.

    Args:
        polys: list of polynomials; a polynomial is a list of ``(coef, factors)`` with
            ``coef`` in ``{+1, -1}`` and ``factors`` a tuple of one or two finite tensors
            (broadcastable; any of the four component dtypes).
        magnitude: also return ``sign`` and ``log2``.

    Returns:
        per polynomial a dict with ``zero`` (bool tensor: the exact value is 0) and, with
        ``magnitude``, ``sign`` (-1/0/+1 int64) and ``log2`` (float64 ``log2|value|``,
        from the top 72 bits, so accurate to ~1e-14; ``-inf`` for 0), all flattened to
        the broadcast shape.
    """
    tensors = [f for poly in polys for _, fs in poly for f in fs]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    n = math.prod(shape)
    for t in tensors:
        assert bool(torch.isfinite(t).all()), "the exact engine needs finite inputs"
    built = []
    for poly in polys:
        # cancel single-factor terms whose signed values are exact negatives of each other
        singles = [(i, coef * fs[0].expand(shape).reshape(-1).to(torch.float64)) for i, (coef, fs) in enumerate(poly) if len(fs) == 1]
        alive = {i: torch.ones(n, dtype=torch.bool) for i, _ in singles}
        for (i, vi), (j, vj) in itertools.combinations(singles, 2):
            both = alive[i] & alive[j] & (vi == -vj)
            alive[i] &= ~both
            alive[j] &= ~both
        terms = []
        for i, (coef, fs) in enumerate(poly):
            sign, limbs, q = _term(coef, fs, shape)
            if i in alive:
                sign = torch.where(alive[i], sign, 0)
            terms.append((sign, limbs, torch.where(sign != 0, q, _DEAD)))
        built.append(terms)
    q0 = torch.stack([q for terms in built for _, _, q in terms]).min(dim=0).values
    q0 = torch.where(q0 == _DEAD, 0, q0)
    results = []
    for terms in built:
        cols = torch.ones_like(q0)
        placed = []
        for sign, limbs, q in terms:
            sh = torch.where(sign != 0, q - q0, 0)
            k = sh // _LIMB
            placed.append((sign, limbs, k, sh - k * _LIMB))
            cols = torch.maximum(cols, k + len(limbs))
        results.append(_accumulate(placed, cols, q0, magnitude))
    return results


def _accumulate(placed, cols, q0, magnitude: bool) -> dict:
    """Add the placed terms into limb columns (planar: one contiguous row per column)."""
    n = cols.numel()
    out: dict[str, list[torch.Tensor]] = {"zero": [], "sign": [], "log2": []}
    start = 0
    while start < n:
        # as many elements as fit the memory budget at this chunk's width
        stop = min(n, start + _BUDGET // int(cols[start : start + 4096].max()))
        width = int(cols[start:stop].max()) + 1  # + 1: room for the carry out of the top
        if (stop - start) * width > 2 * _BUDGET and stop - start > 4096:
            stop = start + max(4096, _BUDGET // width)
            width = int(cols[start:stop].max()) + 1
        acc = torch.zeros(width, stop - start, dtype=torch.int64)
        for sign, limbs, k, r in placed:
            sg, kk, rr = sign[start:stop], k[start:stop], r[start:stop]
            for j, limb in enumerate(limbs):
                acc.scatter_add_(0, (kk + j).unsqueeze(0), (sg * (limb[start:stop] << rr)).unsqueeze(0))
        rows = _carry(list(acc))
        zero = torch.stack([row == 0 for row in rows]).all(dim=0)
        out["zero"].append(zero)
        if magnitude:
            sign, log2 = _magnitude(rows, zero, q0[start:stop])
            out["sign"].append(sign)
            out["log2"].append(log2)
        start = stop
    return {key: torch.cat(val) for key, val in out.items() if val}


def _magnitude(rows: list[torch.Tensor], zero: torch.Tensor, q0: torch.Tensor):
    """Sign and log2|value| of carried limb rows (all rows but the last in [0, 2^24))."""
    acc = torch.stack(rows)
    idx = torch.arange(len(rows)).unsqueeze(1).expand_as(acc)
    top = torch.where(acc != 0, idx, -1).max(dim=0).values.clamp(min=0)
    sign = torch.where(zero, 0, torch.sign(acc.gather(0, top.unsqueeze(0)).squeeze(0)))
    # |value|: negate negative values and carry again; then read the top three limbs
    mag = torch.stack(_carry(list(acc * torch.where(sign < 0, -1, 1))))
    top = torch.where(mag != 0, idx, -1).max(dim=0).values.clamp(min=0)
    lead = torch.zeros(acc.shape[1], dtype=torch.float64)
    for d in range(3):
        pos = top - d
        limb = mag.gather(0, pos.clamp(min=0).unsqueeze(0)).squeeze(0)
        lead = lead + torch.where(pos >= 0, limb, 0).to(torch.float64) * 2.0 ** (-_LIMB * d)
    log2 = torch.log2(lead) + (_LIMB * top + q0).to(torch.float64)
    return sign, torch.where(zero, -math.inf, log2)


def exact_equal(lhs: list, rhs: list) -> torch.Tensor:
    """Elementwise ``sum(lhs) == sum(rhs)`` exactly; entries are tensors or (x, y) products."""

    def as_term(coef, t):
        return (coef, t if isinstance(t, tuple) else (t,))

    poly = [as_term(1, t) for t in lhs] + [as_term(-1, t) for t in rhs]
    return exact_sums([poly])[0]["zero"]


# =========================================================================== inputs


def _fmt(dtype: torch.dtype) -> tuple[int, int, int, int]:
    """(p, emin, emax, exponent bias) of ``dtype``."""
    p, emin, emax = float_format(dtype)
    return p, emin, emax, 1 - emin


def random_floats(field: torch.Tensor, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Values of ``dtype`` from bit patterns: given biased-exponent fields, random significand
    and sign (field 0 = subnormal or zero)."""
    ebits, mbits, itype = _LAYOUT[dtype]
    mant = torch.randint(0, 1 << mbits, field.shape, generator=gen, dtype=torch.int64)
    bits = (field.clamp(0, (1 << ebits) - 2) << mbits) | mant  # sign bit 0: fits itype
    x = bits.to(itype).view(dtype)
    neg = torch.rand(field.shape, generator=gen) < 0.5
    return torch.where(neg, -x, x)


def _field_of(x: torch.Tensor) -> torch.Tensor:
    ebits, mbits, itype = _LAYOUT[x.dtype]
    return (x.abs().view(itype).to(torch.int64) >> mbits) & ((1 << ebits) - 1)


def sum_operands(n: int, dtype: torch.dtype, gen: torch.Generator, *, max_field: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs for the sum EFTs: 1/4 independent exponents (all binades, subnormals, huge
    gaps), 1/2 exponent gaps in [-(p+3), p+3] (every overlap pattern), 1/4 near-cancellation
    (b = -a with random low bits changed); about 1% zeros of either sign."""
    p, _, _, _ = _fmt(dtype)
    ebits, mbits, _ = _LAYOUT[dtype]
    top = (1 << ebits) - 2 if max_field is None else max_field
    fa = torch.randint(0, top + 1, (n,), generator=gen)
    a = random_floats(fa, dtype, gen)
    kind = torch.randint(0, 4, (n,), generator=gen)
    gap = torch.randint(-(p + 3), p + 4, (n,), generator=gen)
    fb = torch.where(kind == 0, torch.randint(0, top + 1, (n,), generator=gen), fa - gap).clamp(0, top)
    b = random_floats(fb, dtype, gen)
    ity = _LAYOUT[dtype][2]
    low = torch.randint(0, 1 << min(mbits, 8), (n,), generator=gen, dtype=torch.int64)
    near = (-a).view(ity).to(torch.int64) ^ low
    near = near.to(ity).view(dtype)
    b = torch.where(kind == 3, near, b)
    zero_a = torch.rand(n, generator=gen) < 0.01
    zero_b = torch.rand(n, generator=gen) < 0.01
    a = torch.where(zero_a, a * 0, a)  # keeps the sign of a: +0 or -0
    b = torch.where(zero_b, b * 0, b)
    return a, b


def product_operands(n: int, dtype: torch.dtype, gen: torch.Generator, *, top_binade: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs whose product is finite and whose error term does not underflow (the
    precondition of two_prod): ``emin + p - 1 <= e_a + e_b <= emax - 2``. ``a`` has a
    uniform exponent (subnormals included where the pair can satisfy the precondition)."""
    p, emin, emax, bias = _fmt(dtype)
    ebits, _, _ = _LAYOUT[dtype]
    top = (1 << ebits) - 2 - (0 if top_binade else 1)
    lo_sum, hi_sum = emin + p - 1, emax - 2
    fa = torch.randint(1, top + 1, (n,), generator=gen)
    ea = fa - bias
    # e_b uniform in [lo_sum - e_a, hi_sum - e_a] intersected with the normal range
    lo_b = (lo_sum - ea).clamp(min=emin)
    hi_b = (hi_sum - ea).clamp(max=top - bias)
    eb = lo_b + (torch.rand(n, generator=gen, dtype=torch.float64) * (hi_b - lo_b + 1)).floor().to(torch.int64)
    a = random_floats(fa, dtype, gen)
    b = random_floats(eb + bias, dtype, gen)
    swap = torch.rand(n, generator=gen) < 0.5
    return torch.where(swap, b, a), torch.where(swap, a, b)


def _exponent(x: torch.Tensor) -> torch.Tensor:
    """floor(log2|x|) of nonzero finite values (any dtype), exactly, as int64."""
    return torch.frexp(x.to(torch.float64))[1].to(torch.int64) - 1


def significant_bits(x: torch.Tensor) -> torch.Tensor:
    """Number of bits between the leading and the trailing 1 bit of ``|x|`` (0 for 0)."""
    m, _ = torch.frexp(x.to(torch.float64))
    mant = (m.abs() * 2.0**53).to(torch.int64)  # in [2^52, 2^53) or 0
    lowest = mant & -mant
    tz = torch.frexp(lowest.to(torch.float64))[1].to(torch.int64) - 1
    return torch.where(mant == 0, 0, 53 - tz)


def ulp(x: torch.Tensor) -> torch.Tensor:
    """ulp of each value of ``x`` in its own dtype, as exact float64 (ulp(0) = min subnormal)."""
    p, emin, _, _ = _fmt(x.dtype)
    e = torch.where(x == 0, emin, _exponent(torch.where(x == 0, 1.0, x.to(torch.float64))))
    q = e.clamp(min=emin) - p + 1
    return torch.ldexp(torch.ones_like(q, dtype=torch.float64), q)


def assert_normalised(c: torch.Tensor, msg: str = "", *, overlap: float = 0.5) -> None:
    """Components non-overlapping (|c[i+1]| <= overlap * ulp(c[i]), overlap = 1/2 by the
    convention), decreasing, zeros only at the tail. Checked exactly in float64 (powers of
    two and comparisons are exact)."""
    comps = c.unbind(-1)
    for i in range(len(comps) - 1):
        hi, lo = comps[i], comps[i + 1]
        fin = torch.isfinite(hi) & torch.isfinite(lo)
        over = fin & (lo.to(torch.float64).abs() > overlap * ulp(hi))
        zero_gap = fin & (hi == 0) & (lo != 0)
        bad = over | zero_gap
        if bool(bad.any()):
            k = int(bad.reshape(-1).nonzero()[0])
            row = c.reshape(-1, c.shape[-1])[k].tolist()
            raise AssertionError(f"{msg}: component {i + 1} overlaps or follows a zero in {int(bad.sum())} elements, e.g. {row}")


# =========================================================================== the engine itself


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_exact_engine_agrees_with_fractions(dtype, rng):
    """The integer engine gives the same zero tests and signs as Fraction arithmetic,
    including residuals of a single bit far below the leading terms."""
    n = 3000
    a, b = _bulk_pairs(dtype, rng, n)
    c, d = product_operands(n, dtype, rng)
    s = a + b
    polys = [
        [(1, (a,)), (1, (b,)), (-1, (s,))],  # the rounding error of a + b (often nonzero)
        [(1, (c, d)), (-1, (c * d,))],  # the rounding error of c * d
        [(1, (a,)), (-1, (a,))],  # zero
    ]
    res = exact_sums(polys, magnitude=True)
    fa, fb, fs, fc, fd, fp = (list(map(Fraction, t.double().tolist())) for t in (a, b, s, c, d, c * d))
    exact = [
        [x + y - z for x, y, z in zip(fa, fb, fs)],
        [x * y - z for x, y, z in zip(fc, fd, fp)],
        [Fraction(0)] * n,
    ]
    for r, ex in zip(res, exact):
        assert r["zero"].tolist() == [v == 0 for v in ex]
        assert r["sign"].tolist() == [(v > 0) - (v < 0) for v in ex]
        for got, v in zip(r["log2"].tolist(), ex):
            if v != 0:
                want = math.log2(abs(v.numerator)) - math.log2(v.denominator)
                assert abs(got - want) < 1e-12
    # both kinds of residual are sometimes nonzero, so the check above has teeth
    assert not bool(res[0]["zero"].all()) and not bool(res[1]["zero"].all())


def test_exact_engine_sees_one_bit_across_the_float64_range():
    big = torch.tensor([2.0**1023, 2.0**1023, 1.5], dtype=torch.float64)
    tiny = torch.tensor([2.0**-1074, 0.0, 2.0**-1074], dtype=torch.float64)
    res = exact_sums(
        [[(1, (big,)), (1, (tiny,)), (-1, (big,))], [(1, (big, tiny)), (-1, (torch.full_like(big, 2.0**-51),))]], magnitude=True
    )
    assert res[0]["zero"].tolist() == [False, True, False]
    assert res[0]["log2"].tolist()[0] == -1074
    assert res[1]["zero"].tolist() == [True, False, False]  # 2^1023 * 2^-1074 == 2^-51


# =========================================================================== two_sum


def _bulk_pairs(dtype, rng, n=N_BULK):
    # field <= max - 1: |a|, |b| < 2^emax, so a + b cannot overflow
    return sum_operands(n, dtype, rng, max_field=(1 << _LAYOUT[dtype][0]) - 3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_sum_exact_on_a_million_inputs(dtype, rng):
    a, b = _bulk_pairs(dtype, rng)
    assert a.dtype == dtype
    s, e = eft.two_sum(a, b)
    assert s.dtype == e.dtype == dtype
    assert torch.equal(s, a + b)  # s is the rounded sum itself
    ok = exact_equal([s, e], [a, b])
    assert bool(ok.all()), f"{int((~ok).sum())} inexact, e.g. {a[~ok][:3]}, {b[~ok][:3]}"
    # |e| <= ulp(s) / 2
    assert bool((2 * e.double().abs() <= ulp(s)).all())
    # the inputs really exercised nonzero errors and exact cancellation
    assert 0.2 < float((e != 0).double().mean()) < 0.9
    assert bool(((s == 0) & (a != 0)).any())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_sum_exact_in_the_top_binades(dtype, rng):
    """Operands in the two highest binades, sum finite: exact, e finite. An operand equal
    to ±max is excluded here (spurious overflow, see test_two_sum_with_max_operand_is_outside_the_precondition)."""
    ebits = _LAYOUT[dtype][0]
    top = (1 << ebits) - 2
    n = 200_000
    a = random_floats(torch.randint(top - 1, top + 1, (n,), generator=rng), dtype, rng)
    b = random_floats(torch.randint(top - 1, top + 1, (n,), generator=rng), dtype, rng)
    big = float(torch.finfo(dtype).max)
    a = torch.where(a.abs() == big, a / 2, a)
    b = torch.where(b.abs() == big, b / 2, b)
    s, e = eft.two_sum(a, b)
    fin = torch.isfinite(s)
    assert 0.1 < float(fin.double().mean()) < 0.9
    assert bool(torch.isfinite(e[fin]).all())
    assert bool(exact_equal([s[fin], e[fin]], [a[fin], b[fin]]).all())
    # overflow: s = ±inf and e = NaN (documented)
    assert bool(torch.isinf(s[~fin]).all()) and bool(torch.isnan(e[~fin]).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_sum_with_max_operand_is_outside_the_precondition(dtype):
    """The documented precondition ``s - a`` finite fails for ``b = -max`` and ``a`` in the
    top binade: ``bb = s - a`` rounds to -inf, so ``e`` is NaN (``s`` is right); the
    operands in the other order are exact. Proof sketch: ``s = fl(a + b)`` is exact here
    and negative; ``s - a = b`` exactly in real arithmetic, but ``fl(s - a)`` is computed
    from ``s`` and ``a`` with ``|s - a| = max`` and rounds up past ``max`` when the
    discarded bits exceed half an ulp, i.e. to -inf."""
    big = float(torch.finfo(dtype).max)
    a = {
        torch.float16: 17200.0,
        torch.bfloat16: 1.1896590562274997e38,
        torch.float32: 1.6051518228619055e38,
        torch.float64: 5.012593606437765e307,
    }[dtype]
    a = torch.tensor([a], dtype=dtype)
    b = torch.tensor([-big], dtype=dtype)
    s, e = eft.two_sum(a, b)
    assert bool(torch.isfinite(s).all()) and bool(torch.isnan(e).all())  # the documented failure
    s2, e2 = eft.two_sum(b, a)  # the documented remedy: the other order
    assert torch.equal(s2, s) and bool(torch.isfinite(e2).all())
    assert all(_fractions_equal([s2, e2], [a, b]))


def _edge_pairs(dtype):
    vals = edge_values(dtype)
    if dtype == torch.float64:
        vals = vals + [2.0**1000, -(2.0**1000), 2.0**-1000, -(2.0**-1000), 1 + 2.0**-52]
    t = torch.tensor(vals, dtype=torch.float64).to(dtype)
    a, b = torch.meshgrid(t, t, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


def _fractions_equal(lhs: list[torch.Tensor], rhs: list[torch.Tensor]) -> list[bool]:
    left = components_to_fraction(torch.stack(lhs, -1))
    right = components_to_fraction(torch.stack(rhs, -1))
    return [x == y for x, y in zip(left.tolist(), right.tolist())]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_sum_edge_cases(dtype):
    """All pairs of ±0, subnormals, min normal, 1 and its neighbours, 2^±(emax-10),
    max/2, max (and 2^±1000 for float64): exact where a + b is finite, else s = ±inf,
    e = NaN."""
    a, b = _edge_pairs(dtype)
    s, e = eft.two_sum(a, b)
    fin = torch.isfinite(s)
    assert all(_fractions_equal([s[fin], e[fin]], [a[fin], b[fin]]))
    assert bool(torch.isinf(s[~fin]).all()) and bool(torch.isnan(e[~fin]).all())
    assert int((~fin).sum()) >= 2  # max + max, -max - max
    # signed zeros: the sum is the IEEE sum, the error is +-0
    zeros = (a == 0) & (b == 0)
    assert torch.equal(torch.signbit(s[zeros]), torch.signbit(a[zeros] + b[zeros]))
    assert bool((e[zeros] == 0).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@settings(max_examples=min(settings.default.max_examples, 50))
@given(data=st.data())
@example(data=None)
def test_two_sum_bit_pattern_floats(dtype, data):
    p, emin, emax = float_format(dtype)
    if data is None:  # pinned: huge gaps, subnormal + normal, cancellation to a subnormal
        tiny = math.ldexp(1.0, emin - p + 1)
        xs = [math.ldexp(1.0, emax - 1), math.ldexp(1.0, emin), 1.0, math.ldexp(1.0, emin)]
        ys = [tiny, -tiny, -tiny, -math.ldexp(1.0, emin) + tiny]
    else:
        xs = data.draw(st.lists(floats_of(dtype, max_exp=emax - 1), min_size=1, max_size=50))
        ys = data.draw(st.lists(floats_of(dtype, max_exp=emax - 1), min_size=len(xs), max_size=len(xs)))
    a = torch.tensor(xs, dtype=torch.float64).to(dtype)
    b = torch.tensor(ys, dtype=torch.float64).to(dtype)
    s, e = eft.two_sum(a, b)
    assert all(_fractions_equal([s, e], [a, b]))


# =========================================================================== fast_two_sum


def _order_for_fast_two_sum(a, b):
    """Swap so that exponent(a) >= exponent(b) (or b == 0); equal exponents keep their order,
    so |a| < |b| with the same exponent (allowed) occurs too."""
    ea = torch.where(a == 0, -(1 << 20), _exponent(torch.where(a == 0, 1.0, a.double())))
    eb = torch.where(b == 0, -(1 << 20), _exponent(torch.where(b == 0, 1.0, b.double())))
    swap = ea < eb
    return torch.where(swap, b, a), torch.where(swap, a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fast_two_sum_exact_on_a_million_inputs(dtype, rng):
    a, b = _order_for_fast_two_sum(*_bulk_pairs(dtype, rng))
    s, e = eft.fast_two_sum(a, b)
    assert s.dtype == dtype and torch.equal(s, a + b)
    ok = exact_equal([s, e], [a, b])
    assert bool(ok.all()), f"{int((~ok).sum())} inexact, e.g. {a[~ok][:3]}, {b[~ok][:3]}"
    assert bool((2 * e.double().abs() <= ulp(s)).all())
    assert bool(((a.abs() < b.abs()) & (b != 0)).any())  # same exponent, |a| < |b|


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fast_two_sum_edge_cases(dtype):
    a, b = _order_for_fast_two_sum(*_edge_pairs(dtype))
    s, e = eft.fast_two_sum(a, b)
    fin = torch.isfinite(s)
    assert all(_fractions_equal([s[fin], e[fin]], [a[fin], b[fin]]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fast_two_sum_broken_precondition_is_silently_inexact(dtype):
    """Documents the precondition: with |b| >> |a| the error is lost (no exception)."""
    p, _, _ = float_format(dtype)
    a = torch.tensor([2.0 ** -(p + 4)], dtype=dtype)
    b = torch.tensor([1.0], dtype=dtype)
    s, e = eft.fast_two_sum(a, b)
    assert s.item() == 1.0 and e.item() == 0.0  # but a + b = 1 + 2^-(p+4)
    s, e = eft.two_sum(a, b)  # TwoSum has no precondition
    assert e.item() == 2.0 ** -(p + 4)


# =========================================================================== split


def _check_split(a: torch.Tensor, hi: torch.Tensor, lo: torch.Tensor) -> None:
    p, _, _, _ = _fmt(a.dtype)
    s = eft.float_format(a.dtype).split_shift
    assert hi.dtype == lo.dtype == a.dtype
    ok = exact_equal([hi, lo], [a])
    assert bool(ok.all()), f"hi + lo != a for {a[~ok][:3].tolist()}"
    w_hi, w_lo = significant_bits(hi), significant_bits(lo)
    # documented widths: hi <= p - s bits, lo <= s bits (in fact s - 1 with the sign trick)
    assert int(w_hi.max()) <= p - s, f"hi has {int(w_hi.max())} bits > p - s = {p - s}"
    assert int(w_lo.max()) <= s, f"lo has {int(w_lo.max())} bits > s = {s}"
    # what Dekker needs: every product of halves fits in p bits
    assert int((w_hi + w_hi).max()) <= p
    assert int((w_hi + w_lo).max()) <= p
    assert int((w_lo + w_lo).max()) <= p


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_exact_on_a_million_inputs(dtype, rng):
    """All binades except the top one (see test_split_near_overflow_holds_up_to_the_documented_threshold), subnormals included,
    and both sides of the rescaling threshold."""
    ebits = _LAYOUT[dtype][0]
    n = N_BULK
    field = torch.randint(0, (1 << ebits) - 2, (n,), generator=rng)  # top binade excluded
    a = random_floats(field, dtype, rng)
    thr = eft.float_format(dtype).split_threshold
    near = torch.rand(n, generator=rng, dtype=torch.float64) * 4 + 0.25  # [thr/4, 4 thr)
    a = torch.where(torch.arange(n) % 8 == 0, (near * thr).to(dtype) * torch.sign(a), a)
    hi, lo = eft.split(a)
    _check_split(a, hi, lo)
    assert bool((a.abs() > thr).any()) and bool((a.abs() <= thr).any())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_edge_cases(dtype):
    p, _, emax = float_format(dtype)
    vals = [v for v in edge_values(dtype) if abs(v) < 2.0**emax]  # top binade: outside the precondition, tested below
    thr = eft.float_format(dtype).split_threshold
    vals += [thr, -thr, thr * (1 + 2.0 ** (1 - p)), thr * (1 - 2.0**-p)]
    a = torch.tensor(vals, dtype=torch.float64).to(dtype)
    assert a.double().tolist() == vals
    hi, lo = eft.split(a)
    _check_split(a, hi, lo)
    zeros = a == 0
    assert bool((hi[zeros] == 0).all()) and bool((lo[zeros] == 0).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_near_overflow_holds_up_to_the_documented_threshold(dtype, rng):
    """Precondition ``|a| < (2 - 2^-(p-s)) 2^emax``: below it the top binade splits
    exactly; at and above it ``hi`` rounds up to ``2^(emax+1)`` = inf, as documented.
    Proof sketch: ``hi = fl(fl(C a) - fl(fl(C a) - a))`` with ``C = 2^s + 1`` keeps the top
    ``p - s`` bits of ``a`` rounded to nearest; it is ``2^(emax+1)`` exactly when those
    bits round up, i.e. when ``|a| >= (2 - 2^-(p-s)) 2^emax``."""
    p, emax = float_format(dtype)[0], float_format(dtype)[2]
    shift = eft.float_format(dtype).split_shift
    threshold = (2 - 2.0 ** -(p - shift)) * 2.0**emax
    top = (1 << _LAYOUT[dtype][0]) - 2
    a = random_floats(torch.full((10_000,), top), dtype, rng)
    inside = a.double().abs() < threshold
    assert int(inside.sum()) > 0  # (float64: the 2^26 values above the threshold are rarely drawn; finfo.max is added below)
    hi, lo = eft.split(a[inside])
    _check_split(a[inside], hi, lo)
    below = torch.tensor([threshold * (1 - 2.0**-p)], dtype=torch.float64).to(dtype)  # the largest value inside
    assert float(below) < threshold
    _check_split(below, *eft.split(below))
    outside = torch.cat([a[~inside], torch.tensor([float(torch.finfo(dtype).max)], dtype=dtype)])
    assert bool(torch.isinf(eft.split(outside)[0]).all())  # the documented overflow


# =========================================================================== two_prod


def _check_prod(a, b, p, e, msg=""):
    assert p.dtype == e.dtype == a.dtype
    assert torch.equal(p, a * b), f"{msg}: p is not the rounded product"
    ok = exact_equal([p, e], [(a, b)])
    assert bool(ok.all()), f"{msg}: {int((~ok).sum())} inexact, e.g. a={a[~ok][:3].tolist()}, b={b[~ok][:3].tolist()}"
    assert bool((2 * e.double().abs() <= ulp(p)).all())
    assert float((e != 0).double().mean()) > 0.3  # nonzero errors really occur


@pytest.mark.parametrize("dtype", WIDE_DTYPES, ids=str)
def test_two_prod_wide_path_exact_on_a_million_inputs(dtype, rng):
    assert eft.float_format(dtype).wider is not None
    a, b = product_operands(N_BULK, dtype, rng)
    p, e = eft.two_prod(a, b)
    _check_prod(a, b, p, e, f"two_prod {dtype}")


def test_two_prod_float64_fma_path_exact_on_a_million_inputs(rng):
    if not eft.has_fused_addcmul("cpu", torch.float64):
        pytest.skip("addcmul is not fused on this CPU build; two_prod uses Dekker (tested below)")
    a, b = product_operands(N_BULK, torch.float64, rng)
    p, e = eft.two_prod(a, b)
    _check_prod(a, b, p, e, "two_prod float64 (addcmul)")


def test_two_prod_float64_dekker_path_exact_on_a_million_inputs(rng, monkeypatch):
    """two_prod falls back to Dekker when the FMA probe fails: force that branch."""
    monkeypatch.setattr(eft, "has_fused_addcmul", lambda device_type, dtype: False)
    a, b = product_operands(N_BULK, torch.float64, rng, top_binade=False)
    p, e = eft.two_prod(a, b)
    _check_prod(a, b, p, e, "two_prod float64 (Dekker branch)")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_prod_dekker_exact_on_a_million_inputs(dtype, rng):
    """Dekker with the dtype's split constant (float64: 2^27 + 1) is 100% exact.
    Operands in the top binade are excluded: see test_two_prod_dekker_near_overflow_is_outside_the_precondition."""
    a, b = product_operands(N_BULK, dtype, rng, top_binade=False)
    p, e = eft.two_prod_dekker(a, b)
    _check_prod(a, b, p, e, f"two_prod_dekker {dtype}")
    thr = eft.float_format(dtype).split_threshold
    assert bool(((a.abs() > thr) | (b.abs() > thr)).any())  # the rescaled split is used


def test_float64_split_constant_is_two_to_the_27_plus_one():
    assert eft.float_format(torch.float64).split_shift == 27


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("impl", ["two_prod", "two_prod_dekker"])
def test_two_prod_edge_cases(dtype, impl):
    """Edge pairs that satisfy the precondition are exact; the others: e is never NaN
    unless p overflows."""
    a, b = _edge_pairs(dtype)
    p_, emin, emax = float_format(dtype)
    fi = torch.finfo(dtype)
    big = a.abs().double().ge(2.0**emax) | b.abs().double().ge(2.0**emax)  # outside split's range, tested below
    if impl == "two_prod_dekker":
        a, b = a[~big], b[~big]
    p, e = getattr(eft, impl)(a, b)
    assert torch.equal(p, a * b)
    nz = (a != 0) & (b != 0)
    ea = _exponent(torch.where(nz, a, 1).double())
    eb = _exponent(torch.where(nz, b, 1).double())
    pre = (~nz | (ea + eb >= emin + p_ - 1)) & torch.isfinite(p) & (p.double().abs() <= float(fi.max) / 2)
    left = components_to_fraction(torch.stack([p[pre], e[pre]], -1)).tolist()
    right = [Fraction(x) * Fraction(y) for x, y in zip(a[pre].double().tolist(), b[pre].double().tolist())]
    assert left == right
    fin = torch.isfinite(p)
    assert not bool(torch.isnan(e[fin]).any())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_prod_dekker_near_overflow_is_outside_the_precondition(dtype):
    """The documented precondition (operands within split's range, ``ah * bh`` finite)
    fails for top-binade operands and for ``a = b`` just below ``sqrt(max)`` with all
    bits set: ``p`` is right and ``e`` is NaN, as documented. Proof sketch: ``split(max)``
    gives ``hi = inf`` (test above); for ``a = b = (2 - 2^(1-p)) 2^((emax-1)/2)`` the
    high halves round up to ``2^((emax+1)/2)`` and ``ah * bh = 2^(emax+1)`` overflows while
    ``a * b < max``. One power of two lower, both split and ``ah * bh`` stay finite and
    the product is exact."""
    p_, _, emax = float_format(dtype)
    big = float(torch.finfo(dtype).max)
    root = math.ldexp(2 - math.ldexp(1.0, 1 - p_), (emax - 1) // 2)  # root * root < max
    a = torch.tensor([big, big, root, -root], dtype=dtype)
    b = torch.tensor([0.75, -0.5, root, root], dtype=dtype)
    p, e = eft.two_prod_dekker(a, b)
    assert bool(torch.isfinite(p).all()) and torch.equal(p, a * b)
    assert not bool(torch.isfinite(e).any())  # the documented failure: NaN or ±inf
    half = torch.tensor([root / 2, -root / 2], dtype=dtype)
    _check_prod(half, half.flip(0), *eft.two_prod_dekker(half, half.flip(0)), "inside the precondition")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@settings(max_examples=min(settings.default.max_examples, 50))
@given(data=st.data())
def test_two_prod_bit_pattern_floats(dtype, data):
    """Hypothesis pairs with e_a + e_b in the precondition range, checked with Fractions
    through both two_prod and two_prod_dekker."""
    p_, emin, emax = float_format(dtype)
    ea = data.draw(st.integers(emin, emax - 1))
    lo, hi = max(emin, emin + p_ - 1 - ea), min(emax - 1, emax - 3 - ea)
    if lo > hi:
        return
    eb = data.draw(st.integers(lo, hi))
    xs = data.draw(st.lists(floats_of(dtype, min_exp=ea, max_exp=ea, allow_zero=False), min_size=1, max_size=20))
    ys = data.draw(st.lists(floats_of(dtype, min_exp=eb, max_exp=eb, allow_zero=False), min_size=len(xs), max_size=len(xs)))
    a = torch.tensor(xs, dtype=torch.float64).to(dtype)
    b = torch.tensor(ys, dtype=torch.float64).to(dtype)
    for impl in (eft.two_prod, eft.two_prod_dekker):
        p, e = impl(a, b)
        got = components_to_fraction(torch.stack([p, e], -1)).tolist()
        assert got == [Fraction(x) * Fraction(y) for x, y in zip(xs, ys)], impl.__name__


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_has_fused_addcmul_is_truthful(dtype, rng):
    """If the probe says addcmul is fused, addcmul(-p, a, b) is exact on 10^6 products."""
    if not eft.has_fused_addcmul("cpu", dtype):
        pytest.skip(f"addcmul not fused for {dtype} here")
    a, b = product_operands(N_BULK, dtype, rng)
    p = a * b
    e = torch.addcmul(-p, a, b)
    assert bool(exact_equal([p, e], [(a, b)]).all())


# =========================================================================== renormalize


def _renorm_terms(n: int, m: int, dtype: torch.dtype, gen: torch.Generator, *, spread: int, lowest: int | None = None) -> torch.Tensor:
    """``m`` random terms per element, unsorted, overlapping, with random gaps up to
    ``spread`` binades below a leader whose exponent is in ``[lowest + spread, emax - 4]``
    (default lowest: emin), zeros, exact cancellation of one pair (25%) and of all
    terms (5%)."""
    p, emin, emax, bias = _fmt(dtype)
    lowest = emin if lowest is None else lowest
    spread = max(0, min(spread, emax - 4 - lowest))
    lead = torch.randint(lowest + spread + bias, emax - 4 + bias + 1, (n,), generator=gen)
    cols = []
    for _ in range(m):
        f = lead - torch.randint(0, spread + 1, (n,), generator=gen)
        cols.append(random_floats(f, dtype, gen))
    t = torch.stack(cols, -1)
    t = torch.where(torch.rand(n, m, generator=gen) < 0.1, torch.zeros_like(t), t)
    cancel = torch.rand(n, generator=gen) < 0.25
    t[:, -1] = torch.where(cancel, -t[:, 0], t[:, -1])
    half = m // 2
    cancel_all = (torch.rand(n, generator=gen) < 0.05).unsqueeze(-1)
    rest = torch.cat([-t[:, :half], torch.zeros_like(t[:, 2 * half :])], -1)
    t[:, half:] = torch.where(cancel_all, rest, t[:, half:])
    perm = torch.rand(n, m, generator=gen).argsort(dim=-1)
    return t.gather(-1, perm)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_renormalize_exact_when_nothing_is_truncated(dtype, nc, rng):
    """m <= nc terms (any order, overlapping, zeros, cancellation, exponents spread over up
    to 3p binades, subnormal tails included): the exact sum is kept and the result is
    normalised."""
    p, _, _ = float_format(dtype)
    n = 100_000
    for m in range(2, nc + 1):
        t = _renorm_terms(n, m, dtype, rng, spread=3 * p)
        assert t.dtype == dtype
        r = eft.renormalize(t, nc)
        assert r.shape == (n, nc) and r.dtype == dtype
        assert_normalised(r, f"renormalize m={m} nc={nc}", overlap=_overlap_allowed(dtype))
        ok = exact_equal(list(r.unbind(-1)), list(t.unbind(-1)))
        assert bool(ok.all()), f"m={m}: sum changed, e.g. terms {t[~ok][:2].tolist()} -> {r[~ok][:2].tolist()}"


def _no_underflow_exponent(dtype: torch.dtype, nc: int) -> int:
    """Smallest exponent of a sum whose nc-component expansion has its truncation error
    above the subnormal quantum: u^nc |x| >= 2^(emin - p), i.e. e >= emin - p + nc p."""
    p, emin, _ = float_format(dtype)
    return emin - p + nc * p


def _overlap_allowed(dtype: torch.dtype) -> float:
    """Non-overlap factor renormalize guarantees: its outputs sometimes overlap by up to
    one ulp (documented; test_renormalize_output_overlaps_by_at_most_one_ulp), so the
    random tests check |c[i+1]| <= ulp(c[i])."""
    return 1.0


def _skip_fp16_nc4(dtype, nc):
    if dtype == torch.float16 and nc == 4:
        pytest.skip(
            "float16 has no value whose 4th component is above the subnormal range "
            "(NUMERICS.md 'fp16 reality'): no relative u^4 bound exists"
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_renormalize_truncation_bound(dtype, nc, rng):
    """m = 2 nc + 1 terms: |sum(r) - sum(t)| <= u^nc |sum(t)| where the tail cannot
    underflow (|sum| u^nc >= 2^(emin-p)); normalised; exact zero sums give zeros."""
    _skip_fp16_nc4(dtype, nc)
    p, _, _ = float_format(dtype)
    n = 100_000
    m = 2 * nc + 1
    low = _no_underflow_exponent(dtype, nc)
    t = _renorm_terms(n, m, dtype, rng, spread=2 * p, lowest=low + 2)
    r = eft.renormalize(t, nc)
    assert_normalised(r, f"renormalize m={m} nc={nc}", overlap=_overlap_allowed(dtype))
    poly_err = [(1, (x,)) for x in r.unbind(-1)] + [(-1, (x,)) for x in t.unbind(-1)]
    poly_sum = [(1, (x,)) for x in t.unbind(-1)]
    err, total = exact_sums([poly_err, poly_sum], magnitude=True)
    safe = total["log2"] >= low
    assert float(safe.double().mean()) > 0.5
    rel = err["log2"] - total["log2"]  # log2 of |error| / |sum|; -inf where exact
    worst = float(rel[safe].max())
    assert worst <= -nc * p + 1e-9, f"error {2 ** (worst + nc * p):.4g} u^{nc}"
    assert bool(total["zero"].any()) and bool((r[total["zero"]] == 0).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
@settings(max_examples=min(settings.default.max_examples, 40))
@given(data=st.data())
def test_renormalize_scattered_expansion(dtype, nc, data):
    """Scatter a normalised expansion (``tests.oracle.expansions``: wide exponents, gaps,
    half-ulp ties) into many overlapping unsorted terms (pieces of each component, ±t
    pairs, zeros): renormalize gives a normalised result within u^nc of it. (Exactness
    is not guaranteed: test_renormalize_of_a_representable_sum_is_within_the_documented_bound.)"""
    _skip_fp16_nc4(dtype, nc)
    p, emin, emax = float_format(dtype)
    lo = min(_no_underflow_exponent(dtype, nc) + 2, emax - 6)
    x = data.draw(expansions(dtype, nc, min_exp=lo, max_exp=emax - 4, shape=(64,)))
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    ebits, mbits, ity = _LAYOUT[dtype]
    terms = []
    for c in x.unbind(-1):
        keep = torch.randint(0, mbits + 1, c.shape, generator=gen)  # clear `keep` low bits
        head = (c.view(ity) & (-1 << keep).to(ity)).view(dtype)
        terms += [head, c - head]  # exact: c - head is c's cleared low bits
    noise = random_floats(torch.randint(1, (1 << ebits) - 4, (64,), generator=gen), dtype, gen)
    terms += [noise, -noise, torch.zeros_like(noise)]
    t = torch.stack(terms, -1)
    t = t.gather(-1, torch.rand(t.shape, generator=gen).argsort(dim=-1))
    r = eft.renormalize(t, nc)
    assert_normalised(r, "scattered", overlap=_overlap_allowed(dtype))
    got = components_to_fraction(r).tolist()
    exact = components_to_fraction(x).tolist()
    assert components_to_fraction(t).tolist() == exact  # the construction is exact
    unit = Fraction(2) ** (-nc * p)
    for g_, e_ in zip(got, exact):
        assert abs(g_ - e_) <= unit * abs(e_)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_renormalize_of_a_representable_sum_is_within_the_documented_bound(dtype):
    """The documented bound is truncation, ``|sum(r) - sum(t)| <= u^nc |sum(t)|``, not
    exactness: ``[-2^(p-1), -1, -(1/2 - 2^-(p+1))]`` to nc = 2 gives ``[-(2^(p-1)+2), 1/2]``
    (error ``2^-(p+1)``, about ``u^2 |sum|``) although ``[-(2^(p-1)+1), -(1/2 - 2^-(p+1))]``
    is exact. Proof sketch: the bottom-up VecSum meets ``-2^(p-1) - 3/2``, exactly halfway
    between ``-(2^(p-1)+1)`` and ``-(2^(p-1)+2)``, and rounds it to even (its error ``1/2``
    is kept); truncating to two components then rounds the tail ``1/2 - (1/2 - 2^-(p+1))``
    region once more. Each of the two roundings lands within half an ulp of the last
    kept component, so the total stays below ``u^2 |sum|`` although a single rounding
    would have been exact.
    """
    p, _, _ = float_format(dtype)
    t = torch.tensor([[-(2.0 ** (p - 1)), -1.0, -(0.5 - 2.0 ** -(p + 1))]], dtype=dtype)
    r = eft.renormalize(t, 2)
    got, want = components_to_fraction(r)[0], components_to_fraction(t)[0]
    assert got != want  # not the nearest expansion (documented)
    assert abs(got - want) <= Fraction(2) ** (-2 * p) * abs(want)  # the documented bound, u^2 |sum|


@pytest.mark.parametrize(
    "dtype, terms, nc",
    [
        # -> [-17024, -62.5, 0.1259765625]; 0.1259765625 > ulp(62.5)/2 = 0.125
        (torch.bfloat16, [-9600.0, 33.5, -7520.0, 0.1259765625], 3),
        (
            torch.bfloat16,
            [
                -0.00018310546875,
                -0.01611328125,
                6.2282197177410126e-09,
                -1.1823431123048067e-11,
                2.9103830456733704e-11,
                -0.0625,
                -2.86102294921875e-06,
            ],
            4,
        ),
        # -> [4.2885e24, 1.3688e17, 714.202392578125, -3.633e-05]; 3.633e-05 > ulp(714.2)/2
        (
            torch.float32,
            [
                6.617507146801004e23,
                335007449088.0,
                3.6267774588438875e24,
                1.3687820254183424e17,
                1.52587890625e-05,
                9.44422572501935e-06,
                0.00115966796875,
                714.201171875,
            ],
            4,
        ),
    ],
    ids=["bf16-nc3", "bf16-nc4", "fp32-nc4"],
)
def test_renormalize_output_overlaps_by_at_most_one_ulp(dtype, terms, nc):
    """The documented component bound is ``|r[i+1]| <= ulp(r[i])``; the stronger
    ``ulp(r[i]) / 2`` fails for these inputs (the first _distill pass can overlap and
    the second does not always repair it). Proof sketch of the weak bound: the last
    top-down pass emits ``r[i+1]`` as the error of a TwoSum whose sum is ``r[i]``, and a
    TwoSum error is at most half an ulp of the sum *of its operands*, which can exceed
    ``r[i]`` by one binade when the running sum drops a binade: at most ``ulp(r[i])``."""
    t = torch.tensor([terms], dtype=dtype)
    assert t.double().tolist() == [terms]
    r = eft.renormalize(t, nc)
    assert_normalised(r, f"{dtype} nc={nc}", overlap=1.0)  # the documented bound
    with pytest.raises(AssertionError, match="overlaps"):
        assert_normalised(r, f"{dtype} nc={nc}")  # the convention's 1/2 does not hold here
    got, want = components_to_fraction(r)[0], components_to_fraction(t)[0]
    p = UNIT_ROUNDOFF_BITS[dtype]
    assert abs(got - want) <= Fraction(2) ** (-nc * p) * abs(want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_renormalize_to_one_component_is_the_rounded_sum(dtype):
    """nc = 1 goes through the same exact VecSum as nc >= 2 (it used to sum naively)."""
    t = torch.tensor([[1.0, 2.0**-60, -1.0], [2.0**-60, 1.0, -1.0]], dtype=dtype)
    assert eft.renormalize(t, 1)[:, 0].tolist() == [2.0**-60] * 2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_renormalize_presorted_matches_sorted(dtype, rng):
    n, nc = 50_000, 3
    t = _renorm_terms(n, 6, dtype, rng, spread=40)
    order = t.abs().double().argsort(dim=-1, descending=True)
    ts = t.gather(-1, order)
    a = eft.renormalize(t, nc)
    b = eft.renormalize(ts, nc, presorted=True)
    assert bool(exact_equal(list(a.unbind(-1)), list(b.unbind(-1))).all())
    assert_normalised(b, "presorted", overlap=_overlap_allowed(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_renormalize_nonfinite_leading_component(dtype):
    inf, nan = math.inf, math.nan
    t = torch.tensor([[inf, 1.0, 2.0], [-inf, 1.0, 0.5], [nan, 1.0, 1.0], [inf, -inf, 1.0]], dtype=dtype)
    r = eft.renormalize(t, 3)
    assert math.isnan(r[2, 0].item()) and math.isnan(r[3, 0].item())
    assert bool((r[:, 1:] == 0).all())
    assert r[0, 0].item() == inf and r[1, 0].item() == -inf


def test_renormalize_accepts_a_list_and_a_single_term():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    r = eft.renormalize([x], 3)
    assert r.shape == (2, 3) and r[:, 0].tolist() == [1.0, 2.0] and bool((r[:, 1:] == 0).all())
    r = eft.renormalize([x, torch.full_like(x, 2.0**-60)], 2)
    assert r.tolist() == [[1.0, 2.0**-60], [2.0, 2.0**-60]]


def test_pack_unpack_round_trip():
    c = [torch.arange(6.0).reshape(2, 3), -torch.arange(6.0).reshape(2, 3)]
    x = eft.pack(c)
    assert x.shape == (2, 3, 2)
    assert all(torch.equal(a, b) for a, b in zip(eft.unpack(x), c))


def test_float_format_rejects_other_dtypes():
    with pytest.raises(TypeError, match="component dtype must be one of"):
        eft.float_format(torch.int32)


@pytest.mark.parametrize("la", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("lb", [1, 2, 3, 4, 5])
def test_merge_by_magnitude_is_a_merge(la, lb):
    """Two magnitude-ordered lists (ties, zeros, signs, subnormals) merge into a
    magnitude-ordered permutation of their union, element by element (the sign of zero
    terms is not kept: arithmetic selects, as in the sorting network)."""
    gen = torch.Generator().manual_seed(la * 10 + lb)
    n = 4000
    pool = torch.tensor([0.0, -0.0, 5e-324, -1e-310, 1.0, -1.0, 0.5, 3.0, -3.0, 1e300, -2e-300], dtype=torch.float64)

    def ordered(length):
        raw = torch.where(
            torch.rand((n, length), generator=gen) < 0.3,
            pool[torch.randint(len(pool), (n, length), generator=gen)],
            torch.randn((n, length), generator=gen, dtype=torch.float64)
            * torch.exp2(torch.randint(-60, 60, (n, length), generator=gen).double()),
        )
        idx = raw.abs().argsort(dim=-1, descending=True, stable=True)
        return list(raw.gather(-1, idx).unbind(-1))

    a, b = ordered(la), ordered(lb)
    got = torch.stack(eft.merge_by_magnitude(a, b), -1)
    assert got.shape == (n, la + lb)
    mags = got.abs()
    assert bool((mags[:, :-1] >= mags[:, 1:]).all()), "not ordered by magnitude"
    union = torch.stack(a + b, -1)
    # same multiset: compare the sorted bit patterns, zeros made +0
    key = lambda t: (t + 0.0).view(torch.int64).sort(-1).values  # noqa: E731
    assert torch.equal(key(got), key(union))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_select_is_where_bit_for_bit(dtype):
    """``eft.select`` gives ``torch.where``'s bits (signed zeros, infinities, NaN payloads)
    and shape for every broadcast of condition and operands, planar (non-contiguous)
    operands included; below ``SELECT_MIN`` elements and under autograd it is ``where``."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6000, generator=g, dtype=torch.float64).to(dtype)
    y = torch.randn(6000, generator=g, dtype=torch.float64).to(dtype)
    x[0, :8] = torch.tensor([math.nan, -math.nan, -0.0, 0.0, math.inf, -math.inf, 1e-40, -1e-45], dtype=torch.float64).to(dtype)
    y[:8] = torch.tensor([-0.0, math.nan, math.inf, -0.0, 0.0, math.nan, -1.0, 5.0], dtype=torch.float64).to(dtype)
    planar = torch.randn(3, 6000, 2, generator=g, dtype=torch.float64).to(dtype).movedim(-1, 0)[0]  # strided
    conds = [torch.rand(3, 1, generator=g) > 0.5, torch.rand(6000, generator=g) > 0.5, torch.rand(2, 3, 6000, generator=g) > 0.5]
    for cond in conds:
        for a, b in ((x, y), (y, x), (planar, y), (x, y.new_zeros(()))):
            got, want = eft.select(cond, a, b), torch.where(cond, a, b)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8))
    small = eft.select(torch.tensor([True, False]), x[0, 10:12], y[10:12])
    assert torch.equal(small, torch.where(torch.tensor([True, False]), x[0, 10:12], y[10:12]))
    w = x.detach().clone().requires_grad_()
    eft.select(conds[1], w, y).sum().backward()
    assert torch.equal(w.grad, conds[1].expand_as(w).to(dtype))
