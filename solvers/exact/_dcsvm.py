"""Multilevel divide-and-conquer kernel SVM (DC-SVM).

Hsieh, Si & Dhillon, "A Divide-and-Conquer Solver for Kernel Support Vector Machines",
ICML 2014, Algorithm 1, for the bias-free dual of eq. (1) (solved by
:func:`svmstream.solvers.exact._dual_cd.solve_dual`)::

    alpha = 0
    for l = l_max, ..., 1:                               # k^l clusters at level l
        sample m points (l = l_max: from all points; else from the current SVs: "adaptive
        clustering", §4) and run two-step kernel k-means  ->  clusters V_1..V_{k^l}
        solve every sub-problem on V_c warm-started from alpha restricted to V_c
        (independent: run through an executor, a process pool by default, or the tasks
        of a dask cluster: ``client``, see :mod:`svmstream.solvers.exact._dask`)
    refine: solve the problem restricted to the level-1 support vectors (warm start)
    solve the whole problem warm-started from alpha (the conquer step)

Early prediction (§4, eq. 11): after level l, a test point x is routed to its nearest
cluster centre pi(x) in feature space and predicted with that cluster's model,
``f(x) = sum_{j in V_pi(x)} alpha_j y_j k(x, x_j)`` (:class:`EarlyModel`).

Interface for a job runner
--------------------------
* :func:`dcsvm_fit` is a plain function of arrays; call it in any worker process.
* ``progress(dict)`` receives ``stage`` ("kmeans", "level", "refine", "global", "done"),
  ``level``, ``n_clusters``, ``objective``, ``max_violation``, ``elapsed`` (seconds since
  the start) and stage-specific counters.  During the level stages ``objective`` is the
  sum of the sub-problem dual objectives finished so far and ``max_violation`` their
  maximum; in the refine/global stages they are those of the solver (see
  :func:`svmstream.solvers.exact._dual_cd.solve_dual`).
* ``should_stop()`` is polled at least every ~0.1 s (between CD slices in this process,
  and while waiting for sub-problems); when it returns True, the default process pool's
  workers are told to stop through a shared flag and :class:`~svmstream.solvers.Cancelled`
  is raised.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import Cancelled
from ._dask import DaskLevels
from ._dual_cd import KernelDualResult, solve_dual, solve_many
from ._kernel_kmeans import KernelClusters, assign_clusters, two_step_kernel_kmeans
from ._kernels import KernelData, KernelSpec, kernel_matvec, with_single_thread_blas

__all__ = ["EarlyModel", "DCSVMResult", "SerialExecutor", "dcsvm_fit", "make_process_pool", "Cancelled"]

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
    """:func:`._dual_cd.solve_many` in a pool worker (``should_stop`` defaults to the worker's
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


# --------------------------------------------------------------------------- models
@dataclass
class EarlyModel:
    """DC-SVM early-prediction model of one level (Hsieh et al. 2014, eq. 11).

    Attributes
    ----------
    level : int
    clusters : KernelClusters
        The level's centres (sampled rows and their cluster labels).
    sv : KernelData
        Support vectors of all clusters, grouped by cluster.
    coef : ndarray of shape (n_sv,), float64
        ``alpha_j y_j`` of the support vectors.
    sv_ptr : ndarray of shape (n_clusters + 1,), int64
        Support vectors of cluster c are rows ``sv_ptr[c]:sv_ptr[c+1]``.
    """

    level: int
    clusters: KernelClusters
    sv: KernelData
    coef: np.ndarray
    sv_ptr: np.ndarray

    @with_single_thread_blas
    def decision_function(self, kd: KernelData, spec: KernelSpec) -> np.ndarray:
        """``f(x) = sum_{j in V_pi(x)} alpha_j y_j k(x, x_j)``, shape (n_rows,), float64."""
        labels, _ = assign_clusters(self.clusters, kd, spec)
        out = np.zeros(kd.n_samples)
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(self.clusters.n_clusters + 1))
        for c in range(self.clusters.n_clusters):
            rows = order[bounds[c] : bounds[c + 1]]
            lo, hi = self.sv_ptr[c], self.sv_ptr[c + 1]
            if rows.size and hi > lo:
                out[rows] = kernel_matvec(
                    kd, self.sv, spec, self.coef[lo:hi], rows=rows, cols=np.arange(lo, hi)
                )
        return out


