"""Nested-shadow embeddings: a transitive closure placed so that ancestors rank first.

:func:`hypermc.embed.embed_tree` reproduces tree *distances*; on the reconstruction task
(rank a node's ancestors before every other node, :func:`hypermc.embed.evaluate`) its
closure MAP is low, because a node's children and siblings sit as close to it as its
ancestors. :func:`embed_closure` places the spanning tree for that ranking instead.

Geometry (Poincare half-space, points ``(x, y)``, ``x`` in ``R^m``, ``m = dim - 1``, height
``y > 0``). Every node ``v`` gets a *shadow*, the disk ``D_v = B(x_v, R_v)`` of ``R^m``, and the
height ``y_v = R_v^2``. Seen from a source ``u``,

.. math::

    \\cosh d(u, w) = 1 + \\frac{|x_u - x_w|^2 + (y_u - y_w)^2}{2 y_u y_w},

which increases with ``g_u(w) = (|x_u - x_w|^2 + (y_u - y_w)^2) / y_w``. The children of a
node ``p`` get pairwise disjoint shadows inside ``B(x_p, alpha R_p)`` that avoid the point
``x_p``. Then, for every node ``u``:

* an ancestor ``a`` has ``|x_u - x_a| <= alpha R_a`` and ``y_u < y_a <= R_root^2``, so
  ``g_u(a) <= alpha^2 + R_root^2 < 1``;
* any other node ``w`` (a descendant, a sibling, a cousin, ...) has ``x_u`` outside ``D_w``,
  so ``g_u(w) >= |x_u - x_w|^2 / y_w > 1``.

So every ancestor is strictly closer than every non-ancestor: the closure MAP of a tree is
exactly 1 and its mean rank 1, at any size and depth. In a DAG a node keeps one parent
(:func:`hypermc.embed.construct.spanning_tree`: the one with the most ancestors); ancestors
that it reaches only through its other parents are not placed and rank where they fall.

Child slots (in units of ``alpha R_p`` around ``x_p``; the shadow radius is ``0.95`` of the
slot's half-spacing ``rho``, so every inequality above is strict):

* ``k <= 2`` children: ``+-e_1 / 2`` (``rho = 1/2``);
* ``k <= 2m``: ``+-t e_i``, ``t = 1 / (1 + 1/sqrt 2)``, ``rho = t / sqrt 2``;
* ``k <= 2^m``: the cube's corners ``tau (+-1, ..., +-1)``, ``tau = rho = 1 / (sqrt m + 1)``;
* more: a ``q^m`` grid of spacing ``2 rho``, ``rho = 1 / ((q - 1) sqrt m + 1)``, cells
  nearest the centre first, cells whose shadow would contain ``x_p`` left out.

Precision: shadows shrink by ``0.95 alpha rho`` per level, and the coordinates (all within
``|x| <= R_root``) must resolve the smallest shadow ``R_min`` to ``2^-10``: that is
:func:`closure_bits_needed`, ``log2(R_root / R_min) + 10`` bits. In 10-D (nine horizontal
coordinates, a corner design for up to 512 children) WordNet nouns need 46 bits: float64
suffices. In 2-D a node with ``k`` children shrinks its shadow ``~k``-fold, and nouns need
more than 53 bits (MC components, ``nc="auto"``). The ball and Lorentz images need about
twice the bits (:func:`closure_bits_needed`). Heights are ``R^2``; products of two heights
must stay normal floats, which bounds ``R_min`` (:func:`closure_bits_needed` raises past
it).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._progress import progress_bar
from ..mcf import MCTensor
from .construct import _as_graph, _precision, resolve_nc, sibling_rank, spanning_tree

__all__ = ["embed_closure", "closure_bits_needed", "DEFAULT_ALPHA"]

#: Default fraction of a parent's shadow that holds its children's shadows.
DEFAULT_ALPHA = 0.8
#: Shadow radius of the root (of the virtual root of a forest); ``y_root = 1/16``.
_ROOT_RADIUS = 0.25
#: Largest ``alpha``: ``alpha^2 + R_root^2`` must stay below 1 with room to spare.
_MAX_ALPHA = 0.95
#: A child's shadow radius as a fraction of its slot's half-spacing (strict inequalities).
_SLACK = 0.95
#: Bits beyond ``log2(R_root / R_min)`` that resolve the smallest shadow to ``2^-10``.
_GUARD_BITS = 10
#: Largest grid (cells) the slot design enumerates.
_MAX_GRID = 50_000_000


def _design(k: int, m: int) -> tuple[torch.Tensor, float]:
    """``(offsets (>= k, m), rho)``: slot centres in units of ``alpha R_p``, half-spacing."""
    if k <= 2:
        v = torch.zeros(2, m, dtype=torch.float64)
        v[0, 0], v[1, 0] = 0.5, -0.5
        return v, 0.5
    if k <= 2 * m:
        t = 1.0 / (1.0 + 1.0 / math.sqrt(2.0))
        v = torch.zeros(2 * m, m, dtype=torch.float64)
        ar = torch.arange(m)
        v[2 * ar, ar], v[2 * ar + 1, ar] = t, -t
        return v, t / math.sqrt(2.0)
    if k <= 2 ** min(m, 62):
        tau = 1.0 / (math.sqrt(m) + 1.0)
        bits = torch.zeros(k, m, dtype=torch.int64)  # corner j: the binary digits of j, then -1s
        low = min(m, 62)
        bits[:, :low] = (torch.arange(k)[:, None] >> torch.arange(low)) & 1
        return (bits.to(torch.float64) * 2 - 1) * tau, tau
    q = max(3, math.floor(k ** (1.0 / m)))  # q^m < k cells cannot hold k: start at or below the smallest q that can
    while True:
        rho = 1.0 / ((q - 1) * math.sqrt(m) + 1.0)
        if q**m > _MAX_GRID:
            raise ValueError(f"graph: a node has {k} children, too many for a {m + 1}-D construction; use a larger dim")
        axis = (torch.arange(q, dtype=torch.float64) * 2 - (q - 1)) * rho
        grid = torch.cartesian_prod(*([axis] * m)).reshape(-1, m)
        norm = grid.norm(dim=1)
        grid = grid[norm > _SLACK * rho]
        if grid.shape[0] >= k:
            return grid[torch.argsort(grid.norm(dim=1), stable=True)[:k]], rho
        q += 1


def _layout(parent: torch.Tensor, m: int, alpha: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per node: slot offset (units of ``alpha R_p``) and ``log2 R``; plus the depth (virtual root 0)."""
    n = parent.numel()
    par = torch.where(parent < 0, torch.full_like(parent, n), parent)  # roots hang off a virtual node n
    par = torch.cat([par, torch.tensor([-1])])
    kids = torch.bincount(par[:n], minlength=n + 1)
    rank = sibling_rank(par)
    offset = torch.zeros(n + 1, m, dtype=torch.float64)
    log2r = torch.zeros(n + 1, dtype=torch.float64)
    for k in torch.unique(kids[par[:n]]).tolist():
        sel = torch.nonzero(kids[par[:n]] == k).flatten()
        v, rho = _design(int(k), m)
        offset[sel] = v[rank[sel]]
        log2r[sel] = math.log2(_SLACK * rho * alpha)  # relative to the parent
    depth = torch.full((n + 1,), -1, dtype=torch.int64)
    depth[n] = 0
    for _ in range(n + 1):  # levels top down: add the parent's log-radius
        todo = depth < 0
        if not bool(todo.any()):
            break
        ready = todo & (depth[par.clamp(min=0)] >= 0)
        depth[ready] = depth[par[ready]] + 1
        log2r[ready] = log2r[ready] + log2r[par[ready]]
    log2r = log2r + math.log2(_ROOT_RADIUS)
    single = int((parent < 0).sum()) == 1
    if single:  # one root: it is the virtual node's place (centre 0, radius R_root)
        root = int(torch.nonzero(parent < 0)[0])
        offset[root] = 0.0
        shift = log2r[root] - math.log2(_ROOT_RADIUS)
        sub = torch.ones(n + 1, dtype=torch.bool)
        sub[n] = False
        log2r[sub] = log2r[sub] - shift
        depth[sub] = depth[sub] - 1
        depth[n] = -1
    return offset, log2r, depth


