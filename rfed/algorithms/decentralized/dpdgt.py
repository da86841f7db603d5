"""DP-DGT: differentially private dual gradient tracking for resource allocation, and noisy DDGT.

W. Huo, X. Chen, L. Huang, K. H. Johansson, L. Shi, "Differentially private dual gradient
tracking for distributed resource allocation", arXiv:2403.18275 (2024); rfed's reading:
``docs/papers/dpdgt.md``. Agents hold a price estimate ``w~_i`` (the negated dual variable) pulled
through a row-stochastic ``R`` and a cumulative mismatch tracker ``s_i`` pushed through a
column-stochastic ``C``; both messages carry i.i.d. Laplace noise of geometrically decaying scale.
Per iteration ``k`` (order (12a) -> (12c) -> (12b), one noise draw per agent and message, entering
its own diagonal term too)::

    s_{k+1}  = (1 - gamma) s_k + gamma C (s_k + xi_k) - alpha_k (w_k - d)          (13a)
    w~_{k+1} = (1 - phi) w~_k + phi R (w~_k + zeta_k) + (s_{k+1} - s_k)             (13b)
    w_{k+1}  = argmin_{w in W_i} F_i(w) - w~_{i,k+1}^T w                           (12b)

with ``alpha_k = alpha0 q^k`` and scales ``theta_k = theta0 q_theta^k`` (Cor. 5.14).

Only Euclidean space: the coupling constraint sums decisions, the dual lives in R^m, the
tracker's conservation law ``1^T (s_{k+1} - s_k) = -alpha_k (sum w - sum d) + gamma 1^T xi_k``
needs plain sums, and the privacy proof uses l1 distances of coordinate-wise Laplace noise
(``docs/papers/dpdgt.md``). Any other manifold is refused with that explanation.

References
----------
* Wei Huo, Xiaomeng Chen, Lingying Huang, Karl Henrik Johansson and Ling Shi. Differentially
  Private Dual Gradient Tracking for Distributed Resource Allocation. Automatica 182, 112521,
  2025. arXiv:2403.18275.
* Jiaqi Zhang, Keyou You and Kai Cai. Distributed Dual Gradient Tracking for Resource Allocation
  in Unbalanced Networks. IEEE Transactions on Signal Processing 68, 2020.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from rfed.algorithms.base import Algorithm
from rfed.algorithms.decentralized._blocks import BlockStates
from rfed.algorithms.decentralized._common import check_nonneg, check_probability, scratch_of
from rfed.algorithms.decentralized._privacy import (
    DGTAccount,
    DGTRelease,
    PaperFormula,
)
from rfed.algorithms.decentralized._streams import _streams_of, agent_draws, run_seed
from rfed.algorithms.decentralized.base import merged_report
from rfed.algorithms.private import NoiseConfig, plan_noise, untracked_report
from rfed.manifolds import Euclidean, as_generator
from rfed.networks.comm import freeze_weights
from rfed.networks.engine import default_communicator
from rfed.networks.graphs import Graph
from rfed.networks.mixing import (
    PushPullConstants,
    check_column_stochastic,
    check_row_stochastic,
    column_stochastic_weights,
    push_pull_constants,
    row_stochastic_weights,
)
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.calibration import dpdgt_theta0
from rfed.privacy.mechanisms import LaplaceSchedule, laplace_mechanism
from rfed.privacy.secure import is_secure
from rfed.problems.dispatch import QuadraticResourceAllocation

__all__ = ["DPDGT", "NoisyDDGT", "require_euclidean"]


def require_euclidean(problem, algorithm: str) -> None:
    """Raise ``ValueError`` unless the problem's communicated variables live in Euclidean space.

    Parameters
    ----------
    problem : QuadraticResourceAllocation
    algorithm : str
        The algorithm's name, for the message.
    """
    manifold = getattr(problem, "manifold", None)
    if not isinstance(manifold, Euclidean):
        raise ValueError(
            f"{algorithm} accepts only Euclidean space, got manifold {manifold!r}: dual gradient "
            "tracking needs a vector space (the coupling constraint sum_i w_i = sum_i d_i adds "
            "decisions, the dual variable lives in R^m, the tracker conserves plain sums through "
            "1^T C = 1^T, and the privacy proof uses l1 distances of coordinate-wise Laplace "
            "noise); Riemannian averaging would break the conservation law (see "
            "docs/papers/dpdgt.md)"
        )
    if not isinstance(problem, QuadraticResourceAllocation):
        raise TypeError(f"{algorithm} solves a QuadraticResourceAllocation, got "
                        f"{type(problem).__name__}")


def _no_scratch(name: str) -> None:
    """No reused array (every temporary fresh)."""
    return None


@dataclass
class DGTState:
    """Iteration ``k``, prices ``wt``, trackers ``s``, allocations ``w``; all ``(n, m)``.

    Parameters
    ----------
    t : int
    wt, s, w : ndarray, shape ``(n, m)``
    rng : numpy.random.Generator or SecureRandom
    comm : Communicator
    ledger : PrivacyLedger, optional
    comm0 : dict, optional
    theta_xi, theta_zeta : LaplaceSchedule, optional
    """

    t: int
    wt: np.ndarray
    s: np.ndarray
    w: np.ndarray
    rng: np.random.Generator
    comm: object
    ledger: object = None
    comm0: dict = None  # type: ignore[assignment]
    theta_xi: LaplaceSchedule = None  # type: ignore[assignment]
    theta_zeta: LaplaceSchedule = None  # type: ignore[assignment]
    seed: int = 0  # of the keyed noise streams


class _PushPullBase(BlockStates, Algorithm):
    """Shared plumbing: graph -> (R, C), communicator, run, metrics, output; block states
    (:class:`~rfed.algorithms.decentralized._blocks.BlockStates`) with rows ``wt``, ``s``,
    ``w``."""

    state_rows = ("wt", "s", "w")

    def _noise_args(self, theta_xi, theta_zeta, budget, n_rounds, q_theta, paper_epsilon,
                    adjacency_radius, delta, track_privacy, kwargs):
        """Check and store the noise configuration shared by DP-DGT and noisy DDGT."""
        given = [nm for nm, v in (("budget", budget), ("paper_epsilon", paper_epsilon),
                                  ("theta_xi/theta_zeta",
                                   theta_xi if theta_xi is not None else theta_zeta))
                 if v is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of 'budget', 'paper_epsilon' and "
                             f"'theta_xi'/'theta_zeta', got {given}")
        if paper_epsilon is not None:
            paper_epsilon = check_nonneg(paper_epsilon, "paper_epsilon")
        self.delta = 1e-5 if delta is None else check_probability(delta, "delta")
        #: The noise configuration (budget, planned rounds, the paper's epsilon, delta).
        self.noise = NoiseConfig.from_keywords(
            kwargs.pop("privacy", None), algorithm=type(self).__name__, budget=budget,
            n_rounds=n_rounds, paper_epsilon=paper_epsilon or None, delta=self.delta, **kwargs)
        self.noise.refuse_relation(self.name, DGTRelease.add_remove_refusal)
        self.q_theta = check_probability(q_theta, "q_theta")
        self.theta_xi = theta_xi if theta_xi is not None else LaplaceSchedule(0.0, 1.0)
        self.theta_zeta = theta_zeta if theta_zeta is not None else LaplaceSchedule(0.0, 1.0)
        for nm, sched in (("theta_xi", self.theta_xi), ("theta_zeta", self.theta_zeta)):
            if not isinstance(sched, LaplaceSchedule):
                raise TypeError(f"argument '{nm}' must be a LaplaceSchedule, got {sched!r}")
        self.adjacency_radius = check_nonneg(adjacency_radius, "adjacency_radius")
        if self.adjacency_radius == 0:
            raise ValueError("argument 'adjacency_radius' must be > 0 (the gradient-distance "
                             "radius of the neighbouring relation, Def. 2.2)")
        self.track_privacy = bool(track_privacy)

    @property
    def budget(self) -> PrivacyBudget | None:
        """The budget of the noise configuration."""
        return self.noise.budget

    @property
    def n_rounds(self) -> int | None:
        """The planned iterations (the default length of :meth:`run`)."""
        return self.noise.n_rounds

    @property
    def paper_epsilon(self) -> float | None:
        """The paper's epsilon the schedules are set from."""
        return self.noise.paper_epsilon

    @property
    def adjacency_delta(self) -> float:
        """Old name of :attr:`adjacency_radius` (the relation's radius, not DP's delta)."""
        return self.adjacency_radius

    def _private(self) -> bool:
        return (self.noise.mode is not None
                or (self.theta_xi.theta0 > 0 and self.theta_zeta.theta0 > 0))

    def release(self, problem) -> DGTRelease:
        """Both messages of every iteration, under the cost-function adjacency."""
        kind, params = self._sens_params(problem)
        return DGTRelease(kind, params, self.adjacency_radius, problem.m, self.q_theta)

    def _account(self, problem, rng, comm) -> tuple[DGTAccount | None, LaplaceSchedule,
                                                    LaplaceSchedule]:
        """The run's account and its two noise schedules (calibrated for a budget, or set by
        the paper's formula, once for all the processes of ``comm``'s engine)."""
        if not self._private():
            return None, self.theta_xi, self.theta_zeta
        release = self.release(problem)
        plan = plan_noise(
            self.noise, release, local_sizes=None, dim=problem.m, rng=rng, comm=comm,
            paper_std=lambda delta: self._paper_theta0(problem, self.noise.paper_epsilon),
            algorithm=self.name)
        txi, tzeta = self.theta_xi, self.theta_zeta
        if plan is not None:   # theta0 of both schedules theta0 q_theta^k
            txi = tzeta = LaplaceSchedule(plan.noise_multiplier, self.q_theta)
        if not self.track_privacy and self.noise.budget is None:
            return None, txi, tzeta
        account = DGTAccount(algorithm=self.name, release=release, theta_xi=txi,
                             theta_zeta=tzeta, rng=rng,
                             delta=self.delta if plan is None else plan.delta, plan=plan,
                             mode="paper_sigma", paper=self._paper(problem, txi, tzeta))
        return account, txi, tzeta

    def _sens_params(self, problem) -> tuple[str, dict]:
        raise NotImplementedError

    def _paper(self, problem, txi, tzeta) -> PaperFormula | None:
        return None

    def _paper_theta0(self, problem, eps: float) -> float:
        raise ValueError(f"{self.name} has no paper formula: use budget=")

    def __init__(self, graph: Graph, r=None, c=None, communicator=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"argument 'graph' must be an rfed Graph, got {graph!r}")
        self.graph = graph
        # frozen: what each round derives from R and C (message counts) is computed once
        self.r = freeze_weights(check_row_stochastic(
            row_stochastic_weights(graph) if r is None else r, "R"), "R")
        self.c = freeze_weights(check_column_stochastic(
            column_stochastic_weights(graph) if c is None else c, "C"), "C")
        # a factory n_agents -> Communicator; by default the engine in use (in process, or
        # the MPI engine inside rfed.engines.mpi.mpi_engine())
        self.communicator = default_communicator if communicator is None else communicator

    def run(self, problem, n_rounds=None, *, rng, x0=None, eval_every=1, with_reference=True,
            callback=None, **checkpointing):
        """As :meth:`Algorithm.run`; ``x0`` is the initial price ``w~_0`` (shape ``(m,)``,
        default 0) and the result's ``x`` is the allocation ``(n_agents, m)``; ``n_rounds``
        defaults to the planned ``n_rounds`` given to the constructor, as for every algorithm;
        ``checkpointing``: ``checkpoint_every``, ``checkpoint``, ``resume_from``."""
        require_euclidean(problem, self.name)
        if x0 is None:
            x0 = np.zeros(problem.manifold.point_shape)
        return super().run(problem, n_rounds, rng=rng, x0=x0, eval_every=eval_every,
                           with_reference=with_reference, callback=callback, **checkpointing)

    def _start(self, problem, x0, rng):
        require_euclidean(problem, self.name)
        n = problem.n_agents
        if self.graph.n_nodes != n:
            raise ValueError(f"graph has {self.graph.n_nodes} nodes, problem has {n} agents")
        comm = self.communicator(n)
        wt = np.broadcast_to(np.asarray(x0, dtype=float), (comm.n_local, problem.m)).copy()
        return wt, problem.primal_rows(comm.agents, wt), comm

    def _output_points(self, state):
        return state.w

    def output(self, problem, state):
        return state.comm.all_rows(state.w)

    def privacy(self, state):
        """The run's privacy report (:func:`~rfed.algorithms.decentralized.merged_report`;
        ``epsilon_certified`` ``None`` for a noisy run with ``track_privacy=False``)."""
        if state.ledger is None and self._private():
            return untracked_report(self.name, int(state.t), is_secure(state.rng))
        return merged_report(self, state)

    def _messages(self, state, comm, out_s=None, out_w=None, scratch=None):
        """Release ``s + xi`` (pushed through C) and ``w~ + zeta`` (pulled through R); the
        products are written into ``out_s`` and ``out_w`` when given, the noisy messages and
        the draws' temporaries into ``scratch(name)``'s arrays (:meth:`_arrays`; the same
        bits)."""
        k, rng = state.t, state.rng
        if state.ledger is not None:
            state.ledger.record_round()
        if scratch is None:
            scratch = _no_scratch
        # per-agent keyed noise streams of this block (its ids checked once for both draws)
        agents = comm.agents if is_secure(rng) else _streams_of(state.seed).block(comm.agents)
        work = scratch("laplace-work")
        sent_s = laplace_mechanism(state.s, state.theta_xi.scale(k), agent_draws(
            rng, state.seed, agents, k, "noise-s", out=scratch("sent-s"), work=work))
        sent_w = laplace_mechanism(state.wt, state.theta_zeta.scale(k), agent_draws(
            rng, state.seed, agents, k, "noise-w", out=scratch("sent-w"), work=work))
        return comm.mix(self.c, sent_s, out=out_s), comm.mix(self.r, sent_w, out=out_w)

    def _arrays(self, state):
        """``(scratch, recycled)``: the run's reused arrays for the round's temporaries
        (``scratch(name)``) and for the next state's fields (``recycled(name)``,
        :meth:`~rfed.algorithms.decentralized._common.ScratchArrays.recycled`); both give
        ``None`` (a fresh array) unless the rows are C-contiguous float64."""
        arrays, shape = scratch_of(self), state.wt.shape
        if not all(type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous
                   for a in (state.wt, state.s, state.w)):
            return (lambda name: None), (lambda name: None)
        return (lambda name: arrays.take(name, shape)), (lambda name: arrays.recycled(name,
                                                                                      shape))

    @staticmethod
    def _primal(problem, agents: np.ndarray, price: np.ndarray, scratch: np.ndarray,
                out: np.ndarray | None = None) -> np.ndarray:
        """The agents' primal minimisers at ``price``, formed in ``scratch`` and written into
        ``out`` when the problem takes them (rfed's dispatch problems; the same bits), else
        fresh."""
        if (type(problem).primal_rows is QuadraticResourceAllocation.primal_rows
                and scratch.dtype == np.float64):
            return problem.primal_rows(agents, price, scratch=scratch, out=out)
        return problem.primal_rows(agents, price)

    def metrics(self, problem, state, with_reference):
        w = state.comm.all_rows(state.w)
        wt = state.comm.all_rows(state.wt)
        total = state.comm.total_stats()
        # every agent's cost terms in agent order, summed as one process sums them
        cost = float(np.sum(state.comm.all_rows(problem.cost_terms(state.comm.agents, state.w))))
        out = {"cost": cost, "imbalance": float(np.sum(problem.imbalance(w))),
               "total_generation": float(w.sum()), "price_mean": float(wt.mean()),
               "consensus_error": float(np.mean((wt - wt.mean(0)) ** 2)),
               "messages": int(total["messages"]),
               "bytes_sent": int(total["bytes"]),
               "allocation": w[:, 0].tolist() if problem.m == 1 else w.tolist()}
        if with_reference:
            out["sq_error"] = float(np.sum((w - problem.optimum()) ** 2))
        return out


