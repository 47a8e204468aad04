"""CPU (thread_time) of each stage of /learn, in process, on ijcnn1 batches of 1,000."""

import time

import numpy as np
import orjson
from sklearn.datasets import load_svmlight_file

from svmstream.app.ingest.decode import decode_body, may_contain_bools
from svmstream.app.ingest.examples import parse_examples
from svmstream.app.ingest.labels import LabelCodec
from svmstream.solvers import BudgetedSGDClassifier, StreamingClassifier
from svmstream.solvers.drift import DriftMonitor
from svmstream.solvers.online.stages import CalibrationStage

X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22)
X = np.ascontiguousarray(X.toarray())
y = y.astype(int)
bodies = [
    orjson.dumps({"model": "m", "x": X[i : i + 1000].tolist(), "y": y[i : i + 1000].tolist()})
    for i in range(0, 49000, 1000)
]
n = 49000
HYP = dict(budget=500, gamma=2.0, C=32.0, merge_solver="lookup-wd", random_state=0)
OFF = dict(scaling="none", shuffle_buffer=0, run_guard=False, rehearsal=0, on_drift="none", warmup=0)


def clock(f):
    t = time.thread_time()
    f()
    return time.thread_time() - t


res = {}
res["orjson.loads"] = clock(lambda: [orjson.loads(b) for b in bodies])
res["decode_body (depth check + orjson)"] = clock(lambda: [decode_body(b) for b in bodies])
objs = [orjson.loads(b) for b in bodies]
codec = LabelCodec([-1, 1])
res["parse_examples (lists->float64, labels)"] = clock(
    lambda: [parse_examples(o, codec, check_bools=may_contain_bools(b)) for o, b in zip(objs, bodies)]
)


def plain():
    m = BudgetedSGDClassifier(**HYP)
    for i in range(0, n, 1000):
        m.partial_fit(X[i : i + 1000], y[i : i + 1000], classes=[-1, 1])


def pipe(**kw):
    def go():
        m = StreamingClassifier(BudgetedSGDClassifier(**HYP), **kw)
        for i in range(0, n, 1000):
            m.partial_fit(X[i : i + 1000], y[i : i + 1000], classes=[-1, 1])

    return go


for _ in range(2):
    plain()
    pipe(**OFF)()  # compile / cache
for _round in range(3):
    res.setdefault("plain partial_fit", []).append(clock(plain))
    res.setdefault("pipeline, stages off", []).append(clock(pipe(**OFF)))
    res.setdefault("pipeline, default stages", []).append(clock(pipe()))
bits = np.random.default_rng(0).random(n) < 0.1
res["DriftMonitor.update"] = clock(
    lambda: [DriftMonitor().update(bits[i : i + 1000]) for i in range(0, n, 1000)]
)
mon = DriftMonitor()
res["DriftMonitor.update (one monitor)"] = clock(
    lambda: [mon.update(bits[i : i + 1000]) for i in range(0, n, 1000)]
)
cal = CalibrationStage(2)
marg = np.random.default_rng(1).normal(size=n)
yi = (marg > 0.3).astype(np.int64)
res["CalibrationStage.observe"] = clock(
    lambda: [cal.observe(marg[i : i + 1000], yi[i : i + 1000]) for i in range(0, n, 1000)]
)
for k, v in res.items():
    v = float(np.median(v)) if isinstance(v, list) else v
    print(f"| {k} | {v:.3f} | {1e6 * v / n:.2f} |")

print("load", __import__("os").getloadavg())
