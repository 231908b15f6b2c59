"""``common.sqnorm`` of MCTensors: the sum of squares at ``nc + 1`` components
(:func:`hypermc.mcf.reduce.sumsq`) for float32/float64 with ``nc <= 3``, its gradient
``2 x``, and the same bits under ``torch.compile`` (the op ``hypermc::sqnorm``)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.manifolds.math import common
from hypermc.mcf import reduce
from tests.oracle import components_to_fraction, expansions, rel_err_units

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("nc", [1, 2, 3, 4])
@settings(max_examples=15)
@given(data=st.data(), n=st.sampled_from([1, 2, 5, 16]))
def test_sqnorm_of_mc_against_fractions(dtype, nc, data, n):
    """Relative error within ``u^nc + 8 (h + 1) u^(nc+1)`` (nc <= 3, the pairwise sum;
    nc = 4 keeps ``sum(x * x)`` and its own bound, 2 u^nc here) of the exact sum of the
    squares of the stored values; nothing cancels."""
    x = data.draw(expansions(dtype, nc, shape=(6, n), min_exp=-20, max_exp=20, allow_zero=True))
    got = common.sqnorm(hm.MCTensor(x))
    exact = [sum((v * v for v in row), Fraction(0)) for row in components_to_fraction(x).tolist()]
    err = rel_err_units(got.components, exact, dtype, nc)
    h = max(1, (n - 1).bit_length())
    u = torch.finfo(dtype).eps / 2
    bound = 1 + 8 * (h + 1) * u + 1e-9 if nc <= 3 else 2.0
    assert float(err.max()) <= bound, (float(err.max()), bound)


@pytest.mark.parametrize("nc", [2, 3, 4])
def test_sqnorm_path_gradient_and_compile(nc):
    """nc <= 3: reduce.sumsq's bits (the row kernel where it runs), gradient 2x exactly;
    compiled (fullgraph) forward and backward give eager's bits. nc = 4: sum(x * x)."""
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(nc)
    base = hm.mc(torch.randn(7, 5, generator=gen, dtype=torch.float64), nc=nc) / 3

    def run(f):
        x = base.detach().clone().requires_grad_(True)
        s = f(x)
        (s * s).sum().backward()  # a non-uniform upstream gradient: 2 s
        return s.detach(), x.grad

    def sq(x):
        return common.sqnorm(x, keepdim=True)

    s, g = run(sq)
    want = reduce.sumsq(base.components, dim=-1) if nc <= 3 else torch.sum(base * base, dim=-1).components
    assert torch.equal(s.components[..., 0, :], want)
    assert torch.equal(g.components, (base * (2.0 * (s * 2.0))).components)
    cs, cg = run(torch.compile(sq, fullgraph=True, dynamic=False))
    assert torch.equal(cs.components, s.components) and torch.equal(cg.components, g.components)
    torch._dynamo.reset()


def test_sqnorm_of_plain_tensors_is_torch_sum():
    x = torch.randn(4, 3, dtype=torch.float64)
    assert torch.equal(common.sqnorm(x), torch.sum(x * x, dim=-1))
    assert common.sqnorm(x, keepdim=True).shape == (4, 1)
