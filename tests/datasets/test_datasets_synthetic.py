"""Synthetic recipes: shapes, seeds, and the recipe properties of the specs."""

import re
import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, polygamma

from rfed.datasets import (
    RCV1_SHAPE,
    haar_orthogonal,
    make_epsilon_like,
    make_pca_synthetic,
    make_rcv1_like,
    make_wishart_spd,
    random_orthonormal_columns,
)

GENERATORS = [
    lambda s: make_pca_synthetic(4, 30, 10, 1e-3, s),
    lambda s: make_wishart_spd(200, 2, s),
    lambda s: make_epsilon_like(50, 20, s)[0],
    lambda s: make_rcv1_like(50, 500, s, mean_nnz=10)[0].toarray(),
]


@pytest.mark.parametrize("make", GENERATORS)
def test_same_seed_same_bits_different_seed_differs(make):
    a, b, c = make(3), make(3), make(4)
    assert np.array_equal(a, b)
    assert a.shape == c.shape and not np.allclose(a, c)
    # a Generator works too and is consumed
    gen = np.random.default_rng(3)
    assert np.array_equal(make(gen), a)


def test_haar_orthogonal_is_orthogonal_and_batched():
    q = haar_orthogonal(6, 0, (5,))
    assert q.shape == (5, 6, 6)
    np.testing.assert_allclose(q @ np.swapaxes(q, 1, 2), np.broadcast_to(np.eye(6), q.shape),
                               atol=1e-12)
    u = random_orthonormal_columns(9, 4, 1, (3,))
    np.testing.assert_allclose(np.swapaxes(u, 1, 2) @ u, np.broadcast_to(np.eye(4), (3, 4, 4)),
                               atol=1e-12)


def test_haar_first_column_is_uniform_on_sphere():
    # q_00 of a Haar matrix is a coordinate of a uniform point on S^3: mean 0, E q^2 = 1/4,
    # E q^4 = 3/24. Householder QR without the sign fix returns q_00 = -|g_00|/|g_0| < 0.
    m = 20000
    q00 = haar_orthogonal(4, 7, (m,))[:, 0, 0]
    assert abs(q00.mean()) < 5 * np.sqrt(0.25 / m)
    assert abs(np.mean(q00**2) - 0.25) < 5 * np.sqrt((3 / 24 - 1 / 16) / m)


def test_pca_recipe_spectrum_and_eigengap():
    nu = 1e-3
    z = make_pca_synthetic(16, 70, 25, nu, 0)
    assert z.shape == (16, 70, 25)
    s = np.linalg.svd(z, compute_uv=False)  # (16, 25), descending
    np.testing.assert_allclose(s[:, :5], np.broadcast_to(1 - nu * np.array([0, 1.1, 1.2, 1.3, 1.4]),
                                                          (16, 5)), atol=1e-12)
    # the random tail |y|/(d+1) sits well below the structured block
    assert np.all(s[:, 5:] < 1 - 1.4 * nu) and np.all(s[:, 5:] > 0)
    # local second-moment matrix Z_i^T Z_i: top eigengap 1 - (1 - 1.1 nu)^2
    lam = np.linalg.eigvalsh(np.swapaxes(z, 1, 2) @ z)[:, ::-1]
    np.testing.assert_allclose(lam[:, 0] - lam[:, 1], 1 - (1 - 1.1 * nu) ** 2, rtol=1e-6)


def test_pca_per_agent_vs_shared_directions():
    def leading(z):
        return np.linalg.eigh(np.swapaxes(z, 1, 2) @ z)[1][..., -1]

    het = leading(make_pca_synthetic(8, 40, 25, 1e-2, 1))
    iid = leading(make_pca_synthetic(8, 40, 25, 1e-2, 1, shared_basis=True))
    assert np.all(np.abs(iid @ iid[0]) > 1 - 1e-9)
    # independent uniform directions in R^25: |cos| is about 0.2, never close to 1
    assert np.max(np.abs(het[1:] @ het[0])) < 0.9


