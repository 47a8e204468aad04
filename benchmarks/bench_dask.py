"""Benchmark: DC-SVM and search jobs on a dask cluster against the local pool.

Run from the repository root::

    python -m benchmarks.bench_dask --skin          # ijcnn1, a9a search and skin_nonskin
    python -m benchmarks.bench_dask --parts ijcnn1  # one part

Parts (one ``distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1)``,
started before the timers; its start-up time is reported separately):

* ``ijcnn1``: ``DCSVMClassifier(C=32, gamma=2, random_state=0)`` exact (4 levels), once with
  the local process pool (``n_jobs`` = the 2 cores) and twice inside
  ``joblib.parallel_backend("dask")`` (the cluster: the first fit includes the workers'
  one-time load of the numba kernels, the second runs on warm workers).  Reported: train wall and CPU seconds
  (user + system of this process, its reaped children -- the pool workers -- and its live
  descendants -- the dask nannies and workers), test accuracy, dual objective and the relative
  difference of the two objectives (target <= 1e-6), peak RSS of every process.
* ``a9a``: a search job (``"algorithm": "search"``, ``bsgd``, 3 x 3 grid over C and gamma,
  3 folds) through a real ``svmstream serve`` with ``SVMSTREAM_DASK_ADDRESS`` set, against
  plain ``GridSearchCV(n_jobs=2)`` on the same rows, base parameters and folds: chosen
  parameters (must be equal), best score, wall seconds; the served best model answers
  ``/predict`` on the test file.
* ``skin`` (``--skin``): skin_nonskin (245,057 rows, features / 255, its 80/20 split of
  ``benchmarks.datasets``; C=10, gamma=10): DC-SVM early (level 3) and exact through the cluster (and exact
  with the local pool for reference), ``SVC`` on a 50,000-row sample of the training part;
  train seconds, accuracy, peak RSS of every process.

The machine is shared (2 cores, other engineers' jobs): the load averages before and after
every row are recorded next to its figures.

Writes ``benchmarks/results/dask.json`` and ``benchmarks/results/dask.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import RESULTS, Server, data_dir, machine, write_results

ROLES: dict[int, str] = {}
"""pid -> role of the cluster's processes (filled once the cluster runs)."""

IJCNN1 = dict(C=32.0, gamma=2.0, random_state=0)
A9A_GRID = {"C": [1.0, 8.0, 64.0], "gamma": [2.0**-9, 2.0**-7, 2.0**-5]}


