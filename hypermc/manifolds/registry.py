"""The manifolds by name: what the trainer, the CLI, the constructions and the plots build.

A model joins with the class decorator :func:`register_manifold`; everything outside
:mod:`hypermc.manifolds` then asks the registry or the model instead of testing
``isinstance`` against concrete classes. The model declares, as class attributes and
methods of :class:`~hypermc.manifolds.base.Manifold` (defaults in parentheses):

* ``name`` -- the config and command-line name (``--manifold``), unique;
* ``config_args`` -- the constructor keywords a config or the command line supplies
  (``("curvature",)``; ``()`` for :class:`~hypermc.manifolds.Euclidean`);
* ``extra_coordinates`` / ``point_size(dim)`` -- coordinates stored per point
  (``dim``; the hyperboloid ``dim + 1``);
* ``converts_to_ball`` with ``to_ball`` / ``from_ball`` (and ``to_halfspace`` /
  ``from_halfspace``, through the ball unless overridden) -- the isometries the tree and
  closure constructions and the 2-D plots use (none);
* ``boundary_cancellation`` -- whether points near the ideal boundary cost twice the
  exponent's bits (true; the half-space: false);
* ``identity_metric`` -- whether optimizers may adapt each coordinate (false; Euclidean:
  true);
* ``fused_dist_batch`` and ``fast_retr`` -- the fused CPU distance kernel and the
  trainer's fast update (none, and ``retr``).

So a new model is its class file (decorated), its export in ``hypermc/manifolds/__init__.py``
and, if it has its own kernels, one file of :mod:`hypermc.manifolds.math`.

Example:
    >>> from hypermc.manifolds import PoincareBall
    >>> sorted(registered_manifolds())
    ['ball', 'euclidean', 'halfspace', 'lorentz']
    >>> manifold_from_name("ball", curvature=-2.0), manifold_name(PoincareBall())
    (PoincareBall(curvature=-2), 'ball')

    A new model: a subclass with its own name (here the ball of curvature -4 by default).

    >>> @register_manifold
    ... class SmallBall(PoincareBall):
    ...     name = "small_ball"
    ...     def __init__(self, *, curvature: float = -4.0) -> None:
    ...         super().__init__(curvature=curvature)
    >>> manifold_from_name("small_ball"), sorted(ball_models())
    (SmallBall(curvature=-4), ['ball', 'halfspace', 'lorentz', 'small_ball'])
    >>> unregister_manifold("small_ball").__name__
    'SmallBall'
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from .base import Manifold

__all__ = [
    "register_manifold",
    "unregister_manifold",
    "registered_manifolds",
    "ball_models",
    "manifold_class",
    "manifold_from_name",
    "manifold_from_config",
    "manifold_name",
    "check_ball_model",
    "MANIFOLDS",
]

M = TypeVar("M", bound=type[Manifold])

_REGISTRY: dict[str, type[Manifold]] = {}
#: The registered classes by name (a live, read-only view, in registration order).
MANIFOLDS: Mapping[str, type[Manifold]] = MappingProxyType(_REGISTRY)
#: What a name looks like: it is typed on the command line and stored in checkpoints.
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_manifold(cls: M) -> M:
    """Class decorator: register ``cls`` under ``cls.name`` (returns ``cls``).

    Registering the same class again does nothing.

    Raises:
        TypeError: ``cls`` is not a subclass of :class:`~hypermc.manifolds.base.Manifold`.
        ValueError: the name is not lower-case letters, digits and ``_``, is taken by
            another class (a subclass inherits its parent's ``name``: give it its own), or
            ``config_args`` names a keyword the constructor does not take.

    Example:
        >>> from hypermc.manifolds import Lorentz
        >>> @register_manifold
        ... class Hyperboloid(Lorentz):
        ...     name = "hyperboloid"
        >>> manifold_class("hyperboloid") is Hyperboloid, unregister_manifold("hyperboloid") is Hyperboloid
        (True, True)
        >>> register_manifold(type("Copy", (Lorentz,), {}))
        Traceback (most recent call last):
            ...
        ValueError: register_manifold: the name 'lorentz' of Copy is taken by Lorentz; give Copy its own name = '...'
    """
    if not (isinstance(cls, type) and issubclass(cls, Manifold)):
        raise TypeError(f"register_manifold: expected a subclass of hypermc.manifolds.Manifold; got {cls!r}")
    name = cls.name
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise ValueError(f"register_manifold: {cls.__name__}.name must be lower-case letters, digits and '_'; got {name!r}")
    taken = _REGISTRY.get(name)
    if taken is cls:
        return cls
    if taken is not None:
        raise ValueError(
            f"register_manifold: the name {name!r} of {cls.__name__} is taken by {taken.__name__}; give {cls.__name__} its own name = '...'"
        )
    params = inspect.signature(cls.__init__).parameters
    missing = [a for a in cls.config_args if a not in params]
    if missing:
        raise ValueError(
            f"register_manifold: {cls.__name__}.config_args names {missing}, which {cls.__name__}() does not take; "
            f"config_args lists constructor keywords"
        )
    _REGISTRY[name] = cls
    return cls


def unregister_manifold(name: str) -> type[Manifold]:
    """Remove the model registered as ``name`` and return its class.

    Raises:
        ValueError: no model is registered as ``name``.

    Example:
        >>> from hypermc.manifolds import PoincareBall
        >>> Twin = register_manifold(type("Twin", (PoincareBall,), {"name": "twin"}))
        >>> unregister_manifold("twin") is Twin, "twin" in registered_manifolds()
        (True, False)
    """
    cls = manifold_class(name, where="unregister_manifold")
    del _REGISTRY[name]
    return cls


def registered_manifolds() -> dict[str, type[Manifold]]:
    """The registered models, ``{name: class}`` sorted by name (a new dict).

    Example:
        >>> {name: cls.__name__ for name, cls in registered_manifolds().items()}
        {'ball': 'PoincareBall', 'euclidean': 'Euclidean', 'halfspace': 'PoincareHalfspace', 'lorentz': 'Lorentz'}
    """
    return dict(sorted(_REGISTRY.items()))


def ball_models() -> dict[str, type[Manifold]]:
    """The registered models with a map to the Poincaré ball (``converts_to_ball``),
    sorted by name: those the constructions and the plots accept.

    Example:
        >>> list(ball_models())
        ['ball', 'halfspace', 'lorentz']
    """
    return {name: cls for name, cls in registered_manifolds().items() if cls.converts_to_ball}


def _choices(names: Any) -> str:
    return ", ".join(map(repr, names))


def manifold_class(name: str, *, where: str = "manifold_class", arg: str = "name") -> type[Manifold]:
    """The class registered as ``name``.

    Args:
        name: a registered name (:func:`registered_manifolds`).
        where, arg: the caller and its argument, for the error message.

    Raises:
        ValueError: ``name`` is not registered (the message lists the registered names).

    Example:
        >>> manifold_class("lorentz")
        <class 'hypermc.manifolds.lorentz.Lorentz'>
        >>> manifold_class("poincare")
        Traceback (most recent call last):
            ...
        ValueError: manifold_class: name must be one of 'ball', 'euclidean', 'halfspace', 'lorentz' (...); got 'poincare'. ...
    """
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(
            f"{where}: {arg} must be one of {_choices(registered_manifolds())} (the registered manifolds); got {name!r}. "
            "A new model joins with the decorator hypermc.manifolds.registry.register_manifold"
        )
    return cls


def manifold_from_name(name: str, **kwargs: Any) -> Manifold:
    """A new instance of the model registered as ``name``: ``cls(**kwargs)``.

    Raises:
        ValueError: ``name`` is not registered.

    Example:
        >>> manifold_from_name("halfspace"), manifold_from_name("lorentz", curvature=-0.5), manifold_from_name("euclidean")
        (PoincareHalfspace(curvature=-1), Lorentz(curvature=-0.5), Euclidean())
    """
    return manifold_class(name, where="manifold_from_name")(**kwargs)


def manifold_from_config(config: Mapping[str, Any]) -> Manifold:
    """Rebuild the manifold a config records: ``manifold`` (its name) and the keys of the
    class's ``config_args`` (``curvature``).

    Raises:
        ValueError: the name is not registered.

    Example:
        >>> manifold_from_config({"manifold": "ball", "curvature": -2.0})
        PoincareBall(curvature=-2)
        >>> manifold_from_config({"manifold": "euclidean", "curvature": 0.0})
        Euclidean()
    """
    cls = manifold_class(config["manifold"], where="manifold_from_config", arg="config['manifold']")
    return cls(**{k: config[k] for k in cls.config_args})


def manifold_name(manifold: Manifold, *, where: str = "manifold_name") -> str:
    """The registered name of ``manifold``'s class (the name configs and checkpoints store).

    Raises:
        TypeError: the class is not registered (a subclass is registered on its own).

    Example:
        >>> from hypermc.manifolds import Lorentz, Sphere
        >>> manifold_name(Lorentz())
        'lorentz'
        >>> manifold_name(Sphere())
        Traceback (most recent call last):
            ...
        TypeError: manifold_name: manifold must be one of PoincareBall, Euclidean, PoincareHalfspace, Lorentz (...); got Sphere
    """
    cls = type(manifold)
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or _REGISTRY.get(name) is not cls:
        names = ", ".join(c.__name__ for c in registered_manifolds().values())
        raise TypeError(f"{where}: manifold must be one of {names} (the registered manifolds); got {cls.__name__}")
    return name


def check_ball_model(manifold: Any, *, arg: str = "manifold") -> Manifold:
    """``manifold`` if it is a model with a map to the Poincaré ball (``converts_to_ball``).

    Raises:
        TypeError: anything else (the message names the registered such models).

    Example:
        >>> from hypermc.manifolds import Euclidean, Lorentz
        >>> check_ball_model(Lorentz())
        Lorentz(curvature=-1)
        >>> check_ball_model(Euclidean())
        Traceback (most recent call last):
            ...
        TypeError: manifold: expected PoincareBall, PoincareHalfspace or Lorentz (a model with a map to the Poincaré ball), got Euclidean
    """
    if not (isinstance(manifold, Manifold) and manifold.converts_to_ball):
        names = [cls.__name__ for cls in ball_models().values()]
        either = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise TypeError(f"{arg}: expected {either} (a model with a map to the Poincaré ball), got {type(manifold).__name__}")
    return manifold
