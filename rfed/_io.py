"""Files that are never half-written: atomic replacement, line-atomic appends, strict JSON.

* :func:`atomic_write_bytes` writes a temporary file unique to the process (``tempfile.mkstemp``
  in the target's folder, named ``.TARGET.PID.XXXXXXXX.tmp``), flushes it to disk (``fsync``)
  and renames it over the target (``os.replace``): a reader sees the old file or the new one,
  never a torn one, and two processes never share a temporary name. A process killed while
  writing leaves its temporary behind: the next write of the same target by another process,
  and :func:`remove_stale_temporaries` (called when a results folder is resumed or
  overwritten), remove the temporaries of processes that are gone.
* :func:`write_at_end` cuts a file back to a given size and appends bytes there, flushed to
  disk (``fsync``); on failure the file is cut back again. A reader that trusts only a prefix
  whose length and checksum it recorded elsewhere never sees a torn write (the checkpoint log
  of :class:`rfed.experiments.RunContext`).
* :func:`append_line` appends one line with a single ``write`` on an ``O_APPEND`` descriptor and,
  if the write fails (a full disk), truncates the file back, so a line is there whole or not at
  all.
* :func:`strict_json` maps non-finite floats to ``null`` with the reason in a sibling key
  ``<key>_nonfinite`` (``"inf"``, ``"-inf"`` or ``"nan"``), and serialises with
  ``allow_nan=False``: the output is standard JSON that strict parsers accept.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "remove_stale_temporaries",
    "process_gone",
    "append_line",
    "write_at_end",
    "strict_jsonable",
    "strict_json",
    "NONFINITE_SUFFIX",
]

#: Suffix of the sibling key that states why a number was written as ``null``.
NONFINITE_SUFFIX = "_nonfinite"


def _file_mode() -> int:
    """``0o666`` less the process umask: what ``open()`` would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (the one place bytes reach the disk; tests patch it)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


#: ``.TARGET.PID.XXXXXXXX.tmp``: a temporary of :func:`atomic_write_bytes` (``PID`` its writer).
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")
#: ``.TARGET.XXXXXXXX.tmp``: a temporary of an earlier release (no writer's pid in the name).
_OLD_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")
#: Targets whose stale temporaries this process has already removed.
_SWEPT: set[Path] = set()


def process_gone(pid: int) -> bool:
    """True when no process ``pid`` runs (or it has exited and waits to be reaped: a zombie
    writes nothing; Linux ``/proc``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False       # another user's live process
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the state follows the parenthesised command name, which may itself hold spaces
    return stat[stat.rfind(")") + 2:stat.rfind(")") + 3] == "Z"


def remove_stale_temporaries(folder: str | os.PathLike, target: str | None = None, *,
                             earlier_releases: bool = True) -> list[Path]:
    """Remove the temporaries of :func:`atomic_write_bytes` left in ``folder`` by dead processes.

    Parameters
    ----------
    folder : path
    target : str, optional
        Only the temporaries of this file name (default: of every file in ``folder``).
    earlier_releases : bool
        Also remove temporaries named as earlier releases named them (no writer's pid): only
        where no other process can be writing, e.g. a results folder this process has locked.

    Returns
    -------
    list of Path
        The files removed.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(os.fspath(folder)))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(".") or not entry.name.endswith(".tmp"):
            continue
        match = _TEMPORARY.match(entry.name)
        if match is not None:
            pid = int(match["pid"])
            stale = pid != os.getpid() and process_gone(pid)
        else:
            match = _OLD_TEMPORARY.match(entry.name)
            stale = earlier_releases and match is not None
        if match is None or not stale:
            continue
        if (target is None or match["target"] == target) and entry.is_file(
                follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file, fsync, ``os.replace``).

    On any error the temporary file is removed and ``path`` keeps its previous content. The
    first write of ``path`` in a process also removes the temporaries of ``path`` that dead
    processes left (:func:`remove_stale_temporaries`).
    """
    path = Path(path)
    if path not in _SWEPT:
        remove_stale_temporaries(path.parent, path.name, earlier_releases=False)
        _SWEPT.add(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.",
                               suffix=".tmp")
    try:
        try:
            os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; results are ordinary files
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` of UTF-8 ``text``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append ``line`` (a newline is added) as one write; on failure the file is cut back."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def write_at_end(path: str | os.PathLike, data: bytes, size: int) -> int:
    """Cut ``path`` back to its first ``size`` bytes, append ``data``, fsync; return the new size.

    The first ``size`` bytes are never rewritten; whatever followed them (e.g. the torn tail of
    a killed writer) is dropped first. On any error the file is cut back to ``size`` and the
    error re-raised. The file is created (ordinary permissions) if absent; it must hold at
    least ``size`` bytes (``ValueError`` naming ``size`` otherwise).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"argument 'size' must be an int >= 0, got {size!r}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, _FILE_MODE)
    try:
        if os.fstat(fd).st_size < size:
            raise ValueError(f"argument 'size': '{path}' holds {os.fstat(fd).st_size} bytes, "
                             f"fewer than {size}")
        os.ftruncate(fd, size)
        os.lseek(fd, size, os.SEEK_SET)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
    return size + len(data)


def _reason(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def strict_jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays as Python objects and non-finite floats as ``None``.

    In a mapping, a non-finite number under ``key`` becomes ``None`` and ``key + "_nonfinite"``
    holds the reason; in a list (or array) the element becomes ``None`` and the parent mapping's
    ``key + "_nonfinite"`` holds ``{index: reason}``.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            v = _plain(v)
            if isinstance(v, float) and not math.isfinite(v):
                out[key] = None
                out[key + NONFINITE_SUFFIX] = _reason(v)
            elif isinstance(v, list):
                items = [_plain(e) for e in v]
                bad = {str(i): _reason(e) for i, e in enumerate(items)
                       if isinstance(e, float) and not math.isfinite(e)}
                out[key] = [None if str(i) in bad else strict_jsonable(e)
                            for i, e in enumerate(items)]
                if bad:
                    out[key + NONFINITE_SUFFIX] = bad
            else:
                out[key] = strict_jsonable(v)
        return out
    value = _plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [strict_jsonable(v) for v in value]
    return value


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    return v


def strict_json(obj: Any, **kwargs: Any) -> str:
    """Standard JSON of ``obj`` (see :func:`strict_jsonable`; never ``NaN``/``Infinity``)."""
    return json.dumps(strict_jsonable(obj), allow_nan=False, **kwargs)
