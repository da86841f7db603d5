r"""The empirical privacy audits of rfed's algorithms, and the ``rfed audit NAME`` command.

Each named configuration (:data:`CONFIGURATIONS`) runs one of rfed's private algorithms (or the
Gaussian mechanism, :func:`rfed.privacy.audit.gaussian_configuration`) many times on two
neighbouring datasets with a worst-case canary record and hands the scores to
:func:`rfed.privacy.audit.audit`, which returns a Clopper-Pearson lower bound on epsilon
(Jagielski, Ullman and Oprea 2020; Nasr et al. 2021; see :mod:`rfed.privacy.audit` for the
method and its references) to set beside the epsilon the certified accountant reports:

* ``gaussian`` and ``dp-rsgd-onestep`` (replace-one), with ``--noise-factor`` (noise smaller
  than the ledger records: a broken variant the audit must catch) and ``--secure``;
* ``NAME-add-remove`` for every algorithm that accepts ``neighboring='add_remove_one'``
  (:data:`ADD_REMOVE_ALGORITHMS`, :func:`add_remove_configuration`), and
  ``NAME-add-remove-private-size``, the variant whose noise, normaliser or rate comes from the
  private dataset size (:data:`PRIVATE_SIZE_VARIANTS`): the audit must refute it.

::

    rfed audit dp-rsgd-onestep                    # certified epsilon beside the lower bound
    rfed audit dp-rsgd-onestep --noise-factor 4   # a deliberately broken variant: refuted

The configurations import algorithms and problems, so they live here, above
:mod:`rfed.privacy` (whose audit library imports neither).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from rfed.algorithms.baselines import AnalyzeGauss, LogEuclideanPrivateMean, NoisyPowerMethod
from rfed.algorithms.baselines.spd_mean import spd_exp, spd_log
from rfed.algorithms.centralized import DPSGD
from rfed.algorithms.federated import DPRSGD, DPRSVRG, PriRFed
from rfed.manifolds.spd import SPD
from rfed.privacy import (
    CertifiedAccountant,
    EventSpec,
    PrivacyBudget,
    SecureRandom,
    certify,
    release_sensitivity,
)
from rfed.privacy._checks import check_real
from rfed.privacy.audit import (
    AuditConfiguration,
    audit,
    canary_gradient_direction,
    gaussian_configuration,
    tangent_statistic,
)
from rfed.problems.frechet import FrechetMean
from rfed.problems.linear import LogisticRegression
from rfed.problems.pca import SpherePCA

__all__ = [
    "ADD_REMOVE_ALGORITHMS",
    "AR_DELTA",
    "CONFIGURATIONS",
    "PRIVATE_SIZE_VARIANTS",
    "add_remove_configuration",
    "audit_main",
]


def _dp_rsgd_onestep_config(sigma: float, noise_factor: float, secure: bool) -> AuditConfiguration:
    """One full-batch DP-RSGD step of one agent on a tiny SpherePCA with a worst-case canary.

    The canaries ``z = c (x0 cos(pi/4) +- u sin(pi/4))`` have per-sample gradients
    ``-+ c^2 u`` at the public start ``x0``; with ``c^2 >= tau`` both clip to ``-+ tau u``, so
    the clipped-mean difference is ``2 tau / N``, the full replace-one sensitivity.
    """
    n_records, dim, tau, step = 10, 4, 1.0, 0.1
    data_rng = np.random.default_rng(12345)  # the public part of the fixture, not the noise
    z = data_rng.standard_normal((1, n_records, dim + 1)) / np.sqrt(dim + 1)
    x0 = np.zeros(dim + 1)
    x0[0] = 1.0
    u = np.zeros(dim + 1)
    u[1] = 1.0
    c = 2.0 * np.sqrt(tau)
    canaries = [c * (x0 - u) / np.sqrt(2.0), c * (x0 + u) / np.sqrt(2.0)]
    problems = []
    for canary in canaries:
        zk = z.copy()
        zk[0, 0] = canary
        problems.append(SpherePCA(zk))
    records = [{"z": w, "sq": float(w @ w)} for w in canaries]
    direction, gap = canary_gradient_direction(problems[0], x0, records[0], records[1], tau)
    trainer = DPRSGD(steps=1, batch_size=None, clip=tau, sigma=sigma / noise_factor)
    sensitivity = 2.0 * tau / n_records
    acc = CertifiedAccountant("rdp" if secure else "pld", "replace_one", pld_discretization=1e-4)
    if secure:
        sensitivity = float(release_sensitivity(sensitivity, dim, SecureRandom()))
    acc.add_gaussian(sigma / sensitivity, sampling="none")
    man = problems[0].manifold

    def run_trials(neighbour: int, n: int, rng: Any) -> np.ndarray:
        problem = problems[neighbour]
        plan = trainer.plan(problem)
        agents = np.zeros(n, dtype=int)  # n independent runs of agent 0, batched
        x = np.broadcast_to(x0, (n, dim + 1)).copy()
        x1, _ = trainer.train(problem, plan, x, agents, step, rng)
        released = -man.log(x, x1) / step  # the noised clipped mean gradient of the step
        return tangent_statistic(man, x0, released, direction)

    label = "secure" if secure else "floating-point"
    broken = f"; BROKEN: actual noise {noise_factor:g}x smaller" if noise_factor != 1 else ""
    desc = (f"DP-RSGD, one full-batch step, SpherePCA S^{dim} with {n_records} records, "
            f"clip {tau:g}, sigma {sigma:g} (noise multiplier {sigma / sensitivity:.3g} under "
            f"replace-one), canary gap {gap:.3g} = 2 tau, {label}{broken}")
    return AuditConfiguration(run_trials, acc.epsilon, desc, acc.method)


# ---------------------------------------------------------------------- add/remove audits
#: Delta of the add/remove configurations' budgets.
AR_DELTA = 1e-5
#: The algorithms that accept ``neighboring='add_remove_one'``, audited by
#: :func:`add_remove_configuration` (every other private algorithm refuses the relation).
ADD_REMOVE_ALGORITHMS = ("dp-rsgd", "dp-rsgd-poisson", "dp-rsvrg", "dp-sgd", "analyze-gauss",
                         "noisy-power", "log-euclidean")
#: Those whose noise, normaliser or rate used the private size before public sizes were
#: required: their ``private_size=True`` variant reproduces that and must be caught.
PRIVATE_SIZE_VARIANTS = ("dp-rsgd", "dp-rsgd-poisson", "dp-rsvrg", "log-euclidean")


def _ar_budget(epsilon: float, sizes: int) -> Any:
    return PrivacyBudget(epsilon, AR_DELTA, neighboring="add_remove_one", public_sizes=sizes)


def _broken_label(private_size: bool, noise_factor: float) -> str:
    out = []
    if private_size:
        out.append("BROKEN: each dataset's noise, normaliser and rate from its own true size "
                   "(public_sizes = the private N)")
    if noise_factor != 1:
        out.append(f"BROKEN: actual noise {noise_factor:g}x smaller")
    return "; " + "; ".join(out) if out else ""


def _add_remove_prirfed(kind: str, epsilon: float, private_size: bool, noise_factor: float,
                        secure: bool) -> AuditConfiguration:
    """One round of one agent of PriRFed on S^99 (``kind``: DP-RSGD full batch or Poisson,
    DP-RSVRG), trials batched as identical agents, ``D1 = D0`` plus one record.

    ``D0`` holds ``N`` records with zero gradient at the public start ``x0 = e_0`` (multiples of
    ``e_2``). Honest: the added record ``2 sqrt(tau) (e_0 + e_1) / sqrt 2`` has gradient
    ``-4 tau e_1``, clipped to ``-tau e_1`` (the full add/remove sensitivity ``tau / N^pub``);
    the statistic is the released noisy mean along ``-e_1``. ``private_size``: the added record
    is zero (nothing moves but the noise, calibrated from each dataset's own size), the
    statistic the released vector's squared norm.
    """
    ambient, tau, alpha = 100, 1.0, 0.01
    n_records = 6 if kind == "dp-rsgd-poisson" else 4
    x0 = np.zeros(ambient)
    x0[0] = 1.0
    e1 = np.zeros(ambient)
    e1[1] = 1.0
    base = np.zeros((n_records + 1, ambient))
    base[:n_records, 2] = 0.5
    canary = np.zeros(ambient) if private_size else 2 * np.sqrt(tau) * (x0 + e1) / np.sqrt(2)

    def trainer():
        if kind == "dp-rsgd":
            return DPRSGD(steps=1, batch_size=None, clip=tau)
        if kind == "dp-rsgd-poisson":
            return DPRSGD(steps=1, batch_size=0.5, clip=tau, sampling="poisson")
        return DPRSVRG(steps=1, inner_steps=1, clip=0.005, clip_full=tau)

    def algorithm(neighbour: int) -> Any:
        size = n_records + neighbour if private_size else n_records
        return PriRFed(trainer(), n_sampled=None, step_size=alpha,
                       budget=_ar_budget(epsilon, size), n_rounds=1)

    def problem(neighbour: int, n: int) -> SpherePCA:
        z = np.broadcast_to(base, (n, n_records + 1, ambient)).copy()
        z[:, n_records] = canary
        return SpherePCA(z, counts=np.full(n, n_records + neighbour))

    probe = problem(0, 1)
    man = probe.manifold
    plan0 = algorithm(0).init(probe, x0, _audit_rng(secure)).plan
    method = "rdp" if secure else "auto"
    events = plan0.events(0)

    def run_trials(neighbour: int, n: int, rng: Any) -> np.ndarray:
        prob = problem(neighbour, n)
        alg = algorithm(neighbour)
        plan = alg.init(prob, x0, rng).plan
        if noise_factor != 1:
            plan = dataclasses.replace(plan, sigma=plan.sigma / noise_factor)
        x = np.broadcast_to(x0, (n, ambient)).copy()
        out, _ = alg.trainer.train(prob, plan, x, np.arange(n), alpha, rng)
        released = -man.log(x, out) / alpha
        if private_size:
            return np.einsum("ij,ij->i", released, released)
        return tangent_statistic(man, x0, released, -e1)

    name = {"dp-rsgd": "DP-RSGD, one full-batch step",
            "dp-rsgd-poisson": "DP-RSGD, one step on a Poisson batch (rate 0.5)",
            "dp-rsvrg": "DP-RSVRG (Alg. 3), K = m = 1"}[kind]
    desc = (f"{name}, add/remove-one, S^99, N = {n_records} (+1) records, public size "
            f"{n_records}, clip {tau:g}, budget eps {epsilon:g}"
            f"{', secure' if secure else ''}{_broken_label(private_size, noise_factor)}")
    return AuditConfiguration(run_trials,
                       lambda delta: certify(events, delta, "add_remove_one", method).epsilon,
                       desc, method)


def _audit_rng(secure: bool) -> Any:
    return SecureRandom() if secure else np.random.default_rng(0)


def _add_remove_dpsgd(epsilon: float) -> AuditConfiguration:
    """Centralized DP-SGD, one Poisson step (B = 2 of the public N = 4: rate 1/2) on a logistic
    regression whose records have zero features (zero gradient at 0); the added record's
    gradient at 0 has norm 5 C, clipped to C along ``e_0``. Statistic: the released noisy mean
    along ``e_0``."""
    n_records, clip, dim = 4, 1.0, 2
    feats = np.zeros((1, n_records + 1, dim))
    feats[0, n_records, 0] = 10.0 * clip
    labels = np.full((1, n_records + 1), -1.0)   # gradient at 0: -y a / 2 = +5 C e_0

    def alg() -> DPSGD:
        return DPSGD(step_size=1.0, batch_size=2, clip=clip, sampling="poisson", n_rounds=1,
                     budget=_ar_budget(epsilon, n_records))

    problems = [LogisticRegression(feats, labels, counts=np.array([n_records + k]))
                for k in (0, 1)]
    states = [alg().init(p, np.zeros(dim), np.random.default_rng(0)) for p in problems]
    algorithm = alg()

    def run_trials(neighbour: int, n: int, rng: Any) -> np.ndarray:
        out = np.empty(n)
        start = states[neighbour]
        for i in range(n):   # DP-SGD pools one data set: one run per trial
            state = dataclasses.replace(start, rng=rng, ledger=copy.copy(start.ledger))
            new = algorithm.step(problems[neighbour], state)
            out[i] = -new.x[0]   # the released mean along e_0 (step size 1, no momentum)
        return out

    certificate = states[0].ledger

    def certified(delta: float) -> float:
        return certify([(certificate.spec, 1)], delta, "add_remove_one",
                       certificate.method).epsilon

    desc = (f"centralized DP-SGD, one Poisson step (B = 2, public N = {n_records}, rate 1/2), "
            f"add/remove-one, clip {clip:g}, budget eps {epsilon:g}")
    return AuditConfiguration(run_trials, certified, desc, certificate.method)


def _add_remove_baseline(kind: str, epsilon: float, private_size: bool) -> AuditConfiguration:
    """One-agent runs of a one-shot baseline, ``D1 = D0`` plus one record (one run per trial;
    the calibration is computed once, in memory).

    Analyze Gauss / noisy power method (one iteration from a public start): records ``0.5 e_2``,
    the added one ``e_1`` at the norm bound 1; statistic ``|x . e_1|`` of the released
    eigenvector estimate. Log-Euclidean mean on SPD(4): identity records (logarithm 0), the
    added one ``exp(C E)`` with ``E`` a unit symmetric direction; statistic the released log
    along ``E``. ``private_size`` (log-Euclidean): each dataset's sizes are declared public as
    its own true size (the normaliser and the noise move with N), the added record is the
    identity and the statistic the released log's squared norm.
    """
    n_records = 3
    if kind == "log-euclidean":
        bound, n = 1.0, 4
        direction = np.zeros((n, n))
        direction[0, 1] = direction[1, 0] = 1.0 / np.sqrt(2.0)
        added = np.eye(n) if private_size else spd_exp(bound * direction)
        mats = np.broadcast_to(np.eye(n), (1, n_records + 1, n, n)).copy()
        mats[0, n_records] = added
        problems: list[Any] = [FrechetMean(SPD(n), mats, counts=np.array([n_records + k]))
                               for k in (0, 1)]
        methods: list[Any] = [LogEuclideanPrivateMean(_ar_budget(
            epsilon, n_records + (k if private_size else 0)), bound) for k in (0, 1)]

        def statistic(x: np.ndarray) -> float:
            log = spd_log(x)
            return float(np.sum(log * log)) if private_size else float(np.sum(log * direction))
    else:
        d = 3
        z = np.zeros((1, n_records + 1, d))
        z[0, :n_records, 2] = 0.5
        z[0, n_records, 0] = 1.0
        problems = [SpherePCA(z, counts=np.array([n_records + k])) for k in (0, 1)]
        budget = _ar_budget(epsilon, n_records)
        methods = [AnalyzeGauss(budget) if kind == "analyze-gauss"
                   else NoisyPowerMethod(budget, n_iters=1)] * 2
        start = np.array([1.0, 0.0, 1.0]) / np.sqrt(2.0)

        def statistic(x: np.ndarray) -> float:
            return float(abs(x[0]))

    def run_trials(neighbour: int, n: int, rng: Any) -> np.ndarray:
        method, prob = methods[neighbour], problems[neighbour]
        if kind == "noisy-power":
            return np.array([statistic(method.run(prob, rng, x0=start).x) for _ in range(n)])
        return np.array([statistic(method.run(prob, rng).x) for _ in range(n)])

    report = methods[0].run(problems[0], np.random.default_rng(0)).privacy
    z_mult, releases = report["noise_multiplier"], 1

    def certified(delta: float) -> float:
        return certify([(EventSpec.make("gaussian", z_mult), releases)], delta,
                       "add_remove_one", "auto").epsilon

    name = {"analyze-gauss": "Analyze Gauss on S^2", "noisy-power":
            "noisy power method on S^2, one iteration", "log-euclidean":
            "log-Euclidean private mean on SPD(4)"}[kind]
    desc = (f"{name}, add/remove-one, N = {n_records} (+1) records, budget eps {epsilon:g}"
            f"{_broken_label(private_size, 1.0)}")
    return AuditConfiguration(run_trials, certified, desc, "auto")


def add_remove_configuration(algorithm: str, epsilon: float = 1.0, *,
                             private_size: bool = False, noise_factor: float = 1.0,
                             secure: bool = False) -> AuditConfiguration:
    """An audit of ``algorithm`` under ``neighboring='add_remove_one'``: ``D1`` is ``D0`` plus
    one record, both runs declare the same public size (the budget's ``public_sizes``).

    Parameters
    ----------
    algorithm : str
        One of :data:`ADD_REMOVE_ALGORITHMS`.
    epsilon : float
        The budget the algorithm calibrates its noise to (its certificate).
    private_size : bool
        The variant that computes noise, normaliser and rate from each dataset's own true size
        (declares ``public_sizes`` = the private N: what rfed did before public sizes were
        required); only for :data:`PRIVATE_SIZE_VARIANTS`. An audit must catch it.
    noise_factor : float
        PriRFed configurations: run with noise this many times smaller than recorded.
    secure : bool
        PriRFed configurations: secure mode (discrete Gaussian; certified with RDP).

    Returns
    -------
    AuditConfiguration
        ``run_trials``, ``certified_epsilon(delta)``, a description and the accountant.
    """
    check_real(epsilon, "epsilon")
    if algorithm not in ADD_REMOVE_ALGORITHMS:
        raise ValueError(f"argument 'algorithm' must be one of {ADD_REMOVE_ALGORITHMS}, got "
                         f"{algorithm!r}")
    if private_size and algorithm not in PRIVATE_SIZE_VARIANTS:
        raise ValueError(f"argument 'private_size': {algorithm} has no noise, normaliser or "
                         f"rate depending on the dataset size; variants exist for "
                         f"{PRIVATE_SIZE_VARIANTS}")
    prirfed = algorithm in ("dp-rsgd", "dp-rsgd-poisson", "dp-rsvrg")
    if not prirfed and (noise_factor != 1 or secure):
        raise ValueError(f"arguments 'noise_factor' and 'secure' are for the PriRFed "
                         f"configurations, not {algorithm!r}")
    if prirfed:
        return _add_remove_prirfed(algorithm, epsilon, private_size, noise_factor, secure)
    if algorithm == "dp-sgd":
        return _add_remove_dpsgd(epsilon)
    return _add_remove_baseline(algorithm, epsilon, private_size)


def _ar_builder(algorithm: str, private_size: bool = False
                ) -> Callable[[float, float, bool], AuditConfiguration]:
    def build(epsilon: float, noise_factor: float, secure: bool) -> AuditConfiguration:
        return add_remove_configuration(algorithm, epsilon, private_size=private_size,
                                        noise_factor=noise_factor, secure=secure)
    return build


#: Named audit configurations: name -> (builder(sigma, noise_factor, secure), default sigma).
#: For the ``*-add-remove`` configurations the parameter is the budget's epsilon.
CONFIGURATIONS: dict[str, tuple[Callable[[float, float, bool], AuditConfiguration], float]] = {
    "gaussian": (gaussian_configuration, 4.0),
    "dp-rsgd-onestep": (_dp_rsgd_onestep_config, 0.8),
    **{f"{a}-add-remove": (_ar_builder(a), 1.0) for a in ADD_REMOVE_ALGORITHMS},
    **{f"{a}-add-remove-private-size": (_ar_builder(a, True), 1.0)
       for a in PRIVATE_SIZE_VARIANTS},
}


def _bad_audit_argument(args: argparse.Namespace, sigma: float) -> str | None:
    """What is wrong with ``rfed audit``'s options (naming the option and the value), or
    ``None``: checked before anything runs, so a bad value exits with status 2 and cannot be
    mistaken for status 1 (refuted)."""
    for option, value in (("--sigma", sigma), ("--noise-factor", args.noise_factor)):
        if not (np.isfinite(value) and value > 0):
            return f"{option} must be a finite number > 0, got {value!r}"
    for option, value in (("--delta", args.delta), ("--confidence", args.confidence)):
        if not 0 < value < 1:
            return f"{option} must lie in the open interval (0, 1), got {value!r}"
    if args.trials < 4:
        return f"--trials must be an int >= 4 (trials per neighbour), got {args.trials}"
    if args.seed < 0:
        return f"--seed must be an int >= 0, got {args.seed}"
    return None


def audit_main(argv: list[str] | None = None) -> int:
    """``rfed audit NAME``: audit a named configuration and print certified vs audited epsilon.

    Returns the exit status: 0 when the audit's lower bound stays at or below the certified
    epsilon, 1 when it exceeds it (the claim is refuted at the stated confidence), 2 on bad
    arguments.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``rfed audit``; ``sys.argv[1:]`` when ``None``.

    Returns
    -------
    int
        The exit status, 0, 1 or 2 as above.
    """
    parser = argparse.ArgumentParser(
        prog="rfed audit",
        description="Empirical privacy audit (Clopper-Pearson lower bound on epsilon) of a "
        "named configuration, beside the epsilon the certified accountant reports.",
    )
    parser.add_argument("name", choices=sorted(CONFIGURATIONS))
    parser.add_argument("--trials", type=int, default=100_000, help="trials per neighbour")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--sigma", type=float, default=None,
                        help="noise std in the ledger (the *-add-remove configurations: the "
                        "budget's epsilon)")
    parser.add_argument("--noise-factor", type=float, default=1.0,
                        help="run with noise this many times SMALLER than the ledger records "
                        "(a broken variant the audit should catch)")
    parser.add_argument("--secure", action="store_true",
                        help="OS randomness and the discrete Gaussian (rfed.privacy.secure)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the trials (ignored "
                        "with --secure, which is not replayable)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on errors
        return int(exc.code or 0)
    build, default_sigma = CONFIGURATIONS[args.name]
    sigma = default_sigma if args.sigma is None else args.sigma
    problem = _bad_audit_argument(args, sigma)
    if problem is not None:
        print(f"rfed audit: error: {problem}", file=sys.stderr)
        return 2
    config = build(sigma, args.noise_factor, args.secure)
    if args.secure:
        rng: Any = SecureRandom()
    else:
        rng = np.random.default_rng(args.seed)
    certified = config.certified_epsilon(args.delta)
    result = audit(config.run_trials, args.trials, args.delta, confidence=args.confidence,
                   rng=rng, chunk_size=20_000)
    print(f"configuration      : {args.name}: {config.description}")
    print(f"certified epsilon  : {certified:.4f} at delta {args.delta:g} "
          f"(rfed.privacy.CertifiedAccountant, {config.method.upper()})")
    print(f"audit lower bound  : {result.epsilon_lower:.4f} at confidence {result.confidence:g} "
          f"({result.n_trials} evaluation + {result.n_heldout} held-out trials per neighbour; "
          f"FPR {result.fpr:.3g}, FNR {result.fnr:.3g})")
    seeded = "not replayable (OS randomness)" if args.secure else f"seed {args.seed}, replayable"
    print(f"randomness         : {seeded}")
    refuted = result.epsilon_lower > certified
    verdict = ("REFUTED: the audit's lower bound exceeds the certified epsilon" if refuted
               else "consistent: lower bound <= certified epsilon")
    print(f"verdict            : {verdict}")
    return 1 if refuted else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(audit_main())
