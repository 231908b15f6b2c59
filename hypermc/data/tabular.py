"""Small tabular datasets: the bundled breast cancer data, a synthetic classification
generator, and a seeded train/test split.

Everything is returned as float64 / int64 tensors; callers cast to the dtype they train
in (so every precision sees the same numbers, rounded once).
"""

from __future__ import annotations

import csv
import io
import math
from importlib import resources
from typing import NamedTuple

import torch

__all__ = ["TabularDataset", "load_breast_cancer", "make_classification", "train_test_split"]

_BREAST_CANCER_FILE = "breast_cancer.csv"
_MEASURES = (
    "radius",
    "texture",
    "perimeter",
    "area",
    "smoothness",
    "compactness",
    "concavity",
    "concave points",
    "symmetry",
    "fractal dimension",
)
#: The 30 features in file order (scikit-learn's names): means, standard errors, worst.
BREAST_CANCER_FEATURES = (
    tuple(f"mean {m}" for m in _MEASURES) + tuple(f"{m} error" for m in _MEASURES) + tuple(f"worst {m}" for m in _MEASURES)
)


class TabularDataset(NamedTuple):
    """Features and labels of a small classification dataset.

    Attributes:
        data: float64 tensor ``(n_samples, n_features)``.
        target: int64 tensor ``(n_samples,)`` of class ids ``0 .. n_classes - 1``.
        feature_names: one name per column of ``data``.
        target_names: the name of each class id.

    Example:
        >>> ds = TabularDataset(torch.zeros(3, 2, dtype=torch.float64), torch.tensor([0, 1, 1]),
        ...                     ("a", "b"), ("no", "yes"))
        >>> ds.data.shape, ds.target_names[ds.target[1]]
        (torch.Size([3, 2]), 'yes')
    """

    data: torch.Tensor
    target: torch.Tensor
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]


def load_breast_cancer() -> TabularDataset:
    """The Breast Cancer Wisconsin (Diagnostic) dataset, bundled with hypermc.

    569 samples, 30 real features, 2 classes (0 = malignant: 212, 1 = benign: 357), as
    in ``sklearn.datasets.load_breast_cancer``; the CSV is a byte-identical copy of
    scikit-learn's (see ``hypermc/data/NOTICE.breast_cancer.txt`` for source, license
    (CC BY 4.0) and citation). Read through :mod:`importlib.resources`, so it works
    from an installed wheel. Features are raw (not standardised).

    Returns:
        :class:`TabularDataset` with ``data`` float64 ``(569, 30)`` and ``target`` int64.

    Example:
        >>> ds = load_breast_cancer()
        >>> ds.data.shape, int(ds.target.sum())
        (torch.Size([569, 30]), 357)
    """
    text = resources.files(__package__).joinpath(_BREAST_CANCER_FILE).read_text(encoding="ascii")
    rows = list(csv.reader(io.StringIO(text)))
    n_samples, n_features = int(rows[0][0]), int(rows[0][1])
    target_names = tuple(rows[0][2:])
    body = rows[1:]
    if len(body) != n_samples or any(len(r) != n_features + 1 for r in body):
        raise ValueError(f"{_BREAST_CANCER_FILE} is corrupt: expected {n_samples} rows of {n_features + 1} fields")
    data = torch.tensor([[float(v) for v in r[:-1]] for r in body], dtype=torch.float64)
    target = torch.tensor([int(r[-1]) for r in body], dtype=torch.int64)
    return TabularDataset(data, target, BREAST_CANCER_FEATURES, target_names)


