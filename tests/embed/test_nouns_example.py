"""``examples/nouns.py`` (segments, curve, --root, --resume) and ``examples/rank_breakdown.py``
on a small closure: the scripts behind docs/training.md's nouns results."""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

import pytest
import torch

from hypermc.embed import load_checkpoint
from tests.embed.helpers import tree_closure

ROOT = Path(__file__).resolve().parents[2]
COMMON = ("--nc", "2", "--fast", "--device", "cpu", "--threads", "1", "--dim", "3", "--batch-size", "16", "--lr", "2")
COMMON += ("--burnin", "1", "--negatives", "5", "--every", "2", "--eval-sample", "4")


def _run(script: str, *argv: str) -> str:
    """stdout of ``python examples/<script> <argv>``, run in this process."""
    path = ROOT / "examples" / script
    old = sys.argv
    sys.argv = [str(path), *argv]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old
    return out.getvalue()


def _curve(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]


def test_segments_curve_and_resume(tmp_path):
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)  # 40 nodes, 39 sources
    whole, split = tmp_path / "whole", tmp_path / "split"
    _run("nouns.py", "--csv", str(csv), "--out", str(whole), "--epochs", "6", *COMMON)
    curve = _curve(whole)
    assert [r["epoch"] for r in curve] == [2, 4, 6]
    assert [r["sources"] for r in curve] == [4, 4, 39]  # the sample, then all sources at the end
    assert all(0 < r["map"] <= 1 and r["mean_rank"] >= 1 for r in curve)
    assert (whole / "curve.png").stat().st_size > 0
    # split over two commands: --resume continues where the first stopped, bit for bit
    _run("nouns.py", "--csv", str(csv), "--out", str(split), "--epochs", "4", *COMMON)
    _run("nouns.py", "--csv", str(csv), "--out", str(split), "--epochs", "6", "--resume", *COMMON)
    assert [r["epoch"] for r in _curve(split)] == [2, 4, 6]
    a, b = load_checkpoint(whole / "checkpoint.pt"), load_checkpoint(split / "checkpoint.pt")
    assert a["epoch"] == b["epoch"] == 6 and torch.equal(a["components"], b["components"])
    assert _curve(split)[-1]["map"] == curve[-1]["map"]


def test_init_from_continues_the_curve(tmp_path):
    """A second phase (here a lower lr, no burn-in) from the first run's points; its curve's
    epochs continue the first's, also along a chain of phases."""
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    first, second, third = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _run("nouns.py", "--csv", str(csv), "--out", str(first), "--epochs", "4", *COMMON)
    phase = ("--epochs", "2", "--burnin", "0", "--lr", "1")
    _run("nouns.py", "--csv", str(csv), "--out", str(second), "--init-from", str(first), *COMMON, *phase)
    _run("nouns.py", "--csv", str(csv), "--out", str(third), "--init-from", str(second / "checkpoint.pt"), *COMMON, *phase)
    assert [(r["epoch"], r["run_epoch"], r["lr"]) for r in _curve(second)] == [(6, 2, 1.0)]
    assert [(r["epoch"], r["run_epoch"]) for r in _curve(third)] == [(8, 2)]
    start = load_checkpoint(first / "checkpoint.pt")["components"]
    assert load_checkpoint(second / "checkpoint.pt")["config"]["init"] is not None
    assert not torch.equal(load_checkpoint(second / "checkpoint.pt")["components"], start)


def test_root_trains_the_subtree(tmp_path):
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    out = tmp_path / "sub"
    _run("nouns.py", "--csv", str(csv), "--out", str(out), "--root", "r0", "--epochs", "2", *COMMON)
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["graph"].num_nodes == 13  # r0, its 3 children and 9 grandchildren
    assert all(name.startswith("r0") for name in ckpt["graph"].names)


def test_rank_breakdown_mean_is_evaluates(tmp_path):
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    out = tmp_path / "run"
    _run("nouns.py", "--csv", str(csv), "--out", str(out), "--epochs", "2", *COMMON)
    text = _run("rank_breakdown.py", "--ckpt", str(out), "--sample", "20", "--threads", "1")
    summary = json.loads(text.splitlines()[0])
    assert summary["mean_rank"] == summary["evaluate_mean_rank"]
    assert "by generation gap (1 = direct parent)" in text and "by target descendants" in text


def test_linear_schedule_time_limit_and_resume(tmp_path):
    """``--lr-schedule linear`` decays the recorded lr to ``lr * --lr-end-mult`` at the last
    epoch; ``--max-minutes 0`` stops at the first curve point (evaluated on all sources, its
    checkpoint written), and ``--resume`` finishes the same schedule bit for bit."""
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    whole, split = tmp_path / "whole", tmp_path / "split"
    decay = ("--epochs", "5", "--lr-schedule", "linear", "--lr-end-mult", "0.25", *COMMON)
    _run("nouns.py", "--csv", str(csv), "--out", str(whole), *decay)
    curve = _curve(whole)
    # burn-in epoch 1 at lr 2 * 0.01; then 2 -> 0.5 linearly over epochs 2..5 (0-based 1..4)
    assert [(r["epoch"], r["lr"]) for r in curve] == [(2, 2.0), (4, 1.0), (5, 0.5)]
    _run("nouns.py", "--csv", str(csv), "--out", str(split), "--max-minutes", "0", *decay)
    assert [(r["epoch"], r["sources"]) for r in _curve(split)] == [(2, 39)]
    assert load_checkpoint(split / "checkpoint.pt")["epoch"] == 2
    _run("nouns.py", "--csv", str(csv), "--out", str(split), "--resume", *decay)
    assert [r["epoch"] for r in _curve(split)] == [2, 4, 5]
    a, b = load_checkpoint(whole / "checkpoint.pt"), load_checkpoint(split / "checkpoint.pt")
    assert torch.equal(a["components"], b["components"])
    assert _curve(split)[-1]["map"] == curve[-1]["map"] and _curve(split)[-1]["train_s"] > 0


