"""``ManifoldParameter``: an ``nn.Parameter`` that knows its manifold."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, SupportsIndex

import torch
from torch import nn
from torch.nn.parameter import _ParameterMeta  # type: ignore[attr-defined]  # torch's metaclass, not in its stubs

from .._checks import check_bool, check_instance
from ..mcf.tensor import MCTensor, register_manifold_pickling
from .base import Manifold
from .geoopt_compat import from_geoopt, is_geoopt_manifold

__all__ = ["ManifoldParameter", "ManifoldTensor", "manifold_of"]


class _PointMethods:
    """geoopt's tensor methods: the manifold's method with the tensor as the point ``x``."""

    manifold: Manifold

    def proj_(self) -> torch.Tensor:
        """Project onto the manifold in place (``copy_(manifold.projx(self))``); returns ``self``.

        Example:
            >>> from hypermc.manifolds import Sphere
            >>> t = ManifoldTensor(torch.tensor([3.0, 4.0], dtype=torch.float64), manifold=Sphere())
            >>> t.proj_() is t, t.tolist()
            (True, [0.6, 0.8])
        """
        with torch.no_grad():
            return self.copy_(self.manifold.projx(self._plain().detach()))  # type: ignore[attr-defined]

    def retr(self, u: torch.Tensor) -> torch.Tensor:
        """``manifold.retr(self, u)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).retr(torch.ones(2))
            tensor([1., 1.])
        """
        return self.manifold.retr(self._plain(), u)

    def expmap(self, u: torch.Tensor) -> torch.Tensor:
        """``manifold.expmap(self, u)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> t = ManifoldTensor(torch.zeros(2, dtype=torch.float64), manifold=PoincareBall())
            >>> t.expmap(torch.tensor([1.0, 0.0], dtype=torch.float64))
            tensor([0.7616, 0.0000], dtype=torch.float64)
        """
        return self.manifold.expmap(self._plain(), u)

    def logmap(self, y: torch.Tensor) -> torch.Tensor:
        """``manifold.logmap(self, y)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).logmap(torch.ones(2))
            tensor([1., 1.])
        """
        return self.manifold.logmap(self._plain(), y)

    def inner(self, u: torch.Tensor, v: torch.Tensor | None = None) -> torch.Tensor:
        """``manifold.inner(self, u, v)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> ManifoldTensor(torch.zeros(2), manifold=PoincareBall()).inner(torch.ones(2))
            tensor(8.)
        """
        return self.manifold.inner(self._plain(), u, v)

    def proju(self, u: torch.Tensor) -> torch.Tensor:
        """``manifold.proju(self, u)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).proju(torch.ones(2))
            tensor([1., 1.])
        """
        return self.manifold.proju(self._plain(), u)

    def transp(self, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``manifold.transp(self, y, v)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> ManifoldTensor(torch.zeros(2), manifold=PoincareBall()).transp(torch.tensor([0.5, 0.0]), torch.ones(2))
            tensor([0.7500, 0.7500])
        """
        return self.manifold.transp(self._plain(), y, v)

    def retr_transp(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``manifold.retr_transp(self, u, v)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).retr_transp(torch.ones(2), torch.ones(2))
            (tensor([1., 1.]), tensor([1., 1.]))
        """
        return self.manifold.retr_transp(self._plain(), u, v)

    def expmap_transp(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``manifold.expmap_transp(self, u, v)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).expmap_transp(torch.ones(2), torch.ones(2))
            (tensor([1., 1.]), tensor([1., 1.]))
        """
        return self.manifold.expmap_transp(self._plain(), u, v)

    def transp_follow_expmap(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``manifold.transp_follow_expmap(self, u, v)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).transp_follow_expmap(torch.ones(2), torch.ones(2))
            tensor([1., 1.])
        """
        return self.manifold.transp_follow_expmap(self._plain(), u, v)

    def transp_follow_retr(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``manifold.transp_follow_retr(self, u, v)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ManifoldTensor(torch.zeros(2), manifold=Euclidean()).transp_follow_retr(torch.ones(2), torch.ones(2))
            tensor([1., 1.])
        """
        return self.manifold.transp_follow_retr(self._plain(), u, v)

    def dist(self, other: torch.Tensor, p: float = 2) -> torch.Tensor:
        """``manifold.dist(self, other)`` (torch's ``Tensor.dist(other, p)`` for ``p != 2``, as geoopt).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> t = ManifoldTensor(torch.zeros(2, dtype=torch.float64), manifold=PoincareBall())
            >>> round(float(t.dist(torch.tensor([0.5, 0.0], dtype=torch.float64))), 9)
            1.098612289
        """
        if p != 2:
            return torch.Tensor.dist(self._plain(), other, p)
        return self.manifold.dist(self._plain(), other)

    def _plain(self) -> torch.Tensor:
        """The tensor as a plain ``torch.Tensor`` (autograd kept), for the manifold's methods."""
        return self.as_subclass(torch.Tensor)  # type: ignore[attr-defined]


