"""``/metrics`` with 1,000 models (a scrape answers in < 100 ms).

A real ``svmstream serve`` process; 1,000 models created with ``PUT /models/{name}``
(budget 20, no warm-up window or buffer so each learns at once), each fed one batch of
200 raw two-moons rows with string labels through ``/learn``, so every per-model family
(prequential accuracy, support vectors, merges, snapshot age, ...) has a sample.  Then
``GET /metrics`` is scraped ``--scrapes`` times over one keep-alive connection (after 3
unmeasured scrapes); the figure is the wall time of each request as the scraper sees it.

Part B, in one process: the same 1,000 models (and 3 learn + 3 predict latency
observations each) rendered by prometheus-client's ``generate_latest`` and by the app's
``ServiceRegistry.exposition`` (what ``/metrics`` sends: same text, rendered directly),
median of 9 renderings each.

Run: ``python -m benchmarks.bench_metrics [--models 1000] [--scrapes 50]``.
Writes ``benchmarks/results/metrics.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common import Server, machine, write_results

GOAL_MS = 100.0


def two_moons(n: int, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 6)) * [1, 10, 100, 1, 1, 1000]  # raw, unscaled columns
    y = np.where(np.sin(2 * X[:, 0]) + (X[:, 1] / 10) ** 2 - 0.5 > 0, "yes", "no")
    return X.tolist(), y.tolist()


def populate(client: httpx.Client, n_models: int) -> float:
    started = time.perf_counter()
    X, y = two_moons(200, seed=0)
    config = {"budget": 20, "warmup": 0, "shuffle_buffer": 0}
    for i in range(n_models):
        name = f"m{i:04d}"
        r = client.put(f"/models/{name}", json=config)
        assert r.status_code == 201, r.text
        r = client.post("/learn", json={"model": name, "X": X, "y": y})
        assert r.status_code == 200, r.text
    return time.perf_counter() - started


def scrape(client: httpx.Client, n: int) -> tuple[list[float], bytes]:
    for _ in range(3):  # connection, first collection
        body = client.get("/metrics").content
    times = []
    for _ in range(n):
        started = time.perf_counter()
        r = client.get("/metrics")
        times.append(time.perf_counter() - started)
        assert r.status_code == 200
        body = r.content
    return times, body


def render_in_process(n_models: int, repeats: int = 9) -> dict:
    from prometheus_client import generate_latest

    from svmstream.app.models.registry import Registry
    from svmstream.app.observability.prometheus import build_registry
    from svmstream.app.settings import Settings

    registry = Registry(Settings(warm_up=False, create_default_model=False), None)
    X, y = two_moons(200, seed=0)
    Xa, ya = np.asarray(X), (np.asarray(y) == "yes").astype(np.int64)
    config = registry.resolve_config(
        {"budget": 20, "warmup": 0, "shuffle_buffer": 0, "classes": ["no", "yes"]}
    )
    futures = [
        registry.create(f"m{i:04d}", config, snapshot=False)[0].submit(Xa, ya) for i in range(n_models)
    ]
    for future in futures:
        future.result()
    prom, requests = build_registry(lambda: registry)
    for i in range(n_models):
        for seconds in (0.002, 0.004, 0.03):
            requests.observe("learn", f"m{i:04d}", seconds)
            requests.observe("predict", f"m{i:04d}", seconds / 10)
    out = {}
    for name, fn in (("generate_latest", lambda: generate_latest(prom)), ("exposition", prom.exposition)):
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            body = fn()
            times.append(time.perf_counter() - started)
        out[name] = {"median_ms": statistics.median(times) * 1e3, "bytes": len(body)}
    registry.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"SVMSTREAM_WARM_UP": "false", "SVMSTREAM_CREATE_DEFAULT_MODEL": "false"}
        with (
            Server(Path(tmp) / "snap", env=env, clean_env=True, log=Path(tmp) / "server.log") as server,
            httpx.Client(base_url=server.url, timeout=120) as client,
        ):
            populate_s = populate(client, args.models)
            load_before = os.getloadavg()[0]
            times, body = scrape(client, args.scrapes)
            load_after = os.getloadavg()[0]
            rss_mb = server.rss_mb()
    part_b = render_in_process(args.models)
    ms = sorted(t * 1e3 for t in times)
    families = list(text_string_to_metric_families(body.decode()))
    samples = sum(len(f.samples) for f in families)
    median = statistics.median(ms)
    result = {
        "models": args.models,
        "scrapes": args.scrapes,
        "median_ms": median,
        "p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "min_ms": ms[0],
        "max_ms": ms[-1],
        "body_bytes": len(body),
        "families": len(families),
        "samples": samples,
        "server_rss_mb": rss_mb,
        "populate_s": populate_s,
        "load_avg_during": [load_before, load_after],
        "goal_ms": GOAL_MS,
        "meets_goal": median < GOAL_MS,
    }
    payload = {"machine": machine(), "result": result, "in_process": part_b, "scrape_ms": ms}
    keys = ("models", "scrapes", "median_ms", "p90_ms", "max_ms", "body_bytes", "samples")
    rows = [{"part": "A: GET /metrics over HTTP", **{k: result[k] for k in keys}}] + [
        {"part": "B: rendering in one process", "renderer": name, "models": args.models, **figures}
        for name, figures in part_b.items()
    ]
    write_results(
        "metrics",
        payload,
        rows,
        "GET /metrics with 1,000 models",
        notes=(
            "`python -m benchmarks.bench_metrics`: a real `svmstream serve`, 1,000 models that each "
            "learned 200 raw rows, /metrics scraped over one keep-alive connection (client-side wall "
            f"time). Goal: median < {GOAL_MS:.0f} ms; load average during the scrapes "
            f"{load_before:.2f} -> {load_after:.2f}."
        ),
    )


if __name__ == "__main__":
    main()
