"""The kernel generator's tracer: torch networks run on symbolic elements.

The statements a traced network emits are interpreted here element by element in
float64 (IEEE operations of numpy scalars, fused multiply-adds rounded once from the
exact rational value) and compared bit for bit with the torch network on the same
operands, so the generated code is checked without a C++ compiler; the compiled kernels
are compared with the torch networks in ``test_native.py``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermc.mcf import arith, eft, elementary, fixed
from hypermc.mcf.native import source as native_source
from hypermc.mcf.native.trace import Sym, TraceError, literal, trace
from tests.oracle import edge_values, expansions


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def let(self, expr: str, ctype: str = "T") -> str:
        name = f"v{len(self.lines)}"
        self.lines.append(f"{ctype} {name} = {expr};")
        return name


_STMT = re.compile(r"^(T|bool|mc_int<T>) (v\d+) = (.*);$")
_HEX = re.compile(r"T\((-?0x[0-9a-fA-F.]+p[+-]\d+)\)")


def _fma(a: float, b: float, c: float) -> float:
    """IEEE fused multiply-add: the exact value rounded once (signed zeros as IEEE 754)."""
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b)):
        return float(np.float64(a) * np.float64(b) + np.float64(c))  # the product is inf or NaN
    if not math.isfinite(c):
        return c  # a finite exact product does not overflow
    r = Fraction(a) * Fraction(b) + Fraction(c)
    if r == 0:
        product_negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        if a * b == 0 and c == 0 and product_negative and math.copysign(1.0, c) < 0:
            return -0.0
        return 0.0
    try:
        return float(r)  # correctly rounded, subnormals included
    except OverflowError:
        return math.inf if r > 0 else -math.inf


def _select(cond: bool, a: float, b: float) -> float:
    return a if cond else b


def _interpret(lines: list[str], env: dict[str, float], tables: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Run float64 statements of the generator's C++ subset in Python."""
    env = dict(env)
    ns = {
        **{name: [np.float64(v) for v in values] for name, values in (tables or {}).items()},
        "mc_rint": lambda v: np.rint(np.float64(v)),  # half to even
        "mc_copysign": lambda a, b: np.copysign(np.float64(a), np.float64(b)),
        "mc_toint": lambda v: int(v),  # of integer values only (the tracer's rule)
        "mc_iclamp": lambda k, lo, hi: min(max(k, lo), hi),
        "mc_shl": lambda k, sh: ((k << sh) + 2**63) % 2**64 - 2**63,  # two's complement int64
        "mc_bits_as": lambda k: np.array(k, dtype=np.int64).view(np.float64)[()],
        "_idiv": lambda a, b: -((-a) // b) if a < 0 else a // b,  # C's truncating division
        "mc_mul": lambda a, b: np.float64(a) * np.float64(b),
        "mc_div": lambda a, b: np.float64(a) / np.float64(b),
        "mc_fma": _fma,
        "mc_fabs": lambda v: np.float64(abs(v)),
        "mc_sqrt": lambda v: np.sqrt(np.float64(v)),
        "mc_select": _select,
        "mc_sign_bit": lambda v: math.copysign(1.0, float(v)) < 0,
        "mc_normal": lambda v: bool(np.isfinite(v)) and abs(float(v)) >= np.finfo(np.float64).tiny,
        "mc_mant": lambda v: np.float64(math.frexp(float(v))[0]),  # of normal numbers only
        "mc_expo": lambda v: math.frexp(float(v))[1] if np.isfinite(v) and abs(float(v)) >= np.finfo(np.float64).tiny else 0,
        "mc_tofloat": lambda i: np.float64(i),
        "mc_pow2": lambda k: np.float64(2.0**k),
        "mc_keep_if": lambda keep, v: np.float64(v) if keep else np.float64(0.0),
        "mc_min_normal": lambda: np.float64(np.finfo(np.float64).tiny),
        "mc_max_exponent": lambda: 1024,
        "true": True,
        "false": False,
        "MAX": np.float64(np.finfo(np.float64).max),
        "CANCEL": np.float64(1.0 / (64 * np.finfo(np.float64).eps / 2)),
    }
    for line in lines:
        m = _STMT.match(line)
        assert m, line
        kind, name, expr = m.groups()
        if kind == "mc_int<T>":
            expr = re.sub(r"(\w+) / (\d+)", r"_idiv(\1, \2)", expr)
        expr = _HEX.sub(lambda h: f"np.float64(float.fromhex('{h.group(1)}'))", expr)
        expr = expr.replace("mc_max_value<T>()", "MAX").replace("<T>(", "(").replace("||", "or").replace("(double)", "")
        assert " * " not in expr and " / " not in expr, line  # products and quotients are mc_mul / mc_div
        expr = re.sub(r"\((.+) (>=|<=) (.+) or (.+) != (.+)\) \? (.+?) : (.+)$", r"(\6 if (\1 \2 \3 or \4 != \5) else \7)", expr)
        expr = re.sub(r"!(?!=)(\w+)", r"(not \1)", expr)  # C's ! binds tighter than |, Python's not looser
        with np.errstate(all="ignore"):
            val = eval(expr, {"np": np, **ns}, env)  # noqa: S307 - the generator's own statements
        env[name] = np.float64(val) if kind == "T" else int(val) if kind == "mc_int<T>" else bool(val)
    return env


def _operands(n: int, nc: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dtype=torch.float64, generator=g) * torch.exp2(torch.randint(-30, 30, (n,), generator=g).double())
    comps = [x]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(n, dtype=torch.float64, generator=g) * 2.0**-53)
    out = eft.renormalize(comps, nc)
    # pinned edges: zero tails, exact zeros, cancellation partners
    out[0] = torch.tensor([1.0] + [0.0] * (nc - 1), dtype=torch.float64)
    out[1] = torch.zeros(nc, dtype=torch.float64)
    return list(out.unbind(-1))


def _bits(v) -> int:
    return int(np.float64(v).view(np.int64))


