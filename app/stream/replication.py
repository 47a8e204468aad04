"""Prediction replicas follow a learner through Redis (``docs/deployment.md``).

The learner (``svmstream serve``, role ``learner``, with ``SVMSTREAM_REDIS_URL``) runs a
:class:`SnapshotPublisher`: after each snapshot it writes the snapshot's *serving encoding*
(:mod:`svmstream.app.models.serving`: the saved state without the rows kept only for learning,
encoded from memory, not re-read from the file) to Redis and announces the version.  A replica
(``svmstream serve --role replica``) runs a :class:`SnapshotFollower`: it loads every newer
version and swaps it in (``Registry.install``), so its predictions are the learner's of that
version, exactly (the same saved model; its counters and figures too).

Keys (``{model}``: the model's name):

=====================================  =================================================
``svmstream:replication:versions``     hash model -> newest published version
``svmstream:replication:{model}``      hash ``version``, ``serving`` (the serving encoding)
``svmstream:replication:learner``      the learner's advertised URL (named by 409s)
``svmstream:replication:events``       pub/sub channel: ``{"model", "version"}`` JSON
=====================================  =================================================

A snapshot's bytes and version are written in one MULTI/EXEC (which also removes a ``blob``
field, the whole snapshot file that earlier versions published; a replica reads it when
``serving`` is absent, so replicas can be upgraded before their learner), before the versions hash and
the announcement, so a reader never sees a version without its bytes.  At start the publisher
first republishes every restored model whose published version differs from its newest
snapshot's (written while Redis was away, or by a shutdown that could not publish it), and the
learner's shutdown stops the publisher only after its final snapshots are published, so a
graceful restart never leaves replicas on an older version.  Replicas react to
the announcement at once and also compare the versions hash every ``poll_s`` (a missed
message, a restarted Redis); a model missing from the hash is deleted on the replica.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any

from svmstream.app.models.serving import decode_serving, serving_state
from svmstream.app.models.snapshots import decode_snapshot
from svmstream.app.stream.fencing import PUBLISH
from svmstream.solvers.persistence import CorruptStateError, decode_state, encode_state

log = logging.getLogger("svmstream.replication")

PREFIX = "svmstream:replication"
VERSIONS_KEY = f"{PREFIX}:versions"
LEARNER_KEY = f"{PREFIX}:learner"
CHANNEL = f"{PREFIX}:events"


def model_key(name: str) -> str:
    """The hash holding model ``name``'s newest snapshot bytes and version."""
    return f"{PREFIX}:{name}"


