"""The kappa-stereographic model with a fixed or learnable curvature (formulas in
:mod:`.math.stereographic`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_bool, check_real
from ..mcf.tensor import MCTensor
from .base import Device, Manifold, _reason, learnable_curvature_argument
from .gyrovector import GyrovectorMixin
from .math import common
from .math import stereographic as S

__all__ = ["Stereographic", "SphereProjection", "LearnablePoincareBall"]


class Stereographic(GyrovectorMixin, Manifold):
    r"""kappa-stereographic model: sectional curvature ``k`` of any sign (geoopt's ``Stereographic``).

    ``k < 0``: the Poincaré ball of curvature ``K = k`` (the same points, distances and
    maps as :class:`~hypermc.manifolds.PoincareBall`, with the same MC care near the
    boundary); ``k > 0``: the stereographic projection of the sphere of radius
    ``1/sqrt(k)`` (every point of ``R^n``; the antipode of the origin is at infinity);
    ``k = 0``: ``R^n`` with the metric ``4|dx|^2`` (distances ``2|x - y|``).

    The curvature is hypermc's ``K`` (``k = K``, the same number as geoopt's). With
    ``learnable=True`` it is an ``nn.Parameter`` (``self.k``; an MC parameter if ``k`` is
    an :class:`~hypermc.MCTensor`) and every method is differentiable in it, through
    ``k = 0``; the model is an ``nn.Module`` so that the parameter is found by
    ``model.parameters()`` when the manifold is a submodule. Optimise it with an ordinary
    optimizer (``torch.optim.Adam``, :class:`~hypermc.optim.MCAdam`); methods whose form
    depends on the sign of ``k`` read it (a host sync).

    Args (keyword-only):
        k: the curvature (float, or a 0-d Tensor / MCTensor).
        learnable: make ``k`` a parameter.

    Example:
        >>> M = Stereographic(k=-1.0)
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> from hypermc.manifolds import PoincareBall
        >>> round(float(M.dist(x, y)), 9), round(float(PoincareBall().dist(x, y)), 9)
        (2.451939429, 2.451939429)

        A learnable curvature, and the gradient of a distance with respect to it:

        >>> L = Stereographic(k=torch.tensor(-1.0, dtype=torch.float64), learnable=True)
        >>> [n for n, _ in L.named_parameters()]
        ['k']
        >>> L.dist(x, y).backward()
        >>> round(float(L.k.grad), 6)
        -0.584329
    """

    name = "stereographic"
    min_dim = 1

    def __init__(self, *, k: float | torch.Tensor = 0.0, learnable: bool = False) -> None:
        nn.Module.__init__(self)
        where = type(self).__name__
        learnable = check_bool(where, "learnable", learnable)
        if isinstance(k, torch.Tensor):
            if k.numel() != 1 or not k.is_floating_point():
                raise TypeError(f"{where}: k must be a float or a 0-d floating tensor; got {k.dtype} of shape {tuple(k.shape)}")
            check_real(where, "k", float(common.lead(k).reshape(())))
            self._check_k(float(common.lead(k).reshape(())))
            value: float | torch.Tensor = k.detach().reshape(()).clone()
        else:
            value = float(check_real(where, "k", k))
            self._check_k(value)
        self.learnable = learnable
        self.k: float | torch.Tensor
        if learnable:
            t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=torch.get_default_dtype())
            self.k = nn.Parameter(t, requires_grad=True)
        else:
            self.k = value if isinstance(value, MCTensor) or not isinstance(value, torch.Tensor) else float(value)

    def _check_k(self, k: float) -> None:
        """Subclasses restrict the sign of ``k``."""

    @property
    def curvature(self) -> float:  # type: ignore[override]
        """The curvature as a Python float (a snapshot of a learnable one)."""
        k = self.k
        return float(common.lead(k).reshape(())) if isinstance(k, torch.Tensor) else k

    @property
    def c(self) -> float:  # type: ignore[override]
        """``-k`` as a Python float (geoopt's ball ``c`` for ``k < 0``)."""
        return -self.curvature

    def __repr__(self) -> str:
        extra = ", learnable=True" if self.learnable else ""
        return f"{type(self).__name__}(k={self.curvature:g}{extra})"

    def __eq__(self, other: object) -> bool:
        if self.learnable or getattr(other, "learnable", False):
            return self is other
        return type(self) is type(other) and self.curvature == other.curvature

    def __hash__(self) -> int:
        return id(self) if self.learnable else hash((type(self).__name__, self.curvature))

    def _kappa(self, like: torch.Tensor) -> S.Curvature:
        k = self.k
        # a plain tensor curvature in the points' format (MC points: an exact MC lift, so
        # every formula runs in MC arithmetic and the gradient reaches k); an MC one with
        # MC points of its format only
        return common.curvature_operand(k, like) if isinstance(k, torch.Tensor) else k

    # ---------------------------------------------------------------- geometry

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance; see :func:`.math.stereographic.dist`. ``check``: see :mod:`.base`.

        Example:
            >>> o, x = torch.zeros(2, dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
            >>> round(float(Stereographic(k=1.0).dist(o, x)), 9)  # a quarter of the unit circle
            1.570796327
        """
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return S.dist(x, y, self._kappa(x), keepdim=check_bool(f"{type(self).__name__}.dist", "keepdim", keepdim), sign=self._kappa_sign())

    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin; see :func:`.math.stereographic.dist0`.

        Example:
            >>> round(float(Stereographic(k=0.0).dist0(torch.tensor([3.0, 4.0], dtype=torch.float64))), 9)  # 2|x|
            10.0
        """
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return S.dist0(x, self._kappa(x), keepdim=check_bool(f"{type(self).__name__}.dist0", "keepdim", keepdim), sign=self._kappa_sign())

    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map; see :func:`.math.stereographic.expmap`.

        Example:
            >>> M = Stereographic(k=1.0)
            >>> x, u = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> bool(torch.allclose(M.logmap(x, M.expmap(x, u)), u))
            True
        """
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return self.projx(S.expmap(x, u, self._kappa(x)))

    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map; see :func:`.math.stereographic.logmap`.

        Example:
            >>> M = Stereographic(k=-0.5)
            >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> abs(float(M.norm(x, M.logmap(x, y)) - M.dist(x, y))) < 1e-12
            True
        """
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return S.logmap(x, y, self._kappa(x), sign=self._kappa_sign())

    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(0, u)``; see :func:`.math.stereographic.expmap0`.

        Example:
            >>> Stereographic(k=-1.0).expmap0(torch.tensor([1.0, 0.0], dtype=torch.float64))  # tanh(1)
            tensor([0.7616, 0.0000], dtype=torch.float64)
        """
        self._check("expmap0", u=u)
        return self.projx(S.expmap0(u, self._kappa(u)))

    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(0, y)``; see :func:`.math.stereographic.logmap0`.

        Example:
            >>> Stereographic(k=1.0).logmap0(torch.tensor([1.0, 0.0], dtype=torch.float64))  # atan(1)
            tensor([0.7854, 0.0000], dtype=torch.float64)
        """
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return S.logmap0(y, self._kappa(y), sign=self._kappa_sign())

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Retraction ``projx(x + u)``.

        Example:
            >>> Stereographic(k=1.0).retr(torch.tensor([0.5, 0.0]), torch.tensor([0.0, 0.25]))
            tensor([0.5000, 0.2500])
        """
        self._check("retr", x=x, u=u)
        return self.projx(x + u)

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport; see :func:`.math.stereographic.transp`.

        Example:
            >>> M = Stereographic(k=1.0)
            >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> v = torch.tensor([0.2, 0.1], dtype=torch.float64)
            >>> abs(float(M.norm(y, M.transp(x, y, v)) - M.norm(x, v))) < 1e-12
            True
        """
        self._check("transp", x=x, y=y, v=v)
        return S.transp(x, y, v, self._kappa(x))

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """``lambda_x^2 <u, v>`` (``v`` defaults to ``u``).

        Example:
            >>> Stereographic(k=1.0).inner(torch.zeros(2), torch.tensor([1.0, 2.0]))  # lambda_0 = 2
            tensor(20.)
        """
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return S.inner(x, u, v, self._kappa(x), keepdim=check_bool(f"{type(self).__name__}.inner", "keepdim", keepdim))

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """``lambda_x |u|``.

        Example:
            >>> Stereographic(k=1.0).norm(torch.zeros(2), torch.tensor([3.0, 4.0]))
            tensor(10.)
        """
        self._check("norm", x=x, u=u)
        return S.norm(x, u, self._kappa(x), keepdim=check_bool(f"{type(self).__name__}.norm", "keepdim", keepdim))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """For ``k < 0`` the ball's projection (:func:`.math.stereographic.projx`); the identity otherwise.

        Example:
            >>> Stereographic(k=-1.0).projx(torch.tensor([3.0, 4.0], dtype=torch.float64))
            tensor([0.6000, 0.8000], dtype=torch.float64)
        """
        self._check("projx", x=x)
        return S.projx(x, self.k, sign=self._kappa_sign())

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Every vector is tangent: returns ``u``.

        Example:
            >>> u = torch.tensor([1.0, 2.0])
            >>> Stereographic(k=1.0).proju(torch.zeros(2), u) is u
            True
        """
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient ``g / lambda_x^2``.

        Example:
            >>> Stereographic(k=1.0).egrad2rgrad(torch.zeros(2), torch.tensor([4.0, 8.0]))
            tensor([1., 2.])
        """
        self._check("egrad2rgrad", x=x, g=g)
        return S.egrad2rgrad(x, g, self._kappa(x))

    # ----------------------------------------------------------------- helpers

    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        return torch.zeros(size, dtype=dtype, device=device)

    def _origin_tangent(self, u: torch.Tensor) -> torch.Tensor:
        return u / 2  # lambda_0 = 2

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        k = self.curvature
        if k >= 0:
            return True, None
        bad = common.lead(S.deficit(x, k, keepdim=False)) <= 0
        if bool(bad.any()):
            return False, _reason(f"norm >= 1/sqrt(-k) = {(-k) ** -0.5:g} (outside the ball)", bad)
        return True, None


class SphereProjection(Stereographic):
    """Stereographic projection of the sphere of curvature ``k > 0`` (geoopt's ``SphereProjection``).

    Example:
        >>> M = SphereProjection(k=1.0)
        >>> round(float(M.dist(torch.zeros(2, dtype=torch.float64), torch.tensor([1e8, 0.0], dtype=torch.float64))), 6)  # near the antipode
        3.141593
        >>> SphereProjection(k=-1.0)
        Traceback (most recent call last):
            ...
        ValueError: SphereProjection: k must be > 0 (a sphere); got -1.0. Use Stereographic(k=...) for any sign
    """

    name = "sphere_projection"

    def __init__(self, *, k: float | torch.Tensor = 1.0, learnable: bool = False) -> None:
        super().__init__(k=k, learnable=learnable)

    def _check_k(self, k: float) -> None:
        if not k > 0:
            raise ValueError(f"SphereProjection: k must be > 0 (a sphere); got {k!r}. Use Stereographic(k=...) for any sign")


class LearnablePoincareBall(Stereographic):
    r"""The Poincaré ball with a learnable curvature: what ``PoincareBall(..., learnable=True)``
    returns (geoopt's ``PoincareBall(c, learnable=True)``, with geoopt's parametrisation).

    The parameter is ``self.isp_c``, the inverse softplus of ``c = -K > 0`` (an
    ``nn.Parameter``; an MC parameter when ``c`` is given as an :class:`~hypermc.MCTensor`),
    so every optimizer step keeps ``c > 0`` and a geoopt ``state_dict`` (key ``isp_c``)
    loads. ``self.c = softplus(isp_c)`` and ``self.k = -self.c`` are tensors that carry
    gradients to the parameter (geoopt's ``c`` and ``k``); :attr:`curvature` is a Python
    float snapshot. Points, distances and maps are those of
    :class:`~hypermc.manifolds.PoincareBall` at the current curvature, computed by the
    kappa-stereographic formulas (:mod:`.math.stereographic`), which are differentiable in
    ``k`` and keep the ball's MC precision near the boundary; the ball's fused CPU kernels
    and the trainer's fast paths take a fixed curvature and are not used here. The
    softplus is torch's for a plain parameter (the same bits as geoopt) and
    ``log1p(exp(.))`` in MC arithmetic for an MC one.

    Args (keyword-only, at most one of the two):
        curvature: ``K < 0`` (hypermc's convention; default ``-1``); float or 0-d tensor.
        c: geoopt's argument ``c > 0``: ``K = -c``; float or 0-d tensor.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall(c=torch.tensor(1.0, dtype=torch.float64), learnable=True)
        >>> M, [n for n, _ in M.named_parameters()], round(float(M.c.detach()), 12)
        (PoincareBall(c=1, learnable=True), ['isp_c'], 1.0)
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
        >>> d = M.dist(x, y)
        >>> round(float(d.detach()), 9) == round(float(PoincareBall().dist(x, y)), 9)
        True
        >>> d.backward()  # d dist / d isp_c = (d dist / d k) * (-sigmoid(isp_c))
        >>> round(float(M.isp_c.grad), 6)
        0.369366
    """

    name = "learnable_ball"
    converts_to_ball = True

    def __init__(
        self, *, curvature: float | torch.Tensor | None = None, c: float | torch.Tensor | None = None, learnable: bool = True
    ) -> None:
        nn.Module.__init__(self)
        where = "PoincareBall"
        name, t, check = learnable_curvature_argument(where, "LearnablePoincareBall", curvature, "c", c, learnable)
        if name == "curvature":
            t = -t
        with torch.no_grad():
            isp = t + torch.log(-torch.expm1(-t))  # softplus^-1(c) without overflow; MC arithmetic for an MC c
        self.learnable = True
        self.isp_c = nn.Parameter(isp, requires_grad=True)
        back = float(common.lead(self.c.detach()))
        if not (math.isfinite(float(common.lead(isp))) and math.isfinite(back) and back > 0):
            raise ValueError(
                f"{where}: {name} = {check!r} is outside what a {t.dtype} parameter holds as c = softplus(isp_c) "
                f"(got c = {back!r}); pass the curvature in a wider dtype"
            )

    @property
    def c(self) -> torch.Tensor:  # type: ignore[override]
        """``softplus(isp_c) > 0``, a tensor with gradients to ``isp_c`` (geoopt's ``c``).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> float(PoincareBall(c=2.0, learnable=True).c.detach())
            2.0
        """
        s = self.isp_c
        if isinstance(s, MCTensor):
            return torch.log1p(torch.exp(s))
        # torch's softplus (threshold 20), written out so that its backward also takes the
        # MC gradient that MC points send to a plain parameter; the clamp keeps exp finite
        # in the branch that is not selected
        return torch.where(s > 20, s, torch.log1p(torch.exp(s.clamp(max=20.0))))

    @property
    def k(self) -> torch.Tensor:  # type: ignore[override]
        """``-c``, the curvature as a tensor with gradients (geoopt's ``k``)."""
        return -self.c

    def _kappa_sign(self) -> int:
        """-1: ``k = -softplus(isp_c) < 0`` always, so the formulas take the ball's branch
        without reading ``k`` (no host sync; no graph break under ``torch.compile``)."""
        return -1

    def __repr__(self) -> str:
        return f"PoincareBall(c={-self.curvature:g}, learnable=True)"

    def to_ball(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself (the points are the ball's; the constructions and the plots read
        the curvature's current value)."""
        return x

    def from_ball(self, b: torch.Tensor) -> torch.Tensor:
        """``b`` itself."""
        return b
