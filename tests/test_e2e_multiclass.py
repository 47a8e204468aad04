"""Multi-class online models through a real server, as users send data: no hyperparameters,
raw features, labels learned from the data (strings or numbers, in file order), calibrated
probabilities, the Redis stream, and a restart that must give back the identical model."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_wine
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from tests.conftest import run_cli, write_libsvm
from tests.test_stream import produce, unique, wait_for, xb

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])


def _digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0)


def _learn(c, model, X, y, batch=100):
    for start in range(0, len(X), batch):
        r = c.post(
            "/learn",
            json={
                "model": model,
                "X": X[start : start + batch].tolist(),
                "y": y[start : start + batch].tolist(),
            },
        )
        assert r.status_code == 200, r.text


def test_string_labels_learned_from_the_data_with_probabilities(start_server):
    """digits with string labels, raw pixels (0..16), file order, no settings: the model
    learns its 10 classes in order of appearance and gets within 3 pp of SVC()."""
    Xtr, Xte, ytr, yte = _digits()
    server = start_server()
    with server.client() as c:
        assert c.put("/models/digits", json={}).status_code in (200, 201)
        assert c.get("/models/digits").json()["classes"] == []
        _learn(c, "digits", Xtr, NAMES[ytr])
        assert c.post("/models/digits/flush").status_code == 200
        info = c.get("/models/digits").json()
        first_seen = sorted(NAMES.tolist())  # learned in order of appearance, shown sorted
        assert info["classes"] == first_seen and info["classes_learned"] is True
        assert info["config"]["classes"] is None
        r = c.post("/predict", json={"model": "digits", "X": Xte.tolist(), "proba": True})
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["classes"] == first_seen
    proba = np.asarray(body["proba"])
    decision = np.asarray(body["decision"])
    assert proba.shape == (len(Xte), 10) and decision.shape == (len(Xte), 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    labels = np.asarray(body["labels"])
    assert np.array_equal(np.asarray(first_seen)[proba.argmax(axis=1)], labels)
    accuracy = float(np.mean(labels == NAMES[yte]))
    svc = SVC().fit(Xtr, ytr).score(Xte, yte)
    assert accuracy >= svc - 0.03, (accuracy, svc)
    # better than knowing nothing: log-loss below the uniform guess's log(10) (a 1,257-row stream
    # calibrates on margins of a young model: underconfident, see docs/online.md)
    truth = np.searchsorted(np.asarray(first_seen), NAMES[yte])
    assert -np.mean(np.log(proba[np.arange(len(yte)), truth])) < 0.5 * np.log(10)


def test_label_errors_change_nothing(start_server):
    X, y = load_wine(return_X_y=True)
    server = start_server()
    with server.client() as c:
        assert c.put("/models/two", json={"max_classes": 2}).status_code in (200, 201)
        _learn(c, "two", X[y < 2][:60], y[y < 2][:60])
        before = c.get("/models/two").json()
        assert before["classes"] == sorted(before["classes"]) or len(before["classes"]) == 2
        r = c.post("/learn", json={"model": "two", "X": X[:3].tolist(), "y": [0, 2, 1]})
        assert r.status_code == 422 and r.json()["field"] == "y[1]", r.text
        assert "max_classes = 2" in r.json()["detail"]
        r = c.post("/learn", json={"model": "two", "X": X[:2].tolist(), "y": [0, "cat"]})
        assert r.status_code == 422 and r.json()["field"] == "y[1]", r.text
        after = c.get("/models/two").json()
        assert (after["classes"], after["version"], after["n_seen"]) == (
            before["classes"],
            before["version"],
            before["n_seen"],
        )
        # declared classes keep refusing unknown labels
        assert c.put("/models/declared", json={"classes": ["a", "b", "c"]}).status_code in (200, 201)
        r = c.post("/learn", json={"model": "declared", "X": X[:2].tolist(), "y": ["a", "d"]})
        assert r.status_code == 422 and "unknown label" in r.json()["detail"], r.text
        # over the limit of classes a model may declare
        r = c.put("/models/many", json={"classes": list(range(5)), "max_classes": 4})
        assert r.status_code == 422, r.text


def test_one_label_so_far_then_more(start_server):
    """A label-sorted source: the first batches carry one label; the model answers it (proba 1)
    and becomes binary, then 3-class, as labels arrive."""
    X, y = load_wine(return_X_y=True)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    server = start_server()
    with server.client() as c:
        c.put("/models/wine", json={"warmup": 20})
        _learn(c, "wine", X[:40], y[:40], batch=20)
        r = c.post("/predict", json={"model": "wine", "X": X[:3].tolist(), "proba": True}).json()
        assert r["labels"] == [0, 0, 0] and r["classes"] == [0] and r["proba"] == [[1.0]] * 3
        _learn(c, "wine", X[40:], y[40:], batch=20)
        assert c.get("/models/wine").json()["classes"] == [0, 1, 2]
        r = c.post("/predict", json={"model": "wine", "X": X.tolist(), "proba": True}).json()
        assert np.asarray(r["proba"]).shape == (len(X), 3)


def test_learned_classes_calibration_and_drift_state_survive_a_restart(start_server, redis_server, tmp_path):
    """Classes learned through the Redis stream, then SIGTERM and restart: identical classes,
    decisions and probabilities, and the drift detector's figures."""
    Xtr, Xte, ytr, _ = _digits()
    name = unique("mc")
    r = redis_server.client()
    produce(
        r,
        f"svmstream:{name}:examples",
        [{b"y": NAMES[v].encode(), b"xb": xb(row)} for row, v in zip(Xtr, ytr)],
    )
    env = {
        "SVMSTREAM_REDIS_URL": redis_server.url,
        "SVMSTREAM_DEFAULT_MODEL": name,
        "SVMSTREAM_WARM_UP": "false",
    }
    snap = tmp_path / "snaps"
    server = start_server(snapshot_dir=snap, env=env)
    with server.client() as c:
        wait_for(lambda: c.get(f"/models/{name}").json()["n_seen"] >= len(Xtr), timeout=60, what="consumed")
        before = c.get(f"/models/{name}").json()
        pred_before = c.post("/predict", json={"model": name, "X": Xte.tolist(), "proba": True}).json()
    server.terminate()
    assert before["classes"] == sorted(NAMES.tolist())
    server = start_server(snapshot_dir=snap, env=env)
    with server.client() as c:
        after = c.get(f"/models/{name}").json()
        pred_after = c.post("/predict", json={"model": name, "X": Xte.tolist(), "proba": True}).json()
    assert after["classes"] == before["classes"]
    assert after["drift"] == before["drift"]
    assert pred_after["proba"] == pred_before["proba"] and pred_after["decision"] == pred_before["decision"]
    assert pred_after["labels"] == pred_before["labels"]