def test_refused_settings_make_no_run_directory(tmp_path):
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    out = tmp_path / "bad"
    with pytest.raises(ValueError, match=r"TrainConfig: lr_end_mult must be a finite number > 0.0; got -1.0"):
        _run("nouns.py", "--csv", str(csv), "--out", str(out), "--lr-schedule", "linear", "--lr-end-mult", "-1", *COMMON)
    assert not out.exists()


def test_animal_scale_table(tmp_path, monkeypatch, capsys):
    """``examples/animal_scale.py`` (docs/training.md's scale study): one row per setting,
    the settings a row changes in its cells; a malformed row is refused by name."""
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # its sibling imports
    rows = ("scale=1,lr=2", "scale=4,lr=2,batch_size=8,negatives=4,burnin=0")
    out = _run("animal_scale.py", "--csv", str(csv), "--root", "r0", "--rows", *rows, "--at", "1", "2")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| scale | lr (per edge) | other | epoch 1 | epoch 2 | wall s |"
    cells = [row.split(" | ") for row in table[1:]]
    assert [c[:3] for c in cells] == [["| 1", "2 (0.00098)", ""], ["| 4", "2 (0.25)", "batch size 8, negatives 4, burnin 0"]]
    for row in cells:
        for cell in row[3:-1]:
            mean_ap, rank = (float(v) for v in cell.split(" / "))
            assert 0 < mean_ap <= 1 and rank >= 1
    for bad, why in [
        ("scale=4", "every row sets lr"),
        ("lr=2,momentum=0.9", "KEY one of lr, scale"),
        ("lr=2,batch_size=big", "batch_size of 'lr=2,batch_size=big': expected an integer"),
        ("lr=-1", "lr of 'lr=-1': expected a positive value"),
    ]:
        with pytest.raises(SystemExit):
            _run("animal_scale.py", "--csv", str(csv), "--rows", bad)
        assert why in capsys.readouterr().err


def test_closure_finetune_table(tmp_path, monkeypatch, capsys):
    """``examples/closure_finetune.py`` (docs/closure.md's RMSprop rows): the construction's
    MAP / mean rank, then one row per setting; a malformed row is refused by name."""
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # its sibling imports
    out = _run("closure_finetune.py", "--csv", str(csv), "--rows", "lr=0.01", "lr=0.003,scale=1", "--at", "1", "2", "--eval-sample", "10")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| lr | rmsprop_eps | scale | construction | epoch 1 | epoch 2 | train s | wall s |"
    cells = [row.split(" | ") for row in table[1:]]
    assert [c[:3] for c in cells] == [["| 0.01", "1e-12", "4"], ["| 0.003", "1e-12", "1"]]
    assert all(c[3] == "1.000 / 1.00" for c in cells)  # a tree: the construction is exact
    for row in cells:
        for cell in row[3:-2]:
            mean_ap, rank = (float(v) for v in cell.split(" / "))
            assert 0 < mean_ap <= 1 and rank >= 1
    for bad, why in [("momentum=0.9", "KEY one of lr, rmsprop_eps, scale"), ("lr=fast", "expected a number"), ("lr=0", "positive")]:
        with pytest.raises(SystemExit):
            _run("closure_finetune.py", "--csv", str(csv), "--rows", bad)
        assert why in capsys.readouterr().err


def test_animal_optimizers_table(tmp_path, monkeypatch):
    """``examples/animal_optimizers.py`` (docs/training.md's optimizer rows): one row per
    ``OPTIMIZER:LR`` and model, MAP / mean rank at each ``--at`` epoch; a bad setting is refused."""
    csv = tmp_path / "tree.csv"
    tree_closure(3, 3).to_csv(csv)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # its sibling imports
    out = _run("animal_optimizers.py", "--csv", str(csv), "--root", "r0", "--rows", "sgd:2", "rmsprop:0.05", "--at", "1", "2")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| model | optimizer | lr | epoch 1 | epoch 2 | wall s |"
    assert [row.split(" | ")[:3] for row in table[1:]] == [["| halfspace float64", "sgd", "2"], ["| halfspace float64", "rmsprop", "0.05"]]
    models = ("--manifolds", "ball", "lorentz", "--nc", "2")
    out = _run("animal_optimizers.py", "--csv", str(csv), "--root", "r0", "--rows", "rmsprop:0.05", *models, "--at", "2")
    rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[:3] for row in rows] == [["| ball nc=2", "rmsprop", "0.05"], ["| lorentz nc=2", "rmsprop", "0.05"]]
    for row in table[1:] + rows:
        for cell in row.split(" | ")[3:-1]:
            mean_ap, rank = (float(v) for v in cell.split(" / "))
            assert 0 < mean_ap <= 1 and rank >= 1
    with pytest.raises(SystemExit):
        _run("animal_optimizers.py", "--csv", str(csv), "--rows", "adam:0.1")
    with pytest.raises(SystemExit):
        _run("animal_optimizers.py", "--csv", str(csv), "--manifolds", "sphere")
    with pytest.raises(SystemExit):
        _run("animal_optimizers.py", "--csv", str(csv), "--nc", "0")
