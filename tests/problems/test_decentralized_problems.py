"""Problems of the decentralized papers: linear classifiers, the MLP stand-in, economic dispatch."""

import numpy as np
import pytest
import scipy.optimize as sopt
from sklearn.linear_model import LogisticRegression as SkLogistic

from rfed.datasets.synthetic import make_epsilon_like
from rfed.manifolds import Sphere
from rfed.problems.dispatch import QuadraticResourceAllocation, ieee14_problem
from rfed.problems.linear import (
    HingeSVM,
    L1Regularizer,
    L2Regularizer,
    LogisticRegression,
    split_evenly,
)
from rfed.problems.mlp import MLPClassifier, load_digits_split


@pytest.fixture(scope="module")
def data():
    x, y = make_epsilon_like(240, 8, 3)
    return x, y, *split_evenly(x, y, 4, np.random.default_rng(0))


def test_logistic_reference_matches_sklearn(data):
    x, y, f, lab = data
    mu = 0.05
    prob = LogisticRegression(f, lab, L2Regularizer(mu))
    # sklearn minimizes C sum log(1+e^-m) + ||w||^2/2, i.e. ours times N C with C = 1/(mu N)
    ref = SkLogistic(C=1 / (mu * len(y)), fit_intercept=False, tol=1e-12,
                     max_iter=10000).fit(x, y).coef_[0]
    np.testing.assert_allclose(prob.reference_point(), ref, atol=1e-6)
    assert prob.grad_norm(prob.reference_point()) < 1e-9


def test_logistic_per_sample_gradient_matches_finite_differences(data):
    _, _, f, lab = data
    prob = LogisticRegression(f, lab, L2Regularizer(0.1))
    x = np.random.default_rng(1).standard_normal((4, 8))
    batch = prob.batch(np.arange(4), np.tile(np.arange(5), (4, 1)))
    g = prob.sample_rgrad(x, batch)
    for i in range(8):
        e = np.zeros(8)
        e[i] = 1e-6
        fd = (prob.sample_loss(x + e, batch) - prob.sample_loss(x - e, batch)) / 2e-6
        np.testing.assert_allclose(g[..., i], fd, atol=1e-7)


@pytest.mark.parametrize("reg", [L2Regularizer(0.05), L1Regularizer(0.01)])
def test_svm_reference_is_optimal(data, reg):
    _, _, f, lab = data
    prob = HingeSVM(f, lab, reg)
    ref = prob.reference_point()
    best = prob.cost(ref)
    # an independent derivative-free solver from another start cannot do better
    res = sopt.minimize(prob.cost, ref + 0.05, method="Powell",
                        options={"xtol": 1e-10, "ftol": 1e-14, "maxiter": 50000})
    assert best <= res.fun + 1e-7
    rng = np.random.default_rng(2)
    for _ in range(100):
        assert best <= prob.cost(ref + 1e-3 * rng.standard_normal(8)) + 1e-12


def test_hinge_subgradient_away_from_the_kink(data):
    _, _, f, lab = data
    prob = HingeSVM(f, lab, L2Regularizer(0.0))
    x = np.full((4, 8), 0.3)
    batch = prob.batch(np.arange(4), np.tile(np.arange(6), (4, 1)))
    g = prob.sample_data_grad(x, batch)
    margins = batch["labels"] * np.einsum("abd,ad->ab", batch["features"], x)
    expect = np.where((margins < 1)[..., None], -batch["labels"][..., None] * batch["features"],
                      0.0)
    np.testing.assert_array_equal(g, expect)


@pytest.mark.parametrize("reg", [L2Regularizer(0.3), L1Regularizer(0.3)])
def test_dual_averaging_prox_matches_a_numerical_argmin(reg):
    z = np.array([0.5, -1.2, 0.1, 2.0])
    c, gam = 2.0, 1.5
    x = reg.dual_averaging_step(z, c, gam)

    def obj(v):
        return z @ v + c * reg.value(v) + gam * v @ v / 2

    for i in range(4):  # separable: check each coordinate on a fine grid
        grid = np.linspace(-3, 3, 600001)
        vals = z[i] * grid + c * reg.value(grid[:, None]) + gam * grid**2 / 2
        assert abs(grid[np.argmin(vals)] - x[i]) < 1e-4
    assert obj(x) <= obj(x + 1e-4)


def test_l1_prox_refuses_zero_gamma():
    with pytest.raises(ValueError, match="gamma"):
        L1Regularizer(0.1).dual_averaging_step(np.ones(3), 1.0, 0.0)


def test_linear_problem_bad_labels():
    with pytest.raises(ValueError, match="labels"):
        LogisticRegression(np.zeros((2, 3, 4)), np.zeros((2, 3)))


