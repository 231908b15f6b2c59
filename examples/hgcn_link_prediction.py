"""Link prediction with a 2-layer hyperbolic GCN (HGCN) in plain float32, float64 and MC.

The graph is a balanced tree (a hierarchy) with a few random extra edges, generated
from a fixed seed. Its edges are split into train / validation / test edges (85 / 5 /
10 %), each held-out set paired with as many non-edges. The model is HGCN's link
predictor: identity node features mapped onto the manifold with ``expmap0``, two
:class:`hypermc.nn.HypGraphConv` layers over the training adjacency (mean aggregation,
self-loops), and the Fermi–Dirac decoder ``p(edge) = 1 / (exp((d^2 - r) / t) + 1)``
trained with binary cross-entropy against one fresh set of non-edges per epoch. The
same code runs all rows; only the dtype of the parameters and points changes, and all
rows start from the same initial weights (drawn in float64, rounded to float32 for the
float32 row, stored exactly for MC). The model kept is the one of the epoch with the
best validation ROC-AUC + AP; the table reports its validation and test ROC-AUC and
average precision (computed here in torch; scores are ``-d^2``, ties counted half).

Run ``python examples/hgcn_link_prediction.py`` (a few minutes on one CPU thread);
``--help`` lists the options.
"""

from __future__ import annotations

import argparse
import math
import time

import networkx as nx
import torch
import torch.nn.functional as F
from torch import nn

import hypermc as hm
from hypermc import _results
from hypermc._progress import progress_bar, show_progress
from hypermc.embed.plot import plot_losses
from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.nn import HypGraphConv
from hypermc.nn import functional as MF
from hypermc.nn.hyperbolic import proju0
from hypermc.optim import MCAdam

MANIFOLDS = {"ball": PoincareBall, "lorentz": Lorentz}
#: name -> (component dtype, nc or None for plain tensors)
METHODS = {
    "fp32": (torch.float32, None),
    "fp64": (torch.float64, None),
    "mc-fp32-nc2": (torch.float32, 2),
    "mc-fp64-nc2": (torch.float64, 2),
}
#: method -> its name in the printed table (docs/gnn.md's spelling)
LABELS = {"fp32": "fp32", "fp64": "fp64", "mc-fp32-nc2": "MC fp32 nc=2", "mc-fp64-nc2": "MC fp64 nc=2"}


# ----------------------------------------------------------------------------- data


def make_graph(branching: int = 3, height: int = 5, ancestors: int = 2, noise: float = 0.05, seed: int = 0) -> tuple[int, torch.Tensor]:
    """A hierarchy: a balanced tree whose nodes are linked to their ancestors up to
    ``ancestors`` levels up (1: the tree itself; ``height``: its transitive closure, as
    in WordNet's), plus ``noise * (#hierarchy edges)`` random extra edges.

    Returns:
        ``(n_nodes, edges)``: edges ``(E, 2)`` long, each undirected edge once with
        ``i < j``, sorted.
    """
    tree = nx.balanced_tree(branching, height)
    n = tree.number_of_nodes()
    parent = nx.predecessor(tree, 0)  # node -> [its parent] (root: [])
    edges = set()
    for v in range(n):
        a = v
        for _ in range(ancestors):
            if not parent[a]:
                break
            a = parent[a][0]
            edges.add((min(a, v), max(a, v)))
    g = torch.Generator().manual_seed(seed)
    target = len(edges) + round(noise * len(edges))
    while len(edges) < target:
        i, j = torch.randint(n, (2,), generator=g).tolist()
        if i != j:
            edges.add((min(i, j), max(i, j)))
    return n, torch.tensor(sorted(edges), dtype=torch.long)


def split_edges(n: int, edges: torch.Tensor, val: float = 0.05, test: float = 0.10, seed: int = 0) -> dict:
    """Train / val / test positive edges and non-edges (HGCN's protocol).

    The validation and test sets get as many non-edges as positive edges; the remaining
    non-edges are the pool from which training negatives are drawn.
    """
    g = torch.Generator().manual_seed(seed)
    pos = edges[torch.randperm(len(edges), generator=g)]
    n_val, n_test = round(val * len(pos)), round(test * len(pos))
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[edges[:, 0], edges[:, 1]] = True
    i, j = torch.triu_indices(n, n, offset=1)
    keep = ~adj[i, j]
    neg = torch.stack([i[keep], j[keep]], dim=1)
    neg = neg[torch.randperm(len(neg), generator=g)]
    return {
        "n_nodes": n,
        "val_pos": pos[:n_val],
        "test_pos": pos[n_val : n_val + n_test],
        "train_pos": pos[n_val + n_test :],
        "val_neg": neg[:n_val],
        "test_neg": neg[n_val : n_val + n_test],
        "train_neg_pool": neg[n_val + n_test :],
    }


