"""Mixing (weight) matrices, their validation, and the spectral constants the papers' theorems use.

Every matrix is a ``scipy.sparse.csr_matrix`` of shape ``(n, n)`` with ``W[i, j]`` the weight
agent ``i`` puts on agent ``j``'s value (row ``i`` is what ``i`` receives), supported on the
graph's arcs plus the diagonal, so one mixing round costs O(edges).

Constants, named as the papers name them:

=========================  ======================================================================
DO-ADP, Assumption 3       ``rho = 1 - |lambda_2(W)|`` (spectral gap), ``phi = ||I - W||_2``
DPDL, Assumption 3         ``rho = max(|lambda_2|, |lambda_N|)^2`` (so ``sqrt(rho) = |lambda_2|``),
                           ``w_min = min_{i, j in N_i} w_ij``,
                           ``S0 = sum_i sum_{j in N_i} 1/w_ij^2``
DP-DDA, Assumption 2 (4)   ``beta = sqrt(rho(E[W^T W] - 11^T/n))`` for random gossip matrices
DP-DGT, Sec. 4             Perron vectors ``pi_R`` (left, of R), ``pi_C`` (right, of C)
                           (Lemma 4.5); ``rho(R_phi - 1 pi_R^T)``, ``rho(C_gamma - pi_C 1^T)``,
                           ``q_R``, ``q_C`` (Lemma 4.6), ``pi_C^T pi_R`` (Theorem 4.9)
=========================  ======================================================================

The papers give no weights for their experiments; the choices made here, and why, are in the
paper readings of the documentation (:ref:`doadp-mixing-matrix`, :ref:`dpdl-topologies`,
:ref:`dpdda-node-sampling`, :ref:`dpdgt-weights`).

References
----------
* DO-ADP: Wei Huo, Changxin Liu, Kemi Ding, Karl Henrik Johansson and Ling Shi. Decentralized
  Optimization with Amplified Privacy via Efficient Communication. arXiv:2506.07102, 2025.
* DPDL: Yunsheng Yuan, Xue Xiao, Lina Wang and Feng Li. DPDL: Towards Differential Privacy
  Preservation in Decentralized Stochastic Learning on Non-IID Data. arXiv:2606.04399, 2026.
* DP-DDA: Changxin Liu, Karl H. Johansson and Yang Shi. Distributed Empirical Risk Minimization
  With Differential Privacy. Automatica 162, 111514, 2024. arXiv:2302.10520.
* DP-DGT: Wei Huo, Xiaomeng Chen, Lingying Huang, Karl Henrik Johansson and Ling Shi.
  Differentially Private Dual Gradient Tracking for Distributed Resource Allocation. Automatica
  182, 112521, 2025. arXiv:2403.18275.
* Lin Xiao, Stephen Boyd and Seung-Jean Kim. Distributed Average Consensus with
  Least-Mean-Square Deviation. Journal of Parallel and Distributed Computing 67(1), 2007.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from math import comb

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from rfed.manifolds.base import as_generator
from rfed.networks.comm import _matching_weights
from rfed.networks.graphs import Graph, _pair_from_index

__all__ = [
    "metropolis_hastings_weights",
    "laplacian_weights",
    "uniform_weights",
    "lazy_weights",
    "row_stochastic_weights",
    "column_stochastic_weights",
    "two_hub_weights",
    "check_nonnegative",
    "check_symmetric",
    "check_row_stochastic",
    "check_column_stochastic",
    "check_doubly_stochastic",
    "check_support",
    "lambda2_modulus",
    "spectral_gap",
    "second_singular_value",
    "identity_gap_norm",
    "DOADPConstants",
    "doadp_constants",
    "DPDLConstants",
    "dpdl_constants",
    "left_perron_vector",
    "right_perron_vector",
    "PushPullConstants",
    "push_pull_constants",
    "GossipRound",
    "RandomGossip",
    "greedy_matching",
    "dda_beta",
]

#: Default tolerance of the stochasticity / symmetry checks.
ATOL = 1e-10
#: Above this size the symmetric spectral quantities use iterative (Lanczos) solvers.
DENSE_LIMIT = 2000


def _csr(w, name: str = "W") -> sp.csr_matrix:
    if sp.issparse(w):
        m = sp.csr_matrix(w, dtype=float)
    else:
        arr = np.asarray(w, dtype=float)
        if arr.ndim != 2:
            raise ValueError(f"argument '{name}' must be a 2-d matrix, got shape {arr.shape}")
        m = sp.csr_matrix(arr)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"argument '{name}' must be square, got shape {m.shape}")
    if not np.all(np.isfinite(m.data)):
        raise ValueError(f"argument '{name}' has non-finite entries")
    m.sort_indices()
    return m


def _check_graph(graph, name: str = "graph") -> Graph:
    if not isinstance(graph, Graph):
        raise TypeError(
            f"argument '{name}' must be an rfed.networks.Graph, got {type(graph).__name__}"
        )
    return graph


def _require_undirected(graph: Graph, what: str) -> None:
    if graph.directed:
        raise ValueError(
            f"{what} needs an undirected graph, got {graph!r}; for a digraph use "
            "row_stochastic_weights / column_stochastic_weights"
        )


# ---------------------------------------------------------------------- constructors
def metropolis_hastings_weights(graph: Graph) -> sp.csr_matrix:
    r"""Metropolis-Hastings weights: symmetric, doubly stochastic, supported on the graph.

    :math:`w_{ij} = 1 / (1 + \max(d_i, d_j))` on edges, :math:`w_{ii} = 1 - \sum_{j\ne i} w_{ij}`
    (Xiao, Boyd & Kim 2007, the Metropolis weights DP-DDA's experiments use, Sec. 5;
    :ref:`dpdda-node-sampling`).
    On a ``d``-regular graph every weight is ``1 / (d + 1)``.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``

    Parameters
    ----------
    graph : Graph
        Undirected.
    """
    graph = _check_graph(graph)
    _require_undirected(graph, "metropolis_hastings_weights")
    a = graph.adjacency.tocoo()
    deg = graph.degree.astype(float)
    w = 1.0 / (1.0 + np.maximum(deg[a.row], deg[a.col]))
    off = sp.csr_matrix((w, (a.row, a.col)), shape=a.shape)
    diag = 1.0 - np.asarray(off.sum(axis=1)).ravel()
    return _csr(off + sp.diags(diag))


def laplacian_weights(graph: Graph, alpha: float | None = None) -> sp.csr_matrix:
    r"""Laplacian-based weights :math:`W = I - \alpha L_G` (symmetric, doubly stochastic).

    DO-ADP's "classical choice" :math:`W = I - L_G/\iota` with :math:`\iota \in (d_{max}, \infty)`
    (DO-ADP, Assumption 3), i.e. :math:`\alpha = 1/\iota \in (0, 1/d_{max})`, which keeps every
    weight in (0, 1) and the diagonal positive.

    Parameters
    ----------
    graph : Graph
        Undirected.
    alpha : float, optional
        Default ``1 / (d_max + 1)`` (:math:`\iota = d_{max} + 1`: DO-ADP does not give the W of its
        experiments, :ref:`doadp-mixing-matrix`; on a regular graph this is the uniform weight
        ``1/(d+1)`` on self and each neighbour).

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    graph = _check_graph(graph)
    _require_undirected(graph, "laplacian_weights")
    dmax = graph.max_degree
    if alpha is None:
        alpha = 1.0 / (dmax + 1.0)
    if not (0.0 < alpha and (dmax == 0 or alpha < 1.0 / dmax)):
        raise ValueError(
            f"argument 'alpha' must be in (0, 1/d_max) = (0, {1.0 / max(dmax, 1):.6g}) so that "
            f"every weight lies in (0, 1) (iota = 1/alpha > d_max = {dmax}), got {alpha!r}"
        )
    return _csr(sp.identity(graph.n_nodes) - alpha * graph.laplacian())


