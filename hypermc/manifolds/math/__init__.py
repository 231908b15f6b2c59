"""The geometry of each model as pure functions on Tensors / MCTensors.

``common`` (shared helpers), ``halfspace``, ``ball``, ``lorentz``, and ``batch`` (the
batched distances of :meth:`~hypermc.manifolds.Manifold.dist_batch`). The manifold
classes call these in one line after checking their arguments; these functions do not check.
"""

from . import ball, batch, common, halfspace, lorentz

__all__ = ["ball", "batch", "common", "halfspace", "lorentz"]
