"""What the decentralized algorithms share: state fields, outputs, metrics, local tangent mixing.

Per-agent points are stacked as ``(n_agents, *point_shape)``. Every value that crosses from one
agent to another goes through a :class:`rfed.networks.comm.Communicator` (bytes and messages are
counted there); quantities an agent already holds (its neighbours' public copies) are combined
locally with :func:`tangent_mix`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.manifolds import Euclidean, Manifold
from rfed.networks.comm import Communicator, segment_sum
from rfed.networks.gossip import consensus_error
from rfed.networks.mixing import check_doubly_stochastic, check_symmetric

__all__ = ["DecentralizedAlgorithm", "DecentralizedState", "offdiag_arcs", "tangent_mix",
           "agents_mean", "check_mixing_matrix", "check_probability"]


def check_probability(value: Any, name: str) -> float:
    """``value`` as a float in (0, 1]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"argument '{name}' must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"argument '{name}' must be in (0, 1], got {value!r}")
    return v


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
    """A symmetric doubly stochastic mixing matrix as CSR (the networks checks name the row)."""
    w = sp.csr_matrix(weights, dtype=float)
    check_symmetric(w, name)
    check_doubly_stochastic(w, name)
    w.sort_indices()
    return w


def offdiag_arcs(w: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(receivers, senders, weights)`` of the non-zero off-diagonal entries of ``w``."""
    coo = w.tocoo()
    keep = (coo.row != coo.col) & (coo.data != 0)
    order = np.lexsort((coo.col[keep], coo.row[keep]))
    return coo.row[keep][order], coo.col[keep][order], coo.data[keep][order]


def tangent_mix(manifold: Manifold, w: sp.csr_matrix, points: np.ndarray,
                arcs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    r"""Local consensus direction :math:`\sum_j w_{ij} \mathrm{Log}_{p_i}(p_j)` for every agent.

    Used on values every agent already holds (DO-ADP's public copies), so nothing is sent. On
    Euclidean space it is exactly :math:`(W P)_i - p_i` for a row-stochastic ``W``.

    Parameters
    ----------
    manifold : Manifold
    w : csr_matrix, shape ``(n, n)``
    points : array, shape ``(n, *point_shape)``
    arcs : output of :func:`offdiag_arcs`, optional (cached by callers)

    Returns
    -------
    array, shape ``(n, *point_shape)``: tangent vectors at ``points``.
    """
    points = np.asarray(points, dtype=float)
    n = points.shape[0]
    if isinstance(manifold, Euclidean):
        flat = points.reshape(n, -1)
        return (np.asarray(w @ flat) - np.asarray(w.sum(axis=1)) * flat).reshape(points.shape)
    rows, cols, vals = offdiag_arcs(w) if arcs is None else arcs
    logs = manifold.log(points[rows], points[cols])
    return segment_sum(rows, logs, n, vals)


def agents_mean(manifold: Manifold, x: np.ndarray) -> np.ndarray:
    """The agents' mean: arithmetic on Euclidean space, Karcher mean otherwise."""
    return manifold.mean(np.asarray(x, dtype=float))


@dataclass
class DecentralizedState:
    """Fields every decentralized state has.

    Attributes
    ----------
    t : int
        Rounds done.
    x : array, shape ``(n_agents, *point_shape)``
        The agents' iterates.
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


class DecentralizedAlgorithm(Algorithm):
    """Base of the graph algorithms: output = agents' mean, metrics add consensus and traffic.

    Traffic goes through the :class:`~rfed.networks.Network`'s communicator; the history reports
    the messages and bytes sent since the run's ``init`` (the state keeps the starting totals).
    """

    def output(self, problem, state) -> np.ndarray:
        return agents_mean(problem.manifold, self._output_points(state))

    def privacy(self, state):
        """The run's privacy tracker with the paper's bound stored (``None`` without noise)."""
        return None if state.ledger is None else state.ledger.finalize()

    def _output_points(self, state) -> np.ndarray:
        """The per-agent points whose mean is the output (the iterates by default)."""
        return state.x

    def metrics(self, problem, state, with_reference: bool) -> dict:
        xbar = self.output(problem, state)
        out = evaluate_point(problem, xbar, with_reference)
        out["consensus_error"] = consensus_error(problem.manifold, self._output_points(state),
                                                 xbar)
        start = state.info.get("comm0", {"messages": 0, "bytes": 0})
        out["messages"] = int(state.comm.stats.messages) - start["messages"]
        out["bytes_sent"] = int(state.comm.stats.bytes) - start["bytes"]
        return out
