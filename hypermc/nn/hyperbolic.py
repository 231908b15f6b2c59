"""Hyperbolic graph layers (HGCN-style) on any :mod:`hypermc.manifolds` model.

The layers use only the public manifold API — ``origin``, ``expmap``, ``expmap0``,
``logmap0``, ``proju`` and ``transp`` — so the same code runs on
:class:`~hypermc.manifolds.PoincareBall`, :class:`~hypermc.manifolds.Lorentz` (and
:class:`~hypermc.manifolds.Euclidean`, where they reduce to a plain GCN), in MC
arithmetic when the points or the parameters are :class:`~hypermc.MCTensor` s and in
plain arithmetic otherwise. Nothing branches on the model.

Building blocks (``o`` the manifold's origin; ``n`` the point dimension, which for the
Lorentz model includes the time coordinate)::

    proju0(u)          = proju(o, u)                         tangent vector at o
    mobius_matvec(W, x) = expmap0(proju0(logmap0(x) W^T))      (Möbius matrix-vector product)
    mobius_add(x, y)    = expmap(x, transp(o, x, logmap0(y)))   (Möbius addition)
    hyp_linear(x)       = expmap(h, transp(o, h, proju0(b))),   h = mobius_matvec(W, x)
    hyp_agg(x, A)       = expmap0(A logmap0(x))                 (mean: rows of A divided by their sums)
    hyp_act(x)          = expmap0_out(proju0_out(act(logmap0(x))))

On the ball these are the gyrovector operations of Ganea et al. (2018): ``mobius_matvec``
and ``mobius_add`` equal :meth:`PoincareBall.mobius_matvec` / :meth:`PoincareBall.mobius_add`
(tested), and the bias step is ``h ⊕ expmap0(b)``. On the hyperboloid they are HGCN's
(Chami et al., 2019) definitions. Unlike HGCN's code no ``proj`` is applied after the
maps and nothing is clamped: the manifold methods already return points on the manifold
(the projection rule of :mod:`hypermc.manifolds.base`: the ball pulls a point back only
beyond its MC range, see :data:`hypermc.manifolds.ball.EDGE_MARGIN_BITS`), and inf / NaN
propagate.

Parameters (weights and bias, Euclidean) are plain ``nn.Parameter`` s with ``nc=None``
or MC parameters (``nn.Parameter(MCTensor)``) with ``nc=k``; train them with
``torch.optim`` / :class:`hypermc.optim.MCAdam` or :class:`hypermc.optim.RiemannianAdam`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .._checks import check_bool, check_callable, check_choice, check_dtype, check_instance, check_int, check_nc, check_real
from ..manifolds.base import Manifold
from ..mcf import MCTensor, mc

__all__ = [
    "origin_like",
    "proju0",
    "transp0",
    "mobius_matvec",
    "mobius_add",
    "hyp_linear",
    "hyp_agg",
    "hyp_act",
    "HypLinear",
    "HypAgg",
    "HypAct",
    "HypGraphConv",
]

_AGGREGATIONS = ("mean", "sum")


# --------------------------------------------------------------------------- checks


def _check_manifold(where: str, manifold: object, arg: str = "manifold") -> Manifold:
    return check_instance(where, arg, manifold, Manifold, "a hypermc manifold instance (e.g. PoincareBall() or Lorentz())")


def _check_features(where: str, arg: str, value: object, manifold: Manifold) -> int:
    try:
        return check_int(where, arg, value, minimum=manifold.min_dim)
    except ValueError as exc:
        raise ValueError(f"{exc} (the smallest point dimension of {manifold!r}; for the Lorentz model count the time coordinate)") from None


def _check_adj(name: str, adj: object, x: torch.Tensor) -> None:
    if not isinstance(adj, torch.Tensor) or isinstance(adj, MCTensor):
        raise TypeError(f"{name}: adj must be a plain (dense or sparse COO) Tensor; got {type(adj).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name}: x must be a matrix of points (N, n); got shape {tuple(x.shape)}")
    n = x.shape[0]
    if adj.dim() != 2 or tuple(adj.shape) != (n, n):
        raise ValueError(f"{name}: adj must have shape (N, N) = ({n}, {n}) for x of shape {tuple(x.shape)}; got {tuple(adj.shape)}")
    if adj.layout not in (torch.strided, torch.sparse_coo):
        raise TypeError(f"{name}: adj must be dense or sparse COO; got layout {adj.layout}")
    if adj.dtype != x.dtype:
        raise TypeError(
            f"{name}: adj has dtype {adj.dtype} but x has (component) dtype {x.dtype}; convert adj "
            f"with .to({x.dtype}) (no implicit precision change)"
        )


# ----------------------------------------------------------------------- functional


def origin_like(manifold: Manifold, x: torch.Tensor) -> torch.Tensor:
    """The manifold's origin with the dtype, device, ``nc`` and point dimension of ``x``,
    shaped ``(1, ..., 1, n)`` so it broadcasts against ``x``.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> origin_like(Lorentz(), torch.zeros(5, 3, dtype=torch.float64))
        tensor([[1., 0., 0.]], dtype=torch.float64)
        >>> o = origin_like(Lorentz(), hm.mc(torch.zeros(2, 5, 3), nc=2))
        >>> o.shape, o.nc
        (torch.Size([1, 1, 3]), 2)
    """
    size = (1,) * (x.dim() - 1) + (x.shape[-1],)
    nc = x.nc if isinstance(x, MCTensor) else None
    return manifold.origin(*size, nc=nc, dtype=x.dtype, device=x.device)


def proju0(manifold: Manifold, u: torch.Tensor) -> torch.Tensor:
    """``proju(o, u)``: ``u`` made a tangent vector at the origin ``o`` (HGCN's ``proj_tan0``).

    Ball and Euclidean: ``u`` itself. Lorentz: the time coordinate is removed
    (``u + c <o, u>_L o``; in MC arithmetic it becomes ``~u^nc u_0``, not exactly 0, and
    ``expmap0`` ignores it).

    Example:
        >>> from hypermc.manifolds import Lorentz, PoincareBall
        >>> u = torch.tensor([[0.7, 1.0, 2.0]], dtype=torch.float64)
        >>> proju0(Lorentz(), u), torch.equal(proju0(PoincareBall(), u), u)
        (tensor([[0., 1., 2.]], dtype=torch.float64), True)
    """
    return manifold.proju(origin_like(manifold, u), u)


def transp0(manifold: Manifold, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Parallel transport of ``v`` (tangent at the origin) to ``y``: ``transp(o, y, v)``.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> y = M.expmap0(torch.tensor([[0.3, -0.2]], dtype=torch.float64))
        >>> v = torch.tensor([[0.1, 0.0]], dtype=torch.float64)
        >>> pv = transp0(M, y, v)  # keeps the Riemannian norm: 2 |v| at the origin
        >>> round(float(M.norm(y, pv)), 9)
        0.2
    """
    return manifold.transp(origin_like(manifold, y), y, v)


def mobius_matvec(manifold: Manifold, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    r"""Möbius matrix-vector product ``W ⊗ x = expmap0(proju0(logmap0(x) W^T))``.

    On the ball this equals :meth:`~hypermc.manifolds.PoincareBall.mobius_matvec`
    (``tanh(|Wx|/|x| atanh(sqrt c |x|)) Wx / (sqrt c |Wx|)``); on the hyperboloid it is
    HGCN's definition. ``W`` acts on the whole ambient tangent vector (for the Lorentz
    model the time column meets a zero coordinate and the time row is projected away).

    Args:
        manifold: a :class:`~hypermc.manifolds.base.Manifold`.
        weight: ``(out, n)`` Tensor or MCTensor of ``x``'s (component) dtype.
        x: points ``(*, n)``.

    Returns:
        points ``(*, out)``.

    Raises:
        TypeError: ``weight`` is not a matrix.
        ValueError: ``x``'s point dimension is not ``weight``'s number of columns.

    Example:
        >>> from hypermc.manifolds import Lorentz, PoincareBall
        >>> M = PoincareBall()
        >>> x = M.random(4, 3, nc=2, dtype=torch.float64)
        >>> w = torch.randn(2, 3, dtype=torch.float64)
        >>> y = mobius_matvec(M, w, x)
        >>> y.shape, bool(torch.allclose(y.approx(), M.mobius_matvec(w, x).approx()))
        (torch.Size([4, 2]), True)
        >>> L = Lorentz()
        >>> L.check_point(mobius_matvec(L, w, L.random(4, 3, nc=2, dtype=torch.float64)))
        (True, None)
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise TypeError(
            f"mobius_matvec: weight must be a matrix (out, n) Tensor or MCTensor; got "
            f"{tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__}"
        )
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"mobius_matvec: x must be points (*, {weight.shape[-1]}) to match weight of shape "
            f"{tuple(weight.shape)}; got {tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}"
        )
    return manifold.expmap0(proju0(manifold, torch.matmul(manifold.logmap0(x), weight.transpose(-1, -2))))


def mobius_add(manifold: Manifold, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Möbius addition ``x ⊕ y = expmap(x, transp(o, x, logmap0(y)))``.

    On the ball this is the gyrovector addition (equal to
    :meth:`~hypermc.manifolds.PoincareBall.mobius_add`; laws ``0 ⊕ y = y``,
    ``x ⊕ 0 = x``); on the hyperboloid it is HGCN's ``mobius_add``.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.1, -0.6], dtype=torch.float64)
        >>> bool(torch.allclose(mobius_add(M, x, y), M.mobius_add(x, y))), mobius_add(M, x, x)
        (True, tensor([0.8000, 0.0000], dtype=torch.float64))
    """
    return manifold.expmap(x, transp0(manifold, x, manifold.logmap0(y)))


def hyp_linear(manifold: Manifold, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    r"""HGCN's hyperbolic linear map: ``h = W ⊗ x``, then the bias ``b`` (a tangent vector
    at the origin) is added as ``expmap(h, transp(o, h, proju0(b)))`` (on the ball:
    ``h ⊕ expmap0(b)``, without rounding ``b`` onto the manifold and back).

    Args:
        manifold: a :class:`~hypermc.manifolds.base.Manifold`.
        x: points ``(*, in)``.
        weight: ``(out, in)``.
        bias: ``(out,)`` or ``None``.

    Returns:
        points ``(*, out)``; an MCTensor if any operand is one.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> M = Lorentz()
        >>> x = M.random(5, 4, nc=2, dtype=torch.float64)
        >>> w, b = torch.randn(3, 4, dtype=torch.float64), torch.tensor([0.0, 0.1, -0.2], dtype=torch.float64)
        >>> y = hyp_linear(M, x, w, b)
        >>> type(y).__name__, y.shape, M.check_point(y)
        ('MCTensor', torch.Size([5, 3]), (True, None))
    """
    h = mobius_matvec(manifold, weight, x)
    if bias is None:
        return h
    b = proju0(manifold, bias.expand_as(h) if bias.dim() == 1 else bias)
    return manifold.expmap(h, transp0(manifold, h, b))


def _aggregate(u: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    """``adj @ u`` for a dense or sparse ``adj`` and a Tensor or MCTensor ``u`` ``(N, n)``."""
    if not adj.is_sparse:
        return torch.matmul(adj, u)
    if not isinstance(u, MCTensor):
        return torch.sparse.mm(adj, u)
    # MCTensor has no sparse kernels: gather the neighbours, scale, and sum them into
    # their rows with MC additions (index_add).
    adj = adj.coalesce()
    row, col = adj.indices()
    contrib = u.index_select(0, col) * adj.values().unsqueeze(-1)
    return u.new_zeros(u.shape).index_add(0, row, contrib)


def _row_sums(adj: torch.Tensor) -> torch.Tensor:
    if adj.is_sparse:
        return torch.sparse.sum(adj, dim=1).to_dense().reshape(adj.shape[0])
    return adj.sum(dim=1)


def hyp_agg(manifold: Manifold, x: torch.Tensor, adj: torch.Tensor, aggr: str = "mean") -> torch.Tensor:
    r"""Neighbourhood aggregation in the tangent space at the origin:
    ``expmap0(A logmap0(x))``.

    ``aggr="sum"`` uses ``A`` as given (HGCN passes a row-normalised ``A`` and sums);
    ``aggr="mean"`` divides each row of ``A logmap0(x)`` by the row sum of ``A`` (so an
    unnormalised 0/1 adjacency with self-loops gives the mean over the neighbourhood;
    for MC inputs the division is done in MC, the weights are not rounded to ``1/deg``).

    Args:
        manifold: a :class:`~hypermc.manifolds.base.Manifold`.
        x: points ``(N, n)``.
        adj: plain ``(N, N)`` dense or sparse COO Tensor of ``x``'s (component) dtype.
        aggr: ``"mean"`` or ``"sum"``.

    Raises:
        TypeError / ValueError: bad ``adj`` (type, layout, dtype, shape) or ``aggr``;
            ``aggr="mean"`` with a row of ``adj`` summing to 0 (that node's mean is
            undefined: add self-loops).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> x = M.random(3, 2, nc=2, dtype=torch.float64)
        >>> adj = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> y = hyp_agg(M, x, adj)  # nodes 0 and 1 average to one point; node 2 stays
        >>> round(float(M.dist(y[0], y[1])), 9), round(float(M.dist(y[2], x[2])), 9)
        (0.0, 0.0)
        >>> hyp_agg(M, x, torch.zeros(3, 3, dtype=torch.float64))
        Traceback (most recent call last):
            ...
        ValueError: hyp_agg: aggr='mean' but adj has 3 rows that sum to 0 (first: row 0); ...
    """
    check_choice("hyp_agg", "aggr", aggr, _AGGREGATIONS)
    _check_adj("hyp_agg", adj, x)
    support = _aggregate(manifold.logmap0(x), adj)
    if aggr == "mean":
        deg = _row_sums(adj)
        empty = deg == 0
        if bool(empty.any()):
            raise ValueError(
                f"hyp_agg: aggr='mean' but adj has {int(empty.sum())} rows that sum to 0 (first: row "
                f"{int(empty.nonzero()[0])}); the mean over an empty neighbourhood is undefined: add "
                "self-loops (adj + I) or use aggr='sum'"
            )
        support = support / deg.unsqueeze(-1)
    return manifold.expmap0(support)


def hyp_act(manifold: Manifold, x: torch.Tensor, act: Callable, manifold_out: Manifold | None = None) -> torch.Tensor:
    r"""Activation through the tangent space at the origin:
    ``expmap0_out(proju0_out(act(logmap0(x))))``; ``manifold_out`` (default
    ``manifold``) may have another curvature (HGCN's ``c_in`` / ``c_out``).

    ``act`` must accept the tangent vectors (an MCTensor for MC inputs: ``torch.relu``,
    ``torch.tanh``, :func:`hypermc.nn.functional.gelu` work).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M, M4 = PoincareBall(), PoincareBall(curvature=-4.0)
        >>> x = M.expmap0(torch.tensor([[0.5, -0.5]], dtype=torch.float64))
        >>> y = hyp_act(M, x, torch.relu, M4)  # relu((0.5, -0.5)) = (0.5, 0); tanh(2 * 0.5) / 2
        >>> y, M4.check_point(y)
        (tensor([[0.3808, 0.0000]], dtype=torch.float64), (True, None))
    """
    out = manifold if manifold_out is None else manifold_out
    return out.expmap0(proju0(out, act(manifold.logmap0(x))))


def _dropout_weight(weight: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Weight dropout (HGCN's): ``weight * mask / (1 - p)`` with a plain Bernoulli mask (so
    it works on MC weights too); the identity when not training or ``p = 0``."""
    if not training or p == 0.0:
        return weight
    keep = torch.full(weight.shape, 1.0 - p, dtype=weight.dtype, device=weight.device)
    return weight * (torch.bernoulli(keep) / (1.0 - p))


# -------------------------------------------------------------------------- modules


def _parameter(shape: tuple[int, ...], nc: int | None, dtype: torch.dtype, device: torch.device | str | None) -> nn.Parameter:
    zeros = torch.zeros(shape, dtype=dtype, device=device)
    return nn.Parameter(zeros if nc is None else mc(zeros, nc=nc))


class HypLinear(nn.Module):
    r"""Hyperbolic linear layer (HGCN's ``HypLinear``): Möbius matvec, then a bias added
    through the exponential map; see :func:`hyp_linear`.

    Args:
        manifold: the model the points live on (e.g. ``PoincareBall()``, ``Lorentz()``).
        in_features: point dimension of the input (Lorentz: including the time coordinate).
        out_features: point dimension of the output.
        bias: learn a bias (a tangent vector at the origin, default ``True``).
        dropout: probability of dropping a weight entry in training (HGCN's weight dropout).
        nc: ``None`` for plain ``nn.Parameter`` weights, or the number of components of
            MC parameters.
        dtype: (component) dtype of the parameters (default ``torch.get_default_dtype()``).
        device: device of the parameters.

    Attributes:
        weight: ``(out_features, in_features)``, Xavier-uniform with gain ``sqrt(2)`` (as
            HGCN), drawn in ``dtype`` and stored exactly.
        bias: ``(out_features,)``, zeros, or ``None``.

    Shape:
        - Input: ``(*, in_features)`` points of ``manifold`` (Tensor or MCTensor).
        - Output: ``(*, out_features)`` points; an MCTensor if the input or the
          parameters are MC.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> layer = HypLinear(M, 4, 3, nc=2, dtype=torch.float64)
        >>> x = M.random(5, 4, nc=2, dtype=torch.float64)
        >>> M.check_point(layer(x))
        (True, None)
    """

    def __init__(
        self,
        manifold: Manifold,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        dropout: float = 0.0,
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.manifold = _check_manifold("HypLinear", manifold)
        self.in_features = _check_features("HypLinear", "in_features", in_features, manifold)
        self.out_features = _check_features("HypLinear", "out_features", out_features, manifold)
        self.dropout = check_real("HypLinear", "dropout", dropout, minimum=0.0, maximum=1.0, open_max=True)
        self.nc = check_nc("HypLinear", nc, allow_none=True, what_none="plain parameters")
        check_bool("HypLinear", "bias", bias)
        dtype = torch.get_default_dtype() if dtype is None else check_dtype("HypLinear", dtype)
        self.weight = _parameter((out_features, in_features), self.nc, dtype, device)
        if bias:
            self.bias = _parameter((out_features,), self.nc, dtype, device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weight (gain ``sqrt 2``) and zero bias, as HGCN initialises them."""
        w = torch.empty(self.weight.shape, dtype=self.weight.dtype, device=self.weight.device)
        nn.init.xavier_uniform_(w, gain=math.sqrt(2))
        with torch.no_grad():
            self.weight.copy_(w)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return hyp_linear(self.manifold, x, _dropout_weight(self.weight, self.dropout, self.training), self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, dropout={self.dropout}, nc={self.nc}, dtype={self.weight.dtype}"
        )


class HypAgg(nn.Module):
    r"""Neighbourhood aggregation in the tangent space at the origin; see :func:`hyp_agg`.

    Args:
        manifold: the model of the points.
        aggr: ``"mean"`` (divide by the row sums of ``adj``) or ``"sum"`` (use ``adj``
            as given, e.g. HGCN's row-normalised adjacency).

    Shape:
        - Input: ``x`` ``(N, n)`` points and ``adj`` ``(N, N)`` plain dense or sparse COO
          Tensor of ``x``'s (component) dtype.
        - Output: ``(N, n)`` points.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> M = Lorentz()
        >>> agg = HypAgg(M, aggr="mean")
        >>> agg
        HypAgg(
          aggr='mean'
          (manifold): Lorentz(curvature=-1)
        )
        >>> x = M.random(4, 3, nc=2, dtype=torch.float64)
        >>> adj = (torch.eye(4, dtype=torch.float64) + torch.eye(4, dtype=torch.float64).roll(1, dims=1)).to_sparse()  # self + next
        >>> y = agg(x, adj)
        >>> y.shape, M.check_point(y)
        (torch.Size([4, 3]), (True, None))
    """

    def __init__(self, manifold: Manifold, aggr: str = "mean") -> None:
        super().__init__()
        self.manifold = _check_manifold("HypAgg", manifold)
        self.aggr = check_choice("HypAgg", "aggr", aggr, _AGGREGATIONS)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return hyp_agg(self.manifold, x, adj, self.aggr)

    def extra_repr(self) -> str:
        return f"aggr={self.aggr!r}"  # the manifold is listed as a submodule


class HypAct(nn.Module):
    r"""Activation applied in the tangent space at the origin; see :func:`hyp_act`.

    Args:
        manifold: the model of the input points.
        act: callable on tangent vectors (default ``torch.relu``).
        manifold_out: the model of the output (default ``manifold``), e.g. another
            curvature (HGCN's ``c_out``).

    Shape:
        - Input: ``(*, n)`` points; Output: ``(*, n)`` points of ``manifold_out``.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> act = HypAct(PoincareBall(), torch.tanh, PoincareBall(curvature=-2.0))
        >>> act
        HypAct(
          act=tanh
          (manifold): PoincareBall(curvature=-1)
          (manifold_out): PoincareBall(curvature=-2)
        )
        >>> y = act(PoincareBall().random(5, 2, nc=2, dtype=torch.float64))
        >>> y.shape, PoincareBall(curvature=-2.0).check_point(y)
        (torch.Size([5, 2]), (True, None))
    """

    def __init__(self, manifold: Manifold, act: Callable = torch.relu, manifold_out: Manifold | None = None) -> None:
        super().__init__()
        self.manifold = _check_manifold("HypAct", manifold)
        self.manifold_out = manifold if manifold_out is None else _check_manifold("HypAct", manifold_out, "manifold_out")
        self.act = check_callable("HypAct", "act", act, "torch.relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return hyp_act(self.manifold, x, self.act, self.manifold_out)

    def extra_repr(self) -> str:
        return f"act={getattr(self.act, '__name__', self.act)}"  # the manifolds are listed as submodules


class HypGraphConv(nn.Module):
    r"""HGCN's hyperbolic graph convolution: :class:`HypLinear`, :class:`HypAgg`,
    :class:`HypAct` in sequence.

    Args:
        manifold, in_features, out_features, bias, dropout, nc, dtype, device: as for
            :class:`HypLinear`.
        act: as for :class:`HypAct`.
        aggr: as for :class:`HypAgg`.
        manifold_out: the model of the output (default ``manifold``).

    Shape:
        - Input: ``x`` ``(N, in_features)`` points, ``adj`` ``(N, N)``.
        - Output: ``(N, out_features)`` points of ``manifold_out``.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> M = Lorentz()
        >>> conv = HypGraphConv(M, 4, 3, nc=2, dtype=torch.float64)
        >>> x = M.random(6, 4, nc=2, dtype=torch.float64)
        >>> adj = torch.eye(6, dtype=torch.float64)
        >>> M.check_point(conv(x, adj))
        (True, None)
    """

    def __init__(
        self,
        manifold: Manifold,
        in_features: int,
        out_features: int,
        act: Callable = torch.relu,
        bias: bool = True,
        aggr: str = "mean",
        manifold_out: Manifold | None = None,
        *,
        dropout: float = 0.0,
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.linear = HypLinear(manifold, in_features, out_features, bias, dropout=dropout, nc=nc, dtype=dtype, device=device)
        self.agg = HypAgg(manifold, aggr)
        self.act = HypAct(manifold, act, manifold_out)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self.act(self.agg(self.linear(x), adj))
