"""The ten failure classes of issue 11, each over a range of inputs against an independent value
(mpmath at 60 digits, closed forms, ODE-integrated transport)."""

import warnings

import mpmath as mp
import numpy as np
import pytest
from manifold_cases import CASES, blocks, is_product
from scipy.integrate import solve_ivp

from rfed.manifolds import (
    SPD,
    AntipodalError,
    ConvergenceWarning,
    Euclidean,
    Hyperboloid,
    PoincareBall,
    Sphere,
)

mp.mp.dps = 60


def _exact_far_point(r, direction):
    """The hyperboloid point at distance r from the origin along ``direction``, rounded once."""
    ys = [mp.sinh(r) * mp.mpf(float(c)) for c in direction]
    return np.array([float(mp.sqrt(1 + sum(c**2 for c in ys)))] + [float(c) for c in ys])


# ---------------------------------------------------------------- 1 and 2: hyperboloid far points
@pytest.mark.parametrize("r", [1e-9, 1e-3, 1.0, 5.0, 20.0, 30.0, 50.0, 100.0, 350.0, 600.0, 705.0])
def test_hyperboloid_dist_and_log_from_the_origin_over_the_float64_range(r):
    h = Hyperboloid(3)
    direction = np.array([0.6, 0.0, 0.8])
    y = _exact_far_point(r, direction)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(h.dist(h.origin, y), r, rtol=1e-12)
    v = h.log(h.origin, y)
    np.testing.assert_allclose(v[1:], r * direction, rtol=1e-12, atol=1e-12 * r)
    assert v[0] == 0.0 or abs(v[0]) <= 1e-12 * r


@pytest.mark.parametrize("r", [30.0, 50.0, 100.0, 300.0])
def test_hyperboloid_far_pairs_off_the_origin(r):
    """Pairs at distance r, both away from the origin: dist against mpmath's arccosh(-<x,y>)."""
    h = Hyperboloid(2)
    rng = np.random.default_rng(int(r))
    for _ in range(5):
        x = h.random_point(rng)
        u = h.tangent_gaussian(x, 1.0, rng)
        y = h.exp(x, r * u / h.norm(x, u))
        xm = [mp.mpf(float(c)) for c in x]
        ym = [mp.mpf(float(c)) for c in y]
        # mpmath at 60 digits on the rounded points, re-lifted onto the hyperboloid
        xm[0] = mp.sqrt(1 + xm[1] ** 2 + xm[2] ** 2)
        ym[0] = mp.sqrt(1 + ym[1] ** 2 + ym[2] ** 2)
        ref = float(mp.acosh(xm[0] * ym[0] - xm[1] * ym[1] - xm[2] * ym[2]))
        np.testing.assert_allclose(h.dist(x, y), ref, rtol=1e-10)
        np.testing.assert_allclose(h.norm(x, h.log(x, y)), ref, rtol=1e-8)


@pytest.mark.parametrize("r", [400.0, 700.0])
def test_hyperboloid_exp_beyond_355(r):
    h = Hyperboloid(2)
    y = h.exp(h.origin, np.array([0.0, 0.6 * r, 0.8 * r]))
    np.testing.assert_allclose(y[0], float(mp.cosh(r)), rtol=1e-12)
    np.testing.assert_allclose(h.dist(h.origin, y), r, rtol=1e-12)


def _mp_dist(x, y):
    """arcosh(-<x, y>_L) of the points given by their spatial coordinates (time coordinates
    recomputed), at 700 digits: x_0 y_0 reaches 1e608 and -<x, y>_L = cosh d cancels it down
    to cosh 5 for the pairs on one ray."""
    with mp.workdps(700):
        xs = [mp.mpf(float(c)) for c in x[1:]]
        ys = [mp.mpf(float(c)) for c in y[1:]]
        x0 = mp.sqrt(1 + sum(c**2 for c in xs))
        y0 = mp.sqrt(1 + sum(c**2 for c in ys))
        return float(mp.acosh(x0 * y0 - sum(a * b for a, b in zip(xs, ys, strict=True))))


