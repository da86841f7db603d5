"""Centralized DP-SGD on the pooled data (rfed.algorithms.centralized.DPSGD)."""

import copy
import dataclasses
import math

import numpy as np
import pytest
from scipy import optimize, stats

from rfed.algorithms import centralized as centralized_module
from rfed.algorithms.centralized import DPSGD
from rfed.privacy import PrivacyBudget
from rfed.privacy.audit import epsilon_lower_bound
from rfed.privacy.secure import SecureRandom
from rfed.problems.linear import LogisticRegression
from rfed.problems.softmax import SoftmaxRegression

DELTA = 1e-5
#: The public nominal size of each agent of _toy() declared under add/remove (its true size).
PUBLIC_SIZE = 50


def _toy(n_agents=4, q=50, seed=0, sep=3.0):
    """Two well separated Gaussian blobs in R^2 (+1 around (sep, 0), -1 around (-sep, 0))."""
    rng = np.random.default_rng(seed)
    labels = rng.choice([-1.0, 1.0], size=(n_agents, q))
    feats = rng.normal(scale=0.5, size=(n_agents, q, 2))
    feats[..., 0] += sep * labels
    return LogisticRegression(feats, labels)


def _gaussian_exact_epsilon(z: float, delta: float) -> float:
    """Exact epsilon of one Gaussian mechanism with noise std / sensitivity ``z`` at ``delta``
    (Balle and Wang 2018, Thm 8): delta(eps) = Phi(1/(2z) - eps z) - e^eps Phi(-1/(2z) - eps z)."""
    def excess(eps):
        return (stats.norm.cdf(0.5 / z - eps * z)
                - math.exp(eps) * stats.norm.cdf(-0.5 / z - eps * z) - delta)
    return optimize.brentq(excess, 0.0, 100.0, xtol=1e-12)


@pytest.mark.parametrize(("sampling", "eps"), [("poisson", 0.5), ("poisson", 2.0),
                                               ("poisson", 8.0), ("without_replacement", 2.0)])
def test_budget_first_run_certifies_between_09_and_1_of_target(sampling, eps):
    prob = _toy()
    alg = DPSGD(step_size=0.1, batch_size=20, clip=1.0, sampling=sampling,
                budget=PrivacyBudget(eps, DELTA), n_rounds=30)
    res = alg.run(prob, 30, rng=0, x0=np.zeros(2), eval_every=30, with_reference=False)
    rep = res.privacy
    assert 0.9 * eps <= rep["epsilon_certified"] <= eps
    assert rep["delta"] == DELTA and rep["rounds"] == 30
    assert rep["neighboring"] == "replace_one" and rep["level"] == "record"
    assert any(sampling.replace("_", " ") in a for a in rep["assumptions"])


def test_one_full_batch_round_matches_the_analytic_gaussian_mechanism():
    # B = N, one round: no sampling, the release is one Gaussian mechanism with sensitivity
    # 2C/B (replace-one); its exact epsilon (Balle-Wang closed form) must not exceed the target
    # (the certificate is an upper bound) and the noise must not be wasted
    prob = _toy(n_agents=2, q=10)
    alg = DPSGD(step_size=0.1, batch_size=20, clip=1.0, sampling="without_replacement",
                budget=PrivacyBudget(1.0, DELTA), n_rounds=1)
    state = alg.step(prob, alg.init(prob, np.zeros(2), np.random.default_rng(0)))
    acc = state.ledger
    assert acc.sensitivity == pytest.approx(2 * 1.0 / 20)
    exact = _gaussian_exact_epsilon(acc.noise_multiplier, DELTA)
    certified = alg.privacy(state)["epsilon_certified"]
    assert exact <= certified + 1e-9 <= 1.0 + 1e-9
    assert exact >= 0.97


def test_add_remove_poisson_uses_half_the_sensitivity():
    prob = _toy()
    alg = DPSGD(step_size=0.1, batch_size=20, clip=1.0, sampling="poisson",
                budget=PrivacyBudget(1.0, DELTA, neighboring="add_remove_one",
                                      public_sizes=PUBLIC_SIZE), n_rounds=5)
    state = alg.init(prob, np.zeros(2), 0)
    assert state.ledger.sensitivity == pytest.approx(1.0 / 20)
    assert alg.privacy(alg.step(prob, state))["neighboring"] == "add_remove_one"


