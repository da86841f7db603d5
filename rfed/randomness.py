"""Keyed random streams: the same draws whatever process, engine or agent block makes them.

A run's randomness is a pure function of ``(seed, stream key, element index)``, not of the order in
which a sequential generator is consumed, so an agent's minibatches and noise are the same whether
all agents live in one array, in blocks on several MPI ranks, or in Flower clients, and a
checkpoint is the state plus ``(seed, round)``:

* **public** streams, keyed by ``(seed, round, purpose)``, for what every party must agree on
  (agent sampling, activation, matchings, random edges): :func:`public_generator` returns an
  ordinary :class:`numpy.random.Generator` seeded from those words;
* **per-agent** streams, keyed by ``(seed, agent, round, purpose)``, for a block of agents at once
  (minibatches, noise, compression): :class:`AgentStreams` draws for every agent of a block in one
  vectorized call with no Python loop over agents.

Per-agent draws use the counter-based generator Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011), evaluated in numpy over all
``(agent, element)`` counters at once. The 128-bit counter is ``(element // 2, agent, round,
purpose)`` and the 64-bit key is the seed, so any agent's draws can be computed by any process
without the others'. Two 32-bit words make one 64-bit word; its top 53 bits give a uniform in
``(0, 1)`` (``(k + 1/2) 2^-53``), normals are ``Phi^{-1}`` of those uniforms
(:func:`scipy.special.ndtri`), and integers in ``[0, n)`` are ``floor(u n)`` (bias at most
``n 2^-53``).

Secure mode does not use these streams: its randomness comes from the operating system and is not
replayable by design.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri

__all__ = ["purpose_code", "public_generator", "AgentStreams", "philox4x32"]

_PUBLIC_TAG = 0x5055424C  # "PUBL": keeps public streams apart from any per-agent stream
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SHIFT11 = np.uint64(11)


def purpose_code(purpose: str | int) -> int:
    """A stable 32-bit code for a stream's purpose (CRC-32 of the name, or the int itself)."""
    if isinstance(purpose, (int, np.integer)) and not isinstance(purpose, bool):
        if not 0 <= int(purpose) < 2**32:
            raise ValueError(f"argument 'purpose' must be in [0, 2**32), got {purpose}")
        return int(purpose)
    if not isinstance(purpose, str) or not purpose:
        raise TypeError(f"argument 'purpose' must be a non-empty str or an int, got {purpose!r}")
    return zlib.crc32(purpose.encode("utf-8"))


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"argument 'seed' must be an int, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"argument 'seed' must be in [0, 2**64), got {seed}")
    return int(seed)


def _check_round(round: int) -> int:
    if isinstance(round, bool) or not isinstance(round, (int, np.integer)) or round < 0:
        raise ValueError(f"argument 'round' must be an int >= 0, got {round!r}")
    if round >= 2**32:
        raise ValueError(f"argument 'round' must be < 2**32, got {round}")
    return int(round)


def public_generator(seed: int, round: int, purpose: str | int) -> np.random.Generator:
    """The public stream of ``(seed, round, purpose)``: identical on every rank and the server.

    Parameters
    ----------
    seed : int
        The run's seed, in ``[0, 2**64)``.
    round : int
    purpose : str or int
        E.g. ``'agent-sampling'``, ``'activation'``, ``'matching'``.
    """
    seed = _check_seed(seed)
    words = [seed & 0xFFFFFFFF, seed >> 32, _PUBLIC_TAG, _check_round(round), purpose_code(purpose)]
    return np.random.default_rng(np.random.SeedSequence(words))


def philox4x32(counter: Sequence[np.ndarray], key: Sequence[np.ndarray | int]) -> list[np.ndarray]:
    """Philox4x32-10 of broadcastable 32-bit counter words and a 64-bit key (two 32-bit words).

    Parameters
    ----------
    counter : 4 arrays of integers in ``[0, 2**32)``
    key : 2 integers (or arrays) in ``[0, 2**32)``

    Returns
    -------
    list of 4 uint64 arrays holding 32-bit output words
    """
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    c0, c1, c2, c3 = np.broadcast_arrays(c0, c1, c2, c3)
    k0, k1 = (np.asarray(k, dtype=np.uint64) for k in key)
    for r in range(10):
        if r:
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> _SHIFT32) ^ c1 ^ k0,
            p1 & _MASK32,
            (p0 >> _SHIFT32) ^ c3 ^ k1,
            p0 & _MASK32,
        )
    return [c0, c1, c2, c3]


class AgentStreams:
    """Per-agent keyed streams of one run: draws for a block of agents in one call.

    Parameters
    ----------
    seed : int
        The run's seed, in ``[0, 2**64)``.

    Examples
    --------
    >>> streams = AgentStreams(seed=7)
    >>> noise = streams.normal([3, 5, 9], round=0, purpose="noise", shape=(4,))  # (3, 4)
    >>> np.array_equal(noise[1], streams.normal([5], 0, "noise", (4,))[0])
    True
    """

    def __init__(self, seed: int):
        self.seed = _check_seed(seed)
        self._key = (self.seed & 0xFFFFFFFF, self.seed >> 32)

    def _agents(self, agents) -> np.ndarray:
        a = np.asarray(agents)
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"argument 'agents' must be a 1-d int array of ids, got {agents!r}")
        if a.size and (a.min() < 0 or a.max() >= 2**32):
            raise ValueError("argument 'agents' must hold ids in [0, 2**32)")
        return a.astype(np.uint64)

    def bits(self, agents, round: int, purpose: str | int, size: int) -> np.ndarray:
        """``size`` 64-bit words per agent, shape ``(len(agents), size)``, dtype uint64."""
        a = self._agents(agents)
        size = int(size)
        if size < 0:
            raise ValueError(f"argument 'size' must be >= 0, got {size}")
        half = (size + 1) // 2
        idx = np.arange(half, dtype=np.uint64)[None, :]
        w = philox4x32(
            (idx, a[:, None], np.uint64(_check_round(round)), np.uint64(purpose_code(purpose))),
            self._key,
        )
        out = np.empty((a.size, 2 * half), dtype=np.uint64)
        out[:, 0::2] = (w[0] << _SHIFT32) | w[1]
        out[:, 1::2] = (w[2] << _SHIFT32) | w[3]
        return out[:, :size]

    def uniform(self, agents, round: int, purpose: str | int, shape=()) -> np.ndarray:
        """Uniforms in the open interval ``(0, 1)``, shape ``(len(agents), *shape)``."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        k = self.bits(agents, round, purpose, n) >> _SHIFT11
        u = (k.astype(np.float64) + 0.5) * 2.0**-53
        return u.reshape((-1,) + shape)

    def normal(self, agents, round: int, purpose: str | int, shape=()) -> np.ndarray:
        """Standard normals, shape ``(len(agents), *shape)``."""
        return ndtri(self.uniform(agents, round, purpose, shape))

    def integers(self, agents, round: int, purpose: str | int, high, shape=()) -> np.ndarray:
        """Integers in ``[0, high)``; ``high`` broadcasts per agent (shape ``(len(agents),)``)."""
        u = self.uniform(agents, round, purpose, shape)
        h = np.asarray(high, dtype=np.int64)
        if np.any(h < 1):
            raise ValueError(f"argument 'high' must be >= 1, got {high!r}")
        h = h.reshape(h.shape + (1,) * (u.ndim - h.ndim)) if h.ndim else h
        return np.minimum(np.floor(u * h).astype(np.int64), h - 1)

    def __repr__(self) -> str:
        return f"AgentStreams(seed={self.seed})"
