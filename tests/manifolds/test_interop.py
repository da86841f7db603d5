"""pymanopt's solvers running on rfed manifolds through the adapter."""

import autograd.numpy as anp
import numpy as np
import pymanopt
import pytest

from rfed.manifolds import (
    SPD,
    Euclidean,
    Hyperboloid,
    PoincareBall,
    Product,
    Sphere,
    solve_reference,
    to_pymanopt,
)


def _sym_matrix(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return 0.5 * (a + a.T)


@pytest.mark.parametrize("method", ["steepest_descent", "trust_regions"])
def test_leading_eigenvector_on_rfed_sphere(method):
    n = 8
    a = _sym_matrix(n, 0)
    w, v = np.linalg.eigh(a)

    def cost(x):
        return -x @ a @ x

    x = solve_reference(
        Sphere(n - 1), cost, method=method, max_iterations=5000, min_gradient_norm=1e-9, seed=1
    )
    assert Sphere(n - 1).belongs(x)
    np.testing.assert_allclose(abs(x @ v[:, -1]), 1.0, atol=1e-8)
    np.testing.assert_allclose(x @ a @ x, w[-1], rtol=1e-10)


def test_adapter_used_directly_with_pymanopt():
    n = 5
    a = _sym_matrix(n, 1)
    adapter = to_pymanopt(Sphere(n - 1), seed=3)

    @pymanopt.function.autograd(adapter)
    def cost(x):
        return -x @ a @ x

    problem = pymanopt.Problem(adapter, cost)
    res = pymanopt.optimizers.TrustRegions(verbosity=0).run(problem)
    np.testing.assert_allclose(-res.cost, np.linalg.eigvalsh(a)[-1], rtol=1e-10)
    # random points come from the adapter's own seeded generator
    p1 = to_pymanopt(Sphere(3), seed=9).random_point()
    p2 = to_pymanopt(Sphere(3), seed=9).random_point()
    np.testing.assert_array_equal(p1, p2)
    other = to_pymanopt(Sphere(3), seed=10)
    t = other.random_tangent_vector(p1)
    np.testing.assert_allclose(other.norm(p1, t), 1.0)
    assert abs(other.inner_product(p1, p1, t)) < 1e-12


def _spd_sq_dist(p, q):
    """Squared affine-invariant distance, written for autograd (eigh of the whitened Q)."""
    w, v = anp.linalg.eigh(p)
    p_isqrt = (v / anp.sqrt(w)) @ v.T
    m = p_isqrt @ q @ p_isqrt
    mu = anp.linalg.eigh(0.5 * (m + m.T))[0]
    return anp.sum(anp.log(mu) ** 2)


def _hyp_sq_dist(x, p):
    z = x[0] * p[0] - anp.sum(x[1:] * p[1:])
    return anp.arccosh(z) ** 2


def _ball_sq_dist(x, p):
    num = anp.sum((x - p) ** 2)
    den = (1 - anp.sum(x**2)) * (1 - anp.sum(p**2))
    return anp.arccosh(1 + 2 * num / den) ** 2


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")
@pytest.mark.parametrize(
    "manifold, sq_dist",
    [(SPD(3), _spd_sq_dist), (Hyperboloid(3), _hyp_sq_dist), (PoincareBall(2), _ball_sq_dist)],
    ids=["SPD(3)", "Hyperboloid(3)", "PoincareBall(2)"],
)
@pytest.mark.parametrize("method", ["trust_regions", "steepest_descent"])
def test_frechet_mean_matches_karcher_mean(manifold, sq_dist, method):
    rng = np.random.default_rng(2)
    pts = manifold.random_point(rng, (6,))
    w = rng.uniform(0.5, 1.5, 6)
    w = w / w.sum()

    def cost(x):
        return sum(w[i] * sq_dist(x, pts[i]) for i in range(len(pts)))

    # start away from every data point: the squared distance is not smooth at a data point
    # for autograd (arccosh'(1) is infinite)
    x0 = manifold.random_point(rng)
    ref = solve_reference(
        manifold, cost, x0, method=method, max_iterations=3000, min_gradient_norm=1e-10
    )
    ours = manifold.mean(pts, w)
    assert manifold.dist(ref, ours) <= 1e-7


def test_solve_reference_on_product():
    a = _sym_matrix(4, 5)
    b = np.array([0.3, -1.2])
    prod = Product(Sphere(3), Euclidean(2))

    def cost(s, e):
        return -s @ a @ s + anp.sum((e - b) ** 2)

    x0 = prod.random_point(0)
    s, e = solve_reference(prod, cost, x0, method="trust_regions")
    np.testing.assert_allclose(abs(s @ np.linalg.eigh(a)[1][:, -1]), 1.0, atol=1e-8)
    np.testing.assert_allclose(e, b, atol=1e-8)


def test_solve_reference_rejects_unknown_method():
    with pytest.raises(ValueError, match="argument 'method'"):
        solve_reference(Sphere(2), lambda x: x[0], method="newton")
