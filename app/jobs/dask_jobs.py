"""Batch and search jobs on a ``dask.distributed`` cluster (``SVMSTREAM_DASK_ADDRESS``).

With the setting, a job does not get a local worker process: :class:`DaskSupervisor`
submits :func:`dask_job_main` to the cluster instead.  That task runs the same work as a
local worker (:func:`svmstream.app.jobs.worker.run_job`) under joblib's dask backend, so
DC-SVM's level sub-problems and a search's fits become further tasks of the same cluster.
A training job first leaves the worker's thread pool (``distributed.secede``; joblib does
the same around a search's fits): a job that waits for its own sub-tasks never holds the
thread they need.

What crosses the cluster:

* in: the task dict (the data **path**: the workers must see the same files, e.g. a shared
  volume; ``docs/dask.md``);
* progress: the same small dicts as a local worker's pipe, through a ``distributed.Queue``
  named after the job;
* cancel: a ``distributed.Event`` polled by the solver's ``should_stop``; if the task has
  not ended ``job_cancel_grace_s`` later its future is cancelled (a thread cannot be
  killed: a running fit ends at its next stop check);
* out: the encoded model (:func:`svmstream.solvers.persistence.encode_state`, pickle-free
  bytes) in the outcome message; the server writes it where a local worker would have.

The client is one per server process (:func:`cluster_client`), connected on first use.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from svmstream.app.jobs.worker import _finite, _Reporter, run_job
from svmstream.solvers import Cancelled
from svmstream.solvers.persistence import encode_state, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from svmstream.app.jobs.job import Job

log = logging.getLogger("svmstream.jobs")

STOP_POLL_S = 0.2
"""A running job asks the scheduler for its stop event at most this often."""

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def cluster_client(address: str):
    """The ``distributed.Client`` of this process for ``address`` (connected on first use).

    Raises
    ------
    OSError
        The scheduler cannot be reached (``distributed``'s timeout).
    """
    with _clients_lock:
        client = _clients.get(address)
        if client is None or client.status in ("closed", "closing"):
            from distributed import Client

            client = Client(address, set_as_default=False, timeout="10s")
            _clients[address] = client
        return client


def close_clients() -> None:
    """Close the clients of this process (server shutdown)."""
    with _clients_lock:
        for client in _clients.values():
            try:
                client.close()
            except Exception:  # noqa: BLE001 - the scheduler may be gone
                pass
        _clients.clear()


class _QueueConn:
    """What :class:`~svmstream.app.jobs.worker._Reporter` writes to: the job's
    ``distributed.Queue``."""

    def __init__(self, queue):
        self.queue = queue

    def send(self, message: dict) -> None:
        self.queue.put(message)


def dask_job_main(task: dict[str, Any], queue_name: str, stop_name: str) -> dict[str, Any]:
    """The cluster task of one job; returns its outcome message (``result`` with the encoded
    model as ``state`` bytes, ``cancelled`` or ``error``), as a local worker would send it."""
    from distributed import Event, Queue, get_client, secede

    if task["algorithm"] != "search":  # (joblib secedes itself around a search's fits)
        secede()  # wait for sub-tasks without holding a worker thread
    client = get_client()
    reporter = _Reporter(_QueueConn(Queue(queue_name, client=client)))
    event = Event(stop_name, client=client)
    last = [0.0, False]

    def should_stop() -> bool:
        now = time.monotonic()
        if not last[1] and now - last[0] >= STOP_POLL_S:
            last[0], last[1] = now, bool(event.is_set())
        return last[1]

    try:
        import os

        reporter.send({"type": "started", "pid": os.getpid(), "time": time.time()})
        est, result = run_job(task, reporter, should_stop, client=client)
        reporter.stage("saving")
        arrays, meta = est.get_state()
        return {
            "type": "result",
            "result": _finite(result),
            "state": encode_state(arrays, meta),
            "time": time.time(),
        }
    except Cancelled:
        return {"type": "cancelled", "time": time.time()}
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the server
        return {
            "type": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=20),
            "time": time.time(),
        }


class DaskSupervisor:
    """The cluster task of one job (the dask counterpart of
    :class:`svmstream.app.jobs.supervisor.WorkerSupervisor`, same ``run``/``kill``).

    Parameters
    ----------
    job : Job
    address : str
        The scheduler address.
    lock : threading.RLock
        The runner's lock, held while the job record changes.
    on_message : callable(Job, dict)
        Takes the task's ``started``/``stage``/``progress`` messages.
    grace_s : float
        Seconds between a cancel request and cancelling the task's future.
    """

    def __init__(
        self, job: Job, address: str, lock, on_message: Callable[[Job, dict[str, Any]], None], grace_s
    ):
        self.job = job
        self.address = address
        self.lock = lock
        self.on_message = on_message
        self.grace_s = grace_s
        self.future = None

    def run(self) -> dict[str, Any] | None:
        """Submit the task, relay its messages, write the model file; returns the outcome
        message (None if the task was lost; ``job.exitcode`` stays None)."""
        from distributed import Event, Queue

        job = self.job
        client = cluster_client(self.address)
        queue = Queue(f"svmstream-job-{job.id}", client=client)
        event = Event(f"svmstream-job-stop-{job.id}", client=client)
        with self.lock:
            job._stop_event = event
            if job._cancel_requested is not None:
                event.set()
        self.future = client.submit(
            dask_job_main, job.task, queue.name, event.name, pure=False, key=f"svmstream-job-{job.id}"
        )
        with self.lock:
            job._process = self
        log.info("job %s: submitted to the dask cluster at %s", job.id, self.address)
        cancelled = False
        outcome = None
        try:
            while True:
                self._drain(queue)
                if (
                    job._cancel_requested is not None
                    and not cancelled
                    and time.monotonic() - job._cancel_requested > self.grace_s
                ):
                    self.kill()
                    cancelled = True
                    with self.lock:
                        if job.cancel is not None:
                            job.cancel["killed"] = True
                if self.future.done():
                    break
                time.sleep(0.05)
            self._drain(queue)
            if self.future.status == "finished":
                outcome = self.future.result()
            elif self.future.status == "error":
                exc = self.future.exception()
                outcome = {"type": "error", "error": f"the dask task failed: {type(exc).__name__}: {exc}"}
        finally:
            self.future.release()
        if outcome is not None and outcome["type"] == "result":
            write_atomic(job.task["out_path"], outcome.pop("state"))
        return outcome

    def _drain(self, queue) -> None:
        while True:
            try:
                if queue.qsize() == 0:
                    return
                msg = queue.get(timeout=1)
            except Exception:  # noqa: BLE001 - an empty or gone queue: nothing to relay
                return
            self.on_message(self.job, msg)

    def kill(self) -> None:
        """Cancel the task's future (its fit stops at the next check of the stop event)."""
        if self.future is not None:
            try:
                self.future.cancel()
            except Exception:  # noqa: BLE001
                pass
