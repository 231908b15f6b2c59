"""Tests of the nested-shadow closure construction (hypermc.embed.nested).

The guarantee (every spanning-tree ancestor of a node strictly nearer than every other
node) is checked exactly: the stored coordinates are summed as fractions and the distance
key ``g_u(w) = (|x_u - x_w|^2 + (y_u - y_w)^2) / y_w`` (``cosh d`` increases with it) is
compared without rounding.
"""

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermc.data import Graph
from hypermc.embed import embed_closure, evaluate, load_checkpoint
from hypermc.embed.construct import save_construction
from hypermc.embed.nested import _MAX_ALPHA, _ROOT_RADIUS, closure_bits_needed
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace


def _closure(parent: list[int]) -> Graph:
    """The transitive closure of the forest ``parent`` (``-1``: a root) as (child, ancestor) edges."""
    names = tuple(f"n{i:04d}" for i in range(len(parent)))
    edges = []
    for v in range(len(parent)):
        a = parent[v]
        while a >= 0:
            edges.append([v, a])
            a = parent[a]
    return Graph(names, torch.tensor(sorted(edges), dtype=torch.int64).reshape(-1, 2))


def _ancestors(edges: torch.Tensor, n: int) -> list[set[int]]:
    anc: list[set[int]] = [set() for _ in range(n)]
    for c, a in edges.tolist():
        anc[c].add(a)
    return anc


def _exact_points(emb) -> list[tuple[list[Fraction], Fraction]]:
    comps = emb.components
    pts = []
    for row in comps.tolist():
        coords = [sum((Fraction(c) for c in col), Fraction(0)) for col in row]
        pts.append((coords[:-1], coords[-1]))
    return pts


def _key(pu, pw) -> Fraction:
    (xu, yu), (xw, yw) = pu, pw
    return (sum(((a - b) ** 2 for a, b in zip(xu, xw)), Fraction(0)) + (yu - yw) ** 2) / yw


def _check_exact(emb, tree_anc: list[set[int]], alpha: float) -> None:
    """Every tree ancestor's key < alpha^2 + R_root^2 (up to the rounding of the stored
    offsets) < 1 < every other node's key, exactly."""
    pts = _exact_points(emb)
    bound = (Fraction(alpha) ** 2 + Fraction(_ROOT_RADIUS) ** 2) * (1 + Fraction(1, 2**40))
    assert bound < 1
    for u, pu in enumerate(pts):
        for w, pw in enumerate(pts):
            if w == u:
                continue
            g = _key(pu, pw)
            if w in tree_anc[u]:
                assert g <= bound, (u, w, float(g))
            else:
                assert g > 1, (u, w, float(g))


def _tree_ancestors(parent: torch.Tensor) -> list[set[int]]:
    out = []
    for v in range(parent.numel()):
        s, a = set(), int(parent[v])
        while a >= 0:
            s.add(a)
            a = int(parent[a])
        out.append(s)
    return out


@st.composite
def _forests(draw):
    n = draw(st.integers(1, 28))
    roots = draw(st.integers(1, min(3, n)))
    parent = [-1] * roots + [draw(st.integers(0, i - 1)) for i in range(roots, n)]
    return parent


