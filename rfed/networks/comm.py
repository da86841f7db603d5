"""The one interface through which all communication between agents (and with a server) goes.

Data model
----------
An algorithm holds every per-agent quantity as an array with a leading agent axis,
``(n_agents, *shape)``, and computes on it row-wise (agent-locally) with numpy. Whatever crosses
from one agent to another goes through a :class:`Communicator`:

* :meth:`Communicator.mix` -- every agent ``i`` obtains :math:`\\sum_j W_{ij} v_j` (pull with
  row weights, or push with column weights: the arithmetic is the same; only who multiplies
  differs, and the message on the wire is the unscaled :math:`v_j` either way);
  :meth:`Communicator.mix_pairs` is ``mix`` with the weights of a matching (1/2 per pair, e.g.
  DP-DDA's random gossip), which the in-process engine applies from the pairs;
* :meth:`Communicator.gather_from_neighbors` -- every agent receives its in-neighbours' values
  (one row per arc, CSR order), e.g. for Riemannian gossip, which needs
  :math:`\\mathrm{Log}_{x_i}(x_j)` per arc;
* :meth:`Communicator.publish` -- senders broadcast an update of their *public copy* to their
  out-neighbours, who all hold identical copies (DO-ADP's :math:`\\hat x`);
  :meth:`Communicator.mix` with ``copies=True`` then mixes the copies without new messages;
* :meth:`Communicator.gather` / :meth:`Communicator.broadcast` -- agents to server / server to
  agents (federated setting).

The in-process engine (:class:`InProcessCommunicator`) keeps all rows in one array and does one
sparse product or one fancy index per call. A distributed engine (e.g. mpi4py neighbour
collectives: ``Create_dist_graph_adjacent`` + ``Neighbor_alltoallv``, :mod:`rfed.engines.mpi`)
subclasses :class:`Communicator`, holds only the rows of its block of agents
(:attr:`Communicator.agents`, :attr:`Communicator.n_local`) and serves the same calls on them:
``values`` then have ``n_local`` rows, ``weights`` stay the full ``(n_agents, n_agents)`` matrix,
and the ``receivers`` of a :class:`NeighborValues` are local row indices (equal to global ids in
one process).

Accounting
----------
Every call counts messages (one per arc that carries a value, or per agent for server traffic)
and bytes. A message's size is, by default, the dense size of one row,
``prod(shape) * itemsize``; an algorithm that sends a compressed payload declares its size with
``payload_bytes`` (see :func:`sparse_payload_bytes`: top-k sends k values and k indices).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.networks.graphs import Graph

__all__ = [
    "CommStats",
    "NeighborValues",
    "Communicator",
    "InProcessCommunicator",
    "dense_payload_bytes",
    "sparse_payload_bytes",
    "segment_sum",
    "csr_product",
    "check_out",
    "mix_product",
    "arc_list",
    "reverse_arcs",
    "as_csr_weights",
    "freeze_weights",
]


def dense_payload_bytes(shape: tuple[int, ...] | int, dtype=np.float64) -> int:
    """Bytes of one dense message of the given per-agent shape: ``prod(shape) * itemsize``.

    Parameters
    ----------
    shape : int or tuple of int
        One agent's message shape.
    dtype : numpy dtype

    Returns
    -------
    int
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def sparse_payload_bytes(k: int, value_dtype=np.float64, index_dtype=np.int32) -> int:
    """Bytes of one sparsified message: ``k`` values and ``k`` indices.

    With float64 values and int32 indices (enough for dimensions below 2^31): ``12 k``.

    Parameters
    ----------
    k : int
        Entries sent.
    value_dtype, index_dtype : numpy dtype

    Returns
    -------
    int
    """
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"argument 'k' must be a non-negative int, got {k!r}")
    return int(k) * (np.dtype(value_dtype).itemsize + np.dtype(index_dtype).itemsize)


@dataclass
class CommStats:
    """Running totals of communication.

    Attributes
    ----------
    messages, bytes : int
        Totals over all calls.
    messages_sent, bytes_sent : ndarray, shape ``(n_agents,)``
        Per sending agent (the server is not an agent: its broadcasts are in ``server_bytes``).
    server_messages, server_bytes : int
        Messages and bytes sent by the server (:meth:`Communicator.broadcast`).
    calls : dict
        ``{kind: number of calls}`` for kind in mix, gather_from_neighbors, publish, gather,
        broadcast.
    """

    n_agents: int
    messages: int = 0
    bytes: int = 0
    server_messages: int = 0
    server_bytes: int = 0
    # None means "zeros of length n_agents", filled in by __post_init__
    messages_sent: np.ndarray = None  # type: ignore[assignment]
    bytes_sent: np.ndarray = None  # type: ignore[assignment]
    calls: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.messages_sent is None:
            self.messages_sent = np.zeros(self.n_agents, dtype=np.int64)
        if self.bytes_sent is None:
            self.bytes_sent = np.zeros(self.n_agents, dtype=np.int64)

    def reset(self) -> None:
        """Zero every counter."""
        self.messages = self.bytes = self.server_messages = self.server_bytes = 0
        self.messages_sent[:] = 0
        self.bytes_sent[:] = 0
        self.calls.clear()

    def snapshot(self) -> dict:
        """A plain-dict copy of the totals (for histories).

        Returns
        -------
        dict of str to int
        """
        return {
            "messages": int(self.messages),
            "bytes": int(self.bytes),
            "server_messages": int(self.server_messages),
            "server_bytes": int(self.server_bytes),
        }


