"""Evaluating a budgeted model: decision values of a batch and the squared RKHS norm.

Both work on either SV pool (:mod:`._sparse_pool`): ``sv_t`` is the dense (d, capacity) matrix
with dense rows ``X`` (n, d), or the sparse pool tuple with CSR arrays ``X = (data, indices,
indptr)``.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba as nb
import numpy as np

from ..kernels import exp_scalar
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


# ------------------------------------------------------------------------------ blocked (dense pool)
#: Largest rows · n_sv · d of one BLAS product: OpenBLAS runs a dgemm of at most 65,536 · 4
#: multiply-adds on the calling thread (its GEMM_MULTITHREAD_THRESHOLD); a larger block wakes
#: its own threads, which on this 2-core machine, next to our threads, cost 3x the CPU
#: (128-row blocks at d = 22, B = 500: 334 ms CPU for ijcnn1.t instead of 80 ms).
BLAS_BLOCK_MNK = 262_144
#: Below this many rows per block the per-row kernel is used instead (a BLAS call per ~4 rows
#: costs more than it saves).
MIN_BLOCK_ROWS = 8
#: Most rows of one block (the (rows, n_sv) Gram block stays in L1/L2).
MAX_BLOCK_ROWS = 256
#: Batches of fewer rows go through the per-row kernel (single-row ``/predict``): no BLAS call,
#: no block scratch.
MIN_BLOCKED_ROWS = 32
#: Rows per thread at least: a batch is split over threads only if each part has this many
#: (handing a part to a thread costs ~50 µs; 2,048 rows take ~1.8 ms at d = 22, B = 500).
MIN_THREAD_ROWS = 2048


@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def _rbf_dot(g, x_sq, sv_sq, gamma, coef, m):
    """Σ_{j<m} coef[j]·exp(−γ·max(0, x_sq + sv_sq[j] − 2g[j])): one fused, vectorised pass
    (reassociating the sum only; :func:`exp_scalar` keeps its own flags)."""
    acc = 0.0
    for j in range(m):
        dist = x_sq + sv_sq[j] - 2.0 * g[j]
        acc += coef[j] * exp_scalar(-gamma * (dist if dist > 0.0 else 0.0))
    return acc


@nb.njit(nogil=True, cache=True)
def _rbf_inplace(g, x_sq, sv_sq, gamma, m):
    """``g[j] ← exp(−γ·max(0, x_sq + sv_sq[j] − 2g[j]))`` for j < m (one vectorised pass)."""
    for j in range(m):
        dist = x_sq + sv_sq[j] - 2.0 * g[j]
        g[j] = exp_scalar(-gamma * (dist if dist > 0.0 else 0.0))


@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def _dot_contiguous(a, b, m):
    """Σ_{j<m} a[j]·b[j], reassociated (vectorised; a serial sum is bound by the add latency)."""
    acc = 0.0
    for j in range(m):
        acc += a[j] * b[j]
    return acc


@nb.njit(nogil=True, cache=True)
def rbf_decision_blocked(X, sv, sv_sq, coef_t, bias, gamma, scale, out, gram, block_rows):
    """``out[i, c] = scale · Σ_j coef_t[c, j]·exp(−γ‖X[i] − sv_j‖²) + bias[c]`` by row blocks.

    Per block of ``block_rows`` rows: G = X_blk · sv (one BLAS dgemm through ``np.dot``, on the
    calling thread while ``block_rows · n_sv · d`` <= :data:`BLAS_BLOCK_MNK`), then per row
    −γ·max(0, ‖x‖² + ‖s‖² − 2G) (the expression of :func:`~svmstream.solvers.kernels.rbf_row`),
    :func:`~svmstream.solvers.kernels.exp_scalar` (bit for bit ``exp_inplace``) and the dot
    product with each class's coefficients — fused into one pass for one column.

    X : (n, d) float64, C-contiguous; sv : (d, n_sv) float64, C-contiguous (the live SVs as
    columns); sv_sq : (>= n_sv,) float64; coef_t : (K, n_sv) float64, C-contiguous (coefficients
    transposed); bias : (K,) float64; out : (n, K) float64; gram : (>= block_rows, n_sv) float64
    C-contiguous scratch (the caller's own: concurrent calls each pass one).
    """
    n = X.shape[0]
    d = X.shape[1]
    m = sv.shape[1]
    n_classes = coef_t.shape[0]
    for b0 in range(0, n, block_rows):
        b1 = min(b0 + block_rows, n)
        g = gram[: b1 - b0]
        np.dot(X[b0:b1], sv, g)
        for i in range(b1 - b0):
            x = X[b0 + i]
            x_sq = 0.0
            for k in range(d):
                x_sq += x[k] * x[k]
            if n_classes == 1:
                out[b0 + i, 0] = scale * _rbf_dot(g[i], x_sq, sv_sq, gamma, coef_t[0], m) + bias[0]
                continue
            _rbf_inplace(g[i], x_sq, sv_sq, gamma, m)
            for c in range(n_classes):
                out[b0 + i, c] = scale * _dot_contiguous(coef_t[c], g[i], m) + bias[c]


def block_rows_for(n_sv: int, d: int) -> int:
    """Rows of one BLAS block for a model of ``n_sv`` SVs in ``d`` dimensions (0: use the
    per-row kernel): the most rows with rows · n_sv · d <= :data:`BLAS_BLOCK_MNK`, at most
    :data:`MAX_BLOCK_ROWS`."""
    rows = min(MAX_BLOCK_ROWS, BLAS_BLOCK_MNK // max(1, n_sv * d))
    return rows if rows >= MIN_BLOCK_ROWS else 0


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def prediction_threads() -> int:
    """Threads a large batch is split over: the CPUs this process may run on
    (``SVMSTREAM_PREDICT_THREADS`` overrides; 1 turns the splitting off)."""
    value = os.environ.get("SVMSTREAM_PREDICT_THREADS")
    if value:
        return max(1, int(value))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _pool() -> ThreadPoolExecutor:
    """The process's prediction threads (made on first use; parts beyond them queue)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            workers = max(1, prediction_threads() - 1)  # the caller runs a part itself
            _executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="svmstream-predict")
        return _executor


