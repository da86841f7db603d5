"""The baselines the papers compare with: MUFFLIATO, DPDO, DP-CGA.

Each is checked against one step of its paper's update rule computed by hand in the test (on a
tiny instance, with numpy only), its privacy calibration against the closed forms, and on the
sphere (manifold form). Resume and audits: test_decentralized_resume_baselines.py and
tests/privacy/test_audit_baselines.py.
"""

import math
import pickle

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from decentralized_cases import logreg_problem

from rfed.algorithms.decentralized import DPCGA, DPDO, Muffliato
from rfed.algorithms.decentralized import base as contract
from rfed.algorithms.decentralized import dpdo as dpdo_module
from rfed.algorithms.decentralized.dpcga import cga_projection
from rfed.algorithms.decentralized.dpdo import paper_noise_scale
from rfed.algorithms.decentralized.muffliato import (
    MuffliatoPaperFormula,
    gossip_polynomials,
    muffliato_paper_z,
)
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.networks.graphs import complete, ring
from rfed.networks.network import Network
from rfed.privacy import PrivacyBudget
from rfed.problems.linear import L2Regularizer, LogisticRegression
from rfed.problems.pca import SpherePCA

# ---------------------------------------------------------------------- a tiny instance
# 3 agents, 2 records each, d = 2, logistic loss + (0.1/2)||x||^2, written out by hand below
FEATS = np.array([[[1.0, 0.0], [0.5, 1.0]],
                  [[0.0, 2.0], [-1.0, 0.5]],
                  [[2.0, 1.0], [0.3, -0.4]]])
LABELS = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
REG = 0.1
W3 = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])


def _tiny():
    return LogisticRegression(FEATS, LABELS, L2Regularizer(REG))


def _sample_grads(x):
    """Per-sample gradients of ``log(1 + exp(-b a.x)) + REG/2 ||x||^2`` at each agent's x:
    ``-b a / (1 + exp(b a.x)) + REG x``, shape (3, 2, 2)."""
    out = np.empty((3, 2, 2))
    for i in range(3):
        for j in range(2):
            a, b = FEATS[i, j], LABELS[i, j]
            out[i, j] = -b * a / (1.0 + math.exp(b * a @ x[i])) + REG * x[i]
    return out


def _clip(g, c):
    n = np.linalg.norm(g)
    return g if n <= c else g * (c / n)


def _clipped_means(x, c):
    g = _sample_grads(x)
    return np.array([np.mean([_clip(g[i, j], c) for j in range(2)], axis=0) for i in range(3)])


X0 = np.array([[0.2, -0.1], [0.0, 0.3], [-0.4, 0.1]])


# ---------------------------------------------------------------------- MUFFLIATO
@pytest.mark.parametrize("steps, accelerated", [(1, True), (3, True), (3, False)])
def test_muffliato_step_is_the_papers_update(steps, accelerated):
    """x^{t+1/2} = x - gamma g (clipped mean gradient); y^0 = x^{t+1/2}, y^1 = W y^0,
    y^{s+1} = omega W y^s + (1 - omega) y^{s-1} (Algorithm 1)."""
    prob, lr, clip, omega = _tiny(), 0.7, 0.4, 1.3
    alg = Muffliato(Network(complete(3), W3), lr=lr, batch_size=None, clip=clip,
                    gossip_steps=steps, accelerated=accelerated,
                    omega=omega if accelerated else None)
    state = alg.init(prob, np.zeros(2), np.random.default_rng(0))
    state.x = X0.copy()
    new = alg.step(prob, state)
    half = X0 - lr * _clipped_means(X0, clip)
    ys = [half, W3 @ half]
    w = omega if accelerated else 1.0
    while len(ys) <= steps:
        ys.append(w * (W3 @ ys[-1]) + (1 - w) * ys[-2])
    np.testing.assert_allclose(new.x, ys[steps], rtol=0, atol=1e-14)
    assert new.t == 1


