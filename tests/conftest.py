"""Shared test configuration: hypothesis profiles, the cuda marker, seeds, the bound table,
torch threads per pytest-xdist worker.

The bound table ``BOUNDS`` (units of u**nc) lives in ``tests/oracle.py`` next to the
helpers that apply it and is re-exported here; it is the only bound table of the suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo.config
import torch._functorch.config
import torch._inductor.config
from hypothesis import settings

from tests import torch_config
from tests.oracle import BOUNDS  # noqa: F401  (re-export: the one bound table)

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, share the cores among the workers (torch's intra-op threads).

    Every worker is a process whose torch would use all cores: with ``-n auto`` that is
    N workers x N threads, and the spinning OpenMP threads then slow a training test
    many times over (the 100-epoch mammals block of docs/embeddings.md on the busy
    2-core machine under ``-n 2``: 390 s with 2 threads per worker, 88-164 s with 1).
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        torch.set_num_threads(threads)
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # subprocesses of the tests


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``cuda`` on machines without a CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="CUDA not available")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _torch_config_unchanged() -> Iterator[None]:
    """Fail the test that leaves any torch configuration entry changed or removed.

    Change torch configuration in a test only with the config module's own
    ``patch(...)`` (context manager or decorator); ``monkeypatch.setattr`` on a torch
    config module deletes the entry on undo and breaks every later ``torch.compile``.
    """
    before = torch_config.snapshot()
    yield
    changed = torch_config.changes(before, torch_config.snapshot())
    if changed:
        pytest.fail("the test changed torch configuration (use config.patch):\n  " + "\n  ".join(changed), pytrace=False)


@pytest.fixture
def seed() -> int:
    """The seed of every random draw in a test (tests never rely on a global seed)."""
    return 0


@pytest.fixture
def rng(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`seed`."""
    return torch.Generator().manual_seed(seed)
