"""Riemannian SGD and Adam on :mod:`hypermc.manifolds`, computed in MC arithmetic.

Each parameter that carries a ``manifold`` (:class:`~hypermc.ManifoldParameter`) is
updated on that manifold; other parameters are treated as :class:`Euclidean` (the plain
SGD / Adam update). The classes validate hyperparameters and keep state (tensors only,
so ``state_dict()`` round-trips); the updates are the functions :func:`riemannian_sgd`
and :func:`riemannian_adam` (after geoopt's ``RiemannianSGD`` / ``RiemannianAdam``)::

    rgrad = M.egrad2rgrad(x, grad (+ weight_decay * x))
    x_new = M.expmap(x, -lr * direction)               (M.retr when retraction=True)
    momentum / first moment transported: M.transp(x, x_new, buf)

With MCTensor parameters every quantity (Riemannian gradient, moments, step, the new
point) is an MC value, so the tiny coordinate changes of a point far from the origin
(``~ D_x`` in the ball) are kept. ``expmap`` and ``retr`` return points through the
model's ``projx`` (the projection rule of :mod:`hypermc.manifolds.base`: a no-op inside
the MC range), so the optimizers do not project again.

Row-sparse mode (embedding tables): with ``sparse_rows=True`` in a parameter group, a
parameter of shape ``(N, n)`` is updated only in the rows whose gradient row is not
identically zero (or in the rows passed to ``step(rows=...)``): the update gathers those
rows, runs the same functional update on them and scatters the result back, so the cost
is proportional to the batch, not to ``N``. Momentum / moments of untouched rows are
left as they are (lazy, like ``torch.optim.SparseAdam``); Adam's bias correction uses
the parameter's global step count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import torch
from torch.optim import Optimizer

from .._checks import check_adam_args, check_grad, check_lr, check_sgd_args
from ..manifolds.base import Manifold
from ..manifolds.euclidean import Euclidean
from ..manifolds.parameter import manifold_of
from ..mcf.tensor import MCTensor

__all__ = ["RiemannianSGD", "RiemannianAdam", "riemannian_sgd", "riemannian_adam"]

_EUCLIDEAN = Euclidean()
_SPARSE = "Riemannian optimizers take dense gradients; use sparse_rows=True for embedding tables"


# ----------------------------------------------------------------------------- helpers


def _move(manifold: Manifold, x: torch.Tensor, u: torch.Tensor, retraction: bool) -> torch.Tensor:
    """The new point: ``expmap(x, u)`` or ``retr(x, u)`` (options handled here); both
    return projected points (the projection rule of :mod:`hypermc.manifolds.base`)."""
    # check=False: an inner loop over its own iterates (check the initial points once)
    return manifold.retr(x, u) if retraction else manifold.expmap(x, u, check=False)


def _second_moment(manifold: Manifold, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Adam's second-moment increment: ``|g|_x^2`` per point (elementwise ``g^2`` where the
    metric is the identity -- ``manifold.identity_metric``, Euclidean parameters --, i.e.
    the ordinary Adam)."""
    if manifold.identity_metric:
        return g * g
    # clamped: the Minkowski square of a Lorentz tangent vector can round below 0
    return torch.clamp_min(manifold.inner(x, g, g, keepdim=True), 0.0)


def nonzero_rows(grad: torch.Tensor) -> torch.Tensor:
    """Indices of the rows (first dim) of ``grad`` that are not identically zero."""
    g = grad.components if isinstance(grad, MCTensor) else grad
    return (g.reshape(g.shape[0], -1) != 0).any(dim=1).nonzero().squeeze(1)


