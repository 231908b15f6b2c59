"""Benchmark / study: the nested-shadow closure construction (``hypermc.embed.embed_closure``).

One markdown table, one row per (data, dim, model, coordinates): the bits the construction
asks for, the components used, the build time (``embed_closure`` wall clock), and the
reconstruction MAP / mean rank of :func:`hypermc.embed.evaluate` (all sources, or
``--sample`` sampled ones for the rows marked so), with the evaluation time.

Rows:

* mammals (1,180 nodes, depth 9) in 2-D and 10-D, half-space, ``nc`` auto;
* WordNet nouns (82,115 nodes, depth 19; needs WordNet or ``--nouns CSV``, see DATA.md;
  skipped with the reason otherwise) in 10-D and 2-D, half-space, ``nc = 2`` (the fused
  evaluation kernels serve ``nc >= 2``; 10-D needs only 46 bits);
* nouns in 2-D rounded to plain float64 (what a float64 construction would hold: the
  smallest shadows need 80 bits);
* nouns in the 10-D Poincaré ball, ``nc`` auto, and the same rounded to plain float64 (the
  ball stores the height ``R^2`` in ``1 - |x|^2``: 85 bits).

Usage::

    python benchmarks/bench_closure.py --threads 1                 # everything (~25 min on 2 cores)
    python benchmarks/bench_closure.py --only mammals              # seconds
    python benchmarks/bench_closure.py --nouns nouns.csv --sample 2000 --all-sources none
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time
from pathlib import Path

import torch

from hypermc import _results
from hypermc.data import load_edges, load_mammals, wordnet_closure
from hypermc.embed import embed_closure, evaluate
from hypermc.manifolds import PoincareBall, PoincareHalfspace


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def _row(name, graph, manifold, dim, nc, *, rounded=False, sample=None):
    start = time.perf_counter()
    r = embed_closure(graph, manifold, dim=dim, nc=nc)
    build = time.perf_counter() - start
    emb = r["embeddings"].approx() if rounded else r["embeddings"]
    coords = "plain float64 (rounded)" if rounded else f"float64, nc={r['nc']}"
    flat = emb if rounded else emb.components.reshape(emb.shape[0], -1)  # an MC point is its components
    distinct = int(torch.unique(flat, dim=0).shape[0])
    head = f"| {name} | {dim} | {manifold.name} | {coords} | {r['bits_needed']} | {build:.2f} | {distinct:,} |"
    try:
        m = evaluate(manifold, emb, graph.edges, sample=sample, seed=0, fast=True)
    except ValueError as err:  # rounded ball points on the boundary: refused, not evaluated
        return f"{head} refused by evaluate: {str(err).split(': ', 1)[1]} | | | |"
    sources = "all" if sample is None or sample >= graph.num_nodes else f"{m['num_sources']} sampled"
    return f"{head} {sources} | {m['map']:.4f} | {m['mean_rank']:.3f} | {m['seconds']:.1f} |"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["mammals", "nouns"], default=None)
    ap.add_argument("--nouns", default=None, help="nouns closure CSV (default: build it from WordNet)")
    ap.add_argument("--sample", type=int, default=2000, help="sampled sources for the rows that do not use all sources")
    ap.add_argument(
        "--all-sources", choices=["halfspace", "none"], default="halfspace", help="nouns half-space MC rows: all sources, or none"
    )
    ap.add_argument("--threads", type=int, default=None)
    _results.add_argument(ap)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    print(
        f"commit {_commit()}, torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} threads; "
        f"build = embed_closure seconds, distinct = distinct points of the coordinates evaluated"
    )
    print()
    print("| data | dim | model | coordinates | bits needed | build s | distinct points | sources | MAP | mean rank | eval s |")
    print("|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|")
    half, ball = PoincareHalfspace(), PoincareBall()
    if args.only in (None, "mammals"):
        g = load_mammals()
        for dim in (2, 10):
            print(_row("mammals", g, half, dim, "auto"), flush=True)
    if args.only in (None, "nouns"):
        try:
            g = load_edges(args.nouns) if args.nouns else wordnet_closure(None)
        except (LookupError, OSError) as err:
            print(f"| nouns | | | skipped: {err} | | | | | | | |")
            g = None
        if g is not None:
            full = None if args.all_sources == "halfspace" else args.sample
            print(_row("nouns", g, half, 10, 2, sample=full), flush=True)
            print(_row("nouns", g, half, 2, 2, sample=full), flush=True)
            print(_row("nouns", g, half, 2, 2, rounded=True, sample=args.sample), flush=True)
            print(_row("nouns", g, ball, 10, "auto", sample=args.sample), flush=True)
            print(_row("nouns", g, ball, 10, "auto", rounded=True, sample=args.sample), flush=True)
    print()
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    _results.run(main)
