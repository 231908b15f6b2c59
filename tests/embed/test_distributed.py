"""Data-parallel training on torch.distributed: 2 gloo processes on localhost.

The replicas must stay bit-identical, the losses must equal the one-process run with the
same global batch up to rounding, checkpoints must resume with another process count,
and bad setups (too many ranks, a dying rank) must fail with an error, not hang.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hypermc.data import load_mammals
from hypermc.embed import load_checkpoint, train
from hypermc.embed.distributed import DataParallel, init_from_env
from hypermc.embed.train import CHECKPOINT_NAME
from hypermc.manifolds import PoincareHalfspace
from tests.embed.helpers import tree_closure

F64 = torch.float64
#: Mammals, 3 epochs (the first in burn-in), 10-D halfspace in MC nc=2.
KW = dict(
    dim=10, nc=2, dtype=F64, batch_size=256, negatives=20, burnin=1, lr=5.0, lr_schedule="constant", fast=False, seed=7, progress=False
)
#: Process-group timeout of the test ranks (seconds): the rendezvous and every collective
#: before a stall. Generous, so that a rank that starts or runs late on a busy machine
#: (pytest-xdist, other jobs) never times out by accident; a dead rank is noticed at once
#: (its sockets close), so the dying-rank test does not wait for it.
TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graph(name):
    return load_mammals() if name == "mammals" else tree_closure(2, 2)


def _held_by_traceback(exc):
    """Names of c10d objects (work, process group) that ``exc``'s traceback chain keeps alive."""
    held, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame is not sys._getframe(1):  # not the frame handling the error
                held += [type(v).__name__ for v in tb.tb_frame.f_locals.values() if isinstance(v, (dist.Work, dist.ProcessGroup))]
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return held


