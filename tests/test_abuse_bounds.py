"""Bounds on what a model may grow to and on concurrent ``/learn`` bodies (real ``svmstream
serve`` processes): labels (count, length, bytes in ``max_model_bytes``), the server-wide
``max_total_model_bytes`` when a model grows, the byte budget of large ``/learn`` bodies."""

from __future__ import annotations

import socket
import time

from benchmarks.abuse_probes import predict_body
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.limits import estimate_bytes, held_bytes
from svmstream.app.settings import Settings

TOKEN = "t0ken-for-bound-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _env(**extra: str) -> dict[str, str]:
    return {
        "SVMSTREAM_API_TOKEN": TOKEN,
        "SVMSTREAM_WARM_UP": "false",
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
        **extra,
    }


def _config(**fields) -> ModelConfig:
    """The configuration a server with default settings resolves for ``PUT`` body ``fields``."""
    return ModelConfig.model_validate({**Settings().model_defaults(), **fields})


def _state(client, name: str) -> dict:
    info = client.get(f"/models/{name}", headers=AUTH).json()
    return {"classes": info["classes"], "n_seen": info["n_seen"], "version": info["version"]}


def test_labels_are_bounded_in_count_length_and_bytes(start_server, tmp_path):
    """Each refusal is a 422 naming the example and the bound, and changes nothing."""
    # room for a model of 30 classes of 64-character labels, not 32
    max_bytes = estimate_bytes(_config(budget=10, warmup=0), 2, labels=["x" * 64] * 30) + 10
    server = start_server(
        tmp_path / "snapshots",
        env=_env(
            SVMSTREAM_MAX_LABEL_LENGTH="64",
            SVMSTREAM_MAX_MODEL_BYTES=str(max_bytes),
            SVMSTREAM_SNAPSHOT_INTERVAL_S="0.2",
        ),
    )
    with server.client() as client:
        body = {"budget": 10, "warmup": 0, "max_classes": 5}
        assert client.put("/models/few", json=body, headers=AUTH).status_code == 201
        many = client.post(
            "/learn",
            json={"model": "few", "X": [[float(i), 1.0] for i in range(7)], "y": list(range(7))},
            headers=AUTH,
        )
        assert many.status_code == 422, many.text
        assert many.json()["field"] == "y[5]" and "max_classes = 5" in many.json()["detail"], many.json()
        assert _state(client, "few") == {"classes": [], "n_seen": 0, "version": 0}

        long = client.post(
            "/learn", json={"model": "few", "X": [[0.0, 1.0], [1.0, 0.0]], "y": ["a", "b" * 65]}, headers=AUTH
        )
        assert long.status_code == 422, long.text
        assert long.json()["field"] == "y[1]", long.json()
        assert "max_label_length = 64" in long.json()["detail"] and "b" * 65 not in long.json()["detail"]
        assert _state(client, "few") == {"classes": [], "n_seen": 0, "version": 0}
        ok = client.post(
            "/learn", json={"model": "few", "X": [[0.0, 1.0], [1.0, 0.0]], "y": ["a", "b" * 64]}, headers=AUTH
        )
        assert ok.status_code == 200, ok.text

        declared = client.put("/models/d", json={"classes": ["x", "y" * 65]}, headers=AUTH)
        assert declared.status_code == 422 and declared.json()["field"] == "classes", declared.text
        assert "max_label_length = 64" in declared.json()["detail"]

        # labels count in max_model_bytes (with the arrays of their classes)
        assert client.put("/models/wide", json={"budget": 10, "warmup": 0}, headers=AUTH).status_code == 201
        learned = 0
        for k in range(100):
            labels = [f"{k:03d}{i}" + "x" * 60 for i in range(2)]
            answer = client.post(
                "/learn", json={"model": "wide", "X": [[0.0, 1.0], [1.0, 0.0]], "y": labels}, headers=AUTH
            )
            if answer.status_code != 200:
                break
            learned += 2
        assert answer.status_code == 422, answer.text
        assert "max_model_bytes" in answer.json()["detail"] and answer.json()["field"].startswith("y["), (
            answer.json()
        )
        assert learned == 30, learned
        assert len(_state(client, "wide")["classes"]) == learned
        time.sleep(1.0)  # a snapshot interval or more
    sizes = [p.stat().st_size for p in (tmp_path / "snapshots").rglob("*wide*") if p.is_file()]
    assert sizes and max(sizes) < max_bytes, (sizes, max_bytes)


