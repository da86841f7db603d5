"""Riemannian gossip: W @ X on Euclidean space, per-agent loops on the sphere, contraction."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.manifolds import AntipodalError, Euclidean, Manifold, Sphere
from rfed.networks import (
    InProcessCommunicator,
    Network,
    complete,
    consensus_direction,
    consensus_error,
    erdos_renyi,
    lambda2_modulus,
    metropolis_hastings_weights,
    mix_tangent,
    random_regular,
    riemannian_gossip,
    ring,
)


class FlatViaContract(Manifold):
    """Euclidean geometry that is not an ``Euclidean`` instance: exercises the arc-batched path."""

    def __init__(self, d):
        self._e = Euclidean(d)
        self.dim, self.point_shape, self.name = d, (d,), f"Flat({d})"

    def inner(self, x, u, v):
        return self._e.inner(x, u, v)

    def exp(self, x, u):
        return self._e.exp(x, u)

    def log(self, x, y):
        return self._e.log(x, y)

    def transport(self, x, y, u):
        return self._e.transport(x, y, u)

    def proj(self, x, v):
        return self._e.proj(x, v)

    def random_point(self, rng, size=()):
        return self._e.random_point(rng, size)

    def tangent_gaussian(self, x, sigma, rng):
        return self._e.tangent_gaussian(x, sigma, rng)

    def tangent_basis(self, x):
        return self._e.tangent_basis(x)

    def point_violation(self, x):
        return self._e.point_violation(x)

    def tangent_violation(self, x, u):
        return self._e.tangent_violation(x, u)


def _cap(rng, n, dim, radius):
    """n points of S^dim within geodesic distance ``radius`` of the north pole."""
    s = Sphere(dim)
    pole = np.zeros(dim + 1)
    pole[0] = 1.0
    u = s.proj(pole, rng.standard_normal((n, dim + 1)))
    u *= (radius * rng.random((n, 1))) / np.linalg.norm(u, axis=1, keepdims=True)
    return s.exp(pole, u)


def _loop_gossip(manifold, x, w, gamma):
    """Per-agent reference: for each agent, loop over neighbours with single-point log/exp."""
    w = sp.csr_matrix(w)
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        v = np.zeros_like(x[i])
        for ptr in range(w.indptr[i], w.indptr[i + 1]):
            j = w.indices[ptr]
            v += w.data[ptr] * manifold.log(x[i], x[j])
        out[i] = manifold.exp(x[i], gamma * v)
    return out


@pytest.mark.parametrize("shape", [(5,), (3, 4)])
def test_euclidean_gossip_is_w_times_x(shape):
    rng = np.random.default_rng(0)
    g = erdos_renyi(40, 0.15, 1)
    w = metropolis_hastings_weights(g)
    e = Euclidean(*shape)
    x = e.random_point(rng, 40)
    wx = (w @ x.reshape(40, -1)).reshape(x.shape)
    np.testing.assert_allclose(riemannian_gossip(e, x, w), wx, rtol=0, atol=1e-14)
    gamma = 0.3
    np.testing.assert_allclose(
        riemannian_gossip(e, x, w, gamma), x + gamma * (wx - x), rtol=0, atol=1e-14
    )


def test_generic_arc_path_equals_w_times_x():
    rng = np.random.default_rng(1)
    w = metropolis_hastings_weights(random_regular(60, 4, 2))
    flat = FlatViaContract(6)
    x = flat.random_point(rng, 60)
    for chunk in (7, 1 << 16):
        np.testing.assert_allclose(
            riemannian_gossip(flat, x, w, max_chunk_arcs=chunk), w @ x, rtol=0, atol=1e-13
        )
    # base != points: sum_j w_ij (x_j - b_i) = W x - b
    b = flat.random_point(rng, 60)
    np.testing.assert_allclose(consensus_direction(flat, w, x, b), w @ x - b, atol=1e-13)
    np.testing.assert_allclose(consensus_direction(Euclidean(6), w, x, b), w @ x - b, atol=1e-13)
    # public copies: same result, nothing counted
    comm = InProcessCommunicator(60)
    np.testing.assert_allclose(
        consensus_direction(flat, w, x, comm=comm, copies=True), w @ x - x, atol=1e-13
    )
    assert comm.stats.messages == 0


def test_sphere_gossip_matches_per_agent_loop_and_stays_on_sphere():
    rng = np.random.default_rng(3)
    s = Sphere(4)
    g = erdos_renyi(35, 0.2, 5)
    w = metropolis_hastings_weights(g)
    x = _cap(rng, 35, 4, 1.2)
    for gamma in (1.0, 0.5):
        got = riemannian_gossip(s, x, w, gamma, max_chunk_arcs=50)
        np.testing.assert_allclose(got, _loop_gossip(s, x, w, gamma), atol=1e-12)
        assert np.all(s.belongs(got))
    # the validating view gives the same result
    np.testing.assert_allclose(riemannian_gossip(s.checked(), x, w), riemannian_gossip(s, x, w))


def test_sphere_gossip_contracts_and_converges_in_a_cap():
    rng = np.random.default_rng(4)
    s = Sphere(10)
    net = Network(random_regular(50, 6, 8))
    lam2 = lambda2_modulus(net.weights)
    x = _cap(rng, 50, 10, 0.4)
    errors = [consensus_error(s, x)]
    for _ in range(120):
        x = net.gossip(s, x)
        errors.append(consensus_error(s, x))
    errors = np.array(errors)
    assert np.all(np.diff(errors[:30]) < 0)  # contracts every round
    # in a small cap the step is nearly linear: the Euclidean rate |lambda_2|^2 per round,
    # up to a curvature factor (2 allowed over 20 rounds)
    assert errors[20] <= 2.0 * lam2 ** (2 * 20) * errors[0]
    assert errors[-1] < 1e-25  # consensus (to rounding)
    assert np.all(s.belongs(x))
    # messages: one point per arc per round
    assert net.stats.messages == 120 * net.graph.n_arcs


def test_antipodal_neighbours_raise():
    s = Sphere(2)
    x = np.array([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0]])
    w = metropolis_hastings_weights(complete(3))
    with pytest.raises(AntipodalError):
        riemannian_gossip(s, x, w)


def test_mix_tangent_transports_then_sums():
    rng = np.random.default_rng(5)
    s = Sphere(3)
    w = metropolis_hastings_weights(erdos_renyi(25, 0.3, 6))
    y = _cap(rng, 25, 3, 1.0)
    z = _cap(rng, 25, 3, 1.0)
    u = s.proj(y, rng.standard_normal(y.shape))
    got = mix_tangent(s, w, y, u, z, max_chunk_arcs=30)
    ref = np.zeros_like(u)
    wd = w.toarray()
    for i in range(25):
        for j in range(25):
            if wd[i, j]:
                ref[i] += wd[i, j] * s.transport(y[j], z[i], u[j])
    np.testing.assert_allclose(got, ref, atol=1e-12)
    assert np.all(s.is_tangent(z, got))
    # all at one point: no transport, plain W @ U
    p = np.broadcast_to(y[:1], y.shape)
    up = s.proj(p, rng.standard_normal(y.shape))
    np.testing.assert_allclose(mix_tangent(s, w, p, up, p), w @ up, atol=1e-13)
    e = Euclidean(4)
    np.testing.assert_allclose(mix_tangent(e, w, y, u, z), w @ u, atol=1e-14)


def test_consensus_error_closed_forms():
    rng = np.random.default_rng(6)
    e = Euclidean(3)
    x = rng.standard_normal((10, 3))
    err, c = consensus_error(e, x, return_center=True)
    np.testing.assert_allclose(c, x.mean(axis=0))
    assert np.isclose(err, np.sum((x - x.mean(axis=0)) ** 2) / 10)
    s = Sphere(2)
    p = np.tile([0.0, 0.0, 1.0], (7, 1))
    assert consensus_error(s, p) == 0.0
    # two points at distance theta: Karcher mean is the midpoint, error (theta/2)^2
    theta = 0.8
    pts = np.array(
        [[np.sin(theta / 2), 0, np.cos(theta / 2)], [-np.sin(theta / 2), 0, np.cos(theta / 2)]]
    )
    assert np.isclose(consensus_error(s, pts), (theta / 2) ** 2)


def test_sparse_graph_stays_sparse():
    # a dense 100,000 x 100,000 matrix would need 80 GB: these must stay sparse
    n = 100_000
    g = ring(n)
    w = metropolis_hastings_weights(g)
    assert sp.isspmatrix_csr(w) and w.nnz == 3 * n
    comm = InProcessCommunicator(n)
    s = Sphere(2)
    x = _cap(np.random.default_rng(7), n, 2, 0.5)
    y = riemannian_gossip(s, x, w, comm=comm)
    assert y.shape == x.shape and comm.stats.messages == 2 * n
    ye = riemannian_gossip(Euclidean(3), x, w)
    np.testing.assert_allclose(ye, w @ x, atol=1e-14)


def test_input_validation():
    s = Sphere(2)
    w = metropolis_hastings_weights(ring(4))
    with pytest.raises(ValueError, match=r"'points' has shape \(4, 4\)"):
        riemannian_gossip(s, np.ones((4, 4)), w)
    with pytest.raises(ValueError, match=r"'weights' has shape \(4, 4\); expected \(3, 3\)"):
        riemannian_gossip(s, np.tile([1.0, 0, 0], (3, 1)), w)
    with pytest.raises(TypeError, match="Manifold"):
        riemannian_gossip("sphere", np.ones((4, 3)), w)
    with pytest.raises(ValueError, match="serves 5 agents"):
        riemannian_gossip(s, np.tile([1.0, 0, 0], (4, 1)), w, comm=InProcessCommunicator(5))
