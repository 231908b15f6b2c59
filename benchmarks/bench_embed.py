"""Benchmark: seconds per training epoch of the mammals embedding (2-D halfspace).

Trains the WordNet mammal closure (1,180 nodes, 6,540 edges, 50 negatives per edge) for a
few epochs at each component count and prints the median wall-clock seconds per epoch,
the ratio to nc=1 and the projected time of the paper's 1000-epoch run. Burn-in and
post-burn-in epochs cost the same (only the negative distribution differs); the first
epoch (warm-up) is dropped.

The acceptance targets of the embedding pipeline: nc=2 at <= 0.9 s/epoch (1000 epochs
in <= 15 minutes) and nc=2 <= 3x nc=1, on a 2-core CPU.

Usage::

    python benchmarks/bench_embed.py                      # plain, nc 1 2 3; 8 epochs each
    python benchmarks/bench_embed.py --nc 1 2 --epochs 20 --threads 2
"""

from __future__ import annotations

import argparse
import statistics

import torch

from hypermc.data import load_mammals
from hypermc.embed import train
from hypermc.embed.train import DEFAULTS
from hypermc.manifolds import PoincareHalfspace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nc", nargs="+", default=["plain", "1", "2", "3"], help="component counts ('plain' = Tensor)")
    p.add_argument("--epochs", type=int, default=8, help="epochs per setting (the first is dropped)")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1 is robust on a loaded machine)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    graph = load_mammals()
    dtype = getattr(torch, args.dtype)
    print(f"mammals 2-D halfspace, {graph.num_edges} edges x {1 + DEFAULTS['negatives']} targets, "
          f"{args.dtype}, batch {args.batch_size}, threads {torch.get_num_threads()}, "
          f"median of {args.epochs - 1} epochs")
    print(f"{'nc':>6} {'s/epoch':>9} {'min':>8} {'vs nc=1':>8} {'1000 epochs':>12}")
    base = None
    for text in args.nc:
        nc = None if text == "plain" else int(text)
        r = train(graph, PoincareHalfspace(), dim=2, nc=nc, dtype=dtype, epochs=args.epochs,
                  batch_size=args.batch_size, burnin=args.epochs // 2, seed=0, progress=False)
        times = [h["seconds"] for h in r.history[1:]] or [r.history[0]["seconds"]]
        med = statistics.median(times)
        if nc == 1:
            base = med
        ratio = f"{med / base:8.2f}" if base else f"{'-':>8}"
        print(f"{text:>6} {med:9.3f} {min(times):8.3f} {ratio} {med * 1000 / 60:10.1f} min", flush=True)


if __name__ == "__main__":
    main()
