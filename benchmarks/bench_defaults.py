"""Mammals with the trainer's own hyperparameters: ``train(graph, manifold, dim=...)``, no other setting.

One JSON line per run, appended to ``--out``: the manifold, ``dim``, ``nc``, seed, the
hyperparameters the rule picked (:func:`hypermc.embed.rule_hyperparameters`), MAP and
mean rank on all sources, the training wall time and CPU time (all threads; on a shared
machine the wall time depends on the load, the CPU time much less), the evaluation wall
time, and the run's context: command, commit (flagged where the sources differ from it), torch,
machine, thread count, load average at start and end.

``--set KEY=VALUE ...`` (repeatable) overrides hyperparameters: each ``--set`` group is one
setting, run for every seed, and the rule picks only the keys it does not give (a search
around the rule: docs/training.md's 10-D table). Keys: ``epochs``, ``burnin``, ``scale``,
``lr``, ``lr_end_mult``, ``batch_size``, ``negatives`` (numbers).

After the runs it prints their markdown table (``--write-results PATH`` also writes it to
a results fragment, as every benchmark does); ``--table FILE`` prints the rows of a
JSON-lines file as such a table.

Usage::

    python benchmarks/bench_defaults.py --dim 10 --seeds 0 1 2 --threads 1 --write-results docs/results/mammals_defaults_10d.md
    python benchmarks/bench_defaults.py --dim 10 --manifold ball --nc plain --seeds 0 --threads 1 --out runs.jsonl
    python benchmarks/bench_defaults.py --table runs.jsonl
    python benchmarks/bench_defaults.py --dim 10 --set scale=2 lr=5 --set scale=3 lr=5 epochs=300 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

from hypermc import _results
from hypermc.data import load_mammals
from hypermc.embed import evaluate, train
from hypermc.embed.config import RULE_KEYS
from hypermc.embed.train import MANIFOLDS


def _commit() -> str:
    """The commit, flagged where the sources (hypermc, benchmarks, examples) differ from it
    (:func:`hypermc._results.commit`)."""
    return _results.commit().removeprefix("commit ")


_COLUMNS = ("manifold", "dim", "nc", "seed", "scale", "epochs", "fast", "map", "mean_rank", "threads", "train_s", "train_cpu_s", "eval_s")
#: what ``--set`` may override (their values are numbers), and their type
SETTABLE = {"epochs": int, "burnin": int, "scale": float, "lr": float, "lr_end_mult": float, "batch_size": int, "negatives": int}
#: the columns a table of ``--set`` runs adds after ``seed``
_SET_COLUMNS = ("burnin", "lr", "lr_end_mult", "batch_size")


def parse_set(items: list[str]) -> dict[str, float | int]:
    """One ``--set`` group as keyword arguments of ``train``.

    Example:
        >>> parse_set(["scale=3", "epochs=300"])
        {'scale': 3.0, 'epochs': 300}
    """
    out: dict[str, float | int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in SETTABLE:
            raise ValueError(f"--set: expected KEY=VALUE with KEY one of {', '.join(SETTABLE)}; got {item!r}")
        try:
            out[key] = SETTABLE[key](value)
        except ValueError:
            raise ValueError(f"--set: {key} must be a {SETTABLE[key].__name__}; got {value!r}") from None
    return out


def table(path: str) -> str:
    """The rows of a JSON-lines file written by this script, as a markdown table (with load and commit)."""
    with open(path) as f:
        return markdown([json.loads(line) for line in f if line.strip()], commit=True)


def markdown(rows: list[dict], *, commit: bool) -> str:
    """``rows`` as a markdown table: the columns (with the ``--set`` keys where a row has
    them), the load average and (``commit``) each row's commit."""
    columns = list(_COLUMNS)
    if any("batch_size" in r for r in rows):  # runs with --set
        columns[4:4] = [k for k in _SET_COLUMNS if k not in columns]
    head = [*columns, "load (start-end)"] + (["commit"] if commit else [])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.get(k, "")) for k in columns] + [f"{r['load_start']}-{r['load_end']}"] + ([r["commit"]] if commit else [])
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", default=None, help="print this JSON-lines file as a markdown table and exit")
    p.add_argument("--dim", type=int, default=None)
    p.add_argument("--manifold", default="halfspace", choices=["halfspace", "ball", "lorentz"])
    p.add_argument("--nc", default="2", help="components, or 'plain' for float64 tensors")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's, i.e. OMP_NUM_THREADS)")
    p.add_argument("--out", default=None, help="JSON-lines file to append the runs to")
    p.add_argument(
        "--set",
        nargs="+",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help=f"one setting that overrides the rule's {', '.join(SETTABLE)} (repeat for more settings)",
    )
    _results.add_argument(p)
    args = p.parse_args(argv)
    try:
        settings = [parse_set(group) for group in args.set] if args.set else [{}]
    except ValueError as e:
        p.error(str(e))
    if args.table is not None:
        print(table(args.table))
        return 0
    if args.dim is None:
        p.error("--dim is required (or --table FILE)")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    nc = None if args.nc == "plain" else int(args.nc)
    graph = load_mammals()
    manifold = MANIFOLDS[args.manifold]()
    context = {
        "command": "python benchmarks/bench_defaults.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "commit": _commit(),
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
        "threads": torch.get_num_threads(),
    }
    rows = []
    for setting, seed in [(setting, seed) for setting in settings for seed in args.seeds]:
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        r = train(graph, manifold, dim=args.dim, nc=nc, seed=seed, progress=False, **setting)
        train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        m = evaluate(r.manifold, r.embeddings, graph.edges, fast=True)
        row = {
            "manifold": args.manifold,
            "dim": args.dim,
            "nc": args.nc,
            "seed": seed,
            **{k: r.config[k] for k in RULE_KEYS},
            **({k: r.config[k] for k in _SET_COLUMNS} if args.set else {}),
            "map": round(m["map"], 4),
            "mean_rank": round(m["mean_rank"], 3),
            "train_s": round(train_s, 1),
            "train_cpu_s": round(train_cpu, 1),
            "eval_s": round(time.perf_counter() - t1, 1),
            "load_start": round(load0, 2),
            "load_end": round(os.getloadavg()[0], 2),
            **context,
        }
        line = json.dumps(row)
        print(line, flush=True)
        rows.append(row)
        if args.out is not None:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    print()
    print(markdown(rows, commit=False))  # the fragment's header names the commit
    return 0


if __name__ == "__main__":
    _results.run(main)
