"""Budgeted kernel regression on a stream (issue 38) against batch LIBSVM and River's online anchors.

One pass, batches of B = 500 rows, file order and shuffled, through the streaming pipeline
(:class:`svmstream.solvers.online.tasks.StreamingRegressor`, in-process: the service's
``task: "regression"`` is not wired yet, so this is not through HTTP /learn):

* ``no settings`` — ``StreamingRegressor()``: warm-up standardisation of X and y, the dual
  coordinate ε-SVR step (C = 1, ε = 0.1, γ = "scale", B = 500), rehearsal 4;
* ``explicit`` — the papers' BSGD with the ε-insensitive loss: ``BudgetedSGDRegressor(budget=500,
  C=1, epsilon=0.1, n_samples=n, fit_intercept=True)`` in the same pipeline, rehearsal 0;

against ``SVR()`` (default C, γ = "scale") on standardised X and y (``TransformedTargetRegressor``;
diamonds: on a uniform sample of 10,000 training rows, LIBSVM being quadratic), River's
``StandardScaler() | LinearRegression()`` and ``HoeffdingAdaptiveTreeRegressor`` (learn_one over
the same stream).  Test RMSE, the 90 % split-conformal interval's coverage of the test targets,
and CPU seconds per example of the pipeline next to a classifier's (``StreamingClassifier`` with
no settings on the same features, label y > median), interleaved A B A B A B, median of ratios.

``python -m benchmarks.bench_regression [--sets diabetes,friedman1,boston,diamonds] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .common import write_results
from .task_data import REGRESSION, regression_split

BATCH = 500
#: LIBSVM is quadratic in the rows: the batch reference learns a uniform sample of this many.
SVR_ROWS = 10_000


def _rmse(pred, y) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2)))


def _stream(model, X, y):
    started = time.process_time()
    for lo in range(0, X.shape[0], BATCH):
        model.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH])
    model.flush()
    return time.process_time() - started


def _svr(X, y, Xt):
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVR

    model = TransformedTargetRegressor(make_pipeline(StandardScaler(), SVR()), transformer=StandardScaler())
    return model.fit(X[:SVR_ROWS], y[:SVR_ROWS]).predict(Xt)


def _river(make, X, y, Xt):
    model = make()
    names = [f"x{j}" for j in range(X.shape[1])]
    for row, target in zip(X, y, strict=True):
        model.learn_one(dict(zip(names, row, strict=True)), float(target))
    return np.array([model.predict_one(dict(zip(names, row, strict=True))) for row in Xt])


def _river_models():
    from river import linear_model, preprocessing, tree

    return {
        "river StandardScaler|LinearRegression": lambda: (
            preprocessing.StandardScaler() | linear_model.LinearRegression()
        ),
        "river HoeffdingAdaptiveTreeRegressor": lambda: tree.HoeffdingAdaptiveTreeRegressor(seed=0),
    }


def _ours(kind, n):
    from svmstream.solvers.budgeted.tasks import BudgetedSGDRegressor
    from svmstream.solvers.online.tasks import StreamingRegressor

    if kind == "no settings":
        return StreamingRegressor(random_state=0)
    plain = BudgetedSGDRegressor(budget=500, C=1.0, epsilon=0.1, n_samples=n, fit_intercept=True)
    return StreamingRegressor(plain, rehearsal=0, random_state=0)


def _cpu_ratio(X, y, rounds):
    """Median over rounds of CPU(regressor) / CPU(classifier), interleaved, on the same rows."""
    from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier
    from svmstream.solvers.online.tasks import StreamingRegressor

    labels = (y > np.median(y)).astype(np.int64)
    ratios = []
    for _ in range(rounds):
        reg = _stream(StreamingRegressor(random_state=0), X, y)
        clf = StreamingClassifier(BudgetedSGDClassifier(random_state=0))
        started = time.process_time()
        for lo in range(0, X.shape[0], BATCH):
            clf.partial_fit(X[lo : lo + BATCH], labels[lo : lo + BATCH], classes=[0, 1])
        ratios.append(reg / (time.process_time() - started))
    return float(np.median(ratios)), reg / X.shape[0]


def run_set(name, rounds):
    rows = []
    X, y, Xt, yt = regression_split(name, "shuffled")  # its first rows are a uniform sample
    svr = _rmse(_svr(X, y, Xt), yt)
    for order in ("file", "shuffled"):
        X, y, Xt, yt = regression_split(name, order)
        base = {"set": name, "order": order, "n_train": X.shape[0], "d": X.shape[1], "svr_rmse": svr}
        for label, make in _river_models().items():
            base[label] = _rmse(_river(make, X, y, Xt), yt)
        for kind in ("no settings", "explicit"):
            model = _ours(kind, X.shape[0])
            cpu = _stream(model, X, y)
            lower, upper = model.predict_interval(Xt, 0.9)
            rmse = _rmse(model.predict(Xt), yt)
            rows.append(
                {
                    **base,
                    "model": kind,
                    "rmse": rmse,
                    "rmse/svr": rmse / svr,
                    "coverage_90": float(np.mean((lower <= yt) & (yt <= upper))),
                    "cpu_us_per_example": 1e6 * cpu / X.shape[0],
                }
            )
            print(rows[-1], flush=True)
    ratio, _ = _cpu_ratio(*regression_split(name, "file")[:2], rounds)
    for row in rows:
        row["cpu_vs_classifier"] = ratio
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(REGRESSION))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for name in args.sets.split(","):
        try:
            rows.extend(run_set(name, args.rounds))
        except FileNotFoundError as exc:
            print(f"skip {name}: {exc}")
    notes = (
        "One pass, B = 500, in-process StreamingRegressor (not yet through HTTP). Targets: "
        "rmse/svr <= 1.10 and rmse below River's linear regression; coverage_90 in [0.88, 0.92]; "
        "cpu_vs_classifier <= 1.2. Sources: " + "; ".join(f"{k}: {v[1]}" for k, v in REGRESSION.items())
    )
    write_results("regression", {"rows": rows}, rows, "Budgeted kernel regression, one pass", notes)


if __name__ == "__main__":
    main()
