"""Manifold-specific numerics and the maps between models."""

import warnings

import numpy as np
import pytest

from rfed.manifolds import (
    SPD,
    AntipodalError,
    ConvergenceWarning,
    Euclidean,
    Hyperboloid,
    PoincareBall,
    Product,
    Sphere,
)


# ---------------------------------------------------------------- sphere
def test_sphere_close_points_keep_their_distance():
    s = Sphere(3)
    rng = np.random.default_rng(0)
    x = s.random_point(rng, (5,))
    u = s.tangent_gaussian(x, 1.0, rng)
    u = 1e-9 * u / s.norm(x, u)[:, None]
    y = s.exp(x, u)
    np.testing.assert_allclose(s.dist(x, y), 1e-9, rtol=1e-6)
    np.testing.assert_allclose(s.norm(x, s.log(x, y)), 1e-9, rtol=1e-6)


def test_sphere_exp_renormalizes_a_drifted_point_and_iterates_stay_on_the_sphere():
    # Sphere.exp renormalizes only a result whose squared norm is more than 8 eps from 1: a
    # base point drifted by 1e-9 comes back to the sphere, and 2,000 iterated noisy steps
    # (each result the next base point) never drift past the tolerance (plus the rounding of
    # the squared norm itself)
    m, rng, eps = Sphere(24), np.random.default_rng(5), np.finfo(float).eps
    x = m.random_point(rng, (50,))
    u = m.tangent_gaussian(x, 0.5, rng)
    y = m.exp(x * (1.0 + 1e-9), u)
    assert np.max(np.abs(np.einsum("ij,ij->i", y, y) - 1.0)) <= 10 * eps
    # and within the base point's drift of the closed form at the normalized base point
    np.testing.assert_allclose(y, m.exp(x, u), rtol=0, atol=1e-9)
    worst = 0.0
    for _ in range(2000):
        x = m.exp(x, m.tangent_gaussian(x, 0.3, rng))
        worst = max(worst, float(np.max(np.abs(np.einsum("ij,ij->i", x, x) - 1.0))))
    assert worst <= 10 * eps


@pytest.mark.parametrize("dim", [2, 200])
def test_sphere_exp_in_row_blocks_equals_the_exp_of_each_row(dim):
    # a batch of more rows than a cache-sized block holds (4096 short rows, fewer long ones)
    # is computed in row blocks: every row, the last partial block's too, is bit for bit the
    # exp of that row alone (the plain closed form), zero and tiny steps and a renormalized
    # drifted base point included
    from rfed.manifolds.sphere import _block_rows

    m, rng = Sphere(dim), np.random.default_rng(11)
    x = m.random_point(rng, (2 * _block_rows(dim + 1) + 5,))
    u = m.tangent_gaussian(x, 2.0, rng)
    u[0] = 0.0
    u[1] *= 1e-200
    x[-1] *= 1.0 + 1e-9
    y = m.exp(x, u)
    rows = np.array([m.exp(xi, ui) for xi, ui in zip(x, u, strict=True)])
    assert np.array_equal(y, rows)
    np.testing.assert_array_equal(y[0], x[0])
    assert abs(float(y[-1] @ y[-1]) - 1.0) <= 10 * np.finfo(float).eps


@pytest.mark.parametrize("sigma", [0.7, "per row"])
def test_sphere_tangent_gaussian_in_row_blocks_equals_the_batch_formula(sigma):
    # a large batch projects its normals in cache-sized row blocks: the bits of the batch
    # formula z - <x, z> x, times sigma (one per row or one for all)
    from rfed.manifolds.sphere import _block_rows

    m, rng = Sphere(300), np.random.default_rng(3)
    x = m.random_point(rng, (3 * _block_rows(301) + 7,))
    scale = rng.random(len(x)) if sigma == "per row" else np.asarray(sigma)
    got = m.tangent_gaussian(x, scale, np.random.default_rng(5))
    z = np.random.default_rng(5).standard_normal(x.shape)
    want = (z - np.einsum("ij,ij->i", x, z)[:, None] * x) * scale[..., None]
    assert np.array_equal(got, want)


