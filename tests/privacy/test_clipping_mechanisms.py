"""Clipping bounds and the tangent Gaussian / Laplace mechanisms, on every available manifold."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rfed.manifolds as M
from rfed.privacy import (
    LaplaceSchedule,
    clip_by_norm,
    clip_coordinates,
    gaussian_mechanism,
    laplace_noise,
    secure_generator,
)
from rfed.privacy.secure import SecureModeError, SecureRandom


def _cases():
    cases = {
        "Euclidean(4)": lambda: M.Euclidean(4),
        "Euclidean(2,3)": lambda: M.Euclidean(2, 3),
        "Sphere(2)": lambda: M.Sphere(2),
        "Sphere(24)": lambda: M.Sphere(24),
    }
    # the geometry engineer's manifolds, when present
    for name, make in (
        ("SPD(3)", lambda: M.SPD(3)),
        ("Hyperboloid(2)", lambda: M.Hyperboloid(2)),
        ("PoincareBall(3)", lambda: M.PoincareBall(3)),
        ("FlatProduct(S2,SPD2)", lambda: M.Product(M.Sphere(2), M.SPD(2)).as_flat()),
    ):
        try:
            make()
        except (AttributeError, TypeError):
            continue
        cases[name] = make
    return cases


CASES = _cases()


@pytest.fixture(params=list(CASES))
def manifold(request):
    return CASES[request.param]()


def _random_tangents(m, x, n, rng, scale):
    xb = np.broadcast_to(
        np.expand_dims(x, -1 - len(m.point_shape)),
        x.shape[: x.ndim - len(m.point_shape)] + (n,) + m.point_shape,
    )
    u = m.random_tangent(np.array(xb), rng)
    lengths = scale * rng.exponential(size=xb.shape[: xb.ndim - len(m.point_shape)])
    lengths = lengths.reshape(lengths.shape + (1,) * len(m.point_shape))
    return xb, u * lengths


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), bound=st.floats(1e-3, 10.0), scale=st.floats(1e-3, 50.0))
def test_clipping_never_exceeds_the_bound(seed, bound, scale):
    rng = np.random.default_rng(seed)
    for make in CASES.values():
        m = make()
        x = m.random_point(rng, size=(3,))
        xb, g = _random_tangents(m, x, 7, rng, scale)
        clipped, n_clipped = clip_by_norm(m, x, g, bound)
        norms = m.norm(xb, clipped)
        original = m.norm(xb, g)
        assert np.all(norms <= bound * (1 + 1e-12))
        # short vectors are untouched, long ones end at the bound, directions kept
        short = original <= bound
        k = len(m.point_shape)
        assert np.allclose(clipped[short], g[short])
        assert np.allclose(norms[~short], bound, rtol=1e-10)
        assert np.array_equal(n_clipped, np.sum(~short, axis=-1))
        ratio = clipped / np.where(g == 0, 1, g)
        assert np.allclose(
            np.where(g == 0, 0, ratio),
            np.where(g == 0, 0, np.minimum(1, bound / original).reshape(original.shape + (1,) * k)),
        )


def test_clipping_zero_vector_and_per_agent_bounds():
    m = M.Sphere(2)
    rng = np.random.default_rng(0)
    x = m.random_point(rng, size=(2,))
    g = np.zeros((2, 3, 3))
    g[0, 1] = m.proj(x[0], np.array([3.0, -1.0, 2.0]))
    clipped, n = clip_by_norm(m, x, g, np.array([[1.0], [0.1]]))
    assert np.all(clipped[1] == 0) and np.all(clipped[0, 0] == 0)
    assert m.norm(x[0], clipped[0, 1]) == pytest.approx(1.0)
    assert n.tolist() == [1, 0]


def test_clipping_bad_input():
    m = M.Sphere(2)
    x = m.random_point(0)
    with pytest.raises(ValueError, match="'bound'"):
        clip_by_norm(m, x, np.zeros((4, 3)), -1.0)
    with pytest.raises(ValueError, match="'g'"):
        clip_by_norm(m, x, np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="'bound'"):
        clip_coordinates(np.ones(3), np.nan)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_clipping_refuses_nonfinite_gradients(bad):
    # issue 12: a NaN/inf gradient must not silently become a NaN (or unclipped) release
    m = M.Sphere(2)
    x = m.random_point(0)
    g = np.zeros((4, 3))
    g[2, 1] = bad
    with pytest.raises(ValueError, match="'g' contains NaN or inf"):
        clip_by_norm(m, x, g, 1.0)
    with pytest.raises(ValueError, match="'v' contains NaN or inf"):
        clip_coordinates(g, 1.0)
    xt = (m.random_point(0), M.SPD(2).random_point(0))
    gt = (g, np.full((4, 2, 2), bad))
    with pytest.raises(ValueError, match="'g'"):
        clip_by_norm(M.Product(M.Sphere(2), M.SPD(2)), xt, gt, 1.0)


@pytest.mark.parametrize("bound", [0.0, -1.0, np.array([1.0, 0.0, 1.0]), np.inf])
def test_clipping_refuses_zero_negative_or_infinite_bounds(bound):
    m = M.Sphere(2)
    x = m.random_point(0)
    with pytest.raises(ValueError, match="'bound'"):
        clip_by_norm(m, x, np.zeros((3, 3)), bound)
    with pytest.raises(ValueError, match="'bound'"):
        clip_coordinates(np.ones((2, 3)), bound)


def test_coordinate_clipping():
    v = np.array([[0.5, -2.0, 3.0], [0.1, 0.2, -0.3]])
    clipped, n = clip_coordinates(v, 1.0)
    assert clipped.tolist() == [[0.5, -1.0, 1.0], [0.1, 0.2, -0.3]]
    assert n.tolist() == [2, 0]
    per_coord, n2 = clip_coordinates(v, np.array([0.4, 5.0, 0.25]))
    assert np.all(np.abs(per_coord) <= np.array([0.4, 5.0, 0.25]))
    assert n2.tolist() == [2, 1]


@pytest.mark.parametrize("sigma", [0.3, 2.0])
def test_tangent_gaussian_mechanism_moments(manifold, sigma):
    # E||xi||_x^2 = sigma^2 dim and E<xi, a>_x^2 = sigma^2 |a|_x^2 (DESIGN.md, PriRFed Def. 2.5),
    # with 6-sigma bounds from the chi-square / normal sample distributions
    n = 20_000
    rng = np.random.default_rng(12)
    x1 = manifold.random_point(rng)
    x = np.broadcast_to(x1, (n,) + manifold.point_shape)
    value = np.broadcast_to(manifold.random_tangent(x1, rng), x.shape)
    out = gaussian_mechanism(manifold, x1, value, sigma, rng)
    xi = out - value
    assert np.all(manifold.is_tangent(x, xi, atol=1e-6))
    sq = manifold.norm(x, xi) ** 2 / sigma**2
    d = manifold.dim
    assert abs(sq.mean() - d) <= 6 * np.sqrt(2 * d / n)
    a = manifold.random_tangent(x1, rng)
    proj = manifold.inner(x, xi, np.broadcast_to(a, x.shape)) / (sigma * manifold.norm(x1, a))
    assert abs(proj.mean()) <= 6 / np.sqrt(n)
    assert abs((proj**2).mean() - 1) <= 6 * np.sqrt(2 / n)


def test_gaussian_mechanism_per_agent_sigma_and_seed():
    m = M.Sphere(3)
    x = m.random_point(1, size=(2,))
    v = np.zeros((2, 4))
    a = gaussian_mechanism(m, x, v, np.array([0.0, 1.0]), 7)
    b = gaussian_mechanism(m, x, v, np.array([0.0, 1.0]), 7)
    assert np.array_equal(a, b)  # same seed, same bits
    assert np.all(a[0] == 0) and np.linalg.norm(a[1]) > 0
    with pytest.raises(ValueError, match="'sigma'"):
        gaussian_mechanism(m, x, v, -1.0, 0)


def test_laplace_noise_moments_and_schedule():
    rng = np.random.default_rng(3)
    n = 200_000
    scale = np.array([0.5, 2.0])
    z = laplace_noise((n, 2), scale, rng)
    # Var Lap(b) = 2 b^2; E|x| = b; the sample variance of x^2 bounds the error
    second = (z**2).mean(axis=0)
    sd = (z**2).std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(second - 2 * scale**2) <= 6 * sd)
    assert np.all(np.abs(np.abs(z).mean(axis=0) - scale) <= 6 * scale / np.sqrt(n))
    sched = LaplaceSchedule(0.01, 0.995)
    assert sched.scale(0) == 0.01
    assert sched.scale(np.array([1, 10])) == pytest.approx(0.01 * 0.995 ** np.array([1, 10]))
    assert sched.noise(5, (3,), 0).shape == (3,)
    with pytest.raises(ValueError, match="'scale'"):
        laplace_noise(3, -1.0, rng)
    with pytest.raises(ValueError, match="'q'"):
        LaplaceSchedule(0.01, 1.5)
    with pytest.raises(ValueError, match="'theta0'"):
        LaplaceSchedule(-0.01, 0.9)


def test_secure_generator_is_os_randomness_and_refuses_float_noise():
    a, b = secure_generator(), secure_generator()
    assert isinstance(a, SecureRandom) and a.grid == 2.0**-40
    assert not np.array_equal(a.integers(0, 2**62, 4), b.integers(0, 2**62, 4))
    with pytest.raises(SecureModeError, match="floating-point noise is not allowed"):
        a.standard_normal(8)


def test_tuple_product_clipping_and_mechanism():
    m = M.Product(M.Sphere(2), M.SPD(2))
    rng = np.random.default_rng(4)
    x = m.random_point(rng, size=(2,))
    xb = tuple(np.broadcast_to(b[:, None], (2, 5) + b.shape[1:]).copy() for b in x)
    g = tuple(3.0 * b for b in m.random_tangent(xb, rng))
    clipped, n = clip_by_norm(m, x, g, 0.5)
    norms = m.norm(xb, clipped)
    assert np.all(norms <= 0.5 * (1 + 1e-12))
    assert n.tolist() == np.sum(m.norm(xb, g) > 0.5, axis=-1).tolist()
    # tangent Gaussian on the product: E||xi||^2 = sigma^2 (dim S2 + dim SPD2) = 5 sigma^2
    n_samples, sigma = 20_000, 0.7
    x1 = m.random_point(rng)
    xs = tuple(np.broadcast_to(b, (n_samples,) + b.shape) for b in x1)
    zero = m.zero_vector(xs)
    xi = gaussian_mechanism(m, x1, zero, sigma, rng)
    sq = m.norm(xs, xi) ** 2 / sigma**2
    assert abs(sq.mean() - m.dim) <= 6 * np.sqrt(2 * m.dim / n_samples)
    with pytest.raises(ValueError, match="'g'"):
        clip_by_norm(m, x, g[0], 1.0)


@pytest.mark.parametrize("secure", [False, True])
def test_mechanisms_refuse_nonfinite_values(secure):
    rng = SecureRandom() if secure else np.random.default_rng(0)
    m = M.Sphere(2)
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="'value' contains NaN or inf"):
        gaussian_mechanism(m, x, np.array([0.0, np.nan, 0.0]), 1.0, rng)
    from rfed.privacy import gaussian_release, laplace_mechanism

    with pytest.raises(ValueError, match="'value' contains NaN or inf"):
        gaussian_release(np.array([np.inf]), 1.0, rng)
    with pytest.raises(ValueError, match="'value' contains NaN or inf"):
        laplace_mechanism(np.array([np.nan]), 1.0, rng)


def test_gaussian_noise_checks_sigma_once_and_releases_the_same_floats():
    """GaussianNoise(sigma).release(value, rng) is gaussian_release(value, sigma, rng) from
    the same generator (bit for bit); a bad sigma is refused when it is made, naming 'sigma';
    a non-finite value at every release, naming 'value'; secure mode goes through
    gaussian_release's discrete release."""
    from rfed.privacy import GaussianNoise, gaussian_release

    value = np.random.default_rng(1).standard_normal(7)
    noise = GaussianNoise(0.3)
    np.testing.assert_array_equal(noise.release(value, np.random.default_rng(2)),
                                  gaussian_release(value, 0.3, np.random.default_rng(2)))
    for shaped in (value.reshape(7, 1), np.float64(0.5)):   # the general path's shapes
        np.testing.assert_array_equal(noise.release(shaped, np.random.default_rng(2)),
                                      gaussian_release(shaped, 0.3, np.random.default_rng(2)))
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="'sigma'"):
            GaussianNoise(bad)
    with pytest.raises(TypeError, match="'sigma'"):
        GaussianNoise("0.3")
    for rng in (np.random.default_rng(0), SecureRandom()):
        with pytest.raises(ValueError, match="'value' contains NaN or inf"):
            noise.release(np.array([0.0, np.nan]), rng)
    grid = 2.0 ** -20
    out = GaussianNoise(0.3).release(value, SecureRandom(grid))
    np.testing.assert_array_equal(out, np.round(out / grid) * grid)   # on the secure grid


def test_clip_by_norm_into_out_gives_the_same_values_and_count():
    from rfed.manifolds import Euclidean, Sphere
    from rfed.privacy.clipping import clip_by_norm

    rng = np.random.default_rng(5)
    for manifold, x in ((Euclidean(4), rng.standard_normal((6, 4))),
                        (Sphere(3), Sphere(3).random_point(rng, size=6))):
        g = 3.0 * rng.standard_normal((6, 2, 4))
        if isinstance(manifold, Sphere):
            g = manifold.proj(x[:, None], g)
        want, n_want = clip_by_norm(manifold, x, g, 1.0)
        into = g.copy()
        got, n_got = clip_by_norm(manifold, x, into, 1.0, out=into)
        assert got is into
        assert got.tobytes() == want.tobytes()
        assert np.array_equal(n_got, n_want) and n_want.sum() > 0
