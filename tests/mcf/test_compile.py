"""torch.compile and MC arithmetic: compiled MC code is eager's, bit for bit.

See ``hypermc/mcf/compile.py`` for the design (every computing MC op is one opaque
``hypermc::mc_op`` in the compiled graph, run by the eager kernels). Each compiled result
is compared with eager bitwise and with the mpmath oracle; CPU always, CUDA under the
``cuda`` marker. Compiled functions use ``fullgraph=True`` (no graph break) and
``dynamic=False``; ``torch._dynamo.reset()`` runs around every test.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.mcf import arith, eft, native, registry
from hypermc.mcf import compile as mc_compile
from hypermc.mcf.native import fused as native_fused
from tests.conftest import BOUNDS
from tests.mcf.test_native import needs_compiler
from tests.oracle import assert_within, components_to_mpf, expansions, working_prec

# torch's own Inductor/AOT code emits these while compiling (not hypermc's warnings).
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _edge_operands(dtype: torch.dtype, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random operands plus pinned edge cases (signed zeros, tiny/huge exponents, ties)."""
    a = torch.randn(200, generator=gen, dtype=torch.float64).to(dtype)
    b = torch.randn(200, generator=gen, dtype=torch.float64).to(dtype)
    fi = torch.finfo(dtype)
    edge_a = torch.tensor([0.0, -0.0, 1.0, 1.0 + fi.eps, fi.max / 4, 2.0**-20, 3.0], dtype=dtype)
    edge_b = torch.tensor([-0.0, 5.0, -1.0, 1.0 - fi.eps / 2, 3.0, 2.0**-20, 1.0 / 3.0], dtype=dtype)
    return torch.cat([a, edge_a]), torch.cat([b, edge_b])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["two_sum", "fast_two_sum", "two_prod"])
def test_compiled_eft_is_exact_and_has_no_graph_break(name, dtype, rng):
    """The EFTs compile with fullgraph=True (the FMA probe is not traced) and stay exact."""
    fn = getattr(eft, name)
    a, b = _edge_operands(dtype, rng)
    if name == "fast_two_sum":  # precondition |a| >= |b|
        a, b = torch.where(a.abs() >= b.abs(), a, b), torch.where(a.abs() >= b.abs(), b, a)
    s, e = torch.compile(fn, fullgraph=True, dynamic=False)(a, b)
    for ai, bi, si, ei in zip(a.tolist(), b.tolist(), s.tolist(), e.tolist()):
        want = Fraction(ai) * Fraction(bi) if name == "two_prod" else Fraction(ai) + Fraction(bi)
        assert Fraction(si) + Fraction(ei) == want, (name, ai, bi, si, ei)
        assert si == float(torch.tensor(float(want), dtype=torch.float64).to(dtype))


def test_fma_probe_is_resolved_outside_tracing():
    """CPU probes ran at import; while tracing the probe answers False (no addcmul EFT)."""
    assert eft._probe_fused_addcmul.cache_info().currsize >= 2
    seen = []

    def f(a, b):
        seen.append(eft.has_fused_addcmul(a.device.type, a.dtype))
        return a * b

    torch.compile(f, fullgraph=True, dynamic=False)(torch.ones(3), torch.ones(3))
    assert seen == [False]


def test_all_finite_is_false_while_tracing():
    """Data-dependent fast-path checks are not traced (general path instead, no .item())."""
    seen = []

    def f(a):
        seen.append(eft.all_finite(a))
        return a + 1

    torch.compile(f, fullgraph=True, dynamic=False)(torch.ones(3))
    assert seen == [False]
    assert eft.all_finite(torch.ones(3)) and not eft.all_finite(torch.tensor([1.0, float("nan")]))


