"""End-to-end tests against real server processes (uvicorn in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx
import numpy as np
import pytest

from tests.conftest import (
    CLI,
    REPO,
    ServerProcess,
    assert_examples_account,
    run_cli,
    subprocess_env,
    two_moons_like,
    write_libsvm,
)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for the tests that do not restart it (body limit 3 MB)."""
    root = tmp_path_factory.mktemp("shared")
    server = ServerProcess(root / "snap", root / "server.log", args=("--max-body-bytes", str(3_000_000)))
    try:
        yield server.wait_ready()
    finally:
        if server.proc.poll() is None:
            server.terminate()


#: the raw step (no scaling, warm-up window, shuffle buffer or run guard) for the tests that pin
#: numerics or need predictions from the first batch on
RAW = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}
RAW_ARGS = ("--scaling", "none", "--warmup", "0", "--shuffle-buffer", "0", "--no-run-guard")

BC_MODEL = {
    "budget": 40,
    "gamma": 0.03,
    "C": 10.0,
    "n_samples": 569,
    "classes": ["benign", "malignant"],
    "random_state": 1,
    **RAW,
}


def _learn_in_batches(client: httpx.Client, model: str, X, y, batch: int) -> dict:
    last = None
    for start in range(0, len(X), batch):
        r = client.post(
            "/learn",
            json={
                "model": model,
                "X": X[start : start + batch].tolist(),
                "y": y[start : start + batch].tolist(),
            },
        )
        assert r.status_code == 200, r.text
        last = r.json()
    return last


def _stats(info: dict) -> dict:
    keys = ("n_support_vectors", "t", "n_merges", "n_seen", "version", "n_features", "config", "fitted")
    return {k: info[k] for k in keys}


