"""The fused nc = 2/3/4 CPU kernels of :mod:`hypermc.mcf.native`.

Their accuracy against mpmath is the op-level tests' job (``tests/mcf/test_arith.py`` runs
on them whenever they are in use, which is asserted here). This file proves what makes
that enough: on every input the fused kernels give *the same bits* as the torch networks
they transcribe (random and adversarial operands, broadcasting, every memory layout, the
thread split), the elements they reject are recomputed, and every way of not having them
(disabled, no compiler, failed build, failed self-check) is reported and falls back to
the torch kernels.
"""

from __future__ import annotations

import ctypes
import functools
import math

import mpmath
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import arith, elementary, native, reduce, registry
from hypermc.mcf.eft import float_format, renormalize
from hypermc.mcf.native import source
from tests.mcf.test_arith import _cap
from tests.oracle import expansions

DTYPES = [torch.float32, torch.float64]
NCS = [2, 3, 4]
INTS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}

needs_compiler = pytest.mark.skipif(native._compiler() is None, reason="no C++ compiler on this machine")


def _torch_kernels(f, *args):
    """``f(*args)`` with the fused kernels bypassed."""
    native._bypass.on = True
    try:
        return f(*args)
    finally:
        native._bypass.on = False


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(INTS[a.dtype]), b.contiguous().view(INTS[b.dtype]))


OPS = {
    "add": arith.add,
    "sub": arith.sub,
    "mul": arith.mul,
    "div": arith.div,
    "add_float": lambda x, y: arith.add_float(x, y[..., 0]),
    "mul_float": lambda x, y: arith.mul_float(x, y[..., 0]),
    "div_float": lambda x, y: arith.div_float(x, y[..., 0]),
    "rdiv_float": lambda x, y: arith.rdiv_float(y[..., 0], x),
}


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_in_use_where_a_compiler_exists(dtype, nc):
    assert native.status(dtype, nc) == "in use"
    x = torch.ones(5, nc, dtype=dtype)
    assert native.add(x, x, False) is not None


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("op", sorted(OPS))
@_cap(10)
@given(data=st.data())
def test_same_bits_as_the_torch_networks(dtype, nc, op, data):
    """Random operands over the whole exponent range, with zeros, cancelling pairs and
    pinned edge values (subnormal, huge, ±0) mixed in."""
    x = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    y = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    y[::5] = -x[::5]  # exact cancellation
    y[1::5] = _torch_kernels(arith.add, -x[1::5], y[1::5] * 2.0**-40)  # near cancellation
    fast = OPS[op](x, y)
    assert _same_bits(fast, _torch_kernels(OPS[op], x, y))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(10)
@given(data=st.data())
def test_sqrt_same_bits_as_the_torch_networks(dtype, nc, data):
    # the torch kernels take one path for a whole tensor (the fixed one where every element
    # is in range); the fused ones decide per element, so compare on in-range tensors
    lo, hi = arith._sqrt_range(dtype, nc)
    lo_e, hi_e = math.ceil(math.log2(lo)) + 1, math.floor(math.log2(hi)) - 1
    x = data.draw(expansions(dtype, nc, min_exp=lo_e, max_exp=hi_e, shape=(48,)))
    x = torch.where(x[..., :1] < 0, -x, x)
    assert _same_bits(arith.sqrt(x), _torch_kernels(arith.sqrt, x))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3, 4])
