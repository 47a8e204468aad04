"""Prediction speed.

A. Batch prediction, solver only: BSGD on ijcnn1 (γ = 2, C = 32, B = 500, one pass in file
   order, the raw setting of ``bench_skeleton``), then the decision values of all 91,701 rows of
   ijcnn1.t through

   * ``per-row``: the kernel ``decision_function`` used before (one kernel row per test point,
     :func:`~svmstream.solvers.budgeted._decision.rbf_decision_batch`, one thread);
   * ``blocked, 1 thread``: :func:`~svmstream.solvers.budgeted._decision.dense_decision` with
     ``threads=1`` (BLAS Gram blocks + fused exp, per core);
   * ``blocked``: ``decision_function`` as it now is (blocked, the rows split over all cores);

   interleaved (per-row, blocked 1, blocked, per-row, ...) for ``--rounds`` rounds after one
   untimed call each (JIT and first-touch excluded); wall and CPU seconds (``process_time``:
   all threads), the load average per round, the median of the per-round ratios.  The same for
   letter (26 classes, dense) and reuters (sparse SVs: unchanged path, regression check).
B. ``--part http``: a real server; a model learns ijcnn1 (B = 500, γ = 2, C = 32); 8 client
   threads (one HTTP connection each) post single-row ``/predict`` back to back for
   ``--seconds``, alone and then while one more client posts ``/learn`` batches of 1,000
   ijcnn1 rows back to back: p50/p99 latency, throughput, learn batches applied.  Before and
   after a change: ``python -m benchmarks compare --before DIR bench_predict --part http``.

Run: ``python -m benchmarks.bench_predict [--part batch|http|all] [--rounds 5]``.
Writes ``benchmarks/results/predict.{json,md}`` (``--part http`` alone: ``predict_http``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import Server, machine, write_results
from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.budgeted._decision import dense_decision, rbf_decision_batch
from svmstream.solvers.budgeted._state import R_SCALE

RAW = dict(scaling="none", shuffle_buffer=0, run_guard=False)  # the service model's stages off


def per_row(est, X):
    """``decision_function`` as it was before: one kernel row per test point (dense pool)."""
    X = est._validate_X(X, reset=False)
    out = np.empty((X.shape[0], est._coef.shape[1]))
    row_buf = np.empty_like(est._row_buf)
    if est._sparse_svs():
        pool = est._pool(np.zeros(est.n_features_in_))
        args = (
            est._sv_sq,
            est._coef,
            est._bias,
            est.n_support_vectors_,
            est.gamma_,
            float(est._reals[R_SCALE]),
        )
        rbf_decision_batch(est._csr_input(X), pool, *args, out, row_buf)
    else:
        args = (est._sv_t, est._sv_sq, est._coef, est._bias, est.n_support_vectors_, est.gamma_)
        rbf_decision_batch(X, *args, float(est._reals[R_SCALE]), out, row_buf)
    return out[:, 0] if out.shape[1] == 1 else out


def blocked_one_thread(est, X):
    X = est._validate_X(X, reset=False)
    out = np.empty((X.shape[0], est._coef.shape[1]))
    args = (est._sv_t, est._sv_sq, est._coef, est._bias, est.n_support_vectors_, est.gamma_)
    dense_decision(X, *args, float(est._reals[R_SCALE]), out, np.empty_like(est._row_buf), threads=1)
    return out[:, 0] if out.shape[1] == 1 else out


def timed(fn, est, X):
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    values = fn(est, X)
    return values, time.perf_counter() - wall, time.process_time() - cpu, load


def batch_part(rounds: int) -> tuple[list[dict], dict]:
    sets = {
        "ijcnn1": dict(
            data=("ijcnn1", True),
            params=dict(budget=500, gamma=2.0, C=32.0),  # the plain estimator: the raw step
        ),
        "letter": dict(
            data=("letter", True),
            params=dict(budget=500, gamma=2.0, C=32.0),  # the plain estimator: the raw step
        ),
        "reuters": dict(
            data=("reuters", False),
            params=dict(budget=500, random_state=0),
        ),
    }
    rows, extra = [], {}
    for name, spec in sets.items():
        data, dense = spec["data"]
        X, y, Xt, yt = datasets.load(data, dense=dense)
        est = BudgetedSGDClassifier(**spec["params"])
        if name == "reuters":
            est.fit(X, y)
        else:  # one pass in file order
            est.set_params(n_samples=X.shape[0]).partial_fit(X, y, classes=np.unique(y))
        paths = {"per-row": per_row, "blocked": lambda e, A: e.decision_function(A)}
        if dense:
            paths = {"per-row": per_row, "blocked, 1 thread": blocked_one_thread, **paths}
        reference = None
        for label, fn in paths.items():  # untimed: JIT, caches, first touch
            values = fn(est, Xt)
            if reference is None:
                reference = values
            scale = np.abs(reference).max()
            extra.setdefault(name, {})[f"max_abs_diff_{label}"] = float(
                np.abs(values - reference).max() / scale
            )
        samples: dict[str, list] = {label: [] for label in paths}
        for _ in range(rounds):
            for label, fn in paths.items():
                samples[label].append(timed(fn, est, Xt)[1:])
        base = samples["per-row"]
        accuracy = 100 * float(np.mean(est.predict(Xt) == yt))
        for label, runs in samples.items():
            walls = [w for w, _, _ in runs]
            cpus = [c for _, c, _ in runs]
            rows.append(
                {
                    "part": "A",
                    "set": name,
                    "rows": Xt.shape[0],
                    "n_sv": int(est.n_support_vectors_),
                    "classes": len(est.classes_),
                    "sv_storage": est.sv_storage_,
                    "path": label,
                    "examples_per_s_wall": Xt.shape[0] / statistics.median(walls),
                    "examples_per_cpu_s": Xt.shape[0] / statistics.median(cpus),
                    "best_wall_examples_per_s": Xt.shape[0] / min(walls),
                    "speedup_wall_median_of_rounds": statistics.median(
                        b[0] / r[0] for b, r in zip(base, runs, strict=True)
                    ),
                    "cpu_ratio_median_of_rounds": statistics.median(
                        b[1] / r[1] for b, r in zip(base, runs, strict=True)
                    ),
                    "load_avg": statistics.median(load for _, _, load in runs),
                    "test_accuracy_%": accuracy,
                }
            )
            print(rows[-1], flush=True)
    return rows, extra


# --------------------------------------------------------------------------- HTTP
class Clients:
    """``n`` threads posting one body to ``path`` back to back, each with its own connection;
    records (start, latency) of every 200 answer and counts the others."""

    def __init__(self, url: str, path: str, body: bytes, n: int):
        import httpx

        self.clients = [httpx.Client(base_url=url, timeout=60) for _ in range(n)]
        self.path, self.body = path, body
        self.samples: list[tuple[float, float]] = []
        self.errors = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in self.clients]

    def _run(self, client) -> None:
        headers = {"content-type": "application/json"}
        while not self._stop.is_set():
            t0 = time.perf_counter()
            r = client.post(self.path, content=self.body, headers=headers)
            dt = time.perf_counter() - t0
            if r.status_code == 200:
                self.samples.append((t0, dt))
            else:
                self.errors += 1

    def start(self) -> Clients:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        for c in self.clients:
            c.close()


def _latency(samples, t0, t1) -> dict:
    ms = np.array([dt for start, dt in samples if t0 <= start < t1]) * 1000
    if ms.size == 0:
        return {"requests": 0}
    return {
        "requests": int(ms.size),
        "requests_per_s": ms.size / (t1 - t0),
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


def http_part(seconds: float, connections: int, rounds: int) -> list[dict]:
    """``rounds`` rounds, a fresh server each (two trees: ``python -m benchmarks compare``)."""
    X, y, Xt, _ = datasets.load("ijcnn1", dense=True)
    rows = []
    for round_no in range(rounds):
        rows += _http_round(X, y.astype(np.int64), Xt, seconds, connections, round_no)
    return rows


def _http_round(X, y, Xt, seconds, connections, round_no) -> list[dict]:
    import httpx
    import orjson

    rows = []
    with tempfile.TemporaryDirectory() as tmp, Server(Path(tmp) / "snap") as server:
        c = httpx.Client(base_url=server.url, timeout=120)
        c.put(
            "/models/m",
            json={
                "algorithm": "bsgd",
                "budget": 500,
                "gamma": 2.0,
                "C": 32.0,
                "n_features": 22,
                "classes": [-1, 1],
                **RAW,
            },
        ).raise_for_status()
        learn_bodies = [
            orjson.dumps(
                {"model": "m", "X": np.ascontiguousarray(X[s : s + 1000]), "y": y[s : s + 1000]},
                option=orjson.OPT_SERIALIZE_NUMPY,
            )
            for s in range(0, X.shape[0] - 999, 1000)
        ]
        for body in learn_bodies[:10]:  # 10,000 examples: the budget is full, merging runs
            c.post("/learn", content=body, headers={"content-type": "application/json"}).raise_for_status()
        predict_body = orjson.dumps(
            {"model": "m", "X": np.ascontiguousarray(Xt[:1])}, option=orjson.OPT_SERIALIZE_NUMPY
        )
        c.post(
            "/predict", content=predict_body, headers={"content-type": "application/json"}
        ).raise_for_status()

        learned = {"batches": 0, "examples": 0}
        stop_learning = threading.Event()

        def learner() -> None:
            with httpx.Client(base_url=server.url, timeout=120) as lc:
                k = 10
                while not stop_learning.is_set():
                    r = lc.post(
                        "/learn",
                        content=learn_bodies[k % len(learn_bodies)],
                        headers={"content-type": "application/json"},
                    )
                    r.raise_for_status()
                    learned["batches"] += 1
                    learned["examples"] += 1000
                    k += 1

        for phase in ("alone", "while learning"):
            learn_thread = None
            if phase == "while learning":
                learn_thread = threading.Thread(target=learner, daemon=True)
                learn_thread.start()
                time.sleep(1.0)
            clients = Clients(server.url, "/predict", predict_body, connections).start()
            time.sleep(1.0)  # connections up
            t0 = time.perf_counter()
            cpu0 = _server_cpu(server)
            before = dict(learned)
            time.sleep(seconds)
            t1 = time.perf_counter()
            cpu1 = _server_cpu(server)
            clients.stop()
            if learn_thread is not None:
                stop_learning.set()
                learn_thread.join()
            rows.append(
                {
                    "part": "B",
                    "round": str(round_no),
                    "phase": phase,
                    "connections": connections,
                    **_latency(clients.samples, t0, t1),
                    "errors": clients.errors,
                    "learn_examples_per_s": (learned["examples"] - before["examples"]) / (t1 - t0),
                    "server_cpu_s_per_s": (cpu1 - cpu0) / (t1 - t0),
                    "load_avg": os.getloadavg()[0],
                }
            )
            print(rows[-1], flush=True)
        c.close()
    return rows


def _http_summary(rows: list[dict]) -> list[dict]:
    """Per phase: the median over rounds of p50, p99 and requests/s."""
    out = []
    for phase in dict.fromkeys(r["phase"] for r in rows):
        group = [r for r in rows if r["phase"] == phase and r.get("requests")]
        out.append(
            {
                "part": "B (median of rounds)",
                "phase": phase,
                "rounds": len(group),
                **{
                    k: statistics.median(r[k] for r in group)
                    for k in ("p50_ms", "p99_ms", "requests_per_s", "learn_examples_per_s", "load_avg")
                },
            }
        )
    return out


def _server_cpu(server) -> float:
    import psutil

    times = psutil.Process(server.proc.pid).cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["batch", "http", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per HTTP phase")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--http-rounds", type=int, default=3)
    parser.add_argument("--name", default=None, help="result file name (default predict / predict_http)")
    args = parser.parse_args()
    datasets.path("ijcnn1")  # fails with a message when the data is absent
    payload: dict = {"machine": machine(), "args": vars(args)}
    rows: list[dict] = []
    if args.part in ("batch", "all"):
        batch_rows, extra = batch_part(args.rounds)
        rows += batch_rows
        payload["agreement_max_rel_diff"] = extra
    if args.part in ("http", "all"):
        http_rows = http_part(args.seconds, args.connections, args.http_rounds)
        rows += http_rows + _http_summary(http_rows)
    payload["rows"] = rows
    payload["load_avg_at_end"] = os.getloadavg()[0]
    name = args.name or ("predict_http" if args.part == "http" else "predict")
    write_results(
        name,
        payload,
        rows,
        "Prediction speed",
        notes=(
            "Part A: decision values of a whole test set, solver only; ratios are medians of "
            "per-round ratios against the per-row path (interleaved rounds). Part B: single-row "
            "/predict from several connections, alone and while another client posts /learn "
            "batches of 1,000 ijcnn1 rows."
        ),
    )


if __name__ == "__main__":
    main()
