"""Rehearsal: accuracy of one pass over a stream against the exact SVM.

Part ``grid`` streams ijcnn1, a9a and phishing (its 70/30 split in ``benchmarks.datasets``) once through
``partial_fit`` in batches of 1,000 (file order; phishing's training part is shuffled by the
split), B = 500, for BSGD and BSCA with ``rehearsal`` = 0, 1, 2, 4, 8 extra steps per
example, under two settings: ``none`` (no hyperparameters: the service's defaults) and
``paper`` (the papers' C and γ on the features as distributed: ijcnn1 C = 32, γ = 2; a9a
C = 32, γ = 2⁻⁷; phishing C = 8, γ = 8; ``scaling="none"``, n = the training rows).  Figures:
test accuracy and CPU seconds, medians over seeds.

Part ``accept`` runs the chosen configuration and its anchors interleaved (SVC, Nystroem,
ours, SVC, Nystroem, ours, …) for ``--rounds`` rounds in this process: scikit-learn's SVC
with the papers' C and γ (LIBSVM, the exact SVM) and ``StandardScaler + Nystroem(500) +
SGDClassifier(hinge)`` (what a scikit-learn user picks for large data), in CPU and wall
seconds with the load average per round; ratios are medians of per-round ratios.  Numba's
compilation is excluded (one untimed run first) and reported separately.

Run: ``python -m benchmarks.bench_rehearsal [--part grid|accept|both] [--seeds 3]
[--rounds 3] [--sets ijcnn1 a9a phishing]``.  Writes ``benchmarks/results/rehearsal.{json,md}``
(grid) and ``rehearsal_accept.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from benchmarks import datasets
from benchmarks.common import machine, write_results
from svmstream.solvers import BudgetedSCAClassifier, BudgetedSGDClassifier, StreamingClassifier

PAPER = {
    "ijcnn1": {"C": 32.0, "gamma": 2.0},
    "a9a": {"C": 32.0, "gamma": 2.0**-7},
    "phishing": {"C": 8.0, "gamma": 8.0},
}
ALGORITHMS = {"bsgd": BudgetedSGDClassifier, "bsca": BudgetedSCAClassifier}
BATCH = 1000


def load(name: str):
    """(X, y, Xt, yt) dense float64 through the benchmarks' registry (:mod:`benchmarks.datasets`;
    phishing's training part in the order of its split's permutation)."""
    return datasets.load(name, order="shuffled", dense=True)


def make(algorithm: str, setting: str, name: str, n: int, rehearsal: int, seed: int):
    """The service's model: the plain estimator in the streaming stages, rehearsal one of them."""
    params, stages = {"budget": 500, "random_state": seed}, {"rehearsal": rehearsal}
    if setting == "paper":
        params.update(PAPER[name], n_samples=n)
        stages["scaling"] = "none"
    return StreamingClassifier(ALGORITHMS[algorithm](**params), **stages)


def stream(est, X, y):
    """One pass: ``partial_fit`` in batches of :data:`BATCH`, then ``flush``; CPU and wall s."""
    classes = np.unique(y)
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, X.shape[0], BATCH):
        est.partial_fit(X[start : start + BATCH], y[start : start + BATCH], classes=classes)
    est.flush()
    return time.process_time() - cpu, time.perf_counter() - wall


def compile_once(X, y) -> float:
    """Compile every kernel the runs use (not timed in them); returns the seconds it took."""
    started = time.perf_counter()
    for algorithm in ALGORITHMS:
        for setting in ("none", "paper"):
            est = make(algorithm, setting, "ijcnn1", 3000, 2, 0)
            stream(est, X[:3000], y[:3000])
            est.predict(X[:10])
    return time.perf_counter() - started


def grid(sets, seeds, rehearsals) -> list[dict]:
    rows = []
    for name in sets:
        X, y, Xt, yt = load(name)
        for setting in ("none", "paper"):
            for algorithm in ALGORITHMS:
                for r in rehearsals:
                    accs, cpus = [], []
                    for seed in seeds:
                        est = make(algorithm, setting, name, X.shape[0], r, seed)
                        cpu, _ = stream(est, X, y)
                        accs.append(100 * float(np.mean(est.predict(Xt) == yt)))
                        cpus.append(cpu)
                    row = {
                        "set": name,
                        "setting": setting,
                        "algorithm": algorithm,
                        "rehearsal": r,
                        "accuracy_%": float(np.median(accs)),
                        "accuracy_min_%": float(np.min(accs)),
                        "accuracy_max_%": float(np.max(accs)),
                        "cpu_s": float(np.median(cpus)),
                        "examples_per_cpu_s": X.shape[0] / float(np.median(cpus)),
                        "load_avg": os.getloadavg()[0],
                    }
                    rows.append(row)
                    print(row, flush=True)
    return rows


