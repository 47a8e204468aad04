"""Single-row ``/predict`` latency measured with a native load generator.

``bench_predict --part http`` drives the server from Python threads (httpx), which on this
2-core machine take as much CPU as the server: its latencies are mostly the client's.  This
benchmark uses ``wrk`` (C; Debian package ``wrk``) with 8 connections on 1 thread: a real
``svmstream serve``, a model trained on ijcnn1 (B = 500, γ = 2, C = 32), then ``--seconds``
of single-row ``POST /predict`` alone and while another client posts ``/learn`` batches of
1,000 ijcnn1 rows back to back (one connection).  Figures: requests/s, wrk's latency
percentiles (p50, p90, p99), learned examples/s, load average; ``--rounds`` rounds, medians.

Latencies on this shared 2-core machine move with everyone's load, so each row also has
load-robust figures read from ``/proc``: the server's CPU per request -- of its event loop
thread (which answers the requests) and of the whole process (learner threads included) --
and ``runq_wait``, the share of the time the event loop thread was ready to run but waiting
for a CPU (``/proc/<pid>/task/<pid>/schedstat``).

Before and after a change: ``python -m benchmarks compare --before DIR bench_predict_wrk``
(each tree's server in a fresh process, rounds interleaved).

Run: ``python -m benchmarks.bench_predict_wrk [--rounds 3] [--seconds 10]``;
writes ``benchmarks/results/predict_wrk.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import Server, machine, write_results

LUA = """wrk.method = "POST"
wrk.body   = '{body}'
wrk.headers["Content-Type"] = "application/json"
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * _UNITS[unit]


def run_wrk(url: str, script: Path, seconds: float, connections: int) -> dict:
    """wrk's requests/s and latency percentiles (ms) of ``seconds`` of POSTs."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", out, flags=re.M))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)$", out, flags=re.M)
    return {
        "requests_per_s": rps,
        "p50_ms": _ms(lat["50"]),
        "p90_ms": _ms(lat["90"]),
        "p99_ms": _ms(lat["99"]),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": errors.group(1) if errors else "",
    }


def _ticks(path: str) -> int:
    """utime + stime (clock ticks) of a ``/proc`` stat file."""
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def server_counters(pid: int) -> dict:
    """CPU seconds of the process and of its main (event loop) thread, and the seconds that
    thread spent waiting on a run queue."""
    tick = os.sysconf("SC_CLK_TCK")
    _, wait_ns, _ = map(int, Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split())
    return {
        "process": _ticks(f"/proc/{pid}/stat") / tick,
        "loop": _ticks(f"/proc/{pid}/task/{pid}/stat") / tick,
        "runq_wait": wait_ns / 1e9,
    }


def train(server, X, y) -> None:
    import httpx

    with httpx.Client(base_url=server.url, timeout=60) as c:
        config = {
            "algorithm": "bsgd",
            "budget": 500,
            "gamma": 2.0,
            "C": 32.0,
            "n_samples": len(y),
            "warmup": 0,
            "random_state": 0,
        }
        assert c.put("/models/m", json=config).status_code in (200, 201)
        for start in range(0, 20_000, 1000):
            body = {
                "model": "m",
                "X": X[start : start + 1000].tolist(),
                "y": y[start : start + 1000].tolist(),
            }
            assert c.post("/learn", json=body).status_code == 200
        c.post("/models/m/flush")


def measure(server, script: Path, bodies: list[str], phase: str, seconds: float, connections: int) -> dict:
    """One wrk run against ``server``, with a learning client during it for ``"while learning"``."""
    import httpx

    stop = threading.Event()
    learned = [0]

    def learner():
        with httpx.Client(base_url=server.url, timeout=60) as lc:
            i = 0
            while not stop.is_set():
                lc.post(
                    "/learn", content=bodies[i % len(bodies)], headers={"content-type": "application/json"}
                )
                learned[0] += 1000
                i += 1

    thread = threading.Thread(target=learner) if phase != "alone" else None
    if thread:
        thread.start()
        time.sleep(1.0)
    load = os.getloadavg()[0]
    started, before, counters = time.perf_counter(), learned[0], server_counters(server.proc.pid)
    figures = run_wrk(f"{server.url}/predict", script, seconds, connections)
    elapsed = time.perf_counter() - started
    after = server_counters(server.proc.pid)
    stop.set()
    if thread:
        thread.join()
    requests = figures["requests_per_s"] * elapsed
    return {
        **figures,
        "loop_cpu_ms_per_req": 1000 * (after["loop"] - counters["loop"]) / requests,
        "process_cpu_ms_per_req": 1000 * (after["process"] - counters["process"]) / requests,
        "runq_wait": (after["runq_wait"] - counters["runq_wait"]) / elapsed,
        "learn_examples_per_s": (learned[0] - before) / elapsed,
        "load_avg": load,
    }


MEDIANS = (
    "requests_per_s",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "loop_cpu_ms_per_req",
    "process_cpu_ms_per_req",
    "runq_wait",
    "learn_examples_per_s",
    "load_avg",
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--name", default="predict_wrk", help="results file name in benchmarks/results/")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found: apt-get install wrk")
    X, y, Xt, _ = datasets.load("ijcnn1", dense=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp, Server(Path(tmp) / "snap") as server:
        script = Path(tmp) / "predict.lua"
        body = json.dumps({"model": "m", "X": [Xt[0].tolist()]})
        script.write_text(LUA.format(body=body))
        train(server, X, y)
        bodies = [
            json.dumps({"model": "m", "X": X[s : s + 1000].tolist(), "y": y[s : s + 1000].tolist()})
            for s in range(0, len(y), 1000)
        ]
        for rnd in range(args.rounds):
            for phase in ("alone", "while learning"):
                figures = measure(server, script, bodies, phase, args.seconds, args.connections)
                row = {"round": str(rnd), "phase": phase, "connections": args.connections, **figures}
                rows.append(row)
                print(row, flush=True)
    summary = []
    for phase in ("alone", "while learning"):
        sel = [r for r in rows if r["phase"] == phase]
        medians = {k: float(np.median([r[k] for r in sel])) for k in MEDIANS}
        summary.append({"round": "median", "phase": phase, "connections": args.connections, **medians})
    write_results(
        args.name,
        {
            "machine": machine(),
            "args": vars(args),
            "rows": rows + summary,
        },
        rows + summary,
        "Single-row /predict with wrk (8 connections), alone and while another client learns",
        notes="wrk -t1 -c8 --latency; the learning client posts /learn batches of 1,000 ijcnn1 rows back to "
        "back; model: B = 500, gamma = 2, C = 32, trained on 20,000 rows first. loop_cpu / process_cpu: "
        "server CPU per request of the event loop thread / of the whole process (learner threads "
        "included); runq_wait: share of the time the event loop thread waited for a CPU.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
