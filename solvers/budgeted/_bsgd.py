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

import numba as nb
import numpy as np

from ._decision import squared_model_norm
from ._maintenance import add_support_vector, maintain_budget
from ._sparse_pool import pool_room, pool_row_log, row_close, row_open
from ._state import (
    C_N_SV,
    C_SCHED_SHIFT,
    C_STEPS,
    C_VIOLATIONS,
    R_NORM2,
    R_SCALE,
    RESCALE_BELOW,
    SCHED_CONSTANT,
    SCHED_NORMA,
    SCHED_PEGASOS,
    SCHED_PERCEPTRON,
)


@nb.njit(nogil=True, cache=True)
def learning_rate(schedule, t, lam, eta0):
    """(η_t, shrink factor 1 − η_t·λ) of step t ≥ 1 under ``schedule`` (the perceptron: no shrink)."""
    if schedule == SCHED_PEGASOS:
        eta = 1.0 / (lam * t)
    elif schedule == SCHED_NORMA:
        eta = eta0 / np.sqrt(t)
    elif schedule == SCHED_CONSTANT:
        eta = eta0
    else:
        return eta0, 1.0
    return eta, 1.0 - eta * lam


@nb.njit(nogil=True, cache=True, inline="always")
def step_loss(f, label, n_classes):
    """The loss of one step from the margins ``f`` (K,) before it: ``(violated, plus, minus,
    sign)``.  Binary (K = 1): hinge, violated when y·f < 1, ``plus`` = 0, ``minus`` = −1,
    ``sign`` = y.  Multi-class: Crammer–Singer 1 + f_r − f_y > 0 with r the most violating
    other class (``minus``), ``plus`` = y, ``sign`` = 1 (Wang et al. 2012, §5).  Shared by the
    kernel step and the linear step (``_linear.py``)."""
    if n_classes == 1:
        return label * f[0] < 1.0, 0, -1, label
    plus = int(label)
    minus = 0 if plus != 0 else 1
    for c in range(n_classes):
        if c != plus and f[c] > f[minus]:
            minus = c
    return 1.0 + f[minus] - f[plus] > 0.0, plus, minus, 1.0


@nb.njit(nogil=True, cache=True, inline="always")
def norm2_gain(f_row, bias, plus, minus, sign, eta, xx, n_classes):
    """‖w + Δw‖² − ‖w‖² of a violating step (margin perceptron's ball projection):
    2η·y·(w·x) + η²·k(x, x) binary, 2η·(f_y − f_r) + 2η²·k(x, x) multi-class; ``f_row`` holds
    f before the step including the bias (removed here), ``xx`` = k(x, x) (1 for the RBF kernel,
    ‖x‖² for the linear one)."""
    if n_classes == 1:
        return 2.0 * eta * sign * (f_row[0] - bias[0]) + eta * eta * xx
    return 2.0 * eta * (f_row[plus] - f_row[minus] - bias[plus] + bias[minus]) + 2.0 * eta * eta * xx


