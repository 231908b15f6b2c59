"""The fused-kernel registry and the one build / load / self-check / fall-back state machine.

Layers. The algorithms (:mod:`~hypermc.mcf.arith`, :mod:`~hypermc.mcf.elementary`) are
the reference and the fallback: they :func:`call` a kernel by op name and run their torch
path where none is registered or where it returns None. A backend registers its kernels
here (:mod:`~hypermc.mcf.native`, imported by the package); it imports the algorithms
for its self-check, never the other way round, so ``hypermc.mcf`` has no import cycle.

State. Every compiled thing (a per-op library, a fused expression, a manifold kernel
library) has a key and one life, :func:`load`: ``HYPERMC_NATIVE=0``, or open it (build
and load, or the reason it cannot be: no compiler, a failed build), self-check it against
the torch path (the checked ops reach it re-entrantly meanwhile: :func:`trial`), then in
use or disabled with the reason (one ``RuntimeWarning``). The outcome is kept per key for
the process; :func:`state` reads it without building; :func:`reset` forgets all.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from .eft import real_tensors_only

__all__ = [
    "register",
    "register_inline",
    "call",
    "load",
    "current",
    "state",
    "trial",
    "reset",
    "disabled",
    "IN_USE",
    "NOT_BUILT",
    "DISABLED",
]

IN_USE = "in use"
NOT_BUILT = "not built yet"
#: The reason of every key while ``HYPERMC_NATIVE`` is 0 (or false, no, off).
DISABLED = "disabled by HYPERMC_NATIVE=0"
#: The usual cause of a failed self-check, for the warnings.
HINT = "(a compiler that contracts or reassociates?)"

lock = threading.RLock()
_kernels: dict[str, Callable[..., Any]] = {}
_inline: dict[str, Callable[..., Any]] = {}
_states: dict[Hashable, Any] = {}  # key -> the loaded object (in use) or the reason there is none


def register(*kernels: Callable[..., Any]) -> None:
    """Make each of ``kernels`` the fused kernel of the op of its name (it returns None
    where it does not apply).

    Example:
        >>> def doctest_negate(x):
        ...     return -x
        >>> register(doctest_negate)
        >>> call("doctest_negate", 2.0)
        -2.0
    """
    for kernel in kernels:
        _kernels[kernel.__name__] = kernel


def register_inline(op: str, form: Callable[..., Any]) -> None:
    """Make ``form`` what :func:`call` answers for ``op`` on symbolic operands, while a
    kernel generator traces a network that calls ``op``: the statements of the fused
    kernel itself, so the generated code inlines the kernel (with its own frame, as
    division's one-step scaling) where tracing the torch path would reach a step that
    has no straight-line form. ``form`` returns an object with ``patched(general,
    *operands)``, like a kernel's result, or None where it does not apply.

    Example:
        >>> register_inline("doctest_twice", lambda x: None)
        >>> class Symbolic:
        ...     symbolic = True
        >>> call("doctest_twice", Symbolic()) is None  # the form does not apply: trace the torch path
        True
    """
    _inline[op] = form


def call(op: str, *args: Any) -> Any | None:
    """The registered kernel of ``op`` on ``args`` (None where it does not apply), or None
    where no backend registered one. On symbolic operands (a kernel generator tracing the
    torch network) the inline form of :func:`register_inline`, or None: the torch network
    itself is traced.

    Example:
        >>> call("no such op", 1.0) is None
        True
    """
    if args and getattr(args[0], "symbolic", False):
        form = _inline.get(op)
        return None if form is None else form(*args)
    kernel = _kernels.get(op)
    return None if kernel is None else kernel(*args)


def disabled() -> bool:
    """Whether ``HYPERMC_NATIVE`` turns every compiled kernel off.

    Example:
        >>> disabled() == (os.environ.get("HYPERMC_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"))
        True
    """
    return os.environ.get("HYPERMC_NATIVE", "1").strip().lower() in ("0", "false", "no", "off")


def load(
    key: Hashable,
    open_: Callable[[], Any],
    check: Callable[[Any], str | None] | None = None,
    warning: Callable[[str], str] = "{} differs from the torch path; using the torch path".format,
) -> Any | None:
    """The object of ``key`` if it is in use, else None; opened and checked once per process.

    ``open_()`` returns the built and loaded object, or a string: why there is none.
    ``check(obj)`` returns None or what disagrees with the torch path; then ``warning(what)``
    is warned once and the reason is ``"self-check failed: what"``.

    Example:
        >>> load(("doctest", "twice"), lambda: (lambda x: 2 * x), lambda f: None if f(2) == 4 else "twice")(3)
        6
        >>> state(("doctest", "twice")), state(("doctest", "never asked for"))
        ('in use', 'not built yet')
    """
    obj = _states.get(key)
    if obj is None:
        with lock:
            obj = _states.get(key)
            if obj is None:
                obj = _states[key] = _open(key, open_, check, warning)
    return None if isinstance(obj, str) else obj


def _open(key: Hashable, open_: Callable[[], Any], check: Callable[[Any], str | None] | None, warning: Callable[[str], str]) -> Any:
    if disabled():
        return DISABLED
    # the first use may come while torch.compile traces (fake tensors): the build and the
    # self-check run on real tensors, outside every dispatch mode, and the code they run
    # (the generators' traced networks, the torch path they are checked against) makes
    # eager mode's choices, not a trace's (eft.real_tensors_only)
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), real_tensors_only():
        return _open_real(key, open_, check, warning)


def _open_real(key: Hashable, open_: Callable[[], Any], check: Callable[[Any], str | None] | None, warning: Callable[[str], str]) -> Any:
    obj = open_()
    if isinstance(obj, str) or check is None:
        return obj
    with trial(key, obj):
        bad = check(obj)
    if bad:
        warnings.warn(warning(bad), RuntimeWarning, stacklevel=6)
        return f"self-check failed: {bad}"
    return obj


@contextlib.contextmanager
def trial(key: Hashable, obj: Any) -> Iterator[None]:
    """``obj`` stands for ``key`` inside the block (its self-check); the state before is restored.

    Example:
        >>> with trial(("doctest", "trial"), "stand-in"):
        ...     current(("doctest", "trial"))
        'stand-in'
        >>> current(("doctest", "trial")) is None
        True
    """
    before = _states.get(key)
    _states[key] = obj
    try:
        yield
    finally:
        if before is None:
            del _states[key]
        else:
            _states[key] = before


def current(key: Hashable) -> Any | None:
    """The object of ``key`` in use, the reason it is not, or None before its first :func:`load`.

    Example:
        >>> current(("doctest", "never loaded")) is None
        True
    """
    return _states.get(key)


def state(key: Hashable) -> str:
    """``"in use"``, ``"not built yet"`` or the reason ``key`` is not used; builds nothing.

    Example:
        >>> state(("doctest", "never loaded"))
        'not built yet'
    """
    obj = _states.get(key)
    return NOT_BUILT if obj is None else obj if isinstance(obj, str) else IN_USE


def reset() -> None:
    """Forget every outcome (the next use opens and checks again).

    Example:
        >>> _ = load(("doctest", "reset"), lambda: "no compiler here")
        >>> state(("doctest", "reset"))
        'no compiler here'
        >>> reset()
        >>> state(("doctest", "reset"))
        'not built yet'
    """
    with lock:
        _states.clear()
