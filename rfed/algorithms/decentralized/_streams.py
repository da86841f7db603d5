"""Keyed randomness of the decentralized algorithms: per-agent draws that do not depend on blocks.

A decentralized state keeps the run's ``seed`` (drawn once from the run's generator at ``init``)
and its round ``t``. Per-agent randomness (minibatches, noise, rand-k indices) for the agents of
the block a process owns comes from :class:`rfed.randomness.AgentStreams` keyed by
``(seed, agent, t, purpose)``; public randomness (activation, node sampling) from
:func:`rfed.randomness.public_generator` keyed by ``(seed, t, purpose)``. The same seed then gives
the same run whatever the number of processes, and a checkpoint is the state.

Secure mode (a :class:`rfed.privacy.secure.SecureRandom` run generator) keeps the OS randomness:
:func:`agent_draws` returns the run's generator itself (not replayable, by design).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rfed.privacy.secure import is_secure
from rfed.randomness import (
    AgentBlock,
    AgentStreams,
    _check_round,
    _open_uniform,
    _standard_normal,
    _uniform_ranks,
    purpose_code,
    shared_streams,
)

__all__ = ["AGENTS_PER_STREAM", "KeyedDraws", "PlannedRounds", "agent_draws", "run_seed"]

#: The keyed streams' layout of every decentralized algorithm (:class:`AgentStreams`' argument
#: ``agents_per_stream``): groups of 16 consecutive agents share one Philox stream. A round
#: draws for whole blocks of agents with consecutive ids (up to 10^6), which the group layout
#: serves with one re-keying per 16 agents; one stream per agent would pay a Python-level
#: re-keying per agent and make a 10^5-agent round several times slower
#: (``benchmarks/bench_streams.py``). Part of every decentralized run's definition.
AGENTS_PER_STREAM = 16


class KeyedDraws:
    """A random source for one block of agents, one round and one purpose.

    It serves the generator methods the algorithms and mechanisms call
    (``standard_normal``, ``random``, ``laplace``) with a leading agent axis: row ``a`` of every
    draw is agent ``agents[a]``'s keyed stream, so an agent draws the same numbers in any block.
    Each call restarts the stream: one purpose per call site.

    Parameters
    ----------
    streams : AgentStreams
    agents : ndarray of int, shape ``(A,)``
        Global ids of the rows.
    round : int
    purpose : str
    out, work : float64 arrays, optional
        Arrays reused from round to round (C-contiguous): a draw whose shape is ``out``'s is
        written into ``out`` (and returned), and :meth:`laplace` forms its second array in
        ``work``, so that no fresh array is faulted in; the same values. A caller must not
        keep a draw made into ``out`` past the next one.
    """

    is_keyed_draws = True

    def __init__(self, streams: AgentStreams, agents: np.ndarray | AgentBlock, round: int,
                 purpose: str, *, out: np.ndarray | None = None,
                 work: np.ndarray | None = None):
        self.streams = streams
        # the ids checked and their groups derived once (a block is shared by a round's draws)
        self.block = agents if type(agents) is AgentBlock else streams.block(
            np.asarray(agents, dtype=np.int64))
        self.agents = self.block.agents
        self.round = int(round)
        self.purpose = purpose
        self._round = _check_round(self.round)
        self._code = purpose_code(purpose)
        self.out, self.work = out, work

    def _rest(self, size: int | tuple[int, ...]) -> tuple[int, ...]:
        if type(size) is not tuple or not all(type(s) is int for s in size):
            size = ((int(size),) if isinstance(size, (int, np.integer))
                    else tuple(int(s) for s in size))
        if not size or size[0] != self.block.size:
            raise ValueError(f"keyed draws for {self.block.size} agents need a leading agent "
                             f"axis of that length, got shape {size}")
        return size[1:]

    def _sample(self, size, sampler) -> np.ndarray:
        rest = self._rest(size)
        m = math.prod(rest)
        out = (_fits(self.out, (self.block.size, *rest)) if sampler is not _uniform_ranks
               else None)
        rows = self.streams.block_rows(self.block, self._round, self._code, m, sampler,
                                       None if out is None else out.reshape(self.block.size, m))
        return rows if len(rest) == 1 else rows.reshape((self.block.size, *rest))

    def standard_normal(self, size) -> np.ndarray:
        """``N(0, 1)`` draws of shape ``size`` (``size[0] = len(agents)``)."""
        return self._sample(size, _standard_normal)

    def random(self, size) -> np.ndarray:
        """Uniforms in ``(0, 1)`` of shape ``size``."""
        return self._sample(size, _open_uniform)

    def uniform_ranks(self, size) -> np.ndarray:
        """The ranks ``k`` (uint64, shape ``size``) of the uniforms :meth:`random` draws,
        ``(k + 1/2) 2^-53`` (:func:`rfed.randomness.ranks_to_uniforms`): they order and tie
        exactly as those uniforms, for a caller that only compares them (the smallest of a
        row's minibatch keys)."""
        return self._sample(size, _uniform_ranks)

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size=None) -> np.ndarray:
        """Laplace draws by inversion: ``loc - scale sign(u - 1/2) log(1 - 2|u - 1/2|)``
        (evaluated in that order, in place: two arrays the size of the draw, not eight)."""
        c = self.random(size)
        c -= 0.5
        tail = np.abs(c, out=_fits(self.work, c.shape))
        tail *= -2.0
        np.log1p(tail, out=tail)
        out = np.sign(c, out=c)
        out *= scale
        out *= tail
        return np.subtract(loc, out, out=out)

    def __repr__(self) -> str:
        return (f"KeyedDraws(seed={self.streams.seed}, {self.agents.size} agents, "
                f"round={self.round}, purpose={self.purpose!r})")


