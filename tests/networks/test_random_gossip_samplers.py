"""DP-DDA's node samplers on any graph: activation probabilities, matchings, O(n) on K_n.

Each sampler states every node's activation probability (:meth:`RandomGossip.
activation_probabilities`; ``iota`` is their maximum, the constant of DP-DDA's Theorem 1).
The statements are checked against independent derivations: exact enumeration of every draw
where it is finite, and simulation of the sampler elsewhere (per node, a 5-sigma binomial
band around the stated probability).
"""

from itertools import combinations
from math import comb

import numpy as np
import pytest

from rfed.networks import (
    RandomGossip,
    check_doubly_stochastic,
    check_symmetric,
    circulant,
    complete,
    complete_bipartite,
    erdos_renyi,
    graph_from_edges,
    random_regular,
    ring,
    star,
    two_hub_bipartite,
)
from rfed.networks.mixing import greedy_matching

GRAPHS = {
    "ring(12)": lambda: ring(12),
    "star(9)": lambda: star(9),
    "two_hub(10)": lambda: two_hub_bipartite(10),
    "circulant(30,2)": lambda: circulant(30, 2),
    "K_{3,7}": lambda: complete_bipartite(3, 7),
    "random 3-regular(20)": lambda: random_regular(20, 3, 5),
    "erdos_renyi(25)": lambda: erdos_renyi(25, 0.2, 2),
    "complete(11)": lambda: complete(11),
}


def _sequential_greedy(u, v, rank, n):
    taken, used = [], np.zeros(n, dtype=bool)
    for e in np.argsort(rank):
        if not used[u[e]] and not used[v[e]]:
            used[u[e]] = used[v[e]] = True
            taken.append(e)
    return np.sort(np.array(taken, dtype=np.int64))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_greedy_matching_in_rounds_is_the_sequential_greedy_pass(name):
    graph = GRAPHS[name]()
    edges = graph.edges()
    rng = np.random.default_rng(0)
    for _ in range(20):
        rank = rng.permutation(len(edges))
        got = greedy_matching(edges[:, 0], edges[:, 1], rank, graph.n_nodes)
        want = _sequential_greedy(edges[:, 0], edges[:, 1], rank, graph.n_nodes)
        assert np.array_equal(got, want)


def _simulate(gossip, rounds, seed=0):
    rng = np.random.default_rng(seed)
    counts = np.zeros(gossip.graph.n_nodes)
    for _ in range(rounds):
        counts += gossip._draw(rng)[0]   # the round's active set (W^(t) not built)
    return counts / rounds


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("mode, size", [("uniform", 0.3), ("maximal", 0.3), ("maximal", 1.0),
                                        ("edges", 3)])
def test_each_node_is_active_with_the_stated_probability(name, mode, size):
    graph = GRAPHS[name]()
    n = graph.n_nodes
    kw = ({"n_edges": size} if mode == "edges" else {"n_active": max(1, round(size * n))})
    gossip = RandomGossip(graph, mode=mode, **kw)
    p = gossip.activation_probabilities()
    assert gossip.iota == p.max()
    if mode != "edges":
        assert np.all(p == kw["n_active"] / n)
    rounds = 3000
    freq = _simulate(gossip, rounds)
    band = 5 * np.sqrt(p * (1 - p) / rounds) + 1e-12
    assert np.all(np.abs(freq - p) <= band), (freq, p)


@pytest.mark.parametrize("name", ["star(9)", "two_hub(10)", "K_{3,7}", "ring(12)"])
def test_edges_mode_activation_equals_the_enumeration_of_every_draw(name):
    graph = GRAPHS[name]()
    edges = graph.edges()
    k = 2
    touched = np.zeros(graph.n_nodes)
    subsets = list(combinations(range(len(edges)), k))
    for subset in subsets:
        touched[np.unique(edges[list(subset)])] += 1
    gossip = RandomGossip(graph, n_edges=k, mode="edges")
    np.testing.assert_allclose(gossip.activation_probabilities(), touched / len(subsets),
                               rtol=1e-12)


