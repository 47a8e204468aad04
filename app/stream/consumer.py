"""Redis stream ingestion: one learning consumer per model, exactly-once by ack-on-snapshot.

Each streamed model ``m`` reads the stream ``svmstream:{m}:examples`` (``STREAM_KEY``)
through its consumer group ``svmstream:{m}`` (``STREAM_GROUP``) as the consumer
``learner`` (``STREAM_CONSUMER``), in a thread of its own (:class:`StreamConsumer`).
The format of an entry and the whole protocol are documented in ``docs/stream.md``;
in short:

* **Read** ``XREADGROUP ... COUNT STREAM_COUNT BLOCK STREAM_BLOCK_MS``; the entries of one
  read are validated one by one (:func:`app.batches.parse_stream_entries`, the same checks
  as HTTP) and the good ones are applied with **one** ``Registry.learn`` call (one
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
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from svmstream.app.ingest.batches import BatchError, parse_stream_entries
from svmstream.app.models.registry import LearnerBusy, ModelClosed, ModelHandle, ModelNotFound, ModelView, Registry
from svmstream.app.settings import Settings

log = logging.getLogger("svmstream.stream")

StreamId = tuple[int, int]

_ACQUIRE = """
local v = redis.call('get', KEYS[1])
if (not v) or v == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def parse_id(value: bytes | str) -> StreamId:
    """``b"1700000000000-5"`` -> ``(1700000000000, 5)`` (stream IDs order as these tuples)."""
    text = value.decode() if isinstance(value, (bytes, bytearray)) else value
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def format_id(sid: StreamId) -> str:
    return f"{sid[0]}-{sid[1]}"


def next_id(sid: StreamId) -> StreamId:
    """The smallest stream ID greater than ``sid``."""
    return (sid[0], sid[1] + 1)


class LeaseLost(RuntimeError):
    """Another process holds (or took) this model's consumer lease."""


class Stopped(Exception):
    """The consumer was asked to stop."""


class _Reconnect(Exception):
    """End the session and run the recovery again (e.g. the group vanished)."""


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError,
            redis.exceptions.ReadOnlyError)


