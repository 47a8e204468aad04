"""Per-model learning metrics and the Prometheus exposition of the service.

* :class:`PrequentialWindow` -- prequential (test-then-train) accuracy over a sliding
  window: every solver step computes f(x) *before* it updates (``last_margins_`` of
  ``partial_fit``), so the prediction made for an example before learning from it is
  free (Gama, Sebastiao & Rodrigues 2013, "On evaluating stream learning algorithms",
  Machine Learning 90: prequential error with a sliding window).
* :class:`RateMeter` -- examples applied per second over the last ``window_s`` seconds.
* :class:`ServiceCollector` -- a prometheus-client collector that reads the registry
  (and the stream consumers' cached XINFO figures) at scrape time, so ``/metrics`` never
  waits for a learner or for Redis.
* :class:`RequestMetrics` -- learn/predict latency histograms.

Each app builds its own :class:`prometheus_client.CollectorRegistry` (several apps may
live in one test process).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:  # pragma: no cover
    from svmstream.app.models.registry import Registry


def correct_predictions(margins: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether the pre-update prediction of each example was right.

    Parameters
    ----------
    margins : ndarray of shape (m,) or (m, K), float64
        ``last_margins_`` of ``partial_fit``: f(x) before each step.  Binary: positive side
        is class index 1 (the scikit-learn convention); multi-class: one column per class.
    y : ndarray of shape (m,), int64
        True class indices.

    Returns
    -------
    ndarray of shape (m,), bool
    """
    margins = np.asarray(margins)
    if margins.ndim == 1:
        return (margins > 0) == (y == 1)
    return np.argmax(margins, axis=1) == y


class PrequentialWindow:
    """Accuracy of the last ``size`` test-then-train predictions (a ring buffer of 0/1).

    Parameters
    ----------
    size : int >= 1
        Window length in examples.
    """

    def __init__(self, size: int):
        self.size = int(size)
        self._buf = np.zeros(self.size, dtype=np.uint8)
        self._pos = 0
        self._count = 0
        self._sum = 0
        self.total = 0
        self.total_correct = 0
        self._lock = threading.Lock()

    def add(self, correct: np.ndarray) -> None:
        """Append a batch of outcomes (bool array of shape (m,)), oldest first."""
        c = np.asarray(correct, dtype=np.uint8)
        m = c.shape[0]
        if m == 0:
            return
        with self._lock:
            self.total += m
            self.total_correct += int(c.sum())
            if m >= self.size:
                self._buf[:] = c[m - self.size:]
                self._pos = 0
                self._count = self.size
                self._sum = int(self._buf.sum())
                return
            end = self._pos + m
            if end <= self.size:
                old = int(self._buf[self._pos:end].sum())
                self._buf[self._pos:end] = c
            else:
                first = self.size - self._pos
                old = int(self._buf[self._pos:].sum()) + int(self._buf[:end - self.size].sum())
                self._buf[self._pos:] = c[:first]
                self._buf[:end - self.size] = c[first:]
            # positions beyond the filled part held zeros, so ``old`` counts only live entries
            self._sum += int(c.sum()) - old
            self._pos = end % self.size
            self._count = min(self.size, self._count + m)

    def accuracy(self) -> float | None:
        """Fraction correct in the window, or None before the first example."""
        with self._lock:
            return self._sum / self._count if self._count else None

    def count(self) -> int:
        """Examples currently in the window (``min(size, examples seen)``)."""
        return self._count


class RateMeter:
    """Examples applied per second, averaged over the last ``window_s`` seconds."""

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = float(window_s)
        self._clock = clock
        self._start = clock()
        self._samples: deque[tuple[float, int]] = deque()
        self._total = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        now = self._clock()
        with self._lock:
            self._total += int(n)
            self._samples.append((now, self._total))
            self._trim(now)

    def _trim(self, now: float) -> None:
        # keep one sample at or before the window start as the base
        cut = now - self.window_s
        while len(self._samples) >= 2 and self._samples[1][0] <= cut:
            self._samples.popleft()

    def rate(self, at: float | None = None) -> float:
        """Examples per second over ``[at - window_s, at]`` (shorter while younger);
        ``at`` defaults to now."""
        now = self._clock() if at is None else at
        with self._lock:
            self._trim(now)
            span = min(self.window_s, now - self._start)
            if span <= 0:
                return 0.0
            base_t = now - span
            base = 0
            for t, total in self._samples:
                if t <= base_t:
                    base = total
                else:
                    break
            return (self._total - base) / span

    def last(self) -> float | None:
        """Clock time of the last :meth:`add` (None before it)."""
        samples = self._samples
        return samples[-1][0] if samples else None

    def rate_at_last(self) -> float:
        """:meth:`rate` at the time of the last :meth:`add`: a figure that changes only when
        examples are applied (what ``GET /models/{name}`` shows; ``/metrics`` shows the
        live, decaying :meth:`rate`)."""
        last = self.last()
        return 0.0 if last is None else self.rate(at=last)

    @property
    def total(self) -> int:
        return self._total


