"""Empirical audits of every algorithm that accepts ``neighboring='add_remove_one'``.

For each (``rfed.experiments.audits.add_remove_configuration``): ``D1`` is ``D0`` plus one record,
both runs declare the same public size; the audit's Clopper-Pearson lower bound must stay below
the certified epsilon. The variant that computes the noise, the normaliser and the rate from
each dataset's own true size (what rfed did before public sizes were required) must be caught:
its lower bound exceeds the epsilon it certifies. Trials are few here (a few seconds each);
large counts run under ``-m slow``.
"""

import numpy as np
import pytest

from rfed.experiments.audits import (
    ADD_REMOVE_ALGORITHMS,
    PRIVATE_SIZE_VARIANTS,
    add_remove_configuration,
    audit_main,
)
from rfed.privacy.audit import audit

DELTA = 1e-5


@pytest.mark.parametrize("algorithm", ADD_REMOVE_ALGORITHMS)
def test_add_remove_audit_stays_below_the_certificate(algorithm):
    cfg = add_remove_configuration(algorithm, 1.0)
    certified = cfg.certified_epsilon(DELTA)
    assert 0.99 <= certified <= 1.0 + 1e-9
    res = audit(cfg.run_trials, 3000, DELTA, rng=np.random.default_rng(2))
    assert res.epsilon_lower < certified, (res.epsilon_lower, certified)


@pytest.mark.parametrize("algorithm", PRIVATE_SIZE_VARIANTS)
def test_add_remove_audit_catches_noise_from_the_private_size(algorithm):
    """One record more changes the noise std (and the normaliser) when they come from the
    true size: the released vector's squared norm tells the neighbours apart."""
    cfg = add_remove_configuration(algorithm, 1.0, private_size=True)
    certified = cfg.certified_epsilon(DELTA)
    res = audit(cfg.run_trials, 3000, DELTA, rng=np.random.default_rng(3))
    assert res.epsilon_lower > 2 * certified, (res.epsilon_lower, certified)


@pytest.mark.parametrize("algorithm", ["dp-rsgd", "dp-rsvrg"])
def test_add_remove_audit_catches_noise_four_times_smaller_than_recorded(algorithm):
    cfg = add_remove_configuration(algorithm, 1.0, noise_factor=4.0)
    res = audit(cfg.run_trials, 6000, DELTA, rng=np.random.default_rng(4))
    assert res.epsilon_lower > cfg.certified_epsilon(DELTA)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ADD_REMOVE_ALGORITHMS)
def test_add_remove_audit_with_many_trials_stays_below_the_certificate(algorithm):
    cfg = add_remove_configuration(algorithm, 2.0)
    trials = 40_000 if algorithm not in ("dp-sgd", "analyze-gauss", "noisy-power",
                                         "log-euclidean") else 10_000
    res = audit(cfg.run_trials, trials, DELTA, rng=np.random.default_rng(5), chunk_size=10_000)
    assert res.epsilon_lower < cfg.certified_epsilon(DELTA)


def test_add_remove_secure_configuration_stays_below_its_rdp_certificate():
    from rfed.privacy.secure import SecureRandom

    cfg = add_remove_configuration("dp-rsgd", 1.0, secure=True)
    assert cfg.method == "rdp"
    res = audit(cfg.run_trials, 1000, DELTA, rng=SecureRandom())
    assert res.epsilon_lower < cfg.certified_epsilon(DELTA) <= 1.0 + 1e-9


def test_rfed_audit_add_remove_names(capsys):
    assert audit_main(["dp-rsgd-add-remove", "--trials", "2000"]) == 0
    assert "consistent" in capsys.readouterr().out
    assert audit_main(["dp-rsgd-add-remove-private-size", "--trials", "2000"]) == 1
    out = capsys.readouterr().out
    assert "REFUTED" in out and "BROKEN" in out
    with pytest.raises(ValueError, match="private_size"):
        add_remove_configuration("analyze-gauss", private_size=True)
    with pytest.raises(ValueError, match="algorithm"):
        add_remove_configuration("doadp")