def _fits(a: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """``a`` when it is a C-contiguous float64 array of ``shape``, else None (a fresh array)."""
    if (a is not None and a.shape == shape and a.dtype == np.float64
            and a.flags.c_contiguous):
        return a
    return None


def run_seed(rng: Any) -> int:
    """The seed of the run's keyed streams, drawn once from the run's generator."""
    return int(rng.integers(0, 2**62))


def agent_draws(rng: Any, seed: int, agents: np.ndarray | AgentBlock, round: int,
                purpose: str, *, out: np.ndarray | None = None,
                work: np.ndarray | None = None, agents_per_stream: int | None = None) -> Any:
    """Per-agent draws of ``agents`` (ids, or a block of the run's streams) for ``(round,
    purpose)``: keyed (into ``out`` and ``work`` when they fit, :class:`KeyedDraws`), or the
    OS source in secure mode. ``agents_per_stream``: the streams' layout (None:
    :data:`AGENTS_PER_STREAM`; an algorithm that draws for a few agents of many per round may
    take 1, one stream per agent, so a draw does not generate its 15 neighbours' too)."""
    if is_secure(rng):
        return rng
    return KeyedDraws(_streams_of(seed, agents_per_stream), agents, round, purpose, out=out,
                      work=work)


def _streams_of(seed: int, agents_per_stream: int | None = None) -> AgentStreams:
    """The thread's reused :class:`AgentStreams` of ``seed`` and layout ``agents_per_stream``
    (:func:`rfed.randomness.shared_streams`; None: the module's :data:`AGENTS_PER_STREAM`,
    read at the call, so a benchmark may time the other layout)."""
    return shared_streams(seed, AGENTS_PER_STREAM if agents_per_stream is None
                          else agents_per_stream)


#: Largest schedule (agents x rounds of public draws) a :class:`PlannedRounds` keeps.
PLANNED_ENTRIES = 1 << 22


class PlannedRounds:
    """The public draws of a run's planned rounds, kept from the budget calibration's replay
    for the run to reuse instead of drawing them again.

    A public draw is a pure function of ``(seed, round)``
    (:func:`rfed.randomness.public_generator`), so a kept draw is the one the round would make:
    reusing it changes no bit. Each round takes its draw once (memory shrinks as the run goes);
    a round without a kept draw (a resumed run, a schedule above :data:`PLANNED_ENTRIES`
    entries, another process of an engine) draws it anew.
    """

    def __init__(self) -> None:
        self.seed: int | None = None
        self._draws: dict[int, Any] = {}

    def start(self, seed: int, n_agents: int, n_rounds: int) -> bool:
        """Forget what was kept; return whether a schedule of this size is kept for ``seed``."""
        self._draws = {}
        self.seed = seed if n_agents * n_rounds <= PLANNED_ENTRIES else None
        return self.seed is not None

    def keep(self, t: int, draw: Any) -> None:
        """Keep round ``t``'s draw (after :meth:`start` returned True)."""
        self._draws[t] = draw

    def take(self, seed: int, t: int) -> Any:
        """Round ``t``'s kept draw of the run of ``seed`` (removed), or ``None``."""
        if seed != self.seed:
            return None
        return self._draws.pop(t, None)