NETWORKS = {
    "two_sum": (lambda a, b: fixed.two_sum(a[0], b[0]), 1),
    "add_fixed_3": (lambda a, b: arith._add_fixed_network(a, b, 3), 3),
    "add_fixed_4": (lambda a, b: arith._add_fixed_network(a, b, 4), 4),
    "mul_fixed_3": (lambda a, b: arith._mul_fixed_network(a, b, 3), 3),
    "mul_fixed_4": (lambda a, b: arith._mul_fixed_network(a, b, 4), 4),
    "div_digits_3": (lambda a, b: arith._div_digits(a, b, 3), 3),
    "add2": (lambda a, b: arith._add2_network(a[0], a[1], b[0], b[1]), 2),
    "mul2": (lambda a, b: arith._mul2_fma_network(a[0], a[1], b[0], b[1]), 2),
    "add_float2": (lambda a, b: arith._add_float2_network(a[0], a[1], b[0]), 2),
    "mul_float2": (lambda a, b: arith._mul_float2_fma_network(a[0], a[1], b[0]), 2),
    # the general kernels' finite path: merge network (lerp selects), two distillations;
    # the merge alone is not compared: ATen's scalar tail loop of lerp can give a zero
    # term the other sign, which the renormalisation's sums absorb
    "add_general_3": (lambda a, b: arith._add_general_finite(a, b), 3),
    "add_general_4": (lambda a, b: arith._add_general_finite(a, b), 4),
    "mul_general_3": (lambda a, b: arith._renormalized(arith._product_levels(a, b, 3), a[0] * b[0], 3), 3),
    "mul_general_4": (lambda a, b: arith._renormalized(arith._product_levels(a, b, 4), a[0] * b[0], 4), 4),
}


def _flatten(v) -> list:
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flatten(x)]
    if isinstance(v, torch.Tensor) and v.dim() == 2:  # planar buffer (nc, n) or (n, nc)
        return list(v.unbind(0 if v.shape[0] <= 4 and v.shape[1] > 4 else -1))
    return [v]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_traced_statements_compute_the_torch_networks_bits(name):
    fn, nc = NETWORKS[name]
    if not eft.has_fused_addcmul("cpu", torch.float64) and ("mul" in name or "div" in name):
        pytest.skip("this CPU build's addcmul is not a fused multiply-add: the FMA networks do not run here")
    xs, ys = _operands(64, nc, 1), _operands(64, nc, 2)
    if name.startswith("div"):
        ys = [t for t in ys]
        ys[0] = torch.where(ys[0] == 0, torch.ones_like(ys[0]), ys[0])
    want = [t.reshape(-1) for t in _flatten(fn(xs, ys))]
    net = Lines()
    xn = [f"x{k}" for k in range(nc)]
    yn = [f"y{k}" for k in range(nc)]
    outs = _flatten(trace(net, fn, xn, yn))
    assert len(outs) == len(want)
    for i in range(xs[0].numel()):
        env = {f"x{k}": np.float64(xs[k][i].item()) for k in range(nc)} | {f"y{k}": np.float64(ys[k][i].item()) for k in range(nc)}
        env = _interpret(net.lines, env)
        got = [env[o] if o in env else np.float64(float.fromhex(_HEX.match(o).group(1))) for o in outs]
        for g, w in zip(got, want):
            wv = w[i].item()
            if isinstance(g, bool):
                assert g == bool(wv), (name, i)
            else:
                assert _bits(g) == _bits(wv) or (np.isnan(g) and np.isnan(wv)), (name, i, float(g), wv)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_a_traced_body_is_the_same_for_float32_and_float64(name):
    fn, nc = NETWORKS[name]
    a, b = Lines(), Lines()
    ra = trace(a, fn, [f"x{k}" for k in range(nc)], [f"y{k}" for k in range(nc)], dtype=torch.float32)
    rb = trace(b, fn, [f"x{k}" for k in range(nc)], [f"y{k}" for k in range(nc)], dtype=torch.float64)
    assert a.lines == b.lines and ra == rb


def test_the_fast_path_check_uses_symbolic_constants():
    net = Lines()
    trace(net, arith._add_fixed_network, ["x0", "x1", "x2"], ["y0", "y1", "y2"], 3)
    text = "\n".join(net.lines)
    assert "mc_max_value<T>()" in text and "CANCEL" in text
    assert "0x1.fffff" not in text  # no dtype-specific constant


def test_a_data_dependent_branch_is_refused():
    def branching(a, b):
        s = a + b
        if s > 0:
            return s
        return -s

    with pytest.raises(TraceError, match="branched on a symbolic value"):
        trace(Lines(), branching, "a", "b")


def test_an_op_without_a_traced_form_is_refused():
    with pytest.raises(TraceError, match=r"torch\.exp has no traced form"):
        trace(Lines(), torch.exp, "a")
    with pytest.raises(TraceError, match="not a fused multiply-add"):
        trace(Lines(), lambda c, a, b: torch.addcmul(c, a, b, value=2), "c", "a", "b")


def test_a_conversion_to_float32_is_one_rounding_and_float64_none():
    """``x.to(torch.float32)`` in a float64 trace: one ``round_f32`` statement (the kernels
    of float32 results keep their values in the float64 type); ``.to`` the traced dtype is
    the value itself; other conversions are refused."""
    net = Lines()
    assert trace(net, lambda a: (a.to(torch.float32), a.to(torch.float64)), "a") == ("v0", "a")
    assert net.lines == ["T v0 = mc_round_f32<T>(a);"]
    with pytest.raises(TraceError, match=r"\.to\(torch\.float16\) of a value traced as torch\.float64"):
        trace(Lines(), lambda a: a.to(torch.float16), "a")
    with pytest.raises(TraceError, match=r"bool value \.to\(torch\.float16\); only component values convert"):
        trace(Lines(), lambda a: (a > 0).to(torch.float16), "a")


