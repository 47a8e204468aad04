"""``StreamingClassifier(PegasosClassifier())`` on wide sparse text: accuracy against
``LinearSVC()``, throughput, and the measurements behind the linear defaults.

* **A — acceptance.**  reuters (8,315 features, binary) and sector (55,197 features, 105
  classes): the training file shuffled (seeds 0–4), one pass of
  ``StreamingClassifier(PegasosClassifier())`` with no other hyperparameter (``random_state`` =
  the seed, for reproducible buffer draws), ``partial_fit`` in batches of 1,000 with the
  labels as given, then ``flush()``; test accuracy against ``sklearn.svm.LinearSVC()`` on the
  same split (target: within 2 pp).
* **B — throughput** on reuters: examples per CPU second (``time.process_time``) of the
  ``partial_fit``/``flush`` loop (batches sliced beforehand), median of 5 runs after a first
  run; the first run of a fresh process with an empty numba cache (compile) and with the
  on-disk cache (load) are reported separately (target: ≥ 100,000 examples/s).
* **C — λ and scaling** (the linear defaults): λ ∈ {3.3e-5 (the kernel model's), 1e-4, 2e-4,
  5e-4} × scaling ∈ {auto, maxabs}; shuffled, seeds 0–2, median.
* **D — the shuffle buffer** on wide sparse rows: off, K = 64 MiB of dense rows (1,008 rows
  for reuters, 151 for sector: what a dense buffer could hold), and the default (20,000 rows
  held sparse); shuffled (seeds 0–2), file order, and sorted by label.

Run: ``python -m benchmarks.bench_linear_online``.  Writes
``benchmarks/results/linear_online.{json,md}``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from benchmarks import datasets
from benchmarks.common import machine, write_results
from svmstream.solvers import PegasosClassifier, StreamingClassifier
from svmstream.solvers.budgeted._preprocessing import BUFFER_MAX_BYTES

BATCH = 1000
SETS = ("reuters", "sector")


def load(name: str):
    X, y, Xt, yt = datasets.load(name)
    return sp.csr_matrix(X), y, sp.csr_matrix(Xt), yt


def one_pass(X, y, **params):
    """A fresh linear model (the service's: ``StreamingClassifier(PegasosClassifier(...))``, the
    streaming stages' settings to the pipeline), one pass in batches of 1,000 (labels as given),
    flushed."""
    stages = {
        k: params.pop(k) for k in list(params) if k in StreamingClassifier().get_params() and k != "estimator"
    }
    est = StreamingClassifier(PegasosClassifier(**params), **stages)
    classes = np.unique(y)
    batches = [(X[s : s + BATCH], y[s : s + BATCH]) for s in range(0, X.shape[0], BATCH)]
    t0 = time.process_time()
    for Xb, yb in batches:
        est.partial_fit(Xb, yb, classes=classes)
    est.flush()
    return est, time.process_time() - t0


def linear_svc(X, y, Xt, yt) -> tuple[float, float]:
    to32 = lambda M: sp.csr_matrix((M.data, M.indices.astype(np.int32), M.indptr.astype(np.int32)), M.shape)  # noqa: E731
    t0 = time.process_time()
    clf = LinearSVC().fit(to32(X), y)
    return float(clf.score(to32(Xt), yt)), time.process_time() - t0


def orders(y, seeds, file_order=False, sorted_order=False):
    out = [(f"shuffled (seed {s})", np.random.default_rng(s).permutation(y.shape[0]), s) for s in seeds]
    if file_order:
        out.append(("file order", np.arange(y.shape[0]), 0))
    if sorted_order:
        out.append(("sorted by label", np.argsort(y, kind="stable"), 0))
    return out


_COLD = """
import time, numpy as np, scipy.sparse as sp
from svmstream.solvers import PegasosClassifier, StreamingClassifier
rng = np.random.default_rng(0)
X = sp.random(3000, 500, density=0.02, format="csr", random_state=0)
y = rng.integers(0, 2, 3000)
t0 = time.process_time()
est = StreamingClassifier(PegasosClassifier(random_state=0))
for s in range(0, 3000, 1000):
    est.partial_fit(X[s : s + 1000], y[s : s + 1000], classes=[0, 1])
est.flush().decision_function(X[:10])
print(time.process_time() - t0)
"""


def first_call_seconds(cache_dir: str | None) -> float:
    """CPU seconds of the first partial_fit/flush/decision_function of a fresh process on a tiny
    problem: with an empty numba cache (compile) or the default one (load)."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows, payload = [], {"machine": machine(), "batch": BATCH}
    data = {name: load(name) for name in SETS}

    # ---------------------------------------------------------------- A: acceptance
    for name, (X, y, Xt, yt) in data.items():
        svc_acc, svc_s = linear_svc(X, y, Xt, yt)
        accs = []
        for label, order, seed in orders(y, range(5)):
            est, cpu = one_pass(X[order], y[order], random_state=seed)
            acc = float(est.score(Xt, yt))
            accs.append(acc)
            rows.append(
                {
                    "part": "A",
                    "set": name,
                    "order": label,
                    "accuracy_%": 100 * acc,
                    "LinearSVC_%": 100 * svc_acc,
                    "diff_pp": 100 * (acc - svc_acc),
                    "scaling": est.scaling_,
                    "lambda": est.lambda_eff_,
                    "buffer_rows": int(est._order.capacity),
                    "cpu_s": cpu,
                }
            )
            print(rows[-1], flush=True)
        payload[f"A_{name}"] = {
            "accuracies": accs,
            "median": float(np.median(accs)),
            "LinearSVC": svc_acc,
            "LinearSVC_cpu_s": svc_s,
            "median_diff_pp": 100 * (float(np.median(accs)) - svc_acc),
            "worst_diff_pp": 100 * (min(accs) - svc_acc),
        }
        rows.append(
            {
                "part": "A",
                "set": name,
                "order": "median of 5",
                "accuracy_%": 100 * float(np.median(accs)),
                "LinearSVC_%": 100 * svc_acc,
                "diff_pp": payload[f"A_{name}"]["median_diff_pp"],
            }
        )

    # ---------------------------------------------------------------- B: throughput
    X, y, _, _ = data["reuters"]
    order = np.random.default_rng(0).permutation(y.shape[0])
    X, y = X[order], y[order]
    first = one_pass(X, y, random_state=0)[1]
    for label, params in (
        ("defaults", {}),
        ("no buffer, no guard", {"shuffle_buffer": 0, "run_guard": False}),
    ):
        one_pass(X, y, random_state=0, **params)  # this configuration's code paths loaded
        cpu = [one_pass(X, y, random_state=0, **params)[1] for _ in range(5)]
        rate = X.shape[0] / float(np.median(cpu))
        rows.append({"part": "B", "set": "reuters", "config": label, "examples_per_cpu_s": rate})
        payload[f"B_{label}"] = {"cpu_s": cpu, "examples_per_cpu_s": rate}
        print(rows[-1], flush=True)
    Xs, ys = data["sector"][:2]
    sector_cpu = [one_pass(Xs, ys, random_state=0)[1] for _ in range(3)]
    rows.append(
        {
            "part": "B",
            "set": "sector (105 classes)",
            "config": "defaults",
            "examples_per_cpu_s": Xs.shape[0] / float(np.median(sector_cpu)),
        }
    )
    with tempfile.TemporaryDirectory() as cache:
        compile_s = first_call_seconds(cache)
    load_s = first_call_seconds(None)
    payload["B_first_call"] = {
        "in_process_first_run_cpu_s": first,
        "fresh_process_empty_numba_cache_cpu_s": compile_s,
        "fresh_process_numba_cache_cpu_s": load_s,
    }
    rows.append(
        {
            "part": "B",
            "set": "first call (tiny problem)",
            "config": "empty numba cache: compile",
            "cpu_s": compile_s,
        }
    )
    rows.append(
        {
            "part": "B",
            "set": "first call (tiny problem)",
            "config": "numba cache on disk: load",
            "cpu_s": load_s,
        }
    )
    print(payload["B_first_call"], flush=True)

    # ---------------------------------------------------------------- C: lambda and scaling
    for name, (X, y, Xt, yt) in data.items():
        for lam in (1 / 30_000, 1e-4, 2e-4, 5e-4):
            for scaling in ("auto", "maxabs"):
                accs = []
                for _, order, seed in orders(y, range(3)):
                    est = one_pass(X[order], y[order], random_state=seed, lambda_=lam, scaling=scaling)[0]
                    accs.append(float(est.score(Xt, yt)))
                rows.append(
                    {
                        "part": "C",
                        "set": name,
                        "lambda": lam,
                        "scaling": f"{scaling} ({est.scaling_})",
                        "median_accuracy_%": 100 * float(np.median(accs)),
                        "accuracies_%": ", ".join(f"{100 * a:.2f}" for a in accs),
                    }
                )
                print(rows[-1], flush=True)

    # ---------------------------------------------------------------- D: the buffer
    for name, (X, y, Xt, yt) in data.items():
        dense_rows = BUFFER_MAX_BYTES // (8 * X.shape[1])
        configs = {
            "off": {"shuffle_buffer": 0},
            f"K = {dense_rows:,} (64 MiB dense)": {"shuffle_buffer": int(dense_rows)},
            "default (20,000 sparse)": {},
        }
        for label, order, seed in orders(y, range(3), file_order=True, sorted_order=True):
            for config, params in configs.items():
                est = one_pass(X[order], y[order], random_state=seed, **params)[0]
                rows.append(
                    {
                        "part": "D",
                        "set": name,
                        "order": label,
                        "buffer": config,
                        "accuracy_%": 100 * float(est.score(Xt, yt)),
                        "replayed": est.n_replayed_,
                        "drift_detections": est.drift_.n_detections,
                    }
                )
                print(rows[-1], flush=True)

    payload["rows"] = rows
    write_results(
        "linear_online",
        payload,
        rows,
        "StreamingClassifier(PegasosClassifier()): one pass over wide sparse text",
        notes=(
            "A: accuracy % of one pass (batches of 1,000, flush) against LinearSVC() on the same split. "
            "B: examples per CPU second of partial_fit/flush (median of 5 after a first run) and the first "
            "call's CPU seconds. C: median accuracy % of 3 shuffled orders per lambda and scaling. "
            "D: accuracy % with the shuffle buffer off, as large as 64 MiB of dense rows, and the default."
        ),
    )


if __name__ == "__main__":
    main()
