"""k-PCA on Stiefel and Grassmann: gradients, clipping, public bounds, closed-form optimum."""

import autograd.numpy as anp
import numpy as np
import pytest

from rfed.algorithms.decentralized import DOADP
from rfed.algorithms.federated import DPRSGD, PriRFed
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import Grassmann, Stiefel, principal_angles, solve_reference
from rfed.networks.graphs import ring
from rfed.networks.network import Network
from rfed.problems import KPCA

MANIFOLDS = ["grassmann", "stiefel"]


def _problem(manifold, k=3, seed=0, **kw):
    z = np.random.default_rng(seed).standard_normal((4, 12, 8))
    return KPCA(z, k, manifold, **kw)


@pytest.mark.parametrize("manifold", MANIFOLDS)
def test_manifold_and_shapes(manifold):
    prob = _problem(manifold)
    cls = Grassmann if manifold == "grassmann" else Stiefel
    assert isinstance(prob.manifold, cls) and prob.manifold.point_shape == (8, 3)
    x = prob.manifold.random_point(1, (4,))
    g = prob.per_sample_grad(x, np.arange(4), np.tile(np.arange(5), (4, 1)))
    assert g.shape == (4, 5, 8, 3)
    assert np.all(prob.manifold.is_tangent(x[:, None], g, atol=1e-12))


@pytest.mark.parametrize("manifold", MANIFOLDS)
def test_sample_gradient_is_the_directional_derivative(manifold):
    """<grad f_j(X), V> = d/dt f_j(Exp_X(tV)) at t = 0 (central differences), per sample."""
    prob = _problem(manifold, seed=1)
    m = prob.manifold
    rng = np.random.default_rng(2)
    x = m.random_point(rng)
    batch = {k: v[0] for k, v in prob.data.items()}
    g = prob.sample_rgrad(x, batch)
    for _ in range(3):
        v = m.tangent_gaussian(x, 1.0, rng)
        h = 1e-5
        d1 = (prob.sample_loss(m.exp(x, h * v), batch)
              - prob.sample_loss(m.exp(x, -h * v), batch)) / (2 * h)
        np.testing.assert_allclose(np.sum(g * v, axis=(-2, -1)), d1, rtol=1e-7, atol=1e-7)
    # equals the projection of the Euclidean gradient -2 z z^T X
    z = batch["z"]
    egrad = -2.0 * z[:, :, None] * (z @ x)[:, None, :]
    np.testing.assert_allclose(g, m.egrad2rgrad(x, egrad), atol=1e-12)


@pytest.mark.parametrize("manifold", MANIFOLDS)
@pytest.mark.parametrize("bound", [None, 0.5, 3.0])
def test_clipped_sum_matches_materialized_gradients(manifold, bound):
    prob = _problem(manifold, seed=3)
    x = prob.manifold.random_point(4, (4,))
    mask = np.random.default_rng(5).random((4, 12)) < 0.7
    fast, n_fast = prob.clipped_grad_sum(x, prob.data, bound, mask)
    # the generic implementation of the base class (materializes every gradient)
    slow, n_slow = super(KPCA, prob).clipped_grad_sum(x, prob.data, bound, mask)
    np.testing.assert_allclose(fast, slow, atol=1e-12)
    np.testing.assert_array_equal(n_fast, n_slow)
    if bound == 0.5:
        assert np.sum(n_fast) > 0


@pytest.mark.parametrize("manifold", MANIFOLDS)
def test_public_gradient_bound_holds_and_is_attained(manifold):
    """sup_X |grad f_j(X)| = |z_j|^2 <= B^2 (the asserted B), attained at |X^T z| = |z|/sqrt2."""
    rng = np.random.default_rng(6)
    z = rng.standard_normal((3, 20, 8))
    z[0, 0] *= 10.0  # outside the asserted domain: must be scaled back to norm B
    b = 2.5
    prob = KPCA(z, 2, manifold, norm_bound=b)
    assert prob.gradient_bound == b**2
    assert np.max(np.linalg.norm(prob.data["z"], axis=-1)) <= b * (1 + 1e-12)
    m = prob.manifold
    x = m.random_point(rng, (3, 200))
    for i in range(3):
        batch = {k: np.broadcast_to(v[i], (200,) + v[i].shape) for k, v in prob.data.items()}
        norms = m.norm(x[i][:, None], prob.sample_rgrad(x[i], batch))
        assert np.all(norms <= prob.data["sq"][i] * (1 + 1e-12))
    # attained: X = orthonormal frame with first column (z/|z| + w)/sqrt2, w unit and orthogonal
    zz = prob.data["z"][1, 3]
    w = rng.standard_normal(8)
    w -= (w @ zz) / (zz @ zz) * zz
    col = (zz / np.linalg.norm(zz) + w / np.linalg.norm(w)) / np.sqrt(2)
    other = rng.standard_normal(8)
    for e in (zz / np.linalg.norm(zz), w / np.linalg.norm(w)):
        other -= (other @ e) * e  # orthogonal to z (and to col): adds nothing to |X^T z|
    frame = np.column_stack([col, other / np.linalg.norm(other)])
    g = prob.sample_rgrad(frame, {"z": zz[None]})[0]
    np.testing.assert_allclose(np.linalg.norm(g), zz @ zz, rtol=1e-10)
    # no asserted bound, no gradient bound: never derived from the data
    assert KPCA(z, 2, manifold).gradient_bound is None


