"""The CUDA kernels (:mod:`hypermc.mcf.native.cuda`): their code, host build, device.

Without a GPU the kernels' CUDA code is still tested: it is compiled as C++ against a
host shim of the CUDA intrinsics (``__dmul_rn`` as a plain product under
``-ffp-contract=off``, ``__fma_rn`` as ``std::fma``, the bit casts by ``memcpy``) and run
through :class:`native_cuda.Backend` with a host launcher, so the CUDA prelude, the
variant selection, the operand/extra-argument plumbing and the output stacking are
checked bit for bit against the torch networks on the CPU. The ``cuda`` tests run the
same comparisons on the device with jiterator.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from hypermc.mcf import arith, elementary, native, reduce
from hypermc.mcf.eft import float_format, renormalize, sqrt_rn
from hypermc.mcf.native import cuda as native_cuda
from hypermc.mcf.native import source as native_source
from tests.mcf.test_arith import _cap
from tests.mcf.test_native import INTS, OPS, _same_bits, _torch_kernels, needs_compiler
from tests.oracle import expansions

DTYPES = {"f32": torch.float32, "f64": torch.float64}
CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double}

_SHIM = r"""
#include <cfloat>
#include <cmath>
#include <math.h>
#include <cstring>
// CUDA's float and double operations round once to their own format: no excess precision
// (x87), so each host float operation below is one IEEE round-to-nearest float operation.
static_assert(FLT_EVAL_METHOD == 0, "the host shim needs FLT_EVAL_METHOD == 0 (SSE, not x87)");
#define __device__
#define __noinline__ __attribute__((noinline))
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline long long __double_as_longlong(double x) { long long u; std::memcpy(&u, &x, 8); return u; }
static inline double __longlong_as_double(long long u) { double x; std::memcpy(&x, &u, 8); return x; }
static inline unsigned int __float_as_uint(float x) { unsigned int u; std::memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float x; std::memcpy(&x, &u, 4); return x; }
static inline float __double2float_rn(double x) { return (float)x; }
"""


def _wrapper(k: native_cuda.Kernel, ctype: str) -> str:
    """``run_NAME(n, inputs, extras, outputs)``: the kernel over contiguous host arrays."""
    n_in = sum(k.inputs)
    args = [f"in[{i}][i]" for i in range(n_in)] + [f"extra[{j}]" for j in range(len(k.extras))] + [f"out[{j}][i]" for j in range(k.outputs)]
    return (
        f'extern "C" void run_{k.name}(long long n, {ctype} const* const* in, const double* extra, {ctype}* const* out) {{\n'
        f"  for (long long i = 0; i < n; ++i) {k.name}<{ctype}>({', '.join(args)});\n}}\n"
    )


def _strip_prelude(code: str) -> str:
    return code[len(native_cuda._PRELUDE) :]


_built: dict[tuple, native_cuda.Backend] = {}
#: names of the kernels the host launcher has run in this process
_launched: set[str] = set()


def _host_backend(name: str, nc: int, part: str, tmp: Path) -> native_cuda.Backend:
    """A Backend whose kernels are the CUDA code compiled for the host (one library)."""
    key = (name, nc, part)
    if key in _built:
        return _built[key]
    kernels = native_cuda.source(name, nc, part)
    parts = [p for k in kernels.values() for p in (k, *k.rest)]  # every jiterator kernel
    ctype = "float" if name == "f32" else "double"
    # one copy of the helpers and tables, then every entry function and its wrapper
    lines = [_strip_prelude(k.code).splitlines() for k in parts]
    tables = sorted({line for code in lines for line in code if line.startswith("__device__ const")})
    entries = ["\n".join(line for line in code if not line.startswith("__device__ const")) for code in lines]
    src = _SHIM + native_cuda._PRELUDE + "\n".join(tables) + "\n" + "\n".join(entries) + "\n" + "".join(_wrapper(k, ctype) for k in parts)
    tag = hashlib.sha256(src.encode()).hexdigest()[:12]
    cpp, so = tmp / f"host_{name}_{nc}_{part}_{tag}.cpp", tmp / f"host_{name}_{nc}_{part}_{tag}.so"
    cpp.write_text(src)
    cxx = native._compiler()
    assert cxx is not None
    flags = ["-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math"]
    proc = subprocess.run([cxx, *flags, str(cpp), "-o", str(so)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lib = ctypes.CDLL(str(so))
    cty = CTYPES[name]

    def launch(k: native_cuda.Kernel, tensors: list[torch.Tensor], kwargs: dict[str, float]) -> list[torch.Tensor]:
        assert list(kwargs) == list(k.extras)
        _launched.add(k.name)
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        ins = [t.expand(shape).contiguous().reshape(-1) for t in tensors]
        outs = [torch.empty(shape, dtype=tensors[0].dtype) for _ in range(k.outputs)]
        fn = getattr(lib, f"run_{k.name}")
        in_arr = (ctypes.POINTER(cty) * len(ins))(*[ctypes.cast(t.data_ptr(), ctypes.POINTER(cty)) for t in ins])
        out_arr = (ctypes.POINTER(cty) * len(outs))(*[ctypes.cast(t.data_ptr(), ctypes.POINTER(cty)) for t in outs])
        extra = (ctypes.c_double * max(1, len(kwargs)))(*kwargs.values())
        fn(ctypes.c_longlong(ins[0].numel() if ins else 0), in_arr, extra, out_arr)
        return outs

    _built[key] = backend = native_cuda.Backend(name, nc, part, launch=launch)
    return backend


@pytest.fixture(scope="module")
def host_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("native_cuda_host")


def _operands(data, dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """As tests/mcf/test_native.py draws them: whole exponent range, zeros, exact and near
    cancellation, pinned edge values."""
    x = data.draw(expansions(dtype, nc, shape=(24,), allow_zero=True))
    y = data.draw(expansions(dtype, nc, shape=(24,), allow_zero=True))
    y[::5] = -x[::5]
    y[1::5] = _torch_kernels(arith.add, -x[1::5], y[1::5] * 2.0**-40)
    return x, y


def _in_sqrt_range(data, dtype: torch.dtype, nc: int) -> torch.Tensor:
    """Positive operands inside the fixed sqrt network's range (the torch kernels take one
    path for a whole tensor, the fused ones decide per element)."""
    lo, hi = arith._sqrt_range(dtype, nc)
    x = data.draw(expansions(dtype, nc, min_exp=math.ceil(math.log2(lo)) + 1, max_exp=math.floor(math.log2(hi)) - 1, shape=(24,)))
    return torch.where(x[..., :1] < 0, -x, x)


def _install(monkeypatch, backend: native_cuda.Backend, dtype: torch.dtype) -> None:
    """Make ``backend`` the CPU kernels of its configuration for this test."""
    key = native._key(backend.name, backend.nc, backend.part)
    monkeypatch.setitem(native._libs, key, backend)


def _mismatch(got: torch.Tensor, want: torch.Tensor, *, any_nan: bool = False, any_zero_sign: bool = False) -> str | None:
    """None if ``got`` and ``want`` have the same shape and bits, else where they differ
    first (index, both values and bit patterns) and how many elements differ.

    ``any_nan``: a NaN matches any NaN (payload and sign are ignored); every other bit,
    the sign of zero included, must agree. For results computed on different devices:
    x86 produces the "default NaN" 0xFFC00000 (sign set) for an invalid float32
    operation such as 0/0, while NVIDIA GPUs produce the canonical NaN 0x7FFFFFFF
    (as documented; ``benchmarks/device_facts.py`` prints what a device gives), so a
    NaN's bits say which device made it, not what it means.
    ``any_zero_sign``: +0 matches -0.
    """
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {tuple(got.shape)} {got.dtype} != {tuple(want.shape)} {want.dtype}"
    g, w = got.detach().cpu().contiguous(), want.detach().cpu().contiguous()
    differ = g.view(INTS[g.dtype]) != w.view(INTS[w.dtype])
    if any_nan:
        gn, wn = torch.isnan(g), torch.isnan(w)
        differ = (differ & ~(gn & wn)) | (gn != wn)
    if any_zero_sign:
        differ &= ~((g == 0) & (w == 0))
    if not bool(differ.any()):
        return None
    idx = tuple(int(i) for i in differ.nonzero()[0])
    mask = (1 << (8 * g.element_size())) - 1
    gb, wb = (int(t.view(INTS[t.dtype])[idx]) & mask for t in (g, w))
    return f"{int(differ.sum())} element(s) differ; first at {idx}: {float(g[idx])!r} (0x{gb:x}) != {float(w[idx])!r} (0x{wb:x})"


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str, *, any_nan: bool = False, any_zero_sign: bool = False) -> None:
    bad = _mismatch(got, want, any_nan=any_nan, any_zero_sign=any_zero_sign)
    assert bad is None, f"{what}: {bad}"


def _edge_operands(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed normalised operands at the edges a few hypothesis examples reach only by
    chance: moderate values, tails in the subnormal range, leading components next to
    overflow (sums and products overflow), huge over tiny and tiny over huge (quotients
    overflow and underflow), exact and near cancellation, signed zeros with 0/0, x/0 and
    0/y."""
    gen = torch.Generator().manual_seed(20261127)
    fmt = float_format(dtype)
    emax = math.frexp(torch.finfo(dtype).max)[1]  # 2^(emax-1) <= max < 2^emax
    emin = math.frexp(torch.finfo(dtype).tiny)[1]  # tiny = 2^(emin-1)
    subnormal_tail = (emin, emin + (nc - 1) * fmt.p)
    groups = [  # (rows, x lead exponents, y lead exponents)
        (16, (-4, 4), (-4, 4)),
        (12, subnormal_tail, subnormal_tail),
        (12, subnormal_tail, (-4, 4)),
        (12, (emax - 2, emax), (emax - 2, emax)),
        (8, (emax - 2, emax), subnormal_tail),
        (8, subnormal_tail, (emax - 2, emax)),
    ]
    xe = torch.cat([torch.randint(a, b + 1, (n,), generator=gen) for n, (a, b), _ in groups])
    ye = torch.cat([torch.randint(a, b + 1, (n,), generator=gen) for n, _, (a, b) in groups])

    def expansion(lead_exp: torch.Tensor) -> torch.Tensor:
        n = lead_exp.shape[0]
        terms = []
        for k in range(nc + 1):
            r = torch.rand(n, generator=gen, dtype=torch.float64) * 1.5 - 0.75  # |r| < 1: no overflow
            terms.append((r * torch.pow(2.0, (lead_exp - k * fmt.p).to(torch.float64))).to(dtype))
        return renormalize(terms, nc)

    x, y = expansion(xe), expansion(ye)
    y[1:16:5] = -x[1:16:5]  # exact cancellation
    y[2:16:5] = arith.add(-x[2:16:5], y[2:16:5] * 2.0**-40)  # near cancellation
    zeros = torch.zeros(6, nc, dtype=dtype)
    signs = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, 1.0], dtype=dtype).unsqueeze(-1)
    x = torch.cat([x, zeros * signs, zeros[:2], x[:2]])  # 0/±0, ±0/0, 0/y, x/0
    y = torch.cat([y, zeros * signs.flip(0), y[:2], zeros[:2]])
    return x, y


