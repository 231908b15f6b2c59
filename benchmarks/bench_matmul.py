"""Benchmark: multi-component matrix products vs the native product of the component dtype.

For each size of the MCTensor paper (Dot 5000; MV (5000x500)@500; Matmul (500x200)@(200x50);
AddMM 100 + (500x200)@(200x100); BMM (16x500x200)@(16x200x50)) and 1024^3, and for float32
and float64 components with nc = 1, 2, 3, it times the native op on plain tensors and the
kernel of :mod:`hypermc.mcf.matmul` on component tensors, MC @ Tensor (the plain operand
passed as one component) and MC @ MC, in the same run. Native and MC calls alternate
(warm-up first), so a change of machine load affects both; the table shows medians of the
wall-clock times and the ratio of the medians, plus the number of GEMMs of the plan.
``--cpu-time`` adds the ratio of process CPU times (robust on a shared machine).

Usage::

    python benchmarks/bench_matmul.py                 # full table
    python benchmarks/bench_matmul.py --quick         # fewer repeats, no 1024^3 float64 nc=3
    python benchmarks/bench_matmul.py --sizes matmul mm1024 --dtypes float32 --nc 2
    python benchmarks/bench_matmul.py --sizes matmul mm1024 --nc 2 --threads 1 --cpu-time --markdown

``--markdown`` also prints the ratios as a table in the layout of docs/benchmarks.md: a
row per size and dtype (and nc, when several), the columns MC @ Tensor and MC @ MC (wall
ratio; the CPU-time ratio in brackets with ``--cpu-time``) and the target.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch

from hypermc import _results
from hypermc.mcf import matmul as mcmm
from hypermc.mcf.eft import float_format, renormalize

# name -> (native op, shapes of the operands a, b, optional addend c)
SIZES: dict[str, tuple[str, tuple, tuple, tuple | None]] = {
    "dot5000": ("dot", (5000,), (5000,), None),
    "mv5000x500": ("mv", (5000, 500), (500,), None),
    "matmul": ("mm", (500, 200), (200, 50), None),
    "addmm": ("addmm", (500, 200), (200, 100), (100,)),
    "bmm": ("bmm", (16, 500, 200), (16, 200, 50), None),
    "mm1024": ("mm", (1024, 1024), (1024, 1024), None),
}
LABELS = {
    "dot5000": "Dot 5000",
    "mv5000x500": "MV (5000x500)@500",
    "matmul": "Matmul (500x200)@(200x50)",
    "addmm": "AddMM 100+(500x200)@(200x100)",
    "bmm": "BMM (16x500x200)@(16x200x50)",
    "mm1024": "Matmul 1024^3",
}


#: The first speed issue's targets for nc = 2 (MC time / native time, one thread).
TARGETS: dict[tuple[str, str, int], int] = {("matmul", "float32", 2): 20, ("mm1024", "float32", 2): 20, ("mm1024", "float64", 2): 40}


def random_mc(shape: tuple, nc: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random normalised expansions with full tails: sum of nc random terms, renormalised."""
    p = float_format(dtype).p
    terms = [(torch.randn(shape, generator=gen, dtype=torch.float64) * 2.0 ** (-p * i)).to(dtype) for i in range(nc)]
    return renormalize(terms, nc)


