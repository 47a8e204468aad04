"""Learning metrics: prequential accuracy and rates against direct computations, the
Prometheus exposition at /metrics and the metrics in GET /models/{name}."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.meters import PrequentialWindow, RateMeter, correct_predictions
from svmstream.app.settings import Settings
from tests.conftest import two_moons_like


def test_prequential_window_equals_the_mean_of_the_last_w_outcomes():
    rng = np.random.default_rng(0)
    window = PrequentialWindow(50)
    history: list[bool] = []
    assert window.accuracy() is None
    for size in [1, 7, 49, 50, 3, 120, 0, 33, 17, 1, 64]:
        outcomes = rng.random(size) < 0.7
        window.add(outcomes)
        history.extend(outcomes.tolist())
        last = history[-50:]
        if last:
            assert window.count() == len(last)
            assert window.accuracy() == pytest.approx(np.mean(last), abs=1e-15)
    assert window.total == len(history) and window.total_correct == sum(history)


def test_correct_predictions_binary_and_multiclass():
    np.testing.assert_array_equal(
        correct_predictions(np.array([0.5, -0.2, 0.0, 2.0]), np.array([1, 0, 1, 0])),
        [True, True, False, False],
    )
    margins = np.array([[0.1, 0.9, 0.0], [2.0, 1.0, -1.0]])
    np.testing.assert_array_equal(correct_predictions(margins, np.array([1, 2])), [True, False])


def test_rate_meter_averages_over_the_window():
    now = [100.0]
    meter = RateMeter(window_s=10.0, clock=lambda: now[0])
    for _ in range(10):  # 1,000 examples per second for 10 s
        now[0] += 1.0
        meter.add(1000)
    assert meter.rate() == pytest.approx(1000.0)
    now[0] += 5.0  # idle for 5 s: half the window is empty
    assert meter.rate() == pytest.approx(500.0)
    assert meter.rate_at_last() == pytest.approx(1000.0)  # what GET /models shows: stable while idle
    now[0] += 20.0
    assert meter.rate() == 0.0


@pytest.fixture(scope="module")
def app_client(tmp_path_factory):
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("snap"),
        snapshot_interval_s=3600,
        warm_up=False,
        metrics_window=300,
        create_default_model=False,
    )
    with TestClient(create_app(settings)) as c:
        yield c


# the raw step (no warm-up window, buffer or guard): each request's rows are the rows learned
RAW = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}
CFG = {"budget": 25, "gamma": 1.0, "C": 10.0, "n_samples": 1000, "random_state": 0, **RAW}


def test_prequential_accuracy_and_prometheus_metrics_match_a_direct_computation(app_client):
    c = app_client
    assert c.put("/models/pm", json=CFG).status_code == 201
    X, y = two_moons_like(1000, d=5, seed=4)
    est = make_estimator(ModelConfig.model_validate({**CFG, "classes": [-1, 1]}))
    outcomes = []
    for start in range(0, 1000, 100):
        Xb, yb = X[start : start + 100], y[start : start + 100]
        assert c.post("/learn", json={"model": "pm", "X": Xb.tolist(), "y": yb.tolist()}).status_code == 200
        idx = (yb == 1).astype(np.int64)
        est.partial_fit(Xb, idx, classes=np.arange(2))
        # f(x) of each example before its own step, recomputed from the model of the step before
        outcomes.extend(correct_predictions(est.last_margins_, idx).tolist())
    for _ in range(3):
        assert c.post("/predict", json={"model": "pm", "X": X[:10].tolist()}).status_code == 200
    expected = float(np.mean(outcomes[-300:]))
    info = c.get("/models/pm").json()
    metrics = info["metrics"]
    assert metrics["prequential_accuracy"] == pytest.approx(expected, abs=1e-12)
    assert metrics["prequential_window"] == 300 and metrics["examples_applied"] == 1000
    assert metrics["applied_per_s"] > 0 and "stream" not in metrics  # no Redis configured
    stats = est.statistics()
    assert info["n_merges"] == stats["merges"] > 0
    assert info["merging_frequency"] == pytest.approx(stats["merging_frequency"])
    assert info["average_weight_degradation"] == pytest.approx(stats["average_weight_degradation"])
    assert info == c.get("/models/pm").json()  # an idle model reads the same twice

    response = c.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}

    def value(family: str, sample: str | None = None, **labels) -> float:
        for s in families[family].samples:
            if (sample is None or s.name == sample) and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        raise KeyError((family, labels))

    assert value("svmstream_examples_applied", "svmstream_examples_applied_total", model="pm") == 1000
    assert value("svmstream_prequential_accuracy", model="pm") == pytest.approx(expected, abs=1e-12)
    assert value("svmstream_support_vectors", model="pm") == info["n_support_vectors"]
    assert value("svmstream_merges", "svmstream_merges_total", model="pm") == stats["merges"]
    assert value("svmstream_snapshot_age_seconds", model="pm") >= 0  # snapshotted at creation
    assert (
        value(
            "svmstream_request_latency_seconds",
            "svmstream_request_latency_seconds_count",
            route="learn",
            model="pm",
        )
        == 10
    )
    assert (
        value(
            "svmstream_request_latency_seconds",
            "svmstream_request_latency_seconds_count",
            route="predict",
            model="pm",
        )
        == 3
    )
    assert "svmstream_stream_lag_entries" not in {s.name for f in families.values() for s in f.samples}


def test_prequential_accuracy_with_the_defaults_scores_the_examples_actually_learned(app_client):
    """With the warm-up window and the shuffle buffer, a request's rows are not the rows its
    partial_fit learns: the service scores last_margins_ against last_y_ (the learned ones)."""
    c = app_client
    cfg = {"budget": 25, "random_state": 0, "warmup": 200, "shuffle_buffer": 300}
    assert c.put("/models/pd", json=cfg).status_code == 201
    X, y = two_moons_like(1500, d=5, seed=5)
    est = make_estimator(ModelConfig.model_validate({**cfg, "classes": [-1, 1]}))
    outcomes = []
    for start in range(0, 1500, 100):
        Xb, yb = X[start : start + 100], y[start : start + 100]
        r = c.post("/learn", json={"model": "pd", "X": Xb.tolist(), "y": yb.tolist()})
        est.partial_fit(Xb, (yb == 1).astype(np.int64), classes=np.arange(2))
        assert r.status_code == 200 and r.json()["buffered"] == est.n_pending_
        outcomes.extend(correct_predictions(est.last_margins_, est.last_y_).tolist())
    assert 0 < len(outcomes) < 1500  # the buffer still holds some
    metrics = c.get("/models/pd").json()["metrics"]
    assert metrics["prequential_accuracy"] == pytest.approx(float(np.mean(outcomes[-300:])), abs=1e-12)
    assert metrics["prequential_accuracy"] > 0.7