@pytest.mark.parametrize("manifold", MANIFOLDS)
def test_closed_form_optimum(manifold):
    prob = _problem(manifold, k=3, seed=7)
    ref = prob.reference_point()
    c = prob.covariance()
    lam = np.linalg.eigvalsh(c)[::-1]
    np.testing.assert_allclose(prob.cost(ref), -lam[:3].sum(), rtol=1e-12)
    np.testing.assert_allclose(prob.optimal_cost(), -lam[:3].sum(), rtol=1e-12)
    assert prob.grad_norm(ref) < 1e-12
    # Ky Fan: every frame costs at least the optimum
    xs = prob.manifold.random_point(8, (50,))
    assert all(prob.cost(x) >= prob.optimal_cost() - 1e-12 for x in xs)
    # a centralized solver (pymanopt trust regions through the adapter) agrees
    zall = prob.data["z"][prob.mask]

    def cost(x):
        return -anp.sum((zall @ x) ** 2) / zall.shape[0]

    sol = solve_reference(prob.manifold, cost, prob.manifold.random_point(9),
                          method="trust_regions", max_iterations=200)
    assert prob.distance_to_reference(sol) < 1e-6
    np.testing.assert_allclose(cost(sol), prob.optimal_cost(), rtol=1e-9)


def test_validation():
    z = np.ones((2, 5, 4))
    with pytest.raises(ValueError, match="argument 'k'"):
        KPCA(z, 4)
    with pytest.raises(ValueError, match="argument 'manifold'"):
        KPCA(z, 2, "sphere")
    with pytest.raises(ValueError, match="argument 'norm_bound'"):
        KPCA(z, 2, norm_bound=-1.0)
    with pytest.raises(ValueError, match="argument 'z'"):
        KPCA(np.ones((5, 4)), 2)


@pytest.mark.parametrize("manifold", MANIFOLDS)
def test_prirfed_non_private_reaches_the_top_subspace(manifold):
    z = make_pca_synthetic(n_agents=6, n_per_agent=30, dim=12, eigengap=0.3, rng=0,
                           shared_basis=True)
    # k = 5: the recipe's five structured singular values give a wide gap below the 5th
    prob = KPCA(z, 5, manifold, norm_bound=1.0)
    alg = PriRFed(DPRSGD(steps=2), n_sampled=None, step_size=10.0)
    res = alg.run(prob, 100, rng=0, eval_every=100)
    assert prob.distance_to_reference(res.x) < 1e-6
    assert abs(prob.cost(res.x) - prob.optimal_cost()) < 1e-10


def test_prirfed_private_run_with_explicit_sigma_and_clip():
    z = make_pca_synthetic(n_agents=6, n_per_agent=30, dim=12, eigengap=0.3, rng=1)
    prob = KPCA(z, 3, "grassmann", norm_bound=1.0)
    alg = PriRFed(DPRSGD(steps=1, sigma=0.05, clip=prob.gradient_bound), n_sampled=3,
                  step_size=0.3)
    res = alg.run(prob, 30, rng=0, eval_every=30)
    assert prob.manifold.belongs(res.x)
    assert res.privacy is not None


def test_decentralized_doadp_reaches_the_top_subspace():
    z = make_pca_synthetic(n_agents=8, n_per_agent=30, dim=10, eigengap=0.3, rng=2,
                           shared_basis=True)
    prob = KPCA(z, 5, "grassmann", norm_bound=1.0)
    alg = DOADP(Network(ring(8)), alpha=5.0, gamma=0.5, p=1.0, batch_size=None)
    res = alg.run(prob, 300, rng=0, x0=prob.manifold.random_point(1), eval_every=300)
    assert prob.distance_to_reference(res.x) < 1e-8
    assert res.history[-1]["consensus_error"] < 1e-12
    # the agents' subspaces agree with the output's
    assert np.max(principal_angles(res.state.x, res.x)) < 1e-6
