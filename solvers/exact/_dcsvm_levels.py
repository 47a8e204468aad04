"""The phases of one DC-SVM call (:func:`._dcsvm.dcsvm_fit`): its run state, the levels
(cluster, solve the sub-problems, collect), the refine step and the global solve.

Hsieh, Si & Dhillon (ICML 2014), Algorithm 1: level l clusters a sample of m points (level
l_max: of all points; below: of the current support vectors) into k^l clusters by two-step
kernel k-means and solves every cluster's sub-problem warm-started from alpha; the refine
step solves the problem restricted to the level-1 support vectors; the global solve is the
conquer step.  Each phase appends its record to ``result.history`` and reports ``progress``.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import Cancelled
from ._dual_solve import solve_dual
from ._kernel_kmeans import two_step_kernel_kmeans
from ._kernels import KernelData, KernelSpec
from ._pool import LevelExecutor, _pack, _solve_batch


@dataclass
class FitRun:
    """What the phases of one :func:`._dcsvm.dcsvm_fit` call share: the problem (``kd``,
    ``y``, box ``Cb``), the dual variables ``alpha`` they update in place, the result they
    fill, the generator, the settings and the caller's ``progress``/``should_stop``."""

    kd: KernelData
    y: np.ndarray
    spec: KernelSpec
    Cb: np.ndarray
    alpha: np.ndarray
    result: object
    rng: np.random.Generator
    settings: dict
    progress: object = None
    should_stop: object = None
    t0: float = field(default_factory=time.perf_counter)

    def report(self, d):
        if self.progress is not None:
            self.progress({**d, "elapsed": time.perf_counter() - self.t0})

    def check(self):
        if self.should_stop is not None and self.should_stop():
            raise Cancelled("DC-SVM cancelled")

    def solver_progress(self):
        """``progress`` for :func:`._dual_solve.solve_dual` (its elapsed as ``stage_elapsed``)."""
        if self.progress is None:
            return None
        return lambda d: self.report({**d, "stage_elapsed": d["elapsed"]})


