"""The fused expression kernels of :mod:`hypermc.mcf.native.fused` (``torch.compile``'s
``hypermc::mc_fused`` nodes on the CPU).

What makes them exact is that every element they report ``ok`` has the bits of eager
mode's ops, and the caller recomputes the others (``tests/mcf/test_compile.py`` checks
compiled against eager end to end). Here: the kernel against eager mode on adversarial
operands, every operand layout (broadcast, strided, interleaved, scalars, one element,
none), the thread split, the steps without a transcription, and the check at load,
which must catch a kernel that computes something else.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import arith, native, registry
from hypermc.mcf.native import fused as native_fused
from hypermc.mcf.native import source as native_source
from tests.mcf.test_arith import _cap
from tests.mcf.test_native import INTS, needs_compiler
from tests.oracle import expansions

DTYPES = [torch.float32, torch.float64]
NCS = [2, 3, 4]

# x * y + x / (y * y + b) with b a broadcast plain operand: leaves x, y (nc terms), b
BENCH = (
    ("mul", (("l", 0), ("l", 1))),
    ("mul", (("l", 1), ("l", 1))),
    ("add", (("s", 1), ("l", 2))),
    ("div", (("l", 0), ("s", 2))),
    ("add", (("s", 0), ("s", 3))),
)


def _bench_eager(ops: list[torch.Tensor], shape: tuple[int, ...]) -> torch.Tensor:
    """What eager mode's arith kernels compute for :data:`BENCH`."""
    nc = ops[0].shape[-1]
    x, y, b = ops[0].expand(*shape, nc), ops[1].expand(*shape, nc), ops[2].expand(*shape, 1)[..., 0]
    return arith.add(arith.mul(x, y), arith.div(x, arith.add_float(arith.mul(y, y), b)))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(INTS[a.dtype]), b.contiguous().view(INTS[b.dtype]))


def _fused(steps, ops, shape, eager):
    """The fused kernel's result with its failing elements recomputed by ``eager``."""
    res = native_fused.run(ops[0].dtype, ops[0].shape[-1], steps, ops, shape, eager)
    assert res is not None, "no fused kernel"
    return res, res.patched(lambda *rows: eager(list(rows), (rows[0].shape[0],)), *ops)


