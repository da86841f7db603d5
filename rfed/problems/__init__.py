"""Objectives split across agents: per-sample loss and Riemannian gradient on a manifold.

* :class:`SpherePCA`: leading eigenvector on the sphere (PriRFed problem 6.1), closed-form optimum.
* :class:`SPDFrechetMean` / :class:`FrechetMean`: Frechet mean (problem 6.2), Karcher reference.
* :class:`HyperbolicPrediction`: kernel-weighted Frechet mean on the hyperboloid (problem 6.3).
* :class:`AutogradProblem`: any batched autograd loss on any manifold.
"""

from rfed.problems.autograd_problem import AutogradProblem
from rfed.problems.base import Problem, sample_without_replacement, stack_agents
from rfed.problems.frechet import FrechetMean, SPDFrechetMean
from rfed.problems.hyperbolic import HyperbolicPrediction, kernel_weights
from rfed.problems.pca import SpherePCA

__all__ = [
    "AutogradProblem",
    "FrechetMean",
    "HyperbolicPrediction",
    "Problem",
    "SPDFrechetMean",
    "SpherePCA",
    "kernel_weights",
    "sample_without_replacement",
    "stack_agents",
]
