"""The communication interface: results, message and byte accounting, refusals."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.networks import (
    InProcessCommunicator,
    Network,
    arc_list,
    column_stochastic_weights,
    complete,
    dense_payload_bytes,
    digraph_from_edges,
    erdos_renyi,
    graph_from_edges,
    ieee14_digraph,
    metropolis_hastings_weights,
    reverse_arcs,
    ring,
    row_stochastic_weights,
    segment_sum,
    sparse_payload_bytes,
)


@pytest.fixture
def setup():
    g = erdos_renyi(30, 0.2, 4)
    w = metropolis_hastings_weights(g)
    x = np.random.default_rng(0).standard_normal((30, 4, 5))
    return g, w, x


def test_mix_equals_matrix_product_and_counts_dense_bytes(setup):
    g, w, x = setup
    comm = InProcessCommunicator(30)
    out = comm.mix(w, x)
    np.testing.assert_allclose(out, (w.toarray() @ x.reshape(30, -1)).reshape(x.shape), atol=1e-14)
    row_bytes = 4 * 5 * 8
    assert comm.stats.messages == g.n_arcs  # one message per arc, the diagonal is local
    assert comm.stats.bytes == g.n_arcs * row_bytes
    np.testing.assert_array_equal(comm.stats.messages_sent, g.out_degree)
    np.testing.assert_array_equal(comm.stats.bytes_sent, g.out_degree * row_bytes)
    assert comm.stats.calls == {"mix": 1}
    comm.stats.reset()
    assert comm.stats.bytes == 0 and comm.stats.messages_sent.sum() == 0


def test_topk_payload_bytes(setup):
    g, w, x = setup
    d, k = x[0].size, 3
    dense, sparse = InProcessCommunicator(30), InProcessCommunicator(30)
    dense.mix(w, x)
    sparse.mix(w, x, payload_bytes=sparse_payload_bytes(k))
    assert sparse_payload_bytes(k) == k * (8 + 4)
    assert dense_payload_bytes(x.shape[1:]) == d * 8
    assert sparse.stats.bytes == g.n_arcs * k * 12
    assert dense.stats.bytes / sparse.stats.bytes == pytest.approx(d * 8 / (12 * k))
    # per-sender payload sizes
    per = np.arange(30)
    c = InProcessCommunicator(30)
    c.mix(w, x, payload_bytes=per)
    assert c.stats.bytes == int(np.sum(g.out_degree * per))


def test_senders_mask_counts_only_senders_and_refuses_silent_use():
    g = ring(6)
    w = metropolis_hastings_weights(g)
    x = np.ones((6, 2))
    active = np.array([True, False, True, False, False, False])
    comm = InProcessCommunicator(6)
    got = comm.gather_from_neighbors(w, x, senders=active)
    assert set(got.senders.tolist()) == {0, 2}
    assert comm.stats.messages == 4  # each active ring node sends to its 2 neighbours
    with pytest.raises(ValueError, match=r"uses the value of agent 1, which does not send"):
        comm.mix(w, x, senders=active)


def test_gather_from_neighbors_rows_and_blocks(setup):
    g, w, x = setup
    comm = InProcessCommunicator(30)
    nb = comm.gather_from_neighbors(w, x)
    assert nb.values.shape == (g.n_arcs, 4, 5)
    assert np.all(np.diff(nb.receivers) >= 0)
    np.testing.assert_array_equal(nb.values, x[nb.senders])
    np.testing.assert_allclose(nb.weights, np.asarray(w[nb.receivers, nb.senders]).ravel())
    assert np.all(g.adjacency[nb.receivers, nb.senders] == 1)
    np.testing.assert_array_equal(nb.arc_ids, np.arange(g.n_arcs))
    blk = comm.gather_from_neighbors(w, x, receivers=(10, 20))
    sel = (nb.receivers >= 10) & (nb.receivers < 20)
    np.testing.assert_array_equal(blk.arc_ids, nb.arc_ids[sel])
    np.testing.assert_array_equal(blk.values, nb.values[sel])
    # segment_sum of the arcs plus the local diagonal term is W @ x
    mixed = segment_sum(nb.receivers, nb.values, 30, nb.weights)
    mixed += w.diagonal()[:, None, None] * x
    np.testing.assert_allclose(mixed, comm.mix(w, x), atol=1e-14)


def test_segment_sum_against_loop():
    rng = np.random.default_rng(2)
    rec = np.sort(rng.integers(0, 7, 40))
    vals = rng.standard_normal((40, 3))
    wts = rng.random(40)
    expected = np.zeros((7, 3))
    for e in range(40):
        expected[rec[e]] += wts[e] * vals[e]
    np.testing.assert_allclose(segment_sum(rec, vals, 7, wts), expected, atol=1e-14)


def test_publish_updates_sender_copies_and_counts():
    g = graph_from_edges(4, [(0, 1), (1, 2), (2, 3)])
    w = metropolis_hastings_weights(g)
    copies = np.zeros((4, 3))
    delta = np.arange(12.0).reshape(4, 3)
    comm = InProcessCommunicator(4)
    active = np.array([False, True, False, True])
    new = comm.publish(w, copies, delta, senders=active, payload_bytes=sparse_payload_bytes(1))
    np.testing.assert_array_equal(new[[1, 3]], delta[[1, 3]])
    np.testing.assert_array_equal(new[[0, 2]], 0.0)
    assert comm.stats.messages == 2 + 1  # node 1 has 2 neighbours, node 3 has 1
    assert comm.stats.bytes == 3 * 12
    # the copies are then mixed without further messages
    comm.mix(w, new, copies=True)
    assert comm.stats.messages == 3


def test_server_gather_and_broadcast():
    comm = InProcessCommunicator(5)
    x = np.arange(10.0).reshape(5, 2)
    np.testing.assert_array_equal(comm.gather(x, [4, 1]), x[[4, 1]])
    assert comm.stats.messages == 2 and comm.stats.bytes == 2 * 16
    np.testing.assert_array_equal(comm.stats.messages_sent, [0, 1, 0, 0, 1])
    out = comm.broadcast(np.ones(3), np.array([True, True, False, False, True]))
    assert out.shape == (3, 3)
    assert comm.stats.server_messages == 3 and comm.stats.server_bytes == 3 * 24
    with pytest.raises(ValueError, match="leading agent axis of length 5"):
        comm.gather(np.ones((4, 2)))
    with pytest.raises(ValueError, match="outside 0..4"):
        comm.gather(x, [5])


def test_network_defaults_and_refusals():
    net = Network(ring(8))
    assert sp.isspmatrix_csr(net.weights)
    np.testing.assert_allclose(
        net.weights.toarray(), metropolis_hastings_weights(ring(8)).toarray()
    )
    x = np.random.default_rng(0).standard_normal((8, 3))
    np.testing.assert_allclose(net.mix(x), net.weights @ x)
    assert net.stats.messages == 16
    # disconnected graph, named nodes
    with pytest.raises(ValueError, match=r"nodes \[2, 3\] are not reachable from node 0"):
        Network(graph_from_edges(4, [(0, 1), (2, 3)]))
    # non-stochastic weights, named row
    bad = metropolis_hastings_weights(ring(8)).tolil()
    bad[5, 5] = 0.0
    with pytest.raises(ValueError, match=r"row 5 sums to"):
        Network(ring(8), bad)
    # weights off the graph
    with pytest.raises(ValueError, match="does not receive from"):
        Network(ring(8), np.full((8, 8), 1 / 8))
    # a digraph needs the stochasticity stated; R and C pass their own checks
    g = ieee14_digraph()
    with pytest.raises(ValueError, match="'row' \\(pull, R\\) or 'column'"):
        Network(g, row_stochastic_weights(g))
    Network(g, row_stochastic_weights(g), stochastic="row")
    Network(g, column_stochastic_weights(g), stochastic="column")
    with pytest.raises(ValueError, match="not column-stochastic: column"):
        Network(g, row_stochastic_weights(g), stochastic="column")
    with pytest.raises(ValueError, match="not strongly connected"):
        Network(digraph_from_edges(3, [(0, 1), (1, 2)]), stochastic=None, weights=np.eye(3))
    assert Network(complete(4)).n_agents == 4


def test_send_along_arcs_delivers_one_value_per_arc():
    g = graph_from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)])
    net = Network(g)
    rec, snd, wts = arc_list(net.weights)
    assert rec.size == g.n_arcs and np.all(np.diff(rec) >= 0)
    np.testing.assert_allclose(wts, np.asarray(net.weights[rec, snd]).ravel())
    # arc value encodes (sender, receiver): each receiver must get exactly its own arcs
    vals = np.stack([snd, rec], axis=1).astype(float)
    got = net.send_along_arcs(vals)
    np.testing.assert_array_equal(got.values[:, 0], got.senders)
    np.testing.assert_array_equal(got.values[:, 1], got.receivers)
    assert net.stats.messages == g.n_arcs and net.stats.bytes == g.n_arcs * 16
    np.testing.assert_array_equal(net.stats.messages_sent, g.out_degree)
    with pytest.raises(ValueError, match="one row per arc"):
        net.send_along_arcs(vals[:-1])


def test_reverse_arcs_pairs_every_arc_with_its_reverse(setup):
    _, w, _ = setup
    rec, snd, wts = arc_list(w)
    rev = reverse_arcs(w)
    np.testing.assert_array_equal(rec[rev], snd)
    np.testing.assert_array_equal(snd[rev], rec)
    np.testing.assert_array_equal(rev[rev], np.arange(rec.size))  # an involution
    # a reply to each gathered value reaches the agent it came from
    comm = InProcessCommunicator(30)
    nb = comm.gather_from_neighbors(w, np.arange(30.0)[:, None])
    back = comm.send_along_arcs(w, np.stack([nb.values[:, 0], nb.receivers], axis=1)[rev])
    np.testing.assert_array_equal(back.values[:, 0], back.receivers)
    np.testing.assert_array_equal(back.values[:, 1], back.senders)
    directed = ieee14_digraph()
    with pytest.raises(ValueError, match="symmetric off-diagonal pattern"):
        reverse_arcs(directed)


def test_copies_are_not_counted(setup):
    _, w, x = setup
    comm = InProcessCommunicator(30)
    comm.gather_from_neighbors(w, x, copies=True)
    comm.mix(w, x, copies=True)
    assert comm.stats.messages == 0 and comm.stats.bytes == 0


def test_senders_mix_counts_arcs_of_a_gossip_round_and_ignores_stored_zeros():
    # a DP-DDA-like round: silent agents keep only their own (diagonal) value; a stored zero
    # off the diagonal reads nothing. Counts: one message per non-zero off-diagonal arc.
    n = 7
    w = sp.lil_matrix(np.eye(n))
    for i, j in ((1, 4), (2, 6)):
        w[i, i] = w[j, j] = w[i, j] = w[j, i] = 0.5
    w[0, 3] = 0.0   # stored zero: agent 3 is silent, yet nothing reads its value
    w = sp.csr_matrix(w)
    w[0, 3] = 0.0
    assert w.nnz == n + 4 + 1
    active = np.zeros(n, dtype=bool)
    active[[1, 4, 2, 6]] = True
    x = np.arange(2.0 * n).reshape(n, 2)
    comm = InProcessCommunicator(n)
    np.testing.assert_allclose(comm.mix(w, x, senders=active), w @ x)
    receivers, senders, _ = arc_list(w)
    assert comm.stats.messages == receivers.size == 4
    np.testing.assert_array_equal(comm.stats.messages_sent,
                                  np.bincount(senders, minlength=n))
    active[6] = False
    with pytest.raises(ValueError, match=r"weights\[2, 6\] = 0.5 uses the value of agent 6"):
        comm.mix(w, x, senders=active)
