"""Benchmark: seconds per training epoch of hierarchy embeddings (mammals, nouns, 2 ranks).

Five tables:

1. **mammals** (1,180 nodes, 6,540 edges, 50 negatives per edge, 2-D halfspace): a few
   epochs at each component count; the median wall-clock seconds per epoch, the ratio to
   nc=1 and the projected time of the paper's 1000-epoch run. Burn-in and post-burn-in
   epochs cost the same (only the negative distribution differs); the first epoch
   (warm-up) is dropped. Acceptance of the pipeline: nc=2 at <= 0.9 s/epoch and nc=2 <=
   3x nc=1 on a 2-core CPU.
2. **nouns** (WordNet nouns closure, 82,115 nodes, 743,086 edges; needs WordNet, see
   DATA.md), 10-D: halfspace at nc 1/2/3 and the plain float64 ball. A full epoch takes
   minutes, so each setting trains two epochs on a **random subset of the edges** (all
   82,115 nodes, the same batch size and negatives; ``--nouns-edges``), times the
   second (wall clock, and CPU seconds of the process) and **extrapolates** the
   seconds per batch to the 743,086 edges (the output says so).
   Each setting runs in a fresh subprocess so that its peak resident memory
   (``ru_maxrss``, graph loading included) is its own.
3. **2 processes vs 1** (torch.distributed, gloo, localhost) on mammals (or, with
   ``--parallel-data nouns``, the nouns edge subset) 10-D halfspace
   nc=2: median seconds per epoch with 1 and 2 ranks (one thread each) and the speedup;
   also the CPU seconds per epoch of rank 0, which is what an idle machine would turn
   into wall time (on a loaded machine the wall-clock speedup is not meaningful).

4. **devices** (``--only devices``): seconds per epoch of 10-D training of each model of
   ``--manifolds`` (default the half-space) on
   mammals (full epochs) and nouns (the edge subset of ``--nouns-edges``, extrapolated
   to the full epoch as in table 2; ``--nouns-edges 0``: full epochs) at each nc of ``--nc``
   (``plain`` skipped; default 1/2/3), with
   the full MC optimizer step and with the fast update (``train(fast=True)``), on each
   device of ``--devices`` (``cuda`` is skipped, and says so, without a GPU). The
   median of the epochs after the first; the ratio column is off / fast.

5. **epoch** (``--only epoch``): seconds of one nouns epoch, 10-D halfspace float64, for
   plain float64, nc=1 and nc=2/3 with the full and the fast update, one column per
   device of ``--devices`` (``cuda`` skipped, and said so, without a GPU), and the CPU
   seconds of the process. Each cell is one epoch of the trainer's loop from a fresh
   table after a warm-up epoch on a small tree (kernel build and checks, CUDA start-up). ``--nouns-edges 0`` times the
   whole epoch (743,086 edges); a positive value times a random subset and extrapolates
   per batch (the output says EXTRAPOLATED). The caption line gives the machine, the
   commit, the load average before and after, and the wall time.

Usage::

    python benchmarks/bench_embed.py                       # all five tables
    python benchmarks/bench_embed.py --only mammals --nc 1 2 --epochs 20 --threads 2
    python benchmarks/bench_embed.py --only nouns --nouns-edges 20000
    python benchmarks/bench_embed.py --only parallel --parallel-epochs 6
    python benchmarks/bench_embed.py --only devices --devices cpu cuda --threads 2
    python benchmarks/bench_embed.py --only epoch --nouns-csv nouns.csv --nouns-edges 0 --batch-size 1024 --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from hypermc import _results
from hypermc.data import Graph, load_mammals
from hypermc.embed import train
from hypermc.embed.train import DEFAULTS
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace

#: Nouns settings of table 2: (label, manifold class, nc).
NOUNS_SETTINGS = [("halfspace", "halfspace", 1), ("halfspace", "halfspace", 2), ("halfspace", "halfspace", 3), ("ball", "ball", None)]
MANIFOLDS = {"halfspace": PoincareHalfspace, "ball": PoincareBall, "lorentz": Lorentz}


def mammals_table(args) -> None:
    graph = load_mammals()
    dtype = getattr(torch, args.dtype)
    print(
        f"mammals 2-D halfspace, {graph.num_edges} edges x {1 + DEFAULTS['negatives']} targets, "
        f"{args.dtype}, batch {args.batch_size}, threads {torch.get_num_threads()}, "
        f"median of {args.epochs - 1} epochs"
    )
    print(f"{'nc':>6} {'s/epoch':>9} {'min':>8} {'vs nc=1':>8} {'1000 epochs':>12}")
    base = None
    for text in args.nc:
        nc = None if text == "plain" else int(text)
        r = train(
            graph,
            PoincareHalfspace(),
            dim=2,
            nc=nc,
            dtype=dtype,
            epochs=args.epochs,
            batch_size=args.batch_size,
            burnin=args.epochs // 2,
            seed=0,
            progress=False,
        )
        times = [h["seconds"] for h in r.history[1:]] or [r.history[0]["seconds"]]
        med = statistics.median(times)
        if nc == 1:
            base = med
        ratio = f"{med / base:8.2f}" if base else f"{'-':>8}"
        print(f"{text:>6} {med:9.3f} {min(times):8.3f} {ratio} {med * 1000 / 60:10.1f} min", flush=True)


# ----------------------------------------------------------------------------- nouns


def nouns_one(manifold: str, nc: int | None, edges: int, batch_size: int, dim: int) -> dict:
    """One nouns setting (run in its own process): seconds per batch on an edge subset."""
    from hypermc.data import wordnet_closure

    full = wordnet_closure(None)
    loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sub = nouns_subset(full, edges)
    ends = []
    # Two epochs: the first warms up, the second is timed (wall, and CPU between the ends).
    r = train(
        sub,
        MANIFOLDS[manifold](),
        dim=dim,
        nc=nc,
        dtype=torch.float64,
        epochs=2,
        batch_size=batch_size,
        burnin=0,
        seed=0,
        progress=False,
        callback=lambda *a: ends.append(time.process_time()),
    )
    cpu = ends[1] - ends[0]
    batches = -(-sub.num_edges // batch_size)
    per_batch = r.history[1]["seconds"] / batches
    full_batches = -(-full.num_edges // batch_size)
    return {
        "manifold": manifold,
        "nc": nc,
        "edges_measured": sub.num_edges,
        "batches_measured": batches,
        "s_per_batch": per_batch,
        "s_per_epoch": per_batch * full_batches,
        "cpu_s_per_epoch": cpu / batches * full_batches,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_load_mb": loaded_rss,
    }


def nouns_subset(full: Graph, edges: int) -> Graph:
    """A seeded random subset of ``edges`` edges of ``full``, on all of its nodes."""
    keep = torch.randperm(full.num_edges, generator=torch.Generator().manual_seed(0))[:edges].sort().values
    return Graph(full.names, full.edges[keep])


def nouns_table(args) -> None:
    print(
        f"\nnouns {args.nouns_dim}-D, 82,115 nodes, 743,086 edges x {1 + DEFAULTS['negatives']} targets, "
        f"float64, batch {args.batch_size}, threads {args.threads}: 2nd epoch on a random subset of "
        f"{args.nouns_edges} edges, seconds per batch EXTRAPOLATED to the full epoch; peak RSS of the "
        "process (graph loading included)"
    )
    print(f"{'manifold':>10} {'nc':>6} {'s/batch':>9} {'s/epoch (extrap.)':>18} {'cpu s/epoch':>12} {'peak MB':>9} {'after load MB':>14}")
    for label, manifold, nc in NOUNS_SETTINGS:
        cmd = [
            sys.executable,
            __file__,
            "--nouns-one",
            manifold,
            "plain" if nc is None else str(nc),
            "--nouns-edges",
            str(args.nouns_edges),
            "--batch-size",
            str(args.batch_size),
            "--nouns-dim",
            str(args.nouns_dim),
            "--threads",
            str(args.threads),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rec = json.loads(out.strip().splitlines()[-1])
        print(
            f"{label:>10} {'plain' if nc is None else nc:>6} {rec['s_per_batch']:9.4f} "
            f"{rec['s_per_epoch']:18.1f} {rec['cpu_s_per_epoch']:12.1f} {rec['maxrss_mb']:9.0f} "
            f"{rec['rss_after_load_mb']:14.0f}",
            flush=True,
        )


# ----------------------------------------------------------------------------- 2 ranks


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parallel_graph(data: str, edges: int) -> Graph:
    if data == "mammals":
        return load_mammals()
    from hypermc.data import wordnet_closure

    return nouns_subset(wordnet_closure(None), edges)


def parallel_rank(epochs: int, out: str, data: str, edges: int, batch_size: int) -> None:
    """One rank of table 3 (started by torchrun-like environment variables)."""
    from hypermc.embed.distributed import init_from_env

    torch.set_num_threads(1)
    parallel = init_from_env(backend="gloo")
    cpu = []

    def callback(epoch, stats, table):
        cpu.append(time.process_time())

    start_cpu = time.process_time()
    r = train(
        parallel_graph(data, edges),
        PoincareHalfspace(),
        dim=10,
        nc=2,
        dtype=torch.float64,
        epochs=epochs,
        burnin=1,
        seed=0,
        batch_size=batch_size,
        progress=False,
        parallel=parallel,
        callback=callback,
    )
    cpu = [b - a for a, b in zip([start_cpu] + cpu[:-1], cpu)]
    if parallel is None or parallel.is_writer:
        with open(out, "w") as f:
            json.dump({"wall": [h["seconds"] for h in r.history], "cpu": cpu, "loss": r.history[-1]["loss"]}, f)
    if parallel is not None:
        parallel.close()


def parallel_table(args) -> None:
    what = "mammals" if args.parallel_data == "mammals" else f"nouns subset of {args.nouns_edges} edges"
    print(
        f"\n2 processes vs 1 (gloo, localhost, 1 thread per rank): {what}, 10-D halfspace nc=2, batch "
        f"{args.batch_size} (global), median of {args.parallel_epochs - 1} epochs"
    )
    print(f"{'ranks':>6} {'s/epoch':>9} {'cpu s/epoch':>12} {'final loss':>12}")
    rows = {}
    for world in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rank0.json")
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--parallel-rank",
                        out,
                        "--parallel-epochs",
                        str(args.parallel_epochs),
                        "--parallel-data",
                        args.parallel_data,
                        "--nouns-edges",
                        str(args.nouns_edges),
                        "--batch-size",
                        str(args.batch_size),
                    ],
                    env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                )
                for r in range(world)
            ]
            codes = [p.wait() for p in procs]
            if any(codes):
                raise SystemExit(f"parallel benchmark: ranks exited with {codes}")
            with open(out) as f:
                rec = json.load(f)
        wall, cpu = statistics.median(rec["wall"][1:]), statistics.median(rec["cpu"][1:])
        rows[world] = (wall, cpu)
        print(f"{world:>6} {wall:9.3f} {cpu:12.3f} {rec['loss']:12.6f}", flush=True)
    (w1, c1), (w2, c2) = rows[1], rows[2]
    print(
        f"speedup of 2 ranks: wall {w1 / w2:.2f}x, cpu-time per rank {c1 / c2:.2f}x "
        f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


def _nouns_graph(csv_path: str | None) -> Graph:
    if csv_path:
        from hypermc.data import load_edges

        return load_edges(csv_path)
    from hypermc.data import wordnet_closure

    return wordnet_closure(None)


def devices_table(args) -> None:
    """Table 4: CPU / CUDA epoch times, fast update off and on."""
    nouns = _nouns_graph(args.nouns_csv)
    sub = nouns if args.nouns_edges <= 0 else nouns_subset(nouns, args.nouns_edges)
    data = [("mammals", load_mammals(), 1.0), ("nouns", sub, nouns.num_edges / sub.num_edges)]
    ncs = [int(t) for t in args.nc if t != "plain"]
    print(
        f"\ndevices: 10-D {', '.join(args.manifolds)}, float64, batch {args.batch_size}, {DEFAULTS['negatives']} negatives, "
        f"threads {torch.get_num_threads()}, median of {args.epochs - 1} epochs after the first; nouns on "
        f"{sub.num_edges} of {nouns.num_edges} edges, "
        f"{'full epochs' if sub is nouns else 'EXTRAPOLATED to the full epoch'}"
    )
    print(f"{'device':>6} {'model':>9} {'data':>8} {'nc':>3} {'off s/epoch':>12} {'fast s/epoch':>13} {'off/fast':>9}")
    for device in args.devices:
        if device == "cuda" and not torch.cuda.is_available():
            print(f"{device:>6}  skipped: CUDA is not available on this machine", flush=True)
            continue
        for model, (name, graph, factor), nc in itertools.product(args.manifolds, data, ncs):
            med = {}
            for fast in (False, True):
                r = train(
                    graph,
                    MANIFOLDS[model](),
                    dim=10,
                    nc=nc,
                    dtype=torch.float64,
                    epochs=args.epochs,
                    batch_size=args.batch_size,
                    burnin=1,
                    seed=0,
                    progress=False,
                    device=device,
                    fast=fast,
                )
                med[fast] = statistics.median(h["seconds"] for h in r.history[1:]) * factor
            print(
                f"{device:>6} {model:>9} {name:>8} {nc:>3} {med[False]:12.3f} {med[True]:13.3f} {med[False] / med[True]:9.2f}",
                flush=True,
            )


#: Table 5 settings: (label, nc, fast). Plain float64 and nc=1 run the torch path (they
#: equal plain torch arithmetic); nc >= 2 with fast=True uses the fused CPU kernels.
EPOCH_SETTINGS = [
    ("plain float64", None, False),
    ("plain float64, fast", None, True),
    ("MC nc=1", 1, False),
    ("MC nc=2", 2, False),
    ("MC nc=2, fast", 2, True),
    ("MC nc=3", 3, False),
    ("MC nc=3, fast", 3, True),
]


def _machine() -> str:
    """CPU model, threads, torch version and the GPU (if any), for the table's caption."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()}-core {cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}, {gpu}"


