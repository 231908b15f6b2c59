"""The guard that keeps torch's configuration intact across the suite (tests/torch_config.py)."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch._functorch.config
import torch._inductor.config

from tests import torch_config


def test_a_patch_is_seen_while_active_and_gone_after():
    before = torch_config.snapshot()
    old = torch._functorch.config.enable_autograd_cache
    with torch._functorch.config.patch(enable_autograd_cache=not old):
        during = torch_config.changes(before, torch_config.snapshot())
    assert during == [f"torch._functorch.config.enable_autograd_cache: {old!r} -> {(not old)!r}"]
    assert torch_config.changes(before, torch_config.snapshot()) == []


def test_a_removed_entry_is_reported():
    before = torch_config.snapshot()
    after = {name: dict(entries) for name, entries in before.items()}
    del after["torch._inductor.config"]["fx_graph_cache"]
    assert torch_config.changes(before, after) == ["torch._inductor.config.fx_graph_cache was removed"]


def test_a_deleted_entry_is_reported():
    """What the guard exists for: pytest's undo of ``monkeypatch.setattr`` on a torch config
    module (pytest 9.2) ends in a ``delattr``, which hides the entry from then on."""
    before = torch_config.snapshot()
    try:
        delattr(torch._inductor.config, "fx_graph_cache")
        with pytest.raises(AttributeError, match="fx_graph_cache does not exist"):
            torch._inductor.config.fx_graph_cache  # noqa: B018
        lost = torch_config.changes(before, torch_config.snapshot())
    finally:
        # put the entry back the way torch's own patch() does, so the suite goes on intact
        torch._inductor.config._config["fx_graph_cache"].hide = False
    assert lost == ["torch._inductor.config.fx_graph_cache was removed"]
    assert torch_config.changes(before, torch_config.snapshot()) == []


@pytest.mark.parametrize("module", ["torch._dynamo.config", "torch._inductor.config", "torch._functorch.config"])
def test_the_compile_config_modules_are_watched(module):
    importlib.import_module(module)
    assert module in torch_config.snapshot()