def make_classification(
    n_samples: int = 1000,
    n_features: int = 2,
    *,
    n_informative: int = 2,
    n_classes: int = 2,
    class_sep: float = 1.0,
    flip_y: float = 0.01,
    seed: int = 0,
) -> TabularDataset:
    """Gaussian clusters, one per class, in the manner of scikit-learn's generator.

    The ``n_informative`` leading features of class ``k`` are drawn from
    ``N(0, I) @ A_k + c_k``, where ``c_k`` is a distinct vertex of the hypercube with
    side ``2 * class_sep`` and ``A_k`` has entries uniform in ``[-1, 1)`` (a random
    covariance per cluster); other features are standard normal noise. Then a fraction
    ``flip_y`` of labels is replaced by random classes (so the classes overlap), and the
    samples are shuffled. Uses its own ``torch.Generator(seed)``: the same seed gives the
    same data on every machine; the values differ from scikit-learn's (different RNG).

    Args:
        n_samples: number of points.
        n_features: total features (``>= n_informative``).
        n_informative: informative features; ``2**n_informative >= n_classes``.
        n_classes: number of classes (one cluster each).
        class_sep: half the distance between cluster centres along each axis.
        flip_y: fraction of labels replaced at random.
        seed: seed of the generator.

    Returns:
        :class:`TabularDataset` (float64 data, int64 target, classes balanced up to one
        sample before flipping).

    Raises:
        ValueError: inconsistent sizes.

    Example:
        >>> ds = make_classification(100, 4, n_classes=3, seed=0)
        >>> ds.data.shape, ds.data.dtype, ds.feature_names
        (torch.Size([100, 4]), torch.float64, ('x0', 'x1', 'x2', 'x3'))
        >>> torch.equal(make_classification(100, 4, n_classes=3, seed=0).data, ds.data)  # same seed, same data
        True
    """
    if n_samples < n_classes or n_classes < 2:
        raise ValueError(f"need n_classes >= 2 and n_samples >= n_classes; got {n_samples=}, {n_classes=}")
    if not 1 <= n_informative <= n_features:
        raise ValueError(f"need 1 <= n_informative <= n_features; got {n_informative=}, {n_features=}")
    if 2**n_informative < n_classes:
        raise ValueError(f"{n_classes} classes need at least {math.ceil(math.log2(n_classes))} informative features")
    if not 0.0 <= flip_y <= 1.0:
        raise ValueError(f"flip_y must be in [0, 1]; got {flip_y}")
    g = torch.Generator().manual_seed(seed)
    # distinct hypercube vertices: class k takes vertex k's binary digits
    vertices = torch.tensor([[(k >> b) & 1 for b in range(n_informative)] for k in range(n_classes)], dtype=torch.float64)
    centres = (2 * vertices - 1) * class_sep
    sizes = [n_samples // n_classes + (k < n_samples % n_classes) for k in range(n_classes)]
    data, target = [], []
    for k, size in enumerate(sizes):
        a = torch.rand(n_informative, n_informative, generator=g, dtype=torch.float64) * 2 - 1
        x = torch.randn(size, n_informative, generator=g, dtype=torch.float64) @ a + centres[k]
        data.append(x)
        target.append(torch.full((size,), k, dtype=torch.int64))
    x = torch.cat(data)
    y = torch.cat(target)
    if n_features > n_informative:
        noise = torch.randn(n_samples, n_features - n_informative, generator=g, dtype=torch.float64)
        x = torch.cat([x, noise], dim=1)
    flip = torch.rand(n_samples, generator=g, dtype=torch.float64) < flip_y
    y = torch.where(flip, torch.randint(n_classes, (n_samples,), generator=g), y)
    order = torch.randperm(n_samples, generator=g)
    names = tuple(f"x{i}" for i in range(n_features))
    return TabularDataset(x[order], y[order], names, tuple(str(k) for k in range(n_classes)))


def train_test_split(*tensors: torch.Tensor, test_size: float = 0.2, seed: int = 0) -> list[torch.Tensor]:
    """Split tensors along dim 0 into a random train part and test part.

    Args:
        tensors: tensors with the same first dimension ``n``.
        test_size: fraction of samples in the test part; it gets ``round(n * test_size)``.
        seed: seed of the permutation.

    Returns:
        ``[train_0, test_0, train_1, test_1, ...]`` (scikit-learn's order).

    Raises:
        ValueError: no tensors, different lengths, or ``test_size`` outside ``(0, 1)``.

    Example:
        >>> x, y = torch.arange(10.0).reshape(5, 2), torch.arange(5)
        >>> x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.4, seed=0)
        >>> len(x_train), len(x_test)
        (3, 2)
        >>> torch.equal(x_test[:, 0], 2.0 * y_test)  # rows stay paired
        True
    """
    if not tensors:
        raise ValueError("train_test_split needs at least one tensor")
    n = tensors[0].shape[0]
    if any(t.shape[0] != n for t in tensors):
        raise ValueError(f"all tensors need the same first dimension; got {[t.shape[0] for t in tensors]}")
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be in (0, 1); got {test_size}")
    n_test = round(n * test_size)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    test, train = order[:n_test], order[n_test:]
    out = []
    for t in tensors:
        out += [t[train], t[test]]
    return out