@dataclass(frozen=True)
class NeighborValues:
    """Values received along arcs, one row per arc, grouped by receiver (CSR order).

    Attributes
    ----------
    receivers, senders : ndarray of int, shape ``(m,)``
        Arc ``senders[e] -> receivers[e]``; ``receivers`` is non-decreasing.
    weights : ndarray, shape ``(m,)``
        The mixing weight ``W[receiver, sender]`` of each arc.
    values : ndarray, shape ``(m, *shape)``
        ``values[e]`` is the sender's value.
    arc_ids : ndarray of int, shape ``(m,)``
        Position of each arc in the full off-diagonal arc list of ``W`` (CSR order), to update
        per-arc state such as neighbours' copies.
    """

    receivers: np.ndarray
    senders: np.ndarray
    weights: np.ndarray
    values: np.ndarray
    arc_ids: np.ndarray


def segment_sum(
    receivers: np.ndarray, arc_values: np.ndarray, n_agents: int, weights: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Agent-local reduction :math:`out_i = \\sum_{e: receivers_e = i} w_e\\, arc\\_values_e`.

    One sparse ``(n_agents, m) @ (m, prod(shape))`` product, O(m prod(shape)); no communication.

    Parameters
    ----------
    receivers : ndarray of int, shape ``(m,)``
    arc_values : ndarray, shape ``(m, *shape)``
    weights : ndarray, shape ``(m,)``, optional (ones)
    out : ndarray, shape ``(n_agents, *shape)``, optional
        The array to write the sums into (float64, C-contiguous, sharing no memory with
        ``arc_values``): the product's kernel computes into it as into a fresh array (see
        :func:`csr_product`), so the same bits. Default: a fresh array.

    Returns
    -------
    ndarray, shape ``(n_agents, *shape)``
        ``out`` when given.
    """
    arc_values = np.asarray(arc_values)
    m = arc_values.shape[0]
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    sel = sp.csr_matrix((w, (np.asarray(receivers), np.arange(m))), shape=(n_agents, m))
    shape = (n_agents,) + arc_values.shape[1:]
    if out is not None:
        check_out(out, shape, arc_values)
        csr_product(sel, arc_values.reshape(m, -1), out.reshape(n_agents, -1))
        return out
    sums = sel @ arc_values.reshape(m, -1)
    return np.asarray(sums).reshape(shape)


def as_csr_weights(weights, name: str = "weights") -> sp.csr_matrix:
    """``weights`` as float64 CSR with sorted indices (a Graph gives weight 1 per arc).

    A float64 CSR matrix is used as is: scipy caches the sorted-indices flag on the object, so a
    matrix reused every round is sorted once.

    Parameters
    ----------
    weights : array_like, scipy.sparse matrix or Graph, shape ``(n, n)``
    name : str
        The argument's name in the error message.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    if isinstance(weights, Graph):
        w = weights.adjacency
    elif isinstance(weights, sp.csr_matrix) and weights.dtype == np.float64:
        w = weights
    elif sp.issparse(weights):
        w = sp.csr_matrix(weights, dtype=float)
    else:
        try:
            dense = np.asarray(weights, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"argument '{name}' must be a square matrix of numbers, got "
                             f"{type(weights).__name__} {weights!r:.80}") from None
        if dense.ndim != 2:
            raise ValueError(f"argument '{name}' must be a square matrix, got shape "
                             f"{dense.shape}")
        w = sp.csr_matrix(dense)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"argument '{name}' must be a square matrix, got shape {w.shape}")
    w.sort_indices()
    return w


def _pattern(weights, n_agents: int, name: str = "weights") -> sp.csr_matrix:
    """:func:`as_csr_weights`, checked to be ``(n_agents, n_agents)``."""
    if (type(weights) is sp.csr_matrix and weights.dtype == np.float64
            and weights.shape == (n_agents, n_agents) and weights.has_sorted_indices):
        # what as_csr_weights would return unchanged (a matrix used every round: a call costs
        # more than the small products it feeds)
        return weights
    w = as_csr_weights(weights, name)
    if w.shape != (n_agents, n_agents):
        raise ValueError(
            f"argument '{name}' has shape {w.shape}; expected ({n_agents}, {n_agents})"
        )
    return w


def arc_list(weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(receivers, senders, weights)`` of the non-zero off-diagonal entries, CSR order.

    Arc ``e`` is ``senders[e] -> receivers[e]``; this is the order of
    :meth:`Communicator.gather_from_neighbors` and of ``arc_values`` in
    :meth:`Communicator.send_along_arcs`.

    Parameters
    ----------
    weights : array_like, scipy.sparse matrix or Graph, shape ``(n, n)``

    Returns
    -------
    receivers, senders : ndarray of int, shape ``(n_arcs,)``
    weights : ndarray of float, shape ``(n_arcs,)``
    """
    rows, cols, vals, _ = _offdiag_arcs(as_csr_weights(weights))
    return rows, cols, vals


def reverse_arcs(weights) -> np.ndarray:
    """For a symmetric pattern, ``rev[e]``: the position in :func:`arc_list` of arc ``e``
    reversed (``receivers[rev[e]] == senders[e]`` and ``senders[rev[e]] == receivers[e]``).

    A reply to what arrived along the arcs of :meth:`Communicator.gather_from_neighbors` travels
    as ``send_along_arcs(weights, replies[rev])`` (e.g. DPDL's cross-gradients going back to the
    model owners).

    Raises
    ------
    ValueError
        The off-diagonal pattern is not symmetric (names an arc without its reverse).

    Parameters
    ----------
    weights : array_like, scipy.sparse matrix or Graph, shape ``(n, n)``
        Of symmetric pattern.

    Returns
    -------
    ndarray of int, shape ``(n_arcs,)``
    """
    rows, cols, _ = arc_list(weights)
    n = int(max(rows.max(), cols.max())) + 1 if rows.size else 0
    keys = rows.astype(np.int64) * n + cols
    missing = ~np.isin(cols.astype(np.int64) * n + rows, keys)
    if np.any(missing):
        e = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"argument 'weights' must have a symmetric off-diagonal pattern; arc "
            f"{cols[e]} -> {rows[e]} has no reverse {rows[e]} -> {cols[e]}"
        )
    # sorting the arcs by (sender, receiver) lists their reverses in CSR order
    return np.lexsort((rows, cols))


def _offdiag_arcs(
    w: sp.csr_matrix, row_offset: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(receivers, senders, weights, indptr) of the non-zero off-diagonal arcs, CSR order.

    ``w`` may be a block of rows whose first row is row ``row_offset`` of the full matrix.
    """
    n_rows = w.shape[0]
    local = np.repeat(np.arange(n_rows), np.diff(w.indptr))
    keep = (local + row_offset != w.indices) & (w.data != 0)
    local, cols, vals = local[keep], w.indices[keep], w.data[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(local, minlength=n_rows))])
    rows = local + row_offset
    return rows, cols, vals, indptr


