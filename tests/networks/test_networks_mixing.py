"""Mixing matrices: stochasticity, refusals naming the fault, spectral constants vs closed forms."""

from math import comb

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from rfed.networks import (
    RandomGossip,
    check_column_stochastic,
    check_doubly_stochastic,
    check_nonnegative,
    check_row_stochastic,
    check_support,
    check_symmetric,
    circulant,
    column_stochastic_weights,
    complete,
    dda_beta,
    digraph_from_edges,
    doadp_constants,
    dpdl_bipartite,
    dpdl_constants,
    erdos_renyi,
    identity_gap_norm,
    ieee14_digraph,
    lambda2_modulus,
    laplacian_weights,
    lazy_weights,
    left_perron_vector,
    metropolis_hastings_weights,
    push_pull_constants,
    random_regular,
    right_perron_vector,
    ring,
    row_stochastic_weights,
    second_singular_value,
    spectral_gap,
    star,
    two_hub_weights,
    uniform_weights,
)
from rfed.networks import mixing as mixing_module


@pytest.mark.parametrize(
    "graph",
    [erdos_renyi(60, 0.1, 0), star(12), random_regular(40, 5, 1), ring(9)],
    ids=["er", "star", "regular", "ring"],
)
def test_metropolis_hastings_doubly_stochastic_symmetric(graph):
    w = metropolis_hastings_weights(graph)
    assert sp.isspmatrix_csr(w)
    check_doubly_stochastic(w)
    check_symmetric(w)
    check_nonnegative(w)
    check_support(w, graph)
    assert w.nnz <= graph.n_nodes + graph.n_arcs
    assert np.all(w.diagonal() > 0)


def test_metropolis_hastings_star_closed_form():
    n = 8
    w = metropolis_hastings_weights(star(n)).toarray()
    # centre degree n-1, leaves degree 1: every edge 1/n
    assert np.allclose(w[0, 1:], 1.0 / n) and np.allclose(w[1:, 0], 1.0 / n)
    assert np.isclose(w[0, 0], 1.0 / n)
    assert np.allclose(np.diag(w)[1:], 1.0 - 1.0 / n)


@pytest.mark.parametrize("n", [5, 12, 31])
def test_ring_mh_spectrum_closed_form(n):
    w = metropolis_hastings_weights(ring(n))
    assert np.allclose(w.data[w.data > 0], 1.0 / 3.0)
    expected = np.sort(1.0 / 3.0 + 2.0 / 3.0 * np.cos(2 * np.pi * np.arange(n) / n))
    np.testing.assert_allclose(np.linalg.eigvalsh(w.toarray()), expected, atol=1e-12)
    lam2 = np.max(np.abs(expected[:-1]))
    assert np.isclose(lambda2_modulus(w), lam2, atol=1e-12)
    assert np.isclose(spectral_gap(w), 1.0 - lam2, atol=1e-12)
    assert np.isclose(second_singular_value(w), lam2, atol=1e-12)


@pytest.mark.parametrize("n", [2, 7, 20])
def test_complete_uniform_gap_one(n):
    w = uniform_weights(complete(n))
    np.testing.assert_allclose(w.toarray(), np.full((n, n), 1.0 / n))
    assert np.isclose(spectral_gap(w), 1.0, atol=1e-12)
    assert np.isclose(dpdl_constants(w).rho, 0.0, atol=1e-20)


def test_laplacian_weights_doadp_constants():
    # DO-ADP's graph: n = 20 circulant, offsets 1..3, W = I - L/7 = uniform 1/7 [spec 000, 5.1]
    g = circulant(20, 3)
    w = laplacian_weights(g)
    np.testing.assert_allclose(w.toarray(), uniform_weights(g).toarray(), atol=1e-15)
    k = np.arange(20)
    lam = 1.0 - (6.0 - 2.0 * sum(np.cos(2 * np.pi * k * s / 20) for s in (1, 2, 3))) / 7.0
    lam2 = np.sort(np.abs(lam))[-2]
    c = doadp_constants(w)
    assert np.isclose(c.lambda_2, lam2, atol=1e-12)
    assert np.isclose(c.rho, 1.0 - lam2, atol=1e-12)
    assert np.isclose(c.phi, np.max(np.abs(1.0 - lam)), atol=1e-12)
    # the spec's rounded values
    assert round(c.lambda_2, 4) == 0.8137 and round(c.rho, 4) == 0.1863
    assert round(c.phi, 4) == 1.2311


