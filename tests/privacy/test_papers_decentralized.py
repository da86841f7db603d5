"""DO-ADP, DPDL, DP-DDA and DP-DGT closed forms against hand-derived and spec-derived numbers."""

import math
import warnings

import numpy as np
import pytest

from rfed.privacy import papers
from rfed.privacy.accountants import compose_epsilon
from rfed.privacy.papers import PrivacyConditionWarning

# ---------------------------------------------------------------- DO-ADP (specs/000_doadp.md)


def test_doadp_theorem1_by_hand():
    eps, d0, t, q, p, k, d, g = 0.5, 1e-5, 10_000, 100, 0.8, 30, 100, 2.0
    expected = math.sqrt(160 * k * p**2 * t * math.log(1.25 / d0) * g**2 / (q**2 * d * eps**2))
    r = papers.doadp_sigma(eps, d0, t, q, p, k, d, g)
    assert r.sigma == pytest.approx(expected, rel=1e-14)
    assert r.sigma_floor == pytest.approx(math.sqrt(40 * 0.3 * math.log(1.25 / d0)) * g)
    # at equality in (7): eps_t^2 = q^2 eps^2 / (20 p^2 T) (proof step 2, eq. 8)
    assert r.eps_step**2 == pytest.approx(q**2 * eps**2 / (20 * p**2 * t), rel=1e-12)
    # implied delta >= eps / sqrt(5): vacuous (spec 3.4 / P5)
    assert r.delta >= eps / math.sqrt(5)


@pytest.mark.parametrize(
    ("p", "kd", "expected"),
    [(1.0, 1.0, 75.1), (0.8, 1.0, 60.0), (1.0, 0.3, 41.1), (0.8, 0.3, 32.9)],
)
def test_doadp_illustrative_magnitudes(p, kd, expected):
    # spec 000 section 3.7: LR on epsilon, q = 20000, T = 120000, eps = 0.01, G = 1, delta0 = 1e-5
    r = papers.doadp_sigma(0.01, 1e-5, 120_000, 20_000, p, int(kd * 2000), 2000, 1.0)
    assert r.sigma == pytest.approx(expected, abs=0.05)
    assert r.t_condition_holds


def test_doadp_warns_when_T_too_small_and_corrected_floors():
    # MNIST-like: q = 3000, eps = 1 needs T >= q^2 eps^2 / (4 p^2) = 2.25e6 (spec P6)
    with pytest.warns(PrivacyConditionWarning, match="T >= "):
        paper = papers.doadp_sigma(1.0, 1e-5, 1000, 3000, 1.0, 10, 100, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corr = papers.doadp_sigma(1.0, 1e-5, 1000, 3000, 1.0, 10, 100, 1.0, variant="corrected")
    assert not paper.t_condition_holds
    assert corr.sigma == pytest.approx(max(paper.sigma_paper, paper.sigma_floor))
    assert corr.sigma > paper.sigma
    assert corr.eps_step**2 <= 0.2 + 1e-12


def test_doadp_chain_and_inverse():
    args = dict(delta0=1e-5, iterations=50_000, n_local=500, p=0.8, k=30, d=100, grad_bound=1.0)
    sigma = papers.doadp_sigma_for_delta(0.5, 1e-6, **args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the chain's conditions hold here
        eps, delta = papers.doadp_epsilon(sigma, delta_hat=1e-6, **args)
    eps_t = 2 * math.sqrt(2 * 0.3 * math.log(1.25 / 1e-5)) / sigma
    # with the proof's linearization eps_t' = 2 p eps_t / q the chain meets 0.5 exactly
    s = 50_000 * (2 * 0.8 * eps_t / 500) ** 2
    assert math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / 1e-6)) + s == pytest.approx(0.5)
    # doadp_epsilon uses the exact Lemma 4, ln(1 + p (e^eps_t - 1) / q): tighter
    s_exact = 50_000 * math.log1p(0.8 * math.expm1(eps_t) / 500) ** 2
    expected = math.sqrt(2 * s_exact * math.log(math.e + math.sqrt(s_exact) / 1e-6)) + s_exact
    assert eps == pytest.approx(expected, rel=1e-12)
    assert eps < 0.5
    assert delta == pytest.approx(1 - (1 - 1e-6) * (1 - 0.8e-5) ** 50_000, rel=1e-12)
    _, refined = papers.doadp_epsilon(sigma, delta_hat=1e-6, per_step_delta="refined", **args)
    assert refined < delta


