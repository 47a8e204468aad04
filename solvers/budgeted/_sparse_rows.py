"""Sparse rows through the order stage (linear models and sparse SV storage): the buffer and
the run guard over references into an append-only arena of CSR rows (:class:`SparseRowStore`),
the same decisions from the same uniforms as :func:`._preprocessing.buffer_and_guard` over
dense rows, and the sparse capacities."""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import scipy.sparse as sp

from ._preprocessing import (
    BUFFER_MAX_BYTES,
    GUARD_RESERVOIR,
    S_BUF_N,
    S_REPLAYED,
    SPARSE_GUARD_MAX_BYTES,
    _guard_pick,
    _guard_record,
)

# ---------------------------------------------------------------------- sparse rows (linear models)
# A linear model fed sparse rows keeps them sparse through the buffer and the guard: the rows
# live in an append-only arena (values float64, indices int32) and the buffer's slots and the
# reservoirs hold (start, length) references into it.  The kernels below are buffer_and_guard
# and _guard_step with a reference in place of a dense row: the same decisions from the same
# uniforms, so a sparse stream and its dense form release the same rows in the same order.


@nb.njit(nogil=True, cache=True)
def _guard_step_refs(
    out_s, out_l, out_y, out_orig, k, u0, u1, u2, binary, res_s, res_l, res_cap, res_n, seen, st, min_run,
    log_alpha,
):  # fmt: skip
    """:func:`_guard_step` on row references (``res_s``/``res_l`` (n_classes, ≥ min(R,
    res_n + 1)) int64; ``res_cap``: R)."""
    row = k - 1
    c, j = _guard_record(out_y, row, u0, binary, res_cap, res_n, seen, st)
    if j < res_cap:
        res_s[c, j] = out_s[row]
        res_l[c, j] = out_l[row]
    if k >= out_s.shape[0]:
        return k
    o, r = _guard_pick(c, u1, u2, res_n, seen, st, min_run, log_alpha)
    if o < 0:
        return k
    out_s[k] = res_s[o, r]
    out_l[k] = res_l[o, r]
    out_y[k] = (2.0 * o - 1.0) if binary else float(o)
    out_orig[k] = False
    st[S_REPLAYED] += 1
    return k + 1


@nb.njit(nogil=True, cache=True)
def buffer_and_guard_refs(
    in_s, in_l, y, w, u, buf_s, buf_l, buf_y, buf_w, cap, st, guard, binary, res_s, res_l, res_cap, res_n, seen,
    min_run, log_alpha, out_s, out_l, out_y, out_w, out_orig,
):  # fmt: skip
    """:func:`buffer_and_guard` on row references: ``in_s``/``in_l`` (n,) int64 — where the
    arriving rows start in the arena and their lengths; ``buf_s``/``buf_l`` the buffer's slots
    (K = ``cap``, grown with the fill like ``buf_X``); ``res_s``/``res_l`` (n_classes, ≥ min(R,
    max(res_n) + n)) the reservoirs (R = ``res_cap``); ``out_s``/``out_l`` (2n,) receive the
    references of the rows to learn.  Returns the number of output rows."""
    k = 0
    for i in range(in_s.shape[0]):
        if cap > 0:
            m = st[S_BUF_N]
            if u[i, 0] * cap < m:  # probability m/K (1 once the buffer is full)
                j = min(int(u[i, 1] * m), m - 1)
                out_s[k] = buf_s[j]
                out_l[k] = buf_l[j]
                out_y[k] = buf_y[j]
                out_w[k] = buf_w[j]
                buf_s[j] = in_s[i]
                buf_l[j] = in_l[i]
                buf_y[j] = y[i]
                buf_w[j] = w[i]
            else:
                buf_s[m] = in_s[i]
                buf_l[m] = in_l[i]
                buf_y[m] = y[i]
                buf_w[m] = w[i]
                st[S_BUF_N] = m + 1
                continue
        else:
            out_s[k] = in_s[i]
            out_l[k] = in_l[i]
            out_y[k] = y[i]
            out_w[k] = w[i]
        out_orig[k] = True
        k += 1
        if guard:
            k = _guard_step_refs(
                out_s, out_l, out_y, out_orig, k, u[i, 2], u[i, 3], u[i, 4], binary, res_s, res_l, res_cap,
                res_n, seen, st, min_run, log_alpha,
            )  # fmt: skip
    return k


@nb.njit(nogil=True, cache=True)
def _gather_rows(data, indices, starts, lens, out_data, out_indices, out_indptr):
    """Copy the arena rows ``(starts[r], lens[r])`` into a CSR matrix's arrays, in order."""
    p = 0
    out_indptr[0] = 0
    for r in range(starts.shape[0]):
        s = starts[r]
        for q in range(lens[r]):
            out_data[p + q] = data[s + q]
            out_indices[p + q] = indices[s + q]
        p += lens[r]
        out_indptr[r + 1] = p


