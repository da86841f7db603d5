"""The scattering transform, GroupNorm, the public PCA and the scattering cache.

Closed forms and exact symmetries run always; the cross-check against kymatio's numpy backend
runs when kymatio is installed (an optional extra, never required); the full Fashion-MNIST
size is ``slow``.
"""

import json
import math
import warnings

import numpy as np
import pytest

import rfed.datasets.features as features_mod
from rfed.datasets import fashion_mnist_available, load_fashion_mnist
from rfed.datasets.features import (
    group_norm,
    group_norm_bound,
    public_pca,
    scattering_cache_entry,
    scattering_features,
)
from rfed.datasets.scattering import Scattering2D, gabor_2d, morlet_2d, scattering_padding


def _images(n, shape=(28, 28), seed=0):
    return np.random.default_rng(seed).random((n,) + shape).astype(np.float32)


# ---------------------------------------------------------------------- filters and layout
def test_sizes_and_path_order():
    s = Scattering2D((28, 28), J=2, L=8)
    assert s.padded == (36, 36) and scattering_padding(28, 2) == 36
    assert s.out_shape == (81, 7, 7) and s.n_features == 3969
    assert [p.order for p in s.paths].count(2) == 64
    # order 0, then (j1, theta1), then (j1, theta1, j2, theta2) with j1 < j2
    assert s.paths[1].j == (0,) and s.paths[16].j == (1,) and s.paths[16].theta == (7,)
    assert s.paths[17].j == (0, 1) and s.paths[17].theta == (0, 0)
    assert s.paths[18].theta == (0, 1) and s.paths[25].theta == (1, 0)
    s3 = Scattering2D((32, 20), J=3, L=4)
    assert s3.n_channels == 1 + 3 * 4 + 16 * 3
    assert s3.out_shape[1:] == (scattering_padding(32, 3) // 8 - 2,
                                scattering_padding(20, 3) // 8 - 2)


def test_filters_closed_forms():
    # the Gaussian envelope is normalised to unit mass: sum over the periodised grid of
    # exp(-|u|^2 / 2 sigma^2) / (2 pi sigma^2) is 1 up to the Poisson-summation term
    # 2 exp(-2 pi^2 sigma^2) per axis (4e-6 at sigma = 0.8)
    for sigma in (0.8, 1.6):
        env = gabor_2d(36, 36, sigma, 0.3, 0.0, 1.0)
        assert abs(env.sum() - 1.0) < 5 * math.exp(-2 * math.pi ** 2 * sigma ** 2) + 1e-14
        assert np.abs(env.imag).max() == 0.0
    # a Morlet wavelet has zero mean (the envelope's multiple removes the Gabor's DC)
    psi = morlet_2d(36, 36, 0.8, math.pi / 8, 0.75 * math.pi, 0.5)
    assert abs(psi.sum()) < 1e-14 * np.abs(psi).sum()
    s = Scattering2D((28, 28), J=2, L=8)
    for bank in s.psi_hat:
        np.testing.assert_allclose(bank[:, 0, 0], 0.0, atol=1e-14)
    # angles (L/2 - 1 - l) pi / L
    assert [s.angle(t) for t in (0, 3, 7)] == [3 * math.pi / 8, 0.0, -4 * math.pi / 8]


def test_constant_image_closed_form():
    # a constant image c: reflection padding keeps it constant; the low-pass keeps the DC
    # (S0 = c * phi_hat(0), phi_hat(0) = (sum_x g(x))^2 / (2 pi sigma^2)) and every wavelet
    # kills it (psi_hat(0) = 0), so orders 1 and 2 vanish
    c = 0.37
    s = Scattering2D((28, 28), J=2, L=8, dtype=np.float64)
    out = s(np.full((1, 28, 28), c))
    sigma = 0.8 * 2
    x = np.arange(36)[None, :] + 36 * np.arange(-2, 3)[:, None]
    mass = np.exp(-x * x / (2 * sigma ** 2)).sum() ** 2 / (2 * math.pi * sigma ** 2)
    np.testing.assert_allclose(out[0, 0], c * mass, rtol=1e-13)
    assert np.abs(out[0, 1:]).max() < 1e-14


def test_homogeneous_and_transposition_symmetry():
    s = Scattering2D((28, 28), J=2, L=8, dtype=np.float64)
    x = _images(3).astype(np.float64)
    out = s(x)
    # order 0 is linear; orders 1 and 2 pass through a modulus: S(c x) = |c| S(x)
    scaled = s(-2.5 * x)
    np.testing.assert_allclose(scaled[:, 0], -2.5 * out[:, 0], rtol=1e-12)
    np.testing.assert_allclose(scaled[:, 1:], 2.5 * out[:, 1:], rtol=1e-12, atol=1e-15)
    # transposing an image maps a wavelet at angle theta to pi/2 - theta, i.e. index l to
    # (2 - l) mod 8 (angles are defined modulo pi: for a real image the moduli at theta and
    # theta + pi agree), and transposes every coefficient map
    out_t = s(np.swapaxes(x, 1, 2))
    index = {p: k for k, p in enumerate((p.order, p.j, p.theta) for p in s.paths)}
    for k, p in enumerate(s.paths):
        mirror = (p.order, p.j, tuple((2 - t) % 8 for t in p.theta))
        np.testing.assert_allclose(out_t[:, index[mirror]], np.swapaxes(out[:, k], 1, 2),
                                   rtol=1e-10, atol=1e-13)


def _reference_scattering(s, x):
    """The transform written the direct way (kymatio's pipeline: every low-pass and
    subsampling in Fourier, the filters on the full padded grid, the mean of the aliases),
    float64, one path at a time."""
    J, L = s.J, s.L
    mp, np_ = s.padded
    top, bottom, left, right = s._pad
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right)), mode="reflect")
    sigma = 0.8 * 2 ** (J - 1)
    phi = np.real(np.fft.fft2(gabor_2d(mp, np_, sigma, 0.0, 0.0, 1.0)))

    def crop(spec, res):
        m, n = spec.shape[-2:]
        mr, nr = m >> res, n >> res
        rows = np.r_[0:mr // 2, m - mr + mr // 2:m]
        cols = np.r_[0:nr // 2, n - nr + nr // 2:n]
        return spec[..., rows, :][..., cols]

    def sub(spec, k):
        m, n = spec.shape[-2:]
        return spec.reshape(spec.shape[:-2] + (k, m // k, k, n // k)).mean(axis=(-4, -2))

    def low(u, res):
        spec = np.fft.fft2(u) * crop(phi, res)
        return np.real(np.fft.ifft2(sub(spec, 2 ** (J - res))))[..., 1:-1, 1:-1]

    out = [low(xp, 0)]
    x_hat = np.fft.fft2(xp)
    order2 = []
    for j1 in range(J):
        for t1 in range(L):
            u1 = np.abs(np.fft.ifft2(sub(x_hat * s.psi_hat[j1][t1], 2 ** j1)))
            out.append(low(u1, j1))
            for j2 in range(j1 + 1, J):
                for t2 in range(L):
                    spec = np.fft.fft2(u1) * crop(s.psi_hat[j2][t2], j1)
                    u2 = np.abs(np.fft.ifft2(sub(spec, 2 ** (j2 - j1))))
                    order2.append(low(u2, j2))
    return np.stack(out + order2, axis=1)


@pytest.mark.parametrize("shape,J,L", [((28, 28), 2, 8), ((20, 14), 3, 3), ((9, 10), 1, 5)])
def test_fast_path_equals_the_direct_pipeline(shape, J, L):
    # rfed's separable spatial low-pass and blockwise aliasing are the same linear maps as the
    # Fourier-domain pipeline (float64: equal to rounding)
    s = Scattering2D(shape, J=J, L=L, dtype=np.float64)
    x = _images(4, shape).astype(np.float64)
    np.testing.assert_allclose(s(x), _reference_scattering(s, x), rtol=1e-10, atol=1e-12)
    # float32 (complex64 FFTs): a relative 1e-6 of each channel's scale
    got32 = Scattering2D(shape, J=J, L=L)(x)
    scale = np.abs(s(x)).max(axis=(0, 2, 3))[None, :, None, None]
    assert got32.dtype == np.float32
    assert np.max(np.abs(got32 - s(x)) / scale) < 5e-6


def test_chunking_does_not_change_the_result_and_bad_input_is_refused():
    s = Scattering2D((28, 28))
    x = _images(7)
    np.testing.assert_array_equal(s(x, batch_size=3), s(x, batch_size=7))
    np.testing.assert_array_equal(s(x[0]), s(x[:1])[0])
    with pytest.raises(ValueError, match="'images' must have shape"):
        s(np.zeros((2, 27, 28)))
    with pytest.raises(ValueError, match="NaN or inf"):
        s(np.full((1, 28, 28), np.nan))
    with pytest.raises(ValueError, match="at least 2\\^J"):
        Scattering2D((3, 28), J=2)
    with pytest.raises(ValueError, match="float32 or float64"):
        Scattering2D((28, 28), dtype=np.int64)


def test_against_kymatio_when_installed():
    frontend = pytest.importorskip("kymatio.scattering2d.frontend.numpy_frontend")
    for shape, J, L in [((28, 28), 2, 8), ((16, 12), 1, 4), ((32, 32), 3, 6)]:
        x = _images(8, shape)
        ref = frontend.ScatteringNumPy2D(J=J, shape=shape, L=L).scattering(x)
        s = Scattering2D(shape, J=J, L=L, dtype=np.float64)
        got = s(x)
        # kymatio normalises its filters by 2 * 3.1415 sigma^2 / slant, rfed by 2 pi: its
        # order-m coefficients carry m + 1 filters, hence (pi / 3.1415)^(m + 1)
        orders = np.array([p.order for p in s.paths])
        ref = ref / ((math.pi / 3.1415) ** (orders + 1))[None, :, None, None]
        scale = np.abs(ref).max(axis=(0, 2, 3))[None, :, None, None]
        # kymatio computes in float32
        assert np.max(np.abs(got - ref) / scale) < 3e-6, (shape, J, L)


# ---------------------------------------------------------------------- GroupNorm, PCA
def test_group_norm_closed_form_and_bound():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6, 3, 3)) * np.arange(1, 7)[None, :, None, None] + 4.0
    out = group_norm(x, groups=3, eps=1e-5)
    assert out.shape == (5, 54)
    g = out.reshape(5, 3, -1)
    raw = x.reshape(5, 3, -1)
    var = raw.var(axis=-1)
    np.testing.assert_allclose(g.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(g.var(axis=-1), var / (var + 1e-5), rtol=1e-12)
    assert np.all(np.linalg.norm(out, axis=1) <= group_norm_bound(54))
    # a flat group stays zero (no division by zero)
    flat = group_norm(np.ones((1, 6, 3, 3)), groups=3)
    assert np.array_equal(flat, np.zeros((1, 54)))
    with pytest.raises(ValueError, match="must divide"):
        group_norm(x, groups=4)


def test_group_norm_is_per_record():
    # the privacy argument: a record's output depends on that record alone
    rng = np.random.default_rng(2)
    x = rng.random((6, 9, 2, 2))
    y = x.copy()
    y[3] = rng.random((9, 2, 2)) * 100
    a, b = group_norm(x, 3), group_norm(y, 3)
    assert np.array_equal(np.delete(a, 3, axis=0), np.delete(b, 3, axis=0))
    assert np.array_equal(group_norm(x[3:4], 3), a[3:4])


def test_group_norm_equals_torch_when_installed():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((4, 81, 7, 7))
    ref = torch.nn.functional.group_norm(torch.from_numpy(x), 27, eps=1e-5).numpy()
    np.testing.assert_allclose(group_norm(x, 27), ref.reshape(4, -1), rtol=1e-10, atol=1e-12)


def test_features_equal_tramer_and_boneh_pipeline_when_installed():
    # the features rfed trains on against an independent reference: Tramer and Boneh's
    # ScatterNet features are kymatio's Scattering2D(J=2, shape=(28, 28)) of the images in
    # [0, 1], viewed as (n, 81, 7, 7), then torch.nn.GroupNorm(27, 81, affine=False); the
    # groups are 3 consecutive channels in kymatio's order (order 0, order 1, order 2)
    torch = pytest.importorskip("torch")
    frontend = pytest.importorskip("kymatio.scattering2d.frontend.numpy_frontend")
    x = _images(6).astype(np.float64)
    transform = Scattering2D((28, 28), J=2, L=8, dtype=np.float64)
    ref = frontend.ScatteringNumPy2D(J=2, shape=(28, 28)).scattering(x)
    # kymatio's filter normalisation 2 * 3.1415 sigma^2 (rfed: 2 pi sigma^2), per order
    orders = np.array([p.order for p in transform.paths])
    ref = ref / ((math.pi / 3.1415) ** (orders + 1))[None, :, None, None]
    norm = torch.nn.GroupNorm(27, 81, affine=False, eps=1e-5)
    expected = norm(torch.from_numpy(ref).reshape(-1, 81, 7, 7)).numpy().reshape(6, -1)
    coeffs = transform(x)
    got = group_norm(coeffs, 27)
    # kymatio computes in float32
    np.testing.assert_allclose(got, expected, atol=1e-4)
    # the comparison tells groupings apart: strided groups (channel k in group k mod 27)
    strided = group_norm(coeffs.reshape(6, 3, 27, 7, 7).swapaxes(1, 2), 27)
    strided = strided.reshape(6, 27, 3, 49).swapaxes(1, 2).reshape(6, -1)
    assert np.abs(strided - expected).max() > 0.5


def test_public_pca_is_orthonormal_and_never_lengthens_a_row():
    rng = np.random.default_rng(4)
    pub = rng.standard_normal((200, 10)) * np.geomspace(5, 0.1, 10)
    v, vals = public_pca(pub, 4)
    np.testing.assert_allclose(v.T @ v, np.eye(4), atol=1e-12)
    assert np.all(np.diff(vals) <= 0)
    # the top direction of this diagonal spectrum is the first axis
    assert abs(abs(v[0, 0]) - 1.0) < 1e-2
    x = rng.standard_normal((50, 10))
    assert np.all(np.linalg.norm(x @ v, axis=1) <= np.linalg.norm(x, axis=1) + 1e-12)
    with pytest.raises(ValueError, match="'dim'"):
        public_pca(pub, 11)


def test_public_pca_from_the_gram_matrix_when_records_are_few():
    # n < d: the directions from the n x n Gram matrix equal the top eigenvectors of the d x d
    # second moment (up to sign); past the rank, an orthonormal completion with eigenvalue 0
    rng = np.random.default_rng(5)
    pub = rng.standard_normal((12, 30)) * np.geomspace(4, 0.5, 30)
    v, vals = public_pca(pub, 8)
    ref_vals, ref_vecs = np.linalg.eigh(pub.T @ pub / 12)
    ref = ref_vecs[:, ::-1][:, :8]
    np.testing.assert_allclose(vals, ref_vals[::-1][:8], rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(v * ref, axis=0)), 1.0, atol=1e-9)
    w, wvals = public_pca(pub, 20)
    np.testing.assert_allclose(w.T @ w, np.eye(20), atol=1e-10)
    np.testing.assert_allclose(wvals[12:], 0.0)
    assert np.allclose(pub @ w[:, 12:], 0.0, atol=1e-10)


# ---------------------------------------------------------------------- the cache
def test_cache_computes_once_and_reads_back(tmp_path, monkeypatch):
    x = _images(9, (16, 16))
    first = scattering_features(x, J=2, L=4, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(first, Scattering2D((16, 16), 2, 4)(x))
    entry = scattering_cache_entry(x, J=2, L=4, cache_dir=tmp_path)
    assert sorted(p.name for p in entry.iterdir()) == ["S.npy", "meta.json"]

    def fail(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(Scattering2D, "chunks", fail)
    again = scattering_features(x, J=2, L=4, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again, first)
    # other images or settings: another entry, computed
    with pytest.raises(AssertionError, match="cache"):
        scattering_features(x[:8], J=2, L=4, cache_dir=tmp_path, progress=False)
    with pytest.raises(AssertionError, match="cache"):
        scattering_features(x, J=1, L=4, cache_dir=tmp_path, progress=False)


@pytest.mark.parametrize("damage", ["flip_a_byte", "truncate", "foreign_meta", "object_array",
                                    "no_meta"])
def test_a_damaged_or_foreign_entry_is_never_used(tmp_path, damage):
    x = _images(5, (16, 16))
    good = scattering_features(x, J=2, L=4, cache_dir=tmp_path, progress=False)
    entry = scattering_cache_entry(x, J=2, L=4, cache_dir=tmp_path)
    s_path, meta_path = entry / "S.npy", entry / "meta.json"
    if damage == "flip_a_byte":
        raw = bytearray(s_path.read_bytes())
        raw[-7] ^= 0x40
        s_path.write_bytes(bytes(raw))
        reason = "checksum"
    elif damage == "truncate":
        s_path.write_bytes(s_path.read_bytes()[:-40])
        reason = "S.npy unreadable"
    elif damage == "foreign_meta":
        meta = json.loads(meta_path.read_text())
        meta["key"] = "0" * 24
        meta_path.write_text(json.dumps(meta))
        reason = "another data set"
    elif damage == "object_array":
        # a pickled object array in place of the coefficients: never loaded (no pickle)
        np.save(s_path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        reason = "S.npy unreadable"
    else:
        meta_path.unlink()
        reason = "meta.json unreadable"
    with pytest.warns(RuntimeWarning, match=reason) as record:
        again = scattering_features(x, J=2, L=4, cache_dir=tmp_path, progress=False)
    assert str(entry) in str(record[0].message)
    np.testing.assert_array_equal(again, good)
    # recomputed and rewritten: the next read is clean
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(
            scattering_features(x, J=2, L=4, cache_dir=tmp_path, progress=False), good)


def test_cache_off_and_version_in_the_key(tmp_path, monkeypatch):
    x = _images(3, (16, 16))
    scattering_features(x, J=2, L=4, cache=False, cache_dir=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())
    before = scattering_cache_entry(x, J=2, L=4, cache_dir=tmp_path)
    monkeypatch.setattr(features_mod, "SCATTERING_CACHE_VERSION", 2)
    assert scattering_cache_entry(x, J=2, L=4, cache_dir=tmp_path) != before


@pytest.mark.slow
@pytest.mark.skipif(not fashion_mnist_available(), reason="Fashion-MNIST files not installed")
def test_fashion_mnist_full_size(tmp_path):
    (x, _), (xt, _) = load_fashion_mnist(split="both")
    feats = scattering_features(x, cache_dir=tmp_path, progress=False)
    assert feats.shape == (60000, 81, 7, 7) and feats.dtype == np.float32
    assert np.isfinite(feats).all()
    normed = group_norm(feats, 27)
    assert np.linalg.norm(normed, axis=1).max() <= group_norm_bound(3969)
    frontend = pytest.importorskip("kymatio.scattering2d.frontend.numpy_frontend")
    ref = frontend.ScatteringNumPy2D(J=2, shape=(28, 28), L=8).scattering(xt[:256])
    orders = np.array([p.order for p in Scattering2D().paths])
    ref = ref / ((math.pi / 3.1415) ** (orders + 1))[None, :, None, None]
    got = Scattering2D()(xt[:256])
    scale = np.abs(ref).max(axis=(0, 2, 3))[None, :, None, None]
    assert np.max(np.abs(got - ref) / scale) < 1e-5
