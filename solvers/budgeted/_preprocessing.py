"""What an online model does to examples before its solver sees them.

Users send raw features, in the order they have them (LIBSVM files are often sorted by
label), and rarely know γ.  A budgeted model therefore owns four stages (issue "Good models
with no settings").  Defaults and the measurements behind them (6 data sets, median of 3
seeds, target: within 2 pp of scikit-learn ``SVC()`` in file order and shuffled):

1. **Warm-up window.**  The first ``warmup`` examples (exactly: a batch that crosses the
   boundary is split) are held, not learned.  When the window closes, the feature scaling
   and γ are computed from it and frozen:

   * ``scaling="maxabs"``: ``x / max|x|`` per feature (max 0 → 1); keeps sparsity;
   * ``scaling="standard"``: ``(x − mean) / std`` per feature (std 0 → 1);
   * ``scaling="auto"`` (default) = ``"maxabs"`` for dense and sparse input.  Standardising
     on a window is fragile when a stream is not shuffled: on ijcnn1 in file order two
     features have a 56× larger std over the stream than over the first 1,000 rows, and
     window-standardised BSGD reaches 91.5% against 97.5% with max-abs (max-abs ratios are
     1.1–8×).  Max-abs costs about 1 pp on ijcnn1 shuffled (96.1 vs 97.1) and is equal or
     better on the other sets;
   * ``gamma="scale"``: 1 / (d · Var(X_window scaled)) over all entries of the window
     matrix — scikit-learn's ``SVC(gamma="scale")`` convention (1.0 if the variance is 0) —
     times :data:`MULTICLASS_GAMMA_FACTOR` (6) when the model has more than two classes
     when the window closes (a plain estimator's "scale" has no factor).  With B shared by K
     classes a budgeted model needs narrower kernels than the exact SVM; the measurements
     behind 6 (letter, pendigits, digits; binary models keep 1) are in ``docs/online.md``
     ("Classes").

   The window's examples then enter the shuffle buffer in a shuffled order.
2. **Scaling** of every later example (learning and prediction alike) with the frozen
   statistics.
3. **Shuffle buffer** of K examples (default 20,000; K = 1,000 missed the target by
   0.2–0.6 pp on phishing and ijcnn1 shuffled).  While it holds m < K rows, an arriving row
   is stored and, with probability m/K, a uniformly drawn buffered row is learned and
   replaced by it; once full (m = K) every arriving row replaces a uniformly drawn one,
   which is learned.  So every row leaves with the same probability 1/K per arrival from
   the first row on: its delay is geometric with mean K, as in a full buffer, while
   learning starts right after the window (after n rows past the window, about
   n − K(1 − e^(−n/K)) have been learned).  :meth:`Preprocessor.drain` (``flush``) learns
   what is left.  A buffer never holds more than :data:`BUFFER_MAX_BYTES` of dense rows,
   so K shrinks for wide data: 64 MiB / (8 B · d) rows, i.e. K = 20,000 (the default, not
   bounded) for d = 123 (a9a, 19.7 MB) and K = 1,008 for d = 8,315 (reuters).
4. **Run guard** for label-sorted streams.  A per-class reservoir (reservoir sampling) keeps
   up to :data:`GUARD_RESERVOIR` learned examples of each class (bounded by
   :data:`GUARD_MAX_BYTES`).  While the last :data:`GUARD_MIN_RUN` learned examples are all
   of one class c, another class has been seen, and such a run is improbable for the class
   frequencies seen so far (q_c^run ≤ :data:`GUARD_ALPHA`, q_c = share of c among the
   examples learned so far), each learned example is followed by one example of another
   class replayed from its reservoir.  On skin_nonskin in file order (the first ~40k rows
   are one class, then ~155k of the other) BSGD otherwise ends at the majority rate (78.9%)
   for every buffer up to 20,000; the relative trigger keeps a stream whose true minority
   rate is below 1/1,000 from firing (a run of 1,000 is then common, one of 27,600 is not).
   Replayed examples are learned steps (``t_`` counts them); they are not received examples
   (``n_seen_``) and do not enter ``last_margins_``/``last_y_``.

Linear models (``kernel="linear"``, ``Preprocessor(linear=True)``) have no γ, resolve
``scaling="auto"`` by :func:`linear_auto_scaling`, and keep CSR rows sparse: max-abs scaling
multiplies the values by their feature's factor, and a model whose first buffered rows are CSR
holds its buffer's and reservoirs' rows in a :class:`SparseRowStore` (same draws and decisions
as the dense buffer, K bounded by bytes of sparse rows: 20,000 for reuters and sector, where a
dense buffer holds 1,008 and 151 rows).  Kernel models with sparse support vectors
(``sv_storage_ == "sparse"``, ``Preprocessor(sparse_rows=True)``) do the same with their rows —
CSR through max-abs scaling, the buffer and the guard, dense rows converted — while keeping the
kernel model's ``scaling="auto"`` (max-abs) and γ.  For CSR input without an offset,
``gamma="scale"`` is the variance of the scaled window computed from its nonzeros
(:func:`scale_gamma_sparse`, no densified window) for either storage of the SVs.

Everything here is plain data saved in the model's state, so a restored model continues
exactly (exactly-once stream recovery depends on it).  Random draws come from the model's
``rng_`` (saved as well): five uniforms per row entering the buffer, so the draws — and the
model — do not depend on how the stream is cut into batches.
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
#: ``gamma="scale"`` of a model with more than two classes is this many times the binary rule
#: (measured: the table of the module docstring).
MULTICLASS_GAMMA_FACTOR = 6.0

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
    X, y, u, buf_X, buf_y, cap, st, guard, binary, res_X, res_cap, res_n, seen, min_run, log_alpha, out_X, out_y,
    out_orig,
):  # fmt: skip
    """Pass rows through the shuffle buffer and the run guard; returns the rows to learn.

    X : (n, d) float64 scaled rows; y : (n,) encoded labels (±1 binary, class index else);
    u : (n, DRAWS_PER_ROW) uniforms in [0, 1); cap : K, the buffer's capacity (0: rows pass
    straight through); buf_X : (≥ min(K, m + n), d), buf_y : (≥ min(K, m + n),) — the buffer,
    m = ``st[S_BUF_N]`` rows filled (its arrays grow with the fill, :meth:`Preprocessor._reserve`:
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
                _copy_row(X, i, buf_X, j)
                buf_y[j] = y[i]
            else:
                _copy_row(X, i, buf_X, m)
                buf_y[m] = y[i]
                st[S_BUF_N] = m + 1
                continue
        else:
            _copy_row(X, i, out_X, k)
            out_y[k] = y[i]
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
    in_s, in_l, y, u, buf_s, buf_l, buf_y, cap, st, guard, binary, res_s, res_l, res_cap, res_n, seen, min_run,
    log_alpha, out_s, out_l, out_y, out_orig,
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
                buf_s[j] = in_s[i]
                buf_l[j] = in_l[i]
                buf_y[j] = y[i]
            else:
                buf_s[m] = in_s[i]
                buf_l[m] = in_l[i]
                buf_y[m] = y[i]
                st[S_BUF_N] = m + 1
                continue
        else:
            out_s[k] = in_s[i]
            out_l[k] = in_l[i]
            out_y[k] = y[i]
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


def linear_auto_scaling(X) -> str:
    """``scaling="auto"`` of a linear model: ``"none"`` when every |x| of the window is ≤ 1 (the
    features share a scale already: tf-idf, unit-norm rows, LIBSVM's ``.scale`` files, binary
    features), else ``"maxabs"``.  Max-abs from a 1,000-row window stretches the features that
    are rare in it: one pass over shuffled sector reached 72% with it against 90% without
    (reuters 95.9% against 96.7%; ``docs/defaults.md``)."""
    values = X.data if sp.issparse(X) else np.asarray(X)
    top = float(np.abs(values).max()) if values.size else 0.0
    return "none" if top <= 1.0 else "maxabs"


def scale_sparse(X, factor):
    """Max-abs scaling of CSR rows that keeps them sparse: the values times ``factor[indices]``."""
    X = X.tocsr()
    return sp.csr_matrix((X.data * factor[X.indices], X.indices, X.indptr), shape=X.shape)


def fit_scaler(X, kind: str) -> tuple[str, np.ndarray, np.ndarray]:
    """Per-feature ``(kind, offset, factor)`` so that scaled x = (x − offset) · factor.

    X : (n, d) float64 dense or CSR; kind : "auto" | "standard" | "maxabs" | "none"
    ("auto" resolves to "maxabs" for dense and CSR input alike, see the module docstring).
    Returns offset and factor as (d,) float64 arrays; constant features get factor 1.
    """
    d = X.shape[1]
    if kind == "auto":
        kind = "maxabs"
    offset = np.zeros(d)
    factor = np.ones(d)
    if kind == "standard":
        mean = np.asarray(X.mean(axis=0)).ravel()
        sq = np.asarray((X.multiply(X) if sp.issparse(X) else X * X).mean(axis=0)).ravel()
        std = np.sqrt(np.maximum(sq - mean * mean, 0.0))
        offset = mean
        factor = np.where(std > 1e-12 * np.maximum(1.0, np.abs(mean)), 1.0 / np.where(std > 0, std, 1.0), 1.0)
    elif kind == "maxabs":
        top = np.asarray(abs(X).max(axis=0).todense() if sp.issparse(X) else np.abs(X).max(axis=0)).ravel()
        factor = np.where(top > 0, 1.0 / np.where(top > 0, top, 1.0), 1.0)
    return kind, offset, factor


def scale_dense(X, offset, factor) -> np.ndarray:
    """Scaled dense copy of rows X (dense or CSR), (n, d) float64 C-contiguous."""
    out = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    out = (out - offset) * factor if offset.any() else out * factor
    return np.ascontiguousarray(out)


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


def _widen(X, d):
    """Rows X (dense or CSR) with zero columns appended up to width d."""
    if X.shape[1] >= d:
        return X
    if sp.issparse(X):
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    return np.hstack([np.asarray(X, dtype=np.float64), np.zeros((X.shape[0], d - X.shape[1]))])


def _stack(parts):
    return sp.vstack(parts, format="csr") if any(sp.issparse(p) for p in parts) else np.vstack(parts)


class Preprocessor:
    """The warm-up window, the frozen scaler and γ, the shuffle buffer and the run guard of
    one model.

    Parameters
    ----------
    scaling : {"auto", "standard", "maxabs", "none"}
    gamma : float > 0 or "scale"
    warmup : int >= 0 — examples in the window (0: no window; needs ``scaling="none"`` and a
        numeric ``gamma``, otherwise the first batch forms the window)
    shuffle_buffer : int >= 0 — K
    n_features : int — d
    n_classes : int — 2: labels are ±1; more: labels are class indices (and ``gamma="scale"``
        is multiplied by :data:`MULTICLASS_GAMMA_FACTOR`)
    run_guard : bool — replay examples of other classes during long one-class runs
    linear : bool — the preprocessing of a linear model (``kernel="linear"``): no γ;
        ``scaling="auto"`` is :func:`linear_auto_scaling`; max-abs scaling keeps CSR rows
        sparse; and the buffer and the guard store the rows the way the first rows that reach
        them come (``rows``): CSR rows in a :class:`SparseRowStore` (K from
        :func:`sparse_buffer_capacity`), dense rows densely as for kernel models.
    multiclass_gamma : bool — multiply ``gamma="scale"`` by :data:`MULTICLASS_GAMMA_FACTOR` for
        more than two classes (the streaming engines; a plain estimator's "scale" is
        scikit-learn's)
    sparse_rows : bool — a kernel model with sparse support vectors: rows stay CSR (max-abs or
        no scaling), always held in a :class:`SparseRowStore`; γ as for kernel models
        (:func:`scale_gamma_sparse`).  ``scaling="standard"`` raises ValueError (an offset
        would fill every zero).

    Raises
    ------
    ValueError
        ``sparse_rows`` with ``scaling="standard"``.
    """

    def __init__(
        self,
        scaling,
        gamma,
        warmup,
        shuffle_buffer,
        n_features,
        n_classes=2,
        run_guard=False,
        linear=False,
        sparse_rows=False,
        multiclass_gamma=True,
    ):
        if sparse_rows and scaling == "standard":
            raise ValueError("sv_storage='sparse' needs scaling 'auto', 'maxabs' or 'none', got 'standard'")
        self.scaling = scaling
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.linear = bool(linear)
        self.sparse_rows = bool(sparse_rows)
        self.shuffle_buffer = int(shuffle_buffer)
        self.multiclass_gamma = bool(multiclass_gamma)
        self.ready = False
        self.kind = None
        self.offset = np.zeros(self.n_features)
        self.factor = np.ones(self.n_features)
        self.gamma = None if (gamma == "scale" or self.linear) else float(gamma)
        self.needs_window = scaling != "none" or (gamma == "scale" and not self.linear)
        self.warmup = int(warmup) if self.needs_window else 0
        self.window_parts: list = []  # (X rows as given: dense or CSR, encoded labels)
        self.window_n = 0
        # "dense": rows held densely; "sparse": in self.store; None (linear models): decided by
        # the first rows that reach the buffer and the guard (_decide_rows)
        self.rows = None if (self.linear or self.sparse_rows) else "dense"
        self.store: SparseRowStore | None = None
        self.row_nnz: float | None = None
        # K and R: the buffer's and each reservoir's capacity; their arrays grow with the fill
        # (:meth:`_reserve`), so a model that has received few rows holds only those
        self.capacity = 0 if self.rows is None else buffer_capacity(int(shuffle_buffer), self.n_features)
        self.buf_X = np.zeros((0, self.n_features))
        self.buf_y = np.zeros(0)
        self.state = np.zeros(N_STATE, dtype=np.int64)
        self.state[S_RUN_CLASS] = -1
        self.guard = bool(run_guard)
        self.res_capacity = (
            guard_capacity(self.n_classes, self.n_features) if self.guard and self.rows is not None else 0
        )
        self.res_X = np.zeros((self.n_classes, 0, self.n_features))
        self.res_n = np.zeros(self.n_classes, dtype=np.int64)
        self.seen = np.zeros(self.n_classes, dtype=np.int64)
        if not self.needs_window:
            self.kind, self.ready = "none", True

    def _decide_rows(self, X) -> None:
        """Linear models: hold the buffer's and the guard's rows sparse if the first rows that
        reach them (``X``: the window's, or the first batch) are CSR, else densely."""
        d = self.n_features
        if not sp.issparse(X) and not self.sparse_rows:
            self.rows = "dense"
            self.capacity = buffer_capacity(self.shuffle_buffer, d)
            self.res_capacity = guard_capacity(self.n_classes, d) if self.guard else 0
            self.buf_X, self.buf_y = np.zeros((0, d)), np.zeros(0)
            self.res_X = np.zeros((self.n_classes, 0, d))
            return
        self.rows = "sparse"
        nnz = X.nnz if sp.issparse(X) else np.count_nonzero(X)
        self.row_nnz = max(1.0, nnz / max(1, X.shape[0]))
        self.capacity = sparse_buffer_capacity(self.shuffle_buffer, self.row_nnz)
        self.res_capacity = sparse_guard_capacity(self.n_classes, self.row_nnz) if self.guard else 0
        self.buf_X, self.buf_y = np.zeros((0, d)), np.zeros(0)
        self.res_X = np.zeros((self.n_classes, 0, d))
        self.store = SparseRowStore(self.capacity, self.n_classes, self.res_capacity)

    def _reserve(self, n: int, use_buffer: bool) -> None:
        """Before passing ``n`` rows: room in the buffer for its fill plus ``n`` (it gains at most
        one row per arriving row) and in every reservoir for its fill plus ``n`` (likewise),
        within K and R (:func:`grow_rows`)."""
        buf_need = int(self.state[S_BUF_N]) + n if use_buffer else 0
        res_need = (int(self.res_n.max()) if self.res_n.size else 0) + n if self.guard else 0
        if self.rows == "sparse":
            self.buf_y = grow_rows(self.buf_y, buf_need, self.capacity)
            self.store.reserve(buf_need, res_need)
            return
        self.buf_X = grow_rows(self.buf_X, buf_need, self.capacity)
        self.buf_y = grow_rows(self.buf_y, buf_need, self.capacity)
        self.res_X = grow_rows(self.res_X, res_need, self.res_capacity, axis=1)

    # ------------------------------------------------------------------ window
    def add_to_window(self, X, labels) -> bool:
        """Hold a batch in the window; True when the window is complete (≥ warmup examples)."""
        self.window_parts.append((X, np.asarray(labels, dtype=np.float64)))
        self.window_n += X.shape[0]
        return self.window_n >= max(1, self.warmup)

    def close_window(self, rng) -> tuple[np.ndarray, np.ndarray]:
        """Freeze scaling and γ from the window; returns its rows scaled, in a shuffled order."""
        X = _stack([p for p, _ in self.window_parts])
        labels = np.concatenate([y for _, y in self.window_parts])
        scaled = self.fit_transform(X)
        self.window_parts, self.window_n = [], 0
        if self.shuffle_buffer == 0:  # no shuffling asked for: the stream's order is kept
            return scaled, labels
        order = rng.permutation(labels.shape[0])
        return scaled[order], labels[order]

    def fit_transform(self, X):
        """Freeze the scaler and γ from the rows X (the window, or all of ``fit``'s data) and
        return X scaled, as :meth:`transform` would — scaled once, for γ and the caller."""
        if not self.needs_window:  # raw features and a numeric γ: nothing to compute
            return self.transform(X)
        kind = self.scaling
        text_like = self.linear or wide_sparse(X)  # the input decides, not the SV storage
        if text_like and kind == "auto":
            # text-like input (linear models, sparse SVs): max-abs stretches rare features;
            # one pass over shuffled reuters, RBF B = 500, 3 orders: none 97.48/96.64/97.64% against
            # max-abs 96.67/96.09/96.67; sector 78.7% (γ = 1) against 12.4% (docs/defaults.md)
            kind = linear_auto_scaling(X)
        self.kind, self.offset, self.factor = fit_scaler(X, kind)
        scaled = self.transform(X)
        if self.gamma is None and not self.linear:
            if sp.issparse(X) and not self.offset.any():
                # CSR rows: γ from their nonzeros whichever way the SVs are stored, so that
                # dense and sparse storage start from the same γ (and no window is densified)
                self.gamma = scale_gamma_sparse(
                    scaled if sp.issparse(scaled) else scale_sparse(X, self.factor)
                )
            else:
                self.gamma = scale_gamma(scaled.toarray() if sp.issparse(scaled) else scaled)
            if self.n_classes > 2 and not text_like and self.multiclass_gamma:
                # measured on dense multi-class sets (letter, pendigits, digits); on sparse text it
                # hurts: sector one pass, B = 500: γ = 1 (the plain "scale") 78.7%, 6 × it 36.7%
                self.gamma *= MULTICLASS_GAMMA_FACTOR
        self.ready = True
        return scaled

    def transform(self, X):
        """X scaled with the frozen statistics: dense float64 (n, d), or X itself when kind is "none"
        (linear models: CSR rows stay CSR unless the scaling has an offset)."""
        if self.kind == "none":
            return X if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
        if (self.linear or self.sparse_rows) and sp.issparse(X) and not self.offset.any():
            return scale_sparse(X, self.factor)
        return scale_dense(X, self.offset, self.factor)

    # ------------------------------------------------------------------ the stream
    def feed(self, X, labels, rng):
        """Rows to learn after receiving the batch ``(X, labels)`` (raw features, encoded labels).

        Returns ``(X_learn, labels_learn, original)`` — ``original`` (bool) is False for the
        run guard's replayed rows — or None while the warm-up window stays open.  A batch that
        completes the window is split: its first rows close the window, the rest follow it.
        """
        if not self.ready:
            need = X.shape[0] if self.warmup == 0 else self.warmup - self.window_n
            if not self.add_to_window(X[:need], labels[:need]):
                return None
            Xw, yw = self.close_window(rng)
            if need < X.shape[0]:
                Xw = _stack([Xw, self.transform(X[need:])])
                yw = np.concatenate([yw, labels[need:]])
            X, labels = Xw, yw
        else:
            X = self.transform(X)
        return self._pass(X, labels, rng, through_buffer=True)

    def drain(self, rng):
        """Everything still pending, as ``feed`` returns it: an open window is closed with what
        it holds, then the buffer is emptied in a random order (the end of a stream)."""
        parts = []
        if not self.ready and self.window_n:
            parts.append(self.close_window(rng))
        if self.ready and self.state[S_BUF_N]:
            n = int(self.state[S_BUF_N])
            order = rng.permutation(n)
            if self.rows == "sparse":
                store = self.store
                rows = store.rows(store.buf_start[order], store.buf_len[order], self.n_features)
                parts.append((rows, self.buf_y[order]))
            else:
                parts.append((self.buf_X[order], self.buf_y[order]))
            self.state[S_BUF_N] = 0
        if not parts:
            return np.zeros((0, self.n_features)), np.zeros(0), np.zeros(0, dtype=bool)
        X = _stack([p[0] for p in parts])
        return self._pass(X, np.concatenate([p[1] for p in parts]), rng, through_buffer=False)

    def _pass(self, X, labels, rng, through_buffer):
        if self.rows is None:
            self._decide_rows(X)
        bypass = int(self.state[S_BYPASS])  # > 0 only in states saved when a drift dropped the buffer
        if through_buffer and bypass > 0 and self.capacity > 0:
            k = min(bypass, X.shape[0])
            self.state[S_BYPASS] = bypass - k
            head = self._pass_rows(X[:k], labels[:k], rng, False)
            if k == X.shape[0]:
                return head
            tail = self._pass_rows(X[k:], labels[k:], rng, True)
            return (
                _stack([head[0], tail[0]]),
                np.concatenate([head[1], tail[1]]),
                np.concatenate([head[2], tail[2]]),
            )
        return self._pass_rows(X, labels, rng, through_buffer)

    def _pass_rows(self, X, labels, rng, through_buffer):
        if self.rows == "sparse":
            return self._pass_sparse_rows(X, labels, rng, through_buffer)
        n = X.shape[0]
        use_buffer = through_buffer and self.capacity > 0
        if not (use_buffer or self.guard) or n == 0:
            return X, labels, np.ones(n, dtype=bool)
        self._reserve(n, use_buffer)
        X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        u = rng.random((n, DRAWS_PER_ROW))
        # a row replays only from the GUARD_MIN_RUN-th row of a run on: room for that many extra
        extra = min(n, max(0, n - (GUARD_MIN_RUN - 1 - int(self.state[S_RUN_LEN])))) if self.guard else 0
        out_X = np.empty((n + extra, self.n_features))
        out_y = np.empty(out_X.shape[0])
        out_orig = np.empty(out_X.shape[0], dtype=np.bool_)
        k = buffer_and_guard(
            X,
            np.ascontiguousarray(labels, dtype=np.float64),
            u,
            self.buf_X if use_buffer else self.buf_X[:0],
            self.buf_y if use_buffer else self.buf_y[:0],
            self.capacity if use_buffer else 0,
            self.state,
            self.guard,
            self.n_classes == 2,
            self.res_X,
            self.res_capacity,
            self.res_n,
            self.seen,
            GUARD_MIN_RUN,
            math.log(GUARD_ALPHA),
            out_X,
            out_y,
            out_orig,
        )
        return out_X[:k], out_y[:k], out_orig[:k]

    def _pass_sparse_rows(self, X, labels, rng, through_buffer):
        """:meth:`_pass_rows` of a linear model holding sparse rows (:class:`SparseRowStore`):
        the same draws and decisions; the rows to learn come back as CSR."""
        n = X.shape[0]
        use_buffer = through_buffer and self.capacity > 0
        if not (use_buffer or self.guard) or n == 0:
            return X, labels, np.ones(n, dtype=bool)
        self._reserve(n, use_buffer)
        data, indices, indptr = csr_arrays(X if sp.issparse(X) else sp.csr_matrix(X))
        u = rng.random((n, DRAWS_PER_ROW))
        extra = min(n, max(0, n - (GUARD_MIN_RUN - 1 - int(self.state[S_RUN_LEN])))) if self.guard else 0
        store = self.store
        in_s, in_l = store.append(data, indices, indptr, int(self.state[S_BUF_N]), self.res_n)
        out_s = np.empty(n + extra, dtype=np.int64)
        out_l = np.empty(n + extra, dtype=np.int64)
        out_y = np.empty(n + extra)
        out_orig = np.empty(n + extra, dtype=np.bool_)
        k = buffer_and_guard_refs(
            in_s,
            in_l,
            np.ascontiguousarray(labels, dtype=np.float64),
            u,
            store.buf_start if use_buffer else store.buf_start[:0],
            store.buf_len if use_buffer else store.buf_len[:0],
            self.buf_y if use_buffer else self.buf_y[:0],
            self.capacity if use_buffer else 0,
            self.state,
            self.guard,
            self.n_classes == 2,
            store.res_start,
            store.res_len,
            self.res_capacity,
            self.res_n,
            self.seen,
            GUARD_MIN_RUN,
            math.log(GUARD_ALPHA),
            out_s,
            out_l,
            out_y,
            out_orig,
        )
        return store.rows(out_s[:k], out_l[:k], self.n_features), out_y[:k], out_orig[:k]

    def grow(self, n_features: int, shuffle_buffer: int, rng) -> tuple[np.ndarray, np.ndarray] | None:
        """Widen to ``n_features`` (sparse input whose largest index grew): the new features
        are zeros in every held row and get offset 0, factor 1.

        The buffer's byte bound (:data:`BUFFER_MAX_BYTES`) may now allow fewer rows (K of
        ``shuffle_buffer``); the rows beyond it are taken out at random and returned as
        as :meth:`feed` returns rows to learn (None when none; ``rng``: the model's).  Reservoirs of the run
        guard that no longer fit their bound keep their first rows.
        """
        d_old, d_new = self.n_features, int(n_features)
        if d_new <= d_old:
            return None
        pad = d_new - d_old
        self.offset = np.concatenate([self.offset, np.zeros(pad)])
        self.factor = np.concatenate([self.factor, np.ones(pad)])
        self.window_parts = [(_widen(X, d_new), y) for X, y in self.window_parts]
        if self.rows == "sparse":  # sparse rows do not change; their bounds do not depend on d
            self.n_features = d_new
            self.buf_X, self.res_X = np.zeros((0, d_new)), np.zeros((self.n_classes, 0, d_new))
            return None
        m = int(self.state[S_BUF_N])
        cap = min(self.capacity, buffer_capacity(int(shuffle_buffer), d_new)) if self.capacity else 0
        released = None
        if m > cap:
            keep = np.zeros(m, dtype=bool)
            keep[:cap] = True
            rng.shuffle(keep)
            released = (_widen(self.buf_X[:m][~keep], d_new), self.buf_y[:m][~keep].copy())
            kept_X, kept_y = self.buf_X[:m][keep], self.buf_y[:m][keep]
            m = cap
        else:
            kept_X, kept_y = self.buf_X[:m], self.buf_y[:m]
        buf_X, buf_y = np.zeros((m, d_new)), np.zeros(m)  # grown again as rows arrive (_reserve)
        buf_X[:m, :d_old] = kept_X
        buf_y[:m] = kept_y
        self.buf_X, self.buf_y, self.capacity = buf_X, buf_y, cap
        self.state[S_BUF_N] = m
        res = min(self.res_capacity, guard_capacity(self.n_classes, d_new)) if self.guard else 0
        held = min(res, self.res_X.shape[1])
        res_X = np.zeros((self.n_classes, held, d_new))
        res_X[:, :, :d_old] = self.res_X[:, :held]
        self.res_X, self.res_capacity = res_X, res
        np.minimum(self.res_n, res, out=self.res_n)
        self.n_features = d_new
        return None if released is None else self._pass(*released, rng, through_buffer=False)

    def add_class(self) -> None:
        """One more class (a label learned from the data; it takes the next index).

        Going from two classes to three re-encodes every held label from ±1 to the class
        index 0/1 (the multi-class encoding); the run guard gets an empty reservoir for the
        new class, and the reservoirs of the others keep their first rows if the byte bound
        (:data:`GUARD_MAX_BYTES`) now allows fewer per class."""
        if self.n_classes == 2:
            self.window_parts = [(X, (y > 0).astype(np.float64)) for X, y in self.window_parts]
            self.buf_y[:] = self.buf_y > 0
        self.n_classes += 1
        if self.rows == "sparse":
            res = self.res_capacity
            if self.guard:
                res = min(res, sparse_guard_capacity(self.n_classes, self.row_nnz))
            self.store.resize_reservoirs(self.n_classes, res)
            self.res_capacity = res
            self.res_X = np.zeros((self.n_classes, 0, self.n_features))
            self.res_n = np.append(np.minimum(self.res_n, res), 0)
            self.seen = np.append(self.seen, 0)
            return
        res = min(self.res_capacity, guard_capacity(self.n_classes, self.n_features)) if self.guard else 0
        held = min(res, self.res_X.shape[1])
        res_X = np.zeros((self.n_classes, held, self.n_features))
        res_X[:-1] = self.res_X[:, :held]
        self.res_X, self.res_capacity = res_X, res
        self.res_n = np.append(np.minimum(self.res_n, res), 0)
        self.seen = np.append(self.seen, 0)

    @property
    def pending(self) -> int:
        """Examples received but not yet learned (window + buffer)."""
        return self.window_n + int(self.state[S_BUF_N])

    @property
    def n_discarded(self) -> int:
        """Buffered examples dropped at drift detections by models saved before detections
        stopped dropping them (restored states keep their count)."""
        return int(self.state[S_DISCARDED])

    @property
    def n_replayed(self) -> int:
        """Examples the run guard replayed (learned steps that are not received examples)."""
        return int(self.state[S_REPLAYED])

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        buf_n = int(self.state[S_BUF_N])
        res_rows = int(self.res_n.max()) if self.res_n.size else 0
        sparse = self.rows == "sparse"  # then buf_X and res_X are empty: the rows are in self.store
        arrays = {
            "pp_offset": self.offset,
            "pp_factor": self.factor,
            "pp_buf_X": self.buf_X[: 0 if sparse else buf_n].copy(),
            "pp_buf_y": self.buf_y[:buf_n].copy(),
            "pp_state": self.state.copy(),
            "pp_res_X": self.res_X[:, : 0 if sparse else res_rows].copy(),
            "pp_res_n": self.res_n.copy(),
            "pp_seen": self.seen.copy(),
        }
        if sparse:
            arrays.update(self.store.get_state(buf_n, self.res_n, self.n_features))
        if self.sparse_rows and not self.offset.any():
            # max-abs factors of the features seen (the rest are 1): a state proportional to
            # the nonzeros, not to d (wide sparse rows)
            changed = np.flatnonzero(self.factor != 1.0)
            arrays.update(pp_factor_idx=changed, pp_factor_val=self.factor[changed])
            arrays["pp_offset"], arrays["pp_factor"] = np.zeros(0), np.zeros(0)
        if self.window_parts:
            W = _stack([p for p, _ in self.window_parts])
            if sp.issparse(W):
                arrays.update(
                    pp_win_data=W.data,
                    pp_win_indices=W.indices.astype(np.int64),
                    pp_win_indptr=W.indptr.astype(np.int64),
                )
            else:
                arrays["pp_win_dense"] = W
            arrays["pp_win_y"] = np.concatenate([y for _, y in self.window_parts])
        meta = {
            "ready": self.ready,
            "kind": self.kind,
            "gamma": self.gamma,
            "warmup": self.warmup,
            "needs_window": self.needs_window,
            "buffer_capacity": int(self.capacity),
            "run_guard": self.guard,
            "guard_capacity": int(self.res_capacity),
        }
        if not self.multiclass_gamma:
            meta["multiclass_gamma"] = False
        if self.linear or self.sparse_rows:
            meta.update(
                linear=self.linear,
                sparse_rows=self.sparse_rows,
                rows=self.rows,
                shuffle_buffer=self.shuffle_buffer,
                row_nnz=self.row_nnz,
            )
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, scaling, n_features, n_classes=2):
        """Rebuild from :meth:`get_state`; a state saved before the run guard existed (state
        version 3) continues with an empty guard, off."""
        pp = cls.__new__(cls)
        pp.scaling, pp.n_features, pp.n_classes = scaling, int(n_features), int(n_classes)
        pp.ready, pp.kind, pp.gamma = bool(meta["ready"]), meta["kind"], meta["gamma"]
        pp.warmup, pp.needs_window = int(meta["warmup"]), bool(meta["needs_window"])
        if "pp_factor_idx" in arrays:  # saved compact (sparse rows, no offset)
            pp.offset, pp.factor = np.zeros(pp.n_features), np.ones(pp.n_features)
            pp.factor[arrays["pp_factor_idx"]] = arrays["pp_factor_val"]
        else:
            pp.offset = np.array(arrays["pp_offset"], dtype=np.float64)
            pp.factor = np.array(arrays["pp_factor"], dtype=np.float64)
        cap = int(meta["buffer_capacity"])
        pp.linear = bool(meta.get("linear", False))
        pp.sparse_rows = bool(meta.get("sparse_rows", False))
        pp.rows = meta.get("rows") if (pp.linear or pp.sparse_rows) else "dense"
        pp.shuffle_buffer = int(meta.get("shuffle_buffer", cap))
        pp.multiclass_gamma = bool(meta.get("multiclass_gamma", True))
        pp.row_nnz = meta.get("row_nnz")
        pp.store = None
        sparse = pp.rows == "sparse"
        # the arrays hold the saved rows only; they grow as rows arrive (_reserve)
        pp.capacity = cap
        buf_n = arrays["pp_buf_y"].shape[0]
        pp.buf_X = np.zeros((0 if sparse else buf_n, pp.n_features))
        pp.buf_y = np.array(arrays["pp_buf_y"], dtype=np.float64)
        if not sparse:
            pp.buf_X[:buf_n] = arrays["pp_buf_X"]
        pp.guard = bool(meta.get("run_guard", False))
        res_cap = int(meta.get("guard_capacity", 0))
        pp.res_capacity = res_cap
        res_rows = arrays["pp_res_X"].shape[1] if "pp_state" in arrays else 0
        pp.res_X = np.zeros((pp.n_classes, 0 if sparse else res_rows, pp.n_features))
        pp.res_n = np.zeros(pp.n_classes, dtype=np.int64)
        pp.seen = np.zeros(pp.n_classes, dtype=np.int64)
        pp.state = np.zeros(N_STATE, dtype=np.int64)
        pp.state[S_RUN_CLASS] = -1
        if "pp_state" in arrays:
            pp.state[: arrays["pp_state"].shape[0]] = arrays["pp_state"]  # older states: no drift fields
            pp.res_X[:, :res_rows] = arrays["pp_res_X"]
            pp.res_n[:] = arrays["pp_res_n"]
            pp.seen[:] = arrays["pp_seen"]
        pp.state[S_BUF_N] = buf_n
        pp.window_parts, pp.window_n = [], 0
        if "pp_win_y" in arrays:
            if "pp_win_dense" in arrays:
                W = np.array(arrays["pp_win_dense"], dtype=np.float64)
            else:
                y_n = arrays["pp_win_y"].shape[0]
                W = sp.csr_matrix(
                    (arrays["pp_win_data"], arrays["pp_win_indices"], arrays["pp_win_indptr"]),
                    shape=(y_n, pp.n_features),
                )
            pp.window_parts = [(W, np.array(arrays["pp_win_y"], dtype=np.float64))]
            pp.window_n = W.shape[0]
        if sparse:
            pp.store = SparseRowStore.from_state(arrays, cap, pp.n_classes, res_cap, pp.res_n)
        return pp
