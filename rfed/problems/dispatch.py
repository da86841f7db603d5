"""Distributed resource allocation and the IEEE 14-bus economic dispatch of DP-DGT (Huo et al.
2025).

Resource allocation (DP-DGT eq. (1)) is not a finite sum of per-sample losses, so it is not a
:class:`~rfed.problems.Problem`: agent ``i`` holds a private strongly convex cost ``F_i`` on a box
``W_i`` and a local demand ``d_i``, and the agents must meet

.. math:: \\min_w \\sum_i F_i(w_i) \\quad\\text{s.t.}\\quad \\sum_i w_i = \\sum_i d_i,
          \\quad w_i \\in W_i.

What the dual methods need is the primal oracle (DP-DGT eq. (12b))
``w_i(p) = argmin_{w in W_i} F_i(w) - p^T w`` for a price ``p`` (the negated dual variable), which
for the separable quadratic costs of the 14-bus system is a clip.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from rfed._checks import numeric_array
from rfed.datasets.dispatch import EconomicDispatch, ieee14_dispatch
from rfed.manifolds import Euclidean, Manifold

__all__ = ["QuadraticResourceAllocation", "ieee14_problem"]


class QuadraticResourceAllocation:
    r"""Resource allocation with ``F_i(w) = sum_k a_ik w_k^2 + b_ik w_k`` on boxes ``[lo_i, hi_i]``.

    Parameters
    ----------
    a, b : array, shape ``(n_agents, m)``
        Quadratic and linear cost coefficients; ``a >= 0``. An agent with ``lo == hi`` has the
        fixed decision ``lo`` (a bus without a generator, ``W_i = {0}``; :ref:`dpdgt-buses`).
    lo, hi : array, shape ``(n_agents, m)``
        Box constraints ``W_i``; where ``lo < hi`` the cost must be strongly convex (``a > 0``).
    demand : array, shape ``(n_agents, m)``
        Local demands ``d_i``.
    manifold : Manifold, optional
        The space of the communicated variables (prices and trackers); ``Euclidean(m)`` by default.
        Dual methods accept only Euclidean space (:ref:`dpdgt-euclidean`); another manifold can be
        passed to check that they refuse it.
    """

    #: The public table the problem was built from (set by :func:`ieee14_problem`), or None.
    data: EconomicDispatch | None = None

    def __init__(self, a, b, lo, hi, demand, manifold: Manifold | None = None):
        arrays = {}
        for name, val in (("a", a), ("b", b), ("lo", lo), ("hi", hi), ("demand", demand)):
            arr = numeric_array(val, name)
            if arr.ndim == 1:
                arr = arr[:, None]
            if arr.ndim != 2 or not np.all(np.isfinite(arr)):
                raise ValueError(f"argument '{name}' must be a finite array of shape "
                                 f"(n_agents, m), got shape {np.shape(val)}")
            arrays[name] = arr
        shape = arrays["a"].shape
        for name, arr in arrays.items():
            if arr.shape != shape:
                raise ValueError(f"argument '{name}' has shape {arr.shape}; expected {shape}")
        if np.any(arrays["a"] < 0):
            raise ValueError("argument 'a' must be >= 0")
        if np.any(arrays["lo"] > arrays["hi"]):
            bad = np.argwhere(arrays["lo"] > arrays["hi"])[0]
            raise ValueError(f"arguments 'lo' and 'hi': lo > hi at agent {bad[0]}, coordinate "
                             f"{bad[1]}")
        free = arrays["lo"] < arrays["hi"]
        if np.any(free & (arrays["a"] <= 0)):
            bad = np.argwhere(free & (arrays["a"] <= 0))[0]
            raise ValueError(f"argument 'a': agent {bad[0]} has a non-trivial box but a = 0; "
                             "the costs must be strongly convex (DP-DGT Assumption 1)")
        arrays["free"] = free
        # the primal map's denominator 2 a (1 where the decision is fixed), formed once
        arrays["two_a"] = 2 * np.where(free, arrays["a"], 1.0)
        self._rows = arrays
        self._held: np.ndarray | None = None
        self.reducer: Any = None
        self.n_agents, self.m = shape
        self.manifold = manifold if manifold is not None else Euclidean(self.m)
        self.total_demand = arrays["demand"].sum(0)
        total_lo, total_hi = arrays["lo"].sum(0), arrays["hi"].sum(0)
        if np.any(self.total_demand < total_lo) or np.any(self.total_demand > total_hi):
            raise ValueError("the total demand lies outside [sum lo, sum hi]: infeasible problem")
        self._strong_convexity = float(np.min(2.0 * arrays["a"][free]))
        self._optimum: np.ndarray | None = None

    # ---------------------------------------------------------------- every agent's arrays
    def _whole(self, name: str) -> np.ndarray:
        if self._held is not None:
            raise ValueError(
                f"{self._shard_text()}: '.{name}' (every agent's coefficients) is not held "
                "here; use the *_rows(agents) methods with this shard's agents")
        return self._rows[name]

    a = property(lambda self: self._whole("a"), doc="Quadratic coefficients ``(n_agents, m)``.")
    b = property(lambda self: self._whole("b"), doc="Linear coefficients ``(n_agents, m)``.")
    lo = property(lambda self: self._whole("lo"), doc="Lower box bounds ``(n_agents, m)``.")
    hi = property(lambda self: self._whole("hi"), doc="Upper box bounds ``(n_agents, m)``.")
    demand = property(lambda self: self._whole("demand"), doc="Demands ``(n_agents, m)``.")
    free = property(lambda self: self._whole("free"),
                    doc="``lo < hi``: agents with a decision to make ``(n_agents, m)``.")

    @property
    def strong_convexity(self) -> float:
        """``mu = min 2 a_i`` over agents with a free decision (DP-DGT Sec. 6: 0.06);
        a public fact of the problem, kept by its shards."""
        return self._strong_convexity

    # ---------------------------------------------------------------- shards
    @property
    def is_shard(self) -> bool:
        """True when this instance holds only some agents' coefficients (:meth:`shard`)."""
        return self._held is not None

    @property
    def agents(self) -> np.ndarray:
        """Global ids of the agents whose coefficients this instance holds, increasing."""
        return np.arange(self.n_agents) if self._held is None else self._held

    def _shard_text(self) -> str:
        if self._held is None:
            return f"this {type(self).__name__} holds every agent's coefficients"
        return (f"this {type(self).__name__} is a shard of agents {self._held.tolist()} "
                f"of {self.n_agents}")

    def shard(self, agents: np.ndarray, *, reducer: Any = None) -> QuadraticResourceAllocation:
        """The listed agents' cost functions, boxes and demands only, with the public facts of
        the whole problem (``n_agents``, ``m``, the total demand, ``strong_convexity`` and the
        optimum if it was computed before sharding).

        Parameters
        ----------
        agents : array of int, shape ``(A,)``
            Distinct global ids (held in increasing order).
        reducer : Communicator, optional
            Serves the same block (``reducer.agents`` equal to ``agents``); the total cost of
            an allocation is then gathered in agent order (:meth:`cost_terms`).

        Returns
        -------
        QuadraticResourceAllocation
            Its ``*_rows(agents)`` methods answer for the held agents and raise ``ValueError``
            naming any other agent; ``.a``, ``.b``, ``.lo``, ``.hi``, ``.demand``, ``.free``
            and a not yet computed :meth:`optimum` raise.
        """
        ids = np.asarray(agents)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) and ids.size:
            raise ValueError(f"argument 'agents' must be a 1-d array of agent ids, got "
                             f"{agents!r}")
        ids = np.sort(ids.astype(np.int64))
        if ids.size and (ids[0] < 0 or ids[-1] >= self.n_agents or np.any(np.diff(ids) == 0)):
            raise ValueError(f"argument 'agents' must hold distinct ids in "
                             f"0..{self.n_agents - 1}, got {agents!r}")
        if reducer is not None and (reducer.n_agents != self.n_agents
                                    or not np.array_equal(np.asarray(reducer.agents), ids)):
            raise ValueError(f"argument 'reducer' serves agents {np.asarray(reducer.agents)} "
                             f"of {reducer.n_agents}; the shard holds {ids}")
        if self._held is not None:
            raise ValueError(f"{self._shard_text()}: shard the full problem")
        new = copy.copy(self)
        new.__dict__.pop("data", None)   # a data set kept beside the problem stays behind
        new._rows = {k: v[ids].copy() for k, v in self._rows.items()}
        new._held = ids
        new.reducer = reducer
        return new

    def _local(self, agents: np.ndarray) -> np.ndarray:
        """Row positions of global ``agents`` in the held arrays (checked)."""
        agents = np.asarray(agents, dtype=np.int64)
        if self._held is None:
            return agents
        pos = np.searchsorted(self._held, agents)
        held = pos < self._held.size
        held[held] = self._held[pos[held]] == agents[held]
        if not held.all():
            raise ValueError(f"{self._shard_text()}: agent {agents[~held][0]} is not held here")
        return pos

    def _rows_for(self, agents: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
        """The rows of ``agents`` of each held array in ``names``: the arrays themselves when
        ``agents`` are every agent in order (checked once for all of them), else gathered."""
        rows = self._rows
        if self._held is None and agents.size == self.n_agents:
            ids = getattr(self, "_all_ids", None)
            if ids is None or ids.size != self.n_agents:
                ids = self._all_ids = np.arange(self.n_agents)
            if bool((agents == ids).all()):
                return tuple(rows[k] for k in names)
        pos = self._local(agents)
        return tuple(rows[k][pos] for k in names)

    def _rows_of(self, name: str, agents: np.ndarray) -> np.ndarray:
        return self._rows_for(agents, (name,))[0]

    def demand_rows(self, agents: np.ndarray) -> np.ndarray:
        """Demands ``d_i`` of the listed agents, shape ``(A, m)``.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global agent ids.

        Returns
        -------
        array, shape ``(A, m)``
        """
        return self._rows_of("demand", np.asarray(agents))

    def primal_rows(self, agents: np.ndarray, price: np.ndarray, *,
                    scratch: np.ndarray | None = None,
                    out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`primal` of the listed agents only: ``price`` and the result ``(A, m)``.
        Agent-wise, so its rows equal the full call's bit for bit.

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global agent ids.
        price : array, shape ``(A, m)``
            The listed agents' prices.
        scratch : float64 array, shape ``(A, m)``, optional
            Where the clipped unconstrained minimiser is formed (the same operations, so the
            same bits; its content is left undefined).
        out : float64 array, shape ``(A, m)``, optional
            With ``scratch``: the array the result is written into (C-contiguous, sharing no
            memory with ``price`` or ``scratch``; e.g. one a run reuses from round to round),
            the same bits. Default: a fresh array.

        Returns
        -------
        array, shape ``(A, m)``
            ``out`` when given with ``scratch``.
        """
        if "two_a" not in self._rows:  # an instance pickled before it was kept
            self._rows["two_a"] = 2 * np.where(self._rows["free"], self._rows["a"], 1.0)
        two_a, b, lo, hi, free = self._rows_for(np.asarray(agents),
                                                ("two_a", "b", "lo", "hi", "free"))
        # _argmin's arithmetic with its 2 a formed once
        price = np.asarray(price, dtype=float)
        if scratch is None or scratch.shape != price.shape:
            return np.where(free, np.clip((price - b) / two_a, lo, hi), lo)
        inner = np.subtract(price, b, out=scratch)
        np.true_divide(inner, two_a, out=inner)
        np.clip(inner, lo, hi, out=inner)
        if out is None or out.shape != price.shape:
            return np.where(free, inner, lo)
        # np.where's selection without its fresh array (copies only: the same bits)
        np.copyto(out, lo)
        np.copyto(out, inner, where=free)
        return out

    def cost_terms(self, agents: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``a_ik w_ik^2 + b_ik w_ik`` of the listed agents' allocations ``w`` ``(A, m)``;
        :meth:`cost` is their sum over every agent (gather the rows in agent order, then sum:
        the one-process bits).

        Parameters
        ----------
        agents : int array, shape ``(A,)``
            Global agent ids.
        w : array, shape ``(A, m)``
            Their allocations.

        Returns
        -------
        array, shape ``(A, m)``
        """
        agents = np.asarray(agents)
        w = np.asarray(w, dtype=float)
        return self._rows_of("a", agents) * w ** 2 + self._rows_of("b", agents) * w

    @staticmethod
    def _argmin(price, a, b, lo, hi, free):
        a = np.where(free, a, 1.0)
        return np.where(free, np.clip((price - b) / (2 * a), lo, hi), lo)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["reducer"] = None   # engine state, bound to its job
        return state

    # ---------------------------------------------------------------- the whole problem
    def primal(self, price: np.ndarray) -> np.ndarray:
        """``w_i = argmin_{w in W_i} F_i(w) - p_i^T w = clip((p_i - b_i) / (2 a_i), lo_i, hi_i)``.

        Parameters
        ----------
        price : array, shape ``(n_agents, m)`` (one price estimate per agent) or ``(m,)``

        Returns
        -------
        array, shape ``(n_agents, m)``
        """
        return self._argmin(np.asarray(price, dtype=float), self.a, self.b, self.lo, self.hi,
                            self.free)

    def cost(self, w: np.ndarray) -> float:
        """Total cost ``sum_i F_i(w_i)`` of every agent's allocation ``w`` ``(n_agents, m)``
        (the constant terms ``c_i`` are omitted; :ref:`dpdgt-buses`). A shard with a reducer gathers
        its agents' :meth:`cost_terms` of ``w``'s rows (every agent's allocation, agent order).

        Parameters
        ----------
        w : array, shape ``(n_agents, m)``
            Every agent's allocation.

        Returns
        -------
        float
        """
        w = np.asarray(w, dtype=float)
        if self._held is None:
            return float(np.sum(self.cost_terms(self.agents, w)))
        if self.reducer is None:
            raise ValueError(f"{self._shard_text()}: cost(w) needs every agent's costs; give "
                             "the shard a reducer (shard(agents, reducer=comm))")
        return float(np.sum(self.reducer.all_rows(self.cost_terms(self._held, w[self._held]))))

    def imbalance(self, w: np.ndarray) -> np.ndarray:
        """``sum_i w_i - sum_i d_i`` of every agent's allocation ``w``, shape ``(m,)`` (the
        total demand is a public fact, kept by shards).

        Parameters
        ----------
        w : array, shape ``(n_agents, m)``
            Every agent's allocation.

        Returns
        -------
        array, shape ``(m,)``
        """
        return np.asarray(w).sum(0) - self.total_demand

    def optimal_price(self, tol: float = 1e-13) -> np.ndarray:
        """The price ``lambda*`` at which ``sum_i w_i(lambda*) = sum_i d_i``, by bisection per
        coordinate (the primal map is monotone in the price), shape ``(m,)``.

        Parameters
        ----------
        tol : float
            Width of the final bisection bracket.

        Returns
        -------
        array, shape ``(m,)``
        """
        target = self.total_demand
        span = np.abs(self.b).max() + 2 * self.a.max() * np.abs(
            np.concatenate([self.lo, self.hi])).max() + 1.0
        lo = np.full(self.m, -span)
        hi = np.full(self.m, span)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            total = self.primal(np.broadcast_to(mid, (self.n_agents, self.m))).sum(0)
            lo = np.where(total < target, mid, lo)
            hi = np.where(total < target, hi, mid)
            if np.all(hi - lo < tol):
                break
        return 0.5 * (lo + hi)

    def optimum(self) -> np.ndarray:
        """The optimal allocation ``w*`` (KKT: a common marginal cost), shape ``(n_agents, m)``;
        cached (a shard keeps the one computed before sharding).

        Returns
        -------
        array, shape ``(n_agents, m)``
        """
        if self._optimum is None:
            if self._held is not None:
                raise ValueError(f"{self._shard_text()}: optimum() reads every agent's costs; "
                                 "compute it on the full problem before sharding")
            lam = self.optimal_price()
            self._optimum = self.primal(np.broadcast_to(lam, (self.n_agents, self.m)))
        return self._optimum.copy()


def ieee14_problem(manifold: Manifold | None = None) -> QuadraticResourceAllocation:
    """The IEEE 14-bus economic dispatch of DP-DGT's Section 6 (:ref:`dpdgt-buses`).

    Built from :func:`rfed.datasets.dispatch.ieee14_dispatch` (14 agents, m = 1, generators on
    buses 1, 2, 3, 6, 8 with Table 2's coefficients, ``W_i = {0}`` elsewhere, total demand
    361 MW). The instance keeps the data set as ``.data`` (digraph edges, the paper's ``w*``).

    Parameters
    ----------
    manifold : Manifold, optional
        ``Euclidean(1)`` by default; dual methods accept only Euclidean space.

    Returns
    -------
    QuadraticResourceAllocation
        14 agents, decisions of dimension 1.
    """
    data = ieee14_dispatch()
    problem = QuadraticResourceAllocation(data.a, data.b, data.lower, data.upper, data.demand,
                                          manifold=manifold)
    problem.data = data   # the paper's public table (digraph, w*), read by the experiments
    return problem
