"""The evaluator against a brute-force reference, chunking, sampling, ties and errors."""

from __future__ import annotations

import functools
import importlib
import math

import pytest
import torch

import hypermc as hm
from hypermc.embed import evaluate
from hypermc.manifolds import Lorentz, PoincareBall, PoincareHalfspace
from tests.embed.helpers import brute_force_metrics, tree_closure

F64 = torch.float64


@pytest.mark.parametrize("M", [PoincareHalfspace(), PoincareBall()], ids=["halfspace", "ball"])
@pytest.mark.parametrize("nc", [None, 2])
@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_matches_brute_force(M, nc, chunk, rng):
    g = tree_closure(3, 2)  # 15 nodes
    x = M.random(g.num_nodes, 2, std=1.5, nc=nc, dtype=F64, generator=rng)
    res = evaluate(M, x, g.edges, chunk_size=chunk)
    dist = M.dist(x[:, None], x[None])
    dist = dist.approx() if nc else dist
    ref_map, ref_mr = brute_force_metrics(dist, g.edges)
    assert res["map"] == pytest.approx(ref_map, rel=1e-12)
    assert res["mean_rank"] == pytest.approx(ref_mr, rel=1e-12)
    assert res["num_edges"] == g.num_edges and res["num_sources"] == res["total_sources"] == 14
    assert res["sample"] is None


@pytest.mark.parametrize("nc", [2, 3, 4])
@pytest.mark.parametrize("tile", [None, 5])
def test_fast_uses_the_fused_kernels_and_matches_brute_force(nc, tile, rng, monkeypatch):
    """``fast=True`` on the half-space: the fused distance kernel, tiles of ``FUSED_TILE_PAIRS``
    pairs (5: tiles cut through sources' rows), the same metrics as the reference."""
    from hypermc.manifolds.math import fused

    evaluate_module = importlib.import_module("hypermc.embed.evaluate")  # the module, not the function

    if not fused.available(F64, nc):
        pytest.skip(f"fused kernels unavailable: {fused.status(F64, nc)}")
    calls = []
    kernel = PoincareHalfspace.fused_dist_batch
    assert kernel is fused.halfspace
    spy = functools.wraps(kernel)(lambda *a, **k: calls.append(1) or kernel(*a, **k))
    monkeypatch.setattr(PoincareHalfspace, "fused_dist_batch", staticmethod(spy))
    if tile is not None:
        monkeypatch.setattr(evaluate_module, "FUSED_TILE_PAIRS", tile)
    g = tree_closure(3, 2)
    M = PoincareHalfspace()
    x = M.random(g.num_nodes, 3, std=1.5, nc=nc, dtype=F64, generator=rng)
    res = evaluate(M, x, g.edges, chunk_size=4, fast=True)
    ref_map, ref_mr = brute_force_metrics(M.dist(x[:, None], x[None]).approx(), g.edges)
    assert res["map"] == pytest.approx(ref_map, rel=1e-12)
    assert res["mean_rank"] == pytest.approx(ref_mr, rel=1e-12)
    # 14 sources in chunks of 4, 4, 4, 2, one tile of sources each; a tile spans all 15 nodes,
    # or with 5 pairs per tile 5 // 4 = 1 node (15 tiles) and 5 // 2 = 2 nodes (8 tiles)
    assert len(calls) == (4 if tile is None else 3 * 15 + 8)


@pytest.mark.parametrize("nc", [2, 3])
def test_fast_ball_matches_brute_force(nc, rng):
    """``fast=True`` on the ball: its fused kernel, the reference's metrics."""
    from hypermc.manifolds.math import fused

    if not fused.available(F64, nc, "ball"):
        pytest.skip(f"fused kernels unavailable: {fused.status(F64, nc, 'ball')}")
    g = tree_closure(3, 2)
    M = PoincareBall()
    x = M.random(g.num_nodes, 3, std=1.5, nc=nc, dtype=F64, generator=rng)
    res = evaluate(M, x, g.edges, chunk_size=4, fast=True)
    ref_map, ref_mr = brute_force_metrics(M.dist(x[:, None], x[None]).approx(), g.edges)
    assert res["map"] == pytest.approx(ref_map, rel=1e-12)
    assert res["mean_rank"] == pytest.approx(ref_mr, rel=1e-12)


