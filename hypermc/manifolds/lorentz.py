"""The Lorentz (hyperboloid) model (formulas in :mod:`.math.lorentz`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_bool
from ..mcf.eft import float_format
from ..mcf.tensor import MCTensor
from . import convert
from .base import Device, Manifold, _reason, geoopt_curvature, learnable_curvature_argument
from .math import batch, common, fused
from .math import lorentz as L
from .math.batch import components_of
from .registry import register_manifold

__all__ = ["Lorentz", "LearnableLorentz"]

#: ``check_point`` accepts ``|<x, x>_L + 1/c| <= 2^CONSTRAINT_MARGIN_BITS u^k x_0^2``
#: (the constraint of stored coordinates holds only to ``~ u^k x_0^2``), ``k <= nc`` the
#: components the point carries (a float64 point lifted to ``nc = 2`` carries one).
CONSTRAINT_MARGIN_BITS = 8


def _constraint_tolerance(x: torch.Tensor) -> torch.Tensor:
    """``2^CONSTRAINT_MARGIN_BITS max(u^k, s)`` per point (float64), ``k`` the components it carries.

    ``k`` is the index of the last non-zero component over the point's coordinates
    (1 for a plain tensor, and for an MCTensor lifted from one: ``hm.mc(p64, nc=2)`` of
    a float64 point holds the constraint only to float64's ``u``, and is accepted as
    such); ``s`` is the dtype's smallest subnormal (the coordinates resolve no finer
    whatever ``nc``).
    """
    comps = components_of(x)  # (..., n + 1, nc)
    order = torch.arange(1, comps.shape[-1] + 1, device=comps.device)
    k = torch.where(comps != 0, order, 1).amax(dim=(-2, -1)).to(torch.float64)
    info = torch.finfo(x.dtype)
    floor = 2.0**CONSTRAINT_MARGIN_BITS * info.smallest_normal * info.eps
    return torch.exp2(CONSTRAINT_MARGIN_BITS - float_format(x.dtype).p * k).clamp_min(floor)


@register_manifold
class Lorentz(Manifold):
    r"""Hyperboloid ``{x in R^(n+1) : -x_0^2 + |x_bar|^2 = -1/c, x_0 > 0}``.

    Time coordinate **first**; ``curvature = K = -c < 0`` (see
    :mod:`hypermc.manifolds.base`); origin ``(1/sqrt c, 0, ..., 0)``. A point of
    dimension ``n + 1`` corresponds to a ball / halfspace point of dimension ``n``.

    Precision (MC range): coordinates grow like ``e^r / 2`` and the constraint of the
    stored coordinates holds to ``~ u^nc x_0^2 ~ u^nc e^(2r) / 4``, which limits close
    distances and maps: points are resolved to hyperbolic lengths below ``1e-6`` up to
    ``r ~ (nc p ln2 - 13) / 2`` — about half of the ball's range (float64: 11, 30, 48
    for nc = 1, 2, 3). Distances between points far apart are accurate further out:
    tested float64 ``nc = 2`` at ``r = 25`` within ``1e-6`` of mpmath.

    ``inner`` and ``norm`` are the Minkowski product of tangent vectors; ``expmap`` and
    ``projx`` recompute ``x_0`` from the spatial part.

    Example:
        A step of length ``1e-3`` at hyperbolic radius 20, where the coordinates are
        ``~2.4e8``: float64 loses the step in the rounding of the constraint
        (``<x - y, x - y>_L = 1e-6`` cancels out of ``x_0^2 ~ 6e16``), ``nc = 2`` keeps it:

        >>> M = Lorentz()
        >>> o = M.origin(3, nc=2, dtype=torch.float64)
        >>> o.approx()
        tensor([1., 0., 0.], dtype=torch.float64)
        >>> x = M.expmap0(hm.mc([0.0, 20.0, 0.0], nc=2, dtype=torch.float64))
        >>> v = M.transp(o, x, hm.mc([0.0, 1e-3, 0.0], nc=2, dtype=torch.float64))  # radial, norm 1e-3
        >>> y = M.expmap(x, v)
        >>> round(float(M.dist0(x)), 9), round(float(M.dist(x, y)), 9), M.check_point(y)
        (20.0, 0.001, (True, None))
        >>> M.dist(x.approx(), y.approx())
        tensor(0., dtype=torch.float64)
        >>> u = M.logmap(x, y)  # tangent: <x, u>_L = 0 (terms ~6e13 cancel), norm d(x, y)
        >>> round(float(M.norm(x, u)), 9), abs(float(M.inner(x, x, u))) < 1e-12
        (0.001, True)
    """

    name = "lorentz"
    min_dim = 2
    extra_coordinates = 1  # the time coordinate x_0
    converts_to_ball = True
    fused_dist_batch = staticmethod(fused.lorentz)

    def __init__(
        self, *, curvature: float | torch.Tensor | None = None, k: float | torch.Tensor | None = None, learnable: bool = False
    ) -> None:
        """Args (keyword-only; see :mod:`hypermc.manifolds.base`):
            curvature: ``K < 0`` (default ``-1``).
            k: geoopt's argument ``k > 0``, the hyperboloid ``<x, x>_L = -k``: ``K = -1/k``.
            learnable: ``True`` returns a :class:`LearnableLorentz` instead, whose ``k`` is
                an ``nn.Parameter`` (geoopt's ``learnable=True``).

        Example:
            >>> Lorentz(k=4.0), Lorentz(k=4.0).k, Lorentz(k=4.0).origin(3).tolist()  # origin (sqrt k, 0, 0)
            (Lorentz(curvature=-0.25), 4.0, [2.0, 0.0, 0.0])
        """
        super().__init__(curvature=geoopt_curvature(type(self).__name__, curvature, "k", k, lambda v: -1.0 / v, learnable))

    def to_ball(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.lorentz_to_ball` at this curvature.

        Example:
            >>> Lorentz().to_ball(torch.tensor([5 / 3, 4 / 3, 0.0], dtype=torch.float64))
            tensor([0.5000, 0.0000], dtype=torch.float64)
        """
        return convert.lorentz_to_ball(x, curvature=self.curvature)

    def from_ball(self, b: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.ball_to_lorentz` at this curvature.

        Example:
            >>> Lorentz(curvature=-4.0).from_ball(torch.zeros(2, dtype=torch.float64))  # the origin (1/sqrt c, 0, 0)
            tensor([0.5000, 0.0000, 0.0000], dtype=torch.float64)
        """
        return convert.ball_to_lorentz(b, curvature=self.curvature)

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.lorentz_to_halfspace` at this curvature (directly, not through the ball).

        Example:
            >>> Lorentz().to_halfspace(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
            tensor([0., 1.], dtype=torch.float64)
        """
        return convert.lorentz_to_halfspace(x, curvature=self.curvature)

    def from_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`.convert.halfspace_to_lorentz` at this curvature (directly, not through the ball).

        Example:
            >>> Lorentz().from_halfspace(torch.tensor([0.0, 1.0], dtype=torch.float64))
            tensor([1., 0., 0.], dtype=torch.float64)
        """
        return convert.halfspace_to_lorentz(x, curvature=self.curvature)

    def _c(self, like: torch.Tensor) -> float | torch.Tensor:
        """``c`` as the formulas take it for operands like ``like`` (the float; a learnable
        model's tensor, exact in MC arithmetic for MC operands)."""
        return self.c

    @property
    def k(self) -> float:
        """geoopt's ``k = 1/c = -1/K`` (``<x, x>_L = -k``).

        Example:
            >>> Lorentz(curvature=-0.5).k
            2.0
        """
        return 1.0 / self.c

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance; see :func:`.math.lorentz.dist` (formula, laws, accuracy). ``check``: see :mod:`.base`.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> y = M.expmap0(torch.tensor([0.0, -0.5, 2.0], dtype=torch.float64))
            >>> round(float(M.dist(x, y)), 9), round(float(M.dist(y, x)), 9), round(float(M.dist(x, x)), 9)  # symmetric, d(x, x) = 0
            (2.671144007, 2.671144007, 0.0)
            >>> xm = M.expmap0(hm.mc([0.0, 20.0, 0.0], nc=2, dtype=torch.float64))  # coordinates ~2.4e8
            >>> round(float(M.dist(xm, M.expmap0(hm.mc([0.0, 20.0 + 1e-6, 0.0], nc=2, dtype=torch.float64)))), 12)
            1e-06
        """
        self._check("dist", x=x, y=y)
        if check_bool("Lorentz.dist", "check", check) and common.row_blocks_apply(x, y):
            # large plain points: the check in the distance's own pass over the rows
            d, ok = common.row_blocked(lambda a, b: (L.dist(a, b, c=self._c(a)), self._rows_ok(a) & self._rows_ok(b)), x, y)
            if not bool(ok.all()):
                self._check_on("dist", True, x=x, y=y)  # raises, with the reason
            return self._keep("dist", d, keepdim)
        self._check_on("dist", check, x=x, y=y)
        return self._keep("dist", L.dist(x, y, c=self._c(x)), keepdim)

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin ``asinh(sqrt(c)|x_bar|) / sqrt(c)``. ``check``: see :mod:`.base`.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 0.0, 1.5], dtype=torch.float64))
            >>> round(float(M.dist0(x)), 9), round(float(M.dist(M.origin(3, nc=None, dtype=torch.float64), x)), 9)
            (1.5, 1.5)
            >>> M.dist0(x, keepdim=True).shape
            torch.Size([1])
        """
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return self._keep("dist0", L.dist0(x, c=self._c(x)), keepdim)

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map; see :func:`.math.lorentz.expmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> u = M.proju(x, torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64))  # tangent at x
            >>> y = M.expmap(x, u)  # d(x, y) = norm(x, u), y on the hyperboloid
            >>> round(float(M.dist(x, y)), 9), round(float(M.norm(x, u)), 9), round(float(L.minkowski(y, y)), 9)
            (2.0, 2.0, -1.0)
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return L.expmap(x, u, c=self._c(x))

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map; see :func:`.math.lorentz.logmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(hm.mc([0.0, 20.0, 0.0], nc=2, dtype=torch.float64))
            >>> y = M.expmap0(hm.mc([0.0, 20.0 + 1e-6, 0.0], nc=2, dtype=torch.float64))
            >>> u = M.logmap(x, y)  # norm(x, logmap(x, y)) = d(x, y); expmap(x, logmap(x, y)) = y
            >>> round(float(M.norm(x, u)), 12), round(float(M.dist(M.expmap(x, u), y)), 12)
            (1e-06, 0.0)
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return L.logmap(x, y, c=self._c(x))

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(origin, u)``; see :func:`.math.lorentz.expmap0`.

        Example:
            >>> M = Lorentz()
            >>> M.expmap0(torch.tensor([0.0, 1.0], dtype=torch.float64))  # (cosh 1, sinh 1)
            tensor([1.5431, 1.1752], dtype=torch.float64)
            >>> y = M.expmap0(torch.tensor([0.0, 0.6, 0.8], dtype=torch.float64))
            >>> round(float(M.dist0(y)), 9), bool(torch.allclose(M.logmap0(y), torch.tensor([0.0, 0.6, 0.8], dtype=torch.float64)))
            (1.0, True)
        """
        self._check("expmap0", u=u)
        return L.expmap0(u, c=self._c(u))

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(origin, y)``; see :func:`.math.lorentz.logmap0`. ``check``: see :mod:`.base`.

        Example:
            >>> M = Lorentz()
            >>> M.logmap0(M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)))
            tensor([0., 1., 0.], dtype=torch.float64)
            >>> y = M.expmap0(hm.mc([0.0, 0.0, 20.0], nc=2, dtype=torch.float64))  # coordinates ~2.4e8
            >>> round(float(M.logmap0(y)[2]), 9)  # round-trips
            20.0
        """
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return L.logmap0(y, c=self._c(y))

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Retraction ``projx(x + u)``.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> v = M.proju(x, torch.tensor([0.0, 0.1, 0.2], dtype=torch.float64))
            >>> r = M.retr(x, v)  # on the hyperboloid, close to expmap(x, v) for small v
            >>> round(float(L.minkowski(r, r)), 9), M.check_point(r), round(float(M.dist(r, M.expmap(x, v))), 6)
            (-1.0, (True, None), 0.023081)
        """
        self._check("retr", x=x, u=u)
        return self.projx(x + u)

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport; see :func:`.math.lorentz.transp`.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> y = M.expmap0(torch.tensor([0.0, -0.5, 2.0], dtype=torch.float64))
            >>> v = M.proju(x, torch.tensor([0.0, 0.3, 0.4], dtype=torch.float64))
            >>> pv = M.transp(x, y, v)  # tangent at y, same norm
            >>> round(float(M.norm(y, pv)), 9) == round(float(M.norm(x, v)), 9), abs(float(M.inner(y, y, pv))) < 1e-12
            (True, True)
        """
        self._check("transp", x=x, y=y, v=v)
        return L.transp(x, y, v, c=self._c(x))

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """Minkowski product ``<u, v>_L`` of tangent vectors (``v`` defaults to ``u``).

        Example:
            >>> M = Lorentz()
            >>> o = M.origin(3, nc=None, dtype=torch.float64)
            >>> M.inner(o, torch.tensor([0.0, 3.0, 4.0], dtype=torch.float64))
            tensor(25., dtype=torch.float64)
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> round(float(M.inner(x, x)), 9)  # a point itself: <x, x>_L = -1/c
            -1.0
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return L.inner(x, u, v, c=self._c(x), keepdim=check_bool("Lorentz.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``sqrt(<u, u>_L)`` (0 where rounding makes it negative). geoopt's one-argument
        form ``norm(u)`` is accepted (the value does not depend on the point).

        Example:
            >>> M = Lorentz()
            >>> M.norm(M.origin(3, nc=None, dtype=torch.float64), torch.tensor([0.0, 3.0, 4.0], dtype=torch.float64))
            tensor(5., dtype=torch.float64)
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> round(float(M.norm(x, M.logmap(x, M.origin(3, nc=None, dtype=torch.float64)))), 9)  # = d(x, o)
            1.0
        """
        if u is None:
            x, u = x, x
        self._check("norm", x=x, u=u)
        return L.norm(x, u, c=self._c(x), keepdim=check_bool("Lorentz.norm", "keepdim", keepdim))

    def inner0(self, v: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``<origin, v>_L = -v_0 / sqrt(c)`` (geoopt: ``-sqrt(k) v_0``); see :func:`.math.lorentz.inner0`.

        Example:
            >>> M, v = Lorentz(k=4.0), torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64)
            >>> M.inner0(v), M.inner(M.origin(3, dtype=torch.float64), M.origin(3, dtype=torch.float64), v)
            (tensor(-6., dtype=torch.float64), tensor(-6., dtype=torch.float64))
        """
        self._check("inner0", v=v)
        return self._keep("inner0", L.inner0(v, c=self._c(v)), keepdim)

    def logmap0back(self, x: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(x, origin)``: the tangent vector at ``x`` pointing to the origin.

        Example:
            >>> M = Lorentz()
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> round(float(M.norm(x, M.logmap0back(x))), 9)
            1.0
        """
        self._check("logmap0back", x=x)
        return self.logmap(x, self._origin_like(x), check=check)

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """``(sqrt(1/c + |x_bar|^2), x_bar)``; see :func:`.math.lorentz.projx`.

        Example:
            >>> M = Lorentz()
            >>> x = M.projx(torch.tensor([-7.0, 3.0, 4.0], dtype=torch.float64))  # x_0 = sqrt(1 + 25)
            >>> x, round(float(L.minkowski(x, x)), 9)
            (tensor([5.0990, 3.0000, 4.0000], dtype=torch.float64), -1.0)
            >>> y = Lorentz(curvature=-4.0).projx(hm.mc([0.0, 3.0, 4.0], nc=2, dtype=torch.float64))
            >>> round(float(y[0] ** 2), 9), round(float(L.minkowski(y, y)), 9)  # 1/4 + 25; <y, y>_L = -1/c
            (25.25, -0.25)
        """
        self._check("projx", x=x)
        return L.projx(x, c=self._c(x))

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``u + c <x, u>_L x``; see :func:`.math.lorentz.proju`.

        Example:
            >>> M = Lorentz()
            >>> M.proju(M.origin(3, nc=None, dtype=torch.float64), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
            tensor([0., 2., 3.], dtype=torch.float64)
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> w = M.proju(x, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))  # <x, w>_L = 0; idempotent
            >>> abs(float(M.inner(x, x, w))) < 1e-12, bool(torch.allclose(M.proju(x, w), w))
            (True, True)
        """
        self._check("proju", x=x, u=u)
        return L.proju(x, u, c=self._c(x))

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient ``proju(x, J g)``, ``J = diag(-1, 1, ..., 1)``.

        Example:
            >>> M = Lorentz()
            >>> M.egrad2rgrad(M.origin(3, nc=None, dtype=torch.float64), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
            tensor([0., 2., 3.], dtype=torch.float64)
            >>> x = M.expmap0(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
            >>> g = M.egrad2rgrad(x, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
            >>> abs(float(M.inner(x, x, g))) < 1e-12  # tangent at x
            True
        """
        self._check("egrad2rgrad", x=x, g=g)
        return L.egrad2rgrad(x, g, c=self._c(x))

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Batched distances of table rows; see :meth:`.base.Manifold.dist_batch` and :func:`.math.batch.lorentz`.

        Example:
            >>> from hypermc.manifolds.math.batch import components_of
            >>> M = Lorentz()
            >>> table = M.expmap0(hm.mc([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]], nc=2, dtype=torch.float64))
            >>> d = M.dist_batch(components_of(table), torch.tensor([0, 1]), torch.tensor([1, 2]))
            >>> [round(v, 6) for v in d.tolist()], round(float(M.dist(table[1], table[2])), 6)
            ([1.0, 2.444429], 2.444429)
        """
        self._check_batch(rows, ia, ib, leaf, cache)
        return batch.lorentz(rows, ia, ib, c=self.c, leaf=leaf, cache=cache)

    # -------------------------------------------------------------- helpers

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        out = torch.zeros(size, dtype=dtype, device=device)
        out[..., 0] = float(L.origin_time(c=self.c))
        return out

    def _tangent0(self, u: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros_like(u[..., :1]), u[..., 1:]], dim=-1)

    def _check_tangent_values(self, x: torch.Tensor, u: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        resid = torch.abs(L.minkowski(x, u))
        tol = atol if atol is not None else 2.0**CONSTRAINT_MARGIN_BITS * common.unit_roundoff(x)
        scale = (common.lead(x[..., 0]).abs() * common.lead(common.norm(u)).abs()).clamp_min(1.0)
        bad = common.lead(resid) > tol * scale
        if bool(bad.any()):
            return False, _reason(f"|<x, u>_L| exceeds {tol:.3g} x_0 |u| (not tangent)", bad)
        return True, None

    def _points_ok(self, *points: torch.Tensor) -> bool:
        # plain points: check_point's test in one pass per argument (block by block where
        # large) and one host sync. Anything that fails here goes through check_point.
        if any(isinstance(p, MCTensor) for p in points):
            return False
        with torch.no_grad():
            return bool(torch.stack([common.row_blocked(self._rows_ok, p).all() for p in points]).all())

    def _rows_ok(self, p: torch.Tensor) -> torch.Tensor:
        """Per point of plain ``p``: check_point's test (``x_0 > 0`` and the constraint
        within its tolerance, which a plain point carries to one component). A non-finite
        coordinate makes the residual inf or NaN, which fails here (an inf residual would
        pass ``<= inf`` where ``x_0^2`` overflows)."""
        p = p.detach()
        x0 = p[..., 0].contiguous()  # read four times below: once strided, not four times
        xb = common.norm(p[..., 1:])
        one_c = common.c_power(c=self._c(xb), power=-1.0, like=xb)
        resid = ((x0 - xb) * (x0 + xb) - one_c).abs_().to(torch.float64)
        info = torch.finfo(p.dtype)
        floor = 2.0**CONSTRAINT_MARGIN_BITS * info.smallest_normal * info.eps
        tol = max(2.0 ** (CONSTRAINT_MARGIN_BITS - float_format(p.dtype).p), floor)
        scale = (x0 * x0).clamp_min_(1.0).to(torch.float64)  # x0^2 >= 0 (or NaN)
        return (x0 > 0) & torch.isfinite(resid) & (resid <= tol * scale)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        x0 = x[..., 0]
        bad = common.lead(x0) <= 0
        if bool(bad.any()):
            return False, _reason("time coordinate x_0 <= 0 (lower sheet or degenerate)", bad)
        xb = common.norm(x[..., 1:])
        one_c = common.c_power(c=self._c(xb), power=-1.0, like=xb)
        resid = torch.abs((x0 - xb) * (x0 + xb) - one_c)
        tol = torch.full_like(common.lead(x0), atol, dtype=torch.float64) if atol is not None else _constraint_tolerance(x)
        scale = common.lead(x0 * x0).abs().clamp_min(1.0).to(torch.float64)
        bad = common.lead(resid).to(torch.float64) > tol * scale
        if bool(bad.any()):
            first = float(tol[bad].reshape(-1)[0])
            return False, _reason(f"<x, x>_L differs from -1/c by more than {first:.3g} x_0^2 (off the hyperboloid)", bad)
        return True, None


class LearnableLorentz(Lorentz):
    r"""The hyperboloid with a learnable curvature: what ``Lorentz(..., learnable=True)``
    returns (geoopt's ``Lorentz(k, learnable=True)``).

    The parameter is ``self.k`` (geoopt's ``k > 0``: ``<x, x>_L = -k``, curvature
    ``K = -1/k``), an ``nn.Parameter`` (an MC parameter when ``k`` is given as an
    :class:`~hypermc.MCTensor`); :attr:`c` ``= 1/k`` is a tensor with gradients and
    :attr:`curvature` a Python float snapshot. Every method is :class:`Lorentz`'s formula
    with ``c`` taken from the parameter by torch operations (:func:`.math.common.tensor_c_power`),
    so gradients reach ``k``; the fused CPU kernels and the trainer's batched distances
    take a fixed curvature and are not used (:meth:`dist_batch` computes with the
    curvature's current value, for evaluation, and refuses to give gradients).

    Points on the hyperboloid of one ``k`` are not on the hyperboloid of another, so a
    model whose curvature learns makes its points from the current ``k`` in every
    forward pass (``expmap0`` of tangent features, as hyperbolic GNNs do); the gradient
    with respect to ``k`` is then that of the model's function. Stored points re-enter
    through :meth:`projx` after a curvature step. An optimizer step that makes ``k <= 0``
    gives NaN (no clamp); optimise ``log k`` in the model if the steps are large.

    Args (keyword-only, at most one of the two):
        curvature: ``K < 0`` (hypermc's convention; default ``-1``); float or 0-d tensor.
        k: geoopt's argument ``k > 0``: ``K = -1/k``; float or 0-d tensor.

    Example:
        >>> M = Lorentz(k=torch.tensor(2.0, dtype=torch.float64), learnable=True)
        >>> M, [n for n, _ in M.named_parameters()], M.curvature
        (Lorentz(k=2, learnable=True), ['k'], -0.5)
        >>> u = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]], dtype=torch.float64)
        >>> x = M.expmap0(u)  # points made from the current k
        >>> d = M.dist(x[0], x[1])
        >>> abs(float(d.detach()) - float(Lorentz(k=2.0).dist(*Lorentz(k=2.0).expmap0(u)))) < 1e-15
        True
        >>> d.backward()
        >>> M.k.grad is not None
        True
    """

    name = "learnable_lorentz"
    fused_dist_batch = None  # type: ignore[assignment]

    def __init__(
        self, *, curvature: float | torch.Tensor | None = None, k: float | torch.Tensor | None = None, learnable: bool = True
    ) -> None:
        nn.Module.__init__(self)
        where = "Lorentz"
        name, t, seen = learnable_curvature_argument(where, "LearnableLorentz", curvature, "k", k, learnable)
        self.learnable = True
        self.register_parameter("k", nn.Parameter(t if name == "k" else -1 / t, requires_grad=True))
        k_value = float(common.lead(self.k.detach()))
        if not (math.isfinite(k_value) and k_value > 0 and math.isfinite(1 / k_value)):
            raise ValueError(
                f"{where}: {name} = {seen!r} is outside what a {t.dtype} parameter holds as k and 1/k (got k = {k_value!r}); "
                "pass the curvature in a wider dtype"
            )

    @property
    def k(self) -> torch.Tensor:  # type: ignore[override]
        """The parameter ``k > 0`` (geoopt's; ``<x, x>_L = -k``)."""
        try:
            return self._parameters["k"]  # type: ignore[return-value]
        except KeyError:  # before __init__ registers it (nn.Module asks hasattr first)
            raise AttributeError("k") from None

    @property
    def c(self) -> torch.Tensor:  # type: ignore[override]
        """``1/k``, a tensor with gradients to ``k`` (the formulas' ``c = -K``)."""
        return 1 / self.k

    def _c(self, like: torch.Tensor) -> torch.Tensor:
        """``1/k`` in ``like``'s format: for MC operands the reciprocal of the exact MC lift
        of a plain ``k``, so the formulas keep MC precision."""
        return 1 / common.lift(self.k, like)

    @property
    def curvature(self) -> float:  # type: ignore[override]
        """``K = -1/k`` as a Python float (a snapshot)."""
        return -1.0 / float(common.lead(self.k.detach()).reshape(()))

    def __repr__(self) -> str:
        return f"Lorentz(k={-1.0 / self.curvature:g}, learnable=True)"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Batched distances of table rows at the curvature's current value (what
        :func:`hypermc.embed.evaluate` ranks with): those of ``Lorentz(curvature=...)``.

        Raises:
            TypeError: gradients asked for (``leaf`` given while grad mode is on): the
                batched kernels take a fixed curvature and would give ``k`` none; use
                :meth:`dist` on the gathered rows to train it.
        """
        if leaf is not None and torch.is_grad_enabled():
            raise TypeError(
                "Lorentz.dist_batch: gradients with a learnable curvature are not available here (the batched distances "
                "take its current value and would give k no gradient); use dist() on the gathered rows"
            )
        return Lorentz(curvature=self.curvature).dist_batch(rows, ia, ib, leaf=leaf, cache=cache)

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        out = torch.zeros(size, dtype=dtype, device=device)
        out[..., 0] = math.sqrt(-1.0 / self.curvature)  # sqrt(k), a snapshot
        return out


Lorentz.learnable_variant = LearnableLorentz