def test_a_literal_that_depends_on_the_dtype_is_refused():
    with pytest.raises(TraceError, match=r"literal 0\.1 .* not exactly a float32 value"):
        trace(Lines(), lambda a: a * 0.1, "a")
    assert literal(2.0**-20) == "T(0x1.0000000000000p-20)"


def test_symbolic_values_outside_a_trace_are_refused():
    with pytest.raises(TraceError, match=r"outside hypermc\.mcf\.native\.trace\.trace\(\)"):
        Sym("a") + Sym("b")


def test_an_uninitialised_buffer_element_is_refused():
    def reads_empty(a):
        buf = torch.empty((2,), dtype=torch.float64, device="cpu")
        return buf[1] + a

    with pytest.raises(TraceError, match="uninitialised buffer"):
        trace(Lines(), reads_empty, "a")


def test_the_arith_kernels_are_generated_from_the_traced_networks():
    """The C++ of the arith kernels contains the traced statements of the torch networks
    (the add kernel's body is the traced ``_add_fixed_network`` plus its inputs)."""
    net = native_source._Net()
    xs = [net.let(f"X({k})") for k in range(3)]
    ys = [net.let(f"mc_mul(Y({k}), (T)sign)") for k in range(3)]
    c, oks = native_source._emit_add(net, xs, ys)
    ref = Lines()
    ref.lines = [f"T v{k} = X({k});" for k in range(3)] + [f"T v{k + 3} = mc_mul(Y({k}), (T)sign);" for k in range(3)]
    trace(ref, arith._add_fixed_network, ["v0", "v1", "v2"], ["v3", "v4", "v5"], 3)
    assert net.lines == ref.lines


class CheckedLines(Lines):
    """:class:`Lines` that also keeps the fast-path checks a traced network flags."""

    def __init__(self) -> None:
        super().__init__()
        self.oks: list[str] = []
        self.tables: dict[str, list[float]] = {}

    def table(self, values: list[float]) -> str:
        name = f"TAB{len(self.tables)}"
        self.tables[name] = values
        return name


