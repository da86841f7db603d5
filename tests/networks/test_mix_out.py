"""``out=`` of the mixing products (:meth:`Communicator.mix`, :meth:`Communicator.mix_pairs`,
:func:`mix_product`, :func:`csr_product`, :func:`segment_sum`, the Euclidean gossip): the
result written into a given array has the bits of a fresh result, whatever the array held, for
each product form (CSR, dense BLAS, complete graph); an array that is not a float64
C-contiguous array of the result's shape, or that shares memory with the values, is refused."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.manifolds import Euclidean
from rfed.networks import (
    InProcessCommunicator,
    Network,
    circulant,
    complete,
    freeze_weights,
    metropolis_hastings_weights,
    riemannian_gossip,
)
from rfed.networks.comm import csr_product, mix_product, segment_sum, weights_fact
from rfed.networks.gossip import mix_tangent


def _garbage(shape):
    """An array full of NaN: a product that read it instead of zeroing it would show."""
    return np.full(shape, np.nan)


@pytest.mark.parametrize("graph, kind", [(circulant(300, 2), "csr"),
                                         (complete(300), "complete"),
                                         (circulant(300, 100), "dense")])
def test_mix_into_an_array_has_the_bits_of_a_fresh_result(graph, kind):
    w = freeze_weights(metropolis_hastings_weights(graph))
    rng = np.random.default_rng(0)
    values = rng.standard_normal((300, 3, 2))
    fresh = InProcessCommunicator(300).mix(w, values)
    assert weights_fact(w, "product_plan", lambda _: None).kind == kind
    out = _garbage(values.shape)
    got = InProcessCommunicator(300).mix(w, values, out=out)
    assert got is out and out.tobytes() == fresh.tobytes()
    flat = values.reshape(300, -1)
    out = _garbage(flat.shape)
    assert mix_product(w, flat, out).tobytes() == mix_product(w, flat).tobytes()
    out = _garbage(flat.shape)
    assert csr_product(w, flat, out).tobytes() == csr_product(w, flat).tobytes()
    # the gossip step and the tangent mixing of the Euclidean closed form
    manifold = Euclidean(3, 2)
    for gamma in (1.0, 0.5):
        want = riemannian_gossip(manifold, values, w, gamma)
        out = _garbage(values.shape)
        assert riemannian_gossip(manifold, values, w, gamma, out=out) is out
        assert out.tobytes() == want.tobytes()
    out = _garbage(values.shape)
    want = mix_tangent(manifold, w, values, values, values)
    assert mix_tangent(manifold, w, values, values, values, out=out) is out
    assert out.tobytes() == want.tobytes()


def test_mix_pairs_and_segment_sum_into_an_array():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((10, 4))
    values[3] = -0.0   # the zero start turns -0.0 into 0.0, in place as in a fresh array
    pairs = np.array([[0, 5], [7, 2]])
    comm = InProcessCommunicator(10)
    out = _garbage(values.shape)
    assert comm.mix_pairs(pairs, values, out=out) is out
    assert out.tobytes() == comm.mix_pairs(pairs, values).tobytes()
    receivers = np.array([0, 0, 3, 9, 3])
    arcs = rng.standard_normal((5, 4))
    out = _garbage((10, 4))
    assert segment_sum(receivers, arcs, 10, out=out) is out
    assert out.tobytes() == segment_sum(receivers, arcs, 10).tobytes()


def test_a_bad_out_is_refused_naming_it():
    net = Network(circulant(20, 2))
    values = np.random.default_rng(2).standard_normal((20, 3))
    for bad in (np.empty((20, 2)), np.empty((20, 3), dtype=np.float32),
                np.empty((3, 20)).T, values):
        with pytest.raises(ValueError, match="argument 'out'"):
            net.mix(values, out=bad)
    with pytest.raises(ValueError, match="non-contiguous"):
        net.mix(values, out=np.empty((3, 20)).T)
    w = sp.csr_matrix(np.eye(20))
    with pytest.raises(ValueError, match="shares memory"):
        csr_product(w, values, values)
