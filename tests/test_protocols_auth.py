"""The protocol routes under ``API_TOKEN`` + ``PROTECT_READS`` and a small ``MAX_BODY_BYTES``,
through a real server: probes stay open, everything else needs the token (401 in each
protocol's shape), bodies over the limit (sent or decompressed) are 413."""

from __future__ import annotations

import gzip
import time

import httpx
import numpy as np
import orjson
import pytest

from tests.conftest import ServerProcess

tritonclient_http = pytest.importorskip(
    "tritonclient.http", reason="pip install 'tritonclient[http]' (test extra)"
)
from tritonclient.utils import InferenceServerException  # noqa: E402

TOKEN = "s3cret-token"
LIMIT = 65_536
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("protocols-auth")
    env = {
        "SVMSTREAM_API_TOKEN": TOKEN,
        "SVMSTREAM_PROTECT_READS": "true",
        "SVMSTREAM_MAX_BODY_BYTES": str(LIMIT),
    }
    proc = ServerProcess(tmp / "snapshots", tmp / "server.log", env=env)
    try:
        deadline = time.monotonic() + 90
        while True:  # /health needs the token here: the readiness probe does not
            assert proc.proc.poll() is None, proc.log_text()
            try:
                if httpx.get(proc.url + "/v2/health/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, proc.log_text()
            time.sleep(0.1)
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 4)) * [1, 10, 100, 1000]  # raw, unscaled
        y = np.where(X[:, 0] + X[:, 1] / 10 > 0, "yes", "no").tolist()
        with httpx.Client(base_url=proc.url, headers=AUTH, timeout=60) as http:
            assert http.put("/models/m", json={}).status_code == 201
            assert http.post("/learn", json={"model": "m", "X": X.tolist(), "y": y}).status_code == 200
            assert http.post("/models/m/flush").status_code == 200
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.terminate()


BODY = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [0.1, 1.0, 10.0, 100.0]}]}


def test_probes_need_no_token(server):
    for path in ("/v2/health/live", "/v2/health/ready", "/ping"):
        assert httpx.get(server.url + path).status_code == 200, path
    assert httpx.get(server.url + "/health").status_code == 401  # the precedent: reads are protected


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v2"), ("GET", "/v2/models/m"), ("GET", "/v2/models/m/ready"), ("POST", "/v2/models/m/infer")],
)
def test_oip_routes_need_the_token(server, method, path):
    r = httpx.request(method, server.url + path, json=BODY if method == "POST" else None)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json().keys() == {"error"} and r.json()["error"].startswith("authorization:")
    wrong = httpx.request(
        method,
        server.url + path,
        json=BODY if method == "POST" else None,
        headers={"Authorization": "Bearer nope"},
    )
    assert wrong.status_code == 401
    assert (
        httpx.request(
            method, server.url + path, json=BODY if method == "POST" else None, headers=AUTH
        ).status_code
        == 200
    )


def test_tritonclient_with_and_without_token(server):
    client = tritonclient_http.InferenceServerClient(server.url.removeprefix("http://"))
    try:
        assert client.is_server_ready()
        assert not client.is_model_ready("m")
        with pytest.raises(InferenceServerException) as err:
            client.get_model_metadata("m")
        assert err.value.status() == "401"
        assert client.is_model_ready("m", headers=dict(AUTH))
        inp = tritonclient_http.InferInput("x", [2, 4], "FP32")
        inp.set_data_from_numpy(np.array([[1, 10, 100, 1000], [-1, -10, -100, -1000]], dtype=np.float32))
        # a copy: tritonclient adds its own headers to the dict it is given
        labels = client.infer("m", [inp], headers=dict(AUTH)).as_numpy("label")
        assert [v.decode() for v in labels] == ["yes", "no"]
    finally:
        client.close()


def test_invocations_needs_the_token(server):
    payload = {"inputs": [[1.0, 10.0, 100.0, 1000.0]], "params": {"model": "m"}}
    r = httpx.post(server.url + "/invocations", json=payload)
    assert r.status_code == 401 and r.json()["error_code"] == "UNAUTHENTICATED"
    r = httpx.post(server.url + "/invocations", json=payload, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"predictions": ["yes"]}


def test_body_limit_sent_or_decompressed(server):
    rows = np.ones((LIMIT // 16, 4)).tolist()  # about 80 kB of JSON
    big_oip = orjson.dumps(
        {"inputs": [{"name": "x", "shape": [len(rows), 4], "datatype": "FP64", "data": rows}]}
    )
    big_mlflow = orjson.dumps({"inputs": rows, "params": {"model": "m"}})
    assert len(big_oip) > LIMIT and len(gzip.compress(big_oip)) < LIMIT
    for path, body, check in (
        ("/v2/models/m/infer", big_oip, lambda j: j.keys() == {"error"}),
        ("/invocations", big_mlflow, lambda j: j["error_code"] == "REQUEST_LIMIT_EXCEEDED"),
    ):
        for headers in ({}, {"content-encoding": "gzip"}):
            content = gzip.compress(body) if headers else body
            r = httpx.post(
                server.url + path,
                content=content,
                headers={**AUTH, **headers, "content-type": "application/json"},
            )
            assert r.status_code == 413, (path, headers, r.text)
            # the decompressed body's 413 names the setting (the sent body's: app/api/http.py)
            assert (
                check(r.json()) and ("SVMSTREAM_MAX_BODY_BYTES=" if headers else "MAX_BODY_BYTES=") in r.text
            )
    state = httpx.get(server.url + "/models/m", headers=AUTH).json()
    assert state["version"] == 2  # learn + flush only
