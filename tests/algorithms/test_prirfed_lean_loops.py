"""The hand-written PriRFed rounds `benchmarks/bench_prirfed.py` times against rfed: the lean
loop gives rfed's round bit for bit; the changed-bits loop gives the same round to rounding
when the noise is zero; its keyed SFC64 normals depend only on their agent's key and have a
standard normal's moments, and the moment check catches a broken seeding (unmixed keys)."""

import numpy as np
import pytest

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.problems import SpherePCA


@pytest.fixture(scope="module")
def bench(load_benchmark):
    """benchmarks/bench_prirfed.py as a module."""
    return load_benchmark("bench_prirfed")


def _round(n_agents, n_per, half, dim=40):
    rng = np.random.default_rng(0)
    problem = SpherePCA(rng.random((n_agents, n_per, dim)))
    alg = PriRFed(DPRSGD(steps=3, batch_size=0.5 if half else None, clip=2.0 * dim,
                         paper_epsilon=0.15, paper_delta=1e-4), n_sampled=None, step_size=0.02)
    state = alg.init(problem, problem.manifold.random_point(rng), np.random.default_rng(1))
    args = (problem, state.plan, state.x, state.seed, state.round, alg._alpha(state.round), 3,
            half)
    return alg, problem, state, args


@pytest.mark.parametrize("n_agents, n_per, half, block_bytes",
                         [(30, 8, True, 2**12), (12, 20, True, 2**20), (9, 10, False, 2**13)])
def test_lean_loops_against_rfeds_round(bench, n_agents, n_per, half, block_bytes):
    alg, problem, state, args = _round(n_agents, n_per, half)
    lean = bench.lean_round(*args, block_bytes)
    assert np.array_equal(lean, alg.step(problem, state).x)
    zero = np.zeros(n_agents)
    exact = bench.lean_round(*args, block_bytes, sigma=zero)
    moved = np.arccos(np.clip(exact @ state.x, -1.0, 1.0))
    assert moved > 1e-2   # the round moves the point: the comparisons below are not trivial
    for sfc64 in (False, True):
        changed = bench.lean_round_changed(*args, block_bytes, sigma=zero, sfc64=sfc64)
        assert np.abs(changed - exact).max() <= 1e-13
    # with noise: rfed's Philox noise kept, the round differs from rfed's by rounding only;
    # another generator's noise moves it elsewhere
    same_noise = bench.lean_round_changed(*args, block_bytes, sfc64=False)
    assert np.abs(same_noise - lean).max() <= 1e-12
    other_noise = bench.lean_round_changed(*args, block_bytes, sfc64=True)
    assert np.abs(other_noise - lean).max() > 1e-3


def _moments_in_standard_errors(x):
    """(mean, variance - 1, fourth moment - 3) of ``x`` in standard errors of N(0, 1)."""
    n = x.size
    return (x.mean() / np.sqrt(1 / n), (x.var() - 1) / np.sqrt(2 / n),
            ((x**4).mean() - 3) / np.sqrt(96 / n))


def test_keyed_sfc64_normals(bench, monkeypatch):
    agents = np.arange(2000)
    every = bench.KeyedSFC64Normals([5], [agents]).draw(3, "p", 500)
    some = bench.KeyedSFC64Normals([5], [np.array([1999, 4, 2])]).draw(3, "p", 500)
    assert np.array_equal(every[[1999, 4, 2]], some)
    assert not np.array_equal(every, bench.KeyedSFC64Normals([5], [agents]).draw(4, "p", 500))
    # 10^6 normals: each moment within 5 standard errors; neighbouring agents uncorrelated
    assert np.all(np.abs(_moments_in_standard_errors(every)) < 5)
    corr = (every[:-1] * every[1:]).mean()
    assert abs(corr) < 5 / np.sqrt(every[1:].size)

    def first_draws_off(n_agents=20000, width=16):
        """The largest |mean| or |variance - 1|, in standard errors, of the first ``width``
        normals of each agent's row (position by position over the agents): where a badly
        seeded generator shows."""
        rows = bench.KeyedSFC64Normals([1], [np.arange(n_agents)]).draw(3, "p", width)
        return max(np.abs(rows.mean(axis=0)).max() / np.sqrt(1 / n_agents),
                   np.abs(rows.var(axis=0) - 1).max() / np.sqrt(2 / n_agents))

    assert first_draws_off() < 5
    # a broken variant: the 53-bit keys written without mixing (zero top bits) start every
    # agent's SFC64 in a correlated state; its first normals are far too small (less noise
    # than the accountant assumes), and the same check fails
    monkeypatch.setattr(bench, "_splitmix64", lambda words: words)
    assert first_draws_off() >= 5


def test_shape_argument(bench):
    import argparse

    assert bench._shape("1000x50") == (1000, 50)
    assert bench._shape("10X8") == (10, 8)
    for bad, expected in (("10", "as AxN"), ("ax50", "as AxN"), ("10x7", "even N"),
                          ("0x50", "A >= 1")):
        with pytest.raises(argparse.ArgumentTypeError, match=expected):
            bench._shape(bad)
