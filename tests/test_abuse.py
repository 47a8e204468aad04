"""No request can exhaust the server (real ``svmstream serve`` processes).

Each test probes one path the way an attacker on the network would, at CI size: names that
end in a newline, job parameters beyond the machine, bodies far larger than reads need,
idle connections, what tokenless callers see, client disconnects and model memory.
"""

from __future__ import annotations

import socket
import time

from benchmarks.abuse_probes import body_attack, invocations_body, predict_body, rss_mb, v2_body

TOKEN = "t0ken-for-abuse-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _env(**extra: str) -> dict[str, str]:
    return {"SVMSTREAM_API_TOKEN": TOKEN, "SVMSTREAM_WARM_UP": "false", **extra}


def test_model_name_with_a_final_newline_is_refused_and_a_restart_restores_every_model(
    start_server, tmp_path
):
    snapshots = tmp_path / "snapshots"
    server = start_server(snapshots, env=_env(SVMSTREAM_CREATE_DEFAULT_MODEL="false"))
    with server.client() as client:
        for name in ("abc", "abc.1", "Z-9"):
            assert client.put(f"/models/{name}", json={}, headers=AUTH).status_code == 201
        refused = client.put("/models/abc%0A", json={}, headers=AUTH)
        assert refused.status_code == 422, refused.text
        assert "invalid model name" in refused.json()["detail"]
        assert client.put("/models/abc%0D%0A", json={}, headers=AUTH).status_code == 422
        before = sorted(m["name"] for m in client.get("/models").json()["models"])
    server.terminate()
    again = start_server(snapshots, env=_env(SVMSTREAM_CREATE_DEFAULT_MODEL="false"))
    with again.client() as client:
        after = sorted(m["name"] for m in client.get("/models").json()["models"])
    assert after == before == ["Z-9", "abc", "abc.1"]


def test_job_and_upload_references_are_matched_whole():
    from svmstream.app.jobs.uploads import UPLOAD_ID_RE
    from svmstream.app.models.config import MODEL_NAME_RE, check_model_name

    assert MODEL_NAME_RE.fullmatch("abc") and not MODEL_NAME_RE.match("abc\n")
    assert not UPLOAD_ID_RE.match("up-" + "0" * 20 + "\n")
    try:
        check_model_name("abc\n")
    except ValueError as exc:
        assert "invalid model name" in str(exc)
    else:  # pragma: no cover - a name ending in a newline
        raise AssertionError("a name ending in a newline was accepted")


# ----------------------------------------------------------------------------- 2. job parameters


def test_job_parameters_beyond_the_machine_are_refused_naming_the_field(start_server):
    from svmstream.app.jobs.bounds import machine_cores

    cores = machine_cores()
    server = start_server(env=_env())
    with server.client() as client:

        def post(**body):
            return client.post("/jobs", json={"data": "up-" + "0" * 20, "model": "j", **body}, headers=AUTH)

        for params, field in (
            ({"n_jobs": cores + 1}, "params.n_jobs"),
            ({"n_jobs": 48}, "params.n_jobs"),
            ({"k": 1_000_000}, "params.k"),
            ({"cache_size": 1e9}, "params.cache_size"),
        ):
            answer = post(algorithm="dcsvm", params=params)
            assert answer.status_code == 422, (params, answer.text)
            assert answer.json()["field"] == field, answer.json()
        grid = post(algorithm="search", estimator="dcsvm", grid={"n_jobs": [1, 48]})
        assert grid.status_code == 422 and grid.json()["field"] == "grid.n_jobs", grid.text
        # within the bound, the parameters pass this check (the unknown upload is what fails)
        assert post(algorithm="dcsvm", params={"n_jobs": cores, "k": 4}).status_code == 404


