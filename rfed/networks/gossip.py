r"""Riemannian gossip: consensus steps and tangent-space mixing, batched over the arcs of W.

For points :math:`x_1, \dots, x_n` on a manifold and weights :math:`W`, one gossip step is

.. math:: x_i \leftarrow \mathrm{Exp}_{x_i}\Big(\gamma \sum_j w_{ij}\, \mathrm{Log}_{x_i}(x_j)\Big).

It is computed as: gather :math:`x_j` along the off-diagonal arcs (CSR order, through the
communicator), one batched ``log`` over all arcs, one sparse segment sum per receiver, one
batched ``exp``; O(arcs) work, in chunks of at most ``max_chunk_arcs`` arcs to bound memory.

On Euclidean space :math:`\mathrm{Log}_{x_i}(x_j) = x_j - x_i` and :math:`\mathrm{Exp}` is
addition, so the step is :math:`x_i + \gamma((WX)_i - r_i x_i)` with :math:`r = W\mathbf 1`; for a
row-stochastic W and :math:`\gamma = 1` this is exactly :math:`WX`. This module evaluates that
closed form (one product, :func:`rfed.networks.comm.mix_product`) whenever the manifold is
:class:`~rfed.manifolds.Euclidean`; algorithms never special-case it. W's checks are kept on a
frozen W (:func:`rfed.networks.freeze_weights`), so a call costs the product and one pass over
the points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rfed.manifolds.base import CheckedManifold, Manifold
from rfed.manifolds.euclidean import Euclidean
from rfed.networks.comm import (
    Communicator,
    InProcessCommunicator,
    _pattern,
    check_out,
    mix_product,
    segment_sum,
    weights_fact,
)
from rfed.networks.mixing import ATOL, check_row_stochastic

__all__ = [
    "riemannian_gossip",
    "consensus_direction",
    "mix_tangent",
    "consensus_error",
]

#: Default bound on the number of arcs processed at once (memory ~ arcs * point size * a few).
MAX_CHUNK_ARCS = 1 << 16


def _check_points(manifold, points, name: str = "points") -> np.ndarray:
    """``points`` as a float array ``(n_agents, *point_shape)`` of ``manifold``."""
    x = np.asarray(points, dtype=float)
    k = len(manifold.point_shape)
    if x.ndim != k + 1 or x.shape[1:] != manifold.point_shape:
        raise ValueError(
            f"argument '{name}' has shape {x.shape}; expected (n_agents, "
            f"{', '.join(map(str, manifold.point_shape))}) for {manifold}"
        )
    return x


def _setup(manifold, points, weights, comm, name="points", need_comm=True, check_weights=True):
    """Checked ``(points, weights, comm)``; ``comm`` stays ``None`` when not given and
    ``need_comm`` is false (the caller then counts nothing: no one could read the counts);
    ``check_weights=False`` leaves W's finiteness to the caller."""
    if not isinstance(manifold, (Manifold, CheckedManifold)):
        raise TypeError(
            f"argument 'manifold' must be an rfed Manifold, got {type(manifold).__name__}"
        )
    x = _check_points(manifold, points, name)
    if comm is None:
        if not need_comm:
            w = _pattern(weights, x.shape[0])
            if check_weights:
                _check_finite_weights(w)
            return x, w, None
        comm = InProcessCommunicator(x.shape[0])
    elif not isinstance(comm, Communicator):
        raise TypeError(f"argument 'comm' must be a Communicator, got {type(comm).__name__}")
    elif comm.n_local != x.shape[0]:
        raise ValueError(f"argument 'comm' serves {comm.n_local} agents, points have "
                         f"{x.shape[0]}")
    # a distributed communicator holds a block of rows; the weights are the full matrix
    w = _pattern(weights, comm.n_agents)
    if check_weights:
        _check_finite_weights(w)
    return x, w, comm


def _check_finite_weights(w: sp.csr_matrix) -> None:
    if w.nnz and not weights_fact(w, "finite", lambda m: bool(np.all(np.isfinite(m.data)))):
        raise ValueError(
            f"argument 'weights' has {int(np.sum(~np.isfinite(w.data)))} non-finite entries "
            f"(NaN/inf)"
        )


def _check_euclidean_points(manifold, x: np.ndarray, name: str) -> None:
    """Raise as ``manifold.check_point`` does unless every entry of ``x`` is finite (what a
    point of Euclidean space is)."""
    if not np.isfinite(x).all():
        n_bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        raise ValueError(f"{manifold}: argument '{name}' has {n_bad} non-finite value(s) "
                         f"(NaN/inf)")


@dataclass(frozen=True)
class _EuclideanChecks:
    """What the Euclidean closed form checks of W, computed once for a frozen W."""

    finite: bool
    row_stochastic: bool
    unit_row_sums: bool   # W 1 == 1 exactly, as _row_sums computes it


