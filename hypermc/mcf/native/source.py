"""C++ source of the fused kernels, generated as straight-line code.

Arithmetic. The kernels of add/sub/add_float, mul/mul_float, div and sqrt are the torch
networks of :mod:`hypermc.mcf.fixed` and :mod:`hypermc.mcf.arith` themselves
(``two_sum``, ``add_levels``, ``renorm_levels``, ``normalised``, ``_product_levels``,
``_remainder_step``, ``_add_fixed_network``, ``_mul_fixed_network``, ``_div_digits``,
``_sqrt_digits``, the double-word ``_add2_network``, ``_mul2_fma_network``, ..., and
the general kernels' merge and renormalisation ``_add_general_finite``, ``_renormalized``),
run on symbolic elements by :mod:`hypermc.mcf.native.trace`: every torch rounding
becomes one C++ statement, in the same order and with the same negations, so the list
handling (levels, sorted terms, chains) happens at generation time and the compiler
sees one branch-free expression DAG per element, which it vectorises. What this module
adds around a traced network is its kernel frame: the operands, the scaling of division
to leading exponent 0 (``_scaled``), the range test of the square root, the outputs
and the ``ok`` flag. :mod:`hypermc.mcf.native` compiles the result and checks it against
the torch kernels bit for bit before using it; ``tests/mcf/test_trace.py`` interprets
the traced statements and compares them with the torch networks without a compiler.

Elementary functions. The float64 exp/log/sin/cos/tan/hyperbolic kernels are
:mod:`~hypermc.mcf.elementary`'s own functions traced whole: ``_exp_generic``,
``_expm1_generic``, ``_sinh_cosh_generic``, ``_tanh_generic``, the trig functions on their
fast reduction (``_sin_cos_fast``, ``_tan_fast``) and the first step of log and its
family (``_prepare_*``, ``_asinh_arg``/``_acosh_arg``/``_atanh_arg``, ``_log_reduce``:
:func:`_log_front`). Where such a function divides or takes a square root at three or
more components, :mod:`hypermc.mcf.registry` answers the traced call with the fused
division or square root kernel inlined (:func:`_inline_div`, :func:`_inline_sqrt`: their
one-step scaling and range frames, whose ``frexp``/``ldexp`` rescalings have no
straight-line form), its checks gated like the others. A statement traced twice (the
exp reduction that sinh and cosh share) is emitted once. What this module adds around a
traced function is the kernel frame of :func:`hypermc.mcf.elementary._dispatch`: the
special values the torch path answers itself (non-finite ``x``, the odd functions'
``±0``), flagged, and the finishing of each result (``_finish``). The log family's second
call is ``elementary._log1p_core`` and ``_log_sum`` traced (:func:`_log_core`), from the
start ``log1p(t_0)`` that torch computes (the kernel cannot reproduce torch's
``log1p``); the Newton residual computes its general kernel inline (every residual
cancels by design), and the second form of the kernel, traced under
:func:`hypermc.mcf.fixed.generals_inline`, does so too for the steps that reject MC
numbers made from plain floats (``fixed.short_operand_steps``).

Statements. A body is written once, in a statement language that every backend compiles
as it is: ``T vN = expr;`` (``bool`` and ``mc_int<T>`` for flags and exponents), the
operand components ``X(k)``/``Y(k)``, the results ``OUT(k)`` and the flag ``OK``, and
named operations for everything whose rounding matters: ``mc_mul``, ``mc_div``,
``mc_fma``, ``mc_sqrt``, ``mc_rint``, ``mc_fabs``, the bit helpers (``mc_select<T>``,
``mc_keep_if<T>``, ``mc_pow2<T>``, ``mc_toint<T>``, ...) and the constants
``mc_max_value<T>()``, ``CANCEL``. :func:`prelude` defines them for C++ (plain operators
under ``-ffp-contract=off``), :mod:`hypermc.mcf.native.cuda` for CUDA (the ``*_rn``
intrinsics); no text is rewritten between the two. :class:`_Net` refuses a float
statement with an infix ``*`` or ``/``, the one construct a compiler may contract into a
fused multiply-add.

Why generated rather than hand-written: a hand-written C++ version of these networks with
small term lists (tried first) kept the lists in memory and ran 35-50 ns per element;
straight-line code runs at a few ns.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .. import arith, eft, elementary, fixed, reduce, registry
from ..eft import unpack
from .trace import SymVec, inline, trace

__all__ = [
    "source",
    "fused_source",
    "prelude",
    "op_body",
    "round_body",
    "inline_function",
    "has_sqrt",
    "sqrt_rescales",
    "NCS",
    "DTYPES",
    "FUSED_TILE",
]

NCS = (2, 3, 4)
#: The component dtypes with a double-word square root kernel (float32 nc = 2 computes its
#: square root in float64 arithmetic: arith.engine_dtype).
SQRT2_NAMES = ("f64",)


def has_sqrt(name: str, nc: int) -> bool:
    """Whether the arith library of ``name`` (``"f32"``/``"f64"``) and ``nc`` has a square
    root kernel (all but float32 nc = 2, :data:`SQRT2_NAMES`).

    Example:
        >>> has_sqrt("f64", 2), has_sqrt("f32", 2), has_sqrt("f32", 3)
        (True, False, True)
    """
    return nc != 2 or name in SQRT2_NAMES


#: name -> (C type, unsigned type of the same width, significand bits, exponent bias)
DTYPES = {"f32": ("float", "uint32_t", 24, 127), "f64": ("double", "uint64_t", 53, 1023)}


class _Net:
    """Straight-line code of one element: ``T vN = expr;`` per rounding, in the
    statement language of the module docstring."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0
        # fast-path checks (bool names) of the arith ops traced so far (elementary kernels)
        self.oks: list[str] = []
        # what the body's operand components are (a prologue's values; default X(k)),
        # and what maps its results before they are written (an epilogue; default none)
        self.inputs: list[str] | None = None
        self.finish: Callable[[_Net, list[str]], list[str]] | None = None
        # where the constant tables that traced networks read are declared
        self.tables: _Tables | None = None
        # every statement by its text: a repeated one (the same step traced twice, as the
        # exp reduction shared by sinh and cosh) names the first (statements never change)
        self._named: dict[tuple[str, str], str] = {}

    def use(self, tables: _Tables) -> None:
        """Declare the tables of the networks traced into this body in ``tables``."""
        if self.tables is not None and self.tables is not tables:
            raise ValueError("_Net.use: a body declares its tables in one library's _Tables")
        self.tables = tables

    def table(self, values: list[float]) -> str:
        """The name of a constant table (what :mod:`.trace` asks for ``table[idx]``)."""
        if self.tables is None:
            raise ValueError("_Net.table: a traced network reads a table; call use(tables) before tracing it")
        return self.tables.table(values)

    def read(self, k: int) -> str:
        """Component ``k`` of the operand."""
        return self.let(f"X({k})") if self.inputs is None else self.inputs[k]

    def outputs(self, out: list[str], ok: str) -> list[str]:
        """The body's lines: the statements, ``OUT(k)`` of the results (mapped by
        :attr:`finish` where set) and ``OK``."""
        if self.finish is not None:
            checks = len(self.oks)
            out = self.finish(self, out)
            if len(self.oks) != checks:  # ``ok`` was formed before the epilogue
                raise ValueError("_Net.outputs: the epilogue (finish) traced a checked fast path; its checks would be lost")
        return self.lines + [f"OUT({k}) = {c};" for k, c in enumerate(out)] + [f"OK = {ok};"]

    def let(self, expr: str, ctype: str = "T") -> str:
        if ctype != "mc_int<T>" and (" * " in expr or " / " in expr):
            raise ValueError(f"_Net.let: {expr!r} has an infix product or quotient of floats; write mc_mul / mc_div instead")
        known = self._named.get((ctype, expr))
        if known is not None:
            return known
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"{ctype} {name} = {expr};")
        self._named[ctype, expr] = name
        return name

    def add(self, a: str, b: str) -> str:
        return self.let(f"{a} + {b}")

    def sub(self, a: str, b: str) -> str:
        return self.let(f"{a} - {b}")

    def mul(self, a: str, b: str) -> str:
        return self.let(f"mc_mul({a}, {b})")

    def neg(self, a: str) -> str:
        return self.let(f"-{a}")

    def div(self, a: str, b: str) -> str:
        return self.let(f"mc_div({a}, {b})")

    def fma(self, a: str, b: str, c: str) -> str:
        return self.let(f"mc_fma({a}, {b}, {c})")

    def select(self, cond: str, a: str, b: str) -> str:
        """``torch.where(cond, a, b)`` (bit masks: a ternary stops the vectoriser)."""
        return self.let(f"mc_select<T>({cond}, {a}, {b})")

    def test(self, expr: str) -> str:
        return self.let(expr, "bool")

    def gate(self, mark: int, skip: str) -> None:
        """The checks added since ``mark`` only matter where ``skip`` is false (their
        results are discarded there by a ``where``)."""
        new = self.oks[mark:]
        del self.oks[mark:]
        if new:
            self.oks.append(self.test(f"{skip} | ({' & '.join(new)})"))

    def all_ok(self) -> str:
        return " & ".join(f"({o})" for o in self.oks) if self.oks else "true"

    # The networks below are the torch functions themselves, traced (hypermc.mcf.native.trace).

    def fast_two_sum(self, a: str, b: str) -> tuple[str, str]:
        return trace(self, eft.fast_two_sum, a, b)

    def two_sum(self, a: str, b: str) -> tuple[str, str]:
        return trace(self, fixed.two_sum, a, b)

    def negated_two_sum(self, a: str, b: str, subtract: bool) -> tuple[str, str]:
        """``(s, -e)`` of arith._negated_two_sum."""
        s, ne, _ = trace(self, arith._negated_two_sum, a, b, subtract)
        return s, ne

    def add_levels(self, xs: list[str], ys: list[str], nc: int, exact_first: bool = False) -> list[str]:
        return trace(self, fixed.add_levels, xs, ys, nc, exact_first=exact_first)

    def renorm_levels(self, t: list[str], nc: int) -> list[str]:
        return trace(self, fixed.renorm_levels, t, nc)

    def normalised(self, c: list[str], bound: str | None) -> str:
        """fixed.normalised (``bound``: the operand magnitude of a sum)."""
        return trace(self, _normalised, c, bound)

    def product_levels(self, xs: list[str], ys: list[str], nc: int) -> list[str]:
        return trace(self, arith._product_levels, xs, ys, nc)

    def remainder_step(self, r: list[str], ys: list[str], q: str, nc: int, renormalise: bool, width: int | None = None):
        return trace(self, arith._remainder_step, r, ys, q, nc, renormalise=renormalise, width=width)

    # arith._scale2 on every component (k an int expression), in one step
    def scale_once(self, xs: list[str], k: str) -> list[str]:
        """arith._scale2 where ``|k| <= emax - 2`` (its other two factors are 1: the
        caller checks the range, :func:`_one_step_range`)."""
        f = self.let(f"mc_pow2<T>({k})")
        return [self.mul(x, f) for x in xs]


# ---------------------------------------------------------------- composable emitters
#
# One arith kernel's fast path on named operands: each returns the names of the result's
# components and of its checks (the element's ``ok`` is their conjunction). The bodies of
# the per-op kernels below and the fused expression kernels of
# :mod:`hypermc.mcf.native.fused` (:func:`fused_source`) are built from them, so both
# compute the same roundings.


def _normalised(c: list[torch.Tensor], bound: torch.Tensor | None) -> torch.Tensor:
    """fixed.normalised on a list of components (traced by :meth:`_Net.normalised`)."""
    return fixed.normalised(torch.stack(c, dim=-1), bound)


def _body(net: _Net, c: list[str], oks: list[str]) -> list[str]:
    """The lines of a per-op kernel: ``net``'s statements, the outputs and ``ok``."""
    return net.lines + [f"OUT({k}) = {c[k]};" for k in range(len(c))] + [f"OK = {' & '.join(oks)};"]


def _emit_add(net: _Net, xs: list[str], ys: list[str]) -> tuple[list[str], list[str]]:
    """arith._add_fixed (``ys``: ``nc`` terms) or add_float's fixed branch (one term),
    nc >= 3; ``ys`` enters as it is (a subtraction negates it first)."""
    c, ok = trace(net, arith._add_fixed_network, xs, ys, len(xs))
    return c, [ok]


def _emit_mul(net: _Net, xs: list[str], ys: list[str]) -> tuple[list[str], list[str]]:
    """arith.mul / mul_float, nc >= 3 with FMAs, fixed branch (``ys``: ``nc`` terms or one)."""
    c, ok = trace(net, arith._mul_fixed_network, xs, ys, len(xs))
    return c, [ok]


def _add_body(nc: int, ny: int) -> list[str]:
    """``x + sign * y``: ``sign`` = -1 is the negation of ``_add_fixed``'s ``subtract``
    (a product by -1 is exact, signed zeros and NaN included)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"mc_mul(Y({k}), (T)sign)") for k in range(ny)]
    return _body(net, *_emit_add(net, xs, ys))


def _mul_body(nc: int, ny: int) -> list[str]:
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"Y({k})") for k in range(ny)]
    return _body(net, *_emit_mul(net, xs, ys))


def _add_general_body(nc: int) -> list[str]:
    """``x + sign * y`` (``nc`` components each) by ``arith._add_general``: merge by
    magnitude and renormalise (``arith._add_general_finite``, traced). The second pass over the elements
    whose check ``mc_add`` rejects; ``ok`` false where a result component, the
    renormalisation's sum or the plain sum ``x_0 + y_0`` is not finite (the torch path's
    non-finite branches)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"mc_mul(Y({k}), (T)sign)") for k in range(nc)]
    c, total, naive = trace(net, arith._add_general_finite, xs, ys)
    return _body(net, c, [net.let(_finite_all([*c, total, naive]), "bool")])


