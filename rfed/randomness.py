"""Keyed random streams: the same draws whatever process, engine or agent block makes them.

A run's randomness is a pure function of ``(seed, stream key, agent)``, not of the order in which a
sequential generator is consumed, so an agent's minibatches and noise are the same whether all
agents live in one array, in blocks on several MPI ranks, or in Flower clients, and a checkpoint
is the state plus ``(seed, round)``:

* **public** streams, keyed by ``(seed, round, purpose)``, for what every party must agree on
  (agent sampling, activation, matchings, random edges): :func:`public_generator` returns an
  ordinary :class:`numpy.random.Generator` seeded from those words;
* **per-agent** streams, keyed by ``(seed, agent, round, purpose)``, for a block of agents at once
  (minibatches, noise, compression): :class:`AgentStreams`.

Per-agent draws come in fixed groups of :data:`AGENT_GROUP` consecutive agent ids: the group
``g = agent // AGENT_GROUP`` has its own counter-based generator, numpy's Philox4x64-10 (Salmon,
Moraes, Dror and Shaw, SC 2011) with key ``(seed, tag)`` and starting counter ``(0, g, round,
purpose)``, which draws the rows of all the group's agents at once with numpy's fast samplers;
agent ``r`` of the group takes draws ``r, r + 16, r + 32, ...``, so its first ``m`` values do
not depend on how many values are asked for (blocks padded to different lengths agree). A block
therefore loops over the groups it touches (``n_agents / 16`` re-keyings of one cached generator,
about 0.3 us each), never over agents, and any process computes any agent's draws without the
others'. A block holding part of a group draws the whole group and keeps its rows (at most 16
times the work for a one-agent client, and the floor of a draw for a block: e.g. 16 active agents
of 20 draw two whole groups). A block's ids are checked and its groups derived once
(:meth:`AgentStreams.block`) for the several draws of a round, and a caller that only compares
uniforms (the smallest minibatch key) may take their integer ranks instead
(:func:`ranks_to_uniforms` maps them back bit for bit).

Secure mode does not use these streams: its randomness comes from the operating system and is not
replayable by design.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

__all__ = ["AGENT_GROUP", "purpose_code", "public_generator", "ranks_to_uniforms", "AgentBlock",
           "AgentStreams", "StackedStreams"]

_PUBLIC_TAG = 0x5055424C  # "PUBL": keeps public streams apart from the per-agent ones
_AGENT_TAG = 0x4147454E  # "AGEN"
#: Consecutive agent ids that share one generator (fixed: part of every run's definition).
AGENT_GROUP = 16
#: Scratch arrays an AgentStreams keeps for its multi-group draws (one per shape and dtype).
_ROWS_BUFFERS = 4

def _open_uniform(gen: np.random.Generator, size: tuple[int, ...],
                  out: np.ndarray | None = None) -> np.ndarray:
    # (k + 1/2) 2^-53 with k = gen.integers(0, 2**53): never 0 or 1, so inversions (log, ndtri)
    # stay finite. For the range 2^53, numpy's bounded 64-bit integers (Lemire's method) are
    # k = raw >> 11 of the raw 64-bit outputs and never reject, so k is read from the bit
    # generator directly; and (k + 1/2) 2^-53 = fl(2k + 1) 2^-54 exactly (float(k) + 1/2 rounds
    # the 54-bit odd number 2k + 1 the way its conversion does, and powers of two scale
    # exactly): one conversion-and-scale pass into ``out``
    raw = gen.bit_generator.random_raw(size)
    raw >>= np.uint64(10)
    raw |= np.uint64(1)
    return np.multiply(raw, 2.0**-54, out=out)


def _uniform_ranks(gen: np.random.Generator, size: tuple[int, ...],
                   out: np.ndarray | None = None) -> np.ndarray:
    # the k of the open uniforms (k + 1/2) 2^-53 that _open_uniform draws from the same state
    # (k = raw >> 11), as uint64: a strictly increasing map, so the ranks order and tie
    # exactly as those uniforms do, one pass cheaper (for a caller that only compares them)
    raw = gen.bit_generator.random_raw(size)
    return np.right_shift(raw, np.uint64(11), out=raw if out is None else out)


def ranks_to_uniforms(ranks: np.ndarray) -> np.ndarray:
    """The open uniforms ``(k + 1/2) 2^-53`` of ranks ``k < 2^53`` (uint64), bit for bit as the
    keyed uniform draws give them: the same conversion of ``2k + 1`` to float64 and the same
    exact scaling by ``2^-54``.

    Parameters
    ----------
    ranks : ndarray of uint64, any shape

    Returns
    -------
    ndarray of float64, shape of ``ranks``
    """
    return np.multiply((ranks << np.uint64(1)) | np.uint64(1), 2.0**-54)


def _check_shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)


def _standard_normal(gen: np.random.Generator, size: tuple[int, ...],
                     out: np.ndarray | None = None) -> np.ndarray:
    return gen.standard_normal(size, out=out)


#: The samplers of :meth:`AgentStreams.uniform` and :meth:`AgentStreams.normal`, by name.
_SAMPLERS = {"uniform": _open_uniform, "normal": _standard_normal}
#: The dtype of each sampler's draws (float64 unless listed).
_SAMPLER_DTYPES = {_uniform_ranks: np.uint64}


#: CRC-32 codes of the purpose names met so far (a handful per run, looked up every draw)
_PURPOSE_CODES: dict[str, int] = {}


def purpose_code(purpose: str | int) -> int:
    """A stable 32-bit code for a stream's purpose (CRC-32 of the name, or the int itself).

    Parameters
    ----------
    purpose : str or int

    Returns
    -------
    int
        In ``[0, 2**32)``.
    """
    if type(purpose) is str:
        code = _PURPOSE_CODES.get(purpose)
        if code is not None:
            return code
    if isinstance(purpose, (int, np.integer)) and not isinstance(purpose, bool):
        if not 0 <= int(purpose) < 2**32:
            raise ValueError(f"argument 'purpose' must be in [0, 2**32), got {purpose}")
        return int(purpose)
    if not isinstance(purpose, str) or not purpose:
        raise TypeError(f"argument 'purpose' must be a non-empty str or an int, got {purpose!r}")
    code = zlib.crc32(purpose.encode("utf-8"))
    if type(purpose) is str and len(_PURPOSE_CODES) < 1024:
        _PURPOSE_CODES[purpose] = code
    return code


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

    Returns
    -------
    numpy.random.Generator
    """
    seed = _check_seed(seed)
    words = [seed & 0xFFFFFFFF, seed >> 32, _PUBLIC_TAG, _check_round(round), purpose_code(purpose)]
    return np.random.default_rng(np.random.SeedSequence(words))


