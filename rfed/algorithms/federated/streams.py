"""A block of agents' keyed random streams behind the ``numpy.random.Generator`` interface.

The local trainers and :func:`rfed.privacy.mechanisms.gaussian_mechanism` draw batched arrays
whose first axis is the block's agents (minibatch keys ``(A, max N_i)``, tangent noise
``(A, *point_shape)``, index picks ``(A, m)``). :class:`AgentBlockGenerator` answers each such
call with row ``a`` taken from agent ``agents[a]``'s own stream of
:class:`rfed.randomness.AgentStreams`, keyed by ``(seed, agent, round, purpose#call)`` where
``call`` counts the draws made so far in the round. Row ``a`` is the prefix of that stream, so
it does not depend on which other agents share the block (nor on ``max N_i`` of the block):
the same seed gives every agent the same minibatches and noise whether it is trained alone, in
one array with everyone, in several blocks or in another process.

Secure mode never comes here: its draws come from the operating system (not replayable).
"""

from __future__ import annotations

import numpy as np

from rfed.randomness import StackedStreams

__all__ = ["AGENTS_PER_STREAM", "AgentBlockGenerator"]

#: The keyed streams' layout of the federated trainers (:class:`rfed.randomness.AgentStreams`'
#: argument ``agents_per_stream``): one Philox stream per agent. Their draws are per selected
#: client, often one agent alone (PriRFed's experiments: one agent per round), and a group
#: layout would draw 16 times the values such a draw uses (``benchmarks/bench_streams.py``).
#: Part of every federated run's definition.
AGENTS_PER_STREAM = 1


