"""Kernel values for the exact dual solver, kernel k-means and DC-SVM.

Three kernels are supported (the same parametrisation as LIBSVM / scikit-learn ``SVC``):

* ``"rbf"``    k(x, z) = exp(-gamma * ||x - z||^2)
* ``"poly"``   k(x, z) = (gamma * <x, z> + coef0) ** degree
* ``"linear"`` k(x, z) = <x, z>

Training points are held in a :class:`KernelData` (dense C-contiguous float64 rows, or CSR
with int64 indices, plus cached squared norms).  Two kinds of routines work on it:

* numba column kernels (:func:`kernel_column_into`) used inside the coordinate-descent loop,
  one column per call over a contiguous range of working positions;
* block routines (:func:`kernel_block`, :func:`kernel_matvec`) that compute a whole
  rows x columns block with one BLAS product followed by a vectorised numba pass
  (:func:`finish_block`), in row chunks of bounded memory.

The exponential is computed by :func:`solvers.kernels.exp_inplace`, a branch-free range reduction
(x = k ln 2 + r, |r| <= ln(2)/2) with a degree-11 Taylor polynomial and an exponent-field
add (Cody & Waite 1980; the same scheme as Cephes ``exp``).  It vectorises under LLVM,
runs about 6x faster than ``numpy.exp`` here and has a relative error below 1e-13 for
arguments in [-708, 0] (kernel arguments are always <= 0 for the RBF kernel).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from .._params import KERNELS
from ..kernels import exp_inplace  # the shared vectorised exp (Cody-Waite, branch-free)

KERNEL_IDS = KERNELS

_BLAS_STATE = threading.local()


@contextlib.contextmanager
def single_thread_blas():
    """Limit BLAS to one thread for the duration (re-entrant, per thread).

    The block products here are small (tens of rows per chunk) and interleaved with numba
    loops; a multi-threaded BLAS spins its threads between calls and slows both down on a
    busy machine.
    """
    depth = getattr(_BLAS_STATE, "depth", 0)
    if depth:
        _BLAS_STATE.depth = depth + 1
        try:
            yield
        finally:
            _BLAS_STATE.depth -= 1
        return
    try:
        from threadpoolctl import threadpool_limits

        ctx = threadpool_limits(1, user_api="blas")
    except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
        ctx = contextlib.nullcontext()
    _BLAS_STATE.depth = 1
    try:
        with ctx:
            yield
    finally:
        _BLAS_STATE.depth = 0


_FAST = {"contract", "arcp", "nsz", "reassoc"}


@dataclass(frozen=True)
class KernelSpec:
    """A kernel function and its parameters.

    Parameters
    ----------
    kind : {"rbf", "poly", "linear"}
    gamma : float
        Scale of the RBF exponent or of the polynomial inner product; must be > 0.
    coef0 : float
        Additive constant of the polynomial kernel.
    degree : int
        Degree of the polynomial kernel (>= 1).

    Raises
    ------
    ValueError
        On an unknown kernel name, gamma <= 0 or degree < 1.
    """

    kind: str = "rbf"
    gamma: float = 1.0
    coef0: float = 0.0
    degree: int = 3
    offset: float = 0.0

    def __post_init__(self):
        if self.kind not in KERNEL_IDS:
            raise ValueError(f"unknown kernel {self.kind!r}; expected one of {sorted(KERNEL_IDS)}")
        if not (self.gamma > 0 and math.isfinite(self.gamma)):
            raise ValueError(f"gamma must be a positive finite number, got {self.gamma!r}")
        if int(self.degree) < 1:
            raise ValueError(f"degree must be >= 1, got {self.degree!r}")
        if not (self.offset >= 0 and math.isfinite(self.offset)):
            raise ValueError(f"offset must be a finite number >= 0, got {self.offset!r}")

    @property
    def params(self) -> tuple[int, float, float, int, float]:
        """``(kernel_id, gamma, coef0, degree, offset)`` as passed to the numba routines."""
        return (
            KERNEL_IDS[self.kind],
            float(self.gamma),
            float(self.coef0),
            int(self.degree),
            float(self.offset),
        )

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "gamma": float(self.gamma),
            "coef0": float(self.coef0),
            "degree": int(self.degree),
            "offset": float(self.offset),
        }


class KernelData:
    """Training rows in the layout the numba kernels read.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or scipy.sparse matrix
        Converted to C-contiguous float64 (dense) or CSR float64 with int64 indices and
        sorted indices (sparse).  The input is never modified.

    Attributes
    ----------
    dense : ndarray of shape (n_samples, n_features), float64, or shape (0, 0) if sparse.
    data, indices, indptr : CSR arrays (float64, int64, int64); length-0/1 dummies if dense.
    sqnorm : ndarray of shape (n_samples,), float64
        Squared Euclidean norms of the rows.
    is_sparse : bool
    """

    __slots__ = ("dense", "data", "indices", "indptr", "sqnorm", "is_sparse", "n_features")

    def __init__(self, X):
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64, copy=False)
            if not X.has_sorted_indices:
                X = X.sorted_indices()
            self.is_sparse = True
            self.data = np.ascontiguousarray(X.data, dtype=np.float64)
            self.indices = np.ascontiguousarray(X.indices, dtype=np.int64)
            self.indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
            self.dense = np.zeros((0, 0), dtype=np.float64)
            self.sqnorm = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
            self.n_features = X.shape[1]
        else:
            X = np.ascontiguousarray(X, dtype=np.float64)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}")
            self.is_sparse = False
            self.dense = X
            self.data = np.zeros(0, dtype=np.float64)
            self.indices = np.zeros(0, dtype=np.int64)
            self.indptr = np.zeros(1, dtype=np.int64)
            self.sqnorm = np.einsum("ij,ij->i", X, X)
            self.n_features = X.shape[1]

    @property
    def n_samples(self) -> int:
        return self.indptr.shape[0] - 1 if self.is_sparse else self.dense.shape[0]

    def matrix(self):
        """The rows as an ndarray (dense) or ``scipy.sparse.csr_matrix``."""
        if self.is_sparse:
            return sp.csr_matrix(
                (self.data, self.indices, self.indptr), shape=(self.n_samples, self.n_features)
            )
        return self.dense

    def take(self, idx) -> KernelData:
        """A new :class:`KernelData` holding rows ``idx`` (int array), in that order."""
        idx = np.asarray(idx, dtype=np.int64)
        out = KernelData.__new__(KernelData)
        out.is_sparse = self.is_sparse
        out.n_features = self.n_features
        out.sqnorm = self.sqnorm[idx]
        if self.is_sparse:
            sub = self.matrix()[idx]
            out.data = np.ascontiguousarray(sub.data, dtype=np.float64)
            out.indices = np.ascontiguousarray(sub.indices, dtype=np.int64)
            out.indptr = np.ascontiguousarray(sub.indptr, dtype=np.int64)
            out.dense = self.dense
        else:
            out.dense = np.ascontiguousarray(self.dense[idx])
            out.data, out.indices, out.indptr = self.data, self.indices, self.indptr
        return out

    def diag(self, spec: KernelSpec) -> np.ndarray:
        """k(x_i, x_i) for every row, shape (n_samples,), float64."""
        kid, gamma, coef0, degree, offset = spec.params
        if kid == 0:
            return np.full(self.n_samples, 1.0 + offset)
        if kid == 1:
            return (gamma * self.sqnorm + coef0) ** degree + offset
        return self.sqnorm + offset


def with_single_thread_blas(fn):
    """Decorator: run ``fn`` inside :func:`single_thread_blas`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_thread_blas():
            return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- numba core
