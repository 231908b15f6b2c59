"""Batched distances for training and evaluation: a re-export of the manifolds' own.

The implementation lives in :mod:`hypermc.manifolds.math.batch` and is reached through
:meth:`Manifold.dist_batch <hypermc.manifolds.base.Manifold.dist_batch>`
(``M.dist_batch(rows, ia, ib, leaf=..., cache=...)``); this module keeps the names the
embedding code imported before the move.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._checks import check_instance
from ..manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace
from ..manifolds.base import Manifold
from ..manifolds.math.batch import components_of, rounded_difference

__all__ = ["components_of", "rounded_difference", "batch_distance", "SUPPORTED"]

#: The models with a specialised batched distance (class -> its ``dist_batch``); any
#: other :class:`Manifold` uses the generic (full MC) one.
SUPPORTED: dict[type, Callable[..., torch.Tensor]] = {cls: cls.dist_batch for cls in (PoincareHalfspace, PoincareBall, Lorentz, Euclidean)}


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
