"""What an online model does to examples before its solver sees them.

Users send raw features, in the order they have them (LIBSVM files are often sorted by
label), and rarely know γ.  A budgeted model therefore owns three stages (issue "Good models
with no settings"; the defaults and the measurements behind them are in
``docs/defaults.md``):

1. **Warm-up window.**  The first ``warmup`` examples are held, not learned.  When the
   window closes, the feature scaling and γ are computed from it and frozen:

   * ``scaling="standard"``: ``(x − mean) / std`` per feature (std 0 → 1);
   * ``scaling="maxabs"``: ``x / max|x|`` per feature (max 0 → 1); keeps sparsity;
   * ``scaling="auto"``: ``"standard"`` if every batch of the window was dense, else
     ``"maxabs"``;
   * ``gamma="scale"``: 1 / (d · Var(X_window scaled)) over all entries of the window
     matrix — scikit-learn's ``SVC(gamma="scale")`` convention (1.0 if the variance is 0).

   The window's examples are then learned, in a shuffled order.
2. **Scaling** of every later example (learning and prediction alike) with the frozen
   statistics.
3. **Shuffle buffer** of K examples: each incoming example takes the place of a uniformly
   drawn buffered one, which is learned instead (K = 0: off).  A label-sorted stream is
   thereby learned in a locally shuffled order; :meth:`Preprocessor.flush` learns what is
   left.  Each buffer is bounded by :data:`BUFFER_MAX_BYTES` (for wide inputs K shrinks).

Everything here is plain data saved in the model's state, so a restored model continues
exactly (exactly-once stream recovery depends on it).  Random draws come from the model's
``rng_`` (saved as well).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

#: A shuffle buffer never holds more than this many bytes of rows (K shrinks for wide data).
BUFFER_MAX_BYTES = 64 * 1024 * 1024


@nb.njit(nogil=True, cache=True)
def through_buffer(X, y, slots, buf_X, buf_y, out_X, out_y):
    """Pass rows through a full shuffle buffer: row i replaces ``buf[slots[i]]``, which is emitted.

    X : (n, d) float64; y : (n,) float64; slots : (n,) int64 in [0, K);
    buf_X : (K, d) float64; buf_y : (K,) float64 (both updated in place);
    out_X : (n, d) float64; out_y : (n,) float64 — the emitted rows, in order.
    """
    for i in range(X.shape[0]):
        j = slots[i]
        for k in range(X.shape[1]):
            out_X[i, k] = buf_X[j, k]
            buf_X[j, k] = X[i, k]
        out_y[i] = buf_y[j]
        buf_y[j] = y[i]


def fit_scaler(X, kind: str) -> tuple[str, np.ndarray, np.ndarray]:
    """Per-feature ``(kind, offset, factor)`` so that scaled x = (x − offset) · factor.

    X : (n, d) float64 dense or CSR; kind : "auto" | "standard" | "maxabs" | "none"
    ("auto" resolves to "maxabs" for CSR input, "standard" for dense).
    Returns offset and factor as (d,) float64 arrays; constant features get factor 1.
    """
    d = X.shape[1]
    if kind == "auto":
        kind = "maxabs" if sp.issparse(X) else "standard"
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
    """Rows a shuffle buffer holds: ``shuffle_buffer``, bounded by :data:`BUFFER_MAX_BYTES`."""
    if shuffle_buffer <= 0:
        return 0
    return int(max(1, min(shuffle_buffer, BUFFER_MAX_BYTES // (8 * max(1, n_features)))))


class Preprocessor:
    """The warm-up window, the frozen scaler and γ, and the shuffle buffer of one model.

    Parameters
    ----------
    scaling : {"auto", "standard", "maxabs", "none"}
    gamma : float > 0 or "scale"
    warmup : int >= 0 — examples in the window (0: no window; needs ``scaling="none"`` and a
        numeric ``gamma``, otherwise at least one batch forms the window)
    shuffle_buffer : int >= 0 — K
    n_features : int — d
    """

    def __init__(self, scaling, gamma, warmup, shuffle_buffer, n_features):
        self.scaling = scaling
        self.n_features = int(n_features)
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
        self.buf_n = 0
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
        parts = [p for p, _ in self.window_parts]
        X = sp.vstack(parts, format="csr") if any(sp.issparse(p) for p in parts) else np.vstack(parts)
        labels = np.concatenate([y for _, y in self.window_parts])
        self.fit(X)
        self.window_parts, self.window_n = [], 0
        order = rng.permutation(labels.shape[0])
        return self.transform(X)[order], labels[order]

    def fit(self, X) -> None:
        """Freeze the scaler and γ from the rows X (the window, or all of ``fit``'s data)."""
        self.kind, self.offset, self.factor = fit_scaler(X, self.scaling)
        if self.gamma is None:
            self.gamma = scale_gamma(scale_dense(X, self.offset, self.factor))
        self.ready = True

    def transform(self, X):
        """X scaled with the frozen statistics: dense float64 (n, d), or X itself when kind is "none"."""
        if self.kind == "none":
            return X if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
        return scale_dense(X, self.offset, self.factor)

    # ------------------------------------------------------------------ shuffle buffer
    def shuffle(self, X, labels, rng) -> tuple[np.ndarray, np.ndarray]:
        """Rows to learn now, after passing ``(X, labels)`` through the shuffle buffer."""
        cap = self.buf_X.shape[0]
        if cap == 0:
            return X, labels
        X = X.toarray() if sp.issparse(X) else X
        fill = min(cap - self.buf_n, X.shape[0])
        self.buf_X[self.buf_n : self.buf_n + fill] = X[:fill]
        self.buf_y[self.buf_n : self.buf_n + fill] = labels[:fill]
        self.buf_n += fill
        rest = X.shape[0] - fill
        out_X = np.empty((rest, self.n_features))
        out_y = np.empty(rest)
        if rest:
            slots = rng.integers(0, cap, rest).astype(np.int64)
            through_buffer(
                np.ascontiguousarray(X[fill:], dtype=np.float64),
                np.ascontiguousarray(labels[fill:], dtype=np.float64),
                slots,
                self.buf_X,
                self.buf_y,
                out_X,
                out_y,
            )
        return out_X, out_y

    def flush(self, rng) -> tuple[np.ndarray, np.ndarray]:
        """Empty the buffer: its rows and labels in a random order."""
        order = rng.permutation(self.buf_n)
        X, y = self.buf_X[order].copy(), self.buf_y[order].copy()
        self.buf_n = 0
        return X, y

    @property
    def pending(self) -> int:
        """Examples received but not yet learned (window + buffer)."""
        return self.window_n + self.buf_n

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        arrays = {
            "pp_offset": self.offset,
            "pp_factor": self.factor,
            "pp_buf_X": self.buf_X[: self.buf_n].copy(),
            "pp_buf_y": self.buf_y[: self.buf_n].copy(),
        }
        if self.window_parts:
            parts = [p for p, _ in self.window_parts]
            W = sp.vstack(parts, format="csr") if any(sp.issparse(p) for p in parts) else None
            if W is not None:
                arrays.update(
                    pp_win_data=W.data,
                    pp_win_indices=W.indices.astype(np.int64),
                    pp_win_indptr=W.indptr.astype(np.int64),
                )
            else:
                arrays["pp_win_dense"] = np.vstack(parts)
            arrays["pp_win_y"] = np.concatenate([y for _, y in self.window_parts])
        meta = {
            "ready": self.ready,
            "kind": self.kind,
            "gamma": self.gamma,
            "warmup": self.warmup,
            "needs_window": self.needs_window,
            "buffer_capacity": int(self.buf_X.shape[0]),
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, scaling, n_features):
        pp = cls.__new__(cls)
        pp.scaling, pp.n_features = scaling, int(n_features)
        pp.ready, pp.kind, pp.gamma = bool(meta["ready"]), meta["kind"], meta["gamma"]
        pp.warmup, pp.needs_window = int(meta["warmup"]), bool(meta["needs_window"])
        pp.offset = np.array(arrays["pp_offset"], dtype=np.float64)
        pp.factor = np.array(arrays["pp_factor"], dtype=np.float64)
        cap = int(meta["buffer_capacity"])
        pp.buf_X, pp.buf_y = np.zeros((cap, pp.n_features)), np.zeros(cap)
        pp.buf_n = arrays["pp_buf_y"].shape[0]
        pp.buf_X[: pp.buf_n] = arrays["pp_buf_X"]
        pp.buf_y[: pp.buf_n] = arrays["pp_buf_y"]
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