def uniform_weights(graph: Graph) -> sp.csr_matrix:
    """Uniform weights over closed neighbourhoods, ``1 / (d + 1)``, on a ``d``-regular graph.

    The natural W of DPDL's experiments, which the paper does not give
    (:ref:`dpdl-topologies`): complete graph ``1/N``, ring ``1/3``,
    K_{N/2,N/2} ``1/(N/2 + 1)``. Only regular graphs make these weights doubly stochastic, so
    an irregular graph raises ``ValueError`` (use :func:`metropolis_hastings_weights`).

    Parameters
    ----------
    graph : Graph
        Undirected and regular.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    graph = _check_graph(graph)
    _require_undirected(graph, "uniform_weights")
    deg = graph.degree
    if not graph.is_regular():
        lo, hi = int(np.argmin(deg)), int(np.argmax(deg))
        raise ValueError(
            f"uniform_weights needs a regular graph: node {lo} has degree {deg[lo]} but node "
            f"{hi} has degree {deg[hi]}; use metropolis_hastings_weights"
        )
    d = int(deg[0]) if deg.size else 0
    return _csr((graph.adjacency + sp.identity(graph.n_nodes)) / (d + 1.0))


def lazy_weights(w, mix: float = 0.5) -> sp.csr_matrix:
    r"""Lazy matrix :math:`(1 - \text{mix}) I + \text{mix}\, W`.

    DP-DGT's :math:`C_\gamma = (1-\gamma) I + \gamma C` and :math:`R_\phi = (1-\phi) I + \phi R`
    (DP-DGT, Sec. 4, defined with the compact form (16)-(17)); ``mix = 1/2`` is the usual lazy
    walk. Keeps row/column stochasticity and the Perron vectors; moves every eigenvalue
    ``lambda`` to ``1 - mix + mix lambda``.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    mix : float
        In ``(0, 1]``.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    if not 0.0 < mix <= 1.0:
        raise ValueError(f"argument 'mix' must be in (0, 1], got {mix!r}")
    w = _csr(w)
    return _csr((1.0 - mix) * sp.identity(w.shape[0]) + mix * w)


def row_stochastic_weights(graph: Graph) -> sp.csr_matrix:
    r"""Row-stochastic R (pull): :math:`R_{ij} = 1 / (1 + |N^{in}_i|)` for ``j`` in
    :math:`N^{in}_i \cup \{i\}`.

    DP-DGT's R built from the digraph with self-loops and uniform weights (the paper gives no
    weights for its simulation; :ref:`dpdgt-weights`): the receiver weights what it pulls, so
    it needs only its own in-degree.

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    graph = _check_graph(graph)
    scale = 1.0 / (1.0 + graph.in_degree)
    return _csr(sp.diags(scale) @ (graph.adjacency + sp.identity(graph.n_nodes)))


def column_stochastic_weights(graph: Graph) -> sp.csr_matrix:
    r"""Column-stochastic C (push): :math:`C_{li} = 1 / (1 + |N^{out}_i|)` for ``l`` in
    :math:`N^{out}_i \cup \{i\}`.

    DP-DGT's C (:ref:`dpdgt-weights`): the sender splits its value over itself and its
    out-neighbours, so it needs only its own out-degree.

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    graph = _check_graph(graph)
    scale = 1.0 / (1.0 + graph.out_degree)
    return _csr((graph.adjacency + sp.identity(graph.n_nodes)) @ sp.diags(scale))


def two_hub_weights(graph: Graph) -> sp.csr_matrix:
    r"""The CGA code's weights on its two-hub "bipartite" graph (DPDL reading (b)).

    The second reading of DPDL's "bipartite" topology (:ref:`dpdl-topologies`).

    With :math:`a = \lfloor 100/(N-1) \rfloor / 100`: a leaf keeps ``1 - 2a`` and puts ``a`` on
    each hub; a hub puts ``a`` on every leaf, ``0`` on the other hub, and keeps
    ``1 - (N-2) a``. Symmetric and doubly stochastic.

    Parameters
    ----------
    graph : Graph
        Must be :func:`rfed.networks.two_hub_bipartite` (hubs 0 and 1).

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    graph = _check_graph(graph)
    n = graph.n_nodes
    if (
        graph.directed
        or n < 3
        or not np.array_equal(graph.degree, np.concatenate([[n - 2, n - 2], np.full(n - 2, 2)]))
        or graph.adjacency[0, 1] != 0
    ):
        raise ValueError(f"two_hub_weights needs two_hub_bipartite(n), got {graph!r}")
    a = np.floor(100.0 / (n - 1)) / 100.0
    w = graph.adjacency * a
    diag = np.full(n, 1.0 - 2.0 * a)
    diag[:2] = 1.0 - (n - 2) * a
    return _csr(w + sp.diags(diag))


# ---------------------------------------------------------------------- validation
def _worst(values: np.ndarray, bad: np.ndarray) -> int:
    idx = np.flatnonzero(bad)
    return int(idx[np.argmax(np.abs(values[idx] - 1.0))])


def check_nonnegative(w, name: str = "W") -> sp.csr_matrix:
    """Return ``w`` as CSR, or raise ``ValueError`` naming the most negative entry.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    name : str
        The matrix's name in the error message.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = _csr(w, name)
    if m.nnz and m.data.min() < 0:
        coo = m.tocoo()
        k = int(np.argmin(coo.data))
        raise ValueError(
            f"argument '{name}' has a negative entry: {name}[{coo.row[k]}, {coo.col[k]}] = "
            f"{coo.data[k]:.6g} ({int(np.sum(coo.data < 0))} negative entries)"
        )
    return m