class RequestMetrics:
    """Latency histograms of ``/learn`` and ``/predict`` (seconds, labels ``route``, ``model``)."""

    BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

    def __init__(self, registry: CollectorRegistry):
        self.latency = Histogram(
            "svmstream_request_latency_seconds", "Latency of learn/predict requests (body read to response).",
            ("route", "model"), buckets=self.BUCKETS, registry=registry,
        )

    def observe(self, route: str, model: str, seconds: float) -> None:
        self.latency.labels(route=route, model=model).observe(seconds)


class ServiceCollector:
    """Per-model gauges and counters read from the registry at scrape time."""

    def __init__(self, get_registry: Callable[[], "Registry | None"]):
        self._get_registry = get_registry

    def collect(self) -> Iterable[Any]:
        registry = self._get_registry()
        if registry is None:
            return
        families = {
            "applied": CounterMetricFamily("svmstream_examples_applied", "Examples applied to the model (survives restarts).", labels=["model"]),
            "rate": GaugeMetricFamily("svmstream_examples_applied_per_second", "Examples applied per second (sliding window).", labels=["model"]),
            "preq": GaugeMetricFamily("svmstream_prequential_accuracy", "Test-then-train accuracy over the sliding window.", labels=["model"]),
            "preq_n": GaugeMetricFamily("svmstream_prequential_window_examples", "Examples in the prequential window.", labels=["model"]),
            "sv": GaugeMetricFamily("svmstream_support_vectors", "Support vectors held.", labels=["model"]),
            "merges": CounterMetricFamily("svmstream_merges", "Budget merges (survives restarts).", labels=["model"]),
            "mfreq": GaugeMetricFamily("svmstream_merging_frequency", "Budget maintenance events per step.", labels=["model"]),
            "wd": GaugeMetricFamily("svmstream_average_weight_degradation", "Mean weight degradation per maintenance event.", labels=["model"]),
            "version": GaugeMetricFamily("svmstream_model_version", "Batches applied since creation.", labels=["model"]),
            "pending": GaugeMetricFamily("svmstream_learner_pending_batches", "Batches queued for the learner.", labels=["model"]),
            "snap_age": GaugeMetricFamily("svmstream_snapshot_age_seconds", "Seconds since the last snapshot was written or restored.", labels=["model"]),
            "lag": GaugeMetricFamily("svmstream_stream_lag_entries", "Stream entries not yet delivered to the consumer group (XINFO).", labels=["model"]),
            "lag_s": GaugeMetricFamily("svmstream_stream_lag_seconds", "Newest stream entry time minus the last applied entry time.", labels=["model"]),
            "s_pending": GaugeMetricFamily("svmstream_stream_pending_entries", "Delivered, not yet acknowledged entries (XINFO GROUPS pending).", labels=["model"]),
            "s_len": GaugeMetricFamily("svmstream_stream_length", "XLEN of the model's stream.", labels=["model"]),
            "dead": CounterMetricFamily("svmstream_stream_dead_letters", "Entries sent to the dead-letter stream by this process.", labels=["model"]),
            "s_applied": CounterMetricFamily("svmstream_stream_entries_applied", "Stream entries applied by this process.", labels=["model"]),
            "s_up": GaugeMetricFamily("svmstream_stream_connected", "1 while the consumer is connected to Redis.", labels=["model"]),
        }
        now = time.time()
        for handle in registry.handles():
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
            if handle.last_snapshot_time is not None:
                families["snap_age"].add_metric(name, max(0.0, now - handle.last_snapshot_time))
            status = handle.stream_status() if handle.stream_status is not None else None
            if status:
                for key, fam in (("lag", "lag"), ("lag_seconds", "lag_s"), ("pending", "s_pending"),
                                 ("length", "s_len")):
                    if status.get(key) is not None:
                        families[fam].add_metric(name, status[key])
                families["dead"].add_metric(name, status.get("dead_letters", 0))
                families["s_applied"].add_metric(name, status.get("applied", 0))
                families["s_up"].add_metric(name, 1.0 if status.get("connected") else 0.0)
        yield from families.values()


def build_registry(get_registry: Callable[[], "Registry | None"]) -> tuple[CollectorRegistry, RequestMetrics]:
    """A fresh prometheus registry with the service collector and the request histograms."""
    prom = CollectorRegistry(auto_describe=False)
    prom.register(ServiceCollector(get_registry))
    return prom, RequestMetrics(prom)