def test_supports():
    assert native_fused.supports(torch.float64, 4, "div", (4, 4))
    assert native_fused.supports(torch.float32, 2, "div", (2, 1))
    assert native_fused.supports(torch.float64, 2, "div", (1, 2))
    assert not native_fused.supports(torch.float16, 2, "add", (2, 2))
    assert not native_fused.supports(torch.float64, 5, "add", (5, 5))
    assert native_fused.supports(torch.float64, 3, "sqrt", (3,)) and native_fused.supports(torch.float64, 2, "sqrt", (2,))
    assert not native_fused.supports(torch.float32, 2, "sqrt", (2,))  # the float64 engine


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
@_cap(8)
@given(data=st.data())
def test_same_bits_as_eager(dtype, nc, data):
    """Operands over the whole exponent range with zeros, exact and near cancellation,
    and pinned edge values (subnormal, huge, ±0) mixed in; ``b`` a broadcast scalar."""
    x = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    y = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    y[::5] = -x[::5]  # y * y + b: huge, tiny, cancelling
    x[1::7] = y[1::7]
    b = torch.tensor([data.draw(st.sampled_from([1.0, -1.0, 0.0, 2.0**-30, 3.0]))], dtype=dtype)
    ops = [x, y, b]
    res, out = _fused(BENCH, ops, (48,), _bench_eager)
    assert _same_bits(out, _bench_eager(ops, (48,)))
    assert bool(res.ok.any())  # the fast path ran


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nc", NCS)
def test_special_values_are_recomputed(dtype, nc):
    """inf, NaN, ±0, division by zero, overflow, subnormal leading components."""
    fi = torch.finfo(dtype)
    lead = torch.tensor(
        [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, fi.max, fi.tiny / 4, 1.0, -3.0, fi.max / 2, 5.0], dtype=dtype
    )
    x = torch.zeros(len(lead), nc, dtype=dtype)
    x[:, 0] = lead
    y = x.flip(0).clone()
    ops = [x, y, torch.tensor([-1.0], dtype=dtype)]  # y * y - 1 = 0 for y = ±1
    res, out = _fused(BENCH, ops, (len(lead),), _bench_eager)
    assert res.bad >= 8
    assert _same_bits(out, _bench_eager(ops, (len(lead),)))


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layouts_and_broadcasting(dtype):
    """Broadcast either operand (a row against a column: copied to a full layout), MC
    scalars, interleaved and strided components, one element, no element."""
    nc = 3
    gen = torch.Generator().manual_seed(5)
    full = arith.add(torch.randn(6, 5, nc, generator=gen, dtype=dtype), torch.randn(6, 5, nc, generator=gen, dtype=dtype) * 2.0**-40)
    planar = full.movedim(-1, 0).contiguous().movedim(0, -1)
    b = torch.tensor([1.0], dtype=dtype)
    cases = [
        (full, planar),
        (full[:, :1], planar[:1]),  # (6, 1) against (1, 5): both copied
        (full[0, 0], planar),  # MC scalar against a tensor
        (planar[2, 3], planar[2, 3]),  # one element
        (full[::2, ::2], planar[1::2, ::2]),  # strided
        (full[:0], planar[:0]),  # empty
    ]
    for x, y in cases:
        shape = tuple(torch.broadcast_shapes(x.shape[:-1], y.shape[:-1]))
        _, out = _fused(BENCH, [x, y, b], shape, _bench_eager)
        assert _same_bits(out, _bench_eager([x, y, b], shape)), (tuple(x.shape), tuple(y.shape))
    p = torch.randn(6, 5, 1, generator=gen, dtype=dtype)  # a plain operand of full shape
    _, out = _fused(BENCH, [full, planar, p], (6, 5), _bench_eager)
    assert _same_bits(out, _bench_eager([full, planar, p], (6, 5)))


@needs_compiler
def test_thread_split():
    """Large tensors are split over torch's threads: chunks land where they belong."""
    dtype, nc = torch.float64, 3
    n = 3 * native_fused._CHUNK + 17
    gen = torch.Generator().manual_seed(3)
    x = arith.add(torch.randn(n, nc, generator=gen, dtype=dtype), torch.randn(n, nc, generator=gen, dtype=dtype))
    y = arith.add(torch.randn(n, nc, generator=gen, dtype=dtype), torch.randn(n, nc, generator=gen, dtype=dtype))
    y[5::1000] = 0  # some failing elements in every chunk
    ops = [x, y, torch.tensor([0.0], dtype=dtype)]
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        res, threaded = _fused(BENCH, ops, (n,), _bench_eager)
    finally:
        torch.set_num_threads(old)
    assert res.bad == math.ceil((n - 5) / 1000)
    assert _same_bits(threaded, _bench_eager(ops, (n,)))


@needs_compiler
def test_self_check_catches_a_wrong_kernel(monkeypatch):
    """A transcription that computes something else (an add whose operand order the
    kernel gets wrong: a subtraction) fails the check at load, warns, and is not used."""
    real = native_source._fused_step

    def wrong(net, name, nc, kind, args, sqrt_range=None):
        if kind == "add" and len(args[1]) == nc:
            args = [args[0], [net.neg(c) for c in args[1]]]
        return real(net, name, nc, kind, args, sqrt_range)

    monkeypatch.setattr(native_source, "_fused_step", wrong)
    monkeypatch.setattr(registry, "_states", {})
    monkeypatch.setenv("HYPERMC_NATIVE_CACHE", str(native._cache_dir() / "test-wrong"))
    x = torch.tensor([[1.5, 2.0**-60, 0.0]] * 4, dtype=torch.float64)
    ops = [x, x, torch.tensor([1.0], dtype=torch.float64)]
    with pytest.warns(RuntimeWarning, match=r"fused kernel for f64 nc=3 .* disabled: \d+ of \d+ checked elements differ from eager mode"):
        assert native_fused.run(torch.float64, 3, BENCH, ops, (4,), _bench_eager) is None
    assert native_fused.run(torch.float64, 3, BENCH, ops, (4,), _bench_eager) is None  # remembered, one warning


