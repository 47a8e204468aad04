"""Budgeted stochastic gradient descent (BSGD) batch steps for the kernel SVM.

Source: Wang, Crammer & Vucetic (2012), "Breaking the curse of kernelization: budgeted
stochastic gradient descent for large-scale SVM training", JMLR 13: Algorithm 1 (binary),
§5 (multi-class, Crammer–Singer), Table 2 (learning-rate schedules), §6 (budget
maintenance); merging as in Glasmachers & Qaadan (2018), Algorithm 1.

The model is ``w_c = scale · Σ_j coef[j, c] · φ(sv_j)`` (+ optional bias ``b_c``), with
one column per class for the multi-class model and a single column for the binary one.
One binary step on ``(x, y)``, y ∈ {−1, +1}:

1. ``f = w_t·φ(x) + b`` (the prediction *before* the update, reported in ``margins_out``);
2. ``w ← (1 − η_t λ)·w`` — applied to the scalar ``scale`` only (Pegasos scale trick); a
   factor ≤ 0 (Pegasos at t = 1) clears the model;
3. if ``y·f < 1``: add x as SV with effective coefficient ``η_t·y`` (raw ``η_t·y/scale``),
   and ``b += η_t·y`` when the bias is on;
4. if the model holds B + 1 SVs: budget maintenance (merge, remove or project);
5. margin perceptron only: project w onto the ball of radius U (Theorem 3).

Multi-class steps use the Crammer–Singer loss ``1 + f_r(x) − f_y(x)`` with r the most
violating other class: on a violation x enters with ``+η_t`` for class y and ``−η_t`` for r.

When ``scale`` falls below 1e-6 it is folded into the coefficients.  Every step is a pure
function of the state and the example, so splitting a stream into batches differently
gives bit-identical models.

State layout (all preallocated, owned by the estimator):

* ``sv_t`` (d, B+1) float64 — SVs as columns; ``sv_sq`` (B+1,) float64 — their ‖·‖²;
* ``coef`` (B+1, K) float64 — raw coefficients (K = 1 for binary models);
* ``bias`` (K,) float64;
* ``counters`` int64 array, indices ``C_*``; ``reals`` float64 array, indices ``R_*``;
* ``k_inv`` (B+1, B+1) float64 — inverse kernel matrix, maintained for projection only.
"""

from __future__ import annotations

import warnings

import numba as nb
import numpy as np

from .kernels import rbf_row, rbf_row_and_log, squared_norm
from .gss import GSS_PRECISE_EPS
from .merging import SOLVER_GSS, merge_smallest, merge_smallest_multiclass
from .projection import DEFAULT_JITTER, kinv_append, kinv_rebuild, project_smallest, remove_smallest

# counters[...]
C_N_SV = 0
C_STEPS = 1
C_MERGES = 2
C_VIOLATIONS = 3
C_MAINTENANCE = 4
N_COUNTERS = 5
# reals[...]
R_SCALE = 0
R_WD_SUM = 1  # Σ weight degradation (effective units) over maintenance events
R_NORM2 = 2  # ‖w‖² (kept for the margin perceptron's ball projection only)
R_MERGE_SECONDS = 3  # wall time spent in budget maintenance (when profiling)
N_REALS = 4

# schedules (Table 2 of Wang et al. 2012)
SCHED_PEGASOS = 0  # η_t = 1/(λt)
SCHED_NORMA = 1  # η_t = η/√t
SCHED_PERCEPTRON = 2  # λ = 0, η_t = η, projection onto ‖w‖ ≤ U
SCHEDULES = {"pegasos": SCHED_PEGASOS, "norma": SCHED_NORMA, "perceptron": SCHED_PERCEPTRON}

# budget maintenance (§6)
MAINT_MERGE = 0
MAINT_REMOVE = 1
MAINT_PROJECT = 2
MAINTENANCE = {"merge": MAINT_MERGE, "remove": MAINT_REMOVE, "project": MAINT_PROJECT}

