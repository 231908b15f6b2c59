"""Batched distances between rows of an MC embedding table, for training and evaluation.

The trainer and the evaluator need many distances (``B x (1 + negatives)`` per batch,
``chunk x N`` per evaluation chunk) and, for training, their gradients with respect to
the rows. Computing each distance fully in MC arithmetic and differentiating through the
MC kernels is exact but costs ~100x a plain distance; it is also unnecessary, because
in these formulas only a few quantities lose precision:

* the coordinate differences ``delta = x - y`` (cancellation between close points far
  from the origin: in the half-space two points at height ``1e-20`` whose horizontal
  coordinates differ by ``1e-22`` are equal in float64);
* the ball's deficits ``1 - c|x|^2`` (cancellation near the boundary);
* the Lorentz model's ``<x - y, x - y>_L`` (cancellation of ``x_0^2 ~ e^(2r)``).

These are computed from the MC components (MC arithmetic, or an exact ``two_sum`` for the
difference) and rounded **once** to the component dtype. Everything after them (norms,
products of heights or deficits, ``asinh``) is well conditioned -- relative errors are
not amplified -- so it runs in plain arithmetic of the component dtype, and the
resulting distance is within a few ulps of the MC distance rounded to that dtype
(tested against :meth:`Manifold.dist` on MCTensors). For a plain table (or ``nc = 1``)
the same code is exactly the plain computation.

Gradients: the rounded MC quantities enter through :class:`_Exact`, whose value is the
MC-derived number and whose derivative is that of the same expression in plain
arithmetic (``d delta / d x = I``, ``d D / d x = -2 c x``, ...). The gradient with
respect to the rows is therefore the gradient of the exact formula at the stored points,
in the component dtype; the optimizer then applies it to the MC coordinates in MC
arithmetic (that is where the precision of a point far from the origin is kept).

Formulas (``c = -K > 0``; ``t = x_n``, ``s = y_n`` the half-space heights; ``D`` the
ball deficits):

* half-space: ``d = (2 / sqrt c) asinh(|delta / (sqrt t sqrt s)| / 2)``
* ball: ``d = (2 / sqrt c) asinh(sqrt c |delta / (sqrt D_x sqrt D_y)|)``
* Lorentz: ``d = (2 / sqrt c) asinh(sqrt(c <delta, delta>_L) / 2)``
* Euclidean: ``d = |delta|``

(the same forms as :mod:`hypermc.manifolds.math`; the quotient is formed before the norm
so that nothing under- or overflows for heights or deficits far from 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
from ..manifolds.base import Manifold
from ..manifolds.math import common
from ..mcf.eft import two_sum
from ..mcf.tensor import MCTensor

__all__ = ["components_of", "rounded_difference", "batch_distance", "SUPPORTED"]


def components_of(table: torch.Tensor) -> torch.Tensor:
    """The components ``(*shape, nc)`` of an MCTensor, or ``t.unsqueeze(-1)`` of a plain one."""
    if isinstance(table, MCTensor):
        return table.components
    return table.unsqueeze(-1)


def rounded_difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a - b`` of two MC component tensors ``(*, nc)``, rounded to one float.

    ``(s, e) = two_sum(a_0, -b_0)``, then ``s + (e + sum_i (a_i - b_i))``. When the
    leading components cancel, ``s`` is exact and the tails carry the difference; the
    error is ``<= 2u |a - b| + 2 nc u^nc max(|a|, |b|)``, i.e. the result is as accurate
    as the MC operands allow. With ``nc = 1`` this is exactly ``a_0 - b_0``.

    Shape:
        ``a``, ``b`` broadcastable ``(*, nc)``; result ``(*)`` (broadcast).
    """
    if a.shape[-1] == 1 and b.shape[-1] == 1:
        return a[..., 0] - b[..., 0]
    s, e = two_sum(a[..., 0], -b[..., 0])
    for i in range(1, max(a.shape[-1], b.shape[-1])):
        ai = a[..., i] if i < a.shape[-1] else 0.0
        bi = b[..., i] if i < b.shape[-1] else 0.0
        e = e + (ai - bi)
    return s + e


class _Exact(torch.autograd.Function):
    """Value of ``exact``, derivative of ``surrogate`` (the same quantity in plain math)."""

    @staticmethod
    def forward(ctx, surrogate, exact):  # noqa: D102
        return exact.clone()

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        return grad, None


def _exact(surrogate: Callable[[], torch.Tensor], exact: torch.Tensor, leaf: torch.Tensor | None) -> torch.Tensor:
    """``exact`` carrying the gradient of ``surrogate()`` when a leaf needs gradients."""
    if leaf is None or not torch.is_grad_enabled():
        return exact
    return _Exact.apply(surrogate(), exact)


def _plain(rows: torch.Tensor, leaf: torch.Tensor | None) -> torch.Tensor:
    return rows[..., 0] if leaf is None else leaf


