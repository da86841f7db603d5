"""
A private Frechet mean on the hyperboloid
=========================================

Ten agents each hold 300 points of the hyperbolic plane (the Lorentz model ``H^2``); each point
is one person's record. The Frechet (Karcher) mean minimizes the mean squared geodesic distance
to all points. PriRFed computes it without a server ever seeing a record: every round each agent
runs one DP-RSGD step on its points (per-record Riemannian gradients ``-2 Log_x(a)`` clipped in
the Riemannian norm, tangent Gaussian noise isotropic in the metric) and the server averages
the agents' points on the manifold. The noise is calibrated so that the whole run is
(epsilon, delta)-DP for every agent's dataset under the replace-one relation.
"""

# %%
# The data
# --------
# Points scattered around a centre; the centre is unknown to the algorithm.
import numpy as np

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.manifolds import Hyperboloid, PoincareBall
from rfed.privacy import PrivacyBudget
from rfed.problems import FrechetMean

H = Hyperboloid(2)
rng = np.random.default_rng(0)
centre = H.exp(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.8, 0.3]))  # a point of H^2
spread = H.tangent_gaussian(np.broadcast_to(centre, (10, 300, 3)), sigma=0.6, rng=rng)
points = H.exp(np.broadcast_to(centre, (10, 300, 3)), spread)  # 10 agents x 300 points
problem = FrechetMean(H, points)

# %%
# Private runs at three budgets
# -----------------------------
# The clip level ``clip = 2.0`` is a public choice: a per-record gradient has norm
# ``2 dist(x, a)``, so it bounds the records within distance 1 of the iterate and shortens the
# others. Each budget is certified for the whole run of 60 planned rounds. Every run starts from
# the same public point ``x0``.
rounds = 60
x0 = H.exp(np.array([1.0, 0.0, 0.0]), np.array([0.0, -0.3, -0.4]))
runs = {}
for epsilon in (0.5, 2.0, 8.0):
    algorithm = PriRFed(DPRSGD(steps=1, batch_size=None, clip=2.0), n_sampled=None,
                        step_size=0.2, budget=PrivacyBudget(epsilon=epsilon, delta=1e-5),
                        n_rounds=rounds)
    runs[epsilon] = algorithm.run(problem, n_rounds=rounds, rng=1, x0=x0, eval_every=5)
non_private = PriRFed(DPRSGD(steps=1, batch_size=None), n_sampled=None,
                      step_size=0.2).run(problem, n_rounds=rounds, rng=1, x0=x0, eval_every=5)

for epsilon, result in runs.items():
    p = result.privacy
    print(f"budget eps={epsilon:g}: certified eps={p['epsilon_certified']:.3f} "
          f"(delta={p['delta']:g}, {p['neighboring']}), final distance to the Karcher mean "
          f"{result.history[-1]['dist_to_ref']:.4f}")
print(f"non-private: final distance {non_private.history[-1]['dist_to_ref']:.2e}")

# %%
# Where the estimates land
# ------------------------
# The Poincare disk shows the hyperbolic plane conformally (left); the middle panel zooms on the
# Karcher mean, where the estimates approach the non-private mean as the budget grows.
import matplotlib.pyplot as plt

disk = PoincareBall.from_hyperboloid
mean = disk(problem.reference_point())
shown = disk(points.reshape(-1, 3))
fig, (ax, zoom, ax2) = plt.subplots(1, 3, figsize=(13, 4.4))
for panel in (ax, zoom):
    panel.scatter(shown[:, 0], shown[:, 1], s=2, color="lightgrey", label="records (all agents)")
    panel.scatter(*disk(x0), marker="s", s=50, color="grey", label="public start x0")
    panel.scatter(*mean, marker="*", s=200, color="black", label="Karcher mean (non-private)")
    for result in runs.values():
        panel.scatter(*disk(result.x), s=50,
                      label=f"certified eps={result.privacy['epsilon_certified']:.2g} "
                            f"(replace-one, delta=1e-5)")
    panel.set_aspect("equal")
    panel.set_xlabel("Poincare disk coordinate 1 (dimensionless)")
ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="black", lw=0.8))
ax.set_xlim(-1.05, 1.05)
ax.set_ylim(-1.05, 1.05)
ax.set_ylabel("Poincare disk coordinate 2 (dimensionless)")
ax.set_title("Records and estimates on H^2")
zoom.set_xlim(mean[0] - 0.06, mean[0] + 0.06)
zoom.set_ylim(mean[1] - 0.06, mean[1] + 0.06)
zoom.set_title("Zoom on the Karcher mean")
handles, labels = ax.get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)

for result in runs.values():
    ax2.semilogy([h["round"] for h in result.history],
                 [h["dist_to_ref"] for h in result.history],
                 label=f"certified eps={result.privacy['epsilon_certified']:.2g}")
ax2.semilogy([h["round"] for h in non_private.history],
             [h["dist_to_ref"] for h in non_private.history], "k--", label="non-private")
ax2.set_xlabel("round")
ax2.set_ylabel("geodesic distance to the Karcher mean")
ax2.set_title("Convergence (replace-one, delta=1e-5)")
ax2.legend(loc="lower left", fontsize=7)
fig.tight_layout(rect=(0, 0.12, 1, 1))
