"""Link prediction with PyTorch Geometric convolutions on hyperbolic points, in float64 and MC.

The same data, split, decoder and metrics as ``examples/hgcn_link_prediction.py`` (a
balanced tree linked to its grandparents plus random edges; 85 / 5 / 10 % train /
validation / test edges, each held-out set paired with as many non-edges; Fermi–Dirac
decoder ``(r - d^2) / t`` with binary cross-entropy against fresh negatives each epoch).
The encoder is two HGCN-style layers built from stock PyTorch Geometric convolutions:
each maps its points to the tangent space at the origin (``logmap0``), applies a
``GCNConv`` or a ``GATConv`` over the training edges, a ReLU, and maps back with
``expmap0`` (Poincaré ball or Lorentz model, curvature -1). Identity node features.

Rows: plain float64, and MC (float64 components, ``nc = 2``): MC node features and the
layers' parameters made MC parameters with :func:`hypermc.nn.to_mc`, so every
aggregation (sums, GAT's max and softmax) runs in MC arithmetic. Both rows start from the
same float64 weights. The model kept is the one of the epoch with the best validation
ROC-AUC + AP; the table reports its metrics, the last training loss and the seconds of
training (after one untimed MC epoch on a copy, which loads the kernel libraries).

Run ``python examples/pyg_link_prediction.py --quick`` (under two minutes on one thread);
without ``--quick`` the graph is 3x larger and there are 4x more epochs. ``--help`` lists the
options. Needs ``pip install "hypermc[pyg]"`` (torch-geometric).
"""

from __future__ import annotations

import argparse
import copy
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import hypermc as hm
from hypermc import _results
from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.nn import functional as MF
from hypermc.nn import to_mc
from hypermc.nn.hyperbolic import proju0
from hypermc.optim import MCAdam

from hgcn_link_prediction import average_precision, make_graph, roc_auc, split_edges

MANIFOLDS = {"ball": PoincareBall, "lorentz": Lorentz}
CONVS = ("gcn", "gat")


def make_conv(name: str, in_features: int, out_features: int) -> nn.Module:
    """``GCNConv`` or ``GATConv`` (two heads, averaged); PyG is imported here, so that
    ``--help`` works without it."""
    from torch_geometric.nn import GATConv, GCNConv

    if name == "gcn":
        return GCNConv(in_features, out_features)
    return GATConv(in_features, out_features, heads=2, concat=False)


class TangentConv(nn.Module):
    """A PyG convolution in the tangent space at the origin:
    ``expmap0(proju0(relu(conv(logmap0(x), edge_index))))``.

    The points come from ``expmap0``, so the manifold's input checks (``check=False``)
    are skipped in the training loop."""

    def __init__(self, manifold, conv: nn.Module) -> None:
        super().__init__()
        self.manifold = manifold
        self.conv = conv

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        M = self.manifold
        v = torch.relu(self.conv(M.logmap0(x, check=False), edge_index))  # x comes from expmap0: no check
        return M.expmap0(proju0(M, v))


