"""Riemannian optimizers on any rfed manifold: SGD with transported momentum, Adam and AMSGrad
(Becigneul and Ganea 2019). Depends on :mod:`rfed.manifolds` only; see
``docs/guide/optimizers.md``."""

from rfed.optim.adaptive import (
    OptimizerState,
    RiemannianAdam,
    RiemannianAMSGrad,
    RiemannianSGD,
    minimize,
)

__all__ = ["OptimizerState", "RiemannianAdam", "RiemannianAMSGrad", "RiemannianSGD", "minimize"]
