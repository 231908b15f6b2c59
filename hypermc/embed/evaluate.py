"""Reconstruction metrics of a hierarchy embedding: mean average precision and mean rank.

Semantics (those of poincare-embeddings' reconstruction evaluation):

* The graph is **directed**: the positives of a source node ``u`` are its targets
  ``{v : (u, v) is an edge}`` (its hypernyms / ancestors). Nodes without out-edges are
  not sources.
* Every other node except ``u`` itself is a candidate, ranked by distance to ``u``.
* **Rank** of a positive ``v``: ``1 +`` the number of non-positives strictly closer to
  ``u`` than ``v``, plus half the number of non-positives at exactly the same distance
  (the expected rank under a random order of ties; embeddings whose points have
  collapsed onto each other -- plain float far from the origin -- get ties, and this
  neither rewards nor punishes them by the order of a sort). Other positives do not
  count, so a perfect embedding has mean rank 1.0. **Mean rank** is the mean over all
  evaluated edges.
* **Average precision** of ``u``: the mean over its positives ``v`` of
  ``precision(v) = #{positives w : d(u, w) <= d(u, v)} / #{candidates w : d(u, w) <=
  d(u, v)}`` -- scikit-learn's ``average_precision_score`` on the scores ``-d``
  (ties are grouped at one threshold). **MAP** is the mean over source nodes.

Precision: distances and ranks are computed in float64 whatever the embeddings' dtype.
float16, bfloat16 and float32 tables (plain or MC) are widened exactly to float64
components (same values, same ``nc``; the caller's tensor is not changed), so the ranks
are those of the stored points, not of their distances rounded to 11 or 8 bits (float16
ranks above 2048 are not even integers, and their sum overflows to inf).

Implementation (memory linear in ``N + E``; no ``N x N`` tensor): sources are processed
in chunks of ``chunk_size`` rows. A chunk's distances to all ``N`` nodes (``chunk x N``)
are computed tile by tile (:data:`TILE_ELEMENTS` coordinates per tile, so the
temporaries of :func:`~hypermc.embed.distance.batch_distance` stay cache-sized; about 3x
faster than one call per chunk at 82k nodes). Ranks need no sort of the ``N``
distances: each distance is located among the source's ``P`` sorted positive
distances by ``searchsorted`` (``O(N log P)``) and a per-row ``bincount`` plus
``cumsum`` counts the nodes below each positive; the positives themselves and the
source are then subtracted. A chunk holds about :data:`BYTES_PER_CANDIDATE` bytes per
(source, node) pair, so ``chunk_size`` defaults to ``memory_budget //
(BYTES_PER_CANDIDATE * N)`` (82k nodes, 256 MiB: ~80 rows). No Python loop over
sources or edges. With ``sample=k`` only ``k`` random source nodes (drawn with
``seed``) are evaluated; the result says so (``sampled_sources``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

import torch

from .._checks import check_callable, check_instance, check_int
from .._progress import progress_bar
from ..manifolds.base import Manifold
from ..manifolds.math import fused
from ..mcf.eft import renormalize
from .distance import components_of, distance_function

__all__ = ["evaluate", "DEFAULT_MEMORY_BUDGET", "BYTES_PER_CANDIDATE", "TILE_ELEMENTS", "FUSED_TILE_PAIRS"]

#: Default memory budget (bytes) of one chunk's per-candidate tensors.
DEFAULT_MEMORY_BUDGET = 256 * 2**20
#: Bytes a chunk holds per (source, candidate node) pair: the distance (8 in float64) and
#: two int64 positions from ``searchsorted`` plus their flattened bincount index (24),
#: with slack: the measured peak was ~24 bytes per pair (161 MB above the loaded graph
#: for 81 sources x 82,115 nodes, 10-D, nc=2, tiles included).
BYTES_PER_CANDIDATE = 40
#: Coordinates (pairs x coordinates) per distance tile: ~2 MB per float64 temporary,
#: the size that ran fastest on a 2-core CPU (16k pairs of 10-D points).
TILE_ELEMENTS = 1 << 18
#: Coordinates per distance tile on CUDA (256 MB per float64 temporary): GPU kernels
#: need large tiles, the CPU size would launch ~10^5 tiny kernels per nouns chunk.
CUDA_TILE_ELEMENTS = 1 << 25
#: Default memory budget (bytes) of one chunk on CUDA.
DEFAULT_CUDA_MEMORY_BUDGET = 4 * 2**30
#: Sources per distance tile (the tile then spans ``TILE_ELEMENTS // (32 n)`` nodes).
TILE_SOURCES = 32
#: (source, node) pairs per tile of a fused distance kernel (``evaluate(fast=True)``):
#: 32 sources x 8,192 nodes, the fastest measured on 82k nouns nodes (2.6 ms per source
#: on one thread; 4.4 ms with the torch path's tiles, 8.8 ms by the torch path).
FUSED_TILE_PAIRS = 1 << 18


def _validate(
    manifold: Manifold,
    embeddings: torch.Tensor,
    edges: torch.Tensor,
    chunk_size: int | None,
    sample: int | None,
    seed: int,
    memory_budget: int | None,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None,
    shard: tuple[int, int],
) -> None:
    check_instance("evaluate", "manifold", manifold, Manifold, "a hypermc manifold")
    if not isinstance(embeddings, torch.Tensor) or not embeddings.is_floating_point() or embeddings.dim() != 2:
        raise TypeError(
            "evaluate: embeddings must be an (N, dim) floating Tensor or MCTensor; got "
            f"{type(embeddings).__name__} {tuple(getattr(embeddings, 'shape', ()))}"
        )
    if not isinstance(edges, torch.Tensor) or edges.dtype != torch.int64 or edges.dim() != 2 or edges.shape[1] != 2:
        raise TypeError(
            "evaluate: edges must be an (E, 2) int64 tensor of (child, parent) ids; got "
            f"{getattr(edges, 'dtype', type(edges).__name__)} {tuple(getattr(edges, 'shape', ()))}"
        )
    n = embeddings.shape[0]
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= n):
        raise ValueError(f"evaluate: edge ids must lie in [0, {n}) (one row of embeddings per node)")
    loops = edges[:, 0] == edges[:, 1]
    if bool(loops.any()):
        i = int(loops.nonzero()[0, 0])
        raise ValueError(
            f"evaluate: edges hold {int(loops.sum())} self-loops (first: row {i}, node "
            f"{int(edges[i, 0])}); a node is not its own neighbour: remove them"
        )
    check_int("evaluate", "chunk_size", chunk_size, allow_none=True)
    check_int("evaluate", "sample", sample, allow_none=True)
    check_int("evaluate", "seed", seed, minimum=None)
    check_int("evaluate", "memory_budget", memory_budget, allow_none=True)
    if reduce is not None:
        check_callable("evaluate", "reduce", reduce, "DataParallel.sum")
    check_instance("evaluate", "shard", shard, tuple, "an (index, count) tuple")
    if len(shard) != 2:
        raise ValueError(f"evaluate: shard must be an (index, count) tuple; got {shard!r}")
    count = check_int("evaluate", "shard[1]", shard[1])
    check_int("evaluate", "shard[0]", shard[0], minimum=0, maximum=count - 1)
    # Membership, once per call at the boundary (inf/NaN is reported by evaluate with
    # the row; check_point would only say "contains inf or NaN").
    if bool(torch.isfinite(components_of(embeddings.detach())).all()):
        ok, reason = manifold.check_point(embeddings.detach())
        if not ok:
            raise ValueError(f"evaluate: embeddings are not points of {manifold!r}: {reason}")


def evaluate(
    manifold: Manifold,
    embeddings: torch.Tensor,
    edges: torch.Tensor,
    *,
    chunk_size: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    memory_budget: int | None = None,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    shard: tuple[int, int] = (0, 1),
    device: str | torch.device | None = None,
    progress: bool = False,
    fast: bool = False,
) -> dict:
    """Reconstruction MAP and mean rank (semantics in the module docstring).

    Args:
        manifold: the manifold of the embeddings.
        embeddings: ``(N, dim)`` MCTensor or plain Tensor, one row per node id.
        edges: ``(E, 2)`` int64 ``(child, parent)`` ids; duplicates are ignored.
        chunk_size: source rows per chunk (default: from ``memory_budget``).
        sample: evaluate only this many source nodes, drawn uniformly without
            replacement with ``seed`` (all of them if ``sample`` >= their number).
        seed: seed of the sample.
        memory_budget: bytes for one chunk's ``chunk x N`` tensors (default
            :data:`DEFAULT_MEMORY_BUDGET`, :data:`DEFAULT_CUDA_MEMORY_BUDGET` on CUDA);
            ignored when ``chunk_size`` is given.
        reduce: for a sharded evaluation (data-parallel ranks): a function that sums a
            float64 vector of partial sums over the shards, identically everywhere.
        shard: ``(index, count)``: evaluate only every ``count``-th chunk of sources,
            starting at ``index`` (with ``reduce``; the default is everything).
        device: where the chunks are computed (``"cpu"``, ``"cuda"``, ``"auto"``, a
            ``torch.device``); ``None``: the device of ``embeddings``. The embeddings
            and edges are copied there; the sample of sources is drawn on the CPU, so
            it is the same on every device. The memory budget then bounds the device
            memory of one chunk.
        progress: show a tqdm bar over the chunks (on stderr).
        fast: compute the distances with the fused CPU kernels where the model has
            them (:data:`hypermc.embed.distance.FUSED`: the half-space and the ball at
            nc = 1-4, the hyperboloid at nc = 1-3; nc = 1 is a plain table), as
            ``train(fast=True)`` does: values within ``fused.VALUE_ULPS`` ulps of
            ``manifold.dist_batch``, so a rank can differ only where two candidates'
            distances are that close; 2-3x faster distances, and one parallel region per
            tile of :data:`FUSED_TILE_PAIRS` pairs instead of ~15 small torch kernels
            per :data:`TILE_ELEMENTS` coordinates (which is what makes a loaded
            multi-threaded CPU slow). Elsewhere (CUDA, other models, float16) the
            same as ``fast=False``.

    Returns:
        dict with ``map``, ``mean_rank`` (floats), ``num_sources`` and ``num_edges``
        (evaluated), ``total_sources``, ``sample`` (``None`` or the requested size),
        ``sampled_sources`` (``None`` when every source was evaluated, else
        ``"k of n"``), ``seed``, ``chunk_size``, ``seconds``.

    Raises:
        TypeError, ValueError: bad arguments (the message names the argument),
            embeddings with inf/NaN (ValueError naming the first bad row), embeddings
            off the manifold (``manifold.check_point`` fails), or self-loops in
            ``edges`` (refused, not skipped: they would count a distance 0 "neighbour").

    Example:
        A root 0 with children 1 and 2 and a grandchild 3 under 1 (closure edges), placed
        in the half-space with ancestors higher up:

        >>> from hypermc.manifolds import PoincareHalfspace
        >>> emb = torch.tensor([[0.0, 1.0], [-1.0, 0.3], [1.0, 0.3], [-1.0, 0.01]], dtype=torch.float64)
        >>> edges = torch.tensor([[1, 0], [2, 0], [3, 0], [3, 1]])
        >>> r = evaluate(PoincareHalfspace(), emb, edges)
        >>> r["map"], r["mean_rank"], r["num_sources"], r["num_edges"]
        (1.0, 1.0, 3, 4)
        >>> evaluate(PoincareHalfspace(), hm.mc(emb, nc=2), edges, sample=2, seed=0)["sampled_sources"]
        '2 of 3'
    """
    _validate(manifold, embeddings, edges, chunk_size, sample, seed, memory_budget, reduce, shard)
    check_instance("evaluate", "fast", fast, bool, "True or False")
    from .train import resolve_device

    dev = embeddings.device if device is None else resolve_device(device, "evaluate")
    start = time.perf_counter()
    n = embeddings.shape[0]
    rows = _widened(components_of(embeddings.detach()).to(dev))
    edges = edges.to(dev)
    bad = ~torch.isfinite(rows).reshape(n, -1).all(dim=1)
    if bool(bad.any()):
        raise ValueError(
            f"evaluate: embeddings hold inf or NaN in {int(bad.sum())} rows (first: row "
            f"{int(bad.nonzero()[0, 0])}); a diverged run cannot be evaluated"
        )
    keys = torch.unique(edges[:, 0] * max(n, 1) + edges[:, 1])
    src_all, dst_all = keys // max(n, 1), keys % max(n, 1)
    sources = torch.unique(src_all)
    total = int(sources.numel())
    if sample is not None and sample < total:
        gen = torch.Generator().manual_seed(int(seed))
        sources = sources[torch.randperm(total, generator=gen)[:sample].to(dev)].sort().values
    if chunk_size is None:
        default = DEFAULT_CUDA_MEMORY_BUDGET if dev.type == "cuda" else DEFAULT_MEMORY_BUDGET
        budget = default if memory_budget is None else memory_budget
        chunk_size = max(1, budget // (BYTES_PER_CANDIDATE * max(n, 1)))
    # CSR of the positives: edges sorted by source (keys are sorted).
    counts = torch.bincount(src_all, minlength=n)
    offsets = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    offsets[1:] = torch.cumsum(counts, 0)

    # Partial sums: average precisions, ranks, evaluated edges.
    sums = torch.zeros(3, dtype=torch.float64, device=dev)
    cache: dict = {}  # per-row quantities shared by the chunks
    distance = _Distance(distance_function(manifold, fast), fast and _fused_applies(manifold, rows))
    index, count = shard
    num_chunks = -(-int(sources.numel()) // chunk_size)
    with torch.no_grad(), progress_bar(progress, len(range(index, num_chunks, count)), unit="chunk", desc="evaluate") as bar:
        for i, lo in enumerate(range(0, int(sources.numel()), chunk_size)):
            if i % count != index:
                continue
            src = sources[lo : lo + chunk_size]
            ap, ranks = _chunk(distance, rows, src, offsets, counts, dst_all, cache)
            sums[0] += ap.sum()
            sums[1] += ranks.sum()
            sums[2] += ranks.numel()
            bar.update(1)
    sums = sums.cpu()
    if reduce is not None:
        sums = reduce(sums)
    ap_sum, rank_sum, num_edges = float(sums[0]), float(sums[1]), int(sums[2])
    evaluated = int(sources.numel())
    return {
        "map": ap_sum / evaluated if evaluated else math.nan,
        "mean_rank": rank_sum / num_edges if num_edges else math.nan,
        "num_sources": evaluated,
        "num_edges": num_edges,
        "total_sources": total,
        "sample": sample,
        "sampled_sources": None if evaluated == total else f"{evaluated} of {total}",
        "seed": int(seed),
        "chunk_size": chunk_size,
        "seconds": time.perf_counter() - start,
    }


def _widened(rows: torch.Tensor) -> torch.Tensor:
    """Components ``(*, nc)`` as float64 components with the same values (a new tensor).

    Every float16, bfloat16 or float32 value is a float64, and the components of a
    normalised expansion do not overlap bit-wise, so the widened ``nc`` components hold
    the same sum; :func:`~hypermc.mcf.eft.renormalize` only restores float64's
    normalisation (exact on such input, checked in ``tests/embed/test_evaluate.py``).
    float64 rows are returned as they are.
    """
    if rows.dtype == torch.float64:
        return rows
    wide = rows.to(torch.float64)
    return wide if wide.shape[-1] == 1 else renormalize(wide, wide.shape[-1])


class _Distance(NamedTuple):
    """The batched distance of an evaluation and whether it is a fused kernel."""

    fn: Callable[..., torch.Tensor]
    fused: bool


def _fused_applies(manifold: Manifold, rows: torch.Tensor) -> bool:
    """Whether ``evaluate(fast=True)`` computes these rows' distances by a fused kernel."""
    kernel = manifold.fused_dist_batch
    return kernel is not None and fused.applies(rows, fused.model_of(kernel))


