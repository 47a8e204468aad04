"""scikit-learn estimators for budgeted kernel SVMs trained online.

:class:`BudgetedSGDClassifier` wraps the numba BSGD step (:mod:`svmstream.solvers.budgeted._bsgd`): it owns
parameter validation, label mapping, densification of sparse input, the epoch loop and the
exact save/restore of the whole learner state.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import (
    BUDGET_MIN,
    C_MAX,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    REFERENCE_N,
    SCALINGS,
    check_choice,
    check_positive,
)
from ._decision import rbf_decision_batch
from ._lookup import merge_tables
from ._merging import N_DIAG
from ._preprocessing import Preprocessor, buffer_capacity, guard_capacity
from ._state import (
    C_MAINTENANCE,
    C_MERGES,
    C_N_SV,
    C_STEPS,
    C_VIOLATIONS,
    N_COUNTERS,
    N_REALS,
    R_MERGE_SECONDS,
    R_SCALE,
    R_WD_SUM,
)

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


def model_bytes(budget, n_features, shuffle_buffer=0, run_guard=False, n_classes=2, maintenance="merge"):
    """Bytes of the dense arrays a budgeted model of this shape allocates (an estimate made
    before any allocation): the SV matrix (B + 1) · d · 8, the shuffle buffer (at most
    64 MiB of rows), the run guard's reservoirs (at most 16 MiB), and K⁻¹ for
    ``maintenance="project"``.  The warm-up window (raw rows as received) is not counted."""
    d = max(1, int(n_features))
    cap = int(budget) + 1
    n_cols = 1 if n_classes == 2 else int(n_classes)
    total = cap * d * 8 + cap * 8 * (2 + n_cols)  # SVs; their norms, coefficients, kernel row
    total += buffer_capacity(int(shuffle_buffer), d) * (d + 1) * 8
    if run_guard:
        total += guard_capacity(n_classes, d) * n_classes * d * 8
    if maintenance == "project":
        total += cap * cap * 8
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


_NO_TABLE = np.zeros((2, 2))


class WarmingUp(NotFittedError):
    """Raised by ``decision_function``/``predict`` while the warm-up window is still open.

    The message says how many of the ``warmup`` examples have arrived.  A subclass of
    scikit-learn's ``NotFittedError`` (hence of ``ValueError`` and ``AttributeError``).
    """


class BudgetedKernelModel(ClassifierMixin, BaseEstimator):
    """Shared state and prediction of budgeted Gaussian-kernel classifiers (BSGD, BSCA).

    Holds the SV matrix (capacity B + 1), coefficients (one column per class, or a single
    column for binary problems), bias, counters and RNG; provides ``decision_function``,
    ``predict``, the statistics and the exact ``get_state``/``from_state`` round trip.
    Subclasses implement the learning step (``_apply``) and parameter checks.
    """

    #: bumped whenever the saved layout changes (3: warm-up window, scaler, shuffle buffer;
    #: 4: run guard, buffer that learns while it fills)
    STATE_VERSION = 4
    #: versions :meth:`from_state` still loads (2: raw features; 3: no run guard)
    STATE_VERSIONS = (2, 3, 4)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        # the parameter ``lambda_`` ends in "_", which sklearn's default test would take
        # for a fitted attribute
        return hasattr(self, "classes_")

    def __setstate__(self, state):
        # unpickled arrays may be read-only (e.g. memory-mapped); the learner writes in place
        super().__setstate__(state)
        for key, value in vars(self).items():
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                setattr(self, key, value.copy())

    # ------------------------------------------------------------------ labels
    def _encode_labels(self, y):
        """Labels → float64: ±1 for binary models, class index for multi-class models.

        Raises ValueError naming the first unknown label."""
        y = np.asarray(y)
        index = np.searchsorted(self.classes_, y)
        index[index >= self.classes_.shape[0]] = 0
        known = self.classes_[index] == y
        if not known.all():
            bad = int(np.flatnonzero(~known)[0])
            label = y[bad].item() if isinstance(y[bad], np.generic) else y[bad]
            raise ValueError(f"y[{bad}]: unknown label {label!r}; classes are {self.classes_.tolist()}")
        if self.classes_.shape[0] == 2:
            return np.where(index == 1, 1.0, -1.0)
        return index.astype(np.float64)

    # ------------------------------------------------------------------ state
    def _init_state(self, n_features, classes, n_rows=None, streaming=True):
        classes = np.unique(np.asarray(classes))
        if classes.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; "
                f"got {classes.shape[0]} class: {classes.tolist()}"
            )
        self.classes_ = classes
        self.n_features_in_ = int(n_features)
        self.lambda_eff_ = self._resolve_lambda(n_rows)
        cap = int(self.budget) + 1
        n_cols = 1 if classes.shape[0] == 2 else classes.shape[0]
        self._sv_t = np.zeros((self.n_features_in_, cap), dtype=np.float64)
        self._sv_sq = np.zeros(cap, dtype=np.float64)
        self._coef = np.zeros((cap, n_cols), dtype=np.float64)
        self._bias = np.zeros(n_cols, dtype=np.float64)
        self._counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self._reals = np.zeros(N_REALS, dtype=np.float64)
        self._reals[R_SCALE] = 1.0
        self._k_inv = np.zeros((cap, cap) if self.maintenance == "project" else (1, 1))
        self._x_buf = np.zeros(self.n_features_in_, dtype=np.float64)
        self._row_buf = np.zeros(2 * cap, dtype=np.float64)  # kernel row; merging uses both halves
        self._f_buf = np.zeros(n_cols, dtype=np.float64)
        self.merge_diagnostics_ = np.zeros(N_DIAG, dtype=np.float64)
        self.rng_ = np.random.default_rng(self.random_state)
        self._pp = self._new_preprocessor(streaming)
        self.last_margins_ = np.zeros((0,) if n_cols == 1 else (0, n_cols))
        self.last_y_ = self.classes_[:0]

    def _new_preprocessor(self, streaming):
        """The warm-up window, scaler, shuffle buffer and run guard of a fresh model (buffer and
        guard only when streaming: ``fit`` sees all its data at once)."""
        return Preprocessor(
            self.scaling,
            self.gamma,
            self.warmup,
            self.shuffle_buffer if streaming else 0,
            self.n_features_in_,
            self.classes_.shape[0],
            streaming and self.run_guard,
        )

    def _resolve_lambda(self, n_rows):
        return resolve_lambda(self.lambda_, self.C, self.n_samples, n_rows)

    @property
    def gamma_(self):
        """The kernel width in use: ``gamma``, or the value ``"scale"`` resolved to when the
        warm-up window closed (None before)."""
        return self._pp.gamma

    @property
    def scaling_(self):
        """The feature scaling in use ("standard", "maxabs" or "none"; None before the window closes)."""
        return self._pp.kind

    @property
    def n_pending_(self):
        """Examples received but not learned yet: in the warm-up window or the shuffle buffer."""
        return self._pp.pending

    @property
    def warming_up_(self):
        """True while the warm-up window is open (predictions raise :class:`WarmingUp`)."""
        return not self._pp.ready

    def _tables(self):
        """The merge lookup tables ``(H, W)`` if a lookup solver is in use, else 2×2 dummies."""
        if {self.merge_solver, self.compare_merge_solver} & {"lookup-h", "lookup-wd"}:
            return merge_tables()
        return _NO_TABLE, _NO_TABLE

    def _compare_solver_code(self):
        """Merge-solver code of ``compare_merge_solver`` (−1: no side-by-side comparison)."""
        return -1 if self.compare_merge_solver is None else MERGE_SOLVERS[self.compare_merge_solver]

    def _check_budget_params(self):
        """Validate the parameters every budgeted model has; raises ValueError."""
        if not (isinstance(self.gamma, str) and self.gamma == "scale"):
            check_positive("gamma", self.gamma)
            if not np.isfinite(self.gamma):
                raise ValueError(f"gamma must be finite, got {self.gamma!r}")
        check_positive("C", self.C)
        if self.C > C_MAX:
            raise ValueError(f"C must be <= {C_MAX:g} (larger values overflow the step size), got {self.C!r}")
        check_positive("epochs", self.epochs, numbers.Integral)
        check_positive("lambda_", self.lambda_, allow_none=True)
        check_positive("n_samples", self.n_samples, numbers.Integral, allow_none=True)
        if not isinstance(self.budget, numbers.Integral) or self.budget < BUDGET_MIN:
            raise ValueError(f"budget must be an integer >= {BUDGET_MIN}, got {self.budget!r}")
        if not 0.0 < self.gss_eps < 1.0:
            raise ValueError(f"gss_eps must be in (0, 1), got {self.gss_eps!r}")
        check_choice("maintenance", self.maintenance, MAINTENANCE)
        check_choice("scaling", self.scaling, SCALINGS)
        if not isinstance(self.run_guard, (bool, np.bool_)):
            raise ValueError(f"run_guard must be a bool, got {self.run_guard!r}")
        for name in ("warmup", "shuffle_buffer"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        check_choice("merge_solver", self.merge_solver, MERGE_SOLVERS)
        if self.compare_merge_solver is not None:
            check_choice("compare_merge_solver", self.compare_merge_solver, MERGE_SOLVERS)

    def _validate_X(self, X, reset):
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        return X if sp.issparse(X) else np.ascontiguousarray(X)

    def _learn(self, X, labels, order):
        """Run the learning step over ``X[order]`` chunk by chunk; returns f before each step."""
        margins = np.empty((order.shape[0], self._coef.shape[1]), dtype=np.float64)
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            if X_part is X:
                y_part = labels
            else:
                y_part = labels[order[done : done + local_order.shape[0]]]
            self._apply(X_part, y_part, local_order, margins[done : done + local_order.shape[0]])
            done += local_order.shape[0]
        self.last_margins_ = margins[:, 0] if margins.shape[1] == 1 else margins
        return self.last_margins_

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, callback=None):
        """Train from scratch for ``epochs`` shuffled passes.

        X : (n, d) array-like or scipy sparse; y : (n,) labels, at least two classes.
        ``callback(estimator, epoch)``, if given, is called after each epoch (monitoring).
        Raises ValueError on invalid parameters, non-finite input or mismatched lengths.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_classification_targets(y)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._init_state(X.shape[1], np.unique(y), X.shape[0], streaming=False)
        labels = self._encode_labels(y)
        # fit sees all its data: the statistics come from all of X
        self._fit_epochs(self._pp.fit_transform(X), labels, callback)
        return self

    def _fit_epochs(self, X, labels, callback=None):
        for epoch in range(int(self.epochs)):
            self._learn(X, labels, self.rng_.permutation(X.shape[0]).astype(np.int64))
            if callback is not None:
                callback(self, epoch + 1)

    def partial_fit(self, X, y, classes=None):
        """Apply one learning step per row of X, in order.

        ``classes`` (all labels) is required on the first call.  Raises ValueError on
        non-finite input, a feature count different from the first call, or an unknown
        label; the model is unchanged in that case.
        """
        first = not hasattr(self, "classes_")
        if first:
            self.check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        if first:
            self._init_state(X.shape[1], classes)
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {list(classes)} differ from the first call's {self.classes_.tolist()}")
        labels = self._encode_labels(y)
        self._learn_fed(self._pp.feed(X, labels, self.rng_))
        return self

    def flush(self):
        """Learn every pending example now: close an open warm-up window with what it holds,
        then empty the shuffle buffer in a random order (the end of a stream).  Returns self.

        ``last_margins_``/``last_y_`` then describe the examples learned by this call."""
        check_is_fitted(self, "classes_")
        self._learn_fed(self._pp.drain(self.rng_))
        return self

    def grow_features(self, n_features):
        """Widen the model to ``n_features`` input features (sparse input whose largest index
        grew; a missing feature is a zero).  Returns self.

        Support vectors, held and buffered rows get zeros in the new features, which are
        scaled with offset 0 and factor 1; everything else is kept, so decisions on rows
        that are zero in the new features do not change.  If the shuffle buffer's byte bound
        (64 MiB of rows) now holds fewer rows, the rows beyond it are learned now, drawn at
        random.  ``n_features`` below ``n_features_in_`` raises ValueError.
        """
        check_is_fitted(self, "classes_")
        d_old, d_new = self.n_features_in_, int(n_features)
        if d_new < d_old:
            raise ValueError(f"n_features must be >= the model's {d_old}, got {n_features!r}")
        if d_new == d_old:
            return self
        self._grow_arrays(d_new)
        self._learn_fed(self._pp.grow(d_new, self.shuffle_buffer, self.rng_))
        return self

    def _grow_arrays(self, d_new):
        sv_t = np.zeros((d_new, self._sv_t.shape[1]))
        sv_t[: self._sv_t.shape[0]] = self._sv_t
        self._sv_t = sv_t
        self._x_buf = np.zeros(d_new)
        self.n_features_in_ = d_new

    def _learn_fed(self, fed):
        """Learn the rows the preprocessor released (None: none yet) and record the originals."""
        if fed is None:
            self._learned(None, np.zeros(0))
            return
        X, labels, original = fed
        margins = self._learn(X, labels, np.arange(X.shape[0], dtype=np.int64))
        self._learned(margins[original], labels[original])

    def _learned(self, margins, labels):
        """Record the examples a call learned: ``last_margins_`` (f before each step, None:
        nothing learned) and ``last_y_`` (their labels, from ``classes_``)."""
        if margins is None:
            n_cols = self._coef.shape[1]
            margins = np.zeros((0,) if n_cols == 1 else (0, n_cols))
        self.last_margins_ = margins
        index = (labels > 0).astype(np.intp) if self.classes_.shape[0] == 2 else labels.astype(np.intp)
        self.last_y_ = self.classes_[index]

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """f(x) = Σ_j α_j k(sv_j, x) (+ b): (n,) float64 for binary models (positive side =
        ``classes_[1]``), (n, n_classes) float64 for multi-class models."""
        check_is_fitted(self, "classes_")
        X = self._pp_transform(self._validate_X(X, reset=False))
        out = np.empty((X.shape[0], self._coef.shape[1]), dtype=np.float64)
        row_buf = np.empty_like(self._row_buf)  # own scratch: concurrent predictions are safe
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        order = np.arange(X.shape[0], dtype=np.int64)
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            part = out[done : done + local_order.shape[0]]
            rbf_decision_batch(
                X_part,
                self._sv_t,
                self._sv_sq,
                self._coef,
                self._bias,
                self.n_support_vectors_,
                self.gamma_,
                float(self._reals[R_SCALE]),
                part,
                row_buf,
            )
            done += local_order.shape[0]
        return out[:, 0] if out.shape[1] == 1 else out

    def _pp_transform(self, X):
        """X scaled for prediction; raises :class:`WarmingUp` while the window is open."""
        if not self._pp.ready:
            raise WarmingUp(
                f"{type(self).__name__} is warming up: {self._pp.window_n} of {self._pp.warmup} examples "
                "received; predictions start when the warm-up window closes"
            )
        return self._pp.transform(X)

    def predict(self, X):
        """Predicted labels (n,) from ``classes_``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    # ------------------------------------------------------------------ statistics
    @property
    def n_support_vectors_(self):
        return int(self._counters[C_N_SV])

    @property
    def t_(self):
        """Learning steps taken, including the run guard's replayed examples (``n_replayed_``)."""
        return int(self._counters[C_STEPS])

    @property
    def n_replayed_(self):
        """Examples the run guard replayed (each one a learning step counted in ``t_``)."""
        return self._pp.n_replayed

    @property
    def n_seen_(self):
        """Examples received: learned (``t_`` − ``n_replayed_``) plus pending (``n_pending_``)."""
        return int(self._counters[C_STEPS]) - self._pp.n_replayed + self._pp.pending

    @property
    def n_merges_(self):
        return int(self._counters[C_MERGES])

    @property
    def n_violations_(self):
        return int(self._counters[C_VIOLATIONS])

    @property
    def n_maintenance_(self):
        return int(self._counters[C_MAINTENANCE])

    @property
    def weight_degradation_total_(self):
        return float(self._reals[R_WD_SUM])

    @property
    def maintenance_seconds_(self):
        """Wall time spent in budget maintenance (only measured with ``profile=True``); for
        projection it includes the O(B²) update of K⁻¹ when an SV is added."""
        return float(self._reals[R_MERGE_SECONDS])

    @property
    def support_vectors_(self):
        return self._sv_t[:, : self.n_support_vectors_].T.copy()

    @property
    def dual_coef_(self):
        """Effective coefficients α: (n_sv,) for binary, (n_sv, n_classes) for multi-class."""
        coef = self._coef[: self.n_support_vectors_] * self._reals[R_SCALE]
        return coef[:, 0] if coef.shape[1] == 1 else coef

    @property
    def intercept_(self):
        return self._bias.copy()

    def statistics(self):
        """Budget statistics (the BSGD paper's Table 6 quantities) as a JSON-able dict."""
        steps = max(self.t_, 1)
        maint = self.n_maintenance_
        return {
            "n_support_vectors": self.n_support_vectors_,
            "budget": int(self.budget),
            "steps": self.t_,
            "examples_seen": self.n_seen_,
            "violations": self.n_violations_,
            "maintenance_events": maint,
            "merges": self.n_merges_,
            "merging_frequency": maint / steps,
            "average_weight_degradation": self.weight_degradation_total_ / maint if maint else 0.0,
        }

    # ------------------------------------------------------------------ persistence
    def get_state(self):
        """Whole learner state as ``(arrays, meta)``; see :mod:`solvers.persistence`."""
        check_is_fitted(self, "classes_")
        n = self.n_support_vectors_
        arrays = {
            "classes": self.classes_.copy(),
            "sv_t": self._sv_t[:, :n].copy(),
            "sv_sq": self._sv_sq[:n].copy(),
            "coef": self._coef[:n].copy(),
            "bias": self._bias.copy(),
            "counters": self._counters.copy(),
            "reals": self._reals.copy(),
            "merge_diagnostics": self.merge_diagnostics_.copy(),
        }
        if self._k_inv.shape[0] > 1:
            arrays["k_inv"] = self._k_inv[:n, :n].copy()
        pp_arrays, pp_meta = self._pp.get_state()
        arrays.update(pp_arrays)
        meta = {
            "preprocessing": pp_meta,
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": self.get_params(),
            "n_features_in": self.n_features_in_,
            "lambda_eff": self.lambda_eff_,
            "rng_state": self.rng_.bit_generator.state,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild an estimator that continues exactly where :meth:`get_state` left off.

        Raises ValueError if the state's version or shapes do not fit."""
        version = meta.get("state_version")
        if version not in cls.STATE_VERSIONS:
            raise ValueError(f"unsupported {cls.__name__} state version {version}")
        params = dict(meta["params"])
        if version == 2:  # saved before scaling and the shuffle buffer existed: raw features
            params.update(scaling="none", warmup=0, shuffle_buffer=0, run_guard=False)
        if version == 3:  # saved before the run guard existed: it stays off
            params["run_guard"] = False
        est = cls(**params)
        est._init_state(meta["n_features_in"], arrays["classes"], 1)
        if version >= 3:
            est._pp = Preprocessor.from_state(
                arrays, meta["preprocessing"], est.scaling, est.n_features_in_, est.classes_.shape[0]
            )
        est.lambda_eff_ = float(meta["lambda_eff"])
        n = arrays["coef"].shape[0]
        if (
            n > est.budget
            or arrays["sv_t"].shape != (est.n_features_in_, n)
            or arrays["coef"].shape[1:] != est._coef.shape[1:]
        ):
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        est._sv_t[:, :n] = arrays["sv_t"]
        est._sv_sq[:n] = arrays["sv_sq"]
        est._coef[:n] = arrays["coef"]
        est._bias[:] = arrays["bias"]
        est._counters[:] = arrays["counters"]
        est._reals[:] = arrays["reals"]
        est.merge_diagnostics_[:] = arrays["merge_diagnostics"]
        if "k_inv" in arrays:
            est._k_inv[:n, :n] = arrays["k_inv"]
        est.rng_.bit_generator.state = meta["rng_state"]
        return est
