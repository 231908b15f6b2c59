"""Experiment 3: an MLP trained in float16 with MC weights, against torch in each precision.

Three linear layers with ReLU between them, cross-entropy loss, plain SGD:

* breast cancer (bundled; 80/20 split, standardised features): 30-150-150-1, binary
  cross-entropy on the logit, lr 6e-3, 1,000 epochs, full batch;
* reduced MNIST: the first 1,000 training images of each digit (10,000 images, pixels
  scaled to [0, 1] and normalised by MNIST's mean 0.1307 / std 0.3081), tested on the
  10,000 test images: 784-50-50-10, batch 128, lr 2e-3, momentum 0.8, 100 epochs.
  Needs the IDX files in ``--mnist-root`` (``python examples/fetch_mnist.py ROOT``).

``--between`` chooses what flows between the MC layers: ``tensor`` (default; the paper's
choice) turns each MC layer's output into a plain tensor of the component dtype
(``MCToTensor``), so only weights, gradients and updates are MC and the ReLU runs on
plain tensors; ``mc`` keeps the activations MC (``MCReLU``), about twice the cost.

    python examples/lowprec_mlp.py --dataset breast_cancer
    python examples/lowprec_mlp.py --dataset mnist --mnist-root ~/data/mnist --epochs 10
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import hypermc.nn.functional as MF
from hypermc import _results
from hypermc.data import load_breast_cancer, load_mnist, per_class_subset, train_test_split
from hypermc.nn import MCLinear, MCReLU, MCSequential, MCToTensor
from hypermc.optim import MCSGD

import lowprec_common as C

# dataset: hidden sizes, lr, momentum, epochs, batch size (None: full batch)
SETTINGS = {
    "breast_cancer": dict(hidden=(150, 150), lr=6e-3, momentum=0.0, epochs=1000, batch=None),
    "mnist": dict(hidden=(50, 50), lr=2e-3, momentum=0.8, epochs=100, batch=128),
}
# MNIST's default methods leave out MC fp16 nc=3 and MC fp32 nc=2 (about 13 s and 6 s per
# epoch here, against 4 s for MC fp16 nc=2); ask for them with --methods.
DEFAULT_METHODS = {
    "breast_cancer": C.ALL_METHODS,
    "mnist": "torch-fp16,torch-fp32,torch-fp64,mc-fp16-nc1,mc-fp16-nc2",
}
MNIST_PER_CLASS = 1000
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def load(name: str, args):
    """float64 features, targets (float 0/1 for binary, int64 classes for MNIST), out size."""
    if name == "breast_cancer":
        ds = load_breast_cancer()
        xtr, xte, ytr, yte = train_test_split(ds.data, ds.target.to(C.f64), test_size=0.2, seed=args.seed)
        mean, std = xtr.mean(0), xtr.std(0)
        return (xtr - mean) / std, (xte - mean) / std, ytr, yte, 1
    images, labels = load_mnist(args.mnist_root, train=True)
    keep = per_class_subset(labels, MNIST_PER_CLASS)
    test_images, test_labels = load_mnist(args.mnist_root, train=False)

    def prep(x):
        return (x.reshape(x.shape[0], -1).to(C.f64) / 255 - MNIST_MEAN) / MNIST_STD

    return prep(images[keep]), prep(test_images), labels[keep], test_labels, 10


def layers(sizes, make_linear, activation) -> list[nn.Module]:
    out = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i:
            out += activation()
        out.append(make_linear(a, b))
    return out


def experiment(name: str, args, methods: list[C.Method]) -> C.Experiment:
    """Train every method on one dataset (``args``: epochs or None, seed, loss_scale, quiet,
    between, mnist_root)."""
    cfg = SETTINGS[name]
    epochs = args.epochs or cfg["epochs"]
    xtr, xte, ytr, yte, n_out = load(name, args)
    sizes = (xtr.shape[1], *cfg["hidden"], n_out)
    binary = n_out == 1

    def make_torch_model(dtype):
        return nn.Sequential(*layers(sizes, lambda a, b: nn.Linear(a, b, dtype=dtype), lambda: [nn.ReLU()]))

    init = C.initial_values(make_torch_model, args.seed)
    torch_loss = F.binary_cross_entropy_with_logits if binary else F.cross_entropy
    mc_loss = MF.binary_cross_entropy_with_logits if binary else MF.cross_entropy
    results = []
    for m in methods:
        if m.is_mc:
            between = (lambda: [MCToTensor(), nn.ReLU()]) if args.between == "tensor" else (lambda: [MCReLU()])
            model = MCSequential(*layers(sizes, lambda a, b: MCLinear(a, b, nc=m.nc, dtype=m.dtype), between))  # noqa: B023
            opt, loss = MCSGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"]), mc_loss
        else:
            model = make_torch_model(m.dtype)
            opt, loss = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"]), torch_loss
        C.copy_parameters(model, init)
        x = xtr.to(m.dtype)
        y = ytr.to(m.dtype) if binary else ytr
        batches = C.full_batch(x, y) if cfg["batch"] is None else C.mini_batches(x, y, cfg["batch"], args.seed)
        net = nn.Sequential(model, C.Squeeze()) if binary else model
        results.append(C.train(m, net, opt, loss, batches, epochs, args.loss_scale, args.quiet))

    def evaluate(r: C.Result, x, y):
        model = make_torch_model(C.f64)
        C.copy_parameters(model, r.params64)
        with torch.no_grad():
            z = model(x)
        if binary:
            z = z.squeeze(-1)
            return torch_loss(z, y).item(), ((z > 0).to(C.f64) == y).to(C.f64).mean().item()
        return torch_loss(z, y).item(), (z.argmax(1) == y).to(C.f64).mean().item()

    batch = "full batch" if cfg["batch"] is None else f"batch {cfg['batch']}"
    title = (
        f"MLP {'-'.join(map(str, sizes))}, {name} ({xtr.shape[0]} train / {xte.shape[0]} test): lr {cfg['lr']:g}, "
        f"momentum {cfg['momentum']:g}, {batch}, {epochs} epochs, seed {args.seed}, between MC layers: {args.between}"
    )
    return C.classification_experiment(results, evaluate, (xtr, xte, ytr, yte), title)


def run(name: str, args) -> None:
    """Print one dataset's table (and plot its curves with ``--plot``)."""
    result = experiment(name, args, C.setup(args, default_methods=DEFAULT_METHODS[name]))
    print(result.report(args.columns))
    print()
    plot_path = args.plot.replace(".png", f"_{name}.png") if args.plot else None
    C.plot({r.method.label: r.curve for r in result.results}, plot_path, f"MLP ({name})")


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], epochs=None, methods=None)
    p.add_argument("--dataset", choices=["breast_cancer", "mnist", "both"], default="breast_cancer")
    p.add_argument("--mnist-root", default="data/mnist", help="directory of the MNIST IDX files (default data/mnist)")
    p.add_argument("--between", choices=["tensor", "mc"], default="tensor", help="what flows between MC layers")
    _results.add_argument(p)
    args = p.parse_args()
    for name in ("breast_cancer", "mnist") if args.dataset == "both" else (args.dataset,):
        run(name, args)


if __name__ == "__main__":
    _results.run(main)
