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
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace, Stereographic

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


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.components if isinstance(t, hm.MCTensor) else t


# c = 0.7: the MC constant sqrt(c) comes from mpmath, which Dynamo does not trace; it
# warns (several UserWarnings of its own) and runs that part eagerly: a graph break, so
# no fullgraph there
_BALL_07 = pytest.param(PoincareBall(c=0.7), id="PoincareBall(c=0.7)", marks=pytest.mark.filterwarnings("ignore::UserWarning"))


@pytest.mark.parametrize("manifold", [PoincareBall(), _BALL_07, PoincareHalfspace(), Lorentz()], ids=repr)
@pytest.mark.parametrize("nc", [2, 3])
def test_compiled_distance_gradient_equals_eager(manifold, nc):
    """The gradient of a compiled MC distance has eager mode's bits. The ball's eager
    gradient is a closed form (an autograd function); the compiled graph takes the same
    function, not the formula's recorded graph, whose rounding differs in the last bits."""
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(1)
    x0 = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=nc)
    y = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=nc)

    def f(x, y):
        return manifold.dist(x, y).sum()

    grads = []
    for fn in (f, torch.compile(f, fullgraph=manifold.c == 1.0, dynamic=False)):
        x = x0.clone().requires_grad_(True)
        fn(x, y).backward()
        grads.append(x.grad.components)
    assert torch.equal(grads[0], grads[1])
    torch._dynamo.reset()


def _learnable(name: str):
    if name == "ball":
        return PoincareBall(c=torch.tensor(0.7, dtype=torch.float64), learnable=True)
    if name == "stereographic":
        return Stereographic(k=torch.tensor(-0.7, dtype=torch.float64), learnable=True)
    return Lorentz(k=torch.tensor(1.3, dtype=torch.float64), learnable=True)


# the stereographic formulas branch on the curvature's sign: a graph break there, where
# Dynamo warns (UserWarnings of its own, about the tensors it hands across the break)
_BREAKS = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("name", [pytest.param("ball", marks=_BREAKS), pytest.param("stereographic", marks=_BREAKS), "lorentz"])
def test_compiled_learnable_curvature_follows_its_value(name):
    """A compiled step on a learnable curvature reads the curvature's value when it runs:
    SGD on it, compiled and eager, stay together step by step (plain float64 points:
    the plain arithmetic is inductor's, so a few ulps, not bits). The curvature used to
    be read once while tracing and kept, so the compiled run drifted away."""
    torch._dynamo.reset()
    runs = []
    for compiled in (False, True):
        manifold = _learnable(name)
        gen = torch.Generator().manual_seed(2)
        x = manifold.random(8, 5, dtype=torch.float64, generator=gen)
        y = manifold.random(8, 5, dtype=torch.float64, generator=gen)

        def f(x, y, manifold=manifold):
            return manifold.dist(x, manifold.expmap0(manifold.logmap0(y, check=False)), check=False).sum() + manifold.projx(x).sum()

        fn = torch.compile(f) if compiled else f  # the default: a changed float becomes a symbol
        (p,) = manifold.parameters()
        opt = torch.optim.SGD([p], lr=0.01)
        trace = []
        for _ in range(4):
            opt.zero_grad()
            loss = fn(x, y)
            loss.backward()
            opt.step()
            trace.append((float(loss.detach()), float(p.detach())))
        runs.append(trace)
    assert runs[0][-1][1] != runs[0][0][1]  # the curvature moved
    for (le, pe), (lc, pc) in zip(*runs):
        assert lc == pytest.approx(le, rel=1e-12) and pc == pytest.approx(pe, rel=1e-12)
    torch._dynamo.reset()


@pytest.mark.parametrize("name", [pytest.param("ball", marks=_BREAKS), "lorentz"])
def test_compiled_learnable_curvature_on_mc_points(name):
    """MC points on a learnable curvature under torch.compile: eager mode's distances
    bit for bit, and the curvature's gradient. The hyperboloid's gradient has eager's
    bits; the ball's graph breaks at the curvature's sign test (a data-dependent branch
    of the stereographic formulas), and the gradient contributions from the two sides
    of the break are summed in another order: the same value to the last component's
    rounding (relative 1e-30 at nc = 2), not the same bits."""
    torch._dynamo.reset()
    manifold = _learnable(name)
    gen = torch.Generator().manual_seed(0)
    x = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=2)
    y = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=2)

    def f(x, y):
        return manifold.dist(x, y, check=False).sum()

    compiled = torch.compile(f, dynamic=False)
    (p,) = manifold.parameters()
    for value in (0.0137, -0.2937171767861385) if name == "ball" else (1.3, 1.2254758520266475):
        with torch.no_grad():
            p.fill_(value)
        out = []
        for fn in (f, compiled):
            p.grad = None
            d = fn(x, y)
            d.backward()
            out.append((d, p.grad))
        (de, ge), (dc, gc) = out
        assert torch.equal(de.components, dc.components)
        if name == "lorentz":
            assert torch.equal(_bits(ge), _bits(gc))
        else:
            assert float(abs(ge - gc)) <= 1e-30 * abs(float(ge))
    torch._dynamo.reset()
