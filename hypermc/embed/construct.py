"""Combinatorial (Sarkar-style) tree embeddings in MC arithmetic.

Parent choice: for a DAG given as ``(child, parent)`` edges (e.g. a WordNet transitive
closure), each node keeps the out-neighbour with the most out-neighbours of its own (ties:
smallest id). In a transitive closure that neighbour is a direct parent of the transitive
reduction: an ancestor ``b`` strictly between the node and ``a`` would have more ancestors
than ``a``.

Placement (Poincare ball, curvature -1): the root sits at the origin; a node ``v`` at ``x_v``
whose parent, seen from ``v`` (after the Mobius map ``z -> (-x_v) (+) z`` that sends ``v``
to 0), lies in direction ``d``, puts its ``k`` children at ``x_v (+) t u_j`` with
``t = tanh(tau / 2)`` (so every tree edge has hyperbolic length ``tau``) and ``u_j`` the
directions ``1..k`` of a well-spread set of ``k + 1`` unit vectors whose direction 0 is
rotated (Householder reflection) onto ``d``. The direction ``d`` of a node is computed
when the node is placed: seen from ``x (+) w``, its parent ``x`` lies at
``-gyr[x, w] w`` (a rotation of ``-w``), which needs no more precision than the node
itself. Taking the Mobius difference of the two stored points instead cancels to
``~e^-2r`` and lost the direction past radius ~300. 2-D: equally spaced angles. dim > 2: a prefix
of a greedy farthest-point ordering of a scrambled-free Sobol point set on the sphere, so
every prefix is well spread (a deterministic low-coherence set, not random). One vectorised
pass per tree level.

Precision: a node at hyperbolic radius ``r`` has ``1 - |x|^2 = sech^2(r / 2) >= e^{-r}``,
so resolving it to ``p`` bits takes ``r log2(e) + p`` bits of the coordinates; ``r`` is at
most ``tau * depth``. :func:`bits_needed` returns that plus a guard of 8 bits, and
:func:`components_needed` divides by the component precision ``p``.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import torch

from .._progress import progress_bar
from ..mcf import MCTensor, mc
from .evaluate import evaluate

__all__ = [
    "spanning_tree",
    "sibling_rank",
    "resolve_nc",
    "max_components",
    "bits_needed",
    "components_needed",
    "tau_for_epsilon",
    "distortion_bound",
    "max_tau",
    "embed_tree",
    "fit_tau",
    "distortion",
    "save_construction",
]

_GUARD_BITS = 8
#: Relative margin below ``1 + epsilon`` that :func:`tau_for_epsilon` aims at (the float64
#: evaluation of the bound, the directions rounded to the component dtype (float32: ~6e-8 rad)
#: and the edges rounded to p bits).
_BOUND_MARGIN = 1e-5
#: Shortest edge :func:`tau_for_epsilon` returns (where any tau satisfies the bound).
_MIN_TAU = 1.0
#: Where :func:`tau_for_epsilon` stops searching (far beyond any radius limit).
_MAX_SEARCH_TAU = 1e4
#: Path length standing for "unbounded" in :func:`tau_for_epsilon` (the bound has converged).
_UNBOUNDED_PATH = 4096
#: Fraction of the exponent range a node's radius may use (see :func:`_radius_limit`).
_RADIUS_FRACTION = 0.84


def _precision(dtype: torch.dtype) -> int:
    if dtype not in (torch.float64, torch.float32):
        raise TypeError(f"dtype: expected torch.float64 or torch.float32, got {dtype}")
    return 53 if dtype == torch.float64 else 24


def max_components(dtype: torch.dtype = torch.float64) -> int:
    """Most components the MC kernels support for ``dtype`` (float64: 18, float32: 5).

    Division needs ``nc p < -emin`` (``hypermc.mcf.arith.div``'s precondition: float64
    19); the square root's scaling margin ``2^((nc + 1) p + 4)`` must be a finite float64
    (float64: 18; at 19 ``hypermc.mcf.arith.sqrt`` raises OverflowError).

    Example:
        >>> max_components(), max_components(torch.float32)
        (18, 5)
    """
    p = _precision(dtype)
    emin = -1022 if dtype == torch.float64 else -126
    return min((-emin - 1) // p, (1023 - 4) // p - 1)


def bits_needed(tau: float, depth: int, dtype: torch.dtype = torch.float64) -> int:
    """Bits of coordinate precision that keep ``p`` bits of ``1 - |x|^2`` at every node.

    Args:
        tau: hyperbolic edge length (> 0).
        depth: tree depth (edges on the longest root-to-leaf path, >= 0).
        dtype: component dtype (its precision ``p`` is the target).

    Returns:
        ``ceil(tau * depth * log2(e)) + p + 8``.

    Example:
        >>> bits_needed(5.0, 3)  # ceil(15 log2(e)) + 53 + 8
        83
    """
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau: expected a finite float > 0, got {tau!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth: expected an int >= 0, got {depth!r}")
    return math.ceil(tau * depth * math.log2(math.e)) + _precision(dtype) + _GUARD_BITS


def components_needed(tau: float, depth: int, dtype: torch.dtype = torch.float64) -> int:
    """Smallest ``nc`` whose ``nc * p`` bits cover :func:`bits_needed`.

    Example:
        >>> components_needed(5.0, 3), components_needed(5.0, 3, torch.float32)
        (2, 3)
    """
    return math.ceil(bits_needed(tau, depth, dtype) / _precision(dtype))


def max_tau(depth: int, nc: int | None = None, dtype: torch.dtype = torch.float64) -> float:
    """The largest ``tau`` that :func:`embed_tree` accepts for a tree of ``depth``.

    Two bounds: the radius ``tau * depth`` (at most 84% of the exponent range
    ``-log(tiny)``: 595.1 in float64, see ``_radius_limit``) and the precision (:func:`components_needed`
    ``<= nc``, and ``nc <= max_components(dtype)``). ``0.0`` when ``nc`` cannot hold any ``tau``
    (``nc = 1``: the ``p + 8`` bits of the rule exceed ``p`` even at radius 0).

    Args:
        depth: tree depth (>= 1).
        nc: component count, or ``None`` for :func:`max_components`.
        dtype: component dtype.

    Example:
        >>> round(max_tau(10), 2), round(max_tau(10, nc=2), 3), max_tau(3, nc=1)
        (59.51, 3.119, 0.0)
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth: expected an int >= 1, got {depth!r}")
    p = _precision(dtype)
    hi = _radius_limit(dtype) / depth
    nc = max_components(dtype) if nc is None else min(nc, max_components(dtype))
    # ceil(tau depth log2 e) + p + guard <= nc p  <=>  tau depth log2 e <= nc p - p - guard
    # (1 - 2^-40: so that the rounding of tau * depth * log2(e) cannot push the ceil over)
    hi = min(hi, (nc * p - p - _GUARD_BITS) / (depth * math.log2(math.e)) * (1 - 2.0**-40))
    return max(hi, 0.0)


