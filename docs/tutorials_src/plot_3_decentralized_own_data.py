"""
Decentralized learning on your own data
=======================================

Twelve hospitals want one classifier without a server and without showing each other a record.
Each holds its own table; they talk only to their neighbours on a ring-like graph. This tutorial
brings a numpy table of your own (here scikit-learn's breast-cancer table, shipped with
scikit-learn) into rfed: a public bound on each record, a split over the agents, a network, and
DP-DPSGD, a decentralized private SGD, at a certified budget for every agent's records
(replace-one relation).
"""

# %%
# Your data, with a public bound per record
# -----------------------------------------
# Privacy needs a bound on what one record can change that does not come from the records
# themselves. Scale each row to unit norm (a per-record map, computed from that row alone):
# ``feature_bound=1`` then bounds every per-record gradient of the logistic loss by 1.
import numpy as np
from sklearn.datasets import load_breast_cancer

from rfed.algorithms.decentralized import DPDPSGD
from rfed.algorithms.private import certifies
from rfed.networks import Network, circulant, metropolis_hastings_weights
from rfed.privacy import PrivacyBudget
from rfed.problems import L2Regularizer, LogisticRegression, split_evenly

table = load_breast_cancer()
labels = np.where(table.target == 1, 1.0, -1.0)  # labels in {-1, +1}
rng = np.random.default_rng(0)
part = rng.choice(3, size=len(labels), p=[0.1, 0.2, 0.7])  # public, test, private
# centre by the mean of a declared public split (never of the private records), then scale
# every row to unit norm
features = table.data - table.data[part == 0].mean(axis=0)
features /= np.linalg.norm(features, axis=1, keepdims=True)
test, private = part == 1, part == 2
a, b = split_evenly(features[private], labels[private], 12, rng)  # 12 agents, equal shares
problem = LogisticRegression(a, b, L2Regularizer(1e-3), feature_bound=1.0)
print(f"{problem.n_agents} agents x {a.shape[1]} records, {a.shape[2]} features")

# %%
# The network
# -----------
# Each agent talks to the two nearest agents on each side of a ring; the Metropolis-Hastings
# weights make the mixing matrix symmetric and doubly stochastic.
graph = circulant(12, 2)
network = Network(graph, metropolis_hastings_weights(graph))

# %%
# Private training at several budgets
# -----------------------------------
# Every agent clips each per-record gradient to ``clip`` and adds Gaussian noise to the mean of
# its minibatch before it leaves; the noise is calibrated so that the 150 planned rounds certify
# the budget for every agent.
rounds, results = 150, {}
for epsilon in (1.0, 4.0, None):
    budget = PrivacyBudget(epsilon=epsilon, delta=1e-4) if epsilon else None
    algorithm = DPDPSGD(network, lr=0.05, beta=0.5, batch_size=8, clip=1.0, budget=budget,
                        n_rounds=rounds if budget else None)
    results[epsilon] = algorithm.run(problem, n_rounds=rounds, rng=1, eval_every=10)

for result in results.values():
    x = result.x  # the agents' mean model
    accuracy = problem.accuracy(x, features[test], labels[test])
    privacy = result.privacy
    label = (f"certified eps={privacy['epsilon_certified']:.3f} (delta={privacy['delta']:g}, "
             f"{privacy['neighboring']})" if certifies(privacy) else "non-private")
    print(f"{label}: test accuracy {accuracy:.3f}")

# %%
# Learning curves
# ---------------
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
for result in results.values():
    privacy = result.privacy
    label = (f"DP-DPSGD, certified eps={privacy['epsilon_certified']:.2g} (replace-one, "
             f"delta={privacy['delta']:g})" if certifies(privacy) else "DP-DPSGD without noise")
    ax.plot([h["round"] for h in result.history], [h["cost"] for h in result.history],
            label=label)
ax.axhline(problem.reference_cost(), color="black", ls="--", label="non-private optimum")
ax.set_xlabel("round")
ax.set_ylabel("training objective (logistic loss + l2)")
ax.set_title("12 agents on a circulant graph")
ax.legend(loc="upper right", fontsize=7)
fig.tight_layout()
