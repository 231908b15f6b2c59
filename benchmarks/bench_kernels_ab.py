"""Benchmark: the fused CPU kernels of two checkouts, called alternately in one process.

``bench_ops.py`` compares MC with native ops; on a shared machine its timings of two
versions of a kernel, taken in two runs, differ by more than the change being measured
(20-40 % from run to run on the project's 2-core VM). Here both versions' libraries are
loaded into one process and each kernel is called on the same operands, base and current
alternating (in ABBA order), so a change of machine load affects both; the table shows the median time
per element of each and their ratio, and whether the two give the same bits wherever both
accept an element (a kernel flags the elements its torch path recomputes).

``--base`` is another checkout of hypermc (e.g. ``git worktree add /tmp/base <commit>``);
each side builds its libraries (``python -m hypermc doctor --build`` does it ahead) in a
subprocess of its own, which prints the library's path, so the two versions' Python code
never mix. One thread; operands as ``eft.renormalize`` of random float64 expansions.

Usage::

    git worktree add /tmp/base HEAD~3
    python benchmarks/bench_kernels_ab.py --base /tmp/base
    python benchmarks/bench_kernels_ab.py --base /tmp/base --nc 3 4 --ops exp sin_cos --repeats 301 --size 32768
    python benchmarks/bench_kernels_ab.py --base /tmp/base --ops div sqrt  # the arith library's
    python benchmarks/bench_kernels_ab.py --base /tmp/base --markdown --write-results docs/results/kernels_ab.md
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from hypermc import _results
from hypermc.mcf import eft

#: unary kernels of the float64 elementary library: name -> outputs per component count
UNARY = {"exp": 1, "expm1": 1, "tanh": 1, "sinh_cosh": 2, "sin_cos": 2}
#: kernels of the float64 arith library: x / y, and sqrt(x) on the range of arith._sqrt_range
ARITH = ("div", "sqrt")
_LIB_PATH = (
    "import sys, torch; from hypermc.mcf import native; "
    "k = native._load(torch.float64, int(sys.argv[1]), sys.argv[2]); "
    "print(k._name if k is not None else 'none: ' + native.status(torch.float64, int(sys.argv[1]), sys.argv[2]))"
)


def library(checkout: Path, nc: int, part: str = "elementary") -> str:
    """The path of ``checkout``'s float64 ``part`` library (``"elementary"`` or
    ``"arith"``) at ``nc`` (built and self-checked there, in a subprocess that imports that
    checkout only)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, "-c", _LIB_PATH, str(nc), part]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=checkout)
    path = out.stdout.strip().splitlines()[-1]
    if path.startswith("none:"):
        raise SystemExit(f"bench_kernels_ab: no float64 nc={nc} {part} library in {checkout}: {path[6:]}")
    return path


def operands(n: int, nc: int, seed: int) -> torch.Tensor:
    """``(nc, n)`` planar components: leading values in ``[-2, 2)``, normalised tails."""
    g = torch.Generator().manual_seed(seed)
    comps = [torch.rand(n, dtype=torch.float64, generator=g) * 4 - 2]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(n, dtype=torch.float64, generator=g) * 2.0**-53)
    return eft.renormalize(comps, nc).movedim(-1, 0).contiguous()


def _arguments(op: str, nc: int, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, ok: torch.Tensor) -> tuple[list, list]:
    """The ctypes argument types and values of ``mc_{op}_f64_{nc}`` on planar ``x`` (and
    ``y``, the divisor): the signatures of :mod:`hypermc.mcf.native`."""
    i64, vp, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    n = x.shape[1]
    head, tail = [i64, vp, i64, i64], [vp, i64, vp]
    values = [n, x.data_ptr(), 1, n]
    if op == "div":
        return head + [vp, i64, i64] + tail, values + [y.data_ptr(), 1, n, out.data_ptr(), n, ok.data_ptr()]
    if op == "sqrt":
        from hypermc.mcf import arith

        lo, hi = arith._sqrt_range(torch.float64, nc)
        return head + [dbl, dbl] + tail, values + [lo, hi, out.data_ptr(), n, ok.data_ptr()]
    return head + tail, values + [out.data_ptr(), n, ok.data_ptr()]