def _sqrt_operands(x: torch.Tensor, nc: int) -> torch.Tensor:
    """The positive rows of ``|x|`` inside the fixed sqrt network's range."""
    lo, hi = arith._sqrt_range(x.dtype, nc)
    r = torch.where(x[..., :1] < 0, -x, x)
    return r[(r[:, 0] >= lo) & (r[:, 0] <= hi)]


# ----------------------------------------------------------------- translation


@pytest.mark.parametrize("config", native_cuda.KERNELS, ids=str)
def test_every_product_quotient_and_call_is_an_uncontractible_intrinsic(config):
    """Each product is ``mc_mul`` (``__dmul_rn``/``__fmul_rn``), each quotient of the
    component type ``mc_div``, each library call its ``mc_`` counterpart: nothing that
    NVRTC could contract into an FMA or replace by an approximation is in the code."""
    for k in (p for op in native_cuda.source(*config).values() for p in (op, *op.rest)):
        entry = k.code.split(native_cuda.ENTRY)[-1]
        assert "std::" not in entry and " * " not in entry and "fmaf(" not in entry
        assert all("/" not in line or "mc_int<T>" in line for line in entry.splitlines() if not line.lstrip().startswith("//"))
        assert k.outputs == len(re.findall(r"T& out(\d+)", entry)) + 1 <= native_cuda.MAX_OUTPUTS  # components + ok
        assert sum(k.inputs) <= 8  # jiterator's limit