def native_call(op: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> Callable[[], object]:
    fn = {"dot": torch.dot, "mv": torch.mv, "mm": torch.mm, "bmm": torch.bmm}
    if op == "addmm":
        return lambda: torch.addmm(c, a, b)
    return lambda: fn[op](a, b)


def mc_call(op: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> Callable[[], object]:
    fn = {"dot": mcmm.dot, "mv": mcmm.mv, "mm": mcmm.mm, "bmm": mcmm.bmm}
    if op == "addmm":
        return lambda: mcmm.addmm(c, a, b)
    return lambda: fn[op](a, b)


def time_pair(f: Callable, g: Callable, repeats: int, warmup: int):
    """Alternate f and g; medians of wall-clock and CPU times for each."""
    for _ in range(warmup):
        f()
        g()
    wall_f, wall_g, cpu_f, cpu_g = [], [], [], []
    for _ in range(repeats):
        for fn, wall, cpu in ((f, wall_f, cpu_f), (g, wall_g, cpu_g)):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    med = statistics.median
    return med(wall_f), med(wall_g), med(cpu_f), med(cpu_g)


def fmt_time(t: float) -> str:
    if t < 1e-3:
        return f"{t * 1e6:7.1f} us"
    if t < 1:
        return f"{t * 1e3:7.2f} ms"
    return f"{t:7.2f} s "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], default=["float32", "float64"])
    parser.add_argument("--nc", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--cpu-time", action="store_true", help="also show CPU-time ratios")
    parser.add_argument("--quick", action="store_true", help="3 repeats, 1 warm-up, skip float64 nc=3 at 1024^3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="also print the ratios as a markdown table (docs/benchmarks.md)")
    _results.add_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.repeats, args.warmup = 3, 1
    gen = torch.Generator().manual_seed(args.seed)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats} alternating runs after {args.warmup} warm-up"
    )
    cols = f"{'size':32s} {'dtype':8s} {'nc':>2s} {'operands':8s} {'native':>10s} {'MC':>10s} {'ratio':>7s} {'GEMMs':>5s}"
    if args.cpu_time:
        cols += f" {'cpu ratio':>9s}"
    print(cols)
    print("-" * len(cols))
    cells: dict[tuple[str, str, int], dict[str, str]] = {}  # --markdown: (size, dtype, nc) -> {operands: cell}
    for size in args.sizes:
        op, sa, sb, sc = SIZES[size]
        for dname in args.dtypes:
            dtype = getattr(torch, dname)
            a0 = torch.randn(sa, generator=gen, dtype=torch.float64).to(dtype)
            b0 = torch.randn(sb, generator=gen, dtype=torch.float64).to(dtype)
            c0 = None if sc is None else torch.randn(sc, generator=gen, dtype=torch.float64).to(dtype)
            native = native_call(op, a0, b0, c0)
            for nc in args.nc:
                if args.quick and size == "mm1024" and dtype == torch.float64 and nc >= 3:
                    continue
                a = random_mc(sa, nc, dtype, gen)
                kinds = [("MC@T", b0.unsqueeze(-1))]
                if nc > 1:
                    kinds.append(("MC@MC", random_mc(sb, nc, dtype, gen)))
                for kind, b in kinds:
                    c = None if c0 is None else c0.unsqueeze(-1)
                    mc = mc_call(op, a, b, c)
                    t_nat, t_mc, c_nat, c_mc = time_pair(native, mc, args.repeats, args.warmup)
                    plan = mcmm.matmul_plan(a, b)
                    line = (
                        f"{LABELS[size]:32s} {dname:8s} {nc:2d} {kind:8s} {fmt_time(t_nat)} "
                        f"{fmt_time(t_mc)} {t_mc / t_nat:6.1f}x {plan.gemms:5d}"
                    )
                    cell = f"{_sig3(t_mc / t_nat)}x"
                    if args.cpu_time:
                        line += f" {c_mc / max(c_nat, 1e-9):8.1f}x"
                        cell += f" ({_sig3(c_mc / max(c_nat, 1e-9))}x)"
                    cells.setdefault((size, dname, nc), {})[kind] = cell
                    print(line, flush=True)
    if args.markdown:
        print()
        print(markdown_table(cells, several_nc=len(args.nc) > 1))


def _sig3(value: float) -> str:
    """Three significant digits, never in exponent notation (1522, 21.9, 3.10)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def markdown_table(cells: dict[tuple[str, str, int], dict[str, str]], several_nc: bool) -> str:
    """A row per (size, dtype[, nc]): the MC @ Tensor and MC @ MC ratios and the target."""
    head = ["product", "dtype", *(["nc"] if several_nc else []), "MC @ Tensor", "MC @ MC", "target"]
    align = ["---", "---", *(["---:"] if several_nc else []), "---:", "---:", "---"]
    rows = [f"| {' | '.join(head)} |", f"|{'|'.join(align)}|"]
    for (size, dname, nc), kinds in cells.items():
        target = TARGETS.get((size, dname, nc))
        row = [LABELS[size], dname, *([str(nc)] if several_nc else []), kinds.get("MC@T", "-"), kinds.get("MC@MC", "-")]
        rows.append(f"| {' | '.join([*row, f'<= {target}x' if target else ''])} |")
    return "\n".join(rows)


if __name__ == "__main__":
    _results.run(main)
