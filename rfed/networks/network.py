"""A :class:`Network`: a graph, its (validated) mixing matrix and a communicator in one object."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rfed.manifolds.base import Manifold
from rfed.networks.comm import (
    Communicator,
    NeighborValues,
    freeze_weights,
)
from rfed.networks.engine import default_communicator
from rfed.networks.gossip import consensus_direction, mix_tangent, riemannian_gossip
from rfed.networks.graphs import Graph
from rfed.networks.mixing import (
    check_column_stochastic,
    check_doubly_stochastic,
    check_row_stochastic,
    check_support,
    check_symmetric,
    metropolis_hastings_weights,
)

__all__ = ["Network"]

_CHECKS = {
    "doubly": check_doubly_stochastic,
    "symmetric_doubly": lambda w, name: check_symmetric(check_doubly_stochastic(w, name), name),
    "row": check_row_stochastic,
    "column": check_column_stochastic,
}


class Network:
    """Graph + mixing matrix + communicator: what a decentralized algorithm talks to.

    Parameters
    ----------
    graph : Graph
        Must be connected (strongly connected if directed) unless ``require_connected=False``.
    weights : sparse or dense matrix, optional
        Mixing matrix supported on the graph's arcs and the diagonal. Default: Metropolis-Hastings
        weights (undirected graphs only).
    stochastic : {"doubly", "symmetric_doubly", "row", "column", None}
        Property ``weights`` must have (checked; the error names the offending row/column).
        Default ``"doubly"`` for undirected graphs; directed graphs need an explicit choice.
    communicator : Communicator, optional
        Default: :func:`rfed.networks.engine.default_communicator` (a new
        :class:`InProcessCommunicator` unless an engine is in use).
    require_connected : bool

    Examples
    --------
    >>> import numpy as np
    >>> from rfed.networks import Network, circulant
    >>> net = Network(circulant(20, 3))
    >>> y = net.mix(np.ones((20, 5)))   # every agent averages its neighbours
    """

    def __init__(
        self,
        graph: Graph,
        weights=None,
        *,
        stochastic: str | None = "auto",
        communicator: Communicator | None = None,
        require_connected: bool = True,
    ):
        if not isinstance(graph, Graph):
            raise TypeError(f"argument 'graph' must be a Graph, got {type(graph).__name__}")
        if require_connected:
            graph.check_connected()
        if stochastic == "auto":
            if graph.directed:
                raise ValueError(
                    "argument 'stochastic' must be given for a directed graph: 'row' (pull, R) "
                    "or 'column' (push, C)"
                )
            stochastic = "doubly"
        if stochastic is not None and stochastic not in _CHECKS:
            raise ValueError(
                f"argument 'stochastic' must be one of {sorted(_CHECKS)} or None, got "
                f"{stochastic!r}"
            )
        w = None
        if weights is not None or graph.directed:
            if weights is None:
                weights = metropolis_hastings_weights(graph)  # refuses the digraph
            w = check_support(weights, graph, "weights")
            if stochastic is not None:
                w = _CHECKS[stochastic](w, "weights")
        if communicator is None:
            communicator = default_communicator(graph.n_nodes)
        elif communicator.n_agents != graph.n_nodes:
            raise ValueError(
                f"argument 'communicator' serves {communicator.n_agents} agents, graph has "
                f"{graph.n_nodes} nodes"
            )
        self.graph = graph
        # the default Metropolis-Hastings weights are symmetric, doubly stochastic and supported
        # on the graph by construction: built on first use (an algorithm that draws its own
        # matrices, as DP-DDA does, never builds them: O(n) memory on a complete graph)
        self._weights: sp.csr_matrix | None = None if w is None else freeze_weights(w)
        self.comm = communicator

    @property
    def weights(self) -> sp.csr_matrix:
        """The frozen mixing matrix, shape ``(n_agents, n_agents)`` (the default
        Metropolis-Hastings weights are built here on first access)."""
        if self._weights is None:
            self._weights = freeze_weights(metropolis_hastings_weights(self.graph))
        return self._weights

    @property
    def n_agents(self) -> int:
        """Number of agents, the graph's nodes."""
        return self.graph.n_nodes

    @property
    def stats(self):
        """The communicator's :class:`~rfed.networks.comm.CommStats`."""
        return self.comm.stats

    def mix(self, values: np.ndarray, **kwargs) -> np.ndarray:
        """``W @ values`` through the communicator (see :meth:`Communicator.mix`).

        Parameters
        ----------
        values : ndarray, shape ``(n_agents, *shape)``
        **kwargs
            Passed to the communicator.

        Returns
        -------
        ndarray, shape ``(n_agents, *shape)``
        """
        return self.comm.mix(self.weights, values, **kwargs)

    def gather_from_neighbors(self, values: np.ndarray, **kwargs) -> NeighborValues:
        """In-neighbours' values, one row per arc (:meth:`Communicator.gather_from_neighbors`).

        Parameters
        ----------
        values : ndarray, shape ``(n_agents, *shape)``
        **kwargs
            Passed to the communicator.

        Returns
        -------
        NeighborValues
        """
        return self.comm.gather_from_neighbors(self.weights, values, **kwargs)

    def send_along_arcs(self, arc_values: np.ndarray, **kwargs) -> NeighborValues:
        """One distinct value per arc (:meth:`Communicator.send_along_arcs`).

        Parameters
        ----------
        arc_values : ndarray, shape ``(n_arcs, *shape)``
        **kwargs
            Passed to the communicator.

        Returns
        -------
        NeighborValues
        """
        return self.comm.send_along_arcs(self.weights, arc_values, **kwargs)

    def publish(self, copies: np.ndarray, delta: np.ndarray, **kwargs) -> np.ndarray:
        """Update public copies (see :meth:`Communicator.publish`).

        Parameters
        ----------
        copies, delta : ndarray, shape ``(n_agents, *shape)``
        **kwargs
            Passed to the communicator.

        Returns
        -------
        ndarray, shape ``(n_agents, *shape)``
        """
        return self.comm.publish(self.weights, copies, delta, **kwargs)

    def gossip(self, manifold: Manifold, points: np.ndarray, gamma: float = 1.0, **kwargs):
        """One Riemannian consensus step (see :func:`rfed.networks.riemannian_gossip`).

        Parameters
        ----------
        manifold : Manifold
        points : ndarray, shape ``(n_agents, *point_shape)``
        gamma : float
            Consensus step size.
        **kwargs
            Passed to the communicator.

        Returns
        -------
        ndarray, shape ``(n_agents, *point_shape)``
        """
        return riemannian_gossip(manifold, points, self.weights, gamma, comm=self.comm, **kwargs)

    def consensus_direction(self, manifold: Manifold, points, base=None, **kwargs):
        """``sum_j w_ij Log_{base_i}(points_j)`` (see :func:`rfed.networks.consensus_direction`).

        Parameters
        ----------
        manifold : Manifold
        points : ndarray, shape ``(n_agents, *point_shape)``
        base : ndarray, shape ``(n_agents, *point_shape)``, optional
            Default ``points``.
        **kwargs
            Passed to the communicator.

        Returns
        -------
        ndarray, shape ``(n_agents, *point_shape)``
            Tangent vectors at ``base``.
        """
        return consensus_direction(manifold, self.weights, points, base, comm=self.comm, **kwargs)

    def mix_tangent(self, manifold: Manifold, base_from, tangents, base_to, **kwargs):
        """Transport-then-mix of tangent vectors (see :func:`rfed.networks.mix_tangent`).

        Parameters
        ----------
        manifold : Manifold
        base_from : ndarray, shape ``(n_agents, *point_shape)``
        tangents : ndarray, shape ``(n_agents, *point_shape)``
            Tangent vectors at ``base_from``.
        base_to : ndarray, shape ``(n_agents, *point_shape)``
        **kwargs
            Passed to the communicator.

        Returns
        -------
        ndarray, shape ``(n_agents, *point_shape)``
            Tangent vectors at ``base_to``.
        """
        return mix_tangent(
            manifold, self.weights, base_from, tangents, base_to, comm=self.comm, **kwargs
        )

    def __repr__(self) -> str:
        nnz = "not built" if self._weights is None else self._weights.nnz
        return f"Network({self.graph!r}, nnz(W)={nnz})"
