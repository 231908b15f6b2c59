"""``torch.compile`` support for MC arithmetic: every MC kernel runs as an opaque op.

Mechanism (issue 16). An :class:`~hypermc.MCTensor` is a traceable wrapper subclass
(``__tensor_flatten__``/``__tensor_unflatten__``), so Dynamo puts MC ops in the graph
and AOTAutograd traces ``MCTensor.__torch_dispatch__`` on the symbolic components.
While it traces, every MC op that computes (everything except views and ops that return
Python values) is not traced into aten ops: it becomes **one call of the custom op**
``hypermc::mc_op(spec, tensors)`` (:func:`torch.library.custom_op`), where ``spec`` is a
JSON description of the aten op and its non-tensor arguments and ``tensors`` are the
components of the MC operands and the plain tensor operands. At run time the compiled
graph calls that op, which rebuilds the MCTensors and runs **the eager implementation**
(:func:`run_spec`); the registered fake implementation runs the same implementation on
the symbolic tensors to give the output shapes. Views (``view``, ``transpose``,
``select``, ...) move no data and are traced as before, so aliasing is kept.

Why this design and not an Inductor configuration: measured on this project's 2-core
CPU (torch 2.13), tracing the kernels into Inductor

* took more than 600 s to compile a single float64 ``nc = 3`` addition (the checked
  fixed network plus its general fallback is several hundred pointwise ops, which
  Inductor's CPU scheduler fuses and re-simplifies node by node), while ``nc = 2``
  compiled in 12-14 s;
* gave no guarantee: an error-free transformation is exact only if the backend neither
  contracts ``a * b + c`` into an FMA nor reassociates, and nothing in Inductor promises
  that for every backend, dtype (16-bit intermediates are kept in float32 unless
  ``emulate_precision_casts`` is set) and version. An earlier measurement found
  1e31 u^3 errors for float64 ``nc = 3`` ``x * y + x`` on the CPU.

An opaque op is exact by construction: compiled MC code computes **bit for bit what eager
mode computes**, on every device and component dtype (float16 and bfloat16 included),
with no graph break in the core ops, the manifolds or backward. The data-dependent fast
paths of the kernels (``all_finite`` checks) run inside the op on real data. The price:
MC kernels are not fused with each other or with the surrounding native ops, so a
compiled MC op costs what the eager op costs (plus one custom-op call); the native ops
around it are compiled as usual.

What is refused, loudly, with :class:`MCCompileError` naming the op: MC ops whose
arguments cannot be described without the data, i.e. symbolic sizes or scalars
(``dynamic=True`` shapes reaching the non-tensor arguments of an MC op); compile with
``dynamic=False``.

No global Inductor or Dynamo configuration is changed by hypermc.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._pytree import tree_flatten, tree_unflatten

from .eft import is_traced

if TYPE_CHECKING:
    from .tensor import MCTensor

__all__ = ["MCCompileError", "is_opaque", "call_opaque", "define_mc_op", "run_spec", "code_version"]


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
    for path in sorted(Path(__file__).parent.glob("*.py")):
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
        else:
            target.copy_(out)
        return target
    return out
