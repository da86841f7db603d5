"""The argument checks the decentralized algorithms share (the base classes and the private
gradient step are :mod:`rfed.algorithms.decentralized.base`)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import scipy.sparse as sp

from rfed.networks.comm import freeze_weights
from rfed.networks.mixing import check_doubly_stochastic, check_symmetric

__all__ = ["ScratchArrays", "check_choice", "check_mixing_matrix", "check_nonneg",
           "check_probability", "scratch_of"]


def _unreferenced_count() -> int:
    """What ``sys.getrefcount(kept[i])`` gives for an array only the list ``kept`` holds (the
    same expression as :meth:`ScratchArrays.recycled`'s, so that an interpreter's own
    references are counted alike)."""
    kept = [np.empty(0)]
    for i in range(len(kept)):
        return sys.getrefcount(kept[i])
    raise AssertionError("unreachable")


#: The reference count of an array nothing but :meth:`ScratchArrays.recycled`'s list holds.
_UNREFERENCED = _unreferenced_count()
#: Arrays kept per state field: the state being built, the last one, and one a caller kept.
_RECYCLED_PER_FIELD = 3


class ScratchArrays:
    """Arrays that a run's rounds write their temporaries into, reused from round to round.

    A round of ``n`` agents makes temporaries of ``n x d`` floats; above glibc's mmap threshold
    (32 MiB: ``d = 10`` from about 420,000 agents on) each fresh one is mapped and faulted in
    again, a kernel cost that grows faster than the arithmetic. Writing them into these arrays
    (numpy's ``out=``, the same operations in the same order, hence the same bits) pays it once
    per run. Nothing taken by :meth:`take` may be kept past the round; a state's arrays come
    from :meth:`recycled`, which hands an array out again only when nothing refers to it any
    more. Runs may interleave their rounds on one algorithm, but not run them at the same time
    from several threads; a copy or a pickle of the owner carries no buffer.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        self._recycled: dict[str, list[np.ndarray]] = {}

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

    def recycled(self, name: str, shape: tuple[int, ...], dtype: Any = np.float64
                 ) -> np.ndarray:
        """An array for the field ``name`` of the next state, uninitialised: the array a state
        of an earlier round held, once nothing else refers to it, else a fresh one.

        A run keeps the state of the last round (and the caller's loop drops the one before),
        so the fields alternate between two arrays (double buffering): the round writes its new
        state into the arrays of the state two rounds old, with numpy's ``out=`` (the same
        operations, hence the same bits). An array is taken back only when the arrays kept
        here are its only references (CPython's reference count, calibrated at import): a
        state, a view of its arrays or anything else a caller kept (a history of states, a
        diverged run's last state, a callback's copy of ``state.x``) keeps its array
        untouched, and the round then writes into a fresh one.

        Parameters
        ----------
        name : str
            The state field (distinct fields of one state must not share a name).
        shape : tuple of int
        dtype : numpy dtype, default float64

        Returns
        -------
        array, shape ``shape``
        """
        kept = self._recycled.setdefault(name, [])
        for i in range(len(kept)):
            if (sys.getrefcount(kept[i]) == _UNREFERENCED and kept[i].shape == shape
                    and kept[i].dtype == dtype and kept[i].flags.writeable):
                return kept[i]
        a = np.empty(shape, dtype)
        if len(kept) >= _RECYCLED_PER_FIELD:
            del kept[0]   # the oldest, still held elsewhere: it stays with its holder
        kept.append(a)
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
