"""The contract of rfed's private algorithms: configure the noise, plan it, account it, report it.

Every private algorithm of rfed (decentralized, federated, centralized) goes through the same four
public steps, which an algorithm of your own uses too (the tutorial "write your own private
algorithm" builds one in about 50 lines):

1. **Configure.** :class:`NoiseConfig` (keyword-only) says how the noise is set: a whole-run
   ``budget=PrivacyBudget(epsilon, delta)`` with the planned ``n_rounds`` (the way to run
   privately), a research ``noise_multiplier=``, or a paper's own parametrisation
   (``paper_sigma=``, ``paper_epsilon=``, reported as the paper's formula, not a guarantee).
   Everything is validated once, here.
2. **State the release.** A :class:`Release` says what ONE agent releases in each round it is
   active: a :class:`GaussianRelease` is Gaussian noise on a value whose replace-one L2
   sensitivity is a PUBLIC number (from clip levels, never from the data), computed on a
   minibatch of ``sample_size`` records drawn without replacement, ``per_round`` times per round
   on that one minibatch. The release also says which neighbouring relations it can be
   accounted under, and refuses the others with the reason.
3. **Plan.** :func:`plan_noise` turns the configuration and the release into a
   :class:`NoisePlan` once, at the start of a run (on a distributed engine by one process, for
   all): under a budget it calibrates the smallest noise multiplier whose planned run certifies
   the budget for the worst-off agent (the events of every agent over the whole planned run, as
   a function of the noise multiplier); the plan's ``std`` is what each release adds. A release
   whose agents release different things (the federated trainers' local runs) may calibrate
   one level per agent: the plan's ``noise_multipliers`` then holds them. The plan
   goes to the noise draws and to the account; nothing is read back from the account.
4. **Account and report.** A :class:`GaussianAccount` charges every round's releases to each
   agent's :class:`~rfed.privacy.PrivacyLedger` and certifies the worst-off agent on demand;
   :func:`privacy_report` is the one report shape every rfed algorithm returns as
   ``result.privacy``, private or not (:func:`not_private_report`).

The report
----------
``result.privacy`` of every algorithm is a dict with at least the keys :data:`REPORT_KEYS`:

``algorithm``, ``rounds`` (rounds run), ``planned_rounds`` (with a budget, else ``None``),
``private`` (whether anything was noised), ``epsilon_certified`` (the worst-off agent's
certified epsilon at ``delta``; ``inf`` for a run that released un-noised values, 0 before any
release), ``delta``, ``accountant``, ``neighboring``, ``level`` (``'record'``, ``'client'`` or a
relation of the paper's), ``assumptions`` (what the guarantee rests on, and what it does not
cover), ``target_epsilon`` (the budget's), ``noise_multiplier``, ``calibration`` (``'budget'``,
``'noise_multiplier'``, ``'paper_sigma'``, ``'paper_epsilon'`` or ``None``), ``epsilon_paper``
and ``paper`` (the paper's closed form, labelled :data:`PAPER_LABEL`), ``secure``,
``replayable_from_seed``, ``label`` (``'certified eps=X (delta=Y)'``) and ``certified`` (the
certificate: ``epsilon``, ``delta``, ``accountant``). Algorithms add their own keys beside
(e.g. DP-DGT's ``adjacency_radius``, PriRFed's ``client_level``).

What is certified for a :class:`GaussianRelease`: record-level DP of each agent's local data set,
replace-one adjacency; each release is a Gaussian mechanism on a value whose sensitivity the
release states (enforced by clipping to public levels); the minibatch is drawn uniformly without
replacement, as the algorithms do (or, with ``sampling='poisson'``, each record independently with
probability ``b / q_i`` and the public normaliser ``b``: PLD accountant under replace-one, and the
relation add/remove accepted with declared public sizes ``q_i``); ``r`` releases of one minibatch
in one round compose to one Gaussian mechanism with multiplier ``z / sqrt(r)``, subsampled once; an
agent is charged each round it released (activation and node sampling are visible on the wire: no
amplification by them is claimed); everything computed from the noisy releases is post-processing.
The accountant is the tighter of dp-accounting's RDP and PLD among those that support the events
(RDP only in secure mode, whose discrete Gaussian is covered through Renyi divergences).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

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

__all__ = [
    "NoiseConfig",
    "Release",
    "GaussianRelease",
    "NoisePlan",
    "plan_noise",
    "GaussianAccount",
    "privacy_report",
    "not_private_report",
    "untracked_report",
    "certifies",
    "REPORT_KEYS",
    "PAPER_LABEL",
    "GAUSSIAN_REPLACE_ONE_ONLY",
    "SAMPLINGS",
]

#: How a :class:`GaussianRelease`'s minibatch is drawn from the agent's records.
SAMPLINGS = ("without_replacement", "poisson")

#: How every paper's value is labelled in a report.
PAPER_LABEL = "paper's formula, not a guarantee"

#: The keys every privacy report holds (module docstring, "The report").
REPORT_KEYS = ("algorithm", "rounds", "planned_rounds", "private", "epsilon_certified", "delta",
               "accountant", "neighboring", "level", "assumptions", "target_epsilon",
               "noise_multiplier", "calibration", "epsilon_paper", "paper", "secure",
               "replayable_from_seed", "label", "certified")

#: Why a :class:`GaussianRelease` refuses ``neighboring='add_remove_one'``.
GAUSSIAN_REPLACE_ONE_ONLY = (
    "each release is a clipped mean over b records drawn without replacement from the agent's "
    "q_i records (or over all q_i of them): the draw's rate b / q_i and the normaliser depend on "
    "the local size, which add/remove changes and keeps private, and fixed-size sampling "
    "without replacement has no add/remove bound in dp-accounting"
)

_MODES = ("budget", "noise_multiplier", "paper_sigma", "paper_epsilon")
#: The delta of a relation without records (no ``1/N`` to stay below).
DEFAULT_DELTA = 1e-5


# ---------------------------------------------------------------------------- configuration
@dataclasses.dataclass(frozen=True, kw_only=True)
class NoiseConfig:
    """How an algorithm's noise is set: at most one of four ways (none: not private).

    Parameters
    ----------
    budget : PrivacyBudget, optional
        Budget-first (the way to run privately): the noise of the planned run of ``n_rounds``
        rounds is calibrated at the start so that the finished run certifies ``budget`` (and,
        the noise not being wasted, at least 0.9 of it); a round past ``n_rounds`` raises.
    n_rounds : int, optional
        The planned rounds: required with ``budget`` and ``paper_epsilon`` (the noise is set
        for the whole run), and the default length of :meth:`~rfed.algorithms.Algorithm.run`.
    noise_multiplier : float, optional
        Research: noise std over the sensitivity of one release; its certified epsilon is
        reported the same way. 0 turns the noise off.
    paper_sigma : float, optional
        The paper's own noise parameter, converted by the algorithm (``sigma=`` of DO-ADP,
        DPDL, DP-DDA); 0 turns the noise off.
    paper_epsilon : float, optional
        A paper's epsilon, turned into noise by the paper's formula: the paper's formula, not a
        guarantee (the certified epsilon is reported beside it).
    delta : float, optional
        Delta of the report outside the budget mode (default ``min(1e-5, 1/(10 N))`` for the
        smallest local data set ``N``).

    Raises
    ------
    ValueError
        Two ways given, ``n_rounds`` missing where required, a negative or non-finite number,
        or a delta outside ``(0, 1)``; each message names the argument.
    TypeError
        ``budget`` is not a :class:`~rfed.privacy.PrivacyBudget`.
    """

    budget: PrivacyBudget | None = None
    n_rounds: int | None = None
    noise_multiplier: float | None = None
    paper_sigma: float | None = None
    paper_epsilon: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        given = [name for name in _MODES if getattr(self, name) not in (None, 0.0)]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'budget', 'noise_multiplier', 'sigma' and "
                             f"'paper_epsilon', got {given}")
        if self.budget is not None and not isinstance(self.budget, PrivacyBudget):
            raise TypeError(f"argument 'budget' must be a PrivacyBudget, got {self.budget!r}")
        if self.n_rounds is not None and (isinstance(self.n_rounds, bool) or not isinstance(
                self.n_rounds, (int, np.integer)) or self.n_rounds < 1):
            raise ValueError(f"argument 'n_rounds' must be an int >= 1, got {self.n_rounds!r}")
        if (self.budget is not None or self.paper_epsilon is not None) and self.n_rounds is None:
            raise ValueError("argument 'n_rounds' (the planned run length) is required with "
                             "'budget' and 'paper_epsilon': the noise is set for the whole run")
        for name in ("noise_multiplier", "paper_sigma", "paper_epsilon"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float, np.integer,
                                                             np.floating))
                                          and not isinstance(value, bool)
                                          and np.isfinite(value) and value >= 0):
                raise ValueError(f"argument '{name}' must be a finite number >= 0, got "
                                 f"{value!r}")
        if self.delta is not None and not (isinstance(self.delta, (float, int, np.floating))
                                           and 0 < self.delta < 1):
            raise ValueError(f"argument 'delta' must be in (0, 1), got {self.delta!r}")

    @classmethod
    def from_keywords(cls, privacy: NoiseConfig | None = None, *, algorithm: str = "algorithm",
                      sigma: float | None = None, **keywords: Any) -> NoiseConfig:
        """The configuration of an algorithm's constructor: ``privacy=`` or the keywords.

        Parameters
        ----------
        privacy : NoiseConfig, optional
            Given as one object (then no other privacy keyword may be given).
        algorithm : str
            The algorithm's name, for the messages.
        sigma : float, optional
            The paper's noise parameter (stored as ``paper_sigma``; 0 is no noise).
        **keywords
            ``budget``, ``n_rounds``, ``noise_multiplier``, ``paper_epsilon``, ``delta``;
            anything else (``epsilon=`` in particular) raises ``TypeError`` naming what to use.

        Returns
        -------
        NoiseConfig
        """
        if "epsilon" in keywords:
            raise TypeError(
                f"{algorithm} has no 'epsilon=' argument: pass budget=PrivacyBudget(epsilon, "
                "delta) with n_rounds= for a certified (epsilon, delta), or paper_epsilon= for "
                "the paper's calibration (the paper's formula, not a guarantee)")
        known = {f.name for f in dataclasses.fields(cls)} - {"paper_sigma"}
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise TypeError(f"{algorithm} got unexpected keyword argument(s) {unknown}")
        given = {k: v for k, v in keywords.items() if v is not None}
        if sigma:
            given["paper_sigma"] = sigma
        if privacy is not None:
            if not isinstance(privacy, NoiseConfig):
                raise TypeError(f"argument 'privacy' must be a NoiseConfig, got {privacy!r}")
            if given:
                raise ValueError(f"{algorithm}: give the noise either as privacy=NoiseConfig(...)"
                                 f" or as keywords, not both (got privacy= and {sorted(given)})")
            return privacy
        return cls(**given)

    @property
    def mode(self) -> str | None:
        """'budget', 'noise_multiplier', 'paper_sigma', 'paper_epsilon' or None (no noise)."""
        if self.budget is not None:
            return "budget"
        for name in _MODES[1:]:
            if getattr(self, name):
                return name
        return None

    def paper_target(self) -> tuple[float, int]:
        """``(paper_epsilon, n_rounds)``, the input of a paper's noise formula.

        Returns
        -------
        tuple of (float, int)

        Raises
        ------
        ValueError
            The noise is not set by ``paper_epsilon``.
        """
        if self.paper_epsilon is None or self.n_rounds is None:
            raise ValueError("the paper's formula needs 'paper_epsilon' and 'n_rounds'")
        return float(self.paper_epsilon), int(self.n_rounds)

    @property
    def planned_rounds(self) -> int | None:
        """The rounds a budget was planned for (stepping past them raises), else ``None``."""
        return self.n_rounds if self.budget is not None else None

    @property
    def method(self) -> str:
        """The accountant: the budget's, else ``'auto'``."""
        return "auto" if self.budget is None else self.budget.method

    @property
    def neighboring(self) -> str:
        """The neighbouring relation: the budget's, else ``'replace_one'``."""
        return "replace_one" if self.budget is None else self.budget.neighboring

    def resolve_delta(self, min_local_size: int) -> float:
        """The delta to certify, checked ``< 1/N`` for the smallest (public) local data set.

        Parameters
        ----------
        min_local_size : int
            ``N``, the smallest local data set size the algorithm may use (public).

        Returns
        -------
        float
        """
        if self.budget is not None:
            return self.budget.resolve_delta(min_local_size)
        if self.delta is None:
            return default_delta(min_local_size)
        return check_delta_for_dataset(self.delta, min_local_size)

    def refuse_relation(self, algorithm: str, reason: str | None) -> None:
        """Raise ``ValueError`` for a budget under ``'add_remove_one'`` when ``reason`` (why the
        algorithm's releases cannot be accounted under it) is given.

        Parameters
        ----------
        algorithm : str
        reason : str or None
            ``None``: the algorithm accepts add/remove.
        """
        if reason is not None and self.neighboring != "replace_one":
            raise ValueError(f"{algorithm} refuses neighboring={self.neighboring!r}: {reason}; "
                             "use PrivacyBudget(..., neighboring='replace_one') (the default)")


