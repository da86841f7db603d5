"""DO-ADP or DPDL on 16 agents at a certified budget, run by MPI ranks (or by one process).

    mpiexec -n 2 python -m mpi4py examples/mpi_decentralized.py             # DO-ADP, any ranks
    python examples/mpi_decentralized.py --one-process                      # the same run
    mpiexec -n 2 python -m mpi4py examples/mpi_decentralized.py --algorithm dpdl \\
        --checkpoint dpdl.ckpt                                              # start or resume

Every rank owns a contiguous block of agents and holds only their data (the problem's shard);
randomness is keyed by (seed, agent, round), so the printed digest of the final iterates is the
same for every number of ranks and in one process. With ``--checkpoint FILE`` the run saves every
5 rounds and, when FILE exists, continues from it on any number of ranks: interrupt it (Ctrl-C
aborts every rank), start it again, and the digest is still the uninterrupted run's.
"""

import argparse
import hashlib
from pathlib import Path

import numpy as np

from rfed.algorithms.decentralized import DOADP, DPDL
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import circulant
from rfed.networks.mixing import metropolis_hastings_weights
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly

N_AGENTS, N_ROUNDS = 16, 20


def build(algorithm: str, communicator=None):
    features, labels = make_epsilon_like(N_AGENTS * 50, 20, 3)
    parts = split_evenly(features, labels, N_AGENTS, np.random.default_rng(3))
    problem = LogisticRegression(*parts, L2Regularizer(0.1), feature_bound=1.0)
    graph = circulant(N_AGENTS, 2)
    network = Network(graph, metropolis_hastings_weights(graph), communicator=communicator)
    if algorithm == "doadp":
        alg = DOADP(network, alpha=0.1, p=0.8, k=5, grad_bound=1.0,
                    budget=PrivacyBudget(epsilon=2.0, delta=1e-5), n_rounds=N_ROUNDS)
    else:
        alg = DPDL(network, lr=0.1, alpha=2.0, batch_size=16, clip=1.0,
                   budget=PrivacyBudget(epsilon=4.0, delta=1e-5), n_rounds=N_ROUNDS)
    return alg, problem


def report(x: np.ndarray, privacy: dict) -> None:
    print(f"final iterates digest {hashlib.sha256(x.tobytes()).hexdigest()[:16]}; "
          f"certified eps={privacy['epsilon_certified']:.4f} (delta={privacy['delta']:g})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", choices=("doadp", "dpdl"), default="doadp")
    parser.add_argument("--one-process", action="store_true",
                        help="run every agent in this process (no MPI)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="save every 5 rounds to this file; resume from it if it exists")
    args = parser.parse_args()
    if args.one_process:
        algorithm, problem = build(args.algorithm)
        state = algorithm.init(problem, np.zeros(20), np.random.default_rng(7))
        for _ in range(N_ROUNDS):
            state = algorithm.step(problem, state)
        report(state.x, algorithm.privacy(state))
        return
    from rfed.engines.mpi import MPICommunicator, run_mpi

    ckpt = args.checkpoint
    algorithm, problem = build(args.algorithm, MPICommunicator(N_AGENTS))
    result = run_mpi(algorithm, problem, N_ROUNDS, rng=np.random.default_rng(7),
                     x0=np.zeros(20), checkpoint_every=5 if ckpt else 0, checkpoint=ckpt,
                     resume_from=ckpt if ckpt is not None and ckpt.exists() else None)
    if result is not None:   # rank 0
        report(result["x"], result["privacy"])


if __name__ == "__main__":
    main()
