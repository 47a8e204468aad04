"""What the default preprocessing of online models costs.

On ijcnn1 (49,990 rows, d = 22), B = 500, γ = 2, C = 32, lookup-WD, one pass, interleaved
rounds in one process, CPU seconds (``time.process_time``):

* **fit, scaling**: the plain ``BudgetedSGDClassifier.fit`` against
  ``make_pipeline(MaxAbsScaler(), BudgetedSGDClassifier(...)).fit`` on ijcnn1 max-abs-scaled
  beforehand, so that the factors are exactly 1 and both runs learn the identical model
  (checked): the difference is the cost of computing and applying the scaling.
* **stream**: a ``StreamingClassifier`` fed in batches of 1,000 with its order stage off
  (``scaling="none"``, ``shuffle_buffer=0``, ``run_guard=False``) against its defaults (warm-up
  window, shuffle buffer K = 20,000, run guard; γ = 2 is given, so no scaling) followed by
  ``flush()``; neither side rehearses or reacts to drift.  The buffer changes
  the order, hence the model and its merges: the row also gives the merges of each side.

Run: ``python -m benchmarks.bench_preprocessing [--rounds 5]``.
Writes ``benchmarks/results/preprocessing.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler

from benchmarks import datasets
from benchmarks.common import machine, write_results
from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

PARAMS = dict(budget=500, gamma=2.0, C=32.0, merge_solver="lookup-wd", random_state=0)
#: the pipeline's order stage off (no rehearsal or drift stage in either arm)
RAW = dict(scaling="none", shuffle_buffer=0, run_guard=False, rehearsal=0, on_drift="none")
STAGES = dict(rehearsal=0, on_drift="none")


def _fit(X, y, scaled=True):
    est = BudgetedSGDClassifier(**PARAMS)
    if scaled:  # the plain estimator scales nothing: scikit-learn's scaler in front
        est = make_pipeline(MaxAbsScaler(), est)
    t = time.process_time()
    est.fit(X, y)
    return time.process_time() - t, est


def _stream(X, y, **kw):
    est = StreamingClassifier(BudgetedSGDClassifier(**PARAMS, n_samples=X.shape[0]), **kw)
    t = time.process_time()
    for start in range(0, X.shape[0], 1000):
        est.partial_fit(X[start : start + 1000], y[start : start + 1000], classes=[-1.0, 1.0])
    est.flush()
    return time.process_time() - t, est


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    X, y, Xt, _ = datasets.load("ijcnn1", dense=True)
    top = np.abs(X).max(axis=0)
    Xp = X / np.where(top > 0, top, 1.0)  # max-abs scaled: the frozen factors become exactly 1
    Xtp = Xt / np.where(top > 0, top, 1.0)
    (
        _fit(Xp[:2000], y[:2000], scaled=False),
        _fit(Xp[:2000], y[:2000]),
        _stream(Xp[:3000], y[:3000]),
    )  # compile
    pairs = {
        "fit, scaling": ({"A": {"scaled": False}, "B": {}}, _fit),
        "stream": ({"A": RAW, "B": STAGES}, _stream),
    }
    rows, runs = [], []
    for name, (sides, run) in pairs.items():
        ratios, seconds, merges = [], {"A": [], "B": []}, {}
        for rnd in range(args.rounds):
            done = {}
            for side in ("A", "B"):  # A B, A B, ...
                s, est = run(Xp, y, **sides[side])
                done[side] = (s, est)
                seconds[side].append(s)
                merges[side] = (est[-1] if hasattr(est, "steps") else est).n_merges_
                runs.append(
                    {
                        "bench": name,
                        "round": rnd + 1,
                        "side": side,
                        "cpu_s": s,
                        "load_avg": os.getloadavg()[0],
                    }
                )
            ratios.append(done["B"][0] / done["A"][0])
            if name == "fit, scaling" and rnd == 0:
                same = np.array_equal(
                    done["A"][1].decision_function(Xtp), done["B"][1].decision_function(Xtp)
                )
        rows.append(
            {
                "bench": name,
                "A": "order stage off" if name == "stream" else "plain fit",
                "B": "defaults (window, buffer 20,000, guard) + flush"
                if name == "stream"
                else "MaxAbsScaler + fit",
                "A CPU s (median)": statistics.median(seconds["A"]),
                "B CPU s (median)": statistics.median(seconds["B"]),
                "per-round B/A": ", ".join(f"{r:.3f}" for r in ratios),
                "median B/A": statistics.median(ratios),
                "merges A / B": f"{merges['A']} / {merges['B']}",
                "identical model": same if name == "fit, scaling" else "no (other order)",
            }
        )
    payload = {"machine": machine(), "params": PARAMS, "rows": rows, "runs": runs}
    write_results(
        "preprocessing",
        payload,
        rows,
        "Cost of the default preprocessing (ijcnn1, B=500, one pass, CPU s)",
        f"{args.rounds} interleaved rounds in one process after a compile run; load average per run in the JSON.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
