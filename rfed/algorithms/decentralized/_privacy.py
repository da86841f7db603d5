"""Privacy of the decentralized algorithms: budget-first noise, certified reports, papers' formulas.

Every private decentralized algorithm takes one of (mutually exclusive):

* ``budget=PrivacyBudget(epsilon, delta)`` with the planned ``n_rounds``: the noise multiplier of
  the whole planned run is calibrated at ``init`` with :func:`rfed.privacy.calibrate`, so the
  finished run certifies at most ``budget.epsilon`` (and, the noise not being wasted, at least
  0.9 of it); stepping past ``n_rounds`` raises (the budget would be exceeded);
* ``noise_multiplier=z`` (research): noise std ``z`` times the replace-one sensitivity of one
  release; its certified epsilon is reported the same way;
* the algorithm's paper parametrisation (``sigma=`` / ``theta_xi=``) and ``paper_epsilon=``:
  the paper's calibration, reported as "the paper's formula (not a guarantee)" with the
  certified epsilon beside it.

A plain ``epsilon=`` keyword does not exist: it raises a ``TypeError`` naming ``budget=`` and
``paper_epsilon=`` (a number called epsilon must be the epsilon the run delivers).

Certified side (stated in every report): record-level DP of each agent's local data set,
replace-one adjacency; each release is a Gaussian mechanism on a clipped mean (or sum) whose
clip level is a PUBLIC number enforced by clipping; the minibatch is drawn uniformly without
replacement (``b`` of ``q_i`` records), as the code does, or (DPDL and DP-DPSGD with
``sampling='poisson'``) by Poisson sampling, each record independently with probability
``b / q_i`` and the public normaliser ``b``, certified by the PLD accountant; ``r`` releases of
one minibatch in one round compose to one Gaussian mechanism with multiplier ``z / sqrt(r)``,
subsampled once; the
count is the number of rounds in which the agent released (activation is visible on the wire, so
no amplification by activation or node sampling is claimed); everything computed from the noisy
releases (momentum, sparsification, mixing, calibration weights) is post-processing. The
accountant is the tighter of dp-accounting's RDP and PLD among those that support the events.

Every object here is a plain picklable object (no closures): a run's state, its account
included, can be pickled mid-run and resumed bit-identically.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rfed.networks.comm import Communicator
from rfed.privacy import papers
from rfed.privacy.accountants import EventSpec
from rfed.privacy.budget import (
    Certificate,
    PrivacyBudget,
    calibrate,
    certify,
    check_delta_for_dataset,
    check_planned_round,
    default_delta,
)
from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE, PrivacyLedger
from rfed.privacy.mechanisms import release_sensitivity
from rfed.privacy.secure import is_secure

__all__ = ["NoiseConfig", "PaperFormula", "GaussianAccount", "DGTAccount", "SAMPLINGS",
           "refuse_add_remove", "GAUSSIAN_REPLACE_ONE_ONLY", "COST_FUNCTION_RELATION_ONLY",
           "reject_epsilon", "is_secure", "PAPER_LABEL", "gaussian_groups_calibration",
           "ddgt_sensitivities", "label"]

#: How every paper value is labelled.
PAPER_LABEL = "paper's formula, not a guarantee"


def reject_epsilon(kwargs: dict, algorithm: str) -> None:
    """Refuse ``epsilon=`` (it would not deliver that epsilon) and any other unknown keyword."""
    if "epsilon" in kwargs:
        raise TypeError(
            f"{algorithm} has no 'epsilon=' argument: pass budget=PrivacyBudget(epsilon, delta) "
            "with n_rounds= for a certified (epsilon, delta), or paper_epsilon= for the paper's "
            "calibration (the paper's formula, not a guarantee)"
        )
    if kwargs:
        raise TypeError(f"{algorithm} got unexpected keyword argument(s) {sorted(kwargs)}")


#: Why the Gaussian decentralized algorithms refuse ``neighboring='add_remove_one'``.
GAUSSIAN_REPLACE_ONE_ONLY = (
    "each release is a clipped mean over b records drawn without replacement from the agent's "
    "q_i records (or over all q_i of them): the draw's rate b / q_i and the normaliser depend on "
    "the local size, which add/remove changes and keeps private, and fixed-size sampling "
    "without replacement has no add/remove bound in dp-accounting"
)
#: Why DP-DGT and noisy DDGT refuse ``neighboring='add_remove_one'``.
COST_FUNCTION_RELATION_ONLY = (
    "it is certified under its paper's cost-function adjacency (one agent's cost function "
    "changes, with a bounded gradient difference), which is not a record-level relation"
)


def refuse_add_remove(budget: PrivacyBudget | None, algorithm: str, reason: str) -> None:
    """Raise ``ValueError`` for a budget under ``'add_remove_one'``, saying why ``algorithm``
    cannot account that relation (``reason``)."""
    if budget is not None and getattr(budget, "neighboring", "replace_one") != "replace_one":
        raise ValueError(f"{algorithm} refuses neighboring={budget.neighboring!r}: {reason}; "
                         "use PrivacyBudget(..., neighboring='replace_one') (the default)")


@dataclasses.dataclass(frozen=True)
class NoiseConfig:
    """How an algorithm's noise is set (at most one of the four ways; none: not private).

    Attributes
    ----------
    budget : PrivacyBudget or None
        Budget-first: the planned run of ``n_rounds`` rounds certifies ``budget``.
    n_rounds : int or None
        Planned rounds (required with ``budget`` and ``paper_epsilon``).
    noise_multiplier : float or None
        Noise std over the replace-one sensitivity of one release.
    paper_sigma : float or None
        The paper's own noise parameter (``sigma=``), converted by the algorithm.
    paper_epsilon : float or None
        The paper's epsilon, converted to noise by the paper's formula (not a guarantee).
    delta : float or None
        Delta of the report for the non-budget modes (default ``min(1e-5, 1/(10 N))``).
    """

    budget: PrivacyBudget | None = None
    n_rounds: int | None = None
    noise_multiplier: float | None = None
    paper_sigma: float | None = None
    paper_epsilon: float | None = None
    delta: float | None = None

    def __post_init__(self):
        given = [name for name in ("budget", "noise_multiplier", "paper_sigma", "paper_epsilon")
                 if getattr(self, name) not in (None, 0.0)]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'budget', 'noise_multiplier', 'sigma' and "
                             f"'paper_epsilon', got {given}")
        if self.budget is not None and not isinstance(self.budget, PrivacyBudget):
            raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {self.budget!r}")
        if self.n_rounds is not None and (not isinstance(self.n_rounds, (int, np.integer))
                                          or self.n_rounds < 1):
            raise ValueError(f"argument 'n_rounds' must be an int >= 1, got {self.n_rounds!r}")
        if (self.budget is not None or self.paper_epsilon is not None) and self.n_rounds is None:
            raise ValueError("argument 'n_rounds' (the planned run length) is required with "
                             "'budget' and 'paper_epsilon': the noise is set for the whole run")
        for name in ("noise_multiplier", "paper_sigma", "paper_epsilon"):
            val = getattr(self, name)
            if val is not None and not (np.isfinite(val) and val >= 0):
                raise ValueError(f"argument '{name}' must be a finite number >= 0, got {val!r}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"argument 'delta' must be in (0, 1), got {self.delta!r}")

    @property
    def mode(self) -> str | None:
        """'budget', 'noise_multiplier', 'paper_sigma', 'paper_epsilon' or None (no noise)."""
        if self.budget is not None:
            return "budget"
        for name in ("noise_multiplier", "paper_sigma", "paper_epsilon"):
            if getattr(self, name):
                return name
        return None

    def resolve_delta(self, min_local_size: int) -> float:
        """The delta to certify, checked ``< 1/N`` for the smallest local data set."""
        if self.budget is not None:
            return self.budget.resolve_delta(min_local_size)
        if self.delta is None:
            return default_delta(min_local_size)
        return check_delta_for_dataset(self.delta, min_local_size)

    @property
    def method(self) -> str:
        return "auto" if self.budget is None else self.budget.method

    def resolve_noise_multiplier(self, sensitivity: float,
                                 budget_z: Callable[[], float],
                                 paper_std: Callable[[], float], sigma_unit: float = 1.0,
                                 comm: Communicator | None = None
                                 ) -> tuple[float, float | None]:
        """The noise multiplier ``z`` of this configuration and the epsilon it targets.

        ``budget_z()`` gives ``z`` for the budget (budget mode only); ``paper_std()`` gives
        the paper's noise std for ``paper_epsilon`` (that mode only). The papers state their
        std in units of ``sigma_unit`` (e.g. the clip level), so ``z = sigma * sigma_unit /
        sensitivity`` for both ``sigma=`` and ``paper_epsilon=``. The target is ``None`` outside
        the budget mode. With a ``comm``, both are computed once for all the processes of the
        engine (:meth:`rfed.networks.comm.Communicator.root_computes`: on MPI, rank 0
        calibrates and broadcasts the number, instead of every rank running the accountant).
        """
        once = (lambda fn: fn()) if comm is None else comm.root_computes
        if self.mode == "budget":
            return once(budget_z), self.budget.epsilon
        if self.mode == "noise_multiplier":
            return self.noise_multiplier, None
        sigma = self.paper_sigma if self.mode == "paper_sigma" else once(paper_std)
        return sigma * sigma_unit / sensitivity, None


# ---------------------------------------------------------------------- papers' formulas
def _paper_doadp(p: dict, rounds: int) -> dict:
    # DO-ADP Thm 1 eq. (7) at equality, solved for eps (sigma^2 proportional to 1/eps^2)
    eps = (math.sqrt(160 * (p["k"] / p["dim"]) * p["p"] ** 2 * rounds
                     * math.log(1.25 / p["delta0"])) * p["G"] / (p["q"] * p["sigma"]))
    out = {"epsilon": eps, "delta": p["delta0"],
           "formula": "DO-ADP Thm 1 eq. (7): sigma^2 = 160 k p^2 T ln(1.25/delta0) G^2 "
                      "/ (q^2 d eps^2), solved for eps (per-step delta0; Top-k indices treated "
                      "as fixed, activation amplification claimed)"}
    if eps > 1:
        out["warning"] = "eps > 1 lies outside Theorem 1 (eps in (0, 1])"
    return out


def _paper_dpdl(p: dict, rounds: int) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        ref = papers.dpdl_sigma(1.0, p["delta"], rounds, p["q_global"], p["alpha"], p["n"],
                                p["w_min"], p["w_max"], p["closed_min"], h=p["h"], c2=p["c2"])
    return {"epsilon": ref / p["sigma"], "delta": p["delta"],
            "formula": f"DPDL Thm 1 eq. (23) as printed, solved for eps (c2={p['c2']}, "
                       f"h={p['h']}, the paper's global rate q = B/(N min|D_i|))"}


def _paper_dpdda(p: dict, rounds: int) -> dict:
    out = {"formula": "DP-DDA Thm 1: sigma^2 = C iota^2 L^2 T ln(2/delta0) / (q^2 eps^2) "
                      "solved for eps (printed C = 32; corrected C = 160, spec 002 P0; node "
                      "sampling amplification claimed)", "delta": p["delta0"]}
    for label, c in (("", 32.0), ("_corrected_160", 160.0)):
        out[f"epsilon{label}"] = (math.sqrt(c * rounds * math.log(2 / p["delta0"]))
                                  * p["iota"] * p["L"] / (p["q"] * p["sigma"]))
    return out


def _paper_dpdgt(p: dict, rounds: int) -> dict:
    out = {"formula": "DP-DGT Cor. 5.14 eq. (38) (infinite run) and the likelihood-ratio sum "
                      "of the recursion (32) over the rounds run", "delta": 0.0,
           "adjacency_radius": p["radius"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        try:
            out["epsilon"] = papers.dpdgt_epsilon(
                p["alpha0"], p["q"], p["theta_xi0"], p["q_xi"], p["theta_zeta0"], p["q_zeta"],
                p["mu"], p["gamma"], p["phi"], p["radius"], q_c=p["q_c"])
        except ValueError as exc:
            out["epsilon"] = None
            out["warning"] = f"eq. (38) not applicable: {exc}"
    out["epsilon_eq38"] = out["epsilon"]
    k = np.arange(max(rounds, 1))
    out["epsilon_recursion"] = papers.dpdgt_epsilon_recursion(
        p["alpha0"] * p["q"] ** k, p["theta_xi0"] * p["q_xi"] ** k,
        p["theta_zeta0"] * p["q_zeta"] ** k, p["mu"], p["gamma"], p["phi"], p["radius"])
    return out


_PAPERS = {"doadp": _paper_doadp, "dpdl": _paper_dpdl, "dpdda": _paper_dpdda,
           "dpdgt": _paper_dpdgt}


@dataclasses.dataclass(frozen=True)
class PaperFormula:
    """A paper's closed form, evaluated for a run length (picklable: a kind and numbers)."""

    kind: str
    params: dict

    def evaluate(self, rounds: int) -> dict:
        """``{'label', 'formula', 'epsilon', 'delta', ...}`` for a run of ``rounds`` rounds."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            out = _PAPERS[self.kind](self.params, max(int(rounds), 1))
        return {"label": PAPER_LABEL, **out}


# ---------------------------------------------------------------------- calibration
#: How a release's minibatch is drawn from the agent's records.
SAMPLINGS = ("without_replacement", "poisson")


def _gaussian_events(z: float, size: int, sample: int | None, releases: int, count: int,
                     sampling: str = "without_replacement"):
    nm = z / math.sqrt(releases)
    if sample is None or sample >= size:
        spec = EventSpec.make("gaussian", nm)
    elif sampling == "poisson":
        spec = EventSpec.make("gaussian", nm, "poisson", sampling_rate=sample / int(size))
    else:
        spec = EventSpec.make("gaussian", nm, "without_replacement", dataset_size=int(size),
                              sample_size=int(sample))
    return [(spec, int(count))]


@dataclasses.dataclass(frozen=True)
class _GroupEvents:
    """``events_for(z)`` of one group of agents (a picklable callable, no closure)."""

    size: int
    sample: int | None
    releases: int
    count: int
    sampling: str = "without_replacement"

    def __call__(self, z: float):
        return _gaussian_events(z, self.size, self.sample, self.releases, self.count,
                                self.sampling)


def _groups(sizes: np.ndarray, sample: int | None, releases: np.ndarray,
            counts: np.ndarray, sampling: str = "without_replacement") -> list[_GroupEvents]:
    """One group per distinct (local size, releases per round), with its largest count (the
    epsilon of a group grows with the count, so its worst agent is the one with most rounds)."""
    keys = np.stack([sizes, releases], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    out = []
    for u, (size, rel) in enumerate(uniq):
        cnt = int(counts[inverse == u].max())
        if cnt > 0:
            out.append(_GroupEvents(int(size), sample, int(rel), cnt, sampling))
    # likely worst first: most releases x rounds, smallest data set
    out.sort(key=lambda g: (-g.releases * g.count, g.size))
    return out


def gaussian_groups_calibration(sizes: np.ndarray, sample: int | None, releases: np.ndarray,
                                counts: np.ndarray, budget: PrivacyBudget, delta: float,
                                secure: bool = False, sampling: str = "without_replacement"
                                ) -> tuple[float, Certificate]:
    """Smallest noise multiplier whose planned run certifies ``budget`` for EVERY agent.

    Calibrates the likely worst group; any group still above the target at that multiplier is
    calibrated in turn (the multiplier only grows). Returns ``(z, worst certificate)``.
    ``secure``: discrete Gaussian releases, certified with RDP only (the Canonne-Kamath-Steinke
    comparison covers Renyi divergences, not the continuous PLD). ``sampling``: how a release's
    ``sample`` records are drawn (see :data:`SAMPLINGS`).
    """
    if secure:
        budget = dataclasses.replace(budget, method="rdp")
    groups = _groups(np.asarray(sizes), sample, np.asarray(releases), np.asarray(counts),
                     sampling)
    if not groups:
        raise ValueError("the planned run releases nothing: no noise to calibrate")
    return _calibrate_groups(tuple(groups), budget, float(delta))


@functools.lru_cache(maxsize=256)
def _calibrate_groups(groups: tuple[_GroupEvents, ...], budget: PrivacyBudget, delta: float
                      ) -> tuple[float, Certificate]:
    # a pure function of public numbers: cached, so repetitions of one configuration (and
    # repeated settings of an experiment) calibrate once
    z = 0.0
    worst = None
    for g in groups:
        if z > 0:
            cert = certify(g(z), delta, budget.neighboring, budget.method)
            if cert.epsilon <= budget.epsilon:
                if worst is None or cert.epsilon > worst.epsilon:
                    worst = cert
                continue
        # rtol 1e-2 on z keeps the certified epsilon within about 2 % of the target
        cal = calibrate(g, budget, delta=delta, rtol=1e-2)
        z = cal.noise_multiplier
        worst = cal.certificate
    # the final z may exceed what earlier groups needed: re-certify them all at z
    certs = [certify(g(z), delta, budget.neighboring, budget.method) for g in groups]
    worst = max(certs, key=lambda c: c.epsilon)
    return z, worst


# ---------------------------------------------------------------------- accounts
class GaussianAccount:
    """Round-by-round account of a Gaussian-release decentralized algorithm.

    Parameters
    ----------
    algorithm : str
    local_sizes : array of int, shape ``(n_agents,)``
        ``q_i``.
    sample_size : int or None
        Records per release (``b``; with Poisson sampling the expected number, and the public
        normaliser); None: the full local data set (no subsampling).
    releases_per_round : array of int, shape ``(n_agents,)``
        Gaussian releases an active agent makes per round, all on one minibatch.
    noise_multiplier : float
        Noise std over the (release) sensitivity of one release.
    sensitivity : float
        Replace-one L2 sensitivity of one release, as returned by
        :func:`rfed.privacy.mechanisms.release_sensitivity` (recorded in the ledger).
    delta : float
    method : {'auto', 'rdp', 'pld'}
    assumptions : list of str
    target_epsilon : float or None
    planned_rounds : int or None
        With a budget: stepping past it raises.
    paper : PaperFormula or None
    epsilon_paper : float or None
        The paper epsilon the noise was calibrated for (``paper_epsilon=``), if any.
    secure : bool
    sampling : {'without_replacement', 'poisson'}
        How a release's minibatch is drawn (Poisson: rate ``sample_size / q_i``; its
        replace-one events need the PLD accountant, so the ledger is a PLD ledger).
    neighboring : {'replace_one', 'add_remove_one'}
        The relation certified (add/remove: Poisson sampling only, and ``local_sizes`` are the
        declared public sizes, :meth:`rfed.privacy.PrivacyBudget.public_counts`).
    """

    level = "record"
    neighboring = "replace_one"
    sampling = "without_replacement"

    def __init__(self, algorithm: str, local_sizes: np.ndarray, sample_size: int | None,
                 releases_per_round: np.ndarray, noise_multiplier: float, sensitivity: float,
                 delta: float, method: str = "auto", assumptions: list[str] | None = None,
                 target_epsilon: float | None = None, planned_rounds: int | None = None,
                 paper: PaperFormula | None = None, epsilon_paper: float | None = None,
                 secure: bool = False, mode: str | None = None,
                 sampling: str = "without_replacement", neighboring: str = "replace_one"):
        if sampling not in SAMPLINGS:
            raise ValueError(f"argument 'sampling' must be one of {SAMPLINGS}, got {sampling!r}")
        if neighboring != "replace_one" and sampling != "poisson":
            raise ValueError(f"{algorithm} refuses neighboring={neighboring!r} with sampling "
                             f"{sampling!r}: {GAUSSIAN_REPLACE_ONE_ONLY}")
        self.neighboring = neighboring
        if sampling == "poisson" and secure and neighboring == "replace_one":
            raise ValueError("secure mode certifies with RDP only, which has no replace-one "
                             "bound for Poisson sampling: use sampling='without_replacement' "
                             "in secure mode")
        self.sampling = sampling
        self.algorithm = algorithm
        self.local_sizes = np.asarray(local_sizes, dtype=int)
        self.sample_size = None if sample_size is None else int(sample_size)
        self.releases = np.asarray(releases_per_round, dtype=int)
        self.noise_multiplier = float(noise_multiplier)
        self.sensitivity = float(sensitivity)
        self.delta = float(delta)
        # secure mode releases discrete Gaussians: RDP only (see gaussian_groups_calibration)
        self.method = "rdp" if secure else method
        self.assumptions = list(assumptions or [])
        self.target_epsilon = target_epsilon
        self.planned_rounds = planned_rounds
        self.paper = paper
        self.epsilon_paper = epsilon_paper
        self.secure = bool(secure)
        self.mode = mode
        self.rounds = 0
        self.counts = np.zeros(self.local_sizes.size, dtype=np.int64)
        # Poisson under replace-one: PLD only (dp-accounting's RDP has no such event)
        pld = sampling == "poisson" and neighboring == "replace_one"
        self.ledger = PrivacyLedger(self.local_sizes.size, "pld" if pld else "rdp",
                                    neighboring, description=algorithm)
        self._distinct_releases = np.unique(self.releases)
        self._equal_sizes = bool(np.all(self.local_sizes == self.local_sizes[0]))
        self._plan = self._event_plan()
        self._memo: dict[tuple, Certificate] = {}

    def _event_plan(self) -> list[tuple[EventSpec, np.ndarray]] | None:
        """Every agent's event, fixed for the run: ``[(event, agents of the event), ...]`` in
        the order in which :meth:`record_round`'s general path charges them (releases per round
        ascending, then (local size, sample size) ascending), or None where an agent's event
        depends on which agents are active (a release class whose agents are partly subsampled
        and partly not, or a subsampled class after one that is not: the general path then
        decides per round).

        The checks :meth:`PrivacyLedger.record` makes on ``sigma`` and ``sensitivity`` run here
        once (they are public constants of the run), and the events are built by
        :meth:`EventSpec.make` with the values ``record`` would compute, so charging them with
        :meth:`PrivacyLedger.record_event` leaves the ledger in the same state. Values that
        ``record`` would refuse give None (the general path then raises when they are charged).
        """
        sigma = self.noise_multiplier * self.sensitivity
        plan = []
        whole = False  # a class so far releases on its whole data set
        for r in self._distinct_releases:
            sens = self.sensitivity * math.sqrt(r)
            if not (math.isfinite(sigma) and sigma >= 0 and math.isfinite(sens) and sens > 0):
                return None  # the general path raises record()'s error when such a class acts
            # the same float division as PrivacyLedger.record's sig / sens
            nm = float(np.float64(sigma) / np.float64(sens))
            cls = self.releases == r
            sizes = self.local_sizes[cls]
            if self.sample_size is None or np.all(self.sample_size >= sizes):
                plan.append((EventSpec.make("gaussian", nm), cls))
                whole = True
                continue
            if whole or np.any(self.sample_size >= sizes):
                # the general path then records a later class as not subsampled in the rounds
                # an earlier whole-data class is active in: it depends on the round
                return None
            for size in np.unique(sizes):
                if self.sampling == "poisson":
                    spec = EventSpec.make("gaussian", nm, "poisson",
                                          sampling_rate=self.sample_size / int(size))
                else:
                    spec = EventSpec.make("gaussian", nm, "without_replacement",
                                          dataset_size=int(size),
                                          sample_size=int(min(self.sample_size, size)))
                plan.append((spec, cls & (self.local_sizes == size)))
        return plan

    def check_can_step(self) -> None:
        """Raise before a round beyond the planned run (the budget would be exceeded)."""
        check_planned_round(self.algorithm, self.rounds, self.planned_rounds,
                            self.target_epsilon)

    def record_round(self, active: np.ndarray) -> None:
        """Charge one round to the agents of the boolean mask ``active``."""
        self.check_can_step()
        active = np.asarray(active, dtype=bool)
        if active.shape != self.counts.shape:
            raise ValueError(f"argument 'active' must be a bool mask of shape "
                             f"{self.counts.shape}, got shape {active.shape}")
        self.counts += active
        plan = getattr(self, "_plan", None)  # None too in an account pickled before the plan
        if plan is not None:
            for spec, cls in plan:
                who = active & cls
                if who.any():
                    self.ledger.record_event(self.rounds, spec, who)
            self.rounds += 1
            return
        rel = (self._distinct_releases if self._distinct_releases.size == 1
               else np.unique(self.releases[active]))
        if active.any():
            sampling = "none" if self.sample_size is None else self.sampling
            for r in rel:
                who = active & (self.releases == r)
                sizes = self.local_sizes[who]
                if self._equal_sizes:
                    sizes = sizes[:1].reshape(())
                kw = {}
                if sampling == "poisson":
                    kw = {"sampling_rate": np.minimum(1.0, self.sample_size / sizes)}
                    if np.all(kw["sampling_rate"] >= 1.0):
                        sampling, kw = "none", {}
                if sampling == "without_replacement":
                    kw = {"dataset_size": sizes,
                          "sample_size": np.minimum(self.sample_size, sizes)}
                    if np.all(kw["sample_size"] >= sizes):
                        sampling, kw = "none", {}
                # r releases of one batch = one Gaussian with sensitivity sqrt(r) x one release
                self.ledger.record(self.rounds, agents=who,
                                   sigma=self.noise_multiplier * self.sensitivity,
                                   sensitivity=self.sensitivity * math.sqrt(r),
                                   sampling=sampling, **kw)
        self.rounds += 1

    def certificate(self, delta: float | None = None) -> Certificate | None:
        """The certified ``(epsilon, delta)`` of the worst-off agent so far (None: no release)."""
        delta = self.delta if delta is None else float(delta)
        key = (self.rounds, delta)
        if key not in self._memo:
            groups = _groups(self.local_sizes, self.sample_size, self.releases, self.counts,
                             getattr(self, "sampling", "without_replacement"))
            certs = [certify(g(self.noise_multiplier), delta, self.neighboring, self.method)
                     for g in groups]
            self._memo[key] = max(certs, key=lambda c: c.epsilon) if certs else None
        return self._memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The report every private rfed algorithm gives (:func:`run_report`)."""
        cert = self.certificate(delta)
        return run_report(
            algorithm=self.algorithm, rounds=self.rounds,
            epsilon=0.0 if cert is None else cert.epsilon,
            delta=self.delta if delta is None else float(delta),
            accountant=cert.accountant if cert is not None else "no release yet",
            neighboring=self.neighboring, level=self.level, assumptions=self.assumptions,
            target_epsilon=self.target_epsilon, noise_multiplier=self.noise_multiplier,
            calibration=self.mode, secure=self.secure, paper=self.paper,
            epsilon_paper=self.epsilon_paper)

    def certified_epsilons(self, delta: float | None = None) -> np.ndarray:
        """Per-agent certified epsilon (RDP ledger), shape ``(n_agents,)``."""
        return self.ledger.epsilons(self.delta if delta is None else float(delta))

    def finalize(self):
        """Store the paper's value for the rounds run in the ledger (for :meth:`text`)."""
        if self.paper is not None and not self.ledger._paper:
            val = self.paper.evaluate(self.rounds)
            if val.get("epsilon") is not None:
                self.ledger.add_paper_bound(f"{self.algorithm} (paper)", float(val["epsilon"]),
                                            float(val.get("delta") or 0.0), val["formula"])
        return self

    def text(self, delta: float | None = None) -> str:
        """The ledger's table with the paper's value beside it."""
        return self.finalize().ledger.report(self.delta if delta is None else float(delta))


