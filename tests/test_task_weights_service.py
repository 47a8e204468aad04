"""Weights and named fields on the regression and novelty models through the real service
(issues 38 and 39; docs/weights.md, docs/fields.md): ``w`` on ``/learn`` is the in-process
pipeline's ``sample_weight`` (max |Δ| <= 1e-12), a bad ``w`` is a 422 naming ``w[i]`` that
changes nothing, ``w = 0`` is received and learns nothing, named-field rows go through the
fields stage for each task, and the account holds in every test (a uvicorn process, raw rows)."""

from __future__ import annotations

import numpy as np
import pytest

from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.models.rows import learn_rows
from svmstream.app.settings import Settings
from svmstream.solvers.online.stages.fields import FieldSchema
from tests.conftest import assert_examples_account
from tests.test_task_service import ENV, blobs, friedman, refused

TASK_DATA = {
    "regression": lambda n, seed: friedman(n, seed),
    "novelty": lambda n, seed: (blobs(n, seed), None),
}
OUTPUT = {"regression": "values", "novelty": "scores"}


def _weights(n: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).uniform(0.0, 3.0, n).round(3)
    w[::11] = 0.0
    return w


def _post(c, name, X, y, w, batch=250, sent=0):
    for lo in range(0, len(X), batch):
        body = {"model": name, "X": _rows(X[lo : lo + batch])}
        if y is not None:
            body["y"] = list(y[lo : lo + batch])
        if w is not None:
            body["w"] = w[lo : lo + batch].tolist()
        r = c.post("/learn", json=body)
        assert r.status_code == 200, r.text
        assert_examples_account(c, name, sent + min(lo + batch, len(X)))


def _rows(X):
    return X.tolist() if isinstance(X, np.ndarray) else X


def _answer(c, name, task, X):
    r = c.post("/predict", json={"model": name, "X": _rows(X)})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()[OUTPUT[task]])


def _local(task, tmp_path, **config):
    registry = Registry(Settings(snapshot_dir=tmp_path / "local", warm_up=False), None)
    return make_estimator(registry.resolve_config({"task": task, **config}))


def _local_answer(est, task, X):
    return est.predict(X) if task == "regression" else est.score_samples(X)


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_weights_through_http_equal_the_local_sample_weight(task, start_server, tmp_path):
    """No settings, raw rows with ``w`` (every 11th 0) through HTTP: the in-process pipeline fed
    the same rows with ``sample_weight=w`` (max |Δ| <= 1e-12), unlike the unweighted one; the
    weights' figures are reported; bad weights are 422s naming ``w[i]`` that change nothing."""
    X, y = TASK_DATA[task](3000, 0)
    probe, _ = TASK_DATA[task](500, 1)
    w = _weights(3000)
    server = start_server(tmp_path / "snap", use_uvicorn=True, env=ENV)
    with server.client() as c:
        assert c.put("/models/m", json={"task": task}).status_code == 201
        _post(c, "m", X, y, w)
        examples = assert_examples_account(c, "m", 3000)
        assert examples["learned"] == 3000 and examples["pending"] == 0
        served = _answer(c, "m", task, probe)
        info = c.get("/models/m").json()
        before = info
        for bad, field in (
            ([1.0, -0.5, 1.0], "w[1]"),
            ([1.0, "2", 1.0], "w[1]"),
            ([True, 1.0, 1.0], "w[0]"),
            ([1.0, 1.0, None], "w[2]"),
            ([1.0, 1.0], "w"),
        ):
            body = {"model": "m", "X": X[:3].tolist(), "w": bad}
            if y is not None:
                body["y"] = y[:3].tolist()
            assert "w" in refused(c.post("/learn", json=body), field)
        after = c.get("/models/m").json()
        assert after["version"] == before["version"] and after["examples"] == before["examples"]
        np.testing.assert_array_equal(_answer(c, "m", task, probe), served)
        assert_examples_account(c, "m", 3000)
    server.terminate()
    local = _local(task, tmp_path)
    local.partial_fit(X, y, sample_weight=w) if y is not None else local.partial_fit(X, sample_weight=w)
    assert float(np.max(np.abs(served - _local_answer(local, task, probe)))) <= 1e-12
    plain = _local(task, tmp_path)
    plain.partial_fit(X, y) if y is not None else plain.partial_fit(X)
    assert float(np.max(np.abs(served - _local_answer(plain, task, probe)))) > 1e-6
    weights = info["statistics"]["weights"]
    assert weights["weighted"] is True and weights["zero_weight"] == int((w == 0).sum())
    assert weights["sum"] == pytest.approx(float(w.sum()), rel=1e-12)


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_zero_weights_are_received_and_learn_nothing(task, start_server, tmp_path):
    X, y = TASK_DATA[task](1300, 2)
    server = start_server(tmp_path / "snap", use_uvicorn=True, env=ENV)
    with server.client() as c:
        assert c.put("/models/z", json={"task": task}).status_code == 201
        _post(c, "z", X[:1000], None if y is None else y[:1000], None)
        probe = _answer(c, "z", task, X[1000:])
        steps = c.get("/models/z").json()["t"]
        _post(c, "z", X[1000:], None if y is None else y[1000:], np.zeros(300), batch=300, sent=1000)
        info = c.get("/models/z").json()
        examples = assert_examples_account(c, "z", 1300)
        assert examples["learned"] == 1300 and examples["pending"] == 0
        assert info["t"] == steps and info["statistics"]["weights"]["zero_weight"] == 300
        np.testing.assert_array_equal(_answer(c, "z", task, X[1000:]), probe)
    server.terminate()