# ---------------------------------------------------------------------------- releases
class Release:
    """What one agent releases in each round it is active: the statement of its sensitivity.

    Subclasses give the accountant's events of an agent for a noise level and say how a
    budget calibrates that level (:class:`GaussianRelease`; DP-DGT's and DPDO's Laplace
    schedules state their own).

    Attributes
    ----------
    sensitivity : float
        The sensitivity of one release under replace-one, a PUBLIC number (from clip levels).
    norm : {'l2', 'l1'}
        The norm of ``sensitivity`` (Gaussian: L2, Laplace: L1).
    add_remove_refusal : str or None
        Why the release cannot be accounted under ``'add_remove_one'`` (``None``: it can).
    """

    sensitivity: float
    norm: str = "l2"
    add_remove_refusal: str | None = None

    def events(self, noise_multiplier: float, local_size: int, rounds: int
               ) -> list[tuple[EventSpec, int]]:
        """The events of one agent with ``local_size`` records released in ``rounds`` rounds.

        Parameters
        ----------
        noise_multiplier : float
        local_size : int
        rounds : int

        Returns
        -------
        list of (EventSpec, int)
        """
        raise NotImplementedError

    def recorded_sensitivity(self, dim: int, rng: Any) -> float:
        """The sensitivity the ledger records: :attr:`sensitivity` plus secure mode's
        grid-rounding term (:func:`rfed.privacy.mechanisms.release_sensitivity`).

        Parameters
        ----------
        dim : int
            Coordinates of one release.
        rng : numpy.random.Generator or SecureRandom

        Returns
        -------
        float
        """
        return float(release_sensitivity(self.sensitivity, dim, rng, self.norm))

    def noise_level(self, noise_multiplier: float, sensitivity: float) -> float:
        """The plan's noise level for a research ``noise_multiplier`` (the multiplier itself
        by default; a schedule states its own conversion).

        Parameters
        ----------
        noise_multiplier, sensitivity : float

        Returns
        -------
        float
        """
        return noise_multiplier

    def paper_level(self, sigma: float, sigma_unit: float, sensitivity: float) -> float:
        """The plan's noise level for a paper's noise parameter ``sigma`` stated in units of
        ``sigma_unit``: ``sigma sigma_unit / sensitivity`` by default.

        Parameters
        ----------
        sigma, sigma_unit, sensitivity : float

        Returns
        -------
        float
        """
        return sigma * sigma_unit / sensitivity

    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: np.ndarray,
                  active_rounds: np.ndarray, rng: Any) -> float | np.ndarray:
        """The smallest noise level whose planned run certifies ``budget`` for every agent.

        A release whose agents differ in what they release (the federated trainers' local
        runs: each agent's data set size, batch size and clip level) may return one level per
        agent, an array of shape ``(n_agents,)``, each group of equal configurations
        calibrated for its most active agent; the :class:`NoisePlan` then carries them as
        ``noise_multipliers``.

        Parameters
        ----------
        budget : PrivacyBudget
        delta : float
        local_sizes : int array, shape ``(n_agents,)``
        active_rounds : int array, shape ``(n_agents,)``
            The rounds each agent releases in over the planned run.
        rng : numpy.random.Generator or SecureRandom
            The run's generator (secure mode: discrete noise, certified with RDP only).

        Returns
        -------
        float or array of shape ``(n_agents,)``
        """
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianRelease(Release):
    """Gaussian noise on a value of bounded L2 sensitivity, computed on a minibatch.

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of ONE release under the relation certified, a public number: e.g.
        ``2 C`` (replace-one; ``C`` under add/remove) for a clipped sum of per-sample gradients
        of norm ``<= C``, ``2 C / b`` for their mean over ``b``.
    sample_size : int, optional
        ``b``: records per release, drawn uniformly without replacement from the agent's
        records. ``None``: the whole local data set (no subsampling).
    per_round : int or int array, shape ``(n_agents,)``
        Releases an active agent makes per round, all on ONE minibatch (e.g. DPDL's
        ``|N_i|``): they compose to one Gaussian of multiplier ``z / sqrt(r)``.
    sampling : {'without_replacement', 'poisson'}
        How the minibatch is drawn: ``b`` of the ``q_i`` records uniformly without replacement,
        or Poisson sampling, each record independently with probability ``b / q_i`` (``b`` the
        expected size and the PUBLIC normaliser; ``q_i`` the declared public size under
        add/remove). Poisson events under replace-one are certified by the PLD accountant
        (dp-accounting's RDP has no such event).

    Notes
    -----
    Under add/remove the local size is private, and both ways of reading the records (a draw of
    ``b`` of ``q_i`` without replacement, or a normaliser ``q_i``) depend on it: the release
    refuses that relation (:data:`GAUSSIAN_REPLACE_ONE_ONLY`), unless it samples by Poisson
    with the public normaliser ``b`` and the rates of declared public sizes.
    """

    sensitivity: float
    sample_size: int | None = None
    per_round: int | np.ndarray = 1
    add_remove_refusal: str | None = GAUSSIAN_REPLACE_ONE_ONLY
    sampling: str = "without_replacement"

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"argument 'sampling' must be one of {SAMPLINGS}, got "
                             f"{self.sampling!r}")
        if self.sampling == "poisson":
            if self.sample_size is None:
                raise ValueError("sampling='poisson' needs a 'sample_size' (the expected "
                                 "minibatch size and public normaliser)")
            # rates and normaliser read only public numbers: add/remove can be accounted
            object.__setattr__(self, "add_remove_refusal", None)
        if not (math.isfinite(float(self.sensitivity)) and float(self.sensitivity) > 0):
            raise ValueError(f"argument 'sensitivity' must be a finite number > 0 (a public "
                             f"bound from clip levels), got {self.sensitivity!r}")
        if self.sample_size is not None and (isinstance(self.sample_size, bool) or not
                                             isinstance(self.sample_size, (int, np.integer))
                                             or self.sample_size < 1):
            raise ValueError(f"argument 'sample_size' must be an int >= 1 or None, got "
                             f"{self.sample_size!r}")
        per_round = np.asarray(self.per_round)
        if per_round.dtype.kind not in "iu" or np.any(per_round < 1):
            raise ValueError(f"argument 'per_round' must hold ints >= 1, got {self.per_round!r}")

    def releases(self, n_agents: int) -> np.ndarray:
        """Releases per active round of each agent, int array of shape ``(n_agents,)``.

        Parameters
        ----------
        n_agents : int

        Returns
        -------
        ndarray of int, shape ``(n_agents,)``
        """
        return np.broadcast_to(np.asarray(self.per_round, dtype=int), (n_agents,)).copy()

    def events(self, noise_multiplier: float, local_size: int, rounds: int,
               per_round: int = 1) -> list[tuple[EventSpec, int]]:
        """The events of one agent (``per_round`` releases of one minibatch per round).

        Parameters
        ----------
        noise_multiplier : float
        local_size : int
        rounds : int
        per_round : int

        Returns
        -------
        list of (EventSpec, int)
        """
        return _gaussian_events(noise_multiplier, local_size, self.sample_size, per_round,
                                rounds, self.sampling)

    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: np.ndarray,
                  active_rounds: np.ndarray, rng: Any) -> float:
        """See :meth:`Release.calibrate`: the likely worst group of agents (same local size and
        releases per round) is calibrated first; any group still above the target is calibrated
        in turn (the multiplier only grows).

        Parameters
        ----------
        budget : PrivacyBudget
            The target ``(epsilon, delta)``, relation and accountant.
        delta : float
            The resolved delta.
        local_sizes : ndarray of int, shape ``(n_agents,)``
            The agents' (public) local sizes.
        active_rounds : ndarray of int, shape ``(n_agents,)``
            The rounds each agent is active in the planned run.
        rng : numpy.random.Generator or SecureRandom
            Secure mode restricts the accountant to RDP.

        Returns
        -------
        float
            The noise multiplier.
        """
        if is_secure(rng):   # discrete Gaussian releases: RDP only
            budget = dataclasses.replace(budget, method="rdp")
        sizes = np.asarray(local_sizes)
        groups = _groups(sizes, self.sample_size, self.releases(sizes.size),
                         np.asarray(active_rounds), self.sampling)
        if not groups:
            raise ValueError("the planned run releases nothing: no noise to calibrate")
        return _calibrate_groups(tuple(groups), budget, float(delta))[0]


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