def compare(paths: dict[str, str], op: str, nc: int, x: torch.Tensor, repeats: int) -> tuple[float, float, bool, int, int]:
    """Median ns per element of ``base`` and ``current``, same bits where both accept, and
    the elements each flags."""
    n = x.shape[1]
    nout = UNARY.get(op, 1) * nc
    operand = x.abs() if op == "sqrt" else x
    divisor = x.flip(1).contiguous()
    calls, results = {}, {}
    for side, path in paths.items():
        fn = getattr(ctypes.CDLL(path), f"mc_{op}_f64_{nc}")
        out, ok = torch.empty(nout, n, dtype=torch.float64), torch.empty(n, dtype=torch.uint8)
        fn.argtypes, values = _arguments(op, nc, operand, divisor, out, ok)
        fn.restype = ctypes.c_int64
        calls[side] = (fn, values, out, ok)
    times: dict[str, list[float]] = {side: [] for side in paths}
    order = list(calls)
    for rep in range(repeats):
        for side in order if rep % 2 == 0 else order[::-1]:  # ABBA: neither side always runs second
            fn, values, out, ok = calls[side]
            t = time.perf_counter()
            bad = fn(*values)
            times[side].append(time.perf_counter() - t)
            results[side] = bad
    both = calls["base"][3].bool() & calls["current"][3].bool()
    same = torch.equal(calls["base"][2][:, both].view(torch.int64), calls["current"][2][:, both].view(torch.int64))
    base, cur = (statistics.median(times[s]) * 1e9 / n for s in ("base", "current"))
    return base, cur, same, results["base"], results["current"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, required=True, help="another hypermc checkout (the baseline)")
    p.add_argument("--nc", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--ops", nargs="+", default=list(UNARY), choices=[*UNARY, *ARITH], help="kernels (div, sqrt: the arith library)")
    p.add_argument("--size", type=int, default=1 << 15, help="elements per call (default 32768: cache-resident)")
    p.add_argument("--repeats", type=int, default=201, help="calls per side, alternating")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    _results.add_argument(p)
    args = p.parse_args()
    if args.repeats < 1 or args.size < 1:
        p.error(f"--repeats and --size must be >= 1; got {args.repeats} and {args.size}")
    torch.set_num_threads(1)
    here = Path(__file__).resolve().parent.parent
    commit = subprocess.run(["git", "-C", str(args.base), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    setup = f"{args.size} elements, medians of {args.repeats} calls per side, ABBA order, 1 thread"
    print(f"{_results.NOTE}base: commit {commit or 'unknown'}; {setup}")
    head = ["op", "nc", "base ns/el", "current ns/el", "current/base", "same bits", "flagged (base / current)"]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(["---", "---:", "---:", "---:", "---:", "---", "---:"]) + "|")
    else:
        print(f"{head[0]:<10} {head[1]:>2} {head[2]:>11} {head[3]:>14} {head[4]:>13}  {head[5]}  {head[6]}")
    for nc in args.nc:
        parts = {"arith" if op in ARITH else "elementary" for op in args.ops}
        paths = {part: {"base": library(args.base.resolve(), nc, part), "current": library(here, nc, part)} for part in sorted(parts)}
        x = operands(args.size, nc, args.seed)
        for op in args.ops:
            base, cur, same, fb, fc = compare(paths["arith" if op in ARITH else "elementary"], op, nc, x, args.repeats)
            cells = [op, str(nc), f"{base:.1f}", f"{cur:.1f}", f"{cur / base:.3f}x", "yes" if same else "NO", f"{fb} / {fc}"]
            if args.markdown:
                print("| " + " | ".join(cells) + " |")
            else:
                print(f"{cells[0]:<10} {nc:>2} {cells[2]:>11} {cells[3]:>14} {cells[4]:>13}  {cells[5]:>9}  {cells[6]}")


if __name__ == "__main__":
    _results.run(main)
