"""The HTTP API in-process (FastAPI TestClient, lifespan included, real solver)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # starlette 1.x: "use httpx2" notice, irrelevant here
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.settings import Settings
from tests.conftest import two_moons_like

MAX_BODY = 50_000
X0, Y0 = two_moons_like(300, d=4, seed=11)
PROBE = two_moons_like(40, d=4, seed=12)[0].tolist()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("snap"),
        snapshot_interval_s=3600,
        max_body_bytes=MAX_BODY,
        default_budget=30,
        default_gamma=1.0,
        default_c=10.0,
        default_n_samples=300,
        default_classes=[-1, 1],  # declared: unknown labels are refused
        # the numerics these tests pin: raw features, no warm-up window, buffer or run guard
        default_scaling="none",
        default_warmup=0,
        default_shuffle_buffer=0,
        default_run_guard=False,
    )
    with TestClient(create_app(settings)) as c:
        r = c.post("/learn", json={"X": X0.tolist(), "y": Y0.tolist()})
        assert r.status_code == 200, r.text
        yield c


def _state(c: TestClient, model: str = "default"):
    info = c.get(f"/models/{model}").json()
    pred = c.post("/predict", json={"model": model, "X": PROBE}).json()
    return info, pred


def _dense_body(rows: str, labels: str) -> bytes:
    return f'{{"X": {rows}, "y": {labels}}}'.encode()


BAD_LEARN = {
    # name: (body bytes, status, detail prefix, field, index)
    "nan": (
        _dense_body("[[0.1, 0.2, 0.3, 0.4], [0.1, NaN, 0.3, 0.4]]", "[1, -1]"),
        422,
        "X[1][1]: nan is not a finite number",
        "X[1][1]",
        1,
    ),
    "inf": (
        _dense_body("[[0.1, 0.2, 1e999, 0.4]]", "[1]"),
        422,
        "X[0][2]: inf is not a finite number",
        "X[0][2]",
        0,
    ),
    "minus_infinity": (
        _dense_body("[[0, 0, 0, 0], [0, 0, 0, 0], [-Infinity, 0, 0, 0]]", "[1, 1, 1]"),
        422,
        "X[2][0]: -inf is not a finite number",
        "X[2][0]",
        2,
    ),
    "nan_sparse": (
        _dense_body('[{"0": 1.0}, {"3": NaN}]', "[1, 1]"),
        422,
        "X[1][3]: nan is not a finite number",
        "X[1][3]",
        1,
    ),
    "wrong_dimension_dense": (
        _dense_body("[[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]", "[1, 1]"),
        422,
        "X[0]: has 5 features, model 'default' expects 4",
        "X[0]",
        0,
    ),
    "wrong_dimension_sparse": (
        _dense_body('[{"0": 1.0}, {"1": 1, "4": 1}]', "[1, -1]"),
        422,
        "X[1]: feature index 4 is out of range: model 'default' expects 4 features",
        "X[1]",
        1,
    ),
    "ragged_rows": (
        _dense_body("[[0, 0, 0, 0], [0, 0, 0]]", "[1, 1]"),
        422,
        "X[1]: has 3 features but X[0] has 4",
        "X[1]",
        1,
    ),
    "declared_dimension": (
        b'{"X": [[0, 0, 0, 0, 0, 0]], "y": [1], "n_features": 6}',
        422,
        "n_features: the request declares 6 features, model 'default' has 4",
        "n_features",
        None,
    ),
    "third_label": (
        _dense_body("[[0, 0, 0, 0], [1, 1, 1, 1]]", "[1, 2]"),
        422,
        "y[1]: unknown label 2; model classes are [-1, 1]",
        "y[1]",
        1,
    ),
    "string_label_in_numeric_model": (
        _dense_body("[[0, 0, 0, 0]]", '["yes"]'),
        422,
        "y[0]: unknown label 'yes'; model classes are [-1, 1]",
        "y[0]",
        0,
    ),
    "empty_batch": (_dense_body("[]", "[]"), 422, "X: empty batch", "X", None),
    "label_count": (
        _dense_body("[[0, 0, 0, 0], [0, 0, 0, 0]]", "[1]"),
        422,
        "y: has 1 labels for 2 examples",
        "y",
        None,
    ),
    "not_a_number": (
        _dense_body('[[0, 0, "x", 0]]', "[1]"),
        422,
        "X[0][2]: expected a number, got 'x'",
        "X[0][2]",
        0,
    ),
    "boolean_feature": (
        _dense_body("[[0, 0, 0, 0], [0, true, 0, 0]]", "[1, 1]"),
        422,
        "X[1][1]: expected a number, got true",
        "X[1][1]",
        1,
    ),
    "bad_sparse_key": (
        _dense_body('[{"a": 1}]', "[1]"),
        422,
        "X[0]: model 'default' learns positional rows of 4 features; it cannot take named fields",
        "X[0]",
        0,
    ),
    "missing_labels": (b'{"X": [[0, 0, 0, 0]]}', 422, "y: field required", "y", None),
    "unknown_field": (
        b'{"X": [[0, 0, 0, 0]], "y": [1], "label": 1}',
        422,
        "body: unknown field 'label'",
        "label",
        None,
    ),
    "invalid_json": (b'{"X": [[0, 0, 0, 0]], "y": [1]', 400, "body: invalid JSON", "body", None),
    "not_an_object": (b"[1, 2]", 422, "body: expected a JSON object", "body", None),
    "unknown_model": (
        b'{"model": "nope", "X": [[0, 0, 0, 0]], "y": [1]}',
        404,
        "model 'nope' not found",
        None,
        None,
    ),
    "too_large": (
        _dense_body(json.dumps([[0.5, 0.5, 0.5, 0.5]] * 3000), json.dumps([1] * 3000)),
        413,
        f"body: request body exceeds SVMSTREAM_MAX_BODY_BYTES={MAX_BODY}",
        "body",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LEARN))
def test_bad_learn_input_is_rejected_and_changes_nothing(client, case):
    body, status, detail, field, index = BAD_LEARN[case]
    before = _state(client)
    r = client.post("/learn", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    got = r.json()
    assert got["detail"].startswith(detail), got
    assert (got["field"], got["index"]) == (field, index)
    assert _state(client) == before  # stats, version and predictions unchanged


def test_too_large_chunked_body_is_rejected_and_changes_nothing(client):
    body = BAD_LEARN["too_large"][0]
    before = _state(client)

    def chunks():  # a generator body is sent without Content-Length
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    r = client.post("/learn", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "more than" in r.json()["detail"]
    assert _state(client) == before


@pytest.mark.parametrize(
    "body, status, detail",
    [
        (b'{"X": [[0, NaN, 0, 0]]}', 422, "X[0][1]: nan is not a finite number"),
        (b'{"X": [[0, 0, 0]]}', 422, "X[0]: has 3 features, model 'default' expects 4"),
        (b'{"X": []}', 422, "X: empty batch"),
        (b'{"X": [[0, 0, 0, 0]], "y": [1]}', 422, "body: unknown field 'y'"),
        (b'{"model": "nope", "X": [[0, 0, 0, 0]]}', 404, "model 'nope' not found"),
    ],
)
def test_bad_predict_input(client, body, status, detail):
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status and r.json()["detail"].startswith(detail), r.text


@pytest.mark.parametrize(
    "name, body, detail",
    [
        ("m1", {"budget": 0}, "budget: Input should be greater than or equal to 2"),
        ("m1", {"classes": [1]}, "classes: Value error, give at least 2 classes"),
        (
            "m1",
            {"classes": [1, 2, 3], "max_classes": 2},
            "classes: Value error, 3 labels exceed max_classes = 2",
        ),
        ("m1", {"gamma": -1}, "gamma: Input should be greater than or equal to 0.000000000000001"),
        ("m1", {"algorithm": "svc"}, "algorithm: Input should be 'bsgd'"),
        ("m1", {"budgets": 5}, "budgets: Extra inputs are not permitted"),
        ("bad name!", {}, "name: invalid model name 'bad name!'"),
    ],
)
def test_bad_model_creation(client, name, body, detail):
    r = client.put(f"/models/{name}", json=body)
    assert r.status_code == 422 and r.json()["detail"].startswith(detail), r.text
    assert client.get(f"/models/{name}").status_code == 404


def test_model_lifecycle_and_string_labels(client):
    r = client.put(
        "/models/words", json={"classes": ["spam", "ham"], "budget": 20, "lambda": 0.001, "n_features": 4}
    )
    assert r.status_code == 201
    info = r.json()
    assert info["config"]["classes"] == ["ham", "spam"] and info["n_features"] == 4 and not info["fitted"]
    r = client.post("/predict", json={"model": "words", "X": PROBE})
    assert r.status_code == 409 and "has not learned" in r.json()["detail"]
    labels = np.where(Y0 > 0, "spam", "ham").tolist()
    r = client.post("/learn", json={"model": "words", "X": X0.tolist(), "y": labels})
    assert r.status_code == 200 and r.json()["n_seen"] == 300
    pred = client.post("/predict", json={"model": "words", "X": X0.tolist()}).json()
    assert set(pred["labels"]) <= {"ham", "spam"}
    assert np.mean(np.asarray(pred["labels"]) == np.asarray(labels)) > 0.8
    # labels follow the decision values: classes[1] ('spam') where decision > 0
    assert [lab == "spam" for lab in pred["labels"]] == [d > 0 for d in pred["decision"]]
    names = [m["name"] for m in client.get("/models").json()["models"]]
    assert "words" in names and "default" in names
    # replacing gives a fresh model (200), deleting removes it (and its snapshots)
    r = client.put("/models/words", json={"classes": ["spam", "ham"], "budget": 5})
    assert r.status_code == 200 and r.json()["n_seen"] == 0 and r.json()["config"]["budget"] == 5
    assert client.delete("/models/words").json() == {"deleted": "words"}
    assert client.get("/models/words").status_code == 404
    assert client.delete("/models/words").status_code == 404


def test_dense_and_sparse_requests_learn_the_same_model(client):
    cfg = {"budget": 25, "gamma": 0.7, "C": 5.0, "n_samples": 300, "random_state": 3}
    for name in ("dense", "sparse"):
        assert client.put(f"/models/{name}", json={**cfg, "n_features": 4}).status_code == 201
    Xs = X0.copy()
    Xs[np.abs(Xs) < 0.5] = 0.0  # real zeros, omitted from the sparse rows
    sparse_rows = [{str(j): v for j, v in enumerate(row) if v != 0} for row in Xs.tolist()]
    for start in range(0, 300, 100):
        ys = [float(v) for v in Y0[start : start + 100]]  # 1.0 == 1
        assert (
            client.post(
                "/learn", json={"model": "dense", "X": Xs[start : start + 100].tolist(), "y": ys}
            ).status_code
            == 200
        )
        assert (
            client.post(
                "/learn", json={"model": "sparse", "X": sparse_rows[start : start + 100], "y": ys}
            ).status_code
            == 200
        )
    a = client.post("/predict", json={"model": "dense", "X": PROBE}).json()
    b = client.post(
        "/predict", json={"model": "sparse", "X": [{str(j): v for j, v in enumerate(r)} for r in PROBE]}
    ).json()
    np.testing.assert_allclose(a["decision"], b["decision"], rtol=1e-10, atol=1e-12)
    assert (
        client.get("/models/dense").json()["n_seen"] == client.get("/models/sparse").json()["n_seen"] == 300
    )


def test_health_and_openapi(client):
    h = client.get("/health").json()
    assert h["status"] == "ok" and "default" in h["models"] and h["rss_bytes"] > 0
    spec = client.get("/openapi.json").json()
    assert {"/learn", "/predict", "/models", "/models/{name}", "/health"} <= set(spec["paths"])