def test_the_cuda_body_is_the_cpp_body_verbatim():
    """One text per kernel: the statements the C++ library compiles are the CUDA entry
    function's body, line for line; only the preludes (and the operand macros) differ."""
    body = native_source._mul_body(4, 4)
    cuda = native_cuda.source("f64", 4)[("mul", 4)].code.split(native_cuda.ENTRY)[-1]
    entry = [line.strip() for line in cuda.splitlines() if line.startswith("  ")]
    assert entry[-len(body) :] == body
    assert sum(line.count("mc_mul(") for line in body) > 0


def test_an_infix_product_or_quotient_is_refused():
    """A float statement with ``*`` or ``/`` could be contracted by a backend's compiler
    (NVRTC's default ``--fmad=true``): the generator refuses it; integer statements may."""
    net = native_source._Net()
    with pytest.raises(ValueError, match=r"_Net.let: 'foo\(v0\) \* bar\(v0\)' has an infix product or quotient"):
        net.let("foo(v0) * bar(v0)")
    with pytest.raises(ValueError, match="infix product or quotient of floats"):
        net.let("v1 / v2", "bool")
    assert net.let("v3 / 2", "mc_int<T>") == "v0"


def test_source_refuses_unknown_configurations():
    with pytest.raises(ValueError, match=r"source: no CUDA kernels for \('f32', 3, 'elementary'\)"):
        native_cuda.source("f32", 3, "elementary")
    with pytest.raises(ValueError, match=r"source: no CUDA kernels for \('f64', 5, 'arith'\)"):
        native_cuda.source("f64", 5)


def test_status_names_a_bad_device():
    with pytest.raises(ValueError, match="status: device type must be one of"):
        native.status(torch.float64, 3, device="meta")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer without CUDA")
def test_status_without_cuda():
    assert native.status(torch.float64, 3, device="cuda") == "CUDA is not available"
    assert native.available(torch.float32, 2, device="cuda") is False


# ----------------------------------------------------------------- host build


@needs_compiler
@pytest.mark.parametrize("config", native_cuda.KERNELS, ids=str)
def test_host_build_passes_the_self_check(config, host_dir):
    """The CUDA code, compiled for the host, passes native's bit-for-bit self-check."""
    name, nc, part = config
    backend = _host_backend(name, nc, part, host_dir)
    assert native._self_check(backend, DTYPES[name], nc, part) is None


@needs_compiler
@pytest.mark.parametrize("config", [c for c in native_cuda.KERNELS if c[2] == "arith"], ids=str)
@_cap(8)
@given(data=st.data())
def test_host_build_same_bits_as_the_torch_networks(config, host_dir, data):
    name, nc, _ = config
    dtype = DTYPES[name]
    backend = _host_backend(name, nc, "arith", host_dir)
    x, y = _operands(data, dtype, nc)
    with pytest.MonkeyPatch.context() as mp:
        _install(mp, backend, dtype)
        for op, f in OPS.items():
            assert _same_bits(f(x, y), _torch_kernels(f, x, y)), op
        if native_source.has_sqrt(name, nc):
            r = _in_sqrt_range(data, dtype, nc)
            assert _same_bits(arith.sqrt(r), _torch_kernels(arith.sqrt, r))


@needs_compiler
@pytest.mark.parametrize("nc", [2, 3])
def test_host_build_exp_log_same_bits(nc, host_dir):
    backend = _host_backend("f64", nc, "elementary", host_dir)
    gen = torch.Generator().manual_seed(11)
    x = arith.add(
        torch.randn(257, nc, generator=gen, dtype=torch.float64) * 40, torch.randn(257, nc, generator=gen, dtype=torch.float64) * 2.0**-60
    )
    special = torch.tensor([0.0, -0.0, 1.0, 709.9, -745.5, 1e-310, float("inf"), -float("inf"), float("nan")], dtype=torch.float64)
    x = torch.cat([x, torch.nn.functional.pad(special.unsqueeze(1), (0, nc - 1))])
    with pytest.MonkeyPatch.context() as mp:
        _install(mp, backend, torch.float64)
        for f, arg in (
            (elementary.exp, x),
            (elementary.log, x.abs()),
            (elementary.log, arith.add_float(x * 2.0**-40, torch.ones(x.shape[0], dtype=torch.float64))),
        ):
            assert _same_bits(f(arg), _torch_kernels(f, arg)), f.__name__


ARITH = [c for c in native_cuda.KERNELS if c[2] == "arith"]