@needs_compiler
def test_one_element_expression_keeps_its_constants(monkeypatch):
    """A one-element expression (0-d MC values, e.g. a learnable curvature's ``1 / k``)
    lays out no operand as broadcast; its literal numbers are operands the replay reads
    from the expression, not from its argument. The check at load keeps them (the
    kernel is used, same bits), where random values in their place made every checked
    element differ and disabled the kernel."""
    monkeypatch.setattr(registry, "_states", {})
    x = torch.tensor([1.5, 2.0**-60, 0.0], dtype=torch.float64)
    y = torch.tensor([-0.75, 2.0**-57, 2.0**-112], dtype=torch.float64)

    def eager(ops, shape):  # b = 1 is a literal of the expression: ops[2] is not read
        return _bench_eager([ops[0], ops[1], torch.ones(1, dtype=torch.float64)], shape)

    ops = [x, y, torch.ones(1, dtype=torch.float64)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = native_fused.run(torch.float64, 3, BENCH, ops, (), eager, constants=[False, False, True])
    assert res is not None and bool(res.ok)
    assert _same_bits(res.out, eager(ops, ()))
    monkeypatch.setattr(registry, "_states", {})
    with pytest.warns(RuntimeWarning, match=r"checked elements differ from eager mode"):  # without the mark
        assert native_fused.run(torch.float64, 3, BENCH, ops, (), eager) is None


@needs_compiler
def test_a_first_call_on_an_empty_batch(monkeypatch):
    """The check at load runs on its own operands: a program whose first call has no
    elements loads (the check used to reshape the empty operands and fail), also when
    compiled."""
    monkeypatch.setattr(registry, "_states", {})
    empty = torch.empty(0, 3, dtype=torch.float64)
    res = native_fused.run(torch.float64, 3, BENCH, [empty, empty, torch.ones(1, dtype=torch.float64)], (0,), _bench_eager)
    assert res is not None and res.out.shape == (0, 3)
    x = hm.mc(torch.empty(0, 4, dtype=torch.float64), nc=3)
    f = torch.compile(lambda x: x / (x * x + 1.0), backend="aot_eager", fullgraph=True, dynamic=False)
    assert f(x).shape == (0, 4)


def test_not_used_without_the_per_op_kernels(monkeypatch):
    """``HYPERMC_NATIVE=0`` (or no compiler, a failed build or check of the per-op
    library) turns the fused kernels off too: eager mode would not run fused code."""
    monkeypatch.setattr(registry, "_states", {})
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    assert not native_fused.usable(torch.float64, 3)
    x = torch.ones(4, 3, dtype=torch.float64)
    assert native_fused.run(torch.float64, 3, BENCH, [x, x, torch.ones(1, dtype=torch.float64)], (4,), _bench_eager) is None
    assert not native_fused.usable(torch.float16, 2)


@needs_compiler
@pytest.mark.parametrize(("dtype", "nc"), [(d, n) for d in DTYPES for n in NCS if (d, n) != (torch.float32, 2)], ids=str)
@_cap(6)
@given(data=st.data())
def test_square_root_same_bits_as_eager(dtype, nc, data):
    """sqrt(x * x + b): in range, out of range (huge, tiny: recomputed), negative, zero."""
    steps = (("mul", (("l", 0), ("l", 0))), ("add", (("s", 0), ("l", 1))), ("sqrt", (("s", 1),)))

    def eager(ops, shape):
        x, b = ops[0].expand(*shape, nc), ops[1].expand(*shape, 1)[..., 0]
        return arith.sqrt(arith.add_float(arith.mul(x, x), b))

    x = data.draw(expansions(dtype, nc, shape=(48,), allow_zero=True))
    b = torch.tensor([data.draw(st.sampled_from([1.0, -1.0, 0.0, -(2.0**-30)]))], dtype=dtype)
    res, out = _fused(steps, [x, b], (48,), eager)
    assert _same_bits(out, eager([x, b], (48,)))
    assert bool(res.ok.any())