def test_laplacian_weights_alpha_range():
    g = star(6)  # d_max = 5
    w = laplacian_weights(g, alpha=0.1)
    np.testing.assert_allclose(w.toarray(), np.eye(6) - 0.1 * g.laplacian().toarray())
    with pytest.raises(ValueError, match=r"alpha.*\(0, 1/d_max\)"):
        laplacian_weights(g, alpha=0.2)
    with pytest.raises(ValueError, match="undirected"):
        laplacian_weights(digraph_from_edges(3, [(0, 1), (1, 2), (2, 0)]))


def test_uniform_weights_refuses_irregular_graph():
    with pytest.raises(ValueError, match=r"not regular|regular graph: node \d+ has degree 1"):
        uniform_weights(star(5))


@pytest.mark.parametrize("n", [10, 20, 30])
def test_dpdl_constants_bipartite_and_ring(n):
    m = n // 2
    kb = dpdl_constants(uniform_weights(dpdl_bipartite(n)))
    # (A + I)/(m + 1) on K_{m,m}: eigenvalues 1, (1 - m)/(m + 1), 1/(m + 1)
    assert np.isclose(kb.rho, ((m - 1) / (m + 1)) ** 2, atol=1e-12)
    assert np.isclose(kb.w_min, 1.0 / (m + 1))
    r = dpdl_constants(uniform_weights(ring(n)))
    assert np.isclose(r.rho, (1 / 3 + 2 / 3 * np.cos(2 * np.pi / n)) ** 2, atol=1e-12)
    assert np.isclose(r.w_min, 1 / 3) and np.isclose(r.S0, 27.0 * n)
    # the spec's table (section 5.3), 3 decimals
    spec = {10: (0.444, 0.608, 0.762), 20: (0.669, 0.810, 0.936), 30: (0.766, 0.884, 0.971)}
    th = dpdl_constants(two_hub_weights(dpdl_bipartite(n, "two_hub")))
    np.testing.assert_allclose([kb.rho, th.rho, r.rho], spec[n], atol=6e-4)


def test_two_hub_weights_closed_form():
    n = 10
    w = two_hub_weights(dpdl_bipartite(n, "two_hub"))
    check_doubly_stochastic(w)
    check_symmetric(w)
    a = 0.11  # floor(100/9)/100
    d = w.toarray()
    assert np.isclose(d[5, 0], a) and np.isclose(d[5, 5], 1 - 2 * a)
    assert np.isclose(d[0, 0], 1 - 8 * a) and d[0, 1] == 0
    with pytest.raises(ValueError, match="two_hub_bipartite"):
        two_hub_weights(ring(10))


def test_stochasticity_violations_name_row_and_column():
    w = metropolis_hastings_weights(ring(6)).tolil()
    w[3, 3] += 0.25
    with pytest.raises(ValueError, match=r"row 3 sums to 1\.25"):
        check_doubly_stochastic(w)
    with pytest.raises(ValueError, match=r"column 3 sums to 1\.25"):
        check_column_stochastic(w)
    r = row_stochastic_weights(ieee14_digraph())
    check_row_stochastic(r)
    with pytest.raises(ValueError, match=r"not column-stochastic: column \d+ sums to"):
        check_column_stochastic(r)
    neg = np.array([[1.5, -0.5], [-0.5, 1.5]])
    with pytest.raises(ValueError, match=r"negative entry: W\[0, 1\] = -0\.5"):
        check_doubly_stochastic(neg)
    with pytest.raises(ValueError, match=r"not symmetric: W\[0, 1\] = 0\.7"):
        check_symmetric(np.array([[0.3, 0.7], [0.2, 0.8]]))


