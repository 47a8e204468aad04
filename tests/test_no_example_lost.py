"""No example is lost, through the real service: received = learned + pending + refused after
every batch, a forced drift detection drops nothing, and flush learns every pending row.

Both kinds of user: one with no settings (raw unscaled features sorted by a string label,
then the concept flips; raw label-sorted rows equal to the pipeline's local fit), one with a
paper's settings (a numeric γ: the features are not rescaled, ``GET /models`` says why; with the
stages off the served model is the plain estimator's)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier
from svmstream.solvers.online.selection import SelectionClassifier
from tests.conftest import assert_examples_account


def _flipping_stream(n=8000, seed=0):
    X, y = make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0, random_state=seed)
    X = X * np.array([1.0, 250.0, 0.02, 3.0])  # raw, unscaled
    labels = np.where(y == 1, "spam", "ham")
    labels[n // 2 :] = np.where(y[n // 2 :] == 1, "ham", "spam")  # the concept flips half way
    return X, labels


def _learn(client, model, X, y, batch=500, sent=0):
    """POST /learn of X, y in batches, checking the account after each (``sent``: rows the
    model received before); returns the rows received in all."""
    for lo in range(0, X.shape[0], batch):
        r = client.post(
            "/learn",
            json={"model": model, "X": X[lo : lo + batch].tolist(), "y": y[lo : lo + batch].tolist()},
        )
        assert r.status_code == 200, r.text
        sent += len(y[lo : lo + batch])
        assert_examples_account(client, model, sent)
    return sent


def test_no_settings_user_a_drift_detection_drops_nothing_and_flush_learns_all(start_server):
    server = start_server()
    X, y = _flipping_stream()
    with server.client() as client:
        assert client.put("/models/spam", json={"shuffle_buffer": 3000}).status_code in (200, 201)
        half = X.shape[0] // 2
        sent = _learn(client, "spam", X[:half], y[:half])
        assert assert_examples_account(client, "spam", sent)["pending"] > 0  # the buffer holds rows
        sent = _learn(client, "spam", X[half:], y[half:], sent=sent)
        info = client.get("/models/spam").json()
        # the flip was detected: the default on_drift starts a challenger there (a promoted one
        # is the champion now, with no buffer and detections of its own)
        events = [h["event"] for h in info["promotion"]["history"]]
        assert "drift detected" in events, (info["drift"], events)
        assert info["n_discarded"] == 0
        examples = assert_examples_account(client, "spam", sent)
        assert examples["refused"] == 0
        flushed = client.post("/models/spam/flush").json()["flushed"]
        assert flushed == examples["pending"]
        after = assert_examples_account(client, "spam", sent)
        assert after["pending"] == 0 and after["learned"] == sent
        metrics = client.get("/metrics").text
        assert f'svmstream_examples_received_total{{model="spam"}} {float(sent)}' in metrics
        assert f'svmstream_examples_learned_total{{model="spam"}} {float(sent)}' in metrics


def test_paper_settings_user_gets_their_gamma_on_their_features(start_server):
    server = start_server()
    X, y = _flipping_stream(2000)
    with server.client() as client:
        r = client.put("/models/paper", json={"budget": 50, "gamma": 0.5, "C": 8})
        assert r.status_code in (200, 201), r.text
        _learn(client, "paper", X, y)
        info = client.get("/models/paper").json()
        assert info["scaling"] == "none" and info["gamma_eff"] == 0.5
        assert "gamma" in info["scaling_reason"]
        # C without lambda: bsca, whose C is the box constraint and needs no n; the answer says so
        assert info["algorithm"] == "bsca" and "C was given without lambda" in info["algorithm_reason"]
        assert info["lambda_reason"].startswith("bsca: C = 8 bounds each example's dual coefficient")
        assert info["warming_up"] is False  # nothing to fix from a window: learning starts at once
        client.post("/models/paper/flush")
        assert_examples_account(client, "paper", X.shape[0])
        # bsgd named: C without n_samples says which n it assumed for lambda = 1/(C n), and the way out
        r = client.put("/models/sgd", json={"algorithm": "bsgd", "budget": 50, "gamma": 0.5, "C": 8})
        info = r.json()
        assert info["algorithm"] == "bsgd"  # lambda_eff is shown once it has learned
        assert "n = 30,000 is assumed" in info["lambda_reason"] and "n_samples" in info["lambda_reason"]
        r = client.put(
            "/models/rows", json={"algorithm": "bsgd", "budget": 50, "gamma": 0.5, "C": 8, "n_samples": 2000}
        )
        assert r.json()["lambda_reason"].endswith("C and n_samples given")
        # a setting only bsgd takes (its schedule) selects bsgd; lambda selects bsgd
        for body in ({"C": 8, "schedule": "norma"}, {"lambda": 1e-4}, {"C": 8, "lambda": 1e-4}, {}):
            r = client.put("/models/other", json=body)
            assert r.status_code in (200, 201), r.text
            assert r.json()["algorithm"] == "bsgd", body


def _raw_sorted(n=1500, seed=1):
    X, y = make_classification(n_samples=n, n_features=5, n_informative=3, random_state=seed)
    X = X * np.array([1.0, 400.0, 0.05, 2.0, 1.0])  # raw, unscaled
    order = np.argsort(y, kind="stable")  # a file sorted by label
    return X[order], y[order]


def _decisions(client, model, probe):
    r = client.post("/predict", json={"model": model, "X": probe.tolist()})
    assert r.status_code == 200, r.text
    return np.asarray(r.json()["decision"])


@pytest.mark.parametrize(
    "named, plain_class",
    [(None, BudgetedSCAClassifier), ("bsgd", BudgetedSGDClassifier)],
    ids=["C-bsca", "bsgd"],
)
def test_explicit_settings_with_the_stages_off_are_the_plain_estimator(start_server, named, plain_class):
    """A user's gamma and C through the service, stages switched off: exactly the plain
    estimator's partial_fit over the same rows in the same order (BSCA when C comes without an
    algorithm, BSGD when it is named)."""
    server = start_server()
    X, y = _raw_stream_shuffled()
    settings = {"budget": 40, "gamma": 0.002, "C": 8.0, "n_samples": X.shape[0], "classes": [0, 1]}
    stages_off = {"shuffle_buffer": 0, "rehearsal": 0, "run_guard": False, "on_drift": "none"}
    if named is not None:
        settings["algorithm"] = named
    with server.client() as client:
        assert client.put("/models/plain", json={**settings, **stages_off}).status_code in (200, 201)
        _learn(client, "plain", X, y, batch=97)
        served = _decisions(client, "plain", X[:200])
    plain = plain_class(budget=40, gamma=0.002, C=8.0, n_samples=X.shape[0], random_state=0)
    plain.partial_fit(X, y, classes=[0, 1])
    np.testing.assert_allclose(served, plain.decision_function(X[:200]), rtol=0, atol=1e-12)


def test_no_settings_through_the_service_is_the_pipelines_fit(start_server):
    """No hyperparameters, raw label-sorted rows through HTTP then flush: the same model as
    ``SelectionClassifier(BudgetedSGDClassifier(random_state=0)).fit`` on the same rows (no
    settings: candidates race, ``docs/selection.md``)."""
    server = start_server()
    X, y = _raw_sorted()
    with server.client() as client:
        assert client.put("/models/nosettings", json={}).status_code in (200, 201)
        _learn(client, "nosettings", X, y, batch=250)
        client.post("/models/nosettings/flush")
        assert_examples_account(client, "nosettings", X.shape[0])
        served = _decisions(client, "nosettings", X[::7])
    local = SelectionClassifier(BudgetedSGDClassifier(random_state=0)).fit(X, y)
    np.testing.assert_allclose(served, local.decision_function(X[::7]), rtol=0, atol=1e-12)
    assert np.mean((served > 0) == (y[::7] == 1)) > 0.8  # and it learned, from label-sorted raw rows


def _raw_stream_shuffled(n=1500, seed=2):
    X, y = make_classification(n_samples=n, n_features=5, n_informative=3, random_state=seed)
    return X * np.array([1.0, 400.0, 0.05, 2.0, 1.0]), y
