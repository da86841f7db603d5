"""PrivacyLedger: per-agent accounting equals the accountant on the same events; persistence."""

import json

import numpy as np
import pytest

from rfed.privacy import CertifiedAccountant, PrivacyLedger, papers


def _prirfed_like(ledger, rounds, rng, n_agents=6, s=2, k=3):
    """Record s of n agents per round (without replacement), K local WOR steps each."""
    chosen = []
    for t in range(rounds):
        sel = rng.choice(n_agents, size=s, replace=False)
        chosen.append(sel)
        ledger.record(
            t,
            sel,
            sigma=1.5,
            sensitivity=2 * 1.0 / 35,
            sampling="without_replacement",
            dataset_size=70,
            sample_size=35,
            count=k,
        )
    return chosen


def test_per_agent_epsilon_equals_the_accountant():
    rng = np.random.default_rng(0)
    led = PrivacyLedger(6, "rdp", "replace_one")
    chosen = _prirfed_like(led, 40, rng)
    counts = np.bincount(np.concatenate(chosen), minlength=6)
    eps = led.epsilons(1e-5)
    z = 1.5 / (2 / 35)
    for a in range(6):
        acc = CertifiedAccountant("rdp", "replace_one")
        acc.add_gaussian(
            z, sampling="without_replacement", dataset_size=70, sample_size=35, count=3 * counts[a]
        )
        assert eps[a] == pytest.approx(acc.epsilon(1e-5), rel=1e-12)
        assert led.rounds_participated[a] == counts[a]
    # overall = max over agents (disjoint data)
    assert led.epsilon(1e-5) == eps.max()
    assert led.epsilon(1e-5, agent=int(np.argmin(counts))) == eps.min()
    # more participation never means less epsilon
    order = np.argsort(counts)
    assert np.all(np.diff(eps[order]) >= -1e-12)


def test_batched_parameters_and_masks():
    led = PrivacyLedger(4, "pld", "add_remove_one")
    led.record(
        0,
        np.array([0, 1, 2]),
        noise_multiplier=np.array([1.0, 1.0, 2.0]),
        sampling="poisson",
        sampling_rate=0.1,
        count=10,
    )
    led.record(
        1,
        np.array([True, False, False, True]),
        noise_multiplier=1.0,
        sampling="poisson",
        sampling_rate=0.1,
        count=10,
    )
    eps = led.epsilons(1e-5)
    ref = CertifiedAccountant("pld")
    ref.add_gaussian(1.0, 0.1, count=20)
    assert eps[0] == pytest.approx(ref.epsilon(1e-5), rel=1e-12)
    assert eps[1] < eps[0] and eps[2] < eps[1]
    assert eps[3] == eps[1]
    assert led.rounds_participated.tolist() == [2, 1, 1, 1]
    assert len(led.spent(0)) == 1 and led.spent(0)[0][1] == 20


def test_aggregation_keeps_recording_cheap():
    led = PrivacyLedger(100)
    for t in range(500):
        led.record(t, None, sigma=2.0, sensitivity=0.1, count=1)
    assert len(led._specs) == 1  # one aggregated counter per distinct event
    assert len(led.history) == 1 and led.history[0]["last_round"] == 499
    assert np.all(led._counts == 500)


def test_report_names_accountant_and_lists_paper_bound():
    led = PrivacyLedger(3, description="PriRFed-DP-RSGD, sphere PCA")
    led.record(0, [0, 1], sigma=1.0, sensitivity=0.1, count=2)
    pb = papers.prirfed_privacy(3, 1, 0.15, 1e-5, 1, 1e-3)
    led.add_paper_bound(
        "PriRFed Thm 4.2", pb.epsilon, pb.delta, "spec 004 section 3.3", note="o_i = 1 heuristic"
    )
    text = led.report(1e-5)
    for word in (
        "RDP accountant",
        "replace-one",
        "max over agents",
        "PriRFed Thm 4.2",
        "certified",
        "PriRFed-DP-RSGD",
        "gaussian(z=10)",
    ):
        assert word in text
    assert f"{led.epsilon(1e-5):.6g}" in text
    summary = json.loads(json.dumps(led.report_dict(1e-5)))
    assert summary["epsilon"] == led.epsilon(1e-5)
    assert summary["epsilon_per_agent"][2] == 0.0  # agent 2 never touched
    assert summary["events"][0]["count_total"] == 4
    assert summary["paper_bounds"][0]["name"] == "PriRFed Thm 4.2"


