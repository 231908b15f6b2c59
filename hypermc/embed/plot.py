"""Pictures of 2-D hierarchy embeddings and of training curves (PNG, matplotlib).

* :func:`plot_embedding` -- two panels of a 2-D hyperbolic embedding with the edges of
  the hierarchy (its transitive reduction, :func:`hierarchy_edges`) and a few labels:

  1. the Poincaré disk **radius-compressed**: node ``i`` is drawn in its direction
     ``b_i / |b_i|`` in the Poincaré ball at radius ``MAX_RADIUS * d_i / max_j d_j``,
     where ``d_i`` is its hyperbolic distance from the origin (``manifold.dist0``, in MC
     arithmetic). Equal hyperbolic distances give equal radii, so the levels of a tree
     show as rings even where the ball coordinates are ``1 - 1e-12`` apart (which the
     plain ball picture collapses onto the boundary circle);
  2. the Poincaré half-space with the height on a log scale (its hyperbolic
     coordinate: ``log`` height is the distance along a vertical geodesic).

* :func:`plot_curve` -- MAP, mean rank and (when present) the loss against the epoch.

Both build a :class:`matplotlib.figure.Figure` directly (no ``pyplot``, no global
state, no change of the user's backend), write it with the Agg renderer and return it.
This module imports matplotlib; ``import hypermc.embed`` does not import it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from ..data import Graph
from ..manifolds.registry import check_ball_model
from ..mcf import MCTensor, arith
from .construct import spanning_tree
from .distance import components_of

__all__ = ["plot_embedding", "plot_curve", "plot_losses", "hierarchy_edges", "compressed_radii", "MAX_RADIUS", "MAX_LABELS"]

#: Radius of the farthest node in the compressed disk: inside the unit circle, so the
#: outermost level is not drawn on top of the boundary.
MAX_RADIUS = 0.95
#: Labels chosen by ``labels=None``: the nodes with the largest subtrees.
MAX_LABELS = 10
#: Resolution of the written PNG files.
DPI = 130


def hierarchy_edges(graph: Graph) -> torch.Tensor:
    """The ``(child, parent)`` edges of the transitive reduction of ``graph``.

    For a transitive closure (e.g. :func:`hypermc.data.load_mammals`) these are the
    parent -> child edges of the hierarchy; a node with two direct parents keeps both
    (mammals: 1,180 edges for 1,180 nodes, one more than a spanning tree).

    Args:
        graph: a :class:`hypermc.data.Graph` (acyclic, edges ``(child, parent)``).

    Returns:
        ``(E, 2)`` int64 tensor of node ids, sorted.

    Raises:
        TypeError: ``graph`` is not a Graph.
        ValueError: ``graph`` has a cycle.

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure
        >>> hierarchy_edges(g).tolist()  # d -> a is implied by d -> b -> a
        [[1, 0], [2, 0], [3, 1]]
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a hypermc.data.Graph, got {type(graph).__name__}")
    g = nx.DiGraph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from(map(tuple, graph.edges.tolist()))
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError("graph: has a cycle; a hierarchy (acyclic edges child -> parent) is expected")
    edges = sorted(nx.transitive_reduction(g).edges)
    return torch.tensor(edges, dtype=torch.int64).reshape(-1, 2)


def compressed_radii(manifold: Any, embeddings: torch.Tensor) -> torch.Tensor:
    """Radii of the compressed disk: ``MAX_RADIUS * d / max(d)``, ``d = manifold.dist0(x)``.

    Args:
        manifold: a :class:`PoincareBall`, :class:`PoincareHalfspace` or :class:`Lorentz`.
        embeddings: ``(N, n)`` points of ``manifold`` (MCTensor or plain Tensor).

    Returns:
        float64 tensor ``(N,)`` in ``[0, MAX_RADIUS]``, increasing with the hyperbolic
        distance from the origin (all zeros when every point is the origin).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> x = torch.tensor([[0.0, 0.0], [0.5, 0.0], [0.0, -0.9]], dtype=torch.float64)
        >>> compressed_radii(PoincareBall(), x)  # the farthest point gets MAX_RADIUS = 0.95
        tensor([0.0000, 0.3545, 0.9500], dtype=torch.float64)
    """
    return _compress(_dist0(manifold, embeddings))


def _dist0(manifold: Any, embeddings: torch.Tensor) -> torch.Tensor:
    d = manifold.dist0(embeddings)
    return (d.approx() if isinstance(d, MCTensor) else d).detach().to("cpu", torch.float64)