def freeze_weights(weights, name: str = "weights") -> sp.csr_matrix:
    """A read-only float64 CSR copy of ``weights`` (sorted indices), for a matrix used every round.

    What rfed derives from a mixing matrix at each call (finiteness, row sums, out-degrees for the
    message counts) is computed once for a frozen matrix and kept on it: its ``data``, ``indices``
    and ``indptr`` cannot be written in place, and replacing any of them, or making one writable
    again, drops what was kept (see :func:`weights_fact`). The values are those computed from
    the matrix at each call, bit for bit. :class:`~rfed.networks.Network` and the decentralized
    algorithms freeze the matrices they hold.

    Parameters
    ----------
    weights : sparse or dense matrix, shape ``(n, n)``
    name : str
        Argument name used in error messages.

    Returns
    -------
    scipy.sparse.csr_matrix, shape ``(n, n)``
    """
    w = as_csr_weights(weights, name).copy()
    w.sort_indices()   # sets the sorted flag on the copy: no later in-place sort is attempted
    for a in (w.data, w.indices, w.indptr):
        a.flags.writeable = False
    return w


def weights_fact(w: sp.csr_matrix, key: str | tuple, compute):
    """``compute(w)``, kept on ``w`` when it is frozen (see :func:`freeze_weights`).

    A matrix whose arrays are writable, or were replaced since the value was kept, gets
    ``compute(w)`` afresh: a kept value can only be stale if someone makes an array writable,
    writes it and makes it read-only again. Kept arrays are returned read-only.

    Parameters
    ----------
    w : scipy.sparse.csr_matrix
    key : str or tuple
        Names the value among those kept on ``w``.
    compute : callable
        ``compute(w)``.

    Returns
    -------
    object
        ``compute(w)``.
    """
    arrays = (data, indices, indptr) = (w.data, w.indices, w.indptr)
    if data.flags.writeable or indices.flags.writeable or indptr.flags.writeable:
        return compute(w)
    kept = getattr(w, "_rfed_facts", None)
    if kept is None or not (kept[0][0] is data and kept[0][1] is indices
                            and kept[0][2] is indptr):
        kept = (arrays, {})
        w._rfed_facts = kept
    facts: dict = kept[1]
    if key not in facts:
        value = compute(w)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
        facts[key] = value
    return facts[key]


try:  # scipy's own kernel of ``csr_matrix @ ndarray``, called without the operator's dispatch
    from scipy.sparse._sparsetools import (  # type: ignore[import-untyped]
        csr_matvec as _csr_matvec,
    )
    from scipy.sparse._sparsetools import (  # type: ignore[import-untyped]
        csr_matvecs as _csr_matvecs,
    )
except ImportError:  # pragma: no cover - a scipy that moved its private kernels
    _csr_matvec = _csr_matvecs = None

#: A frozen matrix is mixed by a dense product when it has at least this share of the n^2
#: entries stored (BLAS's dense product then takes less time than the sparse one, see
#: ``benchmarks/bench_gossip.py``) ...
DENSE_MIX_FILL = 0.25
#: ... and at least this many agents (below, a product takes a few microseconds either way and
#: the sparse product's bits are kept; the same bound applies to the complete-graph form) ...
DENSE_MIX_MIN_AGENTS = 256
#: ... and at most this many (the dense copy takes ``8 n^2`` bytes: 512 MiB here).
DENSE_MIX_MAX_AGENTS = 8192


def csr_product(w: sp.csr_matrix, flat: np.ndarray, out: np.ndarray | None = None
                ) -> np.ndarray:
    """``w @ flat`` for a float64 CSR ``w`` ``(n, m)`` and a float64 ``flat`` ``(m, k)``: the
    same kernel scipy's operator calls (``csr_matvec`` for one column, ``csr_matvecs``
    otherwise, into zeros), so the same bits, without the operator's dispatch, which costs
    as much as the product of a thousand agents' small rows.

    Parameters
    ----------
    w : scipy.sparse.csr_matrix, shape ``(n, m)``
    flat : ndarray, shape ``(m, k)``
    out : ndarray, shape ``(n, k)``, optional
        The array to write the product into (see :func:`check_out`), e.g. one reused from
        round to round: the kernel zeroes it and accumulates as into a fresh array, so the
        same bits. Default: a fresh array.

    Returns
    -------
    ndarray, shape ``(n, k)``
        ``out`` when given.
    """
    if (_csr_matvecs is None or flat.dtype != np.float64 or w.dtype != np.float64
            or flat.ndim != 2):
        product = np.asarray(w @ flat)
        if out is None:
            return product
        out[...] = product
        return out
    n, m = w.shape
    k = flat.shape[1]
    if out is None:
        out = np.zeros((n, k))
    else:
        check_out(out, (n, k), flat)
        out.fill(0.0)
    if k == 1:
        _csr_matvec(n, m, w.indptr, w.indices, w.data, flat.ravel(), out.ravel())
    else:
        _csr_matvecs(n, m, k, w.indptr, w.indices, w.data, flat.ravel(), out.ravel())
    return out


