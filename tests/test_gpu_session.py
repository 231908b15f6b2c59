"""benchmarks/gpu_session.sh, the device run's script, run on the CPU with ``--dry-run``
(CUDA hidden: its cuda tests skip, bench_ops runs small on the CPU): its steps, their
limits within the budget, and the files it leaves under ``$OUT`` (the device tool
returns at most 8 files, no deeper than 2 folders)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
FILES = {"machine.txt", "steps.log", "session.log", "results.jsonl", "junit.xml", "bench_ops.txt", "gpu_ops.md"}

needs_bash = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")


def _run(out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "OUT": str(out), "GPU_SESSION_REST": "tests/test_oracle.py", "OMP_NUM_THREADS": "1"}
    full |= {"PYTHON": sys.executable, **env}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=900)


@needs_bash
def test_dry_run_runs_every_step_and_leaves_its_files(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {p.name for p in out.iterdir()} == FILES and all(p.is_file() for p in out.iterdir())
    steps = (out / "steps.log").read_text().splitlines()
    assert [line.split()[:2] for line in steps[:4]] == [[name, "rc=0"] for name in ("facts", "native_cuda", "bench_ops", "cuda_rest")]
    assert steps[-1].startswith("wall ")
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    native = [r for r in results if r["nodeid"].startswith("tests/mcf/test_native_cuda.py::test_cuda_")]
    assert len(native) >= 20 and all(r["outcome"] == "skipped" and "CUDA not available" in r["message"] for r in native)
    assert any(r["nodeid"] == "tests/test_oracle.py::test_cuda_marker_runs_only_with_a_device" for r in results)
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["cuda_rest", "native_cuda"]
    assert sum(len(s.findall("testcase")) for s in suites) == len(results)
    assert "| add | float64 |" in (out / "bench_ops.txt").read_text()
    fragment = (out / "gpu_ops.md").read_text()  # the results fragment of the docs' GPU table
    assert fragment.startswith("<!-- results fragment: written by") and "| add | float64 |" in fragment
    machine = (out / "machine.txt").read_text()
    assert "--dry-run" in machine and "cpu torch.float32: 0/0 bits 0x" in machine


@needs_bash
def test_steps_past_the_budget_are_not_started(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, "--dry-run", GPU_SESSION_BUDGET="20")
    assert proc.returncode == 1, proc.stderr[-2000:]  # not every step ran
    steps = (out / "steps.log").read_text().splitlines()
    # the first step gets the whole budget when the script starts within the second it
    # was launched; on a loaded machine that second is gone and it is not started either
    ran = steps[0].startswith("facts rc=0") and "(limit 20s)" in steps[0]
    assert ran or steps[0] == "facts not started: 19s of the 20s budget left", steps[0]
    assert [line.split()[0] for line in steps[1:4]] == ["native_cuda", "bench_ops", "cuda_rest"]
    assert all("not started" in line for line in steps[1:4])


@needs_bash
def test_unknown_arguments_are_refused(tmp_path):
    proc = _run(tmp_path / "out", "--fast")
    assert proc.returncode == 2 and "usage: bash benchmarks/gpu_session.sh [--dry-run]; got: --fast" in proc.stderr
