"""The documentation is executable and its links resolve.

Every ```python block in README.md and docs/*.md runs (each in a fresh namespace, in a
temporary working directory, blocks of one file in order), and every relative link
``[text](path#anchor)`` names an existing file and, with an anchor, an existing heading
(GitHub's slug rule: lower case, punctuation dropped, spaces to hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# torch's Inductor emits the first while compiling (docs/numerics.md compiles MC code),
# torch_geometric's import the second (docs/gnn.md imports it); not ours.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# optional dependencies a block may import: module -> how to install it (.ci/run does)
OPTIONAL = {"torch_geometric": 'pip install "hypermc[pyg]"'}
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _blocks():
    for path in DOCS:
        for m in _BLOCK.finditer(path.read_text()):
            line = path.read_text().count("\n", 0, m.start()) + 1
            yield pytest.param(path, m.group(1), id=f"{path.relative_to(ROOT)}:{line}")


def _slug(heading: str) -> str:
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


@pytest.mark.parametrize("path, code", list(_blocks()))
def test_python_block_runs(path, code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(code, str(path), "exec"), {"__name__": "__doc_block__"})
    except ModuleNotFoundError as e:
        if e.name not in OPTIONAL:
            raise
        pytest.skip(f"{path.name}: the block needs {e.name}, an optional dependency ({OPTIONAL[e.name]})")
    out = capsys.readouterr().out
    assert not re.search(r"\bnan\b", out.lower()), f"{path.name} printed a NaN:\n{out}"


def test_every_doc_page_has_been_checked():
    assert len(DOCS) >= 8 and all(p.exists() for p in DOCS)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    text = path.read_text()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # links inside code are code
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target} (no file {dest})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.name})")
    assert not broken, f"{path.name}: broken links: {broken}"


def test_readme_is_a_front_page():
    """The README stays a front page (<= 150 lines): what the library is, install, the
    two commands, a quickstart, one table of headline results, links to the docs."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"
    sections = [line[3:] for line in lines if line.startswith("## ")]
    assert sections == ["Install", "The two commands", "Quickstart", "Headline results", "Documentation"], sections
    install = "\n".join(lines[lines.index("## Install") : lines.index("## The two commands")])
    assert "--index-url https://download.pytorch.org/whl/cpu" in install, "the CPU build's install line"
