"""Distributed resource allocation and the IEEE 14-bus economic dispatch of DP-DGT (spec 003).

Resource allocation (spec 003 eq. (1)) is not a finite sum of per-sample losses, so it is not a
:class:`~rfed.problems.Problem`: agent ``i`` holds a private strongly convex cost ``F_i`` on a box
``W_i`` and a local demand ``d_i``, and the agents must meet

.. math:: \\min_w \\sum_i F_i(w_i) \\quad\\text{s.t.}\\quad \\sum_i w_i = \\sum_i d_i,
          \\quad w_i \\in W_i.

What the dual methods need is the primal oracle (spec 003 eq. (12b))
``w_i(p) = argmin_{w in W_i} F_i(w) - p^T w`` for a price ``p`` (the negated dual variable), which
for the separable quadratic costs of the 14-bus system is a clip (spec 003 section 2.5).
"""

from __future__ import annotations

import numpy as np

from rfed.datasets.dispatch import ieee14_dispatch
from rfed.manifolds import Euclidean, Manifold

__all__ = ["QuadraticResourceAllocation", "ieee14_problem"]


class QuadraticResourceAllocation:
    r"""Resource allocation with ``F_i(w) = sum_k a_ik w_k^2 + b_ik w_k`` on boxes ``[lo_i, hi_i]``.

    Parameters
    ----------
    a, b : array, shape ``(n_agents, m)``
        Quadratic and linear cost coefficients; ``a >= 0``. An agent with ``lo == hi`` has the
        fixed decision ``lo`` (a bus without a generator, ``W_i = {0}``; spec 003 pitfall P9).
    lo, hi : array, shape ``(n_agents, m)``
        Box constraints ``W_i``; where ``lo < hi`` the cost must be strongly convex (``a > 0``).
    demand : array, shape ``(n_agents, m)``
        Local demands ``d_i``.
    manifold : Manifold, optional
        The space of the communicated variables (prices and trackers); ``Euclidean(m)`` by default.
        Dual methods accept only Euclidean space (spec 003 section 7); another manifold can be
        passed to check that they refuse it.
    """

    def __init__(self, a, b, lo, hi, demand, manifold: Manifold | None = None):
        arrays = {}
        for name, val in (("a", a), ("b", b), ("lo", lo), ("hi", hi), ("demand", demand)):
            arr = np.asarray(val, dtype=float)
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
                             "the costs must be strongly convex (spec 003 Assumption 1)")
        self.a, self.b = arrays["a"], arrays["b"]
        self.lo, self.hi = arrays["lo"], arrays["hi"]
        self.demand = arrays["demand"]
        self.n_agents, self.m = shape
        self.free = free
        self.manifold = manifold if manifold is not None else Euclidean(self.m)
        total_lo, total_hi = self.lo.sum(0), self.hi.sum(0)
        if np.any(self.demand.sum(0) < total_lo) or np.any(self.demand.sum(0) > total_hi):
            raise ValueError("the total demand lies outside [sum lo, sum hi]: infeasible problem")

    @property
    def strong_convexity(self) -> float:
        """``mu = min 2 a_i`` over agents with a free decision (spec 003 section 5.1: 0.06)."""
        return float(np.min(2.0 * self.a[self.free]))

    def primal(self, price: np.ndarray) -> np.ndarray:
        """``w_i = argmin_{w in W_i} F_i(w) - p_i^T w = clip((p_i - b_i) / (2 a_i), lo_i, hi_i)``.

        Parameters
        ----------
        price : array, shape ``(n_agents, m)`` (one price estimate per agent) or ``(m,)``

        Returns
        -------
        array, shape ``(n_agents, m)``
        """
        price = np.asarray(price, dtype=float)
        a = np.where(self.free, self.a, 1.0)
        return np.where(self.free, np.clip((price - self.b) / (2 * a), self.lo, self.hi), self.lo)

    def cost(self, w: np.ndarray) -> float:
        """Total cost ``sum_i F_i(w_i)`` (the constant terms ``c_i`` are omitted; spec 003 P10)."""
        w = np.asarray(w, dtype=float)
        return float(np.sum(self.a * w ** 2 + self.b * w))

    def imbalance(self, w: np.ndarray) -> np.ndarray:
        """``sum_i w_i - sum_i d_i``, shape ``(m,)``."""
        return np.asarray(w).sum(0) - self.demand.sum(0)

    def optimal_price(self, tol: float = 1e-13) -> np.ndarray:
        """The price ``lambda*`` at which ``sum_i w_i(lambda*) = sum_i d_i``, by bisection per
        coordinate (the primal map is monotone in the price), shape ``(m,)``."""
        target = self.demand.sum(0)
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
        """The optimal allocation ``w*`` (KKT: a common marginal cost), shape ``(n_agents, m)``."""
        lam = self.optimal_price()
        return self.primal(np.broadcast_to(lam, (self.n_agents, self.m)))


def ieee14_problem(manifold: Manifold | None = None) -> QuadraticResourceAllocation:
    """The IEEE 14-bus economic dispatch of DP-DGT's Section 6 (spec 003 section 5.1).

    Built from :func:`rfed.datasets.dispatch.ieee14_dispatch` (14 agents, m = 1, generators on
    buses 1, 2, 3, 6, 8 with Table 2's coefficients, ``W_i = {0}`` elsewhere, total demand
    361 MW). The instance keeps the data set as ``.data`` (digraph edges, the paper's ``w*``).
    """
    data = ieee14_dispatch()
    problem = QuadraticResourceAllocation(data.a, data.b, data.lower, data.upper, data.demand,
                                          manifold=manifold)
    problem.data = data
    return problem
