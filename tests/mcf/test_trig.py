"""Tests of ``hypermc.mcf.elementary.sin``, ``cos`` and ``tan`` against mpmath.

Bound: ``BOUNDS["transcendental"]`` (64 units of ``u**nc``), relative, as for the other
elementary functions (``tests/mcf/test_elementary.py``, whose helpers these tests use),
including the arguments near multiples of ``pi/2`` that the bound covers: an expansion
``x`` at least ``2^-(nc p + 64)`` away from ``k pi/2`` (``k != 0``), e.g. ``x`` = the
``nc``-component rounding of ``k pi/2`` itself, whose sine or cosine is ``~2^-(nc p)``.

The reference is mpmath on the exact sum of the input components, at a precision that
grows with the argument's exponent and with the bits it cancels against ``k pi/2``.
"""

from __future__ import annotations

import math
import signal

import mpmath
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import elementary as el
from tests.mcf.test_elementary import (
    CASE_IDS,
    CASES,
    _expansion,
    _loguniform,
    _mc,
    _p,
    _uniform,
    check_special_values,
)
from tests.mcf.test_elementary import (
    _assert_accurate as _assert_accurate_elementary,
)
from tests.oracle import components_to_mpf, expansions, float_format

FUNCS = ["sin", "cos", "tan"]
MPMATH = {"sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan}
INF, NAN = math.inf, math.nan


def _reference(fn: str, x: mpmath.mpf, wp: int) -> mpmath.mpf:
    """``fn(x)`` to ``wp`` bits: the working precision covers the argument's exponent and
    the bits ``x`` cancels against the nearest multiple of ``pi/2``."""
    if x == 0:
        return +MPMATH[fn](x)
    extra = max(0, int(mpmath.mag(x))) + 32
    with mpmath.workprec(wp + extra):
        k = mpmath.nint(x / (mpmath.pi / 2))
        d = x - k * mpmath.pi / 2
        cancel = max(0, -int(mpmath.mag(d))) if d != 0 else 0
    with mpmath.workprec(wp + extra + cancel + 32):
        ref = MPMATH[fn](x)
    return +ref


def _assert_accurate(fn: str, x: torch.Tensor, y: torch.Tensor, msg: str = "") -> float:
    """``y = fn(x)`` within ``BOUNDS["transcendental"] u^nc`` (relative) of mpmath, normalised; the worst error."""
    return _assert_accurate_elementary(fn, x, y, msg, reference=_reference)


def _multiples_of_half_pi(ks: list[int], dtype: torch.dtype, nc: int) -> torch.Tensor:
    """The ``nc``-component roundings of ``k pi/2``: ``sin``/``cos``/``tan`` cancel
    ``~nc p + log2 k`` bits there."""
    p = _p(dtype)
    rows = []
    with mpmath.workprec(nc * p + 200):
        for k in ks:
            rest, row = k * mpmath.pi / 2, []
            for _ in range(nc):
                with mpmath.workprec(p):
                    c = +rest
                row.append(float(c))
                rest -= c
            rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


def _inputs(dtype: torch.dtype, nc: int, gen: torch.Generator) -> torch.Tensor:
    p, _, emax = float_format(dtype)
    lead = torch.cat(
        [
            _uniform(-10, 10, 60, gen),
            _uniform(-0.8, 0.8, 20, gen),
            _loguniform(-60, -5, 20, gen),
            _loguniform(4, min(emax - 1, 3 * p), 30, gen),
            _loguniform(3 * p, emax - 1, 6, gen),
        ]
    )
    near = _multiples_of_half_pi([1, 2, 3, -4, 5, 1000, -77777, 2**40 + 1], dtype, nc)
    return torch.cat([_expansion(lead, dtype, nc, gen), near])


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("fn", FUNCS)
def test_nc1_is_the_torch_function(fn, dtype, rng):
    x = torch.cat([torch.randn(200, generator=rng, dtype=torch.float64) * 4, torch.tensor([0.0, -0.0, 1.0, 1e30, INF, NAN])])
    x = x.to(dtype).unsqueeze(-1)
    torch.testing.assert_close(getattr(el, fn)(x), getattr(torch, fn)(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("fn", FUNCS)
def test_random_against_mpmath(fn, dtype, nc, seed):
    """Bulk arguments, small and tiny ones, large ones up to the top of the exponent range,
    and the ``nc``-component roundings of multiples of ``pi/2`` (up to ``2^40 pi/2``)."""
    gen = torch.Generator().manual_seed(seed + 100 * FUNCS.index(fn) + 10 * nc + _p(dtype))
    x = _inputs(dtype, nc, gen)
    _assert_accurate(fn, x, getattr(el, fn)(x))


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_near_multiples_of_half_pi_down_to_the_stated_distance(dtype, nc):
    """``x = k pi/2 + d`` with ``|d|`` down to ``2^-(nc p + 60)`` (just inside the bound's
    condition), formed as an exact expansion: relative accuracy holds where the function
    is ``~d``; and exactly ``k pi/2`` rounded (``d ~ u^nc``)."""
    p = _p(dtype)
    base = _multiples_of_half_pi([1, 2, 7, -9], dtype, nc)
    rows = []
    for b in base:
        for e in (-p - 3, -(nc * p) // 2, -(nc * p) - 10, -(nc * p) - 60):
            exact = components_to_mpf(b.unsqueeze(0))[0]
            with mpmath.workprec(nc * p + 400):
                v = exact + mpmath.ldexp(3, e)
            rows.append(components_from_mpf(v, dtype, nc))
    x = torch.stack(rows)
    for fn in FUNCS:
        _assert_accurate(fn, x, getattr(el, fn)(x), msg="near k pi/2")


def components_from_mpf(v: mpmath.mpf, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """The ``nc`` nearest-rounded components of ``v`` (zero where the remainder is exact)."""
    p = _p(dtype)
    out, rest = [], v
    with mpmath.workprec(nc * p + 600):
        for _ in range(nc):
            with mpmath.workprec(p):
                c = +rest
            out.append(float(c))
            rest -= c
    return torch.tensor(out, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype, nc", CASES, ids=CASE_IDS)
def test_relative_near_zero(dtype, nc):
    """``sin x``, ``tan x`` relatively accurate down to tiny ``|x|`` (and ``= x`` below the
    threshold), ``cos x = 1 - x^2/2`` there."""
    gen = torch.Generator().manual_seed(nc)
    x = _expansion(_loguniform(-120 if dtype == torch.float32 else -900, -2, 40, gen), dtype, nc, gen)
    for fn in FUNCS:
        _assert_accurate(fn, x, getattr(el, fn)(x), msg="near 0")
    t = 2.0**-400 if dtype == torch.float64 else 2.0 ** -(nc * _p(dtype) + 20)  # x^3/6 is no component
    tiny = _mc([[t], [-t]], dtype, nc)
    assert torch.equal(el.sin(tiny), tiny) and torch.equal(el.tan(tiny), tiny)


SPECIALS = {
    "sin": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    "tan": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
}


@pytest.mark.parametrize("dtype, nc", [(torch.float32, 1)] + CASES, ids=["float32-nc1"] + CASE_IDS)
@pytest.mark.parametrize("fn", FUNCS)
def test_special_values(fn, dtype, nc):
    check_special_values(fn, SPECIALS[fn], dtype, nc)


@pytest.mark.parametrize(
    "dtype, nc",
    [(torch.float16, 2), (torch.bfloat16, 3), (torch.float16, 5), (torch.bfloat16, 7)],
    ids=["f16-2", "bf16-3", "f16-5", "bf16-7"],
)
@pytest.mark.parametrize("fn", FUNCS)
def test_half_precision_paths(fn, dtype, nc, seed):
    """The wide engine (float16 nc = 2, bfloat16 nc = 3) and the generic algorithm on the
    float64 expansion (float16 nc = 5, bfloat16 nc = 7)."""
    gen = torch.Generator().manual_seed(seed + nc)
    x = _expansion(_uniform(-100.0, 100.0, 60, gen), dtype, nc, gen)
    _assert_accurate(fn, x, getattr(el, fn)(x))


@pytest.mark.parametrize("fn", FUNCS + ["exp", "log"])
def test_bad_component_tensors_are_refused(fn):
    """A 0-d tensor has no component axis (it gave an IndexError); an integer one no float
    components."""
    with pytest.raises(ValueError, match=r"x: expected a component tensor of shape \(\*shape, nc\); got a 0-d tensor"):
        getattr(el, fn)(torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(TypeError, match="component dtype must be one of float16, bfloat16, float32, float64; got torch.int64"):
        getattr(el, fn)(torch.ones(3, 2, dtype=torch.int64))


@pytest.mark.parametrize("fn", FUNCS)
def test_shapes_broadcast_empty_and_blocks(fn, monkeypatch):
    x = _mc([[0.5], [1.5], [25.0], [-3.5], [0.25], [1e5]], torch.float64, 3).reshape(2, 3, 3)
    y = getattr(el, fn)(x)
    assert y.shape == (2, 3, 3) and torch.equal(y.reshape(6, 3), getattr(el, fn)(x.reshape(6, 3)))
    assert getattr(el, fn)(x[:0]).shape == (0, 3, 3)
    monkeypatch.setattr(el, "_CPU_BLOCK", 2)  # the CPU blocks give the whole tensor's values
    torch.testing.assert_close(getattr(el, fn)(x.reshape(6, 3)), y.reshape(6, 3), rtol=0, atol=0)


def test_fast_reduction_leaves_only_cancelling_and_huge_arguments_to_the_exact_one(monkeypatch):
    """The fast reduction keeps every element with fewer than ``p - 8`` cancelled bits and
    ``|x| < 2^(p-8)``; the exact one sees only the others, and both give the bound."""
    seen = []
    exact = el._trig_reduce_exact
    monkeypatch.setattr(el, "_trig_reduce_exact", lambda x, nc: seen.append(x[0].clone()) or exact(x, nc))
    gen = torch.Generator().manual_seed(5)
    bulk = _expansion(_uniform(-1000, 1000, 200, gen), torch.float64, 3, gen)
    near = _multiples_of_half_pi([3, -8, 101], torch.float64, 3)
    huge = _mc([[2.0**60], [-(2.0**200)]], torch.float64, 3)
    x = torch.cat([bulk, near, huge])
    y = el.sin(x)
    assert len(seen) == 1 and sorted(seen[0].tolist()) == sorted(torch.cat([near, huge])[:, 0].tolist())
    _assert_accurate("sin", x, y)


def _huge_near_multiple(x0: float, nc: int) -> list[float]:
    """``x0`` followed by the ``(nc-1)``-component rounding of ``k pi/2 - x0`` (``k`` nearest):
    an expansion ``~2^-(nc p)`` from ``k pi/2`` whose reduction takes several rounds."""
    with mpmath.workprec(3000):
        k = mpmath.nint(mpmath.mpf(x0) / (mpmath.pi / 2))
        rest, comps = k * mpmath.pi / 2 - x0, [x0]
        for _ in range(nc - 1):
            c = float(rest)
            comps.append(c)
            rest -= c
    return comps


@pytest.mark.parametrize("nc", [3, 4, 5, 6])
def test_huge_arguments_near_multiples_take_several_exact_rounds(nc):
    """Found in review: ``round(x_0 2/pi)`` of a huge ``x_0`` can be off by one, leaving
    ``r ~ pi/2`` for the next round to cancel, so ``r`` must be carried to the pieces'
    absolute precision (it was carried relative to itself: 1e12 u^5 at nc = 5)."""
    gen = torch.Generator().manual_seed(nc)
    x0s = [9537041692756784.0, 1.656228372872042e24, 1.2573347207632256e308]
    x0s += [float(v) for v in torch.exp2(torch.rand(5, generator=gen, dtype=torch.float64) * 960 + 55)]
    x = torch.tensor([_huge_near_multiple(v, nc) for v in x0s], dtype=torch.float64)
    for fn in FUNCS:
        _assert_accurate(fn, x, getattr(el, fn)(x), msg="huge near k pi/2")


def test_float32_tails_cancelled_in_a_second_exact_round():
    """Found in the second review: a float32 expansion's tail (up to ``2^-24 |x_0|``) is
    left in ``r`` by the first round (``n`` from ``x_0``) and cancelled by the second, so
    ``r`` must be carried to absolute precision there too (9.3 u^3 before; these are
    ~2^-72 from ``k pi/2``)."""
    x = torch.tensor(
        [
            [733534847238144.0, -5990965.0, -0.020045757293701172],
            [642996936638464.0, -26438008.0, -0.6925027370452881],
            [412036378918912.0, 7228039.5, -0.17379438877105713],
        ],
        dtype=torch.float32,
    )
    for fn in FUNCS:
        assert _assert_accurate(fn, x, getattr(el, fn)(x), msg="float32 second round") < 1


def test_float32_nc4_fast_reduction_keeps_the_whole_tail():
    """Found in review: float32 ``nc = 4`` computes on 2 float64 components, and the fast
    reduction truncated the exact 3-component tail to 2 (233 u^4 here, with ``x`` 5e-7
    from ``k pi/2``); it now holds the tail at 3."""
    x = torch.tensor([[15730240.0, 0.301456093788147, -2.573751324910778e-12, -1.5439761976325653e-33]], dtype=torch.float32)
    gen = torch.Generator().manual_seed(4)
    lead = torch.exp2(torch.rand(200, generator=gen, dtype=torch.float64) * 24 + 8)
    x = torch.cat([x, _expansion(lead, torch.float32, 4, gen)])
    for fn in FUNCS:
        _assert_accurate(fn, x, getattr(el, fn)(x), msg="float32 nc=4 tails")


@pytest.mark.parametrize("fn", FUNCS)
def test_non_contiguous_inputs_with_exact_reductions(fn):
    """Found in review: transposed inputs whose elements take the exact reduction crashed
    (the patch wrote through ``view(-1)`` of the input's permuted strides)."""
    x = torch.zeros(2, 3, 2, dtype=torch.float64)
    x[..., 0] = torch.tensor([[0.5, 1.0, 2.0], [3.0, 1e30, 4.0]])
    t = x.transpose(0, 1)
    torch.testing.assert_close(getattr(el, fn)(t), getattr(el, fn)(t.contiguous()), rtol=0, atol=0)
    y = getattr(torch, fn)(hm.mcf.mc(torch.tensor([[0.5, 1.0, 2.0], [3.0, 1e30, 4.0]], dtype=torch.float64), nc=2).T)
    assert y.shape == (3, 2)


@pytest.mark.parametrize("fn", FUNCS)
@pytest.mark.parametrize(("dtype", "nc"), [(torch.float64, 2), (torch.float64, 3), (torch.float32, 3), (torch.float32, 4)], ids=str)
def test_non_finite_tail_behind_a_finite_lead_gives_nan(fn, dtype, nc):
    """A finite ``x_0`` with a NaN or infinite tail (not an expansion) would make the exact
    reduction's ``n`` NaN, and its loop (until every ``n`` is 0) would never end. The NaN
    propagates instead: alone, and batched with ordinary arguments."""
    rows = [[lead, bad] + [0.0] * (nc - 2) for lead in (0.5, 1.0, -3.0, 1e10) for bad in (math.nan, math.inf, -math.inf)]
    bad_rows = torch.tensor(rows, dtype=dtype)
    ordinary = torch.tensor([[0.7] + [0.0] * (nc - 1), [2.5] + [0.0] * (nc - 1)], dtype=dtype)
    f = getattr(el, fn)

    def hung(signum, frame):
        raise TimeoutError(f"{fn} of a non-finite tail did not return within 60 s")

    previous = signal.signal(signal.SIGALRM, hung)  # a hang fails the test (the loop is Python)
    signal.alarm(60)
    try:
        for x in (bad_rows, torch.cat([bad_rows, ordinary]), bad_rows[1:2]):
            y = f(x)
            assert bool(torch.isnan(y[: min(len(x), len(bad_rows)), 0]).all())
            assert bool(torch.isfinite(y[len(bad_rows) :]).all())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's Inductor
def test_mctensor_ops_autograd_and_compile():
    """``torch.sin/cos/tan`` on an MCTensor, their gradients (``cos``, ``-sin``, ``1 +
    tan^2``) in MC accuracy, and a compiled function (opaque ops: eager mode's bits)."""
    x = hm.mcf.mc(torch.tensor([0.3, -2.0, 10.0, 1e6], dtype=torch.float64), nc=3).requires_grad_()
    for fn, grad in (("sin", lambda v: mpmath.cos(v)), ("cos", lambda v: -mpmath.sin(v)), ("tan", lambda v: 1 / mpmath.cos(v) ** 2)):
        x.grad = None
        y = getattr(torch, fn)(x)
        assert isinstance(y, hm.MCTensor) and y.nc == 3
        y.sum().backward()
        g = components_to_mpf(x.grad.components)
        with mpmath.workprec(260):
            for gi, xi in zip(g, components_to_mpf(x.detach().components)):
                ref = grad(xi)
                assert abs(gi / ref - 1) < 2.0 ** (-150), f"d{fn} at {xi}: {gi} vs {ref}"

    def f(v):
        return torch.sin(v) * torch.cos(v) + torch.tan(v)

    xd = x.detach()
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(xd).components, f(xd).components)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
@example(data=None)
def test_hypothesis_against_mpmath(data):
    if data is None:  # pinned: signed zeros, pi/2 and pi at every nc, the largest float64
        rows = [[0.0, 0.0, 0.0], [-0.0, 0.0, 0.0], [1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33]]
        x = torch.tensor(rows + [[1.7976931348623157e308, 0.0, 0.0]], dtype=torch.float64)
        for fn in FUNCS:
            _assert_accurate(fn, x, getattr(el, fn)(x), msg="pinned")
        return
    fn = data.draw(st.sampled_from(FUNCS), label="fn")
    dtype, nc = data.draw(st.sampled_from(CASES), label="case")
    hi = 200 if dtype == torch.float64 else 100
    x = data.draw(expansions(dtype, nc, min_exp=-60, max_exp=hi, shape=(10,)), label="x")
    _assert_accurate(fn, x, getattr(el, fn)(x), msg="hypothesis")


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, nc", [(torch.float64, 2), (torch.float64, 3), (torch.float64, 4), (torch.float32, 2), (torch.float32, 4)])
def test_cuda_against_mpmath(dtype, nc):
    """The same functions on CUDA tensors: bulk, large, ``k pi/2`` and huge arguments (the
    exact reduction) within the bound."""
    gen = torch.Generator().manual_seed(nc)
    x = torch.cat([_inputs(dtype, nc, gen), _mc([[2.0**60], [-(2.0**100)]], dtype, nc)])
    for fn in FUNCS:
        y = getattr(el, fn)(x.to("cuda"))
        assert y.device.type == "cuda"
        _assert_accurate(fn, x, y.cpu(), msg="cuda")
