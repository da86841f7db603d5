"""LIBSVM loader on files written by the test."""

import bz2
import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.datasets import load_libsvm, normalize_rows, to_pm1_labels

TEXT = """+1 1:0.5 3:1.5
-1 2:2.0 4:-1.0
+1 4:3.0
-1 1:1 2:1 3:1 4:1
"""
DENSE = np.array(
    [[0.5, 0.0, 1.5, 0.0], [0.0, 2.0, 0.0, -1.0], [0.0, 0.0, 0.0, 3.0], [1.0, 1.0, 1.0, 1.0]]
)


def test_reads_one_based_sparse_rows(tmp_path):
    (tmp_path / "a.svm").write_text(TEXT)
    x, y = load_libsvm(tmp_path / "a.svm")
    assert sp.isspmatrix_csr(x) and x.shape == (4, 4)
    np.testing.assert_array_equal(x.toarray(), DENSE)
    np.testing.assert_array_equal(y, [1, -1, 1, -1])
    xd, _ = load_libsvm(tmp_path / "a.svm", n_features=6, dense=True)
    assert isinstance(xd, np.ndarray) and xd.shape == (4, 6)
    np.testing.assert_array_equal(xd[:, :4], DENSE)
    assert not xd[:, 4:].any()


@pytest.mark.parametrize("opener,suffix", [(gzip.open, ".gz"), (bz2.open, ".bz2")])
def test_compressed_files(tmp_path, opener, suffix):
    path = tmp_path / f"a.svm{suffix}"
    with opener(path, "wt") as fh:
        fh.write(TEXT)
    x, _ = load_libsvm(path, dense=True)
    np.testing.assert_array_equal(x, DENSE)


def test_label_mapping_and_normalization(tmp_path):
    (tmp_path / "b.svm").write_text(TEXT.replace("+1 ", "1 ").replace("-1 ", "0 "))
    x, y = load_libsvm(tmp_path / "b.svm", normalize=True)
    np.testing.assert_array_equal(y, [1, -1, 1, -1])
    np.testing.assert_allclose(np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel()), 1.0)
    np.testing.assert_allclose(x.toarray(), DENSE / np.linalg.norm(DENSE, axis=1, keepdims=True))
    (tmp_path / "c.svm").write_text("1 1:1\n2 2:1\n3 1:2\n")
    with pytest.raises(ValueError, match="'y'"):
        load_libsvm(tmp_path / "c.svm")
    _, y3 = load_libsvm(tmp_path / "c.svm", binary_labels=False)
    np.testing.assert_array_equal(y3, [1, 2, 3])


def test_errors_name_the_argument(tmp_path):
    (tmp_path / "a.svm").write_text(TEXT)
    with pytest.raises(ValueError, match="path"):
        load_libsvm(tmp_path / "a.svm", n_features=2)
    with pytest.raises(ValueError, match="path"):
        load_libsvm(tmp_path / "nothing.svm")
    (tmp_path / "z.svm").write_text("+1 0:1.0\n")
    with pytest.raises(ValueError, match="path"):
        load_libsvm(tmp_path / "z.svm")
    with pytest.raises(TypeError, match="n_features"):
        load_libsvm(tmp_path / "a.svm", n_features=2.5)


def test_helpers():
    np.testing.assert_array_equal(to_pm1_labels(np.array([3, 7, 7])), [-1, 1, 1])
    z = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(z, [[0.6, 0.8], [0.0, 0.0]])


@pytest.mark.parametrize(
    "text,line,token",
    [
        ("+1 1:0.5\n-1 2:nan 3:1\n", 2, "2:nan"),
        ("+1 1:1\n# a comment line\n\n-1 2:-inf\n", 4, "2:-inf"),
        ("nan 1:1\n+1 2:1\n", 1, "nan"),
        ("+1 1:1\n-1 1:1e400\n", 2, "1:1e400"),  # overflows float64 to inf
    ],
)
def test_non_finite_values_name_file_and_line(tmp_path, text, line, token):
    path = tmp_path / "bad.svm.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    with pytest.raises(ValueError, match=f"line {line}: non-finite value '{token}'") as info:
        load_libsvm(path)
    assert "bad.svm.gz" in str(info.value)


def test_empty_file_is_an_error(tmp_path):
    (tmp_path / "empty.svm").write_text("")
    with pytest.raises(ValueError, match="no samples"):
        load_libsvm(tmp_path / "empty.svm")


def test_helpers_refuse_non_finite_values():
    with pytest.raises(ValueError, match="'y'"):
        to_pm1_labels(np.array([1.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="'x'"):
        normalize_rows(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="'x'"):
        normalize_rows(sp.csr_matrix(np.array([[np.inf, 1.0]])))
