"""Tests of hypermc.nn.functional: losses, softmax forms and conversions against float64
references computed on the exact values of the MC inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import hypermc as hm
import hypermc.nn.functional as MF
from tests.oracle import BOUNDS, UNIT_ROUNDOFF_BITS

f16, f32, f64 = torch.float16, torch.float32, torch.float64


def _mc(values: torch.Tensor, nc: int = 2, dtype: torch.dtype = f32, grad: bool = False) -> hm.MCTensor:
    return hm.mc(values.to(f64), nc=nc, dtype=dtype, requires_grad=grad)


def _exact64(x: hm.MCTensor) -> torch.Tensor:
    """float64 copy of x's value (exact for float32 nc=2 and float16 nc<=4)."""
    return x.detach().to(f64).approx()


def _check(got: hm.MCTensor, want: torch.Tensor, bound: str | float = "transcendental", scale: torch.Tensor | None = None) -> None:
    """``|got - want| <= bound u^nc |want| + 1e-15`` elementwise: ``bound`` is a key of the
    bound table or a number of units of u^nc; ``scale`` replaces ``|want|`` where the result
    cancels (the size of the terms that cancel). The 1e-15 (0.28 u^2 for float32 nc=2) is
    the float64 reference's own rounding of results near 0 (e.g. ``sigmoid(z) - y``)."""
    assert isinstance(got, hm.MCTensor)
    units = BOUNDS[bound] if isinstance(bound, str) else bound
    want = want.detach()
    tol = units * 2.0 ** (-UNIT_ROUNDOFF_BITS[got.dtype] * got.nc) * (want.abs() if scale is None else scale) + 1e-15
    err = (got.detach().to(f64).approx() - want).abs()
    assert err.shape == want.shape and bool((err <= tol).all()), f"error {float((err / tol).max()):.3g} x the tolerance"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_value_and_grad(reduction, rng):
    x = _mc(torch.randn(6, 3, generator=rng, dtype=f64), grad=True)
    t = _mc(torch.randn(6, 3, generator=rng, dtype=f64))
    loss = MF.mse_loss(x, t, reduction=reduction)
    x64 = _exact64(x).requires_grad_()
    ref = F.mse_loss(x64, _exact64(t), reduction=reduction)
    _check(loss, ref)
    loss.sum().backward() if reduction == "none" else loss.backward()
    ref.sum().backward() if reduction == "none" else ref.backward()
    _check(x.grad, x64.grad)


def test_mse_loss_plain_target_and_fp16(rng):
    x = _mc(torch.randn(8, generator=rng, dtype=f64), nc=2, dtype=f16)
    t = torch.randn(8, generator=rng, dtype=f64).to(f16)
    # arithmetic only (sub, square, mean): one op's bound, 8 u^2 (measured 0.12 u^2)
    _check(MF.mse_loss(x, t), F.mse_loss(_exact64(x), t.to(f64)), BOUNDS["mul"])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_bce_with_logits(reduction, rng):
    z = _mc(torch.randn(10, generator=rng, dtype=f64) * 8, grad=True)
    y = (torch.rand(10, generator=rng) > 0.5).to(f32)
    loss = MF.binary_cross_entropy_with_logits(z, y, reduction=reduction)
    z64 = _exact64(z).requires_grad_()
    ref = F.binary_cross_entropy_with_logits(z64, y.to(f64), reduction=reduction)
    _check(loss, ref)
    loss.backward()
    ref.backward()
    _check(z.grad, z64.grad, "grad")


def test_bce_on_probabilities(rng):
    p = _mc(torch.rand(10, generator=rng, dtype=f64) * 0.98 + 0.01, grad=True)
    y = (torch.rand(10, generator=rng) > 0.5).to(f32)
    loss = MF.binary_cross_entropy(p, y)
    p64 = _exact64(p).requires_grad_()
    ref = F.binary_cross_entropy(p64, y.to(f64))
    _check(loss, ref)
    loss.backward()
    ref.backward()
    _check(p.grad, p64.grad, "grad")


def test_cross_entropy_and_log_softmax(rng):
    x = _mc(torch.randn(5, 4, generator=rng, dtype=f64) * 4, grad=True)
    t = torch.tensor([0, 3, 1, 1, 2])
    x64 = _exact64(x).requires_grad_()
    lse = torch.logsumexp(x64.detach(), dim=1, keepdim=True)  # x - lse cancels where x dominates
    _check(MF.log_softmax(x, dim=1), F.log_softmax(x64, dim=1), scale=x64.detach().abs() + lse.abs())
    loss = MF.cross_entropy(x, t)
    ref = F.cross_entropy(x64, t)
    _check(loss, ref)
    loss.backward()
    ref.backward()
    _check(x.grad, x64.grad, "grad")