def _mc_operands(dtype: torch.dtype, nc: int, device: str = "cpu"):
    """MC operands with random values and pinned edge cases: signed zeros, huge and tiny
    exponents, cancellation (x = -y + tiny), inf and NaN (their propagation must match
    eager's)."""
    gen = torch.Generator().manual_seed(0)
    xs = torch.randn(96, generator=gen, dtype=torch.float64) * 3
    ys = torch.randn(96, generator=gen, dtype=torch.float64) / 7
    # huge/tiny, but products keep all nc components normal (the documented range)
    emax, p = int(math.log2(torch.finfo(dtype).max)), 1 - int(math.log2(torch.finfo(dtype).eps))
    big = 2.0 ** max(1, (emax - p * (nc + 1)) // 2)
    pinned_x = [0.0, -0.0, 1.0, big, 1.0 / big, 1.0 + 2.0**-30, float("inf"), float("nan"), -2.5]
    pinned_y = [-0.0, 5.0, -1.0, 3.0, 1.0 / big, -1.0, 1.0, 2.0, 2.5]
    x = hm.mc(torch.cat([xs, torch.tensor(pinned_x, dtype=torch.float64)]), nc=nc, dtype=dtype, device=device)
    y = hm.mc(torch.cat([ys, torch.tensor(pinned_y, dtype=torch.float64)]), nc=nc, dtype=dtype, device=device)
    return x / 3.0, y / 7.0  # full nc-component operands


def _core_ops(x, y):
    return (
        x + y,
        x - y,
        x * y,
        x / y,
        torch.sqrt(x.abs()),
        torch.exp(y),
        torch.log(x.abs()),
        x * y + x,
        (x - (x - 1e-30)),  # cancellation: the result is the tiny difference
        (y * y).sum(),
    )


_REFERENCES = (
    lambda a, b: a + b,
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / b,
    lambda a, b: mpmath.sqrt(abs(a)),
    lambda a, b: mpmath.exp(b),
    lambda a, b: mpmath.log(abs(a)),
    lambda a, b: a * b + a,
)
_REF_BOUNDS = ("add", "sub", "mul", "div", "sqrt", "transcendental", "transcendental", None)


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    same = (got == want) & (torch.signbit(got) == torch.signbit(want))
    same |= got.isnan() & want.isnan()
    assert bool(same.all()), f"{int((~same).sum())} components differ from eager"


@pytest.mark.parametrize(
    ("dtype", "nc"),
    [
        (torch.float32, 1),
        (torch.float32, 2),
        (torch.float64, 2),
        (torch.float64, 3),
        (torch.float64, 4),
        (torch.float32, 4),
        (torch.float16, 2),
    ],
)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_compiled_mc_ops_equal_eager_and_match_mpmath(dtype, nc, device):
    """Compiled with the default (Inductor) backend, fullgraph: every core op gives
    eager's components bit for bit, and is within the bound table against mpmath."""
    x, y = _mc_operands(dtype, nc, device)
    compiled = torch.compile(_core_ops, fullgraph=True, dynamic=False)(x, y)
    eager = _core_ops(x, y)
    for got, want in zip(compiled, eager):
        assert isinstance(got, hm.MCTensor) and got.nc == want.nc and got.dtype == dtype
        _assert_same_bits(got.components, want.components)
    if dtype == torch.float16:
        return  # float16 bounds hold only in the normal range of all components (docs/accuracy.md)
    compiled = [c.cpu() for c in compiled]
    xm = components_to_mpf(x.components.cpu()).tolist()
    ym = components_to_mpf(y.components.cpu()).tolist()
    finite = [i for i, (a, b) in enumerate(zip(xm, ym)) if mpmath.isfinite(a) and mpmath.isfinite(b) and b != 0]
    with mpmath.workprec(working_prec(dtype, nc)):
        for got, ref, bound in zip(compiled, _REFERENCES, _REF_BOUNDS):
            exact = [ref(xm[i], ym[i]) for i in finite]
            assert_within(got.components[finite], exact, dtype, nc, 2 * BOUNDS["mul"] if bound is None else bound)
        total = mpmath.fsum(b * b for b in ym)
        assert_within(compiled[-1].components.unsqueeze(0), [total], dtype, nc, 2 * BOUNDS["mul"])


def test_compiled_backward_equals_eager():
    """Forward and backward of a compiled MC function (gradients are MCTensors) are
    eager's bit for bit."""

    def loss(x, y):
        return (torch.exp(x * y) / (1.0 + x * x)).sum()

    def grads(fn, x0, y):
        x = hm.mc(x0.approx(), nc=3, dtype=torch.float64).requires_grad_(True)
        x.components.copy_(x0.components)
        out = fn(x, y)
        out.backward()
        return out, x.grad

    x0, y = _mc_operands(torch.float64, 3)
    x0, y = x0[:96], y[:96]  # finite values: the gradient of inf/NaN is NaN either way
    out_c, g_c = grads(torch.compile(loss, fullgraph=True, dynamic=False), x0, y)
    out_e, g_e = grads(loss, x0, y)
    assert isinstance(g_c, hm.MCTensor) and g_c.nc == 3
    _assert_same_bits(out_c.components, out_e.components)
    _assert_same_bits(g_c.components, g_e.components)


def test_compiled_in_place_mc_op_equals_eager():
    """In-place MC ops inside a compiled function write the same components as eager."""

    def step(x, y):
        x.add_(y * 0.5)
        return x * x

    x, y = _mc_operands(torch.float64, 2)
    xc, xe = x.clone(), x.clone()
    out_c = torch.compile(step, fullgraph=True, dynamic=False)(xc, y)
    out_e = step(xe, y)
    _assert_same_bits(xc.components, xe.components)
    _assert_same_bits(out_c.components, out_e.components)


def test_compiled_mc_matmul_equals_eager():
    gen = torch.Generator().manual_seed(1)
    a = hm.mc(torch.randn(6, 5, generator=gen, dtype=torch.float64), nc=3) / 3.0
    b = hm.mc(torch.randn(5, 4, generator=gen, dtype=torch.float64), nc=3) / 7.0
    f = torch.compile(lambda a, b: (a @ b).sum(0), fullgraph=True, dynamic=False)
    _assert_same_bits(f(a, b).components, (a @ b).sum(0).components)


def test_symbolic_shapes_are_refused_with_a_clear_error():
    x, y = _mc_operands(torch.float64, 2)
    f = torch.compile(lambda a, b: a * b, fullgraph=True, dynamic=True)
    with pytest.raises(Exception, match=r"aten\.mul\.Tensor .*symbolic.*dynamic=False"):
        f(x, y)


def test_eager_mc_unaffected_by_compile_guard():
    x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float64)
    y = x * x + x
    assert isinstance(y, hm.MCTensor) and y.nc == 2
    assert "traced" not in repr(y)


