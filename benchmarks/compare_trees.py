"""Interleaved speed comparison of two source trees (before / after a change).

Runs ``bench_skeleton --quick`` and ``bench_stream --parts A`` alternately in the two trees
(A B A B …, ``--rounds`` rounds, each benchmark as a fresh process), reads the throughput
figures each run wrote, and reports per-round ratios after/before and their medians, with
the CPU seconds of every run (``resource.getrusage`` of the children, so the servers and
producers the benchmarks start are included), wall seconds and the load average.

Run: ``python -m benchmarks.compare_trees --before ../before --after . [--rounds 3]``.
The *before* tree may be an older layout (``app``/``solvers`` as top-level packages): each
run uses its own tree as working directory and ``PYTHONPATH``.  Writes
``benchmarks/results/compare_trees.{json,md}`` in this tree and restores the two
benchmarks' own result files in both trees (``git checkout``), since quick runs would
overwrite the committed full results.
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

from benchmarks.common import machine, write_results

# One pass of the BSGD solver over ijcnn1 (B=500, γ=2, C=32), timed in CPU seconds inside the
# process; runs in either layout (``solvers`` or ``svmstream.solvers``) and pins raw features
# where the estimator has preprocessing options.  Prints a JSON line.
SOLVER_CPU = r"""
import json, time, numpy as np
from sklearn.datasets import load_svmlight_file
try:
    from svmstream.solvers import BudgetedSGDClassifier
except ImportError:
    from solvers import BudgetedSGDClassifier
import os
X, y = load_svmlight_file(os.path.join(os.environ["SVMSTREAM_DATA"], "ijcnn1.bz2"))
X = np.ascontiguousarray(X.toarray())
params = dict(budget=500, gamma=2.0, C=32.0)
raw = dict(scaling="none", shuffle_buffer=0, run_guard=False, rehearsal=0)
extra = {k: v for k, v in raw.items() if k in BudgetedSGDClassifier().get_params()}
out = {}
for solver in ("gss", "lookup-wd"):
    BudgetedSGDClassifier(merge_solver=solver, **params, **extra).fit(X[:2000], y[:2000])  # compile
    rates = []
    for seed in (0, 1, 2):
        est = BudgetedSGDClassifier(merge_solver=solver, random_state=seed, **params, **extra)
        t = time.process_time(); est.fit(X, y); rates.append(X.shape[0] / (time.process_time() - t))
    out[f"solver {solver} ex per CPU s (median 3 seeds)"] = float(np.median(rates))
print(json.dumps(out))
"""

# Consume-only over a 200k-entry stream (ijcnn1 four times, filled before the model exists):
# bench_stream's own consume-only row lasts ~0.4 s and is polled every 0.2 s, too coarse for a
# ±10% comparison.  Prints examples per wall second and per service CPU second.
CONSUME_LONG = r"""
import json, time, tempfile
from pathlib import Path
import numpy as np, psutil
import benchmarks.bench_stream as bs
from benchmarks.common import data_file
from sklearn.datasets import load_svmlight_file
X, y = load_svmlight_file(str(data_file("ijcnn1.bz2")))
X32 = np.ascontiguousarray(X.toarray(), dtype="<f4")
total = 4 * X.shape[0]
key = f"svmstream:{bs.MODEL}:examples"
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    rs = bs.RedisServer(tmp / "r").start()
    r = rs.client()
    for _ in range(4):
        bs.produce(r, key, bs.entries_of(X32, y))
    svc = bs.Service(tmp / "s", rs.url, total, tmp / "s.log", SVMSTREAM_CREATE_DEFAULT_MODEL="false")
    proc = psutil.Process(svc.proc.pid)
    svc.http.put(f"/models/{bs.MODEL}", json={**bs.HYPER, "n_samples": total, "n_features": 22})
    first = []
    def started(info):
        if not first and info["n_seen"] > 0:
            first.append((time.perf_counter(), info["n_seen"], sum(proc.cpu_times()[:2])))
    svc.wait_applied(total, sample=started)
    seconds = time.perf_counter() - first[0][0]
    cpu = sum(proc.cpu_times()[:2]) - first[0][2]
    svc.terminate()
