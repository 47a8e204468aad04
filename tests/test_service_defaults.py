"""The service with no hyperparameters: the defaults,
GET /models' resolved values, warm-up (409) and flush, the size guards, sparse models that
widen, the label-sorted source warning and the numerical overflow rollback."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.config import ModelConfig
from svmstream.app.settings import Settings
from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers._hyperparameters import HYPERPARAMETERS
from tests.conftest import two_moons_like


@pytest.fixture
def client(tmp_path):
    settings = Settings(snapshot_dir=tmp_path / "snap", snapshot_interval_s=3600, warm_up=False)
    with TestClient(create_app(settings)) as c:
        yield c


def _metric(c: TestClient, family: str, sample: str, model: str) -> float:
    families = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
    return next(s.value for s in families[family].samples if s.name == sample and s.labels["model"] == model)


def test_config_and_settings_defaults_follow_the_estimator():
    cfg = ModelConfig()
    assert (cfg.gamma, cfg.C, cfg.lambda_, cfg.n_samples) == ("scale", 1.0, None, None)
    assert (cfg.scaling, cfg.warmup, cfg.shuffle_buffer, cfg.run_guard) == ("auto", 1000, 20_000, True)
    est = StreamingClassifier()  # the service's model: None stands for BudgetedSGDClassifier()
    assert est.estimator is None
    assert (BudgetedSGDClassifier().gamma, est.scaling, est.warmup, est.shuffle_buffer, est.run_guard) == (
        cfg.gamma,
        cfg.scaling,
        cfg.warmup,
        cfg.shuffle_buffer,
        cfg.run_guard,
    )
    defaults = Settings().model_defaults()
    # where the table gives the server its own default (random_state 0, on_drift challenger),
    # the settings say that; every other default is the model's
    own = {h.json_name: h.default for h in HYPERPARAMETERS if h.server_default != h.default}
    assert {k: defaults[k] for k in own} == {"random_state": 0, "on_drift": "challenger"}
    assert ModelConfig.model_validate({**defaults, **own}) == ModelConfig()
    assert Settings(default_gamma="0.5").model_defaults()["gamma"] == 0.5


def test_readme_walkthrough_warm_up_409_then_flush(client):
    """The README's warm-up walkthrough, on the default model: λ = 1/30,000, warming up with 3
    pending, 409, flush, predict (the README's own commands: tests/test_readme.py)."""
    r = client.post("/learn", json={"X": [[0.0, 1.0], [1.0, 0.0], [0.9, 0.1]], "y": [1, -1, -1]})
    assert r.status_code == 200 and r.json()["buffered"] == 3 and r.json()["n_seen"] == 3
    info = client.get("/models/default").json()
    assert info["lambda_eff"] == pytest.approx(1 / 30_000) and info["warming_up"] and info["pending"] == 3
    assert info["gamma_eff"] is None and info["scaling"] is None and info["n_replayed"] == 0
    r = client.post("/predict", json={"X": [[0.2, 0.8]]})
    assert r.status_code == 409
    assert "warming up: 3 of 1000 examples received" in r.json()["detail"]
    assert "/models/default/flush" in r.json()["detail"]
    r = client.post("/models/default/flush")
    assert r.status_code == 200 and r.json()["flushed"] == 3 and r.json()["buffered"] == 0
    info = client.get("/models/default").json()
    assert not info["warming_up"] and info["pending"] == 0 and info["scaling"] == "maxabs"
    # no settings: candidates race (docs/selection.md); the stream ended inside the window, so
    # the window candidate serves: each row's own step, then 19 passes over the 3 rows
    assert info["gamma_eff"] > 0 and info["t"] == 60
    assert info["statistics"]["rehearsal_steps"] == 57 and info["n_seen"] == 3
    assert info["config"]["selection"] and len(info["statistics"]["selection"]["candidates"]) == 5
    pred = client.post("/predict", json={"X": [[0.2, 0.8], [0.9, 0.0]]}).json()
    assert len(pred["labels"]) == 2 and all(np.isfinite(pred["decision"]))
    assert client.post("/models/nope/flush").status_code == 404


def test_flush_of_a_batch_trained_model_is_409(client):
    registry = client.app.state.registry
    registry.create("batch", ModelConfig(algorithm="dcsvm", classes=[0, 1]))
    r = client.post("/models/batch/flush")
    assert r.status_code == 409 and "batch job" in r.json()["detail"]


def test_defaults_learn_a_good_model_without_settings(client):
    """Features on scales 1 and 1000, no hyperparameters: after the window, λ = 1/30,000, γ from
    the data, max-abs scaling; the model beats the majority rate by far."""
    X, y = two_moons_like(3000, d=4, seed=1)
    X = X * np.array([1.0, 1000.0, 1.0, 1000.0])
    for start in range(0, 2500, 250):
        r = client.post(
            "/learn", json={"X": X[start : start + 250].tolist(), "y": y[start : start + 250].tolist()}
        )
        assert r.status_code == 200
    client.post("/models/default/flush")
    pred = client.post("/predict", json={"X": X[2500:].tolist()}).json()
    accuracy = np.mean(np.asarray(pred["labels"]) == y[2500:])
    majority = max(np.mean(y[2500:] == 1), np.mean(y[2500:] == -1))
    assert accuracy >= majority + 0.15, (accuracy, majority)
    info = client.get("/models/default").json()
    assert info["config"]["gamma"] == "scale" and info["gamma_eff"] != 1.0
    assert info["metrics"]["prequential_accuracy"] > majority


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"budget": 10**12}, "budget", "max_budget = 100000"),
        ({"C": 1e300}, "C", "less than or equal to 10000000000"),
        ({"lambda": 1e-300}, "lambda", "greater than or equal to 0.000000000001"),
        ({"C": 1e10}, "C", "lambda = 1/(C n) = 3.33e-15 < 1e-12"),
        ({"n_features": 10**9}, "n_features", "max_features = 1048576"),
        ({"n_features": 10**5, "sv_storage": "dense"}, "n_features", "over max_model_bytes = 256 MiB"),
    ],
)
def test_model_creation_over_a_guard_is_422_naming_the_field(client, body, field, words):
    r = client.put("/models/big", json=body)
    assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["detail"], r.text
    assert r.json()["detail"].startswith(f"{field}: ")
    assert client.get("/models/big").status_code == 404


