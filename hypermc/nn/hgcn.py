"""HGCN-compatible manifold classes on top of :mod:`hypermc.manifolds`.

HGCN (Chami et al., 2019, ``github.com/HazyResearch/hgcn``) calls its manifolds with
the tangent vector first and the curvature passed on every call::

    manifold.expmap(u, p, c)    manifold.logmap(p1, p2, c)   manifold.sqdist(p1, p2, c)

This module offers classes with those names and signatures (``PoincareBall``,
``Hyperboloid``, ``Euclidean``) that forward to hypermc's manifolds, so existing HGCN
code runs in MC arithmetic after one import change::

    # import manifolds                                  (HGCN)
    from hypermc.nn import hgcn as manifolds            # getattr(manifolds, "PoincareBall")()

and MCTensor points / parameters then give MC results and MC gradients.

Curvature: ``c`` has HGCN's meaning, which is also hypermc's ``c = -K``: the ball is
``|x|^2 < 1/c`` and the hyperboloid ``-x_0^2 + |x_bar|^2 = -1/c``. It may be a Python
number or a plain one-element tensor (HGCN passes ``torch.tensor([1.])``). One native
manifold is built per distinct value and cached (:meth:`HGCNManifold.manifold`).

Differences from HGCN's own classes (deliberate):

* **No silent clamps.** HGCN projects ball points to ``|x| <= (1 - 4e-3)/sqrt c``
  (float32) or ``(1 - 1e-5)/sqrt c`` (float64) in ``proj``, clamps norms at
  ``min_norm = 1e-15`` and the hyperboloid's ``sqdist`` at 50. Here ``proj`` is
  :meth:`~hypermc.manifolds.PoincareBall.projx` (a no-op inside the MC range) or the
  hyperboloid's exact time-coordinate recomputation, nothing else is clamped, and
  inf / NaN propagate. ``eps``, ``min_norm`` and ``max_norm`` exist with HGCN's values
  only so that code reading them runs; no method here uses them.
* **Trainable curvature** (HGCN's ``args.c = None``: ``c`` an ``nn.Parameter``): a
  ``c`` that requires grad is used as a tensor by the ball's and the hyperboloid's
  formulas (those of :class:`~hypermc.manifolds.LearnablePoincareBall` and
  :class:`~hypermc.manifolds.LearnableLorentz`), so its gradient reaches HGCN's
  parameter; the conversions ``to_hyperboloid`` / ``to_poincare`` take a fixed ``c``.
* **No in-place updates**: HGCN's ball ``egrad2rgrad`` rescales ``dp`` in place and
  ``Euclidean.normalize`` renormalises ``p`` in place; here both return new tensors.
* ``Hyperboloid.egrad2rgrad`` is implemented (HGCN raises ``NotImplementedError``), and
  ``Euclidean.ptransp0(x, v, c)`` returns ``v`` (transport is the identity; HGCN returns
  ``x + v``).
* Shapes: any leading dimensions ``(*, d)`` (HGCN's hyperboloid assumes ``(N, d)``).
* HGCN's ``ManifoldParameter`` and Riemannian optimizers are not wrapped: use
  :class:`hypermc.ManifoldParameter` and :mod:`hypermc.optim`.

Example:
    >>> from hypermc.nn import hgcn as manifolds
    >>> M = manifolds.Hyperboloid()
    >>> u = M.proj_tan0(torch.randn(5, 3, dtype=torch.float64), c=1.0)
    >>> x = M.expmap0(hm.mc(u, nc=2), c=1.0)                   # MC points on the hyperboloid
    >>> M.sqdist(x, M.expmap(M.proj_tan(u, x, 1.0), x, 1.0), 1.0).shape
    torch.Size([5])
"""

from __future__ import annotations

import math
import numbers
from typing import cast

import torch
from torch import nn

from .. import manifolds as _native
from ..manifolds import convert
from ..manifolds.base import Manifold as _NativeManifold
from ..manifolds.math import common
from ..manifolds.math import lorentz as _lorentz_math
from ..mcf import MCTensor
from . import hyperbolic as H

__all__ = ["HGCNManifold", "PoincareBall", "Hyperboloid", "Euclidean"]

#: ``init_weights``' default half-width, HGCN's.
INIT_IRANGE = 1e-5


