"""The scaler stage: the warm-up window, the frozen feature scaling and ``gamma="scale"``.

The first ``warmup`` examples (exactly: a batch that crosses the boundary is split) are held,
not learned.  When the window closes, the feature scaling and γ are computed from it and
frozen (``docs/online.md``, measurements in ``docs/defaults.md``):

* ``scaling="maxabs"``: ``x / max|x|`` per feature (max 0 → 1); keeps sparsity;
* ``scaling="standard"``: ``(x − mean) / std`` per feature (std 0 → 1);
* ``scaling="auto"`` = ``"maxabs"`` for dense and sparse input (window-standardising a stream
  in file order is fragile: ijcnn1 91.5% against 97.5% with max-abs); text-like input (linear
  models, wide sparse CSR: :func:`~svmstream.solvers.budgeted._preprocessing.wide_sparse`)
  resolves it by :func:`linear_auto_scaling`;
* ``gamma="scale"``: 1 / (d · Var(X_window scaled)) over all entries of the window matrix —
  scikit-learn's ``SVC(gamma="scale")`` — times :data:`MULTICLASS_GAMMA_FACTOR` (6) when the
  model has more than two classes when the window closes (not for text-like input).

Every later example (learning and prediction alike) is scaled with the frozen statistics.
The stage hands the window's rows, scaled and in stream order, to the order stage
(:mod:`.order`), which shuffles them.  Linear models and kernel models with sparse support
vectors (``keep_sparse``) keep CSR rows sparse: max-abs scaling multiplies the values by their
feature's factor.  The pipeline (:class:`..pipeline.StreamingClassifier`) sets the estimator's
γ from :attr:`ScalerStage.gamma` when the window closes.

Saved state: the meta under ``stages.scaler``; arrays ``pp_offset``, ``pp_factor`` (or, for
sparse rows without an offset, ``pp_factor_idx``/``pp_factor_val``) and the open window
``pp_win_*`` — the names the engines used when they ran this stage, so states saved then load
unchanged (:func:`..pipeline.scaler_and_order_out_of_the_engine`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...budgeted._preprocessing import scale_gamma, scale_gamma_sparse, stack_rows, wide_sparse, widen_rows

#: ``gamma="scale"`` of a model with more than two classes is this many times the binary rule
#: (measured on letter, pendigits and digits: ``docs/online.md``, "Classes").
MULTICLASS_GAMMA_FACTOR = 6.0


def linear_auto_scaling(X) -> str:
    """``scaling="auto"`` of text-like input: ``"none"`` when every |x| of the window is ≤ 1 (the
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
    ("auto" resolves to "maxabs").  Returns offset and factor as (d,) float64 arrays;
    constant features get factor 1.
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
        # dense: max(max x, -min x), the same figure as max |x| without an (n, d) temporary
        top = np.asarray(
            abs(X).max(axis=0).todense() if sp.issparse(X) else np.maximum(X.max(axis=0), -X.min(axis=0))
        ).ravel()
        factor = np.where(top > 0, 1.0 / np.where(top > 0, top, 1.0), 1.0)
    return kind, offset, factor


def scale_dense(X, offset, factor, rows=None) -> np.ndarray:
    """Scaled dense copy of rows X (dense or CSR), (n, d) float64 C-contiguous; ``rows``: an
    index array, the copy holds ``X[rows]`` scaled (the same values as ``scale_dense(X)[rows]``,
    one (n, d) array made instead of two: the wide windows of ``docs/selection.md``)."""
    out = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    if rows is not None:
        out = np.ascontiguousarray(out[rows])  # a copy: scaled in place below
        if offset.any():
            out -= offset
        out *= factor
        return out
    if offset.any():
        out = out - offset
        out *= factor  # in place: the same values as (out - offset) * factor, one array fewer
    else:
        out = out * factor
    return np.ascontiguousarray(out)


class ScalerStage:
    """The warm-up window, the frozen scaling and γ of a streaming pipeline.

    Parameters
    ----------
    scaling : {"auto", "standard", "maxabs", "none"} — as resolved by the pipeline
        (:func:`..pipeline.resolve_scaling`)
    gamma : float > 0, "scale" or None — None: no γ (linear models)
    warmup : int >= 0 — examples in the window (0 with something to fix: the first batch)
    n_features : int — d
    n_classes : int — 2: labels ±1; more: class indices (and the multi-class γ factor)
    keep_sparse : bool — CSR rows stay CSR through max-abs scaling (linear models, sparse SVs)
    text_like : bool — the input is text-like whatever it looks like (linear models)

    Attributes
    ----------
    ready : bool — the window has closed (predictions may start)
    kind : str or None — the scaling in use ("standard", "maxabs", "none")
    offset, factor : (d,) float64 — scaled x = (x − offset) · factor
    gamma : float or None — γ in use (None before the window closes, and for linear models)
    window_n : int — examples held

    Raises
    ------
    ValueError
        ``keep_sparse`` for a kernel model with ``scaling="standard"`` (an offset fills every zero).
    """

    def __init__(
        self, scaling, gamma, warmup, n_features, n_classes=2, *, keep_sparse=False, text_like=False
    ):
        if keep_sparse and not text_like and scaling == "standard":
            raise ValueError("sv_storage='sparse' needs scaling 'auto', 'maxabs' or 'none', got 'standard'")
        self.scaling = scaling
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.keep_sparse = bool(keep_sparse)
        self.text_like = bool(text_like)
        self.ready = False
        self.kind = None
        self.offset = np.zeros(self.n_features)
        self.factor = np.ones(self.n_features)
        self.gamma = None if (gamma is None or gamma == "scale") else float(gamma)
        self.has_gamma = gamma is not None
        self.needs_window = scaling != "none" or (gamma == "scale")
        self.warmup = int(warmup) if self.needs_window else 0
        self.window_parts: list = []  # (X rows as given: dense or CSR, encoded labels, weights)
        self.window_n = 0
        self.window_shuffled = False  # the last close gave its rows in ``shuffle``'s order
        if not self.needs_window:
            self.kind, self.ready = "none", True

    @property
    def pending(self) -> int:
        """Examples held in the window."""
        return self.window_n

    # ------------------------------------------------------------------ the stream
    @property
    def window_gamma(self) -> bool:
        """Whether closing the window computes γ from it (``gamma="scale"`` still open)."""
        return self.gamma is None and self.has_gamma and not self.ready

    def feed(self, X, labels, weights, shuffle=None):
        """Scale a received batch ``(X, labels, weights)`` (raw features, encoded labels, (n,)
        float64 importance weights; the window's scaling is not weighted: it bounds features).

        Returns None while the window stays open, else ``(window, rest)``: ``window`` the
        window's rows scaled, in stream order, their labels and weights (None if the window
        closed before this batch), ``rest`` the batch's rows after the window, scaled (None if
        none).  ``shuffle``: see :meth:`close`."""
        if self.ready:
            return None, (self.transform(X), labels, weights)
        need = X.shape[0] if self.warmup == 0 else self.warmup - self.window_n
        self.window_parts.append(
            (
                X[:need],
                np.asarray(labels[:need], dtype=np.float64),
                np.asarray(weights[:need], dtype=np.float64),
            )
        )
        self.window_n += X[:need].shape[0]
        if self.window_n < max(1, self.warmup):
            return None
        window = self.close(shuffle)
        rest = (self.transform(X[need:]), labels[need:], weights[need:]) if need < X.shape[0] else None
        return window, rest

    def close(self, shuffle=None):
        """Freeze scaling and γ from the window; returns its rows scaled, their labels and
        weights, in stream order (None if the window holds nothing).

        ``shuffle``: None, or a function of the window's length returning the order the rows
        leave in (an index array, or None: stream order) -- the order stage's
        (:meth:`~.order.OrderStage.window_order`); the rows are then scaled straight into that
        order (one (n, d) array instead of two; the same values).  Not asked when γ is computed
        from the window (its sum keeps the stream order).  A single dense part is not copied
        before it is scaled."""
        if not self.window_parts:
            return None
        parts = self.window_parts
        labels = np.concatenate([p[1] for p in parts])
        weights = np.concatenate([p[2] for p in parts])
        dense = not any(sp.issparse(p[0]) for p in parts)
        gather = shuffle is not None and not self.window_gamma and dense
        order = shuffle(labels.shape[0]) if gather else None
        self.window_shuffled = gather  # the rows are in shuffle's order (its None: stream order)
        if gather and order is not None and len(parts) > 1 and self._plain_maxabs():
            scaled = self._maxabs_parts([p[0] for p in parts], order)
        else:
            X = parts[0][0] if len(parts) == 1 and dense else stack_rows([p[0] for p in parts])
            scaled = self.fit_transform(X, order)
        if order is not None:
            labels, weights = labels[order], weights[order]
        self.window_parts, self.window_n = [], 0
        return scaled, labels, weights

    def _plain_maxabs(self) -> bool:
        """Dense rows of this stage are max-abs scaled (``scaling`` "auto" or "maxabs", not
        text-like: :meth:`fit_transform`'s choice for them)."""
        return self.scaling in ("auto", "maxabs") and not self.text_like

    def _maxabs_parts(self, parts, order):
        """:meth:`fit_transform` of the dense window ``parts`` stacked, max-abs, rows in
        ``order`` -- without stacking them: each part scaled into its rows' places (the same
        values: max |x| is the largest of the parts' and each value is scaled alone)."""
        top = np.max([np.maximum(P.max(axis=0), -P.min(axis=0)) for P in parts], axis=0)
        self.kind, self.offset = "maxabs", np.zeros(self.n_features)
        self.factor = np.where(top > 0, 1.0 / np.where(top > 0, top, 1.0), 1.0)
        place = np.empty(order.shape[0], dtype=np.int64)
        place[order] = np.arange(order.shape[0])
        out = np.empty((order.shape[0], self.n_features))
        lo = 0
        for P in parts:
            out[place[lo : lo + P.shape[0]]] = P * self.factor
            lo += P.shape[0]
        self.ready = True
        return out

    def fit_transform(self, X, rows=None):
        """Freeze the scaler and γ from the rows X and return X scaled, as :meth:`transform` would
        (``rows``: the scaled rows ``X[rows]``; only where no γ is computed from X)."""
        if rows is not None and self.window_gamma:
            raise ValueError("fit_transform: rows reorder a window that γ is computed from")
        if not self.needs_window:
            return self.transform(X, rows)
        kind = self.scaling
        text_like = self.text_like or wide_sparse(X)  # the input decides, not the SV storage
        if text_like and kind == "auto":
            # text-like input: max-abs stretches rare features; one pass over shuffled reuters,
            # RBF B = 500: none 97.48/96.64/97.64% against max-abs 96.67/96.09/96.67
            # (docs/defaults.md)
            kind = linear_auto_scaling(X)
        self.kind, self.offset, self.factor = fit_scaler(X, kind)
        scaled = self.transform(X, rows)
        if self.gamma is None and self.has_gamma:
            if sp.issparse(X) and not self.offset.any():
                # CSR rows: γ from their nonzeros whichever way the SVs are stored, so that
                # dense and sparse storage start from the same γ (and no window is densified)
                self.gamma = scale_gamma_sparse(
                    scaled if sp.issparse(scaled) else scale_sparse(X, self.factor)
                )
            else:
                self.gamma = scale_gamma(scaled.toarray() if sp.issparse(scaled) else scaled)
            if self.n_classes > 2 and not text_like:
                # measured on dense multi-class sets; on sparse text it hurts: sector one pass,
                # B = 500: the plain "scale" 78.7%, 6 × it 36.7%
                self.gamma *= MULTICLASS_GAMMA_FACTOR
        self.ready = True
        return scaled

    def transform(self, X, rows=None):
        """X scaled with the frozen statistics: dense float64 (n, d), or X itself when kind is
        "none" (CSR rows stay CSR for ``keep_sparse`` unless the scaling has an offset);
        ``rows``: ``X[rows]`` scaled (an index array)."""
        if rows is not None and (self.kind == "none" or sp.issparse(X)):
            X, rows = X[rows], None
        if self.kind == "none":
            return X if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
        if self.keep_sparse and sp.issparse(X) and not self.offset.any():
            return scale_sparse(X, self.factor)
        return scale_dense(X, self.offset, self.factor, rows)

    def grow(self, n_features: int) -> None:
        """Widen to ``n_features``: the new features get offset 0, factor 1; held rows get zeros."""
        d_new = int(n_features)
        if d_new <= self.n_features:
            return
        pad = d_new - self.n_features
        self.offset = np.concatenate([self.offset, np.zeros(pad)])
        self.factor = np.concatenate([self.factor, np.ones(pad)])
        self.window_parts = [(widen_rows(X, d_new), y, w) for X, y, w in self.window_parts]
        self.n_features = d_new

    def add_class(self) -> None:
        """One more class: from two to three the held labels go from ±1 to class indices."""
        if self.n_classes == 2:
            self.window_parts = [(X, (y > 0).astype(np.float64), w) for X, y, w in self.window_parts]
        self.n_classes += 1

    # ------------------------------------------------------------------ persistence
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, meta)``: offset and factor, the open window's rows and labels."""
        arrays = {"pp_offset": self.offset, "pp_factor": self.factor}
        if self.keep_sparse and not self.offset.any():
            # max-abs factors of the features seen (the rest are 1): a state proportional to
            # the nonzeros, not to d (wide sparse rows)
            changed = np.flatnonzero(self.factor != 1.0)
            arrays = {"pp_factor_idx": changed, "pp_factor_val": self.factor[changed]}
            arrays["pp_offset"], arrays["pp_factor"] = np.zeros(0), np.zeros(0)
        if self.window_parts:
            W = stack_rows([p[0] for p in self.window_parts])
            if sp.issparse(W):
                arrays.update(
                    pp_win_data=W.data,
                    pp_win_indices=W.indices.astype(np.int64),
                    pp_win_indptr=W.indptr.astype(np.int64),
                )
            else:
                arrays["pp_win_dense"] = W
            arrays["pp_win_y"] = np.concatenate([p[1] for p in self.window_parts])
            arrays["pp_win_w"] = np.concatenate([p[2] for p in self.window_parts])
        meta = {
            "scaling": self.scaling,
            "ready": self.ready,
            "kind": self.kind,
            "gamma": self.gamma,
            "has_gamma": self.has_gamma,
            "warmup": self.warmup,
            "needs_window": self.needs_window,
            "keep_sparse": self.keep_sparse,
            "text_like": self.text_like,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, n_features: int, n_classes: int) -> ScalerStage:
        """Rebuild from :meth:`get_state`."""
        st = cls.__new__(cls)
        st.scaling, st.n_features, st.n_classes = meta["scaling"], int(n_features), int(n_classes)
        st.keep_sparse, st.text_like = bool(meta["keep_sparse"]), bool(meta["text_like"])
        st.ready, st.kind, st.gamma = bool(meta["ready"]), meta["kind"], meta["gamma"]
        st.has_gamma = bool(meta["has_gamma"])
        st.warmup, st.needs_window = int(meta["warmup"]), bool(meta["needs_window"])
        if "pp_factor_idx" in arrays:  # saved compact (sparse rows, no offset)
            st.offset, st.factor = np.zeros(st.n_features), np.ones(st.n_features)
            st.factor[arrays["pp_factor_idx"]] = arrays["pp_factor_val"]
        elif "pp_factor" in arrays:
            st.offset = np.array(arrays["pp_offset"], dtype=np.float64)
            st.factor = np.array(arrays["pp_factor"], dtype=np.float64)
        else:  # saved before scaling existed: raw features
            st.offset, st.factor = np.zeros(st.n_features), np.ones(st.n_features)
        st.window_parts, st.window_n, st.window_shuffled = [], 0, False
        if "pp_win_y" in arrays:
            if "pp_win_dense" in arrays:
                W = np.array(arrays["pp_win_dense"], dtype=np.float64)
            else:
                y_n = arrays["pp_win_y"].shape[0]
                W = sp.csr_matrix(
                    (arrays["pp_win_data"], arrays["pp_win_indices"], arrays["pp_win_indptr"]),
                    shape=(y_n, st.n_features),
                )
            y = np.array(arrays["pp_win_y"], dtype=np.float64)
            # saved before weights: every window row weighs 1
            w = (
                np.array(arrays["pp_win_w"], dtype=np.float64)
                if "pp_win_w" in arrays
                else np.ones(y.shape[0])
            )
            st.window_parts = [(W, y, w)]
            st.window_n = W.shape[0]
        return st

    def published_copy(self) -> ScalerStage:
        """A copy for predictions (the frozen arrays are replaced, never written, by the learner)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.window_parts = list(self.window_parts)
        return copy
