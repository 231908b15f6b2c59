"""``ManifoldParameter``: an ``nn.Parameter`` that knows its manifold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsIndex

import torch
from torch import nn
from torch.nn.parameter import _ParameterMeta  # type: ignore[attr-defined]  # torch's metaclass, not in its stubs

from .._checks import check_bool, check_instance
from ..mcf.tensor import register_manifold_pickling
from .base import Manifold

__all__ = ["ManifoldParameter", "manifold_of"]


class _ManifoldParameterMeta(_ParameterMeta):
    def __instancecheck__(cls, instance: object) -> bool:
        if cls is ManifoldParameter and isinstance(instance, torch.Tensor):
            if getattr(instance, "_is_param", False) or isinstance(instance, nn.Parameter):
                return isinstance(getattr(instance, "manifold", None), Manifold)
        return super().__instancecheck__(instance)


class ManifoldParameter(nn.Parameter, metaclass=_ManifoldParameterMeta):
    """A parameter whose points live on ``manifold``; Riemannian optimizers read it.

    With a plain tensor this is an ``nn.Parameter`` subclass (like geoopt's). With an
    :class:`~hypermc.MCTensor` torch returns the MCTensor itself marked as a parameter
    (``nn.Parameter`` cannot wrap a tensor subclass); it gets the same ``manifold``
    attribute, and ``isinstance(p, ManifoldParameter)`` is true for both.

    Args:
        data: points ``(*, n)`` (Tensor or MCTensor). Not checked to lie on the
            manifold; call ``manifold.check_point(data)`` or ``manifold.projx`` first.
        manifold: a :class:`~hypermc.manifolds.base.Manifold` instance.
        requires_grad: as for ``nn.Parameter``.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> p = ManifoldParameter(M.random(10, 2, nc=2, dtype=torch.float64), manifold=M)
        >>> isinstance(p, ManifoldParameter), p.manifold, p.requires_grad, p.nc
        (True, PoincareBall(curvature=-1), True, 2)
        >>> from hypermc.optim import RiemannianSGD
        >>> opt = RiemannianSGD([p], lr=0.1)
        >>> loss = M.dist0(p).sum()
        >>> loss.backward()  # an MC gradient
        >>> opt.step()  # a Riemannian step towards the origin, on the ball
        >>> float(M.dist0(p.detach()).sum()) < float(loss.detach()), M.check_point(p.detach())
        (True, (True, None))
    """

    def __new__(cls, data: torch.Tensor | None = None, manifold: Manifold | None = None, requires_grad: bool = True) -> ManifoldParameter:
        check_instance("ManifoldParameter", "manifold", manifold, Manifold, "a hypermc manifold (e.g. PoincareBall())")
        if data is not None:
            check_instance("ManifoldParameter", "data", data, torch.Tensor, "a Tensor or MCTensor")
        check_bool("ManifoldParameter", "requires_grad", requires_grad)
        assert manifold is not None  # checked above
        if data is not None and (data.dim() < 1 or data.shape[-1] < manifold.min_dim):
            raise ValueError(
                f"ManifoldParameter: data must end with a point dimension of size >= "
                f"{manifold.min_dim} for {manifold!r}; got shape {tuple(data.shape)}"
            )
        p = super().__new__(cls, data, requires_grad)
        p.manifold = manifold
        return p

    def __init__(self, data: torch.Tensor | None = None, manifold: Manifold | None = None, requires_grad: bool = True) -> None:
        pass

    manifold: Manifold

    def __repr__(self) -> str:  # type: ignore[override]  # torch's stub has a keyword-only catch-all
        return f"ManifoldParameter on {self.manifold!r} containing:\n{self.data!r}"

    def __deepcopy__(self, memo: dict[int, Any]) -> ManifoldParameter:
        if id(self) in memo:
            return memo[id(self)]
        result = ManifoldParameter(self.data.clone(), manifold=self.manifold, requires_grad=self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, proto: SupportsIndex) -> tuple[Callable[..., ManifoldParameter], tuple[torch.Tensor, tuple[str, float], bool]]:
        return _rebuild_manifold_parameter, (self.data, manifold_state(self.manifold), self.requires_grad)


def manifold_state(manifold: Manifold) -> tuple[str, float]:
    """``(class name, curvature)``: what pickling stores for a parameter's manifold.

    Plain strings and floats, so ``torch.load(weights_only=True)`` can read it back.
    """
    return type(manifold).__name__, float(manifold.curvature)


def manifold_from_state(state: object) -> Manifold:
    """Inverse of :func:`manifold_state`.

    Raises:
        ValueError: unknown class name or a bad curvature in ``state``.
    """
    from . import Euclidean, Lorentz, PoincareBall, PoincareHalfspace

    classes = {c.__name__: c for c in (PoincareBall, PoincareHalfspace, Lorentz, Euclidean)}
    if not (isinstance(state, tuple) and len(state) == 2 and state[0] in classes):
        raise ValueError(f"pickled ManifoldParameter: manifold state must be (one of {sorted(classes)}, curvature); got {state!r}")
    name, curvature = state
    if name == "Euclidean":
        return Euclidean()
    return classes[name](curvature=curvature)  # type: ignore[call-arg]


def _rebuild_manifold_parameter(data: torch.Tensor, manifold: Manifold | tuple[str, float], requires_grad: bool) -> ManifoldParameter:
    if not isinstance(manifold, Manifold):  # older pickles stored the object itself
        manifold = manifold_from_state(manifold)
    return ManifoldParameter(data, manifold=manifold, requires_grad=requires_grad)


torch.serialization.add_safe_globals([_rebuild_manifold_parameter])


def _rebuild_mc_parameter(tensor: torch.Tensor, state: tuple[str, float], requires_grad: bool) -> ManifoldParameter:
    """An MCTensor parameter loaded back (the MCTensor is the parameter, see the class)."""
    return ManifoldParameter(tensor.detach(), manifold=manifold_from_state(state), requires_grad=requires_grad)


register_manifold_pickling(manifold_state, _rebuild_mc_parameter)


def manifold_of(p: torch.Tensor) -> Manifold | None:
    """The manifold attached to a parameter, or ``None`` for an ordinary one.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> p = ManifoldParameter(Lorentz().origin(3, 4, nc=None), manifold=Lorentz())
        >>> manifold_of(p), manifold_of(torch.nn.Parameter(torch.zeros(3)))
        (Lorentz(curvature=-1), None)
    """
    m = getattr(p, "manifold", None)
    return m if isinstance(m, Manifold) else None
