"""Audit the Gaussian mechanism: a Clopper-Pearson lower bound on epsilon beside the certified one.

Two neighbouring datasets whose query answers differ by the sensitivity 1; the mechanism adds
N(0, sigma^2). The certified accountant gives the epsilon the ledger would report; the audit runs
trials on both datasets, picks a threshold test on half of them and bounds epsilon from below on
the other half. Then a broken variant (noise 4x smaller than recorded) is audited: its lower bound
exceeds the certified epsilon, which refutes the (wrong) claim.

Run:  python examples/audit_gaussian.py
"""

import numpy as np

from rfed.privacy import CertifiedAccountant
from rfed.privacy.audit import audit

SIGMA, DELTA, TRIALS = 4.0, 1e-5, 100_000

accountant = CertifiedAccountant("pld", "add_remove_one", pld_discretization=1e-4)
accountant.add_gaussian(SIGMA / 1.0, sampling="none")  # noise multiplier = sigma / sensitivity
certified = accountant.epsilon(DELTA)

for factor in (1.0, 4.0):
    def run_trials(neighbour, n, rng, factor=factor):
        # trials batched in one array: f(D0) = 0, f(D1) = 1
        return neighbour + (SIGMA / factor) * rng.standard_normal(n)

    res = audit(run_trials, TRIALS, DELTA, confidence=0.95, rng=np.random.default_rng(0))
    label = "as recorded" if factor == 1 else f"{factor:g}x less noise than recorded"
    print(f"noise {label:<32s} certified eps {certified:.3f}   audit lower bound "
          f"{res.epsilon_lower:.3f} (confidence {res.confidence:g}, {res.n_trials} trials/side)")
