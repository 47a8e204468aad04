"""Labels that arrive later, through a real server (embedded feedback store, no Redis):
``/predict`` with ``remember`` answers ids, ``POST /feedback`` learns each id at most once
exactly as ``/learn`` would, forged and foreign ids learn nothing, malformed bodies are 4xx
that change nothing, the store and the ledger survive a restart, and served accuracy equals
the prequential accuracy when feedback arrives at once and in order."""

from __future__ import annotations

import numpy as np

from tests.conftest import two_moons_like

CONFIG = {"warmup": 100, "shuffle_buffer": 200, "budget": 60}


def _learn(client, name, X, y):
    r = client.post("/learn", json={"model": name, "X": X.tolist(), "y": y})
    assert r.status_code == 200, r.text
    return r.json()


def _remember(client, name, X):
    r = client.post("/predict", json={"model": name, "X": X.tolist(), "remember": True, "proba": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["ids"]) == len(X) and len(set(body["ids"])) == len(X)
    return body


def _decisions(client, name, probe):
    r = client.post("/predict", json={"model": name, "X": probe.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["decision"])


def test_feedback_learns_each_id_once_exactly_as_learn(start_server, tmp_path):
    server = start_server(tmp_path / "snap")
    c = server.client()
    X, y = two_moons_like(1400, d=5, seed=3)
    labels = np.where(y > 0, "pos", "neg").tolist()
    for name in ("fb", "ref", "other"):
        assert c.put(f"/models/{name}", json=CONFIG).status_code == 201
        _learn(c, name, X[:300], labels[:300])
    ids = []
    for start in range(300, 1300, 250):
        ids += _remember(c, "fb", X[start : start + 250])["ids"]
    foreign = _remember(c, "other", X[:3])["ids"]
    # feedback in batches, in order; the reference learns the same rows through /learn
    for start in range(300, 1100, 200):
        batch_ids = ids[start - 300 : start - 100]
        r = c.post("/feedback", json={"model": "fb", "ids": batch_ids, "y": labels[start : start + 200]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["learned"] == 200 and body["duplicate"] == 0 and body["expired"] == 0
        assert body["learned_indices"] == list(range(200))
        _learn(c, "ref", X[start : start + 200], labels[start : start + 200])
    probe = X[1300:]
    delta = np.max(np.abs(_decisions(c, "fb", probe) - _decisions(c, "ref", probe)))
    assert delta <= 1e-12, delta
    before = c.get("/models/fb").json()
    # duplicates, a forged id, another model's id: nothing learned, counted per row
    forged = "A" * 22
    r = c.post(
        "/feedback",
        json={"model": "fb", "ids": [ids[0], forged, foreign[0], ids[5], ids[0]], "y": ["pos"] * 5},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["learned"], body["duplicate"], body["expired"]) == (0, 3, 2)
    assert body["duplicate_indices"] == [0, 3, 4] and body["expired_indices"] == [1, 2]
    # malformed bodies: 422 naming the field, nothing learned
    for bad, field in (
        ({"model": "fb", "ids": ids[900:902], "y": ["pos"]}, "y"),
        ({"model": "fb", "ids": [ids[900], 7], "y": ["pos", "neg"]}, "ids[1]"),
        ({"model": "fb", "ids": ids[900:902], "y": ["pos", None]}, "y[1]"),
        ({"model": "fb", "ids": [], "y": []}, "ids"),
        ({"model": "fb", "ids": ids[900:901], "y": ["pos"], "X": [[1]]}, "X"),
    ):
        r = c.post("/feedback", json=bad)
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["field"] == field, r.json()
    r = c.post("/predict", json={"model": "fb", "X": X[:2].tolist(), "remember": "yes"})
    assert r.status_code == 422 and r.json()["field"] == "remember"
    after = c.get("/models/fb").json()
    assert after["version"] == before["version"] and after["n_seen"] == before["n_seen"]
    metrics = after["metrics"]
    assert metrics["feedback"]["learned"] == 800 and metrics["feedback"]["duplicate"] == 3
    assert metrics["feedback"]["expired"] == 2
    assert metrics["served_accuracy"] is not None and metrics["served_log_loss"] is not None
    # the ids 800.. were never labelled: they still can be, after a restart (and learned ones not)
    server.terminate()
    server = start_server(tmp_path / "snap")
    c = server.client()
    r = c.post("/feedback", json={"model": "fb", "ids": [ids[0], *ids[800:803]], "y": labels[1099:1103]})
    assert r.status_code == 200, r.text
    assert (r.json()["learned"], r.json()["duplicate"]) == (3, 1)
    text = c.get("/metrics").text
    assert 'svmstream_feedback_label_delay_seconds_count{model="fb"} 3.0' in text


def test_model_setting_remember_and_served_equals_prequential(start_server, tmp_path):
    """Immediate in-order feedback on a model without warm-up or reordering: what was served is
    what the prequential test-then-train evaluation scores, row by row."""
    window = {"SVMSTREAM_METRICS_WINDOW": "398", "SVMSTREAM_FEEDBACK_WINDOW": "398"}
    server = start_server(tmp_path / "snap", env=window)
    c = server.client()
    config = {
        "warmup": 0,
        "shuffle_buffer": 0,
        "run_guard": False,
        "rehearsal": 0,
        "scaling": "none",
        "gamma": 0.5,
        "remember": True,
    }
    assert c.put("/models/seen", json=config).status_code == 201
    X, y = two_moons_like(600, d=4, seed=11)
    _learn(c, "seen", X[:2], y[:2].tolist())
    for i in range(2, 400):
        r = c.post("/predict", json={"model": "seen", "X": X[i : i + 1].tolist()})
        assert r.status_code == 200 and "ids" in r.json(), r.text  # the model's setting
        f = c.post("/feedback", json={"model": "seen", "ids": r.json()["ids"], "y": [int(y[i])]})
        assert f.status_code == 200 and f.json()["learned"] == 1, f.text
    m = c.get("/models/seen").json()["metrics"]
    # both windows hold the same 398 rows: the served labels are the prequential predictions
    assert m["served_window"] == m["prequential_window"] == 398
    assert m["served_accuracy"] == m["prequential_accuracy"], m
    assert 0.6 < m["served_accuracy"] < 1.0
    r = c.post("/predict", json={"model": "seen", "X": X[:3].tolist(), "remember": False})
    assert "ids" not in r.json()


def _metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.split()[1])


def test_the_store_stays_within_its_bound_evicting_the_oldest(start_server, tmp_path):
    server = start_server(tmp_path / "snap", env={"SVMSTREAM_FEEDBACK_MAX_BYTES": "100000"})
    c = server.client()
    X, y = two_moons_like(3300, d=6, seed=2)
    assert c.put("/models/small", json=CONFIG).status_code == 201
    _learn(c, "small", X[:300], y[:300].tolist())
    ids = []
    for start in range(300, 3300, 300):
        ids += _remember(c, "small", X[start : start + 300])["ids"]
        text = c.get("/metrics").text
        assert _metric(text, "svmstream_feedback_store_bytes") <= 100_000
    records = _metric(text, "svmstream_feedback_store_records")
    evicted = _metric(text, "svmstream_feedback_evicted_total")
    assert 0 < records < 3000 and records + evicted == 3000, (records, evicted)
    kept = int(records)
    r = c.post("/feedback", json={"model": "small", "ids": [ids[0], ids[-1]], "y": [int(y[300]), int(y[-1])]})
    assert (r.json()["expired"], r.json()["learned"]) == (1, 1), r.text  # the oldest went first
    r = c.post("/feedback", json={"model": "small", "ids": ids[-kept:-1], "y": y[-kept:-1].tolist()})
    assert r.json()["learned"] == kept - 1, r.text
