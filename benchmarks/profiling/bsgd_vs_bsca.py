"""BSGD against BSCA where only C is given: CPU per example and accuracy, one pass of
partial_fit in batches of 1,000 on ijcnn1 (B = 500, γ = 2, C = 32), tested on ijcnn1.t."""

import os
import time

import numpy as np
from sklearn.datasets import load_svmlight_file

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier

DATA = os.environ.get("SVMSTREAM_DATA", "/work/shared/data")
X, y = load_svmlight_file(DATA + "/ijcnn1.bz2", n_features=22)
X = np.ascontiguousarray(X.toarray())
Xt, yt = load_svmlight_file(DATA + "/ijcnn1.t.bz2", n_features=22)
Xt = Xt.toarray()
for rnd in range(3):
    for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier):
        m = cls(budget=500, gamma=2.0, C=32.0, random_state=0)
        started = time.process_time()
        for i in range(0, X.shape[0], 1000):
            m.partial_fit(X[i : i + 1000], y[i : i + 1000], classes=[-1, 1])
        cpu = time.process_time() - started
        acc = float(np.mean(m.predict(Xt) == yt))
        print(
            f"round {rnd + 1} {cls.__name__}: {cpu:.3f} CPU s, {1e6 * cpu / X.shape[0]:.2f} µs/ex, "
            f"accuracy {acc:.4f}, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
