"""Regression and novelty models through the real service (issue 38): ``PUT`` with ``task``,
``/learn`` with numeric ``y`` or none, ``/predict`` values and intervals or scores and outlier flags,
``GET /models/{name}`` figures, refusals naming the field, and a restart that gives back the same
model (a uvicorn process, raw unscaled features and targets as users send them)."""

from __future__ import annotations

import numpy as np
import pytest

from svmstream.app.ingest.targets import CODECS
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.registry import Registry
from svmstream.app.models.task_outputs import TASK_OUTPUTS
from svmstream.app.settings import Settings
from svmstream.solvers._hyperparameters import TASKS
from tests.conftest import assert_examples_account

ENV = {"SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600", "SVMSTREAM_WARM_UP": "false"}


def friedman(n: int, seed: int = 0):
    """scikit-learn's Friedman #1 on raw scales: features in [0, 1] x 1000 and a target x 250
    plus an offset of 10,000 (the model must scale both itself)."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n, n_features=6, noise=0.5, random_state=seed)
    return X * 1000.0, y * 250.0 + 10_000.0


def blobs(n: int, seed: int = 0):
    """Inliers: a correlated Gaussian in 4 raw dimensions (means 100, scales 1..50)."""
    rng = np.random.default_rng(seed)
    return 100.0 + rng.normal(size=(n, 4)) * np.array([1.0, 5.0, 20.0, 50.0])


def post_rows(c, name: str, X, y=None, batch: int = 250) -> None:
    for start in range(0, X.shape[0], batch):
        body = {"model": name, "X": X[start : start + batch].tolist()}
        if y is not None:
            body["y"] = y[start : start + batch].tolist()
        r = c.post("/learn", json=body)
        assert r.status_code == 200, r.text


def refused(r, field: str) -> str:
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    return r.json()["detail"]


@pytest.mark.parametrize("task", TASKS)
def test_each_task_chooses_its_model_codec_and_output_once(task, tmp_path):
    """The factory makes a model of the configuration's task: its declared ``TASK`` keys the
    output (meters, answers) and the codec of ``y`` (no type switch in the service)."""
    registry = Registry(Settings(snapshot_dir=tmp_path, warm_up=False), None)
    config = registry.resolve_config({"task": task})
    est = make_estimator(config)
    assert est.TASK == config.task == task
    assert TASK_OUTPUTS[est.TASK].task == task
    assert est.HAS_CLASSES == (task == "classification") == (task not in CODECS)


def test_regression_over_http_values_intervals_figures_refusals_and_restart(start_server, tmp_path):
    X, y = friedman(3000)
    Xt, yt = friedman(1000, seed=1)
    snap = tmp_path / "snap"
    server = start_server(snap, use_uvicorn=True, env=ENV)
    with server.client() as c:
        refused(c.put("/models/r", json={"task": "regresion"}), "task")
        refused(c.put("/models/r", json={"task": "regression", "shuffle_buffer": 10}), "shuffle_buffer")
        # the race varies gamma: a gamma given with selection is refused, naming selection
        refused(c.put("/models/r", json={"task": "regression", "selection": True, "gamma": 0.3}), "selection")
        refused(c.put("/models/r", json={"task": "regression", "scaling": "maxabs"}), "scaling")
        r = c.put("/models/plain", json={"task": "regression", "C": 1.0})  # a setting: one pipeline
        assert r.status_code == 201 and r.json()["config"]["selection"] is False, r.text
        assert r.json()["kind"].startswith("ε-SVR regression: BSCA pipeline")
        r = c.put("/models/r", json={"task": "regression"})  # no settings: the race of gamma
        assert r.status_code == 201, r.text
        info = r.json()
        assert info["task"] == "regression" and info["config"]["selection"] is True
        assert (
            info["kind"] == "ε-SVR regression: selection of 2 candidates (warm-up window open: 200 examples)"
        )
        post_rows(c, "r", X, y)
        race = c.get("/models/r").json()["statistics"]["selection"]
        assert len(race["rungs"]) == 1 and len(race["rungs"][0]["kept"]) == 1  # one rung at 2,000 learned
        won = race["candidates"][race["leader"]]["settings"]["gamma_factor"]
        assert (
            c.get("/models/r").json()["kind"]
            == f"ε-SVR regression: selection won by {won:g} × scale over 2 candidates"
        )
        # a string target, a boolean, an infinite number, an interval out of range: 422 naming it
        assert "not a number" in refused(
            c.post("/learn", json={"model": "r", "X": X[:3].tolist(), "y": [1.5, "3.5", 2]}), "y[1]"
        )
        refused(c.post("/learn", json={"model": "r", "X": X[:2].tolist(), "y": [True, 1]}), "y[0]")
        body = '{"model": "r", "X": [[1,2,3,4,5,6]], "y": [1e999]}'
        r = c.post("/learn", content=body, headers={"content-type": "application/json"})
        assert r.status_code in (400, 422) and "y" in r.json()["field"], r.text
        refused(c.post("/learn", json={"model": "r", "X": X[:2].tolist()}), "y")
        refused(c.post("/predict", json={"model": "r", "X": Xt[:2].tolist(), "interval": 1.5}), "interval")
        refused(c.post("/predict", json={"model": "r", "X": Xt[:2].tolist(), "proba": True}), "proba")

        answer = c.post("/predict", json={"model": "r", "X": Xt.tolist(), "interval": 0.9}).json()
        values, lower, upper = (np.asarray(answer[k]) for k in ("values", "lower", "upper"))
        assert "labels" not in answer and answer["interval"] == 0.9
        assert np.all(lower <= values) and np.all(values <= upper)
        rmse = float(np.sqrt(np.mean((values - yt) ** 2)))
        assert rmse < 0.5 * float(np.std(yt)), rmse  # it learned the target on its raw scale
        coverage = float(np.mean((lower <= yt) & (yt <= upper)))
        assert 0.8 <= coverage <= 0.98, coverage

        info = c.get("/models/r").json()
        metrics = info["metrics"]
        assert info["task"] == "regression" and metrics["prequential_window"] == 3000
        assert 0 < metrics["prequential_mae"] <= metrics["prequential_rmse"]
        assert 0.7 <= metrics["prequential_coverage_90"] <= 1.0
        assert metrics["interval_90_half_width"] > 0 and metrics["recent_mae"] > 0
        assert info["statistics"]["merges"] > 0 or info["n_support_vectors"] <= 500
        assert_examples_account(c, "r", sent=3000)
    server.terminate()

    server = start_server(snap, use_uvicorn=True, env=ENV)
    with server.client() as c:
        again = c.post("/predict", json={"model": "r", "X": Xt.tolist(), "interval": 0.9}).json()
        for key in ("values", "lower", "upper"):
            np.testing.assert_array_equal(np.asarray(again[key]), np.asarray(answer[key]))
        # it learns on after the restart exactly as the model that never stopped would
        post_rows(c, "r", X[:500], y[:500])
        after = np.asarray(c.post("/predict", json={"model": "r", "X": Xt.tolist()}).json()["values"])
        assert_examples_account(c, "r", sent=3500)
    server.terminate()
    registry = Registry(Settings(snapshot_dir=tmp_path / "plain", warm_up=False), None)
    ref = make_estimator(registry.resolve_config({"task": "regression"}))
    ref.partial_fit(np.vstack([X, X[:500]]), np.concatenate([y, y[:500]]))
    np.testing.assert_array_equal(after, ref.predict(Xt))


def test_novelty_over_http_rows_without_y_scores_outliers_evaluation_labels_and_restart(
    start_server, tmp_path
):
    X = blobs(3000)
    snap = tmp_path / "snap"
    server = start_server(snap, use_uvicorn=True, env=ENV)
    with server.client() as c:
        refused(c.put("/models/n", json={"task": "novelty", "algorithm": "bsca"}), "algorithm")
        refused(c.put("/models/n", json={"task": "novelty", "C": 5}), "C")
        refused(c.put("/models/n", json={"task": "novelty", "selection": True}), "selection")  # no labels
        r = c.put("/models/n", json={"task": "novelty"})
        assert r.status_code == 201, r.text
        assert r.json()["kind"].startswith("ν one-class SVM novelty")
        post_rows(c, "n", X[:2500])
        # evaluation labels: 0/1 only (JSON integers), never learned as targets
        labels = np.zeros(500, dtype=np.int64)
        post_rows(c, "n", X[2500:], labels)
        assert "evaluation label" in refused(
            c.post("/learn", json={"model": "n", "X": X[:2].tolist(), "y": [0, 2]}), "y[1]"
        )
        refused(c.post("/learn", json={"model": "n", "X": X[:2].tolist(), "y": ["a", 0]}), "y[0]")
        refused(c.post("/learn", json={"model": "n", "X": X[:2].tolist(), "y": [1.0, 0]}), "y[0]")
        refused(c.post("/predict", json={"model": "n", "X": X[:2].tolist(), "interval": 0.9}), "interval")

        far = 100.0 + 8 * np.array([[1.0, 5.0, 20.0, 50.0]])
        held = blobs(2000, seed=7)
        probe = np.vstack([held, far])
        answer = c.post("/predict", json={"model": "n", "X": probe.tolist()}).json()
        scores, outlier = np.asarray(answer["scores"]), np.asarray(answer["outlier"])
        assert "labels" not in answer and outlier.dtype == bool
        np.testing.assert_array_equal(outlier, scores > answer["threshold"])
        assert outlier[-1] and scores[-1] > np.max(scores[:-1]) - 1e-12
        false_alarm = float(np.mean(outlier[:-1]))
        assert 0.01 <= false_alarm <= 0.12, false_alarm  # the 5 % threshold on held inliers

        info = c.get("/models/n").json()
        metrics = info["metrics"]
        assert info["task"] == "novelty" and metrics["prequential_window"] == 3000
        assert 0.0 <= metrics["prequential_outlier_rate"] <= 0.2
        assert metrics["threshold"] == answer["threshold"] and metrics["false_alarm"] == 0.05
        assert metrics["evaluation_outliers_flagged"] is None  # no row was labelled 1
        assert 0.0 <= metrics["evaluation_inliers_flagged"] <= 0.2
        assert_examples_account(c, "n", sent=3000)
    server.terminate()

    server = start_server(snap, use_uvicorn=True, env=ENV)
    with server.client() as c:
        again = c.post("/predict", json={"model": "n", "X": probe.tolist()}).json()
        np.testing.assert_array_equal(np.asarray(again["scores"]), scores)
        assert again["outlier"] == answer["outlier"] and again["threshold"] == answer["threshold"]
    server.terminate()


def test_with_the_stages_off_the_service_equals_the_plain_estimator(start_server):
    """Explicit settings with warm-up, scaling and rehearsal off: the service's predictions are the
    plain estimator's with the same settings fed the same batches (max |Δ| <= 1e-12)."""
    from svmstream.solvers import BudgetedOneClassSVM, BudgetedSCARegressor

    X, y = friedman(3000, seed=5)
    X = X / 1000.0
    off = {"warmup": 0, "scaling": "none", "rehearsal": 0, "budget": 60, "gamma": 0.5, "merge_solver": "gss"}
    server = start_server(use_uvicorn=True, env=ENV)
    with server.client() as c:
        assert (
            c.put("/models/r", json={"task": "regression", "C": 2.0, "epsilon": 0.05, **off}).status_code
            == 201
        )
        assert c.put("/models/n", json={"task": "novelty", "nu": 0.3, **off}).status_code == 201
        post_rows(c, "r", X, y, batch=500)
        post_rows(c, "n", X, batch=500)
        probe = X[:300] * 0.95
        values = np.asarray(c.post("/predict", json={"model": "r", "X": probe.tolist()}).json()["values"])
        scores = np.asarray(c.post("/predict", json={"model": "n", "X": probe.tolist()}).json()["scores"])
    server.terminate()
    regressor = BudgetedSCARegressor(budget=60, gamma=0.5, C=2.0, epsilon=0.05, random_state=0)
    novelty = BudgetedOneClassSVM(budget=60, gamma=0.5, nu=0.3, random_state=0)
    for lo in range(0, 3000, 500):
        regressor.partial_fit(X[lo : lo + 500], y[lo : lo + 500])
        novelty.partial_fit(X[lo : lo + 500])
    assert float(np.max(np.abs(values - regressor.predict(probe)))) <= 1e-12
    assert float(np.max(np.abs(scores + novelty.decision_function(probe)))) <= 1e-12
