"""The order stage: the shuffle buffer and the run guard.

Users send examples in the order they have them (LIBSVM files are often sorted by label).
This stage releases the rows the estimator learns, in an order close to a random one
(``docs/online.md``, measurements in ``docs/defaults.md``):

* **Shuffle buffer** of K rows (``shuffle_buffer``, default 20,000).  While it holds m < K
  rows, an arriving row is stored and, with probability m/K, a uniformly drawn buffered row is
  released and replaced by it; once full every arriving row replaces a uniformly drawn one,
  which is released.  Every row leaves with probability 1/K per arrival: its delay is
  geometric with mean K, while learning starts right after the warm-up window.  The window's
  rows enter in a random order.  :meth:`OrderStage.drain` (``flush``) releases what is left.
  A buffer never holds more than :data:`~svmstream.solvers.budgeted._preprocessing.BUFFER_MAX_BYTES`
  of dense rows (K = 1,008 for d = 8,315); sparse rows are bounded by their nonzeros.
* **Run guard** for label-sorted streams: per-class reservoirs of released rows; during an
  improbably long run of one class (≥ 1,000 rows and q_c^run ≤ 1e-6 for the class share q_c),
  each released row is followed by one row of another class replayed from its reservoir.
  Replayed rows are learning steps, not received examples (``original`` False).

The per-row work is done by the numba batch kernels of
:mod:`svmstream.solvers.budgeted._preprocessing` (``buffer_and_guard``, on dense rows, and
``buffer_and_guard_refs``, on references into a
:class:`~svmstream.solvers.budgeted._sparse_rows.SparseRowStore` for CSR rows of linear
models and sparse-SV kernel models).  Draws come from this stage's own generator (seeded by
the estimator's ``random_state``, saved with the stage): five uniforms per row entering the
buffer, so the draws do not depend on how the stream is cut into batches.

Saved state: the meta under ``stages.order`` (with the generator's state); arrays ``pp_buf_*``,
``pp_state``, ``pp_res_*``, ``pp_seen``, ``pp_sbuf_*``/``pp_sres_*`` — the names the engines
used when they ran this stage, so states saved then load unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...budgeted._preprocessing import (
    DRAWS_PER_ROW,
    GUARD_ALPHA,
    GUARD_MIN_RUN,
    N_STATE,
    S_BUF_N,
    S_BYPASS,
    S_DISCARDED,
    S_REPLAYED,
    S_RUN_CLASS,
    S_RUN_LEN,
    buffer_and_guard,
    buffer_capacity,
    buffer_releases,
    csr_arrays,
    guard_capacity,
    stack_rows,
    widen_rows,
)
from ...budgeted._sparse_rows import (
    SparseRowStore,
    buffer_and_guard_refs,
    grow_rows,
    sparse_buffer_capacity,
    sparse_guard_capacity,
)


def improbable_run(run_len: int, share: float) -> bool:
    """The run guard's criterion: a run of ``run_len`` rows of one class whose share of the
    stream so far is ``share`` (0 < share <= 1) is improbable when it is at least
    ``GUARD_MIN_RUN`` (1,000) rows long and share^run_len <= ``GUARD_ALPHA`` (1e-6).  A run of
    the only class seen so far (share 1) is improbable once it is ``GUARD_MIN_RUN`` long: a
    classifier's stream that shows one class for that long is sorted or cannot tell."""
    if run_len < GUARD_MIN_RUN or share <= 0.0:
        return False
    return share >= 1.0 or run_len * math.log(share) <= math.log(GUARD_ALPHA)


