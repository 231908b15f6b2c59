"""MkDocs hook (mkdocs.yml ``hooks:``): keep ``mkdocs build --strict`` strict about real cross-references.

The docstrings are written for doctest and plain reading, so their prose holds indexing
such as ``x[ia][ib]`` or ``state["step"]`` outside backticks. Markdown reads ``[a][b]`` as
a reference link, and mkdocs-autorefs warns that it cannot find the target ``b``. This hook
lowers exactly those warnings to INFO: a target that is not a dotted Python name (it holds
quotes, digits first, commas, spaces or brackets) cannot be a cross-reference. A missing
target that *is* a dotted name (``hypermc.mcf.no_such``) stays a warning and fails the
strict build.
"""

from __future__ import annotations

import logging
import re

_UNRESOLVED = re.compile(r"Could not find cross-reference target '(?P<target>.*)'$", re.S)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _not_a_reference(record: logging.LogRecord) -> bool:
    m = _UNRESOLVED.search(record.getMessage())
    if record.levelno == logging.WARNING and m and not _DOTTED_NAME.fullmatch(m.group("target")):
        record.levelno, record.levelname = logging.INFO, "INFO"
    return True


logging.getLogger("mkdocs.plugins.mkdocs_autorefs._internal.plugin").addFilter(_not_a_reference)
