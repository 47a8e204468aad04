"""Evaluating a budgeted model: decision values of a batch and the squared RKHS norm."""

from __future__ import annotations

import numba as nb

from ..kernels import rbf_row, squared_norm


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
