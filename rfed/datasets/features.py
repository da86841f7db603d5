"""Public feature maps for private learning: scattering features, GroupNorm, public PCA.

A linear model trained with DP-SGD on good fixed features beats end-to-end private networks at
moderate budgets (Tramer and Boneh, "Differentially Private Learning Needs Better Features (or
Much More Data)", ICLR 2021, arXiv:2011.11660): on Fashion-MNIST they train a linear model on
the scattering transform (:class:`rfed.datasets.scattering.Scattering2D`, ``J = 2``, ``L = 8``:
81 x 7 x 7 = 3,969 features) followed by a per-image GroupNorm. Both maps are public:

* the scattering transform uses filters fixed by ``(image shape, J, L)`` and transforms every
  image on its own;
* :func:`group_norm` (Wu and He, "Group Normalization", ECCV 2018, arXiv:1803.08494, without
  the learned affine part, as Tramer and Boneh use it) normalises each record with the mean and
  variance of ITS OWN coefficients: the output for one record is a function of that record and
  public constants (the number of groups, ``eps``) only.

So a neighbouring data set (one record replaced, added or removed) changes exactly one
transformed record: every sensitivity computed on the features holds for the images, and the
maps cost no privacy budget. (A normalisation whose statistics are computed over the data set,
like BatchNorm's, would make every transformed record depend on every other one.) GroupNorm also
gives a public norm bound: each group has mean zero and variance ``var / (var + eps) < 1``, so a
normalised record of ``D`` features has norm at most ``sqrt(D)`` (:func:`group_norm_bound`).

The transform costs about half a millisecond per 28 x 28 image on one core
(``benchmarks/bench_scattering.py`` measures it beside kymatio's numpy backend), so
:func:`scattering_features` computes a data set's coefficients once, with a progress bar, and
caches them on disk (see its docstring for the checks on every read). :func:`public_pca` is
the optional reduction to the top principal directions of a declared PUBLIC split.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from rfed.datasets._validation import check_float, check_int
from rfed.datasets.cached import _build_atomically, _discard, _sha256
from rfed.datasets.cached import cache_dir as _cache_root
from rfed.datasets.scattering import Scattering2D

__all__ = [
    "SCATTERING_CACHE_VERSION",
    "group_norm",
    "group_norm_bound",
    "public_pca",
    "scattering_cache_entry",
    "scattering_features",
]

#: Version of the cached scattering coefficients; bumped whenever the transform's output
#: changes, so that entries written by an older rfed are never reused.
SCATTERING_CACHE_VERSION = 1
_RECIPE = "scattering2d"


def group_norm(features: np.ndarray, groups: int, eps: float = 1e-5) -> np.ndarray:
    """Per-record GroupNorm without affine parameters, flattened.

    For each record and each of ``groups`` groups of ``K / groups`` consecutive channels,
    ``x_hat = (x - mean) / sqrt(var + eps)`` with the mean and the (biased) variance of the
    group's ``K / groups * h * w`` values of THAT record (Wu and He 2018, eq. 1; Tramer and
    Boneh 2021 use it on scattering channels with ``affine=False``). Computed in float64,
    returned in the input's float dtype.

    Parameters
    ----------
    features : ndarray, shape ``(n, K, h, w)`` (or ``(n, K, ...)``), finite
    groups : int
        Divides ``K`` (1: LayerNorm over the whole record; ``K``: InstanceNorm per channel).
    eps : float
        ``> 0``, added to the variance (PyTorch's default 1e-5).

    Returns
    -------
    ndarray, shape ``(n, K * h * w)``, norm of every row at most ``sqrt(K h w)``
    """
    x = np.asarray(features)
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"argument 'features' must be a float array of shape (n, K, ...), got "
                         f"shape {x.shape} and dtype {x.dtype}")
    groups = check_int(groups, "groups")
    eps = check_float(eps, "eps", low=0.0, low_open=True)
    n, k = x.shape[:2]
    if k % groups:
        raise ValueError(f"argument 'groups' ({groups}) must divide the {k} channels")
    g = x.reshape(n, groups, -1).astype(np.float64)
    mean = g.mean(axis=-1, keepdims=True)
    centred = g - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return (centred / np.sqrt(var + eps)).reshape(n, -1).astype(x.dtype)


def group_norm_bound(n_features: int) -> float:
    """The public norm bound ``sqrt(D)`` of a GroupNorm output of ``D`` features.

    Each group of ``m`` values has mean 0 and mean square ``var / (var + eps) < 1``, so its
    squared norm is below ``m``; summed over the groups, below ``D``. No record is read.

    Parameters
    ----------
    n_features : int
        ``D = K h w``.

    Returns
    -------
    float
    """
    return float(np.sqrt(check_int(n_features, "n_features")))


def public_pca(x_public: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``dim`` principal directions of a declared PUBLIC split (uncentred second moment).

    The projection ``a -> a V`` is orthonormal, so it never lengthens a row: a public norm
    bound ``R`` of the features stays a bound of the projected features. With fewer public
    records ``n`` than features ``d`` the directions come from the ``n x n`` Gram matrix
    (``V = X^T U / s`` for its eigenpairs ``(s^2, U)``), an ``O(n^3)`` eigenproblem instead of
    ``O(d^3)``; directions beyond the Gram matrix's rank (eigenvalue below ``1e-12`` of the
    largest) are completed by an orthonormal basis of the rest of the space.

    Parameters
    ----------
    x_public : ndarray, shape ``(n_public, d)``
    dim : int
        ``1 <= dim <= d``.

    Returns
    -------
    V : ndarray, shape ``(d, dim)``, orthonormal columns, eigenvalues decreasing
    eigenvalues : ndarray, shape ``(dim,)``, of ``x_public^T x_public / n_public``
    """
    x = np.asarray(x_public, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"argument 'x_public' must have shape (n_public, d), got {x.shape}")
    dim = check_int(dim, "dim")
    n, d = x.shape
    if dim > d:
        raise ValueError(f"argument 'dim' must be in [1, {d}], got {dim}")
    if n >= d:
        vals, vecs = np.linalg.eigh(x.T @ x / n)
        return vecs[:, ::-1][:, :dim].copy(), vals[::-1][:dim].copy()
    vals, u = np.linalg.eigh(x @ x.T / n)
    vals, u = vals[::-1], u[:, ::-1]
    rank = int(np.sum(vals > 1e-12 * max(vals[0], 1e-300)))
    k = min(dim, rank)
    v = x.T @ u[:, :k] / np.sqrt(n * vals[:k])
    if dim > k:
        # the null space of the public data: any orthonormal completion (eigenvalue 0)
        v = np.concatenate([v, _orthonormal_rest(v, d, dim - k)], axis=1)
    out_vals = np.concatenate([vals[:k], np.zeros(dim - k)])
    return v, out_vals


def _orthonormal_rest(v: np.ndarray, d: int, m: int) -> np.ndarray:
    """``m`` orthonormal columns orthogonal to the orthonormal columns of ``v`` ``(d, k)``."""
    basis = np.eye(d)
    rest = basis - v @ (v.T @ basis)
    q, r = np.linalg.qr(rest)
    keep = np.abs(np.diag(r)) > 1e-8
    return q[:, keep][:, :m]


# ---------------------------------------------------------------------- cached scattering
def _images_digest(images: np.ndarray) -> str:
    h = hashlib.sha256(f"{images.dtype.str}{images.shape}".encode())
    h.update(_sha256(images).encode())
    return h.hexdigest()


def _scattering_params(images: np.ndarray, J: int, L: int, dtype: np.dtype) -> dict:
    return {"J": J, "L": L, "image_shape": list(images.shape[1:]), "n_images": len(images),
            "images_sha256": _images_digest(images), "dtype": dtype.name}


def _scattering_key(params: dict) -> str:
    blob = json.dumps({"recipe": _RECIPE, "version": SCATTERING_CACHE_VERSION,
                       "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _read_scattering(entry: Path, key: str, params: dict, shape: tuple[int, ...]
                     ) -> np.ndarray:
    """The coefficients of a cache entry, or ValueError saying what is wrong with it."""
    meta_path = entry / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{meta_path.name} unreadable ({exc})") from exc
    if not isinstance(meta, dict):
        raise ValueError("meta.json does not hold an object")
    if meta.get("recipe") != _RECIPE or meta.get("key") != key:
        raise ValueError("written for another data set or transform (recipe or key differs)")
    if meta.get("version") != SCATTERING_CACHE_VERSION:
        raise ValueError(f"written by another version of the transform ({meta.get('version')}"
                         f", this is {SCATTERING_CACHE_VERSION})")
    if meta.get("params") != params:
        raise ValueError("its parameters differ from this call's")
    s_path = entry / "S.npy"
    try:
        s = np.load(s_path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"S.npy unreadable ({exc})") from exc
    if s.shape != shape or s.dtype.name != params["dtype"]:
        raise ValueError(f"S.npy has shape {s.shape} and dtype {s.dtype}, expected {shape} "
                         f"{params['dtype']}")
    if _sha256(s) != meta.get("sha256"):
        raise ValueError("S.npy checksum differs from meta.json's (corrupted or altered)")
    return s


def scattering_features(
    images: np.ndarray,
    *,
    J: int = 2,
    L: int = 8,
    dtype: DTypeLike = np.float32,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    batch_size: int = 256,
) -> np.ndarray:
    """Scattering coefficients of ``images``, computed once and cached on disk.

    Cache layout: one folder per entry, ``<cache>/scattering2d-<key>/`` holding ``S.npy`` (the
    coefficients, plain ``.npy``, read with ``allow_pickle=False``) and ``meta.json``; the key
    is a SHA-256 of the transform's version, ``J``, ``L``, the dtype and the images (their
    shape, dtype and the SHA-256 of their bytes), so different images or settings never share
    an entry. The folder is ``cache_dir``, else ``$RFED_CACHE``, else ``~/.cache/rfed``. An
    entry is written in a temporary folder and renamed into place when complete (a killed run
    leaves no half-written entry). Every read checks ``meta.json`` against this call (recipe,
    version, key, parameters), the array's shape and dtype and the SHA-256 of all its bytes:
    a corrupted, truncated or foreign entry is never used; it is recomputed, with a
    ``RuntimeWarning`` naming the file and what was wrong.

    Parameters
    ----------
    images : ndarray, shape ``(n, M, N)``, finite
        Grey-level images, e.g. Fashion-MNIST in [0, 1] (:func:`rfed.datasets.load_fashion_mnist`).
    J, L : int
        Scales and angles of :class:`~rfed.datasets.scattering.Scattering2D`.
    dtype : {float32, float64}
    cache : bool
        False: compute, never read or write the cache.
    cache_dir : path or None
    progress : bool
        Show a progress bar (on stderr) while the coefficients are computed.
    batch_size : int
        Images transformed at once (the result does not depend on it).

    Returns
    -------
    ndarray, shape ``(n, K, h, w)`` (``(n, 81, 7, 7)`` for 28 x 28 images, ``J = 2``, ``L = 8``)
    """
    x = np.asarray(images)
    if x.ndim != 3 or len(x) == 0:
        raise ValueError(f"argument 'images' must have shape (n, M, N) with n >= 1, got "
                         f"{x.shape}")
    transform = Scattering2D(tuple(x.shape[1:]), J, L, dtype=dtype)
    shape = (len(x),) + transform.out_shape

    def compute() -> np.ndarray:
        from tqdm import tqdm  # type: ignore[import-untyped]

        out = np.empty(shape, dtype=transform.dtype)
        lo = 0
        with tqdm(total=len(x), desc=f"scattering J={J} L={L}", unit="img",
                  disable=not progress, file=sys.stderr, leave=False) as bar:
            for block in transform.chunks(x, batch_size):
                out[lo:lo + len(block)] = block
                lo += len(block)
                bar.update(len(block))
        return out

    if not cache:
        return compute()
    params = _scattering_params(x, transform.J, transform.L, transform.dtype)
    key = _scattering_key(params)
    root = _cache_root(cache_dir)
    entry = root / f"{_RECIPE}-{key}"
    if entry.is_dir():
        try:
            return _read_scattering(entry, key, params, shape)
        except ValueError as exc:
            warnings.warn(f"rfed cache entry {str(entry)!r} is not used ({exc}); recomputing "
                          "the scattering coefficients", RuntimeWarning, stacklevel=2)
            _discard(entry)
    coeffs = compute()

    def build(tmp: Path) -> dict:
        np.save(tmp / "S.npy", coeffs, allow_pickle=False)
        return {"recipe": _RECIPE, "version": SCATTERING_CACHE_VERSION, "key": key,
                "params": params, "shape": list(shape), "sha256": _sha256(coeffs)}

    _build_atomically(root, entry.name, build)
    return coeffs


def scattering_cache_entry(images: np.ndarray, *, J: int = 2, L: int = 8,
                           dtype: DTypeLike = np.float32,
                           cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder :func:`scattering_features` uses for these images and settings.

    Parameters
    ----------
    images, J, L, dtype, cache_dir
        As in :func:`scattering_features`.

    Returns
    -------
    pathlib.Path
        ``<cache>/scattering2d-<key>`` (it may not exist yet).
    """
    x = np.asarray(images)
    transform = Scattering2D(tuple(x.shape[1:]), J, L, dtype=dtype)
    params = _scattering_params(x, transform.J, transform.L, transform.dtype)
    return _cache_root(cache_dir) / f"{_RECIPE}-{_scattering_key(params)}"

