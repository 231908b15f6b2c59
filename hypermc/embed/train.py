"""Negative-sampling trainer for hierarchy embeddings on any manifold, in MC arithmetic.

The model of Nickel & Kiela (2017) as poincare-embeddings trains it, with the points
stored as multi-component floats:

* For each true edge ``(u, v)`` (child, ancestor) and ``negatives`` corrupted targets
  ``v'_1..v'_N`` (:class:`~hypermc.embed.sampler.NegativeSampler`: only the target slot
  is corrupted; ``u`` itself and true ancestors of ``u`` are rejected), the loss is the
  softmax cross-entropy of the positive among the logits ``-scale * d(u, .)``::

      loss(u, v) = scale d(u, v) + log( e^{-scale d(u, v)} + sum_j e^{-scale d(u, v'_j)} )

  averaged over the batch. Negative slots the sampler could not fill are masked out of
  the softmax.
* Burn-in: the first ``burnin`` epochs use ``lr * burnin_lr_mult`` and negatives drawn
  from ``count^0.75`` (an alias table); uniform negatives afterwards, with the learning
  rate ``lr`` constant (``lr_schedule="constant"``) or changing linearly to
  ``lr * lr_end_mult`` over the remaining epochs (``"linear"``: a decay for
  ``lr_end_mult < 1``, a ramp-up for ``lr_end_mult > 1``; see :func:`epoch_lr`).
* Optimisation: :class:`~hypermc.optim.RiemannianSGD` in its row-sparse mode on the
  MC embedding table (``retraction=True`` by default: the first-order retraction of
  each model; in MC it costs ~10 ms per batch where ``expmap`` costs ~100 ms at nc=2).
  With ``optimizer="rmsprop"`` each row's gradient is first divided by the root of its
  running mean square Riemannian norm (one number per row), so every row moves about
  ``lr`` hyperbolic units per batch it is in, leaves and hubs alike.
  Each row's step is bounded by ``max_step`` (hyperbolic units). Each batch gathers its
  unique rows, computes all ``B x (1 + N)`` distances in a few vectorised ops
  (:func:`~hypermc.embed.distance.batch_distance`: cancellation-prone parts in MC,
  then the component dtype), backpropagates to the
  gathered rows -- duplicate rows' gradients are summed by autograd's index backward --
  and updates only those rows, in MC arithmetic.
* Configuration: the hyperparameters are one frozen :class:`~hypermc.embed.TrainConfig`
  (checked once when it is built); ``train(graph, manifold, config)`` or
  ``train(graph, manifold, dim=..., lr=...)``, which builds it.
* Reproducibility: every random draw (initialisation, edge order, negatives) comes from
  one ``torch.Generator`` seeded with ``seed``. A checkpoint holds the MC components,
  the optimizer state, the generator state, the epoch and the configuration
  (:meth:`TrainConfig.to_dict` plus the manifold, the graph checksum, ...) and, with
  ``optimizer="rmsprop"``, the rows' mean squares;
  ``resume`` continues bit-identically to a run that was never interrupted (same torch
  build, thread count and device type; a run resumes only on the device type it was
  started on, since CPU and CUDA generators draw different streams).
* Devices and the fast update: ``device=`` puts the table, the sampler tables, the
  generator and every batch on one device; ``fast=True`` computes the Riemannian step in
  the component dtype and moves the MC points with one MC retraction
  (:func:`fast_retr_rows`), and on the CPU computes the distances and their gradient
  with the fused kernels of :mod:`hypermc.manifolds.math.fused` (plain tables too; a few
  ulps from the torch path; docs/training.md).
* Safety: a non-finite loss or updated row raises :class:`FloatingPointError` naming
  the epoch and the nodes, before the bad values are written into the table.

Plain tables (``nc=None``) run the same code on ordinary tensors: the fp32/fp64
baselines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch

from .._checks import check_callable, check_instance
from .._progress import progress_bar, show_progress
from ..data.graph import Graph
from ..manifolds import Euclidean, PoincareHalfspace  # noqa: F401  (the docstring examples use them)
from ..manifolds import registry as _registry
from ..manifolds.base import Manifold
from ..manifolds.parameter import ManifoldParameter
from ..manifolds.registry import MANIFOLDS, manifold_from_config  # noqa: F401  (MANIFOLDS: re-exported)
from ..mcf import portable
from ..mcf.tensor import MCTensor
from ..optim.riemannian import RiemannianSGD
from .config import DEFAULT_INIT_STD, DEFAULTS, RMSPROP_BETA, RMSPROP_EPS, TrainConfig, auto_config, device_name
from .distance import components_of, distance_function
from .sampler import NegativeSampler

__all__ = [
    "train",
    "TrainConfig",
    "write_checkpoint",
    "epoch_lr",
    "resolve_device",
    "fast_retr_rows",
    "unique_ids",
    "fixed_order_logsumexp",
    "TrainResult",
    "load_checkpoint",
    "manifold_from_config",
    "CHECKPOINT_NAME",
    "DEFAULTS",
    "DEFAULT_INIT_STD",
]

#: File name of the checkpoint inside ``checkpoint_dir`` (overwritten each time).
CHECKPOINT_NAME = "checkpoint.pt"
#: Format tag stored in every checkpoint.
CHECKPOINT_FORMAT = "hypermc.embed.checkpoint/2"
#: format 1 had no content hash; it is still read (unchecked: there is nothing to check)
_UNHASHED_FORMATS = ("hypermc.embed.checkpoint/1",)
#: Configuration keys that define the trajectory: a resumed run must match them.
TRAJECTORY_KEYS = (
    "manifold",
    "curvature",
    "dim",
    "nc",
    "dtype",
    "lr",
    "batch_size",
    "negatives",
    "burnin",
    "burnin_lr_mult",
    "scale",
    "seed",
    "init_std",
    "retraction",
    "optimizer",
    "rmsprop_eps",
    "near_negatives",
    "max_rounds",
    "max_step",
    "lr_schedule",
    "lr_end_mult",
    "graph_checksum",
    "fast",
    "init",
)
#: The hyperparameters :func:`train` accepts as keyword arguments: the :class:`TrainConfig` fields.
HYPERPARAMETERS = tuple(f.name for f in dataclasses.fields(TrainConfig))


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        embeddings: ``(N, n)`` MCTensor (plain Tensor for ``nc=None``), row ``i`` is
            node ``graph.names[i]`` (``n = dim + 1`` for the Lorentz model).
        manifold: the manifold.
        graph: the training graph.
        config: the run's record, as stored in the checkpoint (JSON-serialisable dict):
            the :class:`TrainConfig` fields (:meth:`TrainConfig.to_dict`) plus the
            manifold, curvature, graph checksum and size, ``device_type`` and the
            ``init`` hash; ``TrainConfig.from_dict(config)`` reads the config back.
        history: one dict per epoch run: ``epoch`` (1-based), ``loss``, ``lr``,
            ``burnin``, ``seconds``, ``masked`` (negative slots masked out).
        seconds: training time of all epochs, resumed ones included.
        epoch: number of completed epochs.
        checkpoint: path of the last checkpoint written, or ``None``.

    Example:
        >>> g = Graph.from_pairs([("a", "r"), ("b", "r")])
        >>> r = train(g, Euclidean(), dim=2, nc=None, epochs=1, negatives=1, progress=False)
        >>> r.epoch, r.checkpoint, r.embeddings.shape
        (1, None, torch.Size([3, 2]))
        >>> sorted(r.history[0])
        ['burnin', 'epoch', 'loss', 'lr', 'masked', 'seconds']
        >>> r.config["manifold"], r.config["num_nodes"], r.config["nc"]
        ('euclidean', 3, None)
    """

    embeddings: torch.Tensor
    manifold: Manifold
    graph: Graph
    config: dict
    history: list
    seconds: float
    epoch: int
    checkpoint: str | None = None


