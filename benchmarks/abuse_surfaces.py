"""The abuse probes of the newest surfaces (issue 42), for ``benchmarks/bench_abuse.py``:

* :func:`pinned_probe` -- a model whose snapshots are ~82 MB (shuffle buffer and rehearsal
  memory full at d = 490, as near the issue's 90 MB as the model's byte bounds let them grow, drift handling off so that they stay full), 8 versions of it; 8 tokenless clients each pinning another version
  (``/predict {"version": v}``, 15 KB bodies) back to back for 20 s: RSS growth (peak sampled
  every 20 ms, and after), ``/health`` latency meanwhile, the statuses (200, or 503 with
  ``Retry-After`` while another version is decoded);
* :func:`remember_probe` -- an authenticated client remembers 1,000 rows, the tokenless clients
  send their requests once without ``remember`` (the server's own growth serving them, apart),
  then remember 1,000,000 rows (d = 22, ``/predict`` with ``remember``, 1,000 a request): RSS
  growth against the tokenless quota, the store's figures, and whether every authenticated id
  is still learned by ``/feedback``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

from benchmarks.abuse_probes import HealthWatch, rss_mb
from benchmarks.common import Server

BIG_D = 490
BIG = {"budget": 200, "gamma": 0.01, "C": 10, "n_features": BIG_D, "on_drift": "none"}


class Peak:
    """Samples a process's RSS every 20 ms in a thread (context manager): ``before``, ``peak``."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self) -> Peak:
        self.before = self.peak = rss_mb(self.pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            self._done.wait(0.02)

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def _big_model(client: httpx.Client, auth: dict, versions: int) -> list[int]:
    """Model ``big`` with ``versions`` snapshotted versions of ~82 MB each; their numbers."""
    rng = np.random.default_rng(0)
    assert client.put("/models/big", json=BIG, headers=auth).status_code == 201
    out = []
    for k in range(15 + versions):
        X = rng.normal(size=(2000, BIG_D)).round(4)
        y = (X[:, 0] + X[:, 1] > 0).astype(int)
        r = client.post("/learn", json={"model": "big", "x": X.tolist(), "y": y.tolist()}, headers=auth)
        assert r.status_code == 200, r.text
        if k >= 15:
            r = client.post("/models/big/snapshot", headers=auth)
            assert r.status_code == 200, r.text
            out.append(r.json()["version"])
    return out


def pinned_probe(tmp: Path, env: dict, auth: dict, seconds: float = 20.0, clients: int = 8) -> dict:
    """See the module docstring."""
    with Server(
        tmp / "pinned", env={**env, "SVMSTREAM_SNAPSHOT_INTERVAL_S": "100000"}, clean_env=True
    ) as server:
        with httpx.Client(base_url=server.url, timeout=300) as client:
            versions = _big_model(client, auth, clients)
            listed = client.get("/models/big/versions").json()["versions"]
        sizes = [v["size_bytes"] for v in listed if v["version"] in versions]
        probe = np.random.default_rng(1).normal(size=(4, BIG_D)).round(4).tolist()
        statuses: dict[int, int] = {}
        lock = threading.Lock()
        stop = time.monotonic() + seconds

        def pin(version: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                while time.monotonic() < stop:
                    code = c.post(
                        "/predict", json={"model": "big", "x": probe, "version": version}
                    ).status_code
                    with lock:
                        statuses[code] = statuses.get(code, 0) + 1
                    if code == 503:
                        time.sleep(0.05)

        time.sleep(1.0)
        with HealthWatch(
            server.url, process=True
        ) as idle:  # the machine's own /health latency, for comparison
            time.sleep(5.0)
        with Peak(server.proc.pid) as rss, HealthWatch(server.url, process=True) as health:
            threads = [threading.Thread(target=pin, args=(v,)) for v in versions[:clients]]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        after = rss_mb(server.proc.pid)
        body = len(orjson.dumps({"model": "big", "x": probe, "version": 1}))
    return {
        "clients": clients,
        "seconds": seconds,
        "snapshot_mb": [round(s / 1e6, 1) for s in sizes],
        "request_kb": round(body / 1e3, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "rss_before_mb": round(rss.before, 1),
        "rss_peak_growth_mb": round(rss.peak - rss.before, 1),
        "rss_growth_after_mb": round(after - rss.before, 1),
        "health_idle_p50_ms": round(idle.p(0.5), 1),
        "health_idle_p99_ms": round(idle.p(0.99), 1),
        "health_p50_ms": round(health.p(0.5), 1),
        "health_p99_ms": round(health.p(0.99), 1),
        "health_max_ms": round(max(health.latencies_ms, default=float("nan")), 1),
        "health_failures": health.failures,
        "load_avg": [round(x, 1) for x in os.getloadavg()],
    }


def _predict_clients(url: str, body: dict, clients: int, per_client: int, statuses: dict) -> None:
    """``clients`` tokenless clients each sending ``body`` to ``/predict`` ``per_client`` times;
    counts the statuses in ``statuses``."""
    lock = threading.Lock()

    def run() -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            for _ in range(per_client):
                code = c.post("/predict", json=body).status_code
                with lock:
                    statuses[code] = statuses.get(code, 0) + 1

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def remember_quotas(open_mib: int) -> dict[str, str]:
    """The remember probe's feedback store: a tokenless quota of ``open_mib`` MiB, all of it one
    model's, and twice that for the whole store."""
    quota = open_mib << 20
    return {
        "SVMSTREAM_FEEDBACK_MAX_BYTES": str(2 * quota),
        "SVMSTREAM_FEEDBACK_OPEN_MAX_BYTES": str(quota),
        "SVMSTREAM_FEEDBACK_OPEN_MODEL_BYTES": str(quota),
    }


def remember_rows() -> tuple[np.ndarray, np.ndarray]:
    """The remember probe's 1,000 rows (d = 22) and labels, learned first, then sent again and again."""
    X = np.random.default_rng(2).normal(size=(1000, 22)).round(4)
    return X, (X[:, 0] > 0).astype(int)


def remember_probe(
    tmp: Path, env: dict, auth: dict, rows: int = 1_000_000, open_mib: int = 64, clients: int = 4
) -> dict:
    """See the module docstring (``open_mib``: the tokenless quota, all of it one model's)."""
    settings = {"SVMSTREAM_SNAPSHOT_INTERVAL_S": "2", **env, **remember_quotas(open_mib)}
    X, y = remember_rows()
    with Server(tmp / "remember", env=settings, clean_env=True) as server:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            cfg = {"budget": 100, "gamma": 0.1, "C": 10}
            assert client.put("/models/fb", json=cfg, headers=auth).status_code == 201
            assert (
                client.post(
                    "/learn", json={"model": "fb", "x": X.tolist(), "y": y.tolist()}, headers=auth
                ).status_code
                == 200
            )
            client.post("/models/fb/flush", headers=auth)
            mine = client.post(
                "/predict", json={"model": "fb", "x": X.tolist(), "remember": True}, headers=auth
            ).json()["ids"]
        per_client = rows // (1000 * clients)
        statuses: dict[int, int] = {}
        # the same requests without remember first: the server's own growth serving them
        serving_before = rss_mb(server.proc.pid)
        _predict_clients(server.url, {"model": "fb", "x": X.tolist()}, clients, per_client, {})
        time.sleep(3.0)
        started = time.perf_counter()
        body = {"model": "fb", "x": X.tolist(), "remember": True}
        with Peak(server.proc.pid) as rss, HealthWatch(server.url, interval=0.1, process=True) as health:
            _predict_clients(server.url, body, clients, per_client, statuses)
            time.sleep(3.0)  # a snapshotter round saves the store
        wall = time.perf_counter() - started
        after = rss_mb(server.proc.pid)
        with httpx.Client(base_url=server.url, timeout=120) as client:
            fb = client.post(
                "/feedback", json={"model": "fb", "ids": mine, "y": y.tolist()}, headers=auth
            ).json()
            metrics = client.get("/metrics").text
    figures = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("svmstream_feedback_") and not line.startswith("#") and len(line.split()) == 2
    }
    return {
        "rows": per_client * 1000 * clients,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "tokenless_quota_mib": open_mib,
        "store_bound_mib": 2 * open_mib,
        "rss_growth_serving_without_remember_mib": round(rss.before - serving_before, 1),
        "rss_before_mb": round(rss.before, 1),
        "rss_peak_growth_mib": round(rss.peak - rss.before, 1),
        "rss_growth_after_mib": round(after - rss.before, 1),
        "rss_growth_vs_quota": round((after - rss.before) / open_mib, 3),
        "authenticated_ids": len(mine),
        "authenticated_learned": fb.get("learned"),
        "authenticated_expired": fb.get("expired"),
        "store_metrics": figures,
        "wall_s": round(wall, 1),
        "health_p99_ms": round(health.p(0.99), 1),
    }
