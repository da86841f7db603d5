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
default, the others' run with ``-m slow``.
"""

from __future__ import annotations

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
from rfed.datasets.synthetic import make_epsilon_like
from rfed.networks.graphs import complete, ring
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
    audit : bool
        The generic audit applies: every release of an agent's data goes through the
        algorithm's :class:`~rfed.algorithms.decentralized.PrivateGradient` and a one-record
        change of a logistic regression at the public start moves it by the stated
        sensitivity (the others are audited in ``tests/privacy/test_audit_decentralized.py``).
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
    audit: bool = True
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
    # batch-level clipping: a record moves the clipped mean by less than the stated 2C
    AlgorithmCase("DP-CGA", lambda net, **kw: DPCGA(net, lr=0.1, **kw), audit=False,
                  whole_batch=False),
    # its own noise (one record per active round, node sampling) on the SVM
    AlgorithmCase("DP-DDA", lambda net, batch_size, **kw: DPDDA(net, n_active=2, gamma=1.0,
                                                                **kw),
                  problem=svm, graph=complete, audit=False),
    # Laplace releases of the whole local data set (the paper's function-level relation)
    AlgorithmCase("DPDO", lambda net, batch_size, **kw: DPDO(net, lr=0.3, lr_decay=0.99,
                                                             noise_decay=0.995, **kw),
                  audit=False),
    # Laplace releases; the relation's public bound is the gradient distance, given as "clip"
    AlgorithmCase("DP-DGT", lambda net, clip, batch_size, **kw: DPDGT(
        net.graph, adjacency_radius=clip, communicator=lambda n, comm=net.comm: comm, **kw),
                  clip_name="adjacency_radius",
                  problem=dispatch, audit=False),
    AlgorithmCase("noisy DDGT", lambda net, clip, batch_size, **kw: NoisyDDGT(
        net.graph, adjacency_radius=clip, communicator=lambda n, comm=net.comm: comm, **kw),
                  clip_name="adjacency_radius",
                  problem=dispatch, audit=False),
]

#: name -> case
BY_NAME = {case.name: case for case in CASES}
