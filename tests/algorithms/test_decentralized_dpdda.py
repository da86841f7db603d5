"""DP-DDA (spec 002): dual averaging with node subsampling."""

import warnings

import numpy as np
import pytest

from rfed.algorithms.decentralized import DPDDA
from rfed.datasets.synthetic import make_epsilon_like, make_pca_synthetic
from rfed.networks.graphs import complete
from rfed.networks.network import Network
from rfed.privacy import papers
from rfed.problems.linear import (
    HingeSVM,
    L1Regularizer,
    L2Regularizer,
    LogisticRegression,
    split_evenly,
)
from rfed.problems.pca import SpherePCA


@pytest.fixture(scope="module")
def data():
    x, y = make_epsilon_like(160, 6, 4)
    return split_evenly(x, y, 8, np.random.default_rng(0))


@pytest.mark.parametrize("make", [
    lambda f, y: HingeSVM(f, y, L2Regularizer(0.2)),
    lambda f, y: LogisticRegression(f, y, L2Regularizer(0.2)),
])
def test_noise_free_strongly_convex_converges_to_the_optimum(data, make):
    prob = make(*data)
    alg = DPDDA(Network(complete(8)), n_active=8, schedule="strongly_convex", gamma=0.0)
    # Cor. 3.2: E (1/n) sum ||xtilde_i - x*||^2 = O(log t / t): on average over runs the
    # distance keeps shrinking (one run's hinge subgradients make it non-monotone)
    runs = [alg.run(prob, 3000, rng=seed, x0=np.zeros(6), eval_every=1000) for seed in range(3)]
    dist = np.mean([res.metric("dist_to_ref") for res in runs], axis=0)
    res = runs[0]
    assert dist[-1] < 0.1 * dist[0]
    assert dist[-1] < dist[1]
    assert res.history[-1]["excess_risk"] < 2e-3


def test_noise_free_l1_svm_general_schedule(data):
    prob = HingeSVM(*data, L1Regularizer(0.01))
    alg = DPDDA(Network(complete(8)), n_active=4, schedule="general", gamma=0.2)
    res = alg.run(prob, 3000, rng=1, x0=np.zeros(6), eval_every=1500)
    risk = res.metric("excess_risk")
    # Cor. 3.4: O(1/sqrt(t)) for the general convex schedule
    assert risk[-1] < risk[1] < risk[0]
    assert risk[-1] < 0.02 * risk[0]


def test_exactly_n_iota_nodes_active_and_inactive_nodes_frozen(data):
    prob = HingeSVM(*data, L2Regularizer(0.1))
    alg = DPDDA(Network(complete(8)), n_active=4, gamma=1.0)
    state = alg.init(prob, np.zeros(6), np.random.default_rng(2))
    for _ in range(30):
        new = alg.step(prob, state)
        assert new.active.sum() == 4
        np.testing.assert_array_equal(new.z[~new.active], state.z[~new.active])
        np.testing.assert_array_equal(new.x[~new.active], state.x[~new.active])
        state = new
    # each active node sends its message to its one partner: 4 messages per round
    assert state.comm.stats.messages == 30 * 4


def test_full_participation_static_step_is_conventional_dda(data):
    # sigma = 0, a_t = 1: z^(t+1) = W^(t) (z^(t) + g^(t)) and x = prox(z) (spec 9, check 1)
    prob = HingeSVM(*data, L2Regularizer(0.1))
    alg = DPDDA(Network(complete(8)), n_active=8, schedule="general", gamma=2.0)
    rng = np.random.default_rng(3)
    state = alg.init(prob, np.zeros(6), rng)
    state = alg.step(prob, state)
    before = state
    after = alg.step(prob, before)
    # mixing keeps the sum: sum z^(t+1) = sum z^(t) + sum_i g_i
    g_sum = after.z.sum(0) - before.z.sum(0)
    assert np.linalg.norm(g_sum) <= 8 * prob.gradient_bound + 1e-12
    # prox of the mixed duals with A_{t+1} = t + 1, gamma_{t+1} = 2 sqrt(t + 1)
    t = after.t
    expect = -after.z / (0.1 * (t + 1) + 2.0 * np.sqrt(t + 1))
    np.testing.assert_allclose(after.x, expect, atol=1e-14)


