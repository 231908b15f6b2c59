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
  Each row's step is bounded by ``max_step`` (hyperbolic units). Each batch gathers its
  unique rows, computes all ``B x (1 + N)`` distances in a few vectorised ops
  (:func:`~hypermc.embed.distance.batch_distance`: cancellation-prone parts in MC,
  then the component dtype), backpropagates to the
  gathered rows -- duplicate rows' gradients are summed by autograd's index backward --
  and updates only those rows, in MC arithmetic.
* Reproducibility: every random draw (initialisation, edge order, negatives) comes from
  one ``torch.Generator`` seeded with ``seed``. A checkpoint holds the MC components,
  the optimizer state, the generator state, the epoch and the configuration;
  ``resume`` continues bit-identically to a run that was never interrupted (same torch
  build, thread count and device type; a run resumes only on the device type it was
  started on, since CPU and CUDA generators draw different streams).
* Devices and the fast update: ``device=`` puts the table, the sampler tables, the
  generator and every batch on one device; ``fast=True`` computes the Riemannian step in
  the component dtype and moves the MC points with one MC retraction
  (:func:`fast_retr_rows`; docs/training.md).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .._progress import progress_bar
from ..data.graph import Graph
from ..manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
from ..manifolds.base import Manifold
from ..manifolds.parameter import ManifoldParameter
from ..mcf.tensor import MCTensor
from ..optim.riemannian import RiemannianSGD
from .distance import SUPPORTED, batch_distance, components_of
from .sampler import MAX_ROUNDS, NegativeSampler

__all__ = ["train", "write_checkpoint", "epoch_lr", "resolve_device", "fast_retr_rows", "TrainResult",
           "load_checkpoint", "manifold_from_config", "CHECKPOINT_NAME", "DEFAULTS"]

#: File name of the checkpoint inside ``checkpoint_dir`` (overwritten each time).
CHECKPOINT_NAME = "checkpoint.pt"
#: Format tag stored in every checkpoint.
CHECKPOINT_FORMAT = "hypermc.embed.checkpoint/2"
#: format 1 had no content hash; it is still read (unchecked: there is nothing to check)
_UNHASHED_FORMATS = ("hypermc.embed.checkpoint/1",)
#: Standard deviation (hyperbolic units, Riemannian coordinates at the origin) of the
#: initial points: small, so that training starts near the origin as in the paper.
DEFAULT_INIT_STD = 1e-3
#: Manifold names used in configs and on the command line.
MANIFOLDS: dict[str, type] = {
    "halfspace": PoincareHalfspace,
    "ball": PoincareBall,
    "lorentz": Lorentz,
    "euclidean": Euclidean,
}
#: Default hyperparameters of :func:`train` (and of the command line): tuned for the
#: 2-D mammals halfspace run of the README (1000 epochs in minutes on 2 CPU cores): the
#: learning rate ramps linearly from 10 to 80 after burn-in, at distance scale 0.5.
DEFAULTS: dict[str, Any] = {
    "lr": 10.0,
    "batch_size": 512,
    "negatives": 50,
    "burnin": 20,
    "burnin_lr_mult": 0.01,
    "scale": 0.5,
    "max_step": 1.0,
    "lr_schedule": "linear",
    "lr_end_mult": 8.0,
}
#: Configuration keys that define the trajectory: a resumed run must match them.
TRAJECTORY_KEYS = (
    "manifold", "curvature", "dim", "nc", "dtype", "lr", "batch_size", "negatives", "burnin",
    "burnin_lr_mult", "scale", "seed", "init_std", "retraction", "max_rounds", "max_step",
    "lr_schedule", "lr_end_mult", "graph_checksum", "fast", "init",
)


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        embeddings: ``(N, n)`` MCTensor (plain Tensor for ``nc=None``), row ``i`` is
            node ``graph.names[i]`` (``n = dim + 1`` for the Lorentz model).
        manifold: the manifold.
        graph: the training graph.
        config: the configuration (JSON-serialisable dict).
        history: one dict per epoch run: ``epoch`` (1-based), ``loss``, ``lr``,
            ``burnin``, ``seconds``, ``masked`` (negative slots masked out).
        seconds: training time of all epochs, resumed ones included.
        epoch: number of completed epochs.
        checkpoint: path of the last checkpoint written, or ``None``.
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
    """The config name of a manifold instance (``halfspace``, ``ball``, ...)."""
    for name, cls in MANIFOLDS.items():
        if type(manifold) is cls:
            return name
    raise TypeError(
        f"train: manifold must be one of {', '.join(c.__name__ for c in SUPPORTED)}; got {type(manifold).__name__}"
    )