def _radius_limit(dtype: torch.dtype) -> float:
    """Largest radius the construction accepts: 84% of the exponent range ``-log(tiny)``.

    float64: 595.1 (``1 - |x|^2 ~ e^-595``). Measured: a path (every distance exactly
    ``k tau``) is exact up to radius 600 and mammals 2-D follows its ``D_avg`` / ``D_wc``
    trend in ``tau`` up to radius 600; radius 640 would need 19 components, more than
    :func:`max_components`. float32: 73.3, where :func:`max_components` (5, 120 bits)
    already stops at radius ~61.
    """
    return _RADIUS_FRACTION * -math.log(torch.finfo(dtype).tiny)


def _as_graph(graph: Any) -> Any:
    """A :class:`hypermc.data.Graph` as is; a ``networkx.DiGraph`` (edges child -> parent,
    str node names) through :meth:`Graph.from_networkx` (ids follow sorted names)."""
    from ..data import Graph

    if isinstance(graph, Graph):
        return graph
    try:
        import networkx as nx
    except ImportError:  # pragma: no cover - networkx is a dependency
        nx = None
    if nx is not None and isinstance(graph, nx.DiGraph):
        return Graph.from_networkx(graph)
    raise TypeError(
        f"graph: expected a hypermc.data.Graph or a networkx.DiGraph (edges child -> parent), "
        f"got {type(graph).__name__}; build one with Graph.from_pairs or wordnet_closure"
    )