@functools.lru_cache(maxsize=256)
def _calibrate_groups(groups: tuple[_GroupEvents, ...], budget: PrivacyBudget, delta: float
                      ) -> tuple[float, Certificate]:
    # a pure function of public numbers: cached, so repetitions of one configuration (and
    # repeated settings of an experiment) calibrate once
    z = 0.0
    for g in groups:
        if z > 0 and certify(g(z), delta, budget.neighboring, budget.method).epsilon \
                <= budget.epsilon:
            continue
        # rtol 1e-2 on z keeps the certified epsilon within about 2 % of the target
        z = calibrate(g, budget, delta=delta, rtol=1e-2).noise_multiplier
    # the final z may exceed what earlier groups needed: re-certify them all at z
    certs = [certify(g(z), delta, budget.neighboring, budget.method) for g in groups]
    return z, max(certs, key=lambda c: c.epsilon)


# ---------------------------------------------------------------------------- the plan
@dataclasses.dataclass(frozen=True)
class NoisePlan:
    """The noise of a run, fixed at its start (:func:`plan_noise`).

    Attributes
    ----------
    noise_multiplier : float
        The noise level: ``z``, the noise std over the sensitivity, for a
        :class:`GaussianRelease`; the factor on the unit noise schedule of a release that
        states a schedule (DP-DGT's, DPDO's). With per-agent levels, the smallest of them.
    sensitivity : float
        The sensitivity the ledger records for one release: the release's, plus secure mode's
        grid-rounding term (:meth:`Release.recorded_sensitivity`).
    delta : float
        The delta every report certifies at.
    mode : str
        How the noise was set (:attr:`NoiseConfig.mode`).
    method : {'auto', 'rdp', 'pld'}
        The accountant (RDP only in secure mode).
    neighboring : str
    target_epsilon : float or None
        The budget's epsilon.
    planned_rounds : int or None
        With a budget: stepping past them raises.
    epsilon_paper : float or None
        The paper's epsilon the noise was set from (``paper_epsilon=``).
    secure : bool
        Secure mode (OS randomness, discrete noise).
    noise_multipliers : array of shape ``(n_agents,)`` or None
        One level per agent, for a release that calibrates its agents' configurations apart
        (:meth:`Release.calibrate` returned an array: the federated trainers' local runs);
        ``None`` when every agent has ``noise_multiplier``.
    """

    noise_multiplier: float
    sensitivity: float
    delta: float
    mode: str
    method: str = "auto"
    neighboring: str = "replace_one"
    target_epsilon: float | None = None
    planned_rounds: int | None = None
    epsilon_paper: float | None = None
    secure: bool = False
    noise_multipliers: np.ndarray | None = None

    @property
    def std(self) -> float:
        """The noise standard deviation of one release: ``noise_multiplier * sensitivity``."""
        return self.noise_multiplier * self.sensitivity


