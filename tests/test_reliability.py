"""Bad input gets a clear error or an exact result; nothing is lost on save/load.

Each test reproduces a failure observed before the fix (a ManifoldParameter that lost its
manifold when pickled, ``mc(None)`` giving NaN, ``mc(2**53 + 1)`` silently rounded, complex
input dropping its imaginary part).
"""

from __future__ import annotations

import io
import pickle
from fractions import Fraction

import pytest
import torch

import hypermc
import hypermc as hm
import hypermc.optim
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace, manifold_of

MANIFOLDS = [PoincareBall(curvature=-2.0), PoincareHalfspace(curvature=-0.5), Lorentz(curvature=-3.0), Euclidean()]


def _points(M, nc):
    if nc is None:
        return M.random(5, 3, nc=1, dtype=torch.float64).approx()
    return M.random(5, 3, nc=nc, dtype=torch.float32)


def _roundtrips(p):
    yield "pickle", pickle.loads(pickle.dumps(p))
    for weights_only in (False, True):
        buf = io.BytesIO()
        torch.save({"p": p}, buf)
        buf.seek(0)
        yield f"torch.load(weights_only={weights_only})", torch.load(buf, weights_only=weights_only)["p"]


@pytest.mark.parametrize("M", MANIFOLDS, ids=repr)
@pytest.mark.parametrize("nc", [None, 1, 3], ids=lambda n: "plain" if n is None else f"nc{n}")
def test_manifold_parameter_roundtrips_with_manifold(M, nc):
    p = hm.ManifoldParameter(_points(M, nc), manifold=M)
    for how, q in _roundtrips(p):
        assert isinstance(q, hm.ManifoldParameter), how
        assert q.manifold == M and type(q.manifold) is type(M), how
        assert q.manifold.curvature == M.curvature, how
        assert q.dtype == p.dtype and q.requires_grad, how
        if nc is None:
            assert torch.equal(q.data, p.data), how
        else:
            assert q.nc == nc and torch.equal(q.components, p.components), how


def test_roundtripped_parameter_takes_riemannian_steps():
    M = PoincareBall()
    p = hm.ManifoldParameter(M.random(4, 2, nc=2, dtype=torch.float64), manifold=M)
    q = pickle.loads(pickle.dumps(p))
    opt = hypermc.optim.RiemannianSGD([q], lr=0.1)
    assert manifold_of(opt.param_groups[0]["params"][0]) == M


def test_plain_mctensor_pickles_without_manifold():
    x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float64)
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is hm.MCTensor and getattr(y, "manifold", None) is None
    assert torch.equal(y.components, x.components)


def test_bad_manifold_state_is_refused():
    from hypermc.manifolds.parameter import manifold_from_state

    with pytest.raises(ValueError, match="manifold state must be"):
        manifold_from_state(("Stiefel", -1.0))


# ------------------------------------------------------------------ mc() construction


@pytest.mark.parametrize("data", [None, [1.0, None], [[None]]])
def test_mc_refuses_none(data):
    with pytest.raises(TypeError, match="got None"):
        hm.mc(data, nc=2, dtype=torch.float64)


@pytest.mark.parametrize("data", [1 + 2j, [1.0, 2j], torch.tensor([1j]), __import__("numpy").array([1j])])
def test_mc_refuses_complex(data):
    with pytest.raises(TypeError, match="must be real"):
        hm.mc(data, nc=2, dtype=torch.float64)


@pytest.mark.parametrize(
    "value,nc,dtype",
    [
        (2**53 + 1, 2, torch.float64),
        (-(2**60) - 3, 2, torch.float64),
        ([2**53 + 1, 3, -(2**70) + 1], 2, torch.float64),
        (2**30 + 1, 2, torch.float32),
        (2**200 + 2**100 + 1, 3, torch.float64),
        (2**24 + 1, 2, torch.float32),
        (2**200 + 1, 2, torch.float64),
    ],
)
def test_mc_big_ints_are_split_exactly(value, nc, dtype):
    x = hm.mc(value, nc=nc, dtype=dtype)
    values = value if isinstance(value, list) else [value]
    comps = x.components.reshape(-1, nc).tolist()
    for v, cs in zip(values, comps):
        assert sum(Fraction(c) for c in cs) == v


