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

BENCHES = {
    "skeleton": (["-m", "benchmarks.bench_skeleton", "--quick"], "skeleton"),
    "stream": (["-m", "benchmarks.bench_stream", "--parts", "A", "--also-fsync"], "stream"),
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
        "stream consume only ex/s": payload["A_consume_only"]["examples_per_s"],
    }


def run_once(tree: Path, bench: str) -> dict:
    args, result_name = BENCHES[bench]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    payload = json.loads((tree / "benchmarks" / "results" / f"{result_name}.json").read_text())
    return {"figures": _figures(bench, payload), "cpu_s": cpu, "wall_s": wall, "load_avg": load}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--benches", nargs="+", default=list(BENCHES), choices=list(BENCHES))
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: list[dict] = []
    try:
        # one untimed run per tree and benchmark first: numba compiles into its on-disk cache
        # there, so the timed rounds measure steady state (compile time reported separately)
        compile_runs = {
            (side, bench): run_once(trees[side], bench)
            for bench in args.benches
            for side in ("before", "after")
        }
        for (side, bench), result in compile_runs.items():
            print(f"compile round {bench} {side}: cpu {result['cpu_s']:.1f} s", flush=True)
        for rnd in range(args.rounds):
            for bench in args.benches:
                for side in ("before", "after"):  # A B, A B, ...
                    result = run_once(trees[side], bench)
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
        "compare_trees",
        payload,
        rows,
        "Interleaved before/after speed (bench_skeleton --quick, bench_stream part A)",
        f"Rounds: {args.rounds}, order before→after in every round. Load average at each run start: {loads}. "
        "Throughput ratios > 1 mean the after tree is faster; the CPU row < 1 means it used less CPU.",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