def manifold_name(manifold: Manifold) -> str:
    """The config name of a manifold instance (``halfspace``, ``ball``, ...): its registered
    name (:func:`hypermc.manifolds.registry.manifold_name`).

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> manifold_name(PoincareHalfspace()), manifold_name(Lorentz())
        ('halfspace', 'lorentz')
    """
    return _registry.manifold_name(manifold, where="train")


def train(
    graph: Graph,
    manifold: Manifold,
    config: TrainConfig | None = None,
    *,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    callback: Callable[[int, dict, torch.Tensor], Any] | None = None,
    parallel: Any | None = None,
    init: torch.Tensor | None = None,
    **hyperparameters: Any,
) -> TrainResult:
    """Train an embedding of ``graph`` on ``manifold`` (method in the module docstring).

    The hyperparameters come either as one :class:`~hypermc.embed.TrainConfig`
    (``config``, taken as it is) or as keyword arguments named like its fields
    (``dim=10, lr=3.0, ...``), which build that config -- not both. In the keyword form
    the fields not given follow the rule of
    :func:`~hypermc.embed.config.rule_hyperparameters` (:func:`~hypermc.embed.config.auto_config`):

    * distance ``scale = dim / 4`` (2-D: 0.5; 10-D: 2.5);
    * ``dim <= 2``: 1000 epochs, burn-in 20, ``lr`` 10 rising linearly to 80, exact update;
    * ``dim >= 3``: 200 epochs, burn-in 5, ``lr`` 5 rising linearly to 50, ``fast=True``
      (the exact update with ``parallel=``: the fast one runs in one process);
    * a graph of 100,000 closure edges or more in ``dim >= 3`` (WordNet nouns): per-row
      RMSprop at ``lr`` 0.02 (constant), batch 32,768, scale 4, burn-in 10, 160 epochs,
      ``fast=True`` (unless ``optimizer="sgd"`` is given);
    * the rest: :class:`TrainConfig`'s defaults (batch 512, 50 negatives, ...).

    Measured (docs/training.md, "Defaults from the data"): mammals 10-D MAP 0.979 (seed 0),
    2-D MAP 0.972 (three seeds); WordNet nouns 10-D at ``nc=2`` MAP 0.874, mean rank 2.60
    on all sources. Given keywords always win.

    Args:
        graph: the hierarchy; edges ``(child, parent)``.
        manifold: an instance of a registered model (:mod:`hypermc.manifolds.registry`:
            :class:`PoincareHalfspace`, :class:`PoincareBall`, :class:`Lorentz`,
            :class:`Euclidean`, or one registered with ``register_manifold``).
        config: the hyperparameters (default: ``auto_config(**hyperparameters)``).
        checkpoint_dir: where ``checkpoint.pt`` is written (overwritten): every
            ``config.checkpoint_every`` epochs and after the last epoch.
        resume: a checkpoint to continue from (the configuration must match; only
            ``epochs`` may differ, and only with ``lr_schedule="constant"``).
        progress: show a tqdm progress bar (on stderr); ``None`` (default): when stderr
            is a terminal.
        callback: ``callback(epoch, stats, embeddings)`` after every epoch (``epoch``
            1-based, ``stats`` the history entry, ``embeddings`` the live table --
            read it, do not modify it).
        parallel: a :class:`~hypermc.embed.distributed.DataParallel` for data-parallel
            training on ``torch.distributed`` (every rank calls ``train`` with the same
            arguments; only rank 0 writes checkpoints and shows progress). ``None``:
            one process.
        init: start from these points instead of random ones: MC components
            ``(N, n, nc)`` (``(N, n)`` for ``nc=None``) in ``dtype``, e.g. a
            :func:`~hypermc.embed.embed_tree` construction; the config records their
            content hash (``init``), so a resumed run must start from the same points.
        **hyperparameters: :class:`TrainConfig` fields (``dim``, ``nc``, ``dtype``,
            ``epochs``, ``lr``, ``batch_size``, ``negatives``, ``near_negatives``, ``burnin``,
            ``burnin_lr_mult``, ``scale``, ``seed``, ``init_std``, ``retraction``,
            ``optimizer``, ``max_rounds``, ``max_step``, ``lr_schedule``, ``lr_end_mult``,
            ``checkpoint_every``, ``device``, ``fast``), when ``config`` is not given.

    Returns:
        :class:`TrainResult`.

    Raises:
        TypeError, ValueError: bad arguments (hyperparameters are checked by
            :class:`TrainConfig`), an unknown keyword, ``config`` together with
            hyperparameter keywords, or a ``resume`` checkpoint that does not match
            (the message names the key).
        FloatingPointError: a non-finite loss or updated row (names epoch and nodes).

    Example:
        The transitive closure of a small tree (root ``r``, children ``a`` and ``b``,
        grandchildren ``a1`` and ``b1``; an edge from every node to each of its ancestors),
        a few epochs in MC arithmetic (2 components of float64):

        >>> from hypermc.embed import evaluate
        >>> g = Graph.from_pairs([("a", "r"), ("b", "r"), ("a1", "a"), ("a1", "r"), ("b1", "b"), ("b1", "r")])
        >>> r = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=10, burnin=0, lr=3.0, negatives=4,
        ...           seed=0, progress=False)
        >>> r.epoch, r.embeddings.shape, r.embeddings.nc
        (10, torch.Size([5, 2]), 2)
        >>> round(r.history[0]["loss"], 2)  # log(1 + 4): the points start near the origin, all distances ~0
        1.61
        >>> r.history[-1]["loss"] < r.history[0]["loss"]
        True
        >>> evaluate(r.manifold, r.embeddings, g.edges)["map"]
        1.0

        The same run from a :class:`TrainConfig` is ``train(g, PoincareHalfspace(), cfg)``;
        the result records the config:

        >>> cfg = TrainConfig(dim=2, nc=2, epochs=10, burnin=0, lr=3.0, negatives=4, seed=0)
        >>> TrainConfig.from_dict(r.config) == cfg
        True
    """
    config = _config_of(config, hyperparameters, parallel, graph)
    _check_run(graph, manifold, config, checkpoint_dir, callback, parallel)
    run = _Trainer(graph, manifold, config, parallel=parallel, init=init)
    if resume is not None:
        run.resume(resume)
    run.check_table(resume)
    if progress is None:
        progress = show_progress(quiet=False)
    return run.fit(checkpoint_dir=checkpoint_dir, progress=progress, callback=callback)


