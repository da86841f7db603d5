"""Stiefel and Grassmann beyond the contract: pymanopt/geomstats cross-checks, the log
iteration's range, principal angles at the extremes (mpmath), holonomy on closed loops."""

import warnings

import mpmath as mp
import numpy as np
import pymanopt.manifolds as pm
import pytest
from scipy.integrate import solve_ivp

from rfed.manifolds import Grassmann, Stiefel, StiefelLogError, principal_angles

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import geomstats.geometry.grassmannian as gs_grassmann


def _proj(a):
    return a @ np.swapaxes(a, -1, -2)


# ---------------------------------------------------------------- Stiefel
@pytest.mark.parametrize("n, p", [(5, 2), (8, 3), (10, 5)])
def test_stiefel_exp_against_pymanopt(n, p):
    ours, theirs = Stiefel(n, p), pm.Stiefel(n, p)
    rng = np.random.default_rng(n)
    x = ours.random_point(rng, (4,))
    u = ours.tangent_gaussian(x, 1.0, rng)
    for i, t in enumerate([0.1, 1.0, 2.0, 3.0]):
        ui = t * u[i] / ours.norm(x[i], u[i])
        np.testing.assert_allclose(ours.exp(x[i], ui), theirs.exp(x[i], ui), atol=1e-12)


def _mp_stiefel_exp(x, u):
    """Edelman, Arias and Smith (1998), eq. 2.7, in 40 digits: [X, U] expm([[A, -S], [I, A]])
    [I; 0] expm(-A), A = X^T U, S = U^T U."""
    with mp.workdps(40):
        xm, um = mp.matrix(x.tolist()), mp.matrix(u.tolist())
        p = x.shape[1]
        a, s = xm.T * um, um.T * um
        blk = mp.zeros(2 * p, 2 * p)
        for i in range(p):
            for j in range(p):
                blk[i, j], blk[i, p + j], blk[p + i, p + j] = a[i, j], -s[i, j], a[i, j]
            blk[p + i, i] = 1
        e, ea = mp.expm(blk), mp.expm(-a)
        top = mp.matrix([[e[i, j] for j in range(p)] for i in range(p)])
        bot = mp.matrix([[e[p + i, j] for j in range(p)] for i in range(p)])
        y = (xm * top + um * bot) * ea
        return np.array([[float(y[i, j]) for j in range(p)] for i in range(x.shape[0])])


@pytest.mark.parametrize("t", [1e-7, 1.0, 3.0, 10.0, 40.0])
def test_stiefel_exp_against_mpmath_up_to_long_vectors(t):
    """The Taylor scaling-and-squaring evaluation against 40-digit mpmath, from tiny to long
    tangent vectors (40: six squarings of the 2p x 2p block)."""
    m = Stiefel(7, 3)
    rng = np.random.default_rng(11)
    x = m.random_point(rng, (3,))
    u = m.tangent_gaussian(x, 1.0, rng)
    u *= t / m.norm(x, u)[:, None, None]
    got = m.exp(x, u)
    for i in range(3):
        ref = _mp_stiefel_exp(x[i], u[i])
        assert np.linalg.norm(got[i] - ref) <= 1e-14 * max(t, 1.0) * np.linalg.norm(ref)


@pytest.mark.parametrize("scale", [1e-12, 1e-3, 0.5, 3.0, 60.0])
def test_expm_minus_identity_against_scipy(scale):
    """e^K - I of general and skew 6 x 6 matrices against scipy's expm (Pade), and, where
    subtracting I from scipy's result would cancel digits, against the series to degree 8
    (the neglected terms below the rounding): the deviation keeps its relative accuracy."""
    from scipy.linalg import expm

    from rfed.manifolds.stiefel import _expm_minus_identity

    rng = np.random.default_rng(5)
    k = rng.standard_normal((4, 6, 6))
    k[2:] -= np.swapaxes(k[2:], -1, -2)
    k *= scale / np.abs(k).sum(axis=-2).max(axis=-1)[:, None, None]
    got = _expm_minus_identity(k)
    for ki, gi in zip(k, got, strict=True):
        if scale < 0.01:
            ref, power = np.zeros_like(ki), np.eye(6)
            for i in range(1, 9):
                power = power @ ki / i
                ref += power
        else:
            ref = expm(ki) - np.eye(6)
        tol = 1e-14 if scale < 10 else 1e-12
        assert np.linalg.norm(gi - ref) <= tol * np.linalg.norm(ref)


