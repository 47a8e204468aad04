"""A model's history through the real service: versions listed, pinned, rolled back; retention
within ``keep_versions`` and ``max_history_bytes``; a corrupt history file skipped; a SIGKILL
during a rollback leaves the old live model or the rolled-back one, never a mixture."""

from __future__ import annotations

import functools
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from svmstream.app.api.routes.v2 import INPUT_NAME
from svmstream.app.models.history import KeptFile, files_to_prune
from tests.conftest import assert_examples_account, run_cli, two_moons_like, wait_for, write_libsvm

NEVER = "100000"  # snapshots only when the test asks (POST /models/{name}/snapshot)


def _learn(client, model, X, y, batch=200):
    for i in range(0, len(X), batch):
        r = client.post(
            "/learn", json={"model": model, "x": X[i : i + batch].tolist(), "y": y[i : i + batch].tolist()}
        )
        assert r.status_code == 200, r.text


def _decisions(client, model, probe, version=None) -> list[float]:
    body = {"model": model, "x": probe.tolist()}
    if version is not None:
        body["version"] = version
    r = client.post("/predict", json=body)
    assert r.status_code == 200, r.text
    return r.json()["decision"], r.json()["model_version"]


def _snapshot(client, model) -> int:
    r = client.post(f"/models/{model}/snapshot")
    assert r.status_code == 200, r.text
    return r.json()["version"]


def _clean_then_flipped(client, model="m"):
    X, y = two_moons_like(3000, d=4, seed=3)
    r = client.put(f"/models/{model}", json={"budget": 60, "gamma": 1.0, "C": 10, "shuffle_buffer": 0})
    assert r.status_code == 201, r.text
    _learn(client, model, X[:2000], y[:2000])
    client.post(f"/models/{model}/flush")
    clean = _snapshot(client, model)
    flipped = np.where(y[2000:] == y.max(), y.min(), y.max())  # a label bug upstream: every label flipped
    _learn(client, model, X[2000:], flipped)
    client.post(f"/models/{model}/flush")
    bad = _snapshot(client, model)
    return X, y, clean, bad


def test_rollback_restores_the_clean_version_exactly_and_can_be_undone(start_server, tmp_path):
    server = start_server(args=("--snapshot-interval", NEVER))
    probe = two_moons_like(300, d=4, seed=9)[0]
    with server.client() as client:
        X, y, clean, bad = _clean_then_flipped(client)
        listed = client.get("/models/m/versions").json()
        assert [v["version"] for v in listed["versions"]][:2] == [bad, clean]
        assert listed["versions"][0]["kept_because"].startswith("live")
        clean_decisions, served = _decisions(client, "m", probe, version=clean)
        assert served == clean
        bad_decisions, _ = _decisions(client, "m", probe)
        assert np.max(np.abs(np.subtract(clean_decisions, bad_decisions))) > 1e-3

        r = client.post("/models/m/rollback", json={"version": clean})
        assert r.status_code == 200, r.text
        rolled = r.json()
        assert rolled["rolled_back_to"] == clean and rolled["version"] == bad + 1
        live, version = _decisions(client, "m", probe)
        assert version == bad + 1 and live == clean_decisions  # exactly that snapshot's decisions
        kept = {v["version"]: v["kept_because"] for v in client.get("/models/m/versions").json()["versions"]}
        assert "rolled back to" in kept[clean] and "rollback from" in kept[bad + 1]

        _learn(client, "m", X[:400], y[:400])  # learning continues from the rolled-back model
        client.post("/models/m/flush")
        assert client.get("/models/m").json()["version"] > bad + 1
        assert_examples_account(client, "m")

        r = client.post("/models/m/rollback", json={"version": bad})  # undo the rollback
        assert r.status_code == 200, r.text
        assert _decisions(client, "m", probe)[0] == bad_decisions

    # compare two versions on a labelled file: the clean one is right, the flipped one wrong
    test_file = write_libsvm(tmp_path / "test.libsvm", X[:500], y[:500])
    done = run_cli(
        [
            "score",
            str(test_file),
            "--server",
            server.url,
            "--model",
            "m",
            "--versions",
            f"{clean},{bad}",
            "--json",
        ],
        120,
    )
    assert done.returncode == 0, done.stderr
    scored = json.loads(done.stdout)
    assert scored["versions"][str(clean)]["accuracy"] > 0.8 > scored["versions"][str(bad)]["accuracy"]
    assert scored["agreement"][f"{clean},{bad}"] < 0.5


