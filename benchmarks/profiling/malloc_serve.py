"""``svmstream serve`` with a memory report on SIGUSR1 (for ``benchmarks/profiling/remember_rss.py``).

    python -m benchmarks.profiling.malloc_serve OUT_PREFIX serve --port ... (the serve options)

On each SIGUSR1 the process writes ``OUT_PREFIX.N.xml`` (glibc's ``malloc_info``: every arena's
system bytes, free bytes and the mmapped chunks) and ``OUT_PREFIX.N.txt`` (``/proc/self/smaps_rollup``,
and, with ``MPROBE_TRACE=1``, tracemalloc's 25 largest allocation sites), N counting from 0;
with ``MPROBE_TRIM=1`` then ``malloc_trim(0)`` and ``OUT_PREFIX.N.trim.txt`` (the rollup after it).
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_libc.fopen.restype = ctypes.c_void_p
_libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.malloc_trim.argtypes = [ctypes.c_size_t]


def main() -> None:
    prefix, *argv = sys.argv[1:]
    count = [0]
    if os.environ.get("MPROBE_TRACE") == "1":
        import tracemalloc

        tracemalloc.start(4)

    def dump(signum, frame) -> None:
        n = count[0]
        count[0] += 1
        f = _libc.fopen(f"{prefix}.{n}.xml".encode(), b"w")
        _libc.malloc_info(0, f)
        _libc.fclose(f)
        with open("/proc/self/smaps_rollup") as src, open(f"{prefix}.{n}.txt", "w") as out:
            out.write(src.read())
            if os.environ.get("MPROBE_TRACE") == "1":
                import tracemalloc

                snap = tracemalloc.take_snapshot()
                out.write(f"\ntraced now/peak: {tracemalloc.get_traced_memory()}\n")
                for stat in snap.statistics("traceback")[:25]:
                    out.write(f"{stat.size / 2**20:.2f} MiB {stat.count}\n")
                    for line in stat.traceback.format()[-8:]:
                        out.write(f"    {line}\n")
        if os.environ.get("MPROBE_TRIM") == "1":
            _libc.malloc_trim(0)
            with open("/proc/self/smaps_rollup") as src, open(f"{prefix}.{n}.trim.txt", "w") as out:
                out.write(src.read())

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["svmstream", *argv]
    runpy.run_module("svmstream.app.cli.main", run_name="__main__")


if __name__ == "__main__":
    main()