def _c_value(c: object, where: str) -> float:
    """HGCN's per-call curvature ``c > 0`` as a Python float (validated here, once per call)."""
    if isinstance(c, torch.Tensor):
        if isinstance(c, MCTensor) or c.numel() != 1:
            raise TypeError(
                f"{where}: c must be a positive number or a plain one-element tensor; got a {type(c).__name__} of shape {tuple(c.shape)}"
            )
        if c.requires_grad:
            raise TypeError(
                f"{where}: c requires grad, but this method takes a fixed curvature (the conversions between "
                "the models); pass c.detach() or a number"
            )
        c = c.item()
    if isinstance(c, bool) or not isinstance(c, numbers.Real):
        raise TypeError(f"{where}: c must be a positive real number; got {type(c).__name__} {c!r}")
    c = float(c)
    if not (math.isfinite(c) and c > 0):
        raise ValueError(f"{where}: c must be a finite number > 0 (the curvature is -c); got {c}")
    return c


class HGCNManifold:
    """Base of the adapters: HGCN's ``Manifold`` interface forwarding to a hypermc
    manifold built for each curvature ``c``.

    Every method takes HGCN's arguments in HGCN's order (tangent vector first; ``c``
    last except in :meth:`inner`) and returns what the hypermc manifold returns:
    MCTensors for MC inputs. Argument checks are the hypermc manifold's (``TypeError`` /
    ``ValueError`` naming the argument) plus :func:`_c_value` for ``c``.

    Example:
        >>> M = PoincareBall()  # any subclass
        >>> M.manifold(1.0) is M.manifold(torch.tensor([1.0]))  # one native manifold per value of c
        True
        >>> M.manifold(torch.tensor([1.0], requires_grad=True))  # trainable c: a manifold at that tensor
        PoincareBall(c=1, learnable=True)
    """

    name = "Manifold"
    #: HGCN's attribute values, for code that reads them; unused here (no clamps).
    eps: object = 10e-8
    min_norm = 1e-15
    max_norm = 1e6

    def __init__(self) -> None:
        self._cache: dict[float, _NativeManifold] = {}

    def __repr__(self) -> str:
        return f"hgcn.{type(self).__name__}()"

    # -------------------------------------------------------------- curvature

    def _build(self, c: float) -> _NativeManifold:
        raise NotImplementedError

    def _build_trainable(self, c: torch.Tensor) -> _NativeManifold:
        raise NotImplementedError

    def manifold(self, c: object) -> _NativeManifold:
        """The hypermc manifold for HGCN's curvature argument ``c`` (built once per value);
        for a ``c`` that requires grad (HGCN's trainable curvature), a manifold whose
        curvature is that tensor, built for the call, so gradients reach ``c``."""
        if isinstance(c, torch.Tensor) and c.requires_grad and not isinstance(c, MCTensor) and c.numel() == 1:
            _c_value(c.detach(), f"{self.name}")  # the value's checks
            return self._build_trainable(c)
        value = _c_value(c, f"{self.name}")
        m = self._cache.get(value)
        if m is None:
            m = self._cache[value] = self._build(value)
        return m

    # ------------------------------------------------------------- interface

    def sqdist(self, p1: torch.Tensor, p2: torch.Tensor, c: object) -> torch.Tensor:
        """Squared geodesic distance ``dist(p1, p2)^2`` (not clamped; HGCN's hyperboloid clamps at 50)."""
        return self.manifold(c).dist(p1, p2) ** 2

    def egrad2rgrad(self, p: torch.Tensor, dp: torch.Tensor, c: object) -> torch.Tensor:
        """Riemannian gradient at ``p`` of the Euclidean gradient ``dp`` (a new tensor; ``dp`` is not modified)."""
        return self.manifold(c).egrad2rgrad(p, dp)

    def proj(self, p: torch.Tensor, c: object) -> torch.Tensor:
        """``projx(p)``: no clamp inside the MC range (see the module docstring)."""
        return self.manifold(c).projx(p)

    def proj_tan(self, u: torch.Tensor, p: torch.Tensor, c: object) -> torch.Tensor:
        """``proju(p, u)``: ``u`` projected onto the tangent space at ``p``."""
        return self.manifold(c).proju(p, u)

    def proj_tan0(self, u: torch.Tensor, c: object) -> torch.Tensor:
        """``u`` projected onto the tangent space at the origin."""
        return H.proju0(self.manifold(c), u)

    def expmap(self, u: torch.Tensor, p: torch.Tensor, c: object) -> torch.Tensor:
        """Exponential map at ``p`` of ``u`` (hypermc: ``expmap(p, u)``)."""
        return self.manifold(c).expmap(p, u)

    def logmap(self, p1: torch.Tensor, p2: torch.Tensor, c: object) -> torch.Tensor:
        """Logarithmic map at ``p1`` of ``p2`` (hypermc: ``logmap(p1, p2)``)."""
        return self.manifold(c).logmap(p1, p2)

    def expmap0(self, u: torch.Tensor, c: object) -> torch.Tensor:
        """Exponential map at the origin."""
        return self.manifold(c).expmap0(u)

    def logmap0(self, p: torch.Tensor, c: object) -> torch.Tensor:
        """Logarithmic map at the origin."""
        return self.manifold(c).logmap0(p)

    def mobius_add(self, x: torch.Tensor, y: torch.Tensor, c: object, dim: int = -1) -> torch.Tensor:
        """Möbius addition ``x ⊕ y`` (:func:`hypermc.nn.hyperbolic.mobius_add`); ``dim`` must be -1."""
        self._check_dim(dim, x)
        return H.mobius_add(self.manifold(c), x, y)

    def mobius_matvec(self, m: torch.Tensor, x: torch.Tensor, c: object) -> torch.Tensor:
        """Möbius matrix-vector product ``m ⊗ x`` with ``mx = x @ m^T``."""
        return H.mobius_matvec(self.manifold(c), m, x)

    def init_weights(self, w: torch.Tensor, c: object, irange: float = INIT_IRANGE) -> torch.Tensor:
        """Fill ``w`` in place with ``U(-irange, irange)`` (drawn in ``w``'s dtype), then
        :meth:`proj` it; returns ``w``."""
        values = torch.empty(w.shape, dtype=w.dtype, device=w.device).uniform_(-irange, irange)
        with torch.no_grad():
            w.copy_(self.proj(values, c))
        return w

    def inner(self, p: torch.Tensor, c: object, u: torch.Tensor, v: torch.Tensor | None = None, keepdim: bool = False) -> torch.Tensor:
        """Riemannian inner product ``<u, v>_p`` (HGCN's order: ``p, c, u, v``)."""
        return self.manifold(c).inner(p, u, v, keepdim=keepdim)

    def ptransp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor, c: object) -> torch.Tensor:
        """Parallel transport of ``u`` from ``x`` to ``y``."""
        return self.manifold(c).transp(x, y, u)

    def ptransp0(self, x: torch.Tensor, u: torch.Tensor, c: object) -> torch.Tensor:
        """Parallel transport of ``u`` from the origin to ``x``."""
        return H.transp0(self.manifold(c), x, u)

    @staticmethod
    def _check_dim(dim: object, x: object) -> None:
        if not isinstance(x, torch.Tensor):
            return  # the manifold's own check names the argument
        if isinstance(dim, bool) or not isinstance(dim, int) or dim not in (-1, x.dim() - 1):
            raise ValueError(f"mobius_add: dim must be -1 (the point dimension is the last one); got {dim!r}")


