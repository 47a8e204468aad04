"""Decisions of the served models on real data (ijcnn1, letter, reuters; ``SVMSTREAM_DATA``), in
process and through the service, as JSON digests on stdout: run with two trees, compare the output.

In process (``make_estimator`` of a ``ModelConfig``, batches of 500, then a flush): plain BSGD,
BSCA and Pegasos pipelines and the no-settings selector.  Through the service (``TestClient``):
the no-settings selector and a model whose challenger is promoted (a champion with γ = 1000, a
challenger with γ = 1), with the promotion history.

Usage: ``SVMSTREAM_DATA=/work/shared/data python tests/scenarios/real_decisions.py``
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROWS = {"ijcnn1": 8000, "letter": 5000, "reuters": 3000}
CONFIGS = {
    "bsgd": {"algorithm": "bsgd", "budget": 100, "random_state": 0, "selection": False},
    "bsca": {"algorithm": "bsca", "budget": 100, "random_state": 0, "selection": False},
    "pegasos": {"algorithm": "bsgd", "kernel": "linear", "random_state": 0, "selection": False},
    "selection": {"budget": 100, "random_state": 0, "selection": True},
}


def _digest(values) -> str:
    return hashlib.sha256(np.asarray(values, dtype=np.float64).round(12).tobytes()).hexdigest()[:16]


def load(name):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks import datasets

    X, y, Xt, yt = datasets.load(name)
    n = ROWS[name]
    return X[:n], np.unique(y, return_inverse=True)[1][:n].astype(np.int64), Xt[:2000]


def in_process(name, X, y, Xt):
    from svmstream.app.models.config import ModelConfig
    from svmstream.app.models.factory import make_estimator

    k = int(y.max()) + 1
    out = {}
    for model, body in CONFIGS.items():
        est = make_estimator(ModelConfig(**body))
        for lo in range(0, X.shape[0], 500):
            if lo == 0:
                est.partial_fit(X[lo : lo + 500], y[lo : lo + 500], classes=np.arange(k))
            else:
                est.partial_fit(X[lo : lo + 500], y[lo : lo + 500])
        out[model] = _digest(est.flush().decision_function(Xt))
    return out


def _rows(X):
    return (
        [{str(j): float(v) for j, v in zip(r.indices, r.data)} for r in X]
        if hasattr(X, "indices")
        else X.tolist()
    )


def through_service(X, y, Xt):
    from fastapi.testclient import TestClient

    from svmstream.app.main import create_app
    from svmstream.app.settings import Settings

    bodies = {
        "nosettings": {},
        "promoted": {"gamma": 1000.0, "budget": 100, "random_state": 0, "challengers": [{"gamma": 1.0}]},
    }
    out = {}
    with (
        tempfile.TemporaryDirectory() as snap,
        TestClient(create_app(Settings(snapshot_dir=snap, snapshot_interval_s=3600, warm_up=False))) as c,
    ):
        for name, body in bodies.items():
            assert c.put(f"/models/{name}", json=body).status_code == 201
            for lo in range(0, X.shape[0], 500):
                r = c.post("/learn", json={"model": name, "X": _rows(X[lo : lo + 500]),
                                           "y": y[lo : lo + 500].tolist()})  # fmt: skip
                assert r.status_code == 200, r.text
            assert c.post(f"/models/{name}/flush").status_code == 200
            decisions = []
            for lo in range(0, Xt.shape[0], 500):
                r = c.post("/predict", json={"model": name, "X": _rows(Xt[lo : lo + 500])})
                assert r.status_code == 200, r.text
                decisions.append(np.asarray(r.json()["decision"], dtype=np.float64).reshape(-1))
            info = c.get(f"/models/{name}").json()
            promotions = [
                e for e in (info.get("promotion") or {}).get("history", []) if e.get("event") == "promoted"
            ]
            out[name] = {"decisions": _digest(np.concatenate(decisions)), "promotions": len(promotions),
                         "at": [e.get("at") for e in promotions]}  # fmt: skip
    return out


def main():
    result = {}
    for name in ROWS:
        X, y, Xt = load(name)
        result[name] = {"in_process": in_process(name, X, y, Xt)}
        if name == "ijcnn1":
            result[name]["service"] = through_service(X, y, Xt)
    json.dump(result, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
