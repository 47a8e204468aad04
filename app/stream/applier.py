"""The model side of a stream consumer: apply each entry once, acknowledge it once durable.

A :class:`StreamApplier` does the work of one read for
:class:`~svmstream.app.stream.consumer.StreamConsumer` (which owns the Redis session: lease,
recovery, reconnects):

* skip the entries at or below :attr:`StreamApplier.last_id` (already in the model);
* validate the others (:func:`svmstream.app.ingest.stream_entries.parse_stream_entries`, the
  same checks as HTTP) and move the
  bad ones to the dead-letter stream;
* hand the good ones to the learner with **one** ``Registry.learn`` call, recording
  ``stream_key``/``stream_last_id`` in the model (at most :attr:`StreamApplier.MAX_INFLIGHT`
  batches in flight); a batch the learner fails on is dead-lettered;
* keep every read batch until a snapshot covers it (:meth:`StreamApplier.covered`, the commit
  point), then XACK it and trim the stream (:meth:`StreamApplier.ack_durable`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput, LearnerBusy
from svmstream.app.ingest.named_entries import named_stream, parse_named_entries
from svmstream.app.ingest.stream_entries import parse_stream_entries
from svmstream.app.models.registry import ModelHandle, Registry
from svmstream.app.settings import Settings
from svmstream.app.stream import fencing, redis_ops
from svmstream.app.stream.feedback_entries import FeedbackResolution, has_fid
from svmstream.app.stream.progress import ApplyProgress
from svmstream.app.stream.redis_ops import StreamId, as_str, fields_dict, parse_id

log = logging.getLogger("svmstream.stream")


@dataclass
class PendingBatch:
    """A batch handed to the learner (or skipped), not yet acknowledged."""

    future: Future | None
    ids: list[bytes]  # every entry ID to acknowledge once durable (applied and skipped ones)
    entries: list[tuple[bytes, dict]]  # the applied entries (dead-lettered if learning fails)
    max_id: StreamId
    n: int


def _failed_future(exc: BaseException) -> Future:
    """A future that failed with ``exc`` (its batch is dead-lettered like a failed learn)."""
    future: Future = Future()
    future.set_exception(exc)
    return future


class StreamApplier:
    """Applied and durable entry IDs of one model's stream, and the work of one read.

    Parameters
    ----------
    registry : Registry
    handle : ModelHandle
        The model fed.
    settings : Settings
        ``stream_trim``, ``stream_trim_exact``, ``stream_dead_maxlen``.
    keys : (str, str, str)
        The stream, its dead-letter stream and the consumer group.
    last_id : (int, int) or None
        Last entry already in the model (from its snapshot).
    durable_id : (int, int) or None
        Last entry covered by a snapshot on disk.
    sleep : callable(float)
        Waits while the learner is busy (the consumer's stop-aware sleep).
    """

    MAX_INFLIGHT = 2

    def __init__(
        self,
        registry: Registry,
        handle: ModelHandle,
        settings: Settings,
        keys: tuple[str, str, str],
        last_id: StreamId | None,
        durable_id: StreamId | None,
        sleep: Callable[[float], None],
    ):
        self.registry = registry
        self.handle = handle
        self.settings = settings
        self.name = handle.name
        self.key, self.dead_key, self.group = keys
        self._sleep = sleep
        self._lock = threading.Lock()
        #: last entry handed to the model (entries at or below it are never applied again)
        self.last_id = last_id
        #: last entry covered by a snapshot on disk
        self.durable_id = durable_id
        self._unacked: deque[PendingBatch] = deque()
        self._inflight: deque[PendingBatch] = deque()
        self._failed: list[tuple[PendingBatch, str]] = []
        #: entries applied since the last snapshot
        self.since_snapshot = 0
        self.applied = 0
        self.dead_letters = 0
        self.skipped = 0
        self.acked = 0
        #: ``(lease key, token)`` of a clustered learner: acknowledgements are fenced
        self.fence: tuple[str, str] | None = None
        #: waiters for entries to be applied (a forwarded ``/learn``, docs/cluster.md)
        self.progress = ApplyProgress()

    # ------------------------------------------------------------------ snapshots -> acks
    def covered(self, sid: StreamId | None) -> None:
        """A snapshot covering the entries up to ``sid`` is on disk."""
        with self._lock:
            self.since_snapshot = 0
            if sid is not None and (self.durable_id is None or sid > self.durable_id):
                self.durable_id = sid

    def durable(self) -> StreamId | None:
        """The last entry covered by a snapshot on disk."""
        with self._lock:
            return self.durable_id

    def _durable_ids(self) -> tuple[list[bytes], list[PendingBatch]]:
        durable = self.durable()
        ids: list[bytes] = []
        done: list[PendingBatch] = []
        if durable is None:
            return ids, done
        while self._unacked and self._unacked[0].max_id <= durable:
            item = self._unacked.popleft()
            done.append(item)
            ids.extend(item.ids)
        return ids, done

    def ack_durable(self, client) -> None:
        """XACK the batches a snapshot covers, then trim the stream below them."""
        ids, done = self._durable_ids()
        if not ids:
            return
        try:
            if self.fence is None:
                redis_ops.ack(client, self.key, self.group, ids)
            else:
                fencing.fenced_ack(client, self.key, *self.fence, self.group, ids)
        except BaseException:
            self._unacked.extendleft(reversed(done))  # retried after the reconnect
            raise
        self.acked += len(ids)
        if self.settings.stream_trim:
            redis_ops.trim_acked(
                client, self.key, self.group, max(d.max_id for d in done), self.settings.stream_trim_exact
            )

    # ------------------------------------------------------------------ one read
    def process(self, client, entries: list[tuple[bytes, dict | None]]) -> None:
        """Skip what the model already has, dead-letter bad entries, apply the rest."""
        self._process(client, entries)
        self.progress.read(parse_id(entries[-1][0]))

    def _process(self, client, entries: list[tuple[bytes, dict | None]]) -> None:
        last = self.last_id
        skip_ids: list[bytes] = []
        fresh: list[tuple[bytes, Any]] = []
        gone: list[bytes] = []
        first = 0
        if last is not None and parse_id(entries[0][0]) <= last:  # IDs increase within a read
            while first < len(entries) and parse_id(entries[first][0]) <= last:
                skip_ids.append(entries[first][0])
                first += 1
        for eid, fields in entries[first:] if first else entries:
            if not fields:  # pending entry whose content was deleted from the stream
                gone.append(eid)
            else:
                fresh.append((eid, fields))
        if gone:
            log.error(
                "model %r: %d pending entries were deleted from the stream before being applied "
                "(first %s); acknowledging them",
                self.name,
                len(gone),
                gone[0],
            )
            client.xack(self.key, self.group, *gone)
        if skip_ids:
            self.skipped += len(skip_ids)
            self._unacked.append(PendingBatch(None, skip_ids, [], parse_id(skip_ids[-1]), 0))
        if not fresh:
            return
        feedback = getattr(self.registry, "feedback", None)
        if feedback is None or not any(has_fid(f) for _, f in fresh):
            return self._apply_fresh(client, fresh, None)
        resolution = FeedbackResolution(feedback, self.handle, fresh)  # holds the model's ledger
        try:
            if resolution.refused:
                self.dead_letter(
                    client, [(eid, fields_dict(f), reason) for eid, f, reason in resolution.refused]
                )
            if resolution.entries:
                self._apply_fresh(client, resolution.entries, resolution)
        finally:
            resolution.release()

    def _apply_fresh(
        self, client, fresh: list[tuple[bytes, Any]], resolution: FeedbackResolution | None
    ) -> None:
        """Validate the entries not yet applied, dead-letter the bad ones, queue the rest."""
        batch = self._parse(fresh)
        if batch.rejected:
            self.dead_letter(
                client, [(fresh[i][0], fields_dict(fresh[i][1]), reason) for i, reason in batch.rejected]
            )
        if batch.good.size == 0:
            return
        good = [fresh[i] for i in batch.good.tolist()]
        last_good = good[-1][0]
        extra = {"stream_key": self.key, "stream_last_id": as_str(last_good)}
        if resolution is not None:
            extra.update(resolution.extra(batch.good.tolist()))
        first_id, last_id = parse_id(good[0][0]), parse_id(last_good)
        self.progress.submitted(first_id, last_id)
        try:
            future = self._submit(batch, fresh, extra)
        except BaseException:
            self.progress.finished(last_id)  # not in the learner: re-read after the reconnect
            raise
        future.add_done_callback(lambda f, last=last_id: self._applied(f, last))
        if resolution is not None:
            resolution.attach(future)
        self.last_id = last_id
        item = PendingBatch(future, [eid for eid, _ in good], good, self.last_id, len(good))
        self._inflight.append(item)
        self._unacked.append(item)
        while len(self._inflight) >= self.MAX_INFLIGHT:
            self.collect_done(client, block=True)

    def _applied(self, future: Future, last: StreamId) -> None:
        """The learner's thread: a batch is done; applied ones are reported at once (a failed
        one once :meth:`collect_done` has dead-lettered it)."""
        if not future.cancelled() and future.exception() is None:
            self.progress.finished(last)

    def _parse(self, fresh):
        entries = [f for _, f in fresh]
        if named_stream(self.handle, entries):  # named fields (docs/fields.md)
            return parse_named_entries(entries, self.handle.codec, self.handle.fields)
        return parse_stream_entries(
            entries,
            self.handle.codec,
            self.handle.n_features,
            self.name,
            grow_to=self.handle.growth_limit(),
        )

    def _submit(self, batch, fresh, extra) -> Future:
        retried = False
        while True:
            try:
                return self.registry.learn(
                    self.name, batch.X, batch.y, extra=extra, sparse=batch.sparse, new_labels=batch.new_labels,
                    weights=batch.weights,
                )  # fmt: skip
            except LearnerBusy:
                self._sleep(0.01)
            except InvalidInput as exc:
                if retried:  # the batch itself is refused (e.g. over a size guard): dead-letter it
                    return _failed_future(exc)
                # d was fixed meanwhile by another writer: validate again
                log.info("model %r: re-validating a stream batch (%s)", self.name, exc)
                batch2 = self._parse(fresh)
                if batch2.good.size != batch.good.size or not np.array_equal(batch2.good, batch.good):
                    raise RuntimeError("stream batch changed on re-validation") from exc
                batch, retried = batch2, True

    def collect_done(self, client, block: bool) -> None:
        while self._inflight and (block or self._inflight[0].future.done()):
            item = self._inflight.popleft()
            try:
                item.future.result()
            except Exception as exc:  # the learner rolled the model back
                log.error(
                    "model %r: learning a stream batch failed (%s); dead-lettering its %d entries",
                    self.name,
                    exc,
                    item.n,
                )
                self._failed.append((item, f"learning failed: {type(exc).__name__}: {exc}"))
                item.ids = []
                continue
            item.entries = []  # applied: the fields are no longer needed for dead-lettering
            self.applied += item.n
            self.since_snapshot += item.n
            block = False
        if self._failed and client is not None:
            failed = self._failed
            self.dead_letter(
                client, [(eid, fields_dict(f), reason) for item, reason in failed for eid, f in item.entries]
            )
            self._failed = []
            for item, _ in failed:
                self.progress.finished(item.max_id)

    def finish_inflight(self, client) -> None:
        try:
            self.collect_done(client, block=True)
        except Exception:
            log.exception("model %r: finishing the batches in flight failed", self.name)

    def dead_letter(self, client, bad: list[tuple[bytes, dict, str]]) -> None:
        """XADD each bad entry to the dead-letter stream and XACK it, atomically."""
        redis_ops.dead_letter(
            client, self.key, self.group, self.dead_key, self.name, bad, self.settings.stream_dead_maxlen
        )
        self.dead_letters += len(bad)
        self.progress.note_dead([parse_id(eid) for eid, _, _ in bad])
        log.info(
            "model %r: %d entries dead-lettered to %s (first: %s: %s)",
            self.name,
            len(bad),
            self.dead_key,
            bad[0][0],
            bad[0][2],
        )