def closure_bits_needed(log2_min_radius: float, dtype: torch.dtype = torch.float64, *, model: str = "halfspace") -> int:
    """Coordinate bits that resolve a smallest shadow of radius ``2^log2_min_radius``.

    In the half-space the horizontal coordinates (``|x| <= R_root``) must resolve
    ``R_min`` to ``2^-10``. The ball and Lorentz images of a point at height ``y = R^2``
    carry that height in ``1 - |b|^2 ~ y`` (ball) or in the cancellation of the
    Lorentzian product (``cosh d - 1 ~ R^2 / y^2`` out of coordinates ``~ 1/y``), so they
    need twice the exponent: ``2 log2(1 / R_min)`` plus the guard.

    Args:
        log2_min_radius: ``log2`` of the smallest shadow radius (``< log2 R_root = -2``).
        dtype: component dtype.
        model: the registered name of a model with a map to the ball (``"halfspace"``,
            ``"ball"``, ``"lorentz"``, :func:`hypermc.manifolds.registry.ball_models`).

    Returns:
        ``ceil(log2(R_root) - log2_min_radius) + 10`` (half-space) or
        ``ceil(-2 log2_min_radius) + 10`` (ball, Lorentz: the models whose
        ``boundary_cancellation`` is true).

    Raises:
        ValueError: heights ``R^2`` this small would leave the normal range of ``dtype``
            in products of two heights (the distance formula); ``model`` not such a name.

    Example:
        >>> closure_bits_needed(-37.05), closure_bits_needed(-150.0), closure_bits_needed(-37.05, model="ball")
        (46, 158, 85)
    """
    from ..manifolds.registry import ball_models

    models = ball_models()
    if model not in models:
        raise ValueError(f"model: expected one of {', '.join(map(repr, models))}, got {model!r}")
    return _closure_bits(log2_min_radius, dtype, models[model].boundary_cancellation)