def _audit_scores(monkeypatch=None, factor=1.0, trials=3000, eps=1.5):
    """One full-batch step at x = 0 on D0 (all records (1, +1)) and D1 (record 0 is the canary
    (1, -1)): the logistic gradients are -1/2 and +1/2, clipped at C = 1/2, so the replace-one
    sensitivity 2C/B the account assumes is attained; the statistic is the released x_1."""
    if factor != 1.0:
        # the run's release draws `factor` times smaller noise than the account records
        real = centralized_module.GaussianNoise
        monkeypatch.setattr(centralized_module, "GaussianNoise",
                            lambda sigma: real(sigma / factor))
    q = 4
    scores = []
    certified = None
    for canary in (False, True):
        labels = np.ones((1, q))
        if canary:
            labels[0, 0] = -1.0
        prob = LogisticRegression(np.ones((1, q, 1)), labels)
        alg = DPSGD(step_size=1.0, batch_size=q, clip=0.5, sampling="without_replacement",
                    budget=PrivacyBudget(eps, DELTA), n_rounds=1)
        state0 = alg.init(prob, np.zeros(1), np.random.default_rng(0))
        rngs = np.random.default_rng(1 + canary).spawn(trials)
        out = np.empty(trials)
        for i, rng in enumerate(rngs):
            st = dataclasses.replace(state0, rng=rng, ledger=copy.copy(state0.ledger))
            st = alg.step(prob, st)
            out[i] = st.x[0]
            certified = alg.privacy(st)["epsilon_certified"]
        scores.append(out)
    return scores, certified


def test_audit_stays_below_certified_and_catches_four_times_smaller_noise(monkeypatch):
    (s0, s1), eps = _audit_scores()
    assert 0.9 * 1.5 <= eps <= 1.5
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    (s0, s1), eps_b = _audit_scores(monkeypatch, factor=4.0)
    assert eps_b == eps  # the account is unchanged: only the noise shrank
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


def test_non_private_run_separates_a_separable_toy():
    prob = _toy()
    res = DPSGD(step_size=0.5, batch_size=16, clip=None, momentum=0.5).run(
        prob, 200, rng=0, x0=np.zeros(2), eval_every=200, with_reference=False)
    # the one report shape: a run without noise certifies nothing
    assert res.privacy["private"] is False and res.privacy["epsilon_certified"] == np.inf
    assert prob.accuracy(res.x) == 1.0
    assert res.history[-1]["cost"] < 0.1 * res.history[0]["cost"]


def test_private_run_learns_the_toy_at_moderate_budget():
    prob = _toy(n_agents=10, q=200)
    res = DPSGD(step_size=0.5, batch_size=100, clip=1.0, budget=PrivacyBudget(2.0, DELTA),
                n_rounds=100).run(prob, 100, rng=1, x0=np.zeros(2), eval_every=100,
                                  with_reference=False)
    assert res.privacy["epsilon_certified"] <= 2.0
    assert prob.accuracy(res.x) >= 0.99


def test_softmax_closed_form_clipped_sum_is_used_and_matches():
    rng = np.random.default_rng(0)
    prob = SoftmaxRegression(rng.normal(size=(3, 20, 5)), rng.integers(0, 4, (3, 20)),
                             n_classes=4, feature_bound=1.0)
    res = DPSGD(step_size=0.5, batch_size=10, clip=0.7, budget=PrivacyBudget(4.0, 1e-4),
                n_rounds=10).run(prob, 10, rng=0, x0=np.zeros(prob.n_params), eval_every=10,
                                 with_reference=False)
    assert res.privacy["epsilon_certified"] <= 4.0
    assert np.all(np.isfinite(res.x))


def test_secure_mode_runs_with_rdp_and_is_not_replayable():
    prob = _toy()
    alg = DPSGD(step_size=0.1, batch_size=20, clip=1.0, sampling="poisson",
                budget=PrivacyBudget(2.0, DELTA, neighboring="add_remove_one",
                                      public_sizes=PUBLIC_SIZE), n_rounds=5)
    res = alg.run(prob, 5, rng=SecureRandom(), x0=np.zeros(2), eval_every=5,
                  with_reference=False)
    rep = res.privacy
    assert rep["secure"] and not rep["replayable_from_seed"]
    assert "RDP" in rep["accountant"]
    assert 0.9 * 2.0 <= rep["epsilon_certified"] <= 2.0