def label(epsilon: float, delta: float) -> str:
    """The primary privacy label of a run: ``'certified eps=X (delta=Y)'``."""
    return f"certified eps={epsilon:.3g} (delta={delta:.2g})"


def run_report(*, algorithm: str, rounds: int, epsilon: float, delta: float, accountant: str,
               neighboring: str, level: str, assumptions: Any, target_epsilon: float | None,
               noise_multiplier: float | None, calibration: str, secure: bool,
               paper: Any = None, epsilon_paper: float | None = None,
               adjacency_radius: float | None = None) -> dict[str, Any]:
    """The report every private rfed algorithm gives: the same keys everywhere, JSON-ready.

    ``paper`` (a :class:`PaperFormula` or None) is evaluated at ``rounds`` and reported beside
    the certified value, labelled as the paper's; its epsilon fills ``epsilon_paper`` when that
    is not given. ``adjacency_radius`` is reported (after ``level``) for relations that have one.
    """
    paper_value = None if paper is None else paper.evaluate(rounds)
    if epsilon_paper is None and paper_value is not None:
        epsilon_paper = paper_value.get("epsilon")
    out: dict[str, Any] = {
        "algorithm": algorithm, "rounds": rounds, "epsilon_certified": epsilon,
        "delta": delta, "accountant": accountant, "neighboring": neighboring, "level": level}
    if adjacency_radius is not None:
        out["adjacency_radius"] = adjacency_radius
    assumptions = list(assumptions)
    if OUTSIDE_THE_GUARANTEE not in assumptions:
        assumptions.append(OUTSIDE_THE_GUARANTEE)
    out.update({
        "assumptions": assumptions, "target_epsilon": target_epsilon,
        "noise_multiplier": noise_multiplier, "calibration": calibration,
        "epsilon_paper": epsilon_paper, "paper": paper_value, "secure": secure,
        "replayable_from_seed": not secure, "label": label(epsilon, delta),
        # the CLI's privacy table reads this sub-report
        "certified": {"epsilon": epsilon, "delta": delta, "accountant": accountant}})
    return out


