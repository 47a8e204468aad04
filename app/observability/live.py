"""The dashboard's live feed: one JSON event per tick for every ``GET /events`` subscriber.

:class:`LiveFeed` builds the event once per tick (default 1 s) in a worker thread and hands
the same serialised bytes to every subscriber, so the cost does not grow with the number of
open dashboards; it ticks only while someone subscribes.  The figures are the ones the
service already keeps (nothing is counted twice):

* per model -- :class:`~svmstream.app.models.handle.ModelHandle`'s meters (prequential
  accuracy window, rate meter), its published view's statistics (support vectors, merges,
  drift detections, examples seen, version, classes), its snapshot bookkeeping and its
  stream consumer's cached status (lag, dead letters) -- the same sources as ``/metrics``
  (:mod:`.prometheus`);
* learn/predict latency p50/p99 -- estimated from the buckets of the request latency
  histogram ``svmstream_request_latency_seconds`` over the last :data:`LATENCY_WINDOW_S`
  seconds (Prometheus' ``histogram_quantile`` of the bucket increase: linear within a bucket);
* jobs -- :meth:`~svmstream.app.jobs.runner.JobRunner.list` records.

With many models the event holds aggregate figures over all of them and the full figures of
the first :data:`MAX_MODELS` models by name only (docs/dashboard.md).  Only the app factory
(:mod:`svmstream.app.main`) imports this module; the route reads ``app.state.live``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import orjson

from svmstream.app.models.kind import model_kind, race_figures

log = logging.getLogger("svmstream.live")

MAX_MODELS = 20
"""Models whose full figures an event carries (the first ones by name); the totals cover all."""
MAX_JOBS = 20
"""Jobs an event carries (the newest)."""
MAX_CLASSES = 20
"""Class labels listed per model (``n_classes`` always counts all of them)."""
MAX_PROMOTIONS = 5
"""Promotions listed per model (the newest; ``promotions`` counts all of them)."""
TICK_S = 1.0
"""Seconds between two events."""
LATENCY_WINDOW_S = 10.0
"""Latency quantiles are over the requests of this many past seconds."""
ROUTES = ("learn", "predict")


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of a histogram, as Prometheus' ``histogram_quantile`` estimates it.

    Parameters
    ----------
    q : float in [0, 1]
    buckets : sequence of (upper bound, cumulative count), increasing bounds, the last
        ``+inf``.

    Returns
    -------
    float or None
        Linear interpolation inside the bucket holding the rank ``q * total`` (the lowest
        bucket starts at 0; a rank in the ``+inf`` bucket gives the highest finite bound);
        None without observations.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank and cumulative > below:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / (cumulative - below)
        if bound != float("inf"):
            lower = bound
        below = cumulative
    return lower


class LatencyWindow:
    """Learn/predict latency quantiles per model over the last ``window_s`` seconds.

    Each :meth:`update` reads the cumulative bucket counts of the histogram (its public
    ``collect()``) for the models asked about and keeps them for ``window_s``; a quantile is
    taken over the increase since the oldest kept reading (a model with no request in the
    window has none).  After an idle gap (no update for ``2 * window_s``: nobody watched)
    the first update only takes a reading: requests made before it are not counted.
    """

    def __init__(self, window_s: float = LATENCY_WINDOW_S):
        self.window_s = float(window_s)
        self._readings: deque[tuple[float, dict[tuple[str, str], list[tuple[float, float]]]]] = deque()

    @staticmethod
    def read(histogram: Any, models: set[str]) -> dict[tuple[str, str], list[tuple[float, float]]]:
        """``{(route, model): [(le, cumulative count), ...]}`` of ``histogram`` for ``models``.

        Collects only the label children of ``models``: the whole histogram's ``collect()``
        makes ~18 samples per (route, model), a median 145 ms per event with 1,000 models.
        prometheus-client keeps the children in ``_metrics`` (keyed by label values); if a
        version does not, the whole histogram is collected and filtered.
        """
        children = getattr(histogram, "_metrics", None)
        names = tuple(getattr(histogram, "_labelnames", ()))
        if not isinstance(children, dict) or "route" not in names or "model" not in names:
            return LatencyWindow._read_all(histogram, models)
        i_route, i_model = names.index("route"), names.index("model")
        out: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for values, child in list(children.items()):  # a snapshot: requests may add children
            if values[i_model] not in models:
                continue
            cumulative = getattr(child, "cumulative", None)  # a LatencyHistogram's child: no Sample objects
            if cumulative is not None:
                out[(values[i_route], values[i_model])] = cumulative()[0]
            else:
                out[(values[i_route], values[i_model])] = LatencyWindow._buckets(child.collect())
        return out

    @staticmethod
    def _buckets(families: Iterable[Any]) -> list[tuple[float, float]]:
        series = [
            (float(sample.labels["le"]), float(sample.value))
            for family in families
            for sample in family.samples
            if sample.name.endswith("_bucket")
        ]
        return sorted(series)

    @staticmethod
    def _read_all(histogram: Any, models: set[str]) -> dict[tuple[str, str], list[tuple[float, float]]]:
        out: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for family in histogram.collect():
            for sample in family.samples:
                model = sample.labels.get("model")
                if sample.name.endswith("_bucket") and model in models:
                    key = (sample.labels.get("route", ""), model)
                    out.setdefault(key, []).append((float(sample.labels["le"]), float(sample.value)))
        for series in out.values():
            series.sort()
        return out

    def update(self, histogram: Any, models: set[str], now: float) -> dict[str, dict[str, Any]]:
        """Read the histogram now; ``{model: {route: {"p50", "p99", "n"}}}`` over the window."""
        current = self.read(histogram, models) if histogram is not None else {}
        if self._readings and self._readings[-1][0] < now - 2 * self.window_s:
            # the feed was idle (no subscriber): an old reading would stretch the window
            self._readings.clear()
        self._readings.append((now, current))
        # keep one reading at or before the window start as the base
        while len(self._readings) >= 2 and self._readings[1][0] <= now - self.window_s:
            self._readings.popleft()
        if len(self._readings) < 2:
            return {}  # a first reading: no increase to measure yet
        base = self._readings[0][1]
        out: dict[str, dict[str, Any]] = {}
        for (route, model), series in current.items():
            before = dict(base.get((route, model), ()))
            delta = [(le, count - before.get(le, 0.0)) for le, count in series]
            n = delta[-1][1] if delta else 0.0
            if n <= 0:
                continue
            out.setdefault(model, {})[route] = {
                "p50": histogram_quantile(0.5, delta),
                "p99": histogram_quantile(0.99, delta),
                "n": int(n),
            }
        return out


def _stream_status(handle: Any) -> dict[str, Any] | None:
    """The stream consumer's cached status, or None (no stream, or its read failed: a
    dashboard tick must not fail for one model)."""
    if handle.stream_status is None:
        return None
    try:
        return handle.stream_status()
    except Exception:  # noqa: BLE001
        log.exception("model %r: stream status failed", handle.name)
        return None


def _promotion_event(event: dict[str, Any]) -> dict[str, Any]:
    evidence = event.get("evidence") or {}
    return {
        "at": event.get("at"),
        "time": event.get("time"),
        "manual": bool(event.get("manual")),
        "origin": event.get("origin"),
        "settings": event.get("settings") or {},
        "e_value": evidence.get("e_value"),
        "threshold": evidence.get("threshold"),
        "wins": evidence.get("wins"),
        "losses": evidence.get("losses"),
        "paired_examples": evidence.get("paired_examples"),
    }


def promotion_figures(handle: Any) -> dict[str, Any]:
    """``challengers`` (how many), ``promotions`` (the model's count, as
    ``svmstream_promotions_total``) and ``recent_promotions``: the newest
    :data:`MAX_PROMOTIONS` ``promoted`` events of the history, newest first, each with ``at``
    (example), ``time``, ``manual``, ``origin`` (``user``/``drift``), the challenger's
    ``settings`` and its evidence (``e_value``, ``threshold``, ``wins``, ``losses``,
    ``paired_examples``; ``docs/challengers.md``).  Counters only: no wait for the learner."""
    described = getattr(handle.view, "challengers", None)  # as published with the view
    if described is None:
        cs = getattr(handle, "challengers", None)
        if cs is None:
            return {"challengers": 0, "promotions": 0, "recent_promotions": []}
        described = {
            "challengers": cs.entries,
            "promotion": {"promotions": cs.promotions, "history": cs.history},
        }
    promotion = described["promotion"] or {}
    history = list(promotion.get("history", []))  # a copy: the learner may append to a live one
    promoted = [e for e in reversed(history) if e.get("event") == "promoted"][:MAX_PROMOTIONS]
    return {
        "challengers": len(described["challengers"]),
        "promotions": int(promotion.get("promotions", 0)),
        "recent_promotions": [_promotion_event(e) for e in promoted],
    }


def model_figures(handle: Any, now: float) -> dict[str, Any]:
    """The dashboard figures of one :class:`~svmstream.app.models.handle.ModelHandle`.

    Reads what ``/metrics`` reads (the published view, the meters, the stream consumer's
    cached status); never waits for the learner or for Redis.  ``examples_per_s`` is the
    live rate (it decays to 0 when nothing arrives), ``accuracy`` the prequential accuracy
    over the sliding window (None before the first learned example).
    """
    view = handle.view
    stats = view.stats
    classes = list(view.codec.public_classes)
    out: dict[str, Any] = {
        "name": handle.name,
        "algorithm": handle.config.algorithm,
        "budget": handle.config.budget,
        "classes": classes[:MAX_CLASSES],
        "n_classes": len(classes),
        "version": view.version,
        "last_snapshot_time": handle.last_snapshot_time,
        "task": handle.config.task,
        "accuracy": handle.prequential.accuracy(),
        "accuracy_window": handle.prequential.count(),
        # a regression model's MAE/RMSE/coverage, a novelty model's outlier rate (task_outputs.py)
        **{k: v for k, v in handle.prequential.figures().items() if k != "prequential_accuracy"},
        "examples_per_s": handle.rate.rate(),
        "examples_applied": stats.get("n_seen", 0),
        "support_vectors": stats.get("n_support_vectors", 0),
        "merges": stats.get("n_merges", 0),
        "drift_detections": stats.get("drift", {}).get("detections", 0),
        "warming_up": bool(stats.get("warming_up")),
        "pending_examples": stats.get("pending", 0),
        "kind": model_kind(handle.config, stats),
        "race": race_figures(stats),
        "latency": {},
        "stream": None,
        **promotion_figures(handle),
    }
    status = _stream_status(handle)
    if status:
        out["stream"] = {
            "lag": status.get("lag"),
            "lag_seconds": status.get("lag_seconds"),
            "pending": status.get("pending"),
            "dead_letters": status.get("dead_letters", 0),
            "connected": bool(status.get("connected")),
        }
    return out


def progress_fraction(state: str, progress: dict[str, Any]) -> float | None:
    """The fraction done of a job's current stage, for a progress bar (None: unknown).

    The solvers report no overall fraction: DC-SVM levels report ``subproblems_done`` of
    ``subproblems``, linear CD its ``iteration`` of at most ``iterations``; a succeeded job
    is 1.
    """
    if state == "succeeded":
        return 1.0
    for done_key, total_key in (("subproblems_done", "subproblems"), ("iteration", "iterations")):
        done, total = progress.get(done_key), progress.get(total_key)
        if isinstance(done, int | float) and isinstance(total, int | float) and total > 0:
            return max(0.0, min(1.0, done / total))
    return None


def job_figures(record: dict[str, Any]) -> dict[str, Any]:
    """The dashboard figures of one job record (:meth:`Job.to_json` shape, without timeline)."""
    progress = record.get("progress") or {}
    return {
        "id": record["id"],
        "state": record["state"],
        "algorithm": record["algorithm"],
        "model": record["model"],
        "phase": progress.get("phase"),
        "stage": progress.get("stage"),
        "level": progress.get("level"),
        "problem": progress.get("problem"),
        "n_problems": progress.get("n_problems"),
        "fraction": progress_fraction(record["state"], progress),
        "elapsed_s": record.get("elapsed_s"),
        "error": record.get("error"),
    }


def build_event(
    handles: Iterable[Any],
    job_records: Iterable[dict[str, Any]],
    latency: LatencyWindow,
    histogram: Any,
    *,
    max_models: int = MAX_MODELS,
    now: float | None = None,
    served: Callable[[str], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One event: totals over all models, the first ``max_models`` models by name, the jobs.

    Parameters
    ----------
    handles : iterable of ModelHandle
    job_records : iterable of dict
        Job records, newest first (at most :data:`MAX_JOBS` are kept).
    latency : LatencyWindow
    histogram : prometheus_client.Histogram or None
        The request latency histogram (labels ``route``, ``model``).
    served : callable (model name) -> dict, optional
        The served accuracy and log-loss of a model (``served_accuracy``, ``served_log_loss``),
        merged into its figures (``docs/feedback.md``).

    Returns
    -------
    dict
        ``{"time", "totals": {...}, "models": [...], "jobs": [...]}`` (docs/dashboard.md).
    """
    now = time.time() if now is None else now
    handles = sorted(handles, key=lambda h: h.name)
    totals = {"models": len(handles), "shown": 0, "examples_per_s": 0.0, "examples_applied": 0}
    totals.update(support_vectors=0, merges=0, drift_detections=0, promotions=0, dead_letters=0)
    shown: list[dict[str, Any]] = []
    for i, handle in enumerate(handles):
        if i < max_models:
            fig = model_figures(handle, now)
            if served is not None:
                fig.update(served(handle.name))
            shown.append(fig)
        else:  # the cheap figures only
            stats = handle.view.stats
            status = _stream_status(handle)
            fig = {
                "examples_per_s": handle.rate.rate(),
                "examples_applied": stats.get("n_seen", 0),
                "support_vectors": stats.get("n_support_vectors", 0),
                "merges": stats.get("n_merges", 0),
                "drift_detections": stats.get("drift", {}).get("detections", 0),
                "promotions": getattr(getattr(handle, "challengers", None), "promotions", 0),
                "stream": {"dead_letters": status.get("dead_letters", 0)} if status else None,
            }
        for key in (
            "examples_per_s", "examples_applied", "support_vectors", "merges", "drift_detections", "promotions"
        ):  # fmt: skip
            totals[key] += fig[key]
        if fig["stream"]:
            totals["dead_letters"] += fig["stream"]["dead_letters"]
    totals["shown"] = len(shown)
    quantiles = latency.update(histogram, {fig["name"] for fig in shown}, time.monotonic())
    for fig in shown:
        fig["latency"] = quantiles.get(fig["name"], {})
    jobs = [job_figures(r) for _, r in zip(range(MAX_JOBS), job_records)]
    return {"time": now, "interval_s": TICK_S, "totals": totals, "models": shown, "jobs": jobs}


