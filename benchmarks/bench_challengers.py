"""Drift without loss: ``on_drift="challenger"`` against ``"reset_schedule"`` and ``"none"``,
through the service's learner (``Registry``: the same handle, contest, evidence and snapshot
code as ``/learn``; no HTTP parsing), default model with B = 500 (``docs/challengers.md``).

* **flip** -- 3 passes of shuffled ijcnn1 (each pass reshuffled), labels flipped from pass 2;
  the champion predicts each batch of 500 before learning it (what ``/predict`` serves):
  examples from the flip until the accuracy over 1,000 examples is back at 90 % of the 5,000
  before the flip, for seeds 0..S-1.
* **falsealarm** -- ijcnn1 in file order with a tuned raw setting (no scaling, no buffer), where
  the detector fires without a concept change: test accuracy with ``"challenger"`` and ``"none"``.
* **stationary** -- ijcnn1, a9a, phishing (the registry's 70/30 split; results written before
  used a 75/25 one), shuffled, one pass, then ``flush``:
  test accuracy with ``on_drift="challenger"`` and with ``"none"``, examples discarded,
  detections, promotions (seeds 0..S-1).

Run: ``python -m benchmarks.bench_challengers [--seeds 3] [--parts flip,stationary,falsealarm]``;
results in ``benchmarks/results/challengers_<parts>.{json,md}``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.bench_online import _recovery
from benchmarks.common import machine, write_results
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings

BATCH = 500


def _registry(tmp: Path) -> Registry:
    settings = Settings(snapshot_dir=tmp, warm_up=False, snapshot_interval_s=3600, create_default_model=False)
    return Registry(settings, None)


def _run(X, y, on_drift: str, seed: int, flip_at: int | None = None, Xt=None, yt=None, **settings) -> dict:
    """Stream (X, y) (y: class indices 0/1) through a fresh model; returns figures."""
    with tempfile.TemporaryDirectory() as tmp:
        registry = _registry(Path(tmp))
        fields = {"budget": 500, "classes": [0, 1], "on_drift": on_drift, "random_state": seed, **settings}
        config = registry.resolve_config(fields)
        handle, _ = registry.create("m", config, snapshot=False)
        correct = np.zeros(X.shape[0], dtype=bool)
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, X.shape[0], BATCH):
            part = slice(start, start + BATCH)
            est = handle.view.estimator
            if est is not None and not handle.view.stats.get("warming_up"):
                correct[part] = est.predict(X[part]) == y[part]
            registry.learn("m", X[part], y[part]).result()
        registry.flush("m").result()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        info = handle.info()
        out = {
            "on_drift": on_drift,
            "seed": seed,
            "detections": info["drift"]["detections"],
            "promotions": info["promotion"]["promotions"] if info["promotion"] else 0,
            "events": [(e["event"], e["at"]) for e in (info["promotion"] or {}).get("history", [])],
            "discarded": info.get("n_discarded", 0),
            "examples": info["examples"],
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2),
        }
        if flip_at is not None:
            before, recovered = _recovery(correct, flip_at)
            out.update(pre_flip_accuracy=round(before, 4), recovered_after_examples=recovered)
        if Xt is not None:
            out["test_accuracy"] = float(np.mean(handle.view.estimator.predict(Xt) == yt))
        registry.close()
        return out


def part_flip(seeds: int) -> list[dict]:
    X, y, _, _ = datasets.load("ijcnn1", dense=True)
    y = (y > 0).astype(np.int64)
    n = X.shape[0]
    rows = []
    for s in range(seeds):
        rng = np.random.default_rng(s)
        passes = [rng.permutation(n) for _ in range(3)]
        Xs = np.vstack([X[p] for p in passes])
        ys = np.concatenate([y[passes[0]], 1 - y[passes[1]], 1 - y[passes[2]]])
        for on_drift in ("challenger", "reset_schedule"):
            row = {"part": "flip ijcnn1", **_run(Xs, ys, on_drift, s, flip_at=n)}
            print(row, flush=True)
            rows.append(row)
    return rows


def _stationary_sets():
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    yield "ijcnn1", X, y, Xt, yt
    X, y, Xt, yt = datasets.load("a9a", dense=True)
    yield "a9a", X, y, Xt, yt
    X, y, Xt, yt = datasets.load("phishing", order="shuffled", dense=True)
    yield "phishing", X, y, Xt, yt


def part_stationary(seeds: int) -> list[dict]:
    rows = []
    for name, X, y, Xt, yt in _stationary_sets():
        y, yt = (y > 0).astype(np.int64), (yt > 0).astype(np.int64)
        for s in range(seeds):
            p = np.random.default_rng(100 + s).permutation(X.shape[0])
            pair = {}
            for on_drift in ("challenger", "none"):
                pair[on_drift] = _run(X[p], y[p], on_drift, s, Xt=Xt, yt=yt)
            row = {
                "part": f"stationary {name}",
                "seed": s,
                "accuracy_challenger": round(pair["challenger"]["test_accuracy"], 5),
                "accuracy_off": round(pair["none"]["test_accuracy"], 5),
                "delta_pp": round(
                    100 * (pair["challenger"]["test_accuracy"] - pair["none"]["test_accuracy"]), 3
                ),
                "detections": pair["challenger"]["detections"],
                "promotions": pair["challenger"]["promotions"],
                "events": pair["challenger"]["events"],
                "discarded": pair["challenger"]["discarded"],
                "examples": pair["challenger"]["examples"],
                "cpu_s_challenger": pair["challenger"]["cpu_s"],
                "cpu_s_off": pair["none"]["cpu_s"],
            }
            print(row, flush=True)
            rows.append(row)
    return rows


#: ijcnn1 in file order with the tuned raw setting of ``bench_skeleton`` (no scaling, no shuffle
#: buffer): the error rate rises in places and the detector fires without a concept change.
RAW = {
    "algorithm": "bsgd",
    "gamma": 2.0,
    "C": 32.0,
    "scaling": "none",
    "shuffle_buffer": 0,
    "run_guard": False,
}


def part_false_alarm(seeds: int) -> list[dict]:
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    y, yt = (y > 0).astype(np.int64), (yt > 0).astype(np.int64)
    rows = []
    for s in range(seeds):
        pair = {
            m: _run(X, y, m, s, Xt=Xt, yt=yt, n_samples=X.shape[0], **RAW) for m in ("challenger", "none")
        }
        row = {
            "part": "false alarms: ijcnn1 file order, raw tuned",
            "seed": s,
            "accuracy_challenger": round(pair["challenger"]["test_accuracy"], 5),
            "accuracy_off": round(pair["none"]["test_accuracy"], 5),
            "delta_pp": round(100 * (pair["challenger"]["test_accuracy"] - pair["none"]["test_accuracy"]), 3),
            "detections_off": pair["none"]["detections"],
            "promotions": pair["challenger"]["promotions"],
            "events": pair["challenger"]["events"],
            "discarded": pair["challenger"]["discarded"],
            "examples": pair["challenger"]["examples"],
        }
        print(row, flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parts", default="flip,stationary")
    args = parser.parse_args()
    rows = []
    parts = args.parts.split(",")
    if "flip" in parts:
        rows += part_flip(args.seeds)
    if "stationary" in parts:
        rows += part_stationary(args.seeds)
    if "falsealarm" in parts:
        rows += part_false_alarm(args.seeds)
    write_results(
        "challengers_" + "_".join(parts),
        {"machine": machine(), "seeds": args.seeds, "rows": rows},
        rows,
        "Drift without loss: on_drift=challenger",
    )


if __name__ == "__main__":
    main()
