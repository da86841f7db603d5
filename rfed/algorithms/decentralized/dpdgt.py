"""DP-DGT: differentially private dual gradient tracking for resource allocation, and noisy DDGT.

Spec ``specs/003_dpdgt.md`` (Huo, Chen, Huang, Johansson, Shi). Agents hold a price estimate
``w~_i`` (the negated dual variable) pulled through a row-stochastic ``R`` and a cumulative
mismatch tracker ``s_i`` pushed through a column-stochastic ``C``; both messages carry i.i.d.
Laplace noise of geometrically decaying scale. Per iteration ``k`` (order (12a) -> (12c) -> (12b),
spec P1; one noise draw per agent and message, entering its own diagonal term too, P4)::

    s_{k+1}  = (1 - gamma) s_k + gamma C (s_k + xi_k) - alpha_k (w_k - d)          (13a)
    w~_{k+1} = (1 - phi) w~_k + phi R (w~_k + zeta_k) + (s_{k+1} - s_k)             (13b)
    w_{k+1}  = argmin_{w in W_i} F_i(w) - w~_{i,k+1}^T w                           (12b)

with ``alpha_k = alpha0 q^k`` and scales ``theta_k = theta0 q_theta^k`` (Cor. 5.14).

Only Euclidean space: the coupling constraint sums decisions, the dual lives in R^m, the
tracker's conservation law ``1^T (s_{k+1} - s_k) = -alpha_k (sum w - sum d) + gamma 1^T xi_k``
needs plain sums, and the privacy proof uses l1 distances of coordinate-wise Laplace noise
(spec 003 section 7). Any other manifold is refused with that explanation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rfed.algorithms.base import Algorithm
from rfed.algorithms.decentralized._common import check_nonneg, check_probability
from rfed.algorithms.decentralized._privacy import DGTPrivacy
from rfed.manifolds import Euclidean, as_generator
from rfed.networks.comm import InProcessCommunicator
from rfed.networks.graphs import Graph
from rfed.networks.mixing import (
    check_column_stochastic,
    check_row_stochastic,
    column_stochastic_weights,
    push_pull_constants,
    row_stochastic_weights,
)
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import QuadraticResourceAllocation

__all__ = ["DPDGT", "NoisyDDGT", "require_euclidean"]


def require_euclidean(problem, algorithm: str) -> None:
    """Raise ``ValueError`` unless the problem's communicated variables live in Euclidean space."""
    manifold = getattr(problem, "manifold", None)
    if not isinstance(manifold, Euclidean):
        raise ValueError(
            f"{algorithm} accepts only Euclidean space, got manifold {manifold!r}: dual gradient "
            "tracking needs a vector space (the coupling constraint sum_i w_i = sum_i d_i adds "
            "decisions, the dual variable lives in R^m, the tracker conserves plain sums through "
            "1^T C = 1^T, and the privacy proof uses l1 distances of coordinate-wise Laplace "
            "noise); Riemannian averaging would break the conservation law (spec 003 section 7)"
        )
    if not isinstance(problem, QuadraticResourceAllocation):
        raise TypeError(f"{algorithm} solves a QuadraticResourceAllocation, got "
                        f"{type(problem).__name__}")


@dataclass
class DGTState:
    """Iteration ``k``, prices ``wt``, trackers ``s``, allocations ``w``; all ``(n, m)``."""

    t: int
    wt: np.ndarray
    s: np.ndarray
    w: np.ndarray
    rng: np.random.Generator
    comm: object
    ledger: object = None
    comm0: dict = None  # type: ignore[assignment]