# x at r units out along e_1 (x_0 = cosh r: 1e130 to 5e303), y at the origin, turned by
# about 1 / r (the pairs, dist about 2 r), or 5 units nearer or farther on the same ray
# (where dist returned inf and log raised beyond x_0 y_0 = 1e308: the terms of w = cosh d - 1
# underflowed, and 1 / (x_0 y_0) with them). With x_s on a coordinate axis the split of
# a tangent vector at x into its parts across and along the radius is exact (x_hat = e_1), so
# norm(log(x, y)) carries only log's and norm's own rounding, a few eps (the class notes'
# radial law, 16 eps, without the (eps x_0)^2 term of an inexact split): 1e-12 is a margin
# of ~4500 over that, far below what the old norm returned (inf from r = 360 on, and
# |log_s| ~ x_0 d instead of d at x_0 = 1e199 where |x_s|^2 overflowed inside the split)
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("r", [300.0, 360.0, 400.0, 460.0, 700.0])
@pytest.mark.parametrize("target", ["origin", "turned", "inward", "outward"])
def test_hyperboloid_norm_of_log_equals_dist_far_from_the_origin(r, target):
    h = Hyperboloid(2)
    e1 = np.array([1.0, 0.0])
    x = _exact_far_point(r, e1)
    if target == "origin":
        y = h.origin
    elif target == "turned":
        y = _exact_far_point(np.hypot(r, 1.0), np.array([r, 1.0]) / np.hypot(r, 1.0))
    else:
        y = _exact_far_point(r - 5.0 if target == "inward" else r + 5.0, e1)
    ref = _mp_dist(x, y)
    u = h.log(x, y)
    np.testing.assert_allclose(h.dist(x, y), ref, rtol=1e-12)
    np.testing.assert_allclose(h.norm(x, u), ref, rtol=1e-12)
    np.testing.assert_allclose(np.sqrt(h.inner(x, u, u)), ref, rtol=1e-12)
    # batched with an ordinary row: the far row does not change the near one's bits
    o = h.origin
    v = h.log(o, y)
    np.testing.assert_array_equal(h.norm(np.stack([x, o]), np.stack([u, v]))[1], h.norm(o, v))


@pytest.mark.filterwarnings("error")
def test_hyperboloid_norm_and_inner_of_huge_and_tiny_vectors():
    """Squares of 1e300 overflow and of 1e-200 underflow: the results are representable and
    accurate; an inner product or norm beyond 1.8e308 is refused, naming the method."""
    h = Hyperboloid(2)
    o = h.origin
    for c in (1e300, 1e-200):
        u = np.array([0.0, 3.0 * c, 4.0 * c])
        np.testing.assert_allclose(h.norm(o, u), 5.0 * c, rtol=1e-15)
        np.testing.assert_allclose(h.inner(o, u, np.array([0.0, 1.0, 0.0])), 3.0 * c, rtol=1e-15)
    with pytest.raises(FloatingPointError, match=r"inner\(x, u, v\) is not representable"):
        h.inner(o, np.array([0.0, 1e300, 0.0]), np.array([0.0, 1e10, 0.0]))
    with pytest.raises(FloatingPointError, match=r"norm\(x, u\) is not representable"):
        h.norm(o, np.array([0.0, 1.7e308, 1.7e308]))


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("r", [400.0, 700.0])
def test_hyperboloid_far_base_point_methods_neither_overflow_nor_warn(r):
    """At x_0 = 1e173 and 5e303 (the tangent vector log(x, o) of coordinates about r x_0):
    tangent_violation and to_coords rescale (they overflowed with a warning, tangent_violation
    then read 0 / inf); transport, ehess2rhess and from_poincare refuse a result that is not
    representable instead of returning inf with a warning."""
    h = Hyperboloid(2)
    x = _exact_far_point(r, np.array([0.6, 0.8]))
    u = h.log(x, h.origin)
    assert h.tangent_violation(x, u) <= 1e-15
    assert h.is_tangent(x, u)
    # u points at the origin: its coordinates at the origin are -r (0.6, 0.8), resolved to
    # eps x_0 |u| (class notes): only finiteness is checked
    assert np.all(np.isfinite(h.to_coords(x, u)))
    near = _exact_far_point(r - 30.0, np.array([0.6, 0.8]))
    # x_0 y_0 > 1e308: the Lorentz products overflow although the transported vector (of
    # coordinates about r y_0) is representable; a refusal, not inf (a scale-free transport
    # would return it)
    with pytest.raises(FloatingPointError, match="transport"):
        h.transport(x, near, u)
    with pytest.raises(FloatingPointError, match="not representable"):
        h.ehess2rhess(x, np.ones(3), np.ones(3), u)
    with pytest.raises(FloatingPointError, match="from_poincare"):
        h.from_poincare(h.to_poincare(x))