def _edge_cases(name: str, nc: int) -> dict[str, tuple]:
    """``op -> (function, operands)`` on :func:`_edge_operands`: the ops of ``OPS``, the
    square root (nc >= 3, and float64 nc = 2) and, for float32 nc = 2, ``arith._long_division`` (arith.div
    takes the float64 engine there; the fused division kernel serves the long division)."""
    x, y = _edge_operands(DTYPES[name], nc)
    cases: dict[str, tuple] = {op: (f, (x, y)) for op, f in OPS.items()}
    if native_source.has_sqrt(name, nc):
        cases["sqrt"] = (arith.sqrt, (_sqrt_operands(x, nc),))
    if (name, nc) == ("f32", 2):
        cases["long division"] = (lambda a, b: arith._long_division(a, b, 2), (x, y))
    cases["sum"] = (lambda a, b: reduce.sum(a[torch.isfinite(a).all(-1)], 0), (x, y))  # one sum of the finite rows
    cases["sums of pairs"] = (lambda a, b: reduce.sum(torch.stack([a, b]), 0), (x, y))
    cases["sums of three"] = (lambda a, b: reduce.sum(torch.stack([a, b, a]), 0), (x, y))  # an odd count
    return cases


@needs_compiler
@pytest.mark.parametrize("config", ARITH, ids=str)
def test_host_build_edges_same_bits_as_the_torch_networks_and_the_cpp_kernels(config, host_dir):
    """Every arith kernel of the CUDA code, built for the host, on fixed edge operands:
    the same bits as the torch networks and as the C++ library, and every kernel of the
    configuration is run by some op (none is dead code that no test reaches)."""
    name, nc, _ = config
    dtype = DTYPES[name]
    assert native.status(dtype, nc) == "in use"  # the C++ library serves the first pass
    cases = _edge_cases(name, nc)
    cpp = {op: f(*args) for op, (f, args) in cases.items()}
    backend = _host_backend(name, nc, "arith", host_dir)
    _launched.difference_update(k.name for k in backend.kernels.values())
    with pytest.MonkeyPatch.context() as mp:
        _install(mp, backend, dtype)
        for op, (f, args) in cases.items():
            got = f(*args)
            _assert_same_bits(got, _torch_kernels(f, *args), f"{op}: host-built CUDA kernels vs the torch networks")
            _assert_same_bits(got, cpp[op], f"{op}: host-built CUDA kernels vs the C++ kernels")
    assert sorted(k.name for k in backend.kernels.values() if k.name not in _launched) == []


