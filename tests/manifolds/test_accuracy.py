"""Accuracy against independent references: Grassmann principal angles near pi/2 (mpmath and
scipy.linalg.subspace_angles), hyperboloid distances from 1e-15 to 30 (mpmath), the documented
laws of the hyperboloid's log ((16 + x_0) eps) and transport (mpmath), and the product's
transport flag (a factor with a projection transport makes the product's one)."""

import mpmath as mp
import numpy as np
import pytest
from manifold_cases import unit_tangent
from scipy.linalg import subspace_angles

from rfed.manifolds import (
    SPD,
    Grassmann,
    Hyperboloid,
    PoincareBall,
    Product,
    Sphere,
    Stiefel,
    principal_angles,
)


# ---------------------------------------------------------------- Grassmann near pi/2
def _angles_mpmath(x, y, dps=40):
    """Principal angles of the float64 frames as given, at ``dps`` digits: atan2 of the
    paired singular values of (I - XX^T) Y (sines, ascending) and X^T Y (cosines, descending)."""
    mp.mp.dps = dps
    xm, ym = mp.matrix(x.tolist()), mp.matrix(y.tolist())
    cos = mp.svd_r(xm.T * ym, compute_uv=False)
    sin = mp.svd_r(ym - xm * (xm.T * ym), compute_uv=False)
    pairs = zip(sorted(sin), sorted(cos, reverse=True), strict=True)
    return np.sort([float(mp.atan2(s, c)) for s, c in pairs])


@pytest.mark.parametrize("seed", range(6))
def test_principal_angles_with_several_near_right_angle(seed):
    """Three angles within 1e-3..1e-12 of pi/2: the sines all round to 1 there, so the
    angles must come from the cosines (the singular values of X^T Y)."""
    rng = np.random.default_rng(seed)
    n, p = 12, 4
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    theta = np.array([np.pi / 2 - 10.0 ** -rng.uniform(3, 12) for _ in range(3)]
                     + [rng.uniform(0.0, 1.5)])
    rot = np.linalg.qr(rng.standard_normal((p, p)))[0]
    x = q[:, :p]
    y = (x * np.cos(theta) + q[:, p : 2 * p] * np.sin(theta)) @ rot
    ref = _angles_mpmath(x, y)
    got = np.sort(principal_angles(x, y))
    scipy_err = np.max(np.abs(np.sort(subspace_angles(x, y)) - ref))
    err = np.max(np.abs(got - ref))
    assert err <= 4e-16, err
    assert err <= scipy_err + 2.3e-16
    np.testing.assert_allclose(Grassmann(n, p).dist(x, y), np.linalg.norm(ref), rtol=1e-15)


def test_principal_angles_match_scipy_on_random_subspaces():
    """Random subspaces (angles spread over [0, pi/2]): as accurate as scipy's."""
    g = Grassmann(9, 4)
    rng = np.random.default_rng(11)
    x, y = g.random_point(rng, (2, 12))
    for xi, yi in zip(x, y, strict=True):
        ref = _angles_mpmath(xi, yi)
        ours = np.max(np.abs(np.sort(principal_angles(xi, yi)) - ref))
        theirs = np.max(np.abs(np.sort(subspace_angles(xi, yi)) - ref))
        assert ours <= max(theirs, 1e-15) + 2e-15, (ours, theirs)


def test_grassmann_log_near_right_angles_round_trips():
    """The log built from those angles and their principal vectors goes back to Y."""
    rng = np.random.default_rng(3)
    g = Grassmann(10, 3)
    q = np.linalg.qr(rng.standard_normal((10, 10)))[0]
    theta = np.array([np.pi / 2 - 1e-9, np.pi / 2 - 1e-7, 0.2])
    x = q[:, :3]
    y = x * np.cos(theta) + q[:, 3:6] * np.sin(theta)
    v = g.log(x, y)
    np.testing.assert_allclose(np.sort(np.linalg.svd(v, compute_uv=False)), np.sort(theta),
                               rtol=0, atol=1e-15)
    back = g.exp(x, v)
    np.testing.assert_allclose(back @ back.T, y @ y.T, atol=1e-14)


