"""Negative sampling for hierarchy embeddings (poincare-embeddings semantics).

A training example is a true edge ``(u, v)`` (child ``u``, ancestor ``v``) plus
``negatives`` corrupted edges ``(u, v')`` in which only the **target slot** is replaced.
A candidate ``v'`` is rejected when ``v' == u`` or when ``(u, v')`` is itself a true edge
(so the positive ``v`` and every other ancestor of ``u`` are rejected too). Candidates
come from

* an :class:`AliasTable` over ``count(n) ** 0.75`` during burn-in, where ``count(n) = 1
  + (total weight of the edges whose target is n)`` -- the smoothed unigram
  distribution of the target slot, as in word2vec;
* the uniform distribution over all nodes afterwards; with ``near = k`` (after burn-in),
  the last ``k`` of each row's candidates are drawn instead among the **other
  descendants of the positive target** ``v``: the sources ``w`` of the edges ``(w, v)``,
  uniformly, rejecting ``u``'s own descendants as well (the edges ``(w, u)``: they are
  pulled towards ``u`` by their own positives). These are ``u``'s siblings and cousins
  under ``v``, the nodes that compete with ``v`` in ``u``'s ranking and that uniform
  draws over a large graph rarely hit. A rejected near slot is redrawn from the same
  set; where that set holds no valid node, the slot ends masked.

Everything is vectorised over the batch: a batch draws ``(B, negatives)`` candidates at
once, tests them against the sorted edge keys ``u * N + v`` with one ``searchsorted``,
and redraws only the rejected slots, at most ``max_rounds`` times. Slots still rejected
after that are returned with ``valid = False``; the trainer masks them out of the
softmax (their logit is ``-inf``), so a node whose ancestors cover almost the whole graph
simply gets fewer negatives instead of wrong ones. All randomness comes from the
``torch.Generator`` passed in, so sampling is reproducible and checkpointable.
"""

from __future__ import annotations

import ctypes

import torch

from ..mcf import native

__all__ = ["AliasTable", "NegativeSampler", "edge_keys", "target_counts"]

#: Exponent of the unigram counts of the burn-in distribution (word2vec's 3/4).
UNIGRAM_POWER = 0.75
#: Default number of redraw rounds for rejected candidates before they are masked.
MAX_ROUNDS = 10


