"""Array helpers that also accept the tuple-valued points and vectors of a product manifold."""

from __future__ import annotations

from typing import Any

import numpy as np

from rfed.manifolds.base import Manifold


def blocks(manifold: Manifold) -> tuple[Manifold, ...] | None:
    """The factors of a tuple-valued product manifold, or None for an array-valued manifold."""
    factors = getattr(manifold, "manifolds", None)
    if factors is not None and all(isinstance(s, tuple) for s in manifold.point_shape):
        return tuple(factors)
    return None


def as_array(manifold: Manifold, a: Any, name: str, extra_axes: int = 0) -> Any:
    """``a`` as float array(s): trailing ``point_shape``, at least ``extra_axes`` batch axes."""
    parts = blocks(manifold)
    if parts is not None:
        if not isinstance(a, tuple) or len(a) != len(parts):
            raise ValueError(
                f"argument '{name}' must be a tuple of {len(parts)} arrays for {manifold}"
            )
        return tuple(
            as_array(m, ai, f"{name}[{i}]", extra_axes)
            for i, (m, ai) in enumerate(zip(parts, a, strict=True))
        )
    arr = np.asarray(a, dtype=float)
    k = len(manifold.point_shape)
    if arr.ndim < k + extra_axes or arr.shape[arr.ndim - k :] != manifold.point_shape:
        lead = "..., n_samples, " if extra_axes else "..., "
        raise ValueError(
            f"argument '{name}' has shape {arr.shape}; expected ({lead}"
            f"{', '.join(map(str, manifold.point_shape))}) for {manifold}"
        )
    return arr


def batch_shape(manifold: Manifold, a: Any) -> tuple[int, ...]:
    """Leading (batch) shape of an array or of the first block of a tuple."""
    parts = blocks(manifold)
    if parts is not None:
        return batch_shape(parts[0], a[0])
    return a.shape[: a.ndim - len(manifold.point_shape)]


def expand_batch(manifold: Manifold, a: Any, axis: int) -> Any:
    """Insert a batch axis at ``axis`` (negative, counted from the point axes)."""
    parts = blocks(manifold)
    if parts is not None:
        return tuple(expand_batch(m, ai, axis) for m, ai in zip(parts, a, strict=True))
    return np.expand_dims(a, axis - len(manifold.point_shape))


def broadcast_batch(manifold: Manifold, a: Any, batch: tuple[int, ...]) -> Any:
    """Broadcast the batch axes of ``a`` to ``batch`` (a read-only view)."""
    parts = blocks(manifold)
    if parts is not None:
        return tuple(broadcast_batch(m, ai, batch) for m, ai in zip(parts, a, strict=True))
    return np.broadcast_to(a, tuple(batch) + manifold.point_shape)


def scale(manifold: Manifold, a: Any, factor: np.ndarray) -> Any:
    """Multiply tangent vectors by per-batch scalars ``factor``."""
    parts = blocks(manifold)
    if parts is not None:
        return tuple(scale(m, ai, factor) for m, ai in zip(parts, a, strict=True))
    return a * factor.reshape(factor.shape + (1,) * len(manifold.point_shape))


def add(manifold: Manifold, a: Any, b: Any) -> Any:
    """Blockwise ``a + b``."""
    parts = blocks(manifold)
    if parts is not None:
        return tuple(add(m, ai, bi) for m, ai, bi in zip(parts, a, b, strict=True))
    return a + b
