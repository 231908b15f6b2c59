"""C++ source of the fused nc = 3/4 kernels, generated as straight-line code.

The networks of :mod:`hypermc.mcf.fixed` and :mod:`hypermc.mcf.arith`
(``add_levels``, ``_product_levels``, ``renorm_levels``, ``normalised``,
``_remainder_step``, ``_div_fixed``, ``_sqrt_fixed``, ``_scale2``) are re-traced here on
symbolic values: every torch rounding of those functions becomes one C++ statement, in
the same order and with the same negations, so the list handling (levels, sorted terms,
chains) happens at generation time and the compiler sees one branch-free expression DAG
per element, which it vectorises. :mod:`hypermc.mcf.native` compiles the result and
checks it against the torch kernels bit for bit before using it.

Why generated rather than hand-written: a hand-written C++ version of these networks with
small term lists (tried first) kept the lists in memory and ran 35-50 ns per element;
straight-line code runs at a few ns.
"""

from __future__ import annotations

__all__ = ["source", "NCS", "DTYPES"]

NCS = (2, 3, 4)
#: name -> (C type, unsigned type of the same width, significand bits, exponent bias)
DTYPES = {"f32": ("float", "uint32_t", 24, 127), "f64": ("double", "uint64_t", 53, 1023)}


class _Net:
    """Straight-line code of one element: ``T vN = expr;`` per rounding."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def let(self, expr: str, ctype: str = "T") -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"{ctype} {name} = {expr};")
        return name

    def add(self, a: str, b: str) -> str:
        return self.let(f"{a} + {b}")

    def sub(self, a: str, b: str) -> str:
        return self.let(f"{a} - {b}")

    def mul(self, a: str, b: str) -> str:
        return self.let(f"{a} * {b}")

    def neg(self, a: str) -> str:
        return self.let(f"-{a}")

    # fixed.two_sum: s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb)
    def two_sum(self, a: str, b: str) -> tuple[str, str]:
        s = self.add(a, b)
        bb = self.sub(s, a)
        t = self.sub(s, bb)
        t = self.sub(a, t)
        bb = self.sub(b, bb)
        return s, self.add(t, bb)

    # arith._negated_two_sum: (s, -e)
    def negated_two_sum(self, a: str, b: str, subtract: bool) -> tuple[str, str]:
        s = self.sub(a, b) if subtract else self.add(a, b)
        bb = self.sub(s, a)
        ne = self.sub(s, bb)
        ne = self.sub(ne, a)
        bb = self.add(bb, b) if subtract else self.sub(bb, b)
        return s, self.add(ne, bb)

    # fixed.add_levels
    def add_levels(self, xs: list[str], ys: list[str], nc: int) -> list[str]:
        levels: list[list[str]] = [[] for _ in range(nc + 1)]
        for k in range(nc):
            if k < len(ys):
                s, e = self.two_sum(xs[k], ys[k])
                levels[k].append(s)
                levels[k + 1].append(e)
            else:
                levels[k].append(xs[k])
        levels[nc].extend(ys[nc:])
        out = []
        for k in range(nc + 1):
            s = levels[k][0]
            for t in levels[k][1:]:
                if k == nc:
                    s = self.add(s, t)
                else:
                    s, e = self.two_sum(s, t)
                    levels[k + 1].append(e)
            out.append(s)
        return out

    # fixed.renorm_levels
    def renorm_levels(self, t: list[str], nc: int) -> list[str]:
        n = len(t) - 1
        v = t[n]
        w: list[str] = [""] * (n + 1)
        for k in range(n - 1, -1, -1):
            v, w[k + 1] = self.two_sum(t[k], v)
        c = [v]
        r = w[1]
        for k in range(1, nc - 1):
            ck, r = self.two_sum(r, w[k + 1])
            c.append(ck)
        rest = r
        for j in range(nc, n + 1):
            rest = self.add(rest, w[j])
        c.append(rest)
        return c

    # fixed.normalised (``bound``: the operand magnitude of a sum)
    def normalised(self, c: list[str], bound: str | None) -> str:
        lead = self.let(f"std::fabs({c[0]})")
        terms = [f"({lead} <= std::numeric_limits<T>::max())", f"({lead} != T(0))"]
        terms += [f"(({c[k]} + {c[k + 1]}) == {c[k]})" for k in range(len(c) - 1)]
        if bound is not None:
            terms.append(f"({lead} * CANCEL > {bound})")
        return self.let(" & ".join(terms), "bool")

    # arith._product_levels (FMA form)
    def product_levels(self, xs: list[str], ys: list[str], nc: int) -> list[str]:
        levels: list[list[tuple[str, bool]]] = [[] for _ in range(nc + 1)]
        for k in range(nc):
            for i in range(k + 1):
                j = k - i
                if i < len(xs) and j < len(ys):
                    p = self.mul(xs[i], ys[j])
                    levels[k].append((p, False))
                    levels[k + 1].append((self.let(f"std::fma(-{xs[i]}, {ys[j]}, {p})"), True))
        last = None
        for i in range(1, nc):
            j = nc - i
            if i < len(xs) and j < len(ys):
                last = self.mul(xs[i], ys[j]) if last is None else self.let(f"std::fma({xs[i]}, {ys[j]}, {last})")
        out = [levels[0][0][0]]
        for k in range(1, nc):
            terms = sorted(levels[k], key=lambda term: term[1])
            if not terms:
                out.append("T(0)")
                continue
            s = self.neg(terms[0][0]) if terms[0][1] else terms[0][0]
            for t, negated in terms[1:]:
                s, ne = self.negated_two_sum(s, t, negated)
                levels[k + 1].append((ne, True))
            out.append(s)
        for t, negated in levels[nc]:
            if last is None:
                last = self.neg(t) if negated else t
            elif negated:
                last = self.sub(last, t)
            else:
                last = self.add(last, t)
        out.append(last if last is not None else "T(0)")
        return out

    # arith._remainder_step
    def remainder_step(self, r: list[str], ys: list[str], q: str, nc: int, renormalise: bool):
        levels = self.add_levels(r, self.product_levels(ys, [self.neg(q)], nc), nc)
        if not renormalise:
            lead = levels[-1]
            for t in reversed(levels[:-1]):
                lead = self.add(t, lead)
            return lead
        return self.renorm_levels(levels, nc)

    # arith._scale2 on every component (k an int expression)
    def scale(self, xs: list[str], k: str) -> list[str]:
        last = self.let(f"clampi<T>({k})", "I<T>")
        mid = self.let(f"clampi<T>({k} - {last})", "I<T>")
        first = self.let(f"{k} - {last} - {mid}", "I<T>")
        for step in (first, mid, last):
            f = self.let(f"pow2<T>({step})")
            xs = [self.mul(x, f) for x in xs]
        return xs


def _add_body(nc: int, ny: int) -> list[str]:
    """``x + sign * y``: ``sign`` = -1 is the negation of ``_add_fixed``'s ``subtract``
    (a product by -1 is exact, signed zeros and NaN included)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"Y({k}) * (T)sign") for k in range(ny)]
    c = net.renorm_levels(net.add_levels(xs, ys, nc), nc)
    # torch.maximum propagates NaN (std::fmax would not)
    bound = net.let(f"(std::fabs({xs[0]}) >= std::fabs({ys[0]}) || {xs[0]} != {xs[0]}) ? "
                    f"std::fabs({xs[0]}) : std::fabs({ys[0]})")
    ok = net.normalised(c, bound)
    return net.lines + [f"OUT({k}) = {c[k]};" for k in range(nc)] + [f"OK = {ok};"]


