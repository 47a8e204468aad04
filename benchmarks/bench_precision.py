"""One precision contract: the same data through HTTP JSON, the Redis stream
(float64 ``xd`` entries, the default of ``svmstream replay --redis``; float32 ``xb`` for
comparison) and the estimator, and what the float64 format costs the consumer.

A. **Same model**: ijcnn1 (49,990 rows, file order), B=500, γ=2, C=32, lookup-WD, one pass of
   1,000-row batches, through a real ``svmstream serve``: ``svmstream replay`` over HTTP
   (JSON), ``replay --redis --format xd`` and ``--format xb`` (real redis-server), and
   ``StreamingClassifier(BudgetedSGDClassifier(...)).partial_fit`` in-process; decision values on ijcnn1.t (91,701 rows):
   max |Δ| against the estimator on the float64 rows (and, for ``xb``, against the estimator
   on the float32-rounded rows), test accuracy.
B. **Consume only**, ``xb`` against ``xd``: a 199,960-entry stream (ijcnn1 four times) filled
   before the model exists, a fresh service per run, rounds interleaved (xb xd, xd xb, ...);
   examples per wall second and per service CPU second from the first applied batch, and
   the redis-server CPU.  Per-round ratios xd/xb and their median.
C. **Parsing only** (``parse_stream_entries`` on raw replies of 1,000 entries, as the
   consumer gets them): µs per entry in CPU time for ``xb`` and ``xd``; interleaved, median
   of the rounds and of the per-round ratios xd/xb.  The parser before and after a change:
   ``python -m benchmarks compare --before DIR bench_precision --parts C``.

Run: ``python -m benchmarks.bench_precision [--rounds 5] [--parts ABC]``.
Writes ``benchmarks/results/precision.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.bench_stream import HYPER, MODEL, Service, produce
from benchmarks.common import REPO, RedisServer, child_pythonpath, machine, write_results

HYPER_ARGS = ["--budget", "500", "--gamma", "2", "--C", "32", "--merge-solver", "lookup-wd"]


def _replay(argv: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "svmstream.app.cli.main", "replay", *argv, "--no-progress", "--json"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def part_a(tmp: Path, rows: list[dict], payload: dict) -> None:
    from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

    train = datasets.path("ijcnn1")
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    n = X.shape[0]
    labels = (y > 0).astype(np.int64)

    def estimator(rows_):
        est = StreamingClassifier(  # the service's model for the same settings
            BudgetedSGDClassifier(
                budget=500, gamma=2.0, C=32.0, n_samples=n, merge_solver="lookup-wd", random_state=0
            )
        )
        for a in range(0, n, 1000):
            est.partial_fit(rows_[a : a + 1000], labels[a : a + 1000], classes=np.arange(2))
        est.flush()
        return est.decision_function(Xt)

    ref = estimator(X)
    ref32 = estimator(X.astype(np.float32).astype(np.float64))
    rs = RedisServer(tmp / "redis-a").start()
    svc = Service(tmp / "snap-a", rs.url, n, tmp / "a.log", SVMSTREAM_CREATE_DEFAULT_MODEL="false")
    paths = {"HTTP JSON": [], "Redis xd": ["--format", "xd"], "Redis xb": ["--format", "xb"]}
    out = {}
    for path, extra in paths.items():
        model = path.lower().replace(" ", "-")
        argv = [
            str(train),
            "--url",
            svc.url,
            "--model",
            model,
            "--batch",
            "1000",
            "--file-order",
            *HYPER_ARGS,
        ]
        if path.startswith("Redis"):
            argv += ["--redis", rs.url, "--wait", *extra]
        result = _replay(argv)
        dec = []
        for a in range(0, Xt.shape[0], 5000):
            body = {"model": model, "X": Xt[a : a + 5000].tolist()}
            dec.extend(svc.http.post("/predict", json=body).json()["decision"])
        dec = np.asarray(dec)
        out[path] = {
            "format": result["format"],
            "bytes_per_entry_or_row": result.get("bytes_per_entry") or result["body_bytes"] / n,
            "test_accuracy": float(np.mean(np.where(dec > 0, 1.0, -1.0) == yt)),
            "max_abs_diff_vs_estimator_float64": float(np.max(np.abs(dec - ref))),
            "max_abs_diff_vs_estimator_float32_rows": float(np.max(np.abs(dec - ref32))),
        }
    svc.terminate()
    rs.stop()
    for name, dec in (("estimator (float64 rows)", ref), ("estimator (float32-rounded rows)", ref32)):
        out[name] = {
            "test_accuracy": float(np.mean(np.where(dec > 0, 1.0, -1.0) == yt)),
            "max_abs_diff_vs_estimator_float64": float(np.max(np.abs(dec - ref))),
            "max_abs_diff_vs_estimator_float32_rows": float(np.max(np.abs(dec - ref32))),
        }
    payload["A"] = out
    for path, figures in out.items():
        rows.append(
            {
                "part": "A",
                "path": path,
                "format": figures.get("format", ""),
                "test accuracy %": 100 * figures["test_accuracy"],
                "max abs Δ decision vs estimator (float64 rows)": figures[
                    "max_abs_diff_vs_estimator_float64"
                ],
                "max abs Δ vs estimator (float32-rounded rows)": figures[
                    "max_abs_diff_vs_estimator_float32_rows"
                ],
            }
        )


def _consume_once(tmp: Path, rs, X: np.ndarray, y: np.ndarray, fmt: str, copies: int, run: int) -> dict:
    import psutil

    r = rs.client()
    key = f"svmstream:{MODEL}:examples"
    r.delete(key, f"svmstream:{MODEL}:dead", f"{key}:lease")
    labels = [b"1" if v > 0 else b"-1" for v in y]
    block = np.ascontiguousarray(X, dtype="<f8" if fmt == "xd" else "<f4")
    field = fmt.encode()
    entries = [{b"y": lab, field: row.tobytes()} for lab, row in zip(labels, block)]
    for _ in range(copies):
        produce(r, key, entries)
    total = copies * X.shape[0]
    svc = Service(
        tmp / f"snap-b{run}", rs.url, total, tmp / f"b{run}.log", SVMSTREAM_CREATE_DEFAULT_MODEL="false"
    )
    proc, rproc = psutil.Process(svc.proc.pid), psutil.Process(rs.proc.pid)
    svc.http.put(f"/models/{MODEL}", json={**HYPER, "n_samples": total, "n_features": X.shape[1]})
    first = []

    def started(info):
        if not first and info["n_seen"] > 0:
            first.append(
                (time.perf_counter(), info["n_seen"], sum(proc.cpu_times()[:2]), sum(rproc.cpu_times()[:2]))
            )

    svc.wait_applied(total, sample=started)
    seconds = time.perf_counter() - first[0][0]
    cpu = sum(proc.cpu_times()[:2]) - first[0][2]
    rcpu = sum(rproc.cpu_times()[:2]) - first[0][3]
    svc.terminate()
    done = total - first[0][1]
    return {
        "format": fmt,
        "examples": done,
        "examples_per_s": done / seconds,
        "examples_per_service_cpu_s": done / cpu,
        "redis_cpu_us_per_example": 1e6 * rcpu / done,
        "load_avg": os.getloadavg()[0],
    }


def part_b(tmp: Path, rows: list[dict], payload: dict, rounds: int) -> None:
    X, y, _, _ = datasets.load("ijcnn1", dense=True)
    rs = RedisServer(tmp / "redis-b").start()
    runs = []
    _consume_once(tmp, rs, X[:5000], y[:5000], "xd", 1, -1)  # untimed: numba's on-disk cache, imports
    for k in range(rounds):
        order = ("xb", "xd") if k % 2 == 0 else ("xd", "xb")
        got = {fmt: _consume_once(tmp, rs, X, y, fmt, 4, 2 * k + i) for i, fmt in enumerate(order)}
        runs.append(got)
        for fmt in order:
            g = got[fmt]
            rows.append(
                {
                    "part": "B",
                    "round": k + 1,
                    "format": fmt,
                    "examples": g["examples"],
                    "ex/s": g["examples_per_s"],
                    "ex per service CPU s": g["examples_per_service_cpu_s"],
                    "redis CPU µs/ex": g["redis_cpu_us_per_example"],
                    "load avg": round(g["load_avg"], 2),
                }
            )
    rs.stop()
    ratios = {
        key: [r["xd"][key] / r["xb"][key] for r in runs]
        for key in ("examples_per_s", "examples_per_service_cpu_s", "redis_cpu_us_per_example")
    }
    payload["B"] = {
        "runs": runs,
        "ratios_xd_over_xb": ratios,
        "median": {k: statistics.median(v) for k, v in ratios.items()},
    }
    rows.append(
        {
            "part": "B",
            "round": "median xd/xb",
            "ex/s": statistics.median(ratios["examples_per_s"]),
            "ex per service CPU s": statistics.median(ratios["examples_per_service_cpu_s"]),
            "redis CPU µs/ex": statistics.median(ratios["redis_cpu_us_per_example"]),
        }
    )


def part_c(rows: list[dict], payload: dict, rounds: int) -> None:
    from svmstream.app.ingest import stream_entries as now
    from svmstream.app.ingest.labels import LabelCodec

    X, y, _, _ = datasets.load("ijcnn1", dense=True)
    labels = [b"1" if v > 0 else b"-1" for v in y]

    def replies(dtype, field):
        block = np.ascontiguousarray(X, dtype=dtype)
        flat = [[b"y", lab, field, row.tobytes()] for lab, row in zip(labels, block)]
        return [flat[a : a + 1000] for a in range(0, len(flat), 1000)]

    cases = {
        "xb": (now.parse_stream_entries, replies("<f4", b"xb")),
        "xd": (now.parse_stream_entries, replies("<f8", b"xd")),
    }
    codec = LabelCodec([-1, 1])
    timings = {name: [] for name in cases}
    for parse, batches in cases.values():  # warm-up
        parse(batches[0], codec, 22)
    for _ in range(rounds):
        for name, (parse, batches) in cases.items():
            t = time.process_time()
            for _ in range(3):
                for batch in batches:
                    parse(batch, codec, 22)
            timings[name].append(1e6 * (time.process_time() - t) / (3 * X.shape[0]))
    payload["C"] = {"us_per_entry_cpu": timings, "load_avg": os.getloadavg()[0]}
    base = timings["xb"]
    for name, values in timings.items():
        rows.append(
            {
                "part": "C",
                "parse": name,
                "CPU µs per entry (median)": statistics.median(values),
                "median ratio to xb": statistics.median(v / b for v, b in zip(values, base)),
                "rounds": len(values),
            }
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parts", default="ABC")
    args = parser.parse_args(argv)
    payload: dict = {"machine": machine()}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "C" in args.parts:
            part_c(rows, payload, args.rounds)
        if "A" in args.parts:
            part_a(tmp, rows, payload)
        if "B" in args.parts:
            part_b(tmp, rows, payload, args.rounds)
    payload["load_avg_at_end"] = os.getloadavg()[0]
    write_results(
        "precision",
        payload,
        rows,
        "One precision contract: HTTP JSON, Redis xd / xb and the estimator",
        notes=(
            "A: ijcnn1 file order, B=500, γ=2, C=32, lookup-WD, 1,000-row batches, real service and "
            "redis-server; Δ on ijcnn1.t decision values. B: consume-only, 199,960 entries, fresh service "
            "per run, rounds interleaved. C: parse_stream_entries on raw replies of 1,000 ijcnn1 entries, "
            f"CPU time. Load average at start {payload['machine']['load_avg_at_start']:.2f}, at end "
            f"{payload['load_avg_at_end']:.2f}."
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