class DPDGT(_PushPullBase):
    r"""DP-DGT (Algorithm 1 / eq. (13)).

    Parameters
    ----------
    graph : Graph
        Directed communication graph (the IEEE 14-bus digraph in the paper); ``R`` and ``C``
        default to uniform weights with self-loops.
    alpha0, q : float
        Step sizes ``alpha_k = alpha0 q^k`` (summable, as privacy needs; Sec. 6.1: 0.015, 0.991).
    gamma, phi : float
        Lazy mixing parameters of ``C`` and ``R`` (0.8, 0.7).
    theta_xi, theta_zeta : LaplaceSchedule
        The paper's parametrisation: noise scales of the pushed ``s`` and the pulled ``w~``
        (Sec. 6.1: ``0.01 * 0.995^k``); ``theta0 = 0`` means no noise. Reported with the
        certified epsilon under the relation below.
    budget : PrivacyBudget, optional
        Budget-first: ``theta0`` of both schedules ``theta0 q_theta^k`` is calibrated so that the
        planned ``n_rounds`` iterations certify ``budget.epsilon`` (at ``budget.delta``, default
        1e-5) under the cost-function adjacency of radius ``adjacency_radius``.
    n_rounds : int, optional
        Planned iterations (required with ``budget`` and ``paper_epsilon``).
    q_theta : float
        Decay of the calibrated schedules (Sec. 6.1: 0.995).
    paper_epsilon : float, optional
        ``theta0`` from eq. (38) (:func:`rfed.privacy.calibration.dpdgt_theta0`): the paper's
        formula for an infinite run, not a guarantee (the certified epsilon is reported beside).
    adjacency_radius : float
        Radius of the paper's relation (Def. 2.2): neighbouring problems differ in ONE agent's
        cost function, with ``sup_w ||grad F_i(w) - grad F_i'(w)||_1 <= adjacency_radius``. The
        paper never fixes it; the report names it (``level='dpdgt-cost-function'``,
        ``neighboring``). This is not record-level DP.
    delta : float, optional
        Delta of the report (default 1e-5; the basic composition is pure, delta = 0).
    track_privacy : bool
        Keep the account (Monte Carlo repetitions of one configuration have identical privacy
        and may switch it off; a budget always keeps it).
    communicator : callable, optional
        ``n_agents -> Communicator``, called at each ``init`` (e.g.
        :class:`rfed.engines.mpi.MPICommunicator`, whose ranks then each hold a block of
        agents). Default: :func:`rfed.networks.engine.default_communicator`.
    """

    name = "DP-DGT"

    def __init__(self, graph: Graph, *, alpha0: float = 0.015, q: float = 0.991,
                 gamma: float = 0.8, phi: float = 0.7,
                 theta_xi: LaplaceSchedule | None = None,
                 theta_zeta: LaplaceSchedule | None = None, adjacency_radius: float = 1.0,
                 track_privacy: bool = True, r=None, c=None, communicator=None,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 q_theta: float = 0.995, paper_epsilon: float | None = None,
                 delta: float | None = None, **kwargs):
        if "adjacency_delta" in kwargs:
            adjacency_radius = kwargs.pop("adjacency_delta")
        super().__init__(graph, r, c, communicator)
        self.alpha0 = check_nonneg(alpha0, "alpha0")
        self.q = check_probability(q, "q")
        self.gamma = check_probability(gamma, "gamma")
        self.phi = check_probability(phi, "phi")
        self._noise_args(theta_xi, theta_zeta, budget, n_rounds, q_theta, paper_epsilon,
                         adjacency_radius, delta, track_privacy, kwargs)
        self._constants: PushPullConstants | None = None

    def alpha(self, k: int) -> float:
        """``alpha_k = alpha0 q^k``.

        Parameters
        ----------
        k : int

        Returns
        -------
        float
        """
        return self.alpha0 * self.q ** k

    def _sens_params(self, problem):
        return "dgt", {"alpha0": self.alpha0, "q": self.q, "mu": problem.strong_convexity,
                       "gamma": self.gamma, "phi": self.phi}

    def constants(self) -> PushPullConstants:
        """The spectral constants of the push-pull analysis for this run's ``R``, ``C``,
        ``gamma`` and ``phi`` (:func:`rfed.networks.push_pull_constants`), computed on the first
        call and kept: sparse eigensolvers above a few thousand agents, and never by
        :meth:`init` (the privacy bound does not use them).

        Raises
        ------
        ValueError
            The digraph has no spanning tree (the Perron vectors are not unique), or the
            iterative eigensolver did not converge.

        Returns
        -------
        PushPullConstants
        """
        if self._constants is None:
            self._constants = push_pull_constants(self.r, self.c, self.gamma, self.phi)
        return self._constants

    def _q_c(self) -> float | None:
        """``q_C`` of eq. (38)'s convergence condition (None when the digraph has no spanning
        tree: the condition is then not checked; the privacy bound does not use it)."""
        try:
            return self.constants().q_C
        except ValueError:
            return None

    def _paper(self, problem, txi, tzeta):
        # eq. (38)'s value does not depend on q_C: q_C only decides whether the convergence
        # warning is shown, and a report evaluates the formula with warnings silenced, so the
        # constants are not computed here (paper_epsilon= computes them, to warn)
        return PaperFormula("dpdgt", {
            "alpha0": self.alpha0, "q": self.q, "theta_xi0": txi.theta0, "q_xi": txi.q,
            "theta_zeta0": tzeta.theta0, "q_zeta": tzeta.q, "mu": problem.strong_convexity,
            "gamma": self.gamma, "phi": self.phi, "radius": self.adjacency_radius, "q_c": None})

    def _paper_theta0(self, problem, eps):
        q_c = self._q_c()
        if q_c is None:
            warnings.warn(f"{self.name}: q_C could not be computed (no spanning tree, or the "
                          "sparse eigensolver did not converge; see constants()): eq. (38)'s "
                          "convergence condition q > q_C is not checked", stacklevel=3)
        return dpdgt_theta0(eps, self.alpha0, self.q, self.q_theta, self.q_theta,
                            problem.strong_convexity, self.gamma, self.phi,
                            self.adjacency_radius, q_c)

    def init(self, problem, x0, rng):
        wt, w, comm = self._start(problem, x0, rng)
        rng = as_generator(rng)
        account, txi, tzeta = self._account(problem, rng, comm)
        return DGTState(t=0, wt=wt, s=np.zeros_like(wt), w=w, rng=rng, comm=comm,
                        ledger=account, theta_xi=txi, theta_zeta=tzeta, seed=run_seed(rng))

    def step(self, problem, state):
        k = state.t
        agents = state.comm.agents
        # the temporaries that do not leave the round in the run's reused arrays, the new
        # fields in those of the state two rounds old (same bits)
        scratch, recycled = self._arrays(state)
        pushed, pulled = self._messages(state, state.comm, scratch("pushed"), scratch("pulled"),
                                        scratch)
        # (13a): s = (1 - gamma) s + gamma C(s + xi) - alpha_k (w - d)
        s = np.multiply(1 - self.gamma, state.s, out=recycled("s"))
        s += np.multiply(pushed, self.gamma, out=pushed)
        mismatch = np.subtract(state.w, problem.demand_rows(agents),
                               out=scratch_of(self).take("mismatch", state.w.shape))
        s -= np.multiply(mismatch, self.alpha(k), out=mismatch)
        # (13b): w~ = (1 - phi) w~ + phi R(w~ + zeta) + (s_{k+1} - s_k)
        wt = np.multiply(1 - self.phi, state.wt, out=recycled("wt"))
        wt += np.multiply(pulled, self.phi, out=pulled)
        wt += np.subtract(s, state.s, out=mismatch)
        w = self._primal(problem, agents, wt, mismatch, recycled("w"))
        return DGTState(t=k + 1, wt=wt, s=s, w=w, rng=state.rng, comm=state.comm,
                        ledger=state.ledger, theta_xi=state.theta_xi,
                        theta_zeta=state.theta_zeta, seed=state.seed)



