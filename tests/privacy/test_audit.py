"""rfed.privacy.audit: Clopper-Pearson bounds, the epsilon lower bound, canaries, named configs."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from rfed.experiments.audits import audit_main
from rfed.privacy.audit import (
    AuditResult,
    audit,
    canary_gradient_direction,
    clopper_pearson,
    epsilon_lower_bound,
    gaussian_pair_delta,
    gaussian_pair_epsilon,
    replace_record,
)
from rfed.problems.pca import SpherePCA


def analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon of the Gaussian mechanism with sensitivity/sigma = mu (Balle-Wang 2018, Thm 8).

    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu), decreasing in eps.
    """

    def excess(eps):
        return (stats.norm.cdf(mu / 2 - eps / mu)
                - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu) - delta)

    return optimize.brentq(excess, 0.0, 100.0, xtol=1e-12)


def _gaussian_trials(sigma):
    def run_trials(neighbour, n, rng):
        return neighbour + sigma * rng.standard_normal(n)

    return run_trials


# ---------------------------------------------------------------------- Clopper-Pearson
@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (17, 1000), (500, 1000), (1, 25000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_clopper_pearson_matches_scipy_exact_interval(k, n, confidence):
    # scipy's two-sided exact interval at level 2c-1 has one-sided bounds at level c each
    lo, hi = clopper_pearson(k, n, confidence)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=2 * confidence - 1, method="exact")
    assert lo == pytest.approx(ci.low, rel=1e-6, abs=1e-15)  # scipy root-finds
    assert hi == pytest.approx(ci.high, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("k,n", [(0, 40), (7, 40), (123, 5000)])
def test_clopper_pearson_defining_property(k, n):
    # the upper bound p solves P(Bin(n, p) <= k) = 1 - c; the lower solves P(Bin(n, p) >= k) = 1 - c
    c = 0.95
    lo, hi = clopper_pearson(k, n, c)
    assert stats.binom.cdf(k, n, hi) == pytest.approx(1 - c, rel=1e-7)
    if k > 0:
        assert stats.binom.sf(k - 1, n, lo) == pytest.approx(1 - c, rel=1e-7)


def test_clopper_pearson_bad_input():
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(11, 10, 0.95)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 10, 1.0)
    with pytest.raises(TypeError, match="integers"):
        clopper_pearson(1.5, 10, 0.9)


# ---------------------------------------------------------------------- lower bound
def test_fixed_threshold_formula_by_hand():
    s0 = np.array([0.0] * 90 + [2.0] * 10)  # 10 false positives at threshold 1
    s1 = np.array([0.0] * 5 + [2.0] * 95)  # 5 false negatives
    c, delta = 0.9, 1e-3
    res = epsilon_lower_bound(s0, s1, delta, confidence=c, threshold=1.0)
    per = 1 - (1 - c) / 2
    fpr_hi = stats.beta.ppf(per, 11, 90)
    fnr_hi = stats.beta.ppf(per, 6, 95)
    expect = max(math.log((1 - delta - fnr_hi) / fpr_hi), math.log((1 - delta - fpr_hi) / fnr_hi))
    assert res.epsilon_lower == pytest.approx(expect, rel=1e-9)
    assert (res.fpr, res.fnr, res.n_trials, res.n_heldout) == (0.1, 0.05, 100, 0)
    assert isinstance(res, AuditResult) and res.to_dict()["epsilon_lower"] == res.epsilon_lower


def test_identical_distributions_give_zero_or_tiny():
    rng = np.random.default_rng(1)
    res = epsilon_lower_bound(rng.standard_normal(4000), rng.standard_normal(4000), 1e-5)
    assert res.epsilon_lower == 0.0


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 4.0])
def test_gaussian_lower_bound_below_exact_epsilon(sigma):
    delta = 1e-5
    exact = analytic_gaussian_epsilon(1.0 / sigma, delta)
    for seed in range(3):
        res = audit(_gaussian_trials(sigma), 40000, delta, rng=np.random.default_rng(seed))
        assert 0.0 <= res.epsilon_lower < exact
    # and the test has power: the bound is a sizeable part of the truth
    assert res.epsilon_lower > 0.25 * exact


