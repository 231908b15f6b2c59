"""Tests for hypermc.data.graph: invariants, construction, checksum, networkx round trip."""

from __future__ import annotations

import hashlib

import networkx as nx
import pytest
import torch

from hypermc.data import Graph

PAIRS = [("dog", "canine"), ("dog", "mammal"), ("canine", "mammal"), ("cat", "mammal")]


@pytest.fixture
def graph() -> Graph:
    return Graph.from_pairs(PAIRS)


def test_from_pairs_ids_follow_sorted_names(graph: Graph) -> None:
    assert graph.names == ("canine", "cat", "dog", "mammal")
    assert graph.edges.dtype == torch.int64
    assert graph.edges.tolist() == [[0, 3], [1, 3], [2, 0], [2, 3]]
    assert graph.weights is None
    assert (graph.num_nodes, graph.num_edges) == (4, 4)
    assert graph.node_id("dog") == 2
    with pytest.raises(KeyError, match="no node named 'wolf'"):
        graph.node_id("wolf")


def test_from_pairs_is_order_independent(graph: Graph) -> None:
    for perm in ([3, 2, 1, 0], [1, 3, 0, 2]):
        assert Graph.from_pairs([PAIRS[i] for i in perm]) == graph


def test_from_pairs_keeps_first_duplicate_and_its_weight() -> None:
    g = Graph.from_pairs([("b", "a"), ("c", "a"), ("b", "a")], [1.0, 2.0, 3.0])
    assert g.edges.tolist() == [[1, 0], [2, 0]]
    assert g.weights is not None and g.weights.dtype == torch.float64
    assert g.weights.tolist() == [1.0, 2.0]


def test_from_pairs_extra_nodes_and_empty() -> None:
    g = Graph.from_pairs([("b", "a")], nodes=["z"])
    assert g.names == ("a", "b", "z") and g.num_edges == 1
    empty = Graph.from_pairs([])
    assert (empty.num_nodes, empty.num_edges) == (0, 0)
    assert tuple(empty.edges.shape) == (0, 2)


def test_from_pairs_errors() -> None:
    with pytest.raises(ValueError, match="self-loop 'a' -> 'a'"):
        Graph.from_pairs([("b", "a"), ("a", "a")])
    with pytest.raises(ValueError, match="got 1 weights for 2 pairs"):
        Graph.from_pairs([("b", "a"), ("c", "a")], [1.0])
    with pytest.raises(TypeError, match="node names must be str, got 3"):
        Graph.from_pairs([("b", 3)])


def test_constructor_checks_invariants() -> None:
    edges = torch.tensor([[0, 1]])
    with pytest.raises(ValueError, match="names must be sorted and unique"):
        Graph(("b", "a"), edges)
    with pytest.raises(ValueError, match="names must be sorted and unique"):
        Graph(("a", "a"), edges)
    with pytest.raises(TypeError, match="every name must be a str"):
        Graph(("a", 1), edges)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype torch.int64"):
        Graph(("a", "b"), edges.int())
    with pytest.raises(ValueError, match=r"shape \(E, 2\)"):
        Graph(("a", "b"), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 2\)"):
        Graph(("a", "b"), torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="self-loop"):
        Graph(("a", "b"), torch.tensor([[1, 1]]))
    with pytest.raises(ValueError, match="sorted lexicographically"):
        Graph(("a", "b", "c"), torch.tensor([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="sorted lexicographically"):
        Graph(("a", "b"), torch.tensor([[1, 0], [1, 0]]))
    with pytest.raises(ValueError, match=r"weights must have shape \(1,\)"):
        Graph(("a", "b"), edges, torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating-point"):
        Graph(("a", "b"), edges, torch.ones(1, dtype=torch.int64))
    with pytest.raises(ValueError, match="finite"):
        Graph(("a", "b"), edges, torch.tensor([float("nan")]))
    assert Graph(["a", "b"], edges).names == ("a", "b")  # a list is stored as a tuple


def test_checksum_is_sha256_of_sorted_tab_lines(graph: Graph) -> None:
    lines = sorted(f"{c}\t{p}\n" for c, p in PAIRS)
    assert graph.checksum() == hashlib.sha256("".join(lines).encode()).hexdigest()
    weighted = Graph.from_pairs(PAIRS, [1.0, 2.0, 3.0, 4.0])
    assert weighted.checksum() == graph.checksum()  # weights are not part of it


def test_equality_and_repr(graph: Graph) -> None:
    assert graph == Graph.from_pairs(PAIRS)
    assert graph != Graph.from_pairs(PAIRS[:3])
    assert graph != Graph.from_pairs(PAIRS, [1.0] * 4)
    assert repr(graph) == "Graph(num_nodes=4, num_edges=4)"
    assert repr(Graph.from_pairs(PAIRS, [1.0] * 4)) == "Graph(num_nodes=4, num_edges=4, weighted)"
    with pytest.raises(TypeError):
        hash(graph)


def test_networkx_round_trip(graph: Graph) -> None:
    g = graph.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert list(g.nodes) == list(graph.names)
    assert g.nodes["dog"]["id"] == 2
    assert set(g.edges) == set(PAIRS)
    assert Graph.from_networkx(g) == graph


def test_networkx_round_trip_with_weights_and_isolated_node() -> None:
    weighted = Graph.from_pairs(PAIRS, [0.5, 1.5, 2.5, 3.5], nodes=["loner"])
    g = weighted.to_networkx()
    assert g.edges["dog", "canine"]["weight"] == 0.5
    assert "loner" in g
    assert Graph.from_networkx(g) == weighted


def test_from_networkx_errors() -> None:
    with pytest.raises(TypeError, match="expected a networkx.DiGraph"):
        Graph.from_networkx(nx.Graph([("a", "b")]))
    with pytest.raises(TypeError, match="expected a networkx.DiGraph"):
        Graph.from_networkx(nx.MultiDiGraph([("a", "b")]))
    with pytest.raises(TypeError, match="node labels must be str"):
        Graph.from_networkx(nx.DiGraph([(1, 2)]))
    partial = nx.DiGraph()
    partial.add_edge("a", "b", weight=1.0)
    partial.add_edge("c", "b")
    with pytest.raises(ValueError, match="1 of 2 edges have a 'weight'"):
        Graph.from_networkx(partial)


def test_to_csv_rejects_unknown_delimiter(graph: Graph, tmp_path) -> None:
    with pytest.raises(ValueError, match="delimiter must be one of"):
        graph.to_csv(tmp_path / "x.csv", delimiter=";")


def test_negative_weights_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"Graph: weights must be >= 0 \(they are sampling weights\); got 1 negative, the first -1\.5 at edge 1"
    ):
        Graph.from_pairs([("a", "b"), ("c", "b")], [2.0, -1.5])
    g = Graph.from_pairs([("a", "b"), ("c", "b")], [2.0, 0.0])  # zero is a weight
    with pytest.raises(ValueError, match=r"got 2 negative, the first -1\.0 at edge 0"):
        Graph(g.names, g.edges, torch.tensor([-1.0, -2.0], dtype=torch.float64))
