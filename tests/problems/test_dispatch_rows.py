"""The resource allocation's row oracles (issue 13: one lookup per call, 2 a formed once) give
the bits of the general formula for every agent set: all agents, a subset, a permutation, a
shard."""

from __future__ import annotations

import numpy as np
import pytest

from rfed.problems.dispatch import QuadraticResourceAllocation, ieee14_problem


def _problem():
    rng = np.random.default_rng(4)
    a = rng.uniform(0.01, 0.2, (9, 3))
    a[[2, 5]] = 0.0      # buses without a generator: W_i = {0}
    hi = rng.uniform(30.0, 90.0, (9, 3))
    hi[[2, 5]] = 0.0
    return QuadraticResourceAllocation(a, rng.uniform(-2.0, 4.0, (9, 3)), np.zeros_like(a), hi,
                                       0.3 * hi)


def _argmin(problem, agents, price):
    # the general formula on the full arrays' rows
    a, b = problem.a[agents], problem.b[agents]
    lo, hi, free = problem.lo[agents], problem.hi[agents], problem.free[agents]
    return problem._argmin(price, a, b, lo, hi, free)


@pytest.mark.parametrize("make", [_problem, ieee14_problem])
def test_primal_rows_give_the_argmin_bits_for_any_agent_set(make):
    problem = make()
    n, m = problem.n_agents, problem.m
    rng = np.random.default_rng(9)
    price = rng.uniform(-5.0, 40.0, (n, m))
    sets = [np.arange(n), np.arange(n)[::-1].copy(), np.array([1, 2, n - 1]),
            np.array([], dtype=int), rng.permutation(n)]
    for agents in sets:
        got = problem.primal_rows(agents, price[agents])
        np.testing.assert_array_equal(got, _argmin(problem, agents, price[agents]))
        np.testing.assert_array_equal(problem.demand_rows(agents), problem.demand[agents])
    np.testing.assert_array_equal(problem.primal_rows(np.arange(n), price), problem.primal(price))
    # a shard answers for its agents with the same bits, and refuses another agent
    held = np.array([0, 2, n - 2])
    part = problem.shard(held)
    np.testing.assert_array_equal(part.primal_rows(held, price[held]),
                                  _argmin(problem, held, price[held]))
    with pytest.raises(ValueError, match="agent 1 is not held here"):
        part.primal_rows(np.array([1]), price[:1])


def test_primal_rows_of_an_instance_without_the_kept_denominator():
    """An instance pickled before ``2 a`` was kept forms it on first use: the same bits."""
    problem = _problem()
    price = np.random.default_rng(1).uniform(0.0, 30.0, (problem.n_agents, problem.m))
    want = problem.primal_rows(np.arange(problem.n_agents), price)
    del problem._rows["two_a"]
    np.testing.assert_array_equal(problem.primal_rows(np.arange(problem.n_agents), price), want)
