"""Fused CUDA kernels for nc = 2, 3, 4: the CPU kernels' networks, compiled by jiterator.

Why. On a GPU the torch networks of :mod:`hypermc.mcf.fixed` and :mod:`hypermc.mcf.arith`
launch 20-700 elementwise kernels per MC op, each a pass over memory, and the float64
exp/log paths thousands: measured on an H100 (4096 x 4096 float64, nc = 3, before this
module) add 286x, mul 684x, div 1,901x, exp 12,585x the native op. The element-level
work of one MC op is a few hundred flops, which a GPU does at memory speed when it is
one kernel.

How. :mod:`hypermc.mcf.native.source` traces those networks into straight-line
statements, one per torch rounding, in a small statement language (``mc_mul``,
``mc_div``, ``mc_fma``, ``mc_sqrt``, ``mc_select<T>``, ..., the operand components
``X(k)``, the outputs ``OUT(k)`` and the flag ``OK``) that each backend defines in its
prelude; the CPU library compiles them as C++. Here the same statements, unchanged, are
the body of a CUDA device function (:data:`_PRELUDE` gives the names their CUDA
meaning, a macro per operand and output maps ``X(k)`` to the parameter ``xk``), compiled
at first use by PyTorch's jiterator (NVRTC, an elementwise kernel over ``TensorIterator``: broadcasting
and strided operands for free). One kernel per op variant; the component ``k`` of an
operand is the strided view ``t[..., k]``; the outputs are the components and an
``ok`` flag, stacked into ``(*shape, nc)``. No CUDA toolkit is needed beyond what a
CUDA build of PyTorch ships (NVRTC); the compiled kernels are cached by PyTorch
(``~/.cache/torch/kernels``).

Exactness. jiterator compiles with NVRTC's defaults (its options are only the C++
standard, the GPU architecture, ``-default-device`` and ``-DNDEBUG`` or ``-lineinfo``:
``aten/src/ATen/native/cuda/jit_utils.cpp``), that is ``--ftz=false`` (subnormals kept),
``--prec-div=true``, ``--prec-sqrt=true`` and ``--fmad=true``, under which ``a * b + c``
may be contracted into a fused multiply-add: an error-free transformation that assumes two
roundings would be silently wrong. So every product is ``__dmul_rn``/``__fmul_rn``,
every quotient ``__ddiv_rn``/``__fdiv_rn``, every square root ``__dsqrt_rn``/
``__fsqrt_rn`` and every fused multiply-add of the networks an explicit
``__fma_rn``/``__fmaf_rn``: CUDA guarantees that these intrinsics are IEEE
round-to-nearest operations and are never merged with another operation. Additions and
subtractions are plain (a contraction needs a product), and nothing is reassociated
(NVRTC does not without ``-use_fast_math``). The statement language has no infix product
or quotient of floats (:class:`hypermc.mcf.native.source._Net` refuses one), so there is
nothing NVRTC could contract. :mod:`hypermc.mcf.native` then
runs the same bit-for-bit self-check against the torch kernels on the device as for the
CPU library before any kernel is used; a mismatch disables the kernels with one warning
naming the kernel.

Scope. CUDA tensors, float32/float64, nc = 2, 3, 4 (add, sub, add_float, mul,
mul_float; div, and sqrt for float64 nc = 2, 3, 4 and float32 nc = 3, 4, and at nc = 3, 4 the general add and mul that
recompute what the fixed networks' checks reject), and the float64 elementary library of the CPU
(:func:`hypermc.mcf.native.source.elementary_kernels`: exp, log, expm1, log1p, sinh/cosh,
tanh, asinh, acosh, atanh, sin/cos, tan) for nc = 2, 3, 4; the same
eligibility as the CPU library otherwise (no autograd on the component tensors, not
while ``torch.compile`` traces). :func:`source` gives the code of a kernel, so it can be
read, and compiled on a machine without a GPU (the tests build it as C++ against a
host shim of the intrinsics and compare bits with the torch kernels and, kernel by
kernel, with the C++ library). A NaN's bits are the device's: float32 0/0 is 0xFFC00000
on x86 and, per NVIDIA's documentation, the canonical NaN 0x7FFFFFFF on the GPU
(``benchmarks/device_facts.py`` prints both), so CUDA and CPU results are compared with
NaN payloads ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from ..eft import broadcast_shapes
from . import source as ns

__all__ = ["available", "source", "Kernel", "Backend", "KERNELS", "jiterator_launch"]

#: CUDA device helpers, the counterparts of native.source's C++ prelude (same names with
#: an ``mc_`` prefix, so nothing collides with jiterator's own definitions).
_PRELUDE = r"""// hypermc/mcf/native/cuda.py: the CUDA form of hypermc/mcf/native/source.py's kernels
template <class T> struct mc_bits;
template <> struct mc_bits<float> { typedef unsigned int U; typedef int I; static constexpr int P = 24, BIAS = 127, MAXEXP = 128; };
template <> struct mc_bits<double> {
  typedef unsigned long long U; typedef long long I; static constexpr int P = 53, BIAS = 1023, MAXEXP = 1024;
};
template <class T> using mc_int = typename mc_bits<T>::I;
template <class T> using mc_uint = typename mc_bits<T>::U;
__device__ inline unsigned int mc_to_bits(float x) { return __float_as_uint(x); }
__device__ inline unsigned long long mc_to_bits(double x) { return (unsigned long long)__double_as_longlong(x); }
__device__ inline float mc_from_bits(unsigned int u) { return __uint_as_float(u); }
__device__ inline double mc_from_bits(unsigned long long u) { return __longlong_as_double((long long)u); }
// IEEE round-to-nearest operations that the compiler never contracts or merges.
__device__ inline float mc_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mc_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float mc_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double mc_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float mc_sqrt(float a) { return __fsqrt_rn(a); }
__device__ inline double mc_sqrt(double a) { return __dsqrt_rn(a); }
__device__ inline float mc_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ inline double mc_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ inline float mc_fabs(float a) { return fabsf(a); }
__device__ inline double mc_fabs(double a) { return fabs(a); }
__device__ inline float mc_rint(float a) { return rintf(a); }
__device__ inline double mc_rint(double a) { return rint(a); }
// std::max / std::min (the first operand where they compare equal or unordered)
template <class T> __device__ inline T mc_max(T a, T b) { return (a < b) ? b : a; }
template <class T> __device__ inline T mc_min(T a, T b) { return (b < a) ? b : a; }
template <class T> __device__ inline mc_int<T> mc_imax(mc_int<T> a, mc_int<T> b) { return (a < b) ? b : a; }
template <class T> __device__ inline mc_int<T> mc_imin(mc_int<T> a, mc_int<T> b) { return (b < a) ? b : a; }
template <class T> __device__ inline mc_int<T> mc_shl(mc_int<T> k, int s) { return (mc_int<T>)((mc_uint<T>)k << s); }
template <class T> __device__ inline T mc_bits_as(mc_int<T> k) { return mc_from_bits((mc_uint<T>)k); }
template <class T> __device__ inline mc_int<T> mc_iclamp(mc_int<T> k, mc_int<T> lo, mc_int<T> hi) {
  const mc_int<T> a = k < lo ? lo : k;
  return a > hi ? hi : a;
}
__device__ inline float mc_copysign(float a, float b) { return copysignf(a, b); }
__device__ inline double mc_copysign(double a, double b) { return copysign(a, b); }
// std::numeric_limits<T>::max() / min(); CANCEL = 1 / (64 u); 1.5 2^(P-1) for toint
template <class T> __device__ inline T mc_max_value();
template <> __device__ inline float mc_max_value<float>() { return 0x1.fffffep+127f; }
template <> __device__ inline double mc_max_value<double>() { return 0x1.fffffffffffffp+1023; }
template <class T> __device__ inline T mc_min_normal();
template <> __device__ inline float mc_min_normal<float>() { return 0x1p-126f; }
template <> __device__ inline double mc_min_normal<double>() { return 0x1p-1022; }
template <class T> __device__ inline int mc_max_exponent() { return mc_bits<T>::MAXEXP; }
template <class T> __device__ inline T mc_cancel();
template <> __device__ inline float mc_cancel<float>() { return 0x1p+18f; }
template <> __device__ inline double mc_cancel<double>() { return 0x1p+47; }
template <class T> __device__ inline T mc_magic();
template <> __device__ inline float mc_magic<float>() { return 0x1.8p+23f; }
template <> __device__ inline double mc_magic<double>() { return 0x1.8p+52; }
// Biased exponent field of x.
template <class T> __device__ inline mc_int<T> mc_field(T x) {
  return (mc_int<T>)((mc_to_bits(x) >> (mc_bits<T>::P - 1)) & (mc_uint<T>)(2 * mc_bits<T>::BIAS + 1));
}
// The sign bit of x.
template <class T> __device__ inline bool mc_sign_bit(T x) { return (mc_to_bits(x) >> (8 * sizeof(T) - 1)) != 0; }
// Whether x is a normal number (not zero, subnormal, inf or NaN).
template <class T> __device__ inline bool mc_normal(T x) {
  mc_int<T> e = mc_field(x);
  return (e != 0) & (e != 2 * mc_bits<T>::BIAS + 1);
}
// torch.frexp(x).exponent for normal x; 0 otherwise.
template <class T> __device__ inline mc_int<T> mc_expo(T x) {
  return (mc_int<T>)mc_normal(x) * (mc_field(x) - (mc_bits<T>::BIAS - 1));
}
// x where keep, +0 elsewhere.
template <class T> __device__ inline T mc_keep_if(bool keep, T x) { return keep ? x : T(0); }
// c ? a : b (torch.where).
template <class T> __device__ inline T mc_select(bool c, T a, T b) { return c ? a : b; }
// (I)k for an integer-valued k with |k| < 2^(P - 2): k + 1.5 2^(P-1) holds k in its low bits.
template <class T> __device__ inline mc_int<T> mc_toint(T k) {
  T t = k + mc_magic<T>();
  return (mc_int<T>)(mc_to_bits(t) - mc_to_bits(mc_magic<T>()));
}
// (T)i for |i| < 2^(P - 2), the inverse of mc_toint.
template <class T> __device__ inline T mc_tofloat(mc_int<T> i) {
  mc_uint<T> um = mc_to_bits(mc_magic<T>()) + (mc_uint<T>)i;
  return mc_from_bits(um) - mc_magic<T>();
}
// torch.frexp(x).mantissa for normal x: x with its exponent set to -1.
template <class T> __device__ inline T mc_mant(T x) {
  const mc_uint<T> f = (mc_uint<T>)(2 * mc_bits<T>::BIAS + 1) << (mc_bits<T>::P - 1);
  mc_uint<T> u = mc_to_bits(x);
  u = (u & ~f) | ((mc_uint<T>)(mc_bits<T>::BIAS - 1) << (mc_bits<T>::P - 1));
  return mc_from_bits(u);
}
// x rounded to the nearest float32, held in T (float64 kernels of float32 results).
template <class T> __device__ inline T mc_round_f32(T x);
template <> __device__ inline float mc_round_f32<float>(float x) { return x; }
template <> __device__ inline double mc_round_f32<double>(double x) { return (double)__double2float_rn(x); }
// 2^k for |k| <= BIAS - 1.
template <class T> __device__ inline T mc_pow2(mc_int<T> k) {
  return mc_from_bits((mc_uint<T>)(k + mc_bits<T>::BIAS) << (mc_bits<T>::P - 1));
}
"""


class Kernel(NamedTuple):
    """One jiterator kernel: its name, code, inputs per operand, extra scalar parameters
    and number of outputs (components and ``ok``). An op with more outputs than
    jiterator takes (:data:`MAX_OUTPUTS`) is several kernels over the same inputs, each
    computing the whole body and writing a slice of the components and ``ok``: the first
    kernel, and the others in ``rest``.

    Example:
        >>> k = source("f64", 2)[("mul", 1)]  # double-word times a plain float
        >>> k.name, k.inputs, k.extras, k.outputs, k.rest
        ('hypermc_mul_f64_2_y1', (2, 1), (), 3, ())
        >>> k = source("f64", 4, "elementary")[("sin_cos", 0)]  # 8 components and ok
        >>> [(p.name, p.outputs) for p in (k, *k.rest)]
        [('hypermc_sin_cos_f64_4', 8), ('hypermc_sin_cos_f64_4_o7', 2)]
    """

    name: str
    code: str
    inputs: tuple[int, ...]
    extras: tuple[str, ...]
    outputs: int
    rest: tuple[Kernel, ...] = ()

    @property
    def components(self) -> int:
        """The op's result components, over all its kernels (``ok`` not counted)."""
        return sum(p.outputs - 1 for p in (self, *self.rest))


