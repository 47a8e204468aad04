"""The server side of one running batch job: its worker process, and its result.

:class:`WorkerSupervisor` starts the worker (:func:`svmstream.app.jobs.worker.worker_main`)
in its own process, relays its progress messages into the job record, kills its process
group ``job_cancel_grace_s`` after a cancel request, and reaps it; :func:`exit_reason` words
the end of a worker that reported nothing; :func:`register_result` makes the model the
worker wrote a servable model of the registry.  The queue and the job records are
:class:`svmstream.app.jobs.runner.JobRunner`'s.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from svmstream.app.jobs.worker import worker_main
from svmstream.solvers.persistence import decode_state, estimator_from_state

if TYPE_CHECKING:  # pragma: no cover
    from svmstream.app.jobs.job import Job
    from svmstream.app.models.registry import Registry

log = logging.getLogger("svmstream.jobs")


class WorkerSupervisor:
    """The worker process of one job (used by the job's supervisor thread).

    Parameters
    ----------
    job : Job
    ctx : multiprocessing context
        ``forkserver`` or ``spawn``.
    lock : threading.RLock
        The runner's lock, held while the job record changes.
    on_message : callable(Job, dict)
        Takes the worker's ``started``/``stage``/``progress`` messages.
    grace_s : float
        Seconds between a cancel request and the kill.
    """

    def __init__(
        self, job: Job, ctx, lock, on_message: Callable[[Job, dict[str, Any]], None], grace_s: float
    ):
        self.job = job
        self.ctx = ctx
        self.lock = lock
        self.on_message = on_message
        self.grace_s = grace_s

    def run(self) -> dict[str, Any] | None:
        """Start the worker, relay its messages until it exits, reap its process group.

        Returns the worker's outcome message (``result``, ``cancelled`` or ``error``), or
        None when it exited without one (``job.exitcode`` says how)."""
        proc = None
        reader = None
        try:
            proc, reader = self._start()
            outcome = self._relay(proc, reader)
            proc.join(timeout=self.grace_s + 5.0)
            if proc.is_alive():  # closed its pipe but did not exit
                self.kill()
                proc.join(timeout=5.0)
            self.job.exitcode = proc.exitcode
            return outcome
        except Exception:
            if proc is not None and proc.is_alive():
                self.kill()
            raise
        finally:
            if reader is not None:
                reader.close()
            if proc is not None:
                # reap the pool workers of a killed DC-SVM worker as well
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass

    def _start(self):
        """Start the job's worker process; returns ``(process, read end of its pipe)``."""
        job = self.job
        reader, writer = self.ctx.Pipe(duplex=False)
        try:
            stop_event = self.ctx.Event()
            proc = self.ctx.Process(
                target=worker_main,
                args=(job.task, writer, stop_event),
                name=f"svmstream-job-{job.id}",
                daemon=False,
            )
            with self.lock:
                job._stop_event = stop_event
                if job._cancel_requested is not None:
                    stop_event.set()
            proc.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()
        with self.lock:
            job._process = proc
            job.pid = proc.pid
        log.info("job %s: worker pid %d started", job.id, proc.pid)
        return proc, reader

    def _relay(self, proc, reader) -> dict[str, Any] | None:
        """Relay the worker's messages into the job until its outcome or its exit; kill it
        ``grace_s`` after a cancel request.  Returns the outcome message, if any."""
        job = self.job
        outcome: dict[str, Any] | None = None
        grace = self.grace_s
        killed = False
        while True:
            if (
                job._cancel_requested is not None
                and not killed
                and time.monotonic() - job._cancel_requested > grace
            ):
                log.warning(
                    "job %s: worker did not stop within %.1f s of the cancel; killing it", job.id, grace
                )
                self.kill()
                killed = True
                with self.lock:
                    if job.cancel is not None:
                        job.cancel["killed"] = True
            try:
                if not reader.poll(0.05):
                    if not proc.is_alive():
                        if not reader.poll(0.2):  # a last message may still be in the pipe
                            break
                    continue
                msg = reader.recv()
            except (EOFError, OSError):
                break
            if msg.get("type") in ("result", "cancelled", "error"):
                outcome = msg
                with self.lock:
                    if msg["type"] == "cancelled" and job.cancel is not None:
                        # when the solver raised Cancelled (wall clock of the worker)
                        job.cancel["solver_stopped_after_s"] = round(
                            msg["time"] - job.cancel["requested_at"], 4
                        )
            else:
                self.on_message(job, msg)
        return outcome

    def kill(self) -> None:
        """SIGKILL the worker's process group (its pool workers too), then the worker."""
        proc = self.job._process
        if proc is None:
            return
        pid = proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)  # the worker leads its own group (its pool workers too)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.kill()
        except (OSError, ValueError, AttributeError):
            pass


def exit_reason(code: int | None) -> str:
    """Why a worker with exit status ``code`` reported no outcome."""
    if code is None:
        return "the worker process did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process was killed by {name} (exit status {code}) before it reported a result"
    return f"the worker process exited with status {code} without reporting a result"


def register_result(registry: Registry, job: Job, result: dict[str, Any], out_path: Path) -> dict[str, Any]:
    """Decode the worker's model and make it a servable model of the registry; returns the
    job's ``result`` record."""
    arrays, meta = decode_state(out_path.read_bytes())
    estimator = estimator_from_state(arrays, meta)
    if job.model in registry and not job.replace:
        raise RuntimeError(f"model {job.model!r} was created while the job ran; pass replace=true")
    search = result.get("search")
    algorithm = job.algorithm if search is None else search["estimator"]
    fields: dict[str, Any] = {
        "algorithm": algorithm,
        "classes": result["classes"],
        "n_features": result["n_features"],
        "n_samples": result["n_train"],
    }
    if search is not None and algorithm in ("bsgd", "bsca"):
        # an online model: its configuration is the search's fixed fields plus the best
        # candidate's, so /learn goes on with the estimator the search chose
        fields = {**job.params, **search["best_params"], **fields}
        fields.pop("n_samples")
    elif algorithm == "dcsvm":
        fields.update(C=float(estimator.C), gamma=float(estimator.kernel_spec_.gamma))
    else:
        fields.update(C=float(estimator.C))
    config = registry.resolve_config(fields)
    summary = {
        "id": job.id,
        "algorithm": job.algorithm,
        "params": job.params,
        "early_level": job.early_level,
        "data": job.data,
        "test": job.test,
        "search": None
        if search is None
        else {k: search[k] for k in ("estimator", "cv", "best_params", "best_score", "n_candidates")},
        "trained_at": time.time(),
        **{
            k: result.get(k)
            for k in (
                "mode",
                "n_train",
                "n_sv",
                "train_seconds",
                "test_accuracy",
                "n_test",
                "dual_objective",
                "gamma",
                "early_clusters",
            )
            if k in result
        },
    }
    handle, replaced = registry.create(
        job.model,
        config,
        snapshot=True,
        estimator=estimator,
        version=1,
        n_features=int(result["n_features"]),
        extra={"job": summary},
    )
    return {"model": job.model, "replaced": replaced, "version": handle.view.version, **result}