def test_pinned_version_is_byte_identical_after_more_snapshots_and_a_restart(start_server, tmp_path):
    snap = tmp_path / "snap"
    server = start_server(snap, args=("--snapshot-interval", NEVER))
    probe = two_moons_like(200, d=4, seed=5)[0]
    X, y = two_moons_like(4000, d=4, seed=4)
    with server.client() as client:
        client.put("/models/p", json={"budget": 40, "gamma": 1.0, "C": 10, "shuffle_buffer": 0})
        _learn(client, "p", X[:500], y[:500])
        client.post("/models/p/flush")
        pinned = _snapshot(client, "p")
        before = client.post("/predict", json={"model": "p", "x": probe.tolist(), "version": pinned}).content
        for k in range(10):
            _learn(client, "p", X[500 + 300 * k : 800 + 300 * k], y[500 + 300 * k : 800 + 300 * k])
            _snapshot(client, "p")
        after = client.post("/predict", json={"model": "p", "x": probe.tolist(), "version": pinned}).content
        assert after == before
        # the Open Inference Protocol's versioned routes answer from the same version
        meta = client.get(f"/v2/models/p/versions/{pinned}").json()
        assert meta["versions"] == [str(pinned)]
        tensor = {
            "name": INPUT_NAME,
            "datatype": "FP64",
            "shape": list(probe.shape),
            "data": probe.ravel().tolist(),
        }
        infer = client.post(f"/v2/models/p/versions/{pinned}/infer", json={"inputs": [tensor]}).json()
        assert infer["model_version"] == str(pinned)
        decision = next(o for o in infer["outputs"] if o["name"] == "decision")["data"]
        assert decision == json.loads(before)["decision"]
        mlflow = client.post(
            "/invocations",
            json={
                "inputs": probe.tolist(),
                "params": {"model": "p", "output": "decision", "version": pinned},
            },
        )
        assert mlflow.json()["predictions"] == json.loads(before)["decision"]
        bad_param = client.post(
            "/invocations", json={"inputs": probe.tolist(), "params": {"model": "p", "version": -2}}
        )
        assert bad_param.status_code == 400 and "params.version" in bad_param.json()["message"]
        missing = client.post("/predict", json={"model": "p", "x": probe.tolist(), "version": 10**9})
        assert missing.status_code == 404 and "version" in missing.json()["detail"]
        bad = client.post("/predict", json={"model": "p", "x": probe.tolist(), "version": "x"})
        assert bad.status_code == 422 and "version" in bad.json()["detail"]
        # a Unicode digit that int() refuses ("²".isdigit() is true) is an unknown version, not a 500
        odd = client.post("/v2/models/p/versions/%C2%B2/infer", json={"inputs": [tensor]})
        assert odd.status_code == 404 and "version" in odd.text, odd.text
    server.terminate()
    server2 = start_server(snap, args=("--snapshot-interval", NEVER))
    with server2.client() as client:
        again = client.post("/predict", json={"model": "p", "x": probe.tolist(), "version": pinned}).content
        assert again == before


