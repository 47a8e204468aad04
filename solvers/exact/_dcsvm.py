"""Multilevel divide-and-conquer kernel SVM (DC-SVM).

Hsieh, Si & Dhillon, "A Divide-and-Conquer Solver for Kernel Support Vector Machines",
ICML 2014, Algorithm 1, for the bias-free dual of eq. (1) (solved by
:func:`svmstream.solvers.exact._dual_solve.solve_dual`)::

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
  :func:`svmstream.solvers.exact._dual_solve.solve_dual`).
* ``should_stop()`` is polled at least every ~0.1 s (between CD slices in this process,
  and while waiting for sub-problems); when it returns True, the default process pool's
  workers are told to stop through a shared flag and :class:`~svmstream.solvers.Cancelled`
  is raised.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import Cancelled
from ._dcsvm_levels import FitRun, run_level, solve_global
from ._dcsvm_levels import refine as refine_phase
from ._dual_solve import KernelDualResult
from ._kernel_kmeans import KernelClusters, assign_clusters
from ._kernels import KernelData, KernelSpec, kernel_matvec, with_single_thread_blas
from ._pool import (
    DEFAULT_START_METHOD,
    POOL_MIN_CORES,
    SerialExecutor,
    available_cores,
    default_workers,
    level_executor,
    make_process_pool,
)

__all__ = [
    "DEFAULT_START_METHOD",
    "POOL_MIN_CORES",
    "Cancelled",
    "DCSVMResult",
    "EarlyModel",
    "SerialExecutor",
    "available_cores",
    "dcsvm_fit",
    "default_workers",
    "make_process_pool",
]


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


@dataclass(frozen=True)
class DCSVMOptions:
    """The options of :func:`dcsvm_fit` (its keyword arguments).

    Attributes
    ----------
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
        Coordinate updates per solve (see :func:`._dual_solve.solve_dual`).
    min_cluster_size : int
        Smallest mean cluster size a level's cluster count allows.
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
        carries row indices and warm starts only (:class:`._dask.DaskLevels`).  Used when
        ``n >= parallel_min_samples`` and ``n_levels > 0``.
    n_jobs : int, optional
        Workers of the default pool (None = :func:`default_workers`: the available cores
        when there are at least ``POOL_MIN_CORES``, else in-process).
    parallel_min_samples : int
        Fewer rows than this: in-process (a pool costs more than it saves).
    start_method : str
        multiprocessing start method of the default pool.
    random_state : None, int or numpy.random.Generator
    progress, should_stop : callables, optional
        See the module docstring.
    """

    k: int = 4
    n_levels: int = 4
    min_level: int = 1
    n_sample: int = 1000
    eps: float = 1e-3
    level_eps: float | None = None
    refine_eps: float | None = None
    cache_mb: float = 200.0
    shrinking: bool = True
    refine: bool = True
    early_levels: tuple = ()
    stop_level: int | None = None
    max_iter: int | None = None
    min_cluster_size: int = 8
    executor: cf.Executor | None = None
    stop_flag: object = None
    client: object = None
    n_jobs: int | None = None
    parallel_min_samples: int = 5000
    start_method: str = DEFAULT_START_METHOD
    random_state: object = None
    progress: object = None
    should_stop: object = None

    def settings(self) -> dict:
        """What the phases read (:class:`._dcsvm_levels.FitRun` ``settings``)."""
        eps = self.eps
        return {
            "k": self.k,
            "n_levels": self.n_levels,
            "n_sample": self.n_sample,
            "min_cluster_size": self.min_cluster_size,
            "eps": eps,
            "level_eps": eps if self.level_eps is None else float(self.level_eps),
            "refine_eps": eps if self.refine_eps is None else float(self.refine_eps),
            "cache_mb": self.cache_mb,
            "shrinking": self.shrinking,
            "max_iter": self.max_iter,
            "early_levels": {int(v) for v in self.early_levels},
        }


@with_single_thread_blas
def dcsvm_fit(kd: KernelData, y, spec: KernelSpec, C, **options) -> DCSVMResult:
    """Train a bias-free kernel SVM by multilevel DC-SVM (Hsieh et al. 2014, Algorithm 1).

    ``kd`` (:class:`KernelData`) holds the n training points, ``y`` (n,) their labels in
    {-1, +1}, ``C`` a float or (n,) array of box constraints (> 0); ``options`` are the
    fields of :class:`DCSVMOptions` (keyword arguments: ``k``, ``n_levels``, ``executor``,
    ``progress``, ...).  Phases in :mod:`._dcsvm_levels`: the levels, refine, global.

    Returns
    -------
    DCSVMResult

    Raises
    ------
    ValueError
        On invalid parameters (k < 2, n_levels < 0, min_level < 1, n_sample < 1).
    TypeError
        On an unknown option.
    Cancelled
        When ``should_stop()`` returned True.
    """
    t0 = time.perf_counter()
    o = DCSVMOptions(**options)
    if o.k < 2 or o.n_levels < 0 or o.n_sample < 1 or o.min_level < 1:
        raise ValueError("need k >= 2, n_levels >= 0, min_level >= 1 and n_sample >= 1")
    random_state = o.random_state
    rng = (
        random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    )
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, n_levels = kd.n_samples, o.n_levels
    Cb = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    alpha = np.zeros(n)
    result = DCSVMResult(alpha=alpha, exact=False, objective=0.0, max_violation=np.inf)
    run = FitRun(kd, y, spec, Cb, alpha, result, rng, o.settings(), o.progress, o.should_stop, t0)

    def early_model(level, clusters, labels):
        return _early_model(level, clusters, labels, kd, y, alpha)

    ex = level_executor(
        kd, y, Cb, n_levels, client=o.client, executor=o.executor, stop_flag=o.stop_flag, n_jobs=o.n_jobs,
        parallel_min_samples=o.parallel_min_samples, start_method=o.start_method,
    )  # fmt: skip
    stop_level = o.stop_level
    try:
        lowest = max(1, min(o.min_level, n_levels) if stop_level is None else min(stop_level, n_levels))
        for level in range(n_levels, lowest - 1, -1):
            run_level(run, ex, level, early_model)
            if stop_level is not None and level <= stop_level:
                return _done(run, level)
    finally:
        ex.close()
    solve_global(run, refine_phase(run) if (o.refine and n_levels > 0) else None)
    return _done(run, 0)


def _done(run: FitRun, level: int) -> DCSVMResult:
    """The result, its elapsed time set and the "done" progress report sent."""
    result = run.result
    result.elapsed = time.perf_counter() - run.t0
    run.report(
        {
            "stage": "done",
            "level": level,
            "objective": result.objective,
            "max_violation": result.max_violation,
        }
    )
    return result