@dataclass
class DCSVMResult:
    """Outcome of :func:`dcsvm_fit`.

    Attributes
    ----------
    alpha : ndarray of shape (n_samples,), float64
        Final dual variables (of the global problem, or of the last level run when the
        fit stopped early).
    exact : bool
        True if the global problem was solved (``alpha`` is the exact SVM solution to eps).
    objective : float
        Dual objective of the global problem (exact solve) or the sum of the last level's
        sub-problem objectives.
    max_violation : float
    early : dict[int, EarlyModel]
        Early-prediction models of the requested levels.
    history : list of dict
        One record per stage (level, n_clusters, seconds, n_sv, objective, ...).
    """

    alpha: np.ndarray
    exact: bool
    objective: float
    max_violation: float
    early: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    elapsed: float = 0.0
    global_result: KernelDualResult | None = None


def _early_model(level, clusters, labels, kd, y, alpha) -> EarlyModel:
    sv = np.flatnonzero(alpha > 0)
    order = sv[np.argsort(labels[sv], kind="stable")]
    ptr = np.searchsorted(labels[order], np.arange(clusters.n_clusters + 1)).astype(np.int64)
    return EarlyModel(
        level=level,
        clusters=clusters,
        sv=kd.take(order),
        coef=(alpha[order] * y[order]).astype(np.float64),
        sv_ptr=ptr,
    )