class LinkPredictor(nn.Module):
    """Two :class:`TangentConv` layers and the Fermi–Dirac decoder (``r = 2``, ``t = 1``)."""

    def __init__(self, manifold, conv: str, in_features: int, dim: int) -> None:
        super().__init__()
        self.manifold = manifold
        self.conv1 = TangentConv(manifold, make_conv(conv, in_features + 1, dim))
        self.conv2 = TangentConv(manifold, make_conv(conv, dim, dim))

    def encode(self, features: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        u = torch.cat([torch.zeros_like(features[:, :1]), features], dim=1)  # Lorentz: time coordinate 0
        x = self.manifold.expmap0(proju0(self.manifold, u))
        return self.conv2(self.conv1(x, edge_index), edge_index)

    def logits(self, h: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        d = self.manifold.dist(h[pairs[:, 0]], h[pairs[:, 1]], check=False)
        return 2.0 - d * d


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.approx() if isinstance(t, hm.MCTensor) else t


def _bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if isinstance(logits, hm.MCTensor):
        return MF.binary_cross_entropy_with_logits(logits, target)
    return F.binary_cross_entropy_with_logits(logits, target)


def _metrics(model: LinkPredictor, h: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> dict:
    with torch.no_grad():
        sp, sn = _plain(model.logits(h, pos)), _plain(model.logits(h, neg))
    return {"roc": roc_auc(sp, sn), "ap": average_precision(sp, sn)}


def train(data: dict, reference: LinkPredictor, *, nc: int | None, epochs: int, lr: float, eval_every: int, seed: int) -> dict:
    """Train a copy of ``reference`` (float64) in float64 (``nc=None``) or MC; the metrics
    of its best-validation epoch, the last loss and the training seconds."""
    model = copy.deepcopy(reference)
    n = data["n_nodes"]
    features = torch.eye(n, dtype=torch.float64)
    if nc is not None:
        to_mc(model, nc=nc)
        features = hm.mc(features, nc=nc)
    pos = data["train_pos"]
    edge_index = torch.cat([pos, pos.flip(1)]).T  # both directions
    opt = MCAdam(model.parameters(), lr=lr) if nc is not None else torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    pool = data["train_neg_pool"]
    target = torch.cat([torch.ones(len(pos)), torch.zeros(len(pos))]).to(torch.float64)
    best = {"score": -math.inf}
    start = time.perf_counter()
    loss = torch.zeros(())
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        h = model.encode(features, edge_index)
        neg = pool[torch.randint(len(pool), (len(pos),), generator=g)]
        loss = _bce(model.logits(h, torch.cat([pos, neg])), target)
        loss.backward()
        opt.step()
        if epoch % eval_every == 0 or epoch == epochs:
            with torch.no_grad():
                h = model.encode(features, edge_index)
            val = _metrics(model, h, data["val_pos"], data["val_neg"])
            if val["roc"] + val["ap"] > best["score"]:
                test = _metrics(model, h, data["test_pos"], data["test_neg"])
                best = {"score": val["roc"] + val["ap"], "val": val, "test": test, "epoch": epoch}
    return {**best, "loss": float(_plain(loss.detach())), "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="121 nodes (height 4), 30 epochs: under 2 minutes on one thread")
    parser.add_argument("--manifold", choices=sorted(MANIFOLDS), default="ball")
    parser.add_argument("--convs", default="gcn,gat", help=f"comma-separated, from {','.join(CONVS)}")
    parser.add_argument("--seed", type=int, default=0, help="graph, split, initial weights and negatives")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=None, help="default: 30 with --quick, else 120")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=1)
    _results.add_argument(parser)
    args = parser.parse_args(argv)
    convs = args.convs.split(",")
    for c in convs:
        if c not in CONVS:
            parser.error(f"unknown convolution {c!r}; choose from {', '.join(CONVS)}")
    torch.set_num_threads(args.threads)
    height = 4 if args.quick else 5
    epochs = args.epochs or (30 if args.quick else 120)
    n, edges = make_graph(3, height, ancestors=2, noise=0.05, seed=args.seed)
    data = split_edges(n, edges, seed=args.seed)
    M = MANIFOLDS[args.manifold]()
    print(
        f"PyG link prediction, {args.manifold}, balanced tree (branching 3, height {height}, {n} nodes, "
        f"{len(edges)} edges), dim {args.dim}, {epochs} epochs, Adam lr {args.lr}, seed {args.seed}"
    )
    print("| conv | method | val ROC-AUC | val AP | test ROC-AUC | test AP | best epoch | last loss | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for conv in convs:
        torch.manual_seed(args.seed)  # PyG layers draw their initial weights from the global generator
        reference = LinkPredictor(M, conv, n, args.dim).double()
        # untimed: one MC epoch on a copy loads and self-checks the kernel libraries (once per process)
        train(data, reference, nc=2, epochs=1, lr=args.lr, eval_every=1, seed=args.seed)
        for label, nc in (("fp64", None), ("MC fp64 nc=2", 2)):
            r = train(data, reference, nc=nc, epochs=epochs, lr=args.lr, eval_every=10, seed=args.seed)
            print(
                f"| {conv.upper()} | {label} | {r['val']['roc']:.4f} | {r['val']['ap']:.4f} | {r['test']['roc']:.4f} | "
                f"{r['test']['ap']:.4f} | {r['epoch']} | {r['loss']:.10f} | {r['seconds']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    _results.run(main)
