"""
Your first private run: PCA on the sphere
=========================================

Eight agents hold 2,000 records each; the leading eigenvector of their pooled second-moment
matrix is a point on the sphere. PriRFed with DP-RSGD local training finds it while every
agent's records stay private. The user states the privacy budget of the whole run; rfed
calibrates the noise with the certified accountant so that the finished run is
(epsilon, delta)-differentially private for every agent's dataset (replace-one relation: two
datasets are neighbours when one record is replaced), and the report says so.
"""

# %%
# Data and problem
# ----------------
# Each agent's records ``z`` are draws with a decaying spectrum; ``SpherePCA`` is the problem
# ``min_x -x^T (sum z z^T / N) x`` on the unit sphere.
import numpy as np

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA

rng = np.random.default_rng(0)
spectrum = np.array([1.0, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05])
basis = np.linalg.qr(rng.standard_normal((10, 10)))[0]
z = rng.standard_normal((8, 2000, 10)) * np.sqrt(spectrum) @ basis.T  # 8 agents
problem = SpherePCA(z)

# %%
# A private run
# -------------
# The clip level is a public number (never read from the private data); the planned number of
# rounds is part of the budget, so the noise is calibrated once for the whole run.
algorithm = PriRFed(DPRSGD(steps=1, batch_size=200, clip=1.0), n_sampled=None, step_size=0.5,
                    budget=PrivacyBudget(epsilon=1.0, delta=1e-5), n_rounds=40)
result = algorithm.run(problem, n_rounds=40, rng=1, eval_every=4)

report = result.privacy
print(f"certified epsilon {report['epsilon_certified']:.3f} at delta {report['delta']:g}, "
      f"relation {report['neighboring']}, accountant: {report['accountant']}")
print("excess risk:", result.history[0]["excess_risk"], "->", result.history[-1]["excess_risk"])

# %%
# What the report rests on
# ------------------------
# ``result.privacy`` lists the assumptions the figure rests on: what is treated as public, which
# relation, which accountant.
for line in report["assumptions"]:
    print("-", line)

# %%
# The curve, beside the same run without noise
# ---------------------------------------------
import matplotlib.pyplot as plt

reference = PriRFed(DPRSGD(steps=1, batch_size=200), n_sampled=None,
                    step_size=0.5).run(problem, n_rounds=40, rng=1, eval_every=4)
fig, ax = plt.subplots(figsize=(6, 4.6))
curves = ((result, f"PriRFed DP-RSGD, certified eps={report['epsilon_certified']:.2f} "
                   f"(replace-one, delta={report['delta']:g})", "o-"),
          (reference, "the same without noise (non-private)", "k--"))
for run, label, style in curves:
    ax.semilogy([h["round"] for h in run.history], [h["excess_risk"] for h in run.history],
                style, label=label)
ax.axhline(result.history[0]["excess_risk"], color="grey", ls=":", label="random start")
ax.set_xlabel("round")
ax.set_ylabel("excess risk f(x) - f(x*)")
ax.set_title("Private federated PCA on the sphere S^9")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8)
fig.tight_layout()