def test_muffliato_noise_enters_the_gradient_before_the_step(monkeypatch):
    """With noise, x^{t+1/2} = x - gamma (sum_b clip(g_b) + N) / b: the released total is the
    only value carrying the data; the rest of the step is computed from it by hand."""
    prob, lr, clip = _tiny(), 0.5, 0.4
    released = []
    real = contract.gaussian_mechanism

    def spy(manifold, x, value, sigma, rng):
        out = real(manifold, x, value, sigma, rng)
        released.append((value.copy(), out.copy(), sigma))
        return out

    monkeypatch.setattr(contract, "gaussian_mechanism", spy)  # the private gradient's noise
    alg = Muffliato(Network(complete(3), W3), lr=lr, batch_size=None, clip=clip,
                    gossip_steps=1, noise_multiplier=2.0)
    state = alg.init(prob, np.zeros(2), np.random.default_rng(1))
    state.x = X0.copy()
    new = alg.step(prob, state)
    (value, noisy, sigma), = released
    np.testing.assert_allclose(value, 2 * _clipped_means(X0, clip), atol=1e-15)  # the sums
    assert sigma == 2.0 * 2 * clip             # z times the replace-one sensitivity 2C
    assert np.abs(noisy - value).max() > 0.1   # noise was added
    np.testing.assert_allclose(new.x, W3 @ (X0 - lr * noisy / 2), atol=1e-14)