def test_pca_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_per_agent"):
        make_pca_synthetic(2, 10, 25, 1e-3, 0)
    with pytest.raises(ValueError, match="eigengap"):
        make_pca_synthetic(2, 30, 25, 0.9, 0)
    with pytest.raises(TypeError, match="rng"):
        make_pca_synthetic(2, 30, 25, 1e-3, None)
    with pytest.raises(TypeError, match="n_agents"):
        make_pca_synthetic(2.0, 30, 25, 1e-3, 0)


def test_wishart_mean_and_log_determinant_match_theory():
    n, m = 2, 20000
    w = make_wishart_spd(m, n, 5, radius=None)
    assert w.shape == (m, n, n)
    np.testing.assert_array_equal(w, np.swapaxes(w, 1, 2))
    assert np.all(np.linalg.eigvalsh(w) > 0)
    # W(I/n, n): mean I, Var(W_ij) = (1 + delta_ij)/n  -> 5 standard errors
    se = np.sqrt((1 + np.eye(n)) / n / m)
    assert np.all(np.abs(w.mean(0) - np.eye(n)) < 5 * se)
    # E log det W = sum_i digamma((df - i + 1)/2) + n log 2 + log det(I/n), Var = sum trigamma
    k = np.arange(1, n + 1)
    mean_ld = digamma((n - k + 1) / 2).sum() + n * np.log(2) + n * np.log(1 / n)
    var_ld = polygamma(1, (n - k + 1) / 2).sum()
    ld = np.linalg.slogdet(w)[1]
    assert abs(ld.mean() - mean_ld) < 5 * np.sqrt(var_ld / m)


def test_wishart_rejection_ball():
    w = make_wishart_spd(3000, 2, 0, radius=0.5)
    assert w.shape == (3000, 2, 2)
    d = np.linalg.norm(np.log(np.linalg.eigvalsh(w)), axis=-1)
    assert d.max() <= 0.5
    # diameter of the data set <= 2 * radius = D_W = 1 (affine-invariant distance)
    a, b = w[:200], w[200:400]
    la = np.linalg.cholesky(a)
    inv = np.linalg.inv(la)
    m = inv @ b @ np.swapaxes(inv, 1, 2)
    assert np.linalg.norm(np.log(np.linalg.eigvalsh(m)), axis=-1).max() <= 1.0
    with pytest.raises(ValueError, match="max_draws=5000"):
        make_wishart_spd(10, 2, 0, radius=1e-6, max_draws=5000)


def test_wishart_unreachable_radius_fails_fast():
    # radius 1e-6 around I: the acceptance probability is ~1e-12, so the paper-size request
    # (5,000 samples) is hopeless; it used to run for about 50 minutes before failing
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="radius") as info:
        make_wishart_spd(5000, 2, 0, radius=1e-6)
    assert time.perf_counter() - t0 < 10.0
    msg = str(info.value)
    assert "accepted only 0 of" in msg and "larger radius" in msg
    drawn = int(re.search(r"of (\d+) Wishart", msg).group(1))
    assert drawn < 10_000 * 5000 + 1_000_000
    # a reachable but rare radius still succeeds and respects the ball
    w = make_wishart_spd(50, 3, 1, radius=0.8)
    assert np.linalg.norm(np.log(np.linalg.eigvalsh(w)), axis=-1).max() <= 0.8
    with pytest.raises(TypeError, match="max_draws"):
        make_wishart_spd(10, 2, 0, max_draws=1.5)


def test_chunked_recipes_do_not_depend_on_the_chunk_size():
    a, ya = make_epsilon_like(203, 17, 4, dtype=np.float32, chunk_rows=203)
    b, yb = make_epsilon_like(203, 17, 4, dtype=np.float32, chunk_rows=10)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yb)
    c, yc = make_rcv1_like(300, 800, 2, mean_nnz=15, chunk_rows=300)
    d, yd = make_rcv1_like(300, 800, 2, mean_nnz=15, chunk_rows=7)
    assert (c != d).nnz == 0 and np.array_equal(c.indices, d.indices)
    np.testing.assert_array_equal(yc, yd)