@nb.njit(nogil=True, cache=True)
def _compact_rows(data, indices, buf_s, buf_l, buf_n, res_s, res_l, res_n, new_data, new_indices):
    """Copy the live rows (buffer slots ``:buf_n``, reservoir slots ``:res_n[c]``) to the front of
    a new arena and point their references there; returns the entries used."""
    p = 0
    for j in range(buf_n):
        s = buf_s[j]
        for q in range(buf_l[j]):
            new_data[p + q] = data[s + q]
            new_indices[p + q] = indices[s + q]
        buf_s[j] = p
        p += buf_l[j]
    for c in range(res_s.shape[0]):
        for j in range(res_n[c]):
            s = res_s[c, j]
            for q in range(res_l[c, j]):
                new_data[p + q] = data[s + q]
                new_indices[p + q] = indices[s + q]
            res_s[c, j] = p
            p += res_l[c, j]
    return p


def grow_rows(arr: np.ndarray, need: int, limit: int, axis: int = 0) -> np.ndarray:
    """``arr`` with room for ``min(need, limit)`` rows along ``axis``: itself if it has them, else a
    zero-filled copy of at least twice its size (``limit`` at most), the old rows first.

    The shuffle buffer's and the reservoirs' arrays grow this way (amortised O(1) per row) up to
    their capacities K and R, so an idle model holds only the rows it has received."""
    have = arr.shape[axis]
    need = min(int(need), int(limit))
    if need <= have:
        return arr
    shape = list(arr.shape)
    shape[axis] = min(int(limit), max(need, 2 * have))
    out = np.zeros(shape, dtype=arr.dtype)
    out[(slice(None),) * axis + (slice(0, have),)] = arr
    return out


#: Bytes of one stored entry of a sparse row (float64 value, int32 index).
SPARSE_ENTRY_BYTES = 12
#: The smallest arena (entries) a sparse row store allocates.
ARENA_MIN = 4096


