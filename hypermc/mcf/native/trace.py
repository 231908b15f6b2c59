"""Symbolic tracing: the torch networks of :mod:`hypermc.mcf.fixed` and
:mod:`hypermc.mcf.arith` run on one symbolic element and become straight-line statements.

Why. A C++ or CUDA kernel must perform the roundings of the torch network it replaces,
in the same order and with the same negations, or the bits differ. Writing the kernel a
second time by hand (an emitter that mirrors the network function by function) keeps
two copies of every algorithm in step by review only. Here the network function itself
is called with :class:`Sym` values in place of tensors: every arithmetic operator, every
``torch.*`` call (through a :class:`~torch.overrides.TorchFunctionMode`) and every
in-place tensor method (``add_``, ``sub_``, ``addcmul_``, ``copy_``, ``out=``, ``+=``)
appends one statement ``T vN = a + b;`` to the emitter, rounding for rounding as torch
computes it (``2.0 / t`` is ``t.reciprocal() * 2.0`` in torch, so it is two statements). Python control flow over lists (levels,
chains, digits) runs at generation time, so the kernel is one branch-free expression
DAG per element. Chosen over a separate IR in which the networks would be rewritten:
the torch path stays the reference and the fallback, unchanged and as fast as before
(it keeps its in-place steps and planar buffers, which a backend-neutral rewrite would
have to model anyway), and a change to a network changes every kernel generated from it.

What a traced function may do: elementwise arithmetic (``+ - * /``, unary minus,
``abs``, ``sqrt``, ``reciprocal``, ``addcmul`` with ``value=±1`` as a fused multiply-add),
comparisons (operators or ``torch.lt`` ... ``torch.ne``; written with ``out=`` into a
floating buffer they are 1.0 / 0.0) and boolean ``& | ~`` (as ``bool`` statements),
``torch.where``, ``torch.maximum`` and ``torch.minimum`` (on magnitudes or other operands
that are not both zeros of opposite signs: there torch's vectorised and scalar loops
disagree), ``torch.lerp`` as ATen's vectorised CPU kernel computes it (its scalar tail
loop can give a zero result the other sign), ``torch.isfinite``, ``zeros_like``,
``empty_like``, ``signbit``, ``copysign``, ``torch.round`` (half to even), ``x.to(torch.float32)``
from a float64 trace (the nearest float32, held in the component type), integers (``int``
values, ``mc_int<T>``: ``.to(torch.long)`` of a value the trace knows to be an integer --
a result of ``torch.round``, an operand that :func:`trace` is told holds one, or an
integer sum, difference or product of such values and integer constants --, integer sums
and differences, truncating division by a positive constant, ``clamp`` to int bounds,
``bitwise_left_shift``, and an integer's bits ``.view``-ed as the component type),
``clamp`` of a component value to one bound, ``torch.frexp`` (bit operations; a
subnormal operand flags the element), bools and integers converted ``.to`` the component
type, ``ones_like``, ``expand_as`` of a constant, a 1-D
float64 constant tensor indexed by an integer (a table the emitter declares, in a float64
body), checks gated by :func:`hypermc.mcf.fixed.checks_only_where`, and planar buffers (``torch.empty((n, *shape))``, ``torch.stack``,
indexing by an int, ``movedim``, ``unbind``). Anything else raises :class:`TraceError`
naming the call: a traced function that branches on data (``if tensor:``), calls an op
without a rule or writes in place into one of its arguments (the caller's tensor, which
may also be passed as another argument) is refused, never approximated.

Constants. The generated bodies are generic in the component type ``T`` (one body serves
float32 and float64), so a literal that depends on the dtype is written symbolically:
``finfo.max`` as ``mc_max_value<T>()`` and the cancellation factor
``1 / (64 u)`` of :func:`hypermc.mcf.fixed.normalised` as ``CANCEL`` (the values of the
traced dtype only). Any other literal
must be exactly representable in float32 (so it is the same value in both types); a
network traced at float32 and at float64 gives the same statements
(``tests/mcf/test_trace.py``). A body generated for float64 only (the elementary
kernels' series) is traced with ``float64_literals=True`` and takes any float64
constant, also as a 0-d tensor (a coefficient, a table entry) on either side of an
operator.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..fixed import CANCEL_FACTOR

__all__ = ["Sym", "SymVec", "TraceError", "trace", "literal", "inline"]


class TraceError(RuntimeError):
    """A traced network did something that has no straight-line form.

    Example:
        >>> def branching(a):
        ...     return a if a > 0 else -a  # a data-dependent branch
        >>> try:
        ...     trace(_Lines(), branching, "a")
        ... except TraceError as exc:
        ...     print(str(exc)[:43])
        a traced network branched on a symbolic val
    """


class _Lines:
    """A minimal emitter (for the examples): numbered ``T vN = expr;`` lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def let(self, expr: str, ctype: str = "T") -> str:
        self.lines.append(f"{ctype} v{len(self.lines)} = {expr};")
        return f"v{len(self.lines) - 1}"


class _Emitter(Protocol):
    """What :func:`trace` writes into: anything with ``let(expr, ctype) -> name``."""

    def let(self, expr: str, ctype: str = ...) -> str: ...


_STATE = threading.local()
_CPU = torch.device("cpu")


def _current() -> _Trace:
    tr = getattr(_STATE, "trace", None)
    if tr is None:
        raise TraceError("a symbolic value was used outside hypermc.mcf.native.trace.trace()")
    return tr


