"""Batched distances for training and evaluation: a re-export of the manifolds' own.

The implementation lives in :mod:`hypermc.manifolds.math.batch` and is reached through
:meth:`Manifold.dist_batch <hypermc.manifolds.base.Manifold.dist_batch>`
(``M.dist_batch(rows, ia, ib, leaf=..., cache=...)``); this module keeps the names the
embedding code imported before the move.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from .._checks import check_instance
from ..manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
from ..manifolds.base import Manifold
from ..manifolds.math import fused
from ..manifolds.math.batch import components_of, rounded_difference

__all__ = ["components_of", "rounded_difference", "batch_distance", "distance_function", "SUPPORTED", "FUSED"]

#: The models with a specialised batched distance (class -> its ``dist_batch``); any
#: other :class:`Manifold` uses the generic (full MC) one.
SUPPORTED: dict[type, Callable[..., torch.Tensor]] = {cls: cls.dist_batch for cls in (PoincareHalfspace, PoincareBall, Lorentz, Euclidean)}
#: The models with fused CPU distance kernels (:mod:`hypermc.manifolds.math.fused`),
#: used by ``train(fast=True)`` and ``evaluate(fast=True)``: values within
#: ``fused.VALUE_ULPS`` ulps of ``dist_batch``, not bit for bit.
FUSED: dict[type, Callable[..., torch.Tensor]] = {PoincareHalfspace: fused.halfspace}


def batch_distance(
    manifold: Manifold,
    rows: torch.Tensor,
    ia: torch.Tensor,
    ib: torch.Tensor,
    *,
    leaf: torch.Tensor | None = None,
    cache: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``manifold.dist_batch(rows, ia, ib, leaf=leaf, cache=cache)``; see
    :meth:`hypermc.manifolds.base.Manifold.dist_batch`.

    Raises:
        TypeError: ``manifold`` is not a :class:`~hypermc.manifolds.base.Manifold`.

    Example:
        >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0], [1.0, 1.0]], nc=2, dtype=torch.float64)
        >>> d = batch_distance(PoincareHalfspace(), components_of(table), torch.tensor([0, 0]), torch.tensor([1, 2]))
        >>> [round(v, 6) for v in d.tolist()]  # ln 2, 2 asinh(1/2)
        [0.693147, 0.962424]
    """
    check_instance("batch_distance", "manifold", manifold, Manifold, "a hypermc manifold (e.g. PoincareBall())")
    return manifold.dist_batch(rows, ia, ib, leaf=leaf, cache=cache)


def distance_function(manifold: Manifold, fast: bool = False) -> Callable[..., torch.Tensor]:
    """``f(rows, ia, ib, leaf=..., cache=...)``: the batched distance of ``manifold``.

    With ``fast`` the fused CPU kernels where the model has them (:data:`FUSED`; they run
    the torch path themselves where they do not apply: CUDA, nc = 1, plain tables, no
    compiler), else :func:`batch_distance`.

    Example:
        >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0]], nc=2, dtype=torch.float64)
        >>> f = distance_function(PoincareHalfspace(), fast=True)
        >>> round(float(f(components_of(table), torch.tensor([0]), torch.tensor([1]))[0]), 6)  # ln 2
        0.693147
    """
    check_instance("distance_function", "manifold", manifold, Manifold, "a hypermc manifold (e.g. PoincareBall())")
    kernel = FUSED.get(type(manifold)) if fast else None
    return partial(batch_distance, manifold) if kernel is None else partial(kernel, c=manifold.c)