def _mul_body(nc: int, ny: int) -> list[str]:
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"Y({k})") for k in range(ny)]
    c = net.renorm_levels(net.product_levels(xs, ys, nc), nc)
    ok = net.normalised(c, None)
    return net.lines + [f"OUT({k}) = {c[k]};" for k in range(nc)] + [f"OK = {ok};"]


def _div_body(nc: int) -> list[str]:
    """arith._long_division with _div_fixed: scale to leading exponent 0, divide, scale
    back, zero the tail of a non-finite quotient. Leading components that are zero,
    subnormal, inf or NaN are left to the caller (``ok`` false)."""
    net = _Net()
    x = [net.let(f"X({k})") for k in range(nc)]
    y = [net.let(f"Y({k})") for k in range(nc)]
    ex = net.let(f"expo<T>({x[0]})", "I<T>")
    ey = net.let(f"expo<T>({y[0]})", "I<T>")
    regular = net.let(f"normal<T>({x[0]}) & normal<T>({y[0]})", "bool")
    r = net.scale(x, f"-{ex}")
    ys = net.scale(y, f"-{ey}")
    y0 = ys[0]
    digits = []
    for k in range(nc + 1):
        q = net.let(f"{r[0] if k < nc else r} / {y0}")
        digits.append(q)
        if k < nc:
            r = net.remainder_step(r, ys, q, nc, renormalise=k < nc - 1)
    c = net.renorm_levels(digits, nc)
    ok = net.normalised(c, None)
    c = net.scale(c, f"{ex} - {ey}")
    finite = net.let(f"std::fabs({c[0]}) <= std::numeric_limits<T>::max()", "bool")  # not inf, not NaN
    c = [c[0]] + [net.let(f"keep_if<T>({finite}, {ck})") for ck in c[1:]]
    return net.lines + [f"OUT({k}) = {c[k]};" for k in range(nc)] + [f"OK = {ok} & {regular};"]


