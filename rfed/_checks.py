"""Array arguments checked at the door: a clear error naming the user's argument.

:func:`numeric_array` turns a user's array-like into a numpy array, and refuses, in one line
naming the argument, what numpy would otherwise report in its own words or accept silently:
ragged nested lists ("inhomogeneous shape"), strings (numpy parses ``"1.5"`` as a float),
complex numbers (numpy drops the imaginary part with a warning), Python objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["numeric_array"]

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