def make_client(url: str, *, timeout: float = 10.0):
    """A redis-py client without automatic command retries.

    A retried ``XREADGROUP ... >`` whose first reply was lost would silently skip the
    entries it had delivered; instead every error ends the session and the recovery
    re-reads the pending entries in order.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=3.0,
        retry=Retry(NoBackoff(), 0), health_check_interval=0, protocol=2,
    )
    # raw XREADGROUP replies ([[key, [[id, [field, value, ...]], ...]]]): the entries are
    # validated from the flat field lists, without building a dict per entry first
    client.set_response_callback("XREADGROUP", _raw_reply)
    return client


def _raw_reply(response, **options):
    return response


def fields_dict(fields) -> dict:
    """An entry's fields as a dict (from redis-py's dict or a raw flat list)."""
    if fields is None:
        return {}
    if isinstance(fields, dict):
        return fields
    return dict(zip(fields[::2], fields[1::2]))


@dataclass
class _Pending:
    """A batch handed to the learner, not yet acknowledged."""

    future: Future | None
    ids: list[bytes]            # every entry ID to acknowledge once durable (applied and skipped ones)
    entries: list[tuple[bytes, dict]]  # the applied entries (dead-lettered if learning fails)
    max_id: StreamId
    n: int


class StreamConsumer:
    """The learning consumer of one model's stream (a daemon thread).

    Parameters
    ----------
    registry : Registry
    handle : ModelHandle
        The model it feeds; the consumer stops when the model is deleted or replaced.
    settings : Settings
        ``redis_url`` and the ``stream_*`` settings.
    """

    MAX_INFLIGHT = 2

    def __init__(self, registry: Registry, handle: ModelHandle, settings: Settings):
        self.registry = registry
        self.handle = handle
        self.settings = settings
        self.name = handle.name
        self.key, self.dead_key, self.group = settings.stream_keys(handle.name)
        self.consumer = settings.stream_consumer
        self.lease_key = f"{self.key}:lease"
        self.token = f"{self.consumer}|{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        view = handle.view
        restored = self._view_id(view)
        #: last entry handed to the model (entries at or below it are never applied again)
        self.last_id: StreamId | None = restored
        #: last entry covered by a snapshot on disk
        self.durable_id: StreamId | None = restored if handle.saved_version == view.version else None
        self._unacked: deque[_Pending] = deque()
        self._inflight: deque[_Pending] = deque()
        self._since_snapshot = 0
        self._failed: list[tuple[_Pending, str]] = []
        self._snapshotter: threading.Thread | None = None
        self._lease_at = 0.0
        self._status: dict[str, Any] = {}
        self._status_at = 0.0
        self.connected = False
        self.applied = 0
        self.dead_letters = 0
        self.skipped = 0
        self.acked = 0
        self.reconnects = 0
        self.last_error: str | None = None
        #: the consumer stopped because its (still current) model refused to learn
        self.refused = False
        handle.stream_status = self.status

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "StreamConsumer":
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the thread to stop (it finishes the batches in flight)."""
        self._stop.set()

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

    def _view_id(self, view: ModelView) -> StreamId | None:
        extra = view.extra or {}
        sid = extra.get("stream_last_id")
        if sid is None:
            return None
        if extra.get("stream_key") not in (None, self.key):
            log.warning("model %r: its snapshot recorded stream %r, now consuming %r: not skipping by ID",
                        self.name, extra.get("stream_key"), self.key)
            return None
        return parse_id(sid)

    # ------------------------------------------------------------------ snapshots -> acks
    def on_snapshot(self, view: ModelView) -> None:
        """A snapshot of ``view`` is on disk: its entries may be acknowledged."""
        sid = self._view_id(view)
        with self._lock:
            self._since_snapshot = 0
            if sid is not None and (self.durable_id is None or sid > self.durable_id):
                self.durable_id = sid

    def _durable_ids(self) -> tuple[list[bytes], list[_Pending]]:
        with self._lock:
            durable = self.durable_id
        ids: list[bytes] = []
        done: list[_Pending] = []
        if durable is None:
            return ids, done
        while self._unacked and self._unacked[0].max_id <= durable:
            item = self._unacked.popleft()
            done.append(item)
            ids.extend(item.ids)
        return ids, done

    def _ack_durable(self, client) -> None:
        ids, done = self._durable_ids()
        if not ids:
            return
        try:
            pipe = client.pipeline(transaction=False)
            for start in range(0, len(ids), 10_000):
                pipe.xack(self.key, self.group, *ids[start:start + 10_000])
            pipe.execute()
        except BaseException:
            self._unacked.extendleft(reversed(done))  # retried after the reconnect
            raise
        self.acked += len(ids)
        if self.settings.stream_trim:
            self._trim(client, max(d.max_id for d in done))

    def _trim(self, client, acked: StreamId) -> None:
        """``XTRIM MINID`` just above ``acked``, lowered to what other groups still need."""
        bound = next_id(acked)
        for group in client.xinfo_groups(self.key):
            gname = group["name"].decode() if isinstance(group["name"], bytes) else group["name"]
            if gname == self.group:
                continue
            if group.get("pending"):
                lowest = client.xpending(self.key, gname).get("min")
                if lowest is not None:
                    bound = min(bound, parse_id(lowest))
            bound = min(bound, next_id(parse_id(group["last-delivered-id"])))
        if self.settings.stream_trim_exact:
            client.xtrim(self.key, minid=format_id(bound), approximate=False)
        else:  # LIMIT 0: no cap on the entries removed per call (the default cap is 100 nodes)
            client.xtrim(self.key, minid=format_id(bound), approximate=True, limit=0)

    def flush(self, timeout: float = 5.0) -> int:
        """Acknowledge what the final snapshot covers (called once the thread has stopped).

        Returns the number of entries acknowledged (0 when Redis is unreachable: they are
        then skipped by ID at the next start)."""
        before = self.acked
        try:
            client = make_client(self.settings.redis_url, timeout=timeout)
            try:
                self._ack_durable(client)
                client.eval(_RELEASE, 1, self.lease_key, self.token)
            finally:
                client.close()
        except Exception as exc:
            log.warning("model %r: final acknowledgement failed (%s); entries are skipped by ID at restart",
                        self.name, exc)
        return self.acked - before

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """Stream figures for ``GET /models/{name}`` and ``/metrics`` (cached XINFO)."""
        with self._lock:
            durable = self.durable_id
        out = {
            "key": self.key, "dead_key": self.dead_key, "group": self.group, "consumer": self.consumer,
            "connected": self.connected,
            "applied": self.applied, "dead_letters": self.dead_letters, "skipped_duplicates": self.skipped,
            "acknowledged": self.acked,
            "last_applied_id": format_id(self.last_id) if self.last_id else None,
            "last_acked_id": format_id(durable) if durable else None,
            "reconnects": self.reconnects, "last_error": self.last_error,
        }
        out.update(self._status)
        return out

    def _refresh_status(self, client) -> None:
        now = time.monotonic()
        if now - self._status_at < self.settings.stream_info_interval_s:
            return
        self._status_at = now
        pipe = client.pipeline(transaction=False)
        pipe.xinfo_groups(self.key)
        pipe.xlen(self.key)
        pipe.xinfo_stream(self.key)
        pipe.xlen(self.dead_key)
        groups, length, info, dead_len = pipe.execute()
        mine = next((g for g in groups if (g["name"].decode() if isinstance(g["name"], bytes) else g["name"])
                     == self.group), None)
        pending = int(mine["pending"]) if mine else None
        lag = mine.get("lag") if mine else None
        if lag is None and pending is not None:
            # Redis < 7 has no "lag": undelivered = length - pending - acknowledged entries the
            # (approximate) trimming left behind (a few, at or below the last acked ID)
            with self._lock:
                durable = self.durable_id
            left = 0
            if durable is not None:
                left = len(client.xrange(self.key, "-", format_id(durable), count=1001))
            lag = max(0, int(length) - pending - left) if left <= 1000 else None
        newest = info.get("last-generated-id")
        lag_s = None
        if newest is not None and self.last_id is not None:
            lag_s = max(0.0, (parse_id(newest)[0] - self.last_id[0]) / 1000.0)
        self._status = {"length": int(length), "pending": pending, "lag": None if lag is None else int(lag),
                        "lag_seconds": lag_s, "dead_letter_length": int(dead_len),
                        "last_generated_id": newest.decode() if isinstance(newest, bytes) else newest}

    # ------------------------------------------------------------------ the thread
    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Stopped

    def _run(self) -> None:
        errors = _redis_errors()
        backoff = 0.1
        while not self._stop.is_set():
            client = None
            try:
                client = make_client(self.settings.redis_url, timeout=self.settings.stream_block_ms / 1000.0 + 10.0)
                self._session(client)
                break
            except Stopped:
                self._finish_inflight(client)
                break
            except (ModelClosed, ModelNotFound) as exc:
                self.refused = self._is_current()
                log.info("model %r: %s; its stream consumer stops", self.name,
                         exc if self.refused else "deleted or replaced")
                self._finish_inflight(client)
                try:
                    client.eval(_RELEASE, 1, self.lease_key, self.token)
                except Exception:
                    pass
                break
            except _Reconnect as exc:
                log.info("model %r: %s; restarting the stream session", self.name, exc)
                self.reconnects += 1
                backoff = 0.1
            except LeaseLost as exc:
                self.last_error = str(exc)
                log.warning("model %r: %s", self.name, exc)
            except errors as exc:
                self.connected = False
                self.reconnects += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("model %r: Redis unavailable (%s); reconnecting in %.1f s", self.name, self.last_error, backoff)
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
        ttl = int(self.settings.stream_lease_s * 1000)
        waited = False
        while not client.eval(_ACQUIRE, 1, self.lease_key, self.token, ttl):
            if not waited:
                holder = client.get(self.lease_key)
                log.warning("model %r: lease %s held by %r; waiting for it to expire", self.name, self.lease_key, holder)
                waited = True
            self._sleep(min(1.0, self.settings.stream_lease_s / 4))
        self._lease_at = time.monotonic()

    def _renew_lease(self, client) -> None:
        now = time.monotonic()
        if now - self._lease_at < self.settings.stream_lease_s / 4:
            return
        if not client.eval(_RENEW, 1, self.lease_key, self.token, int(self.settings.stream_lease_s * 1000)):
            raise LeaseLost(f"lost the consumer lease {self.lease_key}")
        self._lease_at = now

    def _ensure_group(self, client) -> None:
        import redis

        try:
            client.xgroup_create(self.key, self.group, id=self.settings.stream_start_id, mkstream=True)
            log.info("model %r: created consumer group %r on %r at %s", self.name, self.group, self.key,
                     self.settings.stream_start_id)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _claim_dead_consumers(self, client) -> None:
        """XAUTOCLAIM every entry pending for another consumer of the group (there is only
        one learning consumer per model, and we hold its lease: any other one is dead)."""
        others = [c for c in client.xinfo_consumers(self.key, self.group)
                  if (c["name"].decode() if isinstance(c["name"], bytes) else c["name"]) != self.consumer]
        if not any(int(c.get("pending", 0)) for c in others):
            for c in others:
                client.xgroup_delconsumer(self.key, self.group, c["name"])
            return
        start = "0-0"
        claimed = 0
        while True:
            reply = client.xautoclaim(self.key, self.group, self.consumer, min_idle_time=0, start_id=start,
                                      count=1000)
            cursor, entries = reply[0], reply[1]
            claimed += len(entries)
            start = cursor.decode() if isinstance(cursor, bytes) else cursor
            if start == "0-0":
                break
        for c in others:
            client.xgroup_delconsumer(self.key, self.group, c["name"])
        log.info("model %r: claimed %d pending entries of dead consumers", self.name, claimed)

    def _read(self, client, cursor: str, block: int | None) -> list[tuple[bytes, dict | None]]:
        import redis

        try:
            reply = client.xreadgroup(self.group, self.consumer, {self.key: cursor},
                                      count=self.settings.stream_count, block=block)
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                raise _Reconnect("the consumer group or stream vanished") from exc
            raise
        if not reply:
            return []
        return reply[0][1]

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
            cursor = entries[-1][0].decode() if isinstance(entries[-1][0], bytes) else entries[-1][0]
            recovered += len(entries)
            self._process(client, entries)
            self._housekeeping(client)
        if recovered:
            log.info("model %r: recovery re-read %d pending entries (applied after %s)", self.name, recovered,
                     format_id(self.last_id) if self.last_id else "none")
        # steady state
        while True:
            self._check_model()
            if self._stop.is_set():
                raise Stopped
            entries = self._read(client, ">", self.settings.stream_block_ms)
            if entries:
                self._process(client, entries)
            self._housekeeping(client)

    def _snapshot(self) -> None:
        try:
            self.registry.snapshot(self.handle)
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
        self._collect_done(client, block=False)
        if self._since_snapshot >= self.settings.stream_snapshot_every and not (
                self._snapshotter is not None and self._snapshotter.is_alive()):
            # in a thread of its own: the write and its fsync never stall the reading
            self._since_snapshot = 0
            self._snapshotter = threading.Thread(target=self._snapshot, name=f"snapshot-{self.name}", daemon=True)
            self._snapshotter.start()
        self._ack_durable(client)
        self._renew_lease(client)
        self._refresh_status(client)

    # ------------------------------------------------------------------ one read
    def _process(self, client, entries: list[tuple[bytes, dict | None]]) -> None:
        """Skip what the model already has, dead-letter bad entries, apply the rest."""
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
            log.error("model %r: %d pending entries were deleted from the stream before being applied "
                      "(first %s); acknowledging them", self.name, len(gone), gone[0])
            client.xack(self.key, self.group, *gone)
        if skip_ids:
            self.skipped += len(skip_ids)
            self._unacked.append(_Pending(None, skip_ids, [], parse_id(skip_ids[-1]), 0))
        if not fresh:
            return
        batch = self._parse(fresh)
        if batch.rejected:
            self._dead_letter(client, [(fresh[i][0], fields_dict(fresh[i][1]), reason) for i, reason in batch.rejected])
        if batch.good.size == 0:
            return
        good = [fresh[i] for i in batch.good.tolist()]
        last_good = good[-1][0]
        extra = {"stream_key": self.key, "stream_last_id": last_good.decode() if isinstance(last_good, bytes) else last_good}
        future = self._submit(batch, fresh, extra)
        self.last_id = parse_id(last_good)
        item = _Pending(future, [eid for eid, _ in good], good, self.last_id, len(good))
        self._inflight.append(item)
        self._unacked.append(item)
        while len(self._inflight) >= self.MAX_INFLIGHT:
            self._collect_done(client, block=True)

    def _parse(self, fresh):
        return parse_stream_entries([f for _, f in fresh], self.handle.codec, self.handle.n_features, self.name)

    def _submit(self, batch, fresh, extra) -> Future:
        while True:
            try:
                return self.registry.learn(self.name, batch.X, batch.y, extra=extra)
            except LearnerBusy:
                self._sleep(0.01)
            except BatchError as exc:  # d was fixed meanwhile by another writer: validate again
                log.info("model %r: re-validating a stream batch (%s)", self.name, exc)
                batch2 = self._parse(fresh)
                if batch2.good.size != batch.good.size or not np.array_equal(batch2.good, batch.good):
                    raise RuntimeError("stream batch changed on re-validation") from exc
                batch = batch2

    def _collect_done(self, client, block: bool) -> None:
        while self._inflight and (block or self._inflight[0].future.done()):
            item = self._inflight.popleft()
            try:
                item.future.result()
            except Exception as exc:  # the learner rolled the model back
                log.error("model %r: learning a stream batch failed (%s); dead-lettering its %d entries",
                          self.name, exc, item.n)
                self._failed.append((item, f"learning failed: {type(exc).__name__}: {exc}"))
                item.ids = []
                continue
            item.entries = []  # applied: the fields are no longer needed for dead-lettering
            self.applied += item.n
            self._since_snapshot += item.n
            block = False
        if self._failed and client is not None:
            failed = self._failed
            self._dead_letter(client, [(eid, fields_dict(f), reason) for item, reason in failed for eid, f in item.entries])
            self._failed = []

    def _finish_inflight(self, client) -> None:
        try:
            self._collect_done(client, block=True)
        except Exception:
            log.exception("model %r: finishing the batches in flight failed", self.name)

    def _dead_letter(self, client, bad: list[tuple[bytes, dict, str]]) -> None:
        """XADD each bad entry to the dead-letter stream and XACK it, atomically."""
        pipe = client.pipeline(transaction=True)
        now = str(time.time())
        for eid, fields, reason in bad:
            record = {b"reason": reason.encode(), b"source_id": eid, b"source_stream": self.key.encode(),
                      b"model": self.name.encode(), b"dead_at": now.encode()}
            for k, v in (fields or {}).items():
                kb = k.encode() if isinstance(k, str) else k
                record[b"f:" + kb] = v
            pipe.xadd(self.dead_key, record, maxlen=self.settings.stream_dead_maxlen, approximate=True)
        pipe.xack(self.key, self.group, *[eid for eid, _, _ in bad])
        pipe.execute()
        self.dead_letters += len(bad)
        log.info("model %r: %d entries dead-lettered to %s (first: %s: %s)", self.name, len(bad), self.dead_key,
                 bad[0][0], bad[0][2])