@pytest.mark.parametrize(
    "value,nc,dtype", [(2**53 + 1, 1, torch.float64), (int("10" * 60, 2), 2, torch.float64), (int("10" * 30, 2), 2, torch.float32)]
)
def test_mc_int_that_nc_cannot_hold_raises(value, nc, dtype):
    with pytest.raises(ValueError, match=rf"int {value} does not fit exactly in nc={nc}"):
        hm.mc(value, nc=nc, dtype=dtype)


def test_mc_small_ints_unchanged():
    assert hm.mc([1, 2, 3], nc=2).dtype == torch.get_default_dtype()
    assert hm.mc(2**53, nc=1, dtype=torch.float64).components.tolist() == [float(2**53)]


# ------------------------------------------------------------------ evaluate validation


def _tree():
    edges = torch.tensor([[1, 0], [2, 0], [3, 1]], dtype=torch.int64)
    return edges


@pytest.mark.parametrize(
    "M,corrupt,reason",
    [
        (PoincareBall(), lambda e: e.__setitem__((2, 0), 3.0), "outside the ball"),
        (PoincareHalfspace(), lambda e: e.__setitem__((2, -1), -0.5), "outside the halfspace"),
        (Lorentz(), lambda e: e.__setitem__((2, 0), -e[2, 0]), "lower sheet"),
    ],
    ids=["ball", "halfspace", "lorentz"],
)
def test_evaluate_refuses_off_manifold_points(M, corrupt, reason):
    from hypermc.embed import evaluate

    emb = M.random(4, 2, nc=1, dtype=torch.float64).approx().clone()
    assert evaluate(M, emb, _tree())["map"] <= 1.0
    corrupt(emb)
    with pytest.raises(ValueError, match=rf"embeddings are not points of .*{reason}"):
        evaluate(M, emb, _tree())


def test_evaluate_refuses_nan_and_self_loops():
    from hypermc.embed import evaluate

    M = PoincareBall()
    emb = M.random(4, 2, nc=2, dtype=torch.float64)
    loops = torch.tensor([[1, 0], [2, 2], [3, 1]], dtype=torch.int64)
    with pytest.raises(ValueError, match=r"1 self-loops \(first: row 1, node 2\)"):
        evaluate(M, emb, loops)
    bad = emb.approx().clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match=r"inf or NaN in 1 rows \(first: row 3\)"):
        evaluate(M, bad, _tree())


@pytest.mark.parametrize("rows", [[-1], [0, 4], [5]])
def test_optimizer_rows_out_of_range_are_refused(rows):
    M = PoincareBall()
    p = hm.ManifoldParameter(M.random(4, 2, nc=2, dtype=torch.float64), manifold=M)
    opt = hypermc.optim.RiemannianSGD([p], lr=0.1, sparse_rows=True)
    p.grad = hm.MCTensor(torch.zeros_like(p.components))
    before = p.components.clone()
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 4\)"):
        opt.step(rows=torch.tensor(rows))
    assert torch.equal(p.components, before)


# ------------------------------------------------ membership check of the entry points

#: One off-manifold point per model and the condition the error must name.
OFF = [
    (PoincareBall(curvature=-2.0), [0.9, 0.2, 0.1], "outside the ball"),
    (PoincareHalfspace(curvature=-0.5), [0.3, 0.1, -1e-300], "outside the halfspace"),
    (Lorentz(curvature=-3.0), [1.0, 1.0, 0.0], "off the hyperboloid"),
    (Lorentz(), [-1.0, 0.0, 0.0], "lower sheet"),
]
CALLS = {
    "dist": lambda M, bad, good, **kw: M.dist(bad, good, **kw),
    "dist-y": lambda M, bad, good, **kw: M.dist(good, bad, **kw),
    "dist0": lambda M, bad, good, **kw: M.dist0(bad, **kw),
    "expmap": lambda M, bad, good, **kw: M.expmap(bad, good * 0, **kw),
    "logmap": lambda M, bad, good, **kw: M.logmap(bad, good, **kw),
    "logmap-y": lambda M, bad, good, **kw: M.logmap(good, bad, **kw),
    "logmap0": lambda M, bad, good, **kw: M.logmap0(bad, **kw),
}


