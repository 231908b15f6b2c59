"""Optimizers: MC SGD/Adam (class + functional update) and Riemannian optimizers."""

from .mc_optim import MCSGD, MCAdam, mc_adam, mc_sgd
from .riemannian import RiemannianAdam, RiemannianSGD, riemannian_adam, riemannian_sgd

__all__ = ["MCSGD", "MCAdam", "mc_sgd", "mc_adam", "RiemannianSGD", "RiemannianAdam", "riemannian_sgd", "riemannian_adam"]
