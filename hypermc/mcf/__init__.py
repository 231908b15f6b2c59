"""Multi-component floats: error-free kernels and the ``MCTensor`` type.

Layers (imports point downward only): ``eft`` → ``arith`` → ``elementary`` / ``reduce`` /
``matmul`` → ``tensor``. Kernels are pure functions on component tensors of shape
``(*shape, nc)``; :class:`MCTensor` wraps them.
"""

from .tensor import MCTensor, from_mpmath, mc

__all__ = ["MCTensor", "mc", "from_mpmath"]
