"""``/metrics`` families of the feedback (``docs/feedback.md``): per model the label delay
histogram, served accuracy and log-loss, feedback ids by outcome; the store's records, bytes
and evictions.  Registered on the app's Prometheus registry by :mod:`svmstream.app.main`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily


class FeedbackCollector:
    """A prometheus-client collector reading ``get_feedback()`` (a
    :class:`~svmstream.app.models.feedback.Feedback` or None) at each scrape."""

    def __init__(self, get_feedback: Callable[[], Any]):
        self.get_feedback = get_feedback

    def collect(self) -> Iterable[Any]:
        feedback = self.get_feedback()
        if feedback is None:
            return
        delay = HistogramMetricFamily(
            "svmstream_feedback_label_delay_seconds",
            "seconds from a remembered prediction to its learned feedback",
            labels=["model"],
        )
        served = GaugeMetricFamily(
            "svmstream_served_accuracy",
            "served label = arriving label, over the sliding window",
            labels=["model"],
        )
        loss = GaugeMetricFamily(
            "svmstream_served_log_loss",
            "log-loss of the served probability of the arriving label",
            labels=["model"],
        )
        ids = CounterMetricFamily(
            "svmstream_feedback_ids", "feedback ids by outcome", labels=["model", "outcome"]
        )
        for name, meter in sorted(feedback.meters().items()):
            buckets, total, count = meter.histogram()
            delay.add_metric([name], buckets, total)
            figures = meter.figures()
            if figures["served_accuracy"] is not None:
                served.add_metric([name], figures["served_accuracy"])
            if figures["served_log_loss"] is not None:
                loss.add_metric([name], figures["served_log_loss"])
            for outcome, n in figures["feedback"].items():
                ids.add_metric([name, outcome], n)
        yield from (delay, served, loss, ids)
        stats = feedback.store.stats()
        yield GaugeMetricFamily(
            "svmstream_feedback_store_records", "remembered predictions held", value=stats["records"]
        )
        yield GaugeMetricFamily(
            "svmstream_feedback_store_bytes", "bytes the feedback store counts", value=stats["bytes"]
        )
        yield CounterMetricFamily(
            "svmstream_feedback_evicted",
            "remembered predictions evicted over feedback_max_bytes",
            value=stats["evicted"],
        )