def test_history_stays_within_keep_versions_and_bytes_and_a_corrupt_history_file_is_skipped(
    start_server, tmp_path
):
    snap = tmp_path / "snap"
    server = start_server(
        snap, args=("--snapshot-interval", NEVER, "--keep-versions", "5", "--max-history-bytes", "200000")
    )
    X, y = two_moons_like(3000, d=4, seed=6)
    with server.client() as client:
        client.put(
            "/models/h", json={"budget": 30, "gamma": 1.0, "C": 10, "shuffle_buffer": 0, "rehearsal": 0}
        )
        _learn(client, "h", X[:300], y[:300])
        client.post("/models/h/flush")
        first = _snapshot(client, "h")
        for k in range(40):
            _learn(client, "h", X[300 + 50 * k : 350 + 50 * k], y[300 + 50 * k : 350 + 50 * k])
            _snapshot(client, "h")
            if k == 2:  # a rollback marks its target: kept beyond keep_versions
                assert client.post("/models/h/rollback", json={"version": first}).status_code == 200
        files = list((snap / "h").glob("h-*.svmstate"))
        assert len(files) <= 5 + 2  # recent + the target and the rollback's own version
        assert sum(f.stat().st_size for f in files) <= 200_000
        listed = client.get("/models/h/versions").json()
        assert first in [v["version"] for v in listed["versions"]]
        assert listed["history_bytes"] <= 200_000

        (snap / "h" / "history.json").write_text("{not json")
        r = client.get("/models/h/versions")
        assert r.status_code == 200 and len(r.json()["versions"]) >= 1
        _learn(client, "h", X[:50], y[:50])
        assert client.post("/models/h/snapshot").status_code == 200  # pruning reads it too
    assert "history" in server.log_text() and "corrupt" in server.log_text()


def test_sigkill_during_a_rollback_leaves_the_old_or_the_rolled_back_model(start_server, tmp_path):
    probe = two_moons_like(200, d=4, seed=8)[0]
    for attempt, delay in enumerate((0.0, 0.005, 0.02, 0.05)):
        snap = tmp_path / f"snap{attempt}"
        server = start_server(snap, args=("--snapshot-interval", NEVER))
        with server.client() as client:
            _, _, clean, bad = _clean_then_flipped(client)
            clean_d, _ = _decisions(client, "m", probe, version=clean)
            bad_d, _ = _decisions(client, "m", probe)
            sender = threading.Thread(
                target=_post_quietly,
                args=(server.url + "/models/m/rollback", {"version": clean}),
                daemon=True,
            )
            sender.start()
            time.sleep(delay)
            server.kill()
            sender.join(10)
        server2 = start_server(snap, args=("--snapshot-interval", NEVER))
        with server2.client() as client:
            now, version = _decisions(client, "m", probe)
            assert now in (clean_d, bad_d), attempt
            assert version in (bad, bad + 1)
            assert (now == clean_d) == (version == bad + 1)
            assert_examples_account(client, "m")
        server2.kill()


def _post_quietly(url: str, body: dict) -> None:
    import httpx

    try:
        httpx.post(url, json=body, timeout=10)
    except httpx.HTTPError:
        pass


def test_retention_policy_keeps_recent_and_marked_files_within_the_budget():
    files = [KeptFile(seq, Path(f"m-{seq:012d}.svmstate"), 100) for seq in range(30, 0, -1)]  # newest first
    doomed = files_to_prune(files, {3: "rolled back to"}, keep_versions=5, max_bytes=None)
    kept = sorted(f.seq for f in files if f not in doomed)
    assert kept == [3, 26, 27, 28, 29, 30]
    doomed = files_to_prune(files, {3: "rolled back to"}, keep_versions=5, max_bytes=450)
    kept = sorted(f.seq for f in files if f not in doomed)
    assert kept == [3, 28, 29, 30]  # the oldest unmarked went first
    doomed = files_to_prune(files, {3: "rolled back to"}, keep_versions=5, max_bytes=150)
    assert [f.seq for f in files if f not in doomed] == [30]  # never the live file
    assert json.dumps([f.seq for f in doomed])  # plain values


@pytest.mark.parametrize("body", [{}, {"version": -1}, {"version": "3"}, {"version": 1, "extra": 1}])
def test_a_bad_rollback_request_is_a_422_naming_the_field_and_changes_nothing(start_server, body):
    server = start_server(args=("--snapshot-interval", NEVER))
    with server.client() as client:
        client.put("/models/b", json={"budget": 20, "gamma": 1.0, "C": 1})
        r = client.post("/models/b/rollback", json=body)
        assert r.status_code == 422, r.text
        field = "extra" if "extra" in body else "version"
        assert r.json()["detail"].startswith(field), r.text
        assert client.post("/models/b/rollback", json={"version": 77}).status_code == 404
        assert client.get("/models/b").json()["version"] == 0