@pytest.mark.parametrize("t", [1e-8, 1e-4, 0.1, 0.5, 1.0, 1.5, 2.0])
def test_stiefel_log_inverts_exp_over_distances(t):
    m = Stiefel(7, 3)
    rng = np.random.default_rng(3)
    x = m.random_point(rng, (20,))
    u = m.tangent_gaussian(x, 1.0, rng)
    u = t * u / m.norm(x, u)[:, None, None]
    v = m.log(x, m.exp(x, u))
    err = m.norm(x, v - u) / t
    assert np.all(err <= (1e-6 if t < 1e-6 else 1e-9)), err.max()
    assert np.all(m.is_tangent(x, v, atol=1e-10))


def test_stiefel_log_raises_instead_of_returning_garbage():
    """Beyond its range the iteration either converges (then exp(log y) = y) or raises."""
    m = Stiefel(6, 3)
    rng = np.random.default_rng(0)
    x, y = m.random_point(rng, (2, 30))
    for i in range(30):
        try:
            v = m.log(x[i], y[i])
        except StiefelLogError as exc:
            assert "did not converge" in str(exc) and "log_tol" in str(exc)
            continue
        np.testing.assert_allclose(m.exp(x[i], v), y[i], atol=1e-9)


def test_stiefel_transport_is_flagged_as_vector_transport():
    m = Stiefel(5, 2)
    assert m.has_parallel_transport is False and Grassmann(5, 2).has_parallel_transport
    x = m.random_point(0)
    y = m.exp(x, m.tangent_gaussian(x, 0.5, 1))
    u = m.tangent_gaussian(x, 1.0, 2)
    np.testing.assert_allclose(m.transport(x, y, u), m.proj(y, u), atol=1e-15)


# ---------------------------------------------------------------- Grassmann
def _frames_at_angles(n, theta, rng):
    """X and Y = X cos(theta) + X_perp sin(theta): principal angles exactly theta (rounded)."""
    p = len(theta)
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    x, xp = q[:, :p], q[:, p : 2 * p]
    return x, x * np.cos(theta) + xp * np.sin(theta)


@pytest.mark.parametrize(
    "theta",
    [[1e-12, 1e-10, 1e-8], [1e-6, 0.3, 1.0], [np.pi / 2 - 1e-6, 1.0, 0.1],
     [np.pi / 2 - 1e-10, np.pi / 2 - 1e-12, 1e-9]],
)
def test_principal_angles_at_the_extremes_against_mpmath(theta):
    rng = np.random.default_rng(5)
    x, y = _frames_at_angles(9, np.array(theta), rng)
    mp.mp.dps = 50
    # singular values of X^T Y (cosines) and of (I - XX^T) Y (sines) at 50 digits
    xm, ym = mp.matrix(x.tolist()), mp.matrix(y.tolist())
    cos = mp.svd_r(xm.T * ym, compute_uv=False)
    sin = mp.svd_r(ym - xm * (xm.T * ym), compute_uv=False)
    pairs = zip(sorted(sin), sorted(cos, reverse=True), strict=True)
    ref = sorted(float(mp.atan2(s, c)) for s, c in pairs)
    got = np.sort(principal_angles(x, y))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-15)
    g = Grassmann(9, 3)
    np.testing.assert_allclose(g.dist(x, y), np.linalg.norm(ref), rtol=1e-6)