def _config_of(config: TrainConfig | None, hyperparameters: dict, parallel: Any | None = None, graph: Graph | None = None) -> TrainConfig:
    """``config``, or the :class:`TrainConfig` built from ``train``'s hyperparameter keywords
    (the rule's ``fast`` update runs in one process, so a ``parallel`` run that does not ask
    for it gets the exact update)."""
    unknown = [name for name in hyperparameters if name not in HYPERPARAMETERS]
    if unknown:
        raise TypeError(
            f"train: unexpected keyword arguments {unknown}; the hyperparameters are the TrainConfig fields ({', '.join(HYPERPARAMETERS)})"
        )
    if config is None:
        if parallel is not None:
            hyperparameters = {"fast": False, **hyperparameters}
        edges = graph.num_edges if isinstance(graph, Graph) else None  # the rule reads the graph's size
        return auto_config(edges=edges, **hyperparameters)
    check_instance("train", "config", config, TrainConfig, "a TrainConfig or None")
    if hyperparameters:
        raise TypeError(
            f"train: got config and the hyperparameter keywords {sorted(hyperparameters)}; pass one of "
            "them (a changed copy of a config: dataclasses.replace(config, lr=...))"
        )
    return config


def _check_run(
    graph: Graph,
    manifold: Manifold,
    config: TrainConfig,
    checkpoint_dir: str | os.PathLike[str] | None,
    callback: Callable[[int, dict, torch.Tensor], Any] | None,
    parallel: Any | None,
) -> None:
    """The run arguments of :func:`train` (the hyperparameters are checked by :class:`TrainConfig`)."""
    check_instance("train", "graph", graph, Graph, "a hypermc.data.Graph")
    if graph.num_edges == 0:
        raise ValueError("train: the graph has no edges; nothing to train on")
    manifold_name(manifold)
    if config.checkpoint_every is not None and checkpoint_dir is None:
        raise ValueError("train: checkpoint_every needs a checkpoint_dir to write checkpoint.pt into")
    if callback is not None:
        check_callable("train", "callback", callback)
    if parallel is not None:
        parallel.check(graph, config.batch_size)
        if config.fast:
            raise ValueError("train: fast=True runs in one process only; got a parallel=DataParallel")


def resolve_device(device: Any, where: str) -> torch.device:
    """``device`` as a ``torch.device`` (``"auto"``: CUDA when available, else CPU).

    Raises:
        TypeError: not a str or ``torch.device``.
        ValueError: an unknown device string, or CUDA asked for but not available.

    Example:
        >>> resolve_device("cpu", "train")
        device(type='cpu')
        >>> resolve_device("auto", "train").type == ("cuda" if torch.cuda.is_available() else "cpu")
        True
        >>> resolve_device("tpu", "train")
        Traceback (most recent call last):
        ...
        ValueError: train: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got 'tpu'
    """
    name = device_name(device, where)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{where}: device is {str(dev)!r} but CUDA is not available; use device='cpu' or 'auto'")
    return dev


