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

* **seam** -- ijcnn1 in file order (``tr`` then ``val``), no settings: test accuracy with
  ``"challenger"`` and ``"reset_schedule"``.
* **sets** -- the 14 sets of ``bench_selection`` (file order and shuffled), no settings: test
  accuracy per mode.
* **cpu** -- 30,000 shuffled ijcnn1 rows, no settings: CPU seconds of ``"challenger"`` and
  ``"reset_schedule"``, interleaved, median of the per-round ratios.

``--drift-start warm|fresh|both`` is the service setting ``drift_challenger_start`` (default
warm); ``--modes`` the ``on_drift`` modes of flip, seam and sets; ``--warm-t0`` the warm copy's
schedule restart.

Run: ``python -m benchmarks.bench_challengers [--seeds 3] [--parts flip,stationary,falsealarm,seam,sets,cpu]
[--drift-start warm]``; results in ``benchmarks/results/challengers_<parts>[_<start>].{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.bench_online import _recovery
from benchmarks.bench_selection import stream as selection_stream
from benchmarks.common import machine, write_results
from svmstream.app.models.registry import Registry
from svmstream.app.settings import Settings
from svmstream.solvers.online import StreamingClassifier

BATCH = 500


#: how drift challengers start (``--drift-start``: the service setting ``drift_challenger_start``)
DRIFT_START = {"value": "warm"}
#: the on_drift modes the flip and seam parts compare (``--modes``)
MODES = {"value": ("challenger", "reset_schedule")}


def _registry(tmp: Path) -> Registry:
    settings = Settings(
        snapshot_dir=tmp, warm_up=False, snapshot_interval_s=3600, create_default_model=False,
        drift_challenger_start=DRIFT_START["value"],
    )  # fmt: skip
    return Registry(settings, None)


def _run(X, y, on_drift: str, seed: int, flip_at: int | None = None, Xt=None, yt=None, **settings) -> dict:
    """Stream (X, y) (y: class indices 0/1 unless ``settings`` names ``classes``) through a
    fresh model; returns figures."""
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
            "drift_start": DRIFT_START["value"] if on_drift == "challenger" else None,
            "warm_t0": StreamingClassifier.WARM_T0
            if on_drift == "challenger" and DRIFT_START["value"] != "fresh"
            else None,
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
        for on_drift in MODES["value"]:
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


def part_seam(seeds: int) -> list[dict]:
    """ijcnn1 in file order (its ``tr`` part, then ``val``), no settings but ``on_drift``: test
    accuracy with ``challenger`` against ``reset_schedule`` (what ``bench_defaults`` measures)."""
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    y, yt = (y > 0).astype(np.int64), (yt > 0).astype(np.int64)
    rows = []
    for s in range(seeds):
        for on_drift in MODES["value"]:
            run = _run(X, y, on_drift, s, Xt=Xt, yt=yt, budget=None)
            row = {"part": "seam: ijcnn1 file order, no settings", **run}
            row["test_accuracy"] = round(row["test_accuracy"], 5)
            print(row, flush=True)
            rows.append(row)
    return rows


SETS = ("ijcnn1", "letter", "pendigits", "reuters", "dna", "phishing", "a9a", "breast_cancer", "digits",
        "skin_nonskin", "satellite", "vehicle", "segment", "bananas")  # fmt: skip


SETS_CHOSEN = {"value": SETS}


def part_sets(seeds: int) -> list[dict]:
    """No settings (classes only), one pass then flush, on bench_selection's 14 sets in file
    order and shuffled: test accuracy per ``on_drift`` mode (``--modes``)."""
    rows = []
    for name in SETS_CHOSEN["value"]:
        for order in ("file", "shuffled"):
            X, y, Xt, yt = selection_stream(name, order)
            labels = np.unique(np.concatenate([np.unique(y), np.unique(yt)]))
            # the service learns class indices
            y, yt = np.searchsorted(labels, y), np.searchsorted(labels, yt)
            for on_drift in MODES["value"]:
                run = _run(X, y, on_drift, 0, Xt=Xt, yt=yt, budget=None, classes=list(range(labels.shape[0])))
                row = {"part": "sets: no settings", "set": name, "order": order, **run}
                row["test_accuracy"] = round(100 * row["test_accuracy"], 2)
                del row["events"]
                print(row, flush=True)
                rows.append(row)
    return rows


def part_cpu(rounds: int) -> list[dict]:
    """CPU of ``on_drift="challenger"`` against ``"reset_schedule"``: 30,000 shuffled ijcnn1 rows,
    no settings, interleaved (challenger, reset) × ``rounds``; median of the per-round ratios."""
    X, y, _, _ = datasets.load("ijcnn1", dense=True)
    perm = np.random.default_rng(0).permutation(X.shape[0])[:30_000]
    X, y = X[perm], (y[perm] > 0).astype(np.int64)
    rows, ratios = [], []
    for r in range(rounds):
        load = os.getloadavg()[0]
        runs = {m: _run(X, y, m, 0, budget=None) for m in ("challenger", "reset_schedule")}
        cpu = {m: run["cpu_s"] for m, run in runs.items()}
        ratios.append(cpu["challenger"] / cpu["reset_schedule"])
        rows.append({"part": "cpu: 30,000 shuffled ijcnn1, no settings", "round": r, "load_avg": round(load, 2),
                     "cpu_challenger_s": cpu["challenger"], "cpu_reset_s": cpu["reset_schedule"],
                     "wall_challenger_s": runs["challenger"]["wall_s"], "wall_reset_s": runs["reset_schedule"]["wall_s"],
                     "ratio": round(ratios[-1], 3)})  # fmt: skip
        print(rows[-1], flush=True)
    rows.append({"part": "cpu: 30,000 shuffled ijcnn1, no settings", "round": "median",
                 "ratio": round(float(np.median(ratios)), 3)})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parts", default="flip,stationary")
    parser.add_argument("--drift-start", choices=("both", "warm", "fresh"), default="warm")
    parser.add_argument("--warm-t0", type=int, default=None, help="the warm copy's schedule restart")
    parser.add_argument("--modes", default="challenger,reset_schedule", help="flip and seam: on_drift modes")
    parser.add_argument("--sets", default=",".join(SETS), help="the sets part's data sets")
    args = parser.parse_args()
    MODES["value"] = tuple(args.modes.split(","))
    SETS_CHOSEN["value"] = tuple(args.sets.split(","))
    if args.warm_t0 is not None:
        StreamingClassifier.WARM_T0 = args.warm_t0
    DRIFT_START["value"] = args.drift_start
    rows = []
    parts = args.parts.split(",")
    if "cpu" in parts:
        rows += part_cpu(max(3, args.seeds))
    if "sets" in parts:
        rows += part_sets(args.seeds)
    if "seam" in parts:
        rows += part_seam(args.seeds)
    if "flip" in parts:
        rows += part_flip(args.seeds)
    if "stationary" in parts:
        rows += part_stationary(args.seeds)
    if "falsealarm" in parts:
        rows += part_false_alarm(args.seeds)
    write_results(
        "challengers_" + "_".join(parts) + ("" if args.drift_start == "warm" else f"_{args.drift_start}"),
        {"machine": machine(), "seeds": args.seeds, "rows": rows},
        rows,
        "Drift without loss: on_drift=challenger",
    )


if __name__ == "__main__":
    main()
