"""Weights through the real service (issue 39, item 3; docs/weights.md): ``w`` on ``/learn``
is the local estimator's ``sample_weight``, a bad ``w`` is a 422 naming ``w[i]`` that changes
nothing, ``w = 0`` is received and learns nothing, and the account holds throughout."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from sklearn.datasets import make_classification

from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.online.selection import SelectionClassifier
from tests.conftest import assert_examples_account


def _stream(n=1500, seed=3):
    X, y = make_classification(n_samples=n, n_features=5, n_informative=3, weights=[0.8], random_state=seed)
    X = X * np.array([1.0, 300.0, 0.05, 2.0, 1.0])  # raw, unscaled
    w = np.random.default_rng(seed).uniform(0.0, 3.0, n).round(2)
    w[::11] = 0.0
    return X, y, w


def _learn(client, model, X, y, w, batch=250):
    for lo in range(0, X.shape[0], batch):
        body = {"model": model, "X": X[lo : lo + batch].tolist(), "y": y[lo : lo + batch].tolist()}
        if w is not None:
            body["w"] = w[lo : lo + batch].tolist()
        r = client.post("/learn", json=body)
        assert r.status_code == 200, r.text
        assert_examples_account(client, model, lo + len(y[lo : lo + batch]))


def _decisions(client, model, probe):
    r = client.post("/predict", json={"model": model, "X": probe.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["decision"])


def test_weights_through_http_equal_the_local_sample_weight(start_server):
    """No settings, raw rows with weights through HTTP then flush: the same model as the
    selector's ``partial_fit(..., sample_weight=w)`` on the same rows; the weights' sum and the
    zero-weight count are reported, the prequential window says it is not weighted."""
    server = start_server()
    X, y, w = _stream()
    with server.client() as client:
        assert client.put("/models/weighted", json={}).status_code in (200, 201)
        _learn(client, "weighted", X, y, w)
        client.post("/models/weighted/flush")
        examples = assert_examples_account(client, "weighted", X.shape[0])
        assert examples["learned"] == X.shape[0]
        info = client.get("/models/weighted").json()
        served = _decisions(client, "weighted", X[::5])
    local = SelectionClassifier(BudgetedSGDClassifier(random_state=0))
    local.partial_fit(X, y, classes=[0, 1], sample_weight=w).flush()
    np.testing.assert_allclose(served, local.decision_function(X[::5]), rtol=0, atol=1e-12)
    unweighted = SelectionClassifier(BudgetedSGDClassifier(random_state=0)).fit(X, y)
    assert np.abs(served - unweighted.decision_function(X[::5])).max() > 1e-6
    weights = info["statistics"]["weights"]
    assert weights["weighted"] is True and weights["zero_weight"] == int((w == 0).sum())
    assert weights["sum"] == pytest.approx(float(w.sum()), rel=1e-12)
    assert info["metrics"]["prequential_weighted"] is False


@pytest.mark.parametrize(
    ("w", "field"),
    [
        ([1.0, -0.5, 1.0], "w[1]"),
        ([1.0, "2", 1.0], "w[1]"),
        ([1.0, 1.0, True], "w[2]"),
        ([None, 1.0, 1.0], "w[0]"),
        ([1.0, 1.0], "w"),
        ("1", "w"),
    ],
    ids=["negative", "string", "boolean", "null", "short", "not-a-list"],
)
def test_a_bad_weight_is_a_422_naming_it_and_changes_nothing(start_server, w, field):
    """(NaN and infinities are not JSON: such a body is a 400; the estimators refuse them too,
    tests/test_weights.py.)"""
    server = start_server()
    X, y, _ = _stream(n=1200)
    with server.client() as client:
        assert client.put("/models/bad", json={"warmup": 100}).status_code in (200, 201)
        _learn(client, "bad", X[:1000], y[:1000], None)
        before = client.get("/models/bad").json()
        probe = _decisions(client, "bad", X[1000:])
        body = {"model": "bad", "X": X[1000:1003].tolist(), "y": y[1000:1003].tolist(), "w": w}
        r = client.post("/learn", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field, r.json()
        after = client.get("/models/bad").json()
        assert after["version"] == before["version"] and after["examples"] == before["examples"]
        np.testing.assert_array_equal(_decisions(client, "bad", X[1000:]), probe)
        assert_examples_account(client, "bad", 1000)


def test_zero_weights_are_received_and_learn_nothing(start_server):
    server = start_server()
    X, y, _ = _stream(n=1300)
    with server.client() as client:
        assert client.put("/models/zero", json={"warmup": 100, "shuffle_buffer": 0}).status_code in (200, 201)
        _learn(client, "zero", X[:1000], y[:1000], None)
        probe = _decisions(client, "zero", X[1000:])
        t = client.get("/models/zero").json()["t"]
        r = client.post(
            "/learn", json={"model": "zero", "X": X[1000:].tolist(), "y": y[1000:].tolist(), "w": [0] * 300}
        )
        assert r.status_code == 200, r.text
        examples = assert_examples_account(client, "zero", 1300)
        assert examples["pending"] == 0 and examples["learned"] == 1300
        assert client.get("/models/zero").json()["t"] == t
        np.testing.assert_array_equal(_decisions(client, "zero", X[1000:]), probe)


@pytest.mark.parametrize("class_weight", ["balanced", {"1": 5.0}], ids=["balanced", "mapping"])
def test_class_weight_through_put_is_the_local_pipelines(start_server, class_weight):
    """``class_weight`` in PUT (alone: still the no-settings race, docs/selection.md): the
    selector with ``pipeline_params={"class_weight": "balanced"}``, or a mapping keyed by the
    label as JSON writes it, which the service multiplies into the weights."""
    server = start_server()
    X, y, w = _stream(n=1200, seed=4)
    with server.client() as client:
        r = client.put("/models/cw", json={"class_weight": class_weight})
        assert r.status_code in (200, 201), r.text
        assert r.json()["config"]["class_weight"] == class_weight
        _learn(client, "cw", X, y, w)
        client.post("/models/cw/flush")
        assert_examples_account(client, "cw", X.shape[0])
        served = _decisions(client, "cw", X[::5])
    if class_weight == "balanced":
        local = SelectionClassifier(
            BudgetedSGDClassifier(random_state=0), pipeline_params={"class_weight": "balanced"}
        )
        local.partial_fit(X, y, classes=[0, 1], sample_weight=w).flush()
    else:
        local = SelectionClassifier(BudgetedSGDClassifier(random_state=0))
        local.partial_fit(X, y, classes=[0, 1], sample_weight=w * np.where(y == 1, 5.0, 1.0)).flush()
    np.testing.assert_allclose(served, local.decision_function(X[::5]), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "bad",
    [{"1": -1}, {"1": "2"}, {"1": True}, "auto", [1, 2]],
    ids=["negative", "string", "bool", "word", "list"],
)
def test_a_bad_class_weight_is_a_422_naming_it(start_server, bad):
    server = start_server()
    with server.client() as client:
        r = client.put("/models/badcw", json={"class_weight": bad})
        assert r.status_code == 422, r.text
        assert "class_weight" in r.text
        assert client.get("/models/badcw").status_code == 404


def test_weights_on_stream_entries(redis_server, tmp_path):
    """``w`` on Redis stream entries: a bad one is dead-lettered naming ``w``, the others learn
    as the local pipeline's sample_weight; entries without ``w`` weigh 1."""
    from svmstream.app.models.factory import make_estimator
    from tests.test_stream import n_seen, produce, stream_settings, streaming, unique, wait_for

    r = redis_server.client()
    name = unique("weighted")
    settings = stream_settings(tmp_path, redis_server.url)
    key, dead_key, _ = settings.stream_keys(name)
    X, y, w = _stream(n=900, seed=8)
    w[::3] = 1.0  # written without a w
    bad = [b"-1", b"true", b'"x"', b"nan", b"1_0"]
    entries = []
    for i in range(900):
        if i % 100 == 40:
            entries.append({b"y": b"1", b"x": orjson.dumps(X[i].tolist()), b"w": bad[(i // 100) % len(bad)]})
        fields = {b"y": str(int(y[i])).encode(), b"x": orjson.dumps(X[i].tolist())}
        if i % 3:
            fields[b"w"] = repr(float(w[i])).encode()
        entries.append(fields)
    config = {"budget": 60, "warmup": 200, "random_state": 0, "on_drift": "none", "classes": [0, 1]}
    with streaming(settings, name, config) as (registry, manager):
        produce(r, key, entries)
        wait_for(lambda: n_seen(registry, name) == 900, what="all good entries applied")
        registry.flush(name).result(timeout=60)
        assert manager.consumers[name].dead_letters == 9
        _, served = registry.predict(name, X[::5])
        handle = registry.get(name)
        info = handle.info()
        local = make_estimator(handle.config)
    reasons = [d[b"reason"].decode() for _, d in r.xrange(dead_key)]
    assert len(reasons) == 9 and all(reason.startswith("w: a weight must be") for reason in reasons), reasons
    assert info["examples"]["received"] == len(entries) and info["examples"]["learned"] == 900
    local.partial_fit(X, y, classes=[0, 1], sample_weight=w).flush()
    np.testing.assert_allclose(served, local.decision_function(X[::5]), rtol=0, atol=1e-12)


def test_weights_on_feedback_equal_learn(start_server, tmp_path):
    """``POST /feedback`` with ``w``: the stored rows learn as ``/learn`` with the same ``w``;
    a bad ``w`` is a 422 naming ``w[i]`` and learns nothing."""
    from tests.conftest import two_moons_like

    server = start_server(tmp_path / "snap")
    c = server.client()
    X, y = two_moons_like(900, d=5, seed=3)
    labels = np.where(y > 0, "pos", "neg").tolist()
    w = np.random.default_rng(5).uniform(0.0, 2.0, 900).round(3)
    config = {"warmup": 100, "shuffle_buffer": 200, "budget": 60}
    for name in ("fbw", "refw"):
        assert c.put(f"/models/{name}", json=config).status_code == 201
        assert (
            c.post("/learn", json={"model": name, "X": X[:300].tolist(), "y": labels[:300]}).status_code
            == 200
        )
    r = c.post("/predict", json={"model": "fbw", "X": X[300:800].tolist(), "remember": True})
    ids = r.json()["ids"]
    before = c.get("/models/fbw").json()
    bad = c.post("/feedback", json={"model": "fbw", "ids": ids[:2], "y": labels[300:302], "w": [1.0, -2.0]})
    assert bad.status_code == 422 and bad.json()["field"] == "w[1]", bad.text
    after = c.get("/models/fbw").json()
    assert after["version"] == before["version"] and after["examples"] == before["examples"]
    for lo in range(300, 800, 250):
        body = {
            "model": "fbw",
            "ids": ids[lo - 300 : lo - 50],
            "y": labels[lo : lo + 250],
            "w": w[lo : lo + 250].tolist(),
        }
        r = c.post("/feedback", json=body)
        assert r.status_code == 200 and r.json()["learned"] == 250, r.text
        body = {
            "model": "refw",
            "X": X[lo : lo + 250].tolist(),
            "y": labels[lo : lo + 250],
            "w": w[lo : lo + 250].tolist(),
        }
        assert c.post("/learn", json=body).status_code == 200
    probe = X[800:]
    assert np.max(np.abs(_decisions(c, "fbw", probe) - _decisions(c, "refw", probe))) <= 1e-12
    assert_examples_account(c, "fbw", 800)
