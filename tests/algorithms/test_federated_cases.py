"""The shared tests of every case of the federated registry ``federated_cases.CASES`` (adding a
federated trainer there is one line, and runs all of these on it)."""

from __future__ import annotations

import numpy as np
import pytest
from federated_cases import CASES, N_AGENTS, RECORDS, pca

import rfed.algorithms.federated.local as local_module
from rfed.algorithms.federated import LocalRunRelease
from rfed.algorithms.private import REPORT_KEYS, NoiseConfig, plan_noise
from rfed.manifolds import Euclidean
from rfed.privacy import certify
from rfed.privacy.audit import audit
from rfed.problems import FrechetMean
from rfed.state import dumps_state, loads_state

ROUNDS, DELTA = 3, 1e-5
START = np.eye(5)[0]


def _ids(cases):
    return [case.name for case in cases]


def _run(alg, rounds=ROUNDS, **kw):
    return alg.run(pca(), rounds, rng=3, x0=START, eval_every=rounds, **kw)


# ---------------------------------------------------------------------------- privacy
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_the_report_has_one_shape_private_or_not(case):
    private = case.report(_run(case.make(clip=1.0, noise_multiplier=1.5)).privacy)
    plain = _run(case.make(clip=1.0)).privacy
    assert set(REPORT_KEYS) <= set(private) and set(REPORT_KEYS) <= set(plain)
    assert private["private"] and 0 < private["epsilon_certified"] < np.inf
    assert private["level"] == case.level and private["calibration"] == "noise_multiplier"
    assert not plain["private"] and plain["epsilon_certified"] == np.inf
    assert private["rounds"] == plain["rounds"] == ROUNDS


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_the_budget_is_certified_between_0_9_and_1_of_the_target(case):
    alg = case.make(clip=1.0, budget=case.budget(1.0, DELTA), n_rounds=ROUNDS)
    rep = case.report(_run(alg).privacy)
    assert 0.9 <= rep["epsilon_certified"] <= 1.0 * (1 + 1e-12)
    assert rep["rounds"] == rep["planned_rounds"] == ROUNDS and rep["calibration"] == "budget"


@pytest.mark.parametrize("case", [c for c in CASES if c.level == "record"],
                         ids=_ids([c for c in CASES if c.level == "record"]))
def test_the_planned_multipliers_are_the_contracts_and_certify_the_budget(case):
    """The noise a run draws is the one plan_noise calibrates for a LocalRunRelease, and the
    events of that release at it certify the budget for every agent (an independent certify
    of the planned run, every agent in every round)."""
    problem = pca()
    budget = case.budget(1.0, DELTA)
    alg = case.make(clip=1.0, budget=budget, n_rounds=ROUNDS)
    state = alg.init(problem, START, np.random.default_rng(0))
    bare = case.make(clip=1.0).trainer.plan(problem, budget.neighboring, None,
                                            budget.public_sizes)
    noise = plan_noise(NoiseConfig(budget=budget, n_rounds=ROUNDS), LocalRunRelease(bare),
                       local_sizes=np.full(N_AGENTS, RECORDS), dim=4, rng=None,
                       active_rounds=alg.planned_participation(problem, state.seed))
    np.testing.assert_array_equal(state.plan.noise_multiplier, noise.noise_multipliers)
    for agent in range(N_AGENTS):
        events = LocalRunRelease(state.plan).events(float(noise.noise_multipliers[agent]),
                                                    RECORDS, ROUNDS)
        assert certify(events, DELTA, budget.neighboring, "auto").epsilon <= 1.0 + 1e-9


def _audit_runner(case, epsilon):
    """One round of one agent per trial on the Frechet mean on R^2 from x = 0: record 0 is
    ``+10 e_1``, or in the neighbour the case's other value (``-10 e_1``: replaced; ``0``: its
    gradient zero, as if removed), the other records at 0; the statistic is the released step
    along e_1 (one trial is one call of the trainer: with one agent sampled, the released
    global model is its local output)."""
    alg, other = case.audit(epsilon)
    e1 = np.array([1.0, 0.0])

    def problem(neighbour, n):
        pts = np.zeros((n, 4, 2))
        pts[:, 0] = (10.0 if neighbour == 0 else other) * e1
        return FrechetMean(Euclidean(2), pts)

    certified = alg.privacy_after(problem(0, 1), 1)["epsilon_certified"]

    def run_trials(neighbour, n, rng):
        prob = problem(neighbour, n)
        state = alg.init(prob, np.zeros(2), rng)
        out, _ = alg.trainer.train(prob, state.plan, np.zeros((n, 2)), np.arange(n), 0.5, rng)
        return -out @ e1 / 0.5

    return run_trials, certified


def _audited():
    return [pytest.param(c, marks=() if c.default else pytest.mark.slow, id=c.name)
            for c in CASES if c.audit is not None]


@pytest.mark.parametrize("case", _audited())
def test_an_audit_stays_below_the_certificate_and_catches_a_broken_variant(case, monkeypatch):
    run_trials, certified = _audit_runner(case, 1.5)
    assert 0.9 * 1.5 <= certified <= 1.5
    assert audit(run_trials, 3000, DELTA, rng=np.random.default_rng(1)).epsilon_lower < certified
    honest = local_module.gaussian_mechanism
    monkeypatch.setattr(local_module, "gaussian_mechanism",
                        lambda man, x, value, sigma, rng: honest(man, x, value,
                                                                 np.asarray(sigma) / 4.0, rng))
    assert audit(run_trials, 3000, DELTA, rng=np.random.default_rng(2)).epsilon_lower > certified


# ---------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_a_resumed_run_is_bit_identical(case):
    alg = case.make(clip=1.0, noise_multiplier=1.5)
    saved = []
    full = _run(alg, 4, checkpoint_every=2,
                checkpoint=lambda p: saved.append(dumps_state(p, kind="k")))
    payload = loads_state(saved[-1], kind="k")
    assert payload["round"] == 2
    resumed = _run(alg, 4, resume_from=payload)
    np.testing.assert_array_equal(resumed.state.x, full.state.x)
    assert case.report(alg.privacy(resumed.state)) == case.report(alg.privacy(full.state))


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    with pytest.raises(ValueError, match="'n_rounds'"):
        case.make(clip=1.0, budget=case.budget(1.0, DELTA))
    with pytest.raises(ValueError, match="'noise_multiplier'"):
        case.make(clip=1.0, noise_multiplier=-1.0)
    with pytest.raises(ValueError, match=f"'{case.clip_name}'"):
        case.make(clip=-1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="agents"):
        alg = case.make(clip=1.0, noise_multiplier=1.0)
        alg.n_sampled = N_AGENTS + 1
        alg.init(pca(), START, np.random.default_rng(0))
    alg = case.make(clip=1.0, budget=case.budget(1.0, DELTA), n_rounds=2)
    state = _run(alg, 2).state
    with pytest.raises(RuntimeError, match="n_rounds=2"):   # past the planned run
        alg.step(pca(), state)
