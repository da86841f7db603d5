"""IEEE 14-bus economic dispatch data of DP-DGT (Sec. 6 of the paper, Table 2).

One agent per bus (N = 14, scalar decisions). Generator buses 1, 2, 3, 6, 8 have quadratic costs
``F_i(w) = a_i w^2 + b_i w + c_i`` (Table 2, "adapted from Kar & Hug 2012"; ``c_i`` is never given
and set to 0) and box limits; the other buses have ``W_i = {0}`` (:ref:`dpdgt-buses`). The demands
are the paper's "virtual local demands" (total 361 MW, bus 12 included; :ref:`dpdgt-graph`). The
communication digraph has 35 edges; in the paper's convention (its "Graph Theory" notation) a pair
``(i, j)`` means the edge ``j -> i`` (agent i receives from j), which is the reading
:ref:`dpdgt-graph` adopts.

References
----------
* Wei Huo, Xiaomeng Chen, Lingying Huang, Karl Henrik Johansson and Ling Shi. Differentially
  Private Dual Gradient Tracking for Distributed Resource Allocation. Automatica 182, 112521,
  2025. arXiv:2403.18275.
* Soummya Kar and Gabriela Hug. Distributed Robust Economic Dispatch in Power Systems: A
  Consensus + Innovations Approach. IEEE Power and Energy Society General Meeting, 2012.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rfed.datasets._validation import check_float, check_int

__all__ = ["EconomicDispatch", "dispatch_optimum", "ieee14_dispatch"]


def _frozen(a) -> np.ndarray:
    arr = np.array(a)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class EconomicDispatch:
    """An economic-dispatch (resource allocation) instance with quadratic costs.

    ``min sum_i a_i w_i^2 + b_i w_i + c_i`` s.t. ``sum_i w_i = sum_i d_i`` and
    ``lower_i <= w_i <= upper_i``.
    All arrays are read-only; indices are 0-based (bus k of the paper is index k - 1).

    Attributes
    ----------
    a, b, c : ndarray, shape ``(n_buses,)``
        Cost coefficients (0 at buses without a generator).
    lower, upper : ndarray, shape ``(n_buses,)``
        Box limits in MW (``[0, 0]`` at buses without a generator).
    demand : ndarray, shape ``(n_buses,)``
        Local demands ``d_i`` in MW.
    generators : ndarray of int64, shape ``(n_generators,)``
        0-based indices of the generator buses.
    edges : ndarray of int64, shape ``(n_edges, 2)``
        Directed communication edges as ``(source, target)`` pairs, 0-based: information flows
        from ``source`` to ``target``.
    edges_paper : ndarray of int64, shape ``(n_edges, 2)``
        The pairs ``(i, j)`` exactly as printed in the paper (1-based; meaning ``j -> i``).
    w_star : ndarray, shape ``(n_generators,)``
        The paper's optimum for the generator buses (CVX, 4 decimals), or empty if unknown.
    """

    name: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    demand: np.ndarray
    generators: np.ndarray
    edges: np.ndarray
    edges_paper: np.ndarray
    w_star: np.ndarray = field(default_factory=lambda: _frozen(np.zeros(0)))

    @property
    def n_buses(self) -> int:
        """Number of buses (agents)."""
        return len(self.a)

    @property
    def total_demand(self) -> float:
        """``sum_i d_i`` in MW."""
        return float(self.demand.sum())

    @property
    def w_star_full(self) -> np.ndarray:
        """The paper's optimum as a vector over all buses (0 at buses without a generator)."""
        w = np.zeros(self.n_buses)
        w[self.generators] = self.w_star
        return w

    def cost(self, w: np.ndarray) -> np.ndarray:
        """Total cost ``sum_i a_i w_i^2 + b_i w_i + c_i``; ``w`` of shape ``(..., n_buses)``.

        Parameters
        ----------
        w : array, shape ``(..., n_buses)``
            Allocations.

        Returns
        -------
        array, shape ``...``
        """
        w = np.asarray(w, dtype=np.float64)
        if w.shape[-1:] != (self.n_buses,):
            raise ValueError(f"argument 'w' must have last axis {self.n_buses}, got {w.shape}")
        return np.sum(self.a * w**2 + self.b * w + self.c, axis=-1)

    def adjacency(self) -> np.ndarray:
        """Dense 0/1 matrix with ``A[i, j] = 1`` iff ``j -> i`` (row i: in-neighbours of i).

        Returns
        -------
        array, shape ``(n_buses, n_buses)``
        """
        adj = np.zeros((self.n_buses, self.n_buses))
        adj[self.edges[:, 1], self.edges[:, 0]] = 1.0
        return adj