RESCALE_BELOW = 1e-6
#: projection: the maintained K⁻¹ is rebuilt from scratch every this many × B maintenance
#: events, bounding the rounding drift of the O(B²) incremental updates (docs/projection.md)
KINV_REBUILD_EVERY_B = 10

# _clock() enters object mode only for the clock read (profiling); numba warns about it once.
warnings.filterwarnings("ignore", message="Code running in object mode won't allow parallel")


@nb.njit(nogil=True, cache=True)
def _clock():
    with nb.objmode(now="f8"):
        now = _perf_counter()
    return now


def _perf_counter():
    import time

    return time.perf_counter()


@nb.njit(nogil=True, cache=True)
def learning_rate(schedule, t, lam, eta0):
    """(η_t, shrink factor 1 − η_t·λ) of step t ≥ 1 under ``schedule``."""
    if schedule == SCHED_PEGASOS:
        eta = 1.0 / (lam * t)
    elif schedule == SCHED_NORMA:
        eta = eta0 / np.sqrt(t)
    else:
        return eta0, 1.0
    return eta, 1.0 - eta * lam


@nb.njit(nogil=True, cache=True)
def squared_model_norm(sv_t, sv_sq, coef, n_sv, gamma, x_buf, row_buf):
    """Σ_c ‖Σ_j coef[j,c]·φ(sv_j)‖² (raw coefficients), O(n_sv²·d)."""
    total = 0.0
    for i in range(n_sv):
        for k in range(sv_t.shape[0]):
            x_buf[k] = sv_t[k, i]
        rbf_row(x_buf, sv_sq[i], sv_t, sv_sq, n_sv, gamma, row_buf)
        for c in range(coef.shape[1]):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            total += coef[i, c] * acc
    return total


@nb.njit(nogil=True, cache=True)
def _maintain(sv_t, sv_sq, coef, n_sv, gamma, maintenance, solver, eps, h_table, wd_table,
              ref_solver, diag, k_inv, x_buf, row_buf, known_row):
    """Bring the model back to B SVs; returns (n_sv, wd in raw units², merged flag).

    ``row_buf`` is (2·capacity,) scratch; ``k_inv`` is the maintained inverse kernel matrix
    (projection only); ``known_row``: see :func:`solvers.merging.merge_smallest`."""
    cap = row_buf.shape[0] // 2
    if maintenance == MAINT_REMOVE:
        n_new, wd = remove_smallest(sv_t, sv_sq, coef, n_sv, k_inv, False, row_buf)
        return n_new, wd, 0
    if maintenance == MAINT_PROJECT:
        n_new, wd, _ = project_smallest(sv_t, sv_sq, coef, n_sv, gamma, k_inv, DEFAULT_JITTER,
                                        x_buf, row_buf[:cap], row_buf[cap:])
        return n_new, wd, 0
    if coef.shape[1] == 1:
        return merge_smallest(sv_t, sv_sq, coef, n_sv, gamma, solver, eps, h_table, wd_table,
                              ref_solver, diag, x_buf, row_buf, known_row)
    # Multi-class WD has no lookup table: every solver but GSS-standard runs GSS-precise.
    multiclass_eps = eps if solver == SOLVER_GSS else GSS_PRECISE_EPS
    n_new, wd = merge_smallest_multiclass(sv_t, sv_sq, coef, n_sv, gamma, multiclass_eps, x_buf, row_buf)
    return n_new, wd, 1


