"""Tests of the combinatorial tree construction (hypermc.embed.construct)."""

import math

import mpmath
import pytest
import torch

from hypermc.data import Graph
from hypermc.embed.construct import (
    _pair_dist,
    bits_needed,
    components_needed,
    distortion,
    embed_tree,
    spanning_tree,
)
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace


def _path(k):
    names = tuple(f"n{i:03d}" for i in range(k + 1))
    return Graph(names, torch.tensor([[i + 1, i] for i in range(k)], dtype=torch.int64))


def _star(k):
    names = tuple(f"n{i:03d}" for i in range(k + 1))
    return Graph(names, torch.tensor([[i, 0] for i in range(1, k + 1)], dtype=torch.int64))


def _closure_of_path(k):
    names = tuple(f"n{i:03d}" for i in range(k + 1))
    edges = [[i, j] for i in range(k + 1) for j in range(i)]
    return Graph(names, torch.tensor(edges, dtype=torch.int64))


def test_spanning_tree_of_closure_is_the_reduction():
    parent, depth = spanning_tree(_closure_of_path(6))
    assert parent.tolist() == [-1, 0, 1, 2, 3, 4, 5]
    assert depth.tolist() == list(range(7))


def test_path_distances_are_exact_multiples_of_tau():
    g = _path(12)
    r = embed_tree(g, dim=2, tau=6.0)
    d = distortion(r["embeddings"], g, tau=r["tau"])
    # a geodesic: d_H(i, j) = tau |i - j| exactly
    assert d["d_avg"] < 1e-12 and abs(d["d_wc"] - 1) < 1e-12
    assert d["num_pairs"] == 13 * 12 // 2


@pytest.mark.parametrize("k", [3, 7])
def test_star_matches_closed_form_against_mpmath(k):
    tau = 20.0
    g = _star(k)
    r = embed_tree(g, dim=2, tau=tau)
    x = r["embeddings"]
    a = 1 - (x * x).sum(-1)
    mpmath.mp.prec = r["nc"] * 53 + 60
    t = mpmath.mpf(tau)
    for j in range(2, k + 1):
        i = torch.tensor([1])
        jj = torch.tensor([j])
        alpha = 2 * mpmath.pi * (j - 1) / k
        # hyperbolic law of cosines at the root
        ref = mpmath.acosh(mpmath.cosh(t) ** 2 - mpmath.sinh(t) ** 2 * mpmath.cos(alpha))
        got = float(_pair_dist(x, a, i, jj)[0])
        assert abs(got - float(ref)) <= 1e-12 * float(ref)


def test_too_small_nc_fails_loudly_naming_the_needed_nc():
    g = _path(10)
    need = components_needed(12.0, 10)
    assert need >= 2
    with pytest.raises(ValueError, match=rf"nc=1 gives 53 bits .* needs {bits_needed(12.0, 10)} bits.*pass nc={need}"):
        embed_tree(g, tau=12.0, nc=1)
    r = embed_tree(g, tau=12.0, nc="auto")
    assert r["nc"] == need
    d = distortion(r["embeddings"], g, tau=12.0)
    assert d["d_avg"] < 1e-10


@pytest.mark.parametrize("manifold", [PoincareHalfspace(), Lorentz()])
def test_other_models_give_the_same_distortion(manifold):
    g = _star(5)
    ref = distortion(embed_tree(g, tau=5.0)["embeddings"], g, tau=5.0)
    r = embed_tree(g, manifold, tau=5.0)
    d = distortion(r["embeddings"], g, manifold, tau=5.0)
    assert d["d_avg"] == pytest.approx(ref["d_avg"], abs=1e-9)


def test_high_dim_directions_are_spread():
    g = _star(20)
    r = embed_tree(g, dim=5, epsilon=1.0)
    assert r["min_angle"] > math.radians(30)
    d = distortion(r["embeddings"], g, tau=r["tau"])
    assert d["d_wc"] <= 2.0


def test_bad_arguments():
    g = _path(3)
    with pytest.raises(ValueError, match="exactly one of epsilon / tau"):
        embed_tree(g)
    with pytest.raises(ValueError, match="dim: expected an int >= 2"):
        embed_tree(g, dim=1, tau=1.0)
    with pytest.raises(ValueError, match="nc: expected an int >= 1 or 'auto'"):
        embed_tree(g, tau=1.0, nc=0)
    with pytest.raises(ValueError, match="pairs: expected 'all'"):
        distortion(embed_tree(g, tau=1.0)["embeddings"], g, pairs=0)


def test_radius_beyond_the_exponent_range_is_refused():
    with pytest.raises(ValueError, match="hyperbolic radius .* below the smallest"):
        embed_tree(_path(10), tau=80.0)


def _balanced(branching, depth):
    """Balanced tree: node i > 0 has parent (i - 1) // branching."""
    n = sum(branching ** k for k in range(depth + 1))
    names = tuple(f"b{i:06d}" for i in range(n))
    edges = torch.tensor([[i, (i - 1) // branching] for i in range(1, n)], dtype=torch.int64)
    return Graph(names, edges)


def test_deep_tree_gets_tree_neighbour_map_one():
    # tau * depth = 60: far past float64 (needs nc >= 2); every tree neighbour must rank first
    g = _balanced(3, 5)
    r = embed_tree(g, dim=2, tau=12.0)
    assert r["nc"] >= 2
    d = distortion(r["embeddings"], g, tau=r["tau"])
    assert d["tree_map"] == 1.0 and d["tree_mean_rank"] == 1.0
    assert d["d_wc"] <= 2.0
    # directed edges only (positives = the parent): the 3 children of an inner node sit
    # at the same distance tau as its parent, so the evaluator must not score 1.0 there
    from hypermc.embed import evaluate
    directed = evaluate(PoincareBall(), r["embeddings"], r["tree_edges"])
    assert directed["map"] < 0.9


def test_closure_map_of_a_path_closure_is_one():
    # the ancestors of node i are i-1, ..., 0 at distances tau, 2 tau, ...; node i's
    # descendants are as close, so closure MAP is below 1 except at the leaf
    g = _closure_of_path(6)
    r = embed_tree(g, dim=2, tau=4.0)
    d = distortion(r["embeddings"], g, tau=4.0)
    assert d["tree_map"] == 1.0
    # source i (1..6) has i ancestors and 6 - i descendants; AP(i) = mean over ancestors
    # k = 1..i of k / (k + min(k, 6 - i))
    want = sum(sum(k / (k + min(k, 6 - i)) for k in range(1, i + 1)) / i for i in range(1, 7)) / 6
    assert d["closure_map"] == pytest.approx(want, abs=1e-12)
    assert d["closure_sampled_sources"] is None
