"""DO-ADP (spec 000) and the noisy DSGD baseline."""

import warnings

import numpy as np
import pytest
from decentralized_cases import logreg_problem

from rfed.algorithms.decentralized import DOADP, NoisyDSGD, sparsify
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.manifolds import Sphere
from rfed.networks.graphs import circulant, complete, ring
from rfed.networks.network import Network
from rfed.privacy import papers
from rfed.privacy.accountants import CertifiedAccountant
from rfed.problems.pca import SpherePCA


@pytest.fixture(scope="module")
def logreg():
    return logreg_problem(3200, 10, 8, 0, 0.1)


def test_full_participation_no_noise_reaches_the_scipy_optimum(logreg):
    # p = 1, k = d, noise off, full local gradients: decentralized momentum gradient descent
    alg = DOADP(Network(complete(8)), alpha=0.1, beta=0.15, gamma=1.0, p=1.0, batch_size=None)
    res = alg.run(logreg, 1200, rng=0, x0=np.zeros(10), eval_every=1200)
    ref = logreg.reference_point()  # scipy L-BFGS on the pooled objective
    assert np.linalg.norm(res.x - ref) < 1e-4
    # the one report shape: a run without noise certifies nothing
    assert res.privacy["private"] is False and res.privacy["epsilon_certified"] == np.inf


def test_mean_follows_the_momentum_exactly(logreg):
    # spec P21(a): xbar_{t+1} = xbar_t - (alpha/n) sum_i eta_i m_{i,t+1}, any p, k, noise
    alg = DOADP(Network(circulant(8, 2)), alpha=0.3, beta=0.5, gamma=0.2, p=0.7, k=3,
                sigma=0.5, grad_bound=1.0)
    state = alg.init(logreg, np.zeros(10), np.random.default_rng(1))
    for _ in range(20):
        new = alg.step(logreg, state)
        # active agents are those whose momentum received a gradient: m != beta m_old
        moved = ~np.all(np.isclose(new.m, alg.beta * state.m, rtol=0, atol=0), axis=1)
        expect = state.x.mean(0) - alg.alpha / 8 * new.m[moved].sum(0)
        np.testing.assert_allclose(new.x.mean(0), expect, atol=1e-12)
        state = new


def test_dense_full_participation_keeps_public_copies_equal(logreg):
    # spec P21(b): p = 1, k = d, sigma = 0 and xhat_0 = 0 give xhat_t = x_t for t >= 1
    alg = DOADP(Network(ring(8)), alpha=0.2, p=1.0, xhat_init="zero")
    state = alg.init(logreg, np.ones(10), np.random.default_rng(2))
    for _ in range(5):
        state = alg.step(logreg, state)
        np.testing.assert_allclose(state.xhat, state.x, atol=1e-14)


@pytest.mark.parametrize("p,ratio", [(1.0, 1.0), (0.8, 1.0), (1.0, 0.3), (0.8, 0.3)])
def test_traffic_scales_with_p_times_k_over_d(logreg, p, ratio):
    # Table I: an active agent sends k of d values to each of its 4 neighbours
    n, d, rounds = 8, 10, 300
    k = max(1, int(round(ratio * d)))
    alg = DOADP(Network(circulant(n, 2)), alpha=0.1, p=p, k=k)
    res = alg.run(logreg, rounds, rng=3, x0=np.zeros(d), eval_every=rounds,
                  with_reference=False)
    per_value = 8 if k == d else 12  # float64 value (+ int32 index when sparse)
    values = res.history[-1]["bytes_sent"] / per_value
    dense_full = rounds * n * 4 * d
    frac = values / dense_full
    # the number of activations is Binomial(rounds * n, p): 5-sigma band
    sd = np.sqrt(p * (1 - p) / (rounds * n)) * k / d
    assert abs(frac - p * k / d) <= 5 * sd + 1e-12
    assert res.history[-1]["messages"] == res.state.n_active_total * 4


def test_sparsifiers():
    rng = np.random.default_rng(0)
    c = rng.standard_normal((5, 20))
    s = sparsify(c, 6, "top_k")
    assert np.all(np.count_nonzero(s, axis=1) == 6)
    kept = np.abs(c) * (s != 0)
    dropped = np.abs(c) * (s == 0)
    assert np.all(kept.max(1) >= dropped.max(1))
    assert np.all(np.sum(s == c, axis=1) >= 6)
    # Lemma 7: ||S(x) - x||^2 <= (1 - k/d) ||x||^2
    assert np.all(np.sum((s - c) ** 2, 1) <= (1 - 6 / 20) * np.sum(c**2, 1) + 1e-12)
    r = sparsify(c, 6, "rand_k", rng)
    assert np.all(np.count_nonzero(r, axis=1) == 6)
    with pytest.raises(ValueError, match="rng"):
        sparsify(c, 6, "rand_k")


