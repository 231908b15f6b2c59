"""Functional forms of the MC modules, conversions and losses.

Every function takes plain Tensors or MCTensors (:class:`hypermc.MCTensor`) and runs in
MC arithmetic through the ``MCTensor`` op table, so autograd gives MC gradients. A plain
tensor operand enters exactly (through the MC×float kernels, or as a one-component
MCTensor); the results are MCTensors except for :func:`to_tensor`. Component dtypes
must agree (``TypeError`` otherwise: no implicit precision change).

torch's own ``torch.nn.functional.linear`` and ``embedding`` also work on MCTensors;
the versions here add argument checks with clear messages. torch's losses
(``F.mse_loss``, ``F.cross_entropy``, ...) and ``F.softmax`` / ``F.gelu`` are fused aten
kernels that MCTensor does not implement; use the forms below.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, cast

import mpmath
import torch
import torch.nn.functional as F

from .._checks import check_choice, check_instance, check_int, check_nc
from ..mcf import MCTensor, mc
from ..mcf.eft import float_pieces, piece_count

__all__ = [
    "linear",
    "embedding",
    "relu",
    "gelu",
    "softmax",
    "log_softmax",
    "to_tensor",
    "as_mc",
    "mse_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
]

# torch clamps log(p) at -100 in binary_cross_entropy (so p = 0 gives a finite loss).
_BCE_LOG_FLOOR = -100.0
_REDUCTIONS = ("none", "mean", "sum")
# GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), its two
# constants exact (0.044715 is a decimal, sqrt(2/pi) to 600 bits) as float64 pieces
# (_times multiplies as many as an operand's components hold).
_GELU_TANH_COEFF = float_pieces(Fraction(44715, 10**6))
with mpmath.workprec(600):
    _man, _exp = mpmath.sqrt(2 / mpmath.pi).man_exp
    _SQRT_2_OVER_PI = float_pieces(Fraction(int(_man)) * Fraction(2) ** int(_exp))
del _man, _exp
_SQRT_HALF = math.sqrt(0.5)


def _times(x: MCTensor, pieces: tuple[float, ...]) -> torch.Tensor:
    """``x * c`` for a constant given as its ``float_pieces``, to ``x``'s precision: the
    sum of ``x`` times each piece its components hold (one product at nc = 1 and for
    float32 nc = 2)."""
    keep = pieces[: piece_count(x.dtype, x.nc)]
    out = x * keep[0]
    for p in keep[1:]:
        out = out + x * p
    return out


# ------------------------------------------------------------------------ conversions


class _ToTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: MCTensor) -> torch.Tensor:
        ctx.nc = x.nc
        return x.approx()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> MCTensor:
        return grad if isinstance(grad, MCTensor) else mc(grad, nc=ctx.nc)


class _AsMC(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, nc: int) -> MCTensor:
        return mc(x, nc=nc)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return (grad.approx() if isinstance(grad, MCTensor) else grad), None


def to_tensor(x: torch.Tensor) -> torch.Tensor:
    """Nearest plain tensor of an MCTensor, differentiably (identity on plain tensors).

    The forward is :meth:`MCTensor.approx`; the backward passes the incoming gradient
    on as an MCTensor with ``x``'s ``nc`` (exact), so gradients keep flowing in MC
    arithmetic through layers that follow. This is how an MC layer's output is "turned
    into a Tensor" between layers.

    Example:
        >>> y = to_tensor(hm.mc([1.0, 2.0], nc=2, dtype=torch.float64))
        >>> type(y).__name__, y
        ('Tensor', tensor([1., 2.], dtype=torch.float64))
    """
    if isinstance(x, MCTensor):
        return _ToTensor.apply(x)
    return x


def as_mc(x: torch.Tensor, nc: int = 1) -> MCTensor:
    """An MCTensor of ``x`` with ``nc`` components, differentiably (exact for plain input).

    MCTensor input is returned unchanged. The backward hands a plain input the nearest
    plain value of its (MC) gradient.

    Raises:
        TypeError: ``x`` is not a floating Tensor, or ``nc`` not an int.
        ValueError: ``nc < 1``.

    Example:
        >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
        >>> m = as_mc(x, nc=2)
        >>> type(m).__name__, m.nc
        ('MCTensor', 2)
        >>> to_tensor(m * 3.0).sum().backward()
        >>> x.grad
        tensor([3., 3.], dtype=torch.float64)
    """
    if isinstance(x, MCTensor):
        return x
    check_instance("as_mc", "x", x, torch.Tensor, "a Tensor or MCTensor")
    if not x.is_floating_point():
        raise TypeError(f"as_mc: x must be a floating-point tensor; got dtype {x.dtype}")
    return _AsMC.apply(x, check_nc("as_mc", nc))


def _mc_operand(x: torch.Tensor) -> MCTensor:
    return as_mc(x, 1)


def _check_input(name: str, x: object, ref: torch.Tensor, what: str) -> None:
    """TypeError unless ``x`` is a floating Tensor of the dtype of ``ref`` (a parameter)."""
    t: torch.Tensor = check_instance(name, "input", x, torch.Tensor, "a Tensor or MCTensor")
    if t.dtype != ref.dtype:
        raise TypeError(
            f"{name}: input has dtype {t.dtype} but the {what} has component dtype {ref.dtype}; "
            f"convert the input with .to({ref.dtype}) (or build the layer with dtype={t.dtype})"
        )


# ---------------------------------------------------------------------------- layers


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``input @ weight.T + bias`` in MC arithmetic (:func:`torch.nn.functional.linear`).

    Runs on the Ozaki-sliced MC matrix product (``hypermc.mcf.matmul``) with one final
    rounding per output entry.

    Args:
        input: Tensor or MCTensor ``(*, in_features)``.
        weight: ``(out_features, in_features)``, usually an MC parameter.
        bias: ``(out_features,)`` or ``None``.

    Returns:
        ``(*, out_features)``; an MCTensor when any operand is one.

    Raises:
        TypeError: dtypes differ.
        ValueError: ``input``'s last dimension is not ``in_features``.

    Example:
        >>> x = hm.mc([[0.1, 0.2]], nc=2, dtype=torch.float64)
        >>> weight = hm.mc([[1.0, 1.0]], nc=2, dtype=torch.float64)
        >>> y = linear(x, weight, hm.mc([-0.3], nc=2, dtype=torch.float64))
        >>> y.shape, y.approx().item() == 2**-55  # exact 0.1 + 0.2 - 0.3 of the float64 inputs
        (torch.Size([1, 1]), True)
    """
    _check_input("linear", input, weight, "weight")
    if input.dim() == 0 or input.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input of shape {tuple(input.shape)} does not end in in_features={weight.shape[-1]}")
    return F.linear(input, weight, bias)


def embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Rows ``weight[input]`` (:func:`torch.nn.functional.embedding`), exact.

    The backward scatter-adds the output gradient into the rows in MC arithmetic
    (duplicates summed exactly up to MC rounding); row ``padding_idx`` gets none.

    Args:
        input: integer tensor of any shape, entries in ``[0, num_embeddings)``.
        weight: ``(num_embeddings, embedding_dim)``.
        padding_idx: row without gradient, or ``None``.
        scale_grad_by_freq: divide each row's gradient by its count in ``input``.

    Raises:
        TypeError: ``input`` is not an integer tensor.
        IndexError: an index is out of range.

    Example:
        >>> weight = hm.mc([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], nc=2, dtype=torch.float64)
        >>> rows = embedding(torch.tensor([2, 0]), weight)
        >>> rows.nc, rows.approx()
        (2, tensor([[5., 6.],
                [1., 2.]], dtype=torch.float64))
    """
    if not isinstance(input, torch.Tensor) or input.is_floating_point() or input.dtype == torch.bool:
        raise TypeError(
            f"embedding: input must be an integer (long) tensor of indices; got "
            f"{input.dtype if isinstance(input, torch.Tensor) else type(input).__name__}"
        )
    n = weight.shape[0]
    if input.numel() and (int(input.min()) < 0 or int(input.max()) >= n):
        raise IndexError(f"embedding: indices must lie in [0, {n}); got range [{int(input.min())}, {int(input.max())}]")
    return F.embedding(input, weight, padding_idx, None, 2.0, scale_grad_by_freq, False)


# ------------------------------------------------------------------------ activations


def relu(input: torch.Tensor, inplace: bool = False) -> MCTensor:
    """``max(input, 0)`` elementwise (a plain input becomes an exact 1-component MCTensor).

    Example:
        >>> relu(hm.mc([-1.0, 2.0], nc=2, dtype=torch.float64)).approx()
        tensor([0., 2.], dtype=torch.float64)
        >>> relu(torch.tensor([-1.0, 2.0])).nc
        1
    """
    x = _mc_operand(input)
    return cast(MCTensor, torch.relu_(x) if inplace and x is input else torch.relu(x))  # MC in, MC out


def gelu(input: torch.Tensor, approximate: str = "none") -> MCTensor:
    """GELU, ``x * Phi(x)`` with ``Phi`` the standard normal CDF, in MC arithmetic.

    ``approximate="none"``: ``0.5 x (1 + erf(x / sqrt(2)))``; erf is evaluated in float64
    and split into components, so it is available where float64 holds the MC value with
    4 guard bits (float16 ``nc <= 4``, bfloat16 ``nc <= 6``, float32 ``nc <= 2``; a
    ``NotImplementedError`` otherwise). ``approximate="tanh"``:
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, all in MC arithmetic, any ``nc``.

    Raises:
        ValueError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.

    Example:
        >>> [round(v, 6) for v in gelu(hm.mc([0.0, 1.0], nc=2, dtype=torch.float32)).approx().tolist()]
        [0.0, 0.841345]
        >>> gelu(hm.mc([0.0, 1.0], nc=2, dtype=torch.float64), approximate="tanh").approx()
        tensor([0.0000, 0.8412], dtype=torch.float64)
    """
    check_choice("gelu", "approximate", approximate, ("none", "tanh"))
    x = _mc_operand(input)
    if approximate == "tanh":
        inner = _times(x + _times(x * x * x, _GELU_TANH_COEFF), _SQRT_2_OVER_PI)
        return x * 0.5 * (torch.tanh(inner) + 1.0)
    return x * 0.5 * (torch.erf(x * _SQRT_HALF) + 1.0)


def _shift(x: MCTensor, dim: int) -> torch.Tensor:
    """A plain, detached per-slice maximum; subtracting it keeps exp from overflowing.

    Softmax is invariant under the shift, so an approximate maximum is as good as an
    exact one; the subtraction itself is an exact-input MC operation.
    """
    return cast(MCTensor, x.detach()).approx().amax(dim=dim, keepdim=True)


def _check_dim(name: str, dim: object, ndim: int) -> int:
    d: int = check_int(name, "dim", dim, minimum=None)
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"{name}: dim {d} out of range for a {ndim}-d input")
    return d


def softmax(input: torch.Tensor, dim: int) -> MCTensor:
    """``exp(x) / sum(exp(x), dim)`` in MC arithmetic (shifted by the slice maximum).

    Example:
        >>> softmax(hm.mc([[0.0, 1000.0, 1000.0]], nc=2, dtype=torch.float64), dim=1).approx()
        tensor([[0.0000, 0.5000, 0.5000]], dtype=torch.float64)
    """
    x = _mc_operand(input)
    dim = _check_dim("softmax", dim, x.dim())
    e = torch.exp(x - _shift(x, dim))
    return cast(MCTensor, e / e.sum(dim=dim, keepdim=True))  # MC in, MC out


def log_softmax(input: torch.Tensor, dim: int) -> MCTensor:
    """``x - log(sum(exp(x), dim))`` in MC arithmetic (shifted by the slice maximum).

    Example:
        >>> log_softmax(hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64), dim=1).approx()  # log(1/2)
        tensor([[-0.6931, -0.6931]], dtype=torch.float64)
    """
    x = _mc_operand(input)
    dim = _check_dim("log_softmax", dim, x.dim())
    z = x - _shift(x, dim)
    return cast(MCTensor, z - torch.log(torch.exp(z).sum(dim=dim, keepdim=True)))  # MC in, MC out


# ----------------------------------------------------------------------------- losses


def _reduce(loss: torch.Tensor, reduction: str) -> MCTensor:
    """``loss`` (an MCTensor) reduced; the cast: torch's stubs type MCTensor ops as returning Tensor."""
    if reduction == "mean":
        return cast(MCTensor, loss.mean())
    if reduction == "sum":
        return cast(MCTensor, loss.sum())
    return cast(MCTensor, loss)


