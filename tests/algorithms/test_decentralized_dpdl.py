"""DPDL (spec 001) and the DP-DPSGD baseline."""

import numpy as np
import pytest
from decentralized_cases import logreg_problem

from rfed.algorithms.decentralized import DPDL, DPDPSGD, calibration_weights
from rfed.datasets.synthetic import make_pca_synthetic
from rfed.experiments.registry import run_experiment
from rfed.manifolds import Euclidean
from rfed.networks.comm import InProcessCommunicator, reverse_arcs
from rfed.networks.graphs import complete, dpdl_bipartite, ring
from rfed.networks.mixing import uniform_weights
from rfed.networks.network import Network
from rfed.problems.pca import SpherePCA

LOW, HIGH = 1 / (1 + np.e), np.e / (1 + np.e)  # 0.26894, 0.73106


def test_calibration_weights_bounds_and_endpoints():
    m = Euclidean(6)
    rng = np.random.default_rng(0)
    x = np.zeros((500, 6))
    a = rng.standard_normal((500, 6))
    b = rng.standard_normal((500, 6))
    s, cal = calibration_weights(m, x, a, b)
    assert np.all((cal >= LOW) & (cal <= HIGH))
    np.testing.assert_allclose(cal, 1 / (1 + np.exp(s)))
    # parallel -> S = 1 -> 0.2689; antiparallel -> 0.7311; orthogonal -> 0.5; zero -> 0.5
    e = np.eye(6)[:2]
    _, c = calibration_weights(m, np.zeros((4, 6)), np.stack([e[0], -e[0], e[1], e[0]]),
                               np.stack([e[0], e[0], e[0], 0 * e[0]]))
    np.testing.assert_allclose(c, [LOW, HIGH, 0.5, 0.5], atol=1e-15)


def test_cross_gradients_travel_back_to_the_model_owner():
    n = 6
    w = uniform_weights(ring(n))
    comm = InProcessCommunicator(n)
    nb = comm.gather_from_neighbors(w, np.zeros((n, 1)))
    # value computed by data owner i on the model of j encodes (i, j)
    vals = (10.0 * nb.receivers + nb.senders)[:, None] * np.ones((1, 3))
    back = comm.send_along_arcs(w, vals[reverse_arcs(w)])
    np.testing.assert_array_equal(back.values, (10.0 * back.senders + back.receivers)[:, None]
                                  * np.ones((1, 3)))
    np.testing.assert_array_equal(np.sort(back.values[:, 0]), np.sort(vals[:, 0]))
    # the probe (one float per arc), then one 3-vector per arc (not the whole mailbox)
    assert comm.stats.bytes == nb.receivers.size * 8 + nb.receivers.size * 3 * 8


@pytest.fixture(scope="module")
def logreg():
    return logreg_problem(400, 6, 6, 1, 0.05)


def test_mean_recursions_83_84(logreg):
    # vbar_t = beta vbar_{t-1} + mean_i gtilde^i_t ;  xbar_t = xbar_{t-1} - eta vbar_t
    alg = DPDL(Network(ring(6), uniform_weights(ring(6))), lr=0.2, beta=0.7, alpha=2.0,
               batch_size=8, clip=0.5, sigma=1.0)
    state = alg.init(logreg, np.zeros(6), np.random.default_rng(2))
    for _ in range(10):
        new = alg.step(logreg, state)
        vbar = alg.beta * state.v.mean(0) + new.gtilde.mean(0)
        np.testing.assert_allclose(new.v.mean(0), vbar, atol=1e-12)
        np.testing.assert_allclose(new.x.mean(0), state.x.mean(0) - alg.lr * vbar, atol=1e-12)
        assert np.all((new.last_cal >= LOW) & (new.last_cal <= HIGH))
        state = new


def test_traffic_is_four_dense_vectors_per_arc_and_round(logreg):
    graph = dpdl_bipartite(6)
    alg = DPDL(Network(graph, uniform_weights(graph)), lr=0.1, batch_size=4)
    res = alg.run(logreg, 5, rng=0, x0=np.zeros(6), eval_every=5, with_reference=False)
    arcs = graph.n_arcs
    assert res.history[-1]["bytes_sent"] == 5 * arcs * 4 * 6 * 8


