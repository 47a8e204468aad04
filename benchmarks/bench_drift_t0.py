"""Choose ``DRIFT_RESET_T0``: the drift part of ``bench_online`` (3 passes of shuffled ijcnn1,
labels flipped from pass 2, default BSGD model, ``on_drift="reset_schedule"``) for several
t0.  Run: ``python -m benchmarks.bench_drift_t0``; results in
``benchmarks/results/drift_t0.{json,md}``."""

from __future__ import annotations

import numpy as np

import svmstream.solvers.budgeted._base as base
from benchmarks.bench_online import SETS, _prequential, _recovery
from benchmarks.common import load_pair, machine, write_results
from svmstream.solvers import BudgetedSGDClassifier


def main() -> None:
    X, y, _, _ = load_pair(*SETS["ijcnn1"][:2], n_features=22)
    n = X.shape[0]
    rows = []
    for t0 in (100, 1000, 10_000):
        base.DRIFT_RESET_T0 = t0
        for s in range(3):
            rng = np.random.default_rng(s)
            passes = [rng.permutation(n) for _ in range(3)]
            Xs = np.vstack([X[p] for p in passes])
            ys = np.concatenate([y[passes[0]], -y[passes[1]], -y[passes[2]]])
            est = BudgetedSGDClassifier(budget=500, random_state=s)
            correct = _prequential(est, Xs, ys)
            before, recovered = _recovery(correct, n)
            rows.append(
                {
                    "t0": t0,
                    "seed": s,
                    "pre_flip_accuracy": before,
                    "recovered_after_examples": recovered,
                    "last_pass_accuracy": float(correct[2 * n :].mean()),
                }
            )
            print(rows[-1], flush=True)
    write_results(
        "drift_t0", {"machine": machine(), "rows": rows}, rows, "Drift reset: t0 of the restarted schedule"
    )


if __name__ == "__main__":
    main()
