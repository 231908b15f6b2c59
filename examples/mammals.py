"""Embed the WordNet mammal closure and print the reconstruction table (the main job).

Trains 2-D Poincaré half-space embeddings of the mammal hierarchy (1,180 nodes, 6,540
edges; shipped with hypermc, no WordNet needed) with plain float64 and with 1 and 2
component MC float64 coordinates, evaluates reconstruction MAP and mean rank, and prints
a table. It also writes ``mammals.png`` (``--plot``), a picture of the last 2-D embedding
drawn by :func:`hypermc.embed.plot.plot_embedding`: the hierarchy's edges on the Poincaré
disk with every node at its hyperbolic distance from the origin (so the levels show
instead of crowding at the boundary) and on the half-space with the height on a log
scale, coloured by depth, ten nodes labelled. It also writes ``mammals_curve.png``
(``--curve``): the training loss of every run against the epoch, one line per row and
seed, with each run's final MAP in the legend. A progress bar per run goes to stderr when it
is a terminal (``--quiet``: none).

The defaults finish in about 5 minutes on a 2-core CPU (5 min 17 s measured, 80-130 s per
row) and print the table README.md shows between its ``main-job-table`` markers, digit for
digit: ``.ci/run`` runs them and compares (``.ci/check_main_job.py``). The digits do not
depend on the thread count (``--threads``): every random draw comes from the seeded
generator, and the softmax loss sums in one fixed order
(:func:`hypermc.embed.train.fixed_order_logsumexp`), not in the SIMD-width-dependent order of
``torch.logsumexp``. Nor do they depend on the CPU model: the trainer's ``exp``, ``log``,
``sqrt`` and ``tanh`` (:mod:`hypermc.mcf.portable`) avoid MKL's vector math, whose rounding
differs between Intel and AMD CPUs. They depend on the torch version and on the width of
its vectorised kernels (``expm1``, ``log1p``, ``asinh`` round differently at other widths):
on an x86-64 CPU with AVX2 and FMA the script selects torch's AVX2 kernels
(``ATEN_CPU_CAPABILITY=avx2``) unless that variable is set (:func:`_select_cpu_kernels`);
other CPUs (aarch64, x86-64 without AVX2) run other kernels and can print other digits. The wall times are
printed after the table, not in it. The paper's setting --
1000 epochs, 50 negatives, 20 burn-in epochs -- is ``--epochs 1000``; the trainer's
defaults (batch 512, distance scale 0.5, lr ramped linearly from 10 to 80 after burn-in)
are tuned for it. The docs/embeddings.md table comes from::

    python examples/mammals.py --epochs 1000 --seeds 0 1 2 --rows plain32 plain64 1 2 3 --markdown

and its 5-D ball row from the last usage line below with ``--epochs 1000 --seeds 0 1 2
--markdown``. ``--markdown`` prints the final table in the docs' layout (manifold, dim,
coordinates, MAP, mean rank) instead of the plain-text one with seconds.

Usage::

    python examples/mammals.py                               # about 5 minutes (2 cores)
    python examples/mammals.py --rows 2 --epochs 50 --plot m.png   # a quick picture
    python examples/mammals.py --rows 2 3 --epochs 1000 --seeds 0 1 2
    python examples/mammals.py --manifold ball --dim 5 --rows plain64 --lr 5 --lr-end-mult 10 --scale 1
    python examples/mammals.py --dim 10 --rows 2 --fast --epochs 200 --burnin 5 --scale 3 --lr 5 --lr-end-mult 10 --plot ''

The last line is the 10-D recipe of docs/training.md: MAP 0.9805 at seed 0 (0.9789 ±
0.0034 over seeds 0, 1, 2) in about 11 s per seed, one thread, on the 2-core VM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _select_cpu_kernels() -> None:
    """Before torch is imported (the setting is read once, when its libraries load), unless
    the caller has set it: ``ATEN_CPU_CAPABILITY=avx2`` where the CPU has AVX2 and FMA
    (torch's own condition for those kernels), so that an AVX-512 CPU runs the same kernel
    widths as an AVX2 one. Elsewhere nothing: a capability the CPU lacks would crash, and an
    unknown one is ignored with a warning.
    """
    if "torch" in sys.modules:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if {"avx2", "fma"} <= set(flags):
        os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")


_select_cpu_kernels()

import torch  # noqa: E402 -- after the kernel selection

from hypermc import _results  # noqa: E402
from hypermc._progress import show_progress  # noqa: E402
from hypermc.data import load_mammals  # noqa: E402
from hypermc.embed import evaluate, train  # noqa: E402
from hypermc.embed.plot import plot_embedding, plot_losses  # noqa: E402
from hypermc.embed.train import DEFAULTS, MANIFOLDS  # noqa: E402

#: Row names: an nc (MC float64), or a plain dtype.
PLAIN = {"plain64": torch.float64, "plain32": torch.float32}
#: Manifold names in the ``--markdown`` table (the docs' spelling).
TITLES = {"halfspace": "half-space", "ball": "Poincaré ball", "lorentz": "Lorentz", "euclidean": "Euclidean"}
#: Nodes labelled in the figure.
LABELS = (
    "mammal.n.01",
    "placental.n.01",
    "carnivore.n.01",
    "primate.n.02",
    "ungulate.n.01",
    "rodent.n.01",
    "marsupial.n.01",
    "whale.n.02",
    "bat.n.01",
    "dog.n.01",
)


def _row(name: str):
    """(nc, dtype) of a row name."""
    if name in PLAIN:
        return None, PLAIN[name]
    return int(name), torch.float64


def _fmt(values: list[float], digits: int) -> str:
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def _schedule(args) -> str:
    if args.lr_schedule == "constant":
        return "constant"
    return f"linear to {args.lr * args.lr_end_mult:g}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", default=["plain64", "1", "2"], help="component counts (MC float64) and/or plain64, plain32")
    p.add_argument("--manifold", default="halfspace", choices=sorted(MANIFOLDS))
    p.add_argument("--dim", type=int, default=2)
    p.add_argument("--epochs", type=int, default=500)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    p.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    p.add_argument("--negatives", type=int, default=DEFAULTS["negatives"])
    p.add_argument("--burnin", type=int, default=DEFAULTS["burnin"])
    p.add_argument("--scale", type=float, default=DEFAULTS["scale"], help="logits are -scale * distance")
    p.add_argument("--lr-schedule", default=DEFAULTS["lr_schedule"], choices=["constant", "linear"])
    p.add_argument(
        "--lr-end-mult", type=float, default=DEFAULTS["lr_end_mult"], help="final lr factor of the linear schedule (>1 ramps up)"
    )
    p.add_argument("--fast", action="store_true", help="the fast update (train(fast=True); fused CPU kernels, docs/training.md)")
    p.add_argument("--plot", default="mammals.png", help="PNG of the last embedding ('' for none; 2-D only)")
    p.add_argument("--curve", default="mammals_curve.png", help="PNG of every run's loss against the epoch ('' for none)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (none anyway when stderr is not a terminal)")
    p.add_argument(
        "--markdown", action="store_true", help="print the final table as markdown in the layout of README.md / docs/embeddings.md"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch.set_num_threads (default 1: the batches are small, and extra threads "
        "slow down badly on a loaded machine; 0 keeps torch's default); the printed numbers do not depend on it",
    )
    _results.add_argument(p)
    args = p.parse_args()
    for flag in ("plot", "curve"):
        value = getattr(args, flag)
        if value and not value.lower().endswith(".png"):
            p.error(f"--{flag}: expected a file name ending in .png, got {value!r}")
    if args.threads:
        torch.set_num_threads(args.threads)

    wall = time.perf_counter()
    graph = load_mammals()
    manifold = MANIFOLDS[args.manifold]()
    print(
        f"mammals: {graph.num_nodes} nodes, {graph.num_edges} edges; {args.manifold} dim {args.dim}; "
        f"{args.epochs} epochs, lr {args.lr} ({_schedule(args)}), batch {args.batch_size}, "
        f"{args.negatives} negatives, burn-in {args.burnin}, scale {args.scale}{', fast update' if args.fast else ''}; "
        f"seeds {args.seeds}; {torch.get_num_threads()} threads; CPU kernels {torch.backends.cpu.get_cpu_capability()}",
        flush=True,
    )
    header = f"{'manifold':<10} {'dim':>3} {'dtype':<8} {'nc':>5} {'MAP':>17} {'MR':>17}"
    if args.markdown:
        header = "| manifold | dim | coordinates | MAP | mean rank |\n|---|---:|---|---:|---:|"
    lines = []
    times = []  # (row name, mean seconds per run): printed after the table, which holds only numbers that reproduce
    last = None
    runs: list[tuple[str, list[dict]]] = []  # (label, history) of every run, for --curve
    for name in args.rows:
        nc, dtype = _row(name)
        maps, ranks, secs = [], [], []
        for seed in args.seeds:
            start = time.perf_counter()
            result = train(
                graph,
                manifold,
                dim=args.dim,
                nc=nc,
                dtype=dtype,
                epochs=args.epochs,
                lr=args.lr,
                batch_size=args.batch_size,
                negatives=args.negatives,
                burnin=args.burnin,
                scale=args.scale,
                lr_schedule=args.lr_schedule,
                lr_end_mult=args.lr_end_mult,
                fast=args.fast,
                seed=seed,
                progress=show_progress(args.quiet),
            )
            metrics = evaluate(manifold, result.embeddings, graph.edges, progress=show_progress(args.quiet))
            maps.append(metrics["map"])
            ranks.append(metrics["mean_rank"])
            secs.append(time.perf_counter() - start)
            print(f"  {name} seed {seed}: MAP {metrics['map']:.4f}  MR {metrics['mean_rank']:.3f}  ({secs[-1]:.0f} s)", flush=True)
            runs.append((f"{'nc=' + name if name.isdigit() else name} seed {seed}: MAP {metrics['map']:.4f}", result.history))
            last = result
        times.append((name, statistics.fmean(secs)))
        dtype_name = str(dtype).removeprefix("torch.")
        if args.markdown:
            coords = f"plain {dtype_name}" if nc is None else f"MC {dtype_name}, nc={nc}"
            lines.append(f"| {TITLES.get(args.manifold, args.manifold)} | {args.dim} | {coords} | {_fmt(maps, 4)} | {_fmt(ranks, 3)} |")
            continue
        lines.append(
            f"{args.manifold:<10} {args.dim:>3} {dtype_name:<8} {('-' if nc is None else nc):>5} {_fmt(maps, 4):>17} {_fmt(ranks, 3):>17}"
        )
    print()
    print(header)
    print("\n".join(lines))
    print()  # the table ends here (.ci/check_main_job.py compares it with the README)
    print(f"wall time {time.perf_counter() - wall:.0f} s; seconds per run: " + ", ".join(f"{name} {s:.0f}" for name, s in times))
    if args.curve and runs:
        plot_losses(runs, args.curve, title=f"mammals, {args.manifold} dim {args.dim}: training loss")
        print(f"wrote {args.curve}")
    if args.plot and last is not None:
        if args.dim != 2 or args.manifold == "euclidean":
            print(f"no picture: it draws 2-D hyperbolic embeddings (got {args.manifold}, dim {args.dim})")
            return
        plot_embedding(
            last.manifold,
            last.embeddings,
            graph,
            args.plot,
            labels=LABELS,
            title=f"mammals, {args.manifold} nc={last.config['nc']} {last.config['dtype']}, "
            f"{last.epoch} epochs, seed {last.config['seed']}",
        )
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    _results.run(main)