def test_sphere_pca_converges_to_the_leading_eigenvector():
    z = make_pca_synthetic(n_agents=8, n_per_agent=50, dim=10, eigengap=0.5, rng=0,
                           shared_basis=True)
    prob = SpherePCA(z)
    cov = z.reshape(-1, 10).T @ z.reshape(-1, 10) / 400
    lam, vecs = np.linalg.eigh(cov)
    v = vecs[:, -1]
    for cls in (DPDL, DPDPSGD):
        kwargs = {"alpha": 1.5} if cls is DPDL else {}
        alg = cls(Network(ring(8)), lr=0.15 / lam[-1], beta=0.5, batch_size=50, clip=1e6,
                  **kwargs)
        res = alg.run(prob, 300, rng=0, x0=prob.manifold.random_point(1), eval_every=300)
        assert min(np.linalg.norm(res.x - v), np.linalg.norm(res.x + v)) < 1e-8


def test_refuses_zero_diagonal_and_oversized_batch(logreg):
    w = np.array([[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    with pytest.raises(ValueError, match="w_ii"):
        DPDL(Network(complete(3), w), lr=0.1)
    alg = DPDL(Network(ring(6)), lr=0.1, batch_size=10**6)
    with pytest.raises(ValueError, match="batch_size"):
        alg.init(logreg, np.zeros(6), np.random.default_rng(0))


def test_digits_dirichlet_dpdl_vs_dpdpsgd_same_epsilon():
    summary, ctx = run_experiment(
        "dpdl-digits", seed=0,
        overrides={"rounds": 12, "n_agents": 6, "topologies": ["bipartite"], "epsilons": [8.0],
                   "non_private": False, "hidden": 8, "eval_every": 12, "batch_size": 8,
                   "baselines": False})
    rows = ctx.tables["table1_test_accuracy"]
    assert set(ctx.privacy) == {"DPDL bipartite planned eps<=8",
                                "DP-DPSGD bipartite planned eps<=8"}
    assert {r["algorithm"] for r in rows} == {"DPDL", "DP-DPSGD"}
    for r in rows:
        # both calibrated to the same certified epsilon (bracket of relative width 1e-2 on the
        # noise multiplier, and epsilon falls about like 1/z): at most the target, within 3 %
        assert 8.0 * 0.97 <= r["epsilon_certified"] <= 8.0 + 1e-9
        assert r["privacy"] == f"certified eps={r['epsilon_certified']:.3g} (delta=1e-05)"
        assert 0 <= r["test_acc_agents_pct"] <= 100
    dpdl = next(r for r in rows if r["algorithm"] == "DPDL")
    assert LOW <= dpdl["cal_min_last"] <= dpdl["cal_max_last"] <= HIGH
    # DPDL composes N_i releases per round, so it needs more noise for the same epsilon
    sgd = next(r for r in rows if r["algorithm"] == "DP-DPSGD")
    assert dpdl["noise_multiplier"] > sgd["noise_multiplier"]


@pytest.mark.parametrize("cls", [DPDL, DPDPSGD])
@pytest.mark.parametrize("chunk", [1, 5, 17])
def test_chunks_of_pairs_give_bit_identical_runs(logreg, cls, chunk):
    """Bounded memory (issue 13): the per-sample gradients of the (model, data owner) pairs go
    ``max_chunk_pairs`` at a time; the run is the same bit for bit as one chunk holding all
    pairs (6 agents on a ring: 12 arcs + 6 self pairs = 18 pairs)."""

    def run(max_chunk_pairs):
        alg = cls(Network(ring(6), uniform_weights(ring(6))), lr=0.2, batch_size=8, clip=0.5,
                  noise_multiplier=1.0, max_chunk_pairs=max_chunk_pairs)
        return alg.run(logreg, 4, rng=3, x0=np.zeros(6), with_reference=False)

    whole, chunked = run(10_000), run(chunk)
    np.testing.assert_array_equal(chunked.state.x, whole.state.x)
    np.testing.assert_array_equal(chunked.state.v, whole.state.v)
    assert chunked.privacy == whole.privacy
    assert np.ptp(whole.state.x, axis=0).max() > 1e-3   # the agents moved apart: not trivial


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_refuses_bad_chunk_size(bad):
    with pytest.raises(ValueError, match="max_chunk_pairs"):
        DPDL(Network(ring(6), uniform_weights(ring(6))), lr=0.1, max_chunk_pairs=bad)


def _softmax_case(dtype=np.float64, n_agents=6, per=40, d_in=12, seed=5):
    from rfed.problems.softmax import SoftmaxRegression

    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n_agents, per, d_in)).astype(dtype)
    labels = rng.integers(0, 4, (n_agents, per))
    return SoftmaxRegression(feats, labels, n_classes=4)


@pytest.mark.parametrize("cls", [DPDL, DPDPSGD])
def test_structured_clipped_sum_equals_clipping_the_materialised_gradients(cls, monkeypatch):
    """The fast path (softmax regression's closed-form clipped sum, no (B, d_in, C) array)
    and eq. (9)-(10) as written (per-sample gradients materialised, then clipped) give the
    same run up to float64 rounding; many gradients are clipped (clip 0.5 against norms ~3)."""
    import rfed.algorithms.decentralized.base as contract
    import rfed.algorithms.decentralized.dpdl as dpdl_mod

    problem = _softmax_case()
    assert contract.structured_clipping(problem)
    calls = []
    real_sum = type(problem).clipped_grad_sum

    def counted(self, x, batch, bound, mask=None):
        if bound is not None:   # a clipped sum (the full gradient of the metrics passes None)
            calls.append(1)
        return real_sum(self, x, batch, bound, mask)

    monkeypatch.setattr(type(problem), "clipped_grad_sum", counted)

    def run():
        alg = cls(Network(ring(6), uniform_weights(ring(6))), lr=0.3, batch_size=8, clip=0.5,
                  noise_multiplier=1.0)
        return alg.run(problem, 5, rng=4, x0=np.zeros(problem.n_params), with_reference=False)

    fast = run()
    assert calls   # the fast path ran
    # the readable path: eq. (9)-(10) as written, chosen where the private gradient chooses
    for module in (contract, dpdl_mod):
        monkeypatch.setattr(module, "structured_clipping", lambda problem: False)
    del calls[:]
    direct = run()
    assert not calls
    np.testing.assert_allclose(fast.state.x, direct.state.x, rtol=1e-12, atol=1e-14)
    assert np.abs(fast.state.x).max() > 0.05   # moved
    assert fast.privacy == direct.privacy


def test_byte_bounded_chunks_and_float32_features(monkeypatch):
    """Chunks sized by memory (MAX_CHUNK_BYTES) leave the run bit-identical; float32 features
    (stored in float32, float32 logits, float64 clipped sums) stay within float32 rounding of
    the float64 run."""
    import rfed.algorithms.decentralized.dpdl as dpdl_mod

    problem = _softmax_case()

    def run(prob, **kw):
        alg = DPDPSGD(Network(ring(6), uniform_weights(ring(6))), lr=0.3, batch_size=8,
                      clip=0.5, noise_multiplier=1.0, **kw)
        return alg.run(prob, 5, rng=4, x0=np.zeros(prob.n_params), with_reference=False)

    whole = run(problem)
    # every pair fits in 256 MB: the max_chunk_pairs cap
    assert DPDPSGD(Network(ring(6)), lr=0.1, batch_size=8)._chunk_pairs(problem, True) == 2048
    monkeypatch.setattr(dpdl_mod, "MAX_CHUNK_BYTES", 1)
    assert DPDPSGD(Network(ring(6)), lr=0.1, batch_size=8)._chunk_pairs(problem, True) == 1
    np.testing.assert_array_equal(run(problem).state.x, whole.state.x)
    monkeypatch.undo()
    single = _softmax_case(np.float32)
    assert single.data["features"].dtype == np.float32
    np.testing.assert_allclose(run(single).state.x, whole.state.x, rtol=1e-5, atol=1e-6)


def test_poisson_minibatches_rate_and_layout():
    from rfed.algorithms.decentralized.dpdl import poisson_minibatches

    counts = np.array([40, 25, 40])
    hits = np.zeros((3, 40))
    trials = 4000
    rng = np.random.default_rng(3)
    for _ in range(trials):
        idx, mask = poisson_minibatches(counts, 10, rng)
        assert idx.shape == mask.shape and idx.dtype.kind == "i"
        for a in range(3):
            rows = idx[a][mask[a]]
            assert np.all(np.diff(rows) > 0) and np.all(rows < counts[a])   # distinct, valid
            assert np.all(idx[a][~mask[a]] == 0)
            hits[a, rows] += 1
    # every valid row is drawn with probability B / q_a (binomial, 5 sigma); padding never
    for a, q in enumerate(counts):
        p = 10 / q
        freq = hits[a, :q] / trials
        assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / trials))
        assert np.all(hits[a, q:] == 0)


