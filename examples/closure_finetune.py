"""Training from the closure construction on WordNet nouns with per-row RMSprop: MAP /
mean rank against epochs, one row per setting.

The construction (:func:`hypermc.embed.embed_closure`: 10-D half-space, nc = 2) places
every spanning-tree ancestor nearest; the nodes with a second parent are where its mean
rank comes from. Each row trains from those points with the nouns recipe of
docs/training.md (``optimizer="rmsprop"``, batch 32,768, 50 negatives, no burn-in, the
fast update, seed 0) and the row's ``lr``, ``rmsprop_eps`` and distance ``scale``
(defaults 0.003, 1e-12 and 4). MAP / mean rank on ``--eval-sample`` sampled sources (seed
0; the construction's own numbers in the first column) at each epoch of ``--at``. A row
is ``KEY=VALUE[,KEY=VALUE...]`` with keys ``lr``, ``rmsprop_eps`` and ``scale``.

Usage::

    python examples/closure_finetune.py --csv nouns.csv --threads 1
    python examples/closure_finetune.py --csv nouns.csv --rows lr=0.003 lr=0.01,scale=1 --at 10 20
"""

from __future__ import annotations

import argparse
import time

import torch
from near_negatives import print_table  # examples/near_negatives.py, beside this script

from hypermc import _results
from hypermc.data import load_edges, wordnet_closure
from hypermc.embed import embed_closure, evaluate, train
from hypermc.embed.config import RMSPROP_EPS
from hypermc.manifolds import PoincareHalfspace

#: What a row may set, with its default.
KEYS = {"lr": 0.003, "rmsprop_eps": RMSPROP_EPS, "scale": 4.0}
#: The rows of docs/closure.md: the learning rate, rmsprop_eps, the distance scale.
DEFAULT_ROWS = ["lr=0.003", "lr=0.01", "lr=0.01,rmsprop_eps=1e-6", "lr=0.01,scale=1", "lr=0.01,scale=16"]


def row(text: str) -> dict[str, float]:
    """``KEY=VALUE[,KEY=VALUE...]`` -> the row's settings (the others at their defaults)."""
    out = dict(KEYS)
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE items with KEY one of {', '.join(KEYS)}; got {item!r} in {text!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key} of {text!r}: expected a number, got {value!r}") from None
        if not out[key] > 0:
            raise argparse.ArgumentTypeError(f"{key} of {text!r}: expected a positive value, got {value!r}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--rows", type=row, nargs="+", default=[row(r) for r in DEFAULT_ROWS], help="KEY=VALUE[,KEY=VALUE...], one row each")
    p.add_argument("--at", type=int, nargs="+", default=[10, 20, 30, 50], help="epochs evaluated (the run stops at the last)")
    p.add_argument("--eval-sample", type=int, default=2000, help="sampled sources of each evaluation")
    p.add_argument("--batch-size", type=int, default=32768)
    p.add_argument("--threads", type=int, default=1)
    _results.add_argument(p)
    args = p.parse_args()
    if min(args.at) < 1:
        p.error(f"--at: epochs must be >= 1, got {args.at}")
    at = sorted(set(args.at))
    torch.set_num_threads(args.threads)
    graph = load_edges(args.csv) if args.csv else wordnet_closure(None)
    manifold = PoincareHalfspace()
    start = time.perf_counter()
    built = embed_closure(graph, manifold, dim=10, nc=2)
    table = built["embeddings"]

    def cell(points: torch.Tensor) -> str:
        m = evaluate(manifold, points, graph.edges, sample=args.eval_sample, seed=0, fast=True, progress=False)
        return f"{m['map']:.3f} / {m['mean_rank']:.2f}"

    construction = cell(table)
    built_s = time.perf_counter() - start
    print(f"{graph.num_nodes} nodes, {graph.num_edges} edges; construction ({built_s:.0f} s): {construction}", flush=True)
    lines = []
    for settings in args.rows:
        cells: list[str] = []

        def record(epoch: int, stats: dict, points: torch.Tensor, settings=settings, cells=cells) -> None:
            if epoch in at:
                cells.append(cell(points))
                print(f"{settings}, epoch {epoch}: {cells[-1]}", flush=True)

        began = time.perf_counter()
        run = train(
            graph,
            manifold,
            dim=10,
            nc=2,
            dtype=torch.float64,
            init=table.components,
            optimizer="rmsprop",
            lr=settings["lr"],
            rmsprop_eps=settings["rmsprop_eps"],
            scale=settings["scale"],
            batch_size=args.batch_size,
            negatives=50,
            burnin=0,
            lr_schedule="constant",
            epochs=max(at),
            seed=0,
            fast=True,
            device="cpu",
            callback=record,
            progress=False,
        )
        trained = run.seconds
        lines.append(
            f"| {settings['lr']:g} | {settings['rmsprop_eps']:g} | {settings['scale']:g} | {construction} | {' | '.join(cells)} "
            f"| {trained:.0f} | {time.perf_counter() - began:.0f} |"
        )
    print_table(dict.fromkeys(("lr", "rmsprop_eps", "scale", "construction"), "---:"), at, lines, ("train s", "wall s"))


if __name__ == "__main__":
    _results.run(main)