def dense_decision(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, out, row_buf, threads=None):
    """Decision values of dense rows against a dense SV pool: ``out[i, c] = scale · Σ_j
    coef[j, c]·exp(−γ‖X[i] − sv_j‖²) + bias[c]``.

    Small batches (< :data:`MIN_BLOCKED_ROWS` rows) and models too large for a BLAS block
    (:func:`block_rows_for`) take the per-row kernel :func:`rbf_decision_batch`; larger ones
    :func:`rbf_decision_blocked`, split into contiguous parts of at least
    :data:`MIN_THREAD_ROWS` rows over ``threads`` threads (default
    :func:`prediction_threads`; the caller runs the first part, the kernels release the GIL).
    Both match to ~1e-13 relative (``tests/test_predict_fast.py``).

    X : (n, d) float64 C-contiguous; sv_t : (d, capacity) float64, SVs as columns; sv_sq :
    (>= n_sv,) float64; coef : (>= n_sv, K) float64; bias : (K,) float64; n_sv : int; gamma,
    scale : float; out : (n, K) float64, written; row_buf : (>= n_sv,) float64 scratch.
    """
    n, d = X.shape
    block_rows = block_rows_for(n_sv, d)
    if n < MIN_BLOCKED_ROWS or block_rows == 0 or n_sv == 0:
        rbf_decision_batch(X, sv_t, sv_sq, coef, bias, n_sv, gamma, scale, out, row_buf)
        return out
    sv = np.ascontiguousarray(sv_t[:, :n_sv])  # a learner's pool is (d, B + 1): 88 KB at d = 22
    coef_t = np.ascontiguousarray(coef[:n_sv].T)
    sv_sq = np.ascontiguousarray(sv_sq[:n_sv])
    threads = prediction_threads() if threads is None else max(1, int(threads))
    parts = max(1, min(threads, n // MIN_THREAD_ROWS))
    if parts == 1:
        gram = np.empty((block_rows, n_sv))
        rbf_decision_blocked(X, sv, sv_sq, coef_t, bias, gamma, scale, out, gram, block_rows)
        return out
    # contiguous parts, whole blocks each (the last takes the rest)
    step = -(-n // parts)
    step = -(-step // block_rows) * block_rows
    bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)]

    def run(bound):
        lo, hi = bound
        gram = np.empty((block_rows, n_sv))
        rbf_decision_blocked(X[lo:hi], sv, sv_sq, coef_t, bias, gamma, scale, out[lo:hi], gram, block_rows)

    futures = [_pool().submit(run, bound) for bound in bounds[1:]]
    run(bounds[0])
    for future in futures:
        future.result()
    return out
