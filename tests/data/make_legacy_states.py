"""Made the legacy_*.state files: states saved by the estimators of commit 1583258, before the
split into plain estimators and StreamingClassifier (they carried the streaming stages).

Run in a checkout of 1583258: ``python tests/data/make_legacy_states.py tests/data``.
"""

import json
import sys

import numpy as np

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier
from svmstream.solvers.persistence import encode_state

rng = np.random.default_rng(0)
X = rng.normal(size=(700, 4)) * np.array([1.0, 10.0, 0.1, 3.0])
y3 = (X[:, 0] > 0).astype(int) + (X[:, 1] > 5).astype(int)
y2 = (X[:, 0] + 0.1 * X[:, 1] > 0).astype(int)
probe = rng.normal(size=(20, 4)) * np.array([1.0, 10.0, 0.1, 3.0])
out = {}
models = {
    "bsgd_binary": (
        BudgetedSGDClassifier(budget=30, warmup=200, shuffle_buffer=300, random_state=1),
        y2,
        [0, 1],
    ),
    "bsca_3class": (
        BudgetedSCAClassifier(budget=20, warmup=200, shuffle_buffer=300, random_state=2),
        y3,
        [0, 1, 2],
    ),
    "linear_binary": (
        BudgetedSGDClassifier(kernel="linear", warmup=100, shuffle_buffer=200, random_state=3),
        y2,
        [0, 1],
    ),
}
for name, (est, y, classes) in models.items():
    for lo in range(0, 700, 100):
        est.partial_fit(X[lo : lo + 100], y[lo : lo + 100], classes=classes)
    arrays, meta = est.get_state()
    with open(f"{sys.argv[1]}/legacy_{name}.state", "wb") as f:
        f.write(encode_state(arrays, meta))
    out[name] = {
        "decision": est.decision_function(probe).tolist(),
        "n_seen": int(est.n_seen_),
        "pending": int(est.n_pending_),
        "after_flush": est.flush().decision_function(probe).tolist(),
    }
np.save(f"{sys.argv[1]}/legacy_probe.npy", probe)
with open(f"{sys.argv[1]}/legacy_expected.json", "w") as f:
    json.dump(out, f)
