"""Cost of the dashboard's live feed: ``python -m benchmarks.bench_dashboard``.

Part A: the time to build one ``/events`` event (``LiveFeed.build``: figures, latency
quantiles, JSON) in-process, for registries of 1 to 1,000 learned models, and its size.
Part B: CPU seconds a real idle server with 20 learned models spends per second with 0, 1
and 10 open ``/events`` subscriptions: the event is built once per tick whatever the number
of subscribers, so only the sending grows with them.

Writes ``benchmarks/results/dashboard.json`` and ``.md``.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
from prometheus_client import CollectorRegistry

from benchmarks.common import Server, machine, write_results
from svmstream.app.models.registry import Registry
from svmstream.app.observability.live import MAX_MODELS, LiveFeed
from svmstream.app.observability.prometheus import RequestMetrics
from svmstream.app.settings import Settings

MODEL = {"classes": [-1, 1], "warmup": 100, "shuffle_buffer": 0, "budget": 100}


def learned_registry(n_models: int, rng) -> tuple[Registry, RequestMetrics]:
    """``n_models`` models of 300 examples each, and request histograms with one learn and
    one predict observation per model (what the feed reads)."""
    registry = Registry(Settings(create_default_model=False, warm_up=False), None)
    metrics = RequestMetrics(CollectorRegistry())
    config = registry.resolve_config(dict(MODEL))
    futures = []
    for i in range(n_models):
        name = f"m{i:04d}"
        registry.create(name, config, snapshot=False)
        X = rng.normal(size=(300, 8))
        y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
        futures.append(registry.learn(name, X, y))
        metrics.observe("learn", name, 0.004)
        metrics.observe("predict", name, 0.001)
    for future in futures:
        future.result(timeout=600)
    return registry, metrics


def part_a(sizes=(1, 20, 100, 1000), repeats: int = 30) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        registry, metrics = learned_registry(n, rng)
        feed = LiveFeed(registry.handles, lambda: (), lambda m=metrics: m.latency)
        feed.build()  # first reading of the latency window
        times, size = [], 0
        for _ in range(repeats):
            started = time.perf_counter()
            size = len(feed.build())
            times.append(time.perf_counter() - started)
        registry.close()
        rows.append(
            {
                "part": "A",
                "models": n,
                "models_in_full": min(n, MAX_MODELS),
                "build_ms_median": 1000 * statistics.median(times),
                "build_ms_max": 1000 * max(times),
                "event_kb": size / 1024,
            }
        )
        print(rows[-1], flush=True)
    return rows


def part_b(seconds: float = 15.0) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Server(Path(tmp) / "snapshots") as server:
        rng = np.random.default_rng(1)
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for i in range(MAX_MODELS):
                name = f"m{i:02d}"
                assert c.put(f"/models/{name}", json=MODEL).status_code == 201
                X = rng.normal(size=(300, 8))
                y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
                assert (
                    c.post("/learn", json={"model": name, "x": X.tolist(), "y": y.tolist()}).status_code
                    == 200
                )
        proc = psutil.Process(server.proc.pid)
        for subscribers in (0, 1, 10):
            stop = threading.Event()
            received = [0] * subscribers

            def read(i: int, received=received, stop=stop) -> None:
                with httpx.stream("GET", server.url + "/events", timeout=60) as response:
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            received[i] += 1
                        if stop.is_set():
                            return

            threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(subscribers)]
            for t in threads:
                t.start()
            time.sleep(2.0)  # connected, ticking
            before = proc.cpu_times()
            start_counts = list(received)
            time.sleep(seconds)
            after = proc.cpu_times()
            events = [r - s for r, s in zip(received, start_counts)]
            stop.set()
            for t in threads:
                t.join(5)
            cpu = (after.user + after.system) - (before.user + before.system)
            rows.append(
                {
                    "part": "B",
                    "subscribers": subscribers,
                    "seconds": seconds,
                    "server_cpu_ms_per_s": 1000 * cpu / seconds,
                    "events_per_subscriber_per_s": (sum(events) / subscribers / seconds)
                    if subscribers
                    else None,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    info = machine()
    rows = part_a() + part_b()
    write_results(
        "dashboard",
        {"machine": info, "rows": rows},
        rows,
        "Dashboard live feed: event build time and server CPU per subscriber count",
        notes=(
            "Part A: LiveFeed.build() in-process (figures of the first 20 models by name, cheap "
            "counters of the rest, latency quantiles, orjson), median of 30 builds. Part B: a real "
            "idle server with 20 learned models; server CPU over 15 s with N open /events streams."
        ),
    )


if __name__ == "__main__":
    main()
