"""Benchmark / study: combinatorial tree embeddings (``hypermc.embed.embed_tree``) by precision.

One table, one row per (tree, dim, setting, nc):

* trees: mammals (1,180 nodes, depth 9) in 2-D and 10-D; WordNet nouns (82,115 nodes,
  depth 19; needs WordNet, see DATA.md; skipped with the reason otherwise) in 2-D; and a
  balanced 5-ary tree of depth 6 (19,531 nodes) in 2-D at ``tau = 8`` and ``eps = 0.2``
  (nc 1, 2, auto), sampled like the nouns;
* settings: ``eps=1`` and ``eps=0.1`` (``tau`` from :func:`~hypermc.embed.construct.tau_for_epsilon`)
  and ``fitted``: :func:`~hypermc.embed.fit_tau` per ``nc`` -- the ``tau`` on the grid
  ``max_tau(depth, nc) * 2^(-k/2)``, ``k = 0..steps-1`` with the smallest ``D_avg`` on
  sampled pairs (for ``nc=auto`` the grid starts at the radius limit instead);
* nc 1..4 and ``auto`` (the ``nc`` that :func:`~hypermc.embed.components_needed` picks;
  when it is one of 1..4 that row says ``(auto)``).

Columns: ``tau``, ``nc``, the bits the rule asks for, ``seconds`` (``embed_tree`` wall
clock; mammals: median of 3 calls in a warm process, the first call of the process is
printed in the header), ``D_avg`` / ``D_wc`` against spanning-tree distances (mammals:
all 695,610 pairs; nouns: ``--nouns-pairs`` sampled source nodes against every node, the
row says how many pairs), tree-neighbour MAP and closure MAP (nouns: ``--nouns-eval``
sampled source nodes). A setting that is refused prints the reason instead of numbers
(``nc`` too small: the ``nc`` needed; radius beyond the limit; no ``tau`` fits ``nc``).

Two extra rows on mammals 2-D ``eps=1``:

* ``auto rounded to nc=1``: the MC construction rounded to plain float64 -- how many points
  land on the boundary (``1 - |x|^2 <= 0``) and what the distortion then is, i.e. what a
  float64 construction at this ``tau`` would have;
* ``mpmath reference``: :func:`hypermc.embed.construct_reference.reference_construction`
  (a loop per node in mpmath at ``nc * 53 + 60`` bits), its ``D_avg`` / ``D_wc`` on the pairs of
  ``--ref-sources`` sampled source nodes next to the MC construction's on the same pairs,
  and the largest relative difference of the MC and mpmath distances.

Usage::

    python benchmarks/bench_construct.py                 # everything (a few minutes)
    python benchmarks/bench_construct.py --quick         # mammals 2-D only, fewer grid points
    python benchmarks/bench_construct.py --only nouns --nouns-pairs 100 --nouns-eval 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

from hypermc import _results
from hypermc.data import Graph, WordNetNotFoundError, load_mammals, wordnet_closure
from hypermc.embed import distortion, embed_tree, fit_tau, spanning_tree
from hypermc.embed.construct_reference import ball_distance, reference_construction

NCS = [1, 2, 3, 4, "auto"]
HEAD = (
    f"{'tree':<8} {'dim':>3} {'setting':<8} {'tau':>8} {'nc':>9} {'bits':>5} {'seconds':>8} "
    f"{'D_avg':>8} {'D_wc':>8} {'treeMAP':>8} {'clMAP':>7}  note"
)


def row(tree, dim, setting, tau="", nc="", bits="", seconds="", d=None, note=""):
    def f(v, w, p):
        return f"{v:>{w}.{p}f}" if isinstance(v, float) else f"{v!s:>{w}}"

    d = d or {}
    print(
        f"{tree:<8} {dim:>3} {setting:<8} {f(tau, 8, 3)} {nc!s:>9} {bits!s:>5} {f(seconds, 8, 3)} "
        f"{f(d.get('d_avg', ''), 8, 4)} {f(d.get('d_wc', ''), 8, 4)} {f(d.get('tree_map', ''), 8, 4)} "
        f"{f(d.get('closure_map', ''), 7, 4)}  {note}",
        flush=True,
    )


def measure(graph, dim, nc, args, big, **scale):
    """embed_tree (timed: median of 3 calls, 1 for nouns) and distortion."""
    times, r = [], None
    for _ in range(1 if big else 3):
        start = time.perf_counter()
        r = embed_tree(graph, dim=dim, nc=nc, **scale)
        times.append(time.perf_counter() - start)
    kw = dict(pairs=args.nouns_pairs, tree_sample=args.nouns_eval, closure_sample=args.nouns_eval) if big else {}
    d = distortion(r["embeddings"], graph, tau=r["tau"], **kw)
    note = []
    if d["sampled_sources"]:
        note.append(f"D over {d['num_pairs']:,} pairs ({d['sampled_sources']} sources)")
    if d.get("tree_sampled_sources"):
        note.append(f"MAPs over {d['tree_sampled_sources']} sources")
    return r, statistics.median(times), d, "; ".join(note)


def study(name, graph, dim, args, big=False):
    for eps in (1.0, 0.1):
        setting = f"eps={eps:g}"
        try:
            auto = measure(graph, dim, "auto", args, big, epsilon=eps)
        except ValueError as err:  # the radius: refused whatever nc
            row(name, dim, setting, nc="any", note=f"refused: {err}")
            continue
        r = auto[0]
        for nc in range(1, min(r["nc"], 4) + 1) if r["nc"] <= 4 else range(1, 5):
            if nc == r["nc"]:
                break
            try:
                _, sec, d, note = measure(graph, dim, nc, args, big, epsilon=eps)
                row(name, dim, setting, r["tau"], nc, r["bits_needed"], sec, d, note)
            except ValueError as err:
                row(name, dim, setting, r["tau"], nc, r["bits_needed"], note=f"refused: {err}")
        row(name, dim, setting, r["tau"], f"{r['nc']} (auto)", r["bits_needed"], *auto[1:])
        if setting == "eps=1" and name == "mammals" and dim == 2:
            rounded_row(name, dim, graph, r)
            reference_row(name, dim, graph, r, args)
    steps = args.nouns_steps if big else args.steps
    for nc in NCS:
        try:
            fit = fit_tau(graph, dim=dim, nc=nc, steps=steps, pairs=args.fit_pairs)
        except ValueError as err:
            row(name, dim, "fitted", nc=nc, note=f"refused: {err}")
            continue
        r, sec, d, note = measure(graph, dim, nc, args, big, tau=fit["tau"])
        grid = ", ".join(f"{t:.4g}:{v:.4f}" for t, v in fit["grid"])
        label = f"{r['nc']} (auto)" if nc == "auto" else nc
        row(
            name,
            dim,
            "fitted",
            fit["tau"],
            label,
            r["bits_needed"],
            sec,
            d,
            "; ".join(filter(None, [note, f"grid tau:D_avg ({fit['sampled_sources']} sources) {grid}"])),
        )


def rounded_row(name, dim, graph, auto, setting="eps=1"):
    comps = auto["embeddings"].components
    x = comps.sum(-1)  # nearest float64 of each coordinate (round-to-nearest of the MC sum)
    deficit = 1 - (x * x).sum(-1)
    on_boundary = int((deficit <= 0).sum())
    note = f"{on_boundary} of {graph.num_nodes} points have 1-|x|^2 <= 0 in float64"
    try:
        d = distortion(x, graph, tau=auto["tau"])
        row(name, dim, setting, auto["tau"], "1 (rounded)", "", "", d, note)
    except ValueError as err:
        row(name, dim, setting, auto["tau"], "1 (rounded)", "", "", None, f"{note}; distortion: {err}")


def reference_row(name, dim, graph, auto, args):
    import mpmath

    parent, _ = spanning_tree(graph)
    nc, tau = auto["nc"], auto["tau"]
    prec = nc * 53 + 60
    start = time.perf_counter()
    ref = reference_construction(parent.tolist(), tau, prec)
    ref_sec = time.perf_counter() - start
    d = distortion(auto["embeddings"], graph, tau=tau, pairs=args.ref_sources, seed=0, maps=False)
    # the same pairs as distortion(pairs=k, seed=0): its documented source sample
    n = graph.num_nodes
    sources = np.sort(np.random.default_rng(0).choice(n, size=args.ref_sources, replace=False))
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    p = parent.numpy()
    kids = np.nonzero(p >= 0)[0]
    dt = shortest_path(coo_matrix((np.ones(kids.size), (kids, p[kids])), shape=(n, n)), directed=False, unweighted=True, indices=sources)
    from hypermc.embed.construct import _pair_dist

    comps = auto["embeddings"].components
    x = auto["embeddings"]
    a = (1 - (x * x).sum(-1)).approx()
    ratios, worst = [], 0.0
    with mpmath.workprec(prec):
        for si, s in enumerate(sources):
            js = np.nonzero(dt[si] > 0)[0]
            mc_d = _pair_dist(comps, a, torch.full((js.size,), int(s)), torch.from_numpy(js)).tolist()
            for j, md in zip(js, mc_d):
                dh = ball_distance(ref[s], ref[j], prec)
                ratios.append(dh / dt[si, j])
                worst = max(worst, float(abs(md / dh - 1)))
        t = mpmath.mpf(tau)
        d_avg = float(sum(abs(q / t - 1) for q in ratios) / len(ratios))
        d_wc = float(max(ratios) / min(ratios))
    row(
        name,
        dim,
        "eps=1",
        tau,
        f"mpmath {prec}b",
        "",
        ref_sec,
        {"d_avg": d_avg, "d_wc": d_wc},
        f"reference on {len(ratios):,} pairs ({args.ref_sources} sources); MC on the same pairs: "
        f"D_avg {d['d_avg']:.6g} vs {d_avg:.6g}, D_wc {d['d_wc']:.6g} vs {d_wc:.6g}; "
        f"max rel. distance difference {worst:.1e}",
    )


def balanced(branching: int, depth: int) -> Graph:
    """Balanced tree: node i > 0 has parent (i - 1) // branching (names sort like ids)."""
    n = sum(branching**k for k in range(depth + 1))
    edges = torch.tensor([[i, (i - 1) // branching] for i in range(1, n)], dtype=torch.int64)
    return Graph(tuple(f"b{i:06d}" for i in range(n)), edges)


def balanced_rows(args):
    """5-ary tree of depth 6 (19,531 nodes), 2-D: tau = 8 and eps = 0.2 (tau 8.32)."""
    g = balanced(5, 6)
    name = "5-ary^6"
    for setting, scale in (("tau=8", {"tau": 8.0}), ("eps=0.2", {"epsilon": 0.2})):
        auto = None
        for nc in (1, 2, "auto"):
            try:
                r, sec, d, note = measure(g, 2, nc, args, True, **scale)
                row(name, 2, setting, r["tau"], f"{r['nc']} (auto)" if nc == "auto" else nc, r["bits_needed"], sec, d, note)
                auto = r if nc == "auto" else auto
            except ValueError as err:
                row(name, 2, setting, "", nc, "", note=f"refused: {err}")
        if setting == "tau=8" and auto is not None:
            rounded_row(name, 2, g, auto, setting)


def header(args):
    print(
        f"{_results.commit()}; torch {torch.__version__}; "
        f"{platform.machine()} {os.cpu_count()} CPUs; threads {torch.get_num_threads()}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="mammals 2-D only, 2 grid points")
    ap.add_argument("--only", choices=["mammals", "nouns", "balanced"], default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4, help="fit_tau grid points (mammals)")
    ap.add_argument("--nouns-steps", type=int, default=2, help="fit_tau grid points (nouns)")
    ap.add_argument("--fit-pairs", type=int, default=100, help="sampled source nodes for fit_tau's D_avg")
    ap.add_argument("--nouns-pairs", type=int, default=50, help="sampled source nodes for nouns D_avg/D_wc")
    ap.add_argument("--nouns-eval", type=int, default=500, help="sampled source nodes for nouns MAPs")
    ap.add_argument("--ref-sources", type=int, default=20, help="source nodes for the mpmath comparison")
    _results.add_argument(ap)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.steps = 2
    start = time.perf_counter()
    header(args)
    print(HEAD)
    if args.only in (None, "mammals"):
        g = load_mammals()
        t0 = time.perf_counter()
        embed_tree(g, dim=2, epsilon=1.0)
        print(
            f"# first embed_tree call of the process (mammals 2-D eps=1): {time.perf_counter() - t0:.3f} s "
            f"(one-time initialisation); the seconds column is the median of 3 later calls"
        )
        study("mammals", g, 2, args)
        if not args.quick:
            study("mammals", g, 10, args)
    if args.only in (None, "balanced") and not args.quick:
        balanced_rows(args)
    if args.only in (None, "nouns") and not args.quick:
        try:
            g = wordnet_closure(None)
        except WordNetNotFoundError as err:
            print(f"nouns: skipped ({err})")
        else:
            study("nouns", g, 2, args, big=True)
    print(f"# total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    _results.run(main)
