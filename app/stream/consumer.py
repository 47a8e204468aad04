"""Redis stream ingestion: one learning consumer per model, exactly-once by ack-on-snapshot.

Each streamed model ``m`` reads the stream ``svmstream:{m}:examples`` (``STREAM_KEY``)
through its consumer group ``svmstream:{m}`` (``STREAM_GROUP``) as the consumer
``learner`` (``STREAM_CONSUMER``), in a thread of its own (:class:`StreamConsumer`).
The format of an entry and the whole protocol are documented in ``docs/stream.md``;
in short:

* **Read** ``XREADGROUP ... COUNT STREAM_COUNT BLOCK STREAM_BLOCK_MS``; the entries of one
  read (handed to the model by :class:`~svmstream.app.stream.applier.StreamApplier`) are
  validated one by one (:func:`svmstream.app.ingest.stream_entries.parse_stream_entries`, the
  same checks as HTTP) and the good ones are applied with **one** ``Registry.learn`` call (one
  ``partial_fit``) carrying ``extra={"stream_key", "stream_last_id"}``.
* **Bad entries** go to the dead-letter stream ``svmstream:{m}:dead`` with the reason, the
  original fields and the original entry ID, and are acknowledged, in one MULTI/EXEC
  transaction (so a crash never leaves one without the other); the model never sees them.
* **Commit point = snapshot.** The snapshot of a model records ``stream_last_id``, the
  last entry applied.  Entries are XACKed only once a snapshot covering them is on disk
  (:meth:`StreamConsumer.on_snapshot`, called by ``Registry.snapshot_listeners``); the
  stream is then trimmed below that ID (``XTRIM MINID``, never past an entry that some
  consumer group has not acknowledged).
* **Recovery** (at start and after every Redis error): take over the entries pending for
  other (dead) consumers of the group with XAUTOCLAIM, then re-read this consumer's
  pending entries from ID ``0`` in ID order, skip those at or below the model's
  ``stream_last_id`` (already in the model), apply the rest, and only then continue with
  ``>``.  Since the solver is deterministic given the order of examples, a killed and
  restarted service ends with exactly the model of an uninterrupted run.
* **Single writer across processes:** a lease key ``<stream key>:lease`` (``SET NX PX``,
  renewed on every read) makes sure at most one process consumes a model's stream.
* **Redis going away:** every connection error ends the session; the consumer reconnects
  with exponential back-off (capped at ``STREAM_RECONNECT_MAX_S``) and runs the recovery
  again, so nothing delivered-but-unapplied is lost and nothing is applied twice.

The Redis commands themselves (client, lease scripts, stream IDs, trimming, dead letters)
are in :mod:`svmstream.app.stream.redis_ops`; the set of consumers of a server is kept by
:class:`svmstream.app.stream.manager.StreamManager`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

import redis

from svmstream.app.errors import ModelClosed, ModelNotFound
from svmstream.app.models.registry import ModelHandle, Registry
from svmstream.app.models.view import ModelView
from svmstream.app.settings import Settings
from svmstream.app.stream import fencing, redis_ops
from svmstream.app.stream.applier import StreamApplier
from svmstream.app.stream.redis_ops import StreamId, as_str, format_id, make_client, parse_id
from svmstream.app.stream.status import STATUS_REFRESHES_PER_S, consumer_status, refreshed_figures
from svmstream.app.stream.waiter import IDLE_WAIT_S

log = logging.getLogger("svmstream.stream")


class LeaseLost(RuntimeError):
    """Another process holds (or took) this model's consumer lease."""


class Stopped(Exception):
    """The consumer was asked to stop."""


class _Reconnect(Exception):
    """End the session and run the recovery again (e.g. the group vanished)."""