def test_a_model_that_grows_past_the_total_bound_gets_413_and_is_unchanged(start_server):
    small = _config(budget=20, warmup=0)
    at_one = held_bytes(small, 1)
    at_two = held_bytes(small, 2)
    at_200 = held_bytes(small, 200)
    assert at_200 > at_two > at_one
    # two models at d = 1; one may grow to d = 2, not to d = 200
    total = 2 * at_one + (at_two - at_one) + (at_200 - at_two) // 2
    server = start_server(env=_env(SVMSTREAM_MAX_TOTAL_MODEL_BYTES=str(total)))
    with server.client() as client:
        for name in ("a", "b"):
            assert (
                client.put(f"/models/{name}", json={"budget": 20, "warmup": 0}, headers=AUTH).status_code
                == 201
            )
        wide = client.post("/learn", json={"model": "a", "X": [[0.5] * 200] * 2, "y": [0, 1]}, headers=AUTH)
        assert wide.status_code == 413, wide.text
        assert wide.json()["field"] == "X[0]", wide.json()
        assert "max_total_model_bytes" in wide.json()["detail"], wide.json()
        assert "SVMSTREAM_MAX_TOTAL_MODEL_BYTES" in wide.json()["detail"]
        info = client.get("/models/a", headers=AUTH).json()
        assert info["n_features"] is None and info["n_seen"] == 0, info
        # growing less is accepted; then the model holds its room and learns on
        narrow = client.post(
            "/learn", json={"model": "a", "X": [[0.5, 1.0], [1.0, 0.5]], "y": [0, 1]}, headers=AUTH
        )
        assert narrow.status_code == 200, narrow.text
        again = client.post(
            "/learn", json={"model": "a", "X": [[0.1, 1.0], [1.0, 0.1]], "y": [0, 1]}, headers=AUTH
        )
        assert again.status_code == 200, again.text
        # the other model may not take the rest at d = 200 either
        other = client.post("/learn", json={"model": "b", "X": [[0.5] * 200] * 2, "y": [0, 1]}, headers=AUTH)
        assert other.status_code == 413 and other.json()["field"] == "X[0]", other.text


def test_large_learn_bodies_share_a_byte_budget(start_server):
    server = start_server(env=_env(SVMSTREAM_MAX_CONCURRENT_LEARN_BYTES="300000"))
    with server.client() as client:
        assert client.put("/models/m", json={"warmup": 0}, headers=AUTH).status_code == 201
    body = predict_body(200_000)
    held = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:  # a 200 KB learn body still arriving holds 200 KB of the budget
        held.sendall(
            b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[:1000]
        )
        with server.client() as client:
            for _ in range(50):
                busy = client.post(
                    "/learn", content=body, headers={**AUTH, "Content-Type": "application/json"}
                )
                if busy.status_code == 503:
                    break
            assert busy.status_code == 503, busy.text
            assert busy.headers["retry-after"] == "1"
            # the old name of the setting is read: the budget is the shared one
            assert "SVMSTREAM_MAX_CONCURRENT_BODY_BYTES=300000" in busy.json()["detail"], busy.json()
            small = client.post(
                "/learn", json={"model": "m", "X": [[0.0, 1.0]] * 4, "y": [0, 1, 0, 1]}, headers=AUTH
            )
            assert small.status_code == 200, small.text  # a small body takes none of the budget
    finally:
        held.close()
    with server.client() as client:
        # the budget is released when the held body's client leaves; a body alone is read
        for _ in range(50):
            alone = client.post(
                "/learn",
                json={"model": "m", "X": [[0.25, 1.0]] * 6000, "y": [0, 1] * 3000},
                headers=AUTH,
            )
            if alone.status_code != 503:
                break
        assert alone.status_code == 200, alone.text


def test_the_header_guard_applies_under_uvicorns_own_command_line(tmp_path):
    """``uvicorn --factory ... --http svmstream.app.cli.http_guard:HeaderGuardProtocol``: the
    bounds come from the environment, as under ``svmstream serve``."""
    from tests.conftest import ServerProcess

    server = ServerProcess(
        tmp_path / "snapshots",
        tmp_path / "uvicorn.log",
        use_uvicorn=True,
        env={
            **_env(SVMSTREAM_HEADER_TIMEOUT_S="1", SVMSTREAM_MAX_HEADER_BYTES="8192"),
            "UVICORN_HTTP": "svmstream.app.cli.http_guard:HeaderGuardProtocol",
        },
    )
    try:
        server.wait_ready()
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            started = time.monotonic()
            assert sock.recv(100).startswith(b"HTTP/1.1 408 ")  # a silent connection
            assert time.monotonic() - started < 1 + 10  # the timeout, plus a loaded machine's slack
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000)
            assert sock.recv(100).startswith(b"HTTP/1.1 431 ")
        with server.client() as client:
            assert client.get("/health").status_code == 200
    finally:
        server.kill()


def test_metrics_renderings_are_reused_beyond_the_model_count(start_server):
    fresh = start_server(env=_env(SVMSTREAM_METRICS_CACHE_MODELS="2", SVMSTREAM_METRICS_CACHE_S="60"))
    cached = start_server(env=_env(SVMSTREAM_METRICS_CACHE_MODELS="1", SVMSTREAM_METRICS_CACHE_S="60"))
    for server, reused in ((fresh, False), (cached, True)):
        with server.client() as client:
            for name in ("a", "b"):
                assert client.put(f"/models/{name}", json={"warmup": 0}, headers=AUTH).status_code == 201
            first = client.get("/metrics")
            learn = client.post(
                "/learn", json={"model": "a", "X": [[0.0, 1.0], [1.0, 0.0]], "y": [0, 1]}, headers=AUTH
            )
            assert learn.status_code == 200, learn.text
            second = client.get("/metrics")
        assert first.status_code == second.status_code == 200
        assert 'svmstream_examples_applied_total{model="a"} 0' in first.text, first.text
        assert ('svmstream_examples_applied_total{model="a"} 2' in second.text) is not reused, second.text
        assert (first.content == second.content) is reused
