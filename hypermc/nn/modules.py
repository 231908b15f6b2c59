"""MC modules: drop-in counterparts of ``torch.nn`` layers with MCTensor parameters.

Parameters are ``nn.Parameter(MCTensor)``: autograd gives them MCTensor gradients, and
:class:`hypermc.optim.MCSGD` / :class:`~hypermc.optim.MCAdam` update them in MC
arithmetic. Initial values are drawn exactly as the ``torch.nn`` layer draws them (same
generator calls, same component dtype) and stored exactly, so with the same seed an MC
layer starts from the same numbers as its torch counterpart.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
from torch import nn

from .._checks import check_choice, check_dtype, check_int, check_nc
from ..mcf import MCTensor, mc
from . import functional as MF

__all__ = ["MCLinear", "MCEmbedding", "MCSequential", "MCReLU", "MCGELU", "MCSoftmax", "MCToTensor", "to_mc"]


def _check_config(name: str, nc: object, dtype: torch.dtype | None) -> tuple[int, torch.dtype]:
    """Validate ``nc`` and ``dtype`` once, at construction; return them (dtype defaulted)."""
    return check_nc(name, nc), check_dtype(name, torch.get_default_dtype() if dtype is None else dtype)


def _mc_parameter(shape: tuple[int, ...], nc: int, dtype: torch.dtype, device: torch.device | str | None) -> nn.Parameter:
    return nn.Parameter(mc(torch.zeros(shape, dtype=dtype, device=device), nc=nc))


class MCLinear(nn.Module):
    r"""Affine map ``y = x W^T + b`` with MC weight and bias (:class:`torch.nn.Linear`).

    The product runs on the Ozaki-sliced MC matmul, rounded once to ``nc`` components.
    With ``nc = 1`` the forward equals ``nn.Linear``'s up to the native matmul's own
    rounding (the MC product is the more accurate one).

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: learn an additive bias (default ``True``).
        nc: components per parameter entry (``>= 1``).
        dtype: component dtype (default ``torch.get_default_dtype()``); inputs must have it.
        device: device of the parameters.

    Attributes:
        weight: MC parameter ``(out_features, in_features)``, initialised like
            ``nn.Linear``: :math:`\mathcal{U}(-k, k)`, :math:`k = 1/\sqrt{\text{in\_features}}`.
        bias: MC parameter ``(out_features,)``, same distribution, or ``None``.

    Shape:
        - Input: :math:`(*, H_{in})`, :math:`*` any number of dimensions (including none),
          :math:`H_{in} = \text{in\_features}`; a Tensor or an MCTensor of ``dtype``.
        - Output: :math:`(*, H_{out})`, :math:`H_{out} = \text{out\_features}`; an MCTensor
          with ``max(nc, input nc)`` components.

    Example:
        >>> layer = MCLinear(20, 30, nc=2, dtype=torch.float16)
        >>> out = layer(torch.randn(128, 20, dtype=torch.float16))
        >>> out.shape, out.nc
        (torch.Size([128, 30]), 2)
    """

    __constants__ = ["in_features", "out_features", "nc"]

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        nc: int = 2,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.in_features = check_int("MCLinear", "in_features", in_features, minimum=0)
        self.out_features = check_int("MCLinear", "out_features", out_features, minimum=0)
        nc, dtype = _check_config("MCLinear", nc, dtype)
        self.nc = nc
        self.weight = _mc_parameter((out_features, in_features), nc, dtype, device)
        if bias:
            self.bias = _mc_parameter((out_features,), nc, dtype, device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw weight and bias exactly as ``nn.Linear.reset_parameters`` does, store them exactly."""
        w = torch.empty(self.weight.shape, dtype=self.weight.dtype, device=self.weight.device)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        with torch.no_grad():
            self.weight.copy_(w)
            if self.bias is not None:
                fan_in, _ = nn.init._calculate_fan_in_and_fan_out(w)
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                b = torch.empty(self.bias.shape, dtype=self.bias.dtype, device=self.bias.device)
                nn.init.uniform_(b, -bound, bound)
                self.bias.copy_(b)

    def forward(self, input: torch.Tensor) -> MCTensor:
        return cast(MCTensor, MF.linear(input, self.weight, self.bias))  # MC weight: MC output

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, nc={self.nc}, dtype={self.weight.dtype}"
        )