def _mul_general_body(nc: int, ny: int) -> list[str]:
    """``x * y`` (``y``: ``nc`` components or one) by ``arith._mul_general``: the product
    levels renormalised by the general kernel (``arith._renormalized``, traced). The second pass over
    the elements whose check ``mc_mul`` rejects; ``ok`` as :func:`_add_general_body`."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    ys = [net.let(f"Y({k})") for k in range(ny)]
    naive = net.mul(xs[0], ys[0])
    c, total = trace(net, arith._renormalized, net.product_levels(xs, ys, nc), naive, nc)
    return _body(net, c, [net.let(_finite_all([*c, total, naive]), "bool")])


def _scaled(net: _Net, x: list[str], y: list[str]) -> tuple[list[str], list[str], str, str, str]:
    """arith._long_division's first step: ``x`` and ``y`` scaled to leading exponent 0
    (``_scale2`` by ``-frexp`` exponents, in one step: :func:`_emit_div`); returns them,
    the exponents and whether both leading components are normal numbers (the scaling is
    exact only then)."""
    ex = net.let(f"mc_expo<T>({x[0]})", "mc_int<T>")
    ey = net.let(f"mc_expo<T>({y[0]})", "mc_int<T>")
    regular = net.let(f"mc_normal<T>({x[0]}) & mc_normal<T>({y[0]})", "bool")
    return net.scale_once(x, f"-{ex}"), net.scale_once(y, f"-{ey}"), ex, ey, regular


def _scaled_back(net: _Net, c: list[str], ex: str, ey: str) -> list[str]:
    """arith._long_division's last step: the quotient scaled by ``2^(ex - ey)``, a zero
    tail behind a leading component that is inf or NaN."""
    c = net.scale_once(c, f"{ex} - {ey}")
    finite = net.let(f"mc_fabs({c[0]}) <= mc_max_value<T>()", "bool")  # not inf, not NaN
    return [c[0]] + [net.let(f"mc_keep_if<T>({finite}, {ck})") for ck in c[1:]]


def _one_step_range(net: _Net, ex: str, ey: str) -> str:
    """Whether scaling by ``2^-ex``, ``2^-ey`` and ``2^(ex - ey)`` takes one step each."""
    b = "(mc_max_exponent<T>() - 2)"
    return net.test(f"({ex} <= {b}) & ({ey} <= {b}) & ({ex} - {ey} <= {b}) & ({ey} - {ex} <= {b})")


def _emit_div(net: _Net, x: list[str], y: list[str]) -> tuple[list[str], list[str]]:
    """arith._long_division with _div_fixed (nc >= 3): scale to leading exponent 0,
    divide, scale back, zero the tail of a non-finite quotient. Leading components that
    are zero, subnormal, inf or NaN are left to the caller (``ok`` false).

    Each scaling is one power of two where ``_scale2`` takes three (so that any exponent
    fits); the elements whose exponents or their difference need more are left to the
    caller too (``ok`` false). Where one step is enough the other two are products by
    ``2^0 = 1``, which change no value, so the results are the same bits, with 18 products
    and their integer bookkeeping fewer at ``nc = 3`` (20-30 % less time per element,
    ``bench_kernels_ab.py --ops div``)."""
    r, ys, ex, ey, regular = _scaled(net, x, y)
    c = trace(net, arith._div_digits, r, ys, len(x))
    ok = net.normalised(c, None)
    c = _scaled_back(net, c, ex, ey)
    return c, [ok, regular, _one_step_range(net, ex, ey)]


def _div_body(nc: int) -> list[str]:
    """:func:`_emit_div` on the kernel's operands x and y."""
    net = _Net()
    x = [net.let(f"X({k})") for k in range(nc)]
    y = [net.let(f"Y({k})") for k in range(nc)]
    return _body(net, *_emit_div(net, x, y))


def _emit_sqrt(net: _Net, xs: list[str], lo: str, hi: str, rescale: bool = False) -> tuple[list[str], list[str]]:
    """arith._sqrt_fixed (nc >= 3) where ``lo <= x_0 <= hi``; ``ok`` false elsewhere,
    unless ``rescale``: then also where ``0 < x_0 < lo`` by arith._sqrt_rescaled's frame,
    ``x = 4^k x'`` with ``x'_0`` in ``[1, 4)`` and ``sqrt(x) = 2^k sqrt(x')``. Scaling
    ``x`` up by ``4^-k`` is exact (a product by a power of two that cannot overflow);
    scaling the result down by ``2^k`` is checked exact by scaling back (``ok`` false
    where a component would lose bits as a subnormal number). Inside the range ``k = 0``:
    the unscaled bits."""
    nc = len(xs)
    inside = net.let(f"((double){xs[0]} >= {lo}) & ((double){xs[0]} <= {hi})", "bool")
    if not rescale:
        c = trace(net, arith._sqrt_digits, xs, nc)
        return c, [net.normalised(c, None), inside]
    below = net.test(f"mc_normal<T>({xs[0]}) & ({xs[0]} > T(0)) & ((double){xs[0]} < {lo})")
    # k = floor((e - 1) / 2) for x_0 in [2^(e-1), 2^e): a truncating division of a
    # positive integer (every exponent of a float is above -2047)
    e = net.let(f"mc_expo<T>({xs[0]}) + 2047", "mc_int<T>")
    k = net.let(f"{e} / 2 - 1024", "mc_int<T>")
    one = _lit(1.0)
    down = net.select(below, net.let(f"mc_pow2<T>(-{k})"), one)
    up = net.select(below, net.let(f"mc_pow2<T>({k})"), one)
    c = trace(net, arith._sqrt_digits, [net.mul(net.mul(x, down), down) for x in xs], nc)
    ok = net.normalised(c, None)
    out = [net.mul(ck, up) for ck in c]
    exact = " & ".join(f"({net.mul(o, down)} == {ck})" for o, ck in zip(out, c))
    return out, [ok, net.test(f"({inside} | {below}) & {exact}")]


def sqrt_rescales(name: str, nc: int) -> bool:
    """Whether the fused nc >= 3 square root of this dtype rescales the leading components
    below its range (:func:`_emit_sqrt`): where the range starts above ``2^-p``, i.e.
    float32 ``nc = 4`` (``[0.25, 2^124]``), which leaves out values that computations
    meet all the time (a squared norm in the unit ball). The other ranges start at
    ``2^-26`` (float32 ``nc = 3``) or below ``2^-800`` (float64), and the frame costs
    25-35 % per element (``bench_ops.py --ops sqrt``), so there the torch path rescales
    the rare elements below it.

    Example:
        >>> sqrt_rescales("f32", 4), sqrt_rescales("f32", 3), sqrt_rescales("f64", 4)
        (True, False, False)
    """
    p = DTYPES[name][2]
    bounds = arith._sqrt_range(torch.float32 if name == "f32" else torch.float64, nc)
    return bounds is not None and bounds[0] > 2.0**-p


def _sqrt_body(name: str, nc: int) -> list[str]:
    """:func:`_emit_sqrt` with the range of the kernel's arguments ``lo`` and ``hi``
    (rescaling below it where :func:`sqrt_rescales`)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nc)]
    return _body(net, *_emit_sqrt(net, xs, "lo", "hi", rescale=sqrt_rescales(name, nc)))


def _inline_div(x: SymVec, y: SymVec) -> Any:
    """arith.div's fused kernel inlined into a traced network (:func:`_emit_div2`,
    :func:`_emit_div`): its one-step scaling frame instead of ``_scale2``'s three steps
    of ``frexp``/``ldexp``, which have no straight-line form; the elements it flags are
    the caller's (the torch path scales them in three steps, same bits where one is
    enough)."""
    return inline(_emit_div2 if len(x) == 2 else _emit_div, x, y)


def _inline_sqrt(x: SymVec, lo: float, hi: float) -> Any:
    """arith.sqrt's fused kernel (nc >= 3: :func:`_emit_sqrt`) inlined into a traced
    network; ``x_0`` outside ``[lo, hi]`` is flagged (the torch path rescales it)."""
    if len(x) == 2:
        return None  # nc = 2: elementary._sqrt's own double-word step is traced
    return inline(_emit_sqrt, x, lo=_lit(lo), hi=_lit(hi))


registry.register_inline("div", _inline_div)
registry.register_inline("sqrt", _inline_sqrt)


def _emit_sqrt2(net: _Net, xs: list[str], lo: str, hi: str) -> tuple[list[str], list[str]]:
    """nc = 2: arith._sqrt2_network where ``lo <= x_0 <= hi`` (``ok`` false elsewhere:
    arith._sqrt2 scales those)."""
    inside = net.let(f"((double){xs[0]} >= {lo}) & ((double){xs[0]} <= {hi})", "bool")
    return trace(net, arith._sqrt2_network, xs[0], xs[1]), [inside]


def _sqrt2_body() -> list[str]:
    """:func:`_emit_sqrt2` with the range of the kernel's arguments ``lo`` and ``hi``."""
    net = _Net()
    xs = [net.let("X(0)"), net.let("X(1)")]
    return _body(net, *_emit_sqrt2(net, xs, "lo", "hi"))


def _finite(net: _Net, z: str) -> str:
    return net.let(f"mc_fabs({z}) <= mc_max_value<T>()", "bool")


def _dw_add_float(net: _Net, xs: list[str], b: str) -> list[str]:
    """arith._add_float2 (DWPlusFP, errors carried negated), traced."""
    return trace(net, arith._add_float2_network, xs[0], xs[1], b)


def _dw_add(net: _Net, xs: list[str], ys: list[str]) -> list[str]:
    """arith._add2 (AccurateDWPlusDW, errors carried negated), traced; ``ys`` signed."""
    return trace(net, arith._add2_network, *xs, *ys)


def _dw_mul_float(net: _Net, xs: list[str], b: str) -> list[str]:
    """arith._mul_float2_fma (DWTimesFP3, ``cl3`` carried negated), traced."""
    return trace(net, arith._mul_float2_fma_network, xs[0], xs[1], b)


def _dw_mul(net: _Net, xs: list[str], ys: list[str]) -> list[str]:
    """arith._mul2_fma (DWTimesDW3, ``cl3`` carried negated), traced."""
    return trace(net, arith._mul2_fma_network, *xs, *ys)


def _emit_add2(net: _Net, xs: list[str], ys: list[str]) -> tuple[list[str], list[str]]:
    """nc = 2: :func:`_dw_add` (two terms ``ys``) or :func:`_dw_add_float` (one); ``ok`` =
    finite leading component (arith._finish2 returns the buffer as it is then)."""
    z = _dw_add_float(net, xs, ys[0]) if len(ys) == 1 else _dw_add(net, xs, ys)
    return z, [_finite(net, z[0])]


def _emit_mul2(net: _Net, xs: list[str], ys: list[str]) -> tuple[list[str], list[str]]:
    """nc = 2: :func:`_dw_mul` (two terms ``ys``) or :func:`_dw_mul_float` (one); ``ok`` as
    in :func:`_emit_add2`."""
    z = _dw_mul_float(net, xs, ys[0]) if len(ys) == 1 else _dw_mul(net, xs, ys)
    return z, [_finite(net, z[0])]


def _add2_body(ny: int) -> list[str]:
    """nc = 2: arith._add2 (AccurateDWPlusDW, errors carried negated) for ``ny = 2`` and
    add_float's DWPlusFP for ``ny = 1`` (:func:`_emit_add2`)."""
    net = _Net()
    xs = [net.let("X(0)"), net.let("X(1)")]
    ys = [net.let("Y(0)")] if ny == 1 else [net.let("mc_mul(Y(0), (T)sign)"), net.let("mc_mul(Y(1), (T)sign)")]
    return _body(net, *_emit_add2(net, xs, ys))


def _mul2_body(ny: int) -> list[str]:
    """nc = 2: arith._mul2_fma (DWTimesDW3) for ``ny = 2``, mul_float's DWTimesFP3 for
    ``ny = 1`` (:func:`_emit_mul2`)."""
    net = _Net()
    xs = [net.let("X(0)"), net.let("X(1)")]
    ys = [net.let(f"Y({k})") for k in range(ny)]
    return _body(net, *_emit_mul2(net, xs, ys))


def _emit_div2(net: _Net, x: list[str], y: list[str]) -> tuple[list[str], list[str]]:
    """nc = 2: arith._long_division with _div2 (three quotient digits, the remainders by
    DWTimesFP3 and AccurateDWPlusDW, the digits summed by FastTwoSum and DWPlusFP) on
    operands scaled to leading exponent 0, the quotient scaled back. ``ok`` false for
    leading components that are zero, subnormal, inf or NaN (the caller's general
    kernel takes those); for the others every intermediate leading component is finite
    (operands in [0.5, 1)), which is when _div2 and its _finish2 steps return their
    buffers unchanged. The scalings take one step each, as in :func:`_emit_div`."""
    xs, ys, ex, ey, regular = _scaled(net, x, y)
    yh = ys[0]
    leads = []
    q1 = net.div(xs[0], yh)
    r = xs
    digits = [q1]
    for _ in range(2):
        p = _dw_mul_float(net, ys, digits[-1])
        r = _dw_add(net, r, [net.neg(p[0]), net.neg(p[1])])  # arith.sub
        leads += [p[0], r[0]]
        digits.append(net.div(r[0], yh))
    qh, ql = net.fast_two_sum(digits[0], digits[1])
    out = _dw_add_float(net, [qh, ql], digits[2])
    finite = [_finite(net, t) for t in [*leads, out[0], q1]]
    c = _scaled_back(net, out, ex, ey)
    return c, [regular, *finite, _one_step_range(net, ex, ey)]


def _div2_body() -> list[str]:
    """nc = 2: :func:`_emit_div2` on the kernel's operands x and y."""
    net = _Net()
    x = [net.let(f"X({k})") for k in range(2)]
    y = [net.let(f"Y({k})") for k in range(2)]
    return _body(net, *_emit_div2(net, x, y))


