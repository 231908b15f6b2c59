"""``hypermc.backends()`` and ``python -m hypermc doctor``: which path each op takes, and why."""

from __future__ import annotations

import json

import pytest
import torch

import hypermc as hm
from hypermc import doctor
from hypermc.__main__ import main
from hypermc.mcf import native, registry

needs_compiler = pytest.mark.skipif(native._compiler() is None, reason="no C++ compiler on this machine")


@pytest.fixture
def fresh(monkeypatch):
    """A process state in which no library has been opened yet."""
    monkeypatch.setattr(registry, "_states", {})


def test_disabled_by_the_environment_says_torch_and_why(fresh, monkeypatch):
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    rows = hm.backends(device="cpu", dtype="float64")
    assert len(rows) == len(doctor.OPS) * 3 and {r.path for r in rows} == {"torch"}
    served = [r for r in rows if (r.op, r.nc) not in (("sumsq", 4), ("lorentz_dist", 4))]  # no kernel there at all
    assert {r.reason for r in served} == {"disabled by HYPERMC_NATIVE=0"}
    assert registry._states == {}  # nothing was built or loaded


def test_no_compiler(fresh, monkeypatch):
    monkeypatch.setattr(native, "_compiler", lambda: None)
    (row,) = hm.backends("log", "float64", 3, "cpu", build=True)
    assert row == doctor.Backend("log", "float64", 3, "cpu", "torch", "no C++ compiler found (set HYPERMC_CXX)")


@needs_compiler
def test_not_built_yet_then_fused_after_build(fresh):
    (row,) = hm.backends("mul", "float64", 3, "cpu")
    assert (row.path, row.reason) == ("torch", "not built yet") and registry._states == {}
    (row,) = hm.backends("mul", "float64", 3, "cpu", build=True)
    assert (row.path, row.reason) == ("fused", "")
    (row,) = hm.backends("sum", "float64", 3, "cpu")  # the sum tree: the same library
    assert (row.path, row.reason) == ("fused", "")
    assert native.status(torch.float64, 3) == "in use"
    # the float32 nc = 3 exp runs on the float64 double-word kernel: its library's state
    (row,) = hm.backends("exp", "float32", 3, "cpu")
    assert row.reason == "not built yet" or row.path == "fused"


@needs_compiler
def test_a_failed_self_check_is_reported(fresh, monkeypatch):
    monkeypatch.setattr(native, "_self_check", lambda lib, dtype, nc, *where: "mul")
    with pytest.warns(RuntimeWarning, match=r"f64 nc=3 disabled: mul differs from the torch kernels"):
        (row,) = hm.backends("add", "float64", 3, "cpu", build=True)
    assert (row.path, row.reason) == ("torch", "self-check failed: mul")


def test_ops_without_a_fused_kernel_say_why():
    by_key = {(r.op, r.dtype, r.nc, r.device): r for r in hm.backends()}
    assert len(by_key) == len(doctor.OPS) * 2 * 3 * 2
    assert by_key[("sqrt", "float32", 2, "cpu")].reason == "computed in float64 arithmetic (no MC kernel needed)"
    for op in ("log", "log1p", "acosh", "atanh"):  # argument formed in float32, then the float64 double-word kernels
        row, dw = by_key[(op, "float32", 4, "cpu")], by_key[(op, "float64", 2, "cpu")]
        assert (row.path, row.reason) == (dw.path, dw.reason)
    assert by_key[("exp", "float32", 2, "cpu")].reason == "computed in float64 arithmetic (no MC kernel needed)"
    assert by_key[("halfspace_dist", "float64", 2, "cuda")].reason == "no CUDA kernel (CPU only)"
    no_sum = "no sum kernels at nc=4 on CUDA (a tree level would take 10 inputs; jiterator takes 8)"
    assert by_key[("sum", "float32", 4, "cuda")].reason == no_sum
    assert by_key[("lorentz_dist", "float64", 4, "cpu")].reason.startswith("no fused kernel at nc=4")
    if not torch.cuda.is_available():
        assert by_key[("add", "float64", 3, "cuda")].reason == "CUDA is not available"
        # every elementary function has its CUDA kernels (float64, and float32 through them)
        for op in doctor.ELEMENTARY:
            assert by_key[(op, "float64", 4, "cuda")].reason == "CUDA is not available", op
        assert by_key[("tanh", "float32", 3, "cuda")].reason == "CUDA is not available"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"op": "erf"}, r"backends: op must be one of 'add', .*; got 'erf'"),
        ({"dtype": "float16"}, r"backends: dtype must be one of 'float32', 'float64'; got 'float16'"),
        ({"nc": 5}, r"backends: nc must be one of 2, 3, 4; got 5"),
        ({"device": "tpu"}, r"backends: device must be one of 'cpu', 'cuda'; got 'tpu'"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        hm.backends(**kwargs)


def test_cli_prints_the_table_and_a_json_line(fresh, monkeypatch, capsys):
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    assert main(["doctor", "--op", "log", "--dtype", "float64", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op", "dtype", "nc", "device", "path", "reason"]
    assert [line.split()[:5] for line in lines[1:4]] == [["log", "float64", str(nc), "cpu", "torch"] for nc in (2, 3, 4)]
    assert all(line.endswith("disabled by HYPERMC_NATIVE=0") for line in lines[1:4])
    assert json.loads(lines[-1]) == {"fused": 0, "torch": 3, "flushes_subnormals": False}


@pytest.fixture
def flushing():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals (torch.set_flush_denormal returned False)")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def test_flushed_subnormals_are_reported_where_they_cost_mc_digits(flushing, monkeypatch, capsys):
    # what the report warns about: the tail 2^-1070 of 1 + 2^-1070 is subnormal and lost
    tail = hm.mc(torch.tensor([1.0], dtype=torch.float64), nc=2) + 2.0**-1070
    assert tail.components.tolist() == [[1.0, 0.0]]
    assert doctor.flushes_subnormals()
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    assert main(["doctor", "--op", "add", "--dtype", "float64", "--nc", "2", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("subnormals: flushed to zero in this thread (torch.set_flush_denormal(True))")
    assert json.loads(lines[-1])["flushes_subnormals"] is True
    torch.set_flush_denormal(False)
    assert not doctor.flushes_subnormals()
    tail = hm.mc(torch.tensor([1.0], dtype=torch.float64), nc=2) + 2.0**-1070
    assert tail.components.tolist() == [[1.0, 2.0**-1070]]


def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--nc", "5"])
    assert exc.value.code == 2
    assert "argument --nc: invalid choice: 5 (choose from 2, 3, 4)" in capsys.readouterr().err
