"""Certified accountant: agreement with dp-accounting's reference numbers, conventions, errors."""

import json

import dp_accounting as dpa
import pytest
from dp_accounting import pld, rdp

from rfed.privacy import CertifiedAccountant, EventSpec, clipped_mean_sensitivity, gaussian_epsilon


def test_anchor_rdp():
    # specs/anchors_dp_engines.md section 1: sigma 1.0, Poisson 0.01, 1000 steps, delta 1e-5
    acc = CertifiedAccountant("rdp")
    acc.add_gaussian(1.0, sampling_rate=0.01, count=1000)
    assert acc.epsilon(1e-5) == pytest.approx(2.1014, abs=1e-4)


def test_anchor_pld():
    eps = gaussian_epsilon(1.0, 0.01, 1000, 1e-5, method="pld", pld_discretization=1e-4)
    assert eps == pytest.approx(1.8282, abs=1e-4)
    # coarser interval: still an upper bound, within 1e-3 (anchor: 1.8289 at 1e-3)
    coarse = gaussian_epsilon(1.0, 0.01, 1000, 1e-5, method="pld", pld_discretization=1e-3)
    assert eps <= coarse <= eps + 1e-3


def test_anchor_without_replacement_and_laplace():
    # anchors: WOR n = 10000, m = 100, REPLACE_ONE, RDP: 3.5761; Laplace b = 10 x 10: 0.9903/0.9900
    wor = gaussian_epsilon(
        1.0, 0.01, 1000, 1e-5, sampling="without_replacement", dataset_size=10000
    )
    assert wor == pytest.approx(3.5761, abs=1e-4)
    for method, expected in (("rdp", 0.9903), ("pld", 0.9900)):
        acc = CertifiedAccountant(method)
        acc.add_laplace(10.0, sampling="none", count=10)
        assert acc.epsilon(1e-5) == pytest.approx(expected, abs=1e-4)


def test_matches_dp_accounting_directly_on_a_mixed_composition():
    acc = CertifiedAccountant("rdp")
    acc.add_gaussian(1.3, sampling_rate=0.02, count=500)
    acc.add_gaussian(4.0, sampling="none", count=3)
    ref = rdp.RdpAccountant()
    ref.compose(
        dpa.ComposedDpEvent(
            [
                dpa.SelfComposedDpEvent(
                    dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.3)), 500
                ),
                dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 3),
            ]
        )
    )
    assert acc.epsilon(1e-6) == pytest.approx(ref.get_epsilon(1e-6), rel=1e-12)
    assert acc.delta(1.0) == pytest.approx(ref.get_delta(1.0), rel=1e-12)


def test_replace_one_convention_is_the_same_for_rdp_and_pld():
    # Without sampling, a Gaussian with multiplier z (std / sensitivity under the relation) has
    # the same privacy under either relation; dp-accounting's PLD takes REPLACE_ONE relative to
    # half the sensitivity, which the accountant converts.
    for method in ("rdp", "pld"):
        a = gaussian_epsilon(2.0, 1.0, 10, 1e-5, method=method, neighboring="replace_one")
        b = gaussian_epsilon(2.0, 1.0, 10, 1e-5, method=method, neighboring="add_remove_one")
        assert a == pytest.approx(b, rel=1e-9)
    ref = pld.PLDAccountant(value_discretization_interval=1e-3)
    ref.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 10))
    assert gaussian_epsilon(
        2.0, 1.0, 10, 1e-5, method="pld", neighboring="replace_one"
    ) == pytest.approx(ref.get_epsilon(1e-5), rel=1e-9)


def test_pld_is_tighter_than_rdp():
    for z, q, n in ((0.8, 0.05, 200), (2.0, 0.001, 5000)):
        assert gaussian_epsilon(z, q, n, 1e-5, method="pld") <= gaussian_epsilon(z, q, n, 1e-5)


def test_clipped_mean_sensitivity():
    assert clipped_mean_sensitivity(1.5, 30, "replace_one") == pytest.approx(0.1)
    assert clipped_mean_sensitivity(1.5, 30, "add_remove_one") == pytest.approx(0.05)


def test_describe_names_accountant_and_assumptions():
    acc = CertifiedAccountant("pld", "replace_one")
    acc.add_gaussian(1.0, 0.1, count=5)
    text = acc.describe()
    for word in ("PLD", "dp-accounting", "replace-one", "record-level", "5 x gaussian(z=1)"):
        assert word in text


def test_serialization_round_trip():
    acc = CertifiedAccountant("rdp", "replace_one")
    acc.add_gaussian(1.1, sampling="without_replacement", dataset_size=70, sample_size=35, count=7)
    acc.add_laplace(3.0, sampling="none", count=2)
    back = CertifiedAccountant.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert back.epsilon(1e-5) == acc.epsilon(1e-5)
    assert back.events == acc.events


def test_no_events_and_no_noise():
    acc = CertifiedAccountant()
    assert acc.epsilon(1e-5) == 0.0
    acc.add_gaussian(0.0, sampling="none")
    assert acc.epsilon(1e-5) == float("inf")
    assert acc.delta(1.0) == 1.0


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: gaussian_epsilon(1.0, 0.01, 10, 0.0), "delta"),
        (lambda: gaussian_epsilon(1.0, 0.01, 10, 1.0), "delta"),
        (lambda: gaussian_epsilon(1.0, 0.0, 10, 1e-5), "sampling_rate"),
        (lambda: gaussian_epsilon(1.0, 1.5, 10, 1e-5), "sampling_rate"),
        (lambda: gaussian_epsilon(-1.0, 0.01, 10, 1e-5), "noise_multiplier"),
        (lambda: gaussian_epsilon(1.0, 0.01, 0, 1e-5), "steps"),
        (lambda: gaussian_epsilon(1.0, 0.01, 10, 1e-5, method="moments"), "method"),
        (lambda: CertifiedAccountant().delta(0.0), "epsilon"),
        (lambda: CertifiedAccountant().delta(-2.0), "epsilon"),
        (lambda: CertifiedAccountant(neighboring="swap"), "neighboring"),
        (
            lambda: gaussian_epsilon(1.0, 0.01, 10, 1e-5, sampling="without_replacement"),
            "dataset_size",
        ),
        (lambda: EventSpec.make("gaussian", 1.0, "none", 0.5), "sampling_rate"),
    ],
)
def test_bad_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        call()


@pytest.mark.parametrize(
    ("method", "neighboring", "adder", "kwargs", "match"),
    [
        (
            "pld",
            "replace_one",
            "add_gaussian",
            {"sampling": "without_replacement", "dataset_size": 100, "sample_size": 10},
            "without replacement needs method='rdp'",
        ),
        (
            "rdp",
            "add_remove_one",
            "add_gaussian",
            {"sampling": "without_replacement", "dataset_size": 100, "sample_size": 10},
            "neighboring='replace_one'",
        ),
        ("rdp", "replace_one", "add_gaussian", {"sampling_rate": 0.1}, "Poisson"),
        ("rdp", "add_remove_one", "add_laplace", {"sampling_rate": 0.1}, "Laplace"),
        ("pld", "replace_one", "add_laplace", {"sampling": "none"}, "Laplace"),
    ],
)
def test_unsupported_events_are_refused(method, neighboring, adder, kwargs, match):
    acc = CertifiedAccountant(method, neighboring)
    with pytest.raises(ValueError, match=match):
        getattr(acc, adder)(1.0, **kwargs)
    assert acc.events == ()