class _PushPullBase(Algorithm):
    """Shared plumbing: graph -> (R, C), communicator, run, metrics, output."""

    def __init__(self, graph: Graph, r=None, c=None, communicator=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"argument 'graph' must be an rfed Graph, got {graph!r}")
        self.graph = graph
        self.r = check_row_stochastic(row_stochastic_weights(graph) if r is None else r, "R")
        self.c = check_column_stochastic(column_stochastic_weights(graph) if c is None else c,
                                         "C")
        self.communicator = InProcessCommunicator if communicator is None else communicator

    def run(self, problem, n_rounds, *, rng, x0=None, eval_every=1, with_reference=True,
            callback=None):
        """As :meth:`Algorithm.run`; ``x0`` is the initial price ``w~_0`` (shape ``(m,)``,
        default 0, spec P18) and the result's ``x`` is the allocation ``(n_agents, m)``."""
        require_euclidean(problem, self.name)
        if x0 is None:
            x0 = np.zeros(problem.manifold.point_shape)
        return super().run(problem, n_rounds, rng=rng, x0=x0, eval_every=eval_every,
                           with_reference=with_reference, callback=callback)

    def _start(self, problem, x0, rng):
        require_euclidean(problem, self.name)
        n = problem.n_agents
        if self.graph.n_nodes != n:
            raise ValueError(f"graph has {self.graph.n_nodes} nodes, problem has {n} agents")
        wt = np.broadcast_to(np.asarray(x0, dtype=float), (n, problem.m)).copy()
        comm = self.communicator(n)
        return wt, problem.primal(wt), comm

    def output(self, problem, state):
        return state.w

    def privacy(self, state):
        """The run's privacy tracker with the paper's bounds stored (``None`` without noise)."""
        return None if state.ledger is None else state.ledger.finalize()

    def metrics(self, problem, state, with_reference):
        w = state.w
        out = {"cost": problem.cost(w), "imbalance": float(np.sum(problem.imbalance(w))),
               "total_generation": float(w.sum()), "price_mean": float(state.wt.mean()),
               "consensus_error": float(np.mean((state.wt - state.wt.mean(0)) ** 2)),
               "messages": int(state.comm.stats.messages),
               "bytes_sent": int(state.comm.stats.bytes),
               "allocation": w[:, 0].tolist() if problem.m == 1 else w.tolist()}
        if with_reference:
            out["sq_error"] = float(np.sum((w - problem.optimum()) ** 2))
        return out


class DPDGT(_PushPullBase):
    r"""DP-DGT (spec 003, Algorithm 1 / eq. (13)).

    Parameters
    ----------
    graph : Graph
        Directed communication graph (the IEEE 14-bus digraph in the paper); ``R`` and ``C``
        default to uniform weights with self-loops (spec 5.3).
    alpha0, q : float
        Step sizes ``alpha_k = alpha0 q^k`` (summable, as privacy needs; Sec. 6.1: 0.015, 0.991).
    gamma, phi : float
        Lazy mixing parameters of ``C`` and ``R`` (0.8, 0.7).
    theta_xi, theta_zeta : LaplaceSchedule
        Noise scales of the pushed ``s`` and the pulled ``w~`` (Sec. 6.1: ``0.01 * 0.995^k``);
        ``theta0 = 0`` means no noise.
    adjacency_delta : float
        Radius of the delta-adjacency (Def. 2.2) for the privacy report; the paper never fixes
        it, so eps is reported per unit delta by default (spec P16).
    track_privacy : bool
        Record the releases in a privacy ledger (Monte Carlo repetitions of one configuration
        have identical privacy and may switch it off).
    """

    name = "DP-DGT"

    def __init__(self, graph: Graph, *, alpha0: float = 0.015, q: float = 0.991,
                 gamma: float = 0.8, phi: float = 0.7,
                 theta_xi: LaplaceSchedule | None = None,
                 theta_zeta: LaplaceSchedule | None = None, adjacency_delta: float = 1.0,
                 track_privacy: bool = True, r=None, c=None, communicator=None):
        super().__init__(graph, r, c, communicator)
        self.track_privacy = bool(track_privacy)
        self.alpha0 = check_nonneg(alpha0, "alpha0")
        self.q = check_probability(q, "q")
        self.gamma = check_probability(gamma, "gamma")
        self.phi = check_probability(phi, "phi")
        self.theta_xi = theta_xi if theta_xi is not None else LaplaceSchedule(0.0, 1.0)
        self.theta_zeta = theta_zeta if theta_zeta is not None else LaplaceSchedule(0.0, 1.0)
        for nm, sched in (("theta_xi", self.theta_xi), ("theta_zeta", self.theta_zeta)):
            if not isinstance(sched, LaplaceSchedule):
                raise TypeError(f"argument '{nm}' must be a LaplaceSchedule, got {sched!r}")
        self.adjacency_delta = check_nonneg(adjacency_delta, "adjacency_delta")

    def alpha(self, k: int) -> float:
        """``alpha_k = alpha0 q^k``."""
        return self.alpha0 * self.q ** k

    def init(self, problem, x0, rng):
        wt, w, comm = self._start(problem, x0, rng)
        ledger = None
        if self.track_privacy and self.theta_xi.theta0 > 0 and self.theta_zeta.theta0 > 0:
            q_c = push_pull_constants(self.r, self.c, self.gamma, self.phi).q_C
            ledger = DGTPrivacy(self, problem, q_c)
        return DGTState(t=0, wt=wt, s=np.zeros_like(wt), w=w, rng=as_generator(rng), comm=comm,
                        ledger=ledger)

    def step(self, problem, state):
        k, rng, comm = state.t, state.rng, state.comm
        shape = state.s.shape
        xi = self.theta_xi.noise(k, shape, rng)
        zeta = self.theta_zeta.noise(k, shape, rng)
        pushed = comm.mix(self.c, state.s + xi)
        pulled = comm.mix(self.r, state.wt + zeta)
        s = (1 - self.gamma) * state.s + self.gamma * pushed - self.alpha(k) * (
            state.w - problem.demand)
        wt = (1 - self.phi) * state.wt + self.phi * pulled + (s - state.s)
        w = problem.primal(wt)
        if state.ledger is not None:
            state.ledger.record_round(k)
        return DGTState(t=k + 1, wt=wt, s=s, w=w, rng=rng, comm=comm, ledger=state.ledger)



