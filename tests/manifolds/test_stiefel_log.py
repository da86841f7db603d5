"""The Stiefel log on every pair off the cut locus, against an independent shooting log.

The independent log (written here, sharing nothing with rfed's): the geodesic of the embedded
metric, Y'' + Y (Y'^T Y') = 0 (Edelman, Arias and Smith 1998, eq. 2.7), through scipy's
``expm`` of the closed form's block matrix; the velocity found by ``scipy.optimize.least_squares``
(finite-difference Jacobian) with continuation along the projected straight line
t -> polar(X + t (Y - X)) (another path than rfed's), in the coordinates of the reduction to
span[X, Y]; and rfed's answer integrated with ``scipy.integrate.solve_ivp`` on the ODE itself.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm, logm
from scipy.optimize import least_squares

from rfed.manifolds import Stiefel, StiefelLogError


# ---------------------------------------------------------------- the independent log
def _eas_exp(x, u):
    """Exp_X(U) by Edelman, Arias and Smith's closed form with scipy's expm."""
    p = x.shape[1]
    a = x.T @ u
    s = u.T @ u
    block = np.block([[a, -s], [np.eye(p), a]])
    return np.hstack([x, u]) @ expm(block)[:, :p] @ expm(-a)


def _basis(x, y):
    """An orthonormal basis [X, Q] of span[X, Y] (Q: the part of Y orthogonal to X; all of
    X's complement when n - p <= p)."""
    n, p = x.shape
    if n - p <= p:
        return np.linalg.qr(x, mode="complete")[0][:, p:]
    q = np.linalg.qr(y - x @ (x.T @ y))[0]
    q = np.linalg.qr(q - x @ (x.T @ q))[0]
    return q


def _velocity(x, q, theta):
    p = x.shape[1]
    iu = np.triu_indices(p, 1)
    a = np.zeros((p, p))
    a[iu] = theta[: len(iu[0])]
    return x @ (a - a.T) + q @ theta[len(iu[0]) :].reshape(q.shape[1], p)


def _polar(z):
    u, _, vt = np.linalg.svd(z, full_matrices=False)
    return u @ vt


def independent_log(x, y, steps=8):
    """Shooting with continuation along the projected straight line, scipy least squares."""
    q = _basis(x, y)
    p = x.shape[1]
    k = p * (p - 1) // 2 + q.shape[1] * p
    theta = np.zeros(k)
    for t in np.linspace(0.0, 1.0, steps + 1)[1:]:
        target = _polar(x + t * (y - x))
        sol = least_squares(lambda th, tg=target: (_eas_exp(x, _velocity(x, q, th)) - tg).ravel(),
                            theta, xtol=1e-15, ftol=1e-15, gtol=1e-15)
        theta = sol.x
    return _velocity(x, q, theta)


def ode_endpoint(x, u):
    """Y(1) of the geodesic equation Y'' = -Y (Y'^T Y') from (X, U), by solve_ivp."""
    n, p = x.shape

    def rhs(_, z):
        y, v = z[: n * p].reshape(n, p), z[n * p :].reshape(n, p)
        return np.concatenate([v.ravel(), (-y @ (v.T @ v)).ravel()])

    sol = solve_ivp(rhs, (0.0, 1.0), np.concatenate([x.ravel(), u.ravel()]), method="DOP853",
                    rtol=1e-13, atol=1e-13)
    return sol.y[: n * p, -1].reshape(n, p)


# ---------------------------------------------------------------- random pairs
def _same_component_pairs(m, rng, count):
    """Random pairs; on O(n) the second point is moved into the first one's component."""
    x, y = m.random_point(rng, (2, count))
    if m.n == m.p:
        flip = np.linalg.det(np.swapaxes(x, -1, -2) @ y) < 0
        y[flip, :, 0] *= -1.0
    return x, y


@pytest.mark.parametrize("n, p, count", [(4, 4, 4), (6, 3, 4), (10, 4, 4), (50, 5, 3),
                                         (100, 10, 1)])
def test_log_of_random_pairs_agrees_with_independent_shooting(n, p, count):
    m = Stiefel(n, p)
    rng = np.random.default_rng(100 * n + p)
    x, y = _same_component_pairs(m, rng, count)
    ours = m.log(x, y)
    assert np.all(m.is_tangent(x, ours, atol=1e-10))
    for i in range(count):
        np.testing.assert_allclose(m.exp(x[i], ours[i]), y[i], atol=1e-11)
        np.testing.assert_allclose(ode_endpoint(x[i], ours[i]), y[i], atol=1e-9)
        theirs = independent_log(x[i], y[i])
        np.testing.assert_allclose(_eas_exp(x[i], theirs), y[i], atol=1e-9)
        # the same geodesic: never longer than the independent one, and equal to it
        assert np.linalg.norm(ours[i]) <= np.linalg.norm(theirs) + 1e-9
        np.testing.assert_allclose(ours[i], theirs, atol=1e-7)
    # dist is the length of the geodesic log returns
    np.testing.assert_allclose(m.dist(x, y), np.linalg.norm(ours, axis=(-2, -1)), rtol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("n, p", [(4, 4), (6, 3), (10, 4), (50, 5), (100, 10)])
def test_log_of_many_random_pairs_agrees_with_independent_shooting(n, p):
    m = Stiefel(n, p)
    rng = np.random.default_rng(7 * n + p)
    x, y = _same_component_pairs(m, rng, 10)
    ours = m.log(x, y)
    for i in range(10):
        theirs = independent_log(x[i], y[i])
        assert np.linalg.norm(ours[i]) <= np.linalg.norm(theirs) + 1e-9
        np.testing.assert_allclose(ours[i], theirs, atol=1e-7)


# ---------------------------------------------------------------- round trips
@pytest.mark.parametrize("n, p", [(6, 3), (10, 4), (50, 5)])
@pytest.mark.parametrize("dist", [0.5, 2.0, 2.8, 3.1])
def test_round_trip_inside_the_injectivity_radius(n, p, dist):
    """|u| < pi (the injectivity radius for p < n): log(exp(u)) = u."""
    m = Stiefel(n, p)
    rng = np.random.default_rng(int(10 * dist) + n)
    x = m.random_point(rng, (3,))
    u = m.tangent_gaussian(x, 1.0, rng)
    u *= dist / np.linalg.norm(u, axis=(-2, -1))[:, None, None]
    v = m.log(x, m.exp(x, u))
    np.testing.assert_allclose(v, u, atol=1e-9 * dist)


@pytest.mark.parametrize("n", [3, 5, 6])
def test_orthogonal_group_up_to_distance_4_4(n):
    """O(n) pairs at distances 0.5 to 4.4 (injectivity radius sqrt(2) pi ~ 4.443 there): the
    log is X logm(X^T Y), checked against scipy.linalg.logm."""
    m = Stiefel(n, n)
    rng = np.random.default_rng(n)
    for d in np.linspace(0.5, 4.4, 9):
        x = m.random_point(rng)
        if n == 3:  # a single rotation plane: the angle is d / sqrt(2), up to 3.11 < pi
            omega = np.zeros((3, 3))
            omega[0, 1], omega[1, 0] = -1.0, 1.0
            r = np.linalg.qr(rng.standard_normal((3, 3)))[0]
            omega = r @ omega @ r.T
        else:
            omega = rng.standard_normal((n, n))
            omega -= omega.T
        u = x @ omega * (d / np.linalg.norm(omega))
        y = m.exp(x, u)
        v = m.log(x, y)
        np.testing.assert_allclose(v, u, atol=1e-10 * d)
        np.testing.assert_allclose(v, x @ logm(x.T @ y).real, atol=1e-10 * d)
        np.testing.assert_allclose(m.dist(x, y), d, rtol=1e-12)


def test_geoopt_logmap_case():
    """geoopt's test_logmap (tests/test_manifold_basic.py) on EuclideanStiefelExact (10, 5):
    X the polar factor of a Gaussian matrix, U the projection of a Gaussian one, |U| about 6.4
    (twice the injectivity radius): log must return the minimizing geodesic to Exp(U), so
    exp(log(y)) = y and the geodesic is shorter than U."""
    m = Stiefel(10, 5)
    rng = np.random.default_rng(42)
    x = _polar(rng.standard_normal((10, 5)))
    u = m.proj(x, rng.standard_normal((10, 5)))
    u *= 6.4 / np.linalg.norm(u)
    y = m.exp(x, u)
    v = m.log(x, y)
    np.testing.assert_allclose(m.exp(x, v), y, atol=1e-11)
    assert np.linalg.norm(v) < 6.4
    np.testing.assert_allclose(v, independent_log(x, y), atol=1e-7)


def test_geoopt_logmap_case_with_torch():
    """The very inputs of geoopt's test (torch's generator, seeds 42 then 1..5)."""
    torch = pytest.importorskip("torch")
    m = Stiefel(10, 5)
    torch.manual_seed(42)
    ex = torch.randn(10, 5, dtype=torch.float64)
    u_, _, v_ = torch.svd(ex)
    x = (u_ @ v_.t()).numpy()
    for seed in (1, 2, 3, 4, 5):
        torch.manual_seed(seed)
        u = m.proj(x, torch.randn(10, 5, dtype=torch.float64).numpy())
        y = m.exp(x, u)
        np.testing.assert_allclose(m.exp(x, m.log(x, y)), y, atol=1e-10)


# ---------------------------------------------------------------- the cut locus
@pytest.mark.parametrize("n", [2, 3, 6])
def test_antipodal_frames_on_st_n_1_raise_a_clear_error(n):
    m = Stiefel(n, 1)
    x = m.random_point(np.random.default_rng(n))
    with pytest.raises(StiefelLogError, match=r"y = -x.*cut locus.*length pi"):
        m.log(x, -x)


def test_orthogonal_group_components_and_half_turns_raise_a_clear_error():
    m = Stiefel(4, 4)
    x = m.random_point(np.random.default_rng(0))
    reflect = np.diag([1.0, 1.0, 1.0, -1.0])
    with pytest.raises(StiefelLogError, match=r"different connected components"):
        m.log(x, x @ reflect)
    half_turn = np.diag([-1.0, -1.0, 1.0, 1.0])
    with pytest.raises(StiefelLogError, match=r"cut locus"):
        m.log(x, x @ half_turn)


def test_two_minimizing_geodesics_raise_a_clear_error():
    """St(3, 2): Y = X with both columns negated is reached by the half turns about the
    normal of span(X) in either sense (equal length pi sqrt(2)... or shorter ones through the
    third dimension): whichever is shortest comes in a symmetric pair, the cut locus."""
    m = Stiefel(3, 2)
    x = np.eye(3)[:, :2]
    with pytest.raises(StiefelLogError, match=r"cut locus"):
        m.log(x, -x)


def test_no_raw_linalg_error_anywhere_on_st_n_1():
    m = Stiefel(6, 1)
    rng = np.random.default_rng(3)
    x = m.random_point(rng, (20,))
    y = m.random_point(rng, (20,))
    v = m.log(x, y)
    np.testing.assert_allclose(m.exp(x, v), y, atol=1e-12)
