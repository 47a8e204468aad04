"""Online model selection for "no settings": successive halving against SVC() and against the best
single candidate in hindsight.

One command::

    python -m benchmarks.bench_selection                 # the acceptance table -> results/selection.*
    python -m benchmarks.bench_selection --explore       # the grid the candidates were chosen from
                                                         #   -> results/selection_explore.*
    python -m benchmarks.bench_selection --http          # through a real server's /learn
                                                         #   -> results/selection_http.*
    python -m benchmarks.bench_selection --leader        # both leader rules, short streams
                                                         #   -> results/selection_leader.*

Each set is one pass, B = 500 per candidate, no settings: the estimator the service would run
(:class:`svmstream.solvers.online.selection.SelectionClassifier`, measured directly, batches of
1,000 rows as ``/learn`` takes them), in file order and shuffled (seed 0).  Beside it, on the same
rows in the same order:

* every candidate alone (``SelectionClassifier`` with that one candidate: the same warm-up window,
  scaling and γ); "best single" is the best of them on the test set, chosen in hindsight;
* scikit-learn ``SVC()`` with its defaults on the raw features, on at most :data:`SVC_ROWS`
  training rows (a uniform sample of the larger sets, seed 0; the row count is in the table);
* CPU seconds per example (``time.process_time`` of this process; the models are single-threaded).

``--http``: the same streams through a real ``svmstream serve`` process: a model created with only
its classes (no settings: the service builds the selector), ``POST /learn`` in batches of 1,000
rows (sparse sets as ``{"index": value}`` rows), ``POST /models/{name}/flush``, ``POST /predict``;
the service process's CPU seconds; beside it the selector run in this process on the same batches
(the accuracies must agree) and ``SVC()``.

``--leader``: on the sets whose race ends with more than one survivor (no last rung), each leader
rule (``leader="evidence"`` and ``"recent"``) and each variant of :data:`LEADER_VARIANTS`.  The rule
changes only which candidate answers, so one run per variant serves both rules: after ``flush()``
every surviving candidate is scored on the test rows and each rule's leader is read from the same
selector (``set_params(leader=...)``).  With no rung every candidate survives, so "best single" is
the best of them — the candidates alone, as the acceptance table runs them.  Each run also checks
that the candidates' prequential hits are paired (every candidate learned the same labels in the
same order: ``paired``).

The steady-state CPU ratio (selector after its last rung / the surviving pipeline alone, over the
same following rows) is measured interleaved, A B A B for :data:`ROUNDS` rounds, median of the
per-round ratios, on the sets where the race ends with at least :data:`TAIL_MIN` rows left.

Data sets: the LIBSVM files of ``benchmarks/datasets.py`` (``SVMSTREAM_DATA``) and the package sets
of :data:`benchmarks.datasets.PACKAGE_SETS` (scikit-learn's bundled breast_cancer and digits;
River's bundled ImageSegments and Bananas; mlbench's DNA, Satellite and Vehicle from Debian's
``r-cran-mlbench``).  :data:`CHOOSE` chose the candidates and the schedule (``--explore``);
:data:`CHECK` only checks the choice.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.sparse as sp
from sklearn.svm import SVC

from benchmarks.common import RESULTS, machine, write_results
from benchmarks.datasets import load_any
from svmstream.solvers import BudgetedSGDClassifier
from svmstream.solvers.online.selection import DEFAULT_CANDIDATES, SelectionClassifier

CHOOSE = ("ijcnn1", "letter", "pendigits", "reuters", "dna", "phishing")
CHECK = ("a9a", "breast_cancer", "digits", "skin_nonskin", "satellite", "vehicle", "segment", "bananas")
SVC_ROWS = 50_000
BATCH = 1000
ROUNDS = 3
TAIL_MIN = 5000
TAIL_ROWS = 150_000
#: The sets whose race ends before any rung (and the choose sets among them).
LEADER_SETS = (
    "dna", "pendigits", "phishing", "reuters",
    "digits", "bananas", "breast_cancer", "vehicle", "segment", "satellite",
)  # fmt: skip
#: ``--leader``: the selector's own settings tried beside the defaults.
LEADER_VARIANTS = {
    "default": {},
    "early_rehearsal 8": {"early_rehearsal": 8},
    "+16·scale": {"candidates": [*DEFAULT_CANDIDATES, {"gamma_factor": 16.0}]},
}
EXPLORE_GAMMA = tuple(
    float(g) for g in os.environ.get("SELECTION_EXPLORE_GAMMA", "0.0625,0.25,1,4,16").split(",")
)
EXPLORE_C = tuple(float(c) for c in os.environ.get("SELECTION_EXPLORE_C", "1,10").split(","))


def stream(name: str, order: str):
    """``(X, y, X_test, y_test)``: dense rows for d <= 256, CSR otherwise (as a client sends them);
    ``order="shuffled"``: the training rows permuted with seed 0."""
    X, y, Xt, yt = load_any(name, order="file")
    if order == "shuffled":
        perm = np.random.default_rng(0).permutation(X.shape[0])
        X, y = X[perm], y[perm]
    if X.shape[1] <= 256:
        X = X.toarray() if sp.issparse(X) else X
        Xt = Xt.toarray() if sp.issparse(Xt) else Xt
    return X, y, Xt, yt


def label(candidate: dict) -> str:
    """``f·scale`` and, when the candidate sets one, ``C=c`` (a candidate or a selector's
    ``settings_`` entry)."""
    c = candidate.get("C")
    return f"{candidate['gamma_factor']:g}·scale" + ("" if c is None or c == 1 else f" C={c:g}")


def selector(candidates=None, **kw) -> SelectionClassifier:
    """The no-settings model: B = 500, random_state 0, the default stages."""
    return SelectionClassifier(BudgetedSGDClassifier(budget=500, random_state=0), candidates=candidates, **kw)


def run(est, X, y, Xt, yt) -> dict:
    """One pass in batches of :data:`BATCH`, then flush; accuracy on the test rows, CPU seconds."""
    classes = np.unique(np.concatenate([np.unique(y), np.unique(yt)]))
    t0 = time.process_time()
    for lo in range(0, X.shape[0], BATCH):
        est.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=classes)
    est.flush()
    cpu = time.process_time() - t0
    acc = 100 * float(np.mean(est.predict(Xt) == yt))
    assert est.n_received_ == est.n_learned_ + est.n_pending_ == X.shape[0], "an example was lost"
    return {"accuracy_%": acc, "cpu_s": cpu, "cpu_us_per_example": 1e6 * cpu / X.shape[0]}


def svc_reference(X, y, Xt, yt) -> dict:
    Xs, ys = X, y
    if X.shape[0] > SVC_ROWS:
        idx = np.sort(np.random.default_rng(0).choice(X.shape[0], SVC_ROWS, replace=False))
        Xs, ys = X[idx], y[idx]
    t0 = time.process_time()
    svc = SVC().fit(_int32(Xs), ys)
    return {
        "svc_%": 100 * float(np.mean(svc.predict(_int32(Xt)) == yt)),
        "svc_rows": int(Xs.shape[0]),
        "svc_cpu_s": time.process_time() - t0,
    }


def _int32(X):
    """CSR with 32-bit indices (libsvm's SVC refuses 64-bit ones); dense X unchanged."""
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


def steady_state(name: str, X, y) -> dict | None:
    """Interleaved CPU ratio after the last rung: the selector vs its survivor alone, same rows."""
    sel = selector()
    classes = np.unique(y)
    lo = 0
    while lo < X.shape[0] and (not sel.__sklearn_is_fitted__() or sel.n_survivors_ != 1):
        sel.partial_fit(X[lo : lo + BATCH], y[lo : lo + BATCH], classes=classes)
        lo += BATCH
    tail = min(X.shape[0] - lo, TAIL_ROWS)
    if tail < TAIL_MIN:
        return None
    arrays, meta = sel.get_state()
    ratios, a_s, b_s = [], [], []
    for _ in range(ROUNDS):
        times = []
        for which in ("selector", "single"):
            est = SelectionClassifier.from_state(arrays, meta)
            if which == "single":
                est = est.candidates_[est.leader_]
            t0 = time.process_time()
            for s in range(lo, lo + tail, BATCH):
                est.partial_fit(X[s : s + BATCH], y[s : s + BATCH], classes=classes)
            times.append(time.process_time() - t0)
        a_s.append(times[0])
        b_s.append(times[1])
        ratios.append(times[0] / times[1])
    return {
        "set": name,
        "race ended at row": lo,
        "tail rows": tail,
        "selector cpu_s (rounds)": a_s,
        "single cpu_s (rounds)": b_s,
        "ratio (median of rounds)": float(np.median(ratios)),
        "load_avg": os.getloadavg()[0],
    }


def acceptance(sets, orders, out: str = "selection", resume: bool = False, http: bool = False) -> int:
    """The table: every order of every set, then the steady-state CPU ratios; the result files are
    rewritten after each row (a long run leaves what it measured; ``resume`` keeps the rows of
    ``results/<out>.json`` and measures only the others).  ``http``: each row also gets the
    no-settings model through a real server (:func:`http_run`, rows kept by ``resume`` too) and
    ``meets (http)``, the acceptance on the service's accuracy."""
    rows, ratios = [], []
    if resume and (RESULTS / f"{out}.json").exists():
        for row in json.loads((RESULTS / f"{out}.json").read_text())["rows"]:
            (ratios if row.get("part") else rows).append(row)
    done = {(r["set"], r["order"]) for r in rows}
    for order in orders:
        for name in sets:
            if (name, order) in done and (not http or "http selection_%" in _row(rows, name, order)):
                continue
            X, y, Xt, yt = stream(name, order)
            if (name, order) not in done:
                rows.append(compare(name, order, X, y, Xt, yt))
                if order == "file":
                    st = steady_state(name, X, y)
                    if st is not None:
                        ratios.append({"part": "steady-state CPU (interleaved)", **st})
                        print(st, flush=True)
            row = _row(rows, name, order)
            if http:
                row.update(http_run(name, order, X, y, Xt, yt))
                gap_svc, gap_best = (row["http selection_%"] - row[k] for k in ("svc_%", "best single_%"))
                row.update({"http gap to SVC() pp": gap_svc, "http gap to best single pp": gap_best})
                row["meets (http)"] = bool(gap_svc >= -1.0 and gap_best >= -0.5)
            print(row, flush=True)
            write(out, rows + ratios)
    return 0


def _row(rows: list[dict], name: str, order: str) -> dict:
    return next(r for r in rows if r["set"] == name and r["order"] == order)


_SVC: dict = {}


def svc_once(name: str, X, y, Xt, yt) -> dict:
    """:func:`svc_reference` of set ``name``, computed once per process (both orders share it)."""
    if name not in _SVC:
        _SVC[name] = svc_reference(X, y, Xt, yt)
    return _SVC[name]


def compare(name, order, X, y, Xt, yt) -> dict:
    """The selector, each candidate alone and SVC() (once per set) on one order of one set."""
    ref = svc_once(name, X, y, Xt, yt)
    sel = selector()
    res = run(sel, X, y, Xt, yt)
    singles = []
    for i, cand in enumerate(DEFAULT_CANDIDATES):
        alone = run(selector(candidates=[cand]), X, y, Xt, yt)
        singles.append((alone["accuracy_%"], -i, alone, cand))
    best_acc, _, best, best_cand = max(singles, key=lambda s: (s[0], s[1]))
    row = {
        "set": name,
        "role": "choose" if name in CHOOSE else "check",
        "order": order,
        "train rows": X.shape[0],
        "classes": len(np.unique(y)),
        "selection_%": res["accuracy_%"],
        "leader": label(sel.settings_[sel.leader_]),
        "rungs": len(sel.rungs_),
        **ref,
        "best single_%": best_acc,
        "best single": label(best_cand),
        **{f"{label(s[3])}_%": s[2]["accuracy_%"] for s in singles},
        "gap to SVC() pp": res["accuracy_%"] - ref["svc_%"],
        "gap to best single pp": res["accuracy_%"] - best_acc,
        "selection µs/example": res["cpu_us_per_example"],
        "single µs/example": best["cpu_us_per_example"],
        "overall CPU ratio": res["cpu_s"] / best["cpu_s"],
    }
    row["meets"] = bool(row["gap to SVC() pp"] >= -1.0 and row["gap to best single pp"] >= -0.5)
    return row


def http_run(name: str, order: str, X, y, Xt, yt) -> dict:
    """The no-settings model through a real server: PUT with the classes only, /learn, flush,
    /predict; accuracy, the service's CPU seconds and the race as ``GET /models`` shows it."""
    import tempfile
    from pathlib import Path

    import httpx
    import orjson
    import psutil

    from benchmarks.bench_defaults import rows_json
    from benchmarks.common import Server

    def labels(v):
        return [x.item() if hasattr(x, "item") else x for x in v]

    classes = sorted(labels(np.unique(np.concatenate([np.unique(y), np.unique(yt)]))))
    sparse = sp.issparse(X)
    post = {"headers": {"content-type": "application/json"}}
    with tempfile.TemporaryDirectory() as tmp, Server(Path(tmp) / "snap") as server:
        proc = psutil.Process(server.proc.pid)
        with httpx.Client(base_url=server.url, timeout=600) as c:
            c.put("/models/m", json={"classes": classes}).raise_for_status()
            cpu0, t0 = sum(proc.cpu_times()[:2]), time.perf_counter()
            for lo in range(0, X.shape[0], BATCH):
                body = {
                    "model": "m",
                    "x": rows_json(X[lo : lo + BATCH], sparse),
                    "y": labels(y[lo : lo + BATCH]),
                }
                c.post("/learn", content=orjson.dumps(body), **post).raise_for_status()
            c.post("/models/m/flush").raise_for_status()
            cpu, wall = sum(proc.cpu_times()[:2]) - cpu0, time.perf_counter() - t0
            info = c.get("/models/m").json()
            predicted = []
            for lo in range(0, Xt.shape[0], 1000):
                body = {"model": "m", "x": rows_json(Xt[lo : lo + 1000], sparse)}
                r = c.post("/predict", content=orjson.dumps(body), **post)
                r.raise_for_status()
                predicted += r.json()["labels"]
    race = info["statistics"].get("selection")  # None once a drift challenger was promoted
    promoted = [e for e in (info.get("promotion") or {}).get("history", []) if e["event"] == "promoted"]
    examples = info["examples"]
    assert (
        examples["received"] == examples["learned"] + examples["pending"] + examples["refused"] == X.shape[0]
    )
    if race is not None:
        leader, rungs = label(race["candidates"][race["leader"]]["settings"]), len(race["rungs"])
    else:
        leader, rungs = f"drift challenger promoted at {promoted[-1]['at']}", None
    return {
        "http selection_%": 100
        * float(np.mean(np.asarray(predicted, dtype=object) == np.asarray(labels(yt), dtype=object))),
        "http leader": leader,
        "http rungs": rungs,
        "http promotions": len(promoted),
        "service cpu_s": cpu,
        "wall_s": wall,
        "service µs/example": 1e6 * cpu / X.shape[0],
    }


def http_table(sets, orders, out: str = "selection_http") -> int:
    """Every set and order through HTTP, beside the in-process selector and SVC()."""
    rows = []
    for order in orders:
        for name in sets:
            X, y, Xt, yt = stream(name, order)
            ref = svc_once(name, X, y, Xt, yt)
            sel = selector()
            local = run(sel, X, y, Xt, yt)
            row = {
                "set": name,
                "role": "choose" if name in CHOOSE else "check",
                "order": order,
                "train rows": X.shape[0],
                **http_run(name, order, X, y, Xt, yt),
                "in-process selection_%": local["accuracy_%"],
                "in-process leader": label(sel.settings_[sel.leader_]),
                "svc_%": ref["svc_%"],
                "load_avg": os.getloadavg()[0],
            }
            row["gap to SVC() pp"] = row["http selection_%"] - ref["svc_%"]
            row["same as in-process"] = bool(row["http selection_%"] == row["in-process selection_%"])
            rows.append(row)
            print(row, flush=True)
            write_results(
                out,
                {"machine": machine(), "rows": rows, "candidates": list(DEFAULT_CANDIDATES)},
                rows,
                "Online model selection for no settings, through HTTP /learn",
                f"A model created with only its classes on a real server, /learn in batches of {BATCH}, "
                "flush, /predict. 'in-process': the same selector on the same batches in this process. "
                "CPU: the service process (psutil user + system seconds).",
            )
    return 0


class _PairedSelector(SelectionClassifier):
    """The selector, also keeping each candidate's learned labels in order (the pairing check)."""

    def _record(self, i):
        if "_labels" not in self.__dict__:
            self._labels = {}
        est = self.candidates_[i]
        self._labels.setdefault(i, []).append(np.asarray(est.last_y_).copy())
        super()._record(i)

    def paired(self) -> bool:
        seqs = [np.concatenate(v) if v else np.zeros(0) for _, v in sorted(self._labels.items())]
        return all(np.array_equal(seqs[0], q) for q in seqs[1:])


def leader_table(sets, orders, variants, out: str = "selection_leader") -> int:
    """Both leader rules on every set, order and variant of :data:`LEADER_VARIANTS`."""
    rows = []
    for name in sets:
        for order in orders:
            X, y, Xt, yt = stream(name, order)
            ref = svc_once(name, X, y, Xt, yt)
            for variant in variants:
                sel = _PairedSelector(
                    BudgetedSGDClassifier(budget=500, random_state=0), **LEADER_VARIANTS[variant]
                )
                res = run(sel, X, y, Xt, yt)
                row = {
                    "set": name,
                    "role": "choose" if name in CHOOSE else "check",
                    "order": order,
                    "variant": variant,
                    "train rows": X.shape[0],
                    "rungs": len(sel.rungs_),
                    "survivors": sel.n_survivors_,
                    "paired": sel.paired(),
                    "svc_%": ref["svc_%"],
                    "µs/example": res["cpu_us_per_example"],
                }
                if sel.n_survivors_ < 2:
                    row["note"] = "one survivor: the leader rule cannot change it"
                    rows.append(row)
                    continue
                accs = {i: 100 * float(np.mean(sel.candidates_[i].predict(Xt) == yt)) for i in sel._alive()}
                for i, a in accs.items():
                    row[f"{label(sel.settings_[i])}_%"] = a
                best = max(accs, key=lambda i: (accs[i], -i))
                row["best single_%"] = accs[best] if not sel.rungs_ else None
                row["best single"] = label(sel.settings_[best])
                test = sel.leader_test()
                row["window"] = test["window"]
                row["prequential 2nd half %"] = {
                    label(sel.settings_[i]): round(100 * sel._recent_accuracy(i), 2) for i in sel._alive()
                }
                row["evidence p"] = {
                    label(sel.settings_[int(k)]): round(v["p"], 6) for k, v in test["challengers"].items()
                }
                for rule in ("evidence", "recent"):
                    sel.set_params(leader=rule)
                    i = sel.leader_
                    row[f"{rule} leader"] = label(sel.settings_[i])
                    row[f"{rule}_%"] = accs[i]
                    row[f"{rule} gap to SVC() pp"] = accs[i] - ref["svc_%"]
                    gap_best = accs[i] - accs[best]
                    row[f"{rule} gap to best pp"] = gap_best
                    row[f"{rule} meets"] = bool(accs[i] - ref["svc_%"] >= -1.0 and gap_best >= -0.5)
                rows.append(row)
                print(row, flush=True)
                write_results(
                    out,
                    {"machine": machine(), "rows": rows, "variants": LEADER_VARIANTS},
                    rows,
                    "Online model selection: the leader rules on short streams",
                    "One pass, B = 500 per candidate, batches of 1000, no settings except the variant. "
                    "'evidence': the first candidate (1·scale) leads unless another survivor is better by "
                    "a one-sided exact McNemar test on the paired prequential hits of the second half, "
                    "Bonferroni over the other survivors, alpha 0.05 ('evidence p': each challenger's p); "
                    "'recent': the best prequential accuracy over the second half. 'best single': the best "
                    "surviving candidate on the test rows (hindsight). 'meets': within 1.0 pp of SVC() "
                    "or above and within 0.5 pp of the best single. 'paired': every candidate learned the "
                    "same labels in the same order.",
                )
    return 0


def write(out: str, rows: list[dict]) -> None:
    payload = {"machine": machine(), "rows": rows, "candidates": list(DEFAULT_CANDIDATES)}
    params = selector().get_params()
    notes = (
        f"One pass, B = 500 per candidate, batches of {BATCH}; candidates {list(DEFAULT_CANDIDATES)} "
        f"(gamma_factor × the plain gamma='scale' of the warm-up window); first_rung = "
        f"{params['first_rung']}, eta = {params['eta']}. SVC() on at most {SVC_ROWS:,} training rows "
        "(uniform sample, seed 0). 'best single': the best candidate alone on the test set (hindsight). "
        "'meets': within 1.0 pp of SVC() or above, and within 0.5 pp of the best single. CPU: "
        "process seconds of this process; 'overall CPU ratio' includes the race."
    )
    write_results(out, payload, rows, "Online model selection for no settings", notes)


def explore(
    sets,
    orders,
    rehearsals=(None,),
    budgets=(500,),
    out="selection_explore",
    gammas=EXPLORE_GAMMA,
    cs=EXPLORE_C,
) -> int:
    """Each (gamma_factor, C) alone — and each rehearsal and budget given: the grid the candidate
    set was chosen from.  A rehearsal r is the candidate's own, throughout (no early rehearsal);
    None: the selector's default schedule."""
    rows = []
    for name in sets:
        for order in orders:
            X, y, Xt, yt = stream(name, order)
            for budget in budgets:
                for reh in rehearsals:
                    row = {
                        "set": name,
                        "order": order,
                        "train rows": X.shape[0],
                        "classes": len(np.unique(y)),
                    }
                    row.update({"budget": budget, "rehearsal": "default" if reh is None else reh})
                    for c in cs:
                        for g in gammas:
                            cand = {"gamma_factor": g, "C": c, **({} if reh is None else {"rehearsal": reh})}
                            est = SelectionClassifier(
                                BudgetedSGDClassifier(budget=budget, random_state=0), candidates=[cand]
                            )
                            row[f"γ×{g:g} C={c:g}"] = run(est, X, y, Xt, yt)["accuracy_%"]
                    rows.append(row)
                    print(row, flush=True)
    write_results(
        out,
        {"machine": machine(), "rows": rows},
        rows,
        "Each candidate alone: test accuracy % after one pass",
        "γ×f: f times the plain gamma='scale' of the 1,000-row warm-up window (no multi-class factor); "
        "rehearsal r: the candidate's own rehearsal throughout.",
    )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(CHOOSE + CHECK))
    ap.add_argument("--orders", default="file,shuffled")
    ap.add_argument("--explore", action="store_true", help="the single-candidate grid on the CHOOSE sets")
    ap.add_argument("--out", default="selection", help="result file name under benchmarks/results")
    ap.add_argument("--resume", action="store_true", help="keep the rows already in results/<out>.json")
    ap.add_argument("--rehearsals", default="default", help="--explore: e.g. 1,4,8 (default: the schedule)")
    ap.add_argument("--budgets", default="500", help="--explore: budgets B, e.g. 500,2000")
    ap.add_argument("--gammas", default="", help="--explore: gamma factors (default 1/16,1/4,1,4,16)")
    ap.add_argument("--Cs", default="", help="--explore: C values (default 1,10)")
    ap.add_argument("--http", action="store_true", help="through a real server's /learn -> selection_http")
    ap.add_argument(
        "--with-http", action="store_true", help="the acceptance table also through a real server's /learn"
    )
    ap.add_argument("--leader", action="store_true", help="both leader rules -> selection_leader")
    ap.add_argument("--variants", default=",".join(LEADER_VARIANTS), help="--leader: of LEADER_VARIANTS")
    args = ap.parse_args(argv)
    orders = args.orders.split(",")
    if args.leader:
        sets = LEADER_SETS if args.sets == ",".join(CHOOSE + CHECK) else tuple(args.sets.split(","))
        out = args.out if args.out != "selection" else "selection_leader"
        return leader_table(sets, orders, args.variants.split(","), out)
    if args.http:
        sets = CHOOSE if args.sets == ",".join(CHOOSE + CHECK) else tuple(args.sets.split(","))
        return http_table(sets, orders)
    if args.explore:
        sets = CHOOSE if args.sets == ",".join(CHOOSE + CHECK) else tuple(args.sets.split(","))
        rehearsals = tuple(None if r == "default" else int(r) for r in args.rehearsals.split(","))
        budgets = tuple(int(b) for b in args.budgets.split(","))
        out = args.out if args.out != "selection" else "selection_explore"
        gammas = tuple(float(g) for g in args.gammas.split(",")) if args.gammas else EXPLORE_GAMMA
        cs = tuple(float(c) for c in args.Cs.split(",")) if args.Cs else EXPLORE_C
        return explore(sets, orders, rehearsals, budgets, out, gammas, cs)
    return acceptance(tuple(args.sets.split(",")), orders, args.out, args.resume, args.with_http)


if __name__ == "__main__":
    raise SystemExit(main())