def _events(n: int, seed: int):
    """Events with named fields: two numbers (one sometimes null), a boolean and two categories;
    a numeric target on the raw scale (regression)."""
    rng = np.random.default_rng(seed)
    rows, y = [], []
    for _ in range(n):
        country = str(rng.choice(["DE", "FR", "US", "BR", "IN"]))
        amount = float(np.round(rng.gamma(2.0, 30.0), 2))
        rows.append(
            {
                "amount": amount,
                "age": None if rng.random() < 0.1 else int(rng.integers(18, 80)),
                "country": country,
                "device": str(rng.choice(["ios", "android", "web"])),
                "returning": bool(rng.random() < 0.5),
            }
        )
        y.append(1000.0 + 3.0 * amount + (200.0 if country in ("BR", "IN") else 0.0) + rng.normal() * 5)
    return rows, np.asarray(y)


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_named_field_rows_on_each_task(task, start_server, tmp_path):
    """Named-field JSON (numbers, a null, a boolean, categories; a category first seen in a later
    batch widens the model) with ``w``: the fields stage makes the columns, the model is the
    in-process pipeline fed the same encoded batches (max |Δ| <= 1e-12), ``GET`` shows the
    schema, a wrong-typed field is a 422 naming ``X[i].field`` that changes nothing."""
    rows, y = _events(2000, seed=3)
    for row in rows[1500:1600]:
        row["country"] = "CN"  # new mid-stream: a new column
    y_sent = y if task == "regression" else None
    w = _weights(2000, seed=1)
    test_rows, _ = _events(300, seed=4)
    server = start_server(tmp_path / "snap", use_uvicorn=True, env=ENV)
    with server.client() as c:
        assert c.put("/models/f", json={"task": task}).status_code == 201
        _post(c, "f", rows, None if y_sent is None else y_sent.tolist(), w)
        info = c.get("/models/f").json()
        fields = {f["name"]: f for f in info["fields"]["fields"]}
        assert fields["country"]["kind"] == "category" and fields["country"]["categories"] == 6
        assert fields["age"]["missing_indicator"] and info["n_features"] == info["fields"]["n_columns"]
        served = _answer(c, "f", task, test_rows)
        bad = {"model": "f", "X": [rows[0], dict(rows[1], amount="12")], "w": [1.0, 1.0]}
        if y_sent is not None:
            bad["y"] = y_sent[:2].tolist()
        refused(c.post("/learn", json=bad), "X[1].amount")
        after = c.get("/models/f").json()
        assert after["version"] == info["version"] and after["fields"] == info["fields"]
        assert after["examples"] == info["examples"]
        np.testing.assert_array_equal(_answer(c, "f", task, test_rows), served)
        assert_examples_account(c, "f", 2000)
    server.terminate()
    schema, local = FieldSchema(), _local(task, tmp_path)
    for lo in range(0, 2000, 250):
        Xb, growth = schema.encode(rows[lo : lo + 250])
        schema.commit(growth)
        yb = np.zeros(Xb.shape[0]) if y_sent is None else y_sent[lo : lo + 250]
        learn_rows(local, Xb, yb, 2, w[lo : lo + 250])
    Xt, _ = schema.encode(test_rows, grow=False)
    assert float(np.max(np.abs(served - _local_answer(local, task, Xt.toarray())))) <= 1e-12
    if task == "regression":  # it learned the target from the named fields on its raw scale
        _, yt = _events(300, seed=4)
        assert float(np.sqrt(np.mean((served - yt) ** 2))) < 0.5 * float(np.std(yt))


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_weights_on_stream_entries_of_each_task(task, redis_server, tmp_path):
    """``w`` on Redis stream entries of a regression model (numeric ``y``) and of a novelty model
    (no ``y``): a bad ``w`` is dead-lettered naming ``w``, the others learn as the in-process
    pipeline's ``sample_weight``; an entry without ``w`` weighs 1; the account holds."""
    import orjson

    from tests.test_stream import n_seen, produce, stream_settings, streaming, unique, wait_for

    r = redis_server.client()
    name = unique(f"w-{task}")
    settings = stream_settings(tmp_path, redis_server.url)
    key, dead_key, _ = settings.stream_keys(name)
    X, y = TASK_DATA[task](900, 5)
    w = _weights(900, seed=6)
    w[::3] = 1.0  # written without a w
    entries, bad = [], [b"-1", b"true", b'"x"', b"nan"]
    for i in range(900):
        fields = {b"x": orjson.dumps(X[i].tolist())}
        if y is not None:
            fields[b"y"] = repr(float(y[i])).encode()
        if i % 100 == 40:
            entries.append({**fields, b"w": bad[(i // 100) % len(bad)]})
        if i % 3:
            fields[b"w"] = repr(float(w[i])).encode()
        entries.append(fields)
    with streaming(settings, name, {"task": task, "random_state": 0}) as (registry, manager):
        produce(r, key, entries)
        wait_for(lambda: n_seen(registry, name) == 900, what="all good entries applied")
        assert manager.consumers[name].dead_letters == 9
        _, served = registry.predict(name, X[::5])
        handle = registry.get(name)
        info = handle.info()
        local = make_estimator(handle.config)
    reasons = [d[b"reason"].decode() for _, d in r.xrange(dead_key)]
    assert len(reasons) == 9 and all(reason.startswith("w: a weight must be") for reason in reasons), reasons
    examples = info["examples"]
    assert (
        examples["received"]
        == len(entries)
        == examples["learned"] + examples["pending"] + examples["refused"]
    )
    assert examples["refused"] == 9
    local.partial_fit(X, y, sample_weight=w) if y is not None else local.partial_fit(X, sample_weight=w)
    assert float(np.max(np.abs(np.asarray(served) - local.decision_function(X[::5])))) <= 1e-12


@pytest.mark.parametrize("task", ["regression", "novelty"])
def test_weights_on_feedback_of_each_task_equal_learn(task, start_server, tmp_path):
    """``POST /feedback`` with ``w`` on remembered rows (true values, or 0/1 evaluation labels):
    the same model as ``/learn`` of those rows with the same ``w``; a bad ``w`` is a 422 naming
    ``w[i]`` that learns nothing; the account holds."""
    server = start_server(tmp_path / "snap")
    c = server.client()
    X, y = TASK_DATA[task](900, 7)
    truth = y.tolist() if y is not None else [0] * 900
    w = _weights(900, seed=8)
    for name in ("fb", "ref"):
        assert c.put(f"/models/{name}", json={"task": task, "random_state": 0}).status_code == 201
        _post(c, name, X[:300], None if y is None else y[:300], None)
    r = c.post("/predict", json={"model": "fb", "X": X[300:800].tolist(), "remember": True})
    assert r.status_code == 200, r.text
    ids = r.json()["ids"]
    before = c.get("/models/fb").json()
    bad = c.post("/feedback", json={"model": "fb", "ids": ids[:2], "y": truth[300:302], "w": [1.0, -2.0]})
    assert bad.status_code == 422 and bad.json()["field"] == "w[1]", bad.text
    after = c.get("/models/fb").json()
    assert after["version"] == before["version"] and after["examples"] == before["examples"]
    for lo in range(300, 800, 250):
        body = {"model": "fb", "ids": ids[lo - 300 : lo - 50], "y": truth[lo : lo + 250]}
        r = c.post("/feedback", json={**body, "w": w[lo : lo + 250].tolist()})
        assert r.status_code == 200 and r.json()["learned"] == 250, r.text
        ref = {"model": "ref", "X": X[lo : lo + 250].tolist(), "w": w[lo : lo + 250].tolist()}
        if y is not None:
            ref["y"] = truth[lo : lo + 250]
        assert c.post("/learn", json=ref).status_code == 200
    probe = X[800:]
    assert float(np.max(np.abs(_answer(c, "fb", task, probe) - _answer(c, "ref", task, probe)))) <= 1e-12
    assert_examples_account(c, "fb", 800)
    assert_examples_account(c, "ref", 800)
