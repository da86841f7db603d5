"""Client-level DP on the manifold: sensitivity enforced, calibration meets the budget (against
the exact Gaussian-composition curve), an empirical audit at client level, and PriRFed with it."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

import rfed.algorithms.federated.client_dp as client_dp_module
from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.algorithms.federated.client_dp import ClientLevelDP, clip_updates, clipped_update_mean
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import Euclidean, Sphere
from rfed.privacy import PrivacyBudget
from rfed.privacy.audit import audit
from rfed.privacy.ledger import PrivacyLedger
from rfed.problems import SpherePCA


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon at delta of a Gaussian mechanism of sensitivity / std ``mu`` (Balle and
    Wang 2018): delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    def gap(eps):
        return (stats.norm.cdf(-eps / mu + mu / 2)
                - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta)
    return optimize.brentq(gap, 0.0, 100.0, xtol=1e-12)


def test_updates_are_clipped_in_the_riemannian_norm_and_the_mean_moves_by_at_most_2c_over_s():
    man = Sphere(4)
    rng = np.random.default_rng(0)
    x = man.random_point(rng)
    pts = man.random_point(rng, 6)
    c = 0.3
    u, clipped = clip_updates(man, x, pts, c)
    norms = man.norm(x, u)
    assert np.all(norms <= c * (1 + 1e-12))
    raw = man.norm(x, man.log(x, pts))
    np.testing.assert_array_equal(clipped, raw > c)
    np.testing.assert_allclose(norms, np.minimum(raw, c), rtol=1e-12)
    # replace client 0 by the point opposite (in T_x M) to its clipped update: the worst case
    mean0 = clipped_update_mean(man, x, pts, c, 6)
    other = pts.copy()
    other[0] = man.exp(x, -u[0] / norms[0] * 1.0)
    mean1 = clipped_update_mean(man, x, other, c, 6)
    gap = man.norm(x, mean1 - mean0)
    assert gap <= 2 * c / 6 * (1 + 1e-12)
    assert gap > 0.99 * 2 * c / 6  # attained (both updates have norm >= c)
    with pytest.raises(ValueError, match="'clip' must be a finite float > 0"):
        clip_updates(man, x, pts, 0.0)
    with pytest.raises(ValueError, match="6 selected clients"):
        clipped_update_mean(man, x, pts[:5], c, 6)


@pytest.mark.parametrize("rounds", [1, 20])
def test_calibration_meets_the_budget_against_the_exact_gaussian_curve(rounds):
    dp = ClientLevelDP(clip=1.0, budget=PrivacyBudget(1.0, 1e-5))
    z = dp.resolve(n_agents=50, n_sampled=50, n_rounds=rounds)
    # T Gaussians of multiplier z compose exactly to one of multiplier z / sqrt(T)
    exact = _exact_gaussian_epsilon(math.sqrt(rounds) / z, 1e-5)
    assert exact <= 1.0
    # the tighter of RDP and PLD (PLD here, within its discretization of the exact curve):
    # no noise wasted
    assert exact > 0.98
    # amplification by a hidden selection of 5 of 50 needs less noise
    hidden = ClientLevelDP(clip=1.0, budget=PrivacyBudget(1.0, 1e-5), hidden_selection=True)
    assert hidden.resolve(50, 5, rounds) < 0.6 * dp.resolve(50, 5, rounds)


def test_client_level_calibration_does_not_waste_noise_on_rdp_looseness():
    """eps 2, one round: RDP alone asks z = 2.15 (exact epsilon 1.84); the tighter accountant
    (PLD, certified) asks z ~ 1.995, whose exact epsilon is just below 2."""
    tight = ClientLevelDP(clip=1.0, budget=PrivacyBudget(2.0, 1e-5)).resolve(10, 3, 1)
    rdp = ClientLevelDP(clip=1.0, budget=PrivacyBudget(2.0, 1e-5, method="rdp")).resolve(
        10, 3, 1)
    assert rdp == pytest.approx(2.150, abs=2e-3)
    assert _exact_gaussian_epsilon(1 / rdp, 1e-5) == pytest.approx(1.838, abs=2e-3)
    assert tight == pytest.approx(1.995, abs=3e-3) and tight < 0.93 * rdp
    assert 0.995 * 2.0 <= _exact_gaussian_epsilon(1 / tight, 1e-5) <= 2.0
    # secure mode: RDP, the accountant of discrete Gaussian releases
    assert ClientLevelDP(clip=1.0, budget=PrivacyBudget(2.0, 1e-5)).resolve(
        10, 3, 1, secure=True) == rdp


def test_prirfed_with_client_level_dp_stays_on_the_sphere_and_meets_the_budget():
    prob = SpherePCA(make_pca_synthetic(10, 30, 6, 0.3, 2))
    alg = PriRFed(DPRSGD(steps=2, batch_size=0.5), n_sampled=4, step_size=0.1,
                  client_dp=ClientLevelDP(clip=0.2, budget=PrivacyBudget(2.0, 1e-4)),
                  n_rounds=8)
    res = alg.run(prob, 8, rng=3, eval_every=8)
    assert abs(np.linalg.norm(res.x) - 1.0) < 1e-12
    rep = res.privacy["client_level"]
    assert rep["level"] == "client" and rep["epsilon_certified"] <= 2.0
    assert not rep["hidden_selection"]
    assert any("no amplification" in a for a in rep["assumptions"])
    with pytest.raises(RuntimeError, match="n_rounds=8"):
        alg.step(prob, _advance(alg, prob, 8))
    # full participation for T rounds is the calibration's worst case: within 1% of the target
    full = PriRFed(DPRSGD(steps=1), n_sampled=None, step_size=0.1,
                   client_dp=ClientLevelDP(clip=0.2, budget=PrivacyBudget(2.0, 1e-4)),
                   n_rounds=3)
    eps = full.run(prob, 3, rng=1, eval_every=3).privacy["client_level"]["epsilon_certified"]
    assert 1.98 <= eps <= 2.0


def _advance(alg, prob, rounds):
    state = alg.init(prob, prob.manifold.random_point(0), np.random.default_rng(0))
    for _ in range(rounds):
        state = alg.step(prob, state)
    return state


# --------------------------------------------------------------------------- audit
C, DELTA, TRIALS = 1.0, 1e-5, 6000
E1 = np.array([1.0, 0.0])


def _runner():
    """Two clients on R^2 from x = 0; client 0's whole dataset differs between the neighbours,
    which moves its local point from +10 e_1 to -10 e_1 (clipped updates +C e_1 / -C e_1: the
    worst case of the sensitivity 2C/s); client 1 stays at 0."""
    dp = ClientLevelDP(clip=C, budget=PrivacyBudget(1.5, DELTA))
    z = dp.resolve(n_agents=2, n_sampled=2, n_rounds=1)
    man = Euclidean(2)

    def run_trials(neighbour, n, rng):
        pts = np.zeros((n, 2, 2))
        pts[:, 0] = (10.0 if neighbour == 0 else -10.0) * E1
        return dp.release(man, np.zeros(2), pts, 2, z, rng) @ E1

    ledger = PrivacyLedger(2, "rdp", "replace_one")
    dp.record(ledger, 0, np.arange(2), 2, z)
    return run_trials, dp.report(ledger, 1, z, 2)["epsilon_certified"]


def test_client_level_audit_stays_below_the_certified_epsilon():
    run_trials, certified = _runner()
    assert 1.45 < certified <= 1.5
    res = audit(run_trials, TRIALS, DELTA, rng=np.random.default_rng(1))
    assert res.epsilon_lower < certified, (res.epsilon_lower, certified)


def test_client_level_audit_catches_noise_four_times_smaller(monkeypatch):
    run_trials, certified = _runner()
    honest = client_dp_module.gaussian_mechanism

    def quarter_noise(manifold, x, value, sigma, rng):
        return honest(manifold, x, value, np.asarray(sigma) / 4.0, rng)

    monkeypatch.setattr(client_dp_module, "gaussian_mechanism", quarter_noise)
    res = audit(run_trials, TRIALS, DELTA, rng=np.random.default_rng(2))
    assert res.epsilon_lower > certified, (res.epsilon_lower, certified)


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match="exactly one of 'noise_multiplier' and 'budget'"):
        ClientLevelDP(clip=1.0)
    with pytest.raises(ValueError, match="replace_one"):
        ClientLevelDP(clip=1.0, budget=PrivacyBudget(1.0, 1e-5, neighboring="add_remove_one"))
    with pytest.raises(ValueError, match="aggregation='tangent'"):
        PriRFed(DPRSGD(), aggregation="karcher", client_dp=ClientLevelDP(1.0, 1.0))
    with pytest.raises(ValueError, match="'n_rounds' is required"):
        PriRFed(DPRSGD(), client_dp=ClientLevelDP(1.0, budget=PrivacyBudget(1.0, 1e-5)))
