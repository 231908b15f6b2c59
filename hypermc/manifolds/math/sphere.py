"""The unit sphere ``{x in R^n : |x| = 1}`` embedded in ``R^n``, as pure functions.

Formulas that stay accurate for close and for nearly antipodal points: the distance is
``2 atan2(|x - y|, |x + y|)`` (no ``acos`` of a number near 1), the logarithm scales
``y - x - <x, y - x> x`` (no ``y - <x, y> x`` cancellation), and parallel transport
divides by ``|x + y|^2 / 2`` instead of forming ``1 + <x, y>``.
"""

from __future__ import annotations

import torch

from . import common
from . import stereographic as S

__all__ = ["projx", "proju", "dist", "expmap", "logmap", "transp"]


def projx(x: torch.Tensor) -> torch.Tensor:
    """``x / |x|`` (0 stays 0: not a point).

    Example:
        >>> projx(torch.tensor([3.0, 4.0]))
        tensor([0.6000, 0.8000])
    """
    return common.normalize(x)


def proju(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``u - <x, u> x``, the projection onto the tangent space at ``x``.

    Example:
        >>> proju(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 3.0]))
        tensor([0., 3.])
    """
    return u - common.dot(x, u, keepdim=True) * x


def dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""The angle ``2 atan2(|x - y|, |x + y|)`` (``tan(theta/2) = |x - y| / |x + y|`` for unit vectors).

    Example:
        >>> x = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> [round(float(dist(x, y)), 9) for y in (torch.tensor([0.0, 1.0], dtype=torch.float64), -x)]
        [1.570796327, 3.141592654]
    """
    num = common.norm(x - y, keepdim=True)
    den = common.norm(x + y, keepdim=True)
    return (2 * S._artan_of(num, den, 1.0))[..., 0]


def expmap(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""``exp_x(u) = cos|u| x + (sin|u| / |u|) u`` (``u`` tangent at ``x``).

    Example:
        >>> x, u = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, torch.pi / 2], dtype=torch.float64)
        >>> expmap(x, u).round(decimals=12)
        tensor([0., 1.], dtype=torch.float64)
    """
    s = common.sqnorm(u, keepdim=True)
    return x * S.cos_ratio(s) + u * S.sin_ratio(s)


def logmap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""``log_x(y) = theta v / |v|`` with ``v = (y - x) - <x, y - x> x`` (``|v| = sin theta``).

    Undefined at the antipode (every direction is a shortest one): 0 there.

    Example:
        >>> x, y = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
        >>> logmap(x, y)
        tensor([0.0000, 1.5708], dtype=torch.float64)
    """
    v = proju(x, y - x)
    nv = common.norm(v, keepdim=True)
    theta = dist(x, y).unsqueeze(-1)
    zero = common.lead(nv) == 0
    return v * torch.where(zero, torch.ones_like(nv), theta / torch.where(zero, torch.ones_like(nv), nv))


def transp(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Parallel transport along the shortest geodesic:
    ``P v = v - (2 <v, y> / |x + y|^2)(x + y)`` (``|x + y|^2 = 2(1 + <x, y>)``).

    Laws: ``<P u, P v> = <u, v>``, ``P log_x(y) = -log_y(x)``.

    Example:
        >>> x, y = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])
        >>> transp(x, y, torch.tensor([0.0, 1.0, 0.0])), transp(x, y, torch.tensor([0.0, 0.0, 1.0]))
        (tensor([-1.,  0.,  0.]), tensor([0., 0., 1.]))
    """
    s = x + y
    return v - (2 * common.dot(v, y, keepdim=True) / common.sqnorm(s, keepdim=True)) * s
