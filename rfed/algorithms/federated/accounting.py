"""Privacy of a PriRFed run: certified accounting, budget calibration, and the paper's Theorem 4.2.

**Certified (the guarantee).** Record-level DP of one agent's dataset, under the run's
neighbouring relation (replace-one by default, as in the paper's Def. 2.4; add/remove-one with
a full batch or Poisson minibatches, every size the declared public one), accounted by
dp-accounting (RDP and PLD, the tighter of the two that
support the events when ``method='auto'``). A record lives in one agent, so in a round only that
agent's local run depends on it; the other agents' runs are independent of it and the
aggregation is post-processing. The :class:`~rfed.privacy.PrivacyLedger` charges each selected
agent the noisy steps its local run performed (events of
:meth:`~rfed.algorithms.federated.local.LocalPlan.events`), and the certified epsilon is that of
the worst-off agent.

**Agent sampling gives no record-level amplification here.** The server's selection of agents is
public (the released global model is the trained agent's output when ``s = 1``), so a record's
owner is charged in full for every round it trained; the paper's Theorem 4.2 does claim the
amplification of Lemma 4.1, and an earlier version of rfed reported the minimum of the ledger and
such a bound, which under-reported (16 agents, one per round, one full-batch step at noise
multiplier 1.5: 0.80 reported for a mechanism whose exact epsilon at delta 1e-5 is 2.28).
No agent-level (user-level) guarantee is offered: it would need the server to clip each agent's
whole update, which PriRFed does not do.

**Budget first.** :func:`calibrate_plan` finds, for every distinct local configuration
``(N_i, b_i)``, the smallest noise multiplier whose events over the WHOLE planned run (the agent
trained in every one of the ``T`` planned rounds, the worst case of the selection) certify the
user's :class:`~rfed.privacy.PrivacyBudget`.

**Paper** (PriRFed Theorem 4.2, :func:`rfed.privacy.papers.prirfed_privacy`): from the local
budget that the paper's sigma formulas are said to give one local run (``paper_epsilon``), with
agent subsampling, sequential composition of the ``s`` agents of a round and the better of
sequential and advanced composition over ``T`` rounds. Its inputs are heuristic (constants set to
one): the paper's formula, not a guarantee.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from rfed.algorithms.federated.local import LocalPlan, LocalTrainer
from rfed.algorithms.private import PAPER_LABEL, Release
from rfed.algorithms.private import label as privacy_label
from rfed.privacy import _rdp
from rfed.privacy.accountants import DP_ACCOUNTING_VERSION, EventSpec
from rfed.privacy.budget import Calibration, Certificate, PrivacyBudget, calibrate, certify
from rfed.privacy.ledger import OUTSIDE_THE_GUARANTEE, PrivacyLedger, group_rows, row_event
from rfed.privacy.papers import prirfed_privacy

__all__ = [
    "record_round",
    "certified_epsilon",
    "planned_events",
    "calibrate_plan",
    "calibrate_multipliers",
    "LocalRunRelease",
    "prirfed_privacy_report",
    "is_secure_rng",
]


#: With ``method='auto'``, PLD is skipped when RDP already certifies more than this (and more
#: than twice the target): PLD's tightness no longer matters there, and its cost explodes for
#: tiny noise multipliers (1500 compositions at z = 0.1 take minutes). Either value is a valid
#: upper bound.
PLD_SKIP_ABOVE = 100.0


#: Certificates already computed, keyed by the events and the question asked: the reports of
#: the repetitions of an experiment (and of a run's rounds) ask the same question again, and a
#: without-replacement RDP curve costs 0.2-0.3 s. A deterministic function of its key.
_CERTIFICATES: dict[tuple, Certificate] = {}
_CERTIFICATES_MAX = 512
#: Calibrations already made (see :func:`calibrate_plan`), same bound.
_CALIBRATIONS: dict[tuple, Calibration] = {}


def _certify(events, delta: float, neighboring: str, method: str,
             target: float | None = None) -> Certificate:
    """:func:`rfed.privacy.certify`, with RDP alone when it is far above any target (cached)."""
    key = (tuple((spec, int(count)) for spec, count in events if count), float(delta),
           neighboring, method, None if target is None else float(target))
    cert = _CERTIFICATES.get(key)
    if cert is None:
        cert = _certify_uncached(events, delta, neighboring, method, target)
        if len(_CERTIFICATES) >= _CERTIFICATES_MAX:
            _CERTIFICATES.pop(next(iter(_CERTIFICATES)))
        _CERTIFICATES[key] = cert
    return cert


def _certify_uncached(events, delta: float, neighboring: str, method: str,
                      target: float | None) -> Certificate:
    if method == "auto":
        try:
            rdp = certify(events, delta, neighboring, "rdp")
        except ValueError:
            rdp = None
        if rdp is not None and rdp.epsilon > max(PLD_SKIP_ABOVE, 2.0 * (target or 0.0)):
            return rdp
    return certify(events, delta, neighboring, method)


def is_secure_rng(rng: Any) -> bool:
    """True when ``rng`` is a :class:`rfed.privacy.secure.SecureRandom`.

    Parameters
    ----------
    rng : object
        The run's generator.

    Returns
    -------
    bool
    """
    from rfed.privacy.secure import is_secure

    return bool(is_secure(rng))


def record_round(ledger: PrivacyLedger, round_index: int, plan: LocalPlan,
                 agents: np.ndarray) -> None:
    """Charge the selected agents the noisy steps of their local runs in this round.

    The sensitivity recorded is the plan's, obtained from
    :func:`rfed.privacy.mechanisms.release_sensitivity`. The events are those
    ``ledger.record(round_index, agents, sigma=plan.sigma[agents], sensitivity=...,
    count=plan.steps, ...)`` charges (the same ledger state, bit for bit), built once per plan
    (:class:`_PlanEvents`) rather than every round.

    Parameters
    ----------
    ledger : PrivacyLedger
        The run's record-level ledger.
    round_index : int
        The round charged.
    plan : LocalPlan
        The trainer's plan (noise, sensitivities, sampling, steps per local run).
    agents : int array, shape ``(A,)``
        The selected agents, increasing.
    """
    events = _PlanEvents.of(plan)
    if not events.private:
        return
    agents = np.asarray(agents)
    if not np.isfinite(plan.sensitivity[agents]).all():
        return
    charges = [(events.specs, events.ids[agents], plan.steps)]
    if events.snapshot_specs is not None and events.snapshot_ids is not None:  # set together
        charges.append((events.snapshot_specs, events.snapshot_ids[agents], plan.snapshot_steps))
    if agents.ndim != 1 or not agents.size or any(bool((ids < 0).any()) for _, ids, _ in charges) \
            or (agents.size > 1 and not bool((agents[1:] > agents[:-1]).all())):
        # no agent, repeated or unsorted ids, or values ledger.record refuses: the general
        # path (which charges a repeated id once per occurrence, or raises)
        _record_general(ledger, round_index, plan, agents)
        return
    for specs, ids, count in charges:
        first = int(ids[0])
        if ids.size == 1 or bool((ids == first).all()):
            # one event for the whole call (one agent, or equal configurations); every id is
            # >= 0 here (a refused row took the general path), so its event exists
            spec = specs[first]
            assert spec is not None
            ledger.record_event(round_index, spec, agents, count=count)
        else:
            # record()'s order: the distinct events in the order of their sorted values
            for c in np.unique(ids).tolist():
                ledger.record_event(round_index, specs[c], agents[ids == c], count=count)


def _record_general(ledger: PrivacyLedger, round_index: int, plan: LocalPlan,
                    agents: np.ndarray) -> None:
    """:func:`record_round` through ``ledger.record`` with the plan's per-agent values."""
    kwargs: dict[str, Any] = {}
    if plan.sampling == "without_replacement":
        kwargs = {"sampling": "without_replacement", "dataset_size": plan.counts[agents],
                  "sample_size": plan.sizes[agents].astype(int)}
    elif plan.sampling == "poisson":
        kwargs = {"sampling": "poisson",
                  "sampling_rate": plan.sizes[agents] / plan.counts[agents]}
    ledger.record(round_index, agents, sigma=plan.sigma[agents],
                  sensitivity=plan.sensitivity[agents], count=plan.steps, **kwargs)
    if plan.snapshot_steps:
        # DP-RSVRG with a released snapshot: its full-batch snapshot-gradient releases
        assert plan.snapshot_sigma is not None and plan.snapshot_sensitivity is not None
        ledger.record(round_index, agents, sigma=plan.snapshot_sigma[agents],
                      sensitivity=plan.snapshot_sensitivity[agents], count=plan.snapshot_steps)