def manifold_from_config(config: dict) -> Manifold:
    """Rebuild the manifold named in a config (``manifold``, ``curvature``)."""
    cls = MANIFOLDS[config["manifold"]]
    return cls() if cls is Euclidean else cls(curvature=config["curvature"])


def _check_positive_int(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"train: {name} must be an int >= {minimum}; got {value!r}")


def _check_positive_float(name: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"train: {name} must be a finite number {bound}; got {value!r}")


def _validate(graph, manifold, dim, nc, dtype, epochs, lr, batch_size, negatives, burnin,
              burnin_lr_mult, scale, checkpoint_every, init_std, max_step, lr_schedule, lr_end_mult):
    if not isinstance(graph, Graph):
        raise TypeError(f"train: graph must be a hypermc.data.Graph; got {type(graph).__name__}")
    if graph.num_edges == 0:
        raise ValueError("train: the graph has no edges; nothing to train on")
    manifold_name(manifold)
    _check_positive_int("dim", dim)
    if nc is not None:
        _check_positive_int("nc", nc)
    if dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"train: dtype must be a floating torch dtype; got {dtype!r}")
    _check_positive_int("epochs", epochs, 0)
    _check_positive_float("lr", lr)
    _check_positive_int("batch_size", batch_size)
    _check_positive_int("negatives", negatives)
    _check_positive_int("burnin", burnin, 0)
    _check_positive_float("burnin_lr_mult", burnin_lr_mult)
    _check_positive_float("scale", scale)
    _check_positive_float("init_std", init_std)
    if max_step is not None:
        _check_positive_float("max_step", max_step)
    if lr_schedule not in ("constant", "linear"):
        raise ValueError(f"train: lr_schedule must be 'constant' or 'linear'; got {lr_schedule!r}")
    _check_positive_float("lr_end_mult", lr_end_mult)
    if checkpoint_every is not None:
        _check_positive_int("checkpoint_every", checkpoint_every)