def test_guards_refuse_before_allocating_and_predictions_stay_finite(client):
    rss = psutil.Process().memory_info().rss
    for body in ({"budget": 10**12}, {"C": 1e300}, {"lambda": 1e-300}):
        assert client.put("/models/g", json=body).status_code == 422
    r = client.post("/learn", json={"X": [{"0": 1.0}, {"1000000000": 1.0}], "y": [1, -1]})
    assert r.status_code == 422 and r.json()["field"] == "X[1]" and "max_features" in r.json()["detail"]
    # dense support vectors: (B + 1) x d x 8 bytes (sparse ones, "auto" for such rows, count nonzeros)
    assert client.put("/models/wide", json={"sv_storage": "dense"}).status_code == 201
    r = client.post("/learn", json={"model": "wide", "X": [{"0": 1.0}, {"100000": 1.0}], "y": [1, -1]})
    detail = r.json()["detail"]
    assert r.status_code == 422 and r.json()["field"] == "X[1]", r.text
    assert "budget 500" in detail and "MB" in detail and "max_model_bytes = 256 MiB" in detail
    estimate = float(detail.split("estimated ")[1].split(" MB")[0].replace(",", ""))
    assert estimate > 400  # 501 x 100,001 x 8 bytes of SVs alone
    assert client.get("/models/wide").json()["n_features"] is None  # nothing was fixed
    # a model near the largest C allowed with the default n (lambda = 1/(3e7 * 30,000) ~ 1.1e-12 >= 1e-12), fed huge raw features
    cfg = {"C": 3e7, "scaling": "none", "gamma": 1e-3, "warmup": 0, "shuffle_buffer": 0}
    assert client.put("/models/edge", json=cfg).status_code == 201
    X, y = two_moons_like(400, d=3, seed=2)
    for scale in (1.0, 1e100, 1e150):
        client.post("/learn", json={"model": "edge", "X": (X * scale).tolist(), "y": y.tolist()})
        pred = client.post("/predict", json={"model": "edge", "X": (X[:20] * scale).tolist()})
        assert pred.status_code == 200 and "null" not in pred.text and None not in pred.json()["decision"]
    assert psutil.Process().memory_info().rss - rss < 50 * 2**20


