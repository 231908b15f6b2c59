"""Device plumbing of the trainer, sampler and evaluation, and the fast update.

CPU tests check ``device="cpu"`` explicitly, the device checks, checkpoints across
device types and the exactness of the fast update's MC move against the oracle; tests
marked ``cuda`` (skipped without a GPU) train, evaluate and checkpoint on CUDA.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.embed import TrainConfig, evaluate, load_checkpoint, train
from hypermc.embed.distance import batch_distance
from hypermc.embed.sampler import AliasTable, NegativeSampler
from hypermc.embed.train import CHECKPOINT_NAME, _content_hash, _Trainer, fast_retr_rows, resolve_device
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
from hypermc.manifolds.math import fused
from tests.embed.helpers import tree_closure
from tests.oracle import assert_within, components_to_fraction

F64 = torch.float64
TOY = dict(lr=30.0, batch_size=8, negatives=50, burnin=2, max_step=0.3, lr_schedule="linear", lr_end_mult=0.01, scale=1.0, progress=False)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    ca = a.components if isinstance(a, hm.MCTensor) else a
    cb = b.components if isinstance(b, hm.MCTensor) else b
    return torch.equal(ca.cpu(), cb.cpu())


# ------------------------------------------------------------------ device checks


def test_explicit_cpu_device_is_the_default_run():
    g = tree_closure(2, 3)
    a = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=6, seed=1, **TOY)
    b = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=6, seed=1, device="cpu", **TOY)
    c = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=6, seed=1, device=torch.device("cpu"), **TOY)
    assert _same(a.embeddings, b.embeddings) and _same(a.embeddings, c.embeddings)
    assert b.embeddings.device.type == "cpu" and b.config["device_type"] == "cpu"


def test_auto_device_picks_cuda_only_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto", "train") == torch.device("cpu")
    assert resolve_device(None, "train") == torch.device("cpu")


def test_bad_devices_are_refused(monkeypatch):
    g = tree_closure(1, 2)
    with pytest.raises(TypeError, match=r"TrainConfig: device must be a str, a torch.device or 'auto'; got int"):
        train(g, PoincareHalfspace(), epochs=1, device=0, progress=False)
    with pytest.raises(ValueError, match=r"TrainConfig: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got 'gpu'"):
        train(g, PoincareHalfspace(), epochs=1, device="gpu", progress=False)
    with pytest.raises(ValueError, match=r"evaluate: device must be .*got 'meta'"):
        evaluate(PoincareHalfspace(), torch.ones(3, 2, dtype=F64), g.edges, device="meta")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"train: device is 'cuda' but CUDA is not available"):
        train(g, PoincareHalfspace(), epochs=1, device="cuda", progress=False)


def test_fast_argument_checks():
    g = tree_closure(1, 2)
    with pytest.raises(TypeError, match=r"TrainConfig: fast must be True or False; got str 'yes'"):
        train(g, PoincareHalfspace(), epochs=1, fast="yes", progress=False)
    with pytest.raises(ValueError, match=r"TrainConfig: fast=True needs retraction=True"):
        train(g, PoincareHalfspace(), epochs=1, fast=True, retraction=False, progress=False)


def test_sampler_tables_live_on_the_edges_device():
    g = tree_closure(2, 3)
    s = NegativeSampler(g.edges, g.num_nodes, negatives=7)
    assert s.keys.device == g.edges.device and s.unigram.prob.device == g.edges.device
    gen = torch.Generator(device="cpu").manual_seed(0)
    neg, valid = s.sample(g.edges[:5, 0], generator=gen, burnin=True)
    assert neg.device.type == "cpu" and neg.shape == (5, 7) and valid.shape == (5, 7)
    t = AliasTable(torch.tensor([1.0, 3.0]))
    assert t.prob.device.type == "cpu" and t.sample((3,)).device.type == "cpu"


def test_evaluate_on_an_explicit_device_matches():
    g = tree_closure(2, 3)
    r = train(g, PoincareHalfspace(), dim=2, nc=2, epochs=10, seed=0, **TOY)
    a = evaluate(r.manifold, r.embeddings, g.edges, chunk_size=3)
    b = evaluate(r.manifold, r.embeddings, g.edges, chunk_size=3, device="cpu")
    assert (a["map"], a["mean_rank"]) == (b["map"], b["mean_rank"])


def test_resume_on_another_device_type_is_refused(tmp_path):
    g = tree_closure(2, 3)
    train(g, PoincareHalfspace(), dim=2, nc=2, epochs=2, seed=0, checkpoint_dir=tmp_path, **TOY)
    path = tmp_path / CHECKPOINT_NAME
    ckpt = torch.load(path, weights_only=True)
    ckpt["config"]["device_type"] = "cuda"  # as written by a run on a GPU
    ckpt["sha256"] = _content_hash(ckpt)  # a consistent checkpoint, not a corrupted one
    torch.save(ckpt, path)
    loaded = load_checkpoint(path)  # the embeddings load anywhere
    assert loaded["embeddings"].device.type == "cpu"
    with pytest.raises(ValueError, match=r"written by a run on 'cuda' but device is 'cpu'"):
        train(g, PoincareHalfspace(), dim=2, nc=2, epochs=2, seed=0, resume=path, **TOY)


# ------------------------------------------------------------------ fast update


@pytest.mark.parametrize("nc", [2, None])
def test_fast_update_reconstructs_the_toy_tree(nc):
    g = tree_closure(2, 3)
    M = PoincareHalfspace()
    r = train(g, M, dim=2, nc=nc, dtype=F64, epochs=100, seed=0, fast=True, **TOY)
    assert M.check_point(r.embeddings) == (True, None)
    res = evaluate(M, r.embeddings, g.edges)
    assert res["map"] == 1.0 and res["mean_rank"] == 1.0
    assert r.config["fast"] is True and r.history[-1]["loss"] < r.history[0]["loss"]


@pytest.mark.parametrize("manifold", [PoincareBall(), Lorentz()], ids=["ball", "lorentz"])
def test_fast_update_trains_the_other_models(manifold):
    g = tree_closure(2, 3)
    r = train(g, manifold, dim=2, nc=2, dtype=F64, epochs=60, seed=0, fast=True, **TOY)
    assert manifold.check_point(r.embeddings) == (True, None)
    assert evaluate(manifold, r.embeddings, g.edges)["map"] >= 0.9


def test_fast_resume_is_bit_identical_and_fast_is_part_of_the_trajectory(tmp_path):
    g = tree_closure(2, 3)
    full = train(
        g,
        PoincareHalfspace(),
        dim=2,
        nc=2,
        epochs=6,
        seed=0,
        fast=True,
        lr_schedule="constant",
        **{k: v for k, v in TOY.items() if k != "lr_schedule"},
    )
    kw = {k: v for k, v in TOY.items() if k != "lr_schedule"}
    train(g, PoincareHalfspace(), dim=2, nc=2, epochs=3, seed=0, fast=True, lr_schedule="constant", checkpoint_dir=tmp_path, **kw)
    rest = train(
        g, PoincareHalfspace(), dim=2, nc=2, epochs=6, seed=0, fast=True, lr_schedule="constant", resume=tmp_path / CHECKPOINT_NAME, **kw
    )
    assert _same(full.embeddings, rest.embeddings)
    with pytest.raises(ValueError, match=r"fast is True in the checkpoint but False now"):
        train(g, PoincareHalfspace(), dim=2, nc=2, epochs=6, seed=0, lr_schedule="constant", resume=tmp_path / CHECKPOINT_NAME, **kw)


_small = st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False, allow_infinity=False)


@settings(max_examples=25, deadline=None)
@given(st.lists(_small, min_size=3, max_size=3), st.integers(min_value=-40, max_value=40), st.floats(min_value=-5.0, max_value=5.0))
def test_fast_halfspace_move_is_exact_to_u_nc(u_vals, height_exp, xbar):
    """The fast move's coordinates against the exact ``x_bar + u_bar`` and ``x_n * f``
    (``f`` the rounded factor the function uses), for MC points whose tails matter."""
    nc = 2
    t0 = 2.0**height_exp * 1.25
    comps = torch.tensor([[[xbar, xbar * 2.0**-60], [-1.5, 2.0**-70], [t0, t0 * 2.0**-57]]], dtype=F64)
    x = hm.MCTensor(comps)
    u = torch.tensor([u_vals], dtype=F64) * torch.tensor([1.0, 1.0, t0], dtype=F64)
    y = fast_retr_rows(PoincareHalfspace(), x, u)
    xs = components_to_fraction(comps)
    factor = float(torch.exp(u[0, 2] / comps[0, 2, 0]))
    exact = [xs[0, 0] + Fraction(float(u[0, 0])), xs[0, 1] + Fraction(float(u[0, 1])), xs[0, 2] * Fraction(factor)]
    assert_within(y.components[0], exact, F64, nc, "add", relative=True)


def test_fast_halfspace_move_pinned_edges():
    """Zero step leaves the point unchanged; -0 steps and cancelling steps are exact."""
    comps = torch.tensor([[[0.5, 2.0**-60], [-0.0, 0.0], [3.0, 2.0**-55]]], dtype=F64)
    x = hm.MCTensor(comps)
    same = fast_retr_rows(PoincareHalfspace(), x, torch.zeros(1, 3, dtype=F64))
    assert torch.equal(same.components, comps)
    cancel = fast_retr_rows(PoincareHalfspace(), x, torch.tensor([[-0.5, -0.0, 0.0]], dtype=F64))
    exact = [Fraction(2) ** -60, Fraction(0), Fraction(3) + Fraction(2) ** -55]
    assert_within(cancel.components[0], exact, F64, 2, "add", relative=True)


# ------------------------------------------------------------------ CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("fast", [False, True])
def test_cuda_train_evaluate_checkpoint_resume(tmp_path, fast):
    g = tree_closure(2, 3)
    M = PoincareHalfspace()
    kw = {k: v for k, v in TOY.items() if k != "lr_schedule"}
    full = train(g, M, dim=2, nc=2, epochs=60, seed=0, device="cuda", fast=fast, lr_schedule="constant", **kw)
    assert full.embeddings.device.type == "cuda" and M.check_point(full.embeddings) == (True, None)
    on_gpu = evaluate(M, full.embeddings, g.edges)
    on_cpu = evaluate(M, full.embeddings, g.edges, device="cpu")
    assert on_gpu["map"] >= 0.9
    assert (on_gpu["map"], on_gpu["mean_rank"]) == (on_cpu["map"], on_cpu["mean_rank"])
    train(g, M, dim=2, nc=2, epochs=30, seed=0, device="cuda", fast=fast, lr_schedule="constant", checkpoint_dir=tmp_path, **kw)
    path = tmp_path / CHECKPOINT_NAME
    ckpt = load_checkpoint(path)  # written on CUDA, read on the CPU
    assert ckpt["embeddings"].device.type == "cpu" and ckpt["config"]["device_type"] == "cuda"
    rest = train(g, M, dim=2, nc=2, epochs=60, seed=0, device="cuda", fast=fast, lr_schedule="constant", resume=path, **kw)
    assert _same(full.embeddings, rest.embeddings)
    with pytest.raises(ValueError, match=r"written by a run on 'cuda' but device is 'cpu'"):
        train(g, M, dim=2, nc=2, epochs=60, seed=0, device="cpu", fast=fast, lr_schedule="constant", resume=path, **kw)


@pytest.mark.cuda
def test_cuda_sampler_and_random_points():
    g = tree_closure(2, 3)
    s = NegativeSampler(g.edges.cuda(), g.num_nodes, negatives=9)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for burnin in (True, False):
        neg, valid = s.sample(g.edges[:, 0].cuda(), generator=gen, burnin=burnin)
        assert neg.device.type == "cuda"
        bad = s.is_edge(g.edges[:, 0].cuda().unsqueeze(1), neg) | (neg == g.edges[:, 0].cuda().unsqueeze(1))
        assert not bool((bad & valid).any())
    x = PoincareHalfspace().random(5, 3, nc=2, dtype=F64, device="cuda", generator=gen)
    assert x.components.device.type == "cuda"
    o = PoincareHalfspace().origin(5, 3, nc=2, dtype=F64, device="cuda")
    assert o.components.device.type == "cuda"


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("manifold", [Euclidean(), PoincareHalfspace()], ids=["euclidean", "halfspace"])
def test_guard_refuses_an_overflowing_step(fast, manifold):
    """A step of lr 1e308 overflows: both update paths refuse it, naming epoch and nodes
    (the halfspace's fused retraction hands such rows to the torch path, which the guard sees)."""
    match = r"non-finite coordinates after an update in epoch 1 for \d+ nodes, e\.g\. \['r"
    g = tree_closure(2, 3)
    kw = {k: v for k, v in TOY.items() if k not in ("lr", "max_step", "burnin", "scale")}
    with pytest.raises(FloatingPointError, match=match):
        train(g, manifold, dim=2, nc=2, epochs=1, lr=1e308, max_step=None, burnin=0, scale=1e3, fast=fast, **kw)


def test_fast_halfspace_uses_the_fused_distance_only_with_fast():
    g = tree_closure(2, 3)
    for manifold, fast, want in [
        (PoincareHalfspace(), True, fused.halfspace),
        (PoincareHalfspace(), False, batch_distance),
        (PoincareBall(), True, fused.ball),
        (PoincareBall(), False, batch_distance),
        (Lorentz(), True, fused.lorentz),
        (Lorentz(), False, batch_distance),
    ]:
        trainer = _Trainer(g, manifold, TrainConfig(dim=2, nc=2, fast=fast))
        assert trainer.distance.func is want


@pytest.mark.skipif(not fused.available(F64, 2), reason="fused kernels not in use")
@pytest.mark.parametrize(
    ("manifold", "nc"),
    [(PoincareHalfspace(), 2), (PoincareBall(), 2), (Lorentz(), 2), (PoincareHalfspace(), None), (PoincareBall(), None), (Lorentz(), None)],
    ids=["halfspace", "ball", "lorentz", "halfspace-plain", "ball-plain", "lorentz-plain"],
)
def test_fast_fused_run_agrees_with_the_torch_path(manifold, nc, monkeypatch):
    """fast=True on the CPU with and without the fused kernels: the same run up to the
    rounding of the plain parts (one epoch: losses and points agree to ~1e-12); plain
    float64 tables (nc=None) run the fused distances too."""
    g = tree_closure(2, 3)
    kw = dict(dim=3, nc=nc, dtype=F64, epochs=1, seed=0, fast=True, **{k: v for k, v in TOY.items() if k != "burnin"}, burnin=0)
    with_kernels = train(g, manifold, **kw)
    monkeypatch.setattr(fused, "_kernels", lambda *args: None)
    torch_path = train(g, manifold, **kw)
    a, b = with_kernels.embeddings, torch_path.embeddings
    a, b = (a.components, b.components) if nc else (a.unsqueeze(-1), b.unsqueeze(-1))
    assert not torch.equal(a, b) or a.numel() == 0  # the fused path did run (different roundings)
    torch.testing.assert_close(a[..., 0], b[..., 0], rtol=1e-12, atol=0.0)
    assert abs(with_kernels.history[0]["loss"] - torch_path.history[0]["loss"]) <= 1e-13 * torch_path.history[0]["loss"]


def test_cli_device_and_fast_flags(tmp_path, capsys):
    from hypermc.__main__ import main

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
                "3",
                "--out",
                str(run),
                "--batch-size",
                "8",
                "--burnin",
                "1",
                "--device",
                "cpu",
                "--fast",
                "--quiet",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["fast"] is True and rec["device_type"] == "cpu"
    assert main(["eval", str(run / "checkpoint.pt"), "--device", "cpu"]) == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (ev["map"], ev["mean_rank"]) == (rec["map"], rec["mean_rank"])
    with pytest.raises(SystemExit):
        main(["train", "--data", str(csv), "--device", "tpu", "--out", str(run)])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