@pytest.mark.parametrize("M, nc", [(Lorentz(), 2), (PoincareHalfspace(), None)], ids=["lorentz-nc2", "halfspace-plain"])
def test_fast_elsewhere_is_the_reference_path(M, nc, rng):
    """Models without fused kernels and plain tables: ``fast=True`` gives the same bits."""
    g = tree_closure(3, 2)
    x = M.random(g.num_nodes, 2, std=1.5, nc=nc, dtype=F64, generator=rng)
    a, b = evaluate(M, x, g.edges, fast=True), evaluate(M, x, g.edges)
    assert (a["map"], a["mean_rank"]) == (b["map"], b["mean_rank"])


def test_ties_and_collapsed_points():
    """Identical points tie; ranks count ties as half, AP counts them (sklearn)."""
    g = tree_closure(2, 2)  # 7 nodes
    x = torch.zeros(g.num_nodes, 2, dtype=F64)
    x[:, 1] = 1.0
    x[:3, 0] = torch.tensor([0.1, 0.2, 0.3], dtype=F64)
    M = PoincareHalfspace()
    res = evaluate(M, x, g.edges)
    ref_map, ref_mr = brute_force_metrics(M.dist(x[:, None], x[None]), g.edges)
    assert res["map"] == pytest.approx(ref_map, rel=1e-12)
    assert res["mean_rank"] == pytest.approx(ref_mr, rel=1e-12)


def test_perfect_embedding_scores_one():
    """A tree drawn so that every node is closer to its ancestors than to anything else."""
    g = tree_closure(1, 3)  # r with children r0 r1 r2
    M = PoincareBall()
    x = torch.zeros(4, 2, dtype=F64)
    angles = torch.tensor([0.0, 2.1, 4.2], dtype=F64)
    x[1:] = 0.5 * torch.stack([angles.cos(), angles.sin()], 1)
    res = evaluate(M, hm.mc(x, nc=2), g.edges)
    assert res["map"] == 1.0 and res["mean_rank"] == 1.0


def test_sample_is_stated_and_reproducible(rng):
    g = tree_closure(3, 3)
    M = PoincareHalfspace()
    x = M.random(g.num_nodes, 2, nc=2, dtype=F64, generator=rng)
    a = evaluate(M, x, g.edges, sample=10, seed=4)
    b = evaluate(M, x, g.edges, sample=10, seed=4, chunk_size=3)
    assert a["sample"] == 10 and a["num_sources"] == 10 and a["total_sources"] == 39
    assert a["map"] == b["map"] and a["mean_rank"] == b["mean_rank"]
    everything = evaluate(M, x, g.edges, sample=1000)
    assert everything["num_sources"] == 39


