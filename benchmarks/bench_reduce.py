"""Benchmark: MC reductions (sums, grouped sums, sums of squares, norms, the ball's deficit).

For each op, nc and shape, in one run, medians of ``--repeats`` calls alternating:

* *native*: the plain float64 op on the leading components (``x.sum()``, ``x.sum(-1)``,
  ``index_add`` of the rows into a tenth as many slots (random, from the generator),
  ``(x * x).sum(-1)``, the same of ``relu(x)`` (half the coordinates zero, as after a
  GNN layer's ReLU; computed before the timing), ``torch.linalg.vector_norm``, ``1 - (x * x).sum(-1)``);
* *MC*: the same op on the MCTensor (``x.sum()``, ``x.sum(-1)``, ``index_add``,
  ``hypermc.manifolds.math.common.sqnorm``, ``torch.linalg.vector_norm``,
  ``hypermc.manifolds.math.ball.deficit``), as it runs by default: on the CPU one
  ``mc_sum`` call per sum (float32/float64, nc = 2, 3, 4), one ``mc_runsum`` call per
  grouped sum (nc = 2, 3, 4) and one row-kernel call per tensor for the squares
  (nc = 2, 3);
* *per level*: the same MC op with those three kernels removed from the kernel registry,
  so it runs torch kernels (sums) or one fused arith call (squares) per tree level and
  step (what CUDA runs), for comparison.

Each MC time is also given as a ratio to native. One thread (``--threads``), float64,
points from an explicit generator (``--seed``).

Usage::

    python benchmarks/bench_reduce.py
    python benchmarks/bench_reduce.py --rows 10000 100000 --dim 5 16 --nc 2 3 4
    python benchmarks/bench_reduce.py --write-results docs/results/reduce.md
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator

import torch

import hypermc as hm
from hypermc import _results
from hypermc.manifolds.math import ball, common
from hypermc.mcf import registry

#: The kernels that run a whole reduction in one call.
_WHOLE = ("rowsumsq", "tree_sum", "grouped_sums")


@contextlib.contextmanager
def _per_level() -> Iterator[None]:
    """The whole-reduction kernels out of the registry (the MC ops then run per level)."""
    kernels = {name: registry._kernels.pop(name, None) for name in _WHOLE}  # noqa: SLF001 - a benchmark switch
    try:
        yield
    finally:
        for name, kernel in kernels.items():
            if kernel is not None:
                registry._kernels[name] = kernel  # noqa: SLF001


def _times(fns: list[Callable[[], object]], repeats: int, per_level: int | None) -> list[float]:
    """Median seconds of each function, calls alternating (``fns[per_level]`` without the whole-reduction kernels)."""
    runs: list[list[float]] = [[] for _ in fns]
    for r in range(repeats + 2):
        for i, fn in enumerate(fns):
            with _per_level() if i == per_level else contextlib.nullcontext():
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
            if r >= 2:  # two warm-up rounds
                runs[i].append(dt)
    return [statistics.median(r) for r in runs]


def _index_add(x: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """``x``'s rows summed into ``len(x) // 10`` rows by ``slots``."""
    return torch.index_add(torch.zeros_like(x[: len(x) // 10]), 0, slots, x)


OPS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "sum": (lambda x: x.sum(), lambda x: x.sum()),
    "sum(-1)": (lambda x: x.sum(-1), lambda x: x.sum(-1)),
    "index_add": (_index_add, _index_add),
    "sqnorm": (lambda x: (x * x).sum(-1), lambda x: common.sqnorm(x)),
    "sqnorm, half zeros": (lambda x: (x * x).sum(-1), lambda x: common.sqnorm(x)),  # of relu(x), made beforehand
    "norm": (lambda x: torch.linalg.vector_norm(x, dim=-1), lambda x: torch.linalg.vector_norm(x, dim=-1)),
    "deficit": (lambda x: 1 - (x * x).sum(-1), lambda x: ball.deficit(x)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--dim", type=int, nargs="+", default=[5, 16])
    ap.add_argument("--nc", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    _results.add_argument(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    print(f"{_results.NOTE}float64, {args.threads} thread(s), medians of {args.repeats} calls; ratios to native")
    print()
    print("| op | nc | shape | native | MC | MC per level |")
    print("|---|---:|---|---:|---:|---:|")
    for rows in args.rows:
        for dim in args.dim:
            plain = torch.randn(rows, dim, generator=gen, dtype=torch.float64) / dim**0.5 * 0.9
            slots = torch.randint(0, rows // 10, (rows,), generator=gen)
            for nc in args.nc:
                x = hm.mc(plain, nc=nc) * (1 + 2.0**-30)  # full expansions
                for name, (native_op, mc_op) in OPS.items():
                    more = (slots,) if name == "index_add" else ()
                    a, b = (torch.relu(plain), torch.relu(x)) if name == "sqnorm, half zeros" else (plain, x)
                    fns = [functools.partial(native_op, a, *more), functools.partial(mc_op, b, *more), functools.partial(mc_op, b, *more)]
                    t_native, t_mc, t_level = _times(fns, args.repeats, 2)
                    print(
                        f"| {name} | {nc} | {rows:,} x {dim} | {t_native * 1e3:.3f} ms | {t_mc * 1e3:.3f} ms, "
                        f"{t_mc / t_native:.0f}x | {t_level * 1e3:.3f} ms, {t_level / t_native:.0f}x |"
                    )


if __name__ == "__main__":
    _results.run(main)
