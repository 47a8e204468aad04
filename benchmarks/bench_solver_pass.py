"""One pass of the plain BSGD solver over ijcnn1: CPU seconds and the decisions it gives.

``BudgetedSGDClassifier(budget=500, gamma=2, C=32, merge_solver=m, random_state=s).fit`` on
ijcnn1 (49,990 rows, d = 22, dense) for the GSS and lookup-WD merge solvers and shuffling
seeds ``--seeds`` (default 0 1 2), after one untimed fit that compiles: CPU seconds of the fit
(``time.process_time``), wall seconds, examples per CPU second, accuracy on ijcnn1.t and
digests of the 91,701 test decision values (their sum, sum of absolute values, the first and the
largest).  An estimator that still has streaming stages (an older tree) gets them off.

Two trees: ``python -m benchmarks compare --before DIR bench_solver_pass``; the same decisions
show as ``max |after − before|`` = 0 on the digest rows, the speed as the median ratio of
examples per CPU second.  Run alone: ``python -m benchmarks.bench_solver_pass [--seeds 0 1 2]``.
Writes ``benchmarks/results/solver_pass.{json,md}``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import write_results
from benchmarks.datasets import load
from svmstream.solvers import BudgetedSGDClassifier

PARAMS = dict(budget=500, gamma=2.0, C=32.0)
STAGES_OFF = dict(scaling="none", rehearsal=0, shuffle_buffer=0, warmup=0, run_guard=False, on_drift="none")


def one_fit(X, y, Xt, yt, merge_solver: str, seed: int, extra: dict) -> dict:
    est = BudgetedSGDClassifier(merge_solver=merge_solver, random_state=seed, **PARAMS, **extra)
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(X, y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    decisions = est.decision_function(Xt)
    return {
        "merge_solver": merge_solver,
        "seed": str(seed),
        "cpu_s": cpu,
        "wall_s": wall,
        "examples_per_cpu_s": X.shape[0] / cpu,
        "test_accuracy_%": 100 * float(np.mean(np.where(decisions > 0, 1.0, -1.0) == yt)),
        "sum_decisions": float(decisions.sum()),
        "sum_abs_decisions": float(np.abs(decisions).sum()),
        "first_decision": float(decisions[0]),
        "max_decision": float(decisions.max()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    X, y, Xt, yt = load("ijcnn1", dense=True)
    known = BudgetedSGDClassifier().get_params()
    extra = {k: v for k, v in STAGES_OFF.items() if k in known}
    rows = []
    for merge_solver in ("gss", "lookup-wd"):
        BudgetedSGDClassifier(merge_solver=merge_solver, **PARAMS, **extra).fit(X[:2000], y[:2000])  # compile
        rows += [one_fit(X, y, Xt, yt, merge_solver, seed, extra) for seed in args.seeds]
    write_results(
        "solver_pass",
        {"params": PARAMS, "seeds": args.seeds, "rows": rows},
        rows,
        "One pass of the plain BSGD solver over ijcnn1 (B = 500, γ = 2, C = 32)",
        "CPU seconds of each fit (`time.process_time`) after an untimed compiling fit; decision "
        "digests over the 91,701 rows of ijcnn1.t.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
