"""The coordinator of a clustered learner: gains, renews and hands off models.

Two daemon threads (``docs/cluster.md`` has the protocol and its failure cases):

* the **heartbeat** thread, every ``tick_s``: renews this member's heartbeat (and learns the
  live members) and every lease it holds, in two round trips.  A lease that is not ours any
  more is withdrawn at once (its model stops learning: :meth:`Coordinator.lease` answers None,
  the consumer is fenced).  When Redis does not answer for 60 % of the lease TTL, every lease
  is withdrawn (the member is cut off: it stops learning before its leases expire in Redis);
* the **coordinator** thread, every ``tick_s``: reads the catalogue, works out the models this
  member should own (:func:`~svmstream.app.cluster.rendezvous.owner` over the live members),
  hands off those it should not (stop the consumer, final snapshot, acknowledge, release the
  lease, drop the model here), and gains the others once their lease is free (take the lease
  with the next fence, restore the newest snapshot; the stream manager then starts the
  consumer, whose recovery resumes the group from the snapshot's position).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from typing import Any

from svmstream.app.cluster import leases as lease_ops
from svmstream.app.cluster import membership
from svmstream.app.cluster.leases import Lease
from svmstream.app.cluster.rendezvous import owner
from svmstream.app.cluster.report import BeatClock, ClusterMetrics, describe
from svmstream.app.errors import ModelNotFound
from svmstream.app.stream.fencing import Fenced
from svmstream.app.stream.redis_ops import make_client, redis_errors

__all__ = ["ClusterMetrics", "Coordinator", "default_member"]

log = logging.getLogger("svmstream.cluster")

#: Part of the lease TTL after which a member that cannot reach Redis withdraws its leases.
CUT_OFF_FRACTION = 0.6
#: Seconds to the next rebalance while a model we want is still held by a member that is gone
#: (its lease expires a few milliseconds after its heartbeat: the same beat renewed both).
RETRY_S = 0.05
#: Models per pipelined round trip of lease acquisitions; their consumers start once the chunk is
#: restored, so a small chunk lets the first models learn while the others are restored.
ACQUIRE_CHUNK = 50


def default_member() -> str:
    """``<hostname>-<pid>-<4 random hex>``: unique per process even where every start has the
    same hostname and pid (a container restarted by its restart policy runs as pid 1 again)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Coordinator:
    """Ownership of this learner's models (see the module docstring).

    Parameters
    ----------
    settings : Settings — ``redis_url``, ``cluster_*``, the stream keys
    registry : the learner's Registry (its store a FencedSnapshotStore)
    streams : the StreamManager (its ``leases`` callable is :meth:`lease`)
    publisher : the SnapshotPublisher or None
    metrics : ClusterMetrics or None
    """

    def __init__(self, settings, registry, streams=None, publisher=None, metrics=None, url=None):
        self.settings = settings
        self.registry = registry
        self.streams = streams
        self.publisher = publisher
        self.metrics = metrics
        self.url = url
        self.member = settings.cluster_member or default_member()
        self.ttl_ms = int(settings.cluster_lease_s * 1000)
        self.tick_s = min(0.5, settings.cluster_lease_s / 6)
        self.client = make_client(settings.redis_url, timeout=max(1.0, settings.cluster_lease_s / 3))
        self._beat_client = make_client(settings.redis_url, timeout=max(0.5, settings.cluster_lease_s / 4))
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._lost: list[Lease] = []  # withdrawn by the heartbeat, evicted by the coordinator
        self._orphans: set[str] = set()  # leased, not installed, files kept: seen last pass
        self._wanted_since: dict[str, float] = {}
        self._leaving: set[str] = set()  # models being handed off: no consumer starts for them
        self._gaining: set[str] = set()  # models of a gain pass: their consumers start at its end
        self.members: list[str] = []
        self._last_ok = time.monotonic()
        self.clock = BeatClock(self.tick_s, settings.cluster_lease_s)
        self.connected = False
        self._stop = threading.Event()
        self._wake = threading.Event()  # the member list changed: rebalance now
        self._beat_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.others = None  # the Registry of the models other learners own (service.follow_others)
        self.follower = None  # its SnapshotFollower

    # ------------------------------------------------------------------ what others ask
    def lease(self, name: str) -> Lease | None:
        """The lease this member holds on ``name`` (None: not ours, or being handed off; do not
        learn it)."""
        return None if name in self._leaving or name in self._gaining else self._leases.get(name)

    def token_of(self, name: str) -> tuple[str, str]:
        """``(lease key, token or '')`` for the fenced snapshot store."""
        held = self._leases.get(name)
        key = lease_ops.lease_keys(self.settings.stream_keys(name)[0])[0]
        return key, held.token if held is not None else ""

    def publish_token(self, name: str) -> tuple[str, str] | None:
        """``(lease key, token)`` for the fenced replication write, None when not ours."""
        held = self._leases.get(name)
        return None if held is None else (held.key, held.token)

    def owned(self) -> list[str]:
        return sorted(self._leases)

    def owner_of(self, name: str) -> str | None:
        """The member holding ``name``'s lease now (None: nobody, a hand-off is under way)."""
        return lease_ops.holder(self.client, self._stream_key(name))

    def catalogued(self, name: str) -> bool:
        return bool(self.client.sismember(membership.MODELS_KEY, name))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Coordinator:
        self._rebuild_catalogue()
        self._beat()
        for target, label in ((self._beat_loop, "cluster-heartbeat"), (self._run, "cluster-coordinator")):
            thread = threading.Thread(target=target, name=label, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("cluster: member %r joined; live members %s", self.member, self.members)
        return self

    def stop_rebalancing(self, timeout: float = 30.0) -> None:
        """No more gains or hand-offs (shutdown); the heartbeat thread keeps the leases until
        :meth:`leave`, after the final snapshots and acknowledgements."""
        self._stop.set()
        self._wake.set()
        if len(self._threads) > 1:
            self._threads[1].join(timeout)

    def leave(self) -> None:
        """After the final snapshots: stop the heartbeat, release every lease and leave (the
        others gain the models at once)."""
        self._beat_stop.set()
        if self.follower is not None:
            self.follower.stop(5.0)
        if self._threads:
            self._threads[0].join(5.0)
        try:
            for lease in list(self._leases.values()):
                lease_ops.release(self.client, lease)
            membership.leave(self.client, self.member)
        except Exception as exc:
            log.warning("cluster: leaving failed (%s); leases expire after their TTL", exc)
        self._leases.clear()

    def _rebuild_catalogue(self) -> None:
        """Every model with a snapshot directory joins the catalogue (a Redis without data)."""
        names = self.registry.store.model_names() if self.registry.store is not None else []
        for start in range(0, len(names), 1000):
            self.client.sadd(membership.MODELS_KEY, *names[start : start + 1000])

    # ------------------------------------------------------------------ heartbeat thread
    def _beat(self) -> None:
        """This member's heartbeat, its URL and the renewal of every lease it holds, in one
        pipelined round trip; a refused renewal withdraws that lease."""
        sent = time.monotonic()
        gap = self.clock.started()
        held = list(self._leases.values())
        members, renewed = lease_ops.beat(self._beat_client, self.member, self.ttl_ms, self.url, held)
        if set(members) != set(self.members):
            self._wake.set()
        self.members = members
        for lease, ok in zip(held, renewed):
            if not ok:
                self._withdraw(lease, "renewal refused: the lease expired or another member took it")
        self._last_ok = sent
        self.clock.done(time.monotonic() - sent)
        if gap > self.settings.cluster_lease_s / 2:
            log.warning(
                "cluster: heartbeat %.2f s after the previous one (lease TTL %.1f s)", gap, self.clock.ttl_s
            )
        self.connected = True
        if self.metrics is not None:
            self.metrics.members.set(len(self.members))
            if gap:
                self.metrics.beat_gap.observe(gap)
            self.metrics.owned.set(len(self._leases))

    def _beat_loop(self) -> None:
        errors = redis_errors()
        while not self._beat_stop.wait(self.tick_s):
            try:
                self._beat()
            except errors as exc:
                self.connected = False
                if time.monotonic() - self._last_ok >= CUT_OFF_FRACTION * self.settings.cluster_lease_s:
                    if self._leases:
                        log.warning("cluster: Redis unreachable (%s): stopping every model", exc)
                    for lease in list(self._leases.values()):
                        self._withdraw(lease, "Redis unreachable")
            except Exception:
                log.exception("cluster: heartbeat failed")

    def _withdraw(self, lease: Lease, why: str) -> None:
        """Stop holding ``lease`` — that lease only: a newer lease of the same model, taken by
        a rebalance after the heartbeat listed the one it renewed, stays."""
        with self._lock:
            if self._leases.get(lease.model) is lease:
                del self._leases[lease.model]
                self._lost.append(lease)
                log.warning("cluster: model %r lost, fence %d (%s)", lease.model, lease.fence, why)

    # ------------------------------------------------------------------ coordinator thread
    def _run(self) -> None:
        """Rebalance every tick, at once when the member list changed, and after
        :data:`RETRY_S` while a wanted model waits for a gone member's lease to expire."""
        errors = redis_errors()
        delay = self.tick_s
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            delay = self.tick_s
            try:
                self._evict_lost()
                if self.connected:
                    delay = self.rebalance()
            except errors as exc:
                log.warning("cluster: Redis unavailable during rebalance (%s)", exc)
            except Exception:
                log.exception("cluster: rebalance failed")

    def _evict_lost(self) -> None:
        """Drop the models whose lease was withdrawn, unless a newer lease of the model was
        taken meanwhile (the pass gained it again: its copy is the newly restored one).  A lost
        model stays in the catalogue: its rendezvous owner (this member again, if the members
        did not change) gains it back by restore."""
        with self._lock:
            lost, self._lost = self._lost, []
        for lease in lost:
            if lease.model not in self._leases:  # gains run in this thread only: no race here
                self._drop(lease.model)
            self._count("lost", None)
            self._move(lease.model, "lost", None, lease.fence)

    def _drop(self, name: str) -> None:
        """Stop ``name``'s consumer and remove the model here, keeping its files."""
        if self.streams is not None:
            self.streams.detach(name)
        try:
            self.registry.delete(name, keep_files=True)
        except ModelNotFound:
            pass

    def rebalance(self) -> float:
        """One pass: adopt models created here, forget deleted ones, hand off, gain; returns the
        seconds to the next pass (:data:`RETRY_S` while a gain waits for a dead member's lease)."""
        catalogue = membership.catalogue(self.client)
        if not catalogue:  # a Redis that restarted empty: the snapshot directory lists them
            self._rebuild_catalogue()
            catalogue = membership.catalogue(self.client)
        local = set(self.registry.names())
        for name in sorted(local - catalogue - set(self._leases)):
            if self._created(name):
                self._adopt(name)
        self._forget_deleted(local)
        catalogue = membership.catalogue(self.client)
        for name in sorted(local & catalogue - set(self._leases)):
            self._drop(name)  # a copy that is not ours (a default made at start, a stale create)
        members = list(self.members)
        if self.member not in members:
            return self.tick_s
        wanted = {m for m in catalogue if owner(m, members) == self.member}
        now = time.monotonic()
        self._wanted_since = {m: self._wanted_since.get(m, now) for m in wanted}
        leaving = sorted(set(self._leases) - wanted)
        self._leaving = set(leaving)
        try:
            stopped = self.streams.detach_many(leaving) if leaving and self.streams is not None else {}
            for name in leaving:
                if self._stop.is_set():
                    return self.tick_s
                self._hand_off(name, stopped.get(name))
        finally:
            self._leaving = set()
        return self._gain_all(sorted(wanted - set(self._leases)), members)

    def _stream_key(self, name: str) -> str:
        return self.settings.stream_keys(name)[0]

    def _created(self, name: str) -> bool:
        """Whether the model made here has its first snapshot (``PUT /models`` writes it before
        answering; until then the creation's fenced write must not find a lease taken)."""
        try:
            return self.registry.get(name).last_snapshot_path is not None
        except ModelNotFound:
            return False

    def _adopt(self, name: str) -> None:
        """A model created here (``POST /models``, the default model): take its lease and list
        it in the catalogue; a model someone else holds meanwhile is dropped here."""
        lease = lease_ops.acquire(self.client, name, self._stream_key(name), self.member, self.ttl_ms)
        if lease is None:
            log.warning("cluster: model %r created here is held by another member; dropped here", name)
            self._drop(name)
            return
        with self._lock:
            self._leases[name] = lease
        self.client.sadd(membership.MODELS_KEY, name)
        try:
            handle = self.registry.get(name)
            self.registry.snapshot(handle, force=handle.saved_version is None)
            if self.publisher is not None and handle.last_snapshot_path is not None:
                self.publisher.queue(name, int(handle.saved_version), handle.last_snapshot_path)
        except ModelNotFound:
            pass
        self._move(name, "created", None, lease.fence)

    def _forget_deleted(self, local: set[str]) -> None:
        """Leases of models not installed here: a model deleted by the user (``DELETE
        /models/{name}`` on its owner removes its files) leaves the catalogue; one whose files
        are still there is not a deletion (a lost lease, a gain racing a drop, or a user's
        delete between removing the model and its files): it stays, and if it is still not
        installed at the next pass, its lease is given back and the model gained again by
        restore."""
        orphans = set()
        for name in sorted(set(self._leases) - local):
            store = self.registry.store
            if store is None or not store.files(name):
                self._deleted(name)
            elif name in self._orphans and (lease := self._leases.get(name)) is not None:
                log.warning("cluster: model %r leased but not installed here; gained again", name)
                self._give_back(lease)
            else:
                orphans.add(name)
        self._orphans = orphans

    def _deleted(self, name: str) -> None:
        """A model deleted here (``DELETE /models/{name}`` on its owner)."""
        lease = self._leases.get(name)
        self.client.srem(membership.MODELS_KEY, name)
        with self._lock:
            self._leases.pop(name, None)
        if lease is not None:
            lease_ops.release(self.client, lease)
        self._move(name, "deleted", None, None)

    def _hand_off(self, name: str, consumer=None) -> None:
        """Stop learning ``name`` (its consumer already stopped: ``consumer``, or None), write
        its final snapshot, acknowledge, release, drop."""
        started = time.monotonic()
        lease = self._leases.get(name)
        try:
            handle = self.registry.get(name)
            handle.close(wait=True)  # HTTP batches already queued are applied, no new ones
            self.registry.snapshot(handle)
        except ModelNotFound:
            pass
        except Fenced as exc:
            log.warning("cluster: model %r: %s", name, exc)
        with self._lock:
            self._leases.pop(name, None)
        if consumer is not None:
            consumer.flush()  # fenced acknowledgement of what the final snapshot covers
        if lease is not None:
            lease_ops.release(self.client, lease)
        try:
            self.registry.delete(name, keep_files=True)
        except ModelNotFound:
            pass
        seconds = time.monotonic() - started
        self._count("handed_off", seconds)
        self._move(name, "handed_off", seconds, lease.fence if lease else None)

    def _gain_all(self, names: list[str], members: list[str]) -> float:
        """Take the free leases of ``names`` (pipelined, by chunks), restore each model's newest
        snapshot, then start all their consumers at once (``docs/cluster.md``: consumers
        started chunk by chunk learnt the entries trickling in while the later chunks waited
        for the interpreter lock); returns the seconds to the next pass."""
        retry = self.tick_s
        gained = 0
        self._gaining = set(names)
        try:
            for start in range(0, len(names), ACQUIRE_CHUNK):
                if self._stop.is_set():
                    break
                chunk = [(n, self._stream_key(n)) for n in names[start : start + ACQUIRE_CHUNK]]
                self._drop_stale([n for n, _ in chunk if n in self.registry])
                taken, held = lease_ops.acquire_many(self.client, chunk, self.member, self.ttl_ms)
                if any(holder is None or holder not in members for holder in held.values()):
                    retry = RETRY_S  # held by a member that is gone: its lease runs out any moment
                with self._lock:  # renewed by the heartbeat from now on, while the others restore
                    self._leases.update((lease.model, lease) for lease in taken)
                moves = self.client.pipeline(transaction=False)  # one round trip per chunk
                for k, lease in enumerate(taken):
                    if self._stop.is_set():
                        for left in taken[k:]:
                            self._give_back(left)
                        break
                    self._restore(lease, moves)
                self._record(moves)
                gained += len(taken)
        finally:
            self._gaining = set()
        if gained and self.streams is not None:
            self.streams.reconcile()  # their consumers start now, not at the manager's next poll
        return retry

    def _drop_stale(self, names: list[str]) -> None:
        """Before a new lease of ``names`` is taken: stop and remove the copies still here
        from a lease withdrawn during this pass (their consumers are fenced off already), so
        that no consumer or snapshot of an old copy ever runs under the new lease."""
        if not names:
            return
        if self.streams is not None:
            self.streams.detach_many(names)
        for name in names:
            self._drop(name)

    def _give_back(self, lease: Lease) -> None:
        with self._lock:
            self._leases.pop(lease.model, None)
        lease_ops.release(self.client, lease)

    def _restore(self, lease: Lease, moves=None) -> None:
        """Install the newest snapshot of a model whose lease was just taken; its move is
        recorded on ``moves`` (a pipeline the caller executes) or at once."""
        name = lease.model
        store = self.registry.store
        found = store.load_newest_header(name) if store is not None else None
        if found is None:
            log.error("cluster: model %r has no valid snapshot in %s; not restored", name, store.root)
            self._give_back(lease)
            return
        handle = self.registry.install(found)
        if self.publisher is not None and handle.last_snapshot_path is not None:
            self.publisher.queue(name, int(found.version), handle.last_snapshot_path)
        seconds = time.monotonic() - self._wanted_since.get(name, time.monotonic())
        self._count("gained", seconds)
        self._move(name, "gained", seconds, lease.fence, moves)
        log.info("cluster: model %r gained (fence %d, version %d)", name, lease.fence, found.version)

    def _count(self, kind: str, seconds: float | None) -> None:
        if self.metrics is not None:
            self.metrics.handoffs.labels(kind).inc()
            if seconds is not None:
                self.metrics.seconds.labels(kind).observe(seconds)

    def _move(self, name: str, kind: str, seconds: float | None, fence: int | None, moves=None) -> None:
        try:
            membership.record_move(
                self.client if moves is None else moves, name, kind, self.member, seconds, fence
            )
        except Exception:  # the dashboard's list only
            log.debug("cluster: recording a move failed", exc_info=True)

    def _record(self, moves) -> None:
        """Send the moves queued on the pipeline ``moves`` (the dashboard's list only)."""
        try:
            moves.execute()
        except Exception:
            log.debug("cluster: recording moves failed", exc_info=True)

    # ------------------------------------------------------------------ GET /cluster
    def deployment(self) -> dict[str, Any]:
        """:meth:`describe` without the moves, or ``{"unavailable": reason}`` when Redis does not
        answer (``GET /models`` still lists this learner's own models then)."""
        try:
            return self.describe(0)
        except redis_errors() as exc:
            return {"member": self.member, "unavailable": f"Redis: {type(exc).__name__}: {exc}"}

    def describe(self, moves: int = 50) -> dict[str, Any]:
        """Members (URL, models held), every model's owner and fence, the newest ``moves``, the
        heartbeat's timing (:func:`svmstream.app.cluster.report.describe`)."""
        return describe(self, moves)
