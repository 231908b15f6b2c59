"""Benchmark: hypermc's plain float64 path (and MC nc = 2) against geoopt, in one run.

Two tables, each row timed in the same run with geoopt and hypermc calls alternating
after a warm-up (so a change of machine load affects both), medians of the repeats:

* *step*: one optimisation step on ``N`` points of the 5-D Poincaré ball (``--points``,
  default 100 and 10,000): ``zero_grad``, the loss ``sum(dist(x, t)^2)`` to fixed
  targets ``t``, ``backward``, ``RiemannianSGD.step`` (lr 1e-3). geoopt: ``PoincareBall(c=1)``,
  ``ManifoldParameter``, ``geoopt.optim.RiemannianSGD``; hypermc: ``PoincareBall()``,
  ``hm.ManifoldParameter``, ``hypermc.optim.RiemannianSGD`` on plain float64 points
  (``dist`` with its default ``check=True`` and with ``check=False``) and on MC points
  with ``nc = 2``, once moving along the geodesic (``expmap``, hypermc's default) and
  once by ``retraction=True`` (``projx(x + u)``, the update geoopt's ``RiemannianSGD``
  makes); each ratio is to geoopt float64;
* *ops*: ``dist``, ``expmap``, ``logmap``, ``mobius_add`` of the ball and ``dist``,
  ``expmap0``, ``logmap0`` of the hyperboloid (geoopt ``Lorentz(k=1)``, hypermc
  ``Lorentz()``: the same space) on ``--size`` (default 1M) pairs of 16-D float64 points
  (tangent vectors of norm ~1), hypermc with its defaults and with ``check=False``
  where the method has the check.

Points are drawn from an explicit ``torch.Generator`` (``--seed``); the thread count is
fixed (``--threads``, default 1). ``--cpu-time`` adds the ratio of process CPU times,
more robust than wall time on a shared machine. Accuracy is not compared here (see
``bench_accuracy.py`` and ``tests/manifolds/test_accuracy.py``). Needs ``pip install
geoopt`` (0.5.1 was used).

Usage::

    python benchmarks/bench_geoopt.py                      # both tables
    python benchmarks/bench_geoopt.py --only step --points 100 10000 --cpu-time
    python benchmarks/bench_geoopt.py --only ops --size 1000000 --repeats 7
    python benchmarks/bench_geoopt.py --only step --cpu-time --markdown --write-results docs/results/geoopt_step.md
    python benchmarks/bench_geoopt.py --only ops --cpu-time --markdown --write-results docs/results/geoopt_ops.md
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import hypermc as hm
from hypermc import _results
from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.optim import RiemannianSGD

Timing = tuple[float, float]  # (wall seconds, CPU seconds)


def _once(fn: Callable[[], object]) -> Timing:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def time_pair(fns: list[Callable[[], object]], repeats: int, warmup: int = 2) -> list[Timing]:
    """Median wall and CPU seconds of each function, calls alternating."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    runs: list[list[Timing]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            runs[i].append(_once(fn))
    return [(statistics.median(t[0] for t in r), statistics.median(t[1] for t in r)) for r in runs]


def _ball_points(n: int, dim: int, radius: float, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    r = torch.rand(n, 1, generator=gen, dtype=torch.float64) * radius
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True) * r


def _step(opt: Any, manifold: Any, param: torch.Tensor, target: torch.Tensor, options: dict[str, Any]) -> None:
    """One step: the loss sum(dist(param, target)^2), backward, the optimizer's update."""
    opt.zero_grad()
    (manifold.dist(param, target, **options) ** 2).sum().backward()
    opt.step()


def step_rows(points: list[int], repeats: int, gen: torch.Generator) -> list[tuple[str, list[Timing]]]:
    import geoopt

    rows = []
    for n in points:
        x0, t = _ball_points(n, 5, 0.9, gen), _ball_points(n, 5, 0.9, gen)
        mg = geoopt.PoincareBall(c=1.0)
        pg = geoopt.ManifoldParameter(x0.clone(), manifold=mg)
        og = geoopt.optim.RiemannianSGD([pg], lr=1e-3)
        mh = PoincareBall()
        ph = hm.ManifoldParameter(x0.clone(), manifold=mh)
        oh = RiemannianSGD([ph], lr=1e-3)
        pm = hm.ManifoldParameter(hm.mc(x0.clone(), nc=2), manifold=mh)
        om = RiemannianSGD([pm], lr=1e-3)
        pr = hm.ManifoldParameter(hm.mc(x0.clone(), nc=2), manifold=mh)
        orr = RiemannianSGD([pr], lr=1e-3, retraction=True)

        geo = functools.partial(_step, og, mg, pg, t, {})
        plain = functools.partial(_step, oh, mh, ph, t, {"check": True})
        plain_nocheck = functools.partial(_step, oh, mh, ph, t, {"check": False})
        mc2 = functools.partial(_step, om, mh, pm, t, {})
        mc2_retr = functools.partial(_step, orr, mh, pr, t, {})
        rows.append((f"step N={n}", time_pair([geo, plain, plain_nocheck, mc2, mc2_retr], repeats)))
    return rows


