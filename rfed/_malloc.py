"""glibc malloc settings for ``rfed run`` (the CLI owns its process; importing rfed changes none).

The experiments allocate and free the same large numpy temporaries every round. With glibc's
defaults, a block above the adaptive mmap threshold (at most 32 MiB) is mapped and unmapped each
time, and freed heap space is trimmed back to the kernel as soon as 128 KiB-256 KiB (adaptive)
lie free at its top, so the next round faults every page in again: dpdl-digits spent 6 s of its
24 s of CPU in the kernel on 2.1 million minor page faults. Keeping blocks up to 64 MiB in the
heap and trimming only past 256 MiB of free top takes it to 0.05 million faults and 17 s.
Either setting alone is worse than the defaults (setting one turns off the adaptation of both),
so both are set or neither.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["keep_freed_memory", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

#: blocks up to this size come from the heap (glibc's M_MMAP_THRESHOLD)
MMAP_THRESHOLD = 64 * 2**20
#: free space at the heap's top kept before trimming (glibc's M_TRIM_THRESHOLD)
TRIM_THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's <malloc.h> parameter numbers
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds to :data:`MMAP_THRESHOLD` and
    :data:`TRIM_THRESHOLD` for this process; returns whether they were set.

    Nothing is set when the C library is not glibc, or when the user set any of glibc's own
    ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_TOP_PAD_`` variables
    (theirs win: ``MALLOC_TRIM_THRESHOLD_=131072`` restores glibc's behaviour).
    """
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
        gnu_get_libc_version = libc.gnu_get_libc_version   # glibc only
    except (OSError, AttributeError):
        return False
    del gnu_get_libc_version
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
