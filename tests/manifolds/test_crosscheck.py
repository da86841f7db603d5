"""Values cross-checked against pymanopt and geomstats where those are right.

pymanopt's SPD transport is the identity and its sphere transport a projection, so transports
are compared with geomstats' parallel transport. geomstats takes the point last:
``metric.exp(v, x)``, ``metric.log(y, x)``.
"""

import warnings

import numpy as np
import pytest

from rfed.manifolds import SPD, Hyperboloid, Sphere

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import geomstats.geometry.hyperboloid as gs_hyperboloid
    import geomstats.geometry.hypersphere as gs_sphere
    import geomstats.geometry.spd_matrices as gs_spd
import pymanopt.manifolds as pm


@pytest.mark.parametrize("dim", [2, 24])
def test_sphere_against_pymanopt(dim):
    ours = Sphere(dim)
    theirs = pm.Sphere(dim + 1)  # pymanopt's Sphere(n) lives in R^n
    rng = np.random.default_rng(dim)
    for _ in range(5):
        x, y = ours.random_point(rng), ours.random_point(rng)
        u = ours.tangent_gaussian(x, 0.7, rng)
        np.testing.assert_allclose(ours.exp(x, u), theirs.exp(x, u), atol=1e-14)
        np.testing.assert_allclose(ours.log(x, y), theirs.log(x, y), atol=1e-12)
        np.testing.assert_allclose(ours.dist(x, y), theirs.dist(x, y), rtol=1e-12)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_spd_against_pymanopt(n):
    ours = SPD(n)
    theirs = pm.SymmetricPositiveDefinite(n)
    rng = np.random.default_rng(n)
    for _ in range(5):
        x, y = ours.random_point(rng), ours.random_point(rng)
        u = ours.tangent_gaussian(x, 0.7, rng)
        scale = np.linalg.norm(x)
        np.testing.assert_allclose(ours.exp(x, u), theirs.exp(x, u), atol=1e-11 * scale)
        np.testing.assert_allclose(ours.log(x, y), theirs.log(x, y), atol=1e-11 * scale)
        np.testing.assert_allclose(ours.dist(x, y), theirs.dist(x, y), rtol=1e-11)
        np.testing.assert_allclose(ours.inner(x, u, u), theirs.inner_product(x, u, u), rtol=1e-11)
        g = rng.standard_normal((n, n))
        np.testing.assert_allclose(
            ours.egrad2rgrad(x, g), theirs.euclidean_to_riemannian_gradient(x, g), atol=1e-11
        )


def _gs_case(name, dim):
    if name == "sphere":
        return Sphere(dim), gs_sphere.Hypersphere(dim)
    if name == "spd":
        return SPD(dim), gs_spd.SPDMatrices(dim)
    return Hyperboloid(dim), gs_hyperboloid.Hyperboloid(dim)


@pytest.mark.parametrize(
    "name, dim",
    [("sphere", 2), ("sphere", 5), ("spd", 2), ("spd", 4), ("hyperboloid", 2), ("hyperboloid", 4)],
)
def test_parallel_transport_against_geomstats(name, dim):
    ours, space = _gs_case(name, dim)
    rng = np.random.default_rng(dim)
    x = ours.random_point(rng, (6,))
    w = ours.tangent_gaussian(x, 0.5, rng)
    y = ours.exp(x, w)
    v = ours.tangent_gaussian(x, 1.0, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = space.metric.parallel_transport(v, x, end_point=y)
    scale = np.max(np.abs(ref))
    np.testing.assert_allclose(ours.transport(x, y, v), ref, atol=1e-10 * scale)


@pytest.mark.parametrize("dim", [2, 4])
def test_hyperboloid_against_geomstats(dim):
    ours, space = _gs_case("hyperboloid", dim)
    rng = np.random.default_rng(10 + dim)
    x = ours.random_point(rng, (6,))
    y = ours.random_point(rng, (6,))
    u = ours.tangent_gaussian(x, 1.0, rng)
    u = u * rng.uniform(0.1, 5.0, (6, 1)) / ours.norm(x, u)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g_exp = space.metric.exp(u, x)
        g_log = space.metric.log(y, x)
        g_dist = space.metric.dist(x, y)
    np.testing.assert_allclose(ours.exp(x, u), g_exp, rtol=1e-9)
    np.testing.assert_allclose(ours.log(x, y), g_log, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.dist(x, y), g_dist, rtol=1e-9)
