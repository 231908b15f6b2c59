"""Euclidean space with the manifold interface (for uniform code paths)."""

from __future__ import annotations

import torch

from .base import Manifold
from .math import common

__all__ = ["Euclidean"]


class Euclidean(Manifold):
    """``R^n`` with the Euclidean metric (curvature 0): ``expmap(x, u) = x + u``,
    ``logmap(x, y) = y - x``, ``dist = |x - y|``, transport is the identity. MC inputs
    give MC results like every other model."""

    name = "euclidean"
    min_dim = 1

    def __init__(self):
        self.c = 0.0
        self.curvature = 0.0

    def dist(self, x, y, *, keepdim: bool = False, check: bool = True):
        """``|x - y|``. ``check``: see :mod:`.base`."""
        self._check("dist", x=x, y=y)
        self._check_on("dist", check, x=x, y=y)
        return common.norm(x - y, keepdim=keepdim)

    def dist0(self, x, *, keepdim: bool = False, check: bool = True):
        """``|x|``. ``check``: see :mod:`.base`."""
        self._check("dist0", x=x)
        self._check_on("dist0", check, x=x)
        return common.norm(x, keepdim=keepdim)

    def expmap(self, x, u, *, check: bool = True):
        """``x + u``. ``check``: see :mod:`.base`."""
        self._check("expmap", x=x, u=u)
        self._check_on("expmap", check, x=x)
        return x + u

    def logmap(self, x, y, *, check: bool = True):
        """``y - x``. ``check``: see :mod:`.base`."""
        self._check("logmap", x=x, y=y)
        self._check_on("logmap", check, x=x, y=y)
        return y - x

    def expmap0(self, u):
        """``u``."""
        self._check("expmap0", u=u)
        return u

    def logmap0(self, y, *, check: bool = True):
        """``y``. ``check``: see :mod:`.base`."""
        self._check("logmap0", y=y)
        self._check_on("logmap0", check, y=y)
        return y

    def retr(self, x, u):
        """``x + u``."""
        self._check("retr", x=x, u=u)
        return x + u

    def transp(self, x, y, v):
        """``v``."""
        self._check("transp", x=x, y=y, v=v)
        return v

    def inner(self, x, u, v=None, *, keepdim: bool = False):
        """``<u, v>``."""
        v = u if v is None else v
        self._check("inner", x=x, u=u, v=v)
        return common.dot(u, v, keepdim=keepdim)

    def norm(self, x, u, *, keepdim: bool = False):
        """``|u|``."""
        self._check("norm", x=x, u=u)
        return common.norm(u, keepdim=keepdim)

    def projx(self, x):
        """``x``."""
        self._check("projx", x=x)
        return x

    def proju(self, x, u):
        """``u``."""
        self._check("proju", x=x, u=u)
        return u

    def egrad2rgrad(self, x, g):
        """``g``."""
        self._check("egrad2rgrad", x=x, g=g)
        return g

    def __repr__(self) -> str:
        return "Euclidean()"

    def _origin_values(self, size, dtype, device):
        return torch.zeros(size, dtype=dtype, device=device)
