"""Hierarchy embeddings: negative sampler, trainer and reconstruction evaluator.

* :class:`TrainConfig` -- the hyperparameters of :func:`train`, checked once, stored
  in the checkpoint; :func:`rule_hyperparameters` / :func:`auto_config` -- the ones
  ``train`` picks from the dimension when they are not given.
* :func:`train` -- negative-sampling softmax training on any manifold, MC arithmetic,
  row-sparse Riemannian SGD, checkpoints and bit-identical resume.
* :func:`embed_tree` / :func:`embed_closure` -- combinatorial constructions: tree
  distances (Sarkar) / closure ranking (nested shadows: every ancestor nearest).
* :func:`evaluate` -- reconstruction mean average precision and mean rank, chunked over
  source nodes (no ``N x N`` tensor).
* :func:`export` -- write a table and its node names as tsv, npy or a torch file (what
  ``python -m hypermc export`` writes from a checkpoint).
* :class:`NegativeSampler`, :class:`AliasTable` -- the vectorised sampler.
* :func:`batch_distance` -- the batched distances both use.
* :mod:`hypermc.embed.plot` -- PNG pictures of 2-D embeddings and training curves
  (imported on its own: ``import hypermc.embed`` does not load matplotlib).

Library functions only: no printing, no argument parsing (the CLI is
``python -m hypermc``).
"""

from .config import TrainConfig, auto_config, rule_hyperparameters
from .construct import (
    bits_needed,
    components_needed,
    distortion,
    embed_tree,
    fit_tau,
    max_components,
    max_tau,
    spanning_tree,
)
from .distance import batch_distance
from .evaluate import evaluate
from .export import export
from .nested import embed_closure
from .sampler import AliasTable, NegativeSampler
from .train import TrainResult, load_checkpoint, train

__all__ = [
    "embed_tree",
    "embed_closure",
    "distortion",
    "fit_tau",
    "max_tau",
    "max_components",
    "spanning_tree",
    "bits_needed",
    "components_needed",
    "train",
    "TrainConfig",
    "auto_config",
    "rule_hyperparameters",
    "evaluate",
    "export",
    "TrainResult",
    "load_checkpoint",
    "NegativeSampler",
    "AliasTable",
    "batch_distance",
]
