"""The script modes that print the docs' summary tables (a table is one command's output).

* ``examples/lowprec_summary.py``: README.md's low-precision summary (``--table loss``) and
  docs/low_precision.md's time-per-epoch table (``--table time``); its losses equal those
  of the experiment scripts' own tables;
* ``benchmarks/bench_ops.py --markdown --pivot size`` and ``benchmarks/bench_matmul.py
  --markdown``: the two tables of docs/benchmarks.md.

The runs are cut to an epoch or two and tiny sizes: these tests check layouts and wiring,
not numbers.
"""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *argv: str) -> str:
    """stdout of ``python <script> <argv>``, run in this process (sibling modules unloaded after)."""
    path = ROOT / script
    before = set(sys.modules)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = [str(path), *argv], [str(path.parent)]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        for mod in set(sys.modules) - before:
            if str(getattr(sys.modules[mod], "__file__", "") or "").startswith(str(path.parent)):
                del sys.modules[mod]
    return out.getvalue()


def _table(text: str) -> list[list[str]]:
    """The cells of the last markdown table in ``text`` (header first, separator dropped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    return [row for row in cells if not all(re.fullmatch(r":?-+:?", c) for c in row)]


def test_lowprec_summary_loss_matches_the_experiment_tables():
    args = ("--epochs", "2", "--threads", "1", "--quiet", "--experiments", "linear", "logistic-synthetic")
    summary = _table(_run("examples/lowprec_summary.py", *args))
    assert summary[0] == ["experiment", "torch fp16", "MC fp16 nc=2"]
    assert [row[0] for row in summary[1:]] == ["linear regression", "logistic regression, synthetic"]
    common = ("--epochs", "2", "--threads", "1", "--quiet", "--columns", "loss")
    tables = [
        _table(_run("examples/lowprec_linear_regression.py", *common)),
        _table(_run("examples/lowprec_logistic_regression.py", "--dataset", "synthetic", *common)),
    ]
    for row, table in zip(summary[1:], tables):
        vs = {r[0]: float(r[2].removesuffix(" %")) for r in table[1:]}  # method -> vs torch fp32 (3 decimals)
        for label, cell in zip(summary[0][1:], row[1:]):
            value = float(cell.removesuffix(" %").replace(",", ""))
            tol = 0.5 if abs(value) >= 100 else 0.05 if abs(value) >= 10 else 0.0005  # the summary's rounding
            assert abs(value - vs[label]) <= tol, (label, cell, vs[label])


def test_lowprec_summary_default_epochs_are_the_scripts():
    """Without ``--epochs`` every experiment runs its script's own setting (200 for linear regression)."""
    summary = _table(_run("examples/lowprec_summary.py", "--threads", "1", "--quiet", "--experiments", "linear"))
    table = _table(_run("examples/lowprec_linear_regression.py", "--threads", "1", "--quiet", "--columns", "loss"))
    vs = {r[0]: r[2] for r in table[1:]}
    assert summary[1] == ["linear regression", "+35,228 %", vs["MC fp16 nc=2"]]
    assert vs["torch fp16"].startswith("+35227.")


def test_lowprec_summary_time_has_a_column_per_method():
    out = _run("examples/lowprec_summary.py", "--table", "time", "--epochs", "1", "--quiet", "--experiments", "linear")
    table = _table(out)
    methods = ["torch fp16", "torch fp32", "torch fp64", "MC fp16 nc=1", "MC fp16 nc=2", "MC fp16 nc=3", "MC fp32 nc=2"]
    assert table[0] == ["experiment", *methods]
    assert table[1][0] == "linear regression" and all(float(c) > 0 for c in table[1][1:])
    assert re.search(r"\|-+:\|", out), "the number columns are right-aligned"


def test_lowprec_summary_percent_format():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from lowprec_summary import percent, sig3
    finally:
        sys.path.remove(str(ROOT / "examples"))
        for mod in [m for m in sys.modules if m.startswith("lowprec_")]:
            del sys.modules[mod]
    assert [percent(v) for v in (35227.745, 11.003, -0.0974, 0.0)] == ["+35,228 %", "+11.0 %", "-0.097 %", "+0.000 %"]
    assert [sig3(v) for v in (2102.4, 12.61, 0.6604)] == ["2102", "12.6", "0.660"]


def test_bench_ops_pivot_size():
    out = _run(
        "benchmarks/bench_ops.py",
        *("--ops", "add", "--dtypes", "float32", "--nc", "2", "--sizes", "1000", "4000", "--threads", "1", "2"),
        *("--cpu-time", "--repeats", "3", "--warmup", "1", "--budget", "0.05", "--no-ref", "--markdown", "--pivot", "size"),
    )
    table = _table(out)
    assert table[0][:3] == ["op", "dtype", "nc"] and table[0][-1] == "target"
    assert [h.split(":")[0] for h in table[0][3:-1]] == ["1000, 1 thread", "4000, 1 thread", "1000, 2 threads", "4000, 2 threads"]
    assert table[1][:3] == ["add", "float32", "2"] and table[1][-1] == "<= 25x"
    assert all(re.fullmatch(r"[\d.]+x \([\d.]+x\)", c) for c in table[1][3:-1])


