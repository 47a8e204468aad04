"""CPU per example of the service's learn path, in one process: a plain pipeline and the
no-settings selector, each fed ``POST /learn`` batches through FastAPI's ``TestClient`` (the
routes, the registry, the learner thread, the published views: everything but the socket).

Two models on ijcnn1's first 20,000 training rows in file order (batches of 500; then a flush):
``plain`` (B = 200, γ = 2, C = 32: a plain BSGD pipeline with its stages) and ``selection``
(only the classes given: the selector races its candidates, then one survives).  Figures: CPU
seconds of this process while it learns (``time.process_time``: the learner threads count),
µs of CPU per example, and the test accuracy on ijcnn1.t's first 10,000 rows with a digest of
the decisions (equal decisions: equal digests, max |Δ| = 0 in ``compare``).

Run: ``python -m benchmarks.bench_learn_cpu`` (two trees: ``python -m benchmarks compare --before
DIR bench_learn_cpu``).  Writes ``benchmarks/results/learn_cpu.{json,md}``.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time

import numpy as np

from benchmarks import datasets
from benchmarks.common import machine, write_results

MODELS = {
    "plain": {"budget": 200, "gamma": 2.0, "C": 32.0, "random_state": 0},
    "selection": {},
}
BATCH = 500


def run(name: str, body: dict, X, y, Xt, yt) -> dict:
    from fastapi.testclient import TestClient

    from svmstream.app.main import create_app
    from svmstream.app.settings import Settings

    with tempfile.TemporaryDirectory() as snap:
        settings = Settings(snapshot_dir=snap, snapshot_interval_s=3600, warm_up=False)
        with TestClient(create_app(settings)) as c:
            r = c.put(f"/models/{name}", json={"classes": [-1, 1], **body})
            assert r.status_code == 201, r.text
            batches = [
                {"model": name, "X": X[lo : lo + BATCH].tolist(), "y": y[lo : lo + BATCH].tolist()}
                for lo in range(0, X.shape[0], BATCH)
            ]
            started = time.process_time()
            for batch in batches:
                r = c.post("/learn", json=batch)
                assert r.status_code == 200, r.text
            assert c.post(f"/models/{name}/flush").status_code == 200
            cpu = time.process_time() - started
            parts = []
            for lo in range(0, Xt.shape[0], 1000):  # within the predict body limit
                r = c.post("/predict", json={"model": name, "X": Xt[lo : lo + 1000].tolist()})
                assert r.status_code == 200, r.text
                parts.append(np.asarray(r.json()["decision"], dtype=np.float64))
            decision = np.concatenate(parts)
    accuracy = float(np.mean(np.where(decision > 0, 1, -1) == yt))
    return {
        "model": name,
        "examples": int(X.shape[0]),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_example": round(cpu / X.shape[0] * 1e6, 2),
        "accuracy_%": round(100 * accuracy, 4),
        "decision_digest": hashlib.sha256(decision.round(12).tobytes()).hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    args = parser.parse_args()
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    X, y, Xt, yt = X[: args.rows], y[: args.rows].astype(np.int64), Xt[:10000], yt[:10000].astype(np.int64)
    rows = [run(name, body, X, y, Xt, yt) for name, body in MODELS.items()]
    write_results(
        "learn_cpu", {"machine": machine(), "rows": rows}, rows, "CPU per example of the learn path"
    )


if __name__ == "__main__":
    main()