def literal(v: float, dtype: torch.dtype = torch.float64, *, wide: bool = False) -> str:
    """The C++ literal of a float constant of a network traced at ``dtype``
    (``T(hex)``), or its symbolic name where the value is ``dtype``'s ``finfo.max`` or
    cancellation factor (the same number in another dtype is a plain literal: float32's
    ``1 / (64 u)`` is ``2^18``, an ordinary constant in a float64 network). ``wide``: the
    body is generated for float64 only, so any finite float64 value is a literal.

    Example:
        >>> literal(0.5), literal(-2.0), literal(-0.0)
        ('T(0x1.0000000000000p-1)', 'T(-0x1.0000000000000p+1)', 'T(-0x0.0p+0)')
        >>> literal(torch.finfo(torch.float64).max), literal(torch.finfo(torch.float32).max, torch.float32)
        ('mc_max_value<T>()', 'mc_max_value<T>()')
        >>> literal(torch.finfo(torch.float32).max)  # a float32 range check in float64
        'T(0x1.fffffe0000000p+127)'
        >>> literal(0.1, wide=True)  # a body generated for float64 only
        'T(0x1.999999999999ap-4)'
        >>> literal(0.1)
        Traceback (most recent call last):
        ...
        hypermc.mcf.native.trace.TraceError: literal 0.1 of a traced network is not exactly a float32 value ...
    """
    v = float(v)
    fi = torch.finfo(dtype)
    if v == fi.max:
        return "mc_max_value<T>()"
    if v == 1.0 / (CANCEL_FACTOR * fi.eps / 2):
        return "CANCEL"
    if wide and dtype != torch.float64:
        raise TraceError(f"float64 literals (wide=True) in a network traced as {dtype}")
    if math.isfinite(v) and not wide and (abs(v) > torch.finfo(torch.float32).max or float(np.float32(v)) != v):
        raise TraceError(
            f"literal {v!r} of a traced network is not exactly a float32 value (the generated body serves "
            "float32 and float64); give it a symbolic name in hypermc.mcf.native.trace"
        )
    if not math.isfinite(v):
        raise TraceError(f"literal {v!r} of a traced network is not finite")
    return f"T({v.hex()})"


