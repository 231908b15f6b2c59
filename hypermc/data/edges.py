"""Read and write edge lists (CSV, TSV or whitespace separated) as :class:`Graph`.

An edge-list file has one edge per row: ``child, parent`` names, optionally followed by
a numeric ``weight``. :func:`load_edges` detects the delimiter and an optional header,
checks every row and reports the first bad one by file and line number.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Iterator

from .graph import CSV_HEADER, WEIGHT_COLUMN, Graph

__all__ = ["load_edges", "save_edges"]

#: Delimiters :func:`load_edges` accepts; ``" "`` means "any run of whitespace".
DELIMITERS = (",", "\t", " ")
#: Header rows recognised when ``header=None`` (compared case-insensitively): the
#: poincare-embeddings column names ``id1,id2[,weight]`` and ours, ``child,parent[,weight]``.
KNOWN_HEADERS = (("id1", "id2"), CSV_HEADER)


def load_edges(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    header: bool | None = None,
) -> Graph:
    """Load an edge list of ``(child, parent[, weight])`` rows into a :class:`Graph`.

    Format:
        * Delimiter: ``","``, ``"\\t"`` or ``" "`` (any run of spaces/tabs; no quoting).
          With ``delimiter=None`` it is detected from the first non-blank line: a tab
          if it has one, else a comma if it has one, else whitespace. Comma and tab
          files follow CSV quoting rules (``"a,b"`` is one name).
        * Header: with ``header=None`` the first row is a header exactly when it reads
          ``id1,id2``, ``child,parent``, or either followed by ``weight``
          (case-insensitive); ``True``/``False`` force the choice.
        * Columns: two (names) or three (names and a weight); every row must have the
          same number as the first row. Weights are parsed with ``float`` and must be
          finite and >= 0. Fields are stripped of surrounding whitespace (whitespace
          next to a delimiter or at the line end is padding); a name indented at the
          start of a line (``" a"``) that also appears as ``"a"`` is refused rather
          than merged. Blank lines are skipped.
        * A row repeating an earlier ``(child, parent)`` pair with the same weight is
          dropped (the first occurrence is kept); with a different weight it is an
          error.

    Args:
        path: the file (UTF-8; a byte-order mark is ignored).
        delimiter: ``None`` to detect, or one of ``","``, ``"\\t"``, ``" "``.
        header: ``None`` to detect, ``True`` if the first row is a header, ``False`` if
            it is an edge.

    Returns:
        Graph: ids from the sorted names, edges sorted, ``weights`` (float64) when the
        file has a weight column.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming the file and line of the first malformed row: wrong number of
            columns, an empty name, a weight that is not a finite number or is negative,
            two whitespace-variant spellings of a name, a non-UTF-8 file, a self-loop
            (child equal to parent: refused, not skipped), or a duplicate edge with a
            conflicting weight.

    Example:
        >>> from pathlib import Path
        >>> _ = Path("edges.tsv").write_text("id1\\tid2\\tweight\\ndog\\tmammal\\t2\\ncat\\tmammal\\t1\\n")
        >>> g = load_edges("edges.tsv")  # tab and header detected
        >>> g.names, g.edges.tolist(), g.weights.tolist()
        (('cat', 'dog', 'mammal'), [[0, 2], [1, 2]], [1.0, 2.0])
    """
    if delimiter is not None and delimiter not in DELIMITERS:
        raise ValueError(f"load_edges: delimiter must be None (detect) or one of {DELIMITERS!r}, got {delimiter!r}")
    if header is not None and not isinstance(header, bool):
        raise TypeError(f"load_edges: header must be None or a bool, got {header!r}")
    path = os.fspath(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        try:
            if delimiter is None:
                delimiter = _detect_delimiter(f)
                f.seek(0)
            return _parse(path, _rows(f, delimiter), header)
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"load_edges: {path} is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} "
                f"at offset {exc.start} of a read block: {exc.reason}); re-encode it as UTF-8"
            ) from None


def save_edges(graph: Graph, path: str | os.PathLike[str], *, delimiter: str = ",") -> None:
    """Write ``graph`` as an edge list with a ``child,parent[,weight]`` header.

    Same as :meth:`Graph.to_csv`; :func:`load_edges` reads the file back to an equal
    graph (except for isolated nodes, which an edge list cannot hold).

    Args:
        graph: the graph to write.
        path: output file (overwritten).
        delimiter: ``","`` or ``"\\t"``.

    Example:
        >>> g = Graph.from_pairs([("dog", "mammal"), ("cat", "mammal")])
        >>> save_edges(g, "edges.csv")
        >>> from pathlib import Path
        >>> print(Path("edges.csv").read_text(), end="")
        child,parent
        cat,mammal
        dog,mammal
        >>> load_edges("edges.csv") == g
        True
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"save_edges: graph must be a Graph, got {type(graph).__name__}")
    graph.to_csv(path, delimiter=delimiter)