def test_poisson_sampling_accounting_and_full_rate(logreg):
    from rfed.privacy import PrivacyBudget
    from rfed.privacy.secure import SecureRandom

    def make(sampling, batch, **kw):
        return DPDPSGD(Network(ring(6), uniform_weights(ring(6))), lr=0.2, batch_size=batch,
                       clip=0.5, sampling=sampling, **kw)

    budget = {"budget": PrivacyBudget(2.0, 1e-5), "n_rounds": 30}
    z = {}
    for sampling in ("without_replacement", "poisson"):
        res = make(sampling, 20, **budget).run(logreg, 30, rng=5, x0=np.zeros(6),
                                               with_reference=False)
        rep = res.privacy
        assert 0.9 * 2.0 <= rep["epsilon_certified"] <= 2.0 + 1e-9
        assert rep["neighboring"] == "replace_one"
        z[sampling] = rep["noise_multiplier"]
    # Poisson subsampling is certified by PLD, tighter than the RDP bound of sampling without
    # replacement at the same rate: less noise for the same certified budget
    assert z["poisson"] < 0.8 * z["without_replacement"]
    assert "Poisson" in " ".join(res.privacy["assumptions"])
    # at rate 1 every record is drawn: the same sums as the whole local data set
    full = int(logreg.counts.min())
    a = make("poisson", full, noise_multiplier=1.0).run(logreg, 3, rng=6, x0=np.zeros(6),
                                                       with_reference=False)
    b = make("without_replacement", full, noise_multiplier=1.0).run(
        logreg, 3, rng=6, x0=np.zeros(6), with_reference=False)
    np.testing.assert_allclose(a.state.x, b.state.x, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="secure mode"):
        make("poisson", 20, **budget).init(logreg, np.zeros(6), SecureRandom())
    with pytest.raises(ValueError, match="'sampling'"):
        make("bernoulli", 20)


