"""DPDO: distributed projected gradient descent on Laplace-perturbed states with decaying steps.

Z. Huang, S. Mitra, N. Vaidya, "Differentially Private Distributed Optimization", ICDCN 2015
(arXiv:1401.2596). In every iteration ``k`` each agent broadcasts its state perturbed by Laplace
noise of decaying parameter, averages the noisy states it receives (its own included) and takes a
projected gradient step from that average with a decaying step size::

    w_i(k)   = x_i(k) + eta_i(k),        eta_i(k) ~ Lap(M_k)^d,   M_k = c_M p^k
    v_i(k)   = sum_j a_ij w_j(k)
    x_i(k+1) = Proj_X[ v_i(k) - gamma_k grad f_i(v_i(k)) ],           gamma_k = c q^k,

with ``q < p < 1`` for a finite epsilon over an infinite run. The paper's calibration (its
relation: one agent's whole cost function changes, both with gradients of norm at most ``C``)
bounds the L1 distance of ``x_i(k+1)`` between neighbours by ``2 C sqrt(d) gamma_k`` and gives
``epsilon = sum_k 2 C sqrt(d) gamma_k / M_{k+1} = 2 C sqrt(d) c / (c_M (p - q))``, i.e.
``M_k = 2 C sqrt(d) c p^k / (epsilon (p - q))``. rfed reports it as the paper's formula.

rfed, batched over agents and generic over the manifold:

* ``grad f_i`` is the mean of agent ``i``'s per-sample gradients over its whole local data set
  (the paper uses exact local gradients), each CLIPPED to norm ``C`` (a public number);
* the averaging is one Riemannian gossip step of the noisy states, ``v_i = Exp_{w_i}(sum_j a_ij
  Log_{w_i}(w_j))`` (on Euclidean space ``sum_j a_ij w_j``);
* the next message is released at the public point ``v_i``: ``w_i(k+1) = Exp_{v_i}(-gamma_k
  grad f_i(v_i) + eta)`` with ``eta`` Laplace in orthonormal coordinates of ``T_{v_i}``; on
  Euclidean space this is ``x_i(k+1) + eta`` exactly (with ``domain_radius``, the projection on
  the ball ``X = {||x|| <= R}`` is applied before the noise, as in the paper). The clean
  ``x_i(k+1)`` never leaves the agent, and the run's output is the agents' mean of the ``v_i``,
  a function of the released messages.

Privacy, certified (record level, replace-one of one record of agent ``i``'s data set): given
every earlier message, ``v_i`` is public and the release ``w_i(k+1)`` depends on the data only
through the clipped mean gradient, which moves by at most ``2C / q_i`` in L2, hence the released
coordinates by at most ``gamma_k 2C sqrt(d) / q_i`` in L1 (the projection is 1-Lipschitz in L2).
Each iteration is one Laplace release charged to every agent's ledger; the certificate is the
smaller of the basic composition ``sum_k Delta_k / M_{k+1}`` (pure epsilon) and dp-accounting's RDP
composition of the same Laplace events at ``delta`` (both are upper bounds). The initial message
``w_i(0) = x_0 + eta`` reads no data (``x_0`` is public).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms.decentralized._common import check_nonneg, check_probability
from rfed.algorithms.decentralized._streams import agent_draws, run_seed
from rfed.algorithms.decentralized.base import PrivateAlgorithm, PrivateGradient, PrivateState
from rfed.algorithms.private import (
    PAPER_LABEL,
    NoisePlan,
    Release,
    label,
    privacy_report,
)
from rfed.manifolds import Euclidean, as_generator
from rfed.networks.gossip import riemannian_gossip
from rfed.networks.network import Network
from rfed.privacy.accountants import EventSpec
from rfed.privacy.budget import PrivacyBudget, calibrate, check_planned_round
from rfed.privacy.ledger import PrivacyLedger
from rfed.privacy.mechanisms import laplace_mechanism, release_sensitivity
from rfed.privacy.secure import is_secure

__all__ = ["DPDO", "DPDOAccount", "DPDOPaperFormula"]


@dataclasses.dataclass(frozen=True)
class DPDOPaperFormula:
    """The paper's epsilon of a DPDO run (its function-level relation, gradient norm ``<= C``).

    Attributes
    ----------
    lr, lr_decay : float
        ``c`` and ``q`` of ``gamma_k = c q^k``.
    noise_scale, noise_decay : float
        ``c_M`` and ``p`` of ``M_k = c_M p^k``.
    clip : float
        ``C``.
    dim : int
        ``d``.
    """

    lr: float
    lr_decay: float
    noise_scale: float
    noise_decay: float
    clip: float
    dim: int

    def evaluate(self, rounds: int) -> dict:
        """``{'label', 'formula', 'epsilon', 'epsilon_infinite_run', 'delta'}``.

        Parameters
        ----------
        rounds : int
            Rounds run.

        Returns
        -------
        dict
        """
        k = np.arange(max(int(rounds), 1))
        unit = 2.0 * self.clip * math.sqrt(self.dim)
        if self.noise_scale <= 0:
            eps = inf = float("inf")
        else:
            eps = float(np.sum(unit * self.lr * self.lr_decay ** k
                               / (self.noise_scale * self.noise_decay ** (k + 1))))
            inf = (unit * self.lr / (self.noise_scale * (self.noise_decay - self.lr_decay))
                   if self.lr_decay < self.noise_decay else float("inf"))
        return {"label": PAPER_LABEL, "epsilon": eps, "epsilon_infinite_run": inf, "delta": 0.0,
                "formula": ("DPDO: eps = sum_k 2 C sqrt(d) gamma_k / M_{k+1} over the rounds "
                            "run (infinite run: 2 C sqrt(d) c / (c_M (p - q))), for the "
                            "paper's relation: one agent's whole cost function changes, "
                            "gradients of norm <= C (not record-level)")}


def paper_noise_scale(epsilon: float, lr: float, lr_decay: float, noise_decay: float,
                      clip: float, dim: int) -> float:
    """The paper's ``c_M = 2 C sqrt(d) c / (epsilon (p - q))`` (needs ``q < p``).

    Parameters
    ----------
    epsilon : float
        The paper's target.
    lr : float
        ``c``, the first step size.
    lr_decay, noise_decay : float
        ``q`` and ``p``.
    clip : float
        ``C``.
    dim : int
        ``d``.

    Returns
    -------
    float
    """
    if not lr_decay < noise_decay:
        raise ValueError(f"the paper's calibration needs lr_decay < noise_decay (q < p), got "
                         f"q = {lr_decay!r}, p = {noise_decay!r}")
    return 2.0 * clip * math.sqrt(dim) * lr / (epsilon * (noise_decay - lr_decay))


@dataclasses.dataclass(frozen=True)
class _ScaledEvents:
    """``events_for(c_M)`` of the worst agent over a planned run (picklable, no closure)."""

    sensitivities: tuple[float, ...]
    unit_scales: tuple[float, ...]

    def __call__(self, scale: float):
        events: dict[EventSpec, int] = {}
        for sens, unit in zip(self.sensitivities, self.unit_scales, strict=True):
            spec = EventSpec.make("laplace", scale * unit / sens)
            events[spec] = events.get(spec, 0) + 1
        return list(events.items())


#: Why DPDO refuses ``neighboring='add_remove_one'``.
FULL_BATCH_REPLACE_ONE_ONLY = (
    "each release is the mean of the agent's q_i clipped gradients: its normaliser (and the "
    "sensitivity 2 C sqrt(d) / q_i) depends on the local size, which add/remove changes and "
    "keeps private"
)


@dataclasses.dataclass(frozen=True, eq=False)
class DPDORelease(Release):
    """DPDO's release of iteration ``k``: the agent's next state, Laplace of scale ``M_{k+1}``,
    L1 sensitivity ``Delta_k(q) = gamma_k 2 C sqrt(d) / q`` (the module docstring).

    The plan's noise level is ``c_M`` of ``M_k = c_M p^k``.

    Parameters
    ----------
    lr, lr_decay, noise_decay, clip : float
        ``c``, ``q``, ``p`` and ``C``.
    dim : int
        ``d``.
    min_local_size : int
        The smallest local data set (the worst agent).
    """

    lr: float
    lr_decay: float
    noise_decay: float
    clip: float
    dim: int
    min_local_size: int
    norm: str = "l1"
    add_remove_refusal: str | None = FULL_BATCH_REPLACE_ONE_ONLY

    def sensitivities(self, k: int | np.ndarray, sizes: np.ndarray | int,
                      grid_term: float = 0.0) -> np.ndarray:
        """``Delta_{k,i}``: L1 sensitivity of the release of iteration ``k`` (message ``k+1``)
        for local data sets of ``sizes`` records, plus secure mode's ``grid_term``.

        Parameters
        ----------
        k : int or int array
        sizes : int or int array
        grid_term : float

        Returns
        -------
        array
        """
        gamma = self.lr * np.power(self.lr_decay, k, dtype=float)
        return gamma * 2.0 * self.clip * math.sqrt(self.dim) / np.asarray(sizes, float) \
            + grid_term

    @property
    def sensitivity(self) -> float:  # type: ignore[override]
        """``Delta_0`` of the smallest local data set."""
        return float(self.sensitivities(0, self.min_local_size))

    @sections_from(Release.noise_level)
    def noise_level(self, noise_multiplier: float, sensitivity: float) -> float:
        """``c_M`` of a research multiplier ``z = M_1 / Delta_0``: ``z Delta_0 / p``."""
        return noise_multiplier * sensitivity / self.noise_decay

    @sections_from(Release.paper_level)
    def paper_level(self, sigma: float, sigma_unit: float, sensitivity: float) -> float:
        """The paper's parametrisation is ``c_M`` itself."""
        return sigma

    @sections_from(Release.calibrate)
    def calibrate(self, budget: PrivacyBudget, delta: float, local_sizes: np.ndarray,
                  active_rounds: np.ndarray, rng: Any) -> float:
        """Smallest ``c_M`` whose planned run certifies ``budget`` for the smallest local data
        set (the worst agent): the smaller of the closed-form pure calibration and the
        bisected RDP one."""
        rounds = int(np.max(active_rounds))
        grid_term = float(release_sensitivity(0.0, self.dim, rng, "l1"))
        k = np.arange(rounds)
        sens = self.sensitivities(k, int(np.min(local_sizes)), grid_term)
        unit = np.power(self.noise_decay, k + 1, dtype=float)
        pure_scale = float(np.sum(sens / unit)) / budget.epsilon
        events = _ScaledEvents(tuple(float(s) for s in sens), tuple(float(u) for u in unit))
        rdp_scale = calibrate(events, PrivacyBudget(budget.epsilon, delta, method="rdp"),
                              delta=delta).noise_multiplier
        return float(min(pure_scale, rdp_scale))


