"""Graph constructors (closed-form edge counts and degrees) and connectivity checks."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.networks import (
    Graph,
    circulant,
    complete,
    complete_bipartite,
    digraph_from_edges,
    dpdl_bipartite,
    erdos_renyi,
    exponential,
    graph_from_edges,
    ieee14_digraph,
    random_regular,
    ring,
    star,
    two_hub_bipartite,
)


def _assert_simple(g: Graph):
    a = g.adjacency
    assert sp.isspmatrix_csr(a)
    assert np.all(a.diagonal() == 0)
    assert np.all(a.data == 1.0)
    if not g.directed:
        assert (a != a.T).nnz == 0


@pytest.mark.parametrize("n", [3, 4, 7, 50])
def test_ring(n):
    g = ring(n)
    _assert_simple(g)
    assert g.n_edges == n
    assert np.all(g.degree == 2)
    assert set(g.neighbors(0).tolist()) == {1, n - 1}
    assert g.is_connected()


@pytest.mark.parametrize("n,k", [(20, 3), (9, 4), (50, 7)])
def test_circulant_khop(n, k):
    g = circulant(n, k)
    _assert_simple(g)
    assert np.all(g.degree == 2 * k)
    assert g.n_edges == n * k
    assert set(g.neighbors(0).tolist()) == {s % n for s in range(-k, k + 1) if s != 0}


def test_circulant_half_offset_and_equivalent_offsets():
    # offset n/2 links i to a single node: degree 2k - 1 (here K_8)
    g = circulant(8, 4)
    assert np.all(g.degree == 7) and g.n_edges == 28 and g.is_complete()
    # offsets s and n - s describe the same edges
    a = circulant(11, [1, 3]).adjacency
    b = circulant(11, [10, 8]).adjacency
    assert (a != b).nnz == 0
    with pytest.raises(ValueError, match="hops"):
        circulant(10, 6)
    with pytest.raises(ValueError, match="hops"):
        circulant(10, [0, 10])


@pytest.mark.parametrize("n", [2, 5, 30])
def test_complete(n):
    g = complete(n)
    _assert_simple(g)
    assert g.n_edges == n * (n - 1) // 2
    assert np.all(g.degree == n - 1)


def test_complete_bipartite_and_dpdl_readings():
    g = complete_bipartite(3, 5)
    _assert_simple(g)
    assert g.n_edges == 15
    assert g.degree.tolist() == [5] * 3 + [3] * 5
    dense = g.adjacency.toarray()
    assert np.all(dense[:3, :3] == 0) and np.all(dense[3:, 3:] == 0)
    k = dpdl_bipartite(10)
    assert k.n_edges == 25 and np.all(k.degree == 5)
    with pytest.raises(ValueError, match="even"):
        dpdl_bipartite(9)
    h = dpdl_bipartite(10, reading="two_hub")
    assert h.n_edges == 2 * 8
    assert h.degree.tolist() == [8, 8] + [2] * 8
    assert h.adjacency[0, 1] == 0
    assert (h.adjacency != two_hub_bipartite(10).adjacency).nnz == 0
    with pytest.raises(ValueError, match="reading"):
        dpdl_bipartite(10, reading="bogus")


def test_star():
    g = star(9)
    _assert_simple(g)
    assert g.n_edges == 8
    assert g.degree.tolist() == [8] + [1] * 8


@pytest.mark.parametrize("n", [3, 8, 16, 20, 33])
def test_exponential_directed_degrees(n):
    g = exponential(n, directed=True)
    _assert_simple(g)
    tau = int(np.floor(np.log2(n - 1))) + 1
    assert np.all(g.out_degree == tau) and np.all(g.in_degree == tau)
    assert g.n_edges == n * tau
    assert g.is_connected()


def test_exponential_undirected_degrees():
    # n = 16: offsets 1, 2, 4, 8 and 8 = n/2 -> degree 2*3 + 1
    assert np.all(exponential(16).degree == 7)
    # n = 20: offsets 1, 2, 4, 8, 16 and 16 = -4 -> distinct {1, 2, 4, 8} -> degree 8
    assert np.all(exponential(20).degree == 8)


def test_erdos_renyi_edge_count_and_seed():
    n, p = 200, 0.05
    g = erdos_renyi(n, p, 3, connected=False)
    _assert_simple(g)
    pairs = n * (n - 1) / 2
    mean, sd = pairs * p, np.sqrt(pairs * p * (1 - p))
    assert abs(g.n_edges - mean) < 5 * sd
    assert (g.adjacency != erdos_renyi(n, p, 3, connected=False).adjacency).nnz == 0
    # every pair is equally likely: the frequency of one fixed pair over draws
    rng = np.random.default_rng(0)
    hits = np.array(
        [erdos_renyi(6, 0.3, rng, connected=False).adjacency[1, 4] for _ in range(2000)]
    )
    assert abs(hits.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / 2000)


def test_erdos_renyi_connected_and_refusal():
    g = erdos_renyi(100, 0.08, 1, connected=True)
    assert g.is_connected()
    with pytest.raises(ValueError, match="no connected graph"):
        erdos_renyi(50, 0.0, 0, connected=True, max_tries=3)
    assert erdos_renyi(50, 0.0, 0, connected=False).n_edges == 0
    with pytest.raises(TypeError, match="rng"):
        erdos_renyi(10, 0.5, None)


@pytest.mark.parametrize("n,d", [(1000, 6), (30, 3), (12, 11), (50, 4)])
def test_random_regular(n, d):
    g = random_regular(n, d, 7)
    _assert_simple(g)
    assert np.all(g.degree == d)
    assert g.n_edges == n * d // 2
    assert g.is_connected()


def test_random_regular_refusals():
    with pytest.raises(ValueError, match="even"):
        random_regular(7, 3, 0)
    with pytest.raises(ValueError, match="d < n"):
        random_regular(5, 5, 0)


def test_edge_list_constructors():
    g = graph_from_edges(4, [(0, 1), (1, 0), (1, 2), (2, 3)])
    assert g.n_edges == 3 and not g.directed
    assert g.edges().tolist() == [[0, 1], [1, 2], [2, 3]]
    d = digraph_from_edges(3, [(0, 1), (1, 2)])
    assert d.directed and d.n_edges == 2
    # arc 0 -> 1: node 1 receives from node 0
    assert d.adjacency[1, 0] == 1 and d.adjacency[0, 1] == 0
    assert d.in_neighbors(1).tolist() == [0] and d.out_neighbors(0).tolist() == [1]
    assert d.edges().tolist() == [[0, 1], [1, 2]]
    with pytest.raises(ValueError, match="self-loop at node 2"):
        graph_from_edges(3, [(0, 1), (2, 2)])
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        graph_from_edges(3, [(0, 3)])


def test_laplacian_rows_sum_to_zero():
    g = erdos_renyi(40, 0.2, 2)
    lap = g.laplacian()
    assert sp.issparse(lap)
    np.testing.assert_array_equal(np.asarray(lap.sum(axis=1)).ravel(), 0.0)
    np.testing.assert_array_equal(lap.diagonal(), g.degree)


def test_ieee14_digraph_matches_spec():
    g = ieee14_digraph()
    _assert_simple(g)
    assert g.directed and g.n_nodes == 14 and g.n_edges == 35
    # spec 003 section 5.3 (own check of the spec's author), buses 1..14
    assert g.in_degree.tolist() == [3, 3, 4, 3, 4, 3, 2, 2, 2, 2, 2, 2, 2, 1]
    assert g.out_degree.tolist() == [2, 3, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 2, 2]
    # printed pair (13, 1): bus 13 pulls from bus 1 -> arc node 0 -> node 12
    assert g.adjacency[12, 0] == 1
    assert g.is_connected()
    g.check_connected()
    r = ieee14_digraph("reversed")
    assert r.in_degree.tolist() == g.out_degree.tolist()
    assert r.out_degree.tolist() == g.in_degree.tolist()


def test_disconnected_graph_names_cut_off_nodes():
    g = graph_from_edges(7, [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (6, 3)], name="two rings")
    assert not g.is_connected()
    with pytest.raises(ValueError, match=r"not connected: nodes \[3, 4, 5, 6\] are not reachable"):
        g.check_connected()
    assert g.unreachable_from(0).tolist() == [3, 4, 5, 6]


def test_not_strongly_connected_digraph():
    path = digraph_from_edges(3, [(0, 1), (1, 2)])
    assert not path.is_connected()
    with pytest.raises(ValueError, match=r"node 0 is not reachable from nodes \[1, 2\]"):
        path.check_connected()
    into0 = digraph_from_edges(3, [(1, 0), (2, 0), (1, 2)])
    with pytest.raises(ValueError, match=r"nodes \[1, 2\] are not reachable from node 0"):
        into0.check_connected()
    # path has a spanning tree rooted at 0; two sources have none; a cycle has every root
    assert path.spanning_tree_roots().tolist() == [0]
    assert digraph_from_edges(3, [(0, 2), (1, 2)]).spanning_tree_roots().tolist() == []
    assert digraph_from_edges(3, [(0, 1), (1, 2), (2, 0)]).spanning_tree_roots().tolist() == [
        0,
        1,
        2,
    ]


def test_from_adjacency_validation():
    a = np.array([[0, 1], [1, 0]])
    g = Graph.from_adjacency(a)
    assert not g.directed and g.n_edges == 1
    with pytest.raises(ValueError, match="self-loops at nodes"):
        Graph.from_adjacency(np.eye(3))
    with pytest.raises(ValueError, match="not symmetric"):
        Graph.from_adjacency(np.array([[0, 1], [0, 0]]), directed=False)
    with pytest.raises(ValueError, match="degree"):
        _ = digraph_from_edges(2, [(0, 1)]).degree
