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

Implementation: sources are processed in chunks of ``chunk_size`` rows; a chunk's
distances to all ``N`` nodes (``chunk x N``, computed from the MC components by
:func:`~hypermc.embed.distance.batch_distance`) are the largest tensor, so memory is
``O(chunk_size * N)`` and an 82k-node graph never builds an ``N x N`` tensor. Ranks
come from ``searchsorted`` in the sorted distances of each row; no Python loop over
sources or edges. With ``sample=k`` only ``k`` random source nodes (drawn with
``seed``) are evaluated; the result says so.
"""

from __future__ import annotations

import math
import time

import torch

from ..manifolds.base import Manifold
from .distance import batch_distance, components_of

__all__ = ["evaluate", "DEFAULT_CHUNK_ELEMENTS"]

#: Default bound on ``chunk_size * N * dim``, the size of the largest temporaries of a
#: chunk (coordinate differences); ~64 MB per buffer in float64.
DEFAULT_CHUNK_ELEMENTS = 1 << 23


def _validate(manifold, embeddings, edges, chunk_size, sample):
    if not isinstance(manifold, Manifold):
        raise TypeError(f"evaluate: manifold must be a hypermc manifold; got {type(manifold).__name__}")
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
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"evaluate: chunk_size must be a positive int or None; got {chunk_size!r}")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise ValueError(f"evaluate: sample must be a positive int or None; got {sample!r}")


def evaluate(
    manifold: Manifold,
    embeddings: torch.Tensor,
    edges: torch.Tensor,
    *,
    chunk_size: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> dict:
    """Reconstruction MAP and mean rank (semantics in the module docstring).

    Args:
        manifold: the manifold of the embeddings.
        embeddings: ``(N, dim)`` MCTensor or plain Tensor, one row per node id.
        edges: ``(E, 2)`` int64 ``(child, parent)`` ids; duplicates are ignored.
        chunk_size: source rows per chunk (default: ``DEFAULT_CHUNK_ELEMENTS // (N dim)``).
        sample: evaluate only this many source nodes, drawn uniformly without
            replacement with ``seed`` (all of them if ``sample`` >= their number).
        seed: seed of the sample.

    Returns:
        dict with ``map``, ``mean_rank`` (floats), ``num_sources`` and ``num_edges``
        (evaluated), ``total_sources``, ``sample`` (``None`` or the requested size),
        ``seed``, ``seconds``.

    Raises:
        TypeError, ValueError: bad arguments (the message names the argument), or
            embeddings with inf/NaN (ValueError naming the first bad row).

    Example:
        >>> evaluate(PoincareHalfspace(), result.embeddings, graph.edges)["map"]
    """
    _validate(manifold, embeddings, edges, chunk_size, sample)
    start = time.perf_counter()
    n = embeddings.shape[0]
    rows = components_of(embeddings.detach())
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
        sources = sources[torch.randperm(total, generator=gen)[:sample]].sort().values
    if chunk_size is None:
        chunk_size = max(1, DEFAULT_CHUNK_ELEMENTS // max(n * embeddings.shape[1], 1))
    # CSR of the positives: edges sorted by source (keys are sorted).
    counts = torch.bincount(src_all, minlength=n)
    offsets = torch.zeros(n + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(counts, 0)

    ap_sum = 0.0
    rank_sum = 0.0
    num_edges = 0
    everyone = torch.arange(n).unsqueeze(0)
    cache: dict = {}  # per-row quantities shared by the chunks
    with torch.no_grad():
        for lo in range(0, int(sources.numel()), chunk_size):
            src = sources[lo : lo + chunk_size]
            ap, ranks = _chunk(manifold, rows, src, everyone, offsets, counts, dst_all, cache)
            ap_sum += float(ap.sum())
            rank_sum += float(ranks.sum())
            num_edges += int(ranks.numel())
    evaluated = int(sources.numel())
    return {
        "map": ap_sum / evaluated if evaluated else math.nan,
        "mean_rank": rank_sum / num_edges if num_edges else math.nan,
        "num_sources": evaluated,
        "num_edges": num_edges,
        "total_sources": total,
        "sample": sample,
        "seed": int(seed),
        "seconds": time.perf_counter() - start,
    }


def _chunk(manifold, rows, src, everyone, offsets, counts, dst_all, cache):
    """Average precision per source and the ranks of all positives of a chunk."""
    s = src.numel()
    d = batch_distance(manifold, rows, src.unsqueeze(1), everyone, cache=cache)  # (S, N)
    n = d.shape[1]
    # Positives of each source, padded to the longest list: (S, P) ids and mask.
    cnt = counts[src]
    p = int(cnt.max())
    slot = torch.arange(p).unsqueeze(0)
    valid = slot < cnt.unsqueeze(1)
    pos = dst_all[(offsets[src].unsqueeze(1) + slot).clamp_max(dst_all.numel() - 1)]
    pos = torch.where(valid, pos, src.unsqueeze(1))
    row = torch.arange(s).unsqueeze(1)
    dpos = d[row, pos]  # (S, P); padded slots hold d(u, u)
    # Non-positive candidates: every node but u and its positives, sorted per row.
    excluded = torch.zeros(s, n, dtype=torch.bool)
    excluded[row.expand_as(pos), pos] = True
    excluded[row.squeeze(1), src] = True
    inf = torch.tensor(math.inf, dtype=d.dtype)
    neg_sorted = torch.where(excluded, inf, d).sort(dim=1).values
    n_neg = (n - 1 - cnt).unsqueeze(1)
    less = torch.searchsorted(neg_sorted, dpos, right=False).clamp_max(n_neg)
    less_eq = torch.searchsorted(neg_sorted, dpos, right=True).clamp_max(n_neg)
    ranks = 1.0 + less.to(d.dtype) + 0.5 * (less_eq - less).to(d.dtype)
    # Positives at distance <= d(u, v): sort the positive distances (padding at +inf).
    pos_sorted = torch.where(valid, dpos, inf).sort(dim=1).values
    k = torch.searchsorted(pos_sorted, dpos, right=True).clamp_max(cnt.unsqueeze(1))
    precision = k.to(d.dtype) / (k + less_eq).to(d.dtype)
    ap = torch.where(valid, precision, 0).sum(1) / cnt.to(d.dtype)
    return ap, ranks[valid]
