"""Benchmark: DC-SVM (ours) against scikit-learn SVC (LIBSVM) on ijcnn1 and a9a.

Run from the repository root::

    python -m benchmarks.bench_dcsvm                  # 3 interleaved rounds on ijcnn1 and a9a
    python -m benchmarks.bench_dcsvm --datasets ijcnn1 --rounds 5
    python -m benchmarks.bench_dcsvm --quick          # smoke run on 5,000-row subsets

Protocol: the rows of a data set run **interleaved**, ``svc, ours, ours, ...``
again and again for ``--rounds`` rounds (default 3), each row in a fresh subprocess; every
speed-up is computed per round against that round's SVC run, and the summary gives the
**median of the per-round ratios** (and their range), in CPU seconds and wall-clock seconds.
The 1-minute load average is recorded for every row (the machine is shared: SVC's own CPU
time on ijcnn1 varied 9.7-21 s between rounds).

Rows (RBF kernel, ijcnn1: C=32, gamma=2; a9a: C=32, gamma=2^-7, n_features=123; dense float64):

* ``svc``: ``sklearn.svm.SVC(C, gamma, cache_size=200)`` (LIBSVM, with an unregularised bias);
  its dual objective is computed from ``dual_coef_`` for *its* problem.
* ``dcsvm_exact``: ``DCSVMClassifier(n_levels=3, min_level=2)``: levels of 64 and 16
  clusters, refine, then the global solve to tol=1e-3 (the fastest setting measured,
  docs/dcsvm.md).
* ``dcsvm_exact_4levels``: the estimator's defaults (4 levels: 256/64/16/4 clusters).
* ``dcsvm_early``: ``early_level=3`` with the default 4 levels (stop after the 64-cluster
  level, predict by eq. 11).
* ``ours_ref_1e-5`` (once per data set, after the rounds, not timed against SVC): our solver
  from zero to tol=1e-5 (``n_levels=0``), the tightly converged reference objective of the
  "rel. gap" column.

All our rows: kernel k(x,z) + 1 (``bias=1``: a regularised intercept), 200 MB kernel cache,
``random_state=0``, ``n_jobs`` left at its default (in-process on this 2-core machine).
Train time = ``fit`` only (data loading excluded), wall-clock and CPU time (user + system of
the row's process and its reaped children).  Before the timer each of our rows fits a tiny
model so that numba's compiled code is loaded from its on-disk cache (JIT excluded).  Memory:
``ru_maxrss`` of the row's process (and of its children, if any).

Writes ``benchmarks/results/dcsvm.json`` and ``benchmarks/results/dcsvm.md`` (``--quick``:
``dcsvm.quick.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.common import write_results

REPO = Path(__file__).resolve().parents[1]

PARAMS = {"ijcnn1": (32.0, 2.0), "a9a": (32.0, 2.0**-7)}  # C, gamma
ROUND_ROWS = ["svc", "dcsvm_exact", "dcsvm_exact_4levels", "dcsvm_early"]
REF_ROW = "ours_ref_1e-5"
ROW_PARAMS = {
    "dcsvm_exact": {"n_levels": 3, "min_level": 2},
    "dcsvm_exact_4levels": {},
    "dcsvm_early": {"early_level": 3},
    REF_ROW: {"n_levels": 0, "tol": 1e-5},
}
CACHE_MB = 200.0
EARLY_LEVEL = 3
TARGET_EXACT, TARGET_EARLY = 3.0, 12.0


def _load(name: str, quick: bool):
    C, gamma = PARAMS[name]
    X, y, Xt, yt = datasets.load(name, dense=True)
    if quick:
        X, y, Xt, yt = X[:5000], y[:5000], Xt[:5000], yt[:5000]
    return X, y, Xt, yt, C, gamma


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its reaped children (pool workers)."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _svc_dual_objective(svc, X, gamma):
    from svmstream.solvers.exact._kernels import KernelData, KernelSpec, kernel_matvec

    coef = svc.dual_coef_.ravel()
    sv = KernelData(X[svc.support_])
    Kc = kernel_matvec(sv, sv, KernelSpec("rbf", gamma), coef)
    return float(np.abs(coef).sum() - 0.5 * coef @ Kc)


def _warm_up():
    """Load (or compile) the numba code outside the timer, as SVC's C code is preloaded."""
    from sklearn.datasets import make_classification

    from svmstream.solvers.exact._classes import DCSVMClassifier

    Xw, yw = make_classification(n_samples=400, n_features=5, random_state=0)
    DCSVMClassifier(n_levels=2, n_jobs=1).fit(Xw, yw).predict(Xw)
    DCSVMClassifier(n_levels=2, early_level=1, n_jobs=1).fit(Xw, yw).predict(Xw)


