"""Evaluating a budgeted model: decision values of a batch and the squared RKHS norm.

Both work on either SV pool (:mod:`._sparse_pool`): ``sv_t`` is the dense (d, capacity) matrix
with dense rows ``X`` (n, d), or the sparse pool tuple with CSR arrays ``X = (data, indices,
indptr)``.
"""

from __future__ import annotations

import numba as nb

from ._sparse_pool import pool_load, pool_row, pool_unload, row_close, row_open


@nb.njit(nogil=True, cache=True)
def squared_model_norm(sv_t, sv_sq, coef, n_sv, gamma, x_buf, row_buf):
    """Σ_c ‖Σ_j coef[j,c]·φ(sv_j)‖² (raw coefficients), O(n_sv²·d) dense, O(n_sv·nnz) sparse.

    ``x_buf`` (d,) float64 scratch (all zeros for a sparse pool; left so); ``row_buf`` (>= n_sv,)."""
    total = 0.0
    for i in range(n_sv):
        pool_load(sv_t, i, x_buf)
        pool_row(sv_t, x_buf, sv_sq[i], sv_sq, n_sv, gamma, row_buf)
        pool_unload(sv_t, i, x_buf)
        for c in range(coef.shape[1]):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            total += coef[i, c] * acc
    return total


@nb.njit(nogil=True, cache=True)
def rbf_decision_batch(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, out, row_buf):
    """``out[i, c] = scale · Σ_j coef[j, c]·exp(−γ‖X[i] − sv_j‖²) + bias[c]``.

    X : (n, d) float64 (dense pool) or CSR ``(data, indices int32, indptr int64)`` (sparse pool,
    whose scratch must be the caller's own: concurrent predictions each pass one);
    out : (n, K) float64; row_buf : (>= n_sv,) float64 scratch.
    """
    for i in range(out.shape[0]):
        x, x_sq = row_open(X, i, sv_t)
        pool_row(sv_t, x, x_sq, sv_sq, n_sv, gamma, row_buf)
        row_close(X, i, sv_t)
        for c in range(coef.shape[1]):
            acc = 0.0
            for j in range(n_sv):
                acc += coef[j, c] * row_buf[j]
            out[i, c] = scale * acc + bias[c]
