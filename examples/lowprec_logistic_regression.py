"""Experiment 2: logistic regression trained in float16 with MC weights reaches float32 loss.

Two datasets, full batch, binary cross-entropy on the logits of one linear layer:

* synthetic: ``hypermc.data.make_classification`` (1,000 points, 2 informative
  features, one cluster per class, seeded), 80/20 split, SGD lr 3e-3, 4,000 epochs;
* breast cancer (bundled, 569 x 30), 80/20 split, features standardised with the
  training split's mean and std (in float64), SGD lr 1e-4, momentum 0.9, 3,000 epochs.

Inputs are cast from float64 to each method's dtype; every method starts from the same
float16-representable initial weights.

    python examples/lowprec_logistic_regression.py                     # both tables
    python examples/lowprec_logistic_regression.py --dataset synthetic --epochs 1000
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import hypermc.nn.functional as MF
from hypermc import _results
from hypermc.data import load_breast_cancer, make_classification, train_test_split
from hypermc.nn import MCLinear
from hypermc.optim import MCSGD

import lowprec_common as C

SETTINGS = {  # dataset: (lr, momentum, epochs)
    "synthetic": (3e-3, 0.0, 4000),
    "breast_cancer": (1e-4, 0.9, 3000),
}
TEST_SIZE = 0.2


def load(name: str, seed: int):
    ds = make_classification(1000, 2, n_informative=2, seed=seed) if name == "synthetic" else load_breast_cancer()
    xtr, xte, ytr, yte = train_test_split(ds.data, ds.target.to(C.f64), test_size=TEST_SIZE, seed=seed)
    if name == "breast_cancer":
        mean, std = xtr.mean(0), xtr.std(0)
        xtr, xte = (xtr - mean) / std, (xte - mean) / std
    return xtr, xte, ytr, yte


def experiment(name: str, args, methods: list[C.Method]) -> C.Experiment:
    """Train every method on one dataset (``args``: epochs or None, seed, loss_scale, quiet)."""
    lr, momentum, default_epochs = SETTINGS[name]
    epochs = args.epochs or default_epochs
    xtr, xte, ytr, yte = load(name, args.seed)
    n_features = xtr.shape[1]
    make_torch_model = lambda dtype: nn.Linear(n_features, 1, dtype=dtype)  # noqa: E731
    init = C.initial_values(make_torch_model, args.seed)
    results = []
    for m in methods:
        if m.is_mc:
            model = MCLinear(n_features, 1, nc=m.nc, dtype=m.dtype)
            opt = MCSGD(model.parameters(), lr=lr, momentum=momentum)
            loss_fn = MF.binary_cross_entropy_with_logits
        else:
            model = make_torch_model(m.dtype)
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
            loss_fn = F.binary_cross_entropy_with_logits
        C.copy_parameters(model, init)
        batches = C.full_batch(xtr.to(m.dtype), ytr.to(m.dtype))
        results.append(C.train(m, nn.Sequential(model, C.Squeeze()), opt, loss_fn, batches, epochs, args.loss_scale, args.quiet))

    def evaluate(r: C.Result, x: torch.Tensor, y: torch.Tensor):
        z = (x @ r.params64[0].T).squeeze(-1) + r.params64[1]
        return F.binary_cross_entropy_with_logits(z, y).item(), ((z > 0).to(C.f64) == y).to(C.f64).mean().item()

    title = (
        f"Logistic regression, {name} ({xtr.shape[0]} train / {xte.shape[0]} test): lr {lr:g}, "
        f"momentum {momentum:g}, {epochs} epochs, seed {args.seed}"
    )
    return C.classification_experiment(results, evaluate, (xtr, xte, ytr, yte), title)


def run(name: str, args, methods: list[C.Method]) -> None:
    """Print one dataset's table (and plot its curves with ``--plot``)."""
    result = experiment(name, args, methods)
    print(result.report(args.columns))
    print()
    plot_path = args.plot.replace(".png", f"_{name}.png") if args.plot else None
    C.plot({r.method.label: r.curve for r in result.results}, plot_path, f"Logistic regression ({name})")


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], epochs=None)
    p.add_argument("--dataset", choices=["synthetic", "breast_cancer", "both"], default="both")
    _results.add_argument(p)
    args = p.parse_args()
    methods = C.setup(args)
    for name in ("synthetic", "breast_cancer") if args.dataset == "both" else (args.dataset,):
        run(name, args, methods)


if __name__ == "__main__":
    _results.run(main)
