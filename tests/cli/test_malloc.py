"""``rfed run`` keeps freed memory in glibc's heap: a temporary allocated and freed every round
is then not mapped, faulted in and returned to the kernel each time."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# a 40 MiB temporary (above glibc's largest adaptive mmap threshold, 32 MiB): where it lives
# while allocated, and what the heap keeps once it is freed, from glibc's mallinfo2
_CHILD = """
import ctypes, json, sys
import numpy as np
from rfed._malloc import keep_freed_memory

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
applied = keep_freed_memory() if sys.argv[1] == "tuned" else None
start = libc.mallinfo2()
a = np.ones(5 * 2**20)
held = libc.mallinfo2()
del a
after = libc.mallinfo2()
print(json.dumps({"applied": applied, "mapped_while_held": held.hblkhd - start.hblkhd,
                  "heap_kept_after_free": after.arena - start.arena}))
"""
MIB = 2**20


def _child(mode: str, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _has_mallinfo2() -> bool:
    try:
        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018 - glibc >= 2.33
    except (OSError, AttributeError):
        return False
    return True


glibc_only = pytest.mark.skipif(not _has_mallinfo2(), reason="glibc >= 2.33 (mallinfo2)")


@glibc_only
def test_a_freed_temporary_stays_in_the_heap():
    default, tuned = _child("default"), _child("tuned")
    # glibc's defaults map the 40 MiB and unmap it when freed
    assert default["mapped_while_held"] >= 40 * MIB
    assert default["heap_kept_after_free"] < 40 * MIB
    # tuned: it comes from the heap, which keeps it for the next round
    assert tuned["applied"] is True
    assert tuned["mapped_while_held"] < MIB
    assert tuned["heap_kept_after_free"] >= 40 * MIB


@glibc_only
def test_the_users_own_malloc_settings_win():
    theirs = _child("tuned", MALLOC_TRIM_THRESHOLD_="131072")
    assert theirs["applied"] is False
    assert theirs["mapped_while_held"] >= 40 * MIB


def test_only_the_run_command_sets_them():
    """Importing rfed (a library user's process) changes no malloc setting: the one call is in
    the CLI's ``run``."""
    import rfed

    root = Path(rfed.__file__).parent
    call = re.compile(r"(?<!def )keep_freed_memory\(\)")
    callers = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
               if call.search(p.read_text())]
    assert callers == ["cli.py"]