def _halfspace(m: PoincareHalfspace, rows, leaf, ia, ib, cache):
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    delta = _exact(lambda: pa - pb, rounded_difference(rows[ia], rows[ib]), leaf)
    h = torch.sqrt(pa[..., -1:]) * torch.sqrt(pb[..., -1:])
    a = torch.linalg.vector_norm(delta / h, dim=-1) * 0.5
    return torch.asinh(a) * (2.0 / math.sqrt(m.c))


def _ball_deficit(m: PoincareBall, rows, leaf):
    """Per-row deficits ``1 - c|x|^2`` from the MC components, ``(U,)`` plain."""
    p = _plain(rows, leaf)
    with torch.no_grad():
        if rows.shape[-1] == 1:
            exact = common.deficit(rows[..., 0], m.c)
        else:
            exact = common.deficit(MCTensor.from_components(rows), m.c).components[..., 0]
    return _exact(lambda: 1.0 - m.c * (p * p).sum(-1), exact, leaf)


def _ball(m: PoincareBall, rows, leaf, ia, ib, cache):
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    if cache is None or leaf is not None:
        dfc = _ball_deficit(m, rows, leaf)
    else:
        dfc = cache.get("deficit")
        if dfc is None:
            dfc = cache["deficit"] = _ball_deficit(m, rows, None)
    delta = _exact(lambda: pa - pb, rounded_difference(rows[ia], rows[ib]), leaf)
    h = (torch.sqrt(dfc[ia]) * torch.sqrt(dfc[ib])).unsqueeze(-1)
    a = torch.linalg.vector_norm(delta / h, dim=-1) * math.sqrt(m.c)
    return torch.asinh(a) * (2.0 / math.sqrt(m.c))


def _minkowski(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (u[..., 1:] * v[..., 1:]).sum(-1) - u[..., 0] * v[..., 0]


def _lorentz(m: Lorentz, rows, leaf, ia, ib, cache):
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    with torch.no_grad():
        if rows.shape[-1] == 1:
            delta = rows[ia][..., 0] - rows[ib][..., 0]
            q = _minkowski(delta, delta)
        else:
            dm = MCTensor.from_components(rows[ia]) - MCTensor.from_components(rows[ib])
            q = ((dm[..., 1:] * dm[..., 1:]).sum(-1) - dm[..., 0] * dm[..., 0]).components[..., 0]
            delta = dm.components[..., 0]
    # <delta, delta>_L >= 0 for points of the hyperboloid; rounding can make it slightly
    # negative for coincident points: clamp at the smallest normal number (distance ~0).
    q = _exact(lambda: 2.0 * _minkowski(delta, pa - pb), q, leaf)
    q = q.clamp_min(torch.finfo(q.dtype).tiny)
    return torch.asinh(torch.sqrt(q * m.c) * 0.5) * (2.0 / math.sqrt(m.c))


def _euclidean(m: Euclidean, rows, leaf, ia, ib, cache):
    p = _plain(rows, leaf)
    delta = _exact(lambda: p[ia] - p[ib], rounded_difference(rows[ia], rows[ib]), leaf)
    return torch.linalg.vector_norm(delta, dim=-1)


#: Manifold type -> batched distance (dispatch by table).
SUPPORTED: dict[type, Callable] = {
    PoincareHalfspace: _halfspace,
    PoincareBall: _ball,
    Lorentz: _lorentz,
    Euclidean: _euclidean,
}


def batch_distance(
    manifold: Manifold,
    rows: torch.Tensor,
    ia: torch.Tensor,
    ib: torch.Tensor,
    *,
    leaf: torch.Tensor | None = None,
    cache: dict | None = None,
) -> torch.Tensor:
    """Distances ``d(rows[ia], rows[ib])`` (see the module docstring for the method).

    Args:
        manifold: one of :data:`SUPPORTED`'s types.
        rows: MC components ``(U, n, nc)`` of the points (``nc = 1`` for plain points).
        ia, ib: int64 indices into ``rows``, broadcastable against each other.
        leaf: optional plain ``(U, n)`` tensor equal to ``rows[..., 0]`` that requires
            grad; the distances are then differentiable with respect to it.
        cache: optional dict for per-row quantities (the ball's deficits) reused by
            later calls with the same ``rows`` and no ``leaf`` (the evaluator's chunks).

    Returns:
        Plain tensor of the broadcast shape of ``ia`` and ``ib``, component dtype.

    Raises:
        TypeError: for a manifold type without a batched distance.
    """
    fn = SUPPORTED.get(type(manifold))
    if fn is None:
        names = ", ".join(t.__name__ for t in SUPPORTED)
        raise TypeError(f"batch_distance: manifold must be one of {names}; got {type(manifold).__name__}")
    return fn(manifold, rows, leaf, ia, ib, cache)