class PoincareBall(HGCNManifold):
    """HGCN's ``PoincareBall`` (``|x|^2 < 1/c``) on :class:`hypermc.manifolds.PoincareBall`.

    :meth:`mobius_add` and :meth:`mobius_matvec` are the ball's own closed forms;
    :meth:`to_hyperboloid` is :func:`hypermc.manifolds.convert.ball_to_lorentz`.

    Example:
        >>> M = PoincareBall()
        >>> x = hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64)
        >>> origin = hm.mc([[0.0, 0.0]], nc=2, dtype=torch.float64)
        >>> round(M.sqdist(x, origin, c=1.0).approx().item(), 6)  # (2 atanh 0.5)^2
        1.206949
        >>> M.mobius_add(x, x, c=1.0).approx()  # (1 + 1) 0.5 / (1 + 0.25)
        tensor([[0.8000, 0.0000]], dtype=torch.float64)
    """

    name = "PoincareBall"
    eps = {torch.float32: 4e-3, torch.float64: 1e-5}

    def _build(self, c: float) -> _NativeManifold:
        return _native.PoincareBall(curvature=-c)

    def _build_trainable(self, c: torch.Tensor) -> _NativeManifold:
        return _BallAtTensorC(c=c)

    def mobius_add(self, x: torch.Tensor, y: torch.Tensor, c: object, dim: int = -1) -> torch.Tensor:
        """Möbius addition (:meth:`hypermc.manifolds.PoincareBall.mobius_add`); ``dim`` must be -1."""
        self._check_dim(dim, x)
        return cast("_native.PoincareBall", self.manifold(c)).mobius_add(x, y)

    def mobius_matvec(self, m: torch.Tensor, x: torch.Tensor, c: object) -> torch.Tensor:
        """Möbius matrix-vector product (:meth:`hypermc.manifolds.PoincareBall.mobius_matvec`)."""
        return cast("_native.PoincareBall", self.manifold(c)).mobius_matvec(m, x)

    def to_hyperboloid(self, x: torch.Tensor, c: object) -> torch.Tensor:
        """The hyperboloid point of the ball point ``x`` (time coordinate first)."""
        return convert.ball_to_lorentz(x, curvature=-_c_value(c, self.name))