def _sqrt_body(nc: int) -> list[str]:
    """arith._sqrt_fixed where ``lo <= x_0 <= hi`` (``ok`` false elsewhere)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    inside = net.let(f"((double){xs[0]} >= lo) & ((double){xs[0]} <= hi)", "bool")
    s0 = net.let(f"std::sqrt({xs[0]})")
    h = net.mul(net.let(f"T(1) / {s0}"), "T(0.5)")
    twice = [net.mul(s0, "T(2)")]
    digits = [s0]
    r = net.remainder_step(xs, [s0], s0, nc, renormalise=True)
    for k in range(1, nc + 1):
        d = net.mul(r[0] if k < nc else r, h)
        digits.append(d)
        if k < nc:
            r = net.remainder_step(r, twice + [d], d, nc, renormalise=k < nc - 1)
            twice.append(net.mul(d, "T(2)"))
    c = net.renorm_levels(digits, nc)
    ok = net.normalised(c, None)
    return net.lines + [f"OUT({k}) = {c[k]};" for k in range(nc)] + [f"OK = {ok} & {inside};"]


def _finite(net: _Net, z: str) -> str:
    return net.let(f"std::fabs({z}) <= std::numeric_limits<T>::max()", "bool")


def _add2_body(ny: int) -> list[str]:
    """nc = 2: arith._add2 (AccurateDWPlusDW, errors carried negated) for ``ny = 2`` and
    add_float's DWPlusFP for ``ny = 1``; ``ok`` = finite leading component (arith._finish2
    returns the buffer as it is then)."""
    net = _Net()
    xh, xl = net.let("X(0)"), net.let("X(1)")
    if ny == 1:
        b = net.let("Y(0)")
        sh, n_v = net.negated_two_sum(xh, b, False)
        n_v = net.sub(n_v, xl)
        zh = net.sub(sh, n_v)
        zl = net.sub(net.sub(sh, zh), n_v)
    else:
        yh, yl = net.let("Y(0) * (T)sign"), net.let("Y(1) * (T)sign")
        sh, n_sl = net.negated_two_sum(xh, yh, False)
        th, n_tl = net.negated_two_sum(xl, yl, False)  # _add2's in-place steps are this TwoSum
        n_c = net.sub(n_sl, th)
        vh = net.sub(sh, n_c)
        scratch = net.sub(vh, sh)
        n_vl = net.add(n_c, scratch)
        n_w = net.add(n_tl, n_vl)
        zh = net.sub(vh, n_w)
        zl = net.sub(net.sub(vh, zh), n_w)
    return net.lines + [f"OUT(0) = {zh};", f"OUT(1) = {zl};", f"OK = {_finite(net, zh)};"]


def _mul2_body(ny: int) -> list[str]:
    """nc = 2: arith._mul2_fma (DWTimesDW3) for ``ny = 2``, mul_float's DWTimesFP3 for
    ``ny = 1``; ``ok`` as in :func:`_add2_body`."""
    net = _Net()
    xh, xl = net.let("X(0)"), net.let("X(1)")
    if ny == 1:
        b = net.let("Y(0)")
        ch = net.mul(xh, b)
        n_cl3 = net.let(f"std::fma(-{xh}, {b}, {ch})")
        n_cl3 = net.let(f"std::fma(-{xl}, {b}, {n_cl3})")
    else:
        yh, yl = net.let("Y(0)"), net.let("Y(1)")
        cl2 = net.mul(xl, yl)
        cl2 = net.let(f"std::fma({xh}, {yl}, {cl2})")
        cl2 = net.let(f"std::fma({xl}, {yh}, {cl2})")
        ch = net.mul(xh, yh)
        n_cl3 = net.let(f"std::fma(-{xh}, {yh}, {ch})")
        n_cl3 = net.sub(n_cl3, cl2)
    zh = net.sub(ch, n_cl3)
    zl = net.sub(net.sub(ch, zh), n_cl3)
    return net.lines + [f"OUT(0) = {zh};", f"OUT(1) = {zl};", f"OK = {_finite(net, zh)};"]


_PRELUDE = r"""// Generated by hypermc/mcf/native_source.py: do not edit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

