"""Replicas are not left stale by a graceful restart of the learner: the final
snapshot written at SIGTERM is published to Redis, and models restored at start-up whose
published version is older (or missing) are republished, so replicas serve the learner's
newest version.  Real processes on a real redis-server."""

from __future__ import annotations

import numpy as np
import redis

from tests.conftest import two_moons_like, wait_for

VERSIONS = "svmstream:replication:versions"
NEVER = "3600"  # a snapshot interval the test never reaches: only the shutdown snapshots


_wait = wait_for


def _published(url: str, name: str) -> int | None:
    with redis.Redis.from_url(url) as client:
        raw = client.hget(VERSIONS, name)
    return None if raw is None else int(raw)


def _teach(client, name: str, batches: int) -> int:
    X, y = two_moons_like(300 * batches, d=4, seed=7)
    assert client.put(f"/models/{name}", json={"warmup": 100, "shuffle_buffer": 200}).status_code == 201
    version = 0
    for k in range(batches):
        part = slice(300 * k, 300 * (k + 1))
        r = client.post("/learn", json={"model": name, "X": X[part].tolist(), "y": y[part].tolist()})
        assert r.status_code == 200, r.text
        version = r.json()["version"]
    return version


def _learner_args(url: str) -> tuple[str, ...]:
    return ("--redis-url", url, "--snapshot-interval", NEVER)


def test_the_final_snapshot_at_sigterm_is_published(start_server, own_redis, tmp_path):
    learner = start_server(tmp_path / "learner", args=_learner_args(own_redis.url))
    with learner.client() as lc:
        version = _teach(lc, "m", 3)
    assert version >= 3
    assert (_published(own_redis.url, "m") or -1) < version  # nothing snapshotted it yet
    learner.terminate()
    assert "final snapshots: [" in learner.log_text()
    assert _published(own_redis.url, "m") == version, learner.log_text()


def test_restored_models_are_republished_and_replicas_follow(start_server, own_redis, tmp_path):
    # snapshots written while the learner had no Redis: Redis never heard of version `version`
    first = start_server(tmp_path / "learner", args=("--snapshot-interval", NEVER))
    with first.client() as lc:
        version = _teach(lc, "m", 2)
        probe = two_moons_like(50, d=4, seed=8)[0].tolist()
        mine = lc.post("/predict", json={"model": "m", "X": probe}).json()
    first.terminate()
    assert _published(own_redis.url, "m") is None
    learner = start_server(tmp_path / "learner", args=_learner_args(own_redis.url))
    replica = start_server(tmp_path / "replica", args=("--role", "replica", "--redis-url", own_redis.url))
    _wait(lambda: _published(own_redis.url, "m") == version, what="the restored model's republication")
    with replica.client() as rc:
        _wait(
            lambda: (
                rc.get("/models/m").status_code == 200 and rc.get("/models/m").json()["version"] == version
            ),
            what=f"the replica at version {version}",
        )
        theirs = rc.post("/predict", json={"model": "m", "X": probe}).json()
    assert theirs["version"] == mine["version"] == version
    assert np.array_equal(theirs["decision"], mine["decision"]) and theirs["labels"] == mine["labels"]
    learner.terminate()
    replica.terminate()
