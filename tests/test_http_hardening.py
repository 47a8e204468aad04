"""HTTP hardening through a real server: 415 for non-JSON bodies, 422 for
over-deep JSON (never a 500), 429 with Retry-After, 405 with Allow, OPTIONS, the framework's
errors in the service's body, and an OpenAPI document that says what the service answers.

Every refusal is checked to change nothing (the model's version and n_seen stay put) and to
leave no traceback in the server's log.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from svmstream.app.errors import InvalidInput
from svmstream.app.ingest.decode import MAX_JSON_DEPTH, check_depth, decode_json, json_depth

RAW = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}


def _state(c: httpx.Client, name: str) -> tuple[int, int]:
    info = c.get(f"/models/{name}").json()
    return info["version"], info["n_seen"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One real uvicorn server for the module (default settings: no token), with a model
    'iris' that learned raw features with string labels."""
    from tests.conftest import ServerProcess

    tmp = tmp_path_factory.mktemp("hardening")
    env = {"SVMSTREAM_WARM_UP": "false", "SVMSTREAM_JOBS_DIR": str(tmp / "jobs")}  # uploads stay in tmp
    srv = ServerProcess(tmp / "snap", tmp / "server.log", use_uvicorn=True, env=env)
    srv.wait_ready()
    from sklearn.datasets import load_iris

    data = load_iris()
    X, y = data.data, np.asarray(data.target_names)[data.target]  # raw cm, string labels
    with srv.client() as c:
        assert c.put("/models/iris", json={**RAW, "budget": 30}).status_code == 201
        r = c.post("/learn", json={"model": "iris", "X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200, r.text
    yield srv
    srv.terminate()


def _no_traceback(server) -> None:
    log = server.log_text()
    assert "Traceback" not in log and "RecursionError" not in log, log[-4000:]


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("text/plain", '{"model": "iris", "X": [[1, 2, 3, 4]], "y": ["setosa"]}'),
        ("application/x-www-form-urlencoded", "model=iris&X=1&y=setosa"),
        (
            "multipart/form-data; boundary=xyz",
            '--xyz\r\nContent-Disposition: form-data; name="X"\r\n\r\n1\r\n--xyz--\r\n',
        ),
        (None, '{"model": "iris", "X": [[1, 2, 3, 4]], "y": ["setosa"]}'),  # a typeless body
    ],
)
def test_json_routes_refuse_other_content_types_with_415_and_change_nothing(server, content_type, body):
    with server.client() as c:
        before = _state(c, "iris")
        headers = {"content-type": content_type} if content_type else {}
        req = c.build_request("POST", "/learn", content=body.encode(), headers=headers)
        assert ("content-type" in req.headers) == (content_type is not None)  # httpx adds none for bytes
        r = c.send(req)
        assert r.status_code == 415, r.text
        assert r.json()["field"] == "content-type" and r.json()["detail"].startswith("content-type: ")
        assert r.json()["index"] is None
        for path, method in (("/predict", "POST"), ("/models/iris2", "PUT"), ("/jobs", "POST")):
            r = c.request(method, path, content=body.encode(), headers=headers)
            assert r.status_code == 415, (path, r.text)
        assert _state(c, "iris") == before
        assert c.get("/models/iris2").status_code == 404  # the refused PUT created nothing
        # JSON with a charset parameter, or an application/*+json type, is JSON
        ok = c.post(
            "/predict",
            content=b'{"model": "iris", "X": [[5.1, 3.5, 1.4, 0.2]]}',
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert ok.status_code == 200 and ok.json()["labels"] == ["setosa"]
        ok = c.post(
            "/predict",
            content=b'{"model": "iris", "X": [[5.1, 3.5, 1.4, 0.2]]}',
            headers={"content-type": "application/vnd.api+json"},
        )
        assert ok.status_code == 200
    _no_traceback(server)


def test_an_empty_put_body_needs_no_content_type(server):
    with server.client() as c:
        r = c.put("/models/empty-body")  # all defaults
        assert r.status_code == 201, r.text
        assert c.delete("/models/empty-body").json() == {"deleted": "empty-body"}


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000, 200_000])
def test_over_deep_json_is_a_422_naming_the_problem_never_a_500(server, depth):
    with server.client() as c:
        before = _state(c, "iris")
        for path, body in (
            ("/learn", b"[" * depth + b"]" * depth),
            ("/predict", b'{"model": "iris", "X": ' + b"[" * depth + b"]" * depth + b"}"),
            # NaN makes orjson refuse the body: the standard library parser (which recurses) would run
            ("/learn", b'{"X": [[NaN]], "y": ' + b"[" * depth + b"]" * depth + b"}"),
            ("/jobs", b'{"params": ' + b"{" * 0 + b"[" * depth + b"]" * depth + b"}"),
        ):
            r = c.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422, (path, r.status_code, r.text[:300])
            err = r.json()
            assert err["field"] == "body"
            assert err["detail"].startswith(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        assert _state(c, "iris") == before
        assert c.get("/health").status_code == 200  # the connection and the server are fine
    _no_traceback(server)


def test_depth_bound_leaves_brackets_inside_strings_alone(server):
    deep_string = "[" * 10_000  # a label that looks deep but is a string
    with server.client() as c:
        r = c.post("/predict", json={"model": "iris", "X": [[5.1, 3.5, 1.4, 0.2]], "proba": False})
        assert r.status_code == 200
        r = c.post("/predict", json={"model": deep_string, "X": [[5.1, 3.5, 1.4, 0.2]]})
        assert r.status_code == 404, r.text  # an unknown model, not "too deep"
        body = b'{"model": "\\"' + deep_string.encode() + b'", "X": [[1, 2, 3, 4]]}'
        r = c.post("/predict", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 404, r.text  # an escaped quote does not end the string


# strings with brackets inside, with and without escapes (the scan has a path for each)
ESCAPED = (['"a\\\\"', '"\\"[["', '"]]}"', "1.5", '"\\\\\\"{"', "null"], '"k{i}[\\"{{"')
PLAIN = (['"a"', '"[["', '"]]}"', "1.5", '""', '"{"', "null"], '"k{i}["')


@pytest.mark.parametrize("pieces, key", [ESCAPED, PLAIN], ids=["escaped", "plain"])
def test_json_depth_matches_the_parsed_depth(pieces, key):
    """The bracket scan against the depth of what json.loads builds."""
    rng = np.random.default_rng(0)

    def build(level: int, target: int) -> str:
        if level == target:
            return pieces[rng.integers(len(pieces))]
        kids = [pieces[rng.integers(len(pieces))] for _ in range(rng.integers(0, 3))]
        kids.insert(int(rng.integers(0, len(kids) + 1)), build(level + 1, target))
        if rng.random() < 0.5:
            return "[" + ",".join(kids) + "]"
        return "{" + ",".join(f"{key.format(i=i)}: {k}" for i, k in enumerate(kids)) + "}"

    def depth(o) -> int:
        if isinstance(o, list):
            return 1 + max((depth(v) for v in o), default=0)
        if isinstance(o, dict):
            return 1 + max((depth(v) for v in o.values()), default=0)
        return 0

    for target in range(MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH + 40, 3):
        text = build(0, target)
        want = depth(json.loads(text))
        assert json_depth(text.encode()) == want == target
        assert json_depth(text) == want
        if want > MAX_JSON_DEPTH:
            with pytest.raises(InvalidInput, match="nested deeper"):
                check_depth(text.encode(), "body")
    # the decoder of stream entries' x and of every body applies it (str or bytes), with a 422
    deep = "[" * 100 + "1" + "]" * 100
    with pytest.raises(InvalidInput, match=r"^x: JSON nested deeper than 64 levels \(100 found\)") as info:
        decode_json(deep, "x")
    assert info.value.status == 422 and info.value.field == "x"
    assert decode_json("[" * 64 + "1" + "]" * 64, "x") is not None  # 64 levels are fine


def test_429_carries_retry_after(tmp_path):
    """32 concurrent /learn calls on a model with one queue slot: some get 429, each with
    Retry-After; the ones accepted are all applied."""
    from tests.conftest import ServerProcess

    srv = ServerProcess(
        tmp_path / "snap",
        tmp_path / "server.log",
        use_uvicorn=True,
        env={"SVMSTREAM_WARM_UP": "false", "SVMSTREAM_MAX_PENDING_BATCHES": "1"},
    ).wait_ready()
    try:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(4000, 20)) * 100  # raw, unscaled
        y = np.where(X[:, 0] + X[:, 1] ** 2 / 100 > 50, "spam", "ham")
        body = json.dumps({"model": "busy", "X": X.tolist(), "y": y.tolist()}).encode()
        with srv.client() as c:
            assert (
                c.put("/models/busy", json={"budget": 200, "warmup": 0, "shuffle_buffer": 0}).status_code
                == 201
            )

            def post(_):
                return c.post("/learn", content=body, headers={"content-type": "application/json"})

            busy = []
            accepted = 0
            for _ in range(5):  # the race is real: retry the burst until the queue overflows
                with ThreadPoolExecutor(32) as pool:
                    answers = list(pool.map(post, range(32)))
                busy += [r for r in answers if r.status_code == 429]
                accepted += sum(r.status_code == 200 for r in answers)
                assert all(r.status_code in (200, 429) for r in answers), [r.text for r in answers]
                if busy:
                    break
            assert busy, "no 429 in 5 bursts of 32"
            for r in busy:
                assert r.headers["retry-after"] == "1", r.headers
                assert r.json()["detail"].startswith("model 'busy' has 1 batches queued")
            assert c.get("/models/busy").json()["n_seen"] == accepted * 4000
        assert "Traceback" not in srv.log_text()
    finally:
        srv.kill()


def test_405_lists_every_method_of_the_path_and_options_answers_204(server):
    with server.client() as c:
        r = c.request("PATCH", "/models/iris")
        assert r.status_code == 405
        assert r.headers["allow"] == "DELETE, GET, HEAD, OPTIONS, PUT"
        assert r.json() == {
            "detail": "method: PATCH is not allowed on '/models/iris'; allowed: DELETE, GET, HEAD, OPTIONS, PUT",
            "field": "method",
            "index": None,
        }
        r = c.get("/learn")
        assert r.status_code == 405 and r.headers["allow"] == "OPTIONS, POST"
        r = c.options("/models/iris")
        assert r.status_code == 204 and r.headers["allow"] == "DELETE, GET, HEAD, OPTIONS, PUT"
        r = c.options("/jobs/abc")
        assert r.status_code == 204 and r.headers["allow"] == "DELETE, GET, HEAD, OPTIONS"
        r = c.options("/no/such/path")
        assert r.status_code == 404
        assert r.json()["field"] == "path"
        assert _state(c, "iris")[0] >= 1
    _no_traceback(server)


def test_parameter_errors_use_the_service_body(server):
    with server.client() as c:
        r = c.put("/models/bad name!", json={})
        assert r.status_code == 422
        assert r.json()["field"] == "name" and r.json()["detail"].startswith("name: invalid model name")
        assert c.get("/models/bad name!").status_code == 404
        r = c.post(
            "/uploads?format=xlsx", content=b"1 1:1\n", headers={"content-type": "application/octet-stream"}
        )
        assert r.status_code == 422 and r.json()["field"] == "format"
        r = c.delete("/uploads/nope")
        assert r.status_code == 422 and r.json()["field"] == "upload"


def test_openapi_declares_what_the_service_answers(server):
    with server.client() as c:
        doc = c.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    mine = {
        ("/learn", "post"): "LearnResponse",
        ("/predict", "post"): "PredictResponse",
        ("/models", "get"): "ModelList",
        ("/models/{name}", "get"): "ModelInfo",
        ("/models/{name}", "put"): "ModelInfo",
        ("/models/{name}", "delete"): "Deleted",
        ("/models/{name}/flush", "post"): "FlushResponse",
        ("/health", "get"): "HealthResponse",
        ("/jobs", "get"): "JobList",
        ("/jobs", "post"): "JobInfo",
        ("/jobs/{job_id}", "get"): "JobInfo",
        ("/uploads", "get"): "UploadList",
        ("/uploads", "post"): "UploadCreated",
        ("/uploads/{upload_id}", "delete"): "Deleted",
    }
    for (path, method), model in mine.items():
        op = doc["paths"][path][method]
        ok = op["responses"][
            "201" if (method == "post" and path in ("/jobs", "/uploads")) or method == "put" else "200"
        ]
        assert ok["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}, (
            path,
            method,
        )
        for status, response in op["responses"].items():
            if status in ("408", "431") or (status == "503" and "content" not in response):
                continue  # the connection bounds' answers: no JSON body (checked below)
            if status.startswith("4") or status.startswith("5"):
                assert response["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorResponse"
                }, (path, method, status)
        # no token configured: the bearer scheme is declared, and optional
        assert op["security"] == [{"HTTPBearer": []}, {}], (path, method)
    for path, method in (
        ("/learn", "post"),
        ("/predict", "post"),
        ("/models/{name}", "put"),
        ("/jobs", "post"),
    ):
        assert {"400", "413", "415", "422"} <= set(doc["paths"][path][method]["responses"]), path
    assert "429" in doc["paths"]["/learn"]["post"]["responses"]
    # the connection bounds answer on every operation before any route runs
    for path, item in doc["paths"].items():
        for method, op in item.items():
            responses = op["responses"]
            assert {"408", "431", "503"} <= set(responses), (path, method)
            assert "SVMSTREAM_HEADER_TIMEOUT_S" in responses["408"]["description"]
            assert "SVMSTREAM_MAX_HEADER_BYTES" in responses["431"]["description"]
            assert "SVMSTREAM_LIMIT_CONCURRENCY" in responses["503"]["description"], (path, method)
            if "requestBody" in op:
                assert "413" in responses, (path, method)
    learn = doc["paths"]["/learn"]["post"]["requestBody"]["content"]["application/json"]["schema"][
        "properties"
    ]
    assert (
        learn["X"]["minItems"] == 1
        and learn["y"]["minItems"] == 1
        and learn["n_features"]["anyOf"][0]["minimum"] == 1
    )
    assert "text/plain" in doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


def test_real_responses_match_the_declared_schemas(server):
    """The bodies of a real session (raw features, string labels, no hyperparameters)
    validate against the response schemas of /openapi.json."""
    jsonschema_rs = pytest.importorskip("jsonschema_rs")  # installed with schemathesis
    with server.client() as c:
        doc = c.get("/openapi.json").json()

        def check(path: str, method: str, r: httpx.Response) -> None:
            schema = doc["paths"][path][method]["responses"][str(r.status_code)]["content"][
                "application/json"
            ]["schema"]
            validator = jsonschema_rs.validator_for({**schema, "components": doc["components"]})
            errors = [e.message for e in validator.iter_errors(r.json())]
            assert not errors, (path, method, r.status_code, errors[:3], r.text[:500])

        check("/models/{name}", "put", c.put("/models/fresh", json={}))
        check("/models/{name}", "get", c.get("/models/fresh"))
        X = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]] * 600
        y = ["setosa", "virginica"] * 600
        check("/learn", "post", c.post("/learn", json={"model": "fresh", "X": X, "y": y}))
        check("/models/{name}/flush", "post", c.post("/models/fresh/flush"))
        check("/predict", "post", c.post("/predict", json={"model": "fresh", "X": X[:3], "proba": True}))
        check("/models/{name}", "get", c.get("/models/fresh"))
        check("/models", "get", c.get("/models"))
        check("/health", "get", c.get("/health"))
        check("/jobs", "get", c.get("/jobs"))
        up = c.post(
            "/uploads?filename=t.libsvm",
            content=b"1 1:0.5 2:1\n-1 1:-0.5\n",
            headers={"content-type": "application/octet-stream"},
        )
        check("/uploads", "post", up)
        check("/uploads", "get", c.get("/uploads"))
        check("/uploads/{upload_id}", "delete", c.delete(f"/uploads/{up.json()['id']}"))
        check(
            "/learn", "post", c.post("/learn", json={"model": "fresh", "X": [[1.0]], "y": ["setosa"]})
        )  # 422
        check("/models/{name}", "delete", c.delete("/models/fresh"))
        check("/models/{name}", "get", c.get("/models/fresh"))  # 404


@pytest.mark.parametrize("protect_reads", [False, True])
def test_openapi_security_follows_the_token_settings(protect_reads):
    """With a token, writes require it; reads require it only with PROTECT_READS (else the
    schema lists the empty requirement too, as the server will not send a 401)."""
    from svmstream.app.main import create_app
    from svmstream.app.settings import Settings

    doc = create_app(Settings(api_token="t", protect_reads=protect_reads, warm_up=False)).openapi()
    bearer = [{"HTTPBearer": []}]
    for path, method in (
        ("/learn", "post"),
        ("/models/{name}", "put"),
        ("/jobs", "post"),
        ("/uploads", "post"),
    ):
        assert doc["paths"][path][method]["security"] == bearer, (path, method)
    for path, method in (("/predict", "post"), ("/models", "get"), ("/health", "get"), ("/metrics", "get")):
        expected = bearer if protect_reads else [*bearer, {}]
        assert doc["paths"][path][method]["security"] == expected, (path, method)
