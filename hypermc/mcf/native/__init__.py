"""Fused kernels for nc = 2, 3, 4 (float32, float64) on the CPU and CUDA, built on first use.

Why. The fixed networks of :mod:`hypermc.mcf.fixed` cost 80-700 elementwise torch
kernels per op (one memory pass each; fp64 nc=3 add was ~60x a native add, div ~400x) and
the double-word add 20. :mod:`hypermc.mcf.native.source` generates straight-line C++ for
the same networks (add/sub/add_float/mul/mul_float/div for nc = 2, 3, 4; sqrt for
nc = 3, 4 and float64 nc = 2), one library per (dtype, nc), compiled here by the system C++ compiler (10-15 s,
once per machine: cached) and called through :mod:`ctypes` on the tensors' memory. A
second library per nc (``part="elementary"``, built on first use of an elementary
function: 3-45 s, its straight-line code is large and split into stages) holds
:mod:`hypermc.mcf.elementary`'s float64 exp, log, expm1, log1p, the (inverse) hyperbolic
functions and sin/cos/tan (Tang's reduction, the Taylor series, Newton's iteration for
log, the fast ``pi/2`` reduction and the sin/cos tables; every arith step inlined), which
otherwise run as ~20-200 fused calls per block plus torch glue; the nc = 2 library also
has kernels for float32 nc = 3, 4 exp, expm1, sinh/cosh, tanh, sin/cos and tan, which
convert to and from float64 themselves (:func:`_narrow`), and the log family's
reduction of a double-word prepared in a narrower dtype (:func:`log_masked`,
:func:`acosh_t`, :func:`atanh_ad`). On CUDA tensors the same kernels run as CUDA code
(:mod:`hypermc.mcf.native.cuda`). ctypes releases the GIL, so large tensors are split
over torch's intra-op thread count. Numbers in ``docs/numerics.md``.

Exactness. The library is built with ``-ffp-contract=off`` (no compiler-made FMAs) and
without ``-ffast-math`` (no reassociation), so every TwoSum and TwoProd is the exact
transformation the bounds assume; products' errors use ``std::fma``, exact by the C
standard. Each arithmetic kernel is the torch network traced rounding for rounding
(:mod:`hypermc.mcf.native.trace`), so the results are the torch kernels' bits. That is *checked* when the library loads: every
kernel runs on a fixed batch of inputs (random, cancelling, huge and tiny exponents) and
must match the torch kernels bit for bit; otherwise the library is not used (one warning
names the kernel) and the torch kernels run. A compiler that contracts or reassociates
anyway is caught there. Where the result is NaN both paths give NaN, but its sign bit is
not part of the contract (the torch path's own depends on the batch: renormalize takes
another branch when a batch holds a non-finite value); the elementary kernels flag any
non-finite component, so such elements take the torch path.

Scope. CPU and CUDA tensors, float32/float64, nc = 2/3/4, outside ``torch.compile`` tracing (the
traced path is :mod:`hypermc.mcf.compile`'s opaque op, whose eager body lands here) and
without autograd on the component tensors (MC autograd runs above ``__torch_dispatch__``).
Elements that fail the fast-path check (zeros, inf/NaN, heavy cancellation, operands
near the ends of the exponent range, rare ties) are recomputed by the caller's general
torch kernel, exactly as the torch networks do.

Layers. The kernels are registered in :mod:`hypermc.mcf.registry` (arith and elementary
call them there, never importing this module), and each library goes through
:func:`registry.load`'s build / self-check / fall-back state machine.

Control. ``HYPERMC_NATIVE=0`` disables the library; ``HYPERMC_NATIVE_CACHE`` sets the
build directory (default ``~/.cache/hypermc/native``); ``HYPERMC_CXX`` the compiler
(default ``$CXX``, then ``c++``, ``g++``, ``clang++``). :func:`status` says whether the
library is in use and why not; ``python -m hypermc doctor`` which path every op takes.
Without a compiler hypermc still works (same results, torch speed).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import torch

from ..._checks import check_choice
from .. import arith, elementary, reduce, registry  # arith, elementary, reduce: the self-check's reference
from ..eft import broadcast_shapes, float_format, has_fused_addcmul, renormalize, take, tracing, unpack
from ..fixed import patch
from . import cuda as native_cuda
from .source import NARROW_INPUTS, _Tables, elementary_kernels, has_sqrt
from .source import source as generate

__all__ = ["available", "status", "library", "library_status", "Result", "NCS", "ELEMENTARY_NCS", "NO_COMPILER"]
__all__ += ["add", "mul", "rowsumsq", "tree_sum", "grouped_sums", "div", "sqrt", "exp", "log", "sin", "cos", "tan"]
__all__ += ["expm1", "sinh", "cosh", "tanh", "log1p", "asinh", "acosh", "atanh"]

#: Component counts with native kernels.
NCS = (2, 3, 4)
#: Component counts with the fused float64 elementary library on the CPU. Its loops are split into
#: stages (:func:`hypermc.mcf.native.source._staged_loop`): before that GCC -O3 took 66 s (idle CI
#: machine) to over 5 minutes per library at nc = 3 and did not finish nc = 4 in 20
#: minutes; staged, nc = 3 builds in ~8 s and nc = 4 in ~21 s on the 2-core VM.
ELEMENTARY_NCS = (2, 3, 4)
#: The same on CUDA (the same bodies compiled by NVRTC, not staged).
CUDA_ELEMENTARY_NCS = (2, 3, 4)


def _elementary_ncs(device_type: str) -> tuple[int, ...]:
    return CUDA_ELEMENTARY_NCS if device_type == "cuda" else ELEMENTARY_NCS


_FLAGS = ["-O3", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-fopenmp-simd"]
_FLAGS += ["-march=native"]
_NAMES = {torch.float32: "f32", torch.float64: "f64"}
# Elements per thread below which one call does it all.
_CHUNK = 1 << 15
#: The reason there are no C++ kernels where no compiler is found.
NO_COMPILER = "no C++ compiler found (set HYPERMC_CXX)"

#: The kernels of one configuration: the C++ library (CPU) or the CUDA backend.
Kernels = ctypes.CDLL | native_cuda.Backend

# The state of each library (registry.load): (dtype name, nc) for the arithmetic kernels,
# (dtype name, nc, "elementary") for exp/log/..., ("cuda", ...) on CUDA, ("library", stem)
_libs = registry._states
_bypass = threading.local()  # the self-check runs the torch kernels with this set
_pool: ThreadPoolExecutor | None = None


def _compiler() -> str | None:
    for name in (os.environ.get("HYPERMC_CXX"), os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_tag() -> str:
    """What ``-march=native`` depends on (a library built on one CPU model is not reused
    on another)."""
    flags = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features", "model name")):
                    flags += line
                    if len(flags) > 8192:
                        break
    except OSError:
        pass
    return flags


def _cache_dir() -> Path:
    root = os.environ.get("HYPERMC_NATIVE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "hypermc" / "native"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(suffix=path.suffix, dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _key(name: str, nc: int, part: str, device_type: str = "cpu") -> tuple:
    key = (name, nc) if part == "arith" else (name, nc, part)
    return key if device_type == "cpu" else (device_type, *key)


def _compile(cxx: str, source: str, stem: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` with :data:`_FLAGS` into the cache (``{stem}_{hash}.so``); its path.

    The hash covers the source, the flags, the compiler's version and the CPU (for
    ``-march=native``), so a changed kernel or machine never reuses a stale library.
    """
    src = source.encode()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    every = [*_FLAGS, *flags]
    key = hashlib.sha256(src + " ".join(every).encode() + version.encode() + _cpu_tag().encode() + sys.platform.encode()).hexdigest()[:16]
    out = _cache_dir() / f"{stem}_{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cpp = out.with_suffix(".cpp")
    _atomic_write(cpp, src)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        proc = subprocess.run([cxx, *every, str(cpp), "-o", tmp], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{cxx} failed: {proc.stderr.strip()[-2000:]}")
        os.replace(tmp, out)  # atomic: concurrent builders (pytest-xdist workers) agree
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _declare(lib: ctypes.CDLL, name: str, nc: int, part: str = "arith") -> None:
    i64, vp, c_int, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    pair = [i64, vp, i64, i64, vp, i64, i64]
    signatures = {
        "add": pair + [c_int, dbl, vp, i64, vp],
        "mul": pair + [c_int, vp, i64, vp],
        "div": pair + [vp, i64, vp],
        "sqrt": [i64, vp, i64, i64, dbl, dbl, vp, i64, vp],
        "sum": [i64, i64, vp, i64, i64, i64, vp, vp, i64],
        "runsum": [i64, vp, i64, i64, vp, i64, i64, i64, vp, vp, i64, i64, i64, vp, vp, i64],
    }
    if nc >= 3:  # the second passes of add and mul; the row sums of squares at nc components
        signatures["add_general"], signatures["mul_general"] = signatures["add"], signatures["mul"]
        signatures["rowsumsq"] = [i64, i64, vp, i64, i64, i64, c_int, vp, vp, i64, vp, vp]
    if part == "elementary":  # elementary's float64 path
        unary, binary = [i64, vp, i64, i64, vp, i64, vp], pair + [vp, i64, vp]
        signatures = {k.op: binary if len(k.inputs) == 2 else unary for k in elementary_kernels(nc, _Tables())}
    for op, args in signatures.items():
        if op == "sqrt" and not has_sqrt(name, nc):
            continue  # float32 nc = 2: the square root in float64 (arith.engine_dtype)
        fn = getattr(lib, f"mc_{op}_{name}_{nc}")
        fn.argtypes = args
        fn.restype = i64  # elements that failed the check


def _load(dtype: torch.dtype, nc: int, part: str = "arith", device_type: str = "cpu") -> Kernels | None:
    """The kernels of ``(dtype, nc, part)`` on ``device_type`` ("cpu": the C++ library,
    "cuda": :class:`native_cuda.Backend`): built, loaded and self-checked once per process
    (:func:`registry.load`)."""
    name = _NAMES[dtype]
    key = _key(name, nc, part, device_type)
    lib = registry.current(key)
    if lib is not None:
        return None if isinstance(lib, str) else lib
    opener: Callable[[], Kernels | str]
    if device_type == "cuda":
        opener = lambda: native_cuda.available() or native_cuda.Backend(name, nc, part)  # noqa: E731 (compiled by the check)
        warning = f"hypermc native cuda kernels for {name} nc={nc} ({part}) disabled: {{}}; using the torch kernels"
    else:
        stem = f"hypermc_{name}_nc{nc}{'' if part == 'arith' else '_' + part}"
        declare = functools.partial(_declare, name=name, nc=nc, part=part)
        opener = functools.partial(_build_and_load, lambda cxx: _compile(cxx, generate(name, nc, part), stem), declare)
        label = "" if part == "arith" else part + " "
        warning = f"hypermc native {label}kernels for {name} nc={nc} disabled: {{}} differs from the torch kernels {registry.HINT}"
        warning += "; using the torch kernels"
    return registry.load(key, opener, functools.partial(_checked, dtype=dtype, nc=nc, part=part, device_type=device_type), warning.format)


def _checked(lib: Kernels, dtype: torch.dtype, nc: int, part: str, device_type: str) -> str | None:
    """:func:`_self_check`; on CUDA a kernel NVRTC rejects (at its first launch) fails it too."""
    try:
        return _self_check(lib, dtype, nc, part, device_type)
    except RuntimeError as exc:
        if device_type == "cpu":
            raise
        return f"compile failed: {str(exc)[-500:]}"


def _build_and_load(build: Callable[[str], Path], declare: Callable[[ctypes.CDLL], None]) -> ctypes.CDLL | str:
    """``build(compiler)`` then load and ``declare`` the shared library; or why not."""
    cxx = _compiler()
    if cxx is None:
        return NO_COMPILER
    try:
        lib = ctypes.CDLL(str(build(cxx)))
        declare(lib)
    except (OSError, RuntimeError, subprocess.SubprocessError, AttributeError) as exc:
        return f"build or load failed: {exc}"
    return lib


def _self_check_inputs(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised operands: random, cancelling pairs, huge and tiny exponents, zeros."""
    gen = torch.Generator().manual_seed(20261125)
    n = 1024
    p = float_format(dtype).p
    emax = math.frexp(torch.finfo(dtype).max)[1]

    def expansion(lead_exp: torch.Tensor) -> torch.Tensor:
        terms = [
            (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
            * torch.pow(2.0, (lead_exp - k * p).to(torch.float64)).to(dtype)
            for k in range(nc + 1)
        ]
        return renormalize(terms, nc)

    moderate = torch.randint(-20, 20, (n,), generator=gen)
    wide = torch.randint(-emax + nc * p + 8, emax - 4, (n,), generator=gen)
    x = expansion(torch.where(torch.arange(n) % 4 == 0, wide, moderate))
    y = expansion(torch.where(torch.arange(n) % 5 == 0, wide, moderate))
    y[1::7] = -x[1::7] + expansion(moderate - p)[1::7]  # cancellation (an MC add here)
    y[3::11] = 0
    return x, y


def _on_fixed(f: Callable[[torch.Tensor], torch.Tensor], fixed: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``f(fixed)``: a self-check op on inputs of its own (``x`` and ``y`` unused)."""
    return f(fixed)


def _self_check(lib: Kernels, dtype: torch.dtype, nc: int, part: str = "arith", device_type: str = "cpu") -> str | None:
    """Name of the first fused kernel whose bits differ from the torch kernels, else None."""
    from torch.utils._python_dispatch import _disable_current_modes

    ops: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
        "add": lambda x, y: arith.add(x, y),
        "sub": lambda x, y: arith.sub(x, y),
        "add_float": lambda x, y: arith.add_float(x, y[..., 0]),
        "mul": lambda x, y: arith.mul(x, y),
        "mul_float": lambda x, y: arith.mul_float(x, y[..., 0]),
        "div": lambda x, y: arith.div(x, y),
        "broadcast div": lambda x, y: arith.div(y[:1], x),
        # the torch kernels take one path for the whole tensor: in-range operands only
        "sqrt": lambda x, y: arith.sqrt(x[(x[:, 0] > 2.0**-30) & (x[:, 0] < 2.0**30)]),
    }
    if part == "elementary":
        # exp: moderate arguments (and some that over- or underflow); log: |x|, and 1 + x
        ops = {
            "exp": lambda x, y: elementary.exp(x * 2.0**-14),
            "log": lambda x, y: elementary.log(torch.where(x[:, :1] < 0, -x, x)),
            "log near 1": lambda x, y: elementary.log(arith.add_float(x * 2.0**-30, torch.ones_like(x[:, 0]))),
            # MC numbers made from plain floats (zero tails; the general core), and half of
            # them among full expansions (the plain core, its flags through the general one)
            "log of plain floats": lambda x, y: elementary.log(arith.from_float(x[:, 0].abs() + 0.25, nc)),
            "log, half plain floats": lambda x, y: elementary.log(
                torch.where(
                    (torch.arange(x.shape[0], device=x.device) % 2 == 0).unsqueeze(-1),
                    arith.from_float(x[:, 0].abs() + 0.25, nc),
                    x.abs(),
                )
            ),
            "expm1": lambda x, y: elementary.expm1(x * 2.0**-14),
            "sinh": lambda x, y: elementary.sinh(x * 2.0**-14),
            "cosh": lambda x, y: elementary.cosh(x * 2.0**-14),
            "tanh": lambda x, y: elementary.tanh(x * 2.0**-16),
            "log1p": lambda x, y: elementary.log1p(x * 2.0**-14),
            "asinh": lambda x, y: elementary.asinh(x),
            "acosh": lambda x, y: elementary.acosh(torch.where(x[:, :1] < 0, -x, x) * 2.0**4),
            "atanh": lambda x, y: elementary.atanh(x * 2.0**-21),
            # moderate arguments (|x| < 2^10) and a few huge ones, which take the exact reduction
            "sin": lambda x, y: elementary.sin(x * 2.0**-10),
            "cos": lambda x, y: elementary.cos(x * 2.0**-10),
            "tan": lambda x, y: elementary.tan(x * 2.0**-10),
        }
        if nc == 2:  # float32 nc = 3, 4: their kernels in this library (source._narrow_body)
            for n32 in NARROW_INPUTS:
                x32 = _self_check_inputs(torch.float32, n32)[0].to(device_type)
                for op, scale in (
                    ("exp", -4),
                    ("expm1", -4),
                    ("sinh", -4),
                    ("cosh", -4),
                    ("tanh", -6),
                    ("sin", -10),
                    ("cos", -10),
                    ("tan", -10),
                ):
                    ops[f"float32 nc={n32} {op}"] = functools.partial(_on_fixed, getattr(elementary, op), x32 * 2.0**scale)
                # log and log1p: s prepared in float32, then the log_masked kernels (both branches:
                # log's s = x - 1 near 1 and s = x elsewhere; log1p's s = 1 + x at and below -1/2)
                ops[f"float32 nc={n32} log"] = functools.partial(_on_fixed, elementary.log, x32.abs() * 2.0**-2)
                ops[f"float32 nc={n32} log1p"] = functools.partial(_on_fixed, elementary.log1p, x32 * 2.0**-6)
                ops[f"float32 nc={n32} acosh"] = functools.partial(_on_fixed, elementary.acosh, x32.abs() * 2.0**-2)
                ops[f"float32 nc={n32} atanh"] = functools.partial(_on_fixed, elementary.atanh, x32 * 2.0**-21)
    if part == "arith" and nc in (3, 4) and device_type == "cpu":
        # the row kernel of this library: rows of nc - 1 components (rows of 8 and of 5;
        # squares that overflow and rejected rows among them), summed here at nc, and
        # reduce.norm's scaled form of them
        xr = _self_check_inputs(dtype, nc - 1)[0]
        for n in (8, 5):
            rows = xr[: xr.shape[0] // n * n].view(-1, n, nc - 1)
            ops[f"row sums of squares, n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.sumsq_wide, dim=-1), rows)
            ops[f"row sums of squares rounded, n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.sumsq, dim=-1), rows)
            ops[f"row 1 - |x|^2, n={n}"] = functools.partial(_on_fixed, reduce.one_minus_sumsq, rows * 2.0**-4)
            ops[f"row 1 - 3|x|^2, n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.one_minus_sumsq, c=3.0), rows)
            ops[f"row norms (scaled), n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.norm, dim=-1), rows)
    if part == "arith":
        # the sum tree: one sum over many terms, a sum per row (an odd and an even count), per
        # column (a strided axis), over several dims; infinities and NaN among the terms
        xs = _self_check_inputs(dtype, nc)[0]
        xs[7] = math.inf
        xs[9] = math.nan
        xs = xs.to(device_type)
        ops["sum of all"] = functools.partial(_on_fixed, reduce.sum, xs[:1000])
        ops["sum of all, inf and NaN"] = functools.partial(_on_fixed, reduce.sum, xs)
        for n in (7, 8):
            rows = xs[: xs.shape[0] // n * n].view(-1, n, nc)
            ops[f"row sums, n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.sum, dim=-1), rows)
            ops[f"column sums, n={n}"] = functools.partial(_on_fixed, functools.partial(reduce.sum, dim=0), rows)
        ops["sums over two dims"] = functools.partial(_on_fixed, functools.partial(reduce.sum, dim=(0, 2)), xs[:960].view(8, 12, 10, nc))
        # the grouped sums (scatter / index_add): runs of 1 to about 130 entries, of values
        # and of rows of 5 values, infinities and NaN among them
        slot = torch.randint(0, 40, (xs.shape[0],), generator=torch.Generator().manual_seed(3))
        slot[::7] = 5
        slot = slot.to(device_type)
        ops["grouped sums"] = functools.partial(_on_fixed, lambda v: reduce.scatter(v[:40] * 0, slot, v, "sum"), xs)
        ops["grouped sums, no base"] = functools.partial(
            _on_fixed, lambda v: reduce.scatter(v[:40], slot, v, "sum", include_self=False), xs
        )
        grouped = xs[: xs.shape[0] // 5 * 5].view(-1, 5, nc)
        ops["grouped sums of rows"] = functools.partial(
            _on_fixed, lambda v: reduce.scatter(v[:40] * 0, slot[: v.shape[0]], v, "sum"), grouped
        )
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}
    # the ops below reach the kernels through _load
    with registry.trial(_key(_NAMES[dtype], nc, part, device_type), lib):
        with _disable_current_modes(), torch._C._DisableTorchDispatch(), torch.no_grad():
            x, y = (t.to(device_type) for t in _self_check_inputs(dtype, nc))
            for op, f in ops.items():
                if part == "arith" and op == "sqrt" and not has_sqrt(_NAMES[dtype], nc):
                    continue
                fast = f(x, y)
                _bypass.on = True
                try:
                    ref = f(x, y)
                finally:
                    _bypass.on = False
                if not torch.equal(fast.view(ints[fast.dtype]), ref.view(ints[ref.dtype])):
                    return op
    return None


def _device_type(where: str, device: str | torch.device) -> str:
    device_type = torch.device(device).type
    check_choice(where, "device type", device_type, ("cpu", "cuda"))
    return device_type


def available(dtype: torch.dtype = torch.float64, nc: int = 3, part: str = "arith", device: str | torch.device = "cpu") -> bool:
    """Whether the native kernels of ``(dtype, nc)`` are in use in this process on
    ``device`` (builds them on the first call: on the CPU about half a minute, for
    ``part="elementary"``, the float64 exp, log and sin/cos kernels, 3-45 s; on CUDA
    NVRTC compiles each kernel at its first launch).

    Example:
        >>> isinstance(available(torch.float64, 2), bool)  # True with a working C++ compiler
        True
        >>> available(torch.float16, 2), available(torch.float32, 3, "elementary")  # never native
        (False, False)
        >>> available(torch.float64, 3, device="cuda") == (status(torch.float64, 3, device="cuda") == "in use")
        True
    """
    device_type = _device_type("available", device)
    if part == "elementary" and (dtype != torch.float64 or nc not in _elementary_ncs(device_type)):
        return False
    return dtype in _NAMES and nc in NCS and _load(dtype, nc, part, device_type) is not None


#: what :func:`status` says of float32's elementary functions
_NARROW_NOTE = (
    "float32 nc = 3, 4 exp, expm1, sinh, cosh, tanh, sin, cos, tan, log, log1p, acosh and atanh run in the float64 nc = 2 library"
)


def status(dtype: torch.dtype = torch.float64, nc: int = 3, part: str = "arith", device: str | torch.device = "cpu") -> str:
    """``"in use"`` or the reason the native kernels of ``(dtype, nc)`` (``part``:
    ``"arith"`` or ``"elementary"``) are not used on ``device`` (``"cpu"``: the C++
    library; ``"cuda"``: :mod:`hypermc.mcf.native.cuda`).

    Example:
        >>> status(torch.float32, 7)
        'no native kernels for torch.float32 nc=7 (float32/float64, nc in (2, 3, 4))'
        >>> status(torch.float32, 3, "elementary")[:62]
        'no native elementary kernels for torch.float32 (float64 only; '
        >>> (status(torch.float64, 2) == "in use") == available(torch.float64, 2)  # else the reason
        True
        >>> torch.cuda.is_available() or status(torch.float64, 3, device="cuda") == "CUDA is not available"
        True
    """
    check_choice("status", "part", part, ("arith", "elementary"))
    device_type = _device_type("status", device)
    if dtype not in _NAMES or nc not in NCS:
        return f"no native kernels for {dtype} nc={nc} (float32/float64, nc in {NCS})"
    if part == "elementary" and dtype != torch.float64:
        return f"no native elementary kernels for {dtype} (float64 only; {_NARROW_NOTE})"
    if part == "elementary" and nc not in _elementary_ncs(device_type):
        return f"no native elementary kernels for nc={nc} on {device_type} (nc in {_elementary_ncs(device_type)})"
    if available(dtype, nc, part, device_type):
        return "in use"
    return registry.state(_key(_NAMES[dtype], nc, part, device_type))


def _eligible(*ts: torch.Tensor, part: str = "arith", nc: int | None = None) -> Kernels | None:
    """The kernels for operands ``ts`` (``nc``: of that library, default the first
    operand's component count), or None where they do not apply."""
    t = ts[0]
    nc = t.shape[-1] if nc is None else nc
    dtype, device = t.dtype, t.device
    if getattr(_bypass, "on", False) or dtype not in _NAMES or nc not in NCS or device.type not in ("cpu", "cuda"):
        return None
    for s in ts:
        if type(s) is not torch.Tensor or s.requires_grad or s.dtype != dtype or (s is not t and s.device != device):
            return None
    return None if tracing() else _load(dtype, nc, part, device.type)


def _rows(t: torch.Tensor, shape: torch.Size, first: bool) -> tuple[torch.Tensor, int, int]:
    """``t`` broadcast to ``(*shape, m)`` as an ``(N, m)`` view with element stride 1
    (planar, as the kernels' outputs are) or, not for the ``first`` operand, 0
    (broadcast); copied to planar otherwise (user-made interleaved tensors). Returns the
    view and its element and component strides."""
    m = t.shape[-1]
    e = t.expand(*shape, m)
    v = None
    # a view exists where nothing is broadcast or everything is (one element); a broadcast
    # row or column (an (N, 1) operand of an (N, n) result) never has one: copied below
    # without raising and catching the view's error first
    if math.prod(t.shape[:-1]) in (1, math.prod(shape)):
        try:
            v = e.view(-1, m)
        except RuntimeError:  # an interleaved or transposed user-made tensor
            v = None
    if v is None or (v.stride(0) not in ((1,) if first else (0, 1)) and v.shape[0] > 1):
        # the kernels take element-contiguous (planar) or broadcast operands
        v = e.movedim(-1, 0).reshape(m, -1).contiguous().t()
    se = v.stride(0) if v.shape[0] > 1 else 1  # one element: any stride reads it (and every kernel takes 1)
    return v, se, v.stride(1)


def _run(fn, n: int, operands: list[tuple[torch.Tensor, int, int]], extra: tuple, out: torch.Tensor, ok: torch.Tensor) -> int:
    """Call ``fn(count, *operand pointers/strides, *extra, out, n, ok)`` on chunks of the
    ``n`` elements, one per torch intra-op thread (ctypes releases the GIL); the number
    of elements that failed the check."""
    item = out.element_size()
    if n < 2 * _CHUNK:  # one call, inline (the common small case: no chunking to set up)
        args = [a for v, se, sc in operands for a in (v.data_ptr(), se, sc)]
        return fn(n, *args, *extra, out.data_ptr(), n, ok.data_ptr())
    threads = min(torch.get_num_threads(), max(1, n // _CHUNK))
    step = -(-n // threads)
    calls = []
    for start in range(0, n, step):
        args = [a for v, se, sc in operands for a in (v.data_ptr() + start * se * item, se, sc)]
        calls.append((min(step, n - start), *args, *extra, out.data_ptr() + start * item, n, ok.data_ptr() + start))
    return run_parallel(fn, calls, threads)


def run_parallel(fn: Callable[..., int], calls: list[tuple], threads: int) -> int:
    """The sum of ``fn(*call)`` over ``calls``, on up to ``threads`` pool threads (ctypes
    releases the GIL); one call runs inline."""
    if len(calls) == 1:
        return fn(*calls[0])
    global _pool
    if _pool is None or _pool._max_workers < threads:  # noqa: SLF001 - sized to torch's threads
        _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hypermc-native")
    return sum(job.result() for job in [_pool.submit(fn, *c) for c in calls])


def library(
    stem: str,
    source: str,
    declare: Callable[[ctypes.CDLL], None],
    self_check: Callable[[ctypes.CDLL], str | None],
    *,
    flags: tuple[str, ...] = (),
) -> ctypes.CDLL | None:
    """A C++ library of another module's kernels: built from ``source`` on first use
    (cached like this module's own, same flags), ``declare`` d and ``self_check`` ed once
    per process; None where it is not usable (then the caller runs its torch path).

    ``self_check(lib)`` returns None, or the name of a kernel that disagrees with the
    torch path (one ``RuntimeWarning`` names it, and the library is not used).
    ``HYPERMC_NATIVE=0`` disables it too. :func:`library_status` says why it is not used.
    ``flags`` are added to the compiler's (``("-fopenmp",)``: the kernels' ``omp``
    pragmas then run on the OpenMP runtime torch has loaded, i.e. on torch's own
    intra-op threads, instead of competing with them).

    Example:
        >>> src = 'extern "C" double twice(double x) { return 2 * x; }'
        >>> def declare(lib):
        ...     lib.twice.argtypes, lib.twice.restype = [ctypes.c_double], ctypes.c_double
        >>> lib = library("hypermc_doctest_twice", src, declare, lambda lib: None if lib.twice(1.5) == 3.0 else "twice")
        >>> lib is None or lib.twice(4.0) == 8.0  # None without a C++ compiler
        True
    """
    warning = f"hypermc native library {stem} disabled: {{}} disagrees with the torch path {registry.HINT}; using the torch path"
    opener = functools.partial(_build_and_load, lambda cxx: _compile(cxx, source, stem, flags), declare)
    return registry.load(("library", stem), opener, self_check, warning.format)


def library_status(stem: str) -> str:
    """``"in use"``, ``"not built yet"`` (not asked for yet in this process) or the reason the
    :func:`library` ``stem`` is not used.

    Example:
        >>> library_status("hypermc_doctest_never_built")
        'not built yet'
    """
    return registry.state(("library", stem))


def _call(
    lib: Kernels, op: str, operands: list[torch.Tensor], extra: tuple, nc: int, nout: int | None = None, library: torch.dtype | None = None
) -> Result:
    """``mc_{op}_{dtype}_{nc}`` on the operands; ``nout`` (default ``nc``) outputs of the
    operands' dtype. ``dtype`` is the operands' unless ``library`` names another (the
    float32 kernels of the float64 library)."""
    if isinstance(lib, native_cuda.Backend):
        return Result(*lib.call(op, operands, extra, nc, nout))
    nout = nc if nout is None else nout
    shape = operands[0].shape[:-1]
    if any(o.shape[:-1] != shape for o in operands[1:]):
        shape = broadcast_shapes(*(o.shape[:-1] for o in operands))
    n = math.prod(shape)
    planar = _planar_strides(tuple(shape))
    # operands already planar (the kernels' own outputs: the common case) are read in
    # place; the others are broadcast or copied by _rows
    rows = [(o, 1, n) if _is_planar(o, shape, planar, n) else _rows(o, shape, i == 0) for i, o in enumerate(operands)]
    dtype = operands[0].dtype
    out = torch.empty_strided((*shape, nout), (*planar, n), dtype=dtype)  # planar: component k at k * n
    ok = torch.empty(shape, dtype=torch.bool)
    bad = _run(getattr(lib, f"mc_{op}_{_NAMES[library or dtype]}_{nc}"), n, rows, extra, out, ok) if n else 0
    return Result(out, ok, bad)


@functools.lru_cache(maxsize=1024)
def _planar_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a planar ``(*shape, m)`` buffer: row-major over ``shape``
    (its component stride is the number of elements)."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _is_planar(t: torch.Tensor, shape: torch.Size, planar: tuple[int, ...], n: int) -> bool:
    """Whether ``t`` is ``(*shape, m)`` laid out as a planar buffer (the strides of
    :func:`_planar_strides` on the dims longer than 1, component stride ``n``): the
    kernels then read it in place, element stride 1 and component stride ``n``."""
    st = t.stride()
    if t.shape[:-1] != shape or (t.shape[-1] > 1 and st[-1] != n):
        return False
    return st[:-1] == planar or all(d == 1 or st[i] == planar[i] for i, d in enumerate(shape))


class Result(NamedTuple):
    """A fused kernel's output: ``out`` (``(*shape, nc)``, a view of a planar buffer),
    the fast-path mask ``ok`` and the number ``bad`` of elements where it is false.

    Example:
        The cancelling second sum fails the fixed network's check, and :func:`add`'s second
        pass (the general algorithm, fused) recomputes it. Next to a sum with an infinite
        operand, which the second pass rejects too, both stay rejected (all or nothing),
        and :meth:`patched` recomputes them with the caller's general kernel (here a plain
        renormalisation):

        >>> x = torch.tensor([[1.0, 2.0**-60, 2.0**-120], [1.0, 2.0**-60, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> y = torch.tensor([[0.5, 2.0**-61, 2.0**-121], [-1.0, 0.0, 0.0], [math.inf, 0.0, 0.0]], dtype=torch.float64)
        >>> def general(a, b):
        ...     return renormalize(torch.cat([a, b], -1), 3)
        >>> r = add(x[:2], y[:2], subtract=False)  # None without a C++ compiler
        >>> r is None or (r.ok.tolist(), r.bad) == ([True, True], 0)
        True
        >>> r = add(x, y, subtract=False)
        >>> r is None or (r.ok.tolist(), r.bad) == ([True, False, False], 2)  # all or nothing: see _second_pass
        True
        >>> out = general(x, y) if r is None else r.patched(general, x, y)
        >>> out.tolist() == [[1.5, 1.5 * 2**-60, 1.5 * 2**-120], [2.0**-60, 0.0, 0.0], [math.inf, 0.0, 0.0]]
        True
    """

    out: torch.Tensor
    ok: torch.Tensor
    bad: int

    def patched(self, general: Callable[..., torch.Tensor], *operands: torch.Tensor) -> torch.Tensor:
        """``out`` with the failed elements recomputed by ``general(*operands)`` (rows)."""
        if not self.bad:
            return self.out
        return patch(self.out, self.ok, general, *operands)


def _second_pass(lib: Kernels, op: str, res: Result, operands: list[torch.Tensor], extra: tuple) -> Result:
    """``res`` with the elements it rejects recomputed by the kernel ``op`` (arith's general
    algorithm for them, traced like the fixed one), on their rows only. Without this the
    rejected elements take the torch kernel: on a GPU hundreds of launches, for a handful
    of elements in millions.

    All or nothing: where ``op`` rejects any of them (a non-finite operand or result),
    ``res`` comes back as it was and the caller's torch kernel recomputes them all. That
    kernel takes one branch for the batch it gets (its finite branch only when every
    element is finite, and the other branch gives zero tails another sign), so the kernel
    may only stand in for it on a batch that is finite throughout."""
    if not res.bad:
        return res
    bad = ~res.ok
    rows = [o.expand(*bad.shape, o.shape[-1])[bad] for o in operands]
    again = _call(lib, op, rows, extra, res.out.shape[-1])
    if again.bad:
        return res
    res.out[bad] = again.out  # into the kernel's output buffer (a view)
    return Result(res.out, torch.ones_like(res.ok), 0)


def add(x: torch.Tensor, y: torch.Tensor, subtract: bool) -> Result | None:
    """``x ± y`` (``y`` with ``nc`` components, or one: ``x + b``) by the fixed network:
    ``(out, ok)`` like ``fixed.renorm_levels`` + ``fixed.normalised``, or None where the
    native kernels do not apply.

    Example:
        >>> x = torch.tensor([1.0, 2.0**-60], dtype=torch.float64).repeat(2, 3, 1)  # (2, 3) numbers, nc = 2
        >>> r = add(x, x, subtract=False)  # None without a C++ compiler
        >>> r is None or (r.out.shape == (2, 3, 2) and r.bad == 0)
        True
        >>> r is None or r.out[0, 0].tolist() == [2.0, 2.0**-59]
        True
    """
    lib = _eligible(x, y)
    if lib is None:
        return None
    nc, extra = x.shape[-1], (y.shape[-1], -1.0 if subtract else 1.0)
    res = _call(lib, "add", [x, y], extra, nc)
    # x + b (add_float) recomputes its rejected elements with a sort of its own: torch only
    return _second_pass(lib, "add_general", res, [x, y], extra) if nc >= 3 and y.shape[-1] == nc else res


def mul(x: torch.Tensor, y: torch.Tensor) -> Result | None:
    """``x * y`` (``y`` with ``nc`` components or one) by ``_product_levels``: ``(out, ok)``.

    Example:
        >>> x = torch.tensor([[1.0, 2.0**-60]], dtype=torch.float64)  # 1 + 2^-60
        >>> r = mul(x, x)  # None without a C++ compiler
        >>> r is None or r.out.tolist() == [[1.0, 2.0**-59]]  # 1 + 2^-59 (+ 2^-120, below u^2)
        True
        >>> r = mul(x, torch.tensor([[3.0]], dtype=torch.float64))  # times one float
        >>> r is None or r.out.tolist() == [[3.0, 3 * 2.0**-60]]
        True
    """
    lib = _eligible(x, y)
    if lib is None:
        return None
    res = _call(lib, "mul", [x, y], (y.shape[-1],), x.shape[-1])
    return _second_pass(lib, "mul_general", res, [x, y], (y.shape[-1],)) if x.shape[-1] >= 3 else res


class TreeSum(NamedTuple):
    """:func:`tree_sum`'s result: the tree's ``root`` slots and, where every sum's finish
    was good, the ``finished`` sums ``(*kept, nc)`` (else None)."""

    root: list[torch.Tensor]
    finished: torch.Tensor | None


def _tree_outputs(nc: int, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The buffers a sum-tree kernel writes: the roots' ``nc + 1`` slots and their
    finished ``nc`` components, planar (``(nc + 1, *shape)`` and ``(nc, *shape)``)."""
    return torch.empty((nc + 1, *shape), dtype=dtype), torch.empty((nc, *shape), dtype=dtype)


def _split(items: int, work: int) -> tuple[int, int]:
    """Threads for ``items`` independent pieces of ``work`` elements in all (one per
    ``_CHUNK`` of work, at most torch's thread count) and the pieces per thread."""
    threads = min(torch.get_num_threads(), max(1, work // _CHUNK))
    return threads, -(-items // threads)


def tree_sum(t: torch.Tensor, axis: int, n: int) -> TreeSum | None:
    """:func:`hypermc.mcf.reduce.sum`'s tree over ``axis`` (length ``n >= 1``) of ``t``
    (``(n, *kept, nc)`` with ``axis = 0`` or ``(*kept, n, nc)``, as ``reduce._to_layout``
    gives it) by one kernel call (``mc_sum``) instead of about twenty torch kernels per
    tree level: the root's ``nc + 1`` slots (tensors of shape ``kept``, what
    ``reduce._tree`` hands to ``reduce._finish``) and, where ``renormalize``'s finite path
    holds for every sum, their finish. The same operations in the same order, so the same
    bits (checked when the library loads). CUDA: one launch per tree level
    (:func:`_tree_sum_levels`). None where no kernel applies.

    Example:
        >>> t = torch.tensor([[1e20, 0.0], [1.0, 2.0**-60], [-1e20, 0.0]], dtype=torch.float64)
        >>> r = tree_sum(t, 0, 3)  # None without a C++ compiler
        >>> r is None or ([float(s) for s in r.root], r.finished.tolist()) == ([0.0, 1.0, 2.0**-60], [1.0, 2.0**-60])
        True
    """
    nc = t.shape[-1]
    lib = _eligible(t)
    if lib is None or n < 1:
        return None
    if isinstance(lib, native_cuda.Backend):
        return _tree_sum_levels(lib, t, axis, n)
    kept = t.shape[1:-1] if axis == 0 else t.shape[:-2]
    cols = math.prod(kept)
    v = t.reshape(n, cols, nc) if axis == 0 else t.reshape(cols, n, nc)
    xsi, xsc = (v.stride(0), v.stride(1)) if axis == 0 else (v.stride(1), v.stride(0))
    out, fin = _tree_outputs(nc, (cols,), t.dtype)
    bad = 0
    if cols:
        fn = getattr(lib, f"mc_sum_{_NAMES[t.dtype]}_{nc}")
        threads, step = _split(cols, cols * n)
        item = v.element_size()
        calls = [
            (min(step, cols - c0), n, v.data_ptr() + c0 * xsc * item, xsc, xsi, v.stride(2))
            + (out.data_ptr() + c0 * item, fin.data_ptr() + c0 * item, cols)
            for c0 in range(0, cols, step)
        ]
        bad = run_parallel(fn, calls, threads)
    return TreeSum([s.reshape(kept) for s in out], None if bad else fin.t().reshape(*kept, nc))


class GroupedSums(NamedTuple):
    """:func:`grouped_sums`'s result: the targeted ``slots`` (sorted), the number of
    values summed into each (``counts``, the base value included), the roots' ``nc + 1``
    slots and, where every sum's finish was good, the ``finished`` sums (else None)."""

    slots: torch.Tensor
    counts: torch.Tensor
    root: list[torch.Tensor]
    finished: torch.Tensor | None


def grouped_sums(vals: torch.Tensor, target: torch.Tensor, base: torch.Tensor | None) -> GroupedSums | None:
    """The sums of :func:`hypermc.mcf.reduce.scatter` (scatter_reduce's sum and mean,
    index_add, the segment sums) by one kernel call (``mc_runsum``) instead of about
    twenty torch kernels and three index gathers per level of ``reduce._run_sums``' tree:
    ``vals`` ``(m, *row, nc)``, ``target`` ``(m,)`` the slot of each row, ``base``
    ``(slots, *row, nc)`` whose targeted rows are summed first (``include_self``, read in
    place) or None. The rows are summed in the order of a stable sort by slot, as the
    torch path sums them: the same operations in the same order, so the same bits
    (checked when the library loads). None where no kernel applies (CUDA: the
    torch path) or a target lies outside ``base``.

    Example:
        >>> vals = torch.tensor([[1e20, 0.0], [1.0, 0.0], [5.0, 0.0], [-1e20, 0.0]], dtype=torch.float64)
        >>> r = grouped_sums(vals, torch.tensor([0, 0, 1, 0]), None)  # None without a C++ compiler
        >>> r is None or (r.slots.tolist(), r.counts.tolist(), r.finished.tolist()) == ([0, 1], [3, 1], [[1.0, 0.0], [5.0, 0.0]])
        True
    """
    nc, m = vals.shape[-1], vals.shape[0]
    lib = _eligible(vals) if base is None else _eligible(vals, base)
    if lib is None or isinstance(lib, native_cuda.Backend) or m == 0 or target.dtype != torch.int64 or target.shape != (m,):
        return None
    row = vals.shape[1:-1]
    width = math.prod(row)
    order = torch.argsort(target, stable=True)
    slots, counts = torch.unique_consecutive(target[order], return_counts=True)
    runs, self = len(slots), int(base is not None)
    if self and (int(slots[0]) < 0 or int(slots[-1]) >= base.shape[0]):  # type: ignore[union-attr]
        return None  # the torch path reports it
    starts = torch.zeros(runs + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=starts[1:])
    levels = (int(counts.max()) + self - 1).bit_length()  # _run_sums' loop: until every rank is 0
    # the rows in slot order: a gathered copy, one per component plane where the values
    # are planar (as the kernels write them; an index_select across the planes gathers
    # element by element, 10x slower). Read through the order inside the kernel instead,
    # the gather was 5x slower at 10^5 rows of 16 (every run waited for its rows).
    v = take(vals.reshape(m, width, nc), 0, order)
    b = None if base is None else base.reshape(base.shape[0], width, nc)
    out, fin = _tree_outputs(nc, (runs, width), vals.dtype)
    bad = 0
    if width:
        fn = getattr(lib, f"mc_runsum_{_NAMES[vals.dtype]}_{nc}")
        threads, step = _split(runs, m * width)
        item = v.element_size()
        bargs = (None, 0, 0, 0) if b is None else (b.data_ptr(), *b.stride())
        calls = [
            (min(step, runs - r0), starts.data_ptr() + r0 * 8, levels, width, v.data_ptr(), *v.stride())
            + (slots.data_ptr() + r0 * 8, *bargs)
            + (out.data_ptr() + r0 * width * item, fin.data_ptr() + r0 * width * item, runs * width)
            for r0 in range(0, runs, step)
        ]
        bad = run_parallel(fn, calls, threads)
    finished = None if bad else fin.movedim(0, -1).reshape(runs, *row, nc)
    return GroupedSums(slots, counts + self, [s.reshape(runs, *row) for s in out], finished)


class ScaledRows(NamedTuple):
    """:func:`rowsumsq`'s ``"scaled"`` result: :class:`Result`'s ``out``, ``ok`` and
    ``bad``, and per row the ``exponent`` ``e`` its coordinates were scaled by (``2^-e``)."""

    out: torch.Tensor
    ok: torch.Tensor
    bad: int
    exponent: torch.Tensor


def _tree_sum_levels(lib: native_cuda.Backend, t: torch.Tensor, axis: int, n: int) -> TreeSum | None:
    """:func:`tree_sum` by the CUDA kernels: one launch per level of ``reduce._tree``
    (``sum_first``, then ``sum_level``: the first half's slots and the second half's
    merged; an odd last term carried by a concatenation, as the torch tree carries it,
    with a zero guard slot at the first level) and one for the finish (``sum_finish``).
    None at nc = 4 (no such kernels: too many operands for one launch)."""
    nc = t.shape[-1]
    if ("sum_level", 0) not in lib.kernels:
        return None
    cur = t if axis == 0 else t.movedim(axis, 0)  # (n, *kept, nc)
    first = True
    while n > 1:
        h = n // 2
        merged = lib.call("sum_first" if first else "sum_level", [cur[:h], cur[h : 2 * h]], (), nc + 1, count=False)[0]  # no check: no sync
        if n % 2:
            rest = cur[2 * h :]
            if first:
                rest = torch.cat([rest, torch.zeros_like(rest[..., :1])], dim=-1)  # the empty guard slot
            merged = torch.cat([merged, rest], dim=0)
        cur, n, first = merged, h + n % 2, False
    if first:  # one term: its components and a zero guard slot
        cur = torch.cat([cur, torch.zeros_like(cur[..., :1])], dim=-1)
    root = cur[0]
    fin = _call(lib, "sum_finish", [root], (), nc)
    return TreeSum(list(root.unbind(-1)), None if fin.bad else fin.out)


#: The row kernel's modes (``mc_rowsumsq``).
_ROW_MODES = {"wide": 0, "one_minus": 1, "rounded": 2, "scaled": 3}


def rowsumsq(x: torch.Tensor, form: str, c: float = 1.0) -> Result | ScaledRows | None:
    """Over the last logical dim of a component tensor ``x`` ``(*, n, nc)`` (nc = 2, 3),
    ``form``: ``"wide"`` :func:`hypermc.mcf.reduce.sumsq_wide` (``nc + 1`` components),
    ``"rounded"`` :func:`hypermc.mcf.reduce.sumsq` (``nc``), ``"one_minus"``
    :func:`hypermc.mcf.reduce.one_minus_sumsq` (``1 - c |x|^2``, ``nc``) or ``"scaled"``
    (:func:`hypermc.mcf.reduce.norm`'s ``sumsq(x 2^-e)`` with ``e`` the exponent of the
    row's largest leading component, a :class:`ScaledRows`): one kernel call (``mc_rowsumsq``,
    in the ``nc + 1`` library) instead of one per tree level and step. ``ok`` false for
    the rows whose fast paths a check rejects (the caller recomputes them by its torch
    path; their ``exponent`` is right); None where the kernel does not apply (CUDA: the
    per-level kernels run there).

    Example:
        >>> x = torch.tensor([[[3.0, 0.0], [4.0, 0.0]]], dtype=torch.float64)  # one row (3, 4), nc = 2
        >>> r = rowsumsq(x, "wide")  # None without a C++ compiler
        >>> r is None or (r.out.tolist(), r.bad) == ([[25.0, 0.0, 0.0]], 0)
        True
        >>> r = rowsumsq(x * 0.1, "one_minus")  # 1 - |(0.3, 0.4)|^2 = 0.75, to 2 components
        >>> r is None or abs(r.out[0, 0].item() - 0.75) < 1e-15
        True
    """
    mode = check_choice("rowsumsq", "form", form, tuple(_ROW_MODES))
    nc = x.shape[-1]
    if x.dim() < 2 or x.shape[-2] == 0 or nc not in (2, 3):
        return None
    lib = _eligible(x, nc=nc + 1)
    if lib is None or isinstance(lib, native_cuda.Backend):
        return None
    shape, n = x.shape[:-2], x.shape[-2]
    v = x.reshape(-1, n, nc)
    rows, dtype, item = v.shape[0], v.dtype, v.element_size()
    nout = nc + 1 if mode == "wide" else nc
    out = torch.empty((nout, rows), dtype=dtype)
    ok = torch.empty(rows, dtype=torch.bool)  # per row 1 (good), 2 (good, by a second pass) or 0
    ex = torch.empty(rows, dtype=torch.int32) if mode == "scaled" else None
    if mode != "one_minus" or c == 1.0:
        cw, cptr = None, None
    else:
        cw = arith.from_engine(torch.tensor(c, dtype=torch.float64), dtype, nc + 1).contiguous()
        cptr = cw.data_ptr()
    fn = getattr(lib, f"mc_rowsumsq_{_NAMES[dtype]}_{nc + 1}")
    threads = min(torch.get_num_threads(), max(1, rows * n // _CHUNK))
    step = -(-rows // threads) if rows else 1
    xsr, xsi, xsc = v.stride()
    calls = [
        (
            min(step, rows - r0),
            n,
            v.data_ptr() + r0 * xsr * item,
            xsr,
            xsi,
            xsc,
            _ROW_MODES[mode],
            cptr,
            out.data_ptr() + r0 * item,
            rows,
            ok.data_ptr() + r0,
            None if ex is None else ex.data_ptr() + r0 * 4,
        )
        for r0 in range(0, rows, step)
    ]
    codes = ok.view(torch.uint8)
    bad = run_parallel(fn, calls, threads) if rows else 0
    del cw  # alive until the kernels ran
    good = codes == 1
    if bad:  # the squares' second pass is all or nothing: its rows (code 2) rejected too
        bad = rows - int(good.sum())
    else:
        good = codes != 0
    res = Result(out.view(nout, *shape).movedim(0, -1), good.view(shape), bad)
    return res if ex is None else ScaledRows(*res, ex.view(shape))


def div(x: torch.Tensor, y: torch.Tensor) -> Result | None:
    """``x / y`` (both ``nc`` components) by ``_long_division`` + ``_div_fixed`` (nc = 3,
    4) or ``_div2`` (nc = 2): the quotient scaled back and ``ok`` (false: the caller
    recomputes the element).

    Example:
        >>> from fractions import Fraction
        >>> x = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> y = torch.tensor([[3.0, 0.0, 0.0]], dtype=torch.float64)
        >>> r = div(x, y)  # None without a C++ compiler
        >>> r is None or abs(sum(map(Fraction, r.out[0].tolist())) - Fraction(1, 3)) < Fraction(1, 2**159)  # 1/3 to u^3
        True
    """
    lib = _eligible(x, y)
    if lib is None or y.shape[-1] != x.shape[-1]:
        return None
    return _call(lib, "div", [x, y], (), x.shape[-1])


def sqrt(x: torch.Tensor, lo: float, hi: float) -> Result | None:
    """``sqrt(x)`` by ``_sqrt_fixed`` (nc >= 3) or ``_sqrt2_network`` (float64 nc = 2)
    where ``lo <= x_0 <= hi`` (else ``ok`` false).

    Example:
        >>> x = torch.tensor([[2.0, 0.0, 0.0], [2.0**40, 0.0, 0.0]], dtype=torch.float64)
        >>> r = sqrt(x, 2.0**-30, 2.0**30)  # None without a C++ compiler
        >>> r is None or (r.ok.tolist() == [True, False] and r.out[0, 0].item() == math.sqrt(2))
        True
        >>> r = sqrt(x[:, :2], 2.0**-30, 2.0**30)  # double-word
        >>> r is None or (r.ok.tolist() == [True, False] and r.out[0, 0].item() == math.sqrt(2))
        True
    """
    lib = _eligible(x)
    if lib is None or not has_sqrt(_NAMES[x.dtype], x.shape[-1]):
        return None
    return _call(lib, "sqrt", [x], (float(lo), float(hi)), x.shape[-1])


def _elementary_eligible(x: torch.Tensor, nc: int | None = None) -> Kernels | None:
    """The library for :mod:`elementary`'s float64 generic path on ``x`` (results at
    ``nc`` components, default ``x``'s), or None (other dtypes; without a measured FMA
    the torch path's double-word products differ)."""
    nc = x.shape[-1] if nc is None else nc
    if x.dtype != torch.float64 or nc not in _elementary_ncs(x.device.type) or not has_fused_addcmul(x.device.type, torch.float64):
        return None
    return _eligible(x, part="elementary", nc=nc)


def exp(x: torch.Tensor) -> Result | None:
    """``exp(x)`` by ``elementary._exp_generic`` (float64, nc = 2, 3, 4; float32 nc = 3, 4:
    :func:`_narrow`): ``ok`` false for
    non-finite ``x_0``, complete over/underflow and where a fixed network's check fails.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [float("inf"), 0.0]], dtype=torch.float64)
        >>> r = exp(x)  # None without a C++ compiler (or a fused multiply-add)
        >>> r is None or (r.ok.tolist() == [True, False] and r.out[0, 0].item() == math.e)
        True
        >>> r = exp(torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64))  # nc = 4 too (staged kernels)
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.e)
        True
    """
    if x.dtype == torch.float32:
        return _narrow(x, "exp")
    lib = _elementary_eligible(x)
    if lib is None:
        return None
    return _call(lib, "exp", [x], (), x.shape[-1])


def _narrow(x: torch.Tensor, op: str, groups: int = 1) -> Result | None:
    """The float64 nc = 2 library's kernel ``{op}_f32x{nc}`` on a float32 ``x`` of ``nc``
    = 3 or 4 components (:func:`hypermc.mcf.native.source._narrow_body`: the conversions to
    and from float64 inside), or None. Its ``groups * nc`` outputs are float32 values,
    returned as float32 in the library's output layout (planar on the CPU, stacked on
    CUDA: what :meth:`Result.patched` writes into). The C++ kernel reads and writes
    float32 itself; the CUDA kernels take ``x`` in float64 (exact) and give float64."""
    nc = x.shape[-1]
    if nc not in NARROW_INPUTS or x.requires_grad or type(x) is not torch.Tensor:
        return None
    lib = _elementary_eligible(x.new_empty((0, 2), dtype=torch.float64), 2)  # before converting x
    if lib is None:
        return None
    if not isinstance(lib, native_cuda.Backend):
        return _call(lib, f"{op}_f32x{nc}", [x], (), 2, groups * nc, library=torch.float64)
    res = _call(lib, f"{op}_f32x{nc}", [x.to(torch.float64)], (), 2, groups * nc)
    return Result(res.out.movedim(-1, 0).to(torch.float32).movedim(0, -1), res.ok, res.bad)


def _log_chain(lib: Kernels, op: str, x: torch.Tensor, nc: int | None = None) -> Result:
    """``mc_{op}`` (the reduction to ``(t, e, tiny)``), torch's ``log1p`` of ``t_0`` (the
    Newton start; the same function the torch path calls), then ``mc_log_core``; ``nc``
    components (default: ``x``'s; ``log_masked_reduce`` reads one more)."""
    nc = x.shape[-1] if nc is None else nc
    first = _call(lib, op, [x], (), nc, nc + 2)
    start = torch.log1p(first.out[..., 0]).unsqueeze(-1)
    short = nc >= 3 and _mostly_short(x)
    second = _call(lib, "log_core_general" if short else "log_core", [first.out, start], (), nc)
    if second.bad and nc >= 3 and not short:
        # second pass: the elements the plain core flags, through the core that computes
        # arith's general product inline (the same bits the torch path gives them)
        redo = (first.ok & ~second.ok).reshape(-1)
        idx = torch.nonzero(redo).squeeze(1)
        if idx.numel():
            rows = [t.reshape(-1, t.shape[-1])[idx] for t in (first.out, start)]
            third = _call(lib, "log_core_general", rows, (), nc)
            out = second.out.movedim(-1, 0).reshape(nc, -1)  # the planar buffer (a view)
            out[:, idx] = third.out.movedim(-1, 0)
            ok = second.ok.reshape(-1).clone()
            ok[idx] = third.ok
            second = Result(second.out, ok.view(second.ok.shape), int((~ok).sum()))
    if not first.bad and not second.bad:
        return second
    ok = first.ok & second.ok
    return Result(second.out, ok, int((~ok).sum()))


def _mostly_short(x: torch.Tensor) -> bool:
    """Whether most elements of ``x`` have a zero last component (MC numbers made from
    plain floats): the plain log core would flag nearly all of them at nc = 4, so the
    general core runs at once instead of after it. One read of one component."""
    last = x[..., -1]
    return last.numel() > 0 and int((last == 0).sum()) * 2 > last.numel()


def log(x: torch.Tensor) -> Result | None:
    """``log(x)`` by ``elementary``'s float64 path (nc = 2, 3, 4) in two fused calls: the
    reduction to ``t`` (with ``e`` and a flag), torch's ``log1p`` of ``t_0`` (the Newton
    start; the same function the torch path calls), the Newton core and ``e ln2 + y``.
    ``ok`` false for ``x_0`` not a positive normal number and where a check fails.

    Example:
        >>> x = torch.tensor([[2.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
        >>> r = log(x)  # None without a C++ compiler (or a fused multiply-add)
        >>> r is None or (r.ok.tolist() == [True, False] and r.out[0, 0].item() == math.log(2))
        True
    """
    lib = _elementary_eligible(x)
    if lib is None:
        return None
    return _log_chain(lib, "log_reduce", x)


def log_masked(s: torch.Tensor, plus_one: torch.Tensor) -> Result | None:
    """``elementary._log1p_masked_generic(s, plus_one)`` on a double-word ``s`` (float64, nc
    = 2; ``plus_one`` boolean, shape ``(*shape, 1)``): ``log1p(s)`` where ``plus_one``,
    ``log(s)`` elsewhere, in two fused calls as :func:`log`. The float32 nc = 3, 4 log and
    log1p prepare ``s`` in float32 and run here on its double-word. ``ok`` false for zero
    or non-finite ``s_0``, ``s_0`` not a positive normal number where ``plus_one`` is
    false, and where a check fails.

    Example:
        >>> s = torch.tensor([[0.5, 0.0], [0.5, 0.0], [-1.0, 0.0]], dtype=torch.float64)
        >>> r = log_masked(s, torch.tensor([[True], [False], [False]]))  # None without a C++ compiler
        >>> want = torch.tensor([math.log1p(0.5), math.log(0.5)], dtype=torch.float64)
        >>> r is None or (r.ok.tolist() == [True, True, False] and bool(((r.out[:2, 0] - want).abs() < 1e-15).all()))
        True
    """
    if s.shape[-1] != 2 or plus_one.shape != (*s.shape[:-1], 1):
        return None
    lib = _elementary_eligible(s)
    if lib is None:
        return None
    x = torch.stack([s[..., 0], s[..., 1], plus_one[..., 0].to(s.dtype)]).movedim(0, -1)  # planar (s_0, s_1, p)
    return _log_chain(lib, "log_masked_reduce", x, nc=2)


def acosh_t(t: torch.Tensor) -> Result | None:
    """``elementary._acosh_generic(t)``, i.e. ``acosh(1 + t)``, on a double-word ``t``
    (float64, nc = 2) in two fused calls as :func:`log`: the float32 nc = 3, 4 acosh
    forms ``t = x - 1`` in float32 and runs here on its double-word. ``ok`` false for
    ``t_0`` not positive or not finite and where a check fails.

    Example:
        >>> r = acosh_t(torch.tensor([[1.0, 0.0], [-0.5, 0.0]], dtype=torch.float64))  # None without a C++ compiler
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.acosh(2.0)) < 1e-15)
        True
    """
    lib = _elementary_eligible(t) if t.shape[-1] == 2 else None
    return None if lib is None else _log_chain(lib, "acosh_t_reduce", t)


def atanh_ad(a: torch.Tensor, den: torch.Tensor, neg: torch.Tensor) -> Result | None:
    """``elementary._atanh_generic(a, den, neg)`` on double-words ``a = |x|`` and ``den = 1 -
    |x|`` (float64, nc = 2; ``neg`` the sign bits, shape ``(*shape, 1)``): its logarithm in
    two fused calls as :func:`log`, then ``elementary._atanh_finish`` (the factor 1/2,
    the sign, the tiny arguments). The float32 nc = 3, 4 atanh forms ``1 - |x|`` in
    float32 and runs here on the double-words. ``ok`` false for a zero or non-finite
    ``a_0``, the pole ``den_0 = 0`` and where a check fails.

    Example:
        >>> a = torch.tensor([[0.5, 0.0], [1.0, 0.0]], dtype=torch.float64)
        >>> den = torch.tensor([[0.5, 0.0], [0.0, 0.0]], dtype=torch.float64)  # 1 - a; the pole is flagged
        >>> r = atanh_ad(a, den, torch.tensor([[True], [False]]))  # None without a C++ compiler
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.atanh(-0.5)) < 1e-15)
        True
    """
    if a.shape[-1] != 2 or den.shape != a.shape or den.dtype != a.dtype or neg.shape != (*a.shape[:-1], 1):
        return None
    lib = _elementary_eligible(a)
    if lib is None:
        return None
    x = torch.stack([a[..., 0], a[..., 1], den[..., 0], den[..., 1]]).movedim(0, -1)  # planar (a, den)
    res = _log_chain(lib, "atanh_ad_reduce", x, nc=2)
    el = elementary
    out = el._finish(el._atanh_finish(unpack(res.out), unpack(a), unpack(den), neg[..., 0]))
    return Result(out, res.ok, res.bad)


def _sin_cos(x: torch.Tensor, fn: str = "sin_cos") -> Result | None:
    """The sin/cos kernel's ``(sin x, cos x)`` (2 nc components; ``fn="tan"``: the nc = 2
    tan kernel's quotient), float32 nc = 3, 4 through :func:`_narrow`, or None."""
    groups = 1 if fn == "tan" else 2
    if x.dtype == torch.float32:
        return _narrow(x, fn, groups)
    lib = _elementary_eligible(x)
    return None if lib is None else _call(lib, fn, [x], (), x.shape[-1], groups * x.shape[-1])


def _half(res: Result | None, second: bool) -> Result | None:
    """The first or second half of a two-output kernel's components (sin/cos, sinh/cosh)."""
    if res is None:
        return None
    h = res.out.shape[-1] // 2
    return Result(res.out[..., h:] if second else res.out[..., :h], res.ok, res.bad)


def sin(x: torch.Tensor) -> Result | None:
    """``sin(x)`` by ``elementary._sin_cos_generic`` (float64 nc = 2, 3, 4, and float32 nc =
    3, 4 on their exact float64 expansion at 2 components; CPU and CUDA): the fast
    reduction ``x = n pi/2 + r``, the series and the tables in one fused loop (the kernel
    computes cos as well). ``ok`` false for non-finite or zero ``x_0``, where
    the torch path takes the exact reduction (heavy cancellation, ``|x| >= 2^45``) and
    where a fixed network's check fails.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1e300, 0.0]], dtype=torch.float64)
        >>> r = sin(x)  # None without a C++ compiler (or a fused multiply-add)
        >>> r is None or (r.ok.tolist() == [True, False, False] and r.out[0, 0].item() == math.sin(1))
        True
    """
    return _half(_sin_cos(x), second=False)


def cos(x: torch.Tensor) -> Result | None:
    """``cos(x)``: :func:`sin`'s kernel, its second output.

    Example:
        >>> r = cos(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.cos(1))
        True
    """
    return _half(_sin_cos(x), second=True)


def tan(x: torch.Tensor) -> Result | None:
    """``tan(x)``: ``sin x / cos x`` from :func:`sin`'s kernel, divided as the torch path
    does (``elementary._div``: the fused division for nc >= 3; at nc = 2 a kernel of its
    own with the double-word division inside).

    Example:
        >>> r = tan(torch.tensor([[0.5, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.tan(0.5))
        True
    """
    if x.shape[-1] == 2 or x.dtype == torch.float32:  # float32: the nc = 2 tan kernel, narrowed
        return _sin_cos(x, "tan")
    res = _sin_cos(x)
    if res is None:
        return None
    el, nc = elementary, res.out.shape[-1] // 2
    quotient = el._finish(el._div(unpack(res.out[..., :nc]), unpack(res.out[..., nc:])))
    return Result(quotient, res.ok, res.bad)


def _unary(x: torch.Tensor, op: str, nout: int) -> Result | None:
    """The elementary library's kernel ``op`` on ``x`` (C++ or CUDA; float32 nc = 3, 4
    through :func:`_narrow`), or None."""
    if x.dtype == torch.float32:
        return _narrow(x, op, nout // x.shape[-1])
    lib = _elementary_eligible(x)
    return None if lib is None else _call(lib, op, [x], (), x.shape[-1], nout)


def expm1(x: torch.Tensor) -> Result | None:
    """``expm1(x)`` by ``elementary._expm1_generic`` (float64, nc = 2, 3, 4, and float32 nc = 3,
    4 through :func:`_narrow`; CPU and CUDA); ``ok``
    false for zero or non-finite ``x_0``, ``|x_0|`` beyond exp's bound and where a fixed
    network's check fails.

    Example:
        >>> r = expm1(torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.expm1(1)) < 1e-15)
        True
    """
    return _unary(x, "expm1", x.shape[-1])


def sinh(x: torch.Tensor) -> Result | None:
    """``sinh(x)`` by ``elementary._sinh_generic`` (float64, nc = 2, 3, 4, and float32 nc = 3, 4
    through :func:`_narrow`; CPU and CUDA; the kernel
    computes cosh as well); ``ok`` as :func:`expm1`.

    Example:
        >>> r = sinh(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.sinh(1))
        True
    """
    return _half(_unary(x, "sinh_cosh", 2 * x.shape[-1]), second=False)


def cosh(x: torch.Tensor) -> Result | None:
    """``cosh(x)``: :func:`sinh`'s kernel, its second output.

    Example:
        >>> r = cosh(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.cosh(1))
        True
    """
    return _half(_unary(x, "sinh_cosh", 2 * x.shape[-1]), second=True)


def tanh(x: torch.Tensor) -> Result | None:
    """``tanh(x)`` by ``elementary._tanh_generic`` (float64, nc = 2, 3, 4, and float32 nc = 3, 4
    through :func:`_narrow`; CPU and CUDA); ``ok`` as
    :func:`expm1`.

    Example:
        >>> r = tanh(torch.tensor([[0.5, 0.0, 0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and r.out[0, 0].item() == math.tanh(0.5))
        True
    """
    return _unary(x, "tanh", x.shape[-1])


def _reduced_log(x: torch.Tensor, fn: str) -> Result | None:
    """:func:`_log_chain` with the elementary library's reduction ``{fn}_reduce``, or None."""
    lib = _elementary_eligible(x)
    return None if lib is None else _log_chain(lib, f"{fn}_reduce", x)


def _odd_finish(res: Result | None, x: torch.Tensor, scale: float | None = None) -> Result | None:
    """The torch path's last steps of asinh and atanh on the fused ``log1p``: the factor
    ``scale``, the sign of ``x``, and ``x`` itself below the odd functions' tiny threshold."""
    if res is None:
        return None
    el = elementary
    y = res.out if scale is None else res.out * scale
    x0 = x[..., :1]
    y = torch.where(torch.signbit(x0), -y, y)
    y = torch.where(x0.abs() < el._tiny_odd_threshold(float_format(x.dtype).p, x.shape[-1]), x, y)
    return Result(y, res.ok, res.bad)


def log1p(x: torch.Tensor) -> Result | None:
    """``log1p(x)`` by ``elementary._log1p_masked_generic`` after ``_prepare_log1p``
    (float64, nc = 2, 3, 4; CPU and CUDA), two fused calls as :func:`log`. ``ok`` false for zero
    or non-finite ``x_0``, ``1 + x`` not a positive normal number and where a check fails.

    Example:
        >>> r = log1p(torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.log(2)) < 1e-15)
        True
    """
    return _reduced_log(x, "log1p")


def asinh(x: torch.Tensor) -> Result | None:
    """``asinh(x)`` by ``elementary._asinh_generic`` (float64, nc = 2, 3, 4; CPU and CUDA): the
    argument of ``log1p`` and the reduction fused, the Newton core of :func:`log`, the
    sign and the tiny case in torch. ``ok`` as :func:`log1p`.

    Example:
        >>> r = asinh(torch.tensor([[-1.0, 0.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True] and abs(r.out[0, 0].item() - math.asinh(-1)) < 1e-15)
        True
    """
    return _odd_finish(_reduced_log(x, "asinh"), x)


def acosh(x: torch.Tensor) -> Result | None:
    """``acosh(x)`` by ``elementary._acosh_generic`` after ``_prepare_acosh`` (float64,
    nc = 2, 3, 4; CPU and CUDA), as :func:`asinh`. ``ok`` false for ``x <= 1`` or not finite and
    where a check fails.

    Example:
        >>> r = acosh(torch.tensor([[2.0, 0.0], [1.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.acosh(2)) < 1e-15)
        True
    """
    return _reduced_log(x, "acosh")


def atanh(x: torch.Tensor) -> Result | None:
    """``atanh(x)`` by ``elementary._atanh_generic`` after ``_prepare_atanh`` (float64,
    nc = 2, 3, 4; CPU and CUDA): ``log1p(2|x| / (1 - |x|)) / 2`` as :func:`asinh`. ``ok`` false for
    zero or non-finite ``x_0``, ``|x| >= 1`` and where a check fails.

    Example:
        >>> r = atanh(torch.tensor([[0.5, 0.0], [1.0, 0.0]], dtype=torch.float64))
        >>> r is None or (r.ok.tolist() == [True, False] and abs(r.out[0, 0].item() - math.atanh(0.5)) < 1e-15)
        True
    """
    return _odd_finish(_reduced_log(x, "atanh"), x, 0.5)


registry.register(
    add,
    mul,
    rowsumsq,
    tree_sum,
    grouped_sums,
    div,
    sqrt,
    exp,
    log,
    log_masked,
    acosh_t,
    atanh_ad,
    sin,
    cos,
    tan,
    expm1,
    sinh,
    cosh,
    tanh,
    log1p,
    asinh,
    acosh,
    atanh,
)
