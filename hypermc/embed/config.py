"""The hyperparameters of one training run, :class:`TrainConfig`, checked once.

:func:`hypermc.embed.train` takes a :class:`TrainConfig` (or builds one from its
keyword arguments); the checkpoint stores :meth:`TrainConfig.to_dict` inside its
``config`` record, and :meth:`TrainConfig.from_dict` reads it back (also from checkpoints
written before this class existed). What is *not* a hyperparameter -- the graph, the
manifold, where checkpoints go, the resume file, the progress bar, the callback, the
data-parallel hooks and the initial points -- stays an argument of ``train``.

Example:
    >>> cfg = TrainConfig(dim=10, nc=2, epochs=50, lr=3.0)
    >>> TrainConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> TrainConfig(batch_size=0)
    Traceback (most recent call last):
    ...
    ValueError: TrainConfig: batch_size must be an int >= 1; got 0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from .._checks import FLOAT_DTYPES, check_bool, check_choice, check_dtype, check_instance, check_int, check_nc, check_real
from .sampler import MAX_ROUNDS

__all__ = [
    "TrainConfig",
    "DEFAULTS",
    "DEFAULT_INIT_STD",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "RMSPROP_BETA",
    "RMSPROP_EPS",
    "RECORD_KEYS",
    "RULE_KEYS",
    "device_name",
    "rule_hyperparameters",
    "auto_config",
]

#: Default hyperparameters of :func:`~hypermc.embed.train` (and of the command line):
#: tuned for the 2-D mammals halfspace run of the README (1000 epochs in minutes on 2 CPU
#: cores): the learning rate ramps linearly from 10 to 80 after burn-in, at distance scale
#: 0.5.
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
#: The hyperparameters that :func:`rule_hyperparameters` chooses from the dimension and
#: the graph's size.
RULE_KEYS = ("epochs", "lr", "burnin", "scale", "lr_end_mult", "fast", "optimizer", "batch_size", "lr_schedule")
#: Closure edges from which the rule treats a graph as large (WordNet nouns: 743,086;
#: the mammals: 6,540).
LARGE_GRAPH_EDGES = 100_000
#: Distance scale per dimension: ``scale = dim * SCALE_PER_DIM`` (2-D: 0.5, 10-D: 2.5).
SCALE_PER_DIM = 0.25
#: The schedule of the 2-D rule (:data:`DEFAULTS`, 1000 epochs): the layout needs a slow
#: start (burn-in 20) and a rate that rises 8-fold to spread out in a plane.
_PLANE = {"epochs": 1000, "lr": DEFAULTS["lr"], "burnin": DEFAULTS["burnin"], "lr_end_mult": DEFAULTS["lr_end_mult"], "fast": False}
#: The SGD part of the small-graph rules (:class:`TrainConfig`'s defaults).
_SGD = {"optimizer": "sgd", "batch_size": DEFAULTS["batch_size"], "lr_schedule": DEFAULTS["lr_schedule"]}
#: The schedule of the rule for ``dim >= 3`` (docs/training.md, "Defaults from the data"):
#: 200 epochs, burn-in 5, lr 5 rising 10-fold, the fast update.
_SPACE = {"epochs": 200, "lr": 5.0, "burnin": 5, "lr_end_mult": 10.0, "fast": True}
#: The rule for a large graph (:data:`LARGE_GRAPH_EDGES`) in ``dim >= 3``: the nouns recipe
#: of docs/training.md, per-row RMSprop moving each row about 0.02 per batch, batch
#: 32,768, distance scale 4, burn-in 10 (at the default lr factor 0.01), constant lr,
#: 160 epochs, the fast update.
_LARGE = {
    "epochs": 160,
    "lr": 0.02,
    "burnin": 10,
    "lr_end_mult": 1.0,
    "fast": True,
    "optimizer": "rmsprop",
    "batch_size": 32768,
    "lr_schedule": "constant",
    "scale": 4.0,
}


def rule_hyperparameters(dim: int, edges: int | None = None) -> dict[str, Any]:
    """The hyperparameters :func:`~hypermc.embed.train` picks when they are not given.

    The rule for graphs below :data:`LARGE_GRAPH_EDGES` closure edges (measured on the
    mammals closure, docs/training.md):

    * ``scale = dim / 4``: logits ``-scale * d``. A larger scale is a more negatively
      curved space at scale 1 (curvature ``-scale^2``); more dimensions leave more room,
      and the loss needs the larger scale to separate the many neighbours a point has
      there. 2-D: 0.5 (scale 1, at constant lr 15: MAP 0.93); 10-D: 2.5 (300 epochs at
      scale 0.5: 0.92, 1: 0.95-0.96, 2 and 3: 0.977-0.984, 5: 0.78).
    * ``dim <= 2``: 1000 epochs, burn-in 20, ``lr`` 10 rising linearly to 80, the exact
      update (the 2-D setting of docs/embeddings.md: MAP 0.972).
    * ``dim >= 3``: 200 epochs, burn-in 5, ``lr`` 5 rising linearly to 50, ``fast=True``
      (the mammals 10-D recipe: MAP 0.975-0.981, 10-11 s per run on one idle thread).
    * SGD, batch 512, linear schedule; everything else keeps the :class:`TrainConfig`
      default (50 negatives, burn-in lr factor 0.01, ``max_step`` 1).

    For a graph of :data:`LARGE_GRAPH_EDGES` closure edges or more in ``dim >= 3`` (WordNet
    nouns: 743,086) the nouns recipe (measured at 10-D, docs/training.md): per-row RMSprop
    at lr 0.02 (each row moves about 0.02 hyperbolic units per batch), constant, batch
    32,768, distance scale 4, burn-in 10, 160 epochs, the fast update. The mammals' rule
    there makes 1,450 small SGD batches per epoch whose steps leave most leaves in place.
    A large graph in 2-D keeps the 2-D rule (not measured on one).

    Args:
        dim: the manifold dimension (>= 1).
        edges: the graph's number of closure edges (``None``: a small graph).

    Returns:
        dict with the keys :data:`RULE_KEYS`.

    Example:
        >>> rule_hyperparameters(2)["scale"], rule_hyperparameters(10)["scale"], rule_hyperparameters(10)["epochs"]
        (0.5, 2.5, 200)
        >>> big = rule_hyperparameters(10, edges=743_086)
        >>> big["optimizer"], big["lr"], big["batch_size"], big["scale"], big["epochs"]
        ('rmsprop', 0.02, 32768, 4.0, 160)
    """
    dim = check_int("TrainConfig", "dim", dim)
    if edges is not None:
        edges = check_int("rule_hyperparameters", "edges", edges, minimum=0)
    if dim >= 3 and edges is not None and edges >= LARGE_GRAPH_EDGES:
        return dict(_LARGE)
    plan = _PLANE if dim <= 2 else _SPACE
    return {**plan, **_SGD, "scale": dim * SCALE_PER_DIM}


def auto_config(*, edges: int | None = None, **hyperparameters: Any) -> TrainConfig:
    """A :class:`TrainConfig` from the given fields, the others from :func:`rule_hyperparameters`
    (``edges``: the graph's closure edges, which the rule reads; ``train`` passes them).

    Given fields always win (``auto_config(dim=10, scale=3.0)`` keeps scale 3). ``fast``
    is not chosen when ``retraction=False`` is given (the fast update is a retraction), and
    ``optimizer="sgd"`` keeps the small-graph rule on a large graph (the large-graph
    rule's ``lr`` is RMSprop's step length).
    This is what ``train(graph, manifold, dim=..., ...)`` and ``python -m hypermc train``
    build; a :class:`TrainConfig` passed as such is taken as it is.

    Example:
        >>> cfg = auto_config(dim=10, seed=1)
        >>> cfg.scale, cfg.lr, cfg.epochs, cfg.fast, cfg.seed
        (2.5, 5.0, 200, True, 1)
        >>> auto_config(dim=2) == TrainConfig(dim=2)  # the 2-D rule is the TrainConfig defaults
        True
        >>> big = auto_config(edges=743_086, dim=10, nc=2)
        >>> big.optimizer, big.lr, big.batch_size, big.lr_schedule, big.epochs
        ('rmsprop', 0.02, 32768, 'constant', 160)
        >>> auto_config(edges=743_086, dim=10, optimizer="sgd").lr
        5.0
    """
    if hyperparameters.get("optimizer") == "sgd":
        edges = None  # the large-graph rule's lr is an RMSprop step length: SGD keeps the small rule
    rule = rule_hyperparameters(hyperparameters.get("dim", 2), edges)
    if hyperparameters.get("retraction") is False:
        rule.pop("fast")
    return TrainConfig(**{**rule, **hyperparameters})


#: Standard deviation (hyperbolic units, Riemannian coordinates at the origin) of the
#: initial points: small, so that training starts near the origin as in the paper.
DEFAULT_INIT_STD = 1e-3
#: The learning-rate schedules after burn-in (see :func:`~hypermc.embed.train.epoch_lr`).
LR_SCHEDULES = ("constant", "linear")
#: The update rules of :func:`~hypermc.embed.train` (``TrainConfig.optimizer``).
OPTIMIZERS = ("sgd", "rmsprop")
#: ``optimizer="rmsprop"``: decay of each row's mean square Riemannian gradient norm,
#: and the default ``eps`` added to its square root (``TrainConfig.rmsprop_eps``).
RMSPROP_BETA = 0.99
RMSPROP_EPS = 1e-12
#: Keys that ``train`` adds to a checkpoint's ``config`` record next to the
#: :class:`TrainConfig` fields (the run, not its hyperparameters); :meth:`TrainConfig.from_dict`
#: skips them.
RECORD_KEYS = ("manifold", "curvature", "graph_checksum", "num_nodes", "num_edges", "device_type", "init")
#: Device types a run may use.
_DEVICE_TYPES = ("cpu", "cuda")
_DTYPE_NAMES = {str(d).removeprefix("torch."): d for d in FLOAT_DTYPES}


def device_name(device: Any, where: str) -> str:
    """``device`` (``str``, ``torch.device``, ``None`` = ``"cpu"``, or ``"auto"``) as a checked string.

    Checks the spelling only; whether CUDA is available is checked when the run starts
    (:func:`~hypermc.embed.train.resolve_device`), so a config naming ``"cuda"`` can be
    built, stored and read on a CPU-only machine.

    Raises:
        TypeError: not a str or ``torch.device``.
        ValueError: an unknown device string or device type.

    Example:
        >>> device_name(None, "TrainConfig"), device_name(torch.device("cuda", 1), "TrainConfig")
        ('cpu', 'cuda:1')
        >>> device_name("auto", "TrainConfig")
        'auto'
        >>> device_name("gpu", "TrainConfig")
        Traceback (most recent call last):
        ...
        ValueError: TrainConfig: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got 'gpu'
    """
    if device is None:
        return "cpu"
    check_instance(where, "device", device, (str, torch.device), "a str, a torch.device or 'auto'")
    if device == "auto":
        return "auto"
    try:
        dev = torch.device(device)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in _DEVICE_TYPES:
        raise ValueError(f"{where}: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got {device!r}")
    return str(dev)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The hyperparameters of :func:`~hypermc.embed.train`, validated once at construction.

    Frozen: derive a variant with ``dataclasses.replace(config, lr=3.0)`` (checked again).
    Numbers are normalised (``lr=10`` is stored as ``10.0``), ``device`` is stored as a
    string. ``str(config)`` is :meth:`describe`.

    Attributes:
        dim: manifold dimension (points have ``dim + 1`` coordinates in the Lorentz model).
        nc: components per coordinate, or ``None`` for plain tensors.
        dtype: component dtype (float16, bfloat16, float32 or float64).
        epochs: total number of epochs (a resumed run continues up to it).
        lr: learning rate after burn-in (the loss is a batch mean).
        batch_size: positive edges per batch.
        negatives: negatives per positive edge.
        near_negatives: how many of the ``negatives`` are drawn, after burn-in, among the
            other descendants of the positive edge's target (its node's siblings and
            cousins: :class:`~hypermc.embed.sampler.NegativeSampler`'s ``near``); the
            rest uniformly. ``0 <= near_negatives <= negatives``.
        burnin: number of burn-in epochs.
        burnin_lr_mult: learning-rate factor during burn-in.
        scale: logits are ``-scale * distance``.
        seed: seed of the run's ``torch.Generator`` (every random draw).
        init_std: standard deviation of the initial points around the origin.
        retraction: update with ``retr`` (default) instead of ``expmap``.
        optimizer: ``"sgd"`` (Riemannian SGD: each row moves ``lr |rgrad|_x``) or
            ``"rmsprop"`` (each row keeps the running mean ``v`` of its squared
            Riemannian gradient norm, ``v = beta v + (1 - beta) |rgrad|_x^2`` with
            ``beta`` :data:`RMSPROP_BETA`, updated when the row is in a batch, and its
            gradient is divided by ``sqrt(v) + rmsprop_eps``: each row whose gradient norm
            is well above ``rmsprop_eps`` moves about ``lr`` hyperbolic units per batch
            whatever its gradient's size, so ``lr`` is a length (0.01-0.05), not the SGD
            rate (tens to hundreds)).
        rmsprop_eps: ``optimizer="rmsprop"``: added to the root of each row's mean square
            (default :data:`RMSPROP_EPS`, 1e-12: every row moves about ``lr``). A row whose
            gradient norm is far below it moves about ``lr |rgrad| / rmsprop_eps`` (SGD at
            rate ``lr / rmsprop_eps``), so a larger value leaves rows whose loss is already
            small nearly in place. Gradients are of the batch's mean loss, so their size
            scales as ``1 / batch_size``; on WordNet nouns at batch 32,768 the rows' root
            mean squares spread from 1e-15 to 3e-5 (docs/closure.md).
        max_rounds: redraw rounds of rejected negatives (then masked).
        max_step: optional bound on the Riemannian length ``lr |rgrad|_x`` of one row's
            update (hyperbolic units); longer steps are shortened, direction kept.
        lr_schedule: ``"constant"`` or ``"linear"`` (from ``lr`` after burn-in to
            ``lr * lr_end_mult`` at the last epoch); with ``"linear"`` the schedule
            depends on ``epochs``, so a resumed run must keep ``epochs``.
        lr_end_mult: final learning-rate factor of the linear schedule (``< 1`` decays,
            ``> 1`` ramps up).
        checkpoint_every: epochs between checkpoints (``None``: only at the end; needs
            ``train(checkpoint_dir=...)``).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (CUDA when available).
        fast: the fast update (``train`` docstring); needs ``retraction=True``.

    Raises:
        TypeError: a value of the wrong type (``"TrainConfig: <name> must be ...; got ..."``).
        ValueError: a value out of range, or ``fast=True`` with ``retraction=False``.

    Example:
        >>> cfg = TrainConfig(dim=2, nc=2, epochs=100, seed=0)
        >>> dataclasses.replace(cfg, lr=3.0).lr
        3.0
        >>> TrainConfig(lr_schedule="cosine")
        Traceback (most recent call last):
        ...
        ValueError: TrainConfig: lr_schedule must be one of 'constant', 'linear'; got 'cosine'

        ``train(graph, PoincareHalfspace(), cfg)`` then runs it; ``print(cfg)`` shows
        :meth:`describe`.
    """

    dim: int = 2
    nc: int | None = 2
    dtype: torch.dtype = torch.float64
    epochs: int = 1000
    lr: float = DEFAULTS["lr"]
    batch_size: int = DEFAULTS["batch_size"]
    negatives: int = DEFAULTS["negatives"]
    near_negatives: int = 0
    burnin: int = DEFAULTS["burnin"]
    burnin_lr_mult: float = DEFAULTS["burnin_lr_mult"]
    scale: float = DEFAULTS["scale"]
    seed: int = 0
    init_std: float = DEFAULT_INIT_STD
    retraction: bool = True
    optimizer: str = "sgd"
    rmsprop_eps: float = RMSPROP_EPS
    max_rounds: int = MAX_ROUNDS
    max_step: float | None = DEFAULTS["max_step"]
    lr_schedule: str = DEFAULTS["lr_schedule"]
    lr_end_mult: float = DEFAULTS["lr_end_mult"]
    checkpoint_every: int | None = None
    device: str = "cpu"
    fast: bool = False

    def __post_init__(self) -> None:
        where = type(self).__name__

        def positive(name: str, **kw: Any) -> float:
            return check_real(where, name, getattr(self, name), minimum=0.0, open_min=True, **kw)

        checked = {
            "dim": check_int(where, "dim", self.dim),
            "nc": check_nc(where, self.nc, allow_none=True),
            "dtype": check_dtype(where, self.dtype),
            "epochs": check_int(where, "epochs", self.epochs, minimum=0),
            "lr": positive("lr"),
            "batch_size": check_int(where, "batch_size", self.batch_size),
            "negatives": check_int(where, "negatives", self.negatives),
            "near_negatives": check_int(where, "near_negatives", self.near_negatives, minimum=0),
            "burnin": check_int(where, "burnin", self.burnin, minimum=0),
            "burnin_lr_mult": positive("burnin_lr_mult"),
            "scale": positive("scale"),
            "seed": check_int(where, "seed", self.seed, minimum=None),
            "init_std": positive("init_std"),
            "retraction": check_bool(where, "retraction", self.retraction),
            "optimizer": check_choice(where, "optimizer", self.optimizer, OPTIMIZERS),
            "rmsprop_eps": positive("rmsprop_eps"),
            "max_rounds": check_int(where, "max_rounds", self.max_rounds, minimum=0),
            "max_step": positive("max_step", allow_none=True),
            "lr_schedule": check_choice(where, "lr_schedule", self.lr_schedule, LR_SCHEDULES),
            "lr_end_mult": positive("lr_end_mult"),
            "checkpoint_every": check_int(where, "checkpoint_every", self.checkpoint_every, allow_none=True),
            "device": device_name(self.device, where),
            "fast": check_bool(where, "fast", self.fast),
        }
        if checked["near_negatives"] > checked["negatives"]:
            raise ValueError(f"{where}: near_negatives must be <= negatives ({checked['negatives']}); got {checked['near_negatives']}")
        if checked["fast"] and not checked["retraction"]:
            raise ValueError(f"{where}: fast=True needs retraction=True (the fast update is a retraction); got retraction=False")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-safe dict (``dtype`` as its name, e.g. ``"float64"``), in field order.

        Example:
            >>> d = TrainConfig(dim=5, dtype=torch.float32).to_dict()
            >>> list(d)[:4], d["dim"], d["dtype"]
            (['dim', 'nc', 'dtype', 'epochs'], 5, 'float32')
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["dtype"] = str(self.dtype).removeprefix("torch.")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """The config of :meth:`to_dict`, or of a checkpoint's ``config`` record.

        The run keys ``train`` stores next to the fields (:data:`RECORD_KEYS`: manifold,
        graph checksum, ...) are skipped. A field that is missing takes its default; a
        record written before ``device`` was stored takes its ``device_type``.

        Raises:
            TypeError: ``data`` is not a mapping, or a field has the wrong type.
            ValueError: an unknown key, an unknown dtype name, or a value out of range.

        Example:
            >>> cfg = TrainConfig.from_dict({"dim": 5, "dtype": "float32", "manifold": "ball"})
            >>> cfg.dim, cfg.dtype, cfg.epochs  # "manifold" is a record key (skipped); epochs: the default
            (5, torch.float32, 1000)
            >>> TrainConfig.from_dict({"dims": 5})
            Traceback (most recent call last):
            ...
            ValueError: TrainConfig.from_dict: unknown keys ['dims']; expected TrainConfig fields (dim, nc, ...)
        """
        where = f"{cls.__name__}.from_dict"
        check_instance(where, "data", data, Mapping, "a dict (TrainConfig.to_dict() or a checkpoint's config)")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in data if key not in names and key not in RECORD_KEYS]
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; expected TrainConfig fields ({', '.join(names)})")
        values = {key: data[key] for key in names if key in data}
        if isinstance(values.get("dtype"), str):
            values["dtype"] = _DTYPE_NAMES[check_choice(where, "dtype", values["dtype"], _DTYPE_NAMES)]
        if "device" not in values and "device_type" in data:
            values["device"] = data["device_type"]
        return cls(**values)

    def describe(self) -> str:
        """A few lines naming every field with its value (what the CLI prints at the start).

        Example:
            >>> print(TrainConfig(epochs=10))
            TrainConfig
              dim=2  nc=2  dtype=float64  device=cpu  seed=0
              epochs=10  optimizer=sgd  lr=10.0  lr_schedule=linear  lr_end_mult=8.0  burnin=20  burnin_lr_mult=0.01
              batch_size=512  negatives=50  near_negatives=0  max_rounds=10  scale=0.5  rmsprop_eps=1e-12
              retraction=True  fast=False  max_step=1.0  init_std=0.001  checkpoint_every=None
        """
        d = self.to_dict()
        groups = (
            ("dim", "nc", "dtype", "device", "seed"),
            ("epochs", "optimizer", "lr", "lr_schedule", "lr_end_mult", "burnin", "burnin_lr_mult"),
            ("batch_size", "negatives", "near_negatives", "max_rounds", "scale", "rmsprop_eps"),
            ("retraction", "fast", "max_step", "init_std", "checkpoint_every"),
        )
        lines = ["  " + "  ".join(f"{name}={d[name]}" for name in group) for group in groups]
        return "\n".join([type(self).__name__, *lines])

    def __str__(self) -> str:
        return self.describe()