class KernelLines(native_source._Net):
    """The generator's own emitter (the inline forms of the fused kernels write through
    its helpers), its tables kept by name for :func:`_interpret`."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[float]] = {}  # type: ignore[assignment]

    def table(self, values: list[float]) -> str:
        name = f"TAB{len(self.tables)}"
        self.tables[name] = values
        return name


def _traced_bits_match(
    fn, operands: list[torch.Tensor], dtype: torch.dtype = torch.float64, float64_literals: bool = False, net=None
) -> list[int]:
    """Trace ``fn`` (float64 operands named a, b, ...) and compare the interpreted
    statements with ``fn`` on the tensors, element by element, where every check the
    network flags passes (elsewhere a kernel's caller recomputes the element by the torch
    path); returns the indices of the flagged elements."""
    names = [chr(ord("a") + k) for k in range(len(operands))]
    net = CheckedLines() if net is None else net
    outs = _flatten(trace(net, fn, *names, dtype=dtype, float64_literals=float64_literals))
    want = [t.reshape(-1) for t in _flatten(fn(*operands))]
    flagged = []
    for i in range(operands[0].numel()):
        env = _interpret(net.lines, {n: np.float64(t[i].item()) for n, t in zip(names, operands)}, net.tables)
        if not all(env[o] for o in net.oks):
            flagged.append(i)
            continue
        for o, w in zip(outs, want):
            g = env[o] if o in env else (o == "true") if o in ("true", "false") else np.float64(float.fromhex(_HEX.match(o).group(1)))
            wv = w[i].item()
            assert _bits(g) == _bits(wv) or (np.isnan(g) and np.isnan(wv)), (net.lines, i, float(g), wv)
    return flagged


def test_a_number_divided_by_a_tensor_rounds_the_reciprocal_first():
    """``3.0 / a`` on a tensor is ``a.reciprocal() * 3.0`` in torch (two roundings), not
    one correctly rounded quotient; the traced statements do the same."""
    g = torch.Generator().manual_seed(3)
    a = torch.rand(200, dtype=torch.float64, generator=g) + 1
    a = torch.cat([a, torch.tensor([1.5 * 2.0**1023, 3.0, -0.0, 0.0, math.inf], dtype=torch.float64)])
    _traced_bits_match(lambda a: 3.0 / a, [a])
    _traced_bits_match(lambda a: 0.5 / a, [a])  # 1 / a subnormal for the largest a


def test_augmented_assignments_run_in_place():
    """``c += b`` writes into ``c`` as ``c.add_(b)`` does, so an alias of ``c`` sees it."""

    def updated(a, b):
        c = a * 2.0
        alias = c
        c += b
        c -= a
        c *= b
        c /= a
        return alias

    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(64, dtype=torch.float64, generator=g), torch.randn(64, dtype=torch.float64, generator=g)
    _traced_bits_match(updated, [a, b])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_literal_is_named_symbolically_only_for_the_traced_dtype(dtype):
    """2^18 and 2^47 are ``1 / (64 u)`` of float32 and float64, and a float32 range
    check in float64 compares with float32's ``max``: as plain numbers of the other
    dtype they stay literals (``CANCEL`` would be the traced dtype's constant)."""
    other = torch.float64 if dtype == torch.float32 else torch.float32
    fi, fo = torch.finfo(dtype), torch.finfo(other)
    assert literal(fi.max, dtype) == "mc_max_value<T>()"
    assert literal(1 / (64 * fi.eps / 2), dtype) == "CANCEL"
    assert literal(1 / (64 * fo.eps / 2), dtype) == f"T({float(1 / (64 * fo.eps / 2)).hex()})"
    if other == torch.float32:
        assert literal(fo.max, dtype) == f"T({float(fo.max).hex()})"
    net = Lines()
    trace(net, lambda a: (a * 2.0**18, a * 2.0**47), "a", dtype=dtype)
    assert net.lines[0 if dtype == torch.float64 else 1].endswith(", T(" + (2.0**18 if dtype == torch.float64 else 2.0**47).hex() + "));")
    a = torch.tensor([1.0, -3.0, 2.0**100], dtype=torch.float64)
    _traced_bits_match(lambda a: a * 2.0**18, [a])
    _traced_bits_match(lambda a: torch.where(a.abs() <= torch.finfo(torch.float32).max, a, 0.0), [torch.tensor([1e39, 1.0, 3e38])])


def test_a_literal_beyond_the_float32_range_is_refused():
    with pytest.raises(TraceError, match=r"literal 1e\+300 of a traced network is not exactly a float32 value"):
        trace(Lines(), lambda a: a * 1e300, "a")
    with pytest.raises(TraceError, match=r"literal 1e-300 .* not exactly a float32 value"):
        trace(Lines(), lambda a: a * 1e-300, "a")
    with pytest.raises(TraceError, match=r"literal inf of a traced network is not finite"):
        trace(Lines(), lambda a: a * math.inf, "a")
    with pytest.raises(TraceError, match=r"literal nan of a traced network is not finite"):
        trace(Lines(), lambda a: a + math.nan, "a")


def test_an_in_place_write_into_an_argument_is_refused():
    """On tensors it would change the caller's operand (and, where the caller passes one
    tensor twice, the other argument too: ``a.add_(b); a * b`` is ``4 x^2`` for
    ``a = b = x``); the generated code cannot mirror either."""

    def grows(a, b):
        a.add_(b)
        return a * b

    x = torch.tensor([3.0], dtype=torch.float64)
    assert grows(x, x).item() == 36.0
    with pytest.raises(TraceError, match=r"wrote in place into its argument 'a' \(add_\)"):
        trace(Lines(), grows, "a", "b")
    with pytest.raises(TraceError, match=r"wrote in place into its argument 'b' \(out=\)"):
        trace(Lines(), lambda a, b: torch.sub(a, b, out=b), "a", "b")
    with pytest.raises(TraceError, match=r"wrote in place into its argument 'b' \(copy_\)"):
        trace(Lines(), lambda a, b: b.copy_(a), "a", "b")
    with pytest.raises(TraceError, match=r"wrote in place into its argument 'x1' \(\+=\)"):

        def accumulates(xs):
            xs[1] += xs[0]
            return xs

        trace(Lines(), accumulates, ["x0", "x1"])
    with pytest.raises(TraceError, match=r"wrote in place into its argument 'a' \(mul_\)"):
        trace(Lines(), lambda a: a.expand(3).mul_(2.0), "a")  # a view of the argument
    net = Lines()
    assert trace(net, lambda a, b: a.clone().add_(b), "a", "b") == "v0"  # a copy may change


def test_where_and_copy_refuse_a_value_of_the_wrong_kind():
    with pytest.raises(TraceError, match=r"torch\.where with a T condition 'c'"):
        trace(Lines(), lambda c, a, b: torch.where(c, a, b), "c", "a", "b")
    with pytest.raises(TraceError, match=r"torch\.where on bool values"):
        trace(Lines(), lambda a, b: torch.where(a > b, a > 0, b > 0), "a", "b")
    with pytest.raises(TraceError, match="copy_ writes a bool value into a T value"):
        trace(Lines(), lambda a, b: (a * 1.0).copy_(a > b), "a", "b")
    net = Lines()
    assert trace(net, lambda a: torch.zeros_like(a > 0) | (a > 1), "a") == "v2"
    assert net.lines[1] == "bool v1 = a > T(0x1.0000000000000p+0);" and net.lines[2] == "bool v2 = false | v1;"


def test_a_refused_call_is_named_as_torch_names_it():
    with pytest.raises(TraceError, match=r"torch\.Tensor\.__pow__ has no traced form"):
        trace(Lines(), lambda a: torch.tensor(2.0, dtype=torch.float64) ** a, "a")
    with pytest.raises(TraceError, match=r"torch\.nextafter has no traced form"):
        trace(Lines(), lambda a, b: torch.nextafter(a, b), "a", "b")


def test_maximum_matches_torch_on_the_magnitudes_it_is_traced_for():
    """``torch.maximum`` is traced for operand magnitudes (``_add_fixed_network``'s
    cancellation bound): on those the lowering gives torch's bits, NaN from either side
    included. (On ``-0`` against ``+0`` torch itself answers differently in its vectorised
    loop and its scalar tail.)"""
    edges = [0.0, 5e-324, 2.0**-1022, 1.0, 1.5, 2.0**1000, np.finfo(np.float64).max, math.inf, math.nan]
    a = torch.tensor([x for x in edges for _ in edges], dtype=torch.float64)
    b = torch.tensor([y for _ in edges for y in edges], dtype=torch.float64)
    _traced_bits_match(lambda a, b: torch.maximum(a.abs(), b.abs()), [a, -b])


@st.composite
def _operand_pairs(draw: st.DrawFn, nc: int, n: int = 12) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Two batches of normalised ``nc``-component float64 operands, related element by
    element: independent, exactly cancelling (``y = -x``), cancelling down to the last
    component, or ``x`` scaled by ``2^k`` (``|k| <= 1100``, so sums and products reach
    overflow and the subnormal range); some leading components are the pinned edges
    (±0, subnormals, the smallest normal, ``±2^±1013``, ``max``) with zero tails."""
    x = draw(expansions(torch.float64, nc, shape=(n,), allow_zero=True))
    y = draw(expansions(torch.float64, nc, shape=(n,), allow_zero=True))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    how = torch.randint(0, 4, (n,), generator=g)
    k = torch.randint(-1100, 1101, (n,), generator=g).double()
    near = torch.cat([-x[:, :-1], y[:, -1:] * 2.0**-60], -1)
    y = torch.where((how == 1)[:, None], -x, torch.where((how == 2)[:, None], near, y))
    scaled = x * torch.exp2(k / 2)[:, None] * torch.exp2(k - k / 2)[:, None]
    y = torch.where((how == 3)[:, None], scaled, y)
    edges = edge_values(torch.float64)
    for t in (x, y):
        for i in draw(st.lists(st.integers(0, n - 1), max_size=3)):
            t[i] = 0.0
            t[i, 0] = draw(st.sampled_from(edges))
    return list(x.unbind(-1)), list(y.unbind(-1))


@pytest.mark.parametrize("name", sorted(NETWORKS))
@settings(max_examples=40)
@given(data=st.data())
def test_traced_statements_compute_the_torch_networks_bits_on_edge_operands(name, data):
    fn, nc = NETWORKS[name]
    if not eft.has_fused_addcmul("cpu", torch.float64) and ("mul" in name or "div" in name):
        pytest.skip("this CPU build's addcmul is not a fused multiply-add: the FMA networks do not run here")
    xs, ys = data.draw(_operand_pairs(max(nc, 2)))
    assert xs[0].dtype == torch.float64
    with np.errstate(all="ignore"):
        _traced_bits_match(lambda *t: fn(list(t[:nc]), list(t[nc:])), [*xs[:nc], *ys[:nc]])


def _small_expansions(n: int, nc: int, scale: float, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lead = (torch.rand(n, dtype=torch.float64, generator=g) * 2 - 1) * scale
    comps = [lead]
    for _ in range(nc - 1):
        comps.append(comps[-1] * (torch.rand(n, dtype=torch.float64, generator=g) - 0.5) * 2.0**-52)
    out = list(eft.renormalize(comps, nc).unbind(-1))
    for c in out:  # pinned: an exact zero and a plain float (zero tail)
        c[0] = 0.0
    out[0][1] = scale / 3
    for c in out[1:]:
        c[1] = 0.0
    return out


@pytest.mark.parametrize("nc", [2, 3, 4])
def test_the_elementary_series_are_traced_from_elementary_itself(nc):
    """The float64 kernels' expm1 and sin/cos series are :mod:`elementary`'s own
    functions traced (float64 constants, a constant tensor left of a symbolic value): the
    statements give the torch path's bits."""
    if not eft.has_fused_addcmul("cpu", torch.float64):
        pytest.skip("this CPU build's addcmul is not a fused multiply-add: the FMA networks do not run here")
    cst = elementary._constants(torch.float64, nc, torch.device("cpu"))
    r = _small_expansions(40, nc, math.log(2) / 256, nc)
    # the fixed networks (nc >= 3) reject a zero product: only the pinned zero is flagged
    zero = [0] if nc >= 3 else []
    assert _traced_bits_match(lambda *r: elementary._expm1_poly(list(r), cst), r, float64_literals=True) == zero
    trig = elementary._trig_constants(torch.float64, nc, torch.device("cpu"))
    u = _small_expansions(40, nc, 2.0**-16, 10 + nc)
    u = [c.abs() if k == 0 else c * torch.sign(u[0]) for k, c in enumerate(u)]  # u = t^2 >= 0
    for coeffs, leads, plan in ((trig.sin_coeffs, trig.sin_leads, trig.sin_plan), (trig.cos_coeffs, trig.cos_leads, trig.cos_plan)):

        def horner(*u, c=coeffs, lead=leads, p=plan):
            return elementary._trig_horner(list(u), c, lead, p)

        assert _traced_bits_match(horner, u, float64_literals=True) == zero


def test_float64_literals_are_refused_in_a_float32_trace():
    with pytest.raises(TraceError, match=r"float64 literals \(wide=True\) in a network traced as torch.float32"):
        trace(Lines(), lambda a: a + 0.1, "a", dtype=torch.float32, float64_literals=True)
    with pytest.raises(TraceError, match="literal 0.1 of a traced network is not exactly a float32 value"):
        trace(Lines(), lambda a: a + 0.1, "a")
    net = Lines()
    assert trace(net, lambda a: a + 0.1, "a", float64_literals=True) == "v0"
    assert net.lines == ["T v0 = a + T(0x1.999999999999ap-4);"]


@pytest.mark.parametrize("nc", [2, 3])
def test_the_elementary_sign_and_edge_helpers_are_traced_from_elementary_itself(nc):
    """``_abs_sign`` (``torch.signbit``: ``-0`` and NaN's sign too), ``_apply_sign``,
    ``_keep_tiny`` and ``_finish`` as the kernels trace them give the torch path's bits."""
    edges = [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1.5, 2.0, math.inf, -math.inf, math.nan, -math.nan]
    lead = torch.tensor(edges + [0.25] * 5, dtype=torch.float64)
    x = [lead] + [torch.where(torch.isfinite(lead), lead * 2.0**-60, 0.0) for _ in range(nc - 1)]
    _traced_bits_match(lambda *x: elementary._abs_sign(list(x)), x)
    _traced_bits_match(lambda *x: elementary._apply_sign(list(x[1:]), x[0] < 0), x)
    _traced_bits_match(lambda *x: elementary._keep_tiny(list(x), [c * 3.0 for c in x], 1e-290), x, float64_literals=True)
    _traced_bits_match(lambda *x: elementary._finish(list(x)), x)


def test_lerp_is_atens_formula_for_any_weight():
    """``torch.lerp`` is traced as ATen's CPU kernel (``|w| < 1/2`` picks the formula), so
    weights other than the 0/1 masks of the merge network give torch's bits too."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.rand(64, dtype=torch.float64, generator=g), torch.rand(64, dtype=torch.float64, generator=g)
    w = torch.tensor([-1.7382828604565244, -0.5, -0.25, 0.0, 0.3, 0.5, 0.7, 1.0] * 8, dtype=torch.float64)
    _traced_bits_match(lambda a, b, w: torch.lerp(a, b, w), [a, b, w])


def test_an_operation_of_constants_is_computed_by_torch():
    """A product of two constant tensors inside a traced network is torch's (rounded in
    their dtype), not a statement of the kernel's component type."""
    c32, three = torch.tensor(0.1, dtype=torch.float32), torch.tensor(3.0, dtype=torch.float32)
    net = Lines()
    trace(net, lambda a: a + (c32 * three).double(), "a", float64_literals=True)
    assert net.lines == [f"T v0 = a + T({float(c32 * three).hex()});"]
    vec = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert trace(Lines(), lambda a: (vec * vec).sum() + a, "a") is not None