def _euclidean_checks(w: sp.csr_matrix) -> _EuclideanChecks:
    finite = not w.nnz or bool(np.all(np.isfinite(w.data)))
    return _EuclideanChecks(finite, finite and _row_stochastic(w),
                            finite and bool(np.all(_row_sums(w, 1) == 1.0)))


def _is_euclidean(manifold) -> bool:
    """Euclidean space, possibly behind a validating view (where the W @ X closed form holds)."""
    return isinstance(getattr(manifold, "manifold", manifold), Euclidean)


def _row_sums(w: sp.csr_matrix, ndim: int) -> np.ndarray:
    """``W 1``, shaped ``(n, 1, ...)`` to broadcast against ``ndim``-d per-agent arrays.

    One sparse matvec; ``w.sum(axis=1)`` goes through scipy's matrix type and costs several times
    more, which shows in a round of a few hundred microseconds.
    """
    n = w.shape[0]
    sums = weights_fact(w, "row_sums", lambda m: m @ np.ones(m.shape[1]))
    return sums.reshape((n,) + (1,) * (ndim - 1))


def _row_stochastic(w: sp.csr_matrix) -> bool:
    """Non-negative with rows summing to 1 within ``ATOL`` (no message: the full check names
    the offending row)."""
    return not (w.nnz and w.data.min() < 0) and bool(np.all(np.abs(_row_sums(w, 1) - 1.0) <= ATOL))


def _local_rows(w: sp.csr_matrix, comm: Communicator) -> sp.csr_matrix:
    """The rows of ``w`` of ``comm``'s block of agents (one process: ``w`` itself, no copy)."""
    if comm.n_local == comm.n_agents:
        return w
    start = int(comm.agents[0]) if comm.n_local else 0
    return w[start:start + comm.n_local]


def _block_rows(w: sp.csr_matrix, comm: Communicator) -> tuple[sp.csr_matrix, np.ndarray]:
    """The rows of ``w`` of ``comm``'s block of agents and their diagonal entries ``w_ii``."""
    rows = _local_rows(w, comm)
    start = int(comm.agents[0]) if comm.n_local and comm.n_local < comm.n_agents else 0
    return rows, rows.diagonal(k=start)