def test_sphere_near_antipodal_distance():
    s = Sphere(2)
    x = np.array([1.0, 0.0, 0.0])
    y = s.exp(x, np.array([0.0, np.pi - 1e-6, 0.0]))
    np.testing.assert_allclose(s.dist(x, y), np.pi - 1e-6, rtol=1e-12)
    # pi - 1e-6 is still inside the injectivity radius: log works
    np.testing.assert_allclose(s.log(x, y), [0.0, np.pi - 1e-6, 0.0], atol=1e-9)


def test_sphere_antipodal_log_raises():
    s = Sphere(2)
    x = s.random_point(0, (3,))
    y = x.copy()
    y[1] = -x[1]
    with pytest.raises(AntipodalError, match="antipodal"):
        s.log(x, y)
    assert issubclass(AntipodalError, ValueError)


# ---------------------------------------------------------------- hyperboloid
@pytest.mark.parametrize("dim", [2, 5])
def test_hyperboloid_exp_of_norm_30(dim):
    h = Hyperboloid(dim)
    rng = np.random.default_rng(dim)
    x = h.random_point(rng, (8,))
    u = h.tangent_gaussian(x, 1.0, rng)
    u = 30.0 * u / h.norm(x, u)[:, None]
    y = h.exp(x, u)
    assert np.all(np.isfinite(y))
    assert np.all(h.belongs(y, atol=1e-12))
    np.testing.assert_allclose(h.dist(x, y), 30.0, rtol=1e-8)
    np.testing.assert_allclose(h.norm(x, h.log(x, y)), 30.0, rtol=1e-8)
    # the log recovers the direction too
    v = h.log(x, y)
    cos = h.inner(x, u, v) / (h.norm(x, u) * h.norm(x, v))
    np.testing.assert_allclose(cos, 1.0, atol=1e-10)


def test_hyperboloid_close_points():
    h = Hyperboloid(3)
    rng = np.random.default_rng(1)
    x = h.random_point(rng, (5,))
    u = h.tangent_gaussian(x, 1.0, rng)
    u = 1e-9 * u / h.norm(x, u)[:, None]
    np.testing.assert_allclose(h.dist(x, h.exp(x, u)), 1e-9, rtol=1e-6)


def test_hyperboloid_tangent_gaussian_is_transport_from_origin():
    h = Hyperboloid(3)
    x = h.random_point(0, (4,))
    g = h.tangent_gaussian(x, 1.3, np.random.default_rng(5))
    spatial = 1.3 * np.random.default_rng(5).standard_normal((4, 3))
    at_origin = np.concatenate([np.zeros((4, 1)), spatial], axis=-1)
    np.testing.assert_allclose(g, h.transport(h.origin, x, at_origin), atol=1e-12)


@pytest.mark.parametrize("radius", [5.0, 20.0, 25.0, 30.0, 34.0])
def test_hyperboloid_log_far_from_the_origin_keeps_the_documented_accuracy(radius):
    """The documented float64 limit of ambient tangent coordinates: at a base point x far out,
    the component across the radius is resolved to eps x_0 |u|, so norm(log) / dist - 1 is
    O((eps x_0)^2) (plus ulps), derived from the representation, not measured."""
    h = Hyperboloid(2)
    rng = np.random.default_rng(int(radius))
    o = np.broadcast_to(h.origin, (64, 3))
    out = h.tangent_gaussian(o, 1.0, rng)
    x = h.exp(o, radius * out / h.norm(o, out)[:, None])
    near = h.tangent_gaussian(o, 1.0, rng)
    y = h.exp(o, rng.uniform(0.1, 3.0, (64, 1)) * near / h.norm(o, near)[:, None])
    rel = np.abs(h.norm(x, h.log(x, y)) / h.dist(x, y) - 1.0)
    eps_x0 = np.finfo(float).eps * np.cosh(radius)
    assert np.max(rel) <= 100.0 * eps_x0**2 + 1e-13, (radius, np.max(rel), eps_x0**2)
    # the target end is near the origin: there the log is accurate at every distance
    back = np.abs(h.norm(y, h.log(y, x)) / h.dist(x, y) - 1.0)
    assert np.max(back) <= 1e-13


