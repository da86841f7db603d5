"""Communication graphs: a sparse :class:`Graph` type, constructors and connectivity checks.

Conventions
-----------
* Nodes are ``0 .. n_nodes - 1``.
* The adjacency matrix is stored as a ``scipy.sparse.csr_matrix`` ``A`` with ``A[i, j] = 1``
  iff node ``i`` **receives** from node ``j`` (the edge ``j -> i``). This is the layout of a
  mixing matrix (``W[i, j]`` is the weight agent ``i`` puts on agent ``j``'s value) and the
  convention of DP-DGT (its notation paragraph "Graph Theory": the pair ``(i, j)`` is the edge
  from ``j`` to ``i``; :ref:`dpdgt-graph`). Row ``i`` lists the in-neighbours of ``i``, column
  ``j`` the out-neighbours of ``j``. Undirected graphs have a symmetric ``A``. There are no
  self-loops in ``A``; mixing matrices add the diagonal.
* Edge lists passed to constructors are ``(source, target)`` pairs (``source -> target``) unless
  said otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from rfed.manifolds.base import as_generator

__all__ = [
    "Graph",
    "CompleteGraph",
    "ring",
    "circulant",
    "complete",
    "complete_bipartite",
    "two_hub_bipartite",
    "dpdl_bipartite",
    "star",
    "erdos_renyi",
    "exponential",
    "random_regular",
    "graph_from_edges",
    "digraph_from_edges",
    "ieee14_digraph",
    "IEEE14_EDGES",
]


def _check_n(n, name: str = "n", minimum: int = 1) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < minimum:
        raise ValueError(f"argument '{name}' must be an int >= {minimum}, got {n!r}")
    return int(n)


def _format_nodes(nodes: np.ndarray, limit: int = 20) -> str:
    listed = [int(v) for v in nodes]
    if len(listed) <= limit:
        return str(listed)
    return f"{listed[:limit]} ... ({len(listed)} nodes)"


@dataclass(frozen=True, eq=False)
class Graph:
    """A directed or undirected graph on ``n_nodes`` nodes with sparse adjacency.

    Build one with the constructors of this module (:func:`ring`, :func:`complete`, ...) or
    :meth:`Graph.from_adjacency`; the dataclass fields are not validated.

    Attributes
    ----------
    n_nodes : int
    directed : bool
    adjacency : scipy.sparse.csr_matrix, shape ``(n_nodes, n_nodes)``
        ``adjacency[i, j] == 1`` iff ``i`` receives from ``j`` (edge ``j -> i``); symmetric when
        undirected; zero diagonal; sorted indices.
    name : str
    """

    n_nodes: int
    directed: bool
    adjacency: sp.csr_matrix
    name: str = "graph"

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_adjacency(cls, adjacency, directed: bool | None = None, name: str = "graph") -> Graph:
        """Graph from a (dense or sparse) square 0/1 adjacency with ``A[i, j]`` = edge ``j -> i``.

        Non-zero entries count as edges (their values are ignored). ``directed=None`` infers it:
        undirected iff the pattern is symmetric. A self-loop raises ``ValueError``.

        Parameters
        ----------
        adjacency : array_like or scipy.sparse matrix, shape ``(n, n)``
        directed : bool, optional
        name : str

        Returns
        -------
        Graph
        """
        a = sp.csr_matrix(adjacency)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"argument 'adjacency' must be square, got shape {a.shape}")
        a.eliminate_zeros()
        a = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
        a.sum_duplicates()
        a.data[:] = 1.0
        a.sort_indices()
        diag = a.diagonal()
        if np.any(diag != 0):
            raise ValueError(
                "argument 'adjacency' has self-loops at nodes "
                f"{_format_nodes(np.flatnonzero(diag))}; mixing matrices add the diagonal"
            )
        symmetric = (a != a.T).nnz == 0
        if directed is None:
            directed = not symmetric
        elif not directed and not symmetric:
            raise ValueError(
                "argument 'adjacency' is not symmetric but directed=False was requested"
            )
        return cls(int(a.shape[0]), bool(directed), a, name)

    # ------------------------------------------------------------------ sizes and degrees
    @property
    def n_arcs(self) -> int:
        """Number of directed arcs (an undirected edge counts twice): ``adjacency.nnz``."""
        return int(self.adjacency.nnz)

    @property
    def n_edges(self) -> int:
        """Number of edges: arcs if directed, unordered pairs if undirected."""
        return self.n_arcs if self.directed else self.n_arcs // 2

    @property
    def in_degree(self) -> np.ndarray:
        """In-degree of every node (number of nodes it receives from), shape ``(n_nodes,)``."""
        return np.diff(self.adjacency.indptr).astype(int)

    @property
    def out_degree(self) -> np.ndarray:
        """Out-degree of every node (number of nodes it sends to), shape ``(n_nodes,)``."""
        return np.bincount(self.adjacency.indices, minlength=self.n_nodes).astype(int)

    @property
    def degree(self) -> np.ndarray:
        """Degree of every node of an undirected graph (``ValueError`` if directed)."""
        if self.directed:
            raise ValueError(
                f"{self.name}: 'degree' is ambiguous on a directed graph; use in_degree or "
                "out_degree"
            )
        return self.in_degree

    @property
    def max_degree(self) -> int:
        """Largest degree (largest in-degree if directed), ``d_max`` of DO-ADP (Assumption 3)."""
        return int(self.in_degree.max()) if self.n_nodes else 0

    def in_neighbors(self, i: int) -> np.ndarray:
        """Nodes that ``i`` receives from, sorted.

        Parameters
        ----------
        i : int
            A node, ``0 .. n_nodes - 1``.

        Returns
        -------
        ndarray of int, shape ``(degree,)``
        """
        a = self.adjacency
        return a.indices[a.indptr[i] : a.indptr[i + 1]].copy()

    def out_neighbors(self, i: int) -> np.ndarray:
        """Nodes that ``i`` sends to, sorted.

        Parameters
        ----------
        i : int
            A node, ``0 .. n_nodes - 1``.

        Returns
        -------
        ndarray of int, shape ``(degree,)``
        """
        return np.sort(self.adjacency.T.tocsr()[i].indices)

    def neighbors(self, i: int) -> np.ndarray:
        """Neighbours of ``i`` in an undirected graph (in-neighbours if directed).

        Parameters
        ----------
        i : int
            A node, ``0 .. n_nodes - 1``.

        Returns
        -------
        ndarray of int, shape ``(degree,)``
        """
        return self.in_neighbors(i)

    def edges(self) -> np.ndarray:
        """Edge list ``(source, target)``, shape ``(n_edges, 2)``.

        Undirected graphs list each edge once with ``source < target``.

        Returns
        -------
        ndarray of int, shape ``(n_edges, 2)``
        """
        coo = self.adjacency.tocoo()
        src, dst = coo.col, coo.row
        if not self.directed:
            keep = src < dst
            src, dst = src[keep], dst[keep]
        order = np.lexsort((dst, src))
        return np.stack([src[order], dst[order]], axis=1).astype(int)

    def laplacian(self) -> sp.csr_matrix:
        """Graph Laplacian ``L = D_in - A`` (``D - A`` when undirected), sparse.

        Returns
        -------
        scipy.sparse.csr_matrix, shape ``(n_nodes, n_nodes)``
        """
        return (sp.diags(self.in_degree.astype(float)) - self.adjacency).tocsr()

    def is_complete(self) -> bool:
        """Whether every ordered pair of distinct nodes is an arc.

        Returns
        -------
        bool
        """
        return self.n_arcs == self.n_nodes * (self.n_nodes - 1)

    def is_regular(self) -> bool:
        """Whether all in-degrees and out-degrees are equal.

        Returns
        -------
        bool
        """
        deg = np.concatenate([self.in_degree, self.out_degree])
        return bool(deg.size == 0 or np.all(deg == deg[0]))

    # ------------------------------------------------------------------ connectivity
    def _forward(self) -> sp.csr_matrix:
        # csgraph reads row -> column as an arc; our rows are receivers, so transpose
        return self.adjacency.T.tocsr()

    def unreachable_from(self, source: int = 0) -> np.ndarray:
        """Nodes that no directed path from ``source`` reaches, sorted.

        Parameters
        ----------
        source : int

        Returns
        -------
        ndarray of int
        """
        reached = csgraph.breadth_first_order(
            self._forward(), source, directed=True, return_predecessors=False
        )
        mask = np.ones(self.n_nodes, dtype=bool)
        mask[reached] = False
        return np.flatnonzero(mask)

    def is_connected(self) -> bool:
        """Connected (undirected) or strongly connected (directed).

        Returns
        -------
        bool
        """
        if self.n_nodes <= 1:
            return True
        n_comp = csgraph.connected_components(
            self._forward(), directed=self.directed, connection="strong", return_labels=False
        )
        return n_comp == 1

    def check_connected(self) -> Graph:
        """Return ``self`` or raise ``ValueError`` naming the nodes that are cut off.

        Undirected: the nodes not reachable from node 0. Directed (strong connectivity): the
        nodes node 0 cannot reach, or else the nodes that cannot reach node 0.

        Returns
        -------
        Graph
        """
        if self.n_nodes <= 1:
            return self
        cut = self.unreachable_from(0)
        if cut.size:
            kind = "strongly connected" if self.directed else "connected"
            raise ValueError(
                f"{self.name} is not {kind}: nodes {_format_nodes(cut)} are not reachable from "
                "node 0"
            )
        if self.directed:
            back = csgraph.breadth_first_order(
                self.adjacency, 0, directed=True, return_predecessors=False
            )
            mask = np.ones(self.n_nodes, dtype=bool)
            mask[back] = False
            cut = np.flatnonzero(mask)
            if cut.size:
                raise ValueError(
                    f"{self.name} is not strongly connected: node 0 is not reachable from nodes "
                    f"{_format_nodes(cut)}"
                )
        return self

    def spanning_tree_roots(self) -> np.ndarray:
        """Nodes from which every node is reachable (roots of a spanning tree), sorted.

        Empty when no spanning tree exists. All nodes when strongly connected. This is the
        connectivity that DP-DGT's Assumption 2 asks of G_R and G_C' (strong connectivity is
        not required).

        Returns
        -------
        ndarray of int
        """
        n_comp, labels = csgraph.connected_components(
            self._forward(), directed=True, connection="strong"
        )
        coo = self.adjacency.tocoo()
        # an SCC with an arc entering from another SCC is not a source of the condensation
        entered = np.zeros(n_comp, dtype=bool)
        cross = labels[coo.row] != labels[coo.col]
        entered[labels[coo.row[cross]]] = True
        sources = np.flatnonzero(~entered)
        if sources.size != 1:
            return np.array([], dtype=int)
        return np.flatnonzero(labels == sources[0])

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return f"Graph({self.name}, {kind}, n_nodes={self.n_nodes}, n_edges={self.n_edges})"


# ---------------------------------------------------------------------- builders
def _from_pairs(n: int, src, dst, directed: bool, name: str) -> Graph:
    """Graph from arrays of arcs ``src -> dst`` (symmetrized when undirected, deduplicated)."""
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    a = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1.0
    a.sort_indices()
    return Graph(n, directed, a, name)


def _validate_edge_array(n: int, edges, name: str = "edges") -> np.ndarray:
    e = np.asarray(list(edges) if not isinstance(edges, np.ndarray) else edges)
    if e.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"argument '{name}' must be a sequence of (source, target) pairs")
    if not np.issubdtype(e.dtype, np.integer):
        raise ValueError(f"argument '{name}' must contain integer node labels, got {e.dtype}")
    bad = (e < 0) | (e >= n)
    if np.any(bad):
        row = int(np.argwhere(bad)[0, 0])
        raise ValueError(
            f"argument '{name}': edge {tuple(int(v) for v in e[row])} has a node outside 0..{n - 1}"
        )
    loops = e[:, 0] == e[:, 1]
    if np.any(loops):
        raise ValueError(
            f"argument '{name}': self-loop at node {int(e[loops][0, 0])}; mixing matrices add "
            "the diagonal"
        )
    return e.astype(np.int64)


def graph_from_edges(
    n: int, edges: Iterable[Sequence[int]], directed: bool = False, name: str = "edges"
) -> Graph:
    """Graph on ``n`` nodes from ``(source, target)`` pairs (0-based).

    Undirected graphs ignore the orientation; duplicates are merged; self-loops raise.

    Parameters
    ----------
    n : int
        Number of nodes.
    edges : iterable of (int, int)
        Pairs ``(source, target)``.
    directed : bool
    name : str

    Returns
    -------
    Graph
    """
    n = _check_n(n)
    e = _validate_edge_array(n, edges)
    return _from_pairs(n, e[:, 0], e[:, 1], directed, name)


def digraph_from_edges(n: int, edges: Iterable[Sequence[int]], name: str = "digraph") -> Graph:
    """Directed graph on ``n`` nodes from arcs ``(source, target)`` = ``source -> target``.

    Parameters
    ----------
    n : int
        Number of nodes.
    edges : iterable of (int, int)
        Arcs ``(source, target)``.
    name : str

    Returns
    -------
    Graph
    """
    return graph_from_edges(n, edges, directed=True, name=name)


def circulant(n: int, hops: int | Sequence[int] | np.ndarray) -> Graph:
    """Circulant graph: node ``i`` is linked to ``i +- s (mod n)`` for every offset ``s``.

    Parameters
    ----------
    n : int
        Number of nodes (>= 3).
    hops : int or sequence of int
        An int ``k`` means offsets ``1, ..., k`` (the k-hop ring; DO-ADP's experiment is
        ``circulant(20, 3)``: degree 6, Sec. VI; :ref:`doadp-mixing-matrix`); a sequence
        gives the offsets.

    Notes
    -----
    Offsets are taken modulo ``n`` and identified with ``n - s``. The degree is
    ``2 * #offsets``, minus one when ``n`` is even and ``n / 2`` is an offset.

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=3)
    if isinstance(hops, (int, np.integer)) and not isinstance(hops, bool):
        if not 1 <= hops <= n // 2:
            raise ValueError(f"argument 'hops' must be in 1..{n // 2} for n = {n}, got {hops}")
        offsets = np.arange(1, int(hops) + 1)
        label = f"circulant(n={n}, hops={int(hops)})"
    else:
        # a bool is refused by list() as before; the cast only says what else hops can be
        offsets = np.asarray(list(cast("Iterable[int]", hops)), dtype=np.int64)
        if offsets.size == 0 or np.any(offsets % n == 0):
            raise ValueError(
                f"argument 'hops' must be non-empty offsets not divisible by n = {n}, got {hops!r}"
            )
        offsets = np.unique(np.minimum(offsets % n, n - offsets % n))
        label = f"circulant(n={n}, offsets={offsets.tolist()})"
    i = np.repeat(np.arange(n), offsets.size)
    j = (i + np.tile(offsets, n)) % n
    return _from_pairs(n, i, j, False, label)


