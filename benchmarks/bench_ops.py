"""Benchmark: elementwise multi-component kernels vs the native op of the component dtype.

For add, mul, div, sqrt (``hypermc.mcf.arith``) and exp, log (``hypermc.mcf.elementary``,
when that module exists; sin, cos, tan, expm1, log1p and the hyperbolic and inverse
hyperbolic functions on request with ``--ops``, arguments in the ranges of ``RANGES``),
float32 and float64 components, nc = 1, 2, 3, 4 and two sizes (1000x1000 and 4M elements;
``--sizes`` also takes ``RxC`` or a count such as ``16M``) on the CPU or ``--device
cuda``, it times in the same run

* *native*: the torch op on plain tensors of the component dtype (``a + b``, ``torch.exp(a)``);
* *MC*: the kernel on component tensors of shape ``(*size, nc)`` in the library's own
  layout (``eft.pack``: a planar buffer viewed as ``(*size, nc)``, which is what every
  kernel returns);
* *ref*: the original MCTensor algorithms (Grow-ExpN / ScalingN / Renormalize, see
  ``benchmarks/mctensor_reference.py``, a re-implementation written for this project) on
  the same values in their ``(*size, nc)`` layout, for add, mul and div (``-`` elsewhere:
  the original has no MC sqrt or elementary functions). The column ``vs ref`` is MC time / ref time.

Native and MC calls alternate after a warm-up, so a change of machine load affects both;
the table shows the medians of the wall-clock times, their ratio, and the issue's target
for 2-component float32 (add <= 25x, mul <= 20x, div <= 40x, exp <= 80x native float32).
``--cpu-time`` adds the ratio of process CPU times (more robust on a shared machine).
``--torch-networks`` adds the column *nets*: the same MC call with the fused kernels of
``hypermc.mcf.native`` bypassed (float32/float64, nc = 3/4 on the CPU use them otherwise;
same bits either way), as a ratio to native.
``--count-ops`` adds the number of elementwise aten kernels one MC call launches (ops on
tensors of the input's size, counted with a ``TorchDispatchMode``; views, scalars and
reductions to a scalar are not counted): the eager cost model is about one memory pass
per kernel.

Usage::

    python benchmarks/bench_ops.py                       # full table
    python benchmarks/bench_ops.py --quick               # fewer repeats, 1000x1000 only
    python benchmarks/bench_ops.py --ops add --dtypes float32 --nc 2 --sizes 4M
    python benchmarks/bench_ops.py --quick --threads 1 --dtypes float64 --nc 3 4 --torch-networks
    python benchmarks/bench_ops.py --quick --threads 1 --dtypes float32 float64 --nc 2 3 4 \\
        --torch-networks --budget 4 --no-ref --markdown      # the table of docs/numerics.md
    python benchmarks/bench_ops.py --ops add mul div exp --nc 2 3 --threads 1 2 --cpu-time \\
        --budget 4 --no-ref --markdown --pivot size          # the table of docs/benchmarks.md

``--threads`` takes several counts (each case is timed at each). ``--markdown`` prints
the ratios as a table after the plain-text rows: with ``--pivot nc`` (default) a row per
op, dtype (and size, when several) and a column per nc; with ``--pivot size`` a row per
op, dtype and nc, a column per size and thread count, and the target. A cell is the
wall-clock ratio, ``(CPU-time ratio)`` with ``--cpu-time``, ``/ nets`` with
``--torch-networks``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import math
import platform
import signal
import statistics
import time
from collections.abc import Callable

import torch

try:  # run as a script (benchmarks/ on sys.path) or as a module
    import mctensor_reference as mcref
except ImportError:  # pragma: no cover
    from benchmarks import mctensor_reference as mcref
from hypermc import _results
from hypermc.mcf import arith
from hypermc.mcf import native as fused
from hypermc.mcf.eft import float_format, pack

SIZES: dict[str, tuple[int, ...]] = {"1000x1000": (1000, 1000), "4M": (4_000_000,)}


def parse_size(name: str) -> tuple[int, ...]:
    """``1000x1000`` -> (1000, 1000); ``4M`` -> (4000000,); ``65536`` -> (65536,)."""
    if name in SIZES:
        return SIZES[name]
    try:
        if "x" in name:
            return tuple(int(s) for s in name.split("x"))
        scale = {"K": 1_000, "M": 1_000_000}.get(name[-1:], 1)
        return (int(name[:-1] if scale > 1 else name) * scale,)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size: expected RxC, a count or a count with K/M suffix; got {name!r}") from None


DTYPES = {"float32": torch.float32, "float64": torch.float64}
ARITH_OPS = ["add", "mul", "div", "sqrt"]
ELEMENTARY_OPS = ["exp", "log"]
TRIG_OPS = ["sin", "cos", "tan"]  # not in the default set: --ops sin cos tan
HYPERBOLIC_OPS = ["expm1", "log1p", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"]  # nor these
# leading components of the arguments: [low, high) per op (default [1, 2))
RANGES = {
    "log": (0.5, 4.0),
    "exp": (-10.0, 10.0),
    "sin": (-10.0, 10.0),
    "cos": (-10.0, 10.0),
    "tan": (-10.0, 10.0),
    "sqrt": (0.25, 4.0),
    "expm1": (-5.0, 5.0),
    "log1p": (-0.5, 4.0),
    "sinh": (-10.0, 10.0),
    "cosh": (-10.0, 10.0),
    "tanh": (-5.0, 5.0),
    "asinh": (-10.0, 10.0),
    "acosh": (1.5, 10.0),
    "atanh": (-0.9, 0.9),
}
# Targets (MC time / native time of the component dtype), one thread, 1000x1000: the
# project's speed goals for 2-component float32 and 3- and 4-component float64.
TARGETS = {
    ("add", "float32", 2): 25,
    ("mul", "float32", 2): 20,
    ("div", "float32", 2): 40,
    ("exp", "float32", 2): 80,
    ("add", "float64", 3): 40,
    ("mul", "float64", 3): 40,
    ("div", "float64", 3): 100,
    ("sqrt", "float64", 3): 100,
    ("exp", "float64", 3): 150,
    ("log", "float64", 3): 150,
    ("add", "float64", 4): 80,
    ("mul", "float64", 4): 100,
    ("div", "float64", 4): 250,
}


def elementary_module():
    """``hypermc.mcf.elementary`` if it exists, else ``None``."""
    if importlib.util.find_spec("hypermc.mcf.elementary") is None:
        return None
    return importlib.import_module("hypermc.mcf.elementary")


def random_mc(
    shape: tuple[int, ...],
    nc: int,
    dtype: torch.dtype,
    gen: torch.Generator,
    *,
    low: float,
    high: float,
    device: str = "cpu",
    zero_tails: bool = False,
) -> torch.Tensor:
    """Normalised expansions with full tails, leading parts uniform in [low, high).

    Component k+1 is component k times a random factor in [0.1, 0.45) * 2^-(p+1), so it
    is below half an ulp of component k; the result is packed planar like kernel output.
    ``zero_tails``: plain floats instead (the tails zero, as ``hm.mc`` of float values).
    """
    p = float_format(dtype).p
    lead = (torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low).to(dtype)
    comps = [lead]
    if zero_tails:
        return pack([c.to(device) for c in comps + [torch.zeros_like(lead)] * (nc - 1)])
    for _ in range(1, nc):
        f = torch.rand(shape, generator=gen, dtype=torch.float64) * 0.35 + 0.1
        sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
        comps.append((comps[-1].to(torch.float64) * f * sign * 2.0 ** -(p + 1)).to(dtype))
    return pack([c.to(device) for c in comps])


def make_case(op: str, shape, nc, dtype, gen, el, device: str = "cpu", zero_tails: bool = False):
    """(native call, MC call, reference call or ``None``) for one op."""
    low, high = RANGES.get(op, (1.0, 2.0))
    x = random_mc(shape, nc, dtype, gen, low=low, high=high, device=device, zero_tails=zero_tails)
    y = random_mc(shape, nc, dtype, gen, low=low, high=high, device=device, zero_tails=zero_tails)
    a, b = x[..., 0].contiguous(), y[..., 0].contiguous()
    native = {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "div": lambda: a / b,
        "sqrt": lambda: torch.sqrt(a),
        "exp": lambda: torch.exp(a),
        "log": lambda: torch.log(a),
        "sin": lambda: torch.sin(a),
        "cos": lambda: torch.cos(a),
        "tan": lambda: torch.tan(a),
        **{name: (lambda name=name: getattr(torch, name)(a)) for name in HYPERBOLIC_OPS},
    }[op]
    mc = {
        "add": lambda: arith.add(x, y),
        "mul": lambda: arith.mul(x, y),
        "div": lambda: arith.div(x, y),
        "sqrt": lambda: arith.sqrt(x),
        "exp": lambda: el.exp(x),
        "log": lambda: el.log(x),
        "sin": lambda: el.sin(x),
        "cos": lambda: el.cos(x),
        "tan": lambda: el.tan(x),
        **{name: (lambda name=name: getattr(el, name)(x)) for name in HYPERBOLIC_OPS},
    }[op]
    xr, yr = x.contiguous(), y.contiguous()  # the original's layout
    ref = {"add": lambda: mcref.add(xr, yr), "mul": lambda: mcref.mul(xr, yr), "div": lambda: mcref.div(xr, yr)}.get(op)
    return native, mc, ref


def count_kernels(fn: Callable[[], object], numel: int) -> int:
    """Number of aten ops launched by ``fn()`` whose output has at least ``numel`` elements."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            is_view = func.is_view or func.overloadpacket.__name__ in ("unbind", "split")
            if isinstance(first, torch.Tensor) and first.numel() >= numel and not is_view:
                self.n += 1
            return out

    fn()  # warm caches (e.g. the FMA probe) outside the count
    with _Counter() as counter:
        fn()
    return counter.n


