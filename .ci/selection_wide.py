"""Memory and accuracy of a no-settings model on wide dense generated rows (docs/selection.md,
"Wide dense rows"); the service's factory in this process, one JSON line per run.

    python .ci/selection_wide.py memory D N      # tracemalloc peak and RSS growth vs selection_bytes
    python .ci/selection_wide.py accuracy D N race|one [SEED]
"""

from __future__ import annotations

import gc
import json
import sys
import time
import tracemalloc

from sklearn.base import clone
from sklearn.datasets import make_classification

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator
from svmstream.app.models.limits import race_bound
from svmstream.app.settings import Settings


def _rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def memory(d, n):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=min(50, d // 2), random_state=0)
    bound = race_bound(Settings(), None)
    sel = make_estimator(ModelConfig(selection=True, selection_bytes=bound))
    warm = clone(sel).set_params(warmup=50, shuffle_buffer=50, max_bytes=None)  # compile untraced
    Xw, yw = make_classification(n_samples=200, n_features=d, random_state=1)
    warm.partial_fit(Xw, yw, classes=[0, 1]).flush()
    del warm
    gc.collect()
    base = peak_rss = _rss()
    tracemalloc.start()
    for lo in range(0, n, 1000):  # copies: the batches are traced, as the service's decoded ones
        sel.partial_fit(X[lo : lo + 1000].copy(), y[lo : lo + 1000].copy(), classes=[0, 1])
        gc.collect()
        peak_rss = max(peak_rss, _rss())
    now, peak = tracemalloc.get_traced_memory()
    buffer = sel.settings_[0].get("shuffle_buffer")
    return {"d": d, "n": n, "selection_bytes": bound, "race_size": int(sel.race_size_), "buffer": buffer,
            "traced_peak": peak, "traced_end": now, "rss_growth": peak_rss - base}  # fmt: skip


def accuracy(d, n, mode, seed=0):
    X, y = make_classification(
        n_samples=n + 2000, n_features=d, n_informative=30, n_redundant=20, flip_y=0.05,
        class_sep=0.8, random_state=seed,
    )  # fmt: skip
    X = X * 20 + 5
    sel = make_estimator(
        ModelConfig(selection=True, selection_bytes=race_bound(Settings(), None) if mode == "race" else 0)
    )
    t = time.process_time()
    for lo in range(0, n, 1000):
        sel.partial_fit(X[lo : lo + 1000], y[lo : lo + 1000], classes=[0, 1])
    sel.flush()
    return {"d": d, "n": n, "mode": mode, "race_size": sel.race_size_, "buffer": sel.settings_[0].get("shuffle_buffer"),
            "leader": sel.leader_, "rungs": len(sel.rungs_), "acc": round(100 * sel.score(X[n:], y[n:]), 2),
            "cpu_s": round(time.process_time() - t, 1)}  # fmt: skip


if __name__ == "__main__":
    what, *args = sys.argv[1:]
    if what == "memory":
        print(json.dumps(memory(int(args[0]), int(args[1]))))
    else:
        print(json.dumps(accuracy(int(args[0]), int(args[1]), args[2], *(int(a) for a in args[3:]))))