class NoisyDDGT(_PushPullBase):
    r"""Distributed dual gradient tracking of Zhang, You and Cai (spec 003 eq. (7)) with the same
    Laplace noise on both messages (eq. (10)), DP-DGT's comparison baseline of Sec. 6.3::

        w~_{k+1} = R (w~_k + zeta_k) + beta_k z_k,   w_{k+1} = argmin F_i(w) - w~_{k+1}^T w,
        z_{k+1}  = C (z_k + xi_k) - iota (w_{k+1} - w_k),   z_0 = -iota (w_0 - d).

    The noise accumulates in ``1^T z_k`` (eq. (11)), which is why it does worse than DP-DGT.
    Sec. 6.3 uses ``beta_k = 0.99^k`` and ``iota = 0.034``.
    """

    name = "DDGT"

    def __init__(self, graph: Graph, *, beta0: float = 1.0, q: float = 0.99,
                 iota: float = 0.034, theta_xi: LaplaceSchedule | None = None,
                 theta_zeta: LaplaceSchedule | None = None, r=None, c=None, communicator=None):
        super().__init__(graph, r, c, communicator)
        self.beta0 = check_nonneg(beta0, "beta0")
        self.q = check_probability(q, "q")
        self.iota = check_nonneg(iota, "iota")
        self.theta_xi = theta_xi if theta_xi is not None else LaplaceSchedule(0.0, 1.0)
        self.theta_zeta = theta_zeta if theta_zeta is not None else LaplaceSchedule(0.0, 1.0)

    def init(self, problem, x0, rng):
        wt, w, comm = self._start(problem, x0, rng)
        z = -self.iota * (w - problem.demand)
        return DGTState(t=0, wt=wt, s=z, w=w, rng=as_generator(rng), comm=comm)

    def step(self, problem, state):
        k, rng, comm = state.t, state.rng, state.comm
        shape = state.s.shape
        xi = self.theta_xi.noise(k, shape, rng)
        zeta = self.theta_zeta.noise(k, shape, rng)
        wt = comm.mix(self.r, state.wt + zeta) + self.beta0 * self.q ** k * state.s
        w = problem.primal(wt)
        z = comm.mix(self.c, state.s + xi) - self.iota * (w - state.w)
        return DGTState(t=k + 1, wt=wt, s=z, w=w, rng=rng, comm=comm)