@pytest.mark.parametrize("delay", [0.01, 2.0])  # killed during the rollback, or after it answered
def test_sigkill_during_a_rollback_on_a_redis_stream_applies_every_entry_once(
    redis_server, start_server, tmp_path, delay
):
    """The model learns from a real Redis stream; a rollback is killed with SIGKILL at once; after
    the restart the rest of the stream is applied: the model is the old live one or the rolled-back
    one (never a mixture), and every entry is applied exactly once on top of it."""
    import uuid

    name = f"rb-{uuid.uuid4().hex[:8]}"
    key = f"svmstream:{name}:examples"
    r = redis_server.client()
    X, y = two_moons_like(3000, d=4, seed=21)
    flipped = -y
    entries = [
        {b"y": str(int(lab)).encode(), b"xd": np.asarray(row, "<f8").tobytes()} for row, lab in zip(X, y)
    ]
    bad = [
        {b"y": str(int(lab)).encode(), b"xd": np.asarray(row, "<f8").tobytes()}
        for row, lab in zip(X, flipped)
    ]
    env = {
        "SVMSTREAM_REDIS_URL": redis_server.url,
        "SVMSTREAM_STREAM_BLOCK_MS": "100",
        "SVMSTREAM_STREAM_LEASE_S": "0.6",
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": NEVER,
    }
    snap = tmp_path / "snap"
    probe = two_moons_like(200, d=4, seed=22)[0]
    server = start_server(snap, env=env)
    with server.client() as client:
        body = {"budget": 40, "gamma": 1.0, "C": 10, "n_features": 4, "classes": [-1, 1], "shuffle_buffer": 0}
        assert client.put(f"/models/{name}", json=body).status_code == 201

        _produce(r, key, entries[:1500])
        _wait(lambda: client.get(f"/models/{name}").json()["n_seen"] >= 1500)
        clean = _snapshot(client, name)
        clean_d, _ = _decisions(client, name, probe, version=clean)
        _produce(r, key, bad[1500:2500])
        _wait(lambda: client.get(f"/models/{name}").json()["n_seen"] >= 2500)
        bad_version = _snapshot(client, name)
        bad_d, _ = _decisions(client, name, probe)
        assert client.get(f"/models/{name}").json()["examples"]["received"] == 2500
        sender = threading.Thread(
            target=_post_quietly,
            args=(server.url + f"/models/{name}/rollback", {"version": clean}),
            daemon=True,
        )
        sender.start()
        time.sleep(delay)
        server.kill()
        sender.join(10)
    server = start_server(snap, env=env)
    with server.client() as client:
        now, version = _decisions(client, name, probe)
        assert (now, version) in ((clean_d, bad_version + 1), (bad_d, bad_version))  # never a mixture
        if delay >= 2.0:
            assert version == bad_version + 1  # the rollback had answered: it is durable
        base = client.get(f"/models/{name}").json()["examples"]["received"]  # 1,500 or 2,500
        _produce(r, key, entries[2500:])
        _wait(lambda: client.get(f"/models/{name}").json()["examples"]["received"] >= base + 500)
        time.sleep(0.3)
        info = client.get(f"/models/{name}").json()
        assert info["examples"]["received"] == base + 500  # the last 500 entries once, nothing replayed twice
        assert_examples_account(client, name)
        _snapshot(client, name)  # acknowledges what it holds
        _wait(lambda: r.xpending(key, f"svmstream:{name}")["pending"] == 0, timeout=30)
    assert r.xpending(key, f"svmstream:{name}")["pending"] == 0
    assert r.xlen(f"svmstream:{name}:dead") == 0


def _produce(client, key, entries) -> None:
    pipe = client.pipeline(transaction=False)
    for fields in entries:
        pipe.xadd(key, fields)
    pipe.execute()


_wait = functools.partial(wait_for, timeout=120.0)
