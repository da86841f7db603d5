"""numpy's ``einsum`` without its Python wrapper, for the hottest small calls.

``np.einsum(..., optimize=False)`` (its default) hands its operands to the C function
``c_einsum`` unchanged, after an array-function dispatch and a keyword check that cost about
1.5 us a call: the sphere's and hyperboloid's batched dot products are called over a million
times in a run of prirfed-fig1 (a few rows each). :data:`einsum` is that C function, the same
bits; ``np.einsum`` itself on a numpy without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["einsum"]


def _c_einsum() -> Callable[..., Any]:
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            fun = getattr(importlib.import_module(name), "c_einsum", None)
        except ImportError:
            continue
        if callable(fun):
            return fun
    return np.einsum


#: ``einsum(subscripts, *operands, out=None)`` without ``optimize`` (numpy's C ``c_einsum``)
einsum: Callable[..., Any] = _c_einsum()
