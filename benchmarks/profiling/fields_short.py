"""The no-settings model on the short sets of ``benchmarks/bench_fields.py`` (part "accuracy"),
in process: the service's estimator for ``PUT {}`` (``make_estimator`` of the model's config)
learns the offline encoding in batches of 200 (the class indices the service gives it), then a
flush; per set and order one JSON line with the test accuracy of the selector, of each
candidate, the leader, each candidate's recent prequential accuracy and ``SVC()``.  ``--set
k=v`` sets a selector parameter (JSON value) for a variant; ``--seeds`` repeats the split with
other seeds (the benchmark's is 0) to see the spread.

    python -m benchmarks.profiling.fields_short [--sets house_votes,soybean] [--set early_rehearsal=8] [--bsca]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

import benchmarks.bench_fields as bf

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.main import create_app
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.rows import learn_rows
from svmstream.app.settings import Settings
from svmstream.solvers import BudgetedSCAClassifier, StreamingClassifier


def default_config():
    with tempfile.TemporaryDirectory() as tmp, TestClient(create_app(Settings(snapshot_dir=Path(tmp)))) as c:
        assert c.put("/models/probe", json={}).status_code in (200, 201)
        return c.app.state.registry.get("probe").config


def split(rows, y, order, seed):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(rows))
    n_test = len(rows) // 4
    test, train = np.sort(perm[:n_test]), perm[n_test:]
    if order == "file":
        train = np.sort(train)
    return [rows[i] for i in train], y[train], [rows[i] for i in test], y[test]


def vote(est, X):
    """A quieter leader, measured only here: the plurality of the surviving candidates' predicted
    class indices, a tie going to the leader's."""
    alive = [m for m in est.candidates_ if m is not None]
    lead = np.searchsorted(est.classes_, est.predict(X))
    picks = np.stack([np.searchsorted(est.classes_, m.predict(X)) for m in alive])
    counts = np.stack([(picks == k).sum(axis=0) for k in range(len(est.classes_))], axis=1)
    best = counts.max(axis=1)
    return np.where(counts[np.arange(len(lead)), lead] == best, lead, counts.argmax(axis=1))


def run(config, name, order, seed, params):
    rows, y = bf.SETS[name]()
    train, ytr, test, yte = split(rows, y, order, seed)
    Xtr, Xte = bf.offline(train, test)
    labels = list(dict.fromkeys(ytr.tolist()))  # the codec's order: first appearance
    index = {v: i for i, v in enumerate(labels)}
    yi = np.array([index[v] for v in ytr])
    est = make_estimator(config)
    if params:
        est.set_params(**{k: (len(train) if v == "n_train" else v) for k, v in params.items()})
    for lo in range(0, len(Xtr), bf.BATCH):  # as the learner does: classes added as they come
        yb = yi[lo : lo + bf.BATCH]
        learn_rows(est, Xtr[lo : lo + bf.BATCH], yb, max(2, int(yi[: lo + len(yb)].max()) + 1))
    est.flush()
    names = np.array(labels)
    acc = lambda pred: round(100 * float(np.mean(names[np.asarray(pred, int)] == yte)), 2)  # noqa: E731
    out = {"set": name, "order": order, "seed": seed, "n_train": len(train), "n_test": len(test)}
    out["selection"] = acc(est.predict(Xte))
    out["leader"] = int(est.leader_)
    out["candidates"] = [acc(m.predict(Xte)) if m is not None else None for m in est.candidates_]
    out["vote"] = acc(vote(est, Xte))
    out["recent"] = [
        round(100 * est._recent_accuracy(i), 2) if m is not None else None
        for i, m in enumerate(est.candidates_)
    ]
    out["svc"] = round(100 * float(np.mean(SVC().fit(Xtr, ytr).predict(Xte) == yte)), 2)
    return out


def run_bsca(name, order, seed):
    """The lead of ``docs/fields.md`` ("The short sets"): one BSCA pipeline, C = 1 (``SVC()``'s
    box constraint), γ = ``SVC()``'s "scale" of the training rows, no scaling, rehearsal 4."""
    rows, y = bf.SETS[name]()
    train, ytr, test, yte = split(rows, y, order, seed)
    Xtr, Xte = bf.offline(train, test)
    gamma = 1.0 / (Xtr.shape[1] * Xtr.var())
    plain = BudgetedSCAClassifier(C=1.0, gamma=gamma, budget=500, random_state=0)
    model, classes = StreamingClassifier(plain, scaling="none", rehearsal=4), np.unique(ytr)
    for lo in range(0, len(Xtr), bf.BATCH):
        model.partial_fit(Xtr[lo : lo + bf.BATCH], ytr[lo : lo + bf.BATCH], classes=classes)
    model.flush()
    last = model.last_learned()  # everything is learned at the flush (the buffer held it all)
    margins, targets = np.asarray(last.outputs), np.asarray(last.targets)
    picked = np.argmax(margins, axis=1) if margins.ndim == 2 else (margins > 0).astype(int)
    hits = classes[picked] == (classes[targets] if targets.dtype.kind in "iu" else targets)
    svc = SVC().fit(Xtr, ytr).predict(Xte)
    return {"set": name, "order": order, "seed": seed, "bsca": round(100 * float(np.mean(model.predict(Xte) == yte)), 2),
            "recent": round(100 * float(np.mean(hits[len(hits) // 2 :])), 2), "n_learned": int(len(hits)),
            "svc": round(100 * float(np.mean(svc == yte)), 2)}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="house_votes,soybean")
    parser.add_argument("--orders", default="file,shuffled")
    parser.add_argument("--seeds", default="0")
    parser.add_argument(
        "--set", action="append", default=[], help='selector parameter k=JSON ("n_train": the training rows)'
    )
    parser.add_argument("--bsca", action="store_true", help="the BSCA pipeline (run_bsca) instead")
    args = parser.parse_args(argv)
    params = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    config = default_config()
    for seed in map(int, args.seeds.split(",")):
        for name in args.sets.split(","):
            for order in args.orders.split(","):
                if args.bsca:
                    print(json.dumps(run_bsca(name, order, seed)), flush=True)
                    continue
                print(json.dumps({**run(config, name, order, seed, params), "params": params}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
