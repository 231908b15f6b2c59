"""Experiment 1: linear regression trained in float16 with MC weights reaches float32 loss.

X (10000 x 2) ~ N(-0.5, 0.5^2) (rounded to float16, so every method sees the same
inputs), w* ~ N(0, 1) (seeded), y = X w*^T computed in float64 and stored by each method
in its own format (an MCTensor target for MC methods). One bias-free linear layer, MSE,
full-batch gradient descent with lr 0.05, the same float16-representable initial weight.

    python examples/lowprec_linear_regression.py               # the table
    python examples/lowprec_linear_regression.py --epochs 500 --plot linreg.png

The loss is multiplied by 2**10 before backward (all methods; exact): without it the
per-sample gradients 2 r_i / N of float16 underflow once the residuals r_i are small.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import hypermc as hm
import hypermc.nn.functional as MF
from hypermc import _results
from hypermc.nn import MCLinear
from hypermc.optim import MCSGD

import lowprec_common as C

N_SAMPLES, N_FEATURES, LR, EPOCHS = 10_000, 2, 0.05, 200
#: The loss is multiplied by this before ``backward`` (see the module docstring).
LOSS_SCALE = 2.0**10
X_MEAN, X_STD = -0.5, 0.5


def make_data(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(N_SAMPLES, N_FEATURES, generator=g, dtype=C.f64) * X_STD + X_MEAN).to(C.f16).to(C.f64)
    w_star = torch.randn(1, N_FEATURES, generator=g, dtype=C.f64)
    return x, x @ w_star.T, w_star


def make_torch_model(dtype: torch.dtype) -> nn.Module:
    return nn.Linear(N_FEATURES, 1, bias=False, dtype=dtype)


def experiment(args, methods: list[C.Method]) -> C.Experiment:
    """Train every method (``args``: epochs or None, seed, loss_scale, quiet) and build the table."""
    epochs = args.epochs or EPOCHS
    x, y, w_star = make_data(args.seed)
    init = C.initial_values(make_torch_model, args.seed)
    results = []
    for m in methods:
        if m.is_mc:
            model = MCLinear(N_FEATURES, 1, bias=False, nc=m.nc, dtype=m.dtype)
            opt = MCSGD(model.parameters(), lr=LR)
            target, loss_fn = hm.mc(y, nc=m.nc, dtype=m.dtype), MF.mse_loss
        else:
            model = make_torch_model(m.dtype)
            opt = torch.optim.SGD(model.parameters(), lr=LR)
            target, loss_fn = y.to(m.dtype), F.mse_loss
        C.copy_parameters(model, init)
        results.append(C.train(m, model, opt, loss_fn, C.full_batch(x.to(m.dtype), target), epochs, args.loss_scale, args.quiet))

    losses = {r.method.key: F.mse_loss(x @ r.params64[0].T, y).item() for r in results}
    ref = losses.get(C.REFERENCE)
    title = (
        f"Linear regression: 10000x2, lr {LR}, {epochs} epochs, seed {args.seed}, "
        f"loss scale {args.loss_scale:g}, w* = {[round(v, 4) for v in w_star.flatten().tolist()]}"
    )
    return C.Experiment(title, [C.loss_row(r, losses[r.method.key], ref) for r in results], results, losses)


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], epochs=EPOCHS, loss_scale=LOSS_SCALE)
    _results.add_argument(p)
    args = p.parse_args()
    result = experiment(args, C.setup(args))
    print(result.report(args.columns))
    C.plot({r.method.label: r.curve for r in result.results}, args.plot, "Linear regression")


if __name__ == "__main__":
    _results.run(main)