class OrderStage:
    """The shuffle buffer and run guard of a streaming pipeline.

    Parameters
    ----------
    shuffle_buffer : int >= 0 — K asked for (0: the stream's order is kept)
    run_guard : bool
    n_features : int — d; n_classes : int — 2: labels ±1, more: class indices
    sparse_rows : bool — hold CSR rows sparse whatever the first rows are (sparse SVs)
    decide_rows : bool — hold rows sparse if the first rows are CSR (linear models)
    random_state : int, None or Generator — seed of the draws

    Attributes
    ----------
    rows : "dense", "sparse" or None (not decided yet) — how rows are held
    capacity : int — K; res_capacity : int — R, rows per class of the guard
    state : (N_STATE,) int64 — buffer fill, run class and length, rows seen, replayed, …
    rng : numpy Generator
    """

    def __init__(
        self, shuffle_buffer, run_guard, n_features, n_classes=2, *, sparse_rows=False, decide_rows=False,
        random_state=None,
    ):  # fmt: skip
        self.shuffle_buffer = int(shuffle_buffer)
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.sparse_rows = bool(sparse_rows)
        self.decide_rows = bool(decide_rows)
        self.rng = np.random.default_rng(random_state)
        # "dense": rows held densely; "sparse": in self.store; None: decided by the first rows
        # that reach the buffer and the guard (_decide_rows)
        self.rows = None if (self.decide_rows or self.sparse_rows) else "dense"
        self.store: SparseRowStore | None = None
        self.row_nnz: float | None = None
        self.guard = bool(run_guard)
        self.capacity = 0 if self.rows is None else buffer_capacity(self.shuffle_buffer, self.n_features)
        self.res_capacity = (
            guard_capacity(self.n_classes, self.n_features) if self.guard and self.rows is not None else 0
        )
        self.buf_X = np.zeros((0, self.n_features))
        self.buf_y = np.zeros(0)
        self.buf_w = np.zeros(0)  # the buffered rows' importance weights
        self.state = np.zeros(N_STATE, dtype=np.int64)
        self.state[S_RUN_CLASS] = -1
        self.res_X = np.zeros((self.n_classes, 0, self.n_features))
        self.res_n = np.zeros(self.n_classes, dtype=np.int64)
        self.seen = np.zeros(self.n_classes, dtype=np.int64)

    # ------------------------------------------------------------------ counts
    @property
    def pending(self) -> int:
        """Rows held in the buffer."""
        return int(self.state[S_BUF_N])

    @property
    def n_discarded(self) -> int:
        """Buffered rows dropped at drift detections by models saved before detections stopped
        dropping them (restored states keep their count)."""
        return int(self.state[S_DISCARDED])

    @property
    def n_replayed(self) -> int:
        """Rows the run guard replayed (learning steps that are not received examples)."""
        return int(self.state[S_REPLAYED])

    # ------------------------------------------------------------------ the stream
    def _shuffled(self, window):
        """The warm-up window's rows in a random order (kept when no shuffling is asked for)."""
        X, labels, weights = window
        if self.shuffle_buffer == 0:
            return X, labels, weights
        order = self.rng.permutation(labels.shape[0])
        return X[order], labels[order], weights[order]

    def window_order(self, n):
        """The order the window's ``n`` rows enter in (None: as they came), drawn as
        :meth:`feed` would draw it: for a scaler that scales the rows straight into it
        (:meth:`~.scaler.ScalerStage.close`), then ``feed(..., shuffled=True)``."""
        return None if self.shuffle_buffer == 0 else self.rng.permutation(n)

    def feed(self, window, rest, shuffled=False):
        """Rows to learn after receiving scaled rows: ``window`` (the warm-up window's, or
        None) then ``rest`` (or None), each ``(X, labels, weights)``; ``shuffled``: the window
        is in :meth:`window_order` already.  Returns ``(X, labels, original, weights)``
        (``original`` False for replayed rows, whose weight is 1: a replay is an extra step,
        not a received example; docs/weights.md)."""
        if window is not None and not shuffled:
            window = self._shuffled(window)
        parts = ([window] if window is not None else []) + ([rest] if rest is not None else [])
        X = stack_rows([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
        labels = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
        weights = np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]
        return self._pass(X, labels, weights, through_buffer=True)

    def drain(self, window=None):
        """Everything still pending, as :meth:`feed` returns it: the closed window's rows (if
        any) and the buffer's, in a random order (the end of a stream)."""
        parts = [self._shuffled(window)] if window is not None else []
        if self.state[S_BUF_N]:
            n = int(self.state[S_BUF_N])
            order = self.rng.permutation(n)
            if self.rows == "sparse":
                store = self.store
                rows = store.rows(store.buf_start[order], store.buf_len[order], self.n_features)
                parts.append((rows, self.buf_y[order], self.buf_w[order]))
            else:
                parts.append((self.buf_X[order], self.buf_y[order], self.buf_w[order]))
            self.state[S_BUF_N] = 0
        if not parts:
            return np.zeros((0, self.n_features)), np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0)
        X = stack_rows([p[0] for p in parts])
        labels, weights = (np.concatenate([p[i] for p in parts]) for i in (1, 2))
        return self._pass(X, labels, weights, through_buffer=False)

    def _decide_rows(self, X) -> None:
        """Hold the rows sparse if the first rows that reach the buffer are CSR (or always, for
        sparse SVs), else densely."""
        d = self.n_features
        if not sp.issparse(X) and not self.sparse_rows:
            self.rows = "dense"
            self.capacity = buffer_capacity(self.shuffle_buffer, d)
            self.res_capacity = guard_capacity(self.n_classes, d) if self.guard else 0
            self.buf_X, self.buf_y, self.buf_w = np.zeros((0, d)), np.zeros(0), np.zeros(0)
            self.res_X = np.zeros((self.n_classes, 0, d))
            return
        self.rows = "sparse"
        nnz = X.nnz if sp.issparse(X) else np.count_nonzero(X)
        self.row_nnz = max(1.0, nnz / max(1, X.shape[0]))
        self.capacity = sparse_buffer_capacity(self.shuffle_buffer, self.row_nnz)
        self.res_capacity = sparse_guard_capacity(self.n_classes, self.row_nnz) if self.guard else 0
        self.buf_X, self.buf_y, self.buf_w = np.zeros((0, d)), np.zeros(0), np.zeros(0)
        self.res_X = np.zeros((self.n_classes, 0, d))
        self.store = SparseRowStore(self.capacity, self.n_classes, self.res_capacity)

    def _reserve(self, n: int, use_buffer: bool) -> None:
        """Room for the buffer's fill plus ``n`` and every reservoir's fill plus ``n``, within K
        and R (:func:`~svmstream.solvers.budgeted._preprocessing.grow_rows`)."""
        buf_need = int(self.state[S_BUF_N]) + n if use_buffer else 0
        res_need = (int(self.res_n.max()) if self.res_n.size else 0) + n if self.guard else 0
        self.buf_w = grow_rows(self.buf_w, buf_need, self.capacity)
        if self.rows == "sparse":
            self.buf_y = grow_rows(self.buf_y, buf_need, self.capacity)
            self.store.reserve(buf_need, res_need)
            return
        self.buf_X = grow_rows(self.buf_X, buf_need, self.capacity)
        self.buf_y = grow_rows(self.buf_y, buf_need, self.capacity)
        self.res_X = grow_rows(self.res_X, res_need, self.res_capacity, axis=1)

    def _pass(self, X, labels, weights, through_buffer):
        if self.rows is None:
            self._decide_rows(X)
        bypass = int(self.state[S_BYPASS])  # > 0 only in states saved when a drift dropped the buffer
        if through_buffer and bypass > 0 and self.capacity > 0:
            k = min(bypass, X.shape[0])
            self.state[S_BYPASS] = bypass - k
            head = self._pass_rows(X[:k], labels[:k], weights[:k], False)
            if k == X.shape[0]:
                return head
            tail = self._pass_rows(X[k:], labels[k:], weights[k:], True)
            return (stack_rows([head[0], tail[0]]), *(np.concatenate([head[i], tail[i]]) for i in (1, 2, 3)))
        return self._pass_rows(X, labels, weights, through_buffer)

    def _extra(self, n):
        """Room for replayed rows: a row replays only from the GUARD_MIN_RUN-th row of a run on."""
        return min(n, max(0, n - (GUARD_MIN_RUN - 1 - int(self.state[S_RUN_LEN])))) if self.guard else 0

    def _pass_rows(self, X, labels, weights, through_buffer):
        if self.rows == "sparse":
            return self._pass_sparse_rows(X, labels, weights, through_buffer)
        n = X.shape[0]
        use_buffer = through_buffer and self.capacity > 0
        if not (use_buffer or self.guard) or n == 0:
            return X, labels, np.ones(n, dtype=bool), weights
        self._reserve(n, use_buffer)
        X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        u = self.rng.random((n, DRAWS_PER_ROW))
        # rows out: those the buffer releases (known from the draws), each followed by at most
        # one replay (the window's rows mostly stay in the buffer: an (n, d) array saved)
        out = (
            buffer_releases(np.ascontiguousarray(u[:, 0]), int(self.state[S_BUF_N]), self.capacity)
            if use_buffer
            else n
        )
        out_X = np.empty((out + min(out, self._extra(n)), self.n_features))
        out_y, out_w = np.empty(out_X.shape[0]), np.ones(out_X.shape[0])  # replays: weight 1
        out_orig = np.empty(out_X.shape[0], dtype=np.bool_)
        k = buffer_and_guard(
            X, np.ascontiguousarray(labels, dtype=np.float64), np.ascontiguousarray(weights, dtype=np.float64), u,
            self.buf_X if use_buffer else self.buf_X[:0], self.buf_y if use_buffer else self.buf_y[:0],
            self.buf_w if use_buffer else self.buf_w[:0],
            self.capacity if use_buffer else 0, self.state, self.guard, self.n_classes == 2,
            self.res_X, self.res_capacity, self.res_n, self.seen, GUARD_MIN_RUN, math.log(GUARD_ALPHA),
            out_X, out_y, out_w, out_orig,
        )  # fmt: skip
        return out_X[:k], out_y[:k], out_orig[:k], out_w[:k]

    def _pass_sparse_rows(self, X, labels, weights, through_buffer):
        """:meth:`_pass_rows` for rows held in the :class:`SparseRowStore`: the same draws and
        decisions; the rows to learn come back as CSR."""
        n = X.shape[0]
        use_buffer = through_buffer and self.capacity > 0
        if not (use_buffer or self.guard) or n == 0:
            return X, labels, np.ones(n, dtype=bool), weights
        self._reserve(n, use_buffer)
        data, indices, indptr = csr_arrays(X if sp.issparse(X) else sp.csr_matrix(X))
        u = self.rng.random((n, DRAWS_PER_ROW))
        m = n + self._extra(n)
        store = self.store
        in_s, in_l = store.append(data, indices, indptr, int(self.state[S_BUF_N]), self.res_n)
        out_s, out_l = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
        out_y, out_w, out_orig = np.empty(m), np.ones(m), np.empty(m, dtype=np.bool_)  # replays: weight 1
        k = buffer_and_guard_refs(
            in_s, in_l, np.ascontiguousarray(labels, dtype=np.float64),
            np.ascontiguousarray(weights, dtype=np.float64), u,
            store.buf_start if use_buffer else store.buf_start[:0],
            store.buf_len if use_buffer else store.buf_len[:0],
            self.buf_y if use_buffer else self.buf_y[:0], self.buf_w if use_buffer else self.buf_w[:0],
            self.capacity if use_buffer else 0,
            self.state, self.guard, self.n_classes == 2, store.res_start, store.res_len,
            self.res_capacity, self.res_n, self.seen, GUARD_MIN_RUN, math.log(GUARD_ALPHA),
            out_s, out_l, out_y, out_w, out_orig,
        )  # fmt: skip
        return store.rows(out_s[:k], out_l[:k], self.n_features), out_y[:k], out_orig[:k], out_w[:k]

    # ------------------------------------------------------------------ shape changes
    def grow(self, n_features: int):
        """Widen to ``n_features`` (held rows get zeros).  The buffer's byte bound may now allow
        fewer dense rows: those beyond it are taken out at random and returned as :meth:`drain`
        returns rows (None when none).  Reservoirs that no longer fit keep their first rows."""
        d_old, d_new = self.n_features, int(n_features)
        if d_new <= d_old:
            return None
        if self.rows == "sparse":  # sparse rows do not change; their bounds do not depend on d
            self.n_features = d_new
            self.buf_X, self.res_X = np.zeros((0, d_new)), np.zeros((self.n_classes, 0, d_new))
            return None
        m = int(self.state[S_BUF_N])
        cap = min(self.capacity, buffer_capacity(self.shuffle_buffer, d_new)) if self.capacity else 0
        released = None
        if m > cap:
            keep = np.zeros(m, dtype=bool)
            keep[:cap] = True
            self.rng.shuffle(keep)
            released = (
                widen_rows(self.buf_X[:m][~keep], d_new), self.buf_y[:m][~keep].copy(), self.buf_w[:m][~keep].copy()
            )  # fmt: skip
            kept_X, kept_y, kept_w = self.buf_X[:m][keep], self.buf_y[:m][keep], self.buf_w[:m][keep]
            m = cap
        else:
            kept_X, kept_y, kept_w = self.buf_X[:m], self.buf_y[:m], self.buf_w[:m]
        buf_X, buf_y = np.zeros((m, d_new)), np.zeros(m)  # grown again as rows arrive (_reserve)
        buf_X[:m, :d_old] = kept_X
        buf_y[:m] = kept_y
        self.buf_X, self.buf_y, self.buf_w, self.capacity = buf_X, buf_y, kept_w.copy(), cap
        self.state[S_BUF_N] = m
        res = min(self.res_capacity, guard_capacity(self.n_classes, d_new)) if self.guard else 0
        held = min(res, self.res_X.shape[1])
        res_X = np.zeros((self.n_classes, held, d_new))
        res_X[:, :, :d_old] = self.res_X[:, :held]
        self.res_X, self.res_capacity = res_X, res
        np.minimum(self.res_n, res, out=self.res_n)
        self.n_features = d_new
        return None if released is None else self._pass(*released, through_buffer=False)

    def add_class(self) -> None:
        """One more class (the next index): from two to three the held labels go from ±1 to
        class indices; the guard gets an empty reservoir for it, and the others keep their
        first rows if the byte bound now allows fewer per class."""
        if self.n_classes == 2:
            self.buf_y[:] = self.buf_y > 0
        self.n_classes += 1
        if self.rows == "sparse":
            res = self.res_capacity
            if self.guard:
                res = min(res, sparse_guard_capacity(self.n_classes, self.row_nnz))
            self.store.resize_reservoirs(self.n_classes, res)
            self.res_capacity = res
            self.res_X = np.zeros((self.n_classes, 0, self.n_features))
        else:
            res = min(self.res_capacity, guard_capacity(self.n_classes, self.n_features)) if self.guard else 0
            held = min(res, self.res_X.shape[1])
            res_X = np.zeros((self.n_classes, held, self.n_features))
            res_X[:-1] = self.res_X[:, :held]
            self.res_X, self.res_capacity = res_X, res
        self.res_n = np.append(np.minimum(self.res_n, res), 0)
        self.seen = np.append(self.seen, 0)

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: the buffer's and reservoirs' rows, the counters, the generator."""
        buf_n = int(self.state[S_BUF_N])
        res_rows = int(self.res_n.max()) if self.res_n.size else 0
        sparse = self.rows == "sparse"  # then buf_X and res_X are empty: the rows are in self.store
        arrays = {
            "pp_buf_X": self.buf_X[: 0 if sparse else buf_n].copy(),
            "pp_buf_y": self.buf_y[:buf_n].copy(),
            "pp_buf_w": self.buf_w[:buf_n].copy(),
            "pp_state": self.state.copy(),
            "pp_res_X": self.res_X[:, : 0 if sparse else res_rows].copy(),
            "pp_res_n": self.res_n.copy(),
            "pp_seen": self.seen.copy(),
        }
        if sparse:
            arrays.update(self.store.get_state(buf_n, self.res_n, self.n_features))
        meta = {
            "shuffle_buffer": self.shuffle_buffer,
            "buffer_capacity": int(self.capacity),
            "run_guard": self.guard,
            "guard_capacity": int(self.res_capacity),
            "rows": self.rows,
            "sparse_rows": self.sparse_rows,
            "decide_rows": self.decide_rows,
            "row_nnz": self.row_nnz,
            "rng_state": self.rng.bit_generator.state,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, n_features: int, n_classes: int) -> OrderStage:
        """Rebuild from :meth:`get_state` (a state saved before the run guard existed: the guard
        stays off, empty)."""
        st = cls.__new__(cls)
        st.n_features, st.n_classes = int(n_features), int(n_classes)
        st.shuffle_buffer = int(meta["shuffle_buffer"])
        st.sparse_rows, st.decide_rows = bool(meta["sparse_rows"]), bool(meta["decide_rows"])
        st.rows, st.row_nnz = meta["rows"], meta.get("row_nnz")
        st.rng = np.random.default_rng()
        st.rng.bit_generator.state = meta["rng_state"]
        st.store = None
        sparse = st.rows == "sparse"
        st.capacity = int(meta["buffer_capacity"])  # the arrays hold the saved rows; they grow as rows arrive
        st.buf_y = np.array(
            arrays.get("pp_buf_y", np.zeros(0)), dtype=np.float64
        )  # none: saved before the buffer
        buf_n = st.buf_y.shape[0]
        # saved before weights: every buffered row weighs 1
        st.buf_w = np.array(arrays["pp_buf_w"], dtype=np.float64) if "pp_buf_w" in arrays else np.ones(buf_n)
        st.buf_X = np.zeros((0 if sparse else buf_n, st.n_features))
        if not sparse and not _zero_broadcast(arrays["pp_buf_X"]):  # serving states: zeros already
            st.buf_X[:buf_n] = arrays["pp_buf_X"]
        st.guard = bool(meta.get("run_guard", False))
        st.res_capacity = int(meta.get("guard_capacity", 0))
        res_rows = arrays["pp_res_X"].shape[1] if "pp_state" in arrays else 0
        st.res_X = np.zeros((st.n_classes, 0 if sparse else res_rows, st.n_features))
        st.res_n = np.zeros(st.n_classes, dtype=np.int64)
        st.seen = np.zeros(st.n_classes, dtype=np.int64)
        st.state = np.zeros(N_STATE, dtype=np.int64)
        st.state[S_RUN_CLASS] = -1
        if "pp_state" in arrays:
            st.state[: arrays["pp_state"].shape[0]] = arrays["pp_state"]  # older states: no drift fields
            if not _zero_broadcast(arrays["pp_res_X"]):
                st.res_X[:, :res_rows] = arrays["pp_res_X"]
            st.res_n[:] = arrays["pp_res_n"]
            st.seen[:] = arrays["pp_seen"]
        st.state[S_BUF_N] = buf_n
        if sparse:
            st.store = SparseRowStore.from_state(arrays, st.capacity, st.n_classes, st.res_capacity, st.res_n)
        return st


def _zero_broadcast(a: np.ndarray) -> bool:
    """Whether ``a`` is a broadcast of one zero (every stride 0), as the serving state holds
    for the rows predictions never read (``svmstream.app.models.serving``): the zero-filled
    target is left unwritten (so it takes no memory)."""
    return a.size > 0 and not any(a.strides) and not a.flat[0]