def _emit_div_engine(net: _Net, xs: list[str], ys: list[str]) -> tuple[list[str], list[str]]:
    """nc = 2 float32 division in the float64 engine (arith.div, div_float, rdiv_float:
    ``_engine_sum``, one float64 division, ``_split_engine`` with the sign of
    ``x_0 / y_0``); either operand may be one plain term. No check: the engine path has
    no fallback."""

    def engine_sum(terms: list[str]) -> str:
        total = net.let(f"(double){terms[-1]}", "double")
        for t in reversed(terms[:-1]):
            total = net.let(f"{total} + (double){t}", "double")
        return total

    z = net.let(f"mc_div({engine_sum(xs)}, {engine_sum(ys)})", "double")
    sign = net.div(xs[0], ys[0])
    c0 = net.let(f"mc_copysign((T){z}, {sign})")
    rest = net.let(f"{z} - (double){c0}", "double")
    finite = _finite(net, c0)
    return [c0, net.let(f"mc_keep_if<T>({finite}, (T){rest})")], []


# ------------------------------------------------------------------ elementary kernels
#
# hypermc.mcf.elementary's generic float64 path (exp: Tang's table reduction + Taylor
# series; log: reduction, Newton's iteration on exp) traced rounding for rounding: its
# list ops (``_add``, ``_add_nc``, ``_add_f``, ``_mul``, ``_mul_f``, ``_div``) are the
# inline double-word formulas at two components and arith's checked fixed networks at
# three or more; every fixed-network check the torch path would act on becomes part of
# the element's ``ok`` (a failed check sends the element through the torch path, where
# the general kernel recomputes that step), except where a ``where`` discards the result
# and where the network asks for the general kernel inline (``fixed.patch(inline=True)``,
# the Newton residual; ``fixed.short_operand_steps`` in the log core's second form).


def _lit(v: float) -> str:
    return f"T({float(v).hex()})"


def _lpad(a: list[str], n: int) -> list[str]:
    return a + ["T(0)"] * (n - len(a))


class _Tables:
    """The constant tables of one float64 library's kernels, emitted as C++ arrays: those
    a traced network reads (:meth:`table`) and the sin/cos tables (:meth:`trig`)."""

    def __init__(self) -> None:
        self.decls: list[str] = []
        self.names: set[str] = set()

    def constants(self, nc: int):
        return elementary._constants(torch.float64, nc, torch.device("cpu"))

    def table(self, values: list[float]) -> str:
        """The name of a constant float64 array of ``values`` (declared once, named by
        its content, so every kernel that reads the same table shares it)."""
        text = ", ".join(float(v).hex() for v in values)
        name = "TAB_" + hashlib.sha256(text.encode()).hexdigest()[:12]
        if name not in self.names:
            self.names.add(name)
            self.decls.append(f"const double {name}[{len(values)}] = {{{text}}};")
        return name

    def trig(self, nc: int):
        """The constants of sin/cos (:func:`elementary._trig_constants`)."""
        return elementary._trig_constants(torch.float64, nc, torch.device("cpu"))


def _t_finish(net: _Net, a: list[str]) -> list[str]:
    """elementary._finish (a zero tail behind a non-finite leading component), traced."""
    return trace(net, elementary._finish, a)