def test_mlp_per_sample_gradients_match_finite_differences_and_single_calls():
    x_tr, y_tr, _, _ = load_digits_split(rng=0)
    prob = MLPClassifier(x_tr[:60].reshape(3, 20, 64), y_tr[:60].reshape(3, 20), n_hidden=8)
    rng = np.random.default_rng(0)
    x = prob.initial_point(0) + 0.1 * rng.standard_normal((3, prob.n_params))
    batch = prob.batch(np.arange(3), np.tile(np.arange(4), (3, 1)))
    g = prob.sample_rgrad(x, batch)
    assert g.shape == (3, 4, prob.n_params)
    for i in rng.choice(prob.n_params, 12, replace=False):
        e = np.zeros(prob.n_params)
        e[i] = 1e-6
        fd = (prob.sample_loss(x + e, batch) - prob.sample_loss(x - e, batch)) / 2e-6
        np.testing.assert_allclose(g[..., i], fd, atol=1e-7)
    single = prob.sample_rgrad(x[1], {k: v[1, 2:3] for k, v in batch.items()})
    np.testing.assert_allclose(g[1, 2], single[0], atol=1e-12)


def _autograd_per_sample_grads(prob, x, batch):
    """Per-sample gradients by autograd's reverse mode: the summed loss differentiated with
    respect to one COPY of the parameter blocks per sample (the pre-issue-13 implementation)."""
    import autograd.numpy as anp
    from autograd import grad as agrad
    from autograd.scipy.special import logsumexp as alse

    def loss_sum(blocks, feats, onehot):
        w1, b1, w2, b2 = blocks
        hidden = anp.tanh(anp.einsum("...i,...ih->...h", feats, w1) + b1)
        logits = anp.einsum("...h,...hc->...c", hidden, w2) + b2
        return anp.sum(alse(logits, axis=-1) - anp.sum(logits * onehot, axis=-1))

    feats = batch["features"]
    lead = feats.shape[:-1]
    blocks = tuple(np.broadcast_to(np.expand_dims(blk, -1 - (blk.ndim - x.ndim + 1)),
                                   lead + blk.shape[x.ndim - 1:]).copy()
                   for blk in prob.unflatten(x))
    with np.errstate(over="ignore"):
        grads = agrad(loss_sum)(blocks, feats, batch["onehot"])
    return np.concatenate([g.reshape(lead + (-1,)) for g in grads], axis=-1)


@pytest.mark.parametrize("hidden", [4, 32])
def test_mlp_per_sample_gradients_have_autograds_bits(hidden):
    # the hand-written backward pass performs autograd's operations: equal bit for bit (signed
    # zeros included), for one point or a point per agent, one sample or many, up to weights
    # large enough that cosh overflows
    x_tr, y_tr, _, _ = load_digits_split(rng=0)
    n, q = 6, 40
    prob = MLPClassifier(x_tr[: n * q].reshape(n, q, 64), y_tr[: n * q].reshape(n, q),
                         n_hidden=hidden)
    rng = np.random.default_rng(3)
    for trial in range(12):
        x = prob.initial_point(rng) * (1.0, 5.0, 400.0)[trial % 3]
        b = 1 if trial % 2 else int(rng.integers(2, q + 1))
        if trial % 4 == 0:
            batch = {k: v[2, :b] for k, v in prob.data.items()}
            xs = x
        else:
            agents = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
            xs = x + rng.standard_normal((agents.size, prob.n_params))
            idx = np.stack([rng.choice(q, b, replace=False) for _ in agents])
            batch = prob.batch(agents, idx)
        got = prob.sample_rgrad(xs, batch)
        want = _autograd_per_sample_grads(prob, xs, batch)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), trial


def test_mlp_from_parts_pads_and_counts():
    x_tr, y_tr, _, _ = load_digits_split(rng=0)
    parts = [np.arange(10), np.arange(10, 40)]
    prob = MLPClassifier.from_parts(x_tr, y_tr, parts, n_hidden=4)
    assert prob.counts.tolist() == [10, 30] and prob.n_max == 30


def test_ieee14_optimum_matches_the_paper():
    prob = ieee14_problem()
    w = prob.optimum()
    np.testing.assert_allclose(w[prob.data.generators, 0], prob.data.w_star, atol=1e-3)
    assert abs(w.sum() - 361.0) < 1e-8
    assert prob.strong_convexity == pytest.approx(0.06)
    # fixed decisions at buses without a generator
    others = np.setdiff1d(np.arange(14), prob.data.generators)
    assert np.all(prob.primal(np.full((14, 1), 50.0))[others] == 0)


def test_resource_allocation_validation():
    with pytest.raises(ValueError, match="strongly convex"):
        QuadraticResourceAllocation([0.0, 1.0], [0, 0], [0, 0], [1, 1], [0.5, 0.5])
    with pytest.raises(ValueError, match="infeasible"):
        QuadraticResourceAllocation([1.0, 1.0], [0, 0], [0, 0], [1, 1], [2.0, 1.0])
    prob = ieee14_problem(Sphere(1))
    assert isinstance(prob.manifold, Sphere)


def test_package_exports_the_decentralized_problems():
    import rfed.problems as pkg
    from rfed.problems import dispatch, linear, mlp

    for mod in (linear, mlp, dispatch):
        for name in ("LogisticRegression", "HingeSVM", "L1Regularizer", "L2Regularizer",
                     "MLPClassifier", "QuadraticResourceAllocation", "ieee14_problem"):
            if hasattr(mod, name):
                assert getattr(pkg, name) is getattr(mod, name) and name in pkg.__all__
    assert {"SpherePCA", "AutogradProblem", "Problem"} <= set(pkg.__all__)
