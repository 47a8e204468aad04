"""Budgeted one-class SVM on a stream (issue 38) against batch LIBSVM and River's anomaly detectors.

"One class is normal" on the shared multi-class sets letter and pendigits (``SVMSTREAM_DATA``):
learn the training rows of one class in one pass (batches of B = 500, file order and shuffled),
score the whole test set, ROC AUC of the other classes as novelties; the false-alarm share of the
5 % threshold on the test rows of the normal class (held inliers).  Models through HTTP ``/learn``
of a real ``svmstream serve`` (``"task": "novelty"``, rows without y; ``--in-process``: the
pipeline :class:`svmstream.solvers.online.novelty.StreamingNovelty` in this process):

* ``no settings`` — ``{"task": "novelty"}``: warm-up standardisation, ν = 0.2, γ = "scale",
  B = 500, lookup-WD merging, rehearsal 1, threshold at a 5 % false-alarm rate on the last 2,000
  scores;
* ``explicit`` — ``{"task": "novelty", "nu": 0.5, "merge_solver": "gss"}`` (scikit-learn's ν);

against ``OneClassSVM()`` (ν = 0.5, γ = "scale") on standardised rows, River's ``OneClassSVM``
(``StandardScaler() | OneClassSVM(nu=0.2)``) and ``HalfSpaceTrees`` (``MinMaxScaler() |
HalfSpaceTrees(seed=0)``), learn_one over the same stream, and the CPU seconds per example next
to a classifier's (``StreamingClassifier`` with no settings, the class against 2 other classes).

CPU seconds are the server process's (HTTP) or this process's (``--in-process``).

``python -m benchmarks.bench_novelty [--sets letter,pendigits] [--classes 3] [--in-process]``
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from .common import write_results

BATCH = 500
#: The CPU ratio is measured on at least this many rows of the normal class (repeated).
CPU_ROWS = 10_000


def _stream(model, X, cpu=time.process_time):
    started = cpu()
    for lo in range(0, X.shape[0], BATCH):
        model.partial_fit(X[lo : lo + BATCH])
    model.flush()
    return cpu() - started


def _river_scores(make, X, Xt):
    model = make()
    names = [f"x{j}" for j in range(X.shape[1])]
    for row in X:
        model.learn_one(dict(zip(names, row, strict=True)))
    return np.array([model.score_one(dict(zip(names, row, strict=True))) for row in Xt])


def _river_models():
    from river import anomaly, preprocessing

    return {
        "river OneClassSVM": lambda: preprocessing.StandardScaler() | anomaly.OneClassSVM(nu=0.2),
        "river HalfSpaceTrees": lambda: preprocessing.MinMaxScaler() | anomaly.HalfSpaceTrees(seed=0),
    }


#: The ``PUT /models`` body of each model kind.
SETTINGS = {
    "no settings": {"task": "novelty"},
    "explicit": {"task": "novelty", "nu": 0.5, "merge_solver": "gss"},
}


def _ours(kind, service=None):
    """The model of a kind: the service's (``service``: ``(server, client)``) or in-process."""
    from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM
    from svmstream.solvers.online.novelty import StreamingNovelty

    if service is not None:
        from .task_http import HttpModel

        return HttpModel(service[1], SETTINGS[kind])
    if kind == "no settings":
        return StreamingNovelty(
            BudgetedOneClassSVM(nu=0.2, merge_solver="lookup-wd", random_state=0), random_state=0
        )
    return StreamingNovelty(BudgetedOneClassSVM(nu=0.5, random_state=0), random_state=0)


def _cpu(service):
    if service is None:
        return time.process_time
    from .task_http import server_cpu

    return functools.partial(server_cpu, service[0])


class _Labelled:
    """A classifier learning ``X`` with labels ``y`` in batches of ``BATCH`` (``_stream``'s calls)."""

    def __init__(self, clf, y, service):
        self.clf, self.y, self.at, self.service = clf, y, 0, service

    def partial_fit(self, X):
        y = self.y[self.at : self.at + X.shape[0]]
        self.at += X.shape[0]
        if self.service is None:
            self.clf.partial_fit(X, y, classes=[0, 1])
        else:
            self.clf.partial_fit(X, y)

    def flush(self):
        self.clf.flush()