#: Outputs (components and ``ok``) of one jiterator kernel at most: "This API only
#: supports up to 8 inputs and 8 outputs" (``torch.cuda.jiterator``).
MAX_OUTPUTS = 8
#: Inputs (operand components) of one jiterator kernel at most (the same limit).
MAX_INPUTS = 8


#: Statements above which an entry function is not inlined: jiterator's kernel calls it
#: for each of a thread's 8 elements in an unrolled loop, so an inlined exp/log body
#: (1,600-2,500 statements at nc = 3) would be compiled 8 times over.
INLINE_LIMIT = 400


def _function(name: str, inputs: dict[str, int], extras: list[str], nout: int, body: list[str], outs: range | None = None) -> str:
    """The entry function; ``outs``: the components it writes (default all; the others
    are locals that the compiler drops)."""
    outs = range(nout) if outs is None else outs
    params = [f"T {o}{k}" for o, n in inputs.items() for k in range(n)]
    params += [f"double {e}" for e in extras]
    params += [f"T& out{k}" for k in outs] + ["T& ok"]
    inline = "" if len(body) <= INLINE_LIMIT else "__noinline__ "
    head = f"template <typename T> __device__ {inline}void {name}({', '.join(params)}) {{"
    names = [o.upper() for o in inputs] + ["OUT", "OK"]
    guard = " || ".join(f"defined({m})" for m in names)  # a macro of another header: fail loudly, never reuse it
    lines = [f"#if {guard}", '#error "hypermc: an operand macro of the kernel is defined already"', "#endif"]
    lines += [f"#define {o.upper()}(k) {o}##k" for o in inputs] + ["#define OUT(k) out##k", "#define OK ok"]
    lines += [head, "  const T CANCEL = mc_cancel<T>();", "  (void)CANCEL;"]
    lines += [f"  T out{k};" for k in range(nout) if k not in outs]
    lines += ["  " + s for s in body]
    return "\n".join(lines + ["}", *(f"#undef {m}" for m in names)]) + "\n"