# ---------------------------------------------------------------- hyperboloid
def _hyperboloid_dist_mpmath(x, y, dps=60):
    """arcosh(-<x, y>_L) of the points given by the spatial coordinates of x and y (the
    time coordinate recomputed at ``dps`` digits: a point of H^d is its spatial part)."""
    mp.mp.dps = dps
    xs = [mp.mpf(float(v)) for v in x[1:]]
    ys = [mp.mpf(float(v)) for v in y[1:]]
    x0 = mp.sqrt(1 + sum(v * v for v in xs))
    y0 = mp.sqrt(1 + sum(v * v for v in ys))
    z = x0 * y0 - sum(a * b for a, b in zip(xs, ys, strict=True))
    return float(mp.acosh(z))


@pytest.mark.parametrize("d", [1e-15, 1e-12, 1e-9, 1e-6, 1e-3, 0.5, 0.99, 1.01, 3.0, 30.0])
@pytest.mark.parametrize("base", ["near origin", "far (x0 ~ 1e4)"])
def test_hyperboloid_distance_against_mpmath_and_log_norm(d, base):
    h = Hyperboloid(3)
    rng = np.random.default_rng(int(-np.log10(d) * 7) + 100)
    worst, worst_log, x0 = 0.0, 0.0, 0.0
    for _ in range(8):
        x = h.random_point(rng)
        if base.startswith("far"):
            x = h.exp(x, unit_tangent(h, x, rng, 10.0))
        y = h.exp(x, unit_tangent(h, x, rng, d))
        x0 = max(x0, float(x[0]), float(y[0]))
        ref = _hyperboloid_dist_mpmath(x, y)
        got = float(h.dist(x, y))
        worst = max(worst, abs(got - ref) / ref)
        worst_log = max(worst_log, abs(float(h.norm(x, h.log(x, y))) - got) / ref)
    # a point's spatial coordinates of size x0 carry absolute rounding x0 eps, which moves
    # it by as much transversally (metric factor 1 across the radial direction): far from
    # the origin no float64 method can do better than about x0 eps
    tol = max(4e-15, 50 * np.finfo(float).eps * x0)
    assert worst <= tol, worst
    assert worst_log <= tol, worst_log


def test_hyperboloid_distance_is_symmetric_at_tiny_distances():
    h = Hyperboloid(5)
    rng = np.random.default_rng(4)
    x = h.random_point(rng, 50)
    y = h.exp(x, unit_tangent(h, x, rng, np.full(50, 1e-11)))
    np.testing.assert_allclose(h.dist(x, y), h.dist(y, x), rtol=2e-15)


def _hyperboloid_log_mpmath(x, y, dps=60):
    """(Log_x y at ``dps`` digits, d, x at ``dps`` digits) for the points given by their
    spatial coordinates (time coordinates recomputed)."""
    mp.mp.dps = dps
    xs = [mp.mpf(float(v)) for v in x[1:]]
    ys = [mp.mpf(float(v)) for v in y[1:]]
    xm = [mp.sqrt(1 + sum(v * v for v in xs)), *xs]
    ym = [mp.sqrt(1 + sum(v * v for v in ys)), *ys]
    z = xm[0] * ym[0] - sum(a * b for a, b in zip(xs, ys, strict=True))
    d = mp.acosh(z)
    return [d / mp.sinh(d) * (b - z * a) for a, b in zip(xm, ym, strict=True)], d, xm


