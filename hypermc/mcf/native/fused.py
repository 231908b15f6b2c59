"""Fused CPU kernels for whole MC expressions (the bodies of ``torch.compile``'s fused nodes).

What. While ``torch.compile`` traces, :mod:`hypermc.mcf.compile` gathers connected
elementwise MC ops (add, sub, mul, div, neg on MC, plain-tensor and scalar operands) into
one ``hypermc::mc_fused`` node. Its CPU body lands here: the expression, as a *program*
(operand streams and steps, see :func:`hypermc.mcf.native.source.fused_source`), becomes
one straight-line C++ loop, compiled by the system compiler on its first use (a few
seconds; cached on disk like :mod:`hypermc.mcf.native`'s libraries, keyed by the source),
checked against eager mode and called through :mod:`ctypes` on the operands' memory.

Exactness. Each step of the loop is the fast path of the kernel eager mode runs for it
(the statements the per-op kernels of :mod:`hypermc.mcf.native` are built from, except
that a division scales its operands in one step where eager's three-step scaling
multiplies by 1 twice), and an element's ``ok`` flag is the conjunction of every step's
check. So an element with ``ok`` has eager mode's bits, and the caller recomputes the
others with the eager ops. That is *checked* before a kernel is used: it runs on a fixed
batch of operands (random values, cancelling pairs, huge and tiny exponents, zeros) and
must give eager mode's bits wherever it reports ``ok``; otherwise it is not used (one
warning) and the caller runs the eager ops.

Scope. float32/float64 components, nc = 2, 3, 4, CPU tensors, where the per-op kernels
of :mod:`hypermc.mcf.native` are in use and the CPU has a fused multiply-add (the eager
kernels these loops transcribe). :func:`supports` says which steps have a transcription.
``HYPERMC_NATIVE=0`` disables these kernels with the others.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
from collections.abc import Callable, Sequence

import torch

from .. import arith, native, registry
from ..eft import _probe_fused_addcmul, renormalize
from .source import fused_source, has_sqrt

__all__ = ["supports", "usable", "run", "Step", "Leaf"]

#: A step of a program: ``(kind, refs)``, ``refs`` ``("l", leaf)`` / ``("s", step)`` pairs.
Step = tuple[str, tuple[tuple[str, int], ...]]
#: An operand stream: ``(terms, broadcast)``.
Leaf = tuple[int, bool]

#: Flags of the fused libraries beyond those of the per-op libraries: the widest vectors
#: (AVX-512 where there is one: the fused loops are bound by arithmetic, not memory).
_FLAGS = ("-mprefer-vector-width=512",)
# Elements per thread below which one call does it all.
_CHUNK = 1 << 15
# Operands of the check at load.
_CHECK_ELEMENTS = 1024


def supports(dtype: torch.dtype, nc: int, kind: str, terms: Sequence[int]) -> bool:
    """Whether a step ``kind`` on operands of ``terms`` terms (``nc``: MC, 1: plain) has a
    fused transcription for components of ``dtype``.

    Example:
        >>> supports(torch.float64, 3, "div", (3, 1)), supports(torch.float32, 2, "div", (1, 2))
        (True, True)
        >>> supports(torch.float64, 2, "sqrt", (2,)), supports(torch.float32, 2, "sqrt", (2,))  # float32: the float64 engine
        (True, False)
    """
    if dtype not in native._NAMES or nc not in native.NCS or len(terms) != (1 if kind in ("neg", "sqrt") else 2):
        return False
    if kind == "sqrt":  # float32 nc = 2: the float64 engine (no double-word kernel)
        return has_sqrt(native._NAMES[dtype], nc) and terms[0] == nc and arith._sqrt_range(dtype, nc) is not None
    return kind in ("add", "mul", "div", "neg") and nc in terms


def usable(dtype: torch.dtype, nc: int) -> bool:
    """Whether fused kernels can run for components of ``dtype`` and ``nc`` here: the
    per-op kernels of :mod:`hypermc.mcf.native` are in use (eager mode runs them, and
    ``HYPERMC_NATIVE=0`` turns both off) and the CPU has a fused multiply-add.

    Example:
        >>> usable(torch.float16, 2)
        False
        >>> usable(torch.float64, 3) == native.available(torch.float64, 3)  # with an FMA unit
        True
    """
    # the measured answer (has_fused_addcmul says False while torch.compile traces, and
    # this is asked then: the kernels themselves run outside tracing, as eager mode does)
    if dtype not in native._NAMES or nc not in native.NCS or not _probe_fused_addcmul("cpu", dtype):
        return False
    return native.available(dtype, nc)


def _symbol(key: tuple) -> str:
    return "mc_fused_" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]


def _kernel(
    dtype: torch.dtype,
    nc: int,
    leaves: tuple[Leaf, ...],
    steps: tuple[Step, ...],
    reference: Callable,
    operands: list[torch.Tensor],
    constants: Sequence[bool],
):
    """The loaded, checked kernel of a program, or None (:func:`registry.load`: once per
    process, key ``("fused", dtype name, nc, leaves, steps)``)."""
    key = ("fused", native._NAMES[dtype], nc, leaves, steps)
    warning = f"hypermc fused kernel for {native._NAMES[dtype]} nc={nc} {steps} disabled: {{}}; using the eager kernels"
    check = functools.partial(_self_check, dtype=dtype, nc=nc, leaves=leaves, reference=reference, operands=operands, constants=constants)
    return registry.load(key, functools.partial(_open, dtype, nc, key), check, warning.format)


def _open(dtype: torch.dtype, nc: int, key: tuple):
    """The program's kernel, compiled and loaded, or why not."""
    symbol, name = _symbol(key[1:]), native._NAMES[dtype]
    src = fused_source(name, nc, key[3], key[4], symbol, arith._sqrt_range(dtype, nc))
    lib = native._build_and_load(
        lambda cxx: native._compile(cxx, src, f"hypermc_fused_{name}_nc{nc}", _FLAGS), lambda lib: getattr(lib, symbol)
    )
    if isinstance(lib, str):
        return lib
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_int64
    fn._hypermc_lib = lib  # keep the library loaded with the function
    return fn