@settings(max_examples=30, deadline=None)
@given(parent=_forests(), dim=st.sampled_from([2, 3, 5, 10]), alpha=st.sampled_from([0.3, 0.8, _MAX_ALPHA]))
def test_tree_ancestors_are_strictly_nearest(parent, dim, alpha):
    g = _closure(parent)
    r = embed_closure(g, dim=dim, alpha=alpha)
    assert r["parent"].tolist() == parent
    _check_exact(r["embeddings"], _tree_ancestors(r["parent"]), alpha)
    if g.num_edges:
        m = evaluate(PoincareHalfspace(), r["embeddings"], g.edges)
        assert (m["map"], m["mean_rank"]) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("dim", "k"),
    [(10, 1), (10, 2), (10, 3), (10, 18), (10, 19), (10, 512), (10, 513), (10, 700), (2, 3), (2, 40), (3, 100), (4, 17), (100, 300)],
)
def test_every_slot_design_keeps_children_apart(dim, k):
    """A node with k children: pair, axis, cube-corner and grid designs (by k and dim)."""
    parent = [-1] + [0] * k + [1, 1, k, k]  # grandchildren under the first and last child
    g = _closure(parent)
    r = embed_closure(g, dim=dim)
    m = evaluate(PoincareHalfspace(), r["embeddings"], g.edges)
    assert (m["map"], m["mean_rank"]) == (1.0, 1.0)
    if k <= 40:
        _check_exact(r["embeddings"], _tree_ancestors(r["parent"]), 0.8)
    else:  # the ordering, in float64 distances, against all nodes (the exact check is O(n^2) fractions)
        d = PoincareHalfspace().dist(r["embeddings"][:, None], r["embeddings"][None, :]).approx()
        for u, anc in [(1, {0}), (k + 1, {1, 0}), (k + 4, {k, 0})]:
            others = [w for w in range(len(parent)) if w != u and w not in anc]
            assert float(d[u, sorted(anc)].max()) < float(d[u, others].min())


def test_dag_keeps_the_parent_with_most_ancestors():
    # a -> b -> d -> e and a -> c -> x -> d: d keeps x (ancestors c, a), not b (ancestor a)
    pairs = [("b", "a"), ("c", "a"), ("x", "c"), ("x", "a"), ("d", "b"), ("d", "a"), ("d", "x"), ("d", "c"), ("e", "d")]
    pairs += [("e", "b"), ("e", "a"), ("e", "x"), ("e", "c")]
    g = Graph.from_pairs(pairs)
    r = embed_closure(g, dim=4)
    ids = {name: i for i, name in enumerate(g.names)}
    assert int(r["parent"][ids["d"]]) == ids["x"]  # x has 2 ancestors (c, a), b has 1
    tree_anc = _tree_ancestors(r["parent"])
    _check_exact(r["embeddings"], tree_anc, 0.8)
    # b is an ancestor of d in the graph but not in the tree: it is not placed above d
    assert ids["b"] in _ancestors(g.edges, g.num_nodes)[ids["d"]] and ids["b"] not in tree_anc[ids["d"]]
    m = evaluate(PoincareHalfspace(), r["embeddings"], g.edges)
    assert m["map"] < 1.0


def _caterpillar(depth: int) -> list[int]:
    """A spine of ``depth`` nodes, each with one extra leaf: every level halves the room."""
    parent = [-1]
    for i in range(1, depth + 1):
        spine = len(parent) - 2 if i > 1 else 0
        parent += [spine, spine]
    return parent


def test_deep_two_d_closure_needs_components():
    g = _closure(_caterpillar(60))
    with pytest.raises(ValueError, match=r"nc=1 gives 53 bits but the smallest shadow .* bits \(halfspace coordinates\); pass nc=2"):
        embed_closure(g, dim=2, nc=1)
    r = embed_closure(g, dim=2)
    assert r["nc"] == 2 and 53 < r["bits_needed"] <= 106
    m = evaluate(PoincareHalfspace(), r["embeddings"], g.edges)
    assert (m["map"], m["mean_rank"]) == (1.0, 1.0)
    _check_exact(r["embeddings"], _tree_ancestors(r["parent"]), 0.8)
    rounded = evaluate(PoincareHalfspace(), r["embeddings"].approx(), g.edges)  # the same points in float64
    assert rounded["map"] < 0.99 and rounded["mean_rank"] > 1.5


