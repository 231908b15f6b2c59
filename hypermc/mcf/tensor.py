"""``MCTensor``: a torch.Tensor wrapper subclass holding multi-component floats.

An ``MCTensor`` of logical shape ``S`` and dtype ``d`` holds one inner tensor
``components`` of shape ``(*S, nc)`` and dtype ``d``; element ``i`` is the exact sum of
its ``nc`` components (leading first, non-overlapping, decreasing). Every aten op that
reaches ``__torch_dispatch__`` is looked up in one table, ``{aten op: implementation}``,
filled by :func:`implements` (the implementations live in :mod:`hypermc.mcf.ops`, which
``hypermc.mcf`` imports right after this module); an op that is not in the table raises
``NotImplementedError`` naming it. There is no fallback to the leading component.

This module holds the class, the table and its dispatch, and the constructors; the
numerics are the functional kernels (:mod:`~hypermc.mcf.arith`,
:mod:`~hypermc.mcf.exact`, ...) on component tensors, which never import this module.

Autograd runs *above* the dispatch: torch's own derivative formulas call aten ops on
MCTensors, so gradients are MCTensors computed in MC arithmetic. ``nn.Parameter(mc)``,
``state_dict``, ``torch.save``/``torch.load`` and ``torch.optim.SGD`` work because they
reduce to ops in the table.

Operands: MC ⊕ plain tensor uses the MC×float kernels when the plain tensor has the
component dtype (integer and bool tensors are converted exactly when they fit).
Python numbers are used as plain floats when exactly representable in the component
dtype and as ``nc``-component constants otherwise (so ``x * 0.1`` multiplies by the
double ``0.1`` to MC precision, not by its float32 rounding). A plain floating tensor of
another dtype, or an MCTensor of another component dtype, raises ``TypeError``.

In-place ops into a plain tensor: an in-place op whose target is a plain floating tensor
and whose operand is an MCTensor (``p.add_(mc)``, ``p.copy_(mc)``, ``p[i] = mc``, ...)
runs in MC arithmetic and rounds the exact result to the nearest value of the target's
dtype (ties to even, as :meth:`MCTensor.approx`); the target stays a plain tensor of its
dtype. This is what happens when a plain parameter's gradient comes out as an MCTensor
(it met an MC factor in the forward pass): torch's optimizers and hypermc's update it
with the rounded MC step. The target must have the MC operand's component dtype (else
``TypeError``, no implicit precision change); an integer target raises ``TypeError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any, NamedTuple, SupportsIndex, cast

import mpmath
import numpy as np
import torch

from .. import _checks
from . import arith, exact
from .compile import call_opaque, code_version, define_mc_op, fuse_op, fusion_enabled, is_opaque
from .eft import float_format, is_traced, max_nc, renormalize

__all__ = ["MCTensor", "mc", "from_mpmath", "implements", "register_manifold_pickling"]

_OPS: dict[Any, Callable] = {}


def implements(*ops: Any) -> Callable:
    """Register an implementation for aten ops (an overload or an overload packet).

    The implementation is called as ``impl(func, *args, **kwargs)`` with the exact
    overload that was dispatched.

    Example:
        >>> x = hm.mc([-2.0, 0.5], nc=2, dtype=torch.float64)
        >>> torch.signbit(x)  # not in the table: refused, not computed from the leading component
        Traceback (most recent call last):
        ...
        NotImplementedError: MCTensor does not support the aten op aten.signbit.default; ...
        >>> @implements(torch.ops.aten.signbit.default)
        ... def mc_signbit(func, x):
        ...     return torch.signbit(x.components[..., 0])  # exact: the value has its leading component's sign
        >>> torch.signbit(x)
        tensor([ True, False])
        >>> del _OPS[torch.ops.aten.signbit.default]  # leave the table as it was
    """

    def register(fn: Callable) -> Callable:
        for op in ops:
            _OPS[op] = fn
        return fn

    return register


# --------------------------------------------------------------------------- the class


class _OperandTypeError(TypeError):
    """A bad MCTensor operand (dtype mismatch); operators must report it, not swallow it."""


def _operator(call: Callable) -> Callable:
    """An operator method that lets :class:`_OperandTypeError` through.

    torch's ``Tensor`` operators turn every ``TypeError`` into ``NotImplemented``, so
    ``a + b`` would end in Python's bare "unsupported operand type(s)" instead of the
    message naming both dtypes. Other ``TypeError``s still give ``NotImplemented``.
    """

    def method(self: MCTensor, other: Any) -> Any:
        try:
            return call(self, other)
        except _OperandTypeError:
            raise
        except TypeError:
            return NotImplemented

    return method


def _rtruediv(a: MCTensor, b: Any) -> torch.Tensor:
    # torch computes ``number / tensor`` as ``tensor.reciprocal() * number``; keep that
    # (nc=1 equals plain torch), but a plain tensor numerator is one exact MC division.
    return torch.div(b, a) if isinstance(b, torch.Tensor) else a.reciprocal() * b


class MCTensor(torch.Tensor):
    """A tensor of multi-component floats (see the module docstring).

    Construct with :func:`hypermc.mc` (from values) or :meth:`from_components`.

    Attributes:
        components: inner tensor ``(*shape, nc)``, leading component first.
        nc: number of components.

    Example:
        >>> x = hm.MCTensor.from_components(torch.tensor([[1.0, 2.0**-60], [3.0, 0.0]], dtype=torch.float64))
        >>> x
        MCTensor([1.0000000000000000008673617379884, 3.0], nc=2, dtype=torch.float64)
        >>> x.shape, x.nc, x.dtype
        (torch.Size([2]), 2, torch.float64)
        >>> (x - 1).components.tolist()  # 1 + 2^-60 - 1 keeps the 2^-60 that float64 drops
        [[8.673617379884035e-19, 0.0], [2.0, 0.0]]
        >>> w = hm.mc([2.0], nc=2, dtype=torch.float64, requires_grad=True)
        >>> (w * w).sum().backward()
        >>> w.grad  # gradients are MCTensors
        MCTensor([4.0], nc=2, dtype=torch.float64)
    """

    _components: torch.Tensor
    __slots__ = ["_components"]

    @staticmethod
    def __new__(cls, components: torch.Tensor, *, requires_grad: bool = False) -> MCTensor:
        # the leading component's view, from the components' metadata (no view made)
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            components.shape[:-1],
            strides=components.stride()[:-1],
            storage_offset=components.storage_offset(),
            dtype=components.dtype,
            device=components.device,
            requires_grad=requires_grad,
        )
        out._components = components
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]  # stub signatures differ

    # Operators: the same ops as torch.Tensor's, but dtype errors are not swallowed.
    __add__ = _operator(torch.add)
    __radd__ = _operator(torch.add)
    __sub__ = _operator(torch.sub)
    __rsub__ = _operator(torch.rsub)
    __mul__ = _operator(torch.mul)
    __rmul__ = _operator(torch.mul)
    __truediv__ = _operator(torch.div)
    __rtruediv__ = _operator(_rtruediv)
    __matmul__ = _operator(torch.matmul)
    __rmatmul__ = _operator(lambda a, b: torch.matmul(b, a))
    __pow__ = _operator(torch.pow)
    __eq__ = _operator(torch.eq)
    __ne__ = _operator(torch.ne)
    __lt__ = _operator(torch.lt)
    __le__ = _operator(torch.le)
    __gt__ = _operator(torch.gt)
    __ge__ = _operator(torch.ge)
    __hash__ = torch.Tensor.__hash__  # defining __eq__ would otherwise remove it

    # ---------------------------------------------------------------- construction

    @classmethod
    def from_components(cls, components: torch.Tensor, *, requires_grad: bool = False) -> MCTensor:
        """Build an MCTensor from a components tensor ``(*shape, nc)``; renormalises.

        Args:
            components: floating tensor whose last dimension holds the components, in
                any order and with any overlap; the represented value is their exact
                sum, rounded to ``nc`` components.
            requires_grad: make the result a leaf that requires grad.

        Raises:
            TypeError: ``components`` is not a float16/bfloat16/float32/float64 tensor.
            ValueError: ``components`` has no trailing component dimension.

        Example:
            >>> y = MCTensor.from_components(torch.tensor([[2.0**-60, 1.0]], dtype=torch.float64))
            >>> y.components.tolist()  # reordered: the leading component first
            [[1.0, 8.673617379884035e-19]]
        """
        if not isinstance(components, torch.Tensor) or isinstance(components, MCTensor):
            raise TypeError(f"components must be a plain torch.Tensor of shape (*shape, nc); got {type(components).__name__}")
        float_format(components.dtype)
        if components.dim() == 0 or components.shape[-1] < 1:
            raise ValueError(f"components must have a trailing component dimension of size nc >= 1; got shape {tuple(components.shape)}")
        nc = components.shape[-1]
        c = renormalize(components.detach(), nc)
        return cls(c, requires_grad=requires_grad)

    # ------------------------------------------------------------------- accessors

    @property
    def components(self) -> torch.Tensor:
        """Inner tensor ``(*shape, nc)``, leading component first (a view, not a copy).

        Example:
            >>> x = hm.mc(torch.tensor([1.0, 2.0], dtype=torch.float64), nc=2) + 2.0**-60
            >>> x.components.shape, x.components[0].tolist()
            (torch.Size([2, 2]), [1.0, 8.673617379884035e-19])
        """
        return self._components

    @property
    def nc(self) -> int:
        """Number of components.

        Example:
            >>> hm.mc(torch.zeros(3), nc=4).nc
            4
        """
        return self._components.shape[-1]

    def approx(self) -> torch.Tensor:
        """The nearest plain tensor of the component dtype (ties to even).

        ``c0 + c1`` rounded once, except where it is exactly halfway between two floats:
        there the sign of the rest of the tail decides (``fl(c0 + c1)`` alone would round
        ``1 + 2**-53 + 2**-110`` down to 1).

        Example:
            >>> x = MCTensor.from_components(torch.tensor([1.0, 2.0**-53, 2.0**-110], dtype=torch.float64))
            >>> x.approx().item() == 1 + 2.0**-52  # the tail above the halfway point rounds up
            True
        """
        return arith.nearest_float(self._components.detach())

    def to_mpmath(self) -> np.ndarray:
        """Exact values as a numpy object array of ``mpmath.mpf`` (same shape).

        Example:
            >>> import mpmath
            >>> x = hm.mc(torch.tensor([1.0, 2.0], dtype=torch.float64), nc=2) + 2.0**-60
            >>> [mpmath.nstr(v, 25) for v in x.to_mpmath()]
            ['1.000000000000000000867362', '2.000000000000000000867362']
        """
        return exact.to_mpmath(self._components)

    # -------------------------------------------------------- flatten / serialise

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["_components"], None

    @staticmethod
    def __tensor_unflatten__(
        inner_tensors: dict[str, torch.Tensor], ctx: None, outer_size: Sequence[int], outer_stride: Sequence[int]
    ) -> MCTensor:
        return MCTensor(inner_tensors["_components"])

    def _stable_hash_for_caching(self) -> str:
        """Key of this tensor in torch's compiled-graph caches: the components' metadata,
        the hypermc kernels' code version (a cached graph holds the output layouts and op
        specs of the kernels that traced it) and whether MC ops are fused
        (``HYPERMC_FUSE``)."""
        c = self._components
        meta = f"{tuple(c.shape)}, {tuple(c.stride())}, {c.dtype}, {c.device.type}, {self.requires_grad}"
        return f"MCTensor({meta}, hypermc {code_version()}, fuse {int(fusion_enabled())})"

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Callable[..., MCTensor], tuple[Any, ...]]:
        # a ManifoldParameter holding an MCTensor is the MCTensor itself with a
        # ``manifold`` attribute: store the manifold as plain (class name, curvature)
        # so that pickle and torch.load(weights_only=True) give the parameter back
        manifold = getattr(self, "manifold", None)
        if manifold is not None:
            state = _manifold_pickling[0].state(manifold)
            return (_rebuild_mctensor, (self._components.detach(), self.requires_grad, state))
        return (_rebuild_mctensor, (self._components.detach(), self.requires_grad))

    def __repr__(self, *, tensor_contents: object = None) -> str:  # type: ignore[override]  # torch's stub has a keyword-only catch-all
        return _format(self)

    def tolist(self) -> Any:
        """Python floats of :meth:`approx` (nested lists); use :meth:`to_mpmath` for exact values.

        Example:
            >>> (hm.mc(torch.tensor([[1.0], [2.0]], dtype=torch.float64), nc=2) + 2.0**-60).tolist()
            [[1.0], [2.0]]
        """
        return self.approx().tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """Refused: a numpy float array cannot hold the value; use ``approx().numpy()``.

        Example:
            >>> hm.mc(torch.ones(2), nc=2).numpy()
            Traceback (most recent call last):
            ...
            TypeError: MCTensor.numpy() would drop all but the leading precision; call x.approx().numpy() ...
        """
        raise TypeError(
            "MCTensor.numpy() would drop all but the leading precision; call "
            "x.approx().numpy() for floats or x.to_mpmath() for exact values"
        )

    # ------------------------------------------------------------------- dispatch

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]  # torch's stub is a plain function (func is bound as self)
        cls, func: torch._ops.OpOverload, types: tuple[type, ...], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if args and _writes_plain_target(func, args[0]):
            return _into_plain(func, args, kwargs)
        if _traced_operands(args) and is_opaque(func):
            fused = fuse_op(func, args, kwargs, MCTensor)  # elementwise ops: one fused node
            return call_opaque(func, args, kwargs, MCTensor) if fused is None else fused  # else one opaque op
        return dispatch_impl(func, args, kwargs)


def dispatch_impl(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
    """Run the table's implementation of aten op ``func`` (what eager dispatch does)."""
    impl = _OPS.get(func) or _OPS.get(func.overloadpacket)
    if impl is None:
        raise NotImplementedError(
            f"MCTensor does not support the aten op {func}; open an issue if you need "
            "it (no silent fallback to the leading component is done)"
        )
    return impl(func, *args, **kwargs)


