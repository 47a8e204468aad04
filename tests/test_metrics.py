"""Learning metrics: prequential accuracy and rates against direct computations, the
Prometheus exposition at /metrics and the metrics in GET /models/{name}."""

from __future__ import annotations

import time
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
CFG = {
    "algorithm": "bsgd",
    "budget": 25,
    "gamma": 1.0,
    "C": 10.0,
    "n_samples": 1000,
    "random_state": 0,
    **RAW,
}


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


# ----------------------------------------------------------------- /metrics with many models


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _sample(families: dict, family: str, sample: str, **labels) -> float | None:
    for s in families[family].samples if family in families else ():
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_metrics_count_requests_by_route_template_and_show_process_figures(start_server, breast_cancer):
    """A real server: raw paths collapse into their route templates (bounded label values),
    statuses are counted as answered, and prometheus-client's process collector is there."""
    X, y = breast_cancer
    server = start_server(use_uvicorn=True, env={"SVMSTREAM_WARM_UP": "false"})
    with server.client() as c:
        assert c.put("/models/bc", json={"warmup": 50}).status_code == 201
        assert (
            c.post("/learn", json={"model": "bc", "X": X[:300].tolist(), "y": y[:300].tolist()}).status_code
            == 200
        )
        for i in range(20):  # 20 distinct raw paths, one template
            assert c.get(f"/models/missing-{i}").status_code == 404
        assert c.get("/models/bc").status_code == 200
        for i in range(5):
            assert c.get(f"/no/such/path/{i}").status_code == 404
        assert c.post("/learn", content=b"x=1", headers={"content-type": "text/plain"}).status_code == 415
        fam = _families(c.get("/metrics").text)
    total = "svmstream_http_requests_total"
    assert (
        _sample(fam, "svmstream_http_requests", total, route="/models/{name}", method="GET", status="404")
        == 20
    )
    assert (
        _sample(fam, "svmstream_http_requests", total, route="/models/{name}", method="GET", status="200")
        == 1
    )
    assert (
        _sample(fam, "svmstream_http_requests", total, route="/models/{name}", method="PUT", status="201")
        == 1
    )
    assert _sample(fam, "svmstream_http_requests", total, route="/learn", method="POST", status="200") == 1
    assert _sample(fam, "svmstream_http_requests", total, route="/learn", method="POST", status="415") == 1
    assert (
        _sample(fam, "svmstream_http_requests", total, route="<unmatched>", method="GET", status="404") == 5
    )
    routes = {s.labels["route"] for s in fam["svmstream_http_requests"].samples}
    assert not any("missing-" in r or "/no/such" in r for r in routes), routes  # no raw paths
    assert _sample(fam, "process_resident_memory_bytes", "process_resident_memory_bytes") > 50e6
    assert _sample(fam, "process_open_fds", "process_open_fds") > 0
    assert _sample(fam, "process_cpu_seconds", "process_cpu_seconds_total") > 0
    # learning and snapshot failures are exposed per model, 0 while nothing failed
    assert _sample(fam, "svmstream_learning_failures", "svmstream_learning_failures_total", model="bc") == 0
    assert _sample(fam, "svmstream_snapshot_failures", "svmstream_snapshot_failures_total", model="bc") == 0


def test_snapshot_failures_are_counted(start_server, breast_cancer, tmp_path):
    """The model's snapshot directory replaced by a file: every periodic snapshot fails;
    the server keeps learning and /metrics counts the failures."""
    X, y = breast_cancer
    snap = tmp_path / "snaps"
    server = start_server(
        snapshot_dir=snap,
        use_uvicorn=True,
        env={"SVMSTREAM_WARM_UP": "false", "SVMSTREAM_SNAPSHOT_INTERVAL_S": "0.2"},
    )
    with server.client() as c:
        assert c.put("/models/sf", json={"warmup": 50}).status_code == 201
        model_dir = snap / "sf"
        assert model_dir.is_dir()
        for f in model_dir.iterdir():
            f.unlink()
        model_dir.rmdir()
        model_dir.write_bytes(b"not a directory")
        failures = 0
        for start in range(0, 500, 100):
            r = c.post(
                "/learn",
                json={
                    "model": "sf",
                    "X": X[start : start + 100].tolist(),
                    "y": y[start : start + 100].tolist(),
                },
            )
            assert r.status_code == 200, r.text
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                fam = _families(c.get("/metrics").text)
                now = _sample(
                    fam, "svmstream_snapshot_failures", "svmstream_snapshot_failures_total", model="sf"
                )
                if now > failures:
                    failures = now
                    break
                time.sleep(0.1)
        assert failures >= 5, failures  # one failed write per changed version at least
        assert c.get("/models/sf").json()["n_seen"] == 500
        # a create whose first snapshot cannot be written: a 500 in the service's error body
        (snap / "blocked").write_bytes(b"not a directory")
        r = c.put("/models/blocked", json={})
        assert r.status_code == 500, r.text
        assert r.json() == {
            "detail": "internal error: FileExistsError; see the server log",
            "field": None,
            "index": None,
        }
    assert "snapshot failed" in server.log_text()


