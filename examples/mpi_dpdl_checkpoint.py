"""DPDL on 16 agents run by MPI ranks, checkpointed every 5 rounds; rerun it to resume.

    mpiexec -n 2 python -m mpi4py examples/mpi_dpdl_checkpoint.py CKPT   # start (or resume)
    python examples/mpi_dpdl_checkpoint.py --one-process                 # the same run

With ``CKPT`` present the run continues from it (on any number of ranks); either way the printed
digest of the final iterates is the one of the uninterrupted run and of the one-process run
(randomness is keyed by (seed, agent, round)). Interrupt a run (Ctrl-C aborts every rank) and
start it again to see it resume.
"""

import hashlib
import sys
from pathlib import Path

import numpy as np

from rfed.algorithms.decentralized import DPDL
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import circulant
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly

N_AGENTS, N_ROUNDS = 16, 20


def build(communicator=None):
    features, labels = make_epsilon_like(N_AGENTS * 50, 20, 3)
    parts = split_evenly(features, labels, N_AGENTS, np.random.default_rng(3))
    problem = LogisticRegression(*parts, L2Regularizer(0.1), feature_bound=1.0)
    graph = circulant(N_AGENTS, 2)
    network = Network(graph, metropolis_hastings_weights(graph), communicator=communicator)
    algorithm = DPDL(network, lr=0.1, alpha=2.0, batch_size=16, clip=1.0,
                     budget=PrivacyBudget(epsilon=4.0, delta=1e-5), n_rounds=N_ROUNDS)
    return algorithm, problem


def report(x: np.ndarray, privacy: dict) -> None:
    print(f"final iterates digest {hashlib.sha256(x.tobytes()).hexdigest()[:16]}; "
          f"certified eps={privacy['epsilon_certified']:.4f} (delta={privacy['delta']:g})")


if __name__ == "__main__":
    if "--one-process" in sys.argv:
        algorithm, problem = build()
        state = algorithm.init(problem, np.zeros(20), np.random.default_rng(7))
        for _ in range(N_ROUNDS):
            state = algorithm.step(problem, state)
        report(state.x, algorithm.privacy(state))
    else:
        from rfed.engines.mpi import MPICommunicator, run_mpi

        ckpt = Path(sys.argv[1] if len(sys.argv) > 1 else "dpdl_mpi.ckpt")
        algorithm, problem = build(MPICommunicator(N_AGENTS))
        result = run_mpi(algorithm, problem, N_ROUNDS, rng=np.random.default_rng(7),
                         x0=np.zeros(20), checkpoint_every=5, checkpoint=ckpt,
                         resume_from=ckpt if ckpt.exists() else None)
        if result is not None:   # rank 0
            report(result["x"], result["privacy"])
