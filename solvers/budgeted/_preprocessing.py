"""Numba kernels and storage of the streaming pipeline's order stage, and ``gamma="scale"``.

The order stage (shuffle buffer and run guard, :mod:`svmstream.solvers.online.stages.order`)
and the scaler stage (warm-up window, scaling, :mod:`svmstream.solvers.online.stages.scaler`)
live in the streaming pipeline; the estimators of this package learn the rows they are given.
What stays here is what runs per row or is shared with the estimators:

* :func:`buffer_and_guard` / :func:`._sparse_rows.buffer_and_guard_refs`: the buffer and the guard over dense
  rows, or over references into a :class:`._sparse_rows.SparseRowStore` (an append-only arena of CSR rows),
  the same decisions from the same uniforms (five per row, :data:`DRAWS_PER_ROW`);
* the capacities: :func:`buffer_capacity` (K bounded by :data:`BUFFER_MAX_BYTES` of dense rows:
  K = 1,008 for d = 8,315), :func:`guard_capacity` (:data:`GUARD_RESERVOIR` rows per class,
  bounded by :data:`GUARD_MAX_BYTES`) and their sparse forms (in :mod:`._sparse_rows`);
* :func:`scale_gamma` / :func:`scale_gamma_sparse`: scikit-learn's ``gamma="scale"``,
  1 / (d · Var(X)) over all entries (the estimators' "scale" on their first data, the scaler
  stage's on its window);
* :func:`wide_sparse`: text-like input (picks sparse SV storage and the scaler's text rules).

The run guard: a per-class reservoir keeps up to :data:`GUARD_RESERVOIR` released rows of
each class.  While the last :data:`GUARD_MIN_RUN` released rows are all of one class c,
another class has been seen, and such a run is improbable for the class frequencies seen so
far (q_c^run ≤ :data:`GUARD_ALPHA`), each released row is followed by one row of another class
replayed from its reservoir (skin_nonskin in file order: 78.9% = the majority rate without it).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import scipy.sparse as sp

from .._params import SPARSE_MAX_DENSITY, SPARSE_MIN_FEATURES

#: A shuffle buffer never holds more than this many bytes of rows (K shrinks for wide data).
BUFFER_MAX_BYTES = 64 * 1024 * 1024
#: Run guard: examples kept per class for replay (reservoir sampling).
GUARD_RESERVOIR = 200
#: Run guard: all reservoirs together never hold more than this many bytes.
GUARD_MAX_BYTES = 16 * 1024 * 1024
#: The same bound for reservoirs of sparse rows (they are saved in every snapshot: sector, 105
#: classes, held 16 MiB of reservoir rows against 3.6 MB of SV nonzeros; 4 MiB still keeps ~20
#: rows per class there, enough to interleave other classes into a long one-class run).
SPARSE_GUARD_MAX_BYTES = 4 * 1024 * 1024
#: Run guard: the shortest run of one class that can trigger replay.
GUARD_MIN_RUN = 1000
#: Run guard: a run of class c triggers replay only if q_c^run <= GUARD_ALPHA.
GUARD_ALPHA = 1e-6
#: Uniform draws per row entering the buffer: emit?, slot, and the guard's three.
DRAWS_PER_ROW = 5

# indices into the integer state vector of the buffer and guard
S_BUF_N, S_RUN_CLASS, S_RUN_LEN, S_SEEN, S_REPLAYED = 0, 1, 2, 3, 4
S_DISCARDED, S_BYPASS = 5, 6  # rows dropped at a drift; arrivals still to bypass the buffer after it
N_STATE = 7


@nb.njit(nogil=True, cache=True, inline="always")
def _copy_row(src, i, dst, j):
    for f in range(src.shape[1]):
        dst[j, f] = src[i, f]


@nb.njit(nogil=True, cache=True, inline="always")
def _guard_record(out_y, row, u0, binary, res_cap, res_n, seen, st):
    """The run and the reservoir of learned row ``row``: extend or restart the current run,
    count the class, and pick its reservoir slot (reservoir sampling).  Returns ``(c, j)``:
    the row's class and the slot to store it in (j >= ``res_cap``: not stored).  Shared by
    :func:`_guard_step` (dense rows) and :func:`_guard_step_refs` (row references)."""
    c = (1 if out_y[row] > 0.0 else 0) if binary else int(out_y[row])
    if c == st[S_RUN_CLASS]:
        st[S_RUN_LEN] += 1
    else:
        st[S_RUN_CLASS] = c
        st[S_RUN_LEN] = 1
    seen[c] += 1
    st[S_SEEN] += 1
    j = res_n[c] if res_n[c] < res_cap else int(u0 * seen[c])
    if j < res_cap and j == res_n[c]:
        res_n[c] += 1
    return c, j


@nb.njit(nogil=True, cache=True, inline="always")
def _guard_pick(c, u1, u2, res_n, seen, st, min_run, log_alpha):
    """Whether the run of class ``c`` fires (at least ``min_run`` long, q_c^run <= alpha,
    another class remembered) and which remembered row to replay: ``(o, r)``, class and row
    drawn with ``u1``, ``u2``; ``o`` = −1: no replay."""
    if st[S_RUN_LEN] < min_run:
        return -1, -1
    n_other = 0
    for o in range(res_n.shape[0]):
        if o != c and res_n[o] > 0:
            n_other += 1
    if n_other == 0:
        return -1, -1
    q = seen[c] / st[S_SEEN]
    if st[S_RUN_LEN] * math.log(q) > log_alpha:
        return -1, -1
    pick = min(int(u1 * n_other), n_other - 1)
    o = 0
    for o in range(res_n.shape[0]):
        if o != c and res_n[o] > 0:
            if pick == 0:
                break
            pick -= 1
    return o, min(int(u2 * res_n[o]), res_n[o] - 1)


@nb.njit(nogil=True, cache=True)
def _guard_step(
    out_X, out_y, out_orig, k, u0, u1, u2, binary, res_X, res_cap, res_n, seen, st, min_run, log_alpha
):
    """Record learned row ``k − 1`` in the guard; append one replayed row if the run fires.

    ``res_cap``: R, the reservoirs' logical capacity (``res_X`` holds at least
    ``min(R, res_n[c] + 1)`` rows per class).  Returns the new number of output rows."""
    row = k - 1
    c, j = _guard_record(out_y, row, u0, binary, res_cap, res_n, seen, st)
    if j < res_cap:
        _copy_row(out_X, row, res_X[c], j)
    if k >= out_X.shape[0]:  # never holds (room is sized)
        return k
    o, r = _guard_pick(c, u1, u2, res_n, seen, st, min_run, log_alpha)
    if o < 0:
        return k
    _copy_row(res_X[o], r, out_X, k)
    out_y[k] = (2.0 * o - 1.0) if binary else float(o)
    out_orig[k] = False
    st[S_REPLAYED] += 1
    return k + 1


@nb.njit(nogil=True, cache=True)
def buffer_and_guard(
    X, y, w, u, buf_X, buf_y, buf_w, cap, st, guard, binary, res_X, res_cap, res_n, seen, min_run, log_alpha,
    out_X, out_y, out_w, out_orig,
):  # fmt: skip
    """Pass rows through the shuffle buffer and the run guard; returns the rows to learn.

    X : (n, d) float64 scaled rows; y : (n,) encoded labels (±1 binary, class index else);
    u : (n, DRAWS_PER_ROW) uniforms in [0, 1); cap : K, the buffer's capacity (0: rows pass
    straight through); buf_X : (≥ min(K, m + n), d), buf_y : (≥ min(K, m + n),) — the buffer,
    m = ``st[S_BUF_N]`` rows filled (its arrays grow with the fill, ``OrderStage._reserve``:
    only K decides, so the draws are those of a buffer allocated whole); st : (N_STATE,) int64
    (buffer fill, run class and length, rows seen by the guard, replayed); guard : bool;
    binary : bool; res_X : (n_classes, ≥ min(R, max(res_n) + n), d), res_cap : R,
    res_n, seen : (n_classes,) int64 — the guard's reservoirs; out_X : (2n, d), out_y : (2n,),
    out_orig : (2n,) bool (False: replayed) — written from 0.  All state arrays are updated in
    place.  Returns the number of output rows.
    """
    k = 0
    for i in range(X.shape[0]):
        if cap > 0:
            m = st[S_BUF_N]
            if u[i, 0] * cap < m:  # probability m/K (1 once the buffer is full)
                j = min(int(u[i, 1] * m), m - 1)
                _copy_row(buf_X, j, out_X, k)
                out_y[k] = buf_y[j]
                out_w[k] = buf_w[j]
                _copy_row(X, i, buf_X, j)
                buf_y[j] = y[i]
                buf_w[j] = w[i]
            else:
                _copy_row(X, i, buf_X, m)
                buf_y[m] = y[i]
                buf_w[m] = w[i]
                st[S_BUF_N] = m + 1
                continue
        else:
            _copy_row(X, i, out_X, k)
            out_y[k] = y[i]
            out_w[k] = w[i]
        out_orig[k] = True
        k += 1
        if guard:
            k = _guard_step(
                out_X,
                out_y,
                out_orig,
                k,
                u[i, 2],
                u[i, 3],
                u[i, 4],
                binary,
                res_X,
                res_cap,
                res_n,
                seen,
                st,
                min_run,
                log_alpha,
            )
    return k


@nb.njit(nogil=True, cache=True)
def buffer_releases(u0, m, cap):
    """Rows :func:`buffer_and_guard` releases from a shuffle buffer of capacity ``cap`` > 0 that
    holds ``m`` rows, for rows whose first draws are ``u0`` (n,): the same test as the kernel
    (a row is released with probability m/K, else the buffer fills), so that its output arrays
    are made no larger than they need (the run guard adds at most one row per released one)."""
    k = 0
    for i in range(u0.shape[0]):
        if u0[i] * cap < m:
            k += 1
        else:
            m += 1
    return k


def csr_arrays(X):
    """``(data float64, indices int32, indptr int64)`` of a CSR matrix with sorted indices (copies
    only what is not in that form already)."""
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    return (
        np.ascontiguousarray(X.data, dtype=np.float64),
        np.ascontiguousarray(X.indices, dtype=np.int32),
        np.ascontiguousarray(X.indptr, dtype=np.int64),
    )


def wide_sparse(X) -> bool:
    """X is CSR, wide (d > :data:`~svmstream.solvers._params.SPARSE_MIN_FEATURES`) and sparse
    (density ≤ :data:`~svmstream.solvers._params.SPARSE_MAX_DENSITY`): text-like input.  It
    picks sparse SV storage (``sv_storage="auto"``) and, for kernel models, the text defaults
    of ``scaling="auto"`` (:func:`linear_auto_scaling`) and ``gamma="scale"`` (no multi-class
    factor) — from the input, so both storages learn the same model."""
    if not sp.issparse(X):
        return False
    n, d = X.shape
    return d > SPARSE_MIN_FEATURES and X.nnz <= SPARSE_MAX_DENSITY * max(1, n) * d


def scale_gamma(X_scaled) -> float:
    """γ = 1 / (d · Var(X)) over all entries (scikit-learn's ``gamma="scale"``); 1.0 if Var = 0."""
    var = float(np.var(X_scaled)) if X_scaled.size else 0.0
    return 1.0 / (X_scaled.shape[1] * var) if var > 0.0 else 1.0


def scale_gamma_sparse(X_scaled) -> float:
    """:func:`scale_gamma` of CSR rows without densifying them: the two-pass variance over all
    n·d entries, Σ_nz (x − μ)² + (n·d − nnz)·μ² (agrees with ``np.var`` of the dense matrix to
    rounding, ~1e-16 relative)."""
    n, d = X_scaled.shape
    total = n * d
    if total == 0:
        return 1.0
    values = X_scaled.data
    mean = float(values.sum()) / total
    var = (float(np.sum((values - mean) ** 2)) + (total - values.shape[0]) * mean * mean) / total
    return 1.0 / (d * var) if var > 0.0 else 1.0


def buffer_capacity(shuffle_buffer: int, n_features: int) -> int:
    """Rows a shuffle buffer holds: ``shuffle_buffer``, bounded by :data:`BUFFER_MAX_BYTES`
    (d = 123: 20,000; d = 8,315: 1,008)."""
    if shuffle_buffer <= 0:
        return 0
    return int(max(1, min(shuffle_buffer, BUFFER_MAX_BYTES // (8 * max(1, n_features)))))


def guard_capacity(n_classes: int, n_features: int) -> int:
    """Rows per class a run guard keeps: :data:`GUARD_RESERVOIR`, bounded by :data:`GUARD_MAX_BYTES`."""
    per_class = GUARD_MAX_BYTES // (8 * max(1, n_features) * max(1, n_classes))
    return int(max(1, min(GUARD_RESERVOIR, per_class)))


def widen_rows(X, d):
    """Rows X (dense or CSR) with zero columns appended up to width d."""
    if X.shape[1] >= d:
        return X
    if sp.issparse(X):
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    return np.hstack([np.asarray(X, dtype=np.float64), np.zeros((X.shape[0], d - X.shape[1]))])


def stack_rows(parts):
    """Rows stacked: CSR if any part is CSR, else dense."""
    return sp.vstack(parts, format="csr") if any(sp.issparse(p) for p in parts) else np.vstack(parts)
