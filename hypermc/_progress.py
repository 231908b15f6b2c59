"""The one progress-bar helper of the library (tqdm on stderr, off unless asked for).

Library functions take ``progress: bool`` and never decide on their own whether a
terminal is attached; the CLI (``python -m hypermc``) and the examples pass
:func:`show_progress` of their ``--quiet`` flag.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def show_progress(quiet: bool) -> bool:
    """What a command line passes as ``progress``: stderr is a terminal and no ``--quiet``.

    Example:
        >>> show_progress(quiet=True)
        False
    """
    return not quiet and sys.stderr.isatty()


def progress_bar(progress: bool, total: int | None = None, *, initial: int = 0, unit: str = "it", desc: str | None = None) -> Any:
    """A tqdm bar on stderr; with ``progress=False`` a disabled one (its methods do nothing).

    The bar disappears when closed (``leave=False``), so the last stdout line of a
    command stays its result.

    Args:
        progress: show the bar.
        total: number of steps (``None``: unknown, the bar counts).
        initial: steps already done (a resumed run).
        unit: what one step is (``"epoch"``, ``"chunk"``, ...).
        desc: short label in front of the bar.

    Returns:
        a ``tqdm`` instance; use ``update`` / ``close`` (or ``with``).

    Example:
        >>> with progress_bar(False, total=3, unit="epoch") as bar:  # progress=False: draws nothing
        ...     for _ in range(3):
        ...         bar.update(1)
        >>> bar.disable
        True
    """
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, dynamic_ncols=True, leave=False, disable=not progress)
