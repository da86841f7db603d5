"""The MPI engine gives bit-identical iterates and identical privacy reports on any number of
ranks, equal to the one-process run (tests launch ``mpiexec`` as a subprocess with a timeout).

Run as a script under ``mpiexec`` (``--child OUT``) it runs every case with the MPI engine and
rank 0 pickles the results to ``OUT``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import circulant
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.privacy.budget import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly
from rfed.problems.pca import SpherePCA

N_AGENTS, N_ROUNDS, SEED = 16, 6, 2024
MPIEXEC = Path(sys.executable).with_name("mpiexec")


def _logreg():
    x, y = make_epsilon_like(16 * 12, 10, 3)
    f, lab = split_evenly(x, y, N_AGENTS, np.random.default_rng(3))
    return LogisticRegression(f, lab, L2Regularizer(0.1))


def _cases(network: Network):
    """(name, algorithm, problem, x0) of every case, built on ``network``."""
    prob = _logreg()
    return [
        ("doadp-budget-topk", DOADP(network, alpha=0.05, p=0.7, k=3, grad_bound=1.0,
                                    budget=PrivacyBudget(4.0, 1e-5), n_rounds=N_ROUNDS),
         prob, np.zeros(10)),
        ("doadp-randk", DOADP(network, alpha=0.05, p=0.8, k=4, sparsifier="rand_k",
                              grad_bound=1.0, noise_multiplier=1.5, batch_size=2),
         prob, np.zeros(10)),
        # on the sphere the consensus goes through gather_from_neighbors and Log per arc
        ("doadp-sphere", DOADP(network, alpha=0.05, p=0.8, k=2, grad_bound=1.0,
                               noise_multiplier=1.0), _sphere_pca(), np.eye(5)[0]),
    ]


def _sphere_pca():
    z = np.random.default_rng(4).standard_normal((N_AGENTS, 10, 5)) * [3.0, 1, 1, 1, 1]
    return SpherePCA(z)


def _graph():
    g = circulant(N_AGENTS, 2)
    return g, metropolis_hastings_weights(g)


def run_in_process() -> dict:
    g, w = _graph()
    out = {}
    for name, alg, prob, x0 in _cases(Network(g, w)):
        state = alg.init(prob, x0, np.random.default_rng(SEED))
        for _ in range(N_ROUNDS):
            state = alg.step(prob, state)
        out[name] = {"x": state.x, "output": alg.output(prob, state),
                     "privacy": alg.privacy(state),
                     "messages": state.comm.total_stats()}
    return out


def run_child(path: str) -> None:
    from rfed.engines.mpi import MPICommunicator, run_mpi

    g, w = _graph()
    out = {}
    for name, alg, prob, x0 in _cases(Network(g, w, communicator=MPICommunicator(N_AGENTS))):
        res = run_mpi(alg, prob, N_ROUNDS, rng=np.random.default_rng(SEED), x0=x0)
        if res is not None:
            out[name] = {"x": res["x"], "output": res["output"], "privacy": res["privacy"],
                         "messages": res["comm"]}
    if out:
        with open(path, "wb") as fh:
            pickle.dump(out, fh)


def _strip(report):
    return None if report is None else {k: v for k, v in report.items()}


@pytest.fixture(scope="module")
def reference():
    return run_in_process()


@pytest.mark.skipif(not MPIEXEC.exists() and shutil.which("mpiexec") is None,
                    reason="no mpiexec (pip install 'rfed[mpi]')")
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_mpi_runs_are_bit_identical_to_one_process(reference, ranks, tmp_path):
    mpiexec = str(MPIEXEC) if MPIEXEC.exists() else shutil.which("mpiexec")
    out = tmp_path / "out.pkl"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run(
        [mpiexec, "-n", str(ranks), sys.executable, "-m", "mpi4py", __file__, "--child",
         str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = pickle.loads(out.read_bytes())
    assert set(got) == set(reference)
    for name, ref in reference.items():
        np.testing.assert_array_equal(got[name]["x"], ref["x"], err_msg=name)
        np.testing.assert_array_equal(got[name]["output"], ref["output"], err_msg=name)
        assert got[name]["privacy"] == ref["privacy"], name
        assert got[name]["messages"] == ref["messages"], name


def test_cases_are_private_and_move(reference):
    """The compared runs are not trivial: noise is on, agents disagree, iterates left x0."""
    for name, ref in reference.items():
        assert ref["privacy"]["epsilon_certified"] > 0, name
        assert np.ptp(ref["x"], axis=0).max() > 1e-3, name
        assert ref["messages"]["messages"] > 0, name


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        run_child(sys.argv[2])