@_cap(10)
@given(data=st.data())
def test_sqrt_rescaled_same_bits_as_the_torch_networks(dtype, nc, data):
    """Positive expansions over the whole exponent range, subnormal and huge edge values
    pinned: the elements outside the fixed networks' range are rescaled into it, per
    element, on both paths (:func:`arith._sqrt_rescaled`; at nc = 2 the torch path scales
    the whole batch, :func:`arith._sqrt2`, and the kernel leaves the elements out of range
    to it: every rounding commutes with the even power of two), so the bits agree."""
    x = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    x = torch.where(x[..., :1] < 0, -x, x)
    assert _same_bits(arith.sqrt(x), _torch_kernels(arith.sqrt, x))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_special_values_are_recomputed(dtype, nc):
    """inf, NaN, ±0, division by zero, overflow and subnormal leading components: the
    fused kernels flag them and the general kernels give the torch results."""
    fi = torch.finfo(dtype)
    lead = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, fi.max, fi.tiny / 4, 1.0, -3.0, fi.max / 2], dtype=dtype)
    x = torch.zeros(len(lead), nc, dtype=dtype)
    x[:, 0] = lead
    y = x.flip(0).clone()
    y[7, 0] = 0.0  # 1 / 0
    for op, f in OPS.items():
        got, ref = f(x, y), _torch_kernels(f, x, y)
        assert _same_bits(got, ref), op
    pos = x.abs()
    assert _same_bits(arith.sqrt(pos), _torch_kernels(arith.sqrt, pos))
    assert _same_bits(arith.sqrt(-pos), _torch_kernels(arith.sqrt, -pos))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_division_kernels_leave_multi_step_scalings_to_the_torch_path(dtype, nc):
    """The division kernels scale by one power of two per operand and one back; where an
    exponent or the difference of the two exceeds ``emax - 2`` (a quotient near the top or
    the subnormal range, an operand next to finfo.max) they flag the element, and
    arith._long_division's three-step scaling recomputes it: the torch path's bits."""
    if (dtype, nc) == (torch.float32, 2):
        pytest.skip("float32 nc = 2 divides in float64 arithmetic")
    fi = torch.finfo(dtype)
    b = math.frexp(fi.max)[1] - 2  # 1022 (float64), 126 (float32)
    lead_x = [1.5 * 2.0 ** (b - 20), fi.max, 2.0 ** -(b // 2), 3.0, 1.0, 5.0]
    lead_y = [2.0**-21, 3.0, 2.0 ** (b // 2 + 10), 2.0**-60, 7.0, 2.0 ** (b - 1)]
    x, y = torch.zeros(len(lead_x), nc, dtype=dtype), torch.zeros(len(lead_y), nc, dtype=dtype)
    x[:, 0], y[:, 0] = torch.tensor(lead_x, dtype=dtype), torch.tensor(lead_y, dtype=dtype)
    x[:, 1], y[:, 1] = x[:, 0] * 2.0 ** -(float_format(dtype).p + 3), y[:, 0] * -(2.0 ** -(float_format(dtype).p + 5))
    res = native.div(x, y)
    assert res is not None
    assert res.ok.tolist() == [False, False, False, True, True, True]  # exponents x - y = b + 1; x = b + 2; x - y < -b
    assert _same_bits(arith.div(x, y), _torch_kernels(arith.div, x, y))
    assert bool(torch.isfinite(arith.div(x, y)[:2, 0]).all())  # finite quotients, not overflow


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [3, 4])
def test_second_pass_recomputes_the_rejected_elements_all_or_nothing(dtype, nc):
    """add and mul at nc = 3, 4: the elements the fixed network rejects (cancelling sums,
    subnormal products) are recomputed by the fused general kernel, on broadcast and
    planar operands too; next to a non-finite element all of them go to the torch
    networks. The torch networks' bits either way."""
    gen = torch.Generator().manual_seed(3)
    x = _torch_kernels(
        arith.add, torch.randn(8, 5, nc, generator=gen, dtype=dtype), torch.randn(8, 5, nc, generator=gen, dtype=dtype) * 2.0**-30
    )
    near = _torch_kernels(arith.add, -x, x * 2.0 ** -(float_format(dtype).p - 3))  # x + near cancels p - 3 bits
    y = torch.where((torch.arange(8) % 3 == 0).view(8, 1, 1), near, x.flip(0))
    tiny = torch.finfo(dtype).tiny
    for a, b in ((x, y), (x.movedim(-1, 0).contiguous().movedim(0, -1), y), (x[:1], y[:, :1] * 0 + y[:1]), (x * tiny, x * 2.0**-10)):
        for f, kernel in ((arith.add, native.add), (arith.mul, native.mul)):
            got, ref = f(a, b), _torch_kernels(f, a, b)
            assert _same_bits(got, ref), (f.__name__, tuple(a.shape), tuple(b.shape))
            res = kernel(a, b, False) if kernel is native.add else kernel(a, b)
            assert res.bad == 0, (f.__name__, res.bad)
    y_inf = y.clone()
    y_inf[1, 1, 0] = math.inf
    assert native._call(native._eligible(x, y), "add", [x, y], (nc, 1.0), nc).bad > 0  # the fixed network rejects some
    first = native._call(native._eligible(x, y_inf), "add", [x, y_inf], (nc, 1.0), nc)  # the fixed network alone
    res = native.add(x, y_inf, False)
    assert res.bad == first.bad > 1 and torch.equal(res.ok, first.ok)  # the cancelling sums stay rejected too
    assert _same_bits(arith.add(x, y_inf), _torch_kernels(arith.add, x, y_inf))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_layouts_and_broadcasting(dtype, nc):
    """Interleaved (user-made), planar (kernel outputs), strided, broadcast operands on
    either side, and an MC scalar: the same bits as the torch networks."""
    gen = torch.Generator().manual_seed(7)
    base = _torch_kernels(
        arith.add,
        torch.randn(6, 5, nc, generator=gen, dtype=dtype) * 2.0**-30,
        torch.randn(6, 5, 1, generator=gen, dtype=dtype).expand(6, 5, nc) * 0 + torch.randn(6, 5, nc, generator=gen, dtype=dtype),
    )
    planar = base.movedim(-1, 0).contiguous().movedim(0, -1)
    interleaved = base.contiguous()
    cases = [
        (interleaved, interleaved.flip(0)),
        (planar, interleaved),
        (interleaved[:, :4:2], planar[:, 1::2]),  # strided
        (interleaved[:1], planar),  # broadcast first operand
        (planar, interleaved[:, :1]),  # broadcast second operand
        (interleaved[:, :1], planar[:1]),  # (6, 1) with (1, 5): copied
        (interleaved[0, 0], planar),  # MC scalar
        (planar, interleaved[2, 3]),
        (interleaved[:0], interleaved[:0]),  # empty
        (planar.unsqueeze(1), planar.unsqueeze(1)),  # planar with a size-1 dim (any stride there): read in place
        (planar[2:4], planar[1:3]),  # rows of a planar buffer: its component stride is not theirs
        (planar[:, 1:], planar[:, :4]),  # columns of one: neither are its element strides
    ]
    for x, y in cases:
        for op, f in OPS.items():
            assert _same_bits(f(x, y), _torch_kernels(f, x, y)), (op, tuple(x.shape), tuple(y.shape))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_thread_split(dtype, monkeypatch):
    """Large tensors are split over torch's threads: chunks land where they belong."""
    nc = 3
    n = 5 * native._CHUNK + 17
    gen = torch.Generator().manual_seed(3)
    x = arith.add(torch.randn(n, nc, generator=gen, dtype=dtype), torch.randn(n, nc, generator=gen, dtype=dtype))
    y = arith.add(torch.randn(n, nc, generator=gen, dtype=dtype), torch.randn(n, nc, generator=gen, dtype=dtype))
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        threaded = [arith.mul(x, y), arith.div(x, y), arith.sub(x, y[:1])]
        torch.set_num_threads(1)
        single = [arith.mul(x, y), arith.div(x, y), arith.sub(x, y[:1])]
    finally:
        torch.set_num_threads(old)
    for a, b in zip(threaded, single):
        assert _same_bits(a, b)
    assert _same_bits(threaded[1], _torch_kernels(arith.div, x, y))


@needs_compiler
def test_not_used_under_autograd_or_for_other_configs():
    x = torch.ones(4, 3, dtype=torch.float64, requires_grad=True)
    assert native.add(x, x.detach(), False) is None
    assert native.add(torch.ones(4, 5, dtype=torch.float64), torch.ones(4, 5, dtype=torch.float64), False) is None
    assert native.sqrt(torch.ones(4, 2), 0.5, 2.0) is None  # float32 nc = 2: the float64 engine
    assert native.div(torch.ones(4, 2, dtype=torch.float64), torch.ones(4, 1, dtype=torch.float64)) is None
    assert native.add(torch.ones(4, 3, dtype=torch.float16), torch.ones(4, 3, dtype=torch.float16), False) is None
    assert native.mul(torch.ones(4, 3), torch.ones(4, 3, dtype=torch.float64)) is None
    assert "no native kernels" in native.status(torch.float16, 3)


def _fresh(monkeypatch):
    """A process state in which nothing has been loaded yet."""
    monkeypatch.setattr(registry, "_states", {})


def test_disabled_by_environment(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    assert native.status(torch.float64, 3) == "disabled by HYPERMC_NATIVE=0"
    x = torch.tensor([[1.0, 2.0**-60, 2.0**-120]], dtype=torch.float64)
    assert native.add(x, x, False) is None
    assert _same_bits(arith.add(x, x), _torch_kernels(arith.add, x, x))


def test_no_compiler(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(native, "_compiler", lambda: None)
    assert native.status(torch.float32, 4) == "no C++ compiler found (set HYPERMC_CXX)"
    assert not native.available(torch.float32, 4)


@needs_compiler
def test_failed_build_is_reported(monkeypatch, tmp_path):
    _fresh(monkeypatch)
    monkeypatch.setenv("HYPERMC_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native, "_FLAGS", [*native._FLAGS, "-no-such-flag-hypermc"])
    status = native.status(torch.float64, 4)
    assert status.startswith("build or load failed:") and "no-such-flag-hypermc" in status
    x = torch.tensor([[3.0, 2.0**-60, 0.0, 0.0]], dtype=torch.float64)
    assert _same_bits(arith.div(x, x), _torch_kernels(arith.div, x, x))


@needs_compiler
def test_failed_self_check_warns_and_falls_back(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(native, "_self_check", lambda lib, dtype, nc, *where: "mul")
    with pytest.warns(RuntimeWarning, match=r"f64 nc=3 disabled: mul differs from the torch kernels"):
        assert not native.available(torch.float64, 3)
    assert native.status(torch.float64, 3) == "self-check failed: mul"


@needs_compiler
def test_self_check_catches_a_wrong_kernel(monkeypatch):
    """The real self-check, against a library whose add is replaced by its mul."""
    lib = native._load(torch.float64, 3)
    assert lib is not None

    class Wrong:
        def __getattr__(self, name):
            if name == "mc_add_f64_3":
                mul = lib.mc_mul_f64_3

                def add_as_mul(n, x, xse, xsc, y, yse, ysc, ny, sign, out, os, ok):
                    return mul(n, x, xse, xsc, y, yse, ysc, ny, out, os, ok)

                return add_as_mul
            return getattr(lib, name)

    _fresh(monkeypatch)
    assert native._self_check(Wrong(), torch.float64, 3) == "add"
    assert native._self_check(lib, torch.float64, 3) is None


@needs_compiler
@_cap(30)
@example(n=1)
@given(n=st.integers(1, 300))
def test_one_call_per_op_whatever_the_size(n):
    """The ctypes boundary: pointer arithmetic, strides and the ok mask for any length."""
    x = torch.arange(1, n * 3 + 1, dtype=torch.float64).view(n, 3) * torch.tensor([1.0, 2.0**-60, 2.0**-120])
    out, ok, bad = native.mul(x, x)
    assert bool(ok.all()) and bad == 0
    assert _same_bits(out, _torch_kernels(arith.mul, x, x))
    assert isinstance(native._load(torch.float64, 3), ctypes.CDLL)


def _sqrt_with_kernel_flags(x: torch.Tensor, monkeypatch) -> tuple[list, torch.Tensor]:
    """``arith.sqrt(x)`` and the ``ok`` flags of each fused-kernel call it made (the
    library built and self-checked first, outside the count)."""
    arith.sqrt(x)
    seen: list = []
    kernel = registry._kernels["sqrt"]

    def spy(*args):
        res = kernel(*args)
        seen.append(None if res is None else res.ok.clone())
        return res

    monkeypatch.setitem(registry._kernels, "sqrt", spy)
    return seen, arith.sqrt(x)


@needs_compiler
def test_double_word_sqrt_runs_fused_where_in_range(monkeypatch):
    """float64 nc = 2: the kernel computes arith._sqrt2_network on the elements in
    arith._sqrt_range and flags the others (tiny, huge, subnormal, zero, negative, inf,
    NaN), which arith._sqrt2 recomputes scaled: the torch path's bits for the whole batch."""
    lo, hi = arith._sqrt_range(torch.float64, 2)
    gen = torch.Generator().manual_seed(5)
    lead = torch.rand(64, generator=gen, dtype=torch.float64) * 100 + 0.01
    edges = torch.tensor([lo, hi, lo / 2, hi * 2, 2.0**-1070, 0.0, -0.0, -4.0, math.inf, math.nan, 1e300, 1e-300], dtype=torch.float64)
    lead = torch.cat([lead, edges])
    zero = torch.zeros_like(lead)
    x = _torch_kernels(arith.add, torch.stack([lead, zero], -1), torch.stack([lead * 2.0**-60, zero], -1))
    x[-7:, 1] = 0.0  # the special values' tails (x[-7:] is 0, -0, -4, inf, NaN, 1e300, 1e-300 times 1 + 2^-60)
    seen, got = _sqrt_with_kernel_flags(x, monkeypatch)
    assert len(seen) == 1
    inside = (x[:, 0] >= lo) & (x[:, 0] <= hi)
    assert torch.equal(seen[0], inside) and int(inside.sum()) == 64 + 3  # and lo, hi, 1e300 (1e-300 < lo)
    assert _same_bits(got, _torch_kernels(arith.sqrt, x))


@needs_compiler
def test_float32_nc4_sqrt_rescales_below_its_range_in_the_kernel(monkeypatch):
    """float32 nc = 4: the fixed networks' range starts at 0.25, so the kernel itself
    scales a positive normal ``x_0`` below it by ``4^-k`` into ``[1, 4)`` and the result
    back by ``2^k`` (:func:`source.sqrt_rescales`); it flags the values above the range,
    zero, negative, subnormal, inf and NaN, and a tiny value whose result's tail would be
    a subnormal number (scaling back loses bits), which the torch path recomputes. Same
    bits as the torch path for the whole batch."""
    assert source.sqrt_rescales("f32", 4) and not source.sqrt_rescales("f32", 3) and not source.sqrt_rescales("f64", 4)
    lo, hi = arith._sqrt_range(torch.float32, 4)
    assert lo == 0.25
    gen = torch.Generator().manual_seed(6)
    lead = torch.exp2(-torch.rand(64, generator=gen, dtype=torch.float64) * 40).float()
    fi = torch.finfo(torch.float32)
    # in range at both ends, below it, above it, 1.3 2^-124 (its root's last component,
    # near 2^-134, is subnormal), the smallest normal number (an exact root), subnormal,
    # zeros, negative, inf, NaN
    edges = torch.tensor([lo, hi, lo / 2, hi * 2, fi.tiny * 4 * 1.3, fi.tiny, fi.tiny / 8, 0.0, -0.0, -0.01, math.inf, math.nan])
    third = torch.full_like(lead, 1 / 3)
    x = torch.cat([_torch_kernels(arith.div, hm.mc(lead, nc=4).components, hm.mc(third, nc=4).components), hm.mc(edges, nc=4).components])
    assert bool((x[:64, 3] != 0).all())  # full tails
    lead = x[:, 0]
    seen, got = _sqrt_with_kernel_flags(x, monkeypatch)
    accepted = seen[0]
    assert bool(accepted[:64].all()) and int((lead[:64] < lo).sum()) > 48  # (2^-42, 1/3]: most below the range
    assert accepted[64:].tolist() == [True, True, True, False, False, True, False, False, False, False, False, False]
    assert _same_bits(got, _torch_kernels(arith.sqrt, x))


@needs_compiler
def test_sqrt_of_an_element_in_range_does_not_depend_on_the_batch():
    """The torch path rescales a batch that holds an element out of the fixed networks'
    range (a zero here); an element in range keeps the unscaled networks' bits, which
    the kernel gives: scaled by 4, this float32 result's last component (near the
    subnormal range) rounded differently."""
    x = torch.tensor([[0.32707923650741577, -2.0872299444363307e-09, 1.6096550078578177e-30], [0.0, 0.0, 0.0]])
    alone = _torch_kernels(arith.sqrt, x[:1])
    assert _same_bits(_torch_kernels(arith.sqrt, x)[:1], alone)
    assert _same_bits(arith.sqrt(x)[:1], alone)


# ------------------------------------------------------------ row sums of squares

ROW_OPS = {
    "sumsq_wide": lambda x: reduce.sumsq_wide(x, dim=-1),
    "sumsq_wide keepdim": lambda x: reduce.sumsq_wide(x, dim=-1, keepdim=True),
    "1 - |x|^2": lambda x: reduce.one_minus_sumsq(x * 2.0**-4),
    "1 - 3|x|^2": lambda x: reduce.one_minus_sumsq(x * 2.0**-4, c=3.0),
    "sumsq": lambda x: reduce.sumsq(x, dim=-1),
    "sumsq keepdim": lambda x: reduce.sumsq(x, dim=-1, keepdim=True),
    "norm": lambda x: reduce.norm(x, dim=-1),
}


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("op", list(ROW_OPS))
@_cap(8)
@given(data=st.data(), n=st.sampled_from([1, 2, 3, 5, 8, 13]))
def test_row_kernel_same_bits_as_the_torch_path(dtype, nc, op, data, n):
    """The row kernel (sum of squares at nc + 1 components, pairwise, and 1 - c|x|^2
    rounded to nc) against the per-level torch path: random expansions over a wide
    exponent range with zeros (squares by the second pass), overflowing squares and
    all-zero rows (rejected rows, recomputed), batch dims and a strided layout."""
    emax = math.frexp(torch.finfo(dtype).max)[1]
    x = data.draw(expansions(dtype, nc, shape=(2, 9, n), allow_zero=True, min_exp=-emax // 3, max_exp=emax // 3))
    if n > 1:
        x[0, 1] = 0  # an all-zero row: its sum is rejected by the fixed network
    layouts = [x, x.transpose(0, 1), x.movedim(-1, 0).contiguous().movedim(0, -1)]
    for a in layouts:
        got, ref = ROW_OPS[op](a), _torch_kernels(ROW_OPS[op], a)
        assert _same_bits(got, ref), (op, tuple(a.shape), tuple(a.stride()))
    huge = x.clone()
    huge[1, 2, 0] = torch.finfo(dtype).max / 4  # its square overflows: the row is rejected
    assert _same_bits(ROW_OPS[op](huge), _torch_kernels(ROW_OPS[op], huge))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_kernel_second_pass_all_or_nothing(dtype):
    """An element a fixed network rejects (a zero coordinate's square, a sum of zero
    squares, the rounding of an all-zero row) goes through the general network inside
    the kernel (the row is good); next to a rejected row (one whose square overflows),
    those rows are rejected too, as the torch path's second passes are all or nothing.
    The torch path's bits both ways; one kernel call for a whole batch of rows."""
    x = torch.zeros(6, 4, 3, dtype=dtype)
    x[..., 0] = 0.25
    x[1, 2, 0] = 0  # one zero coordinate
    x[3, 0, 0] = 0
    x[4] = 0  # all zero: every square, sum and the rounding by the second pass
    for form, f in (
        ("one_minus", reduce.one_minus_sumsq),
        ("wide", functools.partial(reduce.sumsq_wide, dim=-1)),
        ("rounded", functools.partial(reduce.sumsq, dim=-1)),
        ("scaled", functools.partial(reduce.norm, dim=-1)),
    ):
        res = native.rowsumsq(x, form)
        assert res is not None and res.bad == 0 and bool(res.ok.all()), form
        assert _same_bits(f(x), _torch_kernels(f, x)), form
    x[5, 1, 0] = torch.finfo(dtype).max / 4  # its square overflows: rejected by both networks
    res = native.rowsumsq(x, "one_minus")
    assert res.ok.tolist() == [True, False, True, False, False, False] and res.bad == 4
    assert _same_bits(reduce.one_minus_sumsq(x), _torch_kernels(reduce.one_minus_sumsq, x))
    assert native.rowsumsq(x[..., :1], "one_minus") is None  # plain values (nc = 1): not this kernel
    assert native.rowsumsq(torch.zeros(2, 3, 4, dtype=dtype), "one_minus") is None  # nc = 4: the tree
    with pytest.raises(ValueError, match=r"rowsumsq: form must be one of 'wide', 'one_minus', 'rounded', 'scaled'; got 'squares'"):
        native.rowsumsq(x, "squares")


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", [2, 3])
def test_scaled_row_kernel_edges(dtype, nc):
    """reduce.norm's scaled row sums (``rowsumsq(x, "scaled")``) at the edges of the
    exponent range: rows of subnormals, of the largest finite values, with inf, NaN, all
    zero, and rows whose squares under- or overflow unscaled; the exponents are
    torch.frexp's (0 for 0, inf and NaN) and the norms the torch path's bits."""
    info = torch.finfo(dtype)
    x = hm.mc(torch.rand(9, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64) + 0.5, nc=nc, dtype=dtype).components
    x = x.clone()
    x[0] *= info.tiny * 2.0**-5  # subnormal leading components
    x[1] *= info.max / 2
    x[2, 1] = math.inf
    x[3, 2, 0] = math.nan
    x[4] = 0
    x[5] *= info.tiny * 2.0**10
    x[6] *= 2.0 ** (math.frexp(info.max)[1] // 2 + 3)  # squares beyond finfo.max
    x[7, :, 0] = info.tiny * 2.0 ** -(float_format(dtype).p - 1)  # the smallest subnormal
    x[7, :, 1:] = 0
    res = native.rowsumsq(x, "scaled")
    assert res is not None
    big = x[..., 0].abs().amax(-1)
    expected = torch.where(torch.isfinite(big) & (big != 0), torch.frexp(big)[1], 0)
    assert res.exponent.tolist() == expected.tolist()
    for keepdim in (False, True):
        f = functools.partial(reduce.norm, dim=-1, keepdim=keepdim)
        assert _same_bits(f(x), _torch_kernels(f, x))
    assert native.rowsumsq(x, "scaled").exponent.dtype == torch.int32
    assert not hasattr(native.rowsumsq(x, "rounded"), "exponent")


@needs_compiler
@pytest.mark.parametrize("rows, n", [(1, 300_000), (100, 20_000), (3, 7)])
def test_row_kernel_long_and_few_rows(rows, n):
    """Blocks of fewer rows where the rows are few or long (one row of 300,000
    coordinates: a buffer of one row, not 64): the torch path's bits."""
    gen = torch.Generator().manual_seed(n)
    x = hm.mc(torch.randn(rows, n, generator=gen, dtype=torch.float64), nc=2).components * (1 + 2.0**-40)
    for f in (lambda a: reduce.sumsq_wide(a, dim=-1), lambda a: reduce.one_minus_sumsq(a * 2.0**-10)):
        assert _same_bits(f(x), _torch_kernels(f, x))


@needs_compiler
def test_row_kernel_thread_split():
    """Rows split over torch's threads land where they belong (the same bits)."""
    gen = torch.Generator().manual_seed(5)
    x = arith.add(
        torch.randn(3 * native._CHUNK, 7, 2, generator=gen, dtype=torch.float64),
        torch.zeros(1, dtype=torch.float64).expand(3 * native._CHUNK, 7, 2),
    )
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        threaded = reduce.one_minus_sumsq(x * 0.1, c=2.0)
        torch.set_num_threads(1)
        single = reduce.one_minus_sumsq(x * 0.1, c=2.0)
    finally:
        torch.set_num_threads(old)
    assert _same_bits(threaded, single) and _same_bits(single, _torch_kernels(reduce.one_minus_sumsq, x * 0.1, 2.0))


SUM_CASES = [  # (shape, dim): one sum, rows, columns, several dims, strided
    ((1,), None),
    ((2,), None),
    ((3, 1), None),
    ((1000,), None),
    ((6, 7), -1),
    ((6, 7), 0),
    ((4, 5, 6), (0, 2)),
    ((4, 5, 6), (1, 2)),
    ((3, 1, 4), 1),
]


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize(("shape", "dim"), SUM_CASES, ids=str)
@_cap(6)
@given(data=st.data())
def test_sum_kernel_same_bits_as_the_torch_tree(dtype, nc, shape, dim, data):
    """reduce.sum through one mc_sum call (the tree and its finish) against the per-level
    torch tree: random expansions over a wide exponent range with zeros and cancelling
    pairs, every reduction layout, a transposed operand, keepdim."""
    emax = math.frexp(torch.finfo(dtype).max)[1]
    x = data.draw(expansions(dtype, nc, shape=shape, allow_zero=True, min_exp=-emax // 2, max_exp=emax // 2 - 12))
    if x.shape[0] > 1:
        x[1] = -x[0]  # cancellation: the sum keeps the other terms exactly
    for a, d in ((x, dim), (x.movedim(0, -2).contiguous().movedim(-2, 0), dim)):
        for keepdim in (False, True):
            f = functools.partial(reduce.sum, dim=d, keepdim=keepdim)
            assert _same_bits(f(a), _torch_kernels(f, a)), (shape, dim, keepdim)
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry._kernels, "tree_sum", lambda *a: calls.append(1) or native.tree_sum(*a))
        reduce.sum(x, dim)
    assert calls == [1]  # one kernel call for the whole reduction


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_sum_kernel_non_finite_terms_finish_by_the_torch_path(dtype, nc):
    """An inf or NaN among the terms: the kernel's finish is not renormalize's finite path,
    so every sum of the call is finished by the torch path (inf, -inf, NaN with zero
    tails, and the finite sums beside them as the torch path gives them); the tree's
    slots are still the kernel's. Overflowing partial sums too."""
    big = torch.finfo(dtype).max
    x = hm.mc(torch.arange(1.0, 25.0, dtype=torch.float64).reshape(4, 6) / 7, nc=nc, dtype=dtype).components.clone()
    x[1, 2] = math.inf
    x[2, 3] = math.nan
    x[3, :3, 0] = big
    res = native.tree_sum(x, 1, 6)
    assert res is not None and res.finished is None
    got = reduce.sum(x, -1)
    assert _same_bits(got, _torch_kernels(reduce.sum, x, -1))
    assert got[1, 0] == math.inf and math.isnan(got[2, 0]) and got[3, 0] == math.inf
    assert bool((got[1:, 1:] == 0).all())  # the non-finite sums have zero tails
    fine = native.tree_sum(x[:1], 1, 6)
    assert fine is not None and fine.finished is not None


@needs_compiler
def test_sum_kernel_long_sums_and_thread_split():
    """A sum of 300,000 terms (a block of one sum), and many sums split over torch's
    threads: the torch tree's bits; one call of the thread count gives the bits of another."""
    gen = torch.Generator().manual_seed(11)
    x = hm.mc(torch.randn(300_000, generator=gen, dtype=torch.float64), nc=3).components * (1 + 2.0**-40)
    assert _same_bits(reduce.sum(x), _torch_kernels(reduce.sum, x))
    y = hm.mc(torch.randn(2 * native._CHUNK, 5, generator=gen, dtype=torch.float64), nc=2).components
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        threaded = reduce.sum(y, -1)
        torch.set_num_threads(1)
        single = reduce.sum(y, -1)
    finally:
        torch.set_num_threads(old)
    assert _same_bits(threaded, single) and _same_bits(single, _torch_kernels(reduce.sum, y, -1))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_sum_kernel_blocked_levels_same_bits_as_the_torch_tree(dtype, nc):
    """Sums whose terms outgrow source.SUM_CACHE_VALUES: the kernel computes the first
    levels depth first, tile by tile; the torch tree's bits on both sides of the budget,
    at lengths whose levels are odd again and again (2^k + 1 carries a row at every
    level), with cancellation across the halves, and for several sums per block in both
    layouts."""
    gen = torch.Generator().manual_seed(12)
    edge = source.SUM_CACHE_VALUES // (nc + 1)  # terms of one sum whose planes fill the budget
    for n in (edge, edge + 1, 2**17 + 1, 3 * 2**15 - 1, 100_003):
        x = hm.mc(torch.randn(n, generator=gen, dtype=torch.float64), nc=nc, dtype=dtype).components * (1 + 2.0**-20)
        x[n // 2 :: 97] = -x[: n - n // 2 : 97][: len(x[n // 2 :: 97])]  # cancelling pairs across the first level
        assert _same_bits(reduce.sum(x, 0), _torch_kernels(reduce.sum, x, 0)), n
    y = hm.mc(torch.randn(3, 50_001, generator=gen, dtype=torch.float64), nc=nc, dtype=dtype).components * (1 + 2.0**-20)
    for a, d in ((y, 1), (y.transpose(0, 1).contiguous(), 0)):
        assert _same_bits(reduce.sum(a, d), _torch_kernels(reduce.sum, a, d)), d


def test_sum_kernel_does_not_apply():
    """Plain values (nc = 1), float16, an empty axis and tensors that require grad take the
    torch tree (None from the kernel)."""
    x = torch.ones(5, 2, dtype=torch.float64)
    assert native.tree_sum(x[..., :1], 0, 5) is None
    assert native.tree_sum(x.half(), 0, 5) is None
    assert native.tree_sum(x, 0, 0) is None
    assert native.tree_sum(x.requires_grad_(), 0, 5) is None


# ------------------------------------------------------------ grouped sums (scatter)


def _scatter(base, target, vals, how, include_self):
    return reduce.scatter(base, target, vals, how, include_self=include_self)


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@pytest.mark.parametrize("row", [(), (3,), (2, 5)], ids=str)
@_cap(6)
@given(data=st.data(), m=st.sampled_from([1, 2, 7, 40]), slots=st.sampled_from([1, 3, 12]))
def test_grouped_sums_same_bits_as_the_torch_path(dtype, nc, row, data, m, slots):
    """reduce.scatter's sums and means through one mc_runsum call against the torch
    path's per-level tree: random expansions with zeros and cancelling pairs, random
    targets (runs of 1 to m values; slots nothing targets), with and without the base
    values, planar and interleaved values, a base of fewer components."""
    emax = math.frexp(torch.finfo(dtype).max)[1]
    draw = functools.partial(expansions, dtype, nc, allow_zero=True, min_exp=-emax // 2, max_exp=emax // 2 - 12)
    vals = data.draw(draw(shape=(m, *row)))
    base = data.draw(draw(shape=(slots, *row)))
    target = torch.tensor(data.draw(st.lists(st.integers(0, slots - 1), min_size=m, max_size=m)), dtype=torch.int64)
    if m > 1:
        vals[1] = -vals[0]  # cancellation where both land in one slot
    planar = vals.movedim(-1, 0).contiguous().movedim(0, -1)
    for v in (vals, planar):
        for how in ("sum", "mean"):
            for include_self in (True, False):
                args = (base, target, v, how, include_self)
                assert _same_bits(_scatter(*args), _torch_kernels(_scatter, *args)), (how, include_self)
    narrow = base[..., :1].contiguous()  # padded to nc by scatter
    assert _same_bits(_scatter(narrow, target, vals, "sum", True), _torch_kernels(_scatter, narrow, target, vals, "sum", True))
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry._kernels, "grouped_sums", lambda *a: calls.append(1) or native.grouped_sums(*a))
        reduce.scatter(base, target, vals, "sum")
        reduce.scatter(base, target, vals, "amax")  # not a sum: the torch path
    assert calls == [1]


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_grouped_sums_edges(dtype, nc):
    """Non-finite values (the kernel's finish is not renormalize's finite path: every
    sum is finished by the torch path), one long run beside single values (fewer lanes
    per block; single values still merged with zeros at every level), rows of no
    values, and a target outside the base (no kernel: the torch path's error)."""
    gen = torch.Generator().manual_seed(7)
    vals = hm.mc(torch.randn(3000, 4, generator=gen, dtype=torch.float64), nc=nc, dtype=dtype).components.clone()
    target = torch.randint(0, 50, (3000,), generator=gen)
    target[:2500] = 7  # a run of about 2,550 values
    base = torch.zeros(60, 4, nc, dtype=dtype)
    for how in ("sum", "mean"):
        args = (base, target, vals, how, True)
        assert _same_bits(_scatter(*args), _torch_kernels(_scatter, *args))
    res = native.grouped_sums(vals, target, base)
    assert res is not None and res.finished is not None and int(res.counts.sum()) == 3000 + len(res.slots)
    vals[5, 1] = math.inf
    vals[2900, 2] = math.nan
    assert native.grouped_sums(vals, target, base).finished is None
    got = _scatter(base, target, vals, "sum", True)
    assert _same_bits(got, _torch_kernels(_scatter, base, target, vals, "sum", True))
    assert got[7, 1, 0] == math.inf and bool((got[7, 1, 1:] == 0).all())
    empty = torch.zeros(5, 0, nc, dtype=dtype)
    assert _scatter(empty[:2], torch.tensor([1, 1, 0, 1, 0]), empty, "sum", True).shape == (2, 0, nc)
    assert native.grouped_sums(vals, target, base[:20]) is None  # slots 20-49 lie outside the base
    with pytest.raises(IndexError):
        _scatter(base[:20], target, vals, "sum", True)


@needs_compiler
def test_grouped_sums_thread_split():
    """Runs split over torch's threads land where they belong (the same bits)."""
    gen = torch.Generator().manual_seed(8)
    vals = hm.mc(torch.randn(native._CHUNK, 4, generator=gen, dtype=torch.float64), nc=3).components
    target = torch.randint(0, 1000, (native._CHUNK,), generator=gen)
    base = hm.mc(torch.randn(1000, 4, generator=gen, dtype=torch.float64), nc=3).components
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        threaded = reduce.scatter(base, target, vals, "sum")
        torch.set_num_threads(1)
        single = reduce.scatter(base, target, vals, "sum")
    finally:
        torch.set_num_threads(old)
    assert _same_bits(threaded, single) and _same_bits(single, _torch_kernels(reduce.scatter, base, target, vals, "sum"))


# ------------------------------------------------------------------ fused exp and log

ELEMENTARY = {
    "exp": elementary.exp,
    "log": elementary.log,
    "expm1": elementary.expm1,
    "sinh": elementary.sinh,
    "cosh": elementary.cosh,
    "tanh": elementary.tanh,
    "log1p": elementary.log1p,
    "asinh": elementary.asinh,
    "acosh": elementary.acosh,
    "atanh": elementary.atanh,
}
EXP_FAMILY = ("exp", "expm1", "sinh", "cosh", "tanh")


def _elementary_inputs(op: str, dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """Hypothesis expansions turned into arguments that exercise ``op``: exp and its
    relatives over the whole range where exp neither overflows nor vanishes (and beyond),
    log of |x| and of 1 + x; log1p, asinh of x and of x scaled below 2^10 (and log1p of
    -1 + small x); acosh of |x| and of 1 + small |x|; atanh of x scaled below 1 and of
    ±(1 - small |x|)."""
    nc = x.shape[-1]
    emax = math.frexp(torch.finfo(dtype).max)[1]
    scaled = x * 2.0 ** -(emax - 10)  # |x| < 2^10
    one = torch.ones_like(x[..., 0])
    small = x * 2.0 ** -(emax + 4)  # |x| < 2^-4
    if op in EXP_FAMILY:
        return torch.cat([scaled, x])
    if op in ("log1p", "asinh"):
        return torch.cat([x, scaled, _torch_kernels(arith.add_float, small.abs(), -one)])
    if op == "acosh":
        return torch.cat([x.abs(), _torch_kernels(arith.add_float, small.abs(), one)])
    if op == "atanh":
        below = _torch_kernels(arith.add_float, -small.abs(), one)
        return torch.cat([x * 2.0**-emax, below, -below])
    pos = torch.where(x[..., :1] < 0, -x, x)
    near = _torch_kernels(arith.add_float, x * 2.0 ** -(math.frexp(torch.finfo(dtype).max)[1] + 4), one)
    edge = torch.zeros(len(_EDGES), nc, dtype=dtype)
    edge[:, 0] = torch.tensor(_EDGES, dtype=torch.float64).to(dtype)
    return torch.cat([pos, near, edge])


_EDGES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    math.inf,
    -math.inf,
    math.nan,
    1e-310,
    5e-324,
    1e300,
    709.78,
    -745.2,
    88.7,
    -103.9,
    2.0**-30,
    1.0 + 2.0**-52,
    1.0 - 2.0**-53,
]


@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float64], ids=str)  # other dtypes are not fused (test below)
@pytest.mark.parametrize("nc", native.ELEMENTARY_NCS)
@pytest.mark.parametrize("op", sorted(ELEMENTARY))
@_cap(10)
@given(data=st.data())
def test_elementary_same_bits_as_the_torch_path(dtype, nc, op, data):
    """exp, log, expm1, sinh, cosh, tanh (fused for float64: :func:`native.exp` and its
    siblings) against the torch path of :mod:`elementary`: random expansions over every
    exponent, ±0, ±inf, NaN, subnormals, the overflow and underflow thresholds, arguments
    next to 1 for log."""
    x = _elementary_inputs(op, dtype, data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True)))
    edge = torch.zeros(len(_EDGES), nc, dtype=dtype)
    edge[:, 0] = torch.tensor(_EDGES, dtype=torch.float64).to(dtype)
    x = torch.cat([x, edge, -edge])
    f = ELEMENTARY[op]
    assert _same_bits(f(x), _torch_kernels(f, x))


@needs_compiler
@pytest.mark.parametrize("nc", [3, 4])
@pytest.mark.parametrize("op", [*EXP_FAMILY, "asinh"])
@_cap(10)
@given(data=st.data())
def test_float32_exp_through_the_float64_kernel_same_bits(nc, op, data):
    """float32 nc = 3, 4 exp (expm1, sinh, cosh, tanh, asinh) runs on its float64 double-word
    expansion, the exp family in one kernel with the conversions inside: the same bits as
    the torch path (random expansions over every exponent, ±0, ±inf, NaN, subnormals, the
    overflow and underflow thresholds of float64 and of float32)."""
    x = _elementary_inputs(op, torch.float32, data.draw(expansions(torch.float32, nc, shape=(48,), allow_zero=True)))
    edge = torch.zeros(len(_EDGES), nc, dtype=torch.float32)
    edge[:, 0] = torch.tensor(_EDGES, dtype=torch.float64).to(torch.float32)
    x = torch.cat([x, edge, -edge])
    f = ELEMENTARY[op]
    assert _same_bits(f(x), _torch_kernels(f, x))


@needs_compiler
@pytest.mark.parametrize(("dtype", "nc"), [(torch.float32, 3), (torch.float32, 4), (torch.float16, 6), (torch.bfloat16, 8)], ids=str)
@pytest.mark.parametrize("op", ["log", "log1p", "acosh", "atanh"])
@_cap(10)
@given(data=st.data())
def test_narrow_log_through_the_double_word_kernels_same_bits(dtype, nc, op, data):
    """log, log1p, acosh and atanh of a narrower dtype whose expansion is a double-word (float32 nc = 3,
    4; float16 and bfloat16 beyond their float64 engine): the argument prepared in that
    dtype, then ``native.log_masked``, ``native.acosh_t`` or ``native.atanh_ad`` on the double-words. The same bits as the torch path
    on random expansions over every exponent, ±0, ±inf, NaN, subnormals and arguments
    next to 1 and next to -1, and the kernels took the ordinary elements."""
    x = _elementary_inputs(op, dtype, data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True)))
    edge = torch.zeros(len(_EDGES), nc, dtype=dtype)
    edge[:, 0] = torch.tensor(_EDGES, dtype=torch.float64).to(dtype)
    x = torch.cat([x, edge, -edge])
    taken = []
    name = {"acosh": "acosh_t", "atanh": "atanh_ad"}.get(op, "log_masked")
    fused = getattr(native, name)

    def spy(*operands):
        res = fused(*operands)
        taken.append(None if res is None else int(res.ok.sum()))
        return res

    f = ELEMENTARY[op]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry._kernels, name, spy)
        y = f(x)
    assert taken and taken[0], taken  # the kernels accepted the ordinary elements
    assert _same_bits(y, _torch_kernels(f, x))


@needs_compiler
@pytest.mark.parametrize("op", EXP_FAMILY)
def test_float32_exp_family_uses_its_own_kernels(op, monkeypatch):
    """float32 nc = 3, 4 exp, expm1, sinh, cosh and tanh call one kernel on the float32
    tensor (its double-word inside, float32 out; source._narrow_body), which accepts
    ordinary arguments (log and log1p: test_narrow_log_through_the_double_word_kernels_same_bits)."""
    seen = []
    fused = getattr(native, op)

    def spy(x):
        res = fused(x)
        seen.append((x.dtype, x.shape[-1], None if res is None else (res.bad, res.out.dtype)))
        return res

    monkeypatch.setitem(registry._kernels, op, spy)
    gen = torch.Generator().manual_seed(2)
    f = ELEMENTARY[op]
    for nc in (3, 4):
        x = arith.add(torch.randn(1000, nc, generator=gen) * 2, torch.randn(1000, nc, generator=gen) * 2.0**-30)
        f(x)  # loads (and self-checks) the float64 library on first use
        seen.clear()
        y = f(x)
        assert seen == [(torch.float32, nc, (0, torch.float32))], seen
        assert _same_bits(y, _torch_kernels(f, x))


def _ordinary_float64(nc: int, gen: torch.Generator, scale: float) -> torch.Tensor:
    """Sums of two random ``nc``-component float64 tensors (``scale`` and ``2^-60``
    times standard normals), enough elements for the kernels' thread split."""
    n = 3 * native._CHUNK + 5
    return _torch_kernels(
        arith.add,
        torch.randn(n, nc, generator=gen, dtype=torch.float64) * scale,
        torch.randn(n, nc, generator=gen, dtype=torch.float64) * 2.0**-60,
    )


@needs_compiler
@pytest.mark.parametrize("nc", native.ELEMENTARY_NCS)
def test_elementary_fused_where_it_applies(nc):
    """float64 exp and log run fused (few elements flagged on ordinary arguments), in
    blocks split over threads like the arithmetic kernels; other dtypes are not fused."""
    gen = torch.Generator().manual_seed(5)
    x = _ordinary_float64(nc, gen, 4.0)
    assert native.status(torch.float64, nc, "elementary") == "in use"
    res = native.exp(x)
    assert res is not None and res.bad == 0
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        threaded = [elementary.exp(x), elementary.log(x.abs()[:, :1].expand(-1, nc).contiguous())]
    finally:
        torch.set_num_threads(old)
    assert _same_bits(threaded[0], _torch_kernels(elementary.exp, x))
    pos = x.abs()[:, :1].expand(-1, nc).contiguous()
    assert _same_bits(threaded[1], _torch_kernels(elementary.log, pos))
    assert native.log(pos) is not None
    assert (native.exp(x.float()) is None) == (nc == 2)  # float32 nc = 3, 4: native._narrow
    assert native.exp(x.half()) is None and native.log(pos.float()) is None
    assert native.exp(x.detach().requires_grad_()) is None
    # the others: nothing flagged on ordinary arguments (full-width expansions here; plain
    # floats: test_mc_numbers_made_from_plain_floats_run_fused), the same bits
    full = renormalize([torch.randn(len(x), generator=gen, dtype=torch.float64) * 4 * 2.0 ** (-53 * k) for k in range(nc + 1)], nc)
    one = torch.ones_like(full[:, 0])
    args = {"log1p": full.abs(), "acosh": _torch_kernels(arith.add_float, full.abs(), one), "atanh": full * 2.0**-5}
    for op in ("expm1", "sinh", "cosh", "tanh", "log1p", "asinh", "acosh", "atanh"):
        a = args.get(op, full)
        res = getattr(native, op)(a)
        assert res is not None and res.bad == 0, op
        assert _same_bits(res.out, _torch_kernels(ELEMENTARY[op], a)), op
        # float32: kernels of their own at nc = 3, 4 for the exp family (native._narrow)
        assert (getattr(native, op)(a.float()) is None) == (nc == 2 or op not in EXP_FAMILY)
        # one element: every operand is read with stride 1 (the log core takes no broadcast
        # operand; read with stride 0, a one-element log was flagged)
        one_res = getattr(native, op)(a[:1])
        assert bool(one_res.ok.all()) and _same_bits(one_res.out, res.out[:1]), op


# --------------------------------------------------------------- fused sin, cos, tan

TRIG = {"sin": elementary.sin, "cos": elementary.cos, "tan": elementary.tan}


def _trig_inputs(x: torch.Tensor) -> torch.Tensor:
    """Arguments for sin/cos/tan from hypothesis expansions: ``x`` itself (every exponent:
    mostly the exact reduction), ``x`` scaled below ``2^12`` (the fast reduction), within
    ``2^-40 .. 2^-200`` of ``k pi/2`` (cancellation: the exact reduction, or the fast one
    where fewer than ``p - 8`` bits cancel), multiples of ``1/128`` (``r = j/128``: a zero
    ``t``) and the edge values."""
    nc = x.shape[-1]
    scaled = x * 2.0 ** -(math.frexp(torch.finfo(x.dtype).max)[1] - 12)
    with mpmath.workprec(400):
        pio2 = torch.tensor(elementary._split_mpf(mpmath.pi / 2, float_format(x.dtype).p, nc), dtype=x.dtype)
    k = torch.arange(-24, 24, dtype=x.dtype)[: len(x)]
    near = _torch_kernels(arith.add, _torch_kernels(arith.mul_float, pio2.expand(len(k), nc), k), x[: len(k)] * 2.0**-1100)
    steps = torch.zeros(8, nc, dtype=x.dtype)
    steps[:, 0] = torch.tensor([1, -3, 64, -100, 101, 128, 300, 12345], dtype=x.dtype) / 128
    edge = torch.zeros(len(_EDGES), nc, dtype=x.dtype)
    edge[:, 0] = torch.tensor(_EDGES, dtype=torch.float64).to(x.dtype)
    return torch.cat([x, scaled, near, steps, edge, -edge])


@needs_compiler
@pytest.mark.parametrize(
    ("dtype", "nc"), [(torch.float64, nc) for nc in native.ELEMENTARY_NCS] + [(torch.float32, 3), (torch.float32, 4)], ids=str
)
@pytest.mark.parametrize("op", sorted(TRIG))
@_cap(10)
@given(data=st.data())
def test_trig_same_bits_as_the_torch_path(dtype, nc, op, data):
    """sin, cos and tan (fused: :func:`native.sin` and its siblings; float32 nc = 3, 4
    on the exact float64 expansion) against the torch path of :mod:`elementary` on
    :func:`_trig_inputs`."""
    x = _trig_inputs(data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True)))
    f = TRIG[op]
    assert _same_bits(f(x), _torch_kernels(f, x))


@needs_compiler
@pytest.mark.parametrize("nc", native.ELEMENTARY_NCS)
def test_trig_fused_where_it_applies(nc, monkeypatch):
    """sin/cos/tan of ordinary float64 arguments run in the fused kernel (nothing
    flagged), in blocks split over threads; other dtypes, autograd and the special values
    (±0, inf, NaN, huge and cancelling arguments) are left to the torch path."""
    x = _ordinary_float64(nc, torch.Generator().manual_seed(6), 8.0)
    assert native.status(torch.float64, nc, "elementary") == "in use"
    calls = []
    fused = {op: getattr(native, op) for op in TRIG}
    for op in TRIG:

        def spy(t, op=op):
            res = fused[op](t)
            calls.append((op, None if res is None else res.bad))
            return res

        monkeypatch.setitem(registry._kernels, op, spy)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        threaded = {op: f(x) for op, f in TRIG.items()}
    finally:
        torch.set_num_threads(old)
    assert calls == [("sin", 0), ("cos", 0), ("tan", 0)]
    for op, f in TRIG.items():
        assert _same_bits(threaded[op], _torch_kernels(f, x)), op
    special = torch.tensor(
        [[0.0] * nc, [-0.0] * nc, [math.inf] + [0.0] * (nc - 1), [math.nan] * nc, [1e300] + [0.0] * (nc - 1)], dtype=torch.float64
    )
    special[-1, 1] = 1e283
    res = fused["sin"](special)
    assert res is not None and res.ok.tolist() == [False] * 5
    assert fused["cos"](x.detach().requires_grad_()) is None
    # float32: kernels of their own at nc = 3, 4 (nc = 2 computes in float64 itself)
    assert (fused["sin"](x.float()) is None) == (nc == 2)
    assert fused["sin"](x.half()) is None


@needs_compiler
def test_float32_trig_uses_its_own_kernels(monkeypatch):
    """float32 nc = 3, 4 sin/cos/tan call one kernel on the float32 tensor (the exact
    float64 expansion inside, float32 out), which accepts ordinary arguments."""
    seen = []
    fused = {op: getattr(native, op) for op in TRIG}
    for op in TRIG:

        def spy(t, op=op):
            res = fused[op](t)
            seen.append((op, t.dtype, t.shape[-1], None if res is None else (res.bad, res.out.dtype)))
            return res

        monkeypatch.setitem(registry._kernels, op, spy)
    gen = torch.Generator().manual_seed(3)
    for nc in (3, 4):
        x = arith.add(torch.randn(1000, nc, generator=gen) * 20, torch.randn(1000, nc, generator=gen) * 2.0**-30)
        for op, f in TRIG.items():
            f(x)  # loads (and self-checks) the float64 library on first use
            seen.clear()
            y = f(x)
            assert seen == [(op, torch.float32, nc, (0, torch.float32))], seen
            assert _same_bits(y, _torch_kernels(f, x)), (op, nc)


def test_elementary_status():
    assert native.status(torch.float32, 3, "elementary") == (
        "no native elementary kernels for torch.float32 (float64 only; float32 nc = 3, 4 exp, expm1, sinh, cosh, tanh, "
        "sin, cos, tan, log, log1p, acosh and atanh run in the float64 nc = 2 library)"
    )
    assert not native.available(torch.float32, 3, "elementary")
    # nc = 2, 3, 4 on both devices (staged loops on the CPU)
    assert native._elementary_ncs("cpu") == (2, 3, 4) and native._elementary_ncs("cuda") == (2, 3, 4)
    assert native.status(torch.float64, 4, "elementary") == "in use" or native._compiler() is None
    r = native.exp(torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 3, dtype=torch.float64))
    assert r is None or bool(r.ok.all())
    with pytest.raises(ValueError, match=r"status: part must be one of 'arith', 'elementary'; got 'exp'"):
        native.status(torch.float64, 3, "exp")


# ------------------------------------------------- MC numbers made from plain floats

# (low, high) of the plain float arguments per op: inside each function's domain, away
# from the values the kernels hand to the torch path by design (0 for the odd functions,
# 1 for acosh, ±1 for atanh)
_PLAIN_RANGES = {
    **dict.fromkeys(("exp", "expm1", "sinh", "cosh", "tanh", "sin", "cos", "tan", "asinh"), (-8.0, 8.0)),
    "log": (0.01, 10.0),
    "log1p": (-0.9, 10.0),
    "acosh": (1.001, 10.0),
    "atanh": (-0.99, 0.99),
    "sqrt": (0.01, 100.0),
    **dict.fromkeys(("add", "sub", "mul", "div"), (-10.0, 10.0)),
}
_PLAIN_CALLS = {
    **{op: getattr(torch, op) for op in (*ELEMENTARY, *TRIG, "sqrt")},
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
}
# every (op, dtype, nc) with a fused kernel; float32 elementary functions run on the
# float64 double-word of nc = 3, 4 (log, log1p, acosh, atanh prepare their argument in
# float32 first and take the torch path; nc = 2 runs in float64 arithmetic)
_PLAIN_CASES = [
    *[(op, dtype, nc) for op in ("add", "sub", "mul", "div", "sqrt") for dtype in DTYPES for nc in NCS],
    *[(op, torch.float64, nc) for op in (*ELEMENTARY, *TRIG) for nc in native.ELEMENTARY_NCS],
    *[(op, torch.float32, nc) for op in (*EXP_FAMILY, "asinh", *TRIG) for nc in (3, 4)],
]
for _op in ("div", "sqrt"):
    _PLAIN_CASES.remove((_op, torch.float32, 2))  # float64 arithmetic (the doctor says so)
# float32 (op, nc) whose fused kernel still hands some element made from plain floats to
# the torch path (none now: the float32 nc = 4 square root, whose range starts at 0.25,
# rescales the values below it in the kernel)
_PLAIN_FLAGGED: dict[tuple[str, int], str] = {}
_PLAIN_CASES = [
    pytest.param(op, dtype, nc, marks=pytest.mark.xfail(strict=True, reason=_PLAIN_FLAGGED[op, nc]))
    if dtype == torch.float32 and (op, nc) in _PLAIN_FLAGGED
    else (op, dtype, nc)
    for op, dtype, nc in _PLAIN_CASES
]


@needs_compiler
@pytest.mark.parametrize(("op", "dtype", "nc"), _PLAIN_CASES, ids=str)
def test_mc_numbers_made_from_plain_floats_run_fused(op, dtype, nc, monkeypatch):
    """``hm.mc`` of plain floats (zero tails, the usual way to make MC numbers) runs the
    whole op in the fused kernel: no element is flagged for the torch path (the log
    core's Newton residual and exp's last sum of such numbers need fewer components, which
    the fixed networks' checks reject: the kernels then compute arith's general kernel
    inline, as the torch path does), with the torch path's bits."""
    gen = torch.Generator().manual_seed(len(op) + nc)
    lo, hi = _PLAIN_RANGES[op]
    args = [hm.mc((torch.rand(4096, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(dtype), nc=nc) for _ in range(2)]
    assert all(bool((a.components[..., 1:] == 0).all()) and a.components.dtype == dtype for a in args)
    f = _PLAIN_CALLS[op]
    args = args[: 2 if op in ("add", "sub", "mul", "div") else 1]
    f(*args)  # builds and self-checks the libraries first: the self-check's edge operands are not counted
    seen = []
    for name, kernel in list(registry._kernels.items()):

        def spy(*args, kernel=kernel, name=name):
            res = kernel(*args)
            if res is not None:
                seen.append((name, res.bad))
            return res

        monkeypatch.setitem(registry._kernels, name, spy)
    fast = f(*args).components
    assert seen and all(bad == 0 for _, bad in seen), seen
    assert _same_bits(fast, _torch_kernels(lambda: f(*args).components))


@needs_compiler
@pytest.mark.parametrize("nc", [n for n in native.ELEMENTARY_NCS if n >= 3])
@pytest.mark.parametrize("op", ["log", "log1p", "asinh", "acosh", "atanh"])
def test_log_family_second_pass_over_short_expansions(op, nc, monkeypatch):
    """Full expansions with a minority of short ones (zero tails) among them: the plain
    log core runs on all and flags short ones, the general core recomputes just those in
    a second fused call; nothing reaches the torch path and the bits are the torch
    path's. With a majority of short ones the general core runs at once (one call)."""
    gen = torch.Generator().manual_seed(nc)
    lo, hi = _PLAIN_RANGES[op]
    vals = torch.rand(4096, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    terms = [vals] + [vals * torch.rand(4096, generator=gen, dtype=torch.float64) * 2.0 ** (-55 * k) for k in range(1, nc + 1)]
    comps = renormalize(terms, nc)
    assert bool((comps[..., -1] != 0).all())  # full expansions
    short = torch.arange(4096) % 4 == 0
    comps[short, 1:] = 0
    x = hm.MCTensor(comps)
    f = _PLAIN_CALLS[op]
    f(x)  # builds and self-checks first
    calls = []
    real = native._call

    def spy(lib, kernel, operands, extra, n, nout=None):
        res = real(lib, kernel, operands, extra, n, nout)
        calls.append((kernel, operands[0].shape[0] if operands[0].dim() == 2 else None, res.bad))
        return res

    monkeypatch.setattr(native, "_call", spy)
    fast = f(x).components
    cores = [c for c in calls if c[0].startswith("log_core")]
    assert [c[0] for c in cores][:1] == ["log_core"] and all(bad == 0 for k, _, bad in cores if k == "log_core_general"), calls
    if len(cores) == 2:
        assert cores[1][0] == "log_core_general" and cores[1][1] < 4096 // 2, calls
    assert _same_bits(fast, _torch_kernels(lambda: f(x).components))
    calls.clear()
    lead_only = comps * torch.tensor([1.0] + [0.0] * (nc - 1), dtype=torch.float64)
    mostly_short = hm.MCTensor(torch.where((torch.arange(4096) % 4 != 0).unsqueeze(-1), lead_only, comps))
    fast = f(mostly_short).components
    assert [c[0] for c in calls if c[0].startswith("log_core")] == ["log_core_general"], calls
    assert _same_bits(fast, _torch_kernels(lambda: f(mostly_short).components))


@needs_compiler
@pytest.mark.parametrize("nc", [3, 4])
def test_float32_kernels_leave_unnormalised_zero_leads_and_autograd_to_the_torch_path(nc):
    """float32 expansions whose leading component is ±0 but whose tail is not (not
    normalised): the odd functions' torch path returns ``x`` itself there, so the kernels
    flag those elements (cosh too, which shares sinh's kernel; exp computes them). Operands that require grad are
    declined by the float32 kernels and take the torch path, with the same values."""
    x = torch.zeros(4, nc)
    x[:, 1] = torch.tensor([1e-9, -3e-10, 2.0**-40, -(2.0**-50)])
    x[1, 0] = -0.0
    for op in ("expm1", "sinh", "tanh", "exp", "cosh"):
        f = ELEMENTARY[op]
        res = getattr(native, op)(x)
        assert res is not None and res.bad == (0 if op == "exp" else 4), op
        assert _same_bits(f(x), _torch_kernels(f, x)), op
    g = torch.randn(64, nc).requires_grad_()
    assert native.exp(g) is None
    assert _same_bits(elementary.exp(g).detach(), _torch_kernels(elementary.exp, g.detach()))


def test_eager_shape_and_trace_helpers():
    """``eft.broadcast_shapes`` broadcasts as torch does and refuses what torch refuses;
    ``eft.tracing`` sees a fake-tensor mode that no trace context announces."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from hypermc.mcf import eft

    assert eft.broadcast_shapes((3, 1), (1, 4), (4,)) == torch.broadcast_shapes((3, 1), (1, 4), (4,))
    with pytest.raises(RuntimeError, match="must match"):
        eft.broadcast_shapes((3,), (4,))
    assert not eft.tracing()
    with FakeTensorMode():
        assert eft.tracing()
