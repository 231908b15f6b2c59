"""A pytest plugin for runs that an outer time limit may cut off (the device sessions of
``benchmarks/gpu_session.sh``): load it with ``-p tests.session_log``.

``--results-log PATH``
    appends one JSON line per test phase report (``nodeid``, ``when``, ``outcome``,
    ``duration``, the first line of the failure) as soon as the phase ends, flushed to
    disk: the tests that finished are on record even when ``timeout`` kills pytest
    before it writes its summary or its ``--junitxml`` file.
``--per-test-timeout SECONDS``
    fails a test whose setup, call or teardown runs longer (``SIGALRM``, so only where
    pytest runs tests in the main thread of a POSIX process, pytest-xdist workers
    included) with ``TestTimeout`` and goes on with the next test. A test blocked
    inside a C call (a kernel compilation, a device synchronisation) is interrupted
    when the call returns; the outer ``timeout`` of the step bounds that case.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest


class TestTimeout(Exception):
    """A test phase ran past ``--per-test-timeout``."""

    __test__ = False  # not a test class


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("session_log", "results that survive an outer timeout")
    group.addoption("--results-log", default=None, metavar="PATH", help="append one JSON line per test phase report, as it ends")
    group.addoption("--per-test-timeout", type=float, default=None, metavar="SECONDS", help="fail a test phase that runs longer (SIGALRM)")


_CONFIG: dict[str, pytest.Config] = {}


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config
    limit = config.getoption("--per-test-timeout")
    if limit is not None and not limit > 0:
        raise pytest.UsageError(f"--per-test-timeout must be a positive number of seconds; got {limit!r}")


@contextlib.contextmanager
def _alarm(seconds: float | None, what: str) -> Iterator[None]:
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TestTimeout(f"{what} ran past the per-test timeout of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _limited(item: pytest.Item, when: str) -> Iterator[None]:
    with _alarm(item.config.getoption("--per-test-timeout"), f"{item.nodeid} ({when})"):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _limited(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _limited(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _limited(item, "teardown")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    path = config.getoption("--results-log") if config is not None else None
    if path is None or getattr(config, "workerinput", None) is not None:  # xdist workers: the controller writes
        return
    if report.when != "call" and report.outcome == "passed":
        return  # a passed setup or teardown says nothing the call's line does not
    first = ""
    if isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
        first = str(report.longrepr[2])
    elif report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else report.longreprtext.strip()
        first = text.splitlines()[0] if text else ""
    line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "duration": round(report.duration, 3)}
    line |= {"message": first, "time": time.strftime("%H:%M:%S")}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