def _closure_bits(log2_min_radius: float, dtype: torch.dtype, cancellation: bool) -> int:
    """:func:`closure_bits_needed` for a model whose coordinates hold a point near the
    boundary by a cancellation (``cancellation``) or by a small height."""
    p = _precision(dtype)
    floor = (math.log2(torch.finfo(dtype).tiny) + p) / 4
    if not log2_min_radius >= floor:
        raise ValueError(
            f"the smallest shadow radius 2^{log2_min_radius:.1f} makes products of heights "
            f"2^{4 * log2_min_radius:.0f} leave the normal range of {dtype} (radius >= 2^{floor:.1f} "
            f"needed); use a larger dim (more room per level) or float64"
        )
    if cancellation:
        return math.ceil(-2 * log2_min_radius) + _GUARD_BITS
    return math.ceil(math.log2(_ROOT_RADIUS) - log2_min_radius) + _GUARD_BITS


def embed_closure(
    graph: Any,
    manifold: Any = None,
    *,
    dim: int = 10,
    nc: int | str = "auto",
    dtype: torch.dtype = torch.float64,
    alpha: float = DEFAULT_ALPHA,
    progress: bool = False,
) -> dict:
    """Place ``graph``'s nodes so that every node's (spanning-tree) ancestors are its nearest nodes.

    The construction and its guarantee are in the module docstring. It runs in the
    half-space and is converted to the ball / Lorentz model by
    :mod:`hypermc.manifolds.convert` (an isometry up to the curvature's scale, so the
    ranking is the same in every model and at every curvature).

    Args:
        graph: :class:`hypermc.data.Graph` of ``(child, parent)`` edges (a transitive
            closure or a tree), or a ``networkx.DiGraph`` with edges child -> parent.
        manifold: ``PoincareHalfspace`` (default), ``PoincareBall``, ``Lorentz`` or any
            model with a map to the ball (``converts_to_ball``, :mod:`hypermc.manifolds.registry`).
        dim: half-space / ball dimension (>= 2); there are ``dim - 1`` horizontal axes.
        nc: components, or ``"auto"`` for the fewest that hold :func:`closure_bits_needed`.
        dtype: component dtype (float64 or float32).
        alpha: fraction of a parent's shadow that holds its children (``0 < alpha <= 0.95``);
            smaller values widen the ranking margin and cost bits.
        progress: show a tqdm bar over the tree levels (on stderr).

    Returns:
        dict with ``embeddings`` (MCTensor ``(N, manifold.point_size(dim))``: ``(N, dim)``,
        ``(N, dim + 1)`` for Lorentz),
        ``nc``, ``bits_needed``, ``depth``, ``parent``, ``tree_edges``, ``alpha`` and
        ``log2_min_radius``.

    Raises:
        ValueError: bad arguments, or an explicit ``nc`` too small (the message names the
            ``nc`` needed), or a hierarchy too deep for the dtype's range at this ``dim``.
        TypeError: ``graph`` / ``manifold`` / ``dtype`` of the wrong type.

    Example:
        >>> from hypermc.data import Graph
        >>> from hypermc.embed import evaluate
        >>> from hypermc.manifolds import PoincareHalfspace
        >>> pairs = [("b", "a"), ("c", "a"), ("d", "b"), ("d", "a"), ("e", "b"), ("e", "a")]
        >>> g = Graph.from_pairs(pairs)  # the closure of a -> {b -> {d, e}, c}
        >>> r = embed_closure(g, dim=3)
        >>> r["nc"], r["bits_needed"], r["depth"]
        (1, 13, 2)
        >>> m = evaluate(PoincareHalfspace(), r["embeddings"], g.edges)
        >>> m["map"], m["mean_rank"]
        (1.0, 1.0)
    """
    from ..manifolds import PoincareHalfspace
    from ..manifolds.registry import check_ball_model

    manifold = check_ball_model(PoincareHalfspace() if manifold is None else manifold)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim: expected an int >= 2, got {dim!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= _MAX_ALPHA:
        raise ValueError(f"alpha: expected a float in (0, {_MAX_ALPHA}], got {alpha!r}")
    _precision(dtype)  # TypeError for a dtype other than float32 / float64, before any work
    graph = _as_graph(graph)
    n = graph.num_nodes
    if n == 0:
        raise ValueError("graph: expected at least one node, got an empty graph")
    m = dim - 1
    parent, _ = spanning_tree(graph)
    offset, log2r, depth = _layout(parent, m, float(alpha))
    log2_min = float(log2r[:n].min())
    bits = _closure_bits(log2_min, dtype, manifold.boundary_cancellation)
    nc = resolve_nc(
        nc,
        bits,
        dtype,
        what=f"the smallest shadow (radius 2^{log2_min:.1f})",
        why=f"{manifold.name} coordinates",
        fix="use a larger dim",
    )

    radius = torch.exp2(log2r)
    par = torch.where(parent < 0, torch.full_like(parent, n), parent)
    par = torch.cat([par, torch.tensor([n])])
    comps = torch.zeros(n + 1, m, nc, dtype=dtype)
    max_depth = int(depth.max())
    first = int(depth[depth >= 0].min())
    with progress_bar(progress, max_depth - first, unit="level", desc="construct") as bar:
        for level in range(first + 1, max_depth + 1):
            kids = torch.nonzero(depth == level).flatten()
            step = offset[kids] * (float(alpha) * radius[par[kids]])[:, None]
            comps[kids] = (MCTensor(comps[par[kids]]) + step.to(dtype)).components
            bar.update(1)
    heights = torch.zeros(n, 1, nc, dtype=dtype)
    heights[:, 0, 0] = (radius[:n] * radius[:n]).to(dtype)
    emb = manifold.from_halfspace(MCTensor(torch.cat([comps[:n], heights], dim=1)))
    kids = torch.nonzero(parent >= 0).flatten()
    return {
        "embeddings": emb,
        "nc": nc,
        "bits_needed": bits,
        "depth": int(depth[:n].max()) - int(depth[:n].min()),  # a forest's roots sit at level 1
        "parent": parent,
        "tree_edges": torch.stack([kids, parent[kids]], dim=1),
        "alpha": float(alpha),
        "log2_min_radius": log2_min,
    }
