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

A run's per-agent streams have a layout, the number ``P`` of consecutive agent ids that share
one Philox stream (``agents_per_stream``, a power of two chosen once per run by the algorithm's
access pattern and part of the run's definition). The stream ``g = agent // P`` is numpy's
counter-based Philox4x64-10 (Salmon, Moraes, Dror and Shaw, SC 2011) with key ``(seed, tag)``
and starting counter ``(0, g, round, purpose)``, which only ever increments its first word, so no
two streams of a run overlap. Agent ``r = agent % P`` of the stream takes its draws ``r, r + P,
r + 2P, ...``, so its first ``m`` values do not depend on how many values are asked for (blocks
padded to different lengths agree), on which other agents are in the block, or on the process
that draws them. The two layouts rfed uses:

* ``P = 1``, one stream per agent: a draw for an agent costs only that agent's values, but a
  block pays a Python-level re-keying and a sampler call per agent.
  The federated trainers use it: their draws are per selected client, often one agent alone.
* ``P = 16``, groups of 16 agents: a block loops over the groups it touches (``A / 16``
  re-keyings), never over agents, but a block holding part of a group draws the whole group
  (16 times the values an isolated agent uses). The decentralized algorithms use it: every
  round draws for blocks of up to 10^6 agents with consecutive ids.

``benchmarks/bench_streams.py`` measures both layouts on both access patterns (its last table:
``benchmarks/results/bench_streams.txt``; the performance guide quotes it). A block's ids are
checked once (:meth:`AgentStreams.block`) for the several draws of a round, and a caller that
only compares uniforms (the smallest minibatch key) may take their integer ranks instead
(:func:`ranks_to_uniforms` maps them back bit for bit).

Secure mode does not use these streams: its randomness comes from the operating system and is not
replayable by design.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
import zlib
from typing import Any

import numpy as np

__all__ = ["check_agents_per_stream", "purpose_code", "public_generator", "ranks_to_uniforms",
           "AgentBlock", "AgentStreams", "StackedStreams", "shared_streams"]

_PUBLIC_TAG = 0x5055424C  # "PUBL": keeps public streams apart from the per-agent ones
_AGENT_TAG = 0x4147454E  # "AGEN"
#: Largest number of agents per stream (a group's draws are ``(m, P)`` arrays).
_MAX_AGENTS_PER_STREAM = 2**16
#: Scratch arrays an AgentStreams keeps for its multi-group draws (one per draws per group and
#: dtype, sliced to the groups of each draw).
_ROWS_BUFFERS = 4

def _uniforms_of_raw(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # (k + 1/2) 2^-53 with k = raw >> 11 of raw 64-bit Philox outputs: never 0 or 1, so
    # inversions (log, ndtri) stay finite. For the range 2^53, numpy's bounded 64-bit integers
    # (Lemire's method) are k = raw >> 11 and never reject, so these are the uniforms of
    # gen.integers(0, 2**53); and (k + 1/2) 2^-53 = fl(2k + 1) 2^-54 exactly (float(k) + 1/2
    # rounds the 54-bit odd number 2k + 1 the way its conversion does, and powers of two scale
    # exactly): one conversion-and-scale pass into ``out``. ``raw`` is overwritten.
    raw >>= np.uint64(10)
    raw |= np.uint64(1)
    return np.multiply(raw, 2.0**-54, out=out)


def _ranks_of_raw(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # the k of the open uniforms (k + 1/2) 2^-53 that _uniforms_of_raw makes of the same raw
    # words (k = raw >> 11), as uint64: a strictly increasing map, so the ranks order and tie
    # exactly as those uniforms do, one pass cheaper (for a caller that only compares them)
    return np.right_shift(raw, np.uint64(11), out=raw if out is None else out)


def _open_uniform(gen: np.random.Generator, size: tuple[int, ...],
                  out: np.ndarray | None = None) -> np.ndarray:
    return _uniforms_of_raw(gen.bit_generator.random_raw(size), out)


def _uniform_ranks(gen: np.random.Generator, size: tuple[int, ...],
                   out: np.ndarray | None = None) -> np.ndarray:
    return _ranks_of_raw(gen.bit_generator.random_raw(size), out)


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


def _fill_rows_by_counter(direct: _PhiloxCounter, fill, rnd: int, code: int, ids,
                          rows: np.ndarray) -> None:
    """Row ``i`` of ``rows`` from ``fill(out=row)`` with the Philox counter keyed to
    ``(0, ids[i], rnd, code)`` and its buffer emptied: the state assignment of re-keying,
    written into the generator directly (this loop is the per-agent cost of every draw)."""
    counter, pos, half = direct.counter, direct.buffer_pos, direct.has_uint32
    counter[2], counter[3] = rnd, code
    # Python ints: a ctypes element takes them faster than numpy integers
    for row, agent in zip(rows, ids.tolist() if type(ids) is np.ndarray else ids, strict=True):
        counter[0], counter[1] = 0, agent
        pos.value, half.value = 4, 0
        fill(out=row)


def _standard_normal(gen: np.random.Generator, size: tuple[int, ...],
                     out: np.ndarray | None = None) -> np.ndarray:
    return gen.standard_normal(size, out=out)


#: The samplers of :meth:`AgentStreams.uniform` and :meth:`AgentStreams.normal`, by name.
_SAMPLERS = {"uniform": _open_uniform, "normal": _standard_normal}
#: The dtype of each sampler's draws (float64 unless listed).
_SAMPLER_DTYPES = {_uniform_ranks: np.uint64}
#: The samplers that read raw 64-bit words, and the conversion of a block's words (``(A, m)``
#: uint64, overwritten) into their values: a block reads each agent's words and converts once.
_OF_RAW = {_open_uniform: _uniforms_of_raw, _uniform_ranks: _ranks_of_raw}


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


def check_agents_per_stream(agents_per_stream) -> int:
    """The checked layout ``agents_per_stream``: a power of two in ``[1, 2**16]``.

    Parameters
    ----------
    agents_per_stream : int
        Consecutive agent ids sharing one Philox stream (1: one stream per agent).

    Returns
    -------
    int
    """
    p = agents_per_stream
    if (isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 1 <= p
            <= _MAX_AGENTS_PER_STREAM or p & (p - 1)):
        raise ValueError(f"argument 'agents_per_stream' must be a power of two in [1, "
                         f"{_MAX_AGENTS_PER_STREAM}] (1: one stream per agent; 16: groups of "
                         f"16 agents), got {agents_per_stream!r}")
    return int(p)


class AgentBlock:
    """Checked agent ids of a block and the streams their draws come from, for several draws
    of the same agents.

    Built by :meth:`AgentStreams.block` (ids already checked: 1-d int64 in ``[0, 2**32)``).

    Attributes
    ----------
    agents : ndarray of int64, shape ``(A,)``
    size : int
        ``A``.
    agents_per_stream : int
        The layout ``P`` the block was planned for.
    ids : list of int or None
        The ids as Python ints (``P = 1``: the per-agent loop re-keys with them), else None.
    groups : list of int or None
        ``P > 1``: the streams the block touches, in the order of their first agent.
    where : ndarray of int, shape ``(A,)``, or None
        ``P > 1``: position of each agent's stream in ``groups`` (None for one stream).
    cols : ndarray of int64, shape ``(A,)``, or None
        ``P > 1``: each agent's column in its stream's draws (``agent % P``).

    Parameters
    ----------
    agents : ndarray of int64, shape ``(A,)``
        Checked ids.
    agents_per_stream : int
        A checked layout (:func:`check_agents_per_stream`).
    """

    __slots__ = ("agents", "size", "agents_per_stream", "ids", "groups", "where", "cols",
                 "_consecutive")

    def __init__(self, agents: np.ndarray, agents_per_stream: int):
        a = agents
        self.agents, self.size, self.agents_per_stream = a, a.size, agents_per_stream
        self.ids: list[int] | None = None
        self.groups: list[int] | None = None
        self.where: np.ndarray | None = None
        self.cols: np.ndarray | None = None
        self._consecutive: bool | None = None
        if agents_per_stream == 1:
            self.ids = a.tolist()
            return
        group_of = a // agents_per_stream
        self.cols = a % agents_per_stream
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

    @property
    def consecutive(self) -> bool:
        """Whether the ids are ``agents[0], agents[0] + 1, ...`` (computed on first use)."""
        if self._consecutive is None:
            a = self.agents
            self._consecutive = bool(a.size < 2 or (int(a[-1]) - int(a[0]) == a.size - 1
                                                    and np.all(a[1:] > a[:-1])))
        return self._consecutive


def _copy_consecutive(rows: np.ndarray, offset: int, out: np.ndarray) -> np.ndarray:
    """``out[i] = rows[(offset + i) // P, :, (offset + i) % P]``: the rows of consecutive ids
    (the first at column ``offset`` of the first group) from the groups' draws ``(G, m, P)``,
    as ``rows[block.where, :, block.cols]`` gives them, without its fresh array.

    Parameters
    ----------
    rows : ndarray, shape ``(G, m, P)``
    offset : int
        ``agents[0] % P``.
    out : ndarray, shape ``(n, m)``, C-contiguous

    Returns
    -------
    ndarray
        ``out``.
    """
    n, (_, m, p) = out.shape[0], rows.shape
    i = g = 0
    if offset:
        i, g = min(p - offset, n), 1
        out[:i] = rows[0, :, offset:offset + i].T
    full = (n - i) // p
    if full:
        np.copyto(out[i:i + full * p].reshape(full, p, m), rows[g:g + full].transpose(0, 2, 1))
        i, g = i + full * p, g + full
    if i < n:
        out[i:] = rows[g, :, : n - i].T
    return out


#: Blocks up to this many agents are range-checked with Python's min and max and their groups
#: derived with Python sets (a few us), larger ones with array operations.
_FEW_AGENTS = 512

class _PhiloxCounter:
    """Direct writes of a numpy Philox's counter and buffer state: a re-keying in about 0.3 us
    instead of the state setter's 3-5 us (which parses a dict).

    numpy's ``philox_state`` (behind ``Philox.ctypes.state_address``) starts with pointers to
    the counter (4 x uint64) and key (2 x uint64), then ``int buffer_pos``, ``uint64
    buffer[4]``, ``int has_uint32`` and ``uint32 uinteger``. A re-keying writes the counter,
    sets ``buffer_pos = 4`` (buffer empty) and ``has_uint32 = 0``: the state the setter leaves
    from :attr:`AgentStreams._fresh`. :func:`_philox_counter` checks that layout once per
    process against the setter's draws and returns ``None`` (the setter is used) when it
    differs.
    """

    __slots__ = ("bits", "counter", "buffer_pos", "has_uint32")

    def __init__(self, bits: np.random.Philox):
        addr = int(bits.ctypes.state_address)
        ctr_addr, _ = (ctypes.c_uint64 * 2).from_address(addr)
        self.bits = bits  # the views below read its memory: keep it alive with them
        self.counter = (ctypes.c_uint64 * 4).from_address(ctr_addr)
        self.buffer_pos = ctypes.c_int.from_address(addr + 16)
        self.has_uint32 = ctypes.c_int.from_address(addr + 16 + 8 + 32)

    def set(self, counter: list[int]) -> None:
        """Counter ``(c0, c1, c2, c3)``, buffer empty, no cached 32-bit half."""
        c = self.counter
        c[0], c[1], c[2], c[3] = counter
        self.buffer_pos.value = 4
        self.has_uint32.value = 0


#: Whether :class:`_PhiloxCounter` matches this numpy's Philox (checked on first use).
_PHILOX_LAYOUT_OK: bool | None = None


#: numpy versions whose ``philox_state`` layout :class:`_PhiloxCounter` was verified on (the
#: struct is unchanged from 1.17 through 2.3; pyproject pins ``numpy<2.4``).
_VERIFIED_NUMPY = ((1, 26), (2, 3))


def _numpy_layout_known() -> bool:
    """Whether this numpy's version lies in :data:`_VERIFIED_NUMPY` (inclusive, major.minor)."""
    major, minor = (int(part) for part in np.__version__.split(".")[:2])
    return _VERIFIED_NUMPY[0] <= (major, minor) <= _VERIFIED_NUMPY[1]


def _philox_counter(bits: np.random.Philox) -> _PhiloxCounter | None:
    """A :class:`_PhiloxCounter` for ``bits`` when the layout check passes, else ``None``."""
    global _PHILOX_LAYOUT_OK
    if _PHILOX_LAYOUT_OK is None and not _numpy_layout_known():
        # an unverified numpy: do not even probe (a write through a misread pointer could
        # crash before the comparison below catches it); the state setter gives the same bits
        _PHILOX_LAYOUT_OK = False
    if _PHILOX_LAYOUT_OK is None:
        key = np.array([0x9E3779B97F4A7C15, _AGENT_TAG], dtype=np.uint64)
        probe = np.random.Philox(counter=0, key=key)
        gen = np.random.Generator(probe)
        gen.standard_normal(3)  # a partly used buffer and, below, a cached 32-bit half
        gen.integers(0, 2**32, size=1, dtype=np.uint32)
        try:
            _PhiloxCounter(probe).set([0, 2**40 + 3, 7, 2**31 + 5])
            direct = (gen.standard_normal(9), probe.random_raw(5))
        except (ValueError, TypeError, AttributeError):
            direct = None
        ref_bits = np.random.Philox(counter=[0, 2**40 + 3, 7, 2**31 + 5], key=key)
        ref = (np.random.Generator(ref_bits).standard_normal(9), ref_bits.random_raw(5))
        _PHILOX_LAYOUT_OK = direct is not None and all(
            np.array_equal(a, b) for a, b in zip(direct, ref, strict=True))
    return _PhiloxCounter(bits) if _PHILOX_LAYOUT_OK else None


class AgentStreams:
    """Per-agent keyed streams of one run: draws for a block of agents in one call.

    Parameters
    ----------
    seed : int
        The run's seed, in ``[0, 2**64)``.
    agents_per_stream : int
        The layout: consecutive agent ids sharing one Philox stream, a power of two in
        ``[1, 2**16]`` (1: one stream per agent, cheapest for a few scattered agents; 16:
        groups of 16, cheapest for large blocks; see the module docstring). Part of the run's
        definition: the two layouts draw different values.

    Notes
    -----
    An instance re-keys one cached Philox generator in place: share an instance between threads
    only with a lock (or give each thread its own; they draw the same values).

    Examples
    --------
    >>> streams = AgentStreams(seed=7, agents_per_stream=16)
    >>> noise = streams.normal([3, 5, 9], round=0, purpose="noise", shape=(4,))  # (3, 4)
    >>> np.array_equal(noise[1], streams.normal([5], 0, "noise", (4,))[0])
    True
    """

    def __init__(self, seed: int, *, agents_per_stream: int):
        self.seed = _check_seed(seed)
        self.agents_per_stream = check_agents_per_stream(agents_per_stream)
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
        # the groups' draws of multi-group calls (P > 1), by (shape, dtype), reused by the next
        # call of the same shape (every element is overwritten; a round draws a few shapes): at
        # 10^6 agents a fresh array of this size is faulted in by the kernel at every draw
        self._rows_buffers: dict[tuple, np.ndarray] = {}
        self._direct: _PhiloxCounter | None = _philox_counter(bits)

    def __getstate__(self) -> dict:
        # a copy or a pickle carries no scratch buffer and no view of this instance's memory
        state = {**self.__dict__, "_rows_buffers": {}}
        state.pop("_direct", None)
        return state

    def _counter_writer(self) -> _PhiloxCounter | None:
        """The direct counter writes of this instance's Philox (rebuilt after a copy or a
        load, which carry none), or ``None`` when the state setter must be used."""
        direct = self.__dict__.get("_direct")
        if direct is None or direct.bits is not self._bits:
            direct = self._direct = _philox_counter(self._bits)
        return direct

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
        """The checked ids ``agents`` ``(A,)`` and the streams their rows come from, for several
        draws of the same block (e.g. a round's minibatch, noise and compression draws): the
        ids are checked and the streams derived once.

        Parameters
        ----------
        agents : array_like of int, shape ``(A,)``

        Returns
        -------
        AgentBlock
        """
        return AgentBlock(self._agents(agents), self.agents_per_stream)

    def _rekey(self, stream: int, rnd: int, code: int) -> np.random.Generator:
        """The instance's generator at the start of the stream of ``(stream, round, purpose)``
        (``stream = agent // agents_per_stream``)."""
        # Philox4x64-10: the stream of (stream, round, purpose) starts at counter
        # (0, stream, round, purpose) and only ever increments the first word, so no two
        # streams of a run overlap
        direct = self._counter_writer()
        if direct is not None:
            direct.set([0, stream, rnd, code])
            return self._gen
        state = self._fresh
        state["state"]["counter"] = [0, stream, rnd, code]
        self._bits.state = state  # type: ignore[assignment]  # numpy's stubs want its TypedDict
        return self._gen

    def _draw(self, agents, round: int, purpose: str | int, shape, sampler) -> np.ndarray:
        block = (agents if type(agents) is AgentBlock
                 else AgentBlock(self._agents(agents), self.agents_per_stream))
        shape = _check_shape(shape)
        rnd, code = _check_round(round), purpose_code(purpose)
        m = math.prod(shape)
        return self.block_rows(block, rnd, code, m, sampler).reshape((block.size, *shape))

    def block_rows(self, block: AgentBlock, rnd: int, code: int, m: int, sampler,
                   out: np.ndarray | None = None) -> np.ndarray:
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
        out : ndarray, shape ``(block.size, m)``, optional
            A C-contiguous array of the sampler's dtype to write the draws into (e.g. one a
            run reuses from round to round, so that no fresh array is faulted in): the same
            values. Default: a fresh array.

        Returns
        -------
        ndarray, shape ``(block.size, m)``
            ``out`` when given.
        """
        p = self.agents_per_stream
        if block.agents_per_stream != p:
            raise ValueError(f"argument 'block' was planned for agents_per_stream="
                             f"{block.agents_per_stream}, these streams use {p}")
        if out is not None and (out.shape != (block.size, m) or not out.flags.c_contiguous
                                or out.dtype != _SAMPLER_DTYPES.get(sampler, np.float64)):
            raise ValueError(f"argument 'out' must be a C-contiguous array of shape "
                             f"{(block.size, m)} and dtype "
                             f"{np.dtype(_SAMPLER_DTYPES.get(sampler, np.float64))}, got "
                             f"{out.shape} {out.dtype}")
        if p > 1:
            rows = self._group_rows(block, rnd, code, m, sampler, out)
            if out is None or rows is out:
                return rows
            np.copyto(out, rows)
            return out
        # one re-keying of the cached generator per agent (the state assignment of _rekey,
        # inlined: this loop is the per-agent cost of every draw)
        state, bits, ids = self._fresh, self._bits, block.ids
        assert ids is not None
        inner = state["state"]
        direct = self._counter_writer()
        of_raw = _OF_RAW.get(sampler)
        if of_raw is None:
            if out is None:
                out = np.empty((block.size, m))
            gen = self._gen
            if direct is not None:
                # normals straight from the generator's method (the sampler's call, one frame
                # less per agent)
                fill = (gen.standard_normal if sampler is _standard_normal
                        else functools.partial(sampler, gen, (m,)))
                _fill_rows_by_counter(direct, fill, rnd, code, ids, out)
                return out
            for row, agent in zip(out, ids, strict=True):
                inner["counter"] = [0, agent, rnd, code]
                bits.state = state  # type: ignore[assignment]  # numpy's stubs: a TypedDict
                sampler(gen, (m,), out=row)
            return out
        if of_raw is _uniforms_of_raw and direct is not None:
            # numpy's uniforms k 2^-53 of the same words (k = raw >> 11, Generator.random's
            # next_double), written per agent like the normals; + 2^-54 then gives (k + 1/2)
            # 2^-53 correctly rounded, as _uniforms_of_raw's conversion of 2k + 1 rounds it:
            # the same values without the per-agent raw arrays
            if out is None:
                out = np.empty((block.size, m))
            _fill_rows_by_counter(direct, self._gen.random, rnd, code, ids, out)
            return np.add(out, 2.0**-54, out=out)
        # raw words agent by agent, converted for the whole block at once (ranks in place of
        # their raw words: in ``out`` when given)
        raw: np.ndarray = (out if out is not None and of_raw is _ranks_of_raw
                           else np.empty((block.size, m), dtype=np.uint64))
        for row, agent in zip(raw, ids, strict=True):
            if direct is not None:
                direct.set([0, agent, rnd, code])
            else:
                inner["counter"] = [0, agent, rnd, code]
                bits.state = state  # type: ignore[assignment]
            row[...] = bits.random_raw(m)
        return of_raw(raw, out)

    def _group_rows(self, block: AgentBlock, rnd: int, code: int, m: int, sampler,
                    out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`block_rows` for ``P > 1``: one re-keying per stream the block touches; the
        rows of a block of consecutive ids are copied into ``out`` when given (any other
        block's come fresh, for the caller to copy)."""
        p, groups = self.agents_per_stream, block.groups
        assert groups is not None and block.cols is not None
        if len(groups) == 1:
            # one group (a client, or a small block): no gather over groups
            cols = sampler(self._rekey(groups[0], rnd, code), (m, p))
            return cols[:, block.cols].T
        dtype = _SAMPLER_DTYPES.get(sampler, np.float64)
        # one buffer per (draws, dtype), grown with some room and sliced to the groups: a
        # round whose active agents touch another number of groups reuses it (no fresh
        # array faulted in every round); each group's rows are written whole, the same values
        kept = self._rows_buffers.get(((m, p), dtype))
        if kept is None or kept.shape[0] < len(groups):
            if len(self._rows_buffers) >= _ROWS_BUFFERS:
                self._rows_buffers.clear()
            kept = self._rows_buffers[((m, p), dtype)] = np.empty(
                (len(groups) + len(groups) // 8, m, p), dtype)
        rows = kept[: len(groups)]
        for k, g in enumerate(groups):
            # element j of the group's agent r is draw j * P + r: it does not depend on how
            # many elements are asked for, so a block padded to another length agrees
            sampler(self._rekey(g, rnd, code), (m, p), out=rows[k])
        if out is not None and block.consecutive:
            return _copy_consecutive(rows, int(block.agents[0]) % p, out)
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
        return f"AgentStreams(seed={self.seed}, agents_per_stream={self.agents_per_stream})"



_SHARED = threading.local()


def shared_streams(seed: int, agents_per_stream: int) -> AgentStreams:
    """The :class:`AgentStreams` of ``(seed, agents_per_stream)`` kept for reuse by this thread.

    Building one costs tens of microseconds (a Philox, a Generator and their state), more than a
    small block's draw, and every draw re-keys it from scratch, so reusing it across rounds and
    callers changes no bit. One cache per thread (an instance re-keys its generator in place).

    Parameters
    ----------
    seed : int
    agents_per_stream : int

    Returns
    -------
    AgentStreams
    """
    cache = getattr(_SHARED, "streams", None)
    if cache is None:
        cache = _SHARED.streams = {}
    key = (seed, agents_per_stream)
    streams = cache.get(key)
    if streams is None:
        if len(cache) >= 64:   # runs of one process rarely interleave more seeds
            cache.clear()
        streams = cache[key] = AgentStreams(seed, agents_per_stream=agents_per_stream)
    return streams


class StackedStreams:
    """Several runs' blocks of agents (one seed each), drawn from as one stacked block.

    Rows ``[n_0 + ... + n_{r-1}, n_0 + ... + n_r)`` of :meth:`draw` are exactly what
    ``AgentStreams(seeds[r], agents_per_stream=agents_per_stream)`` draws for ``blocks[r]``;
    the ids are checked once here and the round, purpose and shape once per draw, for all runs
    (a multi-run driver draws at every local step).

    Parameters
    ----------
    seeds : list of int, length ``R``
    blocks : list of int arrays, length ``R``
        Each run's agent ids, shape ``(n_r,)``.
    agents_per_stream : int
        The runs' layout (:class:`AgentStreams`).
    """

    def __init__(self, seeds: list[int], blocks: list[np.ndarray], *, agents_per_stream: int):
        if len(seeds) != len(blocks) or not len(seeds):
            raise ValueError(f"arguments 'seeds' and 'blocks' must be non-empty and of the same "
                             f"length (one per run), got {len(seeds)} and {len(blocks)}")
        # the thread's instances, reused across rounds (a round builds one of these per draw
        # site; the same draws)
        self.streams = [shared_streams(seed, agents_per_stream) for seed in seeds]
        self.blocks = [st._agents(a) for st, a in zip(self.streams, blocks, strict=True)]
        self.size = sum(a.size for a in self.blocks)
        self._agent_blocks = [AgentBlock(a, self.streams[0].agents_per_stream)
                              for a in self.blocks]

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
        if len(self.blocks) == 1:
            # written into an array of the draw's own shape: the caller gets an array that owns
            # its memory (no view of a 2-d buffer), which it may overwrite in place
            drawn = np.empty((self.size, *shape), _SAMPLER_DTYPES.get(sampler, np.float64))
            self.streams[0].block_rows(self._agent_blocks[0], rnd, code, m, sampler,
                                       out=drawn.reshape(self.size, m))
            return drawn
        if sampler is _standard_normal and self._agent_blocks[0].ids is not None:
            drawn = np.empty((self.size, *shape))
            if self._normal_rows(rnd, code, drawn.reshape(self.size, m)):
                return drawn
        rows = np.concatenate([st.block_rows(block, rnd, code, m, sampler) for st, block
                               in zip(self.streams, self._agent_blocks, strict=True)])
        return rows.reshape((self.size, *shape))

    def _normal_rows(self, rnd: int, code: int, out: np.ndarray) -> bool:
        """One stream per agent: every run's normals written into the rows of ``out``
        ``(size, m)``, the per-agent loop of :meth:`AgentStreams.block_rows` run over all the
        runs' agents in one call (a round of R runs with one agent each draws R rows, and the
        per-call checks of ``block_rows`` were most of a draw's time); the same values.
        ``False`` (nothing drawn) when some stream has no direct counter writes."""
        writers = [st._counter_writer() for st in self.streams]
        if any(w is None for w in writers):
            return False
        lo = 0
        for st, block, direct in zip(self.streams, self._agent_blocks, writers, strict=True):
            assert direct is not None and block.ids is not None
            _fill_rows_by_counter(direct, st._gen.standard_normal, rnd, code, block.ids,
                                  out[lo:lo + block.size])
            lo += block.size
        return True
