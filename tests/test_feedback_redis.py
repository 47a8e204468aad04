"""Feedback through Redis, with real processes and a real ``redis-server``: predictions served
by two replicas are labelled at the learner (every id learned once, the model equal to one
that learned the same rows through ``/learn``); a stream of ``{fid, y}`` entries survives three
SIGKILLs of the learner with the decisions of an uninterrupted run and exact counts of the
duplicate and expired ids."""

from __future__ import annotations

import functools
import os

import httpx
import numpy as np

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator
from tests.conftest import two_moons_like, wait_for

CONFIG = {"warmup": 100, "shuffle_buffer": 200, "budget": 50, "classes": [-1, 1]}


_wait = functools.partial(wait_for, timeout=60.0)


def _decisions(client, name, probe):
    r = client.post("/predict", json={"model": name, "X": probe.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["decision"])


def test_predictions_of_two_replicas_labelled_at_the_learner(start_server, own_redis, tmp_path):
    learner = start_server(
        tmp_path / "learner", args=("--redis-url", own_redis.url, "--snapshot-interval", "0.3")
    )
    replicas = [
        start_server(tmp_path / f"replica-{k}", args=("--role", "replica", "--redis-url", own_redis.url))
        for k in range(2)
    ]
    lc, rcs = learner.client(), [r.client() for r in replicas]
    X, y = two_moons_like(2000, d=6, seed=5)
    y = y.astype(int).tolist()
    for name in ("fb", "ref"):
        assert lc.put(f"/models/{name}", json=CONFIG).status_code == 201
        assert lc.post("/learn", json={"model": name, "X": X[:400].tolist(), "y": y[:400]}).status_code == 200
    for rc in rcs:
        # the replica follows once it serves a fitted version (the model exists before it has learned)
        _wait(
            lambda rc=rc: rc.get("/models/fb").status_code == 200 and rc.get("/models/fb").json()["fitted"],
            what="the replica to follow",
        )
    ids: list[str] = []
    served_by = []
    for k, start in enumerate(range(400, 1600, 100)):  # each replica serves every other batch
        rc = rcs[k % 2]
        r = rc.post("/predict", json={"model": "fb", "X": X[start : start + 100].tolist(), "remember": True})
        assert r.status_code == 200, r.text
        ids += r.json()["ids"]
        served_by.append(k % 2)
    assert set(served_by) == {0, 1} and len(set(ids)) == 1200
    # a replica refuses feedback, naming the learner
    r = rcs[0].post("/feedback", json={"model": "fb", "ids": ids[:2], "y": y[400:402]})
    assert r.status_code == 409, r.text
    for start in range(400, 1600, 300):
        r = lc.post(
            "/feedback",
            json={"model": "fb", "ids": ids[start - 400 : start - 100], "y": y[start : start + 300]},
        )
        assert r.status_code == 200, r.text
        assert (r.json()["learned"], r.json()["duplicate"], r.json()["expired"]) == (300, 0, 0)
        assert (
            lc.post(
                "/learn",
                json={"model": "ref", "X": X[start : start + 300].tolist(), "y": y[start : start + 300]},
            ).status_code
            == 200
        )
    again = lc.post("/feedback", json={"model": "fb", "ids": ids, "y": y[400:1600]}).json()
    assert (again["learned"], again["duplicate"], again["expired"]) == (0, 1200, 0)
    probe = X[1600:]
    delta = float(np.max(np.abs(_decisions(lc, "fb", probe) - _decisions(lc, "ref", probe))))
    print(
        f"replicas -> learner feedback: 1,200 ids learned once, max |decision delta| vs /learn = {delta:.3g}"
    )
    assert delta <= 1e-12
    fb, ref = lc.get("/models/fb").json(), lc.get("/models/ref").json()
    assert fb["n_seen"] == ref["n_seen"] == 1600
    assert fb["examples"]["received"] == 1600
    for c in (lc, *rcs):
        c.close()


def _stream_entries(ids, y, rng):
    """``{fid, y}`` entries in order, with duplicates of earlier ids and forged ids mixed in;
    returns (entries, learned positions in order, duplicates, forged)."""
    entries, dup, forged = [], 0, 0
    for k, (rid, label) in enumerate(zip(ids, y)):
        entries.append({b"fid": rid.encode(), b"y": str(label).encode()})
        if k % 97 == 5:  # a duplicate soon after (often in the same read)
            j = max(0, k - int(rng.integers(0, 3)))
            entries.append({b"fid": ids[j].encode(), b"y": str(y[j]).encode()})
            dup += 1
        if k % 131 == 7:  # a duplicate far behind (another read, another snapshot)
            j = int(rng.integers(0, k + 1))
            entries.append({b"fid": ids[j].encode(), b"y": str(y[j]).encode()})
            dup += 1
        if k % 113 == 3:
            entries.append({b"fid": f"forged-{k}".encode(), b"y": b"1"})
            forged += 1
    return entries, dup, forged


def test_sigkill_the_learner_during_a_feedback_stream(start_server, own_redis, tmp_path):
    # CI size; SVMSTREAM_TEST_FEEDBACK_ROWS=50000 runs the size (docs/feedback.md)
    n0, n = 300, int(os.environ.get("SVMSTREAM_TEST_FEEDBACK_ROWS", "6000"))
    env = {
        "SVMSTREAM_REDIS_URL": own_redis.url,
        "SVMSTREAM_STREAM_COUNT": "100",
        "SVMSTREAM_STREAM_BLOCK_MS": "100",
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_STREAM_LEASE_S": "0.6",
        "SVMSTREAM_STREAM_SNAPSHOT_EVERY": "700",
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.25",
    }
    snap = tmp_path / "snap"
    X, y = two_moons_like(n0 + n + 200, d=6, seed=21)
    y = y.astype(int).tolist()
    server = start_server(snap, env=env)
    with server.client() as c:
        assert c.put("/models/fb", json=CONFIG).status_code == 201
        assert c.post("/learn", json={"model": "fb", "X": X[:n0].tolist(), "y": y[:n0]}).status_code == 200
        ids = []
        for start in range(n0, n0 + n, 500):
            r = c.post(
                "/predict", json={"model": "fb", "X": X[start : start + 500].tolist(), "remember": True}
            )
            ids += r.json()["ids"]
        config = c.get("/models/fb").json()["config"]
    rng = np.random.default_rng(3)
    entries, dup, forged = _stream_entries(ids, y[n0 : n0 + n], rng)
    redis = own_redis.client()
    # the stream arrives in four parts; the learner is killed while it learns each of the first three
    cuts = [len(entries) * q // 4 for q in range(5)]
    killed_at = []
    for part in range(4):
        pipe = redis.pipeline(transaction=False)
        for fields in entries[cuts[part] : cuts[part + 1]]:
            pipe.xadd("svmstream:fb:examples", fields)
        pipe.execute()
        if part == 3:
            break
        target = n0 + part * n // 4 + 100
        seen = _wait(
            lambda t=target, url=server.url: (
                (m := httpx.get(f"{url}/models/fb", timeout=10).json()["n_seen"]) >= t and m
            ),
            what="progress",
            timeout=60.0 * max(1.0, n / 6000),
        )
        server.kill()
        killed_at.append(seen)
        server = start_server(snap, env=env)
    with server.client() as c:
        _wait(
            lambda: c.get("/models/fb").json()["n_seen"] >= n0 + n,
            what="the stream consumed",
            timeout=60.0 * max(1.0, n / 6000),
        )
        _wait(lambda: redis.xpending("svmstream:fb:examples", "svmstream:fb")["pending"] == 0, what="acks")
        info = c.get("/models/fb").json()
        probe = X[n0 + n :]
        decision = _decisions(c, "fb", probe)
    server.terminate()
    est = make_estimator(ModelConfig.model_validate(config))
    est.partial_fit(X[:n0], (np.asarray(y[:n0]) == 1).astype(np.int64), classes=np.arange(2))
    est.partial_fit(X[n0 : n0 + n], (np.asarray(y[n0 : n0 + n]) == 1).astype(np.int64))
    delta = float(np.max(np.abs(decision - est.decision_function(probe))))
    reasons = [f[b"reason"].decode() for _, f in redis.xrange("svmstream:fb:dead")]
    n_dup = sum(r.startswith("fid: duplicate") for r in reasons)
    n_exp = sum(r.startswith("fid: expired") for r in reasons)
    print(
        f"feedback stream of {len(entries)} entries ({n} ids, {dup} duplicates, {forged} forged), "
        f"killed at n_seen {killed_at}: n_seen {info['n_seen']}, dead-lettered {n_dup} duplicate + "
        f"{n_exp} expired, max |decision delta| vs uninterrupted = {delta:.3g}"
    )
    assert info["n_seen"] == n0 + n
    assert (n_dup, n_exp, len(reasons)) == (dup, forged, dup + forged)
    assert delta == 0.0


def test_the_redis_store_stays_within_its_bound(start_server, own_redis, tmp_path):
    server = start_server(
        tmp_path / "snap",
        env={"SVMSTREAM_REDIS_URL": own_redis.url, "SVMSTREAM_FEEDBACK_MAX_BYTES": "100000"},
    )
    c = server.client()
    redis = own_redis.client()
    X, y = two_moons_like(3300, d=6, seed=2)
    assert c.put("/models/small", json=CONFIG).status_code == 201
    assert (
        c.post(
            "/learn", json={"model": "small", "X": X[:300].tolist(), "y": y[:300].astype(int).tolist()}
        ).status_code
        == 200
    )
    ids = []
    for start in range(300, 3300, 300):
        r = c.post(
            "/predict", json={"model": "small", "X": X[start : start + 300].tolist(), "remember": True}
        )
        ids += r.json()["ids"]
        assert int(redis.get("svmstream:feedback:_bytes")) <= 100_000
    admin = {b"svmstream:feedback:_index", b"svmstream:feedback:_bytes", b"svmstream:feedback:_evicted"}
    hashes = sum(1 for k in redis.scan_iter("svmstream:feedback:*") if k not in admin)
    evicted = int(redis.get("svmstream:feedback:_evicted"))
    assert 0 < hashes < 3000 and hashes + evicted == 3000, (hashes, evicted)
    assert redis.zcard("svmstream:feedback:_index") == hashes
    assert 0 < redis.pttl("svmstream:feedback:" + ids[-1]) <= 86_400_000
    r = c.post("/feedback", json={"model": "small", "ids": [ids[0], ids[-1]], "y": [int(y[300]), int(y[-1])]})
    assert (r.json()["expired"], r.json()["learned"]) == (1, 1), r.text
    print(
        f"redis store bound 100,000 bytes: {hashes} of 3,000 remembered kept, {evicted} evicted, "
        f"used_memory {redis.info('memory')['used_memory']:,} bytes"
    )
