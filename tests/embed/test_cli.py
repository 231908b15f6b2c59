"""``python -m hypermc closure|train|eval``: the last stdout line is one JSON object."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import hypermc.data
from hypermc.__main__ import main
from hypermc.data import load_edges
from tests.embed.helpers import tree_closure


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_train_then_eval(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    run = tmp_path / "run"
    code = main(
        [
            "train",
            "--data",
            str(csv),
            "--manifold",
            "halfspace",
            "--dim",
            "2",
            "--nc",
            "2",
            "--epochs",
            "4",
            "--seed",
            "1",
            "--out",
            str(run),
            "--batch-size",
            "8",
            "--lr",
            "10",
            "--burnin",
            "1",
            "--checkpoint-every",
            "2",
            "--quiet",
        ]
    )
    assert code == 0
    rec = _last_json(capsys.readouterr().out)
    for key in ("map", "mean_rank", "seconds", "epochs", "nc", "manifold", "seed", "lr", "checkpoint"):
        assert key in rec
    assert rec["epochs"] == 4 and rec["nc"] == 2 and rec["seed"] == 1 and rec["lr"] == 10.0
    assert 0 < rec["map"] <= 1 and rec["mean_rank"] >= 1
    assert json.loads((run / "metrics.json").read_text())["map"] == rec["map"]
    assert main(["eval", str(run / "checkpoint.pt")]) == 0
    ev = _last_json(capsys.readouterr().out)
    assert ev["map"] == rec["map"] and ev["mean_rank"] == rec["mean_rank"] and ev["epochs"] == 4
    assert main(["eval", str(run / "checkpoint.pt"), "--sample", "2", "--seed", "3"]) == 0
    ev = _last_json(capsys.readouterr().out)
    assert ev["eval_sample"] == 2 and ev["eval_sources"] == 2 and ev["sampled_sources"] == "2 of 6"
    assert rec["sampled_sources"] is None and rec["world_size"] == 1
    assert main(["eval", str(run / "checkpoint.pt"), "--memory-mb", "1"]) == 0
    assert _last_json(capsys.readouterr().out)["map"] == rec["map"]
    assert main(["eval", str(run / "checkpoint.pt"), "--fast"]) == 0  # fused distances: a few ulps, same ranks here
    ev = _last_json(capsys.readouterr().out)
    assert ev["map"] == pytest.approx(rec["map"], rel=1e-12) and ev["mean_rank"] == pytest.approx(rec["mean_rank"], rel=1e-12)


def test_plain_nc_and_bad_arguments(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    assert (
        main(["train", "--data", str(csv), "--nc", "plain", "--epochs", "1", "--out", str(tmp_path / "r"), "--quiet", "--dtype", "float32"])
        == 0
    )
    rec = _last_json(capsys.readouterr().out)
    assert rec["nc"] is None and rec["dtype"] == "float32"
    with pytest.raises(SystemExit):
        main(["train", "--data", str(csv), "--nc", "-1", "--out", str(tmp_path / "r")])
    with pytest.raises(SystemExit):
        main(["train", "--data", str(csv), "--dist-timeout", "0", "--out", str(tmp_path / "r")])
    with pytest.raises(SystemExit):
        main(["eval", str(tmp_path / "r" / "checkpoint.pt"), "--memory-mb", "-3"])
    with pytest.raises(SystemExit, match="neither mammals"):
        main(["train", "--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "r")])


def test_closure_writes_csv(tmp_path, monkeypatch, capsys):
    toy = tree_closure(1, 2)
    monkeypatch.setattr(hypermc.data, "wordnet_closure", lambda root, **kw: toy)
    out = tmp_path / "c.csv"
    assert main(["closure", "--root", "r", "--out", str(out)]) == 0
    assert load_edges(out) == toy
    assert "3 nodes, 2 edges" in capsys.readouterr().out


def test_module_entry_point(tmp_path):
    """The real ``python -m hypermc`` process: JSON on the last stdout line."""
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    proc = subprocess.run(
        [sys.executable, "-m", "hypermc", "train", "--data", str(csv), "--epochs", "1", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert _last_json(proc.stdout)["epochs"] == 1
    assert proc.stderr == ""  # no progress bar without a terminal


def test_torchrun_two_ranks(tmp_path):
    """``torchrun --nproc-per-node 2 -m hypermc train``: gloo on localhost, rank 0 reports."""
    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    run = tmp_path / "r"
    args = [
        "train",
        "--data",
        str(csv),
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--negatives",
        "3",
        "--out",
        str(run),
        "--seed",
        "3",
        "--backend",
        "gloo",
        "--dist-timeout",
        "60",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "hypermc", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # only rank 0 prints
    rec = json.loads(lines[0])
    assert rec["world_size"] == 2 and rec["epochs"] == 2 and 0 < rec["map"] <= 1
    assert json.loads((run / "metrics.json").read_text())["map"] == rec["map"]
    # The same run in one process: same global batches and negatives, loss equal up to rounding.
    assert main([*args, "--out", str(tmp_path / "one"), "--quiet"]) == 0
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert rec["final_loss"] == pytest.approx(one["final_loss"], rel=1e-9)


def test_cli_refuses_bad_flags_and_overwrites(tmp_path, capsys, monkeypatch):
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    run = tmp_path / "run"
    base = ["train", "--data", str(csv), "--epochs", "1", "--out", str(run), "--quiet"]
    for bad in (["--threads", "0"], ["--threads", "-2"]):
        with pytest.raises(SystemExit):
            main(base + bad)
        assert "must be a positive int" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(base + ["--manifold", "euclidean", "--curvature", "-2"])
    assert "--curvature -2 given with --manifold euclidean" in capsys.readouterr().err
    assert main(base) == 0
    capsys.readouterr()
    before = (run / "checkpoint.pt").read_bytes()
    assert main(base) == 2  # a second run over the first is refused, one line, exit 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--force" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert (run / "checkpoint.pt").read_bytes() == before
    (run / "checkpoint.pt.tmp").write_bytes(b"half a checkpoint from a crash")
    assert main(base + ["--force", "--seed", "3"]) == 0
    assert not list(run.glob("*.tmp"))  # the stale temporary file is removed
    monkeypatch.setenv("HYPERMC_DEBUG", "1")
    with pytest.raises(ValueError, match="already holds a run"):
        main(base)


def test_cli_out_not_writable(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["train", "--data", str(csv), "--epochs", "1", "--out", str(blocker / "run"), "--quiet"])
    assert code == 2
    assert "is not a writable directory" in capsys.readouterr().err


def test_cli_eval_of_missing_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope.pt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hypermc: error:") and "nope.pt" in err and len(err.strip().splitlines()) == 1


def test_construct_then_eval_then_refine(tmp_path, capsys):
    from hypermc.embed import load_checkpoint

    csv = tmp_path / "toy.csv"
    tree_closure(3, 3).to_csv(csv)
    run = tmp_path / "c"
    assert (
        main(["construct", "--data", str(csv), "--manifold", "ball", "--dim", "2", "--tau", "15", "--nc", "auto", "--out", str(run)]) == 0
    )
    rec = _last_json(capsys.readouterr().out)
    assert rec["nc"] == 3 and rec["tau"] == 15.0 and rec["depth"] == 3 and rec["tree_map"] == 1.0
    assert rec["tree_sampled_sources"] is None
    assert rec["d_wc"] <= 2.0 and 0 < rec["map"] <= 1
    assert json.loads((run / "metrics.json").read_text()) == rec
    ckpt = load_checkpoint(run / "checkpoint.pt")
    assert ckpt["config"]["method"] == "construct" and ckpt["config"]["nc"] == 3 and ckpt["epoch"] == 0
    # eval reads it as a normal checkpoint: the closure MAP is the same number
    assert main(["eval", str(run / "checkpoint.pt")]) == 0
    assert _last_json(capsys.readouterr().out)["map"] == rec["map"]
    # an existing run is not overwritten without --force
    assert main(["construct", "--data", str(csv), "--tau", "15", "--out", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    # --force overwrites; --eval-sample samples both MAPs, --pairs the distortion sources
    assert main(["construct", "--data", str(csv), "--tau", "15", "--out", str(run), "--force", "--eval-sample", "5", "--pairs", "4"]) == 0
    rec = _last_json(capsys.readouterr().out)
    n = ckpt["graph"].num_nodes
    assert rec["tree_sampled_sources"] == f"5 of {n}" and rec["sampled_sources"] is not None
    assert rec["distortion_sampled_sources"] == f"4 of {n}" and rec["tree_map"] == 1.0
    # nc too small: refused with the nc needed
    assert main(["construct", "--data", str(csv), "--tau", "15", "--nc", "1", "--out", str(tmp_path / "x")]) == 2
    assert "pass nc=3" in capsys.readouterr().err
    # refine: the settings must match the constructed embedding
    assert (
        main(
            [
                "train",
                "--data",
                str(csv),
                "--manifold",
                "ball",
                "--nc",
                "2",
                "--epochs",
                "1",
                "--init-from",
                str(run),
                "--out",
                str(tmp_path / "bad"),
                "--quiet",
            ]
        )
        == 2
    )
    assert "--manifold ball --dim 2 --nc 3 --dtype float64" in capsys.readouterr().err
    refined = tmp_path / "r"
    assert (
        main(
            [
                "train",
                "--data",
                str(csv),
                "--manifold",
                "ball",
                "--nc",
                "3",
                "--epochs",
                "2",
                "--burnin",
                "0",
                "--lr",
                "0.01",
                "--batch-size",
                "8",
                "--init-from",
                str(run),
                "--out",
                str(refined),
                "--quiet",
            ]
        )
        == 0
    )
    out = _last_json(capsys.readouterr().out)
    assert out["init"] == load_checkpoint(refined / "checkpoint.pt")["config"]["init"] is not None
    # started from the construction (radius ~45), not from a random point near the origin
    comps = load_checkpoint(refined / "checkpoint.pt")["components"]
    deficit = 1 - (comps.sum(-1) ** 2).sum(-1)
    assert float(deficit.min()) < 1e-15


def test_init_from_a_different_graph_is_refused(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    tree_closure(2, 2).to_csv(a)
    tree_closure(2, 3).to_csv(b)
    assert main(["construct", "--data", str(a), "--tau", "3", "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "--data",
                str(b),
                "--manifold",
                "ball",
                "--nc",
                "1",
                "--epochs",
                "1",
                "--init-from",
                str(tmp_path / "c"),
                "--out",
                str(tmp_path / "r"),
                "--quiet",
            ]
        )
        == 2
    )
    assert "is not --data" in capsys.readouterr().err


def test_export_tsv_npy_pt(tmp_path, capsys):
    """export writes the names, float64 coordinates and (tsv) the exact MC values; it
    refuses to overwrite without --force."""
    import mpmath
    import numpy as np
    import torch

    from hypermc.embed import load_checkpoint

    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--data",
                str(csv),
                "--dim",
                "2",
                "--nc",
                "2",
                "--epochs",
                "2",
                "--seed",
                "1",
                "--out",
                str(run),
                "--batch-size",
                "8",
                "--lr",
                "10",
                "--burnin",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    capsys.readouterr()
    ckpt = load_checkpoint(run / "checkpoint.pt")
    names, comps = list(ckpt["names"]), ckpt["components"]
    with mpmath.workprec(400):  # exact sums of two float64 components
        exact = [[mpmath.fsum(mpmath.mpf(c) for c in coord) for coord in node] for node in comps.tolist()]

    tsv = tmp_path / "emb.tsv"
    assert main(["export", "--ckpt", str(run), "--format", "tsv", "--out", str(tsv)]) == 0
    rec = _last_json(capsys.readouterr().out)
    assert rec["nodes"] == len(names) and rec["nc"] == 2 and rec["dim"] == 2
    lines = tsv.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["name", "x0", "x1", "x0_exact", "x1_exact"]
    with mpmath.workprec(400):
        for line, name, node in zip(lines[1:], names, exact):
            cells = line.split("\t")
            assert cells[0] == name
            for j in range(2):
                assert float(cells[1 + j]) == float(node[j])  # nearest float64
                # all digits the MC value holds (u^2 = 2^-106 for float64 nc=2), and then some
                assert abs(mpmath.mpf(cells[3 + j]) - node[j]) <= abs(node[j]) * mpmath.mpf(2) ** -130

    npy = tmp_path / "emb.npy"
    assert main(["export", "--ckpt", str(run / "checkpoint.pt"), "--format", "npy", "--out", str(npy)]) == 0
    coords = np.load(npy)
    assert coords.shape == (len(names), 2) and coords.dtype == np.float64
    assert coords.tolist() == [[float(v) for v in node] for node in exact]
    assert np.array_equal(np.load(tmp_path / "emb.npy.components.npy"), comps.numpy())
    assert (tmp_path / "emb.npy.names.txt").read_text(encoding="utf-8").split("\n")[:-1] == names

    pt = tmp_path / "emb.pt"
    assert main(["export", "--ckpt", str(run), "--format", "pt", "--out", str(pt)]) == 0
    blob = torch.load(pt, weights_only=True)
    assert blob["names"] == names and blob["manifold"] == "PoincareHalfspace"
    assert torch.equal(blob["components"], comps) and blob["coordinates"].tolist() == coords.tolist()

    capsys.readouterr()
    assert main(["export", "--ckpt", str(run), "--format", "tsv", "--out", str(tsv)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert main(["export", "--ckpt", str(run), "--format", "tsv", "--out", str(tsv), "--force"]) == 0


@pytest.mark.parametrize("command", ["closure", "train", "construct", "eval", "export"])
def test_help_shows_defaults_and_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"example: python -m hypermc {command} " in text
    assert "(default: " in text


def test_export_of_a_missing_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["export", "--ckpt", str(tmp_path / "nope"), "--out", str(tmp_path / "x.tsv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hypermc: error: load_checkpoint: no checkpoint at") and err.count("\n") == 1
    assert not (tmp_path / "x.tsv").exists()


def _toy_run(tmp_path, capsys):
    """A 2-epoch training run of a small tree (the smallest real run): (csv, run directory)."""
    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    run = tmp_path / "run"
    assert main(["train", "--data", str(csv), "--epochs", "2", "--batch-size", "8", "--burnin", "1", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    return csv, run


def _invocations(tmp_path, csv, run):
    return {
        "closure": ["closure", "--root", "r", "--out", str(tmp_path / "c.csv")],
        "train": ["train", "--data", str(csv), "--epochs", "2", "--batch-size", "8", "--out", str(tmp_path / "t")],
        "construct": ["construct", "--data", str(csv), "--tau", "4", "--out", str(tmp_path / "k")],
        "eval": ["eval", str(run / "checkpoint.pt")],
        "export": ["export", "--ckpt", str(run), "--out", str(tmp_path / "e.tsv")],
    }


@pytest.mark.parametrize("command", ["closure", "train", "construct", "eval", "export"])
def test_progress_bars_on_a_terminal_unless_quiet(command, tmp_path, capsys, monkeypatch):
    """Every subcommand: a bar on stderr when it is a terminal, none with --quiet or without a terminal."""
    csv, run = _toy_run(tmp_path, capsys)
    asked = []

    def closure(root, progress=False, **kw):
        asked.append(progress)
        if progress:  # the real one shows a bar only while it builds the all-noun closure
            from hypermc._progress import progress_bar

            with progress_bar(True, 1, unit="synset", desc="closure") as bar:
                bar.update(1)
        return tree_closure(1, 2)

    monkeypatch.setattr(hypermc.data, "wordnet_closure", closure)
    args = _invocations(tmp_path, csv, run)[command]
    desc = {"closure": "closure", "train": "train", "construct": "construct", "eval": "evaluate", "export": "export"}[command]
    assert main([*args, "--force"] if command in ("train", "construct", "export") else args) == 0
    assert "%|" not in capsys.readouterr().err  # capsys's stderr is not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main([*args, "--force"] if command in ("train", "construct", "export") else args) == 0
    out, err = capsys.readouterr()
    assert f"{desc}: " in err and "%|" in err
    assert "%|" not in out  # the result line stays clean
    assert main([*args, "--force", "--quiet"] if command in ("train", "construct", "export") else [*args, "--quiet"]) == 0
    assert "%|" not in capsys.readouterr().err
    if command == "closure":
        assert asked == [False, True, False]


def test_construct_plot(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(3, 3).to_csv(csv)
    png = tmp_path / "tree.png"
    assert main(["construct", "--data", str(csv), "--tau", "8", "--out", str(tmp_path / "c"), "--plot", str(png), "--quiet"]) == 0
    rec = _last_json(capsys.readouterr().out)
    assert rec["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(["construct", "--data", str(csv), "--tau", "8", "--dim", "3", "--out", str(tmp_path / "d"), "--plot", str(png)]) == 2
    assert "--plot draws 2-D constructions only; got --dim 3" in capsys.readouterr().err
    assert main(["construct", "--data", str(csv), "--tau", "8", "--out", str(tmp_path / "d"), "--plot", str(tmp_path / "tree.svg")]) == 2
    assert "--plot: expected a file name ending in .png, got" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_construct_closure_then_eval_and_plot(tmp_path, capsys):
    from hypermc.embed import load_checkpoint

    csv = tmp_path / "toy.csv"
    tree_closure(3, 3).to_csv(csv)
    run, png = tmp_path / "c", tmp_path / "c.png"
    assert main(["construct", "--method", "closure", "--data", str(csv), "--dim", "2", "--out", str(run), "--plot", str(png)]) == 0
    rec = _last_json(capsys.readouterr().out)
    assert (rec["map"], rec["mean_rank"], rec["method"], rec["manifold"], rec["alpha"]) == (1.0, 1.0, "closure", "halfspace", 0.8)
    assert rec["sampled_sources"] is None and rec["eval_sources"] == 39  # every source of the 3-ary depth-3 closure
    assert rec["nc"] == 1 and rec["depth"] == 3 and rec["plot"] == str(png) and png.stat().st_size > 10_000
    assert json.loads((run / "metrics.json").read_text()) == rec
    ckpt = load_checkpoint(run / "checkpoint.pt")
    assert ckpt["config"]["construction"] == "closure" and ckpt["config"]["alpha"] == 0.8
    assert main(["eval", str(run / "checkpoint.pt")]) == 0
    assert _last_json(capsys.readouterr().out)["map"] == 1.0
    # ball, explicit alpha, sampled sources
    args = ["construct", "--method", "closure", "--data", str(csv), "--manifold", "ball", "--dim", "3", "--alpha", "0.5"]
    assert main([*args, "--eval-sample", "5", "--out", str(tmp_path / "b")]) == 0
    rec = _last_json(capsys.readouterr().out)
    assert (rec["map"], rec["manifold"], rec["alpha"], rec["eval_sources"]) == (1.0, "ball", 0.5, 5)
    assert rec["sampled_sources"] is not None


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--method", "closure", "--tau", "3"], "--tau belongs to --method tree; got --tau 3.0 with --method closure"),
        (["--method", "closure", "--pairs", "3"], "--pairs belongs to --method tree; got --pairs 3 with --method closure"),
        (["--alpha", "0.5", "--tau", "3"], "--alpha belongs to --method closure; got --alpha 0.5 with --method tree"),
        ([], "construct --method tree: pass one of --epsilon / --tau"),
        (["--method", "closure", "--alpha", "0.99"], r"alpha: expected a float in (0, 0.95], got 0.99"),
    ],
)
def test_construct_method_options_are_checked(tmp_path, capsys, extra, match):
    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    assert main(["construct", "--data", str(csv), "--out", str(tmp_path / "c"), *extra]) == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "c").exists()  # refused before anything was written


def test_train_eval_every_writes_the_curve(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(2, 2).to_csv(csv)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--data",
                str(csv),
                "--epochs",
                "5",
                "--batch-size",
                "8",
                "--burnin",
                "1",
                "--eval-every",
                "2",
                "--out",
                str(run),
                "--quiet",
            ]
        )
        == 0
    )
    rec = _last_json(capsys.readouterr().out)
    assert [e["epoch"] for e in rec["eval_history"]] == [2, 4, 5]
    assert rec["eval_history"][-1]["map"] == rec["map"] and rec["eval_history"][-1]["mean_rank"] == rec["mean_rank"]
    assert all(0 < e["map"] <= 1 and e["mean_rank"] >= 1 for e in rec["eval_history"])
    assert rec["curve"] == str(run / "curve.png")
    assert (run / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((run / "metrics.json").read_text())["eval_history"] == rec["eval_history"]
    with pytest.raises(SystemExit):
        main(["train", "--data", str(csv), "--eval-every", "0", "--out", str(tmp_path / "x")])
    # without --eval-every: the loss curve and the last evaluation
    assert main(["train", "--data", str(csv), "--epochs", "2", "--out", str(tmp_path / "y"), "--quiet"]) == 0
    rec = _last_json(capsys.readouterr().out)
    assert [e["epoch"] for e in rec["eval_history"]] == [2] and rec["eval_history"][0]["map"] == rec["map"]
    assert (tmp_path / "y" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_records_with_non_finite_numbers_are_refused_not_written_as_nonstandard_json():
    from hypermc.__main__ import _json_text

    record = {"map": float("nan"), "mean_rank": 2.0, "eval_history": [{"mean_rank": float("inf")}]}
    match = r"refusing to write non-standard JSON: eval_history\[0\]\.mean_rank=inf, map=nan \(JSON has no Infinity or NaN\)"
    with pytest.raises(SystemExit, match=match):
        _json_text(record)
    assert json.loads(_json_text({"map": 1.0, "b": [1, None]})) == {"map": 1.0, "b": [1, None]}


def test_nc_zero_is_refused_not_trained_as_plain(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    with pytest.raises(SystemExit) as exc:
        main(["train", "--data", str(csv), "--nc", "0", "--epochs", "1", "--out", str(tmp_path / "r"), "--quiet"])
    assert exc.value.code == 2 and not (tmp_path / "r").exists()
    assert "argument --nc: --nc 0 is not a number of components; for plain tensors say --nc plain" in capsys.readouterr().err
