"""Benchmark: LIBLINEAR dual CD (ours), AVSF (ours) and LIBLINEAR itself.

Run from the repository root::

    python -m benchmarks.bench_linear            # full grid, ~10-15 min on 2 vCPUs
    python -m benchmarks.bench_linear --quick    # smoke run (two C values, two data sets)

Grid: C in {0.01, 0.1, 1, 10, 100, 1000} x eps in {0.01, 0.001} on a9a (n_features=123),
reuters_lasvm, ijcnn1 and sector (one-vs-rest, the binary problems of its first 10 classes,
each against all 6,412 training rows).  Solvers, all for the bias-free hinge-loss SVM:

* ``uniform``: :func:`svmstream.solvers.linear._cd.dual_cd` with ``selection="uniform"`` (Algorithm 2);
* ``avsf``: the same with ``selection="avsf"`` (Algorithms 3-5 over an active set kept by
  LIBLINEAR's shrinking rule, the recommended variant, see ``docs/avsf.md``);
* ``avsf-paper``: ``selection="avsf-paper"`` (Algorithms 3-5 as published, no shrinking);
* ``sklearn``: scikit-learn ``LinearSVC(loss="hinge", dual=True, fit_intercept=False)``, i.e.
  the classic LIBLINEAR dual CD (the same Algorithm 2) in compiled code, with ``max_iter``
  equal to our baseline's iteration count when that hit the cap (equal work) and generous
  otherwise; its time includes scikit-learn's input conversion (a few ms);
* ``liblinear``: ``liblinear-official`` 2.50 ``train(prob, "-s 3 -c C -e eps -B -1")``
  (problem built outside the timer).  Its dual CD differs from Algorithm 2 (gradient blocks,
  an inner tolerance) and stops at a built-in iteration limit that cannot be changed from
  the command line; runs that print "reaching max number of iterations" are flagged.

The dual objective of the LIBLINEAR runs is parsed from their own output ("Objective
value", the negated dual), ours is computed from alpha and w.  Our solvers get a step
budget (``STEP_CAP`` coordinate steps per binary problem) so that the whole run stays near
15 minutes; capped runs are flagged and compared at equal steps.  Short runs are repeated
and the minimum time is kept (the machine is shared and noisy); ratios are within one run.

Writes ``benchmarks/results/linear.json`` and ``benchmarks/results/linear.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks import datasets
from benchmarks.common import write_results
from svmstream.solvers.linear._cd import as_cd_input, dual_cd

REPO = Path(__file__).resolve().parents[1]

CS = [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
EPSILONS = [0.01, 0.001]
STEP_CAP = 200_000_000  # coordinate steps per binary problem, for each of our solvers (~14 min run)
MAX_ITER = 10**7  # outer iterations (the step cap binds first)
REPEAT_BELOW = 2.0  # seconds: runs faster than this are repeated (3x), min time kept
SEED = 1
TARGET_GAP = 1e-4  # steps-to-target: dual within this relative gap of the best one found

DATASETS = [
    # name, registered set (its training part), one-vs-rest classes (None = binary, positive label > 0)
    ("a9a", "a9a", None),
    ("reuters", "reuters", None),
    ("ijcnn1", "ijcnn1", None),
    ("sector10", "sector", list(range(1, 11))),
]


class _CaptureStdout:
    """Capture what C code prints on file descriptor 1 (LIBLINEAR's info output)."""

    def __enter__(self):
        sys.stdout.flush()
        self._saved = os.dup(1)
        self._tmp = tempfile.TemporaryFile(mode="w+b")
        os.dup2(self._tmp.fileno(), 1)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._tmp.seek(0)
        self.text = self._tmp.read().decode(errors="replace")
        self._tmp.close()
        return False


def _parse_liblinear(text: str) -> tuple[int, float, bool]:
    iters = re.findall(r"#iter = (\d+)", text)
    objs = re.findall(r"Objective value = (\S+)", text)
    if not iters or not objs:
        raise RuntimeError(f"could not parse LIBLINEAR output: {text[-300:]!r}")
    return int(iters[-1]), -float(objs[-1]), "reaching max number of iterations" in text


def _timed(fn, repeat_below=REPEAT_BELOW):
    """Run ``fn`` (returns (wall s, cpu s, payload)); repeat twice more if fast, keep the min."""
    best = fn()
    if best[0] < repeat_below:
        for _ in range(2):
            cur = fn()
            if cur[0] < best[0]:
                best = cur
    return best


def run_ours(inp, y, C, eps, selection):
    def once():
        c0 = time.process_time()
        r = dual_cd(
            inp,
            y,
            C=C,
            tol=eps,
            max_iter=MAX_ITER,
            selection=selection,
            seed=SEED,
            max_steps=STEP_CAP,
            record_history=True,
        )
        return r.wall_time, time.process_time() - c0, r

    t, cpu, r = _timed(once)
    return {
        "seconds": t,
        "cpu_seconds": cpu,
        "iterations": r.n_iter,
        "steps": r.n_steps,
        "updates": r.n_updates,
        "dual": r.dual,
        "primal": r.primal,
        "capped": not r.converged,
        "violation": r.final_violation,
        "checks": r.n_checks,
        # (steps, dual) after every kernel call, for the steps-to-target figures
        "_trace": (np.array([h["n_steps"] for h in r.history]), np.array([h["dual"] for h in r.history])),
    }


def run_sklearn(X32, y, C, eps, max_iter):
    from sklearn.svm import LinearSVC

    def once():
        clf = LinearSVC(
            loss="hinge",
            dual=True,
            fit_intercept=False,
            C=C,
            tol=eps,
            max_iter=max_iter,
            verbose=1,
            random_state=SEED,
        )
        with warnings.catch_warnings(), _CaptureStdout() as cap:
            warnings.simplefilter("ignore")
            t0, c0 = time.perf_counter(), time.process_time()
            clf.fit(X32, y)
            t, c = time.perf_counter() - t0, time.process_time() - c0
        return t, c, (cap.text, clf.coef_.ravel().copy())

    res = _timed_liblinear_run(once, X32, y, C)
    res["capped"] = res["capped"] or res["iterations"] >= max_iter
    res["max_iter"] = max_iter
    return res


def run_liblinear(X, y, C, eps):
    from liblinear.liblinear import parameter, problem
    from liblinear.liblinearutil import train

    prob = problem(y, X)

    def once():
        param = parameter(f"-s 3 -c {C} -e {eps} -B -1")
        with _CaptureStdout() as cap:
            t0, c0 = time.perf_counter(), time.process_time()
            model = train(prob, param)
            t, c = time.perf_counter() - t0, time.process_time() - c0
        # weight vector straight from the C model (bias off: nr_feature entries, class
        # labels[0] is LIBLINEAR's positive side)
        nf = model.get_nr_feature()
        w = np.zeros(X.shape[1])
        w[:nf] = np.ctypeslib.as_array(model.w, shape=(nf,))
        if model.get_labels()[0] != 1:
            w = -w
        return t, c, (cap.text, w)

    return _timed_liblinear_run(once, X, y, C)


def _timed_liblinear_run(once, X, y, C) -> dict:
    """Time ``once`` (it returns ``(seconds, cpu_seconds, (LIBLINEAR's verbose output, w))``);
    the result: times, iterations, dual and whether LIBLINEAR hit its cap (from its output),
    and the primal objective of ``w`` computed here."""
    t, cpu, (text, w) = _timed(once)
    it, dual, capped = _parse_liblinear(text)
    return {
        "seconds": t,
        "cpu_seconds": cpu,
        "iterations": it,
        "dual": dual,
        "primal": _primal(X, y, w, C),
        "capped": capped,
    }


def _primal(X, y, w, C):
    """P(w) = 1/2 ||w||^2 + C sum max(0, 1 - y <w, x>), computed directly."""
    return float(0.5 * np.dot(w, w) + C * np.maximum(0.0, 1.0 - y * (X @ w)).sum())


def _steps_to(trace, target):
    """First step count at which the recorded dual reaches ``target`` (None if never)."""
    steps, duals = trace
    hit = np.nonzero(duals >= target)[0]
    return int(steps[hit[0]]) if hit.size else None


def _sum_runs(runs: list[dict]) -> dict:
    """Aggregate binary problems (one-vs-rest): sums of counts, times and objectives."""
    out = {}
    for key in runs[0]:
        vals = [r[key] for r in runs]
        if key.startswith("_"):
            continue
        if key == "capped":
            out[key] = any(vals)
        elif key in ("violation", "max_iter"):
            out[key] = max(vals)
        elif key.startswith("steps_to_"):
            out[key] = None if any(v is None for v in vals) else sum(vals)
        else:
            out[key] = sum(vals)
    out["problems"] = len(runs)
    return out


def load(name, data_set, classes):
    X, y, _, _ = datasets.load(data_set)
    X = sp.csr_matrix(X)
    X.sort_indices()
    if classes is None:
        problems = [("+1", np.where(y > 0, 1.0, -1.0))]
    else:
        problems = [(str(c), np.where(y == c, 1.0, -1.0)) for c in classes]
    X32 = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
    return X, X32, problems


def bench(quick: bool) -> dict:
    cs = [1.0, 100.0] if quick else CS
    sets = [d for d in DATASETS if d[0] in ("reuters", "sector10")] if quick else DATASETS
    rows = []
    t_start = time.perf_counter()
    # compile / load the numba kernels outside the timings
    tiny = np.random.default_rng(0).normal(size=(20, 3))
    for sel in ("uniform", "avsf", "avsf-paper"):
        dual_cd(sp.csr_matrix(tiny), np.sign(tiny[:, 0]), max_iter=3, selection=sel)
    for name, data_set, classes in sets:
        X, X32, problems = load(name, data_set, classes)
        inp = as_cd_input(X)
        print(
            f"[{time.perf_counter() - t_start:7.1f}s] {name}: {X.shape[0]} x {X.shape[1]}, "
            f"nnz {X.nnz}, {len(problems)} binary problem(s)",
            flush=True,
        )
        for C in cs:
            for eps in EPSILONS:
                per = {"uniform": [], "avsf": [], "sklearn": [], "liblinear": [], "avsf_paper": []}
                for _label, y in problems:
                    u = run_ours(inp, y, C, eps, "uniform")
                    a = run_ours(inp, y, C, eps, "avsf")
                    ap = run_ours(inp, y, C, eps, "avsf-paper")
                    mi = u["iterations"] if u["capped"] else max(10 * u["iterations"], 1000)
                    s = run_sklearn(X32, y, C, eps, mi)
                    ll = run_liblinear(X, y, C, eps)
                    best_p = max(r["dual"] for r in (u, a, s, ll, ap))
                    common = min(u["dual"], a["dual"])  # reached by both of ours
                    for r in (u, a, ap):
                        # steps until within TARGET_GAP of the best dual of all four
                        r[f"steps_to_{TARGET_GAP:g}"] = _steps_to(
                            r["_trace"], best_p - TARGET_GAP * abs(best_p)
                        )
                        # steps until the lower of the two final duals of ours
                        r["steps_to_common"] = _steps_to(r["_trace"], common)
                    for key, r in zip(per, (u, a, s, ll, ap)):
                        per[key].append(r)
                res = {k: _sum_runs(v) for k, v in per.items()}
                best = max(r["dual"] for r in res.values())
                low = min(r["primal"] for r in res.values())
                for r in res.values():
                    r["dual_rel_gap"] = (best - r["dual"]) / abs(best)
                    # certified: optimum <= min primal, so this bounds the dual's error
                    r["dual_subopt_bound"] = (low - r["dual"]) / abs(r["dual"])
                row = {"dataset": name, "C": C, "eps": eps, **res}
                row["per_problem_dual"] = {k: [r["dual"] for r in v] for k, v in per.items()}
                rows.append(row)
                u, a, s, ll = res["uniform"], res["avsf"], res["sklearn"], res["liblinear"]
                ap = res["avsf_paper"]
                st = f"steps_to_{TARGET_GAP:g}"
                print(
                    f"[{time.perf_counter() - t_start:7.1f}s] {name:8s} C={C:<7g} eps={eps:<6g}"
                    f" uniform {u['steps']:>10d} st {u['seconds']:7.3f}s{'*' if u['capped'] else ' '}"
                    f" avsf {a['steps']:>10d} st {a['seconds']:7.3f}s{'*' if a['capped'] else ' '}"
                    f" paper {ap['steps']:>10d} st {ap['seconds']:7.3f}s{'*' if ap['capped'] else ' '}"
                    f" sklearn {s['seconds']:7.3f}s{'*' if s['capped'] else ' '}"
                    f" liblinear {ll['seconds']:7.3f}s{'*' if ll['capped'] else ' '}"
                    f" to-target u/a {u[st]}/{a[st]}"
                    f" gaps u/a/s/l {u['dual_rel_gap']:.1e}/{a['dual_rel_gap']:.1e}/"
                    f"{s['dual_rel_gap']:.1e}/{ll['dual_rel_gap']:.1e}",
                    flush=True,
                )
    return {
        "benchmark": "bench_linear",
        "command": "python -m benchmarks.bench_linear" + (" --quick" if quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "step_cap_per_problem": STEP_CAP,
        "target_gap": TARGET_GAP,
        "seed": SEED,
        "total_seconds": time.perf_counter() - t_start,
        "rows": rows,
    }


def _mark(r):
    return "*" if r["capped"] else ""


def _ratio(x, y):
    return None if (x is None or y is None or y == 0) else x / y


def _fmt(v, spec=".2f", none="—"):
    return none if v is None else format(v, spec)


def summarize(result: dict) -> dict:
    """The acceptance figures of the linear solvers (speed and accuracy against LIBLINEAR), computed from the rows."""
    rows = result["rows"]
    st = f"steps_to_{result['target_gap']:g}"
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    big = [r for r in rows if r["C"] >= 10]
    fine = [r for r in rows if r["eps"] == 0.001]

    def time_ratios(num, den, key, rows_):
        vals = [r[num][key] / r[den][key] for r in rows_]
        return {
            "median": float(np.median(vals)),
            "max": float(np.max(vals)),
            "configs_within_1.5": int(sum(v <= 1.5 for v in vals)),
            "configs": len(vals),
        }

    ll_conv = [r for r in rows if not r["liblinear"]["capped"]]
    return {
        # 1. same dual objective within 1e-3 relative at eps = 0.001
        "dual_agreement_eps0.001": {
            k: {
                "max_rel_gap": max(r[k]["dual_rel_gap"] for r in fine),
                "configs_within_1e-3": int(sum(r[k]["dual_rel_gap"] <= 1e-3 for r in fine)),
                "configs": len(fine),
                "failing": [f"{r['dataset']} C={r['C']:g}" for r in fine if r[k]["dual_rel_gap"] > 1e-3],
            }
            for k in ("uniform", "avsf", "avsf_paper", "sklearn", "liblinear")
        },
        # 2. steps baseline / AVSF at C >= 10 (> 1: AVSF needs fewer steps)
        "steps_ratio_uniform_over_avsf_C>=10": {
            d: [
                {
                    "C": r["C"],
                    "eps": r["eps"],
                    "at_stop": r["uniform"]["steps"] / r["avsf"]["steps"],
                    "uniform_capped": r["uniform"]["capped"],
                    "avsf_capped": r["avsf"]["capped"],
                    "to_target": _ratio(r["uniform"][st], r["avsf"][st]),
                    "uniform_to_target": r["uniform"][st],
                    "avsf_to_target": r["avsf"][st],
                    "to_common": _ratio(r["uniform"]["steps_to_common"], r["avsf"]["steps_to_common"]),
                    "at_stop_paper": r["uniform"]["steps"] / r["avsf_paper"]["steps"],
                    "paper_capped": r["avsf_paper"]["capped"],
                    "to_target_paper": _ratio(r["uniform"][st], r["avsf_paper"][st]),
                }
                for r in big
                if r["dataset"] == d
            ]
            for d in datasets
        },
        # 3. our baseline vs LIBLINEAR time (ratio <= 1.5 wanted), wall and CPU seconds
        "time_uniform_over_sklearn_wall": time_ratios("uniform", "sklearn", "seconds", rows),
        "time_uniform_over_sklearn_cpu": time_ratios("uniform", "sklearn", "cpu_seconds", rows),
        "time_uniform_over_liblinear_wall_where_it_converged": time_ratios(
            "uniform", "liblinear", "seconds", ll_conv
        )
        if ll_conv
        else None,
        "time_uniform_over_liblinear_cpu_where_it_converged": time_ratios(
            "uniform", "liblinear", "cpu_seconds", ll_conv
        )
        if ll_conv
        else None,
        # 4b. same, counting a LIBLINEAR run that ended > 1e-3 away from the best dual (while
        # AVSF was within 1e-3) as not having solved the problem
        "avsf_faster_or_liblinear_failed_all_C>=10": {
            ref: {
                d: all(
                    r["avsf"]["seconds"] < r[ref]["seconds"]
                    or (r[ref]["dual_rel_gap"] > 1e-3 >= r["avsf"]["dual_rel_gap"])
                    for r in big
                    if r["dataset"] == d
                )
                for d in datasets
            }
            for ref in ("liblinear", "sklearn")
        },
        # 4. AVSF faster than LIBLINEAR at every C >= 10 (both eps), per data set
        "avsf_faster_all_C>=10": {
            ref: {
                key: {
                    d: all(r["avsf"][key] < r[ref][key] for r in big if r["dataset"] == d) for d in datasets
                }
                for key in ("seconds", "cpu_seconds")
            }
            for ref in ("liblinear", "sklearn")
        },
    }


def markdown(result: dict) -> str:
    s = result["summary"]
    st = f"steps_to_{result['target_gap']:g}"
    tg = f"{result['target_gap']:g}"
    lines = [
        "# Linear SVM dual CD: our LIBLINEAR baseline, AVSF, and LIBLINEAR",
        "",
        f"Command: `{result['command']}` — {result['date']}, {result['machine']['platform']}, "
        f"{result['machine']['cpus']} CPUs (shared with other jobs, noisy), total "
        f"{result['total_seconds']:.0f} s.",
        "",
        "Hinge-loss SVM without bias. `uniform` = our Algorithm 2 (LIBLINEAR dual CD with "
        "shrinking), `avsf` = our Algorithms 3-5 over an active set kept by LIBLINEAR's "
        'shrinking rule (`selection="avsf"`, the recommended variant), `avsf-paper` = '
        "Algorithms 3-5 as published (no shrinking), `sklearn` = scikit-learn LinearSVC "
        "(its bundled classic LIBLINEAR dual CD, i.e. the same Algorithm 2 in C), `liblinear` = "
        "liblinear-official 2.50 `-s 3 -B -1` (a newer block variant of dual CD). Steps = "
        "coordinate gradient evaluations (one sparse dot product each). `*` = stopped by a "
        f"cap (ours: {result['step_cap_per_problem']:,} steps per binary problem; sklearn: "
        "max_iter = our baseline's iteration count when that was capped, i.e. equal work; "
        "liblinear: its built-in limit of 300 iterations) — capped runs did not meet the "
        f"stopping rule. `to {tg}` = steps until the dual objective is within {tg} "
        "(relative) of the best dual any of the five solvers reached for that problem "
        "(— = never within the cap); `to common` = steps until the lower of the two final "
        "duals of uniform and avsf (equal-quality comparison, meaningful also for capped "
        "runs). gap = (best dual − dual) / best dual; certified gap = (lowest primal of the "
        "five − best dual) / best dual, an upper bound on the best dual's distance to the "
        "optimum. sector10 = sums "
        "over the 10 one-vs-rest problems of classes 1-10. Seconds: wall (cpu = process "
        "time, less sensitive to other jobs on the machine).",
        "",
        "## Steps",
        "",
        f"| data | C | eps | uniform steps (iters) | avsf steps (iters) | uniform/avsf "
        f"| uniform to common | avsf to common | uniform/avsf to common "
        f"| uniform to {tg} | avsf to {tg} | uniform/avsf to {tg} "
        f"| avsf-paper steps (iters) | uniform/avsf-paper | avsf-paper to {tg} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        u, a, ap = r["uniform"], r["avsf"], r["avsf_paper"]
        sc = "steps_to_common"
        lines.append(
            f"| {r['dataset']} | {r['C']:g} | {r['eps']:g} "
            f"| {u['steps']:,}{_mark(u)} ({u['iterations']}) "
            f"| {a['steps']:,}{_mark(a)} ({a['iterations']}) | {u['steps'] / a['steps']:.2f} "
            f"| {_fmt(u[sc], ',')} | {_fmt(a[sc], ',')} | {_fmt(_ratio(u[sc], a[sc]))} "
            f"| {_fmt(u[st], ',')} | {_fmt(a[st], ',')} | {_fmt(_ratio(u[st], a[st]))} "
            f"| {ap['steps']:,}{_mark(ap)} ({ap['iterations']}) "
            f"| {u['steps'] / ap['steps']:.2f} | {_fmt(ap[st], ',')} |"
        )
    lines += [
        "",
        "## Time and dual objective",
        "",
        "| data | C | eps | uniform s | avsf s | avsf-paper s | sklearn s (iters) "
        "| liblinear s (iters) "
        "| uniform cpu | avsf cpu | sklearn cpu | liblinear cpu | uniform/sklearn | "
        "avsf/liblinear | gap uniform | gap avsf | gap avsf-paper | gap sklearn "
        "| gap liblinear | best dual "
        "| certified gap of best dual |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        u, a, sk, ll = r["uniform"], r["avsf"], r["sklearn"], r["liblinear"]
        ap = r["avsf_paper"]
        best = max(x["dual"] for x in (u, a, sk, ll, ap))
        cert = min(x["dual_subopt_bound"] for x in (u, a, sk, ll, ap))
        lines.append(
            f"| {r['dataset']} | {r['C']:g} | {r['eps']:g} "
            f"| {u['seconds']:.3f}{_mark(u)} | {a['seconds']:.3f}{_mark(a)} "
            f"| {ap['seconds']:.3f}{_mark(ap)} "
            f"| {sk['seconds']:.3f}{_mark(sk)} ({sk['iterations']}) "
            f"| {ll['seconds']:.3f}{_mark(ll)} ({ll['iterations']}) "
            f"| {u['cpu_seconds']:.3f} | {a['cpu_seconds']:.3f} | {sk['cpu_seconds']:.3f} "
            f"| {ll['cpu_seconds']:.3f} | {u['seconds'] / sk['seconds']:.2f} "
            f"| {a['seconds'] / ll['seconds']:.2f} | {u['dual_rel_gap']:.1e} "
            f"| {a['dual_rel_gap']:.1e} | {ap['dual_rel_gap']:.1e} | {sk['dual_rel_gap']:.1e} "
            f"| {ll['dual_rel_gap']:.1e} "
            f"| {best:.8g} | {cert:.1e} |"
        )
    lines += [
        "",
        "## Acceptance figures",
        "",
        "1. Dual objective at eps = 0.001, relative gap to the best dual of all five solvers:",
        "",
    ]
    for k, v in s["dual_agreement_eps0.001"].items():
        fail = f" (over 1e-3: {', '.join(v['failing'])})" if v["failing"] else ""
        lines.append(
            f"   - {k}: max gap {v['max_rel_gap']:.1e}; within 1e-3 in "
            f"{v['configs_within_1e-3']}/{v['configs']} configurations{fail}"
        )
    lines += [
        "",
        "2. Steps uniform / avsf at C >= 10 (> 1: AVSF needs fewer). `at stop` = "
        "steps when the run ended (`*`: a run hit the step cap, so this is a lower "
        f"bound or an equal-work figure); `to {tg}` = steps to reach the common "
        f"target (`>` if the baseline never reached it within the cap):",
        "",
    ]
    for d, entries in s["steps_ratio_uniform_over_avsf_C>=10"].items():
        parts = []
        for e in entries:
            if e["to_target"] is not None:
                tt = f"{e['to_target']:.2f}"
            elif e["avsf_to_target"] is not None and e["uniform_to_target"] is None:
                tt = f">{result['step_cap_per_problem'] / e['avsf_to_target']:.2f}"
            else:
                tt = "—"
            star = "*" if e["uniform_capped"] or e["avsf_capped"] else ""
            pstar = "*" if e["uniform_capped"] or e["paper_capped"] else ""
            parts.append(
                f"C={e['C']:g}/eps={e['eps']:g}: at stop {e['at_stop']:.2f}{star}, "
                f"to common {_fmt(e['to_common'])}, to {tg} {tt} "
                f"(avsf-paper: at stop {e['at_stop_paper']:.2f}{pstar}, "
                f"to {tg} {_fmt(e['to_target_paper'])})"
            )
        lines.append(f"   - {d}: " + "; ".join(parts))
    lines += ["", "3. Time of our baseline / LIBLINEAR (wanted <= 1.5):", ""]
    for key, label in (
        ("time_uniform_over_sklearn_wall", "vs sklearn LIBLINEAR (same algorithm), wall"),
        ("time_uniform_over_sklearn_cpu", "vs sklearn LIBLINEAR (same algorithm), cpu"),
        (
            "time_uniform_over_liblinear_wall_where_it_converged",
            "vs liblinear-official where it converged, wall",
        ),
        (
            "time_uniform_over_liblinear_cpu_where_it_converged",
            "vs liblinear-official where it converged, cpu",
        ),
    ):
        v = s[key]
        if v:
            lines.append(
                f"   - {label}: median {v['median']:.2f}, max {v['max']:.2f}, "
                f"<= 1.5 in {v['configs_within_1.5']}/{v['configs']} configurations"
            )
    lines += ["", "4. AVSF faster than LIBLINEAR at every C >= 10 (both eps), per data set:", ""]
    for ref, per in s["avsf_faster_or_liblinear_failed_all_C>=10"].items():
        lines.append(
            f"   - vs {ref} (wall; a {ref} run that ended > 1e-3 below the best dual "
            "counts as not solved): " + ", ".join(f"{d}: {'yes' if v else 'no'}" for d, v in per.items())
        )
    for ref, by_key in s["avsf_faster_all_C>=10"].items():
        for key, per in by_key.items():
            lines.append(
                f"   - vs {ref} ({'wall' if key == 'seconds' else 'cpu'}): "
                + ", ".join(f"{d}: {'yes' if v else 'no'}" for d, v in per.items())
            )
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    args = ap.parse_args(argv)
    for _, data_set, _ in DATASETS:
        datasets.path(data_set)  # exits with a clear message when the data is absent
    result = bench(args.quick)
    result["summary"] = summarize(result)
    stem = "linear.quick" if args.quick else "linear"
    write_results(stem, result, result["rows"], "Linear solvers", markdown=markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