def _spec(name: str, nc: int) -> dict[tuple[str, int], tuple[list[str], dict[str, int], list[str], int, list[str]]]:
    """``(op, variant) -> (body, inputs, extras, nout, table declarations)`` of ``(name, nc)``;
    the variant is the number of components of the second operand (0: none or fixed)."""
    if name == "f64e":  # the float64 elementary library: native.source's one list of its kernels
        tables = ns._Tables()
        kernels = [(k, k.body) for k in ns.elementary_kernels(nc, tables)]  # traced before the tables are read
        decls = {d.split("[")[0].split()[-1]: "__device__ " + d for d in tables.decls}  # table name -> declaration

        def used(body: list[str]) -> list[str]:  # the tables a kernel reads (each kernel compiles alone)
            text = "\n".join(body)
            return [d for t, d in decls.items() if re.search(rf"\b{t}\b", text)]

        return {(k.op, 0): (body, k.inputs, [], k.nout, used(body)) for k, body in kernels}
    if nc == 2:
        spec: dict[tuple[str, int], tuple[list[str], dict[str, int], list[str], int, list[str]]] = {
            ("add", 1): (ns._add2_body(1), {"x": 2, "y": 1}, ["sign"], 2, []),
            ("add", 2): (ns._add2_body(2), {"x": 2, "y": 2}, ["sign"], 2, []),
            ("mul", 1): (ns._mul2_body(1), {"x": 2, "y": 1}, [], 2, []),
            ("mul", 2): (ns._mul2_body(2), {"x": 2, "y": 2}, [], 2, []),
            ("div", 0): (ns._div2_body(), {"x": 2, "y": 2}, [], 2, []),
        }
        if ns.has_sqrt(name, 2):
            spec[("sqrt", 0)] = (ns._sqrt2_body(), {"x": 2}, ["lo", "hi"], 2, [])
        return spec | _sum_spec(nc)
    return _sum_spec(nc) | {
        ("add", 1): (ns._add_body(nc, 1), {"x": nc, "y": 1}, ["sign"], nc, []),
        ("add", nc): (ns._add_body(nc, nc), {"x": nc, "y": nc}, ["sign"], nc, []),
        ("mul", 1): (ns._mul_body(nc, 1), {"x": nc, "y": 1}, [], nc, []),
        ("mul", nc): (ns._mul_body(nc, nc), {"x": nc, "y": nc}, [], nc, []),
        ("div", 0): (ns._div_body(nc), {"x": nc, "y": nc}, [], nc, []),
        ("sqrt", 0): (ns._sqrt_body(name, nc), {"x": nc}, ["lo", "hi"], nc, []),
        # the second passes over what add and mul reject (native.add / native.mul)
        ("add_general", nc): (ns._add_general_body(nc), {"x": nc, "y": nc}, ["sign"], nc, []),
        ("mul_general", 1): (ns._mul_general_body(nc, 1), {"x": nc, "y": 1}, [], nc, []),
        ("mul_general", nc): (ns._mul_general_body(nc, nc), {"x": nc, "y": nc}, [], nc, []),
    }


