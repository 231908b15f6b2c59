"""The deficit ``1 - c|x|^2`` of plain (``nc = 1``) points: compensated, one row pass.

:func:`hypermc.manifolds.math.common.deficit` forms ``1 - c|x|^2`` without the
cancellation of ``1 - fl(|x|^2)``. For MC points it works at ``nc + 1`` components with
the general MC kernels; for plain points (and MCTensors with ``nc = 1``) that machinery
cost tens of torch kernels and most of the time of a plain-float64 optimizer step. This
module computes the same quantity by the compensated dot product *Dot2* of Ogita, Rump
and Oishi (2005), row by row::

    s, t = x_0^2, err(x_0^2)                 (TwoProd: fl(x_0 x_0) and its exact error)
    for i = 1 .. n-1:
        p, e = TwoProd(x_i, x_i)
        s, q = TwoSum(s, p)
        t = t + (q + e)
    if c != 1: s, e = TwoProd(s, c);  t = t c + e
    h, q = TwoSum(1, -s)
    D = h + (q - t)

Bound (Dot2, Prop. 5.5 of the reference): ``|D - (1 - c|x|^2)| <= u |D| + gamma_n^2 c|x|^2``
with ``gamma_n = n u / (1 - n u)`` -- the result is as accurate as if ``|x|^2`` were
summed in twice the working precision and rounded once. For a ball point (``c|x|^2 < 1``)
the second term is below ``(n u)^2``, e.g. ``2^-98`` for ``n = 16`` in float64, far
below the smallest deficit ``projx`` keeps (``2^8 u``): the relative error stays within
about one ulp, as for the ``nc + 1`` computation of MC points (tested against exact
rational arithmetic in ``tests/manifolds/test_plain.py``).

Points of another dtype than float64 are computed in float64 (their squares are exact
there) and rounded once at the end. Two implementations give the same bits: a C++ row
loop (CPU, float32/float64, built on first use by :func:`hypermc.mcf.native.library`,
one pass over the points, checked bit for bit against the torch one when it loads) and
the torch network above (other devices and dtypes, ``torch.compile`` traces,
``HYPERMC_NATIVE=0``). Every error-free transformation is exact, so the two agree.
"""

from __future__ import annotations

import ctypes

import torch

from ...mcf import native
from ...mcf.eft import is_traced, two_prod

__all__ = ["deficit", "deficit_torch", "status"]

_STEM = "hypermc_plain_deficit"
_TYPES = {torch.float32: ("f32", "float"), torch.float64: ("f64", "double")}
#: Rows below which the C++ loop runs on one thread (thread start-up would dominate).
_PARALLEL_ROWS = 32768

_SOURCE = r"""
#include <cmath>
#include <cstdint>

namespace {
// Points of type S, arithmetic in T (float32 points are computed in double).
template <typename S, typename T>
inline void deficit_rows(int64_t rows, int64_t n, const S* x, T c, int64_t scale, S* out) {
#pragma omp parallel for schedule(static) if (rows >= PARALLEL_ROWS)
    for (int64_t r = 0; r < rows; ++r) {
        const S* p = x + r * n;
        T a0 = p[0];
        T s = a0 * a0;
        T t = std::fma(a0, a0, -s);
        for (int64_t i = 1; i < n; ++i) {
            T a = p[i];
            T pi = a * a;
            T e = std::fma(a, a, -pi);
            T ss = s + pi;
            T bb = ss - s;
            T q = (s - (ss - bb)) + (pi - bb);
            s = ss;
            t = t + (q + e);
        }
        if (scale) {
            T pc = s * c;
            T ec = std::fma(s, c, -pc);
            t = t * c + ec;
            s = pc;
        }
        T one = 1;
        T ms = -s;
        T h = one + ms;
        T bb = h - one;
        T q = (one - (h - bb)) + (ms - bb);
        out[r] = (S)(h + (q - t));
    }
}
}  // namespace

extern "C" void plain_deficit_f64(int64_t rows, int64_t n, const double* x, double c, int64_t scale, double* out) {
    deficit_rows<double, double>(rows, n, x, c, scale, out);
}
extern "C" void plain_deficit_f32(int64_t rows, int64_t n, const float* x, double c, int64_t scale, float* out) {
    deficit_rows<float, double>(rows, n, x, c, scale, out);
}
"""


