"""The PLD accountant's unsampled Gaussian: rfed's array expression against dp-accounting.

:class:`rfed.privacy.accountants._GaussianPrivacyLoss` evaluates dp-accounting 0.6's per-point
inverse privacy loss of an unsampled Gaussian on the whole connect-the-dots grid at once, and
:class:`~rfed.privacy.accountants._PLDAccountant` composes the resulting distribution where
dp-accounting's accountant composes its own. The distribution, and every epsilon and delta read
from it, must be the same floats, bit for bit (compared as integers), for both neighbouring
relations, any count, discretization interval and noise multiplier; anything else (sampled
events, the Laplace mechanism) is dp-accounting's own code.

The in-memory memos of the accountants (the PLD accountants of :mod:`rfed.privacy.accountants`
and the certificates of :mod:`rfed.algorithms.federated.accounting`) are keyed by every
parameter their value depends on: queries that differ in one parameter (delta, relation, count,
sampling rate, discretization) get the values of separate uncached computations.
"""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import pld as dpa_pld

from rfed.algorithms.federated import accounting as fed_accounting
from rfed.privacy import accountants as acc_mod
from rfed.privacy.accountants import EventSpec, compose_delta, compose_epsilon

_LOSS = dpa_pld.privacy_loss_mechanism
_DELTAS = (1e-9, 1e-5, 1e-3, 0.3)
_EPSILONS = (0.0, 0.05, 0.5, 3.0, 20.0)


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.int64)


def _dpa_accountant(events, neighboring: str, vdi: float) -> dpa_pld.PLDAccountant:
    """dp-accounting's own accountant over the events, composed as rfed composed them before
    (merged and sorted: the order of the convolutions is part of the value)."""
    acc = dpa_pld.PLDAccountant(neighboring_relation=acc_mod._NR[neighboring],
                                value_discretization_interval=vdi)
    acc.compose(dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(s.to_dp_event("pld", neighboring), c)
                                     for s, c in acc_mod._canonical(events)]))
    return acc


def _rfed_accountant(events, neighboring: str, vdi: float) -> dpa_pld.PLDAccountant:
    """rfed's accountant, built afresh (not the memo's)."""
    return acc_mod._pld_accountant.__wrapped__(acc_mod._canonical(events), neighboring, vdi)


def _dense(acc: dpa_pld.PLDAccountant):
    pld = acc._pld
    out: list = [pld._symmetric]
    for pmf in (pld._pmf_remove, pld._pmf_add):
        dense = pmf.to_dense_pmf()
        out.append((dense._lower_loss, _bits(dense._probs).tolist(),
                    _bits([dense._infinity_mass]).tolist()))
    return out


def _readings(acc: dpa_pld.PLDAccountant):
    return (_bits([acc.get_epsilon(d) for d in _DELTAS]).tolist(),
            _bits([acc.get_delta(e) for e in _EPSILONS]).tolist())


def test_the_mirrored_release_is_installed():
    """The array expression mirrors dp-accounting 0.6.0's loop; under another release rfed
    falls back to dp-accounting's accountant (exact, slower): re-check the mirror, then add the
    release to ``_PLD_MIRRORED_VERSIONS`` (another release is no error: the same epsilons,
    slower, so a new install is told, not failed)."""
    if acc_mod.DP_ACCOUNTING_VERSION not in acc_mod._PLD_MIRRORED_VERSIONS:
        pytest.skip(f"dp-accounting {acc_mod.DP_ACCOUNTING_VERSION} is not a mirrored release "
                    f"({', '.join(acc_mod._PLD_MIRRORED_VERSIONS)}): rfed composes with "
                    "dp-accounting's own accountant")
    events = ((EventSpec.make("gaussian", 2.0), 10),)
    assert type(_rfed_accountant(events, "replace_one", 1e-3)) is acc_mod._PLDAccountant


@pytest.mark.parametrize("neighboring", ["replace_one", "add_remove_one"])
@pytest.mark.parametrize(("noise_multiplier", "count", "vdi"), [
    (1.0, 1, 1e-3), (0.8, 3, 1e-2), (3.3, 7, 1e-3), (11.05, 300, 1e-3),
    (32.71644739219201, 2862, 1e-3), (32.71644739219201, 954, 1e-3), (4.0, 1, 1e-4),
    (150.0, 40, 1e-3), (0.3, 1, 1e-2),
])
def test_unsampled_gaussian_pld_is_dp_accountings_bit_for_bit(noise_multiplier, count, vdi,
                                                               neighboring):
    events = [(EventSpec.make("gaussian", noise_multiplier), count)]
    ours = _rfed_accountant(events, neighboring, vdi)
    theirs = _dpa_accountant(events, neighboring, vdi)
    assert type(ours) is acc_mod._PLDAccountant
    assert _dense(ours) == _dense(theirs)
    assert _readings(ours) == _readings(theirs)