def test_json_round_trip_and_resume():
    rng = np.random.default_rng(1)
    led = PrivacyLedger(6)
    _prirfed_like(led, 10, rng)
    led.add_paper_bound("x", 1.0, 1e-3, "src")
    text = json.dumps(led.to_dict())
    back = PrivacyLedger.from_dict(json.loads(text))
    assert np.array_equal(back.epsilons(1e-5), led.epsilons(1e-5))
    # resuming: recording the rest of the run on either gives the same answer
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for t in range(10, 20):
        for ledger, r in ((led, rng_a), (back, rng_b)):
            ledger.record(
                t,
                r.choice(6, 2, replace=False),
                sigma=1.5,
                sensitivity=2 / 35,
                sampling="without_replacement",
                dataset_size=70,
                sample_size=35,
                count=3,
            )
    assert np.array_equal(back.epsilons(1e-5), led.epsilons(1e-5))
    assert back.report(1e-5) == led.report(1e-5)


def test_empty_ledger_and_bad_input():
    led = PrivacyLedger(2)
    assert led.epsilon(1e-5) == 0.0
    with pytest.raises(ValueError, match="'agents'"):
        led.record(0, [2], sigma=1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="'sensitivity'"):
        led.record(0, [0], sigma=1.0, sensitivity=0.0)
    with pytest.raises(ValueError, match="'sigma'"):
        led.record(0, [0], sigma=-1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        led.record(0, [0])
    with pytest.raises(ValueError, match="'delta'"):
        led.epsilon(0.0)
    with pytest.raises(ValueError, match="'sampling_rate'"):
        led.record(0, [0], noise_multiplier=1.0, sampling="poisson", sampling_rate=0.0)
    # Poisson with RDP under replace-one is not something the accountant can certify
    with pytest.raises(ValueError, match="Poisson"):
        led.record(0, [0], noise_multiplier=1.0, sampling="poisson", sampling_rate=0.1)
    with pytest.raises(ValueError, match="'data'"):
        PrivacyLedger.from_dict({"format": "other"})
    assert led.epsilon(1e-5) == 0.0  # refused records left no trace


def test_merge_of_agent_blocks_equals_one_ledger():
    # two processes each record their own block of agents; the merged ledger is the one ledger
    rng = np.random.default_rng(3)
    whole = PrivacyLedger(8, "rdp", "replace_one")
    block_a = PrivacyLedger(8, "rdp", "replace_one")
    block_b = PrivacyLedger(8, "rdp", "replace_one")
    for t in range(12):
        agents = np.sort(rng.choice(8, size=3, replace=False))
        sigma = rng.choice([1.0, 2.0])
        kw = dict(sigma=sigma, sensitivity=0.5, sampling="without_replacement", dataset_size=20,
                  sample_size=10, count=2)
        whole.record(t, agents, **kw)
        for block, mine in ((block_a, agents[agents < 4]), (block_b, agents[agents >= 4])):
            if mine.size:
                block.record(t, mine, **kw)
    merged = block_a.merge(block_b)
    np.testing.assert_array_equal(merged.epsilons(1e-5), whole.epsilons(1e-5))
    np.testing.assert_array_equal(merged.rounds_participated, whole.rounds_participated)
    for agent in range(8):
        assert sorted(map(repr, merged.spent(agent))) == sorted(map(repr, whole.spent(agent)))
    # the inputs are untouched
    assert block_a.epsilons(1e-5)[4:].max() == 0.0


def test_merge_refuses_different_accounting():
    a = PrivacyLedger(4, "rdp", "replace_one")
    with pytest.raises(ValueError, match="neighboring"):
        a.merge(PrivacyLedger(4, "rdp", "add_remove_one"))
    with pytest.raises(ValueError, match="n_agents"):
        a.merge(PrivacyLedger(5, "rdp", "replace_one"))
    with pytest.raises(TypeError, match="other"):
        a.merge({"events": []})


def test_equal_per_agent_arrays_share_one_event():
    led = PrivacyLedger(1000, "rdp", "replace_one")
    led.record(0, np.arange(1000), sigma=np.full(1000, 2.0), sensitivity=np.full(1000, 0.5))
    assert len(led.history) == 1 and led.history[0]["agents"] == "all"
    assert led.epsilon(1e-5) == pytest.approx(led.epsilon(1e-5, agent=999))


def test_history_agents_do_not_alias_the_callers_array_and_round_trip():
    led = PrivacyLedger(50)
    picked = np.array([3, 7, 9])
    led.record(0, picked, noise_multiplier=np.full(3, 2.0))
    picked[0] = 40  # the caller reuses its array
    led.record(1, np.array([9, 3, 7]), noise_multiplier=2.0)  # unsorted: the same set
    assert led.history[0]["agents"] == [3, 7, 9]
    assert (led.history[0]["first_round"], led.history[0]["last_round"]) == (0, 1)
    again = PrivacyLedger.from_json(led.to_json())
    again.record(2, np.array([3, 7, 9]), noise_multiplier=2.0)
    assert again.history == [dict(led.history[0], last_round=2)]
    np.testing.assert_array_equal(again.rounds_participated[[3, 7, 9, 0]], [3, 3, 3, 0])


def test_repeated_ids_in_one_call_count_once_per_round_but_every_invocation():
    led = PrivacyLedger(5)
    led.record(0, np.array([1, 1, 2]), noise_multiplier=1.0, count=2)
    assert led.spent(1)[0][1] == 4 and led.spent(2)[0][1] == 2
    np.testing.assert_array_equal(led.rounds_participated, [0, 1, 1, 0, 0])


def test_record_event_leaves_the_ledger_as_record_does():
    """Charging a built event with a mask gives the state record() gives (counts, rounds,
    history, first/last round), including empty masks, repeated rounds and count 0."""
    from rfed.privacy.accountants import EventSpec

    rng = np.random.default_rng(3)
    n = 9
    ev_a = EventSpec.make("gaussian", 1.5 / 0.2, "without_replacement", dataset_size=40,
                          sample_size=4)
    ev_b = EventSpec.make("gaussian", 2.0)
    old, new = PrivacyLedger(n), PrivacyLedger(n)
    for t in [0, 1, 2, 2, 3, 5, 6, 7, 8]:
        for _ in range(2):
            mask = rng.random(n) < rng.choice([0.0, 0.5, 1.0])
            count = int(rng.choice([0, 1, 3]))
            if rng.random() < 0.5:
                old.record(t, mask, sigma=1.5, sensitivity=0.2, sampling="without_replacement",
                           dataset_size=40, sample_size=4, count=count)
                new.record_event(t, ev_a, mask, count)
            else:
                old.record(t, mask, noise_multiplier=2.0, count=count)
                new.record_event(t, ev_b, mask, count)
    assert new.to_dict() == old.to_dict()
    assert np.array_equal(new.epsilons(1e-5), old.epsilons(1e-5))


def test_record_event_few_and_many_agents_leave_the_ledger_as_record_does():
    """record_event updates a few charged agents by index and many by whole-array masks: both
    give record()'s state (rounds counted once per round, history merged across rounds), and
    a mask the caller changes after the call does not change the ledger."""
    from rfed.privacy.accountants import EventSpec

    rng = np.random.default_rng(11)
    n = 64
    ev = EventSpec.make("gaussian", 3.0)
    old, new = PrivacyLedger(n), PrivacyLedger(n)
    fixed = np.zeros(n, bool)
    for t in [0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 8]:
        fixed[:] = False
        fixed[[3, 40]] = True
        # a fixed sparse set alone in rounds 0-3 (one history entry over those rounds), then
        # random sparse and dense sets
        masks = [fixed] if t < 4 else [fixed, rng.random(n) < rng.choice([0.03, 0.1, 0.6, 1.0])]
        for mask in masks:
            count = 1 if t < 4 else int(rng.choice([1, 2]))
            old.record(t, mask.copy(), noise_multiplier=3.0, count=count)
            new.record_event(t, ev, mask, count)
            mask[:] = ~mask  # the caller reuses its array
            assert new.to_dict() == old.to_dict()
    assert any(h["last_round"] > h["first_round"] for h in new.history)
    np.testing.assert_array_equal(new.rounds_participated, old.rounds_participated)


def test_record_event_with_increasing_ids_leaves_the_ledger_as_record_does():
    """Ids instead of a mask: the same counts, rounds and merged history as record(), the
    ids copied (the caller may reuse its array), and no agent an empty charge."""
    from rfed.privacy.accountants import EventSpec

    rng = np.random.default_rng(5)
    n = 50
    evs = [EventSpec.make("gaussian", 2.0), EventSpec.make("gaussian", 0.7)]
    old, new = PrivacyLedger(n), PrivacyLedger(n)
    for t in [0, 1, 1, 2, 3, 4, 4, 5]:
        k = int(rng.integers(0, 2))
        for ids in (np.array([7]), np.sort(rng.choice(n, size=int(rng.integers(0, 6)),
                                                      replace=False)), np.arange(n)):
            count = int(rng.choice([1, 3]))
            old.record(t, ids.copy(), noise_multiplier=evs[k].noise_multiplier, count=count)
            new.record_event(t, evs[k], ids, count)
            ids[:] = 0  # the caller reuses its array
            assert new.to_dict() == old.to_dict()
    for t in range(10, 14):  # the same agents in consecutive rounds: one merged entry
        old.record(t, np.array([3, 9]), noise_multiplier=2.0)
        new.record_event(t, evs[0], np.array([3, 9]))
    assert new.to_dict() == old.to_dict()
    np.testing.assert_array_equal(new.rounds_participated, old.rounds_participated)
    assert new.history[-1]["first_round"] == 10 and new.history[-1]["last_round"] == 13


def test_record_event_refuses_bad_input():
    from rfed.privacy.accountants import EventSpec

    led = PrivacyLedger(4)
    ev = EventSpec.make("gaussian", 2.0)
    for bad in ([1, 0], [0, 0], [0, 4], [-1, 2], [[0, 1]], [0.0, 1.0]):
        with pytest.raises(ValueError, match="agents"):
            led.record_event(0, ev, np.array(bad))
    with pytest.raises(ValueError, match="agents"):
        led.record_event(0, ev, np.ones(5, bool))
    assert led.to_dict() == PrivacyLedger(4).to_dict()  # nothing was charged
    with pytest.raises(TypeError, match="event"):
        led.record_event(0, "gaussian", np.ones(4, bool))
    with pytest.raises(ValueError, match="round"):
        led.record_event(-1, ev, np.ones(4, bool))
    with pytest.raises(ValueError, match="count"):
        led.record_event(0, ev, np.ones(4, bool), count=-1)
    # the ledger's accountant check runs when the event is first charged
    pld = PrivacyLedger(4, method="pld", neighboring="add_remove_one")
    wor = EventSpec.make("gaussian", 2.0, "without_replacement", dataset_size=10, sample_size=2)
    with pytest.raises(ValueError):
        pld.record_event(0, wor, np.ones(4, bool))