class DPDOAccount:
    """Round-by-round account of DPDO's Laplace releases (record level, replace-one).

    Round ``k`` charges every releasing agent ``i`` one Laplace event of scale ``M_{k+1}`` and
    L1 sensitivity ``Delta_{k,i} = gamma_k 2 C sqrt(d) / q_i`` (plus the secure grid term of
    :func:`rfed.privacy.mechanisms.release_sensitivity`) in a
    :class:`rfed.privacy.PrivacyLedger`. The certified epsilon is the smaller of the basic
    composition (pure) and the ledger's RDP composition.

    Parameters
    ----------
    algorithm : str
    release : DPDORelease
    plan : NoisePlan
        ``plan.noise_multiplier`` is ``c_M``.
    local_sizes : int array, shape ``(n_agents,)``
    rng : numpy.random.Generator or SecureRandom
        The run's generator (secure mode adds the grid term to the sensitivities).
    mode : str
        How the noise was set (the report's ``calibration``).
    """

    level = "record"
    neighboring = "replace_one"

    def __init__(self, *, algorithm: str, release: DPDORelease, plan: NoisePlan,
                 local_sizes: np.ndarray, rng: Any, mode: str):
        self.algorithm = algorithm
        self.local_sizes = np.asarray(local_sizes, dtype=int)
        self.lr, self.lr_decay = float(release.lr), float(release.lr_decay)
        self.noise_scale, self.noise_decay = float(plan.noise_multiplier), \
            float(release.noise_decay)
        self.clip = float(release.clip)
        self.dim = int(release.dim)
        self.grid_term = float(release_sensitivity(0.0, self.dim, rng, "l1"))
        self.delta = float(plan.delta)
        self.target_epsilon = plan.target_epsilon
        self.planned_rounds = plan.planned_rounds
        self.paper = DPDOPaperFormula(self.lr, self.lr_decay, self.noise_scale,
                                      self.noise_decay, self.clip, self.dim)
        self.epsilon_paper = plan.epsilon_paper
        self.secure = bool(is_secure(rng))
        self.mode = mode
        self.rounds = 0
        self.counts = np.zeros(self.local_sizes.size, dtype=np.int64)
        self.ledger = PrivacyLedger(self.local_sizes.size, "rdp", "replace_one",
                                    description=algorithm)
        self._memo: dict[tuple, tuple[float, str]] = {}

    # ------------------------------------------------------------------ schedules
    def sensitivity(self, k: int | np.ndarray, sizes: np.ndarray | int) -> np.ndarray:
        """``Delta_{k,i}``: L1 sensitivity of the release of iteration ``k`` (message ``k+1``)
        for local data sets of ``sizes`` records.

        Parameters
        ----------
        k : int or ndarray of int
            Iteration(s).
        sizes : int or ndarray of int
            Local data set sizes.

        Returns
        -------
        ndarray
            Of the broadcast shape of ``k`` and ``sizes``.
        """
        gamma = self.lr * np.power(self.lr_decay, k, dtype=float)
        return gamma * 2.0 * self.clip * math.sqrt(self.dim) / np.asarray(sizes, float) \
            + self.grid_term

    def scale(self, k: int | np.ndarray) -> np.ndarray:
        """``M_k = c_M p^k``.

        Parameters
        ----------
        k : int or ndarray of int

        Returns
        -------
        ndarray
            Of the shape of ``k``.
        """
        return self.noise_scale * np.power(self.noise_decay, k, dtype=float)

    @property
    def noise_multiplier(self) -> float:
        """``M_1 / Delta_0`` of the smallest local data set (the first release's multiplier)."""
        sens = float(self.sensitivity(0, int(self.local_sizes.min())))
        return float(self.scale(1)) / sens if sens > 0 else float("inf")

    # ------------------------------------------------------------------ charging
    def check_can_step(self) -> None:
        """Raise before a round beyond the planned run (the budget would be exceeded)."""
        check_planned_round(self.algorithm, self.rounds, self.planned_rounds,
                            self.target_epsilon)

    def record_round(self, charged: np.ndarray) -> None:
        """Charge iteration ``rounds``'s Laplace release to the agents of the mask.

        Parameters
        ----------
        charged : ndarray of bool, shape ``(n_agents,)``
            The agents that released this round.
        """
        self.check_can_step()
        charged = np.asarray(charged, dtype=bool)
        ids = np.flatnonzero(charged)
        if ids.size:
            k = self.rounds
            self.ledger.record(k, agents=ids, mechanism="laplace",
                               sigma=float(self.scale(k + 1)),
                               sensitivity=self.sensitivity(k, self.local_sizes[ids]))
        self.counts += charged
        self.rounds += 1
        self._memo = {}

    # ------------------------------------------------------------------ certificates
    def pure_epsilon(self, rounds: int, sizes: np.ndarray, scale: float | None = None) -> float:
        """Basic composition ``max_q sum_{k<rounds} Delta_k(q) / M_{k+1}`` (pure epsilon).

        Parameters
        ----------
        rounds : int
        sizes : ndarray of int
            The local sizes of the agents charged.
        scale : float, optional
            ``c_M`` (default the run's).

        Returns
        -------
        float
        """
        if rounds <= 0 or np.size(sizes) == 0:
            return 0.0
        k = np.arange(rounds)
        c_m = self.noise_scale if scale is None else scale
        unit = np.power(self.noise_decay, k + 1, dtype=float)
        return max(float(np.sum(self.sensitivity(k, q) / (c_m * unit)))
                   for q in np.unique(sizes))

    def certified(self, delta: float) -> tuple[float, str]:
        """``(epsilon, how)`` of the rounds charged so far, worst agent.

        Parameters
        ----------
        delta : float

        Returns
        -------
        epsilon : float
        how : str
            Which composition gave it.
        """
        key = (self.rounds, delta)
        if key not in self._memo:
            sizes = self.local_sizes[self.counts > 0]
            if not sizes.size:
                self._memo[key] = (0.0, "no release yet")
            else:
                pure = self.pure_epsilon(self.rounds, sizes)
                rdp = self.ledger.epsilon(delta)
                self._memo[key] = ((pure, "basic composition (pure eps-DP)") if pure <= rdp
                                   else (rdp, "dp-accounting RDP"))
        return self._memo[key]

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The report every private rfed algorithm gives.

        Parameters
        ----------
        delta : float, optional
            Default the run's.

        Returns
        -------
        dict
            :func:`rfed.algorithms.private.privacy_report`'s keys.
        """
        delta = self.delta if delta is None else float(delta)
        eps, how = self.certified(delta)
        accountant = (f"{how}: the smaller of basic composition (pure) and dp-accounting RDP "
                      "over the Laplace releases, record-level replace_one")
        return privacy_report(
            algorithm=self.algorithm, rounds=self.rounds, planned_rounds=self.planned_rounds,
            epsilon=eps, delta=delta,
            accountant=accountant, neighboring=self.neighboring, level=self.level,
            assumptions=[f"per-sample gradients clipped to norm C = {self.clip:g} (enforced; "
                         "public); exact local gradients (the whole local data set)",
                         "the averaged point v_i is a function of released messages; the "
                         "clean state never leaves the agent",
                         "L1 sensitivity sqrt(d) times the L2 one (d = "
                         f"{self.dim} released coordinates)"],
            target_epsilon=self.target_epsilon, noise_multiplier=self.noise_multiplier,
            calibration=str(self.mode), secure=self.secure, paper=self.paper,
            epsilon_paper=self.epsilon_paper)

    def finalize(self):
        """Store the paper's value for the rounds run in the ledger.

        Returns
        -------
        DPDOAccount
            ``self``.
        """
        if self.paper is not None and not self.ledger._paper:
            val = self.paper.evaluate(self.rounds)
            self.ledger.add_paper_bound(f"{self.algorithm} (paper)", float(val["epsilon"]),
                                        0.0, val["formula"])
        return self

    def text(self, delta: float | None = None) -> str:
        """A short plain-text report.

        Parameters
        ----------
        delta : float, optional

        Returns
        -------
        str
        """
        rep = self.report(delta)
        return (f"{self.algorithm}: {label(rep['epsilon_certified'], rep['delta'])} over "
                f"{self.rounds} iterations\naccountant: {rep['accountant']}")


@dataclass
class DPDOState(PrivateState):
    """``x``: the messages ``w_i(k)`` to broadcast this round (noisy states); ``z``: the last
    averaged points ``v_i`` (the output points; ``x_0`` before the first round); ``noise_scale``:
    ``c_M`` (0 without noise).

    Parameters
    ----------
    z : ndarray, shape ``(n_agents, *point_shape)``
    noise_scale : float
    **fields
        Those of :class:`~rfed.algorithms.decentralized.base.PrivateState`.
    """

    z: np.ndarray = None  # type: ignore[assignment]
    noise_scale: float = 0.0


class DPDO(PrivateAlgorithm):
    r"""DPDO (Huang, Mitra, Vaidya, ICDCN 2015), generic over the manifold.

    Parameters
    ----------
    network : Network
        Symmetric doubly stochastic ``A = (a_ij)``.
    lr, lr_decay : float
        ``gamma_k = lr * lr_decay^k`` (the paper's ``c q^k``; ``lr_decay`` in (0, 1]).
    noise_decay : float
        ``p`` of ``M_k = c_M p^k`` (in (0, 1]; the paper needs ``lr_decay < noise_decay``).
    clip : float
        Per-sample clipping norm ``C`` (public).
    domain_radius : float, optional
        Euclidean only: the projection ``Proj_X`` on the ball of this radius (the paper's
        compact ``X``); default: no projection.
    budget : PrivacyBudget, optional
        Budget-first: ``c_M`` of the planned ``n_rounds`` iterations is calibrated at ``init``
        so that the finished run certifies ``budget`` (record level, replace-one, per agent).
    n_rounds : int, optional
        Planned iterations (required with ``budget`` and ``paper_epsilon``).
    noise_multiplier : float, optional
        Research: ``M_1 / Delta_0`` of the smallest local data set.
    noise_scale : float, optional
        The paper's parametrisation ``c_M``, reported with its certified epsilon.
    paper_epsilon : float, optional
        ``c_M = 2 C sqrt(d) c / (epsilon (p - q))``, the paper's calibration for its
        function-level relation: the paper's formula, not a guarantee.
    delta : float, optional
        Delta of the reports without a budget (default ``min(1e-5, 1/(10 q))``).
    """

    name = "DPDO"
    # the base class's attribute is inferred as a one-field tuple
    state_rows = ("x", "z")  # type: ignore[assignment]

    def __init__(self, network: Network, *, lr: float, lr_decay: float = 1.0,
                 noise_decay: float = 1.0, clip: float = 1.0,
                 domain_radius: float | None = None, budget: PrivacyBudget | None = None,
                 n_rounds: int | None = None, noise_multiplier: float | None = None,
                 noise_scale: float | None = None, paper_epsilon: float | None = None,
                 delta: float | None = None, **kwargs):
        given = [name for name, v in (("budget", budget), ("noise_multiplier", noise_multiplier),
                                      ("noise_scale", noise_scale),
                                      ("paper_epsilon", paper_epsilon)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'budget', 'noise_multiplier', 'noise_scale' "
                             f"and 'paper_epsilon', got {given}")
        if paper_epsilon is not None and check_nonneg(paper_epsilon, "paper_epsilon") == 0:
            raise ValueError("argument 'paper_epsilon' must be > 0")
        super().__init__(network, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier,
                         sigma=None if noise_scale is None else check_nonneg(noise_scale,
                                                                             "noise_scale"),
                         paper_epsilon=paper_epsilon, delta=delta, **kwargs)
        self.lr = check_nonneg(lr, "lr")
        if self.lr == 0:
            raise ValueError("argument 'lr' (the step size) must be > 0, got 0")
        self.lr_decay = check_probability(lr_decay, "lr_decay")
        self.noise_decay = check_probability(noise_decay, "noise_decay")
        if self.lr_decay >= self.noise_decay and self.noise_decay < 1.0:
            warnings.warn("DPDO's epsilon stays finite over an infinite run only with "
                          f"lr_decay < noise_decay (q < p), got q = {lr_decay}, "
                          f"p = {noise_decay}", stacklevel=2)
        self.clip = check_nonneg(clip, "clip")
        if self.clip == 0:
            raise ValueError("argument 'clip' must be > 0")
        self.domain_radius = None if domain_radius is None else check_nonneg(
            domain_radius, "domain_radius")
        # the clipped mean of the whole local data set (the paper's exact local gradient)
        self.gradient = PrivateGradient(self.clip, None)
        if self.noise.paper_epsilon is not None and not self.lr_decay < self.noise_decay:
            raise ValueError("argument 'paper_epsilon' (the paper's calibration) needs "
                             f"lr_decay < noise_decay, got {lr_decay} and {noise_decay}")

    # ------------------------------------------------------------------ privacy
    @sections_from(PrivateAlgorithm.release)
    def release(self, problem) -> DPDORelease:
        """Each iteration's Laplace release of the next state (L1 sensitivities
        ``gamma_k 2 C sqrt(d) / q_i``)."""
        return DPDORelease(self.lr, self.lr_decay, self.noise_decay, self.clip,
                           problem.manifold.dim, int(problem.counts.min()))

    def paper_std(self, problem, delta: float) -> float:
        """The paper's ``c_M = 2 C sqrt(d) c / (epsilon (p - q))``.

        Parameters
        ----------
        problem : Problem
            The problem the run is planned on (its public sizes and dimension).
        delta : float
            The run's delta.

        Returns
        -------
        float
        """
        return paper_noise_scale(self.noise.paper_target()[0], self.lr, self.lr_decay,
                                 self.noise_decay, self.clip, problem.manifold.dim)

    def check_problem(self, problem) -> None:
        super().check_problem(problem)
        if self.domain_radius is not None and not isinstance(problem.manifold, Euclidean):
            raise ValueError("argument 'domain_radius' (the projection on a ball) is defined "
                             "on Euclidean space only")

    def _release(self, manifold, base: np.ndarray, tangent: np.ndarray, scale: float, draws):
        """``Exp_base(tangent + Lap(scale))`` in orthonormal coordinates (Euclidean: the
        projected ``base + tangent`` plus the noise)."""
        if type(manifold) is Euclidean:
            point = base + tangent
            if self.domain_radius is not None:
                norms = np.linalg.norm(point.reshape(point.shape[0], -1), axis=1)
                shrink = np.minimum(1.0, self.domain_radius / np.maximum(norms, 1e-300))
                point = point * shrink.reshape((-1,) + (1,) * (point.ndim - 1))
            if scale <= 0:
                return point
            flat = laplace_mechanism(point.reshape(point.shape[0], -1), scale, draws)
            return flat.reshape(point.shape)
        coords = manifold.to_coords(base, tangent)
        if scale > 0:
            coords = laplace_mechanism(coords, scale, draws)
        return manifold.exp(base, manifold.from_coords(base, coords))

    def init(self, problem, x0, rng):
        self.check_problem(problem)
        manifold = problem.manifold
        comm = self.network.comm
        x0 = np.broadcast_to(x0, (comm.n_local,) + manifold.point_shape).copy()
        rng = as_generator(rng)
        seed = run_seed(rng)
        plan = self.plan(problem, rng, seed)
        account = None
        if plan is not None:
            account = DPDOAccount(
                algorithm=self.name, release=self.release(problem), plan=plan,
                local_sizes=problem.counts, rng=rng,
                mode="noise_scale" if plan.mode == "paper_sigma" else plan.mode)
        scale0 = 0.0 if account is None else float(account.scale(0))
        # w(0) = x_0 + Lap(M_0): x_0 is public, the message reads no data
        first = self._release(manifold, x0, np.zeros_like(x0), scale0,
                              agent_draws(rng, seed, comm.agents, 0, "initial-noise"))
        return DPDOState(t=0, x=first, rng=rng, comm=comm, ledger=account,
                         info={"comm0": comm.total_stats()}, z=x0, seed=seed,
                         noise_scale=0.0 if account is None else account.noise_scale)

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One iteration ``k``: average the noisy states received, take the projected gradient
        step from the average and release the next state with Laplace noise ``Lap(M_{k+1})``."""
        manifold, comm, k = problem.manifold, state.comm, state.t
        if state.ledger is not None:
            state.ledger.check_can_step()
        # v_i(k) = sum_j a_ij w_j(k): the noisy states travel along the arcs
        z = riemannian_gossip(manifold, state.x, self.weights, comm=comm)
        # grad f_i(v_i(k)): the mean of the clipped per-sample gradients of the whole local set
        g = self.gradient.noisy_values(problem, z, comm.agents,
                                       self.gradient.minibatch(problem, comm.agents, None),
                                       0.0, None)
        # w_i(k+1) = Proj_X[v_i(k) - gamma_k grad f_i(v_i(k))] + Lap(M_{k+1})
        gamma = self.lr * self.lr_decay ** k
        scale = 0.0 if state.ledger is None else float(state.ledger.scale(k + 1))
        message = self._release(manifold, z, -gamma * g, scale,
                                agent_draws(state.rng, state.seed, comm.agents, k, "noise"))
        if state.ledger is not None:
            state.ledger.record_round(np.isin(np.arange(problem.n_agents), comm.agents))
        return state.advance(x=message, z=z)

    def _output_points(self, state) -> np.ndarray:
        return state.z

