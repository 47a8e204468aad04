"""The keys ``GET /models/{name}`` answers for a plain, a no-settings (selection) and a challenged
model, after a few batches, as JSON on stdout (sorted key paths, ``a.b`` for nested objects;
list items as ``a[]``).

Run with today's tree to write ``tests/data/models_keys.json`` (the keys before the contract;
``python tests/scenarios/models_keys.py > tests/data/models_keys.json``) and by
``tests/test_models_keys.py`` with this tree, which must answer every one of them.
"""

from __future__ import annotations

import json
import sys
import tempfile

import numpy as np

MODELS = {
    "plain": {"classes": [0, 1], "budget": 30, "warmup": 100, "shuffle_buffer": 100, "random_state": 0},
    "nosettings": {"classes": [0, 1]},
    "challenged": {"classes": [0, 1], "budget": 30, "warmup": 100, "shuffle_buffer": 100, "random_state": 0,
                   "challengers": [{"gamma": 0.5}]},
}  # fmt: skip


def key_paths(value, prefix="") -> set[str]:
    """Every key path of a JSON value (``a.b``; items of a list of objects as ``a[].b``)."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            out.add(path)
            out |= key_paths(v, path)
    elif isinstance(value, list):
        for v in value:
            out |= key_paths(v, f"{prefix}[]")
    return out


def answers() -> dict[str, list[str]]:
    from fastapi.testclient import TestClient

    from svmstream.app.main import create_app
    from svmstream.app.settings import Settings

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)) * [1, 5, 20, 0.1]
    y = (X[:, 0] + X[:, 1] / 5 > 0).astype(int)
    with tempfile.TemporaryDirectory() as snap:
        settings = Settings(snapshot_dir=snap, snapshot_interval_s=3600, warm_up=False)
        with TestClient(create_app(settings)) as c:
            out = {}
            for name, body in MODELS.items():
                r = c.put(f"/models/{name}", json=body)
                assert r.status_code == 201, r.text
                for lo in range(0, X.shape[0], 300):
                    r = c.post("/learn", json={"model": name, "X": X[lo : lo + 300].tolist(),
                                               "y": y[lo : lo + 300].tolist()})  # fmt: skip
                    assert r.status_code == 200, r.text
                r = c.get(f"/models/{name}")
                assert r.status_code == 200, r.text
                out[name] = sorted(key_paths(r.json()))
    return out


if __name__ == "__main__":
    json.dump(answers(), sys.stdout, indent=1, sort_keys=True)
