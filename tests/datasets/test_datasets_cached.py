"""Paper-size stand-ins on disk: same bits as the in-memory recipes, cache hits, validation,
atomic writes, concurrent builders; one slow test at the full epsilon shape."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import rfed.datasets.cached as cached_mod
from rfed.datasets import (
    EPSILON_SHAPE,
    cache_dir,
    cache_key,
    make_epsilon_like,
    make_epsilon_like_cached,
    make_rcv1_like,
    make_rcv1_like_cached,
)

REPO = Path(__file__).resolve().parents[2]


def _entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def _no_build(*args, **kwargs):
    raise AssertionError("the cache should have been used")


def test_epsilon_cached_equals_in_memory_recipe_in_float32(tmp_path):
    x, y = make_epsilon_like_cached(1000, 30, 5, label_noise=0.2, cache_dir=tmp_path,
                                    chunk_rows=64)
    ref_x, ref_y = make_epsilon_like(1000, 30, 5, label_noise=0.2, dtype=np.float32)
    assert isinstance(x, np.memmap) and x.dtype == np.float32 and not x.flags.writeable
    np.testing.assert_array_equal(x, ref_x)
    np.testing.assert_array_equal(y, ref_y)
    entries = _entries(tmp_path)
    assert len(entries) == 1 and entries[0].startswith("epsilon_like-")
    assert sorted(os.listdir(tmp_path / entries[0])) == ["X.npy", "meta.json", "y.npy"]


def test_epsilon_cache_hit_and_key(tmp_path, monkeypatch):
    x1, y1 = make_epsilon_like_cached(300, 12, 1, cache_dir=tmp_path)
    monkeypatch.setattr(cached_mod, "_epsilon_like_rows", _no_build)
    # a different chunk size is the same data, hence the same entry
    x2, y2 = make_epsilon_like_cached(300, 12, 1, cache_dir=tmp_path, chunk_rows=7)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    with pytest.raises(AssertionError, match="cache"):
        make_epsilon_like_cached(300, 12, 2, cache_dir=tmp_path)
    base = {"n_samples": 300, "n_features": 12, "seed": 1, "label_noise": 0.1, "dtype": "float32"}
    keys = {cache_key("epsilon_like", {**base, k: v})
            for k, v in [("seed", 1), ("seed", 2), ("n_samples", 301), ("label_noise", 0.2)]}
    assert len(keys) == 4


def test_cache_folder_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RFED_CACHE", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "arg") == tmp_path / "arg"
    make_epsilon_like_cached(50, 4, 0)
    assert len(_entries(tmp_path / "env")) == 1
    monkeypatch.delenv("RFED_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "rfed"
    with pytest.raises(TypeError, match="cache_dir"):
        cache_dir(3)
    with pytest.raises(ValueError, match="seed"):
        make_epsilon_like_cached(50, 4, -1, cache_dir=tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="cache_dir"):
        make_epsilon_like_cached(50, 4, 0, cache_dir=tmp_path / "file" / "sub")


def _corrupt_truncate(entry: Path):
    p = entry / "X.npy"
    p.write_bytes(p.read_bytes()[:-8])


def _corrupt_flip_row(entry: Path):
    # change one value of the first row (covered by the sampled-row checksum), same file size
    x = np.load(entry / "X.npy", mmap_mode="r+")
    x[0, 0] = 7.0
    x.flush()
    del x


def _corrupt_labels(entry: Path):
    y = np.load(entry / "y.npy")
    np.save(entry / "y.npy", -y)


def _corrupt_meta(entry: Path):
    meta = json.loads((entry / "meta.json").read_text())
    meta["params"]["seed"] = 99
    (entry / "meta.json").write_text(json.dumps(meta))


def _delete_meta(entry: Path):
    (entry / "meta.json").unlink()


@pytest.mark.parametrize(
    "corrupt", [_corrupt_truncate, _corrupt_flip_row, _corrupt_labels, _corrupt_meta, _delete_meta]
)
def test_invalid_entry_is_rebuilt_with_a_warning(tmp_path, corrupt):
    x, y = make_epsilon_like_cached(300, 12, 3, cache_dir=tmp_path)
    x, y = np.array(x), y.copy()
    (entry,) = tmp_path.iterdir()
    corrupt(entry)
    with pytest.warns(RuntimeWarning, match="invalid"):
        x2, y2 = make_epsilon_like_cached(300, 12, 3, cache_dir=tmp_path)
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(y2, y)
    assert len(_entries(tmp_path)) == 1


def test_failed_build_leaves_nothing(tmp_path, monkeypatch):
    real = cached_mod._epsilon_like_rows

    def dies_after_one_chunk(*args):
        it = real(*args)
        yield next(it)
        raise KeyboardInterrupt

    monkeypatch.setattr(cached_mod, "_epsilon_like_rows", dies_after_one_chunk)
    with pytest.raises(KeyboardInterrupt):
        make_epsilon_like_cached(300, 12, 0, cache_dir=tmp_path, chunk_rows=50)
    assert _entries(tmp_path) == []


def test_concurrent_builders_agree(tmp_path):
    code = textwrap.dedent(f"""
        import hashlib, sys
        sys.path.insert(0, {str(REPO)!r})
        from rfed.datasets import make_epsilon_like_cached
        x, y = make_epsilon_like_cached(5000, 50, 9, cache_dir={str(tmp_path)!r})
        print(hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and len(outs[0]) == 64
    # one entry, no temporary folders left behind by the builder that lost the race
    assert len(_entries(tmp_path)) == 1 and not _entries(tmp_path)[0].startswith(".")


def test_rcv1_cached_equals_recipe_rounded_to_float32(tmp_path, monkeypatch):
    x, y = make_rcv1_like_cached(700, 3000, 4, mean_nnz=25, cache_dir=tmp_path, chunk_rows=100)
    ref_x, ref_y = make_rcv1_like(700, 3000, 4, mean_nnz=25)
    assert sp.isspmatrix_csr(x) and x.dtype == np.float32 and x.shape == (700, 3000)
    np.testing.assert_array_equal(x.indptr, ref_x.indptr)
    np.testing.assert_array_equal(x.indices, ref_x.indices)
    np.testing.assert_array_equal(x.data, ref_x.data.astype(np.float32))
    np.testing.assert_array_equal(y, ref_y)
    monkeypatch.setattr(cached_mod, "_rcv1_recipe", _no_build)
    x2, _ = make_rcv1_like_cached(700, 3000, 4, mean_nnz=25, cache_dir=tmp_path)
    assert (x2 != x).nnz == 0
    (entry,) = tmp_path.iterdir()
    data = sp.load_npz(entry / "X.npz")
    data.data[0] += 1.0
    sp.save_npz(entry / "X.npz", data, compressed=False)
    monkeypatch.undo()
    with pytest.warns(RuntimeWarning, match="checksum"):
        x3, _ = make_rcv1_like_cached(700, 3000, 4, mean_nnz=25, cache_dir=tmp_path)
    np.testing.assert_array_equal(x3.data, x.data)


def test_rcv1_default_shape_statistics(tmp_path):
    # the LIBSVM training split's shape: 20,242 x 47,236 at about 0.16 % density
    x, y = make_rcv1_like_cached(cache_dir=tmp_path)
    assert x.shape == (20_242, 47_236)
    density = x.nnz / (x.shape[0] * x.shape[1])
    assert 0.0013 < density < 0.0017, density
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)
    assert set(np.unique(y)) == {-1.0, 1.0}


