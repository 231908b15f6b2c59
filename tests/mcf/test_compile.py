"""torch.compile and MC arithmetic (issue 16): exact where allowed, refused elsewhere.

See ``hypermc/mcf/compile.py`` for the design. On CPU every trace of an MC op is refused
(Inductor's CPU code is not exact for MC kernels, measured); on CUDA the compiled ops are
checked against the mpmath oracle. Compiled functions are small and ``dynamic=False``;
``torch._dynamo.reset()`` runs around every test.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.mcf import eft
from hypermc.mcf.compile import MCCompileError
from tests.conftest import BOUNDS
from tests.oracle import assert_within, components_to_mpf, working_prec

# torch's own Inductor/AOT code emits these while compiling (not hypermc's warnings).
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:MCTensor does not implement _stable_hash_for_caching:UserWarning"),
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("nc", [1, 2, 3, 4])
def test_cpu_compile_of_mc_op_is_refused(dtype, nc):
    """Inductor's CPU code rounds MC results (measured: ~1e31 u^3 for fp64 nc=3), so the
    trace is refused with an error naming the op rather than returning rounded values."""
    x = hm.mc([1.0, 2.0, 3.0], nc=nc, dtype=dtype)
    f = torch.compile(lambda x, y: x * y + x, fullgraph=True, dynamic=False)
    with pytest.raises(Exception, match=r"aten\.mul\.Tensor cannot be compiled exactly on the CPU"):
        f(x, x)


def test_half_precision_compile_is_refused():
    x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float16)
    f = torch.compile(lambda x: x + x, fullgraph=True, dynamic=False)
    with pytest.raises(Exception, match=r"aten\.add\.Tensor cannot be compiled exactly for dtype torch\.float16"):
        f(x)


def test_eager_mc_unaffected_by_compile_guard():
    x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float64)
    y = x * x + x
    assert isinstance(y, hm.MCTensor) and y.nc == 2
    assert "traced" not in repr(y)


# ---------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize(("dtype", "nc"), [(torch.float32, 2), (torch.float64, 2), (torch.float64, 3),
                                           (torch.float64, 4), (torch.float32, 4)])
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