class _PlanEvents:
    """The ledger events of every agent of a :class:`LocalPlan`, built once per plan.

    ``specs[ids[a]]`` is the event ``ledger.record`` builds for agent ``a`` from the plan's
    ``sigma[a] / sensitivity[a]`` and sampling values (``snapshot_specs`` and
    ``snapshot_ids`` likewise for DP-RSVRG's snapshot releases, ``None`` without them). The
    events are numbered in the lexicographic order of their ``(noise multiplier, rate,
    dataset size, sample size)`` rows, the order in which ``record`` charges the distinct
    events of one call; ``ids[a] = -1`` where ``record`` would refuse the agent's values (it
    is then called, and raises). A plan is fixed for its run (``dataclasses.replace`` makes
    a new one): the events are kept on the plan with the arrays they were built from, and
    rebuilt if any of those arrays was replaced.
    """

    __slots__ = ("sources", "private", "specs", "ids", "snapshot_specs", "snapshot_ids")
    sources: tuple[Any, ...]
    private: bool
    specs: list[EventSpec | None]
    ids: np.ndarray
    snapshot_specs: list[EventSpec | None] | None
    snapshot_ids: np.ndarray | None

    @classmethod
    def of(cls, plan: LocalPlan) -> _PlanEvents:
        sources = (plan.sigma, plan.sensitivity, plan.sizes, plan.counts, plan.snapshot_sigma,
                   plan.snapshot_sensitivity, plan.sampling, plan.snapshot_steps)
        kept = plan.__dict__.get("_ledger_events")
        if kept is not None and len(kept.sources) == len(sources) and all(
                a is b for a, b in zip(kept.sources, sources, strict=True)):
            return kept
        events = cls.__new__(cls)
        events.sources = sources
        events.private = plan.private  # O(n_agents): once per plan, not every round
        n = len(plan.sigma)
        rate = np.ones(n)
        dataset = sample = np.full(n, -1.0)
        sampling = plan.sampling if plan.sampling in ("poisson", "without_replacement") else "none"
        if sampling == "without_replacement":
            dataset = np.asarray(plan.counts, dtype=float)
            sample = np.asarray(plan.sizes.astype(int), dtype=float)
        elif sampling == "poisson":
            rate = np.asarray(plan.sizes / plan.counts, dtype=float)
        events.specs, events.ids = _distinct_events(plan.sigma, plan.sensitivity, sampling, rate,
                                                    dataset, sample)
        events.snapshot_specs = events.snapshot_ids = None
        if plan.snapshot_steps:
            events.snapshot_specs, events.snapshot_ids = _distinct_events(
                plan.snapshot_sigma, plan.snapshot_sensitivity, "none", np.ones(n),
                np.full(n, -1.0), np.full(n, -1.0))
        plan.__dict__["_ledger_events"] = events
        return events


