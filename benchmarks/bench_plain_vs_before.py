"""The plain estimator against the estimator before the split, with its stages off.

Issue "The user's settings mean what they say", acceptance: ``BudgetedSGDClassifier(C=32,
gamma=2, budget=500, random_state=s).fit(ijcnn1)`` gives the same decisions as the estimator
before the split with ``scaling="none", rehearsal=0, shuffle_buffer=0, warmup=0,
run_guard=False, on_drift="none"`` (max |Δ| over the ijcnn1 test file), at the same CPU time.

Each side runs as a fresh process of its own tree's Python, interleaved (before, after,
before, after, …), ``--rounds`` rounds; each process compiles (not timed), then fits seeds
0, 1, 2 and reports the CPU seconds of the fits (``time.process_time``) and wall seconds, and
saves its decisions.  Ratios are after/before per round; the table gives their median and the
load average.

Run: ``python -m benchmarks.bench_plain_vs_before --before-python ../before/.venv/bin/python
[--rounds 5]``.  Writes ``benchmarks/results/plain_vs_before.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import machine, write_results

SIDE = r"""
import json, os, sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from svmstream.solvers import BudgetedSGDClassifier
data = os.environ["SVMSTREAM_DATA"]
X, y = load_svmlight_file(os.path.join(data, "ijcnn1.bz2"))
Xt, yt = load_svmlight_file(os.path.join(data, "ijcnn1.t.bz2"), n_features=X.shape[1])
X, Xt = np.ascontiguousarray(X.toarray()), np.ascontiguousarray(Xt.toarray())
off = dict(scaling="none", rehearsal=0, shuffle_buffer=0, warmup=0, run_guard=False, on_drift="none")
extra = {k: v for k, v in off.items() if k in BudgetedSGDClassifier().get_params()}
BudgetedSGDClassifier(C=32.0, gamma=2.0, budget=500, random_state=0, **extra).fit(X[:3000], y[:3000])  # compile
cpu, wall, decisions = 0.0, 0.0, []
for seed in (0, 1, 2):
    est = BudgetedSGDClassifier(C=32.0, gamma=2.0, budget=500, random_state=seed, **extra)
    c0, w0 = time.process_time(), time.perf_counter()
    est.fit(X, y)
    cpu += time.process_time() - c0
    wall += time.perf_counter() - w0
    decisions.append(est.decision_function(Xt))
np.save(sys.argv[1], np.array(decisions))
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "accuracy_%": [100 * float(np.mean(np.where(d > 0, 1, -1) == yt)) for d in decisions]}))
"""


def run_side(python: str, cwd: Path, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, "-c", SIDE, str(out)], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-python", required=True, help="the Python of a checkout before the split")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    before_dir = Path(args.before_python).resolve().parents[2]
    rows, max_delta = [], 0.0
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            b = run_side(args.before_python, before_dir, Path(tmp) / "before.npy")
            a = run_side(sys.executable, Path.cwd(), Path(tmp) / "after.npy")
            delta = float(np.abs(np.load(Path(tmp) / "before.npy") - np.load(Path(tmp) / "after.npy")).max())
            max_delta = max(max_delta, delta)
            loads.append(os.getloadavg()[0])
            rows.append(
                {
                    "round": k,
                    "before_cpu_s": b["cpu_s"],
                    "after_cpu_s": a["cpu_s"],
                    "cpu_ratio": a["cpu_s"] / b["cpu_s"],
                    "before_wall_s": b["wall_s"],
                    "after_wall_s": a["wall_s"],
                    "wall_ratio": a["wall_s"] / b["wall_s"],
                    "max_abs_delta": delta,
                    "accuracy_%_seeds": a["accuracy_%"],
                }
            )
            print(rows[-1], flush=True)
    summary = {
        "median cpu ratio after/before": statistics.median(r["cpu_ratio"] for r in rows),
        "median wall ratio after/before": statistics.median(r["wall_ratio"] for r in rows),
        "max |decision difference|": max_delta,
        "load average": loads,
    }
    write_results(
        "plain_vs_before",
        {"machine": machine(), "rows": rows, "summary": summary},
        rows,
        "Plain BudgetedSGDClassifier against the estimator before the split (stages off), ijcnn1",
        "; ".join(f"{k}: {v}" for k, v in summary.items()),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
