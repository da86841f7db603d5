"""The measured CPU times of the experiments, and the running estimate of a long run's time.

``rfed/experiments/timings.json`` is written by ``benchmarks/bench_experiments.py --record``
(never typed by hand): per experiment and scale (``quick``: the defaults; ``paper``: ``--set
scale=paper``) the CPU and wall seconds of one run, its peak RSS, the number of algorithm runs
it made and the SHA-256 of its settings, the date, the commit and the command. ``rfed list``
and ``rfed show`` print the CPU times from it ("not measured" where it has none), and a run of
recorded settings estimates its total time from the number of algorithm runs recorded there and
the measured time of its own first run (:class:`TimeEstimate`).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

__all__ = ["TIMINGS", "LONG_RUN_SECONDS", "read_timings", "recorded", "recorded_runs",
           "settings_digest", "TimeEstimate", "duration"]

#: The timings file ``rfed list`` / ``rfed show`` read (``bench_experiments.py --record``'s).
TIMINGS = Path(__file__).resolve().parent / "timings.json"

#: A run whose estimated time is at least this many seconds is long enough for an estimate line.
LONG_RUN_SECONDS = 60.0


def read_timings(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{name: {scale: {"cpu_seconds", "algorithm_runs", "date", "commit", "command", ...}}}``
    from ``path`` (default :data:`TIMINGS`); empty when the file is missing or unreadable (the
    times are then "not measured").

    Parameters
    ----------
    path : Path, optional
        The timings file.

    Returns
    -------
    dict
        The ``"experiments"`` mapping of the file.
    """
    try:
        data = json.loads((TIMINGS if path is None else path).read_text(encoding="utf-8"))
        return dict(data["experiments"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def recorded(name: str, scale: str, path: Path | None = None) -> dict[str, Any] | None:
    """The entry of experiment ``name`` at ``scale`` in the timings file (``None`` if not
    measured, or if the entry has no CPU time).

    Parameters
    ----------
    name : str
        The experiment's name.
    scale : str
        The scale measured (e.g. ``"quick"`` or ``"paper"``).
    path : Path, optional
        The timings file; the package's when ``None``.

    Returns
    -------
    dict or None
    """
    experiment = read_timings(path).get(name, {})
    entry = experiment.get(scale) if isinstance(experiment, dict) else None
    return entry if isinstance(entry, dict) and "cpu_seconds" in entry else None


def duration(seconds: float) -> str:
    """``"42 s"``, ``"12 min"``, ``"2.5 h"``.

    Parameters
    ----------
    seconds : float

    Returns
    -------
    str
    """
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class TimeEstimate:
    """After the first algorithm run of an experiment: one line with the estimated total time.

    The estimate is the measured wall time of the first algorithm run this process made times
    the number of algorithm runs left, from the number the recorded configuration made
    (``runs``, from the timings file; ``None`` when the run's settings were never recorded: the
    line then gives the first run's time only). The runs of an experiment differ in cost, so
    the estimate is a guide, labelled so. Printed only for a long run: an estimate of at least
    ``min_seconds`` (or, without a recorded run count, a first run of at least ``min_seconds /
    10``).

    Parameters
    ----------
    runs : int or None
        Algorithm runs of the whole experiment at these settings, as recorded.
    min_seconds : float, optional
        The shortest estimate worth a line (default :data:`LONG_RUN_SECONDS`).
    stream : file, optional
        Where the line goes (default ``sys.stderr``).
    """

    def __init__(self, runs: int | None, min_seconds: float | None = None,
                 stream: TextIO | None = None):
        self.runs = runs
        self.min_seconds = float(LONG_RUN_SECONDS if min_seconds is None else min_seconds)
        self.stream = stream
        self.line: str | None = None
        self._started: tuple[int, float] | None = None   # (run index, clock) of the first run
        self._done = False

    def run_started(self, index: int) -> None:
        """Algorithm run ``index`` (0-based, counting runs replayed from a checkpoint) starts.

        Parameters
        ----------
        index : int
            The run's index.
        """
        if self._started is None:
            self._started = (index, time.perf_counter())

    def run_finished(self, index: int) -> str | None:
        """Algorithm run ``index`` finished: after the first one timed, print (and return) the
        estimate's line; otherwise nothing.

        Parameters
        ----------
        index : int
            The run's index.

        Returns
        -------
        str or None
            The estimate's line, or ``None``.
        """
        if self._done or self._started is None or self._started[0] != index:
            return None
        self._done = True
        first = time.perf_counter() - self._started[1]
        left = None if self.runs is None else self.runs - index
        if left is not None and left > 1:
            total = first * left
            if total < self.min_seconds:
                return None
            which = ("the first" if index == 0 else "the first resumed") + f" of {self.runs}"
            self.line = (f"rfed: {which} algorithm runs took {duration(first)}; estimated "
                         f"{'total' if index == 0 else 'time left'} about {duration(total)} of "
                         "wall time (the runs differ in cost: a guide)")
        else:
            if left is not None or first < self.min_seconds / 10:
                return None
            self.line = (f"rfed: the first algorithm run took {duration(first)} (these "
                         "settings were never recorded: no estimate of the number of runs)")
        print(self.line, file=self.stream or sys.stderr, flush=True)
        return self.line


def settings_digest(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a run's settings as ``config.json`` holds them (keys sorted): what a
    timings entry records (``config_sha256``) so that its number of runs is used for the same
    settings only.

    Parameters
    ----------
    config : mapping
        The run's settings.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    text = json.dumps(json.loads(json.dumps(dict(config), default=str)), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def recorded_runs(name: str, config: Mapping[str, Any], scale: str,
                  path: Path | None = None) -> int | None:
    """The number of algorithm runs recorded for ``name`` at ``scale``, if the entry was
    measured with the settings ``config`` (its ``config_sha256``); else ``None``.

    Parameters
    ----------
    name : str
        The experiment's name.
    config : mapping
        The run's settings.
    scale : str
        The scale.
    path : Path, optional
        The timings file; the package's when ``None``.

    Returns
    -------
    int or None
    """
    entry = recorded(name, scale, path)
    if entry is None or entry.get("config_sha256") != settings_digest(config):
        return None
    runs = entry.get("algorithm_runs")
    return int(runs) if isinstance(runs, int) and runs > 0 else None