class AgentBlock:
    """Checked agent ids of a block and the groups of :data:`AGENT_GROUP` their draws come from.

    Built by :meth:`AgentStreams.block` (ids already checked: 1-d int64 in ``[0, 2**32)``).

    Attributes
    ----------
    agents : ndarray of int64, shape ``(A,)``
    size : int
        ``A``.
    groups : list of int
        The groups the block touches, in the order of their first agent.
    where : ndarray of int, shape ``(A,)``
        Position of each agent's group in ``groups``.
    cols : ndarray of int64, shape ``(A,)``
        Each agent's column in its group's draws (``agent % AGENT_GROUP``).

    Parameters
    ----------
    agents : ndarray of int64, shape ``(A,)``
        Checked ids.
    """

    __slots__ = ("agents", "size", "groups", "where", "cols")

    def __init__(self, agents: np.ndarray):
        a = agents
        self.agents, self.size = a, a.size
        group_of = a // AGENT_GROUP
        self.cols = a % AGENT_GROUP
        if a.size <= _FEW_AGENTS:
            # a round's block: Python's set and sort of a few ints cost less than the array
            # calls; the groups come out increasing, as np.unique gives them
            groups = sorted(set(group_of.tolist()))
            if len(groups) <= 1:
                where = None if groups else np.zeros(0, dtype=np.int64)
            elif groups[-1] - groups[0] + 1 == len(groups):  # consecutive groups
                where = group_of - groups[0]
            else:
                where = np.searchsorted(np.array(groups), group_of)
            self.groups, self.where = groups, where
        elif bool(np.all(group_of[1:] >= group_of[:-1])):
            # increasing ids (every block the algorithms draw for): the groups in order
            # without np.unique's sort
            first = np.empty(a.size, dtype=bool)
            first[0] = True
            np.not_equal(group_of[1:], group_of[:-1], out=first[1:])
            self.groups, self.where = group_of[first].tolist(), np.cumsum(first) - 1
        else:
            unique, where = np.unique(group_of, return_inverse=True)
            self.groups, self.where = unique.tolist(), where.reshape(-1)


