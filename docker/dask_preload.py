"""``dask worker --preload /opt/svmstream/dask_preload.py`` (docker-compose.yml, profile dask).

Before a worker registers with the scheduler (distributed runs preloads at start-up, before the
registration), import what a job task imports and load every batch kernel from the image's numba
cache by one tiny fit of each algorithm (``docker/warm_jobs.py``), then mark the worker warm: its
health check waits for the mark.  So the first job a fresh worker runs pays neither the imports
(~40 s at load 14 before the job's "loading" stage, measured) nor a compilation (the kernels are
in the image), and a worker is ``healthy`` only once it is ready.
"""

from __future__ import annotations

import os
import sys
import time

MARK = "/tmp/svmstream-worker-warm"
IMAGE_DIR = "/opt/svmstream"  # where docker/Dockerfile copies warm_jobs.py

try:  # a restarted container keeps its /tmp: the mark is for this start only
    os.unlink(MARK)
except FileNotFoundError:
    pass


def dask_setup(worker=None) -> None:
    t0 = time.perf_counter()
    sys.path.insert(0, IMAGE_DIR)  # (distributed runs a copy of this file from its scratch space)
    import warm_jobs  # docker/warm_jobs.py, in the image

    from svmstream.app.jobs import dask_jobs  # noqa: F401  (what a job task imports)
    from svmstream.solvers.exact import _dask

    _dask._worker_setup()  # one BLAS thread, the dual solver loaded (what the first fit would do)
    warm_jobs.main(quiet=True)
    with open(MARK, "w") as f:
        f.write(f"{time.perf_counter() - t0:.1f}\n")
    print(f"svmstream: worker warm in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
