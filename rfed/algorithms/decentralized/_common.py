"""The argument checks the decentralized algorithms share (the base classes and the private
gradient step are :mod:`rfed.algorithms.decentralized.base`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.networks.comm import freeze_weights
from rfed.networks.mixing import check_doubly_stochastic, check_symmetric

__all__ = ["ScratchArrays", "check_choice", "check_mixing_matrix", "check_nonneg",
           "check_probability", "scratch_of"]


class ScratchArrays:
    """Arrays that a run's rounds write their temporaries into, reused from round to round.

    A round of ``n`` agents makes temporaries of ``n x d`` floats; above glibc's mmap threshold
    (32 MiB: ``d = 10`` from about 420,000 agents on) each fresh one is mapped and faulted in
    again, a kernel cost that grows faster than the arithmetic. Writing them into these arrays
    (numpy's ``out=``, the same operations in the same order, hence the same bits) pays it once
    per run. Nothing taken from here may be kept past the round (a state's or the user's
    array is a fresh one), so runs may interleave their rounds on one algorithm, but not run
    them at the same time from several threads; a copy or a pickle of the owner carries no
    buffer.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
        """The array ``name`` of ``shape`` and ``dtype``, uninitialised (made on the first call
        or when the shape or dtype changes).

        Parameters
        ----------
        name : str
            The temporary's role (distinct roles of one round must not share a name).
        shape : tuple of int
        dtype : numpy dtype, default float64

        Returns
        -------
        array, shape ``shape``
        """
        a = self._arrays.get(name)
        if a is None or a.shape != shape or a.dtype != dtype:
            a = self._arrays[name] = np.empty(shape, dtype)
        return a

    def __deepcopy__(self, memo: dict) -> ScratchArrays:
        return ScratchArrays()

    def __reduce__(self) -> tuple:
        return (ScratchArrays, ())


def scratch_of(owner: Any) -> ScratchArrays:
    """``owner``'s :class:`ScratchArrays` (an algorithm's; made on first use).

    Parameters
    ----------
    owner : object
        With a writable ``__dict__``.

    Returns
    -------
    ScratchArrays
    """
    scratch = owner.__dict__.get("_scratch")
    if scratch is None:
        scratch = owner.__dict__["_scratch"] = ScratchArrays()
    return scratch


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