class SnapshotPublisher:
    """Learner side: copies each new snapshot to Redis and announces it.

    Register :meth:`on_snapshot` as a registry snapshot listener; the copying runs on the
    publisher's own thread (listeners must be quick).

    Parameters
    ----------
    client : redis.Redis — a client of the learner's Redis
    registry : the learner's :class:`~svmstream.app.models.registry.Registry`
    advertise_url : str or None — the learner's URL, named by the replicas' 409 answers
    reconcile_s : float — how often models deleted on the learner are removed from Redis
    fence : callable, optional — a clustered learner (``docs/cluster.md``): model name ->
        ``(lease key, token)`` or None; a version is written only while that lease is ours
        (one Lua script, :data:`svmstream.app.stream.fencing.PUBLISH`)
    names : callable, optional — the models of the deployment (default: this registry's)
    """

    def __init__(
        self,
        client,
        registry,
        advertise_url: str | None = None,
        reconcile_s: float = 2.0,
        fence=None,
        names=None,
    ):
        self.client = client
        self.registry = registry
        self.advertise_url = advertise_url
        self.reconcile_s = reconcile_s
        self.fence = fence
        self.names = names or registry.names
        self._queue: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="snapshot-publisher", daemon=True)
        self.published = 0

    def start(self) -> SnapshotPublisher:
        if self.advertise_url:
            self.client.set(LEARNER_KEY, self.advertise_url)
        self._thread.start()
        return self

    def on_snapshot(self, handle, view, path: str, arrays=None, meta=None) -> None:
        """Snapshot state listener (``Registry.snapshot_state_listeners``): queue the serving
        state (:func:`~svmstream.app.models.serving.serving_state`, no copy) of the saved
        ``arrays`` and ``meta`` of ``(model, version)`` for publishing — the queue does not keep
        the rows held for learning alive; without them, the file at ``path`` is read."""
        serving = serving_state(arrays, meta) if arrays is not None and meta is not None else None
        self._queue.put((handle.name, int(view.version), path, serving))

    def queue(self, name: str, version: int, path: str) -> None:
        """Publish the snapshot file at ``path`` (a model just gained from another learner)
        unless Redis already has that version."""
        self._queue.put((name, int(version), path, None, True))

    def _run(self) -> None:
        try:
            self.republish_restored()
        except Exception:  # Redis down at start: the next snapshot of each model publishes it
            log.exception("replication: republishing the restored models failed")
        next_reconcile = time.monotonic() + self.reconcile_s
        while True:
            try:
                item = self._queue.get(timeout=max(0.05, next_reconcile - time.monotonic()))
            except queue.Empty:
                item = ()
            if item is None:
                return
            try:
                if item:
                    self.publish(*item)
                if time.monotonic() >= next_reconcile:
                    self.reconcile()
                    next_reconcile = time.monotonic() + self.reconcile_s
            except Exception:  # Redis down: the next snapshot (or reconcile) retries
                log.exception("replication: publishing failed")

    def publish(self, name: str, version: int, path: str, serving=None, unless_published=False) -> bool:
        """Write one snapshot's serving encoding and version to Redis and announce it.  The
        encoding is made from ``serving``, the :func:`~svmstream.app.models.serving.serving_state`
        of a snapshot just written, else from the file at ``path``; False if that file was
        already pruned (a newer snapshot is queued behind it) or does not decode (logged), or,
        with ``unless_published``, when Redis already has that version (a gained model that its
        last owner published: nothing is read or decoded)."""
        if unless_published and self._has(name, version):
            return False
        if serving is None:
            try:
                serving = serving_state(*decode_state(Path(path).read_bytes()))
            except FileNotFoundError:
                return False
            except (CorruptStateError, KeyError) as exc:  # KeyError: no service metadata
                log.warning("replication: snapshot %s not published: %s", path, exc)
                return False
        started = time.perf_counter()
        blob = encode_state(*serving)
        encoded = time.perf_counter()
        if self.fence is not None:
            return self._publish_fenced(name, version, blob)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(model_key(name), mapping={"version": version, "serving": blob})
        pipe.hdel(model_key(name), "blob")
        pipe.hset(VERSIONS_KEY, name, version)
        pipe.publish(CHANNEL, json.dumps({"model": name, "version": version}))
        pipe.execute()
        self.published += 1
        log.debug(
            "replication: model %r version %d published: %d bytes, encoded in %.3f s, written in %.3f s",
            name,
            version,
            len(blob),
            encoded - started,
            time.perf_counter() - encoded,
        )
        return True

    def _has(self, name: str, version: int) -> bool:
        got = self.client.hget(VERSIONS_KEY, name)
        return got is not None and int(got) == int(version)

    def _publish_fenced(self, name: str, version: int, blob: bytes) -> bool:
        held = self.fence(name)
        announce = json.dumps({"model": name, "version": version})
        keys = (model_key(name), VERSIONS_KEY, CHANNEL)
        if (
            held is None
            or self.client.eval(PUBLISH, 4, held[0], *keys, held[1], name, version, blob, announce) != 1
        ):
            log.info("replication: model %r version %d not published: its lease is not ours", name, version)
            return False
        self.published += 1
        return True

    def republish_restored(self) -> int:
        """Publish the newest snapshot of each model whose version in Redis differs from it
        (missing, or older: written while Redis was unreachable or during a shutdown);
        returns how many were published."""
        published = {
            (k.decode() if isinstance(k, bytes) else k): int(v)
            for k, v in self.client.hgetall(VERSIONS_KEY).items()
        }
        count = 0
        for handle in self.registry.handles():
            path, version = handle.last_snapshot_path, handle.saved_version
            if path is None or version is None or published.get(handle.name) == int(version):
                continue
            if self.publish(handle.name, int(version), path):
                count += 1
        if count:
            log.info("replication: republished %d restored models", count)
        return count

    def reconcile(self) -> None:
        """Remove from Redis the models the learner no longer has."""
        names = set(self.names())
        for raw in self.client.hkeys(VERSIONS_KEY):
            name = raw.decode() if isinstance(raw, bytes) else raw
            if name not in names:
                pipe = self.client.pipeline(transaction=True)
                pipe.hdel(VERSIONS_KEY, name)
                pipe.delete(model_key(name))
                pipe.publish(CHANNEL, json.dumps({"model": name, "version": None}))
                pipe.execute()

    def stop(self, timeout: float = 10.0) -> None:
        """Publish what is queued (the final snapshots: call it after them), then stop."""
        self._queue.put(None)
        self._thread.join(timeout=timeout)
        if self._thread.is_alive():
            log.warning("replication: publishing the queued snapshots took over %.0f s; stopped", timeout)


