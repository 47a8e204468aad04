"""Benchmark: a9a at large C run to convergence (supplement to ``bench_linear``).

``bench_linear`` caps our solvers at 200 M coordinate steps per problem so that the whole grid
stays near 15 minutes. On a9a at C >= 100 (eps = 0.001) and C = 1000 that cap binds, and the
main table can only compare equal work. This run lifts the cap to ``STEP_CAP`` for exactly
those configurations: our baseline (``uniform``) and ``avsf`` to their stopping rule, and
scikit-learn's LIBLINEAR (``LinearSVC``, the same Algorithm 2 in C) with an iteration limit
it does not reach. It reports steps, seconds and the final dual objectives.
(liblinear-official stops at its built-in 300 iterations and cannot be lifted from the
command line, so it is not part of this run.)

Run from the repository root::

    python -m benchmarks.bench_linear_large_c     # ~15 min, two worker processes

Writes ``benchmarks/results/linear_large_c.{json,md}``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import scipy.sparse as sp

from benchmarks import datasets
from benchmarks.bench_linear import SEED, run_sklearn
from benchmarks.common import machine, write_results
from svmstream.solvers.linear._cd import as_cd_input, dual_cd

STEP_CAP = 6_000_000_000  # coordinate steps; far above what these runs need
SKLEARN_MAX_ITER = 10**7  # LinearSVC outer iterations
CONFIGS = [(100.0, 0.001), (1000.0, 0.01), (1000.0, 0.001)]
SOLVERS = ("uniform", "avsf", "sklearn")


def _load():
    X, y, _, _ = datasets.load("a9a")
    return sp.csr_matrix(X), np.where(y > 0, 1.0, -1.0)


def run_one(job):
    """One (C, eps, solver) run in a worker process; returns a result row."""
    C, eps, solver = job
    X, y = _load()
    if solver == "sklearn":
        X32 = X.copy()
        X32.indices = X32.indices.astype(np.int32)
        X32.indptr = X32.indptr.astype(np.int32)
        row = run_sklearn(X32, y, C, eps, SKLEARN_MAX_ITER)
        row["steps"] = None  # LIBLINEAR does not report coordinate steps
    else:
        started = time.process_time()
        r = dual_cd(
            as_cd_input(X), y, C=C, tol=eps, max_iter=10**9, selection=solver, seed=SEED, max_steps=STEP_CAP
        )
        row = {
            "seconds": r.wall_time,
            "cpu_seconds": time.process_time() - started,
            "iterations": r.n_iter,
            "steps": r.n_steps,
            "dual": r.dual,
            "primal": r.primal,
            "capped": not r.converged,
        }
    row.update({"C": C, "eps": eps, "solver": solver})
    print(row, flush=True)
    return row


def markdown(result) -> str:
    lines = [
        "# a9a at large C, run to convergence (supplement to `linear.md`)",
        "",
        f"Command: `python -m benchmarks.bench_linear_large_c`; machine {json.dumps(result['machine'])}; "
        f"step cap {STEP_CAP:,} (ours), LinearSVC max_iter {SKLEARN_MAX_ITER:,}. Two runs at a time "
        "on 2 shared cores, so seconds are noisy; steps and objectives are exact.",
        "",
        "| C | eps | solver | converged | steps | iterations | seconds | cpu s | dual | gap to best dual |"
        " uniform/avsf steps | avsf/sklearn seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for C, eps in CONFIGS:
        rows = {r["solver"]: r for r in result["rows"] if r["C"] == C and r["eps"] == eps}
        best = max(r["dual"] for r in rows.values())
        ratio = rows["uniform"]["steps"] / rows["avsf"]["steps"]
        speed = rows["avsf"]["seconds"] / rows["sklearn"]["seconds"]
        for name in SOLVERS:
            r = rows[name]
            steps = f"{r['steps']:,}" if r["steps"] is not None else "–"
            lines.append(
                f"| {C:g} | {eps:g} | {name} | {'no (capped)' if r['capped'] else 'yes'} | {steps} | "
                f"{r['iterations']:,} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['dual']:.8g} | "
                f"{(best - r['dual']) / abs(best):.1e} | {ratio:.2f} | {speed:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    datasets.path("a9a")  # exits with a clear message when the data is absent
    jobs = [(C, eps, s) for C, eps in CONFIGS for s in SOLVERS]
    jobs.sort(key=lambda j: -j[0] * (10 if j[1] < 0.005 else 1))  # longest first
    with ProcessPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(run_one, jobs))
    result = {"machine": machine(), "step_cap": STEP_CAP, "rows": rows}
    write_results("linear_large_c", result, rows, "a9a at large C", markdown=markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