@pytest.mark.parametrize("neighboring", ["replace_one", "add_remove_one"])
def test_composed_and_sampled_events_are_dp_accountings_bit_for_bit(neighboring):
    """Several unsampled Gaussians with a Poisson-sampled one (and, under add/remove, Laplace
    events): the unsampled ones through rfed's distribution, the others dp-accounting's."""
    events = [(EventSpec.make("gaussian", 4.0), 30), (EventSpec.make("gaussian", 9.5), 100),
              (EventSpec.make("gaussian", 1.5, "poisson", 0.05), 20)]
    if neighboring == "add_remove_one":
        events += [(EventSpec.make("laplace", 20.0), 3),
                   (EventSpec.make("laplace", 8.0, "poisson", 0.1), 5)]
    ours = _rfed_accountant(events, neighboring, 1e-3)
    theirs = _dpa_accountant(events, neighboring, 1e-3)
    assert _dense(ours) == _dense(theirs)
    assert _readings(ours) == _readings(theirs)


@pytest.mark.parametrize("adjacency", ["REPLACE", "REMOVE", "ADD"])
@pytest.mark.parametrize("sampling_prob", [1.0, 0.3])
@pytest.mark.parametrize("standard_deviation", [0.37, 1.0, 2.5e3])
def test_divergence_grid_is_dp_accountings_bit_for_bit(adjacency, sampling_prob,
                                                       standard_deviation):
    """The hockey-stick divergence on a grid with zero (both signs), negative, tiny and large
    losses, and on a scalar: the same bits as dp-accounting's per-point loop."""
    kind = getattr(_LOSS.AdjacencyType, adjacency)
    args = {"sensitivity": 1.0, "sampling_prob": sampling_prob, "adjacency_type": kind}
    ours = acc_mod._GaussianPrivacyLoss(standard_deviation, **args)
    theirs = _LOSS.GaussianPrivacyLoss(standard_deviation, **args)
    grid = np.concatenate([np.arange(-2000, 2001) * 1e-3, [0.0, -0.0, 5e-324, -5e-324, 40.0]])
    assert _bits(ours.get_delta_for_epsilon(grid)).tolist() == \
        _bits(theirs.get_delta_for_epsilon(grid)).tolist()
    assert _bits([ours.get_delta_for_epsilon(0.5)]).tolist() == \
        _bits([theirs.get_delta_for_epsilon(0.5)]).tolist()


# ---------------------------------------------------------------------- the memos' keys
_BASE = {"noise_multiplier": 6.0, "rate": 0.2, "count": 40, "neighboring": "add_remove_one",
         "delta": 1e-5, "vdi": 1e-3}
_CHANGES = [("delta", 1e-3), ("neighboring", "replace_one"), ("count", 41), ("rate", 0.25),
            ("vdi", 2e-3), ("noise_multiplier", 6.5)]


def _query(p):
    spec = EventSpec.make("gaussian", p["noise_multiplier"], "poisson", p["rate"])
    return [(spec, p["count"])], p["delta"], p["neighboring"], p["vdi"]


@pytest.mark.parametrize(("name", "value"), _CHANGES)
def test_pld_memo_answers_each_parameter_set_as_an_uncached_computation(name, value):
    """The base query is asked first (so the memo holds it); a query that differs in one
    parameter must read what a fresh accountant reads, not the base's value."""
    acc_mod._pld_accountant.cache_clear()
    changed = dict(_BASE, **{name: value})
    results = []
    for p in (_BASE, changed):
        events, delta, neighboring, vdi = _query(p)
        memo = (compose_epsilon(events, delta, "pld", neighboring, pld_discretization=vdi),
                compose_delta(events, 1.0, "pld", neighboring, pld_discretization=vdi))
        fresh = _dpa_accountant(events, neighboring, vdi)
        assert _bits(memo).tolist() == _bits([fresh.get_epsilon(delta),
                                              fresh.get_delta(1.0)]).tolist()
        results.append(memo)
    assert results[0] != results[1]


@pytest.mark.parametrize(("name", "value"), [c for c in _CHANGES if c[0] != "vdi"])
@pytest.mark.parametrize("method", ["pld", "auto"])
def test_certificate_memo_answers_each_parameter_set_as_an_uncached_computation(name, value,
                                                                                method):
    """The certificates of a run's reports (:func:`fed_accounting._certify`) likewise."""
    fed_accounting._CERTIFICATES.clear()
    changed = dict(_BASE, **{name: value})
    results = []
    for p in (_BASE, changed):
        events, delta, neighboring, _ = _query(p)
        memo = fed_accounting._certify(events, delta, neighboring, method)
        fresh = fed_accounting._certify_uncached(events, delta, neighboring, method, None)
        assert (memo.epsilon, memo.method, memo.delta, memo.neighboring) == \
            (fresh.epsilon, fresh.method, fresh.delta, fresh.neighboring)
        results.append(memo.epsilon)
    assert results[0] != results[1]
