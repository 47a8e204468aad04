"""The abuse probes against a real ``svmstream serve`` on 127.0.0.1 (bounded, loopback only).

The service runs with ``SVMSTREAM_API_TOKEN`` set and default settings otherwise (reads open,
as the issue probed it), except ``SVMSTREAM_MAX_MODELS=50`` so that the model-count probe ends
in seconds.  Probes (``benchmarks/abuse_probes.py``):

1. six concurrent 65 MB bodies without a token to ``/predict``, ``/v2/models/default/infer``
   and ``/invocations``: statuses, RSS growth (peak, sampled every 20 ms), ``/health``
   latency meanwhile;
2. 2,000 silent sockets, then 1,000 that send half a request line: when the server closed
   them (``SVMSTREAM_HEADER_TIMEOUT_S``, 10 s), ``/health`` meanwhile, fds before/after;
3. with the token: ``PUT /models/wu {"warmup": 1e9, "n_features": 100}``, models up to the
   count bound, ``PUT /models/abc%0A``, a DC-SVM job with ``n_jobs=48``;
4. without the token: ``GET /jobs``, ``/models``, ``/health`` (PIDs, absolute paths);
5. clients leaving mid-body on the three read routes: lines logged;
6. labels, with the token (``benchmarks/abuse_growth.py``): 1,000 labels of 1 KB, batches of
   1,000 labels of 256 characters (the longest allowed) to a model with the default
   ``max_classes``, up to 60,000 to one with ``max_classes`` 100,000: statuses, classes held,
   snapshot and ``GET /models`` sizes, RSS growth;
7. a second server with ``SVMSTREAM_MAX_TOTAL_MODEL_BYTES`` = 512 MiB: 20 models created at
   d = 1, then a first batch of 200 features to each until one is refused;
8. six concurrent 20 MB ``/learn`` bodies with the token (``SVMSTREAM_MAX_CONCURRENT_LEARN_BYTES``);
9. ``--metrics-models`` models (5,000), then 20 tokenless clients scraping ``/metrics`` back to
   back: ``/health`` p50 idle and meanwhile, the rendering reused (default) and not
   (``SVMSTREAM_METRICS_CACHE_S=0``), each on its own server that creates the models;
10. 8 tokenless clients pinning 8 versions of a model with 90 MB snapshots for 20 s
    (``benchmarks/abuse_surfaces.py``): RSS growth, ``/health`` latency, statuses;
11. 1,000,000 tokenless remembered rows after 1,000 authenticated ones: RSS growth against the
    tokenless quota, the authenticated ids all still learned.

Writes ``benchmarks/results/abuse.json`` and ``abuse.md``; ``--parts surfaces`` runs parts 10
and 11 only and writes ``abuse_surfaces.json`` and ``.md``.

Usage: ``python -m benchmarks.bench_abuse [--metrics-models 5000] [--parts all|surfaces]``
(about 10 minutes on a loaded 2-core machine, most of it creating and restoring the models of
part 9; parts 10 and 11 about 5 more).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.abuse_growth import growth_probe, label_probes, learn_bodies, metrics_probe
from benchmarks.abuse_probes import (
    body_attack,
    idle_sockets,
    invocations_body,
    open_fds,
    predict_body,
    rss_mb,
    v2_body,
)
from benchmarks.abuse_surfaces import pinned_probe, remember_probe
from benchmarks.common import Server, machine, write_results

TOKEN = "bench-abuse-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY_BYTES = 65_000_000


def _bodies(server: Server) -> list[dict]:
    rows = []
    for path, make in (
        ("/predict", predict_body),
        ("/v2/models/default/infer", v2_body),
        ("/invocations", invocations_body),
    ):
        body = make(BODY_BYTES)
        rows.append(body_attack(server.url, server.proc.pid, path, body, n=6))
        del body
    return rows


def _token_probes(client: httpx.Client, pid: int) -> dict:
    rss_before = rss_mb(pid)
    wu = client.put("/models/wu", json={"warmup": 1_000_000_000, "n_features": 100}, headers=AUTH)
    statuses = []
    for i in range(60):
        statuses.append(client.put(f"/models/m{i}", json={}, headers=AUTH).status_code)
    refused = next((i for i, s in enumerate(statuses) if s != 201), None)
    last = client.put("/models/m999", json={}, headers=AUTH)
    name = client.put("/models/abc%0A", json={}, headers=AUTH)
    job = client.post(
        "/jobs",
        json={"algorithm": "dcsvm", "data": "up-" + "0" * 20, "model": "j", "params": {"n_jobs": 48}},
        headers=AUTH,
    )
    return {
        "warmup_1e9_status": wu.status_code,
        "warmup_1e9_detail": wu.json().get("detail"),
        "models_created": statuses.count(201),
        "first_model_refused_at": refused,
        "model_count_status": last.status_code,
        "model_count_detail": last.json().get("detail"),
        "name_newline_status": name.status_code,
        "n_jobs_48_status": job.status_code,
        "n_jobs_48_detail": job.json().get("detail"),
        "rss_growth_mb": round(rss_mb(pid) - rss_before, 1),
    }


def _disclosure(client: httpx.Client, snapshot_dir: Path) -> dict:
    out = {}
    for path in ("/jobs", "/models", "/health"):
        text = client.get(path).text
        out[path] = {
            "absolute_path": str(snapshot_dir.resolve()) in text or '"/' in text,
            "pid": '"pid":null' not in text and '"pid":' in text,
        }
    return out


def _disconnects(server: Server, log: Path) -> dict:
    before = log.read_text(errors="replace")
    for path in ("/predict", "/invocations", "/v2/models/default/infer"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n".encode()
                + b'{"X": [[0.5, 0.5]'
            )
            time.sleep(0.3)
    time.sleep(1.0)
    logged = log.read_text(errors="replace")[len(before) :]
    return {
        "requests_aborted": 3,
        "lines_logged": len(logged.splitlines()),
        "tracebacks": logged.count("Traceback"),
        "error_lines": sum("ERROR" in line for line in logged.splitlines()),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics-models", type=int, default=5000)
    parser.add_argument("--metrics-seconds", type=float, default=10.0)
    parser.add_argument("--parts", choices=("all", "surfaces"), default="all")
    parser.add_argument("--remember-rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if args.parts == "surfaces":
        return surfaces(args.remember_rows)
    env = {"SVMSTREAM_API_TOKEN": TOKEN, "SVMSTREAM_MAX_MODELS": "50", "SVMSTREAM_SNAPSHOT_INTERVAL_S": "2"}
    with tempfile.TemporaryDirectory() as tmp:
        snapshots, log = Path(tmp) / "snapshots", Path(tmp) / "server.log"
        with Server(snapshots, env=env, clean_env=True, log=log, log_level="info") as server:
            time.sleep(1.0)
            start = {"rss_mb": round(rss_mb(server.proc.pid), 1), "fds": open_fds(server.proc.pid)}
            bodies = _bodies(server)
            idle = [
                idle_sockets(server.url, server.proc.pid, 2000, partial_header=False, limit_s=25),
                idle_sockets(server.url, server.proc.pid, 1000, partial_header=True, limit_s=25),
            ]
            with httpx.Client(base_url=server.url, timeout=120) as client:
                labels = label_probes(client, server.proc.pid, AUTH, snapshots, wait_s=3.0)
            learn = learn_bodies(server, AUTH)
            with httpx.Client(base_url=server.url, timeout=60) as client:
                token = _token_probes(client, server.proc.pid)
                disclosure = _disclosure(client, snapshots)
            disconnects = _disconnects(server, log)
            end = {"rss_mb": round(rss_mb(server.proc.pid), 1), "fds": open_fds(server.proc.pid)}
        growth = growth_probe(Path(tmp), {"SVMSTREAM_API_TOKEN": TOKEN}, AUTH)
        scrapes = metrics_probe(
            Path(tmp), {"SVMSTREAM_API_TOKEN": TOKEN}, AUTH, args.metrics_models, seconds=args.metrics_seconds
        )
    payload = {
        "machine": machine(),
        "server_start": start,
        "server_end": end,
        "bodies": bodies,
        "idle_sockets": idle,
        "token_probes": token,
        "disclosure_without_token": disclosure,
        "client_disconnects": disconnects,
        "labels": labels,
        "learn_bodies": learn,
        "total_growth": growth,
        "metrics_scrapes": scrapes,
    }
    rows = [
        {
            "part": "1 (65 MB bodies x 6, no token)",
            "path": b["path"],
            "statuses": " ".join(str(s) for s in b["statuses"]),
            "RSS growth (MB, peak)": b["rss_peak_growth_mb"],
            "/health p50 ms": b["health_p50_ms"],
            "/health p99 ms": b["health_p99_ms"],
            "/health max ms": b["health_max_ms"],
            "seconds": b["seconds"],
        }
        for b in bodies
    ]
    rows += [
        {
            "part": "2 (idle sockets)",
            "sockets": i["sockets"],
            "half header": i["partial_header"],
            "closed by server": i["closed_by_server"],
            "all closed after s": i["all_closed_after_s"],
            "fds before/peak/after": f"{i['fds_before']}/{i['fds_peak']}/{i['fds_after']}",
            "/health p99 ms": i["health_p99_ms"],
            "/health failures": i["health_failures"],
        }
        for i in idle
    ]
    rows += [{"part": "3 (with the token)", "probe": k, "result": v} for k, v in token.items()]
    rows += [
        {"part": "4 (no token)", "path": k, "absolute path": v["absolute_path"], "PID": v["pid"]}
        for k, v in disclosure.items()
    ]
    rows += [{"part": "5 (clients leaving mid-body)", **disconnects}]
    rows += [{"part": "6 (labels, token)", "probe": k, "result": v} for k, v in labels.items()]
    rows += [
        {"part": "7 (a model growing past max_total_model_bytes)", "probe": k, "result": v}
        for k, v in growth.items()
    ]
    rows += [
        {
            "part": "8 (20 MB /learn bodies x 6, token)",
            "path": learn["path"],
            "statuses": " ".join(str(s) for s in learn["statuses"]),
            "RSS growth (MB, peak)": learn["rss_peak_growth_mb"],
            "/health p50 ms": learn["health_p50_ms"],
            "/health p99 ms": learn["health_p99_ms"],
            "/health max ms": learn["health_max_ms"],
            "seconds": learn["seconds"],
        }
    ]
    rows += [{"part": "9 (/metrics, 20 tokenless scrapers)", **r} for r in scrapes]
    write_results(
        "abuse",
        payload,
        rows,
        "Abuse probes: bodies, sockets, bounds, disclosure, disconnects, labels, growth, learn bodies, /metrics",
        notes=f"Server RSS/fds at start {start}, at the end {end}.  SVMSTREAM_MAX_MODELS=50 for the count probe.",
    )


def _surface_parts(remember_rows: int) -> dict:
    """Parts 10 and 11 (``benchmarks/abuse_surfaces.py``), each on its own server."""
    env = {"SVMSTREAM_API_TOKEN": TOKEN}
    with tempfile.TemporaryDirectory() as tmp:
        pinned = pinned_probe(Path(tmp), env, AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        remember = remember_probe(Path(tmp), env, AUTH, rows=remember_rows)
    return {"pinned_versions": pinned, "tokenless_remember": remember}


def _surface_rows(parts: dict) -> list[dict]:
    pinned, remember = parts["pinned_versions"], parts["tokenless_remember"]
    return [
        {
            "part": "10 (8 tokenless clients pinning 8 versions, 20 s)",
            "snapshot MB": max(pinned["snapshot_mb"]),
            "statuses": pinned["statuses"],
            "RSS growth MB (peak / after)": f"{pinned['rss_peak_growth_mb']} / {pinned['rss_growth_after_mb']}",
            "/health p99 ms": pinned["health_p99_ms"],
            "/health max ms": pinned["health_max_ms"],
        },
        {
            "part": f"11 ({remember['rows']:,} tokenless remembered rows)",
            "tokenless quota MiB": remember["tokenless_quota_mib"],
            "RSS growth MiB (peak / after)": f"{remember['rss_peak_growth_mib']} / {remember['rss_growth_after_mib']}",
            "growth / quota": remember["rss_growth_vs_quota"],
            "authenticated ids learned": f"{remember['authenticated_learned']} of {remember['authenticated_ids']}",
            "/health p99 ms": remember["health_p99_ms"],
        },
    ]


def surfaces(remember_rows: int = 1_000_000) -> None:
    """Parts 10 and 11 alone: ``benchmarks/results/abuse_surfaces.json`` and ``.md``."""
    parts = _surface_parts(remember_rows)
    write_results(
        "abuse_surfaces",
        {"machine": machine(), **parts},
        _surface_rows(parts),
        "Abuse probes of the newest surfaces: pinned versions, tokenless remember",
        notes="SVMSTREAM_API_TOKEN set, reads open (the defaults); the clients send no token.",
    )


if __name__ == "__main__":
    main()
