"""Compile the numba kernels of the batch jobs into the image's cache (``docker/Dockerfile``).

The service's warm-up (``svmstream.app.main.warm_up``) compiles the online solvers only; a
DC-SVM, AVSF or LIBLINEAR-CD job (on the server, or on a dask worker of the ``dask``
profile) would otherwise compile its kernels on its first run in every fresh container
(issue 26: 82 cache files, 55 s before DC-SVM's k-means started).  This runs each batch
algorithm once, through the jobs' own code path (``run_training``: load a LIBSVM file, fit,
score), on a tiny dense file and a tiny sparse one (the loader densifies dense enough data,
so both kernel variants are used by real jobs).  Run from outside the source tree, as the
service runs, so the cache is keyed to the installed modules.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from svmstream.app.jobs.worker import run_training
from svmstream.app.models.config import BATCH_ALGORITHMS

# small enough to build fast, large enough for DC-SVM's levels and k-means to run
PARAMS = {"dcsvm": {"k": 4, "n_levels": 2, "n_jobs": 1}, "avsf": {}, "liblinear-cd": {}}


def write_libsvm(path: Path, n: int, d: int, density: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) * (rng.random((n, d)) < density)
    y = np.where(np.sin(3 * X[:, 0]) + X[:, 1] > 0, 1, -1)
    with open(path, "w") as f:
        for row, label in zip(X, y, strict=True):
            nz = np.flatnonzero(row)
            f.write(f"{label} " + " ".join(f"{j + 1}:{row[j]:.6g}" for j in nz) + "\n")


def main(quiet: bool = False) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        files = {"dense": Path(tmp, "dense.libsvm"), "sparse": Path(tmp, "sparse.libsvm")}
        write_libsvm(files["dense"], 600, 8, 1.0, 0)
        write_libsvm(files["sparse"], 600, 200, 0.03, 1)
        for algorithm in BATCH_ALGORITHMS:
            for kind, path in files.items():
                t0 = time.perf_counter()
                task = {
                    "algorithm": algorithm,
                    "data": str(path),
                    "test": str(path),
                    "params": PARAMS.get(algorithm, {}),
                    "early_level": None,
                    "default_n_jobs": 1,
                }
                _, result = run_training(task, label_indices=False)
                if quiet:
                    continue
                print(
                    f"warm_jobs: {algorithm} {kind}: {time.perf_counter() - t0:.1f} s, "
                    f"accuracy {result.get('test_accuracy')}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