def _commit() -> str:
    """The commit, flagged where the sources (hypermc, benchmarks, examples) differ from it
    (:func:`hypermc._results.commit`)."""
    return _results.commit().removeprefix("commit ")


def epoch_table(args) -> None:
    """Table 5: seconds of one whole nouns epoch per setting and device.

    Each setting first trains one epoch of a small tree on the same device (the fused
    kernels' load check, CUDA start-up), then times one epoch of the nouns closure from a
    fresh table (``_Trainer.run_epoch``, the loop ``train`` runs: no graph loading, no
    initialisation): its wall seconds per device and, for the CPU, the process's CPU
    seconds (with one thread that is the epoch's time on an otherwise idle core, whatever
    else runs on the machine; with more threads it includes OpenMP's spin-waiting). With
    ``--nouns-edges N > 0`` the epoch runs on a random subset of N edges and its seconds
    per batch are extrapolated to all edges (the table says so).
    """
    from hypermc.embed.train import TrainConfig, _Trainer

    nouns = _nouns_graph(args.nouns_csv)
    sub = nouns if args.nouns_edges <= 0 else nouns_subset(nouns, args.nouns_edges)
    full_batches = -(-nouns.num_edges // args.batch_size)
    factor = full_batches / -(-sub.num_edges // args.batch_size)
    warm = Graph.from_pairs([(f"c{i}", f"p{i % 3}") for i in range(12)] + [(f"p{j}", "root") for j in range(3)])
    if sub is nouns:
        what = "one full epoch"
    else:
        what = f"one epoch on {sub.num_edges} of {nouns.num_edges} edges, EXTRAPOLATED per batch to the full epoch"
    available = [d for d in args.devices if d == "cpu" or torch.cuda.is_available()]
    start, load = time.perf_counter(), os.getloadavg()[0]
    print(
        f"\nnouns epoch: {args.nouns_dim}-D halfspace, float64, batch {args.batch_size} ({full_batches} batches), "
        f"{DEFAULTS['negatives']} negatives, lr {args.lr}, burnin 0; {what}; wall seconds per device, CPU seconds of the process"
    )
    print(f"machine: {_machine()}; commit {_commit()}; load average {load:.2f} at the start")
    print(f"{'setting':>20} " + " ".join(f"{d + ' s/epoch':>15}" for d in args.devices) + f" {'cpu-time s/epoch':>17}")
    for label, nc, fast in EPOCH_SETTINGS:
        if args.nc and ("plain" if nc is None else str(nc)) not in args.nc:
            continue
        cells, cpu_time = [], "-"
        for device in args.devices:
            if device not in available:
                cells.append(f"{'skipped':>15}")
                continue
            kw = dict(dim=args.nouns_dim, nc=nc, dtype=torch.float64, epochs=1, lr=args.lr, burnin=0, seed=0, fast=fast, device=device)
            train(warm, PoincareHalfspace(), batch_size=4, negatives=3, progress=False, **kw)
            trainer = _Trainer(sub, PoincareHalfspace(), TrainConfig(batch_size=args.batch_size, **kw))
            c0 = time.process_time()
            stats = trainer.run_epoch(0)
            if device == "cpu":
                cpu_time = f"{(time.process_time() - c0) * factor:.2f}"
            cells.append(f"{stats['seconds'] * factor:15.2f}")
        print(f"{label:>20} " + " ".join(cells) + f" {cpu_time:>17}", flush=True)
    if len(available) < len(args.devices):
        print("cuda: skipped, CUDA is not available on this machine")
    print(f"wall time {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=["mammals", "nouns", "parallel", "devices", "epoch"], default=None, help="run one table")
    p.add_argument("--devices", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"], help="devices: where to time the epochs")
    p.add_argument("--nouns-csv", default=None, help="nouns closure CSV (default: built from WordNet)")
    p.add_argument("--nc", nargs="+", default=["plain", "1", "2", "3"], help="mammals and epoch: component counts (plain, 1, 2, 3)")
    p.add_argument("--epochs", type=int, default=8, help="mammals: epochs per setting (the first is dropped)")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1 is robust on a loaded machine)")
    p.add_argument("--nouns-edges", type=int, default=10240, help="nouns: edges of the timed subset")
    p.add_argument("--nouns-dim", type=int, default=10)
    p.add_argument(
        "--manifolds", nargs="+", default=["halfspace"], choices=sorted(MANIFOLDS), help="devices: the models timed (default: halfspace)"
    )
    p.add_argument("--lr", type=float, default=80.0, help="epoch: learning rate of the timed nouns epochs")
    p.add_argument("--parallel-epochs", type=int, default=5, help="2 ranks: epochs (the first is dropped)")
    p.add_argument(
        "--parallel-data",
        choices=["mammals", "nouns"],
        default="mammals",
        help="2 ranks: mammals, or the nouns edge subset of --nouns-edges",
    )
    p.add_argument("--nouns-one", nargs=2, metavar=("MANIFOLD", "NC"), help=argparse.SUPPRESS)
    p.add_argument("--parallel-rank", metavar="OUT", help=argparse.SUPPRESS)
    _results.add_argument(p)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.nouns_one:
        manifold, nc = args.nouns_one
        rec = nouns_one(manifold, None if nc == "plain" else int(nc), args.nouns_edges, args.batch_size, args.nouns_dim)
        print(json.dumps(rec))
        return
    if args.parallel_rank:
        parallel_rank(args.parallel_epochs, args.parallel_rank, args.parallel_data, args.nouns_edges, args.batch_size)
        return
    if args.only in (None, "mammals"):
        mammals_table(args)
    if args.only in (None, "nouns"):
        nouns_table(args)
    if args.only in (None, "parallel"):
        parallel_table(args)
    if args.only in (None, "devices"):
        devices_table(args)
    if args.only in (None, "epoch"):
        epoch_table(args)


if __name__ == "__main__":
    _results.run(main)
