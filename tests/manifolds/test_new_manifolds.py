"""The oblique manifold, SO(n) and the SPD log-Euclidean and Bures-Wasserstein metrics against
held-out closed forms computed with scipy (logm, expm, expm_frechet, sqrtm,
solve_continuous_lyapunov), pymanopt's Oblique, an ODE-integrated parallel transport, and
pymanopt's solvers through the adapter (the contract suite runs on them too:
manifold_cases.CASES)."""

import autograd.numpy as anp
import numpy as np
import pymanopt.manifolds as pm
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm, expm_frechet, logm, solve_continuous_lyapunov, sqrtm

from rfed.manifolds import (
    Oblique,
    SPDBuresWasserstein,
    SPDLogEuclidean,
    SpecialOrthogonal,
    StiefelLogError,
    solve_reference,
)


def _spd(rng, n, cond=10.0):
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return (q * np.geomspace(1.0, cond, n)) @ q.T


# ---------------------------------------------------------------- SO(n)
@pytest.mark.parametrize("n", [2, 3, 5])
def test_so_log_exp_against_scipy(n):
    m = SpecialOrthogonal(n)
    rng = np.random.default_rng(n)
    x, y = m.random_point(rng, (2, 6))
    v = m.log(x, y)
    for i in range(6):
        np.testing.assert_allclose(v[i], x[i] @ logm(x[i].T @ y[i]).real, atol=1e-11)
        np.testing.assert_allclose(m.exp(x[i], v[i]), x[i] @ expm(x[i].T @ v[i]), atol=1e-12)
        np.testing.assert_allclose(m.dist(x[i], y[i]), np.linalg.norm(logm(x[i].T @ y[i])),
                                   rtol=1e-11)
    assert np.all(np.linalg.det(m.random_point(rng, (50,))) > 0)


def test_so_transport_against_the_integrated_connection():
    """Left-trivialized, a parallel field xi along X e^{t Omega} solves
    xi' = -(1/2)[Omega, xi] (bi-invariant metric: nabla_A B = [A, B] / 2)."""
    m = SpecialOrthogonal(4)
    rng = np.random.default_rng(0)
    x = m.random_point(rng)
    w = m.tangent_gaussian(x, 0.8, rng)
    u = m.tangent_gaussian(x, 1.0, rng)
    omega = x.T @ w

    def rhs(_, z):
        xi = z.reshape(4, 4)
        return (-0.5 * (omega @ xi - xi @ omega)).ravel()

    xi1 = solve_ivp(rhs, (0.0, 1.0), (x.T @ u).ravel(), rtol=1e-12, atol=1e-13,
                    method="DOP853").y[:, -1].reshape(4, 4)
    y = m.exp(x, w)
    np.testing.assert_allclose(m.transport(x, y, u), y @ xi1, atol=1e-11)


def test_so_half_turn_is_the_cut_locus():
    m = SpecialOrthogonal(3)
    x = np.eye(3)
    with pytest.raises(StiefelLogError, match="cut locus"):
        m.log(x, np.diag([-1.0, -1.0, 1.0]))


# ---------------------------------------------------------------- log-Euclidean
def test_log_euclidean_distance_log_exp_and_mean_against_scipy():
    m = SPDLogEuclidean(4)
    rng = np.random.default_rng(1)
    for _ in range(5):
        p, q = _spd(rng, 4, 50.0), _spd(rng, 4, 5.0)
        lp, lq = logm(p).real, logm(q).real
        np.testing.assert_allclose(m.dist(p, q), np.linalg.norm(lp - lq), rtol=1e-12)
        # Log_P Q = D expm(log P)[log Q - log P]
        np.testing.assert_allclose(m.log(p, q), expm_frechet(lp, lq - lp)[1], atol=1e-11)
        u = m.tangent_gaussian(p, 1.0, rng)
        # Exp_P U = expm(log P + D logm(P)[U]): D logm(P) is the inverse of D expm(log P)
        w = m.log(p, m.exp(p, u))
        np.testing.assert_allclose(w, u, atol=1e-11)
        np.testing.assert_allclose(expm_frechet(lp, logm(m.exp(p, u)).real - lp)[1], u,
                                   atol=1e-10)
    pts = np.stack([_spd(rng, 4, 20.0) for _ in range(7)])
    w = rng.uniform(0.1, 1.0, 7)
    ref = expm(np.einsum("i,ijk->jk", w / w.sum(), np.stack([logm(a).real for a in pts])))
    np.testing.assert_allclose(m.mean(pts, w), ref, rtol=1e-11)


def test_log_euclidean_metric_is_the_pullback_of_frobenius():
    m = SPDLogEuclidean(3)
    rng = np.random.default_rng(2)
    p = _spd(rng, 3, 30.0)
    u, v = m.tangent_gaussian(p, 1.0, rng), m.tangent_gaussian(p, 1.0, rng)
    h = 1e-6
    # D logm(P)[U] by central differences of scipy's logm
    du = (logm(p + h * u) - logm(p - h * u)).real / (2 * h)
    dv = (logm(p + h * v) - logm(p - h * v)).real / (2 * h)
    np.testing.assert_allclose(m.inner(p, u, v), np.sum(du * dv), rtol=1e-7)


