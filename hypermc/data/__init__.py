"""Datasets: small tabular and image data for the low-precision experiments.

* :func:`load_breast_cancer` -- the bundled Breast Cancer Wisconsin (Diagnostic) CSV.
* :func:`make_classification` -- seeded Gaussian clusters; :func:`train_test_split`.
* :func:`read_idx`, :func:`load_mnist`, :func:`fetch_mnist`, :func:`per_class_subset`.
* :class:`Graph` -- named directed graph with ids from sorted names; :func:`load_edges`,
  :func:`save_edges` for CSV/TSV edge lists.
* :func:`wordnet_closure` -- WordNet noun hypernym closures; :func:`load_mammals` -- the
  shipped mammal closure.
"""

from .edges import load_edges, save_edges
from .graph import Graph
from .mnist import fetch_mnist, load_mnist, per_class_subset, read_idx, verify_mnist
from .tabular import TabularDataset, load_breast_cancer, make_classification, train_test_split
from .wordnet import WordNetNotFoundError, load_mammals, wordnet_closure

__all__ = [
    "TabularDataset",
    "load_breast_cancer",
    "make_classification",
    "train_test_split",
    "read_idx",
    "load_mnist",
    "fetch_mnist",
    "verify_mnist",
    "per_class_subset",
    "Graph",
    "load_edges",
    "save_edges",
    "wordnet_closure",
    "load_mammals",
    "WordNetNotFoundError",
]
