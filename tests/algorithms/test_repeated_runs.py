"""Repetitions run together (RepeatedRuns, PriRFed.step_runs) equal the runs alone, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.algorithms.federated.repeated import RepeatedRuns
from rfed.algorithms.federated.streams import AgentBlockGenerator
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA
from rfed.randomness import AgentStreams, StackedStreams

R = 3


@pytest.fixture(scope="module")
def problem():
    return SpherePCA(make_pca_synthetic(20, 30, 6, 0.1, np.random.default_rng(3)))


def test_stacked_streams_give_each_run_its_own_rows():
    seeds = [5, 2**40 + 3, 11]
    # one agent, one group, and a block over two groups (ids 3 and 17)
    blocks = [np.array([7]), np.array([0, 1, 15]), np.array([3, 17])]
    stacked = StackedStreams(seeds, blocks, agents_per_stream=1)
    for kind in ("normal", "uniform"):
        got = stacked.draw(4, "local#2", (2, 3), kind)
        want = np.concatenate([getattr(AgentStreams(s, agents_per_stream=1), kind)(
            b, 4, "local#2", (2, 3))
                               for s, b in zip(seeds, blocks, strict=True)])
        np.testing.assert_array_equal(got, want)
    gen = AgentBlockGenerator.stacked(seeds, blocks, 4)
    alone = [AgentBlockGenerator(s, b, 4) for s, b in zip(seeds, blocks, strict=True)]
    high = np.array([3, 9, 9, 9, 4, 4])[:, None]
    got = gen.integers(0, high, size=(6, 5))
    np.testing.assert_array_equal(got, np.concatenate(
        [g.integers(0, h, size=(b.size, 5)) for g, b, h in
         zip(alone, blocks, (high[:1], high[1:4], high[4:]), strict=True)]))
    with pytest.raises(ValueError, match="same length"):
        StackedStreams([1, 2], blocks, agents_per_stream=1)


def _trainers():
    return {
        "rsgd-all": (DPRSGD(steps=2, clip=1.0), None),
        "rsgd-one-minibatch": (DPRSGD(steps=3, batch_size=0.5, clip=1.0), 1),
        "rsvrg-paper": (DPRSVRG(steps=2, inner_steps=4, clip=1.0, clip_full=1.0), 1),
        "rsvrg-released": (DPRSVRG(steps=2, inner_steps=3, clip=0.5, clip_full=1.0,
                                   variant="released_snapshot", batch_size=4), 2),
    }


def _alone(alg, problem, x0s, rngs, rounds, eval_every):
    return [alg.run(problem, rounds, rng=rng, x0=x0, eval_every=eval_every)
            for x0, rng in zip(x0s, rngs, strict=True)]


def _together(alg, problem, x0s, rngs, rounds, eval_every):
    group = RepeatedRuns(alg, x0s, rngs, n_rounds=rounds, eval_every=eval_every)
    res = group.run(problem, rounds, rng=rngs[0], x0=x0s[0], eval_every=eval_every)
    return group.results(problem, res.state)


def _assert_same(alone, together):
    assert len(alone) == len(together)
    for a, b in zip(alone, together, strict=True):
        assert a.history == b.history   # exact float equality of every metric
        np.testing.assert_array_equal(a.x, b.x)
        assert (a.diverged, a.diverged_round, a.diverged_reason) == (
            b.diverged, b.diverged_round, b.diverged_reason)
        if a.privacy is None:
            assert b.privacy is None
        else:
            assert a.privacy["epsilon_certified"] == b.privacy["epsilon_certified"]
            assert a.privacy["noise_multiplier"] == b.privacy["noise_multiplier"]


@pytest.mark.parametrize("case", sorted(_trainers()))
@pytest.mark.parametrize("option", [1, 2])
def test_runs_together_equal_runs_alone(problem, case, option):
    trainer, n_sampled = _trainers()[case]
    # budget-first: with partial participation each run's calibration depends on its seed, so
    # the stacked rows carry different noise levels
    alg = PriRFed(trainer, n_sampled, 0.05, budget=PrivacyBudget(4.0, 1e-4), n_rounds=6,
                  output_option=option)
    x0s = [problem.manifold.random_point(np.random.default_rng(100 + r)) for r in range(R)]
    rngs = [np.random.default_rng([7, r]) for r in range(R)]
    alone = _alone(alg, problem, x0s, rngs, 6, 2)
    rngs = [np.random.default_rng([7, r]) for r in range(R)]
    _assert_same(alone, _together(alg, problem, x0s, rngs, 6, 2))


class _FailsPastLatitude(DPRSGD):
    """DP-RSGD whose local iterate becomes NaN once its first coordinate passes ``limit``.

    A row-wise criterion: a run diverges at the same round alone or stacked with others.
    """

    def train(self, problem, plan, x, agents, step_size, rng, option=1, **kw):
        out, info = super().train(problem, plan, x, agents, step_size, rng, option, **kw)
        out = np.where(out[:, :1] > self.limit, np.nan, out)
        return out, info


def test_a_diverged_run_ends_as_alone_and_the_others_go_on(problem):
    trainer = _FailsPastLatitude(steps=1, clip=1.0, noise_multiplier=3.0)
    trainer.limit = 0.2
    alg = PriRFed(trainer, 1, 0.5)
    x0s = [problem.manifold.random_point(np.random.default_rng(200 + r)) for r in range(6)]
    rngs = [np.random.default_rng([8, r]) for r in range(6)]
    alone = _alone(alg, problem, x0s, rngs, 12, 3)
    diverged = [a.diverged for a in alone]
    assert any(diverged) and not all(diverged)   # the case under test: some runs, not all
    rngs = [np.random.default_rng([8, r]) for r in range(6)]
    _assert_same(alone, _together(alg, problem, x0s, rngs, 12, 3))


def test_repeated_runs_refuses_bad_arguments(problem):
    alg = PriRFed(DPRSGD(steps=1), 1, 0.1)
    with pytest.raises(ValueError, match="x0s"):
        RepeatedRuns(alg, [], [], n_rounds=2, eval_every=1)
    with pytest.raises(TypeError, match="PriRFed"):
        RepeatedRuns(object(), [np.zeros(6)], [0], n_rounds=2, eval_every=1)
