"""Pictures: hypermc.embed.plot (PNG files, what the figures hold, argument checks)."""

from __future__ import annotations

import doctest

import matplotlib
import mpmath
import numpy as np
import pytest
import torch

import hypermc.embed.plot as plot
from hypermc.data import Graph
from hypermc.embed import embed_tree, spanning_tree
from hypermc.embed.plot import hierarchy_edges, plot_curve, plot_embedding, plot_losses
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace, convert
from hypermc.mcf import MCTensor, from_mpmath
from tests.embed.helpers import tree_closure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000  # a drawn figure, not an empty canvas


def _artist(ax, label):
    found = [c for c in ax.collections if c.get_label() == label]
    assert len(found) == 1
    return found[0]


def _chain_at_radii(exponents):
    """Ball points at norm 1 - 10^-k (MC, exact enough) on a chain graph n00 <- n01 <- ..."""
    names = tuple(f"n{i:02d}" for i in range(len(exponents)))
    edges = torch.tensor([[i + 1, i] for i in range(len(exponents) - 1)], dtype=torch.int64)
    with mpmath.workprec(300):
        rows = []
        for i, k in enumerate(exponents):
            r = 1 - mpmath.mpf(10) ** -k
            rows.append([r * mpmath.cos(i), r * mpmath.sin(i)])
        x = from_mpmath(np.array(rows, dtype=object), nc=3)
    return Graph(names, edges), x


def test_tree_picture_file_edges_and_radii(tmp_path):
    g = tree_closure(3, 3)
    r = embed_tree(g, PoincareBall(), tau=4.0)
    path = tmp_path / "tree.png"
    fig = plot_embedding(PoincareBall(), r["embeddings"], g, path, labels=["r", "r0"])
    _assert_png(path)
    disk, half = fig.axes[0], fig.axes[1]
    assert half.get_yscale() == "log"
    for ax in (disk, half):
        assert len(_artist(ax, "edges").get_segments()) == g.num_nodes - 1 == len(hierarchy_edges(g))
        assert len(_artist(ax, "nodes").get_offsets()) == g.num_nodes
    xy = torch.from_numpy(np.asarray(_artist(disk, "nodes").get_offsets(), dtype=np.float64))
    radius = xy.norm(dim=1)
    d = PoincareBall().dist0(r["embeddings"]).approx()
    assert float(radius.max()) < 1
    assert torch.allclose(radius, plot.MAX_RADIUS * d / d.max(), rtol=1e-12, atol=1e-15)
    assert torch.allclose(radius, plot.compressed_radii(PoincareBall(), r["embeddings"]), rtol=1e-12, atol=1e-15)
    # the levels show: every child is drawn farther out than its parent, the root at the centre
    parent, _ = spanning_tree(g)
    kids = torch.nonzero(parent >= 0).flatten()
    assert bool((radius[kids] > radius[parent[kids]] + 0.1).all())
    assert float(radius[parent < 0]) == 0
    texts = [t.get_text() for t in disk.texts]
    assert "r" in texts and "r0" in texts


def test_points_near_the_boundary_do_not_collapse(tmp_path):
    exponents = [1, 2, 4, 8, 10, 12, 14]
    g, x = _chain_at_radii(exponents)
    assert float(x.approx().norm(dim=1).max()) < 1
    fig = plot_embedding(PoincareBall(), x, g, tmp_path / "edge.png", labels=())
    xy = np.asarray(_artist(fig.axes[0], "nodes").get_offsets(), dtype=np.float64)
    radius = np.hypot(xy[:, 0], xy[:, 1])
    assert np.all(radius < 1) and np.all(np.diff(radius) > 0.02)  # strictly increasing, well apart
    assert radius[-1] == pytest.approx(plot.MAX_RADIUS)
    # the radii follow d = 2 atanh(|x|) ~ k ln 10 + ln 2
    with mpmath.workprec(300):
        d = [float(2 * mpmath.atanh(1 - mpmath.mpf(10) ** -k)) for k in exponents]
    np.testing.assert_allclose(radius, plot.MAX_RADIUS * np.array(d) / max(d), rtol=1e-12)


