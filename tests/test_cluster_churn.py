"""Heavy ownership churn with real learner processes on one redis-server (issue 41): a short
lease TTL, leases running out under the learners while they are fed (their keys dropped in
Redis, as an expiry does), a learner paused past its TTL and resumed, a learner SIGKILLed and a
new one joining.  Afterwards every model of the catalogue is owned by its rendezvous owner, none
was deleted, and every entry was applied exactly once (decisions equal an uninterrupted run's).
The in-process orders of the same races are in ``tests/test_cluster_lease_loss.py``."""

from __future__ import annotations

import random
import signal
import threading
import time

import redis

from svmstream.app.cluster import membership
from tests.conftest import ServerProcess
from tests.test_cluster import (
    Deployment,
    Producer,
    check_exactly_once,
    create_models,
    env_for,
    fences_never_decrease,
    model_data,
    settled,
)

LEASE_S = "1.0"  # short: a renewal that comes late loses the lease


class ShortLeases(Deployment):
    def start(self, member: str, redis_url: str | None = None) -> ServerProcess:
        env = env_for(redis_url or self.redis_url, member, SVMSTREAM_CLUSTER_LEASE_S=LEASE_S)
        server = ServerProcess(self.snap, self.tmp_path / f"{member}.log", env=env).wait_ready()
        self.learners[member] = server
        return server


class LeaseThief:
    """Every ``every`` s, drops the lease keys of ``k`` random models in Redis: for their
    holder exactly an expiry (its next renewal, read and acknowledgement are refused)."""

    def __init__(self, redis_url: str, names: list[str], k: int = 4, every: float = 0.25):
        self.client = redis.Redis.from_url(redis_url)
        self.names, self.k, self.every = names, k, every
        self.dropped = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        rng = random.Random(41)
        while not self._stop.wait(self.every):
            keys = [f"svmstream:{name}:examples:lease" for name in rng.sample(self.names, self.k)]
            self.dropped += int(self.client.delete(*keys))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)


def test_after_heavy_churn_every_model_is_owned_and_every_entry_applied_once(tmp_path, own_redis):
    dep = ShortLeases(tmp_path, own_redis.url)
    try:
        dep.start("A")
        dep.start("B")
        names = [f"h{i:02d}" for i in range(48)]
        create_models(dep.learners["A"], names)
        settled(dep, names)
        n = 1500
        data = model_data(names, n)
        producer = Producer(dep.redis_url, data, chunk=50, every=0.05)
        thief = LeaseThief(dep.redis_url, names)
        producer.allow(n // 4)
        time.sleep(3.0)
        b = dep.learners["B"]  # paused past its TTL: A takes its models, then B its share back
        b.proc.send_signal(signal.SIGSTOP)
        time.sleep(float(LEASE_S) * 2)
        b.proc.send_signal(signal.SIGCONT)
        producer.allow(n // 2)
        time.sleep(3.0)
        dep.learners["A"].kill()  # and a kill with a new member joining
        dep.start("C")
        producer.allow(3 * n // 4)
        time.sleep(3.0)
        thief.stop()
        producer.join()
        owned = settled(dep, names)
        client = redis.Redis.from_url(dep.redis_url)
        assert membership.catalogue(client) == set(names)
        check_exactly_once(dep, data, n)
        assert sorted(m for models in owned.values() for m in models) == names
        moves = membership.recent_moves(client, membership.MOVES_MAXLEN)
        assert not [m for m in moves if m["kind"] == "deleted"], "a model was deleted by the churn"
        regained = {(m["model"], m["member"]) for m in moves if m["kind"] == "lost"} & {
            (m["model"], m["member"]) for m in moves if m["kind"] == "gained" and int(m["fence"]) > 1
        }
        assert thief.dropped > 0 and regained, "no lease was lost and gained again: the churn did not happen"
        for name in names:
            fences_never_decrease(dep.snap, name)
        print(f"leases dropped {thief.dropped}; lost and gained again by the same member: {len(regained)}")
    finally:
        dep.stop()