# ---------------------------------------------------------------- Bures-Wasserstein
def _bw_closed_form(p, q):
    rp = sqrtm(p).real
    return np.sqrt(max(np.trace(p) + np.trace(q) - 2 * np.trace(sqrtm(rp @ q @ rp).real), 0.0))


def test_bures_wasserstein_distance_log_exp_against_closed_forms():
    m = SPDBuresWasserstein(4)
    rng = np.random.default_rng(3)
    for _ in range(5):
        p, q = _spd(rng, 4, 20.0), _spd(rng, 4, 8.0)
        np.testing.assert_allclose(m.dist(p, q), _bw_closed_form(p, q), rtol=1e-10)
        # Log_P Q = (PQ)^(1/2) + (QP)^(1/2) - 2P (Bhatia, Jain and Lim 2019)
        pq = sqrtm(p @ q).real
        np.testing.assert_allclose(m.log(p, q), pq + pq.T - 2 * p, atol=1e-10)
        np.testing.assert_allclose(m.exp(p, m.log(p, q)), q, atol=1e-10)
        # Exp_P U = P + U + L P L, L the solution of P L + L P = U
        u = m.tangent_gaussian(p, 0.2, rng)
        lyap = solve_continuous_lyapunov(p, u)
        np.testing.assert_allclose(m.exp(p, u), p + u + lyap @ p @ lyap, atol=1e-12)
        np.testing.assert_allclose(m.inner(p, u, u), 0.5 * np.trace(lyap @ u), rtol=1e-12)
        np.testing.assert_allclose(m.dist(p, q), m.norm(p, m.log(p, q)), rtol=1e-10)


def test_bures_wasserstein_mean_is_the_fixed_point_of_wasserstein_barycentres():
    """The Karcher mean S satisfies S = sum_i w_i (S^(1/2) P_i S^(1/2))^(1/2) (Alvarez-Esteban
    et al. 2016, Theorem 4.2)."""
    m = SPDBuresWasserstein(3)
    rng = np.random.default_rng(4)
    pts = np.stack([_spd(rng, 3, 6.0) for _ in range(6)])
    w = rng.uniform(0.2, 1.0, 6)
    w /= w.sum()
    s = m.mean(pts, w, tol=1e-13, max_iter=500)
    rs = sqrtm(s).real
    fixed = sum(wi * sqrtm(rs @ a @ rs).real for wi, a in zip(w, pts, strict=True))
    np.testing.assert_allclose(fixed, s, atol=1e-10)


def test_bures_wasserstein_transport_is_a_stated_projection():
    m = SPDBuresWasserstein(3)
    assert m.has_parallel_transport is False
    rng = np.random.default_rng(5)
    p, q = _spd(rng, 3), _spd(rng, 3)
    u = m.tangent_gaussian(p, 1.0, rng)
    np.testing.assert_array_equal(m.transport(p, q, u), u)


# ---------------------------------------------------------------- oblique
def test_oblique_against_pymanopt():
    ours, theirs = Oblique(5, 3), pm.Oblique(5, 3)
    rng = np.random.default_rng(6)
    x, y = ours.random_point(rng, (2, 4))
    for i in range(4):
        u = ours.tangent_gaussian(x[i], 0.7, rng)
        np.testing.assert_allclose(ours.exp(x[i], u), theirs.exp(x[i], u), atol=1e-12)
        np.testing.assert_allclose(ours.log(x[i], y[i]), theirs.log(x[i], y[i]), atol=1e-10)
        np.testing.assert_allclose(ours.dist(x[i], y[i]), theirs.dist(x[i], y[i]), rtol=1e-10)
        np.testing.assert_allclose(ours.proj(x[i], u + x[i]), theirs.projection(x[i], u + x[i]),
                                   atol=1e-14)


# ---------------------------------------------------------------- the pymanopt adapter
def test_adapter_solves_known_problems_on_every_new_manifold():
    rng = np.random.default_rng(7)
    # SO(3): the rotation nearest to A is its special polar factor U diag(1, 1, det) V^T
    a = rng.standard_normal((3, 3))
    u_, _, vt = np.linalg.svd(a)
    ref = u_ @ np.diag([1.0, 1.0, np.linalg.det(u_ @ vt)]) @ vt
    got = solve_reference(SpecialOrthogonal(3), lambda x: anp.sum((x - a) ** 2),
                          method="trust_regions", seed=1)
    np.testing.assert_allclose(got, ref, atol=1e-8)
    # oblique: the columns of A normalized maximize sum_j <x_j, a_j>
    b = rng.standard_normal((4, 3))
    got = solve_reference(Oblique(4, 3), lambda x: -anp.sum(x * b), method="trust_regions",
                          seed=1)
    np.testing.assert_allclose(got, b / np.linalg.norm(b, axis=0), atol=1e-8)
    # SPD, both metrics (first order): tr(A P^-1) + tr(P) is minimal at P = A^(1/2)
    c = _spd(rng, 3, 4.0)
    for man in (SPDLogEuclidean(3), SPDBuresWasserstein(3)):
        got = solve_reference(man, lambda p: anp.trace(c @ anp.linalg.inv(p)) + anp.trace(p),
                              x0=np.eye(3), method="conjugate_gradient", max_iterations=3000,
                              min_gradient_norm=1e-10, seed=1)
        np.testing.assert_allclose(got, sqrtm(c).real, atol=1e-7)
