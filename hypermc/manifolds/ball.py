"""The Poincaré ball model (formulas in :mod:`.math.ball`)."""

from __future__ import annotations

import torch

from .._checks import check_bool, check_instance, check_real
from ..mcf import eft
from ..mcf.tensor import MCTensor
from .base import Device, Manifold, _reason, geoopt_curvature
from .gyrovector import GyrovectorMixin
from .math import ball as B
from .math import batch, common, fused
from .registry import register_manifold
from .stereographic import LearnablePoincareBall

__all__ = ["PoincareBall"]

#: ``projx`` keeps the deficit ``1 - c|x|^2`` at least ``2^EDGE_MARGIN_BITS u^nc``: below
#: that the stored coordinates no longer resolve the point (its hyperbolic resolution
#: ``u^nc / D`` would exceed ``2^-EDGE_MARGIN_BITS``). Where ``u^nc`` is below the dtype's
#: smallest subnormal ``s`` (float16 ``nc >= 3``, float32 ``nc >= 7``, float64
#: ``nc >= 21``) the coordinates resolve only ``s``: the deficit kept is ``2^8 s``.
EDGE_MARGIN_BITS = 8


@register_manifold
class PoincareBall(GyrovectorMixin, Manifold):
    r"""Poincaré ball ``{x : |x| < 1/sqrt(c)}``, metric ``(2 / (1 - c|x|^2))^2 |dx|^2``.

    ``curvature = K = -c < 0`` (see :mod:`hypermc.manifolds.base`); origin ``0``.
    Also the gyrovector operations hyperbolic layers use (geoopt's names, from
    :class:`~hypermc.manifolds.gyrovector.GyrovectorMixin`): :meth:`mobius_add`,
    :meth:`mobius_sub`, :meth:`mobius_coadd`, :meth:`mobius_scalar_mul`,
    :meth:`mobius_matvec`, :meth:`gyration`, :meth:`geodesic`, :meth:`weighted_midpoint`,
    :meth:`dist2plane`, :meth:`lambda_x`, :meth:`mobius_fn_apply`, ...

    Precision (MC range): at hyperbolic radius ``r`` the deficit ``D = 1 - c|x|^2`` is
    ``~ 4 e^-r``. It is formed from the components at ``nc + 1`` (never as
    ``1 - fl(|x|^2)``), so ``dist`` of stored points stays accurate until ``D``
    approaches ``u^(nc+1)``; a coordinate is stored to ``u^nc``, i.e. points are
    resolved to a hyperbolic length ``~ u^nc e^r / 2``, below ``1e-6`` up to
    ``r ~ nc p ln2 - 13`` (float64: 23, 60, 97 for nc = 1, 2, 3; plain float64
    libraries clamp at ``|x| = 1 - 1e-5``, ``r ~ 12``). Tested: float64 ``nc = 2`` at
    ``r = 60`` and ``nc = 3`` at ``r = 100``, ``dist`` within ``1e-6`` of mpmath.

    Points produced by ``expmap``, ``expmap0``, ``retr`` and the Möbius operations are
    passed through :meth:`projx`: a no-op inside the MC range; beyond it (where the
    rounded result could land on or outside the boundary) the point is pulled back to
    the radius where ``1 - c|x|^2 = 2^EDGE_MARGIN_BITS u^nc`` (float64: r ~ 32, 69, 106
    for nc = 1, 2, 3).

    Example:
        Two points at hyperbolic radius 40, ``1e-21`` apart: float64 rounds both to the
        boundary point ``(1, 0)``; with ``nc = 2`` their distance
        ``2 asinh(|x - y| / sqrt(D_x D_y)) = 2 asinh(0.05)`` is resolved:

        >>> M = PoincareBall()
        >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) - hm.mc([1e-20, 0.0], nc=2, dtype=torch.float64)
        >>> y = x + hm.mc([0.0, 1e-21], nc=2, dtype=torch.float64)
        >>> round(float(M.dist0(x)), 6), round(float(M.dist(x, y)), 6)
        (46.744849, 0.099958)
        >>> M.check_point(y.approx())
        (False, 'norm >= 1/sqrt(c) = 1 (outside the ball) (1 of 1 points; first at index ())')

        The Möbius operations (``0.5 ⊕ 0.5 = 0.8``, ``2 ⊗ 0.5 = 0.8``) and the maps:

        >>> a = torch.tensor([0.5, 0.0], dtype=torch.float64)
        >>> M.mobius_add(a, a), M.mobius_scalar_mul(2.0, a)
        (tensor([0.8000, 0.0000], dtype=torch.float64), tensor([0.8000, 0.0000], dtype=torch.float64))
        >>> u = M.logmap(a, y)
        >>> abs(float(M.norm(a, u) - M.dist(a, y))) < 1e-9, round(float(M.dist(M.expmap(a, u), y)), 6)
        (True, 0.0)
    """

    name = "ball"
    min_dim = 1
    converts_to_ball = True
    fused_dist_batch = staticmethod(fused.ball)
    learnable_variant = LearnablePoincareBall

    def __init__(
        self, *, curvature: float | torch.Tensor | None = None, c: float | torch.Tensor | None = None, learnable: bool = False
    ) -> None:
        """Args (keyword-only; see :mod:`hypermc.manifolds.base`):
            curvature: ``K < 0`` (default ``-1``).
            c: geoopt's argument, the ball's negative curvature ``c > 0``: ``K = -c``.
            learnable: ``True`` returns a
                :class:`~hypermc.manifolds.stereographic.LearnablePoincareBall` instead,
                whose curvature is an ``nn.Parameter`` (geoopt's ``learnable=True``).

        Example:
            >>> PoincareBall(c=2.0), PoincareBall(curvature=-2.0) == PoincareBall(c=2.0), PoincareBall(c=2.0).k
            (PoincareBall(curvature=-2), True, -2.0)
            >>> type(PoincareBall(c=2.0, learnable=True)).__name__
            'LearnablePoincareBall'
        """
        super().__init__(curvature=geoopt_curvature(type(self).__name__, curvature, "c", c, lambda v: -v, learnable))

    def to_ball(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself.

        Example:
            >>> x = torch.tensor([0.5, 0.0])
            >>> PoincareBall().to_ball(x) is x
            True
        """
        return x

    def from_ball(self, b: torch.Tensor) -> torch.Tensor:
        """``b`` itself.

        Example:
            >>> b = torch.tensor([0.5, 0.0])
            >>> PoincareBall().from_ball(b) is b
            True
        """
        return b

    @property
    def k(self) -> float:
        """geoopt's ``k``: the curvature ``K = -c``.

        Example:
            >>> PoincareBall(c=0.5).k
            -0.5
        """
        return self.curvature

    def _kappa(self, like: torch.Tensor) -> float:
        return self.curvature

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance; see :func:`.math.ball.dist` (formula, laws, accuracy). ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> round(float(M.dist(x, y)), 9), bool(torch.allclose(M.dist(x, y), M.dist(y, x)))  # symmetric
            (2.451939429, True)
            >>> xm, ym = hm.mc([0.5, 0.0], nc=2, dtype=torch.float64), hm.mc([-0.3, 0.6], nc=2, dtype=torch.float64)
            >>> round(float(M.dist(xm, ym)), 9), M.dist(x, y, keepdim=True).shape
            (2.451939429, torch.Size([1]))
        """
        self._check("dist", x=x, y=y)
        check = check_bool("PoincareBall.dist", "check", check)

        # the points are checked by the deficits the distance needs anyway (finite and
        # inside <=> deficit > 0)
        d, dx, dy = B.dist_and_deficits(x, y, c=self.c)
        if check and not eft.tracing():
            inside = (common.lead(dx) > 0).all() & (common.lead(dy) > 0).all()
            if not bool(inside):
                self._check_on("dist", True, x=x, y=y)  # raises, with the reason
        return self._keep("dist", d, keepdim)

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin; see :func:`.math.ball.dist0`. ``check``: see :mod:`.base`.

        Example:
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> round(float(M.dist0(x)), 9), round(float(M.dist(torch.zeros(2, dtype=torch.float64), x)), 9)  # ln 3
            (1.098612289, 1.098612289)
            >>> round(float(PoincareBall(curvature=-4.0).dist0(x / 2)), 9)  # c = 4: half as far
            0.549306144
        """
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return self._keep("dist0", B.dist0(x, c=self.c), keepdim)

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map; see :func:`.math.ball.expmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareBall()
            >>> x, u = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> y = M.expmap(x, u)
            >>> round(float(M.dist(x, y)), 9), round(float(M.norm(x, u)), 9)  # travels |u|_x
            (0.8, 0.8)
            >>> bool(torch.allclose(M.logmap(x, y), u))
            True
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return self.projx(B.expmap(x, u, c=self.c))

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map; see :func:`.math.ball.logmap`. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareBall()
            >>> x, y = hm.mc([0.5, 0.0], nc=2, dtype=torch.float64), hm.mc([-0.3, 0.6], nc=2, dtype=torch.float64)
            >>> u = M.logmap(x, y)
            >>> bool(torch.allclose(M.expmap(x, u).approx(), y.approx())), abs(float(M.norm(x, u) - M.dist(x, y))) < 1e-12
            (True, True)
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return B.logmap(x, y, c=self.c)

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(0, u)``; see :func:`.math.ball.expmap0`.

        Example:
            >>> M = PoincareBall()
            >>> M.expmap0(torch.tensor([1.0, 0.0], dtype=torch.float64))  # tanh(1)
            tensor([0.7616, 0.0000], dtype=torch.float64)
            >>> x = M.expmap0(hm.mc([20.0, 0.0], nc=2, dtype=torch.float64))  # radius 40, beyond float64
            >>> round(float(M.dist0(x)), 6), bool(M.check_point(x.approx())[0])
            (40.0, False)
        """
        self._check("expmap0", u=u)
        return self.projx(B.expmap0(u, c=self.c))

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(0, y)``; see :func:`.math.ball.logmap0`. ``check``: see :mod:`.base`.

        Example:
            >>> M = PoincareBall()
            >>> M.logmap0(torch.tensor([0.5, 0.0], dtype=torch.float64))  # atanh(1/2)
            tensor([0.5493, 0.0000], dtype=torch.float64)
            >>> y = torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> bool(torch.allclose(M.expmap0(M.logmap0(y)), y))
            True
        """
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return B.logmap0(y, c=self.c)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Retraction ``projx(x + u)``.

        Example:
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> M.retr(x, torch.tensor([0.0, 0.3], dtype=torch.float64))  # first-order approximation of expmap
            tensor([0.5000, 0.3000], dtype=torch.float64)
            >>> M.check_point(M.retr(x, torch.tensor([2.0, 0.0], dtype=torch.float64)))  # x + u outside: pulled back into the ball
            (True, None)
        """
        self._check("retr", x=x, u=u)
        return self.projx(x + u)

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport; see :func:`.math.ball.transp`.

        Example:
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> v = torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> w = M.transp(x, y, v)  # a tangent vector at y
            >>> round(float(M.norm(x, v)), 9), round(float(M.norm(y, w)), 9)  # the norm is preserved
            (0.8, 0.8)
        """
        self._check("transp", x=x, y=y, v=v)
        return B.transp(x, y, v, c=self.c)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``<u, v>_x = lambda_x^2 <u, v>`` (``v`` defaults to ``u``).

        Example:
            >>> M = PoincareBall()
            >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> u, v = torch.tensor([0.0, 0.3], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
            >>> round(float(M.inner(x, u, v)), 9), round(float(M.inner(x, u)), 9)  # lambda_x = 2 / 0.75
            (2.133333333, 0.64)
            >>> abs(float(M.inner(x, u) - M.norm(x, u) ** 2)) < 1e-12
            True
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return B.inner(x, u, v, c=self.c, keepdim=check_bool("PoincareBall.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``|u|_x = lambda_x |u|``.

        Example:
            >>> M, o, x = PoincareBall(), torch.zeros(2, dtype=torch.float64), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> u = torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> round(float(M.norm(o, u)), 9), round(float(M.norm(x, u)), 9)  # lambda_0 |u|, lambda_x |u|
            (0.6, 0.8)
        """
        self._check("norm", x=x, u=u)
        return B.norm(x, u, c=self.c, keepdim=check_bool("PoincareBall.norm", "keepdim", keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Pull points beyond the MC range (or outside the ball) back to its edge; see
        :func:`.math.ball.projx` and :data:`EDGE_MARGIN_BITS`. Idempotent.

        Example:
            >>> M = PoincareBall()
            >>> M.projx(torch.tensor([0.5, 0.0], dtype=torch.float64))  # inside the MC range: unchanged
            tensor([0.5000, 0.0000], dtype=torch.float64)
            >>> p = M.projx(torch.tensor([3.0, 4.0], dtype=torch.float64))  # outside: pulled back onto the edge, inside the ball
            >>> p, M.check_point(p), bool(torch.equal(M.projx(p), p))
            (tensor([0.6000, 0.8000], dtype=torch.float64), (True, None), True)
            >>> x = hm.mc([1.0, 0.0], nc=2, dtype=torch.float64) - hm.mc([1e-40, 0.0], nc=2, dtype=torch.float64)  # radius ~93
            >>> round(float(M.dist0(x)), 6), round(float(M.dist0(M.projx(x))), 6)  # nc = 2: edge at r ~ 69
            (92.796551, 69.314718)
        """
        self._check("projx", x=x)
        return B.projx(x, c=self.c, margin_bits=EDGE_MARGIN_BITS)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Every vector is tangent: returns ``u``.

        Example:
            >>> M, u = PoincareBall(), torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> bool(torch.equal(M.proju(torch.tensor([0.5, 0.0], dtype=torch.float64), u), u))  # no scaling: the ball is open in R^n
            True
        """
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient ``g / lambda_x^2``.

        Example:
            >>> M, g = PoincareBall(), torch.tensor([1.0, 0.0], dtype=torch.float64)
            >>> M.egrad2rgrad(torch.zeros(2, dtype=torch.float64), g)  # lambda_0 = 2
            tensor([0.2500, 0.0000], dtype=torch.float64)
            >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)  # lambda_x = 2 / 0.75
            >>> bool(torch.allclose(M.egrad2rgrad(x, g), g * (0.75 / 2) ** 2))
            True
        """
        self._check("egrad2rgrad", x=x, g=g)
        return B.egrad2rgrad(x, g, c=self.c)

    def expmap_egrad(self, x: torch.Tensor, g: torch.Tensor, t: float) -> torch.Tensor:
        """``expmap(x, t * egrad2rgrad(x, g), check=False)`` with the deficit formed once;
        see :func:`.math.ball.expmap_egrad`.

        Example:
            >>> M = PoincareBall()
            >>> x, g = hm.mc([0.5, 0.0], nc=2, dtype=torch.float64), hm.mc([1.0, -2.0], nc=2, dtype=torch.float64)
            >>> y, ref = M.expmap_egrad(x, g, -0.1), M.expmap(x, -0.1 * M.egrad2rgrad(x, g))
            >>> float((y - ref).abs().approx().sum()) < 1e-30  # the same point to u^2
            True
        """
        self._check("expmap_egrad", x=x, g=g)
        t = check_real("PoincareBall.expmap_egrad", "t", t)
        return self.projx(B.expmap_egrad(x, g, t, c=self.c))

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Batched distances of table rows; see :meth:`.base.Manifold.dist_batch` and :func:`.math.batch.ball`.

        Example:
            >>> from hypermc.manifolds.math.batch import components_of
            >>> M, table = PoincareBall(), hm.mc([[0.0, 0.0], [0.5, 0.0], [-0.3, 0.6]], nc=2, dtype=torch.float64)
            >>> d = M.dist_batch(components_of(table), torch.tensor([0, 1]), torch.tensor([1, 2]))
            >>> [round(v, 9) for v in d.tolist()], round(float(M.dist(table[1], table[2])), 9)  # ln 3, d(row 1, row 2)
            ([1.098612289, 2.451939429], 2.451939429)
        """
        self._check_batch(rows, ia, ib, leaf, cache)
        return batch.ball(rows, ia, ib, c=self.c, leaf=leaf, cache=cache)

    def mobius_add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Möbius addition ``x ⊕ y``; see :func:`.math.ball.mobius_add`.

        Example:
            >>> M = PoincareBall()
            >>> x, y = hm.mc([0.5, 0.0], nc=2, dtype=torch.float64), hm.mc([-0.3, 0.6], nc=2, dtype=torch.float64)
            >>> M.mobius_add(x, y).approx()
            tensor([0.4308, 0.5538], dtype=torch.float64)
            >>> bool(torch.allclose(M.mobius_add(-x, M.mobius_add(x, y)).approx(), y.approx()))  # left cancellation
            True
        """
        self._check("mobius_add", x=x, y=y)
        return self.projx(B.mobius_add(x, y, c=self.c))

    def mobius_scalar_mul(self, r: float | torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Möbius scalar multiplication ``r ⊗ x``; see :func:`.math.ball.mobius_scalar_mul`.

        Example:
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> M.mobius_scalar_mul(2.0, x)  # = x ⊕ x
            tensor([0.8000, 0.0000], dtype=torch.float64)
            >>> round(float(M.dist0(M.mobius_scalar_mul(3.0, x))), 9), round(3 * float(M.dist0(x)), 9)  # scales the radius
            (3.295836866, 3.295836866)
        """
        self._check("mobius_scalar_mul", x=x)
        return self.projx(B.mobius_scalar_mul(r, x, c=self.c))

    def mobius_matvec(self, m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Möbius matrix-vector product ``M ⊗ x`` (``Mx = x @ m.T``); see
        :func:`.math.ball.mobius_matvec`.

        Example:
            >>> M, x = PoincareBall(), torch.tensor([[0.5, 0.0]], dtype=torch.float64)
            >>> M.mobius_matvec(2 * torch.eye(2, dtype=torch.float64), x)  # 2I ⊗ x = 2 ⊗ x
            tensor([[0.8000, 0.0000]], dtype=torch.float64)
            >>> M.mobius_matvec(torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]], dtype=torch.float64), x)  # 2 -> 3 dims
            tensor([[0.5000, 0.0000, 0.0000]], dtype=torch.float64)
        """
        self._check("mobius_matvec", x=x)
        check_instance("PoincareBall.mobius_matvec", "m", m, torch.Tensor, f"a matrix (out, {x.shape[-1]})")
        if m.dim() < 2 or m.shape[-1] != x.shape[-1]:
            raise ValueError(f"PoincareBall.mobius_matvec: m must be a matrix (out, {x.shape[-1]}); got shape {tuple(m.shape)}")
        if m.dtype != x.dtype:
            raise TypeError(f"PoincareBall.mobius_matvec: m has dtype {m.dtype} but x has {x.dtype}")
        return self.projx(B.mobius_matvec(m, x, c=self.c))

    # -------------------------------------------------------------- helpers

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        return torch.zeros(size, dtype=dtype, device=device)

    def _origin_tangent(self, u: torch.Tensor) -> torch.Tensor:
        return u / 2  # lambda_0 = 2

    def _points_ok(self, *points: torch.Tensor) -> bool:
        # plain points: finite and inside <=> deficit > 0 (inf or NaN coordinates give a NaN
        # or -inf deficit), one compensated pass per argument (block by block where large)
        # and one host sync
        if any(isinstance(p, MCTensor) for p in points):
            return False
        with torch.no_grad():
            return bool(torch.stack([common.row_blocked(lambda a: B.deficit(a, c=self.c) > 0, p).all() for p in points]).all())

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        d = B.deficit(x, c=self.c)
        bad = common.lead(d) <= 0
        if bool(bad.any()):
            return False, _reason(f"norm >= 1/sqrt(c) = {self.c**-0.5:g} (outside the ball)", bad)
        return True, None


# geoopt's PoincareBall(learnable=True) is a PoincareBall: isinstance says so here too (a
# virtual subclass; the registry, the trainer and the fused kernels go by the exact class)
PoincareBall.register(LearnablePoincareBall)
