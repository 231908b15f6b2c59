"""hypermc.mcf.portable: exp, log, sqrt built from operations whose bits do not
depend on the CPU model, checked against mpmath; and the trainer's path uses no other."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import example, given
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import hypermc as hm
from hypermc.data import load_mammals
from hypermc.embed import evaluate, train
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from hypermc.manifolds.math import fused
from hypermc.mcf import portable
from tests.oracle import floats_of, rel_err_units

F64 = torch.float64
#: Relative error of portable.exp / portable.log in units of u (float64): about 1.5 ulps.
BOUND_UNITS = 3.0
#: Absolute error bounds in ulps of the exact value (the module docstring's bounds).
EXP_ULPS, LOG_ULPS, TANH_ULPS = 1.0, 1.5, 2.5
#: The smallest and largest arguments whose exp is a normal float64.
EXP_NORMAL = (-708.39, 709.78)


def _units(got: torch.Tensor, exact: list[mpmath.mpf], dtype: torch.dtype = F64) -> np.ndarray:
    return rel_err_units(got.unsqueeze(-1), np.array(exact, dtype=object), dtype, 1)


def _exact(fn, xs: torch.Tensor) -> list[mpmath.mpf]:
    with mpmath.workprec(200):
        return [fn(mpmath.mpf(float(v))) for v in xs.tolist()]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_exp_and_log_within_about_one_ulp(dtype: torch.dtype, rng: torch.Generator) -> None:
    x = (torch.rand(4000, generator=rng, dtype=F64) * (EXP_NORMAL[1] - EXP_NORMAL[0]) + EXP_NORMAL[0]).to(dtype)
    if dtype == torch.float32:
        x = x.clamp(-87.0, 88.0)  # float32's normal range of exp
    small = (torch.rand(4000, generator=rng, dtype=F64) * 2 - 1).to(dtype)  # |r| range of the reduction, k = 0, +-1
    xs = torch.cat([x, small])
    y = portable.exp(xs)
    assert y.dtype == dtype
    assert float(_units(y, _exact(mpmath.exp, xs), dtype).max()) <= BOUND_UNITS
    # log over all binary exponents, subnormals included
    e = torch.randint(-1074 if dtype == F64 else -149, 1024 if dtype == F64 else 128, (4000,), generator=rng)
    p = (torch.rand(4000, generator=rng, dtype=F64) + 1) * torch.pow(2.0, e.to(F64))
    p = p[torch.isfinite(p) & (p > 0)].to(dtype)
    p = p[(p > 0) & torch.isfinite(p)]
    z = portable.log(p)
    assert z.dtype == dtype
    assert float(_units(z, _exact(mpmath.log, p), dtype).max()) <= BOUND_UNITS


@given(floats_of(F64, min_exp=-1074, max_exp=9))
@example(0.0)
@example(-0.0)
@example(709.782712893384)  # largest finite exp
@example(709.782712893385)  # first overflow
@example(-708.3964185322641)  # exp at the smallest normal
@example(-745.1332191019411)  # smallest subnormal result
@example(-745.2)  # underflows to 0
@example(5e-324)
@example(-5e-324)
@example(0.34657359027997264)  # ln(2) / 2: the edge of the reduction
def test_exp_hypothesis(x: float) -> None:
    got = float(portable.exp(torch.tensor([x], dtype=F64))[0])
    with mpmath.workprec(200):
        exact = mpmath.exp(mpmath.mpf(x))
    if exact > 1.7976931348623157e308 * (1 + 2**-54):
        assert got == math.inf
        return
    # absolute error at most one ulp of the result (subnormal results: one subnormal quantum)
    quantum = max(math.ulp(float(exact)), 5e-324)
    assert abs(mpmath.mpf(got) - exact) <= EXP_ULPS * quantum, (x, got, exact)


@given(floats_of(F64, max_exp=6))
@example(0.0)
@example(-0.0)
@example(5e-324)
@example(1e-9)
@example(19.0)
@example(-19.06154746539849)  # tanh rounds to -1 from here on
@example(0.5493061443340549)  # atanh(1/2)
@example(0.55)  # TANH_SPLIT: where the formula changes
@example(2.898352903067463)  # 2.42 ulps with -e / (2 + e) alone
def test_tanh_hypothesis(x: float) -> None:
    got = float(portable.tanh(torch.tensor([x], dtype=F64))[0])
    with mpmath.workprec(200):
        exact = mpmath.tanh(mpmath.mpf(x))
    assert abs(mpmath.mpf(got) - exact) <= TANH_ULPS * max(math.ulp(float(exact)), 5e-324), (x, got, exact)
    assert math.copysign(1.0, got) == math.copysign(1.0, x)


@given(floats_of(F64, allow_zero=False))
@example(5e-324)
@example(2.2250738585072014e-308)
@example(1.7976931348623157e308)
@example(1.0)
@example(0.7071067811865475)  # just below sqrt(1/2): the reduction's edge
@example(0.7071067811865476)
@example(1.4142135623730951)
def test_log_hypothesis(x: float) -> None:
    x = abs(x)
    got = float(portable.log(torch.tensor([x], dtype=F64))[0])
    with mpmath.workprec(200):
        exact = mpmath.log(mpmath.mpf(x))
    assert abs(mpmath.mpf(got) - exact) <= LOG_ULPS * math.ulp(float(exact)), (x, got, exact)


@given(floats_of(F64))
@example(0.0)
@example(-0.0)
@example(5e-324)
@example(1.7976931348623157e308)
@example(-1.0)
def test_sqrt_is_ieee(x: float) -> None:
    got = portable.sqrt(torch.tensor([x], dtype=F64))
    with np.errstate(invalid="ignore"):
        want = np.sqrt(np.array([x]))  # the hardware instruction: IEEE, NaN bits included
    assert got.numpy().tobytes() == want.tobytes(), (x, got, want)


def test_float32_sqrt_is_ieee(rng: torch.Generator) -> None:
    x = torch.rand(100_000, generator=rng, dtype=torch.float32) * 4 + 0.5
    got = portable.sqrt(x)
    assert got.dtype == torch.float32
    assert torch.equal(got, torch.from_numpy(np.sqrt(x.numpy())))


def test_special_values() -> None:
    inf, nan = math.inf, math.nan
    x = torch.tensor([-inf, inf, nan, 0.0, -0.0, -1.0, 1.0], dtype=F64)
    e, lg, sq, th = portable.exp(x), portable.log(x), portable.sqrt(x), portable.tanh(x)
    assert th.tolist()[:2] == [-1.0, 1.0] and th[2].isnan() and math.copysign(1.0, float(th[4])) == -1.0
    assert e.tolist()[:2] == [0.0, inf] and math.isnan(e[2]) and e.tolist()[3:5] == [1.0, 1.0]
    assert lg[0].isnan() and lg[1] == inf and lg[2].isnan() and lg[3] == -inf and lg[4] == -inf and lg[5].isnan() and lg[6] == 0
    assert sq[0].isnan() and sq[1] == inf and sq[2].isnan() and sq[5].isnan()
    assert math.copysign(1.0, float(sq[3])) == 1.0 and math.copysign(1.0, float(sq[4])) == -1.0


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh"])
def test_gradient_is_torchs_formula(name: str, rng: torch.Generator) -> None:
    x = (torch.rand(50, generator=rng, dtype=F64) * 4 + 0.1).requires_grad_()
    g = torch.randn(50, generator=rng, dtype=F64)
    y = getattr(portable, name)(x)
    (gx,) = torch.autograd.grad(y, x, g)
    want = {"exp": g * y, "log": g / x, "sqrt": g / (2 * y), "tanh": g * (1 - y * y)}[name]
    assert torch.equal(gx, want.detach())


def test_other_inputs_take_torchs_functions() -> None:
    m = hm.mc([0.5, 2.0], nc=2, dtype=F64)
    for name in ("exp", "log", "sqrt", "tanh"):
        assert torch.equal(getattr(portable, name)(m).components, getattr(torch, name)(m).components)
    ints = torch.tensor([1, 4])
    assert torch.equal(portable.sqrt(ints), torch.sqrt(ints))


#: The CPU functions torch computes with MKL's vector math (the code path, so the bits,
#: depend on the CPU model), and composite ops that call them inside C++ (a dispatch mode
#: sees only the composite).
_VML = ("exp", "log", "sqrt", "tanh", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "erf", "erfc", "erfinv")
MKL_VML = {*_VML, *(f"{n}_" for n in _VML), "logsumexp", "softplus", "logaddexp", "softmax", "_softmax", "log_softmax", "_log_softmax"}


class _Spy(TorchDispatchMode):
    """Records the MKL-backed functions called on plain CPU tensors, inside MC operations
    too: an op on MCTensors runs MCTensor's implementation with the spy active again, so
    the component-level calls it makes are seen."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        leaves = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if any(isinstance(a, hm.MCTensor) for a in leaves):
            with self:
                return hm.MCTensor.__torch_dispatch__(func, types, args, kwargs)
        name = func.overloadpacket.__name__
        if name in MKL_VML and any(a.device.type == "cpu" and a.is_floating_point() for a in leaves):
            self.seen.append(name)
        return func(*args, **kwargs)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("nc", [None, 1, 2])