def measure(native: Callable, mc: Callable, repeats: int, warmup: int, budget: float, ref: Callable | None = None) -> dict[str, float]:
    """Medians of alternating native / MC (/ reference) calls (wall clock and process CPU
    time); device work is synchronised (``torch.cuda.synchronize``) inside each timing.

    After the warm-up, the number of repeats is cut (to no fewer than 3) so that one
    case takes about ``budget`` seconds: the 3-component kernels take seconds per call.
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    calls = [("native", native), ("mc", mc)] + ([("ref", ref)] if ref is not None else [])
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        for _, fn in calls:
            fn()
        sync()
    per_call = (time.perf_counter() - t0) / max(warmup, 1)
    repeats = max(3, min(repeats, int(budget / max(per_call, 1e-9))))
    wall = {name: [] for name, _ in calls}
    cpu = {name: [] for name, _ in calls}
    for _ in range(repeats):
        for name, fn in calls:
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            sync()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "native": med["native"],
        "mc": med["mc"],
        "ratio": med["mc"] / med["native"],
        "ref": med.get("ref"),
        "cpu_ratio": cmed["mc"] / max(cmed["native"], 1e-9),
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> None:
    el = elementary_module()
    all_ops = ARITH_OPS + (ELEMENTARY_OPS if el is not None else [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", nargs="+", default=all_ops, choices=ARITH_OPS + ELEMENTARY_OPS + TRIG_OPS + HYPERBOLIC_OPS)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--nc", nargs="+", type=int, default=[1, 2, 3, 4])
    parser.add_argument(
        "--sizes", nargs="+", default=list(SIZES), type=str, help="1000x1000, 4M, or any RxC / count / count with K or M suffix"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (timings synchronised)")
    parser.add_argument("--no-ref", action="store_true", help="skip the MCTensor reference")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per case; fewer repeats (>= 3) for slow kernels")
    parser.add_argument("--threads", type=int, nargs="+", default=None, help="torch.set_num_threads; several: each case at each count")
    parser.add_argument("--cpu-time", action="store_true", help="also print the CPU-time ratio")
    parser.add_argument("--torch-networks", action="store_true", help="also time MC with the fused nc=3/4 kernels bypassed (column nets)")
    parser.add_argument("--count-ops", action="store_true", help="also print the number of elementwise kernels per MC call")
    parser.add_argument("--quick", action="store_true", help="5 repeats, 1000x1000 only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--zero-tails", action="store_true", help="MC arguments made from plain floats (zero tails, as hm.mc(x, nc))")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="also print the ratios as a markdown table (layout: --pivot)",
    )
    parser.add_argument(
        "--pivot",
        choices=["nc", "size"],
        default="nc",
        help="--markdown layout: nc = a column per nc (docs/numerics.md); size = a column per size and thread count, "
        "a row per op, dtype and nc, plus the target (docs/benchmarks.md)",
    )
    _results.add_argument(parser)
    args = parser.parse_args(argv)
    for s in args.sizes:
        parse_size(s)  # validate before any timing
    if args.quick:
        args.repeats, args.warmup, args.sizes = 5, 1, ["1000x1000"]
    thread_counts = args.threads or [torch.get_num_threads()]
    torch.set_num_threads(thread_counts[0])
    gen = torch.Generator().manual_seed(args.seed)

    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{', '.join(map(str, thread_counts))} threads; medians of up to {args.repeats} alternating runs "
        f"(>= 3, about {args.budget:g} s per case) after {args.warmup} warm-up; times in ms"
    )
    if el is None:
        print("exp/log skipped: hypermc.mcf.elementary does not exist yet")
    ops = [op for op in args.ops if op in all_ops or (el is not None and op in TRIG_OPS + HYPERBOLIC_OPS)]
    print(f"fused nc=3/4 CPU kernels: float64 nc=3 {fused.status(torch.float64, 3)}, float32 nc=3 {fused.status(torch.float32, 3)}")
    print(f"device {args.device}; ref = original MCTensor algorithms (benchmarks/mctensor_reference.py), vs ref = MC / ref")
    several = len(thread_counts) > 1
    threads_head = f" {'threads':>7}" if several else ""
    head = f"{'op':<5} {'dtype':<8} {'nc':>2} {'size':<10}{threads_head} {'native':>9} {'MC':>10} {'ratio':>8}"
    head += f" {'ref':>10} {'ref ratio':>9} {'vs ref':>7}"
    head += f" {'cpu ratio':>9}" if args.cpu_time else ""
    head += f" {'nets':>8}" if args.torch_networks else ""
    head += f" {'kernels':>7}" if args.count_ops else ""
    head += "  target"
    print(head)
    print("-" * len(head))
    cells: dict[tuple[str, str, int, str, int], str] = {}  # --markdown: (op, dtype, nc, size, threads) -> cell
    cases = [(threads, *case) for threads in thread_counts for case in itertools.product(ops, args.dtypes, args.nc, args.sizes)]
    # a time limit's SIGTERM (gpu_session.sh's `timeout`) ends the loop: the cases measured
    # so far still make the tables and the results fragment
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        _run_cases(cases, args, gen, el, cells)
    except _Stopped:
        print(f"{_results.NOTE}Cut by its time limit (SIGTERM) after {len(cells)} of {len(cases)} cases; '-': not measured.")
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.markdown:
        print()
        if args.pivot == "size":
            print(markdown_by_size(cells, args.sizes, thread_counts, args.cpu_time))
        else:
            print(markdown_table(cells, args.nc, len(args.sizes) > 1, args.torch_networks, args.cpu_time))


class _Stopped(Exception):
    """A SIGTERM arrived while the cases ran."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def _run_cases(cases: list[tuple[int, str, str, int, str]], args: argparse.Namespace, gen: torch.Generator, el, cells: dict) -> None:
    """Measure each ``(threads, op, dtype, nc, size)`` case, print its line and record its markdown cell."""
    several = len({c[0] for c in cases}) > 1
    for threads, op, dname, nc, sname in cases:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        dtype = DTYPES[dname]
        native, mc, ref = make_case(op, parse_size(sname), nc, dtype, gen, el, args.device, args.zero_tails)
        r = measure(native, mc, args.repeats, args.warmup, args.budget, None if args.no_ref else ref)
        line = f"{op:<5} {dname:<8} {nc:>2} {sname:<10}{f' {threads:>7}' if several else ''}"
        line += f" {r['native'] * 1e3:>9.3f} {r['mc'] * 1e3:>10.3f} {r['ratio']:>7.1f}x"
        if r["ref"] is None:
            line += f" {'-':>10} {'-':>9} {'-':>7}"
        else:
            line += f" {r['ref'] * 1e3:>10.3f} {r['ref'] / r['native']:>8.1f}x {r['mc'] / r['ref']:>6.2f}x"
        if args.cpu_time:
            line += f" {r['cpu_ratio']:>8.1f}x"
        cell = f"{_sig3(r['ratio'])}x" + (f" ({_sig3(r['cpu_ratio'])}x)" if args.cpu_time else "")
        if args.torch_networks:
            nets = _bypassed(mc, args) / r["native"]
            line += f" {nets:>7.1f}x"
            cell += f" / {_sig3(nets)}x"
        cells[(op, dname, nc, sname, threads)] = cell
        if args.count_ops:
            _, small_mc, _ = make_case(op, (4096,), nc, dtype, gen, el, args.device)
            line += f" {count_kernels(small_mc, 4096):>7d}"
        target = TARGETS.get((op, dname, nc))
        if target is not None:
            line += f"  <= {target}x {'ok' if r['ratio'] <= target else 'MISSED'}"
        print(line, flush=True)
        del native, mc, ref