def test_check_support_names_offending_entry():
    g = ring(5)
    w = metropolis_hastings_weights(g).tolil()
    w[0, 2] = 0.1
    with pytest.raises(ValueError, match=r"W\[0, 2\].*node 0 does not receive from node 2"):
        check_support(w, g)


def test_ieee14_push_pull_matrices():
    g = ieee14_digraph()
    r = row_stochastic_weights(g)
    c = column_stochastic_weights(g)
    check_row_stochastic(r, "R")
    check_column_stochastic(c, "C")
    check_support(r, g)
    check_support(c, g)
    np.testing.assert_allclose(r.diagonal(), 1.0 / (1 + g.in_degree))
    np.testing.assert_allclose(c.diagonal(), 1.0 / (1 + g.out_degree))
    pi_r, pi_c = left_perron_vector(r), right_perron_vector(c)
    # independent: dominant eigenvectors from numpy's dense eig
    ev, vl = np.linalg.eig(r.toarray().T)
    ref_r = np.real(vl[:, np.argmax(np.real(ev))])
    ev, vr = np.linalg.eig(c.toarray())
    ref_c = np.real(vr[:, np.argmax(np.real(ev))])
    np.testing.assert_allclose(pi_r, ref_r / ref_r.sum(), atol=1e-12)
    np.testing.assert_allclose(pi_c, ref_c / ref_c.sum(), atol=1e-12)
    assert np.all(pi_r > 0) and np.all(pi_c > 0)
    k = push_pull_constants(r, c, gamma=0.8, phi=0.7)
    # spec 003 section 5.3 (the spec author's computation)
    assert round(k.rho_C, 3) == 0.804 and round(k.rho_R, 3) == 0.853
    assert round(k.pi_C_dot_pi_R, 4) == 0.0726
    assert round(k.q_C, 3) == 0.823
    # the lazy matrix moves eigenvalues by lambda -> 1 - phi + phi lambda
    lam = np.linalg.eigvals(r.toarray())
    lam_lazy = np.linalg.eigvals(lazy_weights(r, 0.7).toarray())
    np.testing.assert_allclose(
        np.sort_complex(lam_lazy), np.sort_complex(0.3 + 0.7 * lam), atol=1e-10
    )


def test_perron_refuses_graph_without_spanning_tree():
    # two sources, each keeping its own value: eigenvalue 1 is double
    g = digraph_from_edges(3, [(0, 2), (1, 2)])
    with pytest.raises(ValueError, match="not simple"):
        left_perron_vector(row_stochastic_weights(g))


def test_second_singular_value_nonsymmetric():
    n = 9
    p = np.roll(np.eye(n), 1, axis=1)
    w = (np.eye(n) + p) / 2.0  # doubly stochastic, normal: singular values |cos(pi k / n)|
    assert np.isclose(second_singular_value(w), np.cos(np.pi / n), atol=1e-12)
    r = row_stochastic_weights(ieee14_digraph())
    assert np.isclose(second_singular_value(r), scipy.linalg.svdvals(r.toarray())[1])
    assert np.isclose(identity_gap_norm(w), scipy.linalg.svdvals(np.eye(n) - w)[0])


def test_large_symmetric_spectrum_uses_lanczos(monkeypatch):
    # force the iterative path on a graph whose spectrum has a closed form
    monkeypatch.setattr(mixing_module, "DENSE_LIMIT", 100)
    n, h = 400, 40
    w = uniform_weights(circulant(n, h))
    k = np.arange(n)
    lam = (1 + 2 * sum(np.cos(2 * np.pi * k * s / n) for s in range(1, h + 1))) / (2 * h + 1)
    assert np.isclose(lambda2_modulus(w), np.sort(np.abs(lam))[-2], atol=1e-9)
    assert np.isclose(identity_gap_norm(w), np.max(np.abs(1 - lam)), atol=1e-9)


