"""Fused CPU kernels for the trainer's batched distances (half-space, ball, hyperboloid;
forward and backward) and the half-space retraction.

:func:`hypermc.manifolds.math.batch.halfspace` computes ``B x (1 + negatives)`` distances
and their gradient in ~15 torch kernels forward and ~25 backward, each one memory pass
over ``B x K x n`` coordinates; at nc = 2 on the WordNet nouns batch that was about half
of a training step. :func:`halfspace` computes the same numbers in one C++ pass forward
and one backward (built on first use by :func:`hypermc.mcf.native.library`, cached,
called through :mod:`ctypes` on torch's intra-op threads).

Accuracy contract (the one of :mod:`.batch`): the coordinate differences are formed from
the MC components by an exact ``two_sum`` of the leading components plus the tails,
rounded once -- the same operations as :func:`.batch.rounded_difference`, so the same
bits -- and everything after them is plain arithmetic in the component dtype. The plain
part is evaluated in a different order than torch's kernels (``delta * (1/h)`` instead of
``delta / h``; ``std::asinh``; the norm summed left to right), so values and gradients
agree with :func:`.batch.halfspace` to a few ulps, not bit for bit: tested in
``tests/manifolds/test_fused.py`` (values within 8 ulps, each gradient within 16 ulps of
the sum of the magnitudes of its terms) and checked when the library loads (otherwise it
is not used and one warning says why).

Gradient: with ``q = delta / h``, ``h = sqrt(x_n) sqrt(y_n)``, ``m = |q|``,
``d = (2 / sqrt c) asinh(m / 2)`` and ``g = dL/dd``::

    dL/dm     = g / (sqrt c sqrt(1 + m^2 / 4))
    dL/ddelta = (dL/dm / m) q / h            (0 where m = 0, as torch's norm backward)
    dL/dh     = -(dL/dm) m / h
    dL/dx     = dL/ddelta + e_n (dL/dh) sqrt(y_n) / (2 sqrt(x_n)),   dL/dy likewise with -dL/ddelta

(``d delta / dx = I``: the surrogate derivative of :mod:`.batch`). The backward pass is
deterministic and independent of the thread count: each thread owns a range of rows and
adds the terms of the pairs touching them in pair order.

The ball (:func:`ball`) follows the same contract, with the per-row deficits of
:func:`.batch.ball` passed in. The hyperboloid (:func:`lorentz`) is stricter: its MC part,
``q = <delta, delta>_L``, is the traced fast paths of :func:`.batch.minkowski_sq` in its
order (the coordinate differences, the squares at ``nc + 1`` components summed pairwise
as :func:`hypermc.mcf.reduce.sumsq` does, the rounding, the time square, the difference),
the pairs whose checks fail are recomputed by the torch path, and the distance is the
torch path's own expression of ``q``: the values are the torch path's bits; only the
gradient's scatter to the rows runs in another order. It needs nc + 1 component
arithmetic, so nc = 2, 3 (nc = 4 runs the torch path). Pairs are processed in blocks whose
coordinates are gathered into planar buffers, so each traced step is one vectorised loop
over a block (gathering inside the loop kept the compiler from vectorising it, 3x slower);
the epoch times per model are in docs/training.md ("Epoch times on the CPU").

Scope: CPU, float32/float64, nc = 1, 2, 3, 4 (nc = 1: plain tables, whose coordinate
differences are the plain ``a - b``; Lorentz: 1, 2, 3, its plain ``q`` summed left to right,
a few ulps from torch's order), rows that do not require grad,
outside ``torch.compile`` tracing. Anything else -- CUDA, no compiler,
``HYPERMC_NATIVE=0`` -- runs the torch path (:func:`.batch.halfspace`, ...). The half-space
retraction (:func:`halfspace_retr`) is fused for nc = 2, 3, 4; a plain table's step is
one torch operation. These kernels serve the callers that ask for them (``train(fast=True)``,
``evaluate(fast=True)``); everything else in the library computes plain tensors with
torch's own kernels.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any, cast

import torch

from ..._checks import check_choice
from ...mcf import arith, native, portable, registry
from ...mcf.eft import has_fused_addcmul, tracing
from ...mcf.native.source import inline_function, op_body, prelude, round_body
from ...mcf.tensor import MCTensor
from . import batch
from . import lorentz as lorentz_math

__all__ = [
    "halfspace",
    "ball",
    "lorentz",
    "halfspace_retr",
    "halfspace_retr_reference",
    "available",
    "applies",
    "status",
    "model_of",
    "NCS",
    "RETR_NCS",
    "LORENTZ_NCS",
]

#: Component counts with fused distance kernels (nc = 1: plain tables, stored as one
#: component).
NCS = (1, 2, 3, 4)
#: Component counts of the half-space's fused retraction (its MC steps are the arithmetic
#: networks of :mod:`hypermc.mcf.native`; a plain table's step is one torch operation).
RETR_NCS = (2, 3, 4)
#: The Lorentz model's (its MC spatial sum of squares is taken at nc + 1 components, where
#: :mod:`hypermc.mcf.native` has arithmetic kernels up to 4: nc = 4 runs the torch path;
#: nc = 1: plain tables, plain arithmetic).
LORENTZ_NCS = (1, 2, 3)
_TYPES = {torch.float32: ("f32", "float"), torch.float64: ("f64", "double")}
_STEM = "hypermc_fused_halfspace"
#: Pairs per thread below which the forward pass runs in one call.
_CHUNK = 4096

_TEMPLATE = r"""

// Pairs ahead whose target row is prefetched (rows are gathered at random: latency-bound).
constexpr int64_t AHEAD = 12;

template <typename T>
static inline void prefetch_row(const T* row, int64_t w) {
    for (int64_t i = 0; i < w * (int64_t)sizeof(T); i += 64) __builtin_prefetch((const char*)row + i);
}

// a - b of two MC numbers (NC components each), rounded once: batch.rounded_difference,
// traced (rounded_difference_2/3/4 above).
template <typename T, int NC>
static inline T rounded_difference(const T* a, const T* b) {
    if constexpr (NC == 1) return rounded_difference_1(a, b);
    else if constexpr (NC == 2) return rounded_difference_2(a, b);
    else if constexpr (NC == 3) return rounded_difference_3(a, b);
    else return rounded_difference_4(a, b);
}

// Distances of the pairs [p0, p1): d, and m = |delta / h| and h for the backward pass.
template <typename T, int NC>
static void forward(int64_t p0, int64_t p1, const T* rows, int64_t n, const int64_t* ia, const int64_t* ib,
                    T scale, T* d, T* m, T* h) {
    const int64_t w = n * NC;
    for (int64_t p = p0; p < p1; ++p) {
        if (p + AHEAD < p1) prefetch_row(rows + ib[p + AHEAD] * w, w);
        const T* ra = rows + ia[p] * w;
        const T* rb = rows + ib[p] * w;
        const T hp = std::sqrt(ra[w - NC]) * std::sqrt(rb[w - NC]);
        const T ih = T(1) / hp;
        T ss = 0;
        for (int64_t i = 0; i < n; ++i) {
            const T q = rounded_difference<T, NC>(ra + i * NC, rb + i * NC) * ih;
            ss += q * q;
        }
        const T mp = std::sqrt(ss);
        d[p] = std::asinh(mp * T(0.5)) * scale;
        m[p] = mp;
        h[p] = hp;
    }
}

// The backward passes' loop: zero the gradient rows [r0, r1) of the U x n result, then
// call pair(p, a, b, own_a, own_b) for each of the P pairs that touches a row in this
// range, in pair order (so each row's terms are added in pair order whatever the thread
// count), prefetching the target rows ahead.
template <typename T, typename Pair>
static inline void owned_pairs(int64_t r0, int64_t r1, int64_t P, const T* rows, int64_t n, int64_t w, const int64_t* ia,
                               const int64_t* ib, T* grad, Pair pair) {
    for (int64_t i = r0 * n; i < r1 * n; ++i) grad[i] = 0;
    for (int64_t p = 0; p < P; ++p) {
        if (p + AHEAD < P) {
            const int64_t b2 = ib[p + AHEAD];
            if (b2 >= r0 && b2 < r1) prefetch_row(rows + b2 * w, w);
        }
        const int64_t a = ia[p], b = ib[p];
        const bool own_a = a >= r0 && a < r1, own_b = b >= r0 && b < r1;
        if (own_a || own_b) pair(p, a, b, own_a, own_b);
    }
}

