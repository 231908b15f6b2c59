"""Tests for hypermc.data.edges: delimiter/header detection, weights, errors by line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from hypermc.data import Graph, load_edges, save_edges

PAIRS = [("dog", "canine"), ("dog", "mammal"), ("canine", "mammal")]
EXPECTED = Graph.from_pairs(PAIRS)


def write(tmp_path: Path, text: str, name: str = "edges.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "dog,canine\ndog,mammal\ncanine,mammal\n",
        "dog\tcanine\ndog\tmammal\ncanine\tmammal\n",
        "dog canine\ndog   mammal\n canine\t mammal \n",
        "dog, canine\r\ndog ,mammal\r\ncanine,mammal",  # spaces around fields, CRLF
        "\ufeffdog,canine\ndog,mammal\ncanine,mammal\n",  # byte-order mark
        "\n\ndog,canine\n\ndog,mammal\n   \ncanine,mammal\n\n",  # blank lines
    ],
    ids=["comma", "tab", "whitespace", "spaces-crlf", "bom", "blank-lines"],
)
def test_delimiter_detection(tmp_path: Path, text: str) -> None:
    assert load_edges(write(tmp_path, text)) == EXPECTED


@pytest.mark.parametrize("header", ["child,parent", "id1,id2", "CHILD,Parent", "child,parent,weight", "id1,id2,weight"])
def test_header_detection(tmp_path: Path, header: str) -> None:
    rows = "dog,canine\ndog,mammal\ncanine,mammal\n"
    if header.endswith("weight"):
        rows = "dog,canine,1\ndog,mammal,1\ncanine,mammal,1\n"
    g = load_edges(write(tmp_path, f"{header}\n{rows}"))
    assert g.names == EXPECTED.names and torch.equal(g.edges, EXPECTED.edges)
    assert (g.weights is not None) == header.endswith("weight")


def test_header_argument_overrides_detection(tmp_path: Path) -> None:
    path = write(tmp_path, "child,parent\ndog,mammal\n")
    assert load_edges(path, header=False) == Graph.from_pairs([("child", "parent"), ("dog", "mammal")])
    path = write(tmp_path, "from,to\ndog,mammal\n")
    assert load_edges(path) == Graph.from_pairs([("from", "to"), ("dog", "mammal")])
    assert load_edges(path, header=True) == Graph.from_pairs([("dog", "mammal")])
    with pytest.raises(TypeError, match="header must be None or a bool"):
        load_edges(path, header="yes")  # type: ignore[arg-type]


def test_explicit_delimiter(tmp_path: Path) -> None:
    path = write(tmp_path, "a b,c\td\n")
    assert load_edges(path, delimiter="\t").names == ("a b,c", "d")
    assert load_edges(path, delimiter=",").names == ("a b", "c\td")
    with pytest.raises(ValueError, match="line 1: weight 'd' is not a finite number"):
        load_edges(path, delimiter=" ")  # three fields: a | b,c | d
    with pytest.raises(ValueError, match="delimiter must be None"):
        load_edges(path, delimiter=";")


def test_weight_column(tmp_path: Path) -> None:
    path = write(tmp_path, "id1,id2,weight\ndog,canine,0.5\ndog,mammal,2\ncanine,mammal,1e-3\n")
    g = load_edges(path)
    assert g.weights is not None and g.weights.dtype == torch.float64
    by_pair = dict(zip(g.pairs(), g.weights.tolist()))
    assert by_pair == {("canine", "mammal"): 1e-3, ("dog", "canine"): 0.5, ("dog", "mammal"): 2.0}


def test_duplicates_are_dropped_first_kept(tmp_path: Path) -> None:
    text = "dog,canine,1\ndog,mammal,2\ndog,canine,1\ncanine,mammal,3\ndog,mammal,2\n"
    g = load_edges(write(tmp_path, text))
    assert g.num_edges == 3
    assert dict(zip(g.pairs(), g.weights.tolist()))[("dog", "mammal")] == 2.0
    no_weights = load_edges(write(tmp_path, "b,a\nc,a\nb,a\n", "nw.csv"))
    assert no_weights == Graph.from_pairs([("b", "a"), ("c", "a")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dog,canine\ndog,mammal,1\n", "line 2: expected 2 columns like the first row, got 3"),
        ("child,parent\ndog,canine\n\ndog\n", "line 4: expected 2 columns like the first row"),
        ("dog\n", "line 1: expected 2 columns .* or 3 .*, got 1"),
        ("a,b,c,d\n", "line 1: expected 2 columns .* or 3 .*, got 4"),
        ("dog,canine\n,mammal\n", "line 2: empty node name"),
        ("dog,canine\ndog, \n", "line 2: empty node name"),
        ("id1,id2,weight\ndog,canine,1\ndog,mammal,heavy\n", "line 3: weight 'heavy' is not a"),
        ("dog,canine,nan\n", "line 1: weight 'nan' is not a finite number"),
        ("dog,canine,inf\n", "line 1: weight 'inf' is not a finite number"),
        ("dog,canine\nmammal,mammal\n", "line 2: self-loop 'mammal' -> 'mammal'; .* refused"),
        ("b,a,1\nc,a,1\nb,a,2\n", "line 3: edge 'b' -> 'a' repeats line 1 with a different"),
        ('dog,canine\n"dog"x,mammal\n', "line 2: .*"),  # csv quoting error (strict)
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=re.escape(f"load_edges: {path}, ") + message):
        load_edges(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_edges(tmp_path / "nope.csv")


def test_empty_file_is_an_empty_graph(tmp_path: Path) -> None:
    assert load_edges(write(tmp_path, "")).num_nodes == 0
    assert load_edges(write(tmp_path, "child,parent\n")).num_edges == 0


@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_save_load_round_trip(tmp_path: Path, delimiter: str) -> None:
    pairs = [("a,b", "c"), ('say "hi"', "c"), ("x\ty", "c"), ("o'neil.n.01", "c")]
    weights = [0.1, 1 / 3, 2.5e-300, 7.0]
    g = Graph.from_pairs(pairs, weights)
    path = tmp_path / "out.csv"
    save_edges(g, path, delimiter=delimiter)
    assert load_edges(path) == g  # exact weights (repr round-trips floats)
    plain = Graph.from_pairs(pairs)
    save_edges(plain, path, delimiter=delimiter)
    assert load_edges(path) == plain
    assert path.read_text(encoding="utf-8").splitlines()[0] == f"child{delimiter}parent"


def test_save_edges_writes_sorted_rows_with_header(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    save_edges(EXPECTED, path)
    assert path.read_bytes() == b"child,parent\ncanine,mammal\ndog,canine\ndog,mammal\n"
    with pytest.raises(TypeError, match="graph must be a Graph"):
        save_edges(PAIRS, path)  # type: ignore[arg-type]


def test_negative_weight_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "neg.csv"
    path.write_text("child,parent,weight\na,b,1.0\nc,b,-0.5\n")
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}, line 3: weight '-0.5' is negative"):
        load_edges(path)


def test_indented_name_does_not_merge(tmp_path: Path) -> None:
    path = tmp_path / "ws.csv"
    path.write_text("a,b\n a,c\n")
    with pytest.raises(ValueError, match=r"line 2: node name ' a' differs from 'a' \(line 1\)"):
        load_edges(path)
    padded = tmp_path / "padded.csv"
    padded.write_text("a, b\nb , c\n")  # whitespace next to a delimiter is padding
    assert load_edges(padded).num_nodes == 3


def test_non_utf8_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("caf\u00e9,b\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))} is not UTF-8 text"):
        load_edges(path)
