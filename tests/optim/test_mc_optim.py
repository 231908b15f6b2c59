"""Tests of MCSGD / MCAdam: nc=1 equals torch.optim bitwise, MC updates keep what float16
rounds away, convergence to a known optimum, state_dict round trip, schedulers, errors."""

from __future__ import annotations

import io
from fractions import Fraction

import pytest
import torch
from torch import nn

import hypermc as hm
import hypermc.nn
from hypermc.optim import MCSGD, MCAdam, mc_adam, mc_sgd
from tests.oracle import components_to_fraction

f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64

SGD_CONFIGS = [
    dict(lr=0.05),
    dict(lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True),
    dict(lr=0.1, momentum=0.8, dampening=0.3, maximize=True),
]
ADAM_CONFIGS = [
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True),
    dict(lr=0.003, eps=1e-6, maximize=True),
]
PAIRS = [(MCSGD, torch.optim.SGD, c) for c in SGD_CONFIGS] + [(MCAdam, torch.optim.Adam, c) for c in ADAM_CONFIGS]


def _grads(rng: torch.Generator, dtype: torch.dtype, n: int = 4) -> list[torch.Tensor]:
    return [torch.randn(3, 4, generator=rng, dtype=f64).to(dtype) for _ in range(n)]


@pytest.mark.parametrize("dtype", [f16, bf16, f32, f64])
@pytest.mark.parametrize("mc_cls, torch_cls, config", PAIRS)
def test_nc1_equals_torch_bitwise(mc_cls, torch_cls, config, dtype, rng):
    w0 = torch.randn(3, 4, generator=rng, dtype=f64).to(dtype)
    p_ref = nn.Parameter(w0.clone())
    p_mc = nn.Parameter(hm.mc(w0, nc=1))
    opt_ref = torch_cls([p_ref], foreach=False, **config)
    opt_mc = mc_cls([p_mc], **config)
    for g in _grads(rng, dtype):
        p_ref.grad = g.clone()
        p_mc.grad = hm.mc(g, nc=1)
        opt_ref.step()
        opt_mc.step()
        assert torch.equal(p_mc.detach().approx(), p_ref.detach())
    for key, value in opt_ref.state[p_ref].items():
        mine = opt_mc.state[p_mc][key]
        assert torch.equal(mine.approx() if isinstance(mine, hm.MCTensor) else mine, value), key


@pytest.mark.parametrize("mc_cls, torch_cls, config", PAIRS)
def test_plain_parameters_follow_torch(mc_cls, torch_cls, config, rng):
    w0 = torch.randn(5, generator=rng)
    p_ref, p = nn.Parameter(w0.clone()), nn.Parameter(w0.clone())
    opt_ref, opt = torch_cls([p_ref], foreach=False, **config), mc_cls([p], **config)
    for _ in range(3):
        g = torch.randn(5, generator=rng)
        p_ref.grad, p.grad = g.clone(), g.clone()
        opt_ref.step()
        opt.step()
    assert torch.equal(p, p_ref)


@pytest.mark.parametrize("mc_cls, torch_cls, config", [c for c in PAIRS if c[2] is not SGD_CONFIGS[0]])
def test_mc_state_has_parameter_nc(mc_cls, torch_cls, config, rng):
    p = nn.Parameter(hm.mc(torch.randn(3, generator=rng, dtype=f64), nc=3, dtype=f32))
    opt = mc_cls([p], **config)
    p.grad = hm.mc(torch.randn(3, generator=rng, dtype=f64), nc=3, dtype=f32)
    grad_before = p.grad.components.clone()
    opt.step()
    assert torch.equal(p.grad.components, grad_before)  # the caller's gradient is not mutated
    tensors = [v for v in opt.state[p].values() if isinstance(v, hm.MCTensor)]
    assert tensors and all(t.nc == 3 and t.dtype == f32 for t in tensors)


def test_sgd_update_is_mc_precise():
    # one float16 step whose update is far below half an ulp of the parameter
    w, g, lr = 1.0, 2.0**-14, 0.05
    p_mc = nn.Parameter(hm.mc(torch.tensor([w], dtype=f16), nc=2))
    p_16 = nn.Parameter(torch.tensor([w], dtype=f16))
    p_mc.grad = hm.mc(torch.tensor([g], dtype=f16), nc=2)
    p_16.grad = torch.tensor([g], dtype=f16)
    MCSGD([p_mc], lr=lr).step()
    torch.optim.SGD([p_16], lr=lr).step()
    assert p_16.item() == w  # float16 loses the update
    # MC: lr enters as its double value; the exact result w - lr*g rounded to 2 components
    exact = Fraction(w) - Fraction(lr) * Fraction(g)
    got = components_to_fraction(p_mc.detach().components)[0]
    assert abs(got - exact) <= abs(exact) * Fraction(2) ** -20