def test_breast_cancer_over_http_sigterm_restart_identical_then_truncated_snapshot(
    start_server, breast_cancer, tmp_path
):
    X, y = breast_cancer
    snap = tmp_path / "snap"
    # first life: plain `python -m uvicorn --factory app.main:create_app`, settings from env
    server = start_server(snap, use_uvicorn=True, env={"SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600"})
    with server.client() as c:
        assert c.put("/models/bc", json=BC_MODEL).status_code == 201
        last = _learn_in_batches(c, "bc", X, y, batch=100)
        assert last["n_seen"] == len(X)
        assert_examples_account(c, "bc", len(X))
        before = c.post("/predict", json={"model": "bc", "X": X.tolist()}).json()
        info_before = c.get("/models/bc").json()
    accuracy = np.mean(np.asarray(before["labels"]) == y)
    assert accuracy > 0.93, accuracy
    assert info_before["n_support_vectors"] <= BC_MODEL["budget"]
    assert info_before["n_merges"] > 0  # the budget was reached: merging ran
    server.terminate()  # graceful: final snapshot
    assert "bc-000000000002.svmstate (version 6, 569 examples seen)" in server.log_text()

    # second life: `python -m app.cli serve` on the same snapshot directory
    server = start_server(snap)
    with server.client() as c:
        info_after = c.get("/models/bc").json()
        after = c.post("/predict", json={"model": "bc", "X": X.tolist()}).json()
        assert _stats(info_after) == _stats(info_before)
        assert after["labels"] == before["labels"]
        assert after["decision"] == before["decision"]  # bit-identical floats
        # and it keeps learning from where it stopped
        r = c.post("/learn", json={"model": "bc", "X": X[:50].tolist(), "y": y[:50].tolist()}).json()
        assert r["n_seen"] == len(X) + 50 and r["version"] == info_before["version"] + 1
        assert_examples_account(c, "bc", len(X) + 50)  # the account survives a restart
    assert f"restored from {snap / 'bc' / 'bc-000000000002.svmstate'}" in server.log_text()
    server.terminate()

    # a torn write of the newest snapshot: the third life falls back to the previous one
    files = sorted((snap / "bc").glob("bc-*.svmstate"))
    assert [f.name for f in files] == [f"bc-{k:012d}.svmstate" for k in (1, 2, 3)]
    newest = files[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    server = start_server(snap)
    with server.client() as c:
        info = c.get("/models/bc").json()
        restored = c.post("/predict", json={"model": "bc", "X": X.tolist()}).json()
    assert _stats(info) == _stats(info_before) and info["last_snapshot_path"] == str(files[1])
    assert restored["decision"] == before["decision"]
    log = server.log_text()
    assert f"skipping snapshot {newest}: truncated payload" in log, log


def test_sigkill_mid_replay_then_restart_keeps_learning(start_server, tmp_path):
    X, y = two_moons_like(2000, d=8, seed=3)
    train = write_libsvm(tmp_path / "moons.bz2", X, y)
    snap = tmp_path / "snap"
    server = start_server(snap, env={"SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.2"})
    passes = 200  # 400,000 examples: far more than can be applied before the kill
    replay = subprocess.Popen(
        [
            *CLI,
            "replay",
            str(train),
            "--url",
            server.url,
            "--model",
            "moons",
            "--batch",
            "200",
            "--passes",
            str(passes),
            "--budget",
            "60",
            "--gamma",
            "1.0",
            "--C",
            "10",
            *RAW_ARGS,
            "--no-progress",
        ],
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        seen = 0
        with server.client() as c:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                r = c.get("/models/moons")
                if r.status_code == 200:
                    info = r.json()
                    seen = info["n_seen"]
                    if seen >= 20_000 and info["last_snapshot_path"] and info["version"] > 10:
                        break
                assert replay.poll() is None, replay.stdout.read().decode()
                time.sleep(0.05)
        assert seen >= 20_000
        server.kill()
    finally:
        out = replay.communicate(timeout=60)[0].decode()
    assert replay.returncode == 2 and "cannot talk to" in out, out  # the replay lost its server

    snapshots = sorted((snap / "moons").glob("moons-*.svmstate"))
    assert 1 <= len(snapshots) <= 20  # retention: SVMSTREAM_KEEP_VERSIONS=20

    server2 = start_server(snap)
    with server2.client() as c:
        info = c.get("/models/moons").json()
        assert info["fitted"] and 0 < info["n_seen"] < passes * len(X)
        examples = info["examples"]  # pending: the open scoring cell's rows (on_drift="challenger")
        assert examples["learned"] == info["t"] - info["statistics"]["rehearsal_steps"]
        assert info["n_seen"] == examples["received"] == examples["learned"] + examples["pending"]
        assert info["n_support_vectors"] <= 60
        assert info["config"]["budget"] == 60 and info["n_features"] == 8
        r = c.post("/learn", json={"model": "moons", "X": X[:300].tolist(), "y": y[:300].tolist()})
        assert r.status_code == 200, r.text
        assert r.json()["n_seen"] == info["n_seen"] + 300
        assert_examples_account(c, "moons", info["n_seen"] + 300)
        pred = c.post("/predict", json={"model": "moons", "X": X.tolist()}).json()
        assert np.mean(np.asarray(pred["labels"]) == y) > 0.85


def test_replay_cli_with_test_file(shared_server, tmp_path):
    X, y = two_moons_like(3000, d=6, seed=5)
    train = write_libsvm(tmp_path / "train.bz2", X[:2000], y[:2000])
    test = write_libsvm(tmp_path / "test", X[2000:], y[2000:])
    server = shared_server
    out = run_cli(
        [
            "replay",
            str(train),
            "--url",
            server.url,
            "--model",
            "m",
            "--batch",
            "250",
            "--passes",
            "2",
            "--test",
            str(test),
            "--budget",
            "80",
            "--gamma",
            "1",
            "--C",
            "10",
            "--json",
            "--no-progress",
        ],
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["examples"] == 4000 and result["format"] == "dense"
    assert result["model"]["config"]["n_samples"] == 2000  # n = rows of FILE
    assert result["model"]["n_seen"] == 4000 and result["model"]["n_features"] == 6
    assert result["test_examples"] == 1000 and result["test_accuracy"] > 0.8
    assert "test accuracy on" in out.stderr and "examples/s" in out.stderr
    # the printed accuracy agrees with a direct /predict
    with server.client() as c:
        pred = c.post("/predict", json={"model": "m", "X": X[2000:].tolist()}).json()
        assert_examples_account(c, "m", 4000)
    assert abs(np.mean(np.asarray(pred["labels"]) == y[2000:]) - result["test_accuracy"]) < 1e-12


def test_oversized_bodies_get_413_over_a_real_socket(shared_server):
    server = shared_server
    X, y = two_moons_like(50, d=4)
    with server.client() as c:
        assert c.put("/models/limits", json={}).status_code == 201
        assert c.post("/learn", json={"model": "limits", "X": X.tolist(), "y": y.tolist()}).status_code == 200
        info = c.get("/models/limits").json()
        big = json.dumps(
            {"model": "limits", "X": two_moons_like(60_000, d=4)[0].tolist(), "y": [1] * 60_000}
        ).encode()
        assert len(big) > 3_000_000
        r = c.post("/learn", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "MAX_BODY_BYTES=3000000" in r.json()["detail"]

        def chunks():  # no Content-Length: Transfer-Encoding: chunked
            for start in range(0, len(big), 65536):
                yield big[start : start + 65536]

        r = c.post("/learn", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and "MAX_BODY_BYTES=3000000" in r.json()["detail"]
    with server.client() as c:  # a fresh connection: the server is still fine
        assert c.get("/models/limits").json() == info


def test_server_keeps_answering_while_a_batch_is_learned(shared_server):
    """/predict and /health are answered from the published view while a long batch is
    applied: learning runs off the event loop and never blocks it."""
    X, y = two_moons_like(25_000, d=10, seed=9)
    with shared_server.client() as c:
        assert c.put("/models/busy", json={"budget": 800, "gamma": 0.5, "C": 1.0, **RAW}).status_code == 201
        assert (
            c.post("/learn", json={"model": "busy", "X": X[:500].tolist(), "y": y[:500].tolist()}).status_code
            == 200
        )
    body = json.dumps({"model": "busy", "X": np.round(X, 4).tolist(), "y": y.tolist()}).encode()
    assert len(body) < 3_000_000
    done = threading.Event()
    result = {}

    def learn():
        with shared_server.client() as c:
            result["start"] = time.monotonic()
            result["learn"] = c.post("/learn", content=body, headers={"content-type": "application/json"})
            result["end"] = time.monotonic()
        done.set()

    answered_during = []  # (time, version) of answers received while the batch was in flight
    thread = threading.Thread(target=learn)
    with shared_server.client() as c:
        thread.start()
        while not done.is_set():
            r = c.post("/predict", json={"model": "busy", "X": X[:20].tolist()})
            assert r.status_code == 200
            if not done.is_set():
                answered_during.append((time.monotonic(), r.json()["version"]))
            assert c.get("/health").status_code == 200
        thread.join()
        assert result["learn"].status_code == 200 and result["learn"].json()["version"] == 2
        assert c.post("/predict", json={"model": "busy", "X": X[:20].tolist()}).json()["version"] == 2
    # answers kept coming from the view published before the batch during the whole
    # batch (its second half is pure solver work, the body was parsed long before); the
    # new view (version 2) may show up just before the learn response arrives
    versions = [v for _, v in answered_during]
    assert set(versions) <= {1, 2} and versions == sorted(versions)
    late = result["start"] + 0.6 * (result["end"] - result["start"])
    assert sum(t > late and v == 1 for t, v in answered_during) >= 3, (answered_during, result)
