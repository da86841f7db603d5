"""Partitions: disjoint, covering, reproducible; Dirichlet skew as a statistical property."""

import numpy as np
import pytest

from rfed.datasets import (
    dirichlet_partition,
    iid_partition,
    label_counts,
    load_digits_images,
    stack_agents,
)


def test_iid_equal_split_is_disjoint_and_drops_only_the_remainder():
    idx = iid_partition(103, 10, 0)
    assert idx.shape == (10, 10) and idx.dtype == np.int64
    assert len(np.unique(idx)) == 100 and idx.min() >= 0 and idx.max() < 103
    exact = iid_partition(100, 10, 0)
    np.testing.assert_array_equal(np.sort(exact.ravel()), np.arange(100))
    np.testing.assert_array_equal(iid_partition(100, 10, 5), iid_partition(100, 10, 5))
    assert not np.array_equal(iid_partition(100, 10, 5), iid_partition(100, 10, 6))


def test_iid_unequal_split_covers():
    parts = iid_partition(103, 10, 1, equal=False)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(103))
    with pytest.raises(ValueError, match="n_agents"):
        iid_partition(5, 6, 0)


def test_dirichlet_disjoint_cover_and_min_size():
    _, y = load_digits_images()
    parts = dirichlet_partition(y, 10, 0.25, 0, min_size=40)
    assert len(parts) == 10
    allidx = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(allidx), np.arange(len(y)))
    assert min(len(p) for p in parts) >= 40
    again = dirichlet_partition(y, 10, 0.25, 0, min_size=40)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    counts = label_counts(y, parts)
    np.testing.assert_array_equal(counts.sum(0), np.bincount(y))


def test_dirichlet_large_alpha_is_iid_small_alpha_is_skewed():
    _, y = load_digits_images()
    n_agents = 6
    global_p = np.bincount(y) / len(y)
    big = label_counts(y, dirichlet_partition(y, n_agents, 1e4, 1))
    share = big / big.sum(1, keepdims=True)
    # Dir(1e4) proportions are within ~1 % of 1/N; each agent then holds a near-random sample
    # of ~300: class shares deviate from the global ones by a few binomial standard errors
    se = np.sqrt(global_p * (1 - global_p) / big.sum(1, keepdims=True))
    assert np.all(np.abs(share - global_p) < 5 * se)
    small = label_counts(y, dirichlet_partition(y, n_agents, 0.1, 1, min_size=1))
    small_share = small / small.sum(1, keepdims=True)
    # with alpha = 0.1 each class goes mostly to one agent: agents are dominated by few classes
    assert small_share.max(1).mean() > 0.3 > share.max(1).mean()
    assert (small == 0).mean() > 0.3 and (big == 0).mean() == 0


def test_dirichlet_errors():
    y = np.repeat(np.arange(3), 10)
    with pytest.raises(ValueError, match="min_size"):
        dirichlet_partition(y, 4, 1.0, 0, min_size=8)
    with pytest.raises(ValueError, match="min_size"):
        dirichlet_partition(y, 4, 0.01, 0, min_size=7, max_tries=3)
    with pytest.raises(ValueError, match="labels"):
        dirichlet_partition(y.astype(float), 4, 1.0, 0)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(y, 4, 0.0, 0)
    with pytest.raises(ValueError, match="empty"):
        dirichlet_partition(np.array([], dtype=np.int64), 4, 1.0, 0, min_size=0)


def test_stack_agents():
    x = np.arange(50 * 3).reshape(50, 3)
    idx = iid_partition(50, 5, 2)
    s = stack_agents(x, idx)
    assert s.shape == (5, 10, 3)
    np.testing.assert_array_equal(s[3], x[idx[3]])
    parts = iid_partition(52, 5, 2, equal=False)
    with pytest.raises(ValueError, match="parts"):
        stack_agents(np.arange(52), parts)
    t = stack_agents(np.arange(52), parts, truncate=True)
    assert t.shape == (5, 10)
    np.testing.assert_array_equal(t[0], parts[0][:10])


def test_dirichlet_class_counts_follow_the_drawn_proportions():
    # Replays the documented recipe with the same stream: one uniform key per sample (the
    # within-class shuffle), then p_k ~ Dir(alpha 1_N) per class; with min_size=0 the first
    # draw is kept, and agent i must hold floor(c_{k,i} n_k) - floor(c_{k,i-1} n_k) samples of
    # class k, c_k = cumsum(p_k) (the last cut forced to n_k).
    y = np.random.default_rng(0).integers(0, 7, 5000)
    n_agents, alpha, seed = 40, 0.3, 11
    parts = dirichlet_partition(y, n_agents, alpha, seed, min_size=0)
    gen = np.random.default_rng(seed)
    gen.random(len(y))
    props = gen.dirichlet(np.full(n_agents, alpha), size=7)
    n_k = np.bincount(y, minlength=7)
    cuts = np.floor(np.cumsum(props, axis=1) * n_k[:, None]).astype(np.int64)
    cuts[:, -1] = n_k
    expected = np.diff(np.concatenate([np.zeros((7, 1), np.int64), cuts], axis=1), axis=1)
    np.testing.assert_array_equal(label_counts(y, parts, 7), expected.T)
