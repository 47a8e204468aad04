"""How far a stream consumer has got: wait until given entries are applied.

A clustered learner that receives a forwarded ``POST /learn`` (``docs/cluster.md``, "Any node
takes any request") appends the batch to the model's stream and answers once its own consumer
has applied those entries.  :class:`ApplyProgress` is that consumer's side.  The applier tells
it the newest entry it has read (:meth:`~ApplyProgress.read`), each batch it hands to the learner
(:meth:`~ApplyProgress.submitted`) and each batch that is done (:meth:`~ApplyProgress.finished`:
from the learner's thread the moment a batch is applied, from the consumer once a failed batch
is dead-lettered).  Every waiter whose last entry has been read and is behind every batch still
in the learner is resolved with the number of its entries that were dead-lettered.  When the
consumer stops (the model moved, the server stops) every waiter is resolved with ``None``: its
entries stay in the stream for whoever consumes it next.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, InvalidStateError

from svmstream.app.stream.redis_ops import StreamId

#: Dead-lettered entry IDs remembered for the waiters' counts (the newest; dead letters are rare).
DEAD_KEPT = 10_000


def _resolve(future: Future, value) -> None:
    try:
        future.set_result(value)
    except InvalidStateError:  # the waiter gave up (timeout, cancelled)
        pass


class ApplyProgress:
    """Waiters for entries of one model's stream to be applied (see the module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waiters: list[tuple[StreamId, StreamId, Future]] = []
        self._dead: deque[StreamId] = deque(maxlen=DEAD_KEPT)  # the newest dead-lettered IDs
        self._read_to: StreamId | None = None
        self._open: dict[StreamId, StreamId] = {}  # batches in the learner: last ID -> first ID
        self._closed = False

    def wait_for(self, first: StreamId, last: StreamId) -> Future:
        """A future resolved with the number of entries in ``[first, last]`` that were
        dead-lettered once every entry up to ``last`` has been applied (or dead-lettered, or
        skipped as already in the model); with ``None`` when the consumer stops first."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                _resolve(future, None)
            elif self._done(last):
                _resolve(future, self._count_dead(first, last))
            else:
                self._waiters.append((first, last, future))
        return future

    def _done(self, last: StreamId) -> bool:
        if self._read_to is None or last > self._read_to:
            return False
        return not self._open or last < next(iter(self._open.values()))  # batches go in ID order

    def _count_dead(self, first: StreamId, last: StreamId) -> int:
        return sum(first <= sid <= last for sid in self._dead)

    def _wake(self) -> None:
        """Under the lock: resolve the waiters that are done."""
        if self._waiters:
            waiting = []
            for first, last, future in self._waiters:
                if self._done(last):
                    _resolve(future, self._count_dead(first, last))
                elif not future.done():
                    waiting.append((first, last, future))
            self._waiters = waiting

    def read(self, read_to: StreamId) -> None:
        """Every entry up to ``read_to`` has been read (applied, in the learner, or dead)."""
        with self._lock:
            if self._read_to is None or read_to > self._read_to:
                self._read_to = read_to
            self._wake()

    def submitted(self, first: StreamId, last: StreamId) -> None:
        """A batch of entries ``first`` .. ``last`` was handed to the learner."""
        with self._lock:
            self._open[last] = first

    def finished(self, last: StreamId) -> None:
        """The batch ending at ``last`` was applied (or dead-lettered)."""
        with self._lock:
            self._open.pop(last, None)
            self._wake()

    def note_dead(self, ids: list[StreamId]) -> None:
        """Entries moved to the dead-letter stream."""
        with self._lock:
            self._dead.extend(ids)

    def release(self) -> None:
        """The consumer stopped: every waiter gets ``None`` (its entries wait in the stream)."""
        with self._lock:
            self._closed = True
            for _, _, future in self._waiters:
                _resolve(future, None)
            self._waiters = []