def spanning_tree(graph: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Parent of every node (``-1`` for roots) and its depth, by the rule in the module doc.

    Args:
        graph: a :class:`hypermc.data.Graph` (edges ``(child, parent)``, acyclic) or a
            ``networkx.DiGraph`` with edges child -> parent (ids: sorted node names).

    Returns:
        ``(parent, depth)``: int64 tensors of length ``graph.num_nodes``.

    Raises:
        ValueError: the graph has a cycle.

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure, root a
        >>> parent, depth = spanning_tree(g)  # d keeps b, the parent with more ancestors
        >>> parent.tolist(), depth.tolist()
        ([-1, 0, 0, 1], [0, 1, 1, 2])
    """
    graph = _as_graph(graph)
    n = graph.num_nodes
    edges = graph.edges
    out_deg = torch.bincount(edges[:, 0], minlength=n) if edges.numel() else torch.zeros(n, dtype=torch.int64)
    parent = torch.full((n,), -1, dtype=torch.int64)
    if edges.numel():
        c, p = edges[:, 0], edges[:, 1]
        key = out_deg[p] * (n + 1) + (n - p)  # more ancestors first, then smaller id
        best = torch.full((n,), -1, dtype=torch.int64).scatter_reduce(0, c, key, reduce="amax")
        win = key == best[c]
        parent[c[win]] = p[win]  # keys are unique per child, so one winner each
    depth = torch.full((n,), -1, dtype=torch.int64)
    depth[parent < 0] = 0
    for _ in range(n + 1):
        todo = depth < 0
        if not bool(todo.any()):
            break
        ready = todo & (depth[parent.clamp(min=0)] >= 0)
        if not bool(ready.any()):
            break
        depth[ready] = depth[parent[ready]] + 1
    if bool((depth < 0).any()):
        bad = int(torch.nonzero(depth < 0)[0])
        raise ValueError(f"graph: node {graph.names[bad]!r} is on a cycle; expected an acyclic graph")
    return parent, depth


def _directions(dim: int, count: int) -> torch.Tensor:
    """Greedy farthest-point ordering (first point e_1) of a Sobol set on S^{dim-1}."""
    pool_n = max(4096, 64 * count)
    eng = torch.quasirandom.SobolEngine(dim, scramble=False)
    u = eng.draw(pool_n + 1, dtype=torch.float64)[1:].clamp(1e-9, 1 - 1e-9)
    g = torch.special.ndtri(u)
    gn = g.norm(dim=1, keepdim=True)
    keep = gn.squeeze(1) > 1e-6  # the Sobol centre (1/2, ..., 1/2) maps to 0
    pool = g[keep] / gn[keep]
    out = torch.zeros(count, dim, dtype=torch.float64)
    out[0, 0] = 1.0
    best = pool @ out[0]
    for i in range(1, count):
        j = int(torch.argmin(best))
        out[i] = pool[j]
        best = torch.maximum(best, pool @ pool[j])
    return out


def resolve_nc(nc: Any, bits: int, dtype: torch.dtype, *, what: str, why: str, fix: str) -> int:
    """The components a construction uses: ``nc``, or for ``"auto"`` the fewest that hold ``bits``.

    Args:
        nc: an int or ``"auto"``.
        bits: the bits the construction needs.
        dtype: the component dtype.
        what / why / fix: message parts: what needs the bits, why, and what to change
            when no ``nc`` suffices.

    Raises:
        ValueError: ``nc`` is not an int in ``1..max_components(dtype)`` nor ``"auto"``; it
            is too small (the message names the ``nc`` needed); or no ``nc`` suffices.

    Example:
        >>> resolve_nc("auto", 80, torch.float64, what="x", why="y", fix="z")
        2
        >>> resolve_nc(1, 80, torch.float64, what="the tree", why="it is deep", fix="")
        Traceback (most recent call last):
        ...
        ValueError: nc=1 gives 53 bits but the tree needs 80 bits (it is deep); pass nc=2 or nc='auto'
    """
    p = _precision(dtype)
    need = max(1, math.ceil(bits / p))
    top = max_components(dtype)
    if need > top:
        raise ValueError(
            f"{what} needs {bits} bits (nc={need}), beyond the nc={top} that {dtype} MC arithmetic "
            f"supports (nc * {p} bits below the exponent range); {fix}"
        )
    if nc == "auto":
        return need
    if isinstance(nc, bool) or not isinstance(nc, int) or nc < 1 or nc > top:
        raise ValueError(f"nc: expected an int in 1..{top} ({dtype}) or 'auto', got {nc!r}")
    if nc < need:
        raise ValueError(f"nc={nc} gives {nc * p} bits but {what} needs {bits} bits ({why}); pass nc={need} or nc='auto'")
    return nc


def sibling_rank(parent: torch.Tensor) -> torch.Tensor:
    """Rank of every node among the children of its parent, in id order (roots: among roots).

    Example:
        >>> sibling_rank(torch.tensor([-1, 0, 0, 1, 0])).tolist()
        [0, 0, 1, 0, 2]
    """
    n = parent.numel()
    order = torch.argsort(parent * (n + 1) + torch.arange(n), stable=True)
    rank = torch.zeros(n, dtype=torch.int64)
    sorted_par = parent[order]
    first = torch.ones(n, dtype=torch.bool)
    first[1:] = sorted_par[1:] != sorted_par[:-1]
    start = torch.cummax(torch.where(first, torch.arange(n), torch.zeros(n, dtype=torch.int64)), 0).values
    rank[order] = torch.arange(n) - start
    return rank


def _turn_angle(tau: float, theta: float) -> float:
    """Largest angle at ``y`` between ``[y, x]`` and ``[y, z]`` where ``|xy| = tau`` and the
    angle at ``x`` between ``[x, y]`` and ``[x, z]`` is at least ``theta``, any ``|xz|``.

    ``atan2(sin theta, sinh tau - cosh tau cos theta)`` (the cotangent four-part formula
    with ``coth |xz| >= 1``), scaled by ``2 e^-tau`` so that no term overflows.
    """
    if theta <= 0.0:
        return math.pi
    e2 = math.exp(-2.0 * tau)
    return math.atan2(2.0 * math.exp(-tau) * math.sin(theta), 2.0 * math.sin(theta / 2) ** 2 - e2 * (1.0 + math.cos(theta)))


def _step_gain(tau: float, theta: float) -> float:
    """``log(cosh tau - sinh tau cos theta) = tau + log(sin^2(theta/2) + e^-2tau cos^2(theta/2))``."""
    if theta <= 0.0:
        return -tau
    return tau + math.log(math.sin(theta / 2) ** 2 + math.exp(-2.0 * tau) * math.cos(theta / 2) ** 2)


def distortion_bound(tau: float, min_angle: float, path_edges: int) -> float:
    """Proven upper bound on the worst-case distortion of :func:`embed_tree` with edge ``tau``.

    The tree is placed with every edge of hyperbolic length ``tau`` and, at every node, any
    two of its edges (to the parent and to the children) leave at an angle ``>= alpha =
    min_angle``. Take a tree path ``x_0, x_1, ..., x_k`` (``k <= path_edges``), write
    ``d_i = d(x_0, x_i)``, ``theta_i`` for the angle at ``x_{i-1}`` between ``[x_{i-1}, x_0]``
    and ``[x_{i-1}, x_i]`` and ``beta_i`` for the angle at ``x_i`` between ``[x_i, x_0]`` and
    ``[x_i, x_{i-1}]`` (``beta_1 = 0``). Curvature -1 throughout.

    1. *Angles.* Directions at a point form a sphere on which the angle is a metric, so
       ``theta_i >= alpha - beta_{i-1}`` (the path's turn at ``x_{i-1}`` is ``>= alpha``).
    2. *Deviation.* In the triangle ``x_0 x_{i-1} x_i`` (sides ``tau`` and ``d_{i-1}``
       around ``theta_i``) the cotangent four-part formula gives
       ``cot beta_i = (sinh tau coth d_{i-1} - cosh tau cos theta_i) / sin theta_i``;
       with ``coth >= 1`` and the right side increasing in ``theta_i``,
       ``beta_i <= B(tau, alpha - beta_{i-1})``, ``B(tau, t) = atan2(sin t, sinh tau -
       cosh tau cos t)``. So ``beta_i <= b_i`` with ``b_1 = 0``, ``b_i = B(tau, alpha -
       b_{i-1})``. (When ``tau`` is too small, ``b_i`` grows to ``alpha`` and a path that
       always turns the same way curls up: no bound.)
    3. *Growth.* ``d_i - d_{i-1}`` does not increase when ``x_0`` slides away along the
       geodesic from ``x_{i-1}`` (triangle inequality), so it is at least its limit, the
       law of cosines' ``g(tau, theta_i) = log(cosh tau - sinh tau cos theta_i)``,
       increasing in ``theta_i``: ``d_k >= L_k = tau + sum_{i=2..k} g(tau, alpha - b_{i-1})``.
    4. *Distortion.* ``d_k <= k tau`` (triangle inequality) with equality on an edge, so
       ``D_wc <= tau / min_{k <= path_edges} (L_k / k)``.

    Every ``b_i`` decreases and ``g / tau`` increases with ``tau`` (``g`` is convex in
    ``tau`` with ``g(0) = 0``), so the bound is non-increasing in ``tau``.

    Args:
        tau: edge length (> 0).
        min_angle: the smallest angle between two edges at a node, in ``(0, pi]``.
        path_edges: the longest tree path (edges); ``2 * depth`` bounds it.

    Returns:
        The bound (``>= 1``), ``inf`` when the path lengths are not bounded below.

    Example:
        >>> import math
        >>> distortion_bound(5.0, math.pi, 40)  # a path: a geodesic
        1.0
        >>> round(distortion_bound(5.0, 2 * math.pi / 3, 40), 4), distortion_bound(1.0, 2 * math.pi / 3, 40)
        (1.0604, inf)
    """
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau: expected a finite float > 0, got {tau!r}")
    if not (isinstance(min_angle, (int, float)) and 0 < min_angle <= math.pi):
        raise ValueError(f"min_angle: expected a float in (0, pi], got {min_angle!r}")
    if isinstance(path_edges, bool) or not isinstance(path_edges, int) or path_edges < 0:
        raise ValueError(f"path_edges: expected an int >= 0, got {path_edges!r}")
    tau = float(tau)
    length = tau
    worst = tau  # min over k of L_k / k, k = 1 so far
    b = 0.0
    for k in range(2, path_edges + 1):
        theta = max(min_angle - b, 0.0)
        gain = _step_gain(tau, theta)
        length += gain
        worst = min(worst, length / k)
        if worst <= 0.0:
            return math.inf
        b_next = _turn_angle(tau, theta)
        if b_next == b:  # converged: every later step gains ``gain``, L_k / k is monotone in k
            worst = min(worst, (length + (path_edges - k) * gain) / path_edges)
            break
        b = b_next
    return tau / worst if worst > 0.0 else math.inf


def tau_for_epsilon(epsilon: float, min_angle: float, path_edges: int | None = None) -> float:
    """The smallest ``tau >= 1`` whose :func:`distortion_bound` is ``<= 1 + epsilon``.

    A bisection on ``tau`` (the bound is non-increasing in ``tau``, see
    :func:`distortion_bound`) to a relative width of ``2^-30``, keeping the upper end, so
    the returned ``tau`` satisfies the bound as evaluated. The target is
    ``(1 + epsilon)(1 - 1e-5)``: the margin covers the float64 evaluation of the bound
    and the construction's rounding of directions (float32: ``~6e-8`` rad) and edge lengths
    (``p`` bits). The floor 1 is for trees where any ``tau`` satisfies the bound (paths):
    a larger ``tau`` only lowers the bound.

    Args:
        epsilon: target worst-case distortion ``1 + epsilon`` (> 0).
        min_angle: the smallest angle between two edges at a node.
        path_edges: the longest tree path in edges (:func:`embed_tree` passes
            ``2 * depth``); ``None``: paths of any length (the limit of the bound, reached
            within a few hundred edges).

    Raises:
        ValueError: no ``tau`` below ``1e4`` satisfies the bound (``min_angle`` tiny).

    Example:
        >>> import math
        >>> round(tau_for_epsilon(1.0, math.pi / 2), 4)  # four edges per node in 2-D
        2.1222
        >>> round(tau_for_epsilon(1.0, 2 * math.pi / 3), 4)  # three edges per node: tau > 1
        1.2895
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon: expected a finite float > 0, got {epsilon!r}")
    edges = _UNBOUNDED_PATH if path_edges is None else path_edges
    target = (1.0 + epsilon) * (1.0 - _BOUND_MARGIN)
    lo, hi = 0.0, _MIN_TAU
    while distortion_bound(hi, min_angle, edges) > target:
        lo, hi = hi, 2.0 * hi
        if hi > _MAX_SEARCH_TAU:
            raise ValueError(
                f"epsilon={epsilon!r}: no edge length tau <= {_MAX_SEARCH_TAU:g} bounds the distortion by 1 + epsilon "
                f"at min_angle={min_angle!r}; use a larger epsilon or more dimensions"
            )
    if lo == 0.0:
        return hi  # the floor already satisfies the bound
    while hi - lo > hi * 2.0**-30:
        mid = 0.5 * (lo + hi)
        if distortion_bound(mid, min_angle, edges) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _mobius_add(x: MCTensor, y: MCTensor) -> MCTensor:
    xy = (x * y).sum(-1, keepdim=True)
    x2 = (x * x).sum(-1, keepdim=True)
    y2 = (y * y).sum(-1, keepdim=True)
    num = (1 + 2 * xy + y2) * x + (1 - x2) * y
    den = 1 + 2 * xy + x2 * y2
    return num / den


def _gyration(a: MCTensor, b: MCTensor, z: MCTensor) -> MCTensor:
    """``gyr[a, b] z`` of Mobius addition (curvature -1; Ungar's closed form).

    ``gyr[a, b] z = z + 2 (A a + B b) / D`` with ``A = -(a.z)|b|^2 + b.z + 2 (a.b)(b.z)``,
    ``B = -(b.z)|a|^2 - a.z``, ``D = 1 + 2 a.b + |a|^2 |b|^2``. Law used:
    ``(-(a (+) b)) (+) a = -gyr[a, b] b``.
    """
    ab = (a * b).sum(-1, keepdim=True)
    az = (a * z).sum(-1, keepdim=True)
    bz = (b * z).sum(-1, keepdim=True)
    a2 = (a * a).sum(-1, keepdim=True)
    b2 = (b * b).sum(-1, keepdim=True)
    big_a = -az * b2 + bz + 2 * ab * bz
    big_b = -bz * a2 - az
    den = 1 + 2 * ab + a2 * b2
    return z + 2 * (big_a * a + big_b * b) / den


def embed_tree(
    graph: Any,
    manifold: Any = None,
    *,
    dim: int = 2,
    nc: int | str = "auto",
    dtype: torch.dtype = torch.float64,
    epsilon: float | None = None,
    tau: float | None = None,
    progress: bool = False,
) -> dict:
    """Embed the spanning tree of ``graph`` with every edge of hyperbolic length ``tau``.

    Args:
        graph: :class:`hypermc.data.Graph` (a DAG, e.g. a transitive closure), or a
            ``networkx.DiGraph`` with edges child -> parent (converted by
            ``Graph.from_networkx``: node ids follow sorted names).
        manifold: ``PoincareBall`` (default), ``PoincareHalfspace``, ``Lorentz`` or any
            model with a map to the ball (``converts_to_ball``, :mod:`hypermc.manifolds.registry`);
            the construction runs in the ball and is converted by the model's ``from_ball``.
        dim: ball / halfspace dimension (>= 2).
        nc: components, or ``"auto"`` for :func:`components_needed`.
        dtype: component dtype.
        epsilon: guaranteed worst-case distortion: ``tau`` is :func:`tau_for_epsilon` of the
            tree's smallest angle between edges and its longest path (``2 * depth``), so
            ``D_wc <= distortion_bound <= 1 + epsilon`` (proof: :func:`distortion_bound`).
        tau: the edge length (exactly one of ``epsilon`` / ``tau``).
        progress: show a tqdm bar over the tree levels (on stderr).

    Returns:
        dict with ``embeddings`` (MCTensor ``(N, manifold.point_size(dim))``: ``(N, dim)``,
        or ``(N, dim + 1)`` for Lorentz),
        ``tau``, ``nc``, ``bits_needed``, ``depth``, ``parent``, ``tree_edges``,
        ``min_angle`` and ``distortion_bound`` (the proven bound on ``D_wc`` at this
        ``tau``; ``inf`` when a small explicit ``tau`` bounds nothing).

    Raises:
        ValueError: bad arguments, several roots, an explicit ``nc`` too small (the
            message names the ``nc`` needed), or an ``epsilon`` whose ``tau`` the radius
            limit / ``nc`` cannot hold (the message names the smallest ``epsilon`` that fits).

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure, root a
        >>> r = embed_tree(g, tau=5.0)
        >>> r["nc"], r["bits_needed"], r["depth"], r["embeddings"].shape
        (2, 76, 2, torch.Size([4, 2]))
        >>> from hypermc.manifolds import PoincareBall
        >>> round(PoincareBall().dist(r["embeddings"][0], r["embeddings"][3]).approx().item(), 9)  # root to d: 2 tau
        10.0
    """
    from ..manifolds.registry import check_ball_model

    manifold = check_ball_model(_manifold_or_ball(manifold))
    if float(manifold.curvature) != -1.0:
        raise ValueError(f"manifold: the construction is for curvature -1, got {float(manifold.curvature)!r}")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim: expected an int >= 2, got {dim!r}")
    if (epsilon is None) == (tau is None):
        raise ValueError(f"pass exactly one of epsilon / tau; got epsilon={epsilon!r}, tau={tau!r}")
    _precision(dtype)  # TypeError for a dtype other than float32 / float64, before any work
    graph = _as_graph(graph)
    parent, depth = spanning_tree(graph)
    n = graph.num_nodes
    roots = torch.nonzero(parent < 0).flatten()
    if roots.numel() != 1:
        raise ValueError(f"graph: expected exactly one root (a node without parents), found {roots.numel()}")
    nchild = torch.bincount(parent[parent >= 0], minlength=n)
    slots = nchild + (parent >= 0).long()  # directions needed per node (children + parent)
    max_slots = int(slots.max()) if n > 1 else 1
    table: torch.Tensor | None = None
    if dim == 2:
        min_angle = 2 * math.pi / max(max_slots, 2)
    else:
        table = _directions(dim, max(max_slots, 2))
        cos = (table @ table.T).fill_diagonal_(-1.0)
        min_angle = float(torch.arccos(cos.max().clamp(-1, 1)))
    max_depth = int(depth.max())
    path_edges = 2 * max_depth  # the longest tree path goes up to a common ancestor and down
    if tau is None:
        assert epsilon is not None  # exactly one of them, checked above
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"epsilon: expected a finite float > 0, got {epsilon!r}")
        tau = tau_for_epsilon(epsilon, min_angle, path_edges)
        _check_epsilon_fits(epsilon, tau, min_angle, max_depth, nc, dtype)
    elif not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau: expected a finite float > 0, got {tau!r}")
    tau = float(tau)
    bits = bits_needed(tau, max_depth, dtype)
    radius = tau * max_depth
    lim = _radius_limit(dtype)
    if radius > lim:
        raise ValueError(
            f"tau={tau:.6g} at tree depth {max_depth} puts nodes at hyperbolic radius {radius:.4g}, "
            f"where 1 - |x|^2 ~ e^-{radius:.4g}; the construction is exact up to radius {lim:.4g} in "
            f"{dtype} (84% of its exponent range); use a smaller tau / larger epsilon"
        )
    nc = resolve_nc(
        nc,
        bits,
        dtype,
        what=f"tau={tau:.6g} at tree depth {max_depth}",
        why=f"nodes reach 1 - |x|^2 ~ e^-{tau * max_depth:.4g}",
        fix="use a smaller tau / larger epsilon",
    )

    comps = torch.zeros(n, dim, nc, dtype=dtype)
    # back[v]: the direction of v's parent seen from v (in v's frame z -> (-x_v) (+) z)
    back = torch.zeros(n, dim, dtype=torch.float64)
    back[:, 0] = 1.0
    e = math.exp(-tau)
    rank = sibling_rank(parent)
    with progress_bar(progress, max_depth, unit="level", desc="construct") as bar:
        for level in range(1, max_depth + 1):
            # Level ``level`` is computed with the components its radius needs (the rule of
            # bits_needed at depth ``level``), not all ``nc``: the parents are exact in it
            # (they were rounded to fewer components), so every edge still has length tau
            # to p bits, and shallow levels of a deep tree cost far less.
            k = min(nc, components_needed(tau, level, dtype))
            kids = torch.nonzero(depth == level).flatten()
            par = parent[kids]
            xv = MCTensor(comps[par][..., :k])
            has_gp = parent[par] >= 0
            dvec = back[par]
            j = rank[kids] + has_gp.long()  # slot 0 is the parent's direction
            m = slots[par].to(torch.float64)
            if dim == 2:
                ang = 2 * math.pi * j.to(torch.float64) / m
                base = torch.stack([torch.cos(ang), torch.sin(ang)], dim=-1)
            else:
                assert table is not None  # built above for dim > 2
                base = table[j]
            w = torch.zeros_like(dvec)
            w[:, 0] = 1.0
            w = w - dvec
            wn = w.norm(dim=-1, keepdim=True)
            w = torch.where(wn > 0, w / wn.clamp(min=1e-300), torch.zeros_like(w))
            u = base - 2 * w * (base * w).sum(-1, keepdim=True)
            um = mc(u.to(dtype), nc=k)
            um = um / torch.sqrt((um * um).sum(-1, keepdim=True))
            et = mc(torch.tensor(e, dtype=dtype), nc=k)
            t = (1 - et) / (1 + et)
            w = t * um
            child = _mobius_add(xv, w)
            comps[kids, :, :k] = child.components
            # seen from the child, the parent lies at (-(x (+) w)) (+) x = -gyr[x, w] w: a
            # rotation of -w, with no cancellation (the direct Mobius difference of the two
            # stored points cancels to ~e^-2r and lost the direction past radius ~300)
            g = _gyration(xv, w, w).approx().to(torch.float64)
            back[kids] = -g / g.norm(dim=-1, keepdim=True)
            bar.update(1)
    emb = manifold.from_ball(MCTensor(comps))
    kids = torch.nonzero(parent >= 0).flatten()
    return {
        "embeddings": emb,
        "tau": tau,
        "nc": nc,
        "bits_needed": bits,
        "depth": max_depth,
        "parent": parent,
        "tree_edges": torch.stack([kids, parent[kids]], dim=1),
        "min_angle": min_angle,
        "distortion_bound": distortion_bound(tau, min_angle, path_edges) if n > 1 else 1.0,
    }


def _check_epsilon_fits(epsilon: float, tau: float, min_angle: float, depth: int, nc: Any, dtype: torch.dtype) -> None:
    """Refuse an ``epsilon`` whose ``tau`` the radius limit or an explicit ``nc`` cannot hold,
    naming the smallest ``epsilon`` that fits (the bound at the largest ``tau`` that does)."""
    if depth < 1:
        return
    top = max_tau(depth, None if nc == "auto" or not isinstance(nc, int) or isinstance(nc, bool) else nc, dtype)
    if tau <= top:
        return
    if top <= 0.0:
        return  # no tau fits this nc at all: resolve_nc names the nc that does
    best = distortion_bound(top, min_angle, 2 * depth)
    held = f"nc={nc}" if nc != "auto" else f"{dtype} with at most nc={max_components(dtype)} (radius limit {_radius_limit(dtype):.4g})"
    raise ValueError(
        f"epsilon={epsilon!r} needs tau={tau:.6g} at tree depth {depth} (min_angle {min_angle:.4g} rad), "
        f"beyond the largest tau={top:.6g} that {held} holds; the smallest epsilon that fits is "
        f"{best - 1:.4g} (pass epsilon >= {best - 1:.4g}{'' if nc == 'auto' else ', or a larger nc'})"
    )


def fit_tau(
    graph: Any, *, dim: int = 2, nc: int | str = "auto", dtype: torch.dtype = torch.float64, steps: int = 4, pairs: int = 200, seed: int = 0
) -> dict:
    """The ``tau`` on a grid that minimises ``D_avg`` among those ``nc`` can hold.

    Rule: ``tau_hi = max_tau(depth, nc)`` (``nc="auto"``: the exponent bound alone), grid
    ``tau_hi * 2^(-k/2)`` for ``k = 0 .. steps - 1``; each is embedded (:func:`embed_tree`
    with this ``nc``) and scored by :func:`distortion`'s ``D_avg`` (scale ``tau``) on
    ``pairs`` sampled source nodes. A larger ``tau`` straightens every tree path (the
    shortcut at a turn is ``2 log(1 / sin(alpha / 2))``, fixed, against a path length
    growing with ``tau``), so the minimum is normally at ``tau_hi``: precision, not
    distortion, is what limits ``tau``, and that is what more components buy.

    Args:
        graph: as for :func:`embed_tree`.
        dim, nc, dtype: as for :func:`embed_tree`.
        steps: grid points (>= 1).
        pairs: sampled source nodes for ``D_avg``.
        seed: seed of the sample.

    Returns:
        dict with ``tau`` (the best), ``d_avg`` (its sampled ``D_avg``), ``grid``
        (list of ``(tau, d_avg)``) and ``sampled_sources``.

    Raises:
        ValueError: ``nc`` holds no ``tau`` for this tree (the message names the ``nc``
            that does), or bad arguments.

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure, root a
        >>> f = fit_tau(g, nc=2, steps=2)
        >>> [round(t, 3) for t, _ in f["grid"]], round(f["tau"], 3), f["d_avg"]
        ([15.596, 11.028], 15.596, 0.0)
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected an int >= 1, got {steps!r}")
    if nc != "auto" and (isinstance(nc, bool) or not isinstance(nc, int) or nc < 1):
        raise ValueError(f"nc: expected an int >= 1 or 'auto', got {nc!r}")
    graph = _as_graph(graph)
    _, depth = spanning_tree(graph)
    max_depth = int(depth.max())
    if max_depth < 1:
        raise ValueError("graph: a single node has no edge length to fit")
    hi = max_tau(max_depth, None if nc == "auto" else int(nc), dtype)
    if hi <= 0:
        p = _precision(dtype)
        raise ValueError(
            f"nc={nc} gives {nc * p} bits, below the {p + _GUARD_BITS} bits bits_needed asks even at "
            f"radius 0; no tau fits at tree depth {max_depth}: pass nc >= 2"
        )
    grid = []
    sampled = None
    for k in range(steps):
        t = hi * 2.0 ** (-k / 2)
        r = embed_tree(graph, dim=dim, nc=nc, dtype=dtype, tau=t)
        d = distortion(r["embeddings"], graph, tau=r["tau"], pairs=pairs, seed=seed, maps=False)
        grid.append((t, d["d_avg"]))
        sampled = d["sampled_sources"]
    best = min(grid, key=lambda g: g[1])
    return {"tau": best[0], "d_avg": best[1], "grid": grid, "sampled_sources": sampled}


def _ball_of(emb: torch.Tensor, manifold: Any) -> MCTensor:
    """``emb`` in the unit ball (curvature -1, the scale of ``_pair_dist``), as an MCTensor."""
    from ..manifolds.math import common
    from ..manifolds.registry import check_ball_model

    if not isinstance(emb, MCTensor):
        emb = mc(emb, nc=1)
    ball = check_ball_model(manifold).to_ball(emb)  # radius 1/sqrt(c), scaled to the unit ball
    return cast(MCTensor, common.scale_c(ball, c=manifold.c, power=0.5))  # MC in, MC out


def _pair_dist(comps: torch.Tensor, a: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """Float64 ball distances of the pairs ``(i, j)``: ``2 asinh(|x - y| / sqrt(a_x a_y))``.

    ``comps``: the MC components ``(N, dim, nc)``; ``a``: ``1 - |x|^2`` per node, formed in
    MC and rounded once (float64, ``(N,)``). The differences are rounded once from the
    components (exact cancellation of the leading components); the rest is well
    conditioned. The asinh form (not ``acosh(1 + q)``) never overflows: its argument is
    at most ``2 / min(a)``, finite for every radius :func:`embed_tree` accepts, while
    ``q^2`` overflows float64 once distances pass ~355; dividing before a norm scaled by
    the largest coordinate keeps the squares from under- or overflowing.
    """
    from .distance import rounded_difference

    diff = rounded_difference(comps[i], comps[j]).to(torch.float64)
    # the quotient before the norm (|x - y|^2 underflows for |x - y| ~ e^-400), and the
    # norm scaled by the largest coordinate (w^2 overflows for w ~ e^400: distance 800)
    w = diff / a[i].sqrt().unsqueeze(-1) / a[j].sqrt().unsqueeze(-1)
    big = w.abs().amax(dim=-1, keepdim=True)
    scaled = torch.where(big > 0, w / torch.where(big > 0, big, 1.0), 0.0)
    return 2 * torch.asinh(big.squeeze(-1) * scaled.norm(dim=-1))


def distortion(
    emb: torch.Tensor,
    graph: Any,
    manifold: Any = None,
    *,
    pairs: str | int = "all",
    tau: float | None = None,
    seed: int = 0,
    chunk: int = 200_000,
    closure_sample: int | None = None,
    tree_sample: int | None = None,
    maps: bool = True,
    progress: bool = False,
) -> dict:
    """Average and worst-case distortion of ``emb`` against spanning-tree distances.

    ``D_avg`` is the mean over pairs of ``|d_H / (s d_T) - 1|`` with ``s = tau`` (or, when
    ``tau`` is None, the mean ratio ``d_H / d_T``); ``D_wc = max(d_H / d_T) / min(d_H / d_T)``.
    Hyperbolic distances use ``acosh(1 + 2|x - y|^2 / ((1 - |x|^2)(1 - |y|^2)))`` with the
    argument formed in MC (exact for points near the boundary), then float64 ``acosh``.

    Args:
        emb: embeddings (MCTensor) in ``manifold``'s model.
        graph: the graph (its spanning tree defines ``d_T``).
        manifold: as for :func:`embed_tree` (default ball).
        pairs: ``"all"`` or the number of sampled source nodes (each against all nodes).
        tau: the scale ``s`` (``embed_tree``'s ``tau``).
        seed: seed of the source sample.
        chunk: pairs per MC chunk.
        closure_sample: evaluate the closure MAP on this many sampled source nodes
            (``None``: all of them).
        tree_sample: the same for the tree-neighbour MAP (a big tree: every source costs
            one distance to each of the ``N`` nodes).
        maps: ``False`` skips both MAP evaluations (their keys are then absent).
        progress: show tqdm bars over the pair chunks and the evaluation chunks (on stderr).

    Returns:
        dict with ``d_avg``, ``d_wc``, ``num_pairs``, ``sampled_sources`` (None or "k of n"),
        ``tree_map`` / ``tree_mean_rank`` / ``tree_sampled_sources``
        (:func:`~hypermc.embed.evaluate` on the tree edges taken in both directions: the
        positives of a node are its parent and its children) and ``closure_map`` /
        ``closure_mean_rank`` / ``closure_sampled_sources``
        (``evaluate`` on ``graph.edges`` as given: the positives of a node are its
        ancestors).

    Why both directions for the tree: every tree edge has the same length ``tau``, so a
    node's children are exactly as far from it as its parent. With the directed edges
    alone (positives = the parent) a node with ``k`` children ties its parent with ``k``
    non-positives and scores an average precision near ``1 / (k + 1)``, whatever the
    precision of the embedding (mammals 2-D, eps=1: 0.825). The tree-neighbour MAP of
    Sala et al. is over undirected neighbours.

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure, root a
        >>> r = embed_tree(g, tau=5.0)
        >>> d = distortion(r["embeddings"], g, tau=r["tau"])
        >>> round(d["d_avg"], 9), round(d["d_wc"], 9), d["num_pairs"], d["tree_map"]
        (0.0, 1.0, 6, 1.0)
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    if pairs != "all" and (isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1):
        raise ValueError(f"pairs: expected 'all' or an int >= 1, got {pairs!r}")
    graph = _as_graph(graph)
    parent, _ = spanning_tree(graph)
    n = graph.num_nodes
    kids = np.nonzero(parent.numpy() >= 0)[0]
    adj = coo_matrix((np.ones(kids.size), (kids, parent.numpy()[kids])), shape=(n, n))
    if pairs == "all" or pairs >= n:
        sources = np.arange(n)
        sampled = None
    else:
        rng = np.random.default_rng(seed)
        sources = np.sort(rng.choice(n, size=int(pairs), replace=False))
        sampled = f"{pairs} of {n}"
    dt = shortest_path(adj, directed=False, unweighted=True, indices=sources)
    x = _ball_of(emb, _manifold_or_ball(manifold))
    comps = x.components
    a = (1 - (x * x).sum(-1)).approx().to(torch.float64)
    si, sj = np.nonzero(dt > 0)
    src = sources[si]
    keep = src < sj if sampled is None else np.ones(src.size, dtype=bool)
    src, sj, dtv = src[keep], sj[keep], dt[si[keep], sj[keep]]
    ratios = []
    with progress_bar(progress, -(-src.size // chunk), unit="chunk", desc="distortion") as bar:
        for s in range(0, src.size, chunk):
            i = torch.from_numpy(src[s : s + chunk])
            j = torch.from_numpy(sj[s : s + chunk])
            dh = _pair_dist(comps, a, i, j)
            ratios.append(dh / torch.from_numpy(dtv[s : s + chunk]))
            bar.update(1)
    r = torch.cat(ratios)
    if not bool(torch.isfinite(r).all()):
        raise ValueError("emb: non-finite hyperbolic distances (points on or outside the boundary)")
    scale = float(r.mean()) if tau is None else float(tau)
    out = {
        "d_avg": float((r / scale - 1).abs().mean()),
        "d_wc": float(r.max() / r.min()),
        "num_pairs": int(r.numel()),
        "sampled_sources": sampled,
    }
    if not maps:
        return out
    m = _manifold_or_ball(manifold)
    tree_edges = torch.stack([torch.from_numpy(kids), parent[kids]], dim=1)
    tree = evaluate(m, emb, torch.cat([tree_edges, tree_edges.flip(1)]), sample=tree_sample, seed=seed, progress=progress)
    closure = evaluate(m, emb, graph.edges, sample=closure_sample, seed=seed, progress=progress)
    return {
        **out,
        "tree_map": tree["map"],
        "tree_mean_rank": tree["mean_rank"],
        "tree_sampled_sources": tree["sampled_sources"],
        "closure_map": closure["map"],
        "closure_mean_rank": closure["mean_rank"],
        "closure_sampled_sources": closure["sampled_sources"],
    }


def _manifold_or_ball(manifold: Any) -> Any:
    from ..manifolds import PoincareBall

    return PoincareBall() if manifold is None else manifold


def save_construction(
    path: Any, result: dict, graph: Any, manifold: Any = None, *, epsilon: float | None = None, seconds: float = 0.0
) -> str:
    """Write an :func:`embed_tree` or :func:`hypermc.embed.embed_closure` result as a training checkpoint (format 2).

    :func:`hypermc.embed.load_checkpoint` (and ``python -m hypermc eval``) read it like a
    trained run at epoch 0 with an empty history; the config holds the construction's
    ``construction`` (``"tree"`` or ``"closure"``), ``tau`` (``None`` for a closure
    construction), ``alpha`` (``None`` for a tree construction), ``epsilon``,
    ``bits_needed``, ``depth`` and ``construct_seconds`` (``method = "construct"``). The MC
    components are stored as they are; ``train(init=...)`` can start from them.

    Args:
        path: the checkpoint file to write (atomically).
        result: what :func:`embed_tree` / ``embed_closure`` returned for ``graph`` and ``manifold``.
        graph: the embedded graph.
        manifold: the manifold passed to the construction (default: the ball for a tree
            construction, the half-space for a closure construction).
        epsilon: the ``epsilon`` passed to :func:`embed_tree`, if any (recorded only).
        seconds: the construction time (recorded only).

    Returns:
        ``str(path)``.

    Example:
        >>> from hypermc.data import Graph
        >>> g = Graph.from_pairs([("b", "a"), ("c", "a"), ("d", "b"), ("d", "a")])  # a closure, root a
        >>> save_construction("tree.pt", embed_tree(g, tau=5.0), g)
        'tree.pt'
        >>> from hypermc.embed import load_checkpoint
        >>> ckpt = load_checkpoint("tree.pt")
        >>> ckpt["config"]["method"], ckpt["epoch"], ckpt["embeddings"].shape
        ('construct', 0, torch.Size([4, 2]))
    """
    from .train import CHECKPOINT_FORMAT, manifold_name, write_checkpoint

    closure = "alpha" in result  # embed_closure's result
    if manifold is None and closure:
        from ..manifolds import PoincareHalfspace

        manifold = PoincareHalfspace()
    manifold = _manifold_or_ball(manifold)
    emb = result["embeddings"]
    if not isinstance(emb, MCTensor) or emb.shape[0] != graph.num_nodes:
        raise ValueError(
            f"result: expected embed_tree's or embed_closure's result for this graph ({graph.num_nodes} nodes), "
            f"got embeddings {type(emb).__name__} {tuple(emb.shape)}"
        )
    comps = emb.components
    config = {
        "method": "construct",
        "manifold": manifold_name(manifold),
        "curvature": float(manifold.curvature),
        "dim": manifold.manifold_dim(int(comps.shape[1])),
        "nc": int(comps.shape[-1]),
        "dtype": str(comps.dtype).removeprefix("torch."),
        "epochs": 0,
        "construction": "closure" if closure else "tree",
        "tau": None if closure else float(result["tau"]),
        "alpha": float(result["alpha"]) if closure else None,
        "epsilon": None if epsilon is None else float(epsilon),
        "bits_needed": int(result["bits_needed"]),
        "depth": int(result["depth"]),
        "construct_seconds": float(seconds),
        "graph_checksum": graph.checksum(),
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
    }
    payload = {
        "format": CHECKPOINT_FORMAT,
        "epoch": 0,
        "config": config,
        "components": comps.detach().clone(),
        "optimizer": {},
        "generator": torch.Generator().get_state(),
        "history": [],
        "names": list(graph.names),
        "edges": graph.edges.clone(),
        "weights": None if graph.weights is None else graph.weights.clone(),
    }
    write_checkpoint(path, payload)
    return str(path)