def plan_noise(config: NoiseConfig, release: Release, *, local_sizes: np.ndarray | None, dim: int,
               rng: Any, active_rounds: Any = None, comm: Any = None,
               paper_std: Callable[[float], float] | None = None, sigma_unit: float = 1.0,
               algorithm: str = "algorithm") -> NoisePlan | None:
    """The noise of a run of ``config`` whose agents make ``release`` (``None``: no noise).

    Parameters
    ----------
    config : NoiseConfig
    release : Release
        What one agent releases per active round (its public sensitivity).
    local_sizes : int array, shape ``(n_agents,)``, or None
        The local data set sizes the algorithm may use (public under replace-one); ``None``
        for a relation without records (DP-DGT's cost functions): the delta is then the
        configuration's (or the budget's), by default ``1e-5``.
    dim : int
        Coordinates of one release (secure mode's grid term grows with it).
    rng : numpy.random.Generator or SecureRandom
        The run's generator (secure mode is read from it; nothing is drawn).
    active_rounds : int array of shape ``(n_agents,)``, or callable returning one, optional
        The rounds each agent will release in over the planned run (a callable is evaluated
        only under a budget, once: e.g. the replay of a public activation schedule). Default:
        every agent in every planned round.
    comm : Communicator, optional
        The engine: the budget's calibration (and the paper's formula) run once, on one
        process, for all (:meth:`rfed.networks.comm.Communicator.root_computes`).
    paper_std : callable, optional
        ``paper_std(delta)``: the paper's noise std for ``config.paper_epsilon`` in units of
        ``sigma_unit`` (``delta`` the resolved one); an algorithm without a paper formula leaves
        it out, and ``paper_epsilon=`` is then refused.
    sigma_unit : float
        The unit the papers state their std in (e.g. the clip level): ``z = sigma sigma_unit /
        sensitivity`` for ``paper_sigma`` and ``paper_epsilon``.
    algorithm : str
        The algorithm's name, for the messages.

    Returns
    -------
    NoisePlan or None

    Raises
    ------
    ValueError
        A relation the release refuses (with the reason), ``delta >= 1/N``, ``paper_epsilon``
        without a paper formula, or a budget that would need a multiplier above ``1e6``.
    """
    mode = config.mode
    if mode is None:
        return None
    config.refuse_relation(algorithm, release.add_remove_refusal)
    sizes = None if local_sizes is None else np.asarray(local_sizes)
    if sizes is not None:
        delta = config.resolve_delta(int(sizes.min()))
    elif config.budget is not None and config.budget.delta is not None:
        delta = config.budget.delta
    else:
        delta = DEFAULT_DELTA if config.delta is None else config.delta
    secure = bool(is_secure(rng))
    sensitivity = release.recorded_sensitivity(dim, rng)
    once = (lambda fn: fn()) if comm is None else comm.root_computes
    target = None
    if mode == "budget":
        budget = config.budget
        assert budget is not None and config.n_rounds is not None

        def calibrated() -> float | np.ndarray:
            active = active_rounds() if callable(active_rounds) else active_rounds
            if active is None:
                active = np.full(1 if sizes is None else sizes.size, config.n_rounds)
            # a relation without records (sizes None) is a release's own calibration
            return release.calibrate(budget, delta, sizes, np.asarray(active),  # type: ignore[arg-type]
                                     rng)

        z = once(calibrated)
        target = budget.epsilon
    elif mode == "noise_multiplier":
        z = release.noise_level(float(config.noise_multiplier or 0.0), sensitivity)
    elif mode == "paper_sigma":
        z = release.paper_level(float(config.paper_sigma or 0.0), sigma_unit, sensitivity)
    else:
        if paper_std is None:
            raise ValueError(f"{algorithm} has no paper formula: 'paper_epsilon=' is refused; "
                             "use budget= or noise_multiplier=")
        z = release.paper_level(once(lambda: paper_std(delta)), sigma_unit, sensitivity)
    per_agent = z if isinstance(z, np.ndarray) else None
    return NoisePlan(
        noise_multiplier=float(np.min(z)) if per_agent is not None else float(z),
        sensitivity=float(sensitivity), delta=float(delta),
        mode=mode, method="rdp" if secure else config.method, neighboring=config.neighboring,
        target_epsilon=target, planned_rounds=config.planned_rounds,
        epsilon_paper=config.paper_epsilon, secure=secure, noise_multipliers=per_agent)