template <class T> struct Bits;
// Integer types of the width of T (one width per loop: the vectoriser needs that).
template <> struct Bits<float> { using U = uint32_t; using I = int32_t; static constexpr int P = 24, BIAS = 127; };
template <> struct Bits<double> { using U = uint64_t; using I = int64_t; static constexpr int P = 53, BIAS = 1023; };
template <class T> using I = typename Bits<T>::I;

// Biased exponent field of x.
template <class T> inline I<T> field(T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  return (I<T>)((u >> (Bits<T>::P - 1)) & (typename Bits<T>::U)(2 * Bits<T>::BIAS + 1));
}
// Whether x is a normal number (not zero, subnormal, inf or NaN).
template <class T> inline bool normal(T x) {
  I<T> e = field(x);
  return (e != 0) & (e != 2 * Bits<T>::BIAS + 1);
}
// torch.frexp(x).exponent for normal x (x = m 2^e, 0.5 <= |m| < 1); 0 otherwise.
template <class T> inline I<T> expo(T x) {
  return (I<T>)normal(x) * (field(x) - (Bits<T>::BIAS - 1));
}
// x where keep, +0 elsewhere (bit mask: a ternary here stops the vectoriser).
template <class T> inline T keep_if(bool keep, T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  u &= (typename Bits<T>::U)0 - (typename Bits<T>::U)keep;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
// k clamped to +-(emax - 2), the step size of arith._scale2.
template <class T> inline I<T> clampi(I<T> k) {
  const I<T> b = std::numeric_limits<T>::max_exponent - 2;
  return std::max<I<T>>(-b, std::min<I<T>>(b, k));
}
// 2^k for |k| <= BIAS - 1 (a normal power of two).
template <class T> inline T pow2(I<T> k) {
  typename Bits<T>::U u = (typename Bits<T>::U)(k + Bits<T>::BIAS) << (Bits<T>::P - 1);
  T x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
"""


def _kernel(name: str, ctype: str, params: str, args_doc: str, variants: list[tuple[str, list[str]]],
            operands: list[str], ncomp: dict[str, int], nout: int) -> str:
    """One exported function: a loop per (condition, body), each specialised on whether
    every operand is element-contiguous (se = 1) or broadcast (se = 0)."""
    out = [f"// {args_doc}; returns the number of elements with ok = 0",
           f'extern "C" int64_t {name}({params}) {{', "  using T = " + ctype + ";"]
    out.append("  constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));")
    out.append("  (void)CANCEL;")
    for cond, body in variants:
        out.append(f"  if ({cond}) {{")
        # every operand: se in {0, 1} (the caller makes anything else planar)
        # the first operand element-contiguous, the second also broadcast (se = 0)
        combos = [[1]]
        for _ in operands[1:]:
            combos = [c + [s] for c in combos for s in (0, 1)]
        for combo in combos:
            test = " && ".join(f"{o}se == {s}" for o, s in zip(operands, combo))
            out.append(f"    if ({test}) {{")
            # one restrict pointer per component stream: no aliasing for the vectoriser
            text = "\n".join(body)
            for o in operands:
                for k in range(ncomp[o]):
                    if f"{o.upper()}({k})" not in text:
                        continue
                    out.append(f"      const T *__restrict__ {o}{k} = {o} + {k} * {o}sc;")
            for k in range(nout):
                out.append(f"      T *__restrict__ out{k} = out + {k} * os;")
            out.append("      uint8_t *__restrict__ okp = ok;")
            # GCC 12 does not vectorise these loops on its own (it gives up on the restrict
            # pointers derived from one base); ``omp simd`` asserts what is true here: no
            # dependence between iterations. It allows no reassociation.
            out.append("      int64_t bad = 0;")
            out.append("#pragma omp simd reduction(+ : bad)")
            out.append("      for (int64_t i = 0; i < n; ++i) {")
            for o, s in zip(operands, combo):
                out.append(f"#define {o.upper()}(k) {o}##k[{'i' if s else '0'}]")
            out.append("#define OUT(k) out##k[i]")
            out.append("#define OK okp[i]")
            out += ["        " + line for line in body]
            out.append("        bad += !OK;")
            for o in operands:
                out.append(f"#undef {o.upper()}")
            out.append("#undef OUT")
            out.append("#undef OK")
            out.append("      }")
            out.append("      return bad;")
            out.append("    }")
        out.append("  }")
    # no variant matched (a layout the caller should not pass): nothing computed, say so
    out.append("  for (int64_t i = 0; i < n; ++i) ok[i] = 0;")
    out.append("  return n;")
    out.append("}")
    return "\n".join(out)


def source(name: str, nc: int) -> str:
    """The C++ translation unit of one component dtype (``"f32"``/``"f64"``) and ``nc``."""
    ctype = DTYPES[name][0]
    common = f"int64_t n, const {ctype} *x, int64_t xse, int64_t xsc, const {ctype} *y, int64_t yse, int64_t ysc"
    both = {"x": nc, "y": nc}
    parts = [_PRELUDE, "}  // namespace", ""]
    if nc == 2:  # the double-word algorithms of arith (no div/sqrt kernels)
        parts.append(_kernel(
            f"mc_add_{name}_2", ctype, f"{common}, int ny, double sign, {ctype} *out, int64_t os, uint8_t *ok",
            "x + sign * y (ny = 2, AccurateDWPlusDW) or x + b (ny = 1, DWPlusFP)",
            [("ny == 1", _add2_body(1)), ("ny != 1", _add2_body(2))], ["x", "y"], both, 2))
        parts.append(_kernel(
            f"mc_mul_{name}_2", ctype, f"{common}, int ny, {ctype} *out, int64_t os, uint8_t *ok",
            "x * y (ny = 2, DWTimesDW3) or x * b (ny = 1, DWTimesFP3)",
            [("ny == 1", _mul2_body(1)), ("ny != 1", _mul2_body(2))], ["x", "y"], both, 2))
        return "\n\n".join(parts) + "\n"
    parts.append(_kernel(
        f"mc_add_{name}_{nc}", ctype, f"{common}, int ny, double sign, {ctype} *out, int64_t os, uint8_t *ok",
        "x + sign * y (ny = nc) or x + b (ny = 1, sign = 1): arith._add_fixed / add_float",
        [("ny == 1", _add_body(nc, 1)), ("ny != 1", _add_body(nc, nc))], ["x", "y"], both, nc))
    parts.append(_kernel(
        f"mc_mul_{name}_{nc}", ctype, f"{common}, int ny, {ctype} *out, int64_t os, uint8_t *ok",
        "x * y (ny = nc) or x * b (ny = 1): arith.mul / mul_float, fixed branch",
        [("ny == 1", _mul_body(nc, 1)), ("ny != 1", _mul_body(nc, nc))], ["x", "y"], both, nc))
    parts.append(_kernel(
        f"mc_div_{name}_{nc}", ctype, f"{common}, {ctype} *out, int64_t os, uint8_t *ok",
        "x / y: arith._long_division + _div_fixed", [("true", _div_body(nc))], ["x", "y"], both, nc))
    parts.append(_kernel(
        f"mc_sqrt_{name}_{nc}", ctype,
        f"int64_t n, const {ctype} *x, int64_t xse, int64_t xsc, double lo, double hi, {ctype} *out, "
        "int64_t os, uint8_t *ok",
        "sqrt(x): arith._sqrt_fixed where lo <= x_0 <= hi", [("true", _sqrt_body(nc))], ["x"], {"x": nc}, nc))
    return "\n\n".join(parts) + "\n"
