"""Give the C allocator's free memory back to the system once per snapshotter round.

Why (issue 42, ``docs/feedback.md`` "The store's memory"): the embedded feedback store's
chunks are its memory exactly, but a server that remembered 1,000,000 tokenless rows (64 MiB
quota, 4 clients) grew by 77-78 MiB.  ``malloc_info`` read inside the server
(``benchmarks/profiling/remember_rss.py``) put the extra 10-14 MiB in glibc's arenas as *free*
chunks: the requests' temporaries (decoded rows, ids, response bodies) freed by the pool
threads stay in their arenas.  ``malloc_trim(0)`` there took the growth to the store's 63 MiB.
Limiting the arenas (``MALLOC_ARENA_MAX=2``: 77.3-78.7 MiB) or fixing the mmap/trim
thresholds (``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_`` = 128 KiB: 70.5-73.5 MiB)
did not reach the bound, so the server trims instead: :func:`release_free_memory` once per
snapshotter round (every ``SNAPSHOT_INTERVAL_S``, in the snapshotter's worker thread), never
on a request.  Not glibc (musl, macOS): nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from functools import cache


@cache
def _trim():
    """glibc's ``malloc_trim`` (None elsewhere)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> float | None:
    """``malloc_trim(0)``: the free pages of every arena back to the system; returns the seconds
    it took (None: not glibc)."""
    trim = _trim()
    if trim is None:
        return None
    started = time.perf_counter()
    trim(0)
    return time.perf_counter() - started
