"""The dashboard's data: ``GET /events`` (server-sent events) of a real server, the static page
and the offline API docs assets; the latency quantiles and job progress of
:mod:`svmstream.app.observability.live`.  The page in a real browser: test_dashboard_browser.py.
"""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Histogram

from svmstream.app.observability.live import (
    MAX_MODELS,
    LatencyWindow,
    histogram_quantile,
    progress_fraction,
)
from tests.conftest import ServerProcess, learn_all, two_moons_like, write_libsvm

# ----------------------------------------------------------------------------- helpers


def read_events(url: str, n: int, headers: dict | None = None, timeout: float = 60) -> list[dict]:
    """The first ``n`` events of ``GET url/events`` (parsed ``data``)."""
    events, data = [], []
    with httpx.stream("GET", url + "/events", headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                data.append(line[len("data:") :].removeprefix(" "))
            elif line == "" and data:
                events.append(json.loads("\n".join(data)))
                data = []
                if len(events) == n:
                    break
    return events


class Subscription:
    """``GET url/events`` read by a background thread from now on (events kept in order)."""

    def __init__(self, url: str, headers: dict | None = None):
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        self.wait(lambda e: True, 30)  # subscribed: the feed ticks

    def _read(self, url: str, headers: dict | None) -> None:
        data = []
        with httpx.stream("GET", url + "/events", headers=headers, timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[len("data:") :].removeprefix(" "))
                elif line == "" and data:
                    self.events.append(json.loads("\n".join(data)))
                    data = []
                if self._stop.is_set():
                    return

    def wait(self, predicate, timeout: float = 60) -> dict:
        """The first event from now on for which ``predicate(event)`` is true."""
        start, deadline = len(self.events), time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events[start:]:
                if predicate(event):
                    return event
            time.sleep(0.1)
        last = self.events[-1] if self.events else None
        pytest.fail(f"no matching event within {timeout} s; the last one: {last}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def wait_event(url: str, predicate, timeout: float = 60) -> dict:
    sub = Subscription(url)
    try:
        return sub.wait(predicate, timeout)
    finally:
        sub.close()


def model_of(event: dict, name: str) -> dict:
    """The figures of model ``name`` in the event ({} when it is not among them)."""
    figs = [m for m in event["models"] if m["name"] == name]
    return figs[0] if figs else {}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One real ``svmstream serve`` for the read-only checks of this module."""
    tmp = tmp_path_factory.mktemp("dashboard")
    proc = ServerProcess(tmp / "snapshots", tmp / "server.log").wait_ready()
    yield proc
    proc.terminate()


# ----------------------------------------------------------------------------- pure figures


def test_histogram_quantile_interpolates_within_the_bucket_like_prometheus():
    buckets = [(1.0, 10.0), (2.0, 20.0), (4.0, 20.0), (float("inf"), 20.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(1.0)  # rank 10: top of the first bucket
    assert histogram_quantile(0.99, buckets) == pytest.approx(1.98)  # rank 19.8 in (1, 2]
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.5)
    # a rank in the +inf bucket: the highest finite bound (Prometheus does the same)
    assert histogram_quantile(0.99, [(1.0, 1.0), (float("inf"), 10.0)]) == 1.0
    assert histogram_quantile(0.5, [(1.0, 0.0), (float("inf"), 0.0)]) is None


def test_latency_window_takes_quantiles_of_the_recent_requests_only():
    """Quantiles over the increase of a real prometheus-client histogram within the window."""
    hist = Histogram(
        "lat", "lat", ("route", "model"), buckets=(0.001, 0.01, 0.1, 1.0), registry=CollectorRegistry()
    )
    window = LatencyWindow(window_s=10.0)
    slow = hist.labels(route="learn", model="m")
    for _ in range(50):
        slow.observe(0.5)  # in (0.1, 1]
    # the children of the models asked about, read directly, equal the filtered full collect()
    hist.labels(route="predict", model="n").observe(0.02)
    assert LatencyWindow.read(hist, {"m"}) == LatencyWindow._read_all(hist, {"m"})
    assert set(LatencyWindow.read(hist, {"m", "n"})) == {("learn", "m"), ("predict", "n")}
    first = window.update(hist, {"m"}, now=0.0)
    assert first == {}  # one reading: no increase yet
    for _ in range(20):
        slow.observe(0.5)
    second = window.update(hist, {"m"}, now=5.0)["m"]["learn"]
    assert second["n"] == 20 and 0.1 < second["p50"] <= 1.0
    for _ in range(40):
        slow.observe(0.005)  # fast requests now, in (0.001, 0.01]
    hist.labels(route="predict", model="other").observe(0.5)  # a model not asked about
    third = window.update(hist, {"m"}, now=16.0)
    # the reading at 0 left the window: base is the reading at 5 s, so only the 40 fast ones count
    assert set(third) == {"m"} and third["m"]["learn"]["n"] == 40
    assert 0.001 < third["m"]["learn"]["p99"] <= 0.01
    assert window.update(hist, {"m"}, now=30.0) == {}  # nothing new within the last 10 s
    slow.observe(0.5)
    # after an idle gap (nobody watched) the first reading only starts a new window
    assert window.update(hist, {"m"}, now=100.0) == {}
    slow.observe(0.5)
    assert window.update(hist, {"m"}, now=101.0)["m"]["learn"]["n"] == 1


def test_job_progress_fraction_of_the_current_stage():
    assert progress_fraction("running", {"stage": "level", "subproblems_done": 16, "subproblems": 64}) == 0.25
    assert progress_fraction("running", {"stage": "solve", "iteration": 30, "iterations": 1000}) == 0.03
    assert progress_fraction("running", {"phase": "loading", "stage": "loading"}) is None
    assert progress_fraction("succeeded", {"phase": "done"}) == 1.0


# ----------------------------------------------------------------------------- a real server


def test_the_page_and_every_asset_it_loads_are_served_by_the_app(server):
    for path in ("/", "/dashboard"):
        page = httpx.get(server.url + path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assets = [r for r in refs if r.startswith("static/")]
        assert {"static/vendor/uplot/uPlot.iife.min.js", "static/dashboard/dashboard.js"} <= set(assets)
        # nothing from another host: relative links and data: URLs only
        assert all(not re.match(r"^[a-z]+://|^//", r) for r in refs), refs
        for asset in assets:
            r = httpx.get(f"{server.url}/{asset}")
            assert r.status_code == 200 and len(r.content) > 100, asset
    assert "MIT License" in httpx.get(server.url + "/static/vendor/uplot/LICENSE").text
    assert httpx.get(server.url + "/static/nothing.js").status_code == 404
    assert httpx.get(server.url + "/static/../main.py").status_code == 404


def test_api_docs_reference_only_assets_the_app_serves(server):
    for path, needed in (
        ("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
        ("/redoc", ("redoc.standalone.js",)),
    ):
        page = httpx.get(server.url + path)
        assert page.status_code == 200
        refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert all(ref.startswith("/") and not ref.startswith("//") for ref in refs), refs
        assert not re.search(r"https?://", page.text), page.text  # no absolute URL at all (no CDN)
        for name in needed:
            (ref,) = [r for r in refs if r.endswith(name)]
            asset = httpx.get(server.url + ref)
            assert asset.status_code == 200 and len(asset.content) > 100_000, ref


def test_events_carry_what_a_model_learned_from_raw_data(server):
    """Raw unscaled features, string labels, no hyperparameters, over the real HTTP API."""
    X, y = two_moons_like(3_000, d=5, seed=7)
    X = X * [1, 500, 0.01, 20, 3]
    labels = np.where(y > 0, "spam", "ham").tolist()
    sub = Subscription(server.url)  # latency figures count the requests made while watched
    with server.client() as c:
        assert c.put("/models/raw").status_code == 201
        learn_started = time.monotonic()
        for i in range(0, 3_000, 500):
            r = c.post(
                "/learn", json={"model": "raw", "x": X[i : i + 500].tolist(), "y": labels[i : i + 500]}
            )
            assert r.status_code == 200, r.text
        assert c.post("/models/raw/flush").status_code == 200
        for _ in range(3):
            assert c.post("/predict", json={"model": "raw", "x": X[:50].tolist()}).status_code == 200
        info = c.get("/models/raw").json()
    try:
        event = sub.wait(lambda e: "predict" in model_of(e, "raw").get("latency", {}))
    finally:
        sub.close()
    fig = model_of(event, "raw")
    assert fig["examples_applied"] == 3_000
    assert fig["algorithm"] == "bsgd" and fig["budget"] == info["budget"]
    assert sorted(fig["classes"]) == ["ham", "spam"] and fig["n_classes"] == 2
    assert fig["version"] == info["version"] and fig["support_vectors"] == info["n_support_vectors"] > 0
    assert fig["merges"] == info["n_merges"]
    assert 0.6 < fig["accuracy"] <= 1.0  # prequential, over what was learned
    assert fig["accuracy"] == pytest.approx(info["metrics"]["prequential_accuracy"])
    assert fig["drift_detections"] == 0 and fig["stream"] is None and fig["warming_up"] is False
    assert (fig["challengers"], fig["promotions"], fig["recent_promotions"]) == (0, 0, [])
    # the latency of the requests just made (window of 10 s), both routes, p50 <= p99
    # (on a slow machine the learn requests may be older than the window when the event is
    # built: then only what is still in it is checked)
    predict = fig["latency"]["predict"]
    assert predict["n"] == 3 and 0 < predict["p50"] <= predict["p99"]
    if time.monotonic() - learn_started < 9.0 or "learn" in fig["latency"]:
        learn = fig["latency"]["learn"]
        assert 0 < learn["p50"] <= learn["p99"] and learn["n"] <= 6
        if time.monotonic() - learn_started < 9.0:
            assert learn["n"] == 6
    assert event["totals"]["models"] >= 2 and event["totals"]["examples_applied"] >= 3_000


def test_events_carry_the_promotions_of_a_model(server):
    """A challenger promoted on evidence (docs/challengers.md): the event counts it (model and
    totals) and lists it as the history of ``GET /models/{name}`` holds it."""
    X, y = two_moons_like(3_000, d=6, seed=4)
    config = {"budget": 40, "gamma": 1000.0, "C": 10.0, "shuffle_buffer": 0, "classes": [-1, 1]}
    with server.client() as c:
        r = c.put("/models/promoted", json={**config, "challengers": [{"gamma": 1.0}, {"gamma": 50.0}]})
        assert r.status_code == 201, r.text
        learn_all(c, "promoted", X, y, batch=250)
        info = c.get("/models/promoted").json()
    assert info["promotion"]["promotions"] == 1, info["promotion"]
    (promoted,) = [e for e in info["promotion"]["history"] if e["event"] == "promoted"]
    sub = Subscription(server.url)
    try:
        event = sub.wait(lambda e: model_of(e, "promoted").get("promotions") == 1)
    finally:
        sub.close()
    fig = model_of(event, "promoted")
    assert fig["challengers"] == len(info["challengers"]) == 1
    (shown,) = fig["recent_promotions"]
    evidence = promoted["evidence"]
    assert shown == {
        "at": promoted["at"], "time": promoted["time"], "manual": False, "origin": "user",
        "settings": {"gamma": 1.0}, "e_value": evidence["e_value"], "threshold": evidence["threshold"],
        "wins": evidence["wins"], "losses": evidence["losses"], "paired_examples": evidence["paired_examples"],
    }  # fmt: skip
    assert event["totals"]["promotions"] >= 1


def test_one_event_per_tick_is_shared_by_every_subscriber(server):
    results: list[list[dict]] = [[] for _ in range(3)]

    def subscribe(i: int) -> None:
        results[i] = read_events(server.url, 4)

    threads = [threading.Thread(target=subscribe, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    by_time = [{e["time"]: e for e in events} for events in results]
    assert all(len(events) == 4 for events in results)
    shared = set(by_time[0]) & set(by_time[1]) & set(by_time[2])
    # built once: the subscribers saw the very same events (same build time, same content)
    assert len(shared) >= 2
    for t in shared:
        assert by_time[0][t] == by_time[1][t] == by_time[2][t]
    assert len(by_time[0]) == 4  # four ticks, four distinct builds


def test_with_many_models_an_event_holds_the_totals_and_the_first_models_by_name(server):
    names = [f"many-{i:02d}" for i in range(MAX_MODELS + 5)]
    with server.client() as c:
        for name in names:
            assert c.put(f"/models/{name}").status_code == 201
        all_names = sorted(m["name"] for m in c.get("/models").json()["models"])
    event = wait_event(server.url, lambda e: e["totals"]["models"] == len(all_names))
    assert event["totals"]["shown"] == MAX_MODELS
    assert [m["name"] for m in event["models"]] == all_names[:MAX_MODELS]
    assert event["totals"]["examples_applied"] >= sum(m["examples_applied"] for m in event["models"])


def test_events_need_the_token_when_one_is_set_the_page_does_not(tmp_path):
    server = ServerProcess(
        tmp_path / "snapshots",
        tmp_path / "server.log",
        use_uvicorn=True,
        env={"SVMSTREAM_API_TOKEN": "s3cret"},
    ).wait_ready()
    try:
        assert httpx.get(server.url + "/").status_code == 200  # the page holds no data
        assert httpx.get(server.url + "/static/dashboard/dashboard.js").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic czNjcmV0"}):
            r = httpx.get(server.url + "/events", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["detail"].startswith("authorization")
        # a query parameter is not a way in (it would end up in access logs)
        assert httpx.get(server.url + "/events", params={"token": "s3cret"}).status_code == 401
        (event,) = read_events(server.url, 1, headers={"Authorization": "Bearer s3cret"})
        assert [m["name"] for m in event["models"]] == ["default"]
    finally:
        server.terminate()


def test_a_batch_job_shows_with_its_progress(tmp_path, server):
    X, y = two_moons_like(2_000, d=4, seed=1)
    path = write_libsvm(tmp_path / "jobdata.libsvm", X, y)
    with server.client() as c:
        up = c.post("/uploads", params={"filename": path.name}, content=path.read_bytes())
        assert up.status_code == 201, up.text
        job = c.post(
            "/jobs", json={"algorithm": "liblinear-cd", "data": up.json()["id"], "model": "job-model"}
        )
        assert job.status_code == 201, job.text
    job_id = job.json()["id"]

    def done(event):
        jobs = [j for j in event["jobs"] if j["id"] == job_id]
        return jobs and jobs[0]["state"] == "succeeded"

    event = wait_event(server.url, done, timeout=120)
    (fig,) = [j for j in event["jobs"] if j["id"] == job_id]
    assert fig["algorithm"] == "liblinear-cd" and fig["model"] == "job-model" and fig["fraction"] == 1.0
    assert fig["phase"] == "done" and fig["error"] is None and fig["elapsed_s"] > 0
    assert model_of(event, "job-model")["algorithm"] == "liblinear-cd"


def test_a_streamed_model_shows_its_lag_and_dead_letters(redis_server, tmp_path):
    """A real Redis stream feeds the default model: the event carries the consumer's figures."""
    server = ServerProcess(
        tmp_path / "snapshots",
        tmp_path / "server.log",
        args=("--default-model", "streamed"),
        env={"SVMSTREAM_REDIS_URL": redis_server.url},
    ).wait_ready()
    try:
        X, y = two_moons_like(1_500, d=3, seed=5)
        r = redis_server.client()
        key = "svmstream:streamed:examples"
        pipe = r.pipeline()
        for row, label in zip(X * [1, 100, 0.1], y):
            pipe.xadd(key, {"y": str(label), "x": json.dumps(row.tolist())})
        pipe.xadd(key, {"y": "1", "x": "[1.0, NaN]"})  # bad: dead letter
        pipe.xadd(key, {"label": "1", "x": "[1, 2, 3]"})  # bad: unknown field
        pipe.execute()

        def caught_up(event):
            stream = model_of(event, "streamed").get("stream")
            return (
                stream
                and stream["dead_letters"] == 2
                and model_of(event, "streamed")["examples_applied"] == 1_500
            )

        event = wait_event(server.url, caught_up, timeout=90)
        fig = model_of(event, "streamed")
        assert fig["stream"]["connected"] is True and fig["stream"]["lag"] is not None
        assert event["totals"]["dead_letters"] == 2
        # the consumer's status, as GET /models/{name} shows it (the lag is live XINFO: not compared)
        with server.client() as c:
            status = c.get("/models/streamed").json()["metrics"]["stream"]
        assert status["dead_letters"] == 2 and status["connected"] is True
    finally:
        server.terminate()
