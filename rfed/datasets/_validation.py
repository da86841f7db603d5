"""Argument checks shared by the dataset builders (messages name the argument)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike


def check_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, refusing bools, non-integers and values below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"argument '{name}' must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"argument '{name}' must be >= {minimum}, got {value}")
    return int(value)


def check_float(
    value: object,
    name: str,
    *,
    low: float = -np.inf,
    high: float = np.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite float inside the given (open or closed) interval."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"argument '{name}' must be a real number, got {type(value).__name__}")
    v = float(value)
    too_low = v <= low if low_open else v < low
    too_high = v >= high if high_open else v > high
    if not np.isfinite(v) or too_low or too_high:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"argument '{name}' must lie in {lb}{low}, {high}{hb}, got {value}")
    return v


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"argument '{name}' must be one of {choices}, got {value!r}")
    return str(value)


def check_file(path: object, name: str) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` to an existing regular file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"argument '{name}' must be a path (str or os.PathLike), got {type(path).__name__}"
        )
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"argument '{name}': no such file: {str(p)!r}")
    return p


def check_float_dtype(dtype: DTypeLike, name: str = "dtype") -> np.dtype:
    """Return ``dtype`` as a numpy dtype if it is float32 or float64."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"argument '{name}' must be a numpy dtype, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"argument '{name}' must be float32 or float64, got {dt}")
    return dt
