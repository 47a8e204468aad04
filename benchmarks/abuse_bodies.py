"""Body probes of the write routes (issue 42): four 58 MB bodies at once, with the token, on
``PUT /models/{name}``, ``/promote``, ``/rollback`` and ``/feedback`` -- each route now has a
byte limit of what its body can need (4 MiB, 4 KiB, 4 KiB, 8.6 MB) and shares the server-wide
body budget, so every one is a 413, read by the client, with ``/health`` answering meanwhile.

``python -m benchmarks.abuse_bodies`` (``--mb 58``) prints the figures as JSON;
``tests/test_http_bodies.py`` runs :func:`write_route_bodies` at CI size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.abuse_probes import HealthWatch, post_raw, rss_mb

ROUTES = (
    ("PUT", "/models/probe"),
    ("POST", "/models/probe/promote"),
    ("POST", "/models/probe/rollback"),
    ("POST", "/feedback"),
)


def _json_body(n_bytes: int) -> bytes:
    """A syntactically valid JSON object of about ``n_bytes`` (a long list of ids)."""
    item = b'"0123456789abcdef0123456789abcdef",'
    count = max(1, n_bytes // len(item))
    return b'{"ids":[' + item * (count - 1) + item[:-1] + b'],"y":[0]}'


def write_route_bodies(url: str, pid: int, token: str, mb: float = 58.0, seconds: float = 5.0) -> dict:
    """The four routes of :data:`ROUTES` each sent ``mb`` MB JSON bodies at once (raw sockets, read
    while sending), again and again for ``seconds``: the statuses seen, peak RSS growth (sampled
    every 20 ms), ``/health`` latency meanwhile."""
    port = int(url.rsplit(":", 1)[1])
    body = _json_body(int(mb * 1e6))
    statuses: list[set] = [set() for _ in ROUTES]
    sent = [0]
    before = rss_mb(pid)
    peak = [before]
    done = threading.Event()
    deadline = time.monotonic() + seconds

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            done.wait(0.02)

    def one(i: int) -> None:
        method, path = ROUTES[i]
        auth = {"Authorization": f"Bearer {token}"}
        while time.monotonic() < deadline:
            statuses[i].add(post_raw(port, path, body, headers=auth, timeout=120.0, method=method))
            sent[0] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with HealthWatch(url, process=True) as health:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(ROUTES))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.2)
    done.set()
    sampler.join()
    return {
        "routes": [f"{m} {p}" for m, p in ROUTES],
        "body_mb": round(len(body) / 1e6, 1),
        "statuses": [sorted(st, key=str) for st in statuses],
        "bodies_sent": sent[0],
        "seconds": round(time.perf_counter() - started, 2),
        "rss_before_mb": round(before, 1),
        "rss_peak_growth_mb": round(peak[0] - before, 1),
        "health_p50_ms": round(health.p(0.5), 1),
        "health_p99_ms": round(health.p(0.99), 1),
        "health_max_ms": round(max(health.latencies_ms, default=float("nan")), 1),
        "health_failures": health.failures,
        "health_requests": len(health.latencies_ms),
    }


def quiet_health(url: str, seconds: float) -> dict:
    """``/health`` latency with nothing else sent, for ``seconds`` (the machine's own share)."""
    with HealthWatch(url, process=True) as health:
        time.sleep(seconds)
    return {"health_p50_ms": round(health.p(0.5), 1), "health_p99_ms": round(health.p(0.99), 1),
            "health_requests": len(health.latencies_ms)}  # fmt: skip


def main(argv=None) -> None:
    from benchmarks.common import Server, machine, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=58.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    token = "abuse-bodies-token"
    with tempfile.TemporaryDirectory() as tmp:
        env = {"SVMSTREAM_API_TOKEN": token, "SVMSTREAM_WARM_UP": "false"}
        with Server(Path(tmp) / "snapshots", env=env, clean_env=True) as server:
            httpx.put(f"{server.url}/models/probe", json={}, headers={"Authorization": f"Bearer {token}"})
            time.sleep(1.0)
            rounds = []
            for _ in range(args.rounds):  # /health alone (the machine's own latency), then with the bodies
                quiet = quiet_health(server.url, 2.0)
                rounds.append(
                    {"quiet": quiet, **write_route_bodies(server.url, server.proc.pid, token, args.mb)}
                )
    rows = [
        {
            "round": k,
            "bodies": " ".join(r["routes"]),
            "MB each": r["body_mb"],
            "statuses": " ".join("/".join(str(x) for x in st) for st in r["statuses"]),
            "bodies sent": r["bodies_sent"],
            "RSS growth (MB, peak)": r["rss_peak_growth_mb"],
            "/health p50 ms": r["health_p50_ms"],
            "/health p99 ms": r["health_p99_ms"],
            "/health max ms": r["health_max_ms"],
            "/health requests": r["health_requests"],
            "/health p99 ms, no bodies": r["quiet"]["health_p99_ms"],
            "seconds": r["seconds"],
        }
        for k, r in enumerate(rounds)
    ]
    write_results(
        "abuse_bodies",
        {"machine": machine(), "rounds": rounds},
        rows,
        "Four 58 MB bodies at once on PUT /models, /promote, /rollback and /feedback, with the token",
        notes="Each route refuses by its own byte limit (413, the body drained first so the client reads "
        "it); the bodies hold the shared body budget while read.  Issue 42 measured before: one such body "
        "stalled /health 0.7-1.0 s and added 0.9 GB; four at once, 1.7 s and 1.1 GB.",
    )
    print(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
