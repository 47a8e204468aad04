"""Streaming steps with rehearsal for the regressor and the one-class SVM (numba kernels).

Per received example, in stream order: the example's own step; the example offered to a
uniform reservoir of the stream (Vitter 1985, Algorithm R); then ``rehearsal`` extra steps on
rows drawn uniformly from the reservoir.  For the dual coordinate regressor an extra step is a
dataset-mode coordinate step with the remembered row's own dual variable α (kept beside it),
so rehearsal carries BSCA's dataset mode (Qaadan, Schüler & Glasmachers 2019) over to a
stream: the reservoir is the data set; for the one-class SVM it is one more NORMA step.

Random numbers come in as uniforms (``draws``: 1 + ``rehearsal`` per example, from the
pipeline's generator), so the result does not depend on how the stream is cut into batches.

Memory layout (preallocated by the pipeline): ``mem_X`` (M, d) float64, ``mem_y`` (M,),
``mem_a`` (M,) the dual variables (regression), ``mem_n`` (2,) int64 = (rows held, rows seen),
``mem_w`` (M,) the rows' importance weights: a rehearsal step on a remembered row uses that
row's weight (``docs/weights.md``).  The pipeline drops rows of weight 0 before they get here
(a zero-weight row is as if it had not been sent, so it is never remembered).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._state import C_STEPS, C_VIOLATIONS, SCHED_PEGASOS
from ._task_steps import oneclass_sgd_steps, svr_sca_steps


@nb.njit(nogil=True, cache=True, inline="always")
def _reservoir_slot(mem_n, capacity, u):
    """Algorithm R: the slot the next row takes (−1: not kept); counts it as seen."""
    held = mem_n[0]
    seen = mem_n[1]
    mem_n[1] = seen + 1
    if held < capacity:
        mem_n[0] = held + 1
        return held
    j = int(u * (seen + 1))
    return j if j < capacity else -1


@nb.njit(nogil=True, cache=True)
def _remember(mem_X, mem_y, mem_w, slot, X, i, y_i, w_i):
    for k in range(X.shape[1]):
        mem_X[slot, k] = X[i, k]
    mem_y[slot] = y_i
    mem_w[slot] = w_i


# Long on purpose: the per-example loop (own step, reservoir, extra steps) in one call per batch.
@nb.njit(nogil=True, cache=True)
def svr_sca_stream(
    X, y, weights, C, epsilon, sv_t, sv_sq, coef, counters, reals, k_inv, gamma, budget, maintenance,
    scratch, mem_X, mem_y, mem_a, mem_n, mem_w, mem_s, rehearsal, draws, out, min_delta,
):  # fmt: skip
    """Streaming-mode dual coordinate steps on the rows of X (n, d) with targets y (n,) and
    importance weights ``weights`` (n,) (the box of row i is C·w_i), each
    followed by its reservoir offer and ``rehearsal`` dataset-mode steps on reservoir rows.
    ``out`` (n,) receives f(x) before each row's own step; ``draws`` (n·(1 + rehearsal),)
    uniforms in [0, 1).  ``mem_s`` (M,): each remembered row's latest out-of-sample absolute
    residual — its prequential |y − f| when it is remembered, then at each rehearsal draw
    |y_j − (f(x_j) − α_j)|, the model without the row's own coefficient α_j (k(x, x) = 1; a
    leave-one-out residual, approximate where merging moved that coefficient).  ``min_delta``:
    the rehearsal steps' (:func:`._task_steps.svr_sca_steps`); the own steps take every δ.
    Other parameters as :func:`._task_steps.svr_sca_steps`."""
    one = np.zeros(1, dtype=np.int64)
    f_own = np.zeros(1)
    f_extra = np.zeros(1)
    no_alpha = np.zeros(0)
    capacity = mem_X.shape[0]
    per = 1 + rehearsal
    for i in range(X.shape[0]):
        one[0] = i
        a_own = svr_sca_steps(
            X, y, weights, one, no_alpha, True, C, epsilon, sv_t, sv_sq, coef, counters, reals, k_inv, gamma,
            budget, maintenance, f_own, scratch, 0.0,
        )  # fmt: skip
        out[i] = f_own[0]
        if capacity == 0:
            continue
        slot = _reservoir_slot(mem_n, capacity, draws[i * per])
        if slot >= 0:
            _remember(mem_X, mem_y, mem_w, slot, X, i, y[i], weights[i])
            mem_a[slot] = a_own  # the α its own step gave it
            mem_s[slot] = abs(y[i] - f_own[0])
        for k in range(rehearsal):
            j = int(draws[i * per + 1 + k] * mem_n[0])
            one[0] = j
            own = mem_a[j]  # its own coefficient's share of f(x_j): α_j·k(x_j, x_j) = α_j
            svr_sca_steps(
                mem_X, mem_y, mem_w, one, mem_a, False, C, epsilon, sv_t, sv_sq, coef, counters, reals, k_inv,
                gamma, budget, maintenance, f_extra, scratch, min_delta,
            )  # fmt: skip
            mem_s[j] = abs(mem_y[j] - (f_extra[0] - own))
    return X.shape[0]


@nb.njit(nogil=True, cache=True)
def oneclass_stream(
    X, weights, sv_t, sv_sq, coef, rho, counters, reals, k_inv, gamma, nu, eta0, budget, schedule,
    maintenance, scratch, mem_X, mem_n, mem_w, mem_a, mem_s, rehearsal, draws, out,
):  # fmt: skip
    """NORMA novelty steps on the rows of X (n, d) with importance weights ``weights`` (n,),
    each followed by its reservoir offer and ``rehearsal`` extra steps on reservoir rows;
    ``out`` (n,) receives score − ρ before each row's own step.

    ``mem_s`` (M,): each remembered row's latest out-of-sample anomaly score ρ − f — its
    prequential score when it is remembered, then at each rehearsal draw the score under the
    current model without the row's own coefficients.  Under the Pegasos schedule a row that
    entered the model at step t₀ with η = 1/(νt₀) weighs w/(νt₀)·Π_{t₀<t≤T}(1 − 1/t) = w/(νT)
    after T steps whenever it entered, so its own part of f(x_j) is ``mem_a[j]``/(νT) with
    ``mem_a[j]`` the weight summed over its entries (k(x, x) = 1; approximate where merging
    moved it); under the other schedules nothing is taken off.  Parameters as
    :func:`._task_steps.oneclass_sgd_steps` and :func:`svr_sca_stream`."""
    one = np.zeros(1, dtype=np.int64)
    f_own = np.zeros(1)
    f_extra = np.zeros(1)
    capacity = mem_X.shape[0]
    per = 1 + rehearsal
    own_part = schedule == SCHED_PEGASOS
    for i in range(X.shape[0]):
        one[0] = i
        entered = counters[C_VIOLATIONS]
        oneclass_sgd_steps(
            X, weights, one, sv_t, sv_sq, coef, rho, counters, reals, k_inv, gamma, nu, eta0, budget, schedule,
            maintenance, f_own, scratch,
        )  # fmt: skip
        out[i] = f_own[0]
        if capacity == 0:
            continue
        slot = _reservoir_slot(mem_n, capacity, draws[i * per])
        if slot >= 0:
            for k in range(X.shape[1]):
                mem_X[slot, k] = X[i, k]
            mem_w[slot] = weights[i]
            mem_a[slot] = weights[i] if counters[C_VIOLATIONS] > entered else 0.0
            mem_s[slot] = -f_own[0]
        for k in range(rehearsal):
            j = int(draws[i * per + 1 + k] * mem_n[0])
            one[0] = j
            steps = counters[C_STEPS]
            own = mem_a[j] / (nu * steps) if own_part and steps > 0 else 0.0
            entered = counters[C_VIOLATIONS]
            oneclass_sgd_steps(
                mem_X, mem_w, one, sv_t, sv_sq, coef, rho, counters, reals, k_inv, gamma, nu, eta0, budget,
                schedule, maintenance, f_extra, scratch,
            )  # fmt: skip
            mem_s[j] = own - f_extra[0]
            if counters[C_VIOLATIONS] > entered:
                mem_a[j] += mem_w[j]
    return X.shape[0]