def ring(n: int) -> Graph:
    """Cycle on ``n >= 3`` nodes: ``n`` edges, degree 2.

    Parameters
    ----------
    n : int

    Returns
    -------
    Graph
    """
    g = circulant(n, 1)
    return Graph(g.n_nodes, False, g.adjacency, f"ring(n={n})")


def _complete_adjacency(n: int) -> sp.csr_matrix:
    """The adjacency of K_n (``n (n - 1)`` stored ones, sorted indices), without an ``n x n``
    dense array."""
    cols = np.arange(n - 1)
    # row i lists 0 .. i-1 then i+1 .. n-1
    indices = (cols[None, :] + (cols[None, :] >= np.arange(n)[:, None])).ravel()
    indptr = np.arange(0, n * (n - 1) + 1, n - 1) if n > 1 else np.zeros(n + 1, dtype=int)
    a = sp.csr_matrix((np.ones(n * (n - 1)), indices, indptr), shape=(n, n))
    a.has_sorted_indices = True
    return a


class CompleteGraph(Graph):
    """The complete graph :math:`K_n`, whose ``n (n - 1)`` arcs are only listed when asked for.

    Sizes, degrees, neighbours and connectivity are answered from ``n`` in O(1) or O(n); the
    :attr:`adjacency` matrix (``n (n - 1)`` stored entries: 763 MiB at 10^4 nodes) is built on
    first access and kept. An algorithm that only draws pairs of nodes (DP-DDA's node sampling,
    :class:`rfed.networks.RandomGossip`) or that never reads the matrix runs on it in O(n)
    memory. Build it with :func:`complete`.

    Parameters
    ----------
    n_nodes : int
    name : str, optional
        Default ``"complete(n=N)"``.
    """

    def __init__(self, n_nodes: int, name: str | None = None):
        object.__setattr__(self, "n_nodes", int(n_nodes))
        object.__setattr__(self, "directed", False)
        object.__setattr__(self, "name", name or f"complete(n={int(n_nodes)})")

    @functools.cached_property
    def adjacency(self) -> sp.csr_matrix:  # type: ignore[override]
        """The ``n (n - 1)`` arcs as a sparse 0/1 matrix, built on first access."""
        return _complete_adjacency(self.n_nodes)

    @property
    def n_arcs(self) -> int:
        return self.n_nodes * (self.n_nodes - 1)

    @property
    def in_degree(self) -> np.ndarray:
        return np.full(self.n_nodes, self.n_nodes - 1, dtype=int)

    out_degree = in_degree

    @property
    def max_degree(self) -> int:
        return self.n_nodes - 1

    def in_neighbors(self, i: int) -> np.ndarray:
        nodes = np.arange(self.n_nodes)
        return nodes[nodes != i]

    def out_neighbors(self, i: int) -> np.ndarray:
        return self.in_neighbors(i)

    def is_complete(self) -> bool:
        return True

    def is_regular(self) -> bool:
        return True

    def unreachable_from(self, source: int = 0) -> np.ndarray:
        return np.array([], dtype=int)

    def is_connected(self) -> bool:
        return True

    def check_connected(self) -> Graph:
        return self

    def spanning_tree_roots(self) -> np.ndarray:
        return np.arange(self.n_nodes)