def _tangent_norm_mpmath(xm, v):
    """Norm at x of the (nearly tangent) vector v: across part plus radial part / x_0, as
    :meth:`Hyperboloid.norm` reads ambient coordinates."""
    nx = mp.sqrt(sum(a * a for a in xm[1:]))
    xhat = [a / nx for a in xm[1:]] if nx > 0 else [mp.mpf(0)] * (len(xm) - 1)
    along = sum(a * b for a, b in zip(v[1:], xhat, strict=True))
    perp = [a - along * b for a, b in zip(v[1:], xhat, strict=True)]
    return mp.sqrt(sum(a * a for a in perp) + (along / xm[0]) ** 2)


def _hyperboloid_log_errors(h, x, y):
    """(|log - Log|_x / d, |norm(log) / dist - 1|) against 60 digits."""
    ref, d, xm = _hyperboloid_log_mpmath(x, y)
    got = h.log(x, y)
    err = _tangent_norm_mpmath(xm, [mp.mpf(float(a)) - b for a, b in zip(got, ref, strict=True)])
    return float(err / d), abs(float(h.norm(x, got)) / float(h.dist(x, y)) - 1.0)


@pytest.mark.parametrize("rx, ry", [(18.0, 40.0), (20.0, 40.0), (10.0, 40.0), (5.0, 30.0),
                                    (15.0, 60.0)])
def test_hyperboloid_log_far_out_on_the_same_side(rx, ry):
    """Targets farther out on the base's own side: the Lorentz product -<x, y>_L / y_0 the log
    used cancelled (norm(log) 22.47 for d = 22 at 18 and 40 units, 40 for d = 20 at 20 and
    40 units)."""
    h = Hyperboloid(2)
    o, e = h.origin, np.array([0.0, 1.0, 0.0])
    for direction in (e, np.array([0.0, 0.6, 0.8])):
        x, y = h.exp(o, rx * direction), h.exp(o, ry * direction)
        np.testing.assert_allclose(h.norm(x, h.log(x, y)), ry - rx, rtol=1e-14)
        err_log, err_norm = _hyperboloid_log_errors(h, x, y)
        eps_law = (16.0 + x[0]) * np.finfo(float).eps
        assert err_log <= eps_law, (err_log, eps_law)
        assert err_norm <= 16 * np.finfo(float).eps, err_norm


@pytest.mark.parametrize("radius", [0.0, 2.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0])
def test_hyperboloid_log_meets_the_documented_law(radius):
    """The class notes' law, at base points 0 to 30 units from the origin, targets on the same
    side (farther and nearer), across, opposite and near the base in random directions:
    |log - Log|_x <= (16 + x_0) eps d, |norm(log) / dist - 1| <= (16 + x_0) eps, and
    16 eps + 4 (eps x_0)^2 for radial logs."""
    h = Hyperboloid(2)
    eps = np.finfo(float).eps
    rng = np.random.default_rng(int(radius) + 7)
    o = h.origin
    a = rng.uniform(0.0, 2.0 * np.pi)

    def at(r, angle):
        return h.exp(o, r * np.array([0.0, np.cos(angle), np.sin(angle)]))

    x = at(radius, a)
    radial = [at(r, a) for r in (radius + 2.0, radius + 15.0, radius + 25.0, 0.5 * radius)]
    radial += [at(r, a + np.pi) for r in (0.5, 3.0, 20.0)]
    oblique = [at(r, a + t) for r in (0.5, 10.0, radius, radius + 20.0)
               for t in (1e-3, 0.3, np.pi / 2, 2.5)]
    oblique += [h.exp(x, unit_tangent(h, x, rng, dist)) for dist in (0.01, 0.3, 3.0, 10.0, 25.0)]
    law = (16.0 + x[0]) * eps
    for kind, targets in (("radial", radial), ("oblique", oblique)):
        for y in targets:
            if h.dist(x, y) < 1e-6:
                continue
            err_log, err_norm = _hyperboloid_log_errors(h, x, y)
            assert err_log <= law, (kind, y, err_log, law)
            assert err_norm <= law, (kind, y, err_norm, law)
            if kind == "radial":
                assert err_norm <= 16.0 * eps + 4.0 * (eps * x[0]) ** 2, (y, err_norm)


