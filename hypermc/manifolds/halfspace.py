"""The Poincaré upper halfspace model (formulas in :mod:`.math.halfspace`)."""

from __future__ import annotations

import torch

from .._checks import check_bool
from ..mcf import portable
from ..mcf.tensor import MCTensor
from . import convert
from .base import Device, Manifold, _reason
from .math import batch, common, fused
from .math import halfspace as H
from .registry import register_manifold

__all__ = ["PoincareHalfspace"]


@register_manifold
class PoincareHalfspace(Manifold):
    r"""Upper halfspace ``{x in R^n : x_n > 0}`` with metric ``|dx|^2 / (c x_n^2)``.

    The height is the **last** coordinate; the origin is ``(0, ..., 0, 1)``;
    ``curvature = K = -c < 0`` (see :mod:`hypermc.manifolds.base`).

    Precision (MC range): heights anywhere in the normal range of the dtype are exact
    floats (``1e-200 .. 1e200`` in float64), so along the vertical axis the range is
    unlimited. A horizontal coordinate ``x_i`` is resolved to ``u^nc |x_i|``, a
    hyperbolic length ``u^nc |x_i| / x_n``: in the worst direction (``|x_bar| ~ 1``) a
    point at hyperbolic radius ``r`` has ``x_n ~ 2 e^-r``, the same resolution
    ``~ u^nc e^r / 2`` as the ball. ``dist`` is accurate to ``~64 u^nc`` relative for
    the stored points at any height, e.g. ``x = (1, 1e-25)``, ``y = (1 + 1e-30, 1e-25)``
    with float64 ``nc = 3`` (plain float64: 0). ``expmap``, ``expmap0`` and ``retr``
    pass their result through :meth:`projx`, so a height that underflows (a step of
    length > ~700 straight down) becomes the smallest normal number, never 0.

    Example:
        >>> M = PoincareHalfspace()
        >>> x = hm.mc([[1.0, 1e-25]], nc=3, dtype=torch.float64)
        >>> y = x + hm.mc([[1e-30, 0.0]], nc=3, dtype=torch.float64)
        >>> d = M.dist(x, y)  # 2 asinh(1e-30 / (2e-25)) = 1e-5 - 4e-17
        >>> d.shape, f"{float(d):.9e}"
        (torch.Size([1]), '1.000000000e-05')
        >>> M.dist(x.approx(), y.approx())  # plain float64: 1 + 1e-30 rounds to 1
        tensor([0.], dtype=torch.float64)

        Heights like ``e^-300`` are ordinary floats; the maps keep their laws there:

        >>> o = M.origin(2, nc=2, dtype=torch.float64)
        >>> z = M.expmap0(hm.mc([0.0, -300.0], nc=2, dtype=torch.float64))  # straight down
        >>> f"{float(z[-1]):.4e}", round(float(M.dist(o, z)), 9)  # height e^-300
        ('5.1482e-131', 300.0)
        >>> u = M.logmap(z, o)
        >>> round(float(M.norm(z, u)), 9), round(float(M.dist(M.expmap(z, u), o)), 9)
        (300.0, 0.0)
    """

    name = "halfspace"
    min_dim = 1
    converts_to_ball = True
    boundary_cancellation = False  # a height near 0 is a small float, not a cancellation
    fused_dist_batch = staticmethod(fused.halfspace)

    def __init__(self, *, curvature: float | torch.Tensor = -1.0) -> None:
        """Args: curvature: ``K < 0`` (keyword-only; see :mod:`hypermc.manifolds.base`)."""
        super().__init__(curvature=curvature)

    def to_ball(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.halfspace_to_ball` at this curvature.

        Example:
            >>> PoincareHalfspace(curvature=-4.0).to_ball(torch.tensor([0.0, 3.0], dtype=torch.float64))  # radius 1/2
            tensor([0.0000, 0.2500], dtype=torch.float64)
        """
        return convert.halfspace_to_ball(x, curvature=self.curvature)

    def from_ball(self, b: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.ball_to_halfspace` at this curvature.

        Example:
            >>> PoincareHalfspace().from_ball(torch.zeros(2, dtype=torch.float64))
            tensor([0., 1.], dtype=torch.float64)
        """
        return convert.ball_to_halfspace(b, curvature=self.curvature)

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself.

        Example:
            >>> x = torch.tensor([0.5, 2.0])
            >>> PoincareHalfspace().to_halfspace(x) is x
            True
        """
        return x

    def from_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself.

        Example:
            >>> x = torch.tensor([0.5, 2.0])
            >>> PoincareHalfspace().from_halfspace(x) is x
            True
        """
        return x

    def fast_retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The retraction ``(x_bar + u_bar, x_n exp(u_n / x_n))`` with the factor
        ``exp(u_n / x_n)`` rounded in the component dtype from the leading component of
        ``x_n`` (a relative perturbation of the step of ``O(u)``, not of the point), then
        :meth:`projx`; an MCTensor ``x`` by :func:`.math.fused.halfspace_retr` (the bits of
        the same MCTensor expression).

        Example:
            >>> x = hm.mc(torch.tensor([[0.0, 1.0]], dtype=torch.float64), nc=2)
            >>> PoincareHalfspace().fast_retr(x, torch.tensor([[0.5, 1.0]], dtype=torch.float64)).approx()
            tensor([[0.5000, 2.7183]], dtype=torch.float64)
        """
        if isinstance(x, MCTensor):  # the same MC ops on the components: no per-op dispatch
            return MCTensor(fused.halfspace_retr(x.components, u))
        t0 = batch.components_of(x)[..., -1:, 0]
        factor = portable.exp(u[..., -1:] / t0)
        head = x[..., :-1] + u[..., :-1]
        tail = x[..., -1:] * factor
        return self.projx(torch.cat([head, tail], dim=-1))

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance; see :func:`.math.halfspace.dist` (formula, laws, accuracy). ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareHalfspace()
            >>> x, y = torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([0.0, 4.0], dtype=torch.float64)
            >>> round(float(M.dist(x, y)), 9), round(float(torch.log(y[-1] / x[-1]).abs()), 9)  # vertical axis: |log(y_n / x_n)|
            (2.079441542, 2.079441542)
            >>> a = torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=torch.float64)
            >>> b = torch.tensor([[-3.0, 0.5], [1.0, 1.0]], dtype=torch.float64)
            >>> bool(torch.allclose(M.dist(a, b), M.dist(b, a))), M.dist(a, b, keepdim=True).shape  # symmetric
            (True, torch.Size([2, 1]))
        """
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return self._keep("dist", H.dist(x, y, c=self.c), keepdim)

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin ``(0, ..., 0, 1)``. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareHalfspace()
            >>> round(float(M.dist0(torch.tensor([0.0, 2.0], dtype=torch.float64))), 9)  # ln 2
            0.693147181
            >>> x = hm.mc([0.0, 1e-300], nc=2, dtype=torch.float64)  # very close to the boundary: 300 ln 10
            >>> round(float(M.dist0(x)), 6), round(float(M.dist(M.origin(2, nc=2, dtype=torch.float64), x)), 6)
            (690.775528, 690.775528)
        """
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return self._keep("dist0", H.dist(self._origin_like(x), x, c=self.c), keepdim)

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map; see :func:`.math.halfspace.expmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareHalfspace()
            >>> x = torch.tensor([0.0, 1.0], dtype=torch.float64)
            >>> M.expmap(x, torch.tensor([0.0, 1.0], dtype=torch.float64))  # straight up by 1: height e
            tensor([0.0000, 2.7183], dtype=torch.float64)
            >>> x, u = torch.tensor([1.0, 0.5], dtype=torch.float64), torch.tensor([0.3, -0.4], dtype=torch.float64)
            >>> round(float(M.dist(x, M.expmap(x, u))), 9), round(float(M.norm(x, u)), 9)  # travels |u|_x
            (1.0, 1.0)
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return self.projx(H.expmap(x, u))

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map; see :func:`.math.halfspace.logmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareHalfspace()
            >>> x = hm.mc([1.0, 1e-20], nc=2, dtype=torch.float64)  # near the boundary
            >>> y = x + hm.mc([1e-25, 0.0], nc=2, dtype=torch.float64)
            >>> u = M.logmap(x, y)
            >>> round(float(M.norm(x, u)), 9), round(float(M.dist(x, y)), 9)  # |log_x y|_x = d(x, y)
            (1e-05, 1e-05)
            >>> float(M.dist(M.expmap(x, u), y)) < 1e-20  # expmap(x, logmap(x, y)) = y
            True
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return H.logmap(x, y)

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(origin, u)``.

        Example:
            >>> M = PoincareHalfspace()
            >>> z = M.expmap0(torch.tensor([0.0, -2.0], dtype=torch.float64))  # straight down by 2: height e^-2
            >>> round(float(z[-1]), 9), round(float(M.dist0(z)), 9)
            (0.135335283, 2.0)
            >>> u = torch.tensor([0.3, -0.4], dtype=torch.float64)
            >>> bool(torch.allclose(M.logmap0(M.expmap0(u)), u))
            True
        """
        self._check("expmap0", u=u)
        return self.projx(H.expmap(self._origin_like(u), u))

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(origin, y)``. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareHalfspace()
            >>> [round(v, 9) for v in M.logmap0(torch.tensor([0.0, 2.0], dtype=torch.float64)).tolist()]  # straight up, length ln 2
            [0.0, 0.693147181]
            >>> y = torch.tensor([3.0, 0.5], dtype=torch.float64)
            >>> u = M.logmap0(y)
            >>> bool(torch.allclose(M.expmap0(u), y)), abs(float(M.norm(M.origin(2, nc=None, dtype=torch.float64), u) - M.dist0(y))) < 1e-12
            (True, True)
        """
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return H.logmap(self._origin_like(y), y)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Retraction ``(x_bar + u_bar, x_n exp(u_n / x_n))`` (stays in the halfspace).

        Example:
            >>> M = PoincareHalfspace()
            >>> x = torch.tensor([0.0, 1.0], dtype=torch.float64)
            >>> [round(v, 9) for v in M.retr(x, torch.tensor([0.5, -1.0], dtype=torch.float64)).tolist()]  # height e^-1
            [0.5, 0.367879441]
            >>> float(M.retr(x, torch.tensor([0.0, -1000.0], dtype=torch.float64))[-1]) == torch.finfo(torch.float64).tiny  # never 0
            True
        """
        self._check("retr", x=x, u=u)
        return self.projx(H.retr(x, u))

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport; see :func:`.math.halfspace.transp`.

        Example:
            >>> M = PoincareHalfspace()
            >>> x, v = torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64)
            >>> M.transp(x, torch.tensor([0.0, 2.0], dtype=torch.float64), v)  # up the vertical geodesic: scaled by y_n / x_n
            tensor([2., 4.], dtype=torch.float64)
            >>> y = torch.tensor([3.0, 0.5], dtype=torch.float64)
            >>> round(float(M.norm(y, M.transp(x, y, v))), 9), round(float(M.norm(x, v)), 9)  # preserves the norm
            (2.236067977, 2.236067977)
        """
        self._check("transp", x=x, y=y, v=v)
        return H.transp(x, y, v)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``<u, v>_x = <u, v> / (c x_n^2)`` (``v`` defaults to ``u``).

        Example:
            >>> M = PoincareHalfspace()
            >>> x, u = torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
            >>> float(M.inner(x, u)), float(PoincareHalfspace(curvature=-4.0).inner(x, u))  # 1 / (c x_n^2)
            (4.0, 1.0)
            >>> float(M.inner(x, u, torch.tensor([0.0, 3.0], dtype=torch.float64)))  # orthogonal
            0.0
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return H.inner(x, u, v, c=self.c, keepdim=check_bool("PoincareHalfspace.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``|u|_x = |u| / (sqrt(c) x_n)``.

        Example:
            >>> M = PoincareHalfspace()
            >>> float(M.norm(torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([3.0, 4.0], dtype=torch.float64)))  # 5 / 0.5
            10.0
            >>> x = hm.mc([0.0, 1e-200], nc=2, dtype=torch.float64)  # close to the boundary: still exact
            >>> float(M.norm(x, hm.mc([3e-200, 4e-200], nc=2, dtype=torch.float64)))
            5.0
        """
        self._check("norm", x=x, u=u)
        return H.norm(x, u, c=self.c, keepdim=check_bool("PoincareHalfspace.norm", "keepdim", keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Raise heights below the smallest normal number to it (idempotent).

        Example:
            >>> M = PoincareHalfspace()
            >>> p = M.projx(torch.tensor([[0.3, 0.0], [0.3, -1.0], [0.3, 2.0]], dtype=torch.float64))  # lifts heights <= 0
            >>> p[:, -1].tolist()
            [2.2250738585072014e-308, 2.2250738585072014e-308, 2.0]
            >>> bool(torch.equal(M.projx(p), p))  # idempotent
            True
        """
        self._check("projx", x=x)
        return H.projx(x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Every vector is tangent: returns ``u``.

        Example:
            >>> M = PoincareHalfspace()
            >>> x, u = torch.tensor([0.0, 1e-30], dtype=torch.float64), torch.tensor([5.0, -7.0], dtype=torch.float64)
            >>> M.proju(x, u) is u
            True
        """
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient ``c x_n^2 g``.

        Example:
            >>> M = PoincareHalfspace()
            >>> x, g = torch.tensor([0.0, 0.5], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)
            >>> M.egrad2rgrad(x, g)  # scaled by x_n^2
            tensor([0.2500, 0.2500], dtype=torch.float64)
            >>> x = hm.mc([0.0, 1e-100], nc=2, dtype=torch.float64)
            >>> M.egrad2rgrad(x, hm.mc([1.0, 2.0], nc=2, dtype=torch.float64)).approx().tolist()  # x_n^2 = 1e-200
            [1e-200, 2e-200]
        """
        self._check("egrad2rgrad", x=x, g=g)
        return H.egrad2rgrad(x, g, c=self.c)

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Batched distances of table rows; see :meth:`.base.Manifold.dist_batch` and :func:`.math.batch.halfspace`.

        Example:
            >>> M = PoincareHalfspace()
            >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0], [1.0, 1e-20]], nc=2, dtype=torch.float64)
            >>> ia, ib = torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])
            >>> d = M.dist_batch(batch.components_of(table), ia, ib)
            >>> [round(v, 6) for v in d.tolist()], bool(torch.allclose(d, M.dist(table[ia], table[ib]).approx()))
            ([0.693147, 46.744849, 46.967993], True)
        """
        self._check_batch(rows, ia, ib, leaf, cache)
        return batch.halfspace(rows, ia, ib, c=self.c, leaf=leaf, cache=cache)

    # -------------------------------------------------------------- helpers

    def _origin_like(self, x: torch.Tensor) -> torch.Tensor:
        """The origin as a plain tensor ``(n,)`` (broadcasts against ``x``)."""
        return self._origin_values((x.shape[-1],), x.dtype, x.device)

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        out = torch.zeros(size, dtype=dtype, device=device)
        out[..., -1] = 1
        return out

    def _origin_tangent(self, u: torch.Tensor) -> torch.Tensor:
        return common.scale_c(u, c=self.c, power=0.5)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        bad = common.lead(x[..., -1]) <= 0
        if bool(bad.any()):
            return False, _reason("height x_n <= 0 (outside the halfspace)", bad)
        return True, None