def check_symmetric(w, name: str = "W", atol: float = ATOL) -> sp.csr_matrix:
    """Return ``w`` as CSR, or raise ``ValueError`` naming the most asymmetric pair.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    name : str
        The matrix's name in the error message.
    atol : float

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = _csr(w, name)
    diff = (m - m.T).tocoo()
    if diff.nnz and np.max(np.abs(diff.data)) > atol:
        k = int(np.argmax(np.abs(diff.data)))
        i, j = diff.row[k], diff.col[k]
        raise ValueError(
            f"argument '{name}' is not symmetric: {name}[{i}, {j}] = {m[i, j]:.6g} but "
            f"{name}[{j}, {i}] = {m[j, i]:.6g} (tolerance {atol:g})"
        )
    return m


def _check_sums(m: sp.csr_matrix, axis: int, name: str, atol: float) -> None:
    sums = np.asarray(m.sum(axis=axis)).ravel()
    bad = np.abs(sums - 1.0) > atol
    if np.any(bad):
        k = _worst(sums, bad)
        kind = "row" if axis == 1 else "column"
        raise ValueError(
            f"argument '{name}' is not {kind}-stochastic: {kind} {k} sums to {float(sums[k]):.12g} "
            f"(expected 1 within {atol:g}; {int(bad.sum())} {kind}(s) off)"
        )


def check_row_stochastic(w, name: str = "W", atol: float = ATOL) -> sp.csr_matrix:
    """Return ``w`` as CSR, or raise ``ValueError``: negative entry, or the row whose sum is off.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    name : str
        The matrix's name in the error message.
    atol : float
        Tolerance on the sums.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = check_nonnegative(w, name)
    _check_sums(m, 1, name, atol)
    return m


def check_column_stochastic(w, name: str = "W", atol: float = ATOL) -> sp.csr_matrix:
    """Return ``w`` as CSR, or raise ``ValueError``: negative entry, or the column whose sum is
    off.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    name : str
        The matrix's name in the error message.
    atol : float
        Tolerance on the sums.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = check_nonnegative(w, name)
    _check_sums(m, 0, name, atol)
    return m


def check_doubly_stochastic(w, name: str = "W", atol: float = ATOL) -> sp.csr_matrix:
    """Return ``w`` as CSR, or raise ``ValueError`` naming the offending row or column.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    name : str
        The matrix's name in the error message.
    atol : float
        Tolerance on the sums.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = check_row_stochastic(w, name, atol)
    _check_sums(m, 0, name, atol)
    return m


