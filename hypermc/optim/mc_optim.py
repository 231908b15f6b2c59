"""SGD and Adam whose updates and state are computed in MC arithmetic.

The classes validate hyperparameters and keep state (tensors only, so ``state_dict()``
round-trips); the update is a function, :func:`mc_sgd` / :func:`mc_adam`, that follows
torch's single-tensor update (``torch/optim/sgd.py``, ``adam.py``) op for op:

* an MCTensor parameter with ``nc >= 2`` runs those ops on MCTensors, so every
  intermediate (weight decay, momentum, moments, step) is an MC value and the update is
  added to the parameter in MC precision -- the small updates that a float16 parameter
  rounds away are kept;
* an MCTensor with ``nc = 1`` (parameter, gradient and state) runs them on its component
  tensors, i.e. *is* torch's update: bitwise equal to ``torch.optim.SGD`` /
  ``torch.optim.Adam`` (``foreach=False``, the CPU default) given the same gradients;
* a plain tensor parameter gets exactly torch's update.

Optimizer state has the parameter's ``nc``. Hyperparameters (Python floats) enter as
``nc``-component constants of their double value (``lr=0.05`` is not first rounded to
float16). Schedulers from ``torch.optim.lr_scheduler`` work (the classes subclass
``torch.optim.Optimizer``).

The steps are Euclidean: a parameter that lies on a manifold other than the Euclidean one
(a :class:`~hypermc.ManifoldParameter`, a ``geoopt.ManifoldParameter``) is refused with a
``TypeError`` when it is added, pointing to :mod:`hypermc.optim.riemannian`'s optimizers,
instead of being moved off its manifold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast, overload

import torch
from torch.optim import Optimizer

from .._checks import check_adam_args, check_grad, check_lr, check_sgd_args
from ..manifolds.parameter import manifold_of
from ..mcf import MCTensor, mc

__all__ = ["MCSGD", "MCAdam", "mc_sgd", "mc_adam"]

_SPARSE = "MC optimizers do not support sparse gradients"


# ----------------------------------------------------------------------------- helpers


class _EuclideanOptimizer(Optimizer):
    """An optimizer whose steps are Euclidean: parameters on another manifold are refused
    when a parameter group is added (at construction or by ``add_param_group``)."""

    _riemannian = "RiemannianSGD"

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        params = param_group["params"]
        if not isinstance(params, (torch.Tensor, set)):  # a generator is read once: keep what it gave (torch refuses sets)
            params = list(params)
            param_group = {**param_group, "params": params}
        for i, p in enumerate([params] if isinstance(params, torch.Tensor) else params):
            if getattr(p, "manifold", None) is None:
                continue
            m = manifold_of(p)  # a TypeError for an attribute that is no manifold
            if m is not None and not m.identity_metric:  # the identity metric: R^n, Euclidean steps
                name = type(self).__name__
                raise TypeError(
                    f"{name}: parameter {i} (shape {tuple(p.shape)}) lies on {m!r}; {name} takes Euclidean steps, "
                    f"which would move it off its manifold. Use hypermc.optim.{self._riemannian} (it updates MC "
                    "parameters in MC arithmetic too), or pass the parameter's data as a plain parameter"
                )
        super().add_param_group(param_group)


def _is_plain_mc(*tensors: torch.Tensor | None) -> bool:
    """True when every given MCTensor has one component (then torch's op sequence applies)."""
    return all(not isinstance(t, MCTensor) or t.nc == 1 for t in tensors if t is not None)


@overload
def _view(t: torch.Tensor) -> torch.Tensor: ...
@overload
def _view(t: torch.Tensor | None) -> torch.Tensor | None: ...
def _view(t: torch.Tensor | None) -> torch.Tensor | None:
    """The plain tensor an nc=1 MCTensor's ops run on: its component, as a view."""
    return t.components[..., 0] if isinstance(t, MCTensor) else t


def _as_state(t: torch.Tensor, param: torch.Tensor, plain: bool) -> torch.Tensor:
    """A new state tensor ``t`` (already a copy) in the parameter's representation.

    Plain parameter: ``t`` itself. nc=1 update (``t`` is plain): the one-component
    MCTensor around ``t``, so :func:`_view` gives ``t`` back. Otherwise an MCTensor with
    the parameter's ``nc``.
    """
    if not isinstance(param, MCTensor):
        return t
    if plain:
        return MCTensor(t.unsqueeze(-1))
    mt = cast(MCTensor, t)  # an update with MC parameters and gradients makes MC state
    return mt if mt.nc == param.nc else mc(mt, nc=param.nc)


def _scalar(x: float | torch.Tensor) -> float:
    return x.item() if isinstance(x, torch.Tensor) else x


def closure_loss(closure: Callable[[], torch.Tensor] | None) -> torch.Tensor | None:
    """The loss ``closure()`` returns, evaluated with gradients enabled (``None`` without one)."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


# --------------------------------------------------------------------------------- SGD


def mc_sgd(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    momentum_buffer_list: list[torch.Tensor | None],
    *,
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    maximize: bool = False,
) -> None:
    """One SGD step in place, torch's single-tensor algorithm in MC arithmetic.

    For each parameter ``p`` with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * p                        (if weight_decay != 0)
        b = g  (first step)   or   b = momentum * b + (1 - dampening) * g
        g = g + momentum * b  (nesterov)   or   g = b   (if momentum != 0)
        p = p - lr * g

    Args:
        params: parameters (MCTensors or plain tensors), updated in place.
        grads: their gradients (not modified).
        momentum_buffer_list: one entry per parameter, ``None`` before the first step
            with momentum; new buffers are written into the list (like torch).
        lr, momentum, dampening, weight_decay, nesterov, maximize: as ``torch.optim.SGD``.

    Example:
        >>> x = hm.mc([1.0, 2.0], nc=2, dtype=torch.float64)
        >>> g = hm.mc([0.5, 0.5], nc=2, dtype=torch.float64)
        >>> bufs = [None]
        >>> mc_sgd([x], [g], bufs, lr=0.1, momentum=0.9)  # first step: the buffer is g
        >>> mc_sgd([x], [g], bufs, lr=0.1, momentum=0.9)  # buffer 0.9 * 0.5 + 0.5
        >>> x.approx(), bufs[0].approx()
        (tensor([0.8550, 1.8550], dtype=torch.float64), tensor([0.9500, 0.9500], dtype=torch.float64))
    """
    lr = _scalar(lr)
    for i, param in enumerate(params):
        grad = grads[i]
        check_grad(param, grad, sparse_hint=_SPARSE)
        buf = momentum_buffer_list[i]
        plain = _is_plain_mc(param, grad, buf)
        p, g, b = (_view(param), _view(grad), _view(buf)) if plain else (param, grad, buf)
        g = g if not maximize else -g
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        if momentum != 0:
            if b is None:
                b = g.detach().clone()
                momentum_buffer_list[i] = _as_state(b, param, plain)
            else:
                b.mul_(momentum).add_(g, alpha=1 - dampening)
            g = g.add(b, alpha=momentum) if nesterov else b
        p.add_(g, alpha=-lr)


class MCSGD(_EuclideanOptimizer):
    """Stochastic gradient descent with momentum, in MC arithmetic (:class:`torch.optim.SGD`).

    Args:
        params: iterable of parameters or parameter groups (dicts).
        lr: learning rate (default 1e-3).
        momentum: momentum factor (default 0).
        dampening: dampening for momentum (default 0).
        weight_decay: L2 penalty (default 0).
        nesterov: Nesterov momentum (needs ``momentum > 0`` and ``dampening = 0``).
        maximize: maximise the objective instead of minimising.

    State (per parameter): ``momentum_buffer`` (MCTensor of the parameter's ``nc``, or
    absent without momentum).

    Raises:
        ValueError: negative ``lr``, ``momentum`` or ``weight_decay`` (torch's messages),
            or Nesterov without momentum / with dampening.
        TypeError: a parameter on a non-Euclidean manifold (use
            :class:`~hypermc.optim.RiemannianSGD`).

    Example:
        Ten steps of ``1e-4`` on a float16 parameter: plain float16 rounds each one away
        (half an ulp of 1.0 is ``4.9e-4``), two components keep them.

        >>> p = torch.nn.Parameter(hm.mc([1.0], nc=2, dtype=torch.float16))
        >>> opt = MCSGD([p], lr=1e-4, momentum=0.0)
        >>> for _ in range(10):
        ...     opt.zero_grad()
        ...     p.sum().backward()
        ...     _ = opt.step()
        >>> round(p.components.double().sum().item(), 4)  # 1 - 10 * 1e-4
        0.999
        >>> q = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float16))
        >>> opt = torch.optim.SGD([q], lr=1e-4)
        >>> for _ in range(10):
        ...     opt.zero_grad()
        ...     q.sum().backward()
        ...     _ = opt.step()
        >>> q.item()
        1.0
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float | torch.Tensor = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        check_lr(lr)
        check_sgd_args(momentum, dampening, weight_decay, nesterov)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    # ignore[override]: torch's stub overloads Optimizer.step for a float loss; closures return tensors
    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """Perform one update; ``closure`` re-evaluates the model and returns the loss."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            params, grads, bufs = [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                bufs.append(self.state[p].get("momentum_buffer"))
            mc_sgd(
                params,
                grads,
                bufs,
                lr=group["lr"],
                momentum=group["momentum"],
                dampening=group["dampening"],
                weight_decay=group["weight_decay"],
                nesterov=group["nesterov"],
                maximize=group["maximize"],
            )
            if group["momentum"] != 0:
                for p, buf in zip(params, bufs):
                    self.state[p]["momentum_buffer"] = buf
        return loss


# -------------------------------------------------------------------------------- Adam


def mc_adam(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    max_exp_avg_sqs: list[torch.Tensor],
    state_steps: list[torch.Tensor],
    *,
    amsgrad: bool = False,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float = 0.0,
    eps: float = 1e-8,
    maximize: bool = False,
) -> None:
    """One Adam step in place, torch's single-tensor algorithm in MC arithmetic.

    For each parameter ``p`` with gradient ``g`` (negated when ``maximize``), step
    count ``t`` (incremented first)::

        g = g + weight_decay * p                                   (if weight_decay != 0)
        m = m + (1 - beta1) (g - m)          v = beta2 v + (1 - beta2) g^2
        v_max = max(v_max, v)                                      (amsgrad; used for v)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    The bias corrections are Python doubles (as in torch); every tensor operation is
    MC for MC state.

    Args:
        params, grads: parameters (updated in place) and gradients (not modified).
        exp_avgs, exp_avg_sqs, max_exp_avg_sqs: state tensors, updated in place
            (``max_exp_avg_sqs`` only read with ``amsgrad``).
        state_steps: one float32 scalar tensor per parameter, incremented in place.
        amsgrad, beta1, beta2, lr, weight_decay, eps, maximize: as ``torch.optim.Adam``.

    Example:
        >>> x = hm.mc([1.0], nc=2, dtype=torch.float64)
        >>> g = hm.mc([1e-3], nc=2, dtype=torch.float64)
        >>> m, v, step = torch.zeros_like(x), torch.zeros_like(x), torch.tensor(0.0)
        >>> mc_adam([x], [g], [m], [v], [], [step], beta1=0.9, beta2=0.999, lr=0.01)
        >>> step.item(), round(x.approx().item(), 6)  # the first step moves by about lr
        (1.0, 0.99)
    """
    lr = _scalar(lr)
    for i, param in enumerate(params):
        grad = grads[i]
        check_grad(param, grad, sparse_hint=_SPARSE)
        max_sq = max_exp_avg_sqs[i] if amsgrad else None
        plain = _is_plain_mc(param, grad, exp_avgs[i], exp_avg_sqs[i], max_sq)
        p, g, exp_avg, exp_avg_sq = param, grad, exp_avgs[i], exp_avg_sqs[i]
        if plain:
            p, g, exp_avg, exp_avg_sq, max_sq = _view(p), _view(g), _view(exp_avg), _view(exp_avg_sq), _view(max_sq)
        g = g if not maximize else -g
        step_t = state_steps[i]
        step_t += 1
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        exp_avg.lerp_(g, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        if amsgrad:
            v_max = cast(torch.Tensor, max_sq)  # max_exp_avg_sqs[i] with amsgrad
            v_max.copy_(torch.maximum(v_max, exp_avg_sq))
            denom = (v_max.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)


class MCAdam(_EuclideanOptimizer):
    """Adam (and AMSGrad) in MC arithmetic (:class:`torch.optim.Adam`).

    Args:
        params: iterable of parameters or parameter groups (dicts).
        lr: learning rate (default 1e-3).
        betas: coefficients of the running averages of the gradient and its square.
        eps: added to the denominator (default 1e-8; note that it is below float16's
            smallest subnormal, as in torch).
        weight_decay: L2 penalty added to the gradient (default 0).
        amsgrad: use the maximum of past squared-gradient averages.
        maximize: maximise the objective instead of minimising.

    State (per parameter): ``step`` (float32 scalar tensor, as torch), ``exp_avg``,
    ``exp_avg_sq`` and with ``amsgrad`` ``max_exp_avg_sq`` (MCTensors of the parameter's
    ``nc``).

    Raises:
        ValueError: negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside
            ``[0, 1)`` (torch's messages).
        TypeError: a parameter on a non-Euclidean manifold (use
            :class:`~hypermc.optim.RiemannianAdam`).

    Example:
        >>> p = torch.nn.Parameter(hm.mc([1.0, -2.0], nc=2, dtype=torch.float16))
        >>> opt = MCAdam([p], lr=1e-3)
        >>> for _ in range(5):
        ...     opt.zero_grad()
        ...     (p * p).sum().backward()
        ...     _ = opt.step()
        >>> [round(v, 4) for v in p.components.double().sum(-1).tolist()]  # each step about lr
        [0.995, -1.995]
        >>> opt.state[p]["step"].item(), opt.state[p]["exp_avg"].nc
        (5.0, 2)
    """

    _riemannian = "RiemannianAdam"

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float | torch.Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        check_lr(lr)
        check_adam_args(betas, eps, weight_decay)
        betas = (float(betas[0]), float(betas[1]))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, defaults)

    # ignore[override]: torch's stub overloads Optimizer.step for a float loss; closures return tensors
    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """Perform one update; ``closure`` re-evaluates the model and returns the loss."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = [], [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                if group["amsgrad"]:
                    max_sqs.append(state["max_exp_avg_sq"])
                steps.append(state["step"])
            beta1, beta2 = group["betas"]
            mc_adam(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                max_sqs,
                steps,
                amsgrad=group["amsgrad"],
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
            )
        return loss
