"""Private baselines: sensitivities, calibration, exactness without noise, utility, validation."""

import math

import numpy as np
import pytest

from rfed.algorithms.baselines import AnalyzeGauss, LogEuclideanPrivateMean, NoisyPowerMethod
from rfed.algorithms.baselines.pca import sym_to_vec, vec_to_sym
from rfed.algorithms.baselines.spd_mean import spd_exp, spd_log
from rfed.datasets import make_pca_synthetic
from rfed.privacy import PrivacyBudget
from rfed.problems import SPDFrechetMean, SpherePCA


def _unit_rows(z):
    return z / np.linalg.norm(z, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def pca_problem():
    z = make_pca_synthetic(n_agents=8, n_per_agent=400, dim=10, eigengap=0.3, rng=0)
    return SpherePCA(_unit_rows(z))


def test_sym_coordinates_are_an_isometry():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 6, 6))
    a = a + np.swapaxes(a, -1, -2)
    v = sym_to_vec(a)
    assert v.shape == (5, 21)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), np.linalg.norm(a, axis=(-2, -1)))
    np.testing.assert_allclose(vec_to_sym(v, 6), a)


def test_pca_sensitivity_bounds_hold_for_worst_and_random_pairs():
    rng = np.random.default_rng(1)
    d, bound = 7, 1.3
    z = rng.standard_normal((20000, d))
    z *= bound * rng.random((20000, 1)) ** 0.2 / np.linalg.norm(z, axis=1, keepdims=True)
    w = np.roll(z, 1, axis=0)
    # worst cases: orthogonal records of norm B, and a record against zero (add/remove)
    e = np.eye(d) * bound
    z = np.vstack([z, e[:1], e[:1]])
    w = np.vstack([w, e[1:2], np.zeros((1, d))])
    diff = np.einsum("ni,nj->nij", z, z) - np.einsum("ni,nj->nij", w, w)
    frob = np.linalg.norm(sym_to_vec(diff), axis=-1)
    op = np.abs(np.linalg.eigvalsh(diff)).max(axis=-1)
    ag_replace = AnalyzeGauss(PrivacyBudget(1.0), norm_bound=bound).sensitivity()
    npm = NoisyPowerMethod(PrivacyBudget(1.0), norm_bound=bound).sensitivity()
    assert frob.max() <= ag_replace * (1 + 1e-12)
    assert frob.max() >= ag_replace * (1 - 1e-9)  # attained by orthogonal records: tight
    assert op.max() <= npm * (1 + 1e-12)


@pytest.mark.parametrize("cls", [AnalyzeGauss, NoisyPowerMethod])
def test_tiny_noise_recovers_the_closed_form_eigenvector(cls, pca_problem):
    kwargs = {"n_iters": 60} if cls is NoisyPowerMethod else {}
    res = cls(PrivacyBudget(2000.0, delta=1e-6), **kwargs).run(pca_problem, rng=3)
    ref = pca_problem.reference_point()
    assert abs(abs(res.x @ ref) - 1.0) < 1e-4
    assert res.cost == pytest.approx(pca_problem.reference_cost(), abs=1e-5)


@pytest.mark.parametrize("cls", [AnalyzeGauss, NoisyPowerMethod])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_certified_budget_is_met_and_not_wasted(cls, epsilon, pca_problem):
    res = cls(PrivacyBudget(epsilon, delta=1e-6)).run(pca_problem, rng=4)
    p = res.privacy
    assert p["target_epsilon"] == epsilon
    assert 0.9 * epsilon <= p["epsilon_certified"] <= epsilon
    assert p["delta"] == 1e-6 and p["level"] == "record" and "dp-accounting" in p["accountant"]
    assert res.info["sigma"] == pytest.approx(
        p["noise_multiplier"] * cls(PrivacyBudget(epsilon)).sensitivity())


def test_released_noise_has_the_calibrated_scale(pca_problem, monkeypatch):
    # intercept the mechanism: the residual of every release is Gaussian with the reported sigma
    import rfed.algorithms.baselines.pca as pca_module

    original = pca_module.gaussian_release
    residuals, sigmas = [], []

    def spy(value, sigma, rng):
        out = original(value, sigma, rng)
        residuals.append(out - value)
        sigmas.append(float(np.max(sigma)))
        return out

    monkeypatch.setattr(pca_module, "gaussian_release", spy)
    res = AnalyzeGauss(PrivacyBudget(1.0, delta=1e-6)).run(pca_problem, rng=7)
    r = np.concatenate([x.ravel() for x in residuals])
    # one release per agent (Analyze Gauss releases each agent's matrix once)
    assert sigmas == [res.info["sigma"]] * pca_problem.n_agents
    # sample variance of n normals: within 6 standard errors of sigma^2
    n = r.size
    assert abs(r.var() / res.info["sigma"] ** 2 - 1.0) < 6.0 * math.sqrt(2.0 / n)
    assert abs(r.mean()) < 6.0 * res.info["sigma"] / math.sqrt(n)


def test_private_pca_improves_on_the_random_start_at_epsilon_8(pca_problem):
    start = np.full(10, 1 / math.sqrt(10))
    f_start, f_opt = pca_problem.cost(start), pca_problem.reference_cost()
    for cls in (AnalyzeGauss, NoisyPowerMethod):
        costs = [cls(PrivacyBudget(8.0)).run(pca_problem, rng=s).cost for s in range(5)]
        gap_closed = (f_start - np.mean(costs)) / (f_start - f_opt)
        assert gap_closed > 0.5, (cls.__name__, gap_closed)