class AliasTable:
    """Walker's alias method: O(1) draws from a fixed discrete distribution.

    Built with Vose's algorithm (exact in float64 up to rounding of the scaled
    probabilities); sampling is vectorised: one uniform bucket and one uniform number per
    draw.

    Args:
        weights: ``(N,)`` non-negative finite weights, not all zero (need not sum to 1).
            The table is built on the CPU and stored on ``weights.device``, where
            :meth:`sample` draws (with a generator on that device).

    Raises:
        ValueError: if ``weights`` is empty, negative, non-finite or all zero.

    Example:
        >>> table = AliasTable(torch.tensor([1.0, 3.0]))
        >>> table.probabilities()
        tensor([0.2500, 0.7500], dtype=torch.float64)
        >>> draws = table.sample((10000,), generator=torch.Generator().manual_seed(0))
        >>> draws.shape, draws.dtype, abs((draws == 1).double().mean().item() - 0.75) < 0.02
        (torch.Size([10000]), torch.int64, True)
    """

    def __init__(self, weights: torch.Tensor):
        device = weights.device if isinstance(weights, torch.Tensor) else torch.device("cpu")
        w = torch.as_tensor(weights, dtype=torch.float64).reshape(-1).cpu()
        if w.numel() == 0:
            raise ValueError("AliasTable: weights must not be empty")
        if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
            raise ValueError("AliasTable: weights must be finite and non-negative")
        total = float(w.sum())
        if total <= 0:
            raise ValueError("AliasTable: at least one weight must be positive")
        n = w.numel()
        scaled = (w * (n / total)).tolist()
        prob = [0.0] * n
        alias = list(range(n))
        small = [i for i, p in enumerate(scaled) if p < 1.0]
        large = [i for i, p in enumerate(scaled) if p >= 1.0]
        while small and large:
            s, big = small.pop(), large.pop()
            prob[s] = scaled[s]
            alias[s] = big
            scaled[big] = (scaled[big] + scaled[s]) - 1.0
            (small if scaled[big] < 1.0 else large).append(big)
        for i in small + large:  # leftovers are 1 up to rounding
            prob[i] = 1.0
        #: ``(N,)`` float64 acceptance probability of each bucket.
        self.prob = torch.tensor(prob, dtype=torch.float64, device=device)
        #: ``(N,)`` int64 alias of each bucket.
        self.alias = torch.tensor(alias, dtype=torch.int64, device=device)

    def __len__(self) -> int:
        return self.prob.numel()

    def probabilities(self) -> torch.Tensor:
        """The distribution the table samples from, ``(N,)`` float64 (for tests)."""
        n = len(self)
        p = self.prob / n
        return p.index_add(0, self.alias, (1 - self.prob) / n)

    def sample(self, shape: tuple[int, ...], *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw indices of the given shape (int64)."""
        device = self.prob.device
        bucket = torch.randint(len(self), shape, generator=generator, device=device)
        coin = torch.rand(shape, dtype=torch.float64, generator=generator, device=device)
        return torch.where(coin < self.prob[bucket], bucket, self.alias[bucket])


def edge_keys(edges: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Sorted unique keys ``child * num_nodes + parent`` of an ``(E, 2)`` edge tensor.

    Example:
        >>> edge_keys(torch.tensor([[2, 0], [1, 0], [2, 0]]), num_nodes=3)
        tensor([3, 6])
    """
    return torch.unique(edges[:, 0] * num_nodes + edges[:, 1])


def target_counts(edges: torch.Tensor, num_nodes: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``1 +`` the total weight of the edges pointing at each node (``(N,)`` float64).

    Example:
        >>> edges = torch.tensor([[1, 0], [2, 0], [2, 1]])
        >>> target_counts(edges, 3)
        tensor([3., 2., 1.], dtype=torch.float64)
        >>> target_counts(edges, 3, weights=torch.tensor([0.5, 0.5, 2.0]))
        tensor([2., 3., 1.], dtype=torch.float64)
    """
    w = None if weights is None else weights.to(torch.float64)
    return 1.0 + torch.bincount(edges[:, 1], weights=w, minlength=num_nodes).to(torch.float64)


class NegativeSampler:
    """Vectorised negative sampler with the semantics of the module docstring.

    Args:
        edges: ``(E, 2)`` int64 ``(child, parent)`` ids (the true edges).
        num_nodes: number of nodes ``N``.
        negatives: candidates per positive edge.
        weights: optional ``(E,)`` edge weights (for the burn-in counts).
        max_rounds: redraw rounds for rejected candidates before they are masked.
        near: how many of the ``negatives`` are drawn among the other descendants of the
            positive target after burn-in (``0 <= near <= negatives``; needs ``dst`` in
            :meth:`sample`).

    Every table (edge keys, alias table) lives on ``edges.device``; draws happen there,
    so the generator passed to :meth:`sample` must be on that device.

    Raises:
        ValueError: on a bad ``negatives``, ``max_rounds``, ``near`` or edge tensor.

    Example:
        A chain 0 -> 1 -> 2 -> 3 with its closure: node 0's ancestors are 1, 2 and 3, so
        no candidate for it is valid; node 1 may only get 0.

        >>> edges = torch.tensor([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
        >>> sampler = NegativeSampler(edges, 4, negatives=5)
        >>> targets, valid = sampler.sample(torch.tensor([0, 1]), generator=torch.Generator().manual_seed(0))
        >>> targets.shape, valid[0].any().item(), targets[1][valid[1]].eq(0).all().item()
        (torch.Size([2, 5]), False, True)

        Near negatives: a root 0 with children 1, 2, 3 and grandchild 4 under 1. For the
        positive edge (4, 0), the near candidates are 0's other descendants that are not
        4's ancestors, 2 and 3; for (4, 1) there is none, so the near slots are masked.

        >>> edges = torch.tensor([[1, 0], [2, 0], [3, 0], [4, 1], [4, 0]])
        >>> sampler = NegativeSampler(edges, 5, negatives=4, near=4)
        >>> t, v = sampler.sample(torch.tensor([4, 4]), dst=torch.tensor([0, 1]), generator=torch.Generator().manual_seed(0))
        >>> sorted(set(t[0].tolist())) <= [2, 3], v[0].all().item(), v[1].any().item()
        (True, True, False)
    """

    def __init__(
        self,
        edges: torch.Tensor,
        num_nodes: int,
        *,
        negatives: int = 50,
        weights: torch.Tensor | None = None,
        max_rounds: int = MAX_ROUNDS,
        near: int = 0,
    ):
        if not isinstance(edges, torch.Tensor) or edges.dtype != torch.int64 or edges.dim() != 2 or edges.shape[1] != 2:
            raise ValueError(
                f"NegativeSampler: edges must be an (E, 2) int64 tensor, got "
                f"{getattr(edges, 'dtype', type(edges).__name__)} {tuple(getattr(edges, 'shape', ()))}"
            )
        if isinstance(negatives, bool) or not isinstance(negatives, int) or negatives < 1:
            raise ValueError(f"NegativeSampler: negatives must be an int >= 1, got {negatives!r}")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 0:
            raise ValueError(f"NegativeSampler: max_rounds must be an int >= 0, got {max_rounds!r}")
        if isinstance(near, bool) or not isinstance(near, int) or not 0 <= near <= negatives:
            raise ValueError(f"NegativeSampler: near must be an int in [0, negatives={negatives}], got {near!r}")
        self.num_nodes = int(num_nodes)
        self.negatives = negatives
        self.near = near
        self.max_rounds = max_rounds
        self.keys = edge_keys(edges, self.num_nodes)
        self.unigram = AliasTable(target_counts(edges, self.num_nodes, weights) ** UNIGRAM_POWER)
        # CPU: where each child's keys start (its segment is searched by the fused kernel)
        self._starts = None
        if self.keys.device.type == "cpu" and self.keys.numel():
            self._starts = torch.searchsorted(self.keys, torch.arange(self.num_nodes + 1, dtype=torch.int64) * self.num_nodes)
        # near draws: the edges' sources grouped by target (node v's are below[into[v]:into[v + 1]])
        self._below = self._into = None
        if near:
            by_target = torch.argsort(edges[:, 1], stable=True)
            self._below = edges[by_target, 0].contiguous()
            nodes = torch.arange(self.num_nodes + 1, dtype=torch.int64, device=edges.device)
            self._into = torch.searchsorted(edges[by_target, 1].contiguous(), nodes)

    def is_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """Elementwise membership of ``(src, dst)`` in the edge set (broadcasting).

        On the CPU a fused kernel searches only ``src``'s own keys (a few dozen, instead of
        all ``E``); elsewhere ``torch.searchsorted`` over all keys. The same booleans.
        """
        key = src * self.num_nodes + dst
        if self.keys.numel() == 0:
            return torch.zeros(key.shape, dtype=torch.bool, device=key.device)
        lib = None if self._starts is None or key.device.type != "cpu" else _library()
        if lib is not None and self._starts is not None:
            src_b, dst_b = (t.to(torch.int64).contiguous() for t in torch.broadcast_tensors(src, dst))
            out = torch.empty(src_b.shape, dtype=torch.bool)
            lib.segment_member(
                src_b.numel(),
                src_b.data_ptr(),
                dst_b.data_ptr(),
                self._starts.data_ptr(),
                self.keys.data_ptr(),
                self.num_nodes,
                self.keys.numel(),
                out.data_ptr(),
            )
            return out
        pos = torch.searchsorted(self.keys, key).clamp_(max=self.keys.numel() - 1)
        return self.keys[pos] == key

    def draw(self, shape: tuple[int, ...], *, generator: torch.Generator | None, burnin: bool) -> torch.Tensor:
        """Raw candidates (no rejection): unigram^0.75 in burn-in, else uniform."""
        if burnin:
            return self.unigram.sample(shape, generator=generator)
        return torch.randint(self.num_nodes, shape, generator=generator, device=self.keys.device)

    def draw_near(self, dst: torch.Tensor, *, generator: torch.Generator | None) -> torch.Tensor:
        """Raw near candidates (no rejection): for each target ``dst[i]``, the source of a
        uniformly drawn edge into it (a node below it), or ``dst[i]`` itself where no edge
        points at it (then the candidate is rejected as the positive's own slot would be)."""
        if self._below is None or self._into is None:
            raise ValueError("NegativeSampler.draw_near: the sampler was built with near=0")
        lo = self._into[dst]
        count = self._into[dst + 1] - lo
        coin = torch.rand(dst.shape, dtype=torch.float64, generator=generator, device=dst.device)
        pick = (coin * count).to(torch.int64).clamp_(max=(count - 1).clamp(min=0))
        below = self._below[(lo + pick).clamp_(max=max(self._below.numel() - 1, 0))] if self._below.numel() else dst
        return torch.where(count > 0, below, dst)

    def sample(
        self,
        src: torch.Tensor,
        *,
        dst: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        burnin: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Negative targets for the sources ``src``.

        Args:
            src: ``(B,)`` source (child) ids of the positive edges.
            dst: ``(B,)`` target (ancestor) ids of the positive edges; needed for the
                near slots (``near > 0``) after burn-in.
            generator: the random source.
            burnin: draw from the unigram table instead of uniformly (and no near slots).

        Returns:
            ``(targets, valid)``: ``(B, negatives)`` int64 ids and a bool mask; where
            ``valid`` is false the id is meaningless (0) and must be masked out.

        Raises:
            ValueError: ``dst`` missing (or not shaped as ``src``) for a sampler with near slots.
        """
        shape = (src.shape[0], self.negatives)
        near = 0 if burnin else self.near
        if near and (dst is None or dst.shape != src.shape):
            raise ValueError(
                f"NegativeSampler.sample: dst must be the (B,) targets of the positive edges when near={self.near}; "
                f"got {None if dst is None else tuple(dst.shape)} for src of shape {tuple(src.shape)}"
            )
        cand = self.draw(shape, generator=generator, burnin=burnin)
        far = self.negatives - near
        if near:
            assert dst is not None  # checked above
            cand[:, far:] = self.draw_near(dst.unsqueeze(1).expand(-1, near), generator=generator)
        src2 = src.unsqueeze(1).expand(shape)
        bad = (cand == src2) | self.is_edge(src2, cand)
        if near:
            bad[:, far:] |= self.is_edge(cand[:, far:], src2[:, far:])
        for _ in range(self.max_rounds):
            idx = bad.nonzero(as_tuple=True)
            if idx[0].numel() == 0:
                break
            new = self.draw((idx[0].numel(),), generator=generator, burnin=burnin)
            if near:
                assert dst is not None
                slot = idx[1] >= far
                new = torch.where(slot, self.draw_near(dst[idx[0]], generator=generator), new)
            s = src[idx[0]]
            cand[idx] = new
            bad[idx] = (new == s) | self.is_edge(s, new)
            if near:
                bad[idx] |= slot & self.is_edge(new, s)
        cand[bad] = 0
        return cand, ~bad


_SOURCE = r"""
#include <cstdint>
// out[i] = whether src[i] * num_nodes + dst[i] is one of the E sorted keys: searched among
// src[i]'s own keys keys[starts[src[i]] .. starts[src[i] + 1]) when both ids are in range,
// among all keys otherwise (the key of out-of-range ids may still be a valid one).
extern "C" void segment_member(int64_t n, const int64_t* src, const int64_t* dst, const int64_t* starts, const int64_t* keys,
        int64_t num_nodes, int64_t num_keys, uint8_t* out) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t s = src[i], d = dst[i], key = s * num_nodes + d;
        const bool inside = s >= 0 && s < num_nodes && d >= 0 && d < num_nodes;
        int64_t lo = inside ? starts[s] : 0;
        const int64_t end = inside ? starts[s + 1] : num_keys;
        int64_t hi = end;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (keys[mid] < key) lo = mid + 1; else hi = mid;
        }
        out[i] = lo < end && keys[lo] == key;
    }
}
"""


def _declare(lib: ctypes.CDLL) -> None:
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    lib.segment_member.argtypes = [i64, vp, vp, vp, vp, i64, i64, vp]
    lib.segment_member.restype = None


def _check(lib: ctypes.CDLL) -> str | None:
    """The kernel against ``torch.searchsorted`` on a small random edge set."""
    gen = torch.Generator().manual_seed(0)
    n = 50
    edges = torch.randint(n, (300, 2), generator=gen)
    keys = edge_keys(edges, n)
    starts = torch.searchsorted(keys, torch.arange(n + 1) * n)
    src, dst = torch.randint(-2, n + 3, (2, 2000), generator=gen)  # some out of range
    src[:300], dst[:300] = edges[:, 0], edges[:, 1]
    out = torch.empty(2000, dtype=torch.bool)
    lib.segment_member(2000, src.data_ptr(), dst.data_ptr(), starts.data_ptr(), keys.data_ptr(), n, keys.numel(), out.data_ptr())
    key = src * n + dst
    want = keys[torch.searchsorted(keys, key).clamp_(max=keys.numel() - 1)] == key
    return None if torch.equal(out, want) else "segment_member"


def _library() -> ctypes.CDLL | None:
    return native.library("hypermc_sampler", _SOURCE, _declare, _check)
