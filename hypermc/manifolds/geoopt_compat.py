"""Reading geoopt's manifolds: the hypermc model with the same geometry.

geoopt is not imported (it is an optional extra); its manifolds are recognised by their
class (module ``geoopt...`` and class name), so that hypermc's optimizers take a
Riemannian step on a ``geoopt.ManifoldParameter`` instead of a Euclidean one, or refuse
it with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Manifold

__all__ = ["from_geoopt", "is_geoopt_manifold"]


def is_geoopt_manifold(obj: object) -> bool:
    """Whether ``obj`` is an instance of a geoopt manifold class (without importing geoopt).

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> is_geoopt_manifold(PoincareBall()), is_geoopt_manifold(3)
        (False, False)
    """
    return any(c.__module__.split(".")[0] == "geoopt" and c.__name__ == "Manifold" for c in type(obj).__mro__)


def _scalar(obj: Any, name: str) -> float:
    return float(getattr(obj, name).detach())


def _stereo(m: Any) -> Manifold:
    from .stereographic import Stereographic

    return Stereographic(k=_scalar(m, "k"))


def _sphere_proj(m: Any) -> Manifold:
    from .stereographic import SphereProjection

    return SphereProjection(k=_scalar(m, "k"))


def _ball(m: Any) -> Manifold:
    from .ball import PoincareBall

    return PoincareBall(c=_scalar(m, "c"))


def _lorentz(m: Any) -> Manifold:
    from .lorentz import Lorentz

    return Lorentz(k=_scalar(m, "k"))


def _euclidean(m: Any) -> Manifold:
    from .euclidean import Euclidean

    return Euclidean()


def _sphere(m: Any) -> Manifold:
    from .sphere import Sphere

    if getattr(m, "projector", None) is not None:
        raise TypeError(
            "geoopt.Sphere with an intersection or complement subspace has no hypermc counterpart; "
            "use hypermc.manifolds.Sphere() on the full sphere"
        )
    return Sphere()


def _scaled(m: Any) -> Manifold:
    from .scaled import Scaled

    return Scaled(from_geoopt(m.base), scale=_scalar(m, "scale"))


def _product(m: Any) -> Manifold:
    from .product import ProductManifold

    return ProductManifold(*((from_geoopt(f), tuple(shape)) for f, shape in zip(m.manifolds, m.shapes)))


#: geoopt class name -> the hypermc model with the same geometry (curvature read now).
_CONVERTERS: dict[str, Callable[[Any], Manifold]] = {
    "PoincareBall": _ball,
    "PoincareBallExact": _ball,
    "Stereographic": _stereo,
    "StereographicExact": _stereo,
    "SphereProjection": _sphere_proj,
    "SphereProjectionExact": _sphere_proj,
    "Lorentz": _lorentz,
    "Euclidean": _euclidean,
    "Sphere": _sphere,
    "SphereExact": _sphere,
    "Scaled": _scaled,
    "ProductManifold": _product,
}


def from_geoopt(manifold: object) -> Manifold:
    """The hypermc manifold with the geometry of a geoopt manifold (its current
    curvature; geoopt's ``c`` and ``k`` mapped as in :mod:`hypermc.manifolds.base`).

    Raises:
        TypeError: not a geoopt manifold, or one without a hypermc counterpart (e.g.
            ``Stiefel``, ``SPD``): the message names it.

    Example:
        >>> from_geoopt(object())
        Traceback (most recent call last):
            ...
        TypeError: from_geoopt: expected a geoopt manifold; got object
    """
    if not is_geoopt_manifold(manifold):
        raise TypeError(f"from_geoopt: expected a geoopt manifold; got {type(manifold).__name__}")
    name = type(manifold).__name__
    if name not in _CONVERTERS:
        raise TypeError(
            f"from_geoopt: geoopt.{name} has no hypermc counterpart (supported: {', '.join(sorted(_CONVERTERS))}); "
            "optimise it with geoopt's own optimizers"
        )
    return _CONVERTERS[name](manifold)
