"""DP-DGT (spec 003) on the IEEE 14-bus economic dispatch, and noisy DDGT."""

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPDGT, NoisyDDGT
from rfed.algorithms.private import certifies
from rfed.manifolds import Sphere
from rfed.networks.graphs import ieee14_digraph
from rfed.privacy import papers
from rfed.privacy.accountants import compose_epsilon
from rfed.privacy.mechanisms import LaplaceSchedule
from rfed.problems.dispatch import ieee14_problem

W_STAR = np.array([76.7398, 85.6530, 59.1311, 68.9863, 70.4898])  # the paper's CVX optimum


@pytest.fixture(scope="module")
def setup():
    return ieee14_problem(), ieee14_digraph("paper")


def test_noise_free_constant_step_reproduces_the_paper_optimum(setup):
    prob, graph = setup
    alg = DPDGT(graph, alpha0=0.015, q=1.0)  # no decay, no noise: exact dual tracking
    res = alg.run(prob, 1500, rng=0, eval_every=1500)
    np.testing.assert_allclose(res.x[prob.data.generators, 0], W_STAR, atol=1e-3)
    assert abs(res.x.sum() - 361.0) < 1e-6
    # the one report shape: a run without noise certifies nothing
    assert res.privacy["private"] is False and res.privacy["epsilon_certified"] == np.inf


def test_tracking_identity(setup):
    # eq. (14): 1^T (s_{k+1} - s_k) = -alpha_k (sum w_k - sum d) + gamma 1^T xi_k; with the
    # price noise zeta on and xi off, the tracker conserves the mismatch exactly (1^T C = 1^T)
    prob, graph = setup
    alg = DPDGT(graph, theta_xi=LaplaceSchedule(0.0, 0.995),
                theta_zeta=LaplaceSchedule(0.05, 0.995))
    state = alg.init(prob, np.zeros(1), np.random.default_rng(1))
    for _ in range(30):
        new = alg.step(prob, state)
        drift = -alg.alpha(state.t) * (state.w.sum() - prob.demand.sum())
        assert new.s.sum() - state.s.sum() == pytest.approx(drift, abs=1e-10)
        state = new


def test_error_grows_with_the_noise_level(setup):
    prob, graph = setup

    def mean_error(theta0, runs=6):
        errs = []
        for r in range(runs):
            alg = DPDGT(graph, theta_xi=LaplaceSchedule(theta0, 0.995),
                        theta_zeta=LaplaceSchedule(theta0, 0.995), track_privacy=False)
            errs.append(alg.run(prob, 600, rng=r, eval_every=600).history[-1]["sq_error"])
        return np.mean(errs)

    e0, e1, e2 = mean_error(0.0, 1), mean_error(0.02), mean_error(0.1)
    # spec 003 section 5.5 (2000 runs): 0.032, 0.350, 7.87
    assert e0 < e1 < e2
    assert e0 == pytest.approx(0.032, abs=2e-3)


def test_reported_epsilon_follows_eq_38(setup):
    prob, graph = setup
    eps = []
    for theta0 in (0.01, 0.02):
        alg = DPDGT(graph, theta_xi=LaplaceSchedule(theta0, 0.995),
                    theta_zeta=LaplaceSchedule(theta0, 0.995))
        rep = alg.run(prob, 200, rng=0, eval_every=200).privacy
        eps.append(rep["paper"]["epsilon"])
        assert rep["paper"]["epsilon_recursion"] > 0
        assert rep["epsilon_certified"] > 0
    # spec 003 section 5.4: eq. (38) = 493.27 delta / theta0 on the Sec. 6.1 setting
    assert eps[0] == pytest.approx(493.27 / 0.01, rel=1e-4)
    assert eps[1] == pytest.approx(eps[0] / 2, rel=1e-12)


def test_noisy_ddgt_is_worse_under_the_same_noise(setup):
    prob, graph = setup
    noise = LaplaceSchedule(0.01, 0.995)
    dgt = DPDGT(graph, alpha0=0.034, q=0.99, theta_xi=noise, theta_zeta=noise,
                track_privacy=False).run(prob, 600, rng=3, eval_every=600)
    ddgt = NoisyDDGT(graph, beta0=1.0, q=0.99, iota=0.034, theta_xi=noise,
                     theta_zeta=noise).run(prob, 600, rng=3, eval_every=600)
    assert dgt.history[-1]["sq_error"] < ddgt.history[-1]["sq_error"]


def test_refuses_a_non_euclidean_manifold(setup):
    _, graph = setup
    prob = ieee14_problem(Sphere(1))
    with pytest.raises(ValueError, match="only Euclidean space.*conservation"):
        DPDGT(graph).run(prob, 5, rng=0)
    with pytest.raises(ValueError, match="only Euclidean space"):
        NoisyDDGT(graph).init(prob, np.zeros(2), np.random.default_rng(0))


def test_refuses_bad_weights(setup):
    _, graph = setup
    with pytest.raises(ValueError, match="R"):
        DPDGT(graph, r=np.full((14, 14), 0.5))


