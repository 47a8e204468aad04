"""Classifier challengers on one stream through the app (TestClient): each model's history
(clock times aside), its challengers' figures and the decisions of the champion and of every
challenger (promoted by hand in turn), as JSON on stdout.  Three models: a bad-γ champion with
two challengers and ``on_drift="challenger"`` on a label flip (a promotion on evidence, a drift
challenger that wins), a label-sorted stream (held pairs of one-class runs) and a selector with
a challenger.

Run with this tree and with the tree before the task losses (issue 38: ``paired_loss``,
``PairedEvidence.add_losses``); both must print the same bytes.  The tree before, without a
venv of its own: ``git archive <commit> app solvers | tar -x -C B/src``, ``B/pkg/svmstream/app``
and ``B/pkg/svmstream/solvers`` symlinks to them, then
``PYTHONPATH=B/pkg .venv/bin/python tests/scenarios/challenger_histories.py > before.json``
(the namespace package ``svmstream`` is found on ``PYTHONPATH`` before the editable install).
"""

import json
import sys
import tempfile

import numpy as np
from fastapi.testclient import TestClient

import svmstream.app
from svmstream.app.main import create_app
from svmstream.app.settings import Settings

print(svmstream.app.__path__, file=sys.stderr)  # which tree


def moons(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    return X, np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 0.5 > 0, 1, -1)


out = {}
with tempfile.TemporaryDirectory() as tmp:
    settings = Settings(snapshot_dir=tmp, warm_up=False)
    with TestClient(create_app(settings)) as c:
        X, y = moons(9000, 6, 3)
        y = y.copy()
        y[4500:] = -y[4500:]  # a flip: a drift challenger starts and wins
        Xs, ys = X[np.argsort(y[:3000], kind="stable")], np.sort(y[:3000])  # a sorted run: held pairs
        probe = moons(100, 6, 99)[0]
        good = {
            "budget": 40,
            "gamma": 1.0,
            "C": 10.0,
            "shuffle_buffer": 500,
            "classes": [-1, 1],
            "random_state": 2,
        }
        specs = {
            "m": {
                **good,
                "gamma": 1000.0,
                "on_drift": "challenger",
                "challengers": [{"gamma": 1.0}, {"gamma": 0.1}],
            },
            "s": {**good, "challengers": [{"gamma": 3.0}, {"gamma": 1000.0}]},
            "z": {"classes": [-1, 1], "random_state": 1, "challengers": [{"gamma": 2.0}]},
        }
        for name, body in specs.items():
            assert c.put(f"/models/{name}", json=body).status_code == 201
        for name, (XX, yy) in {"m": (X, y), "s": (Xs, ys), "z": (X[:5000], y[:5000])}.items():
            for lo in range(0, XX.shape[0], 333):
                r = c.post(
                    "/learn",
                    json={"model": name, "X": XX[lo : lo + 333].tolist(), "y": yy[lo : lo + 333].tolist()},
                )
                assert r.status_code == 200, r.text
            info = c.get(f"/models/{name}").json()
            hist = [{k: v for k, v in e.items() if k != "time"} for e in info["promotion"]["history"]]
            dec = [c.post("/predict", json={"model": name, "X": probe.tolist()}).json()["decision"]]
            for _ in range(len(info["challengers"])):
                assert c.post(f"/models/{name}/promote", json={"challenger": 0}).status_code == 200
                dec.append(c.post("/predict", json={"model": name, "X": probe.tolist()}).json()["decision"])
            out[name] = {
                "history": hist,
                "challengers": info["challengers"],
                "decisions": dec,
                "n_seen": info["n_seen"],
            }
json.dump(out, sys.stdout)
