"""The PriRFed problems: gradients, clipping fast paths, references, validation."""

import autograd.numpy as anp
import numpy as np
import pytest

from rfed.datasets.synthetic import make_pca_synthetic, make_wishart_spd
from rfed.manifolds import SPD, Euclidean, Hyperboloid, Sphere
from rfed.problems import (
    AutogradProblem,
    FrechetMean,
    HyperbolicPrediction,
    Problem,
    SPDFrechetMean,
    SpherePCA,
    kernel_weights,
    stack_agents,
)


def directional_check(problem: Problem, x, rng, agent=0, t=1e-6):
    """<grad f_i(x), u> against the central difference of f_i along the geodesic Exp_x(s u)."""
    man = problem.manifold
    u = man.random_tangent(x, rng)
    g = problem.local_grad(x, np.array([agent]))[0]
    plus = problem.local_cost(man.exp(x, t * u), np.array([agent]))[0]
    minus = problem.local_cost(man.exp(x, -t * u), np.array([agent]))[0]
    fd = (plus - minus) / (2 * t)
    assert np.isclose(man.inner(x, g, u), fd, rtol=1e-5, atol=1e-8)


@pytest.fixture(scope="module")
def pca():
    return SpherePCA(make_pca_synthetic(4, 30, 10, 0.1, 0))


def test_pca_gradient_matches_finite_differences(pca):
    rng = np.random.default_rng(1)
    x = pca.manifold.random_point(rng)
    for agent in range(pca.n_agents):
        directional_check(pca, x, rng, agent)


def test_pca_reference_is_top_eigenvector_of_pooled_second_moments(pca):
    z = pca.data["z"].reshape(-1, 10)
    lam = np.linalg.eigvalsh(np.einsum("ni,nj->ij", z, z) / z.shape[0])
    ref = pca.reference_point()
    assert np.isclose(pca.cost(ref), -lam[-1], rtol=1e-12)
    assert pca.grad_norm(ref) < 1e-12
    assert pca.distance_to_reference(-ref) < 1e-12


def test_pca_fast_clipped_sum_equals_generic(pca):
    rng = np.random.default_rng(2)
    x = pca.manifold.random_point(rng, 4)
    mask = rng.random((4, 30)) < 0.7
    for batch in ({"z": pca.data["z"]}, dict(pca.data)):  # with and without cached |z|^2
        for bound in (None, 0.05, 1e-4):
            fast = pca.clipped_grad_sum(x, batch, bound, mask)
            slow = Problem.clipped_grad_sum(pca, x, batch, bound, mask)
            np.testing.assert_allclose(fast[0], slow[0], atol=1e-14)
            np.testing.assert_array_equal(fast[1], slow[1])


def test_pca_gradient_bound_comes_from_the_public_norm_bound_and_dominates(pca):
    # updated (issue 8 defect 2): the bound was 2 max|z|^2 read from the private data; it now
    # comes only from a public assertion ||z|| <= B (B^2, the exact supremum under it)
    assert pca.gradient_bound is None and pca.smoothness is None
    bound = float(np.sqrt(np.max(np.sum(pca.data["z"] ** 2, -1)))) * 1.01  # a valid assertion
    public = SpherePCA(pca.data["z"], norm_bound=bound)
    rng = np.random.default_rng(3)
    x = public.manifold.random_point(rng, (4,))
    g = public.sample_rgrad(x, {"z": public.data["z"]})
    assert np.linalg.norm(g, axis=-1).max() <= public.gradient_bound == bound**2
    assert any("asserted by the user" in a for a in public.privacy_assumptions)


def test_pca_unequal_counts_ignore_padding():
    rng = np.random.default_rng(4)
    parts = [rng.standard_normal((n, 5)) for n in (3, 7, 5)]
    p = SpherePCA.from_arrays(parts)
    pooled = np.concatenate(parts)
    x = Sphere(4).random_point(rng)
    assert np.isclose(p.cost(x), -np.mean((pooled @ x) ** 2))
    assert np.array_equal(p.counts, [3, 7, 5])