@with_single_thread_blas
def dcsvm_fit(
    kd: KernelData,
    y,
    spec: KernelSpec,
    C,
    *,
    k: int = 4,
    n_levels: int = 4,
    min_level: int = 1,
    n_sample: int = 1000,
    eps: float = 1e-3,
    level_eps: float | None = None,
    refine_eps: float | None = None,
    cache_mb: float = 200.0,
    shrinking: bool = True,
    refine: bool = True,
    early_levels=(),
    stop_level: int | None = None,
    max_iter: int | None = None,
    min_cluster_size: int = 8,
    executor: cf.Executor | None = None,
    stop_flag=None,
    client=None,
    n_jobs: int | None = None,
    parallel_min_samples: int = 5000,
    start_method: str = DEFAULT_START_METHOD,
    random_state=None,
    progress=None,
    should_stop=None,
) -> DCSVMResult:
    """Train a bias-free kernel SVM by multilevel DC-SVM (Hsieh et al. 2014, Algorithm 1).

    Parameters
    ----------
    kd : KernelData
        n training points.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    spec : KernelSpec
    C : float or ndarray of shape (n,)
        Box constraint(s), > 0.
    k : int
        Branching factor: level l has ``k**l`` clusters (capped at ``n // min_cluster_size``).
    n_levels : int
        l_max; levels run from ``n_levels`` down to ``min_level`` (0 = no levels: plain solve).
    min_level : int
        The last level solved before the refine step (default 1, the paper's Algorithm 1).
        With ``stop_level`` the levels run down to ``stop_level`` instead.
    n_sample : int
        m, points sampled for kernel k-means at every level.
    eps : float
        Stopping tolerance (maximal projected-gradient violation) of the global solve.
    level_eps, refine_eps : float, optional
        Tolerances of the level sub-problems and of the refine step (default ``eps``).
        Looser values only change the warm start, never the final accuracy.
    cache_mb : float
        Kernel cache in MB, shared out among the concurrently running workers.
    shrinking : bool
    refine : bool
        Solve on the level-1 support vectors before the global solve.
    early_levels : iterable of int
        Levels whose :class:`EarlyModel` is kept.
    stop_level : int, optional
        Stop after this level (no refine/global solve); the result is not exact.
    max_iter : int, optional
        Coordinate updates per solve (see :func:`solve_dual`).
    executor : concurrent.futures.Executor, optional
        Runs the sub-problems of a level (``submit``).  Default: a process pool of
        ``n_jobs`` workers created for this call (:func:`make_process_pool`), or in-process
        when ``n_jobs == 1`` or ``n < parallel_min_samples``.
    stop_flag : multiprocessing.Value, optional
        The stop flag of a pool made by :func:`make_process_pool` and passed as
        ``executor``; set on cancellation so that running sub-problems stop.
    client : distributed.Client, optional
        Run the sub-problems of every level on this dask cluster instead (``executor`` is
        then ignored): the data is scattered to the workers once per call, each task
        carries row indices and warm starts only (:class:`DaskLevels`).  Used when
        ``n >= parallel_min_samples`` and ``n_levels > 0``.
    n_jobs : int, optional
        Workers of the default pool (None = :func:`default_workers`: the available cores
        when there are at least ``POOL_MIN_CORES``, else in-process).
    start_method : str
        multiprocessing start method of the default pool.
    random_state : None, int or numpy.random.Generator
    progress, should_stop : callables, optional
        See the module docstring.

    Returns
    -------
    DCSVMResult

    Raises
    ------
    ValueError
        On invalid parameters (k < 2, n_levels < 0, min_level < 1, n_sample < 1).
    Cancelled
        When ``should_stop()`` returned True.
    """
    t0 = time.perf_counter()
    if k < 2 or n_levels < 0 or n_sample < 1 or min_level < 1:
        raise ValueError("need k >= 2, n_levels >= 0, min_level >= 1 and n_sample >= 1")
    rng = (
        random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    )
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = kd.n_samples
    Cb = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    alpha = np.zeros(n)
    early_levels = {int(v) for v in early_levels}
    level_eps = eps if level_eps is None else float(level_eps)
    refine_eps = eps if refine_eps is None else float(refine_eps)
    result = DCSVMResult(alpha=alpha, exact=False, objective=0.0, max_violation=np.inf)

    def report(d):
        if progress is not None:
            progress({**d, "elapsed": time.perf_counter() - t0})

    def check():
        if should_stop is not None and should_stop():
            raise Cancelled("DC-SVM cancelled")

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
    sub_cache = cache_mb / max(workers, 1)

    try:
        lowest = max(1, min(min_level, n_levels) if stop_level is None else min(stop_level, n_levels))
        for level in range(n_levels, lowest - 1, -1):
            check()
            tl = time.perf_counter()
            cl = time.process_time()
            n_clusters = int(min(k**level, max(1, n // max(min_cluster_size, 1))))
            sv = np.flatnonzero(alpha > 0)
            pool = sv if (level < n_levels and sv.size >= n_clusters) else np.arange(n)
            sample = pool if pool.size <= n_sample else rng.choice(pool, n_sample, replace=False)
            sample = np.sort(sample)
            report(
                {
                    "stage": "kmeans",
                    "level": level,
                    "n_clusters": n_clusters,
                    "objective": result.objective,
                    "max_violation": result.max_violation,
                }
            )
            labels, clusters = two_step_kernel_kmeans(
                kd,
                spec,
                n_clusters,
                sample,
                rng,
                progress=lambda step, done, total, level=level, k=n_clusters: report(
                    {
                        "stage": "kmeans",
                        "level": level,
                        "n_clusters": k,
                        "objective": result.objective,
                        "max_violation": result.max_violation,
                        "step": step,
                        "rows_done": done,
                        "rows": total,
                    }
                ),
            )
            t_kmeans = time.perf_counter() - tl
            c_kmeans = time.process_time() - cl
            n_found = clusters.n_clusters
            order = np.argsort(labels, kind="stable")
            bounds = np.searchsorted(labels[order], np.arange(n_found + 1))
            members = [order[bounds[c] : bounds[c + 1]] for c in range(n_found)]
            sizes = np.array([m.size for m in members], dtype=np.float64)
            n_bins = n_found if in_process else min(n_found, 4 * max(workers, 1))
            bins = _pack(sizes**2, n_bins)
            futures = {}
            if dask is not None:
                # the workers hold the data: send row indices and warm starts only
                for b in bins:
                    batch = [(members[i], alpha[members[i]]) for i in b]
                    futures[dask.submit(batch, spec, level_eps, sub_cache, shrinking, max_iter)] = b
            else:
                problems = [(kd.take(m), y[m], Cb[m], alpha[m]) for m in members]
                for b in bins:
                    fut = executor.submit(
                        _solve_batch,
                        [problems[i] for i in b],
                        spec,
                        level_eps,
                        sub_cache,
                        shrinking,
                        max_iter,
                        should_stop if in_process else None,
                    )
                    futures[fut] = b
                del problems
            obj_sum, viol_max, iters, done = 0.0, 0.0, 0, 0
            level_stats: dict = {}
            pending = set(futures)
            while pending:
                finished, pending = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_COMPLETED)
                if should_stop is not None and should_stop():
                    if stop_flag is not None:
                        stop_flag.value = 1
                    if dask is not None:
                        dask.stop()
                    for f in pending:
                        f.cancel()
                    raise Cancelled("DC-SVM cancelled")
                for f in finished:
                    for i, (a, obj, viol, it, st) in zip(futures[f], f.result()):
                        for key, v in st.items():
                            level_stats[key] = level_stats.get(key, 0) + v
                        alpha[members[i]] = a
                        obj_sum += obj
                        viol_max = max(viol_max, viol)
                        iters += it
                        done += 1
                    report(
                        {
                            "stage": "level",
                            "level": level,
                            "n_clusters": n_found,
                            "subproblems_done": done,
                            "subproblems": n_found,
                            "objective": obj_sum,
                            "max_violation": viol_max,
                        }
                    )
            n_sv = int(np.count_nonzero(alpha > 0))
            result.objective, result.max_violation = obj_sum, viol_max
            result.history.append(
                {
                    "stage": "level",
                    "level": level,
                    "n_clusters": n_found,
                    "kmeans_seconds": t_kmeans,
                    "seconds": time.perf_counter() - tl,
                    "kmeans_cpu_seconds": c_kmeans,
                    "cpu_seconds": time.process_time() - cl,
                    "n_sv": n_sv,
                    "objective_sum": obj_sum,
                    "max_violation": viol_max,
                    "iterations": iters,
                    "stats": level_stats,
                    "largest_cluster": int(sizes.max()),
                    "elapsed": time.perf_counter() - t0,
                }
            )
            if level in early_levels:
                result.early[level] = _early_model(level, clusters, labels, kd, y, alpha)
            if stop_level is not None and level <= stop_level:
                result.elapsed = time.perf_counter() - t0
                report({"stage": "done", "level": level, "objective": obj_sum, "max_violation": viol_max})
                return result
    finally:
        if own_pool is not None:
            own_pool.shutdown(wait=True, cancel_futures=True)
        if dask is not None:
            dask.close()

    grad_known = None  # rows whose global gradient at alpha is already exact
    if refine and n_levels > 0:
        check()
        tr = time.perf_counter()
        cr = time.process_time()
        sv = np.flatnonzero(alpha > 0)
        if sv.size:
            r = solve_dual(
                kd.take(sv),
                y[sv],
                spec,
                Cb[sv],
                alpha[sv],
                eps=refine_eps,
                cache_mb=cache_mb,
                shrinking=shrinking,
                max_iter=max_iter,
                should_stop=should_stop,
                progress=None
                if progress is None
                else (lambda d: report({**d, "stage_elapsed": d["elapsed"]})),
                info={"stage": "refine", "level": 0},
            )
            alpha[sv] = r.alpha
            # alpha is zero outside sv: the refine gradient is the global one on these rows
            grad_known = (sv, r.grad)
            result.history.append(
                {
                    "stage": "refine",
                    "n": int(sv.size),
                    "n_sv": r.n_support,
                    "seconds": time.perf_counter() - tr,
                    "cpu_seconds": time.process_time() - cr,
                    "stats": r.stats,
                    "iterations": r.n_iter,
                    "objective": r.objective,
                    "elapsed": time.perf_counter() - t0,
                }
            )
    check()
    tg = time.perf_counter()
    cg = time.process_time()
    r = solve_dual(
        kd,
        y,
        spec,
        Cb,
        alpha,
        grad0=grad_known,
        eps=eps,
        cache_mb=cache_mb,
        shrinking=shrinking,
        max_iter=max_iter,
        should_stop=should_stop,
        progress=None if progress is None else (lambda d: report({**d, "stage_elapsed": d["elapsed"]})),
        info={"stage": "global", "level": 0},
    )
    result.alpha = r.alpha
    result.exact = True
    result.objective = r.objective
    result.max_violation = r.max_violation
    result.global_result = r
    result.history.append(
        {
            "stage": "global",
            "n_sv": r.n_support,
            "seconds": time.perf_counter() - tg,
            "cpu_seconds": time.process_time() - cg,
            "iterations": r.n_iter,
            "objective": r.objective,
            "stats": r.stats,
            "elapsed": time.perf_counter() - t0,
        }
    )
    result.elapsed = time.perf_counter() - t0
    report({"stage": "done", "level": 0, "objective": r.objective, "max_violation": r.max_violation})
    return result
