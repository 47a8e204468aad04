import time

import numpy as np
from sklearn.datasets import load_svmlight_file

from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22)
X = np.ascontiguousarray(X.toarray())
y = y.astype(np.int64)
HYP = dict(budget=500, gamma=2.0, C=32.0, merge_solver="lookup-wd", random_state=0)
OFF = dict(scaling="none", shuffle_buffer=0, run_guard=False, rehearsal=0, on_drift="none", warmup=0)


def run(kw, bs):
    m = StreamingClassifier(BudgetedSGDClassifier(**HYP), **kw)
    t = time.process_time()
    for i in range(0, 49000, bs):
        m.partial_fit(X[i : i + bs], y[i : i + bs], classes=[-1, 1])
    return time.process_time() - t


run(OFF, 1000)
print(" ".join(f"{run(kw, bs):.3f}" for kw in (OFF, {}) for bs in (250, 1000)))
