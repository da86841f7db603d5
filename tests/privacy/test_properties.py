"""Monotonicity and limits of the certified accountant and the closed forms (hypothesis)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rfed.privacy import calibrate_noise_multiplier, gaussian_epsilon, papers

z_st = st.floats(0.5, 8.0)
q_st = st.floats(1e-3, 0.5)
steps_st = st.integers(1, 2000)
delta_st = st.sampled_from([1e-3, 1e-5, 1e-7])
SLACK = 1e-9


@settings(max_examples=12, deadline=None)
@given(z=z_st, factor=st.floats(1.0, 3.0), q=q_st, steps=steps_st, delta=delta_st)
def test_more_noise_never_raises_epsilon_rdp(z, factor, q, steps, delta):
    assert gaussian_epsilon(z * factor, q, steps, delta) <= gaussian_epsilon(z, q, steps, delta) * (
        1 + SLACK
    )


@settings(max_examples=15, deadline=None)
@given(z=z_st, q=q_st, steps=steps_st, extra=st.integers(0, 2000), delta=delta_st)
def test_more_rounds_never_lower_epsilon_rdp(z, q, steps, extra, delta):
    assert gaussian_epsilon(z, q, steps + extra, delta) >= gaussian_epsilon(z, q, steps, delta) * (
        1 - SLACK
    )


@settings(max_examples=8, deadline=None)
@given(
    z=st.floats(0.7, 4.0),
    factor=st.floats(1.0, 2.0),
    q=st.floats(0.005, 0.2),
    steps=st.integers(1, 300),
)
def test_pld_monotone_in_noise_and_rounds(z, factor, q, steps):
    e = gaussian_epsilon(z, q, steps, 1e-5, method="pld")
    # PLD discretization can wiggle by about one interval (1e-3)
    assert gaussian_epsilon(z * factor, q, steps, 1e-5, method="pld") <= e + 2e-3
    assert gaussian_epsilon(z, q, steps + 50, 1e-5, method="pld") >= e - 2e-3


@settings(max_examples=6, deadline=None)
@given(z=z_st, steps=steps_st, method=st.sampled_from(["rdp", "pld"]))
def test_sampling_probability_one_is_no_sampling(z, steps, method):
    none = gaussian_epsilon(z, 1.0, steps, 1e-5, method=method, sampling="none")
    assert gaussian_epsilon(z, 1.0, steps, 1e-5, method=method) == none
    # and the limit q -> 1 of Poisson sampling reaches it continuously
    near = gaussian_epsilon(z, 1 - 1e-9, steps, 1e-5, method=method)
    assert near == pytest.approx(none, rel=1e-3, abs=2e-3)
    assert near <= none + 2e-3


@settings(max_examples=3, deadline=None)
@given(target=st.floats(0.3, 8.0), q=st.floats(0.002, 0.2), steps=st.integers(10, 2000))
def test_calibration_inverts_the_rdp_accountant(target, q, steps):
    z = calibrate_noise_multiplier(target, 1e-5, q, steps, rtol=1e-4)
    assert gaussian_epsilon(z, q, steps, 1e-5) <= target
    assert gaussian_epsilon(z / (1 + 2e-4), q, steps, 1e-5) > target


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(2, 500),
    frac=st.floats(0.0, 1.0),
    eps=st.floats(0.01, 1.0),
    t=st.integers(1, 1000),
    t_extra=st.integers(0, 1000),
)
def test_prirfed_monotone(n, frac, eps, t, t_extra):
    s = max(1, int(frac * n))
    base = papers.prirfed_privacy(n, s, eps, 1e-5, t, 1e-3)
    assert papers.prirfed_privacy(n, s, eps, 1e-5, t + t_extra, 1e-3).epsilon >= base.epsilon
    assert papers.prirfed_privacy(n, s, eps * 0.9, 1e-5, t, 1e-3).epsilon <= base.epsilon
    # never worse than basic composition (to rounding: the product's order differs, and at
    # t s eps ~ 3.5e4 one ulp is 7e-12)
    assert base.epsilon <= t * s * eps * (1 + 1e-12)


@settings(max_examples=50, deadline=None)
@given(
    eps=st.floats(0.01, 1.0),
    t=st.integers(1, 10**6),
    q=st.integers(1, 10**5),
    iota=st.floats(0.01, 1.0),
)
def test_dpdda_sigma_monotone(eps, t, q, iota):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        a = papers.dpdda_sigma(eps, 0.01, t, q, iota, 1.0).sigma
        assert papers.dpdda_sigma(eps * 0.5, 0.01, t, q, iota, 1.0).sigma == pytest.approx(2 * a)
        assert papers.dpdda_sigma(eps, 0.01, 4 * t, q, iota, 1.0).sigma == pytest.approx(2 * a)
    assert a == pytest.approx(math.sqrt(32 * iota**2 * t * math.log(200)) / (q * eps))