def ieee14_dispatch() -> EconomicDispatch:
    """The IEEE 14-bus economic dispatch of DP-DGT (Sec. 6, Table 2), every number as printed.

    Returns
    -------
    EconomicDispatch
        14 buses, generators at buses 1, 2, 3, 6, 8 (indices 0, 1, 2, 5, 7), total demand 361 MW,
        35 directed edges, ``w_star = [76.7398, 85.6530, 59.1311, 68.9863, 70.4898]``.
    """
    n = 14
    gen_buses = np.array([1, 2, 3, 6, 8])
    a, b, lo, hi = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    a[gen_buses - 1] = [0.04, 0.03, 0.035, 0.03, 0.04]
    b[gen_buses - 1] = [2.0, 3.0, 4.0, 4.0, 2.5]
    hi[gen_buses - 1] = [80.0, 90.0, 70.0, 70.0, 80.0]
    demand = np.array([0, 9, 56, 55, 27, 27, 0, 0, 8, 24, 53, 46, 16, 40], dtype=np.float64)
    pairs = [(i, i + 1) for i in range(1, 13)] + [(i, i + 2) for i in range(1, 13)]
    pairs += [(13, 14), (13, 1), (14, 1), (1, 7), (2, 8), (3, 2), (3, 9), (4, 10), (5, 2),
              (5, 11), (6, 12)]
    paper = np.array(pairs, dtype=np.int64)
    return EconomicDispatch(
        name="ieee14",
        a=_frozen(a),
        b=_frozen(b),
        c=_frozen(np.zeros(n)),
        lower=_frozen(lo),
        upper=_frozen(hi),
        demand=_frozen(demand),
        generators=_frozen(gen_buses - 1),
        edges=_frozen(paper[:, ::-1] - 1),
        edges_paper=_frozen(paper),
        w_star=_frozen([76.7398, 85.6530, 59.1311, 68.9863, 70.4898]),
    )


def dispatch_optimum(
    problem: EconomicDispatch, *, tol: float = 1e-12, max_iter: int = 200
) -> tuple[np.ndarray, float]:
    """Exact optimum of the dispatch problem by bisection on the price (KKT conditions).

    For a price ``lam`` every generator produces ``clip((lam - b_i) / (2 a_i), lower_i, upper_i)``
    (stationarity of ``a w^2 + b w - lam w`` on the box); total production is non-decreasing in
    ``lam``, so bisection finds the ``lam*`` that meets the total demand.

    Parameters
    ----------
    problem : EconomicDispatch
        E.g. :func:`ieee14_dispatch`.
    tol : float
        Bisection tolerance on the price.
    max_iter : int
        Bisection steps at most.

    Returns
    -------
    w : ndarray, shape ``(n_buses,)``
        Optimal generation (0 at buses without a generator).
    lam : float
        Market-clearing price ``lam*`` (the dual optimum is ``x* = -lam*`` in DP-DGT's sign).
    """
    tol = check_float(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    g = problem.generators
    a, b = problem.a[g], problem.b[g]
    lo, hi = problem.lower[g], problem.upper[g]
    if np.any(a <= 0):
        raise ValueError("argument 'problem': every generator needs a_i > 0 (strong convexity)")
    total = problem.total_demand - problem.lower.sum() + lo.sum()
    if not lo.sum() <= total <= hi.sum():
        raise ValueError(
            f"argument 'problem': demand {problem.total_demand} MW is outside the generation range"
            f" [{lo.sum()}, {hi.sum()}] MW"
        )

    def supply(lam: float) -> np.ndarray:
        return np.clip((lam - b) / (2 * a), lo, hi)

    lam_lo = float(np.min(b + 2 * a * lo))
    lam_hi = float(np.max(b + 2 * a * hi))
    for _ in range(max_iter):
        lam = 0.5 * (lam_lo + lam_hi)
        if supply(lam).sum() < total:
            lam_lo = lam
        else:
            lam_hi = lam
        if lam_hi - lam_lo < tol:
            break
    lam = 0.5 * (lam_lo + lam_hi)
    w = problem.lower.astype(np.float64).copy()
    w[g] = supply(lam)
    return w, lam