class AgentBlockGenerator(np.random.Generator):
    """Per-agent keyed draws for one block of agents in one round.

    Implements ``random``, ``standard_normal`` and ``integers`` for sizes whose first axis is
    the block (``size[0] == len(agents)``); every other draw raises ``NotImplementedError``
    instead of silently falling back to a stream shared by the block.

    Parameters
    ----------
    seed : int
        The run's seed, in ``[0, 2**64)``.
    agents : int array, shape ``(A,)``
        Global ids of the block's agents, in the order of the rows drawn.
    round : int
        The federated round (0-based).
    purpose : str
        Prefix of the purposes (e.g. ``'local'``).
    agents_per_stream : int, default :data:`AGENTS_PER_STREAM`
        The streams' layout (:class:`rfed.randomness.AgentStreams`).
    """

    def __init__(self, seed: int, agents: np.ndarray, round: int, purpose: str = "local", *,
                 agents_per_stream: int = AGENTS_PER_STREAM):
        # one block is the one-run case of the stacked draws (the same rows): the ids, the
        # round and the block's group layout are checked and planned once here, not per draw
        self._setup(StackedStreams([seed], [np.asarray(agents)],
                                   agents_per_stream=agents_per_stream), round, purpose)

    def _setup(self, stacked: StackedStreams, round: int, purpose: str) -> None:
        # the base bit generator is never drawn from (every drawing method is overridden)
        super().__init__(np.random.PCG64(0))
        self._stacked = stacked
        self.streams = stacked.streams[0]
        self.agents = (stacked.blocks[0] if len(stacked.blocks) == 1
                       else np.concatenate(stacked.blocks))
        self.round = int(round)
        self.purpose = str(purpose)
        self.calls = 0

    @classmethod
    def stacked(cls, seeds: list[int], blocks: list[np.ndarray], round: int,
                purpose: str = "local", *, agents_per_stream: int = AGENTS_PER_STREAM
                ) -> AgentBlockGenerator:
        """The blocks of several runs (one seed each) stacked on the agent axis.

        Rows ``[n_0 + ... + n_{r-1}, n_0 + ... + n_r)`` of every draw are what
        ``AgentBlockGenerator(seeds[r], blocks[r], round, purpose)`` draws, so a multi-run
        driver gives each run exactly the numbers it draws alone.

        Parameters
        ----------
        seeds : list of int, length ``R``
        blocks : list of int arrays, length ``R``
            The agents of each run's block, shapes ``(n_r,)``.
        round : int
        purpose : str
        agents_per_stream : int, default :data:`AGENTS_PER_STREAM`
            The runs' layout.

        Returns
        -------
        AgentBlockGenerator
            One generator drawing the stacked blocks.
        """
        if len(seeds) != len(blocks) or not seeds:
            raise ValueError(f"arguments 'seeds' and 'blocks' must be non-empty and of the same "
                             f"length, got {len(seeds)} and {len(blocks)}")
        gen = cls.__new__(cls)
        gen._setup(StackedStreams(seeds, blocks, agents_per_stream=agents_per_stream), round,
                   purpose)
        return gen

    def _rows(self, kind: str, purpose: str, rest: tuple[int, ...]) -> np.ndarray:
        """The block's rows (each run's from its own streams, stacked in run order)."""
        return self._stacked.draw(self.round, purpose, rest, kind)

    def _key(self, size) -> tuple[str, tuple[int, ...]]:
        shape = size if type(size) is tuple else (int(size),) if isinstance(
            size, (int, np.integer)) else tuple(() if size is None else size)
        if not shape or shape[0] != self.agents.size:
            raise ValueError(
                f"AgentBlockGenerator draws one row per agent: argument 'size' must start with "
                f"the block's {self.agents.size} agents, got {size!r}"
            )
        purpose = f"{self.purpose}#{self.calls}"
        self.calls += 1
        return purpose, shape[1:]

    # The three draws below narrow numpy.random.Generator's: 'size' must name the block's agents
    # (a scalar draw is refused), so they always return an array and Generator's scalar
    # overloads do not apply; mypy reports the narrowing as an incompatible override.
    def random(  # type: ignore[override]
        self, size=None, dtype=np.float64, out=None
    ) -> np.ndarray:
        """Uniform floats on [0, 1), row ``a`` from agent ``agents[a]``'s stream.

        Parameters
        ----------
        size : int or tuple of int
            Shape of the draw; its first entry must be the block's number of agents.
        dtype, out
            Accepted for numpy's signature; float64, new array.

        Returns
        -------
        ndarray, shape ``size``
        """
        purpose, rest = self._key(size)
        return self._rows("uniform", purpose, rest)

    def standard_normal(  # type: ignore[override]
        self, size=None, dtype=np.float64, out=None
    ) -> np.ndarray:
        """Standard normal floats, row ``a`` from agent ``agents[a]``'s stream.

        Parameters
        ----------
        size : int or tuple of int
            Shape of the draw; its first entry must be the block's number of agents.
        dtype, out
            Accepted for numpy's signature; float64, new array.

        Returns
        -------
        ndarray, shape ``size``
        """
        purpose, rest = self._key(size)
        return self._rows("normal", purpose, rest)

    def integers(  # type: ignore[override]
        self, low, high=None, size=None, dtype=np.int64, endpoint=False
    ) -> np.ndarray:
        """Uniform integers in ``[low, high)``, row ``a`` from agent ``agents[a]``'s stream.

        Parameters
        ----------
        low, high : int or array_like
            Bounds (``high=None``: ``[0, low)``), broadcast against the draw.
        size : int or tuple of int
            Shape of the draw; its first entry must be the block's number of agents.
        dtype : integer dtype
            Accepted for numpy's signature.
        endpoint : bool
            Include ``high``.

        Returns
        -------
        ndarray, shape ``size``
        """
        if high is None:
            low, high = 0, low
        low = np.asarray(low, dtype=np.int64)
        high = np.asarray(high, dtype=np.int64) + (1 if endpoint else 0)
        purpose, rest = self._key(size)
        u = self._rows("uniform", purpose, rest)
        span = np.broadcast_to(high - low, u.shape) if (high - low).ndim <= u.ndim else None
        if span is None or np.any(span < 1):
            raise ValueError(f"argument 'high' must exceed 'low' with one range per row, got "
                             f"low={low!r}, high={high!r}")
        return low + np.minimum(np.floor(u * span).astype(np.int64), span - 1)

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(
            "AgentBlockGenerator implements random, standard_normal and integers only (per-agent "
            "keyed rows); other draws would not be the same on every engine"
        )

    normal = uniform = choice = permutation = permuted = shuffle = _refuse
    exponential = standard_exponential = gamma = standard_gamma = binomial = _refuse
    poisson = beta = laplace = bytes = multivariate_normal = _refuse

    def __repr__(self) -> str:
        return (f"AgentBlockGenerator(seed={self.streams.seed}, agents={self.agents.size}, "
                f"round={self.round}, purpose={self.purpose!r}, "
                f"agents_per_stream={self.streams.agents_per_stream})")