def _cluster(run: FitRun, level: int):
    """Two-step kernel k-means of level ``level`` on a sample (adaptive clustering, §4):
    ``(labels, clusters, n_clusters asked)``."""
    s, n = run.settings, run.kd.n_samples
    n_clusters = int(min(s["k"] ** level, max(1, n // max(s["min_cluster_size"], 1))))
    sv = np.flatnonzero(run.alpha > 0)
    pool = sv if (level < s["n_levels"] and sv.size >= n_clusters) else np.arange(n)
    sample = pool if pool.size <= s["n_sample"] else run.rng.choice(pool, s["n_sample"], replace=False)
    sample = np.sort(sample)
    result = run.result
    base = {"stage": "kmeans", "level": level, "n_clusters": n_clusters}
    run.report({**base, "objective": result.objective, "max_violation": result.max_violation})
    labels, clusters = two_step_kernel_kmeans(
        run.kd,
        run.spec,
        n_clusters,
        sample,
        run.rng,
        progress=lambda step, done, total, level=level, k=n_clusters: run.report(
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
    return labels, clusters


def _submit(run: FitRun, ex: LevelExecutor, members, sizes):
    """The level's sub-problems, packed into batches, submitted: ``{future: batch indices}``."""
    s = run.settings
    n_found = len(members)
    n_bins = n_found if ex.in_process else min(n_found, 4 * max(ex.workers, 1))
    bins = _pack(sizes**2, n_bins)
    sub_cache = s["cache_mb"] / max(ex.workers, 1)
    solver = (run.spec, s["level_eps"], sub_cache, s["shrinking"], s["max_iter"])
    futures = {}
    if ex.dask is not None:
        # the workers hold the data: send row indices and warm starts only
        for b in bins:
            batch = [(members[i], run.alpha[members[i]]) for i in b]
            futures[ex.dask.submit(batch, *solver)] = b
        return futures
    problems = [(run.kd.take(m), run.y[m], run.Cb[m], run.alpha[m]) for m in members]
    stop = run.should_stop if ex.in_process else None
    for b in bins:
        futures[ex.executor.submit(_solve_batch, [problems[i] for i in b], *solver, stop)] = b
    return futures


def _collect(run: FitRun, ex: LevelExecutor, futures, members, level):
    """Wait for the level's sub-problems, writing each one's alpha as it finishes (polling
    ``should_stop``, Cancelled then): ``(objective sum, max violation, iterations, stats)``."""
    n_found = len(members)
    obj_sum, viol_max, iters, done = 0.0, 0.0, 0, 0
    level_stats: dict = {}
    pending = set(futures)
    while pending:
        finished, pending = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_COMPLETED)
        if run.should_stop is not None and run.should_stop():
            ex.cancel(pending)
            raise Cancelled("DC-SVM cancelled")
        for f in finished:
            for i, (a, obj, viol, it, st) in zip(futures[f], f.result()):
                for key, v in st.items():
                    level_stats[key] = level_stats.get(key, 0) + v
                run.alpha[members[i]] = a
                obj_sum += obj
                viol_max = max(viol_max, viol)
                iters += it
                done += 1
            run.report(
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
    return obj_sum, viol_max, iters, level_stats


def run_level(run: FitRun, ex: LevelExecutor, level: int, early_model):
    """Level ``level``: cluster, solve every cluster's sub-problem, record the level (and its
    early-prediction model, ``early_model(level, clusters, labels)``, if asked for)."""
    run.check()
    tl, cl = time.perf_counter(), time.process_time()
    labels, clusters = _cluster(run, level)
    t_kmeans, c_kmeans = time.perf_counter() - tl, time.process_time() - cl
    n_found = clusters.n_clusters
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_found + 1))
    members = [order[bounds[c] : bounds[c + 1]] for c in range(n_found)]
    sizes = np.array([m.size for m in members], dtype=np.float64)
    futures = _submit(run, ex, members, sizes)
    obj_sum, viol_max, iters, level_stats = _collect(run, ex, futures, members, level)
    result = run.result
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
            "n_sv": int(np.count_nonzero(run.alpha > 0)),
            "objective_sum": obj_sum,
            "max_violation": viol_max,
            "iterations": iters,
            "stats": level_stats,
            "largest_cluster": int(sizes.max()),
            "elapsed": time.perf_counter() - run.t0,
        }
    )
    if level in run.settings["early_levels"]:
        result.early[level] = early_model(level, clusters, labels)


def refine(run: FitRun):
    """The refine step: the problem restricted to the current support vectors, warm-started;
    returns ``(rows, gradient)`` there (alpha is zero elsewhere, so it is the global gradient
    on these rows), or None without support vectors."""
    s = run.settings
    run.check()
    tr, cr = time.perf_counter(), time.process_time()
    sv = np.flatnonzero(run.alpha > 0)
    if not sv.size:
        return None
    r = solve_dual(
        run.kd.take(sv),
        run.y[sv],
        run.spec,
        run.Cb[sv],
        run.alpha[sv],
        eps=s["refine_eps"],
        cache_mb=s["cache_mb"],
        shrinking=s["shrinking"],
        max_iter=s["max_iter"],
        should_stop=run.should_stop,
        progress=run.solver_progress(),
        info={"stage": "refine", "level": 0},
    )
    run.alpha[sv] = r.alpha
    run.result.history.append(
        {
            "stage": "refine",
            "n": int(sv.size),
            "n_sv": r.n_support,
            "seconds": time.perf_counter() - tr,
            "cpu_seconds": time.process_time() - cr,
            "stats": r.stats,
            "iterations": r.n_iter,
            "objective": r.objective,
            "elapsed": time.perf_counter() - run.t0,
        }
    )
    return sv, r.grad


def solve_global(run: FitRun, grad_known):
    """The conquer step: the whole problem warm-started from alpha (``grad_known``: rows whose
    gradient is already exact); fills the result (exact)."""
    s = run.settings
    run.check()
    tg, cg = time.perf_counter(), time.process_time()
    r = solve_dual(
        run.kd,
        run.y,
        run.spec,
        run.Cb,
        run.alpha,
        grad0=grad_known,
        eps=s["eps"],
        cache_mb=s["cache_mb"],
        shrinking=s["shrinking"],
        max_iter=s["max_iter"],
        should_stop=run.should_stop,
        progress=run.solver_progress(),
        info={"stage": "global", "level": 0},
    )
    result = run.result
    result.alpha, result.exact, result.global_result = r.alpha, True, r
    result.objective, result.max_violation = r.objective, r.max_violation
    result.history.append(
        {
            "stage": "global",
            "n_sv": r.n_support,
            "seconds": time.perf_counter() - tg,
            "cpu_seconds": time.process_time() - cg,
            "iterations": r.n_iter,
            "objective": r.objective,
            "stats": r.stats,
            "elapsed": time.perf_counter() - run.t0,
        }
    )
