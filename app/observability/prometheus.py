"""The Prometheus exposition of the service (``GET /metrics``).

* :class:`ServiceCollector` -- a prometheus-client collector that reads the registry's
  handles (their meters, published views and the stream consumers' cached XINFO figures)
  at scrape time, so ``/metrics`` never waits for a learner or for Redis.
* :class:`RequestMetrics` -- learn/predict latency histograms and the count of every
  request by route template, method and status (:class:`RequestCounter`, an ASGI
  middleware: route *templates* such as ``/models/{name}``, never raw paths, so the
  label values stay bounded whatever clients send).
* prometheus-client's :class:`~prometheus_client.ProcessCollector` (``process_*``: RSS,
  CPU seconds, open fds, start time), registered on the app's own registry.

Each app builds its own :class:`prometheus_client.CollectorRegistry` with
:func:`build_registry` (several apps may live in one test process).  Only the app factory
(:mod:`svmstream.app.main`) imports this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from svmstream.app.models.registry import ModelHandle, Registry
from svmstream.app.observability.exposition import GoCache, histogram_text, label_value, text_of
from svmstream.app.observability.latency import LatencyHistogram

_COUNTER, _GAUGE = CounterMetricFamily, GaugeMetricFamily

# key -> (family type, metric name, help), in exposition order
_FAMILIES: dict[str, tuple[type, str, str]] = {
    "applied": (_COUNTER, "svmstream_examples_applied", "Examples applied to the model (survives restarts)."),
    "received": (
        _COUNTER,
        "svmstream_examples_received",
        "Examples received by the model: learned + pending + refused (survives restarts but refused).",
    ),
    "learned": (
        _COUNTER,
        "svmstream_examples_learned",
        "Received examples the model learned (survives restarts).",
    ),
    "refused": (
        _COUNTER,
        "svmstream_examples_refused",
        "Received examples refused (stream entries dead-lettered by this process).",
    ),
    "rate": (
        _GAUGE,
        "svmstream_examples_applied_per_second",
        "Examples applied per second (sliding window).",
    ),
    "preq": (_GAUGE, "svmstream_prequential_accuracy", "Test-then-train accuracy over the sliding window."),
    "preq_n": (_GAUGE, "svmstream_prequential_window_examples", "Examples in the prequential window."),
    "mae": (_GAUGE, "svmstream_prequential_mae", "Regression: test-then-train mean absolute error (window)."),
    "rmse": (
        _GAUGE,
        "svmstream_prequential_rmse",
        "Regression: test-then-train root mean squared error (window).",
    ),
    "coverage": (
        _GAUGE,
        "svmstream_prequential_coverage_90",
        "Regression: share of targets inside the 90 % interval stated before they arrived (window).",
    ),
    "outlier_rate": (
        _GAUGE,
        "svmstream_prequential_outlier_rate",
        "Novelty: share of rows flagged as outliers when they arrived (window).",
    ),
    "sv": (_GAUGE, "svmstream_support_vectors", "Support vectors held."),
    "merges": (_COUNTER, "svmstream_merges", "Budget merges (survives restarts)."),
    "mfreq": (_GAUGE, "svmstream_merging_frequency", "Budget maintenance events per step."),
    "wd": (_GAUGE, "svmstream_average_weight_degradation", "Mean weight degradation per maintenance event."),
    "version": (_GAUGE, "svmstream_model_version", "Batches applied since creation."),
    "pending": (_GAUGE, "svmstream_learner_pending_batches", "Batches queued for the learner."),
    "buffered": (
        _GAUGE,
        "svmstream_pending_examples",
        "Examples received, not learned yet (warm-up window + shuffle buffer).",
    ),
    "warming_up": (_GAUGE, "svmstream_warming_up", "1 while the warm-up window is open (/predict: 409)."),
    "label_run": (
        _GAUGE,
        "svmstream_single_label_run",
        "Length of the current run of one label among the examples received.",
    ),
    "label_runs": (
        _COUNTER,
        "svmstream_single_label_runs",
        "Runs of one label that reached label_run_window examples (a label-sorted source).",
    ),
    "overflow": (
        _COUNTER,
        "svmstream_numerical_overflow",
        "Batches rolled back because they made the model non-finite.",
    ),
    "learn_failed": (
        _COUNTER,
        "svmstream_learning_failures",
        "Batches whose learning step raised (model rolled back; HTTP 500), numerical overflow excluded.",
    ),
    "snap_failed": (
        _COUNTER,
        "svmstream_snapshot_failures",
        "Snapshot writes of the model that failed (disk full, permissions, ...).",
    ),
    "drift": (
        _COUNTER,
        "svmstream_drift_detected",
        "Concept drift detections on the prequential errors (survives restarts).",
    ),
    "promotions": (
        _COUNTER,
        "svmstream_promotions",
        "Challengers promoted to champion, on evidence or by hand (survives restarts; docs/challengers.md).",
    ),
    "challengers": (_GAUGE, "svmstream_challengers", "Challengers learning beside the champion."),
    "classes": (_GAUGE, "svmstream_classes", "Classes of the model (declared or learned so far)."),
    "snap_age": (
        _GAUGE,
        "svmstream_snapshot_age_seconds",
        "Seconds since the last snapshot was written or restored.",
    ),
    "lag": (
        _GAUGE,
        "svmstream_stream_lag_entries",
        "Stream entries not yet delivered to the consumer group (XINFO).",
    ),
    "lag_s": (
        _GAUGE,
        "svmstream_stream_lag_seconds",
        "Newest stream entry time minus the last applied entry time.",
    ),
    "s_pending": (
        _GAUGE,
        "svmstream_stream_pending_entries",
        "Delivered, not yet acknowledged entries (XINFO GROUPS pending).",
    ),
    "s_len": (_GAUGE, "svmstream_stream_length", "XLEN of the model's stream."),
    "dead": (
        _COUNTER,
        "svmstream_stream_dead_letters",
        "Entries sent to the dead-letter stream by this process.",
    ),
    "s_applied": (_COUNTER, "svmstream_stream_entries_applied", "Stream entries applied by this process."),
    "s_up": (_GAUGE, "svmstream_stream_connected", "1 while the consumer is connected to Redis."),
}

# a task meter's figure -> family key (absent for the models of other tasks)
_TASK_FIGURES = (
    ("prequential_mae", "mae"),
    ("prequential_rmse", "rmse"),
    ("prequential_coverage_90", "coverage"),
    ("prequential_outlier_rate", "outlier_rate"),
)
# stream status key -> family key, for the figures that may be missing (None)
_STREAM_GAUGES = (("lag", "lag"), ("lag_seconds", "lag_s"), ("pending", "s_pending"), ("length", "s_len"))


class RequestMetrics:
    """Latency histograms of ``/learn`` and ``/predict`` (seconds, labels ``route``, ``model``)
    and ``svmstream_http_requests_total`` (labels ``route``, ``method``, ``status``)."""

    BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

    def __init__(self, registry: CollectorRegistry):
        fast = isinstance(registry, ServiceRegistry)
        self.latency = LatencyHistogram(
            "svmstream_request_latency_seconds",
            "Latency of learn/predict requests (body read to response).",
            ("route", "model"),
            buckets=self.BUCKETS,
            registry=None if fast else registry,
        )
        if fast:  # one label set per (route, model): rendered by histogram_text
            registry.register_histogram(self.latency)
        self.requests = Counter(
            "svmstream_http_requests",
            "HTTP requests answered, by route template, method and status code.",
            ("route", "method", "status"),
            registry=registry,
        )

    def observe(self, route: str, model: str, seconds: float) -> None:
        self.latency.labels(route=route, model=model).observe(seconds)


def _model_values(handle: ModelHandle, now: float) -> dict[str, float]:
    """The figures of one model, by family key (a family the model has no figure for is absent)."""
    view = handle.view
    stats = view.stats
    acc = handle.prequential.accuracy()
    figures = handle.prequential.figures()
    out: dict[str, float] = {
        "applied": stats.get("n_seen", 0),
        "rate": handle.rate.rate(),
        "preq_n": handle.prequential.count(),
        "sv": stats.get("n_support_vectors", 0),
        "merges": stats.get("n_merges", 0),
        "mfreq": stats.get("merging_frequency", 0.0),
        "wd": stats.get("average_weight_degradation", 0.0),
        "version": view.version,
        "pending": handle.pending,
        "buffered": stats.get("pending", 0),
        "warming_up": 1.0 if stats.get("warming_up") else 0.0,
        "label_run": handle.label_runs.length,
        "label_runs": handle.label_runs.detections,
        "overflow": handle.overflows,
        "learn_failed": handle.learn_failures,
        "snap_failed": handle.snapshot_failures,
        "drift": stats.get("drift", {}).get("detections", 0),
        "promotions": handle.challengers.promotions if handle.challengers is not None else 0,
        "challengers": len(handle.challengers.entries) if handle.challengers is not None else 0,
        "classes": len(view.codec.classes),
    }
    status = handle.stream_status() if handle.stream_status is not None else None
    examples = handle.examples(status)  # one status read per model and scrape
    out.update(received=examples["received"], learned=examples["learned"], refused=examples["refused"])
    if acc is not None:
        out["preq"] = acc
    for key, fam in _TASK_FIGURES:  # a regression or novelty model's meter (task_outputs.py)
        value = figures.get(key)
        if value is not None:
            out[fam] = value
    if handle.last_snapshot_time is not None:
        out["snap_age"] = max(0.0, now - handle.last_snapshot_time)
    if status:
        for key, fam in _STREAM_GAUGES:
            if status.get(key) is not None:
                out[fam] = status[key]
        out["dead"] = status.get("dead_letters", 0)
        out["s_applied"] = status.get("applied", 0)
        out["s_up"] = 1.0 if status.get("connected") else 0.0
    return out


class ServiceCollector:
    """Per-model gauges and counters read from the registry at scrape time.

    :meth:`collect` yields prometheus-client metric families (any registry can use it);
    :meth:`render` writes the same text that ``generate_latest`` writes for them, directly:
    with 1,000 models (~25,000 samples) the object path took ~0.5 s per scrape on a loaded
    2-core machine, the direct one a few tens of ms (``benchmarks/bench_metrics.py``).
    ``tests/test_metrics.py`` checks the two are byte-identical.
    """

    def __init__(self, get_registry: Callable[[], Registry | None]):
        self._get_registry = get_registry

    def _rows(self) -> list[tuple[str, dict[str, float]]]:
        registry = self._get_registry()
        if registry is None:
            return []
        now = time.time()
        return [(handle.name, _model_values(handle, now)) for handle in registry.handles()]

    def collect(self) -> Iterable[Any]:
        if self._get_registry() is None:
            return
        families = {
            key: kind(name, help_text, labels=["model"]) for key, (kind, name, help_text) in _FAMILIES.items()
        }
        for name, values in self._rows():
            for key, value in values.items():
                families[key].add_metric([name], value)
        yield from families.values()

    def render(self) -> bytes:
        """Text format 0.0.4 of :meth:`collect`'s families (same bytes as ``generate_latest``)."""
        if self._get_registry() is None:
            return b""
        rows = [(label_value(name), values) for name, values in self._rows()]
        out: list[str] = []
        for key, (kind, name, help_text) in _FAMILIES.items():
            counter = kind is _COUNTER
            mname = name + "_total" if counter else name
            out.append(f"# HELP {mname} {help_text}\n# TYPE {mname} {'counter' if counter else 'gauge'}\n")
            prefix = mname + '{model="'
            go = GoCache()  # per family: counts and flags repeat across models
            # one string per family (not ~190,000 small ones alive until the end: see exposition.CHUNK_LINES)
            out.append(
                "".join(f'{prefix}{model}"}} {go(values[key])}\n' for model, values in rows if key in values)
            )
        return "".join(out).encode()