def _distances(distance: _Distance, rows: torch.Tensor, src: torch.Tensor, cache: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(S, N)`` distances of the sources ``src`` to every node, tile by tile."""
    n = rows.shape[0]
    out = torch.empty(src.numel(), n, dtype=rows.dtype, device=rows.device)
    sb = src.numel() if rows.device.type == "cuda" else min(TILE_SOURCES, src.numel())
    if distance.fused:
        nb = max(1, FUSED_TILE_PAIRS // sb)
    else:
        tile = CUDA_TILE_ELEMENTS if rows.device.type == "cuda" else TILE_ELEMENTS
        nb = max(1, tile // (sb * rows.shape[1]))
    for i in range(0, src.numel(), sb):
        ia = src[i : i + sb].unsqueeze(1)
        for j in range(0, n, nb):
            ib = torch.arange(j, min(n, j + nb), device=rows.device).unsqueeze(0)
            out[i : i + sb, j : j + nb] = distance.fn(rows, ia, ib, cache=cache)
    return out


def _chunk(
    distance: _Distance,
    rows: torch.Tensor,
    src: torch.Tensor,
    offsets: torch.Tensor,
    counts: torch.Tensor,
    dst_all: torch.Tensor,
    cache: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Average precision per source and the ranks of all positives of a chunk."""
    s = src.numel()
    d = _distances(distance, rows, src, cache)  # (S, N)
    row = torch.arange(s, device=d.device).unsqueeze(1)
    # Positives of each source, padded to the longest list: (S, P) ids and mask.
    cnt = counts[src]
    p = int(cnt.max())
    slot = torch.arange(p, device=d.device).unsqueeze(0)
    valid = slot < cnt.unsqueeze(1)
    pos = dst_all[(offsets[src].unsqueeze(1) + slot).clamp_max(dst_all.numel() - 1)]
    inf = torch.tensor(math.inf, dtype=d.dtype, device=d.device)
    # Sorted positive distances, padding at +inf (after every finite distance).
    pos_sorted = torch.where(valid, d[row, pos], inf).sort(dim=1).values.contiguous()
    # For every node w: #positives with d <= d_w (right) and < d_w (left). Node w is
    # strictly closer than the j-th sorted positive iff j >= right(w), and at most as
    # far iff j >= left(w): per-row counts of these positions, cumulated, give the
    # number of nodes below / not above each positive.
    width = p + 1
    flat = row * width
    below = _cumulative_counts(torch.searchsorted(pos_sorted, d, right=True) + flat, s, width)
    not_above = _cumulative_counts(torch.searchsorted(pos_sorted, d, right=False) + flat, s, width)
    du = d[row.squeeze(1), src].unsqueeze(1)  # d(u, u): 0, or tiny after rounding
    del d
    # Remove the positives themselves and the source u from the counts.
    pos_lt = torch.searchsorted(pos_sorted, pos_sorted, right=False)  # positives strictly closer
    pos_le = torch.searchsorted(pos_sorted, pos_sorted, right=True)  # positives at most as far
    less = below[:, :p] - pos_lt - (du < pos_sorted).long()
    less_eq = not_above[:, :p] - pos_le - (du <= pos_sorted).long()
    ranks = 1.0 + less.to(inf.dtype) + 0.5 * (less_eq - less).to(inf.dtype)
    # Precision at each positive v: positives with d <= d(u, v) over all candidates.
    valid_sorted = slot < cnt.unsqueeze(1)
    precision = pos_le.to(inf.dtype) / (pos_le + less_eq).to(inf.dtype)
    ap = torch.where(valid_sorted, precision, 0).sum(1) / cnt.to(inf.dtype)
    return ap, ranks[valid_sorted]


def _cumulative_counts(flat_index: torch.Tensor, s: int, width: int) -> torch.Tensor:
    """Per-row cumulative histogram ``(s, width)`` of row-offset positions."""
    hist = torch.bincount(flat_index.reshape(-1), minlength=s * width).reshape(s, width)
    return hist.cumsum(1)
