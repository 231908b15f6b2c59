"""Every results table in the docs says how to reproduce it, and the scripts it names run.

A *results table* is a block of numbers obtained by running something:

* a markdown table (consecutive lines starting with ``|``, the second one a ``|---`` row),
* or a code fence without a language (```` ``` ````), which the docs use only for output
  printed by a command; fences with a language (``python``, ``bash``) are code.

Rule for tables that are not results (status lists, indexes, checklists, formula values):
an HTML comment ``<!-- not-results: <reason> -->`` on the line just above the table
(blank lines between are allowed). Nothing else excludes a table.

For each results table, its *caption* is the text between the previous boundary -- the
nearest heading, table or output fence above it -- and the table. The caption must hold:

* a reproduction command: ``python benchmarks/<script>.py ...`` or
  ``python examples/<script>.py ...`` naming a script that exists, or
  ``python -m hypermc <subcommand> ...``; every ``--flag`` of the command must be an
  option of that script's (or subcommand's) ``--help``;
* the commit: ``commit <hash>`` (a commit of this repository when the git history is
  available) or the words ``commit not recorded``;
  (phrases match case-insensitively and across line breaks)
* the machine: ``N-core``, ``x86-64``, ``aarch64``, ``GPU``, ``H100``, ``H200``, ``A100``,
  or the words ``machine not recorded``;
* the wall time: the words ``wall time`` (followed by the time, or ``not recorded``).

A table the docs include from a results fragment (``--8<-- "results/NAME.md"``, the
pymdownx.snippets include of mkdocs.yml) is checked as if it stood in the page: the
fragment's first lines are its caption. Every included fragment exists and opens with a
provenance header: the marker of a fragment written by ``--write-results`` (then the
header holds the date too) or of a recorded run, then the command, commit, machine and
wall time.

Besides, every script under ``benchmarks/`` and ``examples/`` with a command line answers
``--help`` (run in this process with the script's ``sys.argv``, so it costs no new
interpreter).
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
SCRIPT_DIRS = ("benchmarks", "examples")

NOT_RESULTS = re.compile(r"<!--\s*not-results:\s*\S.*?-->")
FENCE = re.compile(r"^\s*```(\w*)")
HEADING = re.compile(r"^#{1,6} ")
TABLE_SEPARATOR = re.compile(r"^\s*\|\s*:?-{3,}")
COMMAND = re.compile(r"python3?\s+(?:(?P<script>(?:benchmarks|examples)/[\w.]+\.py)|-m\s+hypermc\s+(?P<sub>[\w-]+))(?P<args>[^`\n]*)")
# Phrases match case-insensitively and across line breaks.
COMMIT = re.compile(r"\bcommit\s+`?(?P<hash>[0-9a-f]{7,40})\b|\bcommit\s+not\s+recorded\b", re.I)
MACHINE = re.compile(r"\b\d+-core\b|\bx86-64\b|\baarch64\b|\bGPU\b|\bH100\b|\bH200\b|\bA100\b|\bmachine\s+not\s+recorded\b", re.I)
WALL_TIME = re.compile(r"\bwall\s+time\b", re.I)
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<file>[^"]+)"\s*$')
SNIPPET_BASES = (ROOT / "docs", ROOT)  # mkdocs.yml: pymdownx.snippets base_path
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\b")


def _snippet(name: str) -> Path | None:
    """The file an include names, looked up as pymdownx.snippets does (first base that has it)."""
    for base in SNIPPET_BASES:
        if (base / name).is_file():
            return base / name
    return None


def _lines(path: Path) -> list[str]:
    """The page's lines with every results-fragment include replaced by the fragment's lines."""
    out: list[str] = []
    for line in path.read_text().splitlines():
        m = INCLUDE.match(line)
        found = _snippet(m.group("file")) if m and m.group("file").startswith("results/") else None
        out.extend(found.read_text().splitlines() if found else [line])
    return out


def _includes():
    """(page, included name) for every results-fragment include of the docs."""
    for path in DOCS:
        for line in path.read_text().splitlines():
            m = INCLUDE.match(line)
            if m and m.group("file").startswith("results/"):
                yield pytest.param(path, m.group("file"), id=f"{path.relative_to(ROOT)}:{m.group('file')}")


def _blocks(path: Path, lines: list[str] | None = None):
    """Yield ``(kind, first line number, last line number)`` for every table and fence.

    kind: "table", "output" (fence without a language), "code" (fence with one) or
    "heading" (one line).
    """
    lines = _lines(path) if lines is None else lines
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            yield ("code" if m.group(1) else "output"), i, j
            i = j + 1
        elif HEADING.match(lines[i]):
            yield "heading", i, i
            i += 1
        elif lines[i].lstrip().startswith("|") and i + 1 < len(lines) and TABLE_SEPARATOR.match(lines[i + 1]):
            j = i + 1
            while j + 1 < len(lines) and lines[j + 1].lstrip().startswith("|"):
                j += 1
            yield "table", i, j
            i = j + 1
        else:
            i += 1


def _tables():
    """Every table / output fence of the docs with its caption and whether it is marked not-results."""
    for path in DOCS:
        lines = _lines(path)
        boundary = 0  # first line of the current caption
        for kind, start, end in _blocks(path, lines):
            if kind in ("table", "output"):
                above = [ln for ln in lines[boundary:start] if ln.strip()]
                marked = bool(above) and bool(NOT_RESULTS.search(above[-1]))
                caption = "\n".join(lines[boundary:start])
                yield path, start + 1, kind, caption, marked
            if kind != "code":
                boundary = end + 1


def _results():
    for path, line, kind, caption, marked in _tables():
        if not marked:
            yield pytest.param(path, caption, id=f"{path.relative_to(ROOT)}:{line}:{kind}")


def _commands(caption: str):
    """(script or 'hypermc <sub>', its flags) for every command in the caption."""
    text = re.sub(r"^\s*```\w*\n(.*?)^\s*```", r"\1", caption, flags=re.S | re.M)  # fenced code: its lines as they are
    text = re.sub(r"`[^`]+`", lambda m: m.group(0).replace("\n", " "), text)  # inline code across lines
    text = text.replace("\\\n", " ")  # shell line continuations
    for m in COMMAND.finditer(text):
        args = m.group("args").split(" #")[0]  # a shell comment ends the command
        name = m.group("script") or f"hypermc {m.group('sub')}"
        yield name, set(FLAG.findall(args))


def _git_has(commit: str) -> bool | None:
    """Whether the repository knows the commit; None when that cannot be told (no git, shallow clone)."""
    git = shutil.which("git")
    if git is None:
        return None
    run = lambda *a: subprocess.run([git, *a], cwd=ROOT, capture_output=True, text=True)  # noqa: E731
    shallow = run("rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        return None
    return run("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


_HELP: dict[str, str] = {}


def _help(name: str) -> str:
    """The ``--help`` text of a script (path relative to ROOT) or of ``hypermc <sub>``, cached."""
    if name not in _HELP:
        out = io.StringIO()
        if name.startswith("hypermc "):
            from hypermc.__main__ import main

            with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
                main([name.split()[1], "--help"])
        else:
            path = ROOT / name
            before = set(sys.modules)
            old_argv, old_path = sys.argv, list(sys.path)
            sys.argv, sys.path[:0] = [str(path), "--help"], [str(path.parent)]
            try:
                with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
                    runpy.run_path(str(path), run_name="__main__")
            finally:
                sys.argv, sys.path[:] = old_argv, old_path
                for mod in set(sys.modules) - before:  # sibling helpers (lowprec_common, ...)
                    if str(getattr(sys.modules[mod], "__file__", "") or "").startswith(str(path.parent)):
                        del sys.modules[mod]
        assert exc.value.code in (0, None), f"{name} --help exited with {exc.value.code}"
        _HELP[name] = out.getvalue()
    return _HELP[name]


def _cli_scripts():
    for d in SCRIPT_DIRS:
        for path in sorted((ROOT / d).glob("*.py")):
            text = path.read_text()
            if "argparse" in text and '__name__ == "__main__"' in text:
                yield pytest.param(f"{d}/{path.name}", id=f"{d}/{path.name}")


# ------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("path, caption", list(_results()))
def test_results_table_states_command_commit_machine_wall_time(path, caption):
    where = f"{path.relative_to(ROOT)}, results table after:\n{caption[-600:]}\n"
    commands = list(_commands(caption))
    assert commands, where + "no reproduction command (python benchmarks/... | examples/... | -m hypermc ...)"
    for name, _ in commands:
        if not name.startswith("hypermc "):
            assert (ROOT / name).is_file(), where + f"the command names {name}, which does not exist"
    commits = list(COMMIT.finditer(caption))
    assert commits, where + "no 'commit <hash>' or 'commit not recorded'"
    for m in commits:
        if m.group("hash") and _git_has(m.group("hash")) is False:
            pytest.fail(where + f"commit {m.group('hash')} is not a commit of this repository")
    assert MACHINE.search(caption), where + "no machine (e.g. '2-core x86-64 VM', 'H100', or 'machine not recorded')"
    assert WALL_TIME.search(caption), where + "no 'wall time ...' (or 'wall time not recorded')"


@pytest.mark.parametrize("path, caption", list(_results()))
def test_results_commands_use_existing_options(path, caption):
    for name, flags in _commands(caption):
        text = _help(name)
        missing = sorted(f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text))
        assert not missing, f"{path.relative_to(ROOT)}: `{name}` has no option(s) {missing}"


def test_the_rule_finds_tables_and_exclusions():
    found = list(_tables())
    results = [t for t in found if not t[4]]
    assert len(results) >= 15, "the parser stopped finding the results tables"
    assert any(t[2] == "output" for t in results), "the output fence of docs/training.md is a results table"
    marked = [t for t in found if t[4]]
    assert marked, "the status / index tables carry the not-results marker"


@pytest.mark.parametrize("name", list(_cli_scripts()))
def test_script_help(name):
    text = _help(name)
    assert "usage:" in text and "--help" in text


def test_every_benchmark_has_a_command_line():
    benches = sorted((ROOT / "benchmarks").glob("bench_*.py"))
    assert benches and all("argparse" in p.read_text() for p in benches)


@pytest.mark.parametrize("page, name", list(_includes()))
def test_included_results_fragment_has_provenance_header(page, name):
    from hypermc._results import MARKER, RECORDED

    path = _snippet(name)
    assert path is not None, f"{page.relative_to(ROOT)} includes {name}, which exists under none of {SNIPPET_BASES}"
    lines = path.read_text().splitlines()
    assert lines and lines[0] in (MARKER, RECORDED), f"{name}: the first line is not a results-fragment marker: {lines[:1]}"
    header = "\n".join(lines[1 : lines.index("")] if "" in lines else lines[1:])
    where = f"{name}, header:\n{header}\n"
    assert list(_commands(header)), where + "no command"
    assert COMMIT.search(header), where + "no commit"
    assert MACHINE.search(header), where + "no machine"
    assert WALL_TIME.search(header), where + "no wall time"
    if lines[0] == MARKER:
        assert DATE.search(header), where + "no date (YYYY-MM-DD HH:MM UTC)"
        assert "torch " in header, where + "no torch version"
    assert any(ln.startswith("|") or ln.startswith("```") for ln in lines[2:]), f"{name}: no table or output"


def test_fragment_writer_header_is_what_the_test_reads(tmp_path):
    from hypermc import _results

    out = "progress line\n| a | b |\n|---|---:|\n| x | 1 |\ntrailer\n"
    text = _results.fragment(out, "python benchmarks/bench_accuracy.py --samples 10", 1.25)
    lines = text.splitlines()
    assert lines[0] == _results.MARKER
    assert lines[1].startswith("`python benchmarks/bench_accuracy.py --samples 10` printed this at commit ")
    assert "wall time 1.2 s" in lines[1] and DATE.search(lines[1]) and MACHINE.search(lines[1])
    assert lines[3:] == ["| a | b |", "|---|---:|", "| x | 1 |"]
    fenced = _results.fragment("no table here\n", "python benchmarks/bench_accuracy.py", 0.5).splitlines()
    assert fenced[3:] == ["```", "no table here", "```"]
    argv = [str(ROOT / "benchmarks" / "bench_ops.py"), "--ops", "add", "--write-results", "x.md", "--markdown"]
    assert _results.command(argv) == "python benchmarks/bench_ops.py --ops add --markdown"
    with pytest.raises(ValueError, match="--write-results: expected a Markdown file path ending in .md, got 'x.txt'"):
        _results.run(lambda: None, ["script.py", "--write-results", "x.txt"])
    target = tmp_path / "results" / "t.md"
    _results.run(lambda: print("| a |\n|---|\n| 1 |"), [argv[0], "--write-results", str(target)])
    assert target.read_text().splitlines()[3:] == ["| a |", "|---|", "| 1 |"]


README_NUMBER = re.compile(r"\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+")  # a decimal, or an integer with thousands commas
README_LINK = re.compile(r"\]\((?P<page>docs/[\w./-]+\.md)(?:#[\w-]+)?\)")


def _headline_rows() -> list[tuple[str, Path | None]]:
    """(row text, the docs page its last cell links, or None) for the README's headline table."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("## Headline results")
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not TABLE_SEPARATOR.match(line) and not line.startswith("| what "):
            link = README_LINK.search(line.rsplit("|", 2)[-2])
            rows.append((line, ROOT / link.group("page") if link else None))
    return rows


def test_readme_headline_numbers_come_from_the_linked_results():
    """Every decimal number of a README headline row is printed by the page the row links
    (the page with its included results fragments): a rerun that changes a fragment
    cannot leave the README behind. Rows without a docs link (the quickstart's own
    output) are checked against the README itself."""
    rows = _headline_rows()
    assert len(rows) >= 5, rows
    missing = []
    for row, page in rows:
        corpus = "\n".join(_lines(page) if page else (ROOT / "README.md").read_text().splitlines()).replace(",", "")
        cells = row.split("|")[2:-2]  # the numbers, not the row's label or link
        for number in README_NUMBER.findall("|".join(cells)):
            if number.replace(",", "") not in corpus:
                missing.append(f"{number} ({page.relative_to(ROOT) if page else 'README.md'}): {row[:80]}")
    assert not missing, "README headline numbers not found in the linked page or its results:\n" + "\n".join(missing)
