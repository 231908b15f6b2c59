"""The documentation site (mkdocs.yml) holds every page, and its API reference every public package.

``python -m mkdocs build --strict`` (run by .ci/run) fails on broken links and unknown
cross-references; it only reports a page of ``docs/`` that the navigation leaves out, so
that check is here: a new page must be given its place in the ``nav`` of mkdocs.yml.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PUBLIC_PACKAGES = ("hypermc", "hypermc.mcf", "hypermc.manifolds", "hypermc.nn", "hypermc.optim", "hypermc.embed", "hypermc.data")


def _nav_pages(text: str | None = None) -> list[str]:
    """The page paths named in the ``nav`` of mkdocs.yml (or of ``text``): ``- Title: page.md`` lines."""
    text = (ROOT / "mkdocs.yml").read_text() if text is None else text
    nav = text[text.index("\nnav:") :]
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", nav, re.M)


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    pages = _nav_pages()
    assert "index.md" in pages and len(pages) >= 20, pages
    missing = sorted(p for p in pages if not (DOCS / p).is_file())
    assert not missing, f"mkdocs.yml nav names pages that do not exist: {missing}"
    # docs/results/*.md are results fragments that pages include (mkdocs.yml: exclude_docs), not pages
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p.parent != DOCS / "results")
    left_out = [p for p in on_disk if p not in pages]
    assert not left_out, f"pages of docs/ missing from the nav of mkdocs.yml: {left_out}"
    assert len(pages) == len(set(pages)), "a page is in the nav twice"


def test_api_reference_covers_the_public_packages():
    documented = set()
    for page in (DOCS / "api").glob("*.md"):
        documented.update(re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M))
    assert not set(PUBLIC_PACKAGES) - documented, f"no API page for {sorted(set(PUBLIC_PACKAGES) - documented)}"
    for name in documented:
        path = ROOT / Path(*name.split("."))
        assert path.is_dir() or path.with_suffix(".py").is_file(), f"the API reference names {name}, which is not a module"


def test_the_nav_parser_reads_titles_and_bare_pages():
    text = "site_name: x\n# - commented.md is not a page\nnav:\n  - Home: index.md\n  - api/x.md\n  - Tutorials:\n      - A: b.md\n"
    assert _nav_pages(text) == ["index.md", "api/x.md", "b.md"]
