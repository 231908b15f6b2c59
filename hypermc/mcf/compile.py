"""``torch.compile`` support for MC arithmetic: fused elementwise expressions, every other
MC op one opaque op, and compiled MC code computes eager mode's bits.

Opaque ops. An :class:`~hypermc.MCTensor` is a traceable wrapper subclass
(``__tensor_flatten__``/``__tensor_unflatten__``), so Dynamo puts MC ops in the graph
and AOTAutograd traces ``MCTensor.__torch_dispatch__`` on the symbolic components.
While it traces, an MC op that computes (everything except views and ops that return
Python values) is not traced into aten ops: it becomes **one call of the custom op**
``hypermc::mc_op(spec, tensors)`` (:func:`torch.library.custom_op`), where ``spec`` is a
JSON description of the aten op and its non-tensor arguments and ``tensors`` are the
components of the MC operands and the plain tensor operands. At run time the compiled
graph calls that op, which rebuilds the MCTensors and runs **the eager implementation**
(:func:`run_spec`); the registered fake implementation runs the same implementation on
host stand-ins to give the output shapes. Views (``view``, ``transpose``, ``select``,
...) move no data and are traced as before, so aliasing is kept.

Why not let Inductor compile the kernels: measured on this project's 2-core CPU (torch
2.13), tracing the kernels into Inductor

* took more than 600 s to compile a single float64 ``nc = 3`` addition (the checked
  fixed network plus its general fallback is several hundred pointwise ops, which
  Inductor's CPU scheduler fuses and re-simplifies node by node), while ``nc = 2``
  compiled in 12-14 s;
* gave no guarantee: an error-free transformation is exact only if the backend neither
  contracts ``a * b + c`` into an FMA nor reassociates, and nothing in Inductor promises
  that for every backend, dtype (16-bit intermediates are kept in float32 unless
  ``emulate_precision_casts`` is set) and version.

An opaque op is exact by construction: compiled MC code computes **bit for bit what eager
mode computes**, on every device and component dtype (float16 and bfloat16 included),
with no graph break in the core ops, the manifolds or backward; the data-dependent fast
paths of the kernels (``all_finite`` checks) run inside the op on real data.

Fused expressions (compiled speed). One opaque op per MC op runs each op as
its own pass over memory, while compiled native code fuses a whole expression into one
loop: ``x*y + x/(y*y + 1)`` on 10^6 elements ran 8-75x slower compiled in MC than
compiled in native floats (float64 ``nc = 3``: 30.8x on a loaded machine). So the
elementwise MC ops with a fusion rule (:func:`fusable`, in :mod:`hypermc.mcf.ops`: add,
sub, rsub, mul, div, neg, square, reciprocal, and sqrt at ``nc >= 3``; MC, plain-tensor
and Python-number operands) on CPU float32/float64 components with ``nc`` 2 to 4 are
traced differently (:func:`fuse_op`):

* Each traced MC value remembers the expression that computed it: a DAG of ops, each
  with the aten call eager mode makes and the kernel *step* it runs (which arith kernel,
  operand order and constants, as :mod:`hypermc.mcf.ops` dispatches them), over *leaves*
  (MC components, plain tensors and constants read from memory).
* An op becomes **one call of** ``hypermc::mc_fused(spec, tensors)`` computing the op
  *and the expressions of its operands* from their leaves (at most
  :data:`MAX_FUSED_OPS` ops). The node of the last op of a chain thus computes the whole
  chain; the nodes of its intermediate values are dead code where nothing else reads
  them, and the backend removes them (``x*y + x/(y*y + 1)``: one ``mc_fused`` call of
  five ops at run time). A value also read elsewhere (returned, reduced, an operand of an
  opaque op) keeps its own node and is computed again inside the expressions that read
  it.
* An operand's expression is inlined only if none of its leaves, and not the operand
  itself, was written in place since it was traced (an MC in-place op, a plain in-place
  op, a write through a view: version counters, functionalisation's mutation counters
  and the writes :func:`call_opaque` makes); otherwise the operand is read from its own
  node's output, which holds the value before the write.

At run time the CPU body of ``mc_fused`` (:func:`run_fused`) runs one generated C++ loop
for the whole expression (:mod:`hypermc.mcf.native.fused`, built on its first use and
cached on disk like the per-op kernels of :mod:`hypermc.mcf.native`): every step is the
fast path of the kernel eager mode runs for that op (the same generated statements), and
an element's ``ok`` flag is the conjunction of every step's check. The elements that
fail any check are recomputed by **eager mode's aten ops on those elements**; the rows
are gathered in order, so each op's general kernel sees exactly the rows it sees in eager
mode (the failing elements of every op are among them). So compiled MC code keeps
computing eager mode's bits; each fused kernel is also checked against eager mode on a
fixed batch before its first use. Without a fused kernel (a single op, no compiler,
``HYPERMC_NATIVE=0``, a failed check) the body runs eager mode's ops one by one.

Why fuse while tracing, in ``__torch_dispatch__``, and not in a graph pass or an Inductor
lowering: a pass over the traced graph would see every reader of every value, but
Inductor runs custom passes only through its global configuration
(``post_grad_custom_post_pass`` and the like), which hypermc must not set for its users,
and a custom lowering of the opaque op would tie hypermc to Inductor internals and to the
Inductor backend. Deciding while tracing needs neither: ``mc_fused`` is an ordinary
custom op, so the graph works with every backend (``aot_eager``, which removes no dead
code, runs the intermediate nodes too: same bits, more work) and with
``fullgraph=True``, and no configuration is touched. The price is that a decision cannot
see later readers (the recomputation above). The fused kernels are bound by arithmetic,
not memory: float64 ``nc = 4`` ``x*y + x/(y*y + 1)`` is about 1,300 roundings per
element, so they are compiled for the widest vectors (AVX-512 here) and with 16-bit
check flags (GCC picks the vectorisation factor from the narrowest type in a loop: with
byte flags it ran 64 elements per iteration and spilled, 26 ms instead of 15 ms for
float64 ``nc = 3``), and a division scales its operands by one power of two where eager
mode's three-step scaling multiplies by 1 twice. Measured (``docs/numerics.md``, 2-core
AVX-512 VM shared with other jobs): compiled MC / compiled native for that expression,
10^6 elements, one thread, float32 ``nc = 2`` 3.7-3.9x (target <= 6x), float64 ``nc =
3`` 13.6-16.4x (target 12x), ``nc = 4`` 25-29x (target 20x), against 34-39x, 40-41x and
58-65x with one opaque op per MC op in the same runs (float64 ``nc = 2``: 4.7-5.3x
against 16-20x). The float64 targets are out of reach with eager's algorithms on this
machine: the loops are bound by arithmetic (585 and 1,167 floating-point operations per
element) and run at 78 % and 86 % of the measured peak of two 512-bit operations per
cycle, while compiled native is a memory-bound 0.9-1.1 ms (at the peak: ~10-12x and
~19-24x).

Not fused: CUDA and float16/bfloat16 (the per-op path as before), ``nc = 2`` square roots
(eager mode picks one path per tensor there), exp, log and the other elementary
functions (their traced kernels take minutes to compile: a new kernel per expression
would stall the first call), reductions, matmul, comparisons, ``alpha != 1``.
``HYPERMC_FUSE=0`` turns fusion off (every MC op opaque, the same bits).

What is refused, loudly, with :class:`MCCompileError` naming the op: MC ops whose
arguments cannot be described without the data, i.e. symbolic sizes or scalars
(``dynamic=True`` shapes reaching the non-tensor arguments of an MC op); compile with
``dynamic=False``.

No global Inductor or Dynamo configuration is changed by hypermc.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.weak import WeakIdKeyDictionary

from .eft import is_traced, real_tensors_only
from .native import fused as native_fused

if TYPE_CHECKING:
    from .tensor import MCTensor

__all__ = [
    "MCCompileError",
    "is_opaque",
    "call_opaque",
    "define_mc_op",
    "run_spec",
    "code_version",
    "fusable",
    "fuse_op",
    "fusion_enabled",
    "run_fused",
    "MAX_FUSED_OPS",
]


class MCCompileError(RuntimeError):
    """An MC op was traced by ``torch.compile`` with arguments that cannot be compiled.

    Example:
        >>> x = hm.mc([1.0], nc=2, dtype=torch.float64)
        >>> call_opaque(torch.ops.aten.mul.Scalar, (x, 1j), {}, hm.MCTensor)  # as torch.compile would trace it
        Traceback (most recent call last):
        ...
        hypermc.mcf.compile.MCCompileError: MCTensor op aten.mul.Scalar was traced with an argument of type complex (1j) ...
    """


# ----------------------------------------------------------------------- which ops


@functools.cache
def is_opaque(func: torch._ops.OpOverload) -> bool:
    """Whether aten op ``func`` on MC operands becomes one opaque op while tracing.

    False for views (their result aliases an input without a write, so they must stay
    in the traced graph to keep aliasing) and for ops that return non-tensors
    (``item``, ``is_same_size``): these move no data and round nothing.

    Example:
        >>> is_opaque(torch.ops.aten.add.Tensor), is_opaque(torch.ops.aten.add_.Tensor)
        (True, True)
        >>> is_opaque(torch.ops.aten.view.default), is_opaque(torch.ops.aten._local_scalar_dense.default)
        (False, False)
    """
    schema = func._schema
    for r in schema.returns:
        if r.alias_info is not None and not r.alias_info.is_write:
            return False
        kind = str(r.type)
        if kind not in ("Tensor", "List[Tensor]", "Tensor[]"):
            return False
    return len(schema.returns) > 0


def _mutated_names(func: torch._ops.OpOverload) -> tuple[list[int], list[str]]:
    """Positions and names of the arguments that ``func`` writes to."""
    written = [(i, a) for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    return [i for i, a in written if not a.kwarg_only], [a.name for _, a in written if a.kwarg_only]


# ------------------------------------------------------------------ the spec format


def _encode(value: Any, tensors: list[torch.Tensor], mc_type: type[MCTensor], write: bool, func) -> Any:
    """JSON-able template of one argument; tensors are appended to ``tensors``."""
    if isinstance(value, mc_type):
        tensors.append(value._components)
        return {"mc": len(tensors) - 1, "w": write}
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"t": len(tensors) - 1, "w": write}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise MCCompileError(
            f"MCTensor op {func} was traced with the symbolic argument {value!r}; MC ops are "
            "compiled with static arguments only: use torch.compile(..., dynamic=False)"
        )
    if isinstance(value, int):
        return {"i": str(value)}
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, (list, tuple)):
        return {"l" if isinstance(value, list) else "tu": [_encode(v, tensors, mc_type, write, func) for v in value]}
    if isinstance(value, torch.dtype):
        return {"dt": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"dev": str(value)}
    if isinstance(value, (torch.layout, torch.memory_format)):
        return {"attr": str(value).removeprefix("torch.")}
    raise MCCompileError(
        f"MCTensor op {func} was traced with an argument of type {type(value).__name__} "
        f"({value!r}) that hypermc cannot pass to its compiled kernels"
    )


def _decode(t: Any, tensors: list[torch.Tensor], mc_type: type[MCTensor]) -> Any:
    if not isinstance(t, dict):
        return t
    if "mc" in t:
        c = tensors[t["mc"]]
        return mc_type(c.clone() if t["w"] else c)
    if "t" in t:
        x = tensors[t["t"]]
        return x.clone() if t["w"] else x
    if "i" in t:
        return int(t["i"])
    if "f" in t:
        return float.fromhex(t["f"])
    if "l" in t:
        return [_decode(v, tensors, mc_type) for v in t["l"]]
    if "tu" in t:
        return tuple(_decode(v, tensors, mc_type) for v in t["tu"])
    if "dt" in t or "attr" in t:
        return getattr(torch, t.get("dt") or t["attr"])
    if "dev" in t:
        return torch.device(t["dev"])
    raise ValueError(f"malformed hypermc::mc_op spec entry {t!r}")


@functools.lru_cache(maxsize=4096)
def _parsed(spec: str) -> dict:
    return json.loads(spec)


@functools.cache
def _op_from_name(name: str) -> torch._ops.OpOverload:
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


# Output structure of each spec, recorded by the fake implementation while tracing:
# (pytree spec, per leaf "mc" | "t" | ("const", value)).
_OUT_STRUCTURE: dict[str, tuple[Any, list[Any]]] = {}


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of the ``hypermc.mcf`` sources, part of every spec: compiled graphs are
    cached by torch (keyed by the graph, which holds the specs), and the output layouts
    they assume come from the kernels that traced them.

    Example:
        >>> v = code_version()
        >>> len(v), int(v, 16) >= 0, v == code_version()  # 16 hex digits, cached
        (16, True, True)
    """
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _planar(c: torch.Tensor) -> torch.Tensor:
    """``c`` (``(*shape, nc)``) with each component contiguous (a planar buffer)."""
    return c.movedim(-1, 0).contiguous().movedim(0, -1)