def test_gossip_polynomials_and_pairwise_factor_by_hand():
    # the path 0 - 1 - 2 with W = [[1/2,1/2,0],[1/2,0,1/2],[0,1/2,1/2]]
    dense = np.array([[0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    w = sp.csr_matrix(dense)
    p = gossip_polynomials(w, 3, 1.5)
    np.testing.assert_allclose(p[0], np.eye(3))
    np.testing.assert_allclose(p[1], dense)
    np.testing.assert_allclose(p[2], 1.5 * dense @ dense - 0.5 * np.eye(3))
    # one gossip step (K = 1): only y^0 is sent, so S[u, v] = 1 iff u is a neighbour of v
    formula = MuffliatoPaperFormula.of(sp.csr_matrix(w), 1, 1.0, 1.0, 1e-5)
    np.testing.assert_array_equal(formula.factor(), [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    # K = 2 plain gossip: add sum_{w in N(v)} W_wu^2 / ||W_w||^2; ||W_0||^2 = ||W_2||^2 = 1/2,
    # ||W_1||^2 = 1/2: S[0, 2] = W_{1,0}^2 / (1/2) = 1/2; S[0, 1] = 1 + (W_00^2 + W_20^2) * 2
    s = MuffliatoPaperFormula.of(sp.csr_matrix(w), 2, 1.0, 1.0, 1e-5).factor()
    assert s[0, 2] == pytest.approx(0.5)
    assert s[0, 1] == pytest.approx(1 + (0.25 + 0.0) * 2)
    # the reported epsilon converts the worst pair's Renyi curve alpha rho to (eps, delta)
    z, rounds, delta = 3.0, 7, 1e-5
    rho = rounds * s.max() / (2 * z * z)
    rep = MuffliatoPaperFormula.of(sp.csr_matrix(w), 2, 1.0, z, delta).evaluate(rounds)
    best = scipy.optimize.minimize_scalar(
        lambda a: a * rho + math.log(1 / delta) / (a - 1), bounds=(1.0001, 1e4),
        method="bounded").fun
    assert rep["epsilon"] == pytest.approx(best, rel=1e-6)
    # and muffliato_paper_z inverts it
    assert muffliato_paper_z(w, 2, 1.0, rep["epsilon"], delta, rounds) == pytest.approx(z)


def test_muffliato_budget_and_paper_calibrations():
    prob = logreg_problem(240, 4, 6, 0, 0.1)
    alg = Muffliato(Network(ring(6)), lr=0.3, batch_size=8, clip=1.0, gossip_steps=2,
                    budget=PrivacyBudget(2.0, 1e-5), n_rounds=20)
    res = alg.run(prob, 20, rng=0, x0=np.zeros(4), eval_every=20)
    assert 0.9 * 2.0 <= res.privacy["epsilon_certified"] <= 2.0
    assert res.privacy["paper"]["label"] == "paper's formula, not a guarantee"
    with pytest.raises(RuntimeError, match="exceed the budget"):
        alg.step(prob, res.state)
    paper = Muffliato(Network(ring(6)), lr=0.3, batch_size=8, clip=1.0, gossip_steps=2,
                      paper_epsilon=5.0, n_rounds=20)
    rep = paper.run(prob, 20, rng=0, x0=np.zeros(4), eval_every=20).privacy
    assert rep["paper"]["epsilon"] == pytest.approx(5.0, rel=1e-9)
    assert rep["epsilon_certified"] > 0 and rep["calibration"] == "paper_epsilon"


def test_muffliato_refuses_bad_arguments():
    net = Network(ring(4))
    for kw, name in [({"lr": 0}, "lr"), ({"lr": 0.1, "gossip_steps": 0}, "gossip_steps"),
                     ({"lr": 0.1, "omega": 2.5}, "omega"), ({"lr": 0.1, "clip": 0}, "clip"),
                     ({"lr": 0.1, "batch_size": 0}, "batch_size")]:
        with pytest.raises(ValueError, match=name):
            Muffliato(net, **kw)
    with pytest.raises(TypeError, match="budget=PrivacyBudget"):
        Muffliato(net, lr=0.1, epsilon=1.0)


# ---------------------------------------------------------------------- DPDO
def test_dpdo_two_steps_are_the_papers_iteration():
    """w(k) = x(k) (no noise), v(k) = A w(k), x(k+1) = Proj_X[v(k) - c q^k grad f_i(v(k))]
    with the ball of radius R as X."""
    prob, c, q, clip, radius = _tiny(), 0.8, 0.9, 0.4, 0.25
    alg = DPDO(Network(complete(3), W3), lr=c, lr_decay=q, noise_decay=0.95, clip=clip,
               domain_radius=radius)
    state = alg.init(prob, np.zeros(2), np.random.default_rng(0))
    np.testing.assert_array_equal(state.x, np.zeros((3, 2)))   # w(0) = x_0 without noise
    state.x = X0.copy()

    def proj(p):
        return np.array([r * min(1.0, radius / np.linalg.norm(r)) for r in p])

    x = X0
    for k in range(2):
        state = alg.step(prob, state)
        v = W3 @ x
        x = proj(v - c * q ** k * _clipped_means(v, clip))
        np.testing.assert_allclose(state.z, v, atol=1e-15)
        np.testing.assert_allclose(state.x, x, atol=1e-15)
    assert np.abs(x).max() > 0.05 and np.linalg.norm(x, axis=1).max() <= radius + 1e-15


def test_dpdo_message_is_the_state_plus_laplace_noise(monkeypatch):
    prob, c, q, p = _tiny(), 0.8, 0.9, 0.95
    calls = []
    real = dpdo_module.laplace_mechanism

    def spy(value, scale, rng):
        out = real(value, scale, rng)
        calls.append((value.copy(), out.copy(), scale))
        return out

    monkeypatch.setattr(dpdo_module, "laplace_mechanism", spy)
    alg = DPDO(Network(complete(3), W3), lr=c, lr_decay=q, noise_decay=p, clip=0.4,
               noise_scale=0.3)
    state = alg.init(prob, np.zeros(2), np.random.default_rng(0))
    (value0, out0, scale0), = calls          # w(0) = x_0 + Lap(M_0), M_0 = c_M
    np.testing.assert_array_equal(value0, np.zeros((3, 2)))
    assert scale0 == pytest.approx(0.3)
    new = alg.step(prob, state)
    value1, out1, scale1 = calls[1]
    v = W3 @ out0
    np.testing.assert_allclose(new.z, v, atol=1e-15)
    np.testing.assert_allclose(value1, v - c * _clipped_means(v, 0.4), atol=1e-15)
    assert scale1 == pytest.approx(0.3 * p)   # M_1 = c_M p
    np.testing.assert_array_equal(new.x, out1)
    assert np.abs(out1 - value1).max() > 1e-3


def test_dpdo_certificates_and_calibrations_by_hand():
    prob = logreg_problem(240, 4, 6, 0, 0.1)           # 40 records per agent, d = 4
    c, q, p, clip, rounds = 0.5, 0.97, 0.99, 1.0, 25
    alg = DPDO(Network(ring(6)), lr=c, lr_decay=q, noise_decay=p, clip=clip,
               noise_scale=0.05)
    res = alg.run(prob, rounds, rng=0, x0=np.zeros(4), eval_every=rounds)
    k = np.arange(rounds)
    pure = np.sum(c * q ** k * 2 * clip * 2.0 / 40 / (0.05 * p ** (k + 1)))   # sqrt(d) = 2
    rep = res.privacy
    assert rep["epsilon_certified"] <= pure * (1 + 1e-12)
    acct = res.state.ledger
    assert acct.pure_epsilon(rounds, np.array([40])) == pytest.approx(pure, rel=1e-12)
    assert rep["epsilon_certified"] == pytest.approx(min(pure, acct.ledger.epsilon(acct.delta)))
    # the paper's function-level formula: 40 times the record-level pure sum here
    assert rep["paper"]["epsilon"] == pytest.approx(40 * pure, rel=1e-12)
    assert paper_noise_scale(2.0, c, q, p, clip, 4) == pytest.approx(2 * 2 * c / (2 * (p - q)))
    budget = DPDO(Network(ring(6)), lr=c, lr_decay=q, noise_decay=p, clip=clip,
                  budget=PrivacyBudget(1.0, 1e-5), n_rounds=rounds)
    out = budget.run(prob, rounds, rng=0, x0=np.zeros(4), eval_every=rounds).privacy
    assert 0.9 <= out["epsilon_certified"] <= 1.0
    paper = DPDO(Network(ring(6)), lr=c, lr_decay=q, noise_decay=p, clip=clip,
                 paper_epsilon=3.0, n_rounds=rounds)
    rep = paper.run(prob, rounds, rng=0, x0=np.zeros(4), eval_every=rounds).privacy
    assert rep["paper"]["epsilon_infinite_run"] == pytest.approx(3.0, rel=1e-12)
    assert rep["epsilon_paper"] == 3.0


def test_dpdo_refuses_bad_arguments():
    net = Network(ring(4))
    with pytest.raises(ValueError, match="lr_decay"):
        DPDO(net, lr=0.1, lr_decay=1.5)
    with pytest.raises(ValueError, match="at most one"):
        DPDO(net, lr=0.1, noise_scale=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="n_rounds"):
        DPDO(net, lr=0.1, budget=PrivacyBudget(1.0))
    with pytest.warns(UserWarning, match="q < p"), \
            pytest.raises(ValueError, match="lr_decay < noise_decay"):
        DPDO(net, lr=0.1, lr_decay=0.99, noise_decay=0.98, paper_epsilon=1.0, n_rounds=5)
    alg = DPDO(net, lr=0.1, domain_radius=1.0)
    with pytest.raises(ValueError, match="domain_radius"):
        alg.init(SpherePCA(np.ones((4, 3, 3))), np.eye(3)[0], np.random.default_rng(0))


# ---------------------------------------------------------------------- DP-CGA
def test_cga_projection_by_hand():
    # one neighbour: G = [(-1/2, 1/2)], g = (1/2, 0): P = 1/2, c = -1/4; the free minimum
    # v = 1/2 meets the margin, g~ = g + v G = (1/4, 1/4), orthogonal to the cross-gradient
    v = cga_projection(np.array([[0.5]]), np.array([-0.25]), 0.5)
    assert v == pytest.approx([0.5], abs=1e-9)
    # two neighbours, margin 0: G = [(1, 0), (0, 1)], g = (-2, 1): v = max(0, -G g) = (2, 0)
    v = cga_projection(np.eye(2), np.array([-2.0, 1.0]), 0.0)
    np.testing.assert_allclose(v, [2.0, 0.0], atol=1e-9)
    rng = np.random.default_rng(0)

    def objective(u, gram, cvec):
        return 0.5 * u @ gram @ u + cvec @ u

    for _ in range(20):   # against a generic bounded solver
        g_rows = rng.standard_normal((4, 6))
        own = rng.standard_normal(6)
        gram, cvec = g_rows @ g_rows.T, g_rows @ own
        ref = scipy.optimize.minimize(objective, np.ones(4), args=(gram, cvec),
                                      jac=lambda u, gram, cvec: gram @ u + cvec,
                                      bounds=[(0.5, None)] * 4, method="L-BFGS-B",
                                      options={"ftol": 1e-15, "gtol": 1e-12})
        got = cga_projection(gram, cvec, 0.5)
        assert np.all(got >= 0.5 - 1e-12)
        assert objective(got, gram, cvec) <= objective(ref.x, gram, cvec) + 1e-9


def test_dpcga_step_is_cga_algorithm_1():
    """Cross-gradients g^{jl} (model of j, data of l; batch = whole local set, clipped as a
    batch mean), weighted by pi, the QP aggregate, the Nesterov momentum step from the average."""
    prob, lr, mu, clip, margin = _tiny(), 0.3, 0.5, 0.6, 0.5
    alg = DPCGA(Network(complete(3), W3), lr=lr, momentum=mu, batch_size=2, clip=clip,
                margin=margin)
    state = alg.init(prob, np.zeros(2), np.random.default_rng(0))
    state.x = X0.copy()
    m0 = np.array([[0.1, 0.0], [0.0, -0.2], [0.05, 0.05]])
    state.v = m0.copy()
    new = alg.step(prob, state)
    expect_x = np.empty((3, 2))
    for j in range(3):
        def cross(l, j=j):   # batch mean of l's records at x_j, clipped to C
            g = [-LABELS[l, r] * FEATS[l, r] / (1 + math.exp(LABELS[l, r] * FEATS[l, r]
                                                             @ X0[j])) + REG * X0[j]
                 for r in range(2)]
            return _clip(np.mean(g, axis=0), clip)
        rows = np.array([W3[j, l] * cross(l) for l in range(3) if l != j])
        own = W3[j, j] * cross(j)
        v = cga_projection(rows @ rows.T, rows @ own, margin)
        agg = own + v @ rows
        mom = mu * m0[j] + agg
        expect_x[j] = W3[j] @ X0 - lr * (agg + mu * mom)
        np.testing.assert_allclose(new.gtilde[j], agg, atol=1e-13)
        np.testing.assert_allclose(new.v[j], mom, atol=1e-13)
    np.testing.assert_allclose(new.x, expect_x, atol=1e-13)


def test_dpcga_batch_level_noise_and_calibration(monkeypatch):
    prob = logreg_problem(240, 4, 6, 0, 0.1)
    sigmas = []
    real = contract.gaussian_mechanism

    def spy(manifold, x, value, sigma, rng):
        sigmas.append(sigma)
        return real(manifold, x, value, sigma, rng)

    monkeypatch.setattr(contract, "gaussian_mechanism", spy)
    alg = DPCGA(Network(ring(6)), lr=0.1, batch_size=8, clip=0.5,
                budget=PrivacyBudget(4.0, 1e-5), n_rounds=10)
    res = alg.run(prob, 10, rng=0, x0=np.zeros(4), eval_every=10)
    rep = res.privacy
    assert 0.9 * 4.0 <= rep["epsilon_certified"] <= 4.0
    # noise std = z * 2C on the clipped batch mean (batch-level sensitivity 2C)
    assert set(sigmas) == {rep["noise_multiplier"] * 2 * 0.5}
    assert rep["paper"] is None
    with pytest.raises(TypeError, match="unexpected"):
        DPCGA(Network(ring(6)), lr=0.1, paper_epsilon=1.0)


# ---------------------------------------------------------------------- manifold form
@pytest.mark.parametrize("make, tol", [
    (lambda net, s: Muffliato(net, lr=0.15 * s, batch_size=None, clip=1e6, gossip_steps=2),
     1e-10),
    (lambda net, s: DPDO(net, lr=0.15 * s, lr_decay=0.999, clip=1e6), 1e-10),
    # constant steps on a stochastic-free but heterogeneous aggregate: a slower approach
    (lambda net, s: DPCGA(net, lr=0.05 * s, momentum=0.3, batch_size=40, clip=1e6,
                          margin=0.0), 1e-3),
])
def test_baselines_on_the_sphere_find_the_leading_eigenvector(make, tol):
    """Exact local gradients (no noise, no clipping): each method ends at +-v_max on S^7."""
    z = make_pca_synthetic(n_agents=6, n_per_agent=40, dim=8, eigengap=0.5, rng=0,
                           shared_basis=True)
    prob = SpherePCA(z)
    cov = z.reshape(-1, 8).T @ z.reshape(-1, 8) / 240
    lam, vecs = np.linalg.eigh(cov)
    alg = make(Network(ring(6)), 1.0 / lam[-1])
    res = alg.run(prob, 200, rng=0, x0=prob.manifold.random_point(1), eval_every=200)
    np.testing.assert_allclose(np.linalg.norm(res.state.x, axis=1), 1.0, atol=1e-12)
    err = min(np.linalg.norm(res.x - vecs[:, -1]), np.linalg.norm(res.x + vecs[:, -1]))
    assert err < tol


@pytest.mark.parametrize("make", [
    lambda: Muffliato(Network(ring(6)), lr=0.3, batch_size=8, clip=1.0, gossip_steps=3,
                      noise_multiplier=1.0),
    lambda: DPDO(Network(ring(6)), lr=0.3, lr_decay=0.99, noise_decay=0.995, clip=1.0,
                 noise_multiplier=2.0),
    lambda: DPCGA(Network(ring(6)), lr=0.1, batch_size=8, clip=1.0, noise_multiplier=1.0),
])
def test_baseline_states_pickle_and_the_run_is_seeded(make):
    prob = logreg_problem(240, 4, 6, 0, 0.1)
    a = make().run(prob, 5, rng=3, x0=np.zeros(4), with_reference=False)
    b = make().run(prob, 5, rng=3, x0=np.zeros(4), with_reference=False)
    c = make().run(prob, 5, rng=4, x0=np.zeros(4), with_reference=False)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)
    again = pickle.loads(pickle.dumps(a.state))
    np.testing.assert_array_equal(again.x, a.state.x)
