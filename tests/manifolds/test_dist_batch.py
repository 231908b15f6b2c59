"""``Manifold.dist_batch``: the specialised forms of the four models equal the generic
(full MC) fallback of the base class, in value and gradient; argument errors."""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Euclidean, Lorentz, Manifold, PoincareBall, PoincareHalfspace
from hypermc.manifolds.math.batch import components_of

F64 = torch.float64
MODELS = {
    "halfspace": (PoincareHalfspace(curvature=-2.0), 3),
    "ball": (PoincareBall(), 2),
    "lorentz": (Lorentz(curvature=-0.5), 3),
    "euclidean": (Euclidean(), 2),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_specialised_equals_generic(name, rng):
    M, n = MODELS[name]
    rows = components_of(M.random(5, n, std=2.0, nc=2, dtype=F64, generator=rng))
    ia, ib = torch.tensor([[0], [1], [2]]), torch.tensor([[1, 3, 4]])
    fast = M.dist_batch(rows, ia, ib)
    slow = Manifold.dist_batch(M, rows, ia, ib)
    assert fast.shape == (3, 3) and fast.dtype == F64
    torch.testing.assert_close(fast, slow, rtol=1e-14, atol=1e-15)
    grads = []
    for fn in (M.dist_batch, lambda *a, **k: Manifold.dist_batch(M, *a, **k)):
        leaf = rows[..., 0].clone().requires_grad_(True)
        fn(rows, ia, ib, leaf=leaf).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize(("nc", "radius"), [(2, 12.0), (3, 30.0)])
def test_lorentz_close_pairs_far_out_equal_the_mc_distance(nc, radius):
    """Close pairs (distance ~1e-3 .. 1) at hyperbolic radius 12 / 30, where the time
    coordinate is ~e^radius and ``<delta, delta>_L`` cancels by ~e^(2 radius): the batched
    form (one rounded Minkowski square from MC arithmetic) equals the full MC distance."""
    gen = torch.Generator().manual_seed(nc)
    M = Lorentz()
    u = torch.randn(8, 4, generator=gen, dtype=F64)
    u[:, 0] = 0.0
    u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True) * radius
    step = torch.randn(8, 4, generator=gen, dtype=F64) * 10.0 ** -torch.randint(0, 4, (8, 1), generator=gen)
    step[:, 0] = 0.0
    x = M.expmap0(hm.mc(u, nc=nc, dtype=F64))
    y = M.expmap0(hm.mc(u + step, nc=nc, dtype=F64))
    rows = components_of(torch.cat([x, y]))
    ia, ib = torch.arange(8), torch.arange(8, 16)
    fast = M.dist_batch(rows, ia, ib)
    exact = M.dist(x, y).approx()
    assert bool((exact > 1e-5).all())
    torch.testing.assert_close(fast, exact, rtol=1e-10, atol=0.0)


def test_argument_errors():
    M = PoincareBall()
    rows = torch.zeros(3, 2, 1, dtype=F64)
    i = torch.tensor([0, 1])
    with pytest.raises(TypeError, match="PoincareBall.dist_batch: rows must be a plain Tensor .*got an MCTensor"):
        M.dist_batch(M.origin(3, 2, nc=2), i, i)
    with pytest.raises(ValueError, match=r"rows must be floating MC components \(U, n, nc\)"):
        M.dist_batch(torch.zeros(3, 2, dtype=F64), i, i)
    with pytest.raises(TypeError, match="ib must be an int64 Tensor of row indices; got torch.float32"):
        M.dist_batch(rows, i, i.float())
    with pytest.raises(ValueError, match=r"leaf must be a plain torch.float64 Tensor of shape \(3, 2\)"):
        M.dist_batch(rows, i, i, leaf=torch.zeros(3, 3, dtype=F64))
    with pytest.raises(ValueError, match=r"n >= 2"):
        Lorentz().dist_batch(rows[:, :1], i, i)
