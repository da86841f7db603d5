"""Sampling without replacement: the agents of a round and each agent's minibatches.

PriRFed (Huang et al. 2024) Alg. 1 line 2 draws ``s`` of the ``N`` agents uniformly without
replacement, afresh every round; Alg. 2 line 3 draws each agent's minibatch ``B_k`` of size ``b_i``
uniformly without replacement from its ``N_i`` samples, independently across steps and agents.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sample_agents", "sample_minibatches", "batch_sizes"]


def sample_agents(n_agents: int, n_sampled: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random set of ``n_sampled`` distinct agents, sorted, shape ``(n_sampled,)``.

    Parameters
    ----------
    n_agents : int
        ``N``.
    n_sampled : int
        ``s <= N``.
    rng : numpy.random.Generator
        The public selection stream.

    Returns
    -------
    int array, shape ``(n_sampled,)``
    """
    if not 1 <= n_sampled <= n_agents:
        raise ValueError(
            f"argument 'n_sampled' must be in [1, n_agents={n_agents}], got {n_sampled}"
        )
    if n_sampled == n_agents:
        return np.arange(n_agents)
    return np.sort(rng.choice(n_agents, size=n_sampled, replace=False))


def batch_sizes(counts: np.ndarray, batch_size: int | float | None) -> np.ndarray:
    """Per-agent minibatch sizes ``b_i``.

    Parameters
    ----------
    counts : int array, shape ``(A,)``
        ``N_i`` of each agent.
    batch_size : int, float or None
        ``None``: full batch (``b_i = N_i``); an int: the same ``b`` for every agent (at most
        ``min N_i``); a float in (0, 1]: the fraction ``b_i = max(1, round(f N_i))`` (the paper's
        ``N_i / 2`` is ``0.5``).

    Returns
    -------
    int array, shape ``(A,)``
    """
    counts = np.asarray(counts, dtype=int)
    if batch_size is None:
        return counts.copy()
    if isinstance(batch_size, (bool, np.bool_)):
        raise TypeError("argument 'batch_size' must be None, an int or a float, got a bool")
    if isinstance(batch_size, (int, np.integer)):
        if not 1 <= batch_size <= counts.min():
            raise ValueError(
                f"argument 'batch_size' must be in [1, min N_i = {counts.min()}], got {batch_size}"
            )
        return np.full(counts.shape, int(batch_size))
    frac = float(batch_size)
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"argument 'batch_size' as a fraction must be in (0, 1], got {frac}")
    return np.maximum(1, np.rint(frac * counts).astype(int))


def sample_minibatches(
    counts: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One uniform subset of size ``sizes[a]`` of ``range(counts[a])`` for every row ``a``.

    Vectorized: i.i.d. uniform keys for the ``(A, max N_i)`` slots, padding slots pushed to the
    end, and the ``sizes[a]`` smallest keys of row ``a`` kept (the prefix of a uniformly random
    permutation is a uniformly random subset).

    Parameters
    ----------
    counts : int array, shape ``(A,)``
        Each agent's dataset size ``N_i``.
    sizes : int array, shape ``(A,)``
        Each agent's batch size ``b_i <= N_i``.
    rng : numpy.random.Generator
        The agents' stream.

    Returns
    -------
    idx : int array, shape ``(A, max(sizes))``
        Row ``a`` holds its subset in its first ``sizes[a]`` entries (the rest are valid indices
        masked out).
    mask : bool array, shape ``(A, max(sizes))``
        ``True`` on the first ``sizes[a]`` entries of row ``a``.
    """
    counts = np.asarray(counts, dtype=int)
    sizes = np.asarray(sizes, dtype=int)
    if (sizes < 1).any() or (sizes > counts).any():
        raise ValueError("argument 'sizes' must satisfy 1 <= sizes[a] <= counts[a]")
    b = int(sizes.max())
    n_max = int(counts.max())
    keys = rng.random((counts.size, n_max))
    keys[np.arange(n_max)[None, :] >= counts[:, None]] = 2.0
    if b == n_max:
        idx = np.argsort(keys, axis=1)
    else:
        part = np.argpartition(keys, b - 1, axis=1)[:, :b]
        # order the b kept slots by key so that each row's first sizes[a] are its smallest keys
        order = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1)
        idx = np.take_along_axis(part, order, axis=1)
    mask = np.arange(b)[None, :] < sizes[:, None]
    return idx, mask
