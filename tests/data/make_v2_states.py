"""Made the v2_*.state files: StreamingClassifier states of state version 2 (commit 9163c9c, the
warm-up window, scaler, γ, shuffle buffer and run guard saved inside the engine, with the
engine's generator), saved mid-stream, and ``v2_expected.json``: the decisions of the same
model learning the whole stream without interruption, then flushing, on the first 40 rows.

Run in a checkout of 9163c9c: ``python tests/data/make_v2_states.py tests/data``.
"""

import json
import sys

import numpy as np
import scipy.sparse as sp

from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)
from svmstream.solvers.persistence import encode_state


def streams():
    """The streams and models: ``{name: (make, X, y, n_classes, batch, save_after)}``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5)) * np.array([1.0, 30.0, 0.1, 2.0, 1.0])
    y2 = (X[:, 0] + X[:, 1] / 30 > 0).astype(int)
    y3 = y2 + (X[:, 3] > 1).astype(int)
    order = np.argsort(y2, kind="stable")  # label-sorted: the run guard fires
    Xs = sp.random(2000, 300, density=0.03, random_state=3, format="csr") * 3.0
    score = np.asarray(Xs[:, :30].sum(axis=1)).ravel()
    ys = (score > np.median(score)).astype(int)
    return {
        "bsgd_sorted": (
            lambda: StreamingClassifier(BudgetedSGDClassifier(budget=30, random_state=0), warmup=100, shuffle_buffer=300),
            X[order], y2[order], 2, 250, 2250,
        ),
        "bsca_3class_window": (
            lambda: StreamingClassifier(BudgetedSCAClassifier(budget=20, random_state=1), warmup=200, shuffle_buffer=500),
            X, y3, 3, 97, 194,
        ),
        "bsgd_3class_standard": (
            lambda: StreamingClassifier(
                BudgetedSGDClassifier(budget=20, random_state=1), scaling="standard", warmup=300, shuffle_buffer=800
            ),
            X, y3, 3, 113, 452,
        ),
        "pegasos_sparse": (
            lambda: StreamingClassifier(PegasosClassifier(random_state=2), warmup=200, shuffle_buffer=700),
            Xs, ys, 2, 113, 452,
        ),
        "bsgd_sparse_svs_window": (
            lambda: StreamingClassifier(
                BudgetedSGDClassifier(budget=20, random_state=0, sv_storage="sparse"), warmup=200, shuffle_buffer=700
            ),
            Xs, ys, 2, 113, 113,
        ),
    }  # fmt: skip


if __name__ == "__main__":
    out = {}
    for name, (make, X, y, n_classes, batch, save_after) in streams().items():
        est = make()
        for lo in range(0, X.shape[0], batch):
            est.partial_fit(X[lo : lo + batch], y[lo : lo + batch], classes=list(range(n_classes)))
            if lo + batch == save_after:
                with open(f"{sys.argv[1]}/v2_{name}.state", "wb") as f:
                    f.write(encode_state(*est.get_state()))
        est.flush()
        out[name] = est.decision_function(X[:40]).tolist()
    with open(f"{sys.argv[1]}/v2_expected.json", "w") as f:
        json.dump(out, f)
