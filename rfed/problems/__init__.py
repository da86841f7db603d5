"""Objectives split across agents: per-sample loss and Riemannian gradient on a manifold.

* :class:`SpherePCA`: leading eigenvector on the sphere (PriRFed problem 6.1), closed-form optimum.
* :class:`KPCA`: top-k principal subspace on Stiefel or Grassmann, closed-form optimum.
* :class:`SPDFrechetMean` / :class:`FrechetMean`: Frechet mean (problem 6.2), Karcher reference.
* :class:`HyperbolicPrediction`: kernel-weighted Frechet mean on the hyperboloid (problem 6.3).
* :class:`AutogradProblem`: any batched autograd loss on any manifold.
* :class:`LogisticRegression` / :class:`HingeSVM` with :class:`L2Regularizer` or
  :class:`L1Regularizer` (DO-ADP's and DP-DDA's linear models; their prox steps for dual
  averaging); :func:`split_evenly` deals samples to agents.
* :class:`SoftmaxRegression`: multinomial logistic regression with a public feature bound.
* :class:`MLPClassifier`: one-hidden-layer softmax network (DPDL's stand-in for LeNet), with
  :func:`load_digits_split`.
* :class:`QuadraticResourceAllocation`: economic dispatch with box constraints (DP-DGT);
  :func:`ieee14_problem` builds the paper's IEEE 14-bus instance.
"""

from rfed.problems.autograd_problem import AutogradProblem
from rfed.problems.base import Problem, sample_without_replacement, stack_agents
from rfed.problems.dispatch import QuadraticResourceAllocation, ieee14_problem
from rfed.problems.frechet import FrechetMean, SPDFrechetMean
from rfed.problems.hyperbolic import HyperbolicPrediction, kernel_similarity, kernel_weights
from rfed.problems.kpca import KPCA
from rfed.problems.linear import (
    HingeSVM,
    L1Regularizer,
    L2Regularizer,
    LogisticRegression,
    split_evenly,
)
from rfed.problems.mlp import MLPClassifier, load_digits_split
from rfed.problems.pca import SpherePCA
from rfed.problems.softmax import SoftmaxRegression

__all__ = [
    "AutogradProblem",
    "FrechetMean",
    "HingeSVM",
    "HyperbolicPrediction",
    "KPCA",
    "L1Regularizer",
    "L2Regularizer",
    "LogisticRegression",
    "MLPClassifier",
    "Problem",
    "QuadraticResourceAllocation",
    "SPDFrechetMean",
    "SoftmaxRegression",
    "SpherePCA",
    "ieee14_problem",
    "kernel_similarity",
    "kernel_weights",
    "load_digits_split",
    "sample_without_replacement",
    "split_evenly",
    "stack_agents",
]
