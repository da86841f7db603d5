"""Tail averaging of an algorithm's outputs: post-processing that costs no privacy.

:class:`TailAveraged` wraps any :class:`~rfed.algorithms.base.Algorithm` and returns, instead of
the last round's output ``x_T``, the mean of the outputs of the rounds ``t0 < t <= T``
(Polyak-Ruppert averaging of the tail; on a manifold the running Frechet mean of Sturm's
inductive form, ``xbar_k = Exp_{xbar_{k-1}}(Log_{xbar_{k-1}}(x_t) / k)``, which on Euclidean space
is exactly the arithmetic mean ``(1/k) sum x_t``). The wrapped algorithm's rounds, randomness,
releases and ledger are untouched: the average is a function of the outputs the run would have
released at those rounds, so its privacy report is the wrapped run's report, unchanged. It
reduces the variance the noise and the minibatches leave in the last iterate.

With ``ema_decay = beta > 0`` the tail is averaged with exponentially decaying weights instead,
the iterate averaging of De, Berrada, Hayes, Smith and Balle ("Unlocking High-Accuracy
Differentially Private Image Classification through Scale", arXiv:2204.13650, 2022): the
``k``-th averaged output enters with weight ``w_k = max(1/k, 1 - beta)``,
``xbar_k = Exp_{xbar_{k-1}}(w_k Log_{xbar_{k-1}}(x_t))``, i.e. the plain mean while fewer than
``1 / (1 - beta)`` outputs are averaged (a warm-up: the first averaged output does not keep
the weight ``beta`` of a start that is not an output), then an exponential moving average of
decay ``beta``. It is the same post-processing of the same
outputs, so the privacy argument is unchanged. On Euclidean space both averages are linear in
the outputs: for a decentralized trainer whose output is the mean of the agents' models, the
average of the network means is the network mean of the agents' own averages, each a function
of the agent's own noisy releases and of the messages it received.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms.base import Algorithm, evaluate_point
from rfed.problems.base import Problem

__all__ = ["TailAveraged", "TailAveragedState"]


@dataclass
class TailAveragedState:
    """The wrapped algorithm's state plus the running average.

    Attributes
    ----------
    inner : object
        The wrapped algorithm's state.
    average : array, shape ``point_shape``, or None
        Mean of the outputs of the rounds averaged so far (``None`` before round ``t0 + 1``).
    count : int
        How many rounds' outputs the average holds.
    """

    inner: Any
    average: np.ndarray | None = None
    count: int = 0

    @property
    def t(self) -> int:
        """Rounds done (the wrapped state's)."""
        return self.inner.t

    @property
    def ledger(self) -> Any:
        """The wrapped run's privacy ledger (averaging adds no release)."""
        return getattr(self.inner, "ledger", None)


class TailAveraged(Algorithm):
    r"""Run ``algorithm``; output the mean of its outputs over rounds ``average_from < t <= T``.

    Parameters
    ----------
    algorithm : Algorithm
        Any rfed algorithm with a state carrying the rounds done as ``t``.
    average_from : int
        ``t0 >= 0``: the outputs of rounds ``t0 + 1, ..., T`` are averaged (``t0 = 0``: every
        round; a ``t0 >= T`` returns the last output). A public number, fixed before the run
        (e.g. half the planned rounds).
    ema_decay : float
        ``beta`` in ``[0, 1)``: ``0`` averages the tail uniformly; ``beta > 0`` gives the
        ``k``-th averaged output the weight ``max(1/k, 1 - beta)`` (an exponential moving
        average of decay ``beta`` after a uniform warm-up of ``1 / (1 - beta)`` outputs).

    Notes
    -----
    Privacy: the average is post-processing of the per-round outputs, so :meth:`privacy` is the
    wrapped algorithm's report of the same rounds, bit for bit. The wrapped algorithm draws the
    same random numbers as it does unwrapped, so its trajectory is the same.
    """

    def __init__(self, algorithm: Algorithm, *, average_from: int, ema_decay: float = 0.0):
        if not isinstance(algorithm, Algorithm):
            raise TypeError(f"argument 'algorithm' must be an rfed Algorithm, got {algorithm!r}")
        if (isinstance(average_from, bool) or not isinstance(average_from, (int, np.integer))
                or average_from < 0):
            raise ValueError(f"argument 'average_from' must be an int >= 0, got "
                             f"{average_from!r}")
        if (isinstance(ema_decay, bool) or not isinstance(ema_decay, (int, float, np.floating))
                or not 0.0 <= float(ema_decay) < 1.0):
            raise ValueError(f"argument 'ema_decay' must be a float in [0, 1), got "
                             f"{ema_decay!r}")
        self.algorithm = algorithm
        self.average_from = int(average_from)
        self.ema_decay = float(ema_decay)
        self.name = (f"{algorithm.name} (tail-averaged)" if self.ema_decay == 0.0 else
                     f"{algorithm.name} (EMA {self.ema_decay:g} of the tail)")

    @property
    def step_size(self) -> Any:
        """The wrapped algorithm's step size (so :meth:`run` checks a schedule the same way)."""
        return getattr(self.algorithm, "step_size", None)

    def init(self, problem: Problem, x0: np.ndarray, rng: Any) -> TailAveragedState:
        return TailAveragedState(inner=self.algorithm.init(problem, x0, rng))

    def step(self, problem: Problem, state: TailAveragedState) -> TailAveragedState:
        inner = self.algorithm.step(problem, state.inner)
        if inner.t <= self.average_from:
            return TailAveragedState(inner=inner)
        x = self.algorithm.output(problem, inner)
        k = state.count + 1
        if state.average is None:
            average = np.array(x, dtype=float)
        else:
            man = problem.manifold
            step = man.log(state.average, x)
            # the uniform mean (weight 1/k) until 1 - beta exceeds it, then the EMA's weight
            if self.ema_decay > 0.0 and 1.0 - self.ema_decay > 1.0 / k:
                average = man.exp(state.average, (1.0 - self.ema_decay) * step)
            else:
                average = man.exp(state.average, step / k)
        return TailAveragedState(inner=inner, average=average, count=k)

    def output(self, problem: Problem, state: TailAveragedState) -> np.ndarray:
        if state.average is None:
            return self.algorithm.output(problem, state.inner)
        return state.average

    def iterates(self, state: TailAveragedState) -> np.ndarray | None:
        return self.algorithm.iterates(state.inner)

    def divergence(self, problem: Problem, state: TailAveragedState, recorded: bool) -> str | None:
        return self.algorithm.divergence(problem, state.inner, recorded)

    def privacy(self, state: TailAveragedState) -> Any:
        return self.algorithm.privacy(state.inner)

    @sections_from(Algorithm.metrics)
    def metrics(self, problem: Problem, state: TailAveragedState, with_reference: bool) -> dict:
        """The wrapped algorithm's metrics (consensus, traffic), with the cost, gradient norm
        and reference distances of the averaged output."""
        out = self.algorithm.metrics(problem, state.inner, with_reference)
        out.update(evaluate_point(problem, self.output(problem, state), with_reference))
        out["averaged_rounds"] = state.count
        return out
