"""Euclidean space with the manifold interface (for uniform code paths)."""

from __future__ import annotations

import torch

from .._checks import check_bool
from .base import Device, Manifold
from .math import batch, common
from .registry import register_manifold

__all__ = ["Euclidean"]


@register_manifold
class Euclidean(Manifold):
    """``R^n`` with the Euclidean metric (curvature 0): ``expmap(x, u) = x + u``,
    ``logmap(x, y) = y - x``, ``dist = |x - y|``, transport is the identity. MC inputs
    give MC results like every other model. ``projx`` and ``proju`` are the identity
    (so the points ``expmap`` and ``retr`` return are their own projections).

    The optimizers treat parameters without a manifold as ``Euclidean()``.

    Example:
        >>> E = Euclidean()
        >>> E, E.curvature
        (Euclidean(), 0.0)
        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64)
        >>> y = E.expmap(x, hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64))  # x + u
        >>> float(E.dist(x, y)), float(E.dist(x.approx(), y.approx()))  # float64: 1 + 1e-20 == 1
        (1e-20, 0.0)
        >>> a, b = torch.tensor([3.0, 4.0]), torch.tensor([1.0, 2.0])
        >>> E.dist0(a), E.inner(a, a, b), E.logmap(a, b)
        (tensor(5.), tensor(11.), tensor([-2., -2.]))
    """

    name = "euclidean"
    min_dim = 1
    config_args = ()  # no curvature
    identity_metric = True

    def __init__(self) -> None:
        """Takes no arguments (the curvature is 0)."""
        self.c: float = 0.0
        self.curvature: float = 0.0

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``|x - y|``. ``check``: see :mod:`.base`.

        Example:
            >>> E = Euclidean()
            >>> float(E.dist(torch.tensor([1.0, 1.0]), torch.tensor([4.0, 5.0])))
            5.0
            >>> x, y = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64), hm.mc([1.0, 1e-20], nc=2, dtype=torch.float64)
            >>> float(E.dist(x, y))  # MC arithmetic keeps the 1e-20
            1e-20
        """
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return common.norm(x - y, keepdim=check_bool("Euclidean.dist", "keepdim", keepdim))

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """``|x|``. ``check``: see :mod:`.base`.

        Example:
            >>> E = Euclidean()
            >>> float(E.dist0(torch.tensor([3.0, 4.0]))), E.dist0(torch.tensor([[3.0, 4.0]]), keepdim=True).shape
            (5.0, torch.Size([1, 1]))
        """
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return common.norm(x, keepdim=check_bool("Euclidean.dist0", "keepdim", keepdim))

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``x + u``. ``check``: see :mod:`.base`.

        Example:
            >>> E, x, u = Euclidean(), torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
            >>> y = torch.tensor([4.0, 6.0])
            >>> E.expmap(x, u).tolist(), E.expmap(x, E.logmap(x, y)).tolist()  # x + u; expmap(x, logmap(x, y)) = y
            ([1.5, 1.0], [4.0, 6.0])
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return x + u

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``y - x``. ``check``: see :mod:`.base`.

        Example:
            >>> E, x, y = Euclidean(), torch.tensor([1.0, 2.0]), torch.tensor([4.0, 6.0])
            >>> E.logmap(x, y).tolist(), float(E.norm(x, E.logmap(x, y))) == float(E.dist(x, y))  # y - x, of norm d(x, y)
            ([3.0, 4.0], True)
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return y - x

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``u``.

        Example:
            >>> E, u = Euclidean(), hm.mc([0.5, -1.0], nc=2, dtype=torch.float64)
            >>> E.expmap0(u) is u, E.expmap0(u).nc
            (True, 2)
        """
        self._check("expmap0", u=u)
        return u

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``y``. ``check``: see :mod:`.base`.

        Example:
            >>> E, y = Euclidean(), torch.tensor([4.0, 6.0])
            >>> E.logmap0(y).tolist(), E.logmap0(y).tolist() == E.logmap(E.origin(2, nc=None), y).tolist()
            ([4.0, 6.0], True)
        """
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return y

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``x + u``.

        Example:
            >>> E, x, u = Euclidean(), torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
            >>> E.retr(x, u).tolist(), torch.equal(E.retr(x, u), E.expmap(x, u))  # the same as expmap
            ([1.5, 1.0], True)
        """
        self._check("retr", x=x, u=u)
        return x + u

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``v``.

        Example:
            >>> E, x, y, v = Euclidean(), torch.tensor([1.0, 2.0]), torch.tensor([4.0, 6.0]), torch.tensor([0.5, -1.0])
            >>> E.transp(x, y, v).tolist()
            [0.5, -1.0]
        """
        self._check("transp", x=x, y=y, v=v)
        return v

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``<u, v>``.

        Example:
            >>> E, x = Euclidean(), torch.tensor([1.0, 2.0])
            >>> u, v = torch.tensor([3.0, 4.0]), torch.tensor([1.0, -2.0])
            >>> float(E.inner(x, u, v)), float(E.inner(x, u)), E.inner(x, u, v, keepdim=True).shape  # the dot product; v defaults to u
            (-5.0, 25.0, torch.Size([1]))
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return common.dot(u, v, keepdim=check_bool("Euclidean.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``|u|``.

        Example:
            >>> E, x, u = Euclidean(), torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
            >>> float(E.norm(x, u)), float(E.norm(x, u) ** 2) == float(E.inner(x, u, u))
            (5.0, True)
        """
        self._check("norm", x=x, u=u)
        return common.norm(u, keepdim=check_bool("Euclidean.norm", "keepdim", keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """``x``.

        Example:
            >>> x = torch.tensor([1e6, -2.0])
            >>> Euclidean().projx(x) is x  # every point is in R^n
            True
        """
        self._check("projx", x=x)
        return x

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``u``.

        Example:
            >>> x, u = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
            >>> Euclidean().proju(x, u) is u  # every vector is tangent
            True
        """
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``g``.

        Example:
            >>> x, g = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
            >>> Euclidean().egrad2rgrad(x, g) is g  # the metric is the identity
            True
        """
        self._check("egrad2rgrad", x=x, g=g)
        return g

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Batched distances of table rows; see :meth:`.base.Manifold.dist_batch` and :func:`.math.batch.euclidean`.

        Example:
            >>> from hypermc.manifolds.math.batch import components_of
            >>> table = hm.mc([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]], nc=2, dtype=torch.float64)
            >>> d = Euclidean().dist_batch(components_of(table), torch.tensor([0, 1]), torch.tensor([1, 2]))
            >>> [round(v, 6) for v in d.tolist()]  # |(3, 4)|, |(2, 3)| = sqrt(13)
            [5.0, 3.605551]
        """
        self._check_batch(rows, ia, ib, leaf, cache)
        return batch.euclidean(rows, ia, ib, leaf=leaf, cache=cache)

    def __repr__(self) -> str:
        return "Euclidean()"

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        return torch.zeros(size, dtype=dtype, device=device)