class SnapshotFollower:
    """Replica side: installs every snapshot the learner publishes.

    Parameters
    ----------
    client : redis.Redis — a client of the learner's Redis
    registry : the replica's :class:`~svmstream.app.models.registry.Registry`
    poll_s : float — how often the versions hash is compared besides the announcements
    wanted : callable name -> bool or None — which models to follow (None: all)
    """

    def __init__(self, client, registry, poll_s: float = 1.0, wanted=None):
        self.client = client
        self.registry = registry
        self.poll_s = poll_s
        # name -> bool: follow this model? (a clustered learner follows only the models other
        # learners own, docs/cluster.md); None: every model
        self.wanted = wanted
        self.installed: dict[str, int] = {}
        self.learner_url: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-follower", daemon=True)

    def start(self) -> SnapshotFollower:
        self._thread.start()
        return self

    def _run(self) -> None:
        pubsub = None
        next_poll = 0.0
        while not self._stop.is_set():
            try:
                if pubsub is None:
                    pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                    pubsub.subscribe(CHANNEL)
                    next_poll = 0.0  # (re)connected: compare everything now
                if time.monotonic() >= next_poll:
                    self.sync()
                    next_poll = time.monotonic() + self.poll_s
                message = pubsub.get_message(timeout=min(0.5, self.poll_s))
                if message is not None and message.get("type") == "message":
                    event = json.loads(message["data"])
                    self.sync_model(str(event["model"]), event.get("version"))
            except Exception:  # Redis unreachable: keep serving what we have, retry
                log.warning("replication: following the learner failed; retrying", exc_info=True)
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:
                        pass
                pubsub = None
                self._stop.wait(1.0)
        if pubsub is not None:
            pubsub.close()

    def sync(self) -> None:
        """Compare the versions hash with what is installed: load newer, drop deleted."""
        raw_url = self.client.get(LEARNER_KEY)
        self.learner_url = raw_url.decode() if isinstance(raw_url, bytes) else raw_url
        versions = {
            (k.decode() if isinstance(k, bytes) else k): int(v)
            for k, v in self.client.hgetall(VERSIONS_KEY).items()
        }
        for name, version in versions.items():
            self.sync_model(name, version)
        for name in list(self.installed):
            if name not in versions:
                self.sync_model(name, None)

    def sync_model(self, name: str, version: Any) -> None:
        """Install model ``name``'s published snapshot if newer than ours (``version`` None:
        the learner deleted it).  Bytes that do not decode are logged and skipped (the model
        stays at its version; the next announcement or poll tries again)."""
        unwanted = version is not None and self.wanted is not None and not self.wanted(name)
        if version is None or unwanted:  # deleted, or not followed here (owned here now)
            if self.installed.pop(name, None) is not None and name in self.registry:
                self.registry.delete(name)
                log.info(
                    "replica: model %r %s",
                    name,
                    "not followed here" if unwanted else "deleted on the learner",
                )
            return
        if self.installed.get(name, -1) >= int(version):
            return
        started = time.perf_counter()
        serving, whole = self.client.hmget(model_key(name), ["serving", "blob"])
        fetched = time.perf_counter()
        if serving is None and whole is None:
            return
        try:
            restored = decode_serving(serving) if serving is not None else decode_snapshot(whole)
        except CorruptStateError as exc:  # kept: the current version; other models go on
            log.warning("replica: model %r version %s does not decode (%s); retried", name, version, exc)
            return
        decoded = time.perf_counter()
        if self.installed.get(name, -1) >= restored.version:
            return
        self.registry.install(restored, follower_of=self.learner_url or "the learner")
        self.installed[name] = restored.version
        log.info(
            "replica: model %r now at version %d (%.3f s after its snapshot by this host's clock; "
            "fetched in %.3f s, decoded in %.3f s, installed in %.3f s)",
            name,
            restored.version,
            time.time() - restored.saved_at,
            fetched - started,
            decoded - fetched,
            time.perf_counter() - decoded,
        )

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)