# ---------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("dtype", "nc"), [(torch.float32, 2), (torch.float64, 2), (torch.float64, 3), (torch.float64, 4), (torch.float32, 4)]
)
def test_cuda_compiled_mc_matches_mpmath(dtype, nc):
    gen = torch.Generator().manual_seed(0)
    xs = torch.randn(64, generator=gen, dtype=torch.float64) * 3
    ys = torch.randn(64, generator=gen, dtype=torch.float64) / 7
    x = hm.mc(xs, nc=nc, dtype=dtype, device="cuda")
    y = hm.mc(ys, nc=nc, dtype=dtype, device="cuda")
    ops = {
        "add": (lambda a, b: a + b, lambda a, b: a + b),
        "mul": (lambda a, b: a * b, lambda a, b: a * b),
        "div": (lambda a, b: a / b, lambda a, b: a / b),
        "fma_like": (lambda a, b: a * b + a, lambda a, b: a * b + a),
    }
    xm = components_to_mpf(x.components)
    ym = components_to_mpf(y.components)
    for name, (fn, ref) in ops.items():
        torch._dynamo.reset()
        out = torch.compile(fn, fullgraph=True, dynamic=False)(x, y)
        with mpmath.workprec(working_prec(dtype, nc)):
            exact = [ref(a, b) for a, b in zip(xm.tolist(), ym.tolist())]
        bound = 2 * BOUNDS["mul"] if name == "fma_like" else BOUNDS["add" if name == "add" else name]
        assert_within(out.components.cpu(), exact, dtype, nc, bound)


# ------------------------------------------------------------------ fused expressions
#
# On the CPU, connected elementwise MC ops become one hypermc::mc_fused node whose fused
# kernel recomputes the elements any op's check rejects with eager mode's ops
# (hypermc/mcf/compile.py). Compiled results must be eager's bits: hypothesis draws the
# operands over a wide exponent range, and every example carries the pinned edge
# operands (±0, subnormals, huge and tiny exponents, exact and near cancellation, inf,
# NaN).

FUSED_EXPRESSIONS = {
    "x*y+x/(y*y+1)": lambda x, y, p: x * y + x / (y * y + 1.0),  # the benchmark's
    "(x-y)*(x+y)-0.1*x": lambda x, y, p: (x - y) * (x + y) - 0.1 * x,  # 0.1: an MC constant in float32
    "1-x/y+p": lambda x, y, p: 1.0 - x / y + p,  # rsub, a plain tensor
    "p*x-y/p-(-x).square()": lambda x, y, p: p * x - y / p - (-x).square(),
    "3/x+y.reciprocal()*x": lambda x, y, p: 3 / x + y.reciprocal() * x,  # rdiv via reciprocal * 3
    "sqrt(x*x+y*y)/(p-x)": lambda x, y, p: torch.sqrt(x * x + y * y) / (p - x),  # sqrt fused but for float32 nc = 2
}
FUSED_CONFIGS = [(torch.float32, 2), (torch.float32, 4), (torch.float64, 2), (torch.float64, 3), (torch.float64, 4)]