@pytest.mark.parametrize("model", ["halfspace", "lorentz", "plain"])
def test_every_model_draws_the_same_disk(tmp_path, model):
    g = tree_closure(2, 3)
    ball = embed_tree(g, PoincareBall(), tau=3.0)["embeddings"]
    reference = plot_embedding(PoincareBall(), ball, g, tmp_path / "ball.png", labels=())
    if model == "halfspace":
        manifold, x = PoincareHalfspace(), convert.ball_to_halfspace(ball)
    elif model == "lorentz":
        manifold, x = Lorentz(), convert.ball_to_lorentz(ball)
    else:
        manifold, x = PoincareBall(), ball.approx()
        assert not isinstance(x, MCTensor) and x.dtype == torch.float64
    fig = plot_embedding(manifold, x, g, tmp_path / f"{model}.png", labels=())
    want = np.asarray(_artist(reference.axes[0], "nodes").get_offsets())
    got = np.asarray(_artist(fig.axes[0], "nodes").get_offsets())
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_order_layout_is_exact_where_float64_ties(tmp_path):
    """tau = 40: siblings at depth 3 are ~e^-120 apart in angle, far below float64's resolution."""
    tree = tree_closure(3, 2)
    perm = torch.randperm(tree.num_nodes, generator=torch.Generator().manual_seed(0)).tolist()
    new_name = {name: f"n{perm[i]:02d}" for i, name in enumerate(tree.names)}  # ids not in tree order
    g = Graph.from_pairs([(new_name[c], new_name[p]) for c, p in tree.pairs()])
    r = embed_tree(g, PoincareBall(), tau=40.0)
    lead = r["embeddings"].components[..., 0]
    assert len(torch.unique(torch.atan2(lead[:, 1], lead[:, 0]))) < g.num_nodes  # float64 ties
    fig = plot_embedding(PoincareBall(), r["embeddings"], g, tmp_path / "order.png", order=True)
    xy = np.asarray(_artist(fig.axes[0], "nodes").get_offsets(), dtype=np.float64)
    parent, _ = spanning_tree(g)
    others = [u for u in range(g.num_nodes) if parent[u] >= 0]  # the root is drawn at the centre
    angle = np.mod(np.arctan2(xy[others, 1], xy[others, 0]), 2 * np.pi)
    assert len(np.unique(np.round(angle, 9))) == len(others)
    rank = dict(zip(others, np.argsort(np.argsort(angle)).tolist()))
    # every subtree below the root is a contiguous run of the (circular) angular order
    for v in others:
        runs = sorted(rank[u] for u in others if _descends(u, v, parent))
        gaps = sum(1 for a, b in zip(runs, runs[1:] + [runs[0] + len(others)]) if b - a != 1)
        assert gaps <= 1, g.names[v]
    assert fig.axes[1].get_xlabel().startswith("rank of x")


def _descends(u, v, parent):
    while u >= 0:
        if u == v:
            return True
        u = int(parent[u])
    return False


def test_ranks_are_exact_across_overlapping_tails():
    ulp = 2.0**-52
    # 1 + 0.75 ulp and (1 + ulp) - 0.75 ulp: lexicographic order of the components is wrong
    comps = torch.tensor([[1 + ulp, -0.75 * ulp], [1.0, 0.75 * ulp], [1.0, 0.0], [1 + ulp, 0.0]], dtype=torch.float64)
    assert plot._ranks(comps).tolist() == [1, 2, 0, 3]


def test_curve_picture(tmp_path):
    history = [{"epoch": e, "loss": 1.0 / e} for e in range(1, 11)]
    evals = [{"epoch": e, "map": 0.1 * e, "mean_rank": 10.0 / e} for e in (2, 4, 10)]
    path = tmp_path / "curve.png"
    fig = plot_curve(history + evals, path, title="toy")
    _assert_png(path)
    assert [ax.get_ylabel() for ax in fig.axes] == ["MAP", "mean rank", "loss"]
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == [2, 4, 10]
    assert list(line.get_ydata()) == pytest.approx([0.2, 0.4, 1.0])
    assert len(fig.axes[2].get_lines()[0].get_xdata()) == 10
    assert fig.axes[1].get_yscale() == "log"
    fig = plot_curve(evals, tmp_path / "no_loss.png")
    assert [ax.get_ylabel() for ax in fig.axes] == ["MAP", "mean rank"]


def test_backend_is_left_alone(tmp_path):
    before = matplotlib.get_backend()
    g = tree_closure(1, 2)
    plot_embedding(PoincareBall(), embed_tree(g, tau=2.0)["embeddings"], g, tmp_path / "a.png")
    plot_curve([{"epoch": 1, "map": 1.0, "mean_rank": 1.0}], tmp_path / "b.png")
    assert matplotlib.get_backend() == before


