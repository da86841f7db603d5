"""What the decentralized algorithms share: state fields, outputs, metrics, argument checks.

Per-agent points are stacked as ``(n_agents, *point_shape)``. Every value that crosses from one
agent to another goes through a :class:`rfed.networks.comm.Communicator` (bytes and messages are
counted there); quantities an agent already holds (its neighbours' public copies) are mixed by
the same :mod:`rfed.networks.gossip` functions with ``copies=True``, which counts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.algorithms.decentralized._blocks import BlockStates
from rfed.manifolds import Manifold
from rfed.networks.comm import Communicator, freeze_weights
from rfed.networks.gossip import consensus_error
from rfed.networks.mixing import check_doubly_stochastic, check_symmetric

__all__ = ["DecentralizedAlgorithm", "DecentralizedState", "agents_mean", "check_choice",
           "check_mixing_matrix", "check_nonneg", "check_probability", "privacy_report"]


def check_probability(value: Any, name: str) -> float:
    """``value`` as a float in (0, 1]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"argument '{name}' must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"argument '{name}' must be in (0, 1], got {value!r}")
    return v


def check_choice(value: Any, name: str, options: tuple[str, ...]) -> str:
    """``value`` if it is one of ``options``, else a ``ValueError`` listing them."""
    if value not in options:
        valid = " or ".join(repr(o) for o in options)
        raise ValueError(f"argument '{name}' must be {valid}, got {value!r}")
    return value


def check_nonneg(value: Any, name: str) -> float:
    """``value`` as a finite float >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"argument '{name}' must be a number >= 0, got {value!r}") from None
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"argument '{name}' must be a finite number >= 0, got {value!r}")
    return v


def check_mixing_matrix(weights: Any, name: str = "weights") -> sp.csr_matrix:
    """A symmetric doubly stochastic mixing matrix as frozen CSR (the networks checks name the
    row; frozen: what every round derives from it is computed once, see
    :func:`rfed.networks.freeze_weights`)."""
    w = sp.csr_matrix(weights, dtype=float)
    check_symmetric(w, name)
    check_doubly_stochastic(w, name)
    return freeze_weights(w, name)


def agents_mean(manifold: Manifold, x: np.ndarray) -> np.ndarray:
    """The agents' mean: arithmetic on Euclidean space, Karcher mean otherwise."""
    return manifold.mean(np.asarray(x, dtype=float))


def privacy_report(state: Any) -> dict | None:
    """The run's privacy report from a (block) state: the accounts of every process merged,
    the report (which runs the accountant) computed once, by one process, for all."""
    if state.ledger is None:
        return None
    account = state.comm.merge_account(state.ledger)
    return state.comm.root_computes(account.report)


@dataclass
class DecentralizedState:
    """Fields every decentralized state has.

    Attributes
    ----------
    t : int
        Rounds done.
    x : array, shape ``(n_local, *point_shape)``
        The iterates of the communicator's block of agents (every agent in one process).
    rng : numpy.random.Generator
    comm : Communicator
        Counts messages and bytes.
    ledger : object or None
        The run's :class:`rfed.privacy.PrivacyLedger` (``None`` without noise).
    """

    t: int
    x: np.ndarray
    rng: np.random.Generator
    comm: Communicator
    ledger: Any = None
    info: dict = field(default_factory=dict)


class DecentralizedAlgorithm(BlockStates, Algorithm):
    """Base of the graph algorithms: output = agents' mean, metrics add consensus and traffic.

    Traffic goes through the :class:`~rfed.networks.Network`'s communicator; the history reports
    the messages and bytes sent since the run's ``init`` (the state keeps the starting totals).
    A state of a block of agents merges with the other blocks' and splits again
    (:class:`~rfed.algorithms.decentralized._blocks.BlockStates`; ``x`` is a row field).
    """

    state_rows = ("x",)

    def output(self, problem, state) -> np.ndarray:
        return agents_mean(problem.manifold, self._all_output_points(state))

    def _all_output_points(self, state) -> np.ndarray:
        """Every agent's output point in agent order (gathered from the blocks of a
        distributed engine)."""
        return state.comm.all_rows(self._output_points(state))

    def privacy(self, state):
        """The run's privacy tracker with the paper's bound stored (``None`` without noise);
        a distributed engine merges its processes' accounts first."""
        return None if state.ledger is None else \
            state.comm.merge_account(state.ledger).finalize()

    def divergence(self, problem, state, recorded: bool) -> str | None:
        """:meth:`Algorithm.divergence` of this block, shared by every process of the engine
        (so all stop together)."""
        if not recorded:
            # between records only finiteness is checked: finite iterates need no reason
            x = self.iterates(state)
            if type(x) is np.ndarray and np.isfinite(x).all():
                return state.comm.agree(None)
        return state.comm.agree(super().divergence(problem, state, recorded))

    def _output_points(self, state) -> np.ndarray:
        """The per-agent points whose mean is the output (the iterates by default)."""
        return state.x

    def metrics(self, problem, state, with_reference: bool) -> dict:
        xbar = self.output(problem, state)
        out = evaluate_point(problem, xbar, with_reference)
        out["consensus_error"] = consensus_error(problem.manifold,
                                                 self._all_output_points(state), xbar)
        start = state.info.get("comm0", {"messages": 0, "bytes": 0})
        total = state.comm.total_stats()
        out["messages"] = int(total["messages"]) - start["messages"]
        out["bytes_sent"] = int(total["bytes"]) - start["bytes"]
        return out
