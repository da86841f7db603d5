"""Objectives split across agents: per-sample loss and Riemannian gradient on a manifold.

A :class:`Problem` holds a manifold, each agent's local data and a vectorized per-sample loss and
Riemannian gradient. The global objective is

.. math:: f(x) = \\sum_{i=1}^{N} \\frac{N_i}{\\sum_l N_l} f_i(x), \\qquad
          f_i(x) = \\frac{1}{N_i} \\sum_{j=1}^{N_i} f_{i,j}(x),

the data-size weighted average of the agents' empirical risks (PriRFed eq. 1.1).

Data layout: every data array has shape ``(n_agents, n_max, ...)``: agent ``i`` owns rows
``0..counts[i]-1``; rows past ``counts[i]`` are padding and never used. Equal splits have no
padding. Everything is batched over agents and samples: a call evaluates the gradients of
``A`` agents on ``b`` samples each at once.

Sharded data
------------
A process that serves a block of agents (an MPI rank, a Flower ClientApp) holds a *shard*:
:meth:`Problem.shard` (from a full problem) or :meth:`Problem.as_shard` (from a problem built
on the block's rows only, so the other agents' rows are never materialized) give an instance of
the same class whose data arrays have only the block's rows, and which keeps the PUBLIC facts
of the whole problem: ``n_agents``, every agent's ``counts`` (hence ``agent_weights``, ``mask``
and ``n_max``), the manifold, ``gradient_bound``, ``privacy_assumptions`` and a reference
point or cost that was set or computed before sharding. A shard answers the same global-id
calls as the full problem (``batch``, ``agent_data``, ``per_sample_grad``, ``per_sample_loss``,
``local_cost(x, agents)``, ``local_grad(x, agents)``, ``sample_batches``) for its own agents,
with the same bits, and raises ``ValueError`` naming the agent for any other agent. Whole-data
quantities raise too: the ``data`` attribute (which every pooled quantity such as a covariance
or a reference solver reads), ``local_cost(x)`` without agents, a reference not computed
before sharding, and ``cost``/``grad`` without a reducer. With ``reducer=`` a
:class:`rfed.networks.comm.Communicator` serving the same block, ``cost`` and ``grad`` are
reductions: each process weighs its agents' local values, the communicator gathers them in
agent order and sums in agent order (:meth:`~rfed.networks.comm.Communicator.agent_sum`), so
every process gets the one-process ``cost``/``grad`` bit for bit. Such a reduction is the
experimenter's evaluation of a simulation (the same numbers one process computes from every
agent's data), not a protocol release: the per-agent values it moves between processes are
data-dependent and are NOT charged to any privacy ledger, so a deployment whose processes are
distinct parties must not evaluate them. The reducer is engine state and is not pickled (a
pickled shard has ``reducer=None``; set :attr:`Problem.reducer` again after loading).
"""

from __future__ import annotations

import abc
import copy
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from rfed._checks import numeric_array
from rfed.manifolds.base import Manifold, as_generator
from rfed.randomness import ranks_to_uniforms

__all__ = ["Problem", "sample_without_replacement", "stack_agents"]

#: Bytes of per-sample gradients per block of agents in :meth:`Problem.local_grad`: a few MiB,
#: which the C allocator reuses from call to call (arrays of tens of MiB and more it maps fresh
#: and the kernel zeroes page by page at every call).
_LOCAL_GRAD_BLOCK_BYTES = 4 * 2**20