def test_softmax_large_logits_do_not_overflow():
    x = _mc(torch.tensor([[1000.0, 999.0, -5.0]], dtype=f64))
    _check(MF.softmax(x, dim=-1), torch.softmax(_exact64(x), dim=-1))


def test_to_tensor_and_as_mc_are_differentiable(rng):
    x = _mc(torch.randn(4, generator=rng, dtype=f64), grad=True)
    y = MF.to_tensor(x)
    assert type(y) is torch.Tensor and torch.equal(y, x.approx())
    (y * 3.0).sum().backward()
    assert isinstance(x.grad, hm.MCTensor) and x.grad.nc == 2
    assert torch.equal(x.grad.approx(), torch.full((4,), 3.0))
    p = torch.randn(4, generator=rng, requires_grad=True)
    q = MF.as_mc(p, nc=2)
    assert isinstance(q, hm.MCTensor) and q.nc == 2 and torch.equal(q.approx(), p.detach())
    (q * 2.0).sum().backward()
    assert type(p.grad) is torch.Tensor and torch.equal(p.grad, torch.full((4,), 2.0))
    assert MF.to_tensor(p) is p and MF.as_mc(q) is q


def test_loss_argument_errors():
    x = _mc(torch.zeros(3))
    with pytest.raises(ValueError, match=r"^mse_loss: reduction must be one of 'none', 'mean', 'sum'; got 'avg'$"):
        MF.mse_loss(x, torch.zeros(3), reduction="avg")
    with pytest.raises(ValueError, match=r"^cross_entropy: reduction must be one of 'none', 'mean', 'sum'; got 'avg'$"):
        MF.cross_entropy(_mc(torch.zeros(3, 2)), torch.zeros(3, dtype=torch.int64), reduction="avg")
    with pytest.raises(ValueError, match=r"target shape \(4,\) differs from input shape \(3,\)"):
        MF.mse_loss(x, torch.zeros(4))
    with pytest.raises(TypeError, match="target dtype torch.float64 differs from input dtype torch.float32"):
        MF.binary_cross_entropy_with_logits(x, torch.zeros(3, dtype=f64))
    with pytest.raises(TypeError, match="class indices"):
        MF.cross_entropy(_mc(torch.zeros(3, 2)), torch.zeros(3))
    with pytest.raises(ValueError, match=r"expected input \(N, C\) and target \(N,\)"):
        MF.cross_entropy(_mc(torch.zeros(3, 2)), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"^softmax: dim must be an int; got NoneType None$"):
        MF.softmax(x, dim=None)
    with pytest.raises(TypeError, match=r"^as_mc: x must be a floating-point tensor; got dtype torch\.int64$"):
        MF.as_mc(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"^as_mc: x must be a Tensor or MCTensor; got list$"):
        MF.as_mc([1.0])
    with pytest.raises(ValueError, match=r"^as_mc: nc must be an int >= 1; got 0$"):
        MF.as_mc(torch.zeros(3), nc=0)
    with pytest.raises(ValueError, match=r"^gelu: approximate must be one of 'none', 'tanh'; got 'fast'$"):
        MF.gelu(x, approximate="fast")


@pytest.mark.parametrize(("dtype", "nc"), [(torch.float64, 2), (torch.float64, 3), (torch.float32, 3), (torch.float32, 4)])
def test_gelu_tanh_against_mpmath(dtype, nc):
    """The tanh approximation with its constants to the operand's precision (sqrt(2/pi)
    and the decimal 0.044715; float64 constants left 3e-16 at every nc): within the
    transcendental bound where ``1 + tanh`` does not cancel (x >= -0.5)."""
    import mpmath

    xs = [-0.5, -0.1, 0.3, 1.1, 2.5, 6.0]
    x = hm.mc(torch.tensor(xs, dtype=torch.float64).to(dtype), nc=nc)
    got = MF.gelu(x, approximate="tanh").to_mpmath().tolist()
    p = UNIT_ROUNDOFF_BITS[dtype]
    with mpmath.workprec(nc * p + 100):
        beta = mpmath.sqrt(2 / mpmath.pi)
        for a, g in zip(x.to_mpmath().tolist(), got):
            a = mpmath.mpf(a)
            ref = a / 2 * (1 + mpmath.tanh(beta * (a + mpmath.mpf(44715) / 10**6 * a**3)))
            err = float(abs((mpmath.mpf(g) - ref) / ref))
            assert err <= BOUNDS["transcendental"] * 2.0 ** (-p * nc), (float(a), err / 2.0 ** (-p * nc))
