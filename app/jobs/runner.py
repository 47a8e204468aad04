"""Batch training jobs (DC-SVM, AVSF, LIBLINEAR dual CD) in worker processes.

A job trains one of the batch solvers on a data file and registers the fitted estimator as
a servable model of the :class:`svmstream.app.models.registry.Registry`, where
``/predict``, snapshots and restore treat it like any other model (``/learn`` refuses it:
it does not learn online).

Process model
-------------
* One worker **process** per job (multiprocessing ``forkserver`` context by default, or
  ``spawn``; never ``fork``: the server process has threads).  The worker is started
  with ``daemon=False`` so that DC-SVM can run its own process pool for the level
  sub-problems (``n_jobs``; default :attr:`Settings.job_dcsvm_n_jobs`, None = all cores).
  The worker makes itself a process-group leader, so a cancelled job is killed together
  with its pool workers (``killpg``).
* The worker (:func:`svmstream.app.jobs.worker.worker_main`) receives the job as a plain
  dict (the **path** of the data, never arrays), loads the file itself
  (:func:`svmstream.app.jobs.datasets.load_dataset`: LIBSVM through
  :func:`sklearn.datasets.load_svmlight_file`, ``.bz2``/``.gz`` too, or CSV), fits, scores
  the optional test file, and writes the model with
  :func:`svmstream.solvers.persistence.encode_state` to
  ``<jobs_dir>/results/<job id>.svmstate`` (pickle-free).  Progress and the final
  outcome travel as small dicts over a one-way :func:`multiprocessing.Pipe` (no feeder
  thread in the worker, so DC-SVM's fork pool forks a single-threaded process).
* A supervisor thread per running job reads that pipe, keeps the job's latest progress
  and a per-stage timeline, and on the result decodes the file and registers the model.
  A worker that dies without an outcome (signal, ``os._exit``, out of memory) marks the job
  failed with its exit status; an exception in the worker marks it failed with the
  exception's message.
* Cancel: a :class:`multiprocessing.Event` read by the solver's ``should_stop`` callback
  (DC-SVM polls it about every 0.1 s, the linear solvers before every kernel call); if the
  worker has not exited :attr:`Settings.job_cancel_grace_s` (0.5 s) after the request, its
  process group is killed (SIGKILL).
* At most :attr:`Settings.max_concurrent_jobs` (default 1) workers run at once; further
  jobs wait in a FIFO queue.

Job records live in this process's memory (the newest :attr:`Settings.job_history`
finished ones are kept); the models they produced persist through snapshots.

Layout: :class:`JobRunner` (this module: validation, queue, records, cancel),
:mod:`svmstream.app.jobs.job` (a job's record and states),
:mod:`svmstream.app.jobs.supervisor` (one running job's worker process and its result),
:mod:`svmstream.app.jobs.worker` (the worker process: load, fit, score),
:mod:`svmstream.app.jobs.datasets` (the data files) and :mod:`svmstream.app.jobs.uploads`
(uploaded files, data references, :class:`~svmstream.app.jobs.uploads.JobError`).

See ``docs/jobs.md``.
"""

from __future__ import annotations

import collections
import logging
import multiprocessing as mp
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from svmstream.app.jobs.dask_jobs import DaskSupervisor, close_clients
from svmstream.app.jobs.job import FINISHED, MAX_TIMELINE, Job, JobState
from svmstream.app.jobs.search import prepare_search
from svmstream.app.jobs.supervisor import WorkerSupervisor, exit_reason, register_result
from svmstream.app.jobs.uploads import JobError, UploadStore, resolve_data_ref
from svmstream.app.models.config import MODEL_NAME_RE
from svmstream.app.models.factory import make_job_estimator

if TYPE_CHECKING:  # pragma: no cover
    from svmstream.app.models.registry import Registry
    from svmstream.app.settings import Settings

log = logging.getLogger("svmstream.jobs")


