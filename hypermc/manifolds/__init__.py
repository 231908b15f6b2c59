"""Manifolds in MC arithmetic: the hyperbolic halfspace, ball and Lorentz models, the
kappa-stereographic model (learnable curvature), the sphere, Euclidean space and
:class:`Scaled` versions of them, with geoopt's names (:mod:`.geoopt_compat`).

One curvature convention for all models (``curvature = K < 0``, default ``-1``; see
:mod:`hypermc.manifolds.base`); geoopt's method names; every formula is computed in MC
arithmetic on :class:`~hypermc.MCTensor` s and chosen to keep its precision far from the
origin. :mod:`hypermc.manifolds.convert` holds the isometries between the models;
:mod:`hypermc.manifolds.registry` names the models the trainer, the CLI, the
constructions and the plots build (:func:`manifold_from_name`).
"""

from . import convert
from .ball import PoincareBall
from .base import Manifold
from .euclidean import Euclidean
from .halfspace import PoincareHalfspace
from .lorentz import LearnableLorentz, Lorentz
from .parameter import ManifoldParameter, ManifoldTensor, manifold_of
from .product import ProductManifold
from .registry import manifold_from_name, register_manifold, registered_manifolds
from .scaled import Scaled
from .sphere import Sphere
from .stereographic import LearnablePoincareBall, SphereProjection, Stereographic

__all__ = [
    "Manifold",
    "PoincareHalfspace",
    "PoincareBall",
    "Lorentz",
    "Euclidean",
    "Stereographic",
    "SphereProjection",
    "LearnablePoincareBall",
    "LearnableLorentz",
    "Sphere",
    "Scaled",
    "ProductManifold",
    "ManifoldTensor",
    "ManifoldParameter",
    "manifold_of",
    "convert",
    "register_manifold",
    "registered_manifolds",
    "manifold_from_name",
]