class ProcessMeter:
    """CPU seconds and per-process peak RSS of this process and all its descendants.

    CPU = user + system of this process + of its reaped children (``RUSAGE_CHILDREN``: the
    pool workers) + of its live descendants (psutil: the dask nannies and workers).  Peak
    RSS is sampled every ``interval`` seconds per process, keyed by pid with a role name.
    """

    def __init__(self, interval: float = 0.05):
        import psutil

        self.ps = psutil
        self.me = psutil.Process()
        self.interval = interval
        self.peaks: dict[int, dict] = {}
        self._stop = threading.Event()

    def cpu(self) -> float:
        a = resource.getrusage(resource.RUSAGE_SELF)
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
        for p in self.me.children(recursive=True):
            with contextlib.suppress(self.ps.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def _role(self, p) -> str:
        if p.pid == self.me.pid:
            return "benchmark (driver: k-means, global solve)"
        if p.pid in ROLES:
            return ROLES[p.pid]
        try:
            cmd = " ".join(p.cmdline())
            parent = p.parent()
        except self.ps.Error:
            return "?"
        if "svmstream.app.cli.main" in cmd and "serve" in cmd:
            return "svmstream serve"
        if "resource_tracker" in cmd:
            return "multiprocessing resource tracker"
        if parent is not None and parent.pid == self.me.pid:
            return "local pool worker"  # forked from the driver
        if parent is not None and ROLES.get(parent.pid) == "svmstream serve":
            return "job worker process"
        return "process " + cmd[:60]

    def _sample(self) -> None:
        for p in [self.me, *self.me.children(recursive=True)]:
            try:
                rss = p.memory_info().rss
            except self.ps.Error:
                continue
            rec = self.peaks.get(p.pid)
            if rec is None:
                rec = self.peaks[p.pid] = {"pid": p.pid, "role": self._role(p), "peak_rss_mb": 0.0}
            rec["peak_rss_mb"] = max(rec["peak_rss_mb"], rss / 2**20)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self.load_before = [round(v, 2) for v in os.getloadavg()]
        self.cpu0 = self.cpu()
        self.t0 = time.perf_counter()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.cpu_s = self.cpu() - self.cpu0
        self._stop.set()
        self._t.join()
        self._sample()
        self.load_after = [round(v, 2) for v in os.getloadavg()]

    def record(self) -> dict:
        procs = sorted(self.peaks.values(), key=lambda r: -r["peak_rss_mb"])
        return {
            "wall_s": self.wall,
            "cpu_s": self.cpu_s,
            "load_before": self.load_before,
            "load_after": self.load_after,
            "processes": procs,
            "peak_rss_sum_mb": sum(r["peak_rss_mb"] for r in procs),
        }


def _warm_numba() -> None:
    from svmstream.solvers import DCSVMClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    DCSVMClassifier(n_levels=1, n_jobs=1).fit(X, X[:, 0] > 0)


def _dcsvm_row(name, X, y, Xt, yt, params, backend) -> tuple[dict, object]:
    import joblib

    from svmstream.solvers import DCSVMClassifier

    est = DCSVMClassifier(**params)
    ctx = joblib.parallel_backend("dask") if backend == "dask" else contextlib.nullcontext()
    with ProcessMeter() as meter, ctx:
        est.fit(X, y)
    t = time.perf_counter()
    acc = float(np.mean(est.predict(Xt) == yt))
    rec = {
        "row": name,
        **meter.record(),
        "predict_s": time.perf_counter() - t,
        "test_accuracy": acc,
        "dual_objective": float(est.dual_objective_[0]),
        "n_sv": int(len(est.support_)) if est.early_models_ is None else None,
        "mode": "exact" if est.early_models_ is None else f"early (level {params.get('early_level')})",
    }
    print(json.dumps({k: v for k, v in rec.items() if k != "processes"}), flush=True)
    return rec, est


def part_ijcnn1(client) -> list[dict]:
    X, y, Xt, yt = datasets.load("ijcnn1", dense=True)
    _warm_numba()
    local, _ = _dcsvm_row("local pool (n_jobs=2)", X, y, Xt, yt, {**IJCNN1, "n_jobs": 2}, "local")
    out = [{"part": "ijcnn1", **local}]
    # first fit: the workers load the numba kernels (once per process); second: warm workers
    for name in ("dask LocalCluster (2 workers), first fit", "dask LocalCluster (2 workers), warm workers"):
        dask, _ = _dcsvm_row(name, X, y, Xt, yt, IJCNN1, "dask")
        rel = abs(dask["dual_objective"] - local["dual_objective"]) / abs(local["dual_objective"])
        dask["rel_objective_diff"] = rel
        dask["objective_equal_1e-6"] = rel <= 1e-6
        dask["accuracy_equal"] = dask["test_accuracy"] == local["test_accuracy"]
        out.append({"part": "ijcnn1", **dask})
    return out


def part_a9a(cluster_address: str) -> list[dict]:
    import httpx
    from sklearn.model_selection import GridSearchCV

    from svmstream.app.jobs.datasets import prepare_X
    from svmstream.app.jobs.search import folds, make_base

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "SVMSTREAM_DATA_DIR": str(data_dir()),
            "SVMSTREAM_JOBS_DIR": str(Path(tmp) / "jobs"),
            "SVMSTREAM_DASK_ADDRESS": cluster_address,
            "SVMSTREAM_WARM_UP": "false",
            "SVMSTREAM_CREATE_DEFAULT_MODEL": "false",
        }
        with (
            Server(Path(tmp) / "snap", env=env, clean_env=True) as srv,
            httpx.Client(base_url=srv.url, timeout=120) as c,
        ):
            ROLES[srv.proc.pid] = "svmstream serve"
            body = {
                "algorithm": "search",
                "estimator": "bsgd",
                "grid": A9A_GRID,
                "cv": 3,
                "data": datasets.SETS["a9a"].train,
                "model": "a9a-best",
            }
            with ProcessMeter() as meter:
                r = c.post("/jobs", json=body)
                r.raise_for_status()
                job_id = r.json()["id"]
                while True:
                    job = c.get(f"/jobs/{job_id}").json()
                    if job["state"] in ("succeeded", "failed", "cancelled"):
                        break
                    time.sleep(0.5)
            if job["state"] != "succeeded":
                sys.exit(f"search job {job['state']}: {job['error']}")
            search = job["result"]["search"]
            _, _, Xt, yt = datasets.load("a9a")
            Xt = Xt.toarray()[:4000]
            r = c.post("/predict", json={"model": "a9a-best", "X": Xt.tolist()})
            r.raise_for_status()
            served_acc = float(np.mean(np.asarray(r.json()["labels"], dtype=float) == yt[:4000]))
            rows.append(
                {
                    "part": "a9a",
                    "row": "search job on the dask cluster (2 workers)",
                    **meter.record(),
                    "search_s": job["result"]["train_seconds"],
                    "best_params": json.dumps(search["best_params"]),
                    "best_score": search["best_score"],
                    "served_test_accuracy_4000": served_acc,
                    "base_params": search["base_params"],
                }
            )
    X, y, _, _ = datasets.load("a9a")
    _, y_idx = np.unique(y, return_inverse=True)
    Xf = prepare_X(X)
    plain = GridSearchCV(make_base("bsgd", rows[0]["base_params"]), A9A_GRID, cv=folds(3, 0), n_jobs=2)
    with ProcessMeter() as meter:
        plain.fit(Xf, y_idx)
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # its idle workers would count in later rows
    rows.append(
        {
            "part": "a9a",
            "row": "plain GridSearchCV (n_jobs=2, loky)",
            **meter.record(),
            "search_s": meter.wall,
            "best_params": json.dumps(plain.best_params_),
            "best_score": float(plain.best_score_),
        }
    )
    rows[0]["same_params"] = json.loads(rows[0]["best_params"]) == plain.best_params_
    return rows