def test_heterogeneous_composition_by_hand():
    eps = np.array([0.1, 0.2, 0.05])
    s = float(np.sum(eps**2))
    e, d = papers.heterogeneous_composition(eps, [1e-6, 0.0, 2e-6], 1e-3)
    assert e == pytest.approx(math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / 1e-3)) + s)
    assert d == pytest.approx(1 - (1 - 1e-3) * (1 - 1e-6) * (1 - 2e-6))
    with pytest.warns(PrivacyConditionWarning, match="0.9"):
        papers.heterogeneous_composition(1.2, 0.0, 1e-3, count=3)


# ---------------------------------------------------------------- DPDL (specs/001_dpdl.md)


@pytest.mark.parametrize(
    ("n", "w", "alpha", "expected"),
    [(10, 0.1, 1.5, 3.745), (20, 0.05, 1.5, 3.410), (30, 1 / 30, 1.5, 3.278)],
)
def test_dpdl_prefactor_fully_connected(n, w, alpha, expected):
    # spec 001 section 3.2 illustration: prefactor of (23) with h = 1, fully connected w = 1/N;
    # sigma = prefactor * c2 * q * sqrt(T ln(1/delta)) / eps, so take q sqrt(T ln) / eps = 1
    t, delta = 1, math.exp(-1.0)
    sigma = papers.dpdl_sigma(1.0, delta, t, 1.0, alpha, n, w, w, n)
    assert sigma == pytest.approx(expected, abs=5e-4)


def test_dpdl_ring_and_three_versions():
    # ring, w = 1/3, alpha = 2, N = 10: prefactor 18.10 (spec 001 section 3.2)
    q, t, delta, eps = 0.0036, 1000, 1e-5, 1.0
    scale = q * math.sqrt(t * math.log(1 / delta)) / eps
    theorem = papers.dpdl_sigma(eps, delta, t, q, 2.0, 10, 1 / 3, 1 / 3, 3)
    assert theorem / scale == pytest.approx(18.10, abs=5e-3)
    # the appendix (L1032) and derivation (L1028) forms, by hand, with w_min = w_max = 1/3
    a_app = 2 / math.sqrt(1 / 3) + 15 * 2.0 * (2 / 3) / 8 + 2.0 / 3 * 4 * 10 / 2
    a_der = 2 / math.sqrt(1 / 3) + 15 * 2.0 * (2 / 3) * 10 / 8 + 2.0 / 3 * 4 * 10 / 2
    den = math.sqrt(3 / (1 / 3))
    app = papers.dpdl_sigma(eps, delta, t, q, 2.0, 10, 1 / 3, 1 / 3, 3, variant="appendix")
    der = papers.dpdl_sigma(eps, delta, t, q, 2.0, 10, 1 / 3, 1 / 3, 3, variant="derivation")
    assert app == pytest.approx(a_app * scale / den)
    assert der == pytest.approx(a_der * scale / den)
    # (23) drops (1 - w_min): it is the largest (conservative) of the three here
    assert theorem > der > app
    # c2 scales linearly
    assert papers.dpdl_sigma(eps, delta, t, q, 2.0, 10, 1 / 3, 1 / 3, 3, c2=2.0) == pytest.approx(
        2 * theorem
    )
    with pytest.warns(PrivacyConditionWarning, match="c1 q\\^2 T"):
        papers.dpdl_sigma(eps, delta, t, q, 2.0, 10, 1 / 3, 1 / 3, 3, c1=1.0)