def test_buffers_and_fills_of_another_dtype_are_refused():
    with pytest.raises(TraceError, match=r"torch\.empty_like\(dtype=torch\.float32\) in a network traced as torch\.float64"):
        trace(Lines(), lambda a, b: torch.add(a, b, out=torch.empty_like(a, dtype=torch.float32)), "a", "b")
    with pytest.raises(TraceError, match=r"torch\.full_like of a T value with \{'dtype': torch\.float32\}"):
        trace(Lines(), lambda a: a + torch.full_like(a, 0.5, dtype=torch.float32), "a")
    net = Lines()
    assert trace(net, lambda a, b: torch.lt(a, b, out=torch.empty_like(a, dtype=torch.bool)), "a", "b") == "v0"
    assert net.lines == ["bool v0 = a < b;"]


@pytest.mark.parametrize("nc", [2, 3, 4])
def test_the_exp_reduction_and_its_table_lookup_are_traced(nc):
    """elementary._exp_reduce (Tang's reduction: round, Cody-Waite products, the table
    index clamped and looked up) traced: the statements give the torch code's bits, and
    ``n = 0`` (small ``|x|``, where the fixed network rejects the zero product
    ``cw_rest * n``) is not flagged: that check is inside ``checks_only_where(n != 0)``."""
    g = torch.Generator().manual_seed(nc)
    bound = elementary._constants(torch.float64, nc, torch.device("cpu")).bound
    lead = torch.cat(
        [
            (torch.rand(300, dtype=torch.float64, generator=g) * 2 - 1) * 1.1 * bound,
            torch.randn(100, dtype=torch.float64, generator=g) * 1e-4,  # n = 0
            torch.tensor([0.0, -0.0, bound, -bound, 2 * bound, -2 * bound, 1e-300], dtype=torch.float64),
        ]
    )
    comps = [lead]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(lead.shape, dtype=torch.float64, generator=g) * 2.0**-53)
    comps = list(eft.renormalize(comps, nc).unbind(-1))
    flagged = _traced_bits_match(lambda *x: elementary._exp_reduce(list(x)), comps, float64_literals=True)
    # n = 0 is never flagged; x = +-0 is (the fixed network rejects the zero sum x + 0)
    assert [i for i in flagged if 300 <= i < 400 or i >= 402] == [] and len(flagged) <= 6