def complete(n: int) -> CompleteGraph:
    """Complete graph: ``n (n - 1) / 2`` edges, degree ``n - 1`` (its adjacency matrix is built
    on first use, see :class:`CompleteGraph`).

    Parameters
    ----------
    n : int
        Number of nodes, ``>= 2``.

    Returns
    -------
    CompleteGraph
    """
    n = _check_n(n, minimum=2)
    return CompleteGraph(n)


def complete_bipartite(n_left: int, n_right: int) -> Graph:
    """Complete bipartite graph K_{n_left, n_right} (left nodes first).

    ``n_left * n_right`` edges; left nodes have degree ``n_right`` and right nodes ``n_left``.

    Parameters
    ----------
    n_left, n_right : int
        Sizes of the two sides.

    Returns
    -------
    Graph
    """
    n_left = _check_n(n_left, "n_left")
    n_right = _check_n(n_right, "n_right")
    left = np.repeat(np.arange(n_left), n_right)
    right = n_left + np.tile(np.arange(n_right), n_left)
    return _from_pairs(
        n_left + n_right, left, right, False, f"complete_bipartite({n_left}, {n_right})"
    )


def two_hub_bipartite(n: int) -> Graph:
    """The "Bipar" topology of the CGA baseline code (DPDL reading (b), :ref:`dpdl-topologies`).

    Nodes 0 and 1 are hubs, each linked to every other node but not to each other; the
    ``n - 2`` leaves are linked only to the two hubs. ``2 (n - 2)`` edges.

    Parameters
    ----------
    n : int
        Number of nodes, ``>= 3``.

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=3)
    leaves = np.arange(2, n)
    src = np.concatenate([np.zeros(n - 2, dtype=int), np.ones(n - 2, dtype=int)])
    return _from_pairs(n, src, np.concatenate([leaves, leaves]), False, f"two_hub_bipartite(n={n})")


def dpdl_bipartite(n: int, reading: str = "complete") -> Graph:
    """DPDL's "bipartite" topology, in either reading of the paper (:ref:`dpdl-topologies`).

    Parameters
    ----------
    n : int
        Number of agents (even for ``reading="complete"``).
    reading : {"complete", "two_hub"}
        ``"complete"``: K_{n/2, n/2} (use with :func:`rfed.networks.uniform_weights`, giving
        ``w = 1 / (n/2 + 1)`` with self-loops). ``"two_hub"``: the CGA code's two-hub graph
        (use with :func:`rfed.networks.two_hub_weights`).

    Returns
    -------
    Graph
    """
    if reading == "complete":
        n = _check_n(n, minimum=2)
        if n % 2:
            raise ValueError(f"argument 'n' must be even for reading='complete', got {n}")
        g = complete_bipartite(n // 2, n // 2)
        return Graph(g.n_nodes, False, g.adjacency, f"dpdl_bipartite(n={n}, complete)")
    if reading == "two_hub":
        return two_hub_bipartite(n)
    raise ValueError(f"argument 'reading' must be 'complete' or 'two_hub', got {reading!r}")


def star(n: int) -> Graph:
    """Star: node 0 linked to nodes ``1 .. n-1``; ``n - 1`` edges.

    Parameters
    ----------
    n : int
        Number of nodes, ``>= 2``.

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=2)
    return _from_pairs(n, np.zeros(n - 1, dtype=int), np.arange(1, n), False, f"star(n={n})")