def test_dpdl_noise_multipliers_match_derivation():
    # on a regular graph the per-agent multiplier equals sigma / (derivation form / sigma)
    n = 10
    w = np.full((n, n), 1 / n)
    q, t, delta, eps = 0.0036, 1000, 1e-5, 1.0
    sigma = papers.dpdl_sigma(eps, delta, t, q, 1.5, n, 1 / n, 1 / n, n, variant="derivation")
    z = papers.dpdl_noise_multipliers(sigma, w, 1.5)
    # derivation: z_i >= c2 q sqrt(T ln(1/delta)) / eps holds with equality
    assert z == pytest.approx(np.full(n, q * math.sqrt(t * math.log(1 / delta)) / eps))


# ---------------------------------------------------------------- DP-DDA (specs/002_dpdda.md)


@pytest.mark.parametrize(
    ("eps", "iota", "t", "expected"),
    [
        (0.2, 0.1, 600_000, 0.2522),
        (0.4, 0.1, 600_000, 0.1261),
        (0.6, 0.1, 600_000, 0.0841),
        (0.8, 0.1, 600_000, 0.0630),
        (1.0, 0.1, 600_000, 0.0504),
        (0.2, 0.2, 300_000, 0.3566),
        (1.0, 0.2, 300_000, 0.0713),
    ],
)
def test_dpdda_experiment_table(eps, iota, t, expected):
    # spec 002 section 5.7: epsilon data set, q = 20000, L = 1, delta0 = 0.01 (constant 32)
    with pytest.warns(PrivacyConditionWarning, match="T >= "):
        paper = papers.dpdda_sigma(eps, 0.01, t, 20_000, iota, 1.0)
    assert paper.sigma == pytest.approx(expected, abs=5e-5)
    with pytest.warns(PrivacyConditionWarning):
        corrected = papers.dpdda_sigma(eps, 0.01, t, 20_000, iota, 1.0, constant="corrected")
    assert corrected.sigma == pytest.approx(math.sqrt(5) * paper.sigma, rel=1e-12)
    # the proof's chain: ~1.62 eps + eps^2 with 32, <= eps with 160 (spec P0)
    assert paper.epsilon_proved == pytest.approx(
        math.sqrt(2 * math.log(math.e + 1)) * eps + eps**2, rel=1e-12
    )
    assert corrected.epsilon_proved <= eps
    # vacuous delta (spec P1): at least delta' = eps (paper) or eps / sqrt(5)
    assert paper.delta >= eps and corrected.delta >= eps / math.sqrt(5)


def test_dpdda_condition_holds_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = papers.dpdda_sigma(0.5, 0.01, 10_000, 100, 0.5, 1.0, constant="corrected")
    assert r.t_condition_holds


def test_dpdda_remark_and_small_delta():
    assert papers.dpdda_remark_epsilon(100, 100, 0.5) == pytest.approx(
        math.sqrt(0.6) * 0.5 + 0.25 / 5
    )
    sigma = papers.dpdda_sigma_for_delta(0.5, 1e-6, 0.01, 10_000, 100, 0.5, 1.0)
    s = 32 * 0.25 * 10_000 * math.log(200) / (100**2 * sigma**2)
    assert math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / 1e-6)) + s == pytest.approx(
        0.5, rel=1e-9
    )
    # a smaller delta' costs more noise than Theorem 1 (which fixes delta' = eps / sqrt 5)
    assert sigma > papers.dpdda_sigma(0.5, 0.01, 10_000, 100, 0.5, 1.0, "corrected").sigma


# ---------------------------------------------------------------- DP-DGT (specs/003_dpdgt.md)

SEC61 = dict(alpha0=0.015, q=0.991, q_xi=0.995, q_zeta=0.995, mu=0.06, gamma=0.8, phi=0.7)