done = total - first[0][1]
print(json.dumps({"consume 200k ex/s": done / seconds, "consume 200k ex per service CPU s": done / cpu}))
"""

BENCHES = {
    "skeleton": (["-m", "benchmarks.bench_skeleton", "--quick"], "skeleton"),
    "stream": (["-m", "benchmarks.bench_stream", "--parts", "A", "--also-fsync"], "stream"),
    "solver_cpu": (["-c", SOLVER_CPU], None),
    "consume_long": (["-c", CONSUME_LONG], None),
}


def _figures(bench: str, payload: dict) -> dict[str, float]:
    """The throughput figures (examples per second) of one run."""
    if bench == "skeleton":
        rows = payload["rows"]
        http = [r for r in rows if r["run"].startswith("HTTP")]
        return {
            "solver gss ex/s (median 3 seeds)": payload["summary"]["solver_median_examples_per_s"],
            "solver lookup-wd ex/s (median 3 seeds)": payload["summary"]["lookup_wd_median_examples_per_s"],
            "HTTP replay file order ex/s": next(r["examples_per_s"] for r in http if r["order"] == "file"),
            "HTTP replay shuffled ex/s": next(r["examples_per_s"] for r in http if r["order"] != "file"),
        }
    end_to_end = payload["A_end_to_end"]
    first = end_to_end[next(iter(end_to_end))] if isinstance(end_to_end, dict) else end_to_end
    return {
        "stream solver alone ex/s": payload["solver_alone"]["examples_per_s"],
        "stream end to end ex/s": first["applied_examples_per_s"],
        # CPU-based figures (robust to the load of a shared machine): examples per CPU second
        "stream end to end ex per service CPU s": 1e6 / first["cpu_us_per_example"]["service"],
        "stream end to end ex per producer CPU s": 1e6 / first["cpu_us_per_example"]["producer"],
        "stream consume only ex/s": payload["A_consume_only"]["examples_per_s"],
    }


def run_once(tree: Path, bench: str, extra_path: str = "") -> dict:
    args, result_name = BENCHES[bench]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra_path, str(tree)) if p)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, check=True, stdout=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result_name is None:  # the figures are the last line the command printed
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    else:
        figures = _figures(
            bench, json.loads((tree / "benchmarks" / "results" / f"{result_name}.json").read_text())
        )
    return {"figures": figures, "cpu_s": cpu, "wall_s": wall, "load_avg": load}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--name", default="compare_trees", help="results file name (benchmarks/results/NAME.*)"
    )
    parser.add_argument("--benches", nargs="+", default=list(BENCHES), choices=list(BENCHES))
    parser.add_argument("--before-path", default="", help="extra PYTHONPATH entry first for the before tree")
    parser.add_argument(
        "--after-path",
        default="",
        help="extra PYTHONPATH entry first for the after tree (e.g. a "
        "folder whose svmstream/app and svmstream/solvers link into a worktree)",
    )
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    paths = {"before": args.before_path, "after": args.after_path}
    runs: list[dict] = []
    try:
        # one untimed run per tree and benchmark first: numba compiles into its on-disk cache
        # there, so the timed rounds measure steady state (compile time reported separately)
        compile_runs = {
            (side, bench): run_once(trees[side], bench, paths[side])
            for bench in args.benches
            for side in ("before", "after")
        }
        for (side, bench), result in compile_runs.items():
            print(f"compile round {bench} {side}: cpu {result['cpu_s']:.1f} s", flush=True)
        for rnd in range(args.rounds):
            for bench in args.benches:
                for side in ("before", "after"):  # A B, A B, ...
                    result = run_once(trees[side], bench, paths[side])
                    runs.append({"round": rnd + 1, "bench": bench, "side": side, **result})
                    print(
                        f"round {rnd + 1} {bench} {side}: cpu {result['cpu_s']:.1f} s, "
                        f"wall {result['wall_s']:.1f} s, load {result['load_avg']:.2f}",
                        flush=True,
                    )
    finally:
        for tree in trees.values():
            subprocess.run(
                [
                    "git",
                    "checkout",
                    "--",
                    "benchmarks/results/skeleton.json",
                    "benchmarks/results/skeleton.md",
                    "benchmarks/results/stream.json",
                    "benchmarks/results/stream.md",
                ],
                cwd=tree,
                check=False,
            )
    rows = []
    for bench in args.benches:
        names = runs[[r["bench"] for r in runs].index(bench)]["figures"].keys()
        for name in names:
            ratios = []
            for rnd in range(1, args.rounds + 1):
                pair = {r["side"]: r for r in runs if r["round"] == rnd and r["bench"] == bench}
                ratios.append(pair["after"]["figures"][name] / pair["before"]["figures"][name])
            rows.append(
                {
                    "bench": bench,
                    "figure": name,
                    "before (median)": statistics.median(
                        r["figures"][name] for r in runs if r["bench"] == bench and r["side"] == "before"
                    ),
                    "after (median)": statistics.median(
                        r["figures"][name] for r in runs if r["bench"] == bench and r["side"] == "after"
                    ),
                    "per-round ratios after/before": ", ".join(f"{x:.3f}" for x in ratios),
                    "median ratio": statistics.median(ratios),
                }
            )
        cpu_ratios = []
        for rnd in range(1, args.rounds + 1):
            pair = {r["side"]: r for r in runs if r["round"] == rnd and r["bench"] == bench}
            cpu_ratios.append(pair["after"]["cpu_s"] / pair["before"]["cpu_s"])
        rows.append(
            {
                "bench": bench,
                "figure": "CPU s of the whole run (incl. children)",
                "before (median)": statistics.median(
                    r["cpu_s"] for r in runs if r["bench"] == bench and r["side"] == "before"
                ),
                "after (median)": statistics.median(
                    r["cpu_s"] for r in runs if r["bench"] == bench and r["side"] == "after"
                ),
                "per-round ratios after/before": ", ".join(f"{x:.3f}" for x in cpu_ratios),
                "median ratio": statistics.median(cpu_ratios),
            }
        )
    payload = {
        "machine": machine(),
        "trees": {k: str(v) for k, v in trees.items()},
        "runs": runs,
        "rows": rows,
    }
    loads = ", ".join(f"{r['load_avg']:.2f}" for r in runs)
    write_results(
        args.name,
        payload,
        rows,
        "Interleaved before/after speed (bench_skeleton --quick, bench_stream part A)",
        f"Rounds: {args.rounds}, order before→after in every round. Load average at each run start: {loads}. "
        "Throughput ratios > 1 mean the after tree is faster; the CPU row < 1 means it used less CPU.",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
