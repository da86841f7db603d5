"""The context an experiment writes its results through, and the results folder it fills.

Results on disk (``RunContext`` with an ``out_dir``):


* the folder is created only once the configuration is valid, must be empty unless the run
  overwrites (``mode="overwrite"``: an earlier rfed results folder is cleared) or resumes
  (``mode="resume"``), and is removed again if the run fails before writing any result;
* ``history.jsonl`` grows by one line per record, appended whole or not at all; every line
  carries the run's ``run_id`` and ``seed``; every other file (``config.json``,
  ``privacy.json``, tables, figures, ``history.csv``, ``summary.json``, ``checkpoint.npz``) is
  replaced atomically (a temporary file named after the process, fsync, rename); temporaries
  left by a killed run are removed when the folder is resumed or overwritten;
* the JSON is standard: a non-finite number is written ``null`` with the reason in
  ``<key>_nonfinite`` (see :mod:`rfed._io`);
* every :meth:`rfed.algorithms.base.Algorithm.run` inside the experiment is checkpointed at
  its end, at Ctrl-C and every ``checkpoint_every`` rounds (default 100) once at least
  ``checkpoint_seconds`` (default 5; 0: no floor) have passed since the last checkpoint; a
  resumed run replays the experiment, takes the finished runs from the checkpoint, continues
  the unfinished one from its state, and ends with the same results as an uninterrupted run
  (bit for bit: the clock decides only when the state is saved, never what is computed).
  The checkpoint is ``checkpoint.npz`` (the unfinished run, replaced atomically) standing on a
  prefix of ``checkpoint.log`` (the finished runs and the records, appended once each; see
  :class:`RunContext`); both are :mod:`rfed.state` files (no pickle: nothing in them can run
  code), checksummed and bound to the run, and both are removed when the run finishes.

Divergence: a run whose result has ``diverged=True`` is one repetition lost, not the
experiment; :func:`summarise_repetitions` summarises the others and counts it.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rfed._io import (
    append_line,
    atomic_write_bytes,
    atomic_write_text,
    process_gone,
    remove_stale_temporaries,
    strict_json,
)
from rfed.experiments.checkpoints import (
    CheckpointLog,
    OutputDirError,
    config_digest,
    read_run_config,
)
from rfed.experiments.tables import SUMMARY_COLUMNS, csv_text, format_summary_table, format_table
from rfed.experiments.timings import TimeEstimate
from rfed.state import UnsupportedStateError

__all__ = ["RunContext"]

_LOCK = ".rfed.lock"
#: The clock of the periodic checkpoints' wall-clock floor (tests replace it).
_clock = time.monotonic


def _jsonable(value: Any) -> Any:
    """numpy scalars and arrays as Python objects (non-finite floats kept: in memory only)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value



