"""Write your own private algorithm: noisy gossip SGD on rfed's public contract.

    python examples/noisy_gossip_sgd.py                        # certified run, one process
    mpiexec -n 3 python -m mpi4py examples/noisy_gossip_sgd.py --mpi   # the same run on 3 ranks

Each agent takes a private gradient step (minibatch -> clip -> mean -> Gaussian noise -> ledger
event, :class:`~rfed.algorithms.decentralized.PrivateGradient`) and one gossip step with its
neighbours. Everything private comes from the contract: the noise is calibrated once for the
budget of the planned run, every round is charged to the agents' ledgers, and the report is
certified by the accountant. The printed digest of the final iterates is the same on any number
of MPI ranks and in one process. The tutorial "Write your own private algorithm" of the
documentation walks through this file.
"""

import argparse
import hashlib

import numpy as np

from rfed.algorithms.decentralized import PrivateAlgorithm, PrivateGradient
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks import Network, ring
from rfed.networks.gossip import consensus_direction
from rfed.privacy import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly


class NoisyGossipSGD(PrivateAlgorithm):
    """``x_i <- Exp_{x_i}(sum_j w_ij Log_{x_i}(x_j) - lr g~_i)``, ``g~_i`` the noisy clipped
    minibatch gradient of agent ``i``."""

    name = "noisy gossip SGD"

    def __init__(self, network, *, lr, clip, batch_size, **privacy):
        super().__init__(network, **privacy)
        self.lr = lr
        # its statement (sensitivity 2 clip, batch_size records) is the algorithm's release
        self.gradient = PrivateGradient(clip, batch_size)

    def step(self, problem, state):
        g = self.gradient(problem, state)       # noisy clipped mean, charged to the ledger
        v = consensus_direction(problem.manifold, self.weights, state.x, comm=state.comm)
        return state.advance(x=problem.manifold.exp(state.x, v - self.lr * g))


N_AGENTS, N_ROUNDS, DIM = 8, 20, 5
BUDGET = PrivacyBudget(epsilon=2.0, delta=1e-5)


def build(budget=BUDGET, communicator=None):
    """The algorithm on a ring of 8 agents and their logistic regression (60 records each)."""
    features, labels = make_epsilon_like(N_AGENTS * 60, DIM, 3)
    problem = LogisticRegression(*split_evenly(features, labels, N_AGENTS,
                                               np.random.default_rng(3)),
                                 L2Regularizer(0.1), feature_bound=1.0)
    network = Network(ring(N_AGENTS), communicator=communicator)
    algorithm = NoisyGossipSGD(network, lr=0.2, clip=1.0, batch_size=10, budget=budget,
                               n_rounds=N_ROUNDS)
    return algorithm, problem


def digest(x):
    """The first 16 hex digits of the SHA-256 of the agents' iterates."""
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mpi", action="store_true", help="run on the MPI ranks of mpiexec")
    args = parser.parse_args()
    if args.mpi:
        from rfed.engines.mpi import MPICommunicator, run_mpi

        algorithm, problem = build(communicator=MPICommunicator(N_AGENTS))
        out = run_mpi(algorithm, problem, N_ROUNDS, rng=np.random.default_rng(7),
                      x0=np.zeros(DIM))
        if out is None:    # ranks other than 0
            return
        x, privacy = out["x"], out["privacy"]
    else:
        algorithm, problem = build()
        result = algorithm.run(problem, rng=np.random.default_rng(7), x0=np.zeros(DIM),
                               eval_every=N_ROUNDS)
        x, privacy = result.state.x, result.privacy
    print(f"digest {digest(x)}; {privacy['label']}; target eps={privacy['target_epsilon']}")


if __name__ == "__main__":
    main()
