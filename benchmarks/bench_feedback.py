"""Feedback through HTTP (``docs/feedback.md``): ``POST /feedback`` throughput against ``/learn``
of the same rows, and the cost of ``remember`` on single-row ``/predict``.

One command: ``python -m benchmarks.bench_feedback [--rounds 3] [--seconds 5] [--batches 20]``.

Part A: per round a fresh server (embedded store), two models of one configuration (ijcnn1,
budget 500, gamma 2, C 32) that learned the same 10,000 rows; ``--batches`` x 1,000 further rows
are predicted with ``remember`` on ``fb``; then batch k goes to ``POST /feedback`` of ``fb`` and
the same 1,000 rows to ``POST /learn`` of ``ref``, alternately (A B A B): rows/s of each, and
the ratio per round (median over rounds).

Part B: 8 connections posting single-row ``/predict`` back to back for ``--seconds`` with
``remember`` and without, alternately, each round: p50 and p99 of each, ratio per round.

Writes ``benchmarks/results/feedback.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from benchmarks import datasets
from benchmarks.bench_predict import Clients, _latency, _server_cpu
from benchmarks.common import Server, machine, write_results

CONFIG = {"algorithm": "bsgd", "budget": 500, "gamma": 2.0, "C": 32.0, "n_features": 22, "classes": [-1, 1]}
JSON = {"content-type": "application/json"}


def _body(obj) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def throughput_round(server, X, y, batches: int, round_no: int) -> dict:
    import httpx

    c = httpx.Client(base_url=server.url, timeout=300)
    for name in ("fb", "ref"):
        c.put(f"/models/{name}", json=CONFIG).raise_for_status()
        for s in range(0, 10_000, 1000):
            body = _body({"model": name, "X": np.ascontiguousarray(X[s : s + 1000]), "y": y[s : s + 1000]})
            c.post("/learn", content=body, headers=JSON).raise_for_status()
    ids = []
    for k in range(batches):
        s = 10_000 + 1000 * k
        body = _body({"model": "fb", "X": np.ascontiguousarray(X[s : s + 1000]), "remember": True})
        ids.append(c.post("/predict", content=body, headers=JSON).json()["ids"])
    t_fb = t_learn = cpu_fb = cpu_learn = 0.0
    cpu0, wall0 = _server_cpu(server), time.perf_counter()
    for k in range(batches):
        s = 10_000 + 1000 * k
        fb = _body({"model": "fb", "ids": ids[k], "y": y[s : s + 1000]})
        learn = _body({"model": "ref", "X": np.ascontiguousarray(X[s : s + 1000]), "y": y[s : s + 1000]})
        c0, t0 = _server_cpu(server), time.perf_counter()
        r = c.post("/feedback", content=fb, headers=JSON)
        c1, t1 = _server_cpu(server), time.perf_counter()
        c.post("/learn", content=learn, headers=JSON).raise_for_status()
        c2, t2 = _server_cpu(server), time.perf_counter()
        assert r.status_code == 200 and r.json()["learned"] == 1000, r.text
        t_fb += t1 - t0
        t_learn += t2 - t1
        cpu_fb += c1 - c0
        cpu_learn += c2 - c1
    probe = _body({"X": np.ascontiguousarray(X[-200:])})
    d_fb = np.asarray(
        c.post("/predict", content=probe.replace(b"{", b'{"model":"fb",', 1), headers=JSON).json()["decision"]
    )
    d_ref = np.asarray(
        c.post("/predict", content=probe.replace(b"{", b'{"model":"ref",', 1), headers=JSON).json()[
            "decision"
        ]
    )
    c.close()
    n = 1000 * batches
    return {
        "part": "A",
        "round": round_no,
        "rows": n,
        "feedback_rows_per_s": n / t_fb,
        "learn_rows_per_s": n / t_learn,
        "ratio": (n / t_fb) / (n / t_learn),
        "feedback_cpu_us_per_row": 1e6 * cpu_fb / n,
        "learn_cpu_us_per_row": 1e6 * cpu_learn / n,
        "cpu_ratio": cpu_learn / cpu_fb if cpu_fb > 0 else float("nan"),
        "max_abs_decision_delta": float(np.max(np.abs(d_fb - d_ref))),
        "wall_s": time.perf_counter() - wall0,
        "server_cpu_s": _server_cpu(server) - cpu0,
        "load_avg": os.getloadavg()[0],
    }


def remember_round(server, Xt, seconds: float, connections: int, round_no: int) -> list[dict]:
    rows = []
    for remember in (False, True):
        body = _body({"model": "fb", "X": np.ascontiguousarray(Xt[:1]), "remember": remember})
        clients = Clients(server.url, "/predict", body, connections).start()
        time.sleep(1.0)
        t0, cpu0 = time.perf_counter(), _server_cpu(server)
        time.sleep(seconds)
        t1, cpu1 = time.perf_counter(), _server_cpu(server)
        clients.stop()
        rows.append(
            {
                "part": "B",
                "round": round_no,
                "remember": remember,
                "connections": connections,
                **_latency(clients.samples, t0, t1),
                "errors": clients.errors,
                "server_cpu_s_per_s": (cpu1 - cpu0) / (t1 - t0),
                "server_cpu_ms_per_request": 1000 * (cpu1 - cpu0) / max(1, len(clients.samples)),
                "load_avg": os.getloadavg()[0],
            }
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    X, y, Xt, _ = datasets.load("ijcnn1", dense=True)
    y = y.astype(np.int64)
    rows = []
    for round_no in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp, Server(Path(tmp) / "snap") as server:
            rows.append(throughput_round(server, X, y, args.batches, round_no))
            print(rows[-1], flush=True)
            rows += remember_round(server, Xt, args.seconds, args.connections, round_no)
    a = [r for r in rows if r["part"] == "A"]
    b = {(r["round"], r["remember"]): r for r in rows if r["part"] == "B"}
    summary = {
        "feedback_rows_per_s_median": statistics.median(r["feedback_rows_per_s"] for r in a),
        "learn_rows_per_s_median": statistics.median(r["learn_rows_per_s"] for r in a),
        "feedback_over_learn_median_ratio": statistics.median(r["ratio"] for r in a),
        "max_abs_decision_delta": max(r["max_abs_decision_delta"] for r in a),
        "feedback_over_learn_cpu_median_ratio": statistics.median(r["cpu_ratio"] for r in a),
        "remember_cpu_per_request_median_ratio": statistics.median(
            b[(k, True)]["server_cpu_ms_per_request"] / b[(k, False)]["server_cpu_ms_per_request"]
            for k in range(args.rounds)
        ),
        "remember_p50_median_ratio": statistics.median(
            b[(k, True)]["p50_ms"] / b[(k, False)]["p50_ms"] for k in range(args.rounds)
        ),
        "remember_p99_median_ratio": statistics.median(
            b[(k, True)]["p99_ms"] / b[(k, False)]["p99_ms"] for k in range(args.rounds)
        ),
    }
    print(summary, flush=True)
    write_results(
        "feedback",
        {"machine": machine(), "args": vars(args), "summary": summary, "rows": rows},
        rows,
        "Feedback through HTTP: /feedback against /learn of the same rows; remember on /predict",
        notes=f"Summary (medians of per-round ratios, interleaved A B A B): {summary}",
    )


if __name__ == "__main__":
    main()
