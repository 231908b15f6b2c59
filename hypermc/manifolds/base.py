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

Distances scale as ``d_K = d_{-1} / sqrt(c)``. ``K`` is a Python float or a 0-d
tensor, fixed at construction in these three models; constants derived from it
(``sqrt c``, ``1/c``) enter MC formulas at MC precision.

geoopt's constructor arguments are accepted and mapped onto ``K`` (one keyword per
call, never both):

=====================================  ==========================  ======================
geoopt                                 meaning in geoopt           hypermc curvature ``K``
=====================================  ==========================  ======================
``PoincareBall(c=c)``                  ball of curvature ``-c``    ``-c``
``Lorentz(k=k)``                       ``<x, x>_L = -k``           ``-1/k``
``Stereographic(k=k)``                 sectional curvature ``k``   ``k`` (any sign)
``SphereProjection(k=k)``              curvature ``k > 0``         ``k``
=====================================  ==========================  ======================

Learnable curvature (a parameter with gradients, plain or MC), as in geoopt:
``PoincareBall(c=..., learnable=True)`` builds a
:class:`~hypermc.manifolds.stereographic.LearnablePoincareBall` (parameter ``isp_c``,
``c = softplus(isp_c)``), ``Lorentz(k=..., learnable=True)`` a
:class:`~hypermc.manifolds.lorentz.LearnableLorentz` (parameter ``k``), and
:class:`~hypermc.manifolds.stereographic.Stereographic` takes ``learnable=True`` (``k``
of any sign); a model that owns one lists its curvature among its parameters. Every
model is an ``nn.Module`` (as geoopt's are), so it can be a submodule of a network; a
fixed model has no parameters. The half-space keeps a fixed curvature.

Precision and range
-------------------
Everything is computed in MC arithmetic when the inputs are :class:`~hypermc.MCTensor`
s (plain Tensors behave as ``nc = 1``); gradients through every method are MCTensors.
Each model's *MC range* is the hyperbolic radius up to which stored points resolve
hyperbolic lengths below ~1e-6 — see each class docstring and the MC range table in docs/manifolds.md.

Methods (geoopt vocabulary, identical in every model): ``dist``, ``dist0``,
``expmap``, ``logmap``, ``expmap0``, ``logmap0``, ``retr``, ``projx``, ``proju``,
``egrad2rgrad``, ``inner``, ``norm``, ``transp`` (abstract: every model implements
them), and ``random``, ``origin``, ``check_point``, ``dist_batch``, ``dist2``,
``transp0``, ``transp0back``, ``expmap_transp``, ``retr_transp``,
``transp_follow_expmap``, ``transp_follow_retr``, ``geodesic_unit``, ``random_normal``,
``wrapped_normal``, ``check_point_on_manifold``, ``check_vector_on_tangent`` and their
``assert_`` forms (implemented here on top of them). Points are ``x, y``, tangent
vectors ``u, v``; the point dimension is the last one and leading dimensions broadcast,
or the one named by the keyword ``dim=`` (geoopt's convention; every method in
:data:`DIM_ARGS` takes it). Options (``keepdim``, ``check``, ``nc``, ``dtype``, ...) and
the curvature are keyword-only.

Projection rule
---------------
``projx(x)`` is the one way back onto the manifold and ``proju(x, u)`` the one way onto
the tangent space at ``x``; there are no other clamps, ``eps`` margins or ``project=``
flags anywhere (optimizers, trainer, layers): geoopt's ``project=True`` is accepted where
geoopt's method has it (:data:`PROJECT_ARGS`) and ``project=False`` refused. Both are
idempotent and a no-op for points / vectors that already satisfy the model's constraint
within its MC range:

* every method that returns a point -- ``expmap``, ``expmap0``, ``retr``, ``origin``,
  ``random`` and the ball's Möbius operations -- returns it through ``projx`` (the
  Lorentz formulas apply :func:`.math.lorentz.projx` themselves), so callers never
  project again: the optimizers take ``expmap`` / ``retr`` steps as they are;
* ``projx`` of a model is what keeps its points representable: the ball pulls points
  beyond the MC range back to its edge (:data:`.ball.EDGE_MARGIN_BITS`), the halfspace
  raises heights that underflowed to the smallest normal number, the hyperboloid
  recomputes ``x_0`` from the spatial part, Euclidean space is the identity;
* ``proju`` is the identity for the conformal models and Euclidean space (every vector
  is tangent); the hyperboloid's is the Minkowski-orthogonal projection, which its
  ``egrad2rgrad`` uses.

