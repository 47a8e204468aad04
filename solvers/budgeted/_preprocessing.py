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
     when the window closes.  With B shared by K classes a budgeted model needs narrower
     kernels than the exact SVM: one pass in file order, B = 500, mean of 2–3 seeds, BSGD
     (Crammer–Singer) with γ = factor × scale:

     =========  ======  ======  ======  ======  ======
     factor     1       2       4       6       8
     =========  ======  ======  ======  ======  ======
     letter     79.9    85.3    89.7    89.7    89.9
     pendigits  94.3    96.3    96.9    97.2    97.1
     digits     92.8    95.1    96.2    97.3    97.0
     =========  ======  ======  ======  ======  ======

     (BSCA one-vs-rest moves the same way: letter 83.3 → 94.5 at 4.)  Binary models keep
     the factor 1: on ijcnn1 2× and 4× lose 0.2 and 1.1 pp.

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

#: A shuffle buffer never holds more than this many bytes of rows (K shrinks for wide data).
BUFFER_MAX_BYTES = 64 * 1024 * 1024
#: Run guard: examples kept per class for replay (reservoir sampling).
GUARD_RESERVOIR = 200
#: Run guard: all reservoirs together never hold more than this many bytes.
GUARD_MAX_BYTES = 16 * 1024 * 1024
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


@nb.njit(nogil=True, cache=True)
def _guard_step(out_X, out_y, out_orig, k, u0, u1, u2, binary, res_X, res_n, seen, st, min_run, log_alpha):
    """Record learned row ``k − 1`` in the guard; append one replayed row if the run fires.

    Returns the new number of output rows."""
    row = k - 1
    c = (1 if out_y[row] > 0.0 else 0) if binary else int(out_y[row])
    if c == st[S_RUN_CLASS]:
        st[S_RUN_LEN] += 1
    else:
        st[S_RUN_CLASS] = c
        st[S_RUN_LEN] = 1
    seen[c] += 1
    st[S_SEEN] += 1
    cap = res_X.shape[1]
    j = res_n[c] if res_n[c] < cap else int(u0 * seen[c])
    if j < cap:
        _copy_row(out_X, row, res_X[c], j)
        if j == res_n[c]:
            res_n[c] += 1
    if st[S_RUN_LEN] < min_run or k >= out_X.shape[0]:  # the second never holds (room is sized)
        return k
    n_other = 0
    for o in range(res_n.shape[0]):
        if o != c and res_n[o] > 0:
            n_other += 1
    if n_other == 0:
        return k
    q = seen[c] / st[S_SEEN]
    if st[S_RUN_LEN] * math.log(q) > log_alpha:
        return k
    pick = min(int(u1 * n_other), n_other - 1)
    o = 0
    for o in range(res_n.shape[0]):
        if o != c and res_n[o] > 0:
            if pick == 0:
                break
            pick -= 1
    r = min(int(u2 * res_n[o]), res_n[o] - 1)
    _copy_row(res_X[o], r, out_X, k)
    out_y[k] = (2.0 * o - 1.0) if binary else float(o)
    out_orig[k] = False
    st[S_REPLAYED] += 1
    return k + 1


