"""Argument validation shared by the privacy modules (every message names the argument)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Arrays up to this size are checked element by element in Python (a few hundred ns), larger
#: ones with two array reductions (a few us whatever the size).
_FEW = 32


def check_real(value: Any, name: str) -> float:
    """A real number, not NaN (infinities pass); a string is refused, not parsed."""
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"argument '{name}' must be a real number, got "
                        f"{type(value).__name__} {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"argument '{name}' must be a real number, got {type(value).__name__}"
        ) from None
    if math.isnan(out):
        raise ValueError(f"argument '{name}' must be a number, got NaN")
    return out


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A privacy budget: finite and > 0."""
    eps = check_real(value, name)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"argument '{name}' must be a finite epsilon > 0, got {value!r}")
    return eps


def check_delta(value: Any, name: str = "delta") -> float:
    """A failure probability in the open interval (0, 1)."""
    d = check_real(value, name)
    if not 0.0 < d < 1.0:
        raise ValueError(f"argument '{name}' must lie in the open interval (0, 1), got {value!r}")
    return d


def check_rate(value: Any, name: str = "sampling_rate") -> float:
    """A sampling probability in (0, 1]."""
    r = check_real(value, name)
    if not 0.0 < r <= 1.0:
        raise ValueError(f"argument '{name}' must lie in (0, 1], got {value!r}")
    return r


def check_nonneg(value: Any, name: str) -> float:
    """A finite non-negative scalar (noise scale, sensitivity, ...)."""
    v = check_real(value, name)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"argument '{name}' must be finite and >= 0, got {value!r}")
    return v


def check_positive(value: Any, name: str) -> float:
    """A finite positive scalar."""
    v = check_real(value, name)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"argument '{name}' must be finite and > 0, got {value!r}")
    return v


def check_int(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (numpy integers and integral floats are accepted)."""
    if isinstance(value, bool):
        raise TypeError(f"argument '{name}' must be an integer, got bool")
    if isinstance(value, (int, np.integer)):
        out = int(value)
    elif isinstance(value, (float, np.floating)) and float(value).is_integer():
        out = int(value)
    else:
        raise TypeError(f"argument '{name}' must be an integer, got {value!r}")
    if out < minimum:
        raise ValueError(f"argument '{name}' must be an integer >= {minimum}, got {value!r}")
    return out


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if value not in choices:
        raise ValueError(f"argument '{name}' must be one of {choices}, got {value!r}")
    return str(value)


def check_nonneg_array(value: Any, name: str) -> np.ndarray:
    """A finite, non-negative float array (per-coordinate or per-agent scales)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"argument '{name}' must be a numeric scalar or array") from None
    # a scalar or a few values (the usual noise std or clip level, or one per agent of a
    # round, checked at every release) skip the array reductions; NaN fails every comparison
    if arr.ndim == 0:
        ok = math.isfinite(v := float(arr)) and v >= 0
    elif arr.size <= _FEW:
        ok = all(0.0 <= v < math.inf for v in arr.ravel().tolist())
    else:
        ok = bool(np.isfinite(arr).all()) and not bool((arr < 0).any())
    if not ok:
        raise ValueError(f"argument '{name}' must be finite and >= 0 everywhere")
    return arr
