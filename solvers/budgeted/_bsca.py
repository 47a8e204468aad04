"""Budgeted stochastic coordinate ascent (BSCA) on the SVM dual.

Source: Qaadan, Schüler & Glasmachers (2019), "Dual SVM training on a budget", ICPRAM,
Algorithm 2.

The dual of the bias-free SVM is ``max_α Σα_i − ½ Σ α_i α_j y_i y_j k(x_i, x_j)`` subject
to ``0 ≤ α_i ≤ C``.  Its weight vector ``w = Σ α_i y_i φ(x_i)`` is represented by a
budgeted model ``M = {(β_j, x̃_j)}`` with at most B entries.  One iteration on coordinate i:

    f̃(x_i) = Σ_j β_j k(x_i, x̃_j)
    δ = [α_i + (1 − y_i·f̃(x_i)) / Q_ii]_0^C − α_i,     Q_ii = k(x_i, x_i) = 1 (RBF)
    if δ ≠ 0:  α_i += δ;  add (δ·y_i, x_i) to M;  if |M| > B: budget maintenance

*Dataset mode* keeps α (one per training point) and draws i uniformly at random; an epoch
is n iterations.  *Streaming mode* treats every arriving example as a fresh coordinate
with α = 0 that is never revisited, so one step is ``δ = [(1 − y·f̃(x))/k(x,x)]_0^C``.

The state arrays are those of :mod:`svmstream.solvers.budgeted._bsgd` (``scale`` stays 1: coordinate ascent
never shrinks the model), so the same budget maintenance applies.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._maintenance import add_support_vector, maintain_budget
from ._sparse_pool import pool_room, pool_row_log, row_close, row_open
from ._state import C_N_SV, C_STEPS, C_VIOLATIONS


# Long on purpose: like bsgd_steps, the whole per-example loop of Algorithm 2 in one numba call
# per batch; maintenance and the kernel row are separate kernels it calls.
# size: one numba kernel, the per-example loop of Algorithm 2 (one call per batch)
@nb.njit(nogil=True, cache=True)
def bsca_steps(
    X,
    y,
    weights,
    order,
    alpha,
    stream,
    C,
    sv_t,
    sv_sq,
    coef,
    counters,
    reals,
    k_inv,
    gamma,
    budget,
    maintenance,
    profile,
    margins_out,
    scratch,
):
    """Apply one BSCA iteration per entry of ``order`` (Algorithm 2).

    Parameters
    ----------
    X : (n, d) float64, C-contiguous (dense pool), or CSR arrays ``(data, indices int32,
        indptr int64)`` (sparse pool), as :func:`svmstream.solvers.budgeted._bsgd.bsgd_steps`
    y : (n,) float64 in {−1, +1}
    weights : (n,) float64 >= 0 — importance weights (ones: unweighted): coordinate i's box
        is ``0 ≤ α_i ≤ C·w_i`` (the dual of Σ C·w_i·hinge_i, LIBSVM's per-instance weights);
        w = 0: no iteration (counted nowhere, the model unchanged)
    order : (m,) int64 — coordinates to visit, in this order (dataset mode: drawn uniformly
        at random by the caller; streaming mode: each row once)
    alpha : (n,) float64 dual variables (dataset mode; ignored in streaming mode)
    stream : bool — streaming mode (fresh coordinate with α = 0 per example)
    C : float — box constraint, C = 1/(nλ)
    sv_t, sv_sq, coef (capacity, 1), counters, reals, k_inv : model state as in
        :mod:`svmstream.solvers.budgeted._bsgd` (``counters[C_STEPS]`` counts iterations)
    gamma, budget, maintenance (:class:`._maintenance.Maintenance`), profile : as in
        :func:`svmstream.solvers.budgeted._bsgd.bsgd_steps`
    margins_out : (m,) float64 — f̃(x_i) before each iteration
    scratch : :class:`._maintenance.Scratch` — ``x_buf`` (d,), ``row_buf`` (2·capacity,) float64

    Returns the steps applied, as :func:`svmstream.solvers.budgeted._bsgd.bsgd_steps`.
    """
    row_buf = scratch.row_buf
    n_sv = counters[C_N_SV]
    weight = np.zeros(1)
    done = order.shape[0]
    for r in range(order.shape[0]):
        i = order[r]
        if not pool_room(sv_t, X, i, n_sv):  # sparse pool: the caller grows the arena and goes on
            done = r
            break
        x, x_sq = row_open(X, i, sv_t)
        pool_row_log(sv_t, x, x_sq, sv_sq, n_sv, gamma, row_buf, row_buf[row_buf.shape[0] // 2 :])
        f = 0.0
        for j in range(n_sv):
            f += coef[j, 0] * row_buf[j]
        margins_out[r] = f
        box = C * weights[i]
        if box == 0.0:  # a zero weight: no iteration
            row_close(X, i, sv_t)
            continue
        counters[C_STEPS] += 1
        a_old = 0.0 if stream else alpha[i]
        a_new = a_old + (1.0 - y[i] * f)  # Q_ii = k(x_i, x_i) = 1 for the Gaussian kernel
        if a_new < 0.0:
            a_new = 0.0
        elif a_new > box:
            a_new = box
        delta = a_new - a_old
        if delta == 0.0:
            row_close(X, i, sv_t)
            continue
        if not stream:
            alpha[i] = a_new
        counters[C_VIOLATIONS] += 1
        weight[0] = delta * y[i]
        n_sv = add_support_vector(
            X, i, x, x_sq, weight, sv_t, sv_sq, coef, n_sv, maintenance, k_inv, row_buf, profile, reals
        )
        if n_sv > budget:
            n_sv = maintain_budget(
                sv_t, sv_sq, coef, n_sv, gamma, maintenance, k_inv, counters, reals, 1.0, profile, scratch
            )
        row_close(X, i, sv_t)
    counters[C_N_SV] = n_sv
    return done
