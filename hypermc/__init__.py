"""hypermc: multi-component floats for hyperbolic deep learning.

A multi-component float (MCF) is an unevaluated sum of ``nc`` ordinary floats computed
with error-free transformations; :class:`hypermc.MCTensor` is a ``torch.Tensor`` of them.
"""

from typing import TYPE_CHECKING

from ._version import package_version
from .doctor import backends
from .manifolds import ManifoldParameter, ManifoldTensor
from .mcf import MCTensor, from_mpmath, mc

if TYPE_CHECKING:
    from .embed.config import TrainConfig

__version__ = package_version()  # from the package metadata (pyproject.toml's version)

__all__ = ["MCTensor", "mc", "from_mpmath", "backends", "__version__"]
__all__ += ["ManifoldParameter", "ManifoldTensor", "TrainConfig"]


def __getattr__(name: str) -> "type[TrainConfig]":
    # hypermc.TrainConfig without importing the embedding pipeline at ``import hypermc``
    if name == "TrainConfig":
        from .embed.config import TrainConfig

        return TrainConfig
    raise AttributeError(f"module 'hypermc' has no attribute {name!r}")
