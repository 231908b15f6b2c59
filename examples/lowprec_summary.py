"""The summary tables of the five low-precision experiments (README.md, docs/low_precision.md).

Runs the experiments of ``examples/lowprec_*.py`` -- linear regression, logistic
regression on the synthetic and the breast-cancer data, the MLP on breast cancer and on
reduced MNIST -- with each script's own settings (epochs, learning rate, loss scale) and
prints one markdown table, a row per experiment:

* ``--table loss`` (default): the *vs torch fp32* column of each experiment's table (final
  train loss, evaluated in float64, relative to torch float32) for every selected method
  but torch fp32 itself: README.md's low-precision summary (default methods torch fp16,
  torch fp32, MC fp16 nc=2);
* ``--table time``: the *ms/epoch* column of every selected method (default all seven;
  MNIST epochs are 79 steps of batch 128): docs/low_precision.md's time-per-epoch table.

The losses equal what the experiment scripts print for the same seed: every method starts
from the same weights and sees the same batches whichever other methods run. The times
are measured in this run. MNIST needs the IDX files (``python examples/fetch_mnist.py``).

Usage::

    python examples/lowprec_summary.py --threads 1                 # README.md's table (~10 min, 2 cores)
    python examples/lowprec_summary.py --table time --threads 1    # docs/low_precision.md's (~30 min)
    python examples/lowprec_summary.py --epochs 3 --experiments linear logistic-synthetic
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch

from hypermc import _results

import lowprec_common as C
import lowprec_linear_regression as linreg
import lowprec_logistic_regression as logreg
import lowprec_mlp as mlp

#: name -> (row label, run(args, methods) -> Experiment, loss scale of the experiment's script)
EXPERIMENTS = {
    "linear": ("linear regression", linreg.experiment, linreg.LOSS_SCALE),
    "logistic-synthetic": ("logistic regression, synthetic", lambda a, m: logreg.experiment("synthetic", a, m), 1.0),
    "logistic-breast-cancer": ("logistic regression, breast cancer", lambda a, m: logreg.experiment("breast_cancer", a, m), 1.0),
    "mlp-breast-cancer": ("MLP, breast cancer", lambda a, m: mlp.experiment("breast_cancer", a, m), 1.0),
    "mlp-mnist": ("MLP, reduced MNIST", lambda a, m: mlp.experiment("mnist", a, m), 1.0),
}
DEFAULT_METHODS = {"loss": "torch-fp16,torch-fp32,mc-fp16-nc2", "time": C.ALL_METHODS}


def percent(value: float) -> str:
    """A relative difference in %: 3 decimals below 10 %, then 1, then whole numbers with separators."""
    if abs(value) >= 100:
        return f"{value:+,.0f} %"
    return f"{value:+.1f} %" if abs(value) >= 10 else f"{value:+.3f} %"


def sig3(value: float) -> str:
    """Three significant digits, never in exponent notation (2102, 12.6, 0.660)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def loss_cells(result: C.Experiment, methods: list[C.Method]) -> dict[str, object]:
    ref = result.train_loss[C.REFERENCE]
    return {m.label: percent((result.train_loss[m.key] - ref) / ref * 100) for m in methods if m.key != C.REFERENCE}


def time_cells(result: C.Experiment, methods: list[C.Method]) -> dict[str, object]:
    ms = {r.method.key: r.seconds_per_epoch * 1e3 for r in result.results}
    return {m.label: sig3(ms[m.key]) for m in methods}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", choices=["loss", "time"], default="loss", help="loss: README.md's summary; time: ms/epoch")
    p.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated subset of: {C.ALL_METHODS} (default: {DEFAULT_METHODS['loss']} for loss, all for time)",
    )
    p.add_argument("--experiments", nargs="+", choices=list(EXPERIMENTS), default=list(EXPERIMENTS), help="rows (default: all five)")
    p.add_argument("--epochs", type=int, default=None, help="epochs of every experiment (default: each script's setting)")
    p.add_argument("--seed", type=int, default=0, help="seed of data, split, initial weights and batches")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--mnist-root", default="data/mnist", help="directory of the MNIST IDX files (default data/mnist)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _results.add_argument(p)
    args = p.parse_args()
    if args.methods is None:
        args.methods = DEFAULT_METHODS[args.table]
    methods = C.setup(argparse.Namespace(threads=args.threads, loss_scale=1.0, epochs=args.epochs, methods=args.methods))
    if args.table == "loss" and C.REFERENCE not in [m.key for m in methods]:
        p.error(f"--table loss compares with {C.REFERENCE}: add it to --methods")

    what = "final train loss (fp64 eval) vs torch fp32" if args.table == "loss" else "ms/epoch"
    print(
        f"low-precision summary, {what}: torch {torch.__version__}, {torch.get_num_threads()} threads, seed {args.seed}, "
        f"epochs {args.epochs or 'of each script'}",
        flush=True,
    )
    rows = []
    for name in args.experiments:
        label, run, loss_scale = EXPERIMENTS[name]
        ns = argparse.Namespace(
            epochs=args.epochs, seed=args.seed, loss_scale=loss_scale, quiet=args.quiet, between="tensor", mnist_root=args.mnist_root
        )
        start = time.perf_counter()
        result = run(ns, methods)
        print(f"  {name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        cells = loss_cells(result, methods) if args.table == "loss" else time_cells(result, methods)
        rows.append({"experiment": label, **cells})
    columns = list(rows[0])
    print()
    print(C.markdown(rows, columns, right=tuple(columns[1:])))


if __name__ == "__main__":
    _results.run(main)
