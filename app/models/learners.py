"""Learner threads shared by all models: :class:`LearnerPool` and one :class:`ModelQueue` per model.

A thread per model does not scale: 10,000 models meant 10,009 threads.  Here a
fixed number of threads serves every model.  Each model keeps its own FIFO of tasks (the
batches and flushes :class:`~svmstream.app.models.handle.ModelHandle` submits); a model with
work is *scheduled* on the pool at most once at a time, so

* its tasks run in submission order, one at a time (a single writer per model);
* a thread runs one task of a model, then puts the model back at the end of the ready queue
  if it has more: models with work take turns (one busy stream cannot starve the others);
* an idle model costs a deque and a lock, no thread.

The numba steps release the GIL, so up to ``n_threads`` models learn in parallel.

The threads may run at a lower CPU priority than the rest of the process (``nice``: Linux
nice values are per thread): learning is throughput work, while predictions are answered on
the event loop thread and wait whenever a learner holds the core.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("svmstream.registry")


def default_learner_threads() -> int:
    """Threads of a pool by default: the CPU count, at least 2, at most 16."""
    return max(2, min(16, os.cpu_count() or 2))


class LearnerPool:
    """``n_threads`` daemon threads that run the tasks of every :class:`ModelQueue` on it
    (started on first use).

    Parameters
    ----------
    n_threads : int >= 1
    name : str — prefix of the threads' names (``learner-0``, ...)
    nice : int >= 0 — added to each thread's nice value when it starts (:func:`lower_priority`)

    Raises
    ------
    ValueError
        ``n_threads`` < 1.
    """

    def __init__(self, n_threads: int | None = None, name: str = "learner", nice: int = 0):
        n_threads = default_learner_threads() if n_threads is None else int(n_threads)
        if n_threads < 1:
            raise ValueError(f"n_threads: must be >= 1, got {n_threads}")
        self.n_threads = n_threads
        self.name = name
        self.nice = int(nice)
        self._ready: queue.SimpleQueue[ModelQueue | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def queue(self, label: str) -> ModelQueue:
        """A new model queue on this pool (``label`` names the model in error logs)."""
        return ModelQueue(self, label)

    def _schedule(self, model_queue: ModelQueue) -> None:
        if not self._threads:
            with self._lock:
                while len(self._threads) < self.n_threads:
                    thread = threading.Thread(
                        target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
                    )
                    thread.start()
                    self._threads.append(thread)
        self._ready.put(model_queue)

    def _work(self) -> None:
        lower_priority(self.nice)
        while True:
            model_queue = self._ready.get()
            if model_queue is None:
                return
            model_queue._run_one()

    def shutdown(self) -> None:
        """Stop the threads once the tasks already scheduled have run (queues closed first)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._ready.put(None)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()


def lower_priority(steps: int) -> int | None:
    """Add ``steps`` to the calling thread's nice value (at most 19); returns the new value,
    or None when nothing changed (``steps`` <= 0, not Linux -- elsewhere the call would
    renice the whole process -- or refused).  Threads this thread starts inherit it."""
    if steps <= 0 or not sys.platform.startswith("linux"):
        return None
    try:
        tid = threading.get_native_id()
        value = min(19, os.getpriority(os.PRIO_PROCESS, tid) + steps)
        os.setpriority(os.PRIO_PROCESS, tid, value)
    except OSError as exc:
        log.warning("learner threads keep their CPU priority: %s", exc)
        return None
    return value


class ModelQueue:
    """One model's tasks on a :class:`LearnerPool`: run in order, one at a time.

    The interface the handle used of its former one-thread ``ThreadPoolExecutor``:
    :meth:`submit` and :meth:`shutdown`.
    """

    # one per model: slots, and the idle condition (with its own deque of waiters) only once
    # someone waits for the queue to drain (10,000 models in a service: ~1.8 KB less each)
    __slots__ = ("_pool", "label", "_tasks", "_lock", "_idle", "_scheduled", "_closed")

    def __init__(self, pool: LearnerPool, label: str):
        self._pool = pool
        self.label = label
        # None while idle: an empty deque still holds a 64-slot block (~0.6 KB per model)
        self._tasks: deque[tuple[Future, Callable[..., Any], tuple]] | None = None
        self._lock = threading.Lock()
        self._idle: threading.Condition | None = None  # created by shutdown(wait=True)
        self._scheduled = False
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Queue ``fn(*args)``; returns its future.  Raises RuntimeError once shut down."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the learner queue of {self.label!r} is shut down")
            if self._tasks is None:
                self._tasks = deque()
            self._tasks.append((future, fn, args))
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._pool._schedule(self)
        return future

    def _run_one(self) -> None:
        """Pool thread: run the oldest task, then reschedule the queue if it has more."""
        with self._lock:
            future, fn, args = self._tasks.popleft()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # delivered to whoever waits on the future
                future.set_exception(exc)
        with self._lock:
            again = bool(self._tasks)
            if not again:
                self._tasks = None
                self._scheduled = False
                if self._idle is not None:
                    self._idle.notify_all()
        if again:
            self._pool._schedule(self)

    def shutdown(self, wait: bool = True) -> None:
        """Refuse new tasks; with ``wait``, block until the queued ones have run."""
        with self._lock:
            self._closed = True
            if wait:
                while self._scheduled:
                    if self._idle is None:
                        self._idle = threading.Condition(self._lock)
                    self._idle.wait()


_DEFAULT: LearnerPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> LearnerPool:
    """The process's shared pool for handles made without one (``default_learner_threads()``)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = LearnerPool()
        return _DEFAULT