class NoisyDDGT(_PushPullBase):
    r"""Distributed dual gradient tracking of Zhang, You and Cai (eq. (7) of the DP-DGT paper)
    with the same Laplace noise on both messages (eq. (10)), DP-DGT's comparison baseline of
    Sec. 6.3::

        w~_{k+1} = R (w~_k + zeta_k) + beta_k z_k,   w_{k+1} = argmin F_i(w) - w~_{k+1}^T w,
        z_{k+1}  = C (z_k + xi_k) - iota (w_{k+1} - w_k),   z_0 = -iota (w_0 - d).

    The noise accumulates in ``1^T z_k`` (eq. (11)), which is why it does worse than DP-DGT.
    Sec. 6.3 uses ``beta_k = 0.99^k`` and ``iota = 0.034``. Privacy arguments as :class:`DPDGT`
    (``budget=``, ``n_rounds=``, ``q_theta=``, ``adjacency_radius=``, ``delta=``), with the
    sensitivities of :func:`~rfed.algorithms.decentralized._privacy.ddgt_sensitivities` (the
    tracker's sensitivity never decays, so with decaying noise its epsilon grows quickly with
    the run length); no paper formula.

    Parameters
    ----------
    graph : Graph
        The communication digraph.
    beta0, q : float
        ``beta_k = beta0 q^k``.
    iota : float
    theta_xi, theta_zeta : LaplaceSchedule, optional
        The noise of the two messages (research mode).
    r, c : sparse matrix, optional
        Row- and column-stochastic weights (default uniform on ``graph``).
    communicator : Communicator, optional
    budget, n_rounds, q_theta, adjacency_radius, delta, track_privacy
        As :class:`DPDGT`.
    **kwargs
        As :class:`DPDGT`.
    """

    name = "DDGT"

    def __init__(self, graph: Graph, *, beta0: float = 1.0, q: float = 0.99,
                 iota: float = 0.034, theta_xi: LaplaceSchedule | None = None,
                 theta_zeta: LaplaceSchedule | None = None, r=None, c=None, communicator=None,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 q_theta: float = 0.995, adjacency_radius: float = 1.0,
                 delta: float | None = None, track_privacy: bool = True, **kwargs):
        super().__init__(graph, r, c, communicator)
        self.beta0 = check_nonneg(beta0, "beta0")
        self.q = check_probability(q, "q")
        self.iota = check_nonneg(iota, "iota")
        self._noise_args(theta_xi, theta_zeta, budget, n_rounds, q_theta, None,
                         adjacency_radius, delta, track_privacy, kwargs)

    def _sens_params(self, problem):
        return "ddgt", {"beta0": self.beta0, "q": self.q, "iota": self.iota,
                        "mu": problem.strong_convexity}

    def init(self, problem, x0, rng):
        wt, w, comm = self._start(problem, x0, rng)
        rng = as_generator(rng)
        account, txi, tzeta = self._account(problem, rng, comm)
        z = -self.iota * (w - problem.demand_rows(comm.agents))
        return DGTState(t=0, wt=wt, s=z, w=w, rng=rng, comm=comm, ledger=account,
                        theta_xi=txi, theta_zeta=tzeta, seed=run_seed(rng))

    def step(self, problem, state):
        k = state.t
        # the products straight into the next state's fields (the arrays of the state two
        # rounds old when nothing else holds them), the temporaries into reused arrays
        scratch, recycled = self._arrays(state)
        pushed, pulled = self._messages(state, state.comm, recycled("s"), recycled("wt"),
                                        scratch)
        tracked = np.multiply(self.beta0 * self.q ** k, state.s, out=scratch("tracked"))
        wt = np.add(pulled, tracked, out=pulled)
        w = self._primal(problem, state.comm.agents, wt,
                         scratch_of(self).take("primal", wt.shape), recycled("w"))
        change = np.subtract(w, state.w, out=tracked)
        z = np.subtract(pushed, np.multiply(change, self.iota, out=change), out=pushed)
        return DGTState(t=k + 1, wt=wt, s=z, w=w, rng=state.rng, comm=state.comm,
                        ledger=state.ledger, theta_xi=state.theta_xi,
                        theta_zeta=state.theta_zeta, seed=state.seed)
