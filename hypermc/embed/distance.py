"""Batched distances for training and evaluation: a re-export of the manifolds' own.

The implementation lives in :mod:`hypermc.manifolds.math.batch` and is reached through
:meth:`Manifold.dist_batch <hypermc.manifolds.base.Manifold.dist_batch>`
(``M.dist_batch(rows, ia, ib, leaf=..., cache=...)``); this module keeps the names the
embedding code imported before the move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import torch

from .._checks import check_instance
from ..manifolds import PoincareHalfspace  # noqa: F401  (the docstring examples use it)
from ..manifolds.base import Manifold
from ..manifolds.math.batch import components_of, rounded_difference
from ..manifolds.registry import MANIFOLDS

__all__ = ["components_of", "rounded_difference", "batch_distance", "distance_function", "SUPPORTED", "FUSED"]


class _RegisteredKernels(Mapping[type, Callable[..., torch.Tensor]]):
    """A read-only view ``{class: kernel}`` of the registered models that have the kernel
    (class attribute ``attr``), current at each access."""

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def _table(self) -> dict[type, Callable[..., torch.Tensor]]:
        return {cls: k for cls in MANIFOLDS.values() if (k := getattr(cls, self.attr)) is not None}

    def __getitem__(self, cls: type) -> Callable[..., torch.Tensor]:
        return self._table()[cls]

    def __iter__(self) -> Iterator[type]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: The registered models' batched distances (class -> its ``dist_batch``); a model
#: without a specialised one uses the generic (full MC) one of the base class.
SUPPORTED: Mapping[type, Callable[..., torch.Tensor]] = _RegisteredKernels("dist_batch")
#: The registered models with fused CPU distance kernels (class -> its
#: ``fused_dist_batch``, :mod:`hypermc.manifolds.math.fused`), used by
#: ``train(fast=True)`` and ``evaluate(fast=True)``: values within ``fused.VALUE_ULPS``
#: ulps of ``dist_batch``, not bit for bit.
FUSED: Mapping[type, Callable[..., torch.Tensor]] = _RegisteredKernels("fused_dist_batch")


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

    With ``fast`` the fused CPU kernels where the model has them (its ``fused_dist_batch``,
    :data:`FUSED`; they run
    the torch path themselves where they do not apply: CUDA, float16, no compiler, the
    hyperboloid's plain tables), else :func:`batch_distance`.

    Example:
        >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0]], nc=2, dtype=torch.float64)
        >>> f = distance_function(PoincareHalfspace(), fast=True)
        >>> round(float(f(components_of(table), torch.tensor([0]), torch.tensor([1]))[0]), 6)  # ln 2
        0.693147
    """
    check_instance("distance_function", "manifold", manifold, Manifold, "a hypermc manifold (e.g. PoincareBall())")
    kernel = manifold.fused_dist_batch if fast else None
    return partial(batch_distance, manifold) if kernel is None else partial(kernel, c=manifold.c)