def adjacency(n: int, edges: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Symmetric 0/1 sparse COO adjacency of ``edges`` with self-loops."""
    loops = torch.arange(n).unsqueeze(1).expand(n, 2)
    idx = torch.cat([edges, edges.flip(1), loops]).T
    return torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1], dtype=dtype), (n, n), check_invariants=True).coalesce()


# -------------------------------------------------------------------------- metrics


def _ranks(scores: torch.Tensor) -> torch.Tensor:
    """1-based ranks, ties given their average rank."""
    values, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    return (ends - (counts.to(torch.float64) - 1) / 2)[inverse]


def roc_auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties 1/2
    (the Mann–Whitney U statistic; equals ``sklearn.metrics.roc_auc_score``)."""
    r = _ranks(torch.cat([pos, neg]).to(torch.float64))
    n_pos, n_neg = len(pos), len(neg)
    return float((r[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Average precision ``sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds,
    highest first (``sklearn.metrics.average_precision_score``'s definition)."""
    scores = torch.cat([pos, neg]).to(torch.float64)
    labels = torch.cat([torch.ones(len(pos)), torch.zeros(len(neg))]).to(torch.float64)
    values, inverse = torch.unique(scores, return_inverse=True)  # ascending
    tp = torch.zeros(len(values), dtype=torch.float64).index_add_(0, inverse, labels).flip(0).cumsum(0)
    total = torch.zeros(len(values), dtype=torch.float64).index_add_(0, inverse, torch.ones_like(labels))
    predicted = total.flip(0).cumsum(0)
    recall = tp / len(pos)
    precision = tp / predicted
    gain = torch.diff(recall, prepend=torch.zeros(1, dtype=torch.float64))
    return float((gain * precision).sum())


# ---------------------------------------------------------------------------- model


class HGCNLinkPredictor(nn.Module):
    """Two :class:`~hypermc.nn.HypGraphConv` layers and a Fermi–Dirac decoder.

    Node features ``(N, F)`` are given one leading zero coordinate (the Lorentz time
    coordinate; an unused extra coordinate on the ball), made tangent at the origin and
    mapped onto the manifold with ``expmap0`` — the same code for every model.
    """

    def __init__(
        self,
        manifold,
        in_features: int,
        dim: int = 16,
        *,
        r: float = 2.0,
        t: float = 1.0,
        nc: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        self.manifold = manifold
        self.r, self.t = r, t
        kw = dict(nc=nc, dtype=dtype)
        self.conv1 = HypGraphConv(manifold, in_features + 1, dim, torch.relu, **kw)
        self.conv2 = HypGraphConv(manifold, dim, dim, torch.relu, **kw)

    def encode(self, features: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        u = torch.cat([torch.zeros_like(features[:, :1]), features], dim=1)
        x = self.manifold.expmap0(proju0(self.manifold, u))
        return self.conv2(self.conv1(x, adj), adj)

    def logits(self, h: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Fermi–Dirac logits ``(r - d^2) / t`` (``sigmoid`` of them is the edge probability)."""
        d = self.manifold.dist(h[pairs[:, 0]], h[pairs[:, 1]])
        return (self.r - d * d) / self.t


def _bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if isinstance(logits, hm.MCTensor):
        return MF.binary_cross_entropy_with_logits(logits, target)
    return F.binary_cross_entropy_with_logits(logits, target)


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.approx() if isinstance(t, hm.MCTensor) else t


def _metrics(model, h, pos, neg) -> dict:
    with torch.no_grad():
        sp, sn = _plain(model.logits(h, pos)), _plain(model.logits(h, neg))
    return {"roc": roc_auc(sp, sn), "ap": average_precision(sp, sn)}


def train_link_prediction(
    data: dict,
    *,
    manifold: str = "ball",
    dtype: torch.dtype = torch.float64,
    nc: int | None = None,
    dim: int = 16,
    epochs: int = 120,
    lr: float = 0.01,
    eval_every: int = 10,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Train one model and return the metrics of its best-validation epoch.

    Args:
        data: output of :func:`split_edges`.
        manifold: ``"ball"`` or ``"lorentz"`` (curvature -1).
        dtype: (component) dtype of parameters, features and adjacency.
        nc: ``None`` for plain tensors, or the number of components (MC parameters,
            MC points).
        dim: point dimension of both layers.
        epochs, lr: Adam steps (``torch.optim.Adam``; :class:`hypermc.optim.MCAdam` for MC).
        eval_every: validation interval in epochs.
        seed: initial weights (drawn in float64) and the training negatives.

    Returns:
        dict with ``val_roc``, ``val_ap``, ``test_roc``, ``test_ap``, ``best_epoch``,
        ``loss`` (last training loss), ``seconds``.
    """
    M = MANIFOLDS[manifold]()
    n = data["n_nodes"]
    torch.manual_seed(seed)
    reference = HGCNLinkPredictor(M, n, dim, dtype=torch.float64)
    model = HGCNLinkPredictor(M, n, dim, nc=nc, dtype=dtype)
    with torch.no_grad():
        for p, q in zip(model.parameters(), reference.parameters()):
            p.copy_(q if nc is not None else q.to(dtype))
    features = torch.eye(n, dtype=dtype)
    if nc is not None:
        features = hm.mc(features, nc=nc)
    adj = adjacency(n, data["train_pos"], dtype)
    opt = MCAdam(model.parameters(), lr=lr) if nc is not None else torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    pos = data["train_pos"]
    pool = data["train_neg_pool"]
    target = torch.cat([torch.ones(len(pos)), torch.zeros(len(pos))]).to(dtype)
    best = {"score": -math.inf}
    start = time.perf_counter()
    bar = progress_bar(progress, epochs, unit="epoch", desc=f"{manifold} {dtype} nc={nc}")
    history = []
    for epoch in range(1, epochs + 1):
        bar.update(1)
        model.train()
        opt.zero_grad()
        h = model.encode(features, adj)
        neg = pool[torch.randint(len(pool), (len(pos),), generator=g)]
        loss = _bce(model.logits(h, torch.cat([pos, neg])), target)
        loss.backward()
        opt.step()
        history.append({"epoch": epoch, "loss": float(_plain(loss.detach()))})
        if epoch % eval_every == 0 or epoch == epochs:
            model.eval()
            with torch.no_grad():
                h = model.encode(features, adj)
            val = _metrics(model, h, data["val_pos"], data["val_neg"])
            if val["roc"] + val["ap"] > best["score"]:
                test = _metrics(model, h, data["test_pos"], data["test_neg"])
                best = {
                    "score": val["roc"] + val["ap"],
                    "val_roc": val["roc"],
                    "val_ap": val["ap"],
                    "test_roc": test["roc"],
                    "test_ap": test["ap"],
                    "best_epoch": epoch,
                }
    bar.close()
    seconds = time.perf_counter() - start
    best.pop("score")
    return {**best, "loss": history[-1]["loss"], "seconds": seconds, "history": history}


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifold", choices=sorted(MANIFOLDS), default="ball")
    parser.add_argument("--methods", default="fp32,fp64,mc-fp64-nc2", help=f"comma-separated, from {','.join(METHODS)}")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (graph, split, weights)")
    parser.add_argument("--branching", type=int, default=3)
    parser.add_argument("--height", type=int, default=5)
    parser.add_argument("--ancestors", type=int, default=2, help="link nodes to ancestors up to this many levels up")
    parser.add_argument("--noise", type=float, default=0.05, help="extra random edges per hierarchy edge")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=120)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quiet", action="store_true", help="no progress bar (none anyway when stderr is not a terminal)")
    parser.add_argument("--curve", default="hgcn_curve.png", help="PNG of every run's training loss against the epoch ('' for none)")
    _results.add_argument(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    methods = args.methods.split(",")
    for m in methods:
        if m not in METHODS:
            parser.error(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    seeds = [int(s) for s in args.seeds.split(",")]

    print(
        f"HGCN link prediction, {args.manifold}, balanced tree (branching {args.branching}, height "
        f"{args.height}, ancestors {args.ancestors} levels up) + {args.noise:.0%} noise edges, dim {args.dim}, "
        f"{args.epochs} epochs, Adam lr {args.lr}"
    )
    print("| model | method | seed | val ROC-AUC | val AP | test ROC-AUC | test AP | best epoch | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    model = {"ball": "ball", "lorentz": "Lorentz"}[args.manifold]
    if args.curve and not args.curve.lower().endswith(".png"):
        parser.error(f"--curve: expected a file name ending in .png, got {args.curve!r}")
    runs = []
    for seed in seeds:
        n, edges = make_graph(args.branching, args.height, args.ancestors, args.noise, seed)
        data = split_edges(n, edges, seed=seed)
        for m in methods:
            dtype, nc = METHODS[m]
            r = train_link_prediction(
                data,
                manifold=args.manifold,
                dtype=dtype,
                nc=nc,
                dim=args.dim,
                epochs=args.epochs,
                lr=args.lr,
                seed=seed,
                progress=show_progress(args.quiet),
            )
            print(
                f"| {model} | {LABELS[m]} | {seed} | {r['val_roc']:.4f} | {r['val_ap']:.4f} | {r['test_roc']:.4f} | "
                f"{r['test_ap']:.4f} | {r['best_epoch']} | {r['seconds']:.1f} |",
                flush=True,
            )
            runs.append((f"{LABELS[m]} seed {seed}: test AP {r['test_ap']:.4f}", r["history"]))
    if args.curve and runs:
        plot_losses(runs, args.curve, title=f"HGCN link prediction, {model}: training loss")
        print(f"wrote {args.curve}")


if __name__ == "__main__":
    _results.run(main)