class JobRunner:
    """Queue, worker processes and supervisors of the batch jobs of one server.

    Parameters
    ----------
    settings : Settings
        ``data_dir``, ``jobs_dir``, ``max_concurrent_jobs``, ``max_queued_jobs``,
        ``job_start_method``, ``job_cancel_grace_s``, ``job_history``,
        ``job_dcsvm_n_jobs``.
    registry : Registry
        Where finished jobs register their models.
    """

    def __init__(self, settings: Settings, registry: Registry):
        self.settings = settings
        self.registry = registry
        self.jobs_dir = Path(settings.jobs_dir)
        self.results_dir = self.jobs_dir / "results"
        self.uploads = UploadStore(self.jobs_dir / "uploads")
        self._jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self._queue: collections.deque[Job] = collections.deque()
        self._running: dict[str, threading.Thread] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._ctx = mp.get_context(settings.job_start_method)
        if settings.job_start_method == "forkserver":
            # imported once in the fork server; every worker forks with them loaded
            self._ctx.set_forkserver_preload(["svmstream.app.jobs.worker", "sklearn.datasets"])
        self._clean_results()

    def _clean_results(self) -> None:
        if self.results_dir.is_dir():
            for entry in self.results_dir.glob("*.svmstate*"):
                entry.unlink(missing_ok=True)

    # ------------------------------------------------------------------ public API
    def submit(
        self,
        algorithm: str,
        data: str,
        model: str,
        *,
        test: str | None = None,
        params: dict[str, Any] | None = None,
        early_level: int | None = None,
        replace: bool = False,
        estimator: str | None = None,
        grid: dict[str, Any] | None = None,
        cv: int = 3,
        random_state: int = 0,
    ) -> Job:
        """Validate and queue a job.

        ``algorithm="search"`` queues a model search (:mod:`svmstream.app.jobs.search`):
        ``estimator``, ``grid``, ``cv`` and the folds' ``random_state``; ``params`` are then
        the fixed parameters of every candidate (model fields for ``bsgd``/``bsca``).

        Returns
        -------
        Job
            In state ``queued`` (or ``running`` if a worker slot was free).

        Raises
        ------
        JobError
            422 invalid algorithm/parameters/model name; 403/404 for ``data``/``test``
            (see :func:`resolve_data_ref`); 409 when the model exists and ``replace`` is
            false, or another active job trains the same model; 503 when the queue is full
            or the server is shutting down.
        """
        params = dict(params or {})
        search = None
        if algorithm == "search":
            search = self._check_search(estimator, grid, cv, random_state, params, early_level, model)
        else:
            for name, value in (("estimator", estimator), ("grid", grid)):
                if value is not None:
                    raise JobError(f'{name}: only for "algorithm": "search"', field=name)
            self._check_request(algorithm, params, early_level, model)
        data_path, data_fmt = resolve_data_ref(data, "data", self.settings.data_dir, self.uploads)
        test_path = test_fmt = None
        if test:
            test_path, test_fmt = resolve_data_ref(test, "test", self.settings.data_dir, self.uploads)
        with self._lock:
            self._check_admission(model, replace)
            job_id = secrets.token_hex(8)
            task = {
                "algorithm": algorithm,
                "data": str(data_path),
                "data_format": data_fmt,
                "test": None if test_path is None else str(test_path),
                "test_format": test_fmt,
                "params": params,
                "early_level": early_level,
                "default_n_jobs": self.settings.job_dcsvm_n_jobs,
                "out_path": str(self.results_dir / f"{job_id}.svmstate"),
                **({} if search is None else search["task"]),
            }
            job = Job(
                id=job_id,
                algorithm=algorithm,
                model=model,
                data=data,
                test=test,
                params=params,
                early_level=early_level,
                replace=replace,
                task=task,
                search=None if search is None else search["record"],
            )
            self._jobs[job_id] = job
            self._queue.append(job)
            self._prune()
            log.info("job %s: queued (%s on %s -> model %r)", job_id, algorithm, data, model)
            self._dispatch()
        return job

    def _check_request(
        self, algorithm: str, params: dict[str, Any], early_level: int | None, model: str
    ) -> None:
        """422 for invalid parameters (checked by the estimator itself) or model name."""
        try:
            make_job_estimator(algorithm, params, early_level, default_n_jobs=self.settings.job_dcsvm_n_jobs)
        except ValueError as exc:
            raise JobError(f"params: {exc}", field="params") from None
        if not MODEL_NAME_RE.fullmatch(model or ""):
            raise JobError(
                f"model: invalid model name {model!r}: use 1-64 characters [A-Za-z0-9_.-], "
                "starting alphanumeric",
                field="model",
            )

    def _check_search(
        self,
        estimator: str | None,
        grid: Any,
        cv: Any,
        random_state: Any,
        params: dict[str, Any],
        early_level: int | None,
        model: str,
    ) -> dict[str, Any]:
        """422 for an invalid search (estimator, grid, cv, params, model name); returns
        :func:`svmstream.app.jobs.search.prepare_search`'s task fields and record."""
        if not MODEL_NAME_RE.fullmatch(model or ""):
            self._check_request("dcsvm", {}, None, model)  # words the model-name error
        if early_level is not None:
            raise JobError("early_level: not for search jobs (put it in params)", field="early_level")
        return prepare_search(
            estimator,
            grid,
            cv,
            random_state,
            params,
            resolve_config=self.registry.resolve_config,
            n_jobs=self.settings.job_dcsvm_n_jobs,
        )

    def _check_admission(self, model: str, replace: bool) -> None:
        """503 when shutting down or the queue is full; 409 when the model exists (and not
        ``replace``) or another active job trains it.  Called with the lock held."""
        if self._closed:
            raise JobError("the server is shutting down; no new jobs", field=None, status=503)
        if model in self.registry and not replace:
            raise JobError(
                f'model: model {model!r} exists; pass "replace": true to replace it with the job\'s result',
                field="model",
                status=409,
            )
        for other in self._jobs.values():
            if other.model == model and other.state in (JobState.QUEUED, JobState.RUNNING):
                raise JobError(
                    f"model: job {other.id} is already training model {model!r}",
                    field="model",
                    status=409,
                )
        if len(self._queue) >= self.settings.max_queued_jobs:
            raise JobError(f"{len(self._queue)} jobs are queued already; retry later", field=None, status=503)

    def get(self, job_id: str) -> Job:
        """Raises :class:`JobError` (404)."""
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError(f"job {job_id!r} not found", field=None, status=404)
        return job

    def list(self) -> list[Job]:
        """All known jobs, newest first."""
        with self._lock:
            return list(reversed(self._jobs.values()))

    def to_json(self, job: Job) -> dict[str, Any]:
        with self._lock:
            return job.to_json()

    def cancel(self, job_id: str, wait: float | None = None) -> Job:
        """Cancel a queued or running job; returns it once it has stopped.

        A queued job is dropped at once.  A running job's stop event is set; its
        supervisor kills the worker's process group if it has not exited
        ``job_cancel_grace_s`` later.  This call waits for that (at most ``wait`` seconds,
        default grace + 10 s).

        Raises
        ------
        JobError
            404 unknown job; 409 when the job has already finished.
        """
        job = self.get(job_id)
        with self._lock:
            if job.state in FINISHED:
                raise JobError(f"job {job_id} already {job.state.value}", field=None, status=409)
            if job._cancel_requested is None:
                job._cancel_requested = time.monotonic()
                job.cancel = {"requested_at": time.time(), "stopped_after_s": None, "killed": False}
            if job.state == JobState.QUEUED:
                self._queue.remove(job)
                self._finish(job, JobState.CANCELLED, error=None)
                return job
            if job._stop_event is not None:
                job._stop_event.set()
        job._done.wait(self.settings.job_cancel_grace_s + 10.0 if wait is None else wait)
        return job

    def stop(self) -> None:
        """Server shutdown: drop queued jobs and cancel (at worst kill) running ones."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            running = [j for j in self._jobs.values() if j.state == JobState.RUNNING]
        for job in queued + running:
            try:
                self.cancel(job.id)
            except JobError:
                pass
        for thread in list(self._running.values()):
            thread.join(timeout=self.settings.job_cancel_grace_s + 10.0)
        if self.settings.dask_address:
            close_clients()

    # ------------------------------------------------------------------ internals
    def _prune(self) -> None:
        finished = [j for j in self._jobs.values() if j.state in FINISHED]
        for job in finished[: max(0, len(finished) - self.settings.job_history)]:
            del self._jobs[job.id]

    def _dispatch(self) -> None:
        with self._lock:
            while self._queue and len(self._running) < self.settings.max_concurrent_jobs and not self._closed:
                job = self._queue.popleft()
                job.state = JobState.RUNNING
                job.stage = "starting"
                job.started_at = time.time()
                thread = threading.Thread(
                    target=self._supervise, args=(job,), name=f"job-{job.id}", daemon=True
                )
                self._running[job.id] = thread
                thread.start()

    def _finish(self, job: Job, state: JobState, *, error: str | None) -> None:
        with self._lock:
            job.state = state
            job.error = error
            job.finished_at = time.time()
            job.stage = "done" if state == JobState.SUCCEEDED else state.value
            if state == JobState.CANCELLED:
                if job.cancel is not None and job._cancel_requested is not None:
                    job.cancel["stopped_after_s"] = round(time.monotonic() - job._cancel_requested, 4)
            self._running.pop(job.id, None)
            job._stop_event = None  # release the semaphores of the event and the process handle
            job._process = None
        job._done.set()
        level = logging.INFO if state == JobState.SUCCEEDED else logging.WARNING
        log.log(level, "job %s: %s%s", job.id, state.value, f" ({error})" if error else "")
        self._dispatch()

    def _on_message(self, job: Job, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        with self._lock:
            if kind == "started":
                job.pid = msg.get("pid")
            elif kind == "stage":
                job.stage = msg["stage"]
                self._timeline(job, {"stage": msg["stage"]}, msg.get("time"))
            elif kind == "progress":
                report = msg["progress"]
                job.progress = report
                self._timeline(job, report, msg.get("time"))

    def _timeline(self, job: Job, report: dict[str, Any], at: float | None) -> None:
        """One timeline entry per (problem, stage, level); the latest figures overwrite."""
        key = (report.get("problem"), report.get("stage"), report.get("level"))
        t = round((at or time.time()) - (job.started_at or job.created_at), 3)
        entry = {
            k: report[k]
            for k in (
                "problem",
                "n_problems",
                "stage",
                "level",
                "n_clusters",
                "objective",
                "max_violation",
                "subproblems_done",
                "subproblems",
                "iteration",
                "iterations",
                "n_steps",
                "selection",
            )
            if report.get(k) is not None
        }
        last = job.timeline[-1] if job.timeline else None
        if last is not None and (last.get("problem"), last.get("stage"), last.get("level")) == key:
            last.update(entry)
            last["last_s"] = t
        elif len(job.timeline) < MAX_TIMELINE:
            job.timeline.append({**entry, "start_s": t, "last_s": t})

    def _supervise(self, job: Job) -> None:
        """Supervisor thread: run the worker (:class:`WorkerSupervisor`), then finish the job."""
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            if self.settings.dask_address:
                supervisor = DaskSupervisor(
                    job,
                    self.settings.dask_address,
                    self._lock,
                    self._on_message,
                    self.settings.job_cancel_grace_s,
                )
            else:
                supervisor = WorkerSupervisor(
                    job, self._ctx, self._lock, self._on_message, self.settings.job_cancel_grace_s
                )
            outcome = supervisor.run()
        except Exception as exc:  # noqa: BLE001 - the job fails, the server stays up
            log.exception("job %s: supervisor error", job.id)
            self._finish(job, JobState.FAILED, error=f"job runner error: {type(exc).__name__}: {exc}")
            return
        self._conclude(job, outcome)

    def _conclude(self, job: Job, outcome: dict[str, Any] | None) -> None:
        out_path = Path(job.task["out_path"])
        try:
            if job._cancel_requested is not None:
                self._finish(job, JobState.CANCELLED, error=None)
                return
            if outcome is None:
                self._finish(job, JobState.FAILED, error=exit_reason(job.exitcode))
                return
            if outcome["type"] == "cancelled":  # the worker stopped on its own (server went away)
                self._finish(job, JobState.CANCELLED, error=None)
                return
            if outcome["type"] == "error":
                with self._lock:
                    job.error_traceback = outcome.get("traceback")
                self._finish(job, JobState.FAILED, error=outcome.get("error") or "worker error")
                return
            try:
                result = register_result(self.registry, job, outcome["result"], out_path)
            except Exception as exc:  # noqa: BLE001
                log.exception("job %s: registering the model failed", job.id)
                self._finish(
                    job,
                    JobState.FAILED,
                    error=f"registering model {job.model!r} failed: {type(exc).__name__}: {exc}",
                )
                return
            with self._lock:
                job.result = result
            self._finish(job, JobState.SUCCEEDED, error=None)
        finally:
            out_path.unlink(missing_ok=True)
