"""Budgeted kernel regression on a stream (issue 38) against batch LIBSVM and River's online anchors.

One pass, batches of B = 500 rows, file order and shuffled, through HTTP ``/learn`` of a real
``svmstream serve`` (``PUT /models/{name}`` with ``"task": "regression"``; ``--in-process``: the
streaming pipeline :class:`svmstream.solvers.online.tasks.StreamingRegressor` in this process):

* ``no settings`` — ``{"task": "regression"}``: the race of two pipelines with γ = 1 and 0.5 ×
  "scale" (:class:`svmstream.solvers.online.selection.SelectionRegressor`), each with warm-up
  standardisation of X and y, the dual coordinate ε-SVR step (C = 1, ε = 0.1, B = 500), rehearsal 4;
* ``explicit`` — the papers' BSGD with the ε-insensitive loss: ``algorithm "bsgd", budget 500,
  C 1, epsilon 0.1, n_samples n, fit_intercept, rehearsal 0, merge_solver "gss"``
  (``BudgetedSGDRegressor`` with these settings in the same pipeline);

``max_abs_delta_vs_in_process``: the service's test predictions against the in-process pipeline
with the same settings (the service adds nothing);
against ``SVR()`` (default C, γ = "scale") on standardised X and y (``TransformedTargetRegressor``;
diamonds: on a uniform sample of 10,000 training rows, LIBSVM being quadratic), River's
``StandardScaler() | LinearRegression()`` and ``HoeffdingAdaptiveTreeRegressor`` (learn_one over
the same stream).  Test RMSE, the 90 % split-conformal interval's coverage of the test targets,
and CPU seconds per example of the pipeline next to a classifier's (``StreamingClassifier`` with
no settings on the same features, label y > median), interleaved A B A B A B, median of ratios.

CPU seconds are the server process's (HTTP) or this process's (``--in-process``).

``python -m benchmarks.bench_regression [--sets diabetes,friedman1,boston,diamonds] [--rounds 3] [--in-process]``
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from .common import write_results
from .task_data import REGRESSION, regression_split

BATCH = 500
#: The CPU ratio is measured on at least this many rows (a small set repeated).
CPU_ROWS = 20_000
#: LIBSVM is quadratic in the rows: the batch reference learns a uniform sample of this many.
SVR_ROWS = 10_000


def _rmse(pred, y) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2)))


def _stream(model, X, y, cpu=time.process_time):
    started = cpu()
    for lo in range(0, X.shape[0], BATCH):
        model.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH])
    model.flush()
    return cpu() - started


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


def settings(kind, n) -> dict:
    """The ``PUT /models`` body of a model kind (``n``: the training rows, BSGD's n_samples)."""
    if kind == "no settings":
        return {"task": "regression"}
    return {"task": "regression", "algorithm": "bsgd", "budget": 500, "C": 1.0, "epsilon": 0.1,
            "n_samples": n, "fit_intercept": True, "rehearsal": 0, "merge_solver": "gss"}  # fmt: skip


def _ours(kind, n):
    """The in-process pipeline of a model kind (the service's model of the same settings)."""
    from svmstream.solvers.budgeted.tasks import BudgetedSCARegressor, BudgetedSGDRegressor
    from svmstream.solvers.online.selection import SelectionRegressor
    from svmstream.solvers.online.tasks import StreamingRegressor

    if kind == "no settings":  # the race of γ the service runs for {"task": "regression"}
        return SelectionRegressor(
            BudgetedSCARegressor(merge_solver="lookup-wd", random_state=0), random_state=0
        )
    plain = BudgetedSGDRegressor(
        budget=500, C=1.0, epsilon=0.1, n_samples=n, fit_intercept=True, random_state=0
    )
    return StreamingRegressor(plain, rehearsal=0, random_state=0)


def _cpu_ratio(X, y, rounds, service=None):
    """Median over rounds of CPU(regressor) / CPU(classifier, plain BSGD pipeline), interleaved, on
    the same rows (``service``: ``(server, client)``: models of the service, its CPU seconds)."""
    from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

    reps = -(-CPU_ROWS // len(y))  # a small set repeated: CPU seconds well above the clock's tick
    X, y = np.tile(X, (reps, 1)), np.tile(y, reps)
    labels = (y > np.median(y)).astype(np.int64)
    ratios = []
    for _ in range(rounds):
        if service is None:
            reg = _stream(_ours("no settings", len(y)), X, y)
            clf = _stream(_Binary(StreamingClassifier(BudgetedSGDClassifier(random_state=0))), X, labels)
        else:
            from .task_http import HttpModel, server_cpu

            server, client = service
            cpu = functools.partial(server_cpu, server)
            reg = _stream(HttpModel(client, settings("no settings", len(y))), X, y, cpu)
            clf = _stream(HttpModel(client, {"selection": False}), X, labels, cpu)
        ratios.append(reg / clf)
    return float(np.median(ratios)), reg / X.shape[0]


class _Binary:
    """A classifier's ``partial_fit`` with its classes (the 0/1 labels) given on every call."""

    def __init__(self, clf):
        self.clf = clf

    def partial_fit(self, X, y):
        self.clf.partial_fit(X, y, classes=[0, 1])

    def flush(self):
        self.clf.flush()


def run_set(name, rounds, service=None):
    rows = []
    X, y, Xt, yt = regression_split(name, "shuffled")  # its first rows are a uniform sample
    svr = _rmse(_svr(X, y, Xt), yt)
    for order in ("file", "shuffled"):
        X, y, Xt, yt = regression_split(name, order)
        base = {"set": name, "order": order, "n_train": X.shape[0], "d": X.shape[1], "svr_rmse": svr}
        for label, make in _river_models().items():
            base[label] = _rmse(_river(make, X, y, Xt), yt)
        for kind in ("no settings", "explicit"):
            rows.append({**base, "model": kind, **_figures(kind, X, y, Xt, yt, svr, service)})
            print(rows[-1], flush=True)
    ratio, _ = _cpu_ratio(*regression_split(name, "file")[:2], rounds, service)
    for row in rows:
        row["cpu_vs_classifier"] = ratio
    return rows


def _figures(kind, X, y, Xt, yt, svr, service) -> dict:
    """One pass of a model kind: test RMSE, coverage, CPU per example (and, through the service,
    its predictions against the in-process pipeline of the same settings)."""
    local = _ours(kind, X.shape[0])
    if service is None:
        model, cpu = local, _stream(local, X, y)
    else:
        from .task_http import HttpModel, server_cpu

        server, client = service
        model = HttpModel(client, settings(kind, X.shape[0]))
        cpu = _stream(model, X, y, lambda: server_cpu(server))
    lower, upper = model.predict_interval(Xt, 0.9)
    pred = model.predict(Xt)
    rmse = _rmse(pred, yt)
    out = {
        "rmse": rmse,
        "rmse/svr": rmse / svr,
        "coverage_90": float(np.mean((lower <= yt) & (yt <= upper))),
        "cpu_us_per_example": 1e6 * cpu / X.shape[0],
        "path": "http" if service is not None else "in-process",
    }
    if service is not None:
        _stream(local, X, y)
        out["max_abs_delta_vs_in_process"] = float(np.max(np.abs(pred - local.predict(Xt))))
        model.delete()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(REGRESSION))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="the pipeline in this process, not HTTP")
    args = parser.parse_args(argv)
    rows = []
    if args.in_process:
        rows = _run(args, None)
    else:
        from .task_http import service

        with service() as running:
            rows = _run(args, running)
    path = "in-process StreamingRegressor" if args.in_process else "HTTP /learn of a svmstream serve"
    notes = (
        f"One pass, B = 500, {path}. Targets: "
        "rmse/svr <= 1.10 and rmse below River's linear regression; coverage_90 in [0.88, 0.92]; "
        "cpu_vs_classifier <= 1.2. Sources: " + "; ".join(f"{k}: {v[1]}" for k, v in REGRESSION.items())
    )
    write_results("regression", {"rows": rows}, rows, "Budgeted kernel regression, one pass", notes)


def _run(args, service) -> list[dict]:
    rows = []
    for name in args.sets.split(","):
        try:
            rows.extend(run_set(name, args.rounds, service))
        except FileNotFoundError as exc:
            print(f"skip {name}: {exc}")
    return rows


if __name__ == "__main__":
    main()
