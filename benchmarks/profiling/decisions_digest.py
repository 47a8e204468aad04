"""Digest of decisions on ijcnn1.t after StreamingClassifier partial_fit in batches (default and stages off)."""

import hashlib

import numpy as np
from sklearn.datasets import load_svmlight_file

from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier

X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22)
X = np.ascontiguousarray(X.toarray())
y = y.astype(np.int64)
Xt, _ = load_svmlight_file("/work/shared/data/ijcnn1.t.bz2", n_features=22)
Xt = Xt[:10000].toarray()
HYP = dict(budget=500, gamma=2.0, C=32.0, merge_solver="lookup-wd", random_state=0)
OFF = dict(scaling="none", shuffle_buffer=0, run_guard=False, rehearsal=0, on_drift="none", warmup=0)
for name, kw in (("default", {}), ("off", OFF)):
    m = StreamingClassifier(BudgetedSGDClassifier(**HYP), **kw)
    for i in range(0, 30000, 1000):
        m.partial_fit(X[i : i + 1000], y[i : i + 1000], classes=[-1, 1])
    m.flush()
    d = m.decision_function(Xt)
    p = m.predict_proba(Xt)
    print(
        name,
        hashlib.sha256(d.tobytes() + p.tobytes()).hexdigest()[:16],
        m.report().n_support_vectors if hasattr(m, "report") else "",
    )
