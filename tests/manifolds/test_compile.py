"""torch.compile of manifold ops on MC input: fullgraph, eager's bits.

The MC ops inside compile to opaque ``hypermc::mc_op`` calls (``hypermc/mcf/compile.py``);
the manifolds' leading-component reads and the ball's ``1 - c|x|^2`` go through
``hypermc::lead`` / ``hypermc::deficit``, and their data-dependent shortcuts are not taken
while tracing (a compiled ``PoincareBall.dist0`` would otherwise fail with a FakeTensor
error).
"""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]


@pytest.mark.parametrize("manifold", [PoincareBall(), PoincareHalfspace(), Lorentz()], ids=repr)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_compiled_manifold_maps_equal_eager(manifold, device):
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    dim = 4 if isinstance(manifold, Lorentz) else 3
    u = hm.mc(torch.randn(6, dim, generator=gen, dtype=torch.float64) * 3, nc=3, device=device)
    u = manifold.proju(manifold.origin(6, dim, nc=3, dtype=torch.float64, device=device), u)

    def maps(u):
        x = manifold.expmap0(u)
        y = x.flip(0)
        return manifold.dist0(x), manifold.logmap0(x), manifold.dist(x, y), manifold.logmap(x, y)

    compiled = torch.compile(maps, fullgraph=True, dynamic=False)(u)
    eager = maps(u)
    for got, want in zip(compiled, eager):
        assert isinstance(got, hm.MCTensor) and got.nc == 3
        assert torch.equal(got.components, want.components)
    assert float(compiled[0].approx().max()) > 5.0  # far from the origin: MC matters here
    torch._dynamo.reset()