def train(
    graph: Graph,
    manifold: Manifold,
    *,
    dim: int = 2,
    nc: int | None = 2,
    dtype: torch.dtype = torch.float64,
    epochs: int = 1000,
    lr: float = DEFAULTS["lr"],
    batch_size: int = DEFAULTS["batch_size"],
    negatives: int = DEFAULTS["negatives"],
    burnin: int = DEFAULTS["burnin"],
    burnin_lr_mult: float = DEFAULTS["burnin_lr_mult"],
    scale: float = DEFAULTS["scale"],
    seed: int = 0,
    init_std: float = DEFAULT_INIT_STD,
    retraction: bool = True,
    max_rounds: int = MAX_ROUNDS,
    max_step: float | None = DEFAULTS["max_step"],
    lr_schedule: str = DEFAULTS["lr_schedule"],
    lr_end_mult: float = DEFAULTS["lr_end_mult"],
    checkpoint_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike[str] | None = None,
    progress: bool = True,
    callback: Callable[[int, dict, torch.Tensor], Any] | None = None,
    parallel: Any | None = None,
    device: str | torch.device | None = "cpu",
    fast: bool = False,
    init: torch.Tensor | None = None,
) -> TrainResult:
    """Train an embedding of ``graph`` on ``manifold`` (method in the module docstring).

    Args:
        graph: the hierarchy; edges ``(child, parent)``.
        manifold: a :class:`PoincareHalfspace`, :class:`PoincareBall`, :class:`Lorentz`
            or :class:`Euclidean` instance.
        dim: manifold dimension (points have ``dim + 1`` coordinates in the Lorentz
            model).
        nc: components per coordinate, or ``None`` for plain tensors.
        dtype: component dtype.
        epochs: total number of epochs (a resumed run continues up to it).
        lr: learning rate after burn-in (the loss is a batch mean).
        batch_size: positive edges per batch.
        negatives: negatives per positive edge.
        burnin: number of burn-in epochs.
        burnin_lr_mult: learning-rate factor during burn-in.
        scale: logits are ``-scale * distance``.
        seed: seed of the run's ``torch.Generator`` (every random draw).
        init_std: standard deviation of the initial points around the origin.
        retraction: update with ``retr`` (default) instead of ``expmap``.
        max_rounds: redraw rounds of rejected negatives (then masked).
        max_step: optional bound on the Riemannian length ``lr |rgrad|_x`` of one
            row's update (hyperbolic units); longer steps are shortened, direction
            kept. Large batches sum many gradients into the hub nodes of a hierarchy
            (the root is the target of most edges), and an unbounded step there can
            overshoot by many units.
        lr_schedule: ``"constant"`` or ``"linear"`` (from ``lr`` after burn-in to
            ``lr * lr_end_mult`` at the last epoch, see :func:`epoch_lr`); with
            ``"linear"`` the schedule depends on ``epochs``, so a resumed run must
            keep ``epochs``.
        lr_end_mult: final learning-rate factor of the linear schedule (``< 1`` decays,
            ``> 1`` ramps up; the default ramps from 10 to 80).
        checkpoint_dir: where ``checkpoint.pt`` is written (overwritten): every
            ``checkpoint_every`` epochs and after the last epoch.
        checkpoint_every: epochs between checkpoints (``None``: only at the end).
        resume: a checkpoint to continue from (the configuration must match; only
            ``epochs`` may differ).
        progress: show a tqdm progress bar (on stderr).
        callback: ``callback(epoch, stats, embeddings)`` after every epoch (``epoch``
            1-based, ``stats`` the history entry, ``embeddings`` the live table --
            read it, do not modify it).
        parallel: a :class:`~hypermc.embed.distributed.DataParallel` for data-parallel
            training on ``torch.distributed`` (every rank calls ``train`` with the same
            arguments; only rank 0 writes checkpoints and shows progress). ``None``:
            one process.
        device: where the table, the sampler tables, the generator and every batch
            live: ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``, a ``torch.device``, or
            ``"auto"`` (CUDA when available, else CPU). The random streams of a CPU
            and a CUDA generator differ, so the same seed gives different runs on
            the two device types, and a run resumes only on the device type it was
            started on (ValueError otherwise; the embeddings of any checkpoint load
            anywhere with :func:`load_checkpoint`).
        fast: the fast update (see :func:`fast_retr_rows`): the Riemannian gradient,
            the step clipping and the step ``u = -lr rgrad`` are computed in the
            component dtype from the leading component of each row (their rounding
            only perturbs the learning rate by ``O(u)``), then the coordinates are
            moved by ``u`` with one MC retraction (``x + u`` in MC; the halfspace
            height multiplied in MC by the rounded ``exp(u_n / x_n)``), so the points
            keep their ``u^nc`` accuracy. Needs ``retraction=True`` and one process
            (``parallel=None``); ``False`` (default): the full MC optimizer step.
        init: start from these points instead of random ones: MC components
            ``(N, n, nc)`` (``(N, n)`` for ``nc=None``) in ``dtype``, e.g. a
            :func:`~hypermc.embed.embed_tree` construction; the config records their
            content hash (``init``), so a resumed run must start from the same points.

    Returns:
        :class:`TrainResult`.

    Raises:
        TypeError, ValueError: bad arguments, or a ``resume`` checkpoint that does not
            match (the message names the key).
        FloatingPointError: a non-finite loss or updated row (names epoch and nodes).

    Example:
        >>> g = hypermc.data.load_mammals()
        >>> r = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=50, seed=0)
        >>> evaluate(r.manifold, r.embeddings, g.edges)
    """
    _validate(graph, manifold, dim, nc, dtype, epochs, lr, batch_size, negatives, burnin,
              burnin_lr_mult, scale, checkpoint_every, init_std, max_step, lr_schedule, lr_end_mult)
    if checkpoint_every is not None and checkpoint_dir is None:
        raise ValueError("train: checkpoint_every needs a checkpoint_dir to write checkpoint.pt into")
    if parallel is not None:
        parallel.check(graph, batch_size)
    device = resolve_device(device, "train")
    if not isinstance(fast, bool):
        raise TypeError(f"train: fast must be a bool; got {type(fast).__name__}")
    if fast and not retraction:
        raise ValueError("train: fast=True needs retraction=True (the fast update is a retraction); got retraction=False")
    if fast and parallel is not None:
        raise ValueError("train: fast=True runs in one process only; got a parallel=DataParallel")
    n_coord = dim + 1 if isinstance(manifold, Lorentz) else dim
    config = {
        "manifold": manifold_name(manifold),
        "curvature": float(manifold.curvature),
        "dim": dim,
        "nc": nc,
        "dtype": str(dtype).removeprefix("torch."),
        "epochs": epochs,
        "lr": float(lr),
        "batch_size": batch_size,
        "negatives": negatives,
        "burnin": burnin,
        "burnin_lr_mult": float(burnin_lr_mult),
        "scale": float(scale),
        "seed": int(seed),
        "init_std": float(init_std),
        "retraction": bool(retraction),
        "max_rounds": max_rounds,
        "max_step": None if max_step is None else float(max_step),
        "lr_schedule": lr_schedule,
        "lr_end_mult": float(lr_end_mult),
        "graph_checksum": graph.checksum(),
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "device_type": device.type,
        "fast": fast,
        "init": None if init is None else _content_hash(init),
    }
    gen = torch.Generator(device=device).manual_seed(int(seed))
    table = manifold.random(graph.num_nodes, n_coord, std=init_std, nc=nc, dtype=dtype, device=device,
                            generator=gen)
    if init is not None:
        _load_init(table, init, manifold)
    table = ManifoldParameter(table, manifold=manifold, requires_grad=False)
    opt = RiemannianSGD([table], lr=lr, retraction=retraction, sparse_rows=True)
    history: list[dict] = []
    start_epoch = 0
    if resume is not None:
        ckpt = load_checkpoint(resume)
        _check_resume(ckpt["config"], config, resume)
        saved_type = ckpt["config"].get("device_type", "cpu")
        if saved_type != device.type:
            raise ValueError(
                f"train: cannot resume from {os.fspath(resume)!r}: it was written by a run on {saved_type!r} "
                f"but device is {str(device)!r}; the {saved_type} random stream cannot be continued on "
                f"{device.type}: pass device={saved_type!r} (load_checkpoint reads its embeddings anywhere)"
            )
        comps = components_of(table)
        comps.copy_(ckpt["components"].reshape(comps.shape))
        opt.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["generator"])
        history = list(ckpt["history"])
        start_epoch = int(ckpt["epoch"])
    ok, reason = manifold.check_point(table.detach())  # the initial table, once
    if not ok:
        where = f"the checkpoint {os.fspath(resume)!r}" if resume is not None else "the initial table"
        raise ValueError(f"train: {where} holds points off {manifold!r}: {reason}")

    sampler = NegativeSampler(graph.edges.to(device), graph.num_nodes, negatives=negatives,
                              weights=None if graph.weights is None else graph.weights.to(device),
                              max_rounds=max_rounds)
    state = _State(graph, manifold, table, opt, sampler, gen, config, parallel)
    writer = parallel is None or parallel.is_writer
    ckpt_path = None if checkpoint_dir is None or not writer else Path(checkpoint_dir) / CHECKPOINT_NAME
    written = None
    if parallel is not None:
        parallel.start(config, state.comps, gen)
    bar = progress_bar(progress and writer, epochs, initial=start_epoch, unit="epoch", desc="train")
    try:
        for epoch in range(start_epoch, epochs):
            in_burnin = epoch < burnin
            stats = state.run_epoch(epoch, epoch_lr(config, epoch), in_burnin, scale)
            history.append(stats)
            if parallel is not None:
                parallel.check_replicas(state.comps, gen, epoch + 1)
            bar.update(1)
            bar.set_postfix(loss=f"{stats['loss']:.4f}", refresh=False)
            last = epoch + 1 == epochs
            if ckpt_path is not None and (last or (checkpoint_every and (epoch + 1) % checkpoint_every == 0)):
                save_checkpoint(ckpt_path, state, epoch + 1, history)
                written = str(ckpt_path)
            if callback is not None:
                callback(epoch + 1, stats, table.detach())
    finally:
        bar.close()
    if ckpt_path is not None and written is None and start_epoch >= epochs:
        save_checkpoint(ckpt_path, state, start_epoch, history)
        written = str(ckpt_path)
    return TrainResult(
        embeddings=table.detach(),
        manifold=manifold,
        graph=graph,
        config=config,
        history=history,
        seconds=float(sum(h["seconds"] for h in history)),
        epoch=max(start_epoch, epochs),
        checkpoint=written,
    )