class ManifoldTensor(_PointMethods, torch.Tensor):  # type: ignore[misc]  # geoopt's dist(other) replaces Tensor.dist
    """A tensor that knows its manifold (geoopt's ``ManifoldTensor``): ``.manifold`` and
    the point methods ``proj_``, ``retr``, ``expmap``, ``logmap``, ``inner``, ``proju``,
    ``transp``, ``retr_transp``, ``expmap_transp``, ``transp_follow_expmap``,
    ``transp_follow_retr``, ``dist``. Operations on it return plain tensors.

    Holds a plain tensor; an :class:`~hypermc.MCTensor` cannot be wrapped by a second
    tensor subclass (keep its manifold with :class:`ManifoldParameter`, or apart).

    Args:
        data: points (plain Tensor). Not checked to lie on the manifold.
        manifold: a hypermc manifold.
        requires_grad: as for tensors (default ``False``).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> t = ManifoldTensor(torch.tensor([0.5, 0.0], dtype=torch.float64), manifold=PoincareBall())
        >>> t.manifold, type(t * 2).__name__
        (PoincareBall(curvature=-1), 'Tensor')
        >>> ManifoldTensor(hm.mc([0.5, 0.0], nc=2), manifold=PoincareBall())
        Traceback (most recent call last):
            ...
        TypeError: ManifoldTensor: data must be a plain Tensor; got an MCTensor (use ManifoldParameter, or keep the manifold apart)
    """

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __new__(cls, data: torch.Tensor, manifold: Manifold, requires_grad: bool = False) -> ManifoldTensor:
        check_instance("ManifoldTensor", "manifold", manifold, Manifold, "a hypermc manifold (e.g. PoincareBall())")
        check_instance("ManifoldTensor", "data", data, torch.Tensor, "a plain Tensor")
        if isinstance(data, MCTensor):
            raise TypeError(
                "ManifoldTensor: data must be a plain Tensor; got an MCTensor (use ManifoldParameter, or keep the manifold apart)"
            )
        t = torch.Tensor._make_subclass(cls, data.detach(), check_bool("ManifoldTensor", "requires_grad", requires_grad))
        t.manifold = manifold
        return t

    def __repr__(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        return f"Tensor on {self.manifold!r} containing:\n{torch.Tensor.__repr__(self._plain())}"

    def __reduce_ex__(self, proto: SupportsIndex) -> tuple[Any, ...]:
        return _rebuild_manifold_tensor, (self._plain().detach(), _pickled_manifold(self.manifold), self.requires_grad)

    def __deepcopy__(self, memo: dict[int, Any]) -> ManifoldTensor:
        if id(self) in memo:
            return memo[id(self)]
        manifold = _copied_manifold(self.manifold, memo)
        result = ManifoldTensor(self._plain().detach().clone(), manifold=manifold, requires_grad=self.requires_grad)
        memo[id(self)] = result
        return result


def _owns_parameters(manifold: Manifold) -> bool:
    """Whether ``manifold`` holds parameters (a learnable curvature, also inside a factor)."""
    return isinstance(manifold, nn.Module) and any(True for _ in manifold.parameters())


def _pickled_manifold(manifold: Manifold) -> Manifold | tuple[str, float]:
    """What a pickled point stores of its manifold: :func:`manifold_state`, or the manifold
    itself where it owns parameters, so that a model pickled whole (``torch.save(model)``)
    keeps its points on the model's own curvature parameters."""
    return manifold if _owns_parameters(manifold) else manifold_state(manifold)


def _copied_manifold(manifold: Manifold, memo: dict[int, Any]) -> Manifold:
    """The manifold of a deep-copied point: the copy of one that owns parameters (the one
    ``copy.deepcopy(model)`` makes of the model's manifold, through ``memo``); fixed models
    are shared."""
    return copy.deepcopy(manifold, memo) if _owns_parameters(manifold) else manifold


def _rebuild_manifold_tensor(data: torch.Tensor, state: Manifold | tuple[str, float], requires_grad: bool) -> ManifoldTensor:
    manifold = state if isinstance(state, Manifold) else manifold_from_state(state)
    return ManifoldTensor(data, manifold=manifold, requires_grad=requires_grad)


class _ManifoldParameterMeta(_ParameterMeta):
    def __instancecheck__(cls, instance: object) -> bool:
        if cls is ManifoldParameter and isinstance(instance, torch.Tensor):
            if getattr(instance, "_is_param", False) or isinstance(instance, nn.Parameter):
                return isinstance(getattr(instance, "manifold", None), Manifold)
        return super().__instancecheck__(instance)


class ManifoldParameter(_PointMethods, nn.Parameter, metaclass=_ManifoldParameterMeta):  # type: ignore[misc]  # as ManifoldTensor
    """A parameter whose points live on ``manifold``; Riemannian optimizers read it.

    With a plain tensor this is an ``nn.Parameter`` subclass (like geoopt's) with geoopt's
    point methods (``proj_``, ``retr``, ``expmap``, ... as :class:`ManifoldTensor`). With
    an :class:`~hypermc.MCTensor` torch returns the MCTensor itself marked as a parameter
    (``nn.Parameter`` cannot wrap a tensor subclass); it gets the same ``manifold``
    attribute (not the point methods: call the manifold's), and
    ``isinstance(p, ManifoldParameter)`` is true for both.

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
        manifold = _copied_manifold(self.manifold, memo)
        result = ManifoldParameter(self.data.clone(), manifold=manifold, requires_grad=self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, proto: SupportsIndex) -> tuple[Callable[..., ManifoldParameter], tuple[Any, ...]]:
        return _rebuild_manifold_parameter, (self.data, _pickled_manifold(self.manifold), self.requires_grad)


torch.serialization.add_safe_globals([_rebuild_manifold_tensor])


def manifold_state(manifold: Manifold) -> tuple[str, float]:
    """``(class name, curvature)``: what pickling stores for a parameter's manifold.

    Plain strings and floats, so ``torch.load(weights_only=True)`` can read it back. A
    manifold that owns parameters (a learnable curvature) is pickled as itself instead,
    so that a model saved whole keeps its points on its curvature parameter; such a
    pickle loads with ``torch.load(weights_only=False)`` (save the model's ``state_dict``
    for ``weights_only=True``). Called on a learnable model, this function stores its
    curvature's current value, read back as a fixed model (a ``LearnablePoincareBall`` as a
    ``PoincareBall``, a ``LearnableLorentz`` as a ``Lorentz``).

    Raises:
        TypeError: a model that cannot be rebuilt from a name and a curvature
            (:class:`Scaled`, :class:`ProductManifold`): save the data and the manifold's
            arguments instead.
    """
    name = type(manifold).__name__
    if name not in _FACTORIES:
        raise TypeError(
            f"a ManifoldParameter on {manifold!r} cannot be pickled (only {', '.join(sorted(_FACTORIES))}); "
            "save its data (p.detach()) and rebuild the manifold"
        )
    return name, float(manifold.curvature)


def manifold_from_state(state: object) -> Manifold:
    """Inverse of :func:`manifold_state`.

    Raises:
        ValueError: unknown class name or a bad curvature in ``state``.
    """
    if not (isinstance(state, tuple) and len(state) == 2 and state[0] in _FACTORIES):
        raise ValueError(f"pickled ManifoldParameter: manifold state must be (one of {sorted(_FACTORIES)}, curvature); got {state!r}")
    name, curvature = state
    return _FACTORIES[name](curvature)


def _factory(name: str) -> Callable[[float], Manifold]:
    def build(k: float) -> Manifold:
        from . import Euclidean, Lorentz, PoincareBall, PoincareHalfspace, Sphere, SphereProjection, Stereographic

        if name in ("PoincareBall", "LearnablePoincareBall", "PoincareHalfspace", "Lorentz", "LearnableLorentz"):
            cls = {
                "PoincareBall": PoincareBall,
                "LearnablePoincareBall": PoincareBall,
                "LearnableLorentz": Lorentz,
                "PoincareHalfspace": PoincareHalfspace,
                "Lorentz": Lorentz,
            }[name]
            return cls(curvature=k)
        if name in ("Stereographic", "SphereProjection"):
            return {"Stereographic": Stereographic, "SphereProjection": SphereProjection}[name](k=k)
        return {"Euclidean": Euclidean, "Sphere": Sphere}[name]()

    return build


#: The models a pickled ManifoldParameter can name: class name -> builder from the curvature.
_FACTORIES: dict[str, Callable[[float], Manifold]] = {
    n: _factory(n)
    for n in (
        "PoincareBall",
        "LearnablePoincareBall",
        "PoincareHalfspace",
        "Lorentz",
        "LearnableLorentz",
        "Euclidean",
        "Stereographic",
        "SphereProjection",
        "Sphere",
    )
}


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

    A geoopt manifold (a ``geoopt.ManifoldParameter``) is read as the hypermc model with
    the same geometry (:func:`~hypermc.manifolds.geoopt_compat.from_geoopt`).

    Raises:
        TypeError: ``p.manifold`` is neither a hypermc manifold nor a geoopt manifold
            with a hypermc counterpart (an optimizer must not take a Euclidean step on it).

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> p = ManifoldParameter(Lorentz().origin(3, 4, nc=None), manifold=Lorentz())
        >>> manifold_of(p), manifold_of(torch.nn.Parameter(torch.zeros(3)))
        (Lorentz(curvature=-1), None)
    """
    m = getattr(p, "manifold", None)
    if m is None or isinstance(m, Manifold):
        return m
    if is_geoopt_manifold(m):
        return from_geoopt(m)
    raise TypeError(
        f"parameter of shape {tuple(p.shape)} has a manifold attribute of type {type(m).__name__}, which is not a "
        "hypermc manifold; use hypermc.ManifoldParameter(data, manifold=...) with a hypermc.manifolds model"
    )