#: The nc with the sum tree's kernels (:func:`_sum_spec`).
SUM_NCS = tuple(nc for nc in ns.NCS if 2 * (nc + 1) <= MAX_INPUTS)


def _sum_spec(nc: int) -> dict[tuple[str, int], tuple[list[str], dict[str, int], list[str], int, list[str]]]:
    """The kernels of :func:`hypermc.mcf.reduce.sum`'s tree, one launch per level
    (:func:`hypermc.mcf.native.tree_sum`): the first level (``nc`` slots a half), the
    later ones (``nc + 1``) and the finish of the root's slots. None at nc = 4: a later
    level's ten operands exceed jiterator's eight inputs."""
    if nc not in SUM_NCS:
        return {}
    return {
        ("sum_first", 0): (ns._sum_level_body(nc, True), {"x": nc, "y": nc}, [], nc + 1, []),
        ("sum_level", 0): (ns._sum_level_body(nc, False), {"x": nc + 1, "y": nc + 1}, [], nc + 1, []),
        ("sum_finish", 0): (ns._sum_finish_body(nc), {"x": nc + 1}, [], nc, []),
    }


#: What precedes each kernel's entry function in its code.
ENTRY = "\ntemplate <typename T> __device__ "

#: (dtype name, nc, part) with CUDA kernels; the same set as the CPU library's.
KERNELS = [(name, nc, "arith") for name in ("f32", "f64") for nc in ns.NCS] + [("f64", nc, "elementary") for nc in ns.NCS]


