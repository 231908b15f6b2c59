"""MC modules (:class:`MCLinear`, :class:`MCEmbedding`, ...) and their functional forms.

``hypermc.nn.functional`` holds the functional forms, the Tensor/MCTensor conversions
(:func:`~hypermc.nn.functional.to_tensor`, :func:`~hypermc.nn.functional.as_mc`) and MC
losses. ``hypermc.nn.hyperbolic`` holds the hyperbolic graph layers (:class:`HypLinear`,
:class:`HypAgg`, :class:`HypAct`, :class:`HypGraphConv`) and ``hypermc.nn.hgcn`` the
HGCN-compatible manifold adapter.
"""

from . import functional, hgcn, hyperbolic
from .hyperbolic import HypAct, HypAgg, HypGraphConv, HypLinear
from .modules import MCGELU, MCEmbedding, MCLinear, MCReLU, MCSequential, MCSoftmax, MCToTensor, to_mc

__all__ = [
    "functional",
    "MCLinear",
    "MCEmbedding",
    "MCSequential",
    "MCReLU",
    "MCGELU",
    "MCSoftmax",
    "MCToTensor",
    "to_mc",
    "hyperbolic",
    "hgcn",
    "HypLinear",
    "HypAgg",
    "HypAct",
    "HypGraphConv",
]