def exponential(n: int, directed: bool = False) -> Graph:
    """Exponential graph: node ``i`` sends to ``i + 2^k (mod n)``, ``k = 0 .. floor(log2(n-1))``.

    Directed: out-degree and in-degree ``floor(log2(n - 1)) + 1`` for every node. Undirected:
    the circulant graph with offsets ``2^k`` (see :func:`circulant` for its degree).

    Parameters
    ----------
    n : int
        Number of nodes, ``>= 3``.
    directed : bool

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=3)
    offsets = 2 ** np.arange(int(np.floor(np.log2(n - 1))) + 1)
    if not directed:
        g = circulant(n, offsets)
        return Graph(n, False, g.adjacency, f"exponential(n={n})")
    i = np.repeat(np.arange(n), offsets.size)
    return _from_pairs(n, i, (i + np.tile(offsets, n)) % n, True, f"exponential(n={n}, directed)")


def _pair_from_index(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode linear indices of the strict upper triangle (row-major) into pairs (i < j)."""

    def start(i):
        return i * (2 * n - i - 1) // 2

    # invert the quadratic row offset in floating point, then correct the rounding by one
    i = np.floor((2 * n - 1 - np.sqrt((2.0 * n - 1) ** 2 - 8.0 * idx)) / 2).astype(np.int64)
    i = np.clip(i, 0, n - 2)
    i = np.where(start(i) > idx, i - 1, i)
    i = np.where(start(i + 1) <= idx, i + 1, i)
    return i, idx - start(i) + i + 1