@nb.njit(nogil=True, cache=True)
def buffer_and_guard(
    X, y, u, buf_X, buf_y, st, guard, binary, res_X, res_n, seen, min_run, log_alpha, out_X, out_y, out_orig
):
    """Pass rows through the shuffle buffer and the run guard; returns the rows to learn.

    X : (n, d) float64 scaled rows; y : (n,) encoded labels (±1 binary, class index else);
    u : (n, DRAWS_PER_ROW) uniforms in [0, 1); buf_X : (K, d), buf_y : (K,) — the buffer
    (K = 0: rows pass straight through); st : (N_STATE,) int64 (buffer fill, run class and
    length, rows seen by the guard, replayed); guard : bool; binary : bool;
    res_X : (n_classes, R, d), res_n, seen : (n_classes,) int64 — the guard's reservoirs;
    out_X : (2n, d), out_y : (2n,), out_orig : (2n,) bool (False: replayed) — written from 0.
    All state arrays are updated in place.  Returns the number of output rows.
    """
    cap = buf_X.shape[0]
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
                res_n,
                seen,
                st,
                min_run,
                log_alpha,
            )
    return k


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
    """

    def __init__(self, scaling, gamma, warmup, shuffle_buffer, n_features, n_classes=2, run_guard=False):
        self.scaling = scaling
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.ready = False
        self.kind = None
        self.offset = np.zeros(self.n_features)
        self.factor = np.ones(self.n_features)
        self.gamma = None if gamma == "scale" else float(gamma)
        self.needs_window = scaling != "none" or gamma == "scale"
        self.warmup = int(warmup) if self.needs_window else 0
        self.window_parts: list = []  # (X rows as given: dense or CSR, encoded labels)
        self.window_n = 0
        cap = buffer_capacity(int(shuffle_buffer), self.n_features)
        self.buf_X = np.zeros((cap, self.n_features))
        self.buf_y = np.zeros(cap)
        self.state = np.zeros(N_STATE, dtype=np.int64)
        self.state[S_RUN_CLASS] = -1
        self.guard = bool(run_guard)
        res = guard_capacity(self.n_classes, self.n_features) if self.guard else 0
        self.res_X = np.zeros((self.n_classes, res, self.n_features))
        self.res_n = np.zeros(self.n_classes, dtype=np.int64)
        self.seen = np.zeros(self.n_classes, dtype=np.int64)
        if not self.needs_window:
            self.kind, self.ready = "none", True

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
        order = rng.permutation(labels.shape[0])
        return scaled[order], labels[order]

    def fit_transform(self, X):
        """Freeze the scaler and γ from the rows X (the window, or all of ``fit``'s data) and
        return X scaled, as :meth:`transform` would — scaled once, for γ and the caller."""
        if not self.needs_window:  # raw features and a numeric γ: nothing to compute
            return self.transform(X)
        self.kind, self.offset, self.factor = fit_scaler(X, self.scaling)
        scaled = self.transform(X)
        if self.gamma is None:
            self.gamma = scale_gamma(scaled.toarray() if sp.issparse(scaled) else scaled)
            if self.n_classes > 2:
                self.gamma *= MULTICLASS_GAMMA_FACTOR
        self.ready = True
        return scaled

    def transform(self, X):
        """X scaled with the frozen statistics: dense float64 (n, d), or X itself when kind is "none"."""
        if self.kind == "none":
            return X if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
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
            parts.append((self.buf_X[order], self.buf_y[order]))
            self.state[S_BUF_N] = 0
        if not parts:
            return np.zeros((0, self.n_features)), np.zeros(0), np.zeros(0, dtype=bool)
        X = _stack([p[0] for p in parts])
        return self._pass(X, np.concatenate([p[1] for p in parts]), rng, through_buffer=False)

    def discard_buffer(self) -> int:
        """After a detected drift: drop the rows the shuffle buffer holds (they arrived before
        the drift was noticed, most of them under the old concept) and let the next K
        arrivals bypass the buffer, so the learner sees the new concept at once; returns the
        number of rows dropped (``n_discarded``)."""
        m = int(self.state[S_BUF_N])
        self.state[S_BUF_N] = 0
        self.state[S_DISCARDED] += m
        self.state[S_BYPASS] = self.buf_X.shape[0]
        return m

    def _pass(self, X, labels, rng, through_buffer):
        bypass = int(self.state[S_BYPASS])
        if through_buffer and bypass > 0 and self.buf_X.shape[0] > 0:
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
        n = X.shape[0]
        use_buffer = through_buffer and self.buf_X.shape[0] > 0
        if not (use_buffer or self.guard) or n == 0:
            return X, labels, np.ones(n, dtype=bool)
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
            self.state,
            self.guard,
            self.n_classes == 2,
            self.res_X,
            self.res_n,
            self.seen,
            GUARD_MIN_RUN,
            math.log(GUARD_ALPHA),
            out_X,
            out_y,
            out_orig,
        )
        return out_X[:k], out_y[:k], out_orig[:k]

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
        m = int(self.state[S_BUF_N])
        cap = (
            min(self.buf_X.shape[0], buffer_capacity(int(shuffle_buffer), d_new))
            if self.buf_X.shape[0]
            else 0
        )
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
        buf_X, buf_y = np.zeros((cap, d_new)), np.zeros(cap)
        buf_X[:m, :d_old] = kept_X
        buf_y[:m] = kept_y
        self.buf_X, self.buf_y = buf_X, buf_y
        self.state[S_BUF_N] = m
        res = min(self.res_X.shape[1], guard_capacity(self.n_classes, d_new)) if self.guard else 0
        res_X = np.zeros((self.n_classes, res, d_new))
        res_X[:, :, :d_old] = self.res_X[:, :res]
        self.res_X = res_X
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
        res = min(self.res_X.shape[1], guard_capacity(self.n_classes, self.n_features)) if self.guard else 0
        res_X = np.zeros((self.n_classes, res, self.n_features))
        res_X[:-1] = self.res_X[:, :res]
        self.res_X = res_X
        self.res_n = np.append(np.minimum(self.res_n, res), 0)
        self.seen = np.append(self.seen, 0)

    @property
    def pending(self) -> int:
        """Examples received but not yet learned (window + buffer)."""
        return self.window_n + int(self.state[S_BUF_N])

    @property
    def n_discarded(self) -> int:
        """Buffered examples dropped at drift detections (:meth:`discard_buffer`)."""
        return int(self.state[S_DISCARDED])

    @property
    def n_replayed(self) -> int:
        """Examples the run guard replayed (learned steps that are not received examples)."""
        return int(self.state[S_REPLAYED])

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        buf_n = int(self.state[S_BUF_N])
        res_rows = int(self.res_n.max()) if self.res_n.size else 0
        arrays = {
            "pp_offset": self.offset,
            "pp_factor": self.factor,
            "pp_buf_X": self.buf_X[:buf_n].copy(),
            "pp_buf_y": self.buf_y[:buf_n].copy(),
            "pp_state": self.state.copy(),
            "pp_res_X": self.res_X[:, :res_rows].copy(),
            "pp_res_n": self.res_n.copy(),
            "pp_seen": self.seen.copy(),
        }
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
            "buffer_capacity": int(self.buf_X.shape[0]),
            "run_guard": self.guard,
            "guard_capacity": int(self.res_X.shape[1]),
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, scaling, n_features, n_classes=2):
        """Rebuild from :meth:`get_state`; a state saved before the run guard existed (state
        version 3) continues with an empty guard, off."""
        pp = cls.__new__(cls)
        pp.scaling, pp.n_features, pp.n_classes = scaling, int(n_features), int(n_classes)
        pp.ready, pp.kind, pp.gamma = bool(meta["ready"]), meta["kind"], meta["gamma"]
        pp.warmup, pp.needs_window = int(meta["warmup"]), bool(meta["needs_window"])
        pp.offset = np.array(arrays["pp_offset"], dtype=np.float64)
        pp.factor = np.array(arrays["pp_factor"], dtype=np.float64)
        cap = int(meta["buffer_capacity"])
        pp.buf_X, pp.buf_y = np.zeros((cap, pp.n_features)), np.zeros(cap)
        buf_n = arrays["pp_buf_y"].shape[0]
        pp.buf_X[:buf_n] = arrays["pp_buf_X"]
        pp.buf_y[:buf_n] = arrays["pp_buf_y"]
        pp.guard = bool(meta.get("run_guard", False))
        pp.res_X = np.zeros((pp.n_classes, int(meta.get("guard_capacity", 0)), pp.n_features))
        pp.res_n = np.zeros(pp.n_classes, dtype=np.int64)
        pp.seen = np.zeros(pp.n_classes, dtype=np.int64)
        pp.state = np.zeros(N_STATE, dtype=np.int64)
        pp.state[S_RUN_CLASS] = -1
        if "pp_state" in arrays:
            pp.state[: arrays["pp_state"].shape[0]] = arrays["pp_state"]  # older states: no drift fields
            res_rows = arrays["pp_res_X"].shape[1]
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
        return pp