def op_rows(size: int, repeats: int, gen: torch.Generator) -> list[tuple[str, list[Timing]]]:
    import geoopt

    dim = 16
    x, y = _ball_points(size, dim, 0.95, gen), _ball_points(size, dim, 0.95, gen)
    u = torch.randn(size, dim, generator=gen, dtype=torch.float64) / dim**0.5
    bg, bh = geoopt.PoincareBall(c=1.0), PoincareBall()
    lg, lh = geoopt.Lorentz(k=1.0), Lorentz()
    ux = torch.cat([torch.zeros(size, 1, dtype=torch.float64), u], dim=-1)  # tangent at the apex
    lx, ly = lh.expmap0(ux), lh.expmap0(torch.cat([torch.zeros(size, 1, dtype=torch.float64), u.flip(-1)], dim=-1))
    cases: list[tuple[str, Callable[[], object], Callable[[], object], Callable[[], object] | None]] = [
        ("ball dist", lambda: bg.dist(x, y), lambda: bh.dist(x, y), lambda: bh.dist(x, y, check=False)),
        ("ball expmap", lambda: bg.expmap(x, u), lambda: bh.expmap(x, u), lambda: bh.expmap(x, u, check=False)),
        ("ball logmap", lambda: bg.logmap(x, y), lambda: bh.logmap(x, y), lambda: bh.logmap(x, y, check=False)),
        ("ball mobius_add", lambda: bg.mobius_add(x, y), lambda: bh.mobius_add(x, y), None),
        ("lorentz dist", lambda: lg.dist(lx, ly), lambda: lh.dist(lx, ly), lambda: lh.dist(lx, ly, check=False)),
        ("lorentz expmap0", lambda: lg.expmap0(ux), lambda: lh.expmap0(ux), None),
        ("lorentz logmap0", lambda: lg.logmap0(ly), lambda: lh.logmap0(ly), lambda: lh.logmap0(ly, check=False)),
    ]
    rows = []
    for name, g, h, hn in cases:
        fns = [g, h] + ([hn] if hn is not None else [])
        rows.append((f"{name} {size:,}x{dim}", time_pair(fns, repeats)))
    return rows


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parent.parent
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cell(t: Timing, ref: Timing, cpu: bool) -> str:
    s = f"{t[0] * 1e3:9.3f} ms {t[0] / ref[0]:5.2f}x"
    return s + (f" (cpu {t[1] / ref[1]:5.2f}x)" if cpu else "")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["step", "ops"], help="one table")
    p.add_argument("--points", type=int, nargs="+", default=[100, 10_000], help="points per step case")
    p.add_argument("--size", type=int, default=1_000_000, help="point pairs of the ops table")
    p.add_argument("--repeats", type=int, default=15, help="timed repeats (median)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu-time", action="store_true", help="add the ratio of process CPU times")
    p.add_argument("--markdown", action="store_true", help="also print the tables in Markdown (docs/geoopt.md)")
    _results.add_argument(p)
    args = p.parse_args(argv)
    import geoopt

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"# bench_geoopt: commit {_commit()}, torch {torch.__version__}, geoopt {geoopt.__version__}, "
        f"{platform.processor() or platform.machine()}, threads {args.threads}, load average {load}"
    )
    start = time.perf_counter()
    tables = []
    if args.only in (None, "step"):
        heads = ["hypermc f64", "hypermc f64 check=False", "hypermc nc=2", "hypermc nc=2 retraction=True"]
        print(f"{'case':<22} {'geoopt f64':>12}  " + "  ".join(f"{h:>28}" for h in heads))
        rows = step_rows(args.points, args.repeats, gen)
        for name, ts in rows:
            ref = ts[0]
            print(f"{name:<22} {ref[0] * 1e3:9.3f} ms  " + "  ".join(_cell(t, ref, args.cpu_time) for t in ts[1:]))
        tables.append(_markdown("case", heads, rows, args.cpu_time))
    if args.only in (None, "ops"):
        heads = ["hypermc f64", "hypermc f64 check=False"]
        print(f"{'op':<32} {'geoopt f64':>12}  " + "  ".join(f"{h:>28}" for h in heads))
        rows = op_rows(args.size, max(3, args.repeats // 3), gen)
        for name, ts in rows:
            ref = ts[0]
            print(f"{name:<32} {ref[0] * 1e3:9.3f} ms  " + "  ".join(_cell(t, ref, args.cpu_time) for t in ts[1:]))
        tables.append(_markdown("op", heads, rows, args.cpu_time))
    print(f"# wall time {time.perf_counter() - start:.1f} s")
    if args.markdown:
        for table in tables:
            print()
            print(table)


def _markdown(first: str, heads: list[str], rows: list[tuple[str, list[Timing]]], cpu: bool) -> str:
    """One table: geoopt's time, then each hypermc column as time and ratio to geoopt
    (wall; with ``cpu``, the CPU-time ratio in parentheses)."""
    lines = [f"| {first} | geoopt float64 | " + " | ".join(heads) + " |", "|---|" + "---:|" * (1 + len(heads))]
    for name, ts in rows:
        ref = ts[0]
        cells = []
        for t in ts[1:]:
            cell = f"{t[0] * 1e3:.2f} ms, {t[0] / ref[0]:.2f}x"
            if cpu:
                cell += f" (cpu {t[1] / ref[1]:.2f}x)"
            cells.append(cell)
        cells += ["-"] * (len(heads) - len(cells))  # a method without a check has no check=False column
        lines.append(f"| {name} | {ref[0] * 1e3:.2f} ms | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    _results.run(main)
