"""Problems shared by the decentralized algorithm tests."""

import numpy as np

from rfed.datasets.synthetic import make_epsilon_like
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly


def logreg_problem(n_samples: int, dim: int, n_agents: int, seed: int,
                   reg: float) -> LogisticRegression:
    """l2-regularized logistic regression on epsilon-like data, split evenly over agents."""
    x, y = make_epsilon_like(n_samples, dim, seed)
    f, lab = split_evenly(x, y, n_agents, np.random.default_rng(seed))
    return LogisticRegression(f, lab, L2Regularizer(reg))
