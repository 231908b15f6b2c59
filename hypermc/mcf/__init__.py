"""Multi-component floats: error-free kernels and the ``MCTensor`` type.

Layers (imports point downward only): ``eft`` → ``fixed`` / ``registry`` → ``arith`` →
``elementary`` / ``reduce`` / ``matmul`` / ``exact``; the backend, the package ``native``
(``native.trace`` → ``native.source`` → ``native.cuda``, ``native``, ``native.fused``),
sits above the algorithms and registers its fused kernels in ``registry``, which the
algorithms consult; ``compile`` → ``tensor`` (the class, its op
table and the constructors) → ``ops`` (the table's implementations).
Kernels are pure functions on component tensors of shape ``(*shape, nc)`` and never
import ``tensor``; :class:`MCTensor` wraps them.
"""

from . import native, ops  # noqa: F401  (native registers the fused kernels, ops fills MCTensor's op table)
from .tensor import MCTensor, from_mpmath, mc

__all__ = ["MCTensor", "mc", "from_mpmath"]
