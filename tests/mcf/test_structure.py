"""Code shape of ``hypermc.mcf``: a thin tensor class over a functional core.

The kernels (component tensors in, component tensors out) never import ``tensor`` (the
``MCTensor`` class) or ``ops`` (its op table), every import is a plain module-level
import (no ``importlib``, no imports of hypermc modules inside functions to dodge a
cycle), and each kernel module can be imported on its own, before ``tensor`` exists.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

MCF = Path(__file__).resolve().parents[2] / "hypermc" / "mcf"
SOURCES = sorted(MCF.rglob("*.py"))


def _module(path: Path) -> str:
    """Dotted name of a source below ``hypermc/mcf`` (``native/cuda.py`` -> ``native.cuda``,
    a package's ``__init__.py`` -> the package; ``hypermc/mcf/__init__.py`` -> ``__init__``)."""
    parts = list(path.relative_to(MCF).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package(path: Path) -> list[str]:
    """The package a source's relative imports start from (as a list of names below mcf)."""
    parts = list(path.relative_to(MCF).parent.parts)
    return parts


# The class, its op table and the package: everything else is a kernel module.
CLASS_MODULES = {"__init__", "tensor", "ops"}
KERNELS = sorted(_module(p) for p in SOURCES if _module(p) not in CLASS_MODULES)
# The algorithms call the fused kernels through the registry; the backend imports them
# (its self-check) and registers itself: no cycle.
KNOWN_CYCLES: list[set[str]] = []
ALGORITHMS = ("arith", "elementary", "fixed", "eft", "reduce", "matmul", "exact")
BACKEND = {"native", "native.cuda", "native.fused", "native.source", "native.trace", "compile"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _mcf_targets(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """Modules of ``hypermc.mcf`` (dotted names below it) that an import statement of the
    source ``path`` imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [n.removeprefix("hypermc.mcf.") for n in names if n.startswith("hypermc.mcf.")]
    if node.level > 0:
        base = _package(path)
        if node.level - 1 > len(base):
            return []  # above hypermc.mcf (hypermc._checks, ...)
        base = base[: len(base) - (node.level - 1)]
        if node.module is None:  # from . import x: x is a module of that package
            return [".".join([*base, a.name]) for a in node.names]
        target = [*base, *node.module.split(".")]
        mods = {_module(p) for p in SOURCES}
        # from .x import y: y may itself be a module of package x
        subs = [".".join([*target, a.name]) for a in node.names if ".".join([*target, a.name]) in mods]
        return subs or [".".join(target)]
    if node.level == 0 and node.module and node.module.startswith("hypermc.mcf."):
        return [node.module.removeprefix("hypermc.mcf.")]
    return []


def _is_hypermc(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "hypermc"
    return any(a.name.split(".")[0] == "hypermc" for a in node.names)


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Module-level import graph of ``hypermc.mcf`` (statements in the module body)."""
    graph = {}
    for path in SOURCES:
        edges = set()
        for node in _tree(path).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_mcf_targets(node, path))
        graph[_module(path)] = edges - {_module(path)}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_sources_are_found():
    assert {"arith", "eft", "elementary", "reduce", "matmul", "compile", "tensor", "ops", "native", "native.source"} <= {
        _module(p) for p in SOURCES
    }
    assert "tensor" not in KERNELS and "arith" in KERNELS


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(MCF)))
def test_no_importlib(path):
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "importlib" for a in node.names), f"{path.name}:{node.lineno}"
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] != "importlib", f"{path.name}:{node.lineno}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "__import__", f"{path.name}:{node.lineno}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(MCF)))
def test_no_function_level_imports_of_hypermc_modules(path):
    """Imports of hypermc modules sit at the top of the module, never in a function or
    class body (where they would hide an import cycle)."""
    bad = []
    for scope in ast.walk(_tree(path)):
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            for node in ast.walk(scope):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and _is_hypermc(node):
                    bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "function-level imports of hypermc modules:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", KERNELS)
def test_kernels_never_reach_the_tensor_class(name):
    reached = _reachable(_graph(), name)
    assert not reached & {"tensor", "ops"}, f"{name} imports {sorted(reached & {'tensor', 'ops'})}"


def test_tensor_imports_the_kernels_and_ops_imports_tensor():
    graph = _graph()
    assert {"arith", "exact", "compile", "eft"} <= graph["tensor"]
    assert "ops" not in _reachable(graph, "tensor")
    assert {"tensor", "arith", "elementary", "reduce", "matmul"} <= graph["ops"]
    assert {"tensor", "ops"} <= graph["__init__"]


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_algorithms_never_reach_the_backend(name):
    reached = _reachable(_graph(), name)
    assert not reached & BACKEND, f"{name} imports {sorted(reached & BACKEND)}"


def test_the_package_imports_the_backend_which_registers_itself():
    assert "native" in _graph()["__init__"] and "registry" in _graph()["native"]


def test_the_only_import_cycle_is_the_known_one():
    graph = _graph()
    cycles = [{a, *{b for b in _reachable(graph, a) if a in _reachable(graph, b)}} for a in graph if a in _reachable(graph, a)]
    assert all(c in KNOWN_CYCLES for c in cycles), cycles


_IMPORT_ALONE = """
import importlib, sys, types
from pathlib import Path

root = Path(sys.argv[1])
for name in sys.argv[2:]:
    for mod in [m for m in sys.modules if m == "hypermc" or m.startswith("hypermc.")]:
        del sys.modules[mod]
    # bare parent packages: their __init__ (which imports the class) does not run
    for pkg, path in (("hypermc", root), ("hypermc.mcf", root / "mcf")):
        stub = types.ModuleType(pkg)
        stub.__path__ = [str(path)]
        sys.modules[pkg] = stub
    importlib.import_module("hypermc.mcf." + name)
    leaked = sorted({"hypermc.mcf.tensor", "hypermc.mcf.ops"} & set(sys.modules))
    assert not leaked, (name, leaked)

for mod in [m for m in sys.modules if m == "hypermc" or m.startswith("hypermc.")]:
    del sys.modules[mod]
import torch
import hypermc.mcf.arith
assert "hypermc.mcf.ops" in sys.modules  # the package imports the op table
x = hypermc.mc([1.0, 2.0], nc=2, dtype=torch.float64)
assert (x + x).approx().tolist() == [2.0, 4.0]
print("ok")
"""


def test_each_kernel_imports_before_the_tensor_class():
    """In a fresh interpreter, every kernel module imports on its own (parent packages
    bare, so nothing has imported ``tensor``) without pulling in ``tensor`` or ``ops``;
    then ``import hypermc.mcf.arith`` the normal way works."""
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALONE, str(MCF.parent), *KERNELS],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=MCF.parents[1],
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
