"""Small graphs and the brute-force reference evaluator of the embed tests."""

from __future__ import annotations

import torch

from hypermc.data import Graph


def tree_closure(depth: int, branching: int) -> Graph:
    """Transitive closure of a complete tree: edges node -> every ancestor."""
    pairs = []
    parents = {"r": None}
    frontier = ["r"]
    for _ in range(depth):
        nxt = []
        for p in frontier:
            for b in range(branching):
                c = f"{p}{b}"
                parents[c] = p
                nxt.append(c)
        frontier = nxt
    for node in parents:
        a = parents[node]
        while a is not None:
            pairs.append((node, a))
            a = parents[a]
    return Graph.from_pairs(pairs)


def brute_force_metrics(dist: torch.Tensor, edges: torch.Tensor) -> tuple[float, float]:
    """MAP and mean rank from a full distance matrix, by loops (the documented semantics)."""
    n = dist.shape[0]
    d = dist.tolist()
    positives: dict[int, set[int]] = {}
    for c, p in edges.tolist():
        positives.setdefault(c, set()).add(p)
    aps, ranks = [], []
    for u, pos in positives.items():
        others = [j for j in range(n) if j != u]
        precisions = []
        for p in pos:
            dp = d[u][p]
            closer = sum(1 for j in others if j not in pos and d[u][j] < dp)
            tied = sum(1 for j in others if j not in pos and d[u][j] == dp)
            ranks.append(1 + closer + 0.5 * tied)
            k = sum(1 for q in pos if d[u][q] <= dp)
            everything = sum(1 for j in others if d[u][j] <= dp)
            precisions.append(k / everything)
        aps.append(sum(precisions) / len(precisions))
    return sum(aps) / len(aps), sum(ranks) / len(ranks)
