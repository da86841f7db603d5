"""Repetitions of one PriRFed configuration advanced together: each round is one batched call.

An experiment repeats a setting ``R`` times with independent generators. Run one after the
other, every local step is a Python-level call serving one run (with one agent per round, a
handful of rows). :class:`RepeatedRuns` advances the ``R`` runs round by round through
:meth:`PriRFed.step_runs`, which stacks their agents on the agent axis, so each local step
serves all ``R`` runs. Every run keeps its own seed, keyed streams, noise calibration, ledger,
aggregation and byte counts, and the trainers compute row by row, so each run's history is bit
for bit the one it has alone (``tests/algorithms/test_repeated_runs.py``).

Divergence stays per run: when the batched round raises (a non-finite local iterate in some
run), the round is redone run by run, the runs that diverge are closed with the
:class:`RunResult` a run alone returns, and the others go on batched. :class:`RepeatedRuns` is
an :class:`~rfed.algorithms.base.Algorithm`, so :meth:`Algorithm.run` checkpoints and resumes
the whole group (its state holds every run's state and history).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rfed.algorithms.base import Algorithm, RunResult, step_size_at
from rfed.algorithms.federated.prirfed import PriRFed, PriRFedState
from rfed.manifolds.base import as_generator
from rfed.problems.base import Problem

__all__ = ["RepeatedRuns", "RepeatedState"]


@dataclass
class RepeatedState:
    """The group's state after ``round`` rounds.

    Attributes
    ----------
    round : int
    states : list of PriRFedState
        Each run's state (a diverged run's last finite state).
    histories : list of list of dict
        Each run's recorded rounds (the records :meth:`Algorithm.run` would return).
    extras : list of list of dict
        Per recorded round, what ``on_record`` added for that run.
    diverged : list of RunResult or None
        The result of each run that diverged (``None`` while it runs).
    """

    round: int
    states: list[PriRFedState]
    histories: list[list[dict]]
    extras: list[list[dict]]
    diverged: list[RunResult | None] = field(default_factory=list)


class RepeatedRuns(Algorithm):
    """``R`` independent runs of ``algorithm`` on one problem, advanced as one computation.

    Run it with :meth:`Algorithm.run` (``rng`` and ``x0`` of that call are not used: each run
    has its own), then split the group with :meth:`results`.

    Parameters
    ----------
    algorithm : PriRFed
        The configuration every run shares.
    x0s : sequence of arrays, length ``R``
        Each run's start, shape ``point_shape``.
    rngs : sequence of Generator or int, length ``R``
        Each run's generator (as ``rng`` of :meth:`Algorithm.run`; seeded, not secure).
    n_rounds : int
        The rounds of the run (for the recorded rounds: multiples of ``eval_every`` and the
        last).
    eval_every : int
    with_reference : bool
    on_record : callable, optional
        ``on_record(run, state) -> dict`` at each recorded round of each run (e.g. extra
        metrics at the run's iterate); kept in :attr:`RepeatedState.extras`.
    """

    def __init__(self, algorithm: PriRFed, x0s: Sequence[np.ndarray],
                 rngs: Sequence[np.random.Generator | int], *, n_rounds: int, eval_every: int,
                 with_reference: bool = True,
                 on_record: Callable[[int, PriRFedState], dict] | None = None):
        if not isinstance(algorithm, PriRFed):
            raise TypeError(f"argument 'algorithm' must be a PriRFed, got {algorithm!r}")
        if len(x0s) != len(rngs) or not len(x0s):
            raise ValueError(f"arguments 'x0s' and 'rngs' must be non-empty and of the same "
                             f"length (one per run), got {len(x0s)} and {len(rngs)}")
        self.algorithm = algorithm
        self.x0s = list(x0s)
        self.rngs = list(rngs)
        self.n_rounds = int(n_rounds)
        self.eval_every = int(eval_every)
        self.with_reference = bool(with_reference)
        self.on_record = on_record
        self.name = f"{algorithm.name} x{len(self.x0s)} runs"

    def _record_run(self, problem: Problem, group: RepeatedState, r: int, t: int) -> None:
        st = group.states[r]
        group.histories[r].append(
            {"round": t, **self.algorithm.metrics(problem, st, self.with_reference)})
        group.extras[r].append(self.on_record(r, st) if self.on_record is not None else {})

    def init(self, problem: Problem, x0: Any, rng: Any) -> RepeatedState:
        alg = self.algorithm
        states = []
        for x0_r, rng_r in zip(self.x0s, self.rngs, strict=True):
            states.append(alg.init(problem, problem.manifold.check_point(x0_r, "x0"),
                                   as_generator(rng_r)))
        group = RepeatedState(0, states, [[] for _ in states], [[] for _ in states],
                              [None] * len(states))
        for r in range(len(states)):
            self._record_run(problem, group, r, 0)
        return group

    def step(self, problem: Problem, group: RepeatedState) -> RepeatedState:
        alg = self.algorithm
        t = group.round + 1
        if callable(alg.step_size):
            step_size_at(alg.step_size, t - 1)   # alpha_t of the round about to run
        active = [r for r, d in enumerate(group.diverged) if d is None]
        new: dict[int, PriRFedState | str] = {}
        if active:
            try:
                stepped = alg.step_runs(problem, [group.states[r] for r in active])
                new = dict(zip(active, stepped, strict=True))
            except (FloatingPointError, np.linalg.LinAlgError):
                # some run diverged in this round: redo it run by run (the states are
                # untouched), so each run ends or goes on exactly as it would alone
                for r in active:
                    try:
                        new[r] = alg.step(problem, group.states[r])
                    except (FloatingPointError, np.linalg.LinAlgError) as exc:
                        new[r] = f"{type(exc).__name__}: {exc}"
        recorded = t % self.eval_every == 0 or t == self.n_rounds
        for r, st in new.items():
            reason = st if isinstance(st, str) else alg.divergence(problem, st, recorded)
            if reason is not None or isinstance(st, str):  # a str is its own reason
                group.diverged[r] = alg._diverged(problem, group.states[r],
                                                  list(group.histories[r]), t, reason)
                continue
            group.states[r] = st
            if recorded:
                self._record_run(problem, group, r, t)
        group.round = t
        return group

    def output(self, problem: Problem, group: RepeatedState) -> np.ndarray:
        return self.algorithm.output(problem, group.states[0])

    def metrics(self, problem: Problem, group: RepeatedState, with_reference: bool) -> dict:
        # the group's own record is the round alone: the runs' records live in the state
        return {}

    def privacy(self, group: RepeatedState) -> None:
        return None

    def results(self, problem: Problem, group: RepeatedState) -> list[RunResult]:
        """Each run's :class:`RunResult`, as :meth:`Algorithm.run` of that run alone returns it.

        Parameters
        ----------
        problem : Problem
            The problem every run solves.
        group : RepeatedState
            The state of the runs done together.

        Returns
        -------
        list of RunResult
            One per run, in order; a diverged run's result records its divergence.
        """
        alg = self.algorithm
        return [d if d is not None else RunResult(
                    x=alg.output(problem, st), history=list(hist), privacy=alg.privacy(st),
                    state=st)
                for st, hist, d in zip(group.states, group.histories, group.diverged,
                                       strict=True)]