class ServiceRegistry(CollectorRegistry):
    """The app's registry: prometheus-client's, plus the :class:`ServiceCollector`.

    ``collect()`` (so ``generate_latest(registry)``) yields everything; :meth:`exposition`
    is the same text with the per-model families rendered directly (what ``/metrics`` sends).
    """

    def __init__(self, service: ServiceCollector):
        super().__init__(auto_describe=False)
        self.service = service
        self.histograms: list[Histogram] = []  # per-model histograms, rendered by histogram_text

    def register_histogram(self, histogram: Histogram) -> None:
        """Keep a labelled histogram (created with ``registry=None``) for the fast path."""
        self.histograms.append(histogram)

    def collect(self) -> Iterable[Any]:
        yield from super().collect()
        for histogram in self.histograms:
            yield from histogram.collect()
        yield from self.service.collect()

    def exposition(self) -> bytes:
        """The text of ``/metrics``: the registered metrics (:func:`text_of`), the per-model
        histograms (:func:`histogram_text`), then the service's families
        (:meth:`ServiceCollector.render`); the order of :meth:`collect`."""
        text = text_of(CollectorRegistry.collect(self)) + "".join(histogram_text(h) for h in self.histograms)
        return text.encode() + self.service.render()


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
UNMATCHED = "<unmatched>"
"""The ``route`` label of requests no route matched (404s of any path)."""