// Gradient rows [r0, r1) of the U x n result from all P pairs (each pair adds to the rows
// it touches in this range, in pair order).
template <typename T, int NC>
static void backward(int64_t r0, int64_t r1, int64_t P, const T* rows, int64_t n, const int64_t* ia,
                     const int64_t* ib, T scale, const T* g, const T* m, const T* h, T* grad) {
    const int64_t w = n * NC;
    owned_pairs(r0, r1, P, rows, n, w, ia, ib, grad, [&](int64_t p, int64_t a, int64_t b, bool own_a, bool own_b) {
        const T* ra = rows + a * w;
        const T* rb = rows + b * w;
        const T mp = m[p], hp = h[p], ih = T(1) / hp;
        const T half = mp * T(0.5);
        const T gm = g[p] * scale / std::sqrt(half * half + T(1)) * T(0.5);
        const T s = mp == 0 ? T(0) : gm / mp;
        const T gh = -(gm * mp) * ih;
        const T sa = std::sqrt(ra[w - NC]), sb = std::sqrt(rb[w - NC]);
        T* ga = grad + a * n;
        T* gb = grad + b * n;
        for (int64_t i = 0; i < n; ++i) {
            const T q = rounded_difference<T, NC>(ra + i * NC, rb + i * NC) * ih;
            const T gd = q * s * ih;
            if (own_a) ga[i] += gd;
            if (own_b) gb[i] -= gd;
        }
        if (own_a) ga[n - 1] += gh * sb / (sa + sa);
        if (own_b) gb[n - 1] += gh * sa / (sb + sb);
    });
}

// Ball distances of the pairs [p0, p1) from the rows' deficits D (plain, one per row):
// d = scale asinh(m), m = sqrt(c) |delta / h|, h = sqrt(D_a) sqrt(D_b); m and h are kept
// for the backward pass.
template <typename T, int NC>
static void ball_forward(int64_t p0, int64_t p1, const T* rows, const T* dfc, int64_t n, const int64_t* ia,
                         const int64_t* ib, T sqrt_c, T scale, T* d, T* m, T* h) {
    const int64_t w = n * NC;
    for (int64_t p = p0; p < p1; ++p) {
        if (p + AHEAD < p1) prefetch_row(rows + ib[p + AHEAD] * w, w);
        const T* ra = rows + ia[p] * w;
        const T* rb = rows + ib[p] * w;
        const T hp = std::sqrt(dfc[ia[p]]) * std::sqrt(dfc[ib[p]]);
        T ss = 0;
        for (int64_t i = 0; i < n; ++i) {
            const T q = rounded_difference<T, NC>(ra + i * NC, rb + i * NC) / hp;
            ss += q * q;
        }
        const T mp = std::sqrt(ss) * sqrt_c;
        d[p] = std::asinh(mp) * scale;
        m[p] = mp;
        h[p] = hp;
    }
}

// Ball gradient rows [r0, r1) (as backward): with G = dL/d|q| = g scale sqrt(c) / sqrt(1 + m^2)
// and |q| = m / sqrt(c): dL/dq_i = G q_i / |q|, dL/dh = -G |q| / h, dh/dD_a = sqrt(D_b) / (2 sqrt(D_a))
// and dD_a/dx_a = -2c x_a (the leading components: the surrogate derivative of batch.ball).
template <typename T, int NC>
static void ball_backward(int64_t r0, int64_t r1, int64_t P, const T* rows, const T* dfc, int64_t n, const int64_t* ia,
                          const int64_t* ib, T c, T scale, const T* g, const T* m, const T* h, T* grad) {
    const int64_t w = n * NC;
    const T sqrt_c = std::sqrt(c);
    owned_pairs(r0, r1, P, rows, n, w, ia, ib, grad, [&](int64_t p, int64_t a, int64_t b, bool own_a, bool own_b) {
        const T* ra = rows + a * w;
        const T* rb = rows + b * w;
        const T mp = m[p], hp = h[p];
        const T gq = g[p] * scale * sqrt_c / std::sqrt(mp * mp + T(1));
        const T qn = mp / sqrt_c;
        const T s = qn == 0 ? T(0) : gq / qn / hp;
        const T gh = -(gq * qn) / hp;
        const T sa = std::sqrt(dfc[a]), sb = std::sqrt(dfc[b]);
        const T ka = -c * gh * sb / sa, kb = -c * gh * sa / sb;
        T* ga = grad + a * n;
        T* gb = grad + b * n;
        for (int64_t i = 0; i < n; ++i) {
            const T gd = rounded_difference<T, NC>(ra + i * NC, rb + i * NC) / hp * s;
            if (own_a) ga[i] += gd + ka * ra[i * NC];
            if (own_b) gb[i] += kb * rb[i * NC] - gd;
        }
    });
}
"""

_INSTANCE = r"""
extern "C" void hs_forward_{name}_{nc}(int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia, const int64_t* ib,
        double scale, {ctype}* d, {ctype}* m, {ctype}* h, int64_t threads) {{
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        forward<{ctype}, {nc}>(P * t / threads, P * (t + 1) / threads, rows, n, ia, ib, ({ctype})scale, d, m, h);
}}
extern "C" void hs_backward_{name}_{nc}(int64_t U, int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia,
        const int64_t* ib, double scale, const {ctype}* g, const {ctype}* m, const {ctype}* h, {ctype}* grad,
        int64_t threads) {{
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        backward<{ctype}, {nc}>(U * t / threads, U * (t + 1) / threads, P, rows, n, ia, ib, ({ctype})scale, g, m, h, grad);
}}
extern "C" void ball_forward_{name}_{nc}(int64_t P, const {ctype}* rows, const {ctype}* dfc, int64_t n, const int64_t* ia,
        const int64_t* ib, double c, {ctype}* d, {ctype}* m, {ctype}* h, int64_t threads) {{
    const {ctype} sqrt_c = ({ctype})std::sqrt(c), scale = ({ctype})(2.0 / std::sqrt(c));
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        ball_forward<{ctype}, {nc}>(P * t / threads, P * (t + 1) / threads, rows, dfc, n, ia, ib, sqrt_c, scale, d, m, h);
}}
extern "C" void ball_backward_{name}_{nc}(int64_t U, int64_t P, const {ctype}* rows, const {ctype}* dfc, int64_t n,
        const int64_t* ia, const int64_t* ib, double c, const {ctype}* g, const {ctype}* m, const {ctype}* h, {ctype}* grad,
        int64_t threads) {{
    const {ctype} scale = ({ctype})(2.0 / std::sqrt(c));
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        ball_backward<{ctype}, {nc}>(U * t / threads, U * (t + 1) / threads, P, rows, dfc, n, ia, ib, ({ctype})c, scale, g, m, h,
                                     grad);
}}
"""


_RETR = r"""
// The halfspace fast retraction of MC rows (R, n, NC) by a plain step u (R, n) and height
// factors f (R,): x_i + u_i (add_float) for the first n - 1 coordinates, x_n * f
// (mul_float) clamped at the smallest normal number (projx); the number of rows with a
// failed fast-path check or a non-finite coordinate (the caller then runs the torch path).
extern "C" int64_t hs_retr_{name}_{nc}(int64_t R, int64_t n, const {ctype}* x, const {ctype}* u, const {ctype}* f,
        {ctype}* out, int64_t threads) {{
    using T = {ctype};
    constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));
    (void)CANCEL;
    const double sign = 1.0;
    (void)sign;
    const T tiny = std::numeric_limits<T>::min();
    int64_t bad = 0;
    #pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : bad)
    for (int64_t r = 0; r < R; ++r) {{
        bool row_ok = true;
        for (int64_t i = 0; i < n; ++i) {{
            const T* xp = x + (r * n + i) * {nc};
            T* op = out + (r * n + i) * {nc};
            bool okv;
#define X(k) xp[k]
#define OUT(k) op[k]
#define OK okv
            if (i < n - 1) {{
                const T yv = u[r * n + i];
#define Y(k) yv
                {add}
#undef Y
            }} else {{
                const T yv = f[r];
#define Y(k) yv
                {mul}
#undef Y
                T tail = 0;
                for (int k = 1; k < {nc}; ++k) if (tail == 0) tail = op[k];
                if (op[0] < tiny || (op[0] == tiny && tail < 0)) {{
                    op[0] = tiny;
                    for (int k = 1; k < {nc}; ++k) op[k] = 0;
                }}
            }}
#undef X
#undef OUT
#undef OK
            row_ok = row_ok & okv;
            for (int k = 0; k < {nc}; ++k) row_ok = row_ok & (std::fabs(op[k]) <= std::numeric_limits<T>::max());
        }}
        bad += !row_ok;
    }}
    return bad;
}}
"""


_LORENTZ_TEMPLATE = r"""
// Pairs per block of lz_q (its vectorised loops run over a block's pairs).
constexpr int64_t LZ_BLOCK = 32;