def test_edges_mode_closed_form_holds_for_large_graphs():
    # the product form C(m - d, k) / C(m, k) against exact integers, past the small-m branch
    graph = circulant(3000, 3)   # m = 9000 edges, degree 6
    gossip = RandomGossip(graph, n_edges=40, mode="edges")
    m, d = graph.n_edges, 6
    exact = 1 - comb(m - d, 40) / comb(m, 40)
    np.testing.assert_allclose(gossip.activation_probabilities(), exact, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("mode", ["uniform", "maximal"])
def test_rounds_are_matchings_of_graph_edges_and_maximal_where_promised(name, mode):
    graph = GRAPHS[name]()
    n = graph.n_nodes
    adj = graph.adjacency
    k = max(2, n // 2) if mode == "uniform" else n   # maximal with p = 1: every pair kept
    gossip = RandomGossip(graph, k, mode=mode)
    rng = np.random.default_rng(4)
    for _ in range(50):
        rnd = gossip.sample(rng)
        pairs = rnd.pairs
        if pairs.size:
            assert np.all(np.asarray(adj[pairs[:, 0], pairs[:, 1]]) == 1)   # graph edges
        assert np.unique(pairs).size == pairs.size               # pairwise disjoint
        assert rnd.active[pairs.ravel()].all()
        check_symmetric(check_doubly_stochastic(rnd.weights))
        matched = np.zeros(n, dtype=bool)
        matched[pairs.ravel()] = True
        # no edge left between two active nodes without a partner: a maximal matching of the
        # active set (uniform) or of the whole graph (maximal, p = 1)
        free = rnd.active & ~matched
        coo = adj.tocoo()
        assert not np.any(free[coo.row] & free[coo.col])
        if mode == "uniform":
            assert rnd.active.sum() == k


def test_uniform_on_the_complete_graph_keeps_the_former_draws():
    """The paper's sampler on K_n: the draws of earlier versions, bit for bit (so DP-DDA's
    default runs and pinned results are unchanged)."""
    n, k = 20, 6
    gossip = RandomGossip(complete(n), k)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        want = rng.permutation(rng.choice(n, size=k, replace=False)).reshape(-1, 2)
        rnd = gossip.sample(np.random.default_rng(seed))
        assert np.array_equal(rnd.pairs, want)
        assert np.array_equal(np.flatnonzero(rnd.active), np.sort(want.ravel()))


def test_uniform_pairs_on_the_complete_graph_are_a_uniform_matching():
    # every one of the C(6, 2) = 15 edges of K_6 in a 2-active round with probability 1/15
    gossip = RandomGossip(complete(6), 2)
    rng = np.random.default_rng(1)
    rounds = 15000
    counts = {}
    for _ in range(rounds):
        key = tuple(sorted(gossip.sample(rng).pairs[0]))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 15
    sd = np.sqrt(rounds * (1 / 15) * (14 / 15))
    assert all(abs(c - rounds / 15) < 5 * sd for c in counts.values())


def test_an_odd_number_of_active_nodes_leaves_one_alone():
    gossip = RandomGossip(complete(9), 5)
    rnd = gossip.sample(0)
    assert rnd.active.sum() == 5 and rnd.pairs.shape == (2, 2)


def test_the_complete_graph_is_never_listed():
    graph = complete(200_000)
    for mode, kw in (("uniform", {"n_active": 1000}), ("maximal", {"n_active": 1000}),
                     ("edges", {"n_edges": 50})):
        gossip = RandomGossip(graph, mode=mode, **kw)
        rnd = gossip.sample(3)
        assert rnd.active.sum() >= 1 and gossip.iota > 0
        pairs = rnd.pairs
        assert np.all(pairs[:, 0] != pairs[:, 1])
    assert "adjacency" not in vars(graph)   # its 4e10 arcs were never built


def test_edges_mode_decodes_the_complete_graphs_edges_in_edge_list_order():
    graph = complete(9)
    gossip = RandomGossip(graph, n_edges=3, mode="edges")
    idx = np.arange(graph.n_edges)
    assert np.array_equal(gossip._edge_pairs(idx), graph.edges())


def test_an_isolated_node_is_active_alone_at_the_stated_rate():
    graph = graph_from_edges(5, [(0, 1), (1, 2), (2, 3)])   # node 4 has no edge
    gossip = RandomGossip(graph, 2, mode="maximal")
    freq = _simulate(gossip, 6000, seed=2)
    assert abs(freq[4] - 0.4) < 5 * np.sqrt(0.24 / 6000)
