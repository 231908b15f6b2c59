"""The CUDA kernels (:mod:`hypermc.mcf.native_cuda`): translation, host build, device.

Without a GPU the kernels' CUDA code is still tested: it is compiled as C++ against a
host shim of the CUDA intrinsics (``__dmul_rn`` as a plain product under
``-ffp-contract=off``, ``__fma_rn`` as ``std::fma``, the bit casts by ``memcpy``) and run
through :class:`native_cuda.Backend` with a host launcher, so the translation, the
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
from hypothesis import given
from hypothesis import strategies as st

from hypermc.mcf import arith, elementary, native, native_cuda, native_source
from tests.mcf.test_arith import _cap
from tests.mcf.test_native import OPS, _same_bits, _torch_kernels, needs_compiler
from tests.oracle import expansions

DTYPES = {"f32": torch.float32, "f64": torch.float64}
CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double}

_SHIM = r"""
#include <cmath>
#include <math.h>
#include <cstring>
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


def _host_backend(name: str, nc: int, part: str, tmp: Path) -> native_cuda.Backend:
    """A Backend whose kernels are the CUDA code compiled for the host (one library)."""
    key = (name, nc, part)
    if key in _built:
        return _built[key]
    kernels = native_cuda.source(name, nc, part)
    ctype = "float" if name == "f32" else "double"
    # one copy of the helpers and tables, then every entry function and its wrapper
    lines = [_strip_prelude(k.code).splitlines() for k in kernels.values()]
    tables = sorted({line for code in lines for line in code if line.startswith("__device__ const")})
    entries = ["\n".join(line for line in code if not line.startswith("__device__ const")) for code in lines]
    src = (
        _SHIM
        + native_cuda._PRELUDE
        + "\n".join(tables)
        + "\n"
        + "\n".join(entries)
        + "\n"
        + "".join(_wrapper(k, ctype) for k in kernels.values())
    )
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


# ----------------------------------------------------------------- translation


@pytest.mark.parametrize("config", native_cuda.KERNELS, ids=str)
def test_every_product_quotient_and_call_is_an_uncontractible_intrinsic(config):
    """Each C++ product became ``mc_mul`` (``__dmul_rn``/``__fmul_rn``), each quotient of
    the component type ``mc_div``, each library call its ``mc_`` counterpart: nothing that
    NVRTC could contract into an FMA or replace by an approximation is left."""
    for k in native_cuda.source(*config).values():
        entry = k.code.split(native_cuda.ENTRY)[-1]
        assert "std::" not in entry and " * " not in entry and "fmaf(" not in entry
        assert all("/" not in line or "mc_int<T>" in line for line in entry.splitlines() if not line.lstrip().startswith("//"))
        assert k.outputs == int(re.findall(r"T& out(\d+)", entry)[-1]) + 2  # components + ok


def test_translation_counts_match_the_cpp_source():
    """The number of products in the traced C++ equals the ``mc_mul`` calls of the CUDA form."""
    body = native_source._mul_body(4, 4)
    cpp_products = sum(len(native_cuda._PRODUCT.findall(line)) for line in body)
    cuda = native_cuda.source("f64", 4)[("mul", 4)].code.split(native_cuda.ENTRY)[-1]
    assert cpp_products > 0 and cuda.count("mc_mul(") == cpp_products


def test_untranslatable_statement_is_refused():
    with pytest.raises(AssertionError, match="untranslated statement"):
        native_cuda._translate("T v1 = foo(v0) * bar(v0);")


def test_source_refuses_unknown_configurations():
    with pytest.raises(ValueError, match=r"source: no CUDA kernels for \('f64', 4, 'elementary'\)"):
        native_cuda.source("f64", 4, "elementary")


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
        if nc > 2:
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


# ----------------------------------------------------------------- on the device

CUDA_CONFIGS = [pytest.param(c, marks=pytest.mark.cuda, id=str(c)) for c in native_cuda.KERNELS]


@pytest.mark.parametrize("config", CUDA_CONFIGS)
def test_cuda_kernels_in_use(config):
    name, nc, part = config
    assert native.status(DTYPES[name], nc, part, device="cuda") == "in use"


@pytest.mark.parametrize("config", [c for c in CUDA_CONFIGS if c.values[0][2] == "arith"])
@_cap(8)
@given(data=st.data())
def test_cuda_same_bits_as_the_torch_networks(config, data):
    name, nc, _ = config
    dtype = DTYPES[name]
    x, y = (t.cuda() for t in _operands(data, dtype, nc))
    # ops with fused kernels on both devices give the CPU's bits too (the torch paths of
    # the others need not: torch's CUDA and CPU kernels differ, e.g. float32 nc = 2 div)
    both = {"add", "sub", "add_float", "mul", "mul_float"} | ({"div"} if nc > 2 else set())
    for op, f in OPS.items():
        got = f(x, y)
        assert got.is_cuda and _same_bits(got, _torch_kernels(f, x, y)), op
        if op in both:
            assert _same_bits(got.cpu(), f(x.cpu(), y.cpu())), op
    assert _same_bits(arith.add(x[:1], y), _torch_kernels(arith.add, x[:1], y))  # broadcast
    if nc > 2:
        r = _in_sqrt_range(data, dtype, nc).cuda()
        assert _same_bits(arith.sqrt(r), _torch_kernels(arith.sqrt, r))


@pytest.mark.cuda
@pytest.mark.parametrize("nc", [2, 3])
def test_cuda_exp_log_same_bits(nc):
    gen = torch.Generator().manual_seed(13)
    x = arith.add(
        torch.randn(4097, nc, generator=gen, dtype=torch.float64) * 40, torch.randn(4097, nc, generator=gen, dtype=torch.float64) * 2.0**-60
    )
    x = x.cuda()
    for f, arg in ((elementary.exp, x), (elementary.log, x.abs())):
        got = f(arg)
        assert got.is_cuda and _same_bits(got, _torch_kernels(f, arg)), f.__name__
    # exp calls no torch function of its own: the CPU's bits too (log starts its Newton
    # iteration from the device's log1p)
    assert _same_bits(elementary.exp(x).cpu(), elementary.exp(x.cpu()))