def ddgt_sensitivities(alphas: np.ndarray, betas: np.ndarray, iota: float, mu: float,
                       radius: float) -> tuple[np.ndarray, np.ndarray]:
    r"""L1 sensitivities of noisy DDGT's two messages under the cost-function adjacency.

    With every message observed identically (the proof technique of DP-DGT, spec 003 section
    3.1), only the changed agent's own state differs: ``Delta w~_{k+1} = beta_k Delta z_k``,
    ``Delta z_{k+1} = -iota (Delta w_{k+1} - Delta w_k)`` with ``z_0 = -iota (w_0 - d)``, and the
    argmin moves by at most ``||Delta w_k||_1 <= (||Delta w~_k||_1 + radius) / mu`` (it is
    ``1/mu``-Lipschitz in the price and the gradient). So, for ``k = 0 .. K-1``::

        u_0 = 0,  v_0 = iota radius / mu,  u_{k+1} = beta_k v_k,
        v_{k+1} = iota ((u_{k+1} + radius) / mu + (u_k + radius) / mu),

    ``u_k`` bounding the price message ``w~_k`` and ``v_k`` the tracker message ``z_k``.
    ``v_k >= 2 iota radius / mu`` never decays: with decaying noise DDGT's epsilon grows without
    bound (the reason DP-DGT exists). ``alphas`` is unused (same signature as DP-DGT's).
    """
    betas = np.asarray(betas, dtype=float)
    k = betas.size
    u = np.zeros(k)
    v = np.zeros(k)
    v[0] = iota * radius / mu
    # a 2-term scalar recursion over iterations (not agents or samples)
    for t in range(k - 1):
        u[t + 1] = betas[t] * v[t]
        v[t + 1] = iota * ((u[t + 1] + radius) / mu + (u[t] + radius) / mu)
    return v, u


