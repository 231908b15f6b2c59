"""Where the rank errors of a hierarchy embedding sit: its per-edge ranks, broken down.

For a sample of source nodes (the same sample as ``evaluate(..., sample=k, seed=s)``),
every edge ``(u, v)`` gets its rank as :func:`hypermc.embed.evaluate` counts it (1 + the
nodes other than ``u`` and its ancestors that are closer to ``u`` than ``v``, ties counted
half), so the mean of the printed ranks is evaluate's mean rank. The ranks are grouped by

* the generation gap: the length of the shortest path from ``u`` up to ``v`` in the
  transitive reduction (1: ``v`` is a direct parent of ``u``);
* the source: a leaf (no descendants) or an inner node;
* the size of the target's subtree (its number of descendants);

and each group prints its number of edges, mean and median rank, the fraction of edges
ranked worse than 10 and its share of the total excess rank ``sum(rank - 1)``. The
embedding comes from a training checkpoint (``--ckpt``) or from a ``.pt`` file holding
``{"components": (N, dim, nc) tensor}`` with the node order of ``--csv`` (sorted names).

Usage::

    python examples/rank_breakdown.py --ckpt runs/nouns/checkpoint.pt --sample 2000
    python examples/rank_breakdown.py --components emb.pt --csv nouns.csv --sample 2000
"""

from __future__ import annotations

import argparse
import json
import math

import torch

from hypermc import _results
from hypermc._progress import progress_bar, show_progress
from hypermc.data import load_edges
from hypermc.embed import evaluate, load_checkpoint
from hypermc.embed.distance import batch_distance
from hypermc.embed.plot import hierarchy_edges
from hypermc.embed.train import MANIFOLDS
from hypermc.mcf.tensor import MCTensor

#: Sources per block of distances (each block is ``block x N`` distances).
BLOCK = 32


