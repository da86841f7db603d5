"""Loader for LIBSVM / svmlight text files (the ``epsilon`` and ``rcv1`` sets of DO-ADP and DP-DDA).

Each line is ``label idx:val idx:val ...`` with 1-based, increasing feature indices; absent
features are zero. Where to get the real files (not downloaded by rfed; no network at run time):

* ``epsilon_normalized`` (400,000 x 2,000, dense, unit-norm rows, labels +-1; DO-ADP Sec. VI-A
  and DP-DDA Sec. 5.1, Table 2):
  https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#epsilon (file
  ``epsilon_normalized.bz2``, about 12 GB uncompressed);
* ``rcv1.binary`` (the paper uses the 677,399-row test split ``rcv1_test.binary.bz2``, 47,236
  features, unit-norm tf-idf rows, labels +-1):
  https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#rcv1.binary

``.gz`` and ``.bz2`` files are decompressed on the fly. Offline stand-ins with the same shape
statistics: :func:`rfed.datasets.make_epsilon_like`, :func:`rfed.datasets.make_rcv1_like`.
"""

from __future__ import annotations

import bz2
import gzip
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np
import scipy.sparse as sp

from rfed._checks import numeric_array
from rfed.datasets._validation import check_file, check_int

__all__ = ["load_libsvm", "normalize_rows", "to_pm1_labels"]


def to_pm1_labels(y: np.ndarray) -> np.ndarray:
    """Map binary labels to {-1.0, +1.0} (the smaller value becomes -1).

    Raises ``ValueError`` if ``y`` does not take exactly two distinct values or is not finite.

    Parameters
    ----------
    y : array, shape ``(N,)``

    Returns
    -------
    ndarray of float64, shape ``(N,)``
    """
    y = numeric_array(y, "y", dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError("argument 'y' contains NaN or inf")
    values = np.unique(y)
    if len(values) != 2:
        raise ValueError(
            f"argument 'y' must hold exactly two distinct labels to map to -1/+1, got {values[:10]}"
        )
    return np.where(y == values[1], 1.0, -1.0)


def normalize_rows(x: np.ndarray | sp.spmatrix) -> np.ndarray | sp.csr_matrix:
    """Scale every non-zero row to unit Euclidean norm (dense or sparse; zero rows unchanged).

    Raises ``ValueError`` on NaN or infinite entries.

    Parameters
    ----------
    x : array or scipy sparse matrix, shape ``(N, d)``

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix, shape ``(N, d)``
        Sparse input gives a CSR matrix.
    """
    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float64)
        if not np.isfinite(x.data).all():
            raise ValueError("argument 'x' contains NaN or inf")
        norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        return sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ x)
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError("argument 'x' contains NaN or inf")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def _first_non_finite(path: Path) -> tuple[int, str]:
    """Line number (1-based) and token of the first NaN or infinite label or feature value."""
    openers: dict[str, Callable[..., IO[str]]] = {".gz": gzip.open, ".bz2": bz2.open}
    opener = openers.get(path.suffix, open)
    with opener(path, "rt") as fh:
        for lineno, line in enumerate(fh, start=1):
            tokens = line.split("#", 1)[0].split()
            for i, token in enumerate(tokens):
                value = token if i == 0 else token.rpartition(":")[2]
                try:
                    finite = np.isfinite(float(value))
                except ValueError:
                    continue
                if not finite:
                    return lineno, token
    return 0, "?"  # unreachable when the parsed arrays held a non-finite value


def load_libsvm(
    path: str | os.PathLike,
    n_features: int | None = None,
    *,
    dense: bool = False,
    binary_labels: bool = True,
    normalize: bool = False,
) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """Read a LIBSVM text file.

    Parameters
    ----------
    path : path
        A LIBSVM file with 1-based feature indices, optionally ``.gz`` or ``.bz2`` compressed.
    n_features : int or None
        Number of columns; default the largest index in the file. Pass it (2000 for epsilon,
        47236 for rcv1) so that train and test splits agree even when the last features are
        absent from one of them.
    dense : bool
        Return a dense ndarray instead of CSR (epsilon is dense; rcv1 must stay sparse).
    binary_labels : bool
        Map the two label values to {-1, +1} (both papers' convention, e.g. {0, 1} files);
        a file with more than two labels is refused. ``False`` returns the labels as read.
    normalize : bool
        Scale rows to unit norm (the papers' sets already are; this is for other files).

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray, shape ``(n_samples, n_features)``, float64
    y : ndarray, shape ``(n_samples,)``, float64

    Raises
    ------
    ValueError
        A malformed or empty file, or a NaN or infinite label or feature (``nan``, ``inf``, or a
        value such as ``1e400`` that overflows float64); the message names the file and the line.
    """
    from sklearn.datasets import load_svmlight_file

    p = check_file(path, "path")
    if n_features is not None:
        n_features = check_int(n_features, "n_features")
    try:
        x, y = load_svmlight_file(
            str(p), n_features=n_features, dtype=np.float64, zero_based=False
        )
    except ValueError as exc:
        raise ValueError(f"argument 'path': {str(p)!r} is not a valid LIBSVM file ({exc})") from exc
    if x.shape[0] == 0:
        raise ValueError(f"argument 'path': {str(p)!r} holds no samples")
    if not (np.isfinite(x.data).all() and np.isfinite(y).all()):
        lineno, token = _first_non_finite(p)
        raise ValueError(
            f"argument 'path': {str(p)!r} line {lineno}: non-finite value {token!r} (NaN and"
            " infinite labels or features are not valid data)"
        )
    if binary_labels:
        y = to_pm1_labels(y)
    if normalize:
        x = normalize_rows(x)
    x = sp.csr_matrix(x)
    return (x.toarray() if dense else x), np.asarray(y, dtype=np.float64)