def test_checks_only_where_gates_the_flags_of_a_traced_network():
    """A check flagged inside ``checks_only_where(keep)`` becomes ``!keep | check``."""

    def scaled(a, b):
        nonzero = b != 0
        with fixed.checks_only_where(nonzero):
            prod = eft.unpack(arith.mul_float(torch.stack([a, a * 2.0**-60, a * 2.0**-120], -1), b))
        return [torch.where(nonzero, c, 0.0) for c in prod]

    net = CheckedLines()
    trace(net, scaled, "a", "b")
    (ok,) = net.oks
    keep = next(line.split()[1] for line in net.lines if line.endswith("= b != T(0x0.0p+0);"))
    assert net.lines[-1 - [line.split()[1] for line in reversed(net.lines)].index(ok)].startswith(f"bool {ok} = !{keep} | ")
    a = torch.tensor([1.5, 3.0, 1.25], dtype=torch.float64)
    b = torch.tensor([0.0, -0.0, 7.0], dtype=torch.float64)
    assert _traced_bits_match(scaled, [a, b]) == []  # zero products are not flagged


def test_integer_values_and_tables_are_refused_outside_their_rules():
    """Integers come from ``.to(torch.long)`` of a value the trace knows to be an integer,
    add and subtract, clamp to int bounds and index 1-D float64 constant tables of a
    float64 body; anything else is refused by name."""
    table = torch.arange(5, dtype=torch.float64)
    with pytest.raises(TraceError, match=r"\.to\(torch.int64\) of 'a', a value not known to be an integer"):
        trace(CheckedLines(), lambda a: a.to(torch.long), "a")
    with pytest.raises(TraceError, match=r"integer '\*' of int and int values"):
        trace(CheckedLines(), lambda a: torch.round(a).long() * 2, "a")
    with pytest.raises(TraceError, match=r"clamp\(0, 4\) of a T value"):
        trace(CheckedLines(), lambda a: a.clamp(0, 4), "a")
    with pytest.raises(TraceError, match=r"'-x' on a bool value"):
        trace(CheckedLines(), lambda a: -(a > 0), "a")
    net = CheckedLines()
    trace(net, lambda a: -torch.round(a).long(), "a")
    assert net.lines[-1].startswith("mc_int<T> v2 = -v1")
    with pytest.raises(TraceError, match="comparison '<' of an integer with a T value"):
        trace(CheckedLines(), lambda a: torch.round(a).long() < a, "a")
    with pytest.raises(TraceError, match="a table indexed by a T value"):
        trace(CheckedLines(), lambda a: table[a], "a", float64_literals=True)
    with pytest.raises(TraceError, match="1-D float64 constant table in a float64 body"):
        trace(CheckedLines(), lambda a: table[torch.round(a).long().clamp(0, 4)], "a")
    with pytest.raises(TraceError, match="the emitter declares none"):
        trace(Lines(), lambda a: table[torch.round(a).long().clamp(0, 4)], "a", float64_literals=True)
    with pytest.raises(TraceError, match="checks_only_where of a T value"):

        def gated(a):
            with fixed.checks_only_where(a):
                return a

        trace(CheckedLines(), gated, "a")
    with pytest.raises(ValueError, match=r"_Net.table: a traced network reads a table; call use\(tables\)"):
        trace(native_source._Net(), lambda a: table[torch.round(a).long().clamp(0, 4)], "a", float64_literals=True)
    net = CheckedLines()
    k = trace(net, lambda a: table[(torch.round(a) + 1.0).long().clamp(0, 4)], "a", float64_literals=True)
    assert net.lines[-3:] == [
        f"mc_int<T> v{len(net.lines) - 3} = mc_toint<T>(v{len(net.lines) - 4});",
        f"mc_int<T> v{len(net.lines) - 2} = mc_iclamp<T>(v{len(net.lines) - 3}, 0, 4);",
        f"T {k} = TAB0[v{len(net.lines) - 2}];",
    ]


