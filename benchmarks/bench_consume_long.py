"""Consume-only over a 200k-entry Redis stream: the service's ingestion speed, long enough to
resolve a ±10 % change.

ijcnn1's 49,990 rows four times (float32 ``xd`` entries) are written to the model's stream
before the model exists; then ``PUT /models/ijcnn1`` (B = 500, γ = 2, C = 32, lookup-WD) and
the service consumes them.  Timed from the first applied example to the last: examples per
wall second and per service CPU second (``psutil``).  ``bench_stream``'s own consume-only row
lasts ~0.4 s and is polled every 0.2 s, too coarse to compare two trees.

Run: ``python -m benchmarks.bench_consume_long`` (two trees: ``python -m benchmarks compare
--before DIR bench_consume_long``).  Writes ``benchmarks/results/consume_long.{json,md}``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import bench_stream as bs
from benchmarks.common import write_results
from benchmarks.datasets import load

REPEATS = 4


def main(argv=None) -> int:
    import psutil

    X, y, _, _ = load("ijcnn1", dense=True)
    X32 = np.ascontiguousarray(X, dtype="<f4")
    total = REPEATS * X.shape[0]
    key = f"svmstream:{bs.MODEL}:examples"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        redis = bs.RedisServer(tmp / "r").start()
        try:
            client = redis.client()
            for _ in range(REPEATS):
                bs.produce(client, key, bs.entries_of(X32, y))
            svc = bs.Service(
                tmp / "s", redis.url, total, tmp / "s.log", SVMSTREAM_CREATE_DEFAULT_MODEL="false"
            )
            try:
                proc = psutil.Process(svc.proc.pid)
                svc.http.put(f"/models/{bs.MODEL}", json={**bs.HYPER, "n_samples": total, "n_features": 22})
                first: list[tuple[float, int, float]] = []

                def started(info: dict) -> None:
                    if not first and info["n_seen"] > 0:
                        first.append((time.perf_counter(), info["n_seen"], sum(proc.cpu_times()[:2])))

                svc.wait_applied(total, sample=started)
                seconds = time.perf_counter() - first[0][0]
                cpu = sum(proc.cpu_times()[:2]) - first[0][2]
            finally:
                svc.terminate()
        finally:
            redis.stop()
    done = total - first[0][1]
    row = {
        "run": f"consume only, {total:,} entries",
        "examples": done,
        "examples_per_s": done / seconds,
        "examples_per_service_cpu_s": done / cpu,
        "seconds": seconds,
        "service_cpu_s": cpu,
    }
    write_results(
        "consume_long",
        {"hyper": bs.HYPER, "rows": [row]},
        [row],
        "Consume-only over a 200k-entry Redis stream (ijcnn1 × 4)",
        "Timed from the first applied example to the last; the stream is filled before the model exists.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