def _compress(d: torch.Tensor) -> torch.Tensor:
    top = float(d.max()) if d.numel() else 0.0
    return d * (MAX_RADIUS / top) if top > 0 else torch.zeros_like(d)


def plot_embedding(
    manifold: Any,
    embeddings: torch.Tensor,
    graph: Graph,
    path: str | os.PathLike[str],
    *,
    labels: Iterable[str] | None = None,
    order: bool = False,
    title: str | None = None,
) -> Figure:
    """Draw a 2-D hyperbolic embedding with its hierarchy edges; write it to ``path``.

    Left: the radius-compressed Poincaré disk (module docstring), with grey rings at
    round hyperbolic distances from the origin. Right: the half-space, height on a log
    scale, ``x`` on a symmetric log scale (linear up to the power of ten below the median
    ``|x|``, so the crowd near the axis and the few far-out points both show). Nodes are coloured by
    their depth in the hierarchy (:func:`hypermc.embed.spanning_tree`); the edges are
    :func:`hierarchy_edges`. Models are converted with :mod:`hypermc.manifolds.convert`
    in the embeddings' arithmetic (MC for an MCTensor).

    ``order=True`` draws positions by order instead of by coordinate: node ``i`` at the
    angle ``2 pi (k_i + 1/2) / N`` in the disk, ``k_i`` its rank in angular order around
    the origin of the ball, and at horizontal position ``j_i``, its rank in ``x``, in the
    half-space. Both orders are exact (sorted in the embeddings' arithmetic). Use it for
    :func:`~hypermc.embed.embed_tree` constructions: the subtrees of a node at
    hyperbolic radius ``r`` span angles ``~ e^-r`` around the origin, so drawn by
    coordinate everything below the first levels lies on a few rays.

    Args:
        manifold: a :class:`PoincareBall`, :class:`PoincareHalfspace`, :class:`Lorentz` or
            any model with a map to the ball (``converts_to_ball``,
            :mod:`hypermc.manifolds.registry`), any curvature, holding ``embeddings``.
        embeddings: ``(N, manifold.point_size(2))`` points (``(N, 2)``; ``(N, 3)`` for Lorentz), row ``i`` = node
            ``graph.names[i]``; MCTensor or plain Tensor.
        graph: the hierarchy (:class:`hypermc.data.Graph`, e.g. a transitive closure).
        path: the PNG file to write (name ending in ``.png``).
        labels: node names to label; ``None`` (default): the root and the other nodes
            with the largest subtrees, :data:`MAX_LABELS` in all; ``()``: none.
        order: draw by angular / ``x`` order instead of by coordinate (see above).
        title: figure title.

    Returns:
        the :class:`matplotlib.figure.Figure`: axes 0 the disk, 1 the half-space, 2 the
        depth colour bar. Axes 0 and 1 hold the edges (a ``LineCollection`` labelled
        ``"edges"``, segment ``k`` = edge ``k`` of :func:`hierarchy_edges`) under the
        nodes (a scatter labelled ``"nodes"``, point ``i`` = node ``i``).

    Raises:
        TypeError: ``manifold`` has no map to the ball, ``embeddings`` is not a
            Tensor, ``graph`` is not a Graph, ``order`` is not a bool.
        ValueError: ``embeddings`` is not ``(graph.num_nodes, 2)`` (``(N, 3)`` Lorentz)
            or holds points off the manifold, ``path`` does not end in ``.png``, a label
            is not a node name, or ``graph`` has a cycle.

    Example:
        >>> import os, tempfile
        >>> from hypermc.data import Graph
        >>> from hypermc.embed import embed_tree
        >>> from hypermc.manifolds import PoincareBall
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])
        >>> r = embed_tree(g, PoincareBall(), tau=5.0)
        >>> path = os.path.join(tempfile.mkdtemp(), "tree.png")
        >>> fig = plot_embedding(PoincareBall(), r["embeddings"], g, path, labels=["a", "d"], order=True)
        >>> os.path.getsize(path) > 0, len(fig.axes[0].collections[0].get_segments())
        (True, 3)
    """
    if not isinstance(order, bool):
        raise TypeError(f"order: expected a bool, got {type(order).__name__}")
    ball, half, n = _models(manifold, embeddings)
    _check_graph(graph, n)
    path = _check_png(path)
    label_ids = _label_ids(graph, labels)
    d = _dist0(manifold, embeddings)
    radius = _compress(d)
    if order:
        angle = (2 * math.pi / max(n, 1)) * (_ranks(_pseudo_angle(ball)).to(torch.float64) + 0.5)
        direction = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1)
        flat = torch.stack([_ranks(half[:, 0]).to(torch.float64), _plain(half[:, 1])], dim=1)
    else:
        b = _plain(ball)
        norm = b.norm(dim=1, keepdim=True)
        direction = torch.where(norm > 0, b / norm.clamp(min=torch.finfo(torch.float64).tiny), torch.zeros_like(b))
        flat = _plain(half)
    disk = direction * radius.unsqueeze(1)
    edges = hierarchy_edges(graph)
    _, depth = spanning_tree(graph)

    fig = Figure(figsize=(14, 7), layout="constrained")
    left, right = fig.subplots(1, 2)
    scatter = _draw(left, disk, edges, depth)
    _rings(left, float(d.max()) if n else 0.0)
    left.set_aspect("equal")
    left.set_xlim(-1.02, 1.02)
    left.set_ylim(-1.02, 1.02)
    left.set_xticks([])
    left.set_yticks([])
    how = "angle by angular order" if order else "direction as in the ball"
    left.set_title(f"Poincaré disk: radius ∝ hyperbolic distance from the origin, {how}", fontsize=10)
    _draw(right, flat, edges, depth)
    right.set_yscale("log")
    if order:
        right.set_xlabel("rank of x (order along the boundary)")
    else:
        median = float(flat[:, 0].abs().median()) if n else 0.0
        linear = 10.0 ** math.floor(math.log10(median)) if median > 0 else 1.0
        right.set_xscale("symlog", linthresh=linear)
        right.set_xlabel(f"x (symmetric log scale, linear within |x| < {linear:g})")
    right.set_ylabel("height (log scale)")
    right.set_title("Poincaré half-space", fontsize=10)
    right.autoscale_view()
    for i in label_ids:
        short = graph.names[i].split(".")[0]
        for ax, xy in ((left, disk[i]), (right, flat[i])):
            ax.annotate(
                short,
                xy.tolist(),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize=8,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75},
            )
    fig.colorbar(scatter, ax=[left, right], label="depth in the hierarchy", shrink=0.8)
    if title is not None:
        fig.suptitle(title)
    fig.savefig(path, dpi=DPI)
    return fig


