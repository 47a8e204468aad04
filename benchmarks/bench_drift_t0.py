"""Choose ``DRIFT_RESET_T0``: for several t0, (a) the drift part of ``bench_online`` (3 passes
of shuffled ijcnn1, labels flipped from pass 2, default BSGD model, ``on_drift="reset_schedule"``):
examples until recovery; (b) ijcnn1 in file order with the tuned raw setting of
``bench_skeleton`` (γ = 2, C = 32, no scaling, no shuffle buffer), where the error rate rises
in places and the detector fires without a concept change: test accuracy (``on_drift="none"``
as the reference).  Run: ``python -m benchmarks.bench_drift_t0``; results in
``benchmarks/results/drift_t0.{json,md}``."""

from __future__ import annotations

import numpy as np

import svmstream.solvers.budgeted._base as base
from benchmarks import datasets
from benchmarks.bench_online import _prequential, _recovery
from benchmarks.common import machine, write_results
from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier


def main() -> None:
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    n = X.shape[0]
    plain = dict(budget=500, gamma=2.0, C=32.0, n_samples=n, random_state=0)
    raw = dict(scaling="none", shuffle_buffer=0, run_guard=False)  # the stages off but the drift reaction
    rows = []
    for t0 in (None, 100, 1000, 10_000, 30_000):
        base.DRIFT_RESET_T0 = t0 or 1
        file_order = StreamingClassifier(
            BudgetedSGDClassifier(**plain), on_drift="reset_schedule" if t0 else "none", **raw
        )
        for start in range(0, n, 1000):
            file_order.partial_fit(X[start : start + 1000], y[start : start + 1000], classes=[-1.0, 1.0])
        rows.append(
            {
                "t0": t0 or "none (on_drift)",
                "case": "file order, raw tuned, no buffer",
                "test_accuracy": float(file_order.flush().score(Xt, yt)),
                "detections": file_order.drift_.n_detections,
            }
        )
        print(rows[-1], flush=True)
        if t0 is None:
            continue
        for s in range(3):
            rng = np.random.default_rng(s)
            passes = [rng.permutation(n) for _ in range(3)]
            Xs = np.vstack([X[p] for p in passes])
            ys = np.concatenate([y[passes[0]], -y[passes[1]], -y[passes[2]]])
            est = StreamingClassifier(
                BudgetedSGDClassifier(budget=500, random_state=s)
            )  # the service's defaults
            correct = _prequential(est, Xs, ys)
            before, recovered = _recovery(correct, n)
            rows.append(
                {
                    "t0": t0,
                    "case": f"flip, defaults, seed {s}",
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
