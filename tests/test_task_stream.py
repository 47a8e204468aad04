"""Regression and novelty models fed by the Redis stream (issue 38): numeric ``y`` or none, bad
entries dead-lettered with their reason, and exactly-once through SIGKILLs of a real ``svmstream
serve``: the restarted service's model equals an uninterrupted in-process run (max |Δ| = 0)."""

from __future__ import annotations

import time
import uuid

import httpx
import numpy as np

from svmstream.app.ingest.stream_entries import parse_stream_entries
from svmstream.app.ingest.targets import CODECS
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings
from tests.conftest import wait_for
from tests.test_stream import produce


def xd(row) -> bytes:
    return np.asarray(row, dtype="<f8").tobytes()


def test_numeric_and_absent_y_of_stream_entries_are_read_by_the_models_codec():
    entries = [
        {b"y": b"2.5", b"xd": xd([1, 2])},  # 0 good
        {b"y": b"cat", b"xd": xd([1, 2])},  # 1 a string target
        {b"xd": xd([3, 4])},  # 2 no y
        {b"y": b"-7", b"x": b"[5, 6]"},  # 3 good
        {b"y": b"true", b"x": b"[5, 6]"},  # 4 a boolean
    ]
    batch = parse_stream_entries(entries, CODECS["regression"], n_features=2)
    reasons = dict(batch.rejected)
    assert batch.good.tolist() == [0, 3] and batch.y.tolist() == [2.5, -7.0]
    assert reasons[1].startswith("y: 'cat' is not a number") and reasons[2] == "y: field required"
    assert sorted(reasons) == [1, 2, 4]
    batch = parse_stream_entries(
        [{b"xd": xd([1, 2])}, {b"y": b"1", b"xd": xd([1, 2])}, {b"y": b"3", b"xd": xd([1, 2])}],
        CODECS["novelty"],
        n_features=2,
    )
    assert batch.good.tolist() == [0, 1] and np.isnan(batch.y[0]) and batch.y[1] == 1.0
    assert "evaluation label" in dict(batch.rejected)[2]


def test_regression_stream_through_three_sigkills_equals_an_uninterrupted_run(
    redis_server, start_server, tmp_path
):
    """50,000 rows of numeric targets through the stream; the service is SIGKILLed three times
    mid-stream and restarted; its predictions then equal those of one uninterrupted in-process
    run over the same rows (every row applied once: received = n)."""
    from sklearn.datasets import make_friedman1

    n = 50_000
    X, y = make_friedman1(n_samples=n, n_features=6, noise=0.5, random_state=3)
    X, y = X * 100.0, y * 40.0 - 300.0
    r = redis_server.client()
    name = f"reg-{uuid.uuid4().hex[:8]}"
    key = f"svmstream:{name}:examples"
    produce(r, key, [{b"y": repr(float(t)).encode(), b"xd": xd(row)} for row, t in zip(X, y)])
    env = {
        "SVMSTREAM_REDIS_URL": redis_server.url,
        "SVMSTREAM_DEFAULT_MODEL": name,
        "SVMSTREAM_DEFAULT_TASK": "regression",
        "SVMSTREAM_STREAM_COUNT": "250",
        "SVMSTREAM_STREAM_BLOCK_MS": "100",
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_STREAM_LEASE_S": "0.6",
        "SVMSTREAM_STREAM_SNAPSHOT_EVERY": "4000",
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.25",
    }
    snap = tmp_path / "snap"
    killed_at = []
    for fraction in (0.2, 0.45, 0.75):
        server = start_server(snap, env=env)
        while True:
            seen = httpx.get(f"{server.url}/models/{name}", timeout=10).json()["n_seen"]
            if seen >= fraction * n:
                break
            time.sleep(0.005)
        server.kill()
        killed_at.append(seen)
    server = start_server(snap, env=env)
    probe = X[:2000] * 0.9 + 5.0
    with server.client() as c:
        wait_for(lambda: c.get(f"/models/{name}").json()["n_seen"] >= n, timeout=300, what="stream consumed")
        time.sleep(0.4)
        info = c.get(f"/models/{name}").json()
        answer = c.post("/predict", json={"model": name, "X": probe.tolist(), "interval": 0.9}).json()
    server.terminate()
    assert all(k < n for k in killed_at), killed_at
    assert info["task"] == "regression" and info["n_seen"] == n
    examples = info["examples"]
    assert examples["received"] == n == examples["learned"] + examples["pending"] + examples["refused"]
    assert r.xpending(key, f"svmstream:{name}")["pending"] == 0 and r.xlen(f"svmstream:{name}:dead") == 0

    registry = Registry(Settings(snapshot_dir=tmp_path / "plain", warm_up=False), None)
    reference = make_estimator(registry.resolve_config({"task": "regression"})).partial_fit(X, y)
    values = np.asarray(answer["values"])
    assert float(np.max(np.abs(values - reference.predict(probe)))) == 0.0
    lower, upper = reference.predict_interval(probe, 0.9)
    np.testing.assert_array_equal(np.asarray(answer["lower"]), lower)
    np.testing.assert_array_equal(np.asarray(answer["upper"]), upper)
