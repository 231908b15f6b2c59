"""Hyperbolic manifolds in MC arithmetic: halfspace, ball, Lorentz (and Euclidean).

One curvature convention for all models (``curvature = K < 0``, default ``-1``; see
:mod:`hypermc.manifolds.base`); geoopt's method names; every formula is computed in MC
arithmetic on :class:`~hypermc.MCTensor` s and chosen to keep its precision far from the
origin. :mod:`hypermc.manifolds.convert` holds the isometries between the models.
"""

from . import convert
from .ball import PoincareBall
from .base import Manifold
from .euclidean import Euclidean
from .halfspace import PoincareHalfspace
from .lorentz import Lorentz
from .parameter import ManifoldParameter, manifold_of

__all__ = [
    "Manifold",
    "PoincareHalfspace",
    "PoincareBall",
    "Lorentz",
    "Euclidean",
    "ManifoldParameter",
    "manifold_of",
    "convert",
]
