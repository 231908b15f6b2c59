"""Command line: ``python -m hypermc closure|train|eval|construct`` (argparse lives only here).

::

    python -m hypermc closure --root mammal.n.01 --out mammals.csv
    python -m hypermc train --data mammals --manifold halfspace --dim 2 --nc 2 \\
        --dtype float64 --epochs 1000 --seed 0 --out runs/x
    python -m hypermc eval runs/x/checkpoint.pt
    python -m hypermc construct --data mammals --manifold ball --dim 2 --epsilon 1 --nc auto --out runs/c
    python -m hypermc train --data mammals --manifold ball --nc 4 --init-from runs/c --out runs/c2
    python -m hypermc doctor --build
    torchrun --nproc-per-node 2 -m hypermc train --data nouns --dim 10 --out runs/n

``train`` starts its standard output with its :class:`~hypermc.embed.TrainConfig` (a few
``name=value`` lines; not with ``--quiet``). ``train``, ``eval`` and ``construct`` end their
standard output with one JSON object on one line
(``map``, ``mean_rank``, ``seconds`` and the settings); ``train`` and ``construct`` also
write it to ``<out>/metrics.json``. Every subcommand shows progress bars on stderr (training
epochs, tree levels, evaluation chunks, WordNet synsets, exported rows); they are off when
stderr is not a terminal or with ``--quiet``. ``train`` writes ``<out>/curve.png`` (the
loss per epoch, MAP / mean rank every ``--eval-every`` epochs and at the end);
``construct --plot PNG`` draws the construction.

Under ``torchrun`` (``WORLD_SIZE`` > 1) ``train`` is data-parallel
(:mod:`hypermc.embed.distributed`): rank 0 writes the checkpoint, ``metrics.json`` and the
JSON line; the evaluation is split over the ranks.

``doctor`` prints :func:`hypermc.backends` as a table: for each op x dtype x nc x device,
whether a fused kernel or the torch path runs and why (``--build`` builds the kernel
libraries first; otherwise nothing is built).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch

from . import doctor

DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _nc(text: str) -> int | None:
    """``--nc``: a positive int, or ``plain`` (also ``none``) for plain tensors; ``0`` is refused."""
    if text.lower() in ("plain", "none"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nc must be a positive int or 'plain'; got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("--nc 0 is not a number of components; for plain tensors say --nc plain, else give an int >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"--nc must be a positive int or 'plain'; got {text!r}")
    return value


def _nc_auto(text: str) -> int | str:
    """``construct --nc``: a positive int or ``auto``."""
    if text.lower() == "auto":
        return "auto"
    value = _nc(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"--nc must be a positive int or 'auto'; got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int; got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text!r}")
    return value


def _mib(value: int | None) -> int | None:
    return None if value is None else value * 2**20


def _parser() -> argparse.ArgumentParser:
    from .embed.config import RMSPROP_EPS
    from .embed.distributed import DEFAULT_TIMEOUT
    from .embed.train import DEFAULTS
    from .manifolds.registry import ball_models, registered_manifolds

    p = argparse.ArgumentParser(prog="python -m hypermc", description="hypermc command line")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("closure", help="write a WordNet noun closure as a CSV edge list")
    c.add_argument("--root", default="mammal.n.01", help="synset name, or 'all' for every noun")
    c.add_argument("--out", required=True, help="output CSV (child,parent)")
    c.add_argument("--legacy", action="store_true", help="the seed paper's mammal closure (one more edge)")
    c.add_argument("--wordnet-dir", default=None, help="WordNet 3.0 dict directory")

    t = sub.add_parser("train", help="train an embedding; last stdout line is a JSON object")
    t.add_argument("--data", default="mammals", help="mammals, mammals-legacy, nouns, or a CSV/TSV edge list")
    t.add_argument("--manifold", default="halfspace", choices=list(registered_manifolds()))
    t.add_argument("--curvature", type=float, default=None, help="K < 0 (default -1); not for euclidean")
    t.add_argument("--dim", type=int, default=2)
    t.add_argument("--nc", type=_nc, default=2, help="components per coordinate, or 'plain'")
    t.add_argument("--dtype", default="float64", choices=sorted(DTYPES))
    t.add_argument("--epochs", type=int, default=None, help="default: by the rule (dim 2: 1000, dim >= 3: 200)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", required=True, help="run directory (checkpoint.pt, metrics.json)")
    t.add_argument("--lr", type=float, default=None, help="default: by the rule (dim 2: 10, dim >= 3: 5)")
    t.add_argument("--batch-size", type=int, default=None, help="default: by the rule (512; large graphs in dim >= 3: 32768)")
    t.add_argument("--negatives", type=int, default=DEFAULTS["negatives"])
    t.add_argument(
        "--near-negatives",
        type=int,
        default=0,
        help="of the negatives, how many are drawn among the other descendants of the positive edge's target (after burn-in)",
    )
    t.add_argument(
        "--optimizer",
        default=None,
        choices=["sgd", "rmsprop"],
        help="rmsprop: each row's gradient over the root of its running mean square norm (lr is then a length, 0.01-0.05); "
        "default: by the rule (sgd; large graphs in dim >= 3: rmsprop)",
    )
    t.add_argument(
        "--rmsprop-eps",
        type=float,
        default=RMSPROP_EPS,
        help="rmsprop: added to the root of each row's mean square; rows with much smaller gradients barely move",
    )
    t.add_argument("--burnin", type=int, default=None, help="default: by the rule (dim 2: 20, dim >= 3: 5)")
    t.add_argument("--burnin-lr-mult", type=float, default=DEFAULTS["burnin_lr_mult"])
    t.add_argument("--scale", type=float, default=None, help="logits -scale * distance; default: by the rule, dim / 4")
    t.add_argument("--max-step", type=float, default=DEFAULTS["max_step"], help="bound on one row's step (hyperbolic units); 0 for none")
    t.add_argument(
        "--lr-schedule",
        default=None,
        choices=["constant", "linear"],
        help="default: by the rule (linear; large graphs in dim >= 3: constant)",
    )
    t.add_argument(
        "--lr-end-mult",
        type=float,
        default=None,
        help="final lr factor of the linear schedule (<1 decays, >1 ramps up); default: by the rule (dim 2: 8, dim >= 3: 10)",
    )
    t.add_argument("--expmap", action="store_true", help="update with expmap instead of the retraction")
    t.add_argument("--checkpoint-every", type=int, default=None)
    t.add_argument("--resume", default=None, help="checkpoint to continue from")
    t.add_argument(
        "--init-from", default=None, help="run directory (or checkpoint) whose embedding is the starting point, e.g. from construct"
    )
    t.add_argument("--force", action="store_true", help="overwrite an existing run in --out")
    t.add_argument("--eval-sample", type=int, default=None, help="evaluate only this many source nodes")
    t.add_argument("--eval-memory-mb", type=_positive_int, default=None, help="memory budget of one evaluation chunk (MiB)")
    t.add_argument(
        "--eval-every",
        type=_positive_int,
        default=None,
        help="also evaluate every N epochs (with --eval-sample), into eval_history in metrics.json and "
        "<out>/curve.png (MAP, mean rank and loss against the epoch); default: only at the end",
    )
    t.add_argument("--threads", type=_positive_int, default=None, help="torch.set_num_threads (>= 1)")
    t.add_argument(
        "--device", default="cpu", choices=["cpu", "cuda", "auto"], help="where training and evaluation run (auto: cuda when available)"
    )
    t.add_argument(
        "--fast",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fast update: Riemannian step in the component dtype, one exact MC move; fused CPU distances in training and "
        "evaluation; default: by the rule (dim 2: off, dim >= 3: on)",
    )
    t.add_argument(
        "--backend",
        default=None,
        choices=["gloo", "nccl"],
        help="torch.distributed backend under torchrun (default: nccl with CUDA, else gloo)",
    )
    t.add_argument(
        "--dist-timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT,
        help="seconds a rank waits for the others before failing (under torchrun)",
    )

    k = sub.add_parser("construct", help="combinatorial tree embedding; last stdout line is a JSON object")
    k.add_argument("--data", default="mammals", help="mammals, mammals-legacy, nouns, or a CSV/TSV edge list")
    k.add_argument(
        "--method",
        default="tree",
        choices=["tree", "closure"],
        help="tree: edge lengths tau (embed_tree, needs --epsilon or --tau); closure: nested shadows, "
        "every ancestor nearest (embed_closure, reconstruction MAP)",
    )
    k.add_argument("--manifold", default=None, choices=list(ball_models()), help="default: ball (tree), halfspace (closure)")
    k.add_argument("--dim", type=int, default=2)
    scale = k.add_mutually_exclusive_group()
    scale.add_argument("--epsilon", type=_positive_float, help="tree: target worst-case distortion 1 + epsilon")
    scale.add_argument("--tau", type=_positive_float, help="tree: hyperbolic length of every tree edge")
    k.add_argument(
        "--alpha", type=_positive_float, default=None, help="closure: fraction of a parent's shadow for its children (default 0.8)"
    )
    k.add_argument("--nc", type=_nc_auto, default="auto", help="components per coordinate, or 'auto'")
    k.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    k.add_argument("--out", required=True, help="run directory (checkpoint.pt, metrics.json)")
    k.add_argument("--force", action="store_true", help="overwrite an existing run in --out")
    k.add_argument("--pairs", type=_positive_int, default=None, help="distortion over this many sampled source nodes (default: all pairs)")
    k.add_argument(
        "--eval-sample",
        type=_positive_int,
        default=None,
        help="closure and tree-neighbour MAP over this many sampled source nodes (default: all)",
    )
    k.add_argument("--seed", type=int, default=0, help="seed of --pairs / --eval-sample")
    k.add_argument("--threads", type=_positive_int, default=None, help="torch.set_num_threads (>= 1)")
    k.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="draw the 2-D construction to this PNG, subtrees spread by angular order "
        "(hypermc.embed.plot.plot_embedding with order=True); default: no picture",
    )

    e = sub.add_parser("eval", help="evaluate a checkpoint; last stdout line is a JSON object")
    e.add_argument("checkpoint")
    e.add_argument("--sample", type=int, default=None, help="evaluate only this many source nodes")
    e.add_argument("--seed", type=int, default=0, help="seed of --sample")
    e.add_argument("--chunk-size", type=int, default=None)
    e.add_argument("--memory-mb", type=_positive_int, default=None, help="memory budget of one chunk (MiB)")
    e.add_argument("--threads", type=_positive_int, default=None, help="torch.set_num_threads (>= 1)")
    e.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="where the chunks are computed")
    e.add_argument(
        "--fast", action="store_true", help="fused CPU half-space distance kernels (within a few ulps of the reference path; 2-3x faster)"
    )
    x = sub.add_parser(
        "export",
        help="write a checkpoint's coordinates for other tools (tsv, npy or pt)",
        description="Write the coordinates of a checkpoint with the node names. tsv: one row per node, "
        "the float64 coordinates and, for MC runs, each coordinate's full-precision value as a "
        "decimal string (nc x p bits and 3 more digits); npy: OUT (float64, N x dim), OUT.components.npy (N x dim x nc, "
        "component dtype) and OUT.names.txt; pt: one torch.save dict (names, coordinates, "
        "components, manifold, curvature).",
    )
    x.add_argument("--ckpt", required=True, help="run directory (with checkpoint.pt) or checkpoint file")
    x.add_argument("--format", default="tsv", choices=["tsv", "npy", "pt"], help="output format")
    x.add_argument("--out", required=True, help="output file")
    x.add_argument("--force", action="store_true", help="overwrite existing output files")
    d = sub.add_parser("doctor", help="which ops run fused kernels here, and why not; last stdout line is a JSON object")
    d.add_argument("--build", action="store_true", help="build and self-check the kernel libraries first (minutes on a new machine)")
    d.add_argument("--op", default=None, choices=doctor.OPS, help="only this op (default: all)")
    d.add_argument("--dtype", default=None, choices=["float32", "float64"], help="only this dtype (default: both)")
    d.add_argument("--nc", type=int, default=None, choices=[2, 3, 4], help="only this component count (default: all)")
    d.add_argument("--device", default=None, choices=doctor.DEVICES, help="only this device (default: both)")
    for name, command in sub.choices.items():
        also = "; no TrainConfig block on stdout at the start" if name == "train" else ""
        command.add_argument(
            "--quiet", action="store_true", help=f"no progress bar (there is none anyway when stderr is not a terminal){also}"
        )
        _document(command, _EXAMPLES[name])
    return p


_EXAMPLES = {
    "closure": "python -m hypermc closure --root mammal.n.01 --out mammals.csv",
    "train": "python -m hypermc train --data mammals --manifold halfspace --dim 2 --nc 2 --epochs 1000 --out runs/m2",
    "construct": "python -m hypermc construct --data mammals --manifold ball --dim 2 --epsilon 1 --nc auto --out runs/c",
    "eval": "python -m hypermc eval runs/m2/checkpoint.pt --sample 1000",
    "export": "python -m hypermc export --ckpt runs/m2 --format tsv --out mammals.tsv",
    "doctor": "python -m hypermc doctor --device cpu --dtype float64",
}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults appended to option help, except where the help already states one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.required or "default" in text.replace("%(default)s", ""):
            return text
        return super()._get_help_string(action)


def _document(command: argparse.ArgumentParser, example: str) -> None:
    """``--help`` of a subcommand: every option with its default, and an example."""
    command.formatter_class = _HelpFormatter
    command.epilog = f"example: {example}"
    for action in command._actions:
        if action.option_strings and action.help is None and not action.required:
            action.help = "default: %(default)s"


def _load_graph(data: str):
    from . import data as D

    if data == "mammals":
        return D.load_mammals()
    if data == "mammals-legacy":
        return D.load_mammals(legacy=True)
    if data == "nouns":
        return D.wordnet_closure(None)
    path = Path(data)
    if not path.exists():
        raise SystemExit(f"--data: {data!r} is neither mammals, mammals-legacy, nouns nor an existing file")
    return D.load_edges(path)


def _progress(args, writer: bool = True) -> bool:
    """Show progress bars: stderr is a terminal, no ``--quiet``, and this process writes."""
    from ._progress import show_progress

    return writer and show_progress(args.quiet)


def _json_text(record: dict, indent: int | None = None) -> str:
    """Standard JSON of a record; a non-finite number (no JSON value) is refused by name."""
    bad = sorted(_non_finite(record))
    if bad:
        raise SystemExit(
            f"refusing to write non-standard JSON: {', '.join(bad)} "
            "(JSON has no Infinity or NaN); the run or its evaluation diverged or had nothing to evaluate"
        )
    return json.dumps(record, sort_keys=True, indent=indent, allow_nan=False)


def _non_finite(value, path: str = "") -> list[str]:
    """``key=value`` of every non-finite float in a record (nested dicts and lists)."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path}={value}"]
    if isinstance(value, dict):
        return [b for k, v in value.items() for b in _non_finite(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, (list, tuple)):
        return [b for i, v in enumerate(value) for b in _non_finite(v, f"{path}[{i}]")]
    return []


def _emit(record: dict) -> None:
    print(_json_text(record), flush=True)


def _closure(args) -> int:
    from .data import wordnet_closure

    root = None if args.root == "all" else args.root
    graph = wordnet_closure(root, legacy=args.legacy, wordnet_dir=args.wordnet_dir, progress=_progress(args))
    graph.to_csv(args.out)
    print(f"{graph.num_nodes} nodes, {graph.num_edges} edges, sha256 {graph.checksum()} -> {args.out}")
    return 0


def _train(args) -> int:
    from .embed.distributed import init_from_env

    if args.threads:
        torch.set_num_threads(args.threads)
    parallel = init_from_env(timeout=args.dist_timeout, backend=args.backend)
    try:
        code = _train_run(args, parallel)
    except BaseException:
        if parallel is not None:
            torch.distributed.destroy_process_group()
        raise
    if parallel is not None:
        parallel.close()  # leave together: no rank tears gloo down under another
    return code


def _train_config(args, edges: int | None = None):
    """The :class:`~hypermc.embed.TrainConfig` of ``train``'s flags (checked before any work,
    and again with the graph's ``edges``, which the rule reads)."""
    from .embed.config import auto_config

    ruled = {"epochs": args.epochs, "lr": args.lr, "burnin": args.burnin, "scale": args.scale, "lr_end_mult": args.lr_end_mult}
    ruled.update(fast=args.fast, batch_size=args.batch_size, optimizer=args.optimizer, lr_schedule=args.lr_schedule)
    return auto_config(  # the flags not given follow the rule of rule_hyperparameters
        edges=edges,
        dim=args.dim,
        nc=args.nc,
        dtype=DTYPES[args.dtype],
        negatives=args.negatives,
        near_negatives=args.near_negatives,
        rmsprop_eps=args.rmsprop_eps,
        burnin_lr_mult=args.burnin_lr_mult,
        seed=args.seed,
        retraction=not args.expmap,
        max_step=args.max_step or None,
        checkpoint_every=args.checkpoint_every,
        device=args.device,
        **{k: v for k, v in ruled.items() if v is not None},
    )


def _train_run(args, parallel) -> int:
    from .embed import evaluate, train
    from .manifolds.registry import manifold_from_name

    _train_config(args)  # bad flags fail before the data is read
    graph = _load_graph(args.data)
    config = _train_config(args, graph.num_edges)
    _check_out(args, parallel is None or parallel.is_writer)
    manifold = manifold_from_name(args.manifold, **({} if args.curvature is None else {"curvature": args.curvature}))
    writer = parallel is None or parallel.is_writer
    init = None if args.init_from is None else _init_components(args, graph, manifold)
    progress = _progress(args, writer)
    sharded = {} if parallel is None else parallel.evaluate_kwargs()
    evals: list[dict] = []

    def evaluate_every(epoch: int, stats: dict, embeddings: torch.Tensor) -> None:
        if epoch % args.eval_every == 0 and epoch != config.epochs:  # the last epoch is evaluated below
            m = evaluate(
                manifold,
                embeddings,
                graph.edges,
                sample=args.eval_sample,
                seed=args.seed,
                memory_budget=_mib(args.eval_memory_mb),
                device=args.device,
                fast=config.fast,
                **sharded,
            )
            evals.append({"epoch": epoch, "map": m["map"], "mean_rank": m["mean_rank"]})

    if writer and not args.quiet:
        print(config, flush=True)  # the hyperparameters, before the progress bar and the JSON line
    result = train(
        graph,
        manifold,
        config,
        checkpoint_dir=args.out,
        resume=args.resume,
        progress=progress,
        parallel=parallel,
        init=init,
        callback=None if args.eval_every is None else evaluate_every,
    )
    metrics = evaluate(
        manifold,
        result.embeddings,
        graph.edges,
        sample=args.eval_sample,
        seed=args.seed,
        memory_budget=_mib(args.eval_memory_mb),
        device=args.device,
        progress=progress,
        fast=config.fast,
        **sharded,
    )
    if not writer:
        return 0
    evals.append({"epoch": result.epoch, "map": metrics["map"], "mean_rank": metrics["mean_rank"]})
    record = {
        "map": metrics["map"],
        "mean_rank": metrics["mean_rank"],
        "seconds": result.seconds,
        "eval_seconds": metrics["seconds"],
        "eval_sources": metrics["num_sources"],
        "eval_sample": metrics["sample"],
        "sampled_sources": metrics["sampled_sources"],
        "data": args.data,
        "world_size": 1 if parallel is None else parallel.world_size,
        "epochs": result.epoch,
        "final_loss": result.history[-1]["loss"] if result.history else None,
        "checkpoint": result.checkpoint,
        "threads": torch.get_num_threads(),
        **{k: v for k, v in result.config.items() if k not in ("epochs",)},
    }
    from .embed.plot import plot_curve

    # the loss of every epoch; MAP / mean rank of every evaluation (--eval-every) and of the last
    record["eval_history"] = evals
    record["curve"] = str(Path(args.out) / "curve.png")
    title = f"{args.data}: {args.manifold} dim {args.dim}, nc {args.nc or 'plain'}, {args.dtype}"
    plot_curve([*result.history, *evals], record["curve"], title=title)
    _write_metrics(args.out, record)
    _emit(record)
    return 0


def _write_metrics(out_dir: str, record: dict) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "metrics.json.tmp"  # atomic: a crash leaves the old metrics.json or the new one
    tmp.write_text(_json_text(record, indent=1) + "\n")
    os.replace(tmp, out / "metrics.json")


def _init_components(args, graph, manifold) -> torch.Tensor:
    """``train --init-from``: the components of a saved run, checked against this run's settings."""
    from .embed import load_checkpoint
    from .embed.train import CHECKPOINT_NAME, manifold_name

    path = Path(args.init_from)
    ckpt = load_checkpoint(path / CHECKPOINT_NAME if path.is_dir() else path)
    cfg = ckpt["config"]
    if cfg.get("graph_checksum") != graph.checksum():
        raise ValueError(
            f"--init-from {args.init_from}: its graph (sha256 {cfg.get('graph_checksum')}) is not "
            f"--data {args.data} (sha256 {graph.checksum()})"
        )
    have = (cfg["manifold"], cfg["dim"], cfg["nc"], cfg["dtype"], float(cfg["curvature"]))
    want = (manifold_name(manifold), args.dim, args.nc, args.dtype, float(manifold.curvature))
    if have != want:
        raise ValueError(
            f"--init-from {args.init_from} holds a {cfg['manifold']} embedding with dim {cfg['dim']}, nc "
            f"{cfg['nc']}, dtype {cfg['dtype']}, curvature {cfg['curvature']}, but this run asks for "
            f"{want[0]}, dim {args.dim}, nc {args.nc}, dtype {args.dtype}, curvature {want[4]}; pass "
            f"--manifold {cfg['manifold']} --dim {cfg['dim']} --nc {cfg['nc'] or 'plain'} --dtype {cfg['dtype']}"
        )
    comps = ckpt["components"]
    return comps[..., 0] if cfg["nc"] is None else comps


def _construct(args) -> int:
    import time

    from .embed import distortion, embed_tree
    from .embed.construct import save_construction
    from .embed.train import CHECKPOINT_NAME
    from .manifolds.registry import manifold_from_name

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.plot is not None and args.dim != 2:
        raise ValueError(f"--plot draws 2-D constructions only; got --dim {args.dim} (drop --plot or pass --dim 2)")
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        raise ValueError(f"--plot: expected a file name ending in .png, got {args.plot!r}")
    if args.method == "closure":
        return _construct_closure(args)
    if args.epsilon is None and args.tau is None:
        raise ValueError("construct --method tree: pass one of --epsilon / --tau (the edge length)")
    if args.alpha is not None:
        raise ValueError(f"--alpha belongs to --method closure; got --alpha {args.alpha} with --method tree")
    args.manifold = args.manifold or "ball"
    graph = _load_graph(args.data)
    _check_out(args, True, resumable=False)
    manifold = manifold_from_name(args.manifold)
    progress = _progress(args)
    start = time.perf_counter()
    result = embed_tree(
        graph, manifold, dim=args.dim, nc=args.nc, dtype=DTYPES[args.dtype], epsilon=args.epsilon, tau=args.tau, progress=progress
    )
    seconds = time.perf_counter() - start
    path = save_construction(Path(args.out) / CHECKPOINT_NAME, result, graph, manifold, epsilon=args.epsilon, seconds=seconds)
    dist = distortion(
        result["embeddings"],
        graph,
        manifold,
        pairs=args.pairs or "all",
        tau=result["tau"],
        seed=args.seed,
        closure_sample=args.eval_sample,
        tree_sample=args.eval_sample,
        progress=progress,
    )
    record = {
        "map": dist["closure_map"],
        "mean_rank": dist["closure_mean_rank"],
        "sampled_sources": dist["closure_sampled_sources"],
        "tree_map": dist["tree_map"],
        "tree_mean_rank": dist["tree_mean_rank"],
        "tree_sampled_sources": dist["tree_sampled_sources"],
        "d_avg": dist["d_avg"],
        "d_wc": dist["d_wc"],
        "distortion_pairs": dist["num_pairs"],
        "distortion_sampled_sources": dist["sampled_sources"],
        "seconds": seconds,
        "data": args.data,
        "manifold": args.manifold,
        "dim": args.dim,
        "nc": result["nc"],
        "dtype": args.dtype,
        "tau": result["tau"],
        "epsilon": args.epsilon,
        "bits_needed": result["bits_needed"],
        "depth": result["depth"],
        "checkpoint": path,
        "threads": torch.get_num_threads(),
    }
    if args.plot is not None:
        _plot_construction(args, manifold, result["embeddings"], graph, f"construction, tau {result['tau']:.4g}, nc {result['nc']}")
        record["plot"] = args.plot
    _write_metrics(args.out, record)
    _emit(record)
    return 0


def _construct_closure(args) -> int:
    """``construct --method closure``: :func:`hypermc.embed.embed_closure` and its reconstruction metrics."""
    import time

    from .embed import embed_closure, evaluate
    from .embed.construct import save_construction
    from .embed.nested import DEFAULT_ALPHA
    from .embed.train import CHECKPOINT_NAME
    from .manifolds.registry import manifold_from_name

    for flag in ("epsilon", "tau", "pairs"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag} belongs to --method tree; got --{flag} {getattr(args, flag)} with --method closure")
    args.manifold = args.manifold or "halfspace"
    graph = _load_graph(args.data)
    manifold = manifold_from_name(args.manifold)
    alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
    start = time.perf_counter()
    result = embed_closure(graph, manifold, dim=args.dim, nc=args.nc, dtype=DTYPES[args.dtype], alpha=alpha, progress=_progress(args))
    seconds = time.perf_counter() - start
    _check_out(args, True, resumable=False)  # after the construction's own checks: a refused one writes nothing
    path = save_construction(Path(args.out) / CHECKPOINT_NAME, result, graph, manifold, seconds=seconds)
    metrics = evaluate(manifold, result["embeddings"], graph.edges, sample=args.eval_sample, seed=args.seed, fast=True)
    record = {
        "map": metrics["map"],
        "mean_rank": metrics["mean_rank"],
        "eval_sources": metrics["num_sources"],
        "sampled_sources": metrics["sampled_sources"],
        "seconds": seconds,
        "eval_seconds": metrics["seconds"],
        "data": args.data,
        "method": "closure",
        "manifold": args.manifold,
        "dim": args.dim,
        "nc": result["nc"],
        "dtype": args.dtype,
        "alpha": alpha,
        "bits_needed": result["bits_needed"],
        "log2_min_radius": result["log2_min_radius"],
        "depth": result["depth"],
        "checkpoint": path,
        "threads": torch.get_num_threads(),
    }
    if args.plot is not None:
        _plot_construction(args, manifold, result["embeddings"], graph, f"closure construction, alpha {alpha:g}, nc {result['nc']}")
        record["plot"] = args.plot
    _write_metrics(args.out, record)
    _emit(record)
    return 0


def _plot_construction(args, manifold, embeddings, graph, what: str) -> None:
    from .embed.plot import plot_embedding

    plot_embedding(manifold, embeddings, graph, args.plot, order=True, title=f"{args.data}: {what}, {args.manifold}")


def _eval(args) -> int:
    from .embed import evaluate, load_checkpoint

    if args.threads:
        torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    graph = ckpt["graph"]
    metrics = evaluate(
        ckpt["manifold"],
        ckpt["embeddings"],
        graph.edges,
        sample=args.sample,
        seed=args.seed,
        chunk_size=args.chunk_size,
        memory_budget=_mib(args.memory_mb),
        device=args.device,
        progress=_progress(args),
        fast=args.fast,
    )
    history = ckpt["history"]
    record = {
        "map": metrics["map"],
        "mean_rank": metrics["mean_rank"],
        "seconds": float(sum(h["seconds"] for h in history)),
        "eval_seconds": metrics["seconds"],
        "eval_sources": metrics["num_sources"],
        "eval_sample": metrics["sample"],
        "sampled_sources": metrics["sampled_sources"],
        "epochs": ckpt["epoch"],
        "checkpoint": str(args.checkpoint),
        **{k: v for k, v in ckpt["config"].items() if k not in ("epochs",)},
    }
    _emit(record)
    return 0


def _export(args) -> int:
    from .embed import load_checkpoint
    from .embed.export import export, output_paths
    from .embed.train import CHECKPOINT_NAME
    from .mcf import MCTensor

    ckpt_path = Path(args.ckpt)
    if ckpt_path.is_dir():
        ckpt_path = ckpt_path / CHECKPOINT_NAME
    ckpt = load_checkpoint(ckpt_path)
    components = ckpt["components"]  # (N, dim, nc), component dtype, as stored (no renormalisation)
    existing = [str(p) for p in output_paths(args.out, args.format) if p.exists()]
    if existing and not args.force:
        raise ValueError(f"--out: {', '.join(existing)} already exists; pass --force to overwrite")
    written = export(
        MCTensor(components),
        list(ckpt["names"]),
        args.out,
        format=args.format,
        manifold=ckpt["manifold"],
        overwrite=args.force,
        progress=_progress(args),
    )
    _emit(
        {
            "format": args.format,
            "out": [str(t) for t in written],
            "nodes": int(components.shape[0]),
            "dim": int(components.shape[1]),
            "nc": int(components.shape[2]),
            "checkpoint": str(ckpt_path),
        }
    )
    return 0


def _doctor(args) -> int:
    rows = doctor.backends(args.op, args.dtype, args.nc, args.device, build=args.build)
    print(doctor.table(rows))
    flushed = doctor.flushes_subnormals()
    if flushed:
        print(
            "subnormals: flushed to zero in this thread (torch.set_flush_denormal(True)): MC numbers"
            " whose last components are subnormal (leading component below about 2^(emin + (nc - 1) p), 2^-916 for float64 nc = 3)"
            " lose them; torch.set_flush_denormal(False) restores gradual underflow"
        )
    _emit({"fused": sum(r.path == "fused" for r in rows), "torch": sum(r.path == "torch" for r in rows), "flushes_subnormals": flushed})
    return 0


def _check_out(args, writer: bool, resumable: bool = True) -> None:
    """``--out``: refuse to overwrite a run without ``--resume``/``--force``; must be writable."""
    from .embed.train import CHECKPOINT_NAME

    out = Path(args.out)
    existing = [name for name in (CHECKPOINT_NAME, "metrics.json") if (out / name).exists()]
    if existing and (not resumable or args.resume is None) and not args.force:
        how = f"pass --resume {out / CHECKPOINT_NAME} to continue it or --force" if resumable else "pass --force"
        raise ValueError(f"--out {args.out} already holds a run ({', '.join(existing)}); {how} to overwrite it")
    if not writer:
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (CHECKPOINT_NAME + ".tmp", "metrics.json.tmp"):  # left by a crashed run
            (out / stale).unlink(missing_ok=True)
        probe = out / ".hypermc-write-test.tmp"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"--out {args.out} is not a writable directory: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    Errors print one line ``hypermc: error: ...`` to stderr and return 2 (argument
    errors exit 2 through argparse). Set ``HYPERMC_DEBUG=1`` to get the traceback
    instead (for reporting bugs).

    Example:
        Train on an edge list -- the closure of a small tree, written by
        :meth:`~hypermc.data.Graph.to_csv` -- then evaluate the checkpoint; the last line
        each command prints is one JSON object:

        >>> import contextlib, io
        >>> from hypermc.data import Graph
        >>> tree = Graph.from_pairs([("a", "r"), ("b", "r"), ("a1", "a"), ("a1", "r"), ("b1", "b"), ("b1", "r")])
        >>> tree.to_csv("tree.csv")
        >>> with contextlib.redirect_stdout(io.StringIO()) as out:
        ...     code = main(["train", "--data", "tree.csv", "--epochs", "10", "--burnin", "0", "--lr", "3",
        ...                  "--negatives", "4", "--out", "run", "--quiet"])
        >>> record = json.loads(out.getvalue().splitlines()[-1])
        >>> code, record["epochs"], record["map"], record["checkpoint"]
        (0, 10, 1.0, 'run/checkpoint.pt')
        >>> with contextlib.redirect_stdout(io.StringIO()) as out:
        ...     code = main(["eval", "run/checkpoint.pt"])
        >>> code, json.loads(out.getvalue().splitlines()[-1])["map"]
        (0, 1.0)

        An error is one line on stderr (``hypermc: error: ...``) and exit code 2:

        >>> main(["eval", "missing.pt"])
        2
    """
    from .manifolds.registry import manifold_class

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "train" and args.curvature is not None and "curvature" not in manifold_class(args.manifold).config_args:
        parser.error(f"--curvature {args.curvature:g} given with --manifold {args.manifold} (which takes no curvature; drop it)")
    try:
        commands = {"closure": _closure, "train": _train, "eval": _eval, "construct": _construct, "export": _export, "doctor": _doctor}
        return commands[args.command](args)
    except Exception as exc:
        if os.environ.get("HYPERMC_DEBUG"):
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"hypermc: error: {message} ({type(exc).__name__}; HYPERMC_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
