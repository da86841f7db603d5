"""Server aggregation of the agents' local parameters (PriRFed eq. 3.1 and 3.2).

Both are post-processing of the agents' outputs and the public ``x^(t)``
(:ref:`prirfed-aggregation`), so they cost no privacy. Weights are data-size weights over the
sampled agents, ``w_i = N_i / sum_{l in S_t} N_l`` (the sizes are treated as public).
"""

from __future__ import annotations

import numpy as np

from rfed.manifolds.base import Manifold

__all__ = ["tangent_mean", "karcher_aggregate", "data_size_weights", "AGGREGATIONS"]

AGGREGATIONS = ("tangent", "karcher")


def data_size_weights(counts: np.ndarray) -> np.ndarray:
    """``N_i / sum N_l`` over the sampled agents, shape ``(A,)``.

    Parameters
    ----------
    counts : array, shape ``(A,)``
        The sampled agents' dataset sizes (public).

    Returns
    -------
    ndarray, shape ``(A,)``
        Weights summing to one.
    """
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 1 or counts.size == 0 or not np.all(np.isfinite(counts)) \
            or np.any(counts < 0) or counts.sum() <= 0:
        raise ValueError("argument 'counts' must be a non-empty 1-d array of finite, "
                         f"non-negative numbers with a positive sum, got {counts.tolist()}")
    return counts / counts.sum()


def tangent_mean(
    manifold: Manifold, x: np.ndarray, points: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    r"""PriRFed eq. (3.2): :math:`\mathrm{Exp}_x(\sum_i w_i \mathrm{Log}_x(x_i))`.

    One Riemannian gradient step of unit size on the Karcher objective (3.1), started at ``x``.

    Parameters
    ----------
    manifold : Manifold
        The parameters' manifold.
    x : array, shape ``point_shape``
        The current global parameter :math:`x^{(t)}`.
    points : array, shape ``(A, *point_shape)``
        The received local parameters.
    weights : array, shape ``(A,)``
        Non-negative, summing to one.

    Returns
    -------
    ndarray, shape ``point_shape``
        The aggregated global parameter :math:`x^{(t+1)}`.
    """
    weights = _check_weights(weights, len(points))
    k = len(manifold.point_shape)
    logs = manifold.log(x, points)
    step = np.sum(np.asarray(weights).reshape((-1,) + (1,) * k) * logs, axis=0)
    return manifold.exp(x, step)


def karcher_aggregate(
    manifold: Manifold,
    x: np.ndarray,
    points: np.ndarray,
    weights: np.ndarray,
    *,
    tol: float = 1e-12,
    max_iter: int = 200,
) -> np.ndarray:
    r"""Exact weighted Karcher mean (3.1): iterate (3.2) from ``x`` until the gradient norm
    :math:`\|\sum_i w_i \mathrm{Log}_y(x_i)\|_y` is below ``tol``.

    Parameters
    ----------
    manifold : Manifold
        The parameters' manifold.
    x : array, shape ``point_shape``
        The current global parameter (the iteration's start).
    points : array, shape ``(A, *point_shape)``
        The received local parameters.
    weights : array, shape ``(A,)``
        Non-negative, summing to one.
    tol : float
        Tolerance on the gradient norm.
    max_iter : int
        Iteration cap.

    Returns
    -------
    ndarray, shape ``point_shape``
        The weighted Karcher mean.
    """
    weights = _check_weights(weights, len(points))
    return manifold.mean(points, weights, tol=tol, max_iter=max_iter, init=x)


def _check_weights(weights: np.ndarray, n_points: int) -> np.ndarray:
    """Aggregation weights: shape ``(A,)``, finite, non-negative, summing to one (1e-9)."""
    w = np.asarray(weights, dtype=float)
    if w.shape != (n_points,):
        raise ValueError(f"argument 'weights' must have shape ({n_points},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"argument 'weights' must be finite, got {w.tolist()}")
    if np.any(w < 0) or abs(w.sum() - 1.0) > 1e-9:
        raise ValueError("argument 'weights' must be non-negative and sum to one, got sum "
                         f"{w.sum()!r} (min {w.min()!r})")
    return w