# ---------------------------------------------------------------------------- the account
class GaussianAccount:
    """Round-by-round account of an algorithm's :class:`GaussianRelease` releases.

    Parameters
    ----------
    plan : NoisePlan
        The run's noise (multiplier, recorded sensitivity, delta, accountant, budget).
    release : GaussianRelease
        What an active agent releases per round.
    local_sizes : int array, shape ``(n_agents,)``
        ``q_i`` (under add/remove the declared public sizes,
        :meth:`rfed.privacy.PrivacyBudget.public_counts`).
    algorithm : str
        The name in the report.
    assumptions : sequence of str
        What the guarantee rests on (clip levels, sampling, what is public).
    paper : object, optional
        The paper's closed form (an object with ``evaluate(rounds) -> dict``), reported beside
        the certified value, labelled as the paper's.
    """

    level = "record"
    neighboring = "replace_one"

    def __init__(self, *, plan: NoisePlan, release: GaussianRelease, local_sizes: np.ndarray,
                 algorithm: str, assumptions: Sequence[str] = (), paper: Any = None):
        self.algorithm = algorithm
        self.neighboring = plan.neighboring
        self.sampling = release.sampling
        if self.neighboring != "replace_one" and release.add_remove_refusal is not None:
            raise ValueError(f"{algorithm} refuses neighboring={self.neighboring!r}: "
                             f"{release.add_remove_refusal}")
        if self.sampling == "poisson" and plan.secure and self.neighboring == "replace_one":
            raise ValueError("secure mode certifies with RDP only, which has no replace-one "
                             "bound for Poisson sampling: use sampling='without_replacement' "
                             "in secure mode")
        self.local_sizes = np.asarray(local_sizes, dtype=int)
        self.sample_size = None if release.sample_size is None else int(release.sample_size)
        self.releases = release.releases(self.local_sizes.size)
        self.noise_multiplier = float(plan.noise_multiplier)
        self.sensitivity = float(plan.sensitivity)
        self.delta = float(plan.delta)
        self.method = plan.method
        self.assumptions = list(assumptions)
        self.target_epsilon = plan.target_epsilon
        self.planned_rounds = plan.planned_rounds
        self.paper = paper
        self.epsilon_paper = plan.epsilon_paper
        self.secure = bool(plan.secure)
        self.mode = plan.mode
        self.rounds = 0
        self.counts = np.zeros(self.local_sizes.size, dtype=np.int64)
        # Poisson under replace-one: PLD only (dp-accounting's RDP has no such event)
        pld = self.sampling == "poisson" and self.neighboring == "replace_one"
        self.ledger = PrivacyLedger(self.local_sizes.size, "pld" if pld else "rdp",
                                    self.neighboring, description=algorithm)
        self._distinct_releases = np.unique(self.releases)
        self._equal_sizes = bool(np.all(self.local_sizes == self.local_sizes[0]))
        self._plan = self._event_plan()
        self._memo: dict[tuple, Certificate | None] = {}

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
        """Raise ``RuntimeError`` before a round beyond the planned run (the budget would be
        exceeded)."""
        check_planned_round(self.algorithm, self.rounds, self.planned_rounds,
                            self.target_epsilon)

    def record_round(self, active: np.ndarray) -> None:
        """Charge one round to the agents of a mask.

        Parameters
        ----------
        active : bool array, shape ``(n_agents,)``
            The agents whose records this round's releases read (this process's agents on a
            distributed engine; the accounts of the processes are merged).
        """
        self.check_can_step()
        active = np.asarray(active, dtype=bool)
        if active.shape != self.counts.shape:
            raise ValueError(f"argument 'active' must be a bool mask of shape "
                             f"{self.counts.shape}, got shape {active.shape}")
        self.counts += active
        plan = getattr(self, "_plan", None)  # None too in an account saved before the plan
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
                kw: dict[str, Any] = {}
                if sampling == "poisson" and self.sample_size is not None:
                    kw = {"sampling_rate": np.minimum(1.0, self.sample_size / sizes)}
                    if np.all(kw["sampling_rate"] >= 1.0):
                        sampling, kw = "none", {}
                if sampling == "without_replacement" and self.sample_size is not None:
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
        """The certified ``(epsilon, delta)`` of the worst-off agent so far.

        Parameters
        ----------
        delta : float, optional
            Default: the plan's.

        Returns
        -------
        Certificate or None
            ``None`` before any release.
        """
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
        """The report of the rounds run (:func:`privacy_report`).

        Parameters
        ----------
        delta : float, optional
            Default: the plan's.

        Returns
        -------
        dict
        """
        cert = self.certificate(delta)
        return privacy_report(
            algorithm=self.algorithm, rounds=self.rounds, planned_rounds=self.planned_rounds,
            epsilon=0.0 if cert is None else cert.epsilon,
            delta=self.delta if delta is None else float(delta),
            accountant=cert.accountant if cert is not None else "no release yet",
            neighboring=self.neighboring, level=self.level, assumptions=self.assumptions,
            target_epsilon=self.target_epsilon, noise_multiplier=self.noise_multiplier,
            calibration=self.mode, secure=self.secure, paper=self.paper,
            epsilon_paper=self.epsilon_paper)

    def certified_epsilons(self, delta: float | None = None) -> np.ndarray:
        """Per-agent certified epsilon (the ledger's RDP), shape ``(n_agents,)``.

        Parameters
        ----------
        delta : float, optional

        Returns
        -------
        array, shape ``(n_agents,)``
        """
        return self.ledger.epsilons(self.delta if delta is None else float(delta))

    def finalize(self) -> GaussianAccount:
        """Store the paper's value for the rounds run in the ledger (for :meth:`text`).

        Returns
        -------
        GaussianAccount
            ``self``.
        """
        if self.paper is not None and not self.ledger._paper:
            val = self.paper.evaluate(self.rounds)
            if val.get("epsilon") is not None:
                self.ledger.add_paper_bound(f"{self.algorithm} (paper)", float(val["epsilon"]),
                                            float(val.get("delta") or 0.0), val["formula"])
        return self

    def text(self, delta: float | None = None) -> str:
        """The ledger's table with the paper's value beside it.

        Parameters
        ----------
        delta : float, optional

        Returns
        -------
        str
        """
        return self.finalize().ledger.report(self.delta if delta is None else float(delta))