@pytest.mark.parametrize("algorithm", ["bsgd", "bsca"])
def test_numeric_multiclass_learned_without_settings(start_server, algorithm):
    Xtr, Xte, ytr, yte = _digits()
    server = start_server()
    with server.client() as c:
        c.put("/models/m", json={"algorithm": algorithm})
        _learn(c, "m", Xtr, ytr)
        c.post("/models/m/flush")
        r = c.post("/predict", json={"model": "m", "X": Xte.tolist()}).json()
    assert np.mean(np.asarray(r["labels"]) == yte) >= 0.9


@pytest.mark.parametrize("redis", [False, True])
def test_replay_of_a_multiclass_libsvm_file(start_server, redis_server, tmp_path, redis):
    """``svmstream replay`` of a 10-class LIBSVM file, over HTTP and through the Redis stream."""
    Xtr, Xte, ytr, yte = _digits()
    order = np.argsort(ytr, kind="stable")  # as LIBSVM files often are: sorted by label
    train = write_libsvm(tmp_path / "digits.train", Xtr[order], ytr[order])
    env = {"SVMSTREAM_REDIS_URL": redis_server.url} if redis else {}
    server = start_server(env=env)
    name = unique("rp")
    args = ["--model", name, *(["--redis", redis_server.url] if redis else [])]
    out = run_cli(["replay", str(train), "--url", server.url, "--no-progress", "--json", *args], timeout=300)
    assert out.returncode == 0, out.stderr
    with server.client() as c:
        if redis:
            wait_for(
                lambda: c.get(f"/models/{name}").json()["n_seen"] >= len(Xtr), timeout=60, what="consumed"
            )
            c.post(f"/models/{name}/flush")
        info = c.get(f"/models/{name}").json()
        r = c.post("/predict", json={"model": name, "X": Xte.tolist()}).json()
    assert info["classes"] == list(range(10)) and info["config"]["classes"] == list(range(10))
    assert np.mean(np.asarray(r["labels"]) == yte) >= 0.93