def _source() -> str:
    return _SOURCE.replace("PARALLEL_ROWS", str(_PARALLEL_ROWS))


def _declare(lib: ctypes.CDLL) -> None:
    i64, vp, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    for name, _ in _TYPES.values():
        fn = getattr(lib, f"plain_deficit_{name}")
        fn.argtypes = [i64, i64, vp, dbl, i64, vp]
        fn.restype = None


def _two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def deficit_torch(x: torch.Tensor, c: float) -> torch.Tensor:
    """``1 - c|x|^2`` along the last dim of a plain tensor by the torch network (module
    docstring); the reference the C++ loop is checked against.

    Example:
        >>> deficit_torch(torch.tensor([[0.6, 0.0], [0.25, 0.5]], dtype=torch.float64), 1.0)
        tensor([0.6400, 0.6875], dtype=torch.float64)
    """
    if x.dtype != torch.float64:
        return deficit_torch(x.to(torch.float64), c).to(x.dtype)
    p, e = two_prod(x, x)
    s, t = p[..., 0], e[..., 0]
    for i in range(1, x.shape[-1]):
        s, q = _two_sum(s, p[..., i])
        t = t + (q + e[..., i])
    if c != 1.0:
        cs = torch.full_like(s, c)
        s, ec = two_prod(s, cs)
        t = t * c + ec
    h, q = _two_sum(torch.ones_like(s), -s)
    return h + (q - t)


def _self_check(lib: ctypes.CDLL) -> str | None:
    gen = torch.Generator().manual_seed(0)
    for dtype in _TYPES:
        for n in (1, 2, 5, 16):
            x = (torch.rand(257, n, generator=gen, dtype=torch.float64) * 2 - 1) / n**0.5
            x[0] = 0.0
            x[1, 0] = 1 - 2.0**-40
            x = x.to(dtype)
            for c in (1.0, 3.0):
                if not torch.equal(_native(lib, x, c), deficit_torch(x, c)):
                    return f"plain_deficit_{_TYPES[dtype][0]} (n={n}, c={c})"
    return None


def _library() -> ctypes.CDLL | None:
    return native.library(_STEM, _source(), _declare, _self_check, flags=("-fopenmp",))


def _native(lib: ctypes.CDLL, x: torch.Tensor, c: float) -> torch.Tensor:
    xs = x.detach().contiguous()
    out = torch.empty(xs.shape[:-1], dtype=xs.dtype)
    rows = out.numel()
    if rows:
        fn = getattr(lib, f"plain_deficit_{_TYPES[xs.dtype][0]}")
        fn(rows, xs.shape[-1], xs.data_ptr(), float(c), int(c != 1.0), out.data_ptr())
    return out


def deficit(x: torch.Tensor, c: float) -> torch.Tensor:
    """``1 - c|x|^2`` along the last dim of a plain tensor ``(*, n)`` (no autograd: the
    caller, :func:`.common.deficit`, supplies the gradient ``-2 c x``).

    The C++ loop for CPU float32/float64 tensors outside ``torch.compile`` traces, the
    torch network otherwise; the same bits either way.

    Example:
        >>> x = torch.tensor([1 - 2.0**-40, 0.0], dtype=torch.float64)
        >>> float(deficit(x, 1.0)) == 2.0**-39 - 2.0**-80  # 1 - fl(|x|^2) would lose the 2^-80
        True
    """
    if x.device.type == "cpu" and x.dtype in _TYPES and x.shape[-1] > 0 and not is_traced(x):
        lib = _library()
        if lib is not None:
            return _native(lib, x, c)
    return deficit_torch(x, c)


def status() -> str:
    """``"in use"`` or why the C++ loop is not used (then the torch network runs).

    Example:
        >>> (status() == "in use") == (_library() is not None)
        True
    """
    _library()
    return native.library_status(_STEM)
