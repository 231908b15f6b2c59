"""The docs, docstrings and comments describe the library as it is, not the project's work history.

Phrases such as "stop 26", "since stop 29", "issue #16's targets" or "a helper found" name
steps of the project's own work and mean nothing to a user. They belong in CHANGELOG.md
(the one file not searched). This test searches README.md, docs/, hypermc/, examples/,
benchmarks/, tests/, .ci/, pyproject.toml, mkdocs.yml and mkdocs_hooks.py (every text file
but this one, whose examples must name the phrases) and fails listing each hit as
``file:line: text``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = (
    "README.md",
    "docs",
    "hypermc",
    "examples",
    "benchmarks",
    "tests",
    ".ci",
    "pyproject.toml",
    "mkdocs.yml",
    "mkdocs_hooks.py",
)
SKIPPED = {"CHANGELOG.md", Path(__file__).name}  # the history itself; this file's examples
SUFFIXES = {".md", ".py", ".sh", ".yml", ".yaml", ".toml", ".txt", ".cpp", ".h", ".cu", ".rst", ""}
HISTORY = re.compile(
    "|".join(
        (
            r"\bstops? [0-9]+\b",
            r"\bissue #?[0-9]+\b",
            r"review helper",
            r"a helper (found|did|wrote)",
            r"(?<!\bof an )\bearlier runs?\b",  # not a user's own run: "the points of an earlier run"
            r"\bformer defaults?\b",
            r"\bnot (been )?re-?run\b",
            r"\bfirst committed\b",
            r"\bsessions?'",
            r"\bthe old table\b",
            r"\ban earlier measurement\b",
            r"\bat commit [0-9a-f]{7,40},? before\b",  # "at commit abc1234, before the kernel, it printed ..."
            r"\d\s*\w*\s+now\)",  # "(67.8 s now)": a comparison with the library's past
        )
    ),
    re.I,
)


def _files() -> list[Path]:
    files = []
    for name in SEARCHED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            if "__pycache__" in p.parts or p.name in SKIPPED or p.suffix not in SUFFIXES:
                continue
            files.append(p)
    return files


def history_hits(files: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line: text`` (path relative to ``root``) for every line that names a step of the work history."""
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file (a picture, a data file): no prose
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if HISTORY.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def test_no_work_history_in_docs_docstrings_and_comments():
    files = _files()
    assert any(p.suffix == ".py" for p in files) and any(p.suffix == ".md" for p in files), "the search found no files"
    hits = history_hits(files)
    assert not hits, "work-history words (move them to CHANGELOG.md; describe the library as it is):\n" + "\n".join(hits)


def test_the_pattern_finds_history_words(tmp_path):
    lines = [
        "fused since stop 29 (staged kernels)",
        "on an H200 (stop 26, before the narrower remainders)",
        "issue #16's GPU targets met",
        "Design (issue 16, part B).",
        "The review helper's table",
        "a helper found the stall",
        "stops 26-30",
        "An earlier run (commit 9186562) printed the same digits",
        "the same digits as earlier runs",
        "The former defaults ran 1,000 exact epochs",
        "(commit c4d78d1, 2-core x86-64 VM, not rerun since)",
        "every digit as first committed in e3a8a4c",
        "about nine other sessions' jobs on the two cores",
        "the constant lr 5 of the old table",
        "see docs/reliability.md (Issue #18 checklist)",
    ]
    clean = [
        "a stop-gradient",
        "the loop stops when n = 0",
        "tissue 16",
        "see the issues page",
        "the helper function _rows",
        "start from the points of an earlier run (its directory or checkpoint.pt)",
        "the former is exact, the latter rounds",
        "a rerun gives the same digits",
        "gpu_session.sh runs the cuda tests",
        "session_id = 'gpu'",
        "an old table of contents",
    ]
    bad = tmp_path / "bad.md"
    bad.write_text("\n".join(lines + clean) + "\n")
    hits = history_hits([bad], root=tmp_path)
    assert hits == [f"bad.md:{i}: {line}" for i, line in enumerate(lines, 1)]


def test_changelog_holds_the_history():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog")
    assert re.search(r"^## \[0\.1\.0\]", text, re.M), "a section per version, Keep a Changelog style"