@nb.njit(nogil=True, cache=True)
def add_support_vector(x, x_sq, weights, sv_t, sv_sq, coef, n_sv, maintenance, k_inv, row_buf,
                       profile, reals):
    """Add ``weights`` (K,) · φ(x) to the model; returns the new SV count.

    ``row_buf[:n_sv]`` must hold k(x, sv_j) from the margin computation.  If the model
    already holds x itself (k(x, sv_j) = 1 exactly: the distance of identical vectors is
    computed as exactly 0), the weights are added to that SV — the same function, with no
    approximation and no budget maintenance (BSCA revisits training points, BSGD sees
    them again in later epochs).  Otherwise x is appended at slot ``n_sv``; with projection
    the maintained K⁻¹ is extended in O(n²) using the kernel row; that update is part of
    projection's maintenance cost and is timed as such when ``profile`` is set."""
    for j in range(n_sv):
        if row_buf[j] == 1.0:
            for c in range(coef.shape[1]):
                coef[j, c] += weights[c]
            return n_sv
    if maintenance == MAINT_PROJECT:
        started = _clock() if profile else 0.0
        cap = row_buf.shape[0] // 2
        kinv_append(k_inv, n_sv, row_buf[:cap], 1.0, DEFAULT_JITTER, row_buf[cap:])
        if profile:
            reals[R_MERGE_SECONDS] += _clock() - started
    for k in range(x.shape[0]):
        sv_t[k, n_sv] = x[k]
    sv_sq[n_sv] = x_sq
    for c in range(coef.shape[1]):
        coef[n_sv, c] = weights[c]
    return n_sv + 1


@nb.njit(nogil=True, cache=True)
def maintain_budget(sv_t, sv_sq, coef, n_sv, gamma, maintenance, solver, eps, h_table, wd_table,
                    ref_solver, diag, k_inv, counters, reals, scale, profile, x_buf, row_buf,
                    known_row):
    """Budget maintenance with its bookkeeping (counters, Σ WD, timing, periodic K⁻¹ rebuild);
    returns the new SV count.  Shared by the BSGD and BSCA steps."""
    started = _clock() if profile else 0.0
    n_sv, wd, merged = _maintain(sv_t, sv_sq, coef, n_sv, gamma, maintenance, solver, eps,
                                 h_table, wd_table, ref_solver, diag, k_inv, x_buf, row_buf,
                                 known_row)
    counters[C_MAINTENANCE] += 1
    counters[C_MERGES] += merged
    reals[R_WD_SUM] += wd * scale * scale
    if maintenance == MAINT_PROJECT and counters[C_MAINTENANCE] % (KINV_REBUILD_EVERY_B * n_sv) == 0:
        cap = row_buf.shape[0] // 2
        kinv_rebuild(k_inv, sv_t, sv_sq, n_sv, gamma, DEFAULT_JITTER, x_buf, row_buf[:cap])
    if profile:
        reals[R_MERGE_SECONDS] += _clock() - started
    return n_sv


