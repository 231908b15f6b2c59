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


# the stereographic formulas branch on the curvature's sign: where it can change (the
# learnable Stereographic), a graph break, where Dynamo warns (UserWarnings of its own,
# about the tensors it hands across the break); the learnable ball's is always negative
_BREAKS = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("name", ["ball", pytest.param("stereographic", marks=_BREAKS), "lorentz"])
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

        # the default (a changed float becomes a symbol); the ball and the hyperboloid in
        # one graph, with no data-dependent branch left
        fn = torch.compile(f, fullgraph=name != "stereographic") if compiled else f
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


@pytest.mark.parametrize("name", ["ball", pytest.param("stereographic", marks=_BREAKS), "lorentz"])
def test_compiled_learnable_curvature_on_mc_points(name):
    """MC points on a learnable curvature under torch.compile: eager mode's distances
    bit for bit, and the curvature's gradient. The ball (whose curvature is negative by
    construction: the formulas need not read its sign) and the hyperboloid compile to one
    graph, and the gradient has eager's bits; the learnable Stereographic's graph breaks
    at the sign test (its curvature may cross zero), and the gradient contributions from
    the two sides of the break are summed in another order: the same value to the last
    component's rounding (relative 1e-30 at nc = 2), not the same bits."""
    torch._dynamo.reset()
    manifold = _learnable(name)
    gen = torch.Generator().manual_seed(0)
    x = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=2)
    y = hm.mc(manifold.random(8, 5, dtype=torch.float64, generator=gen), nc=2)

    def f(x, y):
        return manifold.dist(x, y, check=False).sum()

    compiled = torch.compile(f, dynamic=False, fullgraph=name != "stereographic")
    (p,) = manifold.parameters()
    for value in (0.0137, -0.2937171767861385) if name != "lorentz" else (1.3, 1.2254758520266475):
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
        if name != "stereographic":
            assert torch.equal(_bits(ge), _bits(gc))
        else:
            assert float(abs(ge - gc)) <= 1e-30 * abs(float(ge))
    torch._dynamo.reset()


@pytest.mark.parametrize("nc", [None, 2])
def test_compiled_learnable_ball_projx_follows_the_curvature_without_recompiling(nc):
    """The learnable ball's projx under torch.compile: one graph for every value of the
    curvature (it reads it when the graph runs; as a float it recompiled at every new
    value and ran eagerly after the recompile limit), points beyond the edge pulled to
    it: their deficit is the edge value ``2^8 u^nc`` (MC points: eager mode's bits;
    plain ones: inductor's arithmetic, a few ulps)."""
    torch._dynamo.reset()
    manifold = _learnable("ball")
    (p,) = manifold.parameters()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(8, 5, dtype=torch.float64, generator=gen)
    x = x / x.norm(dim=-1, keepdim=True)
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(manifold.projx, fullgraph=True, dynamic=False, backend=backend)
    u2 = 2.0**-53 if nc is None else 2.0**-106
    for value in (-1.0, 0.2, 1.3, 2.5):
        with torch.no_grad():
            p.fill_(value)
        c = float(manifold.c.detach())
        far = x * ((1 + 1e-3) / c**0.5)  # outside the ball
        if nc is not None:
            far = hm.mc(far, nc=nc)
        got, want = compiled(far), manifold.projx(far)
        d = hm.manifolds.math.common.deficit(got, c=c)
        lead = d.components[..., 0] if nc is not None else d
        assert bool(((lead - 2**8 * u2).abs() <= 2**8 * u2 * 0.02).all()), (value, lead)
        if nc is not None:
            assert torch.equal(got.components, want.components)
        else:
            assert torch.allclose(got, want, rtol=4e-16, atol=0)
    assert len(graphs) == 1
    torch._dynamo.reset()


def test_compiled_mc_ball_distance_is_one_opaque_op(monkeypatch):
    """A compiled MC ball distance runs its forward as one ``hypermc::mc_op``
    (``hypermc::ball_dist_parts``: eager mode's code, hence its bits) instead of the
    dozen traced ops that made it ~1.5x slower than eager mode, and its closed-form
    gradient as one more (``hypermc::ball_dist_grads``), with eager mode's bits."""
    import json

    from hypermc.mcf import compile as mc_compile

    torch._dynamo.reset()
    manifold = PoincareBall()
    gen = torch.Generator().manual_seed(4)
    x = hm.mc(manifold.random(16, 4, dtype=torch.float64, generator=gen), nc=2)
    y = hm.mc(manifold.random(16, 4, dtype=torch.float64, generator=gen), nc=2)
    compiled = torch.compile(lambda a, b: manifold.dist(a, b, check=False), fullgraph=True, dynamic=False)
    compiled(x, y)
    ops = []
    run = mc_compile.run_spec

    def spy(spec, *args, **kwargs):
        ops.append(json.loads(spec)["op"])
        return run(spec, *args, **kwargs)

    monkeypatch.setattr(mc_compile, "run_spec", spy)
    got = compiled(x, y)
    assert ops == ["hypermc.ball_dist_parts.default"]
    assert torch.equal(got.components, manifold.dist(x, y, check=False).components)
    monkeypatch.setattr(mc_compile, "run_spec", run)
    grads = []
    for fn in (lambda a, b: manifold.dist(a, b, check=False), compiled):
        xg = x.detach().clone().requires_grad_()
        fn(xg, y).backward(hm.mc(torch.linspace(0.5, 2.0, 16, dtype=torch.float64), nc=2))
        grads.append(xg.grad)
        ops.clear()
        monkeypatch.setattr(mc_compile, "run_spec", spy)
    assert torch.equal(grads[0].components, grads[1].components)
    xg = x.detach().clone().requires_grad_()
    compiled(xg, y).sum().backward()
    assert ops.count("hypermc.ball_dist_parts.default") == 1 and ops.count("hypermc.ball_dist_grads.default") == 1
    torch._dynamo.reset()
