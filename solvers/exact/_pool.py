"""Where DC-SVM's sub-problems run: in-process, a process pool, or a dask cluster.

:func:`level_executor` picks the executor of one :func:`._dcsvm.dcsvm_fit` call (a dask
cluster through ``client``, the caller's ``executor``, a process pool of ``n_jobs`` workers
made for the call, or in-process); :func:`make_process_pool` makes the pool and its shared
stop flag; :func:`_pack` packs a level's sub-problems into batches (longest first).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from dataclasses import dataclass

import numpy as np

from ._dask import DaskLevels
from ._dual_solve import solve_dual, solve_many
from ._kernels import KernelData, KernelSpec

__all__ = [
    "DEFAULT_START_METHOD",
    "LevelExecutor",
    "POOL_MIN_CORES",
    "SerialExecutor",
    "available_cores",
    "default_workers",
    "level_executor",
    "make_process_pool",
]

# "fork" starts workers in milliseconds with the parent's imported modules and loaded numba
# code (safe here: the solver starts no threads of its own; OpenBLAS handles fork).  Use
# "forkserver" or "spawn" from a parent that runs other threads (e.g. a web server).
DEFAULT_START_METHOD = "fork" if "fork" in mp.get_all_start_methods() else "spawn"


# --------------------------------------------------------------------------- executors
class SerialExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` that runs every task at once in the caller."""

    def submit(self, fn, /, *args, **kwargs):
        fut = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            fut.set_exception(exc)
        return fut


_WORKER_STOP = None  # multiprocessing.Value in pool workers


def _worker_init(stop_value):
    global _WORKER_STOP
    _WORKER_STOP = stop_value
    try:  # one BLAS thread per worker: the pool already fills the cores
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl is a scikit-learn dependency
        pass


def _worker_should_stop():
    return _WORKER_STOP is not None and _WORKER_STOP.value != 0


# Below this many cores the default is in-process: on 2 shared vCPUs the pool cost more CPU
# (start-up, pickling the sub-problems, two processes contending for one cache) than it
# saved (benchmarks/results/dcsvm.md of 2026-11-22: serial 12.4 CPU s, pool 18.7 on ijcnn1).
POOL_MIN_CORES = 4


def default_workers() -> int:
    """Workers when ``n_jobs`` is None: every available core from ``POOL_MIN_CORES`` on, else 1."""
    cores = available_cores()
    return cores if cores >= POOL_MIN_CORES else 1


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def make_process_pool(
    n_workers: int | None = None, start_method: str = DEFAULT_START_METHOD, warm: bool = True
):
    """A process pool for DC-SVM sub-problems plus its shared stop flag.

    Workers use the ``start_method`` context: "fork" (default on Linux; workers inherit the
    loaded numba code), "forkserver" (workers fork from a clean server process that has
    imported this module, so numba's on-disk cache is loaded once and no threads of the
    parent are inherited) or "spawn".

    The caller's ``__main__`` module must be importable without side effects (the usual
    ``if __name__ == "__main__":`` guard), as for any spawn/forkserver pool.  With ``warm``
    every worker is started at once and loads the compiled solver in the background.

    Returns
    -------
    executor : concurrent.futures.ProcessPoolExecutor
    stop_flag : multiprocessing.Value
        Set ``stop_flag.value = 1`` to make running sub-problems raise ``Cancelled``.
    """
    n_workers = n_workers or available_cores()
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["svmstream.solvers.exact._dcsvm"])
    stop = ctx.Value("b", 0, lock=False)
    ex = cf.ProcessPoolExecutor(
        max_workers=n_workers, mp_context=ctx, initializer=_worker_init, initargs=(stop,)
    )
    if warm:
        # start the workers now and load the compiled solver while the caller clusters
        for _ in range(n_workers):
            ex.submit(_warm_up)
    return ex, stop


def _warm_up():
    """Load the numba-compiled solver (from the on-disk cache) in a worker."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    solve_dual(KernelData(X), y, KernelSpec("rbf", 1.0), 1.0)
    time.sleep(0.05)  # let the other workers take their own warm-up task


# --------------------------------------------------------------------------- sub-problems
def _solve_batch(problems, spec, eps, cache_mb, shrinking, max_iter, should_stop=None):
    """:func:`._dual_solve.solve_many` in a pool worker (``should_stop`` defaults to the worker's
    shared stop flag).  Returns a list of ``(alpha, objective, max_violation, n_iter, stats)``."""
    stop = should_stop if should_stop is not None else _worker_should_stop
    return solve_many(problems, spec, eps, cache_mb, shrinking, max_iter, stop)


def _pack(costs, n_bins):
    """Longest-processing-time-first packing of items into ``n_bins`` lists of indices."""
    order = np.argsort(-np.asarray(costs, dtype=np.float64), kind="stable")
    loads = np.zeros(n_bins)
    bins: list[list[int]] = [[] for _ in range(n_bins)]
    for i in order:
        b = int(np.argmin(loads))
        bins[b].append(int(i))
        loads[b] += costs[i]
    return [b for b in bins if b]


@dataclass
class LevelExecutor:
    """The executor of one DC-SVM call and what stopping or closing it takes.

    ``workers`` share the kernel cache; ``in_process`` executors (serial, threads) poll
    ``should_stop`` themselves, pool workers read ``stop_flag``; ``own_pool`` is the pool made
    for this call (shut down by :meth:`close`), ``dask`` the cluster's :class:`DaskLevels`."""

    executor: cf.Executor
    stop_flag: object
    workers: int
    in_process: bool
    own_pool: cf.Executor | None = None
    dask: DaskLevels | None = None

    def cancel(self, pending) -> None:
        """Tell running sub-problems to stop and cancel the ``pending`` futures."""
        if self.stop_flag is not None:
            self.stop_flag.value = 1
        if self.dask is not None:
            self.dask.stop()
        for f in pending:
            f.cancel()

    def close(self) -> None:
        """Shut the call's own pool down and release the dask cluster's data."""
        if self.own_pool is not None:
            self.own_pool.shutdown(wait=True, cancel_futures=True)
        if self.dask is not None:
            self.dask.close()


def level_executor(
    kd, y, Cb, n_levels, *, client, executor, stop_flag, n_jobs, parallel_min_samples, start_method
) -> LevelExecutor:
    """The executor of a :func:`._dcsvm.dcsvm_fit` call (see its parameters): the dask
    cluster of ``client``, else the caller's ``executor``, else a pool of ``n_jobs`` workers
    (None: :func:`default_workers`) for ``n >= parallel_min_samples``, else in-process."""
    n = kd.n_samples
    own_pool = None
    dask = None
    if client is not None and n >= parallel_min_samples and n_levels > 0:
        dask = DaskLevels(client, kd, y, Cb)
        executor, stop_flag, workers = dask.executor, None, dask.n_workers
    elif executor is None:
        stop_flag = None
        workers = default_workers() if n_jobs is None else int(n_jobs)
        if workers > 1 and n >= parallel_min_samples and n_levels > 0:
            own_pool, stop_flag = make_process_pool(workers, start_method)
            executor = own_pool
        else:
            workers = 1
            executor = SerialExecutor()
    else:
        workers = getattr(executor, "_max_workers", None) or available_cores()
    if stop_flag is not None:
        stop_flag.value = 0
    in_process = isinstance(executor, (SerialExecutor, cf.ThreadPoolExecutor))
    return LevelExecutor(executor, stop_flag, workers, in_process, own_pool, dask)
