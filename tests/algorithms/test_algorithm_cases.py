"""The shared tests of every case of the registry ``algorithm_cases.CASES`` (adding an algorithm
there is one line, and runs all of these on it).

Run as a script under ``mpiexec`` (``--child NAME``), it runs one case with the MPI engine and
rank 0 prints the digest of the final iterates and the certified epsilon.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from algorithm_cases import BY_NAME, CASES, logreg

from rfed.algorithms.decentralized import PrivateGradient
from rfed.algorithms.private import REPORT_KEYS
from rfed.networks import Network
from rfed.networks.graphs import ring
from rfed.privacy import PrivacyBudget, epsilon_lower_bound
from rfed.problems.linear import L2Regularizer, LogisticRegression
from rfed.state import dumps_state, loads_state

N_AGENTS, ROUNDS, DELTA = 6, 4, 1e-5
MPIEXEC = Path(sys.executable).with_name("mpiexec")
ROOT = Path(__file__).resolve().parents[2]


def _ids(cases):
    return [case.name for case in cases]


def _long(cases):
    """The cases with their long tests slow-marked unless the case is a default one."""
    return [pytest.param(c, marks=() if c.default else pytest.mark.slow, id=c.name)
            for c in cases]


def _build(case, n=N_AGENTS, clip=1.0, batch_size=4, **privacy):
    problem = case.problem(n)
    batch = case.batch(batch_size, getattr(problem, "n_max", None))
    return case.make(Network(case.graph(n)), clip=clip, batch_size=batch, **privacy), problem


def _run(alg, problem, rounds=ROUNDS, **kw):
    return alg.run(problem, rounds, rng=3, x0=np.zeros(problem.manifold.point_shape),
                   eval_every=rounds, with_reference=False, **kw)


# ---------------------------------------------------------------------------- privacy
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_the_report_has_one_shape_private_or_not(case):
    alg, problem = _build(case, noise_multiplier=1.5)
    private = _run(alg, problem).privacy
    alg, problem = _build(case)
    plain = _run(alg, problem).privacy
    assert set(REPORT_KEYS) <= set(private) and set(REPORT_KEYS) <= set(plain)
    assert private["private"] and 0 < private["epsilon_certified"] < np.inf
    assert not plain["private"] and plain["epsilon_certified"] == np.inf
    assert private["rounds"] == plain["rounds"] == ROUNDS


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_the_data_leaves_an_agent_only_through_its_noisy_releases(case, monkeypatch):
    """With every noisy release of the private gradient replaced by a fixed value, a run on
    two neighbouring data sets (one record of agent 0 changed) is the same: what the agents
    send is post-processing of their releases. Without the stand-in the runs differ."""
    alg, problem = _build(case, noise_multiplier=1.5)
    if not isinstance(getattr(alg, "gradient", None), PrivateGradient):
        pytest.skip(f"{case.name} draws its own noise (its test: test_decentralized_privacy)")
    features = problem.data["features"].copy()
    features[0, 0] = -features[0, 0]
    other = type(problem)(features, problem.data["labels"], L2Regularizer(0.1),
                          feature_bound=1.0)

    def final(p):
        return _run(case.make(Network(case.graph(N_AGENTS)), clip=1.0, batch_size=4,
                              noise_multiplier=1.5), p, rounds=3).state

    real = [final(p) for p in (problem, other)]
    assert not np.array_equal(real[0].x, real[1].x)
    monkeypatch.setattr(PrivateGradient, "noisy_values",
                        lambda self, problem, x, owners, idx, std, noise: np.full_like(x, 0.25))
    fixed = [final(p) for p in (problem, other)]
    for name in alg.state_rows:
        np.testing.assert_array_equal(getattr(fixed[0], name), getattr(fixed[1], name))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_the_budget_is_certified_between_0_9_and_1_of_the_target(case):
    # whole local data sets: the unsubsampled accounting is the fast one
    alg, problem = _build(case, batch_size=None, budget=PrivacyBudget(1.0, DELTA),
                          n_rounds=ROUNDS)
    rep = alg.run(problem, rng=3, x0=np.zeros(problem.manifold.point_shape),
                  eval_every=ROUNDS, with_reference=False).privacy
    assert 0.9 <= rep["epsilon_certified"] <= 1.0 * (1 + 1e-12)
    assert rep["rounds"] == rep["planned_rounds"] == ROUNDS and rep["calibration"] == "budget"


def _audit_scores(case, noise_factor, n_trials=1500, records=4):
    """One round on ``2 n_trials`` agents, the second half holding a canary (record 0's label
    flipped: at the public start 0 its clipped gradient is the opposite of the others', the
    worst case of replace-one with clip 1/2; with batch-level clipping the canary's feature is
    the case's ``canary_feature``, large enough for its record to turn the clipped batch mean
    around); each agent's statistic is the sum of the first coordinates of every release of
    its data (the optimal test of their composition)."""
    n = 2 * n_trials
    canary = np.arange(n) >= n_trials
    labels = np.ones((n, records))
    labels[canary, 0] = -1.0
    features = np.ones((n, records, 1))
    features[canary, 0, 0] = case.canary_feature
    problem = LogisticRegression(features, labels)
    alg = case.make(Network(ring(n)), clip=0.5, batch_size=case.batch(None, records),
                    budget=PrivacyBudget(1.5, DELTA), n_rounds=1)
    released = []
    real = PrivateGradient.noisy_values

    def spy(self, problem, x, owners, idx, std, noise):
        out = real(self, problem, x, owners, idx, std, noise)
        released.append((np.asarray(owners).copy(), np.asarray(out)[:, 0].copy()))
        return out

    PrivateGradient.noisy_values = spy
    try:
        state = alg.init(problem, np.zeros(1), np.random.default_rng(0))
        state.noise_std *= noise_factor
        state = alg.step(problem, state)
    finally:
        PrivateGradient.noisy_values = real
    owners = np.concatenate([o for o, _ in released])
    values = np.concatenate([v for _, v in released])
    stat = np.bincount(owners, weights=values, minlength=n)
    return stat[~canary], stat[canary], alg.privacy(state)["epsilon_certified"]


@pytest.mark.parametrize("case", _long([c for c in CASES if c.audit]))
def test_an_audit_stays_below_the_certificate_and_catches_a_broken_variant(case):
    """The generic audit (Gaussian releases of the PrivateGradient), or the case's own scorer
    (``audit`` callable: e.g. the Laplace releases of DPDO and DP-DGT, through
    ``algorithm_cases.laplace_noise``), at the budget 1.5 of a one-round run."""
    scores = case.audit if callable(case.audit) else partial(_audit_scores, case)
    s0, s1, eps = scores(1.0)
    assert 0.9 * 1.5 <= eps <= 1.5
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower < eps
    # 4x less noise than the ledger records (the ledger is unchanged)
    s0, s1, eps_broken = scores(0.25)
    assert eps_broken == eps
    assert epsilon_lower_bound(s0, s1, DELTA).epsilon_lower > eps


def _trainers():
    from rfed.algorithms.centralized import DPSGD
    from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
    from rfed.problems import SpherePCA

    pca = SpherePCA(np.random.default_rng(0).standard_normal((4, 10, 5)))
    start = np.eye(5)[0]
    return {
        "PriRFed DP-RSGD": (lambda sigma: PriRFed(DPRSGD(steps=1, batch_size=None, clip=1.0,
                                                         sigma=sigma or None), 2, 0.1),
                               pca, start),
        "PriRFed DP-RSVRG": (lambda sigma: PriRFed(DPRSVRG(steps=1, inner_steps=1,
                                                           clip=1.0, clip_full=1.0,
                                                           sigma=sigma or None), 2, 0.1),
                             pca, start),
        "DP-SGD (centralized)": (lambda sigma: DPSGD(step_size=0.1, batch_size=5, clip=1.0,
                                                     noise_multiplier=sigma or None),
                                 logreg(1), np.zeros(4)),
    }


@pytest.mark.parametrize("name", ["PriRFed DP-RSGD", "PriRFed DP-RSVRG", "DP-SGD (centralized)"])
def test_federated_and_centralized_trainers_report_the_same_shape(name):
    make, problem, start = _trainers()[name]
    private = make(0.8).run(problem, 3, rng=0, x0=start, eval_every=3).privacy
    plain = make(0.0).run(problem, 3, rng=0, x0=start, eval_every=3).privacy
    assert set(REPORT_KEYS) <= set(private) and set(REPORT_KEYS) <= set(plain)
    assert private["private"] and 0 < private["epsilon_certified"] < np.inf
    assert not plain["private"] and plain["epsilon_certified"] == np.inf


# ---------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_a_resumed_run_is_bit_identical(case):
    alg, problem = _build(case, noise_multiplier=1.5)
    saved = []
    # serialized when taken, as a file checkpoint is (the live state goes on changing)
    full = _run(alg, problem, 6, checkpoint_every=3,
                checkpoint=lambda p: saved.append(dumps_state(p, kind="k")))
    payload = loads_state(saved[-1], kind="k")
    assert len(saved) == 1 and payload["round"] == 3
    resumed = _run(alg, problem, 6, resume_from=payload)
    np.testing.assert_array_equal(resumed.x, full.x)
    assert alg.privacy(resumed.state) == alg.privacy(full.state)


# ---------------------------------------------------------------------------- MPI
def _digest(x) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def _mpi_child(name: str) -> None:
    from rfed.engines.mpi import MPICommunicator, run_mpi

    case = BY_NAME[name]
    problem = case.problem(N_AGENTS)
    alg = case.make(Network(case.graph(N_AGENTS), communicator=MPICommunicator(N_AGENTS)),
                    clip=1.0, batch_size=4, noise_multiplier=1.5)
    out = run_mpi(alg, problem, ROUNDS, rng=np.random.default_rng(3),
                  x0=np.zeros(problem.manifold.point_shape))
    if out is not None:
        print(f"digest {_digest(out['output'])} eps {out['privacy']['epsilon_certified']!r}")


@pytest.mark.parametrize("case", _long(CASES))
def test_mpi_ranks_give_the_one_process_run(case):
    if not MPIEXEC.exists():
        pytest.skip("no mpiexec beside the interpreter")
    alg, problem = _build(case, noise_multiplier=1.5)
    res = _run(alg, problem)
    expected = f"digest {_digest(res.x)} eps {res.privacy['epsilon_certified']!r}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    # 2 ranks of 3 agents each: neighbours on one rank and across ranks (uneven blocks and
    # 1-3 ranks are the tutorial's test, test_write_your_own.py)
    out = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "-m", "mpi4py", __file__,
                          "--child", case.name], capture_output=True, text=True, timeout=300,
                         env=env, check=True)
    assert [line for line in out.stdout.splitlines() if line.startswith("digest")] == [expected]


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    with pytest.raises(TypeError, match="budget="):
        _build(case, epsilon=1.0)
    with pytest.raises(ValueError, match="'n_rounds'"):
        _build(case, budget=PrivacyBudget(1.0, DELTA))
    with pytest.raises(ValueError, match="'noise_multiplier'"):
        _build(case, noise_multiplier=-1.0)
    with pytest.raises(ValueError, match=f"'{case.clip_name}'"):
        _build(case, clip=-1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="agents"):
        alg, _ = _build(case, noise_multiplier=1.0)
        problem = case.problem(N_AGENTS + 2)
        alg.init(problem, np.zeros(problem.manifold.point_shape), 0)
    alg, problem = _build(case, batch_size=None, budget=PrivacyBudget(1.0, DELTA), n_rounds=2)
    state = _run(alg, problem, 2).state
    with pytest.raises(RuntimeError, match="budget"):   # past the planned run
        alg.step(problem, state)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", required=True)
    _mpi_child(parser.parse_args().child)
