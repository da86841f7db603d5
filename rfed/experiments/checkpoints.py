"""The checkpoint of a results folder: ``checkpoint.npz`` standing on ``checkpoint.log``.

Both files are :mod:`rfed.state` files (no pickle: nothing in them can run code), checksummed
and bound to the run (experiment, seed, run id and the SHA-256 of its settings,
:func:`config_digest`). A :class:`CheckpointLog` writes them as a run goes
(the layout: :class:`rfed.experiments.RunContext`, Notes); :func:`read_checkpoint` reads them
back and :func:`read_run_config` the settings a resumed run replays.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rfed._io import atomic_write_bytes, strict_json, write_at_end
from rfed.state import StateFileError, dumps_state, load_state, loads_state

__all__ = [
    "OutputDirError",
    "config_digest",
    "read_checkpoint",
    "read_run_config",
]


class OutputDirError(ValueError):
    """The output folder cannot be used (exists and is not empty, is a file, not writable)."""


_CHECKPOINT = "checkpoint.npz"
_CHECKPOINT_LOG = "checkpoint.log"
#: The checkpoint file of earlier releases (a pickle): refused, never read.
_OLD_CHECKPOINT = "checkpoint.pkl"
#: Layout of the checkpoint. 1 and 2 (earlier releases): pickles, no longer read; 3: the
#: ``checkpoint.npz`` state file (:mod:`rfed.state`) holds the unfinished run and the length and
#: SHA-256 of the prefix of ``checkpoint.log`` it stands on, and the log holds the completed runs
#: and the records, each serialized and written once, as length-prefixed state files.
_CHECKPOINT_FORMAT = 3
_READABLE_FORMATS = (3,)
#: The :mod:`rfed.state` kinds of the two files.
_CHECKPOINT_KIND = "experiment-checkpoint"
_LOG_KIND = "experiment-checkpoint-log"
#: Bytes of the length written before each frame of the log (little-endian).
_FRAME_HEADER = 8

def _strict_roundtrip(obj: Any) -> Any:
    return json.loads(strict_json(obj))



def config_digest(experiment: str, seed: int, config: Mapping[str, Any], secure: bool) -> str:
    """SHA-256 (hex) of a run's settings as ``config.json`` holds them: what a checkpoint is
    bound to besides the run id (a ``config.json`` edited after the checkpoint is refused).

    Parameters
    ----------
    experiment : str
    seed : int
    config : mapping
    secure : bool

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    text = json.dumps(_strict_roundtrip({"experiment": experiment, "seed": int(seed),
                                         "config": dict(config), "secure": bool(secure)}),
                      sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_run_config(out_dir: str | os.PathLike) -> dict[str, Any]:
    """The settings saved in a results folder's ``config.json``, checked.

    Parameters
    ----------
    out_dir : str or os.PathLike
        The results folder.

    Returns
    -------
    dict
        ``experiment`` (str), ``seed`` (int >= 0), ``run_id`` (str), ``config`` (dict),
        ``secure`` (bool).

    Raises
    ------
    OutputDirError
        No ``config.json``, or one that is not JSON or lacks a key (one line naming the file).
    """
    path = Path(out_dir) / "config.json"
    if not path.is_file():
        raise OutputDirError(f"'{out_dir}' holds no rfed run (no config.json)")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise OutputDirError(f"'{path}' is damaged (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise OutputDirError(f"'{path}' is damaged (not JSON: {exc.msg} at line {exc.lineno}, "
                             f"column {exc.colno})") from None
    except OSError as exc:
        raise OutputDirError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not isinstance(saved, dict):
        raise OutputDirError(f"'{path}' is damaged (a JSON {type(saved).__name__}, not the "
                             "object rfed writes)")
    checks: tuple[tuple[str, type, str], ...] = (
        ("experiment", str, "a str"), ("seed", int, "an int >= 0"), ("run_id", str, "a str"),
        ("config", dict, "an object"))
    for key, kind, what in checks:
        value = saved.get(key)
        if (not isinstance(value, kind) or isinstance(value, bool)
                or (isinstance(value, int) and value < 0)):
            got = "missing" if key not in saved else f"{value!r}"
            raise OutputDirError(f"'{path}' is damaged: '{key}' must be {what}, got {got}")
    secure = saved.get("secure", False)
    if not isinstance(secure, bool):
        raise OutputDirError(f"'{path}' is damaged: 'secure' must be true or false, got "
                             f"{secure!r}")
    return {"experiment": saved["experiment"], "seed": saved["seed"],
            "run_id": saved["run_id"], "config": saved["config"], "secure": secure}


def read_checkpoint(out_dir: str | os.PathLike,
                    expect: Mapping[str, Any] | None = None) -> dict | None:
    """The checkpoint saved in the results folder ``out_dir``, assembled; ``None`` if none.

    ``checkpoint.npz`` is read as an :mod:`rfed.state` file (checksummed; nothing in it can run
    code); it trusts only the prefix of ``checkpoint.log`` whose length and SHA-256 it recorded:
    a torn tail left by a killed run is ignored.

    Parameters
    ----------
    out_dir : path
    expect : mapping, optional
        The binding the checkpoint must hold (``experiment``, ``seed``, ``run_id``,
        ``config_sha256``; see :func:`config_digest`): another run's checkpoint is refused.

    Returns
    -------
    dict or None
        ``format``, ``experiment``, ``seed``, ``run_id``; ``completed``: the finished runs in
        order, as ``(RunResult, number of records it logged)``; ``current``: the unfinished run
        (``{"index", "start", "n_logged", "payload"}``, the payload of
        :meth:`rfed.algorithms.base.Algorithm.run`) or ``None``; ``records``: every history
        record logged so far; ``log``: ``{"size", "sha256", "n_completed", "n_records"}`` of
        the log prefix.

    Raises
    ------
    OutputDirError
        One line naming the file and what is wrong: a checkpoint of an earlier release (a
        pickle, never read), a damaged one (checksum mismatch), one of another format, of
        another run, or whose log is missing, shorter than recorded or damaged.
    """
    return _read_checkpoint(Path(out_dir), expect)[0]


def _read_checkpoint(folder: Path, expect: Mapping[str, Any] | None
                     ) -> tuple[dict | None, Any]:
    """:func:`read_checkpoint` and the SHA-256 object of the log prefix (to go on appending)."""
    path = folder / _CHECKPOINT
    if not path.is_file():
        old = folder / _OLD_CHECKPOINT
        if old.is_file():
            raise OutputDirError(
                f"'{old}' is a checkpoint written by an earlier rfed (a pickle); this format is "
                "no longer read, since loading a pickle can run code: run the experiment again "
                "(--overwrite)")
        return None, None
    try:
        ck = load_state(path, kind=_CHECKPOINT_KIND, expect=expect)
    except StateFileError as exc:
        raise OutputDirError(str(exc)) from None
    fmt = ck.get("format") if isinstance(ck, dict) else None
    if fmt not in _READABLE_FORMATS:
        raise OutputDirError(
            f"'{path}' is not a checkpoint this rfed reads (layout {fmt!r}; it reads layout "
            f"{', '.join(map(str, _READABLE_FORMATS))})")
    try:
        head = {k: ck[k] for k in ("format", "experiment", "seed", "run_id", "current")}
        log = dict(ck["log"])
        size, digest = int(log["size"]), str(log["sha256"])
        n_completed, n_records = int(log["n_completed"]), int(log["n_records"])
    except (KeyError, TypeError, ValueError) as exc:
        raise OutputDirError(f"'{path}' is malformed (its log entry: {exc!r})") from None
    frames, hasher = _read_log(folder / _CHECKPOINT_LOG, size, digest, str(head["run_id"]))
    completed: list = []
    records: list = []
    for frame in frames:
        completed += frame["completed"]
        records += frame["records"]
    if len(completed) != n_completed or len(records) != n_records:
        raise OutputDirError(
            f"the checkpoint log '{folder / _CHECKPOINT_LOG}' is damaged: it holds "
            f"{len(completed)} runs and {len(records)} records, the checkpoint says "
            f"{n_completed} and {n_records}")
    return {**head, "completed": completed, "records": records, "log": log}, hasher


def _read_log(path: Path, size: int, digest: str, run_id: str) -> tuple[list[dict], Any]:
    """The frames (``{"completed", "records"}``) in the first ``size`` bytes of the log, and
    the SHA-256 object of those bytes."""
    hasher = hashlib.sha256()
    if size == 0:
        return [], hasher
    try:
        with open(path, "rb") as fh:
            data = fh.read(size)
    except FileNotFoundError:
        raise OutputDirError(f"the checkpoint log '{path}' is missing") from None
    if len(data) < size:
        raise OutputDirError(f"the checkpoint log '{path}' holds {len(data)} bytes, fewer "
                             f"than the {size} its checkpoint stands on")
    hasher.update(data)
    if hasher.hexdigest() != digest:
        raise OutputDirError(f"the checkpoint log '{path}' is damaged (checksum mismatch: "
                             f"SHA-256 of its first {size} bytes)")
    frames = []
    pos = 0
    while pos < size:
        n = int.from_bytes(data[pos:pos + _FRAME_HEADER], "little")
        blob = data[pos + _FRAME_HEADER:pos + _FRAME_HEADER + n]
        try:
            frame = loads_state(blob, kind=_LOG_KIND, expect={"run_id": run_id},
                                source=f"{path} (frame at byte {pos})")
            frames.append({"completed": list(frame["completed"]),
                           "records": list(frame["records"])})
        except StateFileError as exc:
            raise OutputDirError(str(exc)) from None
        except (KeyError, TypeError) as exc:
            raise OutputDirError(f"the checkpoint log '{path}' is malformed (frame at byte "
                                 f"{pos}: {exc!r})") from None
        pos += _FRAME_HEADER + n
    return frames, hasher


class CheckpointLog:
    """The checkpoint files of one results folder, written as the run goes.

    Each :meth:`save` appends one frame to ``checkpoint.log`` (the runs completed and the
    records logged since the previous save, serialized once), makes it durable, then replaces
    ``checkpoint.npz`` (the unfinished run and the length and SHA-256 of the log prefix it
    stands on). A kill between the two leaves the previous ``checkpoint.npz``, which stands on
    a shorter prefix; :meth:`resume` reads the checkpoint back and appends after its prefix.

    Parameters
    ----------
    folder : Path
        The results folder.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        # what the log's trusted prefix holds: its size and SHA-256, runs and records in it
        self._size = 0
        self._sha256 = hashlib.sha256()
        self._n_completed = 0
        self._n_records = 0

    def resume(self, expect: Mapping[str, Any]) -> dict | None:
        """The folder's checkpoint (:func:`read_checkpoint` with ``expect``), or ``None``;
        later saves append after the log prefix it stands on (a torn tail is overwritten).

        Parameters
        ----------
        expect : mapping
            The binding the checkpoint must hold (``experiment``, ``seed``, ``run_id``,
            ``config_sha256``), as :func:`read_checkpoint` checks it.

        Returns
        -------
        dict or None
            The checkpoint's contents, or ``None`` when the folder holds none.

        Raises
        ------
        OutputDirError
            As :func:`read_checkpoint`.
        """
        ck, sha256 = _read_checkpoint(self.folder, expect)
        if ck is not None:
            log = ck["log"]
            self._size, self._sha256 = log["size"], sha256
            self._n_completed, self._n_records = log["n_completed"], log["n_records"]
        return ck

    def save(self, head: Mapping[str, Any], completed: Sequence, records: Sequence,
             current: dict | None, bind: Mapping[str, Any]) -> None:
        """Append the runs and records not yet in the log, then replace ``checkpoint.npz``.

        Parameters
        ----------
        head : mapping
            ``experiment``, ``seed`` and ``run_id`` of the run.
        completed : sequence of (RunResult, int)
            Every run finished so far and the number of records it logged.
        records : sequence of dict
            Every history record logged so far.
        current : dict or None
            The unfinished run: ``{"index", "start", "n_logged", "payload"}``.
        bind : mapping
            What the checkpoint is bound to (:func:`rfed.state.dumps_state`).

        Raises
        ------
        rfed.state.UnsupportedStateError
            Something in the state cannot be saved; nothing was written.
        """
        new_completed = list(completed[self._n_completed:])
        new_records = list(records[self._n_records:])
        frame = b""
        if new_completed or new_records:
            blob = dumps_state({"completed": new_completed, "records": new_records},
                               kind=_LOG_KIND, bind={"run_id": head["run_id"]})
            frame = len(blob).to_bytes(_FRAME_HEADER, "little") + blob
        sha256 = self._sha256.copy()
        sha256.update(frame)
        log: dict[str, Any] = {
            "size": self._size + len(frame), "sha256": sha256.hexdigest(),
            "n_completed": len(completed), "n_records": len(records)}
        ck = {"format": _CHECKPOINT_FORMAT, "experiment": head["experiment"],
              "seed": int(head["seed"]), "run_id": head["run_id"], "log": log,
              "current": current}
        data = dumps_state(ck, kind=_CHECKPOINT_KIND, bind=bind)
        if frame:
            # durable before the checkpoint that stands on it replaces the previous one
            write_at_end(self.folder / _CHECKPOINT_LOG, frame, self._size)
            self._size, self._sha256 = log["size"], sha256
            self._n_completed, self._n_records = log["n_completed"], log["n_records"]
        atomic_write_bytes(self.folder / _CHECKPOINT, data)

    def remove(self) -> None:
        """Remove both files (the run has finished, or cannot be checkpointed)."""
        (self.folder / _CHECKPOINT).unlink(missing_ok=True)
        (self.folder / _CHECKPOINT_LOG).unlink(missing_ok=True)