def _empty_planar(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.empty((shape[-1], *shape[:-1]), dtype=dtype, device=device).movedim(0, -1)


def _storage_key(t: torch.Tensor) -> Any:
    """What identifies ``t``'s memory: the storage address of a real tensor; the view
    base of a symbolic one (fake tensors have no addresses)."""
    if is_traced(t):
        return ("fake", id(t._base if t._is_view() else t))
    return t.untyped_storage().data_ptr()


def run_spec(spec: str, tensors: list[torch.Tensor], mc_type: type[MCTensor], dispatch_impl: Callable) -> list[torch.Tensor]:
    """Run the MC op described by ``spec`` on ``tensors`` with its eager implementation.

    The body of ``hypermc::mc_op`` (and of its fake implementation, on symbolic tensors).
    ``mc_type`` is :class:`~hypermc.MCTensor` and ``dispatch_impl(func, args, kwargs)``
    its op table's lookup, both passed in by :func:`define_mc_op` (this module sits below
    the class and does not import it). Returns the flat list of output tensors
    (components for MC outputs), none of which aliases an input.

    Example:
        >>> import json
        >>> from hypermc.mcf.tensor import dispatch_impl
        >>> c = torch.tensor([[1 + 2**-30, 0.0]], dtype=torch.float64)  # components of 1 + 2^-30
        >>> spec = json.dumps({"op": "aten.mul.Tensor", "args": [{"mc": 0, "w": False}, {"mc": 1, "w": False}],
        ...                    "kwargs": {}, "code": code_version()}, sort_keys=True)
        >>> out = run_spec(spec, [c, c], hm.MCTensor, dispatch_impl)
        >>> [t.tolist() for t in out]  # (1 + 2^-30)^2 = (1 + 2^-29) + 2^-60
        [[[1.0000000018626451, 8.673617379884035e-19]]]
    """
    with real_tensors_only():  # real tensors, eager mode's choices (also in the fake run's stand-ins)
        return _run_spec(spec, tensors, mc_type, dispatch_impl)


def _run_spec(spec: str, tensors: list[torch.Tensor], mc_type: type[MCTensor], dispatch_impl: Callable) -> list[torch.Tensor]:
    d = _parsed(spec)
    func = _op_from_name(d["op"])
    args = _decode({"tu": d["args"]}, tensors, mc_type)
    kwargs = {k: _decode(v, tensors, mc_type) for k, v in d["kwargs"].items()}
    out = dispatch_impl(func, args, kwargs)
    leaves, treespec = tree_flatten(out)
    kinds: list[Any] = []
    flat: list[torch.Tensor] = []
    seen = [_storage_key(t) for t in tensors]
    for leaf in leaves:
        if isinstance(leaf, mc_type):
            kinds.append("mc")
            t = leaf._components
        elif isinstance(leaf, torch.Tensor):
            kinds.append("t")
            t = leaf
        else:
            kinds.append(("const", leaf))
            continue
        if _storage_key(t) in seen:
            t = t.clone()  # a custom op's outputs must not alias its inputs or each other
        # One fixed layout in both implementations, so the compiled graph's view of the
        # output (from the fake run) is what the real run returns: MC components planar
        # (each component contiguous, the kernels' own layout), plain tensors contiguous.
        t = _planar(t) if kinds[-1] == "mc" else t.contiguous()
        key = _storage_key(t)
        seen.append(key)
        flat.append(t)
    _OUT_STRUCTURE.setdefault(spec, (treespec, kinds))
    return flat


def define_mc_op(mc_type: type[MCTensor], dispatch_impl: Callable) -> Callable:
    """Define the custom op ``hypermc::mc_op(spec, tensors)`` and its fake implementation.

    Called once, by :mod:`hypermc.mcf.tensor`, with :class:`~hypermc.MCTensor` and its op
    table's lookup ``dispatch_impl(func, args, kwargs)``: the op rebuilds the MC operands
    as ``mc_type`` and runs :func:`run_spec` with them. Returns the op.

    Example:
        >>> import json
        >>> torch.ops.hypermc.mc_op.default._schema  # defined when hypermc.mcf.tensor is imported
        hypermc::mc_op(str spec, Tensor[] tensors) -> Tensor[]
        >>> c = torch.tensor([[1 + 2**-30, 0.0]], dtype=torch.float64)
        >>> spec = json.dumps({"op": "aten.mul.Tensor", "args": [{"mc": 0, "w": False}, {"mc": 1, "w": False}],
        ...                    "kwargs": {}, "code": code_version()}, sort_keys=True)
        >>> torch.ops.hypermc.mc_op(spec, [c, c])[0].tolist()  # the components of c * c
        [[1.0000000018626451, 8.673617379884035e-19]]
    """

    @torch.library.custom_op("hypermc::mc_op", mutates_args=())
    def mc_op(spec: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """One MC aten op (``spec``) on component/plain tensors, run eagerly (see module docstring)."""
        return run_spec(spec, tensors, mc_type, dispatch_impl)

    @mc_op.register_fake
    def _mc_op_fake(spec: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return _fake_outputs(spec, tensors, mc_type, dispatch_impl)

    @torch.library.custom_op("hypermc::mc_fused", mutates_args=())
    def mc_fused(spec: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """A fused expression of elementwise MC ops (``spec``) on its leaves (see :func:`fuse_op`)."""
        return run_fused(spec, tensors, mc_type, dispatch_impl)

    mc_fused.register_fake(_fused_fake)
    return mc_op


def _fake_outputs(spec: str, tensors: list[torch.Tensor], mc_type: type[MCTensor], dispatch_impl: Callable) -> list[torch.Tensor]:
    """Output metadata of ``hypermc::mc_op``: the implementation runs once per spec and
    input shapes on host stand-ins of the inputs' shapes (MC operands 1, float operands
    1, integer and bool operands 0: every index valid, every kernel on its fast path),
    outside the fake mode; the outputs are fake tensors of the same shapes, laid out
    like the real run's (planar MC components, contiguous plain tensors). The kernels traced on fake (or meta) tensors instead would take
    their general, data-independent paths: thousands of ops for an ``nc = 3`` exp, which
    took 12-100 s per trace."""
    shapes = []
    for t in tensors:
        if not all(isinstance(n, int) for n in t.shape):
            raise MCCompileError(
                f"MCTensor op {_parsed(spec)['op']} was traced with symbolic sizes "
                f"{tuple(t.shape)}; MC ops are compiled with static shapes only: use "
                "torch.compile(..., dynamic=False)"
            )
        shapes.append((tuple(t.shape), t.dtype))
    key = (spec, tuple(shapes))
    meta = _FAKE_OUTPUTS.get(key)
    if meta is None:
        with unset_fake_temporarily():
            outs = run_spec(spec, _stand_ins(spec, shapes), mc_type, dispatch_impl)
        kinds = [k for k in _OUT_STRUCTURE[spec][1] if k in ("mc", "t")]
        meta = _FAKE_OUTPUTS[key] = [(tuple(o.shape), o.dtype, k) for o, k in zip(outs, kinds)]
    device = _result_device(spec, tensors)
    return [
        _empty_planar(shape, dtype, device) if kind == "mc" else torch.empty(shape, dtype=dtype, device=device)
        for shape, dtype, kind in meta
    ]


# (spec, input shapes and dtypes) -> output shapes and dtypes, filled by the fake run.
_FAKE_OUTPUTS: dict[Any, list[tuple[tuple[int, ...], torch.dtype, str]]] = {}


def _stand_ins(spec: str, shapes: list[tuple[tuple[int, ...], torch.dtype]]) -> list[torch.Tensor]:
    mc_slots: set[int] = set()

    def collect(t: Any) -> None:
        if isinstance(t, dict):
            if "mc" in t:
                mc_slots.add(t["mc"])
            for v in t.values():
                collect(v)
        elif isinstance(t, list):
            for v in t:
                collect(v)

    collect(_parsed(spec))
    out = []
    for i, (shape, dtype) in enumerate(shapes):
        if i in mc_slots:
            x = torch.zeros(shape, dtype=dtype)
            x[..., 0] = 1.0  # the number 1 as a normalised expansion
        elif dtype.is_floating_point:
            x = torch.ones(shape, dtype=dtype)
        else:
            x = torch.zeros(shape, dtype=dtype)
        out.append(x)
    return out


def _result_device(spec: str, tensors: list[torch.Tensor]) -> torch.device:
    """Where the real run puts its results: a ``device=`` argument (``_to_copy`` and the
    factories), else the first operand's device (MC ops do not move data otherwise)."""
    dev = _parsed(spec)["kwargs"].get("device")
    if isinstance(dev, dict) and "dev" in dev:
        return torch.device(dev["dev"])
    return tensors[0].device


def call_opaque(func: torch._ops.OpOverload, args: tuple, kwargs: dict, mc_type: type[MCTensor]) -> Any:
    """Trace MC op ``func(*args, **kwargs)`` as one ``hypermc::mc_op`` call
    (``mc_type``: :class:`~hypermc.MCTensor`, passed in by its ``__torch_dispatch__``).

    In-place ops (arguments the schema marks as written) run on a copy inside the op;
    the result is copied back into the written argument's components in the traced
    graph, which functionalisation handles like any ``copy_``.

    Raises:
        MCCompileError: an argument cannot be encoded (symbolic sizes or scalars).

    Example:
        >>> x = hm.mc(torch.tensor([1 + 2**-30], dtype=torch.float64), nc=2)
        >>> y = call_opaque(torch.ops.aten.mul.Tensor, (x, x), {}, hm.MCTensor)  # outside tracing it runs too
        >>> y.components.tolist(), torch.equal(y.components, (x * x).components)  # bit for bit the eager op
        ([[1.0000000018626451, 8.673617379884035e-19]], True)
    """
    pos, names = _mutated_names(func)
    tensors: list[torch.Tensor] = []
    targs = [_encode(a, tensors, mc_type, i in pos, func) for i, a in enumerate(args)]
    tkwargs = {k: _encode(v, tensors, mc_type, k in names, func) for k, v in kwargs.items()}
    spec = json.dumps(
        {"op": str(func).replace("::", "."), "args": targs, "kwargs": tkwargs, "code": code_version()},
        sort_keys=True,
    )
    flat = torch.ops.hypermc.mc_op(spec, tensors)
    treespec, kinds = _OUT_STRUCTURE[spec]
    it = iter(flat)
    leaves = []
    for kind in kinds:
        if kind == "mc":
            leaves.append(mc_type(next(it)))
        elif kind == "t":
            leaves.append(next(it))
        else:
            leaves.append(kind[1])
    out = tree_unflatten(leaves, treespec)
    written = [args[i] for i in pos if i < len(args)] + [kwargs[n] for n in names if n in kwargs]
    if written:
        if len(written) != 1 or not isinstance(out, torch.Tensor):
            raise MCCompileError(f"MCTensor op {func} writes {len(written)} arguments; it cannot be compiled")
        target = written[0]
        if isinstance(target, mc_type):
            target._components.copy_(cast("MCTensor", out)._components)  # the op's MC output
            _note_write(target._components)
        else:
            target.copy_(out)
            _note_write(target)
        return target
    return out


# ----------------------------------------------------------------- fused expressions

#: Most MC ops in one ``hypermc::mc_fused`` node (its C++ grows with them: a few
#: seconds of compiler time per expression at this size).
MAX_FUSED_OPS = 12

# aten op -> the fusion rule of its MC implementation (filled by hypermc.mcf.ops)
_FUSION_RULES: dict[Any, Callable] = {}
_SEQ = itertools.count()


def fusable(*ops: Any) -> Callable:
    """Register the fusion rule of aten ops (as :func:`hypermc.mcf.tensor.implements`
    registers their implementation).

    ``rule(*args, **kwargs)`` is called while ``torch.compile`` traces, with the op's
    arguments (the first MC operand's components CPU float32/float64, ``nc`` 2 to 4). It
    returns what eager mode's implementation computes, as a tree: ``(kind, operand,
    operand)`` with ``kind`` ``"add"``, ``"mul"`` (the MC operand first) or ``"div"``,
    ``("neg", operand)`` or ``("sqrt", operand)``, whose leaves are MCTensors of the
    same dtype and ``nc``, ``("plain", tensor)`` (a plain tensor of the component dtype)
    or ``("const", values)`` (a Python number as eager mode converts it: one float, or
    ``nc`` components). Or None: the op is traced as one opaque op, as before.

    Example:
        >>> _FUSION_RULES[torch.ops.aten.mul.Tensor].__name__  # registered by hypermc.mcf.ops
        '_fuse_mul'
    """

    def register(rule: Callable) -> Callable:
        for op in ops:
            _FUSION_RULES[op] = rule
        return rule

    return register


@dataclasses.dataclass(eq=False)
class _Leaf:
    """An operand of a fused expression read from memory: MC components or a plain tensor."""

    tensor: torch.Tensor
    mc: bool


@dataclasses.dataclass(eq=False)
class _Step:
    """One kernel step of a fused expression (see :func:`~hypermc.mcf.native.source.fused_source`)."""

    seq: int
    kind: str
    operands: tuple  # _Step, _Leaf or a tuple of constant values


@dataclasses.dataclass(eq=False)
class _Node:
    """One MC op of a fused expression: the aten call eager mode makes (MC operands
    computed inside the expression replaced by their nodes, tensors by their leaves)
    and the step that computes its value."""

    seq: int
    func: Any
    args: tuple
    kwargs: dict
    result: _Step


@dataclasses.dataclass(eq=False)
class _Expr:
    """How a traced MC value was computed: its node, every node and leaf it depends on,
    and the state of the leaves and of the value's own components when it was recorded."""

    node: _Node
    nodes: tuple[_Node, ...]
    leaves: tuple[tuple[_Leaf, Any], ...]
    token: Any


# components of a traced MC value -> its fused expression (entries die with the trace)
_EXPRS: WeakIdKeyDictionary = WeakIdKeyDictionary()
# storage base of a traced tensor -> number of writes by MC in-place ops
_WRITES: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _base(t: torch.Tensor) -> torch.Tensor:
    return t._base if t._base is not None else t


def _token(t: torch.Tensor) -> Any:
    """The state of a traced tensor's memory: changes when it is written in place (the
    version counter; functionalisation's mutation counter, which counts writes through
    any view; the writes of :func:`call_opaque`)."""
    counter = torch._functionalize_mutation_counter(t.elem) if isinstance(t, FunctionalTensor) else None
    return (t._version, counter, _WRITES.get(_base(t), 0))


def _note_write(t: torch.Tensor) -> None:
    base = _base(t)
    _WRITES[base] = _WRITES.get(base, 0) + 1


def _valid_expr(components: torch.Tensor) -> _Expr | None:
    """The recorded expression of ``components`` if nothing it read (nor the value itself)
    was written since; else None (the value is read as a leaf)."""
    expr = _EXPRS.get(components)
    if expr is None or _token(components) != expr.token:
        return None
    if any(_token(leaf.tensor) != token for leaf, token in expr.leaves):
        return None
    return expr


def fusion_enabled() -> bool:
    """Whether MC ops are fused while ``torch.compile`` traces (:func:`fuse_op`): yes
    unless the environment variable ``HYPERMC_FUSE`` is ``0`` (then every MC op is one
    opaque op, the same bits more slowly; compiled graphs are cached per setting).

    Example:
        >>> import os
        >>> fusion_enabled() == (os.environ.get("HYPERMC_FUSE", "1") != "0")
        True
    """
    return os.environ.get("HYPERMC_FUSE", "1").strip().lower() not in ("0", "false", "no", "off")


def fuse_op(func: torch._ops.OpOverload, args: tuple, kwargs: dict, mc_type: type[MCTensor]) -> MCTensor | None:
    """Trace MC op ``func(*args, **kwargs)`` into a fused expression (one
    ``hypermc::mc_fused`` node), or None where it is not fused (no rule, not CPU
    float32/float64 ``nc`` 2 to 4 with fused kernels, an operand or step the fused kernels
    do not take, symbolic sizes): then the caller traces the opaque op.

    The node computes the op *and* the fused expressions of its MC operands that were
    traced the same way (up to :data:`MAX_FUSED_OPS` ops), reading their leaves; the
    operands' own nodes stay in the graph and are removed as dead code where nothing
    else uses them. An operand is read from memory instead where a leaf of its
    expression, or the operand itself, was written in place after it was traced.

    Example:
        >>> x = hm.mc(torch.tensor([1.5, 2.0]), nc=2)
        >>> f = torch.compile(lambda x: x * x + 1.0, backend="aot_eager", fullgraph=True, dynamic=False)  # one mc_fused node
        >>> torch.equal(f(x).components, (x * x + 1.0).components)
        True
    """
    rule = _FUSION_RULES.get(func)
    if rule is None or not fusion_enabled():
        return None
    ref = next(a for a in (*args, *kwargs.values()) if isinstance(a, mc_type))
    dtype, nc = ref.dtype, ref.nc
    sizes = [n for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) for n in a.shape]
    if not all(isinstance(n, int) for n in [nc, *sizes]):
        return None  # symbolic sizes: the opaque op refuses them with a clear error
    if ref._components.device.type != "cpu" or not native_fused.usable(dtype, nc):
        return None
    tree = rule(*args, **kwargs)
    if tree is None:
        return None
    # the fused expressions of the MC operands that can be read through
    inline: dict[int, _Expr] = {}
    for a in _mc_values(tree, mc_type):
        expr = _valid_expr(a._components)
        if expr is not None:
            inline[id(a._components)] = expr
    while inline and len({id(n) for e in inline.values() for n in e.nodes}) >= MAX_FUSED_OPS:
        del inline[max(inline, key=lambda k: len(inline[k].nodes))]
    leaves: dict[int, _Leaf] = {}
    for expr in inline.values():
        for leaf, _ in expr.leaves:
            leaves.setdefault(id(leaf.tensor), leaf)
    shapes: list[Any] = []

    def build(item: Any) -> tuple[Any, int] | None:
        if isinstance(item, mc_type):
            shapes.append(item.shape)
            expr = inline.get(id(item._components))
            if expr is not None:
                return expr.node.result, nc
            return leaves.setdefault(id(item._components), _Leaf(item._components, True)), nc
        tag = item[0]
        if tag == "plain":
            shapes.append(item[1].shape)
            return leaves.setdefault(id(item[1]), _Leaf(item[1], False)), 1
        if tag == "const":
            return tuple(item[1]), len(item[1])
        built = [build(o) for o in item[1:]]
        if any(b is None for b in built):
            return None
        terms = [cast(tuple, b)[1] for b in built]
        if not native_fused.supports(dtype, nc, tag, terms):
            return None
        return _Step(next(_SEQ), tag, tuple(cast(tuple, b)[0] for b in built)), terms[0] if tag == "neg" else nc

    built = build(tree)
    if built is None or not isinstance(built[0], _Step) or built[1] != nc:
        return None
    shape = tuple(torch.broadcast_shapes(*shapes))

    def template(value: Any) -> Any:
        if isinstance(value, mc_type):
            expr = inline.get(id(value._components))
            return expr.node if expr is not None else leaves.setdefault(id(value._components), _Leaf(value._components, True))
        if isinstance(value, torch.Tensor):
            return leaves.setdefault(id(value), _Leaf(value, False))
        if isinstance(value, (list, tuple)):
            return type(value)(template(v) for v in value)
        return value

    node = _Node(next(_SEQ), func, template(args), {k: template(v) for k, v in kwargs.items()}, built[0])
    nodes = tuple(sorted({id(n): n for e in inline.values() for n in e.nodes}.values(), key=lambda n: n.seq)) + (node,)
    tokens = {id(leaf.tensor): token for e in inline.values() for leaf, token in e.leaves}
    spec, tensors, used = _fused_spec(node, nodes, dtype, nc, shape, mc_type)
    (components,) = torch.ops.hypermc.mc_fused(spec, tensors)
    expr = _Expr(node, nodes, tuple((leaf, tokens.get(id(leaf.tensor)) or _token(leaf.tensor)) for leaf in used), _token(components))
    _EXPRS[components] = expr
    return mc_type(components)


def _mc_values(tree: Any, mc_type: type) -> list:
    if isinstance(tree, mc_type):
        return [tree]
    if isinstance(tree, tuple) and tree and tree[0] not in ("plain", "const"):
        return [a for item in tree[1:] for a in _mc_values(item, mc_type)]
    return []


def _fused_spec(
    node: _Node, nodes: tuple[_Node, ...], dtype: torch.dtype, nc: int, shape: tuple[int, ...], mc_type: type
) -> tuple[str, list[torch.Tensor], list[_Leaf]]:
    """The ``hypermc::mc_fused`` spec of ``node``'s expression (every node in ``nodes``),
    its tensors and the leaves they come from."""
    steps: dict[int, _Step] = {}

    def collect(s: Any) -> None:
        if isinstance(s, _Step) and id(s) not in steps:
            steps[id(s)] = s
            for o in s.operands:
                collect(o)

    collect(node.result)
    ordered = sorted(steps.values(), key=lambda s: s.seq)
    step_index = {id(s): i for i, s in enumerate(ordered)}
    leaf_index: dict[Any, int] = {}
    spec_leaves: list[list] = []
    tensors: list[torch.Tensor] = []
    used: list[_Leaf] = []

    def leaf_ref(o: Any) -> int:
        key = id(o) if isinstance(o, _Leaf) else ("c", o)
        if key not in leaf_index:
            leaf_index[key] = len(spec_leaves)
            if isinstance(o, _Leaf):
                spec_leaves.append(["mc" if o.mc else "t", len(tensors)])
                tensors.append(o.tensor)
                used.append(o)
            else:
                spec_leaves.append(["c", [float(v).hex() for v in o]])
        return leaf_index[key]

    spec_steps = [[s.kind, [["s", step_index[id(o)]] if isinstance(o, _Step) else ["l", leaf_ref(o)] for o in s.operands]] for s in ordered]
    node_index = {id(n): i for i, n in enumerate(nodes)}

    def encode(value: Any, func: Any) -> Any:
        if isinstance(value, _Node):
            return {"n": node_index[id(value)]}
        if isinstance(value, _Leaf):
            return {"mc" if value.mc else "t": spec_leaves[leaf_ref(value)][1], "w": False}
        if isinstance(value, (list, tuple)):
            return {"l" if isinstance(value, list) else "tu": [encode(v, func) for v in value]}
        return _encode(value, [], mc_type, False, func)

    spec_nodes = [
        {
            "op": str(n.func).replace("::", "."),
            "args": [encode(a, n.func) for a in n.args],
            "kwargs": {k: encode(v, n.func) for k, v in n.kwargs.items()},
            "step": step_index[id(n.result)],
        }
        for n in nodes
    ]
    spec = json.dumps(
        {
            "fused": {"dtype": str(dtype).removeprefix("torch."), "nc": nc, "shape": list(shape)},
            "leaves": spec_leaves,
            "steps": spec_steps,
            "nodes": spec_nodes,
            "code": code_version(),
        },
        sort_keys=True,
    )
    return spec, tensors, used


def _replay(d: dict, tensors: list[torch.Tensor], mc_type: type[MCTensor], dispatch_impl: Callable) -> torch.Tensor:
    """The components of a fused spec's value computed by eager mode: its aten ops, one by one."""
    results: list[torch.Tensor] = []

    def decode(t: Any) -> Any:
        if isinstance(t, dict) and "n" in t:
            return mc_type(results[t["n"]])
        if isinstance(t, dict) and ("l" in t or "tu" in t):
            items = [decode(v) for v in t["l" if "l" in t else "tu"]]
            return items if "l" in t else tuple(items)
        return _decode(t, tensors, mc_type)

    for n in d["nodes"]:
        out = dispatch_impl(_op_from_name(n["op"]), tuple(decode(a) for a in n["args"]), {k: decode(v) for k, v in n["kwargs"].items()})
        results.append(out._components)
    return results[-1]


def run_fused(spec: str, tensors: list[torch.Tensor], mc_type: type[MCTensor], dispatch_impl: Callable) -> list[torch.Tensor]:
    """The body of ``hypermc::mc_fused``: the fused expression of ``spec`` on ``tensors``
    (its leaves), as one list holding the planar components of its value.

    With a fused kernel (:func:`hypermc.mcf.native.fused.run`: CPU, two ops or more) the
    elements whose checks fail in any op are recomputed by eager mode's ops on those
    elements; without one, eager mode's ops run on all of them. Either way the bits are
    eager mode's.

    Example:
        >>> from hypermc.mcf.tensor import dispatch_impl
        >>> x = hm.mc(torch.tensor([1.5, 2.0], dtype=torch.float64), nc=3)
        >>> f = torch.compile(lambda x: x / (x * x + 1.0), backend="aot_eager", fullgraph=True, dynamic=False)
        >>> torch.equal(f(x).components, (x / (x * x + 1.0)).components)  # the compiled graph runs run_fused
        True
    """
    d = _parsed(spec)
    info = d["fused"]
    dtype, nc, shape = getattr(torch, info["dtype"]), info["nc"], tuple(info["shape"])
    device = tensors[0].device
    operands = []
    for kind, v in d["leaves"]:
        if kind == "c":
            operands.append(torch.tensor([float.fromhex(h) for h in v], dtype=dtype, device=device))
        else:
            operands.append(tensors[v] if kind == "mc" else tensors[v].unsqueeze(-1))

    def reference(ops: list[torch.Tensor], at: tuple[int, ...]) -> torch.Tensor:
        ts = list(tensors)
        for (kind, v), o in zip(d["leaves"], ops):
            if kind != "c":
                ts[v] = o if kind == "mc" else o[..., 0]
        return _replay(d, ts, mc_type, dispatch_impl).expand(*at, nc)

    res = None
    if len(d["nodes"]) > 1 and device.type == "cpu":
        steps = tuple((kind, tuple((w, j) for w, j in refs)) for kind, refs in d["steps"])
        constants = [kind == "c" for kind, _ in d["leaves"]]  # the replay reads them from the spec
        res = native_fused.run(dtype, nc, steps, operands, shape, reference, constants)
    if res is None:
        out = _replay(d, list(tensors), mc_type, dispatch_impl).expand(*shape, nc)
        if _storage_key(out) in [_storage_key(t) for t in tensors]:
            out = out.clone()  # a custom op's outputs must not alias its inputs
    else:
        out = res.patched(lambda *rows: reference(list(rows), (rows[0].shape[0],)), *operands)
    return [_planar(out)]


def _fused_fake(spec: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    info = _parsed(spec)["fused"]
    dtype, nc, shape = getattr(torch, info["dtype"]), info["nc"], tuple(info["shape"])
    return [_empty_planar((*shape, nc), dtype, tensors[0].device)]