@pytest.mark.slow
def test_full_epsilon_shape_streams_in_bounded_memory(tmp_path):
    code = textwrap.dedent(f"""
        import resource, sys, time
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from rfed.datasets import make_epsilon_like_cached
        t0 = time.perf_counter()
        x, y = make_epsilon_like_cached(cache_dir={str(tmp_path)!r})
        t1 = time.perf_counter()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows = np.asarray(x[::4000], dtype=np.float64)
        print(x.shape[0], x.shape[1], t1 - t0, rss,
              np.abs(np.linalg.norm(rows, axis=1) - 1).max(), y.mean())
    """)
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=1800, check=True).stdout.split()
        n, d, build_s, rss_kib, norm_err, y_mean = (float(v) for v in out)
        assert (n, d) == EPSILON_SHAPE
        assert os.path.getsize(next(tmp_path.iterdir()) / "X.npy") > 4 * n * d
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)  # 3.2 GB: do not leave it in pytest's tmp
    # the float32 matrix is 3.2 GB; streaming keeps the builder's peak RSS far below it
    assert rss_kib < 1024 * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB"
    assert norm_err < 1e-6 and abs(y_mean) < 0.01
    print(f"\nfull epsilon shape {int(n)} x {int(d)} float32: built in {build_s:.1f} s,"
          f" peak RSS {rss_kib / 1024:.0f} MiB, subprocess total {time.perf_counter() - t0:.1f} s")


@pytest.mark.slow
def test_rcv1_test_split_size_in_bounded_memory(tmp_path):
    # the paper's rcv1 training set (LIBSVM test split): 677,399 x 47,236, about 49 M non-zeros
    code = textwrap.dedent(f"""
        import resource, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from rfed.datasets import RCV1_SHAPE, make_rcv1_like_cached
        t0 = time.perf_counter()
        x, y = make_rcv1_like_cached(*RCV1_SHAPE, 0, cache_dir={str(tmp_path)!r})
        print(x.shape[0], x.shape[1], x.nnz, time.perf_counter() - t0,
              resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=1800, check=True).stdout.split()
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
    n, d, nnz, build_s, rss_kib = (float(v) for v in out)
    assert (n, d) == (677_399, 47_236)
    assert 0.0013 < nnz / (n * d) < 0.0017
    # float32 values + int32 indices of the result alone take 8 bytes per non-zero (0.4 GB)
    assert rss_kib < 2 * 1024 * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB"
    print(f"\nrcv1 test-split shape, {int(nnz)} non-zeros: built in {build_s:.1f} s,"
          f" peak RSS {rss_kib / 1024:.0f} MiB")


def test_epsilon_cached_spectrum_decay(tmp_path):
    x, y = make_epsilon_like_cached(500, 16, 2, cache_dir=tmp_path, chunk_rows=37,
                                    spectrum_decay=1.5)
    ref_x, ref_y = make_epsilon_like(500, 16, 2, dtype=np.float32, spectrum_decay=1.5)
    np.testing.assert_array_equal(x, ref_x)
    np.testing.assert_array_equal(y, ref_y)
    iso, _ = make_epsilon_like_cached(500, 16, 2, cache_dir=tmp_path)
    assert not np.array_equal(iso, x)
    # the isotropic recipe keeps the key it had before spectrum_decay existed
    base = {"n_samples": 500, "n_features": 16, "seed": 2, "label_noise": 0.1, "dtype": "float32"}
    assert sorted(_entries(tmp_path)) == sorted(
        [f"epsilon_like-{cache_key('epsilon_like', base)}",
         f"epsilon_like-{cache_key('epsilon_like', {**base, 'spectrum_decay': 1.5})}"])
    with pytest.raises(ValueError, match="spectrum_decay"):
        make_epsilon_like_cached(10, 5, 0, cache_dir=tmp_path, spectrum_decay=5.0)