def test_hyperboloid_far_points_are_checked_and_proj_refuses_to_overflow():
    h = Hyperboloid(2)
    o = h.origin
    u = np.array([0.0, 600.0, 0.0])
    x = h.exp(o, u)  # x_0 = cosh 600, about 2e260: x * x overflows
    with np.errstate(over="raise", invalid="raise"):  # no overflow warning on the way
        assert h.point_violation(x) <= 1e-15
        assert h.point_violation(-x) >= 1.0  # the lower sheet still fails
        with pytest.raises(FloatingPointError, match="proj"):
            h.proj(x, np.array([1.0, 2.0, 3.0]))


def test_hyperboloid_mean_starts_at_the_positive_weight_point_nearest_the_origin():
    h = Hyperboloid(2)
    o = h.origin
    pts = np.stack([h.exp(o, np.array([0.0, r, 0.0])) for r in (3.0, 0.5, 1.0)])
    batch = np.stack([pts, pts[::-1]])
    weights = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])  # the nearest has weight 0 in one
    # a tolerance met at the start returns the start itself
    start = h.mean(batch, weights, tol=1e3)
    np.testing.assert_array_equal(start, np.stack([pts[1], pts[2]]))


def test_hyperboloid_mean_far_first_point_finds_the_midpoint_and_warns():
    """The far point first (40 units out) and a near one: the mean started at the first point
    with the cancelling log returned a point 21.83 / 18.29 from them, silently."""
    h = Hyperboloid(2)
    o = h.origin
    far = h.exp(o, np.array([0.0, 40.0, 0.0]))
    near = h.exp(o, np.array([0.0, 0.0, 0.5]))
    half = 0.5 * h.dist(far, near)
    for init in (None, far, near):
        with pytest.warns(ConvergenceWarning, match="resolved only to about"):
            m = h.mean(np.stack([far, near]), init=init)
        np.testing.assert_allclose(h.dist(m, far), half, rtol=1e-12)
        np.testing.assert_allclose(h.dist(m, near), half, rtol=1e-12)


def test_hyperboloid_mean_warns_beyond_the_accurate_range_only():
    h = Hyperboloid(2)
    o = h.origin
    near = h.exp(o, np.array([0.0, 0.0, 0.5]))
    x60 = h.exp(o, np.array([0.0, 60.0, 0.0]))
    with pytest.warns(ConvergenceWarning, match=r"\(16 \+ x_0\) eps relative"):
        h.mean(np.stack([x60, near]), init=near)
    # data near the origin (up to 8 units out): accurate, no warning
    rng = np.random.default_rng(3)
    pts = h.exp(o, 8.0 * h.tangent_gaussian(np.broadcast_to(o, (5, 20, 3)), 0.5, rng))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = h.mean(pts)
    assert m.shape == (5, 3) and np.all(h.belongs(m))


