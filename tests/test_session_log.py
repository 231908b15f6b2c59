"""tests/session_log.py, the pytest plugin of the device runs: a results line per test as
it ends (kept when an outer ``timeout`` kills pytest) and a per-test time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = """
import pathlib
import time

def test_fast():
    pass

def test_slow():
    pathlib.Path("started").write_text("")
    time.sleep(30)

def test_after():
    pass
"""


def _pytest(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.session_log", "--rootdir", str(tmp_path), *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def _results(path: Path) -> dict[str, dict]:
    return {r["nodeid"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_per_test_timeout_fails_the_test_and_the_run_goes_on(tmp_path):
    log = tmp_path / "results.jsonl"
    proc = _pytest(tmp_path, "--results-log", str(log), "--per-test-timeout", "1", "test_cases.py")
    assert proc.returncode == 1, proc.stdout[-2000:]
    res = _results(log)
    assert [res[f"test_cases.py::{t}"]["outcome"] for t in ("test_fast", "test_slow", "test_after")] == ["passed", "failed", "passed"]
    assert "test_cases.py::test_slow (call) ran past the per-test timeout of 1 s" in res["test_cases.py::test_slow"]["message"]
    assert 1 <= res["test_cases.py::test_slow"]["duration"] < 10


def test_results_survive_a_killed_run(tmp_path):
    """pytest killed inside the slow test (as ``timeout`` does): no summary, no junit
    file, but the finished test is on record."""
    log, junit = tmp_path / "results.jsonl", tmp_path / "junit.xml"
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.session_log"]
    cmd += ["--rootdir", str(tmp_path), "--results-log", str(log), "--junitxml", str(junit), "test_cases.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "started").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "started").exists() and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert not junit.exists()
    assert _results(log)["test_cases.py::test_fast"]["outcome"] == "passed"
    assert "test_cases.py::test_slow" not in _results(log)


def test_a_bad_timeout_is_refused(tmp_path):
    proc = _pytest(tmp_path, "--per-test-timeout", "0", "test_cases.py")
    assert proc.returncode == 4
    assert "--per-test-timeout must be a positive number of seconds; got 0.0" in proc.stderr


@pytest.mark.parametrize("flag", ["--results-log", "--per-test-timeout"])
def test_options_are_documented(flag):
    assert flag in (ROOT / "tests" / "session_log.py").read_text().split('"""')[1]
