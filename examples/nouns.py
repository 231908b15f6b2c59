"""Train WordNet nouns (10-D halfspace, MC nc=2) and record the MAP / mean-rank curve.

The run is one call of ``train`` that evaluates the embedding every ``--every`` epochs
(``--eval-sample`` random sources, the same ones each time; the last point on all
sources), writes the checkpoint then, appends one JSON line to ``OUT/curve.jsonl`` and
redraws ``OUT/curve.png`` (MAP, mean rank and loss against the epoch). It stops after
``--epochs`` epochs or at the first evaluation after ``--max-minutes`` of wall time,
whichever comes first; ``--resume`` continues the run found in ``OUT`` with the same
settings (so a run can be split over commands with a time limit; the resumed epochs are
bit-identical to an uninterrupted run). ``--lr-schedule linear`` decays the learning rate
after burn-in linearly to ``--lr-end-mult`` times ``--lr`` at epoch ``--epochs`` (a run
stopped by ``--max-minutes`` ends before the decay does). ``--root`` trains on the
closure under one synset instead (e.g. ``animal.n.01``: 4,017 nodes), a quick stand-in
for the full graph.
``--plot CURVE.jsonl [...]`` only draws the PNG of earlier curves (one figure per file,
next to it).

The defaults are the recipe of docs/training.md ("Why nouns stalled"): distance scale 4
(logits ``-4 d``; the 2-D mammals default 0.5 freezes misplaced nodes far from their
parents), batch 32,768 at learning rate 320 (0.0098 per edge: the loss is a batch mean).

Usage::

    python examples/nouns.py --out runs/nouns --device cuda --fast --max-minutes 20
    python examples/nouns.py --out runs/animal --root animal.n.01 --nc plain --device cpu --batch-size 2048 --lr 20
    python examples/nouns.py --out runs/nouns-ball --manifold ball --nc plain
    python examples/nouns.py --plot runs/nouns/curve.jsonl      # redraw runs/nouns/curve.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from hypermc import _results
from hypermc._progress import show_progress
from hypermc.data import Graph, load_edges, wordnet_closure
from hypermc.embed import TrainConfig, evaluate, load_checkpoint, train
from hypermc.embed.config import RMSPROP_EPS
from hypermc.embed.plot import plot_curve
from hypermc.embed.train import CHECKPOINT_NAME, MANIFOLDS


def draw(curve: Path, title: str) -> Path:
    """``curve.png`` beside the JSON lines file ``curve`` (one evaluation per line)."""
    records = [json.loads(line) for line in curve.read_text().splitlines() if line.strip()]
    png = curve.with_suffix(".png")
    plot_curve(records, png, title=title)
    return png


def subtree(graph: Graph, root: str) -> Graph:
    """The closure under ``root``: ``root``, its descendants and the edges among them."""
    edges, r = graph.edges, graph.node_id(root)
    keep = torch.zeros(graph.num_nodes, dtype=torch.bool)
    keep[edges[edges[:, 1] == r, 0]] = True
    keep[r] = True
    inside = edges[keep[edges[:, 0]] & keep[edges[:, 1]]]
    names = graph.names
    return Graph.from_pairs([(names[c], names[p]) for c, p in inside.tolist()])


class _TimeUp(Exception):
    """Raised by the evaluation callback once ``--max-minutes`` have passed."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="output directory (checkpoint, curve.jsonl, curve.png); required unless --plot")
    p.add_argument("--plot", nargs="+", metavar="CURVE", help="only draw the PNG of these curve.jsonl files")
    p.add_argument("--csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--root", default=None, help="train on the closure under this synset only (e.g. animal.n.01)")
    p.add_argument("--manifold", default="halfspace", choices=sorted(MANIFOLDS))
    p.add_argument("--nc", default="2", help="components, or 'plain'")
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--device", default="auto")
    p.add_argument("--fast", action="store_true")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--every", type=int, default=10, help="epochs per segment (one curve point each)")
    p.add_argument("--max-minutes", type=float, default=None)
    p.add_argument("--lr", type=float, default=320.0)
    p.add_argument("--lr-schedule", choices=("constant", "linear"), default="constant", help="after burn-in")
    p.add_argument("--lr-end-mult", type=float, default=1.0, help="linear: the last epoch's lr is lr * this")
    p.add_argument("--batch-size", type=int, default=32768)
    p.add_argument("--burnin", type=int, default=10)
    p.add_argument("--burnin-lr-mult", type=float, default=0.01)
    p.add_argument("--scale", type=float, default=4.0)
    p.add_argument("--negatives", type=int, default=50)
    p.add_argument(
        "--near-negatives", type=int, default=0, help="of the negatives, how many are drawn below the positive's target (after burn-in)"
    )
    p.add_argument(
        "--optimizer", choices=("sgd", "rmsprop"), default="sgd", help="rmsprop: each row moves about lr hyperbolic units per batch"
    )
    p.add_argument(
        "--rmsprop-eps",
        type=float,
        default=RMSPROP_EPS,
        help="rmsprop: added to the root of each row's mean square; rows with much smaller gradients barely move",
    )
    p.add_argument("--eval-sample", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bars (none anyway when stderr is not a terminal)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt if it exists (same settings)")
    p.add_argument(
        "--init-from",
        default=None,
        metavar="RUN",
        help="start from the points of an earlier run (its directory or checkpoint.pt), e.g. at a lower --lr with --burnin 0; "
        "the curve's epochs continue from that run's last epoch",
    )
    _results.add_argument(p)
    args = p.parse_args()
    if args.plot:
        for curve in args.plot:
            print(draw(Path(curve), f"nouns: {Path(curve).stem}"))
        return
    if args.out is None:
        p.error("--out is required (unless --plot)")
    if args.threads:
        torch.set_num_threads(args.threads)
    graph = load_edges(args.csv) if args.csv else wordnet_closure(None)
    if args.root:
        graph = subtree(graph, args.root)
    manifold = MANIFOLDS[args.manifold]()
    out = Path(args.out)
    kw = dict(
        dim=args.dim,
        nc=None if args.nc == "plain" else int(args.nc),
        dtype=torch.float64,
        lr=args.lr,
        batch_size=args.batch_size,
        burnin=args.burnin,
        burnin_lr_mult=args.burnin_lr_mult,
        scale=args.scale,
        negatives=args.negatives,
        near_negatives=args.near_negatives,
        optimizer=args.optimizer,
        rmsprop_eps=args.rmsprop_eps,
        seed=args.seed,
        lr_schedule=args.lr_schedule,
        lr_end_mult=args.lr_end_mult,
        epochs=args.epochs,
        checkpoint_every=args.every,
        progress=show_progress(args.quiet),
        device=args.device,
        fast=args.fast,
        checkpoint_dir=out,
    )
    # the settings are checked before OUT is made, so a refused run leaves no directory
    TrainConfig(**{k: v for k, v in kw.items() if k not in ("progress", "checkpoint_dir")})
    out.mkdir(parents=True, exist_ok=True)
    init, offset = None, 0
    if args.init_from:  # a new run (own generator, own settings) from the points of an earlier one
        path = Path(args.init_from)
        earlier = load_checkpoint(path / CHECKPOINT_NAME if path.is_dir() else path)
        init = earlier["components"] if kw["nc"] is not None else earlier["components"][..., 0]
        curve = (path if path.is_dir() else path.parent) / "curve.jsonl"
        last = json.loads(curve.read_text().splitlines()[-1]) if curve.exists() else {"epoch": 0}
        offset = earlier["epoch"] + last["epoch"] - last.get("run_epoch", last["epoch"])  # chains of --init-from
    resume, trained_s = None, 0.0
    if args.resume and (out / CHECKPOINT_NAME).exists():  # continue the run in OUT
        resume = out / CHECKPOINT_NAME
        trained_s = sum(h["seconds"] for h in load_checkpoint(resume)["history"])
    start = time.perf_counter()
    title = f"nouns, {args.dim}-D {args.manifold}, nc={args.nc}, batch {args.batch_size}, lr {args.lr} ({args.lr_schedule})"

    def record(epoch: int, stats: dict, table: torch.Tensor) -> None:
        """After each epoch: every ``--every`` epochs (and at the end) one curve point."""
        nonlocal trained_s
        trained_s += stats["seconds"]
        if epoch % args.every and epoch != args.epochs:
            return
        timed_out = args.max_minutes is not None and time.perf_counter() - start >= 60 * args.max_minutes
        last = epoch == args.epochs or timed_out
        m = evaluate(
            manifold,
            table,
            graph.edges,
            sample=None if last else args.eval_sample,
            seed=0,
            fast=args.fast,
            progress=show_progress(args.quiet),
        )
        rec = {
            "epoch": offset + epoch,
            "run_epoch": epoch,
            "lr": stats["lr"],
            "map": m["map"],
            "mean_rank": m["mean_rank"],
            "sources": m["num_sources"],
            "loss": stats["loss"],
            "train_s": trained_s,
            "eval_s": m["seconds"],
            "wall_s": time.perf_counter() - start,
            "device": str(table.device),
        }
        with open(out / "curve.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
        draw(out / "curve.jsonl", title)
        if timed_out and epoch != args.epochs:
            raise _TimeUp  # the checkpoint of this epoch is written (checkpoint_every=--every)

    try:
        train(graph, manifold, resume=resume, init=init, callback=record, **kw)
    except _TimeUp:
        pass


if __name__ == "__main__":
    _results.run(main)
