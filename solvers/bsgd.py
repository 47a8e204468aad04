"""Budgeted stochastic gradient descent (BSGD) batch steps for the kernel SVM.

Source: Wang, Crammer & Vucetic (2012), "Breaking the curse of kernelization: budgeted
stochastic gradient descent for large-scale SVM training", JMLR 13, Algorithm 1 with the
Pegasos learning rate η_t = 1/(λt) (update (4)); budget maintenance by merging
(:mod:`solvers.merging`).

The model is ``w = scale · Σ_j coef[j] · φ(sv_j)``.  One step on ``(x, y)``, y ∈ {−1, +1}:

1. ``f = w_t·φ(x)`` (the prediction *before* the update, reported in ``margins_out``);
2. ``w ← (1 − η_t λ)·w`` — applied to the scalar ``scale`` only (Pegasos scale trick);
   at t = 1 the factor is 0 and the model is cleared;
3. if ``y·f < 1``: add x as SV with effective coefficient ``η_t·y`` (raw ``η_t·y/scale``);
4. if the model now holds B + 1 SVs: merge two (:func:`solvers.merging.merge_smallest`).

When ``scale`` falls below 1e-6 it is folded into the coefficients.  Every step is a pure
function of the state and the example, so splitting a stream into batches differently
gives bit-identical models.

State layout (all preallocated, owned by the estimator):

* ``sv_t`` (d, B+1) float64 — SVs as columns; ``sv_sq`` (B+1,) float64 — their ‖·‖²;
* ``coef`` (B+1,) float64 — raw coefficients;
* ``counters`` int64 array, indices given by the ``C_*`` constants below;
* ``reals`` float64 array, indices given by the ``R_*`` constants below.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .kernels import rbf_decision, squared_norm
from .merging import merge_smallest

# counters[...]
C_N_SV = 0
C_STEPS = 1
C_MERGES = 2
C_VIOLATIONS = 3
C_MAINTENANCE = 4
N_COUNTERS = 5
# reals[...]
R_SCALE = 0
R_WD_SUM = 1
N_REALS = 2

RESCALE_BELOW = 1e-6


@nb.njit(nogil=True, cache=True)
def bsgd_binary_steps(X, y, order, sv_t, sv_sq, coef, counters, reals, gamma, lam, budget,
                      gss_eps, margins_out, x_buf, row_buf):
    """Apply one BSGD step (Pegasos rate, merging) per example, in the given order.

    Parameters
    ----------
    X : (n, d) float64, C-contiguous; rows are examples
    y : (n,) float64, labels in {−1.0, +1.0}
    order : (m,) int64, row indices of X to apply, in this order
    sv_t, sv_sq, coef, counters, reals : model state (see module docstring), updated in place
    gamma : float, RBF γ
    lam : float, regularisation λ > 0
    budget : int, B (``sv_t`` has B + 1 columns)
    gss_eps : float, golden section search tolerance for merging
    margins_out : (m,) float64, receives f(x) before each step (for prequential accuracy)
    x_buf : (d,) float64 scratch; row_buf : (B+1,) float64 scratch
    """
    n_sv = counters[C_N_SV]
    t = counters[C_STEPS]
    scale = reals[R_SCALE]
    d = X.shape[1]
    for r in range(order.shape[0]):
        x = X[order[r]]
        yr = y[order[r]]
        x_sq = squared_norm(x)
        f = rbf_decision(x, x_sq, sv_t, sv_sq, coef, n_sv, gamma, scale, row_buf)
        margins_out[r] = f
        t += 1
        eta = 1.0 / (lam * t)
        shrink = 1.0 - eta * lam
        if shrink <= 0.0:
            for j in range(n_sv):
                coef[j] = 0.0
            n_sv = 0
            scale = 1.0
        else:
            scale *= shrink
        if yr * f < 1.0:
            counters[C_VIOLATIONS] += 1
            for k in range(d):
                sv_t[k, n_sv] = x[k]
            sv_sq[n_sv] = x_sq
            coef[n_sv] = eta * yr / scale
            n_sv += 1
            if n_sv > budget:
                n_sv, wd, merged = merge_smallest(sv_t, sv_sq, coef, n_sv, gamma, gss_eps,
                                                  x_buf, row_buf)
                counters[C_MAINTENANCE] += 1
                counters[C_MERGES] += merged
                reals[R_WD_SUM] += wd * scale * scale
        if scale < RESCALE_BELOW:
            for j in range(n_sv):
                coef[j] *= scale
            scale = 1.0
    counters[C_N_SV] = n_sv
    counters[C_STEPS] = t
    reals[R_SCALE] = scale


@nb.njit(nogil=True, cache=True)
def rbf_decision_batch(X, sv_t, sv_sq, coef, n_sv, gamma, scale, out, row_buf):
    """``out[i] = scale · Σ_j coef[j]·exp(−γ‖X[i] − sv_j‖²)`` for every row of X.

    X : (n, d) float64; out : (n,) float64; row_buf : (>= n_sv,) float64 scratch.
    """
    for i in range(X.shape[0]):
        x = X[i]
        out[i] = rbf_decision(x, squared_norm(x), sv_t, sv_sq, coef, n_sv, gamma, scale, row_buf)