@pytest.mark.parametrize("n, p", [(5, 2), (8, 3)])
def test_grassmann_against_pymanopt_and_geomstats(n, p):
    ours, theirs = Grassmann(n, p), pm.Grassmann(n, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsg = gs_grassmann.Grassmannian(n, p)
    rng = np.random.default_rng(n)
    x = ours.random_point(rng, (5,))
    u = ours.tangent_gaussian(x, 0.4, rng)
    y = ours.random_point(rng, (5,))
    for i in range(5):
        # same subspaces (pymanopt re-orthonormalizes its frames by QR)
        np.testing.assert_allclose(_proj(ours.exp(x[i], u[i])), _proj(theirs.exp(x[i], u[i])),
                                   atol=1e-12)
        np.testing.assert_allclose(ours.log(x[i], y[i]), theirs.log(x[i], y[i]), atol=1e-10)
        np.testing.assert_allclose(ours.dist(x[i], y[i]), theirs.dist(x[i], y[i]), rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gs_dist = gsg.metric.dist(_proj(x), _proj(y))
    # geomstats works on projectors P = X X^T with the Frobenius metric, in which a horizontal
    # H at X has length |H X^T + X H^T|_F = sqrt(2) |H|_F: its distances are sqrt(2) ours
    np.testing.assert_allclose(np.sqrt(2.0) * ours.dist(x, y), gs_dist, rtol=1e-7)


def test_grassmann_transport_depends_on_the_subspace_not_the_frame():
    g = Grassmann(6, 2)
    rng = np.random.default_rng(1)
    x = g.random_point(rng)
    y = g.exp(x, g.tangent_gaussian(x, 0.5, rng))
    u = g.tangent_gaussian(x, 1.0, rng)
    q = np.linalg.qr(rng.standard_normal((2, 2)))[0]
    # the same subspace y q: the same tangent vector, expressed at the other frame
    np.testing.assert_allclose(g.transport(x, y @ q, u), g.transport(x, y, u) @ q, atol=1e-12)


def _ode_transport(x, h, u):
    """Transport of the horizontal u along t -> Exp_x(t h), t in [0, 1], integrating the
    Grassmann connection V' = -Y Y'^T V on the Edelman-Arias-Smith geodesic
    Y(t) = X Z cos(t S) Z^T + W sin(t S) Z^T (h = W S Z^T). Returns (V(1), Y(1))."""
    w, s, zt = np.linalg.svd(h, full_matrices=False)
    z = zt.T
    n, p = x.shape

    def frame(t):
        return (x @ z * np.cos(t * s) + w * np.sin(t * s)) @ zt

    def velocity(t):
        return (-(x @ z) * (s * np.sin(t * s)) + w * (s * np.cos(t * s))) @ zt

    def rhs(t, v):
        v = v.reshape(n, p)
        return (-frame(t) @ (velocity(t).T @ v)).ravel()

    sol = solve_ivp(rhs, (0.0, 1.0), u.ravel(), rtol=1e-12, atol=1e-14, method="DOP853")
    return sol.y[:, -1].reshape(n, p), frame(1.0)


def test_grassmann_holonomy_of_a_geodesic_triangle_against_integrated_transport():
    g = Grassmann(6, 2)
    rng = np.random.default_rng(2)
    a = g.random_point(rng)
    b = g.exp(a, g.tangent_gaussian(a, 0.25, rng))
    c = g.exp(b, g.tangent_gaussian(b, 0.25, rng))
    u = g.tangent_gaussian(a, 1.0, rng)
    # closed-form transports around a -> b -> c -> a
    ours = g.transport(c, a, g.transport(b, c, g.transport(a, b, u)))
    # integrated transports along the same geodesics, moved to the given frames
    v = u
    for p0, p1 in ((a, b), (b, c), (c, a)):
        v, y1 = _ode_transport(p0, g.log(p0, p1), v)
        v = g.proj(p1, v @ (y1.T @ p1))
    np.testing.assert_allclose(ours, v, atol=1e-9)
    assert np.linalg.norm(ours - u) > 1e-3  # the loop has holonomy: not the identity
    np.testing.assert_allclose(np.linalg.norm(ours), np.linalg.norm(u), rtol=1e-12)


@pytest.mark.parametrize("size", [0.05, 0.2, 0.5])
def test_grassmann_holonomy_on_rp2_is_the_spherical_excess(size):
    """Gr(3, 1) is the projective plane, curvature 1: transport around a geodesic triangle
    rotates by its area, the spherical excess A + B + C - pi (Gauss-Bonnet)."""
    g = Grassmann(3, 1)
    rng = np.random.default_rng(int(100 * size))
    a = g.random_point(rng)
    b = g.exp(a, size * g.tangent_gaussian(a, 1.0, rng))
    c = g.exp(b, size * g.tangent_gaussian(b, 1.0, rng))

    def angle(p, q, r):
        lq, lr = g.log(p, q), g.log(p, r)
        return np.arccos(np.sum(lq * lr) / (np.linalg.norm(lq) * np.linalg.norm(lr)))

    excess = angle(a, b, c) + angle(b, c, a) + angle(c, a, b) - np.pi
    u = g.tangent_gaussian(a, 1.0, rng)
    u /= np.linalg.norm(u)
    back = g.transport(c, a, g.transport(b, c, g.transport(a, b, u)))
    rotation = np.arccos(np.clip(np.sum(back * u), -1.0, 1.0))
    np.testing.assert_allclose(rotation, abs(excess), rtol=1e-7, atol=1e-12)
