"""Wide sparse data through the real service.

For reuters (8,315 features, binary) and sector (55,197 features, 105 classes), one pass,
shuffled (replay's default order, seed 0), streamed through a real ``redis-server`` into a
real ``svmstream serve`` by ``svmstream replay --redis --url --wait --test`` (which creates
the model over HTTP, produces the stream, waits until the service applied it, flushes the
shuffle buffer and scores the test file through ``/predict``):

A. RBF models with B = 500 and no other setting (``sv_storage`` "auto"): service RSS growth
   (peak during learning, and after, minus before the model was created), the median and
   99th percentile of the time a publication took (``metrics.publish_ms_p50``/``_p99`` of
   ``GET /models/{name}``), snapshot size against the SVs' nonzeros × 12 bytes, examples/s
   (wall, replay start to all applied) and service CPU seconds, test accuracy.
B. ``kernel="linear"`` models with no other setting, the same way.
C. Anchors in this process on the same split: scikit-learn ``LinearSVC()`` and ``SVC()``
   (fit CPU seconds and test accuracy).
D. Solver-only throughput of ``StreamingClassifier(PegasosClassifier())`` on reuters: examples
   per CPU second of ``partial_fit`` in batches of 1,000 after one untimed run (numba's
   compilation excluded; its first-call cost is reported separately).

Usage: ``python -m benchmarks.bench_sparse [--sets reuters,sector] [--parts ABCD]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import REPO, RedisServer, Server, child_pythonpath, machine, write_results

SETS = ("reuters", "sector")


def _load(name):
    X, y, Xt, yt = datasets.load(name)
    return _int32(X), y, _int32(Xt), yt


def _int32(X):
    """CSR with int32 indices (LinearSVC refuses int64 ones)."""
    X = X.tocsr()
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


class _RssSampler(threading.Thread):
    """Peak RSS (MB) of a process, sampled every 0.1 s until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss / 2**20)
            except Exception:
                return
            time.sleep(0.1)


def _service_cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _snapshot_figures(snap_dir: Path, model: str) -> dict:
    """Size of the newest snapshot of ``model`` and the nonzeros of its SVs."""
    import scipy.sparse as sp

    from svmstream.app.models.snapshots import SnapshotStore

    store = SnapshotStore(snap_dir, keep=3)
    files = store.files(model)
    if not files:
        return {"snapshot_bytes": None}
    path = files[0][1]  # newest first
    restored = store.read(path)
    est = restored.estimator
    out = {"snapshot_bytes": path.stat().st_size}
    if getattr(est, "kernel", "rbf") == "linear":
        coef = est.coef_
        out["weights_nonzeros"] = int(np.count_nonzero(coef))
        return out
    sv = est.support_vectors_
    nnz = int(sv.nnz) if sp.issparse(sv) else int(np.count_nonzero(sv))
    out.update(sv_nonzeros=nnz, sv_storage=getattr(est, "sv_storage_", "dense"), n_sv=int(sv.shape[0]))
    out["snapshot_over_sv_nnz_x12"] = out["snapshot_bytes"] / max(1, 12 * nnz)
    return out


