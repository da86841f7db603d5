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
def test_epsilon_equals_the_full_order_set_bit_for_bit(kind, full_grid, tmp_path):
    from rfed.privacy import accountants as acc_mod

    acc_mod.set_rdp_cache_dir(tmp_path)
    try:
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
    finally:
        acc_mod.set_rdp_cache_dir(None)


def test_rdp_curves_are_reused_across_processes_from_disk(tmp_path, monkeypatch):
    from rfed.privacy import accountants as acc_mod

    spec = EventSpec.make("gaussian", 1.3, "without_replacement", dataset_size=30, sample_size=5)
    acc_mod.set_rdp_cache_dir(tmp_path)
    try:
        acc_mod.clear_rdp_cache()
        first = compose_epsilon([(spec, 50)], 1e-5, "rdp", "replace_one")
        assert len(list(tmp_path.glob("*.npz"))) >= 1
        assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind
        acc_mod.clear_rdp_cache(memory=True)  # a new process: only the disk remains

        def no_computation(*args, **kwargs):
            raise AssertionError("the curve should come from the disk cache")

        with monkeypatch.context() as m:
            m.setattr(acc_mod, "_compute_rdp_curve", no_computation)
            assert compose_epsilon([(spec, 50)], 1e-5, "rdp", "replace_one") == first
        # curves of another implementation (e.g. dp-accounting's, cached before rfed computed
        # them) are never read: its tag is part of the key
        acc_mod.clear_rdp_cache(memory=True)
        with monkeypatch.context() as m:
            m.setattr(acc_mod._rdp, "IMPLEMENTATION", "another-implementation")
            n_files = len(list(tmp_path.glob("*.npz")))
            assert compose_epsilon([(spec, 50)], 1e-5, "rdp", "replace_one") == first
            assert len(list(tmp_path.glob("*.npz"))) == n_files + 1
        # another dp-accounting version never reads these files
        acc_mod.clear_rdp_cache(memory=True)
        monkeypatch.setattr(acc_mod, "DP_ACCOUNTING_VERSION", "0.0-other")
        n_files = len(list(tmp_path.glob("*.npz")))
        assert compose_epsilon([(spec, 50)], 1e-5, "rdp", "replace_one") == first
        assert len(list(tmp_path.glob("*.npz"))) > n_files
    finally:
        acc_mod.set_rdp_cache_dir(None)
        acc_mod.clear_rdp_cache()


def test_the_disk_cache_is_bounded_and_keeps_the_recently_used_curves(tmp_path, monkeypatch):
    from rfed.privacy import accountants as acc_mod

    def curve(z):
        spec = EventSpec.make("gaussian", z, "poisson", sampling_rate=0.1)
        return compose_epsilon([(spec, 10)], 1e-5, "rdp", "add_remove_one")

    acc_mod.set_rdp_cache_dir(tmp_path)
    monkeypatch.setattr(acc_mod, "_PRUNE_EVERY", 1)
    try:
        acc_mod.clear_rdp_cache()
        curve(1.0)
        size = max(p.stat().st_size for p in tmp_path.glob("*.npz"))
        acc_mod.set_rdp_cache_limit(6 * size)
        used = {p.name for p in tmp_path.glob("*.npz")}
        for i in range(20):
            curve(2.0 + i)
            acc_mod.clear_rdp_cache(memory=True)
            curve(1.0)   # read back from disk: the most recently used, never pruned
            assert used <= {p.name for p in tmp_path.glob("*.npz")}
            total = sum(p.stat().st_size for p in tmp_path.glob("*.npz"))
            assert total <= 6 * size
        assert len(list(tmp_path.glob("*.npz"))) < 21   # older curves were deleted
        acc_mod.set_rdp_cache_limit(None)
        monkeypatch.setenv("RFED_CACHE_MAX_MB", "0.5")
        assert acc_mod.rdp_cache_limit() == 2**19
        monkeypatch.setenv("RFED_CACHE_MAX_MB", "lots")
        with pytest.raises(ValueError, match="RFED_CACHE_MAX_MB must be a positive number"):
            acc_mod.rdp_cache_limit()
        with pytest.raises(ValueError, match="argument 'max_bytes' must be a positive integer"):
            acc_mod.set_rdp_cache_limit(0)
    finally:
        acc_mod.set_rdp_cache_limit(None)
        acc_mod.set_rdp_cache_dir(None)
        acc_mod.clear_rdp_cache()