class MCEmbedding(nn.Module):
    r"""Lookup table of MC vectors (:class:`torch.nn.Embedding`).

    Args:
        num_embeddings: number of rows.
        embedding_dim: size of each row.
        padding_idx: a row that is initialised to zero and gets no gradient (negative
            values count from the end), or ``None``.
        max_norm: not supported (must be ``None``).
        norm_type: ignored without ``max_norm`` (kept for the signature).
        scale_grad_by_freq: divide each row's gradient by its frequency in the batch.
        sparse: not supported (must be ``False``).
        _weight: initial values ``(num_embeddings, embedding_dim)``: a Tensor (stored
            exactly when it fits ``nc`` components) or an MCTensor.
        _freeze: make the weight not require grad.
        nc: components per entry (``>= 1``).
        dtype: component dtype (default: ``_weight``'s dtype if given, else
            ``torch.get_default_dtype()``).
        device: device of the weight.

    Attributes:
        weight: MC parameter ``(num_embeddings, embedding_dim)``, initialised from
            :math:`\mathcal{N}(0, 1)` like ``nn.Embedding``.

    Shape:
        - Input: :math:`(*)`, an integer tensor of indices of any shape.
        - Output: :math:`(*, H)`, :math:`H = \text{embedding\_dim}`; an MCTensor.

    Example:
        >>> emb = MCEmbedding(10, 3, nc=2, dtype=torch.float64)
        >>> emb(torch.tensor([[1, 2], [4, 9]])).shape
        torch.Size([2, 2, 3])
    """

    __constants__ = ["num_embeddings", "embedding_dim", "padding_idx", "nc"]

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: torch.Tensor | None = None,
        _freeze: bool = False,
        *,
        nc: int = 2,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = check_int("MCEmbedding", "num_embeddings", num_embeddings, minimum=0)
        self.embedding_dim = check_int("MCEmbedding", "embedding_dim", embedding_dim, minimum=0)
        if dtype is None and _weight is not None and _weight.is_floating_point():
            dtype = _weight.dtype
        nc, dtype = _check_config("MCEmbedding", nc, dtype)
        if max_norm is not None:
            raise ValueError("MCEmbedding: max_norm is not supported; renormalise the rows explicitly if needed")
        if sparse:
            raise ValueError("MCEmbedding: sparse gradients are not supported; use sparse=False")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"MCEmbedding: padding_idx must be within [-{num_embeddings}, {num_embeddings}); got {padding_idx}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        self.nc = nc
        if _weight is None:
            self.weight = _mc_parameter((num_embeddings, embedding_dim), nc, dtype, device)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"MCEmbedding: _weight has shape {tuple(_weight.shape)}, expected ({num_embeddings}, {embedding_dim})")
            self.weight = nn.Parameter(mc(_weight.detach(), nc=nc, dtype=dtype, device=device))
        self.weight.requires_grad_(not _freeze)

    def reset_parameters(self) -> None:
        """Draw the weight from N(0, 1) as ``nn.Embedding`` does; zero the padding row."""
        w = torch.empty(self.weight.shape, dtype=self.weight.dtype, device=self.weight.device)
        nn.init.normal_(w)
        if self.padding_idx is not None:
            w[self.padding_idx].zero_()
        with torch.no_grad():
            self.weight.copy_(w)

    def forward(self, input: torch.Tensor) -> MCTensor:
        return cast(MCTensor, MF.embedding(input, self.weight, self.padding_idx, self.scale_grad_by_freq))  # MC weight: MC rows

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        return s + f", nc={self.nc}, dtype={self.weight.dtype}"


class MCSequential(nn.Sequential):
    """:class:`torch.nn.Sequential` for MC modules, with a dtype check at the entrance.

    A floating input must have the component dtype of the container's MC parameters
    (``TypeError`` naming both otherwise); integer inputs (indices for an
    :class:`MCEmbedding`) pass through. Modules are called in order, as in
    ``nn.Sequential``.

    Shape:
        - Input: whatever the first module accepts.
        - Output: whatever the last module returns (an MCTensor for MC layers).

    Example:
        >>> net = MCSequential(MCLinear(4, 8, nc=2, dtype=torch.float32), MCReLU(),
        ...                    MCLinear(8, 1, nc=2, dtype=torch.float32))
        >>> net(torch.randn(5, 4)).shape
        torch.Size([5, 1])
    """

    @property
    def dtype(self) -> torch.dtype | None:
        """Component dtype of the first MC parameter (``None`` without MC parameters)."""
        for p in self.parameters():
            if isinstance(p, MCTensor):
                return p.dtype
        return None

    @property
    def nc(self) -> int | None:
        """Largest ``nc`` among the MC parameters (``None`` without MC parameters)."""
        ncs = [p.nc for p in self.parameters() if isinstance(p, MCTensor)]
        return max(ncs) if ncs else None

    def forward(self, input: Any) -> Any:
        dtype = self.dtype
        if isinstance(input, torch.Tensor) and input.is_floating_point() and dtype is not None and input.dtype != dtype:
            raise TypeError(
                f"MCSequential: input has dtype {input.dtype} but the parameters have component dtype "
                f"{dtype}; convert the input with .to({dtype})"
            )
        return super().forward(input)