def _pinned_operands(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Leading values of x, y, p for the edge cases, as float64 (exact in ``dtype``)."""
    fi = torch.finfo(dtype)
    sub, huge, tiny = fi.tiny / 8, fi.max / 4, fi.tiny * 2**30
    x = [0.0, -0.0, 0.0, sub, -sub, huge, tiny, 1.0, 1.0, 3.0, float("inf"), float("nan"), 1.5, -2.0, huge, 1.0]
    y = [-0.0, 2.0, 0.0, 1.0, sub, 3.0, tiny, 1.0, -1.0, 0.0, 1.0, 2.0, float("inf"), -2.0, 1.0 / huge, 1.0 + 2**-20]
    p = [1.0, -0.0, 0.0, sub, 1.0, huge, 2.0, -1.0, 1.0, 0.5, 2.0, 1.0, 3.0, 0.0, 1.0, 1.0 - 2**-20]
    return tuple(torch.tensor(v, dtype=torch.float64) for v in (x, y, p))  # type: ignore[return-value]


def _fused_operands(dtype: torch.dtype, nc: int, xs, ys, ps):
    x0, y0, p0 = _pinned_operands(dtype, nc)
    x = torch.cat([xs, hm.mc(x0, nc=nc, dtype=dtype).components])
    y = torch.cat([ys, hm.mc(y0, nc=nc, dtype=dtype).components])
    y[: len(xs) // 4] = -x[: len(xs) // 4]  # exact cancellation in x + y, x - y
    y[len(xs) // 4 : len(xs) // 2] = arith.add(-x[len(xs) // 4 : len(xs) // 2], x[len(xs) // 4 : len(xs) // 2] * 2.0**-40)
    p = torch.cat([ps.to(dtype), p0.to(dtype)])
    return hm.MCTensor(x), hm.MCTensor(y), p


@pytest.mark.parametrize(("dtype", "nc"), FUSED_CONFIGS, ids=str)
@pytest.mark.parametrize("name", sorted(FUSED_EXPRESSIONS))
@settings(max_examples=min(settings.default.max_examples, 6))
@given(data=st.data())
def test_fused_expressions_equal_eager(name, dtype, nc, data):
    fn = FUSED_EXPRESSIONS[name]
    compiled = _COMPILED.setdefault((name, dtype, nc), torch.compile(fn, fullgraph=True, dynamic=False))
    wide = {"min_exp": -60, "max_exp": 60} if dtype == torch.float32 else {"min_exp": -300, "max_exp": 300}
    xs = data.draw(expansions(dtype, nc, shape=(32,), allow_zero=True, **wide))
    ys = data.draw(expansions(dtype, nc, shape=(32,), allow_zero=True, **wide))
    ps = data.draw(expansions(dtype, 1, shape=(32,), allow_zero=True, **wide))[..., 0]
    x, y, p = _fused_operands(dtype, nc, xs, ys, ps)
    got, want = compiled(x, y, p), fn(x, y, p)
    assert isinstance(got, hm.MCTensor) and got.dtype == dtype and got.nc == nc
    _assert_same_bits(got.components, want.components)


# compiled functions of test_fused_expressions_equal_eager, one per test (dynamo is reset between tests)
_COMPILED: dict = {}


@pytest.fixture(autouse=True)
def _fresh_compiled():
    _COMPILED.clear()
    yield
    _COMPILED.clear()


def _fused_calls(monkeypatch) -> list[dict]:
    """The specs of the hypermc::mc_fused calls a compiled graph makes (recorded)."""
    calls: list[dict] = []
    real = mc_compile.run_fused

    def record(spec, tensors, mc_type, dispatch_impl):
        calls.append(json.loads(spec))
        return real(spec, tensors, mc_type, dispatch_impl)

    monkeypatch.setattr(mc_compile, "run_fused", record)
    return calls


@needs_compiler
@pytest.mark.parametrize(("dtype", "nc"), [(torch.float32, 2), (torch.float64, 3), (torch.float64, 4)], ids=str)
def test_benchmark_expression_is_one_fused_kernel(dtype, nc, monkeypatch):
    """x*y + x/(y*y + 1) runs as one mc_fused call of five ops (the nodes of its
    intermediate values are dead code and removed), through a checked fused kernel."""
    x, y = _mc_operands(dtype, nc)
    f = torch.compile(lambda x, y: x * y + x / (y * y + 1.0), fullgraph=True, dynamic=False)
    f(x, y)
    calls = _fused_calls(monkeypatch)
    _assert_same_bits(f(x, y).components, (x * y + x / (y * y + 1.0)).components)
    assert [[n["op"] for n in c["nodes"]] for c in calls] == [
        ["aten.mul.Tensor", "aten.mul.Tensor", "aten.add.Tensor", "aten.div.Tensor", "aten.add.Tensor"]
    ]
    kernels = [k for k in registry._states if k[:3] == ("fused", native._NAMES[dtype], nc) and len(k[4]) == 5]
    assert kernels and all(callable(registry._states[k]) for k in kernels)


@needs_compiler
def test_written_operands_are_read_after_the_write():
    """An MC value's expression is not inlined into a later op if one of its leaves, or
    the value itself, was written in place in between (MC in-place ops, plain in-place
    ops, writes through views)."""

    def f(x, y, p):
        z = x * y + 1.0
        x.add_(y)  # a leaf of z, written by an MC in-place op
        w = z * p
        p.mul_(2.0)  # a plain leaf of w
        v = x[:4]
        v.mul_(3.0)  # x written through a view
        u = z / y
        z.mul_(0.5)  # z itself
        return z + x, w * p + u, u - z

    x, y = _mc_operands(torch.float64, 3)
    p = torch.linspace(0.5, 2.0, x.shape[0], dtype=torch.float64)
    xc, pc, xe, pe = x.clone(), p.clone(), x.clone(), p.clone()
    got = torch.compile(f, fullgraph=True, dynamic=False)(xc, y, pc)
    want = f(xe, y, pe)
    for a, b in zip(got, want):
        _assert_same_bits(a.components, b.components)
    _assert_same_bits(xc.components, xe.components)
    assert torch.equal(pc, pe)


@needs_compiler
def test_shared_intermediates_and_long_chains(monkeypatch):
    """A value used by several expressions and returned itself; a chain longer than
    MAX_FUSED_OPS (split into several fused nodes)."""

    def f(x, y):
        a = x * y - 1.0
        b = a / (y + 2.0)
        c = a * a + b
        for k in range(2 * mc_compile.MAX_FUSED_OPS):
            c = c * 0.75 + (b if k % 2 else x)
        return a, b - c, a.sum()

    x, y = _mc_operands(torch.float64, 4)
    calls = _fused_calls(monkeypatch)
    got = torch.compile(f, fullgraph=True, dynamic=False)(x, y)
    want = f(x, y)
    for a, b in zip(got, want):
        _assert_same_bits(a.components, b.components)
    assert calls and max(len(c["nodes"]) for c in calls) <= mc_compile.MAX_FUSED_OPS


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_fused_nodes_under_other_backends(backend):
    x, y = _mc_operands(torch.float32, 2)
    fn = FUSED_EXPRESSIONS["x*y+x/(y*y+1)"]
    p = torch.ones(x.shape[0])
    got = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)(x, y, p)
    _assert_same_bits(got.components, fn(x, y, p).components)


def test_not_fused_without_fused_kernels(monkeypatch):
    """Without fused kernels (no compiler, ``HYPERMC_NATIVE=0``, another device) every MC
    op stays one opaque op, as before."""
    monkeypatch.setattr(native_fused, "usable", lambda dtype, nc: False)
    calls = _fused_calls(monkeypatch)
    x, y = _mc_operands(torch.float64, 3)
    fn = FUSED_EXPRESSIONS["x*y+x/(y*y+1)"]
    p = torch.ones(x.shape[0], dtype=torch.float64)
    # trace again (no cached graph); torch's config only through its own patch()
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(fx_graph_cache=False):
        got = torch.compile(fn, fullgraph=True, dynamic=False)(x, y, p)
    _assert_same_bits(got.components, fn(x, y, p).components)
    assert calls == []


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_as_the_first_mc_operation_of_a_process(backend):
    """The fused kernels are built and self-checked on first use; when that first use is
    inside ``torch.compile`` (fake tensors), the build and check run on real tensors
    outside the tracing modes and make eager mode's choices (the fused multiply-add
    probe's answer: traced as under a trace, the float64 double-word kernels took
    Dekker's product and failed to build, leaving the whole process on the torch path);
    the libraries are in use afterwards and the compiled function gives the eager bits."""
    import subprocess
    import sys

    code = (
        "import torch, hypermc as hm\n"
        "from hypermc.mcf import native\n"
        f"f = torch.compile(lambda x: x * x + 1.0, backend={backend!r}, fullgraph=True, dynamic=False)\n"
        "for dtype in (torch.float32, torch.float64):\n"
        "    for nc in (2, 3):\n"
        "        x = hm.mc(torch.tensor([1.5, 2.0, 0.1], dtype=dtype), nc=nc)\n"
        "        y = f(x)\n"
        "        print(torch.equal(y.components, (x * x + 1.0).components), native.status(dtype, nc))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-4:] == ["True in use"] * 4
