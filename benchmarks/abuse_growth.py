"""More probes of ``benchmarks/bench_abuse.py``: labels, a model that grows past the
server-wide bound, concurrent large ``/learn`` bodies, and ``/metrics`` scrapes with many
models.  Loopback only, bounded in count and time; the server is measured from outside."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.abuse_probes import HealthWatch, body_attack, predict_body, rss_mb
from benchmarks.common import Server


def _dir_bytes(path: Path, pattern: str) -> int:
    """Size of the largest file under ``path`` matching ``pattern`` (0 if none)."""
    return max((p.stat().st_size for p in path.rglob(pattern) if p.is_file()), default=0)


def label_probes(client: httpx.Client, pid: int, auth: dict, snapshots: Path, wait_s: float) -> dict:
    """A model that learns its classes gets 1 KB labels, then 1,000-label batches of the longest
    label allowed; one with ``max_classes`` 100,000 gets up to 60,000 such labels.  Both hold
    their rows in a long warm-up window (the labels are committed, nothing is learned: a
    one-vs-rest step over thousands of classes would take minutes)."""
    rss = rss_mb(pid)
    X = [[0.5, 0.5]] * 1000
    assert client.put("/models/lab", json={"warmup": 100_000}, headers=auth).status_code == 201
    kb = client.post(
        "/learn",
        json={"model": "lab", "X": X, "y": [f"{i:06d}" + "k" * 1018 for i in range(1000)]},
        headers=auth,
    )
    statuses = []
    for k in range(3):
        labels = [f"{k}{i:05d}" + "x" * 250 for i in range(1000)]
        statuses.append(client.post("/learn", json={"model": "lab", "X": X, "y": labels}, headers=auth))
    rss_default = rss_mb(pid) - rss
    assert (
        client.put("/models/lab2", json={"warmup": 100_000, "max_classes": 100_000}, headers=auth).status_code
        == 201
    )
    many, held = [], 0
    for k in range(12):  # 60,000 labels of 256 characters in batches of 5,000
        labels = [f"{k:02d}{i:05d}" + "x" * 249 for i in range(5000)]
        answer = client.post(
            "/learn", json={"model": "lab2", "X": [[0.5, 0.5]] * 5000, "y": labels}, headers=auth
        )
        many.append(answer)
        if answer.status_code != 200:
            break
        held += 5000
    time.sleep(wait_s)  # a snapshot interval
    listing = client.get("/models")
    out = {
        "labels_1kb_status": kb.status_code,
        "labels_1kb_detail": kb.json()["detail"][:160],
        "batches_of_1000_labels_256_chars": " ".join(str(a.status_code) for a in statuses),
        "max_classes_detail": next(
            (a.json()["detail"][:160] for a in statuses if a.status_code != 200), None
        ),
        "classes_held_lab": len(client.get("/models/lab").json()["classes"]),
        "max_classes_100000_statuses": " ".join(str(a.status_code) for a in many),
        "max_classes_100000_detail": next(
            (a.json()["detail"][:200] for a in many if a.status_code != 200), None
        ),
        "classes_held_lab2": len(client.get("/models/lab2").json()["classes"]),
        "largest_snapshot_mb_lab": round(_dir_bytes(snapshots, "lab-*") / 1e6, 2),
        "largest_snapshot_mb_lab2": round(_dir_bytes(snapshots, "lab2-*") / 1e6, 2),
        "get_models_mb": round(len(listing.content) / 1e6, 2),
        "rss_growth_mb_default_max_classes": round(rss_default, 1),
        "rss_growth_mb_both": round(rss_mb(pid) - rss, 1),
    }
    for name in ("lab", "lab2"):
        client.delete(f"/models/{name}", headers=auth)
    return out


def growth_probe(tmp: Path, env: dict, auth: dict, total_mib: int = 512, features: int = 200) -> dict:
    """Models created at d = 1 under ``SVMSTREAM_MAX_TOTAL_MODEL_BYTES`` = ``total_mib`` MiB,
    then each fed a first batch of ``features`` features until one is refused."""
    env = {
        **env,
        "SVMSTREAM_MAX_TOTAL_MODEL_BYTES": str(total_mib * 2**20),
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
    }
    with (
        Server(tmp / "growth", env=env, clean_env=True) as server,
        httpx.Client(base_url=server.url, timeout=120) as c,
    ):
        rss = rss_mb(server.proc.pid)
        created = sum(
            c.put(f"/models/g{i}", json={"warmup": 0}, headers=auth).status_code == 201 for i in range(20)
        )
        batch = {"X": [[(i * j % 7) / 7 for j in range(features)] for i in range(100)], "y": [0, 1] * 50}
        statuses, refusal = [], None
        for i in range(created):
            answer = c.post("/learn", json={"model": f"g{i}", **batch}, headers=auth)
            statuses.append(answer.status_code)
            if answer.status_code != 200 and refusal is None:
                refusal = answer
        return {
            "max_total_model_bytes_mib": total_mib,
            "models_created_at_d_1": created,
            "models_grown_to_d": statuses.count(200),
            "statuses": " ".join(str(s) for s in statuses),
            "refusal_field": refusal.json()["field"] if refusal is not None else None,
            "refusal_detail": refusal.json()["detail"][:220] if refusal is not None else None,
            "rss_growth_mb": round(rss_mb(server.proc.pid) - rss, 1),
        }


def learn_bodies(server: Server, auth: dict, body_bytes: int = 20_000_000, n: int = 6) -> dict:
    """``n`` concurrent ``/learn`` bodies of ``body_bytes`` with the token (no labels: the one
    that is read is parsed, then refused 422): statuses, RSS peak growth, ``/health``."""
    body = predict_body(body_bytes)
    out = body_attack(server.url, server.proc.pid, "/learn", body, n=n, headers=auth)
    out["path"] = f"/learn ({body_bytes / 1e6:g} MB, token)"
    return out


def _scrape(url: str, stop: threading.Event, counts: list[int], k: int) -> None:
    with httpx.Client(timeout=60) as c:
        while not stop.is_set():
            try:
                c.get(url + "/metrics")
                counts[k] += 1
            except httpx.HTTPError:
                pass


def _health_under_scrapes(url: str, scrapers: int, seconds: float) -> dict:
    with HealthWatch(url, interval=0.05) as idle:
        time.sleep(min(3.0, seconds))
    stop, counts = threading.Event(), [0] * scrapers
    threads = [threading.Thread(target=_scrape, args=(url, stop, counts, k)) for k in range(scrapers)]
    with HealthWatch(url, interval=0.05) as busy:
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
    return {
        "idle_health_p50_ms": round(idle.p(0.5), 1),
        "scraping_health_p50_ms": round(busy.p(0.5), 1),
        "scraping_health_p99_ms": round(busy.p(0.99), 1),
        "scrapes": sum(counts),
    }


def metrics_probe(
    tmp: Path, env: dict, auth: dict, models: int, scrapers: int = 20, seconds: float = 10.0
) -> list[dict]:
    """``models`` models created through ``PUT``, then ``scrapers`` tokenless clients scraping
    ``/metrics`` back to back for ``seconds``: ``/health`` p50 before and during, on a server
    that renders every scrape (``SVMSTREAM_METRICS_CACHE_S=0``, as before) and on one with the
    default reuse.  (Each server creates its models: restoring 5,000 took over 120 s on a
    loaded machine.)"""
    base = {**env, "SVMSTREAM_CREATE_DEFAULT_MODEL": "false", "SVMSTREAM_WARM_UP": "false"}
    rows = []
    for k, (label, extra) in enumerate(
        (
            ("rendered every scrape (SVMSTREAM_METRICS_CACHE_S=0)", {"SVMSTREAM_METRICS_CACHE_S": "0"}),
            ("reused 5 s (default)", {}),
        )
    ):
        with (
            Server(tmp / f"many{k}", env={**base, **extra}, clean_env=True) as server,
            httpx.Client(base_url=server.url, timeout=120) as c,
        ):

            def put(i: int, c=c) -> int:
                return c.put(f"/models/m{i:05d}", json={}, headers=auth).status_code

            started = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                created = sum(s == 201 for s in pool.map(put, range(models)))
            create_s = round(time.perf_counter() - started, 1)
            time.sleep(2.0)
            rows.append(
                {
                    "models": created,
                    "metrics": label,
                    **_health_under_scrapes(server.url, scrapers, seconds),
                    "models_created_s": create_s,
                }
            )
    return rows