def route_template(scope: Scope) -> str:
    """The template of the route that took the request (``/models/{name}``), a mount's
    prefix + ``/{path}``, or :data:`UNMATCHED`."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    if path is None:
        return UNMATCHED
    if not hasattr(route, "endpoint") and hasattr(route, "routes"):  # a Mount
        return path.rstrip("/") + "/{path}"
    return path


class RequestCounter:
    """ASGI middleware: counts each HTTP request by route template, method and status.

    Parameters
    ----------
    app : ASGI application
    counter : prometheus_client.Counter
        With labels ``route``, ``method``, ``status`` (:attr:`RequestMetrics.requests`).

    A request that raised before a response started counts as status 500; methods other
    than the standard ones are counted as ``OTHER``.
    """

    def __init__(self, app: ASGIApp, counter: Counter):
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            method = scope.get("method", "")
            self.counter.labels(
                route=route_template(scope),
                method=method if method in _METHODS else "OTHER",
                status=str(status),
            ).inc()


def build_registry(get_registry: Callable[[], Registry | None]) -> tuple[ServiceRegistry, RequestMetrics]:
    """A fresh prometheus registry with the service collector, the process collector
    (``process_*``, Linux ``/proc``; nothing elsewhere) and the request metrics."""
    prom = ServiceRegistry(ServiceCollector(get_registry))
    ProcessCollector(registry=prom)
    return prom, RequestMetrics(prom)
