"""sample_without_replacement with one record per row: the argmin shortcut picks the record the
partition picks, ties at the minimum included (they go to the partition)."""

import numpy as np

from rfed.problems.base import sample_without_replacement


class _Keys:
    """A stand-in generator whose ``random`` returns given keys."""

    def __init__(self, keys):
        self.keys = keys

    def random(self, size):
        assert size == self.keys.shape
        return self.keys.copy()


def _partition(keys, counts):
    keys = keys.copy()
    keys[np.arange(keys.shape[1])[None, :] >= counts[:, None]] = 2.0
    return np.argpartition(keys, 0, axis=1)[:, :1]


def test_one_record_is_the_partitions_choice_with_and_without_ties():
    rng = np.random.default_rng(0)
    for trial in range(400):
        a, n = int(rng.integers(1, 20)), int(rng.integers(1, 300))
        counts = rng.integers(1, n + 1, size=a)
        counts[0] = n
        if trial % 2:  # coarse keys: ties at the minimum in most rows
            keys = rng.integers(0, 3, size=(a, n)) / 4.0
        else:
            keys = rng.random((a, n))
        got = sample_without_replacement(counts, 1, _Keys(keys))
        assert got.shape == (a, 1)
        np.testing.assert_array_equal(got, _partition(keys, counts))
        assert np.all(got[:, 0] < counts)