def _hyperboloid_transport_error(h, x, y, u, dps=60):
    """|transport(x, y, u) - P u|_y / |u|_x against ``dps`` digits (u read by its spatial part,
    its time coordinate from tangency, as :meth:`Hyperboloid.norm` reads it)."""
    mp.mp.dps = dps
    xm, ym = ([mp.sqrt(1 + sum(mp.mpf(float(v)) ** 2 for v in p[1:]))]
              + [mp.mpf(float(v)) for v in p[1:]] for p in (x, y))
    um = [mp.mpf(0)] + [mp.mpf(float(v)) for v in u[1:]]
    um[0] = sum(a * b for a, b in zip(um[1:], xm[1:], strict=True)) / xm[0]

    def lorentz(a, b):
        return -a[0] * b[0] + sum(p * q for p, q in zip(a[1:], b[1:], strict=True))

    coef = lorentz(ym, um) / (1 - lorentz(xm, ym))
    ref = [a + coef * (b + c) for a, b, c in zip(um, xm, ym, strict=True)]
    got = h.transport(x, y, u)
    diff = [mp.mpf(float(a)) - b for a, b in zip(got, ref, strict=True)]
    return float(_tangent_norm_mpmath(ym, diff) / _tangent_norm_mpmath(xm, um))


@pytest.mark.parametrize("rx", [0.5, 4.0, 10.0, 18.0, 20.0, 25.0])
def test_hyperboloid_transport_meets_the_documented_law(rx):
    """Transport between points on one ray (where the Lorentz products cancelled: 4.3e4
    relative error from 20 to 30 units out), nearly on it, across and opposite:
    4 eps (x_0 + y_0) |u| where both x_0, y_0 > TRANSPORT_FAR, 8 min(x_0, y_0) eps (x_0 + y_0)
    |u| nearer."""
    h = Hyperboloid(2)
    eps = np.finfo(float).eps
    o = h.origin
    for ry in (0.5, 5.0, 10.0, 18.0, 20.0, 30.0):
        for turn in (0.0, 1e-3, 0.05, np.pi / 2, np.pi):
            x = h.exp(o, rx * np.array([0.0, np.cos(0.3), np.sin(0.3)]))
            y = h.exp(o, ry * np.array([0.0, np.cos(0.3 + turn), np.sin(0.3 + turn)]))
            if h.dist(x, y) < 1e-6:
                continue
            m = min(x[0], y[0])
            factor = 4.0 if m > h.TRANSPORT_FAR else 8.0 * m
            for coords in ([0.3, -0.7], [1.0, 0.0], [0.0, 1.0]):
                u = h.from_coords(x, np.array(coords))
                err = _hyperboloid_transport_error(h, x, y, u)
                assert err <= factor * eps * (x[0] + y[0]), (rx, ry, turn, coords, err)


# ---------------------------------------------------------------- product flag
@pytest.mark.parametrize(
    "factors, expected",
    [((Sphere(2), SPD(2)), True),
     ((Sphere(2), Stiefel(4, 2)), False),
     ((Stiefel(4, 2), PoincareBall(2)), False),
     ((Grassmann(4, 2), Hyperboloid(2)), True)],
)
def test_product_transport_flag_is_the_and_of_the_factors(factors, expected):
    prod = Product(*factors)
    assert prod.has_parallel_transport is expected
    assert prod.as_flat().has_parallel_transport is expected


def test_product_with_stiefel_transport_changes_norms():
    """The flag is honest: the Stiefel factor's projection transport is not an isometry."""
    prod = Product(Sphere(2), Stiefel(5, 2))
    rng = np.random.default_rng(0)
    x = prod.random_point(rng)
    y = prod.exp(x, prod.tangent_gaussian(x, 1.0, rng))
    u = prod.tangent_gaussian(x, 1.0, rng)
    ratio = prod.norm(y, prod.transport(x, y, u)) / prod.norm(x, u)
    assert abs(ratio - 1.0) > 1e-4