def source(name: str, nc: int, part: str = "arith") -> dict[tuple[str, int], Kernel]:
    """The CUDA kernels of ``(name, nc, part)``: ``(op, variant) -> Kernel``.

    ``variant`` is the second operand's number of components for add/mul (1: ``x + b``
    with a plain ``b``), else 0. Each kernel's code is self-contained (helpers, tables,
    one ``template <typename T> __device__ void`` entry function in jiterator's
    by-reference form: inputs, extra scalars, then outputs).

    Example:
        >>> k = source("f64", 3)[("add", 3)]
        >>> k.name, k.inputs, k.extras, k.outputs
        ('hypermc_add_f64_3_y3', (3, 3), ('sign',), 4)
        >>> "__dmul_rn" in k.code and " * " not in k.code.split(ENTRY)[-1]
        True
    """
    if (name, nc, part) not in KERNELS:
        raise ValueError(f"source: no CUDA kernels for {(name, nc, part)!r}; expected one of {KERNELS}")
    spec = _spec("f64e" if part == "elementary" else name, nc)
    out = {}
    for (op, variant), (body, inputs, extras, nout, decls) in spec.items():
        kname = f"hypermc_{op}_{name}_{nc}" + (f"_y{variant}" if variant else "")
        parts = []
        for lo in range(0, nout, MAX_OUTPUTS - 1):  # each part: up to 7 components and ok
            outs = range(lo, min(nout, lo + MAX_OUTPUTS - 1))
            pname = kname + (f"_o{lo}" if lo else "")
            code = _PRELUDE + "\n".join(decls) + "\n" + _function(pname, inputs, extras, nout, body, outs)
            parts.append(Kernel(pname, code, tuple(inputs.values()), tuple(extras), len(outs) + 1))
        out[(op, variant)] = parts[0]._replace(rest=tuple(parts[1:]))
    return out


def available() -> str | None:
    """None when CUDA and jiterator are there, else the reason the CUDA kernels are not.

    Example:
        >>> available() is None or isinstance(available(), str)
        True
    """
    if not torch.cuda.is_available():
        return "CUDA is not available"
    if not hasattr(torch._C, "_cuda_jiterator_compile_and_launch_kernel"):
        return "this torch build has no jiterator (torch._C._cuda_jiterator_compile_and_launch_kernel)"
    return None