// Lorentz gradient rows [r0, r1) (as backward) from g = dL/dq of each pair's q = <delta, delta>_L:
// dq/dx_a = 2 J delta, dq/dx_b = -2 J delta (J = diag(-1, 1, ..., 1); the surrogate derivative of
// batch.lorentz, delta the rounded coordinate differences).
template <typename T, int NC>
static void lorentz_backward(int64_t r0, int64_t r1, int64_t P, const T* rows, int64_t n, const int64_t* ia,
                             const int64_t* ib, const T* g, T* grad) {
    const int64_t w = n * NC;
    owned_pairs(r0, r1, P, rows, n, w, ia, ib, grad, [&](int64_t p, int64_t a, int64_t b, bool own_a, bool own_b) {
        const T* ra = rows + a * w;
        const T* rb = rows + b * w;
        const T gg = g[p] * T(2);
        T* ga = grad + a * n;
        T* gb = grad + b * n;
        for (int64_t i = 0; i < n; ++i) {
            const T d = rounded_difference<T, NC>(ra + i * NC, rb + i * NC) * gg;
            const T term = i == 0 ? -d : d;
            if (own_a) ga[i] += term;
            if (own_b) gb[i] -= term;
        }
    });
}
"""

_LORENTZ = r"""
// q = <a - b, a - b>_L of the pairs [0, P) (rows of n coordinates, time first, {nc} components):
// the operations of batch.minkowski_sq in its order (arith.sub per coordinate; reduce.sumsq of
// the spatial differences: squares at {w} components, summed pairwise, arith.round_to; the time
// coordinate's square by arith.mul; arith.sub), each the traced fast path of the torch kernels.
// good[p] = 0 where one of those checks fails (the caller recomputes those pairs by the torch
// path); returns their number. Pairs are processed in blocks of LZ_BLOCK, planar in a block
// buffer, so every step is one vectorised loop over the block's pairs.
extern "C" int64_t lz_q_{name}_{nc}(int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia, const int64_t* ib,
        {ctype}* q, uint8_t* good, int64_t threads) {{
    using T = {ctype};
    constexpr int NC = {nc}, W = {w};
    constexpr int64_t B = LZ_BLOCK;
    constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));
    (void)CANCEL;
    const int64_t rw = n * NC;
    const int64_t blocks = (P + B - 1) / B;
    int64_t bad = 0;
    #pragma omp parallel num_threads(threads) reduction(+ : bad)
    {{
        std::unique_ptr<T[]> buf(new T[std::max<int64_t>(n, 1) * W * B]);
        T t0[NC * B], ga[NC * B], gb[NC * B];
        uint8_t ok[B];
        // the coordinate at offset `at` of the block's rows, planar: g[k * B + j]
        auto gather = [](T* a, T* b, const T* rows, const int64_t* ia, const int64_t* ib, int64_t p0, int64_t m, int64_t rw, int64_t at) {{
            for (int64_t j = 0; j < m; ++j) {{
                const T* ra = rows + ia[p0 + j] * rw + at;
                const T* rb = rows + ib[p0 + j] * rw + at;
                for (int k = 0; k < NC; ++k) a[k * B + j] = ra[k], b[k * B + j] = rb[k];
            }}
        }};
        #pragma omp for schedule(static)
        for (int64_t blk = 0; blk < blocks; ++blk) {{
            const int64_t p0 = blk * B, m = std::min<int64_t>(B, P - p0);
            T* s = buf.get();
            gather(ga, gb, rows, ia, ib, p0, m, rw, 0);
            #pragma omp simd
            for (int64_t j = 0; j < m; ++j) {{  // the time coordinate: arith.sub(a_0, b_0)
                const T sign = T(-1);
                bool okv;
#define X(k) ga[(k) * B + j]
#define Y(k) gb[(k) * B + j]
#define OUT(k) t0[(k) * B + j]
#define OK okv
                {sub}
#undef X
#undef Y
#undef OUT
#undef OK
                ok[j] = (uint8_t)okv;
            }}
            for (int64_t i = 1; i < n; ++i) {{  // spatial: arith.sub(a_i, b_i), its square at W components
                T* sq = s + (i - 1) * W * B;
                gather(ga, gb, rows, ia, ib, p0, m, rw, i * NC);
                #pragma omp simd
                for (int64_t j = 0; j < m; ++j) {{
                    T d[W];
                    d[NC] = T(0);
                    bool okv, okw;
                    {{
                        const T sign = T(-1);
#define X(k) ga[(k) * B + j]
#define Y(k) gb[(k) * B + j]
#define OUT(k) d[k]
#define OK okv
                        {sub}
#undef X
#undef Y
#undef OUT
#undef OK
                    }}
                    {{
#define X(k) d[k]
#define Y(k) d[k]
#define OUT(k) sq[(k) * B + j]
#define OK okw
                        {square}
#undef X
#undef Y
#undef OUT
#undef OK
                    }}
                    ok[j] &= (uint8_t)(okv & okw);
                }}
            }}
            if (n < 2)
                for (int64_t k = 0; k < W * B; ++k) s[k] = T(0);
            for (int64_t len = n - 1; len > 1;) {{  // pairwise: the first half plus the second half
                const int64_t h = len / 2;
                for (int64_t i = 0; i < h; ++i) {{
                    T* a = s + i * W * B;
                    const T* c2 = s + (h + i) * W * B;
                    #pragma omp simd
                    for (int64_t j = 0; j < m; ++j) {{
                        const T sign = T(1);
                        bool okv;
#define X(k) a[(k) * B + j]
#define Y(k) c2[(k) * B + j]
#define OUT(k) a[(k) * B + j]
#define OK okv
                        {add}
#undef X
#undef Y
#undef OUT
#undef OK
                        ok[j] &= (uint8_t)okv;
                    }}
                }}
                if (len % 2) std::memcpy(s + h * W * B, s + 2 * h * W * B, sizeof(T) * W * B);
                len = h + len % 2;
            }}
            #pragma omp simd
            for (int64_t j = 0; j < m; ++j) {{
                T sp[NC], t2[NC], qq[NC];
                bool ok1, ok2, ok3;
                {{  // arith.round_to(sum, NC)
#define X(k) s[(k) * B + j]
#define OUT(k) sp[k]
#define OK ok1
                    {rounding}
#undef X
#undef OUT
#undef OK
                }}
                {{  // arith.mul(t, t)
#define X(k) t0[(k) * B + j]
#define Y(k) t0[(k) * B + j]
#define OUT(k) t2[k]
#define OK ok2
                    {mul}
#undef X
#undef Y
#undef OUT
#undef OK
                }}
                {{
                    const T sign = T(-1);  // arith.sub(spatial, t^2)
#define X(k) sp[k]
#define Y(k) t2[k]
#define OUT(k) qq[k]
#define OK ok3
                    {sub}
#undef X
#undef Y
#undef OUT
#undef OK
                }}
                q[p0 + j] = qq[0];
                ok[j] &= (uint8_t)(ok1 & ok2 & ok3);
            }}
            for (int64_t j = 0; j < m; ++j) {{
                good[p0 + j] = ok[j];
                bad += !ok[j];
            }}
        }}
    }}
    return bad;
}}
extern "C" void lz_backward_{name}_{nc}(int64_t U, int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia,
        const int64_t* ib, const {ctype}* g, {ctype}* grad, int64_t threads) {{
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        lorentz_backward<{ctype}, {nc}>(U * t / threads, U * (t + 1) / threads, P, rows, n, ia, ib, g, grad);
}}
"""


_LORENTZ_PLAIN = r"""
// q = <a - b, a - b>_L of plain rows (one component): the coordinate differences, the sum of
// the spatial squares left to right, minus the time coordinate's square; every pair is
// accepted (good = 1). The torch path sums the squares in its own order: q agrees to a few
// ulps of the sum of the squares' magnitudes.
extern "C" int64_t lz_q_{name}_1(int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia, const int64_t* ib,
        {ctype}* q, uint8_t* good, int64_t threads) {{
    using T = {ctype};
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < P; ++p) {{
        if (p + AHEAD < P) prefetch_row(rows + ib[p + AHEAD] * n, n);
        const T* ra = rows + ia[p] * n;
        const T* rb = rows + ib[p] * n;
        T s = T(0);
        for (int64_t i = 1; i < n; ++i) {{
            const T d = ra[i] - rb[i];
            s += d * d;
        }}
        const T t = ra[0] - rb[0];
        q[p] = s - t * t;
        good[p] = 1;
    }}
    return 0;
}}
extern "C" void lz_backward_{name}_1(int64_t U, int64_t P, const {ctype}* rows, int64_t n, const int64_t* ia,
        const int64_t* ib, const {ctype}* g, {ctype}* grad, int64_t threads) {{
    #pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t t = 0; t < threads; ++t)
        lorentz_backward<{ctype}, 1>(U * t / threads, U * (t + 1) / threads, P, rows, n, ia, ib, g, grad);
}}
"""


def source() -> str:
    """The C++ source of the library (every dtype and nc of :data:`NCS`).

    The retraction's MC steps are the straight-line networks that
    :mod:`hypermc.mcf.native.source` generates for ``add_float`` and ``mul_float`` (the
    rounding-for-rounding transcriptions of :mod:`hypermc.mcf.arith`), so they give the
    torch kernels' bits; the load-time check compares them bit for bit.

    Example:
        >>> src = source()
        >>> "hs_forward_f64_2" in src and "hs_backward_f32_4" in src and "hs_retr_f64_3" in src
        True
    """
    differences = [inline_function(f"rounded_difference_{nc}", batch.rounded_difference, nc, 2) for nc in NCS]
    parts = [prelude(), "}  // namespace\n", *(f"{d}\n" for d in differences), _TEMPLATE, _LORENTZ_TEMPLATE]
    body = "\n                ".join
    for name, ctype in _TYPES.values():
        for nc in NCS:
            parts.append(_INSTANCE.format(name=name, ctype=ctype, nc=nc))
        for nc in RETR_NCS:
            add, mul = op_body("add", nc, 1), op_body("mul", nc, 1)
            parts.append(_RETR.format(name=name, ctype=ctype, nc=nc, add=body(add), mul=body(mul)))
        for nc in LORENTZ_NCS:
            if nc == 1:
                parts.append(_LORENTZ_PLAIN.format(name=name, ctype=ctype))
                continue
            w = nc + 1
            bodies = {
                "sub": op_body("add", nc, nc),
                "square": op_body("mul", w, w),
                "add": op_body("add", w, w),
                "rounding": round_body(w, nc),
                "mul": op_body("mul", nc, nc),
            }
            parts.append(_LORENTZ.format(name=name, ctype=ctype, nc=nc, w=w, **{k: body(v) for k, v in bodies.items()}))
    return "".join(parts)


def _declare(lib: ctypes.CDLL) -> None:
    i64, vp, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    for name, _ in _TYPES.values():
        for nc in NCS:
            fwd = getattr(lib, f"hs_forward_{name}_{nc}")
            fwd.argtypes = [i64, vp, i64, vp, vp, dbl, vp, vp, vp, i64]
            fwd.restype = None
            bwd = getattr(lib, f"hs_backward_{name}_{nc}")
            bwd.argtypes = [i64, i64, vp, i64, vp, vp, dbl, vp, vp, vp, vp, i64]
            bwd.restype = None
            bfwd = getattr(lib, f"ball_forward_{name}_{nc}")
            bfwd.argtypes = [i64, vp, vp, i64, vp, vp, dbl, vp, vp, vp, i64]
            bfwd.restype = None
            bbwd = getattr(lib, f"ball_backward_{name}_{nc}")
            bbwd.argtypes = [i64, i64, vp, vp, i64, vp, vp, dbl, vp, vp, vp, vp, i64]
            bbwd.restype = None
        for nc in RETR_NCS:
            retr = getattr(lib, f"hs_retr_{name}_{nc}")
            retr.argtypes = [i64, i64, vp, vp, vp, vp, i64]
            retr.restype = i64
        for nc in LORENTZ_NCS:
            lq = getattr(lib, f"lz_q_{name}_{nc}")
            lq.argtypes = [i64, vp, i64, vp, vp, vp, vp, i64]
            lq.restype = i64
            lbwd = getattr(lib, f"lz_backward_{name}_{nc}")
            lbwd.argtypes = [i64, i64, vp, i64, vp, vp, vp, vp, i64]
            lbwd.restype = None


#: Tolerances of the load-time check and the tests (ulps of the component dtype): values,
#: and each gradient entry relative to the sum of the magnitudes of its terms.
VALUE_ULPS = 8
GRAD_ULPS = 16


def _with_tails(lead: torch.Tensor, dtype: torch.dtype, nc: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MC rows ``(u, n, nc)`` from leading values ``lead`` (float64) with random tails of
    relative size ~``eps`` (some cancelling), and pairs ``(40, 1) x (40, 7)`` whose first
    column pairs each row with its neighbour ``i ^ 1``."""
    u, n = lead.shape
    eps = torch.finfo(dtype).eps
    comps = [lead.to(dtype)]
    for _ in range(1, nc):
        comps.append((comps[-1] * eps * (torch.rand(u, n, generator=gen, dtype=torch.float64).to(dtype) - 0.5)).to(dtype))
    rows = torch.stack(comps, dim=-1)
    ia = torch.randint(u, (40, 1), generator=gen)
    ib = torch.randint(u, (40, 7), generator=gen)
    ib[:, 0] = ia[:, 0] ^ 1  # the close neighbour
    return rows, ia, ib


