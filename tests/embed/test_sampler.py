"""Alias table and negative sampler: distribution, FB rejection semantics, masking,
determinism."""

from __future__ import annotations

import pytest
import torch

from hypermc.data import Graph
from hypermc.embed.sampler import AliasTable, NegativeSampler, target_counts
from tests.embed.helpers import tree_closure


def test_alias_table_is_the_distribution(rng):
    w = torch.tensor([1.0, 0.0, 3.0, 0.5, 10.0, 2.5], dtype=torch.float64)
    table = AliasTable(w)
    torch.testing.assert_close(table.probabilities(), w / w.sum(), rtol=1e-12, atol=1e-15)
    draws = table.sample((200_000,), generator=rng)
    freq = torch.bincount(draws, minlength=6).double() / draws.numel()
    assert freq[1] == 0
    torch.testing.assert_close(freq, w / w.sum(), atol=5e-3, rtol=0)


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [0.0, 0.0], [1.0, float("nan")]])
def test_alias_table_rejects_bad_weights(bad):
    with pytest.raises(ValueError, match="AliasTable"):
        AliasTable(torch.tensor(bad, dtype=torch.float64))


def test_negatives_follow_fb_semantics(rng):
    g = tree_closure(3, 3)  # 40 nodes, leaves have 3 ancestors
    s = NegativeSampler(g.edges, g.num_nodes, negatives=30)
    src = g.edges[:, 0].repeat(4)
    for burnin in (False, True):
        neg, valid = s.sample(src, generator=rng, burnin=burnin)
        assert neg.shape == valid.shape == (src.numel(), 30) and neg.dtype == torch.int64
        assert bool(valid.all())  # plenty of candidates: nothing masked
        assert not bool((neg == src[:, None]).any())
        keys = set((g.edges[:, 0] * g.num_nodes + g.edges[:, 1]).tolist())
        assert not any(k in keys for k in (src[:, None] * g.num_nodes + neg).reshape(-1).tolist())


def test_impossible_slots_are_masked(rng):
    # "a" is a child of every other node: it has no valid negative at all; "b" has one.
    g = Graph.from_pairs([("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")])
    s = NegativeSampler(g.edges, g.num_nodes, negatives=8, max_rounds=20)
    src = torch.tensor([g.node_id("a"), g.node_id("b")])
    neg, valid = s.sample(src, generator=rng)
    assert not bool(valid[0].any())
    assert bool((neg[1][valid[1]] == g.node_id("a")).all())
    assert int(valid[1].sum()) >= 6  # 1/4 chance per draw, 21 rounds
    s0 = NegativeSampler(g.edges, g.num_nodes, negatives=8, max_rounds=0)
    _, valid0 = s0.sample(src, generator=rng)
    assert not bool(valid0[0].any())


def test_burnin_draws_by_target_count(rng):
    g = tree_closure(3, 3)
    s = NegativeSampler(g.edges, g.num_nodes, negatives=50)
    counts = target_counts(g.edges, g.num_nodes)
    assert counts[g.node_id("r")] == 1 + 39 and counts[g.node_id("r000")] == 1
    draws = s.draw((400_000,), generator=rng, burnin=True)
    freq = torch.bincount(draws, minlength=g.num_nodes).double() / draws.numel()
    expected = counts**0.75 / (counts**0.75).sum()
    torch.testing.assert_close(freq, expected, atol=3e-3, rtol=0)
    uniform = torch.bincount(s.draw((400_000,), generator=rng, burnin=False), minlength=g.num_nodes)
    torch.testing.assert_close(uniform.double() / 400_000, torch.full((40,), 1 / 40, dtype=torch.float64), atol=3e-3, rtol=0)