class LiveFeed:
    """Builds the dashboard event once per tick and fans it out to the subscribers.

    Parameters
    ----------
    get_handles : callable () -> iterable of ModelHandle
        Empty before the lifespan has opened the registry.
    get_jobs : callable () -> iterable of dict
        Job records, newest first.
    get_histogram : callable () -> prometheus_client.Histogram or None
        The request latency histogram.
    interval_s : float
        Seconds between ticks (:data:`TICK_S`).
    max_models : int
        :data:`MAX_MODELS`.
    """

    def __init__(
        self,
        get_handles: Callable[[], Iterable[Any]],
        get_jobs: Callable[[], Iterable[dict[str, Any]]],
        get_histogram: Callable[[], Any],
        *,
        interval_s: float = TICK_S,
        max_models: int = MAX_MODELS,
        served: Callable[[str], dict[str, Any]] | None = None,
    ):
        self._get_handles = get_handles
        self._served = served
        self._get_jobs = get_jobs
        self._get_histogram = get_histogram
        self.interval_s = float(interval_s)
        self.max_models = int(max_models)
        self._latency = LatencyWindow()
        self._subscribers = 0
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick: asyncio.Event | None = None
        self._payload: bytes | None = None
        self.builds = 0  # events built so far (once per tick, whatever the subscriber count)

    @property
    def subscribers(self) -> int:
        return self._subscribers

    def build(self) -> bytes:
        """One event, serialised (runs in a worker thread)."""
        event = build_event(
            self._get_handles(),
            self._get_jobs(),
            self._latency,
            self._get_histogram(),
            max_models=self.max_models,
            served=self._served,
        )
        self.builds += 1
        return orjson.dumps(event, option=orjson.OPT_SERIALIZE_NUMPY)

    def _ensure_ticking(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (e.g. another test client): start afresh
            self._loop, self._task, self._tick, self._payload = loop, None, asyncio.Event(), None
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._subscribers > 0:
            payload = await asyncio.to_thread(self.build)
            self._payload = payload
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()  # wake every subscriber waiting for this tick
            await asyncio.sleep(self.interval_s)
        # no await between the check above and this line: a new subscriber restarts the task
        self._task = None

    async def subscribe(self) -> AsyncIterator[bytes]:
        """The serialised events from now on: the latest one at once (if any), then one per tick."""
        self._subscribers += 1
        try:
            self._ensure_ticking()
            if self._payload is not None:
                yield self._payload
            while True:
                await self._tick.wait()
                yield self._payload
        finally:
            self._subscribers -= 1
