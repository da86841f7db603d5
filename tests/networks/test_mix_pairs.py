"""A matching round mixed from its pairs (``Communicator.mix_pairs``) against the CSR product of
its ``W`` (``Communicator.mix``): the same bits, message counts and bytes, and the same refusals."""

import numpy as np
import pytest

from rfed.networks import InProcessCommunicator, RandomGossip, complete, ring
from rfed.networks.comm import Communicator, _matching_weights


def _awkward_values(rng, n, dim):
    """Random values with signed zeros, subnormals (0.5 x rounds there), huge values, inf and
    nan: every case where a different summation would show in the bits."""
    v = rng.standard_normal((n, dim)) * 10.0 ** rng.integers(-5, 5, (n, dim))
    special = np.array([0.0, -0.0, 5e-324, -5e-324, 3e-308, -1.5e-323, 1.7e308, -1.7e308,
                        np.inf, -np.inf, np.nan])
    mask = rng.random((n, dim)) < 0.3
    v[mask] = rng.choice(special, size=int(mask.sum()))
    return v


def _bits(a):
    return np.ascontiguousarray(a).view(np.int64)


@pytest.mark.parametrize("graph, n_active", [(complete(20), 4), (complete(9), 8), (ring(12), 6),
                                             (complete(2), 2)], ids=["K20-4", "K9-8", "ring12-6",
                                                                     "K2-2"])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 2)], ids=str)
def test_mix_pairs_gives_the_csr_products_bits_counts_and_bytes(graph, n_active, shape):
    gossip = RandomGossip(graph, n_active)
    n = graph.n_nodes
    rng = np.random.default_rng(7)
    fast, general = InProcessCommunicator(n), InProcessCommunicator(n)
    paired = 0
    for _ in range(60):
        rnd = gossip.sample(rng)
        paired += rnd.pairs.size
        v = _awkward_values(rng, n, int(np.prod(shape, dtype=int))).reshape((n, *shape))
        got = fast.mix_pairs(rnd.pairs, v, senders=rnd.active)
        want = general.mix(rnd.weights, v, senders=rnd.active)
        assert got.shape == want.shape == v.shape and got.dtype == want.dtype
        assert np.array_equal(_bits(got), _bits(want))
    for name in ("messages", "bytes", "server_messages", "server_bytes", "calls"):
        assert getattr(fast.stats, name) == getattr(general.stats, name), name
    assert np.array_equal(fast.stats.messages_sent, general.stats.messages_sent)
    assert np.array_equal(fast.stats.bytes_sent, general.stats.bytes_sent)
    assert fast.stats.messages == paired   # one message per paired agent per round
    if graph.is_complete():  # every active node has a partner on a complete graph
        assert paired == 60 * n_active


def test_mix_pairs_with_declared_payload_and_no_senders():
    n = 10
    pairs = np.array([[3, 1], [0, 9]])
    v = _awkward_values(np.random.default_rng(0), n, 5)
    a, b = InProcessCommunicator(n), InProcessCommunicator(n)
    got = a.mix_pairs(pairs, v, payload_bytes=12)
    want = b.mix(_matching_weights(pairs, n), v, payload_bytes=12)
    assert np.array_equal(_bits(got), _bits(want))
    assert a.stats.bytes == b.stats.bytes == 4 * 12
    assert np.array_equal(a.stats.bytes_sent, b.stats.bytes_sent)
    empty = a.mix_pairs(np.zeros((0, 2), dtype=int), v)   # no pair: every agent keeps its value
    assert np.array_equal(_bits(empty), _bits(b.mix(_matching_weights(
        np.zeros((0, 2), dtype=int), n), v)))


def test_non_float64_values_take_the_csr_product():
    n = 6
    pairs = np.array([[0, 5], [2, 3]])
    v = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    got = InProcessCommunicator(n).mix_pairs(pairs, v)
    want = InProcessCommunicator(n).mix(_matching_weights(pairs, n), v)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_the_base_communicators_default_is_the_csr_product():
    class Recording(InProcessCommunicator):
        def mix(self, weights, values, **kwargs):
            self.seen = weights
            return super().mix(weights, values, **kwargs)

    comm = Recording(8)
    pairs = np.array([[6, 2], [1, 7]])
    v = _awkward_values(np.random.default_rng(1), 8, 3)
    got = Communicator.mix_pairs(comm, pairs, v)
    assert (comm.seen != _matching_weights(pairs, 8)).nnz == 0
    assert np.array_equal(_bits(got), _bits(InProcessCommunicator(8).mix_pairs(pairs, v)))


@pytest.mark.parametrize("pairs, message", [
    (np.array([[0, 1], [1, 2]]), "must be a matching.*agent 1 appears 2 times"),
    (np.array([[3, 3]]), "must be a matching.*agent 3 appears 2 times"),
    (np.array([[0, 8]]), r"has agents outside 0\.\.7"),
    (np.array([[-1, 2]]), r"has agents outside 0\.\.7"),
    (np.array([0, 1]), r"must be an integer array of shape \(k, 2\)"),
    (np.array([[0.0, 1.0]]), r"must be an integer array of shape \(k, 2\)"),
])
def test_bad_pairs_are_refused_naming_the_argument(pairs, message):
    comm = InProcessCommunicator(8)
    with pytest.raises(ValueError, match="argument 'pairs' " + message):
        comm.mix_pairs(pairs, np.zeros((8, 2)))
    with pytest.raises(ValueError, match="argument 'pairs' " + message):
        Communicator.mix_pairs(comm, pairs, np.zeros((8, 2)))


def test_a_silent_partner_is_refused_as_mix_refuses_it():
    n = 8
    pairs = np.array([[6, 2], [1, 4]])
    senders = np.ones(n, dtype=bool)
    senders[[4, 6]] = False   # rows 1 and 2 read silent agents: row 1 comes first
    v = np.zeros((n, 3))
    with pytest.raises(ValueError) as general:
        InProcessCommunicator(n).mix(_matching_weights(pairs, n), v, senders=senders)
    with pytest.raises(ValueError) as fast:
        InProcessCommunicator(n).mix_pairs(pairs, v, senders=senders)
    assert str(fast.value) == str(general.value) == (
        "mix: weights[1, 4] = 0.5 uses the value of agent 4, which does not send this round")
    comm = InProcessCommunicator(n)
    with pytest.raises(ValueError, match="argument 'values' must have a leading agent axis"):
        comm.mix_pairs(pairs, np.zeros((n - 1, 3)))
    assert comm.stats.messages == 0   # nothing is counted for a refused call


def test_gossip_round_builds_its_matrix_only_when_asked():
    gossip = RandomGossip(complete(10), 6)
    rnd = gossip.sample(0)
    assert rnd.matching and rnd._weights is None
    w = rnd.weights
    assert rnd.weights is w   # built once
    want = RandomGossip._sampled_graph_weights(rnd.pairs, 10)
    for name in ("data", "indices", "indptr"):
        assert np.array_equal(getattr(w, name), getattr(want, name))
    edges = RandomGossip(complete(6), n_edges=4, mode="edges")
    rng = np.random.default_rng(2)
    shared = [r for r in (edges.sample(rng) for _ in range(50)) if not r.matching]
    assert shared   # rounds whose edges share a node carry their Metropolis-Hastings W
    for r in shared:
        assert (r.weights != RandomGossip._sampled_graph_weights(r.pairs, 6)).nnz == 0