#: ``launch(kernel, input tensors, extra scalars by name) -> output tensors``
Launch = Callable[[Kernel, list[torch.Tensor], dict[str, float]], Sequence[torch.Tensor]]


def jiterator_launch(kernel: Kernel, tensors: list[torch.Tensor], kwargs: dict[str, float]) -> Sequence[torch.Tensor]:
    """Compile (first call; NVRTC, cached by PyTorch) and run ``kernel`` by jiterator.

    jiterator's Python wrapper (``torch.cuda.jiterator``) finds the entry function by a
    regular expression over the code; the kernel's name is known here, so this calls the
    binding under it directly.

    Example:
        >>> Backend("f64", 3).launch is jiterator_launch  # the default launcher
        True
    """
    out = torch._C._cuda_jiterator_compile_and_launch_kernel(kernel.code, kernel.name, True, kernel.outputs, tuple(tensors), kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class Backend:
    """The CUDA kernels of one ``(dtype, nc, part)``, compiled on first launch.

    :meth:`call` takes the arguments of :func:`hypermc.mcf.native._call` (which forwards
    to it for CUDA tensors and wraps its result in a :class:`~hypermc.mcf.native.Result`).
    ``launch`` replaces jiterator (the tests run the kernels compiled for the host).

    Example:
        >>> sorted(Backend("f64", 2).kernels)  # double-word: add and mul (also with a plain second operand), div, sqrt, sum
        [('add', 1), ('add', 2), ('div', 0), ('mul', 1), ('mul', 2), ('sqrt', 0), ('sum_finish', 0), ('sum_first', 0), ('sum_level', 0)]
        >>> ("sqrt", 0) in Backend("f32", 2).kernels  # float32 nc = 2: the square root in float64
        False
        >>> Backend("f32", 4).kernel("div", []).name
        'hypermc_div_f32_4'
    """

    def __init__(self, name: str, nc: int, part: str = "arith", launch: Launch | None = None):
        self.name, self.nc, self.part = name, nc, part
        self.kernels = source(name, nc, part)
        self.launch = jiterator_launch if launch is None else launch

    def __repr__(self) -> str:
        return f"Backend({self.name!r}, {self.nc}, {self.part!r})"

    def kernel(self, op: str, operands: list[torch.Tensor]) -> Kernel:
        """The kernel of ``op`` for these operands (the variant by the second operand's components)."""
        if (op, 0) in self.kernels:
            return self.kernels[(op, 0)]
        return self.kernels[(op, operands[1].shape[-1])]

    def call(
        self, op: str, operands: list[torch.Tensor], extra: tuple, nc: int, nout: int | None = None, *, count: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """``op`` on the operands ``(*shape_i, m_i)``: ``(out, ok, bad)`` with ``out``
        ``(*shape, nout)``, the fast-path mask ``ok`` and the number of its false elements
        (a host sync; ``count=False``: 0, for a kernel whose elements are all good).

        ``extra`` is the CPU kernels' argument tuple: ``(ny, sign)`` for add, ``(ny,)``
        for mul, ``(lo, hi)`` for sqrt, ``()`` otherwise.
        """
        nout = nc if nout is None else nout
        k = self.kernel(op, operands)
        if op in ("add", "add_general"):
            extra = extra[1:]  # the variant carries ny
        elif op in ("mul", "mul_general"):
            extra = ()
        shape = broadcast_shapes(*(o.shape[:-1] for o in operands))
        dtype, device = operands[0].dtype, operands[0].device
        if len(shape) and min(shape) == 0:
            return torch.empty((*shape, nout), dtype=dtype, device=device), torch.ones(shape, dtype=torch.bool, device=device), 0
        tensors = [o[..., i] for o, m in zip(operands, k.inputs) for i in range(m)]
        kwargs = {e: float(v) for e, v in zip(k.extras, extra)}
        outs = self.launch(k, tensors, kwargs)
        for part in k.rest:  # the other components of an op with more outputs than one kernel's
            outs = (*outs[:-1], *self.launch(part, tensors, kwargs))
        out = torch.stack([o.expand(shape) for o in outs[:nout]], dim=-1)
        ok = (outs[-1] != 0).expand(shape)
        return out, ok, int(ok.numel() - int(ok.sum())) if count else 0
