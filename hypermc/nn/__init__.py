"""MC modules (:class:`MCLinear`, :class:`MCEmbedding`, ...) and their functional forms.

``hypermc.nn.functional`` holds the functional forms, the Tensor/MCTensor conversions
(:func:`~hypermc.nn.functional.to_tensor`, :func:`~hypermc.nn.functional.as_mc`) and MC
losses.
"""

from . import functional
from .modules import MCEmbedding, MCGELU, MCLinear, MCReLU, MCSequential, MCSoftmax, MCToTensor

__all__ = [
    "functional",
    "MCLinear",
    "MCEmbedding",
    "MCSequential",
    "MCReLU",
    "MCGELU",
    "MCSoftmax",
    "MCToTensor",
]