# ---------------------------------------------------------------- poincare <-> hyperboloid
def test_poincare_hyperboloid_maps_are_inverse_isometries():
    h = Hyperboloid(3)
    ball = PoincareBall(3)
    rng = np.random.default_rng(2)
    x = h.random_point(rng, (10,))
    y = h.random_point(rng, (10,))
    px, py = h.to_poincare(x), h.to_poincare(y)
    assert np.all(ball.belongs(px))
    np.testing.assert_allclose(h.from_poincare(px), x, rtol=1e-12)
    np.testing.assert_allclose(ball.to_hyperboloid(px), x, rtol=1e-12)
    np.testing.assert_allclose(ball.from_hyperboloid(x), px, rtol=0, atol=0)
    np.testing.assert_allclose(ball.dist(px, py), h.dist(x, y), rtol=1e-11)
    # exp commutes with the isometry: pushing a tangent vector forward by the differential
    u = ball.tangent_gaussian(px, 0.8, rng)
    hu = ball._push(px, u)
    np.testing.assert_allclose(h.norm(x, hu), ball.norm(px, u), rtol=1e-12)
    np.testing.assert_allclose(
        ball.to_hyperboloid(ball.exp(px, u)), h.exp(x, hu), rtol=1e-10, atol=1e-12
    )


def test_poincare_log_at_origin_and_clamp():
    ball = PoincareBall(2)
    y = np.array([0.3, -0.4])
    # at 0, lambda = 2 and Log_0 y = artanh(|y|) y / |y|
    np.testing.assert_allclose(ball.log(np.zeros(2), y), np.arctanh(0.5) * y / 0.5, rtol=1e-14)
    far = ball.exp(np.zeros(2), np.array([60.0, 0.0]))
    assert np.linalg.norm(far) < 1.0 and ball.belongs(far)


# ---------------------------------------------------------------- SPD
@pytest.mark.parametrize("n", [2, 3, 5])
def test_spd_condition_1e8_round_trips(n):
    """Relative accuracy 1e-8: exp(log) in ||.||_F / ||Q||_F, and log(exp) in ||.||_F relative to
    ||P||_F |U|_P (a tangent vector of unit AI norm has Frobenius size ||P||_F at most)."""
    m = SPD(n)
    rng = np.random.default_rng(n)
    q = np.linalg.qr(rng.standard_normal((50, n, n)))[0]
    p = (q * np.logspace(0, -8, n)[None, None, :]) @ np.swapaxes(q, -1, -2)
    p = 0.5 * (p + np.swapaxes(p, -1, -2))
    np.testing.assert_allclose(np.linalg.cond(p), 1e8, rtol=1e-3)
    u = m.tangent_gaussian(p, 1.0, rng)
    u = u / m.norm(p, u)[:, None, None]
    qq = m.exp(p, u)
    u2 = m.log(p, qq)
    fro = np.linalg.norm
    assert np.all(fro(u2 - u, axis=(1, 2)) <= 1e-8 * fro(p, axis=(1, 2)))
    assert np.all(fro(m.exp(p, u2) - qq, axis=(1, 2)) <= 1e-8 * fro(qq, axis=(1, 2)))
    np.testing.assert_allclose(m.dist(p, qq), 1.0, rtol=1e-7)


def test_spd_retraction_is_second_order():
    m = SPD(3)
    rng = np.random.default_rng(3)
    x = m.random_point(rng, (5,))
    u = m.tangent_gaussian(x, 1.0, rng)
    u = u / m.norm(x, u)[:, None, None]
    errs = [np.max(m.dist(m.retract(x, t * u), m.exp(x, t * u))) for t in (1e-2, 1e-3)]
    assert errs[1] <= errs[0] / 200  # O(t^3): a factor 1000 per decade (first order: 100)