# ---------------------------------------------------------------------------- the report
def label(epsilon: float, delta: float) -> str:
    """The primary privacy label of a run: ``'certified eps=X (delta=Y)'``.

    Parameters
    ----------
    epsilon, delta : float

    Returns
    -------
    str
    """
    return f"certified eps={epsilon:.3g} (delta={delta:.2g})"


def privacy_report(*, algorithm: str, rounds: int, epsilon: float, delta: float,
                   accountant: str, neighboring: str, level: str, assumptions: Sequence[str],
                   target_epsilon: float | None, noise_multiplier: float | None,
                   calibration: str | None, secure: bool, planned_rounds: int | None = None,
                   paper: Any = None, epsilon_paper: float | None = None,
                   adjacency_radius: float | None = None) -> dict[str, Any]:
    """The privacy report of a private run: the keys :data:`REPORT_KEYS`, JSON-ready.

    Parameters
    ----------
    algorithm : str
    rounds : int
        Rounds run.
    epsilon, delta : float
        The certified value of the worst-off agent.
    accountant : str
        Which accountant, its version and the relation.
    neighboring, level : str
        The relation and its level (``'record'``, ``'client'``, or a paper's relation).
    assumptions : sequence of str
        What the guarantee rests on; the statement of what it does not cover
        (:data:`rfed.privacy.OUTSIDE_THE_GUARANTEE`) is added.
    target_epsilon, noise_multiplier : float or None
    calibration : str or None
        How the noise was set (:attr:`NoiseConfig.mode`).
    secure : bool
    planned_rounds : int, optional
    paper : object, optional
        The paper's closed form (``evaluate(rounds) -> dict``), evaluated at ``rounds`` and
        reported beside, labelled :data:`PAPER_LABEL`; its epsilon fills ``epsilon_paper`` when
        that is not given.
    epsilon_paper : float, optional
    adjacency_radius : float, optional
        Reported (after ``level``) for relations that have one.

    Returns
    -------
    dict
    """
    paper_value = None if paper is None else paper.evaluate(rounds)
    if epsilon_paper is None and paper_value is not None:
        epsilon_paper = paper_value.get("epsilon")
    out: dict[str, Any] = {
        "algorithm": algorithm, "rounds": rounds, "epsilon_certified": epsilon,
        "delta": delta, "accountant": accountant, "neighboring": neighboring, "level": level}
    if adjacency_radius is not None:
        out["adjacency_radius"] = adjacency_radius
    stated = list(assumptions)
    if OUTSIDE_THE_GUARANTEE not in stated:
        stated.append(OUTSIDE_THE_GUARANTEE)
    out.update({
        "assumptions": stated, "target_epsilon": target_epsilon,
        "noise_multiplier": noise_multiplier, "calibration": calibration,
        "epsilon_paper": epsilon_paper, "paper": paper_value, "secure": secure,
        "replayable_from_seed": not secure, "label": label(epsilon, delta),
        # the CLI's privacy table reads this sub-report
        "certified": {"epsilon": epsilon, "delta": delta, "accountant": accountant},
        "planned_rounds": planned_rounds, "private": True})
    return out


