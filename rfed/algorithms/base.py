"""What every rfed algorithm shares: a configured object with a step-wise and a run form.

An algorithm is configured once (step sizes, noise, sampling) and then

* ``state = alg.init(problem, x0, rng)`` / ``state = alg.step(problem, state)``: the step-wise
  form on an explicit state, for checkpointing and research use;
* ``result = alg.run(problem, n_rounds, x0=..., rng=...)``: the loop, recording a history of
  metrics every ``eval_every`` rounds and returning a :class:`RunResult`.

The state must hold everything the next step needs (iterates, the generator, the privacy
ledger, counters), so that stepping a restored state continues the run exactly.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rfed.manifolds.base import as_generator
from rfed.problems.base import Problem

__all__ = ["Algorithm", "RunResult", "evaluate_point"]


def evaluate_point(problem: Problem, x: np.ndarray, with_reference: bool = True) -> dict:
    """Cost, gradient norm and, when a reference exists, excess risk and distance at ``x``.

    Returns
    -------
    dict with keys ``cost``, ``grad_norm`` and (if ``with_reference``) ``excess_risk`` =
    ``f(x) - f(x*)`` and ``dist_to_ref`` = ``d(x, x*)``.
    """
    out = {"cost": problem.cost(x), "grad_norm": problem.grad_norm(x)}
    if with_reference:
        out["excess_risk"] = out["cost"] - problem.reference_cost()
        out["dist_to_ref"] = problem.distance_to_reference(x)
    return out


@dataclass
class RunResult:
    """The outcome of :meth:`Algorithm.run`.

    Attributes
    ----------
    x : array, shape ``point_shape``
        The output point (the algorithm's output option applied).
    history : list of dict
        One record per evaluated round: ``round`` and metrics such as ``cost``,
        ``grad_norm``, ``excess_risk``, ``dist_to_ref``, ``consensus_error``, ``bytes_sent``.
    privacy : object or None
        The privacy ledger / report of the run (``None`` for a non-private run).
    state : object
        The final state (for resuming with :meth:`Algorithm.step`).
    """

    x: np.ndarray
    history: list[dict] = field(default_factory=list)
    privacy: Any = None
    state: Any = None

    def metric(self, key: str) -> np.ndarray:
        """The history of one metric as an array (NaN where a round did not record it)."""
        return np.array([rec.get(key, np.nan) for rec in self.history], dtype=float)


class Algorithm(abc.ABC):
    """Base class of rfed's federated and decentralized algorithms."""

    name: str = "algorithm"

    @abc.abstractmethod
    def init(self, problem: Problem, x0: np.ndarray, rng: np.random.Generator) -> Any:
        """The state before the first round."""

    @abc.abstractmethod
    def step(self, problem: Problem, state: Any) -> Any:
        """Perform one round (one communication round) and return the new state."""

    @abc.abstractmethod
    def output(self, problem: Problem, state: Any) -> np.ndarray:
        """The point the algorithm returns from ``state`` (one point of the manifold)."""

    def metrics(self, problem: Problem, state: Any, with_reference: bool) -> dict:
        """Metrics recorded in the history; subclasses add their own (consensus, bytes)."""
        return evaluate_point(problem, self.output(problem, state), with_reference)

    def privacy(self, state: Any) -> Any:
        """The privacy ledger of ``state`` (``None`` when the algorithm is not private)."""
        return getattr(state, "ledger", None)

    def run(
        self,
        problem: Problem,
        n_rounds: int,
        *,
        rng: np.random.Generator | int,
        x0: np.ndarray | None = None,
        eval_every: int = 1,
        with_reference: bool = True,
        callback: Callable[[int, dict, Any], None] | None = None,
    ) -> RunResult:
        """Run ``n_rounds`` rounds from ``x0`` (a random point when omitted).

        Parameters
        ----------
        problem : Problem
        n_rounds : int
            Number of rounds (communication rounds / aggregations), >= 1.
        rng : numpy.random.Generator or int
            All randomness of the run (sampling, noise, the random start).
        x0 : array, shape ``point_shape``, optional
            Initial point; checked to lie on the manifold.
        eval_every : int
            Record metrics every ``eval_every`` rounds (and at rounds 0 and ``n_rounds``).
        with_reference : bool
            Include excess risk and distance to the problem's reference solution.
        callback : callable, optional
            ``callback(round, record, state)`` after every recorded round (e.g. to write the
            history as it grows).
        """
        if not isinstance(n_rounds, (int, np.integer)) or n_rounds < 1:
            raise ValueError(f"argument 'n_rounds' must be an int >= 1, got {n_rounds!r}")
        if not isinstance(eval_every, (int, np.integer)) or eval_every < 1:
            raise ValueError(f"argument 'eval_every' must be an int >= 1, got {eval_every!r}")
        rng = as_generator(rng)
        if x0 is None:
            x0 = problem.manifold.random_point(rng)
        x0 = problem.manifold.check_point(x0, "x0")
        state = self.init(problem, x0, rng)
        history: list[dict] = []

        def record(t: int) -> None:
            rec = {"round": t, **self.metrics(problem, state, with_reference)}
            history.append(rec)
            if callback is not None:
                callback(t, rec, state)

        record(0)
        for t in range(1, n_rounds + 1):
            state = self.step(problem, state)
            if t % eval_every == 0 or t == n_rounds:
                record(t)
        return RunResult(
            x=self.output(problem, state), history=history, privacy=self.privacy(state),
            state=state,
        )
