"""The docstring examples run, and every public name shows one.

``test_doctests`` runs the ``>>>`` examples of every module under ``hypermc/`` with
:mod:`doctest` (``ELLIPSIS | NORMALIZE_WHITESPACE``; the module's globals plus
``torch``, ``hypermc`` and its usual alias ``hm``; ``torch.manual_seed(seed)`` (the
``seed`` fixture) before each docstring; the working directory a fresh temporary one, for examples that write files),
one test per module so that a failure names the module.

``test_public_names_have_examples`` checks that every public function and class of a
module (the names in its ``__all__``, or without ``__all__`` the public functions and
classes it defines) has a docstring with an ``Example:``/``Examples:`` section holding
at least one ``>>>`` line that runs (is not marked ``+SKIP``). A name re-exported by a
package is checked in the module that defines it.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re

import pytest
import torch

import hypermc

MODULES = sorted(info.name for info in pkgutil.walk_packages(hypermc.__path__, "hypermc."))

_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_EXAMPLE_SECTION = re.compile(r"^\s*Examples?:\s*$", re.M)


def test_every_module_is_listed():
    assert {"hypermc.embed.sampler", "hypermc.mcf.eft", "hypermc.optim.riemannian"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name, seed, tmp_path, monkeypatch):
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    globs = {**vars(module), "torch": torch, "hypermc": hypermc, "hm": hypermc}
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name, globs=globs)
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    failures = []
    for test in tests:
        if not test.examples:
            continue
        torch.manual_seed(seed)
        lines: list[str] = []
        result = runner.run(test, out=lines.append, clear_globs=False)
        if result.failed:
            failures.append("".join(lines))
    assert not failures, f"{name}: failing doctests:\n" + "\n".join(failures)


def _defined_here(obj, module) -> bool:
    """A function or class (or a wrapped one, e.g. ``functools.cache``) defined in ``module``."""
    return callable(obj) and not inspect.ismodule(obj) and getattr(obj, "__module__", None) == module.__name__


def _public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for n in names:
        obj = getattr(module, n)
        if _defined_here(obj, module):
            yield n, obj


def _has_example(doc: str | None) -> bool:
    """``doc`` has an ``Example:`` section with a ``>>>`` example that runs (not ``+SKIP``)."""
    if not doc:
        return False
    m = _EXAMPLE_SECTION.search(doc)
    if m is None:
        return False
    examples = doctest.DocTestParser().get_examples(doc[m.end() :])
    return any(not ex.options.get(doctest.SKIP, False) for ex in examples)


@pytest.mark.parametrize("name", MODULES)
def test_public_names_have_examples(name):
    module = importlib.import_module(name)
    missing = [n for n, obj in _public(module) if not _has_example(inspect.getdoc(obj))]
    assert not missing, f"{name}: public names without an 'Example:' section with a '>>>' line that runs: {missing}"


def _methods(cls):
    """Public methods and properties that ``cls`` defines itself (not inherited)."""
    for n, attr in vars(cls).items():
        if n.startswith("_"):
            continue
        func = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        if inspect.isfunction(func):
            yield n, func


def _manifold_and_tensor_classes():
    from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
    from hypermc.manifolds.base import Manifold
    from hypermc.mcf.tensor import MCTensor

    return [Manifold, PoincareBall, PoincareHalfspace, Lorentz, Euclidean, MCTensor]


@pytest.mark.parametrize("cls", _manifold_and_tensor_classes(), ids=lambda c: c.__name__)
def test_public_methods_have_examples(cls):
    """The geometry methods (the API users call most) and MCTensor's accessors show an example each."""
    missing = [n for n, f in _methods(cls) if not _has_example(inspect.getdoc(f))]
    assert not missing, f"{cls.__name__}: public methods without an 'Example:' section: {missing}"
