"""The manifold base class and the curvature convention shared by every model.

Curvature
---------
Every hyperbolic model takes ``curvature=K`` with **K < 0** (default ``-1``): the
sectional curvature of the space, the same number with the same meaning in
:class:`PoincareHalfspace`, :class:`PoincareBall` and :class:`Lorentz`, so the three
models with equal ``K`` are isometric (:mod:`hypermc.manifolds.convert`) and give the
same distances. Formulas are written with ``c = -K > 0``:

* ball: ``|x| < 1/sqrt(c)``, metric ``(2 / (1 - c|x|^2))^2 |dx|^2``;
* halfspace: ``x_n > 0``, metric ``|dx|^2 / (c x_n^2)`` (same points for every ``c``);
* Lorentz: ``<x, x>_L = -x_0^2 + |x_bar|^2 = -1/c``, ``x_0 > 0``.

Distances scale as ``d_K = d_{-1} / sqrt(c)``. (geoopt's ``Stereographic(k)`` uses
``k = K``; its ``Lorentz(k)`` uses ``k = 1/c``.) ``K`` is a Python float or a 0-d
tensor, fixed at construction: learnable curvature is not supported. Constants derived
from it (``sqrt c``, ``1/c``) enter MC formulas at MC precision.

Precision and range
-------------------
Everything is computed in MC arithmetic when the inputs are :class:`~hypermc.MCTensor`
s (plain Tensors behave as ``nc = 1``); gradients through every method are MCTensors.
Each model's *MC range* is the hyperbolic radius up to which stored points resolve
hyperbolic lengths below ~1e-6 — see each class docstring and the MC range table in docs/manifolds.md.

Methods (geoopt vocabulary, identical in every model): ``dist``, ``expmap``,
``logmap``, ``expmap0``, ``logmap0``, ``retr``, ``projx``, ``proju``,
``egrad2rgrad``, ``inner``, ``norm``, ``transp``, ``random``, ``origin``,
``check_point``. Points are ``x, y``, tangent vectors ``u, v``; the point dimension is
the last one and leading dimensions broadcast.

Membership check (``check=``)
-----------------------------
``dist``, ``dist0``, ``expmap``, ``logmap`` and ``logmap0`` take a keyword ``check``
(default ``True``): their point arguments must pass :meth:`Manifold.check_point`
(finite, inside the ball / ``x_n > 0`` / on the upper hyperboloid within its
tolerance), else ``ValueError`` naming the method, the argument and the violated
condition — off-manifold points would otherwise give finite garbage. The check is one
pass over the points and one host sync per argument. Rules:

* ``check=False`` skips it: for inner loops whose points are known good (the
  optimizers' steps, the trainer, ``evaluate`` after its one check of the table).
* While ``torch.compile``/export traces (:func:`hypermc.mcf.eft.tracing`) the check
  is skipped: it would need a data-dependent branch (a graph break or a host sync).
  Check the inputs eagerly (``check_point``) before calling a compiled function.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from ..mcf import eft
from ..mcf.tensor import MCTensor, mc
from .math import common

__all__ = ["Manifold", "curvature_to_c"]


def curvature_to_c(curvature: Any) -> float:
    """Validate a curvature ``K < 0`` and return ``c = -K`` as a Python float.

    Raises:
        TypeError: not a real number or a 0-d real tensor.
        ValueError: not finite or not negative.
    """
    if isinstance(curvature, torch.Tensor):
        if curvature.numel() != 1 or isinstance(curvature, MCTensor):
            raise TypeError(
                f"curvature must be a float or a 0-d plain tensor; got a tensor of shape "
                f"{tuple(curvature.shape)}"
            )
        if curvature.requires_grad:
            raise TypeError("curvature must not require grad: learnable curvature is not supported")
        curvature = curvature.item()
    if isinstance(curvature, bool) or not isinstance(curvature, numbers.Real):
        raise TypeError(f"curvature must be a negative real number; got {type(curvature).__name__} {curvature!r}")
    k = float(curvature)
    if not math.isfinite(k) or k >= 0:
        raise ValueError(
            f"curvature must be a finite negative number (K < 0, default -1); got {k}. "
            "Use Euclidean() for K = 0; a positive value is not a hyperbolic space"
        )
    return -k


class Manifold:
    """Base class: curvature, argument checks and the shared helpers of the models.

    Subclasses set ``name`` and ``min_dim`` (smallest size of the point dimension) and
    implement the methods as one-line calls into ``hypermc.manifolds.math``.
    """

    name = "manifold"
    min_dim = 1

    def __init__(self, curvature: float = -1.0):
        self.c = curvature_to_c(curvature)
        self.curvature = -self.c

    def __repr__(self) -> str:
        return f"{type(self).__name__}(curvature={self.curvature:g})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.curvature == other.curvature

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.curvature))

    # ----------------------------------------------------------------- checks

    def _check(self, fname: str, **tensors) -> None:
        """Type, dtype and shape checks of the arguments of a public method."""
        dtype = None
        first = None
        shapes = []
        for name, t in tensors.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(
                    f"{type(self).__name__}.{fname}: {name} must be a Tensor or MCTensor; "
                    f"got {type(t).__name__}"
                )
            if not t.is_floating_point():
                raise TypeError(
                    f"{type(self).__name__}.{fname}: {name} must have a floating dtype; got {t.dtype}"
                )
            if t.dim() < 1 or t.shape[-1] < self.min_dim:
                raise ValueError(
                    f"{type(self).__name__}.{fname}: {name} must have a last (point) dimension of "
                    f"size >= {self.min_dim}; got shape {tuple(t.shape)}"
                )
            if dtype is None:
                dtype, first = t.dtype, name
            elif t.dtype != dtype:
                raise TypeError(
                    f"{type(self).__name__}.{fname}: {first} has dtype {dtype} but {name} has "
                    f"{t.dtype}; convert one with .to(dtype) (no implicit precision change)"
                )
            shapes.append((name, tuple(t.shape)))
        dims = {s[-1] for _, s in shapes}
        if len(dims) > 1:
            desc = ", ".join(f"{n} {s}" for n, s in shapes)
            raise ValueError(
                f"{type(self).__name__}.{fname}: the point dimensions (last) differ: {desc}"
            )
        try:
            torch.broadcast_shapes(*(s[:-1] for _, s in shapes))
        except RuntimeError:
            desc = ", ".join(f"{n} {s}" for n, s in shapes)
            raise ValueError(
                f"{type(self).__name__}.{fname}: the leading (batch) dimensions do not broadcast: {desc}"
            ) from None

    def _check_on(self, fname: str, check: bool, **points) -> None:
        """The membership check of the public entry points (``check=``, see the module
        docstring): ``ValueError`` unless every argument passes :meth:`check_point`.
        Skipped with ``check=False`` and while ``torch.compile`` traces."""
        if not check or eft.tracing():
            return
        with torch.no_grad():
            for name, x in points.items():
                ok, reason = self.check_point(x)
                if not ok:
                    raise ValueError(
                        f"{type(self).__name__}.{fname}: {name} is not a point of {self!r}: {reason}; "
                        f"project it (projx) or pass check=False to skip this check"
                    )

    @staticmethod
    def _keep(out, keepdim: bool):
        return out.unsqueeze(-1) if keepdim else out

    # ------------------------------------------------------------- factories

    def _origin_values(self, size: tuple[int, ...], dtype, device) -> torch.Tensor:
        raise NotImplementedError

    def _size(self, size) -> tuple[int, ...]:
        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        size = tuple(int(s) for s in size)
        if not size or size[-1] < self.min_dim:
            raise ValueError(
                f"{type(self).__name__}: size must end with the point dimension (>= {self.min_dim}); got {size}"
            )
        return size

    @staticmethod
    def _as_mc(t: torch.Tensor, nc: int | None):
        return t if nc is None else mc(t, nc=nc)

    def origin(self, *size, nc: int | None = 2, dtype: torch.dtype | None = None, device=None):
        """The origin (the base point of ``expmap0`` / ``logmap0``), broadcast to ``size``.

        Args:
            size: shape, ending with the point dimension.
            nc: components of the MCTensor result; ``None`` for a plain Tensor.
            dtype: component dtype (default ``torch.get_default_dtype()``).
        """
        size = self._size(size)
        values = self._origin_values(size, dtype or torch.get_default_dtype(), device)
        return self._as_mc(values, nc)

    def random(self, *size, std: float = 1.0, nc: int | None = 2, dtype: torch.dtype | None = None,
               device=None, generator: torch.Generator | None = None):
        """Random points: ``expmap0`` of a tangent vector at the origin whose Riemannian
        coordinates are ``N(0, std^2)`` (computed in MC arithmetic).

        Args:
            size: shape, ending with the point dimension.
            std: standard deviation of each tangent coordinate (hyperbolic units).
            nc: components of the MCTensor result; ``None`` for a plain Tensor.
            dtype: component dtype (default ``torch.get_default_dtype()``).
            generator: a ``torch.Generator`` (the library never reads a global seed
                implicitly; without one torch's default generator is used).
        """
        size = self._size(size)
        dtype = dtype or torch.get_default_dtype()
        if not (isinstance(std, numbers.Real) and std >= 0 and math.isfinite(std)):
            raise ValueError(f"random: std must be a finite number >= 0; got {std!r}")
        u = torch.randn(size, dtype=dtype, device=device, generator=generator) * std
        return self.expmap0(self._origin_tangent(self._as_mc(u, nc)))

    def _origin_tangent(self, u):
        """A tangent vector at the origin with Riemannian coordinates ``u``."""
        return u

    # --------------------------------------------------------- check_point

    def check_point(self, x, *, atol: float | None = None) -> tuple[bool, str | None]:
        """Whether ``x`` holds points of this manifold.

        Returns:
            ``(True, None)`` or ``(False, reason)``; the reason names the violated
            condition, how many points violate it and the first index.
        """
        self._check("check_point", x=x)
        lead = common.lead(x)
        finite = torch.isfinite(lead).all(dim=-1)
        if isinstance(x, MCTensor):
            finite = finite & torch.isfinite(x.components).all(dim=-1).all(dim=-1)
        bad = ~finite
        if bool(bad.any()):
            return False, _reason("contains inf or NaN", bad)
        return self._check_values(x, atol)

    def _check_values(self, x, atol):
        return True, None


def _reason(what: str, bad: torch.Tensor) -> str:
    n = int(bad.sum())
    first = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
    return f"{what} ({n} of {max(bad.numel(), 1)} points; first at index {first})"