# Long on purpose: one numba call per batch runs Algorithm 1's whole per-example loop (margin,
# shrink, violation, add, maintenance) so the GIL is released once per batch; its parts that
# stand alone (learning_rate, add_support_vector, maintain_budget) are already separate kernels.
# size: one numba kernel, the per-example loop of Algorithm 1 (one call per batch)
@nb.njit(nogil=True, cache=True)
def bsgd_steps(
    X,
    labels,
    weights,
    order,
    sv_t,
    sv_sq,
    coef,
    bias,
    counters,
    reals,
    k_inv,
    gamma,
    lam,
    eta0,
    radius,
    budget,
    schedule,
    maintenance,
    use_bias,
    profile,
    margins_out,
    f_buf,
    scratch,
):
    """Apply one BSGD step per example, in the given order.

    Parameters
    ----------
    X : (n, d) float64, C-contiguous, rows are examples (dense pool); or CSR arrays
        ``(data float64, indices int32 sorted per row, indptr int64)`` (sparse pool)
    labels : (n,) float64 — binary (K = 1): ±1; multi-class: class index 0..K−1
    weights : (n,) float64 >= 0 — importance weights (ones: the unweighted step); the step's
        gradient term is scaled by w (η_t·w·y enters, the bias moves by η_t·w·y), the shrink
        (1 − η_t λ) and t are those of an unweighted step; w = 0: no step at all (t, the
        shrink and the model unchanged; the margin is still reported)
    order : (m,) int64, row indices of X to apply, in this order
    sv_t, sv_sq, coef, bias, counters, reals, k_inv : model state (module docstring); ``sv_t``
        is the SV pool: the dense (d, B+1) matrix or the sparse tuple of :mod:`._sparse_pool`
    gamma : RBF γ; lam : λ (ignored by the perceptron); eta0 : η of Norma / perceptron
    radius : U of the margin perceptron's ball projection
    budget : B (``sv_t`` has B + 1 columns)
    schedule : ``SCHED_*`` code
    maintenance : :class:`._maintenance.Maintenance` — the ``MAINT_*`` code, merge solver, GSS
        tolerance, lookup tables and side-by-side comparison (``diag`` updated in place)
    use_bias : bool
    profile : bool, accumulate the wall time of maintenance in ``reals[R_MERGE_SECONDS]``
    margins_out : (m, K) float64, receives f(x) before each step
    f_buf : (K,) float64 — scratch
    scratch : :class:`._maintenance.Scratch` — ``x_buf`` (d,), ``row_buf`` (2·(B+1),) float64

    Returns
    -------
    int : steps applied — ``order.shape[0]``, or fewer when a sparse pool's arena has no room
    for the next step (:func:`._sparse_pool.pool_room`; :func:`._sparse_pool.run_with_room`
    grows it and calls again with the rest: the model is the same as in one call).
    """
    x_buf, row_buf = scratch
    n_sv = counters[C_N_SV]
    t = counters[C_STEPS]
    shift = counters[C_SCHED_SHIFT]  # a drift reset restarts the schedule without losing the count
    scale = reals[R_SCALE]
    n_classes = coef.shape[1]
    done = order.shape[0]
    for r in range(order.shape[0]):
        i = order[r]
        if not pool_room(sv_t, X, i, n_sv):  # sparse pool: the caller grows the arena and goes on
            done = r
            break
        x, x_sq = row_open(X, i, sv_t)
        label = labels[i]
        w = weights[i]
        pool_row_log(sv_t, x, x_sq, sv_sq, n_sv, gamma, row_buf, row_buf[row_buf.shape[0] // 2 :])
        for c in range(n_classes):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            f_buf[c] = scale * acc + bias[c]
            margins_out[r, c] = f_buf[c]

        if w == 0.0:  # a zero weight: no step (scikit-learn's sample_weight=0 drops the row)
            row_close(X, i, sv_t)
            continue
        # loss and the classes that receive ±η·w
        violated, plus, minus, sign = step_loss(f_buf, label, n_classes)

        t += 1
        eta, shrink = learning_rate(schedule, t - shift, lam, eta0)
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
            f_buf[plus] = eta * w * sign / scale
            if minus >= 0:
                f_buf[minus] = -eta * w / scale
            n_sv = add_support_vector(
                X, i, x, x_sq, f_buf, sv_t, sv_sq, coef, n_sv, maintenance, k_inv, row_buf, profile, reals
            )
            if use_bias:
                bias[plus] += eta * w * sign
                if minus >= 0:
                    bias[minus] -= eta * w
            if schedule == SCHED_PERCEPTRON:
                # ‖w + η·w_i·φ(x)‖² with k(x, x) = 1; margins_out holds f including the bias
                reals[R_NORM2] += norm2_gain(margins_out[r], bias, plus, minus, sign, eta * w, 1.0, n_classes)
            if n_sv > budget:
                n_sv = maintain_budget(
                    sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, counters, reals, scale, profile,
                    scratch,
                )  # fmt: skip
                if schedule == SCHED_PERCEPTRON:
                    reals[R_NORM2] = (
                        scale * scale * squared_model_norm(sv_t, sv_sq, coef, n_sv, gamma, x_buf, row_buf)
                    )
            if schedule == SCHED_PERCEPTRON and reals[R_NORM2] > radius * radius:
                factor = radius / np.sqrt(reals[R_NORM2])
                scale *= factor
                reals[R_NORM2] = radius * radius
        if scale < RESCALE_BELOW:
            for j in range(n_sv):
                for c in range(n_classes):
                    coef[j, c] *= scale
            scale = 1.0
        row_close(X, i, sv_t)
    counters[C_N_SV] = n_sv
    counters[C_STEPS] = t
    reals[R_SCALE] = scale
    return done
