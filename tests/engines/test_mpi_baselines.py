"""The baselines (MUFFLIATO, DPDO, DP-CGA) on the MPI engine: bit-identical iterates, outputs,
privacy reports and message counts on any number of ranks, equal to the one-process run; and a
run that crashed mid-way on 3 ranks resumes from its checkpoint on 2 ranks and ends as the
uninterrupted run (as tests/engines/test_mpi_engine.py shows for the papers' algorithms; the
2-rank run and the resume are marked slow: ``pytest -m slow``).

Run as a script under ``mpiexec``: ``--child OUT`` runs every case and rank 0 pickles the results;
``--resume-child OUT CKPT PHASE`` runs the checkpoint cases (``crash``: save every 2 rounds and
raise on every rank after round 5; ``resume``: continue from the checkpoint).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPCGA, DPDO, Muffliato
from rfed.networks.comm import InProcessCommunicator
from rfed.privacy.budget import PrivacyBudget
from tests.engines.test_mpi_engine import (
    N_AGENTS,
    N_ROUNDS,
    SEED,
    _assert_same,
    _graph,
    _launch,
    _logreg,
    _report,
    _sphere_pca,
    needs_mpi,
)


def _cases(network):
    logreg, sphere = _logreg(), _sphere_pca()
    g, w = _graph()
    return [
        ("muffliato-budget", Muffliato(network(g, w), lr=0.3, batch_size=4, clip=1.0,
                                       gossip_steps=3, budget=PrivacyBudget(4.0, 1e-5),
                                       n_rounds=N_ROUNDS), logreg, np.zeros(10)),
        ("muffliato-sphere", Muffliato(network(g, w), lr=0.05, batch_size=None, clip=1.0,
                                       gossip_steps=2, noise_multiplier=1.0), sphere,
         np.eye(5)[0]),
        ("dpdo-budget", DPDO(network(g, w), lr=0.3, lr_decay=0.99, noise_decay=0.995, clip=1.0,
                             budget=PrivacyBudget(4.0, 1e-5), n_rounds=N_ROUNDS), logreg,
         np.zeros(10)),
        ("dpdo-sphere", DPDO(network(g, w), lr=0.05, clip=1.0, noise_multiplier=3.0), sphere,
         np.eye(5)[0]),
        ("dpcga", DPCGA(network(g, w), lr=0.1, batch_size=4, clip=0.5, noise_multiplier=1.0,
                        max_chunk_pairs=7), logreg, np.zeros(10)),
        ("dpcga-sphere", DPCGA(network(g, w), lr=0.05, batch_size=3, clip=1.0,
                               noise_multiplier=1.0), sphere, np.eye(5)[0]),
    ]


RESUME_CASES = ("muffliato-budget", "dpdo-budget", "dpcga")


def run_in_process() -> dict:
    from rfed.networks.network import Network

    out = {}
    for name, alg, prob, x0 in _cases(lambda g, w: Network(g, w,
                                                           communicator=InProcessCommunicator(
                                                               N_AGENTS))):
        state = alg.init(prob, x0, np.random.default_rng(SEED))
        for _ in range(N_ROUNDS):
            state = alg.step(prob, state)
        out[name] = {"x": alg._output_points(state), "output": alg.output(prob, state),
                     "privacy": _report(alg, state), "messages": state.comm.total_stats()}
    return out


def _mpi_cases():
    from rfed.engines.mpi import MPICommunicator, _algorithm_comm, shard_for_rank
    from rfed.networks.network import Network
    from rfed.problems.base import Problem

    shards: dict[int, object] = {}
    cases = []
    for name, alg, prob, x0 in _cases(
            lambda g, w: Network(g, w, communicator=MPICommunicator(N_AGENTS))):
        if id(prob) not in shards:
            if isinstance(prob, Problem):
                prob.reference_cost()
            shards[id(prob)] = shard_for_rank(prob, _algorithm_comm(alg))
        cases.append((name, alg, shards[id(prob)], x0))
    return cases


def _result(res: dict) -> dict:
    """What rank 0 keeps of a run of :func:`rfed.engines.mpi.run_mpi`."""
    return {"x": res["x"], "output": res["output"], "privacy": res["privacy"],
            "messages": res["comm"]}


def _dump(out: dict, path: str) -> None:
    if out:   # rank 0 only
        with open(path, "wb") as fh:
            pickle.dump(out, fh)


def run_child(path: str) -> None:
    from rfed.engines.mpi import run_mpi

    out = {}
    for name, alg, prob, x0 in _mpi_cases():
        res = run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0)
        if res is not None:
            out[name] = _result(res)
    _dump(out, path)


class _Crash(Exception):
    pass


def run_resume_child(path: str, ckpt: str, phase: str) -> None:
    from rfed.engines.mpi import run_mpi

    def crash_after_5(t, state):
        if t == 5:
            raise _Crash

    out = {}
    cases = {c[0]: c for c in _mpi_cases()}
    for name in RESUME_CASES:
        _, alg, prob, x0 = cases[name]
        file = f"{ckpt}.{name}"
        if phase == "crash":
            try:
                run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0,
                        checkpoint_every=2, checkpoint=file, callback=crash_after_5)
            except _Crash:
                continue
        res = run_mpi(alg, prob, N_ROUNDS, rng=None, resume_from=file)
        if res is not None:
            out[name] = _result(res)
    _dump(out, path)


@pytest.fixture(scope="module")
def reference():
    return run_in_process()


def test_cases_are_private_and_move(reference):
    for name, ref in reference.items():
        assert ref["privacy"]["epsilon_certified"] > 0, name
        assert np.ptp(ref["x"], axis=0).max() > 1e-3, name
        assert ref["messages"]["messages"] > 0, name


@needs_mpi
@pytest.mark.parametrize("ranks", [pytest.param(2, marks=pytest.mark.slow), 3])
def test_mpi_runs_are_bit_identical_to_one_process(reference, ranks, tmp_path):
    out = tmp_path / "out.pkl"
    _launch(ranks, "--child", str(out), script=__file__)
    _assert_same(pickle.loads(out.read_bytes()), reference, list(reference))


@needs_mpi
@pytest.mark.slow
def test_crashed_mpi_run_resumes_on_other_ranks_bit_identically(reference, tmp_path):
    out, ckpt = tmp_path / "out.pkl", tmp_path / "ckpt"
    _launch(3, "--resume-child", str(out), str(ckpt), "crash", script=__file__)
    for name in RESUME_CASES:
        assert Path(f"{ckpt}.{name}").exists(), name
    _launch(2, "--resume-child", str(out), str(ckpt), "resume", script=__file__)
    _assert_same(pickle.loads(out.read_bytes()), reference, RESUME_CASES)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        run_child(sys.argv[2])
    elif sys.argv[1:2] == ["--resume-child"]:
        run_resume_child(*sys.argv[2:5])