def test_sampling_is_reproducible():
    g = tree_closure(2, 3)
    s = NegativeSampler(g.edges, g.num_nodes, negatives=5)
    a = s.sample(g.edges[:, 0], generator=torch.Generator().manual_seed(3), burnin=True)
    b = s.sample(g.edges[:, 0], generator=torch.Generator().manual_seed(3), burnin=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_sampler_argument_errors():
    g = tree_closure(1, 2)
    with pytest.raises(ValueError, match="negatives must be an int >= 1"):
        NegativeSampler(g.edges, g.num_nodes, negatives=0)
    with pytest.raises(ValueError, match="max_rounds"):
        NegativeSampler(g.edges, g.num_nodes, max_rounds=-1)
    with pytest.raises(ValueError, match=r"edges must be an \(E, 2\) int64"):
        NegativeSampler(g.edges.int(), g.num_nodes)


def test_near_negatives_are_other_descendants_of_the_target(rng):
    """The last ``near`` slots hold nodes below the positive's target, uniformly, never
    the source, its ancestors or its descendants; burn-in has no near slots."""
    g = tree_closure(3, 3)  # 40 nodes; r -> 3 children -> 9 -> 27 leaves
    s = NegativeSampler(g.edges, g.num_nodes, negatives=12, near=8)
    keys = set((g.edges[:, 0] * g.num_nodes + g.edges[:, 1]).tolist())
    below = {v: {int(w) for w in g.edges[g.edges[:, 1] == v, 0]} for v in range(g.num_nodes)}
    pairs = g.edges.repeat(50, 1)
    src, dst = pairs[:, 0], pairs[:, 1]
    neg, valid = s.sample(src, dst=dst, generator=rng)
    assert neg.shape == (pairs.shape[0], 12)
    for i in range(0, pairs.shape[0], 7):
        u, v = int(src[i]), int(dst[i])
        allowed = {w for w in below[v] - below[u] if w != u and u * g.num_nodes + w not in keys}
        near = set(neg[i, 4:][valid[i, 4:]].tolist())
        assert near <= allowed, (u, v, near, allowed)
        assert valid[i, 4:].all() == bool(allowed)  # masked exactly where nothing is allowed
        for w in neg[i][valid[i]].tolist():
            assert w != u and u * g.num_nodes + w not in keys
    # a leaf under its grandparent: the grandparent's 12 descendants less the leaf and
    # its parent (the 2 siblings of the leaf and 2 subtrees of 4 nodes), uniformly
    leaf, grand = g.node_id("r000"), g.node_id("r0")
    allowed = sorted(w for w in below[grand] if w != leaf and leaf * g.num_nodes + w not in keys)
    assert len(allowed) == 10
    many, ok = s.sample(torch.full((20_000,), leaf), dst=torch.full((20_000,), grand), generator=rng)
    assert bool(ok.all())
    freq = torch.bincount(many[:, 4:].reshape(-1), minlength=g.num_nodes).double()
    freq = freq[allowed] / freq.sum()
    torch.testing.assert_close(freq, torch.full_like(freq, 1 / len(allowed)), atol=5e-3, rtol=0)
    # burn-in: unigram everywhere, and no dst needed
    nb, vb = s.sample(src, generator=rng, burnin=True)
    assert nb.shape == (src.numel(), 12) and int(vb.sum()) > 0.9 * vb.numel()


def test_near_negatives_are_reproducible_and_checked():
    g = tree_closure(2, 3)
    s = NegativeSampler(g.edges, g.num_nodes, negatives=5, near=2)
    a = s.sample(g.edges[:, 0], dst=g.edges[:, 1], generator=torch.Generator().manual_seed(3))
    b = s.sample(g.edges[:, 0], dst=g.edges[:, 1], generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match=r"dst must be the \(B,\) targets of the positive edges when near=2; got None"):
        s.sample(g.edges[:, 0], generator=torch.Generator())
    with pytest.raises(ValueError, match=r"dst must be .* got \(3,\) for src of shape"):
        s.sample(g.edges[:, 0], dst=g.edges[:3, 1], generator=torch.Generator())
    with pytest.raises(ValueError, match=r"near must be an int in \[0, negatives=5\], got 6"):
        NegativeSampler(g.edges, g.num_nodes, negatives=5, near=6)
    with pytest.raises(ValueError, match="built with near=0"):
        NegativeSampler(g.edges, g.num_nodes, negatives=5).draw_near(g.edges[:, 1], generator=None)


def test_cpu_segment_search_is_searchsorted(monkeypatch):
    """The CPU kernel (each child's own keys) gives searchsorted's booleans, ids out of
    range included (their key may be a real one), and the same negatives."""
    from hypermc.embed import sampler as sampler_module
    from hypermc.mcf import native, registry

    if native._compiler() is not None and not registry.disabled():
        assert sampler_module._library() is not None  # the kernel runs below
    g = tree_closure(3, 4)
    s = NegativeSampler(g.edges, g.num_nodes, negatives=20)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(-3, g.num_nodes + 3, (400, 1), generator=gen)
    dst = torch.randint(-3, g.num_nodes + 3, (400, 7), generator=gen)
    src[:50, 0], dst[:50, 0] = g.edges[:50, 0], g.edges[:50, 1]
    fused = s.is_edge(src, dst)
    first = s.sample(g.edges[:, 0], generator=torch.Generator().manual_seed(1))
    monkeypatch.setattr(sampler_module, "_library", lambda: None)
    plain = s.is_edge(src, dst)
    assert bool(plain[:50, 0].all()) and torch.equal(fused, plain) and fused.shape == (400, 7)
    second = s.sample(g.edges[:, 0], generator=torch.Generator().manual_seed(1))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


@pytest.mark.cuda
def test_cuda_is_edge_matches_the_cpu():
    g = tree_closure(3, 4)
    cpu = NegativeSampler(g.edges, g.num_nodes, negatives=5)
    gpu = NegativeSampler(g.edges.cuda(), g.num_nodes, negatives=5)
    src = torch.randint(-3, g.num_nodes + 3, (300, 1), generator=torch.Generator().manual_seed(0))
    dst = torch.randint(-3, g.num_nodes + 3, (300, 6), generator=torch.Generator().manual_seed(1))
    assert torch.equal(gpu.is_edge(src.cuda(), dst.cuda()).cpu(), cpu.is_edge(src, dst))
