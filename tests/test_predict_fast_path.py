"""The pure-ASGI fast path of ``POST /predict`` (``app/api/fast_predict.py``).

Through a real ``svmstream serve`` process: every request is sent twice, once with a
``Content-Length`` (what the fast path takes) and once chunked (never taken: the FastAPI
route answers), and both answers must be the same bytes with the same status and headers --
answers, ``proba``, sparse rows, and every refusal (bad JSON, a wrong width, an unknown or
unfitted model, a missing or wrong token, a non-JSON type, a body over ``MAX_BODY_BYTES``).
The request counter and latency histogram count fast answers like the route's.

In-process (FastAPI TestClient, lifespan included), a spy on the route shows which requests
the fast path answered itself and which it handed over.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest

with warnings.catch_warnings():  # starlette 1.x: "use httpx2" notice, irrelevant here
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.api import fast_predict
from svmstream.app.api.routes import predict as predict_route
from svmstream.app.main import create_app
from svmstream.app.settings import Settings
from tests.conftest import two_moons_like

TOKEN = "s3cret-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
JSON = {"content-type": "application/json"}
X, Y = two_moons_like(400, d=4, seed=5)
X = X.round(5)  # short bodies: MAX_BODY_BYTES is 3000 in the real-server test


def _both(c: httpx.Client, body: bytes, headers: dict) -> tuple[httpx.Response, httpx.Response]:
    """The answer to ``body`` sent with a Content-Length and sent chunked (the route)."""
    plain = c.post("/predict", content=body, headers=headers)
    chunked = c.post("/predict", content=iter([body[:7], body[7:]]), headers=headers)
    assert "content-length" in plain.request.headers
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    return plain, chunked


def _same(plain: httpx.Response, chunked: httpx.Response) -> None:
    assert plain.status_code == chunked.status_code, (plain.text, chunked.text)
    assert plain.content == chunked.content
    drop = {"date"}
    assert [(k, v) for k, v in plain.headers.items() if k not in drop] == [
        (k, v) for k, v in chunked.headers.items() if k not in drop
    ]


def _metric(text: str, pattern: str) -> float:
    found = re.findall(rf"^{pattern} (\S+)$", text, flags=re.M)
    return float(found[0]) if found else 0.0


def test_the_fast_path_answers_exactly_as_the_route(start_server):
    server = start_server(
        env={
            "SVMSTREAM_API_TOKEN": TOKEN,  # reads stay open: /health must answer (see below for them closed)
            "SVMSTREAM_MAX_BODY_BYTES": "3000",
            "SVMSTREAM_CREATE_DEFAULT_MODEL": "0",
        }
    )
    with server.client() as c:
        cfg = {"budget": 40, "gamma": 1.0, "C": 10.0, "n_samples": 400, "warmup": 0, "random_state": 0}
        assert c.put("/models/m", json=cfg, headers=AUTH).status_code in (200, 201)
        assert c.put("/models/empty", json=cfg, headers=AUTH).status_code in (200, 201)
        for start in range(0, 400, 25):
            body = {"model": "m", "X": X[start : start + 25].tolist(), "y": Y[start : start + 25].tolist()}
            assert c.post("/learn", json=body, headers=AUTH).status_code == 200
        if sys.platform.startswith("linux"):  # the learner threads run 10 nice steps below the loop
            base = os.getpriority(os.PRIO_PROCESS, 0)  # the server inherits the suite's nice value
            nices = {}
            for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                nices[int(task.name)] = int(fields[16])  # stat field 19: nice
            assert nices[server.proc.pid] == base and min(19, base + 10) in nices.values(), (base, nices)
        row = X[:1].tolist()
        sparse = [{"0": 0.5, "3": -1.0}, {"1": 2.0}]
        cases = {
            # name: (body, headers, status)
            "one row": ({"model": "m", "X": row}, {**JSON, **AUTH}, 200),
            "five rows, x": ({"model": "m", "x": X[:5].tolist()}, {**JSON, **AUTH}, 200),
            "proba": ({"model": "m", "X": X[:3].tolist(), "proba": True}, {**JSON, **AUTH}, 200),
            "sparse": ({"model": "m", "X": sparse, "n_features": 4}, {**JSON, **AUTH}, 200),
            "charset": (
                {"model": "m", "X": row},
                {"content-type": "application/json; charset=utf-8", **AUTH},
                200,
            ),
            "wrong width": ({"model": "m", "X": [[1.0, 2.0]]}, {**JSON, **AUTH}, 422),
            "nan": (b'{"model": "m", "X": [[NaN, 0, 0, 0]]}', {**JSON, **AUTH}, 422),
            "unknown field": ({"model": "m", "X": row, "y": [1]}, {**JSON, **AUTH}, 422),
            "bad json": (b'{"model": "m", "X": [[1, 2', {**JSON, **AUTH}, 400),
            "unknown model": ({"model": "nope", "X": row}, {**JSON, **AUTH}, 404),
            "default model missing": ({"X": row}, {**JSON, **AUTH}, 404),
            "unfitted": ({"model": "empty", "X": row}, {**JSON, **AUTH}, 409),
            "no token needed": ({"model": "m", "X": row}, JSON, 200),
            "text": ({"model": "m", "X": row}, {"content-type": "text/plain", **AUTH}, 415),
            "too large": ({"model": "m", "X": X[:100].tolist()}, {**JSON, **AUTH}, 413),
        }
        before = c.get("/metrics", headers=AUTH).text
        for name, (body, headers, status) in cases.items():
            raw = body if isinstance(body, bytes) else orjson.dumps(body)
            plain, chunked = _both(c, raw, headers)
            assert plain.status_code == status, (name, plain.text)
            if name == "too large":  # the route's message names what it saw: the length or the bytes
                assert "Content-Length is" in plain.json()["detail"], plain.text
                assert chunked.status_code == 413 and "bytes received" in chunked.json()["detail"]
                continue
            _same(plain, chunked)
            if status == 200:
                answer = plain.json()
                assert answer["model"] == "m" and answer["model_version"] == answer["version"] == 16
                assert len(answer["labels"]) == len(answer["decision"])
        # the answers are the model's: the same decisions as a batch prediction of the rows
        batch = c.post("/predict", json={"model": "m", "X": X[:50].tolist()}, headers=AUTH).json()
        singles = [
            c.post("/predict", json={"model": "m", "X": [r]}, headers=AUTH).json() for r in X[:50].tolist()
        ]
        np.testing.assert_allclose(
            [s["decision"][0] for s in singles], batch["decision"], rtol=1e-12, atol=1e-12
        )
        assert [s["labels"][0] for s in singles] == batch["labels"]
        after = c.get("/metrics", headers=AUTH).text
    ok = 2 * 6 + 1 + 50  # the 200s above, both ways, then the batch and the singles
    counter = 'svmstream_http_requests_total{method="POST",route="/predict",status="200"}'
    assert _metric(after, re.escape(counter)) - _metric(before, re.escape(counter)) == ok
    latency = 'svmstream_request_latency_seconds_count{model="m",route="predict"}'
    assert _metric(after, re.escape(latency)) - _metric(before, re.escape(latency)) == ok
    for status in ("404", "409", "413", "415", "422", "400"):
        refused = f'svmstream_http_requests_total{{method="POST",route="/predict",status="{status}"}}'
        assert _metric(after, re.escape(refused)) - _metric(before, re.escape(refused)) >= 2, status


def test_with_reads_protected_the_token_is_checked_as_the_route_does(tmp_path):
    settings = Settings(
        snapshot_dir=tmp_path / "snap",
        warm_up=False,
        api_token=TOKEN,
        protect_reads=True,
        default_n_samples=400,
        default_warmup=0,
    )
    with TestClient(create_app(settings)) as c:
        body = {"X": X.tolist(), "y": Y.tolist()}
        assert c.post("/learn", json=body, headers=AUTH).status_code == 200
        raw = orjson.dumps({"X": X[:2].tolist()})
        for headers, status in (
            (AUTH, 200),
            ({"authorization": f"bearer   {TOKEN}  "}, 200),  # scheme case and spaces as HTTPBearer
            ({}, 401),
            ({"authorization": "Bearer nope"}, 401),
            ({"authorization": f"Basic {TOKEN}"}, 401),
            ({"authorization": "Bearer"}, 401),
        ):
            plain, chunked = _both(c, raw, {**JSON, **headers})
            assert plain.status_code == status, (headers, plain.text)
            _same(plain, chunked)


@pytest.fixture
def spied(tmp_path, monkeypatch):
    """A TestClient on a fitted model ``m`` and the list of requests the route answered."""
    routed = []
    real = predict_route._predict

    def spy(registry, body, default_model, *rest):
        routed.append(body)
        return real(registry, body, default_model, *rest)

    monkeypatch.setattr(predict_route, "_predict", spy)
    settings = Settings(snapshot_dir=tmp_path / "snap", warm_up=False, create_default_model=False)
    with TestClient(create_app(settings)) as c:
        cfg = {"budget": 40, "gamma": 1.0, "C": 10.0, "n_samples": 400, "warmup": 0}
        assert c.put("/models/m", json=cfg).status_code in (200, 201)
        assert c.post("/learn", json={"model": "m", "X": X.tolist(), "y": Y.tolist()}).status_code == 200
        yield c, routed


def test_ordinary_requests_skip_the_route_and_the_rest_reach_it(spied, monkeypatch):
    c, routed = spied
    one = c.post("/predict", json={"model": "m", "X": X[:1].tolist()})
    assert one.status_code == 200 and routed == []
    # errors are answered by the route (it parses the body again and refuses it itself)
    assert c.post("/predict", json={"model": "m", "X": [[1.0]]}).status_code == 422
    assert len(routed) == 1
    # chunked bodies, bodies over FAST_BODY_BYTES and batches over INLINE_WORK take the route
    assert c.post("/predict", content=iter([orjson.dumps({"model": "m", "X": X[:1].tolist()})]), headers=JSON)
    assert len(routed) == 2
    rows = int(fast_predict.INLINE_WORK // (40 * 4)) + 1
    big = {"model": "m", "X": np.resize(X, (rows, 4)).round(3).tolist()}
    assert len(orjson.dumps(big)) > fast_predict.FAST_BODY_BYTES or rows * 40 * 4 > fast_predict.INLINE_WORK
    assert c.post("/predict", json=big).status_code == 200
    assert len(routed) == 3
    # a small batch whose work exceeds INLINE_WORK also goes to the route
    monkeypatch.setattr(fast_predict, "INLINE_WORK", 3)  # one row: at least 1 SV x 4 features
    assert c.post("/predict", json={"model": "m", "X": X[:1].tolist()}).status_code == 200
    assert len(routed) == 4


def test_a_lazily_restored_model_and_a_pinned_version_take_the_route(tmp_path, monkeypatch):
    """Neither decodes a file on the event loop: a model restored from its header decodes its
    snapshot on its first prediction, a pinned version may be decoded from its file."""
    routed = []
    real = predict_route._predict
    monkeypatch.setattr(predict_route, "_predict", lambda r, b, *rest: routed.append(b) or real(r, b, *rest))
    settings = Settings(snapshot_dir=tmp_path / "snap", warm_up=False, create_default_model=False)
    with TestClient(create_app(settings)) as c:
        cfg = {"budget": 40, "gamma": 1.0, "C": 10.0, "n_samples": 400, "warmup": 0}
        assert c.put("/models/m", json=cfg).status_code in (200, 201)
        assert c.post("/learn", json={"model": "m", "X": X.tolist(), "y": Y.tolist()}).status_code == 200
        version = c.post("/models/m/snapshot").json()["version"]
        before = c.post("/predict", json={"model": "m", "X": X[:3].tolist()}).json()
    routed.clear()
    with TestClient(create_app(settings)) as c:
        assert not c.app.state.registry.get("m").loaded  # restored from the header alone
        first = c.post("/predict", json={"model": "m", "X": X[:3].tolist()})
        assert first.status_code == 200 and len(routed) == 1
        assert first.json()["decision"] == before["decision"]
        assert c.post("/predict", json={"model": "m", "X": X[:3].tolist()}).status_code == 200
        assert len(routed) == 1  # decoded now: the fast path answers
        pinned = c.post("/predict", json={"model": "m", "X": X[:3].tolist(), "version": version})
        assert pinned.status_code == 200 and len(routed) == 2