@pytest.mark.parametrize("claimed_sigma", [2.0, 4.0])
def test_audit_catches_four_times_smaller_noise(claimed_sigma):
    delta = 1e-5
    claimed = analytic_gaussian_epsilon(1.0 / claimed_sigma, delta)
    res = audit(_gaussian_trials(claimed_sigma / 4), 40000, delta, rng=np.random.default_rng(7))
    assert res.epsilon_lower > claimed
    assert res.epsilon_lower < analytic_gaussian_epsilon(4.0 / claimed_sigma, delta)


def test_direction_is_chosen_on_heldout_trials():
    # D1 shifts the score DOWN: the test must pick direction -1
    def run_trials(neighbour, n, rng):
        return -2.0 * neighbour + rng.standard_normal(n)

    res = audit(run_trials, 20000, 1e-5, rng=np.random.default_rng(3))
    assert res.direction == -1 and res.epsilon_lower > 1.0
    assert res.n_heldout == 10000 and res.n_trials == 10000


def test_audit_validates_runner_output_and_arguments():
    with pytest.raises(ValueError, match="returned shape"):
        audit(lambda b, n, rng: np.zeros(n + 1), 100, 1e-5, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        audit(_gaussian_trials(1.0), 100, 1e-5, rng=None)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(np.zeros(10), np.ones(10), 1.5)
    with pytest.raises(ValueError, match="scores_1"):
        epsilon_lower_bound(np.zeros(10), np.array([0.0, np.nan, 1.0, 2.0]), 1e-5)


# ---------------------------------------------------------------------- exact pair epsilon
def _integrated_hockey_stick(eps, shift, s0, s1, dim):
    """``E_P[(1 - e^(eps - L))_+]`` for P = N(0, s0^2 I_d), Q = N(shift e_1, s1^2 I_d).

    Under P write ``y = s0 (z e_1 + w)``: ``z`` standard normal along the shift, ``r = |w|^2``
    chi-square with ``k = d - 1`` degrees of freedom. The privacy loss
    ``L = d log(s1/s0) - (z^2 + r)/2 + ((s0 z - shift)^2 + s0^2 r) / (2 s1^2) = A(z) + B r``
    is linear in ``r``; for each ``z`` the integral over ``r`` is a central chi-square
    probability minus ``e^(eps - A)`` times ``c^(-k/2)`` times one at the rescaled threshold
    (``e^(-B r)`` times the chi-square density is ``c^(1 - k/2)`` times it at ``c r``,
    ``c = 1 + 2B``); the integral over ``z`` is numerical (scipy's adaptive quadrature). An
    independent route from :func:`gaussian_pair_delta`'s noncentral chi-square in ``d``
    dimensions."""
    from scipy import integrate

    k = dim - 1
    b = (s0 * s0 / (s1 * s1) - 1.0) / 2
    c = 1.0 + 2 * b

    def inner(z):
        a = dim * math.log(s1 / s0) - z * z / 2 + (s0 * z - shift) ** 2 / (2 * s1 * s1)
        if k == 0 or b == 0:
            return -math.expm1(eps - a) if a > eps else 0.0
        r_star = (eps - a) / b
        if b > 0:     # L > eps  <=>  r > r*
            r_star = max(r_star, 0.0)
            p_r, p_q = stats.chi2.sf(r_star, k), stats.chi2.sf(c * r_star, k)
        else:         # L > eps  <=>  r < r*
            if r_star <= 0:
                return 0.0
            p_r, p_q = stats.chi2.cdf(r_star, k), stats.chi2.cdf(c * r_star, k)
        return p_r - math.exp(eps - a - (k / 2) * math.log(c)) * p_q

    val, _ = integrate.quad(lambda z: inner(z) * stats.norm.pdf(z), -40.0, 40.0,
                            points=[0.0], limit=400, epsabs=1e-13, epsrel=1e-10)
    return max(val, 0.0)


@pytest.mark.parametrize("shift,s0,s1,dim", [
    (0.25, 0.933, 0.746, 99),   # the reviewer's add/remove pair (noise from the private N)
    (0.25, 0.9, 0.9, 99),       # equal noise: the Gaussian mechanism's profile
    (1.0, 0.7, 0.9, 5),
    (0.0, 1.0, 1.1, 3),
])
def test_gaussian_pair_delta_matches_numerical_integration(shift, s0, s1, dim):
    for eps in (0.0, 0.5, 2.0, 8.0):
        integrated = max(_integrated_hockey_stick(eps, shift, s0, s1, dim),
                         _integrated_hockey_stick(eps, shift, s1, s0, dim))
        assert gaussian_pair_delta(eps, shift, s0, s1, dim) == pytest.approx(
            integrated, rel=1e-6, abs=1e-9)


def test_gaussian_pair_epsilon_is_the_gaussian_mechanism_at_equal_noise():
    for mu in (0.3, 1.0, 3.0):
        assert gaussian_pair_epsilon(mu, 1.0, 1.0, 7, 1e-5) == pytest.approx(
            analytic_gaussian_epsilon(mu, 1e-5), rel=1e-7)
    # unequal noise: positive epsilon even without a shift, growing with the dimension
    assert 0 < gaussian_pair_epsilon(0.0, 1.0, 1.25, 10, 1e-5) < gaussian_pair_epsilon(
        0.0, 1.0, 1.25, 99, 1e-5)
    with pytest.raises(ValueError, match="sigma_0 > 0"):
        gaussian_pair_delta(1.0, 0.1, 0.0, 1.0, 3)


# ---------------------------------------------------------------------- canaries
def test_replace_record_copies_and_checks_keys():
    data = {"z": np.arange(24.0).reshape(2, 3, 4), "y": np.zeros((2, 3))}
    out = replace_record(data, 1, 2, {"z": -np.ones(4), "y": 5.0})
    assert np.all(out["z"][1, 2] == -1) and out["y"][1, 2] == 5.0
    assert data["z"][1, 2, 0] == 20.0  # input untouched
    changed = out["z"] != data["z"]
    assert changed.sum() == 4
    with pytest.raises(ValueError, match="missing"):
        replace_record(data, 0, 0, {"z": np.zeros(4)})
    with pytest.raises(ValueError, match="index"):
        replace_record(data, 0, 3, {"z": np.zeros(4), "y": 0.0})
    with pytest.raises(ValueError, match="shape"):
        replace_record(data, 0, 0, {"z": np.zeros(3), "y": 0.0})


def test_opposite_pca_canaries_reach_full_replace_one_gap():
    z = np.random.default_rng(0).standard_normal((1, 6, 4))
    problem = SpherePCA(z)
    x = np.array([1.0, 0, 0, 0])
    u = np.array([0, 0, 1.0, 0])
    tau = 0.5
    # grad f(x; z) = -2 (z.x) (z - (z.x) x): +2u for z = x - u, -2u for z = x + u, both clipped
    recs = [{"z": w, "sq": float(w @ w)} for w in (x - u, x + u)]
    direction, gap = canary_gradient_direction(problem, x, recs[0], recs[1], tau)
    assert gap == pytest.approx(2 * tau)
    assert np.allclose(direction, -u)  # from +tau u (D0) to -tau u (D1)
    with pytest.raises(ValueError, match="same clipped gradient"):
        canary_gradient_direction(problem, x, recs[0], recs[0], tau)


# ---------------------------------------------------------------------- named configurations
def test_audit_main_dp_rsgd_onestep(capsys):
    assert audit_main(["dp-rsgd-onestep", "--trials", "40000", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "certified epsilon" in out and "audit lower bound" in out and "consistent" in out
    assert audit_main(["dp-rsgd-onestep", "--trials", "40000", "--noise-factor", "4"]) == 1
    assert "REFUTED" in capsys.readouterr().out


def test_audit_main_gaussian_and_bad_arguments(capsys):
    assert audit_main(["gaussian", "--trials", "20000"]) == 0
    assert audit_main(["gaussian", "--sigma", "-1"]) == 2
    assert audit_main(["no-such-config"]) == 2


@pytest.mark.parametrize("option, value", [
    ("--delta", "2"), ("--delta", "0"), ("--confidence", "1.5"), ("--confidence", "nan"),
    ("--sigma", "-1"), ("--sigma", "inf"), ("--noise-factor", "0"), ("--trials", "3"),
    ("--seed", "-1"),
])
def test_audit_main_refuses_each_bad_option_in_one_line_naming_it(option, value, capsys):
    # status 2 before anything runs (a traceback's status 1 would read as "refuted")
    assert audit_main(["dp-rsgd-onestep", option, value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rfed audit: error: {option} ")
    assert value in lines[0]