def plot_curve(history: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], *, title: str | None = None) -> Figure:
    """Draw MAP, mean rank and (when present) the loss against the epoch; write ``path``.

    Args:
        history: dicts with an ``epoch`` and any of ``map``, ``mean_rank``, ``loss``
            (e.g. :attr:`TrainResult.history` followed by evaluations ``{"epoch": e,
            "map": ..., "mean_rank": ...}``); each quantity is drawn over the entries
            that hold it.
        path: the PNG file to write (name ending in ``.png``).
        title: figure title.

    Returns:
        the :class:`matplotlib.figure.Figure`: axes MAP, mean rank (log scale) and, when
        an entry has ``loss``, the loss (log scale), each with one line.

    Raises:
        TypeError: ``history`` is not a sequence of mappings.
        ValueError: an entry lacks ``epoch``, no entry has both ``map`` and
            ``mean_rank``, or ``path`` does not end in ``.png``.

    Example:
        >>> import os, tempfile
        >>> h = [{"epoch": 1, "loss": 2.0}, {"epoch": 2, "loss": 1.0, "map": 0.5, "mean_rank": 3.0},
        ...      {"epoch": 4, "map": 0.9, "mean_rank": 1.2}]
        >>> path = os.path.join(tempfile.mkdtemp(), "curve.png")
        >>> [ax.get_ylabel() for ax in plot_curve(h, path).axes]
        ['MAP', 'mean rank', 'loss']
    """
    if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Sequence):
        raise TypeError(f"history: expected a sequence of dicts, got {type(history).__name__}")
    for k, entry in enumerate(history):
        if not isinstance(entry, Mapping):
            raise TypeError(f"history[{k}]: expected a dict, got {type(entry).__name__}")
        if "epoch" not in entry:
            raise ValueError(f"history[{k}]: has no 'epoch' (keys {sorted(entry)}); every entry needs one")
    if not any("map" in e and "mean_rank" in e for e in history):
        raise ValueError(
            f"history: no entry has 'map' and 'mean_rank' ({len(history)} entries); add evaluations, "
            f"e.g. python -m hypermc train --eval-every N"
        )
    path = _check_png(path)
    keys = [("map", "MAP", "linear"), ("mean_rank", "mean rank", "log")]
    if any("loss" in e for e in history):
        keys.append(("loss", "loss", "log"))
    fig = Figure(figsize=(5 * len(keys), 4), layout="constrained")
    for ax, (key, name, scale) in zip(fig.subplots(1, len(keys), squeeze=False)[0], keys):
        points = [(e["epoch"], e[key]) for e in history if key in e]
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o" if len(points) < 50 else None, markersize=3)
        ax.set_yscale(scale)
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    if title is not None:
        fig.suptitle(title)
    fig.savefig(path, dpi=DPI)
    return fig