def _writes_plain_target(func: torch._ops.OpOverload, target: Any) -> bool:
    """Whether ``func`` writes in place into a plain tensor (an MC operand came along)."""
    if not isinstance(target, torch.Tensor) or isinstance(target, MCTensor):
        return False
    arguments = func._schema.arguments
    alias = arguments[0].alias_info if arguments else None
    return alias is not None and alias.is_write


def _into_plain(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> torch.Tensor:
    """An in-place op on a plain tensor with an MC operand: the plain tensor keeps its type.

    The op runs in MC arithmetic on a one-component view of the target and the exact
    result is rounded to the nearest value of the target's dtype (as ``approx`` does),
    written in place: ``p.add_(mc_grad, alpha=-lr)`` on a plain parameter is the
    rounded MC update. The target's dtype must be the MC operands' component dtype.
    """
    target = args[0]
    if not target.is_floating_point():
        raise TypeError(
            f"{func}: cannot write an MCTensor result in place into a plain tensor of dtype "
            f"{target.dtype}; the target must be a floating tensor of the MC operands' component dtype"
        )
    for a in [*args[1:], *kwargs.values()]:
        if isinstance(a, MCTensor) and a.dtype != target.dtype:
            raise TypeError(
                f"{func}: cannot write an MCTensor result of component dtype {a.dtype} in place "
                f"into a plain tensor of dtype {target.dtype} (no implicit precision change); "
                "convert one of them explicitly with .to(dtype)"
            )
    view = MCTensor(target.detach().unsqueeze(-1))  # nc = 1, shares the target's storage
    dispatch_impl(func, (view, *args[1:]), kwargs)
    return target


def _traced_operands(args: tuple) -> bool:
    """Whether the first MC operand's components are symbolic (``torch.compile`` traces).

    One type check in eager mode, where the components are plain tensors."""
    for a in args:
        if isinstance(a, (list, tuple)) and a:
            a = a[0]
        if isinstance(a, MCTensor):
            c = a._components
            return type(c) is not torch.Tensor and is_traced(c)
    return False


class _ManifoldPickling(NamedTuple):
    state: Callable  # manifold -> plain state (strings and floats)
    rebuild: Callable  # (MCTensor, state, requires_grad) -> ManifoldParameter


# How an MCTensor that is a ManifoldParameter (the MCTensor itself with a ``manifold``
# attribute) pickles its manifold; filled by hypermc.manifolds.parameter, which sits
# above this module (importing hypermc imports it).
_manifold_pickling: list[_ManifoldPickling] = []


def register_manifold_pickling(state: Callable, rebuild: Callable) -> None:
    """Set how an MCTensor with a ``manifold`` attribute pickles it: ``state(manifold)``
    gives the plain state stored with the components, ``rebuild(tensor, state,
    requires_grad)`` the parameter loaded back. Called once, by
    :mod:`hypermc.manifolds.parameter`.

    Example:
        >>> import io
        >>> from hypermc.manifolds import PoincareHalfspace
        >>> p = hm.ManifoldParameter(hm.mc([[0.0, 1.0]], nc=2, dtype=torch.float64), manifold=PoincareHalfspace())
        >>> buf = io.BytesIO()
        >>> torch.save(p, buf)  # the manifold is stored as (class name, curvature)
        >>> _ = buf.seek(0)
        >>> q = torch.load(buf, weights_only=True)
        >>> q.manifold, torch.equal(q.components, p.components)
        (PoincareHalfspace(curvature=-1), True)
    """
    _manifold_pickling[:] = [_ManifoldPickling(state, rebuild)]


def _rebuild_mctensor(components: torch.Tensor, requires_grad: bool, manifold_state: tuple[str, float] | None = None) -> MCTensor:
    t = MCTensor(components, requires_grad=requires_grad)
    if manifold_state is None:
        return t
    return _manifold_pickling[0].rebuild(t, manifold_state, requires_grad)


# torch.load(weights_only=True) accepts MCTensors: the rebuild function only wraps a
# plain tensor the safe unpickler has already loaded.
torch.serialization.add_safe_globals([_rebuild_mctensor])

# The opaque op that torch.compile puts in its graphs for MC ops (hypermc.mcf.compile).
define_mc_op(MCTensor, dispatch_impl)


# -------------------------------------------------------------------- constructors


def mc(
    data: Any, nc: int = 2, dtype: torch.dtype | None = None, *, device: torch.device | str | None = None, requires_grad: bool = False
) -> MCTensor:
    """Create an MCTensor from a Tensor, number, nested list, numpy array or MCTensor.

    Exact whenever the input fits in ``nc`` components of ``dtype`` (a float64 tensor
    into 3-component float32 is exact); otherwise the nearest ``nc``-component value is
    taken component by component. Strings, ``fractions.Fraction`` and ``mpmath.mpf``
    values go through :func:`from_mpmath`.

    Args:
        data: the values.
        nc: number of components (>= 1).
        dtype: component dtype; default: the float dtype of ``data`` if it has one, else
            ``torch.get_default_dtype()``.
        device: target device (default: that of ``data``, else CPU).
        requires_grad: make the result a leaf that requires grad.

    Raises:
        ValueError: ``nc < 1``, or ``nc`` above :func:`~hypermc.mcf.eft.max_nc` of
            ``dtype`` (float16 4, bfloat16 33, float32 12, float64 40: further
            components could only be zero).
        TypeError: ``nc`` not an int, or ``dtype`` not a supported float dtype.

    Example:
        >>> x = hm.mc(1.0, nc=3, dtype=torch.float64) + 1e-40
        >>> (x - 1.0).approx()
        tensor(1.0000e-40, dtype=torch.float64)
    """
    nc = _checks.check_nc("mc", nc)
    if isinstance(data, MCTensor):
        dtype = dtype or data.dtype
        _check_nc_fits("mc", nc, dtype)
        # pad before a dtype change, so that narrowing rounds to nc components, not to
        # data.nc; copy=True: the result never aliases data (as for plain tensor input)
        # (the casts: torch's stubs type these methods as returning Tensor; on an MCTensor
        # they return MCTensors)
        src = cast(MCTensor, data.detach())
        src = MCTensor(arith.pad(src._components, nc)) if src.nc < nc else src
        out = cast(MCTensor, src.to(device=device or data.device, dtype=dtype, copy=True))
        if out.nc > nc:
            out = MCTensor(renormalize(out._components, nc))
        return cast(MCTensor, out.requires_grad_(requires_grad))
    if _big_ints(data, nc, dtype or torch.get_default_dtype()):
        exact = _exact_ints(data, nc, dtype or torch.get_default_dtype(), device)
        return cast(MCTensor, exact.requires_grad_(requires_grad))
    if _is_exotic(data):
        exotic = from_mpmath(data, nc=nc, dtype=dtype or torch.get_default_dtype(), device=device)
        return cast(MCTensor, exotic.requires_grad_(requires_grad))
    if isinstance(data, torch.Tensor):
        t = data
    else:
        t = torch.as_tensor(np.asarray(data, dtype=np.float64) if not isinstance(data, np.ndarray) else data)
    if dtype is None:
        dtype = t.dtype if t.is_floating_point() and not isinstance(data, (list, tuple, float, int)) else torch.get_default_dtype()
    _check_nc_fits("mc", nc, dtype)
    if device is not None:
        t = t.to(device)
    return MCTensor(arith.from_value(t, dtype, nc), requires_grad=requires_grad)


def _check_nc_fits(where: str, nc: int, dtype: torch.dtype) -> None:
    """Refuse an ``nc`` whose extra components ``dtype``'s exponent range cannot hold."""
    most = max_nc(dtype)  # also refuses a dtype that is not a component dtype
    if nc > most:
        raise ValueError(
            f"{where}: nc={nc} is more components than {dtype} can hold (at most {most}: each "
            "component lies at least p bits below the previous one, and the exponent range "
            "ends at the smallest subnormal; the rest could only be zero); use a wider dtype "
            "for more precision"
        )


def _leaves(data: Any) -> Iterator[Any]:
    """Scalars of a (nested) list/tuple, or ``data`` itself."""
    if isinstance(data, (list, tuple)):
        for d in data:
            yield from _leaves(d)
    else:
        yield data


def _check_mc_input(data: Any) -> None:
    """Refuse ``None`` and complex values (they would become NaN / lose the imaginary part)."""
    if isinstance(data, torch.Tensor) and not isinstance(data, MCTensor) and data.is_complex():
        raise TypeError(f"mc: data must be real; got a complex tensor of dtype {data.dtype}")
    if isinstance(data, np.ndarray) and np.iscomplexobj(data):
        raise TypeError(f"mc: data must be real; got a complex numpy array of dtype {data.dtype}")
    if isinstance(data, (list, tuple)) or data is None or isinstance(data, (complex, np.complexfloating)):
        for v in _leaves(data):
            if v is None:
                raise TypeError("mc: data must be numbers; got None (expected a float, int, Tensor or nested list)")
            if isinstance(v, (complex, np.complexfloating)):
                raise TypeError(f"mc: data must be real; got the complex value {v!r}")


def _big_ints(data: Any, nc: int, dtype: torch.dtype) -> bool:
    """Whether ``data`` holds Python ints a float of ``dtype`` cannot hold exactly."""
    _check_mc_input(data)
    if isinstance(data, (list, tuple, int)) and not isinstance(data, bool):
        limit = 2 ** float_format(dtype).p
        return any(isinstance(v, int) and not isinstance(v, bool) and abs(v) > limit for v in _leaves(data))
    return False


def _exact_ints(data: Any, nc: int, dtype: torch.dtype, device: torch.device | str | None) -> MCTensor:
    """Python ints split exactly into ``nc`` components, or a ValueError naming the value."""
    out = from_mpmath(data, nc=nc, dtype=dtype, device=device)
    comps = out._components.reshape(-1, nc).cpu().tolist()
    for v, cs in zip(_leaves(data), comps):
        exact = all(math.isfinite(c) for c in cs) and sum(Fraction(c) for c in cs) == v
        if not exact:
            raise ValueError(
                f"mc: the int {v} does not fit exactly in nc={nc} components of {dtype}; "
                f"use a larger nc (or pass float({v}) to round on purpose)"
            )
    return out


def _is_exotic(data: Any) -> bool:
    if isinstance(data, (str, Fraction, mpmath.mpf)):
        return True
    if isinstance(data, (list, tuple)) and data:
        return _is_exotic(data[0])
    if isinstance(data, np.ndarray) and data.dtype == object and data.size:
        return _is_exotic(data.flat[0])
    return False


def from_mpmath(values: Any, nc: int = 2, dtype: torch.dtype = torch.float64, *, device: torch.device | str | None = None) -> MCTensor:
    """Nearest MCTensor of high-precision values (mpmath.mpf, str, Fraction, floats).

    Each component is the value's remainder rounded to nearest in ``dtype``, computed
    exactly in mpmath (:func:`hypermc.mcf.exact.from_mpmath`); so the result is the
    nearest ``nc``-component expansion (up to ties), the form the accuracy tests compare
    against.

    Args:
        values: a scalar or (nested) sequence / numpy object array of such values.
        nc: number of components.
        dtype: component dtype.

    Example:
        >>> from fractions import Fraction
        >>> x = from_mpmath(Fraction(1, 3), nc=2)
        >>> x
        MCTensor(0.333333333333333333333333333333332, nc=2, dtype=torch.float64)
        >>> x.components.tolist()  # 1/3 to about 106 bits
        [0.3333333333333333, 1.850371707708594e-17]
        >>> from_mpmath(["0.1", "1e-400"], nc=2).components.tolist()  # 1e-400 underflows to 0
        [[0.1, -5.551115123125783e-18], [0.0, 0.0]]
    """
    nc = _checks.check_nc("from_mpmath", nc)
    _check_nc_fits("from_mpmath", nc, dtype)
    return MCTensor(exact.from_mpmath(values, nc, dtype, device))


# ------------------------------------------------------------------------ formatting


def _format(x: MCTensor) -> str:
    if type(x._components) is not torch.Tensor:  # fake/functional while tracing: no values
        return f"MCTensor(shape={tuple(x.shape)}, nc={x.nc}, dtype={x.dtype}, traced)"
    digits = max(1, math.ceil(x.nc * float_format(x.dtype).p * math.log10(2)) + 1)
    if x.numel() > 64:
        body = f"approx={x.approx()!r}"
    else:
        vals = x.to_mpmath()
        strs = np.vectorize(lambda v: mpmath.nstr(v, digits), otypes=[object])(vals) if vals.size else vals
        body = np.array2string(strs, separator=", ", formatter={"all": str}) if vals.ndim else str(strs.item())
    grad = ", requires_grad=True" if x.requires_grad else ""
    dev = f", device='{x.device}'" if x.device.type != "cpu" else ""
    return f"MCTensor({body}, nc={x.nc}, dtype={x.dtype}{dev}{grad})"