@numba.njit(nogil=True, cache=True)
def _finish_row(buf, start, stop, sqi, sqrows, kid, gamma, coef0, degree, offset):
    """buf[start:stop] holds <x_i, x_q>; turn it into k(x_i, x_q)."""
    if kid == 0:
        for q in range(start, stop):
            t = sqi + sqrows[q] - 2.0 * buf[q]
            buf[q] = -gamma * max(t, 0.0)
        exp_inplace(buf[start:stop], stop - start)
    elif kid == 1:
        for q in range(start, stop):
            b = gamma * buf[q] + coef0
            r = 1.0
            for _ in range(degree):
                r *= b
            buf[q] = r
    if offset != 0.0:
        for q in range(start, stop):
            buf[q] += offset


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _dots_dense(xi, Xw, start, stop, buf):
    d = Xw.shape[1]
    for q in range(start, stop):
        s = 0.0
        for k in range(d):
            s += Xw[q, k] * xi[k]
        buf[q] = s


@numba.njit(nogil=True, cache=True)
def _dots_sparse(i, rows, start, stop, data, indices, indptr, scatter, buf):
    for t in range(indptr[i], indptr[i + 1]):
        scatter[indices[t]] = data[t]
    for q in range(start, stop):
        r = rows[q]
        s = 0.0
        for t in range(indptr[r], indptr[r + 1]):
            s += data[t] * scatter[indices[t]]
        buf[q] = s
    for t in range(indptr[i], indptr[i + 1]):
        scatter[indices[t]] = 0.0