def test_dpdgt_eq38_section_6_1():
    # spec 003 section 5.4: eps = 493.27 delta / theta_0
    for theta0 in (0.01, 0.1):
        eps = papers.dpdgt_epsilon(
            SEC61["alpha0"],
            SEC61["q"],
            theta0,
            SEC61["q_xi"],
            theta0,
            SEC61["q_zeta"],
            SEC61["mu"],
            SEC61["gamma"],
            SEC61["phi"],
            1.0,
        )
        assert eps == pytest.approx(493.27 / theta0, rel=1e-5)


def test_dpdgt_eq38_by_hand():
    a0, q, tx, qx, tz, qz, mu, g, ph, dl = 0.01, 0.95, 0.2, 0.97, 0.3, 0.97, 0.1, 0.5, 0.6, 0.01
    gpm = g * ph * mu
    expected = (
        a0
        * dl
        * (gpm + a0)
        / (gpm * (gpm - a0))
        * (qx / (tx * (qx - q)) + ph * qz / (tz * (qz - q)))
    )
    assert papers.dpdgt_epsilon(a0, q, tx, qx, tz, qz, mu, g, ph, dl) == pytest.approx(expected)


def test_dpdgt_invalid_and_warned_configurations():
    # Sec. 6.3: alpha0 = 0.034 > mu gamma phi = 0.0336 -> no valid bound (spec P13)
    with pytest.raises(ValueError, match="alpha0"):
        papers.dpdgt_epsilon(0.034, 0.99, 0.01, 0.995, 0.01, 0.995, 0.06, 0.8, 0.7, 1.0)
    with pytest.raises(ValueError, match="'q'"):
        papers.dpdgt_epsilon(0.015, 0.996, 0.01, 0.995, 0.01, 0.995, 0.06, 0.8, 0.7, 1.0)
    # q <= q_xi^2 only hurts convergence: a warning
    with pytest.warns(PrivacyConditionWarning, match="convergence"):
        papers.dpdgt_epsilon(0.015, 0.99, 0.01, 0.995, 0.01, 0.995, 0.06, 0.8, 0.7, 1.0)


def test_dpdgt_recursion_section_6_1():
    # spec 003 section 5.4 / P14: the recursion (32) summed gives 5.07e4 delta at theta_0 = 0.01
    k = np.arange(20_000)
    alphas = 0.015 * 0.991**k
    theta = 0.01 * 0.995**k
    eps = papers.dpdgt_epsilon_recursion(alphas, theta, theta, 0.06, 0.8, 0.7, 1.0)
    assert eps == pytest.approx(5.07e4, rel=1e-3)


def test_dpdgt_sensitivities_first_steps_by_hand():
    a = np.array([0.1, 0.05, 0.02, 0.01])
    mu, g, ph, dl = 0.5, 0.4, 0.3, 2.0
    vp, et = papers.dpdgt_sensitivities(a, mu, g, ph, dl)
    v1 = a[0] * dl / mu
    e1 = a[0] * dl / mu
    v2 = (1 - g) * v1 + a[1] / mu * e1 + a[1] * dl / mu
    e2 = (2 - g) * v1 + (1 - ph + a[1] / mu) * e1 + a[1] * dl / mu
    assert vp[:3] == pytest.approx([0.0, v1, v2])
    assert et[:3] == pytest.approx([0.0, e1, e2])


def test_dpdgt_certified_laplace_composition_is_below_pure_dp_sum():
    k = np.arange(300)
    alphas, theta = 0.015 * 0.991**k, 0.05 * 0.995**k
    pure = papers.dpdgt_epsilon_recursion(alphas, theta, theta, 0.06, 0.8, 0.7, 1e-3)
    events = papers.dpdgt_laplace_events(alphas, theta, theta, 0.06, 0.8, 0.7, 1e-3)
    # the multipliers are theta / sensitivity: their inverses add up to the pure-DP sum
    assert sum(c / s.noise_multiplier for s, c in events) == pytest.approx(pure, rel=1e-9)
    eps = compose_epsilon(events, 1e-5, "rdp", "add_remove_one")
    assert 0 < eps <= pure * (1 + 1e-9)
