"""Sizes and shapes of a budgeted model before it allocates: λ from C and n
(:func:`resolve_lambda`), the bytes of a model and of a warm-up window, and dense pieces of
CSR rows (:func:`iter_dense_rows`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._params import (
    LAMBDA_MIN,
    REFERENCE_N,
    SPARSE_MIN_FEATURES,
)
from ._linear import linear_model_bytes
from ._preprocessing import buffer_capacity, guard_capacity
from ._rehearsal import memory_capacity
from ._sparse_pool import SV_NNZ_BOUND, sparse_model_bytes

#: Sparse input is densified this many matrix elements at a time.
DENSE_CHUNK_ELEMENTS = 4_000_000


def resolve_lambda(lambda_, C, n_samples, n_rows=None):
    """Regularisation λ: ``lambda_`` if given, else ``1 / (C · n)``.

    ``n`` is ``n_samples`` when set, else ``n_rows`` (the rows of :meth:`fit`), else — a
    stream of unknown length — :data:`~svmstream.solvers._params.REFERENCE_N`, so that λ
    never depends on how a stream is cut into batches.  C = 1/(nλ) is the usual SVM
    relation (Wang et al. 2012, §2).

    Raises
    ------
    ValueError
        If the resulting λ is not a positive finite number.
    """
    if lambda_ is not None:
        lam = float(lambda_)
    else:
        n = n_samples if n_samples is not None else (n_rows if n_rows is not None else REFERENCE_N)
        lam = 1.0 / (float(C) * float(n))
    if not np.isfinite(lam) or lam <= 0.0:
        raise ValueError(f"regularisation lambda must be positive and finite, got {lam!r}")
    if lam < LAMBDA_MIN:
        raise ValueError(
            f"regularisation lambda must be >= {LAMBDA_MIN:g} (smaller values overflow the step size "
            f"1/(lambda t)), got {lam!r}"
        )
    return lam


def window_bytes(warmup, n_features):
    """Bytes of a warm-up window when full: ``warmup`` rows of ``n_features`` values and a label,
    8 bytes each; rows wider than 256 features by their nonzeros (at most 2,048 of 12 bytes, the
    bound of sparse support vectors).  :func:`model_bytes` does not count it (the window holds
    the raw rows as received until it closes)."""
    d = max(1, int(n_features))
    if d > SPARSE_MIN_FEATURES:  # wide rows: counted by their nonzeros, as sparse support vectors are
        return int(warmup) * (min(d, SV_NNZ_BOUND) * 12 + 8)
    return int(warmup) * (d + 1) * 8


def model_bytes(
    budget,
    n_features,
    shuffle_buffer=0,
    run_guard=False,
    n_classes=2,
    maintenance="merge",
    kernel="rbf",
    sv_storage="dense",
    rehearsal_memory=0,
):
    """Bytes of the dense arrays a budgeted model of this shape allocates (an estimate made
    before any allocation): the SV matrix (B + 1) · d · 8, the shuffle buffer (at most
    64 MiB of rows), the run guard's reservoirs (at most 16 MiB), and K⁻¹ for
    ``maintenance="project"``.  The warm-up window (raw rows as received) is not counted.
    ``kernel="linear"``: :func:`._linear.linear_model_bytes` (no SVs: d · K · 8 of weights).
    ``sv_storage="sparse"``, or "auto" with d > 256 (where "auto" may choose sparse SVs):
    :func:`._sparse_pool.sparse_model_bytes` (SVs bounded by their nonzeros, not by d).
    ``rehearsal_memory``: rows remembered for rehearsal (0 when rehearsal is off), at most
    16 MiB (:func:`._rehearsal.memory_capacity`), dense (d + 2 values a row) for sparse SVs too."""
    if kernel == "linear":
        return linear_model_bytes(n_features, shuffle_buffer, run_guard, n_classes)
    d = max(1, int(n_features))
    memory = memory_capacity(int(rehearsal_memory), d) * (d + 2) * 8  # dense rows, whatever the SVs
    if sv_storage == "sparse" or (sv_storage == "auto" and int(n_features) > SPARSE_MIN_FEATURES):
        return (
            sparse_model_bytes(budget, n_features, shuffle_buffer, run_guard, n_classes, maintenance) + memory
        )
    cap = int(budget) + 1
    n_cols = 1 if n_classes == 2 else int(n_classes)
    total = cap * d * 8 + cap * 8 * (2 + n_cols)  # SVs; their norms, coefficients, kernel row
    total += buffer_capacity(int(shuffle_buffer), d) * (d + 1) * 8
    if run_guard:
        total += guard_capacity(n_classes, d) * n_classes * d * 8
    if maintenance == "project":
        total += cap * cap * 8
    total += memory
    return int(total)


def iter_dense_rows(X, order, chunk_rows):
    """Yield ``(X_dense, local_order)`` pieces covering ``X[order]`` in order.

    Dense ``X`` is passed through untouched (one piece, no copy); CSR ``X`` is densified
    ``chunk_rows`` rows at a time.
    """
    if not sp.issparse(X):
        yield X, order
        return
    for start in range(0, order.shape[0], chunk_rows):
        rows = order[start : start + chunk_rows]
        yield (
            np.ascontiguousarray(X[rows].toarray(), dtype=np.float64),
            np.arange(rows.shape[0], dtype=np.int64),
        )
