"""Give freed heap memory back to the operating system: :func:`release_free_memory`.

glibc's ``malloc`` keeps what the process freed for later allocations; after bulk work —
rendering a large ``/metrics`` text (~28 MB with 10,000 models, plus the strings it is built
from), parking hundreds of models — much of it sits in free chunks between live ones, where it
is never returned by itself.  ``malloc_trim(0)`` returns every free page of every arena
(``madvise(MADV_DONTNEED)``).  Measured with 3,000 parked models in one process: three
scrapes left the RSS 35 MB higher, a trim took 2 ms and gave back 26 MB of it.

The snapshotter also calls it once per round (``app/main.py``; issue 42, ``docs/feedback.md``
"The store's memory"): a server that remembered 1,000,000 tokenless rows (64 MiB quota, 4
clients) grew by 77-78 MiB, the extra 10-14 MiB free chunks in glibc's arenas left by the
requests' temporaries (``malloc_info`` read in the server, ``benchmarks/profiling/remember_rss.py``);
``MALLOC_ARENA_MAX=2`` (77.3-78.7 MiB) or 128 KiB trim/mmap thresholds (70.5-73.5 MiB) did not
reach the bound, a trim per round did (+64.7 MiB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("svmstream.registry")


def _malloc_trim():
    """glibc's ``malloc_trim``, or None (another C library, or none found)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """``malloc_trim(0)``: return the heap's free pages to the system (glibc only; elsewhere
    nothing).  Returns whether memory was released.  Thread-safe (glibc locks each arena)."""
    if _TRIM is None:
        return False
    try:
        return bool(_TRIM(0))
    except Exception:  # never let a memory hint fail a request
        log.debug("malloc_trim failed", exc_info=True)
        return False
