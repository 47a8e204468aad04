"""Made the e8_*.state files: states written by the tree of commit 9ce9fa1 (the last with an
engine class per family, ``StreamingBSGD``/``StreamingBSCA``, behind plain faces), saved
mid-stream: streaming pipelines around BSGD (binary, rehearsal on), BSCA (three classes,
one-vs-rest), Pegasos (CSR rows), and the plain estimators BSGD, BSCA, Pegasos.

Run in a checkout of 9ce9fa1: ``python tests/data/make_9ce9fa1_states.py tests/data``.
``tests/test_engine_states.py`` loads each, learns the rest of its stream and compares with an
uninterrupted run of the same model in the tree under test (same machine).
"""

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
    """``{name: (make, X, y, classes, batch, save_after)}``: each model and its stream."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2400, 5)) * np.array([1.0, 30.0, 0.1, 2.0, 1.0])
    y2 = (X[:, 0] + X[:, 1] / 30 > 0).astype(int)
    y3 = y2 + (X[:, 3] > 1).astype(int)
    Xs = sp.random(2000, 300, density=0.03, random_state=5, format="csr") * 3.0
    score = np.asarray(Xs[:, :30].sum(axis=1)).ravel()
    ys = (score > np.median(score)).astype(int)
    return {
        "pipeline_bsgd": (
            lambda: StreamingClassifier(BudgetedSGDClassifier(budget=30, random_state=0), warmup=100,
                                        shuffle_buffer=300, rehearsal=2),
            X, y2, [0, 1], 200, 1400,
        ),
        "pipeline_bsca_3class": (
            lambda: StreamingClassifier(BudgetedSCAClassifier(budget=20, random_state=1), warmup=200,
                                        shuffle_buffer=400),
            X, y3, [0, 1, 2], 200, 1200,
        ),
        "pipeline_pegasos_sparse": (
            lambda: StreamingClassifier(PegasosClassifier(random_state=2), warmup=100, shuffle_buffer=200),
            Xs, ys, [0, 1], 250, 1000,
        ),
        "plain_bsgd": (lambda: BudgetedSGDClassifier(budget=25, gamma=0.5, random_state=3), X, y2, [0, 1], 200, 1200),
        "plain_bsca_3class": (
            lambda: BudgetedSCAClassifier(budget=15, gamma=0.5, random_state=4), X, y3, [0, 1, 2], 200, 1200,
        ),
        "plain_pegasos": (lambda: PegasosClassifier(random_state=5), Xs, ys, [0, 1], 250, 1000),
    }  # fmt: skip


def learn(model, X, y, classes, batch, start, stop):
    for lo in range(start, stop, batch):
        model.partial_fit(X[lo : min(lo + batch, stop)], y[lo : min(lo + batch, stop)], classes=classes)
    return model


if __name__ == "__main__":
    out = sys.argv[1]
    for name, (make, X, y, classes, batch, save_after) in streams().items():
        model = learn(make(), X, y, classes, batch, 0, save_after)
        with open(f"{out}/e8_{name}.state", "wb") as fh:
            fh.write(encode_state(*model.get_state()))