def test_certified_figure_is_the_laplace_composition_of_recursion_32(setup):
    # the account equals composing the privacy module's events for the whole run (recursion
    # (32) for the sensitivities, theta_k / sensitivity_k per release): the smaller of the pure
    # basic composition and dp-accounting's RDP
    prob, graph = setup
    xi, zeta = LaplaceSchedule(0.01, 0.995), LaplaceSchedule(0.02, 0.99)
    alg = DPDGT(graph, theta_xi=xi, theta_zeta=zeta, adjacency_radius=0.5)
    res = alg.run(prob, 100, rng=0, eval_every=100)
    k = np.arange(100)
    args = (alg.alpha0 * alg.q ** k, xi.scale(k), zeta.scale(k), prob.strong_convexity,
            alg.gamma, alg.phi, 0.5)
    rdp = compose_epsilon(papers.dpdgt_laplace_events(*args), 1e-5, "rdp", "replace_one")
    pure = papers.dpdgt_epsilon_recursion(*args)
    assert res.privacy["epsilon_certified"] == pytest.approx(min(rdp, pure), rel=1e-9)


def test_report_names_the_cost_function_relation_and_its_radius(setup):
    # issue 8 defect 8: the figure is certified for the paper's relation (one agent's cost
    # function changes within a gradient-distance radius), not record-level replace-one; the
    # CLI's table reads the same figure as the library
    from rfed.cli import _find

    prob, graph = setup
    noise = LaplaceSchedule(0.01, 0.995)
    rep = DPDGT(graph, theta_xi=noise, theta_zeta=noise, adjacency_radius=1e-3).run(
        prob, 300, rng=0, eval_every=300).privacy
    assert rep["level"] == "dpdgt-cost-function"
    assert rep["adjacency_radius"] == 1e-3
    assert "cost function" in rep["neighboring"] and "1e-03" not in rep["neighboring"]
    assert "0.001" in rep["neighboring"]
    assert "record" not in rep["accountant"]
    assert _find(rep["certified"], "epsilon") == rep["epsilon_certified"]
    # linear in the radius (every sensitivity is): radius 1e-3 is 1/1000 of radius 1
    rep1 = DPDGT(graph, theta_xi=noise, theta_zeta=noise, adjacency_radius=1.0).run(
        prob, 300, rng=0, eval_every=300).privacy
    assert rep["paper"]["epsilon"] == pytest.approx(rep1["paper"]["epsilon"] / 1000, rel=1e-9)
    assert rep["epsilon_certified"] <= rep1["epsilon_certified"] / 1000 * (1 + 1e-9)


def test_noisy_ddgt_has_a_certified_account(setup):
    # the tracker's sensitivity never decays (>= 2 iota radius / mu): with decaying noise the
    # epsilon of noisy DDGT grows with the run, and is far above DP-DGT's under the same noise
    prob, graph = setup
    noise = LaplaceSchedule(0.01, 0.995)
    reps = [NoisyDDGT(graph, theta_xi=noise, theta_zeta=noise).run(
        prob, n, rng=0, eval_every=n).privacy for n in (50, 100)]
    assert 0 < reps[0]["epsilon_certified"] < reps[1]["epsilon_certified"]
    dgt = DPDGT(graph, theta_xi=noise, theta_zeta=noise).run(prob, 100, rng=0,
                                                             eval_every=100).privacy
    assert reps[1]["level"] == dgt["level"] == "dpdgt-cost-function"


def test_init_computes_no_spectral_constant(setup, monkeypatch):
    """The convergence-condition constant q_C is not used by the privacy bound: init, the
    rounds and the report never compute it (an n x n eigenvalue problem at scale); the
    paper's calibration, which warns with it, does."""
    from rfed.algorithms.decentralized import dpdgt as dpdgt_module

    prob, graph = setup
    calls = []
    real = dpdgt_module.push_pull_constants

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dpdgt_module, "push_pull_constants", counted)
    noise = {"theta_xi": LaplaceSchedule(0.01, 0.995), "theta_zeta": LaplaceSchedule(0.01, 0.995)}
    for track in (True, False):
        res = DPDGT(graph, track_privacy=track, **noise).run(prob, 5, rng=0, eval_every=5)
        # the one report shape: an untracked run reports no certified epsilon
        assert certifies(res.privacy) == track
    assert calls == []
    alg = DPDGT(graph, paper_epsilon=1.0, n_rounds=10)
    alg.init(prob, np.zeros(1), np.random.default_rng(0))
    alg.init(prob, np.zeros(1), np.random.default_rng(1))
    assert calls == [1]   # computed once, kept
    assert alg.constants().q_C == pytest.approx(0.823, abs=5e-4)


def test_sparse_constants_equal_the_dense_ones(monkeypatch):
    """Above DENSE_LIMIT nodes the spectral radii come from ARPACK on the sparse matrices with
    the rank-one deflation as an operator: the dense eigenvalues' values."""
    from rfed.networks import (
        column_stochastic_weights,
        digraph_from_edges,
        push_pull_constants,
        row_stochastic_weights,
    )
    from rfed.networks import mixing as mixing_module

    rng = np.random.default_rng(0)
    n = 400
    src = np.repeat(np.arange(n), 3)
    dst = rng.integers(0, n, src.size)
    keep = src != dst
    edges = np.concatenate([np.stack([src[keep], dst[keep]], 1),
                            np.stack([np.arange(n), (np.arange(n) + 1) % n], 1)])
    graph = digraph_from_edges(n, edges)
    r, c = row_stochastic_weights(graph), column_stochastic_weights(graph)
    dense = push_pull_constants(r, c, 0.8, 0.7)
    monkeypatch.setattr(mixing_module, "DENSE_LIMIT", 50)
    sparse = push_pull_constants(r, c, 0.8, 0.7)
    assert sparse.rho_R == pytest.approx(dense.rho_R, abs=1e-9)
    assert sparse.rho_C == pytest.approx(dense.rho_C, abs=1e-9)
    np.testing.assert_array_equal(sparse.pi_R, dense.pi_R)