def resolve_device(device: Any, where: str) -> torch.device:
    """``device`` as a ``torch.device`` (``"auto"``: CUDA when available, else CPU).

    Raises:
        TypeError: not a str or ``torch.device``.
        ValueError: an unknown device string, or CUDA asked for but not available.
    """
    if device is None:
        return torch.device("cpu")
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{where}: device must be a str, a torch.device or 'auto'; got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{where}: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{where}: device is {str(dev)!r} but CUDA is not available; use device='cpu' or 'auto'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{where}: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got {device!r}")
    return dev


def fast_retr_rows(manifold: Manifold, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Move MC points ``x`` by a plain step ``u`` with the manifold's retraction.

    Precondition: ``x`` an ``(R, n)`` MCTensor (or plain Tensor) of points, ``u`` a plain
    ``(R, n)`` tangent step in the component dtype. The halfspace retraction
    ``(x_bar + u_bar, x_n exp(u_n / x_n))`` takes the factor ``exp(u_n / x_n)`` rounded in
    the component dtype from the leading component of ``x_n`` (a relative perturbation
    of the step of ``O(u)``, not of the point); the other models use their retraction
    ``projx(x + u)`` with the plain ``u``. Bound: the new coordinates are the MC sum /
    product of ``x`` and the plain operand, with the MC error of one addition or
    multiplication (``O(u^nc)`` relative to the coordinate, ``tests/conftest.py``).
    Reference: Nickel & Kiela (2017), the retraction of :mod:`hypermc.manifolds`.
    """
    if isinstance(manifold, PoincareHalfspace):
        t0 = components_of(x)[..., -1:, 0]
        factor = torch.exp(u[..., -1:] / t0)
        head = x[..., :-1] + u[..., :-1]
        tail = x[..., -1:] * factor
        return manifold.projx(torch.cat([head, tail], dim=-1))
    return manifold.retr(x, u)


def epoch_lr(config: dict, epoch: int) -> float:
    """Learning rate of the 0-based ``epoch`` of a run with this ``config``.

    Burn-in epochs: ``lr * burnin_lr_mult``. Afterwards ``lr`` (``constant``), or for
    ``linear`` ``lr * (1 - f (1 - lr_end_mult))`` with ``f`` going from 0 at the first
    post-burn-in epoch to 1 at the last epoch ``epochs - 1``.
    """
    lr = config["lr"]
    if epoch < config["burnin"]:
        return lr * config["burnin_lr_mult"]
    if config["lr_schedule"] == "constant":
        return lr
    span = config["epochs"] - 1 - config["burnin"]
    f = 1.0 if span <= 0 else min(1.0, (epoch - config["burnin"]) / span)
    return lr * (1.0 - f * (1.0 - config["lr_end_mult"]))


class _State:
    """The mutable pieces of a run and the per-batch / per-epoch work."""

    def __init__(self, graph, manifold, table, opt, sampler, gen, config, parallel=None):
        self.graph = graph
        self.manifold = manifold
        self.table = table
        self.comps = components_of(table)
        self.opt = opt
        self.sampler = sampler
        self.gen = gen
        self.config = config
        self.parallel = parallel
        self.device = table.device
        self.edges = graph.edges.to(self.device)
        self.fast = bool(config.get("fast", False))
        # Dense gradient buffer of the row-sparse optimizer; only the batch's rows are
        # ever non-zero (written before and cleared after each step).
        self.grad = torch.zeros_like(table.detach())
        self.grad_comps = components_of(self.grad)
        table.grad = self.grad

    def run_epoch(self, epoch: int, lr: float, burnin: bool, scale: float) -> dict:
        start = time.perf_counter()
        for group in self.opt.param_groups:
            group["lr"] = lr
        edges = self.edges
        batch = self.config["batch_size"]
        order = torch.randperm(edges.shape[0], generator=self.gen, device=self.device)
        total = 0.0
        masked = 0
        for lo in range(0, edges.shape[0], batch):
            pairs = edges[order[lo : lo + batch]]
            loss_sum, n_masked = self.step(epoch, pairs, burnin, scale)
            total += loss_sum
            masked += n_masked
        return {
            "epoch": epoch + 1,
            "loss": total / edges.shape[0],
            "lr": lr,
            "burnin": burnin,
            "masked": masked,
            "seconds": time.perf_counter() - start,
        }

    def step(self, epoch: int, pairs: torch.Tensor, burnin: bool, scale: float) -> tuple[float, int]:
        neg, valid = self.sampler.sample(pairs[:, 0], generator=self.gen, burnin=burnin)
        n_masked, n_pairs = int((~valid).sum()), pairs.shape[0]
        if self.parallel is not None:  # this rank's share of the global batch
            pairs, neg, valid = self.parallel.share(pairs, neg, valid)
        src, pos = pairs[:, 0], pairs[:, 1]
        # Masked slots point at the positive (a finite distance) and get logit -inf.
        targets = torch.cat([pos.unsqueeze(1), torch.where(valid, neg, pos.unsqueeze(1))], dim=1)
        ids, inv = torch.unique(torch.cat([src.unsqueeze(1), targets], dim=1), return_inverse=True)
        rows = self.comps[ids]
        leaf = rows[..., 0].clone().requires_grad_(True)
        with torch.enable_grad():
            d = batch_distance(self.manifold, rows, inv[:, :1], inv[:, 1:], leaf=leaf)
            logits = d * (-scale)
            logits = logits.masked_fill(
                torch.cat([torch.zeros_like(valid[:, :1]), ~valid], dim=1), -math.inf
            )
            per_edge = torch.logsumexp(logits, dim=1) - logits[:, 0]
            loss = per_edge.mean() if self.parallel is None else per_edge.sum() / n_pairs
            loss.backward()
        if not bool(torch.isfinite(per_edge).all()):
            bad = (~torch.isfinite(per_edge)).nonzero().squeeze(1)
            broken = ids[~torch.isfinite(rows).reshape(ids.numel(), -1).all(dim=1)]
            nodes = [self.graph.names[i] for i in broken[:5].tolist()]
            raise FloatingPointError(
                f"train: non-finite loss in epoch {epoch + 1} for {bad.numel()} edges, e.g. "
                f"{self._edge_names(pairs[bad])}; nodes with non-finite coordinates: {nodes}; "
                "lower lr or use more components"
            )
        with torch.no_grad():
            g, loss_sum = leaf.grad, per_edge.detach().sum()
            if self.parallel is not None:  # every rank gets the same summed rows
                ids, g, loss_sum = self.parallel.reduce(ids, g, loss_sum)
                rows = self.comps[ids]
            if self.fast:  # checked before it is written: the table stays finite
                new = self._fast_step(rows, g)
                self._raise_if_not_finite(epoch, ids, new)
                self.comps[ids] = new
                return float(loss_sum), n_masked
            g = self._clip(rows[..., 0].contiguous(), g)
            self.grad_comps[ids] = 0
            self.grad_comps[ids, ..., 0] = g
            if self.parallel is None:
                self.opt.step(rows=ids)
            else:  # each rank updates a share of the rows, then they swap the results
                self.parallel.step(self.opt, self.comps, ids)
            self.grad_comps[ids] = 0
        return self._check_finite(epoch, ids, rows, loss_sum, n_masked)

    def _check_finite(self, epoch, ids, rows, loss_sum, n_masked) -> tuple[float, int]:
        """Raise (restoring ``rows``) if an update wrote a non-finite coordinate."""
        try:
            self._raise_if_not_finite(epoch, ids, self.comps[ids])
        except FloatingPointError:
            self.comps[ids] = rows  # keep the table finite for inspection
            raise
        return float(loss_sum), n_masked

    def _raise_if_not_finite(self, epoch: int, ids: torch.Tensor, new: torch.Tensor) -> None:
        """FloatingPointError naming the nodes if a row of ``new`` is not finite."""
        finite = torch.isfinite(new).reshape(ids.numel(), -1).all(dim=1)
        if not bool(finite.all()):
            bad_ids = ids[~finite]
            names = [self.graph.names[i] for i in bad_ids[:5].tolist()]
            raise FloatingPointError(
                f"train: non-finite coordinates after an update in epoch {epoch + 1} for "
                f"{bad_ids.numel()} nodes, e.g. {names}; lower lr or use more components"
            )

    def _fast_step(self, rows: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """The fast update (``train(fast=True)``): step in the component dtype, one MC move;
        returns the new components of ``rows``."""
        x0 = rows[..., 0].contiguous()
        lr = self.opt.param_groups[0]["lr"]
        rgrad = self.manifold.egrad2rgrad(x0, g)
        u = rgrad * (-lr * self._clip_factor(x0, rgrad, lr)).unsqueeze(-1)
        x = MCTensor(rows) if self.config["nc"] is not None else x0
        return components_of(fast_retr_rows(self.manifold, x, u))

    def _clip_factor(self, x: torch.Tensor, rgrad: torch.Tensor, lr: float) -> torch.Tensor:
        """Per-row factor ``min(1, max_step / (lr |rgrad|_x))`` (1 without ``max_step``)."""
        max_step = self.config["max_step"]
        if max_step is None:
            return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
        step = self.manifold.norm(x, rgrad) * lr
        return torch.clamp(max_step / step, max=1.0).nan_to_num(1.0)

    def _clip(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Scale gradient rows whose step ``lr |rgrad|_x`` would exceed ``max_step``."""
        if self.config["max_step"] is None:
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


def save_checkpoint(path: str | os.PathLike[str], state: _State, epoch: int, history: list) -> None:
    """Write a checkpoint atomically (a temporary file, then a rename)."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "epoch": epoch,
        "config": dict(state.config),
        "components": state.comps.detach().clone(),
        "optimizer": state.opt.state_dict(),
        "generator": state.gen.get_state(),
        "history": list(history),
        "names": list(state.graph.names),
        "edges": state.graph.edges.clone(),
        "weights": None if state.graph.weights is None else state.graph.weights.clone(),
    }
    write_checkpoint(path, payload)


def write_checkpoint(path: str | os.PathLike[str], payload: dict) -> None:
    """Write a format-2 checkpoint ``payload`` (the keys of :func:`save_checkpoint`) atomically.

    Adds the content hash; the payload must already hold ``"format": CHECKPOINT_FORMAT``.
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


def _content_hash(obj, h=None) -> str:
    """SHA-256 of a checkpoint payload's contents (tensor bytes, dtypes, shapes, values).

    Independent of the zip/pickle layout, so it checks what is loaded, not how it was
    stored; the ``sha256`` entry itself is left out.
    """
    top = h is None
    h = hashlib.sha256() if top else h
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
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {name!r}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # zip/pickle errors of a truncated or corrupt file
        raise ValueError(
            f"load_checkpoint: {name!r} is unreadable (truncated or corrupt?): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]}"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") not in (CHECKPOINT_FORMAT, *_UNHASHED_FORMATS):
        raise ValueError(
            f"{name!r} is not a hypermc embedding checkpoint (expected format "
            f"{CHECKPOINT_FORMAT!r}); pass the checkpoint.pt written by train"
        )
    if ckpt["format"] == CHECKPOINT_FORMAT and ckpt.get("sha256") != _content_hash(ckpt):
        raise ValueError(
            f"load_checkpoint: {name!r} is corrupt: its content hash does not match the stored "
            "sha256 (a changed bit); use an intact copy"
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
        raise bad(f"components must be a {config.get('dtype')} tensor (config dtype); got "
                  f"{getattr(comps, 'dtype', type(comps).__name__)}")
    nc = config.get("nc")
    shape = tuple(comps.shape)
    ok_nc = (comps.dim() == 2) if nc is None else (comps.dim() == 3 and shape[-1] == nc) or (comps.dim() == 2 and nc == 1)
    if not ok_nc or shape[0] != len(names):
        raise bad(f"components of shape {shape} do not fit {len(names)} nodes with nc={nc}")
    if not isinstance(edges, torch.Tensor) or edges.dtype != torch.int64 or edges.dim() != 2 or edges.shape[1] != 2:
        raise bad(f"edges must be an (E, 2) int64 tensor; got {getattr(edges, 'dtype', None)} "
                  f"{tuple(getattr(edges, 'shape', ()))}")
    weights = ckpt.get("weights")
    if weights is not None and (not isinstance(weights, torch.Tensor) or not weights.is_floating_point()
                                or tuple(weights.shape) != (edges.shape[0],)):
        raise bad(f"weights must be None or a float tensor of shape ({edges.shape[0]},)")


# Trajectory keys added after checkpoints were first written, with the value every older
# checkpoint was trained with (a checkpoint without "fast" used the exact update).
_LATER_KEYS = {"fast": False, "init": None}


def _check_resume(saved: dict, current: dict, path) -> None:
    keys = TRAJECTORY_KEYS + (("epochs",) if current["lr_schedule"] != "constant" else ())
    for key in keys:
        was = saved.get(key, _LATER_KEYS.get(key))
        if was != current.get(key):
            raise ValueError(
                f"train: cannot resume from {os.fspath(path)!r}: {key} is {was!r} in the "
                f"checkpoint but {current.get(key)!r} now; pass the checkpoint's settings (only "
                "epochs may change, and only with lr_schedule='constant')"
            )