def test_theorem_sigma_reproduces_the_spec_table():
    # spec 002 section 5.7: q = 20000, iota = 0.1, T = 600000, L = 1, delta0 = 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        s = [DPDDA.theorem_sigma(e, 0.01, 600000, 20000, 0.1, 1.0) for e in (0.2, 1.0)]
        s160 = DPDDA.theorem_sigma(0.2, 0.01, 600000, 20000, 0.1, 1.0, "corrected")
    np.testing.assert_allclose(s, [0.2522, 0.0504], atol=1e-4)
    assert s160 == pytest.approx(np.sqrt(5) * s[0])


def test_privacy_report_follows_theorem_one(data):
    prob = HingeSVM(*data, L2Regularizer(0.1))
    q, rounds = int(prob.n_max), 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", papers.PrivacyConditionWarning)
        sigma = DPDDA.theorem_sigma(0.8, 0.01, rounds, q, 0.5, 1.0)
    alg = DPDDA(Network(complete(8)), n_active=4, gamma=1.0, sigma=sigma, clip=1.0)
    res = alg.run(prob, rounds, rng=4, x0=np.zeros(6), eval_every=rounds)
    rep = res.privacy
    assert rep["paper"]["epsilon"] == pytest.approx(0.8, rel=1e-12)
    assert rep["paper"]["epsilon_corrected_160"] == pytest.approx(0.8 * np.sqrt(5), rel=1e-12)
    assert res.state.ledger.ledger.rounds_participated.sum() == rounds * 4
    assert rep["epsilon_certified"] > 0
    assert any("L = 1 (enforced; given by the user" in a for a in rep["assumptions"])


def test_bad_arguments():
    net = Network(complete(8))
    with pytest.raises(ValueError, match="n_active"):
        DPDDA(net, n_active=9)
    with pytest.raises(ValueError, match="n_active"):
        DPDDA(net, n_active=0, sampler="maximal")
    with pytest.raises(ValueError, match="'n_edges'"):
        DPDDA(net, sampler="edges")
    with pytest.raises(ValueError, match="argument 'sampler' must be"):
        DPDDA(net, n_active=4, sampler="rejection")
    with pytest.raises(ValueError, match="schedule"):
        DPDDA(net, n_active=4, schedule="fast")
    with pytest.raises(ValueError, match="gamma"):
        DPDDA(net, n_active=4, schedule="general", gamma=0.0)


def test_sphere_duals_in_the_anchor_tangent_space_approach_the_eigenvector():
    # spec 002 section 8: z in T_{x0}, x = Exp_{x0}(-z / gamma_t); no guarantee is claimed on a
    # curved space, but on PCA within the injectivity radius the iterates approach x*
    z = make_pca_synthetic(n_agents=8, n_per_agent=50, dim=10, eigengap=0.5, rng=0,
                           shared_basis=True)
    prob = SpherePCA(z)
    v = np.linalg.eigh(z.reshape(-1, 10).T @ z.reshape(-1, 10))[1][:, -1]
    x0 = v + 0.8 * np.random.default_rng(3).standard_normal(10)
    x0 /= np.linalg.norm(x0)
    alg = DPDDA(Network(complete(8)), n_active=8, schedule="general", gamma=0.1)
    res = alg.run(prob, 1500, rng=0, x0=x0, eval_every=500)
    dist = res.metric("dist_to_ref")
    assert np.all(np.diff(dist) < 0)
    assert dist[-1] < 0.12 * dist[0]
    assert prob.manifold.belongs(res.x)


# ---------------------------------------------------------------------- samplers on any graph
def _sparse_svm(n, seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n, 3, 4)) / 4
    labels = np.where(rng.random((n, 3)) < 0.5, -1.0, 1.0)
    return HingeSVM(feats, labels, L2Regularizer(0.1), feature_bound=1.0)


@pytest.mark.parametrize("sampler, kw", [("uniform", {"n_active": 100}),
                                         ("maximal", {"n_active": 100}),
                                         ("edges", {"n_edges": 60})])
