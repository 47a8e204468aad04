"""What a clustered learner reports: its Prometheus metrics, the timing of its heartbeat, and
``GET /cluster`` (``docs/cluster.md``)."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from svmstream.app.cluster import leases as lease_ops
from svmstream.app.cluster import membership


class ClusterMetrics:
    """``svmstream_cluster_*`` on the app's Prometheus registry."""

    def __init__(self, prom):
        self.handoffs = Counter(
            "svmstream_cluster_handoffs_total",
            "Ownership moves seen by this learner (gained, handed_off, lost)",
            ["kind"],
            registry=prom,
        )
        self.seconds = Histogram(
            "svmstream_cluster_handoff_seconds",
            "Seconds of a move: gained = from the model being wanted here to it learning here; "
            "handed_off = final snapshot, acknowledgement and release",
            ["kind"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=prom,
        )
        self.owned = Gauge("svmstream_cluster_models_owned", "Models this learner owns", registry=prom)
        self.members = Gauge("svmstream_cluster_members", "Live learners", registry=prom)
        self.beat_gap = Histogram(
            "svmstream_cluster_heartbeat_gap_seconds",
            "Seconds between the starts of two heartbeats (the tick when nothing delays it; past "
            "the lease TTL the leases expire)",
            buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10),
            registry=prom,
        )


class BeatClock:
    """The heartbeat's timing: the gap between the starts of two beats (what decides whether a
    lease outlives its TTL) and each beat's own seconds, over the last ``keep`` beats."""

    def __init__(self, tick_s: float, ttl_s: float, keep: int = 2000):
        self.tick_s, self.ttl_s = tick_s, ttl_s
        self.gaps: deque[float] = deque(maxlen=keep)
        self.took: deque[float] = deque(maxlen=keep)
        self.beats = self.late = 0
        self.worst = 0.0
        self._last: float | None = None
        self._lock = threading.Lock()

    def started(self) -> float:
        """A beat starts; returns the gap since the previous one (0.0 for the first)."""
        now = time.monotonic()
        with self._lock:
            gap = 0.0 if self._last is None else now - self._last
            self._last = now
            if gap:
                self.gaps.append(gap)
                self.worst = max(self.worst, gap)
                self.late += gap > self.ttl_s / 2
        return gap

    def done(self, seconds: float) -> None:
        with self._lock:
            self.beats += 1
            self.took.append(seconds)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            gaps, took = sorted(self.gaps), sorted(self.took)

        def q(values: list[float], p: float) -> float | None:
            return round(values[min(len(values) - 1, int(p * len(values)))], 4) if values else None

        return {
            "tick_s": self.tick_s,
            "lease_s": self.ttl_s,
            "beats": self.beats,
            "gap_p50_s": q(gaps, 0.5),
            "gap_p99_s": q(gaps, 0.99),
            "gap_max_s": round(self.worst, 4),
            "late": self.late,
            "beat_p50_s": q(took, 0.5),
            "beat_max_s": q(took, 1.0),
        }


def describe(coordinator, moves: int = 50) -> dict[str, Any]:
    """Members (URL, models held), every model's owner and fence, the newest ``moves``, and this
    learner's heartbeat timing."""
    client = coordinator.client
    members = membership.live_members(client)
    urls = {k.decode(): v.decode() for k, v in client.hgetall(membership.URLS_KEY).items()}
    models = sorted(membership.catalogue(client))
    pipe = client.pipeline(transaction=False)
    for name in models:
        pipe.get(lease_ops.lease_keys(coordinator.settings.stream_keys(name)[0])[0])
    holders = [None if v is None else v.decode().rpartition("|") for v in pipe.execute()]
    owners = {
        name: (None if h is None else {"member": h[0], "fence": int(h[2])})
        for name, h in zip(models, holders)
    }
    counts = dict.fromkeys(members, 0)
    for h in owners.values():
        if h is not None:
            counts[h["member"]] = counts.get(h["member"], 0) + 1
    return {
        "member": coordinator.member,
        "members": [{"name": m, "url": urls.get(m), "models": counts.get(m, 0)} for m in members],
        "models": owners,
        "moves": membership.recent_moves(client, moves) if moves else [],
        "heartbeat": coordinator.clock.summary(),
    }
