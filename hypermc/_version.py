"""The installed version of hypermc (``hypermc.__version__``).

The version is written once, in ``pyproject.toml``; an installed hypermc (wheel or
editable install) reports it from its package metadata. A source tree imported without
installing (``PYTHONPATH=.``) has no metadata and reads the ``[project]`` table of the
``pyproject.toml`` beside the package; without either the version is ``"0+unknown"``.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

#: The version reported when neither package metadata nor a source tree's pyproject.toml exists.
UNKNOWN = "0+unknown"
#: The ``version = "..."`` line of pyproject.toml's ``[project]`` table (up to the next table).
_PROJECT_VERSION = re.compile(r'^\[project\]\s*$(?:(?!^\[).)*?^version\s*=\s*"([^"]+)"', re.MULTILINE | re.DOTALL)


def source_tree_version(pyproject: Path) -> str | None:
    """The ``[project]`` version of ``pyproject`` if the file exists and names hypermc, else None.

    Example:
        >>> _ = Path("pyproject.toml").write_text('[project]\\nname = "hypermc"\\nversion = "1.2.3"\\n')
        >>> source_tree_version(Path("pyproject.toml"))
        '1.2.3'
    """
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    if not re.search(r'^name\s*=\s*"hypermc"\s*$', text, re.MULTILINE):
        return None
    match = _PROJECT_VERSION.search(text)
    return match.group(1) if match else None


def package_version(distribution: str = "hypermc", pyproject: Path | None = None) -> str:
    """The version of the installed ``distribution``; for a source tree that is not
    installed, the version in ``pyproject`` (default: the one beside the package);
    :data:`UNKNOWN` without either.

    Example:
        >>> package_version("no-such-distribution", pyproject=Path("/nonexistent/pyproject.toml"))
        '0+unknown'
    """
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        if pyproject is None:
            pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return source_tree_version(pyproject) or UNKNOWN