def test_docstring_examples_run():
    result = doctest.testmod(plot, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0


def test_bad_arguments(tmp_path):
    g = tree_closure(1, 2)
    x = embed_tree(g, PoincareBall(), tau=2.0)["embeddings"]
    png = tmp_path / "x.png"
    with pytest.raises(ValueError, match=r"embeddings: expected shape \(N, 2\).*got \(3, 5\).*2-D embeddings only"):
        plot_embedding(PoincareBall(), PoincareBall().random(3, 5, nc=2), g, png)
    with pytest.raises(ValueError, match=r"embeddings: expected shape \(N, 3\)"):
        plot_embedding(Lorentz(), x, g, png)
    with pytest.raises(ValueError, match=r"path: expected a file name ending in \.png, got '.*x\.jpg'"):
        plot_embedding(PoincareBall(), x, g, tmp_path / "x.jpg")
    with pytest.raises(TypeError, match="path: expected a str or os.PathLike, got int"):
        plot_embedding(PoincareBall(), x, g, 3)
    with pytest.raises(TypeError, match=r"manifold: expected PoincareBall, PoincareHalfspace or Lorentz \(a model .*\), got Euclidean"):
        plot_embedding(Euclidean(), x, g, png)
    with pytest.raises(TypeError, match="embeddings: expected a Tensor or MCTensor, got list"):
        plot_embedding(PoincareBall(), [[0.0, 0.0]], g, png)
    with pytest.raises(TypeError, match="graph: expected a hypermc.data.Graph, got dict"):
        plot_embedding(PoincareBall(), x, {}, png)
    with pytest.raises(ValueError, match="graph: has 7 nodes but embeddings has 3 rows"):
        plot_embedding(PoincareBall(), x, tree_closure(2, 2), png)
    with pytest.raises(ValueError, match=r"labels: \['cat'\] are not nodes of graph"):
        plot_embedding(PoincareBall(), x, g, png, labels=["r", "cat"])
    with pytest.raises(TypeError, match="labels: expected an iterable of node names, got the str 'r'"):
        plot_embedding(PoincareBall(), x, g, png, labels="r")
    with pytest.raises(TypeError, match="order: expected a bool, got str"):
        plot_embedding(PoincareBall(), x, g, png, order="yes")
    with pytest.raises(ValueError, match="embeddings: not points of"):
        plot_embedding(PoincareBall(), torch.tensor([[2.0, 0.0], [0.0, 0.0], [0.1, 0.0]], dtype=torch.float64), g, png)
    cyclic = Graph(("a", "b"), torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="graph: has a cycle"):
        hierarchy_edges(cyclic)
    assert not png.exists()


def test_bad_curves(tmp_path):
    png = tmp_path / "c.png"
    with pytest.raises(ValueError, match="history: no entry has 'map' and 'mean_rank' \\(2 entries\\).*--eval-every"):
        plot_curve([{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}], png)
    with pytest.raises(ValueError, match=r"history\[1\]: has no 'epoch' \(keys \['map'\]\)"):
        plot_curve([{"epoch": 1, "map": 1.0, "mean_rank": 1.0}, {"map": 1.0}], png)
    with pytest.raises(TypeError, match=r"history: expected a sequence of dicts, got dict"):
        plot_curve({"epoch": 1}, png)
    with pytest.raises(TypeError, match=r"history\[0\]: expected a dict, got int"):
        plot_curve([1], png)
    with pytest.raises(ValueError, match="path: expected a file name ending in .png, got 'c.pdf'"):
        plot_curve([{"epoch": 1, "map": 1.0, "mean_rank": 1.0}], "c.pdf")


def test_loss_curves_of_several_runs(tmp_path):
    plain = [{"epoch": e, "loss": 1.0 / e} for e in range(1, 6)]
    runs = [("plain", plain), ("nc=2", [{"epoch": 1, "loss": 2.0}, {"epoch": 3, "loss": 0.5}])]
    path = tmp_path / "losses.png"
    fig = plot_losses(runs, path, title="toy")
    _assert_png(path)
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["plain", "nc=2"]
    assert list(lines[1].get_xdata()) == [1, 3] and list(lines[1].get_ydata()) == [2.0, 0.5]
    assert fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="runs: expected at least one"):
        plot_losses([], path)
    with pytest.raises(ValueError, match="runs: run 'x' has an empty history"):
        plot_losses([("x", [])], path)
    with pytest.raises(ValueError, match=r"runs: entry 0 of run 'x' lacks 'epoch' or 'loss' \(keys \['epoch'\]\)"):
        plot_losses([("x", [{"epoch": 1}])], path)
    with pytest.raises(ValueError, match="path: expected a file name ending in .png"):
        plot_losses(runs, tmp_path / "c.pdf")