def _quadratic_steps(opt, p, target, steps, scheduler=None):
    for _ in range(steps):
        opt.zero_grad()
        loss = ((p - target) * (p - target)).sum()
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()


@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_sgd_converges_to_known_optimum_beyond_fp16(momentum):
    # minimise ||p - c||^2 with c = (1/3, -5/7) to 2-component float16 precision (~22 bits)
    c_exact = [Fraction(1, 3), Fraction(-5, 7)]
    target = hm.mcf.from_mpmath(["1/3", "-5/7"], nc=2, dtype=f16)
    p = nn.Parameter(hm.mc(torch.zeros(2, dtype=f16), nc=2))
    _quadratic_steps(MCSGD([p], lr=0.1, momentum=momentum), p, target, 150)
    got = components_to_fraction(p.detach().components)
    for g, c in zip(got, c_exact):
        assert abs(g - c) <= abs(c) * Fraction(2) ** -20  # float16 alone: 2**-11
    plain = torch.zeros(2, dtype=f16, requires_grad=True)
    _quadratic_steps(torch.optim.SGD([plain], lr=0.1, momentum=momentum), plain, target.approx(), 150)
    assert any(abs(Fraction(v) - c) > abs(c) * Fraction(2) ** -20 for v, c in zip(plain.tolist(), c_exact))


def test_adam_with_scheduler_converges_to_known_optimum():
    target = hm.mcf.from_mpmath(["0.1", "-0.3", "1e-3"], nc=2, dtype=f32)
    p = nn.Parameter(hm.mc(torch.zeros(3, dtype=f32), nc=2))
    opt = MCAdam([p], lr=0.02, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=80, gamma=0.1)
    _quadratic_steps(opt, p, target, 240, sched)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.02 * 0.1**3)
    err = components_to_fraction((p.detach() - target).components)
    assert all(abs(e) < 1e-4 for e in err)