def _detect_delimiter(f: Iterable[str]) -> str:
    """Tab, comma or whitespace, from the first non-blank line of ``f``."""
    for line in f:
        if line.strip():
            if "\t" in line:
                return "\t"
            if "," in line:
                return ","
            return " "
    return ","


def _rows(f: Iterable[str], delimiter: str) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(line number, stripped fields, spellings of the two names)`` per non-blank row."""
    if delimiter == " ":
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if fields:
                yield number, fields, fields[:2]
        return
    reader = csv.reader(f, delimiter=delimiter, strict=True)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ValueError(f"line {reader.line_num}: {exc}") from None
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        # leading whitespace of a line is kept in the spelling; whitespace around a
        # delimiter and at the line end is padding
        spellings = [field.rstrip() if i == 0 else field.strip() for i, field in enumerate(row[:2])]
        yield reader.line_num, [field.strip() for field in row], spellings


def _parse(path: str, rows: Iterator[tuple[int, list[str], list[str]]], header: bool | None) -> Graph:
    """Check the rows and build the graph (see :func:`load_edges`)."""
    where = f"load_edges: {path}"
    pairs: list[tuple[str, str]] = []
    weights: list[float] = []
    seen: dict[tuple[str, str], tuple[int, float | None]] = {}
    spelled: dict[str, tuple[str, int]] = {}
    ncols = None
    try:
        for number, fields, spellings in rows:
            if ncols is None:  # first row: header or first edge
                ncols = len(fields)
                if ncols not in (2, 3):
                    raise ValueError(
                        f"{where}, line {number}: expected 2 columns (child, parent) or 3 (child, parent, weight), got {ncols}: {fields!r}"
                    )
                if header or (header is None and _is_header(fields)):
                    continue
            if len(fields) != ncols:
                raise ValueError(f"{where}, line {number}: expected {ncols} columns like the first row, got {len(fields)}: {fields!r}")
            child, parent = fields[0], fields[1]
            if not child or not parent:
                raise ValueError(f"{where}, line {number}: empty node name in {fields!r}")
            if child == parent:
                raise ValueError(f"{where}, line {number}: self-loop {child!r} -> {parent!r}; self-loops are refused (remove the row)")
            for name, raw in zip((child, parent), spellings):
                first_raw, first_line = spelled.setdefault(name, (raw, number))
                if first_raw != raw:
                    raise ValueError(
                        f"{where}, line {number}: node name {raw!r} differs from {first_raw!r} "
                        f"(line {first_line}) only in surrounding whitespace; names are "
                        "stripped, so they would merge silently: fix the file"
                    )
            weight = _parse_weight(fields[2], where, number) if ncols == 3 else None
            key = (child, parent)
            if key in seen:
                first_line, first_weight = seen[key]
                if first_weight != weight:
                    raise ValueError(
                        f"{where}, line {number}: edge {child!r} -> {parent!r} repeats "
                        f"line {first_line} with a different weight "
                        f"({weight!r} vs {first_weight!r})"
                    )
                continue
            seen[key] = (number, weight)
            pairs.append(key)
            if weight is not None:
                weights.append(weight)
    except ValueError as exc:
        if str(exc).startswith(where):
            raise
        raise ValueError(f"{where}, {exc}") from None
    return Graph.from_pairs(pairs, weights if ncols == 3 else None)


def _parse_weight(text: str, where: str, number: int) -> float:
    """``float(text)``, or a ValueError naming the line."""
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not math.isfinite(weight):
        raise ValueError(f"{where}, line {number}: {WEIGHT_COLUMN} {text!r} is not a finite number")
    if weight < 0:
        raise ValueError(f"{where}, line {number}: {WEIGHT_COLUMN} {text!r} is negative; weights must be >= 0")
    return weight


def _is_header(fields: list[str]) -> bool:
    """True if ``fields`` is one of :data:`KNOWN_HEADERS`, optionally with ``weight``."""
    lowered = tuple(field.lower() for field in fields)
    return lowered[:2] in KNOWN_HEADERS and lowered[2:] in ((), (WEIGHT_COLUMN,))