def _log_front(fn: str, x: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """elementary's ``fn`` (log, log1p, asinh, acosh, atanh) of a finite float64 ``x`` up
    to the Newton core, composed of the steps its torch path takes: the preparation in
    the input's dtype (``_prepare_*``), the argument of the logarithm (``_asinh_arg``,
    ``_acosh_arg``, ``_atanh_arg``) and ``_log_reduce``. Returns ``(t, e, tiny, regular)``:
    ``tiny`` where the result is ``t`` itself (log, log1p: ``_log1p_tiny``), ``regular``
    false where the torch path takes another branch (``w_0`` not positive and finite;
    acosh ``x = 1``, atanh's pole). The kernel generator traces this function; the sign,
    the factor 1/2 of atanh and the odd functions' tiny case stay with the caller.
    ``fn="log_masked"``: ``x`` is ``s`` followed by ``plus_one`` as 0 or 1, the operands
    of ``elementary._log1p_masked_generic``; ``fn="acosh_t"``: ``x`` is ``t = x - 1``, the
    operand of ``elementary._acosh_generic``; ``fn="atanh_ad"``: ``x`` is ``a = |x|``
    followed by ``den = 1 - |x|``, of ``elementary._atanh_generic`` (a narrower dtype's
    log, log1p, acosh and atanh prepare them in their own dtype and convert them to
    double-words)."""
    el = elementary
    shift, good = None, None
    if fn == "log_masked":  # elementary._log1p_masked_generic's own operands: s, then plus_one as 0/1
        s, plus_one = list(x[:-1]), x[-1] != 0
    elif fn in ("log", "log1p"):
        packed, plus_one = (el._prepare_log if fn == "log" else el._prepare_log1p)(torch.stack(x, -1))
        s = unpack(packed)
    elif fn == "asinh":
        s, plus_one, shift = el._asinh_arg(el._abs_sign(x)[0])
    elif fn in ("acosh", "acosh_t"):  # acosh_t: x is t = x - 1 itself (elementary._acosh_generic's operand)
        t = el._sanitize(list(x) if fn == "acosh_t" else unpack(el._prepare_acosh(torch.stack(x, -1))[0]))
        good = t[0] > 0  # x = 1 (t = 0) is left to the torch path
        s, plus_one, shift = el._acosh_arg(t)
    elif fn in ("atanh", "atanh_ad"):  # atanh_ad: x is a = |x| then den = 1 - |x| (elementary._atanh_generic's)
        if fn == "atanh_ad":
            a, den = el._sanitize(list(x[: len(x) // 2])), el._sanitize(list(x[len(x) // 2 :]))
        else:
            a_packed, den_packed, _ = el._prepare_atanh(torch.stack(x, -1))
            a, den = el._sanitize(unpack(a_packed)), el._sanitize(unpack(den_packed))
        good = den[0] != 0  # the pole |x| = 1
        s, plus_one = el._atanh_arg(a, den)
    else:
        raise ValueError(f"_log_front: fn must be one of log, log1p, log_masked, asinh, acosh, acosh_t, atanh, atanh_ad; got {fn!r}")
    t, e, regular, _ = el._log_reduce(s, plus_one, shift)
    tiny = el._log1p_tiny(s, plus_one) if fn in ("log", "log1p", "log_masked") else torch.zeros_like(regular)
    return t, e, tiny, regular if good is None else regular & good


def _log_reduce_body(nc: int, fn: str = "log") -> list[str]:
    """:func:`_log_front` (traced, every step in float64): outputs ``t`` (nc components),
    ``e`` and whether the result is ``t`` itself. ``ok`` false where the torch path takes
    another branch (non-finite ``x``; log: ``x_0`` not a positive normal number; the odd
    functions: ``x = ±0``; acosh: ``x <= 1``; ``w_0`` not a positive normal number; atanh's
    pole; log_masked: ``s_0`` zero, or not a positive normal number where ``plus_one`` is
    false; acosh_t: ``t_0 <= 0``) and where a check fails. log_masked reads ``nc + 1``
    operand components, atanh_ad ``2 nc``."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range({"log_masked": nc + 1, "atanh_ad": 2 * nc}.get(fn, nc))]
    finite = _finite_all(xs)
    if fn == "log_masked":  # log1p(s) where plus_one, log(s) elsewhere
        log_ok = f"mc_normal<T>({xs[0]}) & ({xs[0]} > T(0))"
        good = net.test(f"{finite} & ({xs[0]} != T(0)) & (({xs[-1]} != T(0)) | ({log_ok}))")
    elif fn == "log":
        good = net.test(f"mc_normal<T>({xs[0]}) & ({xs[0]} > T(0)) & {finite}")
    elif fn == "acosh":
        good = net.test(f"{finite} & ({xs[0]} >= T(1))")
    else:
        good = net.test(f"{finite} & ({xs[0]} != T(0))")
    xs = [net.let(f"mc_keep_if<T>({good}, {c})") for c in xs]
    t, e, tiny, regular = trace(net, functools.partial(_log_front, fn), xs, float64_literals=True)
    outs = t + [e, net.let(f"mc_select<T>({tiny}, T(1), T(0))")]
    return net.lines + [f"OUT({k}) = {c};" for k, c in enumerate(outs)] + [f"OK = {good} & {regular} & {net.all_ok()};"]


def _log_core(t: list[torch.Tensor], e: torch.Tensor, tiny: torch.Tensor, start: torch.Tensor) -> list[torch.Tensor]:
    """The log family's second step (traced): ``elementary._log1p_core`` from ``start =
    log1p(t_0)``, ``elementary._log_sum`` (``e ln2 + y``), and ``t`` itself where ``tiny``
    (1.0) holds."""
    el = elementary
    return el._lwhere(tiny != 0, t, el._log_sum(e, el._log1p_core(t, start)))


def _log_core_body(nc: int, tables: _Tables, general: bool = False) -> list[str]:
    """:func:`_log_core` traced; operand x holds ``(t, e, tiny)`` from
    :func:`_log_reduce_body`, operand y the Newton start ``log1p(t_0)`` (torch's, which
    the kernel cannot reproduce). ``ok`` where ``tiny`` or every check passes.

    ``general``: traced under :func:`hypermc.mcf.fixed.generals_inline`, every checked
    step computes arith's general kernel inline where its fixed network rejects an
    element, so short expansions (MC numbers made from plain floats, whose zero tails
    fail the series' product checks) are not flagged; it costs more per element, so
    :func:`hypermc.mcf.native.log` runs it only on what the plain core flags or on inputs
    that are mostly short (``mc_log_core_general``; nc >= 3, where the two differ)."""
    net = _Net()
    t = [net.let(f"X({k})") for k in range(nc)]
    e, tiny, start = net.let(f"X({nc})"), net.let(f"X({nc + 1})"), net.let("Y(0)")
    net.use(tables)
    with fixed.generals_inline() if general else contextlib.nullcontext():
        y = trace(net, _log_core, t, e, tiny, start, float64_literals=True)
    return net.outputs(_t_finish(net, y), f"{net.test(f'{tiny} != T(0)')} | {net.all_ok()}")


#: float32 component counts whose elementary functions have float64 kernels of their own
#: (``{op}_f32x{nx}`` in the nc = 2 library, :func:`_narrow_body`): exp, expm1, sinh/cosh,
#: tanh, sin/cos and tan.
NARROW_INPUTS = (3, 4)


def _narrow_body(build: Callable[..., list[str]], nx: int, groups: int, exact: bool, odd: bool = False) -> list[str]:
    """A float64 nc = 2 body (``build(net=...)``) for a float32 expansion of ``nx``
    components, float32 results: :mod:`elementary`'s whole path for such an input in
    one kernel. The operand is the float32 components converted to float64 (exact). The
    body reads the expansion itself (``exact``: sin, cos, tan, whose reduction needs it)
    or the double-word of ``elementary._expansion64`` (traced); each of its ``groups``
    results (two components each) is rounded to ``nx`` float32 components by
    ``elementary._rounded_to`` (traced: ``round_f32`` is the float32 rounding, the values
    stay in the float64 type). ``ok`` false also for a non-finite ``x_0`` (the torch path's
    special values) and, for the ``odd`` functions, a zero ``x_0`` (the torch path returns
    ``x`` there, whatever its tail)."""
    net = _Net()
    xs = [net.let(f"X({k})") for k in range(nx)]
    if exact:
        net.inputs = xs
    else:
        zero = f" & ({xs[0]} != T(0))" if odd else ""
        net.oks.append(net.test(f"(mc_fabs({xs[0]}) <= mc_max_value<T>()){zero}"))
        net.inputs = trace(net, elementary._expansion64, xs, 2)

    def finish(net: _Net, out: list[str]) -> list[str]:
        return [c for g in range(groups) for c in trace(net, elementary._rounded_to, out[2 * g : 2 * g + 2], torch.float32, nx)]

    net.finish = finish
    return build(net=net)


def _finite_all(xs: list[str]) -> str:
    """Whether every component is finite (a non-finite tail behind a finite lead is not
    an expansion; the torch path decides what NaN it gives)."""
    return " & ".join(f"(mc_fabs({c}) <= mc_max_value<T>())" for c in xs)


def _unary_head(net: _Net, nc: int, tables: _Tables, zero_ok: bool) -> tuple[list[str], str]:
    """The operand's components, zeroed where they are not finite or ``|x_0|`` exceeds
    exp's bound (and, unless ``zero_ok``, where ``x_0 = 0``: the odd functions' ``±0``),
    and the flag of the others."""
    xs = [net.read(k) for k in range(nc)]
    regular = net.test(
        f"(mc_fabs({xs[0]}) <= {_lit(tables.constants(nc).bound)}) & {_finite_all(xs)}" + ("" if zero_ok else f" & ({xs[0]} != T(0))")
    )
    return [net.let(f"mc_keep_if<T>({regular}, {c})") for c in xs], regular


def _outputs(net: _Net, out: list[str], regular: str) -> list[str]:
    return net.outputs(out, f"{regular} & {net.all_ok()}")


def _traced_body(
    generic: Callable[..., list[torch.Tensor]], nc: int, tables: _Tables, net: _Net | None = None, zero_ok: bool = False
) -> list[str]:
    """elementary's float64 ``generic`` (``_exp_generic``, ``_expm1_generic``,
    ``_sinh_cosh_generic``, ``_tanh_generic``) traced whole, its results (groups of ``nc``
    components) finished by ``elementary._finish``. ``ok`` false for ``x_0`` not finite or
    beyond exp's bound (complete over/underflow), unless ``zero_ok`` for ``x_0 = 0`` (the
    odd functions' ``±0``, which the torch path returns as they are), and where a fixed
    network's check fails."""
    net = net or _Net()
    xs, regular = _unary_head(net, nc, tables, zero_ok=zero_ok)
    net.use(tables)
    y = trace(net, generic, xs, float64_literals=True)
    out = [c for g in range(0, len(y), nc) for c in _t_finish(net, y[g : g + nc])]
    return _outputs(net, out, regular)


def _sin_cos_body(nc: int, tables: _Tables, nx: int | None = None, tan: bool = False, net: _Net | None = None) -> list[str]:
    """elementary's sin and cos on the fast reduction (``elementary._sin_cos_fast``, traced;
    float64 results at ``nc`` components, input at ``nx``, default ``nc``): outputs ``sin
    x`` then ``cos x`` (2 nc), or with ``tan`` their quotient (``elementary._tan_fast``);
    ``ok`` false for non-finite or zero ``x_0`` (the torch path's special values), where
    the torch path takes the exact reduction and where a fixed network's check fails."""
    net = net or _Net()
    xs = [net.read(k) for k in range(nx or nc)]
    regular = net.test(f"{_finite_all(xs)} & ({xs[0]} != T(0))")
    xs = [net.let(f"mc_keep_if<T>({regular}, {c})") for c in xs]
    net.use(tables)
    if tan:
        y, good = trace(net, elementary._tan_fast, xs, nc, float64_literals=True)
        out = _t_finish(net, y)
    else:
        sin_x, cos_x, good = trace(net, elementary._sin_cos_fast, xs, nc, float64_literals=True)
        out = _t_finish(net, sin_x) + _t_finish(net, cos_x)
    return net.outputs(out, f"{regular} & {good} & {net.all_ok()}")


_PRELUDE = r"""// Generated by hypermc/mcf/native/source.py: do not edit.
#include <algorithm>
#include <memory>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

template <class T> struct Bits;
// Integer types of the width of T (one width per loop: the vectoriser needs that).
template <> struct Bits<float> { using U = uint32_t; using I = int32_t; static constexpr int P = 24, BIAS = 127; };
template <> struct Bits<double> { using U = uint64_t; using I = int64_t; static constexpr int P = 53, BIAS = 1023; };
template <class T> using mc_int = typename Bits<T>::I;

// The statement language of the kernel bodies (the CUDA prelude defines the same names):
// each product, quotient, square root and fused multiply-add is one IEEE round-to-nearest
// operation; the library is compiled with -ffp-contract=off, so none is contracted.
inline float mc_mul(float a, float b) { return a * b; }
inline double mc_mul(double a, double b) { return a * b; }
inline float mc_div(float a, float b) { return a / b; }
inline double mc_div(double a, double b) { return a / b; }
inline float mc_fma(float a, float b, float c) { return std::fma(a, b, c); }
inline double mc_fma(double a, double b, double c) { return std::fma(a, b, c); }
inline float mc_sqrt(float a) { return std::sqrt(a); }
inline double mc_sqrt(double a) { return std::sqrt(a); }
inline float mc_fabs(float a) { return std::fabs(a); }
inline double mc_fabs(double a) { return std::fabs(a); }
inline float mc_rint(float a) { return std::rint(a); }
inline double mc_rint(double a) { return std::rint(a); }
inline float mc_copysign(float a, float b) { return std::copysign(a, b); }
inline double mc_copysign(double a, double b) { return std::copysign(a, b); }
// std::max / std::min of integers (the first operand where they compare equal)
template <class T> inline mc_int<T> mc_imax(mc_int<T> a, mc_int<T> b) { return std::max<mc_int<T>>(a, b); }
template <class T> inline mc_int<T> mc_imin(mc_int<T> a, mc_int<T> b) { return std::min<mc_int<T>>(a, b); }
// k << s of an integer (shifted as unsigned: defined for every k) and an integer's bits as T
template <class T> inline mc_int<T> mc_shl(mc_int<T> k, int s) { return (mc_int<T>)((typename Bits<T>::U)k << s); }
template <class T> inline T mc_bits_as(mc_int<T> k) {
  T x;
  std::memcpy(&x, &k, sizeof x);
  return x;
}
// torch.clamp(k, lo, hi) of an integer (compares and selects: GCC vectorises them)
template <class T> inline mc_int<T> mc_iclamp(mc_int<T> k, mc_int<T> lo, mc_int<T> hi) {
  const mc_int<T> a = k < lo ? lo : k;
  return a > hi ? hi : a;
}
// finfo.max, the smallest normal number and the largest binary exponent + 1 of T
template <class T> inline constexpr T mc_max_value() { return std::numeric_limits<T>::max(); }
template <class T> inline constexpr T mc_min_normal() { return std::numeric_limits<T>::min(); }
template <class T> inline constexpr int mc_max_exponent() { return std::numeric_limits<T>::max_exponent; }

// Biased exponent field of x.
template <class T> inline mc_int<T> mc_field(T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  return (mc_int<T>)((u >> (Bits<T>::P - 1)) & (typename Bits<T>::U)(2 * Bits<T>::BIAS + 1));
}
// The sign bit of x (std::signbit stops GCC's vectoriser).
template <class T> inline bool mc_sign_bit(T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  return (u >> (8 * sizeof(T) - 1)) != 0;
}
// Whether x is a normal number (not zero, subnormal, inf or NaN).
template <class T> inline bool mc_normal(T x) {
  mc_int<T> e = mc_field(x);
  return (e != 0) & (e != 2 * Bits<T>::BIAS + 1);
}
// torch.frexp(x).exponent for normal x (x = m 2^e, 0.5 <= |m| < 1); 0 otherwise.
template <class T> inline mc_int<T> mc_expo(T x) {
  return (mc_int<T>)mc_normal(x) * (mc_field(x) - (Bits<T>::BIAS - 1));
}
// x where keep, +0 elsewhere (bit mask: a ternary here stops the vectoriser).
template <class T> inline T mc_keep_if(bool keep, T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  u &= (typename Bits<T>::U)0 - (typename Bits<T>::U)keep;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
// c ? a : b, by bit masks.
template <class T> inline T mc_select(bool c, T a, T b) {
  typename Bits<T>::U ua, ub, m = (typename Bits<T>::U)0 - (typename Bits<T>::U)c;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  ua = (ua & m) | (ub & ~m);
  std::memcpy(&a, &ua, sizeof a);
  return a;
}
// (mc_int<T>)k for an integer-valued k with |k| < 2^(P - 2), without a float-to-int
// conversion (AVX2 has none for 64-bit integers): k + 1.5 2^(P-1) holds k in its low bits.
template <class T> inline mc_int<T> mc_toint(T k) {
  const T magic = T(3) * (T)((typename Bits<T>::U)1 << (Bits<T>::P - 2));
  T t = k + magic;
  typename Bits<T>::U u, um;
  std::memcpy(&u, &t, sizeof u);
  std::memcpy(&um, &magic, sizeof um);
  return (mc_int<T>)(u - um);
}
// (T)i for |i| < 2^(P - 2), the inverse of toint.
template <class T> inline T mc_tofloat(mc_int<T> i) {
  const T magic = T(3) * (T)((typename Bits<T>::U)1 << (Bits<T>::P - 2));
  typename Bits<T>::U um;
  std::memcpy(&um, &magic, sizeof um);
  um += (typename Bits<T>::U)i;
  T t;
  std::memcpy(&t, &um, sizeof t);
  return t - magic;
}
// torch.frexp(x).mantissa for normal x: x with its exponent set to -1.
template <class T> inline T mc_mant(T x) {
  typename Bits<T>::U u, f = (typename Bits<T>::U)(2 * Bits<T>::BIAS + 1) << (Bits<T>::P - 1);
  std::memcpy(&u, &x, sizeof u);
  u = (u & ~f) | ((typename Bits<T>::U)(Bits<T>::BIAS - 1) << (Bits<T>::P - 1));
  std::memcpy(&x, &u, sizeof x);
  return x;
}
// x rounded to the nearest float32, held in T (float64 kernels of float32 results).
template <class T> inline T mc_round_f32(T x) { return (T)(float)x; }
// 2^k for |k| <= BIAS - 1 (a normal power of two).
template <class T> inline T mc_pow2(mc_int<T> k) {
  typename Bits<T>::U u = (typename Bits<T>::U)(k + Bits<T>::BIAS) << (Bits<T>::P - 1);
  T x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
"""


def _kernel(
    name: str,
    ctype: str,
    params: str,
    args_doc: str,
    variants: list[tuple[str, list[str]]],
    operands: list[str],
    ncomp: dict[str, int],
    nout: int,
    broadcast: bool = True,
    stages: int = 1,
    io: str | None = None,
) -> str:
    """One exported function: a loop per (condition, body), each specialised on whether
    every operand is element-contiguous (se = 1) or broadcast (se = 0; not without
    ``broadcast``). ``stages > 1``: each loop as that many stage functions over tiles of
    elements (:func:`_staged_loop`). ``io`` (default ``ctype``): the C type of the operand
    and output streams, converted to and from ``ctype`` on load and store (``"float"``
    for the float32 expansions of :func:`_narrow_body`, whose outputs are float32 values)."""
    io = io or ctype
    defs: list[str] = []  # the stage functions of a staged kernel
    out = [
        f"// {args_doc}; returns the number of elements with ok = 0",
        f'extern "C" int64_t {name}({params}) {{',
        "  using T = " + ctype + ";",
    ]
    out.append("  constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));")
    out.append("  (void)CANCEL;")
    for vi, (cond, body) in enumerate(variants):
        out.append(f"  if ({cond}) {{")
        # every operand: se in {0, 1} (the caller makes anything else planar)
        # the first operand element-contiguous, the second also broadcast (se = 0)
        combos = [[1]]
        for _ in operands[1:]:
            combos = [c + [s] for c in combos for s in ((0, 1) if broadcast else (1,))]
        for ci, combo in enumerate(combos):
            test = " && ".join(f"{o}se == {s}" for o, s in zip(operands, combo))
            out.append(f"    if ({test}) {{")
            if stages > 1:
                fns, call = _staged_loop(f"{name}_v{vi}_c{ci}", ctype, body, operands, ncomp, nout, combo, stages, io)
                defs += fns
                out += ["      " + line for line in call] + ["    }"]
                continue
            # one restrict pointer per component stream: no aliasing for the vectoriser
            text = "\n".join(body)
            for o in operands:
                for k in range(ncomp[o]):
                    if f"{o.upper()}({k})" not in text:
                        continue
                    out.append(f"      const {io} *__restrict__ {o}{k} = {o} + {k} * {o}sc;")
            for k in range(nout):
                out.append(f"      {io} *__restrict__ out{k} = out + {k} * os;")
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
    return "\n\n".join(defs + ["\n".join(out)])


#: Elements per tile of a staged kernel (:func:`_staged_loop`).
STAGE_TILE = 128
#: Statements per stage of a staged kernel (measured flat between ~130 and ~400).
STAGE_STATEMENTS = 300


def _stage_count(body: list[str]) -> int:
    """How many stages a kernel body of this length is split into (1: not split)."""
    return max(1, round(len(body) / STAGE_STATEMENTS))


_DECL = re.compile(r"^(T|bool|mc_int<T>) (v\d+) = ")


def _staged_loop(
    prefix: str,
    ctype: str,
    body: list[str],
    operands: list[str],
    ncomp: dict[str, int],
    nout: int,
    combo: list[int],
    stages: int,
    io: str,
) -> tuple[list[str], list[str]]:
    """One kernel loop as ``stages`` functions that each run a consecutive slice of the
    body's statements over a tile of :data:`STAGE_TILE` elements, the values a later
    slice reads passing through tile buffers (L1/L2-resident); and the tile loop that
    calls them. The statements and their order are unchanged, so the bits are the same.

    Why: GCC's time on one straight-line loop of thousands of statements grows much
    faster than linearly (float64 nc = 3 exp alone: 83 s at ``-O3``; the nc = 4
    elementary library did not finish in 20 minutes), and the vectorised body keeps
    far more values live than there are registers, so half its instructions were spills.
    Split into 8 stages the same exp compiles in 3 s and runs 1.6x faster (nc = 4: 7 s,
    4.4x faster than the torch networks)."""
    n = len(body)
    cuts = [round(n * k / stages) for k in range(stages + 1)]
    parts = [body[cuts[k] : cuts[k + 1]] for k in range(stages)]
    kinds = {m.group(2): m.group(1) for line in body if (m := _DECL.match(line))}
    later_reads = []
    for k in range(stages):
        later_reads.append(set(re.findall(r"\bv\d+\b", " ".join(line for part in parts[k + 1 :] for line in part))))
    slot: dict[str, int] = {}
    fns = []
    streams = [(o, c) for o in operands for c in range(ncomp[o])]
    for k, part in enumerate(parts):
        here = [m.group(2) for line in part if (m := _DECL.match(line))]
        reads = sorted(set(re.findall(r"\bv\d+\b", " ".join(part))) - set(here), key=lambda v: int(v[1:]))
        writes = [v for v in here if v in later_reads[k]]
        for v in writes:
            slot[v] = len(slot)
        store = {"T": "T", "mc_int<T>": "mc_int<T>", "bool": "uint8_t"}
        lines = [
            f"static void __attribute__((noinline)) {prefix}_s{k}(int64_t m, const {io} *const *in, {io} *const *outs, "
            "uint8_t *okp, unsigned char *buf) {",
            f"  using T = {ctype};",
            "  constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));",
            "  (void)CANCEL; (void)in; (void)outs; (void)okp; (void)buf;",
        ]
        text = "\n".join(part)
        for i, (o, c) in enumerate(streams):
            if f"{o.upper()}({c})" in text:
                lines.append(f"  const {io} *__restrict__ {o}{c} = in[{i}];")
        for c in range(nout):
            if f"OUT({c})" in text:
                lines.append(f"  {io} *__restrict__ out{c} = outs[{c}];")
        for v in reads:
            t = store[kinds[v]]
            lines.append(f"  const {t} *__restrict__ r_{v} = (const {t} *)(buf + {slot[v]} * 8 * {STAGE_TILE});")
        for v in writes:
            t = store[kinds[v]]
            lines.append(f"  {t} *__restrict__ w_{v} = ({t} *)(buf + {slot[v]} * 8 * {STAGE_TILE});")
        lines.append("#pragma omp simd")
        lines.append("  for (int64_t i = 0; i < m; ++i) {")
        for o, s in zip(operands, combo):
            lines.append(f"#define {o.upper()}(k) {o}##k[{'i' if s else '0'}]")
        lines.append("#define OUT(k) out##k[i]")
        lines.append("#define OK okp[i]")
        lines += [f"    {kinds[v]} {v} = r_{v}[i];" for v in reads]
        lines += ["    " + line for line in part]
        lines += [f"    w_{v}[i] = {v};" for v in writes]
        for o in operands:
            lines.append(f"#undef {o.upper()}")
        lines += ["#undef OUT", "#undef OK", "  }", "}"]
        fns.append("\n".join(lines))
    call = [
        f"std::unique_ptr<unsigned char[]> buf(new unsigned char[{max(1, len(slot))} * 8 * {STAGE_TILE}]);",
        f"const {io} *in[{max(1, len(streams))}];",
        f"{io} *outs[{nout}];",
        "int64_t bad = 0;",
        f"for (int64_t base = 0; base < n; base += {STAGE_TILE}) {{",
        f"  const int64_t m = std::min<int64_t>({STAGE_TILE}, n - base);",
        *[f"  in[{i}] = {o} + {c} * {o}sc + ({o}se ? base : 0);" for i, (o, c) in enumerate(streams)],
        *[f"  outs[{c}] = out + {c} * os + base;" for c in range(nout)],
        *[f"  {prefix}_s{k}(m, in, outs, ok + base, buf.get());" for k in range(stages)],
        "  for (int64_t i = 0; i < m; ++i) bad += !ok[base + i];",
        "}",
        "return bad;",
    ]
    return fns, call


class ElementaryKernel(NamedTuple):
    """One kernel of the float64 elementary library: the op of its name
    (``mc_{op}_f64_{nc}`` in C++, ``hypermc_{op}_f64_{nc}`` on CUDA), what it computes,
    the components of each operand, the number of outputs, and the function that traces
    its statements (called by the generators only; the loaders need the signature)."""

    op: str
    doc: str
    inputs: dict[str, int]
    nout: int
    build: Callable[[], list[str]]
    #: the C type of the C++ kernel's operand and output streams: ``"float"`` for the
    #: float32 expansions (read exactly into float64; their outputs are float32 values, so
    #: stored exactly), which spares the caller two conversions through float64 buffers
    io: str = "double"

    @property
    def body(self) -> list[str]:
        """The kernel's statements (traced on each access)."""
        return self.build()


def elementary_kernels(nc: int, tables: _Tables) -> list[ElementaryKernel]:
    """Every kernel of the float64 elementary library at ``nc``: the one list the C++
    library (:func:`source`, :func:`hypermc.mcf.native._declare`) and the CUDA kernels
    (:mod:`hypermc.mcf.native.cuda`) are made from. ``tables`` collects the constant
    tables that the bodies read.

    Example:
        >>> [k.op for k in elementary_kernels(2, _Tables())][:4]
        ['exp', 'log_reduce', 'log_core', 'log1p_reduce']
        >>> [(k.op, k.inputs, k.nout) for k in elementary_kernels(3, _Tables())][-2:]
        [('tanh', {'x': 3}, 3), ('sin_cos', {'x': 3}, 6)]
    """
    x = {"x": nc}
    core = {"x": nc + 2, "y": 1}  # the Newton cores: x holds (t, e, tiny), y the start log1p(t_0)
    ks = [
        ElementaryKernel(
            "exp",
            "exp(x): elementary._exp_generic",
            x,
            nc,
            functools.partial(_traced_body, elementary._exp_generic, nc, tables, zero_ok=True),
        ),
        ElementaryKernel(
            "log_reduce",
            "log(x), first part: (t, e, tiny) of elementary._log_impl (nc + 2 outputs)",
            x,
            nc + 2,
            lambda: _log_reduce_body(nc),
        ),
        ElementaryKernel(
            "log_core", "log(x), second part: Newton core from y = log1p(t_0), e ln2 + y", core, nc, lambda: _log_core_body(nc, tables)
        ),
    ]
    if nc >= 3:  # the second pass over what log_core flags (see _log_core_body)
        doc = "log(x), second part for short expansions: log_core with arith's general product inline"
        ks.append(ElementaryKernel("log_core_general", doc, core, nc, lambda: _log_core_body(nc, tables, general=True)))
    for fn in ("log1p", "asinh", "acosh", "atanh"):
        doc = f"{fn}(x), first part: (t, e, tiny) for log_core (nc + 2 outputs)"
        ks.append(ElementaryKernel(f"{fn}_reduce", doc, x, nc + 2, functools.partial(_log_reduce_body, nc, fn)))
    if nc == 2:  # a narrower dtype's log, log1p and acosh: their operands prepared in that dtype
        doc = "log1p(s) where p != 0, log(s) elsewhere, first part: x holds (s, p); (t, e, tiny) for log_core"
        ks.append(ElementaryKernel("log_masked_reduce", doc, {"x": nc + 1}, nc + 2, functools.partial(_log_reduce_body, nc, "log_masked")))
        doc = "acosh(1 + t), first part: (t, e, tiny) for log_core"
        ks.append(ElementaryKernel("acosh_t_reduce", doc, x, nc + 2, functools.partial(_log_reduce_body, nc, "acosh_t")))
        doc = "2 atanh(a) from a and den = 1 - a, first part: x holds (a, den); (t, e, tiny) for log_core"
        ks.append(ElementaryKernel("atanh_ad_reduce", doc, {"x": 2 * nc}, nc + 2, functools.partial(_log_reduce_body, nc, "atanh_ad")))
    ks.append(
        ElementaryKernel(
            "expm1", "expm1(x): elementary._expm1_generic", x, nc, functools.partial(_traced_body, elementary._expm1_generic, nc, tables)
        )
    )
    doc = "sinh(x), cosh(x): elementary._sinh_generic and _cosh_generic (2 nc outputs)"
    ks.append(ElementaryKernel("sinh_cosh", doc, x, 2 * nc, functools.partial(_traced_body, elementary._sinh_cosh_generic, nc, tables)))
    ks.append(
        ElementaryKernel(
            "tanh", "tanh(x): elementary._tanh_generic", x, nc, functools.partial(_traced_body, elementary._tanh_generic, nc, tables)
        )
    )
    ks.append(
        ElementaryKernel(
            "sin_cos", "sin(x), cos(x): elementary._sin_cos_generic (2 nc outputs)", x, 2 * nc, lambda: _sin_cos_body(nc, tables)
        )
    )
    if nc == 2:
        # tan: at nc = 2 its double-word division in the kernel (at nc >= 3 the caller
        # divides with arith's fused kernel; in torch, 2-component division is slow)
        ks.append(
            ElementaryKernel(
                "tan", "tan(x): elementary._sin_cos_generic, then elementary._div", x, nc, lambda: _sin_cos_body(nc, tables, tan=True)
            )
        )
        for nx in NARROW_INPUTS:
            # (op, body, result groups, reads the exact expansion, odd: x_0 = 0 gives x)
            narrow: list[tuple[str, Callable[..., list[str]], int, bool, bool]] = [
                ("exp", functools.partial(_traced_body, elementary._exp_generic, zero_ok=True), 1, False, False),
                ("expm1", functools.partial(_traced_body, elementary._expm1_generic), 1, False, True),
                ("sinh_cosh", functools.partial(_traced_body, elementary._sinh_cosh_generic), 2, False, True),
                ("tanh", functools.partial(_traced_body, elementary._tanh_generic), 1, False, True),
                ("sin_cos", functools.partial(_sin_cos_body, nx=nx), 2, True, True),
                ("tan", functools.partial(_sin_cos_body, nx=nx, tan=True), 1, True, True),
            ]
            for op, body, groups, exact, odd in narrow:
                doc = f"{op} of a float32 expansion of {nx} components, float32 results ({groups * nx} outputs)"
                build = functools.partial(_narrow_body, functools.partial(body, 2, tables), nx, groups, exact, odd)
                ks.append(ElementaryKernel(f"{op}_f32x{nx}", doc, {"x": nx}, groups * nx, build, io="float"))
    return ks


def source(name: str, nc: int, part: str = "arith") -> str:
    """The C++ translation unit of one component dtype (``"f32"``/``"f64"``), ``nc`` and
    ``part``: ``"arith"`` (add, mul, div, sqrt) or ``"elementary"`` (exp, log, sin/cos; float64
    only). The elementary kernels are a library of their own: their code is large (a
    minute or more to compile), and arithmetic alone should not wait for it.

    Example:
        >>> src = source("f64", 3)
        >>> "mc_add_f64_3" in src, "mc_div_f64_3" in src, "mc_exp_f64_3" in src
        (True, True, False)
        >>> "mc_sqrt_f64_2" in source("f64", 2), "mc_sqrt_f32_2" in source("f32", 2)  # float32 nc = 2: the float64 engine
        (True, False)
        >>> "mc_exp_f64_2" in source("f64", 2, "elementary")  # exp, log, sin/cos have a library of their own
        True
        >>> "mc_exp_f32x4_f64_2" in source("f64", 2, "elementary")  # and float32 nc = 4 exp (float32 results)
        True
    """
    ctype = DTYPES[name][0]
    common = f"int64_t n, const {ctype} *x, int64_t xse, int64_t xsc, const {ctype} *y, int64_t yse, int64_t ysc"
    both = {"x": nc, "y": nc}
    parts = [_PRELUDE, "}  // namespace", ""]
    if part == "elementary":  # elementary's generic path runs in float64 components
        if name != "f64":
            raise ValueError(f"source: name must be 'f64' for the elementary kernels; got {name!r}")
        tables = _Tables()
        unary = "int64_t n, const {io} *x, int64_t xse, int64_t xsc, {io} *out, int64_t os, uint8_t *ok"
        binary = f"{common}, {ctype} *out, int64_t os, uint8_t *ok"
        kernels = [
            _kernel(
                f"mc_{k.op}_{name}_{nc}",
                ctype,
                binary if len(k.inputs) == 2 else unary.format(io=k.io),
                k.doc,
                [("true", k.body)],
                list(k.inputs),
                k.inputs,
                k.nout,
                broadcast=len(k.inputs) == 1,
                stages=_stage_count(k.body),
                io=k.io,
            )
            for k in elementary_kernels(nc, tables)
        ]
        parts[1:1] = tables.decls  # inside the prelude's anonymous namespace
        return "\n\n".join(parts + kernels) + "\n"
    if nc == 2:  # the double-word algorithms of arith
        parts.append(
            _kernel(
                f"mc_add_{name}_2",
                ctype,
                f"{common}, int ny, double sign, {ctype} *out, int64_t os, uint8_t *ok",
                "x + sign * y (ny = 2, AccurateDWPlusDW) or x + b (ny = 1, DWPlusFP)",
                [("ny == 1", _add2_body(1)), ("ny != 1", _add2_body(2))],
                ["x", "y"],
                both,
                2,
            )
        )
        parts.append(
            _kernel(
                f"mc_mul_{name}_2",
                ctype,
                f"{common}, int ny, {ctype} *out, int64_t os, uint8_t *ok",
                "x * y (ny = 2, DWTimesDW3) or x * b (ny = 1, DWTimesFP3)",
                [("ny == 1", _mul2_body(1)), ("ny != 1", _mul2_body(2))],
                ["x", "y"],
                both,
                2,
            )
        )
        parts.append(
            _kernel(
                f"mc_div_{name}_2",
                ctype,
                f"{common}, {ctype} *out, int64_t os, uint8_t *ok",
                "x / y: arith._long_division + _div2",
                [("true", _div2_body())],
                ["x", "y"],
                both,
                2,
            )
        )
        if has_sqrt(name, 2):
            parts.append(
                _kernel(
                    f"mc_sqrt_{name}_2",
                    ctype,
                    f"int64_t n, const {ctype} *x, int64_t xse, int64_t xsc, double lo, double hi, {ctype} *out, int64_t os, uint8_t *ok",
                    "sqrt(x): arith._sqrt2_network where lo <= x_0 <= hi",
                    [("true", _sqrt2_body())],
                    ["x"],
                    {"x": 2},
                    2,
                )
            )
        parts.append(_sum_kernel(name, 2))
        parts.append(_run_sums_kernel(name, 2))
        return "\n\n".join(parts) + "\n"
    parts.append(
        _kernel(
            f"mc_add_{name}_{nc}",
            ctype,
            f"{common}, int ny, double sign, {ctype} *out, int64_t os, uint8_t *ok",
            "x + sign * y (ny = nc) or x + b (ny = 1, sign = 1): arith._add_fixed / add_float",
            [("ny == 1", _add_body(nc, 1)), ("ny != 1", _add_body(nc, nc))],
            ["x", "y"],
            both,
            nc,
        )
    )
    parts.append(
        _kernel(
            f"mc_mul_{name}_{nc}",
            ctype,
            f"{common}, int ny, {ctype} *out, int64_t os, uint8_t *ok",
            "x * y (ny = nc) or x * b (ny = 1): arith.mul / mul_float, fixed branch",
            [("ny == 1", _mul_body(nc, 1)), ("ny != 1", _mul_body(nc, nc))],
            ["x", "y"],
            both,
            nc,
        )
    )
    parts.append(
        _kernel(
            f"mc_add_general_{name}_{nc}",
            ctype,
            f"{common}, int ny, double sign, {ctype} *out, int64_t os, uint8_t *ok",
            "x + sign * y (ny = nc): arith._add_general, the second pass over the elements mc_add rejects",
            [("ny != 1", _add_general_body(nc))],
            ["x", "y"],
            both,
            nc,
        )
    )
    parts.append(
        _kernel(
            f"mc_mul_general_{name}_{nc}",
            ctype,
            f"{common}, int ny, {ctype} *out, int64_t os, uint8_t *ok",
            "x * y (ny = nc) or x * b (ny = 1): arith._mul_general, the second pass over the elements mc_mul rejects",
            [("ny == 1", _mul_general_body(nc, 1)), ("ny != 1", _mul_general_body(nc, nc))],
            ["x", "y"],
            both,
            nc,
        )
    )
    parts.append(
        _kernel(
            f"mc_div_{name}_{nc}",
            ctype,
            f"{common}, {ctype} *out, int64_t os, uint8_t *ok",
            "x / y: arith._long_division + _div_fixed",
            [("true", _div_body(nc))],
            ["x", "y"],
            both,
            nc,
        )
    )
    parts.append(
        _kernel(
            f"mc_sqrt_{name}_{nc}",
            ctype,
            f"int64_t n, const {ctype} *x, int64_t xse, int64_t xsc, double lo, double hi, {ctype} *out, int64_t os, uint8_t *ok",
            "sqrt(x): arith._sqrt_fixed where lo <= x_0 <= hi",
            [("true", _sqrt_body(name, nc))],
            ["x"],
            {"x": nc},
            nc,
        )
    )
    parts.append(_rowsumsq_kernel(name, nc))  # the rows of nc - 1 components, summed at nc
    parts.append(_sum_kernel(name, nc))
    parts.append(_run_sums_kernel(name, nc))
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------ row sums of squares


def _round_to_network(c: list[torch.Tensor], nc: int) -> torch.Tensor:
    """arith.round_to on a list of components (traced by :func:`_rowsumsq_kernel`)."""
    return arith.round_to(torch.stack(c, dim=-1), nc)


def _block_body(lines: list[str], indent: str) -> list[str]:
    """A traced body in its own scope (each body numbers its values from v0)."""
    return [indent + "{", *(indent + "  " + line for line in lines), indent + "}"]


def _block_loop(
    body: list[str], x: str, y: str | None, out: str, tail: list[str], indent: str, decls: tuple[str, ...] | list[str] = ()
) -> list[str]:
    """One vectorised loop over a block's rows ``j < m`` running a traced ``body`` with
    ``X(k)``, ``Y(k)`` and ``OUT(k)`` defined as the given expressions of ``k`` and ``j``
    (``Y`` not defined where None), its ``OK`` in ``okv``; ``tail`` after the body."""
    inner = indent + "  "
    macros = [("X", x), ("Y", y), ("OUT", out), ("OK", "okv")]
    return [
        indent + "#pragma omp simd",
        indent + "for (int64_t j = 0; j < m; ++j) {",
        *(f"#define {name}{'' if name == 'OK' else '(k)'} {expr}" for name, expr in macros if expr is not None),
        *(inner + decl for decl in decls),
        inner + "bool okv;",
        *_block_body(body, inner),
        *(inner + line for line in tail),
        *(f"#undef {name}" for name, expr in macros if expr is not None),
        indent + "}",
    ]


#: Rows per block of :func:`_rowsumsq_kernel` (the vectorised loops run over a block's rows).
ROW_BLOCK = 64
#: Values (rows x slots x sums) up to which :func:`_sum_kernel` runs every tree level on
#: one buffer; above, the levels until the buffer fits this budget are computed depth first
#: in tiles of :data:`SUM_TILE_VALUES` lanes straight from the terms.
SUM_CACHE_VALUES = 1 << 17
SUM_TILE_VALUES = 2048


def _rowsumsq_kernel(name: str, w: int) -> str:
    """``mc_rowsumsq_{name}_{w}``: per row of ``n`` coordinates of ``w - 1`` components,
    :func:`hypermc.mcf.reduce.sumsq_wide` over the row (``mode`` 0: ``w`` components),
    :func:`hypermc.mcf.reduce.sumsq` (``mode`` 2: that rounded to ``w - 1``),
    :func:`hypermc.mcf.reduce.one_minus_sumsq` (``mode`` 1: ``1 - c |x|^2`` rounded to
    ``w - 1`` components; ``cw`` the ``w`` components of ``c``, or null for ``c = 1``) or
    :func:`hypermc.mcf.reduce.norm`'s scaled sum of squares (``mode`` 3: ``e`` the
    exponent of the row's largest leading component as ``torch.frexp`` gives it, 0 for
    0, inf and NaN, written to ``ex``; the coordinates times ``2^-e`` in two exact steps
    as ``reduce._scale`` multiplies them; then mode 2).

    The same operations in the same order as those torch functions: each square is
    arith.mul's fixed network at ``w`` components on the coordinate padded with a zero,
    the squares are added pairwise by arith.add's fixed network (first half plus second
    half, level by level, an odd last element carried to the next level), then the
    product by ``c``, the subtraction from 1 and arith.round_to, each traced. A row is
    good (``ok`` 1) where every one of those fixed networks' checks holds. An element a
    fixed network rejects (a zero square, a sum of zeros, a zero row's rounding) is
    recomputed by the general network the torch path takes for it (:func:`_checked_step`:
    arith.mul's and arith.add's second pass, ``mc_mul_general`` / ``mc_add_general``, and
    round_to's general renormalisation); its row's ``ok`` is 2. Those passes are all or
    nothing over a whole batch (see :func:`hypermc.mcf.native._second_pass`), so where
    any row of the call is rejected (``ok`` 0: a general network's check fails too, for
    an overflowing square, say) the caller rejects the rows with ``ok`` 2 too and
    recomputes them all by the torch path. Rows are processed in
    blocks of :data:`ROW_BLOCK`, planar in a block buffer, so every step is one
    vectorised loop over the block's rows."""
    ctype = DTYPES[name][0]
    nin = w - 1
    rounding = round_body(w, nin)
    # the squares' X and Y: the coordinate's components padded with a zero
    # (scaled by f1 f2: 1 but in mode 3)
    padded = f"((k) < {nin} ? mc_mul(mc_mul(xi[j * xsr + (k) * xsc], f1[j]), f2[j]) : T(0))"
    s_k = "s[(k) * B + j]"
    out = [
        f"// Row sums of squares (mode 0, {w} components; mode 2, rounded to {nin}) or 1 - c |x|^2 (mode 1, {nin}) of rows of n",
        f"// coordinates of {nin} components at x + r * xsr + i * xsi + k * xsc; returns the rows with ok = 0",
        f'extern "C" int64_t mc_rowsumsq_{name}_{w}(int64_t rows, int64_t n, const {ctype} *x, int64_t xsr, int64_t xsi, '
        f"int64_t xsc, int mode, const {ctype} *cw, {ctype} *out, int64_t os, uint8_t *ok, int32_t *ex) {{",
        f"  using T = {ctype};",
        "  constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));",
        "  (void)CANCEL;",
        f"  constexpr int64_t BMAX = {ROW_BLOCK};",
        # rows per block: fewer where there are few rows or long ones (the buffer stays <= 2^21
        # values unless one row alone is longer)
        f"  const int64_t B = std::max<int64_t>(1, std::min<int64_t>({{BMAX, rows, (int64_t(1) << 21) / std::max<int64_t>(1, n * {w})}}));",
        f"  std::unique_ptr<T[]> buf(new T[(n > 0 ? n : 1) * {w} * B]);",
        "  uint8_t good[BMAX], used[BMAX], fix[BMAX];",
        f"  T tmp[{w} * BMAX];  // an in-place step's results until its second pass has read the operands",
        "  T f1[BMAX], f2[BMAX];",
        "  int64_t bad = 0;",
        "  for (int64_t r0 = 0; r0 < rows; r0 += B) {",
        "    const int64_t m = std::min<int64_t>(B, rows - r0);",
        "    for (int64_t j = 0; j < m; ++j) good[j] = 1, used[j] = 0, f1[j] = T(1), f2[j] = T(1);",
        "    if (mode == 3) {  // reduce.norm's scaling: 2^-e, e the exponent of the largest |x_i0|",
        "      T big[BMAX];",
        "      for (int64_t j = 0; j < m; ++j) big[j] = T(0);",
        "      for (int64_t i = 0; i < n; ++i)",
        "#pragma omp simd",
        "        for (int64_t j = 0; j < m; ++j) {  // torch.amax: NaN wins",
        "          const T a = mc_fabs(x[(r0 + j) * xsr + i * xsi]);",
        "          big[j] = mc_select<T>((a > big[j]) | (a != a), a, big[j]);",
        "        }",
        "#pragma omp simd",
        "      for (int64_t j = 0; j < m; ++j) {  // torch.frexp's exponent (0 for 0, inf and NaN), subnormals too",
        "        const bool sub = (big[j] != T(0)) & (mc_field(big[j]) == 0);",
        "        const T b = mc_select<T>(sub, mc_mul(big[j], mc_pow2<T>((mc_int<T>)Bits<T>::P)), big[j]);",
        "        const mc_int<T> e = mc_expo(b) - (mc_int<T>)sub * (mc_int<T>)Bits<T>::P;",
        "        const mc_int<T> k = -e, h = (k - (k < 0)) / 2;  // floor(k / 2) (|k| <= 1100, so k - 1 stays exact)",
        "        f1[j] = mc_pow2<T>(h);",
        "        f2[j] = mc_pow2<T>(k - h);",
        "        ex[r0 + j] = (int32_t)e;",
        "      }",
        "    }",
        "    for (int64_t i = 0; i < n; ++i) {  // the squares, padded to w components",
        f"      T *t = buf.get() + i * {w} * B;",
        "      const T *xi = x + r0 * xsr + i * xsi;",
        *_checked_step(_mul_body(w, w), _mul_general_body(w, w), padded, padded, "t[(k) * B + j]", w, "      "),
        "    }",
        "    const T sign = T(1);",
        "    for (int64_t len = n; len > 1;) {  // pairwise: the first half plus the second half",
        "      const int64_t h = len / 2;",
        "      for (int64_t i = 0; i < h; ++i) {",
        f"        T *a = buf.get() + i * {w} * B;",
        f"        const T *c2 = buf.get() + (h + i) * {w} * B;",
        *_checked_step(
            _add_body(w, w), _add_general_body(w), "a[(k) * B + j]", "c2[(k) * B + j]", "a[(k) * B + j]", w, "        ", in_place=True
        ),
        "      }",
        f"      if (len % 2) std::memcpy(buf.get() + h * {w} * B, buf.get() + 2 * h * {w} * B, sizeof(T) * {w} * B);",
        "      len = h + len % 2;",
        "    }",
        "    T *s = buf.get();",
        "    if (n == 0)",
        f"      for (int64_t k = 0; k < {w} * B; ++k) s[k] = T(0);",
        "    if (mode == 0) {",
        f"      for (int64_t k = 0; k < {w}; ++k)",
        "        for (int64_t j = 0; j < m; ++j) out[k * os + r0 + j] = s[k * B + j];",
        "    } else {",
        "      if (mode == 1 && cw != nullptr) {  // arith.mul(s, c)",
        *_checked_step(_mul_body(w, w), _mul_general_body(w, w), s_k, "cw[k]", s_k, w, "        ", in_place=True),
        "      }",
        "      if (mode == 1) {",
        "        const T sign = T(-1);  // arith.sub(1, s)",
        *_checked_step(_add_body(w, w), _add_general_body(w), "((k) == 0 ? T(1) : T(0))", s_k, s_k, w, "        ", in_place=True),
        "      }",
        # arith.round_to(s or 1 - c s, w - 1)
        *_checked_step(rounding, _sum_finish_body(nin), s_k, None, "out[(k) * os + r0 + j]", nin, "      "),
        "    }",
        "    for (int64_t j = 0; j < m; ++j) {",
        "      ok[r0 + j] = good[j] ? (uint8_t)(1 + used[j]) : (uint8_t)0;",
        "      bad += !good[j];",
        "    }",
        "  }",
        "  return bad;",
        "}",
    ]
    return "\n".join(out)


def _checked_step(
    fixed: list[str], general: list[str], x: str, y: str | None, out: str, nout: int, indent: str, *, in_place: bool = False
) -> list[str]:
    """One step of :func:`_rowsumsq_kernel` over a block's rows as arith runs it: the
    ``fixed`` network, then, on the elements whose check it fails, the ``general`` one
    (``_second_pass`` of arith's kernels; for round_to the general renormalisation), whose
    results replace them. A row with such an element is good only by the second pass
    (``used``); where the general network's check fails too, the row is rejected.
    ``in_place``: ``out`` overwrites the operands, so the results wait in ``tmp`` until
    the second pass has read them."""
    target = "tmp[(k) * BMAX + j]" if in_place else out
    lines = [
        *_block_loop(fixed, x, y, target, ["fix[j] = (uint8_t)okv;"], indent),
        indent + "{",
        indent + "  int64_t rejected = 0;",
        indent + "  for (int64_t j = 0; j < m; ++j) rejected += !fix[j];",
        indent + "  if (rejected) {",
        *_block_loop(
            general,
            x,
            y,
            "g[k]",
            [
                f"for (int k = 0; k < {nout}; ++k) {target} = mc_select<T>(fix[j], {target}, g[k]);",
                "used[j] |= (uint8_t)!fix[j];",
                "good[j] &= (uint8_t)(fix[j] | okv);",
            ],
            indent + "    ",
            decls=[f"T g[{nout}];"],
        ),
        indent + "  }",
        indent + "}",
    ]
    if in_place:
        lines += [
            indent + f"for (int k = 0; k < {nout}; ++k)",
            indent + "  for (int64_t j = 0; j < m; ++j) " + out + " = tmp[(k) * BMAX + j];",
        ]
    return lines


def _sum_level_body(nc: int, first: bool) -> list[str]:
    """One level of :func:`hypermc.mcf.reduce.sum`'s tree on one element: ``reduce._absorb``
    of the two halves' ``nc + 1`` slots (``X``: the first half's, ``Y``: the second's,
    ``OUT``: the merged slots), the pairs ``reduce._tree`` forms; at the ``first`` level
    the last slot (the guard) is still empty, so neither half's is read."""
    net = _Net()
    slots = nc + 1
    used = nc if first else slots
    a = [net.let(f"X({j})") for j in range(used)]
    b = [net.let(f"Y({j})") for j in range(used)]
    pairs: list[list[str]] = [[a[j], b[j]] for j in range(used)] + [[]] * (slots - used)
    merged = trace(net, reduce._absorb, pairs)
    return net.lines + [f"OUT({j}) = {m};" for j, m in enumerate(merged)] + ["OK = true;"]  # nothing checked


def _sum_finish_body(nc: int) -> list[str]:
    """``reduce._finish`` of the root's ``nc + 1`` slots where it is ``eft.renormalize``'s
    arithmetic-select path (``_sort_by_magnitude_finite``, then ``renormalize_finite``):
    ``OK`` where the components and the rounded sum are finite. ``renormalize`` takes that
    path for a whole batch only when all of it is finite, so the caller runs
    ``reduce._finish`` on every root of a call with any element not ``OK``."""
    net = _Net()
    slots = [net.let(f"X({j})") for j in range(nc + 1)]

    def finite_path(t: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
        comps, total = eft.renormalize_finite(eft._sort_by_magnitude_finite(t), nc)
        ok = torch.isfinite(total)
        for c in comps:
            ok = ok & torch.isfinite(c)
        return comps, ok

    comps, ok = trace(net, finite_path, slots)
    return net.lines + [f"OUT({j}) = {c};" for j, c in enumerate(comps)] + [f"OK = {ok};"]


def _sum_kernel(name: str, nc: int) -> str:
    """``mc_sum_{name}_{nc}``: :func:`hypermc.mcf.reduce.sum`'s pairwise tree over ``n``
    terms of ``nc`` components, for ``cols`` independent sums, in one call; writes the
    root's ``nc + 1`` slots (before ``reduce._finish``) planar, slot ``s`` of sum ``c`` at
    ``out[s * os + c]``, and ``reduce._finish`` of them (:func:`_sum_finish_body`),
    component ``k`` at ``fin[k * os + c]``; returns the number of sums whose finish is not
    good (``fin`` is then not used: the caller finishes every root by the torch path).

    The same operations in the same order as ``reduce._tree`` on ``reduce._component_slots``:
    each level merges the first half with the second half by the traced ``reduce._absorb``
    (its first level with the guard slot empty), an odd last term is carried to the next
    level as it is (a zero guard slot at the first level). Nothing is checked: the tree is
    made of error-free transformations and one plain sum, so every element is good.
    Sums are processed in blocks of up to :data:`ROW_BLOCK`, each slot a plane of rows of
    the block's sums, so every level is one vectorised loop over ``h`` rows; the lanes
    past the last sum hold zeros.

    Where the terms' planes outgrow :data:`SUM_CACHE_VALUES`, the first ``M`` levels (until
    a level's planes fit it) are computed depth first, tile by tile of level ``M``: row
    ``i`` of level ``m`` merges rows ``i`` and ``i + h`` of level ``m - 1`` (the carried
    row of an odd level is that level's last), so a tile of level ``M`` needs ``2^M``
    tiles of terms, read straight from ``x``, and every level below it stays in the cache.
    The merges and their operands are the same, so are the bits. Before, every level
    passed over buffers of the terms' size, and past the last-level cache a sum cost 4-6x
    as much per term (float64 nc = 2, one sum: 26 ms for 1.6M terms against 8 ms blocked;
    800k: 4.3 against 4.0 ms; ``tests/mcf/test_native.py`` checks the bits on both sides
    of the budget)."""
    ctype = DTYPES[name][0]
    slots = nc + 1
    ctx = f"SumTree_{name}_{nc}"
    fill = f"mc_sumfill_{name}_{nc}"

    def level(body: list[str]) -> list[str]:
        plane = "(k) * P * B + j"
        return _block_loop(body, f"p[{plane}]", f"p[{plane} + h * B]", f"p[{plane}]", [], "      ")

    def pairs(body: list[str]) -> list[str]:
        return _block_loop(body, "t1[(k) * TB + j]", "t2[(k) * TB + j]", "dst[(k) * ld + j]", [], "      ")

    # Levels 1..M of the tree for rows [a, b) of level M, depth first from the terms
    # (the kernel calls it where a level's planes outgrow the cache); the level number,
    # not the lane count, picks the first level's body
    blocked = [
        f"namespace {{ struct {ctx} {{ const {ctype} *x; int64_t xsc, xsi, xsk, c0, width, B, TB; const int64_t *L; {ctype} *tmp; }}; }}",
        "// rows [a, b) of level m of reduce.sum's tree (level 0: the terms, an empty guard slot) to dst (slot s at dst + s * ld)",
        f"static void {fill}(const {ctx} &t, int m, int64_t a, int64_t b, {ctype} *dst, int64_t ld) {{",
        f"  using T = {ctype};",
        "  const int64_t B = t.B, TB = t.TB;",
        "  if (m == 0) {",
        f"    for (int64_t s = 0; s < {slots}; ++s)",
        "      for (int64_t i = a; i < b; ++i)",
        "        for (int64_t j = 0; j < B; ++j)",
        f"          dst[s * ld + (i - a) * B + j] = (s < {nc} && j < t.width) ? t.x[(t.c0 + j) * t.xsc + i * t.xsi + s * t.xsk] : T(0);",
        "    return;",
        "  }",
        "  const int64_t h = t.L[m - 1] / 2;  // level m: row i < h merges rows i and i + h of level m - 1",
        "  const int64_t e = std::min<int64_t>(b, h);",
        "  if (e > a) {",
        f"    T *t1 = t.tmp + (int64_t)(m - 1) * 2 * {slots} * TB, *t2 = t1 + {slots} * TB;",
        f"    {fill}(t, m - 1, a, e, t1, TB);",
        f"    {fill}(t, m - 1, a + h, e + h, t2, TB);",
        "    const int64_t lanes = (e - a) * B;",
        "    if (m == 1) {",
        "      const int64_t m = lanes;",
        *pairs(_sum_level_body(nc, True)),
        "    } else {",
        "      const int64_t m = lanes;",
        *pairs(_sum_level_body(nc, False)),
        "    }",
        "  }",
        "  if (b > h)  // row h of an odd level: its last row, carried",
        f"    {fill}(t, m - 1, t.L[m - 1] - 1, t.L[m - 1], dst + (h - a) * B, ld);",
        "}",
    ]

    out = [
        *blocked,
        f"// reduce.sum's tree over n terms of {nc} components at x + c * xsc + i * xsi + k * xsk, for cols sums;",
        f"// the root's {slots} slots to out + s * os + c",
        f'extern "C" int64_t mc_sum_{name}_{nc}(int64_t cols, int64_t n, const {ctype} *x, int64_t xsc, int64_t xsi, '
        f"int64_t xsk, {ctype} *out, {ctype} *fin, int64_t os) {{",
        f"  using T = {ctype};",
        f"  constexpr int64_t BMAX = {ROW_BLOCK};",
        "  // sums per block: fewer where there are few or long ones (the buffer stays <= 2^21 values unless one sum alone is longer)",
        f"  const int64_t cap = (int64_t(1) << 21) / std::max<int64_t>(1, n * {slots});",
        "  const int64_t B = std::max<int64_t>(1, std::min<int64_t>({BMAX, cols, cap}));",
        "  // the levels' lengths; M: the first level whose planes fit the cache budget (0: the terms do)",
        "  int64_t L[72];",
        "  int M = 0;",
        "  L[0] = n;",
        "  for (int m = 0; L[m] > 1; ++m) L[m + 1] = L[m] / 2 + L[m] % 2;",
        f"  while (L[M] > 1 && L[M] * {slots} * B > {SUM_CACHE_VALUES}) ++M;",
        "  const int64_t P = std::max<int64_t>(1, L[M]);  // rows per plane of the buffer",
        f"  const int64_t TB = std::max<int64_t>(B, {SUM_TILE_VALUES} / B * B);  // lanes per tile of the blocked levels",
        f"  std::unique_ptr<T[]> buf(new T[P * {slots} * B]);",
        f"  std::unique_ptr<T[]> tmp(new T[std::max(1, 2 * M) * {slots} * TB]);",
        "  T *p = buf.get();",
        "  int64_t bad = 0;",
        "  for (int64_t c0 = 0; c0 < cols; c0 += B) {",
        "    const int64_t width = std::min<int64_t>(B, cols - c0);",
        f"    const {ctx} t{{x, xsc, xsi, xsk, c0, width, B, TB, L, tmp.get()}};",
        "    for (int64_t a = 0; a < L[M]; a += TB / B)  // the components and an empty guard slot at M = 0",
        f"      {fill}(t, M, a, std::min<int64_t>(L[M], a + TB / B), p + a * B, P * B);",
        "    bool first = M == 0;",
        "    for (int64_t len = L[M]; len > 1; first = false) {  // pairwise: the first half plus the second half",
        "      const int64_t h = len / 2;",
        "      const int64_t m = h * B;",
        "      if (first) {",
        *level(_sum_level_body(nc, True)),
        "      } else {",
        *level(_sum_level_body(nc, False)),
        "      }",
        "      if (len % 2)",
        f"        for (int64_t s = 0; s < {slots}; ++s) std::memcpy(p + (s * P + h) * B, p + (s * P + 2 * h) * B, sizeof(T) * B);",
        "      len = h + len % 2;",
        "    }",
        f"    for (int64_t s = 0; s < {slots}; ++s)",
        "      for (int64_t j = 0; j < width; ++j) out[s * os + c0 + j] = p[s * P * B + j];",
        "    {",
        "      const int64_t m = width;",
        *_block_loop(_sum_finish_body(nc), "p[(k) * P * B + j]", None, "fin[(k) * os + c0 + j]", ["bad += !okv;"], "      "),
        "    }",
        "  }",
        "  return bad;",
        "}",
    ]
    return "\n".join(out)


def _run_sums_kernel(name: str, nc: int) -> str:
    """``mc_runsum_{name}_{nc}``: the sums of :func:`hypermc.mcf.reduce.scatter` (of
    scatter_reduce, index_add and the segment reductions) as ``reduce._run_sums`` forms
    them, for ``runs`` runs; each entry is a row of ``R`` values of ``nc`` components.
    Run ``r`` is, where ``b`` is not null (``include_self``), the row ``bidx[r]`` of ``b``
    (at ``b + bidx[r] * bse + i * bsr + k * bsc``), then the rows ``starts[r] <= e <
    starts[r + 1]`` of ``x`` (at ``x + e * xse + i * xsr + k * xsc``). Writes every run's
    root slots (``nc + 1``, before ``reduce._finish``) planar, slot ``s`` of value ``i``
    of run ``r`` at ``out[s * os + r * R + i]``, and their finish
    (:func:`_sum_finish_body`) to ``fin`` alike; returns the number of values whose
    finish is not good (``fin`` is then not used: the caller finishes every root by the
    torch path).

    The same operations in the same order as ``_run_sums``: ``levels`` levels (the
    torch path's count, set by the longest run, for every run), each merging the entries
    of rank ``2i`` and ``2i + 1`` of a run by the traced ``reduce._absorb`` (the first
    level with the guard slot empty), an entry without a partner (the last of an odd
    run, or a run already down to one entry) merged with zeros. Nothing is checked.

    Lanes: a block of consecutive runs is summed together, one lane per value of each
    of its runs (up to :data:`ROW_BLOCK` lanes; a row longer than that is split), each
    slot a plane of entries by lanes, so every step is one vectorised loop over the
    lanes. A block's runs are padded with zero entries to its longest run: a zero entry
    is exactly the zero partner of the torch path (merged with a zero entry, an entry
    goes through the same operations on the same values), and zero entries merged with
    each other stay zeros, so the padding changes no bit."""
    ctype = DTYPES[name][0]
    slots = nc + 1

    def level(body: list[str]) -> list[str]:
        return [
            "        for (int64_t i = 0; i < h; ++i) {",
            *_block_loop(
                body, "p[((k) * n + 2 * i) * W + j]", "p[((k) * n + 2 * i + 1) * W + j]", "p[((k) * n + i) * W + j]", [], "          "
            ),
            "        }",
        ]

    def odd(body: list[str]) -> list[str]:
        return _block_loop(body, "p[((k) * n + 2 * h) * W + j]", "T(0)", "p[((k) * n + h) * W + j]", [], "          ")

    out = [
        f"// reduce.scatter's sums over runs of entries of R values of {nc} components (rows of b, then of x);",
        f"// the roots' {slots} slots to out + s * os + r * R + i, their finish to fin",
        f'extern "C" int64_t mc_runsum_{name}_{nc}(int64_t runs, const int64_t *starts, int64_t levels, int64_t R, '
        f"const {ctype} *x, int64_t xse, int64_t xsr, int64_t xsc, const int64_t *bidx, const {ctype} *b, "
        f"int64_t bse, int64_t bsr, int64_t bsc, {ctype} *out, {ctype} *fin, int64_t os) {{",
        f"  using T = {ctype};",
        f"  constexpr int64_t LMAX = {ROW_BLOCK};",
        "  const int64_t self = b != nullptr;",
        "  int64_t longest = 1;",
        "  for (int64_t r = 0; r < runs; ++r) longest = std::max<int64_t>(longest, self + starts[r + 1] - starts[r]);",
        "  // lanes per block: whole runs while their values fit LMAX, else one run's values LMAX at a time; fewer",
        "  // where the runs are long (the buffer stays <= 2^21 values unless one run alone is longer)",
        f"  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(LMAX, (int64_t(1) << 21) / (longest * {slots})));",
        f"  std::unique_ptr<T[]> buf(new T[longest * {slots} * cap]);",
        "  T *p = buf.get();",
        "  int64_t bad = 0;",
        "  for (int64_t r0 = 0; r0 < runs;) {",
        "    const int64_t group = R >= cap ? 1 : std::min<int64_t>(cap / R, runs - r0);  // runs in the block",
        "    int64_t n = 0;",
        "    for (int64_t g = 0; g < group; ++g) n = std::max<int64_t>(n, self + starts[r0 + g + 1] - starts[r0 + g]);",
        "    for (int64_t c0 = 0; c0 < (group == 1 ? R : 1); c0 += cap) {  // a long row in parts",
        "      const int64_t W = group == 1 ? std::min<int64_t>(cap, R - c0) : group * R;  // lanes",
        "      if (W == 0) break;",
        "      const int64_t V = W / group;  // lanes per run: its values c0 .. c0 + V",
        "      for (int64_t g = 0; g < group; ++g) {  // the components and an empty guard slot; zero entries past a run's end",
        "        const int64_t r = r0 + g, len = self + starts[r + 1] - starts[r];",
        "        for (int64_t i = 0; i < n; ++i) {",
        "          const bool base = i < self;",
        "          const T *src = base ? b + bidx[r] * bse + c0 * bsr : x + (starts[r] + i - self) * xse + c0 * xsr;",
        "          const int64_t sr = base ? bsr : xsr, sc = base ? bsc : xsc;",
        f"          for (int64_t s = 0; s < {slots}; ++s) {{",
        "            T *q = p + (s * n + i) * W + g * V;",
        f"            if (s < {nc} && i < len)",
        "              for (int64_t v = 0; v < V; ++v) q[v] = src[v * sr + s * sc];",
        "            else",
        "              for (int64_t v = 0; v < V; ++v) q[v] = T(0);",
        "          }",
        "        }",
        "      }",
        "      int64_t len = n;",
        "      for (int64_t l = 0; l < levels; ++l) {  // the entries of rank 2i and 2i + 1 merged into entry i",
        "        const int64_t h = len / 2;",
        "        const int64_t m = W;",
        "        if (l == 0) {",
        *level(_sum_level_body(nc, True)),
        "        } else {",
        *level(_sum_level_body(nc, False)),
        "        }",
        "        if (len % 2) {  // no partner: merged with zeros",
        "          if (l == 0) {",
        *odd(_sum_level_body(nc, True)),
        "          } else {",
        *odd(_sum_level_body(nc, False)),
        "          }",
        "        }",
        "        len = h + len % 2;",
        "      }",
        "      const int64_t o = r0 * R + c0;  // the block's first value",
        f"      for (int64_t s = 0; s < {slots}; ++s)",
        "        for (int64_t j = 0; j < W; ++j) out[s * os + o + j] = p[s * n * W + j];",
        "      const int64_t m = W;",
        *_block_loop(_sum_finish_body(nc), "p[(k) * n * W + j]", None, "fin[(k) * os + o + j]", ["bad += !okv;"], "      "),
        "    }",
        "    r0 += group;",
        "  }",
        "  return bad;",
        "}",
    ]
    return "\n".join(out)


# --------------------------------------------------------------- fused expressions


def _fused_step(
    net: _Net, name: str, nc: int, kind: str, args: list[list[str]], sqrt_range: tuple[float, float] | None = None
) -> tuple[list[str], list[str]]:
    """One step of a fused expression: the arith kernel's fast path that eager mode runs
    for ``kind`` on these operands (``nc`` terms: an MC value; one: a plain float).
    ``sqrt_range``: arith's range of leading components for the fixed square root."""
    if kind == "neg":
        return [net.neg(c) for c in args[0]], []
    if kind == "sqrt":
        if sqrt_range is None or not has_sqrt(name, nc):
            raise ValueError(f"fused_source: no fused square root for {name} nc={nc} (or no range given)")
        lo, hi = (f"{float(v).hex()}" for v in sqrt_range)
        return _emit_sqrt2(net, args[0], lo, hi) if nc == 2 else _emit_sqrt(net, args[0], lo, hi, rescale=sqrt_rescales(name, nc))
    x, y = args
    if kind == "div":
        if nc == 2 and name == "f32":
            return _emit_div_engine(net, x, y)
        if nc == 2:
            return _emit_div2(net, _lpad(x, 2), _lpad(y, 2))
        # div_float and rdiv_float divide by / into from_float(b, nc) = (b, 0, ..., 0)
        return _emit_div(net, _lpad(x, nc), _lpad(y, nc))
    if len(x) != nc:
        raise ValueError(f"fused_source: {kind} takes the MC operand first; got {len(x)} and {len(y)} terms")
    if kind == "add":
        return _emit_add2(net, x, y) if nc == 2 else _emit_add(net, x, y)
    if kind == "mul":
        return _emit_mul2(net, x, y) if nc == 2 else _emit_mul(net, x, y)
    raise ValueError(f"fused_source: unknown step kind {kind!r}")


#: Elements per tile of a fused kernel (its int16 flags stay in L1).
FUSED_TILE = 512


def fused_source(
    name: str,
    nc: int,
    leaves: tuple[tuple[int, bool], ...],
    steps: tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
    symbol: str,
    sqrt_range: tuple[float, float] | None = None,
) -> str:
    """C++ of one fused elementwise expression: ``int64_t symbol(start, end, p, out, os,
    ok)`` computes elements ``[start, end)`` and returns how many failed a check.

    ``leaves`` are the operand streams ``(terms, broadcast)``: an MC operand (``nc``
    terms) or a plain float (one), read at ``p[...][i]``, or at ``p[...][0]`` when
    broadcast (one pointer per term, in order). ``steps`` are ``(kind, refs)`` with
    ``kind`` in ``add``, ``mul``, ``div``, ``neg``, ``sqrt`` (nc >= 3, for leading
    components in ``sqrt_range``, arith's) and ``refs`` pairs ``("l", leaf)`` or
    ``("s", earlier step)``; the last step is the result. Each step is the fast path of
    the arith kernel eager mode runs (:func:`_fused_step`), and ``ok[i]`` is the
    conjunction of all their checks, so an element with ``ok[i]`` has eager mode's bits
    (:mod:`hypermc.mcf.native.fused` recomputes the others).

    The whole expression is one loop body (every intermediate stays in registers). Its
    checks go to an ``int16_t`` tile first and are narrowed to the ``uint8_t`` output in
    a second loop: GCC picks the vectorisation factor from the narrowest type in a loop,
    and with a byte store in the body it ran 64 elements per iteration (eight 512-bit
    registers per double, heavy spilling: 26 ms for the float64 ``nc = 3`` benchmark
    expression on 10^6 elements); with 16-bit flags it runs 32 (16 ms; 32-bit flags,
    16 elements: 17 ms, too little independent work to hide the latency of the long
    dependency chains of the renormalisations).

    Example:
        x * y + b for MC operands x, y and a broadcast plain float b:

        >>> steps = (("mul", (("l", 0), ("l", 1))), ("add", (("s", 0), ("l", 2))))
        >>> src = fused_source("f64", 3, ((3, False), (3, False), (1, True)), steps, "f")
        >>> 'extern "C" int64_t f(' in src and "std::fma" in src
        True
    """
    ctype = DTYPES[name][0]
    net = _Net()
    values: list[list[str]] = []
    reads: list[str] = []
    pointer = 0
    for i, (terms, broadcast) in enumerate(leaves):
        names = []
        for k in range(terms):
            reads.append(f"  const T *__restrict__ p{i}_{k} = (const T *)p[{pointer}];")
            pointer += 1
            names.append(net.let(f"p{i}_{k}[{'0' if broadcast else 'i'}]"))
        values.append(names)
    results: list[list[str]] = []
    oks: list[str] = []
    for kind, refs in steps:
        args = [values[j] if where == "l" else results[j] for where, j in refs]
        c, checks = _fused_step(net, name, nc, kind, args, sqrt_range)
        results.append(c)
        oks += checks
    c = results[-1]
    ok = " & ".join(f"({o})" for o in oks) if oks else "true"
    lines = [
        f'extern "C" int64_t {symbol}(int64_t start, int64_t end, const void *const *p, {ctype} *out, int64_t os, uint8_t *ok) {{',
        f"  using T = {ctype};",
        "  constexpr T CANCEL = T(1) / (T(64) * (std::numeric_limits<T>::epsilon() / T(2)));",
        "  (void)CANCEL;",
        *reads,
        *[f"  T *__restrict__ out{k} = out + {k} * os;" for k in range(len(c))],
        "  uint8_t *__restrict__ okp = ok;",
        "  int64_t bad = 0;",
        f"  alignas(64) int16_t flags[{FUSED_TILE}];",
        f"  for (int64_t base = start; base < end; base += {FUSED_TILE}) {{",
        f"    const int64_t stop = std::min<int64_t>(end, base + {FUSED_TILE});",
        "#pragma omp simd",
        "    for (int64_t i = base; i < stop; ++i) {",
        *["      " + line for line in net.lines],
        *[f"      out{k}[i] = {c[k]};" for k in range(len(c))],
        f"      flags[i - base] = (int16_t)({ok});",
        "    }",
        "#pragma omp simd reduction(+ : bad)",
        "    for (int64_t i = base; i < stop; ++i) {",
        "      okp[i] = (uint8_t)flags[i - base];",
        "      bad += !flags[i - base];",
        "    }",
        "  }",
        "  return bad;",
        "}",
    ]
    return "\n".join([_PRELUDE, "}  // namespace", "", *lines]) + "\n"


# ----------------------------------------------------------------------------- for other kernel libraries


def prelude() -> str:
    """The start of every generated library: includes and the bit helpers, inside an open
    anonymous namespace (a library closes it with ``}  // namespace`` after its own
    helpers). Other modules' kernel libraries (:func:`hypermc.mcf.native.library`) start
    with it too, so their statements compile as the per-op kernels' do.

    Example:
        >>> text = prelude()
        >>> text.startswith("// Generated by hypermc/mcf/native/source.py") and "namespace {" in text
        True
    """
    return _PRELUDE


def op_body(op: str, nc: int, ny: int) -> list[str]:
    """The statements of one MC op on one element, as the per-op kernels run it: ``add``
    (``x + sign * y``; arith's add and add_float) or ``mul`` (arith's mul and mul_float),
    ``nc`` components of ``x`` read as ``X(k)``, ``ny`` (``1`` or ``nc``) of ``y`` as
    ``Y(k)``; the result goes to ``OUT(k)`` and the fast-path check to ``OK`` (false: the
    element must take the torch path). The caller defines ``X``, ``Y``, ``OUT``, ``OK``,
    ``sign`` (add) and ``CANCEL``.

    Example:
        >>> lines = op_body("mul", 2, 1)  # mul_float at nc = 2 (DWTimesFP3)
        >>> lines[0], lines[-1].startswith("OK = ")
        ('T v0 = X(0);', True)
    """
    if op not in ("add", "mul") or nc not in NCS or ny not in (1, nc):
        raise ValueError(f"op_body: op must be 'add' or 'mul', nc in {NCS} and ny 1 or nc; got {op!r}, nc={nc}, ny={ny}")
    if nc == 2:
        return _add2_body(ny) if op == "add" else _mul2_body(ny)
    return _add_body(nc, ny) if op == "add" else _mul_body(nc, ny)


def round_body(w: int, nc: int) -> list[str]:
    """The statements of :func:`hypermc.mcf.arith.round_to` from ``w`` components (read
    as ``X(k)``) to ``nc`` (written to ``OUT(k)``, the fast-path checks to ``OK``), traced:
    the rounding that :func:`hypermc.mcf.reduce.sumsq` applies to its ``w = nc + 1``
    component sum.

    Example:
        >>> lines = round_body(3, 2)
        >>> lines[0], lines[-2].startswith("OUT(1) = "), lines[-1].startswith("OK = ")
        ('T v0 = X(0);', True, True)
    """
    if w not in NCS or not 1 <= nc < w:
        raise ValueError(f"round_body: w must be in {NCS} and nc in [1, w); got w={w}, nc={nc}")
    net = _Net()
    d = [net.let(f"X({k})") for k in range(w)]
    c = trace(net, _round_to_network, d, nc)
    return _body(net, c, net.oks or ["true"])


def inline_function(name: str, fn: Callable[..., Any], nc: int, arity: int) -> str:
    """``template <class T> static inline T name(const T* a, const T* b, ...)``: the torch
    function ``fn`` of ``arity`` component tensors ``(..., nc)`` that returns one plain
    value per element, traced on one element (:func:`hypermc.mcf.native.trace.trace`),
    so the C++ function rounds as ``fn`` does, statement for statement.

    Example:
        >>> def rounded_sum(a, b):  # a + b of two double-words, rounded to one float
        ...     return (a[..., 0] + b[..., 0]) + (a[..., 1] + b[..., 1])
        >>> print(inline_function("rounded_sum", rounded_sum, 2, 2))
        template <class T> static inline T rounded_sum(const T* a, const T* b) {
          T v0 = a[0];
          T v1 = a[1];
          T v2 = b[0];
          T v3 = b[1];
          T v4 = v0 + v2;
          T v5 = v1 + v3;
          T v6 = v4 + v5;
          return v6;
        }
    """
    net = _Net()
    params = "abcdefgh"[:arity]
    operands = [[net.let(f"{p}[{k}]") for k in range(nc)] for p in params]
    result = trace(net, lambda *vs: fn(*(SymVec(v) for v in vs)), *operands)
    if not isinstance(result, str):
        raise ValueError(f"inline_function: {name} must return one value per element; it returned {result!r}")
    args = ", ".join(f"const T* {p}" for p in params)
    body = "".join(f"  {line}\n" for line in net.lines)
    return f"template <class T> static inline T {name}({args}) {{\n{body}  return {result};\n}}"