def part_skin(client) -> list[dict]:
    from sklearn.svm import SVC

    X, y, Xt, yt = datasets.load("skin_nonskin", order="shuffled", dense=True)  # its one 80/20 split
    X, Xt = X / 255.0, Xt / 255.0
    params = dict(C=SKIN["C"], gamma=SKIN["gamma"], random_state=0)
    rows = []
    _warm_numba()
    for name, extra, backend in (
        ("DC-SVM early (level 3), dask", {"early_level": 3}, "dask"),
        ("DC-SVM exact, dask", {}, "dask"),
        ("DC-SVM exact, local pool (reference)", {"n_jobs": 2}, "local"),
    ):
        rec, _ = _dcsvm_row(name, X, y, Xt, yt, {**params, **extra}, backend)
        rows.append({"part": "skin", **rec})
    sample = np.random.default_rng(0).choice(X.shape[0], 50_000, replace=False)
    svc = SVC(C=SKIN["C"], gamma=SKIN["gamma"], cache_size=200)
    with ProcessMeter() as meter:
        svc.fit(X[sample], y[sample])
    t = time.perf_counter()
    acc = float(np.mean(svc.predict(Xt) == yt))
    rows.append(
        {
            "part": "skin",
            "row": "SVC on a 50,000-row sample",
            **meter.record(),
            "predict_s": time.perf_counter() - t,
            "test_accuracy": acc,
            "n_sv": int(svc.n_support_.sum()),
        }
    )
    return rows


SKIN = {"C": 10.0, "gamma": 10.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="ijcnn1,a9a", help="comma-separated: ijcnn1, a9a, skin")
    ap.add_argument("--skin", action="store_true", help="also the skin_nonskin part")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p] + (["skin"] if args.skin else [])
    from distributed import Client, LocalCluster

    meta = {"machine": machine(), "loadavg_start": [round(v, 2) for v in os.getloadavg()]}
    t = time.perf_counter()
    rows: list[dict] = []
    with (
        LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        meta["cluster_start_s"] = time.perf_counter() - t
        for pid in client.run(os.getpid).values():
            ROLES[pid] = "dask worker"
        for pid in client.run(os.getppid).values():
            ROLES[pid] = "dask nanny"
        previous = RESULTS / "dask.json"
        if previous.exists() and set(parts) != {"ijcnn1", "a9a", "skin"}:
            # keep the parts not rerun from the last run
            old = json.loads(previous.read_text())
            rows = [r for r in old.get("rows", []) if r.get("part") not in parts]
        for part in parts:
            if part == "ijcnn1":
                rows += part_ijcnn1(client)
            elif part == "a9a":
                rows += part_a9a(cluster.scheduler_address)
            elif part == "skin":
                rows += part_skin(client)
            else:
                sys.exit(f"unknown part {part!r}")
    meta["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    order = {"ijcnn1": 0, "a9a": 1, "skin": 2}
    rows.sort(key=lambda r: order.get(r["part"], 9))
    table = []
    for r in rows:
        row = {k: v for k, v in r.items() if k not in ("processes", "base_params")}
        row["processes (peak RSS MB)"] = "; ".join(
            f"{p['role']} {p['pid']}: {p['peak_rss_mb']:.0f}" for p in r.get("processes", [])
        )
        table.append(row)
    notes = (
        f"LocalCluster(n_workers=2, processes=True, threads_per_worker=1) started in "
        f"{meta['cluster_start_s']:.1f} s (not in the timers). Load average at start "
        f"{meta['loadavg_start']}, at the end {meta['loadavg_end']}; per row in load_before/after. "
        "CPU s = this process + reaped children (pool workers) + live descendants (dask nannies "
        "and workers, the server). The machine has 2 cores shared with other engineers' work."
    )
    write_results("dask", {**meta, "rows": rows}, table, "DC-SVM and search jobs on dask", notes)


if __name__ == "__main__":
    main()