@pytest.mark.parametrize("fn", ["_exp_generic", "_expm1_generic"])
@pytest.mark.parametrize("nc", [2, 3])
def test_exp_and_expm1_are_traced_whole(fn, nc):
    """The float64 exp and expm1 kernels trace elementary's generic functions whole (the
    reduction, the series, the integer ldexp factors, expm1's exact bracket and the tiny
    case): the statements give the torch code's bits where nothing is flagged."""
    g = torch.Generator().manual_seed(10 + nc)
    bound = elementary._constants(torch.float64, nc, torch.device("cpu")).bound
    lead = torch.cat(
        [
            (torch.rand(120, dtype=torch.float64, generator=g) * 2 - 1) * bound,
            torch.randn(30, dtype=torch.float64, generator=g) * 1e-4,
            torch.tensor([1e-300, -1e-30, 700.0, -700.0, -745.0, 709.7], dtype=torch.float64),
        ]
    )
    comps = [lead]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(lead.shape, dtype=torch.float64, generator=g) * 2.0**-53)
    comps = list(eft.renormalize(comps, nc).unbind(-1))
    flagged = _traced_bits_match(lambda *x: getattr(elementary, fn)(list(x)), comps, float64_literals=True)
    assert len(flagged) <= 3


def test_integer_shifts_views_and_one_sided_clamps_trace():
    """``_pow2``'s bits (an integer shifted into the exponent field, viewed as the
    component type), C's truncating division, and a one-sided clamp of a component value
    (NaN kept, as torch.clamp): the torch code's bits."""
    k = torch.tensor([-1022.0, -5.0, -1.0, 0.0, 1.0, 7.0, 1023.0, 2046.0, -2044.0], dtype=torch.float64)
    _traced_bits_match(lambda k: elementary._ldexp_factors(torch.round(k), torch.float64), [k], float64_literals=True)
    x = torch.tensor([-300.0, -5.5, 0.0, 3.0, math.nan, -math.inf], dtype=torch.float64)
    _traced_bits_match(lambda x: x.clamp(min=-8.0), [x])
    _traced_bits_match(lambda x: x.clamp(max=2.0) + torch.ones_like(x), [x])
    with pytest.raises(TraceError, match=r"\.to\(torch.int64\) of 'k', a value not known to be an integer"):
        trace(CheckedLines(), elementary._lscale, ["a"], "k", float64_literals=True)
    net = CheckedLines()
    (scaled,) = trace(net, elementary._lscale, ["a"], "k", integral=["k"], float64_literals=True)  # the caller's statement
    assert net.lines[0] == "mc_int<T> v0 = mc_toint<T>(k);" and scaled == f"v{len(net.lines) - 1}"
    with pytest.raises(TraceError, match=r"torch.div of an integer by -2; only by a positive int constant"):
        trace(CheckedLines(), lambda a: torch.div(torch.round(a).long(), -2, rounding_mode="trunc"), "a")
    with pytest.raises(TraceError, match=r"bitwise_left_shift of a int value by 64"):
        trace(CheckedLines(), lambda a: torch.bitwise_left_shift(torch.round(a).long(), 64), "a")
    with pytest.raises(TraceError, match=r"\.view\(torch.float64\) of a T value"):
        trace(CheckedLines(), lambda a: a.view(torch.float64), "a")


@pytest.mark.parametrize("nc", [2, 3])
def test_sin_cos_of_the_reduced_argument_is_traced(nc):
    """elementary._sin_cos_reduced (the table index, both series and the table step)
    traced: the torch code's bits, and ``j = 0`` (``|r| < 1/256``, where ``S_0 = 0``
    makes two zero products) not flagged: those checks are gated by ``j != 0``."""
    g = torch.Generator().manual_seed(20 + nc)
    lead = torch.cat(
        [
            (torch.rand(100, dtype=torch.float64, generator=g) * 2 - 1) * math.pi / 4,
            (torch.rand(40, dtype=torch.float64, generator=g) * 2 - 1) / 300,  # j = 0
            torch.tensor([0.0, -0.0, math.pi / 4, -math.pi / 4], dtype=torch.float64),
        ]
    )
    comps = [lead]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(lead.shape, dtype=torch.float64, generator=g) * 2.0**-53)
    comps = list(eft.renormalize(comps, nc).unbind(-1))
    flagged = _traced_bits_match(lambda *r: elementary._sin_cos_reduced(list(r)), comps, float64_literals=True)
    assert [i for i in flagged if 100 <= i < 140] == [] and len(flagged) <= 4


