"""Job parameters bounded by the machine (docs/service.md, bounds against abuse): DC-SVM ``n_jobs``, ``k`` and ``cache_size``.

The estimators check that a parameter is valid (``n_jobs`` a positive integer, ``k >= 2``,
``cache_size > 0``) but not that the machine can afford it: ``"n_jobs": 48`` started 48
pool processes on 2 cores.  :func:`check_job_bounds` refuses, with a 422 naming the field,

* ``n_jobs`` above the cores this process may run on (``os.sched_getaffinity``, else
  ``os.cpu_count()``) -- in the job's ``params``, in a search's ``grid``, or the server's
  ``SVMSTREAM_JOB_DCSVM_N_JOBS`` default (not with ``SVMSTREAM_DASK_ADDRESS``: there
  ``n_jobs`` is the cluster's parallelism, docs/dask.md);
* ``k`` above ``SVMSTREAM_JOB_MAX_K`` (clusters per level: k^levels sub-problems);
* ``cache_size`` above ``SVMSTREAM_JOB_MAX_CACHE_MB`` (the kernel cache of every
  sub-problem solver, per pool process).

:func:`worker_n_jobs` is the same bound again in the worker process, so that a task which
got past the check some other way (an older queued task, a changed machine) still never
starts a larger pool.
"""

from __future__ import annotations

import os
from typing import Any

from svmstream.app.jobs.uploads import JobError


def machine_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _check_n_jobs(value: Any, field: str, cores: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobError(f"{field}: must be null or an integer >= 1, got {value!r}", field=field)
    if value > cores:
        raise JobError(
            f"{field}: {value} pool processes exceed the {cores} cores of this machine "
            f"(n_jobs <= os.cpu_count() = {cores})",
            field=field,
        )


def _check_max(value: Any, field: str, bound: float, setting: str) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > bound:
        raise JobError(f"{field}: {value!r} exceeds {setting} = {bound:g}", field=field)


def check_job_bounds(
    params: dict[str, Any],
    settings: Any,
    *,
    grid: dict[str, Any] | None = None,
    cores: int | None = None,
) -> None:
    """Raise :class:`JobError` (422) naming ``params.<name>`` or ``grid.<name>`` for a
    parameter beyond the machine (module docstring)."""
    cores = machine_cores() if cores is None else cores
    if getattr(settings, "dask_address", None):  # n_jobs then means the cluster's parallelism
        cores = 1 << 30
    _check_n_jobs(settings.job_dcsvm_n_jobs, "SVMSTREAM_JOB_DCSVM_N_JOBS", cores)
    candidates = [("params", params or {})]
    if isinstance(grid, dict):
        for name, values in grid.items():
            if isinstance(values, list):
                candidates.extend(("grid", {name: v}) for v in values)
    for prefix, values in candidates:
        if "n_jobs" in values:
            _check_n_jobs(values["n_jobs"], f"{prefix}.n_jobs", cores)
        if "k" in values:
            _check_max(values["k"], f"{prefix}.k", settings.job_max_k, "SVMSTREAM_JOB_MAX_K")
        if "cache_size" in values:
            _check_max(
                values["cache_size"],
                f"{prefix}.cache_size",
                settings.job_max_cache_mb,
                "SVMSTREAM_JOB_MAX_CACHE_MB",
            )


def worker_n_jobs(value: int | None) -> int | None:
    """``n_jobs`` as a worker runs it: never more than the cores it may use."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return value
    return min(value, machine_cores())
