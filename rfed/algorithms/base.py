"""What every rfed algorithm shares: a configured object with a step-wise and a run form.

An algorithm is configured once (step sizes, noise, sampling) and then

* ``state = alg.init(problem, x0, rng)`` / ``state = alg.step(problem, state)``: the step-wise
  form on an explicit state, for checkpointing and research use;
* ``result = alg.run(problem, n_rounds, x0=..., rng=...)``: the loop, recording a history of
  metrics every ``eval_every`` rounds and returning a :class:`RunResult`.

The state must hold everything the next step needs (iterates, the generator, the privacy
ledger, counters), so that stepping a restored state continues the run exactly; it must also be
savable as a state file (:mod:`rfed.state`: arrays, numbers, strings, containers, generators and
rfed's state classes; register a state class of your own with
:func:`rfed.state.register_state_type`), because :meth:`Algorithm.run` checkpoints it.

Two rules hold for every algorithm, in :meth:`Algorithm.run`:

* **Checkpoints.** ``run(..., checkpoint_every=N, checkpoint=path_or_callable)`` saves
  ``{"round", "state", "history", ...}`` every ``N`` rounds and when the user presses Ctrl-C
  (the interrupt is deferred to the end of the current round, so the saved state is whole);
  ``run(..., resume_from=path_or_payload)`` continues from it and ends bit-identical to an
  uninterrupted run. A checkpoint file is an :mod:`rfed.state` file (no pickle), bound to the
  run that wrote it: one of another algorithm, problem, ``n_rounds`` or ``eval_every``, or a
  damaged one, is refused before anything runs. A command-line run installs the same
  mechanism for every ``run`` call of an experiment through :func:`run_hook`.
* **Step sizes.** An algorithm with a ``step_size`` attribute has it checked when the run
  starts (a positive number or a callable); a callable is checked at each round's index (the
  rounds done, ``t - 1``) before the round, so a negative or non-numeric value is an error
  naming ``step_size`` rather than a silent step backwards.
* **Divergence.** After every round the iterates are checked for non-finite values (and, at the
  recorded rounds, for leaving the manifold); a step raising ``FloatingPointError`` or
  ``numpy.linalg.LinAlgError`` counts the same. The run stops, keeps its history so far and
  returns ``RunResult(diverged=True, diverged_round=t, diverged_reason=...)``.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rfed.manifolds.base import as_generator
from rfed.networks.engine import current_engine
from rfed.privacy.secure import SecureRandom, is_secure
from rfed.problems.base import Problem
from rfed.state import StateFileError, check_state, load_state, save_state

__all__ = [
    "Algorithm",
    "RunResult",
    "evaluate_point",
    "check_n_rounds",
    "check_step_size",
    "step_size_at",
    "load_checkpoint",
    "run_hook",
    "checkpoint_binding",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KIND",
]

#: Version of the checkpoint payload written by :meth:`Algorithm.run` (2: an rfed.state file).
CHECKPOINT_FORMAT = 2
#: The :mod:`rfed.state` kind of the checkpoint files of :meth:`Algorithm.run`.
CHECKPOINT_KIND = "algorithm-checkpoint"

#: Tolerance of the off-manifold check at the recorded rounds (loose: it flags divergence, not
#: round-off; :meth:`Manifold.belongs` scales it to the point).
OFF_MANIFOLD_ATOL = 1e-6


def evaluate_point(problem: Problem, x: np.ndarray, with_reference: bool = True) -> dict:
    """Cost, gradient norm and, when a reference exists, excess risk and distance at ``x``.

    Returns
    -------
    dict with keys ``cost``, ``grad_norm`` (unless the problem's ``evaluate_grad_norm`` is
    False) and (if ``with_reference``) ``excess_risk`` = ``f(x) - f(x*)`` and ``dist_to_ref`` =
    ``d(x, x*)``.

    Parameters
    ----------
    problem : Problem
    x : ndarray, shape ``point_shape``
        One point of ``problem.manifold``.
    with_reference : bool
        Also compare with the problem's reference solution.
    """
    out = {"cost": problem.cost(x)}
    if getattr(problem, "evaluate_grad_norm", True):
        out["grad_norm"] = problem.grad_norm(x)
    if with_reference:
        out["excess_risk"] = out["cost"] - problem.reference_cost()
        out["dist_to_ref"] = problem.distance_to_reference(x)
    return out


def check_n_rounds(n_rounds: Any, name: str = "n_rounds") -> int:
    """``n_rounds`` as an int >= 1; booleans and floats are refused (``True`` is not 1 round).

    Parameters
    ----------
    n_rounds : int
    name : str
        The argument's name in the error message.

    Returns
    -------
    int
    """
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, (int, np.integer)) or n_rounds < 1:
        raise ValueError(f"argument '{name}' must be an int >= 1, got {n_rounds!r}")
    return int(n_rounds)


def check_step_size(step_size: Any, name: str = "step_size") -> float | Callable[[int], float]:
    """Validate a step size: a finite number > 0, or a callable ``t -> alpha_t``.

    A string, a boolean, NaN, infinity or a value <= 0 raises ``ValueError`` naming ``name``.
    A callable is returned as is; :func:`step_size_at` checks each value it returns.

    Parameters
    ----------
    step_size : float or callable
    name : str
        The argument's name in the error message.

    Returns
    -------
    float or callable
    """
    if callable(step_size):
        return step_size
    if isinstance(step_size, bool) or not isinstance(step_size, (int, float, np.integer,
                                                                  np.floating)):
        raise ValueError(
            f"argument '{name}' must be a positive number or a callable t -> step size, got "
            f"{step_size!r} ({type(step_size).__name__})"
        )
    value = float(step_size)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"argument '{name}' must be finite and > 0, got {step_size!r}")
    return value


def step_size_at(step_size: float | Callable[[int], float], t: int,
                 name: str = "step_size") -> float:
    """The step size of round ``t``: ``step_size(t)`` for a callable, checked finite and > 0.

    Parameters
    ----------
    step_size : float or callable
        A number, or ``t -> alpha_t``.
    t : int
        The round, from 1.
    name : str
        The argument's name in the error message.

    Returns
    -------
    float
    """
    if type(step_size) is float and 0.0 < step_size < math.inf:
        return step_size    # a constant checked the same way at every round: nothing to do
    value = step_size(t) if callable(step_size) else step_size
    try:
        alpha = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"argument '{name}' returned {value!r} at round {t}; expected a number > 0"
        ) from None
    if isinstance(value, bool) or not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(
            f"argument '{name}' returned {value!r} at round {t}; expected a finite number > 0"
        )
    return alpha


@dataclass
class RunResult:
    """The outcome of :meth:`Algorithm.run`.

    Attributes
    ----------
    x : array, shape ``point_shape``
        The output point (the algorithm's output option applied); after a divergence, the
        output of the last round whose iterates were finite.
    history : list of dict
        One record per evaluated round: ``round`` and metrics such as ``cost``,
        ``grad_norm``, ``excess_risk``, ``dist_to_ref``, ``consensus_error``, ``bytes_sent``.
    privacy : dict or None
        The run's privacy report: for rfed's private algorithms the keys
        :data:`rfed.algorithms.private.REPORT_KEYS` (documented there), the same shape private
        or not (``private`` false and ``epsilon_certified`` infinite without noise).
    state : object
        The final state (for resuming with :meth:`Algorithm.step`).
    diverged : bool
        The run stopped because its iterates left the floating-point range or the manifold.
    diverged_round : int or None
        The round in which that was detected.
    diverged_reason : str or None
        What was detected, in words.
    """

    x: np.ndarray
    history: list[dict] = field(default_factory=list)
    privacy: Any = None
    state: Any = None
    diverged: bool = False
    diverged_round: int | None = None
    diverged_reason: str | None = None

    def metric(self, key: str) -> np.ndarray:
        """The history of one metric as an array (NaN where a round did not record it).

        Parameters
        ----------
        key : str
            A key of the history's records, e.g. ``"cost"``.

        Returns
        -------
        ndarray of float, shape ``(len(history),)``
        """
        return np.array([rec.get(key, np.nan) for rec in self.history], dtype=float)


# ---------------------------------------------------------------------------- checkpoint plumbing
_HOOK: contextvars.ContextVar[Any] = contextvars.ContextVar("rfed_run_hook", default=None)


@contextlib.contextmanager
def run_hook(hook: Any) -> Iterator[None]:
    """Make ``hook`` checkpoint every :meth:`Algorithm.run` call made inside the block.

    ``hook.start_run(algorithm, problem, n_rounds, eval_every)`` is called when a run starts
    and returns ``(done, resume, save, every)``: a finished :class:`RunResult` to return at once
    (a resumed experiment replaying a run it had completed), a checkpoint payload to resume from
    (or ``None``), a callable ``save(payload)`` and the checkpoint period in rounds (0: only at
    Ctrl-C). ``hook.end_run(result)`` is called with the result.
    :class:`rfed.experiments.RunContext` is such a hook. Calls nested inside a run (e.g. a
    baseline solved inside a step) are not hooked. The hook installed is the engine's
    (:meth:`rfed.networks.engine.Engine.run_hook` of the engine in use): ``hook`` itself in
    one process, a wrapper that gathers the ranks' blocks on MPI
    (:class:`rfed.engines.mpi.MPIRunHook`).

    A ``save`` with a method ``due()`` is asked at each periodic round whether to save there:
    ``False`` skips that checkpoint (:class:`rfed.experiments.RunContext` answers from a
    wall-clock floor, ``checkpoint_seconds``). It decides only when the state is saved, never
    what the rounds compute, so the results do not depend on it. The end-of-run and Ctrl-C
    checkpoints are not asked.

    A ``save`` with a true attribute ``collective`` must be called by every process of its
    engine at the same rounds (and its ``due()`` too, giving every process the same answer):
    the run then does not defer Ctrl-C to save at the end of the round (the processes would
    not all save in the same round); it stops at once and resumes from the last periodic
    checkpoint.

    Parameters
    ----------
    hook : object
        Has ``start_run`` and ``end_run`` as above.

    Yields
    ------
    None
    """
    token = _HOOK.set(current_engine().run_hook(hook))
    try:
        yield
    finally:
        _HOOK.reset(token)


def checkpoint_binding(algorithm: Algorithm, problem: Any, n_rounds: int,
                       eval_every: int) -> dict[str, Any]:
    """What a checkpoint file of :meth:`Algorithm.run` is bound to: the algorithm (name and
    class), the problem (class, number of agents, manifold and point shape), ``n_rounds`` and
    ``eval_every``. A file whose binding differs is another run's and is refused.

    Returns
    -------
    dict of JSON values

    Parameters
    ----------
    algorithm : Algorithm
    problem : Problem
    n_rounds : int
    eval_every : int
    """
    manifold = getattr(problem, "manifold", None)
    return {
        "algorithm": str(algorithm.name),
        "algorithm_class": type(algorithm).__qualname__,
        "problem_class": type(problem).__qualname__,
        "n_agents": getattr(problem, "n_agents", None),
        "manifold": None if manifold is None else type(manifold).__qualname__,
        "point_shape": (None if manifold is None
                        else [int(d) for d in getattr(manifold, "point_shape", ())]),
        "n_rounds": int(n_rounds),
        "eval_every": int(eval_every),
    }


def load_checkpoint(source: str | os.PathLike | dict,
                    expect: dict[str, Any] | None = None) -> dict:
    """A checkpoint payload from a file written by :meth:`Algorithm.run` (or the payload itself).

    Parameters
    ----------
    source : path or dict
        A checkpoint file (an :mod:`rfed.state` file of kind :data:`CHECKPOINT_KIND`) or a
        payload already in memory (returned as is, after the format check).
    expect : dict, optional
        The binding the file must hold (:func:`checkpoint_binding` of the run resuming).

    Returns
    -------
    dict
        The payload: ``format``, ``algorithm``, ``n_rounds``, ``eval_every``, ``round``,
        ``state`` (the algorithm's) and ``history``.

    Raises
    ------
    rfed.state.StateFileError
        The file is damaged, not an rfed checkpoint, or another run's (one line naming it).
    ValueError
        A payload of another format.
    """
    if isinstance(source, dict):
        payload = source
    else:
        try:
            payload = load_state(source, kind=CHECKPOINT_KIND, expect=expect)
        except StateFileError as exc:
            raise exc.within("argument 'resume_from'") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"argument 'resume_from' is not an rfed checkpoint (format {CHECKPOINT_FORMAT}): "
            f"{source if not isinstance(source, dict) else 'dict'}"
        )
    return payload


def _checkpoint_path_error(path: Path) -> str | None:
    """Why a checkpoint cannot be written to ``path`` (naming the argument ``checkpoint``), or
    ``None``: checked before the first round, not met at the first checkpoint, rounds later."""
    if path.is_dir():
        return f"argument 'checkpoint': '{path}' is a folder; expected the path of a file"
    if not path.parent.is_dir():
        return (f"argument 'checkpoint': the folder of '{path}' does not exist (create it "
                "first)")
    return None


class _SaveTo:
    """``save(payload)`` writing the payload atomically to a state file bound to its run."""

    #: :meth:`Algorithm.run` checks the first state's types (:func:`rfed.state.check_state`)
    writes_state_files = True

    def __init__(self, path: str | os.PathLike, binding: dict[str, Any]):
        self.path = Path(path)
        self.binding = binding
        # refused before the first round, not at the first checkpoint (rounds later)
        error = _checkpoint_path_error(self.path)
        if error is not None:
            raise ValueError(error)

    def __call__(self, payload: dict) -> None:
        save_state(self.path, payload, kind=CHECKPOINT_KIND, bind=self.binding)


class _DeferredInterrupt:
    """SIGINT handler deferring Ctrl-C to the end of the round; a second Ctrl-C is immediate."""

    def __init__(self) -> None:
        self.pending = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True
        print("\nrfed: interrupted; saving a checkpoint at the end of this round (Ctrl-C again "
              "to stop at once, without it)", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _deferred_sigint(active: bool) -> Iterator[_DeferredInterrupt | None]:
    if not active or threading.current_thread() is not threading.main_thread():
        yield None
        return
    handler = _DeferredInterrupt()
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield handler
    finally:
        signal.signal(signal.SIGINT, previous)


class Algorithm(abc.ABC):
    """Base class of rfed's federated and decentralized algorithms."""

    name: str = "algorithm"

    @abc.abstractmethod
    def init(self, problem: Problem, x0: np.ndarray, rng: np.random.Generator) -> Any:
        """The state before the first round.

        Parameters
        ----------
        problem : Problem
        x0 : ndarray, shape ``point_shape``
            The start, a point of ``problem.manifold``.
        rng : numpy.random.Generator or SecureRandom
            The run's source of randomness.

        Returns
        -------
        state
            The algorithm's state (a dataclass of its own).
        """

    @abc.abstractmethod
    def step(self, problem: Problem, state: Any) -> Any:
        """Perform one round (one communication round) and return the new state.

        Parameters
        ----------
        problem : Problem
        state
            The state after the previous round.

        Returns
        -------
        state
        """

    @abc.abstractmethod
    def output(self, problem: Problem, state: Any) -> np.ndarray:
        """The point the algorithm returns from ``state`` (one point of the manifold).

        Parameters
        ----------
        problem : Problem
        state

        Returns
        -------
        ndarray, shape ``point_shape``
        """

    def metrics(self, problem: Problem, state: Any, with_reference: bool) -> dict:
        """Metrics recorded in the history; subclasses add their own (consensus, bytes).

        Parameters
        ----------
        problem : Problem
        state
        with_reference : bool
            Also the excess risk and the distance to the problem's reference solution.

        Returns
        -------
        dict of str to float
        """
        return evaluate_point(problem, self.output(problem, state), with_reference)

    def privacy(self, state: Any) -> Any:
        """The privacy ledger of ``state`` (``None`` when the algorithm is not private).

        Parameters
        ----------
        state

        Returns
        -------
        object or None
        """
        return getattr(state, "ledger", None)

    def iterates(self, state: Any) -> np.ndarray | None:
        """The points of ``state`` checked for divergence: ``state.x`` unless overridden.

        Shape ``point_shape`` (one iterate) or ``(n_agents, *point_shape)``; ``None`` skips the
        check.

        Parameters
        ----------
        state

        Returns
        -------
        ndarray or None
        """
        x = getattr(state, "x", None)
        return None if x is None else np.asarray(x)

    def divergence(self, problem: Problem, state: Any, recorded: bool) -> str | None:
        """Why ``state`` has diverged, or ``None``.

        Every round: a non-finite iterate. At recorded rounds (``recorded``), also an iterate
        off the manifold by more than ``OFF_MANIFOLD_ATOL`` (the manifold's ``belongs``).

        Parameters
        ----------
        problem : Problem
        state
        recorded : bool
            Whether this round's metrics are recorded.

        Returns
        -------
        str or None
            The reason, in one line.
        """
        x = self.iterates(state)
        if x is None:
            return None
        if not np.isfinite(x).all():
            n_bad = int(x.size - np.count_nonzero(np.isfinite(x)))
            return f"{n_bad} non-finite iterate entries (NaN/inf)"
        if recorded:
            man = problem.manifold
            k = len(man.point_shape)
            if x.shape[x.ndim - k:] == tuple(man.point_shape) and not np.all(
                man.belongs(x, atol=OFF_MANIFOLD_ATOL)
            ):
                return f"iterates left the manifold {man} (tolerance {OFF_MANIFOLD_ATOL:g})"
        return None

    def run(
        self,
        problem: Problem,
        n_rounds: int | None = None,
        *,
        rng: np.random.Generator | SecureRandom | int,
        x0: np.ndarray | None = None,
        eval_every: int = 1,
        with_reference: bool = True,
        callback: Callable[[int, dict, Any], None] | None = None,
        checkpoint_every: int = 0,
        checkpoint: str | os.PathLike | Callable[[dict], None] | None = None,
        resume_from: str | os.PathLike | dict | None = None,
    ) -> RunResult:
        """Run ``n_rounds`` rounds from ``x0`` (a random point when omitted).

        Parameters
        ----------
        problem : Problem
        n_rounds : int, optional
            Number of rounds (communication rounds / aggregations), >= 1. Default: the
            algorithm's planned rounds (its attribute ``n_rounds``, e.g. given with a budget),
            so they are stated once.
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
        checkpoint_every : int
            Save a checkpoint every ``checkpoint_every`` rounds (0: only at Ctrl-C).
        checkpoint : path or callable, optional
            Where checkpoints go: a file (an :mod:`rfed.state` file, written atomically and
            bound to this run by :func:`checkpoint_binding`; its folder must exist, checked
            before the first round) or ``checkpoint(payload)``. The
            payload is a dict with ``format``, ``algorithm``, ``n_rounds``, ``eval_every``,
            ``round`` (rounds done), ``state`` and ``history``.
            A callable with a method ``due()`` is asked before each periodic checkpoint and
            skips it when ``due()`` is false (see :func:`run_hook`).
        resume_from : path or dict, optional
            A checkpoint to continue from (``rng`` and ``x0`` are then not used: the state
            holds them). Must come from a run of the same algorithm on the same kind of
            problem with the same ``n_rounds`` and ``eval_every``; a file that is damaged or
            another run's raises :class:`rfed.state.StateFileError` (one line naming it)
            before any round runs.

        Returns
        -------
        RunResult
            With ``diverged=True`` if the iterates diverged (see the module's docstring).

        Raises
        ------
        KeyboardInterrupt
            After saving a checkpoint (when ``checkpoint`` is given) at the end of the round in
            which Ctrl-C arrived.
        """
        if n_rounds is None:
            n_rounds = getattr(self, "n_rounds", None)
            if n_rounds is None:
                raise ValueError(f"argument 'n_rounds' is required: {self.name} has no planned "
                                 "rounds to run by default")
        n_rounds = check_n_rounds(n_rounds)
        if getattr(problem, "n_agents", 1) == 0 and not getattr(problem, "is_shard", False):
            raise ValueError(f"argument 'problem' ({type(problem).__name__}) holds no agent: "
                             "a run needs at least one agent's data")
        if (isinstance(eval_every, bool) or not isinstance(eval_every, (int, np.integer))
                or eval_every < 1):
            raise ValueError(f"argument 'eval_every' must be an int >= 1, got {eval_every!r}")
        if (isinstance(checkpoint_every, bool)
                or not isinstance(checkpoint_every, (int, np.integer)) or checkpoint_every < 0):
            raise ValueError(
                f"argument 'checkpoint_every' must be an int >= 0, got {checkpoint_every!r}"
            )
        step_size = getattr(self, "step_size", None)
        if step_size is not None:
            check_step_size(step_size)   # e.g. the string "0.1" is refused, not parsed
        hook = _HOOK.get()
        if hook is not None and getattr(hook, "secure", False) and not is_secure(rng):
            # an experiment run with --secure: OS randomness and discrete noise for every run
            rng = SecureRandom()
        if hook is not None and checkpoint is None and resume_from is None:
            done, resume_from, checkpoint, checkpoint_every = hook.start_run(
                self, problem, n_rounds, eval_every
            )
            if done is not None:
                return done
        else:
            hook = None
        if checkpoint is not None and not callable(checkpoint):
            checkpoint = _SaveTo(checkpoint, checkpoint_binding(self, problem, n_rounds,
                                                                 eval_every))
        token = _HOOK.set(None)  # runs nested inside this one are not checkpointed
        try:
            result = self._loop(problem, n_rounds, rng, x0, eval_every, with_reference,
                                callback, checkpoint_every, checkpoint, resume_from)
        finally:
            _HOOK.reset(token)
        if hook is not None:
            hook.end_run(result)
        return result

    def _loop(self, problem, n_rounds, rng, x0, eval_every, with_reference, callback,
              checkpoint_every, checkpoint, resume_from) -> RunResult:
        if resume_from is not None:
            payload = load_checkpoint(resume_from, checkpoint_binding(self, problem, n_rounds,
                                                                      eval_every))
            for key, value in (("n_rounds", n_rounds), ("eval_every", eval_every),
                               ("algorithm", self.name)):
                if payload.get(key) != value:
                    raise ValueError(
                        f"argument 'resume_from': the checkpoint has {key}={payload.get(key)!r},"
                        f" this run has {key}={value!r}"
                    )
            state, history, start = payload["state"], list(payload["history"]), payload["round"]
        else:
            rng = rng if is_secure(rng) else as_generator(rng)
            if x0 is None:
                # the start is data-independent; secure mode draws it from a generator seeded
                # with OS entropy, since its own source refuses floating-point Gaussians
                start_rng = (np.random.default_rng(rng.integers(0, 2**62)) if is_secure(rng)
                             else rng)
                x0 = problem.manifold.random_point(start_rng)
            x0 = problem.manifold.check_point(x0, "x0")
            state = self.init(problem, x0, rng)
            history = []
            start = 0
            history.append(self._record(problem, state, 0, with_reference, callback))

        if getattr(checkpoint, "writes_state_files", False):
            # a state type the files cannot hold is refused now, not at the first checkpoint
            check_state(self._payload(start, n_rounds, eval_every, state, history))
        # a saver may skip a periodic checkpoint (e.g. a wall-clock floor): when, not what
        due = getattr(checkpoint, "due", None)
        with _deferred_sigint(checkpoint is not None
                              and not getattr(checkpoint, "collective", False)) as interrupt:
            schedule = getattr(self, "step_size", None)
            for t in range(start + 1, n_rounds + 1):
                if callable(schedule):
                    step_size_at(schedule, t - 1)   # alpha_t of the round about to run
                try:
                    new_state = self.step(problem, state)
                except (FloatingPointError, np.linalg.LinAlgError) as exc:
                    return self._diverged(problem, state, history, t,
                                          f"{type(exc).__name__}: {exc}")
                recorded = t % eval_every == 0 or t == n_rounds
                reason = self.divergence(problem, new_state, recorded)
                if reason is not None:
                    return self._diverged(problem, state, history, t, reason)
                state = new_state
                if recorded:
                    history.append(self._record(problem, state, t, with_reference, callback))
                if checkpoint is not None:
                    if interrupt is not None and interrupt.pending:
                        checkpoint(self._payload(t, n_rounds, eval_every, state, history))
                        raise KeyboardInterrupt
                    if (checkpoint_every and t % checkpoint_every == 0 and t < n_rounds
                            and (due is None or due())):
                        checkpoint(self._payload(t, n_rounds, eval_every, state, history))
        try:
            privacy = self.privacy(state)
        except Exception:
            # what is computed after the rounds must not lose them: save the final state
            # (resuming from it recomputes only the report), then report the error
            if checkpoint is not None:
                checkpoint(self._payload(n_rounds, n_rounds, eval_every, state, history))
            raise
        return RunResult(x=self.output(problem, state), history=history, privacy=privacy,
                         state=state)

    def _payload(self, t, n_rounds, eval_every, state, history) -> dict:
        return {"format": CHECKPOINT_FORMAT, "algorithm": self.name, "n_rounds": n_rounds,
                "eval_every": eval_every, "round": t, "state": state, "history": list(history)}

    def _record(self, problem, state, t, with_reference, callback) -> dict:
        rec = {"round": t, **self.metrics(problem, state, with_reference)}
        if callback is not None:
            callback(t, rec, state)
        return rec

    def _diverged(self, problem, state, history, t, reason) -> RunResult:
        return RunResult(
            x=self.output(problem, state), history=history, privacy=self.privacy(state),
            state=state, diverged=True, diverged_round=t,
            diverged_reason=f"{self.name} diverged in round {t}: {reason}",
        )
