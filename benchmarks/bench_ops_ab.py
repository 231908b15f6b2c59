"""Benchmark: every elementwise MC op of two checkouts, through the public API, in turns.

``bench_kernels_ab.py`` compares two versions of one fused kernel; this script compares
what a user calls (``x + y``, ``torch.exp(x)`` on MCTensors), so it also sees what
happens around the kernels: conversions, layouts, which path an input takes. Each side
runs in a subprocess of its own that imports only its checkout (``PYTHONPATH``), times
every case (native op and MC op alternating, medians) and prints them with a digest of
the MC results. The sides take turns for ``--rounds`` rounds and each case keeps its
fastest round, so a change of machine load between rounds affects both sides.

Operands: full-length expansions (``eft.renormalize`` of ``nc`` random components, each
about ``u`` times the one before) with leading values in the ranges of ``RANGES``; the
second operand of add, mul and div is drawn the same way. The table shows the MC times
of both sides, their ratio, each side's ratio to the native op, and whether the two give
the same bits (equal SHA-256 digests of the result components).

Usage::

    git worktree add /tmp/base <commit>
    python benchmarks/bench_ops_ab.py --base /tmp/base
    python benchmarks/bench_ops_ab.py --base /tmp/base --ops exp sinh --dtypes float64 --nc 4 --rounds 6
    python benchmarks/bench_ops_ab.py --base /tmp/base --markdown --write-results docs/results/ops_ab.md
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from hypermc import _results

#: Leading-component ranges of the operands (second operand of div: the same range). The
#: worker runs on the other checkout's hypermc, which may predate the helpers of
#: ``bench_ops.py``, so it uses the public API and ``eft.renormalize`` only.
RANGES = {
    "add": (-10.0, 10.0),
    "mul": (-10.0, 10.0),
    "div": (0.5, 10.0),
    "sqrt": (0.1, 10.0),
    "exp": (-5.0, 5.0),
    "log": (0.1, 10.0),
    "expm1": (-5.0, 5.0),
    "log1p": (-0.5, 10.0),
    "sin": (-10.0, 10.0),
    "cos": (-10.0, 10.0),
    "tan": (-1.5, 1.5),
    "sinh": (-5.0, 5.0),
    "cosh": (-5.0, 5.0),
    "tanh": (-5.0, 5.0),
    "asinh": (-10.0, 10.0),
    "acosh": (1.01, 10.0),
    "atanh": (-0.9, 0.9),
}
BINARY = ("add", "mul", "div")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _operand(n: int, nc: int, dtype: torch.dtype, lo: float, hi: float, g: torch.Generator):
    """An MCTensor of ``n`` full-length expansions with leading values in ``[lo, hi)``."""
    import hypermc as hm
    from hypermc.mcf.eft import renormalize

    x = torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo
    eps = torch.finfo(dtype).eps
    comps = [x.to(dtype)] + [(x * eps**k * (torch.rand(n, generator=g, dtype=torch.float64) - 0.5)).to(dtype) for k in range(1, nc)]
    return hm.MCTensor.from_components(renormalize(torch.stack(comps, -1), nc))


def _time(fn, budget: float) -> float:
    """Median seconds of ``fn()`` after a warm-up: at least 5 calls, at most 15 or ``budget`` s."""
    fn()
    times: list[float] = []
    end = time.perf_counter() + budget
    while len(times) < 5 or (len(times) < 15 and time.perf_counter() < end):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def worker(ops: list[str], dtypes: list[str], ncs: list[int], size: int, budget: float, seed: int) -> dict:
    """``{case: [mc seconds, native seconds, digest]}`` in this process's checkout."""
    torch.set_num_threads(1)
    out = {}
    for dname in dtypes:
        dtype = DTYPES[dname]
        for nc in ncs:
            for op in ops:
                g = torch.Generator().manual_seed(seed)
                lo, hi = RANGES[op]
                a, b = _operand(size, nc, dtype, lo, hi, g), _operand(size, nc, dtype, lo, hi, g)
                pa, pb = a.components[..., 0].clone(), b.components[..., 0].clone()
                f = {"add": torch.add, "mul": torch.mul, "div": torch.div}.get(op) or getattr(torch, op)
                mc_args, native_args = ((a, b), (pa, pb)) if op in BINARY else ((a,), (pa,))
                mc, native = functools.partial(f, *mc_args), functools.partial(f, *native_args)
                digest = hashlib.sha256(mc().components.contiguous().numpy().tobytes()).hexdigest()[:16]
                out[f"{op}/{dname}/{nc}"] = [_time(mc, budget), _time(native, budget), digest]
    return out


def _side(checkout: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--size", str(args.size), "--budget", str(args.budget)]
    cmd += ["--seed", str(args.seed), "--ops", *args.ops, "--dtypes", *args.dtypes, "--nc", *map(str, args.nc)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=checkout)
    if proc.returncode != 0:
        raise SystemExit(f"bench_ops_ab: the worker in {checkout} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, help="another hypermc checkout (the baseline)")
    p.add_argument("--ops", nargs="+", default=list(RANGES), choices=list(RANGES))
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    p.add_argument("--nc", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--size", type=int, default=1 << 20, help="elements per operand (default 1M)")
    p.add_argument("--rounds", type=int, default=4, help="turns per side; each case keeps its fastest (default 4)")
    p.add_argument("--budget", type=float, default=1.5, help="seconds per case and side in a round (>= 5 calls)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    _results.add_argument(p)
    args = p.parse_args()
    bad = [n for n in args.nc if n < 2]
    if bad or args.size < 1 or args.rounds < 1:
        p.error(f"--nc must be >= 2, --size and --rounds >= 1; got --nc {args.nc}, --size {args.size}, --rounds {args.rounds}")
    if args.worker:
        print(json.dumps(worker(args.ops, args.dtypes, args.nc, args.size, args.budget, args.seed)))
        return
    if args.base is None:
        p.error("--base is required (another hypermc checkout)")
    here = Path(__file__).resolve().parent.parent
    sides = {"base": args.base.resolve(), "current": here}
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else reversed(list(sides)):  # neither side always second
            runs[side].append(_side(sides[side], args))
    commit = subprocess.run(["git", "-C", str(args.base), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"{_results.NOTE}base: commit {commit or 'unknown'}; {args.size:,} elements, fastest of {args.rounds} rounds per side, 1 thread")
    head = ["op", "dtype", "nc", "base ms", "current ms", "current/base", "base / native", "current / native", "same bits"]
    rows = []
    for case in runs["base"][0]:
        op, dname, nc = case.split("/")
        best = {s: min(run[case][0] for run in runs[s]) for s in sides}
        native = {s: min(run[case][1] for run in runs[s]) for s in sides}
        digests = {run[case][2] for s in sides for run in runs[s]}
        rows.append(
            [
                op,
                dname,
                nc,
                f"{best['base'] * 1e3:.3g}",
                f"{best['current'] * 1e3:.3g}",
                f"{best['current'] / best['base']:.2f}x",
                f"{best['base'] / native['base']:.1f}x",
                f"{best['current'] / native['current']:.1f}x",
                "yes" if len(digests) == 1 else "no",
            ]
        )
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 3 or i == len(head) - 1 else "---:" for i in range(len(head))) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        print("  ".join(head))
        for row in rows:
            print("  ".join(row))


if __name__ == "__main__":
    _results.run(main)