def _worker(rank, world, port, out, graph_name, kwargs, die_at, stall=0.0, stall_timeout=None):
    """One rank: join the group, train, save the table/history (or the error) to ``out``.

    With ``die_at``, rank 1 dies (``os._exit``) or sleeps ``stall`` seconds after that
    epoch; for a stall, rank 0 lowers the group's timeout to ``stall_timeout`` at the
    same point, so only the stall -- not a late start or a slow step -- can time out.
    """
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    kwargs = kwargs[rank] if isinstance(kwargs, list) else kwargs  # per-rank arguments
    result = {}
    try:
        parallel = init_from_env(timeout=TIMEOUT, backend="gloo")

        def callback(epoch, stats, table):
            if die_at is None or epoch != die_at:
                return
            if rank == 0 and stall:
                dist.group.WORLD.set_timeout(datetime.timedelta(seconds=stall_timeout))
            elif rank == 1 and stall:
                time.sleep(stall)  # a rank that stalls (then runs into the closed group)
            elif rank == 1:
                os._exit(3)  # a rank that dies without any goodbye

        r = train(_graph(graph_name), PoincareHalfspace(), parallel=parallel, callback=callback, **kwargs)
        result = {"components": r.embeddings.components, "history": r.history, "checkpoint": r.checkpoint}
        parallel.close()
    except Exception as exc:  # reported to the test through the file
        result = {"error": f"{type(exc).__name__}: {exc}", "held": _held_by_traceback(exc)}
    finally:
        result["seconds"] = time.perf_counter()
        if dist.is_initialized():
            dist.destroy_process_group()
        result["destroyed"] = True  # the group's teardown returned (an abort inside it leaves no file)
        torch.save(result, f"{out}.{rank}")
    # Leave without interpreter finalization. After a timed-out gloo collective, torch's
    # own static teardown at interpreter exit aborted the process once in ~40 runs
    # ("terminate called without an active exception", exit -6) although the error had
    # been raised, reported and the group destroyed; that is torch's exit path, not the
    # library's, and it made this file's exit-code assertions flaky. An abort inside
    # destroy_process_group still fails the tests (no result file).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _run(tmp_path, world, kwargs, graph_name="mammals", die_at=None, join_timeout=240, stall=0.0, stall_timeout=None):
    out = str(tmp_path / "rank")
    args = (world, _free_port(), out, graph_name, kwargs, die_at, stall, stall_timeout)
    ctx = mp.start_processes(_worker, args=args, nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + join_timeout
    for p in ctx.processes:
        p.join(max(0.0, deadline - time.monotonic()))
    alive = [p.pid for p in ctx.processes if p.is_alive()]
    for p in ctx.processes:
        if p.is_alive():
            p.kill()
    assert not alive, f"ranks still running after {join_timeout} s (a hang): {alive}"
    results = []
    for rank in range(world):
        path = f"{out}.{rank}"
        results.append(torch.load(path, weights_only=False) if os.path.exists(path) else None)
    codes = [p.exitcode for p in ctx.processes]
    for rank, (r, code) in enumerate(zip(results, codes)):
        if r is None and code != 3:  # 3: the dying-rank test's os._exit
            raise AssertionError(f"rank {rank} left no result (exit code {code}): it died before or inside destroy_process_group")
    return results, codes


def test_two_ranks_match_one_process_and_resume_with_another_count(tmp_path):
    g = load_mammals()
    M = PoincareHalfspace()
    single = train(g, M, epochs=3, **KW)
    ranks, codes = _run(tmp_path, 2, {**KW, "epochs": 2, "checkpoint_dir": str(tmp_path / "run")})
    assert codes == [0, 0] and all("error" not in r for r in ranks), ranks
    # Replicas bit-identical (also checked inside train after every epoch).
    assert torch.equal(ranks[0]["components"], ranks[1]["components"])
    stats = [[(h["loss"], h["masked"], h["lr"]) for h in r["history"]] for r in ranks]
    assert stats[0] == stats[1]  # the same summed losses on every rank
    # Only rank 0 wrote a checkpoint; it does not depend on the process count.
    assert ranks[0]["checkpoint"] == str(tmp_path / "run" / CHECKPOINT_NAME) and ranks[1]["checkpoint"] is None
    ckpt = load_checkpoint(tmp_path / "run" / CHECKPOINT_NAME)
    assert ckpt["epoch"] == 2 and "world_size" not in ckpt["config"]
    # Same negatives, same global batch: the losses agree up to rounding.
    two = [h["loss"] for h in ranks[0]["history"]]
    one = [h["loss"] for h in single.history[:2]]
    assert two == pytest.approx(one, rel=1e-9, abs=0)
    assert [h["masked"] for h in ranks[0]["history"]] == [h["masked"] for h in single.history[:2]]
    # Resume the 2-process checkpoint in one process for the third epoch.
    resumed = train(g, M, epochs=3, resume=tmp_path / "run" / CHECKPOINT_NAME, **KW)
    assert resumed.history[:2] == ckpt["history"]
    assert resumed.history[2]["loss"] == pytest.approx(single.history[2]["loss"], rel=1e-9, abs=0)
    diff = (resumed.embeddings.approx() - single.embeddings.approx()).abs().max()
    assert float(diff) < 1e-9


def test_resume_one_process_checkpoint_with_two_ranks(tmp_path):
    """Also covers uneven and empty shares (batch 3, 2 ranks; the toy tree has 10 edges)."""
    g = tree_closure(2, 2)
    kw = {**KW, "batch_size": 3, "negatives": 4}
    single = train(g, PoincareHalfspace(), epochs=4, **kw)
    train(g, PoincareHalfspace(), epochs=2, checkpoint_dir=tmp_path / "one", **kw)
    ranks, codes = _run(tmp_path, 2, {**kw, "epochs": 4, "resume": str(tmp_path / "one" / CHECKPOINT_NAME)}, graph_name="tree")
    assert codes == [0, 0] and all("error" not in r for r in ranks), ranks
    assert torch.equal(ranks[0]["components"], ranks[1]["components"])
    assert [h["loss"] for h in ranks[0]["history"]] == pytest.approx([h["loss"] for h in single.history], rel=1e-9)


def test_dying_rank_stops_the_others(tmp_path):
    """Rank 1 dies after epoch 2: rank 0 raises DistributedError at its next collective and exits 0.

    Rank 0 learns of the death from the closed sockets, not from a timeout. The error it
    raises holds no c10d work or process group in its traceback (torch's frames are
    cleared), so ``destroy_process_group`` tears the group down at once.

    Measured with the stalled-rank test on the busy shared 2-core machine (load 5-10):
    ``pytest -k "dying or stall"`` 20 times in a row, 20/20 green (10-58 s for this
    test).
    """
    start = time.perf_counter()
    ranks, codes = _run(tmp_path, 2, {**KW, "epochs": 50, "batch_size": 4, "negatives": 4}, graph_name="tree", die_at=2)
    assert codes[1] == 3 and ranks[1] is None  # rank 1 died
    assert codes[0] == 0 and "DistributedError" in ranks[0]["error"], ranks[0]
    assert "rank 0 of 2" in ranks[0]["error"] and "died or stalled" in ranks[0]["error"]
    assert ranks[0]["held"] == []
    assert time.perf_counter() - start < 240


def test_ranks_with_different_settings_fail_at_the_start(tmp_path):
    kw = {**KW, "epochs": 1, "batch_size": 4, "negatives": 4}
    ranks, codes = _run(tmp_path, 2, [kw, {**kw, "seed": 8}], graph_name="tree")
    for r in ranks:
        assert "ReplicaMismatchError" in r["error"] and "ranks [1] differ from rank 0's at the start" in r["error"]


@pytest.mark.slow
def test_stalled_rank_times_out(tmp_path):
    """Rank 1 sleeps 20 s after epoch 2, where rank 0 lowers the group's timeout to 3 s.

    Rank 0 fails after the timeout, long before rank 1 wakes; rank 1 then runs into the
    closed group; both exit 0. Only the stall can time out: the rendezvous and the
    collectives before it run under the generous ``TIMEOUT``, so a rank that starts or
    steps late under load does not fail the test (before, with 4 s for everything, a
    rank starting 5 s late failed the rendezvous with DistStoreError). 20 runs in a row
    with the dying-rank test: 20/20 green (30-75 s each).
    """
    ranks, codes = _run(
        tmp_path, 2, {**KW, "epochs": 50, "batch_size": 4, "negatives": 4}, graph_name="tree", die_at=2, stall=20.0, stall_timeout=3.0
    )
    assert "DistributedError" in ranks[0]["error"] and "Timed out" in ranks[0]["error"], ranks[0]
    assert "DistributedError" in ranks[1]["error"], ranks[1]
    assert ranks[0]["seconds"] < ranks[1]["seconds"] - 10  # rank 0 gave up long before rank 1 woke
    assert codes == [0, 0]


def _single_rank_group(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=TIMEOUT))