# ---------------------------------------------------------------- products
def test_product_flat_and_tuple_agree():
    prod = Product(Sphere(2), SPD(2), Euclidean(2))
    flat = prod.as_flat()
    rng = np.random.default_rng(4)
    x = prod.random_point(rng, (3,))
    y = prod.random_point(rng, (3,))
    u = prod.tangent_gaussian(x, 0.5, rng)
    fx, fy, fu = flat.join(x), flat.join(y), flat.join(u)
    assert fx.shape == (3, 3 + 4 + 2) and flat.point_shape == (9,)
    assert flat.dim == prod.dim == 2 + 3 + 2
    np.testing.assert_allclose(flat.exp(fx, fu), flat.join(prod.exp(x, u)), rtol=1e-14)
    np.testing.assert_allclose(flat.dist(fx, fy), prod.dist(x, y), rtol=1e-14)
    np.testing.assert_allclose(
        prod.dist(x, y) ** 2,
        sum(m.dist(a, b) ** 2 for m, a, b in zip(prod.manifolds, x, y, strict=True)),
    )
    for a, b in zip(flat.split(fx), x, strict=True):
        np.testing.assert_array_equal(a, b)
    # one generator drives every block: same seed, same bits
    a1 = prod.random_point(7, (2,))
    a2 = prod.random_point(7, (2,))
    for b1, b2 in zip(a1, a2, strict=True):
        np.testing.assert_array_equal(b1, b2)
    assert not np.allclose(a1[0][0], prod.random_point(8, (2,))[0][0])


# ---------------------------------------------------------------- Karcher mean
@pytest.mark.parametrize(
    "manifold, spread",
    [(Hyperboloid(2), 6.0), (PoincareBall(2), 3.0), (SPD(3), 2.0)],
    ids=str,
)
def test_karcher_mean_converges_on_spread_data(manifold, spread):
    """The unit-step fixed-point iteration diverges here (NaN on the hyperboloid); the
    curvature-aware step converges."""
    rng = np.random.default_rng(0)
    c = manifold.random_point(rng, (20,))
    cs = np.broadcast_to(c[:, None], (20, 10) + manifold.point_shape)
    pts = manifold.exp(cs, manifold.tangent_gaussian(cs, spread, rng))
    mean = manifold.mean(pts, max_iter=200)
    grad = np.mean(manifold.log(mean[:, None], pts), axis=1)
    assert np.all(manifold.norm(mean, grad) <= 1e-9)


def test_spd_log_eigh_and_karcher_mean_match_the_pencil():
    """``SPD.log_eigh`` (the Frechet gradients' and the Karcher mean's log) is the map of
    ``SPD.log``: to 1e-12 relative (Frobenius) on random pairs, log_dist_eigh's first output bit
    for bit, the exact zero at x == y, the pencil's bits past EIGH_MAX_CONDITION, and the same
    refusal beyond float64. The Karcher mean by eigh logs and by the pencil's agree to 1e-12
    relative, and each reaches its tolerance."""
    m = SPD(5)
    rng = np.random.default_rng(4)
    x = m.random_point(rng, (2, 1))
    y = m.random_point(rng, (2, 40))
    log_e, log_p = m.log_eigh(x, y), m.log(x, y)
    fro = np.linalg.norm
    assert np.all(fro(log_e - log_p, axis=(-2, -1)) <= 1e-12 * fro(log_p, axis=(-2, -1)))
    np.testing.assert_array_equal(log_e, m.log_dist_eigh(x, y)[0])
    assert np.all(m.log_eigh(x[:, 0], x[:, 0]) == 0.0)
    q = np.linalg.qr(rng.standard_normal((5, 5)))[0]
    ill = (q * np.logspace(0, -12, 5)) @ q.T      # whitened condition 1e12 at x = I
    ill = 0.5 * (ill + ill.T)
    np.testing.assert_array_equal(m.log_eigh(np.eye(5), ill), m.log(np.eye(5), ill))
    # condition 1e14 each, whitened 1e28: no correct digit left in float64
    big, small = ((q * np.logspace(0, e, 5)) @ q.T for e in (14, -14))
    big, small = 0.5 * (big + big.T), 0.5 * (small + small.T)
    for log in (m.log, m.log_eigh):
        with pytest.raises(ValueError, match="beyond float64"):
            log(big, small)
    pts = m.exp(np.broadcast_to(x[0, 0], (60, 5, 5)),
                m.tangent_gaussian(np.broadcast_to(x[0, 0], (60, 5, 5)), 1.0, rng))
    by_eigh = m.mean(pts, tol=1e-12, max_iter=300)
    by_pencil = karcher_mean_by(m, pts, SPD.log)
    assert fro(by_eigh - by_pencil) <= 1e-12 * fro(by_pencil)
    for mean in (by_eigh, by_pencil):
        assert m.norm(mean, np.mean(m.log(mean, pts), axis=0)) <= 1e-11