def _rows_of(param: torch.Tensor, grad: torch.Tensor, sparse: bool, rows: torch.Tensor | None) -> torch.Tensor | None:
    if not sparse:
        return None
    if param.dim() < 2:
        raise ValueError(f"sparse_rows needs parameters of shape (N, n); got shape {tuple(param.shape)}")
    if rows is None:
        return nonzero_rows(grad)
    rows = torch.as_tensor(rows, device=param.device)
    if rows.dtype not in (torch.int32, torch.int64) or rows.dim() != 1:
        raise TypeError(f"rows must be a 1-d integer tensor of row indices; got {rows.dtype} {tuple(rows.shape)}")
    n = param.shape[0]
    if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n):  # no wrap-around of -1
        raise ValueError(f"rows must lie in [0, {n}) (rows of the parameter); got values from {int(rows.min())} to {int(rows.max())}")
    return torch.unique(rows)


def _take(t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    return t if rows is None or t is None else t[rows]


def _put(target: torch.Tensor, value: torch.Tensor, rows: torch.Tensor | None) -> None:
    """Write ``value`` into ``target`` in place (all of it, or the given rows)."""
    if rows is None:
        target.copy_(value)
    else:
        target[rows] = value


# --------------------------------------------------------------------------------- SGD


def riemannian_sgd(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    momentum_buffer_list: list[torch.Tensor | None],
    *,
    manifolds: Sequence[Manifold | None],
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    retraction: bool = False,
    rows: Sequence[torch.Tensor | None] | None = None,
) -> None:
    """One Riemannian SGD step in place.

    For each point ``x`` (parameter, or its selected rows) with gradient ``g`` on
    manifold ``M``::

        r = M.egrad2rgrad(x, g + weight_decay * x)
        b = r (first step)   or   b = momentum * b + (1 - dampening) * r
        d = r + momentum * b (nesterov)   or   d = b      (if momentum != 0; else d = r)
        x_new = M.expmap(x, -lr * d)                       (M.retr if retraction)
        b = M.transp(x, x_new, b)

    Without momentum and retraction the step is ``M.expmap_egrad(x, g, -lr)`` (the same
    point to ``u^nc``; the ball computes it with its deficit formed once).

    Args:
        params: parameters (MCTensors or plain tensors), updated in place.
        grads: their gradients (not modified).
        momentum_buffer_list: one entry per parameter, ``None`` before the first step
            with momentum; new buffers are written into the list.
        manifolds: one manifold per parameter (``None``: Euclidean).
        rows: one entry per parameter: ``None`` (dense) or row indices to update.

    Example:
        A step against the Euclidean gradient ``(1, 0)`` at ``(0.5, 0)`` in the ball: the
        Riemannian gradient there is ``((1 - 0.25) / 2)^2 (1, 0)``, of norm ``0.375``, so
        the point moves ``lr * 0.375`` towards the origin.

        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> origin = hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64)
        >>> x = hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64)
        >>> before = M.dist(x, origin)
        >>> riemannian_sgd([x], [hm.mc([[1.0, 0.0]], nc=2, dtype=torch.float64)], [None], manifolds=[M], lr=0.1)
        >>> round((before - M.dist(x, origin)).approx().item(), 12)
        0.0375
    """
    rows = rows if rows is not None else [None] * len(params)
    for i, param in enumerate(params):
        grad = grads[i]
        check_grad(param, grad, sparse_hint=_SPARSE)
        manifold = manifolds[i] or _EUCLIDEAN
        r = rows[i]
        if r is not None and r.numel() == 0:
            continue
        x, g = _take(param.detach(), r), _take(grad, r)
        if weight_decay != 0:
            g = g + weight_decay * x
        if momentum == 0 and not retraction:  # the step is expmap(x, -lr rgrad): one pass where the model has it
            _put(param.detach(), manifold.expmap_egrad(x, g, -lr), r)
            continue
        rgrad = manifold.egrad2rgrad(x, g)
        buf = momentum_buffer_list[i]
        if momentum != 0:
            if buf is None:
                buf = torch.zeros_like(param.detach())
                momentum_buffer_list[i] = buf
                b = rgrad if r is None else _take(buf, r) * momentum + rgrad * (1 - dampening)
            else:
                b = _take(buf, r) * momentum + rgrad * (1 - dampening)
            direction = rgrad + momentum * b if nesterov else b
        else:
            direction = rgrad
        new_x = _move(manifold, x, direction * (-lr), retraction)
        if momentum != 0:
            assert buf is not None  # set above when momentum != 0
            _put(buf, manifold.transp(x, new_x, b), r)
        _put(param.detach(), new_x, r)


class _RiemannianOptimizer(Optimizer):
    """Shared ``step`` plumbing: per-group lists, manifolds and rows."""

    def _group_lists(
        self, group: dict[str, Any], rows: torch.Tensor | None
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[Manifold | None], list[torch.Tensor | None]]:
        params, grads, manifolds, row_list = [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            params.append(p)
            grads.append(p.grad)
            manifolds.append(manifold_of(p))
            row_list.append(_rows_of(p, p.grad, group["sparse_rows"], rows))
        return params, grads, manifolds, row_list

    def _check_rows(self, rows: Any) -> None:
        """Refuse ``step(rows=...)`` that no group uses, or rows outside a parameter, before any update."""
        if rows is None:
            return
        name = f"{type(self).__name__}.step"
        sparse = [p for group in self.param_groups if group["sparse_rows"] for p in group["params"]]
        if not sparse:
            raise ValueError(
                f"{name}: rows= selects rows of the parameter groups with sparse_rows=True, and no group has it; "
                f"construct the optimizer with sparse_rows=True or leave rows out"
            )
        for p in sparse:
            if p.dim() >= 2:
                try:
                    _rows_of(p, p, True, rows)
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"{name}: {exc}") from None

    @staticmethod
    def _closure_loss(closure: Callable[[], torch.Tensor] | None) -> torch.Tensor | None:
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()


class RiemannianSGD(_RiemannianOptimizer):
    """Riemannian stochastic gradient descent (momentum optional), in MC arithmetic.

    Parameters with a ``manifold`` attribute (:class:`~hypermc.ManifoldParameter`) move
    along geodesics (``expmap``, or ``retr`` with ``retraction=True``); the others get
    the Euclidean update. See :func:`riemannian_sgd` and the module docstring
    (row-sparse mode).

    Args:
        params: iterable of parameters or parameter groups (dicts).
        lr: learning rate.
        momentum: momentum factor (default 0); the buffer is parallel transported.
        dampening: dampening for momentum (default 0).
        weight_decay: L2 penalty on the coordinates (default 0).
        nesterov: Nesterov momentum (needs ``momentum > 0`` and ``dampening = 0``).
        retraction: use ``M.retr`` instead of ``M.expmap``.
        sparse_rows: update only the rows of ``(N, n)`` parameters whose gradient row
            is non-zero (or the rows given to :meth:`step`).

    State (per parameter): ``momentum_buffer`` (tangent vectors, the parameter's ``nc``)
    when ``momentum > 0``.

    Raises:
        ValueError: negative ``lr``, ``momentum`` or ``weight_decay`` (torch's messages),
            or Nesterov without momentum / with dampening.

    Example:
        Minimising the distance to the origin: its Riemannian gradient has norm 1, so
        every step of ``lr=0.1`` shortens the distance by 0.1.

        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> origin = hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64)
        >>> p = hm.ManifoldParameter(hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64), manifold=M)
        >>> round(M.dist(p, origin).approx().item(), 6)  # 2 atanh(0.5)
        1.098612
        >>> opt = RiemannianSGD([p], lr=0.1)
        >>> for _ in range(2):
        ...     opt.zero_grad()
        ...     M.dist(p, origin).sum().backward()
        ...     _ = opt.step()
        >>> round(M.dist(p, origin).approx().item(), 6)
        0.898612
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        retraction: bool = False,
        sparse_rows: bool = False,
    ) -> None:
        check_lr(lr, tensor_ok=False)
        check_sgd_args(momentum, dampening, weight_decay, nesterov)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            retraction=retraction,
            sparse_rows=sparse_rows,
        )
        super().__init__(params, defaults)

    # ignore[override]: torch's stub overloads Optimizer.step for a float loss and no rows argument
    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None, *, rows: torch.Tensor | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """Perform one update.

        Args:
            closure: re-evaluates the model and returns the loss.
            rows: explicit row indices for the groups with ``sparse_rows=True``
                (default: the rows with a non-zero gradient); every row must lie
                inside every such parameter (checked before any update).

        Raises:
            ValueError: ``rows`` given but no group has ``sparse_rows=True``, or a row
                outside ``[0, N)`` of a parameter.
            TypeError: ``rows`` is not a 1-d integer tensor.
        """
        self._check_rows(rows)
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads, manifolds, row_list = self._group_lists(group, rows)
            bufs = [self.state[p].get("momentum_buffer") for p in params]
            riemannian_sgd(
                params,
                grads,
                bufs,
                manifolds=manifolds,
                lr=group["lr"],
                momentum=group["momentum"],
                dampening=group["dampening"],
                weight_decay=group["weight_decay"],
                nesterov=group["nesterov"],
                retraction=group["retraction"],
                rows=row_list,
            )
            if group["momentum"] != 0:
                for p, b in zip(params, bufs):
                    self.state[p]["momentum_buffer"] = b
        return loss


# -------------------------------------------------------------------------------- Adam


def riemannian_adam(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    max_exp_avg_sqs: list[torch.Tensor | None],
    state_steps: list[torch.Tensor],
    *,
    manifolds: Sequence[Manifold | None],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float = 0.0,
    amsgrad: bool = False,
    retraction: bool = False,
    rows: Sequence[torch.Tensor | None] | None = None,
) -> None:
    """One Riemannian Adam step in place (Bécigneul & Ganea 2019, geoopt's form).

    For each point ``x`` with gradient ``g`` on manifold ``M`` (step count ``t``)::

        r = M.egrad2rgrad(x, g + weight_decay * x)
        m = beta1 * m + (1 - beta1) * r
        v = beta2 * v + (1 - beta2) * |r|_x^2          (per point; g^2 if Euclidean)
        v_max = max(v_max, v)                            (amsgrad)
        d = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
        x_new = M.expmap(x, -lr * d)                     (M.retr if retraction)
        m = M.transp(x, x_new, m)

    ``exp_avgs``, ``exp_avg_sqs``, ``max_exp_avg_sqs`` (amsgrad) and ``state_steps``
    are the parameter's state tensors, updated in place.

    Example:
        The first step's direction is the Riemannian gradient over its norm, so the
        point moves ``lr`` along the geodesic:

        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> origin = hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64)
        >>> x = hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64)
        >>> g = hm.mc([[1.0, 0.0]], nc=2, dtype=torch.float64)
        >>> m, v, step = torch.zeros_like(x), torch.zeros_like(x[..., :1]), torch.tensor(0.0)
        >>> before = M.dist(x, origin)
        >>> riemannian_adam([x], [g], [m], [v], [None], [step], manifolds=[M], lr=0.1, beta1=0.9,
        ...                 beta2=0.999, eps=1e-8)
        >>> step.item(), round((before - M.dist(x, origin)).approx().item(), 6)
        (1.0, 0.1)
    """
    rows = rows if rows is not None else [None] * len(params)
    for i, param in enumerate(params):
        grad = grads[i]
        check_grad(param, grad, sparse_hint=_SPARSE)
        manifold = manifolds[i] or _EUCLIDEAN
        r = rows[i]
        if r is not None and r.numel() == 0:
            continue
        state_steps[i] += 1
        t = float(state_steps[i])
        x, g = _take(param.detach(), r), _take(grad, r)
        if weight_decay != 0:
            g = g + weight_decay * x
        rgrad = manifold.egrad2rgrad(x, g)
        m = _take(exp_avgs[i], r) * beta1 + rgrad * (1 - beta1)
        v = _take(exp_avg_sqs[i], r) * beta2 + _second_moment(manifold, x, rgrad) * (1 - beta2)
        _put(exp_avg_sqs[i], v, r)
        if amsgrad:
            v_max = cast(torch.Tensor, max_exp_avg_sqs[i])  # amsgrad: the caller passes a max buffer
            v = torch.maximum(_take(v_max, r), v)
            _put(v_max, v, r)
        denom = torch.sqrt(v / (1 - beta2**t)) + eps
        direction = (m / (1 - beta1**t)) / denom
        new_x = _move(manifold, x, direction * (-lr), retraction)
        _put(exp_avgs[i], manifold.transp(x, new_x, m), r)
        _put(param.detach(), new_x, r)


class RiemannianAdam(_RiemannianOptimizer):
    """Riemannian Adam (amsgrad optional), in MC arithmetic.

    The first moment is a tangent vector, parallel transported after each step; the
    second moment is one number per point (``|rgrad|_x^2``), as in geoopt. Parameters
    without a manifold get the ordinary (elementwise) Adam update. See
    :func:`riemannian_adam` and the module docstring (row-sparse mode).

    Args:
        params: iterable of parameters or parameter groups (dicts).
        lr: learning rate (default 1e-3).
        betas: coefficients of the running averages (default (0.9, 0.999)).
        eps: added to the denominator (default 1e-8).
        weight_decay: L2 penalty on the coordinates (default 0).
        amsgrad: use the maximum of the second moments.
        retraction: use ``M.retr`` instead of ``M.expmap``.
        sparse_rows: row-sparse updates (see :class:`RiemannianSGD`).

    State (per parameter): ``step`` (float tensor), ``exp_avg`` (tangent vectors),
    ``exp_avg_sq`` (``(*, 1)`` per point, or elementwise for Euclidean parameters),
    ``max_exp_avg_sq`` (amsgrad).

    Raises:
        ValueError: negative ``lr``, ``eps`` or ``weight_decay``, betas outside
            ``[0, 1)`` (torch's messages).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> origin = hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64)
        >>> p = hm.ManifoldParameter(hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64), manifold=M)
        >>> opt = RiemannianAdam([p], lr=0.1)
        >>> for _ in range(2):
        ...     opt.zero_grad()
        ...     M.dist(p, origin).sum().backward()
        ...     _ = opt.step()
        >>> round(M.dist(p, origin).approx().item(), 6)  # 2 atanh(0.5) - 2 * 0.1
        0.898612
        >>> opt.state[p]["exp_avg_sq"].shape  # one second moment per point
        torch.Size([1, 1])
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        retraction: bool = False,
        sparse_rows: bool = False,
    ) -> None:
        check_lr(lr, tensor_ok=False)
        check_adam_args(betas, eps, weight_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            retraction=retraction,
            sparse_rows=sparse_rows,
        )
        super().__init__(params, defaults)

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[p]
        if len(state) == 0:
            manifold = manifold_of(p) or _EUCLIDEAN
            data = p.detach()
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(data)
            sq = data if manifold.identity_metric else data[..., :1]
            state["exp_avg_sq"] = torch.zeros_like(sq)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = torch.zeros_like(sq)
        return state

    # ignore[override]: torch's stub overloads Optimizer.step for a float loss and no rows argument
    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None, *, rows: torch.Tensor | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """Perform one update (``closure`` and ``rows`` as in :meth:`RiemannianSGD.step`)."""
        self._check_rows(rows)
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads, manifolds, row_list = self._group_lists(group, rows)
            states = [self._init_state(p, group) for p in params]
            beta1, beta2 = group["betas"]
            riemannian_adam(
                params,
                grads,
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [s.get("max_exp_avg_sq") for s in states],
                [s["step"] for s in states],
                manifolds=manifolds,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                amsgrad=group["amsgrad"],
                retraction=group["retraction"],
                rows=row_list,
            )
        return loss