def test_hyperboloid_exp_out_of_range_raises():
    h = Hyperboloid(2)
    with pytest.raises(FloatingPointError, match="not representable in float64"):
        h.exp(h.origin, np.array([0.0, 800.0, 0.0]))


# ---------------------------------------------------------------- 3: SPD ill-conditioned pairs
def _spd_pair(rng, cond, n=4):
    q1 = np.linalg.qr(rng.standard_normal((n, n)))[0]
    q2 = np.linalg.qr(rng.standard_normal((n, n)))[0]
    ev = np.logspace(0, np.log10(cond), n)
    p = (q1 * ev) @ q1.T
    q = (q2 * ev[::-1]) @ q2.T
    return 0.5 * (p + p.T), 0.5 * (q + q.T)


@pytest.mark.parametrize("cond", [1e2, 1e6, 1e10, 1e12])
def test_spd_distance_of_ill_conditioned_pairs_against_mpmath(cond):
    spd = SPD(4)
    rng = np.random.default_rng(int(np.log10(cond)))
    for _ in range(3):
        p, q = _spd_pair(rng, cond)
        pm, qm = mp.matrix(p.tolist()), mp.matrix(q.tolist())
        li = mp.cholesky(pm) ** -1
        ref = float(mp.sqrt(sum(mp.log(e) ** 2 for e in mp.eigsy(li * qm * li.T)[0])))
        np.testing.assert_allclose(spd.dist(p, q), ref, rtol=2e-6)
        # log and exp work in the metric of the base point, where float64 storage of the
        # matrices alone perturbs the result by about eps * cond (SPD class docstring)
        attainable = max(2e-6, 10 * np.finfo(float).eps * cond)
        v = spd.log(p, q)
        np.testing.assert_allclose(spd.norm(p, v), ref, rtol=attainable)
        if cond <= 1e8:
            # exp(log) through the base point's frame: 1e-8-accurate up to condition 1e8 only
            assert spd.dist(spd.exp(p, v), q) <= 1e-6 * ref


def test_spd_beyond_float64_raises_naming_the_condition_number():
    spd = SPD(3)
    p = np.diag([1.0, 1e-14, 1e-14])
    q = np.diag([1e-14, 1.0, 1.0]) + 1e-15
    with pytest.raises(ValueError, match=r"condition number .* \(cond\(x\) = "):
        spd.dist(p, q)