def test_spd_dist_from_singular_values_matches_the_pencil():
    """``SPD.dist`` from the pencil's singular values alone: the full pencil's distances to
    1e-13 relative, the same bits with a precomputed Cholesky factor of y, distances of pairs
    of condition 1e12 still to 1e-12 (values only keep the pencil's resolution), and the same
    refusal beyond float64."""
    m = SPD(6)
    rng = np.random.default_rng(5)
    x = m.random_point(rng, (3, 1))
    y = m.random_point(rng, (3, 30))
    full = m.log_dist(x, y)[1]
    np.testing.assert_allclose(m.dist(x, y), full, rtol=1e-13)
    np.testing.assert_array_equal(m.dist(x, y, np.linalg.cholesky(y)), m.dist(x, y))
    q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    a, b = ((q * np.logspace(0, e, 6)) @ q.T for e in (6, -6))
    a, b = 0.5 * (a + a.T), 0.5 * (b + b.T)
    # whitened eigenvalues 10^(-12 k/5): the distance is known in closed form
    exact = np.sqrt(np.sum((np.log(10.0) * 12.0 * np.arange(6) / 5) ** 2))
    assert abs(float(m.dist(a, b)) - exact) <= 1e-9 * exact
    big, small = ((q * np.logspace(0, e, 6)) @ q.T for e in (14, -14))
    with pytest.raises(ValueError, match="beyond float64"):
        m.dist(0.5 * (big + big.T), 0.5 * (small + small.T))


def test_spd_dist_eigvalsh_matches_the_singular_values():
    """``SPD.dist_eigvalsh`` (fig3/fig4's cost evaluations): within 1e-12 relative of
    ``SPD.dist`` on random pairs of whitened condition below EIGVALSH_MAX_CONDITION, the same
    bits with a precomputed Cholesky factor, ``dist``'s own bits for pairs past the threshold
    (a pair of condition 1e12 still to 1e-9 of its closed form, where eigvalsh alone is off
    by 1e-5), and ``dist``'s refusal beyond float64."""
    m = SPD(6)
    rng = np.random.default_rng(6)
    x = m.random_point(rng, (3, 1))
    y = m.exp(np.broadcast_to(x, (3, 40, 6, 6)),
              m.tangent_gaussian(np.broadcast_to(x, (3, 40, 6, 6)), 0.5, rng))
    mu = np.linalg.eigvalsh(np.linalg.solve(x, y))
    assert np.max(mu[..., -1] / mu[..., 0]) < SPD.EIGVALSH_MAX_CONDITION
    np.testing.assert_allclose(m.dist_eigvalsh(x, y), m.dist(x, y), rtol=1e-12)
    np.testing.assert_array_equal(m.dist_eigvalsh(x, y, np.linalg.cholesky(y)),
                                  m.dist_eigvalsh(x, y))
    q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    a, b = ((q * np.logspace(0, e, 6)) @ q.T for e in (6, -6))
    a, b = 0.5 * (a + a.T), 0.5 * (b + b.T)
    exact = np.sqrt(np.sum((np.log(10.0) * 12.0 * np.arange(6) / 5) ** 2))
    ys = np.stack([y[0, 0], b, y[0, 1]])
    mixed = m.dist_eigvalsh(a, ys)
    np.testing.assert_array_equal(mixed[1], m.dist(a, b))
    assert abs(mixed[1] - exact) <= 1e-9 * exact
    np.testing.assert_allclose(mixed[[0, 2]], m.dist(a, ys[[0, 2]]), rtol=1e-12)
    whitened = np.linalg.inv(np.linalg.cholesky(a)) @ np.linalg.cholesky(b)
    alone = np.sqrt(np.sum(np.log(np.linalg.eigvalsh(whitened @ whitened.T)) ** 2))
    assert abs(alone - exact) > 1e-7 * exact     # why the threshold exists
    big, small = ((q * np.logspace(0, e, 6)) @ q.T for e in (14, -14))
    with pytest.raises(ValueError, match="beyond float64"):
        m.dist_eigvalsh(0.5 * (big + big.T), 0.5 * (small + small.T))


