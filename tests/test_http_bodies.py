"""Every body bounded by its route, strict types, path integers, HEAD, challengers held to the
champion's rules (issue 42), large authenticated reads and binary tensors (issue 40 item 5):
real ``svmstream serve`` processes, real clients (``urllib``, ``requests``, ``httpx``,
``tritonclient``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import httpx
import numpy as np
import orjson
import pytest

from benchmarks.abuse_bodies import write_route_bodies
from tests.conftest import learn_all, two_moons_like

TOKEN = "t0ken-for-body-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOOD = {"budget": 40, "gamma": 1.0, "C": 10.0, "shuffle_buffer": 0, "classes": [-1, 1]}


def _env(**extra: str) -> dict[str, str]:
    return {"SVMSTREAM_API_TOKEN": TOKEN, "SVMSTREAM_WARM_UP": "false", **extra}


def _refused(answer: httpx.Response, status: int, field: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["field"] == field, answer.json()
    assert answer.json()["detail"].startswith(field), answer.json()


def test_strict_types_path_integers_and_head(start_server):
    server = start_server(env=_env())
    with server.client() as c:
        c.headers.update(AUTH)
        assert (
            c.put("/models/m", json={**GOOD, "challengers": [{"gamma": 2.0}, {"gamma": 4.0}]}).status_code
            == 201
        )
        X, y = two_moons_like(400, d=6, seed=1)
        learn_all(c, "m", X, y)
        assert c.post("/models/m/snapshot").status_code == 200
        before = c.get("/models/m").json()
        for bad in ("0", True, 0.0, 1.0, "1", None, [0]):
            _refused(c.post("/models/m/promote", json={"challenger": bad}), 422, "challenger")
        for bad in (2.0, "2", True, 1.5):
            _refused(c.post("/models/m/rollback", json={"version": bad}), 422, "version")
        for bad in ("1.0", "+1", "01", "-1", "1e0", "9" * 7, "9" * 5000):
            _refused(c.delete(f"/models/m/challengers/{bad}"), 422, "index")
        after = c.get("/models/m").json()
        assert after["challengers"] == before["challengers"] and after["version"] == before["version"]
        assert after["config"] == before["config"]

        # a version segment of any length: 404, never a 500 (int() refuses > 4,300 digits)
        for segment in ("9" * 5000, "01", "+1", "1.0"):
            for path in (f"/v2/models/m/versions/{segment}", f"/v2/models/m/versions/{segment}/ready"):
                assert c.get(path).status_code == 404, (path[:40], c.get(path).text)
            infer = c.post(f"/v2/models/m/versions/{segment}/infer", json={"inputs": []})
            assert infer.status_code == 404, infer.text

        # HEAD on every GET route: the GET's status and headers, no body
        for path in ("/health", "/models", "/models/m", "/metrics", "/v2/health/ready", "/openapi.json"):
            head, get = c.head(path), c.get(path)
            assert head.status_code == get.status_code == 200, path
            assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"]
        assert c.head("/models/nope").status_code == 404
        assert httpx.head(server.url + "/health").status_code == 200  # tokenless probe, reads open


def test_challengers_are_held_to_the_champions_rules(start_server):
    server = start_server(env=_env())
    with server.client() as c:
        c.headers.update(AUTH)
        cases = [
            ({"budget": 10**6}, "challengers[0].budget"),
            ({"gamma": 1e300}, "challengers[0].gamma"),
            ({"gamma": 5e-324}, "challengers[0].gamma"),
            ({"gamma": "2"}, "challengers[0].gamma"),
            ({"C": True}, "challengers[0].C"),
            ({"budget": 50.0}, "challengers[0].budget"),
            ({"rehearsal": "1"}, "challengers[0].rehearsal"),
            ({"bogus": 1}, "challengers[0].bogus"),
            ({"challengers": []}, "challengers[0].challengers"),
        ]
        for spec, field in cases:
            _refused(c.put("/models/c", json={"challengers": [{"gamma": 2.0}, spec]}), 422,
                     field.replace("[0]", "[1]"))  # fmt: skip
        _refused(c.put("/models/c", json={"challengers": [{"gamma": 2.0}] * 5}), 422, "challengers")
        for gamma in (1e300, 5e-324):  # the range binds the champion too
            _refused(c.put("/models/c", json={"gamma": gamma}), 422, "gamma")
        assert c.get("/models/c").status_code == 404  # nothing was created
        assert c.put("/models/c", json={"gamma": 1e-15, "challengers": [{"gamma": 1e15}]}).status_code == 201

        schema = c.get("/openapi.json").json()
        body = schema["paths"]["/models/{name}"]["put"]["requestBody"]["content"]["application/json"][
            "schema"
        ]
        (array,) = [b for b in body["properties"]["challengers"]["anyOf"] if b.get("type") == "array"]
        assert array["maxItems"] == 4
        assert array["items"]["properties"]["gamma"]["anyOf"][0]["maximum"] == 1e15
        (budget,) = [b for b in body["properties"]["budget"]["anyOf"] if b.get("type") == "integer"]
        assert budget["maximum"] == 100_000
        # reads answer without the token (PROTECT_READS off): the token is optional there
        for path, method in (("/v2", "get"), ("/v2/models/{name}/infer", "post"), ("/invocations", "post")):
            assert {} in schema["paths"][path][method]["security"], path
        assert {} not in schema["paths"]["/learn"]["post"]["security"]


def test_write_route_bodies_are_refused_by_their_limits_and_read_by_the_client(start_server):
    """Four 58 MB bodies at once, with the token, on PUT, /promote, /rollback and /feedback:
    each a 413 the client reads, RSS flat (the bench records /health's latency)."""
    server = start_server(env=_env())
    with server.client() as c:
        c.headers.update(AUTH)
        assert c.put("/models/probe", json={}).status_code == 201
        result = write_route_bodies(server.url, server.proc.pid, TOKEN, mb=58, seconds=2.0)
        assert result["statuses"] == [[413]] * 4, result
        assert result["rss_peak_growth_mb"] < 100, result
        assert result["health_failures"] == 0, result
        big = c.post("/models/probe/promote", content=b'{"challenger": 0' + b" " * 5000 + b"}",
                     headers={"Content-Type": "application/json"})  # fmt: skip
        assert big.status_code == 413 and "POST /models/{name}/promote" in big.json()["detail"], big.text
        ids = [f"{k:032x}" for k in range(100_000)]
        fine = c.post("/feedback", json={"model": "probe", "ids": ids, "y": [1] * len(ids)})
        assert fine.status_code == 200 and fine.json()["expired"] == 100_000, fine.text[:300]


def _pixels(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-like rows: 784 integer pixel values 0..255, mostly zero, two classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = np.zeros((n, 784), dtype=np.int64)
    for label, cols in ((0, slice(100, 300)), (1, slice(400, 600))):
        rows = np.flatnonzero(y == label)
        X[rows, cols] = rng.integers(0, 256, (rows.size, 200))
    return X, y


@pytest.fixture
def pixel_server(start_server):
    server = start_server(env=_env())
    with server.client() as c:
        c.headers.update(AUTH)
        assert (
            c.put("/models/digits", json={"budget": 50, "warmup": 200, "shuffle_buffer": 0}).status_code
            == 201
        )
        X, y = _pixels(600)
        r = c.post("/learn", json={"model": "digits", "X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200, r.text
        assert c.post("/models/digits/flush").status_code == 200
    return server


def test_a_large_prediction_with_the_token_is_served_and_without_it_a_readable_413(pixel_server):
    server = pixel_server
    X, _ = _pixels(5000, seed=1)
    body = orjson.dumps({"model": "digits", "X": X}, option=orjson.OPT_SERIALIZE_NUMPY)
    assert len(body) > 2 * 2**20  # over the tokenless read limit
    with server.client() as c:
        r = c.post("/predict", content=body, headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code == 200, r.text[:300]
        labels = r.json()["labels"]
        assert len(labels) == 5000
    # without the token: a 413 every ordinary client reads (the body is drained first)
    request = urllib.request.Request(
        server.url + "/predict", data=body, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=120)
    assert refused.value.code == 413
    assert "SVMSTREAM_MAX_PREDICT_BODY_BYTES" in json.loads(refused.value.read())["detail"]
    requests = pytest.importorskip("requests")
    answer = requests.post(
        server.url + "/predict", data=body, headers={"Content-Type": "application/json"}, timeout=120
    )
    assert answer.status_code == 413, answer.text
    with httpx.Client(timeout=120) as plain:
        answer = plain.post(
            server.url + "/predict", content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 413, answer.text
        chunked = plain.post(server.url + "/predict", content=iter([body[i : i + 2**20] for i in range(0, len(body), 2**20)]),
                             headers={"Content-Type": "application/json"})  # fmt: skip
        assert chunked.status_code == 413, chunked.text

    # the same batch through tritonclient, binary tensors, with the token
    triton = pytest.importorskip("tritonclient.http")
    client = triton.InferenceServerClient(server.url.removeprefix("http://"), network_timeout=120.0)
    tensor = triton.InferInput("input", list(X.shape), "FP32")
    tensor.set_data_from_numpy(X.astype(np.float32), binary_data=True)
    out = client.infer(
        "digits",
        [tensor],
        outputs=[triton.InferRequestedOutput("label", binary_data=True)],
        headers=dict(AUTH),
    )  # fmt: skip  (tritonclient adds to the dict)
    assert out.as_numpy("label").tolist() == labels


def test_learn_takes_binary_tensors(pixel_server):
    server = pixel_server
    X, y = _pixels(1000, seed=2)
    features = X.astype("<f4").tobytes()
    labels = y.astype("<i8").tobytes()
    header = orjson.dumps({
        "model": "digits",
        "inputs": [
            {"name": "X", "datatype": "FP32", "shape": [1000, 784], "parameters": {"binary_data_size": len(features)}},
            {"name": "y", "datatype": "INT64", "shape": [1000], "parameters": {"binary_data_size": len(labels)}},
        ],
    })  # fmt: skip
    headers = {
        **AUTH,
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(header)),
    }
    with server.client() as c:
        seen = c.get("/models/digits", headers=AUTH).json()["n_seen"]
        r = c.post("/learn", content=header + features + labels, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["n_examples"] == 1000 and r.json()["n_seen"] == seen + 1000
        bad = c.post("/learn", content=header + features + labels[:-8], headers=headers)
        _refused(bad, 422, "inputs[1].parameters.binary_data_size")
        assert c.get("/models/digits", headers=AUTH).json()["n_seen"] == seen + 1000
        strings = b"".join(len(s).to_bytes(4, "little") + s for s in (b"a", b"b"))
        head = orjson.dumps({"model": "digits", "inputs": [
            {"name": "X", "datatype": "FP64", "shape": [2, 784], "data": [0.0] * 1568},
            {"name": "y", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": len(strings)}},
        ]})  # fmt: skip
        wrong = c.post("/learn", content=head + strings,
                       headers={**headers, "Inference-Header-Content-Length": str(len(head))})  # fmt: skip
        assert wrong.status_code == 422 and wrong.json()["field"] == "y[0]", wrong.text


def test_a_constant_challenger_is_never_promoted_on_evidence(start_server):
    """A challenger with gamma = 1e15 predicts the majority class on an imbalanced stream (its
    kernel is 0 between distinct points), which beats a bad champion on the paired test; the
    promotion guard keeps it out, and a good challenger beside it is promoted."""
    server = start_server(env=_env())
    X, y = two_moons_like(6000, d=6, seed=3)
    keep = (y > 0) | (np.arange(y.size) % 9 == 0)  # ~90 % one class
    X, y = X[keep][:3000], y[keep][:3000]
    with server.client() as c:
        c.headers.update(AUTH)
        body = {**GOOD, "gamma": 1000.0, "challengers": [{"gamma": 1e15}]}
        assert c.put("/models/k", json=body).status_code == 201
        learn_all(c, "k", X, y)
        info = c.get("/models/k").json()
        assert info["promotion"]["promotions"] == 0, info["promotion"]
        (constant,) = [e for e in info["challengers"] if e["origin"] == "user"]
        assert constant["e_value"] >= constant["threshold"], constant  # the test alone would promote it
        assert info["config"]["gamma"] == 1000.0