#: Blocks up to this many agents derive their groups with Python sets (a few us), larger ones
#: with array operations.
_FEW_AGENTS = 512


class AgentStreams:
    """Per-agent keyed streams of one run: draws for a block of agents in one call.

    Parameters
    ----------
    seed : int
        The run's seed, in ``[0, 2**64)``.

    Notes
    -----
    An instance re-keys one cached Philox generator in place: share an instance between threads
    only with a lock (or give each thread its own; they draw the same values).

    Examples
    --------
    >>> streams = AgentStreams(seed=7)
    >>> noise = streams.normal([3, 5, 9], round=0, purpose="noise", shape=(4,))  # (3, 4)
    >>> np.array_equal(noise[1], streams.normal([5], 0, "noise", (4,))[0])
    True
    """

    def __init__(self, seed: int):
        self.seed = _check_seed(seed)
        # one bit generator per instance, re-keyed in place for each group: constructing a
        # Philox and a Generator costs ~7 us, which dominated draws for many agents with few
        # values each; setting its state (counter, empty buffer) gives the same bits as a new one
        bits = np.random.Philox(counter=0, key=np.array([self.seed, _AGENT_TAG], dtype=np.uint64))
        self._bits, self._gen = bits, np.random.Generator(bits)
        # the state with the buffer empty (buffer_pos = 4) and no cached 32-bit half, its
        # arrays as lists of ints: the state setter reads them element by element, and Python
        # ints cost it a quarter of numpy scalars (the same state)
        fresh = bits.state
        self._fresh: dict[str, Any] = {**fresh, "state": {k: [int(v) for v in fresh["state"][k]]
                                          for k in ("counter", "key")},
                       "buffer": [int(v) for v in fresh["buffer"]]}
        # the groups' draws of multi-group calls, by (shape, dtype), reused by the next call of
        # the same shape (every element is overwritten; a round draws a few shapes): at 10^6
        # agents a fresh array of this size is faulted in by the kernel at every draw
        self._rows_buffers: dict[tuple, np.ndarray] = {}

    def __getstate__(self) -> dict:
        # a copy or a pickle carries no scratch buffer
        return {**self.__dict__, "_rows_buffers": {}}

    def _agents(self, agents) -> np.ndarray:
        a = np.asarray(agents)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise ValueError(f"argument 'agents' must be a 1-d int array of ids, got {agents!r}")
        if a.size:
            # a round's few ids: Python's min and max of a list cost less than two reductions
            ids = a.tolist() if a.size <= _FEW_AGENTS else None
            lo, hi = (min(ids), max(ids)) if ids is not None else (a.min(), a.max())
            if lo < 0 or hi >= 2**32:
                raise ValueError("argument 'agents' must hold ids in [0, 2**32)")
        return a.astype(np.int64, copy=False)

    def block(self, agents) -> AgentBlock:
        """The checked ids ``agents`` ``(A,)`` and the groups their rows come from, for several
        draws of the same block (e.g. a round's minibatch, noise and compression draws): the
        ids are checked and the groups derived once.

        Parameters
        ----------
        agents : array_like of int, shape ``(A,)``

        Returns
        -------
        AgentBlock
        """
        return AgentBlock(self._agents(agents))

    def _rekey(self, group: int, rnd: int, code: int) -> np.random.Generator:
        """The instance's generator at the start of the stream of ``(group, round, purpose)``."""
        # Philox4x64-10: the stream of (round, purpose, group) starts at counter
        # (0, group, round, purpose) and only ever increments the first word, so no two
        # streams of a run overlap
        state = self._fresh
        state["state"]["counter"] = [0, group, rnd, code]
        self._bits.state = state  # type: ignore[assignment]  # numpy's stubs want its TypedDict
        return self._gen

    def _draw(self, agents, round: int, purpose: str | int, shape, sampler) -> np.ndarray:
        block = agents if type(agents) is AgentBlock else AgentBlock(self._agents(agents))
        shape = _check_shape(shape)
        rnd, code = _check_round(round), purpose_code(purpose)
        m = math.prod(shape)
        return self.block_rows(block, rnd, code, m, sampler).reshape((block.size, *shape))

    def _rows(self, a: np.ndarray, rnd: int, code: int, m: int, sampler) -> np.ndarray:
        """The first ``m`` draws of each agent of the checked ids ``a``, shape ``(a.size, m)``."""
        return self.block_rows(AgentBlock(a), rnd, code, m, sampler)

    def block_rows(self, block: AgentBlock, rnd: int, code: int, m: int, sampler
                   ) -> np.ndarray:
        """The first ``m`` draws of each agent of ``block`` for the checked round ``rnd`` and
        purpose code ``code``, shape ``(block.size, m)``.

        Parameters
        ----------
        block : AgentBlock
        rnd : int
            A checked round.
        code : int
            A purpose code (:func:`purpose_code`).
        m : int
            Draws per agent.
        sampler : callable
            ``sampler(generator, shape)`` (and ``out=``).

        Returns
        -------
        ndarray, shape ``(block.size, m)``
        """
        groups = block.groups
        if len(groups) == 1:
            # one group (a client, or a small block): no gather over groups
            cols = sampler(self._rekey(groups[0], rnd, code), (m, AGENT_GROUP))
            return cols[:, block.cols].T
        shape = (len(groups), m, AGENT_GROUP)
        dtype = _SAMPLER_DTYPES.get(sampler, np.float64)
        rows = self._rows_buffers.get((shape, dtype))
        if rows is None:
            if len(self._rows_buffers) >= _ROWS_BUFFERS:
                self._rows_buffers.clear()
            rows = self._rows_buffers[(shape, dtype)] = np.empty(shape, dtype)
        for k, g in enumerate(groups):
            # element j of the group's agent r is draw j * 16 + r: it does not depend on how
            # many elements are asked for, so a block padded to another length agrees
            sampler(self._rekey(g, rnd, code), (m, AGENT_GROUP), out=rows[k])
        return rows[block.where, :, block.cols]  # (n_agents, m)

    def uniform(self, agents, round: int, purpose: str | int, shape=()) -> np.ndarray:
        """Uniforms in the open interval ``(0, 1)`` (53-bit), shape ``(len(agents), *shape)``;
        ``agents`` are ids or an :class:`AgentBlock` of this instance's :meth:`block`.

        Parameters
        ----------
        agents : array_like of int or AgentBlock, shape ``(A,)``
            Agent ids in ``[0, 2**32)`` (or a block of this instance's :meth:`block`).
        round : int
        purpose : str or int
            The stream's purpose (:func:`purpose_code`).
        shape : int or tuple of int
            Per-agent shape.

        Returns
        -------
        ndarray of float64, shape ``(len(agents), *shape)``
        """
        return self._draw(agents, round, purpose, shape, _open_uniform)

    def normal(self, agents, round: int, purpose: str | int, shape=()) -> np.ndarray:
        """Standard normals, shape ``(len(agents), *shape)`` (``agents``: ids or an
        :class:`AgentBlock`).

        Parameters
        ----------
        agents : array_like of int or AgentBlock, shape ``(A,)``
            Agent ids in ``[0, 2**32)`` (or a block of this instance's :meth:`block`).
        round : int
        purpose : str or int
            The stream's purpose (:func:`purpose_code`).
        shape : int or tuple of int
            Per-agent shape.

        Returns
        -------
        ndarray of float64, shape ``(len(agents), *shape)``
        """
        return self._draw(agents, round, purpose, shape, _standard_normal)

    def integers(self, agents, round: int, purpose: str | int, high, shape=()) -> np.ndarray:
        """Integers in ``[0, high)``; ``high`` broadcasts per agent (shape ``(len(agents),)``).

        Parameters
        ----------
        agents : array_like of int or AgentBlock, shape ``(A,)``
            Agent ids in ``[0, 2**32)`` (or a block of this instance's :meth:`block`).
        round : int
        purpose : str or int
            The stream's purpose (:func:`purpose_code`).
        high : int or array_like of int, shape ``(len(agents),)``
            Exclusive upper bounds, ``>= 1``.
        shape : int or tuple of int
            Per-agent shape.

        Returns
        -------
        ndarray of int64, shape ``(len(agents), *shape)``
        """
        u = self.uniform(agents, round, purpose, shape)
        h = np.asarray(high, dtype=np.int64)
        if np.any(h < 1):
            raise ValueError(f"argument 'high' must be >= 1, got {high!r}")
        h = h.reshape(h.shape + (1,) * (u.ndim - h.ndim)) if h.ndim else h
        return np.minimum(np.floor(u * h).astype(np.int64), h - 1)

    def __repr__(self) -> str:
        return f"AgentStreams(seed={self.seed})"



