"""The Prometheus exposition of the service (``GET /metrics``).

* :class:`ServiceCollector` -- a prometheus-client collector that reads the registry's
  handles (their meters, published views and the stream consumers' cached XINFO figures)
  at scrape time, so ``/metrics`` never waits for a learner or for Redis.
* :class:`RequestMetrics` -- learn/predict latency histograms.

Each app builds its own :class:`prometheus_client.CollectorRegistry` with
:func:`build_registry` (several apps may live in one test process).  Only the app factory
(:mod:`svmstream.app.main`) imports this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from svmstream.app.models.registry import ModelHandle, Registry

_COUNTER, _GAUGE = CounterMetricFamily, GaugeMetricFamily

# key -> (family type, metric name, help), in exposition order
_FAMILIES: dict[str, tuple[type, str, str]] = {
    "applied": (_COUNTER, "svmstream_examples_applied", "Examples applied to the model (survives restarts)."),
    "rate": (
        _GAUGE,
        "svmstream_examples_applied_per_second",
        "Examples applied per second (sliding window).",
    ),
    "preq": (_GAUGE, "svmstream_prequential_accuracy", "Test-then-train accuracy over the sliding window."),
    "preq_n": (_GAUGE, "svmstream_prequential_window_examples", "Examples in the prequential window."),
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
    "drift": (
        _COUNTER,
        "svmstream_drift_detected",
        "Concept drift detections on the prequential errors (survives restarts).",
    ),
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

# stream status key -> family key, for the figures that may be missing (None)
_STREAM_GAUGES = (("lag", "lag"), ("lag_seconds", "lag_s"), ("pending", "s_pending"), ("length", "s_len"))


class RequestMetrics:
    """Latency histograms of ``/learn`` and ``/predict`` (seconds, labels ``route``, ``model``)."""

    BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

    def __init__(self, registry: CollectorRegistry):
        self.latency = Histogram(
            "svmstream_request_latency_seconds",
            "Latency of learn/predict requests (body read to response).",
            ("route", "model"),
            buckets=self.BUCKETS,
            registry=registry,
        )

    def observe(self, route: str, model: str, seconds: float) -> None:
        self.latency.labels(route=route, model=model).observe(seconds)


def _add_model(families: dict[str, Any], handle: ModelHandle, now: float) -> None:
    """The figures of one model (label ``model``)."""
    name = [handle.name]
    view = handle.view
    stats = view.stats
    families["applied"].add_metric(name, stats.get("n_seen", 0))
    families["rate"].add_metric(name, handle.rate.rate())
    acc = handle.prequential.accuracy()
    if acc is not None:
        families["preq"].add_metric(name, acc)
    families["preq_n"].add_metric(name, handle.prequential.count())
    families["sv"].add_metric(name, stats.get("n_support_vectors", 0))
    families["merges"].add_metric(name, stats.get("n_merges", 0))
    families["mfreq"].add_metric(name, stats.get("merging_frequency", 0.0))
    families["wd"].add_metric(name, stats.get("average_weight_degradation", 0.0))
    families["version"].add_metric(name, view.version)
    families["pending"].add_metric(name, handle.pending)
    families["buffered"].add_metric(name, stats.get("pending", 0))
    families["warming_up"].add_metric(name, 1.0 if stats.get("warming_up") else 0.0)
    families["label_run"].add_metric(name, handle.label_runs.length)
    families["label_runs"].add_metric(name, handle.label_runs.detections)
    families["overflow"].add_metric(name, handle.overflows)
    families["drift"].add_metric(name, stats.get("drift", {}).get("detections", 0))
    families["classes"].add_metric(name, len(view.codec.classes))
    if handle.last_snapshot_time is not None:
        families["snap_age"].add_metric(name, max(0.0, now - handle.last_snapshot_time))
    status = handle.stream_status() if handle.stream_status is not None else None
    if status:
        for key, fam in _STREAM_GAUGES:
            if status.get(key) is not None:
                families[fam].add_metric(name, status[key])
        families["dead"].add_metric(name, status.get("dead_letters", 0))
        families["s_applied"].add_metric(name, status.get("applied", 0))
        families["s_up"].add_metric(name, 1.0 if status.get("connected") else 0.0)


class ServiceCollector:
    """Per-model gauges and counters read from the registry at scrape time."""

    def __init__(self, get_registry: Callable[[], Registry | None]):
        self._get_registry = get_registry

    def collect(self) -> Iterable[Any]:
        registry = self._get_registry()
        if registry is None:
            return
        families = {
            key: kind(name, help_text, labels=["model"]) for key, (kind, name, help_text) in _FAMILIES.items()
        }
        now = time.time()
        for handle in registry.handles():
            _add_model(families, handle, now)
        yield from families.values()


def build_registry(get_registry: Callable[[], Registry | None]) -> tuple[CollectorRegistry, RequestMetrics]:
    """A fresh prometheus registry with the service collector and the request histograms."""
    prom = CollectorRegistry(auto_describe=False)
    prom.register(ServiceCollector(get_registry))
    return prom, RequestMetrics(prom)
