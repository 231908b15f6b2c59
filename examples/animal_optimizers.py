"""Riemannian SGD against per-row RMSprop on the WordNet animal subtree: MAP / mean rank
against epochs, one row per ``OPTIMIZER:LR`` setting.

Each row trains the closure under ``--root`` (default ``animal.n.01``: 4,017 nodes, 29,795
edges) from random points with the settings of the animal rows of docs/training.md (10-D
half-space, plain float64, batch 2,048, 50 negatives, burn-in of 10 epochs at lr x 0.01,
distance scale 4, constant lr, seed 0) and the row's ``optimizer`` (``"sgd"``: each row
moves ``lr |rgrad|_x``; ``"rmsprop"``: each row's gradient is divided by the root of its
running mean square Riemannian norm, so it moves about ``lr`` hyperbolic units per batch;
``hypermc.embed.TrainConfig``). MAP / mean rank on all sources at each epoch of ``--at``.

Usage::

    python examples/animal_optimizers.py --csv nouns.csv --rows sgd:40 rmsprop:0.02 --threads 1
"""

from __future__ import annotations

import argparse

from near_negatives import prepare, run  # examples/near_negatives.py, beside this script

from hypermc import _results
from hypermc.embed.config import OPTIMIZERS


def setting(text: str) -> tuple[str, float]:
    """``OPTIMIZER:LR`` -> ``(optimizer, lr)``."""
    name, _, lr = text.partition(":")
    if name not in OPTIMIZERS or not lr:
        raise argparse.ArgumentTypeError(f"expected OPTIMIZER:LR with OPTIMIZER one of {', '.join(OPTIMIZERS)}; got {text!r}")
    try:
        value = float(lr)
    except ValueError:
        raise argparse.ArgumentTypeError(f"LR of {text!r} must be a number") from None
    return name, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--root", default="animal.n.01")
    p.add_argument("--rows", type=setting, nargs="+", default=[("sgd", 40.0), ("rmsprop", 0.02)], help="OPTIMIZER:LR, one row each")
    p.add_argument("--at", type=int, nargs="+", default=[20, 40, 100, 200], help="epochs evaluated (the run stops at the last)")
    p.add_argument("--threads", type=int, default=1)
    _results.add_argument(p)
    args = p.parse_args()
    graph, at = prepare(p, args)
    rows = []
    for optimizer, lr in args.rows:
        cells, seconds = run(graph, 0, at, lr, optimizer)
        rows.append(f"| {optimizer} | {lr:g} | {' | '.join(cells)} | {seconds:.0f} |")
    print()
    print("| optimizer | lr | " + " | ".join(f"epoch {e}" for e in at) + " | wall s |")
    print("|---|---:|" + "---:|" * len(at) + "---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    _results.run(main)