def test_bench_ops_pivot_nc_unchanged():
    out = _run(
        "benchmarks/bench_ops.py",
        *("--ops", "add", "--dtypes", "float64", "--nc", "2", "3", "--sizes", "1000", "--threads", "1"),
        *("--repeats", "3", "--warmup", "1", "--budget", "0.05", "--no-ref", "--markdown"),
    )
    table = _table(out)
    assert table[0] == ["op", "dtype", "nc = 2: MC", "nc = 3: MC"]
    assert table[1][:2] == ["add", "float64"] and len(table) == 2


def test_bench_matmul_markdown():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_matmul import markdown_table
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
        del sys.modules["bench_matmul"]
    cells = {("matmul", "float32", 2): {"MC@T": "15.2x (15.1x)", "MC@MC": "16.5x (16.8x)"}, ("matmul", "float64", 2): {"MC@T": "37.0x"}}
    assert markdown_table(cells, several_nc=False).splitlines() == [
        "| product | dtype | MC @ Tensor | MC @ MC | target |",
        "|---|---|---:|---:|---|",
        "| Matmul (500x200)@(200x50) | float32 | 15.2x (15.1x) | 16.5x (16.8x) | <= 20x |",
        "| Matmul (500x200)@(200x50) | float64 | 37.0x | - |  |",
    ]


def test_bench_defaults_tables(tmp_path):
    """bench_defaults' run table (for its results fragment: no commit column) and its
    ``--table`` of a JSON-lines file (each row's commit)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_defaults", ROOT / "benchmarks" / "bench_defaults.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = {k: i for i, k in enumerate(mod._COLUMNS)} | {"load_start": 0.5, "load_end": 0.7, "commit": "abc1234"}
    run = _table(mod.markdown([row], commit=False))
    assert run[0] == [*mod._COLUMNS, "load (start-end)"] and run[1][-1] == "0.5-0.7" and len(run) == 2
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(row) + "\n\n" + json.dumps(row | {"seed": 9}) + "\n")
    listed = _table(mod.table(str(path)))
    assert listed[0][-1] == "commit" and [r[-1] for r in listed[1:]] == ["abc1234", "abc1234"]
    assert listed[2][mod._COLUMNS.index("seed")] == "9"
    # --set groups: numbers of the settable keys, and clear errors otherwise
    assert mod.parse_set(["scale=3", "epochs=300", "batch_size=256"]) == {"scale": 3.0, "epochs": 300, "batch_size": 256}
    with pytest.raises(ValueError, match=r"--set: expected KEY=VALUE with KEY one of epochs, .*; got 'seed=1'"):
        mod.parse_set(["seed=1"])
    with pytest.raises(ValueError, match=r"--set: epochs must be a int; got '3.5'"):
        mod.parse_set(["epochs=3.5"])
    with_set = _table(mod.markdown([row | {"batch_size": 512, "lr": 5.0}], commit=False))
    assert "batch_size" in with_set[0] and "lr_end_mult" in with_set[0]


def test_bench_ops_ab_compares_two_checkouts_in_turns():
    # this checkout against itself: same bits in every case, one row per op x dtype x nc
    out = _run(
        "benchmarks/bench_ops_ab.py",
        *("--base", str(ROOT), "--ops", "add", "tanh", "--dtypes", "float64", "--nc", "2", "3"),
        *("--size", "512", "--rounds", "2", "--budget", "0.01", "--markdown"),
    )
    assert re.search(r"^results note: base: commit \w+; 512 elements, fastest of 2 rounds per side, 1 thread$", out, re.M)
    table = _table(out)
    assert table[0] == ["op", "dtype", "nc", "base ms", "current ms", "current/base", "base / native", "current / native", "same bits"]
    cases = [[op, "float64", nc] for nc in ("2", "3") for op in ("add", "tanh")]
    assert [row[:3] for row in table[1:]] == cases
    assert all(row[-1] == "yes" for row in table[1:])


def test_bench_ops_ab_refuses_bad_arguments():
    for argv in (["--ops", "add"], ["--base", str(ROOT), "--nc", "1"]):  # no --base; nc = 1 is plain torch
        with pytest.raises(SystemExit) as exc:
            _run("benchmarks/bench_ops_ab.py", *argv)
        assert exc.value.code == 2  # argparse's usage error