def _kernel_calls(config: tuple, cpp, x: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    """``(op, operands, extra, nout)`` in :func:`native._call`'s form for every kernel of
    ``config`` (add with both signs)."""
    name, nc, part = config
    calls: list[tuple] = []
    ax = torch.where(x[..., :1] < 0, -x, x)
    for (op, variant), k in native_cuda.source(*config).items():
        if op in ("add", "add_general"):
            calls += [(op, [x, y[..., :variant]], (variant, sign), nc) for sign in (1.0, -1.0)]
        elif op in ("mul", "mul_general"):
            calls.append((op, [x, y[..., :variant]], (variant,), nc))
        elif op == "div":
            calls.append((op, [x, y], (), nc))
        elif op == "sqrt":
            calls.append((op, [ax], tuple(float(v) for v in arith._sqrt_range(DTYPES[name], nc)), nc))
        elif op in ("log_core", "log_core_general"):
            t = native._call(cpp, "log_reduce", [ax], (), nc, nc + 2).out
            calls.append((op, [t, torch.log1p(t[..., :1])], (), nc))
        elif op == "acosh_t_reduce":  # t = x - 1: positive, and the edge rows (zero and negative t flagged)
            calls += [(op, [a], (), k.components) for a in (ax, x)]
        elif op == "atanh_ad_reduce":  # a = |x| scaled below 1, den = 1 - a; the edge rows
            a = ax * 2.0**-21
            calls += [(op, [torch.cat([a, arith.add_float(-a, torch.ones_like(a[..., 0]))], -1)], (), k.components)]
            calls += [(op, [torch.cat([ax, ax.flip(0)], -1)], (), k.components)]
        elif op == "log_masked_reduce":  # s (a double-word) and plus_one as 0/1: both branches
            p = (torch.arange(x.shape[0]) % 2).to(x.dtype).unsqueeze(-1)
            calls += [(op, [torch.cat([a, p], -1)], (), k.components) for a in (ax, x * 2.0**-6)]
        elif "_f32x" in op:  # float32 expansions of nx components (native._narrow), float32 results
            nx = int(op.rsplit("_f32x", 1)[1])
            x32 = _edge_operands(torch.float32, nx)[0]
            scale = 2.0**-10 if op.startswith(("sin_cos", "tan")) else 2.0**-4
            calls += [(op, [a], (), k.components) for a in (x32, x32 * scale)]
        elif op in ("exp", "expm1", "sinh_cosh", "tanh", "sin_cos", "tan", "log_reduce") or op.endswith("_reduce"):
            # the arguments as native._self_check scales them, and the raw edge rows
            arg = {"log_reduce": ax, "acosh_reduce": ax * 16.0, "atanh_reduce": x * 2.0**-21}.get(op, x)
            calls += [(op, [a], (), k.components) for a in (arg, arg * 2.0**-14)]
        elif op.startswith("sum_"):
            continue  # one launch per tree level, which the C++ library runs in one call: compared through reduce.sum
        else:
            raise AssertionError(f"no operands for the kernel {op!r}")
    return calls


@needs_compiler
@pytest.mark.parametrize("config", native_cuda.KERNELS, ids=str)
def test_host_build_kernels_same_outputs_as_the_cpp_kernels(config, host_dir):
    """Kernel by kernel, on the same raw operands (edge rows, also those the fast-path
    check rejects: overflow, subnormal leads, zeros, non-finite operands): the CUDA code
    built for the host and the C++ kernel give the same ``ok`` flags and the same bits
    in every output of every accepted element. In the rejected elements (which the
    torch path recomputes) the values agree too, up to the sign of a zero and a NaN's
    bits: the C++ library is built with hardware FMA (``-march=native``), and GCC then
    folds a negated fused multiply-add into one instruction (``-fma(-a, b, c)`` becomes
    ``vfmsub(a, b, c)``, +0 where IEEE gives -0; see the strict xfail below). A rejected
    element whose leading output is NaN on both sides is not compared further: its other
    outputs are computed from that NaN (the exponent of log's reduction at a domain
    error), and a NaN's bits differ between the two builds."""
    name, nc, part = config
    dtype = DTYPES[name]
    cpp = native._load(dtype, nc, part)
    assert not isinstance(cpp, str) and cpp is not None, cpp
    x, y = _edge_operands(dtype, nc)
    if part == "elementary":  # moderate arguments too (exp of the edge rows over/underflows)
        x, y = torch.cat([x, x * 2.0**-14]), torch.cat([y, y])
    special = torch.zeros(3, nc, dtype=dtype)
    special[:, 0] = torch.tensor([math.inf, -math.inf, math.nan])
    x, y = torch.cat([x, special, x[:3]]), torch.cat([y, y[:3], special])
    backend = _host_backend(name, nc, part, host_dir)
    rejected = 0
    for op, operands, extra, nout in _kernel_calls(config, cpp, x, y):
        what = f"{op} {extra}"
        if "_f32x" in op:
            # the C++ kernel reads and writes float32; the CUDA kernel reads the float32
            # expansion in float64 (exact) and writes float64 values that are float32 ones
            # where accepted (rejected ones: the C++ store rounds them to float32 too)
            want = native._call(cpp, op, operands, extra, nc, nout, library=torch.float64)
            got = native._call(backend, op, [operands[0].double()], extra, nc, nout)
            assert want.out.dtype == torch.float32 and torch.equal(got.out[got.ok].float().double(), got.out[got.ok]), what
            got = native.Result(got.out.float(), got.ok, got.bad)
        else:
            want = native._call(cpp, op, operands, extra, nc, nout)
            got = native._call(backend, op, operands, extra, nc, nout)
        assert torch.equal(got.ok, want.ok) and got.bad == want.bad, what
        _assert_same_bits(got.out[got.ok], want.out[want.ok], what + " (accepted elements)")
        # rejected elements whose leading output is NaN on both: the other outputs derive
        # from that NaN (log's exponent e of a domain error), whose bits are the device's
        nan_lead = got.out[..., 0].isnan() & want.out[..., 0].isnan()
        rej = ~got.ok & ~nan_lead
        _assert_same_bits(got.out[rej], want.out[rej], what + " (rejected elements)", any_nan=True, any_zero_sign=True)
        assert got.bad < got.ok.numel(), what
        rejected += got.bad
    assert rejected > 0  # both outcomes of the checks are compared


@needs_compiler
@pytest.mark.xfail(strict=True, reason="GCC with hardware FMA folds -fma(-a, b, c) into vfmsub(a, b, c): +0 where IEEE gives -0")
def test_cpp_kernels_keep_the_sign_of_a_negated_exact_zero():
    """float32 nc = 3 times a plain float, x = -0 and b = +0: the statement list (and
    torch, and the CUDA code) gives the leading component -0 (every product and error
    term is a signed zero, ``-(+0)`` is -0 and ``-0 + -0`` stays -0); the C++ library
    gives +0. The element is rejected by the fast-path check (zero result), so no
    result changes; an exact zero of ``fma(-a, b, c)`` negated inside an accepted
    element would change the sign of a zero component."""
    cpp = native._load(torch.float32, 3)
    x = torch.tensor([[-0.0, -0.0, -0.0]])
    r = native._call(cpp, "mul", [x, torch.tensor([[0.0]])], (1,), 3)
    assert not bool(r.ok[0])
    assert math.copysign(1.0, float(r.out[0, 0])) == -1.0


def test_cross_device_comparison_ignores_nan_payloads_only():
    """The device tests compare CUDA results with the CPU's. A NaN's bits depend on the
    device that made it: float32 0/0 is 0xFFC00000 on x86 and 0x7FFFFFFF (documented)
    on NVIDIA GPUs, and float32 division by zero reaches the torch path's ``x_0 / y_0`` on both
    devices (the fused kernels leave it to the torch path). The CPU's NaNs replaced by
    CUDA's canonical NaN must pass the cross-device comparison, which must still see a
    flipped zero sign, one ulp, and a NaN against a number; bit for bit (the same-device
    comparison) they differ."""
    x, y = _edge_operands(torch.float32, 3)
    q = arith.div(x, y)
    nan = torch.isnan(q)
    assert bool(nan.any())
    here = int(q[nan][0].view(torch.int32)) & 0xFFFFFFFF  # 0xFFC00000 on x86
    canonical = torch.tensor(0x7FFFFFFF if here != 0x7FFFFFFF else 0x7FC00000, dtype=torch.int32).view(torch.float32)
    on_cuda = torch.where(nan, canonical, q)
    assert _mismatch(on_cuda, q) is not None  # the bit-for-bit check fails on NaN payloads alone
    assert _mismatch(on_cuda, q, any_nan=True) is None
    finite = torch.isfinite(q).all(-1).nonzero()[0, 0]
    for change in (lambda t: t.neg(), lambda t: torch.nextafter(t, torch.full_like(t, math.inf)), lambda t: t * math.nan):
        other = q.clone()
        other[finite, -1] = change(other[finite, -1])
        if bool(other[finite, -1].view(torch.int32) != q[finite, -1].view(torch.int32)):
            assert _mismatch(other, q, any_nan=True) is not None
    other = q.clone()
    other[torch.isnan(other)] = 0.0
    assert _mismatch(other, q, any_nan=True) is not None


_SHIM_CHECK = r"""
extern "C" void shim_f32(long long n, const float* a, const float* b, const float* c, float* out) {
  for (long long i = 0; i < n; ++i) {
    out[4 * i] = __fmul_rn(a[i], b[i]); out[4 * i + 1] = __fdiv_rn(a[i], b[i]);
    out[4 * i + 2] = __fsqrt_rn(a[i]); out[4 * i + 3] = __fmaf_rn(a[i], b[i], c[i]);
  }
}
extern "C" void shim_f64(long long n, const double* a, const double* b, const double* c, double* out) {
  for (long long i = 0; i < n; ++i) {
    out[4 * i] = __dmul_rn(a[i], b[i]); out[4 * i + 1] = __ddiv_rn(a[i], b[i]);
    out[4 * i + 2] = __dsqrt_rn(a[i]); out[4 * i + 3] = __fma_rn(a[i], b[i], c[i]);
  }
}
"""


@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_shim_intrinsics_round_once_to_nearest(dtype, host_dir):
    """The host shim's ``__fmul_rn``/``__fdiv_rn``/``__fsqrt_rn``/``__fmaf_rn`` (and the
    double ones) are IEEE round-to-nearest operations of their own format, subnormal
    results included (CUDA's documented semantics; jiterator compiles with NVRTC's
    default ``--ftz=false``): against torch's CPU operations and, for the FMA, the
    exact value rounded once (Fractions). Bit-pattern operands over all exponents, a
    quarter of them subnormal, a quarter with products next to the normal range."""
    so = host_dir / f"shim_check_{dtype}.so"
    cpp = so.with_suffix(".cpp")
    cpp.write_text(_SHIM + _SHIM_CHECK)
    cxx = native._compiler()
    assert cxx is not None
    flags = ["-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off"]
    proc = subprocess.run([cxx, *flags, str(cpp), "-o", str(so)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fn = getattr(ctypes.CDLL(str(so)), "shim_f32" if dtype == torch.float32 else "shim_f64")
    gen = torch.Generator().manual_seed(7)
    ints = INTS[dtype]
    n = 4096
    bits = 8 * dtype.itemsize
    a, b, c = (torch.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1, (n,), generator=gen, dtype=ints).view(dtype) for _ in range(3))
    tiny = torch.finfo(dtype).tiny
    a[: n // 4] = a[: n // 4].abs() * 0.5 * tiny / (a[: n // 4].abs() + 1)  # subnormal operands
    b[n // 4 : n // 2] = torch.where(b[n // 4 : n // 2].abs() > 1, b[n // 4 : n // 2], 1.0)
    near = tiny * (1.0 + torch.rand(n // 4, generator=gen, dtype=torch.float64).to(dtype))
    a[n // 4 : n // 2] = near / b[n // 4 : n // 2].abs()  # products next to the normal range
    out = torch.empty(n, 4, dtype=dtype)
    ptr = ctypes.c_void_p
    fn(ctypes.c_longlong(n), ptr(a.data_ptr()), ptr(b.data_ptr()), ptr(c.data_ptr()), ptr(out.data_ptr()))
    # NaN payloads are no part of the IEEE semantics (nor the same on the device)
    _assert_same_bits(out[:, 0], a * b, "mul", any_nan=True)
    _assert_same_bits(out[:, 1], a / b, "div", any_nan=True)
    _assert_same_bits(out[:, 2], sqrt_rn(a), "sqrt", any_nan=True)  # torch's CPU sqrt is not correctly rounded
    from fractions import Fraction

    finite = torch.isfinite(a * b + c) & torch.isfinite(a) & torch.isfinite(b) & torch.isfinite(c)
    for i in finite.nonzero()[:512, 0].tolist():
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        want = torch.tensor(float(exact) if dtype == torch.float64 else _round_f32(exact), dtype=dtype)
        _assert_same_bits(out[i, 3], want, f"fma at {i}")


@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_host_build_cuda_fused_multiply_add_kernel(dtype, host_dir):
    """eft's one-line jiterator kernel (``fused_addcmul`` on CUDA, every FMA of the torch
    networks there), built for the host against the shim: ``c + value * a * b`` rounded
    once, the same bits as the CPU's measured fused ``addcmul`` for value = +1 and -1."""
    from hypermc.mcf import eft

    if not eft.has_fused_addcmul("cpu", dtype):
        pytest.skip("this torch build's CPU addcmul is not fused: no CPU reference")
    ctype = "float" if dtype == torch.float32 else "double"
    wrapper = (
        f'extern "C" void run(long long n, const {ctype}* c, const {ctype}* a, const {ctype}* b, double value, {ctype}* out) {{\n'
        "  for (long long i = 0; i < n; ++i) out[i] = hypermc_addcmul<" + ctype + ">(c[i], a[i], b[i], value);\n}\n"
    )
    cpp = host_dir / f"addcmul_{ctype}.cpp"
    cpp.write_text(_SHIM + eft._CUDA_ADDCMUL + wrapper)
    so = cpp.with_suffix(".so")
    cxx = native._compiler()
    assert cxx is not None
    flags = ["-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off"]
    proc = subprocess.run([cxx, *flags, str(cpp), "-o", str(so)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = ctypes.CDLL(str(so)).run
    x, y = _edge_operands(dtype, 2)
    a, b = x[:, 0].contiguous(), y[:, 0].contiguous()
    p = a * b
    ptr = ctypes.c_void_p
    for value, c in ((1.0, -p), (-1.0, p), (1.0, x[:, 1].contiguous())):
        out = torch.empty_like(a)
        n = ctypes.c_longlong(a.numel())
        run(n, ptr(c.data_ptr()), ptr(a.data_ptr()), ptr(b.data_ptr()), ctypes.c_double(value), ptr(out.data_ptr()))
        _assert_same_bits(out, eft.fused_addcmul(c, a, b, value=value), f"value {value}")


def _round_f32(v) -> float:
    """The float32 nearest to the rational ``v`` (ties to even), as a Python float."""
    d = float(v)  # nearest double; a double then rounded to float32 may round twice
    f = torch.tensor(d, dtype=torch.float32)
    lo = torch.nextafter(f, torch.tensor(-math.inf))
    hi = torch.nextafter(f, torch.tensor(math.inf))
    from fractions import Fraction

    cands = [t for t in (lo, f, hi) if torch.isfinite(t)]
    best = min(cands, key=lambda t: (abs(Fraction(float(t)) - v), int(t.view(torch.int32)) & 1))
    return float(best)


@needs_compiler
def test_host_build_broadcasting_and_layouts(host_dir):
    """Broadcast, strided and planar operands and empty tensors go through the kernels'
    TensorIterator-style views unchanged (here the host launcher broadcasts)."""
    nc = 3
    backend = _host_backend("f64", nc, "arith", host_dir)
    gen = torch.Generator().manual_seed(5)
    base = _torch_kernels(
        arith.add,
        torch.randn(6, 5, nc, generator=gen, dtype=torch.float64),
        torch.randn(6, 5, nc, generator=gen, dtype=torch.float64) * 2.0**-40,
    )
    planar = base.movedim(-1, 0).contiguous().movedim(0, -1)
    cases = [
        (base, base.flip(0)),
        (planar, base),
        (base[:, :4:2], planar[:, 1::2]),
        (base[:1], planar),
        (planar, base[:, :1]),
        (base[0, 0], planar),
        (base[:0], base[:0]),
    ]
    with pytest.MonkeyPatch.context() as mp:
        _install(mp, backend, torch.float64)
        for x, y in cases:
            for op, f in OPS.items():
                assert _same_bits(f(x, y), _torch_kernels(f, x, y)), (op, tuple(x.shape), tuple(y.shape))


@needs_compiler
@pytest.mark.parametrize("config", [c for c in native_cuda.KERNELS if c[2] == "arith"], ids=str)
def test_host_build_sum_tree_same_bits(config, host_dir):
    """reduce.sum through the CUDA sum kernels (one launch per tree level, the finish),
    compiled for the host: the torch tree's bits for one sum, rows, columns, several dims,
    odd and even counts, cancellation, and inf/NaN (finished by the torch path); nc = 4
    has no such kernels (a later level would need ten inputs) and takes the torch tree."""
    name, nc, _ = config
    dtype = DTYPES[name]
    backend = _host_backend(name, nc, "arith", host_dir)
    gen = torch.Generator().manual_seed(nc)
    x = hm_components(torch.randn(7, 6, 5, generator=gen, dtype=torch.float64) * 1e3, nc, dtype)
    x[1] = -x[0] * (1 + 2.0**-40)  # cancellation
    bad = x.clone()
    bad[2, 3, 1] = math.inf
    bad[4, 0, 0] = math.nan
    cases = [(x, None), (x, -1), (x, 0), (x, (0, 2)), (x[:1, :1, :1], None), (x[:, :1], 1), (bad, -1), (bad, None)]
    with pytest.MonkeyPatch.context() as mp:
        _install(mp, backend, dtype)
        fused = native.tree_sum(x.reshape(-1, nc), 0, x[..., 0].numel())
        assert (fused is None) == (nc == 4)
        for t, dim in cases:
            got = reduce.sum(t, dim)
            assert _same_bits(got, _torch_kernels(reduce.sum, t, dim)), (dim, tuple(t.shape))
    if nc < 4:
        assert {f"hypermc_sum_{k}_{name}_{nc}" for k in ("first", "level", "finish")} <= _launched


def hm_components(values: torch.Tensor, nc: int, dtype: torch.dtype) -> torch.Tensor:
    """The components of the nearest MC numbers of ``values`` (float64) times ``1 + 2^-40``
    (full expansions), of component dtype ``dtype``."""
    return arith.mul_float(arith.from_engine(values, dtype, nc), torch.full(values.shape, 1 + 2.0**-40, dtype=dtype))


# ----------------------------------------------------------------- on the device
#
# Each device test is bounded: a few hypothesis examples without shrinking (a failure is
# reported with its first example and the blob that replays it; shrinking an example of
# 40,000-75,000 launched torch kernels on the device took minutes) plus the fixed edge
# operands. Measured on the CPU (torch dispatches counted per example of the same-bits
# test: all ops, fused and torch paths): nc = 3 about 41,000 kernels and 505 host syncs,
# nc = 4 about 75,000 and 645, so an example costs seconds of launch latency on a GPU.

CUDA_CONFIGS = [pytest.param(c, marks=pytest.mark.cuda, id=str(c)) for c in native_cuda.KERNELS]
CUDA_ARITH = [c for c in CUDA_CONFIGS if c.values[0][2] == "arith"]


#: ops with fused kernels on both devices: their results are the CPU's too (the torch
#: paths of the others need not be: float32 nc = 2 div takes a float64 engine whose
#: conversions differ in NaN bits between the devices)
def _on_both(nc: int) -> set[str]:
    return {"add", "sub", "add_float", "mul", "mul_float"} | ({"div", "sqrt"} if nc > 2 else set())


def _device_examples(n: int) -> settings:
    """At most ``n`` hypothesis examples, explicit and generated, no shrinking."""
    limit = min(settings.default.max_examples, n)
    return settings(max_examples=limit, phases=(Phase.explicit, Phase.generate), deadline=None, print_blob=True)


def _check_on_device(name: str, nc: int, cases: dict[str, tuple], device: str = "cuda") -> None:
    """Each ``op -> (function, CPU operands)`` on CUDA: the torch networks' bits on the
    device, and the CPU's values (NaN bits aside: :func:`_mismatch`) where both devices
    have fused kernels."""
    for op, (f, args) in cases.items():
        dev = tuple(a.to(device) for a in args)
        got = f(*dev)
        assert got.device.type == device, op
        _assert_same_bits(got, _torch_kernels(f, *dev), f"{op}: fused kernels vs the torch networks on {device}")
        if op in _on_both(nc):
            _assert_same_bits(got, f(*args), f"{op}: {device} vs CPU", any_nan=True)


@needs_compiler
def test_device_check_runs_on_the_cpu():
    """The device tests' comparison helper, run with the CPU as its device (the C++
    kernels): it passes there, so a device failure is the device's."""
    _check_on_device("f32", 3, _edge_cases("f32", 3), device="cpu")


@pytest.mark.parametrize("config", CUDA_CONFIGS)
def test_cuda_kernels_in_use(config):
    name, nc, part = config
    assert native.status(DTYPES[name], nc, part, device="cuda") == "in use"


@pytest.mark.parametrize("config", CUDA_ARITH)
def test_cuda_edges_same_bits(config):
    """The fixed edge operands of the host-build test on the device (zeros with 0/0,
    subnormal tails, overflow, cancellation)."""
    name, nc, _ = config
    _check_on_device(name, nc, _edge_cases(name, nc))


@pytest.mark.parametrize("config", CUDA_ARITH)
@_device_examples(3)
@given(data=st.data())
def test_cuda_same_bits_as_the_torch_networks(config, data):
    name, nc, _ = config
    dtype = DTYPES[name]
    x, y = _operands(data, dtype, nc)
    cases: dict[str, tuple] = {op: (f, (x, y)) for op, f in OPS.items()}
    cases["broadcast add"] = (arith.add, (x[:1], y))
    if nc > 2:
        cases["sqrt"] = (arith.sqrt, (_in_sqrt_range(data, dtype, nc),))
    _check_on_device(name, nc, cases)


def _elementary_cases(x: torch.Tensor) -> dict[str, tuple]:
    """``op -> (function, argument)`` of every elementary function on ``x``, scaled as
    native's self-check scales it: moderate, with some arguments that over- or underflow
    or leave the domain."""
    ax = x.abs()
    return {
        "exp": (elementary.exp, x * 2.0**-4),
        "log": (elementary.log, ax),
        "expm1": (elementary.expm1, x * 2.0**-4),
        "log1p": (elementary.log1p, x * 2.0**-8),
        "sinh": (elementary.sinh, x * 2.0**-4),
        "cosh": (elementary.cosh, x * 2.0**-4),
        "tanh": (elementary.tanh, x * 2.0**-6),
        "asinh": (elementary.asinh, x),
        "acosh": (elementary.acosh, ax),
        "atanh": (elementary.atanh, x * 2.0**-7),
        "sin": (elementary.sin, x),
        "cos": (elementary.cos, x),
        "tan": (elementary.tan, x),
    }


@pytest.mark.cuda
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_cuda_elementary_same_bits(nc):
    """Every function of the float64 elementary library on CUDA: the CUDA kernels give the
    torch networks' bits on the device (arguments scaled as native's self-check scales
    them: moderate, with some that over- or underflow or leave the domain)."""
    gen = torch.Generator().manual_seed(13)
    x = arith.add(
        torch.randn(1025, nc, generator=gen, dtype=torch.float64) * 40, torch.randn(1025, nc, generator=gen, dtype=torch.float64) * 2.0**-60
    )
    x = x.cuda()
    for op, (f, arg) in _elementary_cases(x).items():
        got = f(arg)
        assert got.is_cuda, op
        _assert_same_bits(got, _torch_kernels(f, arg), f"{op}: CUDA kernels vs the torch networks on CUDA")
    # exp calls no torch function of its own: the CPU's values too (log starts its Newton
    # iteration from the device's log1p). The CPU's torch networks: the same bits as its
    # C++ library (tests/mcf/test_native.py), without building that library here, which
    # takes minutes at nc = 4 on a fresh machine.
    _assert_same_bits(elementary.exp(x), _torch_kernels(elementary.exp, x.cpu()), "exp: CUDA vs CPU", any_nan=True)


@pytest.mark.cuda
@pytest.mark.parametrize("nc", [3, 4])
def test_cuda_float32_elementary_same_bits(nc):
    """float32 nc = 3, 4 exp, expm1, sinh, cosh, tanh, sin, cos and tan on CUDA: one kernel
    each (the conversions to and from float64 inside) gives the torch networks' bits on the
    device, with float32 overflow (exp beyond 88.7), underflow and the special values."""
    gen = torch.Generator().manual_seed(17)
    x = arith.add(torch.randn(1025, nc, generator=gen) * 40, torch.randn(1025, nc, generator=gen) * 2.0**-30)
    special = torch.zeros(6, nc)
    special[:, 0] = torch.tensor([0.0, -0.0, math.inf, math.nan, 88.8, -104.0])
    x = torch.cat([x, special * 16]).cuda()  # 16: the scale of exp's argument below undone
    cases = _elementary_cases(x)
    for op in ("exp", "expm1", "sinh", "cosh", "tanh", "sin", "cos", "tan"):
        f, arg = cases[op]
        res = getattr(native, op)(arg)
        assert res is not None and res.out.dtype == torch.float32 and res.out.is_cuda, op
        _assert_same_bits(f(arg), _torch_kernels(f, arg), f"float32 nc={nc} {op}: CUDA kernels vs the torch networks on CUDA")