class Sym:
    """One element's value while a network is traced: a name (or literal) of the emitted
    code and its kind (``"T"``, the component type, or ``"bool"``).

    A mutable box, like a tensor: an in-place op (``add_``, ``+=``, ``out=``, ``copy_``)
    rebinds the box to the new statement, so aliases created by the network (a view
    handed back by ``unbind``, a buffer slot) see the update as they would on tensors.
    The boxes of the traced function's arguments refuse in-place ops.

    Example:
        >>> net = _Lines()
        >>> def f(a, b):
        ...     s = a * b
        ...     s.add_(a)  # in place: s names the new statement
        ...     return s, s > 0
        >>> trace(net, f, "a", "b"), net.lines
        (('v1', 'v2'), ['T v0 = mc_mul(a, b);', 'T v1 = v0 + a;', 'bool v2 = v1 > T(0x0.0p+0);'])
    """

    __slots__ = ("name", "kind", "argument", "integral")
    __hash__ = object.__hash__
    #: what :func:`hypermc.mcf.eft.is_traced` asks: a symbolic value takes the traced paths
    symbolic = True

    def __init__(self, name: str | None, kind: str = "T", *, argument: bool = False, integral: bool = False) -> None:
        self.name = name
        #: "T" (a component value), "bool" (a check) or "int" (an integer, ``mc_int<T>``)
        self.kind = kind
        #: an operand of the traced function: writing into it would change the caller's tensor
        self.argument = argument
        #: a component value known to be an integer (``torch.round``, and sums, differences
        #: and products of such values and integer constants): it may convert to ``int``
        self.integral = integral

    def __repr__(self) -> str:
        return f"Sym({self.name!r}, {self.kind!r})"

    # tensor metadata the networks read
    shape = torch.Size([])
    ndim = 0

    @property
    def dtype(self) -> torch.dtype:
        if self.kind == "int":
            return _INT_OF[_current().dtype]
        return _current().dtype if self.kind == "T" else torch.bool

    @property
    def device(self) -> torch.device:
        return _CPU

    @property
    def requires_grad(self) -> bool:
        return False

    def numel(self) -> int:
        return 1

    def dim(self) -> int:
        return 0

    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return _current().call(func, args, kwargs or {})

    def flag(self) -> None:
        """Report this check as the element's fast-path condition: the generated kernel
        sets ``ok`` false where it fails (what :func:`hypermc.mcf.fixed.patch` does with
        a check while a kernel generator traces it)."""
        tr = _current()
        if self.kind != "bool":
            raise TraceError("flag() of a component value; only a check (bool) can be an element's flag")
        check = tr.read(self)
        for keep in reversed(tr.gates):  # a check inside checks_only_where(keep) matters where keep holds
            check = tr.net.let(f"!{keep} | {check}", "bool")
        if tr.flags:
            # one running conjunction: a single flag stays live across a long body (many
            # separate flags kept to its end cost spills, and bytes between the stages of a
            # staged kernel: 20 % of the log core's time with 20 flags)
            tr.flags[-1] = tr.net.let(f"{tr.flags[-1]} & {check}", "bool")
        else:
            tr.flags.append(check)

    @contextlib.contextmanager
    def gate(self) -> Iterator[None]:
        """The checks flagged inside count only where this bool value is true (what
        :func:`hypermc.mcf.fixed.checks_only_where` asks of a traced network)."""
        tr = _current()
        if self.kind != "bool":
            raise TraceError(f"checks_only_where of a {self.kind} value; it takes a bool condition")
        tr.gates.append(tr.read(self))
        try:
            yield
        finally:
            tr.gates.pop()

    def __bool__(self) -> bool:
        raise TraceError("a traced network branched on a symbolic value (a data-dependent `if`); it has no straight-line form")

    def __index__(self) -> int:
        raise TraceError("a traced network used a symbolic value as an index")

    # --- out-of-place arithmetic
    def __add__(self, o: Any) -> Sym:
        return _current().binary("+", self, o)

    def __radd__(self, o: Any) -> Sym:
        return _current().binary("+", o, self)

    def __sub__(self, o: Any) -> Sym:
        return _current().binary("-", self, o)

    def __rsub__(self, o: Any) -> Sym:
        return _current().binary("-", o, self)

    def __mul__(self, o: Any) -> Sym:
        return _current().binary("*", self, o)

    def __rmul__(self, o: Any) -> Sym:
        return _current().binary("*", o, self)

    def __truediv__(self, o: Any) -> Sym:
        return _current().binary("/", self, o)

    def __rtruediv__(self, o: Any) -> Sym:
        # torch's Tensor.__rtruediv__ is ``self.reciprocal() * other``: two roundings
        return self.reciprocal() * o

    def __neg__(self) -> Sym:
        # an integer negates as an integer; a bool is refused (as a component-value operator)
        return _current().unary("-{}", self, kind="int" if self.kind == "int" else "T", integral=self.integral)

    def __abs__(self) -> Sym:
        return _current().unary("mc_fabs({})", self)

    # --- comparisons and boolean ops (bool statements)
    def __eq__(self, o: Any) -> Sym:  # type: ignore[override]
        return _current().compare("==", self, o)

    def __ne__(self, o: Any) -> Sym:  # type: ignore[override]
        return _current().compare("!=", self, o)

    def __lt__(self, o: Any) -> Sym:
        return _current().compare("<", self, o)

    def __le__(self, o: Any) -> Sym:
        return _current().compare("<=", self, o)

    def __gt__(self, o: Any) -> Sym:
        return _current().compare(">", self, o)

    def __ge__(self, o: Any) -> Sym:
        return _current().compare(">=", self, o)

    def __and__(self, o: Any) -> Sym:
        return _current().logical("&", self, o)

    __rand__ = __and__

    def __or__(self, o: Any) -> Sym:
        return _current().logical("|", self, o)

    __ror__ = __or__

    def __invert__(self) -> Sym:
        return _current().unary("!{}", self, kind="bool")

    def __iand__(self, o: Any) -> Sym:
        return self._rebind(self & o, "&=")

    def __ior__(self, o: Any) -> Sym:
        return self._rebind(self | o, "|=")

    # augmented assignments run in place, as on tensors (an alias sees the update)
    def __iadd__(self, o: Any) -> Sym:
        return self._rebind(self + o, "+=")

    def __isub__(self, o: Any) -> Sym:
        return self._rebind(self - o, "-=")

    def __imul__(self, o: Any) -> Sym:
        return self._rebind(self * o, "*=")

    def __itruediv__(self, o: Any) -> Sym:
        return self._rebind(self / o, "/=")

    # --- tensor methods the networks call
    def _rebind(self, value: Sym, op: str) -> Sym:
        if self.argument:
            raise TraceError(
                f"a traced network wrote in place into its argument {self.name!r} ({op}); on tensors that "
                "changes the caller's operand: write into a clone or a fresh result"
            )
        if value.kind != self.kind:
            raise TraceError(f"{op} writes a {value.kind} value into a {self.kind} value")
        self.name = value.name
        return self

    def add(self, o: Any, *, alpha: float = 1) -> Sym:
        return _current().call(torch.add, (self, o), {"alpha": alpha})

    def sub(self, o: Any, *, alpha: float = 1) -> Sym:
        return _current().call(torch.sub, (self, o), {"alpha": alpha})

    def mul(self, o: Any) -> Sym:
        return self * o

    def div(self, o: Any) -> Sym:
        return self / o

    def neg(self) -> Sym:
        return -self

    def abs(self) -> Sym:
        return abs(self)

    def sqrt(self) -> Sym:
        return _current().call(torch.sqrt, (self,), {})

    def reciprocal(self) -> Sym:
        return _current().call(torch.reciprocal, (self,), {})

    def clone(self) -> Sym:
        return Sym(_current().read(self), self.kind)

    def add_(self, o: Any, *, alpha: float = 1) -> Sym:
        return self._rebind(self.add(o, alpha=alpha), "add_")

    def sub_(self, o: Any, *, alpha: float = 1) -> Sym:
        return self._rebind(self.sub(o, alpha=alpha), "sub_")

    def mul_(self, o: Any) -> Sym:
        return self._rebind(self * o, "mul_")

    def div_(self, o: Any) -> Sym:
        return self._rebind(self / o, "div_")

    def neg_(self) -> Sym:
        return self._rebind(-self, "neg_")

    def addcmul_(self, a: Any, b: Any, *, value: float = 1) -> Sym:
        return self._rebind(_current().call(torch.addcmul, (self, a, b), {"value": value}), "addcmul_")

    def copy_(self, src: Any) -> Sym:
        tr = _current()
        src = tr.sym(src, self.kind)
        return self._rebind(Sym(tr.read(src), src.kind), "copy_")

    def to(self, dtype: torch.dtype) -> Sym:
        """``x.to(dtype)``: the identity for the traced dtype; float32 from a float64
        trace rounds to the nearest float32 (``round_f32<T>``, a value that the component
        type ``T`` holds exactly: the kernel keeps one type); an integer (``|k| < 2^(p -
        2)``) or a bool (1.0 / 0.0) converts to the component type exactly; a component
        value known to be an integer converts to an integer. Other targets are refused."""
        tr = _current()
        if self.kind == "int" and dtype == _INT_OF[tr.dtype]:
            return self
        if self.kind == "int" and dtype == tr.dtype:  # exact: |k| < 2^(p - 2) (exponents, quadrants)
            return tr.let(f"mc_tofloat<T>({tr.read(self)})", integral=True)
        if self.kind == "bool" and dtype == tr.dtype:  # 1.0 or 0.0
            one, zero = literal(1.0, tr.dtype), literal(0.0, tr.dtype)
            return tr.let(f"mc_select<T>({tr.read(self)}, {one}, {zero})", integral=True)
        if self.kind != "T":
            raise TraceError(f"{self.kind} value .to({dtype}); only component values convert")
        if dtype == tr.dtype:
            return self
        if dtype == _INT_OF[tr.dtype]:
            if not self.integral:
                raise TraceError(
                    f".to({dtype}) of {self.name!r}, a value not known to be an integer: only the results of torch.round "
                    "and integer sums, differences and products of them convert (the kernel's conversion is exact there)"
                )
            return tr.let(f"mc_toint<T>({tr.read(self)})", "int")
        if dtype == torch.float32 and tr.dtype == torch.float64:
            return tr.unary("mc_round_f32<T>({})", self)
        raise TraceError(f".to({dtype}) of a value traced as {tr.dtype}: only float32 from float64 has a traced form")

    def long(self) -> Sym:
        return self.to(torch.long)

    def view(self, dtype: torch.dtype) -> Sym:
        """An integer's bits as the component type (``x.view(torch.float64)`` of an int64)."""
        tr = _current()
        if self.kind != "int" or dtype != tr.dtype:
            raise TraceError(f".view({dtype}) of a {self.kind} value; only an integer's bits view as the component type {tr.dtype}")
        return tr.let(f"mc_bits_as<T>({tr.read(self)})")

    def clamp(self, min: Any = None, max: Any = None) -> Sym:
        return _current().call(torch.clamp, (self, min, max), {})

    def unsqueeze(self, dim: int) -> SymVec:
        if dim not in (0, -1):
            raise TraceError(f"unsqueeze({dim}) of a traced element; only a component axis (0 or -1)")
        return SymVec([self])

    def expand(self, *shape: Any) -> Sym:
        return self

    def expand_as(self, other: Any) -> Sym:
        return self

    def contiguous(self) -> Sym:
        return self