def check_out(out: np.ndarray, shape: tuple[int, ...], *inputs: np.ndarray,
              name: str = "out") -> np.ndarray:
    """``out`` if it can take a product's result of ``shape`` in place: a writable C-contiguous
    float64 array of that shape sharing no memory with ``inputs`` (a product that wrote into
    what it reads would read its own partial sums); ``ValueError`` naming ``name`` otherwise.

    Parameters
    ----------
    out : ndarray
    shape : tuple of int
        The result's shape.
    *inputs : ndarray
        What the product reads.
    name : str
        The argument's name in the error message.

    Returns
    -------
    ndarray
        ``out``.
    """
    if (type(out) is not np.ndarray or out.dtype != np.float64 or out.shape != shape
            or not out.flags.c_contiguous or not out.flags.writeable):
        got = (type(out).__name__ if not isinstance(out, np.ndarray) else
               f"{'' if out.flags.writeable else 'read-only '}"
               f"{'' if out.flags.c_contiguous else 'non-contiguous '}{out.dtype} array of "
               f"shape {out.shape}")
        raise ValueError(f"argument '{name}' must be a writable C-contiguous float64 array of "
                         f"shape {shape}, got a {got}")
    for a in inputs:
        if np.may_share_memory(out, a):
            raise ValueError(f"argument '{name}' shares memory with the values it mixes; "
                             f"give a separate array")
    return out


@dataclass(frozen=True)
class _ProductPlan:
    """How :func:`mix_product` multiplies by one frozen matrix: ``kind`` is ``'csr'``,
    ``'dense'`` (``dense`` holds the matrix) or ``'complete'`` (every off-diagonal entry
    equals ``offdiag`` and ``shift = diag(W) - offdiag``, so ``W V = offdiag 1 (1^T V) +
    diag(shift) V``; ``shift`` is ``None`` when it is zero)."""

    kind: str
    dense: np.ndarray | None = None
    offdiag: float = 0.0
    shift: np.ndarray | None = None


def _plan_product(w: sp.csr_matrix) -> _ProductPlan:
    n = w.shape[0]
    if w.shape[0] != w.shape[1] or n < DENSE_MIX_MIN_AGENTS or w.nnz < DENSE_MIX_FILL * n * n:
        return _ProductPlan("csr")
    rows = np.repeat(np.arange(n), np.diff(w.indptr))
    off = w.data[rows != w.indices]
    if off.size == n * (n - 1) and off.min() == off.max() > 0:
        shift = w.diagonal() - float(off[0])
        return _ProductPlan("complete", offdiag=float(off[0]),
                            shift=_read_only(shift) if np.any(shift) else None)
    if n <= DENSE_MIX_MAX_AGENTS:
        return _ProductPlan("dense", dense=_read_only(w.toarray()))
    return _ProductPlan("csr")


def mix_product(w: sp.csr_matrix, flat: np.ndarray, out: np.ndarray | None = None
                ) -> np.ndarray:
    """``W @ flat`` by the fastest of three forms, chosen once per frozen ``w``.

    A frozen matrix (:func:`freeze_weights`) with :data:`DENSE_MIX_MIN_AGENTS` agents or
    more that stores at least :data:`DENSE_MIX_FILL` of its entries is multiplied

    * on a complete graph whose off-diagonal weights are all equal (``c``): as
      ``c 1 (1^T V) + diag(w_ii - c) V``, O(n k) instead of O(n^2 k);
    * otherwise, up to :data:`DENSE_MIX_MAX_AGENTS` agents, by BLAS from a dense copy kept on
      the matrix;

    and any other matrix by the CSR kernel (:func:`csr_product`). The forms sum each row in
    a different order, so their results differ by rounding only: entry ``i`` of each is within
    ``gamma_{n+1} sum_j |w_ij| |v_j|`` of the exact value (``gamma_k = k u / (1 - k u)``,
    ``u = 2^-53``), so two forms differ by at most ``2 gamma_{n+1} max_j |v_j|`` for a
    row-stochastic ``w`` (``docs/guide/scale.md``).

    Parameters
    ----------
    w : scipy.sparse.csr_matrix, shape ``(n, m)``
    flat : ndarray, shape ``(m, k)``
    out : ndarray, shape ``(n, k)``, optional
        The array to write the product into (float64, C-contiguous, not sharing memory with
        ``flat``; see :func:`check_out`): each form computes into it what it computes into a
        fresh array, so the same bits. Default: a fresh array.

    Returns
    -------
    ndarray, shape ``(n, k)``
        ``out`` when given.
    """
    if flat.dtype == np.float64 and not w.data.flags.writeable:
        plan = weights_fact(w, "product_plan", _plan_product)
        if plan.kind != "csr" and out is not None:
            check_out(out, (w.shape[0],) + flat.shape[1:], flat)
        if plan.kind == "complete":
            mean_part = plan.offdiag * np.add.reduce(flat, axis=0)
            if plan.shift is None:  # every weight equal: each row is c 1^T V
                if out is None:
                    out = np.empty_like(flat)
                out[...] = mean_part
                return out
            out = np.multiply(plan.shift[:, None], flat, out=out)
            out += mean_part
            return out
        if plan.kind == "dense":
            return np.matmul(plan.dense, flat, out=out)
    return csr_product(w, flat, out)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _count_out_degrees(w: sp.csr_matrix) -> np.ndarray:
    # the masked copy costs 4x the count: skip it when no stored entry is zero
    nonzero = w.indices if np.count_nonzero(w.data) == w.nnz else w.indices[w.data != 0]
    counts = np.bincount(nonzero, minlength=w.shape[1])
    return (counts - (w.diagonal() != 0)).astype(np.int64)


