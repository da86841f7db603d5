"""Tail averaging (rfed.algorithms.averaging): a hand computation of the average, and the
privacy report and trajectory of the wrapped run left unchanged (pure post-processing)."""

import numpy as np
import pytest

from rfed.algorithms.averaging import TailAveraged
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.decentralized import DPDPSGD
from rfed.networks.graphs import circulant
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget
from rfed.problems.softmax import SoftmaxRegression


def _problem(n_agents=4, n_per=40, d_in=5, seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n_agents, n_per, d_in)) / np.sqrt(d_in)
    labels = rng.integers(0, 3, (n_agents, n_per))
    return SoftmaxRegression(feats, labels, n_classes=3, feature_bound=1.0)


def _make_dpdpsgd(noise):
    return DPDPSGD(Network(circulant(4, 1)), lr=0.5, beta=0.5, batch_size=8, clip=1.0, **noise)


def _outputs_after(problem, x0, rounds, after):
    """The unwrapped DP-DPSGD's outputs of rounds ``after + 1 .. rounds``, stepped by hand,
    and its last state."""
    alg = _make_dpdpsgd({"noise_multiplier": 1.0})
    state = alg.init(problem, x0, np.random.default_rng(5))
    outputs = []
    for t in range(1, rounds + 1):
        state = alg.step(problem, state)
        if t > after:
            outputs.append(alg.output(problem, state))
    return outputs, state


@pytest.mark.parametrize("average_from", [0, 3, 7])
def test_average_is_the_mean_of_the_tail_outputs(average_from):
    problem = _problem()
    x0 = np.zeros(problem.n_params)
    # by hand: step the unwrapped algorithm and average the outputs of rounds > average_from
    outputs, state = _outputs_after(problem, x0, 10, average_from)
    res = TailAveraged(_make_dpdpsgd({"noise_multiplier": 1.0}), average_from=average_from).run(
        problem, 10, rng=np.random.default_rng(5), x0=x0, eval_every=10,
        with_reference=False)
    np.testing.assert_allclose(res.x, np.mean(outputs, axis=0), rtol=1e-12, atol=1e-14)
    assert res.history[-1]["averaged_rounds"] == 10 - average_from
    # the wrapped trajectory is the unwrapped one, bit for bit
    np.testing.assert_array_equal(res.state.inner.x, state.x)


def test_average_from_past_the_end_returns_the_last_output():
    problem = _problem()
    x0 = np.zeros(problem.n_params)
    plain = _make_dpdpsgd({}).run(problem, 6, rng=1, x0=x0, eval_every=6, with_reference=False)
    wrapped = TailAveraged(_make_dpdpsgd({}), average_from=6).run(
        problem, 6, rng=1, x0=x0, eval_every=6, with_reference=False)
    np.testing.assert_array_equal(wrapped.x, plain.x)


@pytest.mark.parametrize("make", [
    lambda: _make_dpdpsgd({"budget": PrivacyBudget(4.0, 1e-5), "n_rounds": 12}),
    lambda: DPSGD(step_size=0.5, batch_size=16, clip=1.0, momentum=0.5,
                  budget=PrivacyBudget(4.0, 1e-5), n_rounds=12),
])
def test_privacy_report_is_unchanged(make):
    problem = _problem()
    x0 = np.zeros(problem.n_params)
    plain = make().run(problem, 12, rng=3, x0=x0, eval_every=12, with_reference=False)
    wrapped = TailAveraged(make(), average_from=6).run(problem, 12, rng=3, x0=x0,
                                                       eval_every=12, with_reference=False)
    assert wrapped.privacy == plain.privacy
    assert plain.privacy["epsilon_certified"] <= 4.0 + 1e-9
    # same final iterate, different (averaged) output
    np.testing.assert_array_equal(wrapped.state.inner.x, plain.state.x)
    assert not np.array_equal(wrapped.x, plain.x)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="average_from"):
        TailAveraged(_make_dpdpsgd({}), average_from=-1)
    with pytest.raises(ValueError, match="average_from"):
        TailAveraged(_make_dpdpsgd({}), average_from=2.5)
    with pytest.raises(TypeError, match="algorithm"):
        TailAveraged(object(), average_from=0)


@pytest.mark.parametrize("ema_decay", [0.5, 0.8])
def test_ema_is_the_warm_started_exponential_average_of_the_tail(ema_decay):
    """Weights by hand: the k-th averaged output enters with max(1/k, 1 - beta)."""
    problem = _problem()
    x0 = np.zeros(problem.n_params)
    outputs, state = _outputs_after(problem, x0, 12, 2)
    # closed form of the recursion: x_k's weight is w_k prod_{m > k} (1 - w_m)
    w = np.array([max(1.0 / k, 1.0 - ema_decay) for k in range(1, len(outputs) + 1)])
    coef = np.array([w[k] * np.prod(1.0 - w[k + 1:]) for k in range(len(w))])
    assert abs(coef.sum() - 1.0) < 1e-12 and coef[-1] == pytest.approx(1.0 - ema_decay)
    res = TailAveraged(_make_dpdpsgd({"noise_multiplier": 1.0}), average_from=2,
                       ema_decay=ema_decay).run(problem, 12, rng=np.random.default_rng(5),
                                                x0=x0, eval_every=12, with_reference=False)
    np.testing.assert_allclose(res.x, np.tensordot(coef, outputs, axes=1), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_array_equal(res.state.inner.x, state.x)
    # it weighs the last outputs more than the uniform mean does, so it differs from it
    assert not np.allclose(res.x, np.mean(outputs, axis=0))


def test_ema_decay_is_checked():
    for bad in (-0.1, 1.0, True, "0.9"):
        with pytest.raises(ValueError, match="ema_decay"):
            TailAveraged(_make_dpdpsgd({}), average_from=0, ema_decay=bad)