def test_top_k_breaks_ties_by_lowest_index():
    # reference: a stable sort by decreasing magnitude keeps the lowest indices among equals
    # (spec P18); integer data with many ties, rows with and without overflowing ties
    rng = np.random.default_rng(3)
    c = rng.integers(-3, 4, size=(200, 15)).astype(float)
    c[:50] = rng.standard_normal((50, 15))
    for k in (1, 4, 9):
        ref = np.zeros_like(c)
        order = np.argsort(-np.abs(c), axis=1, kind="stable")[:, :k]
        rows = np.arange(c.shape[0])[:, None]
        ref[rows, order] = c[rows, order]
        np.testing.assert_array_equal(sparsify(c, k, "top_k"), ref)


def test_noisy_dsgd_is_mixing_then_gradient_step(logreg):
    # DSGD: X_{t+1} = W X_t - alpha grad f_i(x_i), checked with full local gradients
    net = Network(ring(8))
    alg = NoisyDSGD(net, alpha=0.3, batch_size=None)
    rng = np.random.default_rng(4)
    state = alg.init(logreg, rng.standard_normal(10), rng)
    state = alg.step(logreg, state)
    for _ in range(3):
        new = alg.step(logreg, state)
        expect = net.weights @ state.x - 0.3 * logreg.local_grad(state.x)
        np.testing.assert_allclose(new.x, expect, atol=1e-13)
        state = new


def test_sphere_pca_converges_to_the_leading_eigenvector():
    z = make_pca_synthetic(n_agents=8, n_per_agent=50, dim=10, eigengap=0.5, rng=0,
                           shared_basis=True)
    prob = SpherePCA(z)
    lam = np.linalg.eigvalsh(z.reshape(-1, 10).T @ z.reshape(-1, 10) / 400)[-1]
    v = np.linalg.eigh(z.reshape(-1, 10).T @ z.reshape(-1, 10))[1][:, -1]
    for alg in (DOADP(Network(ring(8)), alpha=0.5 / lam, gamma=0.5, p=1.0, batch_size=None),
                DOADP(Network(ring(8)), alpha=0.5 / lam, gamma=0.5, p=0.8, k=3,
                      batch_size=None)):
        res = alg.run(prob, 300, rng=0, x0=prob.manifold.random_point(1), eval_every=300)
        assert min(np.linalg.norm(res.x - v), np.linalg.norm(res.x + v)) < 1e-8
        assert res.history[-1]["consensus_error"] < 1e-12


def test_privacy_report_paper_and_certified(logreg):
    q, d, rounds, p, k, g = int(logreg.n_max), 10, 40, 0.8, 3, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        sigma = papers.doadp_sigma(0.5, 1e-5, rounds, q, p, k, d, g).sigma
    alg = DOADP(Network(ring(8)), alpha=0.1, p=p, k=k, sigma=sigma, grad_bound=g)
    res = alg.run(logreg, rounds, rng=5, x0=np.zeros(d), eval_every=rounds)
    rep = res.privacy
    assert rep["paper"]["epsilon"] == pytest.approx(0.5, rel=1e-12)
    assert rep["paper"]["label"] == "paper's formula, not a guarantee"
    # certified: each agent's active rounds, one record of q, std sigma on sensitivity 2G
    account = res.state.ledger
    counts = account.ledger.rounds_participated
    eps = account.certified_epsilons(rep["delta"])
    for i in (0, 3):
        acc = CertifiedAccountant("rdp", "replace_one")
        acc.add_gaussian(sigma / (2 * g), sampling="without_replacement", dataset_size=q,
                         sample_size=1, count=int(counts[i]))
        assert eps[i] == pytest.approx(acc.epsilon(rep["delta"]), rel=1e-9)
    # the report's figure is the worst agent's (RDP is the only accountant for this sampling)
    assert rep["epsilon_certified"] == pytest.approx(eps.max(), rel=1e-9)
    assert rep["level"] == "record" and rep["neighboring"] == "replace_one"
    assert rep["delta"] == pytest.approx(min(1e-5, 1 / (10 * q)))
    assert "DO-ADP" in account.text()


def test_bad_arguments():
    net = Network(ring(8))
    with pytest.raises(ValueError, match="'p'"):
        DOADP(net, alpha=0.1, p=0.0)
    with pytest.raises(ValueError, match="'beta'"):
        DOADP(net, alpha=0.1, beta=1.0)
    prob = SpherePCA(np.random.default_rng(0).standard_normal((8, 5, 4)))
    with pytest.raises(ValueError, match="xhat_init"):
        DOADP(net, alpha=0.1, xhat_init="zero").init(prob, Sphere(3).random_point(0),
                                                     np.random.default_rng(0))
    with pytest.warns(UserWarning, match="p >= 1/2"):
        DOADP(net, alpha=0.1, p=0.3)
