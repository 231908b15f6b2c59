"""Batched distances between rows of an MC table (pure functions; :meth:`Manifold.dist_batch`).

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
the same code is exactly the plain computation. :func:`generic` is the fallback of
:meth:`Manifold.dist_batch` for models without a specialised form: the value is the MC
distance rounded once, the gradient that of the model's ``dist`` on the plain rows.

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
from typing import Any, cast

import torch

from ...mcf import arith, portable, reduce
from ...mcf.eft import two_sum
from ...mcf.tensor import MCTensor
from . import common

__all__ = ["components_of", "rounded_difference", "halfspace", "ball", "lorentz", "minkowski_sq", "lorentz_from_sq", "euclidean", "generic"]


def components_of(table: torch.Tensor) -> torch.Tensor:
    """The components ``(*shape, nc)`` of an MCTensor, or ``t.unsqueeze(-1)`` of a plain one.

    Example:
        >>> components_of(hm.mc([[1.0, 2.0]], nc=3)).shape, components_of(torch.zeros(4, 2)).shape
        (torch.Size([1, 2, 3]), torch.Size([4, 2, 1]))
    """
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

    Example:
        >>> a = torch.tensor([[1.0, 1e-20], [3.0, 0.0]], dtype=torch.float64)  # 1 + 1e-20 and 3
        >>> b = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
        >>> rounded_difference(a, b)  # the leading components alone give 0 and 2
        tensor([1.0000e-20, 2.0000e+00], dtype=torch.float64)
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
    def forward(ctx: Any, surrogate: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return exact.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        return grad, None


def _exact(surrogate: Callable[[], torch.Tensor], exact: torch.Tensor, leaf: torch.Tensor | None) -> torch.Tensor:
    """``exact`` carrying the gradient of ``surrogate()`` when a leaf needs gradients."""
    if leaf is None or not torch.is_grad_enabled():
        return exact
    return _Exact.apply(surrogate(), exact)


def _plain(rows: torch.Tensor, leaf: torch.Tensor | None) -> torch.Tensor:
    return rows[..., 0] if leaf is None else leaf


def halfspace(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """Half-space distances ``d(rows[ia], rows[ib])`` (arguments: :meth:`Manifold.dist_batch`).

    Example:
        Two points at height ``1e-20`` whose horizontal coordinates differ by ``1e-22``:
        ``d = 2 asinh(0.005)``; the float64 rows are the same point.

        >>> x = hm.mc([[1.0, 1e-20], [1.0, 1e-20]], nc=2, dtype=torch.float64)
        >>> rows = components_of(x + hm.mc([[0.0, 0.0], [1e-22, 0.0]], nc=2, dtype=torch.float64))
        >>> ia, ib = torch.tensor([0]), torch.tensor([1])
        >>> round(float(halfspace(rows, ia, ib, c=1.0)), 12), float(halfspace(rows[..., :1], ia, ib, c=1.0))
        (0.009999958334, 0.0)

        With ``leaf`` (the leading components, requiring grad) the distances are
        differentiable with respect to the rows:

        >>> leaf = rows[..., 0].clone().requires_grad_()
        >>> halfspace(rows, ia, ib, c=1.0, leaf=leaf).sum().backward()
        >>> leaf.grad.shape
        torch.Size([2, 2])
    """
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    delta = _exact(lambda: pa - pb, rounded_difference(rows[ia], rows[ib]), leaf)
    h = portable.sqrt(pa[..., -1:]) * portable.sqrt(pb[..., -1:])
    a = torch.linalg.vector_norm(delta / h, dim=-1) * 0.5
    return torch.asinh(a) * (2.0 / math.sqrt(c))


def _ball_deficit(rows: torch.Tensor, leaf: torch.Tensor | None, c: float) -> torch.Tensor:
    """Per-row deficits ``1 - c|x|^2`` from the MC components, ``(U,)`` plain.

    The rows are an MC table's components, normalised already (every MC operation and
    :meth:`MCTensor.from_components` leave them so), so they are taken as they are: a
    renormalisation here cost a third of a nouns training step on the ball and changed
    no bit of a trained table."""
    p = _plain(rows, leaf)
    with torch.no_grad():
        if rows.shape[-1] == 1:
            exact = common.deficit(rows[..., 0], c=c)
        else:
            exact = cast(MCTensor, common.deficit(MCTensor(rows), c=c)).components[..., 0]
    return _exact(lambda: 1.0 - c * (p * p).sum(-1), exact, leaf)


def ball(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """Ball distances ``d(rows[ia], rows[ib])``; ``cache`` keeps the per-row deficits.

    Example:
        >>> rows = components_of(hm.mc([[0.0, 0.0], [0.5, 0.0], [0.0, -0.5]], nc=2, dtype=torch.float64))
        >>> cache = {}
        >>> d = ball(rows, torch.tensor([0, 1]), torch.tensor([1, 2]), c=1.0, cache=cache)
        >>> [round(v, 6) for v in d.tolist()], sorted(cache)  # ln 3, then d((.5, 0), (0, -.5))
        ([1.098612, 1.6807], ['deficit'])
    """
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    cached: torch.Tensor | None = None if cache is None or leaf is not None else cache.get("deficit")
    if cached is not None:
        dfc = cached
    else:
        dfc = _ball_deficit(rows, leaf, c)
        if cache is not None and leaf is None:
            cache["deficit"] = dfc
    delta = _exact(lambda: pa - pb, rounded_difference(rows[ia], rows[ib]), leaf)
    h = (portable.sqrt(dfc[ia]) * portable.sqrt(dfc[ib])).unsqueeze(-1)
    a = torch.linalg.vector_norm(delta / h, dim=-1) * math.sqrt(c)
    return torch.asinh(a) * (2.0 / math.sqrt(c))


def _minkowski(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (u[..., 1:] * v[..., 1:]).sum(-1) - u[..., 0] * v[..., 0]


def lorentz(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, c: float, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """Hyperboloid distances ``d(rows[ia], rows[ib])`` (time coordinate first).

    Example:
        A step of ``1e-3`` at radius 20 (coordinates ``~2.4e8``); from the float64 rows
        ``<delta, delta>_L`` cancels to ``<= 0`` and the distance to ``~0``:

        >>> from hypermc.manifolds import Lorentz
        >>> L = Lorentz()
        >>> x = L.expmap0(hm.mc([0.0, 20.0], nc=2, dtype=torch.float64))
        >>> y = L.expmap0(hm.mc([0.0, 20.001], nc=2, dtype=torch.float64))
        >>> rows = components_of(torch.stack([x, y]))
        >>> ia, ib = torch.tensor([0]), torch.tensor([1])
        >>> round(float(lorentz(rows, ia, ib, c=1.0)), 9), float(lorentz(rows[..., :1], ia, ib, c=1.0)) < 1e-100
        (0.001, True)
    """
    p = _plain(rows, leaf)
    pa, pb = p[ia], p[ib]
    with torch.no_grad():
        q, delta = minkowski_sq(rows[ia], rows[ib])
    q = _exact(lambda: 2.0 * _minkowski(delta, pa - pb), q, leaf)
    return lorentz_from_sq(q, c)


def minkowski_sq(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``<a - b, a - b>_L`` of MC rows ``(..., n, nc)`` (time coordinate first) in MC
    arithmetic, rounded once to the component dtype, and the coordinate differences
    ``(..., n)`` (the leading components of the MC differences): the part of
    :func:`lorentz` that needs the components. The coordinate differences
    (:func:`hypermc.mcf.arith.sub`), the sum of the spatial squares
    (:func:`hypermc.mcf.reduce.sumsq`: one fused row kernel at nc = 2, 3), the time
    coordinate's square and the difference, each an MC operation.

    Example:
        >>> a = torch.tensor([[[1.25, 0.0], [0.75, 0.0]]], dtype=torch.float64)  # (5/4, 3/4), nc = 2
        >>> b = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]], dtype=torch.float64)  # the origin
        >>> q, delta = minkowski_sq(a, b)
        >>> q.tolist(), delta.tolist()  # 0.75^2 - 0.25^2
        ([0.5], [[0.25, 0.75]])
    """
    if a.shape[-1] == 1:
        delta = a[..., 0] - b[..., 0]
        return _minkowski(delta, delta), delta
    d = arith.sub(a, b)
    spatial = reduce.sumsq(d[..., 1:, :], -1)
    return arith.sub(spatial, arith.mul(d[..., 0, :], d[..., 0, :]))[..., 0], d[..., 0]