def fast_retr_rows(manifold: Manifold, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Move MC points ``x`` by a plain step ``u`` with the manifold's retraction.

    Precondition: ``x`` an ``(R, n)`` MCTensor (or plain Tensor) of points, ``u`` a plain
    ``(R, n)`` tangent step in the component dtype. The model's
    :meth:`~hypermc.manifolds.base.Manifold.fast_retr`: the halfspace retraction
    ``(x_bar + u_bar, x_n exp(u_n / x_n))`` takes the factor ``exp(u_n / x_n)`` rounded in
    the component dtype from the leading component of ``x_n`` (a relative perturbation
    of the step of ``O(u)``, not of the point); the other models use their retraction
    ``projx(x + u)`` with the plain ``u``. Bound: the new coordinates are the MC sum /
    product of ``x`` and the plain operand, with the MC error of one addition or
    multiplication (``O(u^nc)`` relative to the coordinate, ``tests/conftest.py``).
    Reference: Nickel & Kiela (2017), the retraction of :mod:`hypermc.manifolds`.

    Example:
        One halfspace point ``(0, 1)`` moved by ``u = (0.5, 1)``: ``(0 + 0.5, 1 * exp(1 / 1))``.

        >>> x = hm.mc(torch.tensor([[0.0, 1.0]], dtype=torch.float64), nc=2)
        >>> y = fast_retr_rows(PoincareHalfspace(), x, torch.tensor([[0.5, 1.0]], dtype=torch.float64))
        >>> y.nc, y.approx()
        (2, tensor([[0.5000, 2.7183]], dtype=torch.float64))
    """
    return manifold.fast_retr(x, u)


def unique_ids(nodes: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(nodes, return_inverse=True)`` for ids in ``[0, num_nodes)``: the
    sorted distinct ids and each entry's position among them.

    By marking the ids in a ``(num_nodes,)`` table instead of sorting (the same result;
    about half the time of ``torch.unique`` for a nouns batch of 52,000 ids among 82,115
    nodes); ``torch.unique`` itself where the table would be much larger than ``nodes``.

    Example:
        >>> ids, inv = unique_ids(torch.tensor([[5, 2], [2, 7]]), 10)
        >>> ids, inv
        (tensor([2, 5, 7]), tensor([[1, 0],
                [0, 2]]))
    """
    if num_nodes > 16 * nodes.numel():
        return torch.unique(nodes, return_inverse=True)
    flat = nodes.reshape(-1)
    mark = torch.zeros(num_nodes, dtype=torch.bool, device=nodes.device)
    mark[flat] = True
    ids = mark.nonzero().squeeze(1)
    pos = torch.empty(num_nodes, dtype=torch.int64, device=nodes.device)
    pos[ids] = torch.arange(ids.numel(), device=nodes.device)
    return ids, pos[flat].view(nodes.shape)


def fixed_order_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """``log(sum(exp(x)))`` along the last dimension, summed in one fixed order.

    ``m + log(s)`` with ``m`` the row maximum (0 where it is infinite, as
    :func:`torch.logsumexp` does) and ``s`` the sum of ``exp(x - m)`` in a pairwise tree:
    the row is padded with zeros to a power of two and its halves added elementwise until
    one value is left. Every addition is one elementwise IEEE operation and ``exp`` /
    ``log`` are :mod:`hypermc.mcf.portable`'s (not MKL's, whose rounding
    depends on the CPU model), so the result, and the gradient (the softmax of ``x``,
    through the same ops), are the same bits on any x86-64 CPU (at one kernel width) and
    thread count; :func:`torch.logsumexp` sums in an order that depends on the SIMD width
    of the kernels torch picked for the CPU (AVX2, AVX-512, ...). The trainer's softmax
    loss uses it so that a run gives the same digits on every machine.

    Bound: relative error of ``s`` at most ``(ceil(log2 n) + 1) u`` (the tree depth, plus
    ``exp``'s own error), the same order as :func:`torch.logsumexp`.

    Args:
        x: floating tensor ``(..., n)``, ``n >= 1``; ``-inf`` entries drop out.

    Returns:
        Tensor ``(...)``.

    Example:
        >>> x = torch.tensor([[0.0, math.log(3.0)], [1.0, -math.inf]], dtype=torch.float64)
        >>> fixed_order_logsumexp(x)  # log 4 and 1
        tensor([1.3863, 1.0000], dtype=torch.float64)
    """
    m = x.detach().amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    s = portable.exp(x - m)
    n = s.shape[-1]
    width = 1 << (n - 1).bit_length()
    if width != n:
        s = torch.nn.functional.pad(s, (0, width - n))
    while s.shape[-1] > 1:
        half = s.shape[-1] // 2
        s = s[..., :half] + s[..., half:]
    return portable.log(s.squeeze(-1)) + m.squeeze(-1)


def epoch_lr(config: TrainConfig | Mapping[str, Any], epoch: int) -> float:
    """Learning rate of the 0-based ``epoch`` of a run with this ``config``.

    ``config`` is a :class:`TrainConfig` or a dict with its keys (a checkpoint's record).
    Burn-in epochs: ``lr * burnin_lr_mult``. Afterwards ``lr`` (``constant``), or for
    ``linear`` ``lr * (1 - f (1 - lr_end_mult))`` with ``f`` going from 0 at the first
    post-burn-in epoch to 1 at the last epoch ``epochs - 1``.

    Example:
        Two burn-in epochs at a tenth of ``lr``, then a linear decay to half of it at the
        last epoch (10):

        >>> cfg = TrainConfig(epochs=11, burnin=2, lr=1.0, burnin_lr_mult=0.1, lr_schedule="linear", lr_end_mult=0.5)
        >>> [epoch_lr(cfg, epoch) for epoch in (0, 1, 2, 6, 10)]
        [0.1, 0.1, 1.0, 0.75, 0.5]
        >>> epoch_lr(dataclasses.replace(cfg, lr_schedule="constant"), 10)
        1.0
    """
    if isinstance(config, TrainConfig):
        config = config.to_dict()
    lr = config["lr"]
    if epoch < config["burnin"]:
        return lr * config["burnin_lr_mult"]
    if config["lr_schedule"] == "constant":
        return lr
    span = config["epochs"] - 1 - config["burnin"]
    f = 1.0 if span <= 0 else min(1.0, (epoch - config["burnin"]) / span)
    return lr * (1.0 - f * (1.0 - config["lr_end_mult"]))


def _run_record(graph: Graph, manifold: Manifold, config: TrainConfig, device: torch.device, init: torch.Tensor | None) -> dict:
    """The checkpoint's ``config`` record: the config's fields and what identifies the run."""
    return {
        "manifold": manifold_name(manifold),
        "curvature": float(manifold.curvature),
        **config.to_dict(),
        "graph_checksum": graph.checksum(),
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "device_type": device.type,
        "init": None if init is None else _content_hash(init),
    }


class _Batch(NamedTuple):
    """One batch of :meth:`_Trainer.sample`: positives, negatives and their mask."""

    pairs: torch.Tensor  # (B, 2) (child, parent) ids: this rank's share under data parallelism
    neg: torch.Tensor  # (B, negatives) corrupted targets
    valid: torch.Tensor  # (B, negatives) False where the sampler could not fill the slot
    n_masked: torch.Tensor  # masked slots of the whole (global) batch (0-d int64, on the device)
    n_pairs: int  # edges of the whole (global) batch


class _Trainer:
    """One run of :func:`train`: its state and its work, one job per method.

    * set-up: ``__init__`` (the run's generator, initial table, optimizer, sampler,
      gradient buffer and checkpoint record);
    * sampling: :meth:`batches` (the epoch's random edge order), :meth:`sample`
      (negatives; this rank's share under data parallelism);
    * step: :meth:`loss_and_grad` (distances, softmax loss, backward), :meth:`update`
      (:meth:`_update_exact`, the MC optimizer step, or :meth:`_update_fast`);
      :meth:`step` = sample + loss_and_grad + update for one batch;
    * checkpoints: :meth:`resume`, :meth:`save`;
    * the loop: :meth:`run_epoch`, :meth:`fit` (progress bar, checkpoints, callbacks).

    Every random draw comes from ``self.gen``, in a fixed order (initial points, then per
    epoch the edge order and per batch the negatives), which is what makes ``resume``
    bit-identical.
    """

    def __init__(
        self, graph: Graph, manifold: Manifold, config: TrainConfig, *, parallel: Any | None = None, init: torch.Tensor | None = None
    ):
        self.graph = graph
        self.manifold = manifold
        self.config = config
        self.parallel = parallel
        self.device = resolve_device(config.device, "train")
        self.record = _run_record(graph, manifold, config, self.device, init)
        self.gen = torch.Generator(device=self.device).manual_seed(config.seed)
        self.table = self._initial_table(init)
        self.comps = components_of(self.table)
        self.opt = RiemannianSGD([self.table], lr=config.lr, retraction=config.retraction, sparse_rows=True)
        self.history: list[dict] = []
        self.epoch = 0  # completed epochs
        self.edges = graph.edges.to(self.device)
        self.sampler = NegativeSampler(
            self.edges,
            graph.num_nodes,
            negatives=config.negatives,
            weights=None if graph.weights is None else graph.weights.to(self.device),
            max_rounds=config.max_rounds,
            near=config.near_negatives,
        )
        # fast=True: the fused CPU distance kernels where the model has them
        self.distance: Callable[..., torch.Tensor] = distance_function(manifold, config.fast)
        # Dense gradient buffer of the row-sparse optimizer; only the batch's rows are
        # ever non-zero (written before and cleared after each step).
        self.grad = torch.zeros_like(self.table.detach())
        self.grad_comps = components_of(self.grad)
        self.table.grad = self.grad
        # optimizer="rmsprop": each row's running mean square Riemannian gradient norm
        self.row_ms = torch.zeros(graph.num_nodes, dtype=torch.float64, device=self.device) if config.optimizer == "rmsprop" else None

    def _initial_table(self, init: torch.Tensor | None) -> ManifoldParameter:
        """Random points around the origin (drawn from the run's generator), or ``init``."""
        c = self.config
        n_coord = self.manifold.point_size(c.dim)
        table = self.manifold.random(
            self.graph.num_nodes, n_coord, std=c.init_std, nc=c.nc, dtype=c.dtype, device=self.device, generator=self.gen
        )
        if init is not None:
            _load_init(table, init, self.manifold)
        return ManifoldParameter(table, manifold=self.manifold, requires_grad=False)

    # -------------------------------------------------------------- checkpoints

    def resume(self, path: str | os.PathLike[str]) -> None:
        """Continue from the checkpoint at ``path``: table, optimizer, generator, history, epoch."""
        ckpt = load_checkpoint(path)
        _check_resume(ckpt["config"], self.record, path)
        saved_type = ckpt["config"].get("device_type", "cpu")
        if saved_type != self.device.type:
            raise ValueError(
                f"train: cannot resume from {os.fspath(path)!r}: it was written by a run on {saved_type!r} "
                f"but device is {str(self.device)!r}; the {saved_type} random stream cannot be continued on "
                f"{self.device.type}: pass device={saved_type!r} (load_checkpoint reads its embeddings anywhere)"
            )
        self.comps.copy_(ckpt["components"].reshape(self.comps.shape))
        if self.row_ms is not None:
            row_ms = ckpt.get("row_ms")
            if not isinstance(row_ms, torch.Tensor) or tuple(row_ms.shape) != tuple(self.row_ms.shape):
                raise ValueError(
                    f"train: cannot resume from {os.fspath(path)!r}: optimizer='rmsprop' needs the rows' mean squares "
                    f"(row_ms, shape ({self.row_ms.shape[0]},)); the checkpoint has {getattr(row_ms, 'shape', None)}"
                )
            self.row_ms.copy_(row_ms)
        self.opt.load_state_dict(ckpt["optimizer"])
        self.gen.set_state(ckpt["generator"])
        self.history = list(ckpt["history"])
        self.epoch = int(ckpt["epoch"])

    def check_table(self, resume: str | os.PathLike[str] | None) -> None:
        """The starting table (initial, ``init`` or resumed) holds points of the manifold; checked once."""
        ok, reason = self.manifold.check_point(self.table.detach())
        if not ok:
            where = f"the checkpoint {os.fspath(resume)!r}" if resume is not None else "the initial table"
            raise ValueError(f"train: {where} holds points off {self.manifold!r}: {reason}")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the run's checkpoint to ``path`` atomically (:func:`write_checkpoint`)."""
        write_checkpoint(
            path,
            {
                "format": CHECKPOINT_FORMAT,
                "epoch": self.epoch,
                "config": dict(self.record),
                "components": self.comps.detach().clone(),
                "optimizer": self.opt.state_dict(),
                **({} if self.row_ms is None else {"row_ms": self.row_ms.detach().cpu().clone()}),
                "generator": self.gen.get_state(),
                "history": list(self.history),
                "names": list(self.graph.names),
                "edges": self.graph.edges.clone(),
                "weights": None if self.graph.weights is None else self.graph.weights.clone(),
            },
        )

    # -------------------------------------------------------------- the loop

    def fit(
        self, *, checkpoint_dir: str | os.PathLike[str] | None, progress: bool, callback: Callable[[int, dict, torch.Tensor], Any] | None
    ) -> TrainResult:
        """Run the remaining epochs; checkpoint on schedule and call ``callback`` after each."""
        writer = self.parallel is None or self.parallel.is_writer
        path = None if checkpoint_dir is None or not writer else Path(checkpoint_dir) / CHECKPOINT_NAME
        written = None
        if self.parallel is not None:
            # the placement ("cuda:1") may differ between ranks; device_type may not
            self.parallel.start({k: v for k, v in self.record.items() if k != "device"}, self.comps, self.gen)
        start_epoch, epochs = self.epoch, self.config.epochs
        bar = progress_bar(progress and writer, epochs, initial=start_epoch, unit="epoch", desc="train")
        try:
            for epoch in range(start_epoch, epochs):
                stats = self.run_epoch(epoch)
                self.history.append(stats)
                self.epoch = epoch + 1
                if self.parallel is not None:
                    self.parallel.check_replicas(self.comps, self.gen, self.epoch)
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.4f}", refresh=False)
                if path is not None and self._checkpoint_due():
                    self.save(path)
                    written = str(path)
                if callback is not None:
                    callback(self.epoch, stats, self.table.detach())
        finally:
            bar.close()
        if path is not None and written is None and start_epoch >= epochs:
            self.save(path)  # nothing left to run: the resumed state, written where asked
            written = str(path)
        return TrainResult(
            embeddings=self.table.detach(),
            manifold=self.manifold,
            graph=self.graph,
            config=self.record,
            history=self.history,
            seconds=float(sum(h["seconds"] for h in self.history)),
            epoch=self.epoch,
            checkpoint=written,
        )

    def _checkpoint_due(self) -> bool:
        """After the last epoch, and every ``checkpoint_every`` epochs."""
        every = self.config.checkpoint_every
        return self.epoch == self.config.epochs or bool(every and self.epoch % every == 0)

    def run_epoch(self, epoch: int) -> dict:
        """One pass over the edges at the epoch's learning rate; returns its history entry."""
        start = time.perf_counter()
        lr = epoch_lr(self.config, epoch)
        burnin = epoch < self.config.burnin
        for group in self.opt.param_groups:
            group["lr"] = lr
        # summed where the batches are (float64, int64: the additions of Python floats and
        # ints, so the same numbers) and read once per epoch, not once per batch
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        masked = torch.zeros((), dtype=torch.int64, device=self.device)
        for pairs in self.batches():
            loss_sum, n_masked = self.step(epoch, pairs, burnin, self.config.scale)
            total += loss_sum.to(device=total.device, dtype=torch.float64)
            masked += n_masked.to(masked.device)
        return {
            "epoch": epoch + 1,
            "loss": float(total) / self.edges.shape[0],
            "lr": lr,
            "burnin": burnin,
            "masked": int(masked),
            "seconds": time.perf_counter() - start,
        }

    # -------------------------------------------------------------- sampling

    def batches(self) -> Iterator[torch.Tensor]:
        """The positive edges in a fresh random order, ``batch_size`` ``(child, parent)`` rows at a time."""
        n, size = self.edges.shape[0], self.config.batch_size
        order = torch.randperm(n, generator=self.gen, device=self.device)
        for lo in range(0, n, size):
            yield self.edges[order[lo : lo + size]]

    def sample(self, pairs: torch.Tensor, burnin: bool) -> _Batch:
        """Negatives for the batch ``pairs`` (then this rank's share of it under data parallelism)."""
        neg, valid = self.sampler.sample(pairs[:, 0], dst=pairs[:, 1], generator=self.gen, burnin=burnin)
        n_masked, n_pairs = (~valid).sum(), pairs.shape[0]
        if self.parallel is not None:  # this rank's share of the global batch
            pairs, neg, valid = self.parallel.share(pairs, neg, valid)
        return _Batch(pairs, neg, valid, n_masked, n_pairs)

    # -------------------------------------------------------------- the step

    def step(self, epoch: int, pairs: torch.Tensor, burnin: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Train on one batch of positive edges; returns its summed loss and masked slots
        (0-d tensors on the device: no host sync for them)."""
        batch = self.sample(pairs, burnin)
        ids, rows, g, per_edge = self.loss_and_grad(epoch, batch, scale)
        with torch.no_grad():
            loss_sum = per_edge.sum()
            if self.parallel is not None:  # every rank gets the same summed rows
                ids, g, loss_sum = self.parallel.reduce(ids, g, loss_sum)
                rows = self.comps[ids]
            self.update(epoch, ids, rows, g)
        return loss_sum.detach().reshape(()), batch.n_masked

    def loss_and_grad(self, epoch: int, batch: _Batch, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Softmax loss of the batch and its gradient on the batch's unique rows.

        Returns:
            ``(ids, rows, grad, per_edge)``: the unique node ids, their components, the
            gradient of the loss (batch mean) with respect to their leading components,
            and the detached per-edge loss.

        Raises:
            FloatingPointError: a non-finite loss (names the epoch, edges and nodes).
        """
        pairs, valid = batch.pairs, batch.valid
        src, pos = pairs[:, 0], pairs[:, 1]
        # Masked slots point at the positive (a finite distance) and get logit -inf.
        targets = torch.cat([pos.unsqueeze(1), torch.where(valid, batch.neg, pos.unsqueeze(1))], dim=1)
        ids, inv = unique_ids(torch.cat([src.unsqueeze(1), targets], dim=1), self.graph.num_nodes)
        rows = self.comps.index_select(0, ids)
        leaf = rows[..., 0].clone().requires_grad_(True)
        with torch.enable_grad():
            d = self.distance(rows, inv[:, :1], inv[:, 1:], leaf=leaf)
            logits = d * (-scale)
            logits = logits.masked_fill(torch.cat([torch.zeros_like(valid[:, :1]), ~valid], dim=1), -math.inf)
            per_edge = fixed_order_logsumexp(logits) - logits[:, 0]
            loss = per_edge.mean() if self.parallel is None else per_edge.sum() / batch.n_pairs
            loss.backward()
        if not bool(torch.isfinite(per_edge).all()):
            bad = (~torch.isfinite(per_edge)).nonzero().squeeze(1)
            broken = ids[~torch.isfinite(rows).reshape(ids.numel(), -1).all(dim=1)]
            nodes = [self.graph.names[i] for i in broken[:5].tolist()]
            raise FloatingPointError(
                f"train: non-finite loss in epoch {epoch + 1} for {bad.numel()} edges, e.g. "
                f"{self._edge_names(pairs[bad])}; nodes with non-finite coordinates: {nodes}; "
                f"{self._nan_advice()}"
            )
        return ids, rows, cast(torch.Tensor, leaf.grad), per_edge.detach()  # the cast: backward() above set leaf.grad

    def update(self, epoch: int, ids: torch.Tensor, rows: torch.Tensor, g: torch.Tensor) -> None:
        """Move the rows ``ids`` (components ``rows``) against the gradient ``g``.

        Raises:
            FloatingPointError: an updated row is not finite (the table keeps the old rows).
        """
        if self.row_ms is not None:
            g = self._rmsprop(self.row_ms, ids, rows[..., 0].contiguous(), g)
        if self.config.fast:
            self._update_fast(epoch, ids, rows, g)
        else:
            self._update_exact(epoch, ids, rows, g)

    def _rmsprop(self, row_ms: torch.Tensor, ids: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``optimizer="rmsprop"``: update the rows' mean squares ``v`` (``row_ms``) with
        ``|rgrad|_x^2`` and return ``g / (sqrt(v) + rmsprop_eps)`` (per row; the Riemannian gradient
        is linear in ``g``, so the step is scaled the same way). ``v`` starts at 0, so a
        row's first steps are longer (the first ``1 / sqrt(1 - beta) = 10`` times ``lr``,
        then bounded by ``max_step``). Plain arithmetic on the leading components: it sets
        step lengths, not positions."""
        rgrad = self.manifold.egrad2rgrad(x, g)
        # clamped: a Lorentz tangent vector's Minkowski square can round below 0
        sq = torch.clamp_min(self.manifold.inner(x, rgrad, rgrad), 0.0).to(torch.float64)
        v = row_ms[ids] * RMSPROP_BETA + sq * (1.0 - RMSPROP_BETA)
        row_ms[ids] = v
        return g * (1.0 / (portable.sqrt(v) + self.config.rmsprop_eps)).to(g.dtype).unsqueeze(-1)

    def _update_exact(self, epoch: int, ids: torch.Tensor, rows: torch.Tensor, g: torch.Tensor) -> None:
        """The full update: clipped gradient into the buffer, one MC :class:`RiemannianSGD` step."""
        g = self._clip(rows[..., 0].contiguous(), g)
        self.grad_comps[ids] = 0
        self.grad_comps[ids, ..., 0] = g
        if self.parallel is None:
            self.opt.step(rows=ids)
        else:  # each rank updates a share of the rows, then they swap the results
            self.parallel.step(self.opt, self.comps, ids)
        self.grad_comps[ids] = 0
        try:
            self._raise_if_not_finite(epoch, ids, self.comps[ids])
        except FloatingPointError:
            self.comps[ids] = rows  # keep the table finite for inspection
            raise

    def _update_fast(self, epoch: int, ids: torch.Tensor, rows: torch.Tensor, g: torch.Tensor) -> None:
        """The fast update (``fast=True``): step in the component dtype, one MC move.

        The new rows are checked before they are written, so the table stays finite.
        """
        x0 = rows[..., 0].contiguous()
        lr = self.opt.param_groups[0]["lr"]
        rgrad = self.manifold.egrad2rgrad(x0, g)
        u = rgrad * (-lr * self._clip_factor(x0, rgrad, lr)).unsqueeze(-1)
        x = MCTensor(rows) if self.config.nc is not None else x0
        new = components_of(fast_retr_rows(self.manifold, x, u))
        self._raise_if_not_finite(epoch, ids, new)
        self.comps[ids] = new

    def _raise_if_not_finite(self, epoch: int, ids: torch.Tensor, new: torch.Tensor) -> None:
        """FloatingPointError naming the nodes if a row of ``new`` is not finite."""
        if bool(torch.isfinite(new.sum())):  # one reduction: an inf or NaN makes the sum one
            return
        finite = torch.isfinite(new).reshape(ids.numel(), -1).all(dim=1)
        if not bool(finite.all()):
            bad_ids = ids[~finite]
            names = [self.graph.names[i] for i in bad_ids[:5].tolist()]
            raise FloatingPointError(
                f"train: non-finite coordinates after an update in epoch {epoch + 1} for "
                f"{bad_ids.numel()} nodes, e.g. {names}; {self._nan_advice()}"
            )

    def _nan_advice(self) -> str:
        """What helps after a non-finite value (measured on a 4-ary tree of depth 3, ball).

        float16 overflows its range (65504; the ball's metric factor grows like 1/D^2):
        there nc = 3 and 4 failed in the same epoch as nc = 2, while bfloat16 (float32's
        range) nc = 3 and float32 nc = 2 trained, and a 10x lower lr did too.
        """
        if self.comps.dtype == torch.float16:
            return (
                "float16 overflows above 65504 and more components do not widen its range: "
                "use dtype bfloat16 (float32's range) or float32, or a lower lr"
            )
        return "lower lr or use more components"

    def _clip_factor(self, x: torch.Tensor, rgrad: torch.Tensor, lr: float) -> torch.Tensor:
        """Per-row factor ``min(1, max_step / (lr |rgrad|_x))`` (1 without ``max_step``)."""
        max_step = self.config.max_step
        if max_step is None:
            return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
        step = self.manifold.norm(x, rgrad) * lr
        return torch.clamp(max_step / step, max=1.0).nan_to_num(1.0)

    def _clip(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Scale gradient rows whose step ``lr |rgrad|_x`` would exceed ``max_step``."""
        if self.config.max_step is None:
            return g
        lr = self.opt.param_groups[0]["lr"]
        return g * self._clip_factor(x, self.manifold.egrad2rgrad(x, g), lr).unsqueeze(-1)

    def _edge_names(self, pairs: torch.Tensor) -> list[tuple[str, str]]:
        names = self.graph.names
        return [(names[c], names[p]) for c, p in pairs[:5].tolist()]


def _load_init(table: torch.Tensor, init: torch.Tensor, manifold: Manifold) -> None:
    """Copy the ``init`` components into the fresh ``table`` (same shape, dtype, manifold)."""
    comps = components_of(table)
    want = tuple(comps.shape) if isinstance(table, MCTensor) else tuple(table.shape)
    if not isinstance(init, torch.Tensor) or tuple(init.shape) != want or init.dtype != comps.dtype:
        raise ValueError(
            f"train: init must be a {comps.dtype} tensor of shape {want} (the components of the "
            f"table: nodes, coordinates{', nc' if isinstance(table, MCTensor) else ''}); got "
            f"{getattr(init, 'dtype', type(init).__name__)} {tuple(getattr(init, 'shape', ()))}"
        )
    comps.copy_(init.reshape(comps.shape).to(comps.device))
    ok, reason = manifold.check_point(table)
    if not ok:
        raise ValueError(f"train: init is not a set of points of {manifold!r}: {reason}")


# ------------------------------------------------------------------ checkpoints


def write_checkpoint(path: str | os.PathLike[str], payload: dict) -> None:
    """Write a format-2 checkpoint ``payload`` (the keys ``_Trainer.save`` writes) atomically.

    Adds the content hash; the payload must already hold ``"format": CHECKPOINT_FORMAT``.

    Example:
        A copy of a training checkpoint, read back by :func:`load_checkpoint`:

        >>> g = Graph.from_pairs([("a", "r"), ("b", "r")])
        >>> r = train(g, PoincareHalfspace(), epochs=1, negatives=1, checkpoint_dir="run", progress=False)
        >>> payload = torch.load(r.checkpoint, weights_only=True)
        >>> payload["format"] == CHECKPOINT_FORMAT
        True
        >>> write_checkpoint("copy/checkpoint.pt", payload)
        >>> load_checkpoint("copy/checkpoint.pt")["epoch"]
        1
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload["sha256"] = _content_hash(payload)
    # a fixed temporary name next to the target: a crash leaves at most this one file,
    # which the next save overwrites (reuses); the CLI removes it before a run
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _content_hash(obj: object, h: hashlib._Hash | None = None) -> str:
    """SHA-256 of a checkpoint payload's contents (tensor bytes, dtypes, shapes, values).

    Independent of the zip/pickle layout, so it checks what is loaded, not how it was
    stored; the ``sha256`` entry itself is left out.
    """
    top = h is None
    h = hashlib.sha256() if top else cast("hashlib._Hash", h)  # the cast: not None when not top
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, dict):
        keys = [key for key in obj if not (top and key == "sha256")]
        h.update(b"D%d" % len(keys))
        for key in keys:
            h.update(repr(key).encode())
            _content_hash(obj[key], h)
    elif isinstance(obj, (list, tuple)):
        h.update(b"L%d" % len(obj))
        for item in obj:
            _content_hash(item, h)
    else:
        h.update(repr(obj).encode())
    return h.hexdigest() if top else ""


def load_checkpoint(path: str | os.PathLike[str]) -> dict:
    """Read a checkpoint written by :func:`train` (tensors and plain Python only).

    Returns:
        dict with ``epoch``, ``config``, ``components`` (``(N, n, nc)``, or ``(N, n, 1)``
        for plain runs), ``optimizer``, ``generator``, ``history``, ``names``, ``edges``,
        ``weights``, and ``embeddings`` / ``manifold`` / ``graph`` rebuilt from them.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: naming the file: not a hypermc embedding checkpoint, unreadable
            (truncated or corrupt), content hash mismatch (a changed bit), or tensors whose
            dtype / shape / nc disagree with the stored config.

    Example:
        >>> g = Graph.from_pairs([("a", "r"), ("b", "r")])
        >>> r = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=2, negatives=1, checkpoint_dir="run",
        ...           progress=False)
        >>> ckpt = load_checkpoint("run/checkpoint.pt")
        >>> ckpt["epoch"], ckpt["components"].shape, ckpt["graph"].names, ckpt["manifold"]
        (2, torch.Size([3, 2, 2]), ('a', 'b', 'r'), PoincareHalfspace(curvature=-1))
        >>> torch.equal(ckpt["embeddings"].components, r.embeddings.components)
        True

        A changed value no longer matches the stored content hash:

        >>> raw = torch.load("run/checkpoint.pt", weights_only=True)
        >>> raw["components"][0, 0, 0] += 1.0
        >>> torch.save(raw, "changed.pt")
        >>> load_checkpoint("changed.pt")
        Traceback (most recent call last):
        ...
        ValueError: load_checkpoint: 'changed.pt' is corrupt: its content hash does not match the stored
            sha256 (a changed bit); use an intact copy
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {name!r}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # zip/pickle errors of a truncated or corrupt file
        raise ValueError(
            f"load_checkpoint: {name!r} is unreadable (truncated or corrupt?): {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") not in (CHECKPOINT_FORMAT, *_UNHASHED_FORMATS):
        raise ValueError(
            f"{name!r} is not a hypermc embedding checkpoint (expected format "
            f"{CHECKPOINT_FORMAT!r}); pass the checkpoint.pt written by train"
        )
    if ckpt["format"] == CHECKPOINT_FORMAT and ckpt.get("sha256") != _content_hash(ckpt):
        raise ValueError(
            f"load_checkpoint: {name!r} is corrupt: its content hash does not match the stored sha256 (a changed bit); use an intact copy"
        )
    _check_checkpoint_tensors(ckpt, name)
    comps = ckpt["components"]
    if comps.dim() == 2:
        comps = comps.unsqueeze(-1)
    ckpt["components"] = comps
    ckpt["embeddings"] = comps[..., 0].clone() if ckpt["config"]["nc"] is None else MCTensor(comps.clone())
    ckpt["manifold"] = manifold_from_config(ckpt["config"])
    ckpt["graph"] = Graph(tuple(ckpt["names"]), ckpt["edges"], ckpt.get("weights"))
    return ckpt


def _check_checkpoint_tensors(ckpt: dict, name: str) -> None:
    """dtypes, shapes and nc of a checkpoint's tensors against its config."""
    config = ckpt.get("config")
    comps, edges, names = ckpt.get("components"), ckpt.get("edges"), ckpt.get("names")

    def bad(what: str) -> ValueError:
        return ValueError(f"load_checkpoint: {name!r}: {what}")

    if not isinstance(config, dict) or not isinstance(names, list):
        raise bad("config must be a dict and names a list")
    want = getattr(torch, str(config.get("dtype")), None)
    if not isinstance(comps, torch.Tensor) or comps.dtype != want:
        raise bad(f"components must be a {config.get('dtype')} tensor (config dtype); got {getattr(comps, 'dtype', type(comps).__name__)}")
    nc = config.get("nc")
    shape = tuple(comps.shape)
    # plain runs (nc None) are written as (N, n, 1); (N, n) is read too, as for nc=1
    ok_nc = (comps.dim() == 3 and shape[-1] == (1 if nc is None else nc)) or (comps.dim() == 2 and nc in (None, 1))
    if not ok_nc or shape[0] != len(names):
        raise bad(f"components of shape {shape} do not fit {len(names)} nodes with nc={nc}")
    if not isinstance(edges, torch.Tensor) or edges.dtype != torch.int64 or edges.dim() != 2 or edges.shape[1] != 2:
        raise bad(f"edges must be an (E, 2) int64 tensor; got {getattr(edges, 'dtype', None)} {tuple(getattr(edges, 'shape', ()))}")
    weights = ckpt.get("weights")
    if weights is not None and (
        not isinstance(weights, torch.Tensor) or not weights.is_floating_point() or tuple(weights.shape) != (edges.shape[0],)
    ):
        raise bad(f"weights must be None or a float tensor of shape ({edges.shape[0]},)")


# Trajectory keys added after checkpoints were first written, with the value every older
# checkpoint was trained with (a checkpoint without "fast" used the exact update).
_LATER_KEYS = {"fast": False, "init": None, "optimizer": "sgd", "near_negatives": 0, "rmsprop_eps": RMSPROP_EPS}


def _check_resume(saved: dict[str, Any], current: dict[str, Any], path: str | os.PathLike[str]) -> None:
    keys = TRAJECTORY_KEYS + (("epochs",) if current["lr_schedule"] != "constant" else ())
    for key in keys:
        was = saved.get(key, _LATER_KEYS.get(key))
        if was != current.get(key):
            raise ValueError(
                f"train: cannot resume from {os.fspath(path)!r}: {key} is {was!r} in the "
                f"checkpoint but {current.get(key)!r} now; pass the checkpoint's settings (only "
                "epochs may change, and only with lr_schedule='constant')"
            )