def test_bad_arguments_are_refused_with_the_argument_named():
    with pytest.raises(TypeError, match="epsilon"):
        DPSGD(step_size=0.1, batch_size=4, clip=1.0, epsilon=1.0)
    with pytest.raises(ValueError, match="clip"):
        DPSGD(step_size=0.1, batch_size=4, budget=PrivacyBudget(1.0, DELTA), n_rounds=3)
    with pytest.raises(ValueError, match="n_rounds"):
        DPSGD(step_size=0.1, batch_size=4, clip=1.0, budget=PrivacyBudget(1.0, DELTA))
    with pytest.raises(ValueError, match="replace_one"):
        DPSGD(step_size=0.1, batch_size=4, clip=1.0, sampling="without_replacement",
              budget=PrivacyBudget(1.0, DELTA, neighboring="add_remove_one"), n_rounds=3)
    with pytest.raises(ValueError, match="sampling"):
        DPSGD(step_size=0.1, batch_size=4, sampling="shuffle")
    with pytest.raises(ValueError, match="batch_size"):
        DPSGD(step_size=0.1, batch_size=0)
    with pytest.raises(ValueError, match="momentum"):
        DPSGD(step_size=0.1, batch_size=4, momentum=1.0)
    for bad in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="noise_multiplier"):
            DPSGD(step_size=0.1, batch_size=4, clip=1.0, noise_multiplier=bad)
    prob = _toy(n_agents=1, q=10)
    with pytest.raises(ValueError, match="batch_size"):
        DPSGD(step_size=0.1, batch_size=11, clip=1.0, budget=PrivacyBudget(1.0, 1e-3),
              n_rounds=2).init(prob, np.zeros(2), 0)
    with pytest.raises(ValueError, match="delta"):  # delta >= 1/N protects nothing
        DPSGD(step_size=0.1, batch_size=5, clip=1.0, budget=PrivacyBudget(1.0, 0.2),
              n_rounds=2).init(prob, np.zeros(2), 0)


def test_stepping_past_the_planned_run_raises():
    prob = _toy()
    alg = DPSGD(step_size=0.1, batch_size=20, clip=1.0, budget=PrivacyBudget(1.0, DELTA),
                n_rounds=2)
    state = alg.init(prob, np.zeros(2), 0)
    state = alg.step(prob, alg.step(prob, state))
    with pytest.raises(RuntimeError, match="n_rounds=2"):
        alg.step(prob, state)


def test_pooled_batches_are_the_records_np_nonzero_picks_and_follow_replaced_data():
    """The pooled index is built once per problem; a step draws the same records as indexing
    with ``np.nonzero(problem.mask)`` (agent-major), padding excluded, and a problem whose
    data are replaced gets a new pool."""
    rng = np.random.default_rng(3)
    counts = np.array([5, 2, 7])
    feats = rng.normal(size=(3, 7, 2))
    labels = rng.choice([-1.0, 1.0], size=(3, 7))
    problem = LogisticRegression(feats, labels, counts=counts)
    pool = centralized_module._pooled(problem)
    agent, row = np.nonzero(problem.mask)
    assert pool.index.size == counts.sum()
    for key, value in problem.data.items():
        np.testing.assert_array_equal(pool.flat[key][pool.index], value[agent, row])
    assert centralized_module._pooled(problem) is pool
    problem.data = {k: v.copy() for k, v in problem.data.items()}
    assert centralized_module._pooled(problem) is not pool


@pytest.mark.parametrize("model", ["logistic", "softmax"])
def test_pooled_row_norms_give_the_same_run_as_norms_per_batch(model):
    """The closed-form clipped sum takes the rows' squared norms from the pool (computed once
    per problem) instead of once per batch: the same iterates, bit for bit, as a run whose
    problem computes them per batch (the generic gathering path, with the agent axis)."""
    rng = np.random.default_rng(2)
    counts = np.array([30, 12, 25])
    feats = rng.normal(size=(3, 30, 4))

    def problem():
        if model == "logistic":
            return LogisticRegression(feats, rng.choice([-1.0, 1.0], size=(3, 30)),
                                      counts=counts)
        return SoftmaxRegression(feats, rng.integers(0, 3, (3, 30)), 3, counts=counts)

    fast, slow = problem(), problem()
    slow.data = {k: v.copy() for k, v in fast.data.items()}
    slow.takes_feature_sq_norms = False
    alg = DPSGD(step_size=0.3, batch_size=15, clip=0.5, momentum=0.5, noise_multiplier=1.0)
    runs = []
    for prob in (fast, slow):
        state = alg.init(prob, np.zeros(prob.manifold.dim), 4)
        for _ in range(12):
            state = alg.step(prob, state)
        runs.append(state)
    assert centralized_module._pooled(fast).sq_norms is not None
    assert centralized_module._pooled(slow).sq_norms is None
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    np.testing.assert_array_equal(runs[0].m, runs[1].m)
    assert runs[0].batch_sizes == runs[1].batch_sizes