def test_no_pool_larger_than_the_cores_starts(tmp_path):
    """A task that names more pool processes than cores (as a queued task from before the
    check would) runs with at most as many as the machine has."""
    import threading

    import psutil

    from svmstream.app.jobs.bounds import machine_cores
    from svmstream.app.jobs.worker import run_training
    from tests.conftest import two_moons_like, write_libsvm

    cores = machine_cores()
    X, y = two_moons_like(5000, d=2, seed=1)
    data = write_libsvm(tmp_path / "moons.libsvm", X, y)
    me, peak, done = psutil.Process(), [0], threading.Event()
    # processes this test session started before (a redis-server of a session fixture, when
    # another test file ran first in this pytest worker) are not the pool's
    before = {child.pid for child in me.children(recursive=True)}

    def watch():
        while not done.is_set():
            started = [c for c in me.children(recursive=True) if c.pid not in before]
            peak[0] = max(peak[0], len(started))
            done.wait(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        params = {"n_jobs": cores + 4, "n_levels": 1, "k": 2, "probability": False}
        run_training({"algorithm": "dcsvm", "data": str(data), "params": params})
    finally:
        done.set()
        watcher.join()
    assert 1 <= peak[0] <= cores + 1, (peak[0], cores)  # the pool (+ a resource tracker at most)


# ----------------------------------------------------------------------------- 3. body limits


def test_large_read_bodies_without_a_token_are_refused_before_reading(start_server):
    """Six concurrent 3 MB bodies to each read route, no token: every one 413 naming the
    read limit, RSS flat, /health answering (at CI size; the bench runs 65 MB)."""
    server = start_server(env=_env())
    for path, body in (
        ("/predict", predict_body(3_000_000)),
        ("/v2/models/default/infer", v2_body(3_000_000)),
        ("/invocations", invocations_body(3_000_000)),
    ):
        result = body_attack(server.url, server.proc.pid, path, body, n=6)
        assert result["statuses"] == [413] * 6, result
        assert result["rss_peak_growth_mb"] < 100, result
        assert result["health_failures"] == 0 and result["health_p99_ms"] < 1000, result
    with server.client() as client:
        answer = client.post(
            "/predict", content=predict_body(3_000_000), headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 413 and "SVMSTREAM_MAX_PREDICT_BODY_BYTES=" in answer.json()["detail"]
        assert answer.headers["connection"] == "close"


def test_a_chunked_read_body_is_cut_off_at_the_read_limit_and_learn_names_its_setting(start_server):
    server = start_server(
        env=_env(SVMSTREAM_MAX_PREDICT_BODY_BYTES="100000", SVMSTREAM_MAX_BODY_BYTES="300000")
    )
    body = predict_body(200_000)
    with server.client() as client:
        chunked = client.post(
            "/predict",
            content=iter([body[i : i + 50_000] for i in range(0, len(body), 50_000)]),
            headers={"Content-Type": "application/json"},
        )
        assert chunked.status_code == 413, chunked.text
        assert "SVMSTREAM_MAX_PREDICT_BODY_BYTES=100000 (more than" in chunked.json()["detail"]
        learn = client.post(
            "/learn", content=predict_body(400_000), headers={**AUTH, "Content-Type": "application/json"}
        )
        assert learn.status_code == 413 and "SVMSTREAM_MAX_BODY_BYTES=300000" in learn.json()["detail"]


def test_concurrent_large_bodies_beyond_the_cap_get_503_with_retry_after(start_server):
    import socket

    server = start_server(env=_env(SVMSTREAM_MAX_CONCURRENT_BODIES="1"))
    held = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:  # a large body that is still arriving holds the only slot
        held.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n" + predict_body(100_000)[:-2]
        )
        with server.client() as client:
            for _ in range(50):
                busy = client.post(
                    "/invocations",
                    content=invocations_body(200_000),
                    headers={"Content-Type": "application/json"},
                )
                if busy.status_code == 503:
                    break
            assert busy.status_code == 503, busy.text
            assert busy.headers["retry-after"] == "1"
            assert "SVMSTREAM_MAX_CONCURRENT_BODIES" in busy.json()["message"]
            # small bodies take no slot
            small = client.post("/predict", json={"X": [[0.0] * 3]})
            assert small.status_code in (409, 422), small.text
    finally:
        held.close()


# ----------------------------------------------------------------------------- 4. connections


def test_idle_and_half_header_sockets_are_closed_within_the_header_timeout(start_server):
    from benchmarks.abuse_probes import idle_sockets

    server = start_server(env=_env(SVMSTREAM_HEADER_TIMEOUT_S="2"))
    time.sleep(1.0)
    for partial in (False, True):
        result = idle_sockets(server.url, server.proc.pid, 300, partial_header=partial, limit_s=12)
        assert result["sockets"] == 300 and result["closed_by_server"] == 300, result
        assert result["all_closed_after_s"] <= 2 + 4, result  # the timeout, plus a loaded machine's slack
        assert result["health_failures"] == 0, result
        assert result["fds_after"] <= result["fds_before"] + 5, result


def test_an_oversized_request_head_gets_431_and_a_slow_one_408(start_server):
    server = start_server(env=_env(SVMSTREAM_HEADER_TIMEOUT_S="1", SVMSTREAM_MAX_HEADER_BYTES="8192"))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000)
        assert sock.recv(100).startswith(b"HTTP/1.1 431 ")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 408 ")
    # an ordinary request on a kept-alive connection is untouched by the guard
    with server.client() as client:
        for _ in range(3):
            assert client.get("/health").status_code == 200
            time.sleep(0.6)


# ----------------------------------------------------------------------------- 5. disclosure