def test_log_euclidean_mean_is_exact_for_commuting_matrices_without_noise():
    rng = np.random.default_rng(5)
    diag = np.exp(rng.uniform(-1, 1, size=(4, 30, 3)))
    pts = np.einsum("...i,ij->...ij", diag, np.eye(3))
    problem = SPDFrechetMean(pts)
    res = LogEuclideanPrivateMean(PrivacyBudget(5000.0), log_norm_bound=2.0).run(problem, rng=1)
    # commuting matrices: the affine-invariant Frechet mean is exp(mean log); the release's error
    # in the log chart is the average of 4 agents' Gaussian noise (6 coordinates, std sigma each)
    expected_log = np.diag(np.log(diag).reshape(-1, 3).mean(axis=0))
    err = np.linalg.norm(spd_log(res.x) - expected_log)
    assert err <= 6.0 * res.info["sigma_max"] * math.sqrt(6 / 4)
    assert err > 0.0  # noise was added
    assert res.info["n_clipped"] == 0


def test_log_euclidean_clips_to_the_public_bound_and_reports_it():
    pts = np.broadcast_to(np.diag([math.e**3, 1.0]), (2, 20, 2, 2)).copy()
    res = LogEuclideanPrivateMean(PrivacyBudget(1e4), log_norm_bound=1.0).run(
        SPDFrechetMean(pts), rng=0)
    assert res.info["n_clipped"] == 40
    np.testing.assert_allclose(np.linalg.norm(spd_log(res.x)), 1.0, rtol=1e-2)
    assert any("clipped" in a for a in res.privacy["assumptions"])


def test_spd_log_and_exp_are_inverse_and_refuse_non_spd():
    rng = np.random.default_rng(2)
    s = rng.standard_normal((4, 3, 3))
    s = s + np.swapaxes(s, -1, -2)
    np.testing.assert_allclose(spd_log(spd_exp(s)), s, atol=1e-10)
    with pytest.raises(ValueError, match="positive definite"):
        spd_log(-np.eye(3))


def test_bad_arguments_are_named(pca_problem):
    with pytest.raises(TypeError, match="'budget'"):
        AnalyzeGauss({"epsilon": 1.0})
    with pytest.raises(ValueError, match="'norm_bound'"):
        AnalyzeGauss(PrivacyBudget(1.0), norm_bound=-1)
    with pytest.raises(ValueError, match="'n_iters'"):
        NoisyPowerMethod(PrivacyBudget(1.0), n_iters=0)
    with pytest.raises(ValueError, match="'log_norm_bound'"):
        LogEuclideanPrivateMean(PrivacyBudget(1.0), log_norm_bound=math.inf)
    with pytest.raises(TypeError, match="'problem'"):
        AnalyzeGauss(PrivacyBudget(1.0)).run(object(), rng=0)
    with pytest.raises(ValueError, match="1/N"):
        AnalyzeGauss(PrivacyBudget(1.0, delta=0.01)).run(pca_problem, rng=0)


def _audit_analyze_gauss(monkeypatch, noise_factor: float, n_trials: int = 3000):
    """Audit Analyze Gauss's release: agents are the trials (each agent's release is separate).

    Every agent holds one common record and a canary: ``e_1`` on D0, ``e_2`` on D1 (norms 1,
    orthogonal: the worst case of the replace-one sensitivity). The statistic is the released
    matrix projected on ``e_2 e_2^T - e_1 e_1^T``.
    """
    import rfed.algorithms.baselines.pca as pca_module
    from rfed.privacy import epsilon_lower_bound

    original = pca_module.gaussian_release
    captured = []

    def spy(value, sigma, rng):
        out = original(value, sigma / noise_factor, rng)   # the broken variant under-noises
        captured.append(out - value)
        return out

    monkeypatch.setattr(pca_module, "gaussian_release", spy)
    budget = PrivacyBudget(1.5, delta=1e-5)
    d = 4
    common = np.zeros(d)
    common[3] = 0.5
    direction = sym_to_vec(np.diag([-1.0, 1.0, 0.0, 0.0]))
    scores, certified = [], None
    for canary in (0, 1):
        z = np.zeros((n_trials, 2, d))
        z[:, 0] = common
        z[:, 1, canary] = 1.0
        first = len(captured)
        res = AnalyzeGauss(budget).run(SpherePCA(z), rng=10 + canary)
        local = sym_to_vec(np.einsum("anj,ank->ajk", z, z))
        released = local + np.stack(captured[first:])   # one release per agent (trial)
        scores.append(released @ direction / np.linalg.norm(direction))
        certified = res.privacy["epsilon_certified"]
    return epsilon_lower_bound(scores[0], scores[1], 1e-5), certified


def test_audit_of_analyze_gauss_stays_below_the_certified_epsilon(monkeypatch):
    result, certified = _audit_analyze_gauss(monkeypatch, noise_factor=1.0)
    assert 0.9 * 1.5 <= certified <= 1.5
    assert result.epsilon_lower <= certified


def test_audit_catches_analyze_gauss_with_four_times_less_noise(monkeypatch):
    result, certified = _audit_analyze_gauss(monkeypatch, noise_factor=4.0)
    assert result.epsilon_lower > certified
