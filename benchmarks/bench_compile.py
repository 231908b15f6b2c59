"""Benchmark: ``torch.compile`` on MC code vs eager MC and vs native torch, in one run.

For a few functions (an elementwise expression, an exp/log chain, a Poincaré-ball
distance), component dtypes float32/float64 and nc = 1..4, it times in the same run

* *native eager* / *native compiled*: the function on plain tensors of the component
  dtype, eagerly and under ``torch.compile`` (default Inductor backend);
* *MC eager*: the function on MCTensors, eagerly;
* *MC per-op*: compiled with ``HYPERMC_FUSE=0``, every MC op one opaque
  ``hypermc::mc_op`` call running the eager kernel (the mechanism before fusion);
* *MC compiled*: compiled as users get it: connected elementwise MC ops fused into one
  ``hypermc::mc_fused`` node with one generated kernel on the CPU (see
  ``hypermc/mcf/compile.py``);

and checks that both compiled MC results equal the eager one bit for bit (column
``same``). It prints the medians, the ratios to native compiled, and the compile time of
the MC function (first call, fused kernels' C++ builds included unless cached).

Usage::

    python benchmarks/bench_compile.py                     # default table
    python benchmarks/bench_compile.py --size 100000 --nc 2 3 --dtypes float64
    python benchmarks/bench_compile.py --functions "x*y+x/(y*y+1)" --size 1000000
    python benchmarks/bench_compile.py --device cuda
    python benchmarks/bench_compile.py --nc 1 2 3 4 --markdown   # the table of docs/numerics.md
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

import hypermc as hm
from hypermc import _results
from hypermc.manifolds import PoincareBall

_BALL = PoincareBall()


def _expr(x, y):
    return x * y + x / (y * y + 1.0)


def _exp_log(x, y):
    return torch.log(torch.exp(y) + x * x + 1.0)


def _ball_dist(x, y):
    return _BALL.dist(x, y, check=False)


FUNCTIONS: dict[str, Callable] = {"x*y+x/(y*y+1)": _expr, "log(exp(y)+x*x+1)": _exp_log, "ball dist": _ball_dist}


def _operands(name: str, size: int, dtype: torch.dtype, device: str, gen: torch.Generator):
    if name == "ball dist":
        x = torch.rand(size // 4, 4, generator=gen, dtype=torch.float64) * 0.4
        y = torch.rand(size // 4, 4, generator=gen, dtype=torch.float64) * 0.4
    else:
        x = torch.randn(size, generator=gen, dtype=torch.float64)
        y = torch.randn(size, generator=gen, dtype=torch.float64)
    return x.to(dtype=dtype, device=device), y.to(dtype=dtype, device=device)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


#: ``--stat``: how the repeats of a timing are summarised (the minimum is the run least
#: disturbed by other jobs on a shared machine).
STATS: dict[str, Callable] = {"median": statistics.median, "min": min}
_stat = statistics.median


def _median_time(fn: Callable, args, device: str, repeats: int) -> float:
    fn(*args)
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        _sync(device)
        times.append(time.perf_counter() - t0)
    return _stat(times)


def _same_bits(a, b) -> bool:
    a, b = (t.components if isinstance(t, hm.MCTensor) else t for t in (a, b))
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


#: ``--markdown``: the columns of the tables in docs/numerics.md (native eager time left out).
MARKDOWN_HEADER = (
    "| function | dtype | nc | native compiled ms | MC eager ms | MC per-op ms | MC compiled ms | per-op / native comp "
    "| MC comp / native comp | compile s | same |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def _sig3(value: float) -> str:
    """Three significant digits, never in exponent notation (1409, 12.7, 0.139)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def _compiled(fn, fuse: bool):
    """``torch.compile(fn)`` traced with MC fusion on or off (``HYPERMC_FUSE``; the
    setting is part of the compiled-graph cache key)."""
    torch._dynamo.reset()
    old = os.environ.get("HYPERMC_FUSE")
    os.environ["HYPERMC_FUSE"] = "1" if fuse else "0"
    compiled = torch.compile(fn, fullgraph=True, dynamic=False)

    def call(*args):
        os.environ["HYPERMC_FUSE"] = "1" if fuse else "0"
        try:
            return compiled(*args)
        finally:
            if old is None:
                os.environ.pop("HYPERMC_FUSE", None)
            else:
                os.environ["HYPERMC_FUSE"] = old

    return call