def lorentz_from_sq(q: torch.Tensor, c: float) -> torch.Tensor:
    """The hyperboloid distance ``(2 / sqrt c) asinh(sqrt(c q) / 2)`` from ``q =
    <delta, delta>_L`` (plain; differentiable).

    ``q >= 0`` for points of the hyperboloid; rounding can make it slightly negative for
    coincident points, so it is clamped at the smallest normal number (distance ~0).

    Example:
        >>> d = lorentz_from_sq(torch.tensor([0.5, -1e-300], dtype=torch.float64), 1.0)
        >>> round(float(d[0]), 6), float(d[1]) < 1e-150  # ln 2; the clamped pair
        (0.693147, True)
    """
    q = q.clamp_min(torch.finfo(q.dtype).tiny)
    return torch.asinh(portable.sqrt(q * c) * 0.5) * (2.0 / math.sqrt(c))


def euclidean(
    rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, *, leaf: torch.Tensor | None = None, cache: dict | None = None
) -> torch.Tensor:
    """Euclidean distances ``|rows[ia] - rows[ib]|``.

    Example:
        >>> x = hm.mc([[1.0, 0.0], [1.0, 0.0]], nc=2, dtype=torch.float64)
        >>> rows = components_of(x + hm.mc([[0.0, 0.0], [3e-20, 4e-20]], nc=2, dtype=torch.float64))
        >>> euclidean(rows, torch.tensor([0]), torch.tensor([1]))
        tensor([5.0000e-20], dtype=torch.float64)
    """
    p = _plain(rows, leaf)
    delta = _exact(lambda: p[ia] - p[ib], rounded_difference(rows[ia], rows[ib]), leaf)
    return torch.linalg.vector_norm(delta, dim=-1)


def generic(
    dist: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    rows: torch.Tensor,
    ia: torch.Tensor,
    ib: torch.Tensor,
    *,
    leaf: torch.Tensor | None = None,
) -> torch.Tensor:
    """Any model's batched distances from its ``dist`` (the fallback of :meth:`Manifold.dist_batch`).

    The value is ``dist`` of the MC rows (full MC arithmetic, ~100x the specialised
    forms) rounded once to the component dtype; with ``leaf`` the gradient is that of
    ``dist(leaf[ia], leaf[ib])`` in plain arithmetic, as for the specialised forms.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> M = PoincareBall()
        >>> rows = components_of(M.random(5, 2, nc=2, dtype=torch.float64))
        >>> ia, ib = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 0])
        >>> bool(torch.allclose(generic(M.dist, rows, ia, ib), ball(rows, ia, ib, c=1.0), rtol=1e-12))
        True
    """
    with torch.no_grad():
        points = rows[..., 0] if rows.shape[-1] == 1 else MCTensor.from_components(rows)
        d = dist(points[ia], points[ib])
        exact = d.approx() if isinstance(d, MCTensor) else d
    return _exact(lambda: dist(_plain(rows, leaf)[ia], _plain(rows, leaf)[ib]), exact, leaf)