class MCReLU(nn.Module):
    """``max(x, 0)`` elementwise (:class:`torch.nn.ReLU`); a plain input is an exact nc=1 MCTensor.

    Shape:
        - Input: :math:`(*)`; Output: :math:`(*)`, an MCTensor.

    Example:
        >>> x = hm.mc([-1.0, 1.0], nc=2, dtype=torch.float64) / 3
        >>> y = MCReLU()(x)
        >>> y.nc, y.approx(), torch.equal(y.components[1], x.components[1])  # 1/3 kept with both components
        (2, tensor([0.0000, 0.3333], dtype=torch.float64), True)
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: torch.Tensor) -> MCTensor:
        return MF.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class MCGELU(nn.Module):
    """GELU (:class:`torch.nn.GELU`) in MC arithmetic; see :func:`hypermc.nn.functional.gelu`.

    Args:
        approximate: ``"none"`` (erf, evaluated in float64: float16 ``nc <= 4``,
            float32 ``nc <= 2``) or ``"tanh"`` (any ``nc``).

    Shape:
        - Input: :math:`(*)`; Output: :math:`(*)`, an MCTensor.

    Example:
        >>> t = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
        >>> y = MCGELU(approximate="tanh")(hm.mc(t, nc=2))
        >>> [round(v, 6) for v in y.approx().tolist()]
        [-0.158808, 0.0, 0.841192]
        >>> bool(torch.allclose(y.approx(), torch.nn.functional.gelu(t, approximate="tanh")))
        True
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = check_choice("MCGELU", "approximate", approximate, ("none", "tanh"))

    def forward(self, input: torch.Tensor) -> MCTensor:
        return MF.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class MCSoftmax(nn.Module):
    """Softmax along ``dim`` (:class:`torch.nn.Softmax`) in MC arithmetic.

    Args:
        dim: the dimension that sums to 1 (required: torch's implicit choice is deprecated).

    Shape:
        - Input: :math:`(*)`; Output: :math:`(*)`, an MCTensor, same shape.

    Example:
        >>> s = MCSoftmax(dim=-1)(hm.mc([[1.0, 2.0, 3.0]], nc=2, dtype=torch.float64))
        >>> [round(v, 6) for v in s.approx()[0].tolist()]
        [0.090031, 0.244728, 0.665241]
        >>> abs(float(s.sum() - 1)) < 1e-30  # float64's softmax sums to 1 - 2.2e-16 here
        True
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = check_int("MCSoftmax", "dim", dim, minimum=None)

    def forward(self, input: torch.Tensor) -> MCTensor:
        return MF.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class MCToTensor(nn.Module):
    """The nearest plain Tensor of an MC activation, differentiably (:func:`~hypermc.nn.functional.to_tensor`).

    Put between MC layers to run the activations in plain precision while weights,
    gradients and updates stay MC (the cheaper mode of the paper's MLP).

    Shape:
        - Input: :math:`(*)`; Output: :math:`(*)`, a plain Tensor of the component dtype.

    Example:
        >>> net = MCSequential(MCLinear(3, 2, nc=2, dtype=torch.float64), MCToTensor(), torch.nn.Tanh())
        >>> out = net(torch.randn(4, 3, dtype=torch.float64))
        >>> type(out) is torch.Tensor, out.shape
        (True, torch.Size([4, 2]))
        >>> out.sum().backward()  # gradients reach the MC weight, as MCTensors
        >>> type(net[0].weight.grad).__name__
        'MCTensor'
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return MF.to_tensor(input)


def to_mc(module: nn.Module, nc: int = 2, dtype: torch.dtype | None = None) -> nn.Module:
    """Make every floating-point parameter of ``module`` an MC parameter, in place.

    Each parameter (of ``module`` and its submodules; a shared one once) is replaced by
    ``nn.Parameter(hm.mc(p, nc=nc, dtype=dtype))``: the same values, exactly when they fit
    (float32 or float64 into float64 components always do). Buffers stay plain tensors.
    The module then runs in MC arithmetic wherever its forward uses aten ops that MCTensor
    implements (e.g. PyTorch Geometric's GCNConv, SAGEConv, GATConv, GINConv), and its
    gradients are MCTensors. Create optimizers after the call: they hold the parameters.

    Args:
        module: any ``torch.nn.Module``.
        nc: number of components (>= 1).
        dtype: component dtype; default: each parameter's own dtype (call
            ``module.double()`` first, or pass ``torch.float64``, for float64 MC inputs).

    Returns:
        ``module`` itself.

    Raises:
        TypeError: ``module`` is not an ``nn.Module``, or ``nc`` / ``dtype`` has a wrong type.
        ValueError: ``nc < 1``.

    Example:
        >>> lin = to_mc(torch.nn.Linear(3, 2).double(), nc=2)
        >>> type(lin.weight).__name__, lin.weight.nc, lin.weight.dtype
        ('MCTensor', 2, torch.float64)
        >>> lin(hm.mc(torch.ones(1, 3, dtype=torch.float64), nc=2)).sum().backward()
        >>> type(lin.bias.grad).__name__
        'MCTensor'
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"to_mc: module must be a torch.nn.Module; got {type(module).__name__}")
    nc = check_nc("to_mc", nc)
    if dtype is not None:
        dtype = check_dtype("to_mc", dtype)
    done: dict[int, nn.Parameter] = {}
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is None or not p.is_floating_point():
                continue
            if id(p) not in done:
                done[id(p)] = nn.Parameter(mc(p.detach(), nc=nc, dtype=dtype or p.dtype), requires_grad=p.requires_grad)
            sub._parameters[name] = done[id(p)]
    return module