def _receiver_chunks(w: sp.csr_matrix, max_chunk_arcs: int) -> list[tuple[int, int]]:
    """Consecutive receiver ranges of at most ``max_chunk_arcs`` stored entries (>= 1 row)."""
    n = w.shape[0]
    chunks, start = [], 0
    while start < n:
        stop = int(np.searchsorted(w.indptr, w.indptr[start] + max_chunk_arcs, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        chunks.append((start, stop))
        start = stop
    return chunks


def consensus_direction(
    manifold: Manifold,
    weights,
    points: np.ndarray,
    base: np.ndarray | None = None,
    *,
    comm: Communicator | None = None,
    payload_bytes=None,
    copies: bool = False,
    max_chunk_arcs: int = MAX_CHUNK_ARCS,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""Tangent consensus direction :math:`v_i = \sum_j w_{ij}\, \mathrm{Log}_{b_i}(x_j)`.

    Parameters
    ----------
    manifold : Manifold
    weights : sparse matrix, shape ``(n, n)``
    points : ndarray, shape ``(n, *point_shape)``
        :math:`x_j`, sent along the arcs of ``weights``.
    base : ndarray, shape ``(n, *point_shape)``, optional
        :math:`b_i`, held by agent ``i``; defaults to ``points`` (then the ``j = i`` term is zero).
        DO-ADP on a manifold reads public copies: ``base = points = xhat``
        (:ref:`doadp-manifold`).
    comm : Communicator, optional
        Counts the point messages (a fresh in-process one if omitted).
    copies : bool
        ``points`` are public copies every receiver already holds (DO-ADP's :math:`\hat x`, kept
        in sync by :meth:`Communicator.publish`): nothing is sent or counted.
    out : ndarray, shape ``(n, *point_shape)``, optional
        The array to write the result into (float64, C-contiguous, sharing no memory with
        ``points`` or ``base``; as :func:`riemannian_gossip`'s ``out``). Default: a fresh
        array.

    Returns
    -------
    ndarray, shape ``(n, *point_shape)``, tangent at ``base``; ``out`` when given.
    """
    x, w, comm = _setup(manifold, points, weights, comm)
    b = x if base is None else np.asarray(base, dtype=float)
    if b.shape != x.shape:
        raise ValueError(f"argument 'base' has shape {b.shape}; expected {x.shape}")
    n = x.shape[0]
    if _is_euclidean(manifold):
        if out is not None:
            check_out(out, x.shape, x, b)
        rows = _local_rows(w, comm)
        if (out is not None and rows is w
                and weights_fact(w, "euclidean_checks", _euclidean_checks).unit_row_sums):
            # W 1 = 1 exactly: r b is b bit for bit, so wx - b in the product's array
            wx = comm.mix(w, x, payload_bytes=payload_bytes, copies=copies, out=out)
            return np.subtract(wx, b, out=wx)
        wx = comm.mix(w, x, payload_bytes=payload_bytes, copies=copies)
        r = _row_sums(rows, x.ndim)
        direction = np.multiply(r, b, out=out)
        return np.subtract(wx, direction, out=direction)   # wx - r b
    found = out
    rows, diag = _block_rows(w, comm)
    out = np.zeros_like(x)
    for start, stop in _receiver_chunks(rows, max_chunk_arcs):
        nb = comm.gather_from_neighbors(
            w, x, receivers=(start, stop), payload_bytes=payload_bytes, copies=copies
        )
        if nb.receivers.size == 0:
            continue
        logs = manifold.log(b[nb.receivers], nb.values)
        out[start:stop] = segment_sum(nb.receivers - start, logs, stop - start, nb.weights)
    if base is not None:
        # the j = i term: agent i's own point seen from its base, no message
        out = out + diag.reshape((n,) + (1,) * (x.ndim - 1)) * manifold.log(b, x)
    return _into(out, found)


def riemannian_gossip(
    manifold: Manifold,
    points: np.ndarray,
    weights,
    gamma: float = 1.0,
    *,
    comm: Communicator | None = None,
    payload_bytes=None,
    max_chunk_arcs: int = MAX_CHUNK_ARCS,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""One consensus step :math:`x_i \leftarrow \mathrm{Exp}_{x_i}(\gamma \sum_j w_{ij}
    \mathrm{Log}_{x_i}(x_j))` for all agents at once.

    Parameters
    ----------
    manifold : Manifold
    points : ndarray, shape ``(n, *point_shape)``
    weights : sparse matrix, shape ``(n, n)``
        Row-stochastic (checked: non-negative, finite, rows summing to 1; typically doubly
        stochastic, see :mod:`rfed.networks.mixing`).
    gamma : float
        Consensus step size (DO-ADP's :math:`\gamma`; 1 for plain gossip).
    comm : Communicator, optional
    out : ndarray, shape ``(n, *point_shape)``, optional
        The array to write the new points into (float64, C-contiguous, sharing no memory with
        ``points``; see :func:`rfed.networks.comm.check_out`), e.g. the points of a state
        two rounds old that a run reuses: on Euclidean space the product is computed into it,
        with the bits of a fresh result. Default: a fresh array.

    Returns
    -------
    ndarray, shape ``(n, *point_shape)``
        ``out`` when given.

    Raises
    ------
    ValueError
        ``weights`` is not row-stochastic or has NaN/inf entries; ``points`` are not points of
        ``manifold`` (or not finite).

    Notes
    -----
    On Euclidean space returns :math:`X + \gamma(WX - \mathrm{diag}(W\mathbf 1) X)`, which is
    :math:`WX` for row-stochastic W and :math:`\gamma = 1` (one product, sparse or, for a dense
    frozen W, dense: the same result to rounding, ``docs/guide/scale.md``). On a sphere
    the step is defined while no two neighbours are antipodal (``AntipodalError`` otherwise).
    """
    if not math.isfinite(gamma):
        raise ValueError(f"argument 'gamma' must be finite, got {gamma!r}")
    # the step averages neighbours only when W is row-stochastic, and exp/log are defined only
    # for points of the manifold: refuse anything else rather than return a wrong point
    if _is_euclidean(manifold):
        x, w, comm = _setup(manifold, points, weights, comm, need_comm=False, check_weights=False)
        # W's tests are kept on a frozen W; the full checks run only to name what is wrong
        checks = weights_fact(w, "euclidean_checks", _euclidean_checks)
        if not checks.finite:
            _check_finite_weights(w)
        _check_euclidean_points(manifold, x, "points")
        block = comm is not None and comm.n_local < comm.n_agents
        if block or not checks.row_stochastic:
            check_row_stochastic(w, "weights")
        if comm is None:
            n = x.shape[0]
            if out is not None:
                check_out(out, x.shape, x)
            wx = mix_product(w, x.reshape(n, -1),
                             None if out is None else out.reshape(n, -1)).reshape(x.shape)
        else:
            wx = comm.mix(w, x, payload_bytes=payload_bytes, out=out)
        if gamma == 1.0 and not block and checks.unit_row_sums:
            # X + (WX - diag(W 1) X) with W 1 = 1 exactly: WX itself (the closed form adds
            # 0 * x_i to a product that is never -0.0, which changes no bit)
            return wx if out is None else out
        r = _row_sums(w if comm is None else _local_rows(w, comm), x.ndim)
        if out is None:
            return gamma * wx + (1.0 - gamma * r) * x
        # the same two products and their sum, the first one in place
        np.multiply(gamma, wx, out=wx)
        wx += (1.0 - gamma * r) * x
        return out
    x, w, comm = _setup(manifold, points, weights, comm)
    manifold.check_point(x, "points")
    if comm.n_local < comm.n_agents or not weights_fact(w, "row_stochastic", _row_stochastic):
        check_row_stochastic(w, "weights")
    v = consensus_direction(
        manifold, w, x, comm=comm, payload_bytes=payload_bytes, max_chunk_arcs=max_chunk_arcs
    )
    return _into(manifold.exp(x, gamma * v), out)


def _into(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``result``, copied into ``out`` when given (the paths that compute elsewhere)."""
    if out is None:
        return result
    check_out(out, result.shape, result)
    out[...] = result
    return out


def mix_tangent(
    manifold: Manifold,
    weights,
    base_from: np.ndarray,
    tangents: np.ndarray,
    base_to: np.ndarray,
    *,
    comm: Communicator | None = None,
    payload_bytes=None,
    max_chunk_arcs: int = MAX_CHUNK_ARCS,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""Mix tangent vectors living at different points:
    :math:`v_i = \sum_j w_{ij}\, P_{y_j \to z_i}(u_j)`.

    Each sender ``j`` transmits its base point :math:`y_j` and its vector
    :math:`u_j \in T_{y_j}M`; receiver ``i`` parallel-transports them to its own point
    :math:`z_i` and takes the weighted sum (e.g. DPDL's momentum gossip
    :math:`v^i_t = \sum_j w_{ij} P_{x^j_{t-1} \to x^i_t}(\tilde v^j_t)` (:ref:`dpdl-manifold`)).

    Parameters
    ----------
    weights : sparse matrix, shape ``(n, n)``
    base_from : ndarray, shape ``(n, *point_shape)``
    tangents : ndarray, shape ``(n, *point_shape)``, tangent at ``base_from``
    base_to : ndarray, shape ``(n, *point_shape)``
    payload_bytes : optional
        Size of one message; default: the point and the vector, dense.
    out : ndarray, shape ``(n, *point_shape)``, optional
        The array to write the result into (as :func:`riemannian_gossip`'s ``out``; on
        Euclidean space the product is computed into it). Default: a fresh array.

    Returns
    -------
    ndarray, shape ``(n, *point_shape)``, tangent at ``base_to``. On Euclidean space exactly
    ``W @ tangents``; ``out`` when given.
    """
    y, w, comm = _setup(manifold, base_from, weights, comm, "base_from")
    u = np.asarray(tangents, dtype=float)
    z = np.asarray(base_to, dtype=float)
    for arr, nm in ((u, "tangents"), (z, "base_to")):
        if arr.shape != y.shape:
            raise ValueError(f"argument '{nm}' has shape {arr.shape}; expected {y.shape}")
    n = y.shape[0]
    if _is_euclidean(manifold):
        return comm.mix(w, u, payload_bytes=payload_bytes, out=out)
    packed = np.stack([y, u], axis=1)  # one message carries the point and the vector
    rows, diag = _block_rows(w, comm)
    mixed = np.zeros_like(u)
    for start, stop in _receiver_chunks(rows, max_chunk_arcs):
        nb = comm.gather_from_neighbors(
            w, packed, receivers=(start, stop), payload_bytes=payload_bytes
        )
        if nb.receivers.size == 0:
            continue
        moved = manifold.transport(nb.values[:, 0], z[nb.receivers], nb.values[:, 1])
        mixed[start:stop] = segment_sum(nb.receivers - start, moved, stop - start, nb.weights)
    own = diag.reshape((n,) + (1,) * (y.ndim - 1)) * manifold.transport(y, z, u)
    return _into(mixed + own, out)


def consensus_error(
    manifold: Manifold,
    points: np.ndarray,
    center: np.ndarray | None = None,
    *,
    return_center: bool = False,
):
    r"""Consensus error :math:`\frac1n \sum_i d(x_i, \bar x)^2` around the Karcher mean.

    Parameters
    ----------
    points : ndarray, shape ``(n, *point_shape)``
    center : ndarray, shape ``point_shape``, optional
        :math:`\bar x`; by default ``manifold.mean(points)`` (the arithmetic mean on Euclidean
        space, where the error is :math:`\frac1n\|X - \mathbf 1 \bar x^T\|_F^2`).
    return_center : bool
        Also return :math:`\bar x`.

    Returns
    -------
    float, or (float, ndarray) with ``return_center``.
    """
    x = _check_points(manifold, points)
    c = manifold.mean(x) if center is None else np.asarray(center, dtype=float)
    err = float(np.mean(manifold.dist(x, c) ** 2))
    return (err, c) if return_center else err