class Hyperboloid(HGCNManifold):
    """HGCN's ``Hyperboloid`` (``-x_0^2 + |x_bar|^2 = -1/c``) on :class:`hypermc.manifolds.Lorentz`.

    Adds HGCN's :meth:`minkowski_dot`, :meth:`minkowski_norm` and :meth:`to_poincare`.

    Example:
        >>> H = Hyperboloid()
        >>> p = PoincareBall().to_hyperboloid(hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64), c=1.0)
        >>> p.approx()  # (1 + |x|^2, 2 x) / (1 - |x|^2), time coordinate first
        tensor([[1.6667, 1.3333, 0.0000]], dtype=torch.float64)
        >>> H.minkowski_dot(p, p).approx()  # -1/c
        tensor([[-1.]], dtype=torch.float64)
        >>> H.to_poincare(p, c=1.0).approx()
        tensor([[0.5000, 0.0000]], dtype=torch.float64)
    """

    name = "Hyperboloid"
    eps = {torch.float32: 1e-7, torch.float64: 1e-15}

    def _build(self, c: float) -> _NativeManifold:
        return _native.Lorentz(curvature=-c)

    def _build_trainable(self, c: torch.Tensor) -> _NativeManifold:
        return _HyperboloidAtTensorC(c=c)

    def minkowski_dot(self, x: torch.Tensor, y: torch.Tensor, keepdim: bool = True) -> torch.Tensor:
        """``<x, y>_L = -x_0 y_0 + <x_bar, y_bar>`` (HGCN's default ``keepdim=True``)."""
        return _lorentz_math.minkowski(x, y, keepdim=keepdim)

    def minkowski_norm(self, u: torch.Tensor, keepdim: bool = True) -> torch.Tensor:
        """``sqrt(<u, u>_L)``, 0 where ``<u, u>_L`` rounds negative (HGCN clamps it at ``eps``)."""
        return common.clamped_sqrt(self.minkowski_dot(u, u, keepdim=keepdim))

    def to_poincare(self, x: torch.Tensor, c: object) -> torch.Tensor:
        """The ball point of the hyperboloid point ``x``."""
        return convert.lorentz_to_ball(x, curvature=-_c_value(c, self.name))


class Euclidean(HGCNManifold):
    """HGCN's ``Euclidean``: ``c`` is accepted and ignored, as in HGCN.

    Example:
        >>> E = Euclidean()
        >>> a = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
        >>> E.sqdist(a, torch.zeros_like(a), c=None)
        tensor([25.0000,  0.2500], dtype=torch.float64)
        >>> E.normalize(a)  # rows longer than 1 scaled to norm 1
        tensor([[0.6000, 0.8000],
                [0.3000, 0.4000]], dtype=torch.float64)
    """

    name = "Euclidean"

    def _build(self, c: float) -> _NativeManifold:
        return _native.Euclidean()

    def manifold(self, c: object = None) -> _NativeManifold:
        """The :class:`hypermc.manifolds.Euclidean` instance (``c`` is ignored)."""
        m = self._cache.get(0.0)
        if m is None:
            m = self._cache[0.0] = self._build(0.0)
        return m

    def sqdist(self, p1: torch.Tensor, p2: torch.Tensor, c: object) -> torch.Tensor:
        """``|p1 - p2|^2`` (formed directly, not as a rounded distance squared)."""
        self.manifold(c)._check("sqdist", p1=p1, p2=p2)
        return common.sqnorm(p1 - p2)

    def normalize(self, p: torch.Tensor) -> torch.Tensor:
        """Rows of ``p`` with norm > 1 scaled to norm 1 (a new tensor; HGCN renormalises in place)."""
        n = common.norm(p, keepdim=True)
        long = common.lead(n) > 1
        return torch.where(long, p / torch.where(long, n, torch.ones_like(n)), p)


class _AtTensorC:
    """A learnable model whose ``c`` is a given tensor (HGCN's trainable curvature): its
    formulas, with gradients to that tensor (the MC lift of ``c`` for MC operands)."""

    def __init__(self, *, c: torch.Tensor) -> None:
        nn.Module.__init__(cast(nn.Module, self))
        self.learnable = True
        self._tensor_c = c.reshape(())

    @property
    def c(self) -> torch.Tensor:
        return self._tensor_c

    def _c(self, like: torch.Tensor) -> torch.Tensor:
        return common.lift(self._tensor_c, like)


class _BallAtTensorC(_AtTensorC, _native.LearnablePoincareBall):  # type: ignore[misc]
    """The ball at HGCN's curvature tensor (``k = -c``)."""


class _HyperboloidAtTensorC(_AtTensorC, _native.LearnableLorentz):  # type: ignore[misc]
    """The hyperboloid at HGCN's curvature tensor (``k = 1/c``)."""

    @property
    def k(self) -> torch.Tensor:  # type: ignore[override]
        return 1 / self._tensor_c