@pytest.mark.parametrize("manifold", [PoincareBall(), Lorentz()])
def test_deep_closure_in_the_ball_and_lorentz_models(manifold):
    """Their coordinates carry the height R^2 in a cancellation: twice the half-space's exponent."""
    g = _closure(_caterpillar(60))
    half = embed_closure(g, dim=2)
    with pytest.raises(ValueError, match=r"nc=2 gives 106 bits but the smallest shadow .* pass nc=4"):
        embed_closure(g, manifold, dim=2, nc=2)
    r = embed_closure(g, manifold, dim=2)
    model = manifold.name
    assert r["log2_min_radius"] == half["log2_min_radius"] < -80
    assert r["bits_needed"] == closure_bits_needed(r["log2_min_radius"], model=model) > 2 * 80
    assert r["nc"] == 4
    m = evaluate(manifold, r["embeddings"], g.edges)
    assert (m["map"], m["mean_rank"]) == (1.0, 1.0)


def test_range_is_refused_not_underflowed():
    with pytest.raises(ValueError, match=r"smallest shadow radius 2\^-40.0 .* normal range of torch.float32"):
        closure_bits_needed(-40.0, torch.float32)
    with pytest.raises(ValueError, match=r"normal range of torch.float32 .* use a larger dim .* or float64"):
        embed_closure(_closure(_caterpillar(60)), dim=2, dtype=torch.float32)
    assert closure_bits_needed(-40.0) == 48
    with pytest.raises(ValueError, match=r"model: expected one of 'ball', 'halfspace', 'lorentz', got 'euclidean'"):
        closure_bits_needed(-40.0, model="euclidean")


@pytest.mark.parametrize("manifold", [PoincareBall(), Lorentz(), PoincareHalfspace(curvature=-4.0)])
def test_other_models_rank_the_same(manifold):
    parent = [-1, 0, 0, 1, 1, 2, 3, 3, 6, 6, 0]
    g = _closure(parent)
    ref = embed_closure(g, dim=3, nc=2)
    r = embed_closure(g, manifold, dim=3, nc=2)
    m = evaluate(manifold, r["embeddings"], g.edges)
    assert (m["map"], m["mean_rank"]) == (1.0, 1.0)
    scale = (-float(manifold.curvature)) ** -0.5
    d_ref = PoincareHalfspace().dist(ref["embeddings"][:, None], ref["embeddings"][None, :]).approx() * scale
    d = manifold.dist(r["embeddings"][:, None], r["embeddings"][None, :]).approx()
    torch.testing.assert_close(d, d_ref, rtol=1e-12, atol=1e-12)


def test_checkpoint_round_trip(tmp_path):
    g = _closure([-1, 0, 0, 1, 2, 2])
    r = embed_closure(g, dim=3)
    path = save_construction(tmp_path / "c.pt", r, g, seconds=0.5)
    ck = load_checkpoint(path)
    assert ck["config"]["construction"] == "closure" and ck["config"]["alpha"] == 0.8 and ck["config"]["tau"] is None
    assert ck["config"]["manifold"] == "halfspace" and ck["epoch"] == 0
    assert torch.equal(ck["embeddings"].components, r["embeddings"].components)
    m = evaluate(ck["manifold"], ck["embeddings"], g.edges)
    assert (m["map"], m["mean_rank"]) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 1}, ValueError, r"dim: expected an int >= 2, got 1"),
        ({"alpha": 0.0}, ValueError, r"alpha: expected a float in \(0, 0.95\], got 0.0"),
        ({"alpha": 0.97}, ValueError, r"alpha: expected a float in \(0, 0.95\], got 0.97"),
        ({"nc": 0}, ValueError, r"nc: expected an int in 1..18 \(torch.float64\) or 'auto', got 0"),
        ({"manifold": "ball"}, TypeError, r"manifold: expected PoincareBall, PoincareHalfspace or Lorentz \(a model .*\), got str"),
        ({"dtype": torch.float16}, TypeError, r"dtype: expected torch.float64 or torch.float32, got torch.float16"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    g = _closure([-1, 0, 0])
    with pytest.raises(error, match=match):
        embed_closure(g, **kwargs)


def test_bad_graph():
    with pytest.raises(TypeError, match=r"graph: expected a hypermc.data.Graph or a networkx.DiGraph"):
        embed_closure([("b", "a")])