def test_a_batch_that_overflows_is_rolled_back_422_and_counted(client, monkeypatch):
    partial_fit = StreamingClassifier.partial_fit  # the service's model

    def exploding(self, X, y, classes=None):
        partial_fit(self, X, y, classes)
        if X.shape[0] == 7:  # the poisoned batch
            self.model_._coef[: self.n_support_vectors_] = np.inf
        return self

    monkeypatch.setattr(StreamingClassifier, "partial_fit", exploding)
    assert client.put("/models/x", json={"warmup": 0, "shuffle_buffer": 0}).status_code == 201
    X, y = two_moons_like(107, d=3, seed=3)
    assert (
        client.post("/learn", json={"model": "x", "X": X[:100].tolist(), "y": y[:100].tolist()}).status_code
        == 200
    )
    before = client.get("/models/x").json()
    pred_before = client.post("/predict", json={"model": "x", "X": X[:5].tolist()}).json()
    r = client.post("/learn", json={"model": "x", "X": X[100:].tolist(), "y": y[100:].tolist()})
    assert r.status_code == 422 and r.json()["detail"].startswith("numerical overflow: "), r.text
    after = client.get("/models/x").json()
    assert after["version"] == before["version"] and after["n_seen"] == before["n_seen"] == 100
    assert client.post("/predict", json={"model": "x", "X": X[:5].tolist()}).json() == pred_before
    assert after["metrics"]["numerical_overflows"] == 1
    assert _metric(client, "svmstream_numerical_overflow", "svmstream_numerical_overflow_total", "x") == 1


def test_sparse_models_widen_dense_ones_do_not(client):
    """Sparse rows widen a model up to max_features (a9a in file order grows at row 430);
    dense rows and a declared n_features fix d."""
    rng = np.random.default_rng(5)
    rows = [{str(j): 1.0 for j in rng.choice(10 + i // 10, 3, replace=False)} for i in range(300)]
    labels = [1 if int(next(iter(r))) % 2 else -1 for r in rows]
    assert client.put("/models/sp", json={"warmup": 50, "shuffle_buffer": 100}).status_code == 201
    widths = []
    for start in range(0, 300, 50):
        r = client.post(
            "/learn", json={"model": "sp", "X": rows[start : start + 50], "y": labels[start : start + 50]}
        )
        assert r.status_code == 200, r.text
        widths.append(client.get("/models/sp").json()["n_features"])
    assert widths == sorted(widths) and widths[-1] > widths[0] and widths[-1] <= 40
    info = client.get("/models/sp").json()
    assert not info["n_features_fixed"] and info["n_seen"] == 300
    pred = client.post("/predict", json={"model": "sp", "X": rows[:10]})
    assert pred.status_code == 200 and len(pred.json()["labels"]) == 10
    # a declared dimension fixes d: the same rows beyond it are refused
    assert client.put("/models/fixed", json={"n_features": 12}).status_code == 201
    r = client.post("/learn", json={"model": "fixed", "X": [{"20": 1.0}], "y": [1]})
    assert r.status_code == 422 and "out of range" in r.json()["detail"]
    # dense rows fix d as well
    assert client.post("/learn", json={"X": [[0.0, 1.0], [1.0, 0.0]], "y": [1, -1]}).status_code == 200
    r = client.post("/learn", json={"X": [{"5": 1.0}], "y": [1]})
    assert r.status_code == 422 and r.json()["detail"].startswith("X[0]: feature index 5 is out of range")


def test_a_label_sorted_source_is_reported(client, caplog):
    X, _ = two_moons_like(2500, d=3, seed=4)
    y = np.array([-1] * 1200 + [1] * 1300)
    with caplog.at_level(logging.WARNING, logger="svmstream.registry"):
        for start in range(0, 2500, 500):
            r = client.post(
                "/learn", json={"X": X[start : start + 500].tolist(), "y": y[start : start + 500].tolist()}
            )
            assert r.status_code == 200
    warnings_ = [rec.getMessage() for rec in caplog.records if "sorted by label" in rec.getMessage()]
    assert len(warnings_) == 2, warnings_
    assert (
        "shuffle buffer and the run guard compensate" in warnings_[0]
        and "shuffling the source" in warnings_[0]
    )
    metrics = client.get("/models/default").json()["metrics"]
    assert metrics["single_label_runs"] == 2 and metrics["single_label_run"] == 1300
    assert _metric(client, "svmstream_single_label_run", "svmstream_single_label_run", "default") == 1300
    assert _metric(client, "svmstream_single_label_runs", "svmstream_single_label_runs_total", "default") == 2
