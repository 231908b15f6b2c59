"""The unit sphere in ``R^n`` (formulas in :mod:`.math.sphere`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._checks import check_bool, check_instance
from ..mcf.tensor import mc
from .base import Device, Manifold, _reason
from .math import common
from .math import sphere as Sp

__all__ = ["Sphere"]

#: ``check_point`` accepts ``||x| - 1| <= 2^MARGIN_BITS u^nc``.
MARGIN_BITS = 8


class Sphere(Manifold):
    """The unit sphere ``{x : |x| = 1}`` of ``R^n`` with the induced metric (geoopt's ``Sphere``,
    without its ``intersection`` / ``complement`` subspaces).

    Origin ``e_0 = (1, 0, ..., 0)`` (the base point of ``expmap0`` / ``logmap0`` /
    ``dist0``); tangent vectors at ``x`` satisfy ``<x, u> = 0`` (:meth:`proju`).
    ``transp`` is parallel transport along the shortest geodesic (geoopt's
    ``Sphere.transp`` projects instead). ``random`` draws ``expmap0`` of normal tangent
    coordinates, :meth:`random_uniform` uniform points (geoopt's ``random``).

    Example:
        >>> M = Sphere()
        >>> x, y = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
        >>> round(float(M.dist(x, y)), 9), round(float(M.dist(x, -x)), 9)
        (1.570796327, 3.141592654)
        >>> bool(torch.allclose(M.expmap(x, M.logmap(x, y)), y))
        True
    """

    name = "sphere"
    min_dim = 1

    def __init__(self) -> None:
        """Takes no arguments (the unit sphere: curvature 1)."""
        self.c: float = -1.0
        self.curvature: float = 1.0

    def __repr__(self) -> str:
        return "Sphere()"

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """The angle between ``x`` and ``y``; see :func:`.math.sphere.dist`.

        Example:
            >>> Sphere().dist(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), keepdim=True)
            tensor([1.5708])
        """
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return self._keep("dist", Sp.dist(x, y), keepdim)

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from ``e_0``.

        Example:
            >>> Sphere().dist0(torch.tensor([0.0, 1.0]))
            tensor(1.5708)
        """
        self._check("dist0", x=x)
        return self.dist(self._origin_like(x), x, keepdim=keepdim, check=check)

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map; see :func:`.math.sphere.expmap` (then :meth:`projx`).

        Example:
            >>> x, u = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, torch.pi], dtype=torch.float64)
            >>> Sphere().expmap(x, u).round(decimals=12)
            tensor([-1.,  0.], dtype=torch.float64)
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return self.projx(Sp.expmap(x, u))

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map; see :func:`.math.sphere.logmap`.

        Example:
            >>> Sphere().logmap(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64))
            tensor([0.0000, 1.5708], dtype=torch.float64)
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return Sp.logmap(x, y)

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(e_0, u)`` (``u`` projected onto the tangent space at ``e_0``).

        Example:
            >>> Sphere().expmap0(torch.tensor([5.0, torch.pi / 2], dtype=torch.float64)).round(decimals=12)
            tensor([0., 1.], dtype=torch.float64)
        """
        self._check("expmap0", u=u)
        return self.expmap(self._origin_like(u), self._tangent0(u), check=False)

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(e_0, y)``.

        Example:
            >>> Sphere().logmap0(torch.tensor([0.0, 1.0], dtype=torch.float64))
            tensor([0.0000, 1.5708], dtype=torch.float64)
        """
        self._check("logmap0", y=y)
        return self.logmap(self._origin_like(y), y, check=check)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Retraction ``(x + u) / |x + u|``.

        Example:
            >>> Sphere().retr(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))
            tensor([0.7071, 0.7071])
        """
        self._check("retr", x=x, u=u)
        return self.projx(x + u)

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport; see :func:`.math.sphere.transp`.

        Example:
            >>> Sphere().transp(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), torch.tensor([0.0, 2.0]))
            tensor([-2.,  0.])
        """
        self._check("transp", x=x, y=y, v=v)
        return Sp.transp(x, y, v)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``<u, v>`` (the induced metric).

        Example:
            >>> Sphere().inner(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0]))
            tensor(9.)
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return common.dot(u, v, keepdim=check_bool("Sphere.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``|u|``.

        Example:
            >>> Sphere().norm(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 3.0, 4.0]))
            tensor(5.)
        """
        self._check("norm", x=x, u=u)
        return common.norm(u, keepdim=check_bool("Sphere.norm", "keepdim", keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """``x / |x|``.

        Example:
            >>> Sphere().projx(torch.tensor([3.0, 4.0]))
            tensor([0.6000, 0.8000])
        """
        self._check("projx", x=x)
        return Sp.projx(x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``u - <x, u> x``.

        Example:
            >>> Sphere().proju(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 3.0]))
            tensor([0., 3.])
        """
        self._check("proju", x=x, u=u)
        return Sp.proju(x, u)

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient ``proju(x, g)`` (a new tensor).

        Example:
            >>> Sphere().egrad2rgrad(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 3.0]))
            tensor([0., 3.])
        """
        self._check("egrad2rgrad", x=x, g=g)
        return Sp.proju(x, g)

    def random_uniform(
        self,
        *size: int | Sequence[int],
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: Device = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Uniform points (normalised Gaussian vectors), geoopt's ``Sphere.random``.

        Example:
            >>> x = Sphere().random_uniform(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            >>> x.norm(dim=-1).tolist() == [1.0] * 4 or bool(torch.allclose(x.norm(dim=-1), torch.ones(4, dtype=torch.float64)))
            True
        """
        size = self._size("random_uniform", size)
        dtype = self._factory_args("random_uniform", nc, dtype)
        if generator is not None:
            check_instance("Sphere.random_uniform", "generator", generator, torch.Generator, "a torch.Generator or None")
        g = torch.randn(size, dtype=dtype, device=device, generator=generator)
        return self.projx(g if nc is None else mc(g, nc=nc))

    # ----------------------------------------------------------------- helpers

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        out = torch.zeros(size, dtype=dtype, device=device)
        out[..., 0] = 1.0
        return out

    def _tangent0(self, u: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros_like(u[..., :1]), u[..., 1:]], dim=-1)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        tol = atol if atol is not None else 2.0**MARGIN_BITS * common.unit_roundoff(x)
        bad = common.lead(torch.abs(common.norm(x) - 1)) > tol
        if bool(bad.any()):
            return False, _reason(f"||x| - 1| > {tol:.3g} (off the unit sphere)", bad)
        return True, None

    def _check_tangent_values(self, x: torch.Tensor, u: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        tol = atol if atol is not None else 2.0**MARGIN_BITS * common.unit_roundoff(x)
        bad = common.lead(torch.abs(common.dot(x, u))) > tol * common.lead(common.norm(u)).clamp_min(1.0)
        if bool(bad.any()):
            return False, _reason(f"|<x, u>| > {tol:.3g} |u| (not tangent)", bad)
        return True, None
