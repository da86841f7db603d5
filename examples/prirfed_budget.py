"""Private federated PCA with a certified budget: PriRFed + DP-RSGD, budget first.

The user states the whole run's (epsilon, delta); PriRFed calibrates the noise multiplier of every
local step over the 40 planned rounds with dp-accounting, so that the finished run is
(epsilon, delta)-DP for each agent's dataset (record level, replace-one). The clip level is a
public number (never read from the data). 8 agents hold 2,000 samples each in R^10 whose
second-moment matrix has a clear top eigenvector; every round all agents take one noisy clipped
Riemannian SGD step on a minibatch of 200 drawn without replacement.
"""

import numpy as np

from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.privacy import PrivacyBudget
from rfed.problems import SpherePCA

rng = np.random.default_rng(0)
spectrum = np.array([1.0, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05])
basis = np.linalg.qr(rng.standard_normal((10, 10)))[0]
z = rng.standard_normal((8, 2000, 10)) * np.sqrt(spectrum) @ basis.T  # (agents, N_i, d + 1)
problem = SpherePCA(z)

rounds = 40
algorithm = PriRFed(
    DPRSGD(steps=1, batch_size=200, clip=1.0),  # public clip level tau = 1
    n_sampled=None, step_size=0.5,
    budget=PrivacyBudget(epsilon=1.0, delta=1e-5), n_rounds=rounds,
)
result = algorithm.run(problem, n_rounds=rounds, rng=1, eval_every=rounds)
start, final = result.history[0], result.history[-1]
privacy = result.privacy
print(f"certified eps={privacy['epsilon_certified']:.3f} (delta={privacy['delta']:.0e}), "
      f"target {privacy['target_epsilon']}, noise multiplier {privacy['noise_multiplier']:.3f}")
print(f"accountant: {privacy['accountant']}")
print(f"excess risk: random start {start['excess_risk']:.3e} -> private run "
      f"{final['excess_risk']:.3e}; distance to the top eigenvector {start['dist_to_ref']:.3f} -> "
      f"{final['dist_to_ref']:.3f}")