@nb.njit(nogil=True, cache=True)
def bsgd_steps(X, labels, order, sv_t, sv_sq, coef, bias, counters, reals, k_inv,
               gamma, lam, eta0, radius, budget, schedule, maintenance, use_bias,
               merge_solver, gss_eps, h_table, wd_table, ref_solver, diag, profile,
               margins_out, f_buf, x_buf, row_buf):
    """Apply one BSGD step per example, in the given order.

    Parameters
    ----------
    X : (n, d) float64, C-contiguous; rows are examples
    labels : (n,) float64 — binary (K = 1): ±1; multi-class: class index 0..K−1
    order : (m,) int64, row indices of X to apply, in this order
    sv_t, sv_sq, coef, bias, counters, reals, k_inv : model state (module docstring)
    gamma : RBF γ; lam : λ (ignored by the perceptron); eta0 : η of Norma / perceptron
    radius : U of the margin perceptron's ball projection
    budget : B (``sv_t`` has B + 1 columns)
    schedule, maintenance, merge_solver : ``SCHED_*``, ``MAINT_*``, merge ``SOLVER_*`` codes
    use_bias : bool; gss_eps : GSS tolerance of GSS-standard
    h_table, wd_table : merge lookup tables; ref_solver, diag : side-by-side comparison
        of the merge solver against ``ref_solver`` (−1: off), see ``merge_smallest``
    profile : bool, accumulate the wall time of maintenance in ``reals[R_MERGE_SECONDS]``
    margins_out : (m, K) float64, receives f(x) before each step
    f_buf : (K,) float64; x_buf : (d,) float64; row_buf : (2·(B+1),) float64 — scratch
    """
    n_sv = counters[C_N_SV]
    t = counters[C_STEPS]
    scale = reals[R_SCALE]
    n_classes = coef.shape[1]
    for r in range(order.shape[0]):
        x = X[order[r]]
        label = labels[order[r]]
        x_sq = squared_norm(x)
        rbf_row_and_log(x, x_sq, sv_t, sv_sq, n_sv, gamma, row_buf, row_buf[row_buf.shape[0] // 2:])
        for c in range(n_classes):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            f_buf[c] = scale * acc + bias[c]
            margins_out[r, c] = f_buf[c]

        # loss and the classes that receive ±η
        if n_classes == 1:
            violated = label * f_buf[0] < 1.0
            plus = 0
            minus = -1
            sign = label
        else:
            plus = int(label)
            minus = 0 if plus != 0 else 1
            for c in range(n_classes):
                if c != plus and f_buf[c] > f_buf[minus]:
                    minus = c
            violated = 1.0 + f_buf[minus] - f_buf[plus] > 0.0
            sign = 1.0

        t += 1
        eta, shrink = learning_rate(schedule, t, lam, eta0)
        if shrink <= 0.0:
            for j in range(n_sv):
                for c in range(n_classes):
                    coef[j, c] = 0.0
            n_sv = 0
            scale = 1.0
            reals[R_NORM2] = 0.0
        else:
            scale *= shrink
        if violated:
            counters[C_VIOLATIONS] += 1
            for c in range(n_classes):
                f_buf[c] = 0.0
            f_buf[plus] = eta * sign / scale
            if minus >= 0:
                f_buf[minus] = -eta / scale
            n_sv = add_support_vector(x, x_sq, f_buf, sv_t, sv_sq, coef, n_sv, maintenance, k_inv,
                                      row_buf, profile, reals)
            if use_bias:
                bias[plus] += eta * sign
                if minus >= 0:
                    bias[minus] -= eta
            if schedule == SCHED_PERCEPTRON:
                # ‖w + ηφ(x)‖² with k(x, x) = 1; margins_out holds f including the bias
                if n_classes == 1:
                    reals[R_NORM2] += 2.0 * eta * sign * (margins_out[r, 0] - bias[0]) + eta * eta
                else:
                    reals[R_NORM2] += (2.0 * eta * (margins_out[r, plus] - margins_out[r, minus]
                                                    - bias[plus] + bias[minus]) + 2.0 * eta * eta)
            if n_sv > budget:
                n_sv = maintain_budget(sv_t, sv_sq, coef, n_sv, gamma, maintenance, merge_solver,
                                       gss_eps, h_table, wd_table, ref_solver, diag, k_inv,
                                       counters, reals, scale, profile, x_buf, row_buf,
                                       maintenance == MAINT_MERGE)
                if schedule == SCHED_PERCEPTRON:
                    reals[R_NORM2] = scale * scale * squared_model_norm(
                        sv_t, sv_sq, coef, n_sv, gamma, x_buf, row_buf)
            if schedule == SCHED_PERCEPTRON and reals[R_NORM2] > radius * radius:
                factor = radius / np.sqrt(reals[R_NORM2])
                scale *= factor
                reals[R_NORM2] = radius * radius
        if scale < RESCALE_BELOW:
            for j in range(n_sv):
                for c in range(n_classes):
                    coef[j, c] *= scale
            scale = 1.0
    counters[C_N_SV] = n_sv
    counters[C_STEPS] = t
    reals[R_SCALE] = scale


@nb.njit(nogil=True, cache=True)
def rbf_decision_batch(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, out, row_buf):
    """``out[i, c] = scale · Σ_j coef[j, c]·exp(−γ‖X[i] − sv_j‖²) + bias[c]``.

    X : (n, d) float64; out : (n, K) float64; row_buf : (>= n_sv,) float64 scratch.
    """
    for i in range(X.shape[0]):
        x = X[i]
        rbf_row(x, squared_norm(x), sv_t, sv_sq, n_sv, gamma, row_buf)
        for c in range(coef.shape[1]):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            out[i, c] = scale * acc + bias[c]
