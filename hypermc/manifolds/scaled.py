"""A manifold with its metric scaled by a constant (geoopt's ``Scaled``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .._checks import check_bool, check_instance, check_real
from .base import Device, Manifold

__all__ = ["Scaled"]


class Scaled(Manifold):
    """``base`` with every distance multiplied by ``scale`` (metric ``scale^2 g``; the
    curvature divided by ``scale^2``), in geoopt's convention for tangent vectors: a
    tangent vector of the scaled manifold is ``scale`` times the base vector, so
    ``expmap(x, u) = base.expmap(x, u / scale)``, ``logmap = scale * base.logmap``,
    ``dist = scale * base.dist``, ``dist2 = scale^2 base.dist2``, while ``inner``,
    ``norm``, ``proju``, ``projx``, ``egrad2rgrad`` and ``transp`` are the base's.

    Args:
        manifold: the base manifold (a hypermc manifold).
        scale: the factor ``> 0`` (float or 0-d tensor).
        learnable: make ``log(scale)`` a parameter (``nn.Module``: found by
            ``model.parameters()`` when the manifold is a submodule).

    Example:
        >>> from hypermc.manifolds import Sphere
        >>> M = Scaled(Sphere(), 2.0)  # the sphere of radius 2
        >>> p1, p2 = torch.tensor([-1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> round(float(Sphere().dist(p1, p2)), 9), round(float(M.dist(p1, p2)), 9)
        (1.570796327, 3.141592654)
        >>> round(float(M.dist(p2, M.expmap(p1, M.logmap(p1, p2)))), 9)
        0.0
    """

    name = "scaled"

    def __new__(cls, *args: object, **kwargs: object) -> Scaled:
        return object.__new__(cls)

    def __init__(self, manifold: Manifold, scale: float | torch.Tensor = 1.0, learnable: bool = False) -> None:
        nn.Module.__init__(self)
        check_instance("Scaled", "manifold", manifold, Manifold, "a hypermc manifold")
        s = check_real("Scaled", "scale", float(scale) if isinstance(scale, torch.Tensor) else scale, minimum=0.0, open_min=True)
        self.base = manifold
        self.min_dim = manifold.min_dim
        self.learnable = check_bool("Scaled", "learnable", learnable)
        t = torch.tensor(s, dtype=torch.get_default_dtype())
        if self.learnable:
            self.log_scale = nn.Parameter(t.log())
        else:
            self._scale = s

    @property
    def scale(self) -> float | torch.Tensor:
        """The factor (a tensor when learnable)."""
        return self.log_scale.exp() if self.learnable else self._scale

    @property
    def curvature(self) -> float:  # type: ignore[override]
        """The base curvature divided by ``scale^2`` (a float snapshot)."""
        return self.base.curvature / float(self.scale) ** 2

    @property
    def c(self) -> float:  # type: ignore[override]
        return -self.curvature

    def __repr__(self) -> str:
        return f"Scaled({self.base!r}, scale={float(self.scale):g})"

    def __eq__(self, other: object) -> bool:
        if self.learnable or not isinstance(other, Scaled) or other.learnable:
            return self is other
        return self.base == other.base and self._scale == other._scale

    def __hash__(self) -> int:
        return id(self) if self.learnable else hash(("Scaled", self.base, self._scale))

    def _s(self, like: torch.Tensor) -> float | torch.Tensor:
        s = self.scale
        return s.to(like.dtype) if isinstance(s, torch.Tensor) else s

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``scale * base.dist``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 3.0).dist(torch.zeros(2), torch.ones(2))
            tensor(4.2426)
        """
        return self.base.dist(x, y, keepdim=keepdim, check=check) * self._s(x)

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``scale * base.dist0``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 3.0).dist0(torch.tensor([3.0, 4.0]))
            tensor(15.)
        """
        return self.base.dist0(x, keepdim=keepdim, check=check) * self._s(x)

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``base.expmap(x, u / scale)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).expmap(torch.zeros(2), torch.ones(2))
            tensor([0.5000, 0.5000])
        """
        return self.base.expmap(x, u / self._s(u), check=check)

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``scale * base.logmap``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).logmap(torch.zeros(2), torch.ones(2))
            tensor([2., 2.])
        """
        return self.base.logmap(x, y, check=check) * self._s(x)

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``base.expmap0(u / scale)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).expmap0(torch.ones(2))
            tensor([0.5000, 0.5000])
        """
        return self.base.expmap0(u / self._s(u))

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``scale * base.logmap0``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).logmap0(torch.ones(2))
            tensor([2., 2.])
        """
        return self.base.logmap0(y, check=check) * self._s(y)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``base.retr(x, u / scale)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).retr(torch.zeros(2), torch.ones(2))
            tensor([0.5000, 0.5000])
        """
        return self.base.retr(x, u / self._s(u))

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``base.transp`` (transport is linear).

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).transp(torch.zeros(2), torch.ones(2), torch.ones(2))
            tensor([1., 1.])
        """
        return self.base.transp(x, y, v)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``base.inner`` (the vectors already carry the scale).

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).inner(torch.zeros(2), torch.ones(2))
            tensor(2.)
        """
        return self.base.inner(x, u, v, keepdim=keepdim)

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``base.norm``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).norm(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(5.)
        """
        return self.base.norm(x, u, keepdim=keepdim)

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """``base.projx``.

        Example:
            >>> from hypermc.manifolds import Sphere
            >>> Scaled(Sphere(), 2.0).projx(torch.tensor([3.0, 4.0]))
            tensor([0.6000, 0.8000])
        """
        return self.base.projx(x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``base.proju``.

        Example:
            >>> from hypermc.manifolds import Sphere
            >>> Scaled(Sphere(), 2.0).proju(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
            tensor([0., 1.])
        """
        return self.base.proju(x, u)

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``base.egrad2rgrad`` (geoopt's convention).

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Scaled(Euclidean(), 2.0).egrad2rgrad(torch.zeros(2), torch.ones(2))
            tensor([1., 1.])
        """
        return self.base.egrad2rgrad(x, g)

    def random(
        self,
        *size: int | Sequence[int],
        std: float = 1.0,
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: Device = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``base.random`` with ``std / scale`` (``std`` in the scaled distance).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> Scaled(PoincareBall(), 2.0).random(3, 2).shape
            torch.Size([3, 2])
        """
        return self.base.random(*size, std=std / float(self.scale), nc=nc, dtype=dtype, device=device, generator=generator)

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        return self.base._origin_values(size, dtype, device)

    def _tangent0(self, u: torch.Tensor) -> torch.Tensor:
        return self.base._tangent0(u)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        return self.base._check_values(x, atol)
