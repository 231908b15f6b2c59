"""A small immutable directed graph with deterministic node ids.

:class:`Graph` is the result type of every graph loader in :mod:`hypermc.data`
(:func:`~hypermc.data.wordnet_closure`, :func:`~hypermc.data.load_edges`). Node ids are
the positions of the node names in ``sorted(names)``, and edges are kept sorted and
unique, so the same edge set always gives the same ids and the same tensors, whatever
the input order, the hash seed or the platform.
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # networkx is imported lazily: it is only needed for the conversions
    import networkx as nx

__all__ = ["Graph"]

#: Header columns written by :meth:`Graph.to_csv` (and recognised by ``load_edges``).
CSV_HEADER = ("child", "parent")
#: Name of the optional third column.
WEIGHT_COLUMN = "weight"
#: Delimiters :meth:`Graph.to_csv` can write (with csv quoting where a name needs it).
WRITE_DELIMITERS = (",", "\t")


@dataclass(frozen=True, eq=False)
class Graph:
    """Directed graph of named nodes: edges point from child (hyponym) to parent.

    Node ``i`` is ``names[i]``; ``names`` is sorted (Python string order) and unique, so
    ids depend only on the set of names. ``edges`` holds ``(child, parent)`` id pairs,
    sorted lexicographically and unique, without self-loops. The constructor checks
    these invariants; build graphs from name pairs in any order with
    :meth:`from_pairs`.

    Treat a ``Graph`` as read-only: the dataclass is frozen, but the tensors it holds are
    ordinary tensors (clone before modifying them in place).

    Args:
        names: node names, strictly increasing.
        edges: ``(E, 2)`` int64 tensor of ``(child, parent)`` ids.
        weights: optional ``(E,)`` floating tensor, one finite weight >= 0 per edge
            (the trainer samples edges in proportion to them).

    Example:
        >>> g = Graph.from_pairs([("dog", "mammal"), ("cat", "mammal")])
        >>> g.names
        ('cat', 'dog', 'mammal')
        >>> g.edges.tolist()
        [[0, 2], [1, 2]]
    """

    names: tuple[str, ...]
    edges: torch.Tensor
    weights: torch.Tensor | None = None

    def __post_init__(self) -> None:
        names = self.names
        if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
            raise TypeError(f"Graph: names must be a sequence of str, got {type(names).__name__}")
        names = tuple(names)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"Graph: every name must be a str, got {name!r} ({type(name).__name__})")
        for i in range(1, len(names)):
            if not names[i - 1] < names[i]:
                raise ValueError(
                    f"Graph: names must be sorted and unique, but names[{i - 1}]="
                    f"{names[i - 1]!r} and names[{i}]={names[i]!r} are not increasing; "
                    "use Graph.from_pairs to build a graph from unsorted names"
                )
        object.__setattr__(self, "names", names)
        _check_edges(self.edges, len(names))
        _check_weights(self.weights, self.edges.shape[0])

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pairs(
        cls,
        pairs: Iterable[tuple[str, str]],
        weights: Iterable[float] | None = None,
        *,
        nodes: Iterable[str] = (),
    ) -> Graph:
        """Build a graph from ``(child, parent)`` name pairs in any order.

        Repeated pairs are kept once: the first occurrence (and its weight) wins, so the
        result depends only on the input sequence, never on set or hash order.

        Args:
            pairs: ``(child, parent)`` names.
            weights: optional weights, one per pair (same length as ``pairs``).
            nodes: extra node names to include even if no edge touches them.

        Returns:
            Graph: names ``sorted(set(nodes) | names in pairs)``, sorted unique edges.

        Raises:
            TypeError: if a name is not a str.
            ValueError: on a self-loop, or when ``weights`` and ``pairs`` differ in
                length.
        """
        pairs = [(child, parent) for child, parent in pairs]
        weight_list = None if weights is None else [float(w) for w in weights]
        if weight_list is not None and len(weight_list) != len(pairs):
            raise ValueError(f"Graph.from_pairs: got {len(weight_list)} weights for {len(pairs)} pairs; pass exactly one weight per pair")
        name_set = set(nodes)
        name_set.update(itertools.chain.from_iterable(pairs))
        for name in name_set:
            if not isinstance(name, str):
                raise TypeError(f"Graph.from_pairs: node names must be str, got {name!r} ({type(name).__name__})")
        names = tuple(sorted(name_set))
        index = {name: i for i, name in enumerate(names)}
        ids = torch.tensor(
            list(map(index.__getitem__, itertools.chain.from_iterable(pairs))),
            dtype=torch.int64,
        ).reshape(len(pairs), 2)
        loops = (ids[:, 0] == ids[:, 1]).nonzero()
        if loops.numel():
            child, parent = pairs[int(loops[0, 0])]
            raise ValueError(f"Graph.from_pairs: self-loop {child!r} -> {parent!r}; a hierarchy edge must join two different nodes")
        # Sort and deduplicate by the key child * N + parent (lexicographic order); the
        # smallest input position of each key is its first occurrence.
        n = max(len(names), 1)
        keys = ids[:, 0] * n + ids[:, 1]
        w = None if weight_list is None else torch.tensor(weight_list, dtype=torch.float64)
        if bool((keys[1:] > keys[:-1]).all()):  # already sorted and unique
            return cls(names, ids, w)
        keys, inverse = torch.unique(keys, return_inverse=True)
        edges = torch.stack([keys // n, keys % n], dim=1)
        if w is not None:
            position = torch.arange(len(pairs), dtype=torch.int64)
            first = torch.full_like(keys, len(pairs)).scatter_reduce(0, inverse, position, reduce="amin")
            w = w[first]
        return cls(names, edges, w)

    @classmethod
    def from_networkx(cls, graph: nx.DiGraph) -> Graph:
        """Build a graph from a ``networkx.DiGraph`` whose edges point child -> parent.

        Node labels must be strings (they become the names); isolated nodes are kept.
        Edge attribute ``weight`` becomes :attr:`weights` when every edge has it.

        Raises:
            TypeError: if ``graph`` is not a directed simple graph or a label is not a
                str.
            ValueError: if only some edges carry a ``weight``, or on a self-loop.
        """
        import networkx as nx

        if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
            raise TypeError(f"Graph.from_networkx: expected a networkx.DiGraph with edges child -> parent, got {type(graph).__name__}")
        for node in graph.nodes:
            if not isinstance(node, str):
                raise TypeError(
                    f"Graph.from_networkx: node labels must be str names, got {node!r} "
                    f"({type(node).__name__}); relabel with networkx.relabel_nodes first"
                )
        edge_list = list(graph.edges(data=WEIGHT_COLUMN))
        has_weight = [w is not None for _, _, w in edge_list]
        if any(has_weight) and not all(has_weight):
            raise ValueError(
                f"Graph.from_networkx: {sum(has_weight)} of {len(edge_list)} edges have "
                f"a {WEIGHT_COLUMN!r} attribute; give it to every edge or to none"
            )
        weights = [w for _, _, w in edge_list] if edge_list and all(has_weight) else None
        return cls.from_pairs([(c, p) for c, p, _ in edge_list], weights, nodes=graph.nodes)

    # ------------------------------------------------------------------ queries
    @property
    def num_nodes(self) -> int:
        """Number of nodes (``len(names)``)."""
        return len(self.names)

    @property
    def num_edges(self) -> int:
        """Number of edges (rows of :attr:`edges`)."""
        return int(self.edges.shape[0])

    def node_id(self, name: str) -> int:
        """The id of the node called ``name``.

        Raises:
            KeyError: if there is no such node.
        """
        i = bisect.bisect_left(self.names, name)
        if i == len(self.names) or self.names[i] != name:
            raise KeyError(f"Graph has no node named {name!r}")
        return i

    def pairs(self) -> list[tuple[str, str]]:
        """The edges as ``(child, parent)`` names, in edge order."""
        names = self.names
        return [(names[c], names[p]) for c, p in self.edges.tolist()]

    def checksum(self) -> str:
        """SHA-256 of the edge set: sorted lines ``f"{child}\\t{parent}\\n"`` joined.

        Weights are not part of the checksum. This is the checksum ``DATA.md`` quotes
        for the WordNet closures.
        """
        lines = sorted(f"{c}\t{p}\n" for c, p in self.pairs())
        return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()

    # ------------------------------------------------------------------ conversions
    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with edges child -> parent, labelled by name.

        Nodes are inserted in id order and carry an ``id`` attribute; edges carry
        ``weight`` when :attr:`weights` is set.
        """
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from((name, {"id": i}) for i, name in enumerate(self.names))
        if self.weights is None:
            graph.add_edges_from(self.pairs())
        else:
            graph.add_edges_from((c, p, {WEIGHT_COLUMN: w}) for (c, p), w in zip(self.pairs(), self.weights.tolist()))
        return graph

    def to_csv(self, path: str | os.PathLike[str], *, delimiter: str = ",") -> None:
        """Write the edges as a CSV file readable by :func:`~hypermc.data.load_edges`.

        The header is ``child,parent`` (``child,parent,weight`` with weights), then one
        row of names per edge in edge order; names that contain the delimiter or quotes
        are quoted. Isolated nodes are not representable in an edge list and are lost.

        Args:
            path: output file (overwritten), UTF-8 with ``\\n`` line ends.
            delimiter: ``","`` or ``"\\t"``.
        """
        if delimiter not in WRITE_DELIMITERS:
            raise ValueError(f"Graph.to_csv: delimiter must be one of {WRITE_DELIMITERS!r}, got {delimiter!r}")
        header = [*CSV_HEADER] + ([WEIGHT_COLUMN] if self.weights is not None else [])
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
            writer.writerow(header)
            if self.weights is None:
                writer.writerows(self.pairs())
            else:
                writer.writerows((c, p, repr(w)) for (c, p), w in zip(self.pairs(), self.weights.tolist()))

    # ------------------------------------------------------------------ dunder
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        if self.names != other.names or not torch.equal(self.edges, other.edges):
            return False
        if self.weights is None or other.weights is None:
            return self.weights is None and other.weights is None
        return bool(torch.equal(self.weights, other.weights))

    __hash__ = None  # type: ignore[assignment]  # holds tensors: not hashable

    def __repr__(self) -> str:
        weighted = "" if self.weights is None else ", weighted"
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{weighted})"