def _check_loss_args(name: str, input: torch.Tensor, target: torch.Tensor, reduction: str) -> None:
    check_choice(name, "reduction", reduction, _REDUCTIONS)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{name}: target shape {tuple(target.shape)} differs from input shape {tuple(input.shape)}")
    if target.is_floating_point() and target.dtype != input.dtype:
        raise TypeError(
            f"{name}: target dtype {target.dtype} differs from input dtype {input.dtype}; "
            f"convert the target with .to({input.dtype}) or build it with hypermc.mc(..., dtype={input.dtype})"
        )


def mse_loss(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> MCTensor:
    """Mean (or sum) of ``(input - target)**2`` in MC arithmetic.

    ``target`` may be a plain tensor or an MCTensor (store a high-precision target as
    an MCTensor to keep its precision).

    Raises:
        ValueError: shapes differ, or an unknown ``reduction``.
        TypeError: dtypes differ.

    Example:
        >>> mse_loss(hm.mc([1.0, 2.0], nc=2, dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)).approx()
        tensor(0.5000, dtype=torch.float64)
    """
    _check_loss_args("mse_loss", input, target, reduction)
    d = _mc_operand(input) - target
    return _reduce(d * d, reduction)


def binary_cross_entropy_with_logits(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> MCTensor:
    """``-[y log sigmoid(z) + (1 - y) log(1 - sigmoid(z))]`` from logits ``z``, in MC arithmetic.

    Computed as ``max(z, 0) - z y + log1p(exp(-|z|))`` (no overflow, no cancellation of
    ``1 - sigmoid``).

    Raises:
        ValueError: shapes differ, or an unknown ``reduction``.
        TypeError: dtypes differ.

    Example:
        >>> z = hm.mc([0.0, 40.0], nc=2, dtype=torch.float64)
        >>> binary_cross_entropy_with_logits(z, torch.tensor([1.0, 0.0], dtype=torch.float64), reduction="none").approx()
        tensor([ 0.6931, 40.0000], dtype=torch.float64)
    """
    _check_loss_args("binary_cross_entropy_with_logits", input, target, reduction)
    z = _mc_operand(input)
    loss = torch.relu(z) - z * target + torch.log1p(torch.exp(-torch.abs(z)))
    return _reduce(loss, reduction)


def binary_cross_entropy(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> MCTensor:
    """``-[y log p + (1 - y) log(1 - p)]`` from probabilities ``p``, logs clamped at -100 like torch.

    Prefer :func:`binary_cross_entropy_with_logits`: ``1 - p`` loses the precision of
    ``p`` near 1.

    Raises:
        ValueError: shapes differ, or an unknown ``reduction``.
        TypeError: dtypes differ.

    Example:
        >>> p = hm.mc([0.5, 1.0], nc=2, dtype=torch.float64)
        >>> binary_cross_entropy(p, torch.tensor([1.0, 0.0], dtype=torch.float64), reduction="none").approx()  # log 0 -> -100
        tensor([  0.6931, 100.0000], dtype=torch.float64)
    """
    _check_loss_args("binary_cross_entropy", input, target, reduction)
    p = _mc_operand(input)
    log_p = torch.clamp(torch.log(p), min=_BCE_LOG_FLOOR)
    log_q = torch.clamp(torch.log(1.0 - p), min=_BCE_LOG_FLOOR)
    loss = -(log_p * target + log_q * (1.0 - target))
    return _reduce(loss, reduction)


def cross_entropy(input: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> MCTensor:
    """Negative log-likelihood of class indices under ``softmax(input, dim=1)``.

    Args:
        input: logits ``(N, C)``.
        target: int64 class indices ``(N,)`` in ``[0, C)``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        ValueError: bad shapes or an unknown ``reduction``.
        TypeError: ``target`` is not an integer tensor.

    Example:
        >>> logits = hm.mc([[0.0, 0.0], [0.0, 100.0]], nc=2, dtype=torch.float64)
        >>> cross_entropy(logits, torch.tensor([0, 1]), reduction="none").approx()  # log 2, log(1 + e^-100)
        tensor([6.9315e-01, 3.7201e-44], dtype=torch.float64)
    """
    check_choice("cross_entropy", "reduction", reduction, _REDUCTIONS)
    if target.is_floating_point():
        raise TypeError(f"cross_entropy: target must hold class indices (int64); got dtype {target.dtype}")
    if input.dim() != 2 or target.dim() != 1 or target.shape[0] != input.shape[0]:
        raise ValueError(f"cross_entropy: expected input (N, C) and target (N,); got {tuple(input.shape)} and {tuple(target.shape)}")
    logp = log_softmax(input, dim=1)
    picked = logp.gather(1, target.unsqueeze(1)).squeeze(1)
    return _reduce(-picked, reduction)