def test_a_corrupt_or_unwritable_disk_cache_costs_time_not_correctness(tmp_path):
    from rfed.privacy import accountants as acc_mod

    spec = EventSpec.make("gaussian", 0.9, "poisson", 0.05)
    acc_mod.set_rdp_cache_dir(None)
    acc_mod.clear_rdp_cache()
    want = compose_epsilon([(spec, 100)], 1e-5)
    acc_mod.set_rdp_cache_dir(tmp_path)
    try:
        acc_mod.clear_rdp_cache()
        compose_epsilon([(spec, 100)], 1e-5)
        for f in tmp_path.glob("*.npz"):
            f.write_bytes(b"truncated")
        acc_mod.clear_rdp_cache(memory=True)
        assert compose_epsilon([(spec, 100)], 1e-5) == want
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("x")
        acc_mod.set_rdp_cache_dir(blocker / "curves")
        acc_mod.clear_rdp_cache(memory=True)
        with pytest.warns(RuntimeWarning, match="not writable"):
            assert compose_epsilon([(spec, 100)], 1e-5) == want
    finally:
        acc_mod.set_rdp_cache_dir(None)
        acc_mod.clear_rdp_cache()


def test_concurrent_writers_of_the_disk_cache_never_expose_a_partial_curve(tmp_path):
    """Processes sharing the cache (e.g. the ranks of an MPI job) may store the same curve at
    once: each writes a temporary file of its own and renames it over the target, so a reader
    sees no file or a whole one, and no temporary is left behind. Here 4 threads store and read
    one key 40 times each, released together."""
    import threading

    import numpy as np

    from rfed.privacy import accountants as acc_mod

    key = "a curve key"
    curve = np.linspace(0.0, 1.0, 5000)
    start = threading.Barrier(4)
    seen: list = []
    errors: list = []

    def work():
        start.wait()
        try:
            for _ in range(40):
                acc_mod._disk_store(str(tmp_path), key, curve)
                seen.append(acc_mod._disk_load(str(tmp_path), key))
        except Exception as exc:  # reported below, with the thread's error
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(seen) == 160 and all(s is not None and np.array_equal(s, curve) for s in seen)
    assert [p.suffix for p in tmp_path.iterdir()] == [".npz"]


def test_only_the_costly_curves_are_kept_on_disk(tmp_path):
    """Subsampled Gaussian curves (milliseconds each) get a file; the unsampled Gaussian's closed
    form and the Laplace curves (cheaper than their file) are only kept in memory."""
    from rfed.privacy import accountants as acc_mod

    acc_mod.set_rdp_cache_dir(tmp_path)
    try:
        acc_mod.clear_rdp_cache()
        for spec in (EventSpec.make("gaussian", 1.1), EventSpec.make("laplace", 2.0)):
            compose_epsilon([(spec, 7)], 1e-5, "rdp", "replace_one")
        assert not list(tmp_path.glob("*.npz"))
        for spec, neighboring in (
                (EventSpec.make("gaussian", 1.1, "poisson", 0.02), "add_remove_one"),
                (EventSpec.make("gaussian", 1.1, "without_replacement", dataset_size=50,
                                sample_size=2), "replace_one")):
            compose_epsilon([(spec, 7)], 1e-5, "rdp", neighboring)
        assert len(list(tmp_path.glob("*.npz"))) == 2
    finally:
        acc_mod.set_rdp_cache_dir(None)
        acc_mod.clear_rdp_cache()