def test_tokenless_readers_see_no_file_contents_paths_or_pids(start_server, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rows = "".join(f"{i % 2} 1:{i / 10:.1f} 2:0.5\n" for i in range(20))
    (data_dir / "leaky.libsvm").write_text(rows + "SECRET_API_KEY=hunter2 1:0.3\n")
    server = start_server(env=_env(SVMSTREAM_DATA_DIR=str(data_dir)))
    with server.client() as client:
        assert client.put("/models/m", json={}, headers=AUTH).status_code == 201
        job = client.post(
            "/jobs", json={"algorithm": "liblinear-cd", "data": "leaky.libsvm", "model": "j"}, headers=AUTH
        ).json()
        for _ in range(600):
            full = client.get(f"/jobs/{job['id']}", headers=AUTH).json()
            if full["state"] in ("failed", "succeeded"):
                break
            time.sleep(0.1)
        assert full["state"] == "failed" and "SECRET_API_KEY" in full["error"], full  # the operator's view
        views = {
            "/jobs": client.get("/jobs"),
            f"/jobs/{job['id']}": client.get(f"/jobs/{job['id']}"),
            "/models": client.get("/models"),
            "/models/m": client.get("/models/m"),
            "/health": client.get("/health"),
        }
    for path, answer in views.items():
        assert answer.status_code == 200, (path, answer.text)
        text = answer.text
        assert "SECRET_API_KEY" not in text and "hunter2" not in text, (path, text)
        assert str(tmp_path) not in text and '"/' not in text, (path, text)  # no absolute path
    public = views[f"/jobs/{job['id']}"].json()
    assert public["pid"] is None and public["error"].startswith("ValueError"), public
    assert "line" in public["error"] or "parse" in public["error"], public
    assert views["/health"].json()["pid"] is None
    assert views["/models/m"].json()["last_snapshot_path"].endswith(".svmstate"), views["/models/m"].json()


# ----------------------------------------------------------------------------- 6. log flooding


def test_a_client_leaving_mid_body_logs_one_brief_line_not_a_traceback(start_server):
    server = start_server(env=_env())
    before = server.log_text()
    paths = ("/predict", "/invocations", "/v2/models/default/infer")
    for path in paths:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n".encode()
                + predict_body(100_000)[:1000]
            )
            time.sleep(0.3)  # the route is reading the body when the client goes
    time.sleep(1.0)
    with server.client() as client:
        assert client.get("/health").status_code == 200
    logged = server.log_text()[len(before) :]
    assert "Traceback" not in logged and "ERROR" not in logged, logged
    lines = [line for line in logged.splitlines() if "client left" in line]
    assert len(lines) <= len(paths) and all(len(line) < 200 for line in lines), logged


# ----------------------------------------------------------------------------- 7. model memory


def test_model_memory_no_bound_counted_is_refused_before_any_allocation(start_server):
    server = start_server(
        env=_env(
            SVMSTREAM_CREATE_DEFAULT_MODEL="false",
            SVMSTREAM_MAX_MODELS="3",
            SVMSTREAM_MAX_TOTAL_MODEL_BYTES=str(80 * 2**20),
        )
    )
    rss_before = rss_mb(server.proc.pid)
    with server.client() as client:
        for body in ({"warmup": 1_000_000_000, "n_features": 100}, {"warmup": 1_000_000_000}):
            wu = client.put("/models/wu", json=body, headers=AUTH)
            assert wu.status_code == 422, wu.text
            assert wu.json()["field"] == "warmup" and "max_model_bytes" in wu.json()["detail"], wu.json()
        # a model of 100 features is estimated at ~32 MiB (shuffle buffer, run guard): two fit in 80 MiB
        sized = {"n_features": 100, "budget": 100}
        assert client.put("/models/a", json=sized, headers=AUTH).status_code == 201
        assert client.put("/models/b", json=sized, headers=AUTH).status_code == 201
        total = client.put("/models/c", json=sized, headers=AUTH)
        assert total.status_code == 422 and "max_total_model_bytes" in total.json()["detail"], total.text
        assert total.json()["field"] == "n_features" and total.json()["detail"].startswith("n_features: ")
        assert client.put("/models/a", json=sized, headers=AUTH).status_code == 200  # replacing counts once
        assert client.put("/models/c", json={}, headers=AUTH).status_code == 201
        count = client.put("/models/d", json={}, headers=AUTH)
        assert count.status_code == 422 and "max_models = 3" in count.json()["detail"], count.text
        assert count.json()["field"] == "name" and count.json()["detail"].startswith("name: the server")
        names = [m["name"] for m in client.get("/models").json()["models"]]
    assert sorted(names) == ["a", "b", "c"]
    assert rss_mb(server.proc.pid) - rss_before < 50


def test_a_whole_request_in_one_read_is_not_counted_as_its_head(start_server):
    """Head and a 200 KB body arriving in one read complete the head: no 431."""
    server = start_server(env=_env(SVMSTREAM_MAX_HEADER_BYTES="8192"))
    body = predict_body(200_000)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert not sock.recv(100).startswith(b"HTTP/1.1 431 ")
