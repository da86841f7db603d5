"""Budget-first calibration: targets met, not wasted; delta rules; auto picks the tighter bound."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from rfed.privacy import (
    EventSpec,
    PrivacyBudget,
    calibrate,
    certify,
    check_delta_for_dataset,
    default_delta,
)


def analytic_gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of a Gaussian mechanism, sensitivity/std ratio ``mu`` (Balle-Wang 2018)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_default_delta_is_below_one_over_ten_n():
    assert default_delta(70) == pytest.approx(1e-5)
    assert default_delta(1000) == pytest.approx(1e-5)
    assert default_delta(20_000) == pytest.approx(1.0 / 200_000)
    for n in (1, 7, 70, 10**6):
        assert default_delta(n) <= 1.0 / (10 * n)


def test_delta_at_least_one_over_n_is_refused_with_reason():
    with pytest.raises(ValueError, match=r"'delta'.*1/N.*70 records"):
        check_delta_for_dataset(1.0 / 70, 70)
    with pytest.raises(ValueError, match="in the clear"):
        PrivacyBudget(1.0, delta=0.05).resolve_delta(40)
    assert PrivacyBudget(1.0).resolve_delta(70) == pytest.approx(1e-5)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_budget_rejects_bad_epsilon(bad):
    with pytest.raises((ValueError, TypeError), match="epsilon"):
        PrivacyBudget(bad)


def test_budget_rejects_bad_method_and_relation():
    with pytest.raises(ValueError, match="method"):
        PrivacyBudget(1.0, method="moments")
    with pytest.raises(ValueError, match="neighboring"):
        PrivacyBudget(1.0, neighboring="zero_out")


def test_certify_single_gaussian_is_an_upper_bound_of_the_exact_epsilon():
    # one Gaussian release, z = 2: the exact delta at the certified epsilon is at most delta
    delta = 1e-5
    cert = certify([(EventSpec.make("gaussian", 2.0), 1)], delta, "add_remove_one")
    assert analytic_gaussian_delta(cert.epsilon, 1.0 / 2.0) <= delta * (1 + 1e-9)
    # and 'auto' is no looser than either method alone
    for method in ("rdp", "pld"):
        alone = certify([(EventSpec.make("gaussian", 2.0), 1)], delta, "add_remove_one", method)
        assert cert.epsilon <= alone.epsilon + 1e-12


def test_auto_uses_rdp_when_pld_cannot_account_the_events():
    ev = [(EventSpec.make("gaussian", 1.0, "without_replacement", dataset_size=70, sample_size=35),
           10)]
    cert = certify(ev, 1e-5, "replace_one", "auto")
    assert cert.method == "rdp"
    with pytest.raises(ValueError, match="without replacement"):
        certify(ev, 1e-5, "replace_one", "pld")


@pytest.mark.parametrize("target", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_calibrate_meets_target_and_wastes_under_ten_percent(target):
    def events(z):
        return [(EventSpec.make("gaussian", z, "without_replacement", dataset_size=70,
                                sample_size=35), 50)]

    cal = calibrate(events, PrivacyBudget(target, delta=1e-5))
    assert cal.epsilon <= target
    assert cal.epsilon >= 0.9 * target
    # the multiplier is (near) the smallest: 0.5% less noise breaks the target
    assert certify(events(cal.noise_multiplier / 1.005), 1e-5).epsilon > target


def test_calibrate_single_gaussian_matches_the_analytic_gaussian():
    # the smallest z for (1, 1e-5) of one Gaussian release: analytic Gaussian mechanism, bisected
    lo, hi = 0.1, 20.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if analytic_gaussian_delta(1.0, 1.0 / mid) <= 1e-5:
            hi = mid
        else:
            lo = mid
    cal = calibrate(lambda z: [(EventSpec.make("gaussian", z), 1)],
                    PrivacyBudget(1.0, delta=1e-5, neighboring="add_remove_one"))
    # certified accounting is never tighter than exact, and PLD is close to it
    assert cal.noise_multiplier >= hi * (1 - 1e-6)
    assert cal.noise_multiplier <= hi * 1.05


def test_calibrate_composes_several_event_kinds():
    # two releases per step with different sensitivities: the calibrated z serves both
    def events(z):
        return [(EventSpec.make("gaussian", z), 20), (EventSpec.make("gaussian", 2 * z), 20)]

    cal = calibrate(events, PrivacyBudget(2.0, delta=1e-6, neighboring="add_remove_one"))
    only_first = calibrate(lambda z: [(EventSpec.make("gaussian", z), 20)],
                           PrivacyBudget(2.0, delta=1e-6, neighboring="add_remove_one"))
    assert cal.noise_multiplier > only_first.noise_multiplier
    assert 1.8 <= cal.epsilon <= 2.0


def test_calibrate_refuses_unreachable_budget_and_requires_delta():
    with pytest.raises(ValueError, match="'delta'"):
        calibrate(lambda z: [(EventSpec.make("gaussian", z), 1)], PrivacyBudget(1.0))
    with pytest.raises(TypeError, match="budget"):
        calibrate(lambda z: [], {"epsilon": 1.0})


@pytest.mark.parametrize("item", [
    ("gaussian", 1.0),                        # the kind's name in place of its EventSpec
    (EventSpec.make("gaussian", 1.0),),       # the count left out
    EventSpec.make("gaussian", 1.0),          # not a pair at all
])
def test_events_that_are_not_eventspec_count_pairs_are_refused_naming_the_argument(item):
    with pytest.raises(TypeError, match=r"argument 'events' must hold \(EventSpec, count\) "
                                        r"pairs.*item 0 is"):
        certify([item], 1e-5)
    with pytest.raises(TypeError, match=r"argument 'events_for': events_for\(z\) must hold "
                                        r"\(EventSpec, count\) pairs.*item 0 is"):
        calibrate(lambda z: [item], PrivacyBudget(1.0, 1e-5))


def test_calibration_is_deterministic_and_serializable():
    def events(z):
        return [(EventSpec.make("gaussian", z, "poisson", 0.01), 1000)]

    b = PrivacyBudget(1.0, delta=1e-5, neighboring="add_remove_one", method="rdp")
    a1, a2 = calibrate(events, b), calibrate(events, b)
    assert a1.noise_multiplier == a2.noise_multiplier
    d = a1.to_dict()
    assert d["method"] == "rdp" and "dp-accounting" in d["accountant"]
    assert np.isfinite(d["noise_multiplier"])


def test_calibration_needs_few_accountant_calls_and_agrees_with_bisection():
    calls = []

    def events(z):
        calls.append(z)
        return [(EventSpec.make("gaussian", z, "poisson", 0.02), 500)]

    budget = PrivacyBudget(1.5, delta=1e-5, neighboring="add_remove_one", method="rdp")
    cal = calibrate(events, budget, rtol=1e-4)
    # plain bisection from the doubling bracket would need ~14 more calls at this rtol
    assert len(set(calls)) <= 14
    # independent bisection on the same accountant
    lo, hi = 0.1, 10.0
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if certify(events(mid), 1e-5, "add_remove_one", "rdp").epsilon <= 1.5:
            hi = mid
        else:
            lo = mid
    assert cal.noise_multiplier == pytest.approx(hi, rel=1.5e-4)
    assert cal.epsilon <= 1.5


def test_a_round_past_the_planned_run_is_refused():
    from rfed.privacy.budget import check_planned_round

    check_planned_round("X", 4, 5, 1.0)        # the 5th of 5 rounds is allowed
    check_planned_round("X", 100, None, None)  # no budget: no limit
    with pytest.raises(RuntimeError, match=r"X: .*n_rounds=5 rounds at epsilon=1; .*exceed"):
        check_planned_round("X", 5, 5, 1.0)