def erdos_renyi(
    n: int,
    p: float,
    rng: np.random.Generator | int,
    connected: bool = True,
    max_tries: int = 100,
) -> Graph:
    """Erdos-Renyi G(n, p): each of the ``n (n-1) / 2`` pairs is an edge with probability ``p``.

    Sampled in O(n + edges): the edge count is Binomial(n(n-1)/2, p), then that many distinct
    pairs are drawn uniformly (which is the same distribution).

    Parameters
    ----------
    n : int
        Number of nodes, ``>= 2``.
    p : float
        Edge probability in ``[0, 1]``.
    rng : numpy.random.Generator or int
    connected : bool
        Resample (up to ``max_tries`` times) until the graph is connected, i.e. sample G(n, p)
        conditioned on connectivity; ``ValueError`` if no draw is connected.
    max_tries : int

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=2)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"argument 'p' must be in [0, 1], got {p!r}")
    rng = as_generator(rng)
    n_pairs = n * (n - 1) // 2
    for _ in range(max_tries if connected else 1):
        m = int(rng.binomial(n_pairs, p))
        idx = rng.choice(n_pairs, size=m, replace=False)
        i, j = _pair_from_index(idx.astype(np.int64), n)
        g = _from_pairs(n, i, j, False, f"erdos_renyi(n={n}, p={p:g})")
        if not connected or g.is_connected():
            return g
    raise ValueError(
        f"erdos_renyi: no connected graph in {max_tries} draws with n = {n}, p = {p:g} "
        f"(connectivity needs p well above log(n)/n = {np.log(n) / n:.3g})"
    )


def random_regular(
    n: int, d: int, rng: np.random.Generator | int, connected: bool = True, max_tries: int = 100
) -> Graph:
    """Random ``d``-regular simple graph (configuration model, repaired by switchings).

    The ``n d`` half-edges are paired uniformly at random; self-loops and repeated edges are
    then removed by double-edge switchings with random other edges. The result is exactly
    ``d``-regular and simple, approximately (not exactly) uniform over d-regular graphs; it has
    ``n d / 2`` edges.

    Parameters
    ----------
    n, d : int
        ``0 < d < n`` and ``n d`` even.
    rng : numpy.random.Generator or int
    connected : bool
        Resample until connected (d >= 3 random regular graphs are connected w.h.p.).
    max_tries : int
        Draws before ``ValueError`` (a draw is also repeated when its repair stalls, which can
        happen for ``d`` close to ``n``).

    Returns
    -------
    Graph
    """
    n = _check_n(n, minimum=2)
    d = _check_n(d, "d")
    if d >= n or (n * d) % 2:
        raise ValueError(f"random_regular: need 0 < d < n and n*d even, got n = {n}, d = {d}")
    rng = as_generator(rng)
    for _ in range(max_tries):
        g = _random_regular_once(n, d, rng)
        if g is not None and (not connected or g.is_connected()):
            return g
    raise ValueError(
        f"random_regular: no {'connected ' if connected else ''}simple graph in {max_tries} "
        f"draws (n={n}, d={d})"
    )


def _random_regular_once(n: int, d: int, rng: np.random.Generator) -> Graph | None:
    """One configuration-model draw repaired by switchings; ``None`` if the repair stalls."""
    stubs = rng.permutation(np.repeat(np.arange(n), d))
    u, v = stubs[0::2].copy(), stubs[1::2].copy()
    m = u.size

    def key(a, b):
        return np.minimum(a, b) * n + np.maximum(a, b)

    keys = key(u, v)
    count: dict[int, int] = {}
    for k in keys.tolist():
        count[k] = count.get(k, 0) + 1

    def is_bad(e: int) -> bool:
        return u[e] == v[e] or count[int(keys[e])] > 1

    bad = [e for e in range(m) if is_bad(e)]
    # A switching (u,v),(x,y) -> (u,x),(v,y) keeps every degree; about (d^2 - 1)/4 bad edges
    # are expected, so this loop is short.
    guard = 0
    while bad:
        guard += 1
        if guard > 100 * m + 1000:
            return None
        e = bad[-1]
        if not is_bad(e):
            bad.pop()
            continue
        f = int(rng.integers(m))
        if f == e:
            continue
        if rng.random() < 0.5:
            a, b = u[f], v[f]
        else:
            a, b = v[f], u[f]
        new1, new2 = key(u[e], a), key(v[e], b)
        if (
            u[e] == a
            or v[e] == b
            or new1 == new2
            or count.get(int(new1), 0)
            or count.get(int(new2), 0)
        ):
            continue
        for old in (int(keys[e]), int(keys[f])):
            count[old] -= 1
        u[e], v[e], u[f], v[f] = u[e], a, v[e], b
        keys[e], keys[f] = new1, new2
        count[int(new1)] = 1
        count[int(new2)] = 1
        # the two new edges are simple and new, so no edge becomes bad
        bad.pop()
    return _from_pairs(n, u, v, False, f"random_regular(n={n}, d={d})")


#: DP-DGT's IEEE 14-bus communication digraph as printed (Sec. 6; :ref:`dpdgt-graph`):
#: pairs ``(i, j)`` of 1-based bus numbers, read with the paper's convention ("Graph Theory")
#: as the arc ``j -> i`` (bus ``i`` pulls from bus ``j``). 24 + 11 = 35 arcs.
IEEE14_EDGES: tuple[tuple[int, int], ...] = tuple(
    [(i, i + 1) for i in range(1, 13)]
    + [(i, i + 2) for i in range(1, 13)]
    + [(13, 14), (13, 1), (14, 1), (1, 7), (2, 8), (3, 2), (3, 9), (4, 10), (5, 2), (5, 11)]
    + [(6, 12)]
)


def ieee14_digraph(convention: str = "paper") -> Graph:
    """The 14-agent communication digraph of DP-DGT's IEEE 14-bus experiment.

    One agent per bus (all 14 buses: the printed node set omits buses 7 and 12, which the
    printed edges use; :ref:`dpdgt-graph`); bus ``b`` is node ``b - 1``. 35 arcs.

    Parameters
    ----------
    convention : {"paper", "reversed"}
        ``"paper"`` reads each printed pair ``(i, j)`` as the arc ``j -> i`` (the convention of
        the paper's notation paragraph "Graph Theory", which its simulation does not restate;
        :ref:`dpdgt-graph`): in-degrees of buses 1..14 are
        ``[3,3,4,3,4,3,2,2,2,2,2,2,2,1]`` and out-degrees ``[2,3,2,2,2,2,3,3,3,3,3,3,2,2]``.
        ``"reversed"`` reads it as ``i -> j`` (the results differ).

    Returns
    -------
    Graph
    """
    e = np.array(IEEE14_EDGES) - 1
    if convention == "paper":
        src, dst = e[:, 1], e[:, 0]
    elif convention == "reversed":
        src, dst = e[:, 0], e[:, 1]
    else:
        raise ValueError(f"argument 'convention' must be 'paper' or 'reversed', got {convention!r}")
    return _from_pairs(14, src, dst, True, f"ieee14_digraph({convention})")
