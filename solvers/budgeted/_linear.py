"""Linear online SVM steps (``BudgetedSGDClassifier(kernel="linear")``): Pegasos with an
explicit weight matrix.

Source: Shalev-Shwartz, Singer, Srebro & Cotter (2011), "Pegasos: primal estimated
sub-gradient solver for SVM", Math. Program. 127 — the step of BSGD (Wang, Crammer & Vucetic
2012, Algorithm 1) with φ(x) = x, so no support vectors and no budget maintenance; multi-class
by Crammer–Singer (Wang et al. §5) exactly as the kernel model.

The model is ``w_c = scale · W[:, c]`` (+ optional bias ``b_c``), ``W`` (d, K) float64 with
K = 1 for binary models.  One step on ``(x, y)`` (x sparse: its non-zeros ``vals``/``idx``):

1. ``f_c = scale · Σ_p vals[p] · W[idx[p], c] + b_c`` (reported in ``margins_out``), O(nnz·K);
2. ``scale ← (1 − η_t λ) · scale`` — the Pegasos scale trick; a factor ≤ 0 (Pegasos at
   t = 1) clears W;
3. on a violation (y·f < 1; Crammer–Singer: 1 + f_r − f_y > 0 for the most violating r):
   ``W[idx, y] += η_t·vals/scale`` (binary: ``η_t·y·vals/scale``) and ``W[idx, r] −= η_t·vals/scale``,
   O(nnz); ``b += η_t·y`` when the bias is on;
4. margin perceptron only: ‖w‖² is updated from f and ‖x‖² and w projected onto the ball of
   radius U (a change of ``scale``);
5. when ``scale`` falls below 1e-6 it is folded into W (O(d·K), rare).

The schedules (:func:`._bsgd.learning_rate`) and the drift reset (``counters[C_SCHED_SHIFT]``)
are the kernel model's.  Dense rows go through the same step: their non-zeros are gathered
into scratch arrays first, so a dense row and its CSR form (sorted indices) perform the
same floating-point operations in the same order — identical models.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

from ._bsgd import learning_rate, norm2_gain, step_loss
from ._preprocessing import (
    BUFFER_MAX_BYTES,
    GUARD_RESERVOIR,
    SPARSE_GUARD_MAX_BYTES,
    buffer_capacity,
    csr_arrays,
    guard_capacity,
)
from ._sparse_rows import SPARSE_ENTRY_BYTES
from ._state import C_SCHED_SHIFT, C_STEPS, C_VIOLATIONS, R_NORM2, R_SCALE, RESCALE_BELOW, SCHED_PERCEPTRON

#: ``get_state`` stores W densely up to this many entries (8 MiB), above it as (flat index,
#: value) pairs of its non-zeros when that is smaller.
DENSE_WEIGHTS_MAX = 1 << 20


@nb.njit(nogil=True, cache=True, inline="always")
def _linear_step(
    vals, idx, lo, hi, label, weight, W, bias, counters, reals, t, shift, scale, lam, eta0, radius,
    schedule, use_bias, f_buf, margins_out, r,
):  # fmt: skip
    """One Pegasos step on the row ``vals[lo:hi]`` at ``idx[lo:hi]`` with importance weight
    ``weight`` (the gradient term η·w·y·x; w = 0: no step); returns ``(t, scale)``."""
    n_classes = W.shape[1]
    for c in range(n_classes):
        f_buf[c] = 0.0
    x_sq = 0.0
    for p in range(lo, hi):
        v = vals[p]
        j = idx[p]
        x_sq += v * v
        for c in range(n_classes):
            f_buf[c] += v * W[j, c]
    for c in range(n_classes):
        f_buf[c] = scale * f_buf[c] + bias[c]
        margins_out[r, c] = f_buf[c]
    if weight == 0.0:
        return t, scale

    violated, plus, minus, sign = step_loss(f_buf, label, n_classes)

    t += 1
    eta, shrink = learning_rate(schedule, t - shift, lam, eta0)
    if shrink <= 0.0:
        W[:, :] = 0.0
        scale = 1.0
        reals[R_NORM2] = 0.0
    else:
        scale *= shrink
    if violated:
        counters[C_VIOLATIONS] += 1
        a = eta * weight * sign / scale
        if minus >= 0:
            b = eta * weight / scale
            for p in range(lo, hi):
                W[idx[p], plus] += a * vals[p]
                W[idx[p], minus] -= b * vals[p]
        else:
            for p in range(lo, hi):
                W[idx[p], plus] += a * vals[p]
        if use_bias:
            bias[plus] += eta * weight * sign
            if minus >= 0:
                bias[minus] -= eta * weight
        if schedule == SCHED_PERCEPTRON:
            # ‖w + η·y·x‖² = ‖w‖² + 2η·y·(w·x) + η²‖x‖²; margins_out holds f including the bias
            reals[R_NORM2] += norm2_gain(
                margins_out[r], bias, plus, minus, sign, eta * weight, x_sq, n_classes
            )
            if reals[R_NORM2] > radius * radius:
                scale *= radius / np.sqrt(reals[R_NORM2])
                reals[R_NORM2] = radius * radius
    if scale < RESCALE_BELOW:
        for j in range(W.shape[0]):
            for c in range(n_classes):
                W[j, c] *= scale
        scale = 1.0
    return t, scale


@nb.njit(nogil=True, cache=True)
def linear_steps_csr(
    data, indices, indptr, labels, weights, order, W, bias, counters, reals, lam, eta0, radius, schedule,
    use_bias, margins_out, f_buf,
):  # fmt: skip
    """One Pegasos step per row ``order[r]`` of the CSR matrix ``(data, indices, indptr)``.

    data : (nnz,) float64; indices : (nnz,) int32; indptr : (n + 1,) int64; labels : (n,)
    float64 (±1 binary, class index multi-class); weights : (n,) float64 >= 0, importance
    weights (:func:`_linear_step`); order : (m,) int64; W : (d, K) float64;
    bias : (K,); counters, reals : the model's state (``._state``); lam, eta0, radius,
    schedule, use_bias : as :func:`._bsgd.bsgd_steps`; margins_out : (m, K) — f before each
    step; f_buf : (K,) scratch.  O(nnz · K) per row.
    """
    t = counters[C_STEPS]
    shift = counters[C_SCHED_SHIFT]
    scale = reals[R_SCALE]
    for r in range(order.shape[0]):
        i = order[r]
        t, scale = _linear_step(
            data, indices, indptr[i], indptr[i + 1], labels[i], weights[i], W, bias, counters, reals, t, shift,
            scale, lam, eta0, radius, schedule, use_bias, f_buf, margins_out, r,
        )  # fmt: skip
    counters[C_STEPS] = t
    reals[R_SCALE] = scale


@nb.njit(nogil=True, cache=True)
def linear_steps_dense(
    X, labels, weights, order, W, bias, counters, reals, lam, eta0, radius, schedule, use_bias, margins_out,
    f_buf, x_buf, idx_buf,
):  # fmt: skip
    """:func:`linear_steps_csr` for dense rows X (n, d) float64: the non-zeros of each row are
    gathered into ``x_buf`` (d,) float64 / ``idx_buf`` (d,) int32 first (O(d) per row)."""
    t = counters[C_STEPS]
    shift = counters[C_SCHED_SHIFT]
    scale = reals[R_SCALE]
    for r in range(order.shape[0]):
        i = order[r]
        nnz = 0
        for j in range(X.shape[1]):
            v = X[i, j]
            if v != 0.0:
                x_buf[nnz] = v
                idx_buf[nnz] = j
                nnz += 1
        t, scale = _linear_step(
            x_buf, idx_buf, 0, nnz, labels[i], weights[i], W, bias, counters, reals, t, shift, scale, lam, eta0,
            radius, schedule, use_bias, f_buf, margins_out, r,
        )  # fmt: skip
    counters[C_STEPS] = t
    reals[R_SCALE] = scale


@nb.njit(nogil=True, cache=True)
def linear_decision_csr(data, indices, indptr, W, bias, scale, out):
    """``out[i, c] = scale · Σ_p data[p]·W[indices[p], c] + bias[c]`` over the rows of a CSR matrix
    (the same sums, in the same order, as the learning step's margins)."""
    n_classes = W.shape[1]
    for i in range(indptr.shape[0] - 1):
        for c in range(n_classes):
            out[i, c] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            j = indices[p]
            for c in range(n_classes):
                out[i, c] += v * W[j, c]
        for c in range(n_classes):
            out[i, c] = scale * out[i, c] + bias[c]


@nb.njit(nogil=True, cache=True)
def linear_decision_dense(X, W, bias, scale, out):
    """:func:`linear_decision_csr` for dense rows (zeros skipped, as in the learning step)."""
    n_classes = W.shape[1]
    for i in range(X.shape[0]):
        for c in range(n_classes):
            out[i, c] = 0.0
        for j in range(X.shape[1]):
            v = X[i, j]
            if v != 0.0:
                for c in range(n_classes):
                    out[i, c] += v * W[j, c]
        for c in range(n_classes):
            out[i, c] = scale * out[i, c] + bias[c]


def linear_decision(X, W, bias, scale):
    """Decision values (n, K) of the linear model ``scale · W`` (+ bias) on rows X (dense or CSR)."""
    out = np.empty((X.shape[0], W.shape[1]), dtype=np.float64)
    if sp.issparse(X):
        data, indices, indptr = csr_arrays(X)
        linear_decision_csr(data, indices, indptr, W, bias, float(scale), out)
    else:
        linear_decision_dense(np.ascontiguousarray(X, dtype=np.float64), W, bias, float(scale), out)
    return out


def pack_weights(W) -> dict[str, np.ndarray]:
    """W for a saved state: ``{"lin_w": W}`` when small or dense, else its non-zeros as
    ``{"lin_w_index": flat int64, "lin_w_values": float64, "lin_w_shape": (d, K)}``."""
    if W.size <= DENSE_WEIGHTS_MAX:
        return {"lin_w": W.copy()}
    flat = W.reshape(-1)
    index = np.flatnonzero(flat)
    if 12 * index.shape[0] >= 8 * flat.shape[0]:
        return {"lin_w": W.copy()}
    return {
        "lin_w_index": index.astype(np.int64),
        "lin_w_values": flat[index].copy(),
        "lin_w_shape": np.array(W.shape, dtype=np.int64),
    }


def unpack_weights(arrays, shape) -> np.ndarray:
    """W of :func:`pack_weights`; raises ValueError if it does not have ``shape``."""
    if "lin_w" in arrays:
        W = np.array(arrays["lin_w"], dtype=np.float64)
    else:
        W = np.zeros(tuple(int(s) for s in arrays["lin_w_shape"]))
        W.reshape(-1)[np.asarray(arrays["lin_w_index"], dtype=np.int64)] = arrays["lin_w_values"]
    if W.shape != tuple(shape):
        raise ValueError(f"saved weights have shape {W.shape}, the model needs {tuple(shape)}")
    return np.ascontiguousarray(W)


def linear_model_bytes(n_features, shuffle_buffer=0, run_guard=False, n_classes=2) -> int:
    """Bytes a linear model of this shape allocates (an estimate made before any allocation):
    the weights d · K · 8 (K = 1 for binary models) and two scratch rows, plus the larger of the
    two ways its buffer and guard hold rows — densely (as :func:`._base.model_bytes`) or sparse
    (:class:`._preprocessing.SparseRowStore`: at most K rows of d entries, bounded by 64 MiB
    for the buffer and 16 MiB for the reservoirs, times 2 for the arena's free half)."""
    d = max(1, int(n_features))
    k = 1 if n_classes == 2 else int(n_classes)
    total = d * k * 8 + d * 12 + k * 16  # W; scratch row (values, indices); bias, f
    dense = buffer_capacity(int(shuffle_buffer), d) * (d + 1) * 8
    k_buf = max(0, int(shuffle_buffer))
    sparse = 2 * min(BUFFER_MAX_BYTES, k_buf * d * SPARSE_ENTRY_BYTES) + 24 * k_buf
    if run_guard:
        dense += guard_capacity(n_classes, d) * n_classes * d * 8
        rows = GUARD_RESERVOIR * int(n_classes)
        sparse += 2 * min(SPARSE_GUARD_MAX_BYTES, rows * d * SPARSE_ENTRY_BYTES) + 16 * rows
    return int(total + max(dense, sparse))