def run(
    size: int,
    dtypes: list[torch.dtype],
    ncs: list[int],
    device: str,
    repeats: int,
    markdown: bool = False,
    functions: list[str] | None = None,
) -> None:
    print(
        f"torch {torch.__version__}, {platform.machine()} {platform.processor() or ''}, device {device}, "
        f"threads {torch.get_num_threads()}, {size} elements, {_stat.__name__} of {repeats}"
    )
    header = (
        f"{'function':>18} {'dtype':>8} {'nc':>3} {'native ms':>10} {'nat.comp ms':>11} {'MC ms':>9} {'per-op ms':>9} "
        f"{'MC comp ms':>10} {'per-op/nat':>10} {'comp/nat.comp':>13} {'compile s':>9} {'same':>5}"
    )
    print(MARKDOWN_HEADER if markdown else header)
    gen = torch.Generator().manual_seed(0)
    for name, fn in FUNCTIONS.items():
        if functions is not None and name not in functions:
            continue
        for dtype in dtypes:
            xs, ys = _operands(name, size, dtype, device, gen)
            torch._dynamo.reset()
            native_c = torch.compile(fn, fullgraph=True, dynamic=False)
            t_native = _median_time(fn, (xs, ys), device, repeats)
            t_native_c = _median_time(native_c, (xs, ys), device, repeats)
            for nc in ncs:
                x = hm.mc(xs, nc=nc, dtype=dtype)
                y = hm.mc(ys, nc=nc, dtype=dtype)
                eager = fn(x, y)
                per_op = _compiled(fn, fuse=False)
                same = _same_bits(per_op(x, y), eager)
                t_per_op = _median_time(per_op, (x, y), device, repeats)
                mc_c = _compiled(fn, fuse=True)
                t0 = time.perf_counter()
                out_c = mc_c(x, y)
                _sync(device)
                t_compile = time.perf_counter() - t0
                same = same and _same_bits(out_c, eager)
                t_mc = _median_time(fn, (x, y), device, repeats)
                t_mc_c = _median_time(mc_c, (x, y), device, repeats)
                dname = str(dtype).removeprefix("torch.")
                if markdown:
                    cells = [_sig3(t * 1e3) for t in (t_native_c, t_mc, t_per_op, t_mc_c)] + [
                        _sig3(t_per_op / t_native_c) + "x",
                        _sig3(t_mc_c / t_native_c) + "x",
                    ]
                    print(f"| {name} | {dname} | {nc} | {' | '.join(cells)} | {t_compile:.1f} | {same} |", flush=True)
                    continue
                print(
                    f"{name:>18} {dname:>8} {nc:>3} {t_native * 1e3:>10.3f} "
                    f"{t_native_c * 1e3:>11.3f} {t_mc * 1e3:>9.2f} {t_per_op * 1e3:>9.2f} {t_mc_c * 1e3:>10.2f} "
                    f"{t_per_op / t_native_c:>9.1f}x {t_mc_c / t_native_c:>12.1f}x {t_compile:>9.1f} {str(same):>5}",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--size", type=int, default=100_000, help="elements per operand")
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    p.add_argument("--nc", nargs="+", type=int, default=[1, 2, 3, 4])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--markdown", action="store_true", help="print a markdown table in the layout of docs/numerics.md")
    p.add_argument("--functions", nargs="+", choices=sorted(FUNCTIONS), help="only these functions (default: all)")
    p.add_argument("--stat", choices=sorted(STATS), default="median", help="summary of the repeats of each timing")
    _results.add_argument(p)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    global _stat
    _stat = STATS[args.stat]
    run(args.size, [getattr(torch, d) for d in args.dtypes], args.nc, args.device, args.repeats, args.markdown, args.functions)


if __name__ == "__main__":
    _results.run(main)