def test_errors():
    g = tree_closure(1, 2)
    M = PoincareHalfspace()
    x = torch.ones(3, 2, dtype=F64)
    with pytest.raises(TypeError, match="edges must be an"):
        evaluate(M, x, g.edges.float())
    with pytest.raises(ValueError, match="edge ids must lie in"):
        evaluate(M, x[:2], g.edges)
    with pytest.raises(ValueError, match="chunk_size"):
        evaluate(M, x, g.edges, chunk_size=0)
    x[1, 0] = float("nan")
    with pytest.raises(ValueError, match="inf or NaN in 1 rows"):
        evaluate(M, x, g.edges)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(chunk_size=0), ValueError, r"evaluate: chunk_size must be an int >= 1 or None; got 0"),
        (dict(sample=2.0), TypeError, r"evaluate: sample must be an int >= 1 or None; got float 2.0"),
        (dict(seed="0"), TypeError, r"evaluate: seed must be an int; got str '0'"),
        (dict(reduce=3), TypeError, r"evaluate: reduce must be callable \(e.g. DataParallel.sum\); got int"),
        (dict(shard=[0, 1]), TypeError, r"evaluate: shard must be an \(index, count\) tuple; got list"),
        (dict(shard=(0, 1, 2)), ValueError, r"evaluate: shard must be an \(index, count\) tuple; got \(0, 1, 2\)"),
        (dict(shard=(0, 0)), ValueError, r"evaluate: shard\[1\] must be an int >= 1; got 0"),
        (dict(shard=(2, 2)), ValueError, r"evaluate: shard\[0\] must be an int in \[0, 1\]; got 2"),
        (dict(fast=1), TypeError, r"evaluate: fast must be True or False; got int"),
    ],
)
def test_argument_checks(kwargs, exc, match):
    g = tree_closure(1, 2)
    with pytest.raises(exc, match=match):
        evaluate(PoincareHalfspace(), torch.ones(3, 2, dtype=F64), g.edges, **kwargs)
    with pytest.raises(TypeError, match=r"evaluate: manifold must be a hypermc manifold; got str"):
        evaluate("halfspace", torch.ones(3, 2, dtype=F64), g.edges)


def test_memory_budget_and_sampled_sources(rng):
    from hypermc.embed.evaluate import BYTES_PER_CANDIDATE

    g = tree_closure(3, 3)  # 40 nodes, 39 sources
    M = PoincareHalfspace()
    x = M.random(g.num_nodes, 2, nc=2, dtype=F64, generator=rng)
    whole = evaluate(M, x, g.edges)
    assert whole["sampled_sources"] is None and whole["chunk_size"] >= 39
    small = evaluate(M, x, g.edges, memory_budget=BYTES_PER_CANDIDATE * g.num_nodes * 3)
    assert small["chunk_size"] == 3
    assert small["map"] == pytest.approx(whole["map"], rel=1e-14) and small["mean_rank"] == whole["mean_rank"]
    part = evaluate(M, x, g.edges, sample=10, seed=1)
    assert part["sampled_sources"] == "10 of 39"
    with pytest.raises(ValueError, match=r"evaluate: memory_budget must be an int >= 1 or None; got 0"):
        evaluate(M, x, g.edges, memory_budget=0)


def test_no_n_by_n_tensor(monkeypatch, rng):
    """Every distance call is a tile; a chunk holds chunk x N, never N x N."""
    ev = importlib.import_module("hypermc.embed.evaluate")  # the module, not the function
    dm = importlib.import_module("hypermc.embed.distance")
    g = tree_closure(4, 3)  # 121 nodes
    M = PoincareBall()
    x = M.random(g.num_nodes, 3, nc=2, dtype=F64, generator=rng)
    sizes = []
    real = dm.batch_distance

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        sizes.append(out.numel())
        return out

    monkeypatch.setattr(dm, "batch_distance", spy)
    monkeypatch.setattr(ev, "TILE_ELEMENTS", 3 * 40)  # tiles of (<= 2 sources) x 20 nodes
    res = evaluate(M, x, g.edges, chunk_size=2)
    assert max(sizes) <= 40 and len(sizes) > g.num_nodes
    monkeypatch.setattr(dm, "batch_distance", real)
    ref = evaluate(M, x, g.edges)
    assert res["map"] == pytest.approx(ref["map"], rel=1e-14) and res["mean_rank"] == ref["mean_rank"]


