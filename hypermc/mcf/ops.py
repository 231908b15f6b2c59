"""The aten op table of :class:`~hypermc.MCTensor`: one implementation per op.

Each implementation unpacks the MC operands' components, calls the functional kernels
(:mod:`~hypermc.mcf.arith`, :mod:`~hypermc.mcf.elementary`, :mod:`~hypermc.mcf.reduce`,
:mod:`~hypermc.mcf.matmul`) and wraps the result; views map the components tensor.
Registered with :func:`hypermc.mcf.tensor.implements` when this module is imported,
which ``hypermc.mcf`` does right after :mod:`hypermc.mcf.tensor` (so the table is full
whenever ``MCTensor`` can be reached). The operand rules are in the docstring of
:mod:`hypermc.mcf.tensor`.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any, SupportsFloat, cast

import torch
from torch.utils._python_dispatch import _disable_current_modes, return_and_correct_aliasing

from . import arith, elementary, matmul, reduce
from .compile import fusable
from .eft import float_format, pack, planes, renormalize, select, take, unpack
from .tensor import MCTensor, _OperandTypeError, implements

__all__: list[str] = []

aten = torch.ops.aten


# ---------------------------------------------------------------------- operands


def _wrap(c: torch.Tensor) -> MCTensor:
    return MCTensor(c)


class _Plain:
    """A plain operand already in the component dtype (use the MC×float kernels)."""

    __slots__ = ["t"]

    def __init__(self, t: torch.Tensor):
        self.t = t


# Appended to the dtype-mismatch errors: the usual plain tensor of another dtype is a
# torch.nn module's float32 weight meeting float64 MC features.
_MODULE_HINT = " (a torch.nn module's parameters: module.to(dtype), e.g. model.double() for float64 MC inputs)"


def _operand(a: Any, dtype: torch.dtype, nc: int, device) -> torch.Tensor | _Plain:
    """Normalise an operand: component tensor for MC values, ``_Plain`` for floats."""
    if isinstance(a, MCTensor):
        if a.dtype != dtype:
            raise _OperandTypeError(
                f"MCTensor operands must share their component dtype; got {dtype} and {a.dtype}. Convert one explicitly with .to(dtype)"
            )
        return a._components
    if isinstance(a, numbers.Number):
        value = float(cast(SupportsFloat, a))  # numbers.Number declares no __float__; a complex raises TypeError
        if dtype == torch.float64:  # every Python float is a float64: no test to make
            return _Plain(torch.tensor(value, dtype=dtype, device=device))
        t = torch.tensor(value, dtype=torch.float64)  # on the host: the test reads it
        fitted = t.to(dtype)
        if fitted.to(torch.float64) == t or not math.isfinite(value):
            return _Plain(fitted.to(device))
        return arith.from_engine(t, dtype, nc).to(device)
    if isinstance(a, torch.Tensor):
        if a.is_floating_point():
            if a.dtype != dtype:
                raise _OperandTypeError(
                    f"cannot combine an MCTensor of component dtype {dtype} with a plain "
                    f"tensor of dtype {a.dtype} (no implicit precision change); convert "
                    f"the plain tensor with .to(dtype) or build an MCTensor of it{_MODULE_HINT}"
                )
            return _Plain(a)
        return _Plain(a.to(dtype))
    raise TypeError(f"unsupported operand type {type(a).__name__} for an MCTensor op")


def _first_mc(*args) -> MCTensor:
    for a in args:
        if isinstance(a, MCTensor):
            return a
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, MCTensor):
                    return b
    raise TypeError("no MCTensor among the operands")


def _nc_of(*args) -> int:
    return max(a.nc for a in args if isinstance(a, MCTensor))


def _binary(kernel_mc, kernel_float, kernel_rfloat=None, *, plain=None):
    """Build a binary op from MC×MC and MC×float kernels (operands in any order).

    ``plain`` is the torch operator: with ``nc == 1`` and a Python number operand it is
    applied to the components directly, so the number is rounded the way torch rounds
    it (e.g. float16 ``x * 0.1`` in float32 opmath) and nc=1 equals plain torch bitwise.
    """

    def op(a, b):
        ref = _first_mc(a, b)
        nc = _nc_of(a, b)
        if nc == 1 and plain is not None and isinstance(a if a is not ref else b, numbers.Number):
            return plain(a._components if a is ref else a, b._components if b is ref else b)
        x = _operand(a, ref.dtype, nc, ref.device)
        y = _operand(b, ref.dtype, nc, ref.device)
        if isinstance(x, _Plain) and isinstance(y, _Plain):
            raise AssertionError("unreachable: one operand is an MCTensor")
        if isinstance(y, _Plain):
            return kernel_float(x, y.t)
        if isinstance(x, _Plain):
            if kernel_rfloat is None:
                return kernel_float(y, x.t)
            return kernel_rfloat(x.t, y)
        return kernel_mc(x, y)

    return op


_add = _binary(arith.add, arith.add_float, plain=operator.add)
_mul = _binary(arith.mul, arith.mul_float, plain=operator.mul)
_div = _binary(arith.div, arith.div_float, arith.rdiv_float, plain=operator.truediv)


def _sub(a, b):
    return _add(a, _negate(b))


def _negate(b):
    if isinstance(b, MCTensor):
        return MCTensor(-b._components)
    return -b


def _scaled(b, alpha):
    """``alpha * b`` for the ``alpha=`` keyword of add/sub (exact when alpha == 1)."""
    if alpha == 1:
        return b
    if isinstance(b, MCTensor):
        return _wrap(_mul(b, alpha))
    if isinstance(b, numbers.Number):
        return b * alpha
    return b * alpha


# ------------------------------------------------------------------- fusion rules
#
# What eager mode computes for the elementwise ops, as hypermc.mcf.compile.fuse_op reads
# it while torch.compile traces (see hypermc.mcf.compile.fusable): the same operand
# conversions (_operand, _negate) and the same kernel choice and operand order as
# _binary, so a fused node runs the kernels these implementations run.


def _fusion_operand(a: Any, ref: MCTensor, nc: int) -> Any:
    """Operand ``a`` as :func:`_operand` converts it, for a fusion rule; None where the
    op is not fused (another dtype, device or ``nc``: the op's own path decides)."""
    if isinstance(a, tuple) and a[0] == "neg":
        inner = _fusion_operand(a[1], ref, nc)
        return None if inner is None else ("neg", inner)
    if isinstance(a, MCTensor):
        return a if a.dtype == ref.dtype and a.nc == nc else None
    if isinstance(a, torch.Tensor):
        return ("plain", a) if a.dtype == ref.dtype and a.device == ref.device else None
    if isinstance(a, numbers.Real):
        with _disable_current_modes():  # a constant: converted now, on the host, as eager mode does
            x = _operand(a, ref.dtype, nc, torch.device("cpu"))
            values = (x.t if isinstance(x, _Plain) else x).reshape(-1).tolist()
        return ("const", tuple(values))
    return None


def _is_plain(o: Any) -> bool:
    if isinstance(o, MCTensor):
        return False
    if o[0] == "neg":
        return _is_plain(o[1])
    return o[0] == "plain" or len(o[1]) == 1


def _fuse_binary(kind: str, a: Any, b: Any, ref: MCTensor, nc: int, *, commutative: bool) -> Any:
    """:func:`_binary`'s dispatch as a fusion tree: ``kernel_float(x, b)`` for a plain
    second operand, the operands swapped (``commutative``) or ``kernel_rfloat`` for a
    plain first one, ``kernel_mc`` otherwise."""
    x, y = _fusion_operand(a, ref, nc), _fusion_operand(b, ref, nc)
    if x is None or y is None:
        return None
    if _is_plain(x) and commutative:
        return (kind, y, x)
    return (kind, x, y)


def _negated(b: Any) -> Any:
    """:func:`_negate` for a fusion rule (numbers negated now, tensors by a step)."""
    return -b if isinstance(b, numbers.Real) else ("neg", b)


@fusable(aten.add.Tensor, aten.add.Scalar)
def _fuse_add(a, b, *, alpha=1):
    return _fuse_binary("add", a, b, _first_mc(a, b), _nc_of(a, b), commutative=True) if alpha == 1 else None


@fusable(aten.sub.Tensor, aten.sub.Scalar)
def _fuse_sub(a, b, *, alpha=1):
    return _fuse_binary("add", a, _negated(b), _first_mc(a, b), _nc_of(a, b), commutative=True) if alpha == 1 else None


@fusable(aten.rsub.Tensor, aten.rsub.Scalar)
def _fuse_rsub(a, b, *, alpha=1):
    return _fuse_binary("add", b, _negated(a), _first_mc(a, b), _nc_of(a, b), commutative=True) if alpha == 1 else None


@fusable(aten.mul.Tensor, aten.mul.Scalar)
def _fuse_mul(a, b):
    return _fuse_binary("mul", a, b, _first_mc(a, b), _nc_of(a, b), commutative=True)


@fusable(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _fuse_div(a, b, *, rounding_mode=None):
    return _fuse_binary("div", a, b, _first_mc(a, b), _nc_of(a, b), commutative=False) if rounding_mode is None else None


@fusable(aten.neg.default)
def _fuse_neg(a):
    return ("neg", a)


@fusable(aten.sqrt.default)
def _fuse_sqrt(a):
    return ("sqrt", a)  # arith.sqrt (native_fused.supports: not float32 nc = 2)


@fusable(aten.square.default)
def _fuse_square(a):
    return ("mul", a, a)  # arith.square is mul(x, x)


@fusable(aten.reciprocal.default)
def _fuse_reciprocal(a):
    return ("div", ("const", (1.0,)), a)  # arith.reciprocal: rdiv_float(ones, x)


# --------------------------------------------------------------- arithmetic ops


@implements(aten.add.Tensor, aten.add.Scalar)
def _op_add(func, a, b, *, alpha=1):
    return _wrap(_add(a, _scaled(b, alpha)))


@implements(aten.sub.Tensor, aten.sub.Scalar)
def _op_sub(func, a, b, *, alpha=1):
    return _wrap(_sub(a, _scaled(b, alpha)))


@implements(aten.rsub.Tensor, aten.rsub.Scalar)
def _op_rsub(func, a, b, *, alpha=1):
    return _wrap(_sub(b, _scaled(a, alpha)))


@implements(aten.mul.Tensor, aten.mul.Scalar)
def _op_mul(func, a, b):
    return _wrap(_mul(a, b))


@implements(aten.div.Tensor, aten.div.Scalar)
def _op_div(func, a, b):
    return _wrap(_div(a, b))


@implements(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _op_div_mode(func, a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        raise NotImplementedError(f"MCTensor does not support {func} with rounding_mode={rounding_mode!r}")
    return _wrap(_div(a, b))


@implements(aten.neg.default)
def _op_neg(func, a):
    return MCTensor(-a._components)


@implements(aten.abs.default)
def _op_abs(func, a):
    return _wrap(arith.abs(a._components))


@implements(aten.sign.default)
def _op_sign(func, a):
    return _wrap(arith.from_float(arith.sign(a._components), a.nc))


@implements(aten.sgn.default)
def _op_sgn(func, a):
    return _op_sign(func, a)


@implements(aten.sqrt.default)
def _op_sqrt(func, a):
    return _wrap(arith.sqrt(a._components))


@implements(aten.rsqrt.default)
def _op_rsqrt(func, a):
    return _wrap(arith.reciprocal(arith.sqrt(a._components)))


@implements(aten.reciprocal.default)
def _op_reciprocal(func, a):
    return _wrap(arith.reciprocal(a._components))


@implements(aten.square.default)
def _op_square(func, a):
    return _wrap(arith.square(a._components))


@implements(aten.pow.Tensor_Scalar)
def _op_pow(func, a, exponent):
    c = a._components
    if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real):
        raise NotImplementedError(f"MCTensor ** {type(exponent).__name__} is not supported")
    if float(exponent).is_integer():
        return _wrap(arith.pow_int(c, int(exponent)))
    if exponent == 0.5:
        return _wrap(arith.sqrt(c))
    if exponent == -0.5:
        return _wrap(arith.reciprocal(arith.sqrt(c)))
    exp_mc = _operand(exponent, a.dtype, a.nc, a.device)
    log_x = elementary.log(c)
    prod = arith.mul_float(log_x, exp_mc.t) if isinstance(exp_mc, _Plain) else arith.mul(log_x, exp_mc)
    return _wrap(elementary.exp(prod))


@implements(aten.pow.Tensor_Tensor)
def _op_pow_tt(func, a, b):
    if isinstance(b, MCTensor) or b.dim() != 0:
        raise NotImplementedError("MCTensor ** tensor is only supported for a 0-dim exponent")
    return _op_pow(func, a, b.item())


def _unary_kernel(kernel):
    def impl(func, a):
        return _wrap(kernel(a._components))

    return impl


for _name in ("exp", "expm1", "log", "log1p", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sin", "cos", "tan", "sigmoid", "erf"):
    implements(getattr(aten, _name).default)(_unary_kernel(getattr(elementary, _name)))


@implements(aten.relu.default)
def _op_relu(func, a):
    c = a._components
    return _wrap(select((c[..., :1] > 0) | torch.isnan(c[..., :1]), c, c.new_zeros(())))


@implements(aten.threshold_backward.default)
def _op_threshold_backward(func, grad, self, threshold):
    mask = _lead(self) <= threshold
    if isinstance(grad, MCTensor):
        g = grad._components
        return _wrap(select(mask.unsqueeze(-1), g.new_zeros(()), g))
    return torch.where(mask, 0.0, grad)


@implements(aten.tanh_backward.default)
def _op_tanh_backward(func, grad, out):
    # grad * (1 - out^2)
    one_minus = _sub(1.0, _wrap(arith.square(out._components)))
    return _wrap(_mul(grad, _wrap(one_minus)))


@implements(aten.sigmoid_backward.default)
def _op_sigmoid_backward(func, grad, out):
    one_minus = _wrap(_sub(1.0, out))
    return _wrap(_mul(grad, _wrap(_mul(out, one_minus))))


def _lead(a):
    return a._components[..., 0] if isinstance(a, MCTensor) else a


# ----------------------------------------------------------------- comparisons


def _compare(kernel):
    def impl(func, a, b):
        ref = _first_mc(a, b)
        nc = _nc_of(a, b)
        x = _operand(a, ref.dtype, nc, ref.device)
        y = _operand(b, ref.dtype, nc, ref.device)
        x = arith.from_float(x.t, nc) if isinstance(x, _Plain) else x
        y = arith.from_float(y.t, nc) if isinstance(y, _Plain) else y
        return kernel(x, y)

    return impl


for _name, _kernel in (("eq", arith.eq), ("ne", arith.ne), ("lt", arith.lt), ("le", arith.le), ("gt", arith.gt), ("ge", arith.ge)):
    implements(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(_compare(_kernel))


def _as_components(a, ref: MCTensor, nc: int) -> torch.Tensor:
    x = _operand(a, ref.dtype, nc, ref.device)
    return arith.from_float(x.t, nc) if isinstance(x, _Plain) else x


@implements(aten.maximum.default)
def _op_maximum(func, a, b):
    ref, nc = _first_mc(a, b), _nc_of(a, b)
    return _wrap(arith.maximum(_as_components(a, ref, nc), _as_components(b, ref, nc)))


@implements(aten.minimum.default)
def _op_minimum(func, a, b):
    ref, nc = _first_mc(a, b), _nc_of(a, b)
    return _wrap(arith.minimum(_as_components(a, ref, nc), _as_components(b, ref, nc)))


@implements(aten.clamp.default, aten.clamp.Tensor)
def _op_clamp(func, a, min=None, max=None):
    nc = _nc_of(a, min, max)
    lo = None if min is None else _as_components(min, a, nc)
    hi = None if max is None else _as_components(max, a, nc)
    return _wrap(arith.clamp(arith.pad(a._components, nc), lo, hi))


@implements(aten.clamp_min.default, aten.clamp_min.Tensor)
def _op_clamp_min(func, a, min):
    return _op_clamp(func, a, min=min)


@implements(aten.clamp_max.default, aten.clamp_max.Tensor)
def _op_clamp_max(func, a, max):
    return _op_clamp(func, a, max=max)


@implements(aten.where.self)
def _op_where(func, cond, a, b):
    ref = _first_mc(a, b)
    nc = _nc_of(a, b)
    return _wrap(arith.where(cond, _as_components(a, ref, nc), _as_components(b, ref, nc)))


@implements(aten.isnan.default)
def _op_isnan(func, a):
    return torch.isnan(a._components[..., 0])


@implements(aten.isinf.default)
def _op_isinf(func, a):
    return torch.isinf(a._components[..., 0])


@implements(aten.isfinite.default)
def _op_isfinite(func, a):
    return torch.isfinite(a._components[..., 0])


# --------------------------------------------------------------------- reductions


def _dims(dim, ndim: int) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"dimension {d} out of range for a {ndim}-d MCTensor")
        out.append(d % max(ndim, 1))
    return out


@implements(aten.sum.default)
def _op_sum(func, a, *, dtype=None):
    _no_dtype_change(func, a, dtype)
    return _wrap(reduce.sum(a._components, dim=None, keepdim=False))


@implements(aten.sum.dim_IntList)
def _op_sum_dim(func, a, dim=None, keepdim=False, *, dtype=None):
    _no_dtype_change(func, a, dtype)
    return _wrap(reduce.sum(a._components, dim=_dims(dim, a.dim()) if a.dim() else None, keepdim=keepdim))


@implements(aten.mean.default)
def _op_mean(func, a, *, dtype=None):
    _no_dtype_change(func, a, dtype)
    return _wrap(reduce.mean(a._components, dim=None, keepdim=False))


@implements(aten.mean.dim)
def _op_mean_dim(func, a, dim=None, keepdim=False, *, dtype=None):
    _no_dtype_change(func, a, dtype)
    return _wrap(reduce.mean(a._components, dim=_dims(dim, a.dim()) if a.dim() else None, keepdim=keepdim))


@implements(aten.linalg_vector_norm.default)
def _op_vector_norm(func, a, ord=2, dim=None, keepdim=False, *, dtype=None):
    _no_dtype_change(func, a, dtype)
    if ord != 2:
        raise NotImplementedError(f"MCTensor supports only the 2-norm in {func}; got ord={ord}")
    dims = _dims(dim, a.dim()) if a.dim() else None
    return _wrap(reduce.norm(a._components, dim=tuple(dims) if dims else None, keepdim=keepdim))


def _no_dtype_change(func, a, dtype):
    if dtype is not None and dtype != a.dtype:
        raise TypeError(f"{func}: dtype={dtype} would change the component dtype {a.dtype}; convert explicitly first")


# ------------------------------------------------------------------- linear algebra


def _mm_operand(a, ref: MCTensor) -> torch.Tensor:
    if isinstance(a, MCTensor):
        if a.dtype != ref.dtype:
            raise _OperandTypeError(f"matmul operands must share their component dtype; got {ref.dtype} and {a.dtype}")
        return a._components
    if a.dtype != ref.dtype:
        raise _OperandTypeError(
            f"cannot multiply an MCTensor of component dtype {ref.dtype} with a plain tensor of "
            f"dtype {a.dtype}; convert the plain tensor with .to(dtype){_MODULE_HINT}"
        )
    return a.unsqueeze(-1)


def _matmul_impl(func, a, b):
    ref = _first_mc(a, b)
    nc = _nc_of(a, b)
    return _wrap(matmul.matmul(_mm_operand(a, ref), _mm_operand(b, ref), nc))


implements(aten.mm.default, aten.bmm.default, aten.mv.default, aten.dot.default, aten.matmul.default)(_matmul_impl)


@implements(aten.addmm.default)
def _op_addmm(func, c, a, b, *, beta=1, alpha=1):
    prod = _wrap(_matmul_impl(func, a, b)._components)
    if alpha != 1:
        prod = _wrap(_mul(prod, alpha))
    if beta == 0:
        return prod
    return _wrap(_add(prod, _scaled(c, beta)))


# ---------------------------------------------------------------- shape and views


def _view_result(func, args, kwargs, out):
    return return_and_correct_aliasing(func, args, kwargs, out)


def _logical(fn):
    """Register a view op whose implementation maps the components tensor."""

    def impl(func, a, *args, **kwargs):
        out = MCTensor(fn(a, *args, **kwargs))
        return _view_result(func, (a, *args), kwargs, out)

    return impl


def _planar(a: MCTensor) -> torch.Tensor:
    return a._components.movedim(-1, 0)


implements(aten.view.default, aten._unsafe_view.default)(_logical(lambda a, size: _planar(a).view(a.nc, *size).movedim(0, -1)))
implements(aten.expand.default)(_logical(lambda a, size, implicit=False: a._components.expand(*size, a.nc)))
implements(aten.permute.default)(_logical(lambda a, dims: a._components.permute(*_dims(dims, a.dim()), a.dim())))
implements(aten.transpose.int)(_logical(lambda a, d0, d1: a._components.transpose(*_dims([d0, d1], a.dim())) if a.dim() else a._components))
implements(aten.t.default)(_logical(lambda a: a._components.transpose(0, 1) if a.dim() == 2 else a._components))
implements(aten.unsqueeze.default)(_logical(lambda a, dim: a._components.unsqueeze(dim % (a.dim() + 1))))
implements(aten.squeeze.default)(
    _logical(lambda a: a._components.squeeze(tuple(d for d in range(a.dim()) if a.shape[d] == 1)) if a.dim() else a._components)
)
implements(aten.squeeze.dim)(_logical(lambda a, dim: a._components.squeeze(_dims(dim, a.dim())[0]) if a.dim() else a._components))
implements(aten.squeeze.dims)(_logical(lambda a, dims: a._components.squeeze(tuple(_dims(dims, a.dim()))) if a.dim() else a._components))
implements(aten.select.int)(_logical(lambda a, dim, index: a._components.select(_dims(dim, a.dim())[0], index)))
implements(aten.slice.Tensor)(
    _logical(lambda a, dim=0, start=None, end=None, step=1: aten.slice.Tensor(a._components, _dims(dim, a.dim())[0], start, end, step))
)
implements(aten.alias.default)(_logical(lambda a: a._components.view_as(a._components)))
implements(aten.diagonal.default)(
    _logical(lambda a, offset=0, dim1=0, dim2=1: a._components.diagonal(offset, *_dims([dim1, dim2], a.dim())).movedim(-2, -1))
)


@implements(aten.detach.default)
def _op_detach(func, a):
    return _view_result(func, (a,), {}, MCTensor(a._components))


@implements(aten.unbind.int)
def _op_unbind(func, a, dim=0):
    outs = [MCTensor(c) for c in a._components.unbind(_dims(dim, a.dim())[0])]
    return _view_result(func, (a, dim), {}, outs)


@implements(aten.split.Tensor, aten.split_with_sizes.default)
def _op_split(func, a, split_size, dim=0):
    d = _dims(dim, a.dim())[0]
    outs = [MCTensor(c) for c in torch.split(a._components, split_size, d)]
    return _view_result(func, (a, split_size, dim), {}, outs)


@implements(aten.clone.default)
def _op_clone(func, a, *, memory_format=None):
    return MCTensor(pack(unpack(a._components)))


@implements(aten.contiguous.default)
def _op_contiguous(func, a, *, memory_format=None):
    return _op_clone(func, a)


@implements(aten.cat.default)
def _op_cat(func, tensors, dim=0):
    ref = _first_mc(tensors)
    nc = _nc_of(*tensors)
    parts = [arith.pad(_as_components(t, ref, nc), nc) for t in tensors]
    parts = [p for p, t in zip(parts, tensors) if not (t.dim() == 1 and t.shape[0] == 0 and ref.dim() != 1)]
    return MCTensor(torch.cat(parts, dim=_dims(dim, ref.dim())[0]))


@implements(aten.stack.default)
def _op_stack(func, tensors, dim=0):
    ref = _first_mc(tensors)
    nc = _nc_of(*tensors)
    parts = [arith.pad(_as_components(t, ref, nc), nc) for t in tensors]
    return MCTensor(torch.stack(parts, dim=dim % (ref.dim() + 1)))


@implements(aten.index.Tensor)
def _op_index(func, a, indices):
    return MCTensor(_index(a._components, list(indices)))


def _index(c: torch.Tensor, indices: list) -> torch.Tensor:
    """``c[indices]`` (advanced indexing of the MC dims), plane by plane where ``c`` is
    planar and the index tensors are adjacent (their result dims then stay in place)."""
    p = planes(c)
    used = [k for k, i in enumerate(indices) if i is not None]
    if p is None or not used or used != list(range(used[0], used[-1] + 1)):
        return aten.index.Tensor(c, indices)
    if len(used) == 1:
        k, i = used[0], indices[used[0]]
        if not i.dtype.is_floating_point and i.dtype != torch.bool and (i.numel() == 0 or int(i.min()) >= 0):
            # one integer index: index_select of the flat index (3x advanced indexing)
            rows = p.index_select(k + 1, i.reshape(-1))
            return rows.reshape(*rows.shape[: k + 1], *i.shape, *rows.shape[k + 2 :]).movedim(0, -1)
    return aten.index.Tensor(p, [None, *indices]).movedim(0, -1)


@implements(aten.index_select.default)
def _op_index_select(func, a, dim, index):
    return MCTensor(take(a._components, _dims(dim, a.dim())[0], index))


@implements(aten.gather.default)
def _op_gather(func, a, dim, index, *, sparse_grad=False):
    d = _dims(dim, a.dim())[0]
    p = planes(a._components)
    if p is not None:
        return MCTensor(p.gather(d + 1, index.unsqueeze(0).expand(a.nc, *index.shape)).movedim(0, -1))
    idx = index.unsqueeze(-1).expand(*index.shape, a.nc)
    return MCTensor(a._components.gather(d, idx))


@implements(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _op_masked_fill(func, a, mask, value):
    v = _as_components(value, a, a.nc)
    return MCTensor(torch.where(mask.unsqueeze(-1), v, a._components))


@implements(aten.flip.default)
def _op_flip(func, a, dims):
    return MCTensor(a._components.flip(_dims(dims, a.dim())))


@implements(aten.roll.default)
def _op_roll(func, a, shifts, dims=()):
    return MCTensor(a._components.roll(shifts, _dims(dims, a.dim()) if dims else None))


# Backward helpers of indexing ops: scatter an MC gradient into MC zeros (exact adds).


@implements(aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default)
def _op_index_put(func, a, indices, values, accumulate=False, unsafe=False):
    indices = list(indices)
    nc = _nc_of(a, values)
    if func is not aten.index_put.default and not accumulate:
        # In place: write only the indexed slots of a's components (no copy of the whole
        # table); values with more components are rounded to a.nc, as _inplace_assign does.
        vals = _as_components(values, a, nc)
        vals = _fit_nc(vals, a.nc)
        a._components.index_put_(indices, vals)
        return a
    base = arith.pad(a._components, nc)
    vals = _as_components(values, a, nc)
    if accumulate:
        # Exact accumulation: sum duplicates with MC adds via an index_add over flattened slots.
        result = reduce.scatter_add(base, indices, vals)
    else:
        result = aten.index_put.default(base, indices, vals)
    if func is aten.index_put.default:
        return MCTensor(result)
    return _inplace_assign(func, a, result, (a, indices, values, accumulate))


def _grad_into_zeros(grad: MCTensor, input_sizes) -> tuple[torch.Tensor, int]:
    """MC zeros of the input's shape for a view op's backward, and the number of dims."""
    return grad._components.new_zeros((*input_sizes, grad.nc)), len(input_sizes)


@implements(aten.select_backward.default)
def _op_select_backward(func, grad, input_sizes, dim, index):
    out, ndim = _grad_into_zeros(grad, input_sizes)
    out.select(_dims(dim, ndim)[0], index).copy_(grad._components)
    return MCTensor(out)


@implements(aten.slice_backward.default)
def _op_slice_backward(func, grad, input_sizes, dim, start, end, step):
    out, ndim = _grad_into_zeros(grad, input_sizes)
    aten.slice.Tensor(out, _dims(dim, ndim)[0], start, end, step).copy_(grad._components)
    return MCTensor(out)


@implements(aten.diagonal_backward.default)
def _op_diagonal_backward(func, grad, input_sizes, offset, dim1, dim2):
    out, ndim = _grad_into_zeros(grad, input_sizes)
    out.diagonal(offset, *_dims([dim1, dim2], ndim)).copy_(grad._components.movedim(-1, -2))
    return MCTensor(out)


@implements(aten.index_add.default, aten.index_add_.default)
def _op_index_add(func, a, dim, index, source, *, alpha=1):
    """``a.index_add(dim, index, source)``: the backward of ``index_select`` (MC adds)."""
    ref, nc = _first_mc(a, source), _nc_of(a, source)
    base = arith.pad(_as_components(a, ref, nc), nc)
    d = _dims(dim, a.dim())[0]
    vals = arith.pad(_as_components(_scaled(source, alpha), ref, nc), nc)
    if index.dim() == 0:  # a 0-d index: source lacks the indexed dim
        index, vals = index.reshape(1), vals.unsqueeze(d)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= base.shape[d]):
        raise IndexError(f"{func}: index out of range in self (dim {dim} has size {base.shape[d]})")
    vals = vals.expand(*base.shape[:d], len(index), *base.shape[d + 1 :])
    result = reduce.scatter(base.movedim(d, 0), index, vals.movedim(d, 0), "sum").movedim(0, d)  # rows along d
    return _inplace_assign(func, a, result, ()) if func is aten.index_add_.default else MCTensor(result)


@implements(aten.scatter_add.default, aten.scatter_add_.default)
def _op_scatter_add(func, a, dim, index, src):
    """``a.scatter_add(dim, index, src)``: the backward of ``gather`` (MC adds)."""
    ref, nc = _first_mc(a, src), _nc_of(a, src)
    base = arith.pad(_as_components(a, ref, nc), nc)
    d = _dims(dim, a.dim())[0]
    grids = torch.meshgrid(*[torch.arange(n, device=index.device) for n in index.shape], indexing="ij")
    indices = [index if k == d else grids[k] for k in range(index.dim())]
    vals = _as_components(src, ref, nc)[tuple(slice(0, n) for n in index.shape)]
    result = reduce.scatter_add(base, indices, vals)
    return _inplace_assign(func, a, result, ()) if func is aten.scatter_add_.default else MCTensor(result)


# ---------------------------------------------------- scatter reductions (graph layers)
#
# The aggregations of message-passing layers (PyTorch Geometric's ``scatter``,
# ``softmax`` and ``segment``): every slot is reduced by :func:`hypermc.mcf.reduce.scatter`,
# sums accurately (the bound of an accurate sum over the slot's values), maxima exactly.


def _scatter_entries(shape, d: int, index: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat target slots (in ``shape``) and component rows of ``src`` for ``scatter*(d, index, src)``."""
    if index.dim() != len(shape):
        raise RuntimeError(f"scatter: index must have as many dims as self ({len(shape)}); got {index.dim()}")
    flat_ids = torch.arange(math.prod(shape), device=index.device).reshape(shape)
    target = flat_ids.gather(d, index).reshape(-1)
    vals = src[tuple(slice(0, n) for n in index.shape)].reshape(-1, src.shape[-1])
    return target, vals


@implements(aten.scatter_reduce.two, aten.scatter_reduce_.two)
def _op_scatter_reduce(func, a, dim, index, src, reduce_op, *, include_self=True):
    """``a.scatter_reduce(dim, index, src, reduce)`` for sum, mean, prod, amax, amin."""
    if reduce_op not in reduce.SCATTER_REDUCTIONS:
        raise RuntimeError(f"{func}: reduce must be one of {reduce.SCATTER_REDUCTIONS}; got {reduce_op!r}")
    ref, nc = _first_mc(a, src), _nc_of(a, src)
    base = arith.pad(_as_components(a, ref, nc), nc)
    d = _dims(dim, a.dim())[0]
    vals = arith.pad(_as_components(src, ref, nc), nc)
    rows = _row_index(a, d, index)
    if rows is not None and rows.numel():
        lo, hi = int(rows.min()), int(rows.max())
        if lo < 0 or hi >= base.shape[d]:
            bad = lo if lo < 0 else hi
            raise RuntimeError(f"{func}: index {bad} is out of bounds for dimension {d} with size {base.shape[d]}")
    if rows is not None:  # an index expanded along the other dims (PyG's): whole rows along d
        vals = vals[tuple(slice(0, n) for n in index.shape)]
        result = reduce.scatter(base.movedim(d, 0), rows, vals.movedim(d, 0), reduce_op, include_self).movedim(0, d)
    else:
        target, vals = _scatter_entries(tuple(a.shape), d, index, vals)
        result = reduce.scatter(base, target, vals, reduce_op, include_self)
    return _inplace_assign(func, a, result, ()) if func is aten.scatter_reduce_.two else MCTensor(result)


def _row_index(a, d: int, index: torch.Tensor) -> torch.Tensor | None:
    """The 1-d index along ``d`` when ``index`` is one, expanded over all other dims of
    ``a`` (stride 0, full size); None otherwise."""
    if index.dim() != a.dim() or a.dim() < 2:
        return None
    for k in range(a.dim()):
        if k != d and (index.stride(k) != 0 or index.shape[k] != a.shape[k]):
            return None
    return index[tuple(slice(None) if k == d else 0 for k in range(a.dim()))]


@implements(aten.scatter.src, aten.scatter.value, aten.scatter_.src, aten.scatter_.value)
def _op_scatter(func, a, dim, index, src):
    """``a.scatter(dim, index, src)``: write ``src`` (a tensor or a number) into the indexed
    slots; for a slot indexed more than once the value written is one of them, as in torch."""
    ref = _first_mc(a, src)
    nc = _nc_of(a, src)
    base = arith.pad(_as_components(a, ref, nc), nc)
    if isinstance(src, torch.Tensor):
        vals = arith.pad(_as_components(src, ref, nc), nc)
    else:
        vals = _as_components(src, ref, nc).expand(*index.shape, nc)
    target, rows = _scatter_entries(tuple(a.shape), _dims(dim, a.dim())[0], index, vals)
    flat = base.reshape(-1, nc).clone()
    flat[target] = rows
    result = flat.reshape(base.shape)
    return _inplace_assign(func, a, result, ()) if func in (aten.scatter_.src, aten.scatter_.value) else MCTensor(result)


_SEGMENT_KERNELS = {"sum": "sum", "mean": "sum", "max": "amax", "amax": "amax", "min": "amin", "amin": "amin", "prod": "prod"}
_SEGMENT_EMPTY = {"sum": 0.0, "amax": -math.inf, "amin": math.inf, "prod": 1.0}


def _segment_lengths(data: MCTensor, axis: int, lengths, offsets) -> torch.Tensor:
    """Segment lengths along ``axis`` from ``lengths`` or ``offsets`` (1-d only)."""
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce: give exactly one of lengths and offsets")
    seg = lengths if lengths is not None else offsets[1:] - offsets[:-1]
    if seg.dim() != 1:
        raise NotImplementedError(f"MCTensor supports segment_reduce with 1-d lengths/offsets only; got {seg.dim()}-d")
    if int(seg.sum()) != data.shape[axis]:
        raise RuntimeError(f"segment_reduce: the lengths sum to {int(seg.sum())}, not to data's size {data.shape[axis]} at axis {axis}")
    return seg.to(torch.int64)


@implements(aten.segment_reduce.default)
def _op_segment_reduce(func, data, reduce_op, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """``torch._segment_reduce``: reduce consecutive runs of ``data`` along ``axis``.

    ``initial`` takes part in every segment (mean: in the sum, not in the count, as torch
    does); an empty segment gives ``initial`` or the reduction's identity (mean: NaN).
    """
    if reduce_op not in _SEGMENT_KERNELS:
        raise RuntimeError(f"segment_reduce: reduce must be one of {sorted(_SEGMENT_KERNELS)}; got {reduce_op!r}")
    if indices is not None:
        raise NotImplementedError("MCTensor does not support segment_reduce with indices=")
    kernel = _SEGMENT_KERNELS[reduce_op]
    ax = _dims(axis, data.dim())[0]
    seg = _segment_lengths(data, ax, lengths, offsets)
    c = data._components.movedim(ax, 0)
    rest = tuple(c.shape[1:-1])
    n_rest = math.prod(rest)
    # the base: initial (taking part: include_self) or what an empty segment gives
    fill = initial if initial is not None else (0.0 if reduce_op == "mean" else _SEGMENT_EMPTY[kernel])
    base = _new_filled(data, (len(seg), *rest), fill)._components
    rows = torch.repeat_interleave(torch.arange(len(seg), device=seg.device), seg)
    target = (rows.unsqueeze(1) * n_rest + torch.arange(n_rest, device=seg.device)).reshape(-1)
    out = reduce.scatter(base, target, c.reshape(-1, data.nc), kernel, include_self=initial is not None)
    if reduce_op == "mean":  # divided by the length (initial not counted); empty: initial, else NaN
        counts = seg.reshape(-1, *([1] * len(rest))).expand(len(seg), *rest)
        empty = arith.from_float(torch.full_like(out[..., 0], math.nan), data.nc) if initial is None else out
        out = torch.where((counts > 0).unsqueeze(-1), reduce.div_counts(out, counts.clamp(min=1)), empty)
    return MCTensor(out.movedim(0, ax))


def _segment_others(ref: MCTensor, nc: int, data, ax: int, seg: torch.Tensor, initial) -> torch.Tensor:
    """For every element of ``data`` (moved to the front), the product of the other elements
    of its segment times ``initial``: the segment's product over the element where no
    factor is zero (an MC division), the product of the nonzero factors at the only zero,
    and 0 elsewhere."""
    x = arith.pad(_as_components(data, ref, nc), nc).movedim(ax, 0)
    nonzero = x[..., 0] != 0
    x1 = torch.where(nonzero.unsqueeze(-1), x, arith.from_float(torch.ones_like(x[..., 0]), nc))
    rows = torch.repeat_interleave(torch.arange(len(seg), device=seg.device), seg)
    base = arith.pad(_new_filled(ref, (len(seg), *x.shape[1:-1]), 1.0 if initial is None else initial)._components, nc)
    prod_nonzero = reduce.scatter(base, rows, x1, "prod")[rows]
    zeros = torch.zeros(base.shape[:-1], dtype=torch.int64, device=x.device).index_add_(0, rows, (~nonzero).to(torch.int64))[rows]
    at_only_zero = torch.where(((zeros == 1) & ~nonzero).unsqueeze(-1), prod_nonzero, torch.zeros_like(prod_nonzero))
    return torch.where((zeros == 0).unsqueeze(-1), arith.div(prod_nonzero, x1), at_only_zero)


@implements(aten._segment_reduce_backward.default)
def _op_segment_reduce_backward(func, grad, output, data, reduce_op, *, lengths=None, offsets=None, axis=0, initial=None):
    """Gradient of :func:`_op_segment_reduce` for data: sum and mean spread the segment's
    gradient (mean: divided by the length); max / min give it to the elements equal to the
    result, shared equally among ties; prod multiplies it by the product of the segment's
    other elements (and ``initial``), zeros included."""
    kernel = _SEGMENT_KERNELS.get(reduce_op)
    if kernel is None:
        raise RuntimeError(f"segment_reduce: reduce must be one of {sorted(_SEGMENT_KERNELS)}; got {reduce_op!r}")
    ax = _dims(axis, data.dim())[0]
    seg = _segment_lengths(data, ax, lengths, offsets)
    ref, nc = _first_mc(grad, output, data), _nc_of(grad, output, data)
    g = arith.pad(_as_components(grad, ref, nc), nc).movedim(ax, 0)
    if reduce_op == "mean":
        counts = seg.reshape(-1, *([1] * (g.dim() - 2))).expand(g.shape[:-1])
        g = reduce.div_counts(g, counts.clamp(min=1))
    g_rows = g.repeat_interleave(seg, dim=0)
    if kernel == "sum":
        return MCTensor(g_rows.movedim(0, ax))
    if kernel == "prod":
        return MCTensor(arith.mul(g_rows, _segment_others(ref, nc, data, ax, seg, initial)).movedim(0, ax))
    out_rows = arith.pad(_as_components(output, ref, nc), nc).movedim(ax, 0).repeat_interleave(seg, dim=0)
    hit = arith.eq(arith.pad(_as_components(data, ref, nc), nc).movedim(ax, 0), out_rows)
    rows = torch.repeat_interleave(torch.arange(len(seg), device=seg.device), seg)
    ties = torch.zeros((len(seg), *hit.shape[1:]), dtype=torch.int64, device=hit.device).index_add_(0, rows, hit.to(torch.int64))
    shared = reduce.div_counts(g_rows, ties[rows].clamp(min=1))
    return MCTensor(torch.where(hit.unsqueeze(-1), shared, torch.zeros_like(shared)).movedim(0, ax))


# --------------------------------------------------------------- activations, softmax


@implements(aten.leaky_relu.default, aten.leaky_relu_.default)
def _op_leaky_relu(func, a, negative_slope=0.01):
    """``x`` where ``x > 0``, else ``negative_slope * x`` (an MC × float product, as torch)."""
    c = a._components
    result = arith.where(c[..., 0] > 0, c, _mul(a, negative_slope))
    return _inplace_assign(func, a, result, ()) if func is aten.leaky_relu_.default else MCTensor(result)


@implements(aten.leaky_relu_backward.default)
def _op_leaky_relu_backward(func, grad, self, negative_slope, self_is_result):
    if self_is_result and negative_slope < 0:
        raise RuntimeError("leaky_relu_backward: in-place leaky_relu with a negative slope has no gradient (the input is lost)")
    mask = _lead(self) > 0
    if isinstance(grad, MCTensor):
        return MCTensor(arith.where(mask, grad._components, _mul(grad, negative_slope)))
    return torch.where(mask, grad, grad * negative_slope)


def _softmax_dim(func, a, dim, half_to_float):
    if half_to_float:
        raise TypeError(f"{func}: half_to_float=True would change the component dtype {a.dtype}; convert explicitly first")
    return _dims(dim, a.dim())[0] if a.dim() else None


def _shifted(c: torch.Tensor, d) -> torch.Tensor:
    """``x - max(x)`` over ``d`` (the exact maximum; a softmax does not change by the shift)."""
    return arith.sub(c, reduce.amax(c, d, keepdim=True)) if d is not None else arith.sub(c, c)


@implements(aten._softmax.default)
def _op_softmax(func, a, dim, half_to_float):
    """``exp(x - m) / sum(exp(x - m))`` with the exact maximum ``m``, MC exp and an accurate sum."""
    d = _softmax_dim(func, a, dim, half_to_float)
    e = elementary.exp(_shifted(a._components, d))
    return MCTensor(arith.div(e, reduce.sum(e, d, keepdim=True)))


@implements(aten._log_softmax.default)
def _op_log_softmax(func, a, dim, half_to_float):
    """``(x - m) - log(sum(exp(x - m)))`` with the exact maximum ``m``."""
    d = _softmax_dim(func, a, dim, half_to_float)
    z = _shifted(a._components, d)
    return MCTensor(arith.sub(z, elementary.log(reduce.sum(elementary.exp(z), d, keepdim=True))))


@implements(aten._softmax_backward_data.default)
def _op_softmax_backward(func, grad, output, dim, input_dtype):
    """``y * (g - sum(g * y))``."""
    ref, nc = _first_mc(grad, output), _nc_of(grad, output)
    g, y = _as_components(grad, ref, nc), _as_components(output, ref, nc)
    d = _dims(dim, ref.dim())[0] if ref.dim() else None
    gy = arith.mul(g, y)
    return MCTensor(arith.mul(y, arith.sub(g, reduce.sum(gy, d, keepdim=True) if d is not None else gy)))


@implements(aten._log_softmax_backward_data.default)
def _op_log_softmax_backward(func, grad, output, dim, input_dtype):
    """``g - exp(y) * sum(g)``."""
    ref, nc = _first_mc(grad, output), _nc_of(grad, output)
    g, y = _as_components(grad, ref, nc), _as_components(output, ref, nc)
    d = _dims(dim, ref.dim())[0] if ref.dim() else None
    return MCTensor(arith.sub(g, arith.mul(elementary.exp(y), reduce.sum(g, d, keepdim=True) if d is not None else g)))


# ------------------------------------------------------------- factories / in-place


def _new_filled(ref: MCTensor, size, value, device=None) -> MCTensor:
    """MCTensor of ``size`` filled with ``value``, a number taken at MC precision like an operand."""
    v = _as_components(value, ref, ref.nc).to(device or ref.device)
    return MCTensor(pack(unpack(v.expand(*size, ref.nc))))


def _factory_like(value):
    def impl(func, a, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, **kw):
        if dtype is not None and dtype != a.dtype:
            raise TypeError(f"{func}: dtype={dtype} differs from the MCTensor's component dtype {a.dtype}")
        fill = args[0] if value is None else value
        return _new_filled(a, a.shape, fill, device=device)

    return impl


implements(aten.zeros_like.default)(_factory_like(0.0))
implements(aten.ones_like.default)(_factory_like(1.0))
implements(aten.empty_like.default)(_factory_like(0.0))
implements(aten.full_like.default)(_factory_like(None))


def _factory_new(value):
    def impl(func, a, size, *args, dtype=None, layout=None, device=None, pin_memory=None, **kw):
        if dtype is not None and dtype != a.dtype:
            raise TypeError(f"{func}: dtype={dtype} differs from the MCTensor's component dtype {a.dtype}")
        fill = args[0] if value is None else value
        return _new_filled(a, size, fill, device=device)

    return impl


implements(aten.new_zeros.default)(_factory_new(0.0))
implements(aten.new_ones.default)(_factory_new(1.0))
implements(aten.new_empty.default)(_factory_new(0.0))
implements(aten.new_full.default)(_factory_new(None))


@implements(aten.new_empty_strided.default)
def _op_new_empty_strided(func, a, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _factory_new(0.0)(func, a, size, dtype=dtype, device=device)


def _inplace_assign(func, a: MCTensor, result: torch.Tensor, args) -> MCTensor:
    """Write ``result`` into ``a``'s components in place (views and optimizer state stay valid)."""
    if tuple(result.shape[:-1]) != tuple(a.shape):
        raise RuntimeError(
            f"{func}: result of shape {tuple(result.shape[:-1])} cannot be written in place into an MCTensor of shape {tuple(a.shape)}"
        )
    a._components.copy_(_fit_nc(result, a.nc))
    return a


def _fit_nc(result: torch.Tensor, nc: int) -> torch.Tensor:
    """Components ``(..., m)`` fitted to an in-place target's ``nc`` (it keeps its nc).

    More components are rounded to ``nc``; to one component, the nearest float (so a
    plain target, seen as ``nc = 1``, gets the correctly rounded MC result).
    """
    if result.shape[-1] > nc:
        return arith.nearest_float(result).unsqueeze(-1) if nc == 1 else renormalize(result, nc)
    return arith.pad(result, nc) if result.shape[-1] < nc else result


def _inplace(out_of_place):
    def impl(func, a, *args, **kwargs):
        result = out_of_place(func, a, *args, **kwargs)
        return _inplace_assign(func, a, result._components, args)

    return impl


for _op, _impl in (
    (aten.add_.Tensor, _op_add),
    (aten.add_.Scalar, _op_add),
    (aten.sub_.Tensor, _op_sub),
    (aten.sub_.Scalar, _op_sub),
    (aten.mul_.Tensor, _op_mul),
    (aten.mul_.Scalar, _op_mul),
    (aten.div_.Tensor, _op_div),
    (aten.div_.Scalar, _op_div),
    (aten.neg_.default, _op_neg),
    (aten.clamp_.default, _op_clamp),
    (aten.clamp_min_.default, _op_clamp_min),
    (aten.clamp_max_.default, _op_clamp_max),
    (aten.sqrt_.default, _op_sqrt),
    (aten.abs_.default, _op_abs),
    (aten.relu_.default, _op_relu),
    (aten.masked_fill_.Scalar, _op_masked_fill),
    (aten.masked_fill_.Tensor, _op_masked_fill),
):
    implements(_op)(_inplace(_impl))


@implements(aten.addcmul.default, aten.addcmul_.default)
def _op_addcmul(func, a, t1, t2, *, value=1):
    result = _wrap(_add(a, _scaled(_wrap(_mul(t1, t2)) if _any_mc(t1, t2) else t1 * t2, value)))
    if func is aten.addcmul_.default:
        return _inplace_assign(func, a, result._components, ())
    return result


@implements(aten.addcdiv.default, aten.addcdiv_.default)
def _op_addcdiv(func, a, t1, t2, *, value=1):
    result = _wrap(_add(a, _scaled(_wrap(_div(t1, t2)) if _any_mc(t1, t2) else t1 / t2, value)))
    if func is aten.addcdiv_.default:
        return _inplace_assign(func, a, result._components, ())
    return result


@implements(aten.lerp.Scalar, aten.lerp_.Scalar)
def _op_lerp(func, a, end, weight):
    # a + weight * (end - a)
    result = _wrap(_add(a, _wrap(_mul(_wrap(_sub(end, a)), weight))))
    if func is aten.lerp_.Scalar:
        return _inplace_assign(func, a, result._components, ())
    return result


def _any_mc(*args) -> bool:
    return any(isinstance(a, MCTensor) for a in args)


@implements(aten.copy_.default)
def _op_copy_(func, a, src, non_blocking=False):
    if isinstance(src, MCTensor):
        if src.dtype != a.dtype:
            raise TypeError(f"copy_: source component dtype {src.dtype} differs from the target's {a.dtype}")
        c = src._components.to(a.device)
    else:
        c = arith.from_value(src.to(a.device), a.dtype, a.nc)
    c = c.expand(*a.shape, c.shape[-1])
    return _inplace_assign(func, a, c, (a, src))


@implements(aten.fill_.Scalar, aten.fill_.Tensor)
def _op_fill_(func, a, value):
    v = _as_components(value if not isinstance(value, torch.Tensor) or value.dim() == 0 else value, a, a.nc)
    return _inplace_assign(func, a, v.expand(*a.shape, v.shape[-1]), (a, value))


@implements(aten.zero_.default)
def _op_zero_(func, a):
    a._components.zero_()
    return a


@implements(aten.bernoulli_.float)
def _op_bernoulli_(func, a, p=0.5, *, generator=None):
    """Fill with 0 / 1 draws, exact in every ``nc`` (dropout's mask): the same draws, from
    the same generator state, as a plain tensor of the component dtype gets."""
    draws = torch.empty(a.shape, dtype=a.dtype, device=a.device).bernoulli_(p, generator=generator)
    a._components.zero_()
    a._components[..., 0] = draws
    return a


@implements(aten._to_copy.default)
def _op_to_copy(func, a, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    c = a._components
    if device is not None:
        c = c.to(device, non_blocking=non_blocking)
    if dtype is not None and dtype != a.dtype:
        float_format(dtype)
        c = arith.to_dtype(c, dtype)
    return MCTensor(pack(unpack(c)))


@implements(aten._local_scalar_dense.default)
def _op_item(func, a):
    # the nearest double of the exact value (summing the components in float64 can
    # round twice, e.g. 1 + 2**-53 + 2**-110 -> 1.0)
    return float(a.to_mpmath().item())


@implements(aten.is_same_size.default)
def _op_is_same_size(func, a, b):
    return tuple(a.shape) == tuple(b.shape)


@implements(aten.is_nonzero.default)
def _op_is_nonzero(func, a):
    return bool(a._components[..., 0].item() != 0)


@implements(aten.lift_fresh.default)
def _op_lift_fresh(func, a):
    return a


# --------------------------------------------------------------- embedding (hypermc.nn)


@implements(aten.embedding.default)
def _op_embedding(func, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of an MC weight: ``weight[indices]`` (exact; a gather of components, plane by
    plane where the weight is planar; the result is planar)."""
    c = weight._components
    return MCTensor(_index(c, [indices]) if planes(c) is not None else pack(unpack(c[indices])))


@implements(aten.embedding_dense_backward.default)
def _op_embedding_dense_backward(func, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Scatter-add the rows' gradients into MC zeros; duplicates are summed in MC arithmetic.

    ``padding_idx`` rows get no gradient; ``scale_grad_by_freq`` divides each row's
    gradient by the number of times the row occurs in ``indices`` (an MC division).
    """
    g = grad._components if isinstance(grad, MCTensor) else grad.unsqueeze(-1)
    nc, dim = g.shape[-1], g.shape[-2]
    idx = indices.reshape(-1)
    vals = g.reshape(-1, dim, nc)
    if scale_grad_by_freq:
        counts = torch.bincount(idx, minlength=num_weights).to(torch.float64)[idx]
        vals = arith.div(vals, arith.from_engine(counts, g.dtype, nc).unsqueeze(-2))
    if padding_idx is not None and padding_idx >= 0:
        keep = idx != padding_idx
        idx, vals = idx[keep], vals[keep]
    base = g.new_zeros((num_weights, dim, nc))
    return MCTensor(pack(unpack(reduce.scatter_add(base, [idx], vals))))
