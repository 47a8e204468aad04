"""Made the v1_*.state files: StreamingClassifier states of state version 1 (commit 8875517, the
drift monitor, the calibrator and the pending-reset flag saved inside the engine), each saved
while a drift reset was pending, and ``v1_expected.json``: what the model answered then and
after learning the rest of the stream and flushing.

Run in a checkout of 8875517: ``python tests/data/make_v1_states.py tests/data``.
"""

import json
import sys

import numpy as np

from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers.persistence import encode_state


def flipped_stream(n_classes):
    """4,000 rows whose labels shift by one class half way (a drift)."""
    rng = np.random.default_rng(n_classes)
    X = rng.normal(size=(4000, 3)) * np.array([1.0, 10.0, 0.1])
    y = (X[:, 0] > 0).astype(int) + ((X[:, 1] > 5).astype(int) if n_classes == 3 else 0)
    y[2000:] = (y[2000:] + 1) % n_classes
    return X, y


BATCH = 50
out = {}
models = {
    "bsgd_binary": (BudgetedSGDClassifier(budget=30, random_state=1), 2),
    "bsca_3class": (BudgetedSCAClassifier(budget=20, random_state=2), 3),
}
for name, (plain, k) in models.items():
    X, y = flipped_stream(k)
    probe = X[:20]
    est = StreamingClassifier(plain, warmup=200, shuffle_buffer=300, rehearsal_memory=500)
    lo = 0
    while lo < X.shape[0]:
        est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=list(range(k)))
        lo += BATCH
        if est.model_._counters[6]:  # a reset is pending
            break
    assert lo < X.shape[0], "no pending reset"
    arrays, meta = est.get_state()
    with open(f"{sys.argv[1]}/v1_{name}.state", "wb") as f:
        f.write(encode_state(arrays, meta))
    entry = {
        "saved_after": lo,
        "decision": est.decision_function(probe).tolist(),
        "proba": est.predict_proba(probe).tolist(),
        "detections": int(est.drift_.n_detections),
    }
    while lo < X.shape[0]:
        est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH])
        lo += BATCH
    est.flush()
    entry.update(
        final_decision=est.decision_function(probe).tolist(),
        final_proba=est.predict_proba(probe).tolist(),
        final_detections=int(est.drift_.n_detections),
        final_shift=int(est.model_._counters[5]) if k == 2 else int(est.model_.estimators_[0]._counters[5]),
    )
    out[name] = entry
with open(f"{sys.argv[1]}/v1_expected.json", "w") as f:
    json.dump(out, f)