class StreamConsumer:
    """The learning consumer of one model's stream (a daemon thread).

    Parameters
    ----------
    registry : Registry
    handle : ModelHandle
        The model it feeds; the consumer stops when the model is deleted or replaced.
    settings : Settings
        ``redis_url`` and the ``stream_*`` settings.
    lease : optional
        A clustered learner's lease of the model (``key``, ``token``, ``member``, ``ttl_ms``;
        :class:`svmstream.app.cluster.leases.Lease`): the consumer then never takes a lease of
        its own, reads and acknowledges only while that lease is ours (fenced in Redis,
        :mod:`svmstream.app.stream.fencing`), consumes as the member, and stops for good
        when the lease is lost.
    waiter : StreamWaiter, optional
        With a lease: where the consumer waits when its stream has no new entry (one shared
        ``XREAD`` for every idle model) instead of an ``XREAD BLOCK`` of its own.
    peers : callable, optional
        The number of consumers of the server: the stream figures of ``GET /models`` are
        refreshed every ``stream_info_interval_s`` or, with many models, so that the server
        makes at most :data:`STATUS_REFRESHES_PER_S` such refreshes a second in all.
    """

    def __init__(
        self,
        registry: Registry,
        handle: ModelHandle,
        settings: Settings,
        lease=None,
        waiter=None,
        peers=None,
    ):
        self.registry = registry
        #: how many consumers the server runs (a callable; bounds the status refreshes)
        self.peers = peers
        #: the server's shared idle wait (:class:`~svmstream.app.stream.waiter.StreamWaiter`)
        self.waiter = waiter
        self.handle = handle
        self.settings = settings
        self.name = handle.name
        self.key, self.dead_key, self.group = settings.stream_keys(handle.name)
        self.consumer = settings.stream_consumer
        self.lease_key = f"{self.key}:lease"
        self.token = f"{self.consumer}|{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex[:8]}"
        self.lease = lease
        #: a clustered consumer stopped because its lease went to another learner
        self.lost = False
        if lease is not None:
            self.consumer, self.lease_key, self.token = lease.member, lease.key, lease.token
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        view = handle.view
        restored = self._view_id(view)
        durable = restored if handle.saved_version == view.version else None
        keys = (self.key, self.dead_key, self.group)
        #: the model side: what was applied, what a snapshot covers, the work of one read
        self.applier = StreamApplier(registry, handle, settings, keys, restored, durable, self._sleep)
        if lease is not None:
            self.applier.fence = (self.lease_key, self.token)
        #: a clustered consumer's fenced reads (Lua while small, WATCH on a backlog)
        self.reader = fencing.FencedReader(settings.stream_count)
        self._snapshotter: threading.Thread | None = None
        self._lease_at = 0.0
        self._status: dict[str, Any] = {}
        self._status_at = 0.0
        self.connected = False
        self.reconnects = 0
        self.last_error: str | None = None
        #: the consumer stopped because its (still current) model refused to learn
        self.refused = False
        handle.stream_status = self.status

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> StreamConsumer:
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the thread to stop (it finishes the batches in flight)."""
        self._stop.set()
        if self.waiter is not None:
            self.waiter.wake(self.key)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread, then for a snapshot it requested (so that the final
        acknowledgement sees every snapshot listener call)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in (self._thread, self._snapshotter):
            if thread is not None:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def applied(self) -> int:
        """Entries applied to the model."""
        return self.applier.applied

    @property
    def dead_letters(self) -> int:
        """Entries moved to the dead-letter stream."""
        return self.applier.dead_letters

    @property
    def skipped(self) -> int:
        """Entries skipped because the model already had them (recovery)."""
        return self.applier.skipped

    @property
    def acked(self) -> int:
        """Entries acknowledged."""
        return self.applier.acked

    def _view_id(self, view: ModelView) -> StreamId | None:
        extra = view.extra or {}
        sid = extra.get("stream_last_id")
        if sid is None:
            return None
        if extra.get("stream_key") not in (None, self.key):
            log.warning(
                "model %r: its snapshot recorded stream %r, now consuming %r: not skipping by ID",
                self.name,
                extra.get("stream_key"),
                self.key,
            )
            return None
        return parse_id(sid)

    # ------------------------------------------------------------------ snapshots -> acks
    def on_snapshot(self, view: ModelView) -> None:
        """A snapshot of ``view`` is on disk: its entries may be acknowledged."""
        self.applier.covered(self._view_id(view))

    def flush(self, timeout: float = 5.0) -> int:
        """Acknowledge what the final snapshot covers (called once the thread has stopped).

        Returns the number of entries acknowledged (0 when Redis is unreachable: they are
        then skipped by ID at the next start)."""
        before = self.acked
        try:
            client = make_client(self.settings.redis_url, timeout=timeout)
            try:
                self.applier.ack_durable(client)
                if self.lease is None:  # clustered: the coordinator releases its lease
                    client.eval(redis_ops.LEASE_RELEASE, 1, self.lease_key, self.token)
            finally:
                client.close()
        except Exception as exc:
            log.warning(
                "model %r: final acknowledgement failed (%s); entries are skipped by ID at restart",
                self.name,
                exc,
            )
        return self.acked - before

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """Stream figures for ``GET /models/{name}`` and ``/metrics`` (cached XINFO)."""
        return consumer_status(self)

    def _refresh_status(self, client) -> None:
        interval = self.settings.stream_info_interval_s
        if self.peers is not None:
            interval = max(interval, self.peers() / STATUS_REFRESHES_PER_S)
        if time.monotonic() - self._status_at >= interval:
            self._status_at = time.monotonic()
            self._status = refreshed_figures(self, client)

    # ------------------------------------------------------------------ the thread
    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Stopped

    def _run(self) -> None:
        try:
            self._sessions()
        finally:  # whoever waits for entries to be applied here: they wait in the stream now
            self.applier.progress.release()

    def _sessions(self) -> None:
        errors = redis_ops.redis_errors()
        backoff = 0.1
        while not self._stop.is_set():
            client = None
            try:
                client = make_client(
                    self.settings.redis_url, timeout=self.settings.stream_block_ms / 1000.0 + 10.0
                )
                self._session(client)
                break
            except Stopped:
                self.applier.finish_inflight(client)
                break
            except (ModelClosed, ModelNotFound) as exc:
                self.refused = self._is_current()
                log.info(
                    "model %r: %s; its stream consumer stops",
                    self.name,
                    exc if self.refused else "deleted or replaced",
                )
                self.applier.finish_inflight(client)
                try:
                    if self.lease is None:  # clustered: the coordinator releases its lease
                        client.eval(redis_ops.LEASE_RELEASE, 1, self.lease_key, self.token)
                except Exception:
                    pass
                break
            except _Reconnect as exc:
                log.info("model %r: %s; restarting the stream session", self.name, exc)
                self.reconnects += 1
                backoff = 0.1
            except (LeaseLost, fencing.Fenced) as exc:
                self.last_error = str(exc)
                log.warning("model %r: %s", self.name, exc)
                if self.lease is not None:  # clustered: the model has moved; never retake it
                    self.lost = True
                    break
            except errors as exc:
                self.connected = False
                self.reconnects += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "model %r: Redis unavailable (%s); reconnecting in %.1f s",
                    self.name,
                    self.last_error,
                    backoff,
                )
                if self._stop.wait(backoff):
                    break
                backoff = min(backoff * 2, self.settings.stream_reconnect_max_s)
                continue
            except Exception as exc:  # a bug or an unexpected reply: log, back off, start over
                self.connected = False
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("model %r: stream consumer error; restarting in %.1f s", self.name, backoff)
                if self._stop.wait(backoff):
                    break
                backoff = min(backoff * 2, self.settings.stream_reconnect_max_s)
                continue
            finally:
                self.connected = False
                if client is not None:
                    try:
                        client.close()
                    except Exception:
                        pass
            if self._stop.wait(0.05):
                break

    def _acquire_lease(self, client) -> None:
        if self.lease is not None:  # clustered: the coordinator took it; check it is still ours
            if client.eval(fencing.RENEW, 1, self.lease_key, self.token, self.lease.ttl_ms) == -1:
                raise LeaseLost(f"the lease {self.lease_key} is not ours any more")
            self._lease_at = time.monotonic()
            return
        ttl = int(self.settings.stream_lease_s * 1000)
        waited = False
        while not client.eval(redis_ops.LEASE_ACQUIRE, 1, self.lease_key, self.token, ttl):
            if not waited:
                holder = client.get(self.lease_key)
                log.warning(
                    "model %r: lease %s held by %r; waiting for it to expire",
                    self.name,
                    self.lease_key,
                    holder,
                )
                waited = True
            self._sleep(min(1.0, self.settings.stream_lease_s / 4))
        self._lease_at = time.monotonic()

    def _renew_lease(self, client) -> None:
        now = time.monotonic()
        if self.lease is not None:  # clustered: the coordinator's heartbeat renews it, and every
            return  # read and ack of this consumer checks it in Redis (docs/cluster.md)
        if now - self._lease_at < self.settings.stream_lease_s / 4:
            return
        if not client.eval(
            redis_ops.LEASE_RENEW, 1, self.lease_key, self.token, int(self.settings.stream_lease_s * 1000)
        ):
            raise LeaseLost(f"lost the consumer lease {self.lease_key}")
        self._lease_at = now

    def _ensure_group(self, client) -> None:
        if redis_ops.ensure_group(client, self.key, self.group, self.settings.stream_start_id):
            log.info(
                "model %r: created consumer group %r on %r at %s",
                self.name,
                self.group,
                self.key,
                self.settings.stream_start_id,
            )

    def _claim_dead_consumers(self, client) -> None:
        """XAUTOCLAIM every entry pending for another consumer of the group (there is only
        one learning consumer per model, and we hold its lease: any other one is dead)."""
        if self.lease is not None:
            claimed = fencing.fenced_claim(
                client, self.key, self.lease_key, self.token, self.group, self.consumer
            )
            if claimed:
                log.info("model %r: claimed %d entries pending for former owners", self.name, claimed)
            return
        claimed = redis_ops.claim_dead_consumers(client, self.key, self.group, self.consumer)
        if claimed is not None:
            log.info("model %r: claimed %d pending entries of dead consumers", self.name, claimed)

    def _read(self, client, cursor: str, block: int | None) -> list[tuple[bytes, dict | None]]:
        if self.lease is not None:
            return self._fenced_read(client, cursor, block)
        try:
            reply = client.xreadgroup(
                self.group, self.consumer, {self.key: cursor}, count=self.settings.stream_count, block=block
            )
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                raise _Reconnect("the consumer group or stream vanished") from exc
            raise
        if not reply:
            return []
        return reply[0][1]

    def _fenced_read(self, client, cursor: str, block: int | None) -> list[tuple[bytes, dict | None]]:
        """A clustered read: XREADGROUP inside the lease check (:class:`fencing.FencedReader`); on
        no new entries, wait with a plain XREAD BLOCK from the newest one (the group is
        untouched, so a learner that loses the lease meanwhile has taken nothing)."""
        try:
            entries, newest = self.reader.read(
                client, self.key, self.lease_key, self.token, self.group, self.consumer, cursor
            )
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                raise _Reconnect("the consumer group or stream vanished") from exc
            raise
        if not entries and block is not None and newest is not None:
            if self.waiter is not None:  # one XREAD for every idle model of the server
                self.waiter.wait(self.key, as_str(newest), max(block / 1000.0, IDLE_WAIT_S), self._stop)
            else:
                client.xread({self.key: newest}, count=1, block=block)
        return entries

    def _session(self, client) -> None:
        self._acquire_lease(client)
        self._ensure_group(client)
        self.connected = True
        self.last_error = None
        self._claim_dead_consumers(client)
        # recovery: this consumer's pending entries, in ID order
        cursor = "0"
        recovered = 0
        while True:
            self._check_model()
            entries = self._read(client, cursor, None)
            if not entries:
                break
            cursor = as_str(entries[-1][0])
            recovered += len(entries)
            self.applier.process(client, entries)
            self._housekeeping(client)
        if recovered:
            log.info(
                "model %r: recovery re-read %d pending entries (applied after %s)",
                self.name,
                recovered,
                format_id(self.applier.last_id) if self.applier.last_id else "none",
            )
        # steady state
        while True:
            self._check_model()
            if self._stop.is_set():
                raise Stopped
            entries = self._read(client, ">", self.settings.stream_block_ms)
            if entries:
                self.applier.process(client, entries)
                if len(entries) < self.settings.stream_count and self.lease is not None and self.waiter:
                    # drained: wait from the last entry read, without an empty fenced read first
                    block_s = max(self.settings.stream_block_ms / 1000.0, IDLE_WAIT_S)
                    self.waiter.wait(self.key, as_str(entries[-1][0]), block_s, self._stop)
            self._housekeeping(client)

    def _snapshot(self) -> None:
        try:
            self.registry.snapshot(self.handle)
        except fencing.Fenced as exc:  # clustered: the model moved; its new owner snapshots it
            log.info("model %r: %s", self.name, exc)
        except Exception:
            log.exception("model %r: snapshot requested by the stream consumer failed", self.name)

    def _is_current(self) -> bool:
        """Whether the handle is still the registry's live model of that name."""
        try:
            return not self.handle.closed and self.registry.get(self.name) is self.handle
        except ModelNotFound:
            return False

    def _check_model(self) -> None:
        if not self._is_current():
            raise ModelClosed(self.name)

    def _housekeeping(self, client) -> None:
        self.applier.collect_done(client, block=False)
        if self.applier.since_snapshot >= self.settings.stream_snapshot_every and not (
            self._snapshotter is not None and self._snapshotter.is_alive()
        ):
            # in a thread of its own: the write and its fsync never stall the reading
            self.applier.since_snapshot = 0
            self._snapshotter = threading.Thread(
                target=self._snapshot, name=f"snapshot-{self.name}", daemon=True
            )
            self._snapshotter.start()
        self.applier.ack_durable(client)
        self._renew_lease(client)
        self._refresh_status(client)
