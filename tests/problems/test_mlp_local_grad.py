"""MLPClassifier.local_grad zeroes the padding rows in place (issue 13): the bits of
Problem.local_grad's masked copy, for padded and unpadded agents, agent subsets and one point."""

from __future__ import annotations

import numpy as np

from rfed.problems.base import Problem
from rfed.problems.mlp import MLPClassifier


def _problem(sizes):
    rng = np.random.default_rng(6)
    feats = rng.uniform(0.0, 1.0, (sum(sizes), 5))
    feats[:, 0] = 0.0   # a dead input: its weights' gradients are signed zeros
    labels = rng.integers(0, 3, sum(sizes))
    bounds = np.cumsum([0, *sizes])
    parts = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(sizes))]
    return MLPClassifier.from_parts(feats, labels, parts, n_hidden=4, n_classes=3)


def test_local_grad_has_the_masked_copys_bits():
    rng = np.random.default_rng(2)
    for sizes in ([7, 3, 11, 5], [6, 6, 6]):   # padded, and no padding
        problem = _problem(sizes)
        x = problem.initial_point(1) + 0.3 * rng.standard_normal((len(sizes), problem.n_params))
        for agents in (None, np.array([2, 0]), np.array([1])):
            rows = x if agents is None else x[agents]
            got = problem.local_grad(rows, agents)
            want = Problem.local_grad(problem, rows, agents)
            assert got.tobytes() == want.tobytes()   # every bit, signed zeros included
        point = x[0]   # the global gradient, as Problem.grad sums the base class's rows
        want = np.sum(problem.agent_weights[:, None] * Problem.local_grad(problem, point), axis=0)
        assert problem.grad(point).tobytes() == want.tobytes()
        assert np.abs(want).max() > 1e-3
