"""DP-DDA: differentially private distributed dual averaging with node subsampling.

C. Liu, K. H. Johansson, Y. Shi, "Distributed empirical risk minimization with differential
privacy", Automatica 162, 111514 (2024); arXiv:2302.10520. Each round a random set of nodes is
active (Definition 2) and gossips with a random doubly stochastic matrix ``W^(t)`` on the
active set (Assumption 2); an active node draws one local record, releases its noisy subgradient
``zeta = ghat + N(0, sigma^2 I)`` and mixes duals ``z_i <- sum_j w_ij (z_j + a_t eta_j zeta_j)``
(eq. 5), then takes the prox step (eq. 6)

``x_i = argmin_x <z_i, x> + iota A_{t+1} h(x) + gamma_{t+1} ||x||^2 / 2``

(closed forms for l2 and l1 ``h`` in :mod:`rfed.problems.linear`), and the output is the running
weighted average ``A_T^{-1} sum_t a_t x_i^(t)`` (Algorithm 1). Step sizes: ``a_t = t`` with
constant ``gamma_t`` (strongly convex case; Cor. 3.2/3.5 take ``gamma_t = 0``, the l2-SVM
experiment 20) or ``a_t = 1`` with ``gamma_t = gamma sqrt(t)`` (general convex case,
Cor. 3.4/3.6). The node sampling and matchings are :class:`rfed.networks.RandomGossip`'s, on
any undirected graph (``docs/guide/scale.md``).

Manifold form: all duals live in the tangent space of one fixed anchor (the origin on
Euclidean space, the common start ``x0`` otherwise), stored in orthonormal coordinates of
``tangent_basis(anchor)``; a subgradient at ``x_i`` is parallel-transported to the anchor
before the noise (drawn isotropically in those coordinates), and the primal map is
``x = Exp_anchor(from_coords(prox(z)))``. On Euclidean space with anchor 0 this is exactly
Algorithm 1; gossip, schedules and privacy are unchanged (transport is an isometry).

References
----------
* Changxin Liu, Karl H. Johansson and Yang Shi. Distributed Empirical Risk Minimization With
  Differential Privacy. Automatica 162, 111514, 2024. arXiv:2302.10520.
* Changxin Liu, Karl H. Johansson and Yang Shi. Private Stochastic Dual Averaging for
  Decentralized Empirical Risk Minimization. IFAC-PapersOnLine 55(13) (NecSys), 2022.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms.decentralized._common import (
    check_choice,
    check_nonneg,
    check_probability,
    scratch_of,
)
from rfed.algorithms.decentralized._privacy import PaperFormula
from rfed.algorithms.decentralized._streams import PlannedRounds, agent_draws, run_seed
from rfed.algorithms.decentralized.base import PrivateAlgorithm, PrivateState
from rfed.algorithms.private import GaussianRelease
from rfed.manifolds import Euclidean, as_generator
from rfed.networks.mixing import RandomGossip
from rfed.networks.network import Network
from rfed.privacy import papers
from rfed.privacy.budget import PrivacyBudget
from rfed.privacy.clipping import clip_by_norm
from rfed.privacy.mechanisms import gaussian_release
from rfed.problems.base import sample_without_replacement
from rfed.problems.linear import L2Regularizer, LinearProblem
from rfed.randomness import check_agents_per_stream, public_generator

__all__ = ["DPDDA"]

#: Active nodes from which a round gathers their rows and records into arrays kept for the
#: run, and agents from which it writes the next state and its message into recycled arrays:
#: below, fresh arrays (served from malloc's free lists) cost less than the bookkeeping.
REUSE_MIN_ROWS = 4096


@dataclass
class DPDDAState(PrivateState):
    """Duals ``z`` (coordinates at the anchor), iterates ``x``, output averages ``xtilde``,
    ``A_t``, the anchor, the last round's active mask and the public Lipschitz bound (and, from
    :class:`~rfed.algorithms.decentralized.PrivateState`, the seed of the keyed streams and
    the noise std).

    Parameters
    ----------
    z, xtilde : ndarray, shape ``(n_local, ...)``
    big_a : float
    anchor : ndarray, shape ``point_shape``
    active : ndarray of bool, shape ``(n_agents,)``
    lipschitz : float or None
    **fields
        Those of :class:`~rfed.algorithms.decentralized.PrivateState`.
    """

    z: np.ndarray = None  # type: ignore[assignment]
    xtilde: np.ndarray = None  # type: ignore[assignment]
    big_a: float = 0.0
    anchor: np.ndarray = None  # type: ignore[assignment]
    active: np.ndarray = None  # type: ignore[assignment]
    lipschitz: float | None = None


class DPDDA(PrivateAlgorithm):
    r"""DP-DDA (Algorithm 1 of Liu, Johansson and Shi), dual averaging with node subsampling.

    Parameters
    ----------
    network : Network
        The undirected supergraph (complete graph on 20 nodes in the experiments; any
        undirected graph) and the communicator; its mixing matrix is not used (each round
        draws its own ``W^(t)``, so the default Metropolis-Hastings matrix is never built).
    n_active : int, optional
        ``n iota``: the number of active nodes per round (``sampler='uniform'``) or its
        expectation (``'maximal'``). ``n_active = n`` with ``'uniform'`` on the complete graph
        is the paper's full-participation baseline [19] (its Section 5).
    sampler : {'uniform', 'maximal', 'edges'}
        How the active nodes and ``W^(t)`` are drawn (:class:`rfed.networks.RandomGossip`):
        ``'uniform'`` (default): exactly ``n_active`` uniformly random nodes (Definition 2),
        paired along the graph's edges (a uniformly random perfect matching of them on the
        complete graph, weights 1/2), unpaired ones keeping their own value; ``'maximal'``:
        the pairs of a random maximal matching of the graph, each active with probability
        ``n_active / n``, and the nodes it leaves out active alone with that probability;
        ``'edges'``: ``n_edges`` uniformly random edges with Metropolis-Hastings weights.
        Every node is active with probability at most :attr:`iota` (exactly ``n_active / n``
        for the first two).
    n_edges : int, optional
        Edges per round for ``sampler='edges'`` (1 or 2 in the paper's experiments).
    schedule : {'strongly_convex', 'general'}
        ``a_t = t`` with ``gamma_t = gamma`` (constant), or ``a_t = 1`` with
        ``gamma_t = gamma sqrt(t)``.
    gamma : float
        ``gamma_t``'s constant (20 for the l2-SVM, 0.01 for the l1-SVM experiment); 0 is allowed
        for ``'strongly_convex'`` with a strongly convex regularizer.
    budget : PrivacyBudget, optional
        Budget-first: the noise of the planned ``n_rounds`` rounds is calibrated at ``init`` so
        the finished run certifies ``budget`` (record level, replace-one, per agent). Node
        sampling is public (drawn from its own generator, replayed before the run): the
        calibration uses the largest number of rounds any node is active in, no amplification
        by node sampling is claimed (so it holds for every sampler).
    n_rounds : int, optional
        Planned rounds (required with ``budget`` and ``paper_epsilon``).
    noise_multiplier : float, optional
        Research: noise std over the replace-one sensitivity ``2L`` of one released subgradient.
    sigma : float
        The paper's parametrisation: noise std on each released subgradient (Theorem 1, see
        :meth:`theorem_sigma`); reported with its certified epsilon. 0 disables the noise.
    paper_epsilon : float, optional
        The paper's Theorem 1 calibration (printed constant 32) for ``n_rounds`` rounds, with
        the sampler's :attr:`iota`: the paper's formula, not a guarantee.
    delta : float, optional
        Delta of the report without a budget (default ``min(1e-5, 1/(10 q))``).
    clip : float, optional
        ``L``, a PUBLIC Lipschitz bound: every per-sample subgradient is clipped to this norm
        (enforces Assumption 3, which the paper assumes without clipping). Default: the
        problem's declared public bound ``public_gradient_bound`` (e.g. a linear problem built
        with ``feature_bound``); a private run with neither is refused (a bound computed from
        the private data would leak through the noise scale).
    inactive_x : {'freeze', 'recompute'}
        Inactive nodes keep ``x`` (Algorithm 1 line 12, default) or recompute the prox with the
        new ``(A, gamma)`` (the reading of the proof of Lemma 4.5); both are local
        post-processing.
    delta0 : float
        Per-step delta of Theorem 1 (0.01 in the experiments).
    agents_per_stream : int, optional
        Layout of the keyed minibatch and noise streams (a power of two; default: the
        decentralized algorithms' 16 consecutive agents per Philox stream). With a few active
        nodes out of many, 1 (one stream per agent) draws only the active nodes' noise: at 2 of
        20 nodes and ``d = 2,000``, 4,000 normals a round instead of 64,000. Part of the run's
        definition (another layout draws other, equally distributed, numbers).
    """

    name = "DP-DDA"
    state_rows = ("x", "z", "xtilde")
    state_class = DPDDAState

    def __init__(self, network: Network, *, n_active: int | None = None,
                 sampler: str = "uniform", n_edges: int | None = None,
                 schedule: str = "strongly_convex",
                 gamma: float = 1.0, sigma: float = 0.0, clip: float | None = None,
                 inactive_x: str = "freeze", delta0: float = 0.01,
                 budget: PrivacyBudget | None = None, n_rounds: int | None = None,
                 noise_multiplier: float | None = None, paper_epsilon: float | None = None,
                 delta: float | None = None, agents_per_stream: int | None = None, **kwargs):
        self.sigma = check_nonneg(sigma, "sigma")
        self.agents_per_stream = (None if agents_per_stream is None
                                  else check_agents_per_stream(agents_per_stream))
        # each round draws its own W^(t): the network's mixing matrix is not used (nor built)
        super().__init__(network, mixing=False, budget=budget, n_rounds=n_rounds,
                         noise_multiplier=noise_multiplier, sigma=self.sigma,
                         paper_epsilon=paper_epsilon, delta=delta, **kwargs)
        self.sampler = check_choice(sampler, "sampler", RandomGossip.MODES)
        self.gossip = RandomGossip(network.graph, n_active, n_edges=n_edges, mode=sampler)
        self.n_active = None if n_active is None else int(n_active)
        self.schedule = check_choice(schedule, "schedule", ("strongly_convex", "general"))
        self.gamma = check_nonneg(gamma, "gamma")
        if schedule == "general" and self.gamma == 0:
            raise ValueError("argument 'gamma' must be > 0 for the general convex schedule")
        self.clip = None if clip is None else check_nonneg(clip, "clip")
        if self.clip == 0:
            raise ValueError("argument 'clip' must be > 0")
        self.inactive_x = check_choice(inactive_x, "inactive_x", ("freeze", "recompute"))
        self.delta0 = check_probability(delta0, "delta0")
        # the node-sampling rounds replayed by the budget calibration, reused by the rounds
        self._planned = PlannedRounds()
        # (anchor, its read-only broadcast to rows): a round takes a slice of it instead of
        # broadcasting the anchor again (the same stride-0 view, so the same values)
        self._anchor_rows: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def iota(self) -> float:
        """The node sampling ratio: every node is active with probability at most ``iota``
        (exactly ``n_active / n`` for ``'uniform'`` and ``'maximal'``), the ``iota`` of
        Theorem 1 and of the prox step (6)."""
        return self.gossip.iota

    @staticmethod
    def theorem_sigma(epsilon: float, delta0: float, iterations: int, n_local: int, iota: float,
                      lipschitz: float, constant: str = "paper") -> float:
        """Theorem 1's noise std (constant 32 ``'paper'`` as printed, or 160 ``'corrected'``,
        the constant the proof's chain needs; see :func:`rfed.privacy.papers.dpdda_sigma`).

        Parameters
        ----------
        epsilon, delta0 : float
            The paper's target and per-step delta.
        iterations : int
        n_local : int
            Records per node.
        iota : float
            Fraction of nodes active per round.
        lipschitz : float
            ``L``.
        constant : {'paper', 'corrected'}

        Returns
        -------
        float
        """
        return papers.dpdda_sigma(epsilon, delta0, iterations, n_local, iota, lipschitz,
                                  constant).sigma

    def _a(self, t: int) -> float:
        return float(t) if self.schedule == "strongly_convex" else 1.0

    def _gamma(self, t: int) -> float:
        return self.gamma if self.schedule == "strongly_convex" else self.gamma * np.sqrt(t)

    def _regularizer(self, problem):
        return getattr(problem, "regularizer", None) or L2Regularizer(0.0)

    def _anchors(self, anchor: np.ndarray, rows: int) -> np.ndarray:
        """``np.broadcast_to(anchor, (rows, *anchor.shape))``, sliced from a broadcast kept
        for this anchor object (a round's anchors, without a broadcast per call)."""
        kept = self._anchor_rows
        if kept is None or kept[0] is not anchor or kept[1].shape[0] < rows:
            size = max(rows, self.network.comm.n_local)
            kept = self._anchor_rows = (anchor,
                                        np.broadcast_to(anchor, (size,) + anchor.shape))
        return kept[1][:rows]

    def _primal(self, problem, anchor, z, t_next, big_a_next):
        """Eq. (6) for duals ``z`` ``(A, dim)`` with ``(A_{t+1}, gamma_{t+1})``."""
        v = self._regularizer(problem).dual_averaging_step(
            z, self.iota * big_a_next, self._gamma(t_next))
        manifold = problem.manifold
        if (type(manifold) is Euclidean and len(manifold.point_shape) == 1
                and type(v) is np.ndarray and v.dtype == np.float64 and v.flags.writeable
                and not np.may_share_memory(v, z)):
            # coordinates are the entries (from_coords is a copy) and Exp_anchor(v) is
            # anchor + v: the same sum, into the prox step's fresh array
            return np.add(anchor, v, out=v)
        return manifold.exp(anchor, manifold.from_coords(anchor, v))

    def init(self, problem, x0, rng):
        manifold = problem.manifold
        self.check_problem(problem)
        anchor = (np.zeros(manifold.point_shape) if isinstance(manifold, Euclidean)
                  else np.asarray(x0, dtype=float))
        comm = self.network.comm
        n_local = comm.n_local  # this block's agents (every agent in one process)
        z = np.zeros((n_local, manifold.dim))
        a1 = self._a(1)
        x = self._primal(problem, self._anchors(anchor, n_local), z, 1, a1)
        rng = as_generator(rng)
        # node sampling is public randomness keyed by (seed, round): replayable for the
        # calibration; minibatches and noise come from the agents' keyed streams
        seed = run_seed(rng)
        plan = self.plan(problem, rng, seed)
        return DPDDAState(t=0, x=x, rng=rng, comm=comm, ledger=self.account(problem, plan),
                          info={"comm0": comm.total_stats()}, z=z, xtilde=x.copy(), big_a=0.0,
                          anchor=anchor, seed=seed,
                          noise_std=0.0 if plan is None else plan.std,
                          lipschitz=self._lipschitz(problem))

    def _sample(self, seed: int, t: int):
        """Round ``t``'s node sampling, from the public stream keyed by ``(seed, t)``."""
        return self.gossip.sample(public_generator(seed, t, "node-sampling"))

    def planned_activity(self, seed: int, n_rounds: int) -> np.ndarray:
        """Rounds each node will be active in over ``n_rounds`` (the public node-sampling
        stream is keyed by round: the run draws exactly the same schedule).

        Parameters
        ----------
        seed : int
            The run's public activation seed.
        n_rounds : int

        Returns
        -------
        ndarray of int, shape ``(n_agents,)``
        """
        n = self.gossip.graph.n_nodes
        counts = np.zeros(n, dtype=np.int64)
        keep = self._planned.start(seed, n, n_rounds)
        for t in range(n_rounds):  # one draw per round, as step() does
            rnd = self._sample(seed, t)
            counts += rnd.active
            if keep:
                self._planned.keep(t, rnd)
        return counts

    def _lipschitz(self, problem) -> float | None:
        """``L``: the ``clip`` given, else the problem's declared public bound (or None)."""
        return self.clip if self.clip is not None else getattr(problem, "public_gradient_bound",
                                                               None)

    @sections_from(PrivateAlgorithm.release)
    def release(self, problem) -> GaussianRelease:
        """One record's subgradient clipped to the public ``L`` (replace-one sensitivity
        ``2L``), one release per active round."""
        lip = self._lipschitz(problem)
        if lip is None:
            raise ValueError(
                "a private DP-DDA run needs a PUBLIC Lipschitz bound: pass 'clip' (enforced by "
                "clipping every per-sample subgradient) or use a problem that declares "
                "'public_gradient_bound' (e.g. a linear problem with feature_bound); a bound "
                "computed from the private data would leak through the noise scale")
        return GaussianRelease(2.0 * lip, sample_size=1)

    @sections_from(PrivateAlgorithm.active_rounds)
    def active_rounds(self, seed: int, n_agents: int, n_rounds: int) -> np.ndarray:
        """The replayed public node sampling (:meth:`planned_activity`)."""
        return self.planned_activity(seed, n_rounds)

    def paper_std(self, problem, delta: float) -> float:
        """Theorem 1 (printed constant 32): the noise std of ``paper_epsilon``.

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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
            epsilon, rounds = self.noise.paper_target()
            # the release (planned before this) has refused a run without a public bound
            lipschitz = self.release(problem).sensitivity / 2.0
            return self.theorem_sigma(epsilon, self.delta0, rounds, int(problem.counts.min()),
                                      self.iota, lipschitz, "paper")

    def paper_formula(self, problem, plan) -> PaperFormula:
        return PaperFormula("dpdda", {"delta0": self.delta0, "iota": self.iota,
                                      "L": self._lipschitz(problem),
                                      "q": int(problem.counts.min()), "sigma": plan.std})

    def assumptions(self, problem) -> list[str]:
        source = ("given by the user ('clip')" if self.clip is not None
                  else "the problem's public data-domain bound (asserted by the user)")
        return [f"per-sample subgradient clipped to L = {self._lipschitz(problem):g} "
                f"(enforced; {source})",
                "one record per active round, drawn uniformly without replacement, secret",
                "node sampling treated as public: no amplification claimed"]

    def _output_points(self, state):
        return state.xtilde

    def _gather(self, source: np.ndarray, rows: np.ndarray,
                avoid: np.ndarray | None = None) -> np.ndarray:
        """``source[rows]``: into a prefix of the run's reused array of ``source``'s shape for
        C-contiguous float64 rows, the same values (a fresh array otherwise, or when that
        array shares memory with ``avoid``). The result is overwritten by the next gather of
        rows of that shape."""
        if (rows.size < REUSE_MIN_ROWS or type(source) is not np.ndarray
                or source.dtype != np.float64 or not source.flags.c_contiguous):
            return source[rows]
        buffer = scratch_of(self).take(f"gathered rows {source.shape[1:]}", source.shape)
        if avoid is not None and np.may_share_memory(buffer, avoid):
            return source[rows]
        return np.take(source, rows, axis=0, out=buffer[: rows.size])

    def _batch(self, problem, ids: np.ndarray, idx: np.ndarray):
        """``problem.batch(ids, idx)``, gathered into the run's reused arrays (one per data key,
        room for one record of every agent of the block; ``Problem.batch``'s ``out=``, the same
        values); below :data:`REUSE_MIN_ROWS` agents, fresh arrays."""
        if ids.size < REUSE_MIN_ROWS:
            return problem.batch(ids, idx)
        probe = problem.batch(ids[:1], idx[:1])
        n_local = self.network.comm.n_local * idx.shape[1]
        buffers = {key: scratch_of(self).take(f"records {key}", (n_local,) + v.shape[2:],
                                              v.dtype) for key, v in probe.items()}
        return problem.batch(ids, idx, out=buffers)

    def _noisy_subgradients(self, problem, state, rows: np.ndarray, ids: np.ndarray):
        """Lines 6-7: each active agent's subgradient at one record drawn uniformly (keyed
        ``'minibatch'`` stream), clipped to the public ``L``, in the coordinates of the anchor's
        tangent space, plus ``N(0, sigma^2 I)`` (keyed ``'noise'`` stream): ``(A, dim)``."""
        manifold = problem.manifold
        # the record keys' ranks in the run's reused array (the same draws)
        keys = None
        if rows.size >= REUSE_MIN_ROWS:
            n_max = int(problem.n_max)
            keys = scratch_of(self).take("minibatch keys", (state.x.shape[0] * n_max,),
                                         np.uint64)[: rows.size * n_max].reshape(rows.size, n_max)
        idx = sample_without_replacement(problem.counts[ids], 1, agent_draws(
            state.rng, state.seed, ids, state.t, "minibatch", out=keys,
            agents_per_stream=self.agents_per_stream))
        # the records and the active rows of x in the run's reused arrays (same values)
        batch = self._batch(problem, ids, idx)
        x_act = self._gather(state.x, rows)
        if hasattr(problem, "sample_data_grad"):   # the data term: h is the prox's (eq. (6))
            g = problem.sample_data_grad(x_act, batch)
            # a linear problem's gradients are a fresh product: clipped in their own array
            fresh = type(problem).sample_data_grad is LinearProblem.sample_data_grad
        else:
            g = problem.sample_rgrad(x_act, batch)
            fresh = False
        if state.lipschitz is not None:
            g, _ = clip_by_norm(manifold, x_act, g, state.lipschitz,
                                out=g if fresh and type(g) is np.ndarray else None)
        if type(manifold) is Euclidean:
            # transport is the identity and the coordinates are the entries: the same values
            # as transport + to_coords, without their two copies
            zeta = g[:, 0].reshape(rows.size, manifold.dim)
        else:
            anchor = self._anchors(state.anchor, rows.size)
            zeta = manifold.to_coords(anchor, manifold.transport(x_act, anchor, g[:, 0]))
        if state.noise_std > 0:
            # the draws (and the release, formed in their array) in the run's reused array,
            # the same values: the caller reads the released zeta once, in this round's
            # message, and a round's active rows are a prefix of the block's
            noise = scratch_of(self).take("noise", (state.x.shape[0], manifold.dim))
            return gaussian_release(zeta, state.noise_std, agent_draws(
                state.rng, state.seed, ids, state.t, "noise", out=noise[: rows.size],
                agents_per_stream=self.agents_per_stream))
        return zeta

    @staticmethod
    def _output_average(manifold, xtilde, x, weight: float,
                        out: np.ndarray | None = None) -> np.ndarray:
        """``Exp_xtilde(weight Log_xtilde(x))``; on Euclidean space ``xtilde + weight (x -
        xtilde)`` in one array (Exp and Log's arithmetic, the same bits), ``out`` when given
        (a recycled array, sharing no memory with ``x`` or ``xtilde``)."""
        if type(manifold) is Euclidean:
            out = np.subtract(x, xtilde, out=out)
            out *= weight
            out += xtilde
            return out
        return manifold.exp(xtilde, weight * manifold.log(xtilde, x))

    def _recycled(self, field: str, like: np.ndarray) -> np.ndarray | None:
        """The array the next state's ``field`` is written into: the one of the state two
        rounds old when nothing else holds it
        (:meth:`~rfed.algorithms.decentralized._common.ScratchArrays.recycled`), for
        C-contiguous float64 rows of at least :data:`REUSE_MIN_ROWS` agents; else ``None`` (a
        fresh one: below that size the bookkeeping costs more than the allocation saves)."""
        if (type(like) is not np.ndarray or like.dtype != np.float64
                or not like.flags.c_contiguous or like.shape[0] < REUSE_MIN_ROWS):
            return None
        return scratch_of(self).recycled(field, like.shape)

    def _message_copy(self, z: np.ndarray) -> np.ndarray:
        """A copy of ``z`` to build the round's messages in: the run's reused array for float64
        rows of at least :data:`REUSE_MIN_ROWS` agents (the mixing product returns a fresh one,
        so the message never leaves the round), else a fresh copy."""
        if z.dtype != np.float64 or z.shape[0] < REUSE_MIN_ROWS:
            return z.copy()
        msg = scratch_of(self).take("message", z.shape)
        np.copyto(msg, z)
        return msg

    @sections_from(PrivateAlgorithm.step)
    def step(self, problem, state):
        """One iteration ``t`` of Algorithm 1 (lines 5-12, eqs. (5)-(6)) for the block."""
        manifold, n = problem.manifold, problem.n_agents
        t = state.t + 1
        a_t = self._a(t)
        big_a = state.big_a + a_t
        # line 2: the output average over x^(1..t) with weights a_tau
        xtilde = self._output_average(manifold, state.xtilde, state.x, a_t / big_a,
                                      self._recycled("xtilde", state.xtilde))
        if state.ledger is not None:
            state.ledger.check_can_step()
        # Definition 2: the active nodes N^(t) and W^(t), from the public stream (seed, t)
        rnd = self._planned.take(state.seed, state.t)
        if rnd is None:
            rnd = self._sample(state.seed, state.t)
        agents = state.comm.agents  # this block's global ids
        whole = agents.size == n  # one block holding every agent (ids 0..n-1 in order)
        active = rnd.active if whole else rnd.active[agents]
        act = np.flatnonzero(active)  # local rows of the block's active agents
        act_ids = act if whole else agents[act]
        # lines 6-8: the message z_i + a_t eta_i (ghat_i + nu_i) of every node
        msg = self._message_copy(state.z)
        if act.size:  # a block may hold no active agent this round
            zeta = self._noisy_subgradients(problem, state, act, act_ids)
            # a_t zeta in the release's own array when it is the run's (the same products)
            own = state.noise_std > 0 and zeta.base is scratch_of(self).take(
                "noise", (state.x.shape[0], zeta.shape[1]))
            step = np.multiply(zeta, a_t, out=zeta) if own else a_t * zeta
            if msg.dtype == np.float64 and step.dtype == np.float64:
                # msg[act] += step, with the gathered rows in the run's reused array (the
                # active rows of x are no longer read): the same sums
                gathered = self._gather(msg, act, avoid=step)
                gathered += step
                msg[act] = gathered
            else:
                msg[act] += step
        # (5), line 9: z^(t+1) = W^(t) msg
        # into the array of the state two rounds old when nothing else holds it (same bits)
        z_out = self._recycled("z", state.z)
        if rnd.matching:   # from the matching's pairs: the CSR product's bits
            z = state.comm.mix_pairs(rnd.pairs, msg, senders=active, out=z_out)
        else:
            z = state.comm.mix(rnd.weights, msg, senders=active, out=z_out)
        if np.may_share_memory(z, msg):  # an engine that returned the message itself
            z = z.copy()
        # (6), lines 10-12: the prox step of the active nodes (or of every node, 'recompute')
        big_a_next = big_a + self._a(t + 1)
        x_out = self._recycled("x", state.x)
        if x_out is None:
            x = state.x.copy()
        else:
            x = x_out
            np.copyto(x, state.x)
        update = act if self.inactive_x == "freeze" else np.arange(agents.size)
        if update.size:
            x[update] = self._primal(problem, self._anchors(state.anchor, update.size),
                                     self._gather(z, update), t + 1,
                                     big_a_next)
        if state.ledger is not None:
            # this block's releases (one block: every active agent's); blocks' ledgers merge
            charged = rnd.active if whole else np.isin(np.arange(n), act_ids)
            state.ledger.record_round(charged)
        return state.advance(x=x, z=z, xtilde=xtilde, big_a=big_a, active=rnd.active)