class StreamManager:
    """Starts one :class:`StreamConsumer` per streamed model and keeps that set in line
    with the registry (models created, replaced or deleted over HTTP)."""

    def __init__(self, registry: Registry, settings: Settings):
        self.registry = registry
        self.settings = settings
        self.consumers: dict[str, StreamConsumer] = {}
        self._retired: list[StreamConsumer] = []
        self._refused: "weakref.WeakSet[ModelHandle]" = weakref.WeakSet()
        self._lock = threading.Lock()
        registry.snapshot_listeners.append(self._on_snapshot)

    def _on_snapshot(self, handle: ModelHandle, view: ModelView, path: str) -> None:
        consumer = self.consumers.get(handle.name)
        if consumer is not None and consumer.handle is handle:
            consumer.on_snapshot(view)

    def reconcile(self) -> None:
        """Start consumers for new/replaced streamed models, stop those of deleted ones.

        Models trained by batch jobs (``BATCH_ALGORITHMS``) do not learn online and get no
        consumer; a consumer that stopped because its model refused to learn is not restarted
        for the same model."""
        from svmstream.app.models.config import BATCH_ALGORITHMS

        with self._lock:
            wanted = {h.name: h for h in self.registry.handles()
                      if self.settings.streamed(h.name) and h.config.algorithm not in BATCH_ALGORITHMS
                      and h not in self._refused}
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
                    self.consumers[name] = StreamConsumer(self.registry, handle, self.settings).start()
                    log.info("model %r: consuming stream %r", name, self.consumers[name].key)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every consumer and wait for their threads (batches in flight are applied)."""
        with self._lock:
            everyone = list(self.consumers.values()) + self._retired
            for consumer in everyone:
                consumer.stop()
            deadline = time.monotonic() + timeout
            for consumer in everyone:
                consumer.join(max(0.0, deadline - time.monotonic()))

    def flush(self) -> int:
        """After the final snapshots: acknowledge what they cover and release the leases."""
        return sum(c.flush() for c in self.consumers.values())


async def run_stream_manager(manager: StreamManager, interval_s: float = 0.5) -> None:
    """Reconcile the consumers with the registry every ``interval_s`` seconds until cancelled."""
    import asyncio

    while True:
        try:
            manager.reconcile()
        except Exception:  # keep the loop alive; logged with its traceback
            log.exception("stream manager: reconcile failed")
        await asyncio.sleep(interval_s)