def check_support(w, graph: Graph, name: str = "W") -> sp.csr_matrix:
    """Raise ``ValueError`` if ``w`` has a non-zero weight off the graph's arcs and diagonal.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``
    graph : Graph
    name : str
        The matrix's name in the error message.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    m = _csr(w, name)
    graph = _check_graph(graph)
    if m.shape != (graph.n_nodes, graph.n_nodes):
        raise ValueError(f"argument '{name}' has shape {m.shape}, graph has {graph.n_nodes} nodes")
    allowed = graph.adjacency + sp.identity(graph.n_nodes)
    off = m.multiply(m != 0) - m.multiply(allowed != 0)
    off = sp.coo_matrix(off)
    off.eliminate_zeros()
    if off.nnz:
        i, j = int(off.row[0]), int(off.col[0])
        raise ValueError(
            f"argument '{name}' puts weight {m[i, j]:.6g} on {name}[{i}, {j}] but node {i} does "
            f"not receive from node {j} in {graph!r} ({off.nnz} such entries)"
        )
    return m


# ---------------------------------------------------------------------- spectra
def _is_symmetric(m: sp.csr_matrix, atol: float = ATOL) -> bool:
    d = (m - m.T).tocoo()
    return d.nnz == 0 or float(np.max(np.abs(d.data))) <= atol


def _deflated_operator(m: sp.csr_matrix) -> spla.LinearOperator:
    """``x -> (W - 11^T/n) x`` for a symmetric doubly stochastic W, never forming 11^T."""
    n = m.shape[0]

    def mv(x):
        x = np.asarray(x).reshape(n, -1)
        return (m @ x - x.mean(axis=0, keepdims=True)).squeeze()

    return spla.LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float)


def _eigvals(m: sp.csr_matrix) -> np.ndarray:
    """All eigenvalues (dense), sorted by decreasing modulus."""
    if m.shape[0] > DENSE_LIMIT:
        raise ValueError(
            f"matrix of size {m.shape[0]} > {DENSE_LIMIT}: non-symmetric spectra are computed "
            "densely; raise rfed.networks.mixing.DENSE_LIMIT if memory allows"
        )
    dense = m.toarray()
    ev = np.linalg.eigvalsh(dense) if _is_symmetric(m) else np.linalg.eigvals(dense)
    return ev[np.argsort(-np.abs(ev), kind="stable")]


def lambda2_modulus(w) -> float:
    r""":math:`|\lambda_2(W)|`: the second largest eigenvalue modulus of a stochastic matrix.

    For symmetric doubly stochastic W this is :math:`\|W - 11^T/n\|_2 =
    \max(|\lambda_2|, |\lambda_n|)` (computed by Lanczos on the deflated operator when
    ``n > DENSE_LIMIT``). For a non-symmetric matrix, the second largest modulus of its
    eigenvalues (dense).

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    float
    """
    m = _csr(w)
    n = m.shape[0]
    if n < 2:
        return 0.0
    if _is_symmetric(m) and n > DENSE_LIMIT:
        check_doubly_stochastic(m)
        val = spla.eigsh(_deflated_operator(m), k=1, which="LM", return_eigenvectors=False)
        return float(np.abs(val[0]))
    return float(np.abs(_eigvals(m)[1]))


def spectral_gap(w) -> float:
    r"""Spectral gap :math:`1 - |\lambda_2(W)|` (DO-ADP's :math:`\rho`, Assumption 3).

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    float
    """
    return 1.0 - lambda2_modulus(w)


def second_singular_value(w) -> float:
    r"""Second largest singular value :math:`\sigma_2(W)`.

    For doubly stochastic W the largest is 1 (vector :math:`\mathbf 1`) and
    :math:`\sigma_2 = \|W - 11^T/n\|_2`, the per-round contraction factor of the consensus error
    :math:`\|X - \bar X\|_F`. Equals :math:`|\lambda_2|` for symmetric W.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    float
    """
    m = _csr(w)
    n = m.shape[0]
    if n < 2:
        return 0.0
    if _is_symmetric(m):
        return lambda2_modulus(m)
    if n > DENSE_LIMIT:
        vals = spla.svds(m, k=2, return_singular_vectors=False)
        return float(np.sort(vals)[0])
    return float(scipy.linalg.svdvals(m.toarray())[1])


def identity_gap_norm(w) -> float:
    r""":math:`\phi = \|I - W\|_2` (DO-ADP, Assumption 3); in [0, 2] for symmetric stochastic
    W.

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    float
    """
    m = _csr(w)
    d = sp.identity(m.shape[0]) - m
    if m.shape[0] > DENSE_LIMIT and _is_symmetric(m):
        return float(np.abs(spla.eigsh(d, k=1, which="LM", return_eigenvectors=False)[0]))
    return float(scipy.linalg.svdvals(d.toarray())[0])


@dataclass(frozen=True)
class DOADPConstants:
    """Spectral constants of DO-ADP's Theorem 2 (W as in its Assumption 3).

    Attributes
    ----------
    lambda_2 : float
        :math:`|\\lambda_2(W)|`.
    rho : float
        Spectral gap :math:`1 - |\\lambda_2(W)|`.
    phi : float
        :math:`\\|I - W\\|_2`.
    """

    lambda_2: float
    rho: float
    phi: float


def doadp_constants(w) -> DOADPConstants:
    """DO-ADP's ``rho`` and ``phi`` for a symmetric doubly stochastic W (checked).

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    DOADPConstants
    """
    m = check_symmetric(check_doubly_stochastic(w))
    lam = lambda2_modulus(m)
    return DOADPConstants(lambda_2=lam, rho=1.0 - lam, phi=identity_gap_norm(m))


@dataclass(frozen=True)
class DPDLConstants:
    """Constants of DPDL's Assumption 3 and Theorem 2 (:ref:`dpdl-topologies`).

    Attributes
    ----------
    rho : float
        :math:`\\max(|\\lambda_2|, |\\lambda_N|)^2`, the smallest admissible ``rho`` in
        Assumption 3 (so that the bound :math:`\\sqrt\\rho` is tight).
    w_min : float
        :math:`\\min_{i, j \\in N_i} w_{ij}` (``N_i`` includes ``i``).
    S0 : float
        :math:`\\sum_i \\sum_{j \\in N_i} 1 / w_{ij}^2 \\le N^2 / w_{min}^2`.
    """

    rho: float
    w_min: float
    S0: float


def dpdl_constants(w) -> DPDLConstants:
    """DPDL's ``rho``, ``w_min`` and ``S0`` for a symmetric doubly stochastic W (checked).

    Parameters
    ----------
    w : array_like or scipy.sparse matrix, shape ``(n, n)``

    Returns
    -------
    DPDLConstants
    """
    m = check_symmetric(check_doubly_stochastic(w))
    if np.any(m.diagonal() <= 0):
        i = int(np.flatnonzero(m.diagonal() <= 0)[0])
        raise ValueError(f"DPDL needs w_ii > 0 (self in N_i by default); W[{i}, {i}] = {m[i, i]}")
    pos = m.data[m.data > 0]
    return DPDLConstants(
        rho=lambda2_modulus(m) ** 2, w_min=float(pos.min()), S0=float(np.sum(1.0 / pos**2))
    )


def _perron(m: sp.csr_matrix, name: str) -> np.ndarray:
    """Solve ``(M - I) v = 0``, ``1^T v = 1`` with one equation replaced by the normalization."""
    n = m.shape[0]
    a = (m - sp.identity(n)).tolil()
    a[n - 1, :] = np.ones(n)
    b = np.zeros(n)
    b[-1] = 1.0
    a = a.tocsc()
    with warnings.catch_warnings():
        # a singular system (eigenvalue 1 not simple) is reported below as a ValueError
        warnings.simplefilter("ignore", spla.MatrixRankWarning)
        v = spla.spsolve(a, b)
    if not np.all(np.isfinite(v)) or np.linalg.norm(m @ v - v) > 1e-8 * max(1.0, np.abs(v).max()):
        raise ValueError(f"{name}: the eigenvalue 1 is not simple (the graph has no spanning tree)")
    return np.where(np.abs(v) < 1e-15, 0.0, v)


def left_perron_vector(r) -> np.ndarray:
    r"""Left Perron vector of a row-stochastic R: :math:`\pi_R^T R = \pi_R^T`,
    :math:`\pi_R^T \mathbf 1 = 1` (DP-DGT, Lemma 4.5). Shape ``(n,)``.

    Parameters
    ----------
    r : array_like or scipy.sparse matrix, shape ``(n, n)``
        Row-stochastic.

    Returns
    -------
    ndarray, shape ``(n,)``
    """
    m = check_row_stochastic(r, "R")
    return _perron(_csr(m.T), "R")


def right_perron_vector(c) -> np.ndarray:
    r"""Right Perron vector of a column-stochastic C: :math:`C \pi_C = \pi_C`,
    :math:`\mathbf 1^T \pi_C = 1` (DP-DGT, Lemma 4.5). Shape ``(n,)``.

    Parameters
    ----------
    c : array_like or scipy.sparse matrix, shape ``(n, n)``
        Column-stochastic.

    Returns
    -------
    ndarray, shape ``(n,)``
    """
    m = check_column_stochastic(c, "C")
    return _perron(m, "C")


@dataclass(frozen=True)
class PushPullConstants:
    """Spectral constants of DP-DGT's push-pull analysis (Sec. 4: Lemmas 4.5-4.6, Theorem 4.9).

    Attributes
    ----------
    pi_R, pi_C : ndarray, shape ``(n,)``
        Left Perron vector of R, right Perron vector of C (each sums to one).
    rho_R, rho_C : float
        Spectral radii :math:`\\rho(R_\\phi - \\mathbf 1 \\pi_R^T)` and
        :math:`\\rho(C_\\gamma - \\pi_C \\mathbf 1^T)`: the infima of the norms
        :math:`\\sigma_R, \\sigma_C` of Lemma 4.6.
    q_R, q_C : float
        :math:`(1 + \\sigma^2)/2` evaluated at :math:`\\sigma = \\rho` (the limit of
        admissible norms; any admissible :math:`q` is larger). Step decays must satisfy
        :math:`q > q_C`: Theorem 4.9 is printed with :math:`\\ge` where its proof uses
        :math:`\\le`, so the steps must not decay faster than :math:`\\lambda^k` for some
        :math:`\\lambda \\in (q_C, 1)` (:ref:`dpdgt-conditions`).
    pi_C_dot_pi_R : float
        :math:`\\pi_C^T \\pi_R` (enters the step-size bound of Theorem 4.9).
    """

    pi_R: np.ndarray
    pi_C: np.ndarray
    rho_R: float
    rho_C: float
    q_R: float
    q_C: float
    pi_C_dot_pi_R: float


def _deflated_radius(m: sp.csr_matrix, left: np.ndarray, right: np.ndarray) -> float:
    r"""Spectral radius of :math:`M - \ell r^T` (``left`` :math:`\ell`, ``right`` :math:`r`):
    dense eigenvalues up to :data:`DENSE_LIMIT` nodes; above, ARPACK on the sparse matrix and
    the rank-one term applied as an operator (O(nnz) memory, no ``n x n`` array)."""
    n = m.shape[0]
    if n <= DENSE_LIMIT:
        return float(np.max(np.abs(np.linalg.eigvals(m.toarray() - np.outer(left, right)))))
    op = spla.LinearOperator((n, n), dtype=float,
                             matvec=lambda v: m @ v - left * (right @ v))
    try:
        # several eigenvalues: the largest in modulus often come as a complex conjugate pair
        # (of equal modulus), which a single-eigenvalue iteration does not separate
        vals = spla.eigs(op, k=6, ncv=32, which="LM", return_eigenvectors=False, tol=1e-10,
                         maxiter=100)
    except spla.ArpackNoConvergence as exc:
        raise ValueError(
            f"the spectral radius of a {n}-node deflated mixing matrix did not converge "
            f"({exc}): its largest eigenvalues are too close in modulus for the iterative solver"
        ) from None
    return float(np.max(np.abs(vals)))


def push_pull_constants(r, c, gamma: float, phi: float) -> PushPullConstants:
    r"""DP-DGT's constants for row-stochastic R, column-stochastic C and lazy factors gamma, phi.

    :math:`R_\phi = (1-\phi) I + \phi R`, :math:`C_\gamma = (1-\gamma) I + \gamma C`
    (Huo, Chen, Huang, Johansson, Shi, arXiv:2403.18275, Section 4). On the IEEE 14-bus digraph
    with uniform weights, gamma = 0.8 and phi = 0.7: rho_C = 0.804, rho_R = 0.853,
    pi_C^T pi_R = 0.0726. Up to :data:`DENSE_LIMIT` nodes the spectral radii are dense
    eigenvalues; above, they come from ARPACK (``scipy.sparse.linalg.eigs``) on the sparse
    matrices with the rank-one deflation applied as an operator: O(n + nnz) memory. ARPACK
    converges only when the largest moduli are separated from the rest, which large digraphs
    with little expansion (directed rings) or random digraphs (whose spectrum fills a disk)
    do not give: it then stops after a bounded number of restarts with a ``ValueError``.

    Parameters
    ----------
    r : array_like or scipy.sparse matrix, shape ``(n, n)``
        Row-stochastic R.
    c : array_like or scipy.sparse matrix, shape ``(n, n)``
        Column-stochastic C.
    gamma, phi : float
        The lazy factors, in ``(0, 1]``.

    Returns
    -------
    PushPullConstants
    """
    rm = check_row_stochastic(r, "R")
    cm = check_column_stochastic(c, "C")
    if rm.shape != cm.shape:
        raise ValueError(f"R has shape {rm.shape} but C has shape {cm.shape}")
    pi_r = left_perron_vector(rm)
    pi_c = right_perron_vector(cm)
    n = rm.shape[0]
    rho_r = _deflated_radius(lazy_weights(rm, phi), np.ones(n), pi_r)
    rho_c = _deflated_radius(lazy_weights(cm, gamma), pi_c, np.ones(n))
    return PushPullConstants(
        pi_R=pi_r,
        pi_C=pi_c,
        rho_R=rho_r,
        rho_C=rho_c,
        q_R=(1.0 + rho_r**2) / 2.0,
        q_C=(1.0 + rho_c**2) / 2.0,
        pi_C_dot_pi_R=float(pi_c @ pi_r),
    )


# ---------------------------------------------------------------------- DP-DDA random gossip
class GossipRound:
    """One random gossip round.

    Attributes
    ----------
    active : ndarray of bool, shape ``(n,)``
        DP-DDA's :math:`\\eta_i^{(t)}`: the nodes that compute, release and mix this round.
    pairs : ndarray of int, shape ``(n_sampled_edges, 2)``
        The sampled edges.
    matching : bool
        The sampled edges are pairwise disjoint, so :math:`W^{(t)}` puts weight 1/2 on each
        pair: mix with :meth:`rfed.networks.Communicator.mix_pairs`, which needs no matrix.
    weights : scipy.sparse.csr_matrix, shape ``(n, n)``
        :math:`W^{(t)}`: symmetric, doubly stochastic, identity rows for inactive nodes. A
        matching's is built on first access (a round mixed by ``mix_pairs`` never builds it).

    Parameters
    ----------
    active : ndarray of bool, shape ``(n,)``
    pairs : ndarray of int, shape ``(n_sampled_edges, 2)``
    weights : scipy.sparse.csr_matrix, optional
        :math:`W^{(t)}` of sampled edges that are not a matching; ``None`` when ``pairs`` is a
        matching (its ``W`` is built on first access).
    """

    __slots__ = ("_active", "_pairs", "_weights")

    def __init__(self, active: np.ndarray, pairs: np.ndarray,
                 weights: sp.csr_matrix | None = None):
        # weights None: ``pairs`` is a matching (the caller's guarantee, as RandomGossip's);
        # given: any sampled edges, with their Metropolis-Hastings W^(t)
        self._active = active
        self._pairs = pairs
        self._weights = weights

    @property
    def active(self) -> np.ndarray:
        """The nodes active this round, shape ``(n,)``."""
        return self._active

    @property
    def pairs(self) -> np.ndarray:
        """The sampled edges, shape ``(n_sampled_edges, 2)``."""
        return self._pairs

    @property
    def matching(self) -> bool:
        """Whether the sampled edges are pairwise disjoint."""
        return self._weights is None

    @property
    def weights(self) -> sp.csr_matrix:
        """:math:`W^{(t)}`, shape ``(n, n)`` (built on first access for a matching)."""
        if self._weights is None:
            self._weights = _matching_weights(self._pairs, self._active.size)
        return self._weights

    def __repr__(self) -> str:
        return (f"GossipRound({int(self._active.sum())} active of {self._active.size}, "
                f"{self._pairs.shape[0]} pairs)")


class RandomGossip:
    r"""Random gossip matrices :math:`W^{(t)}` and active sets of DP-DDA's node subsampling.

    DP-DDA (C. Liu, K. H. Johansson, Y. Shi, "Distributed empirical risk minimization with
    differential privacy", Automatica 162, 111514, 2024; arXiv:2302.10520) activates a random
    set of nodes each round (Definition 2) and mixes on it with a random doubly stochastic
    :math:`W^{(t)}` supported on the graph's edges (Assumption 2). Three samplers, on any
    undirected graph, each ``O(n + |E|)`` memory and time per round (O(n) on a
    :class:`~rfed.networks.CompleteGraph`):

    ``"uniform"`` (default; the paper's Definition 2)
        Exactly ``n_active`` nodes, a uniformly random subset, in a uniformly random order;
        consecutive nodes of that order are paired when they are adjacent, and the nodes left
        over are paired by a random maximal matching of the graph they induce (greedy over
        their edges in a uniformly random order). Active nodes left without a partner release
        and keep their own value (``w_ii = 1``). On the complete graph every consecutive pair
        is an edge: a uniformly random perfect matching of the active set (weights 1/2), the
        draws of earlier rfed versions bit for bit. Each node is active with probability
        ``n_active / n`` exactly.
    ``"maximal"``
        A random maximal matching of the whole graph (greedy over its edges in a uniformly
        random order; a uniformly random perfect matching on the complete graph); each pair
        of it is active with probability ``p = n_active / n``, independently, and each node it
        leaves out is active alone with probability ``p``. Each node is active with probability
        ``p`` exactly (a matched node through its pair, an unmatched one alone), and the active
        nodes mix with a neighbour far more often than under ``"uniform"`` on a sparse graph.
    ``"edges"``
        ``n_edges`` distinct edges drawn uniformly; they may share nodes, and ``W^{(t)}`` holds
        the Metropolis-Hastings weights of the sampled subgraph (degrees in the sampled graph,
        not the supergraph). Node ``i`` (degree ``d_i``, ``M`` edges) is active with probability
        ``1 - C(M - d_i, n_edges) / C(M, n_edges)``.

    :attr:`iota` is the largest of the nodes' activation probabilities, the ``iota`` of the
    paper's Theorem 1 (see ``docs/guide/scale.md``).

    Parameters
    ----------
    graph : Graph
        Undirected supergraph (the paper's experiments use the complete graph on 20 nodes).
    n_active : int, optional
        ``"uniform"``: the number of active nodes, 1..n. ``"maximal"``: their expected number
        ``p n`` (1..n).
    n_edges : int, optional
        ``"edges"``: edges drawn per round, ``1..|E|``.
    mode : {"uniform", "maximal", "edges"}
        The sampler (``"matching"`` is accepted as the former name of ``"uniform"``).
    """

    MODES = ("uniform", "maximal", "edges")

    def __init__(
        self,
        graph: Graph,
        n_active: int | None = None,
        *,
        n_edges: int | None = None,
        mode: str = "uniform",
    ):
        graph = _check_graph(graph)
        _require_undirected(graph, "RandomGossip")
        if mode == "matching":
            mode = "uniform"
        if mode not in self.MODES:
            raise ValueError(f"argument 'mode' must be one of {list(self.MODES)}, got {mode!r}")
        self.graph = graph
        self.mode = mode
        n = graph.n_nodes
        if mode in ("uniform", "maximal"):
            if n_edges is not None:
                raise ValueError(f"argument 'n_edges' is for mode='edges'; mode={mode!r} takes "
                                 "'n_active'")
            if not isinstance(n_active, (int, np.integer)) or isinstance(n_active, bool) or \
                    not 1 <= n_active <= n:
                raise ValueError(f"argument 'n_active' must be an int in 1..{n} (the "
                                 f"{'number' if mode == 'uniform' else 'expected number'} of "
                                 f"active nodes, n * iota), got {n_active!r}")
            self.n_active = int(n_active)
        else:
            if n_active is not None:
                raise ValueError("argument 'n_active' is for mode='uniform' or 'maximal'; "
                                 "mode='edges' takes 'n_edges'")
            m = graph.n_edges
            if not isinstance(n_edges, (int, np.integer)) or isinstance(n_edges, bool) or \
                    not 1 <= n_edges <= m:
                raise ValueError(f"argument 'n_edges' must be an int in 1..{m} (edges of the "
                                 f"supergraph), got {n_edges!r}")
            self.n_edges = int(n_edges)

    # ------------------------------------------------------------------ the graph's edges
    @functools.cached_property
    def _edge_list(self) -> np.ndarray:
        """The supergraph's edges ``(u, v)``, ``u < v``, sorted (:meth:`Graph.edges`), int64
        ``(|E|, 2)``: built on first use (never on a complete graph but by ``expected_gram``)."""
        return self.graph.edges().astype(np.int64)

    def _edge_pairs(self, idx: np.ndarray) -> np.ndarray:
        """Edges number ``idx`` of :meth:`Graph.edges`'s order (on the complete graph decoded
        from the index, without listing the ``n (n - 1) / 2`` edges)."""
        if self.graph.is_complete():
            i, j = _pair_from_index(np.asarray(idx, dtype=np.int64), self.graph.n_nodes)
            return np.stack([i, j], axis=1)
        return self._edge_list[idx]

    @functools.cached_property
    def _arc_keys(self) -> np.ndarray:
        """``i n + j`` for every arc ``j -> i`` of the adjacency, increasing (CSR order with
        sorted indices), int64 ``(arcs,)``."""
        a = self.graph.adjacency
        rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))
        return rows * a.shape[0] + a.indices

    def _is_edge(self, pairs: np.ndarray) -> np.ndarray:
        """Whether each pair ``(i, j)`` is an edge, shape ``(k,)`` (binary search)."""
        keys = pairs[:, 0].astype(np.int64) * self.graph.n_nodes + pairs[:, 1]
        arcs = self._arc_keys
        pos = np.minimum(np.searchsorted(arcs, keys), max(arcs.size - 1, 0))
        return arcs[pos] == keys if arcs.size else np.zeros(keys.size, dtype=bool)

    # ------------------------------------------------------------------ activation
    def activation_probabilities(self) -> np.ndarray:
        """Each node's probability of being active in a round, exactly, shape ``(n,)``.

        Returns
        -------
        ndarray of float, shape ``(n,)``
        """
        n = self.graph.n_nodes
        if self.mode in ("uniform", "maximal"):
            return np.full(n, self.n_active / n)
        deg = self.graph.degree
        levels, where = np.unique(deg, return_inverse=True)
        idle = np.array([_none_of_drawn(self.graph.n_edges, int(d), self.n_edges)
                         for d in levels])
        return 1.0 - idle[where]

    @property
    def iota(self) -> float:
        """The largest activation probability of a node (exact: every node's for
        ``"uniform"`` and ``"maximal"``, and for ``"edges"`` on a regular graph)."""
        if self.mode in ("uniform", "maximal"):
            return self.n_active / self.graph.n_nodes
        return 1.0 - _none_of_drawn(self.graph.n_edges, self.graph.max_degree, self.n_edges)

    # ------------------------------------------------------------------ sampling
    def _draw(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One round's ``(active mask (n,), pairs (k, 2))``."""
        n = self.graph.n_nodes
        if self.mode == "edges":
            idx = rng.choice(self.graph.n_edges, size=self.n_edges, replace=False)
            pairs = self._edge_pairs(idx)
            active = np.zeros(n, dtype=bool)
            active[pairs.ravel()] = True
            return active, pairs
        if self.mode == "uniform":
            return self._draw_uniform(rng)
        return self._draw_maximal(rng)

    def _draw_uniform(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n, k = self.graph.n_nodes, self.n_active
        order = rng.permutation(rng.choice(n, size=k, replace=False))
        active = np.zeros(n, dtype=bool)
        active[order] = True
        pairs = order[: k - k % 2].reshape(-1, 2)
        if self.graph.is_complete():
            return active, pairs
        adjacent = self._is_edge(pairs)
        left = np.concatenate([pairs[~adjacent].ravel(), order[k - k % 2:]])
        pairs = pairs[adjacent]
        u, v = _induced_edges(self.graph.adjacency, left, n)
        if u.size:
            chosen = greedy_matching(u, v, rng.permutation(u.size), n)
            pairs = np.concatenate([pairs, np.stack([u[chosen], v[chosen]], axis=1)])
        return active, pairs

    def _draw_maximal(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = self.graph.n_nodes
        p = self.n_active / n
        if self.graph.is_complete():
            perm = rng.permutation(n)
            matching = perm[: n - n % 2].reshape(-1, 2)
        else:
            edges = self._edge_list
            u, v = edges[:, 0], edges[:, 1]
            # greedy_matching returns the taken edges' indices sorted
            matching = edges[greedy_matching(u, v, rng.permutation(u.size), n)]
        pairs = matching[rng.random(matching.shape[0]) < p]
        matched = np.zeros(n, dtype=bool)
        matched[matching.ravel()] = True
        alone = rng.random(n) < p
        active = alone & ~matched
        active[pairs.ravel()] = True
        return active, pairs

    def _sample_pairs(self, rng: np.random.Generator) -> np.ndarray:
        """The sampled pairs of one round (the edges of ``W^(t)``)."""
        return self._draw(rng)[1]

    def sample(self, rng: np.random.Generator | int) -> GossipRound:
        """Draw :math:`W^{(t)}` and the active set for one round.

        Parameters
        ----------
        rng : numpy.random.Generator or int

        Returns
        -------
        GossipRound
        """
        active, pairs = self._draw(as_generator(rng))
        if self._is_matching(pairs):  # W^(t) built only if asked for (GossipRound.weights)
            return GossipRound(active, pairs)
        return GossipRound(active, pairs, self._sampled_graph_weights(pairs, self.graph.n_nodes))

    # ------------------------------------------------------------------ W^(t)
    def _weights_from_pairs(self, pairs: np.ndarray) -> sp.csr_matrix:
        """Sparse W^(t): identity off the sampled nodes, Metropolis-Hastings block on them
        (a matching's in O(n) by :func:`~rfed.networks.comm._matching_weights`: the same CSR
        arrays, bit for bit)."""
        n = self.graph.n_nodes
        if self._is_matching(pairs):
            return _matching_weights(pairs, n)
        return self._sampled_graph_weights(pairs, n)

    def _is_matching(self, pairs: np.ndarray) -> bool:
        """Whether the sampled edges are pairwise disjoint (always, but for ``"edges"``)."""
        if self.mode != "edges":
            return True
        return np.bincount(pairs.ravel(), minlength=self.graph.n_nodes).max(initial=0) <= 1

    @classmethod
    def _sampled_graph_weights(cls, pairs: np.ndarray, n: int) -> sp.csr_matrix:
        """W^(t) of any sampled edges: the Metropolis-Hastings weights of the sampled graph."""
        nodes, local = np.unique(pairs, return_inverse=True)
        block = cls._weights_from_pairs_local(local.reshape(-1, 2), nodes.size)
        rows = np.concatenate([np.arange(n), np.repeat(nodes, nodes.size)])
        cols = np.concatenate([np.arange(n), np.tile(nodes, nodes.size)])
        vals = np.concatenate([np.ones(n), block.ravel()])
        # drop the identity entry of sampled nodes (their diagonal is in the block) and zeros
        keep = np.ones(rows.size, dtype=bool)
        keep[nodes] = False
        keep[n:] = vals[n:] != 0
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
        order = np.lexsort((cols, rows))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
        return sp.csr_matrix((vals[order], cols[order], indptr), shape=(n, n))

    @staticmethod
    def _weights_from_pairs_local(pairs: np.ndarray, size: int) -> np.ndarray:
        """Dense Metropolis-Hastings weights of the sampled graph on ``size`` nodes."""
        deg = np.bincount(pairs.ravel(), minlength=size)
        w = np.zeros((size, size))
        val = 1.0 / (1.0 + np.maximum(deg[pairs[:, 0]], deg[pairs[:, 1]]))
        w[pairs[:, 0], pairs[:, 1]] = val
        w[pairs[:, 1], pairs[:, 0]] = val
        w[np.diag_indices(size)] = 1.0 - w.sum(axis=1)
        return w

    # ------------------------------------------------------------------ the constant beta
    def expected_gram(
        self,
        rng: np.random.Generator | int | None = None,
        n_samples: int = 20000,
        max_enumeration: int = 200_000,
    ) -> np.ndarray:
        r""":math:`E[W^{(t)T} W^{(t)}]`, dense ``(n, n)`` (a diagnostic of small graphs).

        * ``"uniform"`` on :math:`K_n` with ``k = n_active // 2`` pairs: closed form
          :math:`I - \frac{k}{n-1}(I - 11^T/n)` (the pairs are a uniformly random
          ``k``-matching: each of the ``n(n-1)/2`` edges is in it with probability
          ``k / C(n, 2)``, and :math:`W^T W = W` for disjoint pairs of weight 1/2).
        * ``"edges"`` with at most ``max_enumeration`` edge subsets: exact, by enumerating every
          subset (each is equally likely).
        * Otherwise a Monte Carlo average over ``n_samples`` draws (needs ``rng``). Its noise biases
          :func:`dda_beta` upwards (by about 1e-3 at 80,000 draws on K_20).

        Parameters
        ----------
        rng : numpy.random.Generator or int, optional
            Source of the Monte Carlo estimate (needed only when neither the closed form nor the
            enumeration applies).
        n_samples : int
            Draws of the Monte Carlo estimate.
        max_enumeration : int
            Largest number of edge subsets enumerated exactly.

        Returns
        -------
        ndarray, shape ``(n, n)``
        """
        n = self.graph.n_nodes
        if self.mode == "uniform" and self.graph.is_complete():
            k = self.n_active // 2
            return np.eye(n) - (k / (n - 1.0)) * (np.eye(n) - np.full((n, n), 1.0 / n))
        if self.mode == "edges":
            from itertools import combinations

            m = self.graph.n_edges
            if comb(m, self.n_edges) <= max_enumeration:
                acc = np.zeros((n, n))
                for subset in combinations(range(m), self.n_edges):
                    pairs = self._edge_pairs(np.array(subset))
                    nodes, local = np.unique(pairs, return_inverse=True)
                    # W differs from I only on the sampled nodes: accumulate that block
                    wb = self._weights_from_pairs_local(local.reshape(-1, 2), nodes.size)
                    acc[np.ix_(nodes, nodes)] += wb.T @ wb - np.eye(nodes.size)
                return np.eye(n) + acc / comb(m, self.n_edges)
        if rng is None:
            raise ValueError(
                "argument 'rng' is needed: E[W^T W] has no closed form here and is estimated by "
                "Monte Carlo"
            )
        rng = as_generator(rng)
        acc = np.zeros((n, n))
        for _ in range(int(n_samples)):
            pairs = self._sample_pairs(rng)
            if pairs.size == 0:
                continue
            nodes, local = np.unique(pairs, return_inverse=True)
            wb = self._weights_from_pairs_local(local.reshape(-1, 2), nodes.size)
            acc[np.ix_(nodes, nodes)] += wb.T @ wb - np.eye(nodes.size)
        return np.eye(n) + acc / n_samples

    def beta(self, rng: np.random.Generator | int | None = None, n_samples: int = 20000) -> float:
        """DP-DDA's mixing constant (4): ``sqrt(rho(E[W^T W] - 11^T/n))`` (see :func:`dda_beta`).

        Closed form ``sqrt(1 - k/(n-1))`` for ``"uniform"`` on ``K_n`` (k = n_active // 2
        pairs); exact enumeration for small ``"edges"`` cases; otherwise estimated from
        ``n_samples`` draws (see :meth:`expected_gram`).

        Parameters
        ----------
        rng : numpy.random.Generator or int, optional
        n_samples : int
            See :meth:`expected_gram`.

        Returns
        -------
        float
        """
        return dda_beta(self.expected_gram(rng, n_samples))

    def __repr__(self) -> str:
        size = (f"n_edges={self.n_edges}" if self.mode == "edges"
                else f"n_active={self.n_active}")
        return f"RandomGossip({self.graph!r}, {size}, mode={self.mode!r})"


def _none_of_drawn(m: int, d: int, k: int) -> float:
    """``C(m - d, k) / C(m, k)``: the probability that ``k`` of ``m`` items drawn without
    replacement miss ``d`` given ones, as ``prod_{j < k} (1 - d / (m - j))``."""
    if d == 0:
        return 1.0
    if k > m - d:
        return 0.0
    if m <= 2000:
        return comb(m - d, k) / comb(m, k)
    return float(np.exp(np.sum(np.log1p(-d / (m - np.arange(k, dtype=float))))))


def _induced_edges(adjacency: sp.csr_matrix, nodes: np.ndarray,
                   n: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges ``(u, v)``, ``u < v``, of the subgraph that ``nodes`` induce: O(sum of their
    degrees)."""
    if nodes.size < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    inside = np.zeros(n, dtype=bool)
    inside[nodes] = True
    starts = adjacency.indptr[nodes]
    lengths = adjacency.indptr[nodes + 1] - starts
    owner = np.repeat(nodes, lengths)
    # positions starts[a] .. starts[a] + lengths[a] - 1 of every node a, concatenated
    offsets = np.arange(owner.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    nbr = adjacency.indices[np.repeat(starts, lengths) + offsets]
    keep = inside[nbr] & (owner < nbr)
    return owner[keep].astype(np.int64), nbr[keep].astype(np.int64)


def greedy_matching(u: np.ndarray, v: np.ndarray, rank: np.ndarray, n: int) -> np.ndarray:
    """The greedy maximal matching of the edges ``(u[e], v[e])`` taken in increasing ``rank``.

    Computed in rounds, each O(edges left): every edge whose rank is the smallest among the
    remaining edges at both of its ends is taken, then every edge touching a taken node is
    dropped. An edge taken in a round is one the sequential greedy pass takes (no edge of
    lower rank next to it is left, and those dropped touch nodes that edges of lower rank
    took), so both give the same matching (Blelloch, Fineman, Shun, "Greedy sequential maximal
    independent set and matching are parallel on average", SPAA 2012). With uniformly random
    ranks a handful of rounds suffice.

    Parameters
    ----------
    u, v : ndarray of int, shape ``(m,)``
        The edges' ends (``u != v``), nodes in ``0 .. n - 1``.
    rank : ndarray of int, shape ``(m,)``
        Distinct ranks (e.g. a permutation of ``0 .. m - 1``).
    n : int

    Returns
    -------
    ndarray of int, shape ``(k,)``
        Indices of the taken edges, increasing.
    """
    matched = np.zeros(n, dtype=bool)
    smallest = np.empty(n, dtype=rank.dtype)
    taken = []
    # the first round reads the edges themselves (every edge is alive: no gathered copies of
    # the three arrays); later rounds the survivors, ``alive`` their indices (None: all)
    alive: np.ndarray | None = None
    r, a, b = rank, u, v
    while r.size:
        top = r.max() + 1
        if alive is None:  # only the entries at the edges' ends are read
            smallest.fill(top)
        else:
            smallest[a] = top
            smallest[b] = top
        np.minimum.at(smallest, a, r)
        np.minimum.at(smallest, b, r)
        win = smallest[a] == r
        win &= smallest[b] == r
        won = np.flatnonzero(win)
        taken.append(won if alive is None else alive[won])
        matched[a[won]] = True
        matched[b[won]] = True
        done = matched[a]
        done |= matched[b]
        left = np.flatnonzero(np.logical_not(done, out=done))
        alive = left if alive is None else alive[left]
        r, a, b = r[left], a[left], b[left]
    return np.sort(np.concatenate(taken)) if taken else np.zeros(0, dtype=np.int64)


def dda_beta(expected_gram: np.ndarray) -> float:
    r"""DP-DDA's :math:`\beta = \sqrt{\rho(E[W^T W] - 11^T/n)}` (its Assumption 2 (4)).

    The experiments' gossip matrices and their :math:`\beta`: :ref:`dpdda-node-sampling`.

    Parameters
    ----------
    expected_gram : array, shape ``(n, n)``
        :math:`E[W^{(t)T} W^{(t)}]` (symmetric).

    Returns
    -------
    float
    """
    g = np.asarray(expected_gram, dtype=float)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"argument 'expected_gram' must be square, got shape {g.shape}")
    n = g.shape[0]
    ev = np.linalg.eigvalsh((g + g.T) / 2.0 - np.full((n, n), 1.0 / n))
    return float(np.sqrt(max(np.max(np.abs(ev)), 0.0)))
