"""Snapshots of torch's configuration modules, for the suite-wide guard in conftest.

torch keeps the values of ``torch._dynamo.config``, ``torch._inductor.config``,
``torch._functorch.config`` and its other config modules outside the module's
``__dict__``. Changing one with ``monkeypatch.setattr`` undoes the change with a
``delattr``, which hides the entry, and every later ``torch.compile`` in the process
fails with "... does not exist". Tests change torch configuration only through the
module's own ``config.patch(...)``; the guard compares every entry before and after each
test so that any other change fails the test that made it.
"""

from __future__ import annotations

import sys
from typing import Any

from torch.utils._config_module import ConfigModule

Snapshot = dict[str, dict[str, Any]]


def config_modules() -> dict[str, ConfigModule]:
    """The torch configuration modules imported so far, by module name."""
    return {name: mod for name, mod in list(sys.modules.items()) if isinstance(mod, ConfigModule)}


def _entries(mod: ConfigModule) -> dict[str, Any]:
    # get_config_copy() still lists an entry that a delattr hid (reading it then raises
    # "... does not exist"), so a hidden entry counts as removed
    hidden = {key for key, entry in mod._config.items() if entry.hide}
    return {key: value for key, value in mod.get_config_copy().items() if key not in hidden}


def snapshot() -> Snapshot:
    """Every visible entry of every imported torch configuration module."""
    return {name: _entries(mod) for name, mod in config_modules().items()}


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values without a usable == (tensors, odd objects): identity only
        return False


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Entries of the modules in ``before`` that are missing, new or different in ``after``."""
    found = []
    for name, old in before.items():
        new = after.get(name, {})
        for key in sorted(old.keys() | new.keys()):
            if key not in new:
                found.append(f"{name}.{key} was removed")
            elif key not in old:
                found.append(f"{name}.{key} was added")
            elif not _same(old[key], new[key]):
                found.append(f"{name}.{key}: {old[key]!r} -> {new[key]!r}")
    return found