@pytest.mark.parametrize("nc", [None, 2], ids=["plain", "nc2"])
@pytest.mark.parametrize("call", list(CALLS), ids=str)
@pytest.mark.parametrize("M,bad,reason", OFF, ids=["ball", "halfspace", "lorentz", "lorentz-sheet"])
def test_entry_points_refuse_off_manifold_points(M, bad, reason, call, nc):
    """Before: finite garbage (ball dist NaN, Lorentz dist 0.96 for a point off the
    hyperboloid). Now a ValueError naming the method, argument and condition."""
    good = M.random(2, 3, nc=nc, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    bad_x = good.clone()  # only the second point is off
    if nc:
        bad_x.components[1] = hm.mc(torch.tensor(bad, dtype=torch.float64), nc=nc).components
    else:
        bad_x[1] = torch.tensor(bad, dtype=torch.float64)
    method = call.split("-")[0]
    arg = "y" if call.endswith("-y") or method == "logmap0" else "x"
    with pytest.raises(
        ValueError,
        match=rf"{type(M).__name__}\.{method}: {arg} is not a point .*{reason}.* "
        rf"\(1 of 2 points; first at index \(1,\)\).*check=False",
    ):
        CALLS[call](M, bad_x, good)
    CALLS[call](M, bad_x, good, check=False)  # the documented opt-out computes anyway
    CALLS[call](M, good, good)  # points on the manifold pass


@pytest.mark.parametrize("M", MANIFOLDS, ids=repr)
def test_entry_points_refuse_nan(M):
    x = M.random(3, 3, nc=2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bad = hm.mc(x.approx().clone(), nc=2)
    bad.components[2, 0, 1] = float("nan")
    with pytest.raises(ValueError, match=rf"{type(M).__name__}\.dist: y is not a point .*contains inf or NaN"):
        M.dist(x, bad)


@pytest.mark.parametrize("M", [PoincareHalfspace(), Lorentz(), Euclidean()], ids=repr)
def test_check_is_skipped_while_tracing_without_graph_breaks(M):
    """Under torch.compile the check is skipped (documented rule): fullgraph=True proves
    it adds no graph break or data-dependent branch; values equal eager's, and an
    off-manifold input is not refused inside the trace. (Only ``dist``/``dist0``: the
    ball kernels and the maps of the other models have data-dependent branches of their
    own, and curvature != -1 calls mpmath, which fullgraph refuses with or without the
    check.)"""
    torch._dynamo.reset()
    x = M.random(4, 3, nc=None, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = M.random(4, 3, nc=None, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def f(a, b):
        return M.dist(a, b) + M.dist0(a)

    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.equal(g(x, y), f(x, y))
    if not isinstance(M, Euclidean):
        off = x.clone()
        off[..., -1 if isinstance(M, PoincareHalfspace) else 0] *= -1
        with pytest.raises(ValueError, match="is not a point"):
            f(off, y)
        g(off, y)  # traced: not checked
    torch._dynamo.reset()


def test_train_refuses_an_off_manifold_checkpoint(tmp_path):
    from hypermc.data.graph import Graph
    from hypermc.embed import train
    from hypermc.embed.train import _content_hash

    g = Graph.from_pairs([("a", "b"), ("b", "c"), ("c", "d")])
    kw = dict(manifold=PoincareBall(), dim=2, nc=2, epochs=2, burnin=0, batch_size=2, negatives=2, seed=0)
    train(g, checkpoint_dir=tmp_path, **kw)
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    ck["components"][1, 0, 0] = 5.0  # node b outside the unit ball
    del ck["sha256"]
    ck["sha256"] = _content_hash(ck)
    torch.save(ck, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"bad\.pt' holds points off PoincareBall.*outside the ball\) \(1 of 4"):
        train(g, resume=tmp_path / "bad.pt", **kw)


# ------------------------------------------------------------------ fault injection

#: Child process of the fault-injection test: the CLI ``train`` with one fault armed.
#: ``park`` writes the marker file and sleeps until the test kills the process, so the
#: kill always lands at the same point (no timing race): ``epoch:E:B`` parks at batch B
#: of epoch E (mid-epoch); ``save:N`` parks inside the N-th ``torch.save`` after writing
#: the first half of the file (a crash in the middle of writing a checkpoint).
_DRIVER = r"""
import io, os, sys, time
import torch
from hypermc import __main__ as cli
import hypermc.embed.train  # noqa: F401  (the module, not the function of the package)
T = sys.modules["hypermc.embed.train"]

mode, marker, argv = sys.argv[1], sys.argv[2], sys.argv[3:]

def park():
    open(marker, "w").close()
    time.sleep(300)
    sys.exit(99)  # not killed: the test fails on the exit code

if mode.startswith("epoch:"):
    epoch, batch = (int(v) for v in mode.split(":")[1:])
    step, seen = T._Trainer.step, [0]
    def step_then_park(self, e, *args):
        if e + 1 == epoch:
            seen[0] += 1
            if seen[0] == batch:
                park()
        return step(self, e, *args)
    T._Trainer.step = step_then_park
elif mode.startswith("save:"):
    nth, save, calls = int(mode.split(":")[1]), torch.save, [0]
    def half_save(obj, f, *args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            buf = io.BytesIO()
            save(obj, buf, *args, **kwargs)
            with open(f, "wb") as fh:
                fh.write(buf.getvalue()[: len(buf.getvalue()) // 2])
                fh.flush()
                os.fsync(fh.fileno())
            park()
        return save(obj, f, *args, **kwargs)
    torch.save = half_save
sys.exit(cli.main(argv))
"""


def _train_child(tmp_path, mode, out, *extra, kill=None):
    """Run the driver; with ``kill``, wait for its marker and send that signal."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    edges = tmp_path / "tree.csv"
    if not edges.exists():
        from hypermc.data import save_edges
        from tests.embed.helpers import tree_closure

        save_edges(tree_closure(2, 3), edges)
    marker = tmp_path / f"parked-{mode.replace(':', '-')}"
    cmd = [
        sys.executable,
        str(driver),
        mode,
        str(marker),
        "train",
        "--data",
        str(edges),
        "--out",
        str(out),
        "--manifold",
        "halfspace",
        "--dim",
        "2",
        "--nc",
        "2",
        "--epochs",
        "6",
        "--burnin",
        "2",
        "--batch-size",
        "4",
        "--negatives",
        "3",
        "--seed",
        "3",
        "--checkpoint-every",
        "1",
        "--threads",
        "1",
        "--quiet",
        *extra,
    ]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), HYPERMC_DEBUG="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if kill is None:
        out_text, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out_text
        return
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, f"the child exited before the fault point: {proc.communicate()[0]}"
        assert time.monotonic() < deadline, "the child never reached the fault point"
        time.sleep(0.02)
    proc.send_signal(kill)
    proc.communicate(timeout=60)
    assert proc.returncode == -kill, proc.returncode
    assert kill in (signal.SIGKILL, signal.SIGTERM)


def _final_state(path):
    ck = torch.load(path, weights_only=True)
    return (
        ck["epoch"],
        ck["components"],
        ck["optimizer"],
        ck["generator"],
        [{k: v for k, v in h.items() if k != "seconds"} for h in ck["history"]],
    )


def test_killed_training_resumes_bit_for_bit_and_never_leaves_a_half_checkpoint(tmp_path):
    """Kill (SIGKILL) training in the middle of epoch 4, resume, kill again in the middle
    of writing the epoch-4 checkpoint, resume again: the final embedding, optimizer and
    generator state equal an uninterrupted run's bit for bit, and after each kill the
    last complete checkpoint loads (hash checked)."""
    import signal

    from hypermc.embed.train import CHECKPOINT_NAME, load_checkpoint

    straight, broken = tmp_path / "straight", tmp_path / "broken"
    _train_child(tmp_path, "none", straight)
    ckpt = broken / CHECKPOINT_NAME

    _train_child(tmp_path, "epoch:4:3", broken, kill=signal.SIGKILL)  # batch 3 of 6
    assert load_checkpoint(ckpt)["epoch"] == 3
    assert sorted(p.name for p in broken.iterdir()) == [CHECKPOINT_NAME]

    _train_child(tmp_path, "save:1", broken, "--resume", str(ckpt), kill=signal.SIGTERM)
    tmp = broken / (CHECKPOINT_NAME + ".tmp")
    assert tmp.exists() and 0 < tmp.stat().st_size < ckpt.stat().st_size  # really half-written
    assert load_checkpoint(ckpt)["epoch"] == 3  # the previous checkpoint is intact
    with pytest.raises(ValueError, match=r"checkpoint\.pt\.tmp' is unreadable"):
        load_checkpoint(tmp)

    _train_child(tmp_path, "none", broken, "--resume", str(ckpt))
    assert not tmp.exists()  # the stale half file was removed
    want, got = _final_state(straight / CHECKPOINT_NAME), _final_state(ckpt)
    assert want[0] == got[0] == 6
    assert torch.equal(want[1], got[1]), "embeddings differ from the uninterrupted run"
    assert torch.equal(want[3], got[3]) and want[4] == got[4]
    assert repr(want[2]) == repr(got[2])
