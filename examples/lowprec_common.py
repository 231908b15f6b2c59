"""Shared machinery of the low-precision experiments (``examples/lowprec_*.py``).

Each experiment trains the same model with several *methods* -- plain torch in float16,
float32, float64 and hypermc with MC weights (``MCLinear`` + ``MCSGD``) -- from the same
initial weights (drawn once and rounded to float16, so every format holds them exactly)
on the same data, and prints one table row per method:

* **final train loss**: the training loss of the trained weights, evaluated in float64
  (the MC weights converted exactly) on the float64 training data. This measures the
  model each method reached, not the rounding of its own loss evaluation;
* **vs fp32**: its relative difference to the torch float32 row (the acceptance
  criterion is |diff| <= 1 % for MC float16 nc=2, and > 1 % for torch float16);
* **own loss**: the loss as the method computed it in its last epoch;
* **ms/epoch**: wall time per epoch (forward, backward, update; the evaluation excluded).

``--columns loss`` prints only the accuracy columns (the layout of the Results tables of
docs/low_precision.md), ``--columns time`` only the method and ms/epoch.

Not part of the library (examples may print, parse arguments and set thread counts).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

import hypermc as hm

f16, f32, f64 = torch.float16, torch.float32, torch.float64


@dataclass(frozen=True)
class Method:
    """A training configuration: plain torch (``nc is None``) or MC with ``nc`` components."""

    key: str
    label: str
    dtype: torch.dtype
    nc: int | None

    @property
    def is_mc(self) -> bool:
        return self.nc is not None


METHODS = {
    m.key: m
    for m in (
        Method("torch-fp16", "torch fp16", f16, None),
        Method("torch-fp32", "torch fp32", f32, None),
        Method("torch-fp64", "torch fp64", f64, None),
        Method("mc-fp16-nc1", "MC fp16 nc=1", f16, 1),
        Method("mc-fp16-nc2", "MC fp16 nc=2", f16, 2),
        Method("mc-fp16-nc3", "MC fp16 nc=3", f16, 3),
        Method("mc-fp32-nc2", "MC fp32 nc=2", f32, 2),
    )
}
REFERENCE = "torch-fp32"
ALL_METHODS = ",".join(METHODS)


def parser(description: str, *, epochs: int | None, methods: str | None = ALL_METHODS, loss_scale: float = 1.0) -> argparse.ArgumentParser:
    """The common command line; ``None`` defaults: each dataset's own (see the script)."""
    p = argparse.ArgumentParser(description=description)
    default = f"{epochs}" if epochs is not None else "the paper's setting of each dataset"
    p.add_argument("--epochs", type=int, default=epochs, help=f"training epochs (default: {default})")
    p.add_argument("--seed", type=int, default=0, help="seed of data, split, initial weights and batches")
    p.add_argument(
        "--methods",
        default=methods,
        help=f"comma-separated subset of: {ALL_METHODS} (default: {methods or 'per dataset, see the script'})",
    )
    p.add_argument(
        "--loss-scale",
        type=float,
        default=loss_scale,
        help="power of two multiplying the loss before backward (gradients divided by it after, "
        f"exactly); keeps float16 gradients above the subnormal range (default {loss_scale:g})",
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--plot", metavar="PNG", default=None, help="write the loss curves to this PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--columns",
        choices=sorted(COLUMNS),
        default="all",
        help="table columns: all; loss (the accuracy columns, the tables of docs/low_precision.md's Results); time (method and ms/epoch)",
    )
    return p


def setup(args: argparse.Namespace, default_methods: str = ALL_METHODS) -> list[Method]:
    """Apply ``--threads``, validate the options and return the selected methods."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    mantissa, _ = math.frexp(args.loss_scale)
    if args.loss_scale <= 0 or mantissa != 0.5:
        raise SystemExit(f"--loss-scale must be a positive power of two (exact scaling); got {args.loss_scale}")
    if args.epochs is not None and args.epochs < 1:
        raise SystemExit(f"--epochs must be >= 1; got {args.epochs}")
    keys = [k.strip() for k in (args.methods or default_methods).split(",") if k.strip()]
    unknown = [k for k in keys if k not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; choose from {ALL_METHODS}")
    return [METHODS[k] for k in keys]


# ------------------------------------------------------------------------- parameters


def copy_parameters(model: nn.Module, values: list[torch.Tensor]) -> None:
    """Set the model's parameters (in order) to float64 ``values``, exactly representable."""
    params = list(model.parameters())
    if len(params) != len(values):
        raise ValueError(f"model has {len(params)} parameters, got {len(values)} values")
    with torch.no_grad():
        for p, v in zip(params, values):
            p.copy_(v.to(p.dtype))  # MC copy_ converts exactly; plain rounds (exact here)
            if not torch.equal(to_f64(p), v):
                raise ValueError("initial values must be exactly representable in every method's dtype")


def to_f64(p: torch.Tensor) -> torch.Tensor:
    """float64 value of a parameter (exact for MC fp16 nc<=4 and fp32 nc<=2)."""
    p = p.detach()
    return p.to(f64).approx() if isinstance(p, hm.MCTensor) else p.to(f64)


def initial_values(make_torch_model: Callable[[torch.dtype], nn.Module], seed: int) -> list[torch.Tensor]:
    """torch's default initialisation drawn in float16 (seeded), as float64 tensors."""
    torch.manual_seed(seed)
    return [p.detach().to(f64) for p in make_torch_model(f16).parameters()]


# ---------------------------------------------------------------------------- training


@dataclass
class Result:
    method: Method
    curve: list[float]
    seconds_per_epoch: float
    params64: list[torch.Tensor]


