"""Accuracy study: the worst relative error of MC ops against mpmath, in units of ``u^nc``.

For each op, component dtype and ``nc`` it draws ``--samples`` random MC operands (leading
exponents uniform in ``[-20, 20]``, random signs and significands, every component
present), computes the op in MC arithmetic (eager, CPU) and in mpmath at ``nc p + 60``
bits from the operands' exact values, and prints the largest and the median relative
error ``|got - exact| / |exact| / u^nc`` (``u = 2^-p`` of the component dtype) next to
the bound of the test suite (``tests/oracle.py``: 8 for + - * / sqrt, 64 for the
elementary functions). ``add``/``sub`` draw half of their pairs with heavy cancellation
(``y = -x (1 + 2^-40 r)``); ``exp`` takes ``|x| < 64``, ``tanh`` ``|x| < 8``, ``sin``,
``cos``, ``tan`` ``|x| < 2^11``, ``sqrt`` and ``log`` positive operands. float32 ``exp`` at ``nc >= 3`` of arguments below about -54
(``nc = 3``) or -37 (``nc = 4``) has results whose tails are subnormal, outside the bound's
range (elementary's docstring): those rows report large errors.

Usage::

    python benchmarks/bench_accuracy.py                         # float64 nc 2-4, float32 nc 2
    python benchmarks/bench_accuracy.py --samples 500 --ops add div --nc 3
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import subprocess
import time
from pathlib import Path

import mpmath
import torch

import hypermc as hm
from hypermc import _results

BOUND = {"add": 8, "sub": 8, "mul": 8, "div": 8, "sqrt": 8, "exp": 64, "log": 64, "tanh": 64, "sin": 64, "cos": 64, "tan": 64}
OPS = list(BOUND)
DTYPES = {"float64": (torch.float64, 53), "float32": (torch.float32, 24)}


def _commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def _operand(n: int, nc: int, dtype: torch.dtype, p: int, gen: torch.Generator, *, lo: int = -20, hi: int = 20) -> hm.MCTensor:
    """``n`` random MC numbers with every component present (a tail below the leading ulp)."""
    e = torch.randint(lo, hi + 1, (n,), generator=gen).to(torch.float64)
    sign = torch.randint(0, 2, (n,), generator=gen).to(torch.float64) * 2 - 1
    comps = [sign * torch.exp2(e) * (1 + torch.rand(n, generator=gen, dtype=torch.float64))]
    for _ in range(1, nc):
        gap = torch.randint(1, 4, (n,), generator=gen).to(torch.float64)
        s = torch.randint(0, 2, (n,), generator=gen).to(torch.float64) * 2 - 1
        comps.append(comps[-1].abs() * torch.exp2(-(p + gap)) * s * (1 + torch.rand(n, generator=gen, dtype=torch.float64)))
    return hm.MCTensor.from_components(torch.stack(comps, dim=-1).to(dtype))


def _exact(x: hm.MCTensor) -> list:
    return [sum((mpmath.mpf(c) for c in row), mpmath.mpf(0)) for row in x.components.double().tolist()]


def _operands(op: str, n: int, nc: int, dtype: torch.dtype, p: int, gen: torch.Generator) -> tuple[hm.MCTensor, hm.MCTensor | None]:
    if op in ("exp",):
        x = _operand(n, nc, dtype, p, gen, lo=-20, hi=5)
        return x, None
    if op == "tanh":
        return _operand(n, nc, dtype, p, gen, lo=-20, hi=2), None
    if op in ("sin", "cos", "tan"):
        return _operand(n, nc, dtype, p, gen, lo=-20, hi=10), None
    if op in ("sqrt", "log"):
        x = _operand(n, nc, dtype, p, gen)
        return hm.MCTensor.from_components(x.components.abs() * torch.sign(x.components[..., :1]).abs()), None
    x, y = _operand(n, nc, dtype, p, gen), _operand(n, nc, dtype, p, gen)
    if op in ("add", "sub"):  # half of the pairs cancel: y = -x (1 + 2^-40 r) for add, x (1 + ...) for sub
        r = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
        near = hm.mc(x.approx().double() * (1 + r * 2.0**-40), nc=nc, dtype=dtype)
        near = -near if op == "add" else near
        half = torch.arange(n) % 2 == 0
        y = hm.MCTensor.from_components(torch.where(half[:, None], near.components, y.components))
    return x, y


_MPMATH = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "sqrt": lambda a, b: mpmath.sqrt(a),
    "exp": lambda a, b: mpmath.exp(a),
    "log": lambda a, b: mpmath.log(a),
    "tanh": lambda a, b: mpmath.tanh(a),
    "sin": lambda a, b: mpmath.sin(a),
    "cos": lambda a, b: mpmath.cos(a),
    "tan": lambda a, b: mpmath.tan(a),
}
_MC = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "sqrt": lambda a, b: torch.sqrt(a),
    "exp": lambda a, b: torch.exp(a),
    "log": lambda a, b: torch.log(a),
    "tanh": lambda a, b: torch.tanh(a),
    "sin": lambda a, b: torch.sin(a),
    "cos": lambda a, b: torch.cos(a),
    "tan": lambda a, b: torch.tan(a),
}


def measure(op: str, dtype_name: str, nc: int, samples: int, seed: int) -> tuple[float, float]:
    dtype, p = DTYPES[dtype_name]
    gen = torch.Generator().manual_seed(seed)
    x, y = _operands(op, samples, nc, dtype, p, gen)
    got = _MC[op](x, y)
    unit = mpmath.ldexp(1, -p * nc)
    errs = []
    with mpmath.workprec(nc * p + 60):
        xs, ys = _exact(x), (_exact(y) if y is not None else [None] * samples)
        gs = _exact(got)
        for a, b, g in zip(xs, ys, gs):
            e = _MPMATH[op](a, b)
            errs.append(float(abs(g - e) / abs(e) / unit) if e != 0 else float(abs(g) / unit))
    return max(errs), statistics.median(errs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", choices=OPS, default=OPS)
    ap.add_argument("--nc", nargs="+", type=int, default=[2, 3, 4], help="float64 component counts")
    ap.add_argument("--float32-nc", nargs="*", type=int, default=[2], help="float32 component counts")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    _results.add_argument(ap)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    print(f"commit {_commit()}, torch {torch.__version__}, {platform.machine()}, {args.samples} samples per row, seed {args.seed}")
    print()
    print("| op | dtype | nc | worst error (u^nc) | median error (u^nc) | bound |")
    print("|---|---|---:|---:|---:|---:|")
    configs = [("float64", nc) for nc in args.nc] + [("float32", nc) for nc in args.float32_nc]
    for op in args.ops:
        for dtype_name, nc in configs:
            worst, med = measure(op, dtype_name, nc, args.samples, args.seed)
            shown = f"{worst:.3g}" if math.isfinite(worst) else "inf"
            print(f"| {op} | {dtype_name} | {nc} | {shown} | {med:.2g} | {BOUND[op]} |", flush=True)
    print()
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    _results.run(main)