def test_scheduler_lr_reaches_update():
    p = nn.Parameter(hm.mc(torch.zeros(1, dtype=f64), nc=2))
    opt = MCSGD([p], lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = hm.mc(torch.ones(1, dtype=f64), nc=2)
        opt.step()
        sched.step()
    assert p.item() == -(1.0 + 0.5 + 0.25)


def _make(opt_cls, config, seed):
    torch.manual_seed(seed)
    model = nn.Sequential(hm.nn.MCLinear(3, 4, nc=2, dtype=f32), hm.nn.MCReLU(), hm.nn.MCLinear(4, 1, nc=2, dtype=f32))
    return model, opt_cls(model.parameters(), **config)


def _train(model, opt, x, steps):
    for _ in range(steps):
        opt.zero_grad()
        hm.nn.functional.mse_loss(model(x).squeeze(1), torch.zeros(x.shape[0])).backward()
        opt.step()


@pytest.mark.parametrize("opt_cls, config", [(MCSGD, dict(lr=0.05, momentum=0.9)), (MCAdam, dict(lr=0.01, amsgrad=True))])
def test_state_dict_round_trip(opt_cls, config, rng, seed):
    x = torch.randn(6, 3, generator=rng)
    model, opt = _make(opt_cls, config, seed)
    _train(model, opt, x, 2)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    model2, opt2 = _make(opt_cls, config, seed + 1)
    model2.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    state = next(iter(opt2.state.values()))
    assert any(isinstance(v, hm.MCTensor) and v.nc == 2 for v in state.values())
    _train(model, opt, x, 2)
    _train(model2, opt2, x, 2)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a.components, b.components)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: MCSGD(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: MCSGD(p, lr=0.1, momentum=-1), "Invalid momentum value: -1"),
        (lambda p: MCSGD(p, lr=0.1, weight_decay=-1e-4), "Invalid weight_decay value"),
        (lambda p: MCSGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
        (lambda p: MCSGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
        (lambda p: MCAdam(p, lr=-1e-3), "Invalid learning rate: -0.001"),
        (lambda p: MCAdam(p, eps=-1e-8), "Invalid epsilon value"),
        (lambda p: MCAdam(p, betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
        (lambda p: MCAdam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        (lambda p: MCAdam(p, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        # NaN and infinity are refused (torch.optim lets them through)
        (lambda p: MCSGD(p, lr=float("inf")), r"Invalid learning rate: inf \(lr must be a finite number >= 0\)"),
        (lambda p: MCSGD(p, lr=torch.tensor(float("nan"))), "Invalid learning rate: nan"),
        (lambda p: MCSGD(p, lr=0.1, momentum=float("nan")), "Invalid momentum value: nan"),
        (lambda p: MCSGD(p, lr=0.1, dampening=float("inf")), "Invalid dampening value: inf"),
        (lambda p: MCSGD(p, lr=0.1, weight_decay=float("nan")), "Invalid weight_decay value: nan"),
        (lambda p: MCAdam(p, eps=float("nan")), "Invalid epsilon value: nan"),
        (lambda p: MCAdam(p, betas=(float("nan"), 0.999)), "Invalid beta parameter at index 0: nan"),
        (lambda p: MCAdam(p, weight_decay=float("inf")), "Invalid weight_decay value: inf"),
    ],
)
def test_bad_hyperparameters(make, match):
    p = [nn.Parameter(hm.mc(torch.zeros(2), nc=2))]
    with pytest.raises(ValueError, match=match):
        make(p)


def test_functional_rejects_mismatched_gradient_dtype():
    p = hm.mc(torch.zeros(2, dtype=f16), nc=2)
    g = hm.mc(torch.ones(2, dtype=f32), nc=2)
    with pytest.raises(TypeError, match="gradient dtype torch.float32 differs from the parameter's dtype torch.float16"):
        mc_sgd([p], [g], [None], lr=0.1)
    with pytest.raises(TypeError, match="gradient dtype"):
        mc_adam([p], [g], [torch.zeros_like(p)], [torch.zeros_like(p)], [], [torch.tensor(0.0)], beta1=0.9, beta2=0.99, lr=0.1)


def test_parameters_without_grad_are_skipped():
    a = nn.Parameter(hm.mc(torch.ones(2), nc=2))
    b = nn.Parameter(hm.mc(torch.ones(2), nc=2))
    opt = MCAdam([a, b], lr=0.1)
    a.grad = hm.mc(torch.ones(2), nc=2)
    opt.step()
    assert b not in opt.state and torch.equal(b.approx(), torch.ones(2)) and bool((a.approx() < 1).all())


@pytest.mark.parametrize(("opt_cls", "riemannian"), [(MCSGD, "RiemannianSGD"), (MCAdam, "RiemannianAdam")])
@pytest.mark.parametrize("nc", [None, 2])
def test_manifold_parameters_are_refused_not_stepped_off_their_manifold(opt_cls, riemannian, nc):
    """A Euclidean step would move a ball point off the geodesic (0.9 -> 0.72 for lr 0.18):
    the MC optimizers refuse a parameter on a non-Euclidean manifold, at construction and in
    add_param_group, and name the Riemannian optimizer; Euclidean manifold parameters pass."""
    from hypermc.manifolds import Euclidean, PoincareBall

    x = torch.tensor([[0.9, 0.0]], dtype=torch.float64)
    p = hm.ManifoldParameter(x if nc is None else hm.mc(x, nc=nc), manifold=PoincareBall())
    match = rf"{opt_cls.__name__}: parameter 0 \(shape \(1, 2\)\) lies on PoincareBall\(curvature=-1\); .* Use hypermc\.optim\.{riemannian}"
    with pytest.raises(TypeError, match=match):
        opt_cls([p], lr=0.18)
    opt = opt_cls([nn.Parameter(torch.zeros(2, dtype=torch.float64))], lr=0.18)
    with pytest.raises(TypeError, match=match):
        opt.add_param_group({"params": [p]})
    assert len(opt.param_groups) == 1
    flat = hm.ManifoldParameter(torch.zeros(2, dtype=torch.float64), manifold=Euclidean())
    opt.add_param_group({"params": [flat]})
    assert len(opt.param_groups) == 2
    extra = nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt.add_param_group({"params": (q for q in [extra])})  # a generator: checked and still added
    assert opt.param_groups[-1]["params"] == [extra]


def test_geoopt_manifold_parameters_are_refused():
    geoopt = pytest.importorskip("geoopt")
    p = geoopt.ManifoldParameter(torch.tensor([0.9, 0.0], dtype=torch.float64), manifold=geoopt.PoincareBall())
    with pytest.raises(TypeError, match=r"MCSGD: parameter 0 \(shape \(2,\)\) lies on PoincareBall"):
        MCSGD([p], lr=0.18)
    euclid = geoopt.ManifoldParameter(torch.zeros(2, dtype=torch.float64), manifold=geoopt.Euclidean())
    MCAdam([euclid], lr=0.1)  # Euclidean: accepted