# ---------------------------------------------------------------- 4: SPD retraction
@pytest.mark.parametrize("cond", [1e2, 1e6, 1e10, 1e14])
def test_spd_retraction_stays_positive_definite(cond):
    spd = SPD(4)
    rng = np.random.default_rng(7)
    q1 = np.linalg.qr(rng.standard_normal((50, 4, 4)))[0]
    p = (q1 * np.logspace(0, -np.log10(cond), 4)) @ np.swapaxes(q1, -1, -2)
    p = 0.5 * (p + np.swapaxes(p, -1, -2))
    u = spd.tangent_gaussian(p, 1.0, rng)
    for t in (0.1, 1.0, 3.0, 10.0):
        r = spd.retract(p, t * u / spd.norm(p, u)[:, None, None])
        np.linalg.cholesky(r)  # raises if any is not positive definite
        assert np.all(spd.belongs(r))


# ---------------------------------------------------------------- 5: sphere near the antipode
def _integrated_transport(x, e, theta, u):
    """Parallel transport along t -> cos t x + sin t e by the ODE V' = -(gamma' . V) gamma."""

    def rhs(t, v):
        g = np.cos(t) * x + np.sin(t) * e
        dg = -np.sin(t) * x + np.cos(t) * e
        return -(dg @ v) * g

    sol = solve_ivp(rhs, (0.0, theta), u, rtol=1e-12, atol=1e-14, method="DOP853")
    return sol.y[:, -1]


@pytest.mark.parametrize("k", [1, 3, 5, 7, 9])
def test_sphere_transport_near_the_antipode(k):
    s = Sphere(3)
    rng = np.random.default_rng(k)
    x = s.random_point(rng)
    e = s.tangent_gaussian(x, 1.0, rng)
    e /= np.linalg.norm(e)
    theta = np.pi - 10.0**-k
    y = s.exp(x, theta * e)
    u = s.tangent_gaussian(x, 1.0, rng)
    t = s.transport(x, y, u)
    assert np.all(np.isfinite(t))
    np.testing.assert_allclose(np.linalg.norm(t), np.linalg.norm(u), rtol=1e-14)
    assert abs(t @ y) <= 1e-14 * np.linalg.norm(u)
    # the geodesic's own direction, from log (y's rounding moves it by up to eps / sin(theta))
    e_y = s.log(x, y) / s.dist(x, y)
    ref = _integrated_transport(x, e_y, s.dist(x, y), u)
    np.testing.assert_allclose(t, ref, atol=1e-9 * np.linalg.norm(u))


def test_sphere_transport_at_the_antipode_raises():
    s = Sphere(2)
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(AntipodalError):
        s.transport(x, -x, np.array([0.0, 1.0, 0.0]))


