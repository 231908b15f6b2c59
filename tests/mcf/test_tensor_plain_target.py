"""In-place ops on a plain tensor with an MC operand: the plain tensor keeps its type.

The rule (module docstring of :mod:`hypermc.mcf.tensor`): the op runs in MC arithmetic
and the exact result is rounded to the nearest value of the target's dtype, written in
place. This is what makes a plain parameter whose gradient comes out as an MCTensor
work with torch's optimizers and hypermc's.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from torch import nn

import hypermc as hm
from hypermc.optim import MCSGD, MCAdam

f32, f64 = torch.float32, torch.float64


def nearest(value: Fraction) -> float:
    """The float64 nearest to ``value`` (ties to even: Python's Fraction -> float)."""
    return float(value)


def mc_of(values: list[float], tail: float, nc: int = 2) -> hm.MCTensor:
    """``values + tail`` as an nc-component float64 MCTensor (exact: tail far below)."""
    return hm.mc(torch.tensor(values, dtype=f64), nc=nc) + tail


def test_add_into_a_plain_tensor_rounds_the_exact_result_and_keeps_the_tensor():
    target = torch.tensor([0.0, 1.0, -3.0], dtype=f64)
    operand = mc_of([1.0, 2.0**-53, 0.5], 2.0**-60)
    out = target.add_(operand)
    assert out is target and type(target) is torch.Tensor
    want = [nearest(Fraction(t) + Fraction(v) + Fraction(2) ** -60) for t, v in zip([0.0, 1.0, -3.0], [1.0, 2.0**-53, 0.5])]
    # 1 + 2^-53 + 2^-60 is above the halfway point: it rounds up (fl(1 + 2^-53) alone would not)
    assert target.tolist() == want and want[1] == 1.0 + 2.0**-52


@pytest.mark.parametrize(
    ("op", "exact"),
    [
        (lambda t, m: t.sub_(m, alpha=2), lambda t, m: t - 2 * m),
        (lambda t, m: t.mul_(m), lambda t, m: t * m),
        (lambda t, m: t.addcmul_(m, m, value=0.5), lambda t, m: t + m * m / 2),
        (lambda t, m: t.lerp_(m, 0.25), lambda t, m: t + (m - t) / 4),
        (lambda t, m: t.copy_(m), lambda t, m: m),
    ],
    ids=["sub_", "mul_", "addcmul_", "lerp_", "copy_"],
)
def test_in_place_ops_into_a_plain_tensor_give_the_nearest_float_of_the_mc_result(op, exact):
    base = [3.0, -0.75]
    target = torch.tensor(base, dtype=f64)
    operand = mc_of([1.0, 1.5], 2.0**-70)
    op(target, operand)
    assert type(target) is torch.Tensor and target.dtype == f64
    values = [Fraction(v) + Fraction(2) ** -70 for v in (1.0, 1.5)]
    assert target.tolist() == [nearest(exact(Fraction(t), m)) for t, m in zip(base, values)]


def test_index_put_into_a_plain_tensor_rounds_to_nearest():
    target = torch.zeros(3, dtype=f64)
    target[torch.tensor([1])] = mc_of([1.0], 2.0**-53 + 2.0**-60)
    assert type(target) is torch.Tensor
    assert target.tolist() == [0.0, 1.0 + 2.0**-52, 0.0]


def test_in_place_into_a_plain_tensor_of_another_dtype_is_refused():
    with pytest.raises(TypeError, match=r"component dtype torch\.float64 in place into a plain tensor of dtype torch\.float32"):
        torch.zeros(2, dtype=f32).add_(mc_of([1.0, 2.0], 0.0))


def test_in_place_into_an_integer_tensor_is_refused():
    with pytest.raises(TypeError, match=r"plain tensor of dtype torch\.int64; the target must be a floating tensor"):
        torch.zeros(2, dtype=torch.int64).add_(mc_of([1.0, 2.0], 0.0))


def _plain_parameter_with_mc_gradient(tail: float) -> nn.Parameter:
    """A plain float64 parameter whose gradient comes out as an MCTensor ``(1 + tail)``."""
    p = nn.Parameter(torch.tensor([0.5, -2.0], dtype=f64))
    (p * mc_of([1.0, 1.0], tail)).sum().backward()
    assert isinstance(p.grad, hm.MCTensor)
    return p


def test_torch_sgd_on_a_plain_parameter_with_an_mc_gradient_takes_the_rounded_mc_step():
    tail = 2.0**-56
    p = _plain_parameter_with_mc_gradient(tail)
    torch.optim.SGD([p], lr=2.0**-3, foreach=False).step()
    assert type(p) is nn.Parameter and type(p.data) is torch.Tensor
    step = Fraction(1, 8) * (1 + Fraction(tail))
    assert p.tolist() == [nearest(Fraction(0.5) - step), nearest(Fraction(-2.0) - step)]


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False),
        lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=False),
        lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=False),
        lambda ps: MCSGD(ps, lr=0.1, momentum=0.9),
        lambda ps: MCAdam(ps, lr=0.1),
    ],
    ids=["SGD-momentum", "Adam", "AdamW", "MCSGD", "MCAdam"],
)
def test_optimizers_on_a_plain_parameter_with_an_mc_gradient_match_the_plain_gradient(make):
    """The MC gradient 1 + 2^-70 rounds to 1: the steps follow the plain-gradient run.

    Within a few ulps, not bitwise: state that the optimizer builds from the gradient
    (a momentum buffer cloned from it) is MC and rounds less than the plain run's.
    """
    p_mc = _plain_parameter_with_mc_gradient(2.0**-70)
    p_plain = nn.Parameter(torch.tensor([0.5, -2.0], dtype=f64))
    opt_mc, opt_plain = make([p_mc]), make([p_plain])
    for _ in range(3):
        p_plain.grad = torch.ones(2, dtype=f64)
        opt_mc.step()
        opt_plain.step()
        p_mc.grad = None
        (p_mc * mc_of([1.0, 1.0], 2.0**-70)).sum().backward()
    assert type(p_mc.data) is torch.Tensor
    torch.testing.assert_close(p_mc.detach(), p_plain.detach(), rtol=0.0, atol=2.0**-49)  # values O(1); a few ulps of 1
    assert not torch.equal(p_plain.detach(), torch.tensor([0.5, -2.0], dtype=f64))


def test_torch_sgd_on_an_mc_parameter_still_updates_in_mc():
    p = nn.Parameter(hm.mc(torch.tensor([1.0], dtype=f64), nc=2))
    (p * mc_of([1.0], 2.0**-70)).sum().backward()
    torch.optim.SGD([p], lr=1.0, foreach=False).step()
    assert isinstance(p.data, hm.MCTensor)
    assert p.detach().to_mpmath()[0] == -(hm.mc(torch.tensor([2.0**-70], dtype=f64), nc=1).to_mpmath()[0])
