"""Audit the Gaussian mechanism: a Clopper-Pearson lower bound on epsilon beside the certified one.

Two neighbouring datasets whose query answers differ by the sensitivity 1; the mechanism adds
N(0, sigma^2). The certified accountant gives the epsilon the ledger would report; the audit runs
trials on both datasets, picks a threshold test on half of them and bounds epsilon from below on
the other half. Then a broken variant (noise 4x smaller than recorded) is audited: its lower bound
exceeds the certified epsilon, which refutes the (wrong) claim. The same two audits are repeated in
secure mode (OS randomness, discrete Gaussian on a grid, sensitivity inflated by the rounding).

Run:  python examples/audit_gaussian.py
"""

import numpy as np

from rfed.privacy import CertifiedAccountant, SecureRandom, gaussian_release, release_sensitivity
from rfed.privacy.audit import audit

SIGMA, DELTA, TRIALS = 4.0, 1e-5, 100_000

for secure in (False, True):
    rng = SecureRandom() if secure else np.random.default_rng(0)
    sensitivity = release_sensitivity(1.0, 1, rng)  # 1 + 2**-40 in secure mode
    # secure mode is certified through RDP (CKS 2020: the discrete Gaussian's Renyi divergence
    # is at most the continuous one's); research mode through PLD (tighter for one Gaussian)
    accountant = CertifiedAccountant("rdp" if secure else "pld", "add_remove_one",
                                     pld_discretization=1e-4)
    accountant.add_gaussian(SIGMA / sensitivity, sampling="none")  # multiplier = sigma / sens.
    certified = accountant.epsilon(DELTA)
    for factor in (1.0, 4.0):
        def run_trials(neighbour, n, rng, factor=factor):
            # trials batched in one array: f(D0) = 0, f(D1) = 1
            return gaussian_release(np.full(n, float(neighbour)), SIGMA / factor, rng)

        res = audit(run_trials, TRIALS, DELTA, confidence=0.95, rng=rng)
        label = ("secure, " if secure else "float,  ") + (
            "noise as recorded" if factor == 1 else f"{factor:g}x less noise than recorded")
        print(f"{label:<40s} certified eps {certified:.3f}   audit lower bound "
              f"{res.epsilon_lower:.3f} (confidence {res.confidence:g}, "
              f"{res.n_trials} trials/side)")
