"""Models created with no hyperparameters, fed raw data as users send it.

For every shared binary set (ijcnn1, a9a, phishing, reuters, skin_nonskin; the two without a
test file split once for all benchmarks in ``benchmarks.datasets``, 70/30 and 80/20) and
scikit-learn's bundled breast_cancer (70/30), a model is created on a fresh real
``svmstream serve`` process with **only its classes** (``PUT /models/{name}``), then fed through
HTTP ``POST /learn`` in batches of 1,000 (sparse files as sparse ``{"index": value}`` rows), one
pass, **in file order** and again **shuffled**; at the end of the file ``POST
/models/{name}/flush`` learns what the warm-up window and shuffle buffer still hold (what
``svmstream replay`` does at the end of a file).  Test accuracy comes from ``POST /predict``.

Beside it, on the same split: scikit-learn ``SVC()`` with its defaults on the raw features (for
skin_nonskin only, on a 20,000-row random sample of the training part: the full 196k rows are
too slow; every other set on all of its training rows),
``Nystroem(n_components=500) + SGDClassifier(loss="hinge")`` on standardised features (what a
scikit-learn user picks for large data), and the majority-class rate.

Run: ``python -m benchmarks.bench_defaults [--sets ijcnn1 a9a ...] [--seeds 0 1 2]``.
Writes ``benchmarks/results/defaults.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import psutil
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from benchmarks import datasets
from benchmarks.common import Server, machine, write_results

BATCH = 1000
SVC_SAMPLE = 20_000
SETS = ("breast_cancer", "phishing", "a9a", "ijcnn1", "reuters", "skin_nonskin")


def load(name: str, seed: int = 0):
    """(X_train, y_train, X_test, y_test, sparse?) with the training part in file order (the
    registered sets through :mod:`benchmarks.datasets`; ``seed`` splits breast_cancer)."""
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
        order = np.argsort(ytr, kind="stable")  # a file sorted by label, as many are
        return Xtr[order], ytr[order], Xte, yte, False
    X, y, Xt, yt = datasets.load(name, order="file")  # phishing, skin_nonskin: their split there
    return X, y, Xt, yt, name == "reuters"


def rows_json(X, sparse: bool) -> list:
    if not sparse:
        return (X.toarray() if sp.issparse(X) else X).tolist()
    X = X.tocsr()
    return [
        {
            str(int(j)): float(v)
            for j, v in zip(X.indices[X.indptr[i] : X.indptr[i + 1]], X.data[X.indptr[i] : X.indptr[i + 1]])
        }
        for i in range(X.shape[0])
    ]


def labels_json(y) -> list:
    return [int(v) if float(v).is_integer() else float(v) for v in y]


def ours(
    url: str, name: str, X, y, Xt, yt, sparse: bool, process: psutil.Process, settings: dict | None = None
) -> dict:
    """Create ``name`` with its classes (and ``settings``, the PUT body's hyperparameters), learn
    (X, y) through HTTP in batches, flush, and score (Xt, yt) through ``/predict``."""
    classes = sorted(set(labels_json(y)))
    with httpx.Client(base_url=url, timeout=600) as client:
        r = client.put(f"/models/{name}", json={"classes": classes, **(settings or {})})
        r.raise_for_status()
        cpu0, t0 = sum(process.cpu_times()[:2]), time.perf_counter()
        for start in range(0, X.shape[0], BATCH):
            body = {
                "model": name,
                "x": rows_json(X[start : start + BATCH], sparse),
                "y": labels_json(y[start : start + BATCH]),
            }
            r = client.post(
                "/learn", content=orjson.dumps(body), headers={"content-type": "application/json"}
            )
            r.raise_for_status()
        client.post(f"/models/{name}/flush").raise_for_status()
        seconds, cpu = time.perf_counter() - t0, sum(process.cpu_times()[:2]) - cpu0
        info = client.get(f"/models/{name}").json()
        predicted = []
        for start in range(0, Xt.shape[0], 1000):  # within the server's max_body_bytes
            body = {"model": name, "x": rows_json(Xt[start : start + 1000], sparse)}
            r = client.post(
                "/predict", content=orjson.dumps(body), headers={"content-type": "application/json"}
            )
            r.raise_for_status()
            predicted += r.json()["labels"]
    accuracy = float(np.mean(np.asarray(predicted, dtype=float) == np.asarray(labels_json(yt), dtype=float)))
    return {
        "accuracy_%": 100 * accuracy,
        "train_s": seconds,
        "service_cpu_s": cpu,
        "examples_per_s": X.shape[0] / seconds,
        "n_sv": info.get("n_support_vectors"),
        "gamma": info.get("gamma_eff"),
        "lambda": info.get("lambda_eff"),
        "scaling": info.get("scaling"),
    }


def baselines(X, y, Xt, yt, sparse: bool, seed: int, sample: bool = False) -> dict:
    out = {"majority_%": 100 * float(np.mean(yt == _majority(y)))}
    Xs, ys = X, y
    if sample and X.shape[0] > SVC_SAMPLE:
        idx = np.random.default_rng(seed).choice(X.shape[0], SVC_SAMPLE, replace=False)
        Xs, ys = X[idx], y[idx]
    Xs32 = _int32(Xs)
    t0 = time.process_time()
    svc = SVC().fit(Xs32, ys)
    out["svc_cpu_s"] = time.process_time() - t0
    out["svc_%"] = 100 * float(np.mean(svc.predict(_int32(Xt)) == yt))
    out["svc_rows"] = Xs.shape[0]
    pipe = make_pipeline(
        StandardScaler(with_mean=not (sparse or sp.issparse(X))),  # LIBSVM files load as CSR
        Nystroem(n_components=500, random_state=seed),
        SGDClassifier(loss="hinge", random_state=seed),
    )
    t0 = time.process_time()
    pipe.fit(X, y)
    out["nystroem_cpu_s"] = time.process_time() - t0
    out["nystroem_sgd_%"] = 100 * float(np.mean(pipe.predict(Xt) == yt))
    return out


def _majority(y):
    values, counts = np.unique(y, return_counts=True)
    return values[np.argmax(counts)]


def _int32(X):
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=[0], help="shuffle seeds (file order runs once)"
    )
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets:
            X, y, Xt, yt, sparse = load(name)
            base = baselines(X, y, Xt, yt, sparse, 0, sample=name == "skin_nonskin")
            runs = [("file", None)] + [("shuffled", s) for s in args.seeds]
            for order, seed in runs:
                Xo, yo = X, y
                if seed is not None:
                    perm = np.random.default_rng(seed).permutation(X.shape[0])
                    Xo, yo = X[perm], y[perm]
                with Server(Path(tmp) / f"{name}-{order}-{seed}") as server:
                    result = ours(server.url, "m", Xo, yo, Xt, yt, sparse, psutil.Process(server.proc.pid))
                row = {
                    "set": name,
                    "order": order if seed is None else f"shuffled seed {seed}",
                    "train rows": X.shape[0],
                    "test rows": Xt.shape[0],
                    **result,
                    **base,
                    "gap to SVC() pp": result["accuracy_%"] - base["svc_%"],
                    "above majority pp": result["accuracy_%"] - base["majority_%"],
                }
                row["within 2 pp of SVC() and above majority"] = bool(
                    row["gap to SVC() pp"] >= -2.0 and row["above majority pp"] > 0
                )
                rows.append(row)
                print({k: row[k] for k in ("set", "order", "accuracy_%", "svc_%", "majority_%")}, flush=True)
    payload = {"machine": machine(), "batch": BATCH, "rows": rows, "load_avg_at_end": os.getloadavg()[0]}
    write_results(
        "defaults",
        payload,
        rows,
        "No hyperparameters, raw data through HTTP /learn (batches of 1,000)",
        "Models created with only their classes. SVC() on raw features (skin_nonskin: a 20,000-row "
        "sample of the training part); Nystroem(500)+SGD(hinge) on standardised features. "
        "CPU seconds: the service process for ours, this process for scikit-learn.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
