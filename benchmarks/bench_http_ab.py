"""Interleaved before/after speed of ``POST /learn`` and ``POST /predict`` through a real server.

Each run is a fresh process in one tree, with that tree's own Python (``--before-python``,
default ``<before>/.venv/bin/python``): it starts ``svmstream serve`` on 127.0.0.1, creates a
model with the same pinned hyperparameters in both trees (B = 500, γ = 2, C = 32, raw features,
no warm-up, shuffle buffer, run guard, rehearsal or drift reaction), then

* **learn**: posts ijcnn1's 49,990 training rows as batches of 1,000 (bodies encoded before
  the clock starts), one request at a time: examples per wall second and per server CPU second;
* **predict**: ``--threads`` clients (one connection each) post single-row ``/predict``
  requests back to back for ``--seconds``: requests per wall second, per server CPU second,
  and the p50 latency.

Runs alternate before, after, before, after ... (``--rounds``, after one untimed run of each
tree: numba's cache); each records its CPU seconds (the child and its server, from
``getrusage``), wall seconds and the load average at its start.  The report gives the median
of the per-round ratios after/before.

Run: ``python -m benchmarks.bench_http_ab --before /work/wt-base [--rounds 3]``.
Writes ``benchmarks/results/http_ab.{json,md}`` (``--name`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import datasets
from benchmarks.common import machine, write_results

CHILD = r"""
import json, os, signal, socket, subprocess, sys, tempfile, threading, time
import httpx, numpy as np, orjson, psutil
from sklearn.datasets import load_svmlight_file

seconds, threads, train_file = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
X, y = load_svmlight_file(train_file)
X = np.ascontiguousarray(X.toarray())
y = y.astype(int).tolist()
bodies = [
    orjson.dumps({"model": "ab", "X": X[i : i + 1000].tolist(), "y": y[i : i + 1000]})
    for i in range(0, X.shape[0], 1000)
]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = {k: v for k, v in os.environ.items() if not k.startswith("SVMSTREAM_")}
env.update(SVMSTREAM_CREATE_DEFAULT_MODEL="false", SVMSTREAM_LOG_LEVEL="warning")
with tempfile.TemporaryDirectory() as tmp:
    server = subprocess.Popen(
        [sys.executable, "-m", "svmstream.app.cli.main", "serve", "--host", "127.0.0.1",
         "--port", str(port), "--snapshot-dir", tmp],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        proc = psutil.Process(server.pid)
        cpu = lambda: sum(proc.cpu_times()[:2])
        hyper = {"algorithm": "bsgd", "budget": 500, "gamma": 2, "C": 32, "random_state": 0, "scaling": "none", "warmup": 0,
                 "shuffle_buffer": 0, "run_guard": False, "rehearsal": 0, "on_drift": "none"}
        with httpx.Client(base_url=url, timeout=120) as c:
            r = c.put("/models/ab", json=hyper)
            if r.status_code == 422:  # a tree without on_drift "none"
                hyper.pop("on_drift")
                r = c.put("/models/ab", json=hyper)
            assert r.status_code == 201, r.text
            headers = {"Content-Type": "application/json"}
            t0, c0 = time.perf_counter(), cpu()
            for body in bodies:
                r = c.post("/learn", content=body, headers=headers)
                assert r.status_code == 200, r.text
            learn_wall, learn_cpu = time.perf_counter() - t0, cpu() - c0
        n = X.shape[0]
        rows = [orjson.dumps({"model": "ab", "X": X[i : i + 1].tolist()}) for i in range(200)]
        counts, lat, stop = [0] * threads, [[] for _ in range(threads)], threading.Event()
        def client(k):
            with httpx.Client(base_url=url, timeout=30) as c:
                i = k
                while not stop.is_set():
                    t = time.perf_counter()
                    r = c.post("/predict", content=rows[i % 200], headers=headers)
                    lat[k].append(time.perf_counter() - t)
                    assert r.status_code == 200, r.text
                    counts[k] += 1
                    i += threads
        workers = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
        t0, c0 = time.perf_counter(), cpu()
        for w in workers:
            w.start()
        time.sleep(seconds)
        stop.set()
        for w in workers:
            w.join()
        pred_wall, pred_cpu = time.perf_counter() - t0, cpu() - c0
        total = sum(counts)
        p50 = float(np.median(np.concatenate([np.asarray(v) for v in lat]))) * 1000
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
print(json.dumps({
    "learn ex/s (wall)": n / learn_wall,
    "learn ex per server CPU s": n / learn_cpu,
    "predict req/s (wall)": total / pred_wall,
    "predict req per server CPU s": total / pred_cpu,
    "predict p50 ms": p50,
}))
"""


def run_once(tree: Path, python: str, seconds: float, threads: int) -> dict:
    """One run of :data:`CHILD` in ``tree`` with ``python``: figures, CPU s, wall s, load."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-c", CHILD, str(seconds), str(threads), str(datasets.path("ijcnn1"))],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"figures": figures, "cpu_s": cpu, "wall_s": wall, "load_avg": load}


