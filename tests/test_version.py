"""hypermc.__version__: the package metadata's version, pyproject.toml's in a source tree."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

import hypermc
from hypermc._version import UNKNOWN, package_version, source_tree_version

ROOT = Path(__file__).resolve().parents[1]
#: PEP 440's public version segments (release, pre, post, dev) and an optional local label.
PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")


def test_version_is_the_installed_metadata():
    # .ci/run installs hypermc before the tests, so the metadata exists
    assert hypermc.__version__ == metadata.version("hypermc")
    assert PEP440.match(hypermc.__version__), hypermc.__version__


def test_installed_metadata_matches_pyproject():
    installed = metadata.version("hypermc")
    assert source_tree_version(ROOT / "pyproject.toml") == installed, (
        "pyproject.toml's version differs from the installed metadata: reinstall (pip install -e .)"
    )


def _pyproject(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_source_tree_fallback_reads_the_project_table(tmp_path):
    path = _pyproject(
        tmp_path,
        '[build-system]\nrequires = ["setuptools"]\n\n[tool.other]\nversion = "9.9"\n\n'
        '[project]\nname = "hypermc"\ndescription = "x"\nversion = "2.0.1rc1"\n\n[tool.later]\nversion = "8.8"\n',
    )
    assert package_version("hypermc-not-installed-anywhere", pyproject=path) == "2.0.1rc1"


def test_source_tree_fallback_ignores_a_version_outside_the_project_table(tmp_path):
    path = _pyproject(tmp_path, '[project]\nname = "hypermc"\ndynamic = ["version"]\n\n[tool.other]\nversion = "9.9"\n')
    assert source_tree_version(path) is None
    assert package_version("hypermc-not-installed-anywhere", pyproject=path) == UNKNOWN


@pytest.mark.parametrize(
    "text",
    [None, '[project]\nname = "other"\nversion = "1.0"\n'],
    ids=["no pyproject.toml", "another project's pyproject.toml"],
)
def test_unknown_without_metadata_or_source_tree(tmp_path, text):
    path = tmp_path / "pyproject.toml" if text is None else _pyproject(tmp_path, text)
    assert package_version("hypermc-not-installed-anywhere", pyproject=path) == UNKNOWN
    assert PEP440.match(UNKNOWN)


def test_metadata_wins_over_the_source_tree(tmp_path):
    path = _pyproject(tmp_path, '[project]\nname = "hypermc"\nversion = "7.7.7"\n')
    assert package_version("hypermc", pyproject=path) == metadata.version("hypermc")
