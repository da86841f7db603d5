"""
Write your own private algorithm
================================

rfed's decentralized algorithms are built on a small public contract, and an algorithm of your
own uses the same one. This tutorial builds **noisy gossip SGD**: every agent takes a private
gradient step and one gossip step with its neighbours,

.. math:: x_i \\leftarrow \\mathrm{Exp}_{x_i}\\Big(\\sum_j w_{ij} \\mathrm{Log}_{x_i}(x_j)
          - \\eta\\, \\tilde g_i\\Big),

where :math:`\\tilde g_i` is agent :math:`i`'s minibatch gradient, clipped per sample to a public
level, averaged and noised. Three public names do the private part:

* :class:`~rfed.algorithms.decentralized.PrivateAlgorithm` takes the noise as keywords
  (``budget=PrivacyBudget(...)`` with the planned ``n_rounds=``, or ``noise_multiplier=``),
  plans it once at ``init`` (under a budget: the smallest noise whose planned run certifies the
  budget for the worst-off agent), opens the account and returns the privacy report;
* :class:`~rfed.algorithms.decentralized.PrivateGradient` is the private step, minibatch ->
  clip -> mean -> noise -> ledger event, drawn from each agent's keyed random stream (so the run
  is the same on any number of MPI processes); the stream is keyed by the round, so a step calls
  it once and returns ``state.advance(...)``, the next round's state (a second call in the same
  round is refused: it would draw the same noise again);
* its ``release(problem)`` states what one agent releases per round (a
  :class:`~rfed.algorithms.private.GaussianRelease`: its public sensitivity and sampling), which
  the calibration and the accountant read.

The same algorithm is the script ``examples/noisy_gossip_sgd.py``, which also runs it on MPI
ranks.
"""

# %%
# The algorithm
# -------------
import numpy as np

from rfed.algorithms.decentralized import PrivateAlgorithm, PrivateGradient
from rfed.networks.gossip import consensus_direction


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


# %%
# A certified run
# ---------------
# Eight agents on a ring each hold 60 records of a logistic regression whose features are
# projected to norm at most 1 (a public bound). The budget is given once, with the planned
# rounds; ``run`` runs them.
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks import Network, ring
from rfed.privacy import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression, split_evenly

features, labels = make_epsilon_like(8 * 60, 5, 3)
problem = LogisticRegression(*split_evenly(features, labels, 8, np.random.default_rng(3)),
                             L2Regularizer(0.1), feature_bound=1.0)
budget = PrivacyBudget(epsilon=2.0, delta=1e-5)
algorithm = NoisyGossipSGD(Network(ring(8)), lr=0.2, clip=1.0, batch_size=10, budget=budget,
                           n_rounds=20)
result = algorithm.run(problem, rng=np.random.default_rng(7), x0=np.zeros(5), eval_every=5)
report = result.privacy
print(report["label"], "for the target", report["target_epsilon"])
print("noise multiplier", round(report["noise_multiplier"], 3), "| accountant:",
      report["accountant"])
for record in result.history:
    print(f"round {record['round']:2d}: cost {record['cost']:.4f}, "
          f"consensus error {record['consensus_error']:.2e}")

# %%
# The report has the same keys for every rfed algorithm, private or not (listed in
# :mod:`rfed.algorithms.private`); what the guarantee rests on is part of it:
for line in report["assumptions"]:
    print("-", line)

# %%
# An audit of the claim
# ---------------------
# The certified epsilon is computed from what the code says it does; an audit checks the code.
# One round runs on 6000 agents on a ring, every agent a trial: they all start at the public
# point 0 with four records whose features are 1 and labels +1, and half of them hold a canary,
# record 0 with the label -1 (the worst case of the replace-one relation: at 0 its clipped
# gradient is the opposite of the others'). After one round each agent's iterate is
# ``-lr`` times its noisy gradient, the statistic the test thresholds. A broken variant adds
# four times less noise than its ledger records; the audit must catch it.
from rfed.privacy import epsilon_lower_bound

n_trials, records = 3000, 4
canary = np.arange(2 * n_trials) >= n_trials
canary_labels = np.ones((2 * n_trials, records))
canary_labels[canary, 0] = -1.0
trials = LogisticRegression(np.ones((2 * n_trials, records, 1)), canary_labels)
audit_budget = PrivacyBudget(epsilon=1.5, delta=1e-5)


def one_round(noise_factor):
    """The iterates after one certified round (the noise std scaled by ``noise_factor``)."""
    alg = NoisyGossipSGD(Network(ring(2 * n_trials)), lr=1.0, clip=0.5, batch_size=None,
                         budget=audit_budget, n_rounds=1)
    state = alg.init(trials, np.zeros(1), np.random.default_rng(0))
    state.noise_std *= noise_factor
    state = alg.step(trials, state)
    return state.x[:, 0], alg.privacy(state)["epsilon_certified"]


scores = {}
for name, factor in (("as claimed", 1.0), ("4x less noise than claimed", 0.25)):
    x1, certified = one_round(factor)
    audit = epsilon_lower_bound(x1[~canary], x1[canary], audit_budget.delta)
    scores[name] = (x1, audit)
    verdict = "REFUTES the claim" if audit.epsilon_lower > certified else "consistent with it"
    print(f"{name}: audit lower bound {audit.epsilon_lower:.3f} (95% confidence) vs "
          f"certified {certified:.3f}: {verdict}")

# %%
# The statistic under the two datasets: the honest run's distributions overlap enough that no
# test beats the certified bound; the broken run's separate.
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, (name, (x1, audit)) in zip(axes, scores.items(), strict=True):
    ax.hist(x1[~canary], bins=60, alpha=0.6, density=True, label="D0 (no canary)")
    ax.hist(x1[canary], bins=60, alpha=0.6, density=True, label="D1 (canary)")
    ax.axvline(audit.threshold, color="black", ls="--", label="chosen threshold")
    ax.set_title(f"{name}: lower bound {audit.epsilon_lower:.2f}\nvs certified "
                 f"eps={certified:.2f} (replace-one, delta=1e-5)", fontsize=9)
    ax.set_xlabel("iterate after one round (lr x noisy gradient), no unit")
axes[0].set_ylabel("density")
axes[0].legend(loc="upper left", fontsize=7)
fig.tight_layout()

# %%
# The same run on MPI ranks
# -------------------------
# The minibatches and the noise come from each agent's keyed stream ``(seed, agent, round,
# purpose)``, and every value crossing between agents goes through the network's
# communicator. So the example script prints the same digest of the final iterates in one
# process and on any number of ranks (the test suite checks 1, 2 and 3)::
#
#     python examples/noisy_gossip_sgd.py
#     mpiexec -n 3 python -m mpi4py examples/noisy_gossip_sgd.py --mpi
#
# Checkpoints (``run(..., checkpoint=FILE)``) and resuming work for it as for rfed's own
# algorithms: its state is the contract's
# :class:`~rfed.algorithms.decentralized.PrivateState`. A state with fields of your own (a
# dataclass subclassing it, named by the algorithm's ``state_class`` and filled by its
# ``start_fields``) is registered with :func:`rfed.state.register_state_type` before saving or
# loading (:doc:`../guide/files-and-checkpoints`).