def _rows(runs: list[dict], rounds: int) -> list[dict]:
    def pair(rnd: int) -> dict:
        return {r["side"]: r for r in runs if r["round"] == rnd}

    def row(name: str, get) -> dict:
        ratios = [get(pair(k)["after"]) / get(pair(k)["before"]) for k in range(1, rounds + 1)]
        return {
            "figure": name,
            "before (median)": statistics.median(get(r) for r in runs if r["side"] == "before"),
            "after (median)": statistics.median(get(r) for r in runs if r["side"] == "after"),
            "per-round ratios after/before": ", ".join(f"{x:.3f}" for x in ratios),
            "median ratio": round(statistics.median(ratios), 4),
        }

    names = list(runs[0]["figures"])
    out = [row(name, lambda r, name=name: r["figures"][name]) for name in names]
    out.append(row("CPU s of the whole run (client + server)", lambda r: r["cpu_s"]))
    out.append(row("wall s of the whole run", lambda r: r["wall_s"]))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--before-python", default=None, help="default: <before>/.venv/bin/python")
    parser.add_argument("--after-python", default=sys.executable)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds of /predict per run")
    parser.add_argument("--threads", type=int, default=4, help="/predict clients")
    parser.add_argument("--name", default="http_ab")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    pythons = {"before": args.before_python or str(trees["before"] / ".venv" / "bin" / "python")}
    pythons["after"] = args.after_python
    for side in ("before", "after"):  # untimed: numba compiles into its cache
        run_once(trees[side], pythons[side], 1.0, 1)
    runs = []
    for rnd in range(1, args.rounds + 1):
        for side in ("before", "after"):
            result = run_once(trees[side], pythons[side], args.seconds, args.threads)
            runs.append({"round": rnd, "side": side, **result})
            print(
                f"round {rnd} {side}: {json.dumps({k: round(v, 1) for k, v in result['figures'].items()})} "
                f"cpu {result['cpu_s']:.1f} s wall {result['wall_s']:.1f} s load {result['load_avg']:.2f}",
                flush=True,
            )
    rows = _rows(runs, args.rounds)
    commits = {
        side: subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
        ).stdout.strip()
        for side, tree in trees.items()
    }
    loads = ", ".join(f"{r['load_avg']:.2f}" for r in runs)
    write_results(
        args.name,
        {
            "machine": machine(),
            "trees": {k: str(v) for k, v in trees.items()},
            "commits": commits,
            "runs": runs,
            "rows": rows,
        },
        rows,
        "Interleaved before/after: HTTP /learn and /predict throughput",
        f"Trees: before {trees['before']} ({commits['before']}), after {trees['after']} ({commits['after']}). "
        f"Rounds: {args.rounds}, order before→after in every round; /predict: {args.threads} clients x "
        f"{args.seconds:g} s. Load average at each run start: {loads}. Ratios > 1: the after tree is "
        "faster (CPU and wall rows: < 1 means it used less).",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
