"""Sparse support vectors: what each storage costs.

``python -m benchmarks.bench_sparse_svs`` — BSGD (rbf, the service's defaults: γ = "scale",
warm-up 1,000, shuffle buffer, run guard; B = 500) learns one shuffled pass (seed 0) in
1,000-row ``partial_fit`` batches, once with ``sv_storage="dense"`` and once with
``"sparse"``, on reuters (8,315 features), sector (55,197, 105 classes), a9a (123, 11%
nonzeros) and synthetic CSR sets around the ``"auto"`` rule (d = 200 … 2,000, density 2 … 40%):
solver CPU seconds, the estimator's array bytes, the snapshot's bytes against 12 × the SVs'
nonzeros, test accuracy, and whether both storages gave the same test decisions.  Writes
``benchmarks/results/sparse_svs.{json,md}``.

The dense path's speed before and after a change is ``python -m benchmarks compare --before
DIR bench_solver_pass`` (bench_skeleton's solver-only setting, interleaved fresh processes).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.sparse as sp

from benchmarks import datasets
from benchmarks.common import machine, write_results

SETS = ("reuters", "sector", "a9a")
GRID = ((200, 0.05), (500, 0.02), (500, 0.10), (500, 0.20), (2000, 0.02), (2000, 0.10), (2000, 0.40))
BATCH = 1000


def _arrays(obj):
    for value in vars(obj).values():
        if isinstance(value, np.ndarray):
            yield value
    for child in getattr(obj, "estimators_", []) or []:
        yield from _arrays(child)
    for name in ("model_", "_scaler", "_order"):  # a StreamingClassifier: its engine and stages
        part = getattr(obj, name, None)
        if part is not None:
            yield from _arrays(part)
            if getattr(part, "store", None) is not None:
                yield from _arrays(part.store)


def run_storage(name, X, y, Xt, yt, storage, budget=500, **params):
    """One shuffled pass in 1,000-row batches; the figures of one row of the table."""
    from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier
    from svmstream.solvers.persistence import encode_state

    order = np.random.default_rng(0).permutation(X.shape[0])
    X, y = X[order], y[order]
    # the service's model: ``params`` are settings of the streaming stages
    model = StreamingClassifier(
        BudgetedSGDClassifier(budget=budget, random_state=0, sv_storage=storage), **params
    )
    cpu = time.process_time()
    for a in range(0, X.shape[0], BATCH):
        model.partial_fit(X[a : a + BATCH], y[a : a + BATCH], classes=np.unique(y))
    model.flush()
    cpu = time.process_time() - cpu
    predict_cpu = time.process_time()
    decision = model.decision_function(Xt)
    predict_cpu = time.process_time() - predict_cpu
    classes = model.classes_
    predicted = classes[(decision > 0).astype(int)] if decision.ndim == 1 else classes[np.argmax(decision, 1)]
    arrays, meta = model.get_state()
    nnz = model.sv_nonzeros_
    held = sum(v.size for k, v in arrays.items() if k in ("pp_sbuf_data", "pp_sres_data"))
    return {
        "set": name,
        "d": X.shape[1],
        "density_%": 100 * X.nnz / (X.shape[0] * X.shape[1]) if sp.issparse(X) else 100.0,
        "storage": storage,
        "learn_cpu_s": cpu,
        "examples_per_cpu_s": X.shape[0] / cpu,
        "predict_cpu_s": predict_cpu,
        "test_accuracy_%": 100 * float(np.mean(predicted == yt)),
        "n_sv": model.n_support_vectors_,
        "merges": model.n_merges_,
        "sv_nonzeros": nnz,
        "estimator_MB": sum(a.nbytes for a in _arrays(model.model_)) / 1e6,
        "snapshot_MB": len(encode_state(arrays, meta)) / 1e6,
        "sv_nnz_x12_MB": 12 * nnz / 1e6,
        "held_nnz_x12_MB": 12 * held / 1e6,
        "_decision": decision,
    }


def synthetic(d, density, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(
        n, d, density=density, format="csr", random_state=seed, data_rvs=lambda k: rng.uniform(0, 5, k)
    )
    score = X @ rng.normal(size=d)
    return X, np.where(score > np.median(score), 1, -1)


def storage_table():
    rows = []
    cases = [(name, *datasets.load(name), {}) for name in SETS]
    # a dense buffer holds 64 MiB of rows (1,008 at d = 8,315) and the guard 16 MiB, sparse ones
    # 20,000 and 200 rows per class: with the same K and no guard both storages learn the same model
    cases.append(("reuters K=1,008 no guard", *cases[0][1:5], {"shuffle_buffer": 1008, "run_guard": False}))
    for d, density in GRID:
        X, y = synthetic(d, density)
        cases.append((f"synthetic d={d} {100 * density:g}%", X[:3000], y[:3000], X[3000:], y[3000:], {}))
    for name, X, y, Xt, yt, params in cases:
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
        Xt = sp.csr_matrix(
            (Xt.data, Xt.indices, Xt.indptr), shape=(Xt.shape[0], max(Xt.shape[1], X.shape[1]))
        )
        Xt = Xt[:, : X.shape[1]]
        pair = [run_storage(name, X, y, Xt, yt, storage, **params) for storage in ("dense", "sparse")]
        same = float(np.max(np.abs(pair[0].pop("_decision") - pair[1].pop("_decision"))))
        from svmstream.solvers import resolve_sv_storage

        auto = resolve_sv_storage("auto", X, "auto")
        for row in pair:
            row.update(max_decision_diff=same, auto_picks=auto)
            rows.append(row)
            print(
                json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                flush=True,
            )
    return rows


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    datasets.path("reuters")  # fails with a message when the data is absent
    rows = storage_table()
    table = [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows]
    notes = (
        "BSGD rbf, defaults (γ scale, warm-up 1,000, shuffle buffer, run guard), B = 500, one shuffled pass in "
        "1,000-row partial_fit batches; solver CPU seconds (process time, 2 shared cores); estimator_MB: every "
        "array of the estimator (SVs, scratch, scaling, buffer, guard); snapshot_MB: encode_state bytes; "
        "max_decision_diff: the largest |dense − sparse| test decision value."
    )
    write_results("sparse_svs", {"machine": machine(), "rows": table}, table, "Dense vs sparse SVs", notes)


if __name__ == "__main__":
    main()
