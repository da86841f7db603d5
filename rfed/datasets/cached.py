"""Paper-size synthetic sets, generated once in float32 and cached on disk.

The LIBSVM sets of DO-ADP and DP-DDA are large: ``epsilon`` is 400,000 x 2,000 dense (3.2 GB in
float32, 6.4 GB in float64) and ``rcv1.binary`` is 20,242 (training split) or 677,399 (test
split, the paper's training set) x 47,236 sparse. The builders here run the recipes of
:func:`rfed.datasets.make_epsilon_like` and :func:`rfed.datasets.make_rcv1_like` (same random
stream, so the same rows as those functions for the same seed, stored in float32) in chunks of
rows, writing each chunk to disk as it is made, so that peak memory stays at a few chunks:

* :func:`make_epsilon_like_cached`: ``X.npy`` (float32), read back memory-mapped;
* :func:`make_rcv1_like_cached`: ``X.npz`` (scipy.sparse CSR, float32 values).

Cache layout: one folder per entry, ``<cache>/<recipe>-<key>/`` with the arrays and a
``meta.json``; the key is a SHA-256 of the recipe name, its version and every parameter that
changes the data (sizes, seed, noise levels, dtype); the chunk size is not one (the data do not
depend on it). The cache folder is the ``cache_dir`` argument, else ``$RFED_CACHE``, else
``~/.cache/rfed``. An entry is written in a temporary folder beside its final place and renamed
into place only when complete (``os.rename`` of a folder is atomic), so a killed run leaves no
half-written entry, and two processes building the same entry cannot tear it. On every read the
entry is validated against its parameters (``meta.json``), the arrays' shapes, dtypes and sizes,
and SHA-256 checksums (the labels in full, the dense matrix on 64 evenly spaced rows, the sparse
matrix in full); an invalid entry is rebuilt, with a warning naming the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from rfed.datasets._validation import check_float, check_int
from rfed.datasets.synthetic import (
    EPSILON_SHAPE,
    RCV1_TRAIN_SHAPE,
    _check_rcv1_args,
    _epsilon_like_direction,
    _epsilon_like_rows,
    _linear_labels,
    _rcv1_recipe,
)

__all__ = ["cache_dir", "cache_key", "make_epsilon_like_cached", "make_rcv1_like_cached"]

# bump when a recipe's output changes, so that old entries are not reused
_RECIPE_VERSIONS = {"epsilon_like": 1, "rcv1_like": 1}
_N_CHECK_ROWS = 64


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The cache folder: ``path`` if given, else ``$RFED_CACHE``, else ``~/.cache/rfed``.

    Parameters
    ----------
    path : path or None

    Returns
    -------
    pathlib.Path
        The folder (not created here; the builders create it when they write an entry).
    """
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"argument 'cache_dir' must be a folder (str or os.PathLike) or None, got"
                f" {type(path).__name__}"
            )
        return Path(path)
    env = os.environ.get("RFED_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rfed"


def cache_key(recipe: str, params: dict) -> str:
    """Key of a cache entry: SHA-256 of the recipe name, its version and its parameters.

    Parameters
    ----------
    recipe : {"epsilon_like", "rcv1_like"}
    params : dict
        JSON-serialisable parameters that determine the data (sizes, seed, noise, dtype).

    Returns
    -------
    str
        The first 24 hexadecimal digits (96 bits) of the digest of the canonical JSON.
    """
    blob = json.dumps(
        {"recipe": recipe, "version": _RECIPE_VERSIONS[recipe], "params": params}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _sha256(*arrays: np.ndarray, as_dtype: np.dtype | None = None) -> str:
    """SHA-256 of the arrays' bytes (C order), fed in blocks so that no full copy is made."""
    h = hashlib.sha256()
    block = 1 << 22
    for a in arrays:
        flat = np.ascontiguousarray(a).reshape(-1)
        for start in range(0, flat.size, block):
            part = flat[start : start + block]
            h.update((part if as_dtype is None else part.astype(as_dtype)).data)
    return h.hexdigest()


def _sparse_sha256(x: sp.csr_matrix) -> str:
    # index arrays hashed as int64: scipy may pick int32 or int64 when it rebuilds them
    return _sha256(x.indptr, x.indices, as_dtype=np.dtype(np.int64)) + _sha256(x.data)


def _check_rows(n_rows: int) -> np.ndarray:
    """Rows of a dense matrix covered by its checksum (first, last, evenly spaced)."""
    return np.unique(np.linspace(0, n_rows - 1, _N_CHECK_ROWS).round().astype(np.int64))


def _write_npy_header(fh, shape: tuple[int, ...], dtype: np.dtype) -> None:
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(fh, header)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _build_atomically(root: Path, name: str, build: Callable[[Path], dict]) -> Path:
    """Run ``build(tmp_folder)`` (which writes the arrays and returns ``meta``), then rename the
    finished folder to ``root / name``. Another process may have finished first: its entry wins
    and ours is dropped."""
    final = root / name
    tmp = root / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
    except OSError as exc:
        raise OSError(
            f"argument 'cache_dir': cannot create a cache entry in {str(root)!r} ({exc}); pass a"
            " writable cache_dir or set RFED_CACHE"
        ) from exc
    try:
        meta = build(tmp)
        meta_tmp = tmp / "meta.json"
        meta_tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
        for f in tmp.iterdir():
            _fsync_file(f)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            # a concurrent build of the same entry got there first; use it
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _discard(entry: Path) -> None:
    """Move an invalid entry out of the way (rename first, so readers never see it half-deleted)."""
    trash = entry.parent / f".{entry.name}.stale-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        os.rename(entry, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _read_meta(entry: Path, recipe: str, key: str, params: dict) -> dict:
    meta = json.loads((entry / "meta.json").read_text())
    if meta.get("recipe") != recipe or meta.get("key") != key:
        raise ValueError("recipe or key differs")
    if meta.get("version") != _RECIPE_VERSIONS[recipe] or meta.get("params") != params:
        raise ValueError(f"parameters differ: {meta.get('params')} != {params}")
    return meta


def _cached(
    recipe: str,
    params: dict,
    folder: str | os.PathLike | None,
    build: Callable[[Path], dict],
    read: Callable[[Path, dict], tuple],
) -> tuple:
    root = cache_dir(folder)
    key = cache_key(recipe, params)
    entry = root / f"{recipe}-{key}"
    if entry.is_dir():
        try:
            return read(entry, _read_meta(entry, recipe, key, params))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(
                f"rfed cache entry {str(entry)!r} is invalid ({exc}); rebuilding it",
                RuntimeWarning,
                stacklevel=3,
            )
            _discard(entry)
    entry = _build_atomically(root, entry.name, build)
    return read(entry, _read_meta(entry, recipe, key, params))


def _labels_meta(y: np.ndarray) -> dict:
    return {"shape": list(y.shape), "dtype": str(y.dtype), "sha256": _sha256(y)}


def _read_labels(entry: Path, meta: dict) -> np.ndarray:
    y = np.load(entry / "y.npy", allow_pickle=False)
    if list(y.shape) != meta["y"]["shape"] or str(y.dtype) != meta["y"]["dtype"]:
        raise ValueError(f"y.npy has shape {y.shape} and dtype {y.dtype}, meta says {meta['y']}")
    if _sha256(y) != meta["y"]["sha256"]:
        raise ValueError("y.npy checksum differs")
    return y


def make_epsilon_like_cached(
    n_samples: int = EPSILON_SHAPE[0],
    n_features: int = EPSILON_SHAPE[1],
    seed: int = 0,
    *,
    label_noise: float = 0.1,
    cache_dir: str | os.PathLike | None = None,
    chunk_rows: int = 4096,
    spectrum_decay: float = 0.0,
) -> tuple[np.memmap, np.ndarray]:
    """Paper-size stand-in for LIBSVM ``epsilon_normalized``, float32, memory-mapped from disk.

    The recipe of :func:`rfed.datasets.make_epsilon_like` (unit-norm Gaussian rows, labels the
    sign of a Gaussian linear score around its median with a fraction ``label_noise`` flipped)
    with the same random stream: the result equals
    ``make_epsilon_like(n_samples, n_features, seed, label_noise=label_noise, dtype=np.float32,
    spectrum_decay=spectrum_decay)`` bit for bit. Rows are generated ``chunk_rows`` at a time
    and appended to ``X.npy``; a second streamed pass over the file (plain reads, no mapping)
    computes the labels' scores. Peak memory
    is a few chunks (``chunk_rows * n_features`` float64 values each: 65 MB at the defaults), not
    the 3.2 GB of the full float32 matrix. Built once per parameter set, then read from the cache
    (see the module docstring for the folder, the key and the validation).

    Parameters
    ----------
    n_samples, n_features : int
        Default the full ``EPSILON_SHAPE = (400_000, 2_000)`` (3.2 GB on disk).
    seed : int >= 0
        Seed of :func:`numpy.random.default_rng` (an int, so that it can be part of the cache key).
    label_noise : float in [0, 0.5]
    cache_dir : path or None
        Cache folder; default ``$RFED_CACHE`` or ``~/.cache/rfed``.
    chunk_rows : int
        Rows generated at once (the data do not depend on it).
    spectrum_decay : float in [0, 4]
        Feature ``k`` has variance ``k^{-spectrum_decay}`` before the row normalisation (see
        :func:`rfed.datasets.make_epsilon_like`); 0 (default) is the isotropic recipe.

    Returns
    -------
    X : numpy.memmap, shape ``(n_samples, n_features)``, float32, read-only, unit-norm rows
    y : ndarray, shape ``(n_samples,)``, float64, values in {-1.0, +1.0}
    """
    n_samples = check_int(n_samples, "n_samples", minimum=2)
    n_features = check_int(n_features, "n_features")
    seed = check_int(seed, "seed", minimum=0)
    label_noise = check_float(label_noise, "label_noise", low=0.0, high=0.5)
    chunk_rows = check_int(chunk_rows, "chunk_rows")
    spectrum_decay = check_float(spectrum_decay, "spectrum_decay", low=0.0, high=4.0)
    dtype = np.dtype(np.float32)
    params = {
        "n_samples": n_samples, "n_features": n_features, "seed": seed,
        "label_noise": label_noise, "dtype": dtype.name,
    }
    if spectrum_decay:
        # only when used, so the isotropic recipe keeps the keys of entries already on disk
        params["spectrum_decay"] = spectrum_decay
    shape = (n_samples, n_features)

    def build(tmp: Path) -> dict:
        gen = np.random.default_rng(seed)
        x_path = tmp / "X.npy"
        with open(x_path, "wb") as fh:
            _write_npy_header(fh, shape, dtype)
            offset = fh.tell()
            for _, rows in _epsilon_like_rows(n_samples, n_features, gen, dtype, chunk_rows,
                                              spectrum_decay):
                fh.write(rows.tobytes())
        w = _epsilon_like_direction(gen, n_features, spectrum_decay).astype(dtype)
        scores = np.empty(n_samples, dtype=dtype)
        check = _check_rows(n_samples)
        checked = np.empty((len(check), n_features), dtype=dtype)
        with open(x_path, "rb") as fh:
            fh.seek(offset)
            for start in range(0, n_samples, chunk_rows):
                k = min(chunk_rows, n_samples - start)
                rows = np.fromfile(fh, dtype=dtype, count=k * n_features).reshape(k, n_features)
                if rows.shape[0] != k:
                    raise OSError(f"short read from {str(x_path)!r}")
                scores[start : start + k] = rows @ w
                sel = (check >= start) & (check < start + k)
                checked[sel] = rows[check[sel] - start]
        y = _linear_labels(scores, label_noise, gen)
        np.save(tmp / "y.npy", y, allow_pickle=False)
        return {
            "recipe": "epsilon_like", "version": _RECIPE_VERSIONS["epsilon_like"],
            "key": cache_key("epsilon_like", params), "params": params,
            "X": {"shape": list(shape), "dtype": dtype.name, "bytes": x_path.stat().st_size,
                  "checked_rows_sha256": _sha256(checked)},
            "y": _labels_meta(y),
        }

    def read(entry: Path, meta: dict) -> tuple[np.memmap, np.ndarray]:
        x_path = entry / "X.npy"
        if x_path.stat().st_size != meta["X"]["bytes"]:
            raise ValueError(f"X.npy holds {x_path.stat().st_size} bytes, meta says"
                             f" {meta['X']['bytes']}")
        x = np.load(x_path, mmap_mode="r", allow_pickle=False)
        if x.shape != shape or x.dtype != dtype:
            raise ValueError(f"X.npy has shape {x.shape} and dtype {x.dtype}, expected {shape}"
                             f" float32")
        if _sha256(x[_check_rows(n_samples)]) != meta["X"]["checked_rows_sha256"]:
            raise ValueError("X.npy checksum of sampled rows differs")
        return x, _read_labels(entry, meta)

    return _cached("epsilon_like", params, cache_dir, build, read)


def make_rcv1_like_cached(
    n_samples: int = RCV1_TRAIN_SHAPE[0],
    n_features: int = RCV1_TRAIN_SHAPE[1],
    seed: int = 0,
    *,
    mean_nnz: float = 73.0,
    zipf_exponent: float = 1.0,
    label_noise: float = 0.05,
    cache_dir: str | os.PathLike | None = None,
    chunk_rows: int = 8192,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Paper-size stand-in for LIBSVM ``rcv1.binary``, CSR with float32 values, cached on disk.

    The recipe of :func:`rfed.datasets.make_rcv1_like` with the same random stream, generated
    ``chunk_rows`` documents at a time: the result equals ``make_rcv1_like(n_samples, n_features,
    seed, ...)`` with its values rounded to float32 (labels identical: they are computed from the
    float64 values). Default shape: the training split, ``RCV1_TRAIN_SHAPE = (20_242, 47_236)``,
    about 1.5 M non-zeros (density 0.15 %); ``n_samples = RCV1_SHAPE[0] = 677_399`` gives the
    test split's size (about 50 M non-zeros, 0.4 GB). Stored with :func:`scipy.sparse.save_npz`
    (uncompressed) and validated on every read (see the module docstring).

    Parameters
    ----------
    n_samples, n_features : int
    seed : int >= 0
    mean_nnz, zipf_exponent, label_noise : float
        As in :func:`rfed.datasets.make_rcv1_like`.
    cache_dir : path or None
    chunk_rows : int
        Documents generated at once (the data do not depend on it).

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape ``(n_samples, n_features)``, float32, unit-norm rows
    y : ndarray, shape ``(n_samples,)``, float64, values in {-1.0, +1.0}
    """
    n_samples, n_features, mean_nnz, zipf_exponent, label_noise = _check_rcv1_args(
        n_samples, n_features, mean_nnz, zipf_exponent, label_noise
    )
    seed = check_int(seed, "seed", minimum=0)
    chunk_rows = check_int(chunk_rows, "chunk_rows")
    params = {
        "n_samples": n_samples, "n_features": n_features, "seed": seed, "mean_nnz": mean_nnz,
        "zipf_exponent": zipf_exponent, "label_noise": label_noise, "dtype": "float32",
    }

    def build(tmp: Path) -> dict:
        gen = np.random.default_rng(seed)
        chunks, scores = _rcv1_recipe(n_samples, n_features, gen, mean_nnz, zipf_exponent,
                                      chunk_rows)
        y = _linear_labels(scores, label_noise, gen)
        for c in chunks:
            c.data = c.data.astype(np.float32)
        x = chunks[0] if len(chunks) == 1 else sp.vstack(chunks, format="csr")
        x = sp.csr_matrix(x, dtype=np.float32)
        chunks.clear()
        sp.save_npz(tmp / "X.npz", x, compressed=False)
        np.save(tmp / "y.npy", y, allow_pickle=False)
        return {
            "recipe": "rcv1_like", "version": _RECIPE_VERSIONS["rcv1_like"],
            "key": cache_key("rcv1_like", params), "params": params,
            "X": {"shape": list(x.shape), "nnz": int(x.nnz), "dtype": "float32",
                  "sha256": _sparse_sha256(x)},
            "y": _labels_meta(y),
        }

    def read(entry: Path, meta: dict) -> tuple[sp.csr_matrix, np.ndarray]:
        x = sp.load_npz(entry / "X.npz")
        if not sp.isspmatrix_csr(x):
            x = sp.csr_matrix(x)
        if (list(x.shape) != [n_samples, n_features] or x.dtype != np.float32
                or x.nnz != meta["X"]["nnz"]):
            raise ValueError(f"X.npz has shape {x.shape}, dtype {x.dtype}, {x.nnz} non-zeros;"
                             f" meta says {meta['X']}")
        if _sparse_sha256(x) != meta["X"]["sha256"]:
            raise ValueError("X.npz checksum differs")
        return x, _read_labels(entry, meta)

    return _cached("rcv1_like", params, cache_dir, build, read)
