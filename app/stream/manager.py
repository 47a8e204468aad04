"""The set of stream consumers of a server, kept in line with its registry.

:class:`StreamManager` starts one :class:`~svmstream.app.stream.consumer.StreamConsumer`
per streamed model (``Settings.streamed``; batch-trained models get none), stops the
consumers of deleted or replaced models, routes the registry's snapshot notifications to
the right consumer (the commit point of ack-on-snapshot) and, at shutdown, stops every
consumer and acknowledges what the final snapshots cover.  :func:`run_stream_manager` is
the service's background task that reconciles every 0.5 s.  The protocol is described in
:mod:`svmstream.app.stream.consumer` and ``docs/stream.md``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref

from svmstream.app.models.registry import ModelHandle, Registry
from svmstream.app.models.view import ModelView
from svmstream.app.settings import Settings
from svmstream.app.stream.consumer import StreamConsumer
from svmstream.app.stream.waiter import StreamWaiter

log = logging.getLogger("svmstream.stream")


class StreamManager:
    """Starts one :class:`StreamConsumer` per streamed model and keeps that set in line
    with the registry (models created, replaced or deleted over HTTP).

    ``leases`` (a clustered learner, :mod:`svmstream.app.cluster`): model name -> its lease, or
    None when this learner does not hold it (then the model gets no consumer)."""

    def __init__(self, registry: Registry, settings: Settings, leases=None):
        self.registry = registry
        self.settings = settings
        self.leases = leases
        self.consumers: dict[str, StreamConsumer] = {}
        self._retired: list[StreamConsumer] = []
        self._refused: weakref.WeakSet[ModelHandle] = weakref.WeakSet()
        self._lock = threading.Lock()
        #: the clustered consumers' shared idle wait (docs/stream.md, "Many models")
        self.waiter = StreamWaiter(settings.redis_url) if settings.redis_url else None
        registry.snapshot_listeners.append(self._on_snapshot)

    def _on_snapshot(self, handle: ModelHandle, view: ModelView, path: str) -> None:
        consumer = self.consumers.get(handle.name)
        if consumer is not None and consumer.handle is handle:
            consumer.on_snapshot(view)

    def reconcile(self) -> None:
        """Start consumers for new/replaced streamed models, stop those of deleted ones.

        Models trained by batch jobs (``config.learns_online`` false) do not learn online and get no
        consumer; a consumer that stopped because its model refused to learn is not restarted
        for the same model."""
        with self._lock:
            wanted = {
                h.name: h
                for h in self.registry.handles()
                if self.settings.streamed(h.name)
                and h.config.learns_online
                and h not in self._refused
                and (self.leases is None or self.leases(h.name) is not None)
            }
            for name, consumer in list(self.consumers.items()):
                if consumer.refused:  # the model itself refused to learn: do not try again
                    self._refused.add(consumer.handle)
                if wanted.get(name) is not consumer.handle or not consumer.alive:
                    if consumer.alive:
                        consumer.stop()
                        self._retired.append(consumer)
                    del self.consumers[name]
            self._retired = [c for c in self._retired if c.alive]
            for name, handle in wanted.items():
                if name not in self.consumers and not handle.closed:
                    lease = None if self.leases is None else self.leases(name)
                    if lease is None and self.leases is not None:
                        continue
                    self.consumers[name] = StreamConsumer(
                        self.registry,
                        handle,
                        self.settings,
                        lease=lease,
                        waiter=self.waiter,
                        peers=self.count,
                    ).start()
                    log.info("model %r: consuming stream %r", name, self.consumers[name].key)

    def count(self) -> int:
        """The consumers running now."""
        return len(self.consumers)

    def detach(self, name: str, timeout: float = 30.0) -> StreamConsumer | None:
        """Stop model ``name``'s consumer and wait for it (its batches in flight are applied);
        returns it (for its final :meth:`StreamConsumer.flush`), or None when it had none.
        Until the model leaves the registry, :meth:`reconcile` must not start another one:
        the caller withdraws the model's lease first (``leases(name)`` None)."""
        with self._lock:
            consumer = self.consumers.pop(name, None)
        if consumer is None:
            return None
        consumer.stop()
        consumer.join(timeout)
        return consumer

    def detach_many(self, names: list[str], timeout: float = 30.0) -> dict[str, StreamConsumer]:
        """:meth:`detach` of several models at once: every consumer is told to stop first, then
        each is waited for (their blocking reads end together, not one after the other)."""
        with self._lock:
            consumers = {n: c for n in names if (c := self.consumers.pop(n, None)) is not None}
        for consumer in consumers.values():
            consumer.stop()
        deadline = time.monotonic() + timeout
        for consumer in consumers.values():
            consumer.join(max(0.0, deadline - time.monotonic()))
        return consumers

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every consumer and wait for their threads (batches in flight are applied)."""
        with self._lock:
            everyone = list(self.consumers.values()) + self._retired
            for consumer in everyone:
                consumer.stop()
            deadline = time.monotonic() + timeout
            for consumer in everyone:
                consumer.join(max(0.0, deadline - time.monotonic()))
        if self.waiter is not None:
            self.waiter.stop()

    def flush(self) -> int:
        """After the final snapshots: acknowledge what they cover and release the leases."""
        return sum(c.flush() for c in self.consumers.values())


async def run_stream_manager(manager: StreamManager, interval_s: float = 0.5) -> None:
    """Reconcile the consumers with the registry every ``interval_s`` seconds until cancelled."""
    while True:
        try:
            manager.reconcile()
        except Exception:  # keep the loop alive; logged with its traceback
            log.exception("stream manager: reconcile failed")
        await asyncio.sleep(interval_s)
