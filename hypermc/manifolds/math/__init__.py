"""The geometry of each model as pure functions on Tensors / MCTensors.

``common`` (shared helpers), ``halfspace``, ``ball``, ``lorentz``. The manifold classes
call these in one line after checking their arguments; these functions do not check.
"""

from . import ball, common, halfspace, lorentz

__all__ = ["ball", "common", "halfspace", "lorentz"]
