"""DC-SVM sub-problems on a ``dask.distributed`` cluster.

:func:`active_client` finds the cluster the caller chose with scikit-learn's convention,
``with joblib.parallel_backend("dask"):`` (docs/dask.md says why this and not a ``client``
parameter); :class:`DaskLevels` is what :func:`svmstream.solvers.exact._dcsvm.dcsvm_fit`
uses instead of its process pool then: the training data goes to every worker once
(``client.scatter(..., broadcast=True)``), and a level's task carries only its clusters' row
indices and warm-start ``alpha`` (8 bytes per row each), never the rows themselves.

Workers load the numba kernels from numba's on-disk cache (``cache=True``): the first fit
on a worker runs :func:`_worker_setup` there once (one BLAS thread, a tiny solve that loads
the compiled code), later fits find it done.

``dask.distributed`` is imported only here, and only when a cluster is in use: the solvers
work without it.
"""

from __future__ import annotations

import secrets
import time

import numpy as np

from ._dual_solve import solve_dual, solve_many
from ._kernels import KernelData, KernelSpec

__all__ = ["active_client", "DaskLevels"]

_STOP_POLL_S = 0.5
"""A worker asks the scheduler for the stop event at most this often (one round trip each)."""

_worker_ready = False  # set in a worker process by _worker_setup


def active_client():
    """The ``distributed.Client`` of the active joblib backend, or None.

    Returns the client when the caller runs inside ``joblib.parallel_backend("dask")``
    (joblib's ``DaskDistributedBackend``), None for any other backend (loky, threading,
    sequential) or when dask is not installed.
    """
    try:
        from joblib.parallel import get_active_backend
    except ImportError:  # pragma: no cover - joblib is a scikit-learn dependency
        return None
    backend, _ = get_active_backend()
    if type(backend).__name__ != "DaskDistributedBackend":
        return None
    return getattr(backend, "client", None)


def _worker_setup() -> bool:
    """Once per worker process: one BLAS thread (the cluster fills the cores) and the
    compiled solver loaded from numba's cache; returns True."""
    global _worker_ready
    if not _worker_ready:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)
        except Exception:  # pragma: no cover - threadpoolctl is a scikit-learn dependency
            pass
        rng = np.random.default_rng(0)
        X = rng.normal(size=(40, 3))
        solve_dual(KernelData(X), np.where(X[:, 0] > 0, 1.0, -1.0), KernelSpec("rbf", 1.0), 1.0)
        _worker_ready = True
    return True


class _EventPoll:
    """``should_stop`` of a worker task: the named ``distributed.Event``, polled at most
    every :data:`_STOP_POLL_S`."""

    def __init__(self, name: str):
        from distributed import Event

        self.event = Event(name)
        self.last = 0.0
        self.state = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.state and now - self.last >= _STOP_POLL_S:
            self.last = now
            self.state = bool(self.event.is_set())
        return self.state


def _solve_rows(kd, y, C, batch, spec, eps, cache_mb, shrinking, max_iter, stop_name):
    """Worker task: solve the sub-problems ``(rows, alpha0)`` of ``batch`` one after the other
    on the scattered ``kd``, ``y``, ``C`` (:func:`._dual_solve.solve_many`).  Returns ``[(alpha,
    objective, max_violation, n_iter, stats), ...]``."""
    problems = ((kd.take(rows), y[rows], C[rows], a0) for rows, a0 in batch)  # one at a time
    return solve_many(problems, spec, eps, cache_mb, shrinking, max_iter, _EventPoll(stop_name))


class DaskLevels:
    """The level sub-problems of one :func:`dcsvm_fit` call on a dask cluster.

    Parameters
    ----------
    client : distributed.Client
    kd : KernelData
        The n training points (scattered to every worker once, here).
    y : ndarray of shape (n,), float64
        Labels in {-1, +1}.
    C : ndarray of shape (n,), float64
        Box constraints.

    Attributes
    ----------
    executor : concurrent.futures.Executor
        ``client.get_executor()``: its futures are ``concurrent.futures`` futures, so
        ``dcsvm_fit`` waits on them as on its process pool's.
    n_workers : int
        Worker threads of the cluster (sizes the task bins and the kernel cache share).
    """

    def __init__(self, client, kd: KernelData, y: np.ndarray, C: np.ndarray):
        from distributed import Event

        self.client = client
        client.run(_worker_setup)  # every worker, once per process (cheap afterwards)
        self.n_workers = max(1, sum(client.nthreads().values()))
        self.data = client.scatter([kd, y, C], broadcast=True, hash=False)
        self.executor = client.get_executor(pure=False)
        self.stop_name = f"svmstream-dcsvm-stop-{secrets.token_hex(8)}"
        self._event = Event(self.stop_name, client=client)

    def submit(self, batch, spec: KernelSpec, eps, cache_mb, shrinking, max_iter):
        """One task: the sub-problems ``[(rows, alpha0), ...]`` of ``batch``."""
        kd_f, y_f, c_f = self.data
        return self.executor.submit(
            _solve_rows, kd_f, y_f, c_f, batch, spec, eps, cache_mb, shrinking, max_iter, self.stop_name
        )

    def stop(self) -> None:
        """Tell running tasks to stop (their ``should_stop`` sees the event)."""
        self._event.set()

    def close(self) -> None:
        """Release the scattered data; cancel the tasks not run yet.  (The stop event stays
        set after a cancel: running tasks see it at their next poll.)"""
        try:
            self.client.cancel(self.data)
        except Exception:  # noqa: BLE001 - the cluster may be gone already
            pass
        self.executor.shutdown(wait=False)