def test_every_release_on_a_sparse_graph_is_charged_to_its_agent(monkeypatch, sampler, kw):
    """A 1000-node ring-like graph (where the former sampler gave up): each sampler runs, and
    the ledger charges each agent exactly the rounds in which it released a noisy
    subgradient."""
    from rfed.algorithms.decentralized import dpdda as dpdda_module
    from rfed.networks import circulant

    n = 1000
    prob = _sparse_svm(n)
    released = np.zeros(n, dtype=np.int64)
    real = dpdda_module.agent_draws

    def spy(rng, seed, agents, round, purpose, **kwargs):
        if purpose == "noise":
            np.add.at(released, np.asarray(agents), 1)
        return real(rng, seed, agents, round, purpose, **kwargs)

    monkeypatch.setattr(dpdda_module, "agent_draws", spy)
    alg = DPDDA(Network(circulant(n, 2)), sampler=sampler, gamma=1.0, noise_multiplier=1.0,
                **kw)
    state = alg.init(prob, np.zeros(4), np.random.default_rng(0))
    for _ in range(12):
        state = alg.step(prob, state)
    assert np.array_equal(state.ledger.counts, released)
    assert released.sum() > 0 and np.all(np.isfinite(state.z))
    expected = alg.gossip.activation_probabilities().mean() * n * 12
    assert abs(released.sum() - expected) < 6 * np.sqrt(expected)


def test_the_complete_graph_runs_in_linear_memory():
    """On K_n the paper's sampler draws pairs of nodes: neither the graph's n (n - 1) arcs nor
    a mixing matrix are built (a 10^5-agent complete graph would need 75 GiB of them)."""
    n = 100_000
    graph = complete(n)
    net = Network(graph)
    prob = _sparse_svm(n)
    alg = DPDDA(net, n_active=n // 10, gamma=1.0, noise_multiplier=1.0)
    state = alg.step(prob, alg.init(prob, np.zeros(4), np.random.default_rng(0)))
    assert state.active.sum() == n // 10
    assert "adjacency" not in vars(graph) and net._weights is None


def test_iota_of_each_sampler_enters_the_prox_and_the_papers_formula():
    from rfed.networks import star

    net = Network(star(10))
    uniform = DPDDA(net, n_active=4, gamma=1.0)
    assert uniform.iota == 0.4
    edges = DPDDA(net, sampler="edges", n_edges=2, gamma=1.0)
    assert edges.iota == 1.0   # the hub is in every edge
    prob = _sparse_svm(10)
    acc = DPDDA(net, sampler="maximal", n_active=3, gamma=1.0, sigma=1.0).init(
        prob, np.zeros(4), np.random.default_rng(0)).ledger
    assert acc.paper.params["iota"] == 0.3


@pytest.mark.parametrize("layout", [None, 1, 16])
def test_the_noise_comes_from_the_agents_stream_of_the_layout(layout):
    # one active node, no partner: z_i = a_1 (g_i + sigma xi_i) with g_i = -b a known (every
    # record of the agent is a = e_1, b = +1, hinge at x = 0), so xi_i is read back and must
    # be the agent's keyed draw under the layout asked for (default: 16 agents per stream)
    from rfed.randomness import AgentStreams
    n, q, d, sigma = 4, 3, 5, 0.7
    feats = np.zeros((n, q, d))
    feats[..., 0] = 1.0
    problem = HingeSVM(feats, np.ones((n, q)), L2Regularizer(1e-3), feature_bound=1.0)
    alg = DPDDA(Network(complete(n)), n_active=1, gamma=1.0, sigma=sigma,
                agents_per_stream=layout)
    state = alg.init(problem, np.zeros(d), np.random.default_rng(5))
    state = alg.step(problem, state)
    (i,) = np.flatnonzero(state.active)
    xi = (state.z[i] + np.eye(d)[0]) / sigma
    streams = AgentStreams(state.seed, agents_per_stream=16 if layout is None else layout)
    expected = streams.normal(np.array([i]), 0, "noise", (d,))[0]
    np.testing.assert_allclose(xi, expected, rtol=0, atol=1e-12)
    other = AgentStreams(state.seed, agents_per_stream=1 if layout in (None, 16) else 16)
    assert np.abs(xi - other.normal(np.array([i]), 0, "noise", (d,))[0]).max() > 1e-3
    with pytest.raises(ValueError, match="agents_per_stream"):
        DPDDA(Network(complete(n)), n_active=1, agents_per_stream=3)
