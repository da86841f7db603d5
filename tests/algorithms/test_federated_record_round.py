"""record_round's per-plan events give the ledger record()'s state, bit for bit."""

import dataclasses

import numpy as np
import pytest

from rfed.algorithms.federated.accounting import _record_general, record_round
from rfed.algorithms.federated.local import LocalPlan
from rfed.privacy.ledger import PrivacyLedger


def _plan(sampling: str, snapshot: bool = False, n: int = 12) -> LocalPlan:
    rng = np.random.default_rng(3)
    counts = rng.choice([40, 70, 100], size=n)
    sizes = np.where(counts > 50, 8, 5).astype(float)
    sens = 2.0 / sizes
    sigma = np.where(counts == 100, 1.3, 0.9) * sens * rng.choice([1.0, 1.0 + 2**-40], size=n)
    extra = {}
    if snapshot:
        extra = {"snapshot_sigma": 1.1 * 2.0 / counts, "snapshot_sensitivity": 2.0 / counts,
                 "snapshot_steps": 2}
    return LocalPlan(sigma=sigma, clip=1.0, sizes=sizes, counts=counts, sensitivity=sens,
                     sampling=sampling, steps=5, **extra)


def _rounds(n: int):
    rng = np.random.default_rng(8)
    yield np.array([4])
    yield np.array([4])
    for _ in range(12):
        yield np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
    yield np.arange(n)


@pytest.mark.parametrize("sampling", ["none", "without_replacement", "poisson"])
@pytest.mark.parametrize("snapshot", [False, True])
def test_record_round_leaves_the_ledger_as_record_does(sampling, snapshot):
    plan = _plan(sampling, snapshot)
    relation = "add_remove_one" if sampling == "poisson" else "replace_one"
    fast, general = PrivacyLedger(12, neighboring=relation), PrivacyLedger(12, neighboring=relation)
    for t, agents in enumerate(_rounds(12)):
        record_round(fast, t // 2, plan, agents)
        _record_general(general, t // 2, plan, agents)
        assert fast.to_dict() == general.to_dict()
    assert len(fast.to_dict()["events"]) > 2  # several distinct events were charged
    np.testing.assert_array_equal(fast.rounds_participated, general.rounds_participated)
    assert np.array_equal(fast.epsilons(1e-5), general.epsilons(1e-5))


def test_record_round_takes_the_general_path_for_unsorted_repeated_or_refused_agents():
    plan = _plan("without_replacement")
    fast, general = PrivacyLedger(12), PrivacyLedger(12)
    for t, agents in enumerate([np.array([5, 2, 9]), np.array([3, 3]), np.array([], int)]):
        record_round(fast, t, plan, agents)
        _record_general(general, t, plan, agents)
        assert fast.to_dict() == general.to_dict()
    assert fast.to_dict()["counts"] != PrivacyLedger(12).to_dict()["counts"]
    # a zero sensitivity is refused as ledger.record refuses it, naming the argument
    bad = dataclasses.replace(plan, sensitivity=np.where(np.arange(12) == 7, 0.0,
                                                         plan.sensitivity))
    with pytest.raises(ValueError, match="sensitivity"):
        record_round(PrivacyLedger(12), 0, bad, np.array([7]))
    record_round(fast, 3, bad, np.array([6]))  # the other agents still take the fast path


def test_record_round_rebuilds_the_events_of_a_replaced_plan():
    plan = _plan("none")
    led = PrivacyLedger(12)
    record_round(led, 0, plan, np.array([1]))
    louder = plan.with_noise_multiplier(4.0)
    record_round(led, 1, louder, np.array([1]))
    ref = PrivacyLedger(12)
    _record_general(ref, 0, plan, np.array([1]))
    _record_general(ref, 1, louder, np.array([1]))
    assert led.to_dict() == ref.to_dict()
    assert {e["noise_multiplier"] for e in led.to_dict()["events"]} >= {4.0}
