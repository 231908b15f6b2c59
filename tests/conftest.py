"""Shared test configuration: hypothesis profiles, the cuda marker, seeds, the bound table.

The bound table ``BOUNDS`` (units of u**nc) lives in ``tests/oracle.py`` next to the
helpers that apply it and is re-exported here; it is the only bound table of the suite.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

from tests.oracle import BOUNDS  # noqa: F401  (re-export: the one bound table)

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``cuda`` on machines without a CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="CUDA not available")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def seed() -> int:
    """The seed of every random draw in a test (tests never rely on a global seed)."""
    return 0


@pytest.fixture
def rng(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`seed`."""
    return torch.Generator().manual_seed(seed)