def _out_degrees(w: sp.csr_matrix) -> np.ndarray:
    """Non-zero off-diagonal entries of each column of a square ``w`` (agent ``j``'s
    out-neighbours, the arcs ``j -> i``), int64 ``(n,)``; without listing the arcs."""
    return weights_fact(w, "out_degrees", _count_out_degrees)


def _check_pairs(pairs, n_agents: int, name: str = "pairs") -> np.ndarray:
    """``pairs`` as an int array ``(k, 2)`` of pairwise-disjoint pairs of distinct agents in
    ``0 .. n_agents - 1`` (a matching), or ``ValueError`` naming what is wrong."""
    p = np.asarray(pairs)
    if p.ndim != 2 or p.shape[1] != 2 or (p.size and p.dtype.kind not in "iu"):
        raise ValueError(f"argument '{name}' must be an integer array of shape (k, 2), got "
                         f"{p.dtype} array of shape {p.shape}")
    if p.size == 0:
        return p.astype(np.intp)
    if p.min() < 0 or p.max() >= n_agents:
        raise ValueError(f"argument '{name}' has agents outside 0..{n_agents - 1}")
    uses = np.bincount(p.ravel(), minlength=n_agents)
    if uses.max() > 1:
        i = int(np.argmax(uses))
        raise ValueError(f"argument '{name}' must be a matching (pairwise-disjoint pairs of "
                         f"distinct agents); agent {i} appears {int(uses[i])} times")
    return p


def _matching_weights(pairs: np.ndarray, n: int) -> sp.csr_matrix:
    """W of a matching ``pairs`` (checked by :func:`_check_pairs`): ``w_ii = w_ij = w_ji =
    w_jj = 1/2`` for a pair ``(i, j)``, identity rows elsewhere; CSR with sorted indices,
    built in O(n). These are the Metropolis-Hastings weights of the matching (degree 1:
    ``1 / (1 + 1)``, diagonal ``1 - 1/2``)."""
    own = np.arange(n)
    partner = own.copy()
    partner[pairs[:, 0]] = pairs[:, 1]
    partner[pairs[:, 1]] = pairs[:, 0]
    paired = partner != own
    cols = np.stack([np.minimum(own, partner), np.maximum(own, partner)], axis=1)
    vals = np.where(paired[:, None], 0.5, np.array([1.0, 0.0]))
    keep = np.stack([np.ones(n, dtype=bool), paired], axis=1)
    indptr = np.concatenate([[0], np.cumsum(1 + paired)])
    w = sp.csr_matrix((vals[keep], cols[keep], indptr), shape=(n, n))
    w.has_sorted_indices = True
    return w