def test_shards_add_up_to_the_whole(rng):
    """The data-parallel evaluation: every rank a share of the chunks, partial sums reduced."""
    g = tree_closure(3, 2)
    M = PoincareHalfspace()
    x = M.random(g.num_nodes, 2, nc=2, dtype=F64, generator=rng)
    whole = evaluate(M, x, g.edges, chunk_size=2)
    partial = []
    for index in range(3):
        evaluate(M, x, g.edges, chunk_size=2, shard=(index, 3), reduce=lambda t: partial.append(t) or t)
    total = sum(partial)
    merged = evaluate(M, x, g.edges, chunk_size=2, reduce=lambda t: total)
    assert merged["map"] == pytest.approx(whole["map"], rel=1e-14)
    assert merged["mean_rank"] == pytest.approx(whole["mean_rank"], rel=1e-14)
    assert merged["num_edges"] == whole["num_edges"] == g.num_edges


# ----------------------------------------------- low-precision tables: float64 ranks


def _exact_ball_distances(x) -> torch.Tensor:
    """Ball distances of the stored points (exact values of their components), in mpmath."""
    import mpmath

    from tests.oracle import components_to_fraction

    comps = x.components if isinstance(x, hm.MCTensor) else x.unsqueeze(-1)
    pts = [[mpmath.mpf(v.numerator) / v.denominator for v in row] for row in components_to_fraction(comps).tolist()]
    n = len(pts)
    out = torch.zeros(n, n, dtype=F64)
    with mpmath.workdps(60):
        sq = [mpmath.fsum(v * v for v in p) for p in pts]
        for i in range(n):
            for j in range(i + 1, n):
                diff = mpmath.fsum((a - b) ** 2 for a, b in zip(pts[i], pts[j]))
                d = mpmath.acosh(1 + 2 * diff / ((1 - sq[i]) * (1 - sq[j])))
                out[i, j] = out[j, i] = float(d)
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("nc", [None, 2, 3])
def test_low_precision_tables_rank_the_stored_points_exactly(dtype, nc, rng):
    """Ranks of float16/bfloat16/float32 points (plain or MC) are those of the exact distances."""
    g = tree_closure(3, 3)  # 40 nodes
    M = PoincareBall()
    x64 = M.random(g.num_nodes, 2, std=0.6, nc=None, dtype=F64, generator=rng)
    x = x64.to(dtype) if nc is None else hm.mc(x64, nc=nc, dtype=dtype)
    before = x.components.clone() if nc else x.clone()
    res = evaluate(M, x, g.edges)
    assert x.dtype == dtype and torch.equal(x.components if nc else x, before)  # the caller's table is untouched
    ref_map, ref_mr = brute_force_metrics(_exact_ball_distances(x), g.edges)
    assert res["map"] == pytest.approx(ref_map, rel=1e-12)
    assert res["mean_rank"] == pytest.approx(ref_mr, rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float16_mean_rank_above_the_float16_range_is_finite_and_exact(dtype, rng):
    """1252 edges of rank ~200: the float16 sum of the ranks was inf (bfloat16: rounded)."""
    g = tree_closure(4, 4)  # 341 nodes
    M = PoincareBall()
    x = M.random(g.num_nodes, 2, std=0.5, nc=None, dtype=F64, generator=rng).to(dtype)
    res = evaluate(M, x, g.edges)
    wide = evaluate(M, x.to(F64), g.edges)  # the same points, widened exactly
    assert math.isfinite(res["mean_rank"]) and res["mean_rank"] > 100
    assert (res["map"], res["mean_rank"]) == (wide["map"], wide["mean_rank"])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_widening_keeps_every_value(dtype, nc, rng):
    from hypermc.embed.evaluate import _widened
    from tests.oracle import components_to_fraction

    x = hm.mc(torch.randn(200, dtype=F64, generator=rng) * torch.exp2(torch.randint(-12, 12, (200,), generator=rng)), nc=nc, dtype=dtype)
    x = x * hm.mc(torch.tensor(1.0, dtype=F64) / 3, nc=nc, dtype=dtype)  # full tails
    wide = _widened(x.components)
    assert wide.dtype == F64 and wide.shape == x.components.shape
    assert components_to_fraction(wide).tolist() == components_to_fraction(x.components).tolist()