@numba.njit(nogil=True, cache=True)
def kernel_column_into(
    i_pos,
    i_orig,
    start,
    stop,
    is_sparse,
    Xw,
    sqw,
    perm,
    data,
    indices,
    indptr,
    scatter,
    kid,
    gamma,
    coef0,
    degree,
    offset,
    buf,
):
    """buf[q] = k(x_i, x_{row q}) for q in [start, stop).

    Dense: rows are ``Xw[q]`` (working copy in position order) and ``x_i = Xw[i_pos]``.
    Sparse: rows are CSR rows ``perm[q]`` and ``x_i`` is CSR row ``i_orig``; ``scatter``
    is an all-zero float64 work vector of length n_features (left all-zero on return).
    ``sqw`` holds the squared norms in position order.
    """
    if stop <= start:
        return
    if is_sparse:
        _dots_sparse(i_orig, perm, start, stop, data, indices, indptr, scatter, buf)
    else:
        _dots_dense(Xw[i_pos], Xw, start, stop, buf)
    _finish_row(buf, start, stop, sqw[i_pos], sqw, kid, gamma, coef0, degree, offset)


@numba.njit(nogil=True, cache=True)
def finish_block(M, sqa, sqb, kid, gamma, coef0, degree, offset):
    """In place: M[a, b] = <x_a, z_b>  ->  k(x_a, z_b).  M is C-contiguous float64."""
    na, nb = M.shape
    if kid == 0:
        for a in range(na):
            row = M[a]
            s = sqa[a]
            for b in range(nb):
                row[b] = -gamma * max(s + sqb[b] - 2.0 * row[b], 0.0)
        exp_inplace(M.reshape(na * nb), na * nb)
    elif kid == 1:
        for a in range(na):
            for b in range(nb):
                v = gamma * M[a, b] + coef0
                r = 1.0
                for _ in range(degree):
                    r *= v
                M[a, b] = r
    if offset != 0.0:
        for a in range(na):
            for b in range(nb):
                M[a, b] += offset


# --------------------------------------------------------------------------- block helpers
def _rows_matrix(kd: KernelData, idx):
    if idx is None:
        return kd.matrix(), kd.sqnorm
    idx = np.asarray(idx, dtype=np.int64)
    if kd.is_sparse:
        return kd.matrix()[idx], kd.sqnorm[idx]
    return kd.dense[idx], kd.sqnorm[idx]


def kernel_block(A: KernelData, B: KernelData, spec: KernelSpec, rows=None, cols=None) -> np.ndarray:
    """Kernel matrix between rows of ``A`` and rows of ``B``.

    Parameters
    ----------
    A, B : KernelData
    spec : KernelSpec
    rows, cols : int arrays or None
        Row subsets of ``A`` and ``B`` (None = all rows).

    Returns
    -------
    K : ndarray of shape (len(rows), len(cols)), float64
        One BLAS product plus :func:`finish_block`; memory is the size of the output.
    """
    Xa, sqa = _rows_matrix(A, rows)
    Xb, sqb = _rows_matrix(B, cols)
    if sp.issparse(Xa) or sp.issparse(Xb):
        if sp.issparse(Xb) and Xb.shape[0] * Xb.shape[1] * 8 <= 64 * 2**20:
            Xb = Xb.toarray()  # sparse @ dense is much faster than sparse @ sparse here
        M = Xa @ Xb.T
        M = M.toarray() if sp.issparse(M) else np.asarray(M)
        M = np.ascontiguousarray(M, dtype=np.float64)
    else:
        M = np.ascontiguousarray(Xa @ Xb.T)
    if M.size:
        finish_block(M, np.ascontiguousarray(sqa), np.ascontiguousarray(sqb), *spec.params)
    return M


@with_single_thread_blas
def kernel_matvec(
    A: KernelData, B: KernelData, spec: KernelSpec, coef, rows=None, cols=None, chunk_mb: float = 4.0
) -> np.ndarray:
    """``K(A[rows], B[cols]) @ coef`` computed in row chunks of at most ``chunk_mb`` MB.

    Parameters
    ----------
    coef : ndarray of shape (len(cols),) or (len(cols), m), float64

    Returns
    -------
    out : ndarray of shape (len(rows),) or (len(rows), m), float64
    """
    coef = np.asarray(coef, dtype=np.float64)
    n_rows = A.n_samples if rows is None else len(rows)
    n_cols = B.n_samples if cols is None else len(cols)
    out = np.zeros((n_rows,) + coef.shape[1:], dtype=np.float64)
    if n_rows == 0 or n_cols == 0:
        return out
    if rows is None:
        rows = np.arange(n_rows)
    rows = np.asarray(rows, dtype=np.int64)
    if cols is not None:
        Bc = B.take(cols)
    else:
        Bc = B
    step = max(1, int(chunk_mb * 2**20 / (8 * n_cols)))
    for s in range(0, n_rows, step):
        K = kernel_block(A, Bc, spec, rows=rows[s : s + step])
        out[s : s + step] = K @ coef
    return out