class _Frexp(NamedTuple):
    """What :func:`torch.frexp` returns for a traced element."""

    mantissa: Sym
    exponent: Sym


class SymVec:
    """A planar buffer or stacked component tensor of one traced element: a list of
    :class:`Sym` boxes, one per component (indexing returns the box itself, as a view).

    Example:
        >>> net = _Lines()
        >>> def f(a, b):
        ...     buf = torch.empty((2,), dtype=a.dtype, device=a.device)
        ...     torch.add(a, b, out=buf[0])
        ...     torch.sub(a, b, out=buf[1])
        ...     return buf.movedim(0, -1)
        >>> trace(net, f, "a", "b")  # a SymVec comes back as its components' names
        ['v0', 'v1']
    """

    __slots__ = ("items",)
    symbolic = True

    def __init__(self, items: Sequence[Sym]) -> None:
        self.items = list(items)

    def __repr__(self) -> str:
        return f"SymVec({self.items!r})"

    @property
    def shape(self) -> torch.Size:
        return torch.Size([len(self.items)])

    @property
    def dtype(self) -> torch.dtype:
        return _current().dtype

    @property
    def device(self) -> torch.device:
        return _CPU

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, k: Any) -> Sym:
        if isinstance(k, int):
            return self.items[k]
        if isinstance(k, tuple) and len(k) == 2 and k[0] is Ellipsis and isinstance(k[1], int):
            return self.items[k[1]]  # x[..., i]: component i of the element
        raise TraceError(f"a traced network indexed a component buffer with {k!r}; only an int or [..., int] is supported")

    def movedim(self, src: int, dst: int) -> SymVec:
        return self  # (n,) planar <-> (n,) component-last: the same list for one element

    def __neg__(self) -> SymVec:
        return SymVec([-c for c in self.items])

    @classmethod
    def __torch_function__(cls, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return _current().call(func, args, kwargs or {})

    def unbind(self, dim: int = 0) -> tuple[Sym, ...]:
        return tuple(self.items)

    def contiguous(self) -> SymVec:
        return self


#: The statement of a product and of a quotient: a function of the backend's prelude that is
#: one IEEE round-to-nearest operation (C++ ``a * b`` compiled without contraction, CUDA
#: ``__dmul_rn``); an infix ``*`` or ``/`` of component values never appears in a body.
_ROUNDED = {"*": "mc_mul", "/": "mc_div"}
_BINARY_FUNCS = {torch.add: "+", torch.sub: "-", torch.mul: "*", torch.div: "/"}
# a constant tensor (a table entry, a coefficient) on the left of a symbolic value
_BINARY_FUNCS |= {getattr(torch.Tensor, m): op for m, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/"))}
_BINARY_FUNCS |= {getattr(torch.Tensor, f"__{m}__"): op for m, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"))}
#: the statement type of each kind of value
_CTYPE = {"T": "T", "bool": "bool", "int": "mc_int<T>"}
#: the integer dtype of the width of each component dtype (``mc_int<T>``)
_INT_OF = {torch.float64: torch.int64, torch.float32: torch.int32}
_COMPARE_FUNCS = {torch.lt: "<", torch.le: "<=", torch.gt: ">", torch.ge: ">=", torch.eq: "==", torch.ne: "!="}


class _Trace(TorchFunctionMode):
    def __init__(self, net: _Emitter, dtype: torch.dtype, wide: bool = False) -> None:
        super().__init__()
        self.net = net
        self.dtype = dtype
        self.wide = wide
        self.flags: list[str] = []
        #: bool names of the enclosing checks_only_where blocks
        self.gates: list[str] = []

    # --- values
    def read(self, s: Sym) -> str:
        if s.name is None:
            raise TraceError("a traced network read an element of an uninitialised buffer (torch.empty)")
        return s.name

    def sym(self, v: Any, kind: str = "T") -> Sym:
        if isinstance(v, Sym):
            return v
        if isinstance(v, bool):
            return Sym("true" if v else "false", "bool")
        if isinstance(v, torch.Tensor) and v.numel() == 1 and v.dim() == 0 and v.dtype.is_floating_point:
            v = v.item()
        if kind == "int":
            if not isinstance(v, int) or abs(v) >= 2**31:
                raise TraceError(f"an integer operation with {v!r}; integer values combine with int constants (|k| < 2^31)")
            return Sym(str(v), "int")
        if isinstance(v, (int, float)):
            return Sym(literal(v, self.dtype, wide=self.wide), kind, integral=math.isfinite(v) and float(v).is_integer())
        raise TraceError(f"a traced network mixed a symbolic value with {type(v).__name__} {v!r}")

    def let(self, expr: str, kind: str = "T", integral: bool = False) -> Sym:
        return Sym(self.net.let(expr, _CTYPE[kind]), kind, integral=integral)

    # --- statements
    def binary(self, op: str, a: Any, b: Any) -> Sym:
        if any(isinstance(v, Sym) and v.kind == "int" for v in (a, b)):
            a, b = self.sym(a, "int"), self.sym(b, "int")
            if a.kind != "int" or b.kind != "int" or op not in ("+", "-"):
                raise TraceError(f"integer {op!r} of {a.kind} and {b.kind} values; integers only add and subtract integers")
            return self.let(f"{self.read(a)} {op} {self.read(b)}", "int")
        a, b = self.sym(a), self.sym(b)
        if a.kind != "T" or b.kind != "T":
            raise TraceError(f"arithmetic {op!r} on a bool value")
        integral = a.integral and b.integral and op != "/"
        if op in ("*", "/"):  # a rounding no backend may contract or approximate
            return self.let(f"{_ROUNDED[op]}({self.read(a)}, {self.read(b)})", integral=integral)
        return self.let(f"{self.read(a)} {op} {self.read(b)}", integral=integral)

    def unary(self, form: str, a: Any, kind: str = "T", integral: bool = False) -> Sym:
        a = self.sym(a, kind)
        if a.kind != kind:
            raise TraceError(f"{form.format('x')!r} on a {a.kind} value")
        return self.let(form.format(self.read(a)), kind, integral=integral)

    def compare(self, op: str, a: Any, b: Any) -> Sym:
        kind = "int" if any(isinstance(v, Sym) and v.kind == "int" for v in (a, b)) else "T"
        a, b = self.sym(a, kind), self.sym(b, kind)
        if (a.kind == "int") != (b.kind == "int"):
            raise TraceError(f"comparison {op!r} of an integer with a {b.kind if a.kind == 'int' else a.kind} value")
        return self.let(f"{self.read(a)} {op} {self.read(b)}", "bool")

    def logical(self, op: str, a: Any, b: Any) -> Sym:
        a, b = self.sym(a, "bool"), self.sym(b, "bool")
        if a.kind != "bool" or b.kind != "bool":
            raise TraceError(f"boolean {op!r} on a component value")
        return self.let(f"{self.read(a)} {op} {self.read(b)}", "bool")

    # --- torch functions
    def call(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        out = kwargs.pop("out", None)
        result = self._call(func, args, kwargs)
        if out is not None:
            if not isinstance(out, Sym):
                raise TraceError(f"{_name(func)}(out=...) into {type(out).__name__}")
            if out.kind == "T" and isinstance(result, Sym) and result.kind == "bool":
                # a comparison written into a floating buffer: 1.0 or 0.0, as torch stores it
                one, zero = literal(1.0, self.dtype), literal(0.0, self.dtype)
                result = self.let(f"mc_select<T>({self.read(result)}, {one}, {zero})")
            return out._rebind(result, "out=")
        return result

    def _call(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        name = _name(func)
        if func is torch.div and kwargs.get("rounding_mode") == "trunc" and isinstance(args[0], Sym) and args[0].kind == "int":
            d = args[1]
            if not isinstance(d, int) or d <= 0:
                raise TraceError(f"torch.div of an integer by {d!r}; only by a positive int constant (C's truncating division)")
            return self.let(f"{self.read(args[0])} / {d}", "int")
        if func in _BINARY_FUNCS and _has_sym(args):
            if kwargs.get("alpha", 1) != 1 or kwargs.get("rounding_mode") is not None:
                raise TraceError(f"torch.{name} with {kwargs!r} has no traced form")
            return self.binary(_BINARY_FUNCS[func], *args)
        if func is torch.neg:
            a = self.sym(args[0])
            return self.unary("-{}", a, integral=a.integral)
        if func is torch.round and not kwargs.get("decimals"):
            # half to even, as the default rounding mode's rint
            return self.unary("mc_rint({})", args[0], integral=True)
        if func is torch.copysign:
            a, b = self.sym(args[0]), self.sym(args[1])
            return self.let(f"mc_copysign({self.read(a)}, {self.read(b)})")
        if func is torch.clamp and isinstance(args[0], Sym):
            a = args[0]
            lo = args[1] if len(args) > 1 else kwargs.get("min")
            hi = args[2] if len(args) > 2 else kwargs.get("max")
            if a.kind == "T" and (lo is None) != (hi is None):
                # one bound, as torch: NaN stays NaN (the comparison is false for it)
                bound = self.sym(lo if hi is None else hi)
                outside = self.compare("<" if hi is None else ">", a, bound)
                integral = a.integral and bound.integral
                return self.let(f"mc_select<T>({self.read(outside)}, {self.read(bound)}, {self.read(a)})", integral=integral)
            if a.kind != "int" or not isinstance(lo, int) or not isinstance(hi, int) or lo > hi:
                raise TraceError(
                    f"clamp({lo!r}, {hi!r}) of a {a.kind} value; integers clamp to int bounds lo <= hi, component values to one bound"
                )
            return self.let(f"mc_iclamp<T>({self.read(a)}, {lo}, {hi})", "int")
        if func is torch.bitwise_left_shift and isinstance(args[0], Sym):
            a, sh = args
            if a.kind != "int" or not isinstance(sh, int) or not 0 <= sh < 8 * _INT_OF[self.dtype].itemsize:
                raise TraceError(f"bitwise_left_shift of a {a.kind} value by {sh!r}; integers shift by an int constant in range")
            return self.let(f"mc_shl<T>({self.read(a)}, {sh})", "int")
        if func is torch.ones_like and isinstance(args[0], Sym):
            if args[0].kind == "bool" and kwargs.get("dtype", torch.bool) == torch.bool:
                return Sym("true", "bool")
            if kwargs.get("dtype", self.dtype) != self.dtype or args[0].kind != "T":
                raise TraceError(f"torch.ones_like of a {args[0].kind} value with {kwargs!r} in a network traced as {self.dtype}")
            return self.sym(1.0)
        if func is torch.Tensor.__getitem__ and isinstance(args[1], Sym):
            return self._lookup(args[0], args[1])
        if func is torch.abs:
            return self.unary("mc_fabs({})", args[0])
        if func is torch.sqrt:
            return self.unary("mc_sqrt({})", args[0])
        if func is torch.reciprocal:
            return self.binary("/", 1.0, args[0])
        if func is torch.addcmul:
            c, a, b = (self.sym(t) for t in args)
            value = kwargs.get("value", 1)
            if value not in (1, -1):
                raise TraceError(f"torch.addcmul with value={value!r} is not a fused multiply-add")
            sign = "-" if value == -1 else ""
            return self.let(f"mc_fma({sign}{self.read(a)}, {self.read(b)}, {self.read(c)})")
        if func is torch.where and any(isinstance(v, SymVec) for v in args[:3]):
            # component buffers: a one-component condition (unsqueezed) broadcasts
            width = max(len(v) for v in args[:3] if isinstance(v, SymVec))
            parts = [v.items if isinstance(v, SymVec) else [v] for v in args[:3]]
            if any(len(p) not in (1, width) for p in parts):
                raise TraceError(f"torch.where of component buffers of {[len(p) for p in parts]} components")
            return SymVec([self._call(torch.where, tuple(p[k % len(p)] for p in parts), {}) for k in range(width)])
        if func is torch.where:
            cond, a, b = self.sym(args[0], "bool"), self.sym(args[1]), self.sym(args[2])
            if cond.kind != "bool":
                raise TraceError(f"torch.where with a {cond.kind} condition {cond.name!r}; torch takes a bool condition")
            if a.kind != "T" or b.kind != "T":
                raise TraceError(f"torch.where on bool values ({a.name!r}, {b.name!r}) has no traced form; use & | ~")
            integral = a.integral and b.integral
            return self.let(f"mc_select<T>({self.read(cond)}, {self.read(a)}, {self.read(b)})", integral=integral)
        if func is torch.frexp:
            return self._frexp(self.sym(args[0]))
        if func in (torch.maximum, torch.minimum):
            # NaN from either operand propagates, as torch's do (std::fmax would not)
            a, b = self.sym(args[0]), self.sym(args[1])
            x, y = self.read(a), self.read(b)
            op = ">=" if func is torch.maximum else "<="
            return self.let(f"({x} {op} {y} || {x} != {x}) ? {x} : {y}")
        if func in _COMPARE_FUNCS:
            return self.compare(_COMPARE_FUNCS[func], *args)
        if func is torch.lerp:
            # ATen's vectorised CPU kernel: fma(w, b - a, a) for |w| < 1/2, else
            # fma(w - 1, b - a, b) (exact selects for a weight of 0 or 1 where b - a is finite)
            a, b, w = (self.sym(t) for t in args)
            small = self.compare("<", self.unary("mc_fabs({})", w), 0.5)
            coeff = self.let(f"mc_select<T>({self.read(small)}, {self.read(w)}, {self.read(self.binary('-', w, 1.0))})")
            base = self.let(f"mc_select<T>({self.read(small)}, {self.read(a)}, {self.read(b)})")
            diff = self.binary("-", b, a)
            return self.let(f"mc_fma({self.read(coeff)}, {self.read(diff)}, {self.read(base)})")
        if func is torch.signbit:
            a = self.sym(args[0])
            return self.let(f"mc_sign_bit<T>({self.read(a)})", "bool")
        if func is torch.isfinite:
            a = self.sym(args[0])
            return self.let(f"mc_fabs({self.read(a)}) <= mc_max_value<T>()", "bool")
        if func is torch.Tensor.expand_as and isinstance(args[1], Sym) and not isinstance(args[0], Sym):
            return self.sym(args[0])  # a constant broadcast to the element: the constant
        if func in (torch.tensor, torch.as_tensor) and isinstance(args[0], Sym):
            return args[0]  # a value already symbolic (dtype and device are the trace's)
        if func is torch.full_like and isinstance(args[0], Sym) and isinstance(args[1], (int, float)):
            if kwargs.get("dtype", self.dtype) != self.dtype or args[0].kind != "T":
                raise TraceError(f"torch.full_like of a {args[0].kind} value with {kwargs!r} in a network traced as {self.dtype}")
            return self.sym(float(args[1]))
        if func is torch.zeros_like:
            dtype = kwargs.get("dtype")
            if dtype == torch.bool or (dtype is None and isinstance(args[0], Sym) and args[0].kind == "bool"):
                return Sym("false", "bool")
            if dtype not in (None, self.dtype):
                raise TraceError(f"torch.zeros_like(dtype={dtype}) in a network traced as {self.dtype}")
            return self.sym(0.0)
        if func is torch.empty_like and isinstance(args[0], Sym):
            dtype = kwargs.get("dtype")
            if dtype is None:
                return Sym(None, args[0].kind)
            if dtype == torch.bool:
                return Sym(None, "bool")
            if dtype == self.dtype:
                return Sym(None, "T")
            raise TraceError(f"torch.empty_like(dtype={dtype}) in a network traced as {self.dtype}: one component type per kernel")
        if func is torch.empty:
            size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
            if len(size) != 1 or not isinstance(size[0], int):
                raise TraceError(f"torch.empty{tuple(size)!r}: a traced buffer is (n,) for one element")
            return SymVec([Sym(None) for _ in range(size[0])])
        if func is torch.stack:
            items = args[0]
            if kwargs.get("dim", args[1] if len(args) > 1 else 0) not in (0, -1):
                raise TraceError("torch.stack of traced values along an inner dimension")
            return SymVec([Sym(self.read(self.sym(t)), "T") for t in items])
        if func in (torch.broadcast_tensors,):
            return tuple(args)
        if func in (torch.Tensor.unbind, torch.unbind) and isinstance(args[0], SymVec):
            return args[0].unbind()
        if not _has_sym((args, kwargs)):
            return func(*args, **kwargs)  # no symbolic operand (metadata, constants): run it
        raise TraceError(f"torch.{name} has no traced form (hypermc.mcf.native.trace supports elementwise arithmetic only)")

    def _frexp(self, a: Sym) -> _Frexp:
        """``torch.frexp(a)``: the mantissa in ``[0.5, 1)`` and the exponent of a normal
        number (bit operations); zero, inf and NaN give themselves and exponent 0, as
        torch's. A subnormal ``a`` (whose exponent the bits do not hold) flags the element:
        the generated kernel leaves it to the torch path."""
        if a.kind != "T":
            raise TraceError(f"torch.frexp of a {a.kind} value")
        x = self.read(a)
        normal = self.let(f"mc_normal<T>({x})", "bool")
        self.let(f"(mc_fabs({x}) >= mc_min_normal<T>()) | ({x} == {literal(0.0)}) | ({x} != {x})", "bool").flag()
        mant = self.let(f"mc_select<T>({self.read(normal)}, mc_mant<T>({x}), {x})")
        return _Frexp(mant, self.let(f"mc_expo<T>({x})", "int"))

    def _lookup(self, table: Any, idx: Sym) -> Sym:
        """``table[idx]``: an entry of a constant float64 table at an integer index."""
        if idx.kind != "int":
            raise TraceError(f"a table indexed by a {idx.kind} value {idx.name!r}; the index is an integer (.to(torch.long))")
        if not isinstance(table, torch.Tensor) or table.dim() != 1 or table.dtype != torch.float64 or not self.wide:
            raise TraceError("a traced lookup reads a 1-D float64 constant table in a float64 body (float64_literals=True)")
        declare = getattr(self.net, "table", None)
        if declare is None:
            raise TraceError("a traced network read a table, and the emitter declares none (no `table` method)")
        return self.let(f"{declare(table.tolist())}[{self.read(idx)}]")

    def __torch_function__(self, func: Callable, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return self.call(func, tuple(args), dict(kwargs or {}))


def _has_sym(v: Any) -> bool:
    if isinstance(v, (Sym, SymVec)):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_sym(t) for t in v)
    if isinstance(v, dict):
        return any(_has_sym(t) for t in v.values())
    return False


def _name(func: Callable) -> str:
    """What torch calls ``func`` (``torch.exp``, ``torch.Tensor.__mul__``), without ``torch.``."""
    full = torch.overrides.resolve_name(func) or getattr(func, "__name__", repr(func))
    return full.removeprefix("torch.")


def _to_sym(v: Any, integral: frozenset[str] = frozenset()) -> Any:
    if isinstance(v, str):
        return Sym(v, argument=True, integral=v in integral)
    if type(v) in (list, tuple):  # not a NamedTuple of constants
        return type(v)(_to_sym(t, integral) for t in v)
    return v


def _to_names(v: Any) -> Any:
    if isinstance(v, Sym):
        return _current().read(v)
    if isinstance(v, SymVec):
        return [_current().read(s) for s in v.items]
    if isinstance(v, (list, tuple)):
        return type(v)(_to_names(t) for t in v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return literal(v, _current().dtype, wide=_current().wide)
    return v


def trace(
    net: _Emitter,
    fn: Callable,
    *args: Any,
    dtype: torch.dtype = torch.float64,
    float64_literals: bool = False,
    integral: Sequence[str] = (),
    **kwargs: Any,
) -> Any:
    """Run the torch network ``fn`` on symbolic values; its statements go to ``net``.

    ``args``: operand names (``str``) or nested lists/tuples of them become :class:`Sym`
    values; other arguments (ints, flags) pass as they are. Returns ``fn``'s result with
    every :class:`Sym` replaced by its name and every :class:`SymVec` by the list of its
    components' names. ``dtype`` is what the network sees as the component dtype (the
    statements are the same for float32 and float64, see the module docstring);
    ``float64_literals``: the body serves float64 only (the elementary kernels), so
    constants need not be float32 values (:func:`literal` with ``wide``). ``integral``:
    operand names whose values are integers (the caller's statement: a rounded value, an
    exponent), so the network may convert them ``.to(torch.long)``.

    A checked fast path inside ``fn`` (:func:`hypermc.mcf.fixed.patch`) does not trace
    its general kernel: its check goes to ``net.oks``, the conditions under which the
    generated kernel's element is good (elsewhere its caller recomputes the element), and
    :mod:`hypermc.mcf.registry` answers no fused kernel for symbolic operands, so ``fn``
    is traced down to the torch networks.

    Example:
        >>> from hypermc.mcf import fixed
        >>> class Lines:
        ...     def __init__(self) -> Sym:
        ...         self.lines = []
        ...     def let(self, expr, ctype="T"):
        ...         self.lines.append(f"{ctype} v{len(self.lines)} = {expr};")
        ...         return f"v{len(self.lines) - 1}"
        >>> net = Lines()
        >>> trace(net, fixed.two_sum, "a", "b")
        ('v0', 'v5')
        >>> net.lines  # Knuth's TwoSum, as fixed.two_sum rounds it
        ['T v0 = a + b;', 'T v1 = v0 - a;', 'T v2 = v0 - v1;', 'T v3 = a - v2;', 'T v4 = b - v1;', 'T v5 = v3 + v4;']
    """
    if getattr(_STATE, "trace", None) is not None:
        raise TraceError("trace() is not reentrant")
    tr = _Trace(net, dtype, float64_literals)
    _STATE.trace = tr
    try:
        with tr:
            result = _to_names(fn(*_to_sym(list(args), frozenset(integral)), **kwargs))
    finally:
        _STATE.trace = None
    if tr.flags:
        oks = getattr(net, "oks", None)
        if oks is None:
            raise TraceError(f"{_name(fn)} flags elements (a checked fast path), and the emitter keeps no flags (no `oks` list)")
        oks.extend(tr.flags)
    return result


class _Inlined:
    """What an inline form answers in place of a kernel's result: the kernel's
    components (a :class:`SymVec`) and its checks, flagged when the network takes the
    result (``patched``), so a gate around the call (``checks_only_where``) applies."""

    def __init__(self, out: SymVec, oks: list[str]) -> None:
        self.out, self.oks = out, oks

    def patched(self, general: Callable[..., Any], *operands: Any) -> SymVec:
        for ok in self.oks:
            Sym(ok, "bool").flag()
        return self.out


def inline(emit: Callable[..., tuple[list[str], list[str]]], *operands: Any, **constants: Any) -> _Inlined:
    """An inline form's answer (:func:`hypermc.mcf.registry.register_inline`): ``emit(net,
    *names, **constants)`` writes a fused kernel's statements for the component names of
    ``operands`` (:class:`SymVec` values of the running trace) into the trace's emitter
    and returns the result's component names and the names of its checks.

    Example:
        >>> class Net(_Lines):
        ...     oks = []
        >>> def emit(net, xs):  # a kernel: the components doubled, checked finite
        ...     out = [net.let(f"mc_mul({c}, T(2))") for c in xs]
        ...     return out, [net.let(f"mc_fabs({out[0]}) <= mc_max_value<T>()", "bool")]
        >>> net = Net()
        >>> trace(net, lambda a, b: inline(emit, torch.stack([a, b])).patched(None), "a", "b"), net.oks
        (['v0', 'v1'], ['v2'])
    """
    tr = _current()
    names = [[tr.read(s) for s in v.items] for v in operands]
    flagged = getattr(tr.net, "oks", None)
    mark = None if flagged is None else len(flagged)
    _STATE.trace = None  # the emitter traces its own networks
    try:
        out, oks = emit(tr.net, *names, **constants)
    finally:
        _STATE.trace = tr
    if flagged is not None:  # checks the emitter's traces flagged: gated like the others
        oks = [*flagged[mark:], *oks]
        del flagged[mark:]
    return _Inlined(SymVec([Sym(c) for c in out]), oks)