def test_generators_refuse_garbage():
    # an integer dtype used to give NaN rows (zero norms)
    with pytest.raises(ValueError, match="dtype"):
        make_epsilon_like(10, 5, 0, dtype=np.int64)
    # Zipf(3) over 1,000 terms cannot give 400 distinct terms per document
    with pytest.raises(ValueError, match="mean_nnz"):
        make_rcv1_like(100, 1000, 0, mean_nnz=400, zipf_exponent=3.0)
    # two documents over a tiny vocabulary: one of them only holds terms both share (idf 0)
    make_rcv1_like(2, 4, 0, mean_nnz=1.0)  # seed 0 happens to keep a term in each document
    with pytest.raises(ValueError, match="n_samples"):
        make_rcv1_like(2, 4, 1, mean_nnz=1.0)


def test_epsilon_like_shape_statistics():
    x, y = make_epsilon_like(4000, 50, 0, label_noise=0.1)
    assert x.shape == (4000, 50) and y.shape == (4000,)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert abs(y.mean()) < 0.1
    # the labels carry linear signal: a held-out linear classifier beats chance by far
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=10.0, fit_intercept=False, max_iter=1000).fit(x[:3000], y[:3000])
    assert clf.score(x[3000:], y[3000:]) > 0.75
    assert make_epsilon_like(10, rng=0)[0].shape == (10, 2000)


def test_rcv1_like_shape_statistics():
    x, y = make_rcv1_like(2000, rng=0)
    assert sp.isspmatrix_csr(x) and x.shape == (2000, RCV1_SHAPE[1])
    nnz = np.diff(x.indptr)
    assert 0.85 * 73 < nnz.mean() < 1.1 * 73
    assert x.data.min() > 0
    np.testing.assert_allclose(np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel()), 1.0, atol=1e-12)
    assert set(np.unique(y)) == {-1.0, 1.0} and abs(y.mean()) < 0.15
    # Zipf: the most frequent column appears in far more documents than the median column
    df = np.bincount(x.indices, minlength=x.shape[1])
    assert df.max() > 20 * max(np.median(df[df > 0]), 1)


def test_epsilon_like_spectrum_decay():
    s, n, d = 1.0, 20000, 40
    x, y = make_epsilon_like(n, d, 3, spectrum_decay=s)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    assert abs(y.mean()) < 0.05
    # feature k is k^{-s/2} g_k with g standard normal; the row normalisation divides a row by
    # one number, so a_k / a_1 = k^{-s/2} g_k / g_1, whose |.| has median k^{-s/2} (standard
    # Cauchy ratio, median of |.| = 1)
    ratio = np.median(np.abs(x[:, [1, 3, 9]] / x[:, :1]), axis=0)
    np.testing.assert_allclose(ratio, np.array([2.0, 4.0, 10.0]) ** (-s / 2), rtol=0.05)
    # the per-record signal ||E[b a]|| grows: a decaying spectrum concentrates the score
    iso, y_iso = make_epsilon_like(n, d, 3)
    signal = np.linalg.norm(np.mean(x * y[:, None], axis=0))
    signal_iso = np.linalg.norm(np.mean(iso * y_iso[:, None], axis=0))
    assert signal > 1.5 * signal_iso
    # s = 0 is the isotropic recipe, bit for bit
    np.testing.assert_array_equal(make_epsilon_like(50, 7, 1, spectrum_decay=0.0)[0],
                                  make_epsilon_like(50, 7, 1)[0])
    with pytest.raises(ValueError, match="spectrum_decay"):
        make_epsilon_like(10, 5, 0, spectrum_decay=-1.0)
