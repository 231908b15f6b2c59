"""Data-parallel training of hierarchy embeddings on ``torch.distributed``.

Started by ``torchrun --nproc-per-node N -m hypermc train ...`` (or by
:func:`init_from_env` / ``torch.distributed.init_process_group`` in a script, then
``train(..., parallel=DataParallel())``). Every rank holds a full replica of the MC
embedding table; the replicas stay **bit-identical**:

* **Shared randomness.** Every rank runs the run's single ``torch.Generator`` through
  the same draws: the epoch's edge permutation and the negatives of the whole global
  batch (sampling is ~2 % of a step). So the generator state -- and the checkpoint --
  does not depend on the number of processes, and a run resumes with any process
  count.
* **Own share of the work.** Rank ``r`` keeps the ``r``-th of ``world_size`` contiguous
  slices of each global batch (:meth:`DataParallel.share`) and computes the distances,
  the loss and the gradient of its slice only. The loss is the slice's sum divided by
  the global batch size, so the gradients of the slices add up to the gradient of the
  one-process batch mean.
* **Exchange.** Gradients of the touched rows are plain tensors of the component dtype
  (see :mod:`hypermc.embed.distance`): each rank contributes ``(row ids, gradient rows,
  loss sum)``; :meth:`DataParallel.reduce` all-gathers them and every rank sums them **in
  rank order** (rank 0's rows, then rank 1's, ...; one ``index_add_`` per rank, whose
  ids are unique), so every rank gets the same bits whichever rank it is. Every rank
  then keeps the summed rows of its share of the batch's rows (the ``r``-th contiguous
  slice of the sorted union). **Update**: rank ``r`` clips and applies the Riemannian
  update in MC arithmetic to its share only (:meth:`DataParallel.step`; the MC
  retraction is about half of a nouns step, so replicating it would cap the speedup),
  and the ranks all-gather the updated MC components: every replica then holds the
  very bits one rank computed.
* **Verification.** :meth:`DataParallel.start` and :meth:`DataParallel.check_replicas`
  (after every epoch) compare a SHA-256 digest of the MC components and the generator
  state across ranks and raise :class:`ReplicaMismatchError` on any difference.

The sum over ranks is in a different order than autograd's sum over a one-process batch,
so a data-parallel run equals the one-process run up to rounding (the tests check the
losses agree to float noise over a few epochs), not bitwise.

Failures: the trainer's non-finite guard checks the rank's own share of the updated
rows, so a bad update raises :class:`FloatingPointError` on the rank that computed it
and the others stop at their next collective. Every collective runs under the process
group's timeout; a rank that dies
closes its sockets and the others fail at their next collective, a rank that stalls
makes them fail after the timeout. Either way they raise :class:`DistributedError`
naming the rank and the operation, instead of hanging; the error does not keep the
failed work or the process group alive (:func:`_release_failed_work`), so
``destroy_process_group`` in the handler tears the group down at once. Only rank 0
writes checkpoints and shows a progress bar.

Backends: gloo on CPU, NCCL when CUDA is available (the payloads are staged on the
process group's device, so the code is the same for both).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import traceback
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from ..manifolds.parameter import manifold_of
from ..optim.riemannian import RiemannianSGD, riemannian_sgd
from .distance import components_of

if TYPE_CHECKING:
    from ..data.graph import Graph

__all__ = [
    "DataParallel",
    "DistributedError",
    "ReplicaMismatchError",
    "init_from_env",
    "launched_by_torchrun",
    "DEFAULT_TIMEOUT",
]

#: Default timeout (seconds) of the process group's collectives: how long the ranks wait
#: for a stalled rank before they give up. Long enough for rank 0 to write a nouns
#: checkpoint (~1 s) and for a slow first batch; short enough not to hang for the
#: torch default of 30 minutes.
DEFAULT_TIMEOUT = 300.0
#: Bytes of a SHA-256 digest.
_DIGEST_BYTES = 32


class DistributedError(RuntimeError):
    """A collective failed: another rank died, stalled past the timeout, or disagrees.

    Example:
        A collective on a group that is gone (here: a one-process gloo group, closed):

        >>> import os, tempfile
        >>> import torch.distributed as dist
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = dist.FileStore(os.path.join(tmp.name, "store"), 1)
        >>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        >>> parallel = DataParallel()
        >>> parallel.close()
        >>> parallel.sum(torch.ones(2))
        Traceback (most recent call last):
        ...
        hypermc.embed.distributed.DistributedError: data-parallel training, rank 0 of 1: the collective sum
            failed (...); another rank probably died or stalled past the timeout -- check its log
        >>> tmp.cleanup()
    """


class ReplicaMismatchError(DistributedError):
    """The ranks' embedding replicas (or generator states, or configs) are not identical.

    Raised by :meth:`DataParallel.start` and :meth:`DataParallel.check_replicas` on every
    rank, naming the ranks that differ from rank 0.

    Example:
        One handler catches it with the failed collectives:

        >>> issubclass(ReplicaMismatchError, DistributedError), issubclass(DistributedError, RuntimeError)
        (True, True)
    """


def launched_by_torchrun() -> bool:
    """Whether the environment names a multi-process job (``WORLD_SIZE`` > 1).

    Example:
        >>> launched_by_torchrun()  # a plain ``python`` process: WORLD_SIZE unset
        False
    """
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        raise ValueError(f"WORLD_SIZE must be an int; got {os.environ['WORLD_SIZE']!r}") from None


def default_backend() -> str:
    """``"nccl"`` when CUDA is available, else ``"gloo"``.

    Example:
        >>> default_backend() == ("nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo")
        True
    """
    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def init_from_env(*, timeout: float = DEFAULT_TIMEOUT, backend: str | None = None) -> DataParallel | None:
    """Join the process group described by torchrun's environment variables.

    Args:
        timeout: seconds a collective waits for the other ranks before it fails.
        backend: ``"gloo"``, ``"nccl"``, or ``None`` for :func:`default_backend`.

    Returns:
        A :class:`DataParallel` for ``WORLD_SIZE`` > 1, else ``None`` (one process: the
        ordinary trainer, bit-identical to a run without torchrun).

    Raises:
        ValueError: a non-positive ``timeout`` or an unknown backend.

    Example:
        Outside torchrun there is no group to join: ``train`` runs without ``parallel``.

        >>> init_from_env() is None
        True
        >>> init_from_env(timeout=0)
        Traceback (most recent call last):
        ...
        ValueError: init_from_env: timeout must be a positive number of seconds; got 0

        In a script started by ``torchrun --nproc-per-node 2 script.py``:

        >>> parallel = init_from_env(timeout=60)  # doctest: +SKIP
        >>> r = train(graph, PoincareHalfspace(), dim=10, parallel=parallel)  # doctest: +SKIP
    """
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"init_from_env: timeout must be a positive number of seconds; got {timeout!r}")
    if not launched_by_torchrun():
        return None
    backend = backend or default_backend()
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"init_from_env: backend must be 'gloo' or 'nccl'; got {backend!r}")
    if not dist.is_initialized():
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=float(timeout)))
    return DataParallel()


def _update_rows(opt: torch.optim.Optimizer, comps: torch.Tensor, rows: torch.Tensor) -> None:
    """``opt.step(rows=rows)`` for the trainer's one-table :class:`RiemannianSGD`, in O(rows).

    The optimizer's row-sparse step writes the rows back through the MC table's
    ``index_put_``, which also costs a copy of the whole table (~7 ms per step at 82k x
    10 x 2 components, a fifth of a nouns step). Here the functional update
    :func:`~hypermc.optim.riemannian_sgd` runs on the gathered rows as a small dense
    parameter -- the same function on the same numbers, so the same bits -- and the
    result is written into the components. Other optimizers take ``opt.step``.
    """
    group = opt.param_groups[0]
    if type(opt) is not RiemannianSGD or len(opt.param_groups) != 1 or len(group["params"]) != 1 or (group["momentum"] != 0):
        opt.step(rows=rows)  # type: ignore[call-overload]  # RiemannianSGD(sparse_rows=True) takes rows
        return
    (param,) = group["params"]
    sub = param.detach()[rows]
    riemannian_sgd(
        [sub],
        [param.grad[rows]],
        [None],
        manifolds=[manifold_of(param)],
        lr=group["lr"],
        weight_decay=group["weight_decay"],
        retraction=group["retraction"],
    )
    comps[rows] = components_of(sub)


def _release_failed_work(exc: BaseException) -> None:
    """Drop the locals of the finished frames in ``exc``'s traceback (torch's collective).

    ``torch.distributed``'s collective functions keep the failed work object and the
    process group in their locals, and the traceback keeps those frames: as long as the
    error (or a :class:`DistributedError` chained to it) is alive -- in an ``except``
    block that calls ``destroy_process_group``, in a logger, in ``sys.last_value`` --
    the group's backend (threads, sockets) would outlive ``destroy_process_group`` and
    be torn down whenever the error is released, possibly during interpreter shutdown.
    Clearing the frames releases them now, so ``destroy_process_group`` tears the group
    down then and there. The traceback's lines stay for the report.
    """
    traceback.clear_frames(exc.__traceback__)


class DataParallel:
    """Hooks that make :func:`~hypermc.embed.train` data-parallel (module docstring).

    Args:
        group: the process group (default: the default group, which must be
            initialised).

    Attributes:
        rank, world_size: this process's rank and the number of processes.
        device: where payloads are staged for the collectives (CPU for gloo, the
            current CUDA device for NCCL).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised.

    Example:
        Under torchrun every process calls ``train(..., parallel=init_from_env())`` with
        the same arguments (``torchrun --nproc-per-node 2 -m hypermc train ...`` does it).
        The same code runs in one process on a group of one -- a gloo group over a file
        store in a temporary directory -- and then gives the bits of a run without
        ``parallel``:

        >>> import os, tempfile
        >>> import torch.distributed as dist
        >>> from hypermc.data import Graph
        >>> from hypermc.embed import train
        >>> from hypermc.manifolds import PoincareHalfspace
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = dist.FileStore(os.path.join(tmp.name, "store"), 1)
        >>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        >>> parallel = DataParallel()
        >>> parallel, parallel.is_writer
        (DataParallel(rank=0, world_size=1, device=cpu), True)
        >>> g = Graph.from_pairs([("a", "r"), ("b", "r"), ("a1", "a"), ("a1", "r"), ("b1", "b"), ("b1", "r")])
        >>> r = train(g, PoincareHalfspace(), dim=2, epochs=3, negatives=4, parallel=parallel, progress=False)
        >>> one = train(g, PoincareHalfspace(), dim=2, epochs=3, negatives=4, progress=False)
        >>> torch.equal(r.embeddings.components, one.embeddings.components)
        True
        >>> parallel.sum(torch.tensor([1.5, 2.0]))  # every rank's tensor, summed in rank order
        tensor([1.5000, 2.0000])
        >>> parallel.close()  # a barrier, then the group is destroyed
        >>> dist.is_initialized()
        False
        >>> tmp.cleanup()
    """

    def __init__(self, group: dist.ProcessGroup | None = None):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "DataParallel: torch.distributed is not initialised; start with torchrun and call "
                "init_from_env() (or torch.distributed.init_process_group) first"
            )
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        backend = dist.get_backend(group)
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
        # The last batch's sorted union of row ids and its split into shares (reduce -> step).
        self._union = torch.empty(0, dtype=torch.int64)
        self._bounds = [0] * (self.world_size + 1)

    def __repr__(self) -> str:
        return f"DataParallel(rank={self.rank}, world_size={self.world_size}, device={self.device})"

    @property
    def is_writer(self) -> bool:
        """Whether this rank writes checkpoints and output (rank 0)."""
        return self.rank == 0

    # ------------------------------------------------------------------ validation

    def check(self, graph: Graph, batch_size: int) -> None:
        """Reject setups the data-parallel trainer cannot run.

        Raises:
            ValueError: ``world_size`` larger than the number of edges or than
                ``batch_size`` (some rank would never get an edge).
        """
        if self.world_size > graph.num_edges:
            raise ValueError(
                f"train: world_size {self.world_size} is larger than the number of edges "
                f"{graph.num_edges}; start at most {graph.num_edges} processes"
            )
        if self.world_size > batch_size:
            raise ValueError(
                f"train: world_size {self.world_size} is larger than batch_size {batch_size}; every "
                "rank needs a share of each batch: raise batch_size or start fewer processes"
            )

    def start(self, config: dict, comps: torch.Tensor, generator: torch.Generator) -> None:
        """Check that every rank starts from the same config, table and generator.

        Raises:
            ReplicaMismatchError: naming the ranks that differ from rank 0.
        """
        text = json.dumps(config, sort_keys=True).encode()
        self._compare(
            self._digest(comps, generator, extra=text),
            "at the start (config, initial table or checkpoint differ: give every rank the same command line)",
        )

    def check_replicas(self, comps: torch.Tensor, generator: torch.Generator, epoch: int) -> None:
        """Check that the replicas and generator states are bit-identical after ``epoch``.

        Raises:
            ReplicaMismatchError: naming the ranks that differ from rank 0.
        """
        self._compare(self._digest(comps, generator), f"after epoch {epoch}")

    # ------------------------------------------------------------------ per batch

    def share(self, pairs: torch.Tensor, neg: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This rank's contiguous slice of a global batch (edges, negatives, mask)."""
        n = pairs.shape[0]
        lo = n * self.rank // self.world_size
        hi = n * (self.rank + 1) // self.world_size
        return pairs[lo:hi], neg[lo:hi], valid[lo:hi]

    def reduce(self, ids: torch.Tensor, grad: torch.Tensor, loss_sum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sum the ranks' gradient rows and loss sums, identically on every rank.

        Args:
            ids: ``(U,)`` unique int64 row ids this rank touched.
            grad: ``(U, n)`` gradient rows (plain, component dtype).
            loss_sum: 0-d tensor, this rank's sum of per-edge losses.

        Returns:
            ``(ids, grad, loss_sum)``: this rank's share of the rows -- the ``rank``-th
            of ``world_size`` contiguous slices of the sorted union of all ranks' ids --
            their summed gradient rows (rank order: rank 0 + rank 1 + ...), and the
            total loss sum (float64, summed in rank order, the same on every rank).
            The trainer clips and updates only these rows; :meth:`step` then swaps the
            updated rows of all shares.

        Raises:
            DistributedError: a collective failed (another rank died or stalled).
        """
        w = self.world_size
        # 1. counts and loss sums (the float64 bits travel as int64: exact).
        head = torch.stack(
            [torch.tensor(ids.numel(), dtype=torch.int64), loss_sum.detach().to(torch.float64).reshape(()).view(torch.int64)]
        )
        heads = self._all_gather(head, "reduce (sizes)")
        counts = heads[:, 0].tolist()
        losses = heads[:, 1].contiguous().view(torch.float64)
        total = losses[0].clone()
        for r in range(1, w):
            total = total + losses[r]
        # 2. ids and gradient rows, padded to the largest count, as bytes.
        cap = max(counts)
        n = grad.shape[1]
        row_bytes = 8 + n * grad.element_size()
        payload = torch.zeros(cap * row_bytes, dtype=torch.uint8)
        u = ids.numel()
        if u:
            payload[: u * 8] = ids.contiguous().view(torch.uint8)
            payload[cap * 8 : cap * 8 + u * (row_bytes - 8)] = grad.detach().contiguous().view(torch.uint8).reshape(-1)
        gathered = self._all_gather(payload, "reduce (gradients)") if cap else payload.new_empty((w, 0))
        id_list, grad_list = [], []
        for r in range(w):
            c = counts[r]
            buf = gathered[r]
            id_list.append(buf[: c * 8].view(torch.int64))
            grad_list.append(buf[cap * 8 : cap * 8 + c * (row_bytes - 8)].view(grad.dtype).reshape(c, n))
        union, inv = torch.unique(torch.cat(id_list), return_inverse=True)
        u = union.numel()
        self._union = union
        self._bounds = [u * r // w for r in range(w + 1)]
        first, last = self._bounds[self.rank], self._bounds[self.rank + 1]
        acc = torch.zeros(last - first, n, dtype=grad.dtype)
        lo = 0
        for r in range(w):  # fixed rank order: the same bits whichever rank sums a row
            c = counts[r]
            pos = inv[lo : lo + c]
            keep = (pos >= first) & (pos < last)
            acc.index_add_(0, pos[keep] - first, grad_list[r][keep])
            lo += c
        return union[first:last].to(ids.device), acc.to(grad.device), total

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """Sum of every rank's ``t`` in rank order: the same bits on every rank.

        Used by the sharded evaluation (``evaluate(..., reduce=parallel.sum)``).

        Raises:
            DistributedError: a collective failed.
        """
        parts = self._all_gather(t, "sum")
        total = parts[0].clone()
        for r in range(1, self.world_size):
            total = total + parts[r]
        return total

    def evaluate_kwargs(self) -> dict:
        """Keyword arguments of :func:`~hypermc.embed.evaluate` that split the sources'
        chunks over the ranks and sum the partial results (every rank gets the result)."""
        return {"reduce": self.sum, "shard": (self.rank, self.world_size)}

    def step(self, opt: torch.optim.Optimizer, comps: torch.Tensor, ids: torch.Tensor) -> None:
        """Update this rank's share ``ids`` (from :meth:`reduce`) and swap all shares.

        Rank ``r`` updates its share of the batch's rows only (the MC retraction is
        about half of a step's time on the nouns; the bits of ``opt.step(rows=ids)``,
        see :func:`_update_rows`), then the ranks all-gather the updated MC components
        and write every share into their tables (components ``comps``): every replica
        receives the very bits one rank computed. ``opt`` must keep no per-row state
        (the trainer's plain :class:`~hypermc.optim.RiemannianSGD` keeps none); the
        gradient buffer must hold the summed gradient of every row in ``ids``.

        Raises:
            ValueError: ``ids`` is not the share returned by the last :meth:`reduce`.
            NotImplementedError: ``opt`` holds per-row state (momentum buffers would be
                stale on the ranks that did not update a row).
            DistributedError: a collective failed.
        """
        union, bounds, w = self._union, self._bounds, self.world_size
        if ids.numel() != bounds[self.rank + 1] - bounds[self.rank]:
            raise ValueError("DataParallel.step: ids must be the share returned by the last reduce")
        if any(len(s) for s in opt.state.values()):
            raise NotImplementedError(
                "DataParallel.step: the optimizer keeps per-row state (momentum?); sharded "
                "updates need a stateless optimizer such as RiemannianSGD(momentum=0)"
            )
        cap = max(bounds[r + 1] - bounds[r] for r in range(w))
        if ids.numel():
            _update_rows(opt, comps, ids)
        block = torch.zeros((cap, *comps.shape[1:]), dtype=comps.dtype)
        block[: ids.numel()] = comps[ids]
        if cap:
            parts = self._all_gather(block, "row exchange")
            comps[union] = torch.cat([parts[r, : bounds[r + 1] - bounds[r]] for r in range(w)]).to(comps.device)

    def close(self) -> None:
        """Wait for every rank (a barrier), then destroy the default process group.

        Tearing gloo down while another rank is still inside a collective can abort a
        process at exit ("terminate called without an active exception"); the barrier
        makes the ranks leave together. Call it on the success path only (after an
        error, call ``torch.distributed.destroy_process_group()`` directly).

        Raises:
            DistributedError: the barrier failed (another rank died or stalled).
        """
        try:
            dist.barrier(group=self.group)
        except Exception as exc:
            _release_failed_work(exc)
            raise DistributedError(
                f"data-parallel training, rank {self.rank} of {self.world_size}: the closing barrier failed "
                f"({type(exc).__name__}); another rank probably died or stalled past the timeout"
            ) from exc
        finally:
            dist.destroy_process_group()

    # ------------------------------------------------------------------ plumbing

    def _all_gather(self, t: torch.Tensor, what: str) -> torch.Tensor:
        """``(world_size, *t.shape)`` on the CPU: every rank's ``t``."""
        src = t.to(self.device)
        out = [torch.empty_like(src) for _ in range(self.world_size)]
        try:
            dist.all_gather(out, src, group=self.group)
        except Exception as exc:  # gloo/NCCL raise RuntimeError subclasses of their own
            _release_failed_work(exc)
            raise DistributedError(
                f"data-parallel training, rank {self.rank} of {self.world_size}: the collective {what} "
                f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); another "
                "rank probably died or stalled past the timeout -- check its log"
            ) from exc
        return torch.stack(out).cpu()

    @staticmethod
    def _digest(comps: torch.Tensor, generator: torch.Generator, extra: bytes = b"") -> torch.Tensor:
        h = hashlib.sha256()
        h.update(comps.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        h.update(generator.get_state().numpy().tobytes())
        h.update(extra)
        return torch.frombuffer(bytearray(h.digest()), dtype=torch.uint8)

    def _compare(self, digest: torch.Tensor, when: str) -> None:
        digests = self._all_gather(digest, "replica check")
        differ = [r for r in range(self.world_size) if not torch.equal(digests[r], digests[0])]
        if differ:
            raise ReplicaMismatchError(f"data-parallel training: the replicas of ranks {differ} differ from rank 0's {when}")
