"""
Auditing a privacy claim
========================

A certified epsilon is an upper bound computed from what the code says it does. An audit checks
the code itself: it runs the mechanism many times on two neighbouring datasets, tries to tell
them apart from the outputs, and turns the test's error rates into a statistical *lower* bound
on epsilon (Clopper-Pearson confidence bounds on the rates, as in Jagielski, Ullman and Oprea
2020 and Nasr et al. 2021). A lower bound above the certified epsilon refutes the claim; a lower
bound below it is consistent with it, and an audit that catches a deliberately broken variant
shows the test has the power to refute.

This tutorial audits one private step of DP-RSGD, PriRFed's local trainer, on the sphere, and a
broken copy of it that adds four times less noise than its ledger records.
"""

# %%
# Two neighbouring datasets with a canary
# ---------------------------------------
# One agent holds ten records of a PCA problem on the sphere ``S^4``. The two datasets differ
# in one record, the canary: its two versions have opposite clipped gradients at the public
# starting point, the worst case of the replace-one relation.
import numpy as np

from rfed.algorithms.federated import DPRSGD
from rfed.privacy import CertifiedAccountant
from rfed.privacy.audit import audit, canary_gradient_direction, tangent_statistic
from rfed.problems import SpherePCA

n_records, dim, clip, step = 10, 4, 1.0, 0.1
z = np.random.default_rng(12345).standard_normal((1, n_records, dim + 1)) / np.sqrt(dim + 1)
x0 = np.eye(dim + 1)[0]  # the public start
u = np.eye(dim + 1)[1]
canaries = [2.0 * (x0 - u) / np.sqrt(2.0), 2.0 * (x0 + u) / np.sqrt(2.0)]
problems = []
for canary in canaries:
    data = z.copy()
    data[0, 0] = canary
    problems.append(SpherePCA(data))
records = [{"z": c, "sq": float(c @ c)} for c in canaries]
direction, gap = canary_gradient_direction(problems[0], x0, records[0], records[1], clip)
print(f"the canary moves the clipped gradient sum by {gap:.3f} = 2 x clip")

# %%
# The claim
# ---------
# DP-RSGD adds Gaussian noise of standard deviation ``sigma`` to the mean of the clipped
# per-record gradients. Under replace-one the mean moves by at most ``2 clip / N``, so the
# noise multiplier is ``sigma N / (2 clip)``; the certified accountant turns one such release
# into an epsilon at ``delta = 1e-5``.
sigma, delta = 0.8, 1e-5
accountant = CertifiedAccountant("pld", "replace_one", pld_discretization=1e-4)
accountant.add_gaussian(sigma / (2 * clip / n_records), sampling="none")
certified = accountant.epsilon(delta)
print(f"claim: one step is ({certified:.3f}, {delta:g})-DP under replace-one")

# %%
# The audit
# ---------
# Each trial runs the real trainer for one step from ``x0`` and records the released noisy
# gradient's component along the canary's direction; trials run batched.
man = problems[0].manifold


def trials_of(trainer):
    def run_trials(neighbour, n, rng):
        problem = problems[neighbour]
        plan = trainer.plan(problem)
        x = np.broadcast_to(x0, (n, dim + 1)).copy()
        x1, _ = trainer.train(problem, plan, x, np.zeros(n, dtype=int), step, rng)
        released = -man.log(x, x1) / step  # the noised clipped mean gradient of the step
        return tangent_statistic(man, x0, released, direction)

    return run_trials


honest = DPRSGD(steps=1, batch_size=None, clip=clip, sigma=sigma)
broken = DPRSGD(steps=1, batch_size=None, clip=clip, sigma=sigma / 4)  # the claim says sigma
results = {}
for name, trainer in (("as claimed", honest), ("4x less noise than claimed", broken)):
    res = audit(trials_of(trainer), 20_000, delta, confidence=0.95,
                rng=np.random.default_rng(0))
    results[name] = res
    verdict = "REFUTES the claim" if res.epsilon_lower > certified else "consistent with it"
    print(f"{name}: audit lower bound {res.epsilon_lower:.3f} (95% confidence, "
          f"{res.n_trials} evaluation trials per side) vs certified {certified:.3f}: {verdict}")

# %%
# What the test saw
# -----------------
# The statistic's distributions under the two datasets: the honest mechanism's overlap enough
# that no test beats the certified bound; the broken one's separate.
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, (name, trainer) in zip(axes, (("as claimed", honest),
                                      ("4x less noise than claimed", broken)), strict=True):
    rng = np.random.default_rng(1)
    for neighbour in (0, 1):
        scores = trials_of(trainer)(neighbour, 5000, rng)
        ax.hist(scores, bins=60, alpha=0.6, density=True,
                label=f"dataset D{neighbour} (canary version {neighbour})")
    ax.axvline(results[name].threshold, color="black", ls="--", label="chosen threshold")
    ax.set_title(f"{name}: lower bound {results[name].epsilon_lower:.2f}\n"
                 f"vs certified eps={certified:.2f} (replace-one, delta={delta:g})", fontsize=9)
    ax.set_xlabel("released gradient along the canary direction")
axes[0].set_ylabel("density")
axes[0].legend(loc="upper left", fontsize=7)
fig.tight_layout()
