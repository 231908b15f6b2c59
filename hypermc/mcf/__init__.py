"""Multi-component floats: error-free kernels and the ``MCTensor`` type.

Layers (imports point downward only): ``eft`` → ``fixed`` / ``native`` → ``arith`` →
``elementary`` / ``reduce`` / ``matmul`` / ``exact``; ``compile`` → ``tensor`` (the
class, its op table and the constructors) → ``ops`` (the table's implementations).
Kernels are pure functions on component tensors of shape ``(*shape, nc)`` and never
import ``tensor``; :class:`MCTensor` wraps them.
"""

from . import ops  # noqa: F401  (fills MCTensor's op table)
from .tensor import MCTensor, from_mpmath, mc

__all__ = ["MCTensor", "mc", "from_mpmath"]