def sparse_buffer_capacity(shuffle_buffer: int, row_nnz: float) -> int:
    """Rows a shuffle buffer of sparse rows holds: ``shuffle_buffer``, bounded so that that many
    rows of ``row_nnz`` entries (the mean of the rows that opened it) fit
    :data:`BUFFER_MAX_BYTES` (reuters, 44 entries per row: 20,000 = 10.6 MB; sector, 163: 20,000
    = 39 MB)."""
    if shuffle_buffer <= 0:
        return 0
    per_row = SPARSE_ENTRY_BYTES * max(1, math.ceil(row_nnz))
    return int(max(1, min(shuffle_buffer, BUFFER_MAX_BYTES // per_row)))


def sparse_guard_capacity(n_classes: int, row_nnz: float) -> int:
    """Rows per class a run guard of sparse rows keeps: :data:`GUARD_RESERVOIR`, bounded by
    :data:`SPARSE_GUARD_MAX_BYTES` for rows of ``row_nnz`` entries."""
    per_class = SPARSE_GUARD_MAX_BYTES // (
        SPARSE_ENTRY_BYTES * max(1, math.ceil(row_nnz)) * max(1, n_classes)
    )
    return int(max(1, min(GUARD_RESERVOIR, per_class)))


class SparseRowStore:
    """The rows a linear model's shuffle buffer and run guard hold, stored sparse.

    An append-only arena (``data`` float64, ``indices`` int32) and references ``(start,
    length)``: ``buf_start``/``buf_len`` for the buffer's slots (K = ``capacity`` of them),
    ``res_start``/``res_len`` (n_classes, ·) for the reservoirs (R = ``reservoir`` per class).
    The slot arrays grow with the fill (:meth:`reserve`, doubling up to K and R), so a store
    that holds few rows costs few bytes.  Every arriving row is appended once; a row that
    leaves the buffer and enters a reservoir keeps its place.  When an append does not fit, the
    live rows are compacted into a new arena of twice their size (amortised O(nnz) per row).
    """

    def __init__(self, capacity: int, n_classes: int, reservoir: int):
        self.data = np.zeros(0)
        self.indices = np.zeros(0, dtype=np.int32)
        self.used = 0
        self.capacity = int(capacity)
        self.reservoir = int(reservoir)
        self.buf_start = np.zeros(0, dtype=np.int64)
        self.buf_len = np.zeros(0, dtype=np.int64)
        self.res_start = np.zeros((n_classes, 0), dtype=np.int64)
        self.res_len = np.zeros((n_classes, 0), dtype=np.int64)

    def reserve(self, buf_rows: int, res_rows: int) -> None:
        """Make room for ``buf_rows`` buffer slots and ``res_rows`` reservoir slots per class
        (each bounded by its capacity; arrays grow to at least twice their size)."""
        self.buf_start = grow_rows(self.buf_start, buf_rows, self.capacity)
        self.buf_len = grow_rows(self.buf_len, buf_rows, self.capacity)
        self.res_start = grow_rows(self.res_start, res_rows, self.reservoir, axis=1)
        self.res_len = grow_rows(self.res_len, res_rows, self.reservoir, axis=1)

    def append(self, data, indices, indptr, buf_n: int, res_n) -> tuple[np.ndarray, np.ndarray]:
        """Append the CSR rows ``(data, indices, indptr)``; returns their ``(starts, lengths)``."""
        nnz = data.shape[0]
        if self.used + nnz > self.data.shape[0]:
            self._compact(nnz, buf_n, res_n)
        base = self.used
        self.data[base : base + nnz] = data
        self.indices[base : base + nnz] = indices
        self.used = base + nnz
        return base + indptr[:-1].astype(np.int64), np.diff(indptr).astype(np.int64)

    def _compact(self, nnz_in: int, buf_n: int, res_n) -> None:
        live = int(self.buf_len[:buf_n].sum()) + sum(
            int(self.res_len[c, : res_n[c]].sum()) for c in range(self.res_len.shape[0])
        )
        size = max(2 * (live + nnz_in), ARENA_MIN)
        data, indices = np.empty(size), np.empty(size, dtype=np.int32)
        self.used = int(
            _compact_rows(
                self.data,
                self.indices,
                self.buf_start,
                self.buf_len,
                buf_n,
                self.res_start,
                self.res_len,
                res_n,
                data,
                indices,
            )
        )
        self.data, self.indices = data, indices

    def rows(self, starts, lens, n_features: int):
        """The referenced rows as a CSR matrix (n, n_features) with sorted indices."""
        indptr = np.empty(starts.shape[0] + 1, dtype=np.int64)
        nnz = int(lens.sum())
        data, indices = np.empty(nnz), np.empty(nnz, dtype=np.int32)
        _gather_rows(self.data, self.indices, starts, lens, data, indices, indptr)
        out = sp.csr_matrix((data, indices, indptr), shape=(starts.shape[0], n_features))
        out.has_sorted_indices = True  # the arena's rows came in sorted (csr_arrays)
        return out

    def resize_reservoirs(self, n_classes: int, reservoir: int) -> None:
        """One more class, and reservoirs of at most ``reservoir`` rows (the first ones are kept)."""
        keep = min(reservoir, self.res_start.shape[1])
        res_start = np.zeros((n_classes, keep), dtype=np.int64)
        res_len = np.zeros((n_classes, keep), dtype=np.int64)
        res_start[: self.res_start.shape[0], :keep] = self.res_start[:, :keep]
        res_len[: self.res_len.shape[0], :keep] = self.res_len[:, :keep]
        self.res_start, self.res_len = res_start, res_len
        self.reservoir = int(reservoir)

    def get_state(self, buf_n: int, res_n, n_features: int) -> dict[str, np.ndarray]:
        """The buffer's rows (slots ``:buf_n``) and the reservoirs' rows (class by class, slots
        ``:res_n[c]``) as two CSR matrices' arrays."""
        buf = self.rows(self.buf_start[:buf_n], self.buf_len[:buf_n], n_features)
        res_s = np.concatenate([self.res_start[c, : res_n[c]] for c in range(self.res_start.shape[0])])
        res_l = np.concatenate([self.res_len[c, : res_n[c]] for c in range(self.res_len.shape[0])])
        res = self.rows(res_s.astype(np.int64), res_l.astype(np.int64), n_features)
        return {
            "pp_sbuf_data": buf.data,
            "pp_sbuf_indices": buf.indices,
            "pp_sbuf_indptr": buf.indptr,
            "pp_sres_data": res.data,
            "pp_sres_indices": res.indices,
            "pp_sres_indptr": res.indptr,
        }

    @classmethod
    def from_state(cls, arrays, capacity: int, n_classes: int, reservoir: int, res_n) -> SparseRowStore:
        """Rebuild from :meth:`get_state`: the buffer's rows, then the reservoirs', in one arena."""
        store = cls(capacity, n_classes, reservoir)
        buf_ptr = np.asarray(arrays["pp_sbuf_indptr"], dtype=np.int64)
        res_ptr = np.asarray(arrays["pp_sres_indptr"], dtype=np.int64)
        store.reserve(buf_ptr.shape[0] - 1, int(np.max(res_n)) if len(res_n) else 0)
        data = [arrays["pp_sbuf_data"], arrays["pp_sres_data"]]
        indices = [arrays["pp_sbuf_indices"], arrays["pp_sres_indices"]]
        store.data = np.concatenate(data).astype(np.float64)
        store.indices = np.concatenate(indices).astype(np.int32)
        store.used = store.data.shape[0]
        n_buf = buf_ptr.shape[0] - 1
        store.buf_start[:n_buf] = buf_ptr[:-1]
        store.buf_len[:n_buf] = np.diff(buf_ptr)
        offset, r = buf_ptr[-1], 0
        for c in range(n_classes):
            for j in range(int(res_n[c])):
                store.res_start[c, j] = offset + res_ptr[r]
                store.res_len[c, j] = res_ptr[r + 1] - res_ptr[r]
                r += 1
        return store