def _check_operand(dtype: torch.dtype, nc: int, terms: int, seed: int) -> torch.Tensor:
    """A normalised check operand: random, cancelling, huge and tiny values, zeros."""
    gen = torch.Generator().manual_seed(seed)
    n = _CHECK_ELEMENTS
    x, y = native._self_check_inputs(dtype, nc)
    x = x[torch.randperm(n, generator=gen)]
    if terms == 1:  # a plain float: the leading components, some tiny and huge ones scaled in
        return x[:, :1].clone()
    if seed % 2:  # operands that cancel against the other operands of the other parity
        x = torch.where((torch.arange(n) % 3 == 0).unsqueeze(-1), -y, x)
    return renormalize(x, nc)


def _self_check(
    fn,
    dtype: torch.dtype,
    nc: int,
    leaves: tuple[Leaf, ...],
    reference: Callable,
    operands: list[torch.Tensor],
    constants: Sequence[bool],
) -> str | None:
    """Why the kernel's results differ from ``reference`` (eager mode) where it reports
    ``ok``, else None. Broadcast operands and ``constants`` keep their values (the
    scalars of the expression, which ``reference`` reads from the expression itself);
    the others are the check batch."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch.no_grad():  # eager mode as the op's body runs it
        shape = (_CHECK_ELEMENTS,)
        check = [
            _check_operand(dtype, nc, terms, 7 + i)
            if not broadcast and not constant
            else _first(o).clone()
            if broadcast
            else _first(o).expand(*shape, terms).contiguous()  # a constant of a one-element expression
            for i, ((terms, broadcast), o, constant) in enumerate(zip(leaves, operands, constants))
        ]
        rows, layout = _rows(check, shape)
        if layout != leaves:
            return f"check operands laid out as {layout}, not {leaves}"
        res = _call(fn, rows, shape, nc, dtype)
        ref = reference(check, shape)
        ints = {torch.float32: torch.int32, torch.float64: torch.int64}[dtype]
        got, want = res.out[res.ok], ref[res.ok]
        if not torch.equal(got.view(ints), want.view(ints)):
            wrong = int((got.view(ints) != want.view(ints)).any(-1).sum())
            return f"{wrong} of {int(res.ok.sum())} checked elements differ from eager mode"
    return None


def _first(o: torch.Tensor) -> torch.Tensor:
    """The first element's terms of an operand ``(*s, terms)`` (a broadcast one, or a
    one-element expression's constant)."""
    return o.reshape(-1, o.shape[-1])[:1].reshape(o.shape[-1])