def run_service(name: str, hyper: list[str], tmp: Path) -> dict:
    """One model through Redis into a fresh service; the figures of part A / B."""
    import httpx

    train, test = datasets.path(name), datasets.path(name, "test")
    rs = RedisServer(tmp / f"redis-{name}", fsync="everysec").start()
    snap = tmp / f"snap-{name}-{'-'.join(hyper) or 'default'}"
    env = {
        "SVMSTREAM_REDIS_URL": rs.url,
        "SVMSTREAM_SNAPSHOT_INTERVAL_S": "1",
        "SVMSTREAM_LOG_LEVEL": "warning",
    }
    try:
        with Server(snap, env=env, clean_env=True, log=tmp / f"serve-{name}.log", log_level=None) as svc:
            http = httpx.Client(base_url=svc.url, timeout=300)
            time.sleep(1.0)
            rss_before = svc.rss_mb()
            sampler = _RssSampler(svc.proc.pid)
            sampler.start()
            cpu0 = _service_cpu(svc.proc.pid)
            started = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "svmstream.app.cli.main",
                    "replay",
                    str(train),
                    "--redis",
                    rs.url,
                    "--url",
                    svc.url,
                    "--wait",
                    "--test",
                    str(test),
                    "--model",
                    name,
                    "--budget",
                    "500",
                    *hyper,
                    "--no-progress",
                    "--json",
                ],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": child_pythonpath()},
                capture_output=True,
                text=True,
                timeout=3600,
            )
            wall = time.perf_counter() - started
            cpu = _service_cpu(svc.proc.pid) - cpu0
            if proc.returncode != 0:
                raise RuntimeError(f"replay failed: {proc.stderr[-2000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            time.sleep(3.0)  # a snapshot of the flushed model (interval 1 s)
            sampler.stop.set()
            info = http.get(f"/models/{name}").json()
            rss_after = svc.rss_mb()
            metrics = info.get("metrics", {})
            out = {
                "set": name,
                "model": " ".join(hyper) or "rbf, B = 500, no other setting",
                "examples": result.get("examples"),
                "test_accuracy_%": 100 * result["test_accuracy"],
                "examples_per_s_wall": result.get("examples", 0) / wall,
                "service_cpu_s": cpu,
                "rss_before_mb": rss_before,
                "rss_growth_peak_mb": sampler.peak - rss_before,
                "rss_growth_after_mb": rss_after - rss_before,
                "publish_ms_p50": metrics.get("publish_ms_p50"),
                "publish_ms_p99": metrics.get("publish_ms_p99"),
                "n_support_vectors": info.get("n_support_vectors"),
                "version": info.get("version"),
                "sv_storage": (info.get("statistics") or {}).get("sv_storage"),
            }
            out.update(_snapshot_figures(snap, name))
            http.close()
            return out
    finally:
        rs.stop()


def anchors(name: str) -> list[dict]:
    from sklearn.svm import SVC, LinearSVC

    X, y, Xt, yt = _load(name)
    rows = []
    for label, est in (("LinearSVC()", LinearSVC()), ("SVC()", SVC())):
        t0 = time.process_time()
        est.fit(X, y)
        cpu = time.process_time() - t0
        acc = 100 * float(np.mean(est.predict(Xt) == yt))
        rows.append({"set": name, "model": label, "fit_cpu_s": cpu, "test_accuracy_%": acc})
    return rows


def solver_linear(name: str) -> dict:
    from svmstream.solvers import PegasosClassifier, StreamingClassifier

    X, y, _, _ = _load(name)
    classes = np.unique(y)
    order = np.random.default_rng(0).permutation(X.shape[0])
    X, y = X[order], y[order]

    def run():
        est = StreamingClassifier(PegasosClassifier(random_state=0))  # the service's linear model
        t0 = time.process_time()
        for start in range(0, X.shape[0], 1000):
            est.partial_fit(X[start : start + 1000], y[start : start + 1000], classes=classes)
        est.flush()
        return time.process_time() - t0

    first = run()  # numba's cache load or compile
    times = [run() for _ in range(5)]
    return {
        "set": name,
        "model": "kernel=linear, solver only (partial_fit batches of 1,000 + flush)",
        "examples_per_cpu_s": X.shape[0] / float(np.median(times)),
        "first_run_cpu_s": first,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="reuters,sector")
    parser.add_argument("--parts", default="ABCD")
    args = parser.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    payload: dict = {"machine": machine(), "rows": []}
    rows = payload["rows"]
    with tempfile.TemporaryDirectory(prefix="bench-sparse-") as tmpdir:
        tmp = Path(tmpdir)
        for name in sets:
            if "A" in args.parts:
                rows.append({"part": "A", **run_service(name, [], tmp)})
                print(rows[-1], flush=True)
            if "B" in args.parts:
                rows.append({"part": "B", **run_service(name, ["--kernel", "linear"], tmp)})
                print(rows[-1], flush=True)
            if "C" in args.parts:
                for row in anchors(name):
                    rows.append({"part": "C", **row})
                    print(rows[-1], flush=True)
            if "D" in args.parts and name == "reuters":
                rows.append({"part": "D", **solver_linear(name)})
                print(rows[-1], flush=True)
    payload["load_avg_at_end"] = os.getloadavg()[0]
    write_results(
        "sparse",
        payload,
        rows,
        "Wide sparse data through Redis into the service",
        notes="One pass, shuffled (seed 0), `svmstream replay --redis --url --wait --test`; RSS growth = the "
        "service's RSS (peak while learning / after) minus its RSS before the model was created; publish = "
        "the time to make a view's copy after a batch (median / p99 of the last 256); snapshot/SV nnz×12 = "
        "snapshot bytes over the SVs' nonzeros × 12 bytes.",
    )


if __name__ == "__main__":
    main()
