"""Gaussian (RBF) kernel rows against a budget of support vectors.

The support vectors of a budgeted model are stored **transposed**, as a ``(d, capacity)``
float64 matrix ``sv_t`` whose column ``j`` is SV ``j``, with their squared norms cached in
``sv_sq``.  A kernel row for one input is then a sweep over the input's non-zero features
whose inner loop runs over contiguous SVs (and vectorises), followed by one ``exp`` per SV:

    k(x, x_j) = exp(-γ · max(0, ‖x‖² + ‖x_j‖² − 2⟨x, x_j⟩))

All functions are numba ``njit(nogil=True, cache=True)`` and allocate nothing.  The
exponentials of a row are computed by :func:`exp_inplace`, a branch-free vectorisable
``exp`` (about 6× faster than calling libm once per SV); :func:`exp_scalar` is the same
``exp`` of one value, for loops that fuse it with what comes before and after (the blocked
decision values of :mod:`svmstream.solvers.budgeted._decision`).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def _f64_bits(typingctx, value):
    """The IEEE-754 bits of a float64 as an int64 (an LLVM bitcast: no memory, vectorises)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _bits_f64(typingctx, bits):
    """The float64 whose IEEE-754 bits are the int64 ``bits`` (inverse of :func:`_f64_bits`)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@nb.njit(nogil=True, cache=True, fastmath={"contract", "arcp", "nsz"})
def exp_scalar(x):
    """``exp(x)`` of one float64; arguments are clamped below at −708.

    Cody–Waite range reduction x = k·ln 2 + r (|r| ≤ ln(2)/2) with a degree-11 Taylor
    polynomial for e^r and k added to the IEEE-754 exponent bits (the Cephes ``exp``
    scheme).  Relative error < 1e-13 on [−708, 0]; no branches, so loops calling it vectorise.

    Not ``inline="always"``: numba would then compile it under the caller's fastmath flags,
    and a caller that allows reassociation (a vectorised sum) would fold the rounding trick
    ``(v/ln 2 + magic) − magic`` away; as a function of its own LLVM still inlines it, with
    these flags, and vectorises the caller's loop.
    """
    inv_ln2 = 1.4426950408889634
    magic = 6755399441055744.0
    v = max(x, -708.0)
    kf = (v * inv_ln2 + magic) - magic
    r = (v - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10
    p = 1.0 + r * (
        1.0
        + r
        * (
            0.5
            + r
            * (
                1.0 / 6
                + r
                * (
                    1.0 / 24
                    + r
                    * (
                        1.0 / 120
                        + r
                        * (
                            1.0 / 720
                            + r
                            * (
                                1.0 / 5040
                                + r
                                * (
                                    1.0 / 40320
                                    + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800)))
                                )
                            )
                        )
                    )
                )
            )
        )
    )
    return _bits_f64(_f64_bits(p) + (np.int64(kf) << 52))


@nb.njit(nogil=True, cache=True, fastmath={"contract", "arcp", "nsz"})
def exp_inplace(x, m):
    """``x[:m] ← exp(x[:m])`` in place (:func:`exp_scalar` per element; the loop vectorises:
    the same time per row of 500 as the loop written out, and the same bits)."""
    for q in range(m):
        x[q] = exp_scalar(x[q])


@nb.njit(nogil=True, cache=True)
def squared_norm(x):
    """‖x‖² of a 1-D float64 array."""
    total = 0.0
    for k in range(x.shape[0]):
        total += x[k] * x[k]
    return total


@nb.njit(nogil=True, cache=True)
def sv_dot_products(x, sv_t, n_sv, out):
    """``out[j] = ⟨x, sv_t[:, j]⟩`` for ``j < n_sv``.

    Parameters
    ----------
    x : (d,) float64
    sv_t : (d, capacity) float64, SVs as columns
    n_sv : int, number of live SVs (columns ``0 .. n_sv-1``)
    out : (>= n_sv,) float64, overwritten
    """
    for j in range(n_sv):
        out[j] = 0.0
    for k in range(x.shape[0]):
        xk = x[k]
        if xk != 0.0:
            row = sv_t[k]
            for j in range(n_sv):
                out[j] += xk * row[j]


@nb.njit(nogil=True, cache=True)
def rbf_row(x, x_sq, sv_t, sv_sq, n_sv, gamma, out):
    """Gaussian kernel values ``out[j] = exp(-γ‖x − sv_j‖²)`` for ``j < n_sv``.

    Parameters
    ----------
    x : (d,) float64
    x_sq : float, ‖x‖² (cached by the caller)
    sv_t : (d, capacity) float64
    sv_sq : (capacity,) float64, cached ‖sv_j‖²
    n_sv : int
    gamma : float, RBF width γ > 0
    out : (>= n_sv,) float64, overwritten with the kernel values
    """
    sv_dot_products(x, sv_t, n_sv, out)
    for j in range(n_sv):
        dist = x_sq + sv_sq[j] - 2.0 * out[j]
        out[j] = -gamma * (dist if dist > 0.0 else 0.0)
    exp_inplace(out, n_sv)


@nb.njit(nogil=True, cache=True)
def rbf_row_and_log(x, x_sq, sv_t, sv_sq, n_sv, gamma, out, log_out):
    """:func:`rbf_row` that also keeps ``log_out[j] = −γ‖x − sv_j‖²`` (= log k(x, sv_j)).

    The training steps use it for the margin: if x is added as an SV and then is the one
    merged away, the merge reuses both rows instead of recomputing them
    (:func:`svmstream.solvers.budgeted._merging.merge_smallest`, ``known_row``).  ``log_out`` is (>= n_sv,) float64.
    """
    sv_dot_products(x, sv_t, n_sv, out)
    for j in range(n_sv):
        dist = x_sq + sv_sq[j] - 2.0 * out[j]
        value = -gamma * (dist if dist > 0.0 else 0.0)
        out[j] = value
        log_out[j] = value
    exp_inplace(out, n_sv)
