"""Clipped sums of per-sample gradients that are outer products, in closed form.

For a linear model (logistic regression, a linear SVM, softmax regression) the per-sample
gradient of the data term is an outer product: with the record's features ``a_j`` (``d_in``)
and its residual ``r_j`` (``k`` entries: ``dl/dm * b`` for a binary linear model, ``p - e_y``
for softmax regression),

.. math:: g_j = [\\mathrm{vec}(a_j r_j^T),\\; \\beta r_j] + s,

where ``beta`` is 1 when the model has a bias row (softmax regression) and 0 otherwise, and
``s`` is the gradient of a regularizer shared by every record (zero without one). Its norm is
closed form,

.. math:: \\|g_j\\|^2 = (\\|a_j\\|^2 + \\beta) \\|r_j\\|^2 + 2 (a_j^T S_W r_j + \\beta r_j^T s_b)
          + \\|s\\|^2

(``S_W``, ``s_b`` the weight and bias blocks of ``s``), and the clipped sum with clip factors
``c_j = min(1, C / ||g_j||)`` is ``[A^T (c * R) + (sum c) S_W, (c * R) summed + (sum c) s_b]``:
no per-sample gradient is ever formed. A batch of ``B`` records costs ``O(B (d_in + k))``
memory beyond its features instead of the ``O(B d_in k)`` of the materialised gradients.

The arithmetic differs from clipping the materialised gradients only in rounding (the norms
are summed in another order); :func:`outer_clipped_sum` is kept equal to
:meth:`rfed.problems.Problem.clipped_grad_sum` on random problems by the tests. Precision:
features given in float32 stay float32 in the products with the (float32) weights, as the
logits are; the residuals, the norms, the clip factors and the clipped sum are float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CAST_BYTES", "outer_clipped_sum", "row_sq_norms"]

#: Largest float64 copy of float32 features made at once (bytes). Blocks of this size stay in
#: the heap that ``rfed run`` keeps (its glibc malloc settings) instead of being mapped and
#: unmapped, with every page faulted in again, at each round.
CAST_BYTES = 16 * 2**20


def _block_rows(d: int) -> int:
    return max(1, CAST_BYTES // (8 * max(1, d)))


def row_sq_norms(a: np.ndarray, rows: int | None = None) -> np.ndarray:
    """Squared norms of the rows (last axis) of ``a``, accumulated in float64.

    Float32 rows are converted ``rows`` at a time, so that their float64 copy stays small.

    Parameters
    ----------
    a : array, shape ``(*lead, d)``
    rows : int, optional
        Rows converted at a time (float32 input; default: ``CAST_BYTES`` of float64).

    Returns
    -------
    ndarray, shape ``lead``, float64
    """
    if a.dtype == np.float64:
        return np.einsum("...i,...i->...", a, a)
    rows = _block_rows(a.shape[-1]) if rows is None else rows
    flat = a.reshape(-1, a.shape[-1])
    out = np.empty(flat.shape[0])
    for lo in range(0, flat.shape[0], rows):
        block = flat[lo:lo + rows].astype(np.float64)
        out[lo:lo + rows] = np.einsum("ij,ij->i", block, block)
    return out.reshape(a.shape[:-1])


def outer_clipped_sum(features: np.ndarray, residuals: np.ndarray, bound: float | None,
                      mask: np.ndarray | None = None, *, bias: bool = False,
                      shared: np.ndarray | None = None,
                      feature_sq_norms: np.ndarray | None = None,
                      shared_dot_features: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Clipped sum of the gradients ``[vec(a_j r_j^T), beta r_j] + s`` (module docstring).

    Parameters
    ----------
    features : array, shape ``(*lead, b, d_in)``
        ``a_j`` (float32 or float64).
    residuals : array, shape ``(*lead, b, k)``
        ``r_j``, float64.
    bound : float or None
        The clip level ``C``; ``None`` sums the gradients unclipped.
    mask : bool array, shape ``(*lead, b)``, optional
        Records to include (padding rows are ``False``).
    bias : bool
        Whether the gradient has the bias block ``r_j`` (``beta = 1``).
    shared : array, shape ``(*lead, d_in * k + bias * k)``, optional
        The regularizer's gradient ``s`` (the same for every record of a leading index);
        ``None`` for none.
    feature_sq_norms : array, shape ``(*lead, b)``, optional
        ``||a_j||^2`` if the caller has them (computed otherwise).
    shared_dot_features : array, shape ``(*lead, b, k)``, optional
        ``S_W^T a_j`` if the caller has them (with ``shared`` and a bound; computed otherwise).

    Returns
    -------
    total : ndarray, shape ``(*lead, d_in * k + bias * k)``
        The sum of the clipped gradients (of the included records).
    n_clipped : int ndarray, shape ``lead``
        How many included records had ``||g_j|| > C``.
    """
    r = residuals
    d_in, k = features.shape[-1], r.shape[-1]
    n_w = d_in * k
    s_w = s_b = None
    if shared is not None:
        s_w = shared[..., :n_w].reshape(shared.shape[:-1] + (d_in, k))
        s_b = shared[..., n_w:] if bias else None
    scale = None
    n_clipped: Any   # an intp array; a numpy intp scalar for one batch without an axis
    if bound is None:
        n_clipped = np.zeros(r.shape[:-2], dtype=int)
    else:
        sq_a = row_sq_norms(features) if feature_sq_norms is None else feature_sq_norms
        r_sq = np.square(r[..., 0]) if k == 1 else np.einsum("...i,...i->...", r, r)
        sq = (sq_a + 1.0) * r_sq if bias else np.multiply(sq_a, r_sq, out=r_sq)
        if shared is not None and s_w is not None:
            wa = shared_dot_features
            if wa is None:
                wa = np.matmul(features, s_w.astype(features.dtype, copy=False))
            cross = np.einsum("...i,...i->...", wa, r)
            if s_b is not None:
                cross = cross + np.einsum("...bi,...i->...b", r, s_b)
            sq = sq + 2.0 * cross + np.einsum("...i,...i->...", shared, shared)[..., None]
            np.maximum(sq, 0.0, out=sq)     # rounding near a zero gradient
        norms = np.sqrt(sq, out=sq)
        over = norms > bound
        # C / max(||g||, C): exactly 1 where ||g|| <= C, C / ||g|| elsewhere
        scale = bound / np.maximum(norms, bound, out=norms)
        counted = over if mask is None else over & mask
        # the counts of np.count_nonzero(counted, axis=-1) (intp), without its fixed cost
        # of several microseconds a call on a small batch
        n_clipped = (np.intp(np.count_nonzero(counted)) if counted.ndim == 1
                     else counted.sum(axis=-1))
    if mask is not None:
        scale = np.where(mask, 1.0 if scale is None else scale, 0.0)
    if k == 1 and features.ndim == 2 and features.dtype == np.float64:
        # one batch of a binary linear model: A^T (c * r), the matrix-vector product that the
        # general form below takes as a one-column matrix (the same floats)
        rs = r[:, 0] if scale is None else r[:, 0] * scale
        total = features.T @ rs
        rs = rs[:, None]   # (b, 1), for the bias block below
    else:
        rs = r if scale is None else r * scale[..., None]
        gw = _transposed_product(features, rs)                  # (*lead, d_in, k), float64
        total = gw.reshape(gw.shape[:-2] + (n_w,))
    if bias:
        total = np.concatenate([total, rs.sum(axis=-2)], axis=-1)
    if shared is not None:
        weight = (np.full(r.shape[:-2], float(r.shape[-2])) if scale is None
                  else scale.sum(axis=-1))
        total = total + weight[..., None] * shared
    return total, n_clipped


def _transposed_product(features: np.ndarray, rs: np.ndarray) -> np.ndarray:
    """``A^T R`` per leading index, float64: ``(*lead, d_in, k)``.

    Float64 features: one batched product. Float32 features are converted to float64 a block
    of rows at a time (``CAST_BYTES``) and the blocks' products summed, instead of one
    float64 copy of the whole batch (260 MB per round at 10 agents x 819 records x 3,969
    features): the same float64 products, summed in another order (rounding only).
    """
    if features.dtype == np.float64:
        return np.matmul(np.swapaxes(features, -1, -2), rs)
    lead, (b, d_in), k = features.shape[:-2], features.shape[-2:], rs.shape[-1]
    flat_a = features.reshape((-1, b, d_in))
    flat_r = rs.reshape((-1, b, k))
    out = np.zeros((flat_a.shape[0], d_in, k))
    rows = _block_rows(d_in)
    for i in range(flat_a.shape[0]):
        for lo in range(0, b, rows):
            block = flat_a[i, lo:lo + rows].astype(np.float64)
            out[i] += block.T @ flat_r[i, lo:lo + rows]
    return out.reshape(lead + (d_in, k))
