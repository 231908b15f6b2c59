"""Which path each MC op takes here: a fused kernel or the torch path, and why.

:func:`backends` reads the state of every compiled library from
:mod:`hypermc.mcf.registry` (the one place the build / self-check / fall-back outcome is
kept) and the rules of :mod:`hypermc.mcf.native` (which library serves an op for a dtype,
nc and device); it builds nothing unless ``build=True``. ``python -m hypermc doctor``
prints it as a table.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._checks import check_choice
from .manifolds.math import fused as manifold_kernels
from .mcf import native, registry
from .mcf.arith import engine_dtype
from .mcf.eft import has_fused_addcmul
from .mcf.native import cuda as native_cuda

__all__ = ["Backend", "backends", "table", "flushes_subnormals", "OPS", "DEVICES"]

#: Arithmetic ops (the per-op library, ``part="arith"``); ``sub`` runs the add kernel.
ARITH = ("add", "sub", "mul", "div", "sqrt")
#: Row reductions over the last dim, one kernel call per tensor (``mc_rowsumsq`` in the
#: ``nc + 1`` arith library): sums of squares, norms and ``1 - c|x|^2`` (the ball's deficit).
ROWS = ("sumsq",)
#: Sums over any dims: the whole pairwise tree in one kernel call on the CPU (``mc_sum`` in
#: the arith library of the same nc), one launch per tree level on CUDA.
SUMS = ("sum",)
#: Grouped sums (scatter_reduce's sum and mean, index_add, the backward of index_select,
#: gather and embedding; PyTorch Geometric's aggregations): every slot's tree in one kernel
#: call on the CPU (``mc_runsum`` in the arith library of the same nc).
GROUPED = ("scatter_sum",)
#: Elementary functions (the float64 ``part="elementary"`` library).
ELEMENTARY = ("exp", "log", "expm1", "log1p", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh")
#: The manifold kernels (:mod:`hypermc.manifolds.math.fused`: the trainer's and the
#: evaluator's batched distances of the half-space, the ball and the hyperboloid).
MANIFOLD = ("halfspace_dist", "ball_dist", "lorentz_dist")
OPS = ARITH + SUMS + GROUPED + ROWS + ELEMENTARY + MANIFOLD
DEVICES = ("cpu", "cuda")
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# float32 elementary functions whose torch path enters float64 as a double-word (nc = 3, 4;
# log, log1p, acosh and atanh after forming their arguments in float32)
_DOUBLE_WORD = ("exp", "expm1", "sinh", "cosh", "tanh", "asinh", "sin", "cos", "tan", "log", "log1p", "acosh", "atanh")


class Backend(NamedTuple):
    """One row of :func:`backends`: ``path`` is ``"fused"`` or ``"torch"``; ``reason`` says
    why the torch path runs (empty for ``"fused"``).

    Example:
        >>> Backend("add", "float64", 3, "cpu", "torch", "no C++ compiler").path
        'torch'
    """

    op: str
    dtype: str
    nc: int
    device: str
    path: str
    reason: str


def _library(op: str, dtype: torch.dtype, nc: int, device: str) -> tuple[tuple, str] | str:
    """``(library key, kind)`` of the kernel that serves the op, or why there is none
    (as :mod:`hypermc.mcf.arith` and :mod:`hypermc.mcf.elementary` dispatch)."""
    name = native._NAMES[dtype]
    if op in MANIFOLD:
        model = op.removesuffix("_dist")
        if device != "cpu":
            return "no CUDA kernel (CPU only)"
        if model == "lorentz" and nc not in manifold_kernels.LORENTZ_NCS:
            return f"no fused kernel at nc={nc} (its sum of squares would need arith kernels at nc + 1 = {nc + 1})"
        return (model, dtype, nc), model
    if op in ROWS:
        if nc + 1 not in native.NCS:
            return f"the slotted sum tree (no arith kernels at nc + 1 = {nc + 1})"
        if device != "cpu":
            return "no row kernel on CUDA (one fused kernel per tree level and step)"
        return native._key(name, nc + 1, "arith", device), "rows"
    if op in GROUPED:
        if device != "cpu":
            return "no grouped-sum kernel on CUDA (the torch tree: its kernels per level)"
        return native._key(name, nc, "arith", device), "arith"
    if op in SUMS:
        if device != "cpu" and nc not in native_cuda.SUM_NCS:
            return f"no sum kernels at nc={nc} on CUDA (a tree level would take {2 * (nc + 1)} inputs; jiterator takes 8)"
        return native._key(name, nc, "arith", device), "arith"
    if op in ARITH:
        if op in ("div", "sqrt") and engine_dtype(dtype, nc) is not None:
            return "computed in float64 arithmetic (no MC kernel needed)"
        return native._key(name, nc, "arith", device), "arith"
    if dtype == torch.float32:
        if nc == 2:
            return "computed in float64 arithmetic (no MC kernel needed)"
        if op not in _DOUBLE_WORD:
            return "argument prepared in float32 (no fused kernel)"
        nc = 2  # the float64 double-word of the float32 expansion
    if nc not in native._elementary_ncs(device):
        return f"no elementary kernels for nc={nc} on {device}"
    return native._key("f64", nc, "elementary", device), "elementary"


def _build(key: tuple, kind: str, dtype: torch.dtype, nc: int, device: str) -> None:
    if kind in ("halfspace", "ball", "lorentz"):
        manifold_kernels.available(dtype, nc, kind)
    elif kind == "rows":
        native.available(dtype, nc + 1, "arith", device)
    else:
        native.available(torch.float64 if kind == "elementary" else dtype, key[-2] if kind == "elementary" else nc, kind, device)


def _row(op: str, dtype: str, nc: int, device: str, build: bool) -> Backend:
    def torch_path(reason: str) -> Backend:
        return Backend(op, dtype, nc, device, "torch", reason)

    found = _library(op, _DTYPES[dtype], nc, device)
    if isinstance(found, str):
        return torch_path(found)
    if registry.disabled():
        return torch_path(registry.DISABLED)
    if device == "cpu" and native._compiler() is None:
        return torch_path(native.NO_COMPILER)
    if device == "cuda" and native_cuda.available() is not None:
        return torch_path(str(native_cuda.available()))
    key, kind = found
    fma = {"arith": dtype if op in ("mul", "div", "sqrt") else None, "rows": dtype, "elementary": "float64", "lorentz": dtype}.get(kind)
    if fma is not None and not has_fused_addcmul(device, _DTYPES[fma]):
        return torch_path(f"no measured fused multiply-add for {fma} on {device}")
    if build:
        _build(key, kind, _DTYPES[dtype], nc, device)
    state = registry.state(key)
    if kind == "lorentz" and state != registry.IN_USE and build:
        # its own library may never be opened: the arithmetic it traces is not in use
        state = manifold_kernels.status(_DTYPES[dtype], nc, "lorentz")
    return Backend(op, dtype, nc, device, "fused", "") if state == registry.IN_USE else torch_path(state)


def backends(
    op: str | None = None, dtype: str | None = None, nc: int | None = None, device: str | None = None, *, build: bool = False
) -> list[Backend]:
    """For each op x dtype x nc x device (or those given), whether a fused kernel or the
    torch path runs, and why.

    Args:
        op: one of :data:`OPS` (default: all).
        dtype: ``"float32"`` or ``"float64"`` (default: both).
        nc: 2, 3 or 4 (default: all; nc = 1 is plain torch).
        device: ``"cpu"`` or ``"cuda"`` (default: both).
        build: build and self-check the libraries first (minutes on the first call on a
            machine: the elementary libraries are large); otherwise nothing is built and a
            library not used yet in this process says ``"not built yet"``.

    Returns:
        one :class:`Backend` per combination.

    Example:
        >>> rows = backends("add", "float64", 3, "cpu")
        >>> rows[0].path in ("fused", "torch"), rows[0].op, rows[0].nc
        (True, 'add', 3)
        >>> backends("erf")
        Traceback (most recent call last):
        ...
        ValueError: backends: op must be one of 'add', ...; got 'erf'
    """
    ops = OPS if op is None else (check_choice("backends", "op", op, OPS),)
    dtypes = tuple(_DTYPES) if dtype is None else (check_choice("backends", "dtype", dtype, tuple(_DTYPES)),)
    ncs = native.NCS if nc is None else (check_choice("backends", "nc", nc, native.NCS),)
    devices = DEVICES if device is None else (check_choice("backends", "device", device, DEVICES),)
    return [_row(o, d, n, v, build) for v in devices for d in dtypes for n in ncs for o in ops]


def flushes_subnormals() -> bool:
    """Whether the CPU flushes subnormal floats to zero in the calling thread
    (``torch.set_flush_denormal(True)``).

    MC arithmetic assumes gradual underflow, as IEEE 754 specifies and the CPU does by
    default: the last components of a number whose leading one is below about
    ``2^(emin + (nc - 1) p)`` (``2^-916`` for float64 nc = 3) are subnormal, and with
    flushing on they become zero, so such numbers keep fewer correct bits than their nc
    promises. Numbers of ordinary size never have subnormal components and are not
    affected. ``python -m hypermc doctor`` reports this state. torch has no getter for
    it; the probe halves the smallest normal float64 in this thread (flushing is a
    per-thread CPU setting).

    Example:
        >>> before = torch.set_flush_denormal(True)
        >>> flushes_subnormals() == before  # True where the CPU supports flushing
        True
        >>> _ = torch.set_flush_denormal(False)
        >>> flushes_subnormals()
        False
    """
    tiny = torch.tensor(torch.finfo(torch.float64).tiny, dtype=torch.float64)
    return bool(tiny * 0.5 == 0)


def table(rows: list[Backend]) -> str:
    """The rows as an aligned text table (one line per row, a header first).

    Example:
        >>> print(table([Backend("add", "float64", 3, "cpu", "torch", "disabled by HYPERMC_NATIVE=0")]))
        op   dtype    nc  device  path   reason
        add  float64  3   cpu     torch  disabled by HYPERMC_NATIVE=0
    """
    cells = [list(Backend._fields)] + [[str(v) for v in r] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(Backend._fields) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(line, widths)), line[-1]]).rstrip() for line in cells)
