"""Riemannian optimizers on any rfed manifold: SGD with transported momentum, Adam and AMSGrad
(Becigneul and Ganea 2019), and an Armijo backtracking line search. Depends on
:mod:`rfed.manifolds` only; see ``docs/guide/optimizers.md``."""

from rfed.optim.adaptive import (
    OptimizerState,
    RiemannianAdam,
    RiemannianAMSGrad,
    RiemannianSGD,
    minimize,
)
from rfed.optim.linesearch import ArmijoLineSearch, ArmijoStep

__all__ = ["ArmijoLineSearch", "ArmijoStep", "OptimizerState", "RiemannianAdam",
           "RiemannianAMSGrad", "RiemannianSGD", "minimize"]