def _log_arguments(fn: str, nc: int) -> list[torch.Tensor]:
    """Expansions of ``nc`` components across ``fn``'s domain and its branch points: near 1
    (log's ``x - 1``), near -1/2 and -1 (log1p), beyond the big threshold (asinh,
    acosh), near the pole (atanh), subnormal and zero tails."""
    g = torch.Generator().manual_seed(nc)
    n = 160
    if fn == "log":
        lead = torch.exp2((torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * 60)
        pins = [1.0, 0.5, 2.0, 1 - 2.0**-30, 2.0**-1030, 1e-300]
    elif fn == "log1p":
        lead = torch.rand(n, generator=g, dtype=torch.float64) * 3 - 1
        pins = [-0.5, -0.999, 0.41, -0.29, 1e-30, 2.0**-1060, -1 + 2.0**-40]
    elif fn == "asinh":
        lead = torch.randn(n, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-40, 100, (n,), generator=g).double())
        pins = [1e-30, -1e-30, 2.0**60, -(2.0**90), 1e200]
    elif fn == "acosh":
        lead = 1 + torch.exp2(torch.randint(-50, 100, (n,), generator=g).double()) * torch.rand(n, generator=g, dtype=torch.float64)
        pins = [1.0, 1 + 2.0**-52, 2.0**90, 1e200]
    else:
        lead = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * 0.999
        pins = [1 - 2.0**-40, -(1 - 2.0**-45), 1e-30, 0.5, -0.5]
    lead = torch.cat([lead, torch.tensor(pins, dtype=torch.float64)])
    comps = [lead]
    for _ in range(nc - 1):
        comps.append(comps[-1] * torch.rand(lead.shape, generator=g, dtype=torch.float64) * 2.0**-54)
    comps[-1][: n // 4] = 0.0  # zero tails (MC numbers made from plain floats)
    return list(eft.renormalize(comps, nc).unbind(-1))


@pytest.mark.parametrize("fn", ["log", "log1p", "asinh", "acosh", "atanh"])
@pytest.mark.parametrize("nc", [2, 3, 4])
def test_the_log_reductions_are_traced_from_elementary_itself(fn, nc):
    """The first fused call of log and its family is elementary's own steps traced
    (``_prepare_*``, ``_asinh_arg``/``_acosh_arg``/``_atanh_arg``, ``_log_reduce``, with
    ``torch.frexp`` and arith's division and square root inlined): the interpreted
    statements give the torch code's bits for ``(t, e, tiny, regular)``, and what they
    flag is a small part (subnormal ``w``, checks of the fixed networks)."""
    x = _log_arguments(fn, nc)
    flagged = _traced_bits_match(lambda *c: native_source._log_front(fn, list(c)), x, float64_literals=True, net=KernelLines())
    assert len(flagged) <= len(x[0]) // 16, flagged


def test_frexp_is_traced_and_flags_subnormal_operands():
    """``torch.frexp`` of a traced element: bit operations for normal numbers, zero, inf
    and NaN (torch's values), and a flag where the operand is subnormal."""
    a = torch.tensor([3.0, -0.75, 0.0, -0.0, 2.0**-1030, math.inf, 1e300, 2.0**-1022], dtype=torch.float64)
    flagged = _traced_bits_match(lambda v: tuple(torch.frexp(v)), [a], net=KernelLines())
    assert flagged == [4]


def test_bools_and_integers_convert_to_the_component_type():
    """``.to(dtype)`` of a bool is 1.0 / 0.0 and of an integer exact; both are known to be
    integers afterwards (a power-of-two scaling may take them)."""
    a = torch.tensor([0.3, -2.5, 7.0, 0.0], dtype=torch.float64)

    def f(v):
        k = torch.round(v).to(torch.long).to(v.dtype) - (v > 0).to(v.dtype)
        return k, torch.where(v < 0, k, torch.zeros_like(k)).to(torch.long).to(v.dtype)

    assert _traced_bits_match(f, [a]) == []


def test_the_fused_division_is_inlined_with_its_checks():
    """A traced network that divides at three or more components inlines the fused
    division kernel (its one-step scaling frame) instead of tracing ``frexp``/``ldexp``
    scalings; its checks are flagged, gated like any other."""
    x = _operands(64, 3, seed=5)
    y = _operands(64, 3, seed=6)
    y[0][1] = 1.0  # no division by zero

    def quotient(*c):
        return elementary._div(list(c[:3]), list(c[3:]))

    flagged = _traced_bits_match(quotient, x + y, net=KernelLines())
    assert len(flagged) <= 2, flagged  # the zero numerator (and its tail) only


def test_a_statement_traced_twice_is_emitted_once():
    """The generator's emitter names a repeated statement by its first occurrence (the
    exp reduction that sinh and cosh share is computed once in their kernel)."""
    net = native_source._Net()
    first = trace(net, fixed.two_sum, "a", "b")
    emitted = len(net.lines)
    assert trace(net, fixed.two_sum, "a", "b") == first
    assert len(net.lines) == emitted
    tables = native_source._Tables()
    both = len(native_source._traced_body(elementary._sinh_cosh_generic, 3, tables))
    sinh = len(native_source._traced_body(elementary._sinh_generic, 3, tables))
    cosh = len(native_source._traced_body(elementary._cosh_generic, 3, tables))
    assert both < sinh + cosh - 1000  # the shared exp reduction and series: about 1,700 statements


@pytest.mark.parametrize("nc", [3, 4])
def test_the_log_core_is_traced_and_its_second_form_flags_no_short_expansion(nc):
    """The log family's second call is ``elementary._log1p_core`` and ``_log_sum`` traced
    (the Newton residual's general kernel inline): the interpreted statements give the
    torch code's bits. On MC numbers made from plain floats (zero tails) the plain form
    flags elements (the series' product checks reject them); the form traced under
    ``fixed.generals_inline`` computes those general kernels inline and flags none."""
    g = torch.Generator().manual_seed(nc)
    n = 120
    lead = torch.rand(n, generator=g, dtype=torch.float64) * 0.7 - 0.29
    comps = [lead] + [lead * torch.rand(n, generator=g, dtype=torch.float64) * 2.0 ** (-54 * k) for k in range(1, nc)]
    for c in comps[1:]:
        c[: n // 2] = 0.0  # the first half: plain floats
    t = list(eft.renormalize(comps, nc).unbind(-1))
    e = torch.randint(-1000, 1000, (n,), generator=g).double()
    tiny = (torch.arange(n) % 17 == 0).double()
    start = torch.log1p(t[0])

    def core(*c):
        return native_source._log_core(list(c[:nc]), c[nc], c[nc + 1], c[nc + 2])

    operands = [*t, e, tiny, start]
    plain = _traced_bits_match(core, operands, float64_literals=True, net=KernelLines())
    with fixed.generals_inline():
        inline = _traced_bits_match(core, operands, float64_literals=True, net=KernelLines())
    assert any(i < n // 2 for i in plain)  # the plain form flags short expansions
    assert inline == []
