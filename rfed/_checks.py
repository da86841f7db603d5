"""Array arguments checked at the door: a clear error naming the user's argument.

:func:`numeric_array` turns a user's array-like into a numpy array, and refuses, in one line
naming the argument, what numpy would otherwise report in its own words or accept silently:
ragged nested lists ("inhomogeneous shape"), strings (numpy parses ``"1.5"`` as a float),
complex numbers (numpy drops the imaginary part with a warning), Python objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["numeric_array", "held_out_samples"]

_KIND_NAMES = {"b": "booleans", "i": "integers", "u": "integers", "f": "real numbers",
               "c": "complex numbers", "U": "strings", "S": "bytes", "O": "Python objects",
               "M": "dates", "m": "time spans", "V": "records"}


def numeric_array(value: Any, name: str, dtype: Any = float, kinds: str = "biuf"
                  ) -> np.ndarray:
    """``value`` as an array of ``dtype``, if it holds numbers of the accepted ``kinds``.

    Parameters
    ----------
    value : array_like
    name : str
        The argument's name, as the user wrote it (used in the message).
    dtype : numpy dtype or None
        The dtype returned (None: keep the input's).
    kinds : str
        numpy dtype kinds accepted (default booleans, integers and reals).

    Returns
    -------
    numpy.ndarray
        ``np.asarray(value)`` converted to ``dtype`` (no copy when it already has it).

    Raises
    ------
    ValueError
        ``value`` is ragged, or holds strings, complex numbers or other non-numbers; the
        message names ``name``.
    """
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError):
        raise ValueError(f"argument '{name}' is ragged (its rows have different lengths); "
                         "expected a rectangular array of numbers") from None
    if raw.dtype.kind not in kinds:
        what = _KIND_NAMES.get(raw.dtype.kind, f"dtype {raw.dtype}")
        wanted = "real numbers" if "f" in kinds else "integers"
        raise ValueError(f"argument '{name}' must hold {wanted}, got {what} (dtype "
                         f"{raw.dtype})")
    return raw if dtype is None else raw.astype(dtype, copy=False)


def held_out_samples(x: Any, features: Any, labels: Any, point_shape: tuple[int, ...],
                     n_features: int, *, batched: bool = False
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One point (or a batch) and the samples an accuracy is evaluated on, checked against
    the problem.

    Parameters
    ----------
    x : array_like, shape ``point_shape`` (``(*lead, *point_shape)`` with ``batched``)
        The point, or points.
    features : array_like, shape ``(N, n_features)``
        The samples (their dtype kept: float32 features stay float32).
    labels : array_like, shape ``(N,)``
        One label per sample.
    point_shape : tuple of int
        The problem's point shape.
    n_features : int
        The problem's number of features per sample.
    batched : bool
        ``x`` may carry leading batch axes.

    Returns
    -------
    x, features, labels : numpy.ndarray
        As arrays.

    Raises
    ------
    ValueError
        A shape that is not the expected one, or ``labels`` missing with ``features``; the
        message names the argument.
    """
    x = np.asarray(x)
    shape = tuple(point_shape)
    point_axes = x.shape[max(x.ndim - len(shape), 0):] if batched else x.shape
    if point_axes != shape:
        wanted = f"(*lead, {', '.join(map(str, shape))})" if batched else f"{shape} (one point)"
        raise ValueError(f"argument 'x' must have shape {wanted}, got {x.shape}")
    if labels is None:
        raise ValueError("argument 'labels' is required with 'features' (one label per row)")
    features, labels = np.asarray(features), np.asarray(labels)
    if features.ndim != 2 or features.shape[1] != n_features:
        raise ValueError(f"argument 'features' must have shape (N, {n_features}) (the "
                         f"problem's {n_features} features per sample), got {features.shape}")
    if labels.shape != features.shape[:1]:
        raise ValueError(f"argument 'labels' must have shape ({features.shape[0]},) (one per "
                         f"row of 'features'), got {labels.shape}")
    return x, features, labels