def _cpu_ratio(X_normal, X_other, rounds=3, service=None):
    """Median over rounds of CPU per example of the novelty model / a classifier's (the plain
    BSGD pipeline, the class against two others), interleaved."""
    from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

    reps = -(-CPU_ROWS // len(X_normal))  # a small class repeated: CPU seconds well above the tick
    X_normal, X_other = np.tile(X_normal, (reps, 1)), np.tile(X_other, (reps, 1))
    X = np.vstack([X_normal, X_other])
    y = np.r_[np.zeros(len(X_normal), dtype=np.int64), np.ones(len(X_other), dtype=np.int64)]
    order = np.random.default_rng(0).permutation(len(y))
    ratios = []
    for _ in range(rounds):
        ours = _stream(_ours("no settings", service), X_normal, _cpu(service)) / len(X_normal)
        if service is None:
            clf = StreamingClassifier(BudgetedSGDClassifier(random_state=0))
        else:
            from .task_http import HttpModel

            clf = HttpModel(service[1], {"selection": False})
        theirs = _stream(_Labelled(clf, y[order], service), X[order], _cpu(service)) / len(y)
        ratios.append(ours / theirs)
    return float(np.median(ratios))


def run_set(name, n_classes, service=None):
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import OneClassSVM

    from .datasets import load

    X_all, y_all, Xt, yt = load(name, dense=True)
    rows = []
    for normal in np.unique(y_all)[:n_classes]:
        novel = (yt != normal).astype(int)
        for order in ("file", "shuffled"):
            X = X_all[y_all == normal]
            if order == "shuffled":
                X = X[np.random.default_rng(0).permutation(len(X))]
            scaler = StandardScaler().fit(X)
            ref = roc_auc_score(
                novel, -OneClassSVM().fit(scaler.transform(X)).decision_function(scaler.transform(Xt))
            )
            base = {"set": name, "normal": int(normal), "order": order, "n_train": len(X), "ocsvm_auc": ref}
            for label, make in _river_models().items():
                base[label] = roc_auc_score(novel, _river_scores(make, X, Xt))
            for kind in ("no settings", "explicit"):
                model = _ours(kind, service)
                cpu = _stream(model, X, _cpu(service))
                scores = model.score_samples(Xt)
                auc = roc_auc_score(novel, scores)
                rows.append(
                    {
                        **base,
                        "model": kind,
                        "auc": auc,
                        "auc-ocsvm": auc - ref,
                        "false_alarm_5pc": float(np.mean(model.outlier(Xt[yt == normal]))),
                        "cpu_us_per_example": 1e6 * cpu / len(X),
                        "path": "http" if service is not None else "in-process",
                    }
                )
                if service is not None:  # the service adds nothing to the pipeline
                    local = _ours(kind)
                    _stream(local, X)
                    rows[-1]["max_abs_delta_vs_in_process"] = float(
                        np.max(np.abs(scores - local.score_samples(Xt)))
                    )
                print(rows[-1], flush=True)
        others = X_all[np.isin(y_all, np.unique(y_all)[n_classes : n_classes + 2])]
        ratio = _cpu_ratio(X_all[y_all == normal], others, service=service)
        for row in rows[-4:]:
            row["cpu_vs_classifier"] = ratio
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="letter,pendigits")
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="the pipeline in this process, not HTTP")
    args = parser.parse_args(argv)
    if args.in_process:
        rows = [row for name in args.sets.split(",") for row in run_set(name, args.classes)]
    else:
        from .task_http import service

        with service() as running:
            rows = [row for name in args.sets.split(",") for row in run_set(name, args.classes, running)]
    path = "in-process StreamingNovelty" if args.in_process else "HTTP /learn of a svmstream serve"
    notes = (
        f"One pass over one class, B = 500, {path}. Targets: "
        "auc >= ocsvm_auc - 0.02 and >= River's OneClassSVM; false_alarm_5pc in [0.03, 0.07]; "
        "cpu_vs_classifier <= 1.2. Data: the shared LIBSVM letter and pendigits files (SVMSTREAM_DATA)."
    )
    write_results("novelty", {"rows": rows}, rows, "Budgeted one-class SVM, one pass", notes)


if __name__ == "__main__":
    main()
