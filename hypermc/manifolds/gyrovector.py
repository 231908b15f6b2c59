"""geoopt's gyrovector methods, shared by :class:`PoincareBall` and :class:`Stereographic`.

A mixin: each method checks its arguments and calls one function of
:mod:`.math.stereographic` with the model's curvature ``k`` (``k = K``; a Python float for
the ball, a float or a tensor for :class:`Stereographic`); points come back through
``projx`` (the projection rule of :mod:`.base`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._checks import check_bool, check_callable, check_instance
from .math import stereographic as S

__all__ = ["GyrovectorMixin"]


class GyrovectorMixin:
    """Möbius operations, gyration, geodesics, midpoints and gyroplanes (geoopt's names).

    The class using it is a :class:`~hypermc.manifolds.base.Manifold` that defines
    ``_kappa(like)`` (the curvature ``k`` as an operand for ``like``).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
        >>> bool(torch.allclose(M.mobius_add(x, y), M.gyration(x, y, M.mobius_add(y, x))))  # gyrocommutative law
        True
    """

    # provided by the Manifold the mixin is used with
    _check: Callable[..., None]
    _keep: Callable[..., torch.Tensor]
    projx: Callable[..., torch.Tensor]
    expmap: Callable[..., torch.Tensor]

    def _kappa(self, like: torch.Tensor) -> S.Curvature:
        raise NotImplementedError  # pragma: no cover  (every model using the mixin defines it)

    def _kappa_sign(self) -> int | None:
        """The sign of ``k`` where the model knows it without reading it (its curvature
        cannot change sign), else None: the formulas read it from ``k``
        (:func:`.math.stereographic.sign_of`; for a tensor ``k`` a host sync and, under
        ``torch.compile``, a graph break)."""
        return None

    def lambda_x(self, x: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """Conformal factor ``2 / (1 + k|x|^2)``; see :func:`.math.stereographic.lambda_x`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().lambda_x(torch.tensor([0.5, 0.0], dtype=torch.float64), keepdim=True)
            tensor([2.6667], dtype=torch.float64)
        """
        self._check("lambda_x", x=x)
        return S.lambda_x(x, self._kappa(x), keepdim=check_bool(f"{type(self).__name__}.lambda_x", "keepdim", keepdim))

    def mobius_add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Möbius addition ``x ⊕ y``; see :func:`.math.stereographic.mobius_add`.

        Example:
            >>> from hypermc.manifolds import Stereographic
            >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> Stereographic(k=-1.0).mobius_add(x, x), Stereographic(k=1.0).mobius_add(x, x)
            (tensor([0.8000, 0.0000], dtype=torch.float64), tensor([1.3333, 0.0000], dtype=torch.float64))
        """
        self._check("mobius_add", x=x, y=y)
        return self.projx(S.mobius_add(x, y, self._kappa(x)))

    def mobius_sub(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``x ⊖ y = x ⊕ (-y)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> x = torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> PoincareBall().mobius_sub(x, x)
            tensor([0., 0.], dtype=torch.float64)
        """
        self._check("mobius_sub", x=x, y=y)
        return self.projx(S.mobius_sub(x, y, self._kappa(x)))

    def mobius_coadd(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Möbius coaddition ``x ⊞ y`` (commutative); see :func:`.math.stereographic.mobius_coadd`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> x, y = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
            >>> PoincareBall().mobius_coadd(x, y)
            tensor([0.4000, 0.4000], dtype=torch.float64)
        """
        self._check("mobius_coadd", x=x, y=y)
        return self.projx(S.mobius_coadd(x, y, self._kappa(x)))

    def mobius_cosub(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``x ⊟ y = x ⊞ (-y)``; ``(x ⊟ y) ⊕ y = x``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x, y = PoincareBall(), torch.tensor([0.5, 0.1], dtype=torch.float64), torch.tensor([-0.2, 0.4], dtype=torch.float64)
            >>> bool(torch.allclose(M.mobius_add(M.mobius_cosub(x, y), y), x))
            True
        """
        self._check("mobius_cosub", x=x, y=y)
        return self.projx(S.mobius_cosub(x, y, self._kappa(x)))

    def mobius_scalar_mul(self, r: float | torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``r ⊗ x``; see :func:`.math.stereographic.mobius_scalar_mul`.

        Example:
            >>> from hypermc.manifolds import Stereographic
            >>> Stereographic(k=-1.0).mobius_scalar_mul(2.0, torch.tensor([0.5, 0.0], dtype=torch.float64))
            tensor([0.8000, 0.0000], dtype=torch.float64)
        """
        self._check("mobius_scalar_mul", x=x)
        return self.projx(S.mobius_scalar_mul(r, x, self._kappa(x), sign=self._kappa_sign()))

    def mobius_pointwise_mul(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``w ⊙ x``; see :func:`.math.stereographic.mobius_pointwise_mul`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> w, x = torch.tensor([2.0, 2.0], dtype=torch.float64), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> PoincareBall().mobius_pointwise_mul(w, x)
            tensor([0.8000, 0.0000], dtype=torch.float64)
        """
        self._check("mobius_pointwise_mul", w=w, x=x)
        return self.projx(S.mobius_pointwise_mul(w, x, self._kappa(x), sign=self._kappa_sign()))

    def mobius_matvec(self, m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``M ⊗ x`` (``Mx = x @ m.T``); see :func:`.math.stereographic.mobius_matvec`.

        Example:
            >>> from hypermc.manifolds import Stereographic
            >>> Stereographic(k=-1.0).mobius_matvec(2 * torch.eye(2, dtype=torch.float64), torch.tensor([[0.5, 0.0]], dtype=torch.float64))
            tensor([[0.8000, 0.0000]], dtype=torch.float64)
        """
        where = f"{type(self).__name__}.mobius_matvec"
        self._check("mobius_matvec", x=x)
        check_instance(where, "m", m, torch.Tensor, f"a matrix (out, {x.shape[-1]})")
        if m.dim() < 2 or m.shape[-1] != x.shape[-1]:
            raise ValueError(f"{where}: m must be a matrix (out, {x.shape[-1]}); got shape {tuple(m.shape)}")
        if m.dtype != x.dtype:
            raise TypeError(f"{where}: m has dtype {m.dtype} but x has {x.dtype}")
        return self.projx(S.mobius_matvec(m, x, self._kappa(x), sign=self._kappa_sign()))

    def gyration(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``gyr[x, y] z``; see :func:`.math.stereographic.gyration`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x, y = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([0.0, 0.5], dtype=torch.float64)
            >>> z = torch.tensor([0.3, 0.4], dtype=torch.float64)
            >>> round(float(M.gyration(x, y, z).norm()), 12)  # an isometry of R^n
            0.5
        """
        self._check("gyration", x=x, y=y, z=z)
        return S.gyration(x, y, z, self._kappa(x))

    def geodesic(self, t: float | torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The geodesic ``gamma(t)`` with ``gamma(0) = x``, ``gamma(1) = y``; see :func:`.math.stereographic.geodesic`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x, y = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([-0.3, 0.6], dtype=torch.float64)
            >>> bool(torch.allclose(M.geodesic(1.0, x, y), y)), round(float(M.dist(x, M.geodesic(0.25, x, y)) / M.dist(x, y)), 12)
            (True, 0.25)
        """
        self._check("geodesic", x=x, y=y)
        return self.projx(S.geodesic(t, x, y, self._kappa(x), sign=self._kappa_sign()))

    def transp0(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Transport from the origin ``D_y u``; see :func:`.math.stereographic.transp0`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().transp0(torch.tensor([0.5, 0.0]), torch.tensor([1.0, 1.0]))
            tensor([0.7500, 0.7500])
        """
        self._check("transp0", y=y, u=u)
        return S.transp0(y, u, self._kappa(y))

    def transp0back(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Transport to the origin ``u / D_y``; see :func:`.math.stereographic.transp0back`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().transp0back(torch.tensor([0.5, 0.0]), torch.tensor([0.75, 0.75]))
            tensor([1., 1.])
        """
        self._check("transp0back", y=y, u=u)
        return S.transp0back(y, u, self._kappa(y))

    def dist2plane(
        self, x: torch.Tensor, p: torch.Tensor, a: torch.Tensor, *, keepdim: bool = False, signed: bool = False, scaled: bool = False
    ) -> torch.Tensor:
        """Distance to the gyroplane through ``p`` with normal ``a``; see :func:`.math.stereographic.dist2plane`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> x, a = torch.tensor([0.0, -0.5], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
            >>> M = PoincareBall()
            >>> round(float(M.dist2plane(x, torch.zeros(2, dtype=torch.float64), a, signed=True)), 9)
            -1.098612289
        """
        where = f"{type(self).__name__}.dist2plane"
        self._check("dist2plane", x=x, p=p, a=a)
        return S.dist2plane(
            x,
            p,
            a,
            self._kappa(x),
            keepdim=check_bool(where, "keepdim", keepdim),
            signed=check_bool(where, "signed", signed),
            scaled=check_bool(where, "scaled", scaled),
        )

    def weighted_midpoint(
        self,
        xs: torch.Tensor,
        weights: torch.Tensor | None = None,
        *,
        reducedim: Sequence[int] | None = None,
        dim: int = -1,
        keepdim: bool = False,
        lincomb: bool = False,
        posweight: bool = False,
    ) -> torch.Tensor:
        """Weighted gyromidpoint (geoopt's arguments); see :func:`.math.stereographic.weighted_midpoint`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> xs = torch.tensor([[0.5, 0.0], [0.0, 0.5]], dtype=torch.float64)
            >>> m = M.weighted_midpoint(xs)
            >>> round(float(M.dist(m, xs[0]) - M.dist(m, xs[1])), 12)  # equidistant
            0.0
        """
        where = f"{type(self).__name__}.weighted_midpoint"
        check_instance(where, "xs", xs, torch.Tensor, "a Tensor or MCTensor of points")
        if weights is not None:
            check_instance(where, "weights", weights, torch.Tensor, "a Tensor of weights or None")
        mid = S.weighted_midpoint(
            xs,
            self._kappa(xs),
            weights,
            reducedim=reducedim,
            dim=dim,
            keepdim=check_bool(where, "keepdim", keepdim),
            lincomb=check_bool(where, "lincomb", lincomb),
            posweight=check_bool(where, "posweight", posweight),
            sign=self._kappa_sign(),
        )
        if not mid.dim():
            return mid
        # the point dimension of the result: the reduced dims before it are gone unless keepdim
        nd = xs.dim()
        point = dim % nd
        if not keepdim:
            reduced = [d for d in range(nd) if d != point] if reducedim is None else [d % nd for d in reducedim]
            point -= sum(d < point for d in reduced)
        return self.projx(mid.movedim(point, -1)).movedim(-1, point)

    def antipode(self, x: torch.Tensor) -> torch.Tensor:
        """The antipode (``-x`` unless ``k > 0``); see :func:`.math.stereographic.antipode`.

        Example:
            >>> from hypermc.manifolds import Stereographic
            >>> Stereographic(k=1.0).antipode(torch.tensor([0.5, 0.0]))
            tensor([-2., -0.])
        """
        self._check("antipode", x=x)
        return S.antipode(x, self._kappa(x), sign=self._kappa_sign())

    def mobius_fn_apply(self, fn: Callable[..., torch.Tensor], x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        """``expmap0(fn(logmap0(x), *args, **kwargs))``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> bool(torch.allclose(M.mobius_fn_apply(torch.mul, x, 3.0), M.mobius_scalar_mul(3.0, x)))
            True
        """
        check_callable(f"{type(self).__name__}.mobius_fn_apply", "fn", fn)
        self._check("mobius_fn_apply", x=x)
        # the chain of one function, which takes the model's sign (mobius_fn_apply's keyword
        # arguments are fn's)
        return self.projx(S.mobius_fn_apply_chain(x, lambda u: fn(u, *args, **kwargs), k=self._kappa(x), sign=self._kappa_sign()))

    def mobius_fn_apply_chain(self, x: torch.Tensor, *fns: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``expmap0(f_n(... f_1(logmap0(x))))``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> bool(torch.allclose(M.mobius_fn_apply_chain(x, torch.neg, torch.neg), x))
            True
        """
        for fn in fns:
            check_callable(f"{type(self).__name__}.mobius_fn_apply_chain", "fns", fn)
        self._check("mobius_fn_apply_chain", x=x)
        return self.projx(S.mobius_fn_apply_chain(x, *fns, k=self._kappa(x), sign=self._kappa_sign()))