def run_row(name: str, row: str, quick: bool) -> dict:
    """Train and evaluate one row in this process; returns the record."""
    X, y, Xt, yt, C, gamma = _load(name, quick)
    if row != "svc":
        _warm_up()
    rec = {
        "dataset": name,
        "row": row,
        "n_train": int(X.shape[0]),
        "n_test": int(Xt.shape[0]),
        "C": C,
        "gamma": gamma,
        "load1": round(os.getloadavg()[0], 2),
    }
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    if row == "svc":
        from sklearn.svm import SVC

        est = SVC(C=C, gamma=gamma, cache_size=CACHE_MB).fit(X, y)
    else:
        from svmstream.solvers.exact._classes import DCSVMClassifier

        kw = {"C": C, "gamma": gamma, "bias": 1.0, "cache_size": CACHE_MB, "random_state": 0}
        kw.update(ROW_PARAMS[row])
        rec["params"] = dict(ROW_PARAMS[row])
        est = DCSVMClassifier(**kw).fit(X, y)
    rec["train_s"] = time.perf_counter() - t0
    rec["train_cpu_s"] = _cpu_seconds() - c0
    rec["load1_end"] = round(os.getloadavg()[0], 2)
    rec["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rec["ru_maxrss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    t0 = time.perf_counter()
    pred = est.predict(Xt)
    rec["predict_s"] = time.perf_counter() - t0
    rec["test_acc"] = float(np.mean(pred == yt))
    if row == "svc":
        rec["n_sv"] = int(est.support_.shape[0])
        rec["n_iter"] = int(np.sum(est.n_iter_))
        rec["dual_objective"] = _svc_dual_objective(est, X, gamma)
        rec["objective_note"] = "SVC's own problem (with bias)"
    else:
        rec["dual_objective"] = float(est.dual_objective_[0])
        rec["n_iter"] = int(est.n_iter_[0])
        if est.early_models_ is not None:
            rec["n_sv"] = int(est.early_models_[0].coef.shape[0])
            rec["objective_note"] = "sum of the level's sub-problem objectives"
            rec["n_clusters"] = int(est.early_models_[0].clusters.n_clusters)
        else:
            rec["n_sv"] = int(est.support_.shape[0])
        rec["history"] = est.fit_history_[0]
    return rec


def _fmt(v, nd=2):
    return "" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def _ratios(records, name, row):
    """Per-round (wall, CPU) speed-ups of ``row`` against the same round's SVC run."""
    out = []
    by = {(r["dataset"], r["round"], r["row"]): r for r in records if r.get("round") is not None}
    for (d, rnd, rw), r in sorted(by.items(), key=lambda kv: kv[0][1]):
        svc = by.get((d, rnd, "svc"))
        if d == name and rw == row and svc:
            out.append((svc["train_s"] / r["train_s"], svc["train_cpu_s"] / r["train_cpu_s"]))
    return out


def _stage_table(rec) -> list[str]:
    lines = [
        "| stage | clusters | CPU s | of which k-means | CD steps | kernel values computed | gradient entries scanned | cache hit rate | gradient + refresh CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for h in rec.get("history", []):
        st = h.get("stats", {})
        hits, miss = st.get("cache_hits", 0), st.get("cache_misses", 0)
        stage = h["stage"] + (f" {h['level']}" if h["stage"] == "level" else "")
        lines.append(
            f"| {stage} | {h.get('n_clusters', '')} | {h.get('cpu_seconds', 0):.3f} | "
            f"{_fmt(h.get('kmeans_cpu_seconds'), 3)} | {h.get('iterations', 0):,} | "
            f"{st.get('kernel_evals', 0) / 1e6:.1f}M | {st.get('active_scanned', 0) / 1e6:.1f}M | "
            f"{(hits / (hits + miss) if hits + miss else 0):.2f} | "
            f"{st.get('gradient_cpu_s', 0) + st.get('refresh_cpu_s', 0):.3f} |"
        )
    return lines


def _markdown(records, meta) -> str:
    lines = [
        f"# DC-SVM benchmark ({'quick' if meta['quick'] else 'full'})",
        "",
        f"Command: `{meta['command']}` — {meta['date']}, {meta['machine']}, "
        f"load average at start {meta['loadavg_start']}, at end {meta.get('loadavg_end')}.",
        "",
        f"Interleaved protocol: per data set, {meta['rounds']} rounds of "
        f"`{', '.join(ROUND_ROWS)}`, each row in a fresh process; speed-ups are per round "
        "against the same round's SVC run (CPU seconds of the process and its children; "
        "wall-clock in brackets); `load` is the 1-minute load average when the row started. "
        "Summary: median of the per-round ratios (min-max).",
        "",
        "| data | round | row | load | train wall s | CPU s | speed-up vs SVC CPU (wall) | test acc % | dual objective | rel. gap to ours tol=1e-5 | SVs | max RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(r["dataset"], r.get("round"), r["row"]): r for r in records}
    for r in records:
        svc = by.get((r["dataset"], r.get("round"), "svc"))
        ref = by.get((r["dataset"], None, REF_ROW))
        speed = ""
        if svc and r["row"] != "svc" and r.get("round") is not None:
            speed = f"{svc['train_cpu_s'] / r['train_cpu_s']:.1f}x ({svc['train_s'] / r['train_s']:.1f}x)"
        gap = None
        if ref and r["row"] not in ("svc", "dcsvm_early"):
            gap = abs(r["dual_objective"] - ref["dual_objective"]) / abs(ref["dual_objective"])
        lines.append(
            "| "
            + " | ".join(
                [
                    r["dataset"],
                    "ref" if r.get("round") is None else str(r["round"]),
                    r["row"],
                    _fmt(r.get("load1")),
                    _fmt(r["train_s"]),
                    _fmt(r["train_cpu_s"]),
                    speed,
                    _fmt(100 * r["test_acc"], 2),
                    _fmt(r["dual_objective"], 1),
                    "" if gap is None else f"{gap:.1e}",
                    str(r.get("n_sv", "")),
                    _fmt(max(r["ru_maxrss_mb"], r["ru_maxrss_children_mb"]), 0),
                ]
            )
            + " |"
        )
    lines += ["", "## Summary and acceptance", ""]
    for name in dict.fromkeys(r["dataset"] for r in records):
        svcs = [r for r in records if r["dataset"] == name and r["row"] == "svc"]
        ref = by.get((name, None, REF_ROW))
        lines += [
            f"**{name}** — SVC CPU s over the rounds: " + ", ".join(f"{r['train_cpu_s']:.1f}" for r in svcs),
            "",
        ]
        for row, target in (
            ("dcsvm_exact", TARGET_EXACT),
            ("dcsvm_exact_4levels", TARGET_EXACT),
            ("dcsvm_early", TARGET_EARLY),
        ):
            rs = _ratios(records, name, row)
            if not rs:
                continue
            wall = np.array([a for a, _ in rs])
            cpu = np.array([b for _, b in rs])
            mine = [r for r in records if r["dataset"] == name and r["row"] == row]
            acc = np.median([r["test_acc"] for r in mine])
            acc_svc = np.median([r["test_acc"] for r in svcs])
            text = (
                f"- {row} ({ROW_PARAMS[row] or 'defaults'}): CPU speed-up median {np.median(cpu):.1f}x "
                f"({cpu.min():.1f}-{cpu.max():.1f}), wall {np.median(wall):.1f}x ({wall.min():.1f}-{wall.max():.1f}); "
                f"target >= {target:.0f}x: {'PASS' if np.median(cpu) >= target else 'FAIL'}; "
                f"test acc {100 * acc:.2f}% vs SVC {100 * acc_svc:.2f}%"
            )
            if row != "dcsvm_early":
                ok = abs(acc - acc_svc) <= 0.001 + 1e-12
                text += f" (within 0.1 pp: {'PASS' if ok else 'FAIL'})"
                if ref:
                    gaps = [
                        abs(r["dual_objective"] - ref["dual_objective"]) / abs(ref["dual_objective"])
                        for r in mine
                    ]
                    text += f"; dual objective rel. gap to tol=1e-5: {max(gaps):.1e}"
            lines.append(text)
        lines.append("")
        first = next((r for r in records if r["dataset"] == name and r["row"] == "dcsvm_exact"), None)
        if first:
            lines += [
                f"Where the time goes, `dcsvm_exact` round {first['round']} ({first['train_cpu_s']:.2f} CPU s):",
                "",
            ]
            lines += _stage_table(first) + [""]
        early = next((r for r in records if r["dataset"] == name and r["row"] == "dcsvm_early"), None)
        if early:
            lines += [f"`dcsvm_early` round {early['round']} ({early['train_cpu_s']:.2f} CPU s):", ""]
            lines += _stage_table(early) + [""]
    lines += ["Per-stage records of every DC-SVM row are in the JSON file (`history`)."]
    return "\n".join(lines) + "\n"


def _run_sub(name: str, row: str, quick: bool) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_dcsvm", "--row", f"{name}:{row}"]
    if quick:
        cmd.append("--quick")
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not line:
        print(out.stdout[-2000:], out.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"row {name}:{row} failed")
    rec = json.loads(line[-1][len("RESULT ") :])
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000-row subsets (smoke run)")
    ap.add_argument("--datasets", default="ijcnn1,a9a")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per data set (>= 3 for claims)")
    ap.add_argument("--rows", default=None, help="comma-separated subset of " + ",".join(ROUND_ROWS))
    ap.add_argument("--no-ref", action="store_true", help=f"skip the {REF_ROW} reference solve")
    ap.add_argument("--row", help=argparse.SUPPRESS)  # internal: run one row, print JSON
    args = ap.parse_args(argv)
    if args.row:
        name, row = args.row.split(":")
        print("RESULT " + json.dumps(run_row(name, row, args.quick)), flush=True)
        return
    datasets.path("ijcnn1")  # exits with a clear message when the data is absent
    rows = args.rows.split(",") if args.rows else ROUND_ROWS
    records = []
    meta = {
        "command": "python -m benchmarks.bench_dcsvm"
        + (" --quick" if args.quick else "")
        + (f" --datasets {args.datasets}" if args.datasets != "ijcnn1,a9a" else "")
        + (f" --rounds {args.rounds}" if args.rounds != 3 else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "quick": args.quick,
        "rounds": args.rounds,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "loadavg_start": [round(v, 2) for v in os.getloadavg()],
        "cache_mb": CACHE_MB,
        "row_params": ROW_PARAMS,
    }
    for name in args.datasets.split(","):
        plan = [(rnd, row) for rnd in range(1, args.rounds + 1) for row in rows]
        if not args.no_ref:
            plan.append((None, REF_ROW))
        for rnd, row in plan:
            rec = _run_sub(name, row, args.quick)
            rec["round"] = rnd
            records.append(rec)
            print(
                f"{name:7s} r{rnd} {row:20s} load {rec['load1']:5.2f} train {rec['train_s']:7.2f} s  "
                f"cpu {rec['train_cpu_s']:7.2f} s  acc {100 * rec['test_acc']:6.2f}%  "
                f"obj {rec['dual_objective']:.6g}  SVs {rec.get('n_sv')}",
                flush=True,
            )
    meta["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    stem = "dcsvm.quick" if args.quick else "dcsvm"
    write_results(
        stem,
        {"meta": meta, "records": records},
        records,
        "DC-SVM vs scikit-learn SVC",
        markdown=_markdown(records, meta),
    )


if __name__ == "__main__":
    main()
