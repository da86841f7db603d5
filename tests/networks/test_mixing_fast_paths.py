"""Fast paths of the mixing matrices: a frozen W's derived facts are computed once and never
outlive a change of W; a random matching's W is built in O(n); both with the general bits."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.manifolds import Euclidean, Sphere
from rfed.networks import (
    InProcessCommunicator,
    Network,
    RandomGossip,
    complete,
    freeze_weights,
    metropolis_hastings_weights,
    random_regular,
    riemannian_gossip,
    ring,
)
from rfed.networks.comm import weights_fact


def _weights(n=12, seed=0):
    return metropolis_hastings_weights(random_regular(n, 4, np.random.default_rng(seed)))


def test_frozen_weights_are_read_only_copies():
    w = _weights()
    frozen = freeze_weights(w)
    assert frozen is not w and frozen.has_sorted_indices
    assert (frozen != w).nnz == 0
    for a in (frozen.data, frozen.indices, frozen.indptr):
        assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        frozen.data[0] = 0.5
    w.data[0] = 0.25   # the caller's matrix is untouched and stays writable
    assert frozen.data[0] != 0.25


@pytest.mark.parametrize("manifold", [Euclidean(3), Sphere(3)], ids=str)
def test_gossip_with_frozen_weights_is_bit_identical(manifold):
    w = _weights()
    x = manifold.random_point(np.random.default_rng(1), 12)
    frozen = freeze_weights(w)
    for gamma in (1.0, 0.3):
        comm_a, comm_b = InProcessCommunicator(12), InProcessCommunicator(12)
        a = riemannian_gossip(manifold, x, w, gamma, comm=comm_a)
        for _ in range(3):   # the kept facts are reused
            b = riemannian_gossip(manifold, x, frozen, gamma, comm=comm_b)
        assert np.array_equal(a, b)
        assert np.array_equal(comm_a.stats.messages_sent * 3, comm_b.stats.messages_sent)
        assert comm_a.stats.bytes * 3 == comm_b.stats.bytes


def test_facts_are_computed_once_and_only_for_frozen_matrices():
    calls = []

    def count(m):
        calls.append(1)
        return m @ np.ones(m.shape[1])

    frozen = freeze_weights(_weights())
    first = weights_fact(frozen, "sums", count)
    assert weights_fact(frozen, "sums", count) is first and len(calls) == 1
    assert not first.flags.writeable
    plain = _weights()
    weights_fact(plain, "sums", count)
    weights_fact(plain, "sums", count)
    assert len(calls) == 3


def test_a_changed_frozen_matrix_is_checked_again():
    x = np.zeros((12, 3))
    frozen = freeze_weights(_weights())
    riemannian_gossip(Euclidean(3), x, frozen)          # facts kept: finite, row-stochastic
    frozen.data.flags.writeable = True                  # made writable: nothing kept is trusted
    frozen.data[0] = np.nan
    with pytest.raises(ValueError, match="'weights' has 1 non-finite entries"):
        riemannian_gossip(Euclidean(3), x, frozen)
    refrozen = freeze_weights(_weights())
    riemannian_gossip(Euclidean(3), x, refrozen)
    bad = np.array(refrozen.data)
    bad[0] += 0.5
    refrozen.data = bad                                  # a replaced array: checked again
    with pytest.raises(ValueError, match="not row-stochastic"):
        riemannian_gossip(Euclidean(3), x, refrozen)


def test_network_holds_a_frozen_matrix():
    w = _weights()
    net = Network(random_regular(12, 4, np.random.default_rng(0)), w)
    assert not net.weights.data.flags.writeable
    assert (net.weights != sp.csr_matrix(w)).nnz == 0


@pytest.mark.parametrize("graph, kwargs", [
    (complete(20), {"n_active": 4}),
    (complete(9), {"n_active": 8}),
    (ring(12), {"n_active": 6}),
    (complete(8), {"n_edges": 3, "mode": "edges"}),
], ids=["K20-4", "K9-8", "ring12-6", "K8-edges3"])
def test_disjoint_pairs_weights_equal_the_general_construction(graph, kwargs):
    """The O(n) matrix of a matching has the general Metropolis-Hastings path's CSR arrays."""
    gossip = RandomGossip(graph, **kwargs)
    rng = np.random.default_rng(3)
    disjoint = 0
    for _ in range(300):
        pairs = gossip._sample_pairs(rng)
        got = gossip._weights_from_pairs(pairs)
        want = RandomGossip._sampled_graph_weights(pairs, graph.n_nodes)
        for name in ("data", "indices", "indptr"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        disjoint += np.unique(pairs).size == pairs.size
    assert disjoint > 0   # the fast path was exercised (edges mode also draws shared nodes)


@pytest.mark.parametrize("bad, message", [
    ("abc", "must be a square matrix of numbers, got str"),
    ([[1.0, 2.0], [3.0]], "must be a square matrix of numbers, got list"),
    (None, r"must be a square matrix, got shape \(\)"),
    (np.ones(3), r"must be a square matrix, got shape \(3,\)"),
    (np.ones((2, 3)), r"must be a square matrix, got shape \(2, 3\)"),
])
def test_freeze_weights_refuses_what_is_not_a_square_matrix(bad, message):
    with pytest.raises(ValueError, match="argument 'W' " + message):
        freeze_weights(bad, "W")