def not_private_report(algorithm: str, rounds: int, secure: bool = False) -> dict[str, Any]:
    """The report of a run that adds no noise: the same keys as :func:`privacy_report`.

    Its ``epsilon_certified`` is ``inf`` once a round has run (its releases are the data's
    un-noised functions) and 0 before; ``private`` is ``False``; the relation, the accountant
    and the noise are ``None``.

    Parameters
    ----------
    algorithm : str
    rounds : int
        Rounds run.
    secure : bool

    Returns
    -------
    dict
    """
    eps = math.inf if rounds > 0 else 0.0
    return {
        "algorithm": algorithm, "rounds": int(rounds), "epsilon_certified": eps, "delta": None,
        "accountant": "none (no noise)", "neighboring": None, "level": None,
        "assumptions": ["no noise: every release is an un-noised function of the data",
                        OUTSIDE_THE_GUARANTEE],
        "target_epsilon": None, "noise_multiplier": None, "calibration": None,
        "epsilon_paper": None, "paper": None, "secure": bool(secure),
        "replayable_from_seed": not secure, "label": "not private (no noise)",
        "certified": {"epsilon": eps, "delta": None, "accountant": "none (no noise)"},
        "planned_rounds": None, "private": False}


def certifies(report: Any) -> bool:
    """Whether a run's report holds a certified epsilon of noisy releases (``False`` for a run
    without noise, an untracked one, or no report).

    Parameters
    ----------
    report : dict or None

    Returns
    -------
    bool
    """
    return bool(report) and bool(report.get("private")) \
        and report.get("epsilon_certified") is not None


def untracked_report(algorithm: str, rounds: int, secure: bool = False) -> dict[str, Any]:
    """The report of a noisy run whose account was switched off (DP-DGT's
    ``track_privacy=False`` for Monte Carlo repetitions of one configuration): the same keys
    as :func:`privacy_report`, ``private`` true and ``epsilon_certified`` ``None`` (not
    computed; the tracked run of the same configuration has it).

    Parameters
    ----------
    algorithm : str
    rounds : int
    secure : bool

    Returns
    -------
    dict
    """
    out = not_private_report(algorithm, rounds, secure)
    out.update({"epsilon_certified": None, "private": True,
                "accountant": "not tracked (track_privacy=False)",
                "assumptions": [OUTSIDE_THE_GUARANTEE], "label": "privacy not tracked",
                "certified": {"epsilon": None, "delta": None,
                              "accountant": "not tracked (track_privacy=False)"}})
    return out
