"""Named-field events through HTTP ``/learn`` against an offline encoding; decode CPU; a field of
10**6 distinct values (``docs/fields.md``).

Sets with real categorical fields and missing values, from packages: mlbench's ``HouseVotes84``
(16 y/n votes with NAs) and ``Soybean`` (35 categorical fields, 19 classes, NAs) read with the
``rdata`` wheel from ``r-cran-mlbench``; modeldata's ``credit_data`` (numbers with NAs and five
categories, 28 % "bad") and ``mlc_churn`` (a 51-value state field, plans, numbers; 14 % churn)
from ``r-cran-modeldata`` (``apt-get install -y r-cran-modeldata``; its lazy-load database is
exported to CSV once with ``Rscript``, cached under ``benchmarks.datasets.CACHE``).

Per set and order (file, shuffled): a service model with no settings (``PUT {}``) learns the
training rows as named-field JSON through ``/learn`` (one pass, batches of 200, then a flush) and
predicts the test rows as named fields; the same model (another name, no settings) learns the
offline encoding (``DictVectorizer`` fitted on all training rows, nulls as indicator columns;
positional dense rows); ``SVC()`` is fitted on that encoding.  Decode CPU: ``orjson.loads`` + the
schema's encoding of a 1,000-row body against ``orjson.loads`` + ``parse_features`` of the same
rows in the positional form (interleaved, 5 rounds, the median of the per-round ratios, CPU
seconds).  The 10**6 field: one model learns 10**6 events whose ``user`` field never repeats;
RSS, the schema's vocabulary and the decisions after a restart, on a replica (the serving
encoding of the newest snapshot) and of a pinned version.  Class weights: on the imbalanced
sets the same no-settings model with ``class_weight="balanced"`` (``docs/weights.md``).

Run: ``python -m benchmarks.bench_fields [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import orjson
from sklearn.feature_extraction import DictVectorizer
from sklearn.metrics import balanced_accuracy_score
from sklearn.svm import SVC

from benchmarks.common import machine, write_results
from benchmarks.datasets import CACHE, mlbench_file

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from svmstream.app.ingest.features import parse_features
from svmstream.app.main import create_app
from svmstream.app.models.memory import release_free_memory
from svmstream.app.models.registry import Registry
from svmstream.app.models.serving import decode_serving, serving_blob
from svmstream.app.settings import Settings
from svmstream.solvers.online.stages.fields import FieldSchema
from svmstream.solvers.persistence import decode_state

SEED = 0
BATCH = 200


# ---------------------------------------------------------------------- data
def _frame_rows(frame, label):
    """``(rows, y)``: each row a dict of its fields (NA -> None, numbers as float, factors as str)."""
    import pandas as pd

    y = np.array([str(v) for v in frame[label].tolist()])
    X = frame.drop(columns=label)
    rows = []
    cols = list(X.columns)
    kinds = {
        c: pd.api.types.is_numeric_dtype(X[c]) and not isinstance(X[c].dtype, pd.CategoricalDtype)
        for c in cols
    }
    values = {c: X[c].tolist() for c in cols}
    for i in range(len(X)):
        row = {}
        for c in cols:
            v = values[c][i]
            if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
                row[str(c)] = None
            else:
                row[str(c)] = float(v) if kinds[c] else str(v)
        rows.append(row)
    return rows, y


def mlbench(name):
    import rdata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = next(iter(rdata.read_rda(str(mlbench_file(name))).values()))
    return _frame_rows(frame, "Class")


def modeldata(name, label):
    import pandas as pd

    out = CACHE / "modeldata" / f"{name}.csv"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        script = (
            f'suppressMessages(library(modeldata)); data({name}); write.csv({name}, "{out}", row.names=FALSE)'
        )
        subprocess.run(["Rscript", "-e", script], check=True, capture_output=True)
    frame = pd.read_csv(out, keep_default_na=True)
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].astype("category")
    return _frame_rows(frame, label)


#: The imbalanced sets (binary, minority under 30 %): credit_data (28 % "bad"), mlc_churn (14 %).
IMBALANCED = ("credit_data", "mlc_churn")

SETS = {
    "house_votes": lambda: mlbench("HouseVotes84"),
    "soybean": lambda: mlbench("Soybean"),
    "credit_data": lambda: modeldata("credit_data", "Status"),
    "mlc_churn": lambda: modeldata("mlc_churn", "churn"),
}


def split(rows, y, order):
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(rows))
    n_test = len(rows) // 4
    test, train = np.sort(perm[:n_test]), perm[n_test:]
    if order == "file":
        train = np.sort(train)
    return [rows[i] for i in train], y[train], [rows[i] for i in test], y[test]


def offline(train, test):
    """DictVectorizer fitted on all training rows (nulls: an indicator feature)."""

    def flat(r):
        return {(f"{k}?missing" if v is None else f"{k}={v}" if isinstance(v, str) else k): (1.0 if v is None or isinstance(v, str) else v) for k, v in r.items()}  # fmt: skip

    dv = DictVectorizer(sparse=False).fit([flat(r) for r in train])
    return dv.transform([flat(r) for r in train]), dv.transform([flat(r) for r in test])


# ---------------------------------------------------------------------- service
def learn_http(c, model, X, y, named, config=None):
    assert c.put(f"/models/{model}", json=config or {}).status_code in (200, 201)
    for lo in range(0, len(X), BATCH):
        chunk = X[lo : lo + BATCH] if named else np.asarray(X[lo : lo + BATCH]).tolist()
        r = c.post(
            "/learn",
            content=orjson.dumps({"model": model, "X": chunk, "y": y[lo : lo + BATCH].tolist()}),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
    assert c.post(f"/models/{model}/flush").status_code == 200


def predict_http(c, model, X, named):
    labels = []
    for lo in range(0, len(X), 500):
        chunk = X[lo : lo + 500] if named else np.asarray(X[lo : lo + 500]).tolist()
        r = c.post(
            "/predict",
            content=orjson.dumps({"model": model, "X": chunk}),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        labels.extend(r.json()["labels"])
    return np.asarray(labels).astype(str)


def accuracy_rows(c, name, order):
    rows, y = SETS[name]()
    train, ytr, test, yte = split(rows, y, order)
    Xtr, Xte = offline(train, test)
    tag = f"{name}-{order}"
    learn_http(c, f"n-{tag}", train, ytr, True)
    learn_http(c, f"o-{tag}", Xtr, ytr, False)
    named = predict_http(c, f"n-{tag}", test, True)
    off = predict_http(c, f"o-{tag}", Xte, False)
    svc = SVC().fit(Xtr, ytr).predict(Xte)
    svc_bal = SVC(class_weight="balanced").fit(Xtr, ytr).predict(Xte)
    info = c.get(f"/models/n-{tag}").json()
    weighted = {}
    if name in IMBALANCED:  # the same no-settings model with class_weight="balanced" (docs/weights.md)
        learn_http(c, f"b-{tag}", train, ytr, True, {"class_weight": "balanced"})
        balanced = predict_http(c, f"b-{tag}", test, True)
        weighted = {
            "minority_share": float(min(np.mean(ytr == k) for k in np.unique(ytr))),
            "named_class_weight_balanced": float(balanced_accuracy_score(yte, balanced)),
        }
    return {
        "part": "accuracy",
        "set": name,
        "order": order,
        "n_train": len(train),
        "n_test": len(test),
        "columns_named": info["fields"]["n_columns"],
        "columns_offline": Xtr.shape[1],
        "named": float(np.mean(named == yte)),
        "offline": float(np.mean(off == yte)),
        "svc": float(np.mean(svc == yte)),
        "named_balanced": float(balanced_accuracy_score(yte, named)),
        "svc_balanced_weighted": float(balanced_accuracy_score(yte, svc_bal)),
        **weighted,
    }


# ---------------------------------------------------------------------- decode CPU
def decode_ratio(name, rounds=5):
    rows, _ = SETS[name]()
    rows = rows[:1000]
    schema = FieldSchema()
    X, g = schema.encode(rows)
    schema.commit(g)
    named_body = orjson.dumps({"X": rows})
    pos_body = orjson.dumps({"X": X.toarray().tolist()})

    def named():
        schema.encode(orjson.loads(named_body)["X"], grow=False)

    def positional():
        parse_features(orjson.loads(pos_body)["X"])

    ratios, per = [], {"named": [], "positional": []}
    for _ in range(rounds):
        times = {}
        for label, fn in (("named", named), ("positional", positional)):
            t = time.process_time()
            for _ in range(20):
                fn()
            times[label] = (time.process_time() - t) / (20 * len(rows))
            per[label].append(times[label])
        ratios.append(times["named"] / times["positional"])
    return {
        "part": "decode",
        "set": name,
        "named_us_per_example": float(np.median(per["named"]) * 1e6),
        "positional_us_per_example": float(np.median(per["positional"]) * 1e6),
        "ratio_median": float(np.median(ratios)),
        "ratios": [round(r, 3) for r in ratios],
    }


# ---------------------------------------------------------------------- 10**6 distinct values
def user_events(lo: int, n: int, rng) -> tuple[list[dict], list[int]]:
    """Events ``lo .. lo + n`` of a stream whose ``user`` never repeats, and their labels (the
    amount over 60); ``rng`` draws the amounts."""
    amount = rng.gamma(2.0, 30.0, n)
    rows = [{"user": f"u{lo + j}", "amount": float(amount[j]), "shop": f"s{(lo + j) % 40}"} for j in range(n)]
    return rows, (amount > 60).astype(int).tolist()


def _rss() -> int:
    """The process's resident bytes now (``/proc/self/statm``)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (``VmHWM``; Linux >= 4.0): True if it was reset."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak() -> int:
    """``VmHWM``: the peak resident bytes since the last :func:`_reset_peak`."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _post_events(c, model, rows, y):
    r = c.post(
        "/learn",
        content=orjson.dumps({"model": model, "X": rows, "y": y}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text


def million(n, snap):
    """The 10**6 field.  RSS: the peak (``VmHWM``) over the stream, its snapshot and the pinned
    prediction, less the resident bytes before the model was made, measured once the service
    has started and loaded its kernels (another model learned one batch of other events and was
    deleted first: numba's compiled code is the process's, not the model's; ``warmup.py``)."""
    rng = np.random.default_rng(1)
    settings = Settings(snapshot_dir=snap, snapshot_interval_s=3600)
    rss_process0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    probe = [{"user": f"new-{i}", "amount": float(i % 97), "shop": f"s{i % 40}"} for i in range(200)]
    with TestClient(create_app(settings)) as c:
        c.put("/models/kernels", json={"budget": 100})
        _post_events(c, "kernels", *user_events(-5000, 5000, np.random.default_rng(2)))
        assert c.delete("/models/kernels").status_code == 200
        release_free_memory()
        rss0, peak_reset = _rss(), _reset_peak()
        c.put("/models/users", json={"budget": 100})
        for lo in range(0, n, 5000):
            _post_events(c, "users", *user_events(lo, 5000, rng))
        info = c.get("/models/users").json()
        live = np.asarray(c.post("/predict", json={"model": "users", "X": probe}).json()["decision"])
        c.post("/models/users/snapshot")
        version = info["version"]
        pinned = np.asarray(
            c.post("/predict", json={"model": "users", "X": probe, "version": version}).json()["decision"]
        )
        peak = _peak() if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rss_end = _rss()
        rss_process1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with TestClient(create_app(settings)) as c:
        restarted = np.asarray(c.post("/predict", json={"model": "users", "X": probe}).json()["decision"])
    newest = sorted((Path(snap) / "users").glob("*.svmstate"))[-1]  # a replica installs the newest snapshot
    replica = Registry(Settings(snapshot_dir=Path(snap) / "replica", snapshot_interval_s=3600))
    try:
        replica.install(
            decode_serving(serving_blob(*decode_state(newest.read_bytes()))), follower_of="http://127.0.0.1:1"
        )
        on_replica = replica.predict("users", probe)[1]
    finally:
        replica.close()
    user = next(f for f in info["fields"]["fields"] if f["name"] == "user")
    growth = int(peak - rss0)
    return {
        "part": "million",
        "n_events": n,
        "distinct_users": n,
        "user_categories": user["categories"],
        "user_hashed_buckets": user["hashed_buckets"],
        "n_columns": info["fields"]["n_columns"],
        "max_model_bytes": settings.max_model_bytes,
        "rss_growth_bytes": growth,
        "rss_growth_within_max_model_bytes": bool(growth <= settings.max_model_bytes),
        "rss_end_growth_bytes": int(rss_end - rss0),
        "process_peak_growth_bytes": int((rss_process1 - rss_process0) * 1024),
        "peak_is_vmhwm": bool(peak_reset),
        "vocabulary_bounded": bool(user["categories"] <= 256 and user["hashed_buckets"] <= 64),
        "delta_restart": float(np.max(np.abs(restarted - live))),
        "delta_pinned": float(np.max(np.abs(pinned - live))),
        "delta_replica": float(np.max(np.abs(on_replica - live))),
    }


def kept_rows(parts) -> list[dict]:
    """The rows of the parts not run now, from the current results file (none: none)."""
    import json

    path = Path(__file__).resolve().parent / "results" / "fields.json"
    if not path.exists():
        return []
    return [r for r in json.loads(path.read_text())["table"] if r["part"] not in parts]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two sets, file order, 10**5 events")
    parser.add_argument(
        "--only", choices=("accuracy", "decode", "million"), action="append",
        help="run these parts only; the other parts' rows are kept from the current results file",
    )  # fmt: skip
    args = parser.parse_args(argv)
    parts = set(args.only or ("accuracy", "decode", "million"))
    names = ["house_votes", "credit_data"] if args.quick else list(SETS)
    orders = ["file"] if args.quick else ["file", "shuffled"]
    rows = kept_rows(parts)
    with tempfile.TemporaryDirectory() as tmp:
        if "accuracy" in parts:
            with TestClient(
                create_app(Settings(snapshot_dir=Path(tmp) / "a", snapshot_interval_s=3600))
            ) as c:
                for name in names:
                    for order in orders:
                        rows.append(accuracy_rows(c, name, order))
                        print(rows[-1], file=sys.stderr, flush=True)
        if "decode" in parts:
            for name in names:
                rows.append(decode_ratio(name))
                print(rows[-1], file=sys.stderr, flush=True)
        if "million" in parts:
            rows.append(million(100_000 if args.quick else 1_000_000, Path(tmp) / "m"))
            print(rows[-1], file=sys.stderr, flush=True)
    order_of = {"accuracy": 0, "decode": 1, "million": 2}
    rows.sort(key=lambda r: order_of[r["part"]])
    acc = [r for r in rows if r["part"] == "accuracy"]
    weighted = [r for r in acc if "named_class_weight_balanced" in r]
    payload = {
        "machine": machine(),
        "quick": args.quick,
        "worst_named_minus_offline_pp": min(100 * (r["named"] - r["offline"]) for r in acc),
        "worst_named_minus_svc_pp": min(100 * (r["named"] - r["svc"]) for r in acc),
        "worst_decode_ratio": max(r["ratio_median"] for r in rows if r["part"] == "decode"),
        "worst_class_weight_gain_pp": min(
            100 * (r["named_class_weight_balanced"] - r["named_balanced"]) for r in weighted
        ),
        "worst_class_weight_minus_svc_balanced_pp": min(
            100 * (r["named_class_weight_balanced"] - r["svc_balanced_weighted"]) for r in weighted
        ),
        "parts_run": sorted(parts),
        "cpu_count": os.cpu_count(),
    }
    notes = (
        "Named-field JSON through /learn (no settings) against the same model on an offline DictVectorizer "
        "encoding and SVC() on it; decode CPU of named against positional rows; a field of 10**6 distinct "
        "values (benchmarks/bench_fields.py, docs/fields.md). Balanced accuracies: named_balanced of the "
        'unweighted model, named_class_weight_balanced of the same model with PUT {"class_weight": "balanced"} '
        '(docs/weights.md, imbalanced sets only), svc_balanced_weighted of SVC(class_weight="balanced") on the '
        "offline encoding."
    )
    write_results("fields", payload, rows, "Named fields", notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
