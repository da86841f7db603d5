"""Clipping: bound each sample's contribution before noise is added.

* :func:`clip_by_norm` is the clipping of PriRFed (Alg. 2 line 4; :ref:`prirfed-clipping`) and DPDL
  (eq. 9): ``clip_tau(v) = min(1, tau / ||v||_x) v`` with the **Riemannian** norm at the point where
  ``v`` lives, and ``clip_tau(0) = 0``.
* :func:`clip_coordinates` clamps every coordinate to ``[-bound, bound]``, which is what DO-ADP's
  Assumption 2 (``|g_j| <= G / sqrt(d)``) needs for its ``sqrt(k/d)`` sensitivity
  (:ref:`doadp-coordinate-clipping`): L2 clipping does not bound the selected coordinates that way.

Floating point: a clipped vector has norm ``bound`` up to rounding (a relative 1e-15 or so).

Bad input raises: a NaN or infinite gradient (it would make the clipped sum NaN and the release
meaningless, or silently unbounded) and a bound that is not finite and > 0 (a zero bound
releases nothing useful and a zero sensitivity would make the accountant divide by zero).
"""

from __future__ import annotations

import numpy as np

from rfed.manifolds.base import Manifold
from rfed.privacy._checks import check_nonneg_array
from rfed.privacy._tangent import as_array, blocks, expand_batch, scale

__all__ = ["clip_by_norm", "clip_coordinates", "clip_factors"]


def clip_factors(norms: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """The factors ``min(1, bound / norm)`` (1 where the norm is 0), broadcast.

    Parameters
    ----------
    norms : ndarray, shape ``batch``
        Norms of the vectors to clip.
    bound : float or ndarray, broadcastable to ``batch``
        Clipping levels.

    Returns
    -------
    ndarray, shape ``batch``
        The factors in [0, 1].
    """
    bound = check_nonneg_array(bound, "bound")
    norms = np.asarray(norms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > bound, bound / np.where(norms > 0, norms, 1.0), 1.0)
    return factor


def _positive_bound(bound) -> np.ndarray:
    bound = check_nonneg_array(bound, "bound")
    if (float(bound) <= 0) if bound.ndim == 0 else bool((bound <= 0).any()):
        raise ValueError("argument 'bound' must be > 0 everywhere (a clipping level of 0 "
                         "releases nothing and has no finite noise multiplier)")
    return bound


def _check_finite(manifold: Manifold | None, a, name: str) -> None:
    parts = None if manifold is None else blocks(manifold)
    arrays = a if parts is not None else (a,)
    for arr in arrays:
        if not np.isfinite(arr).all():
            raise ValueError(f"argument '{name}' contains NaN or inf (a per-sample gradient "
                             "that is not finite cannot be clipped)")


def clip_by_norm(
    manifold: Manifold, x: np.ndarray, g: np.ndarray, bound: float | np.ndarray, *,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-sample clipping of tangent vectors by their Riemannian norm.

    ``clip(g) = min(1, bound / ||g||_x) g``.

    Parameters
    ----------
    manifold : Manifold
    x : array, shape ``(*batch, *point_shape)`` (a tuple of blocks for a ``Product``)
        Base points (e.g. one per agent).
    g : array, shape ``(*batch, n_samples, *point_shape)`` (a tuple of such for a ``Product``)
        Tangent vectors at ``x``: sample axis ``n_samples`` right after the batch axes of ``x``.
        ``x`` is broadcast against ``g`` by inserting that sample axis, so ``x`` of shape
        ``(n_agents, d+1)`` pairs with ``g`` of shape ``(n_agents, n_samples, d+1)``.
    bound : float or array
        Clipping level ``tau > 0``, finite; an array must broadcast against
        ``(*batch, n_samples)`` (pass ``tau[:, None]`` for one level per agent).
    out : ndarray, optional
        An array of ``g``'s shape to write the clipped vectors into (``g`` itself clips in
        place), for a manifold of one block; the same values. Ignored for a ``Product``.

    Returns
    -------
    clipped : array, shape of ``g``
        Each vector with norm at most ``bound``, same direction.
    n_clipped : int array, shape ``(*batch,)``
        How many samples were shortened, per batch element (``n_clipped.sum()`` for the total).
    """
    bound = _positive_bound(bound)
    g = as_array(manifold, g, "g", extra_axes=1)
    x = as_array(manifold, x, "x")
    _check_finite(manifold, g, "g")
    _check_finite(manifold, x, "x")
    norms = manifold.norm(expand_batch(manifold, x, -1), g)
    factor = clip_factors(norms, bound)
    if out is not None and blocks(manifold) is None:
        # scale()'s product, into ``out``
        clipped = np.multiply(g, factor.reshape(factor.shape + (1,) * len(manifold.point_shape)),
                              out=out)
    else:
        clipped = scale(manifold, g, factor)
    n_clipped = np.sum(factor < 1.0, axis=-1)
    return clipped, n_clipped


def clip_coordinates(
    v: np.ndarray, bound: float | np.ndarray, ndim: int = 1, *, count_clipped: bool = True,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-coordinate clipping: clamp each coordinate to ``[-bound, bound]``.

    Parameters
    ----------
    v : array, shape ``(*batch, *vector_shape)``
        The last ``ndim`` axes form one vector.
    bound : float or array
        ``> 0``, finite; scalar or per-coordinate, broadcastable to ``v`` (DO-ADP:
        ``G / sqrt(d)``).
    ndim : int
        Number of trailing axes that make up one vector.
    count_clipped : bool
        Count the clamped coordinates (``False``: ``n_clipped`` is ``None``, for a caller that
        does not report them).
    out : float64 array, shape of ``v``, optional
        Where the clipped values are written (it may be ``v`` itself when the caller owns it
        and does not count; the same values as a fresh array). Needs a scalar ``bound``.

    Returns
    -------
    clipped : array, shape of ``v``
    n_clipped : int array, shape ``(*batch,)``, or None
        Number of clamped coordinates in each vector.
    """
    bound = _positive_bound(bound)
    v = np.asarray(v, dtype=float)
    if not np.isfinite(v).all():
        _check_finite(None, v, "v")
    if not isinstance(ndim, (int, np.integer)) or not 0 <= ndim <= v.ndim:
        raise ValueError(f"argument 'ndim' must be an int in [0, v.ndim={v.ndim}], got {ndim!r}")
    if bound.ndim == 0 and v.ndim:
        # clip(v, -b, b) = min(max(v, -b), b) for finite v (checked above) and b > 0: the
        # same values without np.clip's argument handling
        b = float(bound)
        if out is not None and count_clipped and out is v:
            raise ValueError("argument 'out' cannot be 'v' when the clipped are counted")
        clipped = np.maximum(v, -b, out=out)
        np.minimum(clipped, b, out=clipped)
    elif out is not None:
        raise ValueError("argument 'out' needs a scalar 'bound'")
    else:
        clipped = np.clip(v, -bound, bound)
    if not count_clipped:
        return clipped, None
    changed = clipped != v
    n_clipped = np.sum(changed, axis=tuple(range(v.ndim - ndim, v.ndim))) if ndim else changed
    return clipped, n_clipped.astype(int)
