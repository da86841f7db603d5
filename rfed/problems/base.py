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
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

import numpy as np

from rfed.manifolds.base import Manifold, as_generator

__all__ = ["Problem", "sample_without_replacement", "stack_agents"]


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
    if batch_size < 1 or batch_size > counts.min():
        raise ValueError(
            f"argument 'batch_size' must be in [1, min(counts)] = [1, {counts.min()}], "
            f"got {batch_size}"
        )
    n_max = int(counts.max())
    keys = rng.random((counts.size, n_max))
    keys[np.arange(n_max)[None, :] >= counts[:, None]] = 2.0
    if batch_size == n_max:
        return np.argsort(keys, axis=1)
    part = np.argpartition(keys, batch_size - 1, axis=1)[:, :batch_size]
    return part


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
    """

    name: str = "problem"
    coupled_records: bool = False
    privacy_assumptions: tuple[str, ...] = ()

    def __init__(
        self,
        manifold: Manifold,
        data: Mapping[str, np.ndarray],
        counts: np.ndarray | None = None,
        gradient_bound: float | None = None,
    ):
        if not isinstance(manifold, Manifold):
            raise TypeError(f"argument 'manifold' must be an rfed Manifold, got {manifold!r}")
        if not data:
            raise ValueError("argument 'data' must hold at least one array")
        arrays = {}
        lead = None
        for key, arr in data.items():
            arr = np.asarray(arr)
            if arr.ndim < 2:
                raise ValueError(
                    f"data['{key}'] has shape {arr.shape}; expected (n_agents, n_max, ...)"
                )
            if lead is None:
                lead = arr.shape[:2]
            elif arr.shape[:2] != lead:
                raise ValueError(
                    f"data['{key}'] has leading shape {arr.shape[:2]}; the other arrays have "
                    f"{lead} (n_agents, n_max)"
                )
            if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
                raise ValueError(f"data['{key}'] contains NaN or inf")
            arrays[key] = arr
        self.manifold = manifold
        self.data = arrays
        self.n_agents, n_max = lead
        if counts is None:
            counts = np.full(self.n_agents, n_max)
        counts = np.asarray(counts, dtype=int)
        if counts.shape != (self.n_agents,) or counts.min() < 1 or counts.max() > n_max:
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
        """Per-sample Riemannian gradients at ``x``, shape ``(*lead, b, *point_shape)``."""

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
        """``d(x, x*)``; problems whose minimizer is a set (e.g. ``±v``) take the nearest."""
        return float(self.manifold.dist(x, self.reference_point()))

    # ---------------------------------------------------------------- data access
    @property
    def n_samples(self) -> int:
        """Total number of samples over all agents."""
        return int(self.counts.sum())

    @property
    def agent_weights(self) -> np.ndarray:
        """``N_i / sum_l N_l``, shape ``(n_agents,)``."""
        return self.counts / self.counts.sum()

    def batch(self, agents: np.ndarray, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Gather samples ``idx`` (shape ``(A, b)``) of ``agents`` (shape ``(A,)``)."""
        agents = np.asarray(agents)[:, None]
        return {k: v[agents, idx] for k, v in self.data.items()}

    def sample_batches(
        self, agents: np.ndarray, batch_size: int, rng: np.random.Generator | int
    ) -> np.ndarray:
        """Minibatch indices drawn uniformly without replacement, shape ``(A, batch_size)``."""
        return sample_without_replacement(self.counts[np.asarray(agents)], batch_size,
                                          as_generator(rng))

    def per_sample_grad(self, x: np.ndarray, agents: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Riemannian gradients of agents' samples, shape ``(A, b, *point_shape)``.

        ``x`` has shape ``(A, *point_shape)``: agent ``a`` is evaluated at ``x[a]``.
        """
        return self.sample_rgrad(np.asarray(x), self.batch(agents, idx))

    def per_sample_loss(self, x: np.ndarray, agents: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Losses of agents' samples, shape ``(A, b)``."""
        return self.sample_loss(np.asarray(x), self.batch(agents, idx))

    # ---------------------------------------------------------------- full objectives
    def _all(self, agents):
        agents = np.arange(self.n_agents) if agents is None else np.asarray(agents)
        return agents, {k: v[agents] for k, v in self.data.items()}, self.mask[agents]

    def local_cost(self, x: np.ndarray, agents: np.ndarray | None = None) -> np.ndarray:
        """``f_i(x_i)`` for each listed agent; ``x`` of shape ``(A, *point_shape)`` or one point."""
        agents, data, mask = self._all(agents)
        x = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        losses = self.sample_loss(x, data)
        return np.sum(np.where(mask, losses, 0.0), axis=-1) / self.counts[agents]

    def local_grad(self, x: np.ndarray, agents: np.ndarray | None = None) -> np.ndarray:
        """``grad f_i(x_i)`` for each listed agent, shape ``(A, *point_shape)``."""
        agents, data, mask = self._all(agents)
        x = np.broadcast_to(x, (agents.size,) + self.manifold.point_shape)
        g = self.sample_rgrad(x, data)
        m = mask.reshape(mask.shape + (1,) * len(self.manifold.point_shape))
        return np.sum(np.where(m, g, 0.0), axis=1) / self.counts[agents].reshape(
            (-1,) + (1,) * len(self.manifold.point_shape)
        )

    def cost(self, x: np.ndarray) -> float:
        """Global objective ``f(x)`` at one point."""
        return float(np.sum(self.agent_weights * self.local_cost(x)))

    def grad(self, x: np.ndarray) -> np.ndarray:
        """Riemannian gradient of the global objective at one point."""
        w = self.agent_weights.reshape((-1,) + (1,) * len(self.manifold.point_shape))
        return np.sum(w * self.local_grad(x), axis=0)

    def grad_norm(self, x: np.ndarray) -> float:
        """``||grad f(x)||_x``."""
        return float(self.manifold.norm(x, self.grad(x)))

    # ---------------------------------------------------------------- reference
    def reference_point(self) -> np.ndarray:
        """The minimizer of the global objective (closed form or a centralized solver); cached."""
        if self._reference is None:
            self._reference = self._compute_reference()
        return self._reference

    def set_reference(self, point: np.ndarray) -> None:
        """Use ``point`` as the reference solution (e.g. one computed for another problem over
        the same pooled samples: the minimizer depends on the pooled data only, not on how
        they are split among agents). ``point`` must lie on the manifold."""
        point = np.array(point, dtype=float)
        self.manifold.check_point(point, "point")
        self._reference = point
        self._reference_cost = None

    def reference_cost(self) -> float:
        """``f(x*)`` at :meth:`reference_point` (cached)."""
        if self._reference_cost is None:
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
