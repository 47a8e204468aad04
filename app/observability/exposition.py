"""The Prometheus text format (0.0.4) written directly: the same bytes as prometheus-client's
``generate_latest``, at a fraction of its cost per sample (:func:`text_of`, :func:`histogram_text`;
``tests/test_metrics.py`` checks they are byte-identical)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from prometheus_client import Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.utils import floatToGoString

from svmstream.app.observability.latency import LatencyChild


def label_value(text: str) -> str:
    """A label value escaped as the text format wants (model names never need it: they
    match ``MODEL_NAME_RE``; kept for safety)."""
    if "\\" in text or '"' in text or "\n" in text:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


_LEGACY_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
_TYPES = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram", "unknown": "untyped"}


def text_of(metrics: Iterable[Any]) -> str:
    """Prometheus text format 0.0.4 of prometheus-client metric families: the bytes
    ``generate_latest`` writes, at a fraction of its cost per sample (it re-validates and
    re-escapes every metric and label name of every sample; here each label set of a
    family is formatted once: the learn/predict histograms have ~18 samples per model).

    A family with a name outside the legacy character set goes through ``generate_latest``.
    """
    out: list[str] = []
    for metric in metrics:
        labelnames = {k for s in metric.samples for k in s.labels}
        if not _LEGACY_NAME.match(metric.name) or not all(_LEGACY_NAME.match(k) for k in labelnames):
            out.append(generate_latest(_One(metric)).decode())
            continue
        mname, mtype = metric.name, _TYPES.get(metric.type, metric.type)
        if metric.type == "counter":
            mname += "_total"
        elif metric.type == "info":
            mname += "_info"
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {mname} {doc}\n# TYPE {mname} {mtype}\n")
        om: dict[str, list[str]] = {}
        cache: dict[tuple, str] = {}
        for sample in metric.samples:
            items = tuple(sorted(sample.labels.items()))
            labels = cache.get(items)
            if labels is None:
                inner = ",".join(f'{k}="{label_value(str(v))}"' for k, v in items)
                labels = cache[items] = "{" + inner + "}" if inner else ""
            stamp = "" if sample.timestamp is None else f" {int(float(sample.timestamp) * 1000):d}"
            line = f"{sample.name}{labels} {go_string(sample.value)}{stamp}\n"
            suffix = sample.name[len(metric.name) :] if sample.name.startswith(metric.name) else ""
            if suffix in _OM_SUFFIXES:
                om.setdefault(suffix, []).append(line)
            else:
                out.append(line)
        for suffix, lines in sorted(om.items()):
            out.append(f"# HELP {metric.name}{suffix} {doc}\n# TYPE {metric.name}{suffix} gauge\n")
            out.extend(lines)
    return "".join(out)


def histogram_text(histogram: Histogram) -> str:
    """:func:`text_of` of a labelled prometheus-client histogram, read from its children.

    ``collect()`` builds ~18 ``Sample`` tuples per label set (the learn/predict latency
    histograms: 36,000 for 1,000 models, ~0.4 s per scrape); the children's bucket values
    are read directly instead.  prometheus-client keeps them in private attributes
    (``_metrics``, ``_labelnames``, ``_upper_bounds``, ``_buckets``, ``_sum``, ``_created``;
    the dashboard's latency window reads the same); without them this falls back to
    ``collect()``.  ``tests/test_metrics.py`` checks the text equals ``generate_latest``'s.
    """
    children = getattr(histogram, "_metrics", None)
    names = tuple(getattr(histogram, "_labelnames", ()) or ())
    bounds = getattr(histogram, "_upper_bounds", None)
    name, doc = getattr(histogram, "_name", None), getattr(histogram, "_documentation", None)
    if (
        not isinstance(children, dict)
        or not names
        or "le" in names
        or bounds is None
        or name is None
        or doc is None
        or not all(_LEGACY_NAME.match(n) for n in (name, *names))
    ):
        return text_of(histogram.collect())
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    les = [floatToGoString(b) for b in bounds]
    out = [f"# HELP {name} {doc}\n# TYPE {name} histogram\n"]
    go = GoCache()  # bucket counts are small whole numbers, the same for most label sets
    created: list[str] = []
    with_created = getattr(prometheus_metrics, "_use_created", True)
    lines: list[str] = []
    for values, child in list(children.items()):  # a snapshot: requests may add children
        if len(lines) >= CHUNK_LINES:
            out.append("".join(lines))
            lines.clear()
        pairs = sorted(zip(names, values))
        labels = ",".join(f'{k}="{label_value(str(v))}"' for k, v in pairs)
        before = "".join(f'{k}="{label_value(str(v))}",' for k, v in pairs if k < "le")
        after = "".join(f',{k}="{label_value(str(v))}"' for k, v in pairs if k > "le")
        if isinstance(child, LatencyChild):
            counts, total = child.counts()
        else:
            counts, total = [bucket.get() for bucket in child._buckets], child._sum.get()
        acc = 0.0
        for le, count in zip(les, counts):
            acc += count
            lines.append(f'{name}_bucket{{{before}le="{le}"{after}}} {go(acc)}\n')
        lines.append(f"{name}_count{{{labels}}} {go(acc)}\n")
        if bounds[0] >= 0:
            lines.append(f"{name}_sum{{{labels}}} {go(total)}\n")
        if with_created:
            created.append(f"{name}_created{{{labels}}} {go_string(child._created)}\n")
    out.append("".join(lines))
    if created:
        out.append(f"# HELP {name}_created {doc}\n# TYPE {name}_created gauge\n")
        out.append("".join(created))
    return "".join(out)


#: Lines joined into one string at a time by :func:`histogram_text`: the 10,000 models'
#: histograms are ~180,000 lines; holding them all as separate small strings until the end
#: spread them over the allocator's arenas, some of which stayed held after the scrape.
CHUNK_LINES = 20_000


class GoCache:
    """:func:`go_string` with its answers remembered (one rendering: 10,000 models make ~360,000
    numbers of a few hundred distinct values; the formatting was ~40% of a /metrics render).
    Zero is not cached: ``0.0 == -0.0`` but they are written differently."""

    __slots__ = ("_texts",)

    def __init__(self):
        self._texts: dict[float, str] = {}

    def __call__(self, value: float) -> str:
        text = self._texts.get(value)
        if text is None:
            text = go_string(value)
            if value != 0:
                self._texts[value] = text
        return text


def go_string(value: float) -> str:
    """``floatToGoString`` (Go's float format), with Python's ``repr`` where they agree."""
    value = float(value)
    if -1e18 < value < 1e6:  # finite, and below where Go switches to an exponent
        return repr(value)
    return floatToGoString(value)


class _One:
    def __init__(self, metric: Any):
        self._metric = metric

    def collect(self) -> Iterable[Any]:
        return [self._metric]
