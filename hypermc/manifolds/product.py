"""The product of manifolds (geoopt's ``ProductManifold``), points concatenated along the
last dimension."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .._checks import check_instance, check_int
from .base import Device, Manifold
from .math import common

__all__ = ["ProductManifold"]


class ProductManifold(Manifold):
    """``M_1 x ... x M_m``: a point is the concatenation of one point of each factor
    along the last dimension (geoopt's layout for one-dimensional factors), with the
    product metric: ``dist = sqrt(sum_i dist_i^2)``, ``inner = sum_i inner_i``; maps,
    projections and transport act factor by factor.

    Factor ``i`` is the submodule ``factor<i>`` (every model is an ``nn.Module``), so a
    model that owns the product lists, trains and saves the learnable factors'
    curvatures (``factor0.isp_c``, ...).

    Args:
        manifolds_with_sizes: pairs ``(manifold, n_i)``: each factor and the size of its
            point dimension (an int, or a one-element tuple as geoopt writes it).

    Example:
        >>> from hypermc.manifolds import Lorentz, PoincareBall, Sphere
        >>> M = ProductManifold((PoincareBall(), 2), (Sphere(), 3), (Lorentz(), (3,)))
        >>> x = M.random(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        >>> y = M.random(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        >>> parts = [m.dist(a, b) for m, a, b in zip(M.manifolds, M.split(x), M.split(y))]
        >>> bool(torch.allclose(M.dist(x, y), sum(p**2 for p in parts).sqrt())), M.check_point(x)
        (True, (True, None))
        >>> bool(torch.allclose(M.expmap(x, M.logmap(x, y)), y))
        True
    """

    name = "product"

    def __new__(cls, *args: object, **kwargs: object) -> ProductManifold:
        return object.__new__(cls)  # the factors are positional, as in geoopt

    def __init__(self, *manifolds_with_sizes: tuple[Manifold, int | Sequence[int]]) -> None:
        nn.Module.__init__(self)
        if not manifolds_with_sizes:
            raise ValueError("ProductManifold: needs at least one (manifold, size) pair")
        self.manifolds: list[Manifold] = []
        self.sizes: list[int] = []
        for i, pair in enumerate(manifolds_with_sizes):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"ProductManifold: argument {i} must be a (manifold, size) pair; got {pair!r}")
            m, n = pair
            check_instance("ProductManifold", f"manifold {i}", m, Manifold, "a hypermc manifold")
            if isinstance(n, (tuple, list, torch.Size)):
                if len(n) != 1:
                    raise ValueError(f"ProductManifold: size {i} must be one point dimension; got {tuple(n)}")
                n = n[0]
            n = check_int("ProductManifold", f"size {i}", n, minimum=m.min_dim)
            self.manifolds.append(m)
            self.sizes.append(n)
            self.add_module(f"factor{i}", m)
        self.min_dim = sum(self.sizes)
        self.c = float("nan")  # no single curvature
        self.curvature = float("nan")

    def __repr__(self) -> str:
        return "ProductManifold(" + ", ".join(f"({m!r}, {n})" for m, n in zip(self.manifolds, self.sizes)) + ")"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProductManifold) and self.manifolds == other.manifolds and self.sizes == other.sizes

    def __hash__(self) -> int:
        return hash(("ProductManifold", tuple(self.manifolds), tuple(self.sizes)))

    def split(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The factors' parts of ``x`` (views along the last dimension).

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> [t.tolist() for t in ProductManifold((Euclidean(), 1), (Euclidean(), 2)).split(torch.arange(3.0))]
            [[0.0], [1.0, 2.0]]
        """
        if x.shape[-1] != self.min_dim:
            raise ValueError(f"ProductManifold: the last dimension must be {self.min_dim} (sizes {self.sizes}); got shape {tuple(x.shape)}")
        return list(torch.split(x, self.sizes, dim=-1))

    def _map(self, fn: Callable[..., torch.Tensor], *tensors: torch.Tensor) -> torch.Tensor:
        parts = [fn(m, *ps) for m, *ps in zip(self.manifolds, *(self.split(t) for t in tensors))]
        return torch.cat(parts, dim=-1)

    def _sum(self, fn: Callable[..., torch.Tensor], keepdim: bool, *tensors: torch.Tensor) -> torch.Tensor:
        parts = [fn(m, *ps) for m, *ps in zip(self.manifolds, *(self.split(t) for t in tensors))]
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out.unsqueeze(-1) if keepdim else out

    def dist2(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``sum_i dist_i^2``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).dist2(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(25.)
        """
        self._check("dist2", x=x, y=y)
        return self._sum(lambda m, a, b: m.dist2(a, b, check=check), keepdim, x, y)

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``sqrt(sum_i dist_i^2)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).dist(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(5.)
        """
        return common.safe_sqrt(self.dist2(x, y, keepdim=keepdim, check=check))

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin (the product of the factors' origins).

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).dist0(torch.tensor([3.0, 4.0]))
            tensor(5.)
        """
        self._check("dist0", x=x)
        return common.safe_sqrt(self._sum(lambda m, a: m.dist0(a, check=check) ** 2, keepdim, x))

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).expmap(torch.zeros(2), torch.ones(2))
            tensor([1., 1.])
        """
        self._check("expmap", x=x, u=u)
        return self._map(lambda m, a, b: m.expmap(a, b, check=check), x, u)

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).logmap(torch.zeros(2), torch.ones(2))
            tensor([1., 1.])
        """
        self._check("logmap", x=x, y=y)
        return self._map(lambda m, a, b: m.logmap(a, b, check=check), x, y)

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).expmap0(torch.ones(2))
            tensor([1., 1.])
        """
        self._check("expmap0", u=u)
        return self._map(lambda m, a: m.expmap0(a), u)

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).logmap0(torch.ones(2))
            tensor([1., 1.])
        """
        self._check("logmap0", y=y)
        return self._map(lambda m, a: m.logmap0(a, check=check), y)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).retr(torch.zeros(2), torch.ones(2))
            tensor([1., 1.])
        """
        self._check("retr", x=x, u=u)
        return self._map(lambda m, a, b: m.retr(a, b), x, u)

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).transp(torch.zeros(2), torch.ones(2), torch.ones(2))
            tensor([1., 1.])
        """
        self._check("transp", x=x, y=y, v=v)
        return self._map(lambda m, a, b, c: m.transp(a, b, c), x, y, v)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``sum_i inner_i``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).inner(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(25.)
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return self._sum(lambda m, a, b, c: m.inner(a, b, c), keepdim, x, u, v)

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``sqrt(inner(x, u, u))``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> ProductManifold((Euclidean(), 1), (Euclidean(), 1)).norm(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(5.)
        """
        return common.clamped_sqrt(self.inner(x, u, keepdim=keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean, Sphere
            >>> ProductManifold((Euclidean(), 1), (Sphere(), 2)).projx(torch.tensor([7.0, 3.0, 4.0]))
            tensor([7.0000, 0.6000, 0.8000])
        """
        self._check("projx", x=x)
        return self._map(lambda m, a: m.projx(a), x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean, Sphere
            >>> ProductManifold((Euclidean(), 1), (Sphere(), 2)).proju(torch.tensor([7.0, 1.0, 0.0]), torch.ones(3))
            tensor([1., 0., 1.])
        """
        self._check("proju", x=x, u=u)
        return self._map(lambda m, a, b: m.proju(a, b), x, u)

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Factor by factor.

        Example:
            >>> from hypermc.manifolds import Euclidean, PoincareBall
            >>> ProductManifold((Euclidean(), 1), (PoincareBall(), 1)).egrad2rgrad(torch.zeros(2), torch.ones(2))
            tensor([1.0000, 0.2500])
        """
        self._check("egrad2rgrad", x=x, g=g)
        return self._map(lambda m, a, b: m.egrad2rgrad(a, b), x, g)

    # ----------------------------------------------------------------- helpers

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        lead = size[:-1]
        return torch.cat([m._origin_values((*lead, n), dtype, device) for m, n in zip(self.manifolds, self.sizes)], dim=-1)

    def _origin_tangent(self, u: torch.Tensor) -> torch.Tensor:
        return self._map(lambda m, a: m._origin_tangent(a), u)

    def _tangent0(self, u: torch.Tensor) -> torch.Tensor:
        return self._map(lambda m, a: m._tangent0(a), u)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        for i, (m, part) in enumerate(zip(self.manifolds, self.split(x))):
            ok, reason = m.check_point(part, atol=atol)
            if not ok:
                return False, f"factor {i} ({m!r}): {reason}"
        return True, None

    def _check_tangent_values(self, x: torch.Tensor, u: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        for i, (m, a, b) in enumerate(zip(self.manifolds, self.split(x), self.split(u))):
            ok, reason = m._check_tangent_values(a, b, atol)
            if not ok:
                return False, f"factor {i} ({m!r}): {reason}"
        return True, None
