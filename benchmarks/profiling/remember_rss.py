"""Where the server's RSS goes while tokenless clients remember rows (issue 42, part 11 of
``benchmarks/bench_abuse.py``): the same requests as ``benchmarks/abuse_surfaces.remember_probe``,
with the server run by ``benchmarks/profiling/malloc_serve.py`` so that at three points (model
made; after the requests without ``remember``; after those with it) glibc's ``malloc_info``
and ``/proc/PID/smaps_rollup`` are read inside it.  One JSON line.

    python -m benchmarks.profiling.remember_rss [--rows 1000000] [--env KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx

import benchmarks.common as common
from benchmarks.abuse_probes import rss_mb
from benchmarks.abuse_surfaces import _predict_clients, remember_quotas, remember_rows
from benchmarks.common import Server

TOKEN = "bench-abuse-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _arenas(path: Path) -> dict:
    """malloc_info summary (MiB): per arena system bytes and free bytes; mmapped chunks."""
    root = ET.parse(path).getroot()
    heaps = []
    for heap in root.findall("heap"):
        free = sum(int(t.get("size")) for t in heap.findall("total") if t.get("type") in ("fast", "rest"))
        system = next(int(s.get("size")) for s in heap.findall("system") if s.get("type") == "current")
        heaps.append((round(system / 2**20, 1), round(free / 2**20, 1)))
    mmap = next(t for t in root.findall("total") if t.get("type") == "mmap")
    return {
        "arenas": len(heaps),
        "system_mib": round(sum(h[0] for h in heaps), 1),
        "free_mib": round(sum(h[1] for h in heaps), 1),
        "per_arena_system_free_mib": heaps,
        "mmapped_chunks": int(mmap.get("count")),
        "mmapped_mib": round(int(mmap.get("size")) / 2**20, 1),
    }


def _rollup(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if (
            len(parts) == 3
            and parts[2] == "kB"
            and parts[0].rstrip(":") in ("Rss", "Anonymous", "Private_Dirty")
        ):
            out[parts[0].rstrip(":").lower() + "_mib"] = round(int(parts[1]) / 1024, 1)
    return out


def _report(pid: int, prefix: str, n: int) -> dict:
    os.kill(pid, signal.SIGUSR1)
    for _ in range(200):
        if Path(f"{prefix}.{n}.txt").exists():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    out = {
        "rss_mib": round(rss_mb(pid), 1),
        **_rollup(Path(f"{prefix}.{n}.txt")),
        **_arenas(Path(f"{prefix}.{n}.xml")),
    }
    trimmed = Path(f"{prefix}.{n}.trim.txt")
    if trimmed.exists():
        out["after_trim"] = _rollup(trimmed)
    return out


def _patched_popen(prefix: str):
    real = subprocess.Popen

    def popen(argv, *a, **kw):
        if "svmstream.app.cli.main" in argv:
            i = argv.index("svmstream.app.cli.main")
            argv = [*argv[:i], "benchmarks.profiling.malloc_serve", prefix, *argv[i + 1 :]]
        return real(argv, *a, **kw)

    return popen


def run(rows: int, extra: dict, clients: int = 4, open_mib: int = 64) -> dict:
    env = {
        "SVMSTREAM_API_TOKEN": TOKEN,
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "2",
        **remember_quotas(open_mib),
        **extra,
    }
    X, y = remember_rows()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = f"{tmp}/m"
        common.subprocess.Popen = _patched_popen(prefix)
        try:
            server = Server(Path(tmp) / "remember", env=env, clean_env=True)
        finally:
            common.subprocess.Popen = subprocess.Popen
        with server:
            pid = server.proc.pid
            with httpx.Client(base_url=server.url, timeout=120) as client:
                assert (
                    client.put(
                        "/models/fb", json={"budget": 100, "gamma": 0.1, "C": 10}, headers=AUTH
                    ).status_code
                    == 201
                )
                body = {"model": "fb", "x": X.tolist(), "y": y.tolist()}
                assert client.post("/learn", json=body, headers=AUTH).status_code == 200
                client.post("/models/fb/flush", headers=AUTH)
            points = {"made": _report(pid, prefix, 0)}
            per_client = rows // (1000 * clients)
            _predict_clients(server.url, {"model": "fb", "x": X.tolist()}, clients, per_client, {})
            time.sleep(3.0)
            points["served"] = _report(pid, prefix, 1)
            statuses: dict = {}
            started = time.perf_counter()
            _predict_clients(
                server.url, {"model": "fb", "x": X.tolist(), "remember": True}, clients, per_client, statuses
            )
            wall = time.perf_counter() - started
            time.sleep(3.0)
            points["remembered"] = _report(pid, prefix, 2)
            metrics = httpx.get(server.url + "/metrics").text
    store = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("svmstream_feedback_") and len(line.split()) == 2
    }
    return {
        "env": extra,
        "statuses": statuses,
        "wall_s": round(wall, 1),
        "growth_remember_mib": round(points["remembered"]["rss_mib"] - points["served"]["rss_mib"], 1),
        "store_bytes_mib": round(store.get("svmstream_feedback_store_bytes", float("nan")) / 2**20, 1),
        "store": store,
        "points": points,
        "load_avg": [round(x, 1) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.env)
    print(json.dumps(run(args.rows, extra)))


if __name__ == "__main__":
    main()
