"""Micro-benchmark: cost of one budget-maintenance step, projection vs merging, B = 100, 500, 1000.

Run from the repository root::

    python -m benchmarks.bench_projection            # writes benchmarks/results/projection.{json,md}

A steady state with B SVs (d = 22, uniform random data in [−1, 1], RBF γ = 0.1, random-sign
coefficients) receives a stream of new SVs; each step inserts one SV at slot B and brings
the model back to B SVs.  Numba drivers run whole loops (no Python per step):

* ``project``: kernel row of the new SV, :func:`svmstream.solvers.budgeted._projection.kinv_append` and
  :func:`svmstream.solvers.budgeted._projection.project_smallest` (both O(B²));
* ``merge``: kernel row and :func:`svmstream.solvers.budgeted._merging.merge_smallest` (GSS-standard, O(B·d));
* ``base``: kernel row and a plain removal (:func:`svmstream.solvers.budgeted._merging.remove_sv`, O(B·d)) — the
  part of each step that is not maintenance;
* ``remove+k_inv``: kernel row, ``kinv_append`` and :func:`svmstream.solvers.budgeted._projection.remove_smallest`
  with the inverse kept up to date (what removal costs when K⁻¹ is maintained);
* ``re-invert``: ``np.linalg.inv`` of the B × B kernel matrix (the per-step cost of projection
  without the incremental inverse; LAPACK, one thread);
* ``rebuild``: one :func:`svmstream.solvers.budgeted._projection.kinv_rebuild` (kernel matrix + LAPACK inverse),
  the price of a failed consistency check.

Reported per step: the raw time and the maintenance time (raw − base); the B = 100 → 500
ratio of the maintenance time shows the growth (B² → 25×, B → 5×), 500 → 1000 the
asymptotic one (4× vs 2×).  Timings are medians of
interleaved repeats, so machine noise hits every variant alike.  A second table gives the
rounding drift of the maintained K⁻¹ after many steps, against ``np.linalg.inv``, for
well-conditioned (uniform 22-D), nearly singular (clustered 3-D) and real (ijcnn1, a9a, when
SVMSTREAM_DATA has them) kernel matrices, with
the default jitter and with 1e-8, and the number of consistency-check rebuilds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import platform  # noqa: E402
import time  # noqa: E402

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import datasets  # noqa: E402
from benchmarks.common import data_dir, write_results  # noqa: E402
from svmstream.solvers.budgeted._gss import GSS_STANDARD_EPS  # noqa: E402
from svmstream.solvers.budgeted._merging import (  # noqa: E402
    N_DIAG,
    SOLVER_GSS,
    merge_smallest,
    remove_sv,
    smallest_coefficient_slot,
)
from svmstream.solvers.budgeted._projection import (
    DEFAULT_JITTER,
    kinv_append,
    kinv_rebuild,
    project_smallest,
    remove_smallest,
)
from svmstream.solvers.kernels import rbf_row, squared_norm  # noqa: E402

D = 22
GAMMA = 0.1
BUDGETS = (100, 500, 1000)
STEPS = {100: 4000, 500: 800, 1000: 250}
REPEATS = 7


# ----------------------------------------------------------------------------- drivers
@nb.njit(nogil=True)
def _insert(stream, coefs, i, sv_t, sv_sq, coef, n, row):
    """Write stream[i] as SV at slot n and its kernel row against the n live SVs into row."""
    x = stream[i]
    x_sq = squared_norm(x)
    rbf_row(x, x_sq, sv_t, sv_sq, n, GAMMA, row)
    for k in range(x.shape[0]):
        sv_t[k, n] = x[k]
    sv_sq[n] = x_sq
    coef[n, 0] = coefs[i]


@nb.njit(nogil=True)
def drive_project(stream, coefs, sv_t, sv_sq, coef, n, k_inv, jitter, x_buf, row, work):
    wd_sum = 0.0
    rebuilds = 0
    for i in range(stream.shape[0]):
        _insert(stream, coefs, i, sv_t, sv_sq, coef, n, row)
        kinv_append(k_inv, n, row, 1.0, jitter, work)
        n, wd, rebuilt = project_smallest(sv_t, sv_sq, coef, n + 1, GAMMA, k_inv, jitter, x_buf, row, work)
        wd_sum += wd
        rebuilds += rebuilt
    return n, wd_sum, rebuilds


@nb.njit(nogil=True)
def drive_remove_kinv(stream, coefs, sv_t, sv_sq, coef, n, k_inv, jitter, x_buf, row, work):
    wd_sum = 0.0
    for i in range(stream.shape[0]):
        _insert(stream, coefs, i, sv_t, sv_sq, coef, n, row)
        kinv_append(k_inv, n, row, 1.0, jitter, work)
        n, wd = remove_smallest(sv_t, sv_sq, coef, n + 1, k_inv, True, work)
        wd_sum += wd
    return n, wd_sum


@nb.njit(nogil=True)
def drive_base(stream, coefs, sv_t, sv_sq, coef, n, row):
    for i in range(stream.shape[0]):
        _insert(stream, coefs, i, sv_t, sv_sq, coef, n, row)
        n = remove_sv(sv_t, sv_sq, coef, n + 1, smallest_coefficient_slot(coef, n + 1))
    return n


@nb.njit(nogil=True)
def drive_merge(stream, coefs, sv_t, sv_sq, coef, n, x_buf, row, tables, diag, merge_work):
    wd_sum = 0.0
    for i in range(stream.shape[0]):
        _insert(stream, coefs, i, sv_t, sv_sq, coef, n, row)
        n, wd, _ = merge_smallest(
            sv_t,
            sv_sq,
            coef,
            n + 1,
            GAMMA,
            SOLVER_GSS,
            GSS_STANDARD_EPS,
            tables,
            tables,
            -1,
            diag,
            x_buf,
            merge_work,
            False,
        )
        wd_sum += wd
    return n, wd_sum


# ----------------------------------------------------------------------------- set-up
_REAL = {}
#: real data sets for the drift table (benchmarks.datasets): γ (MANIFEST.md hyperparameters)
REAL_SETS = {"a9a": 2.0**-7, "ijcnn1": 2.0}


def real_data(name):
    """(X dense float64, y ±1, γ) of a benchmark file, cached; raises FileNotFoundError."""
    if name not in _REAL:
        X, y, _, _ = datasets.load(name, dense=True)
        _REAL[name] = (X, np.where(y > 0, 1.0, -1.0), REAL_SETS[name])
    return _REAL[name]


class Setup:
    """A steady state of B SVs and a stream of new SVs (fresh copies for every run)."""

    def __init__(self, budget, steps, seed=0, data="uniform"):
        rng = np.random.default_rng(seed)
        n_total = budget + steps
        # Pegasos-like magnitudes (all ≈ equal) with random signs and a little spread
        self.c = rng.choice([-1.0, 1.0], size=n_total) * rng.uniform(0.9, 1.1, size=n_total)
        self.gamma = GAMMA
        if data == "clustered":  # few tight clusters in 3-D: ill-conditioned K
            centers = rng.normal(size=(4, 3))
            X = centers[np.arange(n_total) % 4] + 0.3 * rng.normal(size=(n_total, 3))
            self.gamma = 0.5
            self.gamma_note = "clustered 3-D"
        elif data == "uniform":
            X = rng.uniform(-1.0, 1.0, size=(n_total, D))
            self.gamma_note = "uniform 22-D"
        else:  # a real data set: rows in random order, signs from the labels
            X_all, y_all, self.gamma = real_data(data)
            rows = rng.permutation(X_all.shape[0])[:n_total]
            X = X_all[rows]
            self.c = np.abs(self.c) * y_all[rows]
            self.gamma_note = data
        self.X = np.ascontiguousarray(X)
        self.budget = budget
        d = X.shape[1]
        cap = budget + 1
        self.sv_t0 = np.zeros((d, cap))
        self.sv_t0[:, :budget] = self.X[:budget].T
        self.sv_sq0 = np.zeros(cap)
        self.sv_sq0[:budget] = np.sum(self.X[:budget] ** 2, axis=1)
        self.coef0 = np.zeros((cap, 1))
        self.coef0[:budget, 0] = self.c[:budget]
        self.stream = np.ascontiguousarray(self.X[budget:])
        self.stream_c = np.ascontiguousarray(self.c[budget:])
        self.x_buf = np.zeros(d)
        self.row = np.zeros(cap)
        self.work = np.zeros(cap)
        self.k_inv0 = np.zeros((cap, cap))
        kinv_rebuild(
            self.k_inv0, self.sv_t0, self.sv_sq0, budget, self.gamma, DEFAULT_JITTER, self.x_buf, self.row
        )

    def fresh(self):
        return self.sv_t0.copy(), self.sv_sq0.copy(), self.coef0.copy(), self.k_inv0.copy()


def time_variant(setup, name):
    """Seconds for one pass over the stream with variant ``name``."""
    sv_t, sv_sq, coef, k_inv = setup.fresh()
    B, s, c = setup.budget, setup.stream, setup.stream_c
    if name == "re-invert":
        S = setup.sv_t0[:, :B].T
        d2 = np.sum(S**2, 1)[:, None] + np.sum(S**2, 1)[None, :] - 2 * S @ S.T
        K = np.exp(-GAMMA * np.maximum(d2, 0.0)) + DEFAULT_JITTER * np.eye(B)
        reps = 3 if B >= 1000 else 10
        t0 = time.perf_counter()
        for _ in range(reps):
            np.linalg.inv(K)
        return (time.perf_counter() - t0) / reps * s.shape[0]
    t0 = time.perf_counter()
    if name == "project":
        drive_project(s, c, sv_t, sv_sq, coef, B, k_inv, DEFAULT_JITTER, setup.x_buf, setup.row, setup.work)
    elif name == "remove+k_inv":
        drive_remove_kinv(
            s, c, sv_t, sv_sq, coef, B, k_inv, DEFAULT_JITTER, setup.x_buf, setup.row, setup.work
        )
    elif name == "merge":
        drive_merge(
            s,
            c,
            sv_t,
            sv_sq,
            coef,
            B,
            setup.x_buf,
            setup.row,
            np.zeros((2, 2)),
            np.zeros(N_DIAG),
            np.zeros(2 * (B + 1)),
        )
    elif name == "base":
        drive_base(s, c, sv_t, sv_sq, coef, B, setup.row)
    elif name == "rebuild":
        reps = 3 if B >= 1000 else 10
        for _ in range(reps):
            kinv_rebuild(k_inv, sv_t, sv_sq, B, GAMMA, DEFAULT_JITTER, setup.x_buf, setup.row)
        return (time.perf_counter() - t0) / reps * s.shape[0]
    return time.perf_counter() - t0


VARIANTS = ("base", "project", "merge", "remove+k_inv", "re-invert", "rebuild")


def timings():
    # compile every driver once on a tiny state
    warm = Setup(10, 20)
    for name in VARIANTS:
        time_variant(warm, name)
    per_step = {B: {v: [] for v in VARIANTS} for B in BUDGETS}
    setups = {B: Setup(B, STEPS[B]) for B in BUDGETS}
    for _ in range(REPEATS):  # interleaved: noise hits all variants alike
        for B in BUDGETS:
            for name in VARIANTS:
                per_step[B][name].append(time_variant(setups[B], name) / STEPS[B])
    out = {}
    for B in BUDGETS:
        med = {v: float(np.median(per_step[B][v])) for v in VARIANTS}
        out[B] = {
            "raw_us": {v: med[v] * 1e6 for v in VARIANTS},
            "maintenance_us": {v: (med[v] - med["base"]) * 1e6 for v in ("project", "merge", "remove+k_inv")},
            "steps": STEPS[B],
            "repeats": REPEATS,
        }
    ratios = {}
    for lo, hi in ((100, 500), (500, 1000)):
        key = f"{hi}/{lo}"
        ratios[key] = {}
        for v in ("project", "merge", "remove+k_inv"):
            ratios[key][v] = out[hi]["maintenance_us"][v] / out[lo]["maintenance_us"][v]
        for v in VARIANTS:
            ratios[key][v + " (raw)"] = out[hi]["raw_us"][v] / out[lo]["raw_us"][v]
    return out, ratios


def drift(budget, steps, data, jitter):
    """Accuracy of the maintained K⁻¹ after ``steps`` projection steps (BSGD-like steady
    state), against np.linalg.inv, and how often the consistency check rebuilt it."""
    setup = Setup(budget, steps, seed=1, data=data)
    gamma = setup.gamma
    sv_t, sv_sq, coef, _ = setup.fresh()
    B = budget
    x_buf, row, work = setup.x_buf, setup.row, setup.work
    k_inv = np.zeros_like(setup.k_inv0)
    kinv_rebuild(k_inv, sv_t, sv_sq, B, gamma, jitter, x_buf, row)
    n = B
    rebuilds = 0
    t0 = time.perf_counter()
    for i in range(steps):
        x = setup.stream[i]
        rbf_row(x, float(x @ x), sv_t, sv_sq, n, gamma, row)
        sv_t[:, n] = x
        sv_sq[n] = x @ x
        coef[n, 0] = setup.stream_c[i]
        kinv_append(k_inv, n, row, 1.0, jitter, work)
        n, _, rebuilt = project_smallest(sv_t, sv_sq, coef, n + 1, gamma, k_inv, jitter, x_buf, row, work)
        rebuilds += rebuilt
    seconds = time.perf_counter() - t0
    S = sv_t[:, :n].T
    d2 = np.sum(S**2, 1)[:, None] + np.sum(S**2, 1)[None, :] - 2 * S @ S.T
    Ke = np.exp(-gamma * np.maximum(d2, 0.0)) + jitter * np.eye(n)
    ref = np.linalg.inv(Ke)
    return {
        "data": setup.gamma_note,
        "gamma": gamma,
        "B": budget,
        "steps": steps,
        "jitter": jitter,
        "rebuilds": rebuilds,
        "seconds": seconds,
        "cond": float(np.linalg.cond(Ke)),
        "rel_err": float(np.abs(k_inv[:n, :n] - ref).max() / np.abs(ref).max()),
        "resid": float(np.abs(np.eye(n) - k_inv[:n, :n] @ Ke).max()),
        "resid_lapack": float(np.abs(np.eye(n) - ref @ Ke).max()),
    }


def main():
    started = time.time()
    out, ratios = timings()
    cases = [(100, "uniform"), (100, "clustered"), (30, "clustered")]
    if all((data_dir() / datasets.SETS[name].train).exists() for name in REAL_SETS):
        cases += [(100, "ijcnn1"), (500, "ijcnn1"), (100, "a9a"), (500, "a9a")]
    else:
        print(f"benchmark data not found in {data_dir()} (SVMSTREAM_DATA): real-data rows skipped")
    drifts = [drift(B, 3000, data, jitter) for B, data in cases for jitter in (DEFAULT_JITTER, 1e-8)]
    result = {
        "benchmark": "projection",
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "numba": nb.__version__,
            "numpy": np.__version__,
        },
        "setting": {
            "d": D,
            "gamma": GAMMA,
            "data": "uniform [-1,1]^22",
            "jitter": DEFAULT_JITTER,
            "merge_solver": "gss (eps 0.01)",
        },
        "per_step": {str(B): v for B, v in out.items()},
        "ratio_500_over_100": ratios,
        "kinv_drift": drifts,
        "seconds": time.time() - started,
    }
    lines = [
        "# Budget maintenance cost per step: projection vs merging",
        "",
        f"d = {D}, uniform random data, RBF γ = {GAMMA}, jitter {DEFAULT_JITTER:g}; medians of "
        f"{REPEATS} interleaved repeats ({STEPS[100]} / {STEPS[500]} / {STEPS[1000]} steps at "
        "B = 100 / 500 / 1000). "
        "`python -m benchmarks.bench_projection`.",
        "",
        "maintenance = raw − base (base = kernel row of the new SV + plain removal, the part "
        "every step pays anyway).",
        "",
        "| variant | raw µs/step B=100 | B=500 | B=1000 | maintenance µs B=100 | B=500 | B=1000 "
        "| maint. ratio 500/100 | 1000/500 | raw ratio 500/100 | 1000/500 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        raw = " | ".join(f"{out[B]['raw_us'][v]:.1f}" for B in BUDGETS)
        if v in out[100]["maintenance_us"]:
            maint = " | ".join(f"{out[B]['maintenance_us'][v]:.1f}" for B in BUDGETS)
            mr = f"{ratios['500/100'][v]:.1f}× | {ratios['1000/500'][v]:.1f}×"
        else:
            maint, mr = "– | – | –", "– | –"
        rr = f"{ratios['500/100'][v + ' (raw)']:.1f}× | {ratios['1000/500'][v + ' (raw)']:.1f}×"
        lines.append(f"| {v} | {raw} | {maint} | {mr} | {rr} |")
    lines += [
        "",
        "Expected growth 100→500 / 500→1000: B² → 25× / 4× (project, remove+k_inv), "
        "B → 5× / 2× (merge), B³ → 125× / 8× (re-invert, rebuild). `rebuild` is one "
        "`kinv_rebuild` (kernel matrix + LAPACK inverse), only run when the consistency check "
        "of `project_smallest` fails.",
        "",
        "## Accuracy of the maintained K⁻¹ after many projection steps",
        "",
        "Steady state as above (append at slot B, project back to B); `rebuilds` = consistency-"
        "check rebuilds; residuals are max |I − M(K+εI)|, for the maintained M and for "
        "np.linalg.inv; s = wall time of the whole run (Python loop, rebuilds included). "
        "Real-data rows stream the set's rows in random order with the MANIFEST γ "
        "(a9a has duplicate rows and a flat kernel at γ = 2⁻⁷).",
        "",
        "| data | γ | B | steps | ε | cond(K + εI) | rebuilds | max rel. error vs np.linalg.inv "
        "| residual | LAPACK residual | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in drifts:
        lines.append(
            f"| {r['data']} | {r['gamma']} | {r['B']} | {r['steps']} | {r['jitter']:g} | "
            f"{r['cond']:.1e} | {r['rebuilds']} | {r['rel_err']:.1e} | {r['resid']:.1e} | "
            f"{r['resid_lapack']:.1e} | {r['seconds']:.2f} |"
        )
    lines.append("")
    table = [
        {
            "part": "per step",
            "variant": v,
            **{f"raw µs B={B}": out[B]["raw_us"][v] for B in BUDGETS},
            **{f"maintenance µs B={B}": out[B]["maintenance_us"].get(v) for B in BUDGETS},
        }
        for v in VARIANTS
    ] + [{"part": "K⁻¹ drift", **r} for r in drifts]
    write_results("projection", result, table, "Budget maintenance cost per step", markdown="\n".join(lines))


if __name__ == "__main__":
    main()