def test_world_size_checks(tmp_path):
    g = tree_closure(1, 2)  # 2 edges
    _single_rank_group(tmp_path)
    try:
        p = DataParallel()
        assert (p.rank, p.world_size, p.is_writer) == (0, 1, True)
        p.world_size = 3  # as if 3 ranks had joined
        with pytest.raises(ValueError, match="world_size 3 is larger than the number of edges 2"):
            train(g, PoincareHalfspace(), epochs=1, parallel=p, **{**KW, "batch_size": 8})
        with pytest.raises(ValueError, match="world_size 3 is larger than batch_size 2"):
            p.check(tree_closure(2, 2), 2)
    finally:
        dist.destroy_process_group()


def test_not_initialised_and_env(monkeypatch):
    with pytest.raises(RuntimeError, match="not initialised"):
        DataParallel()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert init_from_env() is None  # one process: the plain trainer
    with pytest.raises(ValueError, match="timeout must be a positive"):
        init_from_env(timeout=0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="backend must be 'gloo' or 'nccl'"):
        init_from_env(backend="mpi")


def test_reduce_sums_in_rank_order(tmp_path):
    """One rank: reduce returns its own rows (sorted) and loss, exactly."""
    _single_rank_group(tmp_path)
    try:
        p = DataParallel()
        ids = torch.tensor([5, 1, 3])
        grad = torch.randn(3, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
        u, gsum, loss = p.reduce(ids, grad, torch.tensor(1.25, dtype=F64))
        assert u.tolist() == [1, 3, 5] and torch.equal(gsum, grad[[1, 2, 0]]) and float(loss) == 1.25
        with pytest.raises(ValueError, match="the share returned by the last reduce"):
            p.step(None, torch.zeros(6, 4, 1, dtype=F64), u[:2])
        u, gsum, loss = p.reduce(ids[:0], grad[:0], torch.tensor(0.0, dtype=F64))
        assert u.numel() == 0 and gsum.shape == (0, 4)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "change, match",
    [
        ({"nc": 3}, "nc is 2 in the checkpoint but 3 now"),
        ({"dtype": torch.float32}, "dtype is 'float64' in the checkpoint but 'float32' now"),
    ],
)
def test_resume_with_other_nc_or_dtype_fails(tmp_path, change, match):
    g = tree_closure(1, 2)
    train(g, PoincareHalfspace(), epochs=1, checkpoint_dir=tmp_path, **KW)
    with pytest.raises(ValueError, match=match):
        train(g, PoincareHalfspace(), epochs=2, resume=tmp_path / CHECKPOINT_NAME, **{**KW, **change})


@pytest.mark.parametrize("nc", [None, 2, 3])
def test_row_update_equals_optimizer_step(nc):
    """The O(rows) update of DataParallel.step gives the bits of RiemannianSGD.step(rows=...)."""
    from hypermc.embed.distance import components_of
    from hypermc.embed.distributed import _update_rows
    from hypermc.manifolds.parameter import ManifoldParameter
    from hypermc.optim.riemannian import RiemannianSGD

    M = PoincareHalfspace()
    rows = torch.unique(torch.randint(300, (120,), generator=torch.Generator().manual_seed(3)))
    out = []
    for fast in (False, True):
        x = M.random(300, 4, std=2.0, nc=nc, dtype=F64, generator=torch.Generator().manual_seed(1))
        t = ManifoldParameter(x, manifold=M, requires_grad=False)
        opt = RiemannianSGD([t], lr=0.7, retraction=True, sparse_rows=True)
        t.grad = torch.zeros_like(t.detach())
        components_of(t.grad)[..., 0].normal_(generator=torch.Generator().manual_seed(2))
        if fast:
            _update_rows(opt, components_of(t.detach()), rows)
        else:
            opt.step(rows=rows)
        out.append(components_of(t.detach()).clone())
    assert torch.equal(out[0], out[1])
