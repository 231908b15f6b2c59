"""The Poincaré upper halfspace model (formulas in :mod:`.math.halfspace`)."""

from __future__ import annotations

import torch

from .base import Manifold, _reason
from .math import common
from .math import halfspace as H

__all__ = ["PoincareHalfspace"]


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
        >>> M.dist(x, y)   # 2 asinh(1e-30 / (2e-25)) ≈ 1e-5
    """

    name = "halfspace"
    min_dim = 1

    def dist(self, x, y, *, keepdim: bool = False, check: bool = True):
        """Distance; see :func:`.math.halfspace.dist` (formula, laws, accuracy). ``check``: see :mod:`.base`."""
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return self._keep(H.dist(x, y, self.c), keepdim)

    def dist0(self, x, *, keepdim: bool = False, check: bool = True):
        """Distance from the origin ``(0, ..., 0, 1)``. ``check``: see :mod:`.base`."""
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return self._keep(H.dist(self._origin_like(x), x, self.c), keepdim)

    def expmap(self, x, u, *, check: bool = True):
        """Exponential map; see :func:`.math.halfspace.expmap`. ``check``: see :mod:`.base`."""
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return H.projx(H.expmap(x, u))

    def logmap(self, x, y, *, check: bool = True):
        """Logarithmic map; see :func:`.math.halfspace.logmap`. ``check``: see :mod:`.base`."""
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return H.logmap(x, y)

    def expmap0(self, u):
        """``expmap(origin, u)``."""
        self._check("expmap0", u=u)
        return H.projx(H.expmap(self._origin_like(u), u))

    def logmap0(self, y, *, check: bool = True):
        """``logmap(origin, y)``. ``check``: see :mod:`.base`."""
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return H.logmap(self._origin_like(y), y)

    def retr(self, x, u):
        """Retraction ``(x_bar + u_bar, x_n exp(u_n / x_n))`` (stays in the halfspace)."""
        self._check("retr", x=x, u=u)
        return H.projx(H.retr(x, u))

    def transp(self, x, y, v):
        """Parallel transport; see :func:`.math.halfspace.transp`."""
        self._check("transp", x=x, y=y, v=v)
        return H.transp(x, y, v)

    def inner(self, x, u, v=None, *, keepdim: bool = False):
        """``<u, v>_x = <u, v> / (c x_n^2)`` (``v`` defaults to ``u``)."""
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return H.inner(x, u, v, self.c, keepdim)

    def norm(self, x, u, *, keepdim: bool = False):
        """``|u|_x = |u| / (sqrt(c) x_n)``."""
        self._check("norm", x=x, u=u)
        return H.norm(x, u, self.c, keepdim)

    def projx(self, x):
        """Raise heights below the smallest normal number to it (idempotent)."""
        self._check("projx", x=x)
        return H.projx(x)

    def proju(self, x, u):
        """Every vector is tangent: returns ``u``."""
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x, g):
        """Riemannian gradient ``c x_n^2 g``."""
        self._check("egrad2rgrad", x=x, g=g)
        return H.egrad2rgrad(x, g, self.c)

    # -------------------------------------------------------------- helpers

    def _origin_like(self, x):
        """The origin as a plain tensor ``(n,)`` (broadcasts against ``x``)."""
        return self._origin_values((x.shape[-1],), x.dtype, x.device)

    def _origin_values(self, size, dtype, device):
        out = torch.zeros(size, dtype=dtype, device=device)
        out[..., -1] = 1
        return out

    def _origin_tangent(self, u):
        return common.scale_c(u, self.c, 0.5)

    def _check_values(self, x, atol):
        bad = common.lead(x[..., -1]) <= 0
        if bool(bad.any()):
            return False, _reason("height x_n <= 0 (outside the halfspace)", bad)
        return True, None