def _laplace_events(sens_xi, theta_xi, sens_zeta, theta_zeta) -> list[tuple[EventSpec, int]]:
    events: dict[EventSpec, int] = {}
    for sens, theta in ((sens_xi, theta_xi), (sens_zeta, theta_zeta)):
        for s_k, th_k in zip(np.atleast_1d(sens), np.atleast_1d(theta), strict=True):
            if s_k > 0:
                spec = EventSpec.make("laplace", float(th_k / s_k))
                events[spec] = events.get(spec, 0) + 1
    return list(events.items())


class DGTAccount:
    """DP-DGT's (and noisy DDGT's) Laplace releases under the paper's cost-function adjacency.

    Relation (spec 003 Def. 2.2): two problems are neighbours when exactly one agent's cost
    function differs and ``sup_w ||grad F_i(w) - grad F'_i(w)||_1 <= radius``; only cost
    functions are protected (demands, graph and initial states are public). Iteration ``k``
    releases ``s_{i,k} + xi`` and ``w~_{i,k} + zeta`` (Laplace, scales ``theta_k``) with L1
    sensitivities from the proof's recursion (32) (DP-DGT, ``kind='dgt'``) or from
    :func:`ddgt_sensitivities` (noisy DDGT, ``kind='ddgt'``), each passed through
    :func:`rfed.privacy.mechanisms.release_sensitivity`. Certified: the smaller of the basic
    composition ``sum_k varphi_k/theta_xi,k + eta_k/theta_zeta,k`` (pure, delta = 0; the paper's
    own intermediate bound) and dp-accounting's RDP composition of the same Laplace events at
    delta; both are upper bounds.
    """

    level = "dpdgt-cost-function"

    def __init__(self, algorithm: str, kind: str, params: dict, radius: float, theta_xi,
                 theta_zeta, dim: int, rng: Any, delta: float = 1e-5,
                 target_epsilon: float | None = None, planned_rounds: int | None = None,
                 paper: PaperFormula | None = None, epsilon_paper: float | None = None,
                 mode: str | None = None):
        self.algorithm = algorithm
        self.kind = kind
        self.params = dict(params)
        self.radius = float(radius)
        self.theta_xi, self.theta_zeta = theta_xi, theta_zeta
        self.dim = int(dim)
        self._rng = rng
        self.delta = float(delta)
        self.target_epsilon = target_epsilon
        self.planned_rounds = planned_rounds
        self.paper = paper
        self.epsilon_paper = epsilon_paper
        self.secure = is_secure(rng)
        self.mode = mode
        self.rounds = 0
        self.neighboring = (f"one agent's cost function changes, sup_w ||grad F_i - grad F_i'||_1 "
                            f"<= {self.radius:g}")
        self._memo: dict[tuple, tuple[float, str]] = {}

    def check_can_step(self) -> None:
        """Raise before an iteration beyond the planned run (the budget would be exceeded)."""
        check_planned_round(self.algorithm, self.rounds, self.planned_rounds,
                            self.target_epsilon, what="theta0", unit="iterations")

    def record_round(self) -> None:
        self.check_can_step()
        self.rounds += 1

    def sensitivities(self, rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """L1 sensitivities ``(of s / z, of w~)`` for ``k < rounds``, as released."""
        k = np.arange(max(rounds, 1))
        p = self.params
        if self.kind == "dgt":
            sx, sz = papers.dpdgt_sensitivities(p["alpha0"] * p["q"] ** k, p["mu"], p["gamma"],
                                                p["phi"], self.radius)
        else:
            sx, sz = ddgt_sensitivities(None, p["beta0"] * p["q"] ** k, p["iota"], p["mu"],
                                        self.radius)
        return (np.asarray(release_sensitivity(sx, self.dim, self._rng, "l1")),
                np.asarray(release_sensitivity(sz, self.dim, self._rng, "l1")))

    def _scales(self, rounds: int, scale: float):
        k = np.arange(max(rounds, 1))
        return (scale * np.asarray(self.theta_xi.scale(k)),
                scale * np.asarray(self.theta_zeta.scale(k)))

    def events(self, rounds: int, scale: float = 1.0) -> list[tuple[EventSpec, int]]:
        """The Laplace events of ``rounds`` iterations with both schedules times ``scale``."""
        sx, sz = self.sensitivities(rounds)
        tx, tz = self._scales(rounds, scale)
        return _laplace_events(sx, tx, sz, tz)

    def pure_epsilon(self, rounds: int, scale: float = 1.0) -> float:
        """Basic composition of the Laplace releases (pure epsilon, delta = 0)."""
        sx, sz = self.sensitivities(rounds)
        tx, tz = self._scales(rounds, scale)
        return float(np.sum(sx / tx) + np.sum(sz / tz))

    def certified(self, rounds: int, delta: float, scale: float = 1.0) -> tuple[float, str]:
        """``(epsilon, how)``: the smaller of the pure sum and the RDP composition at delta."""
        key = (rounds, delta, scale)
        if key not in self._memo:
            pure = self.pure_epsilon(rounds, scale)
            events = self.events(rounds, scale)
            rdp = (certify(events, delta, "replace_one", "rdp").epsilon if events else 0.0)
            self._memo[key] = ((pure, "basic composition (pure eps-DP)") if pure <= rdp
                               else (rdp, "dp-accounting RDP"))
        return self._memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The report every private rfed algorithm gives (:func:`run_report`), for this
        relation."""
        delta = self.delta if delta is None else float(delta)
        eps, how = self.certified(self.rounds, delta)
        assumptions = [
            "neighbouring problems differ in one agent's cost function F_i, with "
            f"sup_w ||grad F_i(w) - grad F_i'(w)||_1 <= {self.radius:g} (spec 003 Def. 2.2)",
            "demands, graph and initial states are public (only cost functions are protected)",
            f"every cost is mu-strongly convex with mu = {self.params['mu']:g} (public)",
        ]
        return run_report(
            algorithm=self.algorithm, rounds=self.rounds, epsilon=eps, delta=delta,
            accountant=(f"{how}: the smaller of basic composition (pure) and dp-accounting RDP "
                        f"over the Laplace releases; relation: {self.neighboring}"),
            neighboring=self.neighboring, level=self.level, assumptions=assumptions,
            target_epsilon=self.target_epsilon, noise_multiplier=float(self.theta_xi.theta0),
            calibration=self.mode, secure=self.secure, paper=self.paper,
            epsilon_paper=self.epsilon_paper, adjacency_radius=self.radius)

    def finalize(self):
        return self

    def text(self, delta: float | None = None) -> str:
        """A short plain-text report."""
        rep = self.report(delta)
        lines = [f"{self.algorithm}: {rep['label']} over {self.rounds} iterations",
                 f"relation: {self.neighboring} (level {self.level})",
                 f"accountant: {rep['accountant']}"]
        if rep["paper"] is not None:
            lines.append(f"paper ({PAPER_LABEL}): eps = {rep['paper'].get('epsilon')} "
                         f"[{rep['paper']['formula']}]")
        return "\n".join(lines)

    def calibrate_scale(self, budget: PrivacyBudget, rounds: int, delta: float) -> float:
        """Smallest factor on the unit schedules whose run of ``rounds`` certifies ``budget``.

        The pure sum is ``c / scale`` (closed form); the RDP composition is bisected with
        :func:`rfed.privacy.calibrate`; the smaller factor wins (both bound the same releases).
        """
        key = None
        if not self.secure:  # secure mode's grid inflates the sensitivities: not cached
            key = (self.kind, tuple(sorted(self.params.items())), self.radius, self.dim,
                   self.theta_xi, self.theta_zeta, budget, int(rounds), float(delta))
            if key in _DGT_SCALES:
                return _DGT_SCALES[key]
        pure_scale = self.pure_epsilon(rounds, 1.0) / budget.epsilon
        rdp_budget = PrivacyBudget(budget.epsilon, delta, method="rdp")
        rdp_scale = calibrate(_ScaledLaplace(self, rounds), rdp_budget, delta=delta
                              ).noise_multiplier
        scale = float(min(pure_scale, rdp_scale))
        if key is not None:
            _DGT_SCALES[key] = scale
        return scale


#: DGT calibrations already done (a pure function of public numbers), for repetitions.
_DGT_SCALES: dict[tuple, float] = {}


@dataclasses.dataclass(frozen=True)
class _ScaledLaplace:
    """``events_for(scale)`` of a DGT account (picklable, no closure)."""

    account: DGTAccount
    rounds: int

    def __call__(self, scale: float):
        return self.account.events(self.rounds, scale)