class _SharedBar:
    """One progress bar per experiment: every ``progress`` call reuses it with a new total."""

    def __init__(self, label: str, enabled: bool):
        self.label = label
        self.enabled = enabled
        self._bar = None
        self.setting = ""

    def start(self, total: int, setting: str = "") -> _SharedBar:
        if self.enabled:
            if self._bar is None:
                from tqdm.auto import tqdm  # type: ignore[import-untyped]

                self._bar = tqdm(total=total, leave=False, dynamic_ncols=True)
            else:
                self._bar.reset(total=total)
        self.label_setting(setting)
        return self

    def label_setting(self, setting: str) -> None:
        if setting != self.setting:
            self.setting = setting
            if self._bar is not None:
                self._bar.set_description(f"{self.label} [{setting}]" if setting else self.label,
                                          refresh=False)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        """Kept open for the experiment's next phase; :meth:`shutdown` closes it."""

    def shutdown(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None



class _CheckpointSaver:
    """``save(payload)`` of a :class:`RunContext`'s runs, and ``due()``: whether a periodic
    checkpoint is due (the wall-clock floor; see :func:`rfed.algorithms.base.run_hook`)."""

    def __init__(self, ctx: RunContext):
        self._ctx = ctx

    def __call__(self, payload: dict) -> None:
        self._ctx._save_checkpoint(payload)

    def due(self) -> bool:
        return self._ctx._checkpoint_due()


@dataclass
class RunContext:
    """What an experiment writes through: seeds, the history, tables, figures, privacy.

    Parameters
    ----------
    seed : int
        Master seed (>= 0); :meth:`rng` derives independent streams from it.
    out_dir : Path or None
        Where results go (``None``: keep in memory only, as the tests do). Nothing is created
        before :meth:`open` (called by :func:`run_experiment` once the configuration is valid).
    progress : bool
        Show the progress bar.
    mode : {"new", "overwrite", "resume"}
        ``"new"``: ``out_dir`` must be absent or empty; ``"overwrite"``: an earlier rfed results
        folder (one holding ``config.json``) is cleared first; ``"resume"``: continue the run
        saved in ``out_dir``.
    checkpoint_every : int
        Checkpoint every algorithm run every this many rounds (0: only at the end of each run
        and at Ctrl-C). Only with an ``out_dir``.
    secure : bool
        Secure mode: every algorithm run draws from the operating system's randomness
        (:class:`rfed.privacy.SecureRandom`) and releases noise with the discrete mechanisms;
        data generation stays seeded. Not replayable from the seed, by design.
    checkpoint_seconds : float
        Wall-clock floor between periodic checkpoints: at a round where one is due
        (``checkpoint_every``), it is written only if at least this many seconds have passed
        since the last checkpoint (0: at every ``checkpoint_every`` rounds). The end-of-run and
        Ctrl-C checkpoints are always written. The clock decides only when the state is saved,
        never what is computed: a run resumed from any checkpoint ends bit-identical to an
        uninterrupted one, whatever the floor. A kill loses at most the rounds since the last
        checkpoint (about ``checkpoint_seconds`` plus ``checkpoint_every`` rounds of work).

    Notes
    -----
    Checkpoint layout (3). Each checkpoint appends one frame to ``checkpoint.log``: an
    :mod:`rfed.state` file (checksummed, bound to the run id) of the runs completed and the
    records logged since the previous checkpoint, preceded by its length, so every completed run
    and every record is serialized and written once, and fsynced. It then replaces
    ``checkpoint.npz`` atomically: an :mod:`rfed.state` file bound to the run (experiment,
    seed, run id and the SHA-256 of its settings) holding the unfinished run's payload (its
    state and history, which change between checkpoints) and the length and SHA-256 of the log
    prefix it stands on. A kill between the two leaves the previous ``checkpoint.npz``, which
    stands on a shorter prefix of the log; a resumed run cuts the log back to that prefix
    before it appends. Every append and every replacement is fsynced (what lets a checkpoint
    survive a power cut as well as a kill); ``checkpoint_seconds`` bounds how often that is
    paid. Nothing is unpickled: a ``checkpoint.pkl`` of an earlier release is refused, and so
    is a damaged checkpoint or another run's (one line naming the file).
    """

    seed: int
    out_dir: Path | None = None
    progress: bool = True
    mode: str = "new"
    checkpoint_every: int = 100
    secure: bool = False
    checkpoint_seconds: float = 5.0
    records: list[dict] = field(default_factory=list)
    privacy: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    summary_rows: list[dict] = field(default_factory=list)
    diverged_runs: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or self.seed < 0:
            raise ValueError(f"argument 'seed' must be an int >= 0, got {self.seed!r}")
        if self.mode not in ("new", "overwrite", "resume"):
            raise ValueError(
                f"argument 'mode' must be 'new', 'overwrite' or 'resume', got {self.mode!r}"
            )
        if (isinstance(self.checkpoint_every, bool)
                or not isinstance(self.checkpoint_every, (int, np.integer))
                or self.checkpoint_every < 0):
            raise ValueError(
                f"argument 'checkpoint_every' must be an int >= 0, got {self.checkpoint_every!r}"
            )
        floor = self.checkpoint_seconds
        if (isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating))
                or not (math.isfinite(floor) and floor >= 0)):
            raise ValueError(
                f"argument 'checkpoint_seconds' must be a finite number >= 0, got {floor!r}")
        self.checkpoint_seconds = float(floor)
        if self.out_dir is not None:
            self.out_dir = Path(self.out_dir)
        self.run_id = uuid.uuid4().hex[:12]
        self.experiment = ""
        self.title = ""         # the figures' default title (the experiment's short line)
        self.stand_in = False   # mark the figures "STAND-IN data"
        self._opened = False
        self._created: Path | None = None  # the top folder this run created (removed on failure)
        self._wrote_result = False
        self._bar = _SharedBar("", self.progress)
        # checkpoint bookkeeping (see start_run / end_run)
        self._pos = 0                  # records logged so far, counting replayed ones
        self._run_index = 0            # index of the next Algorithm.run call
        self._completed: list[tuple[Any, int]] = []  # (RunResult, records it logged)
        self._checkpoints = CheckpointLog(self.out_dir) if self.out_dir is not None else None
        self._last_checkpoint = _clock()
        self._current: tuple[int, int] | None = None  # (run index, _pos at its start)
        self._resume: dict | None = None
        self._checkpoint_error: str | None = None
        self._wrote_config = False
        self._locked = False
        self._bound: dict[str, Any] | None = None
        #: prints the estimated total time after the first algorithm run (set by
        #: :func:`rfed.experiments.registry.run_experiment`; None: no estimate)
        self.estimate: TimeEstimate | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The run's settings (empty before :meth:`open`)."""
        return dict(getattr(self, "_config", {}))

    # ------------------------------------------------------------------ folder
    def open(self, experiment: str, config: Mapping[str, Any]) -> None:
        """Check and create the output folder, write ``config.json``; load a checkpoint.

        Parameters
        ----------
        experiment : str
            The experiment's name.
        config : mapping
            Its complete configuration.

        Raises
        ------
        OutputDirError
            The folder is a file, lies under a file, is not empty (mode ``"new"``), is not an
            rfed results folder (``"overwrite"``/``"resume"``), holds a finished or different
            run (``"resume"``), or cannot be written.
        """
        self.experiment = experiment
        self._bar.label = experiment
        self._config = dict(config)
        self._opened = True
        if self.out_dir is None:
            return
        out = self.out_dir
        for parent in [out, *out.parents]:
            if parent.exists() and not parent.is_dir():
                what = "is a file" if parent == out else f"lies under a file ({parent})"
                raise OutputDirError(f"output folder '{out}' {what}")
        self._check_lock()
        existing = out.is_dir() and any(out.iterdir())
        if self.mode == "new" and existing:
            raise OutputDirError(
                f"output folder '{out}' is not empty; pass --overwrite to replace it or "
                f"--resume to continue the run saved in it"
            )
        if self.mode in ("overwrite", "resume") and existing \
                and not (out / "config.json").is_file():
            raise OutputDirError(
                f"output folder '{out}' is not empty and holds no rfed results (no config.json); "
                f"refusing to {self.mode} it"
            )
        if self.mode == "resume":
            self._open_resume(experiment, config)
        elif self.mode == "overwrite" and existing:
            self._clear()
        if not out.exists():
            top = out
            while not top.parent.exists():
                top = top.parent
            try:
                out.mkdir(parents=True)
            except OSError as exc:
                raise OutputDirError(f"cannot create output folder '{out}': "
                                     f"{exc.strerror or exc}") from None
            self._created = top
        try:
            fd, probe = tempfile.mkstemp(dir=out, prefix=f".rfed-probe.{os.getpid()}.",
                                         suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            self._remove_created()
            raise OutputDirError(f"cannot write to output folder '{out}': "
                                 f"{exc.strerror or exc}") from None
        self._take_lock()
        remove_stale_temporaries(out)   # what a killed run was writing when it died
        if self.mode != "resume" or self._resume is None:
            self._write_json("config.json", {"experiment": experiment, "seed": int(self.seed),
                                             "run_id": self.run_id, "config": self._config,
                                             "secure": bool(self.secure)})
            self._wrote_config = True
            if self.mode == "resume":   # no checkpoint yet: start over in the same folder
                atomic_write_text(out / "history.jsonl", "")

    def _open_resume(self, experiment: str, config: Mapping[str, Any]) -> None:
        out = self.out_dir
        assert out is not None
        try:
            saved = read_run_config(out)
        except OutputDirError as exc:
            raise OutputDirError(f"cannot resume: {exc}") from None
        if (out / "summary.json").is_file():
            raise OutputDirError(f"cannot resume: the run in '{out}' has finished "
                                 f"(summary.json exists)")
        for key, mine in (("experiment", experiment), ("seed", int(self.seed)),
                          ("config", json.loads(strict_json(config)))):
            if saved.get(key) != mine:
                raise OutputDirError(
                    f"cannot resume: '{out}' holds a run with {key} {saved.get(key)!r}, "
                    f"not {mine!r}"
                )
        self.run_id = saved["run_id"]
        assert self._checkpoints is not None
        try:
            ck = self._checkpoints.resume(self._binding())
        except OutputDirError as exc:
            raise OutputDirError(f"cannot resume: {exc}") from None
        if ck is None:
            return
        self._resume = ck
        self.records = ck["records"]
        lines = "".join(self._history_line(r) + "\n" for r in self.records)
        atomic_write_text(out / "history.jsonl", lines)

    def _binding(self) -> dict[str, Any]:
        """What this run's checkpoint files are bound to (:func:`rfed.state.save_state`);
        computed once per run id."""
        if self._bound is None or self._bound["run_id"] != self.run_id:
            self._bound = {"experiment": self.experiment, "seed": int(self.seed),
                           "run_id": self.run_id,
                           "config_sha256": config_digest(self.experiment, self.seed,
                                                          self._config, self.secure)}
        return self._bound

    def _lock_holder(self) -> int | None:
        """The pid of a live process holding the folder's lock, else ``None``."""
        assert self.out_dir is not None
        try:
            pid = int((self.out_dir / _LOCK).read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return None
        if pid <= 0 or pid == os.getpid() or process_gone(pid):
            return None                 # a run that was killed: the lock is stale
        return pid

    def _check_lock(self) -> None:
        pid = self._lock_holder()
        if pid is not None:
            raise OutputDirError(f"another rfed run (pid {pid}) is writing to '{self.out_dir}'")

    def _take_lock(self) -> None:
        """Create ``.rfed.lock`` (exclusive create: of two runs started at once, one wins)."""
        assert self.out_dir is not None
        path = self.out_dir / _LOCK
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._check_lock()
                path.unlink(missing_ok=True)   # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
            self._locked = True
            return
        raise OutputDirError(f"cannot lock output folder '{self.out_dir}'")

    def _release_lock(self) -> None:
        if self._locked and self.out_dir is not None:
            (self.out_dir / _LOCK).unlink(missing_ok=True)
            self._locked = False

    def _clear(self) -> None:
        assert self.out_dir is not None
        for child in self.out_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _remove_created(self) -> None:
        if self._created is not None:
            shutil.rmtree(self._created, ignore_errors=True)
            self._created = None

    def abandon(self) -> None:
        """After a failure: remove the folder (or ``config.json``) if no result was written."""
        self._bar.shutdown()
        self._release_lock()
        if self.out_dir is None or self._wrote_result or self.mode == "resume":
            return
        if self._created is not None:
            self._remove_created()
        elif self._wrote_config:
            (self.out_dir / "config.json").unlink(missing_ok=True)

    # ------------------------------------------------------------------ writing
    def rng(self, *stream: int) -> np.random.Generator:
        """An independent generator for ``stream`` (e.g. a repetition index) under this seed.

        Parameters
        ----------
        *stream : int
            The stream's indices.

        Returns
        -------
        numpy.random.Generator
        """
        return np.random.default_rng([int(self.seed), *stream])

    def _history_line(self, rec: Mapping[str, Any]) -> str:
        return strict_json({**rec, "run_id": self.run_id, "seed": int(self.seed)})

    def log(self, **record: Any) -> None:
        """Append one history record (a round of one setting/repetition); written at once.

        When resuming, the records the checkpoint already holds are replayed, not repeated.

        Parameters
        ----------
        **record
            The record's values, e.g. ``setting``, ``repetition``, ``round`` and metrics.
        """
        self._pos += 1
        if self._pos <= len(self.records):   # replaying a resumed run: already recorded
            return
        self._ensure_open()
        rec = _jsonable(record)
        if "setting" in rec:
            self._bar.label_setting(str(rec["setting"]))
        if self.out_dir is not None:
            append_line(self.out_dir / "history.jsonl", self._history_line(rec))
            self._wrote_result = True
        self.records.append(rec)

    def set_privacy(self, setting: str, report: Mapping[str, Any]) -> None:
        """Record the privacy report of one setting (written to ``privacy.json`` at once).

        Parameters
        ----------
        setting : str
            The setting's label.
        report : mapping
            Its privacy report.
        """
        self.privacy[setting] = _jsonable(report)
        self._write_json("privacy.json", self.privacy)
        self._wrote_result = self._wrote_result or self.out_dir is not None

    def save_table(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write a table as ``NAME.csv`` and ``NAME.md`` (all rows).

        Parameters
        ----------
        name : str
            The file name without extension.
        rows : sequence of mapping
            The rows, ``{column: value}``.
        """
        table = [_jsonable(r) for r in rows]
        self.tables[name] = table
        if self.out_dir is None or not table:
            return
        self._ensure_open()
        keys = list(dict.fromkeys(k for r in table for k in r))
        atomic_write_text(self.out_dir / f"{name}.csv", csv_text(table, keys))
        atomic_write_text(self.out_dir / f"{name}.md", format_table(table, keys))
        self._wrote_result = True

    def summary_table(self, rows: Sequence[Mapping[str, Any]]) -> str:
        """Record the experiment's summary table (rows from :func:`summary_row`); return its text.

        Saved as ``summary_table.csv`` / ``.md`` and printed by ``rfed run`` (every row).

        Parameters
        ----------
        rows : sequence of mapping
            The summary rows.

        Returns
        -------
        str
            The table as text (:func:`rfed.experiments.tables.format_summary_table`).
        """
        clean = []
        for i, r in enumerate(rows):
            missing = [k for k in ("setting", "utility_name", "utility") if k not in r]
            if missing:
                raise ValueError(f"summary_table: row {i} lacks {missing}; build rows with "
                                 f"summary_row(...)")
            clean.append({k: r.get(k) for k in SUMMARY_COLUMNS})
        self.summary_rows = clean
        self.save_table("summary_table", clean)
        return format_summary_table(clean)

    def save_figure(self, fig: Any, name: str) -> Path | None:
        """Finish a matplotlib figure, save it as ``NAME.png`` (atomically) and close it.

        :func:`rfed.experiments.plotting.finish_figure` gives it a title if it has none, the
        certified epsilon of every setting in the legend (from :meth:`set_privacy`), one
        legend outside the data, and the "STAND-IN data" mark when the experiment's
        description says it uses a stand-in.

        Parameters
        ----------
        fig : matplotlib.figure.Figure
            The figure.
        name : str
            The file name without extension.

        Returns
        -------
        Path or None
            The PNG's path; ``None`` when the context has no output folder.
        """
        from rfed.experiments.plotting import finish_figure

        path = None
        try:
            finish_figure(fig, title=f"{self.title or self.experiment}: "
                                     f"{name.replace('_', ' ')}",
                          privacy=self.privacy, stand_in=self.stand_in)
            if self.out_dir is not None:
                self._ensure_open()
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
                path = self.out_dir / f"{name}.png"
                atomic_write_bytes(path, buf.getvalue())
                self.figures.append(path)
                self._wrote_result = True
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        return path

    def progress_bar(self, total: int, desc: str = "", *, setting: str = "") -> _SharedBar:
        """The experiment's one progress bar, restarted at ``total`` and labelled ``setting``.

        Every call reuses the same bar (one bar per experiment, labelled with its name and the
        setting); records logged with a ``setting`` key relabel it. ``update(n)`` advances it;
        ``close()`` is a no-op (the bar lives until the run ends). ``desc`` is ignored (kept
        for compatibility).

        Parameters
        ----------
        total : int
            The number of steps of the bar.
        desc : str, default ""
            Ignored.
        setting : str, default ""
            The label shown.

        Returns
        -------
        object
            The shared bar (``update(n)``, ``close()``).
        """
        return self._bar.start(total, setting)

    def _ensure_open(self) -> None:
        """A context used without :func:`run_experiment` opens its folder on first write."""
        if self.out_dir is not None and not self._opened:
            self.open(self.experiment, {})

    def _write_json(self, name: str, obj: Any) -> None:
        if self.out_dir is not None:
            if name != "config.json":
                self._ensure_open()
            atomic_write_text(self.out_dir / name, strict_json(obj, indent=2) + "\n")

    # ------------------------------------------------------------------ checkpoints
    def start_run(self, algorithm: Any, problem: Any, n_rounds: int, eval_every: int):
        """Hook of :meth:`rfed.algorithms.base.Algorithm.run` (see :func:`run_hook`).

        Parameters
        ----------
        algorithm : Algorithm
            The algorithm about to run.
        problem : Problem
            Its problem.
        n_rounds : int
            The rounds of the run.
        eval_every : int
            Its evaluation period.

        Returns
        -------
        tuple
            ``(result, resume, saver, checkpoint_every)``: the completed result replayed from the
            checkpoint (then nothing else is used) or ``None``; the payload to resume the run from
            or ``None``; the checkpoint saver or ``None``; the rounds between checkpoints.
        """
        index = self._run_index
        self._run_index += 1
        ck = self._resume
        if ck is not None and index < len(ck["completed"]):
            result, n_logged = ck["completed"][index]
            self._completed.append((result, n_logged))
            self._pos += n_logged
            if getattr(result, "diverged", False):
                rec = next((r for r in self.records[self._pos - n_logged:self._pos]
                            if "diverged" in r), {})
                self.diverged_runs.append({
                    **{k: rec[k] for k in ("setting", "group", "repetition") if k in rec},
                    "run": index, "diverged_round": result.diverged_round,
                    "reason": result.diverged_reason})
            return result, None, None, 0
        resume = None
        start = self._pos
        if ck is not None:
            self._resume = None
            cur = ck.get("current")
            if cur is not None and cur["index"] == index:
                if cur["start"] != self._pos:
                    raise RuntimeError(
                        "resume: the experiment did not replay as it ran (record "
                        f"{self._pos} instead of {cur['start']} at run {index})"
                    )
                resume = cur["payload"]
                self._pos += cur["n_logged"]
        self._current = (index, start)
        if self.estimate is not None:
            self.estimate.run_started(index)
        saver = _CheckpointSaver(self) if self.out_dir is not None else None
        return None, resume, saver, self.checkpoint_every

    def end_run(self, result: Any) -> None:
        """Hook of :meth:`Algorithm.run`: the run finished; checkpoint it as completed.

        A diverged run is logged as a record ``{setting, repetition, diverged,
        diverged_round}`` (setting and repetition from the run's last record) and listed in
        :attr:`diverged_runs`, so no experiment can lose it silently.

        Parameters
        ----------
        result : RunResult
            The finished run's result.
        """
        assert self._current is not None
        if self.estimate is not None:
            self.estimate.run_finished(self._current[0])
        if getattr(result, "diverged", False):
            index, start = self._current
            last = self.records[-1] if len(self.records) > start else {}
            where = {k: last[k] for k in ("setting", "group", "repetition") if k in last}
            self.record_divergence(result, where, index)
        self._completed.append((result, self._pos - self._current[1]))
        self._current = None
        self._save_checkpoint(None)

    def record_divergence(self, result: Any, where: Mapping[str, Any], run: int) -> None:
        """List a diverged run in :attr:`diverged_runs` and log ``{**where, diverged,
        diverged_round}`` (what :meth:`end_run` does for a run that diverged; a driver running
        several repetitions in one :meth:`Algorithm.run` calls it for each).

        Parameters
        ----------
        result : RunResult
            The diverged run's result.
        where : mapping
            The record's identifying keys (e.g. ``setting``, ``repetition``).
        run : int
            The run's index.
        """
        self.diverged_runs.append({**where, "run": run, "diverged_round": result.diverged_round,
                                   "reason": result.diverged_reason})
        self.log(**where, diverged=result.diverged_reason, diverged_round=result.diverged_round)

    @property
    def runs_started(self) -> int:
        """How many :meth:`Algorithm.run` calls this context has hooked so far."""
        return self._run_index

    def _checkpoint_due(self) -> bool:
        """A periodic checkpoint is due: ``checkpoint_seconds`` have passed since the last."""
        return (self.checkpoint_seconds == 0
                or _clock() - self._last_checkpoint >= self.checkpoint_seconds)

    def _save_checkpoint(self, payload: dict | None) -> None:
        """Append what is new to the log, then replace ``checkpoint.npz`` (see the Notes)."""
        if self._checkpoints is None or self._checkpoint_error is not None:
            return
        current = None
        if payload is not None and self._current is not None:
            index, start = self._current
            current = {"index": index, "start": start, "n_logged": self._pos - start,
                       "payload": payload}
        try:
            self._checkpoints.save(
                {"experiment": self.experiment, "seed": self.seed, "run_id": self.run_id},
                self._completed, self.records, current, self._binding())
        except UnsupportedStateError as exc:
            # an algorithm whose state cannot be saved: run on without checkpoints, say so
            self._checkpoint_error = str(exc)
            self._checkpoints.remove()
            print(f"rfed: warning: checkpoints disabled for this run (the algorithm's state "
                  f"cannot be saved: {self._checkpoint_error})", file=sys.stderr)
            return
        self._last_checkpoint = _clock()
        self._wrote_result = True

    # ------------------------------------------------------------------ end
    def finish(self, config: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """Write ``history.csv`` and ``summary.json``; remove the checkpoint; close the bar.

        Parameters
        ----------
        config : mapping
            The run's configuration.
        summary : mapping
            The experiment's summary.
        """
        self._bar.shutdown()
        if self.out_dir is None:
            return
        if self.records:
            keys = list(dict.fromkeys(k for r in self.records for k in r)) + ["run_id", "seed"]
            rows = [{**r, "run_id": self.run_id, "seed": int(self.seed)} for r in self.records]
            atomic_write_text(self.out_dir / "history.csv", csv_text(rows, keys))
        self._write_json("summary.json", {"experiment": self.experiment, "seed": int(self.seed),
                                          "run_id": self.run_id,
                                          "algorithm_runs": self._run_index,
                                          "config": _jsonable(dict(config)),
                                          "summary": _jsonable(dict(summary)),
                                          "diverged_runs": _jsonable(self.diverged_runs)})
        assert self._checkpoints is not None
        self._checkpoints.remove()
        self._release_lock()
