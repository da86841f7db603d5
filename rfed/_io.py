"""Files that are never half-written: atomic replacement, line-atomic appends, strict JSON.

* :func:`atomic_write_bytes` writes a temporary file unique to the process (``tempfile.mkstemp``
  in the target's folder), flushes it to disk (``fsync``) and renames it over the target
  (``os.replace``): a reader sees the old file or the new one, never a torn one, and two
  processes never share a temporary name.
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
import pickle
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_pickle",
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


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file, fsync, ``os.replace``).

    On any error the temporary file is removed and ``path`` keeps its previous content.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def atomic_pickle(path: str | os.PathLike, obj: Any) -> None:
    """Pickle ``obj`` to ``path`` atomically (highest protocol)."""
    atomic_write_bytes(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


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