@pytest.mark.parametrize("model", [PoincareHalfspace, PoincareBall, Lorentz])
def test_training_calls_no_mkl_vector_function(model: type, nc: int | None, fast: bool) -> None:
    """The trainer (the main job's half-space path, and the ball's and the hyperboloid's)
    never calls the CPU-dependent functions on plain tensors, its MC operations included,
    so its digits do not depend on which CPU runs it. The fused kernels' load checks run
    first, outside the spy: they compare a kernel with the torch path on the same machine."""
    graph = load_mammals()
    for dtype_nc in (2, 3):
        fused.available(F64, dtype_nc, model.name)
    spy = _Spy()
    with spy:
        result = train(graph, model(), dim=2, nc=nc, dtype=F64, epochs=2, burnin=1, seed=0, fast=fast)
        evaluate(result.manifold, result.embeddings, graph.edges)
    assert spy.seen == []


@pytest.mark.parametrize("model", [PoincareHalfspace, PoincareBall, Lorentz])
def test_rmsprop_training_calls_no_mkl_vector_function(model: type) -> None:
    """Per-row RMSprop's step lengths (``sqrt`` of the mean squares) too."""
    graph = load_mammals()
    fused.available(F64, 2, model.name)
    spy = _Spy()
    with spy:
        train(graph, model(), dim=2, nc=2, dtype=F64, epochs=2, burnin=1, seed=0, optimizer="rmsprop", lr=0.02)
    assert spy.seen == []