class StackedStreams:
    """Several runs' blocks of agents (one seed each), drawn from as one stacked block.

    Rows ``[n_0 + ... + n_{r-1}, n_0 + ... + n_r)`` of :meth:`draw` are exactly what
    ``AgentStreams(seeds[r])`` draws for ``blocks[r]``; the ids are checked once here and the
    round, purpose and shape once per draw, for all runs (a multi-run driver draws at every
    local step).

    Parameters
    ----------
    seeds : list of int, length ``R``
    blocks : list of int arrays, length ``R``
        Each run's agent ids, shape ``(n_r,)``.
    """

    def __init__(self, seeds: list[int], blocks: list[np.ndarray]):
        if len(seeds) != len(blocks) or not len(seeds):
            raise ValueError(f"arguments 'seeds' and 'blocks' must be non-empty and of the same "
                             f"length (one per run), got {len(seeds)} and {len(blocks)}")
        self.streams = [AgentStreams(seed) for seed in seeds]
        self.blocks = [st._agents(a) for st, a in zip(self.streams, blocks, strict=True)]
        self.size = sum(a.size for a in self.blocks)
        # per run: its rows, and (group, columns) when its block lies in one group (the usual
        # case: one agent per round), so a draw re-keys and samples without re-deriving them; a
        # one-agent block keeps its row and column as ints (a strided copy, no fancy index)
        self._plan: list[tuple[int | slice, tuple[int, int | np.ndarray] | None]] = []
        start = 0
        for a in self.blocks:
            groups = a // AGENT_GROUP
            one = a.size > 0 and bool(np.all(groups == groups[0]))
            rows = start if a.size == 1 else slice(start, start + a.size)
            cols = int(a[0] % AGENT_GROUP) if a.size == 1 else a % AGENT_GROUP
            self._plan.append((rows, (int(groups[0]), cols) if one else None))
            start += a.size
        # every block one agent (one agent per round, the papers' experiments): each run's
        # group is drawn into one buffer and the agents' columns are read in one gather (a
        # one-agent block lies in one group: every plan then carries its (group, column))
        keyed = [one for _, one in self._plan if one is not None]
        self._single = [(st, one[0]) for st, one in zip(self.streams, keyed, strict=True)
                        ] if all(a.size == 1 for a in self.blocks) else None
        if self._single is not None:
            self._runs = np.arange(len(self.blocks))
            self._cols = np.array([one[1] for one in keyed], dtype=np.int64)

    def draw(self, round: int, purpose: str | int, shape=(), kind: str = "normal"
             ) -> np.ndarray:
        """Standard normals (``kind='normal'``) or open uniforms (``'uniform'``), shape
        ``(n_0 + ... + n_{R-1}, *shape)``.

        Parameters
        ----------
        round : int
        purpose : str or int
        shape : int or tuple of int
            Per-agent shape.
        kind : {'normal', 'uniform'}

        Returns
        -------
        ndarray of float64, shape ``(n_0 + ... + n_{R-1}, *shape)``
        """
        sampler = _SAMPLERS.get(kind)
        if sampler is None:
            raise ValueError(f"argument 'kind' must be one of {sorted(_SAMPLERS)}, got "
                             f"{kind!r}")
        shape = _check_shape(shape)
        rnd, code = _check_round(round), purpose_code(purpose)
        m = math.prod(shape)
        if self._single is not None:
            groups = np.empty((len(self._single), m, AGENT_GROUP))
            for k, (st, g) in enumerate(self._single):
                sampler(st._rekey(g, rnd, code), (m, AGENT_GROUP), out=groups[k])
            return groups[self._runs, :, self._cols].reshape((self.size, *shape))
        out = np.empty((self.size, m))
        for st, a, (rows, one) in zip(self.streams, self.blocks, self._plan, strict=True):
            if one is None:
                out[rows] = st._rows(a, rnd, code, m, sampler)
            else:
                # AgentStreams._rows' one-group case (the same copy of the same draws)
                cols = sampler(st._rekey(one[0], rnd, code), (m, AGENT_GROUP))
                out[rows] = cols[:, one[1]].T
        return out.reshape((self.size, *shape))