def _rows(operands: list[torch.Tensor], shape: tuple[int, ...]) -> tuple[list[tuple[torch.Tensor, int, int]], tuple[Leaf, ...]]:
    """The operands as ``(N, terms)`` rows of element stride 1 or 0 (copied where
    needed, :func:`native._rows`) and the program's leaves: broadcast where the stride
    is 0 (one element: any stride reads it, and the kernel reads element ``i``)."""
    rows = [native._rows(o, torch.Size(shape), False) for o in operands]
    n = math.prod(shape)
    return rows, tuple((int(v.shape[1]), n > 1 and se == 0) for v, se, _ in rows)


def _call(fn, rows: list[tuple[torch.Tensor, int, int]], shape: tuple[int, ...], nc: int, dtype: torch.dtype) -> native.Result:
    n = math.prod(shape)
    item = torch.empty((), dtype=dtype).element_size()
    pointers = [v.data_ptr() + k * sc * item for v, _, sc in rows for k in range(v.shape[1])]
    array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
    out = torch.empty((nc, n), dtype=dtype)
    ok = torch.empty(n, dtype=torch.bool)
    bad = _run(fn, n, array, out, ok) if n else 0
    return native.Result(out.view(nc, *shape).movedim(0, -1), ok.view(shape), bad)


def _run(fn, n: int, array, out: torch.Tensor, ok: torch.Tensor) -> int:
    """``fn`` on elements ``[0, n)``, in chunks over torch's intra-op threads (ctypes
    releases the GIL); the number of elements that failed a check."""
    threads = min(torch.get_num_threads(), max(1, n // _CHUNK))
    step = -(-n // threads)
    calls = [(start, min(n, start + step), array, out.data_ptr(), n, ok.data_ptr()) for start in range(0, n, step)]
    return native.run_parallel(fn, calls, threads)


def run(
    dtype: torch.dtype,
    nc: int,
    steps: tuple[Step, ...],
    operands: list[torch.Tensor],
    shape: tuple[int, ...],
    reference: Callable,
    constants: Sequence[bool] | None = None,
) -> native.Result | None:
    """Run the fused program ``steps`` on ``operands`` (CPU tensors of ``dtype``, each
    ``(*s, terms)`` and broadcastable to ``shape``): ``(out, ok, bad)`` as the per-op
    kernels return it, or None where no fused kernel applies (:func:`usable`, a step
    without transcription, a failed build or check). ``reference(operands, shape)`` is
    eager mode on such operands (components ``(*shape, nc)``), for the check at load;
    ``constants`` marks the operands that ``reference`` does not take from its argument
    (the expression's literal numbers), which the check keeps (default: none).

    Example:
        >>> x = torch.tensor([[1.5, 2.0**-60, 0.0]], dtype=torch.float64)
        >>> one = torch.ones(1, dtype=torch.float64)  # a broadcast scalar operand
        >>> steps = (("mul", (("l", 0), ("l", 0))), ("add", (("s", 0), ("l", 1))))  # x * x + 1
        >>> def eager(ops, shape):
        ...     x, b = ops[0].expand(*shape, 3), ops[1].expand(*shape, 1)[..., 0]
        ...     return hm.mcf.arith.add_float(hm.mcf.arith.mul(x, x), b)
        >>> r = run(torch.float64, 3, steps, [x, one], (1,), eager)  # None without a C++ compiler
        >>> r is None or torch.equal(r.out, eager([x, one], (1,)))
        True
    """
    if not usable(dtype, nc) or any(o.device.type != "cpu" or o.dtype != dtype for o in operands):
        return None
    rows, leaves = _rows(operands, shape)
    fn = _kernel(dtype, nc, leaves, steps, reference, operands, (False,) * len(operands) if constants is None else tuple(constants))
    if fn is None:
        return None
    return _call(fn, rows, shape, nc, dtype)