def _check_edges(edges: Any, num_nodes: int) -> None:
    """Validate the edge tensor invariants (see :class:`Graph`)."""
    if not isinstance(edges, torch.Tensor):
        raise TypeError(f"Graph: edges must be a torch.Tensor, got {type(edges).__name__}")
    if edges.dtype != torch.int64:
        raise TypeError(f"Graph: edges must have dtype torch.int64, got {edges.dtype}")
    if edges.dim() != 2 or edges.shape[1] != 2:
        raise ValueError(f"Graph: edges must have shape (E, 2), got {tuple(edges.shape)}")
    if edges.numel() == 0:
        return
    if int(edges.min()) < 0 or int(edges.max()) >= num_nodes:
        raise ValueError(f"Graph: edge ids must lie in [0, {num_nodes}), got values in [{int(edges.min())}, {int(edges.max())}]")
    if bool((edges[:, 0] == edges[:, 1]).any()):
        row = int((edges[:, 0] == edges[:, 1]).nonzero()[0, 0])
        raise ValueError(f"Graph: edge {row} is a self-loop {edges[row].tolist()}")
    key = edges[:, 0] * max(num_nodes, 1) + edges[:, 1]
    if edges.shape[0] > 1 and not bool((key[1:] > key[:-1]).all()):
        raise ValueError(
            "Graph: edges must be sorted lexicographically by (child, parent) and unique; "
            "use Graph.from_pairs to build a graph from unsorted pairs"
        )


def _check_weights(weights: Any, num_edges: int) -> None:
    """Validate the optional weight tensor."""
    if weights is None:
        return
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        raise TypeError(
            f"Graph: weights must be None or a floating-point torch.Tensor, got {getattr(weights, 'dtype', type(weights).__name__)}"
        )
    if tuple(weights.shape) != (num_edges,):
        raise ValueError(f"Graph: weights must have shape ({num_edges},), got {tuple(weights.shape)}")
    if num_edges and not bool(torch.isfinite(weights).all()):
        raise ValueError("Graph: weights must be finite numbers")
    negative = weights < 0
    if bool(negative.any()):
        i = int(negative.nonzero()[0, 0])
        raise ValueError(
            f"Graph: weights must be >= 0 (they are sampling weights); got {int(negative.sum())} negative, "
            f"the first {float(weights[i])!r} at edge {i}"
        )