def test_learning_failures_are_counted_and_the_model_rolled_back():
    """A learner step whose real estimator raises (rows of another width given straight to
    partial_fit, past the handle's checks): counted, and the model is as before."""
    from svmstream.app.models.registry import Registry
    from svmstream.app.observability.prometheus import build_registry

    settings = Settings(snapshot_dir="/nonexistent-unused", warm_up=False, create_default_model=False)
    registry = Registry(settings, None)
    handle, _ = registry.create(
        "lf", registry.resolve_config({**RAW, "budget": 10, "classes": [0, 1]}), snapshot=False
    )
    X, y = two_moons_like(200, d=4, seed=1)
    handle.submit(X, (y == 1).astype(np.int64)).result()
    before = (handle.view.version, handle.view.stats["n_seen"])

    def bad_step(est):  # the estimator itself refuses 7 features after learning 4
        est.partial_fit(np.ones((3, 7)), np.array([0, 1, 0]))

    with handle._lock:
        future = handle._queue(handle._learn_step, bad_step, None, 3)
    with pytest.raises(ValueError):
        future.result()
    assert (handle.view.version, handle.view.stats["n_seen"]) == before
    prom, _ = build_registry(lambda: registry)
    from prometheus_client import generate_latest

    fam = _families(generate_latest(prom).decode())
    assert _sample(fam, "svmstream_learning_failures", "svmstream_learning_failures_total", model="lf") == 1
    handle.submit(X[:50], (y[:50] == 1).astype(np.int64)).result()  # and it still learns
    assert handle.view.stats["n_seen"] == before[1] + 50
    registry.close()


def test_the_direct_rendering_writes_what_generate_latest_writes():
    """/metrics renders the per-model families itself (fast with 1,000 models); the text must
    be the bytes prometheus-client's generate_latest writes for the same families (the two
    time-dependent families, applied/s and snapshot age, are compared by name only)."""
    from prometheus_client import generate_latest

    from svmstream.app.models.registry import Registry
    from svmstream.app.observability.prometheus import build_registry

    registry = Registry(Settings(warm_up=False, create_default_model=False), None)
    X, y = two_moons_like(300, d=4, seed=2)
    for i, cfg in enumerate(({**RAW, "budget": 10}, {"budget": 10, "warmup": 100}, {**RAW, "budget": 10})):
        handle, _ = registry.create(
            f"r{i}", registry.resolve_config({**cfg, "classes": [-1, 1]}), snapshot=False
        )
        if i < 2:
            handle.submit(X, (y == 1).astype(np.int64)).result()
    registry.get("r0").last_snapshot_time = 1.0
    prom, requests = build_registry(lambda: registry)
    for seconds in (0.0001, 0.003, 0.003, 0.2, 7.5, 30.0):  # every bucket region, +Inf included
        requests.observe("learn", "r0", seconds)
    requests.observe("predict", 'odd "name"\\', 0.01)  # label escaping (names never need it)
    requests.requests.labels(route="/learn", method="POST", status="200").inc()

    class ServiceOnly:
        def collect(self):
            return prom.service.collect()

    timed = (b"svmstream_examples_applied_per_second", b"svmstream_snapshot_age_seconds", b"process_")

    def stable(text: bytes) -> list[bytes]:
        return [line.split(b" ")[0] if line.startswith(timed) else line for line in text.splitlines()]

    expected, direct = generate_latest(ServiceOnly()), prom.service.render()
    assert stable(direct) == stable(expected)
    assert b'svmstream_examples_applied_total{model="r0"} 300.0' in direct
    assert b'svmstream_prequential_accuracy{model="r2"}' not in direct  # nothing learned: no sample
    # the whole exposition = the registered metrics (process, requests) + the service families
    whole = prom.exposition()
    assert stable(whole)[-len(stable(direct)) :] == stable(direct)
    assert stable(whole) == stable(generate_latest(prom))  # histograms and counters too, byte for byte
    assert b'svmstream_request_latency_seconds_bucket{le="+Inf",model="r0",route="learn"} 6.0' in whole
    names = {f.name for f in text_string_to_metric_families(whole.decode())}
    assert {"process_resident_memory_bytes", "svmstream_http_requests", "svmstream_examples_applied"} <= names
    assert names == {f.name for f in text_string_to_metric_families(generate_latest(prom).decode())}
    registry.close()


def test_the_compact_latency_histogram_exposes_what_a_prometheus_histogram_exposes():
    """The latency histogram keeps each (route, model) in one array instead of a whole
    prometheus-client Histogram child (~0.3 KB instead of ~3.7 KB per model and route): its
    text, its samples and the dashboard's bucket readings are those of the stock histogram fed
    the same observations."""
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from svmstream.app.observability.exposition import histogram_text
    from svmstream.app.observability.latency import LatencyHistogram
    from svmstream.app.observability.live import LatencyWindow
    from svmstream.app.observability.prometheus import RequestMetrics

    stock_registry, compact_registry = CollectorRegistry(), CollectorRegistry()
    args = ("svmstream_request_latency_seconds", "doc", ("route", "model"))
    stock = Histogram(*args, buckets=RequestMetrics.BUCKETS, registry=stock_registry)
    compact = LatencyHistogram(*args, buckets=RequestMetrics.BUCKETS, registry=compact_registry)
    observations = [
        ("learn", "a", 0.0001),
        ("learn", "a", 0.003),
        ("predict", "a", 7.5),
        ("learn", "b", 30.0),
    ]
    observations += [("predict", 'odd "name"\\', 0.2), ("learn", "a", 0.0005), ("learn", "b", 0.001)]
    # enough label sets for histogram_text to join its lines in several chunks
    observations += [("learn", f"m{k}", (k % 97) / 13.0) for k in range(1500)]
    for route, model, seconds in observations:
        stock.labels(route=route, model=model).observe(seconds)
        compact.labels(route, model).observe(seconds)
    for key, child in stock._metrics.items():
        compact._metrics[key]._created = child._created
    assert generate_latest(compact_registry) == generate_latest(stock_registry)
    assert histogram_text(compact) == histogram_text(stock) == generate_latest(stock_registry).decode()
    assert LatencyWindow.read(compact, {"a", "b"}) == LatencyWindow.read(stock, {"a", "b"})
    assert compact.labels(model="a", route="learn") is compact.labels("learn", "a")
    with pytest.raises(ValueError):
        compact.labels("learn")
