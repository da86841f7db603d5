"""DP-RSGD's in-order minibatches (``Problem.sorted_batches``): the drawn rows gathered sorted,
a cache-sized block of agents at a time, give the sums of the masks over all rows (the path they
replaced) up to the order of the summands, and the same subsets as the generic gather."""

import numpy as np
import pytest

import rfed.algorithms.federated.local as local
from rfed.algorithms.federated import DPRSGD
from rfed.algorithms.federated.sampling import batch_sizes, sample_minibatches
from rfed.problems import KPCA, SpherePCA

# (agents, rows per agent or None for all equal, dimension, batch fraction)
SHAPES = [
    (1, None, 3, 0.5),
    (7, None, 5, 0.5),
    (9, [11, 4, 9, 1, 11, 6, 2, 10, 7], 6, 0.5),  # padded agents, one with a single row
    (5, [30, 17, 30, 25, 8], 4, 0.3),
    (12, None, 20, 0.9),
]


def _problem(kind, n_agents, counts, dim, rng):
    n_max = 12 if counts is None else max(counts)
    z = rng.standard_normal((n_agents, n_max, dim)) * rng.uniform(0.2, 3.0, (n_agents, n_max, 1))
    counts = None if counts is None else np.array(counts)
    if kind == "sphere":
        return SpherePCA(z, counts=counts)
    return KPCA(z, 2, counts=counts)


def _masked_sums(prob, x, agents, idx, valid, clip):
    """The former path: the drawn rows as a 0/1 mask over ALL of each agent's rows."""
    data, _ = prob.agent_data(agents)
    mask = np.zeros((agents.size, prob.n_max), dtype=bool)
    mask[np.nonzero(valid)[0], idx[valid]] = True
    return prob.clipped_grad_sum(x, data, clip, mask)


@pytest.mark.parametrize("kind", ["sphere", "kpca"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[0]}x{s[2]}-{s[3]}" for s in SHAPES])
@pytest.mark.parametrize("block_bytes", [1, 300, 4 * 2**20], ids=["1-agent", "few", "all"])
def test_in_order_sums_equal_the_masked_sums(kind, shape, block_bytes, monkeypatch):
    monkeypatch.setattr(local, "_GATHER_BLOCK_BYTES", block_bytes)
    n_agents, counts, dim, frac = shape
    rng = np.random.default_rng(len(kind) * 100 + n_agents)
    prob = _problem(kind, n_agents, counts, dim, rng)
    agents = np.arange(n_agents)
    x = prob.manifold.random_point(rng, n_agents)
    idx, valid = sample_minibatches(prob.counts, batch_sizes(prob.counts, frac), rng)
    # a clip level that clips about half of the per-sample gradients
    norms = np.linalg.norm(prob.sample_rgrad(x, prob.batch(agents, idx)).reshape(
        *idx.shape, -1), axis=-1)
    clip = float(np.median(norms[valid]))
    for bound in (clip, None):
        want, want_clipped = _masked_sums(prob, x, agents, idx, valid, bound)
        got, got_clipped, buffers = local._clipped_sum_in_order(
            prob, x, agents, idx, valid, bound, None)
        scale = np.max(np.abs(want), axis=tuple(range(1, want.ndim)), keepdims=True)
        np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(got_clipped, np.sum(
            want_clipped.reshape(n_agents, -1), axis=1))
        # the buffers of one call serve the next (the next step's draw) unchanged
        idx2, valid2 = sample_minibatches(prob.counts, batch_sizes(prob.counts, frac), rng)
        again, _, same = local._clipped_sum_in_order(prob, x, agents, idx2, valid2, bound,
                                                     buffers)
        assert all(same[k] is buffers[k] for k in buffers)
        want2, _ = _masked_sums(prob, x, agents, idx2, valid2, bound)
        np.testing.assert_allclose(again / scale, want2 / scale, rtol=0, atol=1e-12)
    if bound is None:
        assert want_clipped.sum() == 0


def test_in_order_sums_of_a_subset_of_agents_and_of_a_shard():
    rng = np.random.default_rng(4)
    prob = _problem("sphere", 9, SHAPES[2][1], 6, rng)
    agents = np.array([1, 4, 5, 8])
    x = prob.manifold.random_point(rng, agents.size)
    idx, valid = sample_minibatches(prob.counts[agents],
                                    batch_sizes(prob.counts[agents], 0.5), rng)
    want, _ = _masked_sums(prob, x, agents, idx, valid, 0.5)
    got, _, _ = local._clipped_sum_in_order(prob, x, agents, idx, valid, 0.5, None)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    shard = prob.shard(agents)
    on_shard, _, _ = local._clipped_sum_in_order(shard, x, agents, idx, valid, 0.5, None)
    np.testing.assert_array_equal(on_shard, got)


@pytest.mark.parametrize("kind", ["sphere", "kpca"])
@pytest.mark.parametrize("option", [1, 2])
def test_dprsgd_in_order_equals_the_generic_gather_of_the_same_draws(kind, option,
                                                                     monkeypatch):
    """Whole local runs (noise, clipping, K steps): the in-order path and the generic gather in
    draw order (``sorted_batches=False``) consume the same draws, so they end at the same
    points up to rounding, with the same clip counts."""
    monkeypatch.setattr(local, "_GATHER_BLOCK_BYTES", 2000)  # several blocks
    rng = np.random.default_rng(11)
    prob = _problem(kind, 9, SHAPES[2][1], 6, rng)
    x0 = np.broadcast_to(prob.manifold.random_point(rng), (9, *prob.manifold.point_shape))
    trainer = DPRSGD(steps=4, batch_size=0.5, clip=1.0, noise_multiplier=0.3)
    plan = trainer.plan(prob)
    agents = np.arange(9)
    out_sorted, info_sorted = trainer.train(prob, plan, x0, agents, 0.05,
                                            np.random.default_rng(5), option)
    monkeypatch.setattr(type(prob), "sorted_batches", False)
    out_generic, info_generic = trainer.train(prob, plan, x0, agents, 0.05,
                                              np.random.default_rng(5), option)
    np.testing.assert_allclose(out_sorted, out_generic, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(info_sorted["n_clipped_rows"], info_generic["n_clipped_rows"])
    assert info_sorted["n_clipped"] > 0  # clipping is exercised
    assert info_sorted["grad_evals"] == info_generic["grad_evals"]


def test_batch_gathers_by_flat_take_into_buffers():
    rng = np.random.default_rng(2)
    prob = _problem("sphere", 5, [7, 3, 7, 5, 2], 4, rng)
    agents = np.array([3, 0, 2])
    idx = np.array([[4, 0, 1], [6, 6, 2], [0, 5, 3]])
    want = {k: v[agents[:, None], idx] for k, v in prob.data.items()}
    got = prob.batch(agents, idx)
    out = {k: np.empty((20,) + v.shape[2:]) for k, v in prob.data.items()}
    into = prob.batch(agents, idx, out=out)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        np.testing.assert_array_equal(into[k], want[k])
        assert np.shares_memory(into[k], out[k])
    for bad in ([[7, 0, 1]], [[-1, 0, 1]]):
        with pytest.raises(ValueError, match="argument 'idx' must hold row indices in"):
            prob.batch(agents[:1], np.array(bad))
