"""Near negatives on the WordNet animal subtree: MAP / mean rank against epochs, one row per
setting of ``near_negatives``.

Each row trains the closure under ``--root`` (default ``animal.n.01``: 4,017 nodes, 29,795
edges) from random points with the settings of the animal rows of docs/training.md (10-D
half-space, plain float64, batch 2,048, 50 negatives, burn-in of 10 epochs at lr x 0.01,
distance scale 4, constant lr 40, seed 0) and ``near_negatives = K``: after burn-in, K of
the 50 negatives of each positive edge ``(u, v)`` are drawn among the other descendants
of ``v`` (``u``'s siblings and cousins under ``v``; :class:`hypermc.embed.sampler.NegativeSampler`),
the rest uniformly. MAP / mean rank on all sources at each epoch of ``--at``.

Usage::

    python examples/near_negatives.py --csv nouns.csv --near 0 5 10 --threads 1
    python examples/near_negatives.py --csv nouns.csv --near 0 5 --at 20 40 --write-results docs/results/training_animal_near.md
"""

from __future__ import annotations

import argparse
import time

import torch
from nouns import subtree  # examples/nouns.py, beside this script

from hypermc import _results
from hypermc.data import load_edges, wordnet_closure
from hypermc.embed import evaluate, train
from hypermc.manifolds.registry import manifold_from_name

#: The animal rows' settings that ``run`` passes to ``train`` unless told otherwise.
ANIMAL_SETTINGS = {"batch_size": 2048, "burnin": 10, "burnin_lr_mult": 0.01, "scale": 4.0, "negatives": 50}


def run(
    graph,
    near: int,
    at: list[int],
    lr: float,
    optimizer: str = "sgd",
    model: str = "halfspace",
    nc: int | None = None,
    **settings: float,
) -> tuple[list[str], float]:
    """One training run on the registered model ``model`` (plain float64 for ``nc=None``,
    else MC with ``nc`` components); the ``MAP / mean rank`` cells at the epochs ``at`` and
    its wall time. ``settings`` replace entries of :data:`ANIMAL_SETTINGS`. The update is
    the one ``train``'s rule picks for 10-D (the fast one)."""
    cells: list[str] = []
    manifold = manifold_from_name(model)

    def record(epoch: int, stats: dict, table: torch.Tensor) -> None:
        if epoch in at:
            m = evaluate(manifold, table, graph.edges, progress=False)
            cells.append(f"{m['map']:.3f} / {m['mean_rank']:.2f}")
            changed = "".join(f", {k} {v:g}" for k, v in settings.items())
            setting = f"{model}, nc {nc or 'plain'}, {optimizer}, lr {lr}{changed}, near {near}, epoch {epoch}"
            print(f"{setting}: MAP {m['map']:.4f}, mean rank {m['mean_rank']:.3f}", flush=True)

    start = time.perf_counter()
    train(
        graph,
        manifold,
        dim=10,
        nc=nc,
        dtype=torch.float64,
        lr=lr,
        **(ANIMAL_SETTINGS | settings),
        near_negatives=near,
        optimizer=optimizer,
        seed=0,
        lr_schedule="constant",
        epochs=max(at),
        device="cpu",
        callback=record,
        progress=False,
    )
    return cells, time.perf_counter() - start


def print_table(lead: dict[str, str], at: list[int], rows: list[str], tail: tuple[str, ...] = ("wall s",)) -> None:
    """The Markdown table of ``rows``: the ``lead`` columns (name -> alignment), one column
    per epoch of ``at`` and the ``tail`` columns (right-aligned), after a blank line."""
    print()
    print("| " + " | ".join([*lead, *(f"epoch {e}" for e in at), *tail]) + " |")
    print("|" + "".join(f"{a}|" for a in lead.values()) + "---:|" * (len(at) + len(tail)))
    print("\n".join(rows))


def prepare(p: argparse.ArgumentParser, args: argparse.Namespace, label: str = "") -> tuple:
    """The checked ``--at`` epochs and the subtree graph of ``--csv`` / ``--root`` (threads set,
    one line printed): the set-up of this script and of ``examples/animal_optimizers.py``."""
    if min(args.at) < 1:
        p.error(f"--at: epochs must be >= 1, got {args.at}")
    torch.set_num_threads(args.threads)
    graph = subtree(load_edges(args.csv) if args.csv else wordnet_closure(None), args.root)
    print(f"{args.root}: {graph.num_nodes} nodes, {graph.num_edges} edges; {label}{args.threads} thread(s)")
    return graph, sorted(set(args.at))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--root", default="animal.n.01")
    p.add_argument("--near", type=int, nargs="+", default=[0, 5, 10], help="values of near_negatives, one row each")
    p.add_argument("--at", type=int, nargs="+", default=[40, 100, 200], help="epochs evaluated (the run stops at the last)")
    p.add_argument("--lr", type=float, default=40.0)
    p.add_argument("--threads", type=int, default=1)
    _results.add_argument(p)
    args = p.parse_args()
    graph, at = prepare(p, args, f"lr {args.lr}, ")
    rows = []
    for near in args.near:
        cells, seconds = run(graph, near, at, args.lr)
        rows.append(f"| {near} | {' | '.join(cells)} | {seconds:.0f} |")
    print_table({"near negatives (of 50)": "---:"}, at, rows)


if __name__ == "__main__":
    _results.run(main)