def test_spy_sees_a_call_inside_an_mc_operation() -> None:
    """The spy is not blind: MKL functions called by MC operations on their components,
    and composite ops, are seen."""
    spy = _Spy()
    with spy:
        torch.sin(hm.mc(torch.tensor([0.5], dtype=F64), nc=1))  # nc = 1 sin: torch's, on the component
        torch.logsumexp(torch.ones(3, dtype=F64), dim=0)
    assert spy.seen == ["sin", "logsumexp"]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch.func's own set-up
def test_torch_func_transforms_take_torchs_functions() -> None:
    """vmap and jvp work on the portable functions (they use torch's rules there)."""
    x = torch.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=F64)
    for name in portable.__all__:
        fn = getattr(portable, name)
        assert torch.equal(torch.func.vmap(fn)(x), getattr(torch, name)(x))
        _, tangent = torch.func.jvp(fn, (x,), (torch.ones_like(x),))
        assert tangent.shape == x.shape


def test_fixed_order_logsumexp_is_accurate(rng: torch.Generator) -> None:
    """The trainer's loss on portable's exp and log, against mpmath."""
    from hypermc.embed.train import fixed_order_logsumexp

    x = torch.randn(64, 51, generator=rng, dtype=F64) * 30
    got = fixed_order_logsumexp(x)
    with mpmath.workprec(200):
        exact = [mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row)) for row in x.tolist()]
    assert float(_units(got, exact).max()) <= 8  # the tree's (ceil(log2 51) + 1) u plus exp's and log's ulp