def edge_ranks(manifold, rows, edges, sources, progress=False):
    """``(E_s, 3)`` int64 ``(u, v, 2 * rank)`` for every edge of the sources (ranks in halves)."""
    n = rows.shape[0]
    order = torch.argsort(edges[:, 0], stable=True)
    by_src = edges[order]
    counts = torch.bincount(edges[:, 0], minlength=n)
    offsets = torch.zeros(n + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(counts, 0)
    out = []
    every = torch.arange(n).unsqueeze(0)
    bar = progress_bar(progress, sources.numel(), unit="source", desc="ranks")
    for lo in range(0, sources.numel(), BLOCK):
        src = sources[lo : lo + BLOCK]
        bar.update(src.numel())
        d = batch_distance(manifold, rows, src.unsqueeze(1), every)
        for i, u in enumerate(src.tolist()):
            pos = by_src[offsets[u] : offsets[u + 1], 1]
            du = d[i].clone()
            du[u] = math.inf
            dp = du[pos].clone()
            du[pos] = math.inf
            others = torch.sort(du).values[: n - 1 - pos.numel()]
            below = torch.searchsorted(others, dp, right=False)
            not_above = torch.searchsorted(others, dp, right=True)
            twice = 2 + 2 * below + (not_above - below)  # 2 * (1 + less + ties / 2)
            out.append(torch.stack([torch.full_like(pos, u), pos, twice], dim=1))
    bar.close()
    return torch.cat(out)


def generation_gaps(graph, pairs):
    """Shortest path length from child to ancestor in the transitive reduction, per pair."""
    parents: dict[int, list[int]] = {}
    for c, p in hierarchy_edges(graph).tolist():
        parents.setdefault(c, []).append(p)
    gaps = []
    cache: dict[int, dict[int, int]] = {}
    for u, v in pairs.tolist():
        if u not in cache:
            level, seen, frontier = 0, {}, [u]
            while frontier:
                level += 1
                nxt = []
                for w in frontier:
                    for p in parents.get(w, ()):
                        if p not in seen:
                            seen[p] = level
                            nxt.append(p)
                frontier = nxt
            cache = {u: seen}  # one source at a time: the pairs are grouped by source
        gaps.append(cache[u][v])
    return torch.tensor(gaps)


def table(title, key, bins, ranks):
    """Print one breakdown: rows ``[lo, hi)`` of ``key``."""
    excess = (ranks - 1).sum()
    print(f"{title}:")
    print(f"  {'group':>16} {'edges':>7} {'mean rank':>10} {'median':>7} {'rank>10':>8} {'excess share':>13}")
    for lo, hi in bins:
        m = (key >= lo) & (key < hi)
        if not bool(m.any()):
            continue
        r = ranks[m]
        group = f"{lo}" if hi == lo + 1 else f"[{lo}, {hi})" if hi < 10**8 else f">= {lo}"
        share = float((r - 1).sum() / excess) if excess > 0 else 0.0
        worse = float((r > 10).double().mean())
        print(f"  {group:>16} {int(m.sum()):>7} {float(r.mean()):>10.1f} {float(r.median()):>7.1f} {worse:>8.3f} {share:>13.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", default=None, help="a training checkpoint (checkpoint.pt or its run directory)")
    p.add_argument("--components", default=None, help='a .pt file holding {"components": (N, dim, nc)}')
    p.add_argument("--csv", default=None, help="edge list of --components (node ids: sorted names)")
    p.add_argument("--manifold", default="halfspace", choices=sorted(MANIFOLDS), help="manifold of --components")
    p.add_argument("--sample", type=int, default=2000, help="source nodes (evaluate's sample)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (evaluate's seed)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bar (none anyway when stderr is not a terminal)")
    _results.add_argument(p)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if (args.ckpt is None) == (args.components is None):
        p.error("pass exactly one of --ckpt and --components")
    if args.ckpt is not None:
        path = args.ckpt if args.ckpt.endswith(".pt") else f"{args.ckpt}/checkpoint.pt"
        ckpt = load_checkpoint(path)
        graph, manifold, rows = ckpt["graph"], ckpt["manifold"], ckpt["components"]
    else:
        if args.csv is None:
            p.error("--components needs --csv")
        graph, manifold = load_edges(args.csv), MANIFOLDS[args.manifold]()
        rows = torch.load(args.components, map_location="cpu", weights_only=True)["components"]
        rows = rows.unsqueeze(-1) if rows.dim() == 2 else rows
    n = graph.num_nodes
    edges = torch.unique(graph.edges[:, 0] * n + graph.edges[:, 1])
    edges = torch.stack([edges // n, edges % n], dim=1)
    sources = torch.unique(edges[:, 0])
    if args.sample < sources.numel():
        gen = torch.Generator().manual_seed(args.seed)
        sources = sources[torch.randperm(sources.numel(), generator=gen)[: args.sample]].sort().values
    with torch.no_grad():
        result = edge_ranks(manifold, rows, edges, sources, progress=show_progress(args.quiet))
    ranks = result[:, 2].double() / 2
    emb = MCTensor(rows) if rows.shape[-1] > 1 else rows[..., 0]
    check = evaluate(manifold, emb, graph.edges, sample=args.sample, seed=args.seed)
    summary = {"edges": int(ranks.numel()), "mean_rank": float(ranks.mean()), "evaluate_mean_rank": check["mean_rank"], "map": check["map"]}
    print(json.dumps(summary))
    quantiles = torch.quantile(ranks, torch.tensor([0.5, 0.9, 0.99], dtype=torch.float64)).tolist()
    top = (ranks - 1).sort(descending=True).values
    shares = [float(top[: max(1, int(f * top.numel()))].sum() / top.sum()) for f in (0.01, 0.1)]
    print(
        f"rank quantiles 50/90/99 %: {quantiles[0]:.1f} / {quantiles[1]:.1f} / {quantiles[2]:.1f}; "
        f"the worst 1 % / 10 % of edges hold {shares[0]:.2f} / {shares[1]:.2f} of the excess rank"
    )
    descendants = torch.bincount(graph.edges[:, 1], minlength=n)
    u, v = result[:, 0], result[:, 1]
    gaps = generation_gaps(graph, result[:, :2])
    table("by generation gap (1 = direct parent)", gaps, [(1, 2), (2, 3), (3, 5), (5, 8), (8, 10**9)], ranks)
    table("by source descendants (0 = leaf)", descendants[u], [(0, 1), (1, 5), (5, 100), (100, 10**9)], ranks)
    table("by target descendants", descendants[v], [(1, 20), (20, 100), (100, 1000), (1000, 10**9)], ranks)


if __name__ == "__main__":
    _results.run(main)
