"""Benchmark: cost of the membership check (``check=True``) of the manifold entry points.

Two tables, one thread, float64, measured in one run:

1. **entry points**: median seconds of ``dist`` / ``expmap`` / ``logmap`` with
   ``check=False`` and ``check=True`` on a batch of points (plain and nc=2), and their
   ratio: what the default costs a caller in eager mode.
2. **training** (mammals, 1,180 nodes, 10-D halfspace and ball, nc=2): the trainer's
   inner loop does not call the checked entry points (it uses ``batch_distance`` and
   the optimizer passes ``check=False``); ``train`` checks its initial table once. The
   table gives the seconds of that one ``check_point`` of the table and the median
   seconds of one training epoch, and their ratio: the overhead per run.

Usage::

    python benchmarks/bench_check.py [--batch 4096] [--repeat 20] [--epochs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hypermc import _results
from hypermc.data import load_mammals
from hypermc.embed import train
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace


def _median(f, repeat):
    f()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def entry_points(batch: int, repeat: int) -> None:
    print("| model | op | nc | batch | check=False (ms) | check=True (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    gen = torch.Generator().manual_seed(0)
    for M in (PoincareBall(), PoincareHalfspace(), Lorentz()):
        for nc in (None, 2):
            x = M.random(batch, 10, nc=nc, dtype=torch.float64, generator=gen)
            y = M.random(batch, 10, nc=nc, dtype=torch.float64, generator=gen)
            u = M.logmap(x, y)
            ops = {
                "dist": lambda c: M.dist(x, y, check=c),
                "expmap": lambda c: M.expmap(x, u, check=c),
                "logmap": lambda c: M.logmap(x, y, check=c),
            }
            for name, op in ops.items():
                off = _median(lambda: op(False), repeat)
                on = _median(lambda: op(True), repeat)
                print(f"| {M.name} | {name} | {nc or 'plain'} | {batch} | {off * 1e3:.3f} | {on * 1e3:.3f} | {on / off:.2f} |")


def training(epochs: int) -> None:
    graph = load_mammals()
    print()
    print("| model | nc | check_point of the table (ms) | s/epoch (median) | check / epoch |")
    print("|---|---|---|---|---|")
    for M in (PoincareHalfspace(), PoincareBall()):
        res = train(graph, manifold=M, dim=10, nc=2, epochs=epochs, burnin=0, seed=0, progress=False)
        per_epoch = statistics.median(h["seconds"] for h in res.history[1:] or res.history)
        t = _median(lambda: M.check_point(res.embeddings), 10)
        print(f"| {M.name} | 2 | {t * 1e3:.3f} | {per_epoch:.3f} | {t / per_epoch:.2e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=3)
    _results.add_argument(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    entry_points(args.batch, args.repeat)
    training(args.epochs)


if __name__ == "__main__":
    _results.run(main)