def karcher_mean_by(m, pts, log):
    """The Karcher mean of ``pts`` with ``log`` as the manifold's log in every iteration."""
    from rfed.manifolds.base import karcher_mean

    class WithLog(SPD):
        def _logs_to(self, points):
            return lambda p: log(self, p, points)

    return karcher_mean(WithLog(m.n), pts, tol=1e-12, max_iter=300)


def test_spd_log_dist_eigh_matches_the_pencil():
    """The evaluation path (one eigh per pair) against the pencil (Cholesky + SVD), which the
    iterates use: relative agreement to 1e-12 for random pairs, the exact zero at x == y, and
    pairs past EIGH_MAX_CONDITION handed to the pencil (a pair of whitened condition 1e14 gets
    the pencil's numbers bit for bit)."""
    m = SPD(4)
    rng = np.random.default_rng(0)
    x = m.random_point(rng, (3, 1))
    y = m.random_point(rng, (3, 50))
    log_e, d_e = m.log_dist_eigh(x, y)
    log_p, d_p = m.log_dist(x, y)
    np.testing.assert_allclose(d_e, d_p, rtol=1e-12)
    fro = np.linalg.norm
    assert np.all(fro(log_e - log_p, axis=(-2, -1)) <= 1e-12 * fro(log_p, axis=(-2, -1)))
    same, _ = m.log_dist_eigh(x[:, 0], x[:, 0])
    assert np.all(same == 0.0)
    # condition 1e14 between x = I and y: beyond eigh's eigenvectors, within the pencil
    q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    bad = (q * np.logspace(0, -14, 4)) @ q.T
    bad = 0.5 * (bad + bad.T)
    ys = np.stack([y[0, 0], bad, y[0, 1]])
    log_e, d_e = m.log_dist_eigh(np.eye(4), ys)
    log_p, d_p = m.log_dist(np.eye(4), ys)
    np.testing.assert_array_equal(d_e[1], d_p[1])
    np.testing.assert_array_equal(log_e[1], log_p[1])
    np.testing.assert_allclose(d_e, d_p, rtol=1e-12)
    # a precomputed Cholesky factor of y gives the same bits, on both paths
    chol = np.linalg.cholesky(ys)
    for with_chol, without in ((m.log_dist_eigh(np.eye(4), ys, chol), (log_e, d_e)),
                               (m.log_dist(np.eye(4), ys, chol), (log_p, d_p))):
        np.testing.assert_array_equal(with_chol[0], without[0])
        np.testing.assert_array_equal(with_chol[1], without[1])
    np.testing.assert_array_equal(m.log(x, y, np.linalg.cholesky(y)), m.log(x, y))


def _dist_eigvalsh_every_pair(m, x, y, chol_y):
    """``SPD.dist_eigvalsh`` as it was before pairs skipped ``eigvalsh``: the eigenvalues of
    every pair, then ``dist`` for the unresolved ones, each with its own copy of ``x``."""
    _, inv = m._frame(x)
    b = inv @ chol_y
    mu = np.linalg.eigvalsh(b @ np.swapaxes(b, -1, -2))
    resolved = mu[..., 0] * SPD.EIGVALSH_MAX_CONDITION > mu[..., -1]
    d = np.sqrt(np.sum(np.square(np.log(np.where(resolved[..., None], mu, 1.0))), axis=-1))
    if np.all(resolved):
        return np.sqrt(np.sum(np.square(np.log(mu)), axis=-1))
    xb = np.broadcast_to(x, y.shape)
    d[~resolved] = m.dist(xb[~resolved].copy(), y[~resolved], chol_y[~resolved])
    return d