def test_pca_validation():
    with pytest.raises(ValueError, match="'z'"):
        SpherePCA(np.ones((3, 4)))
    z = np.ones((2, 3, 4))
    z[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SpherePCA(z)


@pytest.fixture(scope="module")
def spd():
    pts = make_wishart_spd(300, 3, 0, radius=0.8)
    return SPDFrechetMean(pts.reshape(3, 100, 3, 3))


def test_spd_gradient_is_minus_two_log(spd):
    rng = np.random.default_rng(5)
    x = spd.manifold.random_point(rng)
    directional_check(spd, x, rng, agent=1)


def test_spd_reference_matches_pymanopt(spd):
    from rfed.manifolds.interop import solve_reference

    ref = spd.reference_point()
    assert spd.grad_norm(ref) < 1e-10
    pts = spd.pooled_points()
    chol = np.linalg.cholesky(pts)

    def cost(x):
        # dist^2(x, a) = sum log^2 eig(L^-1 x L^-T), a = L L^T (affine invariance)
        linv = np.linalg.inv(chol)
        w = anp.linalg.eigh(anp.matmul(anp.matmul(linv, x), anp.swapaxes(linv, -1, -2)))[0]
        return anp.mean(anp.sum(anp.log(w) ** 2, axis=-1))

    other = solve_reference(spd.manifold, cost, np.eye(3), method="steepest_descent",
                            min_gradient_norm=1e-9)
    assert spd.manifold.dist(ref, other) < 1e-6
    assert abs(spd.cost(other) - spd.cost(ref)) < 1e-10


def test_spd_validation():
    bad = np.tile(np.eye(2), (2, 3, 1, 1))
    bad[1, 2] = [[1.0, 2.0], [2.0, 1.0]]  # indefinite
    with pytest.raises(ValueError, match="points"):
        SPDFrechetMean(bad)
    with pytest.raises(ValueError, match="'points'"):
        SPDFrechetMean(np.ones((2, 2, 2)))


def test_frechet_mean_on_euclidean_is_arithmetic_mean():
    rng = np.random.default_rng(6)
    pts, counts = stack_agents([rng.standard_normal((n, 3)) for n in (4, 6)])
    p = FrechetMean(Euclidean(3), pts, counts)
    pooled = np.concatenate([pts[0, :4], pts[1, :6]])
    np.testing.assert_allclose(p.reference_point(), pooled.mean(0), atol=1e-12)


def _hyperbolic(seed=0, n_agents=3, per=15, kernel="paper"):
    rng = np.random.default_rng(seed)
    man = Hyperboloid(2)
    feats = rng.standard_normal((n_agents, per, 3))
    targets = man.random_point(rng, (n_agents, per))
    return HyperbolicPrediction(feats, targets, rng.standard_normal(3), kernel=kernel,
                                gamma=1e-2, bandwidth=1.0)


def test_kernel_weights_match_per_agent_solves():
    rng = np.random.default_rng(7)
    feats, counts = stack_agents([rng.standard_normal((n, 3)) for n in (5, 8)])
    q = rng.standard_normal(3)
    for kernel, scale in (("paper", (2 * 0.7) ** 2), ("conventional", 2 * 0.7**2)):
        alpha = kernel_weights(feats, q, counts, gamma=0.1, bandwidth=0.7, kernel=kernel)
        for i, n in enumerate(counts):
            w = feats[i, :n]
            gram = np.exp(-((w[:, None] - w[None]) ** 2).sum(-1) / scale)
            kw = np.exp(-((w - q) ** 2).sum(-1) / scale)
            np.testing.assert_allclose(alpha[i, :n], np.linalg.solve(gram + 0.1 * np.eye(n), kw))
            assert np.all(alpha[i, n:] == 0)


def test_hyperbolic_gradient_sign_corrected():
    p = _hyperbolic()
    rng = np.random.default_rng(8)
    x = p.manifold.random_point(rng)
    for agent in range(3):
        directional_check(p, x, rng, agent)


def test_hyperbolic_reference_is_stationary_and_minimal():
    p = _hyperbolic(seed=1)
    ref = p.reference_point()
    assert p.grad_norm(ref) < 1e-8
    rng = np.random.default_rng(9)
    near = p.manifold.exp(ref, 0.05 * p.manifold.random_tangent(np.tile(ref, (20, 1)), rng))
    assert np.all([p.cost(y) >= p.cost(ref) - 1e-14 for y in near])


def test_kernel_weights_protect_one_record_per_sample_loss():
    """Issue 8 defect 4. With weights='kernel' replacing record r changes only record r's
    per-sample gradient (the replace-one sensitivity 2 tau / b of a clipped mean holds); with the
    paper's kernel-ridge weights it changes the OTHER records' gradients too, so the problem
    declares coupled records and the trainer charges 2 tau per clipped mean."""
    from rfed.algorithms.federated import DPRSGD

    rng = np.random.default_rng(12)
    man = Hyperboloid(2)
    feats = rng.standard_normal((2, 12, 3))
    targets = man.random_point(rng, (2, 12))
    q = rng.standard_normal(3)
    feats2, targets2 = feats.copy(), targets.copy()
    feats2[1, 4] = q + 0.01  # record (1, 4) replaced by one close to the query
    targets2[1, 4] = man.random_point(rng)
    x = man.random_point(rng, 2)
    for weights in ("kernel", "kernel_ridge"):
        p, p2 = (HyperbolicPrediction(f, t, q, weights=weights, gamma=1e-2, bandwidth=1.0)
                 for f, t in ((feats, targets), (feats2, targets2)))
        g, g2 = (pp.sample_rgrad(x, pp.data) for pp in (p, p2))
        changed = np.linalg.norm(g - g2, axis=-1) > 1e-12
        plan = DPRSGD(steps=1, batch_size=6, clip=0.5).plan(p)
        if weights == "kernel":
            assert not p.coupled_records and p.gradient_bound == 4.0
            only_r = np.zeros((2, 12), dtype=bool)
            only_r[1, 4] = True
            np.testing.assert_array_equal(changed, only_r)
            np.testing.assert_allclose(plan.sensitivity, 2 * 0.5 / 6)
            assert plan.sampling == "without_replacement"
        else:
            assert p.coupled_records and p.gradient_bound is None
            assert changed[1].sum() == 12 and not changed[0].any()  # one agent, all its records
            np.testing.assert_allclose(plan.sensitivity, 2 * 0.5)
            assert plan.sampling == "none"


def test_hyperbolic_validation():
    rng = np.random.default_rng(10)
    feats = rng.standard_normal((2, 4, 3))
    with pytest.raises(ValueError, match="targets"):
        HyperbolicPrediction(feats, rng.standard_normal((2, 4, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="query"):
        HyperbolicPrediction(feats, Hyperboloid(2).random_point(rng, (2, 4)), np.zeros(2))
    with pytest.raises(ValueError, match="kernel"):
        HyperbolicPrediction(feats, Hyperboloid(2).random_point(rng, (2, 4)), np.zeros(3),
                             kernel="gauss")


def _pca_loss(x, batch):
    return -anp.einsum("...bd,...d->...b", batch["z"], x) ** 2


def test_autograd_problem_per_sample_gradients_match_hand_written(pca):
    auto = AutogradProblem(pca.manifold, _pca_loss, {"z": pca.data["z"]})
    rng = np.random.default_rng(11)
    x = pca.manifold.random_point(rng, 4)
    batch = {"z": pca.data["z"][:, :7]}
    np.testing.assert_allclose(auto.sample_rgrad(x, batch), pca.sample_rgrad(x, batch),
                               atol=1e-13)
    np.testing.assert_allclose(auto.sample_loss(x, batch), pca.sample_loss(x, batch))


def test_autograd_problem_reference_by_pymanopt_matches_closed_form(pca):
    auto = AutogradProblem(pca.manifold, _pca_loss, {"z": pca.data["z"]})
    assert auto.distance_to_reference(pca.reference_point()) < 1e-6 or (
        auto.manifold.dist(auto.reference_point(), -pca.reference_point()) < 1e-6
    )
    assert abs(auto.reference_cost() - pca.reference_cost()) < 1e-12


def test_autograd_problem_rejects_bad_loss():
    z = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="'loss'"):
        AutogradProblem(Sphere(3), lambda x, b: anp.sum(b["z"]), {"z": z})
    with pytest.raises(TypeError, match="'loss'"):
        AutogradProblem(Sphere(3), None, {"z": z})


def test_spd_generic_clipping_caps_norms():
    pts = make_wishart_spd(40, 2, 1)
    p = SPDFrechetMean(pts.reshape(2, 20, 2, 2))
    x = SPD(2).random_point(np.random.default_rng(12), 2)
    total, n_clipped = p.clipped_grad_sum(x, {"a": p.data["a"]}, 0.1)
    assert np.all(p.manifold.norm(x, total) <= 20 * 0.1 + 1e-12)
    norms = p.manifold.norm(x[:, None], p.sample_rgrad(x, {"a": p.data["a"]}))
    np.testing.assert_array_equal(n_clipped, np.sum(norms > 0.1, axis=1))


def test_spd_evaluation_matches_the_pencil_and_is_kept(spd, monkeypatch):
    """cost and gradient (evaluations by eigh) against the pencil arithmetic that the iterates
    use (SPD.log_dist), to 1e-13 relative; a point evaluated before (here, 5 points earlier)
    is answered from the kept evaluation without a factorization, and the answers are copies
    (a caller cannot corrupt the kept one)."""
    man = spd.manifold
    rng = np.random.default_rng(9)
    x = man.random_point(rng)
    log, d = man.log_dist(np.broadcast_to(x, (3, 1, 3, 3)), spd.data["a"])
    cost = float(np.sum(spd.agent_weights * np.mean(d**2, axis=1)))
    grad = np.sum(spd.agent_weights[:, None, None] * np.mean(-2.0 * log, axis=1), axis=0)
    np.testing.assert_allclose(spd.cost(x), cost, rtol=1e-13)
    np.testing.assert_allclose(spd.grad(x), grad, rtol=1e-12, atol=1e-13 * np.abs(grad).max())
    for _ in range(5):
        spd.grad_norm(man.random_point(rng))
    first = spd.local_grad(x)
    first[:] = 0.0
    calls = []
    monkeypatch.setattr(type(man), "log_dist_eigh",
                        lambda self, a, b: calls.append(1) or SPD.log_dist(self, a, b))
    again = spd.local_grad(x.copy())
    assert not calls
    assert np.any(again != 0.0)
    np.testing.assert_array_equal(spd.cost(x), spd.cost(x.copy()))
