"""``rfed run NAME --engine flower``: an experiment's PriRFed runs computed by a Flower federation.

:class:`FlowerEngine` wraps an experiment's run context in a :class:`FlowerRunHook` (see
:mod:`rfed.networks.engine`); the experiments' driver
(:func:`rfed.experiments.prirfed.run_settings`) hands every PriRFed run to its
:meth:`~FlowerRunHook.run_federated`. That run is one Flower run on a
:class:`~rfed.engines.flower_launch.LoopbackFederation` started once for the experiment:

1. the experiment process writes each SuperNode's file with the rows of the agents it owns
   (the experiment's data, as a simulation of a federation on one machine) and submits the
   complete configuration (:func:`rfed.engines.flower_config.algorithm_spec`, the problem's
   public facts, the start ``x0`` and the state of the run's generator);
2. the ServerApp runs every round with the SuperNodes and returns the public record of the run
   (:class:`~rfed.engines.flower.FederatedTrace`: the agents and the global iterate of each
   round) and its privacy report;
3. this process evaluates that record as a run in one process would (:class:`FlowerReplay`: the
   rounds' iterates come from the federation; the ledger is rebuilt from the public selection
   and must give the server's report, else the run fails), so the history, the checkpoints and
   the results files are written by the experiment's usual machinery.

The evaluation (cost, gradient norm, excess risk over every agent's rows) is the experimenter's
view of a simulation, as in one process; no deployed server could compute it. The clipped-
gradient count ``n_clipped`` never leaves a client and is absent from such a run's history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from rfed._docstrings import sections_from
from rfed.algorithms.base import Algorithm, RunResult
from rfed.algorithms.federated import PriRFed
from rfed.engines.flower import FederatedTrace, _json_default, charge_round
from rfed.engines.flower_config import algorithm_spec
from rfed.manifolds import as_generator
from rfed.networks.engine import Engine
from rfed.privacy.secure import is_secure
from rfed.problems.base import Problem

__all__ = ["FlowerEngine", "FlowerReplay", "FlowerRunHook"]


def _normalised(report: Any) -> Any:
    """A report as its JSON text reads back (the ServerApp's report came through JSON)."""
    return json.loads(json.dumps(report, default=_json_default))


class FlowerReplay(Algorithm):
    """PriRFed whose rounds a Flower federation computes, replayed from the server's record.

    Parameters
    ----------
    alg : PriRFed
        The configuration run on the federation.
    federation : LoopbackFederation
        Started; :meth:`LoopbackFederation.run` is called at the first round.
    x0 : array, shape ``point_shape``
        The start.
    rng_state : dict
        The state of the run's generator before :meth:`PriRFed.init` (the ServerApp and every
        ClientApp rebuild the same generator, hence the same seed and plan).

    ``init`` is PriRFed's (the plan is computed here as on the server); ``step`` takes the next
    iterate from the federation's record and charges the ledger as PriRFed's
    :meth:`~PriRFed.finish_round` does; ``privacy`` checks the rebuilt report against the
    server's and adds its ``federation`` section (trust model, refused replies).
    """

    def __init__(self, alg: PriRFed, federation: Any, n_rounds: int, x0: np.ndarray,
                 rng_state: Mapping[str, Any]):
        self.alg = alg
        self.name = alg.name
        self.step_size = alg.step_size
        self.federation = federation
        self.n_rounds = int(n_rounds)
        self.x0 = np.asarray(x0, dtype=float)
        self.rng_state = rng_state
        self.result: Any = None

    def _trace(self, problem: Problem) -> FederatedTrace:
        if self.result is None:
            config = {"algorithm": json.dumps(algorithm_spec(self.alg)),
                      "rounds": self.n_rounds, "x0": json.dumps(self.x0.tolist()),
                      "rng-state": json.dumps(self.rng_state)}
            self.result = self.federation.run(config, problem)
        return self.result.trace

    def init(self, problem: Problem, x0: np.ndarray, rng: np.random.Generator) -> Any:
        return self.alg.init(problem, x0, rng)

    def step(self, problem: Problem, state: Any) -> Any:
        trace = self._trace(problem)
        t = state.round
        self.alg.check_round(state)
        agents = self.alg.select(problem, state)
        if t < len(trace.agents):
            if trace.agents[t] != agents.tolist():
                raise RuntimeError(f"round {t}: the federation selected agents {trace.agents[t]}, "
                                   f"the public stream gives {agents.tolist()}")
            # the bytes PriRFed.step counts: x to the selected agents, their points back
            state.comm.broadcast(state.x, agents)
            state.comm.gather(np.zeros((problem.n_agents,) + np.shape(state.x)), agents)
            return self.alg.finish_round(state, agents, trace.x[t], 0)
        diverged = trace.diverged
        if diverged is not None and diverged["round"] == t + 1 and diverged["kind"] == "training":
            charge_round(self.alg, state, agents)   # the round's replies were sent
            raise FloatingPointError(diverged["reason"])
        raise RuntimeError(f"the Flower run ended after {len(trace.agents)} rounds, before round "
                           f"{t + 1}")

    def output(self, problem: Problem, state: Any) -> np.ndarray:
        return self.alg.output(problem, state)

    @sections_from(Algorithm.metrics)
    def metrics(self, problem: Problem, state: Any, with_reference: bool) -> dict:
        """PriRFed's metrics without ``n_clipped`` (computed on the clients, never sent)."""
        out = self.alg.metrics(problem, state, with_reference)
        out.pop("n_clipped", None)
        return out

    @sections_from(Algorithm.privacy)
    def privacy(self, state: Any) -> dict[str, Any]:
        """PriRFed's report from the rebuilt ledger, equal to the server's (checked), with the
        server's ``federation`` section."""
        report = self.alg.privacy(state)
        if self.result is None:
            return report
        server = dict(self.result.privacy)
        federation = server.pop("federation", None)
        if _normalised(report) != server:
            differ = sorted(k for k in set(server) | set(report)
                            if _normalised(report).get(k) != server.get(k))
            raise RuntimeError(f"{self.name}: the privacy report rebuilt from the public record "
                               f"differs from the ServerApp's in {differ}")
        return {**report, "federation": federation}


class FlowerRunHook:
    """The experiment's run hook, with the experiment's PriRFed runs sent to ``federation``.

    Parameters
    ----------
    inner : RunContext
        The experiment's context (its checkpoints and results are unchanged).
    federation : LoopbackFederation
        Started for the whole experiment.
    """

    def __init__(self, inner: Any, federation: Any):
        self.inner = inner
        self.federation = federation
        self.secure = bool(getattr(inner, "secure", False))

    def start_run(self, algorithm, problem, n_rounds: int, eval_every: int):
        """Hook of :meth:`rfed.algorithms.base.Algorithm.run`: the context's answer.

        Parameters
        ----------
        algorithm : Algorithm
        problem : Problem
        n_rounds, eval_every : int

        Returns
        -------
        tuple
            ``(done, resume, save, every)`` as :func:`rfed.algorithms.base.run_hook` describes.
        """
        return self.inner.start_run(algorithm, problem, n_rounds, eval_every)

    def end_run(self, result) -> None:
        """Hook of :meth:`Algorithm.run`: the context records the finished run.

        Parameters
        ----------
        result : RunResult
        """
        self.inner.end_run(result)

    def run_federated(self, alg: PriRFed, problem: Problem, n_rounds: int, *,
                      rng: np.random.Generator | int, x0: np.ndarray, eval_every: int = 1,
                      callback: Any = None) -> RunResult:
        """``alg.run(problem, n_rounds, rng=rng, x0=x0, ...)`` with the rounds computed by the
        federation (:class:`FlowerReplay`); the same :class:`RunResult`, bit for bit, except
        ``n_clipped`` absent from the history and a ``federation`` section in the report.

        Parameters
        ----------
        alg : PriRFed
        problem : Problem
        n_rounds : int
        rng : numpy.random.Generator or int
            Seeded (secure mode is refused).
        x0 : ndarray, shape ``point_shape``
        eval_every : int
        callback : callable, optional
            As :meth:`~rfed.algorithms.base.Algorithm.run`.

        Returns
        -------
        RunResult
        """
        if self.secure or is_secure(rng):
            raise ValueError("the Flower engine runs seeded (replayable) runs; --secure is not "
                             "available with --engine flower")
        rng = as_generator(rng)
        x0 = problem.manifold.check_point(x0, "x0")
        replay = FlowerReplay(alg, self.federation, n_rounds, x0, rng.bit_generator.state)
        return replay.run(problem, n_rounds, rng=rng, x0=x0, eval_every=eval_every,
                          callback=callback)


class FlowerEngine(Engine):
    """The Flower engine: an experiment's PriRFed runs are computed by ``federation``
    (``rfed run NAME --engine flower``); everything else runs in this process.

    Parameters
    ----------
    federation : LoopbackFederation
        Started for the whole experiment.
    """

    name = "flower"

    def __init__(self, federation: Any):
        self.federation = federation

    @sections_from(Engine.run_hook)
    def run_hook(self, hook: Any) -> FlowerRunHook:
        """``FlowerRunHook(hook, federation)``."""
        return FlowerRunHook(hook, self.federation)
