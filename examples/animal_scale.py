"""The distance scale, learning rate and sampling of Riemannian SGD on the WordNet animal
subtree: MAP / mean rank against epochs, one row per setting.

Each row trains the closure under ``--root`` (default ``animal.n.01``: 4,017 nodes, 29,795
edges) from random points, 10-D half-space, plain float64, SGD with a constant learning
rate, seed 0, with the animal rows' settings (``examples/near_negatives.py``: batch 2,048,
50 negatives, burn-in of 10 epochs at lr x 0.01, distance scale 4) except what the row
changes. A row is ``KEY=VALUE[,KEY=VALUE...]`` with keys ``lr`` (required), ``scale``,
``batch_size``, ``burnin``, ``burnin_lr_mult`` and ``negatives``. MAP / mean rank on all
sources at each epoch of ``--at``. The default rows are the study of docs/training.md:
the scale at several learning rates, then the burn-in, batch size and number of negatives
at scale 4.

Usage::

    python examples/animal_scale.py --csv nouns.csv --threads 1
    python examples/animal_scale.py --csv nouns.csv --rows scale=4,lr=40 scale=8,lr=10 --at 40 100
"""

from __future__ import annotations

import argparse

from near_negatives import prepare, print_table, run  # examples/near_negatives.py, beside this script

from hypermc import _results

#: Keys a row may set, with their types (``lr`` is required).
KEYS = {"lr": float, "scale": float, "batch_size": int, "burnin": int, "burnin_lr_mult": float, "negatives": int}

#: The study of docs/training.md: the scale at several learning rates, then burn-in,
#: batch size and negatives at scale 4 (lr scaled with the batch: the loss is a batch mean).
DEFAULT_ROWS = [
    "scale=0.5,lr=80",
    "scale=0.5,lr=320",
    "scale=1,lr=80",
    "scale=1,lr=160",
    "scale=2,lr=40",
    "scale=4,lr=10",
    "scale=4,lr=20",
    "scale=4,lr=40",
    "scale=4,lr=80",
    "scale=8,lr=10",
    "scale=4,lr=20,burnin=0",
    "scale=4,lr=20,burnin=20",
    "scale=4,lr=20,burnin_lr_mult=0.1",
    "scale=4,lr=5,batch_size=512",
    "scale=4,lr=80,batch_size=8192",
    "scale=4,lr=20,negatives=10",
    "scale=4,lr=20,negatives=200",
]


def row(text: str) -> dict[str, float]:
    """``KEY=VALUE[,KEY=VALUE...]`` -> the row's settings (``lr`` required)."""
    out: dict[str, float] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE items with KEY one of {', '.join(KEYS)}; got {item!r} in {text!r}")
        try:
            out[key] = KEYS[key](value)
        except ValueError:
            kind = "an integer" if KEYS[key] is int else "a number"
            raise argparse.ArgumentTypeError(f"{key} of {text!r}: expected {kind}, got {value!r}") from None
        if not out[key] >= (0 if key in ("burnin", "burnin_lr_mult") else 1e-300):
            raise argparse.ArgumentTypeError(f"{key} of {text!r}: expected a positive value, got {value!r}")
    if "lr" not in out:
        raise argparse.ArgumentTypeError(f"every row sets lr; got {text!r}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--root", default="animal.n.01")
    p.add_argument("--rows", type=row, nargs="+", default=[row(r) for r in DEFAULT_ROWS], help="KEY=VALUE[,KEY=VALUE...], one row each")
    p.add_argument("--at", type=int, nargs="+", default=[40, 100, 200], help="epochs evaluated (the run stops at the last)")
    p.add_argument("--threads", type=int, default=1)
    _results.add_argument(p)
    args = p.parse_args()
    graph, at = prepare(p, args, "SGD, ")
    lines = []
    for settings in args.rows:
        settings = dict(settings)
        lr = settings.pop("lr")
        cells, seconds = run(graph, 0, at, lr, "sgd", **settings)
        scale = settings.pop("scale", 4.0)
        batch = settings.get("batch_size", 2048)
        other = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in settings.items())
        lines.append(f"| {scale:g} | {lr:g} ({lr / batch:.2g}) | {other} | {' | '.join(cells)} | {seconds:.0f} |")
    print_table({"scale": "---:", "lr (per edge)": "---:", "other": "---"}, at, lines)


if __name__ == "__main__":
    _results.run(main)
