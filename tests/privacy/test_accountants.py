"""Certified accountant: agreement with dp-accounting's reference numbers, conventions, errors."""

import json

import dp_accounting as dpa
import pytest
from dp_accounting import pld, rdp

from rfed.privacy import CertifiedAccountant, EventSpec, clipped_mean_sensitivity, gaussian_epsilon
from rfed.privacy.accountants import compose_epsilon


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


# ---------------------------------------------------------------------- cached, restricted RDP
def _full_order_epsilon(spec, steps, delta, neighboring):
    """dp-accounting alone, default orders (and its optimal order)."""
    import dp_accounting as dpa
    from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

    rel = {"add_remove_one": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
           "replace_one": dpa.NeighboringRelation.REPLACE_ONE}[neighboring]
    acc = dpa_rdp.RdpAccountant(neighboring_relation=rel)
    acc.compose(dpa.SelfComposedDpEvent(spec.to_dp_event("rdp", neighboring), steps))
    return acc.get_epsilon_and_optimal_order(delta)


@pytest.mark.parametrize("kind,full_grid", [
    ("none", True), ("poisson", True), ("without_replacement", False),
    pytest.param("without_replacement", True, marks=pytest.mark.slow)])
def test_epsilon_equals_the_full_order_set_bit_for_bit(kind, full_grid):
    from rfed.privacy import accountants as acc_mod

    neighboring = "add_remove_one" if kind == "poisson" else "replace_one"
    high = 0
    # without replacement costs ~0.2 s a curve: a smaller grid by default, all under -m slow
    grid = ((0.6, 400.0), ((1, 1e-5), (2000, 1e-6))) if kind == "without_replacement" \
        and not full_grid else ((0.6, 2.0, 8.0, 60.0, 400.0),
                                ((1, 1e-5), (40, 1e-10), (2000, 1e-6)))
    for z in grid[0]:
        for steps, delta in grid[1]:
            if kind == "none":
                spec = EventSpec.make("gaussian", z)
            elif kind == "poisson":
                spec = EventSpec.make("gaussian", z, "poisson", 0.03)
            else:
                spec = EventSpec.make("gaussian", z, "without_replacement", dataset_size=40,
                                      sample_size=4)
            # the tiers give what the full order set gives, bit for bit ...
            want = compose_epsilon([(spec, steps)], delta, "rdp", neighboring,
                                   rdp_orders=acc_mod.DEFAULT_RDP_ORDERS)
            assert compose_epsilon([(spec, steps)], delta, "rdp", neighboring) == want
            # ... and dp-accounting's value up to the rounding of the curves: dp-accounting
            # sums log A near 1 to ~1e-16 absolute per step (rfed's integer orders are
            # accurate to ~1e-13 relative, see test_rdp_vectorized)
            # (without replacement, dp-accounting's forward differences lose every digit
            # for large z; test_rdp_vectorized checks those curves against mpmath)
            reference, order = _full_order_epsilon(spec, steps, delta, neighboring)
            if kind != "without_replacement" or z < 2:
                assert want == pytest.approx(reference, rel=1e-12, abs=1e-15 * steps)
            high += order > 64
    assert high > 0  # the grid reaches cases where an order above 64 is the optimum


def _plant_tampered_curves(folder, requested, factor=0.05):
    """Write every requested curve, scaled by ``factor``, where rfed's former disk cache read
    its curves (``$RFED_CACHE_DIR/rdp-curves/<sha256 of the key>.npz``, the key naming the
    dp-accounting version, the curve code, the relation, the event and the orders): a tampered
    cache that a version trusting it would have read."""
    import hashlib
    import json

    import numpy as np

    from rfed.privacy import _rdp
    from rfed.privacy import accountants as acc_mod

    folder.mkdir(parents=True, exist_ok=True)
    for spec, neighboring, orders in requested:
        engine = (_rdp.IMPLEMENTATION if spec.mechanism == "gaussian"
                  else "rfed-laplace-dpa-arithmetic-1")
        key = json.dumps({"dp_accounting": acc_mod.DP_ACCOUNTING_VERSION, "engine": engine,
                          "neighboring": neighboring, "event": spec.to_dict(),
                          "orders": [repr(o) for o in orders]}, sort_keys=True)
        rdp = factor * acc_mod._compute_rdp_curve(spec, neighboring, orders)
        path = folder / (hashlib.sha256(key.encode()).hexdigest() + ".npz")
        np.savez(path, key=np.array(key), rdp=rdp)


def test_a_tampered_cache_file_changes_no_printed_epsilon_and_no_calibration(tmp_path,
                                                                              monkeypatch):
    """Every curve an epsilon, a calibration and a run's report ask for is planted, scaled by
    0.05, in the cache folder (a version that trusted it printed eps 0.20 for a spend of 1.0 and
    calibrated 15.9 instead of 71.9): nothing changes, and nothing is written there."""

    from rfed.algorithms.federated import DPRSGD, PriRFed
    from rfed.algorithms.federated import accounting as fed_accounting
    from rfed.datasets.synthetic import make_pca_synthetic
    from rfed.privacy import PrivacyBudget, calibrate
    from rfed.privacy import accountants as acc_mod
    from rfed.problems import SpherePCA

    monkeypatch.setenv("RFED_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    events = [(EventSpec.make("gaussian", 0.8, "without_replacement", dataset_size=30,
                              sample_size=6), 200)]
    budget = PrivacyBudget(1.0, 1e-5, method="rdp")

    def wor(z):
        return [(EventSpec.make("gaussian", z, "without_replacement", dataset_size=30,
                                sample_size=6), 200)]

    def printed():
        acc_mod.clear_rdp_cache()
        fed_accounting._CERTIFICATES.clear()
        fed_accounting._CALIBRATIONS.clear()
        alg = PriRFed(DPRSGD(steps=2, batch_size=0.2, clip=0.5), None, 0.1,
                      budget=PrivacyBudget(1.0, 1e-5), n_rounds=3)
        run = alg.run(SpherePCA(make_pca_synthetic(3, 30, 6, 0.3, 4)), 3, rng=0,
                      with_reference=False)
        return (compose_epsilon(events, 1e-5, "rdp", "replace_one"),
                calibrate(wor, budget, delta=1e-5).noise_multiplier,
                run.privacy["epsilon_certified"], run.state.plan.sigma.tolist())

    requested = []
    compute = acc_mod._compute_rdp_curve

    def spy(spec, neighboring, orders):
        requested.append((spec, neighboring, orders))
        return compute(spec, neighboring, orders)

    monkeypatch.setattr(acc_mod, "_compute_rdp_curve", spy)
    clean = printed()
    monkeypatch.setattr(acc_mod, "_compute_rdp_curve", compute)
    assert not list(tmp_path.rglob("*.npz"))   # nothing is ever written to disk
    _plant_tampered_curves(tmp_path / "rdp-curves", set(requested))
    _plant_tampered_curves(tmp_path / "rfed" / "rdp-curves", set(requested))
    assert printed() == clean
    assert clean[0] > 1.0 and 0.9 <= clean[2] <= 1.0


def test_no_disk_cache_api_remains():
    from rfed.privacy import accountants as acc_mod

    for name in ("rdp_cache_dir", "set_rdp_cache_dir", "prune_rdp_cache", "rdp_cache_limit",
                 "set_rdp_cache_limit", "_disk_load", "_disk_store"):
        assert not hasattr(acc_mod, name), name
