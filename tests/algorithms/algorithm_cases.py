"""The registry of algorithm test cases: one line per private algorithm on the public contract.

Adding an :class:`~rfed.algorithms.decentralized.PrivateAlgorithm` to :data:`CASES` runs every
shared test of ``tests/algorithms/test_algorithm_cases.py`` on it: the report's one shape
private or not, the data leaving an agent only through its noisy releases, the budget's
calibration, an empirical audit below the certified epsilon that catches a broken variant,
checkpoint and resume, bit-identity on MPI ranks, and the refusal of bad input naming the
argument. A case is

``AlgorithmCase(name, make, ...)``

with ``make(network, *, clip, batch_size, **privacy)`` building the algorithm (``clip`` the
public clip level, ``batch_size`` records per release or ``None`` for the whole local data set,
``privacy`` the keywords of :class:`~rfed.algorithms.private.NoiseConfig`). Tiny sizes keep the
default suite fast; ``default=True`` marks the cases whose long shared tests (audit, MPI) run by
default, the others' run with ``-m slow``. A case whose releases are not the private gradient's
Gaussian ones (DPDO's and DP-DGT's Laplace releases) gives its own audit scorer
(:func:`dpdo_audit`, :func:`dgt_audit`, both through :func:`laplace_noise`). The federated
trainers have the parallel registry ``federated_cases.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rfed.algorithms.decentralized import (
    DOADP,
    DPCGA,
    DPDDA,
    DPDGT,
    DPDL,
    DPDO,
    DPDPSGD,
    Muffliato,
    NoisyDDGT,
    NoisyDSGD,
)
from rfed.algorithms.decentralized import dpdgt as dpdgt_module
from rfed.algorithms.decentralized import dpdo as dpdo_module
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks import Network
from rfed.networks.graphs import complete, digraph_from_edges, ring
from rfed.privacy import PrivacyBudget
from rfed.problems.dispatch import QuadraticResourceAllocation
from rfed.problems.linear import HingeSVM, L2Regularizer, LogisticRegression, split_evenly

ROOT = Path(__file__).resolve().parents[2]


def logreg(n_agents: int, records: int = 20, dim: int = 4) -> LogisticRegression:
    """Logistic regression on epsilon-like data, ``records`` per agent, features of norm
    ``<= 1``."""
    x, y = make_epsilon_like(n_agents * records, dim, 0)
    return LogisticRegression(*split_evenly(x, y, n_agents, np.random.default_rng(0)),
                              L2Regularizer(0.1), feature_bound=1.0)


def svm(n_agents: int, records: int = 20, dim: int = 4) -> HingeSVM:
    """The hinge-loss SVM of the same data (DP-DDA's problem)."""
    p = logreg(n_agents, records, dim)
    return HingeSVM(p.data["features"], p.data["labels"], L2Regularizer(0.1), feature_bound=1.0)


def dispatch(n_agents: int, records: int = 20, dim: int = 4) -> QuadraticResourceAllocation:
    """A tiny resource allocation (DP-DGT's problem): quadratic costs, a wide box, demand 1 at
    each agent (its data are the cost functions; ``records`` and ``dim`` do not apply)."""
    rng = np.random.default_rng(0)
    return QuadraticResourceAllocation(0.03 + 0.02 * rng.random(n_agents),
                                       2.0 + rng.random(n_agents), np.full(n_agents, -50.0),
                                       np.full(n_agents, 50.0), np.ones(n_agents))


def noisy_gossip_sgd() -> type:
    """The tutorial's algorithm, from ``examples/noisy_gossip_sgd.py``."""
    spec = importlib.util.spec_from_file_location("noisy_gossip_sgd",
                                                  ROOT / "examples" / "noisy_gossip_sgd.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.NoisyGossipSGD


# ---------------------------------------------------------------------------- Laplace audits
AUDIT_TRIALS, AUDIT_EPSILON, AUDIT_DELTA = 1500, 1.5, 1e-5


@contextlib.contextmanager
def laplace_noise(module: Any, noise_factor: float, released: list | None = None):
    """``module.laplace_mechanism`` with its scale multiplied by ``noise_factor`` (the broken
    variant: the ledger still records the planned scale), each release appended to
    ``released``."""
    real = module.laplace_mechanism

    def mechanism(value, scale, rng):
        out = real(value, np.asarray(scale) * noise_factor, rng)
        if released is not None:
            released.append(np.array(out))
        return out

    module.laplace_mechanism = mechanism
    try:
        yield released
    finally:
        module.laplace_mechanism = real


def _canary(n: int) -> np.ndarray:
    """The second half of ``n`` agents holds the canary (the neighbour D1), the first D0."""
    return np.arange(n) >= n // 2


def dpdo_audit(noise_factor: float) -> tuple[np.ndarray, np.ndarray, float]:
    """DPDO's first message, one trial per agent: logistic regression on 4 records of feature
    1 at the public start 0, record 0's label flipped in the canary half (its gradient,
    clipped to 1/2, the opposite of the others': the L1 sensitivity ``2 C gamma_0 / q``
    attained); the statistic is the message minus the average of the public initial
    messages, ``-gamma_0 g + Lap(M_1)``."""
    n, q = 2 * AUDIT_TRIALS, 4
    canary = _canary(n)
    labels = np.ones((n, q))
    labels[canary, 0] = -1.0
    problem = LogisticRegression(np.ones((n, q, 1)), labels)
    alg = DPDO(Network(ring(n)), lr=1.0, clip=0.5,
               budget=PrivacyBudget(AUDIT_EPSILON, AUDIT_DELTA), n_rounds=1)
    with laplace_noise(dpdo_module, noise_factor):
        state = alg.step(problem, alg.init(problem, np.zeros(1), np.random.default_rng(1)))
    stat = (state.x - state.z)[:, 0]
    return stat[~canary], stat[canary], alg.privacy(state)["epsilon_certified"]


def dgt_audit(cls: type, rounds: int) -> Callable[[float], tuple[np.ndarray, np.ndarray, float]]:
    """The audit of DP-DGT (``rounds = 2``) or noisy DDGT (``1``): disjoint 2-agent systems,
    agent 2t's linear cost moved by the relation's radius 1 in the neighbour (the gradient
    distance, attained everywhere; the box never binds); the statistic is the changed agent's
    first noisy tracker minus what the earlier public messages explain."""

    def scores(noise_factor: float) -> tuple[np.ndarray, np.ndarray, float]:
        n = 2 * AUDIT_TRIALS
        src = np.arange(0, n, 2)
        graph = digraph_from_edges(n, np.concatenate([np.stack([src, src + 1], 1),
                                                      np.stack([src + 1, src], 1)]))
        out = []
        for shifted in (False, True):
            b = np.full(n, 2.0)
            if shifted:
                b[0::2] += 1.0
            problem = QuadraticResourceAllocation(np.full(n, 0.03), b, np.full(n, -1e6),
                                                  np.full(n, 1e6), np.zeros(n))
            alg = cls(graph, budget=PrivacyBudget(AUDIT_EPSILON, AUDIT_DELTA), n_rounds=rounds,
                      adjacency_radius=1.0)
            with laplace_noise(dpdgt_module, noise_factor, []) as released:
                state = alg.init(problem, np.zeros(1), np.random.default_rng(3 + shifted))
                for _ in range(rounds):
                    state = alg.step(problem, state)
            if cls is DPDGT:
                # iteration 1's pushed tracker: -alpha_0 (w_0 - d) + xi_1, the mixed public
                # tracker of iteration 0 subtracted
                stat = released[2][:, 0] - alg.gamma * (alg.c @ released[0][:, 0])
            else:
                stat = released[0][:, 0]   # iteration 0's pushed tracker z_0 + xi_0
            out.append(stat[0::2])
        return out[0], out[1], alg.privacy(state)["epsilon_certified"]

    return scores


@dataclass(frozen=True)
class AlgorithmCase:
    """One algorithm under the shared tests.

    Attributes
    ----------
    name : str
    make : callable
        ``make(network, *, clip, batch_size, **privacy) -> PrivateAlgorithm``.
    clip_name : str
        The constructor's name for the clip level (in its error messages).
    problem : callable
        ``problem(n_agents, records=20, dim=4)``: the tiny problem of the case.
    graph : callable
        ``graph(n_agents)``.
    audit : bool or callable
        ``True``: the generic audit applies (every release of an agent's data goes through the
        algorithm's :class:`~rfed.algorithms.decentralized.PrivateGradient` and a one-record
        change of a logistic regression at the public start moves it by the stated
        sensitivity). A callable ``scores(noise_factor) -> (s0, s1, epsilon)`` is the case's
        own audit (its releases' noise multiplied by ``noise_factor``, the ledger unchanged;
        the scores of ``2 x 1500`` trials on the two neighbours and the certified epsilon of
        one trial at the budget 1.5), e.g. a Laplace release through :func:`laplace_noise`.
        ``False``: audited in ``tests/privacy/`` (the reason beside the case).
    canary_feature : float
        The generic audit's canary feature (1: a per-sample clip is attained by the flipped
        label; batch-level clipping needs a record that turns the clipped batch mean around).
    default : bool
        Its audit and MPI tests run in the default suite.
    whole_batch : bool
        It takes ``batch_size=None`` (the whole local data set); otherwise the tests pass the
        local size.
    """

    name: str
    make: Callable[..., Any]
    clip_name: str = "clip"
    problem: Callable[..., Any] = logreg
    graph: Callable[[int], Any] = ring
    audit: bool | Callable[[float], tuple[np.ndarray, np.ndarray, float]] = True
    canary_feature: float = 1.0
    default: bool = False
    whole_batch: bool = True

    def batch(self, batch_size: int | None, records: int) -> int | None:
        """``batch_size``, or the local size ``records`` for the whole local data set when the
        algorithm needs an int."""
        return records if batch_size is None and not self.whole_batch else batch_size


CASES = [
    # (its audit and MPI runs are in the default suite through test_write_your_own.py)
    AlgorithmCase("noisy gossip SGD", lambda net, **kw: noisy_gossip_sgd()(net, lr=0.2, **kw)),
    AlgorithmCase("DO-ADP", lambda net, clip, **kw: DOADP(net, alpha=0.1, p=0.8, k_ratio=0.5,
                                                          grad_bound=clip, **kw),
                  clip_name="grad_bound", default=True),
    AlgorithmCase("DSGD", lambda net, clip, **kw: NoisyDSGD(net, alpha=0.1, grad_bound=clip,
                                                            **kw), clip_name="grad_bound"),
    AlgorithmCase("DPDL", lambda net, **kw: DPDL(net, lr=0.1, **kw), whole_batch=False),
    AlgorithmCase("DP-DPSGD", lambda net, **kw: DPDPSGD(net, lr=0.1, **kw), whole_batch=False),
    AlgorithmCase("MUFFLIATO", lambda net, **kw: Muffliato(net, lr=0.1, gossip_steps=2, **kw)),
    # batch-level clipping: the canary (feature 100, label flipped) turns the clipped batch
    # mean around (+C for -C), the stated 2C attained
    AlgorithmCase("DP-CGA", lambda net, **kw: DPCGA(net, lr=0.1, **kw), canary_feature=100.0,
                  whole_batch=False),
    # its own noise (one record per active round, node sampling) on the SVM, not through the
    # PrivateGradient: audited in tests/privacy/test_audit_decentralized.py (test_audit_dpdda)
    AlgorithmCase("DP-DDA", lambda net, batch_size, **kw: DPDDA(net, n_active=2, gamma=1.0,
                                                                **kw),
                  problem=svm, graph=complete, audit=False),
    # Laplace releases of the whole local data set (the paper's function-level relation)
    AlgorithmCase("DPDO", lambda net, batch_size, **kw: DPDO(net, lr=0.3, lr_decay=0.99,
                                                             noise_decay=0.995, **kw),
                  audit=dpdo_audit),
    # Laplace releases; the relation's public bound is the gradient distance, given as "clip"
    AlgorithmCase("DP-DGT", lambda net, clip, batch_size, **kw: DPDGT(
        net.graph, adjacency_radius=clip, communicator=lambda n, comm=net.comm: comm, **kw),
                  clip_name="adjacency_radius",
                  problem=dispatch, audit=dgt_audit(DPDGT, 2)),
    AlgorithmCase("noisy DDGT", lambda net, clip, batch_size, **kw: NoisyDDGT(
        net.graph, adjacency_radius=clip, communicator=lambda n, comm=net.comm: comm, **kw),
                  clip_name="adjacency_radius",
                  problem=dispatch, audit=dgt_audit(NoisyDDGT, 1)),
]

#: name -> case
BY_NAME = {case.name: case for case in CASES}