def _sig3(value: float) -> str:
    """Three significant digits, never in exponent notation (1522, 21.9, 3.10)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def markdown_table(cells: dict[tuple[str, str, int, str, int], str], ncs: list[int], sizes: bool, nets: bool, cpu: bool = False) -> str:
    """The ratios as a markdown table: a row per (op, dtype[, size][, threads]), a column per nc."""
    what = "MC" + (" (cpu)" if cpu else "") + (" / nets" if nets else "")
    several = len({k[4] for k in cells}) > 1
    head = ["op", "dtype", *(["size"] if sizes else []), *(["threads"] if several else []), *(f"nc = {nc}: {what}" for nc in ncs)]
    align = ["---", "---", *(["---"] if sizes else []), *(["---:"] if several else []), *("---:" for _ in ncs)]
    rows = [f"| {' | '.join(head)} |", f"|{'|'.join(align)}|"]
    keys = dict.fromkeys((op, dname, sname, threads) for op, dname, _, sname, threads in cells)
    for op, dname, sname, threads in keys:
        key = [op, dname, *([sname] if sizes else []), *([str(threads)] if several else [])]
        rows.append(f"| {' | '.join(key + [cells.get((op, dname, nc, sname, threads), '-') for nc in ncs])} |")
    return "\n".join(rows)


def markdown_by_size(cells: dict[tuple[str, str, int, str, int], str], sizes: list[str], thread_counts: list[int], cpu: bool) -> str:
    """The ratios as a markdown table: a row per (op, dtype, nc), a column per (threads, size), and the target."""
    columns = [(t, s) for t in thread_counts for s in sizes]
    unit = "MC / native" + (" (cpu)" if cpu else "")
    head = ["op", "dtype", "nc", *(f"{s}, {t} thread{'s' if t > 1 else ''}: {unit}" for t, s in columns), "target"]
    align = ["---", "---", "---:", *("---:" for _ in columns), "---"]
    rows = [f"| {' | '.join(head)} |", f"|{'|'.join(align)}|"]
    for op, dname, nc in dict.fromkeys((op, dname, nc) for op, dname, nc, _, _ in cells):
        target = TARGETS.get((op, dname, nc))
        row = [op, dname, str(nc), *(cells.get((op, dname, nc, s, t), "-") for t, s in columns), f"<= {target}x" if target else ""]
        rows.append(f"| {' | '.join(row)} |")
    return "\n".join(rows)


def _bypassed(mc: Callable, args) -> float:
    """Median time of ``mc()`` with the fused kernels bypassed (a few runs: it is slow)."""
    fused._bypass.on = True
    try:
        mc()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            mc()
            times.append(time.perf_counter() - t0)
    finally:
        fused._bypass.on = False
    return statistics.median(times)


if __name__ == "__main__":
    _results.run(main)