Code that builds points by other means (the trainer's fast row update, the HGCN
adapter's ``proj``) calls ``projx``.

Membership check (``check=``)
-----------------------------
``dist``, ``dist0``, ``expmap``, ``logmap`` and ``logmap0`` take a keyword ``check``
(default ``True``): their point arguments must pass :meth:`Manifold.check_point`
(finite, inside the ball / ``x_n > 0`` / on the upper hyperboloid within its
tolerance), else ``ValueError`` naming the method, the argument and the violated
condition — off-manifold points would otherwise give finite garbage. The check is
cheap enough to stay on by default: where a model has a one-pass test (the ball's plain
points: deficit ``> 0``, see ``Manifold._points_ok``) it costs one pass per argument and
one host sync per call, the reason being worked out only on failure; otherwise
:meth:`check_point` runs, one pass and one host sync per argument. Rules:

* ``check=False`` skips it: for inner loops whose points are known good (the
  optimizers' steps, the trainer, ``evaluate`` after its one check of the table).
* While ``torch.compile``/export traces (:func:`hypermc.mcf.eft.tracing`) the check
  is skipped: it would need a data-dependent branch (a graph break or a host sync).
  Check the inputs eagerly (``check_point``) before calling a compiled function.
"""

from __future__ import annotations

import abc
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from .._checks import check_bool, check_dtype, check_instance, check_int, check_nc, check_real
from ..mcf import eft
from ..mcf.tensor import MCTensor, mc
from .math import batch, common

__all__ = ["Manifold", "curvature_to_c", "geoopt_curvature", "DIM_ARGS", "PROJECT_ARGS"]

#: What ``random`` / ``origin`` accept as ``device``.
Device = torch.device | str | int | None

#: The methods that take geoopt's keyword ``dim=`` (the point dimension, default -1):
#: ``name: (positional argument names, the ones that carry the point dimension, result)``
#: with result ``"point"`` (tensors with the point dimension), ``"reduce"`` (the point
#: dimension reduced, or kept at ``dim`` with ``keepdim=True``) or ``"pair"`` (a tuple
#: of two such tensors). Scalars (``r``, ``t``), matrices (``m``) and functions are
#: passed through. With ``dim`` other than -1 the point arguments are moved to the last
#: dimension, the method runs, and the result is moved back.
DIM_ARGS: dict[str, tuple[tuple[str, ...], frozenset[str], str]] = {
    name: (tuple(args.split()), frozenset(points.split()), kind)
    for name, args, points, kind in (
        ("dist", "x y", "x y", "reduce"),
        ("dist2", "x y", "x y", "reduce"),
        ("dist0", "x", "x", "reduce"),
        ("inner", "x u v", "x u v", "reduce"),
        ("inner0", "v", "v", "reduce"),
        ("norm", "x u", "x u", "reduce"),
        ("lambda_x", "x", "x", "reduce"),
        ("dist2plane", "x p a", "x p a", "reduce"),
        ("expmap", "x u", "x u", "point"),
        ("logmap", "x y", "x y", "point"),
        ("expmap0", "u", "u", "point"),
        ("logmap0", "y", "y", "point"),
        ("retr", "x u", "x u", "point"),
        ("transp", "x y v", "x y v", "point"),
        ("transp0", "y u", "y u", "point"),
        ("transp0back", "y u", "y u", "point"),
        ("transp_follow_expmap", "x u v", "x u v", "point"),
        ("transp_follow_retr", "x u v", "x u v", "point"),
        ("expmap_transp", "x u v", "x u v", "pair"),
        ("retr_transp", "x u v", "x u v", "pair"),
        ("projx", "x", "x", "point"),
        ("proju", "x u", "x u", "point"),
        ("egrad2rgrad", "x g", "x g", "point"),
        ("mobius_add", "x y", "x y", "point"),
        ("mobius_sub", "x y", "x y", "point"),
        ("mobius_coadd", "x y", "x y", "point"),
        ("mobius_cosub", "x y", "x y", "point"),
        ("mobius_scalar_mul", "r x", "x", "point"),
        ("mobius_pointwise_mul", "w x", "w x", "point"),
        ("mobius_matvec", "m x", "x", "point"),
        ("gyration", "x y z", "x y z", "point"),
        ("geodesic", "t x y", "x y", "point"),
        ("geodesic_unit", "t x u", "x u", "point"),
        ("antipode", "x", "x", "point"),
    )
}


#: The methods of :data:`DIM_ARGS` that take geoopt's keyword ``project`` (default
#: ``True``). Every point these return goes through ``projx`` (the projection rule), so
#: ``project=True`` is what they do anyway; ``project=False`` (geoopt: the raw formula,
#: possibly off the manifold) is refused rather than ignored.
PROJECT_ARGS = frozenset(
    "expmap expmap0 mobius_add mobius_sub mobius_coadd mobius_cosub mobius_scalar_mul mobius_pointwise_mul mobius_matvec "
    "geodesic_unit".split()
)


def _check_project(self: Manifold, name: str, project: Any) -> None:
    """geoopt's ``project=`` on a method of :data:`PROJECT_ARGS`: ``True`` is accepted."""
    if project is True:
        return
    if project is False:
        raise ValueError(
            f"{type(self).__name__}.{name}: project=False is not available: hypermc returns every point through projx, "
            "which leaves points inside the model's range unchanged (the projection rule of hypermc.manifolds.base); "
            "drop the argument"
        )
    raise TypeError(f"{type(self).__name__}.{name}: project must be a bool; got {type(project).__name__}")


def _with_dim(fn: Any, spec: tuple[tuple[str, ...], frozenset[str], str]) -> Any:
    """``fn`` taking the keyword ``dim`` (see :data:`DIM_ARGS`), and ``project`` where
    geoopt's method has it (:data:`PROJECT_ARGS`)."""
    names, points, kind = spec
    takes_project = fn.__name__ in PROJECT_ARGS

    @functools.wraps(fn)
    def method(self: Manifold, *args: Any, dim: int = -1, **kwargs: Any) -> Any:
        if takes_project and "project" in kwargs:
            _check_project(self, fn.__name__, kwargs.pop("project"))
        if dim == -1:
            return fn(self, *args, **kwargs)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"{type(self).__name__}.{fn.__name__}: dim must be an int; got {type(dim).__name__}")

        def move(name: str, a: Any) -> Any:
            if name not in points or not isinstance(a, torch.Tensor):
                return a
            if not -a.dim() <= dim < a.dim():
                raise ValueError(f"{type(self).__name__}.{fn.__name__}: dim={dim} is out of range for {name} of shape {tuple(a.shape)}")
            return a.movedim(dim, -1)

        args = tuple(move(names[i], a) if i < len(names) else a for i, a in enumerate(args))
        kwargs = {k: move(k, a) for k, a in kwargs.items()}
        out = fn(self, *args, **kwargs)
        if kind == "point":
            return out.movedim(-1, dim)
        if kind == "pair":
            return tuple(o.movedim(-1, dim) for o in out)
        return out.movedim(-1, dim) if kwargs.get("keepdim", False) else out

    method._takes_dim = True  # type: ignore[attr-defined]
    return method


def _add_dim(cls: type) -> None:
    """Give the methods of ``cls`` named in :data:`DIM_ARGS` the keyword ``dim``."""
    for name, spec in DIM_ARGS.items():
        fn = getattr(cls, name, None)  # also methods from mixins
        if fn is not None and callable(fn) and not getattr(fn, "_takes_dim", False):
            setattr(cls, name, _with_dim(fn, spec))


def curvature_to_c(curvature: float | torch.Tensor, where: str = "curvature_to_c") -> float:
    """Validate a curvature ``K < 0`` and return ``c = -K`` as a Python float.

    Args:
        curvature: a real number or a 0-d plain tensor that does not require grad.
        where: the caller, for the error message (e.g. ``"PoincareBall"``).

    Raises:
        TypeError: not a real number or a 0-d plain tensor; a tensor that requires grad.
        ValueError: not finite or not negative.

    Example:
        >>> curvature_to_c(-4.0), curvature_to_c(torch.tensor(-0.5))
        (4.0, 0.5)
        >>> curvature_to_c(1.0, "PoincareBall")
        Traceback (most recent call last):
            ...
        ValueError: PoincareBall: curvature must be a finite number < 0.0; got 1.0. Use Euclidean() for K = 0; ...
    """
    if isinstance(curvature, torch.Tensor):
        if curvature.numel() != 1 or isinstance(curvature, MCTensor):
            raise TypeError(
                f"{where}: curvature must be a float or a 0-d plain tensor; got a "
                f"{type(curvature).__name__} of shape {tuple(curvature.shape)}"
            )
        if curvature.requires_grad:
            raise TypeError(
                f"{where}: curvature must not require grad: here the curvature is fixed (a float or a tensor without "
                "grad); the models with a learnable one are PoincareBall(..., learnable=True), Lorentz(..., learnable=True) "
                "and Stereographic(k=..., learnable=True)"
            )
    try:
        k = check_real(where, "curvature", curvature, maximum=0.0, open_max=True)
    except ValueError as exc:
        raise ValueError(f"{exc}. Use Euclidean() for K = 0; a positive K is not a hyperbolic space") from None
    return -k


def geoopt_curvature(
    where: str,
    curvature: float | torch.Tensor | None,
    name: str,
    value: float | torch.Tensor | None,
    to_curvature: Any,
    learnable: bool = False,
) -> float | torch.Tensor:
    """The curvature ``K`` from a constructor that takes ``curvature=`` or geoopt's
    argument ``name=value`` (mapped by ``to_curvature``, a function of a positive float);
    ``-1`` when neither is given.

    Raises:
        TypeError: both given; ``learnable=True`` (reached by subclasses only: the models
            themselves build their ``learnable_variant``).
        ValueError: geoopt's argument not a finite number > 0.

    Example:
        >>> geoopt_curvature("Lorentz", None, "k", 4.0, lambda v: -1.0 / v), geoopt_curvature("Lorentz", -2.0, "k", None, abs)
        (-0.25, -2.0)
    """
    if check_bool(where, "learnable", learnable):
        raise TypeError(
            f"{where}: learnable=True is not supported by this class; PoincareBall(c=..., learnable=True), "
            "Lorentz(k=..., learnable=True) and Stereographic(k=..., learnable=True) have a learnable curvature"
        )
    if value is None:
        return -1.0 if curvature is None else curvature
    if curvature is not None:
        raise TypeError(f"{where}: pass either curvature= (hypermc's K < 0) or {name}= (geoopt's), not both")
    if isinstance(value, torch.Tensor) and (value.requires_grad or isinstance(value, MCTensor) or value.numel() != 1):
        raise TypeError(
            f"{where}: {name} must be a float or a 0-d plain tensor that does not require grad; "
            "for a learnable curvature pass learnable=True"
        )
    v = check_real(where, name, value, minimum=0.0, open_min=True)
    return to_curvature(v)


def learnable_curvature_argument(
    where: str, model: str, curvature: float | torch.Tensor | None, name: str, value: float | torch.Tensor | None, learnable: bool
) -> tuple[str, torch.Tensor, float]:
    """The argument of a learnable model's constructor (``curvature=K < 0`` or geoopt's
    ``name=value > 0``, default ``K = -1``): ``(the argument's name, a detached 0-d tensor
    of it -- torch's default dtype for a float, a tensor's own dtype, MC included --, its
    value as a float)``.

    Raises:
        TypeError: ``learnable`` false (``model`` is the class that has ``learnable=True``),
            both arguments given, a tensor that is not 0-d floating.
        ValueError: not finite, or of the wrong sign.

    Example:
        >>> name, t, v = learnable_curvature_argument("Lorentz", "LearnableLorentz", None, "k", 2.0, True)
        >>> name, t, v
        ('k', tensor(2.), 2.0)
    """
    if not check_bool(where, "learnable", learnable):
        raise TypeError(f"{where}: {model} has learnable=True; use {where}(...) for a fixed curvature")
    if curvature is not None and value is not None:
        raise TypeError(f"{where}: pass either curvature= (hypermc's K < 0) or {name}= (geoopt's), not both")
    arg, given, positive = (name, value, True) if value is not None else ("curvature", -1.0 if curvature is None else curvature, False)
    if isinstance(given, torch.Tensor):
        if given.numel() != 1 or not given.is_floating_point():
            raise TypeError(f"{where}: {arg} must be a float or a 0-d floating tensor; got {given.dtype} of shape {tuple(given.shape)}")
        t = given.detach().reshape(()).clone()
        seen = check_real(where, arg, float(common.lead(t)))
    else:
        seen = check_real(where, arg, given)
        t = torch.tensor(seen, dtype=torch.get_default_dtype())
    if not (seen > 0 if positive else seen < 0):
        raise ValueError(f"{where}: {arg} must be a finite number {'> 0' if positive else '< 0'}; got {seen!r}")
    return arg, t, seen


def _module(obj: Any) -> Any:
    """``obj`` with ``nn.Module``'s state set up: every model is a module, whether or not
    its ``__init__`` calls ``nn.Module.__init__`` (a learnable one calls it again)."""
    nn.Module.__init__(obj)
    return obj


class Manifold(abc.ABC, nn.Module):
    """Abstract base class of the models: curvature, argument checks, shared methods.

    A model sets ``name`` and ``min_dim`` (smallest size of the point dimension),
    defines ``__init__(self, *, curvature=-1.0)`` (or takes no argument, like
    :class:`Euclidean`) and implements every ``@abstractmethod`` below -- a subclass
    that misses one cannot be instantiated -- as a one-line call into
    :mod:`hypermc.manifolds.math` after :meth:`_check`. It follows the projection rule
    of the module docstring. ``origin``, ``random``, ``check_point`` and ``dist_batch``
    come from here; a model may override them (``_check_values`` adds its membership
    conditions to ``check_point``; ``dist_batch`` has a generic fallback). The class
    attributes and methods after ``ndim`` are what the embedding code asks a model
    registered with :func:`~hypermc.manifolds.registry.register_manifold`.

    Example:
        Every model answers the same calls; a point at hyperbolic radius 40 needs MC
        coordinates in the ball (in float64 ``|x| = 1 - 8.5e-18`` rounds to 1):

        >>> from hypermc.manifolds import PoincareBall, PoincareHalfspace
        >>> M = PoincareBall()
        >>> isinstance(M, Manifold), M, M.c
        (True, PoincareBall(curvature=-1), 1.0)
        >>> x = M.expmap0(hm.mc([20.0, 0.0], nc=2, dtype=torch.float64))  # lambda_0 = 2: radius 40
        >>> round(float(M.dist0(x)), 9), M.check_point(x)
        (40.0, (True, None))
        >>> M.check_point(x.approx())[0]
        False
        >>> M.dist0(x.approx(), check=False)
        tensor(inf, dtype=torch.float64)
        >>> o = M.origin(2, nc=2, dtype=torch.float64)
        >>> y = M.expmap(o, M.logmap(o, x))  # expmap(x, logmap(x, y)) = y
        >>> round(float(M.dist(x, y)), 6)
        0.0
        >>> x, y = torch.tensor([0.0, 1.0]), torch.tensor([0.0, 4.0])  # same points, d_K = d_{-1} / sqrt(c)
        >>> [round(float(H.dist(x, y)), 6) for H in (PoincareHalfspace(), PoincareHalfspace(curvature=-4.0))]
        [1.386294, 0.693147]
        >>> Manifold()
        Traceback (most recent call last):
            ...
        TypeError: Can't instantiate abstract class Manifold ...
    """

    name: str = "manifold"
    min_dim: int = 1
    #: geoopt's number of point dimensions (always one here).
    ndim: int = 1

    # What the trainer, the CLI, the optimizers, the constructions and the plots ask a
    # model (:mod:`hypermc.manifolds.registry`); a model overrides the ones that differ.

    #: Constructor keywords that a config or the command line supplies
    #: (:func:`~hypermc.manifolds.registry.manifold_from_config`): ``()`` for a model
    #: built without arguments.
    config_args: tuple[str, ...] = ("curvature",)
    #: Coordinates a point stores beyond the manifold's dimension (the hyperboloid's time
    #: coordinate: 1); see :meth:`point_size`.
    extra_coordinates: int = 0
    #: Whether :meth:`to_ball` / :meth:`from_ball` are an isometry onto the Poincaré ball
    #: of the same curvature (the hyperbolic models): the tree and closure constructions
    #: and the 2-D plots need it.
    converts_to_ball: bool = False
    #: Whether a point near the ideal boundary is held by a cancellation of the
    #: coordinates (the ball's ``1 - c|x|^2``, the hyperboloid's Lorentzian product) rather
    #: than by a small coordinate (the half-space's height): such coordinates need twice
    #: the exponent's bits (:func:`hypermc.embed.nested.closure_bits_needed`).
    boundary_cancellation: bool = True
    #: Whether the metric is the identity in the stored coordinates (Euclidean space): the
    #: optimizers may then adapt each coordinate separately (Adam's elementwise second
    #: moment) instead of each point.
    identity_metric: bool = False
    #: A fused CPU kernel of :meth:`dist_batch`, ``f(rows, ia, ib, *, c, leaf=None,
    #: cache=None)`` (set as a ``staticmethod``), used by ``train(fast=True)`` and
    #: ``evaluate(fast=True)`` (:mod:`hypermc.manifolds.math.fused`), or ``None``.
    fused_dist_batch: Callable[..., torch.Tensor] | None = None
    #: The class that ``Model(..., learnable=True)`` builds instead (an ``nn.Module``
    #: whose curvature is a parameter), or ``None``: ``learnable=True`` is then refused.
    #: Read from the class itself, so a subclass does not inherit it.
    learnable_variant: type | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _add_dim(cls)

    def __new__(cls, *args: Any, **kwargs: Any) -> Manifold:
        if args:
            seen = f"got {len(args)} positional argument{'s' if len(args) > 1 else ''} {args!r}"
            params = inspect.signature(cls.__init__).parameters
            if "curvature" in params:
                alt = next((f" or {cls.__name__}({a}=...) (geoopt's meaning)" for a in ("c", "k") if a in params), "")
                raise TypeError(
                    f"{cls.__name__}: curvature must be passed by keyword, e.g. {cls.__name__}(curvature={args[0]!r}){alt}; {seen}"
                )
            raise TypeError(f"{cls.__name__}: takes no positional arguments; {seen}")
        variant = cls.__dict__.get("learnable_variant")  # the class's own, not a subclass's
        if variant is not None and check_bool(cls.__name__, "learnable", kwargs.get("learnable", False)):
            if cls in variant.__mro__:  # a real subclass: Python then runs variant.__init__(**kwargs) itself, once
                return _module(super().__new__(variant))
            return variant(**kwargs)
        return _module(super().__new__(cls))

    def __init__(self, *, curvature: float | torch.Tensor = -1.0) -> None:
        self.c: float = curvature_to_c(curvature, type(self).__name__)
        self.curvature: float = -self.c

    def __repr__(self) -> str:
        return f"{type(self).__name__}(curvature={self.curvature:g})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.curvature == other.curvature

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.curvature))

    # ------------------------------------------------------- abstract methods

    @abc.abstractmethod
    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Geodesic distance ``d(x, y)`` (symmetric, ``d(x, x) = 0``, triangle inequality).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.3, -0.2], dtype=torch.float64), torch.tensor([-0.1, 0.5], dtype=torch.float64)
            >>> round(float(M.dist(x, y)), 6), round(float(M.dist(y, x)), 6), float(M.dist(x, x))
            (1.769532, 1.769532, 0.0)
            >>> bool(M.dist(x, y) <= M.dist0(x) + M.dist0(y))  # triangle inequality through the origin
            True
        """

    @abc.abstractmethod
    def dist0(self, x: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Distance from the origin, ``dist(origin, x)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), hm.mc([0.3, -0.2], nc=2, dtype=torch.float64)
            >>> o = M.origin(2, nc=2, dtype=torch.float64)
            >>> round(float(M.dist0(x)), 9), round(float(M.dist(o, x)), 9)
            (0.755047664, 0.755047664)
            >>> M.dist0(x, keepdim=True).shape
            torch.Size([1])
        """

    @abc.abstractmethod
    def expmap(self, x: torch.Tensor, u: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Exponential map: the end of the geodesic from ``x`` with initial velocity ``u``
        (a point, through ``projx``); ``expmap(x, logmap(x, y)) = y``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.3, -0.2], dtype=torch.float64), torch.tensor([-0.1, 0.5], dtype=torch.float64)
            >>> round(float(M.dist(M.expmap(x, M.logmap(x, y)), y)), 9)  # expmap(x, logmap(x, y)) = y
            0.0
            >>> u = torch.tensor([0.5, 1.0], dtype=torch.float64)
            >>> round(float(M.dist(x, M.expmap(x, u))), 9) == round(float(M.norm(x, u)), 9)  # travels |u|_x
            True
        """

    @abc.abstractmethod
    def logmap(self, x: torch.Tensor, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Logarithmic map: the tangent vector at ``x`` pointing to ``y``, of norm ``d(x, y)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.3, -0.2], dtype=torch.float64), torch.tensor([-0.1, 0.5], dtype=torch.float64)
            >>> round(float(M.norm(x, M.logmap(x, y))), 9) == round(float(M.dist(x, y)), 9)  # |logmap(x, y)|_x = d(x, y)
            True
            >>> M.logmap(x, x).tolist()
            [0.0, 0.0]
        """

    @abc.abstractmethod
    def expmap0(self, u: torch.Tensor) -> torch.Tensor:
        """``expmap(origin, u)`` (a point, through ``projx``).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, u = PoincareBall(), hm.mc([3.0, -4.0], nc=2, dtype=torch.float64)
            >>> o = M.origin(2, nc=2, dtype=torch.float64)
            >>> round(float(M.dist(M.expmap0(u), M.expmap(o, u))), 9)  # expmap0(u) = expmap(origin, u)
            0.0
            >>> round(float(M.dist0(M.expmap0(u))), 9), round(float(M.norm(o, u)), 9)  # lambda_0 = 2: radius 2|u| = 10
            (10.0, 10.0)
        """

    @abc.abstractmethod
    def logmap0(self, y: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """``logmap(origin, y)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), hm.mc([0.3, -0.2], nc=2, dtype=torch.float64)
            >>> o = M.origin(2, nc=2, dtype=torch.float64)
            >>> round(float(M.dist(M.expmap0(M.logmap0(x)), x)), 12)  # expmap0(logmap0(x)) = x
            0.0
            >>> round(float(M.norm(o, M.logmap0(x) - M.logmap(o, x))), 12)  # logmap0(x) = logmap(origin, x)
            0.0
        """

    @abc.abstractmethod
    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """A retraction (first-order ``expmap``; a point, through ``projx``).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.3, -0.2], dtype=torch.float64)
            >>> u = torch.tensor([1e-4, 2e-4], dtype=torch.float64)
            >>> round(float(M.dist(M.retr(x, u), M.expmap(x, u))), 6)  # agrees with expmap to first order
            0.0
            >>> M.check_point(M.retr(x, 100 * torch.ones(2, dtype=torch.float64)))  # always a point
            (True, None)
        """

    @abc.abstractmethod
    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Parallel transport of ``v`` (tangent at ``x``) to ``y``; preserves ``inner``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> x, y = torch.tensor([0.3, -0.2], dtype=torch.float64), torch.tensor([-0.1, 0.5], dtype=torch.float64)
            >>> u, v = torch.tensor([0.5, 1.0], dtype=torch.float64), torch.tensor([-2.0, 0.25], dtype=torch.float64)
            >>> round(float(M.inner(y, M.transp(x, y, u), M.transp(x, y, v))), 9) == round(float(M.inner(x, u, v)), 9)
            True
        """

    @abc.abstractmethod
    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim: bool = False) -> torch.Tensor:
        """Riemannian inner product ``<u, v>_x`` (``v`` defaults to ``u``).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> o, x = M.origin(2, nc=None, dtype=torch.float64), torch.tensor([0.3, -0.2], dtype=torch.float64)
            >>> u, v = torch.tensor([0.5, 1.0], dtype=torch.float64), torch.tensor([-2.0, 0.25], dtype=torch.float64)
            >>> float(M.inner(o, u, v)), float(M.inner(o, u))  # the ball at the origin: lambda_0^2 <u, v> = 4 <u, v>
            (-3.0, 5.0)
            >>> bool(M.inner(x, u, v) == M.inner(x, v, u)), bool(M.inner(x, u) == M.inner(x, u, u))
            (True, True)
        """

    @abc.abstractmethod
    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim: bool = False) -> torch.Tensor:
        """Riemannian norm ``|u|_x = sqrt(<u, u>_x)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), hm.mc([0.3, -0.2], nc=2, dtype=torch.float64)
            >>> u = hm.mc([0.5, 1.0], nc=2, dtype=torch.float64)
            >>> round(float(M.norm(x, u) ** 2), 9) == round(float(M.inner(x, u, u)), 9)  # |u|_x^2 = <u, u>_x
            True
            >>> round(float(M.norm(M.origin(2, nc=2, dtype=torch.float64), u)), 9)  # 2 |u| at the ball's origin
            2.236067977
        """

    @abc.abstractmethod
    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Back onto the manifold (the projection rule: idempotent, a no-op for points of
        the manifold within the MC range).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> p = M.projx(torch.tensor([3.0, 4.0], dtype=torch.float64))  # outside: pulled back to the edge
            >>> M.check_point(p), torch.equal(M.projx(p), p)  # on the manifold; idempotent
            ((True, None), True)
            >>> x = torch.tensor([0.3, -0.2], dtype=torch.float64)
            >>> torch.equal(M.projx(x), x)  # a no-op for points of the manifold
            True
        """

    @abc.abstractmethod
    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``u`` onto the tangent space at ``x`` (idempotent; the identity where every
        vector is tangent).

        Example:
            >>> from hypermc.manifolds import Lorentz, PoincareBall
            >>> L, x = Lorentz(), torch.tensor([2.0**0.5, 1.0, 0.0], dtype=torch.float64)  # -x_0^2 + |x_bar|^2 = -1
            >>> v = L.proju(x, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
            >>> round(float(-x[0] * v[0] + x[1:] @ v[1:]), 12), bool(torch.allclose(L.proju(x, v), v))  # <x, v>_L = 0; idempotent
            (0.0, True)
            >>> PoincareBall().proju(x[1:] / 2, v[1:]).tolist() == v[1:].tolist()  # identity in the ball
            True
        """

    @abc.abstractmethod
    def egrad2rgrad(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Riemannian gradient of a function whose Euclidean gradient at ``x`` is ``g``
        (a new tensor; ``g`` is not modified).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, g = PoincareBall(), torch.tensor([4.0, -8.0], dtype=torch.float64)
            >>> M.egrad2rgrad(M.origin(2, nc=None, dtype=torch.float64), g).tolist()  # g / lambda_x^2, lambda_0 = 2
            [1.0, -2.0]
            >>> g.tolist()  # not modified
            [4.0, -8.0]
        """

    def expmap_egrad(self, x: torch.Tensor, g: torch.Tensor, t: float) -> torch.Tensor:
        """``expmap(x, t * egrad2rgrad(x, g), check=False)``: the step of a Riemannian
        gradient optimizer (``t = -lr``). A model may compute it in one pass (the ball
        forms its deficit once); the default is the two calls.

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> M = Lorentz()
            >>> x, g = M.origin(2, nc=None, dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
            >>> torch.equal(M.expmap_egrad(x, g, -0.5), M.expmap(x, -0.5 * M.egrad2rgrad(x, g)))
            True
        """
        t = check_real(f"{type(self).__name__}.expmap_egrad", "t", t)
        return self.expmap(x, self.egrad2rgrad(x, g) * t, check=False)

    @abc.abstractmethod
    def _origin_values(self, size: tuple[int, ...], dtype: torch.dtype, device: Device) -> torch.Tensor:
        """The origin as a plain tensor of shape ``size`` (``origin`` projects it)."""

    # ------------------------------------------- what the embedding code asks

    def point_size(self, dim: int) -> int:
        """Size of the point dimension of a ``dim``-dimensional model (``dim`` plus
        :attr:`extra_coordinates`).

        Example:
            >>> from hypermc.manifolds import Lorentz, PoincareBall
            >>> PoincareBall().point_size(2), Lorentz().point_size(2)  # the hyperboloid's time coordinate
            (2, 3)
        """
        return dim + self.extra_coordinates

    def manifold_dim(self, point_size: int) -> int:
        """The model's dimension for points with ``point_size`` coordinates (the inverse of
        :meth:`point_size`).

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> Lorentz().manifold_dim(3)
            2
        """
        return point_size - self.extra_coordinates

    def to_ball(self, x: torch.Tensor) -> torch.Tensor:
        """The points ``x`` in the Poincaré ball of the same curvature (an isometry; ``x``
        itself in the ball), in the arithmetic of ``x``.

        Raises:
            TypeError: the model has no such map (:attr:`converts_to_ball` is false).

        Example:
            >>> from hypermc.manifolds import Euclidean, PoincareHalfspace
            >>> PoincareHalfspace().to_ball(torch.tensor([0.0, 1.0]))  # the origins correspond
            tensor([0., 0.])
            >>> Euclidean().to_ball(torch.zeros(2))
            Traceback (most recent call last):
                ...
            TypeError: Euclidean.to_ball: Euclidean has no map to the Poincaré ball (converts_to_ball is false); ...
        """
        raise TypeError(self._no_ball("to_ball"))

    def from_ball(self, b: torch.Tensor) -> torch.Tensor:
        """The ball points ``b`` (same curvature) as points of this model: the inverse of
        :meth:`to_ball`.

        Raises:
            TypeError: the model has no such map (:attr:`converts_to_ball` is false).

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> Lorentz().from_ball(torch.tensor([0.5, 0.0], dtype=torch.float64))  # 1 - |b|^2 = 3/4
            tensor([1.6667, 1.3333, 0.0000], dtype=torch.float64)
        """
        raise TypeError(self._no_ball("from_ball"))

    def to_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """The points ``x`` in the Poincaré half-space of the same curvature (an isometry;
        through :meth:`to_ball` unless the model maps there directly).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().to_halfspace(torch.zeros(2, dtype=torch.float64))
            tensor([0., 1.], dtype=torch.float64)
        """
        from . import convert

        return convert.ball_to_halfspace(self.to_ball(x), curvature=self.curvature)

    def from_halfspace(self, x: torch.Tensor) -> torch.Tensor:
        """The half-space points ``x`` (same curvature) as points of this model: the
        inverse of :meth:`to_halfspace`.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().from_halfspace(torch.tensor([0.0, 1.0], dtype=torch.float64))
            tensor([0., 0.], dtype=torch.float64)
        """
        from . import convert

        return self.from_ball(convert.halfspace_to_ball(x, curvature=self.curvature))

    def fast_retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Move the points ``x`` by a plain step ``u`` in the component dtype: the
        trainer's fast update (:func:`hypermc.embed.train.fast_retr_rows`).

        :meth:`retr` here; a model may round a factor of its retraction to the component
        dtype where that perturbs the step, not the point (the half-space's height factor).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), hm.mc([[0.5, 0.0]], nc=2, dtype=torch.float64)
            >>> u = torch.tensor([[0.1, 0.0]], dtype=torch.float64)
            >>> torch.equal(M.fast_retr(x, u).components, M.retr(x, u).components)
            True
        """
        return self.retr(x, u)

    def _no_ball(self, fname: str) -> str:
        from .registry import ball_models

        name = type(self).__name__
        models = ", ".join(cls.__name__ for cls in ball_models().values())
        return f"{name}.{fname}: {name} has no map to the Poincaré ball (converts_to_ball is false); the models with one: {models}"

    # ----------------------------------------------------------------- checks

    def _check(self, fname: str, **tensors: torch.Tensor) -> None:
        """Type, dtype and shape checks of the arguments of a public method."""
        where = f"{type(self).__name__}.{fname}"
        dtype = None
        first = None
        shapes = []
        for name, t in tensors.items():
            check_instance(where, name, t, torch.Tensor, "a Tensor or MCTensor")
            if not t.is_floating_point():
                raise TypeError(f"{where}: {name} must have a floating dtype; got {t.dtype}")
            if t.dim() < 1 or t.shape[-1] < self.min_dim:
                raise ValueError(
                    f"{where}: {name} must have a last (point) dimension of size >= {self.min_dim}; got shape {tuple(t.shape)}"
                )
            if dtype is None:
                dtype, first = t.dtype, name
            elif t.dtype != dtype:
                raise TypeError(
                    f"{where}: {first} has dtype {dtype} but {name} has {t.dtype}; convert one with "
                    ".to(dtype) (no implicit precision change)"
                )
            shapes.append((name, tuple(t.shape)))
        dims = {s[-1] for _, s in shapes}
        if len(dims) > 1:
            desc = ", ".join(f"{n} {s}" for n, s in shapes)
            raise ValueError(f"{where}: the point dimensions (last) differ: {desc}")
        if len({s for _, s in shapes}) == 1:  # equal shapes broadcast (the common case: no broadcast_shapes cost)
            return
        try:
            torch.broadcast_shapes(*(s[:-1] for _, s in shapes))
        except RuntimeError:
            desc = ", ".join(f"{n} {s}" for n, s in shapes)
            raise ValueError(f"{where}: the leading (batch) dimensions do not broadcast: {desc}") from None

    def _check_on(self, fname: str, check: bool, **points: torch.Tensor) -> None:
        """The membership check of the public entry points (``check=``, see the module
        docstring): ``ValueError`` unless every argument passes :meth:`check_point`.
        Skipped with ``check=False`` and while ``torch.compile`` traces."""
        if not check_bool(f"{type(self).__name__}.{fname}", "check", check) or eft.tracing():
            return
        with torch.no_grad():
            if self._points_ok(*points.values()):  # one pass and one host sync; the reason only on failure
                return
            for name, x in points.items():
                ok, reason = self.check_point(x)
                if not ok:
                    raise ValueError(
                        f"{type(self).__name__}.{fname}: {name} is not a point of {self!r}: {reason}; "
                        f"project it (projx) or pass check=False to skip this check"
                    )

    def _points_ok(self, *points: torch.Tensor) -> bool:
        """A one-pass membership test of all ``points`` for :meth:`_check_on`: True only if
        every point passes :meth:`check_point` (False: run ``check_point`` for the reason).
        Models without one return False here."""
        return False

    def _keep(self, fname: str, out: torch.Tensor, keepdim: bool) -> torch.Tensor:
        """``out`` with the reduced point dimension kept (size 1) if ``keepdim``."""
        return out.unsqueeze(-1) if check_bool(f"{type(self).__name__}.{fname}", "keepdim", keepdim) else out

    # ------------------------------------------------------------- factories

    def _size(self, fname: str, size: tuple[Any, ...]) -> tuple[int, ...]:
        where = f"{type(self).__name__}.{fname}"
        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        size = tuple(check_int(where, "size", s, minimum=0) for s in size)
        if not size or size[-1] < self.min_dim:
            raise ValueError(f"{where}: size must end with the point dimension (>= {self.min_dim}); got {size}")
        return size

    def _factory_args(self, fname: str, nc: int | None, dtype: torch.dtype | None) -> torch.dtype:
        where = f"{type(self).__name__}.{fname}"
        check_nc(where, nc, allow_none=True, what_none="a plain Tensor")
        return torch.get_default_dtype() if dtype is None else check_dtype(where, dtype)

    def origin(
        self, *size: int | Sequence[int], nc: int | None = None, dtype: torch.dtype | None = None, device: Device = None
    ) -> torch.Tensor:
        """The origin (the base point of ``expmap0`` / ``logmap0``), broadcast to ``size``.

        Args:
            size: shape, ending with the point dimension (ints, or one sequence).
            nc: components of an MCTensor result; ``None`` (default, as geoopt) for a
                plain Tensor.
            dtype: component dtype (default ``torch.get_default_dtype()``).
            device: device of the result.

        Example:
            >>> from hypermc.manifolds import Lorentz, PoincareBall
            >>> o = PoincareBall().origin(3, 2, nc=2, dtype=torch.float64)
            >>> type(o).__name__, tuple(o.shape), o.nc, bool((o.approx() == 0).all())
            ('MCTensor', (3, 2), 2, True)
            >>> PoincareBall().origin(2)  # plain, torch's default dtype, as geoopt
            tensor([0., 0.])
            >>> Lorentz().origin(3, nc=None, dtype=torch.float64).tolist()  # the hyperboloid's apex
            [1.0, 0.0, 0.0]
        """
        size = self._size("origin", size)
        dtype = self._factory_args("origin", nc, dtype)
        values = self._origin_values(size, dtype, device)
        # factories make new points: leaves, also on a model with a learnable curvature (as geoopt)
        return self.projx(values if nc is None else mc(values, nc=nc)).detach()

    def random(
        self,
        *size: int | Sequence[int],
        std: float = 1.0,
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: Device = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Random points: ``expmap0`` of a tangent vector at the origin whose Riemannian
        coordinates are ``N(0, std^2)`` (computed in MC arithmetic).

        Args:
            size: shape, ending with the point dimension (ints, or one sequence).
            std: standard deviation of each tangent coordinate (hyperbolic units).
            nc: components of an MCTensor result; ``None`` (default, as geoopt) for a
                plain Tensor.
            dtype: component dtype (default ``torch.get_default_dtype()``).
            device: device of the result.
            generator: a ``torch.Generator`` (the library never reads a global seed
                implicitly; without one torch's default generator is used).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> x = M.random(4, 2, nc=2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            >>> type(x).__name__, tuple(x.shape), M.check_point(x)
            ('MCTensor', (4, 2), (True, None))
            >>> type(M.random(4, 2)).__name__, M.random(4, 2).dtype  # default: plain, torch's default dtype
            ('Tensor', torch.float32)
            >>> y = M.random((4, 2), nc=2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            >>> torch.equal(x.components, y.components)  # the same seed gives the same points
            True
        """
        where = f"{type(self).__name__}.random"
        size = self._size("random", size)
        dtype = self._factory_args("random", nc, dtype)
        std = check_real(where, "std", std, minimum=0.0)
        if generator is not None:
            check_instance(where, "generator", generator, torch.Generator, "a torch.Generator or None")
        u = torch.randn(size, dtype=dtype, device=device, generator=generator) * std
        return self.expmap0(self._origin_tangent(u if nc is None else mc(u, nc=nc))).detach()

    def _origin_tangent(self, u: torch.Tensor) -> torch.Tensor:
        """A tangent vector at the origin with Riemannian coordinates ``u``."""
        return self._tangent0(u)

    def _tangent0(self, u: torch.Tensor) -> torch.Tensor:
        """The tangent vector at the origin nearest to the coordinate vector ``u`` (the
        hyperboloid drops the time coordinate; every vector is tangent elsewhere)."""
        return u

    def _origin_like(self, y: torch.Tensor) -> torch.Tensor:
        """The origin with the shape, dtype, device and kind (plain / MC) of ``y``."""
        o = self._origin_values(tuple(y.shape), y.dtype, y.device)
        return self.projx(mc(o, nc=y.nc) if isinstance(y, MCTensor) else o)

    # ----------------------------------------------- geoopt's derived methods

    def dist2(self, x: torch.Tensor, y: torch.Tensor, *, keepdim: bool = False, check: bool = True) -> torch.Tensor:
        """Squared distance ``d(x, y)^2``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> round(float(M.dist2(x, -x)), 9), round(float(M.dist(x, -x)) ** 2, 9)
            (4.827795843, 4.827795843)
        """
        d = self.dist(x, y, keepdim=keepdim, check=check)
        return d * d

    def transp0(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport of ``u`` (tangent at the origin) to ``y``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, y = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> M.transp0(y, torch.tensor([1.0, 2.0], dtype=torch.float64))  # lambda_0 / lambda_y = 1 - |y|^2
            tensor([0.7500, 1.5000], dtype=torch.float64)
        """
        return self.transp(self._origin_like(y), y, u)

    def transp0back(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport of ``u`` (tangent at ``y``) to the origin; inverse of :meth:`transp0`.

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> M = Lorentz()
            >>> y = M.expmap0(torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64))
            >>> u = torch.tensor([0.0, 0.5, 0.25], dtype=torch.float64)
            >>> bool(torch.allclose(M.transp0back(y, M.transp0(y, u)), u))
            True
        """
        return self.transp(y, self._origin_like(y), u)

    def expmap_transp(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y, P v)``: ``y = expmap(x, u)`` and ``v`` transported from ``x`` to ``y``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> u = torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> y, w = M.expmap_transp(x, u, u)
            >>> round(float(M.norm(y, w)), 9), round(float(M.norm(x, u)), 9)
            (0.8, 0.8)
        """
        y = self.expmap(x, u, check=False)
        return y, self.transp(x, y, v)

    def retr_transp(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y, P v)``: ``y = retr(x, u)`` and ``v`` transported from ``x`` to ``y``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> y, w = M.retr_transp(x, torch.tensor([0.0, 0.3], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64))
            >>> y
            tensor([0.5000, 0.3000], dtype=torch.float64)
        """
        y = self.retr(x, u)
        return y, self.transp(x, y, v)

    def transp_follow_expmap(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``v`` transported from ``x`` to ``expmap(x, u)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> u = torch.tensor([0.0, 0.3], dtype=torch.float64)
            >>> bool(torch.equal(M.transp_follow_expmap(x, u, u), M.expmap_transp(x, u, u)[1]))
            True
        """
        return self.expmap_transp(x, u, v)[1]

    def transp_follow_retr(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``v`` transported from ``x`` to ``retr(x, u)``.

        Example:
            >>> from hypermc.manifolds import Euclidean
            >>> Euclidean().transp_follow_retr(torch.zeros(2), torch.ones(2), torch.tensor([3.0, 4.0]))
            tensor([3., 4.])
        """
        return self.retr_transp(x, u, v)[1]

    def geodesic_unit(self, t: float | torch.Tensor, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The point at distance ``t`` from ``x`` along the geodesic leaving ``x`` in the
        direction of ``u`` (unit speed: ``expmap(x, t u / |u|_x)``); ``t`` broadcasts
        against ``x.shape[:-1] + (1,)``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, x = PoincareBall(), torch.tensor([0.5, 0.0], dtype=torch.float64)
            >>> y = M.geodesic_unit(2.0, x, torch.tensor([0.0, 7.0], dtype=torch.float64))
            >>> round(float(M.dist(x, y)), 9)
            2.0
        """
        self._check("geodesic_unit", x=x, u=u)
        return self.expmap(x, u * (t * common.safe_reciprocal(self.norm(x, u, keepdim=True))), check=False)

    def random_normal(
        self,
        *size: int | Sequence[int],
        mean: float = 0.0,
        std: float = 1.0,
        nc: int | None = None,
        dtype: torch.dtype | None = None,
        device: Device = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Random points as geoopt draws them: ``expmap0`` of a tangent vector at the origin
        whose coordinates are ``N(mean, std^2 / n)`` (``n = size[-1]``; on the
        hyperboloid the time coordinate is dropped). :meth:`random` instead draws
        Riemannian coordinates ``N(0, std^2)``.

        Args: as :meth:`random`, plus ``mean`` (added to every coordinate).

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> x = PoincareBall().random_normal(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            >>> tuple(x.shape), PoincareBall().check_point(x)
            ((5, 3), (True, None))
        """
        where = f"{type(self).__name__}.random_normal"
        size = self._size("random_normal", size)
        dtype = self._factory_args("random_normal", nc, dtype)
        std = check_real(where, "std", std, minimum=0.0)
        mean = check_real(where, "mean", mean)
        if generator is not None:
            check_instance(where, "generator", generator, torch.Generator, "a torch.Generator or None")
        u = torch.randn(size, dtype=dtype, device=device, generator=generator) * (std / size[-1] ** 0.5) + mean
        return self.expmap0(self._tangent0(u if nc is None else mc(u, nc=nc))).detach()

    def wrapped_normal(
        self,
        *size: int | Sequence[int],
        mean: torch.Tensor,
        std: float = 1.0,
        dtype: torch.dtype | None = None,
        device: Device = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Wrapped normal points around ``mean`` (Mathieu et al. 2019, as geoopt): Riemannian
        coordinates ``N(0, std^2)`` at the origin, transported to ``mean`` and mapped
        with ``expmap(mean, .)``. The result has ``mean``'s dtype, device and kind (plain / MC).

        Args:
            size: shape of the result (broadcastable with ``mean``).
            mean: points ``(*, n)``.
            std: standard deviation of each Riemannian coordinate.
            dtype, device: geoopt's arguments: ``None``, or ``mean``'s (another value is a
                ``ValueError``: convert ``mean`` instead).
            generator: a ``torch.Generator`` or ``None``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M, m = PoincareBall(), torch.tensor([0.9, 0.0], dtype=torch.float64)
            >>> x = M.wrapped_normal(1000, 2, mean=m, std=0.1, generator=torch.Generator().manual_seed(0))
            >>> float(M.dist(x, m).mean()) < 0.2, M.check_point(x)
            (True, (True, None))
        """
        where = f"{type(self).__name__}.wrapped_normal"
        size = self._size("wrapped_normal", size)
        self._check("wrapped_normal", mean=mean)
        std = check_real(where, "std", std, minimum=0.0)
        if dtype is not None and dtype != mean.dtype:
            raise ValueError(f"{where}: dtype {dtype} differs from mean's {mean.dtype}; the points have mean's dtype (convert mean)")
        if device is not None and torch.device(device) != mean.device:
            raise ValueError(f"{where}: device {device} differs from mean's {mean.device}; the points are made on mean's device")
        if generator is not None:
            check_instance(where, "generator", generator, torch.Generator, "a torch.Generator or None")
        v = torch.randn(size, dtype=mean.dtype, device=mean.device, generator=generator) * std
        if isinstance(mean, MCTensor):
            v = mc(v, nc=mean.nc)
        mean = mean.expand(torch.broadcast_shapes(mean.shape, v.shape))
        return self.expmap(mean, self.transp0(mean, self._origin_tangent(v)), check=False)

    def check_point_on_manifold(
        self, x: torch.Tensor, *, explain: bool = False, atol: float | None = None
    ) -> bool | tuple[bool, str | None]:
        """geoopt's name for :meth:`check_point`: ``ok``, or ``(ok, reason)`` with ``explain=True``.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> M = PoincareBall()
            >>> M.check_point_on_manifold(torch.tensor([0.5, 0.0])), M.check_point_on_manifold(torch.tensor([2.0, 0.0]), explain=True)
            (True, (False, 'norm >= 1/sqrt(c) = 1 (outside the ball) (1 of 1 points; first at index ())'))
        """
        ok, reason = self.check_point(x, atol=atol)
        return (ok, reason) if check_bool(f"{type(self).__name__}.check_point_on_manifold", "explain", explain) else ok

    def assert_check_point_on_manifold(self, x: torch.Tensor, *, atol: float | None = None) -> None:
        """``ValueError`` with the reason unless :meth:`check_point` passes.

        Example:
            >>> from hypermc.manifolds import PoincareBall
            >>> PoincareBall().assert_check_point_on_manifold(torch.tensor([2.0, 0.0]))
            Traceback (most recent call last):
                ...
            ValueError: PoincareBall: x is not a point of PoincareBall(curvature=-1): norm >= 1/sqrt(c) = 1 ...
        """
        ok, reason = self.check_point(x, atol=atol)
        if not ok:
            raise ValueError(f"{type(self).__name__}: x is not a point of {self!r}: {reason}")

    def check_vector_on_tangent(
        self, x: torch.Tensor, u: torch.Tensor, *, explain: bool = False, atol: float | None = None
    ) -> bool | tuple[bool, str | None]:
        """Whether ``u`` holds tangent vectors at ``x`` (finite; on the hyperboloid also
        ``<x, u>_L = 0`` within the tolerance): ``ok``, or ``(ok, reason)`` with ``explain=True``.

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> M = Lorentz()
            >>> o = M.origin(3, dtype=torch.float64)
            >>> M.check_vector_on_tangent(o, torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64))
            True
            >>> M.check_vector_on_tangent(o, torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64), explain=True)[0]
            False
        """
        where = f"{type(self).__name__}.check_vector_on_tangent"
        self._check("check_vector_on_tangent", x=x, u=u)
        atol = check_real(where, "atol", atol, minimum=0.0, allow_none=True)
        bad = ~torch.isfinite(common.lead(u)).all(dim=-1)
        reason: str | None
        if bool(bad.any()):
            ok, reason = False, _reason("contains inf or NaN", bad)
        else:
            ok, reason = self._check_tangent_values(x, u, atol)
        return (ok, reason) if check_bool(where, "explain", explain) else ok

    def assert_check_vector_on_tangent(self, x: torch.Tensor, u: torch.Tensor, *, atol: float | None = None) -> None:
        """``ValueError`` with the reason unless :meth:`check_vector_on_tangent` passes.

        Example:
            >>> from hypermc.manifolds import Lorentz
            >>> M = Lorentz()
            >>> M.assert_check_vector_on_tangent(M.origin(3), torch.tensor([0.0, 1.0, 2.0]))  # passes: returns None
        """
        ok, reason = self.check_vector_on_tangent(x, u, explain=True, atol=atol)  # type: ignore[misc]
        if not ok:
            raise ValueError(f"{type(self).__name__}: u is not tangent at x: {reason}")

    def _check_tangent_values(self, x: torch.Tensor, u: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        """The model's tangency conditions beyond finiteness (none here: every vector is tangent)."""
        return True, None

    # --------------------------------------------------------- check_point

    def check_point(self, x: torch.Tensor, *, atol: float | None = None) -> tuple[bool, str | None]:
        """Whether ``x`` holds points of this manifold.

        Args:
            x: points ``(*, n)``.
            atol: tolerance of an equality constraint (the hyperboloid's), ``None`` for
                the model's default.

        Returns:
            ``(True, None)`` or ``(False, reason)``; the reason names the violated
            condition, how many points violate it and the first index.

        Example:
            >>> from hypermc.manifolds import PoincareHalfspace
            >>> PoincareHalfspace().check_point(torch.tensor([[0.0, 1.0], [2.0, -1.0]]))
            (False, 'height x_n <= 0 (outside the halfspace) (1 of 2 points; first at index (1,))')
        """
        self._check("check_point", x=x)
        atol = check_real(f"{type(self).__name__}.check_point", "atol", atol, minimum=0.0, allow_none=True)
        lead = common.lead(x)
        finite = torch.isfinite(lead).all(dim=-1)
        if isinstance(x, MCTensor):
            finite = finite & torch.isfinite(x.components).all(dim=-1).all(dim=-1)
        bad = ~finite
        if bool(bad.any()):
            return False, _reason("contains inf or NaN", bad)
        return self._check_values(x, atol)

    def _check_values(self, x: torch.Tensor, atol: float | None) -> tuple[bool, str | None]:
        """The model's membership conditions beyond finiteness (none here)."""
        return True, None

    # ------------------------------------------------------ batched distance

    def dist_batch(
        self,
        rows: torch.Tensor,
        ia: torch.Tensor,
        ib: torch.Tensor,
        *,
        leaf: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Distances ``d(rows[ia], rows[ib])`` between rows of a table of MC components,
        as plain numbers: what training and evaluation need by the million.

        The cancellation-prone parts are computed from the components, the rest in plain
        arithmetic; the result is within a few ulps of ``dist`` of the MC points rounded
        to the component dtype, and its gradient with respect to ``leaf`` is that of the
        exact formula at the stored points (see :mod:`hypermc.manifolds.math.batch`).
        The four models override this with their specialised forms; this generic version
        (any model) evaluates ``dist`` in full MC arithmetic (~100x slower).

        Args:
            rows: MC components ``(U, n, nc)`` of the points (``nc = 1`` for plain points;
                :func:`~hypermc.manifolds.math.batch.components_of` makes them from a table).
            ia, ib: int64 (or int32) indices into ``rows``, broadcastable against each other.
            leaf: optional plain ``(U, n)`` tensor equal to ``rows[..., 0]`` that requires
                grad; the distances are then differentiable with respect to it.
            cache: optional dict for per-row quantities (the ball's deficits) reused by
                later calls with the same ``rows`` and no ``leaf`` (the evaluator's chunks).

        Returns:
            Plain tensor of the broadcast shape of ``ia`` and ``ib``, component dtype.

        Example:
            >>> from hypermc.manifolds import PoincareHalfspace
            >>> from hypermc.manifolds.math.batch import components_of
            >>> table = hm.mc([[0.0, 1.0], [0.0, 2.0], [1.0, 1.0]], nc=2, dtype=torch.float64)
            >>> d = PoincareHalfspace().dist_batch(components_of(table), torch.tensor([0, 0]), torch.tensor([1, 2]))
            >>> [round(v, 6) for v in d.tolist()]  # ln 2, 2 asinh(1/2)
            [0.693147, 0.962424]
        """
        self._check_batch(rows, ia, ib, leaf, cache)
        return batch.generic(lambda x, y: self.dist(x, y, check=False), rows, ia, ib, leaf=leaf)

    def _check_batch(
        self, rows: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, leaf: torch.Tensor | None, cache: dict[str, torch.Tensor] | None
    ) -> None:
        """Argument checks of :meth:`dist_batch` (no host sync: indices are not range-checked)."""
        where = f"{type(self).__name__}.dist_batch"
        check_instance(where, "rows", rows, torch.Tensor, "a plain Tensor of MC components (U, n, nc)")
        if isinstance(rows, MCTensor):
            raise TypeError(
                f"{where}: rows must be a plain Tensor of MC components (U, n, nc); got an MCTensor (pass components_of(table))"
            )
        if rows.dim() != 3 or rows.shape[1] < self.min_dim or not rows.is_floating_point():
            raise ValueError(
                f"{where}: rows must be floating MC components (U, n, nc) with n >= {self.min_dim}; "
                f"got {rows.dtype} of shape {tuple(rows.shape)}"
            )
        for name, idx in (("ia", ia), ("ib", ib)):
            check_instance(where, name, idx, torch.Tensor, "an int64 Tensor of row indices")
            if idx.dtype not in (torch.int64, torch.int32):
                raise TypeError(f"{where}: {name} must be an int64 Tensor of row indices; got {idx.dtype}")
        if leaf is not None:
            check_instance(where, "leaf", leaf, torch.Tensor, "a plain Tensor (U, n) or None")
            if isinstance(leaf, MCTensor) or leaf.shape != rows.shape[:-1] or leaf.dtype != rows.dtype:
                raise ValueError(
                    f"{where}: leaf must be a plain {rows.dtype} Tensor of shape "
                    f"{tuple(rows.shape[:-1])} (rows[..., 0]); got {type(leaf).__name__} "
                    f"{leaf.dtype} {tuple(leaf.shape)}"
                )
        if cache is not None:
            check_instance(where, "cache", cache, dict, "a dict or None")


_add_dim(Manifold)


def _reason(what: str, bad: torch.Tensor) -> str:
    n = int(bad.sum())
    first = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
    return f"{what} ({n} of {max(bad.numel(), 1)} points; first at index {first})"