def _check_inputs(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed table (heights from 1e-6 to 1e6, close and far pairs, cancelling tails)."""
    gen = torch.Generator().manual_seed(20261126)
    u, n = 64, 5
    lead = (torch.rand(u, n, generator=gen, dtype=torch.float64) * 2 - 1) * 10.0 ** torch.randint(-3, 3, (u, 1), generator=gen)
    lead[:, -1] = 10.0 ** (torch.rand(u, generator=gen, dtype=torch.float64) * 12 - 6)
    lead[1::4] = lead[0::4] * (1 + 1e-9 * torch.rand(16, n, generator=gen, dtype=torch.float64))  # close pairs
    return _with_tails(lead, dtype, nc, gen)


def _retr_inputs(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor]:
    """MC points with heights from 1e-30 to 1e30 and steps of every scale, some down to
    below the smallest normal height (the clamp), some cancelling a coordinate to ~u."""
    gen = torch.Generator().manual_seed(20261127)
    r, n = 256, 4
    rows, _, _ = _check_inputs(dtype, nc)
    comps = rows[torch.randint(rows.shape[0], (r,), generator=gen)][:, :n].clone()
    comps[..., -1, :] *= 10.0 ** torch.randint(-24, 24, (r, 1), generator=gen).to(dtype)
    u = (torch.randn(r, n, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(-20, 2, (r, 1), generator=gen)).to(dtype)
    u[:, -1] *= comps[:, -1, 0]
    u[::9, -1] = -1000.0 * comps[::9, -1, 0]  # underflows: clamped to the smallest normal height
    u[5::9, 0] = -comps[5::9, 0, 0] * (1 + torch.finfo(dtype).eps)  # x_0 + u_0 cancels
    return comps, u


def _ball_check_inputs(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ball points at Euclidean radii from 0 to ``1 - 1e-12`` (float64; ``1 - 1e-5`` in
    float32), close pairs, cancelling tails, the origin."""
    gen = torch.Generator().manual_seed(20261129)
    u, n = 64, 5
    direction = torch.randn(u, n, generator=gen, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    depth = 12 if dtype == torch.float64 else 5
    radius = 1 - 10.0 ** -(torch.rand(u, 1, generator=gen, dtype=torch.float64) * depth)
    lead = direction * radius
    lead[1::4] = lead[0::4] * (1 + 1e-9 * torch.rand(16, 1, generator=gen, dtype=torch.float64))  # close pairs
    lead[2] = 0.0  # the origin
    return _with_tails(lead, dtype, nc, gen)


def _lorentz_check_inputs(dtype: torch.dtype, nc: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hyperboloid points (time coordinate first) at radii from 0 to 30 (float64; 8 in
    float32), close pairs, cancelling tails, coincident points, the origin, and a pair
    with an equal coordinate (a zero difference: the torch path's second pass)."""
    gen = torch.Generator().manual_seed(20261130)
    u, n = 64, 5
    direction = torch.randn(u, n - 1, generator=gen, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    top = 30.0 if dtype == torch.float64 else 8.0
    radius = torch.rand(u, 1, generator=gen, dtype=torch.float64) * top
    radius[1::4] = radius[0::4] * (1 + 1e-9 * torch.rand(16, 1, generator=gen, dtype=torch.float64))  # close pairs
    direction[1::4] = direction[0::4]
    radius[2] = 0.0  # the origin
    radius[5], direction[5] = radius[4], direction[4]  # coincident with row 4
    tangent = MCTensor.from_components(_with_tails(direction * radius, dtype, nc, gen)[0])
    point = lorentz_math.expmap0(torch.cat([torch.zeros_like(tangent[..., :1]), tangent], dim=-1))
    rows = cast(MCTensor, point).components.contiguous()
    rows[7, 1] = rows[6, 1]  # an equal spatial coordinate
    ia = torch.randint(u, (40, 1), generator=gen)
    ib = torch.randint(u, (40, 7), generator=gen)
    ib[:, 0] = ia[:, 0] ^ 1  # the close neighbour
    ia[0, 0], ib[0, 1] = 4, 5
    ia[1, 0], ib[1, 1] = 6, 7
    return rows, ia, ib


def agreement(rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, model: str = "halfspace") -> tuple[float, float]:
    """Largest value error (ulps) and gradient error (ulps of the terms' magnitude) of
    the fused kernels of ``model`` (``"halfspace"``: :func:`halfspace`, ``"ball"``:
    :func:`ball`) against the torch path (:func:`.batch.halfspace`, :func:`.batch.ball`),
    for the load check and the tests.

    The gradient is that of ``sum(w * d)`` for fixed pseudo-random weights ``w`` in
    ``[-1, 1]``; each entry's error is measured in ulps of the sum over pairs of the
    magnitudes of its terms (float64), since the two paths sum the terms in different
    orders and a sum that cancels has no better relative accuracy.

    Example:
        >>> rows, ia, ib = _check_inputs(torch.float64, 2)
        >>> value_ulps, grad_ulps = agreement(rows, ia, ib, c=1.0)
        >>> value_ulps <= VALUE_ULPS and grad_ulps <= GRAD_ULPS
        True
        >>> value_ulps, grad_ulps = agreement(*_ball_check_inputs(torch.float64, 2), c=1.0, model="ball")
        >>> value_ulps <= VALUE_ULPS and grad_ulps <= GRAD_ULPS
        True
    """
    fused_fn, torch_fn, magnitude = _MODELS[check_choice("agreement", "model", model, tuple(_MODELS))]
    gen = torch.Generator().manual_seed(1)
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    w = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(rows.dtype)
    results: list[tuple[torch.Tensor, torch.Tensor]] = []
    for fn in (fused_fn, torch_fn):
        leaf = rows[..., 0].clone().requires_grad_(True)
        with torch.enable_grad():
            d = fn(rows, ia, ib, c=c, leaf=leaf)
            (g,) = torch.autograd.grad((d * w).sum(), leaf)
        results.append((d.detach(), g))
    (d, g), (d_ref, g_ref) = results
    return _ulps(d, d_ref, d_ref.abs()), _ulps(g, g_ref, magnitude(rows, ia, ib, c, w))


def _ulps(a: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor) -> float:
    """Largest ``|a - ref|`` in ulps of ``scale`` (0 where both are the same number, inf
    and NaN included; NaN where only one of them is NaN)."""
    finfo = torch.finfo(ref.dtype)
    same = (a == ref) | (a.isnan() & ref.isnan())
    err = (a - ref).abs() / (scale * finfo.eps).clamp_min(finfo.tiny)
    return float(torch.where(same, torch.zeros_like(err), err).max()) if a.numel() else 0.0


def _term_magnitude(rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, c: float, w: torch.Tensor) -> torch.Tensor:
    """Per gradient entry, the sum over pairs of the magnitudes of its terms (float64)."""
    x = rows.to(torch.float64)
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    ia_f, ib_f = ia.expand(shape).reshape(-1), ib.expand(shape).reshape(-1)
    delta = batch.rounded_difference(x[ia_f], x[ib_f])
    xa, xb = x[ia_f, :, 0], x[ib_f, :, 0]
    sa, sb = xa[:, -1:].sqrt(), xb[:, -1:].sqrt()
    h = sa * sb
    q = delta / h
    m = q.norm(dim=-1, keepdim=True)
    gm = w.reshape(-1, 1).to(torch.float64).abs() / (math.sqrt(c) * torch.sqrt(1 + m * m / 4))
    gd = torch.where(m > 0, gm / m, torch.zeros_like(m)) * q.abs() / h
    gh = gm * m / h
    ta = gd.clone()
    tb = gd.clone()
    ta[:, -1:] += gh * sb / (2 * sa)
    tb[:, -1:] += gh * sa / (2 * sb)
    out = torch.zeros(rows.shape[:2], dtype=torch.float64)
    out.index_add_(0, ia_f, ta)
    out.index_add_(0, ib_f, tb)
    return out.to(rows.dtype)


def _ball_term_magnitude(rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, c: float, w: torch.Tensor) -> torch.Tensor:
    """:func:`_term_magnitude` of the ball's gradient (float64)."""
    x = rows.to(torch.float64)
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    ia_f, ib_f = ia.expand(shape).reshape(-1), ib.expand(shape).reshape(-1)
    dfc = batch._ball_deficit(x, None, c)
    delta = batch.rounded_difference(x[ia_f], x[ib_f])
    xa, xb = x[ia_f, :, 0], x[ib_f, :, 0]
    sa, sb = dfc[ia_f].sqrt().unsqueeze(-1), dfc[ib_f].sqrt().unsqueeze(-1)
    h = sa * sb
    q = delta / h
    qn = q.norm(dim=-1, keepdim=True)
    gq = w.reshape(-1, 1).to(torch.float64).abs() * 2 / torch.sqrt(1 + c * qn * qn)
    gd = torch.where(qn > 0, gq / qn, torch.zeros_like(qn)) * q.abs() / h
    gh = gq * qn / h
    ta = gd + c * gh * sb / sa * xa.abs()
    tb = gd + c * gh * sa / sb * xb.abs()
    out = torch.zeros(rows.shape[:2], dtype=torch.float64)
    out.index_add_(0, ia_f, ta)
    out.index_add_(0, ib_f, tb)
    return out.to(rows.dtype)


def _lorentz_term_magnitude(rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, c: float, w: torch.Tensor) -> torch.Tensor:
    """:func:`_term_magnitude` of the Lorentz model's gradient (float64): per pair
    ``|2 (dd/dq) delta_i|``."""
    x = rows.to(torch.float64)
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    ia_f, ib_f = ia.expand(shape).reshape(-1), ib.expand(shape).reshape(-1)
    q, _ = batch.minkowski_sq(x[ia_f], x[ib_f])
    tiny = torch.finfo(rows.dtype).tiny
    live = q >= tiny  # elsewhere the clamp cuts the gradient: no term at all
    q = q.clamp_min(tiny).requires_grad_(True)
    with torch.enable_grad():
        (gq,) = torch.autograd.grad(batch.lorentz_from_sq(q, c).sum(), q)
    gq = torch.where(live, gq, torch.zeros_like(gq))
    delta = batch.rounded_difference(x[ia_f], x[ib_f])
    terms = (2 * gq * w.reshape(-1).to(torch.float64)).abs().unsqueeze(-1) * delta.abs()
    out = torch.zeros(rows.shape[:2], dtype=torch.float64)
    out.index_add_(0, ia_f, terms)
    out.index_add_(0, ib_f, terms)
    return out.to(rows.dtype)


def _lorentz_plain_check_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plain hyperboloid points at radii up to 3 with well separated pairs, where plain
    ``q = <delta, delta>_L`` does not cancel: the distances and gradients of two summation
    orders then agree to a few ulps (close or far pairs cancel in any order)."""
    gen = torch.Generator().manual_seed(20261207)
    u, n = 64, 5
    tangent = torch.randn(u, n - 1, generator=gen, dtype=torch.float64)
    tangent = tangent / torch.linalg.vector_norm(tangent, dim=-1, keepdim=True) * (torch.rand(u, 1, generator=gen, dtype=torch.float64) * 3)
    point = lorentz_math.expmap0(torch.cat([torch.zeros_like(tangent[..., :1]), tangent], dim=-1)).to(dtype)
    rows = point.unsqueeze(-1).contiguous()
    ia = torch.randint(u, (40, 1), generator=gen)
    ib = (ia + 1 + torch.randint(u - 1, (40, 7), generator=gen)) % u  # never the same point
    return rows, ia, ib


def lorentz_plain_q_agreement(rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor) -> float:
    """Largest difference of the plain Lorentz kernel's ``q = <delta, delta>_L`` from the
    torch path's (:func:`.batch.minkowski_sq`), in ulps of the sum of the squares'
    magnitudes (the two sum them in different orders), for plain rows ``(U, n, 1)``.

    Example:
        >>> rows, ia, ib = _lorentz_plain_check_inputs(torch.float64)
        >>> lorentz_plain_q_agreement(rows, ia, ib) <= VALUE_ULPS
        True
    """
    lib = _kernels(rows.dtype, 1, "lorentz")
    if lib is None:
        raise RuntimeError(f"lorentz_plain_q_agreement: the plain Lorentz kernel is not in use: {status(rows.dtype, 1, 'lorentz')}")
    return _plain_q_ulps(lib, rows, ia, ib)


def _plain_q_ulps(lib: ctypes.CDLL, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor) -> float:
    _, ia_f, ib_f = _flat_pairs(ia, ib, rows.shape[0])
    q = _lorentz_q(lib, rows.contiguous(), ia_f, ib_f)
    q_ref, delta = batch.minkowski_sq(rows[ia_f], rows[ib_f])
    return _ulps(q, q_ref, (delta * delta).sum(-1))


def _check(lib: ctypes.CDLL, dtype: torch.dtype, nc: int, model: str) -> str | None:
    """What of the (dtype, nc) kernels of ``model`` disagrees with the torch path, else None."""
    name = _TYPES[dtype][0]
    if model == "lorentz":
        if nc == 1:  # plain: q summed in another order than torch's, so a few ulps
            for c in (1.0, 0.3):
                rows, ia, ib = _lorentz_check_inputs(dtype, 1)
                q_ulps = _plain_q_ulps(lib, rows, ia, ib)
                value, grad = agreement(*_lorentz_plain_check_inputs(dtype), c=c, model="lorentz")
                if not (q_ulps <= VALUE_ULPS and value <= VALUE_ULPS and grad <= GRAD_ULPS):
                    return f"lorentz {name} nc=1 c={c} (q {q_ulps:.1f} ulps, values {value:.1f} ulps, gradients {grad:.1f} ulps)"
            return None
        for c in (1.0, 0.3):
            value, grad = agreement(*_lorentz_check_inputs(dtype, nc), c=c, model="lorentz")
            if not (value == 0 and grad <= GRAD_ULPS):
                return f"lorentz {name} nc={nc} c={c} (values {value:.1f} ulps, gradients {grad:.1f} ulps)"
        return None
    if model == "ball":
        for c in (1.0, 0.3):
            value, grad = agreement(*_ball_check_inputs(dtype, nc), c=c, model="ball")
            if not (value <= VALUE_ULPS and grad <= GRAD_ULPS):
                return f"ball {name} nc={nc} c={c} (values {value:.1f} ulps, gradients {grad:.1f} ulps)"
        return None
    rows, ia, ib = _check_inputs(dtype, nc)
    value, grad = agreement(rows, ia, ib, c=1.0)
    if not (value <= VALUE_ULPS and grad <= GRAD_ULPS):
        return f"halfspace {name} nc={nc} (values {value:.1f} ulps, gradients {grad:.1f} ulps)"
    comps, u = _retr_inputs(dtype, nc)
    if _retr_eligible(comps, u) is not None:
        ints = torch.int32 if dtype == torch.float32 else torch.int64
        if not torch.equal(halfspace_retr(comps, u).view(ints), halfspace_retr_reference(comps, u).view(ints)):
            return f"halfspace_retr {name} nc={nc} (bits differ from the torch kernels)"
    return None


def _kernels(dtype: torch.dtype, nc: int, model: str = "halfspace") -> ctypes.CDLL | None:
    """The library, for a (dtype, nc) whose kernels of ``model`` passed their check in
    this process (checked on first use: a fraction of a second; a failure warns once and
    the torch path runs). One state per (model, dtype, nc) in
    :mod:`hypermc.mcf.registry`, above the library's own."""

    def open_() -> ctypes.CDLL | str:
        lib = native.library(_STEM, source(), _declare, lambda lib: None, flags=("-fopenmp",))
        return native.library_status(_STEM) if lib is None else lib

    warning = f"hypermc fused {model} kernels disabled for {dtype} nc={nc}: {{}} {registry.HINT}; using the torch path"
    return registry.load((model, dtype, nc), open_, lambda lib: _check(lib, dtype, nc, model), warning.format)


def available(dtype: torch.dtype = torch.float64, nc: int = 2, model: str = "halfspace") -> bool:
    """Whether the fused kernels of ``model`` (``"halfspace"``: :func:`halfspace`,
    ``"ball"``: :func:`ball`) run for CPU rows of this dtype and nc (builds the library on
    the first call -- a few seconds, then cached -- and checks the (dtype, nc) kernels
    against the torch path once per process).

    Example:
        >>> isinstance(available(torch.float64, 2), bool)  # True with a working C++ compiler
        True
        >>> available(torch.float16, 2), available(torch.float64, 4, "lorentz")  # never fused
        (False, False)
    """
    model = check_choice("available", "model", model, tuple(_MODELS))
    if dtype not in _TYPES or nc not in _ncs(model) or (model == "lorentz" and not _lorentz_arith(dtype, nc)):
        return False
    return _kernels(dtype, nc, model) is not None


def status(dtype: torch.dtype = torch.float64, nc: int = 2, model: str = "halfspace") -> str:
    """``"in use"`` or why the fused kernels of ``model`` are not used for ``(dtype, nc)``.

    Example:
        >>> (status() == "in use") == available()
        True
        >>> status(torch.float16, 2)
        'no fused kernels for torch.float16 nc=2 (float32/float64, nc in (1, 2, 3, 4))'
    """
    model = check_choice("status", "model", model, tuple(_MODELS))
    if dtype not in _TYPES or nc not in _ncs(model):
        return f"no fused kernels for {dtype} nc={nc} (float32/float64, nc in {_ncs(model)})"
    if model == "lorentz" and not _lorentz_arith(dtype, nc):
        if registry.disabled():
            return registry.DISABLED
        if not has_fused_addcmul("cpu", dtype):
            return f"no measured fused multiply-add for {dtype} on cpu (the Lorentz kernel traces arith's FMA products)"
        for k in (nc, nc + 1):
            if not native.available(dtype, k):
                return f"the arithmetic kernels at nc={k} that the Lorentz kernel traces are not in use: {native.status(dtype, k)}"
    _kernels(dtype, nc, model)
    return registry.state((model, dtype, nc))


def applies(rows: torch.Tensor, model: str = "halfspace") -> bool:
    """Whether the fused kernels of ``model`` run for these rows (without ``leaf``).

    Example:
        >>> applies(torch.zeros(3, 2, 2, dtype=torch.float64)) == available(torch.float64, 2)
        True
        >>> applies(torch.zeros(3, 2, 1, dtype=torch.float16))  # float16: the torch path
        False
    """
    return _eligible(rows, None, check_choice("applies", "model", model, tuple(_MODELS))) is not None


def _ncs(model: str) -> tuple[int, ...]:
    """The component counts with fused kernels of ``model``."""
    return LORENTZ_NCS if model == "lorentz" else NCS


def _lorentz_arith(dtype: torch.dtype, nc: int) -> bool:
    """Whether the Lorentz kernel's traced fast paths are what the torch path runs: the
    arithmetic kernels of :mod:`hypermc.mcf.native` at ``nc`` and ``nc + 1`` in use and
    ``arith.mul``'s double-word product the FMA kernel (plain tables, nc = 1, trace none)."""
    if nc == 1:
        return True
    return has_fused_addcmul("cpu", dtype) and native.available(dtype, nc) and native.available(dtype, nc + 1)


#: Index dtypes the kernels take (others, e.g. boolean masks, run the torch path).
_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8)


def _eligible(rows: torch.Tensor, leaf: torch.Tensor | None, model: str = "halfspace", *indices: torch.Tensor) -> ctypes.CDLL | None:
    if rows.device.type != "cpu" or rows.dtype not in _TYPES or rows.shape[-1] not in _ncs(model) or rows.requires_grad:
        return None
    if rows.dim() != 3 or rows.shape[1] < 1:  # the torch path says what is wrong with the shape
        return None
    if any(i.device.type != "cpu" or i.dtype not in _INDEX_DTYPES for i in indices):
        return None
    if model == "lorentz" and not _lorentz_arith(rows.dtype, rows.shape[-1]):
        return None
    if leaf is not None and (leaf.device.type != "cpu" or leaf.dtype != rows.dtype):
        return None
    return None if tracing() else _kernels(rows.dtype, rows.shape[-1], model)


def halfspace(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """:func:`.batch.halfspace` by the fused kernels where they apply (module docstring);
    the torch path otherwise.

    Precondition: ``leaf`` (when given) equals ``rows[..., 0]``; the gradient is that of
    the distances at the stored points (as :func:`.batch.halfspace`).
    Bound: values within :data:`VALUE_ULPS` ulps of :func:`.batch.halfspace`, gradient
    entries within :data:`GRAD_ULPS` ulps of the sum of their terms' magnitudes.

    Example:
        >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0], [1.0, 1.0]], nc=2, dtype=torch.float64)
        >>> rows = batch.components_of(table)
        >>> leaf = rows[..., 0].clone().requires_grad_()
        >>> d = halfspace(rows, torch.tensor([[0]]), torch.tensor([[1, 2]]), c=1.0, leaf=leaf)
        >>> [round(v, 6) for v in d.flatten().tolist()]  # ln 2, 2 asinh(1/2)
        [0.693147, 0.962424]
        >>> d.sum().backward()
        >>> leaf.grad.shape
        torch.Size([3, 2])
    """
    lib = _eligible(rows, leaf, "halfspace", ia, ib)
    if lib is None:
        return batch.halfspace(rows, ia, ib, c=c, leaf=leaf, cache=cache)
    shape, ia_f, ib_f = _flat_pairs(ia, ib, rows.shape[0])
    rows = rows.contiguous()
    scale = 2.0 / math.sqrt(c)
    if leaf is None or not torch.is_grad_enabled():
        return _forward(lib, rows, ia_f, ib_f, scale)[0].view(shape)
    return _HalfspaceDistance.apply(leaf, rows, ia_f, ib_f, scale, lib).view(shape)


def _flat_pairs(ia: torch.Tensor, ib: torch.Tensor, rows: int) -> tuple[torch.Size, torch.Tensor, torch.Tensor]:
    """The broadcast shape of the pairs and their row indices, flat, contiguous int64;
    negative indices count from the end (as torch's indexing), others out of range raise
    IndexError (the kernels read the rows without bounds checks)."""
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    out = []
    for name, i in (("ia", ia), ("ib", ib)):
        flat = i.to(torch.int64).expand(shape).reshape(-1).contiguous()
        if flat.numel():
            lo, hi = int(i.min()), int(i.max())  # on the index tensor before broadcasting
            if lo < -rows or hi >= rows:
                bad = lo if lo < -rows else hi
                raise IndexError(f"{name}: index {bad} is out of range for {rows} rows (expected -{rows} <= index < {rows})")
            if lo < 0:
                flat = torch.where(flat < 0, flat + rows, flat)
        out.append(flat)
    return shape, out[0], out[1]


def _kernel(lib: ctypes.CDLL, which: str, rows: torch.Tensor) -> Callable[..., None]:
    return getattr(lib, f"hs_{which}_{_TYPES[rows.dtype][0]}_{rows.shape[-1]}")


def _threads(work: int) -> int:
    """Threads for ``work`` pairs: torch's intra-op threads, at most one per :data:`_CHUNK`."""
    return max(1, min(torch.get_num_threads(), work // _CHUNK))


def _forward(
    lib: ctypes.CDLL, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p = ia.numel()
    d, m, h = torch.empty((3, p), dtype=rows.dtype)
    fn = _kernel(lib, "forward", rows)
    fn(p, rows.data_ptr(), rows.shape[1], ia.data_ptr(), ib.data_ptr(), scale, d.data_ptr(), m.data_ptr(), h.data_ptr(), _threads(p))
    return d, m, h


def _backward(
    lib: ctypes.CDLL,
    rows: torch.Tensor,
    ia: torch.Tensor,
    ib: torch.Tensor,
    scale: float,
    g: torch.Tensor,
    m: torch.Tensor,
    h: torch.Tensor,
) -> torch.Tensor:
    u, n = rows.shape[0], rows.shape[1]
    grad = torch.empty((u, n), dtype=rows.dtype)
    p = ia.numel()
    fn = _kernel(lib, "backward", rows)
    threads = min(_threads(p), max(u, 1))
    fn(u, p, rows.data_ptr(), n, ia.data_ptr(), ib.data_ptr(), scale, g.data_ptr(), m.data_ptr(), h.data_ptr(), grad.data_ptr(), threads)
    return grad


def halfspace_retr_reference(comps: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The halfspace fast retraction on MC components by the torch kernels (the reference
    of :func:`halfspace_retr`, and its path where the fused kernel does not apply).

    ``(x_bar + u_bar, x_n exp(u_n / x_n0))`` then ``projx``: the kernels MCTensor's ops
    reach for ``x[..., :-1] + u[..., :-1]`` (``add_float``), ``x[..., -1:] * factor``
    (``mul_float``) and ``projx`` (``clamp`` at the smallest normal height), called on the
    components directly: the bits of the MCTensor expression, without an MCTensor per step.

    Shape:
        ``comps`` ``(R, n, nc)``, ``u`` ``(R, n)`` plain in the component dtype; result ``(R, n, nc)``.

    Example:
        >>> comps = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]], dtype=torch.float64)  # the point (0, 1), nc = 2
        >>> halfspace_retr_reference(comps, torch.tensor([[0.5, 1.0]], dtype=torch.float64))[..., 0]
        tensor([[0.5000, 2.7183]], dtype=torch.float64)
    """
    factor = _factor(comps, u)
    head = arith.add_float(comps[..., :-1, :], u[..., :-1])
    tail = arith.mul_float(comps[..., -1:, :], factor)
    tiny = torch.tensor(torch.finfo(comps.dtype).tiny, dtype=comps.dtype, device=comps.device)
    tail = arith.clamp(tail, lo=arith.from_float(tiny, comps.shape[-1]))
    return torch.cat([head, tail], dim=-2)


def _factor(comps: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The height factors ``exp(u_n / x_n0)`` ``(R, 1)`` in the component dtype."""
    return portable.exp(u[..., -1:] / comps[..., -1:, 0])


def _retr_eligible(comps: torch.Tensor, u: torch.Tensor) -> ctypes.CDLL | None:
    """The library where :func:`halfspace_retr` gives the reference's bits: the fused
    arithmetic of :mod:`hypermc.mcf.native` in use (its load check passed), and the
    double-word product of ``mul_float`` is the FMA kernel."""
    nc = comps.shape[-1]
    if comps.device.type != "cpu" or comps.dtype not in _TYPES or nc not in RETR_NCS or comps.dim() != 3 or u.dtype != comps.dtype:
        return None
    if comps.requires_grad or u.requires_grad or u.device.type != "cpu" or tracing():
        return None
    if not (has_fused_addcmul("cpu", comps.dtype) and native.available(comps.dtype, nc)):
        return None
    return _kernels(comps.dtype, nc)


def halfspace_retr(comps: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """:func:`halfspace_retr_reference` in one fused pass where it applies (CPU,
    float32/float64, nc = 2, 3, 4): the same bits.

    Rows where a fixed network's fast-path check fails (a zero or a heavily cancelling
    sum) or a coordinate is not finite make the whole call run the reference, which
    handles them exactly as the torch kernels do (and lets the caller's finiteness check
    see the same values).

    Example:
        >>> comps = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]], dtype=torch.float64)
        >>> u = torch.tensor([[0.5, 1.0]], dtype=torch.float64)
        >>> torch.equal(halfspace_retr(comps, u), halfspace_retr_reference(comps, u))
        True
    """
    lib = _retr_eligible(comps, u)
    if lib is None:
        return halfspace_retr_reference(comps, u)
    comps, u = comps.contiguous(), u.contiguous()
    factor = _factor(comps, u).contiguous()
    r, n, nc = comps.shape
    out = torch.empty_like(comps)
    threads = max(1, min(torch.get_num_threads(), r * n // _CHUNK))
    fn = getattr(lib, f"hs_retr_{_TYPES[comps.dtype][0]}_{nc}")
    bad = fn(r, n, comps.data_ptr(), u.data_ptr(), factor.data_ptr(), out.data_ptr(), threads) if r else 0
    return out if bad == 0 else halfspace_retr_reference(comps, u)


class _HalfspaceDistance(torch.autograd.Function):
    """Distances of flattened pairs; the gradient with respect to ``leaf`` by the fused backward."""

    @staticmethod
    def forward(
        ctx: Any, leaf: torch.Tensor, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, scale: float, lib: ctypes.CDLL
    ) -> torch.Tensor:  # noqa: D102
        d, m, h = _forward(lib, rows, ia, ib, scale)
        ctx.save_for_backward(rows, ia, ib, m, h)
        ctx.scale, ctx.lib = scale, lib
        return d

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None, None]:  # noqa: D102
        rows, ia, ib, m, h = ctx.saved_tensors
        grad = _backward(ctx.lib, rows, ia, ib, ctx.scale, g.contiguous(), m, h)
        return grad, None, None, None, None, None


def ball(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """:func:`.batch.ball` by the fused kernels where they apply (as :func:`halfspace`);
    the torch path otherwise. The per-row deficits ``1 - c|x|^2`` are :func:`.batch.ball`'s
    (MC arithmetic, rounded once; kept in ``cache`` when there is no ``leaf``), and the
    kernels take them as they are.

    Bound: values within :data:`VALUE_ULPS` ulps of :func:`.batch.ball`, gradient entries
    within :data:`GRAD_ULPS` ulps of the sum of their terms' magnitudes.

    Example:
        >>> table = hm.mc([[0.0, 0.0], [0.5, 0.0], [0.0, -0.5]], nc=2, dtype=torch.float64)
        >>> rows = batch.components_of(table)
        >>> leaf = rows[..., 0].clone().requires_grad_()
        >>> d = ball(rows, torch.tensor([[0], [1]]), torch.tensor([[1], [2]]), c=1.0, leaf=leaf)
        >>> [round(v, 6) for v in d.flatten().tolist()]  # ln 3, then d((.5, 0), (0, -.5))
        [1.098612, 1.6807]
        >>> d.sum().backward()
        >>> leaf.grad.shape
        torch.Size([3, 2])
    """
    lib = _eligible(rows, leaf, "ball", ia, ib)
    if lib is None:
        return batch.ball(rows, ia, ib, c=c, leaf=leaf, cache=cache)
    shape, ia_f, ib_f = _flat_pairs(ia, ib, rows.shape[0])
    rows = rows.contiguous()
    dfc: torch.Tensor | None = None if cache is None or leaf is not None else cache.get("deficit")
    if dfc is None:
        dfc = batch._ball_deficit(rows, None, c).contiguous()
        if cache is not None and leaf is None:
            cache["deficit"] = dfc
    if leaf is None or not torch.is_grad_enabled():
        return _ball_forward(lib, rows, dfc, ia_f, ib_f, c)[0].view(shape)
    return _BallDistance.apply(leaf, rows, dfc, ia_f, ib_f, c, lib).view(shape)


def _ball_forward(
    lib: ctypes.CDLL, rows: torch.Tensor, dfc: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, c: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p = ia.numel()
    d, m, h = torch.empty((3, p), dtype=rows.dtype)
    fn = getattr(lib, f"ball_forward_{_TYPES[rows.dtype][0]}_{rows.shape[-1]}")
    fn(
        p,
        rows.data_ptr(),
        dfc.data_ptr(),
        rows.shape[1],
        ia.data_ptr(),
        ib.data_ptr(),
        c,
        d.data_ptr(),
        m.data_ptr(),
        h.data_ptr(),
        _threads(p),
    )
    return d, m, h


class _BallDistance(torch.autograd.Function):
    """Ball distances of flattened pairs; the gradient with respect to ``leaf`` by the fused backward."""

    @staticmethod
    def forward(
        ctx: Any, leaf: torch.Tensor, rows: torch.Tensor, dfc: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, c: float, lib: ctypes.CDLL
    ) -> torch.Tensor:  # noqa: D102
        d, m, h = _ball_forward(lib, rows, dfc, ia, ib, c)
        ctx.save_for_backward(rows, dfc, ia, ib, m, h)
        ctx.c, ctx.lib = c, lib
        return d

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None, None, None]:  # noqa: D102
        rows, dfc, ia, ib, m, h = ctx.saved_tensors
        u, n = rows.shape[0], rows.shape[1]
        grad = torch.empty((u, n), dtype=rows.dtype)
        p = ia.numel()
        fn = getattr(ctx.lib, f"ball_backward_{_TYPES[rows.dtype][0]}_{rows.shape[-1]}")
        threads = min(_threads(p), max(u, 1))
        gc = g.contiguous()
        fn(
            u,
            p,
            rows.data_ptr(),
            dfc.data_ptr(),
            n,
            ia.data_ptr(),
            ib.data_ptr(),
            ctx.c,
            gc.data_ptr(),
            m.data_ptr(),
            h.data_ptr(),
            grad.data_ptr(),
            threads,
        )
        return grad, None, None, None, None, None, None


def lorentz(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """:func:`.batch.lorentz` with its MC part, ``q = <delta, delta>_L``, in one fused
    pass over the pairs where it applies (CPU, float32/float64, nc = 1, 2, 3: the kernel
    ``lz_q``), and the gradient with respect to ``leaf`` scattered to the rows by one
    fused backward pass (``lz_backward``); the torch path otherwise.

    MC tables (nc = 2, 3): ``q`` has the torch path's bits: the kernel runs the same
    traced fast paths in the same order (:func:`.batch.minkowski_sq`), and the pairs where
    a check fails (a zero coordinate difference, a heavily cancelling one) are recomputed
    by the torch path. The distance is then :func:`.batch.lorentz_from_sq`, the torch
    path's own expression, so the values are the same bits. Plain tables (nc = 1): ``q``
    is the plain sum of the spatial squares (left to right) minus the time square, within
    :data:`VALUE_ULPS` ulps of the squares' magnitudes of the torch path's ``q``
    (:func:`lorentz_plain_q_agreement`); where ``q`` cancels (close or far pairs) plain
    arithmetic resolves neither. Gradient entries within :data:`GRAD_ULPS` ulps of
    the sum of their terms' magnitudes (the terms are summed in another order).

    Example:
        >>> from hypermc.manifolds.math import lorentz as lorentz_math
        >>> u = hm.mc([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]], nc=2, dtype=torch.float64)
        >>> rows = batch.components_of(lorentz_math.expmap0(u))
        >>> ia, ib = torch.tensor([[0], [1]]), torch.tensor([[1, 2], [2, 0]])
        >>> d = lorentz(rows, ia, ib, c=1.0)
        >>> torch.equal(d, batch.lorentz(rows, ia, ib, c=1.0)), [round(v, 6) for v in d[0].tolist()]
        (True, [1.0, 2.0])
    """
    lib = _eligible(rows, leaf, "lorentz", ia, ib)
    if lib is None:
        return batch.lorentz(rows, ia, ib, c=c, leaf=leaf, cache=cache)
    shape, ia_f, ib_f = _flat_pairs(ia, ib, rows.shape[0])
    rows = rows.contiguous()
    if leaf is None or not torch.is_grad_enabled():
        q = _lorentz_q(lib, rows, ia_f, ib_f)
    else:
        q = _LorentzSquare.apply(leaf, rows, ia_f, ib_f, lib)
    return batch.lorentz_from_sq(q, c).view(shape)


def _lorentz_q(lib: ctypes.CDLL, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor) -> torch.Tensor:
    """``q`` of the flat pairs by ``lz_q``; the pairs it flags by :func:`.batch.minkowski_sq`."""
    p = ia.numel()
    q = torch.empty(p, dtype=rows.dtype)
    good = torch.empty(p, dtype=torch.uint8)
    fn = getattr(lib, f"lz_q_{_TYPES[rows.dtype][0]}_{rows.shape[-1]}")
    bad = fn(p, rows.data_ptr(), rows.shape[1], ia.data_ptr(), ib.data_ptr(), q.data_ptr(), good.data_ptr(), _threads(p)) if p else 0
    if bad:
        idx = torch.nonzero(good == 0).squeeze(1)
        q[idx] = batch.minkowski_sq(rows[ia[idx]], rows[ib[idx]])[0]
    return q


class _LorentzSquare(torch.autograd.Function):
    """``q = <delta, delta>_L`` of flattened pairs; its gradient with respect to ``leaf``
    (``2 J delta`` per pair, as :func:`.batch.lorentz`'s surrogate) by the fused backward."""

    @staticmethod
    def forward(ctx: Any, leaf: torch.Tensor, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, lib: ctypes.CDLL) -> torch.Tensor:  # noqa: D102
        ctx.save_for_backward(rows, ia, ib)
        ctx.lib = lib
        return _lorentz_q(lib, rows, ia, ib)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:  # noqa: D102
        rows, ia, ib = ctx.saved_tensors
        u, n = rows.shape[0], rows.shape[1]
        grad = torch.empty((u, n), dtype=rows.dtype)
        p = ia.numel()
        fn = getattr(ctx.lib, f"lz_backward_{_TYPES[rows.dtype][0]}_{rows.shape[-1]}")
        gc = g.contiguous()
        fn(u, p, rows.data_ptr(), n, ia.data_ptr(), ib.data_ptr(), gc.data_ptr(), grad.data_ptr(), min(_threads(p), max(u, 1)))
        return grad, None, None, None, None


#: Per model: the fused function, its torch path and the magnitude of its gradient terms.
_MODELS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "halfspace": (halfspace, batch.halfspace, _term_magnitude),
    "ball": (ball, batch.ball, _ball_term_magnitude),
    "lorentz": (lorentz, batch.lorentz, _lorentz_term_magnitude),
}


def model_of(kernel: Callable[..., torch.Tensor]) -> str:
    """The model name (for :func:`available`, :func:`status`, :func:`applies`) of a fused
    distance function of this module (or of a wrapper of one that sets ``__wrapped__``,
    as :func:`functools.wraps` does).

    Example:
        >>> model_of(ball), model_of(halfspace)
        ('ball', 'halfspace')
    """
    target = kernel
    while hasattr(target, "__wrapped__"):
        target = target.__wrapped__
    for model, (fn, _, _) in _MODELS.items():
        if fn is target:
            return model
    raise ValueError(f"model_of: kernel must be one of this module's fused distances ({', '.join(_MODELS)}); got {kernel!r}")