def _distinct_events(sigma, sensitivity, sampling: str, rate, dataset, sample):
    """``(specs, ids)``: the distinct events of the agents' rows, grouped and built as
    ``PrivacyLedger.record`` does (:func:`~rfed.privacy.ledger.group_rows`,
    :func:`~rfed.privacy.ledger.row_event`), and each agent's index (-1: values that
    ``record`` refuses; their spec is ``None``)."""
    sig = np.asarray(sigma, dtype=float)
    sens = np.asarray(sensitivity, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        nm = sig / sens  # elementwise: each agent's bits as record() computes them
    ok = np.isfinite(sig) & (sig >= 0) & np.isfinite(sens) & (sens > 0)
    ids = np.full(nm.shape, -1, dtype=np.int64)
    specs: list[EventSpec | None] = []
    if ok.any():
        combos, inverse = group_rows([np.broadcast_to(c, nm.shape)[ok]
                                      for c in (nm, rate, dataset, sample)])
        ids[ok] = inverse
        for c, row in enumerate(combos):
            try:
                specs.append(row_event("gaussian", sampling, row))
            except ValueError:
                # refused as record() would refuse it: its agents take the general path
                specs.append(None)
                ids[ids == c] = -1
    return specs, ids


def _worst(events_by_agent: list[list[tuple[EventSpec, int]]], delta: float, neighboring: str,
           method: str, target: float | None = None) -> tuple[float, str, int]:
    """Certified epsilon of the worst agent: ``(epsilon, method used, agent)``."""
    best: dict[tuple, tuple[float, str]] = {}
    worst = (0.0, method if method != "auto" else "rdp", 0)
    for a, events in enumerate(events_by_agent):
        key = tuple(sorted((repr(s), c) for s, c in events if c))
        if not key:
            continue
        if key not in best:
            cert = _certify(events, delta, neighboring, method, target)
            best[key] = (cert.epsilon, cert.method)
        eps, used = best[key]
        if eps > worst[0]:
            worst = (eps, used, a)
    return worst


def _pld_supports(events, neighboring: str) -> bool:
    try:
        for spec, count in events:
            if count:
                spec.check_supported("pld", neighboring)
    except ValueError:
        return False
    return True


def certified_epsilon(ledger: PrivacyLedger, delta: float, method: str = "auto",
                      target: float | None = None) -> tuple[float, str, int]:
    """Epsilon at ``delta`` of the worst-off agent of ``ledger``: ``(eps, method, agent)``.

    Parameters
    ----------
    ledger : PrivacyLedger
        The run's ledger.
    delta : float
        The delta of the guarantee.
    method : {'auto', 'rdp', 'pld'}
        The accountant (``'auto'``: the tighter that supports the events).
    target : float, optional
        The budget's epsilon: an RDP epsilon far above it is not refined by PLD.

    Returns
    -------
    (float, str, int)
        The epsilon, the accountant used and the worst-off agent.
    """
    return _worst([ledger.spent(a) for a in range(ledger.n_agents)], delta,
                  ledger.neighboring, method, target)


def planned_events(plan: LocalPlan, agent: int, rounds: int,
                   z: float | None = None) -> list[tuple[EventSpec, int]]:
    """Events of ``agent`` if it trains in each of ``rounds`` rounds (the worst-case selection).

    Parameters
    ----------
    plan : LocalPlan
        The trainer's plan.
    agent : int
        The agent.
    rounds : int
        Rounds it trains in.
    z : float, optional
        Noise multiplier (default: the plan's own).

    Returns
    -------
    list of (EventSpec, int)
        The events with their counts over the ``rounds`` rounds.
    """
    return [(spec, count * rounds) for spec, count in plan.events(agent, z)]


def calibrate_plan(plan: LocalPlan, budget: PrivacyBudget, delta: float,
                   rounds: int | np.ndarray) -> tuple[LocalPlan, dict[int, Calibration]]:
    """Noise multipliers that spend ``budget`` over the planned run, one per configuration.

    :func:`calibrate_multipliers`, applied to the plan.

    Parameters
    ----------
    plan : LocalPlan
    budget : PrivacyBudget
    delta : float
    rounds : int or int array, shape ``(n_agents,)``

    Returns
    -------
    plan : LocalPlan
        With ``sigma = z_i * sensitivity_i``.
    calibrations : dict
        ``{representative agent: Calibration}``.
    """
    z, cals = calibrate_multipliers(plan, budget, delta, rounds)
    return plan.with_noise_multiplier(z), cals


def calibrate_multipliers(plan: LocalPlan, budget: PrivacyBudget, delta: float,
                          rounds: int | np.ndarray) -> tuple[np.ndarray, dict[int, Calibration]]:
    """Noise multipliers that spend ``budget`` over the planned run, one per configuration.

    ``rounds`` is the number of rounds every agent trains in (the worst case of the selection),
    or, per agent, the rounds the public selection schedule will pick it in (shape
    ``(n_agents,)``). Agents with the same ``(N_i, b_i)`` share one calibration (one bisection of
    :func:`rfed.privacy.calibrate` each), made for the most-selected agent among them.

    Parameters
    ----------
    plan : LocalPlan
        The trainer's plan (public clip levels required).
    budget : PrivacyBudget
        The record-level budget of the whole run.
    delta : float
        The budget's delta.
    rounds : int or int array, shape ``(n_agents,)``
        Rounds each agent trains in (see above).

    Returns
    -------
    z : array, shape ``(n_agents,)``
        Each agent's noise multiplier (``sigma_i = z_i * sensitivity_i``).
    calibrations : dict
        ``{representative agent: Calibration}``.
    """
    if not np.all(np.isfinite(plan.sensitivity)):
        raise ValueError(
            "a privacy budget needs public clipping levels: set 'clip' (and 'clip_full' for "
            "DP-RSVRG) on the trainer; without clipping no sensitivity holds"
        )
    participation = np.broadcast_to(np.asarray(rounds, dtype=int), plan.counts.shape)
    keys = np.stack([plan.counts.astype(float), plan.sizes.astype(float),
                     plan.sensitivity], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    z = np.empty(len(uniq))
    cals = {}
    for u in range(len(uniq)):
        members = np.flatnonzero(inverse == u)
        worst = int(members[np.argmax(participation[members])])
        if participation[worst] == 0:
            # never selected: nothing is released, any noise keeps the budget
            z[u] = 1.0
            continue

        def events(zz, a=worst, r=int(participation[worst])):
            return planned_events(plan, a, r, zz)

        # the events are a function of (N_i, b_i, sampling, steps, rounds) and z only: the
        # repetitions of an experiment (other seeds, often the same most-selected count) and
        # its settings reuse a calibration instead of bisecting again
        key = (int(plan.counts[worst]), float(plan.sizes[worst]), plan.sampling,
               plan.neighboring, int(plan.steps), int(plan.snapshot_steps),
               int(participation[worst]), budget,
               float(delta))
        if key in _CALIBRATIONS:
            z[u] = _CALIBRATIONS[key].noise_multiplier
            cals[worst] = _CALIBRATIONS[key]
            continue

        # RDP first (fast at every z); its multiplier is an upper bracket for 'auto' and PLD,
        # which then bisect on the scale u of z = u z_rdp away from the tiny multipliers where
        # PLD is slow
        cal = calibrate(events, dataclasses.replace(budget, method="rdp"), delta=delta)
        if budget.method == "pld" or (
                budget.method == "auto"
                and _pld_supports(events(cal.noise_multiplier), plan.neighboring)):
            z_rdp = cal.noise_multiplier
            def scaled_events(uu, f=events, zr=z_rdp):
                return f(uu * zr)

            scaled = calibrate(scaled_events, budget, delta=delta)
            cal = Calibration(scaled.noise_multiplier * z_rdp, scaled.certificate,
                              budget.epsilon)
        z[u] = cal.noise_multiplier
        cals[worst] = cal
        if len(_CALIBRATIONS) >= _CERTIFICATES_MAX:
            _CALIBRATIONS.pop(next(iter(_CALIBRATIONS)))
        _CALIBRATIONS[key] = cal
    return z[inverse], cals


class LocalRunRelease(Release):
    """What one agent releases in a round it trains in: its whole local run, for
    :func:`~rfed.algorithms.private.plan_noise`.

    A PriRFed agent's round is ``steps`` noisy gradient steps (DP-RSGD), or DP-RSVRG's inner
    steps and, with a released snapshot, its snapshot releases, each a Gaussian mechanism of
    the plan's per-agent sensitivity (:meth:`LocalPlan.events`). The agents' configurations
    (local size ``N_i``, batch size ``b_i``, clip levels) differ, so :meth:`calibrate` returns
    one noise multiplier per agent (:func:`calibrate_multipliers`: one bisection per distinct
    configuration, for its most-selected agent). The relation is the plan's: the trainer's
    plan has already refused what it cannot account (add/remove needs the declared public
    sizes and Poisson or full-batch steps).

    Parameters
    ----------
    plan : LocalPlan
        The trainer's plan for the problem (clip levels, sizes, sensitivities, sampling).

    Attributes
    ----------
    calibrations : dict
        ``{representative agent: Calibration}`` of the last :meth:`calibrate` (empty before).
    """

    norm = "l2"
    add_remove_refusal = None

    def __init__(self, plan: LocalPlan) -> None:
        self.plan = plan
        self.calibrations: dict[int, Calibration] = {}

    @property
    def sensitivity(self) -> float:  # type: ignore[override]
        """The largest per-agent sensitivity of one noisy step (``inf`` without clipping)."""
        return float(np.max(self.plan.sensitivity))

    def recorded_sensitivity(self, dim: int, rng: Any) -> float:
        """:attr:`sensitivity`: the plan's sensitivities already hold secure mode's term
        (:meth:`LocalTrainer.plan` applies :func:`rfed.privacy.mechanisms.release_sensitivity`).

        Parameters
        ----------
        dim : int
        rng : numpy.random.Generator or SecureRandom

        Returns
        -------
        float
        """
        return self.sensitivity

    def events(self, noise_multiplier: float, local_size: int, rounds: int
               ) -> list[tuple[EventSpec, int]]:
        """The events of the first agent with ``local_size`` records over ``rounds`` rounds.

        Parameters
        ----------
        noise_multiplier : float
        local_size : int
        rounds : int

        Returns
        -------
        list of (EventSpec, int)
        """
        agents = np.flatnonzero(np.asarray(self.plan.counts) == local_size)
        if not agents.size:
            raise ValueError(f"no agent of the plan has {local_size} records")
        return planned_events(self.plan, int(agents[0]), rounds, noise_multiplier)

    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: np.ndarray,
                  active_rounds: np.ndarray, rng: Any) -> np.ndarray:
        """Each agent's noise multiplier (:func:`calibrate_multipliers`); secure mode's
        discrete Gaussian releases are calibrated with RDP only.

        Parameters
        ----------
        budget : PrivacyBudget
        delta : float
        local_sizes : int array, shape ``(n_agents,)``
            The public sizes (the plan's counts; unused beyond them).
        active_rounds : int array, shape ``(n_agents,)``
            The rounds each agent trains in over the planned run.
        rng : numpy.random.Generator or SecureRandom

        Returns
        -------
        array, shape ``(n_agents,)``
        """
        if is_secure_rng(rng) and budget.method != "rdp":
            budget = dataclasses.replace(budget, method="rdp")
        z, self.calibrations = calibrate_multipliers(self.plan, budget, delta, active_rounds)
        return z


def _sizes_text(sizes: np.ndarray) -> str:
    """``'N = 100'`` for equal sizes, else their range."""
    lo, hi = int(np.min(sizes)), int(np.max(sizes))
    return f"N = {lo}" if lo == hi else f"N from {lo} to {hi}"


def _assumptions(trainer: LocalTrainer, plan: LocalPlan, secure: bool) -> list[str]:
    out = []
    if plan.clip is not None:
        out.append(f"per-sample gradient clipped to {plan.clip:g} in the Riemannian norm "
                   "(enforced)")
    if plan.clip_full is not None and trainer.name == "DP-RSVRG":
        out.append(f"full-gradient summands clipped to {plan.clip_full:g} (enforced)")
    if plan.snapshot_steps and plan.clip is not None and plan.clip_full is not None:
        out.append("DP-RSVRG with a released snapshot (not the paper's Alg. 3): each outer "
                   f"loop releases the snapshot gradient (summands clipped to "
                   f"{plan.clip_full:g}, sensitivity 2 tau_0 / N_i, full batch); each inner "
                   f"step's per-sample gradient differences are clipped jointly to "
                   f"{plan.clip:g} (enforced; sensitivity 2 tau_d / b_i, subsampled without "
                   "replacement)")
    out.append("clip levels are public numbers given by the user, not read from the data")
    if plan.neighboring == "replace_one":
        out.append("local dataset sizes N_i public (a replaced record leaves them unchanged; "
                   "the normalisers of the clipped means and the aggregation weights)")
    else:
        out.append("local dataset sizes N_i private (add/remove changes them): every normaliser, "
                   "sampling rate, noise scale, aggregation weight and delta uses the declared "
                   f"public nominal sizes ({_sizes_text(np.asarray(plan.counts))}), never the true "
                   "ones")
    if plan.sampling == "without_replacement":
        out.append("minibatches: fixed size b_i drawn uniformly without replacement, secret")
    elif plan.sampling == "poisson":
        out.append("minibatches: Poisson (each record independently with the public rate "
                   "q_i = b_i / N_i), secret; divided by the public expected batch size b_i")
    if plan.extra.get("coupled_records"):
        out.append("per-sample losses couple the agent's records: every clipped summand may "
                   "change (no 1/b, no minibatch amplification)")
    out.append("agent selection public: no amplification by agent sampling is claimed")
    out.extend(plan.extra.get("problem_assumptions", []))
    if not secure:
        out.append("seeded numpy generator and floating-point noise: a research run, replayable "
                   "from its seed, not a deployment")
    out.append(OUTSIDE_THE_GUARANTEE)
    return out


def prirfed_privacy_report(
    trainer: LocalTrainer,
    plan: LocalPlan,
    n_sampled: int,
    rounds: int,
    delta: float,
    ledger: PrivacyLedger | None = None,
    *,
    budget: PrivacyBudget | None = None,
    planned_rounds: int | None = None,
    method: str = "auto",
    delta_hat: float = 1e-3,
    secure: bool = False,
) -> dict[str, Any]:
    """The privacy report of a PriRFed run after ``rounds`` rounds (keys: module docstring).

    Parameters
    ----------
    trainer, plan
        The local trainer and its resolved plan (noise, clipping, sizes, sensitivities).
    n_sampled : int
        ``s``.
    rounds : int
        Rounds performed.
    delta : float
        The delta at which the certified epsilon is read.
    ledger : PrivacyLedger, optional
        The run's ledger; without it (before a run) every agent is charged every round, the
        worst case of the selection.
    budget : PrivacyBudget, optional
        The target, reported beside the certified value.
    planned_rounds : int, optional
    method : {'auto', 'rdp', 'pld'}
    delta_hat : float
        The free ``delta_hat`` of Theorem 4.2 (1e-3 in the paper's Table 1).
    secure : bool
        Whether the noise came from a secure generator.

    Returns
    -------
    dict
        ``epsilon_certified``, ``delta``, ``accountant``, ``neighboring``, ``level``,
        ``assumptions``, ``target_epsilon``, ``noise_multiplier``, ``epsilon_paper``, ``paper``,
        ``secure``, ``replayable_from_seed``, ``algorithm``, ``label``, ``calibration``
        (:data:`rfed.algorithms.private.REPORT_KEYS`, the one report shape), plus ``certified``
        (details), ``delta_paper``, ``rounds``, ``planned_rounds``, ``private``, ``sigma`` and
        ``clip``.
    """
    counts = plan.counts
    n_agents = counts.size
    paper = None
    if trainer.paper_epsilon is not None and rounds > 0:
        assert trainer.paper_delta is not None  # the trainer requires both together
        res = prirfed_privacy(n_agents, n_sampled, trainer.paper_epsilon, trainer.paper_delta,
                              rounds, delta_hat)
        paper = {
            "label": PAPER_LABEL,
            "name": "PriRFed Theorem 4.2 with the sigma formula of "
                    + ("Han et al. (2024), Thm 1" if trainer.name == "DP-RSGD"
                       else "Utpala et al. (2023), Claim 5"),
            "epsilon": res.epsilon,
            "delta": res.delta,
            "branch": res.branch,
            "local_epsilon": trainer.paper_epsilon,
            "local_delta": trainer.paper_delta,
            "delta_hat": delta_hat,
        }
    z = plan.noise_multiplier
    target = None if budget is None else budget.epsilon
    if not plan.private or not np.all(np.isfinite(plan.sensitivity)):
        eps, used, worst = (math.inf if rounds > 0 else 0.0), "none", 0
    elif ledger is not None:
        eps, used, worst = certified_epsilon(ledger, delta, method, target)
    else:
        eps, used, worst = _worst([planned_events(plan, a, rounds) for a in range(n_agents)],
                                  delta, plan.neighboring, method, target)
    label = {"auto": "tighter of RDP and PLD", "rdp": "RDP", "pld": "PLD"}[method]
    accountant = (
        f"dp-accounting {DP_ACCOUNTING_VERSION} {used.upper()} ({label}"
        f"{'; Gaussian curves: ' + _rdp.IMPLEMENTATION if used == 'rdp' else ''}), record-level "
        f"{plan.neighboring}; per-agent ledger, worst agent, agent selection public (no "
        "amplification by agent sampling)"
    )
    cert = {
        "epsilon": eps,
        "delta": delta,
        "bound": "ledger (per-agent events, selection public)" if plan.private
        else "not private (no noise)",
        "method": used,
        "worst_agent": int(worst),
        "noise_multiplier": float(z.min()) if plan.private else 0.0,
        "steps_per_round": plan.steps,
        "snapshot_releases_per_round": plan.snapshot_steps,
        "accountant": accountant,
    }
    if budget is not None:
        calibration: str | None = "budget"
    elif trainer.paper_epsilon is not None:
        calibration = "paper_epsilon"
    elif not plan.private:
        calibration = None
    else:
        calibration = "noise_multiplier" if trainer.noise_multiplier else "paper_sigma"
    return {
        "algorithm": f"PriRFed ({trainer.name})",
        "epsilon_certified": eps,
        "delta": delta,
        "label": privacy_label(eps, delta) if plan.private else "not private (no noise)",
        "calibration": calibration,
        "accountant": accountant,
        "neighboring": plan.neighboring,
        "level": "record",
        "assumptions": _assumptions(trainer, plan, secure),
        "target_epsilon": None if budget is None else budget.epsilon,
        "noise_multiplier": float(z.min()) if plan.private else 0.0,
        "epsilon_paper": None if paper is None else paper["epsilon"],
        "delta_paper": None if paper is None else paper["delta"],
        "paper": paper,
        "secure": bool(secure),
        "replayable_from_seed": not secure,
        "certified": cert,
        "rounds": rounds,
        "planned_rounds": planned_rounds,
        "private": bool(plan.private),
        "sigma": {"min": float(plan.sigma.min()), "max": float(plan.sigma.max())},
        "clip": plan.clip,
    }