def plot_losses(
    runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], path: str | os.PathLike[str], *, title: str | None = None
) -> Figure:
    """Draw the loss of several runs against the epoch (log scale, one line each); write ``path``.

    Args:
        runs: ``(label, history)`` pairs; ``history`` holds dicts with ``epoch`` and
            ``loss`` (e.g. :attr:`TrainResult.history`).
        path: the PNG file to write (name ending in ``.png``).
        title: figure title.

    Returns:
        the :class:`matplotlib.figure.Figure` (one axes, one line per run, labels in its legend).

    Raises:
        ValueError: no runs, a run without entries, an entry without ``epoch`` or
            ``loss``, or ``path`` not ending in ``.png``.

    Example:
        >>> import os, tempfile
        >>> runs = [("plain", [{"epoch": 1, "loss": 2.0}, {"epoch": 2, "loss": 1.0}]), ("nc=2", [{"epoch": 1, "loss": 2.5}])]
        >>> fig = plot_losses(runs, os.path.join(tempfile.mkdtemp(), "losses.png"))
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['plain', 'nc=2']
    """
    if not runs:
        raise ValueError("runs: expected at least one (label, history) pair, got none")
    for label, history in runs:
        if not history:
            raise ValueError(f"runs: run {label!r} has an empty history")
        for k, entry in enumerate(history):
            if "epoch" not in entry or "loss" not in entry:
                raise ValueError(f"runs: entry {k} of run {label!r} lacks 'epoch' or 'loss' (keys {sorted(entry)})")
    path = _check_png(path)
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    for label, history in runs:
        ax.plot([e["epoch"] for e in history], [e["loss"] for e in history], label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if title is not None:
        fig.suptitle(title)
    fig.savefig(path, dpi=DPI)
    return fig


def _models(manifold: Any, embeddings: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Ball and half-space coordinates (converted in the embeddings' arithmetic by the model's
    ``to_ball`` / ``to_halfspace``)."""
    check_ball_model(manifold)
    if not isinstance(embeddings, torch.Tensor):
        raise TypeError(f"embeddings: expected a Tensor or MCTensor, got {type(embeddings).__name__}")
    width = manifold.point_size(2)
    if embeddings.dim() != 2 or embeddings.shape[1] != width:
        raise ValueError(
            f"embeddings: expected shape (N, {width}) (2-D {type(manifold).__name__} points), got "
            f"{tuple(embeddings.shape)}; plot_embedding draws 2-D embeddings only"
        )
    ok, reason = manifold.check_point(embeddings)
    if not ok:
        raise ValueError(f"embeddings: not points of {manifold!r}: {reason}")
    ball, half = manifold.to_ball(embeddings), manifold.to_halfspace(embeddings)
    return ball.detach().to("cpu"), half.detach().to("cpu"), int(embeddings.shape[0])


def _plain(x: torch.Tensor) -> torch.Tensor:
    """Nearest float64 of an MCTensor or plain Tensor."""
    return (x.approx() if isinstance(x, MCTensor) else x).to(torch.float64)


def _pseudo_angle(ball: torch.Tensor) -> torch.Tensor:
    """Components ``(N, nc)`` of a key increasing with the angle ``atan2(y, x)`` in ``[0, 2 pi)``.

    The key is ``q + f`` with ``q`` the quadrant (0..3) and ``f`` in ``[0, 1]`` the
    "diamond angle" within it (``|y| / (|x| + |y|)`` in quadrants 0 and 2, ``|x| / (|x|
    + |y|)`` in 1 and 3), formed with the MC kernels; the origin gets key 0.
    """
    c = components_of(ball)  # (N, 2, nc)
    x, y = c[:, 0], c[:, 1]
    ax, ay = arith.abs(x), arith.abs(y)
    right, up = ~torch.signbit(x[:, 0]), ~torch.signbit(y[:, 0])
    quadrant = torch.where(up, torch.where(right, 0, 1), torch.where(right, 3, 2)).to(c.dtype)
    num = torch.where((quadrant % 2 == 0).unsqueeze(1), ay, ax)
    s = arith.add(ax, ay)
    origin = s[:, :1] == 0
    f = arith.div(num, torch.where(origin, torch.ones_like(s[:, :1]), s))
    return arith.add_float(torch.where(origin, torch.zeros_like(f), f), quadrant)


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """Rank of each of ``N`` values (MCTensor, plain Tensor, or components ``(N, nc)``), exactly.

    ``np.lexsort`` of the components is exact except where leading components differ by
    one ulp and the tails overlap (renormalised tails reach ``ulp``, not ``ulp / 2``);
    odd-even transposition passes with the exact :func:`hypermc.mcf.arith.compare` then
    finish the sort (none or a few passes).
    """
    c = components_of(values) if values.dim() == 1 else values
    n = c.shape[0]
    order = torch.from_numpy(np.lexsort([c[:, k].numpy() for k in reversed(range(c.shape[1]))]))
    swapped = True
    while swapped:
        swapped = False
        for start in (0, 1):
            i = torch.arange(start, n - 1, 2)
            a, b = order[i], order[i + 1]
            bad = arith.compare(c[a], c[b]) > 0
            if bool(bad.any()):
                order[i[bad]], order[i[bad] + 1] = b[bad], a[bad]
                swapped = True
    ranks = torch.empty(n, dtype=torch.int64)
    ranks[order] = torch.arange(n)
    return ranks


def _check_graph(graph: Any, n: int) -> None:
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a hypermc.data.Graph, got {type(graph).__name__}")
    if graph.num_nodes != n:
        raise ValueError(f"graph: has {graph.num_nodes} nodes but embeddings has {n} rows; expected one row per node")


def _check_png(path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if not text.lower().endswith(".png"):
        raise ValueError(f"path: expected a file name ending in .png, got {text!r}")
    return text


def _label_ids(graph: Graph, labels: Iterable[str] | None) -> list[int]:
    if labels is None:
        parent, depth = spanning_tree(graph)
        size = torch.ones(graph.num_nodes, dtype=torch.int64)
        for level in range(int(depth.max()) if graph.num_nodes else 0, 0, -1):
            kids = torch.nonzero(depth == level).flatten()
            size.index_add_(0, parent[kids], size[kids])
        order = sorted(range(graph.num_nodes), key=lambda i: (-int(size[i]), i))
        return order[:MAX_LABELS]
    if isinstance(labels, str):
        raise TypeError(f"labels: expected an iterable of node names, got the str {labels!r}; wrap it in a list")
    labels = list(labels)
    index = {name: i for i, name in enumerate(graph.names)}
    missing = [name for name in labels if name not in index]
    if missing:
        raise ValueError(f"labels: {missing[:5]} are not nodes of graph (e.g. {graph.names[:3]}); pass node names as in graph.names")
    return [index[name] for name in labels]


def _draw(ax: Any, xy: torch.Tensor, edges: torch.Tensor, depth: torch.Tensor) -> Any:
    """Edges (grey segments, labelled ``edges``) under the nodes (coloured by depth, ``nodes``)."""
    segments = list(torch.stack([xy[edges[:, 0]], xy[edges[:, 1]]], dim=1).numpy())
    ax.add_collection(LineCollection(segments, colors="0.55", linewidths=0.4, alpha=0.6, zorder=1, label="edges"), autolim=True)
    return ax.scatter(
        xy[:, 0].numpy(),
        xy[:, 1].numpy(),
        c=depth.numpy(),
        cmap="viridis",
        s=7,
        zorder=2,
        vmin=0,
        vmax=max(int(depth.max()) if depth.numel() else 0, 1),
        label="nodes",
    )


def _rings(ax: Any, d_max: float) -> None:
    """Grey circles at round hyperbolic distances from the origin, with their values."""
    ax.add_patch(_circle(1.0, "0.3", 0.8))
    if not d_max > 0:
        return
    step = _nice_step(d_max / 3)
    for k in range(1, int(d_max / step) + 1):
        r = MAX_RADIUS * k * step / d_max
        ax.add_patch(_circle(r, "0.75", 0.5))
        ax.annotate(f"d={k * step:g}", (r * math.cos(math.pi / 4), r * math.sin(math.pi / 4)), fontsize=7, color="0.45")


def _circle(r: float, color: str, width: float) -> Any:
    return Circle((0.0, 0.0), r, fill=False, color=color, linewidth=width, zorder=0)


def _nice_step(x: float) -> float:
    """The largest of 1, 2, 5 times a power of ten that is <= ``x`` (3 to 7 rings for ``x = d_max / 3``)."""
    power = 10.0 ** math.floor(math.log10(x))
    return next(m * power for m in (5, 2, 1) if m * power <= x)
