"""The manifold base class is an ABC that enforces its interface; every public method of
the base class and of every model is fully annotated; curvature is keyword-only; every
model is an ``nn.Module``."""

from __future__ import annotations

import inspect
import typing

import pytest
import torch
from torch import nn

from hypermc.manifolds import Euclidean, Lorentz, Manifold, PoincareBall, PoincareHalfspace

MODELS = [PoincareHalfspace, PoincareBall, Lorentz, Euclidean]
ABSTRACT = {
    "dist",
    "dist0",
    "expmap",
    "logmap",
    "expmap0",
    "logmap0",
    "retr",
    "transp",
    "inner",
    "norm",
    "projx",
    "proju",
    "egrad2rgrad",
    "_origin_values",
}


def _public_methods(cls: type) -> list[str]:
    """The public methods hypermc defines (the models are ``nn.Module`` s: torch's own are not ours)."""
    own = (n for n, v in inspect.getmembers(cls, inspect.isfunction) if v is not getattr(nn.Module, n, None))
    return sorted(n for n in own if not n.startswith("_")) + ["__init__"]


def test_the_abstract_methods():
    assert Manifold.__abstractmethods__ == ABSTRACT
    with pytest.raises(TypeError, match="abstract"):
        Manifold()


def test_an_incomplete_model_cannot_be_instantiated():
    class Incomplete(Manifold):  # only some of the methods
        def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
            return x

    with pytest.raises(TypeError, match=r"Can't instantiate abstract class Incomplete .*expmap"):
        Incomplete()


def test_a_complete_model_can_be_written():
    """Every abstract method implemented: instantiable, and origin / random / check_point /
    dist_batch come from the base class."""
    namespace = {name: getattr(Euclidean, name) for name in ABSTRACT}
    Flat = type("Flat", (Manifold,), namespace)
    M = Flat(curvature=-1.0)
    x = M.random(4, 3, nc=2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert M.check_point(x) == (True, None)
    rows = x.components
    d = M.dist_batch(rows, torch.tensor([0, 1]), torch.tensor([2, 3]))
    torch.testing.assert_close(d, Euclidean().dist_batch(rows, torch.tensor([0, 1]), torch.tensor([2, 3])), rtol=1e-15, atol=0)


@pytest.mark.parametrize("cls", [Manifold, *MODELS], ids=lambda c: c.__name__)
def test_public_methods_are_fully_annotated(cls):
    for name in _public_methods(cls):
        fn = getattr(cls, name)
        hints = typing.get_type_hints(fn)
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        missing = [p for p in [*params, "return"] if p not in hints]
        assert not missing, f"{cls.__name__}.{name}: no annotation for {missing}"


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_options_and_curvature_are_keyword_only(cls):
    for name in (
        "dist",
        "dist0",
        "expmap",
        "logmap",
        "logmap0",
        "inner",
        "norm",
        "check_point",
        "dist_batch",
        "random",
        "origin",
        "__init__",
    ):
        for p in inspect.signature(getattr(cls, name)).parameters.values():
            if p.name in ("keepdim", "check", "atol", "leaf", "cache", "std", "nc", "dtype", "device", "generator", "curvature"):
                assert p.kind is p.KEYWORD_ONLY, f"{cls.__name__}.{name}: {p.name}"


@pytest.mark.parametrize("cls", [PoincareHalfspace, PoincareBall, Lorentz], ids=lambda c: c.__name__)
def test_positional_curvature_is_a_clear_type_error(cls):
    params = inspect.signature(cls).parameters
    assert params["curvature"].kind is inspect.Parameter.KEYWORD_ONLY
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    with pytest.raises(
        TypeError,
        match=rf"{cls.__name__}: curvature must be passed by keyword, e\.g\. "
        rf"{cls.__name__}\(curvature=-2\.0\).*; got 1 positional argument \(-2\.0,\)",
    ):
        cls(-2.0)
    assert cls(curvature=-2.0).curvature == -2.0


def test_euclidean_takes_no_arguments():
    with pytest.raises(TypeError, match="Euclidean: takes no positional arguments; got 1 positional argument"):
        Euclidean(0.0)
    with pytest.raises(TypeError, match="curvature"):
        Euclidean(curvature=0.0)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_every_model_is_a_module_without_parameters(cls):
    """As in geoopt: a fixed model is an ``nn.Module`` with no parameters, so a network can
    hold it as a submodule (listed, moved and saved with it; nothing to train)."""
    net = nn.Module()
    net.manifold = cls()
    net.lin = nn.Linear(2, 2)
    assert isinstance(net.manifold, nn.Module) and dict(net.named_children())["manifold"] is net.manifold
    assert list(net.manifold.parameters()) == [] and set(net.state_dict()) == {"lin.weight", "lin.bias"}
    assert repr(cls()) in repr(net)
