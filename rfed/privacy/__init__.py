"""Differential privacy for rfed: clipping, tangent-space mechanisms, accountants, calibration.

Every noise scale used in rfed is traceable to a formula with its source, and every run can
state (epsilon, delta) together with the accountant that produced it.

Modules
-------
:mod:`~rfed.privacy.clipping`
    Per-sample clipping by the Riemannian norm; per-coordinate clipping.
:mod:`~rfed.privacy.mechanisms`
    Gaussian mechanism on a tangent space, flat Gaussian and Laplace releases, the Laplace
    schedule, and the sensitivity to record for each release (:func:`release_sensitivity`).
:mod:`~rfed.privacy.secure`
    Secure mode: :class:`SecureRandom` (OS CSPRNG, refuses floating-point noise draws) and the
    discrete Gaussian / Laplace of Canonne, Kamath and Steinke 2020 on a grid.
:mod:`~rfed.privacy.accountants`
    Certified accountant on dp-accounting (RDP and PLD) and its conventions.
:mod:`~rfed.privacy.papers`
    The five papers' closed forms (PriRFed, DO-ADP, DPDL, DP-DDA, DP-DGT), paper vs corrected.
:mod:`~rfed.privacy.budget`
    Budget-first API: the user's whole-run (epsilon, delta), delta checks, certify, calibrate.
:mod:`~rfed.privacy.calibration`
    Smallest noise for a target budget; inverses of the closed forms.
:mod:`~rfed.privacy.ledger`
    Per-agent, per-round record of what was spent, and the run's privacy report.
:mod:`~rfed.privacy.audit`
    Empirical privacy auditing: a Clopper-Pearson lower bound on epsilon from trials on
    neighbouring datasets with a canary record (Jagielski et al. 2020, Nasr et al. 2021).

Noise for a target budget
-------------------------
Certified (dp-accounting), e.g. DP-SGD-style steps with Poisson sampling::

    from rfed.privacy import calibrate_noise_multiplier, clipped_mean_sensitivity
    z = calibrate_noise_multiplier(1.0, 1e-5, sampling_rate=0.01, steps=1000)  # RDP: 1.5131
    sigma = z * clipped_mean_sensitivity(bound=1.0, batch_size=100, neighboring="add_remove_one")

With sampling without replacement (the papers' minibatches) the relation must be replace-one and
the method RDP::

    z = calibrate_noise_multiplier(1.0, 1e-5, sampling_rate=0.5, steps=300,
                                   sampling="without_replacement", dataset_size=70)

A paper's own formula, e.g. PriRFed's DP-RSGD noise and the run-level guarantee of Thm 4.2::

    from rfed.privacy import papers
    sigma_i = papers.dp_rsgd_sigma(epsilon=0.15, delta=1e-5, clip=1.0, n_local=70, local_steps=5)
    papers.prirfed_privacy(n_agents=16, s=1, epsilon=0.15, delta=1e-5, rounds=100,
                           delta_hat=1e-3).epsilon                      # 0.384

A run's privacy report
----------------------
Algorithms feed a :class:`PrivacyLedger` as they run; read it at any time::

    ledger = PrivacyLedger(n_agents=16, method="rdp", neighboring="replace_one")
    ledger.record(t, agents=selected, sigma=sigma_i, sensitivity=2 * tau / b,
                  sampling="without_replacement", dataset_size=70, sample_size=b, count=K)
    ledger.epsilon(1e-5)              # overall: max over agents (disjoint data)
    ledger.epsilon(1e-5, agent=3)     # one agent
    print(ledger.report(1e-5))        # table naming the accountant and its assumptions
    json.dump(ledger.to_dict(), f)    # save with the results; PrivacyLedger.from_dict resumes

The report lists the accountant (RDP or PLD, dp-accounting version), the neighbouring relation,
the noise-multiplier convention, every event with its counts, the per-agent epsilons, the overall
epsilon, and any paper closed form the algorithm stored with ``add_paper_bound``, side by side.

Research runs and secure runs
-----------------------------
Seeded runs (``np.random.default_rng(seed)``) are for research: the noise is floating point and
the run can be replayed from its seed. Secure mode draws from the OS CSPRNG and releases discrete
noise on a grid, so no output is impossible for a neighbouring input (Mironov 2012)::

    from rfed.privacy import make_generator, gaussian_mechanism, release_sensitivity
    rng = make_generator(secure=True)                        # SecureRandom(grid=2**-40)
    noisy = gaussian_mechanism(manifold, x, value, sigma, rng)
    ledger.record(t, agents=a, sigma=sigma,
                  sensitivity=release_sensitivity(2 * tau / b, manifold.dim, rng), ...)

A SecureRandom refuses ``standard_normal``/``normal``/``laplace`` (:class:`SecureModeError`), so
a noise path that bypasses the mechanisms fails loudly instead of leaking.

Checking a claim empirically
----------------------------
``rfed.privacy.audit`` runs a mechanism on two neighbouring datasets many times and returns a
Clopper-Pearson lower bound on epsilon; it must stay below the certified epsilon::

    from rfed.privacy.audit import audit
    res = audit(run_trials, n_trials=100_000, delta=1e-5, rng=np.random.default_rng(0))
    res.epsilon_lower, res.confidence
"""

from rfed.privacy.accountants import (
    CertifiedAccountant,
    EventSpec,
    clipped_mean_sensitivity,
    compose_delta,
    compose_epsilon,
    gaussian_epsilon,
)
from rfed.privacy.audit import AuditResult, epsilon_lower_bound
from rfed.privacy.budget import (
    Calibration,
    Certificate,
    PrivacyBudget,
    calibrate,
    certify,
    check_delta_for_dataset,
    default_delta,
)
from rfed.privacy.calibration import (
    calibrate_noise_multiplier,
    calibrate_sigma,
    dpdgt_theta0,
    prirfed_local_epsilon,
)
from rfed.privacy.clipping import clip_by_norm, clip_coordinates
from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE, PrivacyLedger
from rfed.privacy.mechanisms import (
    GaussianNoise,
    LaplaceSchedule,
    gaussian_mechanism,
    gaussian_release,
    laplace_mechanism,
    laplace_noise,
    release_sensitivity,
    secure_generator,
)
from rfed.privacy.papers import PrivacyConditionWarning
from rfed.privacy.secure import SecureModeError, SecureRandom, make_generator

__all__ = [
    "OUTSIDE_THE_GUARANTEE",
    "AuditResult",
    "Calibration",
    "Certificate",
    "CertifiedAccountant",
    "EventSpec",
    "GaussianNoise",
    "LaplaceSchedule",
    "PrivacyBudget",
    "PrivacyConditionWarning",
    "PrivacyLedger",
    "SecureModeError",
    "SecureRandom",
    "calibrate",
    "calibrate_noise_multiplier",
    "calibrate_sigma",
    "certify",
    "check_delta_for_dataset",
    "clip_by_norm",
    "clip_coordinates",
    "clipped_mean_sensitivity",
    "compose_delta",
    "compose_epsilon",
    "default_delta",
    "dpdgt_theta0",
    "epsilon_lower_bound",
    "gaussian_epsilon",
    "gaussian_mechanism",
    "gaussian_release",
    "laplace_mechanism",
    "laplace_noise",
    "make_generator",
    "papers",
    "prirfed_local_epsilon",
    "release_sensitivity",
    "secure_generator",
]

from rfed.privacy import papers  # noqa: E402  (module re-export)
