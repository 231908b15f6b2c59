"""Batched distances: equal to the manifolds' MC distances (value and gradient), and
they keep the precision of MC points far from the origin."""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.embed.distance import batch_distance, components_of, rounded_difference
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace

F64 = torch.float64
MANIFOLDS = {
    "halfspace": (PoincareHalfspace(), 3),
    "halfspace-c2": (PoincareHalfspace(curvature=-2.0), 3),
    "ball": (PoincareBall(), 3),
    "ball-c05": (PoincareBall(curvature=-0.5), 2),
    "lorentz": (Lorentz(), 4),
    "euclidean": (Euclidean(), 3),
}


@pytest.mark.parametrize("name", list(MANIFOLDS))
@pytest.mark.parametrize("nc", [None, 1, 2])
def test_matches_manifold_dist_and_grad(name, nc, rng):
    M, n = MANIFOLDS[name]
    x = M.random(7, n, std=3.0, nc=nc, dtype=F64, generator=rng)
    assert x.dtype == F64 and (nc is None) == (not isinstance(x, hm.MCTensor))
    rows = components_of(x)
    ia, ib = torch.arange(7)[:, None], torch.arange(7)[None]
    off = ~torch.eye(7, dtype=torch.bool)
    ref = M.dist(x[:, None], x[None])
    ref = ref.approx() if nc else ref
    d = batch_distance(M, rows, ia, ib)
    torch.testing.assert_close(d[off], ref[off], rtol=1e-14, atol=0)
    # Gradient with respect to the rows = gradient of the MC distance.
    w = torch.randn(7, 7, dtype=F64, generator=rng) * off
    leaf = rows[..., 0].clone().requires_grad_(True)
    (batch_distance(M, rows, ia, ib, leaf=leaf) * w).sum().backward()
    xr = hm.MCTensor.from_components(rows.clone(), requires_grad=True) if nc else x.clone().requires_grad_(True)
    (M.dist(xr[:, None], xr[None]) * w).sum().backward()
    gref = xr.grad.approx() if nc else xr.grad
    torch.testing.assert_close(leaf.grad, gref, rtol=1e-11, atol=1e-11 * float(gref.abs().max()))


def test_keeps_mc_precision_far_from_the_origin():
    """Heights 1e-20, horizontal offset 3e-21: float64 rounds the offset away, the MC
    rows keep it and the batched distance equals the MC distance."""
    M = PoincareHalfspace()
    x = hm.mc([[1.0, 1e-20]], nc=2, dtype=F64)
    y = x + hm.mc([[3e-21, 0.0]], nc=2, dtype=F64)
    pts = torch.cat([x, y])
    rows = components_of(pts)
    d = batch_distance(M, rows, torch.tensor([0]), torch.tensor([1]))
    ref = M.dist(x, y).approx()
    torch.testing.assert_close(d, ref, rtol=1e-14, atol=0)
    assert float(d) > 0.29  # 2 asinh(0.15)
    plain = batch_distance(M, components_of(pts.approx()), torch.tensor([0]), torch.tensor([1]))
    assert float(plain) == 0.0


def test_rounded_difference_is_accurate(rng):
    a = hm.mc(torch.rand(1000, dtype=F64, generator=rng), nc=3)
    tiny = hm.mc(torch.rand(1000, dtype=F64, generator=rng) * 1e-40, nc=3)
    b = a + tiny
    got = rounded_difference(a.components, b.components)
    ref = (a - b).approx()
    torch.testing.assert_close(got, ref, rtol=4.5e-16, atol=0)
    assert torch.equal(rounded_difference(a.components[..., :1], b.components[..., :1]), a.components[..., 0] - b.components[..., 0])


def test_not_a_manifold_is_a_type_error():
    with pytest.raises(TypeError, match="batch_distance: manifold must be a hypermc manifold .*; got str"):
        batch_distance("ball", torch.zeros(2, 2, 1, dtype=F64), torch.tensor([0]), torch.tensor([1]))


def test_is_the_manifold_method(rng):
    """The shim calls ``Manifold.dist_batch``; a subclass of a model inherits its form."""

    class Other(PoincareBall):
        pass

    rows = components_of(PoincareBall().random(3, 2, nc=2, dtype=F64, generator=rng))
    ia, ib = torch.tensor([0, 1]), torch.tensor([1, 2])
    assert torch.equal(batch_distance(Other(), rows, ia, ib), PoincareBall().dist_batch(rows, ia, ib))
