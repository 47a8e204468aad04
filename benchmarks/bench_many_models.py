"""Thousands of models in one service.

A real ``svmstream serve``; N models (default 10,000; one per customer) created over HTTP
with no settings (``PUT /models/{name}`` with ``{}``) and each taught one batch of 20 raw
rows with string labels (``POST /learn``, 8 client threads).  Figures: the service's RSS and
thread count after all were taught (idle models beyond ``SVMSTREAM_MAX_LOADED_MODELS`` parked,
``docs/deployment.md``), ``GET /metrics`` time (median of 5) and size, the final
snapshots at SIGTERM, and the restart: time from starting the process to ``/health`` (every
model registered: lazy restore reads each snapshot's header, ``docs/service.md``), the server's
CPU seconds and RSS then, the first ``/predict`` of one model (its snapshot decoded on first
use) and the next one, one ``/learn`` on it, and the SIGTERM of the restarted service (only
that model is rewritten).  Load averages are recorded at each phase (the machine is shared).

Usage: ``python -m benchmarks.bench_many_models [--models 10000]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import Server, machine, write_results


def _figures(svc, http) -> dict:
    import psutil

    proc = psutil.Process(svc.proc.pid)
    rss_before = proc.memory_info().rss / 2**20  # before /metrics renders its text (28 MB at 10,000)
    times = []
    size = 0
    for _ in range(5):
        started = time.perf_counter()
        r = http.get("/metrics")
        times.append(time.perf_counter() - started)
        size = len(r.content)
    cpu = proc.cpu_times()
    return {
        "rss_mb_before_metrics": rss_before,
        "rss_mb": proc.memory_info().rss / 2**20,
        "threads": proc.num_threads(),
        "metrics_s_median": float(np.median(times)),
        "metrics_bytes": size,
        "server_cpu_s": cpu.user + cpu.system,
        "load_avg": os.getloadavg()[0],
    }


def main(argv=None) -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    args = parser.parse_args(argv)
    n = args.models
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 6)) * 40.0 + 5.0
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 5.0, "churn", "stay").tolist()
    body = {"X": X.tolist(), "y": y}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-many-") as tmpdir:
        snap = Path(tmpdir) / "snapshots"
        env = {"SVMSTREAM_LOG_LEVEL": "warning", "SVMSTREAM_SNAPSHOT_INTERVAL_S": "3600"}
        svc = Server(snap, env=env, clean_env=True, log=Path(tmpdir) / "a.log", log_level=None)
        with svc:
            http = httpx.Client(base_url=svc.url, timeout=120)
            base = _figures(svc, http)
            started = time.perf_counter()

            def one(k):
                with httpx.Client(base_url=svc.url, timeout=120) as c:
                    for j in range(k, n, 8):
                        name = f"customer-{j:05d}"
                        assert c.put(f"/models/{name}", json={}).status_code == 201
                        r = c.post("/learn", json={"model": name, **body})
                        assert r.status_code == 200, r.text

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(one, range(8)))
            taught_s = time.perf_counter() - started
            after = _figures(svc, http)
            rows.append({"phase": "empty service", **base})
            rows.append({"phase": f"{n:,} models, one batch each", "seconds": taught_s, **after})
            print(rows, flush=True)
            started = time.perf_counter()
            svc.proc.send_signal(signal.SIGTERM)
            svc.proc.wait(600)
            rows.append({"phase": "SIGTERM with final snapshots", "seconds": time.perf_counter() - started})
        files = sum(1 for _ in snap.rglob("*.svm*"))
        import psutil

        started = time.perf_counter()
        svc2 = Server(snap, env=env, clean_env=True, log=Path(tmpdir) / "b.log", log_level=None)
        svc2.wait_ready(lambda path: httpx.get(svc2.url + path, timeout=5), timeout=600, delay=0.05)
        restart_s = time.perf_counter() - started
        cpu = psutil.Process(svc2.proc.pid).cpu_times()
        restart_cpu = cpu.user + cpu.system
        load = os.getloadavg()[0]
        http2 = httpx.Client(base_url=svc2.url, timeout=120)
        started = time.perf_counter()
        listed = http2.get("/models")
        list_s = time.perf_counter() - started
        n_models = len(listed.json()["models"]) if listed.status_code == 200 else None
        rows.append(
            {
                "phase": "restart to /health",
                "seconds": restart_s,
                "models": n_models,
                "server_cpu_s": restart_cpu,
                "load_avg": load,
                "get_models_s": list_s,
                **{k: v for k, v in _figures(svc2, http2).items() if k not in ("server_cpu_s", "load_avg")},
            }
        )
        name = "customer-00042"
        predict = {"model": name, "X": X[:5].tolist()}
        for phase in ("first /predict after restart (decodes the snapshot)", "second /predict"):
            started = time.perf_counter()
            r = http2.post("/predict", json=predict)
            rows.append({"phase": phase, "seconds": time.perf_counter() - started, "status": r.status_code})
        started = time.perf_counter()
        r = http2.post("/learn", json={"model": name, **body})
        rows.append(
            {
                "phase": "one /learn after restart",
                "seconds": time.perf_counter() - started,
                "status": r.status_code,
            }
        )
        started = time.perf_counter()
        svc2.proc.send_signal(signal.SIGTERM)
        svc2.proc.wait(600)
        rows.append(
            {
                "phase": "SIGTERM of the restarted service (one model learned)",
                "seconds": time.perf_counter() - started,
                "files_written": sum(1 for _ in snap.rglob("*.svm*")) - files,
            }
        )
    payload = {"machine": machine(), "models": n, "snapshot_files": files, "rows": rows}
    payload["load_avg_at_end"] = os.getloadavg()[0]
    write_results(
        "many_models",
        payload,
        rows,
        f"{n:,} models in one service",
        notes="Targets: RSS < 400 MB, threads < 50, /metrics < 1 s, restart to /health < 10 s. Models created "
        "with {} (no settings) and taught one batch of 20 raw rows each over HTTP from 8 client threads. "
        "Default settings: beyond SVMSTREAM_MAX_LOADED_MODELS = 1,000 decoded models, idle ones are "
        "snapshotted and parked (docs/deployment.md). rss_mb_before_metrics: after teaching; rss_mb: after "
        "the five /metrics scrapes.",
    )


if __name__ == "__main__":
    main()