def test_spd_dist_eigvalsh_skips_only_pairs_it_would_refuse():
    """``SPD.dist_eigvalsh`` hands a pair whose whitened diagonal spans more than
    ``_DIAGONAL_SPAN`` to ``dist`` without its eigenvalues, and factors one point's frame once
    for all the pairs it redoes: bit for bit the route that takes every pair's eigenvalues and
    redoes each unresolved pair with its own copy of the point, on 9 x 9 pairs whose whitened
    condition spans 1e1-1e7 (many near the threshold, some with a diagonal spread just under
    it), at one point for all pairs and at one point per row. The margin is needed: skipping
    from a spread of half the threshold changes bits."""
    m = SPD(9)
    rng = np.random.default_rng(11)
    q, _ = np.linalg.qr(rng.standard_normal((600, 9, 9)))
    conds = np.concatenate([10.0 ** rng.uniform(1, 7, 300),
                            10.0 ** rng.uniform(3.6, 4.2, 300)])
    w = conds[:, None] ** np.sort(rng.uniform(0, 1, (600, 9)), axis=-1)
    w[:, 0], w[:, -1] = 1.0, conds
    # some pairs nearly diagonal: their diagonal spread is close to their condition
    q[::3] = np.eye(9) + 1e-3 * np.tril(rng.standard_normal((200, 9, 9)))
    q[::3] = np.linalg.qr(q[::3])[0]
    x = m.random_point(rng)
    chol, _ = m._frame(x)
    whitened = (q * w[:, None, :]) @ np.swapaxes(q, -1, -2)
    y = chol @ (0.5 * (whitened + np.swapaxes(whitened, -1, -2))) @ chol.T
    y = (0.5 * (y + np.swapaxes(y, -1, -2))).reshape(20, 30, 9, 9)
    r = np.linalg.cholesky(y)
    _, inv = m._frame(x)
    b = inv @ r
    diag = np.diagonal(b @ np.swapaxes(b, -1, -2), axis1=-2, axis2=-1)
    spread = diag.max(-1) / diag.min(-1)
    # the data reach every case: skipped, near the margin, and resolved despite a wide spread
    assert np.sum(spread > m._DIAGONAL_SPAN) > 40
    assert np.sum((spread > 0.5 * SPD.EIGVALSH_MAX_CONDITION)
                  & (spread < SPD.EIGVALSH_MAX_CONDITION)) > 20
    for xe in (x.reshape(1, 1, 9, 9), np.broadcast_to(x, (20, 1, 9, 9)).copy()):
        expected = _dist_eigvalsh_every_pair(m, xe, y, r)
        np.testing.assert_array_equal(m.dist_eigvalsh(xe, y, r), expected)
        np.testing.assert_array_equal(m.dist_eigvalsh(xe, y), expected)
    # all pairs past the spread (none left for eigvalsh) and none past it
    far = np.argsort(spread, axis=None)[-40:]
    near = np.argsort(spread, axis=None)[:40]
    for pick in (far, near):
        yy, rr = y.reshape(-1, 9, 9)[pick], r.reshape(-1, 9, 9)[pick]
        np.testing.assert_array_equal(m.dist_eigvalsh(x, yy, rr),
                                      _dist_eigvalsh_every_pair(m, x, yy, rr))
    broken = SPD(9)
    broken._DIAGONAL_SPAN = 0.5 * SPD.EIGVALSH_MAX_CONDITION
    assert not np.array_equal(broken.dist_eigvalsh(x.reshape(1, 1, 9, 9), y, r),
                              _dist_eigvalsh_every_pair(m, x.reshape(1, 1, 9, 9), y, r))
