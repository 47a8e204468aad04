"""RSS of the in-process feedback store against its bound (``docs/feedback.md``).

One command: ``python -m benchmarks.bench_feedback_memory [--rows 1000000] [--bound-mib 64]``:
``MemoryStore.put`` of batches of 1,000 records of d = 22 rows (with probabilities, as a
``/predict`` with ``remember`` stores them); the RSS growth is sampled every 100 batches.
Writes ``benchmarks/results/feedback_memory.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import psutil

from benchmarks.common import machine, write_results
from svmstream.app.models.feedback_memory import MemoryStore
from svmstream.app.models.feedback_store import encode_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--bound-mib", type=int, default=64)
    args = parser.parse_args()
    process = psutil.Process()
    X = np.random.default_rng(0).normal(size=(1000, 22))
    decision = X[:, 0].copy()
    proba = ([-1, 1], np.full((1000, 2), 0.5))
    store = MemoryStore(86_400, args.bound_mib << 20)
    gc.collect()
    rss0 = process.memory_info().rss
    t0, cpu0 = time.perf_counter(), time.process_time()
    peak = 0
    for k in range(args.rows // 1000):
        store.put([encode_row("m", 7, time.time(), X, i, b"1", decision, proba) for i in range(1000)])
        if k % 100 == 99:
            peak = max(peak, process.memory_info().rss - rss0)
    stats = store.stats()
    row = {
        "rows": args.rows,
        "bound_mib": args.bound_mib,
        "kept": stats["records"],
        "evicted": stats["evicted"],
        "counted_mib": stats["bytes"] / 2**20,
        "rss_growth_mib": peak / 2**20,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
    }
    print(row, flush=True)
    write_results(
        "feedback_memory",
        {"machine": machine(), "args": vars(args), "rows": [row]},
        [row],
        "The in-process feedback store: RSS growth against feedback_max_bytes",
    )


if __name__ == "__main__":
    main()
