"""Prediction replicas follow a learner through a real Redis: one learner and
two replica processes, raw data learned over HTTP; replicas serve each snapshot's version with
the learner's exact decisions, refuse learning naming the learner, survive a sibling's SIGKILL."""

from __future__ import annotations

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
