"""Prediction replicas follow a learner through a real Redis: one learner and
two replica processes, raw data learned over HTTP; replicas serve each snapshot's version with
the learner's exact decisions, refuse learning naming the learner, survive a sibling's SIGKILL."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest

from tests.conftest import two_moons_like, wait_for

_wait = wait_for


def _version(client, name):
    r = client.get(f"/models/{name}")
    return r.json()["version"] if r.status_code == 200 else None


@pytest.mark.parametrize("selection", [False, True])
def test_replicas_serve_every_snapshot_of_the_learner_exactly(start_server, own_redis, tmp_path, selection):
    """Plain pipelines, and selectors racing candidates (``docs/selection.md``): a replica serves
    the leader the learner's snapshot holds."""
    learner = start_server(
        tmp_path / "learner",
        args=(
            "--redis-url",
            own_redis.url,
            "--snapshot-interval",
            "0.3",
            "--advertise-url",
            "http://learner:8000",
        ),
    )
    replicas = [
        start_server(tmp_path / f"replica-{k}", args=("--role", "replica", "--redis-url", own_redis.url))
        for k in range(2)
    ]
    lc = learner.client()
    rcs = [r.client() for r in replicas]
    X, y = two_moons_like(3000, d=6, seed=4)
    X = X * 25.0 - 4.0  # raw, unscaled
    labels = np.where(y > 0, "spam", "ham").tolist()
    body = {"warmup": 200, "shuffle_buffer": 500, "selection": selection}
    assert lc.put("/models/mail", json=body).status_code == 201
    probe = X[:200].tolist()
    checked = 0
    for start in range(0, 3000, 500):
        r = lc.post(
            "/learn",
            json={"model": "mail", "X": X[start : start + 500].tolist(), "y": labels[start : start + 500]},
        )
        assert r.status_code == 200, r.text
        version = r.json()["version"]
        # the learner snapshots within 0.3 s; both replicas then install that version
        for rc in rcs:
            _wait(
                lambda rc=rc, v=version: (_version(rc, "mail") or -1) >= v,
                what=f"replica at version {version}",
            )
        if version >= 2:  # warm-up over: the model predicts
            mine = lc.post("/predict", json={"model": "mail", "X": probe}).json()
            for rc in rcs:
                theirs = rc.post("/predict", json={"model": "mail", "X": probe}).json()
                assert (
                    theirs["model_version"] == theirs["version"] and mine["model_version"] == mine["version"]
                )
                if theirs["version"] == mine["version"]:  # no newer batch in between: exact equality
                    assert theirs["decision"] == mine["decision"] and theirs["labels"] == mine["labels"]
                    race = rc.get("/models/mail").json()["statistics"].get("selection")
                    assert (race is not None and race["leader"] is not None) is selection, race
                    checked += 1
    assert checked >= 4

    # a replica never learns: 409 naming the learner, and nothing changes
    for rc in rcs:
        before = rc.get("/models/mail").json()["version"]
        r = rc.post("/learn", json={"model": "mail", "X": probe[:3], "y": labels[:3]})
        assert r.status_code == 409 and "http://learner:8000" in r.json()["detail"], r.text
        assert rc.put("/models/other", json={}).status_code == 409
        assert rc.delete("/models/mail").status_code == 409
        assert rc.post("/models/mail/flush").status_code == 409
        # a pinned read is the learner's too (the history is there): 409 naming it, any protocol
        pinned = rc.post("/predict", json={"model": "mail", "X": probe[:2], "version": 1})
        assert pinned.status_code == 409 and "http://learner:8000" in pinned.json()["detail"], pinned.text
        pinned = rc.get("/v2/models/mail/versions/1")
        assert "http://learner:8000" in pinned.json()["error"], pinned.text
        assert rc.get("/models/mail").json()["version"] == before
        assert rc.post("/predict", json={"model": "mail", "X": probe[:2], "proba": True}).status_code == 200

    # SIGKILL one replica while a load generator hits both: the survivor answers every request
    results = {0: [], 1: []}
    stop = threading.Event()

    def hit(k):
        with httpx.Client(base_url=replicas[k].url, timeout=10) as c:
            while not stop.is_set():
                try:
                    results[k].append(c.post("/predict", json={"model": "mail", "X": probe[:5]}).status_code)
                except httpx.HTTPError as exc:
                    results[k].append(type(exc).__name__)

    threads = [threading.Thread(target=hit, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    replicas[1].kill()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    assert len(results[0]) > 20 and set(results[0]) == {200}, set(results[0])
    assert any(not isinstance(r, int) for r in results[1]), "the killed replica kept answering"

    # a model deleted on the learner disappears from the replica
    assert lc.delete("/models/mail").status_code in (200, 204)
    _wait(lambda: rcs[0].get("/models/mail").status_code == 404, what="the deletion to reach the replica")
    for c in (lc, *rcs):
        c.close()


def test_a_replica_without_redis_refuses_to_start(start_server, tmp_path):
    import pytest

    with pytest.raises(RuntimeError, match="needs SVMSTREAM_REDIS_URL"):
        start_server(tmp_path / "r", args=("--role", "replica"))


def test_replicas_receive_the_serving_state_and_read_an_older_learners_whole_file(
    start_server, own_redis, tmp_path
):
    import redis

    from svmstream.solvers.persistence import decode_meta

    learner = start_server(
        tmp_path / "learner", args=("--redis-url", own_redis.url, "--snapshot-interval", "100000")
    )
    lc = learner.client()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6)) * 20.0 + 3.0  # raw, unscaled
    labels = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)].tolist()
    config = {"warmup": 200, "budget": 40, "shuffle_buffer": 2000, "rehearsal": 2}
    assert lc.put("/models/three", json=config).status_code == 201
    probe = X[:300].tolist()

    def learn(lo, hi):  # no flush: the shuffle buffer keeps rows (pending) at the snapshot
        r = lc.post("/learn", json={"model": "three", "X": X[lo:hi].tolist(), "y": labels[lo:hi]})
        assert r.status_code == 200, r.text
        return lc.post("/models/three/snapshot").json()["version"]

    def same_as_learner(rc, version):
        mine = lc.post("/predict", json={"model": "three", "X": probe, "proba": True}).json()
        theirs = rc.post("/predict", json={"model": "three", "X": probe, "proba": True}).json()
        assert mine["model_version"] == theirs["model_version"] == version
        for key in ("decision", "labels", "proba"):
            assert theirs[key] == mine[key], key
        learner_info, replica_info = lc.get("/models/three").json(), rc.get("/models/three").json()
        assert replica_info["examples"] == learner_info["examples"]
        assert replica_info["examples"]["pending"] > 0  # rows in the learner's buffer, not sent
        for key in (
            "version",
            "n_features",
            "classes",
            "n_support_vectors",
            "n_seen",
            "pending",
            "statistics",
        ):
            assert replica_info.get(key) == learner_info.get(key), key

    first = learn(0, 1500)
    key = "svmstream:replication:three"
    rcli = redis.Redis.from_url(own_redis.url)
    wait_for(lambda: int(rcli.hget(key, "version") or -1) >= first, what="the learner's publication")
    # what an older learner published: the whole snapshot file under "blob"
    newest = max((tmp_path / "learner" / "three").glob("three-*.svmstate"))
    rcli.hdel(key, "serving")
    rcli.hset(key, "blob", newest.read_bytes())
    replica = start_server(tmp_path / "replica", args=("--role", "replica", "--redis-url", own_redis.url))
    rc = replica.client()
    _wait(lambda: (_version(rc, "three") or -1) >= first, what=f"replica at version {first}")
    same_as_learner(rc, first)

    # this learner publishes the serving encoding only, a fraction of the file
    second = learn(1500, 3000)
    _wait(lambda: (_version(rc, "three") or -1) >= second, what=f"replica at version {second}")
    same_as_learner(rc, second)
    serving, whole = rcli.hmget(key, ["serving", "blob"])
    assert whole is None and serving is not None
    newest = max((tmp_path / "learner" / "three").glob("three-*.svmstate"))
    omitted = decode_meta(serving)["service"]["omitted"]
    assert any(name.endswith("reh_X") for name in omitted) and "pp_buf_X" in omitted, sorted(omitted)
    assert 4 * len(serving) < newest.stat().st_size, (len(serving), newest.stat().st_size)

    # bytes that do not decode: the replica keeps serving its version, then follows the next one
    rcli.hset(key, mapping={"version": second + 100, "serving": b"SVMSTATE not a state"})
    rcli.hset("svmstream:replication:versions", "three", second + 100)
    rcli.publish("svmstream:replication:events", json.dumps({"model": "three", "version": second + 100}))
    wait_for(lambda: "does not decode" in replica.log_text(), what="the replica to log the bad bytes")
    assert _version(rc, "three") == second
    assert rc.post("/predict", json={"model": "three", "X": probe[:5]}).status_code == 200
    third = learn(0, 500)
    _wait(lambda: (_version(rc, "three") or -1) >= third, what=f"replica at version {third}")
    same_as_learner(rc, third)
    for c in (lc, rc):
        c.close()
