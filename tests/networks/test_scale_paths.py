"""What lets one process hold 10^5-10^6 agents: no n x n array where an algorithm does not need
one, and mixing products chosen once per frozen matrix (equal to the sparse product to
rounding; the sparse kernel called directly gives scipy's bits)."""

import numpy as np
import pytest
import scipy.sparse as sp

from rfed.manifolds import Euclidean
from rfed.networks import (
    InProcessCommunicator,
    Network,
    circulant,
    complete,
    erdos_renyi,
    freeze_weights,
    metropolis_hastings_weights,
    random_regular,
    riemannian_gossip,
    uniform_weights,
)
from rfed.networks import comm as comm_module
from rfed.networks.comm import csr_product, mix_product

U = 2.0 ** -53


def _bits(a):
    return np.ascontiguousarray(a).view(np.int64)


def _awkward(rng, n, k):
    v = rng.standard_normal((n, k)) * 10.0 ** rng.integers(-300, 300, (n, k))
    v[rng.random((n, k)) < 0.1] = 0.0
    v[rng.random((n, k)) < 0.05] = -0.0
    return v


@pytest.mark.parametrize("k", [1, 2, 7])
def test_csr_product_has_the_bits_of_scipys_operator(k):
    rng = np.random.default_rng(0)
    w = sp.random(300, 300, density=0.05, random_state=1, format="csr")
    w.data = rng.standard_normal(w.nnz)
    v = _awkward(rng, 300, k)
    with np.errstate(all="ignore"):
        assert np.array_equal(_bits(csr_product(w, v)), _bits(w @ v))


def _rounding_bound(w: sp.csr_matrix, v: np.ndarray) -> np.ndarray:
    """2 gamma_{n+1} sum_j |w_ij| |v_j|: how far two summation orders of a row may differ."""
    n = w.shape[1]
    gamma = (n + 1) * U / (1 - (n + 1) * U)
    return 2 * gamma * (abs(w) @ np.abs(v))


@pytest.mark.parametrize("make, kind", [
    (lambda n: uniform_weights(complete(n)), "complete"),
    (lambda n: metropolis_hastings_weights(complete(n)), "complete"),
    (lambda n: metropolis_hastings_weights(erdos_renyi(n, 0.5, 3)), "dense"),
    (lambda n: metropolis_hastings_weights(circulant(n, 3)), "csr"),
], ids=["K_n uniform", "K_n Metropolis", "G(n, 1/2)", "circulant"])
def test_mix_product_picks_its_form_once_and_stays_within_rounding(make, kind):
    n = 300
    w = freeze_weights(make(n))
    rng = np.random.default_rng(2)
    v = rng.standard_normal((n, 4))
    got = mix_product(w, v)
    want = csr_product(w, v)
    assert comm_module.weights_fact(w, "product_plan", None).kind == kind
    assert np.all(np.abs(got - want) <= _rounding_bound(w, v))
    if kind == "csr":
        assert np.array_equal(_bits(got), _bits(want))
    # a writable matrix is never planned: the sparse product's bits
    plain = sp.csr_matrix(make(n), copy=True)
    assert np.array_equal(_bits(mix_product(plain, v)), _bits(csr_product(plain, v)))


def test_small_dense_matrices_keep_the_sparse_products_bits():
    # below DENSE_MIX_MIN_AGENTS agents (the papers' 20-agent complete graphs) nothing changes
    n = comm_module.DENSE_MIX_MIN_AGENTS - 1
    w = freeze_weights(uniform_weights(complete(n)))
    v = np.random.default_rng(0).standard_normal((n, 3))
    assert np.array_equal(_bits(InProcessCommunicator(n).mix(w, v)), _bits(w @ v))


@pytest.mark.parametrize("gamma", [1.0, 0.3])
@pytest.mark.parametrize("make", [lambda n: metropolis_hastings_weights(random_regular(n, 4, 0)),
                                  lambda n: uniform_weights(circulant(n, 2))],
                         ids=["MH", "uniform"])
def test_euclidean_gossip_keeps_the_closed_forms_bits(make, gamma):
    """X + gamma (WX - diag(W 1) X), evaluated as before, with or without a communicator."""
    n = 200
    w = freeze_weights(make(n))
    x = np.random.default_rng(1).standard_normal((n, 3))
    wx = w @ x
    r = (w @ np.ones(n)).reshape(n, 1)
    want = gamma * wx + (1.0 - gamma * r) * x
    m = Euclidean(3)
    assert np.array_equal(_bits(riemannian_gossip(m, x, w, gamma)), _bits(want))
    c = InProcessCommunicator(n)
    assert np.array_equal(_bits(riemannian_gossip(m, x, w, gamma, comm=c)), _bits(want))
    assert c.stats.messages == w.nnz - n


def test_euclidean_gossip_still_refuses_bad_points_and_weights():
    n = 50
    w = freeze_weights(metropolis_hastings_weights(circulant(n, 2)))
    m = Euclidean(2)
    x = np.zeros((n, 2))
    x[7, 1] = np.nan
    with pytest.raises(ValueError, match="argument 'points' has 1 non-finite value"):
        riemannian_gossip(m, x, w)
    bad = sp.csr_matrix(w, copy=True)
    bad.data[3] += 0.1
    with pytest.raises(ValueError, match="not row-stochastic"):
        riemannian_gossip(m, np.zeros((n, 2)), freeze_weights(bad))


def test_complete_graph_answers_without_its_adjacency():
    g = complete(10**6)
    assert g.n_edges == 10**6 * (10**6 - 1) // 2 and g.max_degree == 10**6 - 1
    assert g.is_complete() and g.is_connected() and g.is_regular()
    assert np.array_equal(g.neighbors(3)[:4], [0, 1, 2, 4])
    net = Network(g)   # Metropolis-Hastings weights built on first use only
    assert "adjacency" not in vars(g) and "not built" in repr(net)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_complete_graph_adjacency_is_the_former_dense_construction(n):
    a = complete(n).adjacency
    want = sp.csr_matrix(np.ones((n, n)) - np.eye(n))
    for name in ("data", "indices", "indptr"):
        got_arr, want_arr = getattr(a, name), getattr(want, name)
        assert np.array_equal(got_arr, want_arr) and got_arr.dtype == want_arr.dtype


def test_default_weights_are_built_lazily_and_equal_the_eager_ones():
    g = random_regular(30, 3, 1)
    net = Network(g)
    assert net._weights is None
    w = net.weights
    assert net.weights is w and not w.data.flags.writeable
    assert (w != metropolis_hastings_weights(g)).nnz == 0