# ---------------------------------------------------------------------- DP-DDA random gossip
def test_random_gossip_matching_rounds():
    n, n_active = 20, 4
    gossip = RandomGossip(complete(n), n_active)
    rng = np.random.default_rng(0)
    counts = np.zeros(n)
    n_rounds = 3000
    for t in range(n_rounds):
        rd = gossip.sample(rng)
        assert rd.active.sum() == n_active  # exactly n * iota nodes (Definition 2)
        counts += rd.active
        if t < 50:
            w = check_symmetric(check_doubly_stochastic(rd.weights))
            inactive = np.flatnonzero(~rd.active)
            np.testing.assert_array_equal(w[inactive][:, inactive].toarray(), np.eye(inactive.size))
            np.testing.assert_allclose(w[rd.pairs[:, 0], rd.pairs[:, 1]], 0.5)
    iota = n_active / n
    assert gossip.iota == iota
    # every node active with probability iota: 5-sigma binomial bound per node
    assert np.all(np.abs(counts / n_rounds - iota) < 5 * np.sqrt(iota * (1 - iota) / n_rounds))


@pytest.mark.parametrize("k,expected", [(1, 0.97333), (2, 0.94591)])
def test_random_gossip_beta_closed_form(k, expected):
    n = 20
    gossip = RandomGossip(complete(n), 2 * k)
    assert np.isclose(gossip.beta(), np.sqrt(1 - k / (n - 1)), atol=1e-12)
    assert round(gossip.beta(), 5) == expected  # spec 002 section 5.3


def test_random_gossip_expected_w_monte_carlo():
    # E[W] (= E[W^T W] for disjoint pairs) against the closed form, entrywise 5-sigma
    n, k = 8, 2
    gossip = RandomGossip(complete(n), 2 * k)
    closed = gossip.expected_gram()
    rng = np.random.default_rng(1)
    n_samples = 4000
    acc = np.zeros((n, n))
    for _ in range(n_samples):
        acc += gossip.sample(rng).weights.toarray()
    p_pair = k / comb(n, 2)  # off-diagonal entry is 1/2 with this probability
    sd = 0.5 * np.sqrt(p_pair * (1 - p_pair) / n_samples)
    off = ~np.eye(n, dtype=bool)
    assert np.all(np.abs(acc[off] / n_samples - closed[off]) < 5 * sd)


def test_random_gossip_edges_mode_exact_and_monte_carlo():
    g = complete(20)
    gossip = RandomGossip(g, n_edges=2, mode="edges")
    exact_gram = gossip.expected_gram()  # enumerates the C(190, 2) edge pairs
    exact = dda_beta(exact_gram)
    assert exact == gossip.beta()
    assert round(exact, 5) == 0.94826  # spec 002 section 5.3 (edges may share a node)
    # iota: 1 - P(node in neither edge)
    assert np.isclose(gossip.iota, 1 - comb(171, 2) / comb(190, 2))
    rd = gossip.sample(3)
    check_symmetric(check_doubly_stochastic(rd.weights))
    # Monte Carlo E[W^T W] vs the enumeration, entrywise: entries lie in [0, 1], so the
    # standard deviation of one draw is at most sqrt(e (1 - e)) with e the exact mean
    n_samples = 4000
    est = gossip.expected_gram(0, n_samples=n_samples, max_enumeration=0)
    sd = np.sqrt(exact_gram * (1 - exact_gram) / n_samples)
    assert np.all(np.abs(est - exact_gram) <= 6 * sd + 1e-12)
    assert abs(dda_beta(est) - exact) < 2e-2


def test_random_gossip_on_sparse_supergraph():
    g = ring(12)
    gossip = RandomGossip(g, 4)
    rd = gossip.sample(0)
    # every sampled pair is an edge of the ring
    assert np.all(g.adjacency[rd.pairs[:, 0], rd.pairs[:, 1]] == 1)
    # a star has no matching of more than one edge: every node active, one pair (the hub's),
    # the ten others keep their own value
    rd = RandomGossip(star(12), 12).sample(0)
    assert rd.active.all() and rd.pairs.shape == (1, 2) and 0 in rd.pairs
    with pytest.raises(ValueError, match="'n_active' must be an int in 1..12"):
        RandomGossip(g, 13)
    with pytest.raises(ValueError, match="'mode' must be one of"):
        RandomGossip(g, 4, mode="rejection")
    with pytest.raises(ValueError, match="'rng' is needed"):
        gossip.beta()