def train(
    method: Method,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    epochs: int,
    loss_scale: float,
    quiet: bool = False,
) -> Result:
    """Train; ``batches(epoch)`` yields ``(input, target)`` pairs of one epoch.

    The recorded loss of an epoch is the mean of its batch losses (as computed by the
    method). With ``loss_scale != 1`` the loss is multiplied by it before ``backward``
    and every gradient divided by it afterwards (powers of two: exact).
    """
    params = list(model.parameters())
    curve = []
    bar = _progress(epochs, method.label, quiet)
    start = time.perf_counter()
    for epoch in bar:
        total, count = 0.0, 0
        for x, y in batches(epoch):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            (loss * loss_scale if loss_scale != 1 else loss).backward()
            if loss_scale != 1:
                with torch.no_grad():
                    for p in params:
                        p.grad.div_(loss_scale)
            optimizer.step()
            total += loss.item()
            count += 1
        curve.append(total / count)
    seconds = (time.perf_counter() - start) / epochs
    return Result(method, curve, seconds, [to_f64(p) for p in params])


def _progress(epochs: int, label: str, quiet: bool):
    if quiet or not sys.stderr.isatty():
        return range(epochs)
    try:
        from tqdm import tqdm
    except ImportError:
        return range(epochs)
    return tqdm(range(epochs), desc=label, leave=False)


class Squeeze(nn.Module):
    """(N, 1) logits -> (N,) (binary classifiers)."""

    def forward(self, x):
        return x.squeeze(-1)


def full_batch(x: torch.Tensor, y: torch.Tensor):
    return lambda epoch: [(x, y)]


def mini_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int):
    """Shuffled mini-batches; the order depends only on (seed, epoch), the same for every method."""

    def batches(epoch: int):
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(x.shape[0], generator=g)
        for i in range(0, x.shape[0], batch_size):
            idx = order[i : i + batch_size]
            yield x[idx], y[idx]

    return batches


# ------------------------------------------------------------------------------ output


def table(title: str, rows: list[dict[str, object]], columns: list[str]) -> str:
    """A GitHub-markdown table under a ``### title`` line."""
    return f"### {title}\n\n{markdown(rows, columns)}"


def markdown(rows: list[dict[str, object]], columns: list[str], right: tuple[str, ...] = ()) -> str:
    """A GitHub-markdown table with padded cells; the ``right`` columns are right-aligned."""
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]

    def line(cells) -> str:
        return "| " + " | ".join(str(v).rjust(w) if c in right else str(v).ljust(w) for v, c, w in zip(cells, columns, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if c in right else "-" * (w + 2) for c, w in zip(columns, widths)) + "|"
    return "\n".join([line(columns), rule, *(line([r.get(c, "") for c in columns]) for r in rows)])


#: ``--columns``: which columns of a result row are printed (``None``: all of them).
COLUMNS = {
    "all": None,
    "loss": ("method", "final train loss (fp64 eval)", "vs torch fp32", "within 1 %", "test acc"),
    "time": ("method", "ms/epoch"),
}


def columns(rows: list[dict[str, object]], choice: str = "all") -> list[str]:
    """The column names of ``rows`` selected by ``--columns`` (in the rows' order)."""
    keep = COLUMNS[choice]
    return [c for c in rows[0] if keep is None or c in keep]


def rel_diff(value: float, reference: float | None) -> str:
    if reference is None or reference == 0:
        return "n/a"
    return f"{(value - reference) / reference * 100:+.3f} %"


def within_1pct(value: float, reference: float | None) -> str:
    if reference is None:
        return "n/a"
    return "yes" if abs(value - reference) <= 0.01 * abs(reference) else "no"


@dataclass
class Experiment:
    """What one experiment printed and what a summary needs: the table and the raw numbers."""

    title: str
    rows: list[dict[str, object]]  # one per method, the cells of its table row
    results: list[Result]
    train_loss: dict[str, float]  # method key -> final train loss (fp64 eval)

    def report(self, column_choice: str = "all") -> str:
        return table(self.title, self.rows, columns(self.rows, column_choice))


def loss_row(r: Result, train_loss: float, ref: float | None, extra: dict[str, object] | None = None) -> dict[str, object]:
    """The cells of one method's table row; ``extra`` (e.g. the test accuracy) goes before *own loss*."""
    return {
        "method": r.method.label,
        "final train loss (fp64 eval)": f"{train_loss:.6e}",
        "vs torch fp32": rel_diff(train_loss, ref),
        "within 1 %": within_1pct(train_loss, ref),
        **(extra or {}),
        "own loss (last epoch)": f"{r.curve[-1]:.6e}",
        "ms/epoch": f"{r.seconds_per_epoch * 1e3:.2f}",
    }


def classification_experiment(
    results: list[Result],
    evaluate: Callable[[Result, torch.Tensor, torch.Tensor], tuple[float, float]],
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    title: str,
) -> Experiment:
    """The table of a classification experiment.

    ``evaluate(result, x, y)`` returns ``(loss, accuracy)`` of the result's float64
    weights; ``data`` is ``(x_train, x_test, y_train, y_test)`` in float64.
    """
    xtr, xte, ytr, yte = data
    losses = {r.method.key: evaluate(r, xtr, ytr)[0] for r in results}
    ref = losses.get(REFERENCE)
    rows = [loss_row(r, losses[r.method.key], ref, {"test acc": f"{evaluate(r, xte, yte)[1] * 100:.2f} %"}) for r in results]
    return Experiment(title, rows, results, losses)


def plot(curves: dict[str, list[float]], path: str | None, title: str) -> None:
    """Loss curves (log scale) to ``path`` if given."""
    if path is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, curve in curves.items():
        ax.semilogy(range(1, len(curve) + 1), [max(v, 1e-300) for v in curve], label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (own arithmetic)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")
