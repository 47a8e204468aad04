"""thread_time of the learner's pieces per request, in process (TestClient), ijcnn1 batches."""

import collections
import functools
import sys
import tempfile
import time

import orjson
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

import svmstream.app.api.routes.learn as R
import svmstream.app.models.learning as L
from svmstream.app.main import create_app
from svmstream.app.settings import Settings
from svmstream.solvers.online import pipeline as P

acc = collections.Counter()
calls = collections.Counter()


def wrap(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def g(*a, **k):
        t = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            acc[label] += time.thread_time() - t
            calls[label] += 1

    setattr(owner, name, g)


wrap(L.Learning, "_learn_step_locked", "learner: _learn_step_locked (all)")
wrap(L.Learning, "_publish", "learner: _publish")
wrap(L.Learning, "_commit_labels", "learner: _commit_labels")
wrap(L, "published", "learner: published copy")
wrap(L, "estimator_stats", "learner: estimator_stats")
wrap(L, "check_finite", "learner: check_finite")
wrap(P.StreamingClassifier, "partial_fit", "learner: pipeline.partial_fit")
wrap(P.StreamingClassifier, "_observe", "learner: pipeline._observe")
wrap(P.StreamingClassifier, "_checked", "learner: pipeline._checked")
wrap(R, "_parse_and_submit", "loop: decode+parse+submit")
hyp = orjson.loads(sys.argv[1])
bs = int(sys.argv[2])
X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22)
X = X.toarray()
y = y.astype(int)
settings = dict(snapshot_interval_s=3600, warm_up=False)
with (
    tempfile.TemporaryDirectory() as snap,
    TestClient(create_app(Settings(snapshot_dir=snap, **settings))) as c,
):
    for rnd in range(2):
        acc.clear()
        calls.clear()
        name = f"m{rnd}"
        assert c.put(f"/models/{name}", json=hyp).status_code == 201
        bodies = [
            orjson.dumps({"model": name, "x": X[i : i + bs].tolist(), "y": y[i : i + bs].tolist()})
            for i in range(0, 40000, bs)
        ]
        t0 = time.process_time()
        for b in bodies:
            assert (
                c.post("/learn", content=b, headers={"content-type": "application/json"}).status_code == 200
            )
        tot = time.process_time() - t0
    nreq = len(bodies)
    print(
        f"process CPU (client included) {tot:.2f} s = {1e3 * tot / nreq:.2f} ms/request, {1e6 * tot / 40000:.2f} us/ex"
    )
    for k in sorted(acc):
        print(
            f"| {k} | {1e3 * acc[k] / nreq:.3f} ms/request | {1e6 * acc[k] / 40000:.2f} us/ex | calls {calls[k]} |"
        )
