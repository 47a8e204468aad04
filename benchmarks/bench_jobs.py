"""Batch jobs over HTTP: predictions keep answering during a DC-SVM job; AVSF models serve /predict.

One real ``svmstream serve`` process (``SVMSTREAM_DATA_DIR`` = the benchmark data), in one run:

A. ``/predict`` latency (100 ijcnn1.t rows per request, one client thread, sequential
   requests) on a BSGD model, first with no job running (the anchor), then while a DC-SVM job
   trains on ijcnn1 (C=32, gamma=2, test ijcnn1.t) in its worker process; the job's progress
   is polled every 0.25 s.  The result model is then scored on ijcnn1.t through ``/predict``
   and must reproduce the worker's test accuracy.  Also the early-prediction job (level 3,
   64 clusters).
B. Cancel latency: DC-SVM jobs on ijcnn1 cancelled (``DELETE /jobs/{id}``) during kernel
   k-means, during a level and during the refine/global solve.
C. Linear jobs on a9a (``n_features=123``, C=1): AVSF and LIBLINEAR-CD, each result scored on
   a9a.t through ``/predict`` (sparse rows).

Run: ``python -m benchmarks.bench_jobs`` (``--quick``: no early job, one cancel).
Writes ``benchmarks/results/jobs.json`` and ``jobs.md``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import Server, data_dir, machine, write_results

PREDICT_ROWS = 100


def _pct(values, q) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def _latency_row(name: str, lat: list[float], seconds: float, anchor: dict | None = None) -> dict:
    ms = np.asarray(lat) * 1000
    row = {
        "part": "A",
        "measurement": name,
        "requests": len(ms),
        "seconds": seconds,
        "requests_per_s": len(ms) / seconds if seconds else None,
        "p50_ms": _pct(ms, 50),
        "p90_ms": _pct(ms, 90),
        "p99_ms": _pct(ms, 99),
        "max_ms": float(ms.max()),
    }
    if anchor is not None:
        row["p50_vs_no_job"] = row["p50_ms"] / anchor["p50_ms"]
        row["p99_vs_no_job"] = row["p99_ms"] / anchor["p99_ms"]
    return row


class Hammer:
    """A client thread that POSTs the same /predict body back to back and records each
    request's latency (bounded by ``max_requests``)."""

    def __init__(self, url: str, body: bytes, max_requests: int = 200_000):
        import httpx

        self.client = httpx.Client(base_url=url, timeout=30)
        self.body = body
        self.max_requests = max_requests
        self.samples: list[tuple[float, float]] = []  # (start time, latency)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        headers = {"content-type": "application/json"}
        while not self._stop.is_set() and len(self.samples) < self.max_requests:
            t0 = time.perf_counter()
            r = self.client.post("/predict", content=self.body, headers=headers)
            dt = time.perf_counter() - t0
            if r.status_code != 200:
                self.errors += 1
            self.samples.append((t0, dt))

    def start(self) -> Hammer:
        self._thread.start()
        return self

    def between(self, t_start: float, t_end: float) -> list[float]:
        return [dt for t0, dt in list(self.samples) if t_start <= t0 < t_end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()


def _submit(client, body: dict) -> str:
    """POST /jobs (raises on an error status); the job's id."""
    r = client.post("/jobs", json=body)
    r.raise_for_status()
    return r.json()["id"]


# the DC-SVM job of part A on ijcnn1 (also with an early level)
IJCNN1_DCSVM = {
    "algorithm": "dcsvm",
    "data": datasets.SETS["ijcnn1"].train,
    "test": datasets.SETS["ijcnn1"].test,
    "params": {"C": 32, "gamma": 2},
}


def _wait(client, job_id: str, poll: float = 0.25, until=None, timeout: float = 1800.0):
    """Poll a job; returns ``(job, polls)`` with ``polls`` = [(t, state, phase, stage, level)]."""
    polls = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        job = client.get(f"/jobs/{job_id}").json()
        p = job["progress"]
        polls.append(
            (
                time.perf_counter() - t0,
                job["state"],
                p.get("phase"),
                p.get("stage"),
                p.get("level"),
                p.get("objective"),
                p.get("max_violation"),
            )
        )
        if job["state"] in ("succeeded", "failed", "cancelled") or (until is not None and until(job)):
            return job, polls
        time.sleep(poll)
    raise TimeoutError(job_id)


def _score(client, model: str, X, y, batch: int = 1000, sparse: bool = False) -> tuple[float, float]:
    """Accuracy of ``model`` on (X, y) through /predict, and the seconds it took."""
    import orjson

    t0 = time.perf_counter()
    correct = 0
    for s in range(0, X.shape[0], batch):
        part = X[s : s + batch]
        if sparse:
            rows = [
                dict(
                    zip(
                        map(str, part.indices[part.indptr[i] : part.indptr[i + 1]].tolist()),
                        part.data[part.indptr[i] : part.indptr[i + 1]].tolist(),
                    )
                )
                for i in range(part.shape[0])
            ]
        else:
            rows = np.ascontiguousarray(part.toarray())
        body = orjson.dumps(
            {"model": model, "X": rows, "n_features": int(X.shape[1])}, option=orjson.OPT_SERIALIZE_NUMPY
        )
        r = client.post("/predict", content=body, headers={"content-type": "application/json"})
        r.raise_for_status()
        correct += int(np.sum(np.asarray(r.json()["labels"], dtype=np.float64) == y[s : s + batch]))
    return correct / X.shape[0], time.perf_counter() - t0


def _job_row(job: dict, wall: float, data: str, service_acc: float | None, score_s: float | None) -> dict:
    res = job["result"] or {}
    return {
        "part": "C jobs" if job["algorithm"] != "dcsvm" else "A result",
        "measurement": f"{job['algorithm']} job",
        "data": data,
        "early_level": job["early_level"],
        "state": job["state"],
        "submit_to_done_s": wall,
        "worker_start_s": next((e["start_s"] for e in job["timeline"] if e["stage"] == "loading"), None),
        "train_s": res.get("train_seconds"),
        "load_s": res.get("load_seconds"),
        "n_sv": res.get("n_sv"),
        "dual_objective": (res.get("dual_objective") or [None])[0],
        "test_acc_worker_pct": None if res.get("test_accuracy") is None else 100 * res["test_accuracy"],
        "test_acc_via_predict_pct": None if service_acc is None else 100 * service_acc,
        "predict_test_set_s": score_s,
        "peak_rss_worker_mb": res.get("peak_rss_mb"),
        "peak_rss_pool_mb": res.get("peak_rss_children_mb"),
    }


def main(argv=None) -> int:
    import httpx
    import orjson

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="no early-prediction job, one cancel")
    parser.add_argument(
        "--baseline-s", type=float, default=10.0, help="seconds of /predict with no job (anchor)"
    )
    args = parser.parse_args(argv)

    Xij, yij, Xijt, yijt = datasets.load("ijcnn1")  # exits with a clear message when missing
    Xa, ya, Xat, yat = datasets.load("a9a")

    rows: list[dict] = []
    payload: dict = {
        "machine": machine(),
        "command": "python -m benchmarks.bench_jobs" + (" --quick" if args.quick else ""),
        "predict_rows_per_request": PREDICT_ROWS,
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench_jobs_"))
    env = {
        "SVMSTREAM_DATA_DIR": str(data_dir()),
        "SVMSTREAM_JOBS_DIR": str(tmp / "jobs"),
        "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
    }
    with Server(tmp / "snap", env=env) as server:
        payload["server_settings"] = {
            "max_concurrent_jobs": 1,
            "job_start_method": "forkserver",
            "job_cancel_grace_s": 0.5,
            "dcsvm_n_jobs": "all cores (default)",
            "cores": os.cpu_count(),
        }
        c = httpx.Client(base_url=server.url, timeout=600)
        # ------------------------------------------------------------- a model to hammer
        c.put(
            "/models/hammer",
            json={
                "algorithm": "bsgd",
                "budget": 500,
                "gamma": 2.0,
                "C": 32.0,
                "n_features": 22,
                "classes": [-1, 1],
                "n_samples": 10_000,
            },
        ).raise_for_status()
        for s in range(0, 10_000, 1000):
            body = orjson.dumps(
                {
                    "model": "hammer",
                    "X": np.ascontiguousarray(Xij[s : s + 1000].toarray()),
                    "y": yij[s : s + 1000].astype(np.int64),
                },
                option=orjson.OPT_SERIALIZE_NUMPY,
            )
            c.post("/learn", content=body, headers={"content-type": "application/json"}).raise_for_status()
        predict_body = orjson.dumps(
            {"model": "hammer", "X": np.ascontiguousarray(Xijt[:PREDICT_ROWS].toarray())},
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
        hammer = Hammer(server.url, predict_body).start()
        time.sleep(1.0)  # connection set up, first requests
        t_base = time.perf_counter()
        time.sleep(args.baseline_s)
        anchor = _latency_row(
            "/predict, no job running (anchor)",
            hammer.between(t_base, time.perf_counter()),
            time.perf_counter() - t_base,
        )
        rows.append(anchor)

        # ------------------------------------------------------------- A: DC-SVM job under load
        t_sub = time.perf_counter()
        job, polls = _wait(c, _submit(c, {**IJCNN1_DCSVM, "model": "ijcnn1-dcsvm"}))
        t_done = time.perf_counter()
        during = hammer.between(t_sub, t_done)
        hammer.stop()
        rows.append(_latency_row("/predict while the DC-SVM job runs", during, t_done - t_sub, anchor))
        # the training phase alone (worker start and data loading excluded)
        started = next((p[0] for p in polls if p[2] == "training"), None)
        ended = next((p[0] for p in polls if p[2] in ("testing", "saving", "done")), None)
        if started is not None and ended is not None:
            rows.append(
                _latency_row(
                    "/predict during the training phase only",
                    hammer.between(t_sub + started, t_sub + ended),
                    ended - started,
                    anchor,
                )
            )
        payload["hammer_errors"] = hammer.errors
        if job["state"] != "succeeded":
            raise SystemExit(f"DC-SVM job {job['state']}: {job['error']}")
        acc, score_s = _score(c, "ijcnn1-dcsvm", Xijt, yijt)
        rows.append(_job_row(job, t_done - t_sub, "ijcnn1", acc, score_s))
        seen = sorted({(p[3], p[4]) for p in polls if p[2] == "training" and p[3]}, key=str)
        payload["dcsvm_job"] = {"job": job, "polls": polls, "distinct_stages_seen_by_polling": seen}
        for e in job["timeline"]:
            rows.append(
                {
                    "part": "A timeline",
                    "stage": e["stage"],
                    "level": e.get("level"),
                    "n_clusters": e.get("n_clusters"),
                    "start_s": e["start_s"],
                    "last_s": e["last_s"],
                    "subproblems": e.get("subproblems"),
                    "iterations": e.get("iterations"),
                    "objective": e.get("objective"),
                    "max_violation": e.get("max_violation"),
                }
            )

        if not args.quick:
            t0 = time.perf_counter()
            early, _ = _wait(c, _submit(c, {**IJCNN1_DCSVM, "early_level": 3, "model": "ijcnn1-early"}))
            wall = time.perf_counter() - t0
            acc_e, score_e = (
                _score(c, "ijcnn1-early", Xijt, yijt) if early["state"] == "succeeded" else (None, None)
            )
            rows.append(_job_row(early, wall, "ijcnn1", acc_e, score_e))
            payload["dcsvm_early_job"] = early

        # ------------------------------------------------------------- B: cancel latency
        targets = [
            ("kmeans", "during kernel k-means (level 4)"),
            ("level", "during a level's sub-problems"),
            ("global", "during the refine/global solve"),
        ]
        if args.quick:
            targets = targets[1:2]
        cancels = []
        for stage, label in targets:
            body = {
                "algorithm": "dcsvm",
                "data": datasets.SETS["ijcnn1"].train,
                "params": {"C": 32, "gamma": 2},
            }
            jid = _submit(c, {**body, "model": "ijcnn1-cancelled", "replace": True})

            def reached(j, stage=stage):
                p = j["progress"]
                return p.get("phase") == "training" and (
                    p.get("stage") == stage or (stage == "global" and p.get("stage") == "refine")
                )

            job_c, _ = _wait(c, jid, poll=0.05, until=reached)
            at = (job_c["progress"].get("stage"), job_c["progress"].get("level"))
            t0 = time.perf_counter()
            done = c.delete(f"/jobs/{jid}").json()
            wall = time.perf_counter() - t0
            cancel = done.get("cancel") or {}
            cancels.append(done)
            rows.append(
                {
                    "part": "B",
                    "cancelled": label,
                    "at_stage": f"{at[0]} (level {at[1]})",
                    "state": done["state"],
                    "DELETE_round_trip_s": wall,
                    "stopped_after_s": cancel.get("stopped_after_s"),
                    "solver_raised_cancelled_after_s": cancel.get("solver_stopped_after_s"),
                    "killed_after_grace": cancel.get("killed"),
                }
            )
        payload["cancels"] = cancels

        # ------------------------------------------------------------- C: linear jobs (a9a)
        for algorithm in ("avsf", "liblinear-cd"):
            t0 = time.perf_counter()
            body = {
                "algorithm": algorithm,
                "data": datasets.SETS["a9a"].train,
                "test": datasets.SETS["a9a"].test,
                "params": {"C": 1.0, "tol": 0.001, "random_state": 0},
                "model": f"a9a-{algorithm}",
            }
            lj, _ = _wait(c, _submit(c, body), poll=0.1)
            wall = time.perf_counter() - t0
            acc_l, score_l = (
                _score(c, f"a9a-{algorithm}", Xat, yat, sparse=True)
                if lj["state"] == "succeeded"
                else (None, None)
            )
            row = _job_row(lj, wall, "a9a", acc_l, score_l)
            res = lj["result"] or {}
            row["n_steps"] = (res.get("n_steps") or [None])[0]
            rows.append(row)
            payload[f"{algorithm}_job"] = lj
        # predict latency of the linear model (100 a9a.t rows per request, sparse)
        part = Xat[:PREDICT_ROWS]
        body = orjson.dumps(
            {
                "model": "a9a-avsf",
                "n_features": 123,
                "X": [
                    dict(
                        zip(
                            map(str, part.indices[part.indptr[i] : part.indptr[i + 1]].tolist()),
                            part.data[part.indptr[i] : part.indptr[i + 1]].tolist(),
                        )
                    )
                    for i in range(part.shape[0])
                ],
            }
        )
        lat = []
        for _ in range(300):
            t0 = time.perf_counter()
            c.post("/predict", content=body, headers={"content-type": "application/json"}).raise_for_status()
            lat.append(time.perf_counter() - t0)
        row = _latency_row(
            "/predict on the AVSF model (100 sparse a9a.t rows), no job", lat, float(np.sum(lat))
        )
        row["part"] = "C latency"
        rows.append(row)
        payload["server_rss_mb_at_end"] = server.rss_mb()
        c.close()

    payload["rows"] = rows
    exact = next(r for r in rows if r.get("measurement") == "dcsvm job" and not r.get("early_level"))
    during = next(r for r in rows if r.get("measurement", "").startswith("/predict while"))
    notes = (
        f"Command: `{payload['command']}` (data from `$SVMSTREAM_DATA`, server `SVMSTREAM_DATA_DIR` = that folder).\n\n"
        f"Acceptance: predictions kept answering during the DC-SVM job "
        f"({during['requests']:,} requests, p50 {during['p50_ms']:.1f} ms, p99 {during['p99_ms']:.1f} ms; "
        f"{payload['hammer_errors']} errors); progress seen by polling: "
        f"{len(payload['dcsvm_job']['distinct_stages_seen_by_polling'])} distinct (stage, level) pairs; result model "
        f"accuracy on ijcnn1.t {exact['test_acc_via_predict_pct']:.2f}% through /predict; cancel latency in part B. "
        f"The AVSF model predicts a9a.t through /predict (part C).\n\n"
        "Part A's latency rows share one client thread sending 100-row requests back to back; the DC-SVM job "
        "uses a process pool on all cores (the machine has 2), so the server competes with it for CPU."
    )
    write_results(
        "jobs", payload, rows, "Batch jobs over HTTP: DC-SVM and AVSF in worker processes", notes=notes
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