# ---------------------------------------------------------------- 6: Karcher mean on spread data
@pytest.mark.parametrize(
    "manifold, half", [(SPD(3), 5.0), (SPD(3), 15.0), (Hyperboloid(2), 10.0),
                       (Hyperboloid(2), 15.0)], ids=str
)
def test_karcher_mean_of_far_pairs_is_the_midpoint(manifold, half):
    """Two points 2 * half apart: the mean is the geodesic midpoint (closed form)."""
    rng = np.random.default_rng(1)
    for _ in range(3):
        c = manifold.random_point(rng)
        e = manifold.tangent_gaussian(c, 1.0, rng)
        e = e / manifold.norm(c, e)
        pts = np.stack([manifold.exp(c, half * e), manifold.exp(c, -half * e)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            mean = manifold.mean(pts)
        assert manifold.dist(mean, c) <= 1e-6


def test_karcher_mean_warns_when_it_stops_short():
    h = Hyperboloid(2)
    rng = np.random.default_rng(0)
    c = h.random_point(rng, (4,))
    cs = np.broadcast_to(c[:, None], (4, 10, 3))
    pts = h.exp(cs, h.tangent_gaussian(cs, 6.0, rng))
    with pytest.warns(ConvergenceWarning, match="gradient norm"):
        h.mean(pts, max_iter=2, tol=1e-15)


def test_mean_refuses_nan_points():
    s = Sphere(2)
    pts = s.random_point(0, (3,))
    pts[1, 0] = np.nan
    with pytest.raises(ValueError, match="argument 'points' has 1 non-finite"):
        s.mean(pts)


# ---------------------------------------------------------------- 7: dtypes
@pytest.mark.parametrize("name", list(CASES))
def test_float32_input_is_accepted_and_upcast(name):
    m = CASES[name]()
    if is_product(m):
        pytest.skip("tuple points")
    x = np.asarray(m.random_point(3, (200,)))
    u = m.tangent_gaussian(x, 0.5, 4)
    x32, u32 = x.astype(np.float32), u.astype(np.float32)
    assert np.all(m.belongs(x32))
    assert np.all(m.is_tangent(x32, m.proj(x32, u32)))
    m.check_point(x32)
    for out in (m.exp(x32, u32), m.proj(x32, u32), m.inner(x32, u32, u32), m.dist(x32, x32)):
        assert np.asarray(out).dtype == np.float64


# ---------------------------------------------------------------- 8: validation wrapper
def test_checked_view_validates_keywords_and_mean():
    s = Sphere(2)
    x = s.random_point(0)
    with pytest.raises(ValueError, match="argument 'y' is not on the manifold"):
        s.checked().log(x, y=3 * x)
    with pytest.raises(ValueError, match="argument 'u' is not a tangent vector"):
        s.checked().exp(x=x, u=x)
    pts = s.random_point(0, (3,))
    pts[0] *= 5
    with pytest.raises(ValueError, match="argument 'points' is not on the manifold"):
        s.checked().mean(pts)


@pytest.mark.parametrize("name", list(CASES))
def test_is_tangent_with_a_wrong_shape_is_false(name):
    m = CASES[name]()
    if is_product(m):
        pytest.skip("tuple points")
    x = m.random_point(0, (2,))
    bad = np.zeros((2,) + tuple(d + 1 for d in m.point_shape))
    assert not np.any(m.is_tangent(x, bad))


# ---------------------------------------------------------------- 9: Poincare near the boundary
def test_poincare_transports_at_the_clip_radius_stay_isometric():
    ball = PoincareBall(2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.standard_normal((2, 2))
        x = ball.exp(np.zeros(2), 60 * a / np.linalg.norm(a))  # clipped
        y = ball.exp(np.zeros(2), 60 * b / np.linalg.norm(b))
        np.testing.assert_allclose(np.linalg.norm(x), 1 - 1e-10, rtol=1e-15)
        u = ball.from_coords(x, rng.standard_normal(2))
        v = u
        for _ in range(100):
            v = ball.transport(y, x, ball.transport(x, y, v))
        assert np.all(np.isfinite(v))
        np.testing.assert_allclose(ball.norm(x, v), ball.norm(x, u), rtol=1e-12)
        assert np.isfinite(ball.dist(x, y)) and np.all(np.isfinite(ball.log(x, y)))


# ---------------------------------------------------------------- 10: no views, independent draws
@pytest.mark.parametrize("name", list(CASES))
def test_results_never_share_memory_with_inputs(name):
    m = CASES[name]()
    x = m.random_point(0, (3,))
    u = m.tangent_gaussian(x, 1.0, 1)
    c = m.to_coords(x, u)
    outs = [m.proj(x, u), m.egrad2rgrad(x, u), m.to_coords(x, u), m.from_coords(x, c),
            m.exp(x, u), m.transport(x, x, u)]
    for out in outs:
        for (_, o) in blocks(m, out) if not isinstance(out, np.ndarray) or not is_product(m) \
                else [(None, out)]:
            for (_, a) in blocks(m, u):
                assert not np.shares_memory(o, a)
            assert not np.shares_memory(o, c)


def test_euclidean_tangent_gaussian_draws_one_per_sigma():
    e = Euclidean(3)
    draws = e.tangent_gaussian(np.zeros(3), np.array([1.0, 1.0, 2.0]), 0)
    assert draws.shape == (3, 3)
    assert not np.allclose(draws[0], draws[1])