def test_poisson_under_add_remove_reads_only_the_declared_sizes(logreg):
    from rfed.privacy import PrivacyBudget

    budget = PrivacyBudget(2.0, 1e-5, neighboring="add_remove_one",
                           public_sizes=2 * int(logreg.counts.min()))

    def make(sampling="poisson", b=budget):
        return DPDPSGD(Network(ring(6), uniform_weights(ring(6))), lr=0.2, batch_size=20,
                       clip=0.5, sampling=sampling, budget=b, n_rounds=30)

    res = make().run(logreg, 30, rng=5, x0=np.zeros(6), with_reference=False)
    assert res.privacy["neighboring"] == "add_remove_one"
    assert 0.9 * 2.0 <= res.privacy["epsilon_certified"] <= 2.0 + 1e-9
    # the rate is B / N^pub (half the true rate here): about 20 * q / N^pub rows per round
    alg = make()
    state = alg.init(logreg, np.zeros(6), np.random.default_rng(0))
    np.testing.assert_array_equal(state.ledger.local_sizes, budget.public_sizes)
    drawn = []
    for t in range(200):
        state.t = t
        _, mask = alg._round_batches(logreg, state, np.arange(6))
        drawn.append(mask.sum(axis=1))
    mean = np.mean(drawn)
    assert abs(mean - 10.0) < 5 * np.sqrt(10.0 / (6 * 200)), mean
    # without declared sizes, or with a fixed-size draw, add/remove is refused with the reason
    with pytest.raises(ValueError, match="public_sizes"):
        make(b=PrivacyBudget(2.0, 1e-5, neighboring="add_remove_one")).init(
            logreg, np.zeros(6), np.random.default_rng(0))
    with pytest.raises(ValueError, match="add_remove_one"):
        make(sampling="without_replacement")