def nystroem(seed: int):
    return make_pipeline(
        StandardScaler(),
        Nystroem(n_components=500, random_state=seed),
        SGDClassifier(loss="hinge", random_state=seed),
    )


SETTLE_S = 0.5
"""Pause before each timed side of ``accept``: OpenBLAS's worker threads keep spinning for
~0.1 s after a multi-threaded call returns (its ``THREAD_TIMEOUT``, 2^28 cycles), and this
process's CPU time counts them.  Timed right after the Nystroem pipeline's 2-thread
``predict``, one phishing pass measured 0.18 CPU s in 0.09 s of wall time (ours is
single-threaded); after the pause CPU and wall agree."""


def settle() -> None:
    time.sleep(SETTLE_S)


def accept(sets, rounds, algorithm, setting, rehearsal) -> list[dict]:
    rows = []
    for name in sets:
        X, y, Xt, yt = load(name)
        per_round = []
        for rnd in range(rounds):
            load_avg = os.getloadavg()[0]
            settle()
            cpu, wall = time.process_time(), time.perf_counter()
            svc = SVC(C=PAPER[name]["C"], gamma=PAPER[name]["gamma"], cache_size=200).fit(X, y)
            svc_cpu, svc_wall = time.process_time() - cpu, time.perf_counter() - wall
            svc_acc = 100 * float(np.mean(svc.predict(Xt) == yt))
            settle()
            cpu, wall = time.process_time(), time.perf_counter()
            pipe = nystroem(rnd).fit(X, y)
            ny_cpu, ny_wall = time.process_time() - cpu, time.perf_counter() - wall
            ny_acc = 100 * float(np.mean(pipe.predict(Xt) == yt))
            settle()
            est = make(algorithm, setting, name, X.shape[0], rehearsal, rnd)
            ours_cpu, ours_wall = stream(est, X, y)
            ours_acc = 100 * float(np.mean(est.predict(Xt) == yt))
            row = {
                "set": name,
                "round": rnd,
                "load_avg": load_avg,
                "svc_cpu_s": svc_cpu,
                "svc_wall_s": svc_wall,
                "svc_%": svc_acc,
                "nystroem_cpu_s": ny_cpu,
                "nystroem_wall_s": ny_wall,
                "nystroem_%": ny_acc,
                "ours_cpu_s": ours_cpu,
                "ours_wall_s": ours_wall,
                "ours_%": ours_acc,
                "speedup_vs_svc_cpu": svc_cpu / ours_cpu,
                "speedup_vs_svc_wall": svc_wall / ours_wall,
                "ours_per_nystroem_examples_per_cpu_s": ny_cpu / ours_cpu,
            }
            per_round.append(row)
            rows.append(row)
            print(row, flush=True)
        med = {
            k: float(np.median([r[k] for r in per_round])) for k in per_round[0] if k not in ("set", "round")
        }
        verdict = {
            "set": name,
            "round": "median",
            **med,
        }
        rows.append(verdict)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["grid", "accept", "both"], default="both")
    parser.add_argument("--sets", nargs="+", default=["ijcnn1", "a9a", "phishing"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rehearsals", type=int, nargs="+", default=[0, 1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--algorithm", default="bsgd")
    parser.add_argument("--setting", default="none")
    parser.add_argument("--rehearsal", type=int, default=None, help="accept: default = the estimator's")
    args = parser.parse_args(argv)
    X, y, _, _ = load("ijcnn1")
    jit_s = compile_once(X, y)
    info = {**machine(), "jit_compile_s": jit_s}
    if args.part in ("grid", "both"):
        rows = grid(args.sets, list(range(args.seeds)), args.rehearsals)
        write_results(
            "rehearsal",
            {"machine": info, "rows": rows},
            rows,
            "Rehearsal: one pass over the stream, B = 500",
            notes=f"Medians over {args.seeds} seeds; partial_fit batches of {BATCH}; "
            "setting none = no hyperparameters, paper = the papers' C and γ on raw features.",
        )
    if args.part in ("accept", "both"):
        rehearsal = args.rehearsal
        if rehearsal is None:
            rehearsal = ALGORITHMS[args.algorithm]().rehearsal
        rows = accept(args.sets, args.rounds, args.algorithm, args.setting, rehearsal)
        write_results(
            "rehearsal_accept",
            {
                "machine": info,
                "algorithm": args.algorithm,
                "setting": args.setting,
                "rehearsal": rehearsal,
                "rows": rows,
            },
            rows,
            f"One pass with rehearsal = {rehearsal} ({args.algorithm}, setting {args.setting}) against SVC and Nystroem, interleaved",
            notes="Per round: SVC (papers' C, γ), Nystroem(500)+SGD, ours, in this order; "
            "CPU = time.process_time of this process; the 'median' rows are medians of the per-round figures and ratios.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