class Communicator(abc.ABC):
    """Abstract communication engine for ``n_agents`` agents (and an optional server).

    Subclasses implement the five operations; :attr:`stats` accumulates the traffic. Arguments
    named ``senders`` are boolean masks ``(n_agents,)`` (or index arrays) of the agents that
    transmit in this call; ``payload_bytes`` is the size of one message: an int, or an array
    ``(n_agents,)`` of per-sender sizes; ``None`` means the dense row size.

    Parameters
    ----------
    n_agents : int
    """

    def __init__(self, n_agents: int):
        if not isinstance(n_agents, (int, np.integer)) or n_agents < 1:
            raise ValueError(f"argument 'n_agents' must be a positive int, got {n_agents!r}")
        self.n_agents = int(n_agents)
        self.stats = CommStats(self.n_agents)

    # ------------------------------------------------------------------ agent block
    @property
    def agents(self) -> np.ndarray:
        """Global ids of the agents whose rows this process holds, increasing, shape
        ``(n_local,)``: every agent in one process (a distributed engine holds a block)."""
        return np.arange(self.n_agents)

    @property
    def n_local(self) -> int:
        """Rows held by this process."""
        return self.n_agents

    def all_rows(self, values: np.ndarray) -> np.ndarray:
        """Every agent's row, ``(n_agents, *shape)`` in agent order, from this block's rows
        (engine bookkeeping for outputs and metrics, not a protocol message: not counted).

        Parameters
        ----------
        values : ndarray, shape ``(n_local, *shape)``
            This block's rows (every agent's in one process).

        Returns
        -------
        ndarray, shape ``(n_agents, *shape)``
        """
        return np.asarray(values)

    def agent_sum(self, values: np.ndarray) -> np.ndarray:
        """:math:`\\sum_i v_i` over every agent, on every process, from this block's rows
        ``values`` ``(n_local, *shape)``: the rows are gathered in agent order
        (:meth:`all_rows`) and summed in agent order (``np.sum(axis=0)``), so the result has
        the bits of the one-process sum whatever the number of processes (a float
        ``Allreduce`` sums in an order that depends on it). Engine bookkeeping for the
        metrics of a simulation (e.g. a sharded problem's cost), not a protocol message: not
        counted, and not charged to a privacy ledger (rows derived from private data must not
        be reduced between distinct parties of a deployment).

        Returns
        -------
        ndarray, shape ``shape``

        Parameters
        ----------
        values : ndarray, shape ``(n_local, *shape)``
            This block's rows (every agent's in one process).
        """
        return np.sum(self.all_rows(values), axis=0)

    def total_stats(self) -> dict:
        """:meth:`CommStats.snapshot` summed over every process of the engine.

        Returns
        -------
        dict of str to int
        """
        return self.stats.snapshot()

    def merge_account(self, account: Any) -> Any:
        """The run's privacy account over every agent, from this process's account (which
        charged the releases of its own agents): the account itself in one process; a
        distributed engine merges the accounts of all its processes (engine bookkeeping).

        Parameters
        ----------
        account : object
            This process's privacy account.

        Returns
        -------
        object
        """
        return account

    def agree(self, reason: str | None) -> str | None:
        """A stop decision every process shares: ``reason`` (e.g. why this block's iterates
        diverged) if any process has one, else ``None``; ``reason`` itself in one process.

        Parameters
        ----------
        reason : str or None

        Returns
        -------
        str or None
        """
        return reason

    def root_computes(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` computed once for every process of the engine: one process calls it and the
        others receive its value (or its exception), e.g. a noise calibration that depends only
        on public numbers; in one process, simply ``fn()``.

        Parameters
        ----------
        fn : callable
            Without arguments.

        Returns
        -------
        object
            ``fn()``.
        """
        return fn()

    # ------------------------------------------------------------------ helpers
    def _sender_mask(self, senders) -> np.ndarray:
        if senders is None:
            return np.ones(self.n_agents, dtype=bool)
        s = np.asarray(senders)
        if s.dtype == bool:
            if s.shape != (self.n_agents,):
                raise ValueError(
                    f"argument 'senders' mask has shape {s.shape}; expected ({self.n_agents},)"
                )
            return s
        mask = np.zeros(self.n_agents, dtype=bool)
        mask[s.astype(int)] = True
        return mask

    def _agent_index(self, agents) -> np.ndarray:
        if agents is None:
            return np.arange(self.n_agents)
        a = np.asarray(agents)
        if a.dtype == bool:
            return np.flatnonzero(self._sender_mask(a))
        a = a.astype(int).ravel()
        if a.size and (a.min() < 0 or a.max() >= self.n_agents):
            raise ValueError(f"argument 'agents' has indices outside 0..{self.n_agents - 1}")
        return a

    def _per_message_bytes(self, values: np.ndarray, payload_bytes) -> int | np.ndarray:
        """Bytes of one message per sender: declared, or the dense size of one row (an int
        when every sender's is the same)."""
        if payload_bytes is None:
            # math.prod of the shape's Python ints: np.prod's value, without its array round trip
            return math.prod(values.shape[1:]) * values.dtype.itemsize
        if type(payload_bytes) is int:
            return payload_bytes
        pb = np.asarray(payload_bytes)
        if pb.ndim == 0:
            return int(pb)
        if pb.shape != (self.n_agents,):
            raise ValueError(
                f"argument 'payload_bytes' must be an int or shape ({self.n_agents},), "
                f"got shape {pb.shape}"
            )
        return pb.astype(np.int64)

    def _check_values(self, values, name: str = "values") -> np.ndarray:
        v = np.asarray(values)
        if v.ndim < 1 or v.shape[0] != self.n_agents:
            raise ValueError(
                f"argument '{name}' must have a leading agent axis of length {self.n_agents}, "
                f"got shape {v.shape}"
            )
        return v

    def _record(self, kind: str, counts: np.ndarray, per_msg: int | np.ndarray,
                weights: sp.csr_matrix | None = None) -> None:
        """Add ``counts[j]`` messages of ``per_msg[j]`` bytes (or ``per_msg`` bytes each) sent
        by each agent ``j``; ``counts`` derived from ``weights`` alone (its out-degrees) lets a
        frozen matrix keep the bytes per agent and the total for a message size."""
        if weights is not None and type(per_msg) is int:
            b, messages = weights_fact(weights, ("arc_bytes", per_msg),
                                       lambda _: (_read_only(counts * per_msg),
                                                  int(counts.sum())))
        else:
            b = counts * per_msg
            messages = int(counts.sum())
        self.stats.messages_sent += counts
        self.stats.bytes_sent += b
        self.stats.messages += messages
        # one size for every message: the byte total is that multiple (exact in Python ints)
        self.stats.bytes += per_msg * messages if type(per_msg) is int else int(b.sum())
        self.stats.calls[kind] = self.stats.calls.get(kind, 0) + 1

    # ------------------------------------------------------------------ operations
    @abc.abstractmethod
    def mix(self, weights, values, *, senders=None, payload_bytes=None, copies: bool = False,
            out: np.ndarray | None = None):
        """Every agent ``i`` obtains :math:`\\sum_j W_{ij} v_j`.

        Parameters
        ----------
        weights : sparse matrix, shape ``(n_agents, n_agents)``
        values : ndarray, shape ``(n_agents, *shape)``
        senders : bool mask or indices, optional
            Agents that transmit; an off-diagonal weight on a non-sender's value raises
            ``ValueError``. Default: all.
        payload_bytes : int or ndarray ``(n_agents,)``, optional
        copies : bool
            ``values`` are public copies already held by every out-neighbour (kept in sync with
            :meth:`publish`): nothing is sent or counted.
        out : ndarray, shape of ``values``, optional
            The array to write the result into (float64, C-contiguous, sharing no memory with
            ``values``; :func:`check_out`), e.g. one a run reuses from round to round so that
            no fresh array is faulted in: the same bits as a fresh result. Default: a fresh
            array.

        Returns
        -------
        ndarray, shape ``(n_agents, *shape)``
            ``out`` when given.
        """

    def mix_pairs(self, pairs, values, *, senders=None, payload_bytes=None,
                  out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`mix` with the weights of a matching (e.g. DP-DDA's random gossip round): every
        agent ``i`` of a pair ``(i, j)`` obtains ``w_ii v_i + w_ij v_j`` with
        ``w_ii = w_ij = 1/2``, every other agent keeps ``v_i``.

        The same result, bits, message counts and bytes as ``mix(W, values, ...)`` with that
        ``W``; this default builds ``W`` (CSR, O(n)) and calls :meth:`mix`, an engine may mix
        from the pairs directly.

        Parameters
        ----------
        pairs : ndarray of int, shape ``(k, 2)``
            Pairwise-disjoint pairs of distinct agents (global ids); each pair's agents send
            their value to each other (one message each).
        values, senders, payload_bytes, out
            As :meth:`mix`.

        Returns
        -------
        ndarray, shape of ``values``
            ``out`` when given.
        """
        pairs = _check_pairs(pairs, self.n_agents)
        return self.mix(_matching_weights(pairs, self.n_agents), values, senders=senders,
                        payload_bytes=payload_bytes, out=out)

    @abc.abstractmethod
    def gather_from_neighbors(
        self, weights, values, *, senders=None, payload_bytes=None, receivers=None, copies=False
    ) -> NeighborValues:
        """Each agent receives its in-neighbours' values (one row per off-diagonal arc).

        Parameters
        ----------
        weights : sparse matrix or Graph
            Its off-diagonal non-zeros are the arcs (``W[i, j] != 0``: ``j -> i``).
        values : ndarray, shape ``(n_agents, *shape)``
        senders : optional
            Only arcs from these agents carry a value (and are returned).
        copies : bool
            ``values`` are public copies every receiver already holds: nothing is counted.
        receivers : tuple (start, stop), optional
            Only the in-arcs of agents ``start .. stop - 1`` (the in-process engine uses this to
            bound memory; a distributed engine serves its local agents).
        payload_bytes : int or ndarray, optional
            As :meth:`mix`.

        Returns
        -------
        NeighborValues
        """

    @abc.abstractmethod
    def send_along_arcs(self, weights, arc_values, *, payload_bytes=None) -> NeighborValues:
        """Each arc carries its own value (``Neighbor_alltoallv``): ``arc_values[e]`` goes from
        ``senders[e]`` to ``receivers[e]`` for the arcs of :func:`arc_list` (CSR order).

        Parameters
        ----------
        weights : sparse matrix or Graph
        arc_values : ndarray, shape ``(n_arcs, *shape)``
            Held by the senders (e.g. DPDL's cross-gradient of the receiver's model on the
            sender's data). A distributed engine takes the rows of the arcs leaving its block
            of agents, in the same (arc-list) order.

        Returns
        -------
        NeighborValues
            As received, grouped by receiver (a distributed engine: the arcs entering its
            block, ``receivers`` local rows).
        """

    @abc.abstractmethod
    def publish(self, weights, copies, delta, *, senders=None, payload_bytes=None):
        """Senders broadcast ``delta`` to their out-neighbours; every holder adds it to its copy.

        Returns the updated copies ``copies + delta`` on the sender rows (shape of ``copies``).

        Parameters
        ----------
        weights : sparse matrix or Graph
            Its off-diagonal non-zeros are the arcs.
        copies : ndarray, shape ``(n_agents, *shape)``
            The public copies every neighbour holds.
        delta : ndarray, shape ``(n_agents, *shape)``
            What each sender adds to its copy.
        senders, payload_bytes : optional
            As :meth:`mix`.

        Returns
        -------
        ndarray, shape ``(n_agents, *shape)``
        """

    @abc.abstractmethod
    def gather(self, values, agents=None, *, payload_bytes=None) -> np.ndarray:
        """Agents send their rows to the server; returns ``values[agents]``.

        Parameters
        ----------
        values : ndarray, shape ``(n_agents, *shape)``
        agents : ndarray of int or bool mask, optional
            The agents that send (default all).
        payload_bytes : int, optional

        Returns
        -------
        ndarray, shape ``(len(agents), *shape)``
        """

    @abc.abstractmethod
    def broadcast(self, value, agents=None, *, payload_bytes=None) -> np.ndarray:
        """The server sends ``value`` (shape ``shape``) to ``agents``; returns
        ``(len(agents), *shape)`` copies.

        Parameters
        ----------
        value : ndarray, shape ``shape``
        agents : ndarray of int or bool mask, optional
            The receivers (default all).
        payload_bytes : int, optional

        Returns
        -------
        ndarray, shape ``(len(agents), *shape)``
        """


class InProcessCommunicator(Communicator):
    """All agents in one process: one sparse product or fancy index per call (the default)."""

    def _count_arcs(self, kind, w, v, senders, payload_bytes):
        if senders is not None:
            mask = self._sender_mask(senders)
            # stored non-zeros reading a silent agent's value: fine on the diagonal (its own
            # value), an error off it; only those entries' rows are looked up
            pos = np.flatnonzero((w.data != 0) & ~mask[w.indices])
            rows = np.searchsorted(w.indptr, pos, side="right") - 1
            off = np.flatnonzero(rows != w.indices[pos])
            if off.size:
                r, c = int(rows[off[0]]), int(w.indices[pos[off[0]]])
                raise ValueError(
                    f"{kind}: weights[{r}, {c}] = {w[r, c]:.6g} uses the value of agent {c}, "
                    f"which does not send this round"
                )
        self._record(kind, _out_degrees(w), self._per_message_bytes(v, payload_bytes), w)

    def mix(self, weights, values, *, senders=None, payload_bytes=None, copies: bool = False,
            out: np.ndarray | None = None):
        v = self._check_values(values)
        w = _pattern(weights, self.n_agents)
        if out is not None:
            check_out(out, v.shape, v)
        if not copies:
            self._count_arcs("mix", w, v, senders, payload_bytes)
        n = self.n_agents
        product = mix_product(w, v.reshape(n, -1), None if out is None else out.reshape(n, -1))
        return product.reshape(v.shape) if out is None else out

    def mix_pairs(self, pairs, values, *, senders=None, payload_bytes=None,
                  out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`Communicator.mix_pairs` from the pairs, without building ``W``.

        scipy's CSR product accumulates each row into a zero in column order, so row ``i``
        of ``W v`` is ``(0 + 1/2 v_lo) + 1/2 v_hi`` for a pair ``lo < hi`` (the same for both
        rows of the pair) and ``0 + 1 v_i`` off the pairs; these are computed here in that
        order (the zero start turns ``-0.0`` into ``0.0``), so the bits are those of
        :meth:`mix`. Messages: one per paired agent, as :meth:`mix` counts ``W``'s arcs.
        Values that are not float64 take :meth:`mix` (the product's dtype rules).

        Parameters
        ----------
        pairs, values, senders, payload_bytes, out
            As :meth:`Communicator.mix_pairs`.

        Returns
        -------
        ndarray, shape of ``values``
            ``out`` when given.
        """
        v = self._check_values(values)
        p = _check_pairs(pairs, self.n_agents)
        if v.dtype != np.float64:
            return super().mix_pairs(p, v, senders=senders, payload_bytes=payload_bytes,
                                     out=out)
        if out is not None:
            check_out(out, v.shape, v)
        n = self.n_agents
        lo, hi = np.minimum(p[:, 0], p[:, 1]), np.maximum(p[:, 0], p[:, 1])
        if senders is not None:
            mask = self._sender_mask(senders)
            if not mask[p].all():
                # a pair reads both values: name the first row (CSR order) reading a silent one
                r = int(np.concatenate([lo[~mask[hi]], hi[~mask[lo]]]).min())
                c = int(hi[lo == r][0]) if np.any(lo == r) else int(lo[hi == r][0])
                raise ValueError(f"mix: weights[{r}, {c}] = 0.5 uses the value of agent {c}, "
                                 f"which does not send this round")
        counts = np.zeros(n, dtype=np.int64)
        counts[lo] = 1
        counts[hi] = 1
        self._record("mix", counts, self._per_message_bytes(v, payload_bytes))
        flat = v.reshape(n, -1)
        # rows off the pairs: 0 + 1 * v_i
        mixed = np.add(flat, 0.0, out=None if out is None else out.reshape(n, -1))
        pair_rows = np.zeros((lo.size, flat.shape[1]))  # a pair's common row, from zero
        # silent on inf - inf, as mix's sparse product is (values are checked where released)
        with np.errstate(invalid="ignore"):
            pair_rows += 0.5 * flat[lo]
            pair_rows += 0.5 * flat[hi]
        mixed[lo] = pair_rows
        mixed[hi] = pair_rows
        return mixed.reshape(v.shape) if out is None else out

    def gather_from_neighbors(
        self, weights, values, *, senders=None, payload_bytes=None, receivers=None, copies=False
    ) -> NeighborValues:
        v = self._check_values(values)
        w = _pattern(weights, self.n_agents)
        if receivers is None:
            rows, cols, vals, _ = _offdiag_arcs(w)
            arc_ids = np.arange(rows.size)
        else:
            start, stop = (int(r) for r in receivers)
            if not 0 <= start <= stop <= self.n_agents:
                raise ValueError(
                    f"argument 'receivers' must be (start, stop) with 0 <= start <= stop <= "
                    f"{self.n_agents}, got {receivers!r}"
                )
            # only this block's rows are touched; its first arc id is the number of non-zero
            # off-diagonal entries in the rows above
            rows, cols, vals, _ = _offdiag_arcs(w[start:stop], row_offset=start)
            before = np.count_nonzero(w.data[: w.indptr[start]]) - np.count_nonzero(
                w.diagonal()[:start]
            )
            arc_ids = before + np.arange(rows.size)
        if senders is not None:
            keep = self._sender_mask(senders)[cols]
            rows, cols, vals, arc_ids = rows[keep], cols[keep], vals[keep], arc_ids[keep]
        if not copies:
            counts = np.bincount(cols, minlength=self.n_agents).astype(np.int64)
            self._record("gather_from_neighbors", counts, self._per_message_bytes(v, payload_bytes))
        return NeighborValues(rows, cols, vals, v[cols], arc_ids)

    def send_along_arcs(self, weights, arc_values, *, payload_bytes=None) -> NeighborValues:
        w = _pattern(weights, self.n_agents)
        rows, cols, vals, _ = _offdiag_arcs(w)
        a = np.asarray(arc_values)
        if a.ndim < 1 or a.shape[0] != rows.size:
            raise ValueError(
                f"argument 'arc_values' must have one row per arc ({rows.size}), got shape "
                f"{a.shape}"
            )
        counts = np.bincount(cols, minlength=self.n_agents).astype(np.int64)
        # a row of arc_values is one message, like a row of values elsewhere
        self._record("send_along_arcs", counts, self._per_message_bytes(a, payload_bytes))
        return NeighborValues(rows, cols, vals, a.copy(), np.arange(rows.size))

    def publish(self, weights, copies, delta, *, senders=None, payload_bytes=None):
        c = self._check_values(copies, "copies")
        d = self._check_values(delta, "delta")
        if d.shape != c.shape:
            raise ValueError(f"argument 'delta' has shape {d.shape}, copies have {c.shape}")
        w = _pattern(weights, self.n_agents)
        mask = self._sender_mask(senders)
        counts = _out_degrees(w) * mask   # a sender messages each of its out-neighbours
        self._record("publish", counts, self._per_message_bytes(d, payload_bytes))
        if np.count_nonzero(mask) == mask.size:  # every agent sends: np.where would give d
            return c + d
        shape = (self.n_agents,) + (1,) * (c.ndim - 1)
        return c + np.where(mask.reshape(shape), d, 0.0)

    def gather(self, values, agents=None, *, payload_bytes=None) -> np.ndarray:
        v = self._check_values(values)
        idx = self._agent_index(agents)
        counts = np.bincount(idx, minlength=self.n_agents).astype(np.int64)
        self._record("gather", counts, self._per_message_bytes(v, payload_bytes))
        return v[idx]

    def broadcast(self, value, agents=None, *, payload_bytes=None) -> np.ndarray:
        value = np.asarray(value)
        idx = self._agent_index(agents)
        size = value.nbytes if payload_bytes is None else int(payload_bytes)
        self.stats.server_messages += idx.size
        self.stats.server_bytes += idx.size * size
        self.stats.messages += idx.size
        self.stats.bytes += idx.size * size
        self.stats.calls["broadcast"] = self.stats.calls.get("broadcast", 0) + 1
        return np.broadcast_to(value, (idx.size,) + value.shape).copy()