def sample_without_replacement(
    counts: np.ndarray, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """Independent uniform subsets of size ``batch_size`` of ``range(counts[a])`` for every row.

    Parameters
    ----------
    counts : array of int, shape ``(A,)``
        Population size of each row (agent).
    batch_size : int
        Subset size; at most ``min(counts)``.
    rng : numpy.random.Generator

    Returns
    -------
    array of int, shape ``(A, batch_size)``
        Row ``a`` holds ``batch_size`` distinct indices in ``[0, counts[a])``, uniformly random.

    Notes
    -----
    Vectorized: draw i.i.d. uniform keys for all ``(A, max(counts))`` slots, push the padding
    slots to the end, and keep the ``batch_size`` smallest keys of each row (a uniformly random
    subset, as a random permutation's prefix is).
    """
    counts = np.asarray(counts, dtype=int)
    # a round's few agents: Python's min and max of a list cost less than two reductions
    few = counts.tolist() if counts.ndim == 1 and 0 < counts.size <= 256 else None
    n_min = min(few) if few is not None else int(counts.min())
    if batch_size < 1 or batch_size > n_min:
        raise ValueError(
            f"argument 'batch_size' must be in [1, min(counts)] = [1, {n_min}], "
            f"got {batch_size}"
        )
    n_max = max(few) if few is not None else int(counts.max())
    pad = None if n_min == n_max else np.arange(n_max)[None, :] >= counts[:, None]
    ranks = getattr(rng, "uniform_ranks", None)
    if batch_size == 1 and batch_size < n_max and ranks is not None:
        # keyed draws give the keys' integer ranks (same order and ties, one pass cheaper):
        # the same smallest key; a tie goes to the partition below on the keys themselves
        keys = ranks((counts.size, n_max))
        if pad is not None:
            keys[pad] = np.iinfo(np.uint64).max   # above every rank (< 2^53), as 2.0 is
        first = _unique_argmin(keys)
        if first is not None:
            return first
        keys = ranks_to_uniforms(keys)
    else:
        keys = rng.random((counts.size, n_max))
    if pad is not None:  # padding slots exist only when the local sizes differ
        keys[pad] = 2.0
    if batch_size == n_max:
        return np.argsort(keys, axis=1)
    if batch_size == 1:
        first = _unique_argmin(keys)
        if first is not None:
            return first
    part = np.argpartition(keys, batch_size - 1, axis=1)[:, :batch_size]
    return part


def _unique_argmin(keys: np.ndarray) -> np.ndarray | None:
    """Each row's smallest key's column ``(rows, 1)``, or ``None`` when a row's minimum is
    tied."""
    # one record (DO-ADP, DP-DDA): the smallest key, 10x cheaper than a partition; a row whose
    # minimum is tied (53-bit keys: about n^2 2^-54 per row) goes to the partition, whose
    # choice among equal keys may differ from argmin's
    first = np.argmin(keys, axis=1)
    low = keys[np.arange(keys.shape[0]), first]
    if np.count_nonzero(keys == low[:, None]) == keys.shape[0]:
        return first[:, None]
    return None


def stack_agents(arrays, name: str = "data") -> tuple[np.ndarray, np.ndarray]:
    """Stack per-agent arrays of shapes ``(N_i, ...)`` into ``(n_agents, n_max, ...)``.

    Parameters
    ----------
    arrays : sequence of array, or array of shape ``(n_agents, n_max, ...)``
        One array per agent (a stacked array is returned as is, with full counts).
    name : str
        Argument name used in error messages.

    Returns
    -------
    stacked : array, shape ``(n_agents, max N_i, ...)``, zero-padded
    counts : int array, shape ``(n_agents,)``
    """
    if isinstance(arrays, np.ndarray):
        if arrays.ndim < 2:
            raise ValueError(f"argument '{name}' has shape {arrays.shape}; expected "
                             "(n_agents, n_max, ...)")
        return arrays, np.full(arrays.shape[0], arrays.shape[1])
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    if not arrays:
        raise ValueError(f"argument '{name}' must hold at least one agent's data")
    tail = arrays[0].shape[1:]
    for i, a in enumerate(arrays):
        if a.ndim < 1 or a.shape[1:] != tail or a.shape[0] < 1:
            raise ValueError(
                f"argument '{name}': agent {i} has shape {a.shape}; expected (N_i, "
                f"{', '.join(map(str, tail))}) with N_i >= 1"
            )
    counts = np.array([a.shape[0] for a in arrays])
    out = np.zeros((len(arrays), int(counts.max()), *tail))
    for i, a in enumerate(arrays):
        out[i, : a.shape[0]] = a
    return out, counts


class Problem(abc.ABC):
    """A finite-sum objective on a manifold, split across agents.

    Subclasses implement :meth:`sample_loss` and :meth:`sample_rgrad` on batched data and may
    override :meth:`reference_point` (closed form or a centralized solver).

    Parameters
    ----------
    manifold : Manifold
    data : mapping of str to array, each of shape ``(n_agents, n_max, ...)``
        The agents' samples (features, labels, ...), stacked over agents.
    counts : array of int, shape ``(n_agents,)``, optional
        Number of valid rows per agent (default: all ``n_max``).
    gradient_bound : float, optional
        A PUBLIC bound on the per-sample Riemannian gradient norm (a Lipschitz constant of the
        per-sample losses), given by the user or derived from a public assertion about the data
        domain; a candidate clipping level. Never read from the private data.

    Attributes
    ----------
    coupled_records : bool
        True when a per-sample loss depends on other records of the same agent (replacing one
        record may change every per-sample gradient); the private trainers then use the
        sensitivity of a clipped mean whose every summand may change.
    privacy_assumptions : tuple of str
        Public assertions the problem's constants rest on, copied into privacy reports.
    sorted_batches : bool
        True when DP-RSGD may gather a random minibatch's rows sorted by index, a cache-sized
        block of agents at a time (worth it when :meth:`clipped_grad_sum` reads the rows more
        than once, e.g. ``Z x`` then ``Z^T w``); the drawn subsets are the same, the summation
        order is the rows'. False: gathered in the order drawn, all agents at once.
    evaluate_grad_norm : bool
        Whether a run's recorded rounds include ``grad_norm``
        (:func:`~rfed.algorithms.base.evaluate_point`); True by default. False when only the
        cost is wanted and the gradient costs much more than the cost (SPD Frechet mean:
        eigenvectors for the logs, singular values alone for the distances).
    """

    name: str = "problem"
    coupled_records: bool = False
    evaluate_grad_norm: bool = True
    sorted_batches: bool = False
    privacy_assumptions: tuple[str, ...] = ()
    # global ids of the agents a shard holds (None: every agent) and, per global id, the local
    # row of its data (-1: held elsewhere)
    _held: np.ndarray | None = None
    _row_of: np.ndarray | None = None
    #: Communicator of a shard's reductions (``cost``, ``grad``); ``None``: none.
    reducer: Any = None
    # attributes caching values computed from the data: reset on sharding, not pickled
    _caches: tuple[str, ...] = ()

    def __init__(
        self,
        manifold: Manifold,
        data: Mapping[str, np.ndarray],
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
        *,
        arg_names: Mapping[str, str] | None = None,
    ):
        # the user's name of each data array, for the messages (a subclass's constructor
        # arguments; data['key'] otherwise, the user's own key)
        names = dict(arg_names or {})

        def arg(key: str) -> str:
            return f"argument '{names[key]}'" if key in names else f"data['{key}']"

        if not isinstance(manifold, Manifold):
            raise TypeError(f"argument 'manifold' must be an rfed Manifold, got {manifold!r}")
        if not data:
            raise ValueError("argument 'data' must hold at least one array")
        arrays = {}
        lead: tuple[int, ...] | None = None
        for key, arr in data.items():
            arr = numeric_array(arr, names.get(key, f"data['{key}']"), dtype=None)
            if arr.ndim < 2:
                raise ValueError(
                    f"{arg(key)} has shape {arr.shape}; expected (n_agents, n_max, ...)"
                )
            if lead is None:
                lead = arr.shape[:2]
            elif arr.shape[:2] != lead:
                raise ValueError(
                    f"{arg(key)} has leading shape {arr.shape[:2]}; the other arrays have "
                    f"{lead} (n_agents, n_max)"
                )
            if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
                raise ValueError(f"{arg(key)} contains NaN or inf")
            arrays[key] = arr
        self.manifold = manifold
        self._data = arrays
        assert lead is not None  # data holds at least one array (checked above)
        self.n_agents, n_max = lead
        if counts is None:
            counts = np.full(self.n_agents, n_max)
        counts = np.asarray(counts, dtype=int)
        # zero agents: the rows of an empty block, a step to a shard holding public facts only
        if counts.shape != (self.n_agents,) or (counts.size and (counts.min() < 1
                                                                 or counts.max() > n_max)):
            raise ValueError(
                f"argument 'counts' must have shape ({self.n_agents},) with values in "
                f"[1, {n_max}], got shape {counts.shape} and range "
                f"[{counts.min() if counts.size else '-'}, {counts.max() if counts.size else '-'}]"
            )
        self.counts = counts
        self.n_max = n_max
        self.mask = np.arange(n_max)[None, :] < counts[:, None]
        if gradient_bound is not None and not gradient_bound > 0:
            raise ValueError(f"argument 'gradient_bound' must be > 0, got {gradient_bound}")
        self.gradient_bound = gradient_bound
        self._reference: np.ndarray | None = None
        self._reference_cost: float | None = None

    # ---------------------------------------------------------------- to implement
    @abc.abstractmethod
    def sample_loss(self, x: np.ndarray, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Per-sample losses.

        Parameters
        ----------
        x : array, shape ``(*lead, *point_shape)``
        batch : mapping of str to array, each of shape ``(*lead, b, ...)``

        Returns
        -------
        array, shape ``(*lead, b)``
        """

    @abc.abstractmethod
    def sample_rgrad(self, x: np.ndarray, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Per-sample Riemannian gradients at ``x``, shape ``(*lead, b, *point_shape)``.

        Parameters
        ----------
        x : array, shape ``(*lead, *point_shape)``
            The points (one per leading index).
        batch : mapping of str to array, each of shape ``(*lead, b, ...)``
            The samples (as :meth:`batch` returns them).

        Returns
        -------
        array, shape ``(*lead, b, *point_shape)``
        """

    def clipped_grad_sum(
        self,
        x: np.ndarray,
        batch: Mapping[str, np.ndarray],
        bound: float | None,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sum over a batch of per-sample Riemannian gradients, each clipped in norm.

        Each gradient ``g_j`` at ``x`` is scaled by ``min(1, bound / ||g_j||_x)`` (PriRFed
        Alg. 2 line 4, clip_tau; a zero gradient stays zero) before summing. Subclasses with a
        structured gradient override this to avoid materializing every per-sample gradient (the
        per-sample norms suffice to clip).

        Parameters
        ----------
        x : array, shape ``(*lead, *point_shape)``
        batch : mapping of str to array, each of shape ``(*lead, b, ...)``
        bound : float or None
            Clipping level tau; ``None`` sums the raw gradients.
        mask : bool array, shape ``(*lead, b)``, optional
            Samples to include (padding rows are ``False``).

        Returns
        -------
        total : array, shape ``(*lead, *point_shape)``
        n_clipped : int array, shape ``lead``
            How many included samples had ``||g_j||_x > bound``.
        """
        x = np.asarray(x, dtype=float)
        k = len(self.manifold.point_shape)
        g = self.sample_rgrad(x, batch)
        xb = np.expand_dims(x, -1 - k)
        lead = g.shape[: g.ndim - k - 1]
        scale = np.ones(g.shape[: g.ndim - k])
        n_clipped = np.zeros(lead, dtype=int)
        if bound is not None:
            norms = self.manifold.norm(xb, g)
            over = norms > bound
            scale = np.where(over, bound / np.where(over, norms, 1.0), 1.0)
            if mask is not None:
                over = over & mask
            n_clipped = np.sum(over, axis=-1)
        if mask is not None:
            scale = np.where(mask, scale, 0.0)
        total = np.sum(scale.reshape(scale.shape + (1,) * k) * g, axis=-1 - k)
        return total, n_clipped

    def distance_to_reference(self, x: np.ndarray) -> float:
        """``d(x, x*)``; problems whose minimizer is a set (e.g. ``±v``) take the nearest.

        Parameters
        ----------
        x : array, shape ``point_shape``
            One point.

        Returns
        -------
        float
        """
        return float(self.manifold.dist(x, self.reference_point()))

    # ---------------------------------------------------------------- data access
    @property
    def data(self) -> dict[str, np.ndarray]:
        """The agents' samples ``{key: (n_agents, n_max, ...)}``; a shard refuses (its arrays
        hold local rows, so indexing them by global agent id would be wrong): use
        :meth:`batch` / :meth:`agent_data` with global ids."""
        if self._held is not None:
            raise ValueError(
                f"{self._shard_text()}: '.data' (every agent's rows, as pooled quantities such "
                "as covariances, reference solvers and pooled accuracies read them) is not "
                "held here; use batch(agents, idx) or agent_data(agents) with this shard's "
                "agents, or reduce per-agent values through a communicator")
        return self._data

    @data.setter
    def data(self, arrays: dict[str, np.ndarray]) -> None:
        if self._held is not None:
            raise ValueError(f"{self._shard_text()}: '.data' cannot be replaced on a shard")
        self._data = arrays

    @property
    def is_shard(self) -> bool:
        """True when this instance holds only some agents' rows (:meth:`shard`)."""
        return self._held is not None

    @property
    def agents(self) -> np.ndarray:
        """Global ids of the agents whose rows this instance holds, increasing (every agent
        of a full problem)."""
        return np.arange(self.n_agents) if self._held is None else self._held

    @property
    def n_samples(self) -> int:
        """Total number of samples over all agents."""
        return int(self.counts.sum())

    @property
    def agent_weights(self) -> np.ndarray:
        """``N_i / sum_l N_l``, shape ``(n_agents,)``."""
        return self.counts / self.counts.sum()

    def _shard_text(self) -> str:
        held = self._held
        if held is None:
            return f"{type(self).__name__} holding every agent's rows"
        if held.size == 0:
            return (f"{type(self).__name__} shard holding no agent's rows (public facts of "
                    f"{self.n_agents} agents only)")
        span = (f"{held[0]}..{held[-1]}" if held[-1] - held[0] + 1 == held.size
                else np.array2string(held, threshold=8))
        return (f"{type(self).__name__} shard holding agents {span} of {self.n_agents} "
                f"(only their rows)")

    def _rows(self, agents: np.ndarray) -> np.ndarray:
        """Local data rows of the global ids ``agents`` (the ids themselves when every agent's
        rows are held); an agent held elsewhere is an error naming it."""
        if self._held is None or self._row_of is None:  # both are set together by a shard
            return agents
        ids = np.asarray(agents)
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_agents):
            raise ValueError(f"argument 'agents' has ids outside 0..{self.n_agents - 1}")
        rows = self._row_of[ids]
        if np.any(rows < 0):
            bad = int(ids.reshape(-1)[np.flatnonzero(rows.reshape(-1) < 0)[0]])
            raise ValueError(f"{self._shard_text()}: agent {bad} is not held here (its rows "
                             "are on another process)")
        return rows

    def _checked_idx(self, idx: Any) -> np.ndarray:
        """``idx`` as an array, refused unless its row indices are in ``[0, n_max)``."""
        idx = np.asarray(idx)
        if idx.size:
            # a round's few indices: Python's min and max of a list cost less than reductions
            few = idx.ravel().tolist() if idx.size <= 256 else None
            lo, hi = (min(few), max(few)) if few is not None else (idx.min(), idx.max())
            if lo < 0 or hi >= self.n_max:
                raise ValueError(f"argument 'idx' must hold row indices in [0, {self.n_max}), "
                                 f"got range [{lo}, {hi}]")
        return idx

    def batch(self, agents: np.ndarray, idx: np.ndarray,
              out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Gather samples ``idx`` of ``agents``.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global ids.
        idx : int array, shape ``(A, b)``
            Row indices in ``0 .. n_max - 1`` (padding rows included: a caller masks them).
        out : mapping of str to array, optional
            Buffers to gather into, ``{key: (>= A b, ...)}`` (e.g. the arrays of an earlier
            call, reused across the blocks and steps of a trainer).

        Returns
        -------
        dict of str to array, each of shape ``(A, b, ...)`` (views of ``out`` when given)
        """
        rows = self._rows(np.asarray(agents))
        idx = self._checked_idx(idx)
        got = {}
        flat = None
        for k, v in self._data.items():
            if not v.flags.c_contiguous:
                got[k] = v[rows[:, None], idx]
                continue
            # one flat take of whole rows: faster than 2-d fancy indexing, the same values
            # (every data array has n_max rows per agent: one flat index serves them all)
            if flat is None:
                flat = (rows[:, None] * v.shape[1] + idx).reshape(-1)
            dest = None if out is None else out[k][: flat.size]
            # indices are checked above; mode 'raise' would gather into a temporary first
            taken = np.take(v.reshape((-1,) + v.shape[2:]), flat, axis=0, out=dest,
                            mode="raise" if dest is None else "clip")
            got[k] = taken.reshape(idx.shape + v.shape[2:])
        return got

    def _batch_blocks(self, agents: np.ndarray, idx: np.ndarray, per_block: int,
                     out: Mapping[str, np.ndarray]) -> Iterator[tuple[int, int, dict]]:
        """:meth:`batch` of consecutive blocks of ``per_block`` agents, into the same buffers.

        Yields ``(start, stop, batch)`` where ``batch`` is what ``batch(agents[start:stop],
        idx[start:stop], out=out)`` returns (views of ``out``, overwritten by the next block):
        the ids and indices are checked, and the flat row index built, once for all blocks
        rather than once per block (a trainer's step gathers hundreds of small blocks).

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global ids.
        idx : int array, shape ``(A, b)``
            Row indices in ``0 .. n_max - 1``.
        per_block : int
            Agents per block (``>= 1``; the last block may be smaller).
        out : mapping of str to array
            Buffers ``{key: (>= per_block b, ...)}``.

        Yields
        ------
        start, stop : int
        batch : dict of str to array, each of shape ``(stop - start, b, ...)``
        """
        agents = np.asarray(agents)
        idx = np.asarray(idx)
        n_agents = agents.shape[0]
        if not all(v.flags.c_contiguous for v in self._data.values()) or not idx.size:
            for start in range(0, n_agents, per_block):
                stop = min(n_agents, start + per_block)
                yield start, stop, self.batch(agents[start:stop], idx[start:stop], out=out)
            return
        rows = self._rows(agents)
        self._checked_idx(idx)
        b = idx.shape[1]
        # (A, b): the flat row numbers (every data array has the same rows per agent)
        flat = rows[:, None] * next(iter(self._data.values())).shape[1] + idx
        sources = [(k, v.reshape((-1,) + v.shape[2:]), out[k]) for k, v in self._data.items()]
        for start in range(0, n_agents, per_block):
            stop = min(n_agents, start + per_block)
            block_rows = flat[start:stop].reshape(-1)
            shape = (stop - start, b)
            # indices checked above: mode 'clip' gathers into the buffer directly
            yield start, stop, {
                k: np.take(src, block_rows, axis=0, out=buf[: block_rows.size],
                           mode="clip").reshape(shape + src.shape[1:])
                for k, src, buf in sources}

    def agent_data(self, agents: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """All rows of ``agents`` (global ids, shape ``(A,)``): ``({key: (A, n_max, ...)},
        mask (A, n_max))``.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global agent ids.

        Returns
        -------
        data : dict of str to array, each of shape ``(A, n_max, ...)``
        mask : bool array, shape ``(A, n_max)``
            ``True`` on each agent's real rows (the rest is padding).
        """
        agents = np.asarray(agents)
        rows = self._rows(agents)
        return {k: v[rows] for k, v in self._data.items()}, self.mask[agents]

    def sample_batches(
        self, agents: np.ndarray, batch_size: int, rng: np.random.Generator | int
    ) -> np.ndarray:
        """Minibatch indices drawn uniformly without replacement, shape ``(A, batch_size)``.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global agent ids.
        batch_size : int
            ``b``, at most every listed agent's ``N_i``.
        rng : numpy.random.Generator or int
            Generator or seed.

        Returns
        -------
        int array, shape ``(A, batch_size)``
        """
        return sample_without_replacement(self.counts[np.asarray(agents)], batch_size,
                                          as_generator(rng))

    def per_sample_grad(self, x: np.ndarray, agents: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Riemannian gradients of agents' samples, shape ``(A, b, *point_shape)``.

        ``x`` has shape ``(A, *point_shape)``: agent ``a`` is evaluated at ``x[a]``.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)``
            Each agent's point.
        agents : int array, shape ``(A,)``
            Global agent ids.
        idx : int array, shape ``(A, b)``
            Each agent's sample indices.

        Returns
        -------
        array, shape ``(A, b, *point_shape)``
        """
        return self.sample_rgrad(np.asarray(x), self.batch(agents, idx))

    def per_sample_loss(self, x: np.ndarray, agents: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Losses of agents' samples, shape ``(A, b)``.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)``
            Each agent's point.
        agents : int array, shape ``(A,)``
            Global agent ids.
        idx : int array, shape ``(A, b)``
            Each agent's sample indices.

        Returns
        -------
        array, shape ``(A, b)``
        """
        return self.sample_loss(np.asarray(x), self.batch(agents, idx))

    # ---------------------------------------------------------------- shards
    def shard(self, agents: np.ndarray, *, reducer: Any = None) -> Problem:
        """A copy of this problem holding only the rows of ``agents`` (see "Sharded data").

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global ids, distinct, in ``0 .. n_agents - 1`` (sorted in the shard); a shard's
            own agents only when sharding a shard. Empty: public facts only (e.g. a server's).
        reducer : Communicator, optional
            Serves the same block of agents (``reducer.agents`` equal to the sorted
            ``agents``); makes :meth:`cost` and :meth:`grad` reductions over all processes.

        Returns
        -------
        Problem
            Of the same class; its data arrays have shape ``(A, n_max, ...)`` (copies: the full
            arrays can be freed). Public facts and a reference computed or set before are kept.
        """
        ids = self._checked_agents(agents)
        rows = self._rows(ids)
        data = {k: v[rows] for k, v in self._data.items()}
        new = copy.copy(self)
        new._install_shard(ids, data, reducer)
        return new

    def as_shard(self, agents: np.ndarray, counts: np.ndarray, *, reducer: Any = None
                 ) -> Problem:
        """Make this problem, built from the rows of ``agents`` only (its agent ``k`` is the
        global agent ``agents[k]``), the shard of a problem of ``len(counts)`` agents.

        The other agents' rows are then never materialized. The public facts other than the
        counts (``gradient_bound``, ``privacy_assumptions``, constants) are this problem's:
        they must come from public constructor arguments (a data-derived fact of the block,
        e.g. a maximum row norm, is the block's, not the whole problem's). For the shard to
        give the full problem's bits, build it with the full problem's padding width
        ``n_max`` (per-agent sums run over that axis).

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Increasing global ids, ``A`` = this problem's ``n_agents`` (0: a problem built on
            an empty block, which then holds the public facts only).
        counts : int array, shape ``(n_agents,)``
            Every agent's sample count (public); ``counts[agents]`` must equal this problem's.
        reducer : Communicator, optional
            As in :meth:`shard`.

        Returns
        -------
        Problem
            This instance, now a shard (no data is copied).
        """
        if self._held is not None:
            raise ValueError(f"{self._shard_text()} is already a shard")
        counts = np.asarray(counts)
        if counts.ndim != 1 or counts.size < 1 or not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(f"argument 'counts' must be a 1-d int array (every agent's sample "
                             f"count), got {counts!r}")
        ids = np.asarray(agents, dtype=np.int64 if np.size(agents) == 0 else None)
        if (ids.shape != (self.n_agents,) or not np.issubdtype(ids.dtype, np.integer)
                or np.any(np.diff(ids) <= 0)
                or (ids.size and (ids.min() < 0 or ids.max() >= counts.size))):
            raise ValueError(f"argument 'agents' must be {self.n_agents} increasing ids in "
                             f"0..{counts.size - 1} (one per agent of this problem), got "
                             f"{agents!r}")
        if not np.array_equal(counts[ids], self.counts):
            raise ValueError(f"argument 'counts' disagrees with this problem's rows: "
                             f"counts[agents] = {counts[ids]}, the rows hold {self.counts}")
        if counts.min() < 1 or counts.max() > self.n_max:
            raise ValueError(f"argument 'counts' must lie in [1, n_max = {self.n_max}], got "
                             f"range [{counts.min()}, {counts.max()}]")
        self.n_agents = int(counts.size)
        self.counts = counts.astype(int)
        self.mask = np.arange(self.n_max)[None, :] < self.counts[:, None]
        self._install_shard(ids.astype(np.int64), self._data, reducer)
        return self

    def _checked_agents(self, agents) -> np.ndarray:
        ids = np.asarray(agents, dtype=np.int64 if np.size(agents) == 0 else None)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"argument 'agents' must be a 1-d array of int agent ids, got "
                             f"{agents!r}")
        ids = np.sort(ids).astype(np.int64)
        if ids.size and (ids[0] < 0 or ids[-1] >= self.n_agents or np.any(np.diff(ids) == 0)):
            raise ValueError(f"argument 'agents' must hold distinct ids in "
                             f"0..{self.n_agents - 1}, got {agents!r}")
        return ids

    def _install_shard(self, ids: np.ndarray, data: dict, reducer: Any) -> None:
        if reducer is not None:
            held = np.asarray(reducer.agents)
            if reducer.n_agents != self.n_agents or not np.array_equal(held, ids):
                raise ValueError(f"argument 'reducer' serves agents {held} of "
                                 f"{reducer.n_agents}; this shard holds {ids} of "
                                 f"{self.n_agents}")
        row_of = np.full(self.n_agents, -1, dtype=np.int64)
        row_of[ids] = np.arange(ids.size)
        self._data = data
        self._held = ids
        self._row_of = row_of
        self.reducer = reducer
        for name in self._caches:
            setattr(self, name, None)

    def __getstate__(self) -> dict:
        # the reducer is engine state (an MPI communicator is bound to its job) and caches are
        # recomputed: neither is pickled
        state = self.__dict__.copy()
        state.pop("reducer", None)
        state.update(dict.fromkeys(self._caches))
        return state

    # ---------------------------------------------------------------- full objectives
    def _check_has_agents(self, what: str) -> None:
        """Refuse ``what`` on a (non-shard) problem built from no agent's rows."""
        if self.n_agents == 0 and self._held is None:
            raise ValueError(f"{type(self).__name__} holds no agent (its data arrays have 0 "
                             f"rows): {what} needs at least one agent's data (a problem of no "
                             "agent is only a step to Problem.as_shard)")

    def _all(self, agents):
        if agents is None:
            self._check_has_agents("a call over every agent")
            if self._held is not None:
                raise ValueError(f"{self._shard_text()}: a call over every agent (agents=None) "
                                 "needs the other agents' rows; pass this shard's agents")
            return np.arange(self.n_agents), self._data, self.mask
        agents = np.asarray(agents)
        data, mask = self.agent_data(agents)
        return agents, data, mask

    def local_cost(self, x: np.ndarray, agents: np.ndarray | None = None) -> np.ndarray:
        """``f_i(x_i)`` for each listed agent; ``x`` of shape ``(A, *point_shape)`` or one point.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)`` or ``point_shape``
            Each listed agent's point (one point is broadcast).
        agents : int array, shape ``(A,)``, optional
            Global agent ids (default: every agent).

        Returns
        -------
        array, shape ``(A,)``
        """
        agents, data, mask = self._all(agents)
        x = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        losses = self.sample_loss(x, data)
        return np.sum(np.where(mask, losses, 0.0), axis=-1) / self.counts[agents]

    def local_grad(self, x: np.ndarray, agents: np.ndarray | None = None) -> np.ndarray:
        """``grad f_i(x_i)`` for each listed agent, shape ``(A, *point_shape)``.

        Parameters
        ----------
        x : array, shape ``(A, *point_shape)`` or ``point_shape``
            Each listed agent's point (one point is broadcast).
        agents : int array, shape ``(A,)``, optional
            Global agent ids (default: every agent).

        Returns
        -------
        array, shape ``(A, *point_shape)``
        """
        agents, data, mask = self._all(agents)
        point_shape = self.manifold.point_shape
        x = np.broadcast_to(x, (agents.size,) + point_shape)
        # the per-sample gradients of a block of agents at a time: formed for every agent at
        # once they are one (A, n_max, *point_shape) array per temporary (hundreds of MiB for
        # Fashion-MNIST PCA), mapped fresh and faulted in by the kernel at every call; per block
        # they are reused. Every operation acts on each agent's rows alone: the same values.
        per_agent = max(1, mask.shape[1] * math.prod(point_shape) * 8)
        block = max(1, _LOCAL_GRAD_BLOCK_BYTES // per_agent)
        if block >= agents.size:
            return self._local_grad_block(x, data, mask, agents)
        out = np.empty((agents.size,) + point_shape)
        for start in range(0, agents.size, block):
            part = slice(start, start + block)
            out[part] = self._local_grad_block(x[part], {k: v[part] for k, v in data.items()},
                                               mask[part], agents[part])
        return out

    def _local_grad_block(self, x: np.ndarray, data: Mapping[str, np.ndarray],
                          mask: np.ndarray, agents: np.ndarray) -> np.ndarray:
        """:meth:`local_grad` of some agents, their data and masks given: ``(A, *point_shape)``."""
        g = self.sample_rgrad(x, data)
        # padding rows exist only when the local sizes differ; without them the masked copy is
        # g itself (the same C-ordered values, so the same sum)
        if not (g.flags.c_contiguous and mask.all()):
            m = mask.reshape(mask.shape + (1,) * len(self.manifold.point_shape))
            g = np.where(m, g, 0.0)
        return np.sum(g, axis=1) / self.counts[agents].reshape(
            (-1,) + (1,) * len(self.manifold.point_shape)
        )

    def _reducer_for(self, what: str) -> Any:
        """The communicator summing this shard's per-agent values with the other blocks'."""
        if self.reducer is None:
            raise ValueError(f"{self._shard_text()}: {what} needs every agent's data; give the "
                             "shard a reducer (shard(agents, reducer=comm)) to compute it as a "
                             "reduction over the processes")
        return self.reducer

    def cost(self, x: np.ndarray) -> float:
        """Global objective ``f(x)`` at one point (a shard: a reduction, see "Sharded data").

        Parameters
        ----------
        x : array, shape ``point_shape``
            One point.

        Returns
        -------
        float
        """
        if self._held is None:
            return float(np.sum(self.agent_weights * self.local_cost(x)))
        reducer = self._reducer_for("cost(x)")
        held = self._held
        return float(reducer.agent_sum(self.agent_weights[held] * self.local_cost(x, held)))

    def grad(self, x: np.ndarray) -> np.ndarray:
        """Riemannian gradient of the global objective at one point (a shard: a reduction).

        Parameters
        ----------
        x : array, shape ``point_shape``
            One point.

        Returns
        -------
        array, shape ``point_shape``
        """
        shape = (-1,) + (1,) * len(self.manifold.point_shape)
        if self._held is None:
            return np.sum(self.agent_weights.reshape(shape) * self.local_grad(x), axis=0)
        reducer = self._reducer_for("grad(x)")
        held = self._held
        return reducer.agent_sum(self.agent_weights[held].reshape(shape)
                                 * self.local_grad(x, held))

    def grad_norm(self, x: np.ndarray) -> float:
        """``||grad f(x)||_x``.

        Parameters
        ----------
        x : array, shape ``point_shape``
            One point.

        Returns
        -------
        float
        """
        return float(self.manifold.norm(x, self.grad(x)))

    # ---------------------------------------------------------------- reference
    def reference_point(self) -> np.ndarray:
        """The minimizer of the global objective (closed form or a centralized solver); cached.

        Returns
        -------
        array, shape ``point_shape``
        """
        if self._reference is None:
            self._check_has_agents("reference_point()")
            if self._held is not None:
                raise ValueError(f"{self._shard_text()}: reference_point() is computed from "
                                 "every agent's data; compute or set it on the full problem "
                                 "before sharding, or set_reference(point) from a public source")
            self._reference = self._compute_reference()
        return self._reference

    def set_reference(self, point: np.ndarray) -> None:
        """Use ``point`` as the reference solution (e.g. one computed for another problem over
        the same pooled samples: the minimizer depends on the pooled data only, not on how
        they are split among agents). ``point`` must lie on the manifold.

        Parameters
        ----------
        point : array, shape ``point_shape``
            The reference solution.
        """
        point = np.array(point, dtype=float)
        self.manifold.check_point(point, "point")
        self._reference = point
        self._reference_cost = None

    def reference_cost(self) -> float:
        """``f(x*)`` at :meth:`reference_point` (cached).

        Returns
        -------
        float
        """
        if self._reference_cost is None:
            # a shard: a reduction (needs a reducer) at the reference kept from before sharding
            self._reference_cost = self.cost(self.reference_point())
        return self._reference_cost

    def _compute_reference(self) -> np.ndarray:
        raise NotImplementedError(
            f"{type(self).__name__} has no reference solution; override _compute_reference"
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(manifold={self.manifold!r}, n_agents={self.n_agents}, "
            f"n_samples={self.n_samples})"
        )
