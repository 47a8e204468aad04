"""A labelled latency histogram at a fraction of prometheus-client's memory per label set
(:class:`LatencyHistogram`; one label set per model and route)."""

from __future__ import annotations

import threading
import time
from array import array
from typing import Any

from prometheus_client import Histogram
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString


class LatencyChild:
    """One label set of a :class:`LatencyHistogram`: its bucket counts and sum in one
    ``array('d')`` (not bucket counts in separate locked value objects)."""

    __slots__ = ("_parent", "_values", "_created")

    def __init__(self, parent: LatencyHistogram):
        self._parent = parent
        self._values = array("d", bytes(8 * (len(parent._upper_bounds) + 1)))  # buckets..., sum
        self._created = time.time()

    def observe(self, amount: float) -> None:
        parent = self._parent
        values = self._values
        with parent._shared_lock:
            values[-1] += amount
            for i, bound in enumerate(parent._upper_bounds):
                if amount <= bound:
                    values[i] += 1.0
                    break

    def counts(self) -> tuple[list[float], float]:
        """``(bucket counts, sum)`` (per bucket, not cumulative), read together."""
        with self._parent._shared_lock:
            values = self._values.tolist()
        return values[:-1], values[-1]

    def cumulative(self) -> tuple[list[tuple[float, float]], float]:
        """``([(upper bound, cumulative count), ...], sum)`` -- the ``_bucket`` series -- read
        together (also the live dashboard's reading, :class:`~.live.LatencyWindow`)."""
        buckets, total = self.counts()
        series, acc = [], 0.0
        for bound, count in zip(self._parent._upper_bounds, buckets):
            acc += count
            series.append((float(bound), acc))
        return series, total

    def _samples(self) -> tuple[Sample, ...]:
        """What a prometheus-client ``Histogram`` child yields (same names, order, values)."""
        series, total = self.cumulative()
        samples = [
            Sample("_bucket", {"le": floatToGoString(bound)}, acc, None, None) for bound, acc in series
        ]
        samples.append(Sample("_count", {}, series[-1][1], None, None))
        if self._parent._upper_bounds[0] >= 0:
            samples.append(Sample("_sum", {}, total, None, None))
        if getattr(prometheus_metrics, "_use_created", True):
            samples.append(Sample("_created", {}, self._created, None, None))
        return tuple(samples)


class LatencyHistogram(Histogram):
    """A labelled prometheus-client ``Histogram`` whose label sets are :class:`LatencyChild`
    objects: the same samples, text and API (``labels(...).observe(x)``, ``collect()``), at
    ~0.3 KB per label set instead of ~3.7 KB (15 bucket value objects with a lock each and a
    whole ``Histogram`` per child; one per model and route: 10,000 models, ~35 MB).  All
    children share one lock."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._shared_lock = threading.Lock()

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Any:
        if labelkwargs:
            if labelvalues or sorted(labelkwargs) != sorted(self._labelnames):
                raise ValueError("Incorrect label names")
            key = tuple(str(labelkwargs[name]) for name in self._labelnames)
        else:
            if len(labelvalues) != len(self._labelnames):
                raise ValueError("Incorrect label count")
            key = tuple(str(v) for v in labelvalues)
        child = self._metrics.get(key)
        if child is None:
            with self._lock:
                child = self._metrics.get(key)
                if child is None:
                    child = self._metrics[key] = LatencyChild(self)
        return child
