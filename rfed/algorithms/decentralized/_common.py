"""The argument checks the decentralized algorithms share (the base classes and the private
gradient step are :mod:`rfed.algorithms.decentralized.base`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.networks.comm import freeze_weights
from rfed.networks.mixing import check_doubly_stochastic, check_symmetric

__all__ = ["check_choice", "check_mixing_matrix", "check_nonneg", "check_probability"]


def check_probability(value: Any, name: str) -> float:
    """``value`` as a float in (0, 1]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"argument '{name}' must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"argument '{name}' must be in (0, 1], got {value!r}")
    return v


def check_choice(value: Any, name: str, options: tuple[str, ...]) -> str:
    """``value`` if it is one of ``options``, else a ``ValueError`` listing them."""
    if value not in options:
        valid = " or ".join(repr(o) for o in options)
        raise ValueError(f"argument '{name}' must be {valid}, got {value!r}")
    return value


def check_nonneg(value: Any, name: str) -> float:
    """``value`` as a finite float >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"argument '{name}' must be a number >= 0, got {value!r}") from None
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"argument '{name}' must be a finite number >= 0, got {value!r}")
    return v


def check_mixing_matrix(weights: Any, name: str = "weights") -> sp.csr_matrix:
    """A symmetric doubly stochastic mixing matrix as frozen CSR (the networks checks name the
    row; frozen: what every round derives from it is computed once, see
    :func:`rfed.networks.freeze_weights`)."""
    w = sp.csr_matrix(weights, dtype=float)
    check_symmetric(w, name)
    check_doubly_stochastic(w, name)
    return freeze_weights(w, name)
