"""Riemannian SGD against per-row RMSprop on the WordNet animal subtree: MAP / mean rank
against epochs, one row per ``OPTIMIZER:LR`` setting and model.

Each row trains the closure under ``--root`` (default ``animal.n.01``: 4,017 nodes, 29,795
edges) from random points with the settings of the animal rows of docs/training.md (10-D
half-space, plain float64, batch 2,048, 50 negatives, burn-in of 10 epochs at lr x 0.01,
distance scale 4, constant lr, seed 0) and the row's ``optimizer`` (``"sgd"``: each row
moves ``lr |rgrad|_x``; ``"rmsprop"``: each row's gradient is divided by the root of its
running mean square Riemannian norm, so it moves about ``lr`` hyperbolic units per batch;
``hypermc.embed.TrainConfig``), on each model of ``--manifolds`` (default the half-space)
in plain float64 or, with ``--nc``, in MC arithmetic with that many components. MAP / mean
rank on all sources at each epoch of ``--at``.

Usage::

    python examples/animal_optimizers.py --csv nouns.csv --rows sgd:40 rmsprop:0.02 --threads 1
    python examples/animal_optimizers.py --csv nouns.csv --rows rmsprop:0.02 --manifolds halfspace ball lorentz
"""

from __future__ import annotations

import argparse

from near_negatives import prepare, print_table, run  # examples/near_negatives.py, beside this script

from hypermc import _results
from hypermc.embed.config import OPTIMIZERS
from hypermc.manifolds.registry import registered_manifolds


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
    p.add_argument("--manifolds", nargs="+", default=["halfspace"], choices=sorted(registered_manifolds()), help="models, one row each")
    p.add_argument("--nc", type=int, default=None, help="MC components (default: plain float64)")
    p.add_argument("--threads", type=int, default=1)
    _results.add_argument(p)
    args = p.parse_args()
    if args.nc is not None and args.nc < 1:
        p.error(f"--nc: components must be >= 1, got {args.nc}")
    graph, at = prepare(p, args)
    rows = []
    precision = "float64" if args.nc is None else f"nc={args.nc}"
    for optimizer, lr in args.rows:
        for model in args.manifolds:
            cells, seconds = run(graph, 0, at, lr, optimizer, model, args.nc)
            rows.append(f"| {model} {precision} | {optimizer} | {lr:g} | {' | '.join(cells)} | {seconds:.0f} |")
    print_table({"model": "---", "optimizer": "---", "lr": "---:"}, at, rows)


if __name__ == "__main__":
    _results.run(main)
