r"""Armijo backtracking line search on a manifold, batched over independent points.

Given a point :math:`x`, a descent direction :math:`d \in T_x M`, the cost :math:`f_0 = f(x)`
and the slope :math:`f'_0 = \langle \operatorname{grad} f(x), d\rangle_x < 0`, the search
tries :math:`x(\alpha) = \operatorname{Exp}_x(\alpha d)` for a first :math:`\alpha` and
contracts :math:`\alpha \leftarrow \rho \alpha` until the Armijo (sufficient decrease)
condition

.. math:: f(x(\alpha)) \le f_0 + c\, \alpha\, f'_0

holds (at most ``max_backtracks`` contractions); a trial that still does not decrease the cost
is rejected (:math:`\alpha = 0`, the point stays). The first trial follows Nocedal and Wright's
interpolation heuristic (their eq. (3.60)) with the "optimism" factor of Manopt and pymanopt's
``BackTrackingLineSearcher``: with the previous search's starting cost :math:`f_{-1}`,
:math:`\alpha_0 = \text{optimism} \cdot 2 (f_0 - f_{-1}) / f'_0`, and
:math:`\alpha_0 = \text{initial\_step} / \|d\|_x` for the first search (or when the heuristic
gives no positive step, e.g. after a rejected step, where pymanopt would try
:math:`\alpha = 0` for ever).

References
----------
* L. Armijo. Minimization of functions having Lipschitz continuous first partial derivatives.
  Pacific Journal of Mathematics 16(1):1-3, 1966.
* P.-A. Absil, R. Mahony and R. Sepulchre. Optimization Algorithms on Matrix Manifolds.
  Princeton University Press, 2008, Sec. 4.2 (Armijo point on a manifold, Def. 4.2.2).
* J. Nocedal and S. J. Wright. Numerical Optimization, 2nd ed. Springer, 2006, Sec. 3.5.
* J. Townsend, N. Koep and S. Weichwald. Pymanopt: A Python Toolbox for Optimization on
  Manifolds using Automatic Differentiation. JMLR 17(137):1-5, 2016, arXiv:1603.03236
  (``pymanopt.optimizers.line_search.BackTrackingLineSearcher``, whose defaults these are).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ArmijoLineSearch", "ArmijoStep"]


@dataclasses.dataclass(frozen=True)
class ArmijoStep:
    """The outcome of one :meth:`ArmijoLineSearch.search` on ``P`` points.

    Attributes
    ----------
    x : array, shape ``(P, *point_shape)``
        The accepted points (the start where a step was rejected).
    cost : array, shape ``(P,)``
        The cost at ``x``.
    alpha : array, shape ``(P,)``
        The accepted multiplier of the direction (0 where rejected).
    evaluations : int
        Rounds of cost evaluations made (each on the points still backtracking).
    """

    x: np.ndarray
    cost: np.ndarray
    alpha: np.ndarray
    evaluations: int


def _check_in(value: Any, name: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (lo < float(value) < hi):
        raise ValueError(f"argument '{name}' must be a number in ({lo:g}, {hi:g}), got "
                         f"{value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class ArmijoLineSearch:
    """Armijo backtracking (module docstring), pymanopt's ``BackTrackingLineSearcher`` defaults.

    Parameters
    ----------
    contraction : float
        ``rho`` in (0, 1): the step's factor at each backtrack.
    sufficient_decrease : float
        ``c`` in (0, 1) of the Armijo condition.
    optimism : float
        Factor (> 0) on the interpolated first trial.
    initial_step : float
        Length (> 0) of the first search's first trial, ``alpha ||d|| = initial_step``.
    max_backtracks : int
        Contractions (>= 0) before the search gives up (and keeps the last trial if it
        decreases the cost, as pymanopt does).
    """

    contraction: float = 0.5
    sufficient_decrease: float = 1e-4
    optimism: float = 2.0
    initial_step: float = 1.0
    max_backtracks: int = 25

    def __post_init__(self) -> None:
        _check_in(self.contraction, "contraction", 0.0, 1.0)
        _check_in(self.sufficient_decrease, "sufficient_decrease", 0.0, 1.0)
        _check_in(self.optimism, "optimism", 0.0, math.inf)
        _check_in(self.initial_step, "initial_step", 0.0, math.inf)
        if isinstance(self.max_backtracks, bool) or not isinstance(
                self.max_backtracks, (int, np.integer)) or self.max_backtracks < 0:
            raise ValueError(f"argument 'max_backtracks' must be an int >= 0, got "
                             f"{self.max_backtracks!r}")

    def first_trial(self, cost: np.ndarray, slope: np.ndarray, direction_norm: np.ndarray,
                    previous_cost: np.ndarray | None) -> np.ndarray:
        """The first multiplier of each point (module docstring).

        Parameters
        ----------
        cost, slope, direction_norm : arrays, shape ``(P,)``
            ``f_0``, ``f'_0`` and ``||d||_x``.
        previous_cost : array, shape ``(P,)``, or None
            ``f_{-1}``, the previous search's starting cost (NaN or None: no previous search).

        Returns
        -------
        array, shape ``(P,)``
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            fresh = self.initial_step / direction_norm
            if previous_cost is None:
                return fresh
            guess = self.optimism * 2.0 * (cost - previous_cost) / slope
        return np.where(np.isfinite(guess) & (guess > 0), guess, fresh)

    def search(self, cost: Callable[[np.ndarray, np.ndarray], np.ndarray], manifold: Any,
               x: np.ndarray, direction: np.ndarray, f0: np.ndarray, slope: np.ndarray,
               previous_cost: np.ndarray | None = None) -> ArmijoStep:
        """Backtrack from ``x`` along ``direction``, every point on its own.

        Parameters
        ----------
        cost : callable
            ``cost(points, rows) -> array (len(rows),)``: the cost of the points of the listed
            rows (``points`` of shape ``(len(rows), *point_shape)``).
        manifold : Manifold
            Its ``exp`` makes the trial points.
        x, direction : arrays, shape ``(P, *point_shape)``
        f0, slope : arrays, shape ``(P,)``
            The costs at ``x`` and the slopes ``<grad f(x), d>`` (negative for a descent
            direction; a point whose slope is not negative does not move).
        previous_cost : array, shape ``(P,)``, optional
            The previous search's ``f0`` of each point (NaN: none).

        Returns
        -------
        ArmijoStep
        """
        x = np.asarray(x, dtype=float)
        direction = np.asarray(direction, dtype=float)
        f0 = np.asarray(f0, dtype=float)
        slope = np.asarray(slope, dtype=float)
        norm = np.asarray(manifold.norm(x, direction), dtype=float).reshape(f0.shape)
        alpha = self.first_trial(f0, slope, norm, previous_cost)
        moving = (slope < 0) & (norm > 0) & np.isfinite(alpha)
        alpha = np.where(moving, alpha, 0.0)
        shape = (-1,) + (1,) * (x.ndim - 1)
        points = x.copy()
        values = f0.copy()
        rows = np.flatnonzero(moving)
        evaluations = 0
        for _ in range(self.max_backtracks + 1):
            if not rows.size:
                break
            points[rows] = manifold.exp(x[rows], alpha[rows].reshape(shape) * direction[rows])
            values[rows] = cost(points[rows], rows)
            evaluations += 1
            armijo = values[rows] <= f0[rows] + self.sufficient_decrease * alpha[rows] * slope[rows]
            rows = rows[~armijo]
            alpha[rows] *= self.contraction
        # the last contraction of a point that never met the condition was not tried: undo it
        alpha[rows] /= self.contraction
        rejected = ~(values <= f0)
        if rejected.any():
            points[rejected] = x[rejected]
            values[rejected] = f0[rejected]
            alpha[rejected] = 0.0
        return ArmijoStep(points, values, alpha, evaluations)
