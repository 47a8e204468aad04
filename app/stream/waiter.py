"""One blocking read for every idle stream consumer of a server (``docs/stream.md``).

A clustered consumer that finds no new entry used to wait in an ``XREAD BLOCK`` of its own:
one Redis connection, one round trip every ``stream_block_ms`` and one wake-up of its thread
per idle model.  With a thousand models on one learner those wake-ups (a few thousand a
second, each taking the interpreter lock back) cost more than the learning did
(``benchmarks/profiling/learner_many.py``).  :class:`StreamWaiter` is the multiplexed wait:
one thread, one connection, one ``XREAD COUNT 1 BLOCK`` over every waiting model's stream
(from the newest entry each had seen), and a :class:`threading.Event` per waiting consumer,
set when its stream has an entry after that ID.  Nothing is read for a consumer: it wakes and
reads through its own fenced ``XREADGROUP``, so the waiter never touches a consumer group and
losing it loses no entry — a consumer whose wait times out simply reads again.

A consumer that starts waiting while the shared ``XREAD`` is blocked is included at the next
call, at most :data:`BLOCK_MS` later.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from svmstream.app.stream.redis_ops import as_str, make_client, redis_errors

log = logging.getLogger("svmstream.stream")

BLOCK_MS = 50
"""The shared ``XREAD``'s block: the longest a newly idle consumer waits to be included."""

MIN_GAP_S = 0.01
"""The least time between two shared ``XREAD`` calls: under a steady stream of entries each
call returned at once for one stream and the next re-sent every waiting key (1,000 models:
~11 % of a learner's interpreter lock while it gained models, ``docs/cluster.md``); an entry
wakes its consumer at most this much later, and the streams ready meanwhile come in one call."""

IDLE_WAIT_S = 5.0
"""How long a consumer waits here before it reads again by itself (it is woken at once by an
entry or by :meth:`StreamWaiter.wake`): an idle model costs a round trip every 5 s, not every
``stream_block_ms``."""


class StreamWaiter:
    """Waits on many streams at once for the consumers of one server.

    Parameters
    ----------
    redis_url : str
        The server's Redis.
    """

    def __init__(self, redis_url: str):
        self.redis_url = redis_url
        self._waiting: dict[str, tuple[str, threading.Event]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: shared XREAD calls made (the figure ``tests/test_stream_waiter.py`` checks)
        self.calls = 0

    def wait(self, key: str, newest: str, timeout_s: float, stopped: threading.Event | None = None) -> bool:
        """Block until ``key`` has an entry after ``newest``, ``timeout_s`` passed or
        :meth:`wake` is called for it; True when woken.  ``stopped`` (the consumer's stop
        event, set before its :meth:`wake`): a wait that begins after it was set returns at
        once.  Several waits of one key at once are not supported (one consumer per model)."""
        event = threading.Event()
        with self._lock:
            self._waiting[key] = (newest, event)
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="stream-waiter", daemon=True)
                self._thread.start()
        self._wake.set()
        try:
            if stopped is not None and stopped.is_set():
                return False
            return event.wait(timeout_s)
        finally:
            with self._lock:
                if self._waiting.get(key, (None, None))[1] is event:
                    del self._waiting[key]

    def wake(self, key: str) -> None:
        """End the wait of ``key`` now (its consumer is asked to stop)."""
        with self._lock:
            found = self._waiting.pop(key, None)
        if found is not None:
            found[1].set()

    def stop(self) -> None:
        """End the thread (waiting consumers time out as usual)."""
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        errors = redis_errors()
        client = None
        last = 0.0
        while not self._stop.is_set():
            with self._lock:
                waiting = dict(self._waiting)
            if not waiting:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            self._wake.clear()
            try:
                if client is None:
                    client = make_client(self.redis_url, timeout=BLOCK_MS / 1000.0 + 10.0)
                gap = MIN_GAP_S - (time.monotonic() - last)
                if gap > 0 and self._stop.wait(gap):
                    break
                last = time.monotonic()
                with self._lock:  # who waits now, after the gap
                    waiting = dict(self._waiting)
                if not waiting:
                    continue
                self.calls += 1
                reply = client.xread({k: v[0] for k, v in waiting.items()}, count=1, block=BLOCK_MS)
            except (*errors, redis.ResponseError) as exc:  # the consumers time out and read themselves
                log.debug("stream waiter: %s", exc)
                client = None
                self._stop.wait(0.1)
                continue
            with self._lock:  # woken consumers leave the shared read at once
                for stream, _entries in reply or []:
                    key = as_str(stream)
                    found = waiting.get(key)
                    if found is not None:
                        found[1].set()
                        if self._waiting.get(key, (None, None))[1] is found[1]:
                            del self._waiting[key]
        if client is not None:
            client.close()
